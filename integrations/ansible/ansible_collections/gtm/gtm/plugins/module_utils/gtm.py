# -*- coding: utf-8 -*-
# Copyright gtm authors
# Apache License 2.0 (see the repository's Cargo.toml)
"""The REST API client the gtm modules share.

Every request goes through ansible's ``open_url`` with the device's API
token as a bearer token; an answer that is not 2xx becomes a ``GtmApiError``
carrying gtm's own error body (``error``, ``message``, ``errors``), so a
failed task says what gtm said, object path included.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import re
import uuid

from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import quote, urlencode
from ansible.module_utils.basic import env_fallback
from ansible.module_utils.urls import open_url
from ansible.module_utils.common.text.converters import to_native, to_text


def gtm_argument_spec():
    """The options every gtm module takes (doc fragment ``gtm.gtm.gtm``)."""
    return dict(
        url=dict(type='str', required=True, fallback=(env_fallback, ['GTM_API'])),
        token=dict(type='str', required=True, no_log=True,
                   fallback=(env_fallback, ['GTM_TOKEN'])),
        validate_certs=dict(type='bool', default=True),
        ca_path=dict(type='path', fallback=(env_fallback, ['GTM_CA'])),
        api_timeout=dict(type='int', default=60),
    )


class GtmApiError(Exception):
    """An answer of gtm that is not a success, or no answer at all."""

    def __init__(self, method, path, status=None, kind=None, message=None, errors=None):
        self.method = method
        self.path = path
        self.status = status
        self.kind = kind
        self.message = message or ''
        self.errors = list(errors or [])
        super(GtmApiError, self).__init__(self.text())

    def text(self):
        """gtm's words: its message, then every error it listed (each names
        the object path, e.g. ``check web: path "health" must start with /``)."""
        words = self.message
        listed = [e for e in self.errors if e and e not in words]
        if listed:
            words = '%s: %s' % (words, '; '.join(listed)) if words else '; '.join(listed)
        if self.status is None:
            return '%s %s: %s' % (self.method, self.path, words)
        return '%s %s: %s %s: %s' % (self.method, self.path, self.status, self.kind or 'error', words)

    def as_dict(self):
        return dict(status=self.status, error=self.kind, message=self.message, errors=self.errors)


def seg(value):
    """One path segment, percent-encoded (``@`` and ``*.app`` included)."""
    return quote(to_native(value), safe='')


class GtmClient:
    """A client of one device's ``/api/v1``."""

    def __init__(self, module):
        self.module = module
        params = module.params
        self.base = params['url'].rstrip('/')
        if self.base.endswith('/api/v1'):
            self.base = self.base[:-len('/api/v1')]
        self.token = params['token']
        self.validate_certs = params['validate_certs']
        self.ca_path = params.get('ca_path')
        self.timeout = params['api_timeout']
        # The ids of the commands this run sent (header x-gtm-command): after
        # an outcome-unknown answer, GET /api/v1/commands/{id} tells its fate.
        self.command_ids = []

    def request(self, method, path, body=None, query=None):
        """Sends one request; answers the decoded JSON body (None when empty).

        ``path`` is below ``/api/v1``. Raises ``GtmApiError`` for an answer
        that is not 2xx and for a device that cannot be reached."""
        full = '/api/v1' + path
        if query:
            full += '?' + urlencode(sorted((k, v) for k, v in query.items() if v is not None))
        headers = {
            'Authorization': 'Bearer %s' % self.token,
            'Accept': 'application/json',
        }
        data = None
        if body is not None:
            data = json.dumps(body)
            headers['Content-Type'] = 'application/json'
        if method in ('PUT', 'POST', 'PATCH', 'DELETE') and not (query or {}).get('dry_run'):
            command = uuid.uuid4().hex
            headers['x-gtm-command'] = command
            self.command_ids.append(command)
        try:
            resp = open_url(
                self.base + full,
                data=data,
                headers=headers,
                method=method,
                timeout=self.timeout,
                validate_certs=self.validate_certs,
                ca_path=self.ca_path,
                follow_redirects='none',
                http_agent='ansible-gtm',
            )
            raw = resp.read()
        except HTTPError as e:
            raise self._api_error(method, full, e)
        except URLError as e:
            raise GtmApiError(method, self.base + full,
                              message='cannot reach the gtm device: %s' % to_native(e.reason))
        except Exception as e:  # socket timeouts, TLS errors, ...
            raise GtmApiError(method, self.base + full,
                              message='cannot reach the gtm device: %s' % to_native(e))
        if not raw:
            return None
        try:
            return json.loads(to_text(raw))
        except ValueError:
            return to_text(raw)

    def _api_error(self, method, path, e):
        raw = b''
        try:
            raw = e.read()
        except Exception:
            pass
        kind, message, errors = None, None, []
        try:
            body = json.loads(to_text(raw))
            kind = body.get('error')
            message = body.get('message')
            errors = body.get('errors') or []
        except Exception:
            message = to_text(raw).strip() or to_native(e.reason)
        return GtmApiError(method, path, status=e.code, kind=kind, message=message, errors=errors)

    def get(self, path, missing_ok=False):
        """GET; with ``missing_ok`` a 404 ``not-found`` answers None."""
        try:
            return self.request('GET', path)
        except GtmApiError as e:
            if missing_ok and e.status == 404:
                return None
            raise


