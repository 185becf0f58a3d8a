'''The octoDNS provider against a real gtm pair.

Two `gtm serve` processes on loopback, joined into a cluster (`gtm cluster
init`, `token`, `join`); the real `octodns-sync` and `octodns-dump` of the
venv at target/venv-integrations sync a YAML zone into gtm through the
first device and read it back through the second; dig asks both devices
what they answer, with and without a client subnet (ECS).

Run: python3 integrations/octodns/tests/test_provider.py
 or: python3 -m unittest discover -s integrations/octodns/tests -v

Environment: GTM_BIN (default <repository>/target/debug/gtm), GTM_VENV
(default <repository>/target/venv-integrations). Without the venv, its
octoDNS, the gtm binary or dig, the test is skipped, and fails when CI is
set. Every wait is a bounded poll; the devices and the health server are
stopped at the end, the devices by their PIDs.
'''

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PACKAGE))
GTM = os.environ.get('GTM_BIN', os.path.join(ROOT, 'target', 'debug', 'gtm'))
VENV = os.environ.get(
    'GTM_VENV', os.path.join(ROOT, 'target', 'venv-integrations')
)
SYNC = os.path.join(VENV, 'bin', 'octodns-sync')
DUMP = os.path.join(VENV, 'bin', 'octodns-dump')

# Loopback addresses of this test: the two devices and the values of the
# dynamic record (a health server listens on HEALTHY's address).
DEVICES = ('127.0.86.1', '127.0.86.2')
HEALTHY = '127.0.86.201'  # obeys its check: a server answers 200
UP = '127.0.86.202'  # status up: always answered
DEAD = '127.0.86.206'  # obeys its check: nothing listens, so it is down
BRANCH = '127.0.86.203'  # the branch pool, for clients in 10.1.0.0/16

WAIT = 45  # seconds, the bound of every poll


def missing(what):
    '''Skip, or fail when CI is set: CI must run this test.'''
    if os.environ.get('CI'):
        raise AssertionError(f'{what} (CI is set, so this fails)')
    raise unittest.SkipTest(what)


def free_port(host, udp_too=False):
    '''A port free on host for TCP (and UDP), found by binding port 0.'''
    for _ in range(50):
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        t.bind((host, 0))
        port = t.getsockname()[1]
        try:
            if udp_too:
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                try:
                    u.bind((host, port))
                except OSError:
                    continue
                finally:
                    u.close()
            return port
        finally:
            t.close()
    raise RuntimeError(f'no free port on {host}')


def poll(what, fn, timeout=WAIT, interval=0.2):
    '''fn() until it returns something true, at most timeout seconds.'''
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - kept for the message
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(
                f'{what}: not within {timeout} s (last: {last!r})'
            )
        time.sleep(interval)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        try:
            self.send_response(200)
            self.send_header('Content-Length', '2')
            self.end_headers()
            self.wfile.write(b'ok')
        except ConnectionError:
            pass  # the probe read its status and closed

    def log_message(self, *args):
        pass


