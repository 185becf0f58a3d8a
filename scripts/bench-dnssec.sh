#!/usr/bin/env bash
# bench-dnssec.sh - signing a large zone on one device: how long, how much
# memory, and DNS answering meanwhile.
#
# What it answers (docs/performance.md, "DNSSEC: signing a large zone"):
# the time and memory of signing a 100,000-record zone on apply, with DNS
# answering from the previous snapshot meanwhile.
#
# One `gtm serve` (udp_workers = 1, DNS on IP:1053, API on IP:8053, never
# clustered). The configuration of scripts/bench-cluster.py gen: --domains
# domains b000.test... with --records A records in all, every domain with
# `dnssec = true`, and marker.b000.test A.
#   1. "unsigned → keys": the configuration is applied (timed until DNS
#      answers its marker: the answers are built unsigned, no key exists
#      yet), then the device's dnssec worker makes every key in one command
#      and signs everything: timed until a DO query of the last record of the
#      last domain carries an RRSIG.
#   2. "signed apply": the same file with the marker changed, applied: timed
#      until DNS answers the new marker (parsing, validation, building and
#      signing every answer, and the swap). The apply helper asks the marker
#      every 2 ms meanwhile and reports the last answer, so a gap in
#      answering would show as a failure.
# RSS (VmRSS, and VmHWM = peak) after each step, and the device's CPU time.
#
# Usage: scripts/bench-dnssec.sh [--records N] [--domains N] [--no-build]
#                                [--docs FILE | --no-docs] [--keep-tmp]
# Environment: GTM_BIN (default target/release/gtm), BENCH_IP=127.0.0.44,
#   RUST_LOG for gtm (default warn).
#
# Only loopback addresses are ever contacted.  The script stops only the
# process it started, by PID, and removes its temporary directory on exit.

set -euo pipefail

# shellcheck source=scripts/bench-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-dnssec "$@"

HELPER="$SCRIPT_DIR/bench-cluster.py"
NRECORDS=100000
NDOMAINS=100
IP=${BENCH_IP:-127.0.0.44}
DNS_PORT=1053
API_PORT=8053
ADDR=$IP
GTM_BIN=${GTM_BIN:-${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/gtm}
START_TIMEOUT=30
TIMEOUT=300
MARKER_A=198.51.100.201
MARKER_B=198.51.100.202

while (($#)); do
    case $1 in
        --records) NRECORDS=${2:?--records needs a value}; shift 2 ;;
        --domains) NDOMAINS=${2:?--domains needs a value}; shift 2 ;;
        *) bench_option "$@"; shift "$OPT_SHIFT" ;;
    esac
