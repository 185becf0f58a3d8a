#!/usr/bin/env python3
"""bench-scale.py - generation and timing loops for scripts/bench-scale.sh
(stdlib only; the HTTP client and the DNS wire helpers are
scripts/bench-cluster.py's).

Subcommands (each prints one JSON object on stdout; progress on stderr):

  gen     --records N --domains D --markers P,A,B --dir DIR
          Writes, for D domains b000.test ... with N A records in all
          (r0000001 ...; addresses 192.0.2.x, 198.51.100.x, 203.0.113.x with
          x = 1-200) and one `marker` A record per domain:
            small.toml      the configuration before: the D domains with
                            their marker (address P) only
            config-a.toml   the whole configuration, each domain's records
                            one inline table a line (the tightest TOML that
                            still reads as a configuration); every marker A
            config-b.toml   the same with marker.b000.test B (one line differs)
            dom-bNNN.json   each domain as the body of PUT /api/v1/domains/..
            zones/bNNN.test the same records as an NSD zone file
  send    --send NAME --method M --path P --body FILE --content-type T
          --qname Q --want IP [--prev IP] --dns NAME=IP:PORT ...
          --devices NAME=URL,TOKEN_FILE ... [--timeout S]
          One write (a whole configuration, a domain) to device --send,
          while a thread per device asks its DNS for Q (A) every 2 ms, each
          query waiting up to --lost-ms for its answer, until the write was
          answered and every device answers IP. Counts, per device, the
          queries not answered in time (lost), answered with neither IP nor
          --prev (wrong: the previous configuration not kept), and after IP
          was seen, answered with something else (flaps).
  writes  --send NAME --n N --records N --domains D --dns NAME=IP:PORT ...
          --devices NAME=URL,TOKEN_FILE ... [--budget S] [--timeout S]
          N one-record writes, one at a time: PUT of record rNNNNNNN A in its
          domain with a new address (198.18.x.y), each timed from sending
          until every device's DNS answers the new address.
  answer  --dns IP:PORT --qname Q --want IP --t0-ns NS [--timeout S]
          After a start: seconds from t0 (time.time_ns() of the start) to
          the first DNS response of any kind, and to the first answer IP.
  tokens  --device NAME=URL,TOKEN_FILE --max N [--budget S]
          Creates and revokes API tokens (account commands: Raft log
          entries that touch no configuration) until the device's
          `GET /api/v1/cluster/status` shows a purged log (a snapshot was
          built and the log before it dropped), so a device that joins
          later must receive the snapshot.
  get     --device NAME=URL,TOKEN_FILE --path P   (JSON answer)

Only the URLs and DNS addresses given are contacted.
"""

import argparse
import importlib.util
import json
import os
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True   # no __pycache__ in scripts/
_spec = importlib.util.spec_from_file_location(
    "bench_cluster", os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-cluster.py"))
bc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bc)

NOW = time.perf_counter
JSON = "application/json"
IP_HI = ["192.0.2", "198.51.100", "203.0.113"]


