#!/usr/bin/env python3
"""bench-cluster.py - timing loops for scripts/bench-cluster.sh (stdlib only).

Subcommands (each prints one JSON object on stdout; progress on stderr):

  gen     --domains D --per N --marker IP --out FILE [--ttl T] [--dnssec]
          Writes a configuration of D domains (b000.test ...) x N A records
          (r000001 ...; addresses x.x.x.1-200), plus marker.b000.test A IP,
          the address that tells that a device installed this very
          configuration (pick IP outside the records' addresses).

  writes  --send NAME --n N --devices NAME=URL,TOKEN_FILE ... [--out TSV]
          N configuration writes, one at a time, PUT to device --send; each
          one timed from sending the PUT until every listed device reports
          GET /api/v1/status version >= the version the PUT returned.  The
          device that received the PUT answers once it applied the write
          itself; the others are polled in a tight loop (no sleep).  After
          the clock stops, the receiving device is asked once more (not
          timed) to confirm it had applied the version it returned.

  apply   --send NAME --file F --marker IP --dns NAME=IP:PORT ...
          --devices NAME=URL,TOKEN_FILE ... [--timeout S]
          PUTs the file to device --send (one request, long timeout), then
          asks each device's DNS (UDP, marker.b000.test A) every 2 ms until
          it answers the marker address, then GET /api/v1/status once per
          device to confirm the version (the status of 100,000 records is
          large, so it is not polled).

  get     --device NAME=URL,TOKEN_FILE --path P
          GET P and print the JSON answer.

Only the URLs and DNS addresses given are contacted (the caller passes
loopback ones).  Keep-alive HTTP/1.1 connections, one per device.
"""

import argparse
import http.client
import json
import os
import random
import socket
import struct
import sys
import threading
import time
import urllib.parse

NOW = time.perf_counter


def log(msg):
    sys.stderr.write("[bench-cluster.py %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


# ---------------------------------------------------------------------------
# Configuration texts
# ---------------------------------------------------------------------------
def small_config(i):
    """A small valid configuration; every i gives a different one."""
    return (
        '[[datacenter]]\nname = "dc1"\n\n'
        '[[domain]]\nname = "bench.test"\nttl = %d\nnameservers = ["ns1.bench.test"]\n\n'
        '[[domain.record]]\nname = "www"\ntype = "A"\n'
        'addresses = [{ ip = "192.0.2.%d" }]\n'
        '\n[[domain.record]]\nname = "seq"\ntype = "TXT"\nvalues = ["\\"w%d\\""]\n'
    ) % (30 + i % 60, 1 + i % 250, i)


def gen(args):
    ip_hi = ["192.0.2", "198.51.100", "203.0.113"]
    t0 = NOW()
    size = 0
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        w = f.write
        w('[[datacenter]]\nname = "dc1"\n\n')
        n = 0
        for d in range(args.domains):
            w('[[domain]]\nname = "b%03d.test"\nttl = %d\nnameservers = ["ns1.b%03d.test"]\n%s\n'
              % (d, args.ttl, d, "dnssec = true\n" if args.dnssec else ""))
            if d == 0:
                w('[[domain.record]]\nname = "marker"\ntype = "A"\naddresses = [{ ip = "%s" }]\n\n'
                  % args.marker)
            for _ in range(args.per):
                n += 1
                w('[[domain.record]]\nname = "r%06d"\ntype = "A"\naddresses = [{ ip = "%s.%d" }]\n\n'
                  % (n, ip_hi[n % 3], 1 + n % 200))
    os.replace(tmp, args.out)
    size = os.path.getsize(args.out)
    print(json.dumps({"file": args.out, "records": n + 1, "domains": args.domains,
                      "bytes": size, "gen_s": round(NOW() - t0, 3)}))


# ---------------------------------------------------------------------------
# HTTP: one keep-alive connection per device
# ---------------------------------------------------------------------------
class Device:
    def __init__(self, name, url, token_file, timeout):
        self.name = name
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise SystemExit("device %s: want an http:// URL, got %r" % (name, url))
        self.host, self.port = u.hostname, u.port or 80
        with open(token_file) as f:
            self.token = f.read().strip()
        self.timeout = timeout
        self.conn = None

    def _conn(self):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.conn.connect()
            self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.conn

    def request(self, method, path, body=None, timeout=None, content_type="text/plain; charset=utf-8"):
        """Returns (status, parsed JSON or text).  Reconnects once on a
        connection the server closed between requests.  A body is TOML
        (text/plain) unless content_type says otherwise."""
        headers = {"Authorization": "Bearer " + self.token}
        if body is not None:
            headers["Content-Type"] = content_type
        for attempt in (0, 1):
            c = self._conn()
            c.sock.settimeout(timeout or self.timeout)
            try:
                c.request(method, path, body=body, headers=headers)
                r = c.getresponse()
                data = r.read()
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected,
                    http.client.CannotSendRequest):
                self.close()
                if attempt:
                    raise
                continue
            if r.getheader("connection", "").lower() == "close":
                self.close()
            try:
                return r.status, json.loads(data)
            except ValueError:
                return r.status, data.decode("utf-8", "replace")
        raise AssertionError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def version(self):
        status, body = self.request("GET", "/api/v1/status")
        if status != 200 or not isinstance(body, dict):
            raise RuntimeError("%s: GET /api/v1/status -> %s %r" % (self.name, status, body))
        return int(body["version"])


