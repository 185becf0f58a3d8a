#!/usr/bin/env bash
# bench-tcp-accept.sh - how fast gtm and Knot DNS take new TCP connections
# (docs/performance.md, "DNS over TCP: new connections").
#
# Method: gtm (`gtm serve`, release build, no zone needed) and knotd (a
# minimal configuration, no zone) each listen on a loopback address of its
# own; a Python client opens --connections non-blocking connects from one address (127.0.171.63) in a tight loop,
# sends nothing, and waits until every handshake has completed (the socket
# writable; SO_ERROR 0, or a reset after the handshake: gtm closes
# connections past its per-client share). The figure is connects completed
# per second, from the first connect to the last handshake. A connect
# dropped by a full listen queue is retried by the kernel only after a
# second, so a server that does not keep up shows it at once. The servers
# are alternated run by run; each run's client sockets are closed before
# the next. Nothing is pinned to a CPU: Knot's listen backlog is 10, and
# with its threads held to one CPU it drops connects too. Bounded: at most
# 30 s per run.
#
# Usage: scripts/bench-tcp-accept.sh [--connections N] [--runs N]
#                                    [--only gtm,knot] [--no-build]
#                                    [--docs FILE | --no-docs] [--keep-tmp]
#   --connections N  connects per run (default 500)
#   --runs N         runs per server (default 10)
#   --only LIST      comma-separated subset of gtm,knot (default both)
#   --no-build       skip `cargo build --release` (gtm binary must exist)
#   --docs FILE      where to write the results (default docs/performance.md,
#                    between <!-- bench-tcp-accept:begin --> and
#                    <!-- bench-tcp-accept:end -->)
#   --no-docs        print the table only
#   --keep-tmp       keep the temporary directory (configs, logs)
# Environment: GTM_BIN (default target/release/gtm, or
#   $CARGO_TARGET_DIR/release/gtm), GTM_PORT=15460, GTM_API_PORT=15461,
#   KNOT_PORT=15462. Installs knot and python3 with apt-get when missing
#   (root or passwordless sudo).
#
# Only loopback addresses are ever contacted. The script stops only the
# processes it started, by PID, and removes its temporary directory on exit.

set -euo pipefail

# shellcheck source=scripts/bench-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-tcp-accept "$@"

CONNECTIONS=500
RUNS=10
ONLY=gtm,knot
while (($#)); do
    case $1 in
        --connections) CONNECTIONS=${2:?--connections needs a value}; shift 2 ;;
        --runs) RUNS=${2:?--runs needs a value}; shift 2 ;;
        --only) ONLY=${2:?--only needs a value}; shift 2 ;;
        *) bench_option "$@"; shift "$OPT_SHIFT" ;;
    esac
done
in_range --connections "$CONNECTIONS" 1 5000
in_range --runs "$RUNS" 1 100
WANT_GTM=0 WANT_KNOT=0
IFS=, read -ra wanted <<<"$ONLY"
for s in "${wanted[@]}"; do
    case $s in
        gtm) WANT_GTM=1 ;;
        knot) WANT_KNOT=1 ;;
        *) die "--only: unknown server '$s' (gtm, knot)" ;;
    esac
done

