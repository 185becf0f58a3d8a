#!/usr/bin/env bash
# Builds the Debian package and checks it on this machine (run by .ci/run,
# as root):
# - the package: its contents, a libc dependency versioned by
#   dpkg-shlibdeps, md5sums, the changelog, and lintian with no error;
# - installed with dpkg: the gtm user, /etc/gtm/node.toml root:gtm 0640 (a
#   dpkg-statoverride), and the unit neither enabled nor started while the
#   node file has the shipped name, with a message saying what to do;
# - `gtm node check`: the shipped node file passes, broken copies fail
#   naming the key;
# - the man pages, read with man: EXIT STATUS, ENVIRONMENT and FILES in
#   section 1, gtm-node.toml(5) and gtm.toml(5), no warning from groff;
# - the operator names the device; installed again (an upgrade's path) the
#   unit is enabled and the node file's mode the operator set is kept;
# - the installed service started as its unit starts it (no systemd as PID
#   1 is needed: its ExecStartPre and ExecStart, as its User, with its
#   Environment, StateDirectory and capability), answering dig, and
#   `gtm status` with no flags, as root and as the service user;
# - the unit verified by systemd-analyze; removed (the unit masked) and
#   purged (nothing left of the package but /var/lib/gtm, by design).
#
#   scripts/package-test.sh [--profile release|dev]
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
if [ "${1:-}" = "--profile" ]; then profile="${2:?--profile needs release or dev}"; fi
for tool in dpkg-deb dpkg-shlibdeps dpkg-parsechangelog lintian dig systemd-analyze man setpriv; do
  command -v "$tool" >/dev/null || { echo "package test: $tool is missing" >&2; exit 1; }
done
if dpkg -s gtm >/dev/null 2>&1; then
  echo "package test: a gtm package is already installed; not touching it" >&2
  exit 1
fi
unit_link=/etc/systemd/system/multi-user.target.wants/gtm.service
for path in /var/lib/gtm /run/gtm "$unit_link" /etc/systemd/system/gtm.service; do
  if [ -e "$path" ] || [ -L "$path" ]; then
    echo "package test: $path exists; not touching it" >&2
    exit 1
  fi
done

deb=$(scripts/package.sh --profile "$profile")
work=$(mktemp -d)
pid=
had_user=$(getent passwd gtm >/dev/null && echo yes || true)
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  # Purged: the conffile goes too; and what the package keeps by design
  # (the user, /var/lib/gtm) and the unit's directories made here.
  dpkg -P gtm >/dev/null 2>&1 || true
  if [ -z "$had_user" ] && getent passwd gtm >/dev/null; then userdel gtm || true; fi
  rm -rf "$work" /var/lib/gtm /run/gtm
}
trap cleanup EXIT
fail() { echo "package test: $*" >&2; exit 1; }

echo "== contents of $deb"
dpkg-deb -I "$deb"
dpkg-deb -c "$deb" >"$work/contents"
for path in ./usr/bin/gtm ./lib/systemd/system/gtm.service ./etc/gtm/node.toml \
  ./usr/share/man/man1/gtm.1.gz ./usr/share/man/man1/gtm-serve.1.gz \
  ./usr/share/man/man1/gtm-record-drain.1.gz ./usr/share/man/man1/gtm-node-check.1.gz \
  ./usr/share/man/man5/gtm-node.toml.5.gz ./usr/share/man/man5/gtm.toml.5.gz \
  ./usr/share/bash-completion/completions/gtm ./usr/share/zsh/vendor-completions/_gtm \
  ./usr/share/fish/vendor_completions.d/gtm.fish \
  ./usr/share/doc/gtm/copyright ./usr/share/doc/gtm/changelog.Debian.gz \
  ./usr/share/doc/gtm/operations.md ./usr/share/gtm/monitoring/grafana-dashboard.json \
  ./usr/share/gtm/monitoring/gtm-alerts.rules.yml; do
  grep -q " $path\$" "$work/contents" || fail "$path is not in the package"
