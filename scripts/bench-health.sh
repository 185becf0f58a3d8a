#!/usr/bin/env bash
# bench-health.sh - DNS latency of gtm with and without a large health-check load.
#
# What it answers (docs/performance.md, "DNS under 10,000 checks a second"):
# 10,000 checks at a 1 s interval against local targets on one device
# while dnsperf measures DNS; probe CPU and DNS latency with and without
# the probe load (target: DNS p99 within 2x of idle, no loss).
#
# Method: gtm runs with one UDP worker.  dnsperf sends static.bench.test A at
# a fixed rate (`-Q`, default 20,000 q/s, well below saturation) so that its
# latency is service latency, not queueing.  dnsperf 2.10 prints no
# percentiles, so it runs with -v (one line per answered query, latency in µs
# resolution) and the script computes p50 / p99 / p99.9 from those lines.
# The probe target is a TCP listener on 127.0.0.1:TARGET_PORT that accepts
# and closes (python3, blocking accept loop, backlog 4096), pinned to CPU 1.
# It counts the connections it accepted, which gives the probe rate actually
# achieved.  Where the rest runs is the layout (--layout):
#   split   (default) the node file's `dns_cpus = [0]`: gtm's UDP worker on
#           CPU 0, every other gtm thread (probes, API, cluster) on CPU 1
#           with the target; dnsperf on CPU 0 beside the DNS worker, in idle
#           and loaded runs alike, so that the probe load and the bench's
#           own load (the target, the handshakes' kernel work) land on the
#           other core and the client's place does not change between runs;
#   shared  the whole of gtm pinned to CPU 0 (`taskset -c 0`), probes
#           included, dnsperf and the target on CPU 1: probing competes
#           with answering on one core (the layout of the first figures).
#
# Two modes, same zone in both:
#   idle    gtm with zone bench.test (static A 192.0.2.1, steered A with a
#           scenario-free address) and no checks;
#   loaded  the same plus --checks fixed-target TCP checks (t00001...) at a
#           1 s interval, timeout 500 ms, against the local target, and
#           scenario s1 = "t00001 AND t00002" steering steered.bench.test.
# After applying the loaded configuration the script waits (bounded) until
# >= 99 % of the checks are decided (not Preparing), then measures.  A 5 s
# dnsperf warm-up precedes the first measured run.  With --runs N the modes
# alternate idle,loaded / loaded,idle / ... (ABBA), switching the
# configuration only when the mode changes.  For every run: q/s, lost, DNS
# p50/p99/p99.9 (ms), gtm CPU % of one core (utime+stime from /proc/PID/stat
# over the run: DNS plus probing, so loaded minus idle is the probe cost),
# probes/s accepted by the target, target CPU %, TCP listen overflows
# (system-wide TcpExtListenOverflows delta; must be 0, else the target did
# not keep up) and check states (OK / Error / other) at the end of the run.
#
# Usage: scripts/bench-health.sh [--duration N] [--runs N] [--rate QPS]
#                                [--checks N] [--settle N] [--layout L] [--check T]
#                                [--no-build]
#                                [--docs FILE | --no-docs] [--keep-tmp]
#   --duration N  seconds per measured dnsperf run (default 15)
#   --runs N      measured runs per mode (default 2; ABBA order)
#   --rate QPS    dnsperf -Q rate limit in queries/s (default 20000)
#   --checks N    number of fixed-target checks in the loaded mode (default 10000)
#   --settle N    at most N seconds to wait for >= 99 % of checks decided (default 120)
#   --layout L    split (default) or shared: where gtm's threads and dnsperf run (above)
#   --check T     the loaded checks' type: tcp (default; the target accepts
#                 and closes), http (GET /health, a new connection per
#                 probe) or http-reuse (the same with `reuse_connection =
#                 true`); for http the target is a python asyncio HTTP/1.1
#                 server with keep-alive, counting requests, so use fewer
#                 checks (e.g. --checks 2000)
#   --no-build    skip `cargo build --release` (the gtm binary must exist)
#   --docs FILE   where to write the results (default docs/performance.md,
#                 between <!-- bench-health:begin --> and <!-- bench-health:end -->)
#   --no-docs     print the table only
#   --keep-tmp    keep the temporary directory (configs, logs, dnsperf output)
# Environment: GTM_BIN (default $CARGO_TARGET_DIR/release/gtm, else
#   target/release/gtm), GTM_PORT=15353, GTM_API_PORT=15380,
#   TARGET_PORT=15390, CLIENT_CPU (dnsperf's CPU; default: 0 split, 1 shared),
#   RUST_LOG for gtm (default warn).  Needs 2+ CPUs;
#   installs dnsperf, dnsutils, python3 with apt-get when missing (root or
#   passwordless sudo).
#
# Only loopback addresses are ever contacted.  The script stops only the
# processes it started, by PID, and removes its temporary directory on exit.

