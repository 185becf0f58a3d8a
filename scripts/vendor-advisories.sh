#!/usr/bin/env bash
# Keeps in the repository the part of the RustSec advisory database that
# concerns the locked crates (supply-chain/advisory-db/), so that
# scripts/deny.sh checks advisories on a machine that has no copy of the
# database and cannot fetch one (CI reaches no git host).
#
#   scripts/vendor-advisories.sh --from REPO   REPO: a clone or mirror of
#                                              rustsec/advisory-db
#
# Copies `crates/<name>/` for every crate named in Cargo.lock or
# fuzz/Cargo.lock, the database's licence (CC0-1.0), and writes:
#   SNAPSHOT  the database's commit and its date, which deny.sh reports;
#   CRATES    every crate name of both locks at this time: deny.sh refuses
#             the snapshot once a lock names a crate outside it, so a new
#             dependency is checked against the database, not against the
#             absence of its directory.
# Run again after a dependency change, and whenever a newer database is
# reachable.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/advisory-db.sh

from=
while [ $# -gt 0 ]; do
  case "$1" in
    --from) from="$2"; shift 2 ;;
    --from=*) from="${1#*=}"; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$from" ]; then
  echo "--from REPO is required (a clone or mirror of rustsec/advisory-db)" >&2
  exit 2
fi
advisory_clone_check "$from"

out=supply-chain/advisory-db
names=$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.lock fuzz/Cargo.lock | sort -u)
rm -rf "$out"
mkdir -p "$out/crates"
kept=0
for name in $names; do
  if [ -n "$(git -C "$from" ls-tree HEAD "crates/$name/")" ]; then
    mkdir -p "$out/crates/$name"
    # Each advisory of the crate, as the database holds it.
    git -C "$from" archive HEAD "crates/$name" | tar -x -C "$out"
    kept=$((kept + 1))
  fi
done
git -C "$from" show HEAD:LICENSE.txt > "$out/LICENSE.txt"
printf '%s\n' "$names" > "$out/CRATES"
{
  echo "commit $(git -C "$from" rev-parse HEAD)"
  echo "date $(git -C "$from" show -s --format=%cI HEAD)"
} > "$out/SNAPSHOT"
echo "vendored: advisories of $kept of $(printf '%s\n' "$names" | wc -l) locked crates," \
  "RustSec advisory-db $(git -C "$from" rev-parse --short=12 HEAD) of $(git -C "$from" show -s --format=%cs HEAD)"