done
version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "the package's version is not the changelog's $version"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
[[ "$depends" =~ libc6\ \(\>=\ [0-9.]+\) ]] || fail "Depends has no versioned libc6 (dpkg-shlibdeps): $depends"
[[ "$depends" == *adduser* ]] || fail "Depends lacks adduser, which postinst runs"
mkdir "$work/control"
dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/gtm/node.toml "$work/control/conffiles" || fail "/etc/gtm/node.toml is not a conffile"
grep -q ' usr/bin/gtm$' "$work/control/md5sums" || fail "md5sums does not list usr/bin/gtm"
grep -q ' etc/gtm/node.toml$' "$work/control/md5sums" && fail "md5sums lists the conffile"
# The scripts use the Debian helpers, never useradd or a bare systemctl
# but daemon-reload (as debhelper's snippets do).
grep -q 'useradd' "$work/control/postinst" && fail "postinst calls useradd"
if grep -h 'systemctl ' "$work/control/postinst" "$work/control/prerm" "$work/control/postrm" |
  grep -v -e '^ *#' -e '^gtm: ' -e daemon-reload; then
  fail "a maintainer script calls systemctl other than for daemon-reload"
fi

echo "== lintian"
# Exit status non-zero on an error (lintian's default --fail-on).
if ! lintian "$deb" >"$work/lintian" 2>&1; then
  cat "$work/lintian" >&2
  fail "lintian reports an error"
fi
cat "$work/lintian"
grep -q '^E: ' "$work/lintian" && fail "lintian reports an error"

echo "== install"
dpkg -i "$deb" 2>&1 | tee "$work/install"
getent passwd gtm >/dev/null || fail "postinst did not create the gtm user"
[ "$(getent passwd gtm | cut -d: -f6,7)" = "/var/lib/gtm:/usr/sbin/nologin" ] ||
  fail "the gtm user is not a system user at /var/lib/gtm without a shell: $(getent passwd gtm)"
getent group gtm >/dev/null || fail "postinst did not create the gtm group"
/usr/bin/gtm --version | grep -q '^gtm ' || fail "the installed gtm does not run"
[ "$(stat -c '%U:%G %a' /etc/gtm/node.toml)" = "root:gtm 640" ] ||
  fail "/etc/gtm/node.toml is $(stat -c '%U:%G %a' /etc/gtm/node.toml), not root:gtm 640"
dpkg-statoverride --list /etc/gtm/node.toml | grep -qx 'root gtm 640 /etc/gtm/node.toml' ||
  fail "no statoverride keeps /etc/gtm/node.toml root:gtm 0640"
# The shipped name: neither enabled nor started, and the operator told why.
[ -L "$unit_link" ] && fail "the unit was enabled while the node file has the shipped name"
grep -q 'still names the' "$work/install" || fail "the install did not say why the service is not started"
grep -q 'systemctl enable --now gtm' "$work/install" || fail "the install did not say how to start the service"

echo "== the node file is checked"
# The check the unit runs before every start: the shipped file passes.
/usr/bin/gtm node check /etc/gtm/node.toml | grep -qx 'node file /etc/gtm/node.toml: ok' ||
  fail "gtm node check refuses the shipped node file"
grep -qx 'ExecStartPre=/usr/bin/gtm node check /etc/gtm/node.toml' /lib/systemd/system/gtm.service ||
  fail "the unit does not check the node file before it starts"
# Broken copies fail (exit 2, bad input), naming the key: an unknown one,
# a listen address without its port.
sed 's/^datacenter = .*/&\nbogus_setting = 1/' /etc/gtm/node.toml >"$work/broken.toml"
status=0
/usr/bin/gtm node check "$work/broken.toml" 2>"$work/check.err" || status=$?
[ "$status" -eq 2 ] || fail "gtm node check of a node file with an unknown key exited $status, not 2"
grep -q 'node setting bogus_setting' "$work/check.err" || { cat "$work/check.err" >&2; fail "gtm node check did not name the unknown key"; }
sed 's/^api_listen = .*/api_listen = "127.0.0.1"/' /etc/gtm/node.toml >"$work/broken.toml"
status=0
/usr/bin/gtm node check "$work/broken.toml" 2>"$work/check.err" || status=$?
[ "$status" -eq 2 ] || fail "gtm node check of a listen address without a port exited $status, not 2"
grep -q 'node setting api_listen' "$work/check.err" || { cat "$work/check.err" >&2; fail "gtm node check did not name api_listen"; }
# With no flags the CLI looks where /etc/gtm/node.toml says: /var/lib/gtm.
if env -u GTM_DATA_DIR -u GTM_NODE_FILE -u GTM_API /usr/bin/gtm status 2>"$work/status.err"; then
  fail "gtm status answered with no device running"
