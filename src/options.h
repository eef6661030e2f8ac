/* hakmem options: one X-macro list gives the enum, the table, the parser and
 * the documentation line of every HAKMEM_* variable.  Values are read once at
 * start-up; a profile sets defaults and an explicitly set variable wins. */
#ifndef HAK_OPTIONS_H
#define HAK_OPTIONS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { HAK_PROFILE_SPEED = 0, HAK_PROFILE_BALANCED = 1, HAK_PROFILE_LEAN = 2 } hak_profile_t;
typedef enum { HAK_INVALID_ABORT = 0, HAK_INVALID_WARN = 1, HAK_INVALID_IGNORE = 2 } hak_invalid_mode_t;
typedef enum { HAK_DECOMMIT_OFF = 0, HAK_DECOMMIT_FREE = 1, HAK_DECOMMIT_DONTNEED = 2 } hak_decommit_t;
typedef enum { HAK_THP_NEVER = 0, HAK_THP_AUTO = 1, HAK_THP_ALWAYS = 2 } hak_thp_t;
typedef enum { HAK_PROF_OFF = 0, HAK_PROF_ON = 1, HAK_PROF_SAMPLE = 2 } hak_prof_mode_t;
/* Call-site strategies for freed large blocks (site.c). */
typedef enum {
  HAK_STRAT_CACHE = 0, HAK_STRAT_RELEASE = 1, HAK_STRAT_DECOMMIT = 2, HAK_STRAT_PREFAULT = 3, HAK_STRAT_POPULATE = 4,
  HAK_STRAT_COUNT = 5
} hak_strategy_t;

/* X(ID, name, kind, speed, balanced, lean, min, max, doc)
 * kind: BOOL, INT, SIZE (K/M/G suffixes), an enum word list, or PATH (the
 * value is 1 when set; the text is kept by _hak_option_text). */