set -euo pipefail

# Shared mechanics: log/die, options, cleanup, install_missing, CPU time, docs.
# shellcheck source=scripts/bench-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-health "$@"

# ---------------------------------------------------------------------------
# Locations and defaults
# ---------------------------------------------------------------------------
DURATION=15            # seconds per measured run
RUNS=2                 # measured runs per mode
WARMUP=5               # seconds of warm-up, not recorded
RATE=20000             # dnsperf -Q
NCHECKS=10000          # checks in the loaded mode
SETTLE=120             # max seconds to wait for checks to be decided
DECIDED_PCT=99         # share of checks that must be decided before measuring
QUIET_MAX=10           # a run where other processes used more CPU (% of one core) is "noisy"

ADDR=127.0.0.1
GTM_PORT=${GTM_PORT:-15353}
GTM_API_PORT=${GTM_API_PORT:-15380}
TARGET_PORT=${TARGET_PORT:-15390}
if [[ -n ${CARGO_TARGET_DIR:-} ]]; then
    GTM_BIN=${GTM_BIN:-$CARGO_TARGET_DIR/release/gtm}
else
    GTM_BIN=${GTM_BIN:-$REPO_ROOT/target/release/gtm}
fi

LAYOUT=split
CHECK_TYPE=tcp
SERVER_CPU=0           # gtm's DNS worker (shared: all of gtm)
OTHER_CPU=1            # the probe target (split: and gtm's other threads)
CLIENTS=8              # dnsperf -c
OUTSTANDING=100        # dnsperf -q (the -Q rate keeps the real number low)
START_TIMEOUT=30
CHECK_INTERVAL=1s
CHECK_TIMEOUT=500ms
STATIC_ADDR=192.0.2.1
STEERED_SCN_ADDR=192.0.2.10   # hc = scenario:s1 in the loaded mode
STEERED_STATIC_ADDR=192.0.2.11

while (($#)); do
    case $1 in
        --duration) DURATION=${2:?--duration needs a value}; shift 2 ;;
        --duration=*) DURATION=${1#*=}; shift ;;
        --runs) RUNS=${2:?--runs needs a value}; shift 2 ;;
        --runs=*) RUNS=${1#*=}; shift ;;
        --rate) RATE=${2:?--rate needs a value}; shift 2 ;;
        --rate=*) RATE=${1#*=}; shift ;;
        --checks) NCHECKS=${2:?--checks needs a value}; shift 2 ;;
        --checks=*) NCHECKS=${1#*=}; shift ;;
        --settle) SETTLE=${2:?--settle needs a value}; shift 2 ;;
        --settle=*) SETTLE=${1#*=}; shift ;;
        --layout) LAYOUT=${2:?--layout needs a value}; shift 2 ;;
        --layout=*) LAYOUT=${1#*=}; shift ;;
        --check) CHECK_TYPE=${2:?--check needs a value}; shift 2 ;;
        --check=*) CHECK_TYPE=${1#*=}; shift ;;
        *) bench_option "$@"; shift "$OPT_SHIFT" ;;   # --no-build, --docs, ...
    esac
done

in_range --duration "$DURATION" 1 600
in_range --runs "$RUNS" 1 20
in_range --rate "$RATE" 100 1000000
in_range --checks "$NCHECKS" 2 99999
in_range --settle "$SETTLE" 1 1800
case $LAYOUT in
    split) GTM_CPUS=$SERVER_CPU,$OTHER_CPU CLIENT_CPU=${CLIENT_CPU:-$SERVER_CPU} ;;
    shared) GTM_CPUS=$SERVER_CPU CLIENT_CPU=${CLIENT_CPU:-$OTHER_CPU} ;;
    *) die "--layout: \"$LAYOUT\" is not split or shared" ;;
esac
TARGET_WHAT="accept-and-close"
[[ $CHECK_TYPE == tcp ]] || TARGET_WHAT="asyncio HTTP/1.1 with keep-alive"
case $CHECK_TYPE in
    tcp) CHECK_FIELDS='type = "tcp"' ;;
    http) CHECK_FIELDS=$'type = "http"\npath = "/health"' ;;
    http-reuse) CHECK_FIELDS=$'type = "http"\npath = "/health"\nreuse_connection = true' ;;
    *) die "--check: \"$CHECK_TYPE\" is not tcp, http or http-reuse" ;;