fi
grep -q '/var/lib/gtm has no api-address' "$work/status.err" || { cat "$work/status.err" >&2; fail "the CLI did not look in the node file's data_dir"; }

echo "== man pages"
export MANPAGER=cat MANWIDTH=80
man gtm >"$work/gtm.man" 2>/dev/null || fail "man gtm does not read"
for section in 'EXIT STATUS' ENVIRONMENT FILES; do
  grep -q "^$section" "$work/gtm.man" || fail "gtm(1) has no $section section"
done
for text in GTM_TIMEOUT GTM_NODE_FILE GTM_DATA_DIR GTM_LOG /etc/gtm/node.toml 'No quorum'; do
  grep -q -- "$text" "$work/gtm.man" || fail "gtm(1) does not mention $text"
done
man gtm-serve | grep -q -- '--config' || fail "gtm-serve(1) does not read"
man 5 gtm-node.toml >"$work/node.man" 2>/dev/null || fail "man 5 gtm-node.toml does not read"
for text in dns_listen data_dir tls_key 'gtm node check'; do
  grep -q -- "$text" "$work/node.man" || fail "gtm-node.toml(5) does not describe $text"
done
man 5 gtm.toml >"$work/config.man" 2>/dev/null || fail "man 5 gtm.toml does not read"
for text in responses_per_second expect_status dcs_to_select; do
  grep -q -- "$text" "$work/config.man" || fail "gtm.toml(5) does not describe $text"
done
# groff's warnings, as lintian reads pages (its manpage-has-errors-from-man).
for page in /usr/share/man/man5/gtm*.5.gz /usr/share/man/man1/gtm.1.gz /usr/share/man/man1/gtm-serve.1.gz; do
  LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null |
    grep -v -e "can't break line" -e 'cannot adjust line' >"$work/man.warn" || true
  [ -s "$work/man.warn" ] && { cat "$work/man.warn" >&2; fail "groff warns about $page"; }
done

echo "== the operator names the device; an upgrade enables the unit, keeps the mode"
sed -i -e 's/^name = .*/name = "pkgtest"/' \
  -e 's/^dns_listen = .*/dns_listen = ["127.0.101.1:53"]/' \
  -e 's/^api_listen = .*/api_listen = "127.0.101.1:8053"/' /etc/gtm/node.toml
chmod 0440 /etc/gtm/node.toml
dpkg -i "$deb" 2>&1 | tee "$work/upgrade"
grep -q 'still names the' "$work/upgrade" && fail "the upgrade said the device has no name"
[ -L "$unit_link" ] || fail "the upgrade did not enable the unit once the device was named"
[ "$(stat -c '%U:%G %a' /etc/gtm/node.toml)" = "root:gtm 440" ] ||
  fail "the upgrade reset /etc/gtm/node.toml to $(stat -c '%U:%G %a' /etc/gtm/node.toml)"
grep -qx 'name = "pkgtest"' /etc/gtm/node.toml || fail "the upgrade replaced the edited node file"

