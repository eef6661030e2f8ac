#!/usr/bin/env bash
# scripts/setup.sh with stand-ins for apt-get, dpkg-query, deb-systemd-helper
# and update-rc.d (nothing is installed): while apt-get installs, the
# policy-rc.d it points at (POLICY_RC_D) denies service starts (exit 101);
# afterwards a policy-rc.d that was there is back byte for byte, and one that
# was not is gone; redis-server, mariadb-server and memcached, when this run
# installed them, have their services disabled; a redis-server that was installed before is left alone; the
# packages README.md lists are the ones setup.sh installs.
set -euo pipefail
. tests/cases/core_lib.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

pkgs=$(bash scripts/setup.sh --list | awk '{ print $1 }')
bench_pkgs=$(bash scripts/setup.sh --bench --list | awk '{ print $1 }')
[[ -n $pkgs && -n $bench_pkgs ]] || die "scripts/setup.sh --list printed no packages"

echo "== README.md names every package scripts/setup.sh installs"
words=$(tr -s ' \n`,;:()' '\n' <README.md)
for p in $pkgs; do
  grep -qxF -- "$p" <<<"$words" || bad "README.md does not list $p"
done
echo "ok   $(wc -w <<<"$pkgs") packages"
for p in redis-server valgrind cmake; do
  ! grep -qx "$p" <<<"$bench_pkgs" || bad "setup.sh --bench installs $p, which only the tests need"
done

mkdir "$tmp/bin"
# dpkg-query -W -f=... PKG: installed when PKG is a line of $tmp/installed
cat >"$tmp/bin/dpkg-query" <<EOF
#!/bin/sh
p=\$(eval echo \\\${\$#})
if grep -qx "\$p" "$tmp/installed"; then printf 'ii '; exit 0; fi
exit 1
EOF
# apt-get install PKGS: runs the policy as invoke-rc.d would, records it, installs
cat >"$tmp/bin/apt-get" <<EOF
#!/bin/sh
[ "\$1" = update ] && exit 0
rc=none
if [ -x "\$POLICY_RC_D" ]; then "\$POLICY_RC_D" redis-server start; rc=\$?; fi
echo "policy-rc.d during install: \$rc" >>"$tmp/log"
for a in "\$@"; do case \$a in -*|install) ;; *) echo "\$a" >>"$tmp/installed" ;; esac; done
EOF
for t in deb-systemd-helper update-rc.d; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/log"\n' "$t" "$tmp" >"$tmp/bin/$t"
done
chmod +x "$tmp/bin"/*
mkdir -p "$tmp/lists"

# setup_run PRE-INSTALLED...: run setup.sh with these packages already installed
setup_run() {
  printf '%s\n' $pkgs | grep -vxF -f <(printf '%s\n' "$@") >"$tmp/missing" || true
  printf '%s\n' "$@" >"$tmp/installed"
  : >"$tmp/log"
  rc=0
  PATH="$tmp/bin:$PATH" POLICY_RC_D="$tmp/policy-rc.d" bash scripts/setup.sh >"$tmp/out" 2>&1 || rc=$?
  ((rc == 0)) || { bad "setup.sh exit status $rc"; sed 's/^/    /' "$tmp/out"; }
}

echo "== an existing policy-rc.d: denied during the install, put back afterwards"
printf '#!/bin/sh\n# the machine own policy\nexit 0\n' >"$tmp/policy-rc.d"
chmod 750 "$tmp/policy-rc.d"
cp -p "$tmp/policy-rc.d" "$tmp/policy.orig"
setup_run build-essential gcc make
grep -qx 'policy-rc.d during install: 101' "$tmp/log" || bad "service starts were not denied: $(cat "$tmp/log")"
cmp -s "$tmp/policy-rc.d" "$tmp/policy.orig" || bad "the previous policy-rc.d was not restored"
[[ $(stat -c %a "$tmp/policy-rc.d") == 750 ]] || bad "the previous policy-rc.d lost its mode"
[[ -z $(compgen -G "$tmp/policy-rc.d.*") ]] || bad "a saved copy was left behind: $(compgen -G "$tmp/policy-rc.d.*")"
grep -qx 'deb-systemd-helper disable redis-server.service' "$tmp/log" || bad "redis-server.service not disabled"
grep -qx 'update-rc.d redis-server disable' "$tmp/log" || bad "redis-server init script not disabled"
grep -q 'redis-server installed with its service disabled' "$tmp/out" || bad "setup.sh does not say it disabled redis-server"
for pu in mariadb-server:mariadb memcached:memcached; do
  grep -qx "deb-systemd-helper disable ${pu#*:}.service" "$tmp/log" || bad "${pu#*:}.service not disabled"
  grep -qx "update-rc.d ${pu#*:} disable" "$tmp/log" || bad "${pu#*:} init script not disabled"
  grep -q "${pu%%:*} installed with its service disabled" "$tmp/out" || bad "setup.sh does not say it disabled ${pu%%:*}"
done
echo "ok   $(grep 'policy-rc.d during' "$tmp/log"); restored; redis-server, mariadb, memcached disabled"

echo "== no policy-rc.d before: none after"
rm -f "$tmp/policy-rc.d"
setup_run build-essential
grep -qx 'policy-rc.d during install: 101' "$tmp/log" || bad "service starts were not denied: $(cat "$tmp/log")"
[[ ! -e $tmp/policy-rc.d ]] || bad "setup.sh left its policy-rc.d in place"
echo "ok   removed afterwards"

echo "== redis-server installed before this run: its service is not touched"
setup_run redis-server redis-tools
if grep -q 'redis-server' "$tmp/log"; then bad "an existing redis-server was touched: $(cat "$tmp/log")"; fi
echo "ok   left alone"

echo "== nothing missing: apt-get does not run"
# shellcheck disable=SC2086
setup_run $pkgs
[[ ! -s $tmp/log ]] || bad "apt-get ran with nothing missing: $(cat "$tmp/log")"
grep -q 'all packages present' "$tmp/out" || bad "no 'all packages present' line"
echo "ok   $(head -n 1 "$tmp/out")"

checks_done setup
echo "all setup checks passed"
