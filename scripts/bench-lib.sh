# shellcheck shell=bash
# bench-lib.sh - the mechanics that scripts/bench-dns.sh, bench-health.sh and
# bench-cluster.sh share: logging, the options every one of them takes,
# installing missing tools, building gtm, stopping only the processes the
# script started, CPU time from /proc, and writing a results section into
# docs/performance.md.
#
# Not run on its own: each script sources it right after `set -euo pipefail`
# and then names itself:
#   . "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
#   bench_init bench-dns "$@"
#
# Globals it sets: SCRIPT_DIR, REPO_ROOT, BENCH_NAME, INVOCATION, BUILD,
# DOCS_FILE, KEEP_TMP, OPT_SHIFT, STARTED_PIDS, CLIENT_PID, TMP (the script
# adds to STARTED_PIDS and sets CLIENT_PID).  What it needs from the script:
# GTM_BIN (gtm_version), and ADDR, START_TIMEOUT and alive_or_die NAME
# (wait_tcp).

# shellcheck disable=SC2034  # the variables set here are the scripts' to use

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)   # scripts/
REPO_ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd)
BENCH_SCRIPT=${BASH_SOURCE[-1]}   # the script that sourced this file

# Servers may live in sbin directories that a non-root PATH lacks.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

STARTED_PIDS=()   # servers and helpers the script started, stopped at exit
CLIENT_PID=""     # the load client (under `timeout`) running now, if any
TMP=""            # the temporary directory (make_tmp), removed at exit

# bench_init NAME ARGS...: NAME (bench-dns, bench-health, bench-cluster)
# prefixes the log lines and names the temporary directory and the docs
# markers; ARGS, the script's arguments, make INVOCATION, the command line
# as typed, recorded in the report.  Also the defaults of the options that
# bench_option handles.
bench_init() {
    BENCH_NAME=$1
    shift
    INVOCATION="scripts/$(basename -- "$BENCH_SCRIPT")"
    local arg
    for arg in "$@"; do
        if [[ $arg =~ ^[A-Za-z0-9_./,=:@+-]+$ ]]; then INVOCATION+=" $arg"; else INVOCATION+=" $(printf '%q' "$arg")"; fi
    done
    BUILD=1                                  # run `cargo build --release` first
    DOCS_FILE="$REPO_ROOT/docs/performance.md"
    KEEP_TMP=0
}

# usage [STATUS]: print the script's leading comment block (its help) and exit.
usage() {
    sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$BENCH_SCRIPT"
    exit "${1:-0}"
}

# log MESSAGE...: "[NAME HH:MM:SS] MESSAGE" on stderr.  die: log it as an
# ERROR and exit 1.
log() { printf '[%s %(%H:%M:%S)T] %s\n' "$BENCH_NAME" -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# is_uint VALUE: true if VALUE is a whole number (digits only).
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

# in_range OPTION VALUE LO HI [UNIT]: die "OPTION must be LO..HI [UNIT]"
# unless VALUE is a whole number from LO to HI.
in_range() {
    if ! is_uint "$2" || (($2 < $3 || $2 > $4)); then die "$1 must be $3..$4${5:+ $5}"; fi
}

# bench_option ARGS...: the options every script takes, for the last branch
# of its option loop: --no-build, --docs FILE, --no-docs, --keep-tmp and
# -h/--help; anything else is an unknown argument (usage on stdout, exit 2).
# Sets OPT_SHIFT to how many of ARGS it used.
bench_option() {
    case $1 in
        --no-build) BUILD=0; OPT_SHIFT=1 ;;
        --docs) DOCS_FILE=${2:?--docs needs a value}; OPT_SHIFT=2 ;;
        --docs=*) DOCS_FILE=${1#*=}; OPT_SHIFT=1 ;;
        --no-docs) DOCS_FILE=""; OPT_SHIFT=1 ;;
        --keep-tmp) KEEP_TMP=1; OPT_SHIFT=1 ;;
        -h|--help) usage 0 ;;
        *) log "unknown argument: $1"; usage 2 ;;
    esac
}

