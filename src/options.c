/* Options: the HAKMEM_* table (options.h), parsed once from the environment
 * without allocating.  Order: the profile first, then each variable; an
 * explicitly set variable always wins over the profile's default. */
#include "internal.h"

extern char** environ;

typedef enum { K_BOOL, K_INT, K_SIZE, K_ENUM, K_PATH } opt_kind_t;
static const char* const profile_names[] = {"speed", "balanced", "lean"};
static const char* const invalid_names[] = {"abort", "warn", "ignore"};
static const char* const decommit_names[] = {"off", "free", "dontneed"};
static const char* const thp_names[] = {"never", "auto", "always"};
static const char* const strategy_names[] = {"none", "cache", "release", "decommit", "prefault", "populate"};
const char* _hak_profile_name(long long p) { return p >= 0 && p < 3 ? profile_names[p] : "?"; }
const char* _hak_strategy_name(int s) { return s >= 0 && s < HAK_STRAT_COUNT ? strategy_names[s + 1] : "?"; }
static const char* const unwind_names[] = {"auto", "libunwind", "fp", "libgcc"};
static const char* const prof_names[] = {"off", "on", "sample"};

/* kind token -> parser kind and word list */
#define KIND_BOOL K_BOOL, NULL
#define KIND_INT K_INT, NULL
#define KIND_SIZE K_SIZE, NULL
#define KIND_PATH K_PATH, NULL
#define KIND_ENUM_PROFILE K_ENUM, profile_names
#define KIND_ENUM_INVALID K_ENUM, invalid_names
#define KIND_ENUM_DECOMMIT K_ENUM, decommit_names
#define KIND_ENUM_THP K_ENUM, thp_names
#define KIND_ENUM_STRATEGY K_ENUM, strategy_names
#define KIND_ENUM_UNWIND K_ENUM, unwind_names
#define KIND_ENUM_PROF K_ENUM, prof_names

typedef struct {
  const char* name;
  opt_kind_t kind;
  const char* const* words;   /* K_ENUM: names of 0..max */
  long long def[3];   /* per profile */
  long long min, max;
  const char* doc;
} opt_desc_t;

static const opt_desc_t opt_table[HAK_OPT_COUNT] = {
#define HAK_X_DESC(id, nm, kind, sp, ba, le, mn, mx, doc) {nm, KIND_##kind, {sp, ba, le}, mn, mx, doc},
    HAK_OPTIONS(HAK_X_DESC)
#undef HAK_X_DESC
};

long long _hak_options[HAK_OPT_COUNT] = {
#define HAK_X_INIT(id, nm, kind, sp, ba, le, ...) [HAK_OPT_##id] = ba,
    HAK_OPTIONS(HAK_X_INIT)
#undef HAK_X_INIT
};
static bool opt_explicit[HAK_OPT_COUNT];
static _Atomic(int) opt_done;
/* PATH values, copied out of environ (a later setenv may replace the entry). */
hak_bss_apart static char opt_text_pool[4096];
static const char* opt_text[HAK_OPT_COUNT];

static bool str_ieq(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = (char)(x + 32);
    if (y >= 'A' && y <= 'Z') y = (char)(y + 32);
    if (x != y || y == 0) return false;
  }
  return b[n] == 0;
}

static bool parse_word(const char* v, const char* const* words, size_t n, long long* out) {
  size_t len = strlen(v);
  for (size_t i = 0; i < n; i++)
    if (str_ieq(v, words[i], len)) {
      *out = (long long)i;
      return true;
    }
  return false;
}

/* An enum by name or by its number. */
static bool parse_enum(const char* v, const char* const* words, size_t n, long long* out) {
  if (parse_word(v, words, n, out)) return true;
  if (v[0] >= '0' && v[1] == 0 && (size_t)(v[0] - '0') < n) {
    *out = v[0] - '0';
    return true;
  }
  return false;
}

static bool parse_number(const char* v, bool size_suffix, long long* out) {
  if (*v == 0) return false;
  unsigned long long x = 0;
  const char* s = v;
  while (*s >= '0' && *s <= '9') {
    if (x > (unsigned long long)(LLONG_MAX / 10)) return false;
    x = x * 10 + (unsigned)(*s++ - '0');
  }
  if (s == v) return false;
  if (size_suffix && *s) {
    unsigned shift = 0;
    switch (*s) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return false;
    }
    s++;
    if (*s == 'b' || *s == 'B') s++;
    if (x > ((unsigned long long)LLONG_MAX >> shift)) return false;
    x <<= shift;
  }
  if (*s) return false;
  if (x > (unsigned long long)LLONG_MAX) return false;
  *out = (long long)x;
  return true;
}

static bool parse_value(const opt_desc_t* d, const char* v, long long* out) {
  switch (d->kind) {
    case K_BOOL: {
      static const char* const no[] = {"0", "false", "no", "off"};
      static const char* const yes[] = {"1", "true", "yes", "on"};
      long long i;
      if (parse_word(v, no, 4, &i)) { *out = 0; return true; }
      if (parse_word(v, yes, 4, &i)) { *out = 1; return true; }
      return false;
    }
    case K_INT: return parse_number(v, false, out) && *out >= d->min && *out <= d->max;
    case K_SIZE: return parse_number(v, true, out) && *out >= d->min && *out <= d->max;
    case K_ENUM: return parse_enum(v, d->words, (size_t)d->max + 1, out);
    case K_PATH: *out = 1; return *v != 0;
  }
  return false;
}

