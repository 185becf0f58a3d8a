#!/usr/bin/env bash
# Refreshes the machine's copy of the RustSec advisory database that
# scripts/deny.sh checks the locked crates against, and prints the copy's
# commit and date.
#
#   scripts/update-advisories.sh              from GitHub (cargo deny fetch db)
#   scripts/update-advisories.sh --from REPO  from a clone or mirror of
#                                             rustsec/advisory-db (a path)
#
# The check itself never fetches (deny.sh runs cargo-deny offline): this
# script is the one step that needs the database's git host. Where that
# host is out of reach, bring a clone over and install it with --from.
# cargo-deny takes the time of this install as the copy's age, and fails
# the check 90 days later (deny.toml, maximum-db-staleness); the date the
# script prints is the database's own.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/advisory-db.sh

from=
while [ $# -gt 0 ]; do
  case "$1" in
    --from) from="$2"; shift 2 ;;
    --from=*) from="${1#*=}"; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ -z "$from" ]; then
  cargo deny fetch db
  if [ ! -d "$ADVISORY_DB/crates" ]; then
    echo "cargo deny fetch db left no database at $ADVISORY_DB:" \
      "this cargo-deny names its directory otherwise; update scripts/advisory-db.sh" >&2
    exit 1
  fi
else
  if ! dir=$(cd "$from" 2>/dev/null && pwd); then
    echo "--from $from: no such directory" >&2
    exit 2
  fi
  from=$dir
  advisory_clone_check "$from"
  if [ -d "$ADVISORY_DB/.git" ]; then
    git -C "$ADVISORY_DB" fetch -q --depth=1 "file://$from" HEAD
    git -C "$ADVISORY_DB" reset -q --hard FETCH_HEAD
  else
    mkdir -p "$(dirname "$ADVISORY_DB")"
    git clone -q --depth=1 "file://$from" "$ADVISORY_DB"
    # So that a later run without --from fetches from the real database.
    git -C "$ADVISORY_DB" remote set-url origin "$ADVISORY_DB_URL"
  fi
fi
echo "installed: $(advisory_db_describe)"
