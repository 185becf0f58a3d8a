#!/usr/bin/env bash
# Fault injection, long (docs/cluster.md "Fault injection"): three gtm
# processes on 127.0.77.x under a writer loop while a nemesis kills -9 and
# restarts devices, pauses the leader and partitions one device with
# nftables; then the checker. Needs root, nft and setpriv.
#
#   scripts/chaos.sh [--cycles N] [--writers W] [--seed S] [--keep]
#
# --cycles   fault cycles (each: a kill -9 + restart, a SIGSTOP of the
#            leader, a partition; in random order), default 100
# --writers  concurrent writers, each alternating through every device
#            (default 3, one per device)
# --seed     repeats the nemesis' choices (not the timing)
# --keep     keeps the devices' data directories (their serve.log) and
#            prints where
# It prints the summary line and exits non-zero when the checker failed.
set -euo pipefail
cd "$(dirname "$0")/.."

cycles=100
while [ $# -gt 0 ]; do
  case "$1" in
    --cycles) cycles="$2"; shift 2 ;;
    --writers) export GTM_CHAOS_WRITERS="$2"; shift 2 ;;
    --seed) export GTM_CHAOS_SEED="$2"; shift 2 ;;
    --keep) export GTM_CHAOS_KEEP=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "chaos.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$cycles" in
  ''|*[!0-9]*) echo "chaos.sh: --cycles needs a number, not '$cycles'" >&2; exit 2 ;;
esac

# Build once, then run the test binary itself (no cargo lock held while it
# runs, so other builds in this tree can proceed).
built=$(cargo test --test tests --no-run 2>&1) || { echo "$built" >&2; exit 1; }
binary=$(echo "$built" | sed -n 's/.*Executable tests\/tests.rs (\(.*\))/\1/p' | tail -n 1)
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
  echo "chaos.sh: cannot find the test binary in cargo's output:" >&2
  echo "$built" >&2
  exit 1
fi
log=$(mktemp "${TMPDIR:-/tmp}/gtm-chaos.XXXXXX")
echo "chaos.sh: $cycles cycles; full output in $log"
status=0
GTM_CHAOS_CYCLES="$cycles" "$binary" --exact \
  chaos::chaos_acknowledged_writes_survive_kills_pauses_and_partitions \
  --nocapture >"$log" 2>&1 || status=$?
grep '^chaos:' "$log" || true
if [ "$status" -ne 0 ]; then
  # The failure names the lost writes; show its first lines.
  grep -A4 'panicked at' "$log" | cut -c1-2000 || true
  echo "chaos.sh: FAILED (exit $status); see $log" >&2
fi
exit "$status"
