#!/usr/bin/env bash
# Builds the Debian package of gtm: target/debian/gtm_VERSION_ARCH.deb.
#
#   scripts/package.sh [--profile release|dev] [--out DIR]
#
# release (default) builds an optimised binary; dev packages the binary the
# test suite already built (target/debug/gtm), as CI does, and builds it only
# when it is missing: `cargo build` would build it again, dependencies and
# all, with the features of a build without the tests' (docs/decisions.md).
# Needs cargo, dpkg-deb and gzip: the package is a staged tree given to
# `dpkg-deb --build`, nothing else to install.
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

version=$("$bin" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/gtm"

install -D -m 0755 "$bin" "$root/usr/bin/gtm"
# The line tables (for backtraces while developing) are most of the
# binary's size; a package ships without them, as Debian's do.
if command -v strip >/dev/null; then strip --strip-debug "$root/usr/bin/gtm"; fi
install -D -m 0644 packaging/gtm.service "$root/lib/systemd/system/gtm.service"
install -D -m 0640 packaging/node.toml "$root/etc/gtm/node.toml"

# One man page per command, from the command line's own definition.
man="$root/usr/share/man/man1"
mkdir -p "$man"
"$bin" manpages "$man" 2>/dev/null
gzip -9n "$man"/*.1

# Shell completions, where each shell looks for them.
install -d "$root/usr/share/bash-completion/completions" \
  "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d"
"$bin" completions bash >"$root/usr/share/bash-completion/completions/gtm"
"$bin" completions zsh >"$root/usr/share/zsh/vendor-completions/_gtm"
"$bin" completions fish >"$root/usr/share/fish/vendor_completions.d/gtm.fish"

doc="$root/usr/share/doc/gtm"
install -D -m 0644 packaging/debian/copyright "$doc/copyright"
install -m 0644 README.md "$doc/README.md"
for page in operations configuration cli cluster health api architecture; do
  install -m 0644 "docs/$page.md" "$doc/$page.md"
done
install -m 0644 config/example.toml "$doc/example.toml"
gzip -9n "$doc"/*.md "$doc/example.toml"
# The file operators are pointed at from the unit stays readable as is.
gunzip "$doc/operations.md.gz"

install -d "$root/DEBIAN"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
echo /etc/gtm/node.toml >"$root/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
  packaging/debian/control.in >"$root/DEBIAN/control"

mkdir -p "$out"
deb="$out/gtm_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
