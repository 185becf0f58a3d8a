#!/usr/bin/env python3
"""bench-console.py - the console's page weight and first paint, for
scripts/bench-console.sh (stdlib only).

Subcommands (each prints one JSON object on stdout; progress on stderr):

  gen     --records N --out FILE
          A configuration of N A records over max(1, N // 100) domains
          (c000.test ...), each record with two addresses in two
          datacenters, one in three in disaster-recovery mode.

  browse  --driver URL --base URL --token-file F --runs R --label L
          [--page PATH ...]
          Opens headless Debian chromium through the chromedriver at URL,
          logs in to the console at --base with the token, then loads each
          page R times with the browser's cache emptied before each load,
          and reads the Navigation and Paint Timing of the page:
          first-contentful-paint (ms from the start of navigation), the
          bytes transferred for the document and for its assets, and the
          document's size before and after decompression. Prints the
          medians per page.

Only the URLs given are contacted (the caller passes loopback ones).
"""

import argparse
import json
import statistics
import sys
import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"


def log(msg):
    sys.stderr.write("[bench-console.py %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def gen(args):
    n = args.records
    domains = max(1, n // 100)
    with open(args.out, "w") as f:
        w = f.write
        w('[[datacenter]]\nname = "dc1"\n\n[[datacenter]]\nname = "dc2"\n\n')
        made = 0
        for d in range(domains):
            w('[[domain]]\nname = "c%03d.test"\nnameservers = ["ns1.c%03d.test"]\n'
              'main_dc = "dc1"\ndr_dc = "dc2"\n\n' % (d, d))
            per = n // domains + (1 if d < n % domains else 0)
            for _ in range(per):
                made += 1
                mode = 'mode = "disaster-recovery"\n' if made % 3 == 0 else ""
                w('[[domain.record]]\nname = "r%06d"\ntype = "A"\n%s'
                  'addresses = [{ ip = "192.0.2.%d", dc = "dc1" }, { ip = "198.51.100.%d", dc = "dc2" }]\n\n'
                  % (made, mode, 1 + made % 250, 1 + made % 250))
    print(json.dumps({"file": args.out, "records": made, "domains": domains}))


class Driver:
    """A WebDriver session over chromedriver's HTTP API."""

    def __init__(self, url):
        self.url = url.rstrip("/")
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [
                            "--headless=new", "--no-sandbox", "--disable-gpu",
                            "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", "--window-size=1280,900",
                        ],
                    },
                }
            }
        }
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read() or b"{}").get("value")

    def s(self, method, path, body=None):
        return self.call(method, "/session/%s%s" % (self.session, path), body)

    def goto(self, url):
        self.s("POST", "/url", {"url": url})

    def find(self, css):
        el = self.s("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(el.values()))

    def type(self, css, text):
        self.s("POST", "/element/%s/value" % self.find(css), {"text": text})

    def click(self, css):
        self.s("POST", "/element/%s/click" % self.find(css), {})

    def run(self, script):
        return self.s("POST", "/execute/sync", {"script": script, "args": []})

    def cdp(self, cmd, params=None):
        return self.s("POST", "/goog/cdp/execute", {"cmd": cmd, "params": params or {}})

    def close(self):
        try:
            self.call("DELETE", "/session/%s" % self.session)
        except Exception:  # the driver may be gone already
            pass


TIMING = """
var nav = performance.getEntriesByType("navigation")[0];
var paint = performance.getEntriesByName("first-contentful-paint")[0];
var assets = 0;
performance.getEntriesByType("resource").forEach(function (r) { assets += r.transferSize; });
return {
  fcp_ms: paint ? paint.startTime : null,
  doc_transfer: nav.transferSize,
  doc_encoded: nav.encodedBodySize,
  doc_decoded: nav.decodedBodySize,
  assets_transfer: assets,
  response_end_ms: nav.responseEnd,
  rows: document.querySelectorAll("tbody tr").length
};
"""


def browse(args):
    with open(args.token_file) as f:
        token = f.read().strip()
    d = Driver(args.driver)
    try:
        d.goto(args.base + "/ui/login")
        d.type("#secret", token)
        d.click("#login")
        deadline = time.time() + 30
        while "/ui/login" in (d.s("GET", "/url") or "/ui/login"):
            if time.time() > deadline:
                raise SystemExit("the login did not succeed")
            time.sleep(0.1)
        out = {"label": args.label, "pages": {}}
        for page in args.page:
            runs = []
            for _ in range(args.runs):
                d.cdp("Network.clearBrowserCache")
                d.goto(args.base + page)
                # The paint entry is recorded once the frame is drawn.
                t = None
                for _ in range(50):
                    t = d.run(TIMING)
                    if t["fcp_ms"] is not None:
                        break
                    time.sleep(0.05)
                runs.append(t)
            med = lambda k: statistics.median([r[k] for r in runs if r[k] is not None] or [0])
            out["pages"][page] = {
                "fcp_ms": round(med("fcp_ms"), 1),
                "fcp_max_ms": round(max(r["fcp_ms"] or 0 for r in runs), 1),
                "response_end_ms": round(med("response_end_ms"), 1),
                "transfer_bytes": int(med("doc_transfer") + med("assets_transfer")),
                "doc_transfer": int(med("doc_transfer")),
                "doc_encoded": int(med("doc_encoded")),
                "doc_decoded": int(med("doc_decoded")),
                "rows": runs[-1]["rows"],
                "runs": len(runs),
            }
            log("%s %s: FCP %.0f ms, %d bytes transferred" % (
                args.label, page, out["pages"][page]["fcp_ms"], out["pages"][page]["transfer_bytes"]))
        print(json.dumps(out))
    finally:
        d.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--records", type=int, required=True)
    g.add_argument("--out", required=True)
    b = sub.add_parser("browse")
    b.add_argument("--driver", required=True)
    b.add_argument("--base", required=True)
    b.add_argument("--token-file", required=True)
    b.add_argument("--runs", type=int, default=5)
    b.add_argument("--label", required=True)
    b.add_argument("--page", action="append", required=True)
    args = p.parse_args()
    {"gen": gen, "browse": browse}[args.cmd](args)


if __name__ == "__main__":
    main()
