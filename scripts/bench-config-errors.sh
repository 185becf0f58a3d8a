#!/usr/bin/env bash
# bench-config-errors.sh - what a configuration with an error on every line
# costs: `gtm config check FILE` (parse, list the errors, compile: the
# work a device does for `POST /api/v1/config/validate`) at several sizes
# in five shapes, and one such text of about 40 MB posted to a device,
# answered and abandoned by its client.
#
# Shapes, each a file of LINES lines with an error on every line:
#   syntax    one domain, then `kN = = N` (a syntax error) on every line
#   keys      one domain, then `kN = N` (a key a domain does not have)
#   records   one domain whose records are an inline list, a record a
#             line, each address an IP out of range (a type error)
#   checks    `[[check]]` on every line (each without its name and type)
#   compile   records as in `records` with valid IPs, each address naming
#             a check that does not exist (an error of the second step)
#
# The device (`udp_workers = 1`, 127.0.0.1, ports chosen by the system,
# data in the temporary directory) gets the API text with the answer
# awaited up to --timeout (its time, its count and last line; the device's
# peak RSS, VmHWM, after it), and if it was answered, once more from a
# client that leaves after 2 s; then the device's CPU ticks
# (/proc/PID/stat) for 10 s after the client left.
#
# Usage: scripts/bench-config-errors.sh [--lines "8000 16000 ..."]
#          [--shapes "syntax keys ..."] [--api-lines N] [--api-shape S]
#          [--timeout S] [--no-build] [--keep-tmp]
#   --lines      the sizes, in lines (default 8000 16000 32000 64000 128000)
#   --shapes     the shapes to time (default all five; "" for none)
#   --api-lines  lines of the text posted to the device (default 2000000,
#                about 40 MB in the syntax shape; 0: no device)
#   --api-shape  its shape (default syntax)
#   --timeout    seconds a check or the API answer may take (default 300)
#   --no-build   skip `cargo build --release` (GTM_BIN must exist)
#   --keep-tmp   keep the temporary directory (texts, logs)
# Environment: GTM_BIN (default target/release/gtm).
#
# Only loopback is contacted; the script stops only the process it
# started, by PID, and removes its temporary directory on exit. Figures go
# to standard output as Markdown tables (docs/performance.md, "Errors of a
# configuration").
set -euo pipefail

# shellcheck source=scripts/bench-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-config-errors "$@"

LINES_LIST="8000 16000 32000 64000 128000"
SHAPES="syntax keys records checks compile"
API_LINES=2000000 API_SHAPE=syntax TIMEOUT=300
while (($#)); do
    case $1 in
        --lines) LINES_LIST=${2:?--lines needs a value}; shift 2 ;;
        --shapes) (($# >= 2)) || die "--shapes needs a value"; SHAPES=$2; shift 2 ;;
        --api-lines) API_LINES=${2:?--api-lines needs a value}; shift 2 ;;
        --api-shape) API_SHAPE=${2:?--api-shape needs a value}; shift 2 ;;
        --timeout) TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
        *) bench_option "$@"; shift "$OPT_SHIFT" ;;   # --no-build, --keep-tmp, -h
    esac
done
for n in $LINES_LIST; do in_range --lines "$n" 1 10000000; done
in_range --api-lines "$API_LINES" 0 10000000
in_range --timeout "$TIMEOUT" 1 3600
GTM_BIN=${GTM_BIN:-$REPO_ROOT/target/release/gtm}
START_TIMEOUT=30

bench_traps each
install_missing python3=python3-minimal curl=curl
if ((BUILD)); then build_gtm; fi
[[ -x $GTM_BIN ]] || die "$GTM_BIN not found; build it, set GTM_BIN, or drop --no-build"
[[ -x /usr/bin/time ]] || install_missing /usr/bin/time=time
make_tmp

# generate SHAPE LINES FILE: writes the text.
generate() {
    python3 - "$@" <<'EOF'
import sys
shape, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
head = '[[domain]]\nname = "a.test"\nnameservers = ["ns1.a.test"]\n'
line = {
    "syntax": lambda i: f"k{i} = = {i}\n",
    "keys": lambda i: f"k{i} = {i}\n",
    "records": lambda i: f'{{ name = "r{i}", type = "A", addresses = [{{ ip = "192.0.2.{256 + i % 700}" }}] }},\n',
    "checks": lambda i: "[[check]]\n",
    "compile": lambda i: f'{{ name = "r{i}", type = "A", addresses = [{{ ip = "192.0.2.1", hc = "check:c{i}" }}] }},\n',
}
if shape not in line:
    sys.exit(f"unknown shape {shape!r}; one of {', '.join(line)}")
with open(out, "w") as f:
    if shape in ("syntax", "keys"):
        f.write(head)
    elif shape in ("records", "compile"):
        f.write(head + "record = [\n")
    f.writelines(map(line[shape], range(n)))
    if shape in ("records", "compile"):
        f.write("]\n")
EOF
}

