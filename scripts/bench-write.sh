#!/usr/bin/env bash
# bench-write.sh - what one-record writes cost on one device holding many
# records: the figure docs/performance.md follows between runs of
# scripts/bench-scale.sh, in a few minutes instead of its whole run.
#
# One gtm (`udp_workers = 1`, data in a temporary directory) on
# 127.0.191.3; the configuration of scripts/bench-scale.py (RECORDS A
# records in ten domains b000.test ... b009.test) is PUT one domain at a
# time (`PUT /api/v1/domains/D`), then WRITES one-record writes
# (`PUT /api/v1/domains/b003.test/records/rNNNNNNN/A`, a new address
# each) are sent with curl, one after the other, each timed until the API
# answers (it answers once the write is committed and installed). RSS is
# read 10 s after the last domain's PUT and after the writes. With
# --perf, `perf record --call-graph dwarf` records the device during the
# writes (perf.data is kept in the printed directory).
#
# Usage: scripts/bench-write.sh [--records N] [--writes N] [--perf]
#                               [--no-build] [--keep-tmp]
#   --records N  records in all, a multiple of 10 (default 1000000)
#   --writes N   one-record writes (default 6)
#   --perf       record a profile of the writes (needs perf; keeps the
#                temporary directory, where perf.data is)
#   --no-build   skip `cargo build --release` (GTM_BIN must exist)
#   --keep-tmp   keep the temporary directory (configuration, log)
# Environment: GTM_BIN (default target/release/gtm), RUST_LOG for gtm
#   (default warn).
#
# Only loopback is contacted; the script stops only the processes it
# started, by PID, and removes its temporary directory on exit.
set -euo pipefail

# Shared mechanics: log/die, options, cleanup, build, the temporary directory.
# shellcheck source=scripts/bench-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-write "$@"

RECORDS=1000000 WRITES=6 PERF=0
while (($#)); do
    case $1 in
        --records) RECORDS=${2:?--records needs a value}; shift 2 ;;
        --writes) WRITES=${2:?--writes needs a value}; shift 2 ;;
        --perf) PERF=1 KEEP_TMP=1; shift ;;
        *) bench_option "$@"; shift "$OPT_SHIFT" ;;   # --no-build, --keep-tmp, -h
    esac
done
in_range --records "$RECORDS" 10 2000000
((RECORDS % 10 == 0)) || die "--records must be a multiple of 10"
in_range --writes "$WRITES" 1 $((RECORDS / 10 - 1))
GTM_BIN=${GTM_BIN:-$REPO_ROOT/target/release/gtm}
IP=127.0.191.3 API=8053

# Stops the device and perf by PID, however the script ends.
bench_traps each
install_missing python3=python3-minimal curl=curl
((PERF)) && install_missing perf=linux-perf
if ((BUILD)); then build_gtm; fi
[[ -x $GTM_BIN ]] || die "$GTM_BIN not found; build it, set GTM_BIN, or drop --no-build"
port_busy tcp "$API" "$IP" && die "TCP $IP:$API is already in use"
make_tmp
rss() { echo "$(($(awk '/VmRSS/ {print $2}' "/proc/$PID/status") / 1024)) MiB"; }

log "configuration: $RECORDS records in 10 domains"
python3 "$REPO_ROOT/scripts/bench-scale.py" gen --records "$RECORDS" --domains 10 \
    --markers 198.51.100.200,198.51.100.201,198.51.100.202 --dir "$TMP/gen" >/dev/null
mkdir -p "$TMP/data"
cat >"$TMP/gtm.toml" <<EOF
name = "gtm1"
datacenter = "dc1"
data_dir = "$TMP/data"
dns_listen = ["$IP:1053"]
api_listen = "$IP:$API"
udp_workers = 1
EOF
RUST_LOG=${RUST_LOG:-warn} "$GTM_BIN" serve --config "$TMP/gtm.toml" >"$TMP/gtm.log" 2>&1 &
PID=$!
STARTED_PIDS+=("$PID")
for _ in $(seq 150); do
    [[ -s $TMP/data/api-token ]] && curl -s -m 2 -o /dev/null "http://$IP:$API/api/v1/status" && break
    kill -0 "$PID" 2>/dev/null || die "gtm exited; see $TMP/gtm.log"
    sleep 0.2
done
[[ -s $TMP/data/api-token ]] || die "gtm did not start its API within 30 s"
TOKEN=$(cat "$TMP/data/api-token")
# put PATH BODY: prints the HTTP status and the seconds it took.
put() {
    curl -s -m 600 -o "$TMP/answer" -w '%{http_code} %{time_total}' -X PUT \
        -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
        --data-binary "$2" "http://$IP:$API$1"
}
for d in $(seq 0 9); do
    name=$(printf b%03d "$d")
    log "domain $name.test: $(put "/api/v1/domains/$name.test" "@$TMP/gen/dom-$name.json") s"
done
sleep 10
log "RSS after the domains: $(rss)"
if ((PERF)); then
    perf record -F 149 --call-graph dwarf,32768 -p "$PID" -o "$TMP/perf.data" >"$TMP/perf.log" 2>&1 &
    CLIENT_PID=$!
    sleep 1
fi
# The records of b003.test are r0300001 ... in a run of a million; any
# size puts the first of its fourth tenth there.
first=$((RECORDS / 10 * 3 + 1))
for w in $(seq "$WRITES"); do
    record=$(printf r%07d $((first + w)))
    body="{\"addresses\":[{\"ip\":\"10.9.$((w % 250)).$((w % 250 + 1))\"}]}"
    log "write $w ($record): $(put "/api/v1/domains/b003.test/records/$record/A" "$body") s"
done
# Settled: what the last write replaced is freed after it is answered.
sleep 2
log "RSS 2 s after the writes: $(rss)"
if [[ -n $CLIENT_PID ]]; then
    kill -INT "$CLIENT_PID"
    wait "$CLIENT_PID" 2>/dev/null || true
    CLIENT_PID=""
    log "profile: perf report -i $TMP/perf.data"
fi
