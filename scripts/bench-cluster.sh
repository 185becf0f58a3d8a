#!/usr/bin/env bash
# bench-cluster.sh - configuration writes on a gtm pair, and applying a
# configuration of 100,000 records.
#
# Targets (docs/performance.md, "Configuration writes on a pair"): 1,000
# configuration writes on a pair, each applied on both devices within
# 50 ms on loopback; a configuration of 100,000 records applied within
# 5 s, RSS under 1 GiB.
#
# Devices (each `gtm serve` with `udp_workers = 1`, DNS on IP:1053, API on
# IP:8053, data in the temporary directory):
#   pair    gtm1 on 127.0.0.41 (`gtm cluster init`, the leader) and gtm2 on
#           127.0.0.42 (`gtm cluster join`), both in dc1;
#   single  gtm3 on 127.0.0.43, never clustered (writes go to its store
#           directly, no Raft).
# Nothing is pinned: the devices and the client share the machine's CPUs, as
# a pair on one host would; the report gives nproc and the CPU each gtm
# process used.
#
# 1. Writes (scripts/bench-cluster.py writes): --writes small configurations
#    (www A address and domain TTL change every time, plus a TXT record with
#    a sequence number), PUT /api/v1/config one at a time to the leader over
#    a keep-alive connection; the PUT answers once the receiving device
#    applied the write (its answer carries the version, the Raft log index).
#    Then --forwarded writes the same way sent to the follower, which
#    forwards them to the leader.  The helper runs each PUT in a thread and
#    polls BOTH devices meanwhile, so it knows when the write was applied on
#    both ("applied on both") apart from when the PUT answered ("PUT
#    answered") and when the client had the answer and both devices at its
#    version ("client sees both", the measure of the target).  Two modes, each to
#    the leader and then to the follower:
#      strict   the next write waits for the previous answer; stops after
#               --writes / --forwarded writes or the --budget time budget;
#      overlap  the next write is sent as soon as the previous one is applied
#               on both devices; answers are collected at the end.
# 2. Large configuration (scripts/bench-cluster.py gen / apply): --domains
#    domains b000.test... with --records A records in all (r000001...),
#    plus marker.b000.test A. Applied twice: "initial" (replacing the small
#    configuration) and "one change" (the same file with the marker address
#    changed). Timed from sending the PUT until every device's DNS answers
#    the new marker address (UDP query every 2 ms; the PUT's own answer time
#    is reported apart; the status of 100,000 records is itself large, so it
#    is fetched only once afterwards, to confirm the version). Done on gtm3 alone, then on the pair (PUT to the
#    leader). RSS (VmRSS, and VmHWM = peak) from /proc/PID/status after each.
#    `gtm config check` on the file is timed too (parsing and validation
#    alone, in a separate process).
#
# Usage: scripts/bench-cluster.sh [--writes N] [--forwarded N] [--budget S] [--records N]
#                                 [--domains N] [--apply-timeout S] [--no-big]
#                                 [--no-build] [--docs FILE | --no-docs] [--keep-tmp]
#   --writes N          writes sent to the leader (default 1000)
#   --forwarded N       writes sent to the follower (default 200; 0 = none)
#   --budget S          time budget of the strict leader writes (default 120 s;
#                       the follower gets half); the overlap runs have none
#   --records N         A records in the large configuration (default 100000)
#   --domains N         domains they are spread over (default 100)
#   --apply-timeout S   give up on one large apply after S seconds (default 180)
#   --no-big            skip the large configuration
#   --no-build          skip `cargo build --release` (the gtm binary must exist)
#   --docs FILE         where to write the results (default docs/performance.md,
#                       between <!-- bench-cluster:begin --> and <!-- bench-cluster:end -->)
#   --no-docs           print the table only
#   --keep-tmp          keep the temporary directory (configs, logs, per-write times)
# Environment: GTM_BIN (default $CARGO_TARGET_DIR/release/gtm, else
#   target/release/gtm), BENCH_IP1=127.0.0.41, BENCH_IP2=127.0.0.42,
#   BENCH_IP3=127.0.0.43, GTM_DNS_PORT=1053, GTM_API_PORT=8053, RUST_LOG for
#   gtm (default warn), BENCH_RESULT (also copy the report there).  Installs
#   python3 and iproute2 with apt-get when missing (root or passwordless sudo).
#
# Only loopback addresses are ever contacted.  The script stops only the
# processes it started, by PID, and removes its temporary directory on exit.