echo "== the installed service, started as its unit starts it"
unit=/lib/systemd/system/gtm.service
prop() { sed -n "s/^$1=//p" "$unit"; }
user=$(prop User)
[ "$user" = gtm ] && [ "$(prop Group)" = gtm ] || fail "the unit does not run as gtm"
[ "$(prop AmbientCapabilities)" = CAP_NET_BIND_SERVICE ] || fail "the unit's capability changed: update this test"
# StateDirectory and RuntimeDirectory, as systemd makes them.
install -d -o gtm -g gtm -m "$(prop StateDirectoryMode)" "/var/lib/$(prop StateDirectory)"
install -d -o gtm -g gtm -m "$(prop RuntimeDirectoryMode)" "/run/$(prop RuntimeDirectory)"
mapfile -t unit_env < <(prop Environment)
# The unit's command line $1 as the unit runs it: its user, group,
# capability, environment and umask. Run in the background, the process
# started is the service itself (exec all the way), so $! is its PID.
as_unit() {
  umask "$(prop UMask)"
  # shellcheck disable=SC2086 # the unit's command line, split as systemd splits it
  exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${unit_env[@]}" \
    RUNTIME_DIRECTORY=/run/gtm STATE_DIRECTORY=/var/lib/gtm \
    setpriv --reuid gtm --regid gtm --init-groups \
    --inh-caps +net_bind_service --ambient-caps +net_bind_service -- $1
}
(as_unit "$(prop ExecStartPre)") || fail "the unit's ExecStartPre refuses the node file"
as_unit "$(prop ExecStart)" 2>"$work/serve.log" &
pid=$!
answer=
for _ in $(seq 1 60); do
  # Until it listens dig fails (and prints its error on stdout): ask again.
  if answer=$(dig @127.0.101.1 -p 53 +time=1 +tries=1 +short CH TXT id.server 2>/dev/null) &&
    [ -n "$answer" ]; then
    break
  fi
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; fail "the service exited"; }
  sleep 1
done
[ "$answer" = '"pkgtest"' ] || { cat "$work/serve.log" >&2; fail "dig got '$answer', not the device name"; }
# `gtm status` with no flag: the node file's data_dir, its api-address and
# api-token; as root, and as the service user.
clean_env=(env -u GTM_DATA_DIR -u GTM_NODE_FILE -u GTM_API -u GTM_TOKEN -u GTM_CA -u GTM_TIMEOUT)
"${clean_env[@]}" /usr/bin/gtm status >"$work/status" 2>"$work/status.err" ||
  { cat "$work/status.err" >&2; fail "gtm status as root did not reach the installed service"; }
cat "$work/status"
"${clean_env[@]}" HOME=/var/lib/gtm setpriv --reuid gtm --regid gtm --init-groups \
  /usr/bin/gtm status >"$work/status.gtm" 2>"$work/status.err" ||
  { cat "$work/status.err" >&2; fail "gtm status as gtm did not reach the installed service"; }
"${clean_env[@]}" /usr/bin/gtm whoami >"$work/whoami" || fail "gtm whoami as root failed"
grep -q ' on pkgtest$' "$work/whoami" || { cat "$work/whoami" >&2; fail "gtm whoami does not name pkgtest"; }
[ "$(stat -c '%U %a' /var/lib/gtm/api-token)" = "gtm 600" ] || fail "the API token is not the gtm user's alone"
kill -TERM "$pid"
wait "$pid" || fail "the service did not stop cleanly on SIGTERM"
pid=
grep -q $'\x1b\[' "$work/serve.log" && fail "the log written to a file carries ANSI escape codes"

echo "== unit"
# verify wants the executables the unit names to exist: they do once installed.
systemd-analyze verify "$unit" 2>&1 | tee "$work/verify"
if grep -v -e 'Failed to .*bus' -e 'kernel-command-line' "$work/verify" | grep -q .; then
  fail "systemd-analyze verify complains about gtm.service"
fi

echo "== remove, purge"
dpkg -r gtm
[ ! -e /usr/bin/gtm ] || fail "dpkg -r left /usr/bin/gtm"
[ "$(readlink /etc/systemd/system/gtm.service)" = /dev/null ] || fail "dpkg -r did not mask the unit"
[ -e /etc/gtm/node.toml ] || fail "dpkg -r removed the node file (a conffile stays until purge)"
dpkg -P gtm
for path in /etc/gtm "$unit_link" /etc/systemd/system/gtm.service; do
  if [ -e "$path" ] || [ -L "$path" ]; then fail "dpkg -P left $path"; fi
done
dpkg-statoverride --list /etc/gtm/node.toml >/dev/null && fail "dpkg -P left the node file's statoverride"
[ -d /var/lib/gtm ] || fail "dpkg -P removed the data directory (it never should)"
echo "package test: ok"
echo "== lintian's report"
cat "$work/lintian"
