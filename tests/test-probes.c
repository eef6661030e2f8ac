/* Heap-misuse probes (issue #11): one misuse per run, against whatever
 * malloc the program gets (LD_PRELOAD), to measure which allocator stops
 * what.  scripts/probes.sh runs every probe as a child process and
 * classifies the outcome; tests/cases/rel_probes.sh checks hakmem's builds.
 *
 *   test-probes list         the probes, one "NAME SIZE" a line
 *   test-probes NAME SIZE    run one (SIZE: 8, 4096 or 262144; 0 for zero_*)
 *
 * A probe prints "addr=0x..." (the block the misuse is about) before the
 * misuse, then one of:
 *   "held"    the property a hardened allocator gives held (freed memory
 *             reads as fill, malloc returned another block, ...): caught;
 *   "missed"  the misuse went through unnoticed;
 * and exits 0.  Being killed by a signal before that (abort after a report,
 * SIGSEGV on a guard page) is also "caught".  Exit 3: a precondition failed.
 * Nothing depends on timing: each probe is a fixed sequence of calls. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "misuse_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define OLD 0x5a   /* what the previous owner wrote */

static int report(int held) {
  puts(held ? "held" : "missed");
  fflush(stdout);
  return 0;
}
static void* xmalloc(size_t n) {
  void* p = opaque(malloc(n));
  if (p == NULL) {
    printf("precondition: malloc(%zu) failed\n", n);
    exit(3);
  }
  return p;
}

/* What a program does after the mistake: allocation and freeing of the
 * same size, enough of it (4096 blocks and at least 64 MiB) to cycle any
 * quarantine, so a check made when a freed block is reused gets its
 * chance.  Other sizes too, so neighbours of other classes are freed. */
static void churn(size_t n) {
  size_t rounds = 64 * MiB / (n ? n : 1);
  if (rounds < 4096) rounds = 4096;
  if (rounds > 200000) rounds = 200000;
  for (size_t i = 0; i < rounds; i++) {
    char* q = xmalloc(n);
    memset(q, 0, n < 64 ? n : 64);
    free(q);
  }
  void* keep[64];
  for (int i = 0; i < 64; i++) keep[i] = xmalloc(n + (size_t)i);
  for (int i = 0; i < 64; i++) free(keep[i]);
}

/* The block the probe works on, with live neighbours of its size around it
 * (so an over- or underflow meets another block, not only free space). */
static void* neighbours[16];
static char* victim(size_t n) {
  for (int i = 0; i < 8; i++) neighbours[i] = xmalloc(n);
  char* p = xmalloc(n);
  for (int i = 8; i < 16; i++) neighbours[i] = xmalloc(n);
  memset(p, 'v', n);
  return p;
}
static void free_neighbours(void) {
  for (int i = 0; i < 16; i++) free(neighbours[i]);
}

/* A run of the previous owner's bytes (4, or all n when fewer): one OLD byte
 * alone is no evidence, an allocator's own words there (a free list's
 * encoded link is pseudo-random) hold 0x5a in one byte in a few percent of
 * processes, and the probe then reported a miss that was none. */
static int contains_old(const volatile unsigned char* p, size_t n) {
  size_t want = n < 4 ? n : 4, run = 0;
  for (size_t i = 0; i < n; i++) {
    run = p[i] == OLD ? run + 1 : 0;
    if (run >= want) return 1;
  }
  return 0;
}