def parse_devices(specs, timeout):
    devs = {}
    for spec in specs:
        name, rest = spec.split("=", 1)
        url, token_file = rest.rsplit(",", 1)
        devs[name] = Device(name, url, token_file, timeout)
    return devs


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    i = max(0, min(len(v) - 1, int(p / 100.0 * len(v) + 0.999999) - 1))
    return v[i]


# ---------------------------------------------------------------------------
# writes
# ---------------------------------------------------------------------------
def writes(args):
    """Sequential writes.  Each PUT runs in its own thread on its own
    connection while this thread polls every device's status (tight loop),
    so two times are known per write: when every device had applied it
    ("applied"), and when the client had both the PUT's answer and every
    device at the returned version ("answered").  Without --overlap the next
    write waits for the answer; with it, only for "applied" (the answer is
    collected later)."""
    devs = parse_devices(args.devices, args.http_timeout)
    put_spec = [s for s in args.devices if s.split("=", 1)[0] == args.send]
    rows = []
    errors = []
    pending = []
    rng_offset = random.randrange(1 << 20)   # never repeat the previous run's text
    prev = min(d.version() for d in devs.values())
    put_dev = parse_devices(put_spec, args.http_timeout)[args.send]
    start = NOW()
    stopped = ""

    def do_put(dev, text, res):
        try:
            res["status"], res["body"] = dev.request("PUT", "/api/v1/config", body=text)
        except Exception as e:  # noqa: BLE001 - reported
            res["status"], res["body"] = None, "PUT failed: %r" % (e,)
        res["t"] = NOW()
        if args.overlap:
            dev.close()

    def returned_version(res):
        body = res.get("body")
        if res.get("status") != 200 or not isinstance(body, dict) or not body.get("applied"):
            return None
        return int(body["version"])

    for i in range(args.n):
        if args.budget and NOW() - start > args.budget:
            stopped = "stopped after %d writes: the %.0f s budget was used up" % (i, args.budget)
            break
        text = small_config(rng_offset + i).encode()
        res = {}
        dev = parse_devices(put_spec, args.http_timeout)[args.send] if args.overlap else put_dev
        th = threading.Thread(target=do_put, args=(dev, text, res), daemon=True)
        t0 = NOW()
        th.start()
        seen = {}      # device -> (seconds, version) when it first passed prev
        polls = 0
        failed = None
        while len(seen) < len(devs):
            for n, d in devs.items():
                if n in seen:
                    continue
                polls += 1
                v = d.version()
                if v > prev:
                    seen[n] = (NOW() - t0, v)
            if "t" in res and returned_version(res) is None:
                failed = "write %d: HTTP %s %r" % (i, res["status"], res["body"])
                break
            if NOW() - t0 > args.wait_timeout:
                failed = "write %d: not applied on %s within %.0f s" % (
                    i, sorted(set(devs) - set(seen)), args.wait_timeout)
                break
        if failed:
            th.join(args.http_timeout + 5)
            errors.append(failed)
            if len(errors) >= 5:
                stopped = "stopped after %d errors" % len(errors)
                break
            prev = min(d.version() for d in devs.values())
            continue
        applied_ms = max(t for t, _ in seen.values()) * 1000
        observed = min(v for _, v in seen.values())
        row = {"i": i, "observed": observed, "applied_ms": applied_ms, "polls": polls,
               "t0": t0, "res": res, "thread": th}
        if args.overlap:
            pending.append(row)
        else:
            th.join(args.http_timeout + 5)
            finish(row, devs, errors, args)
            if row.get("answered_ms") is not None:
                rows.append(row)
        prev = observed
        if args.progress and (i + 1) % args.progress == 0:
            log("%s: %d/%d writes, last applied in %.2f ms%s" % (
                args.send, i + 1, args.n, applied_ms,
                "" if args.overlap else ", answered in %.2f ms" % row.get("answered_ms", -1)))
    wall = NOW() - start
    for row in pending:
        row["thread"].join(args.http_timeout + 5)
        finish(row, devs, errors, args)
        rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            f.write("i\tversion\tapplied_ms\tput_ms\tanswered_ms\tpolls\n")
            for r in rows:
                f.write("%d\t%s\t%.3f\t%s\t%s\t%d\n" % (
                    r["i"], r.get("version"), r["applied_ms"], fmt(r.get("put_ms")),
                    fmt(r.get("answered_ms")), r["polls"]))
    applied = [r["applied_ms"] for r in rows]
    put = [r["put_ms"] for r in rows if r.get("put_ms") is not None]
    answered = [r["answered_ms"] for r in rows if r.get("answered_ms") is not None]
    out = {
        "send": args.send, "overlap": args.overlap, "requested": args.n, "done": len(rows),
        "errors": errors, "stopped": stopped, "wall_s": round(wall, 3),
        "writes_per_s": round(len(rows) / wall, 1) if wall > 0 else None,
        "applied": stats(applied), "put": stats(put), "answered": stats(answered),
        "polls_mean": sum(r["polls"] for r in rows) / len(rows) if rows else None,
        "first_version": rows[0].get("version") if rows else None,
        "last_version": rows[-1].get("version") if rows else None,
        "slowest_applied": sorted(((round(r["applied_ms"], 1), r.get("version")) for r in rows),
                                  reverse=True)[:5],
    }
    for d in devs.values():
        d.close()
    put_dev.close()
    print(json.dumps(out))