def fail(module, client, err, **result):
    """Fails the task with gtm's error text (and the error as gtm gave it in
    ``api_error``; ``command_ids`` for ``GET /api/v1/commands/{id}`` after
    an ``outcome-unknown`` answer)."""
    result = dict(result)
    result['changed'] = False  # a refused write changes nothing
    result['api_error'] = err.as_dict()
    result['command_ids'] = list(client.command_ids)
    module.fail_json(msg=err.text(), **result)


UNKNOWN_REFERENCE = re.compile(r'unknown [a-zA-Z ]+ "')


def depends_on_others(err):
    """Whether a dry run was refused only for want of another object: a
    target that does not exist (``not-found``), or a configuration whose
    every error is a reference to an unknown object (``unknown check
    "web"``: a write naming what does not exist yet, or a delete of what
    another object still names). An earlier task of the same play may make
    (or remove) that object, which check mode did not do."""
    if err.kind == 'not-found':
        return True
    return (err.kind == 'invalid-config' and bool(err.errors)
            and all(UNKNOWN_REFERENCE.search(e) for e in err.errors))


def dry_run_refused(module, client, err, diff=None, **result):
    """In check mode, a dry run refused: the task fails with gtm's words,
    unless the refusal is only for want of another object
    (``depends_on_others``): then it is reported as a change, with gtm's
    words as a warning."""
    if not depends_on_others(err):
        fail(module, client, err, **result)
    module.warn('check mode: gtm refuses this against its state as it is now (%s); it is '
                'reported as a change, since an earlier task of the play may make or remove '
                'what that names' % err.text())
    result = dict(result)
    result['changed'] = True
    if diff is not None and module._diff:
        result['diff'] = diff
    result['api_error'] = err.as_dict()
    result['command_ids'] = list(client.command_ids)
    module.exit_json(**result)


