#!/usr/bin/env python3
"""The gtm.gtm Ansible collection against a real pair of gtm devices.

Two `gtm serve` processes on loopback (random 127.x.y.z addresses, free
ports) are made a cluster (`gtm cluster init`, `cluster token`, `cluster
join`), given a datacenter pair and a domain, and then driven by real
`ansible-playbook` runs of the playbooks in tests/playbooks:

- site.yml in check mode on the empty pair makes nothing;
- site.yml through the first device makes a check, a record using it, a
  drain and two schedules; both devices show them (CLI `gtm --data-dir`,
  the API, and DNS answers);
- site.yml again (through the second device) changes nothing (changed=0);
- site-changed.yml with --check --diff shows its diff and changes nothing
  on either device; then without --check, through the second device, it
  changes what it says;
- teardown.yml in check mode removes nothing; then it removes everything
  (state absent, undrain), and again changes nothing;
- bad values fail their tasks with gtm's own error text.

Run: python3 integrations/ansible/tests/test_collection.py
     (or python3 -m unittest discover -s integrations/ansible/tests)
Env: GTM_BIN (default <repository>/target/debug/gtm), GTM_ANSIBLE_VENV
(default <repo>/target/venv-integrations: `python3 -m venv` it and
`pip install -r integrations/ansible/requirements-test.txt`),
GTM_TEST_VERBOSE=1 (print every playbook's output), GTM_KEEP_TMP=1 (keep
the devices' directories and logs). Without ansible the test is skipped,
unless CI is set: then it fails.
"""

import datetime
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
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(INTEGRATION))
PLAYBOOKS = os.path.join(HERE, 'playbooks')
GTM_BIN = os.environ.get('GTM_BIN', os.path.join(REPO, 'target', 'debug', 'gtm'))
VENV = os.environ.get('GTM_ANSIBLE_VENV', os.path.join(REPO, 'target', 'venv-integrations'))
ANSIBLE_PLAYBOOK = os.path.join(VENV, 'bin', 'ansible-playbook')

BASE_CONFIG = '''\
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
'''

RECAP = re.compile(
    r'^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)'
    r'\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)', re.M)


