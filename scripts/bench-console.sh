#!/usr/bin/env bash
# bench-console.sh - the console's page weight and first paint at 10, 1,000
# and 10,000 records on a three-device cluster.
#
# Goal (docs/performance.md, "Console pages"): at 10,000 records, the
# first screen of every page under 300 ms to first contentful paint and
# under 100 KB transferred.
#
# Devices: gtm1 on 127.0.0.71 (`gtm cluster init`), gtm2 on 127.0.0.72 and
# gtm3 on 127.0.0.73 (`gtm cluster join`), each `gtm serve` with
# `udp_workers = 1`, DNS on IP:1053, API on IP:8053, data in the temporary
# directory. For each size, scripts/bench-console.py gen writes a
# configuration of that many A records (100 a domain, two addresses each in
# two datacenters, one in three in disaster-recovery mode); `gtm config
# apply` sends it to gtm1, and the script waits until every device reports
# that version. Then scripts/bench-console.py browse drives Debian's
# headless chromium through chromedriver (on 127.0.0.1): it logs in to
# gtm1's console with its token, and loads each page --runs times with the
# browser's cache emptied before each load (the stylesheet and script are
# fetched every time), reading the page's Paint Timing
# (first-contentful-paint) and Navigation and Resource Timing (bytes
# transferred: the document, gzipped, and its assets). Medians are reported.
#
# Usage: scripts/bench-console.sh [--runs N] [--sizes "10 1000 10000"]
#                                 [--no-build] [--docs FILE | --no-docs] [--keep-tmp]
#   --runs N        loads of each page at each size (default 5)
#   --sizes LIST    the record counts (default "10 1000 10000")
#   --no-build      skip `cargo build --release` (the gtm binary must exist)
#   --docs FILE     where to write the results (default docs/performance.md,
#                   between <!-- bench-console:begin/end --> markers)
#   --no-docs       print the results only
#   --keep-tmp      keep the temporary directory (logs, configurations)
#
# Needs: python3, chromium and chromium-driver (installed when missing).
# Every process it starts is stopped by its PID at exit.

set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-console "$@"

HELPER="$SCRIPT_DIR/bench-console.py"
RUNS=5
SIZES="10 1000 10000"
PAGES=(/ui/ /ui/records /ui/topology /ui/logs)

IP1=${BENCH_IP1:-127.0.0.71}
IP2=${BENCH_IP2:-127.0.0.72}
IP3=${BENCH_IP3:-127.0.0.73}
DNS_PORT=${GTM_DNS_PORT:-1053}
API_PORT=${GTM_API_PORT:-8053}
DRIVER_PORT=${BENCH_DRIVER_PORT:-9615}
if [[ -n ${CARGO_TARGET_DIR:-} ]]; then
    GTM_BIN=${GTM_BIN:-$CARGO_TARGET_DIR/release/gtm}
else
    GTM_BIN=${GTM_BIN:-$REPO_ROOT/target/release/gtm}
fi
START_TIMEOUT=30
APPLY_TIMEOUT=300

while (($#)); do
    case $1 in
        --runs) RUNS=${2:?--runs needs a value}; shift 2 ;;
        --runs=*) RUNS=${1#*=}; shift ;;
        --sizes) SIZES=${2:?--sizes needs a value}; shift 2 ;;
        --sizes=*) SIZES=${1#*=}; shift ;;
        *) bench_option "$@"; shift "$OPT_SHIFT" ;;
    esac
done

