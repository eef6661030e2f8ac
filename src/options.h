/* hakmem options: one X-macro list gives the enum, the table, the parser and
 * the documentation line of every HAKMEM_* variable.  Values are read once at
 * start-up; a profile sets defaults and an explicitly set variable wins. */
#ifndef HAK_OPTIONS_H
#define HAK_OPTIONS_H

typedef enum { HAK_PROFILE_SPEED = 0, HAK_PROFILE_BALANCED = 1, HAK_PROFILE_LEAN = 2 } hak_profile_t;
typedef enum { HAK_INVALID_ABORT = 0, HAK_INVALID_WARN = 1, HAK_INVALID_IGNORE = 2 } hak_invalid_mode_t;

/* X(ID, name, kind, speed, balanced, lean, min, max, doc)
 * kind: BOOL, INT, SIZE (K/M/G suffixes), or an enum word list. */
#define HAK_OPTIONS(X) \
  X(PROFILE,      "HAKMEM_PROFILE",      ENUM_PROFILE, 0, 1, 2, 0, 2, \
    "defaults preset: speed | balanced | lean") \
  X(STATS,        "HAKMEM_STATS",        BOOL, 0, 0, 0, 0, 1, \
    "print the statistics report to stderr at exit") \
  X(VERBOSE,      "HAKMEM_VERBOSE",      BOOL, 0, 0, 0, 0, 1, \
    "print the effective options at start-up") \
  X(INVALID_FREE, "HAKMEM_INVALID_FREE", ENUM_INVALID, 0, 0, 0, 0, 2, \
    "on a detected invalid or double free: abort | warn | ignore") \
  X(SEG_CACHE,    "HAKMEM_SEG_CACHE",    INT, 16, 4, 0, 0, 1024, \
    "empty 4 MiB SuperSlabs kept mapped for reuse (process-wide)")

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

#endif