done
in_range --records "$NRECORDS" 1 1000000
in_range --domains "$NDOMAINS" 1 1000
((NRECORDS % NDOMAINS == 0)) || die "--records must be a multiple of --domains"
[[ $IP =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$IP is not a 127.0.0.0/8 address"

bench_traps each
CLK_TCK=$(getconf CLK_TCK)
install_missing python3=python3-minimal dig=dnsutils
((BUILD)) && build_gtm
[[ -x $GTM_BIN ]] || die "no gtm binary at $GTM_BIN (build it, or drop --no-build)"
make_tmp

py() { local secs=$1; shift; timeout "$secs" python3 "$HELPER" "$@"; }
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
rss_kib() { awk -v k="$2" '$1 == k ":" { print $2 }' "/proc/$1/status" 2>/dev/null || echo ""; }
mib() { awk -v k="$1" 'BEGIN { if (k == "") print "?"; else printf "%.0f", k / 1024 }'; }
now_s() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.2f", b - a }'; }

per=$((NRECORDS / NDOMAINS))
log "generating $NDOMAINS signed domains x $per A records"
py 300 gen --domains "$NDOMAINS" --per "$per" --marker "$MARKER_A" --dnssec --out "$TMP/a.toml" >"$TMP/gen.json"
sed "s/$MARKER_A/$MARKER_B/" "$TMP/a.toml" >"$TMP/b.toml"
LAST_DOMAIN=$(printf 'b%03d.test' $((NDOMAINS - 1)))
LAST_NAME=$(printf 'r%06d.%s' "$NRECORDS" "$LAST_DOMAIN")

mkdir -p "$TMP/dev"
cat >"$TMP/dev.toml" <<EOF
name = "gtm-sign"
datacenter = "dc1"
data_dir = "$TMP/dev"
dns_listen = ["$IP:$DNS_PORT"]
api_listen = "$IP:$API_PORT"
udp_workers = 1
EOF
RUST_LOG=${RUST_LOG:-warn} "$GTM_BIN" serve --config "$TMP/dev.toml" >"$TMP/dev.log" 2>&1 &
PID=$!
STARTED_PIDS+=("$PID")
alive_or_die() { kill -0 "$PID" 2>/dev/null || { tail -n 30 "$TMP/dev.log" >&2; die "gtm exited"; }; }
wait_tcp gtm "$API_PORT"
deadline=$((SECONDS + START_TIMEOUT))
until [[ -s $TMP/dev/api-token && -s $TMP/dev/api-address ]]; do
    alive_or_die; ((SECONDS < deadline)) || die "no API files"; sleep 0.2
done
url=$(<"$TMP/dev/api-address"); url=${url%%[[:space:]]*}; [[ $url == http* ]] || url="http://$url"
SPEC="dev=${url%/},$TMP/dev/api-token"

apply() { # label file marker
    local out="$TMP/apply-$1.json"
    py $((TIMEOUT + 300)) apply --send dev --file "$2" --marker "$3" --timeout "$TIMEOUT" \
        --http-timeout 120 --dns "dev=$IP:$DNS_PORT" --devices "$SPEC" >"$out" || die "apply helper failed"
    local all_s
    all_s=$(jget "$out" 'd["all_s"]')
    [[ $all_s != None ]] || die "$1: the marker was not answered within ${TIMEOUT}s"
    MISSED+="${MISSED:+, }$1 $(jget "$out" 'sum(d["dns_unanswered"].values())')"
    echo "$all_s"
}

c0=$(proc_ticks "$PID")
log "applying the signed configuration (no key yet)"
MISSED=""
apply unsigned "$TMP/a.toml" "$MARKER_A" >"$TMP/a.s"; APPLY_A=$(<"$TMP/a.s")
RSS_A=$(mib "$(rss_kib "$PID" VmRSS)"); HWM_A=$(mib "$(rss_kib "$PID" VmHWM)")
log "applied in ${APPLY_A}s; waiting for the keys and the signatures"
t0=$(now_s)
deadline=$((SECONDS + TIMEOUT))
until dig +dnssec +tries=1 +time=1 -p "$DNS_PORT" "@$IP" "$LAST_NAME" A | grep -q RRSIG; do
    alive_or_die; ((SECONDS < deadline)) || die "$LAST_NAME never carried an RRSIG"; sleep 0.05
done
SIGN_S=$(since "$t0")
RSS_S=$(mib "$(rss_kib "$PID" VmRSS)"); HWM_S=$(mib "$(rss_kib "$PID" VmHWM)")
log "keys made and every answer signed ${SIGN_S}s after the apply answered"
apply signed "$TMP/b.toml" "$MARKER_B" >"$TMP/b.s"; APPLY_B=$(<"$TMP/b.s")
RSS_B=$(mib "$(rss_kib "$PID" VmRSS)"); HWM_B=$(mib "$(rss_kib "$PID" VmHWM)")
dig +dnssec +tries=1 +time=1 -p "$DNS_PORT" "@$IP" "$LAST_NAME" A | grep -q RRSIG \
    || die "after the signed apply, $LAST_NAME carries no RRSIG"
CPU_S=$(awk -v t=$(($(proc_ticks "$PID") - c0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", t / hz }')
log "signed apply in ${APPLY_B}s"

REPORT=$(cat <<EOF
| step | time | RSS after | peak RSS (VmHWM) |
|---|---|---|---|
| apply $NRECORDS records in $NDOMAINS domains, \`dnssec = true\`, no key yet (until DNS answers the new marker) | ${APPLY_A} s | ${RSS_A} MiB | ${HWM_A} MiB |
| keys made (one command) and every answer signed (until a DO query of the last record carries its RRSIG) | ${SIGN_S} s | ${RSS_S} MiB | ${HWM_S} MiB |
| signed re-apply with one change (parse, validate, build and sign every answer, swap) | ${APPLY_B} s | ${RSS_B} MiB | ${HWM_B} MiB |

Device CPU over the three steps: ${CPU_S} s. During each apply the marker
was asked every 2 ms; queries unanswered within 50 ms: ${MISSED} (the
previous snapshot answers until the new one is swapped in). Measured $(date -u '+%Y-%m-%d %H:%M UTC')
on $(hostname) with nproc=$(nproc), $(gtm_version), one device, not pinned.

Command: \`$INVOCATION\`
EOF
)
echo "$REPORT"
[[ -n $DOCS_FILE ]] && write_docs_section "Signing a large zone, written by \`scripts/bench-dnssec.sh\`." "$REPORT"
exit 0
