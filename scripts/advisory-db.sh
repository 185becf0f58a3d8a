# shellcheck shell=bash
# advisory-db.sh - where the RustSec advisory database that `cargo deny`
# reads (deny.toml, [advisories]) lives on this machine, and what it is.
# Sourced by scripts/deny.sh and scripts/update-advisories.sh.

# shellcheck disable=SC2034  # the variables set here are the scripts' to use

# The git URL named by deny.toml's db-urls.
ADVISORY_DB_URL=https://github.com/rustsec/advisory-db
# cargo-deny 0.20 keeps that database in $CARGO_HOME/advisory-dbs/, in a
# directory named by the URL's last segment and the xxHash64 of the
# lowercased URL (its url_to_db_path); a cargo-deny that names it otherwise
# makes scripts/update-advisories.sh stop with an error.
ADVISORY_DB="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs/advisory-db-3157b0e258782691"

# Prints the copy's commit, the commit's date and its age in days.
advisory_db_describe() {
  local commit date age
  commit=$(git -C "$ADVISORY_DB" rev-parse --short=12 HEAD)
  date=$(git -C "$ADVISORY_DB" show -s --format=%cs HEAD)
  age=$(( ($(date +%s) - $(git -C "$ADVISORY_DB" show -s --format=%ct HEAD)) / 86400 ))
  echo "RustSec advisory-db $commit of $date ($age days old)"
}

# Exits (status 2) with the reason unless $1 is a clone of the advisory
# database: a git repository whose HEAD has a crates/ directory.
advisory_clone_check() {
  if ! git -C "$1" rev-parse -q --verify 'HEAD^{commit}' >/dev/null 2>&1; then
    echo "--from $1: not a git repository with a commit" >&2
    exit 2
  fi
  if [ -z "$(git -C "$1" ls-tree HEAD crates)" ]; then
    echo "--from $1: HEAD has no crates/ directory; not the RustSec advisory-db" >&2
    exit 2
  fi
}