def clean(value):
    """Drops the keys whose value is None, in nested dicts and lists."""
    if isinstance(value, dict):
        return dict((k, clean(v)) for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def merge_patch(target, patch):
    """RFC 7396 JSON merge patch, as gtm applies a PATCH."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def ensure_object(module, client, path, body, label, identity=None):
    """Makes the configuration object at ``path`` present (with ``body``) or
    absent, idempotently, with check mode and diff mode.

    gtm's object routes answer an ``ApplyResult`` whose ``changes`` lists
    what differs, field by field, and is empty exactly when nothing changes:
    ``changed`` is read from it. In check mode the same write is sent with
    ``dry_run=true``: gtm validates it as it would apply it and lists the
    changes, changing nothing."""
    p = module.params
    state = p['state']
    query = {}
    if p.get('force'):
        query['force'] = 'true'
    result = dict(changed=False, changes=[])
    try:
        before = client.get(path, missing_ok=True)
    except GtmApiError as e:
        fail(module, client, e, **result)

    if state == 'absent':
        if before is None:
            module.exit_json(**result)
        deleted = dict(before=before, after={}, before_header=path,
                       after_header='%s (deleted)' % path)
        try:
            if module.check_mode:
                query['dry_run'] = 'true'
            answer = client.request('DELETE', path, query=query)
        except GtmApiError as e:
            if module.check_mode:
                dry_run_refused(module, client, e, diff=deleted, **result)
            fail(module, client, e, **result)
        result.update(_apply_result(answer, module.check_mode))
        result['changed'] = True
        result[label] = None
        if module._diff:
            result['diff'] = deleted
        result['command_ids'] = list(client.command_ids)
        module.exit_json(**result)

    method = 'PUT' if p.get('replace') else 'PATCH'
    try:
        if module.check_mode:
            query['dry_run'] = 'true'
        answer = client.request(method, path, body=body, query=query)
    except GtmApiError as e:
        if module.check_mode:
            after = _written(method, before, body, identity)
            dry_run_refused(module, client, e, diff=_diff(path, before, after), **result)
        fail(module, client, e, **result)
    result.update(_apply_result(answer, module.check_mode))
    changed = bool(result['changes'])
    result['changed'] = changed
    if module.check_mode:
        after = _written(method, before, body, identity)
    else:
        try:
            after = client.get(path, missing_ok=True) if changed else before
        except GtmApiError as e:
            fail(module, client, e, **result)
    result[label] = after if not module.check_mode else (after if changed else before)
    if module._diff and changed:
        result['diff'] = _diff(path, before, after)
    result['command_ids'] = list(client.command_ids)
    module.exit_json(**result)


def _written(method, before, body, identity):
    """The object a write would leave, computed here (check mode)."""
    if method == 'PUT':
        after = dict(body)
        if before and 'addresses' in before and 'addresses' not in body:
            after['addresses'] = before['addresses']
    else:
        after = merge_patch(before or {}, body)
    for key, value in (identity or {}).items():
        after.setdefault(key, before[key] if before and key in before else value)
    return after


def _diff(path, before, after):
    return dict(before=before or {}, after=after or {},
                before_header=path if before is not None else '%s (absent)' % path,
                after_header=path)


def _apply_result(answer, dry_run):
    answer = answer or {}
    out = dict(changes=answer.get('changes') or [],
               version=answer.get('version'))
    if not dry_run:
        out['installed'] = answer.get('installed', True)
    if answer.get('devices'):
        out['devices'] = answer['devices']
    return out


def norm_name(name):
    """A domain name as gtm compares it: lower case, no final dot."""
    if name is None:
        return None
    return to_text(name).strip().rstrip('.').lower()


def norm_record_label(label):
    """``WWW.example.test./a`` -> ``www.example.test/A`` (a view's type,
    ``A@internal``, keeps its view name)."""
    if label is None:
        return None
    label = to_text(label).strip()
    if '/' not in label:
        return label
    name, rtype = label.rsplit('/', 1)
    if '@' in rtype:
        t, view = rtype.split('@', 1)
        rtype = '%s@%s' % (t.upper(), view)
    else:
        rtype = rtype.upper()
    return '%s/%s' % (norm_name(name), rtype)


def norm_address(address):
    """An IP in its canonical form, or a CNAME target as a name."""
    if address is None:
        return None
    text = to_text(address).strip()
    try:
        import ipaddress
        return to_text(ipaddress.ip_address(text))
    except Exception:
        return norm_name(text)


def emptied_sentence(judgement):
    """The records a judgement (a dry run's ``devices``) says some device
    would answer with nothing, in gtm's own words (``drain datacenter dc1
    would leave 1 record(s) with no answer: www.example.test/A on gtm1,
    gtm2``); None when every device keeps an answer for every record."""
    by_record = {}
    for dev in (judgement or {}).get('devices') or []:
        name = dev.get('device')
        if dev.get('basis') == 'report' and dev.get('age_ms') is not None:
            name = '%s (judged from its report %d s old)' % (name, dev['age_ms'] // 1000)
        for record in dev.get('emptied') or []:
            by_record.setdefault(record, []).append(name)
    if not by_record:
        return None
    lines = ['%s on %s' % (r, ', '.join(by_record[r])) for r in sorted(by_record)]
    return '%s would leave %d record(s) with no answer: %s' % (
        judgement.get('action'), len(lines), '; '.join(lines))