def fmt(x):
    return "" if x is None else "%.3f" % x


def stats(values):
    if not values:
        return None
    return {"n": len(values), "p50": pct(values, 50), "p99": pct(values, 99),
            "max": max(values), "mean": sum(values) / len(values)}


def finish(row, devs, errors, args):
    """The PUT answer of a write: its version must be the one observed, and
    "answered" is when the client had the answer and every device had it."""
    res = row["res"]
    if "t" not in res:
        errors.append("write %d: no answer to the PUT within %.0f s" % (row["i"], args.http_timeout))
        return
    body = res["body"]
    if res["status"] != 200 or not isinstance(body, dict) or not body.get("applied"):
        errors.append("write %d: HTTP %s %r (after the write was applied everywhere)"
                      % (row["i"], res["status"], body))
        return
    v = int(body["version"])
    row["version"] = v
    row["put_ms"] = (res["t"] - row["t0"]) * 1000
    if v > row["observed"]:
        # Some device was seen at an older version: wait for it now.
        while min(d.version() for d in devs.values()) < v:
            if NOW() - row["t0"] > args.wait_timeout:
                errors.append("write %d: version %d not everywhere within %.0f s"
                              % (row["i"], v, args.wait_timeout))
                return
        row["applied_ms"] = (NOW() - row["t0"]) * 1000
    row["answered_ms"] = max(row["put_ms"], row["applied_ms"])


# ---------------------------------------------------------------------------
# apply (a large configuration)
# ---------------------------------------------------------------------------
def dns_query(name, qid):
    q = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", 1, 1)


def dns_a(resp, qid):
    """The A addresses of a response, or None if it is not an answer to qid."""
    if len(resp) < 12:
        return None
    rid, flags, qd, an, _, _ = struct.unpack(">HHHHHH", resp[:12])
    if rid != qid:
        return None
    pos = 12

    def skip_name(p):
        while True:
            ln = resp[p]
            if ln == 0:
                return p + 1
            if ln & 0xC0 == 0xC0:
                return p + 2
            p += 1 + ln

    for _ in range(qd):
        pos = skip_name(pos) + 4
    out = []
    for _ in range(an):
        pos = skip_name(pos)
        rtype, _, _, rdlen = struct.unpack(">HHIH", resp[pos:pos + 10])
        pos += 10
        if rtype == 1 and rdlen == 4:
            out.append(socket.inet_ntoa(resp[pos:pos + 4]))
        pos += rdlen
    return out


def dns_watch(targets, name, want, t0, deadline):
    """Asks every target until it answers `want`; returns {name: seconds
    since t0 or None}, the last answer seen from each, and how many of the
    queries to each got no answer within 50 ms."""
    socks = {}
    done = {}
    last = {}
    missed = {n: 0 for n in targets}
    qid = random.randrange(1 << 16)
    for n, (ip, port) in targets.items():
        s = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((ip, port))
        s.settimeout(0.05)
        socks[n] = s
    try:
        while len(done) < len(targets) and NOW() < deadline:
            for n, s in socks.items():
                if n in done:
                    continue
                qid = (qid + 1) & 0xFFFF
                try:
                    s.send(dns_query(name, qid))
                    while True:
                        a = dns_a(s.recv(4096), qid)
                        if a is not None:
                            break
                except (socket.timeout, ConnectionRefusedError):
                    a = None
                    missed[n] += 1
                last[n] = a
                if a is not None and want in a:
                    done[n] = NOW() - t0
            time.sleep(0.002)
    finally:
        for s in socks.values():
            s.close()
    return {n: done.get(n) for n in targets}, last, missed


