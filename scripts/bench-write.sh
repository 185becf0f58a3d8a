#!/usr/bin/env bash
# bench-write.sh - what one-record writes cost on one device, or on a
# pair, holding many records: the figure docs/performance.md follows
# between runs of scripts/bench-scale.sh, in a few minutes instead of its
# whole run.
#
# One gtm (`udp_workers = 1`, data in a temporary directory) on
# 127.0.191.3, or with --pair two: gtm1 on 127.0.191.1 (`gtm cluster
# init`) and gtm2 on 127.0.191.2 (`gtm cluster join`). The configuration
# of scripts/bench-scale.py (RECORDS A records in ten domains b000.test
# ... b009.test) is PUT one domain at a time (`PUT /api/v1/domains/D`,
# to gtm1 on a pair), or with --whole as one text (`PUT /api/v1/config`,
# as scripts/bench-scale.sh does), then WRITES one-record writes, each a
# new address:
# - one device: `PUT /api/v1/domains/b003.test/records/rNNNNNNN/A` with
#   curl, one after the other, each timed until the API answers (it
#   answers once the write is committed and installed);
# - a pair: the writes of scripts/bench-scale.sh (`bench-scale.py
#   writes`, records spread over every domain), each timed until the PUT
#   is answered and both devices' DNS answer the new address.
# RSS is read 10 s after the last domain's PUT and after the writes. With
# --perf, `perf record --call-graph dwarf` records the device (both on a
# pair) during the writes (perf.data is kept in the printed directory;
# its samples are stamped with CLOCK_MONOTONIC, as each write's start is
# in writes.tsv on a pair).
#
# Usage: scripts/bench-write.sh [--records N] [--writes N] [--pair] [--whole]
#                               [--perf] [--no-build] [--keep-tmp]
#   --records N  records in all, a multiple of 10 (default 1000000)
#   --writes N   one-record writes (default 6)
#   --pair       two devices in a cluster instead of one
#   --whole      PUT the configuration whole instead of one domain at a time
#   --perf       record a profile of the writes (needs perf; keeps the
#                temporary directory, where perf.data is)
#   --no-build   skip `cargo build --release` (GTM_BIN must exist)
#   --keep-tmp   keep the temporary directory (configuration, logs)
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

RECORDS=1000000 WRITES=6 PERF=0 PAIR=0 WHOLE=0
while (($#)); do
    case $1 in
        --records) RECORDS=${2:?--records needs a value}; shift 2 ;;
        --writes) WRITES=${2:?--writes needs a value}; shift 2 ;;
        --pair) PAIR=1; shift ;;
        --whole) WHOLE=1; shift ;;
        --perf) PERF=1 KEEP_TMP=1; shift ;;
        *) bench_option "$@"; shift "$OPT_SHIFT" ;;   # --no-build, --keep-tmp, -h
    esac
done
in_range --records "$RECORDS" 10 2000000
((RECORDS % 10 == 0)) || die "--records must be a multiple of 10"
in_range --writes "$WRITES" 1 $((RECORDS / 10 - 1))
GTM_BIN=${GTM_BIN:-$REPO_ROOT/target/release/gtm}
API_PORT=8053 DNS_PORT=1053 START_TIMEOUT=30
declare -A IP_OF=([gtm1]=127.0.191.1 [gtm2]=127.0.191.2 [gtm3]=127.0.191.3)
declare -A PID_OF=()
if ((PAIR)); then DEVICES=(gtm1 gtm2); else DEVICES=(gtm3); fi
FIRST=${DEVICES[0]}

# Stops the devices and perf by PID, however the script ends.
bench_traps each
install_missing python3=python3-minimal curl=curl
((PERF)) && install_missing perf=linux-perf
if ((BUILD)); then build_gtm; fi
[[ -x $GTM_BIN ]] || die "$GTM_BIN not found; build it, set GTM_BIN, or drop --no-build"
for dev in "${DEVICES[@]}"; do
    port_busy tcp "$API_PORT" "${IP_OF[$dev]}" && die "TCP ${IP_OF[$dev]}:$API_PORT is already in use"
done
make_tmp

alive_or_die() { kill -0 "${PID_OF[$1]}" 2>/dev/null || die "$1 exited; see $TMP/$1.log"; }
rss() { echo "$(($(awk '/VmRSS/ {print $2}' "/proc/${PID_OF[$1]}/status") / 1024)) MiB"; }
rss_all() { local dev; for dev in "${DEVICES[@]}"; do printf '%s %s  ' "$dev" "$(rss "$dev")"; done; }
cli() { local dev=$1; shift; timeout 120 "$GTM_BIN" --data-dir "$TMP/$dev" "$@"; }

log "configuration: $RECORDS records in 10 domains"
python3 "$REPO_ROOT/scripts/bench-scale.py" gen --records "$RECORDS" --domains 10 \
    --markers 198.51.100.200,198.51.100.201,198.51.100.202 --dir "$TMP/gen" >/dev/null
