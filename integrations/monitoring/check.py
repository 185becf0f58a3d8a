#!/usr/bin/env python3
"""Checks the monitoring files of this directory against a real gtm device.

    python3 integrations/monitoring/check.py

1. `promtool check rules` and `promtool test rules` on gtm-alerts.rules.yml
   and gtm-alerts.test.yml, and `promtool check rules` on the dashboard's
   expressions (written as recording rules, Grafana's variables replaced),
   so that each is valid PromQL. Without promtool these are skipped with a
   warning, unless the environment variable CI is set: then it fails.
2. Every metric name the dashboard, the alerting rules and the rules' test
   series use is extracted, and every alert is checked for a `severity`
   label and `summary` and `description` annotations.
3. A pair of gtm devices is started on 127.0.0.1 (`$GTM_BIN serve --config
   node.toml`, default the repository's target/release/gtm, else its
   target/debug/gtm; it is not built here; free ports found by
   binding port 0; data in a temporary directory), joined into a cluster,
   given a configuration with a checked record, a fail-safe value and a
   topology rule, and asked DNS queries, so that the per-record, per-check,
   Raft and peer series exist. Both devices' /metrics are scraped.
4. Every name used must be exported: in a `# TYPE` line or a sample of
   either device (`_bucket`, `_sum`, `_count` count as their histogram).
   Names Prometheus makes itself (`up`, ...) are allowed. Each label a
   selector matches on (`gtm_record_status{status="DR"}`) must be a label of
   that metric's samples, where the device has samples of it.

Exit code 0 when all holds, 1 with the list of what does not. The devices
are stopped by their PIDs whatever happens; every wait is bounded.

Environment: GTM_BIN (the gtm binary), PROMTOOL (the promtool binary,
default from PATH), CI (promtool required), GTM_CHECK_KEEP=1 (keep the
temporary directory, with the devices' logs).
"""

import atexit
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DASHBOARD = os.path.join(HERE, "grafana-dashboard.json")
RULES = os.path.join(HERE, "gtm-alerts.rules.yml")
TESTS = os.path.join(HERE, "gtm-alerts.test.yml")
REPO = os.path.dirname(os.path.dirname(HERE))


def default_gtm_bin():
    for path in (os.path.join(REPO, "target", "release", "gtm"), os.path.join(REPO, "target", "debug", "gtm")):
        if os.path.isfile(path):
            return path
    return os.path.join(REPO, "target", "debug", "gtm")


GTM_BIN = os.environ.get("GTM_BIN") or default_gtm_bin()

# Series Prometheus writes itself for every target (or for alerts): not
# exported by the device, always available.
PROMETHEUS_SERIES = {
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
    "ALERTS",
    "ALERTS_FOR_STATE",
}

# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance", "__name__"}

PROMQL_KEYWORDS = {
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
    "group_right", "bool", "offset", "inf", "nan", "atan2", "start", "end",
}

problems = []


def fail(msg):
    problems.append(msg)
    print(f"FAIL: {msg}", flush=True)


def info(msg):
    print(msg, flush=True)


# ------------------------------------------------------------------ promtool


def run_promtool(dashboard_exprs):
    promtool = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if not promtool:
        if os.environ.get("CI"):
            fail("promtool not found (CI is set): install it (Debian: apt-get install prometheus)")
        else:
            info("WARNING: promtool not found: rules not checked or tested (install it: apt-get install prometheus)")
        return
    for args in (["check", "rules", RULES], ["test", "rules", TESTS]):
        p = subprocess.run([promtool, *args], cwd=HERE, capture_output=True, text=True, timeout=120)
        out = (p.stdout + p.stderr).strip()
        if p.returncode != 0:
            fail(f"promtool {' '.join(args[:2])} {os.path.basename(args[2])}:\n{out}")
        else:
            info(f"ok: promtool {' '.join(args[:2])} {os.path.basename(args[2])}")
    # The dashboard's PromQL, as recording rules: promtool parses each.
    with tempfile.TemporaryDirectory(prefix="gtm-dashboard-") as tmp:
        path = os.path.join(tmp, "dashboard.rules.yml")
        with open(path, "w") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for i, (where, expr) in enumerate(dashboard_exprs):
                f.write(f"      - record: gtm_dashboard:expr_{i}\n")
                f.write(f"        expr: {json.dumps(grafana_to_promql(expr))}\n")
        p = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            out = (p.stdout + p.stderr).strip()
            # Name the panels behind the rules promtool refused.
            for m in re.finditer(r"expr_(\d+)", out):
                i = int(m.group(1))
                out += f"\n  expr_{i}: {dashboard_exprs[i][0]}: {dashboard_exprs[i][1]}"
            fail(f"promtool check rules on the dashboard's expressions:\n{out}")
        else:
            info(f"ok: promtool parses the dashboard's {len(dashboard_exprs)} expressions")


