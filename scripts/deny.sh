#!/usr/bin/env bash
# The supply-chain check with cargo-deny (deny.toml; why each entry is
# there: docs/decisions.md, "Supply chain"): the RustSec advisories,
# licences, sources and duplicate versions of the workspace's locked
# crates, and the advisories and sources of the fuzz workspace's.
#
#   scripts/deny.sh
#
# Needs cargo-deny (.ci/run installs it) and reaches only crates.io: the
# advisory database is read from the machine's copy, never fetched
# (scripts/update-advisories.sh makes or refreshes it). A machine without a
# copy gets one made from the snapshot kept in supply-chain/advisory-db/
# (scripts/vendor-advisories.sh): the advisories of every locked crate as
# of the snapshot's date, which the first line reports.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/advisory-db.sh

vendored=supply-chain/advisory-db

# The crate names of both locks, one a line, sorted.
locked_names() {
  sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.lock fuzz/Cargo.lock | sort -u
}

# Installs the kept snapshot as the machine's copy: a one-commit clone
# dated as the database was.
install_vendored() {
  local missing date tmp
  missing=$(comm -23 <(locked_names) <(sort -u "$vendored/CRATES"))
  if [ -n "$missing" ]; then
    echo "deny: the locks name crates the advisory snapshot in $vendored was not made for:" \
      $missing "- run scripts/vendor-advisories.sh --from a clone of rustsec/advisory-db" >&2
    exit 1
  fi
  date=$(sed -n 's/^date //p' "$vendored/SNAPSHOT")
  tmp=$(mktemp -d)
  cp -a "$vendored/." "$tmp/"
  git -C "$tmp" init -q
  git -C "$tmp" add -A
  GIT_AUTHOR_DATE="$date" GIT_COMMITTER_DATE="$date" git -C "$tmp" \
    -c user.name=gtm -c user.email=gtm@localhost commit -q \
    -m "RustSec advisory-db $(sed -n 's/^commit //p' "$vendored/SNAPSHOT"): the locked crates' advisories"
  scripts/update-advisories.sh --from "$tmp" >/dev/null
  rm -rf "$tmp"
}

if [ -d "$ADVISORY_DB/crates" ]; then
  echo "deny: advisories from $(advisory_db_describe)"
else
  install_vendored
  echo "deny: advisories from the snapshot in $vendored: $(advisory_db_describe)"
fi

# cargo-deny reads every locked crate's manifest, for every platform;
# fetched here so that it can run offline.
cargo fetch --locked
cargo deny --offline --locked --workspace check advisories bans licenses sources

# The fuzz workspace has its own lock. CI builds and runs it (libfuzzer-sys
# compiles libFuzzer's C++), so its sources and advisories matter; its
# binaries are never distributed, so its licences (libfuzzer-sys adds
# NCSA) are not checked, and its duplicate versions are the workspace's.
cargo fetch --locked --manifest-path fuzz/Cargo.toml
cargo deny --offline --locked --manifest-path fuzz/Cargo.toml check advisories sources