static int run(const char* name, size_t n) {
  static char src[64];
  memset(src, 'X', sizeof src);
  /* writes outside the block, or into it after its free */
  static const struct { const char* name; long off; size_t len; int after_free; } writes[] = {
    { "overflow_1", 0, 1, 0 },             /* the byte just past the request */
    { "overflow_32", 0, 32, 0 },           /* memcpy of 32 bytes past the request */
    { "overflow_1m", (long)MiB - 1, 1, 0 },   /* one byte 1 MiB past the request (a bad index) */
    { "underflow_1", -1, 1, 0 },           /* p[-1] = x */
    { "underflow_32", -32, 32, 0 },        /* memcpy of 32 bytes just below the block */
    { "write_after_free", 0, 0, 1 },       /* the whole request, once, no reuse in between */
  };
  for (size_t i = 0; i < sizeof writes / sizeof *writes; i++) {
    if (strcmp(name, writes[i].name) != 0) continue;
    char* p = victim(n);
    announce(p);
    if (writes[i].after_free) {
      free(p);
      memset(opaque(p), 'X', n);
    } else {
      char* at = p + (writes[i].off >= 0 ? (long)n : 0) + writes[i].off;
      if (writes[i].len == 1) *(volatile char*)opaque(at) = 'X';
      else memcpy(opaque(at), src, writes[i].len);
      free(p);
    }
    free_neighbours();
    churn(n);
    return report(0);
  }
  if (strcmp(name, "read_after_free") == 0) {   /* does the freed block still hold its data? */
    char* p = victim(n);
    memset(p, OLD, n);
    announce(p);
    free(p);
    return report(!contains_old(opaque(p), n));
  }
  if (strcmp(name, "reuse_immediate") == 0) {   /* free(p); malloc(same size) == p? */
    char* p = victim(n);
    announce(p);
    free(p);
    char* q = xmalloc(n);
    return report(q != p);
  }
  if (strcmp(name, "reuse_downsize") == 0) {   /* free(p); malloc(3/4 of it) == p? */
    char* p = victim(n);
    announce(p);
    free(p);
    char* q = xmalloc(n - n / 4);
    return report(q != p);
  }
  if (strcmp(name, "realloc_same") == 0) {   /* does a shrinking realloc keep the block? */
    char* p = victim(n);
    announce(p);
    char* q = opaque(realloc(p, n - n / 4));
    if (q == NULL) return 3;
    return report(q != p);
  }
  if (strcmp(name, "uninit_read") == 0) {   /* does malloc hand out a previous owner's bytes? */
    char* p = victim(n);
    memset(p, OLD, n);
    announce(p);
    free(p);
    int seen = 0;
    void* got[64];
    for (int i = 0; i < 64; i++) {
      got[i] = xmalloc(n);
      seen |= contains_old(got[i], n);
    }
    for (int i = 0; i < 64; i++) free(got[i]);
    return report(!seen);
  }
  if (strcmp(name, "zero_read") == 0) {   /* read the bytes of a live malloc(0) block */
    volatile char* p = xmalloc(0);
    announce((void*)p);
    char c = p[0];
    (void)c;
    return report(0);
  }
  if (strcmp(name, "zero_write") == 0) {   /* write them, then free */
    char* p = xmalloc(0);
    announce(p);
    memcpy(opaque(p), src, 8);
    free(p);
    churn(0);
    return report(0);
  }
  if (strcmp(name, "zero_read_freed") == 0) {
    volatile char* p = xmalloc(0);
    announce((void*)p);
    free((void*)p);
    char c = p[0];
    (void)c;
    return report(0);
  }
  if (strcmp(name, "zero_write_freed") == 0) {
    char* p = xmalloc(0);
    announce(p);
    free(p);
    memcpy(opaque(p), src, 8);
    churn(0);
    return report(0);
  }
  printf("unknown probe %s\n", name);
  return 2;
}

static const char* const sized[] = {
  "overflow_1", "overflow_32", "overflow_1m", "underflow_1", "underflow_32", "write_after_free",
  "read_after_free", "reuse_immediate", "reuse_downsize", "realloc_same", "uninit_read",
};
static const char* const zero[] = { "zero_read", "zero_write", "zero_read_freed", "zero_write_freed" };
static const size_t sizes[] = { 8, 4 * KiB, 256 * KiB };

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "list") == 0) {
    for (size_t i = 0; i < sizeof sized / sizeof *sized; i++)
      for (size_t k = 0; k < 3; k++) printf("%s %zu\n", sized[i], sizes[k]);
    for (size_t i = 0; i < sizeof zero / sizeof *zero; i++) printf("%s 0\n", zero[i]);
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: test-probes list | test-probes NAME SIZE\n");
    return 2;
  }
  return run(argv[1], strtoull(argv[2], NULL, 10));
}