set -euo pipefail

# Shared mechanics: log/die, options, cleanup, install_missing, CPU time, docs.
# shellcheck source=scripts/bench-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-cluster "$@"

# ---------------------------------------------------------------------------
# Locations and defaults
# ---------------------------------------------------------------------------
HELPER="$SCRIPT_DIR/bench-cluster.py"

NWRITES=1000
BUDGET=120             # seconds for the strict leader writes (half that for the follower)
NFORWARD=200
NRECORDS=100000
NDOMAINS=100
APPLY_TIMEOUT=180
BIG=1

IP1=${BENCH_IP1:-127.0.0.41}
IP2=${BENCH_IP2:-127.0.0.42}
IP3=${BENCH_IP3:-127.0.0.43}
DNS_PORT=${GTM_DNS_PORT:-1053}
API_PORT=${GTM_API_PORT:-8053}
if [[ -n ${CARGO_TARGET_DIR:-} ]]; then
    GTM_BIN=${GTM_BIN:-$CARGO_TARGET_DIR/release/gtm}
else
    GTM_BIN=${GTM_BIN:-$REPO_ROOT/target/release/gtm}
fi
START_TIMEOUT=30
MARKER_A=198.51.100.201   # marker.b000.test in the initial large configuration
MARKER_B=198.51.100.202   # ... and in the "one change" one
WRITE_TARGET_MS=50
APPLY_TARGET_S=5
RSS_TARGET_MIB=1024

while (($#)); do
    case $1 in
        --writes) NWRITES=${2:?--writes needs a value}; shift 2 ;;
        --writes=*) NWRITES=${1#*=}; shift ;;
        --forwarded) NFORWARD=${2:?--forwarded needs a value}; shift 2 ;;
        --forwarded=*) NFORWARD=${1#*=}; shift ;;
        --records) NRECORDS=${2:?--records needs a value}; shift 2 ;;
        --records=*) NRECORDS=${1#*=}; shift ;;
        --domains) NDOMAINS=${2:?--domains needs a value}; shift 2 ;;
        --domains=*) NDOMAINS=${1#*=}; shift ;;
        --apply-timeout) APPLY_TIMEOUT=${2:?--apply-timeout needs a value}; shift 2 ;;
        --apply-timeout=*) APPLY_TIMEOUT=${1#*=}; shift ;;
        --budget) BUDGET=${2:?--budget needs a value}; shift 2 ;;
        --budget=*) BUDGET=${1#*=}; shift ;;
        --no-big) BIG=0; shift ;;
        *) bench_option "$@"; shift "$OPT_SHIFT" ;;   # --no-build, --docs, ...
    esac
done

