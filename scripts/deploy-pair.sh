#!/usr/bin/env bash
# Deploys a local gtm cluster on loopback: a two-device pair in dc1
# (127.0.0.11, 127.0.0.12) and a remote device in dc2 (127.0.0.21), joins
# them, applies config/cluster-demo.toml and prints how to inspect them.
#
#   scripts/deploy-pair.sh           build, start, join, apply
#   scripts/deploy-pair.sh --stop    stop the devices this script started
#
# Each device: DNS on <ip>:1053 (UDP and TCP), API on <ip>:8053, data in
# $GTM_PAIR_DIR/<name> (default /tmp/gtm-pair). Processes are stopped by
# the PIDs recorded there.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${GTM_PAIR_DIR:-/tmp/gtm-pair}
GTM=${GTM_BIN:-$ROOT/target/release/gtm}
DEVICES=("gtm1 dc1 127.0.0.11" "gtm2 dc1 127.0.0.12" "gtm3 dc2 127.0.0.21")

stop() {
  for d in "${DEVICES[@]}"; do
    read -r name _ _ <<<"$d"
    pidfile="$DIR/$name/pid"
    if [[ -f $pidfile ]]; then
      pid=$(cat "$pidfile")
      if kill "$pid" 2>/dev/null; then
        echo "stopped $name (pid $pid)"
      fi
      rm -f "$pidfile"
    fi
  done
}

if [[ ${1:-} == --stop ]]; then
  stop
  exit 0
fi

if [[ ${1:-} != --no-build ]]; then
  (cd "$ROOT" && cargo build --release)
fi
stop
rm -rf "$DIR"
mkdir -p "$DIR"

for d in "${DEVICES[@]}"; do
  read -r name dc ip <<<"$d"
  mkdir -p "$DIR/$name"
  cat >"$DIR/$name/node.toml" <<NODE
name = "$name"
datacenter = "$dc"
data_dir = "$DIR/$name"
dns_listen = ["$ip:1053"]
api_listen = "$ip:8053"
NODE
  "$GTM" serve --config "$DIR/$name/node.toml" >"$DIR/$name/log" 2>&1 &
  echo $! >"$DIR/$name/pid"
done

# Wait (bounded) until every API answers.
for d in "${DEVICES[@]}"; do
  read -r name _ ip <<<"$d"
  for _ in $(seq 1 100); do
    if curl -fsS "http://$ip:8053/health" >/dev/null 2>&1; then break; fi
    sleep 0.1
  done
  curl -fsS "http://$ip:8053/health" >/dev/null || { echo "$name did not start; see $DIR/$name/log" >&2; exit 1; }
done

g() { local name=$1; shift; "$GTM" --data-dir "$DIR/$name" "$@"; }

g gtm1 cluster init
token=$(g gtm1 cluster token)
g gtm2 cluster join http://127.0.0.11:8053 --token "$token"
g gtm3 cluster join http://127.0.0.11:8053 --token "$token"
g gtm1 config apply "$ROOT/config/cluster-demo.toml"
echo
g gtm1 cluster status
cat <<HELP

The cluster runs. Inspect it with:
  $GTM --data-dir $DIR/gtm1 cluster status
  $GTM --data-dir $DIR/gtm2 status
  $GTM --data-dir $DIR/gtm3 record preview app.pair.test A
  $GTM --data-dir $DIR/gtm1 logs --follow
  dig @127.0.0.11 -p 1053 www.pair.test A      (and @127.0.0.12, @127.0.0.21)
Write on any device (followers forward to the leader):
  $GTM --data-dir $DIR/gtm2 config apply config/cluster-demo.toml --dry-run
Stop them with: scripts/deploy-pair.sh --stop
HELP
