# tests/tests.mk — included by the top Makefile.
#   make test-progs   build every test program, in every variant, into build/tests/
#   make test         build everything and run tests/run.sh (TESTS=pattern filters cases;
#                     J=N or make -jN runs N cases at once)
#
# Every test program is tests/test-NAME.c (C++: tests/test-NAME.cc), built by
# one rule (ht_prog, through ht_c_prog or ht_cxx_prog) into
# build/tests/test-NAME-VARIANT.  Variants (see tests/hak_test.h):
#   -release  standard names (malloc, ...), libhakmem.a linked whole (overrides malloc)
#   -debug    standard names, build/debug/libhakmem.a (-O0, internal assertions)
#   -hak      hak_ names, libhakmem.a (run under valgrind)
#   -hakdebug hak_ names, build/debug/libhakmem.a
#   -asan     hak_ names, build/asan/libhakmem.a, -fsanitize=address,undefined
#   -tsan     hak_ names, build/tsan/libhakmem.a, -fsanitize=thread
#   -glibc    standard names, no hakmem linked: hakmem extras found with dlsym, so the
#             program is run both plain and with LD_PRELOAD=build/libhakmem.so (or
#             another allocator: the probes)
#   -so       linked with build/libhakmem.so
# A program that needs other flags gets HT_X_test-NAME (and HT_X_test-NAME-VARIANT),
# added after the variant's: a later -O wins.

HT_OUT      := $(BUILD)/tests
HT_WARN     := -Wall -Wextra -Wno-unused-parameter
HT_CFLAGS   := -std=gnu11 -g $(HT_WARN) -Iinclude -Itests -pthread
HT_CXXFLAGS := -std=gnu++17 -fsized-deallocation -g $(HT_WARN) -Iinclude -Itests -pthread
HT_SANFLAGS := -O1 -fno-omit-frame-pointer -DHT_HAK

HT_F_release  := -O2 -fno-builtin
HT_F_debug    := -O2 -fno-builtin
HT_F_hak      := -O2 -DHT_HAK
HT_F_hakdebug := -O2 -DHT_HAK
HT_F_asan     := $(HT_SANFLAGS) -DHT_FOREIGN_MALLOC -fsanitize=address,undefined -fno-sanitize-recover=undefined
HT_F_tsan     := $(HT_SANFLAGS) -DHT_FOREIGN_MALLOC -fsanitize=thread
HT_F_glibc    := -O2 -fno-builtin -DHT_DLSYM
HT_F_so       := -O2

# HT_L_VARIANT: the library a variant links (a prerequisite); HT_LINK_VARIANT: how
HT_WHOLE = -Wl,--whole-archive $(1) -Wl,--no-whole-archive
HT_L_release  := $(BUILD)/libhakmem.a
HT_L_debug    := $(BUILD)/debug/libhakmem.a
HT_L_hak      := $(BUILD)/libhakmem.a
HT_L_hakdebug := $(BUILD)/debug/libhakmem.a
HT_L_asan     := $(BUILD)/asan/libhakmem.a
HT_L_tsan     := $(BUILD)/tsan/libhakmem.a
HT_L_glibc    :=
HT_L_so       := $(BUILD)/libhakmem.so $(BUILD)/libhakmem.so.0
$(foreach v,release debug hak hakdebug asan tsan,$(eval HT_LINK_$(v) = $$(call HT_WHOLE,$$(HT_L_$(v)))))
HT_LINK_glibc :=
HT_LINK_so    := -L$(BUILD) -lhakmem -Wl,-rpath,$(abspath $(BUILD))

HT_HDRS := tests/hak_test.h tests/misuse_util.h include/hakmem.h tests/tests.mk
HT_TOOL_c  = $(CC) $(HT_CFLAGS)
HT_TOOL_cc = $(CXX) $(HT_CXXFLAGS)

# $(call ht_prog,PROGRAM,VARIANT,c|cc): build/tests/PROGRAM-VARIANT from tests/PROGRAM.c or .cc
define ht_prog
$(HT_OUT)/$(1)-$(2): tests/$(1).$(3) $(HT_HDRS) $(HT_L_$(2))
	@mkdir -p $(HT_OUT)
	$$(HT_TOOL_$(3)) $(HT_F_$(2)) $$(HT_X_$(1)) $$(HT_X_$(1)-$(2)) $$< -o $$@ $(HT_LINK_$(2)) -ldl -lm
HT_PROGS += $(HT_OUT)/$(1)-$(2)
endef
ht_c_prog = $(call ht_prog,$(1),$(2),c)
ht_cxx_prog = $(call ht_prog,$(1),$(2),cc)

