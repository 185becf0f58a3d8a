'''octoDNS provider for gtm, the clustered Global Traffic Manager.

The provider reads and writes gtm's configuration objects through its REST
API (``/api/v1``): a zone is a gtm domain, its records are the domain's
records, and the health checks of dynamic records are gtm checks. A sync
writes the checks it needs first, then the whole domain in one ``PUT
/api/v1/domains/{name}`` (one atomic command that leaves every other domain
and object untouched), then deletes the checks it no longer uses. The
mapping, and what each side cannot express, is in README.md.
'''

import json
import logging
import ssl
import urllib.error
import urllib.parse
import urllib.request
from ipaddress import ip_address, ip_network

from octodns.provider import ProviderException
from octodns.provider.base import BaseProvider
from octodns.record import Record, Update
from octodns.record.geo import GeoCodes
from octodns.record.geo_data import geo_data

__version__ = '0.1.0'

CONTINENTS = ('AF', 'AN', 'AS', 'EU', 'NA', 'OC', 'SA')
CHECK_PREFIX = 'octodns-'
# octoDNS healthcheck protocols and the gtm check types they become.
PROTOCOLS = {'HTTP': 'http', 'HTTPS': 'https', 'TCP': 'tcp', 'ICMP': 'icmp'}
CHECK_DEFAULT_PORT = {'http': 80, 'https': 443, 'tcp': 80}
# Check keys the provider sets from octoDNS or from its own settings.
CHECK_SETTINGS = ('interval', 'timeout', 'failures', 'successes')
CHECK_KEYS = {'name', 'type', 'port', 'path', 'host'} | set(CHECK_SETTINGS)
STATIC_TYPES = ('MX', 'TXT', 'SRV', 'CAA')
STEERED_TYPES = ('A', 'AAAA', 'CNAME')


class GtmApiError(ProviderException):
    '''gtm's API refused a request or could not be reached.'''


class GtmUnsupported(ProviderException):
    '''gtm's configuration holds something octoDNS cannot express.'''


def _fqdn(name):
    return name if name.endswith('.') else f'{name}.'


def check_name(fqdn, _type):
    '''The gtm check that probes the values of a dynamic record whose
    healthcheck is obeyed: ``octodns-A-www.example.test``.'''
    return f'{CHECK_PREFIX}{_type}-{fqdn.rstrip(".")}'


def geo_to_client(geo):
    '''octoDNS geo code → gtm topology rule client.'''
    parts = geo.split('-')
    if len(parts) == 1:
        return f'continent:{parts[0]}'
    if len(parts) == 2:
        return f'country:{parts[1]}'
    return f'subdivision:{parts[1]}-{parts[2]}'


def client_to_geo(client):
    '''gtm topology rule client → octoDNS geo code or subnet; the second
    item says which, None when octoDNS has no equivalent.'''
    kind, _, code = client.partition(':')
    if not code:
        try:
            return str(ip_network(client, strict=True)), 'subnet'
        except ValueError:
            return None, None
    if kind == 'continent' and code in CONTINENTS:
        return code, 'geo'
    if kind == 'country':
        for continent, countries in geo_data.items():
            if code in countries:
                return f'{continent}-{code}', 'geo'
        return None, None
    if kind == 'subdivision':
        country, _, province = code.partition('-')
        for continent, countries in geo_data.items():
            provinces = countries.get(country, {}).get('provinces') or {}
            if province in provinces:
                return f'{continent}-{country}-{province}', 'geo'
        return None, None
    return None, None


