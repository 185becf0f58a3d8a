#!/usr/bin/env bash
# Runs the fuzz targets (cargo fuzz, nightly) for a bounded time each and
# prints, per target, the executions and the findings.
#
#   scripts/fuzz.sh [--seconds N] [--seed N --runs N] [target...]
#
# --seed and --runs make a run repeatable: libFuzzer's mutations follow the
# seed, and --runs bounds each target by executions instead of time, so CI
# explores the same inputs that passed here (`.ci/run`).
#
# Default: every target, 600 s each. The evolving corpus is kept in
# fuzz/work/<target>/ (seeded from fuzz/corpus/<target>/, which stays
# small); crashes go to fuzz/artifacts/<target>/. Exits 1 when a target
# found something. See docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=(udp_query tcp_framing config condition raft_rpc peer_report zonefile transfer_in)
seconds=600
seed=
runs=
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seconds=*) seconds="${1#*=}"; shift ;;
    --seed) seed="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "unknown target $t (known: ${ALL[*]})" >&2; exit 2; }
done

# No sanitizer: gtm is safe Rust; debug assertions and overflow checks are on.
start=$(date +%s)
cargo +nightly fuzz build -s none >/dev/null 2>fuzz-build.log \
  || { cat fuzz-build.log >&2; rm -f fuzz-build.log; exit 1; }
rm -f fuzz-build.log
echo "fuzz build: $(( $(date +%s) - start )) s"
bin=fuzz/target/x86_64-unknown-linux-gnu/release

failed=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/work/$t" "fuzz/artifacts/$t"
  before=$(ls "fuzz/artifacts/$t" | wc -l)
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=("-dict=fuzz/dict/$t.dict")
  [ -n "$seed" ] && dict+=("-seed=$seed")
  [ -n "$runs" ] && dict+=("-runs=$runs")
  log="fuzz/work/$t.log"
  set +e
  "$bin/$t" "fuzz/work/$t" "fuzz/corpus/$t" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="fuzz/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  after=$(ls "fuzz/artifacts/$t" | wc -l)
  found=$(( after - before ))
  corpus=$(ls "fuzz/work/$t" | wc -l)
  echo "$t: ${execs:-?} executions in ${seconds} s, corpus ${corpus}, findings ${found} (exit ${rc})"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    failed=1
    grep -m1 -A8 "panicked at\|ERROR: libFuzzer" "$log" | cut -c1-400 | sed "s/^/    /" || true
    ls -t "fuzz/artifacts/$t" | head -3 | sed "s|^|    fuzz/artifacts/$t/|"
  fi
done
exit $failed
