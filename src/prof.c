/* Sampled heap profiling (HAKMEM_PROF=1): the call stacks that hold memory,
 * written in gperftools' heap-profile format so that google-pprof reads
 * them (docs/DESIGN.md, "The sampling point and heap profiling").  The
 * samples are the allocations at which malloc's countdown runs out
 * (sample.c: one subtraction and a branch on the fast path, profiling on or
 * off):
 *  - while profiling is on, each heap's countdown is drawn here, from an
 *    exponential distribution of mean HAKMEM_PROF_RATE requested bytes, as
 *    tcmalloc and jemalloc draw theirs;
 *  - a sampled class allocation is served where its free always goes out of
 *    line and comes here, exactly once: up to a page in a page slot
 *    (slots.c), above as a large block (large.c, seg->prof); a sampled large
 *    block is one already.
 * The profiler's own memory comes from os.c mappings, never from malloc;
 * writing a profile uses a static buffer and write(2). */
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

_Atomic(int) _hak_prof_on;
static _Atomic(size_t) prof_rate = 2 << 20;
static _Atomic(int) prof_started;     /* the tables, prefix and unwinder are set up */
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
/* inside the profiler (unwinding, recording, writing): the mallocs that
 * libunwind or dlopen make are served, but not sampled */
static __thread bool prof_busy __attribute__((tls_model("initial-exec")));

#define PROF_DEPTH HAK_UNWIND_MAX   /* frames kept per stack (unwind.c walks 16 more: the allocator's own are cut) */

/* ---------------------------------------------------------------- memory */
/* A bump arena of os.c mappings for stack buckets (never freed: one per
 * distinct stack). */
static uint8_t* arena_cur;
static size_t arena_left;
static void* arena_alloc(size_t n) {
  n = hak_align_up(n, 8);
  if (n > arena_left) {
    size_t chunk = n > ((size_t)1 << 20) ? hak_align_up(n, HAK_OS_PAGE) : (size_t)1 << 20;
    uint8_t* p = _hak_os_map(chunk, NULL);
    if (p == NULL) return NULL;
    arena_cur = p;
    arena_left = chunk;
  }
  void* p = arena_cur;
  arena_cur += n;
  arena_left -= n;
  return p;
}

/* ---------------------------------------------------------------- stacks */
/* A bucket is a stack and a size band: google-pprof scales each line of a
 * profile by the average size of its samples (heap_v2), which is right only
 * for samples of about one size; a function that allocates both 100-byte
 * and 200 KiB blocks gets a line for each band, which the tool adds up by
 * stack after scaling (one line for both underestimated such a function's
 * small blocks several times over at HAKMEM_PROF_RATE=32K).
 *
 * The stack is kept as the difference of each return address from the one
 * before it, zigzag-encoded in 7-bit groups: frames of one module lie close
 * together, so a frame takes about 3 bytes instead of 8 (espresso: 972
 * distinct stacks of 15 frames on average in 1,483 buckets, 44 bytes a stack
 * against 121; the buckets held 284 KiB, a tenth of its peak RSS). */
typedef struct bucket_s {
  struct bucket_s* next;     /* hash chain */
  int64_t live_b;            /* sampled bytes live now */
  int64_t tot_n, tot_b;      /* sampled blocks ever */
  uint32_t hash;
  int32_t live_n;            /* sampled blocks live now */
  uint16_t band;             /* size band: the class, or (large) a half power of two */
  uint16_t len;              /* bytes of enc */
  uint8_t enc[];
} bucket_t;

#define STACK_ENC_MAX (PROF_DEPTH * 10)

static uint32_t stack_encode(const uintptr_t* pcs, uint32_t n, uint8_t* out) {
  uint32_t len = 0;
  uintptr_t prev = 0;
  for (uint32_t i = 0; i < n; i++) {
    uintptr_t d = pcs[i] - prev;
    uintptr_t z = (d << 1) ^ (uintptr_t)((intptr_t)d >> 63);
    prev = pcs[i];
    while (z >= 0x80) {
      out[len++] = (uint8_t)(z | 0x80);
      z >>= 7;
    }
    out[len++] = (uint8_t)z;
  }
  return len;
}

