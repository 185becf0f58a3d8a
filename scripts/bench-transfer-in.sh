#!/usr/bin/env bash
# bench-transfer-in.sh - time a zone transferred in from a primary
# (docs/performance.md, "Transfer in"): a real Knot primary on
# 127.0.170.53 serving one zone of N A records (TSIG key `bench`,
# `zonefile-load: difference`, NOTIFY to the device), and one device
# (`gtm serve`, release build) on 127.0.170.21 with that domain's
# `primary`. Times the first transfer (AXFR) from `gtm config apply`
# until the last record is answered; then one record changed at Knot
# (zone-reload, NOTIFY) until the device answers the change (IXFR); and
# the device's CPU and RSS after.
#
# Usage: scripts/bench-transfer-in.sh [--records N] [--no-build]
# Prints the figures; nothing is written to the docs.
set -euo pipefail

RECORDS=100000
BUILD=1
while [ $# -gt 0 ]; do
    case $1 in
        --records) RECORDS=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
for tool in dig knotd knotc; do
    command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }
done
if [ "$BUILD" = 1 ]; then
    nice cargo build --release --bin gtm >&2
fi
GTM=target/release/gtm
IP=127.0.170.21
PRIMARY=127.0.170.53
PORT=5353
TMP=$(mktemp -d)
PID=""
KNOT=""
cleanup() {
    for p in $PID $KNOT; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT

cat >"$TMP/node.toml" <<EOF
name = "in1"
datacenter = "dc1"
data_dir = "$TMP/data"
dns_listen = ["$IP:1053"]
api_listen = "$IP:8053"
udp_workers = 1
EOF
RUST_LOG=warn "$GTM" serve --config "$TMP/node.toml" >"$TMP/gtm.log" 2>&1 &
PID=$!
gtm() { "$GTM" --data-dir "$TMP/data" "$@"; }
for _ in $(seq 100); do gtm status >/dev/null 2>&1 && break; sleep 0.1; done
SECRET=$(gtm tsig add bench 2>/dev/null)

# The zone at serial $1, with h1 at $2.
zone() {
    printf '$ORIGIN bench.test.\n$TTL 300\n@ SOA ns1 hostmaster %d 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.53\n' "$1"
    printf 'h1 A %s\n' "$2"
    for i in $(seq 2 "$RECORDS"); do
        printf 'h%d A 10.%d.%d.%d\n' "$i" $((i >> 16 & 255)) $((i >> 8 & 255)) $((i & 255))
    done
}
mkdir -p "$TMP/knot/db"
zone 1 10.0.0.1 >"$TMP/knot/bench.test.zone"
cat >"$TMP/knot/knot.conf" <<EOF
server:
    rundir: "$TMP/knot"
    listen: $PRIMARY@$PORT
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "$TMP/knot/db"
control:
    listen: "$TMP/knot/knot.sock"
key:
  - id: bench
    algorithm: hmac-sha256
    secret: $SECRET
remote:
  - id: device
    address: $IP@1053
    key: bench
    via: $PRIMARY
acl:
  - id: xfr
    address: 127.0.0.0/8
    key: bench
    action: transfer
template:
  - id: default
    storage: "$TMP/knot"
    zonefile-load: difference
    journal-content: changes
    semantic-checks: off
zone:
  - domain: bench.test
    file: "$TMP/knot/bench.test.zone"
    notify: [device]
    acl: xfr
EOF
knotd -c "$TMP/knot/knot.conf" >"$TMP/knot.log" 2>&1 &
KNOT=$!
for _ in $(seq 100); do dig -p "$PORT" "@$PRIMARY" +short SOA bench.test | grep -q ' 1 ' && break; sleep 0.1; done

answer() { dig -p 1053 "@$IP" +short "h$1.bench.test" A; }
printf '[[domain]]\nname = "bench.test"\nnameservers = ["ns1.bench.test"]\nprimary = { address = "%s:%d", key = "bench" }\n' \
    "$PRIMARY" "$PORT" >"$TMP/domain.toml"
start=$(date +%s.%N)
gtm config apply "$TMP/domain.toml" >/dev/null
for _ in $(seq 1200); do [ -n "$(answer "$RECORDS")" ] && break; sleep 0.05; done
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "first transfer (AXFR) of $RECORDS records: from apply until served: $took s; h$RECORDS answers $(answer "$RECORDS")"
echo "after it: gtm CPU (utime+stime ticks of $(getconf CLK_TCK)/s): $(awk '{print $14 + $15}' "/proc/$PID/stat"); $(grep VmRSS "/proc/$PID/status")"

zone 2 10.255.255.1 >"$TMP/knot/bench.test.zone"
start=$(date +%s.%N)
knotc -s "$TMP/knot/knot.sock" zone-reload bench.test >/dev/null
for _ in $(seq 1200); do [ "$(answer 1)" = 10.255.255.1 ] && break; sleep 0.05; done
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "one record changed at the primary: from its reload (NOTIFY) until served: $took s; h1 answers $(answer 1)"
gtm status --json | python3 -c 'import json, sys
for t in json.load(sys.stdin).get("transfers_in", []):
    print("this device did:", t.get("how"), "to serial", t.get("serial"), t.get("error") or "")' 
echo "after it: gtm CPU (utime+stime ticks): $(awk '{print $14 + $15}' "/proc/$PID/stat"); $(grep VmRSS "/proc/$PID/status")"
echo "binary: $("$GTM" --version); $(nproc) CPUs; $(date -u +%FT%TZ)"