in_range --writes "$NWRITES" 1 100000
in_range --forwarded "$NFORWARD" 0 100000
in_range --records "$NRECORDS" 1 1000000
in_range --domains "$NDOMAINS" 1 1000
in_range --budget "$BUDGET" 2 7200
in_range --apply-timeout "$APPLY_TIMEOUT" 5 1800
((NRECORDS % NDOMAINS == 0)) || die "--records must be a multiple of --domains"
for ip in "$IP1" "$IP2" "$IP3"; do
    [[ $ip =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$ip is not a 127.0.0.0/8 address"
done
[[ $IP1 != "$IP2" && $IP1 != "$IP3" && $IP2 != "$IP3" ]] || die "BENCH_IP1/2/3 must differ"

# Stop the devices (STARTED_PIDS) one after another with stop_pid, and remove
# the temporary directory, however the script ends.
bench_traps each

# ---------------------------------------------------------------------------
# 1. Tools: install what is missing (Debian/Ubuntu, non-interactive).
# ---------------------------------------------------------------------------
install_missing python3=python3-minimal ss=iproute2 getconf=libc-bin
[[ -f $HELPER ]] || die "$HELPER is missing"

if ((BUILD)); then build_gtm; fi
[[ -x $GTM_BIN ]] || die "$GTM_BIN not found; build it, set GTM_BIN, or drop --no-build"

NCPU=$(nproc)
CLK_TCK=$(getconf CLK_TCK)

for ip in "$IP1" "$IP2" "$IP3"; do
    port_busy udp "$DNS_PORT" "$ip" && die "UDP $ip:$DNS_PORT is already in use"
    port_busy tcp "$DNS_PORT" "$ip" && die "TCP $ip:$DNS_PORT is already in use"
    port_busy tcp "$API_PORT" "$ip" && die "TCP $ip:$API_PORT is already in use"
done

# ---------------------------------------------------------------------------
# 2. Temporary directory, node files, configurations.
# ---------------------------------------------------------------------------
make_tmp

declare -A IP_OF=([gtm1]=$IP1 [gtm2]=$IP2 [gtm3]=$IP3)
for dev in gtm1 gtm2 gtm3; do
    mkdir -p "$TMP/$dev"
    cat >"$TMP/$dev.toml" <<EOF
name = "$dev"
datacenter = "dc1"
data_dir = "$TMP/$dev"
dns_listen = ["${IP_OF[$dev]}:$DNS_PORT"]
api_listen = "${IP_OF[$dev]}:$API_PORT"
udp_workers = 1
EOF
done

cat >"$TMP/small.toml" <<'EOF'
[[datacenter]]
name = "dc1"

[[domain]]
name = "bench.test"
ttl = 30
nameservers = ["ns1.bench.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.1" }]
EOF

py() { timeout "$1" python3 "$HELPER" "${@:2}"; }
jget() { # json-file python-expression-over-d
    python3 -c '
import json, sys
def q(s, k="p50"):
    return "–" if not s else "%.2f" % s[k]
def trio(s):
    return "–" if not s else "%.2f / %.2f / %.2f" % (s["p50"], s["p99"], s["max"])
def summary(d):
    return "%d/%d done%s; applied on both p50/p99/max %s ms; PUT answered %s ms; %s writes/s; errors: %s" % (
        d["done"], d["requested"], " (" + d["stopped"] + ")" if d["stopped"] else "",
        trio(d["applied"]), trio(d["put"]), d["writes_per_s"], d["errors"][:3] or "none")
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print("" if v is None else v)' "$1" "$2"
}

BIG_BYTES=""; BIG_RECORDS=""; CHECK_S=""; CHECK_RC=""
if ((BIG)); then
    per=$((NRECORDS / NDOMAINS))
    log "generating the large configuration: $NDOMAINS domains x $per A records"
    py 300 gen --domains "$NDOMAINS" --per "$per" --marker "$MARKER_A" --out "$TMP/big-a.toml" >"$TMP/gen-a.json" \
        || die "generating the large configuration failed"
    # Only the marker's own address line changes (record addresses end in .1-.200).
    sed "/^name = \"marker\"\$/,/^addresses/ s/\"$MARKER_A\"/\"$MARKER_B\"/" "$TMP/big-a.toml" >"$TMP/big-b.toml"
    ndiff=$(diff "$TMP/big-a.toml" "$TMP/big-b.toml" | grep -c '^>' || true)
    ((ndiff == 1)) || die "the one-change configuration differs in $ndiff lines, not 1"
    BIG_BYTES=$(jget "$TMP/gen-a.json" 'd["bytes"]')
    BIG_RECORDS=$(jget "$TMP/gen-a.json" 'd["records"]')
    log "large configuration: $BIG_RECORDS records, $BIG_BYTES bytes"
    t0=$(date +%s%N)
    set +e
    timeout 300 "$GTM_BIN" config check "$TMP/big-a.toml" >"$TMP/config-check.log" 2>&1
    CHECK_RC=$?
    set -e
    CHECK_S=$(awk -v ns=$(($(date +%s%N) - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }')
    if ((CHECK_RC != 0)); then
        tail -n 20 "$TMP/config-check.log" >&2
        log "WARNING: gtm config check rejected the large configuration (exit $CHECK_RC after ${CHECK_S}s); applying it anyway to see what happens"
    else
        log "gtm config check: ok in ${CHECK_S}s"
    fi
fi

# ---------------------------------------------------------------------------
# 3. Devices.
# ---------------------------------------------------------------------------
declare -A PID_OF=()

start_dev() { # name
    local dev=$1
    RUST_LOG=${RUST_LOG:-warn} "$GTM_BIN" serve --config "$TMP/$dev.toml" >"$TMP/$dev.log" 2>&1 &
    PID_OF[$dev]=$!
    STARTED_PIDS+=("$!")
    log "started $dev (PID $!) on ${IP_OF[$dev]}: DNS :$DNS_PORT, API :$API_PORT"
}

alive_or_die() {
    kill -0 "${PID_OF[$1]}" 2>/dev/null && return 0
    log "$1 (PID ${PID_OF[$1]}) exited; last lines of $TMP/$1.log:"
    tail -n 30 "$TMP/$1.log" >&2 || true
    die "$1 is not running"
}

stop_dev() { # name
    local dev=$1 pid=${PID_OF[$1]} p
    stop_pid "$pid"
    local -a keep=()
    for p in "${STARTED_PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
    STARTED_PIDS=("${keep[@]}")
    log "stopped $dev (PID $pid)"
}

# The API answers and its address and token files exist (bounded).
gtm_cli() { local dev=$1; shift; timeout 60 "$GTM_BIN" --data-dir "$TMP/$dev" "$@"; }

rss_kib() { awk -v k="$2" '$1 == k ":" { print $2 }' "/proc/$1/status" 2>/dev/null || echo ""; }
mib() { awk -v k="$1" 'BEGIN { if (k == "") print "?"; else printf "%.0f", k / 1024 }'; }
# A device's CPU time is proc_ticks PID (bench-lib.sh): its utime+stime.
cpu_s() { awk -v t="$1" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }'; }

BIGROWS="$TMP/big.tsv"   # scope  config  put_s  dns_s(list)  all_s  versions  rss  hwm  note
: >"$BIGROWS"

# big_apply SCOPE LABEL FILE MARKER SEND DEVICES...
big_apply() {
    local scope=$1 label=$2 file=$3 marker=$4 send=$5
    shift 5
    local -a devs=("$@") dns=() specs=()
    local d out="$TMP/apply-$scope-$label.json"
    for d in "${devs[@]}"; do
        alive_or_die "$d"
        dns+=("$d=${IP_OF[$d]}:$DNS_PORT")
        specs+=("$(devspec "$d")")
    done
    log "$scope: applying the $label large configuration (PUT to $send)"
    py $((APPLY_TIMEOUT + 300)) apply --send "$send" --file "$file" --marker "$marker" \
        --timeout "$APPLY_TIMEOUT" --http-timeout 120 --dns "${dns[@]}" --devices "${specs[@]}" >"$out" \
        || die "the apply helper failed (see above)"
    local put_s http all_s err v dns_s vers rss hwm nchg
    put_s=$(jget "$out" 'd.get("put_s", "none")'); http=$(jget "$out" 'd["http_status"]')
    all_s=$(jget "$out" 'd["all_s"]'); err=$(jget "$out" 'd.get("error")')
    v=$(jget "$out" 'd.get("version")')
    nchg=$(jget "$out" 'd.get("changes", "?")')
    dns_s=$(jget "$out" '", ".join("%s %s" % (k, "%.2f s" % x if x is not None else "never") for k, x in d["dns_s"].items())')
    vers=$(jget "$out" '", ".join("%s %s" % kv for kv in d["version_after"].items())')
    local sg
    sg=$(jget "$out" '", ".join("%s %.2f s" % kv for kv in d["status_get_s"].items())')
    rss="" hwm=""
    for d in "${devs[@]}"; do
        alive_or_die "$d"
        rss+="${rss:+, }$d $(mib "$(rss_kib "${PID_OF[$d]}" VmRSS)")"
        hwm+="${hwm:+, }$d $(mib "$(rss_kib "${PID_OF[$d]}" VmHWM)")"
    done
    local note=""
    [[ $http == 200 ]] || note="PUT answered HTTP ${http:-none}: ${err:0:300}"
    [[ -n $all_s ]] || note+="${note:+; }not applied everywhere within ${APPLY_TIMEOUT}s (last DNS answers: $(jget "$out" 'd["dns_last_answer"]'))"
    local cmp_v
    cmp_v=$(jget "$out" 'all(isinstance(x, int) and x >= (d.get("version") or 0) for x in d["version_after"].values())')
    [[ $cmp_v == True ]] || note+="${note:+; }a device reported a lower version than the PUT returned ($vers)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$scope" "$label" "$put_s" "$dns_s" "${all_s:-–}" \
        "v$v: $vers" "$rss" "$hwm" "$sg" "${note:-–}" "$nchg" >>"$BIGROWS"
    log "$scope $label: PUT ${put_s}s (HTTP $http, version $v, $nchg changes listed); DNS shows the marker: $dns_s; all applied: ${all_s:-NOT}s; versions $vers; status GET $sg; RSS MiB $rss (peak $hwm)${note:+; $note}"
}

# ---------------------------------------------------------------------------
# 4. Single device: the large configuration without Raft.
# ---------------------------------------------------------------------------
if ((BIG)); then
    start_dev gtm3
    wait_api gtm3
    gtm_cli gtm3 config apply "$TMP/small.toml" >"$TMP/gtm3-apply-small.log" 2>&1 \
        || { cat "$TMP/gtm3-apply-small.log" >&2; die "gtm3: applying the small configuration failed"; }
    SINGLE_RSS0=$(mib "$(rss_kib "${PID_OF[gtm3]}" VmRSS)")
    log "gtm3: small configuration applied; RSS $SINGLE_RSS0 MiB"
    c0=$(proc_ticks "${PID_OF[gtm3]}")
    big_apply single initial "$TMP/big-a.toml" "$MARKER_A" gtm3 gtm3
    big_apply single "one change" "$TMP/big-b.toml" "$MARKER_B" gtm3 gtm3
    SINGLE_CPU=$(cpu_s $(($(proc_ticks "${PID_OF[gtm3]}") - c0)))
    grep -ciE ' (warn|error)|panic' "$TMP/gtm3.log" >"$TMP/gtm3.warn" || true
    stop_dev gtm3
fi

# ---------------------------------------------------------------------------
# 5. The pair.
# ---------------------------------------------------------------------------
start_dev gtm1
start_dev gtm2
wait_api gtm1
wait_api gtm2
gtm_cli gtm1 config apply "$TMP/small.toml" >"$TMP/gtm1-apply-small.log" 2>&1 \
    || { cat "$TMP/gtm1-apply-small.log" >&2; die "gtm1: applying the small configuration failed"; }
gtm_cli gtm1 cluster init >"$TMP/init.log" 2>&1 || { cat "$TMP/init.log" >&2; die "gtm cluster init failed"; }
TOKEN=$(gtm_cli gtm1 cluster token 2>"$TMP/token.err" | tail -n 1) || { cat "$TMP/token.err" >&2; die "gtm cluster token failed"; }
[[ $TOKEN == gtm1.* ]] || die "unexpected join token: '$TOKEN'"
gtm_cli gtm2 cluster join "http://$IP1:$API_PORT" --token "$TOKEN" >"$TMP/join.log" 2>&1 \
    || { cat "$TMP/join.log" >&2; die "gtm cluster join failed"; }
log "pair formed: gtm1 (init) + gtm2 (joined)"

cluster_json() { py 30 get --device "$(devspec "$1")" --path /api/v1/cluster/status; }
# Bounded wait until gtm1 leads, both see two members, and both applied the same index.
deadline=$((SECONDS + START_TIMEOUT))
while :; do
    alive_or_die gtm1; alive_or_die gtm2
    cluster_json gtm1 >"$TMP/cs1.json" 2>/dev/null || true
    cluster_json gtm2 >"$TMP/cs2.json" 2>/dev/null || true
    ready=$(python3 - "$TMP/cs1.json" "$TMP/cs2.json" <<'EOF' 2>/dev/null || echo no
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
lead = a["leader"] and a["leader"][0] == a["id"]
ok = lead and len(a["members"]) == 2 and len(b["members"]) == 2 and b["leader"] and b["leader"][0] == a["id"] \
    and a["applied_index"] == b["applied_index"]
print("yes" if ok else "no")
EOF
)
    [[ $ready == yes ]] && break
    ((SECONDS < deadline)) || { cat "$TMP/cs1.json" "$TMP/cs2.json" >&2; die "the pair did not settle (gtm1 leading, 2 members) within ${START_TIMEOUT}s"; }
    sleep 0.2
done
log "gtm1 leads; both devices at applied index $(jget "$TMP/cs1.json" 'd["applied_index"]')"

WRITES="$TMP/writes.tsv"   # label  send  mode  json-file  gtm1-cpu  gtm2-cpu
: >"$WRITES"
run_writes() { # label send n strict|overlap budget
    local label=$1 send=$2 n=$3 mode=$4 budget=$5 out="$TMP/writes-$1-$4.json" c1 c2
    local -a extra=()
    [[ $mode == overlap ]] && extra+=(--overlap)
    alive_or_die gtm1; alive_or_die gtm2
    c1=$(proc_ticks "${PID_OF[gtm1]}"); c2=$(proc_ticks "${PID_OF[gtm2]}")
    log "writes: $n to $send ($label, $mode${budget:+, budget ${budget}s})"
    py $((300 + ${budget:-0} + n)) writes --send "$send" --n "$n" --progress 250 --out "$TMP/writes-$label-$mode.tsv" \
        --budget "${budget:-0}" "${extra[@]}" --devices "$(devspec gtm1)" "$(devspec gtm2)" >"$out" \
        || die "the writes helper failed"
    alive_or_die gtm1; alive_or_die gtm2
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$send" "$mode" "$out" \
        "$(cpu_s $(($(proc_ticks "${PID_OF[gtm1]}") - c1)))" "$(cpu_s $(($(proc_ticks "${PID_OF[gtm2]}") - c2)))" >>"$WRITES"
    log "$label $mode: $(jget "$out" 'summary(d)')"
}
run_writes leader gtm1 "$NWRITES" strict "$BUDGET"
((NFORWARD > 0)) && run_writes forwarded gtm2 "$NFORWARD" strict $((BUDGET / 2))
run_writes leader gtm1 "$NWRITES" overlap ""
((NFORWARD > 0)) && run_writes forwarded gtm2 "$NFORWARD" overlap ""
cluster_json gtm1 >"$TMP/cs1-after-writes.json" || true
cluster_json gtm2 >"$TMP/cs2-after-writes.json" || true
PAIR_RSS_WRITES="gtm1 $(mib "$(rss_kib "${PID_OF[gtm1]}" VmRSS)"), gtm2 $(mib "$(rss_kib "${PID_OF[gtm2]}" VmRSS)")"

if ((BIG)); then
    c1=$(proc_ticks "${PID_OF[gtm1]}"); c2=$(proc_ticks "${PID_OF[gtm2]}")
    big_apply pair initial "$TMP/big-a.toml" "$MARKER_A" gtm1 gtm1 gtm2
    big_apply pair "one change" "$TMP/big-b.toml" "$MARKER_B" gtm1 gtm1 gtm2
    PAIR_CPU="gtm1 $(cpu_s $(($(proc_ticks "${PID_OF[gtm1]}") - c1))) s, gtm2 $(cpu_s $(($(proc_ticks "${PID_OF[gtm2]}") - c2))) s"
    cluster_json gtm1 >"$TMP/cs1-after-big.json" || true
    cluster_json gtm2 >"$TMP/cs2-after-big.json" || true
    STORE_MIB="gtm1 $(du -sm "$TMP/gtm1" | cut -f1), gtm2 $(du -sm "$TMP/gtm2" | cut -f1)"
fi

# Warnings and errors the devices logged (RUST_LOG=warn unless set).
LOG_NOTES=()
for dev in gtm1 gtm2 gtm3; do
    [[ -f $TMP/$dev.log ]] || continue
    n=$(grep -ciE ' (warn|error)|panic' "$TMP/$dev.log" || true)
    if ((n > 0)); then
        first=$(grep -iE ' (warn|error)|panic' "$TMP/$dev.log" | sed -E 's/\x1b\[[0-9;]*m//g' | head -n 3 | cut -c1-300 | paste -sd '|' -)
        LOG_NOTES+=("$dev logged $n warning/error lines, first: $first")
    fi
done

# ---------------------------------------------------------------------------
# 6. Report.
# ---------------------------------------------------------------------------
verdict() { # value target -> met / NOT met
    awk -v v="$1" -v t="$2" 'BEGIN { if (v == "" || v == "–") print "n/a"; else if (v + 0 < t + 0) print "met"; else print "**NOT met**" }'
}

make_report() {
    echo "Configuration writes on a pair (gtm1 leader on $IP1, gtm2 follower on $IP2), one at a time." \
        "**Applied on both**: from sending the PUT until both devices' \`GET /api/v1/status\` version had moved to it" \
        "(both polled in a tight loop while the PUT is outstanding). **PUT answered**: until the PUT returned" \
        "\`{\"applied\":true,...}\`. **Client sees both**: until the client had the answer *and* both devices at its version" \
        "(the measure the p99 target is set on). *strict*: the next write waits for the answer (runs until --writes or the time budget);" \
        "*overlap*: the next write is sent once the previous one is applied on both, its answer is collected later."
    echo
    echo "| sent to | mode | writes | applied on both p50 / p99 / max ms | PUT answered p50 / p99 / max ms | client sees both p50 / p99 / max ms | writes/s | gtm1 / gtm2 CPU s | target: client sees both p99 < $WRITE_TARGET_MS ms |"
    echo "|---|---|---|---|---|---|---|---|---|"
    local label send mode out c1 c2
    while IFS=$'\t' read -r label send mode out c1 c2; do
        local row p99
        row=$(jget "$out" '"%d/%d%s | %s | %s | %s | %s" % (d["done"], d["requested"], " (budget)" if d["stopped"].startswith("stopped after") and "budget" in d["stopped"] else "", trio(d["applied"]), trio(d["put"]), trio(d["answered"]), d["writes_per_s"])')
        p99=$(jget "$out" 'd["answered"] and d["answered"]["p99"]')
        if [[ $label == leader ]]; then send="leader (gtm1)"; else send="follower (gtm2, forwarded)"; fi
        local v
        if [[ $mode == strict ]]; then v=$(verdict "$p99" "$WRITE_TARGET_MS"); else v="(applied p99 $(verdict "$(jget "$out" 'd["applied"] and d["applied"]["p99"]')" "$WRITE_TARGET_MS"))"; fi
        echo "| $send | $mode | $row | $c1 / $c2 | $v |"
    done <"$WRITES"
    echo
    if ((BIG)); then
        echo "Large configuration: $BIG_RECORDS A records over $NDOMAINS domains, $(awk -v b="$BIG_BYTES" 'BEGIN { printf "%.1f MiB", b / 1048576 }') of TOML" \
            "(\`gtm config check\` on it: ${CHECK_S}s, exit $CHECK_RC). Time from sending the PUT until every device's DNS answers" \
            "the new marker address; \"one change\" re-applies it with one address changed:"
        echo
        echo "| devices | apply | changes in the answer | PUT answered s | DNS shows it | all applied s | target < $APPLY_TARGET_S s | versions after | RSS MiB after | peak RSS MiB | status GET | notes |"
        echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
        local scope alabel put dns all vers rss hwm sg note nchg
        while IFS=$'\t' read -r scope alabel put dns all vers rss hwm sg note nchg; do
            [[ $scope == single ]] && scope="gtm3 alone (no Raft)" || scope="pair (PUT to gtm1)"
            echo "| $scope | $alabel | $nchg | $put | $dns | $all | $(verdict "$all" "$APPLY_TARGET_S") | $vers | $rss | $hwm | $sg | $note |"
        done <"$BIGROWS"
        echo
        local max_rss
        max_rss=$(awk -F'\t' '{ n = split($8, a, ", "); for (i = 1; i <= n; i++) { split(a[i], b, " "); if (b[2] + 0 > m) m = b[2] + 0 } } END { print m + 0 }' "$BIGROWS")
        echo "- Peak RSS of any gtm process: $max_rss MiB (target < $RSS_TARGET_MIB MiB: $(verdict "$max_rss" "$RSS_TARGET_MIB"))." \
            "Before the large configuration: gtm3 ${SINGLE_RSS0} MiB; the pair after the writes: $PAIR_RSS_WRITES MiB."
        echo "- CPU used by the large applies: gtm3 ${SINGLE_CPU} s; pair $PAIR_CPU. Data directories after: $STORE_MIB MiB."
    fi
    local s1
    s1=$(jget "$TMP/cs1-after-writes.json" '"applied index %s, snapshot at %s, purged up to %s" % (d["applied_index"], d["snapshot_index"], d["purged_index"])' 2>/dev/null || echo "?")
    echo "- Raft on gtm1 after the writes: $s1 (a snapshot is built every 1,000 entries)."
    local w out
    while IFS=$'\t' read -r label _ mode out _ _; do
        w=$(jget "$out" '"%s, %s: %d errors%s%s; slowest applied on both (ms, version): %s; mean status polls per write: %.1f" % (d["send"], "overlap" if d["overlap"] else "strict", len(d["errors"]), (" (" + "; ".join(d["errors"][:3]) + ")") if d["errors"] else "", "; " + d["stopped"] if d["stopped"] else "", d["slowest_applied"], d["polls_mean"] or 0)')
        echo "- Writes to $w."
    done <"$WRITES"
    local n
    for n in "${LOG_NOTES[@]}"; do echo "- $n"; done
    echo
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname) with nproc=$NCPU" \
        "($(gtm_version), binary built $(date -u -r "$GTM_BIN" '+%H:%M UTC')$( ((BUILD)) || echo ' (--no-build: the tree may have changed since)'), $(python3 --version 2>&1), kernel $(uname -r))." \
        "Nothing pinned: both devices (\`udp_workers = 1\`) and the Python client share the CPUs." \
        "Client: \`scripts/bench-cluster.py\`, one keep-alive HTTP/1.1 connection per device; the other device's" \
        "\`GET /api/v1/status\` is polled without sleeping. Large applies: marker seen over UDP DNS (polled every 2 ms)," \
        "then one \`GET /api/v1/status\` per device confirms the version; RSS is VmRSS / VmHWM from \`/proc/PID/status\`."
    echo
    echo "Command: \`$INVOCATION\`"
}

REPORT=$(make_report)
echo
echo "$REPORT"
if [[ -n ${BENCH_RESULT:-} ]]; then
    printf '%s\n' "$REPORT" >"$BENCH_RESULT"
    log "wrote the report to $BENCH_RESULT"
fi

if [[ -n $DOCS_FILE ]]; then
    write_docs_section "Cluster configuration writes and large configurations, written by \`scripts/bench-cluster.sh\`." "$REPORT"
fi