/* The next return address of an encoded stack; *pos moves past it. */
static uintptr_t stack_next(const uint8_t* enc, uint32_t* pos, uintptr_t prev) {
  uintptr_t z = 0;
  unsigned shift = 0;
  uint8_t c;
  do {
    c = enc[(*pos)++];
    z |= (uintptr_t)(c & 0x7f) << shift;
    shift += 7;
  } while (c & 0x80);
  return prev + ((z >> 1) ^ (uintptr_t)-(intptr_t)(z & 1));
}

/* The chains start at one page and double when the buckets outnumber them:
 * every chain a new stack lands in is a page touched at random, and a
 * profiled process that has few stacks should not pay for many. */
#define BUCKET_HASH_MIN ((size_t)HAK_OS_PAGE / sizeof(bucket_t*))
static bucket_t** bucket_hash;   /* bucket_hash_n chains (os.c mapping) */
static size_t bucket_hash_n, bucket_n;

#define FOR_EACH_BUCKET(b) \
  for (size_t b##_i = 0; b##_i < bucket_hash_n; b##_i++) \
    for (bucket_t* b = bucket_hash[b##_i]; b != NULL; b = b->next)

static bool bucket_hash_grow(void) {
  size_t n = bucket_hash_n ? bucket_hash_n * 2 : BUCKET_HASH_MIN;
  bucket_t** t = _hak_os_map(n * sizeof *t, NULL);
  if (t == NULL) return false;
  for (size_t i = 0; i < bucket_hash_n; i++)
    for (bucket_t *b = bucket_hash[i], *next; b != NULL; b = next) {
      next = b->next;
      bucket_t** chain = &t[b->hash & (n - 1)];
      b->next = *chain;
      *chain = b;
    }
  if (bucket_hash != NULL) _hak_os_unmap(bucket_hash, bucket_hash_n * sizeof *bucket_hash);
  bucket_hash = t;
  bucket_hash_n = n;
  return true;
}

static uint32_t stack_hash(const uint8_t* enc, uint32_t len, uint32_t band) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ len ^ ((uint64_t)band << 32);
  uint32_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, enc + i, 8);
    h ^= w;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  for (; i < len; i++) {
    h ^= enc[i];
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return (uint32_t)h;
}

static uint32_t size_band(size_t size) {
  if (size <= HAK_MEDIUM_MAX) return (uint32_t)hak_class_of(size ? size : 1);
  unsigned b = 63u - (unsigned)__builtin_clzl(size);
  return HAK_NCLASSES + 2 * b + (uint32_t)((size >> (b - 1)) & 1);
}

static bucket_t* bucket_get(const uintptr_t* pcs, uint32_t n, size_t size) {
  uint8_t enc[STACK_ENC_MAX];
  uint32_t len = stack_encode(pcs, n, enc);
  uint32_t band = size_band(size);
  uint32_t h = stack_hash(enc, len, band);
  bucket_t** chain = &bucket_hash[h & (bucket_hash_n - 1)];
  for (bucket_t* b = *chain; b != NULL; b = b->next)
    if (b->hash == h && b->band == band && b->len == len && memcmp(b->enc, enc, len) == 0) return b;
  if (bucket_n >= bucket_hash_n && bucket_hash_grow()) chain = &bucket_hash[h & (bucket_hash_n - 1)];
  bucket_t* b = arena_alloc(offsetof(bucket_t, enc) + len);
  if (b == NULL) return NULL;
  bucket_n++;
  b->hash = h;
  b->band = (uint16_t)band;
  b->len = (uint16_t)len;
  memcpy(b->enc, enc, len);
  b->next = *chain;
  *chain = b;
  return b;
}

/* ---------------------------------------------------------------- live samples */
/* Open addressing by block address (linear probing, deletion by backward
 * shift), grown by doubling into a new os.c mapping. */
typedef struct {
  uintptr_t addr;   /* 0: empty */
  size_t size;
  bucket_t* b;
} sample_t;
static sample_t* samples;
static size_t samples_cap, samples_n;
static int64_t live_bytes, peak_next;
/* What a sample stands for, roughly (size / (1 - exp(-size / rate)) without
 * exp): the live-byte estimate whose peaks HAKMEM_PROF_PEAK follows. */
static int64_t live_est;
static int64_t sample_weight(size_t size) {
  size_t r = hak_load_relaxed(&prof_rate);
  return (int64_t)(size >= r ? size : r + size / 2);
}

static size_t slot_of(uintptr_t a, size_t cap) { return (size_t)((a >> 4) * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1); }

static bool samples_grow(void) {
  size_t cap = samples_cap ? samples_cap * 2 : 256;   /* (6 KiB first: a few live samples touch few pages) */
  sample_t* t = _hak_os_map(cap * sizeof *t, NULL);
  if (t == NULL) return false;
  for (size_t i = 0; i < samples_cap; i++) {
    if (samples[i].addr == 0) continue;
    size_t j = slot_of(samples[i].addr, cap);
    while (t[j].addr != 0) j = (j + 1) & (cap - 1);
    t[j] = samples[i];
  }
  if (samples != NULL) _hak_os_unmap(samples, samples_cap * sizeof *samples);
  samples = t;
  samples_cap = cap;
  return true;
}

static bool sample_put(uintptr_t a, size_t size, bucket_t* b) {
  if ((samples_n + 1) * 2 > samples_cap && !samples_grow()) return false;
  size_t j = slot_of(a, samples_cap);
  while (samples[j].addr != 0) j = (j + 1) & (samples_cap - 1);
  samples[j] = (sample_t){a, size, b};
  samples_n++;
  return true;
}

static sample_t* sample_find(uintptr_t a) {
  if (samples_cap == 0) return NULL;
  for (size_t j = slot_of(a, samples_cap);; j = (j + 1) & (samples_cap - 1)) {
    if (samples[j].addr == a) return &samples[j];
    if (samples[j].addr == 0) return NULL;
  }
}

static void sample_remove(sample_t* e) {
  size_t i = (size_t)(e - samples), mask = samples_cap - 1;
  samples[i].addr = 0;
  samples_n--;
  /* backward shift: move up every entry of the run that could sit in the hole */
  for (size_t j = (i + 1) & mask; samples[j].addr != 0; j = (j + 1) & mask) {
    size_t home = slot_of(samples[j].addr, samples_cap);
    if (((j - home) & mask) >= ((j - i) & mask)) {
      samples[i] = samples[j];
      samples[j].addr = 0;
      i = j;
    }
  }
}

hak_warm bool _hak_prof_busy(void) { return prof_busy; }

/* ---------------------------------------------------------------- recording */
hak_bss_apart static char prof_prefix[4096];
static _Atomic(int) dump_pending;
static _Atomic(uint64_t) prof_sampled;
static int dump_locked(const char* path, bool leaks);
static void dump_next_locked(void);
static void prof_start(uintptr_t site);

static void prof_unlock(void) {
  hak_unlock(&prof_lock);
  /* a signal that found the lock taken left its dump to whoever held it */
  if (hak_load_relaxed(&dump_pending) && atomic_exchange(&dump_pending, 0)) {
    hak_lock(&prof_lock);
    dump_next_locked();
    hak_unlock(&prof_lock);
  }
}

/* A sample and its stack, from the allocation's call site on (the site is
 * the return address the public entry point saw; _hak_unwind).  The
 * callers walk it themselves, so that the walk steps through as few of the
 * allocator's frames as it can (each costs libgcc's unwinder about 1,700
 * instructions). */
static void record(void* p, size_t size, const uintptr_t* pcs, int n) {
  hak_lock(&prof_lock);
  bucket_t* b = bucket_get(pcs, (uint32_t)n, size);
  if (b != NULL && sample_put((uintptr_t)p, size, b)) {
    b->live_n++;
    b->live_b += (int64_t)size;
    b->tot_n++;
    b->tot_b += (int64_t)size;
    live_bytes += (int64_t)size;
    live_est += sample_weight(size);
    atomic_fetch_add_explicit(&prof_sampled, 1, memory_order_relaxed);
    /* a new peak: an eighth above the last one written, and 8 samples' worth */
    if (hak_opt(PROF_PEAK) && live_est >= peak_next) {
      peak_next = live_est + live_est / 8 + 8 * (int64_t)hak_load_relaxed(&prof_rate);
      dump_next_locked();
    }
  } else {
    hak_segment_of(p)->prof = 0;   /* out of memory for the tables: not a sample after all */
  }
  prof_unlock();
}

/* A sample is being taken at `site`: the profiler busy (its own mallocs
 * are not sampled) and set up (the first sample sets it up); false, not
 * busy, when there is no memory for the tables. */
static bool prof_enter(uintptr_t site) {
  prof_busy = true;
  prof_start(site);
  if (hak_likely(hak_load_acquire(&prof_started))) return true;
  prof_busy = false;
  return false;
}

/* A sampled class allocation, of the class's size (what
 * malloc_usable_size says of it, and what the program may write), where its
 * free is seen: page slots (slots.c: page aligned), or for an aligned
 * request whose class's blocks are aligned above a page, a large block
 * (large.c, seg->prof), aligned as every block of the class is (to the
 * lowest set bit of its size: slabs start on 64 KiB boundaries).
 * The secure build's are large blocks (its checks know those).  The sample
 * is the request's size: the countdown counts requested bytes. */
void* _hak_prof_sample_class(size_t cls, size_t size, bool any_class, uintptr_t site) {
  uint32_t bsize = _hak_class_size[cls];
  if (!prof_enter(site)) return NULL;
  uintptr_t pcs[PROF_DEPTH];
  int n = _hak_unwind(pcs, PROF_DEPTH, site);
  void* p;
  if (!HAK_SECURE && (any_class || (bsize & -bsize) <= HAK_OS_PAGE)) {
    p = _hak_slots_alloc(bsize);
  } else {
    p = _hak_large_alloc(bsize, any_class ? 16 : (size_t)(bsize & -bsize), false, site);
    if (p != NULL) hak_segment_of(p)->prof = 1;
  }
  if (p != NULL) record(p, size, pcs, n);
  prof_busy = false;
  return p;
}

/* A sampled large block (large.c, after it is made). */
void _hak_prof_sample_large(hak_segment_t* seg, void* p, size_t size, uintptr_t site) {
  if (!prof_enter(site)) return;
  seg->prof = 1;
  uintptr_t pcs[PROF_DEPTH];
  int n = _hak_unwind(pcs, PROF_DEPTH, site);
  record(p, size, pcs, n);
  prof_busy = false;
}

void _hak_prof_free(void* p) {
  hak_lock(&prof_lock);
  sample_t* e = sample_find((uintptr_t)p);
  if (e != NULL) {
    e->b->live_n--;
    e->b->live_b -= (int64_t)e->size;
    live_bytes -= (int64_t)e->size;
    live_est -= sample_weight(e->size);
    sample_remove(e);
  }
  prof_unlock();
}

void _hak_prof_moved(void* p, void* q, size_t size) {
  hak_lock(&prof_lock);
  sample_t* e = sample_find((uintptr_t)p);
  if (e != NULL) {
    bucket_t* b = e->b;
    int64_t d = (int64_t)size - (int64_t)e->size;
    b->live_b += d;
    b->tot_b += d > 0 ? d : 0;
    live_bytes += d;
    live_est += sample_weight(size) - sample_weight(e->size);
    if (q == p) {
      e->size = size;
    } else {
      sample_remove(e);
      if (!sample_put((uintptr_t)q, size, b)) {
        b->live_n--;
        b->live_b -= (int64_t)size;
        live_bytes -= (int64_t)size;
        live_est -= sample_weight(size);
        hak_segment_of(q)->prof = 0;
      }
    }
  }
  prof_unlock();
}

/* ---------------------------------------------------------------- writing */
/* Formatted by hand into a static buffer (under the lock) and written with
 * write(2) (os.c): no stdio, no allocation, callable from a signal handler. */
hak_bss_apart static char out_buf[1 << 14];   /* (written out when full: a larger one only costs resident pages at exit) */
static size_t out_len;
static int out_fd = -1;
static bool out_err;

static void out_flush(void) {
  if (!out_err && !_hak_os_write_all(out_fd, out_buf, out_len)) out_err = true;
  out_len = 0;
}
static void out_mem(const char* s, size_t n) {
  while (n > 0) {
    if (out_len == sizeof out_buf) out_flush();
    size_t k = sizeof out_buf - out_len < n ? sizeof out_buf - out_len : n;
    memcpy(out_buf + out_len, s, k);
    out_len += k;
    s += k;
    n -= k;
  }
}
static void out_str(const char* s) { out_mem(s, strlen(s)); }
static void out_num(uint64_t v, unsigned base, unsigned width) {
  char t[24];
  size_t i = sizeof t;
  do {
    t[--i] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v != 0);
  while (sizeof t - i < width) t[--i] = ' ';
  out_mem(t + i, sizeof t - i);
}
static void out_pair(int64_t n, int64_t b) {
  out_num(n > 0 ? (uint64_t)n : 0, 10, 6);
  out_str(": ");
  out_num(b > 0 ? (uint64_t)b : 0, 10, 8);
}

/* /proc/self/maps, copied as it is: google-pprof finds each address's
 * object (and its load offset) there. */
static void out_maps(void) {
  int fd = _hak_os_open_read("/proc/self/maps");
  if (fd < 0) return;
  for (;;) {
    if (out_len == sizeof out_buf) out_flush();
    ssize_t r = _hak_os_read(fd, out_buf + out_len, sizeof out_buf - out_len);
    if (r <= 0) break;
    out_len += (size_t)r;
  }
  _hak_os_close(fd);
}

/* One profile: the header with the totals and the sampling rate (heap_v2:
 * google-pprof scales each stack's figures by 1 / (1 - exp(-avg / rate))),
 * a line per stack `live_count: live_bytes [total_count: total_bytes] @
 * pc ...`, then the process's mappings.  The leak report lists only the
 * stacks that still hold sampled blocks. */
static int dump_locked(const char* path, bool leaks) {
  int fd = _hak_os_open_write(path, O_TRUNC);
  if (fd < 0) return -1;
  out_fd = fd;
  out_len = 0;
  out_err = false;
  int64_t ln = 0, lb = 0, tn = 0, tb = 0;
  FOR_EACH_BUCKET(b) {
    if (leaks && b->live_n <= 0) continue;
    ln += b->live_n, lb += b->live_b, tn += b->tot_n, tb += b->tot_b;
  }
  out_str("heap profile: ");
  out_pair(ln, lb);
  out_str(" [");
  out_pair(tn, tb);
  out_str("] @ heap_v2/");
  out_num(hak_load_relaxed(&prof_rate), 10, 0);
  out_str("\n");
  FOR_EACH_BUCKET(b) {
    if (b->live_n <= 0 && (leaks || b->tot_n <= 0)) continue;
    out_pair(b->live_n, b->live_b);
    out_str(" [");
    out_pair(b->tot_n, b->tot_b);
    out_str("] @");
    uintptr_t pc = 0;
    for (uint32_t pos = 0; pos < b->len;) {
      /* return addresses; google-pprof takes one from every one but the
       * first, so the first is given as the call itself */
      bool first = pos == 0;
      pc = stack_next(b->enc, &pos, pc);
      out_str(" 0x");
      out_num(pc - first, 16, 0);
    }
    out_str("\n");
  }
  out_str("\nMAPPED_LIBRARIES:\n");
  out_maps();
  out_flush();
  bool err = out_err;
  if (!_hak_os_close(fd)) err = true;
  out_fd = -1;
  if (err) {
    errno = EIO;
    return -1;
  }
  return 0;
}

/* PREFIX.PID.N.heap, N counting from 0 in each process; a file that exists
 * (an earlier image of this process id, before an exec) is not
 * overwritten: the next N is taken. */
static unsigned dump_seq;
hak_bss_apart static char name_buf[4096 + 64];
static size_t name_base(void) {   /* "PREFIX.PID." into name_buf; its length */
  size_t n = strlen(prof_prefix);
  memcpy(name_buf, prof_prefix, n);
  name_buf[n++] = '.';
  char t[24];
  size_t i = sizeof t;
  unsigned long pid = (unsigned long)getpid();
  do t[--i] = (char)('0' + pid % 10);
  while ((pid /= 10) != 0);
  memcpy(name_buf + n, t + i, sizeof t - i);
  n += sizeof t - i;
  name_buf[n++] = '.';
  return n;
}
static void dump_next_locked(void) {
  size_t base = name_base();
  for (int tries = 0; tries < 100000; tries++) {
    size_t n = base;
    char t[12];
    size_t i = sizeof t;
    unsigned v = dump_seq++;
    do t[--i] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    memcpy(name_buf + n, t + i, sizeof t - i);
    n += sizeof t - i;
    memcpy(name_buf + n, ".heap", 6);
    int fd = _hak_os_open_write(name_buf, O_EXCL);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return;
    _hak_os_close(fd);
    dump_locked(name_buf, false);
    return;
  }
}

static void on_signal(int sig) {
  (void)sig;
  int saved = errno;
  if (!prof_busy && hak_trylock(&prof_lock) == 0) {
    bool was = prof_busy;
    prof_busy = true;
    dump_next_locked();
    prof_busy = was;
    hak_unlock(&prof_lock);
  } else {
    hak_store_relaxed(&dump_pending, 1);   /* the lock's holder writes it (prof_unlock) */
  }
  errno = saved;
}

/* ---------------------------------------------------------------- control */
/* The profiles' names and the dump signal's handler, from the start when
 * profiling is on (the signal must find its handler before the first
 * sample: its default action ends the program), else when it is started
 * at run time. */
static _Atomic(int) prof_named;   /* the prefix is set, the signal handled */
hak_warm static void prof_name_setup(void) {
  if (atomic_exchange(&prof_named, 1) != 0) return;
  /* a relative prefix names the directory the program started in, not
   * the one it is in when it exits */
  const char* pre = _hak_option_text(HAK_OPT_PROF_PREFIX);
  if (pre == NULL || *pre == 0) pre = "hakmem";
  size_t n = 0;
  if (pre[0] != '/' && getcwd(prof_prefix, sizeof prof_prefix - 2) != NULL) {
    n = strlen(prof_prefix);
    prof_prefix[n++] = '/';
  }
  size_t m = strlen(pre);
  if (n + m >= sizeof prof_prefix) n = 0, m = m < sizeof prof_prefix - 1 ? m : sizeof prof_prefix - 1;
  memcpy(prof_prefix + n, pre, m);
  prof_prefix[n + m] = 0;
  int sig = (int)hak_opt(PROF_SIGNAL);
  if (sig > 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
  }
}

/* The tables and the unwinder, at the first sample (`site`: its call site)
 * or when a profile is asked for (0).  Nothing is held while the unwinder
 * loads: a thread inside dlopen holds the loader's lock and may be freeing
 * a sample (prof_lock).  The caller is busy (prof_busy): the mallocs made
 * meanwhile are not sampled. */
static void prof_start(uintptr_t site) {
  if (hak_load_acquire(&prof_started)) return;
  /* the fork handlers now, whatever the threads: a child numbers its own
   * profiles from 0 (_hak_prof_fork_child), and the dump signal's handler
   * must never be the one that registers them (internal.h, hak_lock) */
  _hak_os_fork_register();
  prof_name_setup();
  _hak_unwind_prepare();
  _hak_unwind_load(site);
  hak_lock(&prof_lock);
  if (!hak_load_relaxed(&prof_started)) {
    if (bucket_hash == NULL) bucket_hash_grow();
    if (bucket_hash != NULL) hak_store_release(&prof_started, 1);
  }
  hak_unlock(&prof_lock);
}

/* HAKMEM_PROF=on: everything now (asked for: its stacks are whole from the
 * first sample).  sample (the balanced default): the countdowns sample from
 * the start, and the first sample sets the rest up (a program that
 * allocates less than a sample's worth loads nothing). */
hak_warm void _hak_prof_init(void) {
  hak_store_relaxed(&prof_rate, (size_t)hak_opt(PROF_RATE));
  long long mode = hak_opt(PROF);
  if (mode == HAK_PROF_OFF) return;
  prof_name_setup();
  _hak_unwind_prepare();
  if (mode == HAK_PROF_ON) {
    _hak_prof_set_active(true);
  } else {
    hak_store_relaxed(&_hak_prof_on, 1);
    _hak_sample_soon();
  }
}

void _hak_prof_set_active(bool on) {
  if (on) {
    bool was = prof_busy;
    prof_busy = true;
    prof_start(0);
    prof_busy = was;
    if (!hak_load_acquire(&prof_started)) return;   /* no memory for the tables */
  }
  /* each heap's countdown runs on: a heap counting to its idle reload
   * draws its first interval within that reload, the caller's at once
   * (sample.c) */
  hak_store_relaxed(&_hak_prof_on, on ? 1 : 0);
  if (on) _hak_sample_soon();
}
bool _hak_prof_active(void) { return hak_load_relaxed(&_hak_prof_on) == 1; }
size_t _hak_prof_rate(void) { return hak_load_relaxed(&prof_rate); }
void _hak_prof_set_rate(size_t bytes) { hak_store_relaxed(&prof_rate, bytes ? bytes : 1); }

int _hak_prof_dump(const char* path) {
  bool was = prof_busy;
  prof_busy = true;
  if (hak_load_relaxed(&_hak_prof_on)) prof_start(0);   /* (sampling, no sample yet: an empty profile) */
  if (!hak_load_acquire(&prof_started)) {
    prof_busy = was;
    errno = EINVAL;
    return -1;
  }
  hak_lock(&prof_lock);
  int r = 0;
  if (path != NULL) r = dump_locked(path, false);
  else dump_next_locked();
  hak_unlock(&prof_lock);
  prof_busy = was;
  return r;
}

hak_api int hakmem_prof_dump(const char* path) { return _hak_prof_dump(path); }

/* At exit: the last profile and the leak report (the stacks whose sampled
 * blocks are still live). */
hak_warm void _hak_prof_at_exit(void) {
  if (!hak_load_acquire(&prof_started) || hak_opt(PROF) != HAK_PROF_ON) return;
  prof_busy = true;
  hak_lock(&prof_lock);
  dump_next_locked();
  size_t n = name_base();
  memcpy(name_buf + n, "leaks.heap", 11);
  dump_locked(name_buf, true);
  hak_unlock(&prof_lock);
  if (hak_opt(VERBOSE))
    _hak_message("hakmem: heap profile: %llu samples, stacks by %s\n", (unsigned long long)hak_load_relaxed(&prof_sampled),
                 _hak_unwind_method());
  prof_busy = false;
}

/* fork: the lock is the last one taken (nothing is locked while it is
 * held), and the child writes its own files, numbered from 0. */
void _hak_prof_fork_prepare(void) { hak_lock(&prof_lock); }
void _hak_prof_fork_parent(void) { hak_unlock(&prof_lock); }
void _hak_prof_fork_child(void) {
  pthread_mutex_init(&prof_lock, NULL);
  dump_seq = 0;
  hak_store_relaxed(&dump_pending, 0);
  _hak_unwind_fork_child();
}