def apply(args):
    devs = parse_devices(args.devices, args.http_timeout)
    send = devs[args.send]
    dns = {}
    for spec in args.dns:
        name, addr = spec.split("=", 1)
        ip, port = addr.rsplit(":", 1)
        dns[name] = (ip.strip("[]"), int(port))
    with open(args.file, "rb") as f:
        text = f.read()
    out = {"send": args.send, "bytes": len(text), "marker": args.marker}
    v_before = {n: d.version() for n, d in devs.items()}
    out["version_before"] = v_before
    res = {}

    def do_put():
        try:
            res["status"], res["body"] = send.request("PUT", "/api/v1/config", body=text,
                                                      timeout=args.timeout)
        except Exception as e:  # noqa: BLE001 - reported
            res["status"], res["body"] = None, "PUT failed after %.1f s: %r" % (NOW() - t0, e)
        res["t"] = NOW()

    # The PUT runs in a thread; meanwhile each device's DNS is asked when it
    # answers the marker of this configuration.
    th = threading.Thread(target=do_put, daemon=True)
    t0 = NOW()
    deadline = t0 + args.timeout
    th.start()
    seen, last, missed = dns_watch(dns, "marker.b000.test", args.marker, t0, deadline)
    th.join(max(1.0, deadline - NOW() + 5))
    status, body = res.get("status"), res.get("body")
    if "t" not in res:
        status, body = None, "no answer to the PUT within %.0f s" % args.timeout
    else:
        out["put_s"] = round(res["t"] - t0, 3)
    out["http_status"] = status
    if status != 200 or not isinstance(body, dict):
        out["error"] = body if isinstance(body, str) else json.dumps(body)[:2000]
    else:
        out["version"] = body.get("version")
        out["applied_flag"] = body.get("applied")
        out["changes"] = len(body.get("changes") or [])
    out["dns_s"] = {n: (round(s, 3) if s is not None else None) for n, s in seen.items()}
    out["dns_last_answer"] = last
    out["dns_unanswered"] = missed
    times = [s for s in seen.values()]
    out["all_s"] = round(max(times), 3) if times and None not in times else None
    # Versions, once (the status of a large configuration is itself large).
    out["version_after"] = {}
    out["status_get_s"] = {}
    for n, d in devs.items():
        g0 = NOW()
        try:
            out["version_after"][n] = d.version()
        except Exception as e:  # noqa: BLE001
            out["version_after"][n] = "error: %r" % (e,)
        out["status_get_s"][n] = round(NOW() - g0, 3)
        d.close()
    print(json.dumps(out))


def get(args):
    devs = parse_devices([args.device], args.http_timeout)
    (d,) = devs.values()
    status, body = d.request("GET", args.path)
    d.close()
    if status != 200:
        raise SystemExit("%s: GET %s -> %s %r" % (d.name, args.path, status, body))
    print(json.dumps(body))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--domains", type=int, required=True)
    g.add_argument("--per", type=int, required=True)
    g.add_argument("--marker", required=True)
    g.add_argument("--ttl", type=int, default=300)
    g.add_argument("--dnssec", action="store_true", help="sign every domain (dnssec = true)")
    g.add_argument("--out", required=True)
    w = sub.add_parser("writes")
    w.add_argument("--send", required=True)
    w.add_argument("--n", type=int, required=True)
    w.add_argument("--devices", nargs="+", required=True)
    w.add_argument("--out")
    w.add_argument("--http-timeout", type=float, default=30)
    w.add_argument("--wait-timeout", type=float, default=30)
    w.add_argument("--progress", type=int, default=0)
    w.add_argument("--budget", type=float, default=0, help="stop sending after S seconds (0: none)")
    w.add_argument("--overlap", action="store_true",
                   help="send the next write once the previous is applied everywhere, "
                        "without waiting for its PUT answer")
    a = sub.add_parser("apply")
    a.add_argument("--send", required=True)
    a.add_argument("--file", required=True)
    a.add_argument("--marker", required=True)
    a.add_argument("--dns", nargs="+", required=True)
    a.add_argument("--devices", nargs="+", required=True)
    a.add_argument("--timeout", type=float, default=120)
    a.add_argument("--http-timeout", type=float, default=60)
    r = sub.add_parser("get")
    r.add_argument("--device", required=True)
    r.add_argument("--path", required=True)
    r.add_argument("--http-timeout", type=float, default=30)
    args = p.parse_args()
    {"gen": gen, "writes": writes, "apply": apply, "get": get}[args.cmd](args)


if __name__ == "__main__":
    main()
