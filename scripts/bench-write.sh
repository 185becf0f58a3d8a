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
# Usage: scripts/bench-write.sh [--records N] [--writes N] [--perf] [--no-build]
#   --records N  records in all (default 1000000)
#   --writes N   one-record writes (default 6)
#   --perf       record a profile of the writes (needs perf)
#   --no-build   use GTM_BIN (default target/release/gtm) as it is
#
# Only loopback is contacted; the script stops only the device it started,
# by its PID, and removes its temporary directory unless --perf kept it.
set -euo pipefail
cd "$(dirname "$0")/.."

RECORDS=1000000 WRITES=6 PERF=0 BUILD=1
while (($#)); do
    case $1 in
    --records) RECORDS=$2; shift ;;
    --writes) WRITES=$2; shift ;;
    --perf) PERF=1 ;;
    --no-build) BUILD=0 ;;
    *) echo "unknown option $1 (see the head of $0)" >&2; exit 2 ;;
    esac
    shift
done
GTM_BIN=${GTM_BIN:-target/release/gtm}
IP=127.0.191.3 API=8053
TMP=$(mktemp -d /tmp/bench-write.XXXXXX)
PID="" PERF_PID=""
cleanup() {
    [[ -n $PERF_PID ]] && kill -INT "$PERF_PID" 2>/dev/null && wait "$PERF_PID" 2>/dev/null
    [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    if ((PERF)); then echo "kept $TMP (perf.data)"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
log() { echo "[bench-write $(date -u +%H:%M:%S)] $*"; }
rss() { echo "$(($(awk '/VmRSS/ {print $2}' "/proc/$PID/status") / 1024)) MiB"; }

((BUILD)) && cargo build --release --quiet
log "configuration: $RECORDS records in 10 domains"
python3 scripts/bench-scale.py gen --records "$RECORDS" --domains 10 \
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
RUST_LOG=warn "$GTM_BIN" serve --config "$TMP/gtm.toml" >"$TMP/gtm.log" 2>&1 &
PID=$!
for _ in $(seq 150); do
    [[ -s $TMP/data/api-token ]] && curl -s -m 2 -o /dev/null "http://$IP:$API/api/v1/status" && break
    sleep 0.2
done
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
    PERF_PID=$!
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
if [[ -n $PERF_PID ]]; then
    kill -INT "$PERF_PID"
    wait "$PERF_PID" 2>/dev/null || true
    PERF_PID=""
fi
log "RSS after the writes: $(rss)"