def eventually(what, fn, timeout=20.0, interval=0.2):
    """Polls fn until it answers something true, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # keep polling; report the last failure
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError('%s: not so within %.0f s (last: %r)' % (what, timeout, last))
        time.sleep(interval)


def free_port(ip, udp_too=False, attempts=50):
    """A port free on ip (TCP, and UDP with udp_too), found by binding port 0."""
    for _ in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((ip, 0))
            port = s.getsockname()[1]
        if port_free(ip, port, udp_too):
            return port
    raise RuntimeError('no free port on %s' % ip)


def port_free(ip, port, udp_too=False):
    kinds = [socket.SOCK_STREAM] + ([socket.SOCK_DGRAM] if udp_too else [])
    for kind in kinds:
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind((ip, port))
            except OSError:
                return False
    return True


def dns_query(ip, port, name, rtype=1, timeout=2.0):
    """One UDP query; answers (rcode, [(address, ttl)]) of its A records."""
    qid = random.randrange(65536)
    question = b''.join(bytes([len(label)]) + label.encode() for label in name.split('.')) + b'\0'
    packet = struct.pack('>HHHHHH', qid, 0, 1, 0, 0, 0) + question + struct.pack('>HH', rtype, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(packet, (ip, port))
        data, _ = s.recvfrom(65535)
    rid, flags, qd, an, _, _ = struct.unpack('>HHHHHH', data[:12])
    assert rid == qid, 'answer of another query'
    pos = 12

    def skip_name(pos):
        while True:
            n = data[pos]
            if n == 0:
                return pos + 1
            if n & 0xC0 == 0xC0:
                return pos + 2
            pos += n + 1

    for _ in range(qd):
        pos = skip_name(pos) + 4
    out = []
    for _ in range(an):
        pos = skip_name(pos)
        atype, _, ttl, rdlen = struct.unpack('>HHIH', data[pos:pos + 10])
        pos += 10
        if atype == 1 and rdlen == 4:
            out.append((socket.inet_ntoa(data[pos:pos + 4]), ttl))
        pos += rdlen
    return flags & 0xF, out


def dig(ip, port, name):
    """The A answers for name (sorted addresses and their TTLs): with dig when
    the machine has it, else with a query of our own."""
    if shutil.which('dig'):
        out = subprocess.run(
            ['dig', '@%s' % ip, '-p', str(port), '+time=2', '+tries=1', '+norecurse',
             name, 'A', '+noall', '+answer', '+comments'],
            capture_output=True, text=True, timeout=10).stdout
        status = re.search(r'status: (\w+)', out)
        answers = []
        for line in out.splitlines():
            fields = line.split()
            if len(fields) == 5 and fields[3] == 'A' and not line.startswith(';'):
                answers.append((fields[4], int(fields[1])))
        return (status.group(1) if status else None), sorted(answers)
    rcode, answers = dns_query(ip, port, name)
    return {0: 'NOERROR', 3: 'NXDOMAIN'}.get(rcode, str(rcode)), sorted(answers)


class Device:
    """One `gtm serve` on loopback, in a data directory of its own."""

    def __init__(self, root, name, ip, api_port, datacenter='dc1'):
        self.name = name
        self.ip = ip
        self.api_port = api_port
        self.dns_port = free_port(ip, udp_too=True)
        self.dir = os.path.join(root, name)
        self.url = 'http://%s:%d' % (ip, api_port)
        self.proc = None
        os.makedirs(self.dir)
        self.node_file = os.path.join(self.dir, 'node.toml')
        with open(self.node_file, 'w') as f:
            f.write('name = "%s"\ndatacenter = "%s"\ndata_dir = "%s"\n'
                    'dns_listen = ["%s:%d"]\napi_listen = "%s:%d"\n'
                    # Probes reach loopback only.
                    'probe_networks = ["127.0.0.0/8"]\nudp_workers = 1\n'
                    % (name, datacenter, self.dir, ip, self.dns_port, ip, api_port))

    def start(self):
        self.log = open(os.path.join(self.dir, 'log'), 'w')
        self.proc = subprocess.Popen(
            [GTM_BIN, 'serve', '--config', self.node_file],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
        self.log.close()

    def healthy(self):
        if self.proc.poll() is not None:
            raise AssertionError('%s exited (%s); its log:\n%s'
                                 % (self.name, self.proc.returncode, self.log_text()))
        try:
            with urllib.request.urlopen(self.url + '/health', timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_text(self):
        with open(os.path.join(self.dir, 'log')) as f:
            return f.read()[-4000:]

    @property
    def token(self):
        with open(os.path.join(self.dir, 'api-token')) as f:
            return f.read().strip()

    def cli(self, *args, ok=(0,)):
        """`gtm --data-dir DIR ARGS...`; answers (exit code, stdout, stderr)."""
        p = subprocess.run([GTM_BIN, '--data-dir', self.dir] + list(args),
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if ok is not None and p.returncode not in ok:
            raise AssertionError('gtm %s on %s: exit %d\n%s%s'
                                 % (' '.join(args), self.name, p.returncode, p.stdout, p.stderr))
        return p.returncode, p.stdout, p.stderr

    def json(self, *args):
        return json.loads(self.cli(*(args + ('--json',)))[1])

    def api(self, path):
        """GET /api/v1/PATH with this device's token: (status, body)."""
        req = urllib.request.Request(self.url + '/api/v1' + path,
                                     headers={'Authorization': 'Bearer ' + self.token})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b'null')
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b'null')

    def dig(self, name):
        return dig(self.ip, self.dns_port, name)


def ms_of(text):
    return int(datetime.datetime.fromisoformat(text).timestamp() * 1000)