def grafana_to_promql(expr):
    """The expression with Grafana's variables replaced by plain values."""
    expr = re.sub(r"\$__(rate_interval|interval|range)\b", "5m", expr)
    expr = re.sub(r"\$\{?datasource\}?", "x", expr)
    expr = re.sub(r"\$\{?(\w+)(:\w+)?\}?", r"\1", expr)
    return expr


# ------------------------------------------------------------------ extraction


def dashboard_expressions():
    """(where, expression) for every PromQL expression of the dashboard."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = []

    def panels(items):
        for p in items:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                out.append((f'panel "{p.get("title")}" {t.get("refId")}', t["expr"]))
    for a in dash.get("annotations", {}).get("list", []):
        if a.get("expr"):
            out.append((f'annotation "{a.get("name")}"', a["expr"]))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or v.get("definition", ""))
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q)
        if m:
            out.append((f"variable {v['name']}", m.group(1)))
        elif re.fullmatch(r"\s*(label_names|metrics)\(.*\)\s*", q):
            continue
        elif q.strip().startswith("query_result("):
            out.append((f"variable {v['name']}", q.strip()[len("query_result("):-1]))
        elif q.strip():
            fail(f"variable {v['name']}: query not understood: {q}")
    return out


def yaml_values(path, key):
    """(line, value) of every `key:` in a YAML file of the shapes used here:
    a plain or quoted scalar on the line, or a `|`/`>` block below it."""
    with open(path) as f:
        lines = f.read().splitlines()
    out = []
    i = 0
    pat = re.compile(r"^(\s*)(?:-\s+)?" + re.escape(key) + r":\s*(.*?)\s*$")
    while i < len(lines):
        m = pat.match(lines[i])
        if not m:
            i += 1
            continue
        indent, value = len(m.group(1)), m.group(2)
        start = i + 1
        if re.fullmatch(r"[|>][-+]?", value):
            block = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            out.append((start, " ".join(block)))
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = json.loads(value) if value[0] == '"' else value[1:-1].replace("''", "'")
        out.append((start, value))
        i += 1
    return out


def selectors(expr):
    """(metric, [label names matched]) of every selector in a PromQL
    expression; metric names without a selector have no labels."""
    # Strings, ranges and grouping clauses name no metric.
    strings = []

    def keep_string(m):
        strings.append(m.group(0))
        return f'"S{len(strings) - 1}"'

    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', keep_string, expr)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\b", " ", e)
    out = []
    for m in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*(\{[^}]*\})|([A-Za-z_:][A-Za-z0-9_:]*)", e):
        if m.group(2) is not None:
            name = m.group(1)
            labels = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(2))
            if name is None:
                named = [s for s in re.findall(r'__name__\s*=\s*"S(\d+)"', m.group(2))]
                for n in named:
                    out.append((strings[int(n)].strip("\"'`"), labels))
                continue
            out.append((name, labels))
            continue
        word = m.group(3)
        rest = e[m.end():]
        if rest.lstrip().startswith("("):
            continue  # a function or aggregation
        if word.lower() in PROMQL_KEYWORDS or re.fullmatch(r"S\d+", word):
            continue
        before = e[:m.start()]
        if re.search(r"[0-9.]$", before) or re.fullmatch(r"[eE]\d*", word):
            continue  # the exponent of a number
        out.append((word, []))
    return out


def check_alert_fields():
    """Every alert has a severity label and summary and description."""
    with open(RULES) as f:
        text = f.read()
    blocks = re.split(r"\n(?=\s*- (?:alert|record):)", text)
    alerts = []
    for b in blocks:
        m = re.match(r"\s*- alert:\s*(\S+)", b)
        if not m:
            continue
        alerts.append(m.group(1))
        for needed in ("severity:", "summary:", "description:"):
            if not re.search(r"^\s+" + re.escape(needed), b, re.M):
                fail(f"alert {m.group(1)} has no {needed[:-1]}")
        sev = re.search(r"^\s+severity:\s*(\S+)", b, re.M)
        if sev and sev.group(1) not in ("critical", "warning", "info"):
            fail(f"alert {m.group(1)}: severity {sev.group(1)} is not critical, warning or info")
    return alerts


# ------------------------------------------------------------------ devices

started = []  # subprocess.Popen of each device this script started


def stop_devices():
    while started:
        p = started.pop()
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()  # SIGKILL to this PID only
                p.wait(timeout=15)
        info(f"stopped device pid {p.pid} (exit {p.returncode})")


def on_signal(signum, _frame):
    stop_devices()
    sys.exit(128 + signum)


def free_port():
    """A port free for both TCP and UDP on 127.0.0.1, found by binding 0."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    u.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port on 127.0.0.1")


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode("utf-8", "replace")


