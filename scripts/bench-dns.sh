#!/usr/bin/env bash
# bench-dns.sh - compare gtm's authoritative UDP DNS path with NSD and gdnsd.
#
# Method (see the project's benchmarking notes): every server listens on its
# own loopback port and is pinned to CPU 0 with one worker; dnsperf is pinned
# to CPU 1.  Each (server, record) pair gets a 5-second warm-up, then --runs
# measured runs of --duration seconds, with the servers alternated between
# runs (forward order on odd runs, reverse order on even runs) so that drift
# on a shared, noisy machine hits every server alike.  For each run we record
# queries/s and lost queries from dnsperf, and the server's CPU time
# (utime+stime from /proc/PID/stat, summed over the server's whole process
# tree) before and after, giving CPU % of one core and CPU µs per answered
# query.  On fast servers dnsperf itself is the bottleneck (one core tops out
# near 170-225k q/s), so CPU µs/query is the figure that separates them.
#
# Records measured (zone bench.test, identical data in every server):
#   static.bench.test  A 192.0.2.1                      gtm, NSD, gdnsd
#   steered.bench.test A one of 192.0.2.10-13, weighted  gtm, gdnsd
#                        1/2/3/4, one address per answer  (NSD cannot steer)
#   steered-do: the same query with DO=1 (dnsperf -D): gtm's zone is signed
#                        (docs/dnssec.md), so each answer carries its RRSIG
#                        (made with the answers, not per query); DO=0 answers
#                        of the signed zone are unchanged.  The report gives
#                        gtm's CPU µs/query of steered-do over steered.
#   steered-ecs: the steered query with a client subnet (ECS 10.0.1.0/24)  gtm
#   topo-ecs: topo.bench.test A with the same ECS: 100,000 /24 networks
#                        (10.0.0.0/24 upward) send clients to dc1's address
#                        192.0.2.20, others get dc2's 192.0.2.21.  gtm: a
#                        region of those networks and topology rules (the
#                        region to dc1, 0.0.0.0/0 to dc2)
#                        (docs/topology.md); gdnsd: the geoip plugin with a
#                        nets map of the same networks.  The report gives
#                        gtm's CPU µs/query of topo-ecs over steered-ecs, and
#                        the time gtm took to apply the configuration with
#                        the 100,000 networks and its memory after.
#   near-ecs: near.bench.test A with ECS 81.2.69.0/24 (public): nearest by
#                        distance (nearest = true, three datacenters with
#                        coordinates) from a generated City database  gtm
#   asn-ecs: asn.bench.test A with the same ECS: an asn:64500 rule, from a
#                        generated ASN database beside it  gtm
#                        Both databases are written by
#                        `examples/bench-geo.rs`; the report gives each
#                        one's CPU µs/query over steered-ecs.
#   view-ecs: www.split.test A with ECS 10.0.1.0/24: a zone with a view
#                        (docs/views.md) whose clients are 10.0.0.0/8, and
#                        its own weighted www like steered  gtm
#                        The report gives its CPU µs/query over
#                        steered-ecs: the cost of deciding the view.
#   dnstap on/off: gtm-tap is a second gtm, the same but for its node
#                        file's [dnstap] (every query, both messages, to a
#                        file: DNSTAP_FILE), asked static and steered like
#                        gtm.  The report gives its CPU µs/query over
#                        gtm's (the writer's thread counted: the whole
#                        process) and the messages it wrote and dropped.
#
# Usage: scripts/bench-dns.sh [--duration N] [--runs N] [--only gtm,nsd,gdnsd]
#                             [--no-build] [--docs FILE | --no-docs] [--keep-tmp]
#   --duration N  seconds per measured run (default 15)
#   --runs N      measured runs per (server, record) pair (default 2)
#   --only LIST   comma-separated subset of gtm,nsd,gdnsd (default all three)
#   --no-build    skip `cargo build --release` (gtm binary must exist, and
#                 the bench-geo example beside it: examples/bench-geo)
#   --docs FILE   where to write the results section (default docs/performance.md,
#                 between <!-- bench-dns:begin --> and <!-- bench-dns:end -->)
#   --no-docs     print the table only
#   --keep-tmp    keep the temporary directory (configs, logs, dnsperf output)
# Environment: GTM_RATE_LIMIT: default (no [rate_limit] table: limited,
#   but loopback, where dnsperf runs, is exempt), off (enabled = false) or
#   on (limited, nothing exempt, the rate far above what is sent: the
#   limiter's full cost, under the limit); DNSPERF_EXTRA: more dnsperf
#   arguments (e.g. "-E 10:0123456789abcdef" for a client cookie, "-e"
#   for EDNS alone). GTM_BIN (default target/release/gtm), GTM_PORT=15353,
#   NSD_PORT=15354, GDNSD_PORT=15355, GTM_API_PORT=15380, MON_PORT=15390,
#   RUST_LOG for gtm (default warn), GTM_TAP_PORT=15356,
#   GTM_TAP_API_PORT=15381, DNSTAP_FILE (default in the temporary
#   directory; /dev/null leaves the disk out), GTM_DNSTAP=off (no gtm-tap:
#   for a gtm binary without dnstap, compared by running it after another
#   with GTM_BIN).  Needs 2+ CPUs; installs dnsperf, nsd,
#   gdnsd, dnsutils with apt-get when missing (root or passwordless sudo).
#
# Only loopback addresses are ever contacted.  The script stops only the
# processes it started, by PID, and removes its temporary directory on exit.

set -euo pipefail

# Shared mechanics: log/die, options, cleanup, install_missing, CPU time, docs.
# shellcheck source=scripts/bench-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-dns "$@"

# ---------------------------------------------------------------------------
# Locations and defaults
# ---------------------------------------------------------------------------
DURATION=15            # seconds per measured run
RUNS=2                 # measured runs per (server, record) pair
WARMUP=5               # seconds of warm-up per pair, not recorded
ONLY="gtm,nsd,gdnsd"   # servers to benchmark
WANT_TAP=1             # the dnstap pair (GTM_DNSTAP=off: none)