class AnsibleCollectionOnAPair(unittest.TestCase):
    """The collection's modules through one device, seen on both."""

    @classmethod
    def setUpClass(cls):
        missing = []
        if not os.access(ANSIBLE_PLAYBOOK, os.X_OK):
            missing.append('ansible-playbook (%s; python3 -m venv %s && %s/bin/pip install -r %s)'
                           % (ANSIBLE_PLAYBOOK, VENV, VENV,
                              os.path.join(INTEGRATION, 'requirements-test.txt')))
        if not os.access(GTM_BIN, os.X_OK):
            missing.append('the gtm binary (%s; GTM_BIN names another)' % GTM_BIN)
        if missing:
            why = 'missing: ' + '; '.join(missing)
            if os.environ.get('CI'):
                raise AssertionError(why)
            raise unittest.SkipTest(why)

        cls.tmp = tempfile.mkdtemp(prefix='gtm-ansible-')
        cls.devices = []
        try:
            cls._start_pair()
        except BaseException:
            cls._stop_pair()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._stop_pair()

    @classmethod
    def _stop_pair(cls):
        for d in getattr(cls, 'devices', []):
            try:
                d.stop()
            except Exception as e:  # stop the others all the same
                print('stopping %s: %s' % (d.name, e), file=sys.stderr)
        if getattr(cls, 'tmp', None) and not os.environ.get('GTM_KEEP_TMP'):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def _start_pair(cls):
        # Two addresses of a random 127.x.y.0/24, one API port free on both:
        # the check web probes each device's /health on its own address.
        for _ in range(50):
            net = '127.%d.%d.' % (random.randrange(16, 250), random.randrange(1, 250))
            ip1, ip2 = net + '11', net + '12'
            port = free_port(ip1)
            if port_free(ip2, port):
                break
        else:
            raise RuntimeError('no API port free on two loopback addresses')
        cls.gtm1 = Device(cls.tmp, 'gtm1', ip1, port)
        cls.gtm2 = Device(cls.tmp, 'gtm2', ip2, port)
        for d in (cls.gtm1, cls.gtm2):
            cls.devices.append(d)
            d.start()
        for d in (cls.gtm1, cls.gtm2):
            eventually('%s answers /health' % d.name, d.healthy, timeout=30)

        cls.gtm1.cli('cluster', 'init')
        token = cls.gtm1.cli('cluster', 'token')[1].strip()
        cls.gtm2.cli('cluster', 'join', cls.gtm1.url, '--token', token)
        eventually('both devices are members on gtm2',
                   lambda: len(cls.gtm2.json('cluster', 'status').get('members', [])) == 2)

        base = os.path.join(cls.tmp, 'base.toml')
        with open(base, 'w') as f:
            f.write(BASE_CONFIG)
        cls.gtm1.cli('config', 'apply', base)
        for d in (cls.gtm1, cls.gtm2):
            eventually('%s has the domain' % d.name,
                       lambda d=d: d.api('/domains/example.test')[0] == 200)

        # Times of the schedules: a day from now, written with an offset of
        # +02:00 (the module compares instants, not texts).
        tz = datetime.timezone(datetime.timedelta(hours=2))
        start = (datetime.datetime.now(tz) + datetime.timedelta(days=1)).replace(microsecond=0)
        cls.at = start.isoformat()
        cls.until = (start + datetime.timedelta(hours=2)).isoformat()
        cls.later = (start + datetime.timedelta(hours=4)).isoformat()

        home = os.path.join(cls.tmp, 'ansible')
        os.makedirs(os.path.join(home, 'tmp'))
        cfg = os.path.join(home, 'ansible.cfg')
        with open(cfg, 'w') as f:
            f.write('[defaults]\nhome = %s\nlocal_tmp = %s/tmp\nremote_tmp = %s/tmp\n'
                    'retry_files_enabled = false\nnocows = true\n'
                    'interpreter_python = %s\n' % (home, home, home, os.path.join(VENV, 'bin', 'python')))
        env = dict((k, v) for k, v in os.environ.items() if not k.startswith('ANSIBLE_'))
        env.update(
            ANSIBLE_CONFIG=cfg,
            ANSIBLE_HOME=home,
            ANSIBLE_LOCAL_TEMP=os.path.join(home, 'tmp'),
            ANSIBLE_REMOTE_TEMP=os.path.join(home, 'tmp'),
            ANSIBLE_COLLECTIONS_PATH=INTEGRATION,
            ANSIBLE_NOCOLOR='1',
            ANSIBLE_FORCE_COLOR='0',
            ANSIBLE_DEPRECATION_WARNINGS='0',
            PYTHONWARNINGS='ignore',
        )
        env.pop('GTM_API', None)
        env.pop('GTM_TOKEN', None)
        cls.env = env

    # -- helpers -------------------------------------------------------

    def playbook(self, name, device, *flags, expect_rc=0):
        """Runs tests/playbooks/NAME through device; answers (output, recap)."""
        extra = dict(gtm_url=device.url, gtm_token=device.token,
                     ip1=self.gtm1.ip, ip2=self.gtm2.ip, probe_port=self.gtm1.api_port,
                     at_time=self.at, until_time=self.until, later_time=self.later)
        vars_file = os.path.join(self.tmp, 'vars-%s.json' % device.name)
        with open(vars_file, 'w') as f:
            json.dump(extra, f)
        cmd = [ANSIBLE_PLAYBOOK, '-i', 'localhost,', '-c', 'local', '-e', '@' + vars_file,
               os.path.join(PLAYBOOKS, name)] + list(flags)
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=300,
                           cwd=self.tmp, stdin=subprocess.DEVNULL)
        output = p.stdout + p.stderr
        recap = [line for line in output.splitlines() if RECAP.match(line)]
        sys.stderr.write('\n    ansible-playbook %s%s through %s: exit %d\n    %s\n'
                         % (name, ''.join(' ' + f for f in flags), device.name, p.returncode,
                            (recap or ['(no recap)'])[-1].strip()))
        if os.environ.get('GTM_TEST_VERBOSE'):
            sys.stderr.write('\n' + output)
        sys.stderr.flush()
        self.assertEqual(p.returncode, expect_rc, output)
        m = RECAP.search(output)
        self.assertIsNotNone(m, output)
        keys = ('ok', 'changed', 'unreachable', 'failed', 'skipped', 'rescued', 'ignored')
        return output, dict(zip(keys, (int(g) for g in m.groups())))

    def state_of(self, d):
        """What a device holds of what the playbooks manage."""
        rc, out, _ = d.cli('record', 'show', 'www.example.test', 'A', '--json', ok=(0, 5))
        record = json.loads(out) if rc == 0 else None
        status, web = d.api('/checks/web')
        schedules = [(s['what'], s['at_ms'], s.get('until_ms'), s['state'])
                     for s in d.json('schedule', 'list')]
        return dict(
            record=record,
            web=web if status == 200 else None,
            drains=[(x.get('address'), x.get('record'), x.get('datacenter'))
                    for x in d.json('record', 'drains')],
            schedules=sorted(schedules, key=repr),
        )

    def same_on_both(self, what, check, timeout=20):
        for d in (self.gtm1, self.gtm2):
            eventually('%s on %s' % (what, d.name), lambda d=d: check(d), timeout=timeout)

    # -- the test ------------------------------------------------------

    def test_collection(self):
        g1, g2 = self.gtm1, self.gtm2
        ip1, ip2 = g1.ip, g2.ip
        at_ms, until_ms, later_ms = ms_of(self.at), ms_of(self.until), ms_of(self.later)

        # 0. site.yml in check mode on the empty pair: every task would
        # change something, and nothing is made. The record names the check
        # web and the drain names the record, which the tasks before them
        # did not make in check mode: gtm's dry runs refuse them for that
        # alone, so they are reported as changes, with gtm's words.
        empty = self.state_of(g1)
        out, recap = self.playbook('site.yml', g1, '--check', '--diff')
        self.assertEqual((recap['changed'], recap['failed']), (6, 0), out)
        self.assertIn('check mode: gtm refuses this against its state as it is now', out)
        self.assertIn('unknown check "web"', out)
        time.sleep(1)
        self.assertEqual(self.state_of(g1), empty)
        self.assertEqual(self.state_of(g2), empty)
        self.assertEqual(empty, dict(record=None, web=None, drains=[], schedules=[]))

        # 1. site.yml through gtm1 makes everything.
        out, recap = self.playbook('site.yml', g1)
        self.assertEqual(recap['failed'], 0, out)
        self.assertEqual(recap['changed'], 6, out)

        def made(d):
            s = self.state_of(d)
            web = s['web'] or {}
            rec = s['record'] or {}
            return (web.get('type') == 'http' and web.get('port') == g1.api_port
                    and web.get('path') == '/health' and web.get('interval') == '5s'
                    and rec.get('ttl') == 60
                    and [a.get('ip') for a in rec.get('addresses', [])] == [ip1, ip2]
                    and all(a.get('hc') == 'check:web' for a in rec['addresses'])
                    and s['drains'] == [(ip2, 'www.example.test/A', None)]
                    and ('drain datacenter dc2', at_ms, until_ms, 'pending') in s['schedules']
                    and any(w == 'set check maint to error' and st == 'pending'
                            for w, _, _, st in s['schedules'])
                    and len(s['schedules']) == 2)
        self.same_on_both('the check, record, drain and schedules', made)
        self.assertEqual(g2.api('/checks/maint'), (200, {'name': 'maint', 'type': 'manual'}))
        # DNS on both devices: www answers the first address only (the
        # second is drained), with the TTL written.
        self.same_on_both('www answers %s alone, TTL 60' % ip1,
                          lambda d: d.dig('www.example.test') == ('NOERROR', [(ip1, 60)]))
        # Its check passes on both devices (each probes both addresses).
        def web_ok(d):
            states = dict((c.get('check'), c.get('state')) for c in d.json('status')['checks'])
            return states.get('web@' + ip1) == 'OK' and states.get('web@' + ip2) == 'OK'
        self.same_on_both('the check web passes for both addresses', web_ok, timeout=30)
        version = g1.json('status').get('version')
        before = self.state_of(g1)

        # 2. The same playbook again, through the other device: nothing changes.
        out, recap = self.playbook('site.yml', g2)
        self.assertEqual((recap['changed'], recap['failed']), (0, 0), out)
        self.assertEqual(self.state_of(g1), before)
        self.assertEqual(self.state_of(g2), before)

        # 3. A changed playbook in check mode with a diff: it says what would
        # change, and nothing does, on either device.
        out, recap = self.playbook('site-changed.yml', g1, '--check', '--diff')
        self.assertEqual((recap['changed'], recap['failed']), (4, 0), out)
        for line in ('-    "interval": "5s",', '+    "interval": "10s",',
                     '-    "ttl": 60,', '+    "ttl": 300,',
                     '-    "drained": true,', '+    "drained": false,',
                     '+    "until": "%s"' % utc(later_ms),
                     '+    "what": "drain datacenter dc2"'):
            self.assertIn(line, out)
        # The drain's diff is gtm's dry run, judged on both devices: www
        # would answer both addresses again on each.
        for device in ('gtm1', 'gtm2'):
            self.assertRegex(out, r'"%s": \{\s+"www.example.test/A": \[\s+-\s+"%s"\s+'
                                  r'\+\s+"%s",\s+\+\s+"%s"'
                             % (device, re.escape(ip1), re.escape(ip1), re.escape(ip2)))
        time.sleep(1)  # anything a dry run had done would show by now
        self.assertEqual(self.state_of(g1), before)
        self.assertEqual(self.state_of(g2), before)
        self.assertEqual(g2.json('status').get('version'), version)
        self.assertEqual(g2.dig('www.example.test'), ('NOERROR', [(ip1, 60)]))

        # ... and applied, through gtm2 (a follower forwards to the leader).
        out, recap = self.playbook('site-changed.yml', g2, '--diff')
        self.assertEqual((recap['changed'], recap['failed']), (4, 0), out)

        def changed(d):
            s = self.state_of(d)
            return ((s['web'] or {}).get('interval') == '10s'
                    and (s['web'] or {}).get('port') == g1.api_port
                    and (s['record'] or {}).get('ttl') == 300
                    and len(s['record']['addresses']) == 2
                    and s['drains'] == []
                    and ('drain datacenter dc2', at_ms, later_ms, 'pending') in s['schedules'])
        self.same_on_both('the changes', changed)
        self.same_on_both('www answers both addresses, TTL 300',
                          lambda d: d.dig('www.example.test') == ('NOERROR', [(ip1, 300), (ip2, 300)]))
        out, recap = self.playbook('site-changed.yml', g1)
        self.assertEqual((recap['changed'], recap['failed']), (0, 0), out)

        # 4. Bad values: the task fails with gtm's own words, naming the object.
        out, recap = self.playbook('bad-check.yml', g1, expect_rc=2)
        self.assertEqual(recap['failed'], 1, out)
        self.assertIn(escaped('check web: path "health" must start with /'), out)
        self.assertIn('422 invalid-config', out)
        out, recap = self.playbook('bad-values.yml', g1)
        self.assertEqual((recap['ignored'], recap['changed']), (7, 0), out)
        for words in ('domain example.test / record www A / address 1: unknown datacenter "dc9"',
                      'no datacenter named "dc7"',
                      'at: 2020-01-01 02:00:00 UTC is in the past',
                      'check \\"web\\": \\"10x\\": unknown unit \\"x\\" (use ms, s, m or h)'):
            self.assertIn(escaped(words) if '\\' not in words else words, out)
        # In check mode too: gtm's dry run refuses what the add would.
        self.assertIn('POST /api/v1/schedules?dry_run=true: 400 bad-request: '
                      'at: 2020-01-01 02:00:00 UTC is in the past', out)
        # A drain that would leave a record with no answer: refused by gtm
        # (409, naming the record on each device), and so in check mode.
        words = ('drain datacenter dc1 would leave 1 record(s) with no answer: '
                 'www.example.test/A on gtm1, gtm2')
        self.assertIn('PUT /api/v1/drain/datacenter: 409 conflict: ' + words, out)
        self.assertIn(words + '; gtm refuses this drain unless force=true (check mode', out)
        self.same_on_both('nothing changed by the refused values', changed)

        # 5. Teardown: in check mode it says what would go and nothing does;
        # then everything is gone on both devices; again, no change.
        kept = self.state_of(g1)
        out, recap = self.playbook('teardown.yml', g1, '--check', '--diff')
        self.assertEqual((recap['changed'], recap['failed']), (5, 0), out)
        self.assertIn('+++ after: /domains/example.test/records/www/A (deleted)', out)
        self.assertIn('+++ after: schedules (cancelled)', out)
        # The check web is named by www until the task before deletes it.
        self.assertIn('DELETE /api/v1/checks/web?dry_run=true: 422 invalid-config', out)
        time.sleep(1)
        self.assertEqual(self.state_of(g1), kept)
        self.assertEqual(self.state_of(g2), kept)

        out, recap = self.playbook('teardown.yml', g1, '--diff')
        self.assertEqual((recap['changed'], recap['failed']), (5, 0), out)

        def gone(d):
            s = self.state_of(d)
            return (s['record'] is None and s['web'] is None and s['drains'] == []
                    and d.api('/checks/maint')[0] == 404
                    and all(st == 'cancelled' for _, _, _, st in s['schedules'])
                    and len(s['schedules']) == 3)
        self.same_on_both('everything removed', gone)
        self.same_on_both('www answers NXDOMAIN',
                          lambda d: d.dig('www.example.test') == ('NXDOMAIN', []))
        self.assertEqual(g2.cli('check', 'show', 'web', ok=None)[0], 5)
        out, recap = self.playbook('teardown.yml', g2)
        self.assertEqual((recap['changed'], recap['failed']), (0, 0), out)


def escaped(text):
    """text as the default callback prints it inside a JSON string."""
    return json.dumps(text)[1:-1]


def utc(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


if __name__ == '__main__':
    unittest.main(verbosity=2)