esac

# Stop gtm and the probe target (STARTED_PIDS) with any children, and remove
# the temporary directory, however the script ends.
bench_traps trees

# ---------------------------------------------------------------------------
# 1. Tools: install what is missing (Debian/Ubuntu, non-interactive).
# ---------------------------------------------------------------------------
install_missing dnsperf=dnsperf dig=dnsutils taskset=util-linux getconf=libc-bin \
    python3=python3-minimal ss=iproute2

if ((BUILD)); then build_gtm; fi
[[ -x $GTM_BIN ]] || die "$GTM_BIN not found; build it, set GTM_BIN, or drop --no-build"

NCPU=$(nproc)
((NCPU >= 2)) || die "need at least 2 CPUs (CPU $SERVER_CPU for DNS, CPU $OTHER_CPU for the rest); have $NCPU"
CLK_TCK=$(getconf CLK_TCK)

# Probes use one ephemeral port each; with fewer ports than probes in flight
# per TIME_WAIT period connects can fail for reasons unrelated to gtm.
read -r port_lo port_hi </proc/sys/net/ipv4/ip_local_port_range
TW_REUSE=$(cat /proc/sys/net/ipv4/tcp_tw_reuse 2>/dev/null || echo "?")
NOFILE=$(ulimit -n)
log "ephemeral ports $port_lo-$port_hi, tcp_tw_reuse=$TW_REUSE, open files limit $NOFILE"