$(foreach v,release debug hak hakdebug asan glibc,$(eval $(call ht_c_prog,test-api,$(v))))
$(foreach v,release debug hak asan glibc,$(eval $(call ht_c_prog,test-model,$(v))))
$(foreach v,release debug hak asan tsan glibc,$(eval $(call ht_c_prog,test-threads,$(v))))
$(foreach v,release debug glibc,$(eval $(call ht_c_prog,test-misuse,$(v))))
$(foreach v,release debug hak glibc,$(eval $(call ht_c_prog,test-ctl,$(v))))
$(foreach v,release debug tsan,$(eval $(call ht_c_prog,test-mesh,$(v))))
$(foreach v,release glibc,$(eval $(call ht_c_prog,test-opts,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-syscalls,$(v))))
$(foreach v,release debug,$(eval $(call ht_c_prog,test-internal,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-prof,$(v))))
$(foreach v,release debug tsan,$(eval $(call ht_c_prog,test-guard,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-borrow,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-lists,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-policy,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-scavenge,$(v))))
$(foreach v,release glibc,$(eval $(call ht_c_prog,test-thp,$(v))))
# call sites are return addresses: no inlining or tail call may merge them
HT_X_test-sites := -O1 -fno-omit-frame-pointer
HT_X_test-sites-tsan := -DSITE_TSAN
$(foreach v,release tsan,$(eval $(call ht_c_prog,test-sites,$(v))))

# C++: operator new/delete (core_cxx), and heap profiling of a threaded
# program (core_prof)
$(foreach v,so glibc,$(eval $(call ht_cxx_prog,test-cxx,$(v))))
$(eval $(call ht_cxx_prog,test-prof-cxx,so))

# The rel_ cases' programs.  Misuse, faults and valgrind: -O1, as the
# scenarios were written against; the probes and the secure build's
# scenarios run under LD_PRELOAD of each allocator (-glibc); the
# exploitation cases are built as mimalloc-bench's suite builds its own: no
# optimisation, no builtins (every malloc, free and memcpy is a call), C++17.
HT_X_test-faults := -O1
HT_X_test-faults-cxx := -O1
HT_X_test-misuse-suite := -O1 -Wno-alloc-size-larger-than
HT_X_test-misuse-suite-cxx := -O1 -Wno-use-after-free
HT_X_test-valgrind := -O1
HT_X_test-probes := -O1
HT_X_test-probes-cxx := -O1
HT_X_test-secure := -O1
HT_X_test-sized-delete := -O1
HT_X_test-exploits := -O0 -Wno-free-nonheap-object
HT_X_test-exploits-cxx := -O0 -std=c++17
$(foreach p,test-faults test-misuse-suite test-valgrind,$(eval $(call ht_c_prog,$(p),release)))
$(foreach p,test-faults-cxx test-misuse-suite-cxx,$(eval $(call ht_cxx_prog,$(p),release)))
$(foreach p,test-probes test-exploits test-secure,$(eval $(call ht_c_prog,$(p),glibc)))
$(foreach p,test-probes-cxx test-exploits-cxx test-sized-delete,$(eval $(call ht_cxx_prog,$(p),glibc)))

# The fuzzer (tests/fuzz/fuzz_api.c, rel_fuzz.sh): clang and libFuzzer, so not in
# test-progs.  Its library is compiled again with clang, the `make asan` flags with
# the debug build's assertions (HAK_DEBUG=2) and coverage, so that libFuzzer sees
# hakmem's branches; FUZZ_LIB=asan links build/asan/libhakmem.a instead (gcc, no
# coverage: the fuzzer is then blind to the library).  fuzz_api_replay is the
# driver without libFuzzer, against build/asan/libhakmem.a.
HT_FZ          := $(HT_OUT)/fuzz
HT_FUZZ_CFLAGS := -std=gnu11 -g -O1 -Wall -Wextra -fno-omit-frame-pointer -fsanitize=address,undefined \
  -fno-sanitize-recover=undefined -Iinclude -pthread
HT_FUZZ_LIB    := $(if $(filter asan,$(FUZZ_LIB)),$(BUILD)/asan/libhakmem.a,$(HT_FZ)/hakmem-fuzz.o)
$(HT_FZ)/hakmem-fuzz.o: $(SRCS) $(HDRS) Makefile
	@mkdir -p $(HT_FZ)
	clang $(subst -DHAK_DEBUG=1,-DHAK_DEBUG=2,$(ASAN_CFLAGS)) -Wno-unknown-warning-option \
	  -fsanitize=fuzzer-no-link -c src/unity.c -o $@
$(HT_FZ)/fuzz_api: tests/fuzz/fuzz_api.c include/hakmem.h $(HT_FUZZ_LIB)
	@mkdir -p $(HT_FZ)
	clang $(HT_FUZZ_CFLAGS) -fsanitize=fuzzer $< $(HT_FUZZ_LIB) -o $@
$(HT_FZ)/fuzz_api_replay: tests/fuzz/fuzz_api.c include/hakmem.h $(BUILD)/asan/libhakmem.a
	@mkdir -p $(HT_FZ)
	$(CC) $(HT_FUZZ_CFLAGS) -DFUZZ_STANDALONE $< $(BUILD)/asan/libhakmem.a -o $@

.PHONY: test-progs
test-progs: $(HT_PROGS)

test: ; +@MAKE="$(MAKE)" tests/run.sh $(if $(J),-j $(J)) $(TESTS)
