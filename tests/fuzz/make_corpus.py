#!/usr/bin/env python3
"""Write the seed corpus of tests/fuzz/fuzz_api.c into tests/fuzz/corpus/.

Each seed is a short program in the fuzzer's input format (see fuzz_api.c):
an opcode byte, a slot byte, then the operation's selectors.  The seeds
start the fuzzer on every entry point and on the interesting sizes; the
fuzzer mutates from there.   python3 tests/fuzz/make_corpus.py
"""
import os
import struct

(MALLOC, CALLOC, REALLOC, REALLOCARRAY, FREE, FREE_SIZED, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN,
 VALLOC, PVALLOC, USABLE, TRIM, COLLECT, CHECK, REALLOC_NULL, REALLOC_ZERO) = range(17)

SIZES = [0, 1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 112, 127, 128, 129, 160, 255, 256, 257,
         1023, 1024, 1025, 2048, 4095, 4096, 4097, 8191, 8192, 8193, 16384, 65535, 65536, 65537, 131071,
         131072, 131073, 262144, 1 << 20, (2 << 20) - 1, 2 << 20, (2 << 20) + 1, (4 << 20) - 8192, 4 << 20,
         (4 << 20) + 1, 64 << 20]
ALIGNS = [0, 1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 1000, 4096, 4097, 8192, 65536, 65537,
          131072, 1 << 20, 2 << 20, (2 << 20) + 1, 4 << 20, 3 << 20, 8 << 20, 64 << 20, 1 << 30, 1 << 40,
          2**64 - 1, 2**63, 2**63 + 1]


def size(n):
    """A size selector for n."""
    if n in SIZES:
        return bytes([SIZES.index(n)])
    if n < 1024:
        return bytes([100, n & 255, n >> 8])
    if n <= 128 << 10:
        return bytes([160]) + struct.pack('>I', n - 1)
    if (1 << 20) <= n < (64 << 20):
        return bytes([210]) + struct.pack('>I', n - (1 << 20))
    raise ValueError(n)


IMPOSSIBLE = {'SIZE_MAX': 240, 'SIZE_MAX-15': 241, 'SIZE_MAX/2': 242, 'SIZE_MAX/2+1': 243,
              'SIZE_MAX-4095': 244, 'PTRDIFF_MAX-4M': 245, '1T': 246, '1G': 247}


def huge(name):
    return bytes([IMPOSSIBLE[name]])


def align(a):
    return bytes([ALIGNS.index(a)])


def op(code, slot, *sel):
    return bytes([code, slot]) + b''.join(sel)


def calloc(slot, n, count, overflow=0):
    return op(CALLOC, slot, size(n), bytes([count, overflow]))