#define HAK_OPTIONS(X) \
  X(PROFILE,      "HAKMEM_PROFILE",      ENUM_PROFILE, 0, 1, 2, 0, 2, \
    "defaults preset: speed | balanced | lean") \
  X(STATS,        "HAKMEM_STATS",        BOOL, 0, 0, 0, 0, 1, \
    "print the statistics report to stderr at exit") \
  X(STATS_FILE,   "HAKMEM_STATS_FILE",   PATH, 0, 0, 0, 0, 1, \
    "with HAKMEM_STATS: append the report to this file instead (%p = pid)") \
  X(VERBOSE,      "HAKMEM_VERBOSE",      BOOL, 0, 0, 0, 0, 1, \
    "print the effective options at start-up") \
  X(INVALID_FREE, "HAKMEM_INVALID_FREE", ENUM_INVALID, 0, 0, 0, 0, 2, \
    "on a detected invalid or double free: abort | warn | ignore") \
  X(SEG_CACHE,    "HAKMEM_SEG_CACHE",    INT, 16, 8, 0, 0, 1024, \
    "empty 4 MiB SuperSlabs kept mapped for reuse (process-wide)") \
  X(DECOMMIT,     "HAKMEM_DECOMMIT",     ENUM_DECOMMIT, 0, 2, 2, 0, 2, \
    "how empty memory goes back to the OS: off | free (MADV_FREE) | dontneed (MADV_DONTNEED)") \
  X(DECOMMIT_DELAY_MS, "HAKMEM_DECOMMIT_DELAY_MS", INT, 0, 2000, 0, 0, 86400000, \
    "empty memory is decommitted once it has been empty this long") \
  X(MEMORY_LIMIT, "HAKMEM_MEMORY_LIMIT", SIZE, 0, 0, 0, 0, (long long)1 << 50, \
    "resident bytes to stay under: near it every empty and cached page is given back (0: the container's limit, if any)") \
  X(LEAN_TARGET_MB, "HAKMEM_LEAN_TARGET_MB", INT, 4096, 64, 0, 0, 1048576, \
    "empty memory kept resident; above it, empty memory is released at once") \
  X(BACKGROUND,   "HAKMEM_BACKGROUND",   BOOL, 0, 1, 1, 0, 1, \
    "a background thread gives empty memory back while the program is idle (started when there is some)") \
  X(PREWARM,      "HAKMEM_PREWARM",      SIZE, 8 << 20, 0, 0, 0, (long long)1 << 40, \
    "bytes of SuperSlabs mapped and faulted in at start-up") \
  X(BIGCACHE_MAX_MB, "HAKMEM_BIGCACHE_MAX_MB", INT, 512, 128, 4, 0, 1048576, \
    "bytes of freed large blocks kept for reuse (MiB)") \
  X(BIGCACHE_AGE_MS, "HAKMEM_BIGCACHE_AGE_MS", INT, 0, 5000, 250, 0, 86400000, \
    "a cached large block older than this is released (0 = no age limit)") \
  X(THP,          "HAKMEM_THP",          ENUM_THP, 1, 1, 0, 0, 2, \
    "transparent huge pages: never | auto (big heaps, whole 2 MiB of large blocks) | always") \
  X(THP_HEAP_MB,  "HAKMEM_THP_HEAP_MB",  INT, 32, 32, 32, 0, 1048576, \
    "auto: a heap's new segments get huge pages once it holds this many MiB of segments") \
  X(LEARN,        "HAKMEM_LEARN",        BOOL, 0, 0, 0, 0, 1, \
    "learn per call site what to do with freed large blocks") \
  X(LEARN_LOG,    "HAKMEM_LEARN_LOG",    BOOL, 0, 0, 0, 0, 1, \
    "print each change of a site's strategy") \
  X(LEARN_SEED,   "HAKMEM_LEARN_SEED",   INT, 1, 1, 1, 0, LLONG_MAX, \
    "seed of the sites' exploration (runs with one seed make the same choices)") \
  X(LEARN_MIN_EVENTS, "HAKMEM_LEARN_MIN_EVENTS", INT, 8, 8, 8, 0, 1000000, \
    "episodes a site needs before it leaves the default strategy") \
  X(LEARN_BYTE_COST, "HAKMEM_LEARN_BYTE_COST", INT, 2000, 200000, 20000000, 0, LLONG_MAX, \
    "learning: cost of keeping 1 MiB resident for 1 s, in ns of allocator time") \
  X(LEARN_FORCE,  "HAKMEM_LEARN_FORCE",  ENUM_STRATEGY, 0, 0, 0, 0, 5, \
    "one strategy for every site, no learning: none | cache | release | decommit | prefault | populate") \
  X(LEND,         "HAKMEM_LEND",         BOOL, 0, !HAK_SECURE, !HAK_SECURE, 0, 1, \
    "after scattered frees, a class about to take new pages takes holes of a slightly larger class first (default build)") \
  X(SCAVENGE,     "HAKMEM_SCAVENGE",     BOOL, 0, !HAK_SECURE, !HAK_SECURE, 0, 1, \
    "give back the free 4 KiB pages inside sparse slabs (not with HAKMEM_MESH=1; not in the secure build)") \
  X(PARK,         "HAKMEM_PARK",         BOOL, 0, 1, 1, 0, 1, \
    "a thread asleep in the kernel gives the slabs of its heap to the threads that run (x86-64)") \
  X(MESH,         "HAKMEM_MESH",         BOOL, 0, 0, 0, 0, 1, \
    "compact sparse small-block slabs by meshing them onto shared pages (memfd; see docs/DESIGN.md)") \
  X(SECURE_QUARANTINE, "HAKMEM_SECURE_QUARANTINE", SIZE, 256 << 10, 256 << 10, 256 << 10, 0, (long long)1 << 30, \
    "secure build: bytes of freed small blocks each thread holds back from reuse (0 = reuse at once)") \
  X(SECURE_FILL,  "HAKMEM_SECURE_FILL",  INT, 0, 0, 0, 0, 255, \
    "secure build: the byte freed memory is filled with (checked when it is reused)") \
  X(SECURE_GUARD_MEDIUM, "HAKMEM_SECURE_GUARD_MEDIUM", SIZE, 0, 0, 0, 0, 128 << 10, \
    "secure build: requests of at least this size get their own mapping ending at a guard page (0 = off)") \
  X(SECURE_GUARD_PAGES, "HAKMEM_SECURE_GUARD_PAGES", BOOL, 1, 1, 1, 0, 1, \
    "secure build: guard pages in every SuperSlab (0 = none: faster, huge pages back the segments)") \
  X(SECURE_SHUFFLE, "HAKMEM_SECURE_SHUFFLE", BOOL, 1, 1, 1, 0, 1, \
    "secure build: carve new blocks in random order (0 = in address order: faster where a program walks its objects)") \
  X(SECURE_AVX2,  "HAKMEM_SECURE_AVX2",  BOOL, 1, 1, 1, 0, 1, \
    "secure build: check freed blocks' fill with AVX2 where the CPU has it (0 = 16-byte vectors)") \
  X(SECURE_ARRAY_PAIRS, "HAKMEM_SECURE_ARRAY_PAIRS", BOOL, 1, 1, 1, 0, 1, \
    "secure build: new[] and delete[] must pair (0 = a block from new[] may be freed by delete or free, and delete[] frees any block)") \
  X(PROF,         "HAKMEM_PROF",         ENUM_PROF, 0, 2, 0, 0, 2, \
    "sampled heap profiling, in gperftools' format (docs/PROFILING.md): off | on (a profile and the leak report at exit) | sample (profiles only on request: the API, HAKMEM_PROF_SIGNAL)") \
  X(PROF_RATE,    "HAKMEM_PROF_RATE",    SIZE, 2 << 20, 2 << 20, 2 << 20, 1, (long long)1 << 40, \
    "heap profiling: mean bytes allocated between two samples (intervals drawn at random)") \
  X(PROF_PREFIX,  "HAKMEM_PROF_PREFIX",  PATH, 0, 0, 0, 0, 1, \
    "heap profiling: profiles go to PREFIX.PID.N.heap, the leak report to PREFIX.PID.leaks.heap (default: hakmem)") \
  X(PROF_SIGNAL,  "HAKMEM_PROF_SIGNAL",  INT, 0, 0, 0, 0, 64, \
    "heap profiling: a profile is written when the process gets this signal (a number, 0 = none)") \
  X(PROF_PEAK,    "HAKMEM_PROF_PEAK",    BOOL, 0, 0, 0, 0, 1, \
    "heap profiling: write a profile each time the sampled live bytes pass their peak by an eighth") \
  X(PROF_UNWIND,  "HAKMEM_PROF_UNWIND",  ENUM_UNWIND, 0, 0, 0, 0, 3, \
    "heap profiling: how stacks are walked: auto (libgcc's unwinder, else libunwind, else frame pointers) | libunwind | fp | libgcc") \
  X(GUARD,        "HAKMEM_GUARD",        INT, 50000, 50000, 50000, 0, LLONG_MAX, \
    "guarded allocations: about one allocation in N of up to a page gets a page of its own between inaccessible pages; errors are reported with their stacks (1 = every allocation the pool holds; 0 = off; default build)") \
  X(GUARD_PER_SEC, "HAKMEM_GUARD_PER_SEC", INT, 100, 100, 100, 0, 1000000, \
    "guarded allocations: at most this many a second in the process, which bounds their cost (0 = no bound)") \
  X(GUARD_ABORT,  "HAKMEM_GUARD_ABORT",  BOOL, 0, 0, 0, 0, 1, \
    "guarded allocations: abort after a report (0 = continue: the access proceeds and the slot is retired)") \
  X(FAIL_MMAP_AFTER, "HAKMEM_FAIL_MMAP_AFTER", INT, 0, 0, 0, 0, LLONG_MAX, \
    "testing: after this many mmap calls, fail the next ones with ENOMEM (0 = off)") \
  X(FAIL_MMAP_COUNT, "HAKMEM_FAIL_MMAP_COUNT", INT, 0, 0, 0, 0, LLONG_MAX, \
    "testing: how many mmap calls fail once failing started (0 = all)")

typedef enum {
#define HAK_X_ENUM(id, ...) HAK_OPT_##id,
  HAK_OPTIONS(HAK_X_ENUM)
#undef HAK_X_ENUM
  HAK_OPT_COUNT
} hak_option_id_t;

extern long long _hak_options[HAK_OPT_COUNT];
#define hak_opt(id) (_hak_options[HAK_OPT_##id])

void _hak_options_init(void);     /* idempotent; reads environ */
void _hak_options_print(void);
long long _hak_option_by_name(const char* name);
const char* _hak_option_text(hak_option_id_t id);   /* PATH options: the value, or NULL */
const char* _hak_env_find(const char* name);          /* an environment variable's value, or NULL (no getenv, no allocation) */
const char* _hak_profile_name(long long p);   /* the profile's name, "?" out of range */
const char* _hak_strategy_name(int s);        /* a large-block strategy's name (HAK_STRAT_*) */
int _hak_option_find(const char* name);   /* by name without HAKMEM_, any case; -1: none */
bool _hak_option_set(hak_option_id_t id, long long v);   /* at run time (mallopt); false: the environment set it */

#endif