# A shared machine: say so when something else is already using the CPUs.
busy0=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat)
sleep 2
busy1=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat)
PRE_BUSY=$(awk -v d=$((busy1 - busy0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", 100 * d / hz / 2 }')
if ((PRE_BUSY > 20)); then
    log "WARNING: the machine is already busy ($PRE_BUSY % of one core used by others); latency figures will be noisy"
fi

port_busy udp "$GTM_PORT" && die "UDP port $GTM_PORT on loopback is already in use"
port_busy tcp "$GTM_API_PORT" && die "TCP port $GTM_API_PORT on loopback is already in use"
port_busy tcp "$TARGET_PORT" && die "TCP port $TARGET_PORT on loopback is already in use"

# ---------------------------------------------------------------------------
# 2. Temporary directory and configurations.
# ---------------------------------------------------------------------------
make_tmp

for ((i = 0; i < 100; i++)); do echo "static.bench.test A"; done >"$TMP/q-static.txt"

mkdir -p "$TMP/gtm-data"
cat >"$TMP/gtm-node.toml" <<EOF
name = "bench"
datacenter = "dc1"
data_dir = "$TMP/gtm-data"
dns_listen = ["$ADDR:$GTM_PORT"]
api_listen = "$ADDR:$GTM_API_PORT"
udp_workers = 1
max_concurrent_probes = 2000
EOF
if [[ $LAYOUT == split ]]; then echo "dns_cpus = [$SERVER_CPU]" >>"$TMP/gtm-node.toml"; fi

# write_config MODE: the replicated configuration for idle or loaded.
write_config() {
    local mode=$1 i
    cat <<EOF
[[datacenter]]
name = "dc1"

EOF
    if [[ $mode == loaded ]]; then
        for ((i = 1; i <= NCHECKS; i++)); do
            printf '[[check]]\nname = "t%05d"\n%s\ntarget = "%s"\nport = %d\ninterval = "%s"\ntimeout = "%s"\n\n' \
                "$i" "$CHECK_FIELDS" "$ADDR" "$TARGET_PORT" "$CHECK_INTERVAL" "$CHECK_TIMEOUT"
        done
        cat <<'EOF'
[[scenario]]
name = "s1"
condition = "t00001 AND t00002"

EOF
    fi
    cat <<EOF
[[domain]]
name = "bench.test"
ttl = 30
nameservers = ["ns1.bench.test"]

[[domain.record]]
name = "static"
type = "A"
addresses = [{ ip = "$STATIC_ADDR" }]

[[domain.record]]
name = "steered"
type = "A"
EOF
    if [[ $mode == loaded ]]; then
        echo "addresses = [{ ip = \"$STEERED_SCN_ADDR\", hc = \"scenario:s1\" }, { ip = \"$STEERED_STATIC_ADDR\" }]"
    else
        echo "addresses = [{ ip = \"$STEERED_SCN_ADDR\" }, { ip = \"$STEERED_STATIC_ADDR\" }]"
    fi
}
write_config idle >"$TMP/gtm-idle.toml"
write_config loaded >"$TMP/gtm-loaded.toml"
timeout 60 "$GTM_BIN" config check "$TMP/gtm-loaded.toml" >"$TMP/config-check.log" 2>&1 \
    || { cat "$TMP/config-check.log" >&2; die "gtm config check rejected the loaded configuration"; }

# The probe target, counting what it served (accepted connections for tcp,
# requests for http); the count and a timestamp are written to a file twice
# a second.
cat >"$TMP/target.py" <<'EOF'
import asyncio, os, socket, sys, threading, time
port, out, kind = int(sys.argv[1]), sys.argv[2], sys.argv[3]
count = 0
def report():
    while True:
        with open(out + ".tmp", "w") as f:
            f.write("%d %.6f\n" % (count, time.time()))
        os.replace(out + ".tmp", out)
        time.sleep(0.5)
threading.Thread(target=report, daemon=True).start()
if kind == "tcp":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(4096)
    # The file descriptor alone: no socket object per connection, so that
    # the target's own cost is the kernel's.
    accept, close = s._accept, os.close
    while True:
        fd, _ = accept()
        close(fd)
        count += 1
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CLOSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
async def serve(reader, writer):
    global count
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            count += 1
            if b"onnection: close" in head:
                writer.write(CLOSE)
                await writer.drain()
                break
            writer.write(OK)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()
asyncio.run(main())
EOF

# ---------------------------------------------------------------------------
# 3. Start the target and gtm.
# ---------------------------------------------------------------------------
declare -A PID_OF=() LOG_OF=()

start() { # name cpu logfile cmd...
    local name=$1 cpu=$2 logf=$3
    shift 3
    taskset -c "$cpu" "$@" >"$logf" 2>&1 &
    PID_OF[$name]=$!
    LOG_OF[$name]=$logf
    STARTED_PIDS+=("$!")
    log "started $name (PID $!, CPU $cpu): $*"
}

alive_or_die() {
    kill -0 "${PID_OF[$1]}" 2>/dev/null && return 0
    log "$1 (PID ${PID_OF[$1]}) exited; last lines of ${LOG_OF[$1]}:"
    tail -n 30 "${LOG_OF[$1]}" >&2 || true
    die "$1 is not running"
}

dig_short() { # name
    dig +short +tries=1 +time=1 -p "$GTM_PORT" "@$ADDR" "$1" A 2>/dev/null || true
}

COUNT_FILE="$TMP/target.count"
start target "$OTHER_CPU" "$TMP/target.log" python3 "$TMP/target.py" "$TARGET_PORT" "$COUNT_FILE" "${CHECK_TYPE%-reuse}"
wait_tcp target "$TARGET_PORT"

RUST_LOG=${RUST_LOG:-warn} start gtm "$GTM_CPUS" "$TMP/gtm.log" \
    "$GTM_BIN" serve --config "$TMP/gtm-node.toml"
wait_tcp gtm "$GTM_API_PORT"

gtm_cli() { "$GTM_BIN" --data-dir "$TMP/gtm-data" "$@"; }

CURRENT_MODE=""
apply_mode() { # idle|loaded
    local mode=$1 deadline=$((SECONDS + START_TIMEOUT)) t0=$SECONDS
    until timeout 60 "$GTM_BIN" --data-dir "$TMP/gtm-data" config apply "$TMP/gtm-$mode.toml" \
        >"$TMP/gtm-apply-$mode.log" 2>&1; do
        alive_or_die gtm
        ((SECONDS < deadline)) || { cat "$TMP/gtm-apply-$mode.log" >&2; die "gtm config apply ($mode) failed"; }
        sleep 1
    done
    CURRENT_MODE=$mode
    log "gtm: $mode configuration applied in $((SECONDS - t0))s"
}

# Check states as "total ok error preparing other", from `check list --json`.
# Prints "? ? ? ? ?" when the list cannot be had in 30 s.
check_counts() {
    local json
    if ! json=$(timeout 30 "$GTM_BIN" --data-dir "$TMP/gtm-data" check list --json 2>"$TMP/check-list.err"); then
        echo "? ? ? ? ?"
        return 0
    fi
    printf '%s' "$json" >"$TMP/checks.json"
    python3 - "$TMP/checks.json" <<'EOF'
import json, sys
checks = json.load(open(sys.argv[1]))
if isinstance(checks, dict):
    checks = checks.get("checks", [])
n = {"OK": 0, "Error": 0, "Preparing": 0}
other = 0
for c in checks:
    s = c.get("state")
    if s in n:
        n[s] += 1
    else:
        other += 1
print(len(checks), n["OK"], n["Error"], n["Preparing"], other)
EOF
}

# The most common Error reasons in the last check list (for the report).
error_reasons() {
    [[ -f $TMP/checks.json ]] || return 0
    python3 - "$TMP/checks.json" <<'EOF'
import collections, json, sys
checks = json.load(open(sys.argv[1]))
if isinstance(checks, dict):
    checks = checks.get("checks", [])
c = collections.Counter(x.get("reason", "") for x in checks if x.get("state") == "Error")
print("; ".join("%d x %s" % (n, r or "(no reason)") for r, n in c.most_common(5)))
EOF
}

SETTLE_NOTE=()
wait_decided() {
    local deadline=$((SECONDS + SETTLE)) t0=$SECONDS total ok err prep other decided
    while :; do
        alive_or_die gtm
        read -r total ok err prep other < <(check_counts)
        if [[ $total != "?" ]] && ((total >= NCHECKS)); then
            decided=$((total - prep))
            if ((decided * 100 >= total * DECIDED_PCT)); then
                log "checks decided after $((SECONDS - t0))s: $decided/$total (OK $ok, Error $err, other $other)"
                return 0
            fi
        fi
        if ((SECONDS >= deadline)); then
            local msg="only ${decided:-?}/${total} checks decided after ${SETTLE}s (OK $ok, Error $err, Preparing $prep)"
            log "WARNING: $msg; measuring anyway"
            SETTLE_NOTE+=("$msg")
            return 0
        fi
        sleep 2
    done
}

# ---------------------------------------------------------------------------
# 4. Measure.
# ---------------------------------------------------------------------------
# gtm's and the target's CPU time is cpu_ticks PID [usr] (bench-lib.sh):
# utime+stime, or utime alone, over the process tree.

# CPU ticks (utime+stime+cutime+cstime) of every process on the machine
# except this script and the processes it started: what others used.  A
# child reaped inside the window moves into its parent's cutime, so the
# difference of two samples is the others' CPU time in between.
foreign_ticks() {
    local -a mine=("$$")
    local pid
    for pid in "${STARTED_PIDS[@]}"; do mapfile -t -O "${#mine[@]}" mine < <(tree_pids "$pid"); done
    python3 - "${mine[@]}" <<'PY'
import os, sys
mine = set(sys.argv[1:])
total = 0
for pid in os.listdir("/proc"):
    if not pid.isdigit() or pid in mine:
        continue
    try:
        with open("/proc/%s/stat" % pid) as f:
            f = f.read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    if f[1] in mine:  # a helper started by this script (ppid)
        continue
    total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
print(total)
PY
}
# "run_delay_ns pcount" summed over gtm's dns-udp threads (/proc/.../schedstat):
# time runnable but waiting for the CPU, and how many times they were scheduled.
udp_wait() { # pid
    local t comm d=0 n=0 rd pc
    for t in /proc/"$1"/task/*; do
        { comm=$(<"$t/comm"); } 2>/dev/null || continue
        [[ $comm == dns-udp* ]] || continue
        read -r _ rd pc <"$t/schedstat" 2>/dev/null || continue
        d=$((d + rd)) n=$((n + pc))
    done
    echo "$d $n"
}
now_ns() { date +%s%N; }
accepted() { awk '{print $1}' "$COUNT_FILE" 2>/dev/null || echo 0; }
listen_overflows() { # system-wide TcpExt ListenOverflows + ListenDrops
    awk '/^TcpExt:/ { if (!h) { for (i = 2; i <= NF; i++) col[$i] = i; h = 1; next }
                      print $col["ListenOverflows"] + $col["ListenDrops"]; exit }' /proc/net/netstat
}
rss_mb() { awk '/^VmRSS:/ {printf "%.0f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }

RESULTS="$TMP/results.tsv"
: >"$RESULTS"

run_dnsperf() { # label seconds mode
    local label=$1 secs=$2 mode=$3 out gpid tpid t0 t1 c0 c1 tc0 tc1 a0 a1 o0 o1
    gpid=${PID_OF[gtm]} tpid=${PID_OF[target]}
    alive_or_die gtm
    alive_or_die target
    out="$TMP/dnsperf-$label.txt"
    local u0 u1 f0 f1 wd0 wn0 wd1 wn1
    f0=$(foreign_ticks); read -r wd0 wn0 < <(udp_wait "$gpid")
    c0=$(cpu_ticks "$gpid"); u0=$(cpu_ticks "$gpid" usr); tc0=$(cpu_ticks "$tpid")
    a0=$(accepted); o0=$(listen_overflows); t0=$(now_ns)
    timeout $((secs + 60)) taskset -c "$CLIENT_CPU" dnsperf -v -s "$ADDR" -p "$GTM_PORT" \
        -d "$TMP/q-static.txt" -c "$CLIENTS" -q "$OUTSTANDING" -Q "$RATE" -l "$secs" >"$out" 2>&1 &
    CLIENT_PID=$!
    wait "$CLIENT_PID" || { tail -n 30 "$out" >&2; die "dnsperf failed ($label)"; }
    CLIENT_PID=""
    t1=$(now_ns); c1=$(cpu_ticks "$gpid"); u1=$(cpu_ticks "$gpid" usr); tc1=$(cpu_ticks "$tpid")
    a1=$(accepted); o1=$(listen_overflows)
    read -r wd1 wn1 < <(udp_wait "$gpid"); f1=$(foreign_ticks)
    alive_or_die gtm
    [[ $label == warmup ]] && return 0
    local qps completed lost
    qps=$(awk '/Queries per second:/ {print $4}' "$out")
    completed=$(awk '/Queries completed:/ {print $3}' "$out")
    lost=$(awk '/Queries lost:/ {print $3}' "$out")
    [[ -n $qps && -n $completed && -n $lost ]] || { tail -n 30 "$out" >&2; die "cannot parse dnsperf output"; }
    # Per-query lines: "> NOERROR static.bench.test A 0.000123" (latency in s).
    local pct
    pct=$(awk '$1 == ">" && $NF ~ /^[0-9.]+$/ { print $NF * 1000 }' "$out" | sort -g \
        | awk '{ v[NR] = $1 } END {
                 if (!NR) { print "n/a n/a n/a n/a 0"; exit }
                 i50 = int(0.50 * NR + 0.999999); i99 = int(0.99 * NR + 0.999999); i999 = int(0.999 * NR + 0.999999)
                 printf "%.3f %.3f %.3f %.3f %d\n", v[i50], v[i99], v[i999], v[NR], NR }')
    local p50 p99 p999 pmax nlat
    read -r p50 p99 p999 pmax nlat <<<"$pct"
    local secs_wall cpu_pct usr_pct tcpu_pct probes_s other_pct wait_us
    secs_wall=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }')
    cpu_pct=$(awk -v d=$((c1 - c0)) -v hz="$CLK_TCK" -v s="$secs_wall" 'BEGIN { printf "%.1f", 100 * (d / hz) / s }')
    usr_pct=$(awk -v d=$((u1 - u0)) -v hz="$CLK_TCK" -v s="$secs_wall" 'BEGIN { printf "%.1f", 100 * (d / hz) / s }')
    # CPU used by other processes on the machine (both CPUs, % of one core).
    other_pct=$(awk -v d=$((f1 - f0)) -v hz="$CLK_TCK" -v s="$secs_wall" 'BEGIN { printf "%.1f", 100 * (d / hz) / s }')
    # Mean wait for CPU 0 each time the UDP thread became runnable.
    wait_us=$(awk -v d=$((wd1 - wd0)) -v n=$((wn1 - wn0)) 'BEGIN { if (n > 0) printf "%.1f", d / n / 1000; else print "n/a" }')
    tcpu_pct=$(awk -v d=$((tc1 - tc0)) -v hz="$CLK_TCK" -v s="$secs_wall" 'BEGIN { printf "%.1f", 100 * (d / hz) / s }')
    probes_s=$(awk -v d=$((a1 - a0)) -v s="$secs_wall" 'BEGIN { printf "%.0f", d / s }')
    local total ok err prep other checks_col
    read -r total ok err prep other < <(check_counts)
    if [[ $mode == idle ]]; then checks_col=0; else checks_col=$total; fi
    printf '%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$label" "$mode" "$checks_col" "$qps" "$lost" "$p50" "$p99" "$p999" "$pmax" \
        "$cpu_pct" "$probes_s" "$tcpu_pct" "$((o1 - o0))" "$ok" "$err" "$((prep + other))" "$(rss_mb "$gpid")" \
        "$usr_pct" "$other_pct" "$wait_us" >>"$RESULTS"
    log "$label ($mode): $(printf '%.0f' "$qps") q/s, lost $lost, p50 $p50 ms, p99 $p99 ms, p99.9 $p999 ms, max $pmax ms ($nlat answers);" \
        "gtm CPU $cpu_pct % (user $usr_pct %), UDP thread waited $wait_us µs per wake-up, others used $other_pct %, probes $probes_s/s, target CPU $tcpu_pct %, listen overflows $((o1 - o0)), checks OK $ok / Error $err / other $((prep + other))"
    if [[ $mode == loaded && $err != "?" ]] && ((err > 0)); then
        log "Error reasons: $(error_reasons)"
    fi
}

apply_mode idle
ans=$(dig_short static.bench.test)
[[ $ans == "$STATIC_ADDR" ]] || die "static.bench.test A gave '${ans//$'\n'/ }', want $STATIC_ADDR"
log "static.bench.test A -> $ans"

log "warm-up (${WARMUP}s at $RATE q/s)"
run_dnsperf warmup "$WARMUP" idle

SEQ=()
for ((run = 1; run <= RUNS; run++)); do
    if ((run % 2)); then SEQ+=("idle $run" "loaded $run"); else SEQ+=("loaded $run" "idle $run"); fi
done
log "measuring: ${#SEQ[@]} runs of ${DURATION}s at $RATE q/s, $NCHECKS checks in loaded runs"

ERROR_REASONS=""
for item in "${SEQ[@]}"; do
    read -r mode run <<<"$item"
    if [[ $mode != "$CURRENT_MODE" ]]; then
        apply_mode "$mode"
        if [[ $mode == loaded ]]; then
            wait_decided
            ans=$(dig_short steered.bench.test | sort | tr '\n' ' ')
            log "steered.bench.test A -> $ans(s1 = t00001 AND t00002)"
        else
            sleep 2   # let removed probe tasks stop
        fi
    fi
    run_dnsperf "$mode-$run" "$DURATION" "$mode"
    if [[ $mode == loaded ]]; then
        reasons=$(error_reasons)
        [[ -n $reasons ]] && ERROR_REASONS=$reasons
    fi
    sleep 1
done

GTM_TAIL=$(grep -ciE 'error|warn|panic' "$TMP/gtm.log" || true)

# ---------------------------------------------------------------------------
# 5. Report.
# ---------------------------------------------------------------------------
# Mean of column COL over the runs of MODE; only over quiet runs (others used
# at most QUIET_MAX % CPU) when the mode has any, else over all its runs.
mean_of() { # mode col
    awk -F'\t' -v m="$1" -v c="$2" -v q="$QUIET_MAX" '
        $2 == m && $c != "n/a" && $c != "?" { t += $c; n++; if ($19 + 0 <= q) { tq += $c; nq++ } }
        END { if (nq) printf "%.4f", tq / nq; else if (n) printf "%.4f", t / n }' "$RESULTS"
}
noisy_note() { # mode: why its means are over some runs only, or over noisy runs
    awk -F'\t' -v m="$1" -v q="$QUIET_MAX" '
        $2 == m { n++; if ($19 + 0 <= q) nq++ }
        END { if (n && nq < n) printf "%s: %s", m, (nq ? "means over the " nq " quiet run(s) of " n : "all " n " runs noisy; means over them all") }' "$RESULTS"
}

make_report() {
    echo "| run | checks | q/s | lost | DNS p50 ms | DNS p99 ms | DNS p99.9 ms | gtm CPU % (user) | UDP thread wait µs | probes/s | target CPU % | listen overflows | others CPU % | checks OK/Error |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    awk -F'\t' -v q="$QUIET_MAX" '{ ce = ($2 == "idle") ? "–" : $14 "/" $15 ($16 > 0 ? " (+" $16 " other)" : "");
                  if ($19 + 0 > q) $1 = $1 " (noisy)";
                  printf "| %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s |\n",
                         $1, $3, $4, $5, $6, $7, $8, $10, $18, $20, $11, $12, $13, $19, ce }' "$RESULTS"
    echo
    local i99 l99 i50 l50 icpu lcpu probes lost_total ratio verdict loss
    i99=$(mean_of idle 7); l99=$(mean_of loaded 7); i50=$(mean_of idle 6); l50=$(mean_of loaded 6)
    icpu=$(mean_of idle 10); lcpu=$(mean_of loaded 10); probes=$(mean_of loaded 11)
    lost_total=$(awk -F'\t' '{ t += $5 } END { print t + 0 }' "$RESULTS")
    ratio=$(awk -v a="$l99" -v b="$i99" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else print "n/a" }')
    verdict=$(awk -v r="$ratio" 'BEGIN { if (r == "n/a") print "n/a"; else if (r <= 2) print "met"; else print "NOT met" }')
    local notes=() m x over="quiet runs"
    for m in idle loaded; do
        x=$(noisy_note "$m")
        [[ -n $x ]] && notes+=("$x")
        if [[ $x == *"all "*" noisy"* ]]; then
            verdict="inconclusive, no quiet $m run"
            over="runs, noisy ones included"
        fi
    done
    if ((lost_total == 0)); then loss="held (0 lost in every run)"; else loss="NOT held ($lost_total queries lost in total)"; fi
    echo "- Loaded / idle DNS p99 (means over $over): $(awk -v a="$l99" -v b="$i99" 'BEGIN { printf "%.3f / %.3f ms", a, b }')" \
        "= **$ratio×** (target ≤ 2×: $verdict); p50 $(awk -v a="$l50" -v b="$i50" 'BEGIN { printf "%.3f / %.3f ms", a, b }')."
    echo "- No loss: $loss."
    if ((${#notes[@]})); then
        echo "- Noisy runs (other processes used > $QUIET_MAX % of a core): $(printf '%s; ' "${notes[@]}" | sed 's/; $//')."
    fi
    awk -v l="$lcpu" -v i="$icpu" -v p="$probes" 'BEGIN {
        if (l == "" || i == "") exit
        printf "- Probe CPU: gtm %.1f %% of one core loaded vs %.1f %% idle = %.1f %% for probing", l, i, l - i
        if (p > 0) printf " (%.0f probes/s accepted by the target, %.1f µs of gtm CPU per probe)", p, 1e6 * (l - i) / 100 / p
        print "." }'
    local iw lw
    iw=$(mean_of idle 20); lw=$(mean_of loaded 20)
    [[ -n $iw && -n $lw ]] && awk -v l="$lw" -v i="$iw" 'BEGIN {
        printf "- gtm'"'"'s DNS (dns-udp) thread waited for CPU %d on average %.1f µs per wake-up loaded vs %.1f µs idle.\n", '"$SERVER_CPU"', l, i }'
    local rss
    rss=$(awk -F'\t' '$2 == "loaded" { r = $17 } END { print r }' "$RESULTS")
    [[ -n $rss ]] && echo "- gtm RSS at the end of the last loaded run: ${rss} MB."
    local n
    for n in "${SETTLE_NOTE[@]}"; do echo "- Settling: $n."; done
    [[ -n $ERROR_REASONS ]] && echo "- Error reasons (most common, last loaded run): $ERROR_REASONS."
    echo
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname) with nproc=$NCPU" \
        "($(gtm_version), dnsperf $(dnsperf -h 2>&1 | awk '/^Version/ {print $2; exit}'), kernel $(uname -r));" \
        "CPU used by other processes just before the start: $PRE_BUSY % of one core."
    if [[ $LAYOUT == split ]]; then
        echo "Layout split: gtm's UDP worker on CPU $SERVER_CPU (\`dns_cpus = [$SERVER_CPU]\`, \`udp_workers = 1\`)," \
            "its other threads (probes, API) on CPU $OTHER_CPU (\`max_concurrent_probes = 2000\`);" \
            "dnsperf on CPU $CLIENT_CPU; the probe target (python3, $TARGET_WHAT on $ADDR:$TARGET_PORT) on CPU $OTHER_CPU."
    else
        echo "Layout shared: all of gtm on CPU $SERVER_CPU (\`udp_workers = 1\`, \`max_concurrent_probes = 2000\`);" \
            "dnsperf on CPU $CLIENT_CPU together with the probe target" \
            "(python3, $TARGET_WHAT on $ADDR:$TARGET_PORT)."
    fi
    echo "dnsperf \`-c $CLIENTS -q $OUTSTANDING -Q $RATE -l $DURATION\`, static.bench.test A," \
        "percentiles from \`-v\` per-query latencies." \
        "Loaded: $NCHECKS fixed-target \`$CHECK_TYPE\` checks, interval $CHECK_INTERVAL, timeout $CHECK_TIMEOUT," \
        "measured once ≥ $DECIDED_PCT % were decided. gtm CPU is utime+stime from \`/proc\` over the run, % of one core;" \
        "user is its utime share; UDP thread wait is the mean time gtm's DNS thread was runnable" \
        "but waiting for CPU 0 per wake-up (run_delay/pcount from \`/proc/PID/task/TID/schedstat\`);" \
        "others CPU % is what every other process on the machine used (a noise indicator, % of one core);" \
        "probes/s is what the target served (connections for tcp, requests for http); listen overflows is the system-wide TcpExt delta (0 = the target kept up)."
    echo
    echo "Command: \`$INVOCATION\`"
}

REPORT=$(make_report)
echo
echo "$REPORT"
((GTM_TAIL > 0)) && log "gtm log has $GTM_TAIL warning/error lines (see $TMP/gtm.log with --keep-tmp)"

if [[ -n $DOCS_FILE ]]; then
    write_docs_section "DNS latency under health-check load, written by \`scripts/bench-health.sh\`." "$REPORT"
fi