seeds = {
    'small-churn': b''.join(op(MALLOC, i, size(s)) for i, s in enumerate([16, 32, 48, 64, 100, 500, 1024]))
                   + b''.join(op(FREE, i) for i in (1, 3, 5)) + op(CHECK, 0)
                   + b''.join(op(MALLOC, i, size(s)) for i, s in ((1, 17), (3, 33), (5, 1025))),
    'class-boundaries': b''.join(op(MALLOC, i, size(s)) for i, s in enumerate(
        [15, 16, 17, 127, 128, 129, 1023, 1024, 1025, 8191, 8192, 8193, 131071, 131072, 131073])) + op(CHECK, 0),
    'calloc': calloc(0, 100, 3) + calloc(1, 131073, 1) + calloc(2, 4 << 20, 2) + calloc(3, 0, 4)
              + calloc(4, 16, 0) + op(FREE, 2) + calloc(2, 4 << 20, 1) + calloc(5, 64, 1, 255),
    'realloc-grow': op(MALLOC, 7, size(16)) + b''.join(op(REALLOC, 7, size(s)) for s in
                                                      [100, 1024, 5000, 131072, 131073, 1 << 20, 5 << 20, 64 << 20]),
    'realloc-shrink': op(MALLOC, 9, size(64 << 20)) + b''.join(op(REALLOC, 9, size(s)) for s in
                                                              [8 << 20, 2 << 20, 262144, 65536, 100, 1, 0]),
    'aligned': b''.join(op(c, i, align(a), size(s)) for i, (c, a, s) in enumerate([
        (ALIGNED_ALLOC, 64, 100), (MEMALIGN, 4096, 1), (POSIX_MEMALIGN, 65536, 5000), (MEMALIGN, 1 << 20, 131073),
        (ALIGNED_ALLOC, 2 << 20, 16), (POSIX_MEMALIGN, 4 << 20, 100), (MEMALIGN, 8 << 20, 0),
        (ALIGNED_ALLOC, 3 << 20, 7)])) + op(CHECK, 0) + op(REALLOC, 3, size(2 << 20)),
    'bad-alignments': b''.join(op(c, i, align(a), size(64)) for i, (c, a) in enumerate([
        (POSIX_MEMALIGN, 0), (POSIX_MEMALIGN, 3), (POSIX_MEMALIGN, 4), (POSIX_MEMALIGN, 24),
        (ALIGNED_ALLOC, 2**64 - 1), (MEMALIGN, 2**63 + 1), (MEMALIGN, 1000), (ALIGNED_ALLOC, 65537)])),
    'valloc-pvalloc': op(VALLOC, 0, size(1)) + op(PVALLOC, 1, size(0)) + op(PVALLOC, 2, size(4097))
                      + op(VALLOC, 3, size(1 << 20)) + op(PVALLOC, 4, huge('SIZE_MAX')) + op(USABLE, 2),
    'impossible': b''.join(op(MALLOC, i, huge(h)) for i, h in enumerate(IMPOSSIBLE))
                  + op(MALLOC, 20, size(100)) + op(REALLOC, 20, huge('SIZE_MAX/2'))
                  + op(REALLOCARRAY, 20, size(65536), bytes([3, 255])) + calloc(21, 1 << 20, 2, 255),
    'trim-collect': op(MALLOC, 0, size(5 << 20)) + op(MALLOC, 1, size(300)) + op(FREE, 0) + op(TRIM, 0, b'\0')
                    + op(MALLOC, 2, size(20000)) + op(FREE, 2) + op(COLLECT, 0) + op(MALLOC, 0, size(3 << 20)),
    'free-variants': op(MALLOC, 0, size(100)) + op(FREE_SIZED, 0) + op(MALLOC, 1, size(131073))
                     + op(REALLOC_ZERO, 1) + op(REALLOC_NULL, 2, size(33)) + op(FREE_SIZED, 2)
                     + op(REALLOCARRAY, 3, size(8)) + op(MALLOC, 3, size(48)) + op(REALLOCARRAY, 3, size(64), bytes([3, 0])),
    'large-cache': b''.join(op(MALLOC, i, size(s)) + op(FREE, i) for i, s in enumerate(
        [131073, 1 << 20, 3 << 20, 2 << 20, 64 << 20, 1 << 20])) + op(MALLOC, 9, size(1 << 20)) + op(USABLE, 9),
    # regression: bug 1 (realloc of a 0-byte block aligned above 2 MiB returned NULL)
    'regress-realloc-zero-huge-aligned': op(MEMALIGN, 0, align(8 << 20), size(0)) + op(REALLOC, 0, size(112))
                                         + op(ALIGNED_ALLOC, 1, align(4 << 20), size(0)) + op(REALLOC, 1, size(0)),
    # regression: a block aligned above 2 MiB shrunk by realloc kept its whole usable size (half rule)
    'regress-realloc-shrink-huge-aligned': op(MEMALIGN, 0, align(4 << 20), size(64 << 20))
                                           + op(REALLOC, 0, size(57663455)) + op(REALLOC, 0, size(40886052)),
}

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, 'corpus')
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), 'wb') as f:
        f.write(data)
print(f'{len(seeds)} seeds in {out}')