GTM_IP=127.0.171.61
KNOT_IP=127.0.171.62
CLIENT_IP=127.0.171.63
GTM_PORT=${GTM_PORT:-15460}
GTM_API_PORT=${GTM_API_PORT:-15461}
KNOT_PORT=${KNOT_PORT:-15462}
GTM_BIN=${GTM_BIN:-${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/gtm}
START_TIMEOUT=30

needs=(python3=python3 ss=iproute2)
((WANT_KNOT)) && needs+=(knotd=knot)
install_missing "${needs[@]}"
if ((WANT_GTM)); then
    ((BUILD)) && build_gtm
    [[ -x $GTM_BIN ]] || die "no gtm binary at $GTM_BIN (build it, or set GTM_BIN)"
fi

bench_traps trees
make_tmp

declare -A PID_OF=() LOG_OF=() IP_OF=([gtm]=$GTM_IP [knot]=$KNOT_IP) PORT_OF=([gtm]=$GTM_PORT [knot]=$KNOT_PORT)

# start NAME CMD...: CMD in the background, from $TMP.
start() {
    local name=$1
    shift
    LOG_OF[$name]=$TMP/$name.log
    (cd "$TMP" && exec "$@") >"${LOG_OF[$name]}" 2>&1 &
    PID_OF[$name]=$!
    STARTED_PIDS+=("$!")
    log "started $name (PID $!): $*"
}

alive_or_die() {
    kill -0 "${PID_OF[$1]}" 2>/dev/null && return 0
    tail -n 30 "${LOG_OF[$1]}" >&2 || true
    die "$1 exited early"
}

# listening NAME: wait (bounded) until NAME listens on its TCP port.
listening() {
    local name=$1 deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        alive_or_die "$name"
        if ss -Hltn "src ${IP_OF[$name]} and sport = :${PORT_OF[$name]}" | grep -q .; then
            log "$name listens on ${IP_OF[$name]}:${PORT_OF[$name]} (backlog $(ss -Hltn "src ${IP_OF[$name]} and sport = :${PORT_OF[$name]}" | awk '{print $3}'))"
            return 0
        fi
        sleep 0.2
    done
    die "$name did not listen on ${IP_OF[$name]}:${PORT_OF[$name]} within ${START_TIMEOUT}s"
}

if ((WANT_GTM)); then
    port_busy tcp "$GTM_PORT" "$GTM_IP" && die "$GTM_IP:$GTM_PORT is in use"
    mkdir -p "$TMP/gtm-data"
    cat >"$TMP/gtm-node.toml" <<EOF
name = "bench"
datacenter = "dc1"
data_dir = "$TMP/gtm-data"
dns_listen = ["$GTM_IP:$GTM_PORT"]
api_listen = "$GTM_IP:$GTM_API_PORT"
udp_workers = 1
EOF
    RUST_LOG=${RUST_LOG:-warn} start gtm "$GTM_BIN" serve --config "$TMP/gtm-node.toml"
    listening gtm
fi
if ((WANT_KNOT)); then
    port_busy tcp "$KNOT_PORT" "$KNOT_IP" && die "$KNOT_IP:$KNOT_PORT is in use"
    mkdir -p "$TMP/knot"
    cat >"$TMP/knot.conf" <<EOF
server:
    listen: $KNOT_IP@$KNOT_PORT
    rundir: "$TMP/knot"
database:
    storage: "$TMP/knot"
template:
  - id: default
    storage: "$TMP/knot"
log:
  - target: stderr
    any: warning
EOF
    start knot knotd -c "$TMP/knot.conf"
    listening knot
fi

# The client: CONNECTIONS non-blocking connects, then wait for every
# handshake. Prints "connects completed failed seconds per_second".
cat >"$TMP/connect.py" <<'EOF'
import errno, selectors, socket, sys, time

ip, port, n, src = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sel = selectors.DefaultSelector()
socks = []
start = time.perf_counter()
for _ in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.bind((src, 0))
    rc = s.connect_ex((ip, port))
    if rc not in (0, errno.EINPROGRESS):
        sys.exit(f"connect: {errno.errorcode.get(rc, rc)}")
    sel.register(s, selectors.EVENT_WRITE)
    socks.append(s)
done = failed = 0
deadline = start + 30
while done + failed < n and time.perf_counter() < deadline:
    for key, _ in sel.select(timeout=1):
        s = key.fileobj
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        sel.unregister(s)
        # A reset after the handshake still completed the connect.
        if err in (0, errno.ECONNRESET, errno.EPIPE):
            done += 1
        else:
            failed += 1
elapsed = time.perf_counter() - start
print(f"{n} {done} {failed} {elapsed:.4f} {done / elapsed:.0f}")
for s in socks:
    s.close()
EOF

RESULTS=$TMP/results.tsv
: >"$RESULTS"
servers=()
((WANT_GTM)) && servers+=(gtm)
((WANT_KNOT)) && servers+=(knot)
for ((run = 1; run <= RUNS; run++)); do
    order=("${servers[@]}")
    # Alternate the order run by run, so that drift hits both alike.
    if ((run % 2 == 0)); then mapfile -t order < <(printf '%s\n' "${servers[@]}" | tac); fi
    for name in "${order[@]}"; do
        alive_or_die "$name"
        out=$(timeout 40 python3 "$TMP/connect.py" \
            "${IP_OF[$name]}" "${PORT_OF[$name]}" "$CONNECTIONS" "$CLIENT_IP") \
            || die "the client failed against $name"
        read -r n ok failed secs rate <<<"$out"
        log "$name run $run: $ok/$n connects in $secs s ($rate/s, $failed failed)"
        printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$run" "$ok" "$secs" "$rate" >>"$RESULTS"
        # Let the closed connections go before the next run.
        sleep 1
    done
done

version_of() {
    case $1 in
        gtm) gtm_version ;;
        knot) knotd --version 2>/dev/null | head -n 1 ;;
    esac
}

report=$(
    echo "| server | connections/s, median of $RUNS runs | min | max | runs over 1 s (a connect dropped) |"
    echo "|---|---|---|---|---|"
    for name in "${servers[@]}"; do
        awk -F'\t' -v s="$name" '$1 == s { print $5 " " $4 }' "$RESULTS" | sort -n | awk -v s="$name" '
            { rate[NR] = $1; if ($2 > 1) slow++ }
            END {
                med = (NR % 2) ? rate[(NR + 1) / 2] : (rate[NR / 2] + rate[NR / 2 + 1]) / 2
                printf "| %s | %d | %d | %d | %d |\n", s, med, rate[1], rate[NR], slow
            }'
    done
    echo
    echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC on $(hostname) with nproc=$(nproc): $(
        for name in "${servers[@]}"; do printf '%s; ' "$(version_of "$name")"; done
    )$CONNECTIONS connects per run from one address, runs alternated, nothing pinned."
    echo
    echo "Command: \`$INVOCATION\`"
)
printf '%s\n' "$report"
if [[ -n $DOCS_FILE ]]; then
    write_docs_section "DNS over TCP: new connections" "$report"
fi