class Device:
    def __init__(self, root, name, ip):
        self.name = name
        self.ip = ip
        self.dir = os.path.join(root, name)
        self.data = os.path.join(self.dir, 'data')
        os.makedirs(self.dir)
        self.dns_port = free_port(ip, udp_too=True)
        self.api = f'http://{ip}:{free_port(ip)}'
        self.node = os.path.join(self.dir, 'node.toml')
        with open(self.node, 'w') as f:
            f.write(
                textwrap.dedent(f'''\
                name = "{name}"
                datacenter = "dc1"
                data_dir = "{self.data}"
                dns_listen = ["{ip}:{self.dns_port}"]
                api_listen = "{self.api[len('http://'):]}"
                ''')
            )
        self.proc = None
        self.log = None

    def start(self):
        self.log = open(os.path.join(self.dir, 'serve.log'), 'wb')
        self.proc = subprocess.Popen(
            [GTM, 'serve', '--config', self.node],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
        if self.log:
            self.log.close()

    def token(self):
        with open(os.path.join(self.data, 'api-token')) as f:
            return f.read().strip()

    def healthy(self):
        with urllib.request.urlopen(f'{self.api}/health', timeout=2) as r:
            return r.status == 200

    def cli(self, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith('GTM')}
        out = subprocess.run(
            [GTM, '--data-dir', self.data, *args],
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        if out.returncode != 0:
            raise AssertionError(
                f'gtm {" ".join(args)} on {self.name}: exit '
                f'{out.returncode}\n{out.stdout}\n{out.stderr}'
            )
        return out.stdout

    def api_call(self, method, path, body=None):
        req = urllib.request.Request(
            f'{self.api}/api/v1{path}',
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                'Authorization': f'Bearer {self.token()}',
                'Content-Type': 'application/json',
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read().decode() or 'null')
        except urllib.error.HTTPError as e:
            raise AssertionError(
                f'{method} {path} on {self.name}: {e.code} '
                f'{e.read().decode(errors="replace")}'
            ) from None

    def dig(self, name, rtype, subnet=None):
        args = [
            'dig', '+short', '+time=2', '+tries=1',
            f'@{self.ip}', '-p', str(self.dns_port), name, rtype,
        ]  # fmt: skip
        if subnet:
            args.append(f'+subnet={subnet}')
        out = subprocess.run(
            args, capture_output=True, text=True, timeout=10,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if out.returncode != 0:
            raise AssertionError(f'dig {name} {rtype}: {out.stdout}{out.stderr}')
        return sorted(line for line in out.stdout.splitlines() if line)


ZONE = '''\
---
'':
  - type: CAA
    value: {flags: 0, tag: issue, value: letsencrypt.org}
  - type: MX
    value: {exchange: mail.octo.test., preference: 10}
  - ttl: 120
    type: NS
    values: [ns1.octo.test., ns2.octo.test.]
  - type: TXT
    values: ["v=spf1 -all", "k=a\\\\;b"]
_sip._tcp:
  type: SRV
  value: {port: 5060, priority: 10, target: sip.octo.test., weight: 20}
alias:
  type: CNAME
  value: www.octo.test.
static:
  ttl: 60
  type: A
  values: [192.0.2.1, 192.0.2.2]
v6:
  type: AAAA
  value: 2001:db8::1
www:
  dynamic:
    pools:
      branch:
        fallback: main
        values: [{status: up, value: BRANCH}]
      eu:
        fallback: main
        values: [{status: down, value: 127.0.86.204}, {status: up, value: 127.0.86.205}]
      main:
        values: [MAIN]
    rules:
      - pool: branch
        subnets: [10.1.0.0/16]
      - geos: [EU, NA-US-CA]
        pool: eu
      - pool: main
  octodns:
    healthcheck: {path: HCPATH, port: HCPORT, protocol: HTTP}
  ttl: 30
  type: A
  values: [192.0.2.99]
'''

MAIN_BEFORE = (
    '{value: HEALTHY, weight: 3}, {status: up, value: UP, weight: 1}, '
    '{value: DEAD, weight: 1}'
)
MAIN_AFTER = '{value: HEALTHY, weight: 1}, {status: up, value: UP, weight: 4}'

# Constructs gtm cannot express, each in a zone of its own.
BAD_ZONE = '''\
---
'':
  - ttl: 120
    type: NS
    values: [ns1.bad.test.]
www:
  dynamic:
    pools:
      asia:
        fallback: eu
        values: [{status: up, value: 192.0.2.30}]
      eu:
        fallback: us
        values: [{status: up, value: 192.0.2.10}]
      us:
        values: [{status: up, value: 192.0.2.10}, {status: up, value: 192.0.2.20}]
    rules:
      - geos: [AS]
        pool: asia
      - geos: [EU]
        pool: eu
      - pool: us
  type: A
  values: [192.0.2.99]
'''


class GtmProviderTest(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        if not (os.path.isfile(GTM) and os.access(GTM, os.X_OK)):
            missing(f'no gtm binary at {GTM} (set GTM_BIN)')
        for tool in (SYNC, DUMP):
            if not os.access(tool, os.X_OK):
                missing(
                    f'no {tool}: python3 -m venv {VENV} && {VENV}/bin/pip '
                    f'install -r {PACKAGE}/requirements-test.txt'
                )
        if shutil.which('dig') is None:
            missing('no dig (apt-get install bind9-dnsutils)')
        cls.tmp = tempfile.mkdtemp(prefix='octodns-gtm-test-')
        cls.devices = []
        cls.health = None
        try:
            cls._start()
        except BaseException:
            cls._stop()
            raise

    @classmethod
    def _start(cls):
        cls.hc_port = free_port(HEALTHY)
        cls.health = http.server.ThreadingHTTPServer(
            (HEALTHY, cls.hc_port), Health
        )
        threading.Thread(target=cls.health.serve_forever, daemon=True).start()

        cls.devices = [
            Device(cls.tmp, f'gtm{i + 1}', ip) for i, ip in enumerate(DEVICES)
        ]
        for d in cls.devices:
            d.start()
        for d in cls.devices:
            poll(f'{d.name} answers /health', d.healthy)
        first, second = cls.devices
        first.cli('cluster', 'init')
        token = first.cli('cluster', 'token').strip()
        second.cli('cluster', 'join', first.api, '--token', token)
        poll(
            'both devices are members',
            lambda: len(
                second.api_call('GET', '/cluster/status').get('members', [])
            )
            == 2,
        )

        cls.zones = os.path.join(cls.tmp, 'zones')
        os.makedirs(cls.zones)
        cls.config = os.path.join(cls.tmp, 'octodns.yaml')
        with open(cls.config, 'w') as f:
            f.write(
                textwrap.dedent(f'''\
                ---
                providers:
                  config:
                    class: octodns.provider.yaml.YamlProvider
                    directory: {cls.zones}
                  dump:
                    class: octodns.provider.yaml.YamlProvider
                    directory: {os.path.join(cls.tmp, 'dump')}
                  gtm:
                    class: octodns_gtm.GtmProvider
                    url: {first.api}
                    token: env/OCTODNS_GTM1_TOKEN
                    check_interval: 1s
                    check_timeout: 500ms
                    check_failures: 1
                    check_successes: 1
                  gtm2:
                    class: octodns_gtm.GtmProvider
                    url: {second.api}
                    token: env/OCTODNS_GTM2_TOKEN
                zones:
                  octo.test.:
                    sources: [config]
                    targets: [gtm]
                  bad.test.:
                    sources: [config]
                    targets: [gtm]
                  gtmonly.test.:
                    sources: [config]
                    targets: [gtm]
                  check.test.:
                    sources: [dump]
                    targets: [config]
                ''')
            )

    @classmethod
    def tearDownClass(cls):
        cls._stop()

    @classmethod
    def _stop(cls):
        for d in getattr(cls, 'devices', []):
            d.stop()
        if getattr(cls, 'health', None) is not None:
            cls.health.shutdown()
            cls.health.server_close()
        if os.environ.get('GTM_OCTODNS_KEEP'):
            print(f'kept {cls.tmp}', file=sys.stderr)
        elif getattr(cls, 'tmp', None):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    # ------------------------------------------------------------- helpers

    def octodns(self, tool, *args, ok=True):
        env = dict(os.environ)
        env['PYTHONPATH'] = PACKAGE + os.pathsep + env.get('PYTHONPATH', '')
        env['OCTODNS_GTM1_TOKEN'] = self.devices[0].token()
        env['OCTODNS_GTM2_TOKEN'] = self.devices[1].token()
        out = subprocess.run(
            [tool, '--config-file', self.config, *args],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
            cwd=self.tmp,
            stdin=subprocess.DEVNULL,
        )
        text = out.stdout + out.stderr
        if ok and out.returncode != 0:
            self.fail(f'{os.path.basename(tool)} {" ".join(args)}: exit {out.returncode}\n{text}')
        if not ok and out.returncode == 0:
            self.fail(f'{os.path.basename(tool)} {" ".join(args)} succeeded\n{text}')
        return text

    def write_zone(self, name, text):
        with open(os.path.join(self.zones, f'{name}yaml'), 'w') as f:
            f.write(text)

    def octo_zone(self, main, path='/_health'):
        text = ZONE.replace('MAIN', main).replace('HCPATH', path)
        for k, v in (
            ('HCPORT', str(self.hc_port)),
            ('HEALTHY', HEALTHY),
            ('UP', UP),
            ('DEAD', DEAD),
            ('BRANCH', BRANCH),
        ):
            text = text.replace(k, v)
        return text

    def on_both(self, what, name, rtype, want, subnet=None):
        for d in self.devices:
            poll(
                f'{d.name}: {what} ({name} {rtype} = {want})',
                lambda d=d: d.dig(name, rtype, subnet) == sorted(want),
            )

    def seen(self, device, name, rtype, subnet=None, n=40):
        got = set()
        for _ in range(n):
            got.update(device.dig(name, rtype, subnet))
        return got

    def shares(self, device):
        preview = device.api_call('GET', '/records/www.octo.test/A/preview')
        return {
            a['ip']: round(a['share'], 3)
            for a in preview['active']
            if a.get('share')
        }

    # --------------------------------------------------------------- test

    def test_sync_round_trip_and_refusals(self):
        first, second = self.devices
        # An object octoDNS does not manage, which every sync leaves alone.
        first.api_call(
            'PUT',
            '/domains/other.test',
            {
                'nameservers': ['ns1.other.test.'],
                'record': [
                    {'name': 'www', 'type': 'A', 'balance': 'priority',
                     'addresses': [{'ip': '192.0.2.50'}]},
                ],
            },
        )  # fmt: skip
        other = first.api_call('GET', '/domains/other.test')

        # 1. The first sync creates the domain, its records and the check.
        self.write_zone('octo.test.', self.octo_zone(MAIN_BEFORE))
        out = self.octodns(SYNC, '--doit', 'octo.test.')
        self.assertIn('Creates=9', out)

        self.on_both('static A', 'static.octo.test', 'A', ['192.0.2.1', '192.0.2.2'])
        self.on_both('AAAA', 'v6.octo.test', 'AAAA', ['2001:db8::1'])
        self.on_both('CNAME', 'alias.octo.test', 'CNAME', ['www.octo.test.'])
        self.on_both('MX', 'octo.test', 'MX', ['10 mail.octo.test.'])
        self.on_both('CAA', 'octo.test', 'CAA', ['0 issue "letsencrypt.org"'])
        self.on_both('SRV', '_sip._tcp.octo.test', 'SRV', ['10 20 5060 sip.octo.test.'])
        self.on_both('TXT', 'octo.test', 'TXT', ['"k=a;b"', '"v=spf1 -all"'])
        self.on_both('NS', 'octo.test', 'NS', ['ns1.octo.test.', 'ns2.octo.test.'])
        # The subnet rule: a client in 10.1.0.0/16 (ECS) gets the branch pool.
        self.on_both('subnet rule', 'www.octo.test', 'A', [BRANCH], subnet='10.1.2.0/24')
        # The weighted catch-all pool, once the health checks decided: the
        # value whose check fails is left out, the others by weight.
        for d in self.devices:
            poll(
                f'{d.name}: weighted pool without the dead value',
                lambda d=d: self.seen(d, 'www.octo.test', 'A', '192.0.2.0/24')
                == {HEALTHY, UP},
            )
            poll(
                f'{d.name}: shares 3:1',
                lambda d=d: self.shares(d) == {HEALTHY: 0.75, UP: 0.25},
            )
        # The geo rule, as configured (without a GeoIP database no client
        # has a continent or subdivision, so DNS cannot show it).
        for d in self.devices:
            rec = d.api_call('GET', '/domains/octo.test/records/www/A')
            self.assertEqual(
                rec['topology_rules'],
                [
                    {'client': '10.1.0.0/16', 'group': 'branch'},
                    {'client': 'continent:EU', 'group': 'eu'},
                    {'client': 'subdivision:US-CA', 'group': 'eu'},
                ],
            )
            hcs = {a['ip']: a.get('hc', 'static') for a in rec['addresses']}
            self.assertEqual(hcs[DEAD], 'check:octodns-A-www.octo.test')
            self.assertEqual(hcs['127.0.86.204'], 'disabled')
            self.assertEqual(hcs[UP], 'static')

        # 2. A second sync plans nothing.
        out = self.octodns(SYNC, 'octo.test.')
        self.assertIn('No changes were planned', out)

        # 3. octoDNS's dump of the second device reads back the same zone:
        # synced from the dump to the source YAML, it plans nothing.
        out = self.octodns(DUMP, '--output-dir', os.path.join(self.tmp, 'dump'), 'octo.test.', 'gtm2')
        with open(os.path.join(self.tmp, 'dump', 'octo.test.yaml')) as f:
            dumped = f.read()
        for text in ('10.1.0.0/16', 'NA-US-CA', 'fallback: main', 'status: obey',
                     f'port: {self.hc_port}', 'path: /_health'):  # fmt: skip
            self.assertIn(text, dumped)
        os.rename(
            os.path.join(self.tmp, 'dump', 'octo.test.yaml'),
            os.path.join(self.tmp, 'dump', 'check.test.yaml'),
        )
        self.write_zone('check.test.', self.octo_zone(MAIN_BEFORE))
        out = self.octodns(SYNC, 'check.test.')
        self.assertIn('No changes were planned', out)

        # 4. A change: a value removed from a static record and from the
        # pool, weights changed.
        self.write_zone(
            'octo.test.',
            self.octo_zone(MAIN_AFTER).replace('[192.0.2.1, 192.0.2.2]', '[192.0.2.1]'),
        )
        out = self.octodns(SYNC, '--doit', 'octo.test.')
        self.assertIn('Updates=2', out)
        self.on_both('value removed', 'static.octo.test', 'A', ['192.0.2.1'])
        for d in self.devices:
            poll(
                f'{d.name}: shares 1:4',
                lambda d=d: self.shares(d) == {HEALTHY: 0.2, UP: 0.8},
            )
            rec = d.api_call('GET', '/domains/octo.test/records/www/A')
            self.assertNotIn(DEAD, [a['ip'] for a in rec['addresses']])
        out = self.octodns(SYNC, 'octo.test.')
        self.assertIn('No changes were planned', out)

        # 5. Only the healthcheck changes: octoDNS does not compare it, the
        # provider does, and rewrites the check.
        self.write_zone(
            'octo.test.',
            self.octo_zone(MAIN_AFTER, path='/ready').replace('[192.0.2.1, 192.0.2.2]', '[192.0.2.1]'),
        )
        out = self.octodns(SYNC, '--doit', 'octo.test.')
        self.assertIn('Updates=1', out)
        check = first.api_call('GET', '/checks/octodns-A-www.octo.test')
        self.assertEqual(check['path'], '/ready')
        out = self.octodns(SYNC, 'octo.test.')
        self.assertIn('No changes were planned', out)

        # 6. What gtm cannot express is refused while planning, naming the
        # record and why; nothing is written.
        self.write_zone('bad.test.', BAD_ZONE)
        out = self.octodns(SYNC, '--doit', 'bad.test.', ok=False)
        self.assertIn('SupportsException', out)
        self.assertIn('www.bad.test. A dynamic', out)
        self.assertIn('value 192.0.2.10 is in pools "eu" and "us"', out)
        self.assertIn('pool "asia" falls back to \'eu\'', out)
        self.assertEqual(
            first.api_call('GET', '/names')['domains'].count('bad.test'), 0
        )

        # 7. What octoDNS cannot express is refused when reading gtm: a
        # record of priority balance with a datacenter.
        first.api_call(
            'PUT',
            '/domains/gtmonly.test',
            {
                'nameservers': ['ns1.gtmonly.test.'],
                'record': [
                    {'name': 'app', 'type': 'A', 'balance': 'priority',
                     'addresses': [{'ip': '192.0.2.60'}, {'ip': '192.0.2.61'}]},
                ],
            },
        )  # fmt: skip
        out = self.octodns(DUMP, '--output-dir', os.path.join(self.tmp, 'dump2'), 'gtmonly.test.', 'gtm', ok=False)
        self.assertIn('GtmUnsupported', out)
        self.assertIn('record app.gtmonly.test. A: balance priority', out)

        # 8. Removing the dynamic record removes its check too.
        text = self.octo_zone(MAIN_AFTER).replace('[192.0.2.1, 192.0.2.2]', '[192.0.2.1]')
        text = text[: text.index('www:\n')]
        self.write_zone('octo.test.', text.replace('  value: www.octo.test.', '  value: static.octo.test.'))
        out = self.octodns(SYNC, '--doit', 'octo.test.')
        self.assertIn('Deletes=1', out)
        self.on_both('record removed', 'www.octo.test', 'A', [])
        self.assertNotIn(
            'octodns-A-www.octo.test', first.api_call('GET', '/names')['checks']
        )

        # The object octoDNS does not manage is as it was, on both devices.
        for d in self.devices:
            self.assertEqual(d.api_call('GET', '/domains/other.test'), other)


if __name__ == '__main__':
    unittest.main(verbosity=2)