# ---------------------------------------------------------------------------
# Cleanup: stop only the PIDs the script started, then remove the temp dir.
# ---------------------------------------------------------------------------
# tree_pids PID: PID and all its descendants, one per line (from
# /proc/PID/task/*/children).
tree_pids() {
    local -a queue=("$1") kids
    local p
    while ((${#queue[@]})); do
        p=${queue[0]}
        queue=("${queue[@]:1}")
        echo "$p"
        mapfile -t kids < <(cat /proc/"$p"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . || true)
        queue+=("${kids[@]}")
    done
}

# kill_after PID TENTHS [NOTE]: give PID up to TENTHS tenths of a second to
# exit, then SIGKILL it and say so (NOTE, if given, ends the SIGTERM part).
kill_after() {
    local i
    for ((i = 0; i < $2; i++)); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$1" 2>/dev/null; then
        log "PID $1 did not exit on SIGTERM${3:+ $3}; sending SIGKILL"
        kill -KILL "$1" 2>/dev/null || true
    fi
}

# stop_pid PID: SIGTERM, up to 10 s to exit, then SIGKILL; reaps it.
stop_pid() {
    kill -TERM "$1" 2>/dev/null || true
    kill_after "$1" 100 "within 10 s"
    wait "$1" 2>/dev/null || true
}

# stop_trees PID...: SIGTERM all PIDs at once, then give every process of
# their trees (noted before, e.g. NSD's forked server, gdnsd's monitor
# helper) up to 5 s to exit, SIGKILL what is left (by PID), and reap the
# PIDs: when it returns their ports are free.
stop_trees() {
    local -a tree=()
    local pid
    for pid in "$@"; do
        mapfile -t -O "${#tree[@]}" tree < <(tree_pids "$pid")
    done
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${tree[@]}"; do kill_after "$pid" 50; done
    for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}

# bench_cleanup: the exit trap (see bench_traps).  Stops CLIENT_PID, then
# STARTED_PIDS, removes TMP unless --keep-tmp, and exits with the status the
# script was leaving with.
bench_cleanup() {
    local rc=$? pid
    trap - EXIT INT TERM
    if [[ -n $CLIENT_PID ]]; then
        # `timeout` passes the TERM on to the client.
        kill -TERM "$CLIENT_PID" 2>/dev/null || true
        wait "$CLIENT_PID" 2>/dev/null || true
    fi
    if [[ $BENCH_STOP == each ]]; then
        for pid in "${STARTED_PIDS[@]}"; do stop_pid "$pid"; done
    else
        stop_trees "${STARTED_PIDS[@]}"
    fi
    if [[ -n $TMP && -d $TMP ]]; then
        if ((KEEP_TMP)); then
            log "keeping temporary directory $TMP"
        else
            rm -rf -- "$TMP"
        fi
    fi
    exit "$rc"
}

# bench_traps trees|each: from here on, leaving the script for any reason
# (the end, an error, SIGINT, SIGTERM) runs bench_cleanup, which stops
# STARTED_PIDS with stop_trees ("trees") or one after another with stop_pid
# ("each").
bench_traps() {
    BENCH_STOP=$1
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# ---------------------------------------------------------------------------
# Tools, build, ports, temporary directory.
# ---------------------------------------------------------------------------
# install_missing COMMAND=PACKAGE...: install (Debian/Ubuntu, apt-get,
# non-interactive, as root or with passwordless sudo) the package of every
# COMMAND that is not on PATH; dies if that cannot be done.
install_missing() {
    local -a missing=() sudo=()
    local pair
    for pair in "$@"; do
        command -v "${pair%%=*}" >/dev/null 2>&1 || missing+=("${pair#*=}")
    done
    ((${#missing[@]})) || return 0
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    command -v apt-get >/dev/null 2>&1 \
        || die "missing packages (${missing[*]}) and no apt-get to install them"
    if ((EUID != 0)); then
        command -v sudo >/dev/null 2>&1 || die "need root or sudo to install: ${missing[*]}"
        sudo=(sudo -n)
    fi
    log "installing: ${missing[*]}"
    # Fresh machines often have no package lists yet.
    timeout 600 "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
        || die "apt-get update failed"
    timeout 900 "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "${missing[@]}" >&2 || die "apt-get install failed"
}

# build_gtm: `cargo build --release` in the repository; dies if it fails.
build_gtm() {
    log "building gtm (cargo build --release${CARGO_TARGET_DIR:+, CARGO_TARGET_DIR=$CARGO_TARGET_DIR})"
    (cd "$REPO_ROOT" && timeout 3600 cargo build --release) || die "cargo build failed"
}

# port_busy PROTO PORT [IP]: true if something listens on PORT (PROTO udp or
# tcp; on IP only, if given); waits up to 5 s for a port being released.
port_busy() {
    local flag=-lun i
    [[ $1 == tcp ]] && flag=-ltn
    for ((i = 0; i < 25; i++)); do
        ss -H "$flag" "${3:+src $3 and }sport = :$2" 2>/dev/null | grep -q . || return 1
        sleep 0.2
    done
    return 0
}

# make_tmp: create TMP, the temporary directory ($TMPDIR or /tmp, NAME.XXXXXX).
make_tmp() {
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/$BENCH_NAME.XXXXXX")
    chmod 755 "$TMP"
    log "working in $TMP"
}

# wait_tcp NAME PORT: wait (START_TIMEOUT seconds at most) until ADDR:PORT
# accepts TCP connections, checking with the script's alive_or_die NAME
# that the process is still there.
wait_tcp() {
    local deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        alive_or_die "$1"
        if (exec 3<>"/dev/tcp/$ADDR/$2") 2>/dev/null; then return 0; fi
        sleep 0.2
    done
    die "$1 did not listen on $ADDR:$2 within ${START_TIMEOUT}s"
}

# ---------------------------------------------------------------------------
# CPU time.
# ---------------------------------------------------------------------------
# proc_ticks PID [all|usr|sys]: CPU ticks of one process, utime+stime (or
# one of them) from /proc/PID/stat fields 14 and 15, which cover all its
# threads; 0 once it has exited.
proc_ticks() {
    local stat rest
    local -a f
    { stat=$(<"/proc/$1/stat"); } 2>/dev/null || { echo 0; return 0; }
    rest=${stat##*) }          # fields from 3 (state) on; comm may hold spaces
    read -ra f <<<"$rest"
    case ${2:-all} in
        usr) echo $((f[11])) ;;
        sys) echo $((f[12])) ;;
        *) echo $((f[11] + f[12])) ;;
    esac
}

# cpu_ticks PID [all|usr|sys]: proc_ticks summed over PID and all its
# descendants (NSD, for one, answers from a forked child).
cpu_ticks() {
    local total=0 p
    for p in $(tree_pids "$1"); do
        total=$((total + $(proc_ticks "$p" "${2:-all}")))
    done
    echo "$total"
}

# ---------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------
# gtm_version: "gtm X.Y.Z (git describe)" of GTM_BIN and the work tree.
gtm_version() {
    local v rev
    v=$(timeout 5 "$GTM_BIN" --version 2>/dev/null | head -n 1 || true)
    rev=$(git -C "$REPO_ROOT" describe --always --dirty 2>/dev/null || true)
    printf '%s%s' "${v:-gtm}" "${rev:+ ($rev)}"
}

# write_docs_section INTRO REPORT: replace what stands between the lines
# <!-- NAME:begin --> and <!-- NAME:end --> of DOCS_FILE with REPORT.
# Appends the two markers if DOCS_FILE lacks them, and creates DOCS_FILE
# ("# Performance", then the sentence INTRO) if it does not exist.
write_docs_section() {
    local intro=$1 report=$2
    local begin="<!-- $BENCH_NAME:begin -->" end="<!-- $BENCH_NAME:end -->"
    mkdir -p "$(dirname -- "$DOCS_FILE")"
    if [[ ! -f $DOCS_FILE ]]; then
        printf '# Performance\n\n%s\n\n%s\n%s\n' "$intro" "$begin" "$end" >"$DOCS_FILE"
    elif ! grep -qF "$begin" "$DOCS_FILE" || ! grep -qF "$end" "$DOCS_FILE"; then
        printf '\n%s\n%s\n' "$begin" "$end" >>"$DOCS_FILE"
    fi
    printf '%s\n' "$report" >"$TMP/report.md"
    awk -v b="$begin" -v e="$end" -v rep="$TMP/report.md" '
        $0 == b { print; while ((getline line < rep) > 0) print line; skip = 1; next }
        $0 == e { skip = 0 }
        !skip   { print }
    ' "$DOCS_FILE" >"$TMP/doc.new"
    cat "$TMP/doc.new" >"$DOCS_FILE"
    log "wrote results into $DOCS_FILE"
}

# ---------------------------------------------------------------------------
# Devices with an API (bench-cluster.sh, bench-scale.sh). Each script
# defines TMP (a device's data directory is $TMP/NAME), IP_OF (its
# address), API_PORT, START_TIMEOUT and alive_or_die NAME.

# wait_api NAME [SECONDS]: until the device wrote its token and API address
# and accepts connections on its API port.
wait_api() {
    local dev=$1 deadline=$((SECONDS + ${2:-$START_TIMEOUT}))
    while ((SECONDS < deadline)); do
        alive_or_die "$dev"
        if [[ -s $TMP/$dev/api-token && -s $TMP/$dev/api-address ]] \
            && (exec 3<>"/dev/tcp/${IP_OF[$dev]}/$API_PORT") 2>/dev/null; then
            return 0
        fi
        sleep 0.2
    done
    die "$dev did not serve its API on ${IP_OF[$dev]}:$API_PORT within ${2:-$START_TIMEOUT}s"
}

# url_of NAME: the device's API base URL; devspec NAME: NAME=URL,TOKEN-FILE
# for the Python helpers.
url_of() { local u; u=$(<"$TMP/$1/api-address"); u=${u%%[[:space:]]*}; [[ $u == http* ]] || u="http://$u"; echo "${u%/}"; }
devspec() { echo "$1=$(url_of "$1"),$TMP/$1/api-token"; }