echo "| shape | lines | bytes | seconds | peak RSS MiB | errors printed | last line printed |"
echo "|---|---|---|---|---|---|---|"
for shape in $SHAPES; do
    for n in $LINES_LIST; do
        file=$TMP/$shape-$n.toml
        generate "$shape" "$n" "$file"
        # `gtm config check` exits 2 on errors (time notes that on a line
        # of its own before its figures: %e wall seconds, %M KiB); timeout
        # exits 124.
        rc=0
        timeout "$TIMEOUT" /usr/bin/time -f '%e %M' -o "$TMP/time" \
            "$GTM_BIN" config check "$file" >/dev/null 2>"$TMP/out" || rc=$?
        case $rc in
            0) die "$file was accepted" ;;
            2) ;;
            124) echo "| $shape | $n | $(stat -c %s "$file") | > $TIMEOUT | | | |" ;;
            *) die "gtm config check $file exited $rc: $(tail -n 3 "$TMP/out")" ;;
        esac
        if ((rc == 2)); then
            read -r secs kib < <(tail -n 1 "$TMP/time")
            last=$(tail -n 1 "$TMP/out")
            last=${last#"$file: "}
            last=$(cut -c 1-60 <<<"$last" | sed 's/|/\\|/g')
            echo "| $shape | $n | $(stat -c %s "$file") | $secs | $((kib / 1024)) | $(wc -l <"$TMP/out") | $last |"
        fi
        rm -f "$file"
    done
done
((API_LINES)) || exit 0

file=$TMP/api.toml
generate "$API_SHAPE" "$API_LINES" "$file"
mkdir -p "$TMP/data"
cat >"$TMP/node.toml" <<EOF
name = "bench"
datacenter = "dc1"
data_dir = "$TMP/data"
dns_listen = ["127.0.0.1:0"]
api_listen = "127.0.0.1:0"
udp_workers = 1
EOF
RUST_LOG=${RUST_LOG:-warn} "$GTM_BIN" serve --config "$TMP/node.toml" >"$TMP/serve.log" 2>&1 &
PID=$!
STARTED_PIDS+=("$PID")
deadline=$((SECONDS + START_TIMEOUT))
until [[ -s $TMP/data/api-address && -s $TMP/data/api-token ]]; do
    kill -0 "$PID" 2>/dev/null || die "gtm serve exited; see $TMP/serve.log"
    ((SECONDS < deadline)) || die "gtm serve wrote no API address within ${START_TIMEOUT}s"
    sleep 0.2
done
URL=$(head -n 1 "$TMP/data/api-address")
TOKEN=$(<"$TMP/data/api-token")
# post SECONDS: POST the text to validate; prints the status and seconds.
post() {
    curl -s -m "$1" -o "$TMP/answer" -w '%{http_code} %{time_total}\n' -X POST \
        -H "Authorization: Bearer $TOKEN" -H 'content-type: text/plain; charset=utf-8' -H 'Expect:' \
        --data-binary "@$file" "$URL/api/v1/config/validate" || true
}
hwm() { echo $(($(awk '/VmHWM/ {print $2}' "/proc/$PID/status") / 1024)); }
echo
echo "$API_SHAPE, $API_LINES lines, $(stat -c %s "$file") bytes, to POST /api/v1/config/validate:"
echo
echo "- device before: peak RSS $(hwm) MiB"
read -r status secs < <(post "$TIMEOUT")
summary=$(python3 -c 'import json,sys
try:
    a = json.load(open(sys.argv[1]))
    print("%s; %d lines in errors, the last: %s" % (a["message"], len(a.get("errors", [])), (a.get("errors") or [""])[-1][:100]))
except Exception as e:
    print("no JSON answer (%s)" % e)' "$TMP/answer")
if [[ $status == 000 ]]; then
    echo "- no answer within $TIMEOUT s (the client left then): peak RSS $(hwm) MiB"
else
    echo "- answered $status in $secs s: $summary"
    echo "- device after: peak RSS $(hwm) MiB"
    # The same text again, from a client that leaves after 2 s.
    post 2 >/dev/null
fi
left=$(proc_ticks "$PID")
for t in 2 4 6 8 10; do
    sleep 2
    ticks[t]=$(proc_ticks "$PID")
done
echo "- CPU ticks of the device 2/4/6/8/10 s after the client left: +$((ticks[2] - left))"\
    "+$((ticks[4] - left)) +$((ticks[6] - left)) +$((ticks[8] - left)) +$((ticks[10] - left))"\
    "(100 a second is one core)"
echo "- device at the end: peak RSS $(hwm) MiB"
