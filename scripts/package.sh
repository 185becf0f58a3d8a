#!/usr/bin/env bash
# Builds the Debian package of gtm: target/debian/gtm_VERSION_ARCH.deb.
#
#   scripts/package.sh [--profile release|dev] [--out DIR]
#
# release (default) builds an optimised binary; dev packages the binary the
# test suite already built (target/debug/gtm), as CI does, and builds it only
# when it is missing: `cargo build` would build it again, dependencies and
# all, with the features of a build without the tests' (docs/decisions.md).
# Needs cargo, dpkg-deb, dpkg-shlibdeps and dpkg-parsechangelog (dpkg-dev)
# and gzip: the package is a staged tree given to `dpkg-deb --build`, laid
# out as debhelper would (docs/decisions.md, Operator surface).
#
# The package's version is the top entry of packaging/debian/changelog,
# whose upstream part must be the binary's version: a new version of gtm
# gets a new changelog entry.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
out=target/debian
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="${2:?--profile needs release or dev}"; shift 2 ;;
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    *) echo "usage: $0 [--profile release|dev] [--out DIR]" >&2; exit 2 ;;
  esac
done
case "$profile" in
  release) cargo build --release --bin gtm; bin=target/release/gtm ;;
  dev)
    bin=target/debug/gtm
    [ -x "$bin" ] || cargo build --bin gtm
    ;;
  *) echo "unknown profile '$profile': release or dev" >&2; exit 2 ;;
esac

upstream=$("$bin" --version | awk '{print $2}')
version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
if [ "${version%-*}" != "$upstream" ]; then
  echo "packaging/debian/changelog is at $version, the binary is gtm $upstream: add an entry for $upstream-1" >&2
  exit 1
fi
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# Laid out as a source tree for dpkg-shlibdeps: debian/control, debian/gtm/.
root="$stage/debian/gtm"
umask 0022

install -D -m 0755 "$bin" "$root/usr/bin/gtm"
# As dh_strip: no debug sections, symbols or notes (a release build's
# panics still name their place; the line tables were most of the size).
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$root/usr/bin/gtm"
install -D -m 0644 packaging/gtm.service "$root/lib/systemd/system/gtm.service"
# 0644 as shipped; postinst makes it root:gtm 0640 with dpkg-statoverride.
install -D -m 0644 packaging/node.toml "$root/etc/gtm/node.toml"

# Man pages, from the command line's own definition (section 1: one per
# command, with EXIT STATUS, ENVIRONMENT and FILES) and from
# docs/configuration.md (section 5: gtm.toml and gtm-node.toml).
"$bin" manpages "$root/usr/share/man" 2>/dev/null
gzip -9n "$root"/usr/share/man/man1/*.1 "$root"/usr/share/man/man5/*.5

# Shell completions, where each shell looks for them.
install -d "$root/usr/share/bash-completion/completions" \
  "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d"
"$bin" completions bash >"$root/usr/share/bash-completion/completions/gtm"
"$bin" completions zsh >"$root/usr/share/zsh/vendor-completions/_gtm"
"$bin" completions fish >"$root/usr/share/fish/vendor_completions.d/gtm.fish"

doc="$root/usr/share/doc/gtm"
install -D -m 0644 packaging/debian/copyright "$doc/copyright"
install -m 0644 packaging/debian/changelog "$doc/changelog.Debian"
gzip -9n "$doc/changelog.Debian"
# The lintian tags overridden, each with its reason (docs/decisions.md).
install -D -m 0644 packaging/debian/lintian-overrides "$root/usr/share/lintian/overrides/gtm"
install -m 0644 README.md "$doc/README.md"
for page in operations configuration cli cluster health api architecture; do
  install -m 0644 "docs/$page.md" "$doc/$page.md"
done
install -m 0644 config/example.toml "$doc/example.toml"
# The Grafana dashboard and Prometheus alert rules (integrations/monitoring).
share="$root/usr/share/gtm/monitoring"
install -D -m 0644 integrations/monitoring/grafana-dashboard.json "$share/grafana-dashboard.json"
install -m 0644 integrations/monitoring/gtm-alerts.rules.yml integrations/monitoring/gtm-alerts.test.yml "$share/"
gzip -9n "$doc"/*.md "$doc/example.toml"
# The file operators are pointed at from the unit stays readable as is.
gunzip "$doc/operations.md.gz"

# Every timestamp that of the changelog's entry, as dh_builddeb does.
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l packaging/debian/changelog -S Timestamp)

# The shared libraries' packages, at the versions the binary needs
# (dpkg-shlibdeps finds the package's root by its DEBIAN directory).
install -d "$root/DEBIAN"
printf 'Source: gtm\n\nPackage: gtm\nArchitecture: any\n' >"$stage/debian/control"
shlibs=$(cd "$stage" && dpkg-shlibdeps -O "$root/usr/bin/gtm")
shlibs=${shlibs#shlibs:Depends=}
[ -n "$shlibs" ] || { echo "dpkg-shlibdeps found no library the binary needs" >&2; exit 1; }

# The device name the node file ships: postinst leaves the unit alone
# while the operator has not replaced it.
shipped_name=$(sed -n 's/^name = "\([^"]*\)".*/\1/p' packaging/node.toml)
[ -n "$shipped_name" ] || { echo "packaging/node.toml has no name = \"...\" line" >&2; exit 1; }
sed "s/@SHIPPED_NAME@/$shipped_name/" packaging/debian/postinst >"$root/DEBIAN/postinst"
chmod 0755 "$root/DEBIAN/postinst"
install -m 0755 packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
echo /etc/gtm/node.toml >"$root/DEBIAN/conffiles"
# As dh_md5sums: every file but the conffiles (dpkg keeps their sums).
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\n' |
  grep -vxF -f <(sed 's|^/||' DEBIAN/conffiles) | LC_ALL=C sort | xargs -d '\n' md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"
find "$root" -depth -newermt "@$SOURCE_DATE_EPOCH" -print0 |
  xargs -0r touch --no-dereference --date="@$SOURCE_DATE_EPOCH"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
  -e "s/@SHLIBS@/$shlibs/" packaging/debian/control.in >"$root/DEBIAN/control"

mkdir -p "$out"
deb="$out/gtm_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
