#!/usr/bin/env python3
"""bench-cluster.py - timing loops for scripts/bench-cluster.sh (stdlib only).

Subcommands (each prints one JSON object on stdout; progress on stderr):

  gen     --domains D --per N --marker IP --out FILE [--ttl T]
          Writes a configuration of D domains (b000.test ...) x N A records
          (r000001 ...), plus marker.b000.test A IP, the address that tells
          that a device installed this very configuration.

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
            w('[[domain]]\nname = "b%03d.test"\nttl = %d\nnameservers = ["ns1.b%03d.test"]\n\n'
              % (d, args.ttl, d))
            if d == 0:
                w('[[domain.record]]\nname = "marker"\ntype = "A"\naddresses = [{ ip = "%s" }]\n\n'
                  % args.marker)
            for _ in range(args.per):
                n += 1
                w('[[domain.record]]\nname = "r%06d"\ntype = "A"\naddresses = [{ ip = "%s.%d" }]\n\n'
                  % (n, ip_hi[n % 3], 1 + n % 254))
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

    def request(self, method, path, body=None, timeout=None):
        """Returns (status, parsed JSON or text).  Reconnects once on a
        connection the server closed between requests."""
        headers = {"Authorization": "Bearer " + self.token}
        if body is not None:
            headers["Content-Type"] = "text/plain; charset=utf-8"
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
    devs = parse_devices(args.devices, args.http_timeout)
    send = devs[args.send]
    others = [d for n, d in devs.items() if n != args.send]
    deadline_s = args.wait_timeout
    rows = []
    errors = []
    late_self = 0
    polls_total = 0
    rng_offset = random.randrange(1 << 20)   # never repeat the previous run's text
    start = NOW()
    for i in range(args.n):
        text = small_config(rng_offset + i).encode()
        t0 = NOW()
        try:
            status, body = send.request("PUT", "/api/v1/config", body=text)
        except Exception as e:  # noqa: BLE001 - reported, then the run stops
            errors.append("write %d: PUT failed: %r" % (i, e))
            break
        t_put = NOW()
        if status != 200 or not isinstance(body, dict) or not body.get("applied"):
            errors.append("write %d: PUT -> HTTP %s %r" % (i, status, body))
            if len(errors) >= 10:
                break
            continue
        v = int(body["version"])
        polls = 0
        ok = True
        for d in others:
            while True:
                polls += 1
                if d.version() >= v:
                    break
                if NOW() - t0 > deadline_s:
                    errors.append("write %d: %s did not reach version %d within %ss"
                                  % (i, d.name, v, deadline_s))
                    ok = False
                    break
        t_all = NOW()
        polls_total += polls
        if not ok:
            if len(errors) >= 10:
                break
            continue
        # Not timed: did the receiving device really apply what it returned?
        if send.version() < v:
            late_self += 1
        rows.append((i, v, (t_put - t0) * 1000, (t_all - t0) * 1000, polls))
        if args.progress and (i + 1) % args.progress == 0:
            log("%s: %d/%d writes, last %.2f ms" % (args.send, i + 1, args.n, rows[-1][3]))
    wall = NOW() - start
    if args.out:
        with open(args.out, "w") as f:
            f.write("i\tversion\tput_ms\tall_ms\tpolls\n")
            for r in rows:
                f.write("%d\t%d\t%.3f\t%.3f\t%d\n" % r)
    put = [r[2] for r in rows]
    both = [r[3] for r in rows]
    out = {
        "send": args.send, "requested": args.n, "ok": len(rows), "errors": errors,
        "wall_s": round(wall, 3),
        "writes_per_s": round(len(rows) / wall, 1) if wall > 0 else None,
        "put_p50": pct(put, 50), "put_p99": pct(put, 99), "put_max": max(put) if put else None,
        "all_p50": pct(both, 50), "all_p99": pct(both, 99), "all_max": max(both) if both else None,
        "all_mean": sum(both) / len(both) if both else None,
        "polls_mean": polls_total / len(rows) if rows else None,
        "receiver_not_applied_at_return": late_self,
        "first_version": rows[0][1] if rows else None,
        "last_version": rows[-1][1] if rows else None,
        "slowest": sorted(((round(r[3], 1), r[1]) for r in rows), reverse=True)[:5],
    }
    for d in devs.values():
        d.close()
    print(json.dumps(out))


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
    since t0 or None}, and the last answer seen from each."""
    socks = {}
    done = {}
    last = {}
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
                last[n] = a
                if a is not None and want in a:
                    done[n] = NOW() - t0
            time.sleep(0.002)
    finally:
        for s in socks.values():
            s.close()
    return {n: done.get(n) for n in targets}, last


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
    t0 = NOW()
    deadline = t0 + args.timeout
    try:
        status, body = send.request("PUT", "/api/v1/config", body=text, timeout=args.timeout)
    except Exception as e:  # noqa: BLE001
        status, body = None, "PUT failed after %.1f s: %r" % (NOW() - t0, e)
    t_put = NOW() - t0
    out["put_s"] = round(t_put, 3)
    out["http_status"] = status
    if status != 200 or not isinstance(body, dict):
        out["error"] = body if isinstance(body, str) else json.dumps(body)[:2000]
    else:
        out["version"] = body.get("version")
        out["applied_flag"] = body.get("applied")
        out["changes"] = len(body.get("changes") or [])
    # DNS: when does each device answer the marker of this configuration?
    seen, last = dns_watch(dns, "marker.b000.test", args.marker, t0, deadline)
    out["dns_s"] = {n: (round(s, 3) if s is not None else None) for n, s in seen.items()}
    out["dns_last_answer"] = last
    times = [s for s in seen.values()]
    out["all_s"] = round(max(max(times), t_put), 3) if times and None not in times else None
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
    g.add_argument("--out", required=True)
    w = sub.add_parser("writes")
    w.add_argument("--send", required=True)
    w.add_argument("--n", type=int, required=True)
    w.add_argument("--devices", nargs="+", required=True)
    w.add_argument("--out")
    w.add_argument("--http-timeout", type=float, default=30)
    w.add_argument("--wait-timeout", type=float, default=30)
    w.add_argument("--progress", type=int, default=0)
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