def dynamic_problems(pools, rules, healthcheck_host_unset=False):
    '''What gtm cannot express in an octoDNS ``dynamic`` block, in words.

    ``pools`` maps a pool name to ``{'fallback': str|None, 'values':
    [{'value', 'weight', 'status'}]}``; ``rules`` is the list of
    ``{'pool', 'subnets'?, 'geos'?}``, the last one the catch-all.
    '''
    problems = []
    if not rules:
        return ['it has no rules']
    catchall = rules[-1]['pool']
    for name in sorted(pools):
        pool = pools[name]
        fallback = pool.get('fallback')
        if name == catchall:
            if fallback is not None:
                problems.append(
                    f'pool "{name}" is the catch-all pool, so its fallback '
                    f'must be unset (gtm answers the record\'s values once '
                    f'none of its addresses is healthy), not "{fallback}"'
                )
        elif fallback != catchall:
            problems.append(
                f'pool "{name}" falls back to '
                f'{"the record values" if fallback is None else repr(fallback)}'
                f'; gtm answers the clients of a rule whose pool has no '
                f'healthy value from the catch-all pool, so write '
                f'fallback: {catchall}'
            )
        weights = {v['weight'] for v in pool['values']}
        if name != catchall and len(weights) > 1:
            problems.append(
                f'pool "{name}" weights its values unequally '
                f'({sorted(weights)}); gtm weighs only the catch-all pool '
                f'"{catchall}" (the other pools\' addresses have weight 0 so '
                f'that clients no rule holds are answered from the catch-all '
                f'pool)'
            )
    owner = {}
    for name in sorted(pools):
        for v in pools[name]['values']:
            value = str(v['value'])
            if value in owner:
                problems.append(
                    f'value {value} is in pools "{owner[value]}" and '
                    f'"{name}"; gtm keeps each value once, in one group'
                )
            else:
                owner[value] = name
    seen_geo_rule = None
    for i, rule in enumerate(rules[:-1], start=1):
        if rule.get('subnets') and seen_geo_rule:
            problems.append(
                f'rule {i} targets subnets after rule {seen_geo_rule} targets '
                f'geos; gtm answers a client by the closest place that holds '
                f'it (a subnet before any geo), not by rule order, so put '
                f'rules with subnets before every rule with geos'
            )
        if rule.get('geos'):
            seen_geo_rule = seen_geo_rule or i
    if healthcheck_host_unset:
        problems.append(
            'healthcheck host is null (each value its own Host); a gtm '
            'check sends the record\'s name or a fixed host'
        )
    return problems