def log(msg):
    sys.stderr.write("[bench-scale.py %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


# ---------------------------------------------------------------------------
# gen
# ---------------------------------------------------------------------------
def record_ip(n):
    return "%s.%d" % (IP_HI[n % 3], 1 + n % 200)


def domain_name(d):
    return "b%03d.test" % d


def gen(args):
    t0 = NOW()
    marker_p, marker_a, marker_b = args.markers.split(",")
    per = args.records // args.domains
    os.makedirs(os.path.join(args.dir, "zones"), exist_ok=True)
    head = '[[datacenter]]\nname = "dc1"\n'
    with open(os.path.join(args.dir, "small.toml"), "w") as f:
        f.write(head)
        for d in range(args.domains):
            f.write('\n[[domain]]\nname = "%s"\nttl = %d\nnameservers = ["ns1.%s"]\n'
                    'record = [{name="marker",type="A",addresses=[{ip="%s"}]}]\n'
                    % (domain_name(d), args.ttl, domain_name(d), marker_p))
    fa = open(os.path.join(args.dir, "config-a.toml"), "w")
    fb = open(os.path.join(args.dir, "config-b.toml"), "w")
    fa.write(head)
    fb.write(head)
    n = 0
    for d in range(args.domains):
        name = domain_name(d)
        dhead = '\n[[domain]]\nname = "%s"\nttl = %d\nnameservers = ["ns1.%s"]\nrecord = [\n' % (
            name, args.ttl, name)
        fa.write(dhead)
        fb.write(dhead)
        line = '{name="marker",type="A",addresses=[{ip="%s"}]},\n'
        fa.write(line % marker_a)
        fb.write(line % (marker_b if d == 0 else marker_a))
        jrec = ['{"name":"marker","type":"A","addresses":[{"ip":"%s"}]}' % marker_a]
        zone = open(os.path.join(args.dir, "zones", name), "w")
        zone.write("$TTL %d\n@ SOA ns1.%s. hostmaster.%s. ( 1 3600 600 604800 30 )\n"
                   "@ NS ns1.%s.\nmarker A %s\n" % (args.ttl, name, name, name, marker_a))
        lines = []
        zlines = []
        for _ in range(per):
            n += 1
            ip = record_ip(n)
            lines.append('{name="r%07d",type="A",addresses=[{ip="%s"}]},\n' % (n, ip))
            jrec.append('{"name":"r%07d","type":"A","addresses":[{"ip":"%s"}]}' % (n, ip))
            zlines.append("r%07d A %s\n" % (n, ip))
        text = "".join(lines) + "]\n"
        fa.write(text)
        fb.write(text)
        zone.write("".join(zlines))
        zone.close()
        with open(os.path.join(args.dir, "dom-%s.json" % name[:-5]), "w") as f:
            f.write('{"ttl":%d,"nameservers":["ns1.%s"],"record":[%s]}'
                    % (args.ttl, name, ",".join(jrec)))
    fa.close()
    fb.close()
    size = os.path.getsize(os.path.join(args.dir, "config-a.toml"))
    print(json.dumps({"records": n, "markers": args.domains, "domains": args.domains,
                      "per_domain": per, "toml_bytes": size, "gen_s": round(NOW() - t0, 3)}))


# ---------------------------------------------------------------------------
# DNS
# ---------------------------------------------------------------------------
def parse_dns(specs):
    out = {}
    for spec in specs:
        name, addr = spec.split("=", 1)
        ip, port = addr.rsplit(":", 1)
        out[name] = (ip, int(port))
    return out


def parse_pids(specs):
    return {n: int(p) for n, p in (spec.split("=", 1) for spec in specs or [])}


def running(pid):
    """False once the process exited (a zombie not yet reaped included)."""
    if pid is None:
        return True
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Watch(threading.Thread):
    """Asks one device's DNS for `qname` A every 2 ms until `want` was seen
    and `stop` is set (or the deadline). Each query waits up to `lost_s`
    for its answer; a query without one is lost."""

    def __init__(self, name, addr, qname, want, prev, t0, deadline, lost_s, stop, pid=None):
        super().__init__(daemon=True)
        self.pid, self.exited, self.exited_s = pid, False, None
        self.name, self.addr, self.qname = name, addr, qname
        self.want, self.prev = want, prev
        self.t0, self.deadline, self.lost_s, self.stop = t0, deadline, lost_s, stop
        self.seen_s = None
        self.queries = self.lost = self.wrong = self.flaps = 0
        self.wrong_examples = []
        self.lat = []
        self.last = None

    def run(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(self.addr)
        qid = int.from_bytes(os.urandom(2), "big")
        try:
            while NOW() < self.deadline and not (self.stop.is_set() and self.seen_s is not None):
                if self.queries % 100 == 0 and not running(self.pid):
                    self.exited, self.exited_s = True, NOW() - self.t0
                    break
                qid = (qid + 1) & 0xFFFF
                q0 = NOW()
                self.queries += 1
                a = None
                try:
                    s.settimeout(self.lost_s)
                    s.send(bc.dns_query(self.qname, qid))
                    while True:
                        left = self.lost_s - (NOW() - q0)
                        if left <= 0:
                            raise socket.timeout()
                        s.settimeout(left)
                        a = bc.dns_a(s.recv(4096), qid)
                        if a is not None:
                            break
                except (socket.timeout, ConnectionRefusedError):
                    # A device that is gone loses nothing: it is reported
                    # as exited instead.
                    if not running(self.pid):
                        self.exited, self.exited_s = True, NOW() - self.t0
                        break
                    self.lost += 1
                    a = None
                if a is not None:
                    self.lat.append((NOW() - q0) * 1000)
                    self.last = a
                    if self.want in a:
                        if self.seen_s is None:
                            self.seen_s = NOW() - self.t0
                    elif self.seen_s is not None:
                        self.flaps += 1
                    elif self.prev is None or self.prev not in a:
                        self.wrong += 1
                        if len(self.wrong_examples) < 3:
                            self.wrong_examples.append(a)
                time.sleep(0.002)
        finally:
            s.close()

    def result(self):
        return {"seen_s": None if self.seen_s is None else round(self.seen_s, 3),
                "queries": self.queries, "lost": self.lost, "wrong": self.wrong,
                "wrong_examples": self.wrong_examples, "flaps": self.flaps,
                "p50_ms": rnd(bc.pct(self.lat, 50)), "p99_ms": rnd(bc.pct(self.lat, 99)),
                "max_ms": rnd(max(self.lat) if self.lat else None), "last": self.last,
                "exited": self.exited}


def rnd(x, k=3):
    return None if x is None else round(x, k)


# ---------------------------------------------------------------------------
# send: one large write, DNS watched meanwhile
# ---------------------------------------------------------------------------
def send(args):
    devs = bc.parse_devices(args.devices, args.timeout)
    dev = devs[args.send]
    with open(args.body, "rb") as f:
        body = f.read()
    out = {"send": args.send, "path": args.path, "bytes": len(body)}
    res = {}

    def do():
        headers = {"Authorization": "Bearer " + dev.token, "Content-Type": args.content_type}
        try:
            c = bc.http.client.HTTPConnection(dev.host, dev.port, timeout=args.timeout)
            c.request(args.method, args.path, body=body, headers=headers)
            r = c.getresponse()
            data = r.read()
            c.close()
            res["status"] = r.status
            try:
                res["body"] = json.loads(data)
            except ValueError:
                res["body"] = data.decode("utf-8", "replace")
        except Exception as e:  # noqa: BLE001 - reported
            res["status"], res["body"] = None, "%s failed after %.1f s: %r" % (args.method, NOW() - t0, e)
        res["t"] = NOW()

    stop = threading.Event()
    t0 = NOW()
    deadline = t0 + args.timeout
    pids = parse_pids(args.pids)
    watches = [Watch(n, a, args.qname, args.want, args.prev, t0, deadline, args.lost_ms / 1000, stop,
                     pids.get(n))
               for n, a in parse_dns(args.dns).items()]
    th = threading.Thread(target=do, daemon=True)
    th.start()
    for w in watches:
        w.start()
    while th.is_alive() and NOW() < deadline and all(running(p) for p in pids.values()):
        th.join(0.5)
    if "t" in res:
        out["put_s"] = round(res["t"] - t0, 3)
        if res["status"] not in (200, 504, None):
            # Refused: the DNS keeps being watched one more second, then stop.
            deadline = min(deadline, NOW() + 1.0)
            for w in watches:
                w.deadline = deadline
    stop.set()
    for w in watches:
        w.join(max(0.0, deadline - NOW()) + 2 * args.lost_ms / 1000 + 1)
    status, rbody = res.get("status"), res.get("body")
    if "t" not in res:
        status, rbody = None, "no answer within %.0f s" % args.timeout
    out["http_status"] = status
    if status != 200 or not isinstance(rbody, dict):
        out["error"] = rbody if isinstance(rbody, str) else json.dumps(rbody)[:1000]
    else:
        out["version"] = rbody.get("version")
        out["changes"] = len(rbody.get("changes") or [])
    out["dns"] = {w.name: w.result() for w in watches}
    out["exited"] = [n for n, p in pids.items() if not running(p)]
    gone = [w.exited_s for w in watches if w.exited_s is not None]
    out["exited_s"] = round(min(gone), 1) if gone else None
    seen = [w.seen_s for w in watches]
    out["all_s"] = round(max(seen), 3) if seen and None not in seen else None
    print(json.dumps(out))


# ---------------------------------------------------------------------------
# writes: one-record changes
# ---------------------------------------------------------------------------
def writes(args):
    devs = bc.parse_devices(args.devices, args.timeout)
    dev = devs[args.send]
    dns = parse_dns(args.dns)
    pids = parse_pids(args.pids)
    per = args.records // args.domains
    rows, errors = [], []
    start = NOW()
    stopped = ""
    for i in range(args.n):
        if args.budget and NOW() - start > args.budget:
            stopped = "stopped after %d writes: the %.0f s budget was used up" % (i, args.budget)
            break
        # Records spread over every domain and position; a new address each.
        d = i % args.domains
        k = d * per + 1 + (i * 7919) % per
        name, domain = "r%07d" % k, domain_name(d)
        ip = "198.18.%d.%d" % (i // 250, 1 + i % 250)
        body = json.dumps({"addresses": [{"ip": ip}]})
        res = {}

        def do():
            try:
                res["status"], res["body"] = dev.request(
                    "PUT", "/api/v1/domains/%s/records/%s/A" % (domain, name), body=body,
                    content_type=JSON)
            except Exception as e:  # noqa: BLE001 - reported
                res["status"], res["body"] = None, "PUT failed: %r" % (e,)
            res["t"] = NOW()
            if res["status"] not in (200, 504, None):
                # Refused: the new address will never show. (504
                # outcome-unknown and a lost answer may still apply.)
                for w in watches:
                    w.deadline = NOW()

        stop = threading.Event()
        t0 = NOW()
        deadline = t0 + args.timeout
        watches = [Watch(n, a, "%s.%s" % (name, domain), ip, record_ip(k), t0, deadline, 1.0, stop,
                         pids.get(n))
                   for n, a in dns.items()]
        stop.set()
        for w in watches:
            w.start()
        th = threading.Thread(target=do, daemon=True)
        th.start()
        while th.is_alive() and NOW() < deadline and all(running(p) for p in pids.values()):
            th.join(0.5)
        for w in watches:
            w.join(max(0.0, deadline - NOW()) + 3)
        seen = [w.seen_s for w in watches]
        put_s = res["t"] - t0 if "t" in res else None
        gone = [n for n, p in pids.items() if not running(p)]
        if gone:
            errors.append("write %d: %s exited" % (i, ", ".join(gone)))
            stopped = "stopped: %s exited" % ", ".join(gone)
            break
        if None in seen:
            errors.append("write %d (%s.%s -> %s): HTTP %s %s; DNS %s" % (
                i, name, domain, ip, res.get("status"), str(res.get("body"))[:300],
                {w.name: w.result()["last"] for w in watches}))
            if len(errors) >= 5:
                stopped = "stopped after %d errors" % len(errors)
                break
            continue
        body_ = res.get("body")
        row = {"i": i, "start": t0, "name": "%s.%s" % (name, domain), "ip": ip,
               "dns_ms": max(seen) * 1000, "put_ms": put_s * 1000,
               "status": res.get("status"),
               "version": body_.get("version") if isinstance(body_, dict) else None,
               "lost": sum(w.lost for w in watches)}
        row["both_ms"] = max(row["dns_ms"], row["put_ms"])
        rows.append(row)
        if args.progress:
            log("write %d/%d: %s -> %s on every DNS in %.1f ms (PUT answered HTTP %s in %.1f ms)" % (
                i + 1, args.n, row["name"], ip, row["dns_ms"], row["status"], row["put_ms"]))
    dev.close()
    if args.out:
        with open(args.out, "w") as f:
            # start: CLOCK_MONOTONIC seconds, as `perf record -k CLOCK_MONOTONIC` stamps samples.
            f.write("i\tstart\tname\tip\tstatus\tversion\tdns_ms\tput_ms\n")
            for r in rows:
                f.write("%d\t%.6f\t%s\t%s\t%s\t%s\t%.3f\t%.3f\n" % (
                    r["i"], r["start"], r["name"], r["ip"], r["status"], r["version"], r["dns_ms"],
                    r["put_ms"]))
    print(json.dumps({
        "requested": args.n, "done": len(rows), "errors": errors, "stopped": stopped,
        "wall_s": round(NOW() - start, 3), "dns": bc.stats([r["dns_ms"] for r in rows]),
        "put": bc.stats([r["put_ms"] for r in rows]),
        "both": bc.stats([r["both_ms"] for r in rows]),
        "lost": sum(r["lost"] for r in rows),
        "not_200": [r["status"] for r in rows if r["status"] != 200],
        "last": rows[-1] if rows else None}))


# ---------------------------------------------------------------------------
# answer: after a start
# ---------------------------------------------------------------------------
def answer(args):
    ip, port = args.dns.rsplit(":", 1)
    t0 = args.t0_ns / 1e9
    deadline = time.time() + args.timeout
    first, first_kind, want_s = None, None, None
    qid = int.from_bytes(os.urandom(2), "big")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((ip, int(port)))
    s.settimeout(0.2)
    exited = False
    try:
        while time.time() < deadline:
            if not running(args.pid):
                exited = True
                break
            qid = (qid + 1) & 0xFFFF
            try:
                s.send(bc.dns_query(args.qname, qid))
                while True:
                    resp = s.recv(4096)
                    a = bc.dns_a(resp, qid)
                    if a is not None:
                        break
                now = time.time()
                if first is None:
                    first = now - t0
                    first_kind = "rcode %d, A %s" % (resp[3] & 0x0F, a)
                if args.want in a:
                    want_s = now - t0
                    break
            except (socket.timeout, ConnectionRefusedError):
                pass
            time.sleep(0.01)
    finally:
        s.close()
    print(json.dumps({"first_s": rnd(first), "first": first_kind, "want_s": rnd(want_s),
                      "exited": exited}))


# ---------------------------------------------------------------------------
# tokens: log entries until the log is purged
# ---------------------------------------------------------------------------
def tokens(args):
    (dev,) = bc.parse_devices([args.device], 60).values()
    start = NOW()
    n = 0
    status = {}
    stopped = ""
    tag = os.urandom(3).hex()
    while True:
        if n % 50 == 0:
            code, status = dev.request("GET", "/api/v1/cluster/status")
            if code != 200:
                raise SystemExit("cluster status: HTTP %s %r" % (code, status))
            if (status.get("purged_index") or 0) > 0:
                break
            if n >= args.max:
                stopped = "no purged log after %d commands" % n
                break
            if args.budget and NOW() - start > args.budget:
                stopped = "no purged log within %.0f s (%d commands)" % (args.budget, n)
                break
        name = "bench-%s-%d" % (tag, n // 2)
        if n % 2 == 0:
            code, body = dev.request("POST", "/api/v1/tokens", content_type=JSON,
                                     body=json.dumps({"name": name, "role": "viewer"}))
        else:
            code, body = dev.request("DELETE", "/api/v1/tokens/%s" % name)
        if code != 200:
            raise SystemExit("token command %d: HTTP %s %r" % (n, code, body))
        n += 1
    wall = NOW() - start
    dev.close()
    print(json.dumps({"commands": n, "wall_s": round(wall, 3),
                      "ms_per_command": round(wall * 1000 / n, 2) if n else None,
                      "applied_index": status.get("applied_index"),
                      "snapshot_index": status.get("snapshot_index"),
                      "purged_index": status.get("purged_index"), "stopped": stopped}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--records", type=int, required=True)
    g.add_argument("--domains", type=int, required=True)
    g.add_argument("--markers", required=True)
    g.add_argument("--ttl", type=int, default=300)
    g.add_argument("--dir", required=True)
    s = sub.add_parser("send")
    s.add_argument("--send", required=True)
    s.add_argument("--method", default="PUT")
    s.add_argument("--path", required=True)
    s.add_argument("--body", required=True)
    s.add_argument("--content-type", default="text/plain; charset=utf-8")
    s.add_argument("--qname", required=True)
    s.add_argument("--want", required=True)
    s.add_argument("--prev")
    s.add_argument("--dns", nargs="+", required=True)
    s.add_argument("--devices", nargs="+", required=True)
    s.add_argument("--timeout", type=float, default=600)
    s.add_argument("--lost-ms", type=float, default=1000)
    s.add_argument("--pids", nargs="*", help="NAME=PID: stop watching once a device exited")
    w = sub.add_parser("writes")
    w.add_argument("--send", required=True)
    w.add_argument("--n", type=int, required=True)
    w.add_argument("--records", type=int, required=True)
    w.add_argument("--domains", type=int, required=True)
    w.add_argument("--dns", nargs="+", required=True)
    w.add_argument("--devices", nargs="+", required=True)
    w.add_argument("--budget", type=float, default=0)
    w.add_argument("--timeout", type=float, default=300)
    w.add_argument("--progress", action="store_true")
    w.add_argument("--pids", nargs="*", help="NAME=PID: stop once a device exited")
    w.add_argument("--out")
    a = sub.add_parser("answer")
    a.add_argument("--dns", required=True)
    a.add_argument("--qname", required=True)
    a.add_argument("--want", required=True)
    a.add_argument("--t0-ns", type=int, required=True)
    a.add_argument("--timeout", type=float, default=600)
    a.add_argument("--pid", type=int, help="stop once this process exited")
    t = sub.add_parser("tokens")
    t.add_argument("--device", required=True)
    t.add_argument("--max", type=int, default=3000)
    t.add_argument("--budget", type=float, default=0)
    r = sub.add_parser("get")
    r.add_argument("--device", required=True)
    r.add_argument("--path", required=True)
    r.add_argument("--http-timeout", type=float, default=60)
    args = p.parse_args()
    if args.cmd == "get":
        bc.get(args)
        return
    {"gen": gen, "send": send, "writes": writes, "answer": answer, "tokens": tokens}[args.cmd](args)


if __name__ == "__main__":
    main()
