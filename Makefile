# hakmem — top-level build.
#   make            release build/libhakmem.so, build/libhakmem.a, build/hakmem
#   make debug      build/debug/   (-O0 -g, internal assertions)
#   make asan       build/asan/    (ASan+UBSan, hak_ prefix only: no malloc override)
#   make tsan       build/tsan/    (TSan, hak_ prefix only)
#   make secure     build/libhakmem-secure.so (secure mode, also built by `make`)
#   make nooverride build/libhakmem-nooverride.so/.a (hak_ API only, also built by `make`)
#   make deb        Debian packages in build/deb/ (pkg/deb.mk)
#   make test       all tests (tests/run.sh), ends with "N passed, M failed"
#   make bench      the peer comparison (scripts/bench.sh)
#   make install PREFIX=/usr/local
# LDFLAGS, when set, is added to the shared libraries' link (packaging: -z relro).
CC      ?= cc
CXX     ?= c++
PREFIX  ?= /usr/local
BUILD   := build

# The library is compiled as one translation unit (src/unity.c) so the
# fast paths inline across files; the individual files stay the source.
SRCS    := $(wildcard src/*.c)
HDRS    := $(wildcard src/*.h) include/hakmem.h
LIB_CFLAGS_COMMON := -std=gnu11 -fPIC -fvisibility=hidden -ftls-model=initial-exec \
  -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc \
  -fno-plt -Wall -Wextra -Wno-unused-parameter -Wno-missing-attributes -Iinclude -Isrc -pthread
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null)),)
LIB_CFLAGS_COMMON += -Wno-unknown-warning-option
endif
RELEASE_CFLAGS := -O2 -g -DNDEBUG $(LIB_CFLAGS_COMMON)
DEBUG_CFLAGS   := -O0 -g3 -DHAK_DEBUG=2 $(LIB_CFLAGS_COMMON)
ASAN_CFLAGS    := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -DHAK_DEBUG=1 -DHAK_NO_OVERRIDE $(LIB_CFLAGS_COMMON)
SECURE_CFLAGS  := -O2 -g -DNDEBUG -DHAK_SECURE=1 $(LIB_CFLAGS_COMMON)
TSAN_CFLAGS    := -O1 -g -fsanitize=thread -DHAK_DEBUG=1 -DHAK_NO_OVERRIDE $(LIB_CFLAGS_COMMON)
NOOVR_CFLAGS   := $(RELEASE_CFLAGS) -DHAK_NO_OVERRIDE
# 64 KiB segment alignment: the kernel maps a library's pages 64 KiB around
# each first touch, and so aligned the code every process runs (hak_warm) is
# one such window in every process (docs/DESIGN.md, "A small program").
LIB_LDFLAGS_BASE := -shared -pthread -Wl,-z,now -Wl,-z,max-page-size=0x10000
LIB_LDFLAGS    := $(LIB_LDFLAGS_BASE) -Wl,--version-script=src/exports.map -Wl,-soname,libhakmem.so.0

.PHONY: all debug asan tsan secure nooverride test bench install clean syntax-check
all: $(BUILD)/libhakmem.so $(BUILD)/libhakmem.a $(BUILD)/hakmem $(BUILD)/libhakmem-secure.so \
  $(BUILD)/libhakmem-nooverride.so $(BUILD)/libhakmem-nooverride.a \
  $(BUILD)/libhakmem.so.0 $(BUILD)/libhakmem-secure.so.0 $(BUILD)/libhakmem-nooverride.so.0

# Each library's run-time name (SONAME) beside it, so that a program linked
# against build/ runs with LD_LIBRARY_PATH=build.
$(BUILD)/%.so.0: $(BUILD)/%.so
	ln -sf $(<F) $@

define variant
$(1)/unity.o: $(SRCS) $(HDRS) Makefile
	@mkdir -p $(1)
	$$(CC) $(2) -c src/unity.c -o $$@
$(1)/libhakmem.so: $(1)/unity.o src/exports.map
	$$(CC) $(LIB_LDFLAGS) $(3) $$(LDFLAGS) $$< -o $$@
$(1)/libhakmem.a: $(1)/unity.o
	rm -f $$@ && ar rcs $$@ $$<
endef
$(eval $(call variant,$(BUILD),$(RELEASE_CFLAGS),))
$(eval $(call variant,$(BUILD)/debug,$(DEBUG_CFLAGS),))
$(eval $(call variant,$(BUILD)/asan,$(ASAN_CFLAGS),-fsanitize=address,undefined))
$(eval $(call variant,$(BUILD)/tsan,$(TSAN_CFLAGS),-fsanitize=thread))
$(eval $(call variant,$(BUILD)/secure,$(SECURE_CFLAGS),))
$(eval $(call variant,$(BUILD)/nooverride,$(NOOVR_CFLAGS),))

# secure mode: a separate library (no run-time switch on the default fast path)
# with its own run-time name, so it installs beside libhakmem.so.0
$(BUILD)/libhakmem-secure.so: $(BUILD)/secure/unity.o src/exports.map
	$(CC) $(LIB_LDFLAGS_BASE) -Wl,--version-script=src/exports.map -Wl,-soname,libhakmem-secure.so.0 $(LDFLAGS) $< -o $@
secure: $(BUILD)/libhakmem-secure.so

# no override: only the hak_ API is exported; the program keeps its malloc
$(BUILD)/libhakmem-nooverride.so: $(BUILD)/nooverride/unity.o src/exports-nooverride.map
	$(CC) $(LIB_LDFLAGS_BASE) -Wl,--version-script=src/exports-nooverride.map \
	  -Wl,-soname,libhakmem-nooverride.so.0 $(LDFLAGS) $< -o $@
$(BUILD)/libhakmem-nooverride.a: $(BUILD)/nooverride/libhakmem.a
	cp $< $@
nooverride: $(BUILD)/libhakmem-nooverride.so $(BUILD)/libhakmem-nooverride.a

debug: $(BUILD)/debug/libhakmem.so $(BUILD)/debug/libhakmem.a
asan:  $(BUILD)/asan/libhakmem.a
tsan:  $(BUILD)/tsan/libhakmem.a

$(BUILD)/hakmem: tools/hakmem.in
	@mkdir -p $(BUILD)
	sed -e 's|@LIBDIR_DEFAULT@||' $< > $@ && chmod +x $@

clean:
	rm -rf $(BUILD)

# Every file compiles on its own with the headers it includes, in each
# build's flags (the unity build is how the library is built, not what keeps
# the interfaces written): tests/cases/core_interfaces.sh.
SYNTAX_SRCS := $(filter-out src/unity.c,$(SRCS)) $(wildcard src/*.h)
syntax-check:
	@fail=0; for v in "$(RELEASE_CFLAGS)" "$(SECURE_CFLAGS)" "$(DEBUG_CFLAGS)" "$(NOOVR_CFLAGS)"; do \
	  for f in $(SYNTAX_SRCS); do \
	    case $$f in *.h) x="-x c";; *) x=;; esac; \
	    $(CC) $$v -Werror -fsyntax-only $$x $$f || { echo "FAIL: $$f does not compile alone ($$v)"; fail=1; }; \
	  done; done; exit $$fail

-include tests/tests.mk
-include bench/bench.mk
-include pkg/install.mk
-include pkg/deb.mk
