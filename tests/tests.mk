# tests/tests.mk — included by the top Makefile.
#   make test-progs   build every test program, in every variant, into build/tests/
#   make test         build everything and run tests/run.sh (TESTS=pattern filters cases;
#                     J=N or make -jN runs N cases at once)
#
# Variants of one test source (see tests/hak_test.h):
#   -release  standard names (malloc, ...), libhakmem.a linked whole (overrides malloc)
#   -debug    standard names, build/debug/libhakmem.a (-O0, internal assertions)
#   -hak      hak_ names, libhakmem.a (run under valgrind)
#   -hakdebug hak_ names, build/debug/libhakmem.a
#   -asan     hak_ names, build/asan/libhakmem.a, -fsanitize=address,undefined
#   -tsan     hak_ names, build/tsan/libhakmem.a, -fsanitize=thread
#   -glibc    standard names, glibc only; hakmem extras found with dlsym, so the
#             program is run both plain and with LD_PRELOAD=build/libhakmem.so
#   -so       (C++) linked with build/libhakmem.so

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

HT_WHOLE = -Wl,--whole-archive $(1) -Wl,--no-whole-archive
HT_L_release  := $(BUILD)/libhakmem.a
HT_L_debug    := $(BUILD)/debug/libhakmem.a
HT_L_hak      := $(BUILD)/libhakmem.a
HT_L_hakdebug := $(BUILD)/debug/libhakmem.a
HT_L_asan     := $(BUILD)/asan/libhakmem.a
HT_L_tsan     := $(BUILD)/tsan/libhakmem.a
HT_L_glibc    :=

HT_HDRS := tests/hak_test.h include/hakmem.h tests/tests.mk

# $(call ht_c_prog,PROGRAM,VARIANT): build/tests/PROGRAM-VARIANT from tests/PROGRAM.c,
# with HT_X_PROGRAM and HT_X_PROGRAM-VARIANT added to the flags where a program needs more
define ht_c_prog
$(HT_OUT)/$(1)-$(2): tests/$(1).c $(HT_HDRS) $(HT_L_$(2))
	@mkdir -p $(HT_OUT)
	$$(CC) $(HT_CFLAGS) $(HT_F_$(2)) $(HT_X_$(1)) $(HT_X_$(1)-$(2)) $$< -o $$@ $(if $(HT_L_$(2)),$(call HT_WHOLE,$(HT_L_$(2)))) -ldl -lm
HT_PROGS += $(HT_OUT)/$(1)-$(2)
endef

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
$(foreach v,release,$(eval $(call ht_c_prog,test-borrow,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-lists,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-policy,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-scavenge,$(v))))
$(foreach v,release,$(eval $(call ht_c_prog,test-thp,$(v))))
# call sites are return addresses: no inlining or tail call may merge them
HT_X_test-sites := -O1 -fno-omit-frame-pointer
HT_X_test-sites-tsan := -DSITE_TSAN
$(foreach v,release tsan,$(eval $(call ht_c_prog,test-sites,$(v))))

# C++: linked with the shared library, and glibc-only for LD_PRELOAD.  The
# run-time name (SONAME) of build/libhakmem.so gets a symlink in build/tests/,
# which is on the program's rpath.
$(HT_OUT)/test-cxx-so: tests/test-cxx.cc $(HT_HDRS) $(BUILD)/libhakmem.so
	@mkdir -p $(HT_OUT)
	@soname=$$(objdump -p $(BUILD)/libhakmem.so | awk '$$1 == "SONAME" { print $$2 }'); \
	  if [ -n "$$soname" ] && [ "$$soname" != libhakmem.so ]; then \
	    ln -sf $(abspath $(BUILD))/libhakmem.so $(HT_OUT)/$$soname; fi
	$(CXX) $(HT_CXXFLAGS) -O2 $< -o $@ -L$(BUILD) -lhakmem \
	  -Wl,-rpath,$(abspath $(HT_OUT)):$(abspath $(BUILD)) -ldl
$(HT_OUT)/test-cxx-glibc: tests/test-cxx.cc $(HT_HDRS)
	@mkdir -p $(HT_OUT)
	$(CXX) $(HT_CXXFLAGS) -O2 $< -o $@ -ldl
HT_PROGS += $(HT_OUT)/test-cxx-so $(HT_OUT)/test-cxx-glibc
# heap profiling of a threaded C++ program (core_prof.sh)
$(HT_OUT)/prof-cxx-so: tests/prof-cxx.cc $(HT_HDRS) $(HT_OUT)/test-cxx-so
	$(CXX) $(HT_CXXFLAGS) -O2 $< -o $@ -L$(BUILD) -lhakmem \
	  -Wl,-rpath,$(abspath $(HT_OUT)):$(abspath $(BUILD))
HT_PROGS += $(HT_OUT)/prof-cxx-so

.PHONY: test-progs
test-progs: $(HT_PROGS)

test: ; +@MAKE="$(MAKE)" tests/run.sh $(if $(J),-j $(J)) $(TESTS)