class GtmProvider(BaseProvider):
    '''A gtm cluster as an octoDNS provider.

    .. code-block:: yaml

      providers:
        gtm:
          class: octodns_gtm.GtmProvider
          # Any device of the cluster: writes are forwarded to the leader.
          url: http://127.0.0.11:8053
          # A named token with the admin role (gtm token create octodns
          # --role admin), or a device's api-token file; a viewer token
          # is enough for octodns-dump and plans.
          token: env/GTM_TOKEN
          # Optional: the CA of a device with tls_cert (its api-ca.pem).
          # ca_file: /var/lib/gtm/api-ca.pem
          # Optional: the apex NS set of a domain the provider creates
          # when the zone has no root NS record.
          # nameservers: [ns1.example.com., ns2.example.com.]
          # Optional: the timing of the checks made for dynamic records
          # (gtm's defaults otherwise: 30s, 3s, 3, 2).
          # check_interval: 10s
          # check_timeout: 2s
          # check_failures: 3
          # check_successes: 2
          # Optional: apply a change that leaves a record with no answer
          # on some device (gtm refuses it otherwise).
          # force: false
          # Optional: seconds to wait for each API request.
          # timeout: 60
    '''

    SUPPORTS_GEO = False
    SUPPORTS_DYNAMIC = True
    SUPPORTS_DYNAMIC_SUBNETS = True
    SUPPORTS_POOL_VALUE_STATUS = True
    SUPPORTS_MULTIVALUE_PTR = False
    SUPPORTS_ROOT_NS = True
    SUPPORTS = {'A', 'AAAA', 'CAA', 'CNAME', 'MX', 'NS', 'SRV', 'TXT'}

    def __init__(
        self,
        id,
        url,
        token,
        ca_file=None,
        nameservers=None,
        check_interval=None,
        check_timeout=None,
        check_failures=None,
        check_successes=None,
        force=False,
        timeout=60,
        *args,
        **kwargs,
    ):
        self.log = logging.getLogger(f'GtmProvider[{id}]')
        super().__init__(id, *args, **kwargs)
        self.url = url.rstrip('/')
        self.token = token
        self.timeout = float(timeout)
        self.force = bool(force)
        self.nameservers = [_fqdn(n) for n in (nameservers or [])]
        self.check_settings = {
            k: v
            for k, v in (
                ('interval', check_interval),
                ('timeout', check_timeout),
                ('failures', check_failures),
                ('successes', check_successes),
            )
            if v is not None
        }
        self._ssl = None
        if self.url.startswith('https://'):
            self._ssl = ssl.create_default_context(cafile=ca_file)
        # Per zone, from the last populate: whether the domain exists, the
        # configuration version read before it, and each dynamic record's
        # check as configured (None when it has none).
        self._exists = {}
        self._versions = {}
        self._checks = {}

    # ------------------------------------------------------------------ API

    def _request(self, method, path, body=None, query=None, missing=False):
        url = f'{self.url}/api/v1{path}'
        if query:
            url = f'{url}?{urllib.parse.urlencode(query)}'
        data = None
        headers = {
            'Authorization': f'Bearer {self.token}',
            'Accept': 'application/json',
        }
        if body is not None:
            data = json.dumps(body).encode()
            headers['Content-Type'] = 'application/json'
        req = urllib.request.Request(
            url, data=data, method=method, headers=headers
        )
        self.log.debug('%s %s', method, url)
        try:
            with urllib.request.urlopen(
                req, timeout=self.timeout, context=self._ssl
            ) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors='replace')
            try:
                err = json.loads(text)
            except ValueError:
                err = {'error': str(e.code), 'message': text.strip()}
            if missing and e.code == 404:
                return None
            msg = f'{self.id}: {method} {path}: {e.code} {err.get("error")}: {err.get("message")}'
            if err.get('errors'):
                msg += ': ' + '; '.join(err['errors'])
            raise GtmApiError(msg) from None
        except (urllib.error.URLError, OSError) as e:
            raise GtmApiError(
                f'{self.id}: {method} {url}: cannot reach gtm: {e}'
            ) from None
        return json.loads(text) if text else None

    def _write(self, method, path, body, version):
        '''One write, a command of its own; compare-and-set on `version`
        when known. Returns the configuration version after it.'''
        query = {}
        if version is not None:
            query['version'] = str(version)
        if self.force:
            query['force'] = 'true'
        result = self._request(method, path, body=body, query=query)
        for line in result.get('changes') or []:
            self.log.info('gtm: %s', line)
        if result.get('installed') is False:
            self.log.warning(
                'gtm committed version %s but the device that answered does '
                'not serve it yet (see gtm status)',
                result.get('version'),
            )
        return result.get('version', version)

    def _version(self):
        history = self._request('GET', '/config/history') or []
        return history[0]['version'] if history else None

    # ------------------------------------------------------------- populate

    def populate(self, zone, target=False, lenient=False):
        self.log.debug('populate: name=%s, target=%s', zone.name, target)
        domain_name = zone.name.rstrip('.')
        version = self._version()
        domain = self._request(
            'GET', f'/domains/{_q(domain_name)}', missing=True
        )
        self._versions[zone.name] = version
        self._exists[zone.name] = domain is not None
        self._checks[zone.name] = {}
        if domain is None:
            return False
        checks = {c['name']: c for c in self._request('GET', '/checks')}

        problems = []
        if domain.get('topology_rules'):
            problems.append(
                f'domain {domain_name}: topology_rules apply to its records '
                f'and octoDNS has no zone-wide rules'
            )
        if domain.get('view'):
            problems.append(
                f'domain {domain_name}: answered only to view '
                f'"{domain["view"]}"; octoDNS zones have no views'
            )
        if problems:
            raise GtmUnsupported(f'{self.id}: ' + '; '.join(problems))

        before = len(zone.records)
        ns = domain.get('nameservers') or []
        if ns:
            record = Record.new(
                zone,
                '',
                {
                    'type': 'NS',
                    'ttl': domain.get('ttl', 30),
                    'values': [_fqdn(n) for n in ns],
                },
                source=self,
                lenient=lenient,
            )
            zone.add_record(record, lenient=lenient)
        for rec in domain.get('record') or []:
            data, check = self._record_data(zone, domain, rec, checks)
            name = '' if rec['name'] == '@' else rec['name']
            record = Record.new(
                zone, name, data, source=self, lenient=lenient
            )
            zone.add_record(record, lenient=lenient)
            if data.get('dynamic'):
                self._checks[zone.name][(name, rec['type'])] = check
        self.log.info(
            'populate: found %s records', len(zone.records) - before
        )
        return True

    def _record_data(self, zone, domain, rec, checks):
        '''A gtm record as octoDNS record data, and its check (dynamic
        records); GtmUnsupported when octoDNS cannot express it.'''
        _type = rec['type']
        fqdn = (
            zone.name
            if rec['name'] == '@'
            else f'{rec["name"]}.{zone.name}'
        )
        where = f'{self.id}: record {fqdn} {_type}'

        def refuse(what):
            raise GtmUnsupported(f'{where}: {what}')

        ttl = rec.get('ttl', domain.get('ttl', 30))
        if rec.get('view'):
            refuse(
                f'answered only to view "{rec["view"]}"; octoDNS has no views'
            )
        if _type in STATIC_TYPES:
            extra = sorted(set(rec) - {'name', 'type', 'ttl', 'values'})
            if extra:
                refuse(f'has {", ".join(extra)}, which octoDNS cannot express')
            value_type = Record.registered_types()[_type]._value_type
            values = []
            for text in rec.get('values') or []:
                try:
                    values.append(value_type.from_rdata_text(text))
                except Exception as e:
                    refuse(f'value {text!r} does not parse: {e}')
            return {'type': _type, 'ttl': ttl, 'values': values}, None
        if _type not in STEERED_TYPES:
            refuse(f'octoDNS has no {_type} records here')

        mode = rec.get('mode') or domain.get('mode') or 'standalone'
        if mode != 'standalone':
            refuse(
                f'mode {mode}: octoDNS has no disaster-recovery or '
                f'datacenter modes'
            )
        for key, default in (
            ('topology', False),
            ('nearest', False),
            ('on_no_healthy', 'empty'),
        ):
            if rec.get(key, default) != default:
                refuse(f'{key} = {json.dumps(rec[key])} has no octoDNS equivalent')
        for key in (
            'max_answers',
            'dr_condition',
            'dr_on_no_healthy',
            'failback',
        ):
            if key in rec:
                refuse(f'{key} = {json.dumps(rec[key])} has no octoDNS equivalent')
        known = {
            'name', 'type', 'ttl', 'addresses', 'balance', 'fail_safe',
            'topology_rules', 'mode', 'topology', 'nearest', 'on_no_healthy',
        }  # fmt: skip
        extra = sorted(set(rec) - known)
        if extra:
            refuse(f'has {", ".join(extra)}, which octoDNS cannot express')

        key = 'target' if _type == 'CNAME' else 'ip'
        addresses = rec.get('addresses') or []

        def value_of(a):
            v = a.get(key)
            if v is None:
                refuse(f'an address has no {key}')
            return _fqdn(v) if key == 'target' else str(ip_address(v))

        balance = rec.get('balance', 'round-robin')
        if balance == 'round-robin':
            for k in ('fail_safe', 'topology_rules'):
                if rec.get(k):
                    refuse(
                        f'{k} with round-robin balance: octoDNS expresses '
                        f'them only in dynamic records, which gtm writes with '
                        f'balance = "weighted"'
                    )
            values = []
            for a in addresses:
                extra = sorted(set(a) - {key, 'hc'})
                if extra or a.get('hc', 'static') != 'static':
                    what = ', '.join(
                        f'{k} {json.dumps(a[k])}'
                        for k in extra + (['hc'] if 'hc' in a else [])
                    )
                    refuse(
                        f'address {a.get(key)}: {what}: a plain octoDNS '
                        f'record has no datacenters, groups, weights or '
                        f'health (write a dynamic record)'
                    )
                values.append(value_of(a))
            if _type == 'CNAME':
                if len(values) != 1:
                    refuse(
                        f'{len(values)} targets; an octoDNS CNAME has one '
                        f'(several are a dynamic record)'
                    )
                return {'type': _type, 'ttl': ttl, 'value': values[0]}, None
            return {'type': _type, 'ttl': ttl, 'values': values}, None
        if balance != 'weighted':
            refuse(
                f'balance {balance}: octoDNS answers a record\'s values all '
                f'together or, in dynamic records, by weight'
            )
        return self._dynamic_data(
            fqdn, _type, ttl, rec, addresses, value_of, checks, refuse
        )

    def _dynamic_data(
        self, fqdn, _type, ttl, rec, addresses, value_of, checks, refuse
    ):
        name = check_name(fqdn, _type)
        groups = {}
        order = []
        status = {}
        for a in addresses:
            value = value_of(a)
            extra = sorted(
                set(a) - {'ip', 'target', 'group', 'weight', 'hc'}
            )
            if extra:
                refuse(
                    f'address {value}: {", ".join(extra)} has no octoDNS '
                    f'equivalent'
                )
            group = a.get('group')
            if not group:
                refuse(
                    f'address {value} has no group: each value of a '
                    f'dynamic record is in a pool, named by its group'
                )
            hc = a.get('hc', 'static')
            if hc == 'static':
                status[value] = 'up'
            elif hc == 'disabled':
                status[value] = 'down'
            elif hc == f'check:{name}':
                status[value] = 'obey'
            else:
                refuse(
                    f'address {value}: hc "{hc}": octoDNS values are up '
                    f'(static), down (disabled) or obey the record\'s '
                    f'healthcheck (check:{name})'
                )
            if group not in groups:
                groups[group] = []
                order.append(group)
            groups[group].append((value, a.get('weight', 1)))
        catchalls = [
            g for g in order if all(w > 0 for _, w in groups[g])
        ]
        mixed = [
            g
            for g in order
            if any(w > 0 for _, w in groups[g])
            and any(w == 0 for _, w in groups[g])
        ]
        if mixed:
            refuse(
                f'group {mixed[0]} mixes weight 0 with other weights; the '
                f'catch-all pool\'s addresses have weights of 1 or more, '
                f'the other pools\' 0'
            )
        if len(catchalls) != 1:
            refuse(
                f'{len(catchalls)} groups answer clients no rule holds '
                f'({", ".join(catchalls) or "none"}: weight above 0); '
                f'octoDNS has exactly one catch-all pool'
            )
        catchall = catchalls[0]
        pools = {}
        for g in order:
            pools[g] = {
                'values': [
                    {
                        'value': v,
                        'weight': w if g == catchall else 1,
                        'status': status[v],
                    }
                    for v, w in groups[g]
                ]
            }
            if g != catchall:
                pools[g]['fallback'] = catchall
        by_group = {}
        rule_order = []
        for i, r in enumerate(rec.get('topology_rules') or [], start=1):
            extra = sorted(set(r) - {'client', 'group', 'weight'})
            if extra or r.get('weight', 1) != 1 or not r.get('group'):
                refuse(
                    f'topology rule {i}: octoDNS rules send a place to a '
                    f'pool (group), without datacenter, address or weight'
                )
            if r['group'] not in groups:
                refuse(f'topology rule {i}: no address has group {r["group"]}')
            place, kind = client_to_geo(r['client'])
            if kind is None:
                refuse(
                    f'topology rule {i}: client {r["client"]} has no octoDNS '
                    f'equivalent (octoDNS matches subnets, continents, '
                    f'countries and US or Canadian provinces)'
                )
            if r['group'] not in by_group:
                by_group[r['group']] = {'pool': r['group']}
                rule_order.append(r['group'])
            key = 'subnets' if kind == 'subnet' else 'geos'
            by_group[r['group']].setdefault(key, []).append(place)
        rules = [by_group[g] for g in rule_order]
        # octoDNS's order: subnet-only rules, then subnets and geos, then
        # geo-only rules (gtm's own order does not depend on it).
        rules.sort(
            key=lambda r: 0
            if 'geos' not in r
            else (1 if 'subnets' in r else 2)
        )
        rules.append({'pool': catchall})
        for g in order:
            if g != catchall and g not in by_group:
                refuse(
                    f'group {g} has weight 0 and no topology rule answers '
                    f'from it, so it answers only when every other address '
                    f'is out; octoDNS has no such pool'
                )
        problems = dynamic_problems(pools, rules)
        if problems:
            refuse('; '.join(problems))
        defaults = [value_of({'ip': v, 'target': v}) for v in rec.get('fail_safe') or []]
        if not defaults:
            refuse(
                'no fail_safe: a dynamic octoDNS record\'s values are the '
                'record\'s fail-safe, answered when nothing is healthy'
            )
        data = {
            'type': _type,
            'ttl': ttl,
            'dynamic': {'pools': pools, 'rules': rules},
        }
        if _type == 'CNAME':
            if len(defaults) != 1:
                refuse('a dynamic CNAME has exactly one fail-safe value')
            data['value'] = defaults[0]
        else:
            data['values'] = defaults
        check = None
        if 'obey' in status.values():
            check = checks.get(name)
            if check is None:
                refuse(f'its addresses name check {name}, which is missing')
            extra = sorted(set(check) - CHECK_KEYS)
            if extra:
                refuse(
                    f'check {name} sets {", ".join(extra)}, which an octoDNS '
                    f'healthcheck cannot express'
                )
            protocol = {v: k for k, v in PROTOCOLS.items()}.get(check['type'])
            if protocol is None:
                refuse(
                    f'check {name} is of type {check["type"]}; octoDNS '
                    f'healthchecks are HTTP, HTTPS, TCP or ICMP'
                )
            healthcheck = {'protocol': protocol}
            if protocol in ('HTTP', 'HTTPS', 'TCP'):
                healthcheck['port'] = check.get(
                    'port', CHECK_DEFAULT_PORT[check['type']]
                )
            if protocol in ('HTTP', 'HTTPS'):
                healthcheck['path'] = check.get('path', '/')
                healthcheck['host'] = check.get('host', fqdn.rstrip('.'))
            data['octodns'] = {'healthcheck': healthcheck}
            check = {k: v for k, v in check.items() if k != 'name'}
        return data, check

    # ----------------------------------------------------------------- plan

    def supports(self, record):
        if record._type == 'NS' and record.name != '':
            return False
        return super().supports(record)

    def _process_desired_zone(self, desired):
        for record in list(desired.records):
            if record._type == 'NS' and record.name != '':
                self.supports_warn_or_except(
                    f'{record.fqdn} NS: gtm serves NS records only at the '
                    f'apex (the domain\'s nameservers); it does not delegate',
                    'omitting the record',
                )
                desired.remove_record(record)
                continue
            if not getattr(record, 'dynamic', None):
                continue
            hc = record.octodns.get('healthcheck', {})
            problems = dynamic_problems(
                {k: p.data for k, p in record.dynamic.pools.items()},
                [r.data for r in record.dynamic.rules],
                healthcheck_host_unset='host' in hc and not hc['host'],
            )
            obey = any(
                v['status'] == 'obey'
                for p in record.dynamic.pools.values()
                for v in p.data['values']
            )
            if obey and record.healthcheck_protocol not in PROTOCOLS:
                problems.append(
                    f'healthcheck protocol {record.healthcheck_protocol}: '
                    f'gtm probes HTTP, HTTPS, TCP and ICMP'
                )
            if problems:
                self.supports_warn_or_except(
                    f'{record.fqdn} {record._type} dynamic: '
                    + '; '.join(problems),
                    'falling back to the record\'s values without dynamic',
                )
                record = record.copy()
                record.dynamic = None
                desired.add_record(record, replace=True)
        if (
            not self._exists.get(desired.name)
            and not desired.root_ns
            and not self.nameservers
        ):
            raise ProviderException(
                f'{self.id}: zone {desired.name} is not a gtm domain yet, '
                f'and a new domain needs its nameservers: give the zone a '
                f'root NS record or the provider a nameservers list'
            )
        return super()._process_desired_zone(desired)

    def _desired_check(self, record):
        '''The gtm check a dynamic record's obeyed values need, or None.'''
        obey = any(
            v['status'] == 'obey'
            for p in record.dynamic.pools.values()
            for v in p.data['values']
        )
        if not obey:
            return None
        _type = PROTOCOLS[record.healthcheck_protocol]
        check = {'type': _type}
        if _type in ('http', 'https', 'tcp'):
            check['port'] = record.healthcheck_port
        if _type in ('http', 'https'):
            check['path'] = record.healthcheck_path
            check['host'] = record.healthcheck_host()
        check.update(self.check_settings)
        return check

    def _extra_changes(self, existing, desired, changes):
        '''Dynamic records whose check differs from what their healthcheck
        (and this provider's check settings) ask for: octoDNS compares
        values and rules, not healthchecks.'''
        changed = {(c.record.name, c.record._type) for c in changes}
        have = {(r.name, r._type): r for r in existing.records}
        checks = self._checks.get(desired.name, {})
        extra = []
        for record in desired.records:
            key = (record.name, record._type)
            if not getattr(record, 'dynamic', None) or key in changed:
                continue
            if key not in have:
                continue
            if self._desired_check(record) != checks.get(key):
                extra.append(Update(have[key], record))
        return extra

    # ---------------------------------------------------------------- apply

    def _gtm_record(self, record):
        '''An octoDNS record as a gtm record (JSON of the API).'''
        _type = record._type
        out = {'name': record.name or '@', 'type': _type, 'ttl': record.ttl}
        if _type in STATIC_TYPES:
            out['values'] = [v.to_rdata_text() for v in record.values]
            return out
        key = 'target' if _type == 'CNAME' else 'ip'
        defaults = [record.value] if _type == 'CNAME' else record.values
        dynamic = getattr(record, 'dynamic', None)
        if not dynamic:
            out['addresses'] = [{key: str(v)} for v in defaults]
            return out
        name = check_name(record.fqdn, _type)
        rules = [r.data for r in dynamic.rules]
        catchall = rules[-1]['pool']
        addresses = []
        for pool_name in sorted(dynamic.pools):
            for v in dynamic.pools[pool_name].data['values']:
                a = {key: str(v['value']), 'group': pool_name}
                a['weight'] = v['weight'] if pool_name == catchall else 0
                if v['status'] == 'down':
                    a['hc'] = 'disabled'
                elif v['status'] == 'obey':
                    a['hc'] = f'check:{name}'
                addresses.append(a)
        topology_rules = []
        for r in rules[:-1]:
            for subnet in r.get('subnets', []):
                topology_rules.append({'client': subnet, 'group': r['pool']})
            for geo in r.get('geos', []):
                topology_rules.append(
                    {'client': geo_to_client(geo), 'group': r['pool']}
                )
        out['balance'] = 'weighted'
        out['fail_safe'] = [str(v) for v in defaults]
        if topology_rules:
            out['topology_rules'] = topology_rules
        out['addresses'] = addresses
        return out

    def _apply(self, plan):
        desired = plan.desired
        domain_name = desired.name.rstrip('.')
        path = f'/domains/{_q(domain_name)}'
        self.log.info(
            '_apply: zone=%s, changes=%d', domain_name, len(plan.changes)
        )
        version = self._versions.get(desired.name)
        domain = self._request('GET', path, missing=True)
        if domain is None:
            domain = {'name': domain_name, 'nameservers': self.nameservers}
        before = [dict(r) for r in domain.pop('record', None) or []]
        records = {(r['name'], r['type']): r for r in before}

        for change in plan.changes:
            record = change.new or change.existing
            if record._type == 'NS' and record.name == '':
                if change.new is None:
                    raise ProviderException(
                        f'{self.id}: zone {desired.name}: a gtm domain '
                        f'always has nameservers; the root NS record can '
                        f'be changed but not deleted'
                    )
                domain['nameservers'] = [str(v) for v in change.new.values]
                domain['ttl'] = change.new.ttl
                continue
            key = (record.name or '@', record._type)
            if change.new is None:
                records.pop(key, None)
            else:
                records[key] = self._gtm_record(change.new)

        # The checks the records will name, written first so that the
        # domain's write finds them.
        wanted = {}
        for record in desired.records:
            if getattr(record, 'dynamic', None):
                check = self._desired_check(record)
                if check is not None:
                    wanted[check_name(record.fqdn, record._type)] = check
        configured = {c['name']: c for c in self._request('GET', '/checks')}
        for name, check in sorted(wanted.items()):
            current = configured.get(name)
            if current is not None:
                current = {k: v for k, v in current.items() if k != 'name'}
            if current != check:
                version = self._write(
                    'PUT', f'/checks/{_q(name)}', check, version
                )

        domain['record'] = list(records.values())
        version = self._write('PUT', path, domain, version)

        # Checks of this zone's records that no record names any more.
        def named(recs):
            return {
                a['hc'][len('check:') :]
                for r in recs
                for a in r.get('addresses') or []
                if a.get('hc', '').startswith(f'check:{CHECK_PREFIX}')
            }

        for name in sorted(named(before) - named(domain['record'])):
            if name in configured and name not in wanted:
                version = self._write(
                    'DELETE', f'/checks/{_q(name)}', None, version
                )


def _q(text):
    return urllib.parse.quote(text, safe='')
