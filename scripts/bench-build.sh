#!/usr/bin/env bash
# Build times of a commit, on this machine: a clean `cargo test --workspace
# --no-run`, the rebuild after a one-line change in the API and in the
# resolution code, and the resolution code's own tests.
#
#   scripts/bench-build.sh [COMMIT ...]     (default: HEAD)
#
# Each commit is checked out in a temporary worktree with a target
# directory of its own (the registry's crates are downloaded once, into
# cargo's cache, before timing). Prints one line per measure: elapsed
# seconds and peak RSS of the whole cargo process tree's largest member.
# Works for both layouts: the API and resolve/ under src/ (one crate) or
# under crates/ (one crate each).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
commits=("$@")
[ ${#commits[@]} -eq 0 ] && commits=(HEAD)

measure() { # label, command...
  local label=$1; shift
  local log
  log=$(mktemp)
  /usr/bin/time -v "$@" >/dev/null 2>"$log" || { tail -20 "$log" >&2; rm -f "$log"; return 1; }
  local elapsed rss
  elapsed=$(grep 'Elapsed (wall clock)' "$log" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$log" | awk '{print $NF}')
  printf '%-44s %10s  %6d MiB\n' "$label" "$elapsed" $((rss / 1024))
  rm -f "$log"
}

for commit in "${commits[@]}"; do
  sha=$(git rev-parse --short "$commit")
  dir=$(mktemp -d)
  target=$(mktemp -d)
  trap 'git -C "$repo" worktree remove --force "$dir" >/dev/null 2>&1 || true; rm -rf "$target"' EXIT
  git worktree add --detach "$dir" "$commit" >/dev/null 2>&1
  (
    cd "$dir"
    export CARGO_TARGET_DIR=$target CARGO_INCREMENTAL=1
    cargo fetch --quiet
    if [ -d crates/api ]; then
      api=crates/api/src/routes.rs resolve=crates/resolve/src/lib.rs
      resolve_tests=(cargo test -p gtm-resolve)
    else
      api=src/api/routes.rs resolve=src/resolve/mod.rs
      resolve_tests=(cargo test --lib resolve::)
    fi
    echo "commit $sha ($(nproc) cores)"
    measure "clean: cargo test --workspace --no-run" cargo test --workspace --no-run
    echo "// a one-line change" >>"$api"
    measure "after a line in the API" cargo test --workspace --no-run
    echo "// a one-line change" >>"$resolve"
    measure "after a line in resolve" cargo test --workspace --no-run
    echo "// another line" >>"$resolve"
    measure "resolve's tests: ${resolve_tests[*]}" "${resolve_tests[@]}"
  )
  git worktree remove --force "$dir" >/dev/null 2>&1 || true
  rm -rf "$target"
  trap - EXIT
done
