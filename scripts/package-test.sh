#!/usr/bin/env bash
# Builds the Debian package and checks it on this machine (run by .ci/run,
# as root): its contents, an install with dpkg, the shipped node file
# passing `gtm node check` and a broken copy failing it, the installed
# binary answering DNS on loopback and the CLI finding it through its node
# file, a man page, the unit verified by systemd-analyze, and the package
# removed again. No systemd as PID 1 is
# needed: the installed binary is started directly.
#
#   scripts/package-test.sh [--profile release|dev]
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
if [ "${1:-}" = "--profile" ]; then profile="${2:?--profile needs release or dev}"; fi
for tool in dpkg-deb dig systemd-analyze man; do
  command -v "$tool" >/dev/null || { echo "package test: $tool is missing" >&2; exit 1; }
done
if dpkg -s gtm >/dev/null 2>&1; then
  echo "package test: a gtm package is already installed; not touching it" >&2
  exit 1
fi

deb=$(scripts/package.sh --profile "$profile")
work=$(mktemp -d)
pid=
had_user=$(getent passwd gtm >/dev/null && echo yes || true)
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  # Purged: the conffile goes too; and the user the package created.
  dpkg -P gtm >/dev/null 2>&1 || true
  if [ -z "$had_user" ] && getent passwd gtm >/dev/null; then userdel gtm || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "package test: $*" >&2; exit 1; }

echo "== contents of $deb"
dpkg-deb -I "$deb"
dpkg-deb -c "$deb" >"$work/contents"
for path in ./usr/bin/gtm ./lib/systemd/system/gtm.service ./etc/gtm/node.toml \
  ./usr/share/man/man1/gtm.1.gz ./usr/share/man/man1/gtm-serve.1.gz \
  ./usr/share/man/man1/gtm-record-drain.1.gz \
  ./usr/share/bash-completion/completions/gtm ./usr/share/zsh/vendor-completions/_gtm \
  ./usr/share/fish/vendor_completions.d/gtm.fish \
  ./usr/share/doc/gtm/copyright ./usr/share/doc/gtm/operations.md; do
  grep -q " $path\$" "$work/contents" || fail "$path is not in the package"
done
dpkg-deb -f "$deb" Package Version Architecture
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/gtm/node.toml ||
  fail "/etc/gtm/node.toml is not a conffile"

echo "== install"
dpkg -i "$deb"
getent passwd gtm >/dev/null || fail "postinst did not create the gtm user"
/usr/bin/gtm --version | grep -q '^gtm ' || fail "the installed gtm does not run"

echo "== the node file is checked"
# The check the unit runs before every start: the shipped file passes.
/usr/bin/gtm node check /etc/gtm/node.toml | grep -qx 'node file /etc/gtm/node.toml: ok' ||
  fail "gtm node check refuses the shipped node file"
grep -qx 'ExecStartPre=/usr/bin/gtm node check /etc/gtm/node.toml' /lib/systemd/system/gtm.service ||
  fail "the unit does not check the node file before it starts"
# A broken copy fails, naming the key (an unknown one, a listen address
# without its port).
sed 's/^datacenter = .*/&\nbogus_setting = 1/' /etc/gtm/node.toml >"$work/broken.toml"
if /usr/bin/gtm node check "$work/broken.toml" 2>"$work/check.err"; then
  fail "gtm node check passed a node file with an unknown key"
fi
grep -q 'node setting bogus_setting' "$work/check.err" || { cat "$work/check.err" >&2; fail "gtm node check did not name the unknown key"; }
sed 's/^api_listen = .*/api_listen = "127.0.0.1"/' /etc/gtm/node.toml >"$work/broken.toml"
if /usr/bin/gtm node check "$work/broken.toml" 2>"$work/check.err"; then
  fail "gtm node check passed a listen address without a port"
fi
grep -q 'node setting api_listen' "$work/check.err" || { cat "$work/check.err" >&2; fail "gtm node check did not name api_listen"; }
# With no flags the CLI looks where /etc/gtm/node.toml says: /var/lib/gtm.
if env -u GTM_DATA_DIR -u GTM_NODE_FILE -u GTM_API /usr/bin/gtm status 2>"$work/status.err"; then
  fail "gtm status answered with no device running"
fi
grep -q '/var/lib/gtm has no api-address' "$work/status.err" || { cat "$work/status.err" >&2; fail "the CLI did not look in the node file's data_dir"; }

echo "== the installed binary serves DNS"
cat >"$work/node.toml" <<NODE
name = "pkgtest"
datacenter = "dc1"
data_dir = "$work/data"
dns_listen = ["127.0.101.1:5353"]
api_listen = "127.0.101.1:0"
NODE
/usr/bin/gtm serve --config "$work/node.toml" 2>"$work/serve.log" &
pid=$!
answer=
for _ in $(seq 1 60); do
  # Until it listens dig fails (and prints its error on stdout): ask again.
  if answer=$(dig @127.0.101.1 -p 5353 +time=1 +tries=1 +short CH TXT id.server 2>/dev/null) &&
    [ -n "$answer" ]; then
    break
  fi
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; fail "gtm serve exited"; }
  sleep 1
done
[ "$answer" = '"pkgtest"' ] || { cat "$work/serve.log" >&2; fail "dig got '$answer', not the device name"; }
# The CLI finds it through its node file, no --data-dir given.
env -u GTM_DATA_DIR -u GTM_API -u GTM_TOKEN GTM_NODE_FILE="$work/node.toml" /usr/bin/gtm whoami >"$work/whoami" ||
  fail "the CLI did not find the device through GTM_NODE_FILE"
grep -q ' on pkgtest$' "$work/whoami" || { cat "$work/whoami" >&2; fail "gtm whoami does not name pkgtest"; }
kill -TERM "$pid"
wait "$pid" || fail "gtm serve did not stop cleanly on SIGTERM"
pid=
grep -q $'\x1b\[' "$work/serve.log" && fail "the log written to a file carries ANSI escape codes"

echo "== man page and unit"
man -l /usr/share/man/man1/gtm-serve.1.gz 2>/dev/null | grep -q -- '--config' ||
  zcat /usr/share/man/man1/gtm-serve.1.gz | grep -q 'config' || fail "gtm-serve(1) does not read"
# verify wants the executables the unit names to exist: they do once installed.
systemd-analyze verify /lib/systemd/system/gtm.service 2>&1 | tee "$work/verify"
if grep -v -e 'Failed to .*bus' -e 'kernel-command-line' "$work/verify" | grep -q .; then
  fail "systemd-analyze verify complains about gtm.service"
fi

echo "== remove"
dpkg -r gtm
[ ! -e /usr/bin/gtm ] || fail "dpkg -r left /usr/bin/gtm"
echo "package test: ok"
