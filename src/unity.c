/* The library as one translation unit, so the fast paths inline into every
 * entry point and the override aliases can name them. */
#include "os.c"
#include "options.c"
#include "segment.c"
#include "heap.c"
#include "large.c"
#include "bigcache.c"
#include "release.c"
#include "secure.c"
#include "alloc.c"
#include "stats.c"
#include "init.c"
#include "override.c"