def poll(what, fn, timeout, interval=0.2):
    """Calls fn until it returns a true value, for at most `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except (OSError, urllib.error.URLError, ValueError) as e:
            last = e
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout} s" + (f" (last error: {last})" if last else ""))


def cli_env():
    env = {k: v for k, v in os.environ.items() if k not in ("GTM_API", "GTM_TOKEN", "GTM_DATA_DIR", "GTM_CA_FILE")}
    env["NO_COLOR"] = "1"
    return env


def gtm(data_dir, *args, timeout=60):
    p = subprocess.run([GTM_BIN, "--data-dir", data_dir, *args], capture_output=True, text=True,
                       timeout=timeout, env=cli_env())
    if p.returncode != 0:
        raise RuntimeError(f"gtm {' '.join(args)} (data dir {data_dir}) exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p.stdout.strip()


def dns_query(port, name, qtype=1):
    """One UDP query to 127.0.0.1:port; the response's rcode and answer count."""
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    q += struct.pack(">HH", qtype, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.sendto(q, ("127.0.0.1", port))
        data, _ = s.recvfrom(4096)
    rid, flags, _, ancount = struct.unpack(">HHHH", data[:8])
    if rid != qid:
        raise ValueError("response to another query")
    return flags & 0xF, ancount


CONFIG = """\
[[datacenter]]
name = "dc1"

[[check]]
name = "api"
type = "tcp"
port = {api_port}
interval = "1s"
timeout = "500ms"

[[domain]]
name = "monitoring.test"
ttl = 30
nameservers = ["ns1.monitoring.test"]

[[domain.record]]
name = "www"
type = "A"
fail_safe = ["127.0.0.99"]
addresses = [{{ ip = "127.0.0.1", dc = "dc1", hc = "check:api" }}]
topology_rules = [{{ client = "127.0.0.0/8", address = "127.0.0.1" }}]
"""


def parse_exposition(text):
    """(names in TYPE lines, {sample name: set of label names})."""
    typed, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                typed[parts[2]] = parts[3]
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s", line)
        if not m:
            continue
        labels = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', m.group(2) or ""))
        samples.setdefault(m.group(1), set()).update(labels)
    return typed, samples


def scrape_devices(tmp):
    """Starts and joins two devices, configures and queries them; returns
    each device's /metrics text."""
    if not (os.path.isfile(GTM_BIN) and os.access(GTM_BIN, os.X_OK)):
        raise RuntimeError(f"no gtm binary at {GTM_BIN} (set GTM_BIN)")
    devices = []
    for name in ("gtm1", "gtm2"):
        d = os.path.join(tmp, name)
        os.makedirs(d)
        dns_port, api_port = free_port(), free_port()
        while api_port == dns_port:
            api_port = free_port()
        with open(os.path.join(d, "node.toml"), "w") as f:
            f.write(f'name = "{name}"\ndatacenter = "dc1"\ndata_dir = "{d}"\n'
                    f'dns_listen = ["127.0.0.1:{dns_port}"]\napi_listen = "127.0.0.1:{api_port}"\n')
        log = open(os.path.join(d, "log"), "w")
        env = cli_env()
        env.setdefault("GTM_LOG", "warn")
        p = subprocess.Popen([GTM_BIN, "serve", "--config", os.path.join(d, "node.toml")], cwd=d,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        started.append(p)
        info(f"started {name} (pid {p.pid}): DNS 127.0.0.1:{dns_port}, API 127.0.0.1:{api_port}")
        devices.append({"name": name, "dir": d, "dns": dns_port, "api": api_port, "proc": p})

    for dev in devices:
        url = f"http://127.0.0.1:{dev['api']}/health"

        def up(dev=dev, url=url):
            if dev["proc"].poll() is not None:
                raise RuntimeError(f"{dev['name']} exited {dev['proc'].returncode}; see {dev['dir']}/log")
            return http_get(url, timeout=2)[0] == 200

        poll(f"{dev['name']} /health", up, timeout=60)

    a, b = devices
    gtm(a["dir"], "cluster", "init")
    token = gtm(a["dir"], "cluster", "token")
    gtm(b["dir"], "cluster", "join", f"http://127.0.0.1:{a['api']}", "--token", token, timeout=120)
    conf = os.path.join(tmp, "gtm.toml")
    with open(conf, "w") as f:
        f.write(CONFIG.format(api_port=a["api"]))
    gtm(a["dir"], "config", "apply", conf, timeout=120)
    info("cluster of gtm1 and gtm2 joined; configuration applied")

    # Until each device answers the record and exports every kind of series.
    wanted = [
        "gtm_record_status", "gtm_check_state", "gtm_record_answers_total",
        "gtm_address_answers_total", "gtm_topology_rule_answers_total",
        "gtm_probe_duration_seconds_bucket", "gtm_raft_quorum", "gtm_peer_reachable",
        "gtm_peer_report_age_seconds", "gtm_dns_responses_total",
    ]
    texts = {}
    for dev in devices:
        def ready(dev=dev):
            rcode, ancount = dns_query(dev["dns"], "www.monitoring.test")
            if rcode != 0 or ancount < 1:
                return None
            status, text = http_get(f"http://127.0.0.1:{dev['api']}/metrics")
            _, samples = parse_exposition(text)
            missing = [w for w in wanted if w not in samples]
            return text if status == 200 and not missing else None

        try:
            texts[dev["name"]] = poll(f"{dev['name']} answering and exporting {', '.join(wanted)}", ready,
                                      timeout=60, interval=0.5)
        except TimeoutError:
            # Report with what it does export.
            _, text = http_get(f"http://127.0.0.1:{dev['api']}/metrics")
            _, samples = parse_exposition(text)
            raise RuntimeError(f"{dev['name']} never exported samples of "
                               f"{', '.join(w for w in wanted if w not in samples)}")
        info(f"scraped {dev['name']}: {len(texts[dev['name']].splitlines())} lines")
    return texts


# ------------------------------------------------------------------ main


def main():
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    atexit.register(stop_devices)

    used = {}  # metric -> {where}
    labels_used = {}  # metric -> {label: where}

    def use(where, expr):
        for name, labels in selectors(expr):
            used.setdefault(name, set()).add(where)
            for label in labels:
                labels_used.setdefault(name, {}).setdefault(label, where)

    dash_exprs = dashboard_expressions()
    for where, expr in dash_exprs:
        use(f"grafana-dashboard.json {where}", expr)
    rule_exprs = yaml_values(RULES, "expr")
    for line, expr in rule_exprs:
        use(f"gtm-alerts.rules.yml:{line}", expr)
    test_series = yaml_values(TESTS, "series")
    for line, series in test_series:
        use(f"gtm-alerts.test.yml:{line}", series)
    for line, expr in yaml_values(TESTS, "expr"):
        use(f"gtm-alerts.test.yml:{line}", expr)
    alerts = check_alert_fields()
    info(f"{len(dash_exprs)} dashboard expressions, {len(rule_exprs)} rule expressions "
         f"({len(set(alerts))} alerts), {len(test_series)} test series: {len(used)} metric names")
    if not dash_exprs or not rule_exprs or not alerts:
        fail("no expression found in the dashboard or the rules")

    run_promtool(dash_exprs)

    tmp = tempfile.mkdtemp(prefix="gtm-monitoring-")
    try:
        try:
            texts = scrape_devices(tmp)
        except (RuntimeError, TimeoutError, OSError, subprocess.TimeoutExpired) as e:
            fail(f"could not scrape running devices: {e}")
            for name in ("gtm1", "gtm2"):
                log = os.path.join(tmp, name, "log")
                if os.path.exists(log):
                    with open(log, errors="replace") as f:
                        tail = f.read().splitlines()[-15:]
                    print(f"--- last lines of {name}'s log:\n" + "\n".join(tail))
            return finish()
    finally:
        stop_devices()
        if os.environ.get("GTM_CHECK_KEEP"):
            info(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    typed, samples = {}, {}
    for text in texts.values():
        t, s = parse_exposition(text)
        typed.update(t)
        for k, v in s.items():
            samples.setdefault(k, set()).update(v)

    def family(name):
        """The exported family a sample name belongs to, or None."""
        if name in typed or name in samples:
            return name
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[: -len(suffix)] if name.endswith(suffix) else None
            if base and typed.get(base) in ("histogram", "summary"):
                return base
        return None

    missing = []
    for name in sorted(used):
        if name in PROMETHEUS_SERIES:
            continue
        if family(name) is None:
            missing.append(name)
    for name in missing:
        where = sorted(used[name])
        fail(f"{name} is not exported by gtm; used in: " + "; ".join(where[:5]) + (" ..." if len(where) > 5 else ""))

    unchecked = []
    for name, labels in sorted(labels_used.items()):
        if name in PROMETHEUS_SERIES or name in missing:
            continue
        have = samples.get(name)
        if have is None:
            unchecked.append(name)
            continue
        for label, where in sorted(labels.items()):
            if label not in have and label not in TARGET_LABELS:
                fail(f"{name} has no label {label} (it has: {', '.join(sorted(have)) or 'none'}); used in {where}")
    if unchecked:
        info("labels not checked (no samples on a healthy device): " + ", ".join(unchecked))
    exported = sorted(n for n in used if n not in PROMETHEUS_SERIES and n not in missing)
    info(f"{len(exported)} gtm metric names used, all exported: {', '.join(exported)}")
    return finish()


def finish():
    if problems:
        print(f"\n{len(problems)} problem(s):")
        for p in problems:
            print(f"  - {p}")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