for dev in "${DEVICES[@]}"; do
    mkdir -p "$TMP/$dev"
    cat >"$TMP/$dev.toml" <<EOF
name = "$dev"
datacenter = "dc1"
data_dir = "$TMP/$dev"
dns_listen = ["${IP_OF[$dev]}:$DNS_PORT"]
api_listen = "${IP_OF[$dev]}:$API_PORT"
udp_workers = 1
EOF
    RUST_LOG=${RUST_LOG:-warn} "$GTM_BIN" serve --config "$TMP/$dev.toml" >"$TMP/$dev.log" 2>&1 &
    PID_OF[$dev]=$!
    STARTED_PIDS+=("$!")
done
for dev in "${DEVICES[@]}"; do wait_api "$dev"; done
if ((PAIR)); then
    cli gtm1 cluster init >"$TMP/init.log" 2>&1 || { cat "$TMP/init.log" >&2; die "gtm cluster init failed"; }
    token=$(cli gtm1 cluster token | tail -n 1)
    cli gtm2 cluster join "http://${IP_OF[gtm1]}:$API_PORT" --token "$token" >"$TMP/join.log" 2>&1 \
        || { cat "$TMP/join.log" >&2; die "gtm cluster join failed"; }
    log "pair formed: gtm1 (init) + gtm2 (joined)"
fi
TOKEN=$(cat "$TMP/$FIRST/api-token")
# put PATH BODY [TYPE]: prints the HTTP status and the seconds it took.
put() {
    curl -s -m 600 -o "$TMP/answer" -w '%{http_code} %{time_total}' -X PUT \
        -H "Authorization: Bearer $TOKEN" -H "content-type: ${3:-application/json}" \
        --data-binary "$2" "http://${IP_OF[$FIRST]}:$API_PORT$1"
}
if ((WHOLE)); then
    log "the whole configuration: $(put /api/v1/config "@$TMP/gen/config-a.toml" 'text/plain; charset=utf-8') s"
else
    for d in $(seq 0 9); do
        name=$(printf b%03d "$d")
        log "domain $name.test: $(put "/api/v1/domains/$name.test" "@$TMP/gen/dom-$name.json") s"
    done
fi
sleep 10
log "RSS after the domains: $(rss_all)"
if ((PERF)); then
    pids=$(IFS=,; echo "${PID_OF[*]}")
    perf record -F 149 -k CLOCK_MONOTONIC --call-graph dwarf,32768 -p "$pids" -o "$TMP/perf.data" >"$TMP/perf.log" 2>&1 &
    CLIENT_PID=$!
    sleep 1
fi
if ((PAIR)); then
    specs=() dns=()
    for dev in "${DEVICES[@]}"; do
        specs+=("$(devspec "$dev")")
        dns+=("$dev=${IP_OF[$dev]}:$DNS_PORT")
    done
    timeout $((WRITES * 60 + 120)) python3 "$REPO_ROOT/scripts/bench-scale.py" writes --send gtm1 \
        --n "$WRITES" --records "$RECORDS" --domains 10 --dns "${dns[@]}" --devices "${specs[@]}" \
        --pids "gtm1=${PID_OF[gtm1]}" "gtm2=${PID_OF[gtm2]}" --timeout 60 --progress \
        --out "$TMP/writes.tsv" >"$TMP/writes.json" || die "the writes helper failed"
    python3 - "$TMP/writes.json" <<'EOF' >&2
import json, sys
d = json.load(open(sys.argv[1]))
b, p = d["both"], d["put"]
if not b:
    sys.exit("no write done: %s %s" % (d["stopped"], d["errors"]))
print("[bench-write] %d/%d writes until both devices answer: p50 %.1f / p99 %.1f / max %.1f ms;"
      " PUT answered p50 %.1f / p99 %.1f ms; %d lost DNS queries%s" % (
          d["done"], d["requested"], b["p50"], b["p99"], b["max"], p["p50"], p["p99"], d["lost"],
          "; errors: %s" % d["errors"] if d["errors"] else ""))
EOF
else
    # The records of b003.test are r0300001 ... in a run of a million; any
    # size puts the first of its fourth tenth there.
    first=$((RECORDS / 10 * 3 + 1))
    for w in $(seq "$WRITES"); do
        record=$(printf r%07d $((first + w)))
        body="{\"addresses\":[{\"ip\":\"10.9.$((w % 250)).$((w % 250 + 1))\"}]}"
        log "write $w ($record): $(put "/api/v1/domains/b003.test/records/$record/A" "$body") s"
    done
fi
# Settled: what the last write replaced is freed after it is answered.
sleep 2
log "RSS 2 s after the writes: $(rss_all)"
if [[ -n $CLIENT_PID ]]; then
    kill -INT "$CLIENT_PID"
    wait "$CLIENT_PID" 2>/dev/null || true
    CLIENT_PID=""
    log "profile: perf report -i $TMP/perf.data"
fi
