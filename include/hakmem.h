/* hakmem — a fast, memory-lean general-purpose allocator for Linux.
 *
 * This is hakmem's only public header.  Linking libhakmem (or preloading
 * libhakmem.so) replaces malloc/free and friends; linking
 * libhakmem-nooverride instead exports only the hak_-prefixed entry points
 * below, which then work beside the system allocator without overriding it. */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>
#include <stdio.h>
#include <malloc.h>   /* struct mallinfo2 */

#ifdef __cplusplus
extern "C" {
#endif

#define HAKMEM_VERSION_MAJOR 0
#define HAKMEM_VERSION_MINOR 1
#define HAKMEM_VERSION_PATCH 0
#define HAKMEM_VERSION "0.1.0"

#if defined(__GNUC__)
#define HAK_EXPORT __attribute__((visibility("default")))
#define HAK_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define HAK_EXPORT
#define HAK_MALLOC_ATTR
#endif

/* ---- the standard API, prefixed (glibc semantics) ---- */
HAK_EXPORT HAK_MALLOC_ATTR void* hak_malloc(size_t size);
HAK_EXPORT HAK_MALLOC_ATTR void* hak_calloc(size_t count, size_t size);
HAK_EXPORT void* hak_realloc(void* p, size_t size);
HAK_EXPORT void* hak_reallocarray(void* p, size_t count, size_t size);
HAK_EXPORT void  hak_free(void* p);
HAK_EXPORT void  hak_free_sized(void* p, size_t size);   /* size as requested */
HAK_EXPORT void  hak_free_aligned_sized(void* p, size_t alignment, size_t size);
HAK_EXPORT int   hak_posix_memalign(void** out, size_t alignment, size_t size);
HAK_EXPORT HAK_MALLOC_ATTR void* hak_aligned_alloc(size_t alignment, size_t size);
HAK_EXPORT HAK_MALLOC_ATTR void* hak_memalign(size_t alignment, size_t size);
HAK_EXPORT HAK_MALLOC_ATTR void* hak_valloc(size_t size);
HAK_EXPORT HAK_MALLOC_ATTR void* hak_pvalloc(size_t size);
HAK_EXPORT size_t hak_malloc_usable_size(const void* p);
HAK_EXPORT int   hak_malloc_trim(size_t pad);
HAK_EXPORT void  hak_malloc_stats(void);
HAK_EXPORT struct mallinfo2 hak_mallinfo2(void);
/* glibc's malloc_info: hakmem's figures in glibc's XML shape (one <heap>:
 * the room in the size classes' slabs as <sizes> and "fast", other memory
 * held and not in use as "rest", live large blocks as "mmap"; system
 * current + mmap size = bytes mapped).  options must be 0; 0 or EINVAL. */
HAK_EXPORT int   hak_malloc_info(int options, FILE* fp);
/* glibc's mallopt: M_TRIM_THRESHOLD sets HAKMEM_LEAN_TARGET_MB (rounded up
 * to MiB), M_CHECK_ACTION sets HAKMEM_INVALID_FREE, unless the environment
 * set them; the other parameters are accepted and ignored.  Returns 1, or 0
 * for a value glibc refuses (docs/TUNING.md). */
HAK_EXPORT int   hak_mallopt(int param, int value);

/* ---- hakmem's own calls ---- */

/* Nonzero when p is the start of a live block handed out by hakmem. */
HAK_EXPORT int hak_owns(const void* p);

/* Return cached and empty memory to the OS now (as malloc_trim(0)). */
HAK_EXPORT void hak_collect(void);

/* Print the statistics report (per-class counts, OS calls and bytes, peak
 * mapped and peak RSS) to `out` (stderr when NULL). */
HAK_EXPORT void hakmem_stats_print(FILE* out);

/* Heap profiling (HAKMEM_PROF=1, docs/PROFILING.md): write the sampled heap
 * profile now, in gperftools' format (google-pprof reads it), to `path`, or
 * to the next PREFIX.PID.N.heap when `path` is NULL.  0 on success; -1 with
 * errno set otherwise (EINVAL: profiling was never started). */
HAK_EXPORT int hakmem_prof_dump(const char* path);

/* Counters of the OS module: every mmap/munmap/madvise/mprotect/mremap hakmem
 * made, and the bytes they covered. */
typedef struct hak_os_stats_s {
  size_t mmap_calls, munmap_calls, madvise_calls, mprotect_calls, mremap_calls;
  size_t mmap_bytes, munmap_bytes, madvise_bytes;
  size_t mapped_bytes;        /* currently mapped by hakmem */
  size_t peak_mapped_bytes;   /* high-water mark of mapped_bytes */
} hak_os_stats_t;
HAK_EXPORT void hak_os_stats(hak_os_stats_t* out);

/* Figures and settings by name, in the manner of jemalloc's mallctl: the
 * value of `name` is copied to oldp, whose size *oldlenp must be the value's
 * (oldp NULL: *oldlenp is set to that size); newp/newlen write a value.
 * Returns 0, or ENOENT (unknown name), EINVAL (a size that is not the
 * value's), EPERM (a write to a read-only name).
 *   version                 const char*  HAKMEM_VERSION
 *   epoch                   uint64_t     the stats.* names read a snapshot; writing any value
 *                                        takes a new one (the first read takes the first)
 *   stats.allocated         size_t  bytes in live blocks, at their usable sizes
 *   stats.active            size_t  bytes of slab pages in use and of live large blocks
 *   stats.metadata          size_t  mapped, neither active nor retained: headers, heaps, tables
 *   stats.resident          size_t  an upper estimate of the above that is in RAM
 *   stats.mapped            size_t  bytes mapped from the OS (= active + retained + metadata)
 *   stats.retained          size_t  mapped, held, not in use (free pages, caches, decommitted)
 *   stats.class.<i>.live_blocks (and .size .free_blocks .slabs .pages .nmalloc), class.count,
 *   opt.<name>              size_t  the effective HAKMEM_<NAME> (lower case: opt.decommit_delay_ms)
 * and the others docs/TUNING.md ("Figures on request") lists.  Reading costs
 * a walk of every slab at the refresh; nothing is counted on the fast paths
 * for it. */
HAK_EXPORT int hakmem_ctl(const char* name, void* oldp, size_t* oldlenp, const void* newp, size_t newlen);

/* Value of an option as in effect (after profile and environment), or -1 when
 * `name` (e.g. "HAKMEM_DECOMMIT") is unknown. */
HAK_EXPORT long long hak_option_get(const char* name);

/* Call-site learning (HAKMEM_LEARN): the call site (return address of the
 * public entry point) recorded for the large block p, or NULL; and the
 * strategy a site plays now: 0 cache, 1 release, 2 decommit, 3 prefault,
 * 4 populate, or
 * -1 for a site hakmem has not seen.  Sites are tracked while learning, a
 * forced strategy or statistics are on. */
HAK_EXPORT void* hak_block_site(const void* p);
HAK_EXPORT int hak_site_strategy(const void* site);

HAK_EXPORT const char* hak_version(void);

#ifdef __cplusplus
}
#endif
#endif /* HAKMEM_H */
