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
# (scripts/update-advisories.sh makes or refreshes it). Without a copy the
# advisories are not checked, and the script says so on its first line.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/advisory-db.sh

checks=(advisories bans licenses sources)
fuzz_checks=(advisories sources)
if [ -d "$ADVISORY_DB/crates" ]; then
  echo "deny: advisories from $(advisory_db_describe)"
else
  echo "deny: ADVISORIES NOT CHECKED: no RustSec advisory-db at $ADVISORY_DB" \
    "(scripts/update-advisories.sh makes one where GitHub is reachable, or --from a clone)"
  checks=(bans licenses sources)
  fuzz_checks=(sources)
fi

# cargo-deny reads every locked crate's manifest, for every platform;
# fetched here so that it can run offline.
cargo fetch --locked
cargo deny --offline --locked --workspace check "${checks[@]}"

# The fuzz workspace has its own lock. CI builds and runs it (libfuzzer-sys
# compiles libFuzzer's C++), so its sources and advisories matter; its
# binaries are never distributed, so its licences (libfuzzer-sys adds
# NCSA) are not checked, and its duplicate versions are the workspace's.
cargo fetch --locked --manifest-path fuzz/Cargo.toml
cargo deny --offline --locked --manifest-path fuzz/Cargo.toml check "${fuzz_checks[@]}"
