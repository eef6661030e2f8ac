# hakmem — Debian packages (included by the top-level Makefile).
#   make deb   build/deb/libhakmem0_*.deb, libhakmem-dev_*.deb (and their
#              -dbgsym, .changes and .buildinfo), from debian/ by
#              dpkg-buildpackage in a copy of the source under build/deb/
.PHONY: deb
deb:
	pkg/deb.sh $(BUILD)/deb