static void opt_warn(const char* what, const char* entry) {
  _hak_message("hakmem: warning: %s: %.200s\n", what, entry);
}

/* A PATH value is copied into the pool; false when it does not fit. */
static bool keep_text(int id, const char* v) {
  static size_t used;
  if (opt_table[id].kind != K_PATH) return true;
  size_t n = strlen(v) + 1;
  if (n > sizeof opt_text_pool - used) return false;
  memcpy(opt_text_pool + used, v, n);
  opt_text[id] = opt_text_pool + used;
  used += n;
  return true;
}

const char* _hak_option_text(hak_option_id_t id) { return id < HAK_OPT_COUNT ? opt_text[id] : NULL; }

/* Find "NAME=" in environ, without allocating or touching getenv's page of
 * libc; NULL when absent. */
hak_warm const char* _hak_env_find(const char* name) {
  if (environ == NULL) return NULL;
  size_t len = strlen(name);
  for (char** e = environ; *e; e++)
    if (strncmp(*e, name, len) == 0 && (*e)[len] == '=') return *e + len + 1;
  return NULL;
}

hak_warm void _hak_options_init(void) {
  if (hak_load_acquire(&opt_done)) return;
  if (environ == NULL) return;   /* too early: the constructor calls again */
  long long profile = HAK_PROFILE_BALANCED;
  const char* pv = _hak_env_find("HAKMEM_PROFILE");
  if (pv != NULL && !parse_value(&opt_table[HAK_OPT_PROFILE], pv, &profile)) {
    opt_warn("malformed value (expected speed|balanced|lean), using balanced", pv - strlen("HAKMEM_PROFILE="));
    profile = HAK_PROFILE_BALANCED;
    pv = NULL;
  }
  for (int i = 0; i < HAK_OPT_COUNT; i++) _hak_options[i] = opt_table[i].def[profile];
  _hak_options[HAK_OPT_PROFILE] = profile;
  opt_explicit[HAK_OPT_PROFILE] = pv != NULL;
  for (char** e = environ; *e; e++) {
    const char* entry = *e;
    if (strncmp(entry, "HAKMEM_", 7) != 0) continue;
    const char* eq = strchr(entry, '=');
    if (eq == NULL) continue;
    size_t nlen = (size_t)(eq - entry);
    int id = -1;
    for (int i = 0; i < HAK_OPT_COUNT; i++)
      if (strlen(opt_table[i].name) == nlen && strncmp(opt_table[i].name, entry, nlen) == 0) id = i;
    if (id < 0) {
      opt_warn("unknown variable ignored (see docs/TUNING.md)", entry);
      continue;
    }
    if (id == HAK_OPT_PROFILE) continue;
    long long v;
    if (parse_value(&opt_table[id], eq + 1, &v) && keep_text(id, eq + 1)) {
      _hak_options[id] = v;
      opt_explicit[id] = true;
    } else {
      opt_warn("malformed value ignored, using the default", entry);
    }
  }
  hak_store_release(&opt_done, 1);
  if (hak_opt(VERBOSE)) _hak_options_print();
}

static void value_text(int i, long long v, char* buf, size_t n) {
  if (opt_table[i].kind == K_PATH) _hak_snprintf(buf, n, "%s", opt_text[i] ? opt_text[i] : "-");
  else if (opt_table[i].kind == K_ENUM && v >= 0 && v <= opt_table[i].max) _hak_snprintf(buf, n, "%s", opt_table[i].words[v]);
  else _hak_snprintf(buf, n, "%lld", v);
}

void _hak_options_print(void) {
  char line[400], val[64];
  for (int i = 0; i < HAK_OPT_COUNT; i++) {
    value_text(i, _hak_options[i], val, sizeof val);
    int n = _hak_snprintf(line, sizeof line, "hakmem: option %-22s = %-10s %s  (%s)\n", opt_table[i].name, val,
                          opt_explicit[i] ? "[set]    " : "[default]", opt_table[i].doc);
    if (n > 0) _hak_os_write_all(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  }
}

long long _hak_option_by_name(const char* name) {
  if (name == NULL) return -1;
  for (int i = 0; i < HAK_OPT_COUNT; i++)
    if (strcmp(opt_table[i].name, name) == 0) return _hak_options[i];
  return -1;
}

/* The option whose name, without "HAKMEM_", is `name` in any case (ctl.c:
 * "opt.decommit_delay_ms"); -1 when there is none. */
int _hak_option_find(const char* name) {
  size_t n = strlen(name);
  for (int i = 0; i < HAK_OPT_COUNT; i++)
    if (str_ieq(name, opt_table[i].name + strlen("HAKMEM_"), n)) return i;
  return -1;
}

/* A setting the program makes while it runs (mallopt), within the option's
 * bounds.  The user's environment wins: an option set there is kept, and
 * false says so.  Only options read where they act (not cached at start-up)
 * may change this way. */
bool _hak_option_set(hak_option_id_t id, long long v) {
  _hak_options_init();
  if (id >= HAK_OPT_COUNT || opt_explicit[id]) return false;
  if (v < opt_table[id].min) v = opt_table[id].min;
  if (v > opt_table[id].max) v = opt_table[id].max;
  __atomic_store_n(&_hak_options[id], v, __ATOMIC_RELAXED);
  return true;
}

hak_api long long hak_option_get(const char* name) {
  _hak_options_init();
  return _hak_option_by_name(name);
}
