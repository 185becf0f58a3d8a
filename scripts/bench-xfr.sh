#!/usr/bin/env bash
# bench-xfr.sh - time an AXFR of a large zone (docs/performance.md, "Zone
# transfer"): one device (`gtm serve`, release build) on 127.0.171.21 with
# one domain of N A records and a secondary 127.0.171.22, asked for the
# zone with dig and kdig (TSIG-signed, from 127.0.171.22) RUNS times;
# then one record changed by a new configuration, and the IXFR from the
# serial before (timed, with its size).
#
# Usage: scripts/bench-xfr.sh [--records N] [--runs R] [--no-build]
# Prints the figures; nothing is written to the docs.
set -euo pipefail

RECORDS=100000
RUNS=3
BUILD=1
while [ $# -gt 0 ]; do
    case $1 in
        --records) RECORDS=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
for tool in dig kdig; do
    command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }
done
if [ "$BUILD" = 1 ]; then
    nice cargo build --release --bin gtm >&2
fi
GTM=target/release/gtm
IP=127.0.171.21
SECONDARY=127.0.171.22
TMP=$(mktemp -d)
PID=""
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

cat >"$TMP/node.toml" <<EOF
name = "xfr1"
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

{
    printf '[[domain]]\nname = "bench.test"\nnameservers = ["ns1.bench.test"]\n'
    # NO_SECONDARIES=1: the same zone without (the idle cost compared).
    if [ -z "${NO_SECONDARIES:-}" ]; then
        printf 'secondaries = [{ address = "%s", key = "bench" }]\n' "$SECONDARY"
    fi
    for i in $(seq 1 "$RECORDS"); do
        printf '\n[[domain.record]]\nname = "h%d"\ntype = "A"\naddresses = [{ ip = "10.%d.%d.%d" }]\n' \
            "$i" $((i >> 16 & 255)) $((i >> 8 & 255)) $((i & 255))
    done
} >"$TMP/zone.toml"
start=$(date +%s.%N)
gtm config apply "$TMP/zone.toml" >/dev/null
echo "applied $RECORDS records in $(echo "$(date +%s.%N) - $start" | bc) s"
serial() { dig -p 1053 "@$IP" +short SOA bench.test | awk '{print $3}'; }
axfr() { dig -p 1053 "@$IP" -b "$SECONDARY" -y "hmac-sha256:bench:$SECRET" "$@" bench.test; }
# The notify worker's first look gives the zone its serial and records its
# view; until then a transfer gets SERVFAIL.
for _ in $(seq 300); do axfr AXFR | grep -q 'XFR size' && break; sleep 0.1; done

for run in $(seq 1 "$RUNS"); do
    start=$(date +%s.%N)
    out=$(dig -p 1053 "@$IP" -b "$SECONDARY" -y "hmac-sha256:bench:$SECRET" AXFR bench.test)
    took=$(echo "$(date +%s.%N) - $start" | bc)
    size=$(grep 'XFR size' <<<"$out" || true)
    bad=$(grep -c -i -e "couldn't verify" -e 'failure' -e 'could not be validated' <<<"$out" || true)
    echo "dig run $run: $took s; $size; TSIG problems: $bad"
done
start=$(date +%s.%N)
out=$(kdig -p 1053 "@$IP" -b "$SECONDARY" -y "hmac-sha256:bench:$SECRET" AXFR bench.test || true)
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "kdig: $took s; $(grep 'Received' <<<"$out")"
# One record changed: the IXFR from the serial before.
before_serial=$(serial)
sed -i 's/10\.0\.0\.1"/10.255.255.1"/' "$TMP/zone.toml"
start=$(date +%s.%N)
gtm config apply "$TMP/zone.toml" >/dev/null
for _ in $(seq 600); do
    out=$(axfr "IXFR=$before_serial")
    grep -q '10.255.255.1' <<<"$out" && break
    sleep 0.05
done
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "one record changed: applied, recorded and sent by IXFR in $took s; $(grep 'XFR size' <<<"$out")"
start=$(date +%s.%N)
out=$(axfr "IXFR=$before_serial")
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "IXFR of that change again: $took s; $(grep 'XFR size' <<<"$out")"
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
before=$(ticks); sleep 10; after=$(ticks)
echo "idle CPU over 10 s (notify worker watching $RECORDS steered records): $((after - before)) ticks of $(getconf CLK_TCK)/s"
echo "gtm CPU (utime+stime ticks): $(awk '{print $14 + $15}' "/proc/$PID/stat"); RSS: $(grep VmRSS "/proc/$PID/status")"
echo "binary: $("$GTM" --version); $(nproc) CPUs; $(date -u +%FT%TZ)"
