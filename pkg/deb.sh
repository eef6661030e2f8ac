#!/usr/bin/env bash
# pkg/deb.sh OUTDIR — build hakmem's Debian packages (`make deb`).
# dpkg-buildpackage writes its results beside the source directory, so the
# source (the files git tracks or would track, or the tree less build/,
# results/ and .git) is copied to a work directory under OUTDIR, built there
# with `dpkg-buildpackage -us -uc -b`, and only the results are kept in
# OUTDIR: *.deb, *-dbgsym *.ddeb/*.deb, *.changes, *.buildinfo.  Nothing is
# written outside OUTDIR.  Needs dpkg-dev and debhelper (apt-get install
# dpkg-dev debhelper).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "deb: $*" >&2; exit 1; }
[[ $# -eq 1 ]] || die "usage: pkg/deb.sh OUTDIR"
for t in dpkg-buildpackage dpkg-parsechangelog dh; do
  command -v "$t" >/dev/null 2>&1 || die "$t not found (apt-get install dpkg-dev debhelper)"
done
mkdir -p "$1"
out=$(cd "$1" && pwd)

ver=$(sed -n 's/^#define HAKMEM_VERSION "\(.*\)"/\1/p' "$root/include/hakmem.h")
chver=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
[[ $chver == "$ver" ]] || die "debian/changelog is at $chver, include/hakmem.h at $ver: add a changelog entry"

work=$(mktemp -d "$out/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/hakmem-$ver
mkdir "$src"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # tracked files still present, and untracked ones .gitignore does not exclude
  (cd "$root" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$src"
else
  (cd "$root" && tar --exclude=./build --exclude=./results --exclude=./.git -cf - .) | tar -xf - -C "$src"
fi
[[ -x $src/debian/rules ]] || die "no debian/rules in the copied source"

export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$(nproc 2>/dev/null || echo 1)}"
unset MAKEFLAGS MFLAGS MAKELEVEL
echo "deb: building hakmem $ver in $src"
if ! (cd "$src" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log" >&2
  die "dpkg-buildpackage failed (log above)"
fi
cp "$work/build.log" "$out/build.log"
shopt -s nullglob
results=("$work"/*.deb "$work"/*.ddeb "$work"/*.changes "$work"/*.buildinfo)
[[ ${#results[@]} -gt 0 ]] || die "dpkg-buildpackage made no packages"
rm -f "$out"/*.deb "$out"/*.ddeb "$out"/*.changes "$out"/*.buildinfo
mv "${results[@]}" "$out"/
for f in "$out"/*.deb; do echo "deb: $f"; done
