# hakmem — install / uninstall (included by the top-level Makefile).
#   make install   [PREFIX=/usr/local] [DESTDIR=] [LIBDIR=] [INCLUDEDIR=] [BINDIR=] [MANDIR=]
#   make uninstall (same variables)
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
BINDIR       ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR     ?= $(LIBDIR)/cmake/hakmem
MANDIR       ?= $(PREFIX)/share/man
INSTALL      ?= install

HAK_VERSION := $(shell sed -n 's/^.define HAKMEM_VERSION "\(.*\)"/\1/p' include/hakmem.h)
HAK_SOMAJOR := $(firstword $(subst ., ,$(HAK_VERSION)))
HAK_comma   := ,
HAK_SONAME  := $(patsubst -Wl$(HAK_comma)-soname$(HAK_comma)%,%,$(filter -Wl$(HAK_comma)-soname$(HAK_comma)%,$(LIB_LDFLAGS)))
HAK_SONAME  := $(or $(HAK_SONAME),libhakmem.so)
HAK_REALNAME := libhakmem.so.$(HAK_VERSION)
# Pointer size of the target, for the CMake version check (evaluated on use).
HAK_SIZEOF_VOID_P = $(shell echo __SIZEOF_POINTER__ | $(CC) -E -P -x c - 2>/dev/null | tr -d ' \n')
# In hakmem.pc, paths under PREFIX are written relative to ${prefix}.
HAK_PC_LIBDIR := $(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))
HAK_PC_INCDIR := $(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))

HAK_SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(HAK_VERSION)|g' \
  -e 's|@SONAME@|$(HAK_SONAME)|g' -e 's|@SOMAJOR@|$(HAK_SOMAJOR)|g' \
  -e 's|@SIZEOF_VOID_P@|$(HAK_SIZEOF_VOID_P)|g'
# The secure and no-override libraries install like libhakmem.so: NAME.so.VERSION,
# its run-time name NAME.so.MAJOR and the link-time name NAME.so.
HAK_EXTRA_LIBS := libhakmem-secure libhakmem-nooverride
HAK_SO_NAMES = $(1).so.$(HAK_VERSION) $(1).so.$(HAK_SOMAJOR) $(1).so
HAK_INSTALLED := \
  $(LIBDIR)/$(HAK_REALNAME) $(LIBDIR)/libhakmem.so.$(HAK_SOMAJOR) $(LIBDIR)/libhakmem.so \
  $(foreach l,$(HAK_EXTRA_LIBS),$(addprefix $(LIBDIR)/,$(call HAK_SO_NAMES,$(l)))) \
  $(LIBDIR)/libhakmem.a $(LIBDIR)/libhakmem-nooverride.a \
  $(INCLUDEDIR)/hakmem.h $(BINDIR)/hakmem $(MANDIR)/man1/hakmem.1 $(PKGCONFIGDIR)/hakmem.pc $(PKGCONFIGDIR)/hakmem-nooverride.pc \
  $(CMAKEDIR)/hakmemConfig.cmake $(CMAKEDIR)/hakmemConfigVersion.cmake

.PHONY: install uninstall
install: all
	@test -n "$(HAK_VERSION)" || { echo "install: no HAKMEM_VERSION in include/hakmem.h" >&2; exit 1; }
	$(INSTALL) -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR) \
	  $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(MANDIR)/man1
	$(INSTALL) -m 644 $(BUILD)/libhakmem.so $(DESTDIR)$(LIBDIR)/$(HAK_REALNAME)
	ln -sf $(HAK_REALNAME) $(DESTDIR)$(LIBDIR)/libhakmem.so.$(HAK_SOMAJOR)
	ln -sf libhakmem.so.$(HAK_SOMAJOR) $(DESTDIR)$(LIBDIR)/libhakmem.so
	for l in $(HAK_EXTRA_LIBS); do \
	  $(INSTALL) -m 644 $(BUILD)/$$l.so $(DESTDIR)$(LIBDIR)/$$l.so.$(HAK_VERSION) && \
	  ln -sf $$l.so.$(HAK_VERSION) $(DESTDIR)$(LIBDIR)/$$l.so.$(HAK_SOMAJOR) && \
	  ln -sf $$l.so.$(HAK_SOMAJOR) $(DESTDIR)$(LIBDIR)/$$l.so || exit 1; \
	done
	$(INSTALL) -m 644 $(BUILD)/libhakmem.a $(DESTDIR)$(LIBDIR)/libhakmem.a
	$(INSTALL) -m 644 $(BUILD)/libhakmem-nooverride.a $(DESTDIR)$(LIBDIR)/libhakmem-nooverride.a
	$(INSTALL) -m 644 include/hakmem.h $(DESTDIR)$(INCLUDEDIR)/hakmem.h
	sed -e 's|@LIBDIR_DEFAULT@|$(LIBDIR)|' tools/hakmem.in > $(DESTDIR)$(BINDIR)/hakmem.tmp
	chmod 755 $(DESTDIR)$(BINDIR)/hakmem.tmp && mv -f $(DESTDIR)$(BINDIR)/hakmem.tmp $(DESTDIR)$(BINDIR)/hakmem
	$(INSTALL) -m 644 tools/hakmem.1 $(DESTDIR)$(MANDIR)/man1/hakmem.1
	$(HAK_SUBST) -e 's|@LIBDIR@|$(HAK_PC_LIBDIR)|g' -e 's|@INCLUDEDIR@|$(HAK_PC_INCDIR)|g' \
	  pkg/hakmem.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/hakmem.pc
	$(HAK_SUBST) -e 's|@LIBDIR@|$(HAK_PC_LIBDIR)|g' -e 's|@INCLUDEDIR@|$(HAK_PC_INCDIR)|g' \
	  pkg/hakmem-nooverride.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/hakmem-nooverride.pc
	$(HAK_SUBST) -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	  pkg/hakmemConfig.cmake.in > $(DESTDIR)$(CMAKEDIR)/hakmemConfig.cmake
	$(HAK_SUBST) pkg/hakmemConfigVersion.cmake.in > $(DESTDIR)$(CMAKEDIR)/hakmemConfigVersion.cmake

uninstall:
	rm -f $(addprefix $(DESTDIR),$(HAK_INSTALLED))
	rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null || true
