# bench/bench.mk — hakmem's benchmark programs (included by the top Makefile).
#   make bench-progs   build/bench/{random_mixed,vm,larson,xthread,latency,fragment,sites,churn,forklat,smallproc,grow,turns}
#   make bench         the peer comparison: scripts/bench.sh (see docs/BENCH_SUITE.md)
# The programs use only the standard malloc API and are not linked with hakmem:
# scripts/bench.sh runs them under each allocator with LD_PRELOAD.
BENCH_DIR    := build/bench
BENCH_NAMES  := random_mixed vm larson xthread latency fragment sites churn forklat smallproc grow turns
BENCH_PROGS  := $(addprefix $(BENCH_DIR)/,$(BENCH_NAMES))
BENCH_CFLAGS ?= -std=c11 -O2 -g -Wall -Wextra -pthread
BENCH_LDLIBS := -pthread -ldl -lm

.PHONY: bench-progs bench
bench-progs: $(BENCH_PROGS)

$(BENCH_DIR)/%: bench/%.c bench/bench_common.h bench/bench.mk
	@mkdir -p $(BENCH_DIR)
	$(CC) $(BENCH_CFLAGS) $< -o $@ $(BENCH_LDLIBS)

bench:
	scripts/bench.sh