# Loopback ports, overridable from the environment.
ADDR=127.0.0.1
GTM_PORT=${GTM_PORT:-15353}
NSD_PORT=${NSD_PORT:-15354}
GDNSD_PORT=${GDNSD_PORT:-15355}
GTM_API_PORT=${GTM_API_PORT:-15380}
GTM_TAP_PORT=${GTM_TAP_PORT:-15356}      # the dnstap pair's second gtm
GTM_TAP_API_PORT=${GTM_TAP_API_PORT:-15381}
MON_PORT=${MON_PORT:-15390}      # TCP listener that gdnsd's monitor checks
GTM_BIN=${GTM_BIN:-$REPO_ROOT/target/release/gtm}

SERVER_CPU=0           # CPU the servers are pinned to
CLIENT_CPU=1           # CPU dnsperf is pinned to
CLIENTS=8              # dnsperf -c
OUTSTANDING=200        # dnsperf -q
START_TIMEOUT=30       # seconds to wait for a server to answer
STEERED_ADDRS=(192.0.2.10 192.0.2.11 192.0.2.12 192.0.2.13)
STEERED_WEIGHTS=(1 2 3 4)
STATIC_ADDR=192.0.2.1

while (($#)); do
    case $1 in
        --duration) DURATION=${2:?--duration needs a value}; shift 2 ;;
        --duration=*) DURATION=${1#*=}; shift ;;
        --runs) RUNS=${2:?--runs needs a value}; shift 2 ;;
        --runs=*) RUNS=${1#*=}; shift ;;
        --only) ONLY=${2:?--only needs a value}; shift 2 ;;
        --only=*) ONLY=${1#*=}; shift ;;
        *) bench_option "$@"; shift "$OPT_SHIFT" ;;   # --no-build, --docs, ...
    esac
done

in_range --duration "$DURATION" 1 600 seconds
in_range --runs "$RUNS" 1 20

# Parse --only into flags.
WANT_GTM=0 WANT_NSD=0 WANT_GDNSD=0
IFS=',' read -ra only_list <<<"$ONLY"
for s in "${only_list[@]}"; do
    case $s in
        gtm) WANT_GTM=1 ;;
        nsd) WANT_NSD=1 ;;
        gdnsd) WANT_GDNSD=1 ;;
        "") ;;
        *) die "--only: unknown server '$s' (expected gtm, nsd, gdnsd)" ;;
    esac
done
((WANT_GTM + WANT_NSD + WANT_GDNSD > 0)) || die "--only selects no server"
case ${GTM_DNSTAP:-on} in
    on) WANT_TAP=$WANT_GTM ;;
    off) WANT_TAP=0 ;;
    *) die "GTM_DNSTAP: expected on or off, not '$GTM_DNSTAP'" ;;
esac

# Stop the servers and helpers (STARTED_PIDS) with their forked children,
# and remove the temporary directory, however the script ends.
bench_traps trees

# ---------------------------------------------------------------------------
# 1. Tools: install what is missing (Debian/Ubuntu, non-interactive).
# ---------------------------------------------------------------------------
tools=(dnsperf=dnsperf dig=dnsutils taskset=util-linux getconf=libc-bin python3=python3-minimal)
((WANT_NSD)) && tools+=(nsd=nsd)
((WANT_GDNSD)) && tools+=(gdnsd=gdnsd gdnsdctl=gdnsd)
install_missing "${tools[@]}"

((WANT_GTM)) && ! ((BUILD)) && [[ ! -x $GTM_BIN ]] \
    && die "$GTM_BIN not found; build it or drop --no-build"
BENCH_GEO=$(dirname "$GTM_BIN")/examples/bench-geo

if ((WANT_GTM && BUILD)); then
    build_gtm
    [[ -x $GTM_BIN ]] || die "build produced no $GTM_BIN"
    (cd "$REPO_ROOT" && timeout 3600 cargo build --release --example bench-geo) \
        || die "cargo build --example bench-geo failed"
fi
((WANT_GTM)) && [[ ! -x $BENCH_GEO ]] \
    && die "$BENCH_GEO not found; build it (cargo build --release --example bench-geo) or drop --no-build"

NCPU=$(nproc)
((NCPU >= 2)) || die "need at least 2 CPUs (server on CPU $SERVER_CPU, dnsperf on CPU $CLIENT_CPU); have $NCPU"
CLK_TCK=$(getconf CLK_TCK)

# Refuse to start if a port we need is already taken (we only ever talk to
# 127.0.0.1, so a stray listener there would be measured instead of ours).
check_ports() {
    local p
    if ((WANT_GTM)); then
        for p in "udp $GTM_PORT" "tcp $GTM_API_PORT" "udp $GTM_TAP_PORT" "tcp $GTM_TAP_API_PORT"; do
            # shellcheck disable=SC2086
            port_busy $p && die "port ${p#* } (${p% *}) on loopback is already in use"
        done
    fi
    if ((WANT_NSD)); then port_busy udp "$NSD_PORT" && die "UDP port $NSD_PORT already in use"; fi
    if ((WANT_GDNSD)); then
        port_busy udp "$GDNSD_PORT" && die "UDP port $GDNSD_PORT already in use"
        port_busy tcp "$MON_PORT" && die "TCP port $MON_PORT already in use"
    fi
    return 0
}
command -v ss >/dev/null 2>&1 && check_ports

# ---------------------------------------------------------------------------
# 2. Temporary directory, zones and configurations.
# ---------------------------------------------------------------------------
make_tmp

# dnsperf query files: one query per line, repeated.
for rec in static steered topo near asn; do
    for ((i = 0; i < 100; i++)); do echo "$rec.bench.test A"; done >"$TMP/q-$rec.txt"