in_range --runs "$RUNS" 1 100
for n in $SIZES; do in_range --sizes "$n" 1 200000; done
for ip in "$IP1" "$IP2" "$IP3"; do
    [[ $ip =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$ip is not a 127.0.0.0/8 address"
done

bench_traps each
install_missing python3=python3-minimal ss=iproute2 chromium=chromium chromedriver=chromium-driver
[[ -f $HELPER ]] || die "$HELPER is missing"
if ((BUILD)); then build_gtm; fi
[[ -x $GTM_BIN ]] || die "$GTM_BIN not found; build it, set GTM_BIN, or drop --no-build"

for ip in "$IP1" "$IP2" "$IP3"; do
    port_busy udp "$DNS_PORT" "$ip" && die "UDP $ip:$DNS_PORT is already in use"
    port_busy tcp "$API_PORT" "$ip" && die "TCP $ip:$API_PORT is already in use"
done
port_busy tcp "$DRIVER_PORT" 127.0.0.1 && die "TCP 127.0.0.1:$DRIVER_PORT is already in use"

make_tmp

declare -A IP_OF=([gtm1]=$IP1 [gtm2]=$IP2 [gtm3]=$IP3)
declare -A PID_OF=()
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

start_dev() {
    local dev=$1
    RUST_LOG=${RUST_LOG:-warn} "$GTM_BIN" serve --config "$TMP/$dev.toml" >"$TMP/$dev.log" 2>&1 &
    PID_OF[$dev]=$!
    STARTED_PIDS+=("$!")
    log "started $dev (PID $!) on ${IP_OF[$dev]}"
}
alive_or_die() {
    kill -0 "${PID_OF[$1]}" 2>/dev/null && return 0
    tail -n 30 "$TMP/$1.log" >&2 || true
    die "$1 is not running"
}
gtm_cli() { local dev=$1; shift; timeout "$APPLY_TIMEOUT" "$GTM_BIN" --data-dir "$TMP/$dev" "$@"; }

for dev in gtm1 gtm2 gtm3; do start_dev "$dev"; done
for dev in gtm1 gtm2 gtm3; do wait_api "$dev"; done
gtm_cli gtm1 cluster init >"$TMP/init.log" 2>&1 || { cat "$TMP/init.log" >&2; die "gtm cluster init failed"; }
for dev in gtm2 gtm3; do
    TOKEN=$(gtm_cli gtm1 cluster token 2>"$TMP/token.err" | tail -n 1) || { cat "$TMP/token.err" >&2; die "gtm cluster token failed"; }
    gtm_cli "$dev" cluster join "http://$IP1:$API_PORT" --token "$TOKEN" >"$TMP/join-$dev.log" 2>&1 \
        || { cat "$TMP/join-$dev.log" >&2; die "$dev: gtm cluster join failed"; }
done
log "cluster formed: gtm1, gtm2, gtm3"

/usr/bin/chromedriver --port="$DRIVER_PORT" --allowed-ips=127.0.0.1 >"$TMP/chromedriver.log" 2>&1 &
STARTED_PIDS+=("$!")
deadline=$((SECONDS + START_TIMEOUT))
until (exec 3<>"/dev/tcp/127.0.0.1/$DRIVER_PORT") 2>/dev/null; do
    ((SECONDS < deadline)) || die "chromedriver did not listen on 127.0.0.1:$DRIVER_PORT"
    sleep 0.2
done

# version_of DEV: the configuration version the device serves.
version_of() {
    timeout 30 "$GTM_BIN" --data-dir "$TMP/$1" status --json 2>/dev/null \
        | python3 -c 'import json,sys; print(json.load(sys.stdin).get("version", 0))' 2>/dev/null || echo 0
}

ROWS="$TMP/rows.tsv"
: >"$ROWS"
for n in $SIZES; do
    timeout 120 python3 "$HELPER" gen --records "$n" --out "$TMP/c$n.toml" >"$TMP/gen-$n.json"
    gtm_cli gtm1 config apply "$TMP/c$n.toml" >"$TMP/apply-$n.log" 2>&1 \
        || { tail -n 20 "$TMP/apply-$n.log" >&2; die "applying $n records failed"; }
    want=$(version_of gtm1)
    deadline=$((SECONDS + APPLY_TIMEOUT))
    for dev in gtm2 gtm3; do
        until (($(version_of "$dev") >= want)); do
            alive_or_die "$dev"
            ((SECONDS < deadline)) || die "$dev did not reach version $want"
            sleep 0.5
        done
    done
    # The peers' reports of every record reach gtm1 (its columns fill).
    sleep 6
    log "$n records applied on every device (version $want)"
    args=()
    for p in "${PAGES[@]}"; do args+=(--page "$p"); done
    timeout 900 python3 "$HELPER" browse --driver "http://127.0.0.1:$DRIVER_PORT" \
        --base "http://$IP1:$API_PORT" --token-file "$TMP/gtm1/api-token" \
        --runs "$RUNS" --label "$n" "${args[@]}" >"$TMP/browse-$n.json" \
        || die "measuring the pages at $n records failed"
    python3 - "$TMP/browse-$n.json" "$n" >>"$ROWS" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for page, m in d["pages"].items():
    print("\t".join(str(x) for x in (sys.argv[2], page, m["fcp_ms"], m["fcp_max_ms"], m["response_end_ms"],
          m["transfer_bytes"], m["doc_transfer"], m["doc_decoded"], m["rows"])))
EOF
done

make_report() {
    echo "### Console pages"
    echo
    echo "Goal: at 10,000 records on three devices, every page's first screen under 300 ms to first"
    echo "contentful paint and under 100 KB transferred (cold cache: the stylesheet and script included)."
    echo
    echo "| records | page | first contentful paint, median (max) | document received | transferred (document + assets) | document gzipped / as HTML | table rows |"
    echo "|---:|---|---:|---:|---:|---:|---:|"
    while IFS=$'\t' read -r n page fcp fmax resp total doc dec rows; do
        printf '| %s | `%s` | %.0f ms (%.0f) | %.0f ms | %.1f KB | %.1f KB / %.1f KB | %s |\n' \
            "$n" "$page" "$fcp" "$fmax" "$resp" "$(awk -v b="$total" 'BEGIN{print b/1000}')" \
            "$(awk -v b="$doc" 'BEGIN{print b/1000}')" "$(awk -v b="$dec" 'BEGIN{print b/1000}')" "$rows"
    done <"$ROWS"
    echo
    echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname) with nproc=$(nproc)" \
        "($(gtm_version), $(/usr/bin/chromium --version 2>/dev/null | head -n 1))." \
        "Each page loaded $RUNS times at each size with the browser cache emptied first; medians."
    echo "The three devices, chromium and chromedriver share the machine's CPUs."
    echo
    echo "Command: \`$INVOCATION\`"
}

REPORT=$(make_report)
echo
echo "$REPORT"
if [[ -n $DOCS_FILE ]]; then
    write_docs_section "Console page weight and first paint, written by \`scripts/bench-console.sh\`." "$REPORT"
fi