done
for ((i = 0; i < 100; i++)); do echo "www.split.test A"; done >"$TMP/q-view.txt"
# The client subnet of the -ecs records, as dnsperf -E takes it: option 8,
# family 1, source prefix 24, scope 0, address 10.0.1.
ECS_OPTION="8:000118000a0001"
ECS_SUBNET="10.0.1.0/24"
# near-ecs and asn-ecs: a public subnet the generated databases place
# (81.2.69.0/24: a location near Brest, AS64500).
GEO_ECS_OPTION="8:00011800510245"
GEO_ECS_SUBNET="81.2.69.0/24"
TOPO_NETS=100000   # /24 networks from 10.0.0.0/24 upward
TOPO_IN=192.0.2.20
TOPO_OUT=192.0.2.21
# near-ecs: Frankfurt (dc1), New York (dc2), Tokyo (dc3); the subnet asked
# is in Europe, so dc1 answers.
NEAR_ADDRS_0=192.0.2.30 NEAR_ADDRS_1=192.0.2.31 NEAR_ADDRS_2=192.0.2.32
# The networks, one per line, for both servers.
python3 - "$TOPO_NETS" >"$TMP/topo-nets.txt" <<'PY'
import sys
for i in range(int(sys.argv[1])):
    a = 0x0A000000 + (i << 8)
    print(f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.0/24")
PY

# Common zone head (SOA + NS), used by NSD and gdnsd.
write_zone_head() {
    cat <<'EOF'
$TTL 30
@       SOA  ns1.bench.test. hostmaster.bench.test. ( 1 3600 600 604800 30 )
@       NS   ns1.bench.test.
EOF
}

# --- NSD: static A only; rate limiting off, one server process. -------------
if ((WANT_NSD)); then
    mkdir -p "$TMP/nsd"
    { write_zone_head; echo "static  A    $STATIC_ADDR"; } >"$TMP/nsd/bench.test.zone"
    cat >"$TMP/nsd/nsd.conf" <<EOF
server:
    ip-address: $ADDR@$NSD_PORT
    port: $NSD_PORT
    do-ip6: no
    server-count: 1
    reuseport: no
    username: ""
    chroot: ""
    zonesdir: "$TMP/nsd"
    database: ""
    zonelistfile: "$TMP/nsd/zone.list"
    xfrdfile: "$TMP/nsd/xfrd.state"
    xfrdir: "$TMP/nsd/xfr"
    pidfile: "$TMP/nsd/nsd.pid"
    logfile: "$TMP/nsd/nsd.log"
    verbosity: 0
    hide-version: yes
    # Answer section only, like gdnsd (no NS/glue in the authority section).
    minimal-responses: yes
    # Debian's build rate-limits by default (~120 q/s answered from loopback).
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: bench.test
    zonefile: bench.test.zone
EOF
    mkdir -p "$TMP/nsd/xfr"
    nsd-checkconf "$TMP/nsd/nsd.conf" || die "nsd-checkconf rejected the config"
fi

# --- gdnsd 3.x: static A plus DYNA weighted, monitored. ----------------------
# The monitor: gdnsd's tcp_connect plugin connects to *each resource address*
# (192.0.2.10-13 here) which would leave the loopback interface, so instead an
# extmon service type does the same thing - a plain TCP connect, every second -
# against a listener on 127.0.0.1:$MON_PORT that this script keeps running.
# Its verdict drives the state of all four addresses.  Weights 1/2/3/4, all UP,
# so the up share is 100% and the up_thresh fail-open rule never triggers.
if ((WANT_GDNSD)); then
    mkdir -p "$TMP/gdnsd/zones" "$TMP/gdnsd/run" "$TMP/gdnsd/state"
    {
        write_zone_head
        echo "static  A    $STATIC_ADDR"
        echo "steered DYNA weighted!steered"
        echo "topo    DYNA geoip!topo"
    } >"$TMP/gdnsd/zones/bench.test"
    {
        cat <<EOF
options => {
    listen => [ $ADDR:$GDNSD_PORT ]
    udp_threads => 1
    tcp_threads => 1
    run_dir => "$TMP/gdnsd/run"
    state_dir => "$TMP/gdnsd/state"
}
service_types => {
    bench_tcp => {
        plugin => extmon
        direct => false
        interval => 2
        timeout => 1
        cmd => [ "/bin/bash", "-c", "exec 3<>/dev/tcp/$ADDR/$MON_PORT", "%%ITEM%%" ]
    }
}
plugins => {
    weighted => {
        steered => {
            service_types => bench_tcp
            multi => false
EOF
        for i in "${!STEERED_ADDRS[@]}"; do
            printf '            a%d => [ %s, %d ]\n' "$i" "${STEERED_ADDRS[$i]}" "${STEERED_WEIGHTS[$i]}"
        done
        cat <<EOF
        }
    }
    geoip => {
        maps => {
            bench => {
                datacenters => [ dc2, dc1 ]
                nets => bench.nets
            }
        }
        resources => {
            topo => {
                map => bench
                dcmap => { dc1 => $TOPO_IN, dc2 => $TOPO_OUT }
            }
        }
    }
}
EOF
    } >"$TMP/gdnsd/config"
    mkdir -p "$TMP/gdnsd/geoip"
    sed 's/$/ => dc1/' "$TMP/topo-nets.txt" >"$TMP/gdnsd/geoip/bench.nets"
    gdnsd -c "$TMP/gdnsd" checkconf >"$TMP/gdnsd/checkconf.log" 2>&1 \
        || { cat "$TMP/gdnsd/checkconf.log" >&2; die "gdnsd checkconf failed"; }
fi

# --- gtm: node file plus the replicated configuration. -----------------------
if ((WANT_GTM)); then
    mkdir -p "$TMP/gtm-data"
    "$BENCH_GEO" "$TMP" >/dev/null || die "bench-geo failed"
    cat >"$TMP/gtm-node.toml" <<EOF
name = "bench"
datacenter = "dc1"
data_dir = "$TMP/gtm-data"
geoip_file = "$TMP/city.mmdb"
dns_listen = ["$ADDR:$GTM_PORT"]
api_listen = "$ADDR:$GTM_API_PORT"
udp_workers = 1
EOF
    # The dnstap pair: the same device but for its [dnstap] table.
    mkdir -p "$TMP/gtm-tap-data"
    DNSTAP_FILE=${DNSTAP_FILE:-$TMP/dnstap.fstrm}
    sed -e 's|^name = "bench"$|name = "bench-tap"|' \
        -e "s|^data_dir = .*|data_dir = \"$TMP/gtm-tap-data\"|" \
        -e "s|^dns_listen = .*|dns_listen = [\"$ADDR:$GTM_TAP_PORT\"]|" \
        -e "s|^api_listen = .*|api_listen = \"$ADDR:$GTM_TAP_API_PORT\"|" \
        "$TMP/gtm-node.toml" >"$TMP/gtm-tap-node.toml"
    printf '\n[dnstap]\nfile = "%s"\n' "$DNSTAP_FILE" >>"$TMP/gtm-tap-node.toml"
    {
        cat <<EOF
[[datacenter]]
name = "dc1"
latitude = 50.1109
longitude = 8.6821

[[domain]]
name = "bench.test"
ttl = 30
nameservers = ["ns1.bench.test"]
dnssec = true

[[domain.record]]
name = "static"
type = "A"
addresses = [{ ip = "$STATIC_ADDR" }]

[[domain.record]]
name = "steered"
type = "A"
balance = "weighted"
max_answers = 1
addresses = [
EOF
        for i in "${!STEERED_ADDRS[@]}"; do
            printf '  { ip = "%s", weight = %d },\n' "${STEERED_ADDRS[$i]}" "${STEERED_WEIGHTS[$i]}"
        done
        echo "]"
        cat <<EOF

[[domain.record]]
name = "topo"
type = "A"
addresses = [{ ip = "$TOPO_IN", dc = "dc1" }, { ip = "$TOPO_OUT", dc = "dc2" }]
topology_rules = [
  { client = "region:bench-nets", datacenter = "dc1" },
  { client = "0.0.0.0/0", datacenter = "dc2" },
]

[[domain.record]]
name = "near"
type = "A"
nearest = true
addresses = [
  { ip = "$NEAR_ADDRS_0", dc = "dc1" },
  { ip = "$NEAR_ADDRS_1", dc = "dc2" },
  { ip = "$NEAR_ADDRS_2", dc = "dc3" },
]

[[domain.record]]
name = "asn"
type = "A"
addresses = [{ ip = "$TOPO_IN", dc = "dc1" }, { ip = "$TOPO_OUT", dc = "dc2" }]
topology_rules = [{ client = "asn:64500", datacenter = "dc1" }]

[[view]]
name = "internal"
clients = ["10.0.0.0/8"]

[[domain]]
name = "split.test"
ttl = 30
nameservers = ["ns1.split.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "$STATIC_ADDR" }]

[[domain.record]]
name = "www"
type = "A"
view = "internal"
balance = "weighted"
max_answers = 1
addresses = [
EOF
        for i in "${!STEERED_ADDRS[@]}"; do
            printf '  { ip = "%s", weight = %d },\n' "${STEERED_ADDRS[$i]}" "${STEERED_WEIGHTS[$i]}"
        done
        echo "]"
        cat <<EOF

[[datacenter]]
name = "dc2"
latitude = 40.7128
longitude = -74.0060

[[datacenter]]
name = "dc3"
latitude = 35.6762
longitude = 139.6503

[[region]]
name = "bench-nets"
networks = [
EOF
        sed 's/.*/  "&",/' "$TMP/topo-nets.txt"
        echo "]"
        case ${GTM_RATE_LIMIT:-default} in
            default) ;;
            off) printf '\n[rate_limit]\nenabled = false\n' ;;
            on) printf '\n[rate_limit]\nresponses_per_second = 100000000\nexempt = []\n' ;;
            *) die "GTM_RATE_LIMIT: expected default, off or on, not '$GTM_RATE_LIMIT'" ;;
        esac
    } >"$TMP/gtm-bench.toml"
fi

# ---------------------------------------------------------------------------
# 3. Start the servers (pinned to CPU 0) and check their answers.
# ---------------------------------------------------------------------------
declare -A PID_OF=() PORT_OF=() LOG_OF=()

# start NAME LOGFILE CMD...: run CMD on the server CPU in the background.
# taskset execs CMD, so $! is the server's own PID.
start() {
    local name=$1 logf=$2
    shift 2
    taskset -c "$SERVER_CPU" "$@" >"$logf" 2>&1 &
    PID_OF[$name]=$!
    LOG_OF[$name]=$logf
    STARTED_PIDS+=("$!")
    log "started $name (PID $!): $*"
}

alive_or_die() {
    kill -0 "${PID_OF[$1]}" 2>/dev/null && return 0
    log "$1 exited early; last lines of ${LOG_OF[$1]}:"
    tail -n 30 "${LOG_OF[$1]}" >&2 || true
    die "$1 is not running"
}

dig_short() { # port name
    dig +short +tries=1 +time=1 -p "$1" "@$ADDR" "$2" A 2>/dev/null || true
}

# Wait (bounded) until the server answers static.bench.test A.
wait_answering() {
    local name=$1 port=$2 deadline=$((SECONDS + START_TIMEOUT)) ans
    while ((SECONDS < deadline)); do
        alive_or_die "$name"
        ans=$(dig_short "$port" static.bench.test)
        if [[ -n $ans ]]; then
            log "$name answers on $ADDR:$port"
            return 0
        fi
        sleep 0.2
    done
    tail -n 30 "${LOG_OF[$name]}" >&2 || true
    die "$name did not answer static.bench.test within ${START_TIMEOUT}s"
}

# Verify the answers before measuring: static must be exactly 192.0.2.1;
# steered must be exactly one of the four addresses, every time.
verify() { # name port steered(0/1)
    local name=$1 port=$2 steered=$3 ans i a n
    ans=$(dig_short "$port" static.bench.test)
    [[ $ans == "$STATIC_ADDR" ]] || die "$name: static.bench.test A gave '${ans//$'\n'/ }', want $STATIC_ADDR"
    # Response size without EDNS, as dnsperf sends its queries (no -e).
    log "$name: static.bench.test A -> $ans ($(dig +noedns +tries=1 +time=1 -p "$port" "@$ADDR" static.bench.test A \
        | grep -o 'MSG SIZE  rcvd: [0-9]*'))"
    ((steered)) || return 0
    local -A seen=()
    for ((i = 0; i < 40; i++)); do
        ans=$(dig_short "$port" steered.bench.test)
        n=$(grep -c . <<<"$ans" || true)
        ((n == 1)) || die "$name: steered.bench.test A gave $n addresses ('${ans//$'\n'/ }'), want exactly 1"
        local ok=0
        for a in "${STEERED_ADDRS[@]}"; do [[ $ans == "$a" ]] && ok=1; done
        ((ok)) || die "$name: steered.bench.test A gave unexpected $ans"
        seen[$ans]=$((${seen[$ans]:-0} + 1))
    done
    local dist=""
    for a in "${STEERED_ADDRS[@]}"; do dist+=" $a:${seen[$a]:-0}"; done
    log "$name: steered.bench.test A, 40 queries, one address each:$dist"
    ((${#seen[@]} >= 2)) || die "$name: steered answers never changed address; weighting not active?"
}

# The near and asn records: the generated databases place the public
# subnet in Europe and in AS64500, so both answer from dc1.
verify_geo() { # name port
    local name=$1 port=$2 ans rec want
    for rec in near asn; do
        want=$TOPO_IN
        [[ $rec == near ]] && want=$NEAR_ADDRS_0
        ans=$(dig +short +tries=1 +time=1 +subnet="$GEO_ECS_SUBNET" -p "$port" "@$ADDR" "$rec.bench.test" A 2>/dev/null || true)
        [[ $ans == "$want" ]] || die "$name: $rec.bench.test A with ECS $GEO_ECS_SUBNET gave '${ans//$'\n'/ }', want $want"
    done
    log "$name: near and asn.bench.test A answer from dc1 for ECS $GEO_ECS_SUBNET"
}

# The topo record: a client in one of the networks gets dc1's address,
# one outside (the loopback source) dc2's.
verify_topo() { # name port
    local name=$1 port=$2 ans
    ans=$(dig +short +tries=1 +time=1 +subnet="$ECS_SUBNET" -p "$port" "@$ADDR" topo.bench.test A 2>/dev/null || true)
    [[ $ans == "$TOPO_IN" ]] || die "$name: topo.bench.test A with ECS $ECS_SUBNET gave '${ans//$'\n'/ }', want $TOPO_IN"
    ans=$(dig_short "$port" topo.bench.test)
    [[ $ans == "$TOPO_OUT" ]] || die "$name: topo.bench.test A from $ADDR gave '${ans//$'\n'/ }', want $TOPO_OUT"
    log "$name: topo.bench.test A: $TOPO_IN for ECS $ECS_SUBNET, $TOPO_OUT for $ADDR"
}

# gtm's view: the ECS subnet is internal (one of the weighted addresses),
# the bench's own address is not (the static address).
verify_view() { # name port
    local name=$1 port=$2 ans
    ans=$(dig +short +tries=1 +time=1 +subnet="$ECS_SUBNET" -p "$port" "@$ADDR" www.split.test A 2>/dev/null || true)
    [[ " ${STEERED_ADDRS[*]} " == *" $ans "* ]] || die "$name: www.split.test A with ECS $ECS_SUBNET gave '${ans//$'\n'/ }', want one of ${STEERED_ADDRS[*]}"
    ans=$(dig_short "$port" www.split.test)
    [[ $ans == "$STATIC_ADDR" ]] || die "$name: www.split.test A from $ADDR gave '${ans//$'\n'/ }', want $STATIC_ADDR"
    log "$name: www.split.test A: the internal view for ECS $ECS_SUBNET, the other for $ADDR"
}

if ((WANT_NSD)); then
    start nsd "$TMP/nsd/stdout.log" nsd -d -c "$TMP/nsd/nsd.conf"
    PORT_OF[nsd]=$NSD_PORT
    wait_answering nsd "$NSD_PORT"
    verify nsd "$NSD_PORT" 0
fi

if ((WANT_GDNSD)); then
    # The monitored "backend": accepts TCP connections on loopback and closes
    # them.  It runs on the server CPU with the servers.
    taskset -c "$SERVER_CPU" python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
while True:
    c, _ = s.accept()
    c.close()
' "$MON_PORT" >"$TMP/monitor.log" 2>&1 &
    STARTED_PIDS+=("$!")
    PID_OF[monitor]=$!
    LOG_OF[monitor]="$TMP/monitor.log"
    wait_tcp monitor "$MON_PORT"
    log "monitor target listening on $ADDR:$MON_PORT (PID ${PID_OF[monitor]})"

    start gdnsd "$TMP/gdnsd/stdout.log" gdnsd -c "$TMP/gdnsd" start
    PORT_OF[gdnsd]=$GDNSD_PORT
    wait_answering gdnsd "$GDNSD_PORT"
    # Wait (bounded) until the monitor has run and all four addresses are UP.
    deadline=$((SECONDS + START_TIMEOUT))
    while :; do
        states=$(gdnsdctl -c "$TMP/gdnsd" -t 5 states 2>/dev/null || true)
        # JSON lines like: "192.0.2.10/bench_tcp": {"state": "UP", "real_state": "UP"},
        n_up=$(grep -c '/bench_tcp": *{"state": *"UP"' <<<"$states" || true)
        ((n_up >= ${#STEERED_ADDRS[@]})) && break
        ((SECONDS < deadline)) || { echo "$states" >&2; die "gdnsd monitor states not all UP"; }
        sleep 0.5
    done
    log "gdnsd: $n_up monitored addresses UP (extmon TCP connect to $ADDR:$MON_PORT)"
    verify gdnsd "$GDNSD_PORT" 1
    verify_topo gdnsd "$GDNSD_PORT"
fi

if ((WANT_GTM)); then
    # RUST_LOG defaults to warn so per-query logging cannot skew the numbers.
    RUST_LOG=${RUST_LOG:-warn} start gtm "$TMP/gtm.log" \
        "$GTM_BIN" serve --config "$TMP/gtm-node.toml"
    PORT_OF[gtm]=$GTM_PORT
    wait_tcp gtm "$GTM_API_PORT"
    # Apply the replicated configuration once the node is up (bounded retries).
    deadline=$((SECONDS + START_TIMEOUT))
    while :; do
        t0=$(date +%s%N)
        timeout 120 "$GTM_BIN" --data-dir "$TMP/gtm-data" config apply "$TMP/gtm-bench.toml" \
            >"$TMP/gtm-apply.log" 2>&1 && break
        alive_or_die gtm
        ((SECONDS < deadline)) || { cat "$TMP/gtm-apply.log" >&2; die "gtm config apply failed"; }
        sleep 1
    done
    APPLY_S=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    RSS_MIB=$(awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/${PID_OF[gtm]}/status")
    log "gtm: configuration applied ($TOPO_NETS networks in a region) in ${APPLY_S}s; RSS ${RSS_MIB} MiB"
    wait_answering gtm "$GTM_PORT"
    verify gtm "$GTM_PORT" 1
    verify_topo gtm "$GTM_PORT"
    verify_view gtm "$GTM_PORT"
    timeout 60 "$GTM_BIN" --data-dir "$TMP/gtm-data" geoip import --asn "$TMP/asn.mmdb" \
        >"$TMP/gtm-asn.log" 2>&1 || { cat "$TMP/gtm-asn.log" >&2; die "gtm geoip import --asn failed"; }
    verify_geo gtm "$GTM_PORT"
    # The zone's key is made just after the apply: wait (bounded) until a
    # DO query of the steered record carries its RRSIG.
    deadline=$((SECONDS + START_TIMEOUT))
    until dig +dnssec +tries=1 +time=1 -p "$GTM_PORT" "@$ADDR" steered.bench.test A \
        | grep -q 'RRSIG'; do
        alive_or_die gtm
        ((SECONDS < deadline)) || die "gtm: steered.bench.test A +dnssec never carried an RRSIG"
        sleep 0.5
    done
    log "gtm: bench.test signed; DO answers carry their RRSIG"
fi
if ((WANT_TAP)); then
    RUST_LOG=${RUST_LOG:-warn} start gtm-tap "$TMP/gtm-tap.log" \
        "$GTM_BIN" serve --config "$TMP/gtm-tap-node.toml"
    PORT_OF[gtm-tap]=$GTM_TAP_PORT
    wait_tcp gtm-tap "$GTM_TAP_API_PORT"
    deadline=$((SECONDS + START_TIMEOUT))
    until timeout 120 "$GTM_BIN" --data-dir "$TMP/gtm-tap-data" config apply "$TMP/gtm-bench.toml" \
        >"$TMP/gtm-tap-apply.log" 2>&1; do
        alive_or_die gtm-tap
        ((SECONDS < deadline)) || { cat "$TMP/gtm-tap-apply.log" >&2; die "gtm-tap config apply failed"; }
        sleep 1
    done
    wait_answering gtm-tap "$GTM_TAP_PORT"
    verify gtm-tap "$GTM_TAP_PORT" 1
    log "gtm-tap: dnstap to $DNSTAP_FILE"
fi

# The dnstap messages gtm-tap wrote (sent) or dropped, from its /metrics.
dnstap_count() { # result
    python3 -c 'import sys, urllib.request
text = urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=10).read().decode()
for line in text.splitlines():
    if line.startswith("gtm_dnstap_messages_total{result=\"" + sys.argv[2] + "\"}"):
        print(int(float(line.split()[-1])))' "$ADDR:$GTM_TAP_API_PORT" "$1"
}

# ---------------------------------------------------------------------------
# 4. Measure.
# ---------------------------------------------------------------------------
# The servers' CPU time is cpu_ticks (bench-lib.sh): utime+stime summed over
# the process tree, since NSD answers from a forked child.
now_ns() { date +%s%N; }

RESULTS="$TMP/results.tsv"
: >"$RESULTS"

# One dnsperf run against server NAME for RECORD; optionally recorded.
run_dnsperf() { # name record seconds label
    local name=$1 record=$2 secs=$3 label=$4 pid port out t0 t1 c0 c1
    pid=${PID_OF[$name]} port=${PORT_OF[$name]}
    alive_or_die "$name"
    out="$TMP/dnsperf-$name-$record-$label.txt"
    # `-do` records are their base record's queries with the DO bit.
    local queries=$record flags=()
    if [[ $record == *-do ]]; then
        queries=${record%-do}
        flags=(-D)
    elif [[ $record == near-ecs || $record == asn-ecs ]]; then
        queries=${record%-ecs}
        flags=(-E "$GEO_ECS_OPTION")
    elif [[ $record == *-ecs ]]; then
        queries=${record%-ecs}
        flags=(-E "$ECS_OPTION")
    fi
    c0=$(cpu_ticks "$pid"); t0=$(now_ns)
    # In the background + wait, so a SIGTERM/SIGINT to this script runs the
    # cleanup trap at once (cleanup also stops this dnsperf).
    # DNSPERF_EXTRA is split into words on purpose.
    # shellcheck disable=SC2086
    timeout $((secs + 60)) taskset -c "$CLIENT_CPU" dnsperf -s "$ADDR" -p "$port" \
        -d "$TMP/q-$queries.txt" "${flags[@]}" -c "$CLIENTS" -q "$OUTSTANDING" -l "$secs" ${DNSPERF_EXTRA:-} >"$out" 2>&1 &
    CLIENT_PID=$!
    wait "$CLIENT_PID" || { cat "$out" >&2; die "dnsperf failed against $name"; }
    CLIENT_PID=""
    t1=$(now_ns); c1=$(cpu_ticks "$pid")
    alive_or_die "$name"
    [[ $label == warmup ]] && return 0
    local qps completed lost
    qps=$(awk '/Queries per second:/ {print $4}' "$out")
    completed=$(awk '/Queries completed:/ {print $3}' "$out")
    lost=$(awk '/Queries lost:/ {print $3}' "$out")
    [[ -n $qps && -n $completed && -n $lost ]] || { cat "$out" >&2; die "cannot parse dnsperf output"; }
    # CPU % of one core over the wall time of the run, and CPU µs per answer.
    local cpu_pct us_q
    cpu_pct=$(awk -v d=$((c1 - c0)) -v hz="$CLK_TCK" -v ns=$((t1 - t0)) \
        'BEGIN { printf "%.1f", 100 * (d / hz) / (ns / 1e9) }')
    us_q=$(awk -v d=$((c1 - c0)) -v hz="$CLK_TCK" -v n="$completed" \
        'BEGIN { if (n > 0) printf "%.2f", 1e6 * (d / hz) / n; else print "n/a" }')
    printf '%s\t%s\t%s\t%.0f\t%s\t%s\t%s\n' "$name" "$record" "$label" "$qps" "$lost" "$cpu_pct" "$us_q" >>"$RESULTS"
    log "$name $record run $label: $(printf '%.0f' "$qps") q/s, lost $lost, server CPU $cpu_pct %, $us_q µs/query"
}

# Pairs in the order used on odd runs: servers alternate from one run to the next.
PAIRS=()
((WANT_GTM)) && PAIRS+=("gtm static")
((WANT_TAP)) && PAIRS+=("gtm-tap static")
((WANT_NSD)) && PAIRS+=("nsd static")
((WANT_GDNSD)) && PAIRS+=("gdnsd static")
((WANT_GTM)) && PAIRS+=("gtm steered")
((WANT_TAP)) && PAIRS+=("gtm-tap steered")
((WANT_GTM)) && PAIRS+=("gtm steered-do")
((WANT_GDNSD)) && PAIRS+=("gdnsd steered")
((WANT_GTM)) && PAIRS+=("gtm steered-ecs")
((WANT_GTM)) && PAIRS+=("gtm topo-ecs")
((WANT_GTM)) && PAIRS+=("gtm near-ecs")
((WANT_GTM)) && PAIRS+=("gtm asn-ecs")
((WANT_GTM)) && PAIRS+=("gtm view-ecs")
((WANT_GDNSD)) && PAIRS+=("gdnsd topo-ecs")

total=$((${#PAIRS[@]} * (WARMUP + RUNS * DURATION)))
log "measuring ${#PAIRS[@]} pairs: ${WARMUP}s warm-up + $RUNS x ${DURATION}s each (~${total}s)"

for pair in "${PAIRS[@]}"; do
    read -r name record <<<"$pair"
    log "warm-up: $name $record (${WARMUP}s)"
    run_dnsperf "$name" "$record" "$WARMUP" warmup
done

for ((run = 1; run <= RUNS; run++)); do
    order=("${PAIRS[@]}")
    if ((run % 2 == 0)); then   # reverse order on even runs
        order=()
        for ((i = ${#PAIRS[@]} - 1; i >= 0; i--)); do order+=("${PAIRS[$i]}"); done
    fi
    for pair in "${order[@]}"; do
        read -r name record <<<"$pair"
        run_dnsperf "$name" "$record" "$DURATION" "$run"
        sleep 1
    done
done

if ((WANT_TAP)); then
    DNSTAP_SENT=$(dnstap_count sent)
    DNSTAP_DROPPED=$(dnstap_count dropped)
    log "gtm-tap: dnstap messages sent $DNSTAP_SENT, dropped $DNSTAP_DROPPED"
fi

# ---------------------------------------------------------------------------
# 5. Report: Markdown table, ratios, and docs/performance.md.
# ---------------------------------------------------------------------------
version_of() {
    case $1 in
        nsd) nsd -v 2>&1 | awk 'NR == 1 {print "NSD " $3}' ;;
        gdnsd) gdnsd -c /nonexistent checkconf 2>&1 | grep -o 'gdnsd version [0-9.]*' | head -1 | sed 's/ version//' ;;
        gtm | gtm-tap) gtm_version ;;
    esac
}

# Mean of column COL over the runs of SERVER/RECORD (empty if none).
mean_of() { # server record col
    awk -F'\t' -v s="$1" -v r="$2" -v c="$3" \
        '$1 == s && $2 == r && $c != "n/a" { t += $c; n++ } END { if (n) printf "%.4f", t / n }' "$RESULTS"
}

ratio_line() { # label num den
    awk -v l="$1" -v a="$2" -v b="$3" 'BEGIN { if (a != "" && b > 0) printf "%s %.2f", l, a / b }'
}

make_report() {
    echo "| server | record | run | q/s | lost | server CPU % | CPU µs/query |"
    echo "|---|---|---|---|---|---|---|"
    # Rows grouped gtm, gdnsd, nsd; then record; then run.
    awk -F'\t' 'BEGIN { rank["gtm"] = 1; rank["gtm-tap"] = 1; rank["gdnsd"] = 2; rank["nsd"] = 3 }
                 { print rank[$1] "\t" $0 }' "$RESULTS" \
        | sort -t $'\t' -k1,1n -k3,3 -k4,4n \
        | awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, $6, $7, $8 }'
    echo
    local parts=() q_gtm q_gd u_gtm u_gd
    q_gtm=$(mean_of gtm steered 4); q_gd=$(mean_of gdnsd steered 4)
    u_gtm=$(mean_of gtm steered 7); u_gd=$(mean_of gdnsd steered 7)
    if [[ -n $q_gtm && -n $q_gd ]]; then
        parts+=("$(ratio_line "gtm/gdnsd steered q/s:" "$q_gtm" "$q_gd")")
        parts+=("$(ratio_line "gtm/gdnsd steered CPU µs/query:" "$u_gtm" "$u_gd")")
    fi
    u_gtm=$(mean_of gtm steered-do 7); u_gd=$(mean_of gtm steered 7)
    if [[ -n $u_gtm && -n $u_gd ]]; then
        parts+=("$(ratio_line "gtm signed/unsigned steered CPU µs/query (DO=1 over DO=0):" "$u_gtm" "$u_gd")")
    fi
    u_gtm=$(mean_of gtm topo-ecs 7); u_gd=$(mean_of gtm steered-ecs 7)
    if [[ -n $u_gtm && -n $u_gd ]]; then
        parts+=("$(ratio_line "gtm topology-rule/weighted CPU µs/query (both with ECS):" "$u_gtm" "$u_gd")")
    fi
    u_gtm=$(mean_of gtm near-ecs 7); u_gd=$(mean_of gtm steered-ecs 7)
    if [[ -n $u_gtm && -n $u_gd ]]; then
        parts+=("$(ratio_line "gtm nearest-by-distance/weighted CPU µs/query (both with ECS):" "$u_gtm" "$u_gd")")
    fi
    u_gtm=$(mean_of gtm asn-ecs 7); u_gd=$(mean_of gtm steered-ecs 7)
    if [[ -n $u_gtm && -n $u_gd ]]; then
        parts+=("$(ratio_line "gtm ASN-rule/weighted CPU µs/query (both with ECS):" "$u_gtm" "$u_gd")")
    fi
    u_gtm=$(mean_of gtm view-ecs 7); u_gd=$(mean_of gtm steered-ecs 7)
    if [[ -n $u_gtm && -n $u_gd ]]; then
        parts+=("$(ratio_line "gtm view/weighted CPU µs/query (both with ECS):" "$u_gtm" "$u_gd")")
    fi
    for rec in static steered; do
        u_gtm=$(mean_of gtm-tap "$rec" 7); u_gd=$(mean_of gtm "$rec" 7)
        if [[ -n $u_gtm && -n $u_gd ]]; then
            parts+=("$(ratio_line "gtm dnstap on/off $rec CPU µs/query:" "$u_gtm" "$u_gd")")
        fi
    done
    u_gtm=$(mean_of gtm topo-ecs 7); u_gd=$(mean_of gdnsd topo-ecs 7)
    if [[ -n $u_gtm && -n $u_gd ]]; then
        parts+=("$(ratio_line "gtm/gdnsd topology (100,000 networks, ECS) CPU µs/query:" "$u_gtm" "$u_gd")")
    fi
    q_gtm=$(mean_of gtm static 4); q_gd=$(mean_of nsd static 4)
    u_gtm=$(mean_of gtm static 7); u_gd=$(mean_of nsd static 7)
    if [[ -n $q_gtm && -n $q_gd ]]; then
        parts+=("$(ratio_line "gtm/NSD static q/s:" "$q_gtm" "$q_gd")")
        parts+=("$(ratio_line "gtm/NSD static CPU µs/query:" "$u_gtm" "$u_gd")")
    fi
    if ((${#parts[@]})); then
        local joined
        joined=$(printf '%s; ' "${parts[@]}")
        echo "Ratios (means over runs): ${joined%; }"
        echo
    fi
    local versions=() s
    for s in gtm nsd gdnsd; do
        [[ -n ${PID_OF[$s]:-} ]] && versions+=("$(version_of "$s")")
    done
    if [[ -n ${DNSTAP_SENT:-} ]]; then
        echo "gtm-tap (dnstap to a file, every query, AUTH_QUERY and AUTH_RESPONSE) wrote" \
            "$DNSTAP_SENT dnstap messages and dropped $DNSTAP_DROPPED (queue full) over all its runs."
        echo
    fi
    if [[ -n ${APPLY_S:-} ]]; then
        echo "gtm applied the configuration with its $TOPO_NETS-network region in ${APPLY_S} s" \
            "(\`gtm config apply\`, wall time) and held ${RSS_MIB} MiB RSS after."
        echo
    fi
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname) with nproc=$NCPU" \
        "($(printf '%s, ' "${versions[@]}")dnsperf $(dnsperf -h 2>&1 | awk '/^Version/ {print $2; exit}'))."
    echo "Server on CPU $SERVER_CPU with one worker, dnsperf on CPU $CLIENT_CPU" \
        "(\`-c $CLIENTS -q $OUTSTANDING -l $DURATION\`), ${WARMUP}s warm-up per pair," \
        "runs alternated between servers. CPU is utime+stime of the server's process tree."
    echo
    echo "Command: \`$INVOCATION\`"
}

REPORT=$(make_report)
echo
echo "$REPORT"

# Replace the section between the markers in docs/performance.md.
if [[ -n $DOCS_FILE ]]; then
    write_docs_section "DNS benchmark against NSD and gdnsd, written by \`scripts/bench-dns.sh\`." "$REPORT"
fi
