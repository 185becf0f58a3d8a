#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright gtm authors
# Apache License 2.0 (see the repository's Cargo.toml)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: schedule
short_description: A scheduled operator action of gtm (a drain, an undrain, a check set, a resume)
description:
  - >-
    Adds a schedule (C(POST /api/v1/schedules)) or cancels one (C(DELETE /api/v1/schedules/ID)):
    an operator action that fires at O(at), and its reverse at O(until). Schedules are
    replicated: the cluster's leader fires each once, whichever device took it.
  - gtm gives a schedule a number when it is added and no name, so the module identifies a
    schedule by what it does and when. A schedule B(matches) when it is not cancelled, its
    action is the same (the same kind, target and O(action.drained)/O(action.state), as gtm
    lists it) and its times are the same.
  - An absolute time (RFC 3339 with its offset, C(2026-12-01T02:00:00Z)) is compared to the
    millisecond, whatever offset it is written with. Such a schedule stays matched after it
    fired (or failed), so a playbook run again later reports no change.
  - >-
    A relative time (C(+30m), from the receiving device's clock) names no instant: a schedule
    with a relative O(at) matches any schedule of the same action still waiting to fire (its
    action, or its reverse when it has O(until)) with an O(until) when one is given and
    without one otherwise. Running such a task again adds nothing while that schedule
    waits, and adds a new one once it has fired.
  - C(state=present) adds a schedule when none matches. C(state=absent) cancels every
    matching schedule that still has something to fire (or the one numbered O(id)); one that
    fired whole has nothing left to cancel and is left as it is.
  - O(force) is used when a schedule is added; it does not tell schedules apart.
  - Check mode adds with C(dry_run=true) (gtm checks the times and the action's target, and
    says what the action would change now on every device, adding nothing); a cancel in check
    mode is computed from the list of schedules. Diff mode shows the schedule before and after.
version_added: 0.1.0
author: gtm authors
extends_documentation_fragment:
  - gtm.gtm.gtm
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  state:
    description: C(present) adds the schedule unless one matches; C(absent) cancels the matching ones.
    type: str
    choices: [present, absent]
    default: present
  at:
    description: When the action fires, RFC 3339 with its offset (C(2026-12-01T02:00:00Z),
      C(2026-12-01T03:00:00+01:00)) or relative to the device's clock (C(+45s), C(+30m),
      C(+1h30m), C(+1d)). Required with C(state=present); with C(state=absent) and
      O(action), only schedules at that time are cancelled (any time when not given).
    type: str
  until:
    description: When the reverse fires (an undrain for a drain, the check's previous state for
      a check set; none for a resume), in the same forms as O(at).
    type: str
  action:
    description: What fires. Required unless O(id) is given.
    type: dict
    suboptions:
      kind:
        description: C(drain-address), C(drain-datacenter), C(check-set) (a manual check) or
          C(resume) (ends a manual-failback DR hold).
        type: str
        required: true
        choices: [drain-address, drain-datacenter, check-set, resume]
      address:
        description: C(drain-address), the address (IP or CNAME target).
        type: str
      record:
        description: C(drain-address), only this record (C(www.example.test/A)); C(resume),
          the record.
        type: str
      datacenter:
        description: C(drain-datacenter), the datacenter.
        type: str
      drained:
        description: The drain kinds, C(true) for a drain and C(false) for an undrain.
        type: bool
        default: true
      check:
        description: C(check-set), the manual check.
        type: str
      state:
        description: C(check-set), the state it is set to.
        type: str
        choices: [ok, error]
  id:
    description: With C(state=absent), the number of the schedule to cancel (as
      C(gtm schedule list) shows it), instead of O(action).
    type: int
  force:
    description: Add it even if its action would leave a record with no answer on some device
      now, and fire it even so at its time (without it, gtm refuses such a schedule, and skips
      such a firing).
    type: bool
    default: false
'''

EXAMPLES = r'''
- name: Drain dc1 for the night of 1 December, and back two hours later
  gtm.gtm.schedule:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    at: "2026-12-01T02:00:00Z"
    until: "2026-12-01T04:00:00Z"
    action:
      kind: drain-datacenter
      datacenter: dc1

- name: Set the manual check maint to error in 30 minutes (added once while it waits)
  gtm.gtm.schedule:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    at: +30m
    action: { kind: check-set, check: maint, state: error }

- name: Cancel the night's drain
  gtm.gtm.schedule:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    state: absent
    at: "2026-12-01T02:00:00Z"
    action:
      kind: drain-datacenter
      datacenter: dc1

- name: Cancel schedule 7
  gtm.gtm.schedule:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    state: absent
    id: 7
'''

RETURN = r'''
schedule:
  description: The schedule added, or the first one matched (gtm's Schedule, C(id), C(at_ms),
    C(until_ms), C(what), C(state), ...); in check mode, gtm's dry run of the add
    (C(at), C(until), C(what), C(reverse), C(now), C(devices), C(warnings)).
  returned: with state=present
  type: dict
schedules:
  description: The schedules matched before the task (present), or those cancelled (absent).
  returned: always
  type: list
  elements: dict
warnings_gtm:
  description: What gtm's dry run warns of (what may differ when it fires).
  returned: in check mode, when a schedule would be added
  type: list
  elements: str
command_ids:
  description: The command ids of the writes sent.
  returned: always
  type: list
  elements: str
'''

import calendar
import re
from datetime import datetime, timedelta

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gtm.gtm.plugins.module_utils.gtm import (
    GtmApiError, GtmClient, clean, dry_run_refused, emptied_sentence, fail, gtm_argument_spec,
    norm_address, norm_record_label,
)

RFC3339 = re.compile(
    r'^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$')


def parse_time(text):
    """``('rel', None)`` for a relative time, ``('abs', ms)`` for RFC 3339,
    ``('unknown', None)`` for what gtm will judge (and likely refuse)."""
    if text is None:
        return None
    text = text.strip()
    if text.startswith('+'):
        return ('rel', None)
    m = RFC3339.match(text)
    if not m:
        return ('unknown', None)
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    frac = m.group(7) or '.0'
    ms = int((frac[1:] + '000')[:3])
    zone = m.group(8)
    try:
        naive = datetime(year, month, day, hour, minute, second)
    except ValueError:
        return ('unknown', None)
    seconds = calendar.timegm(naive.timetuple())
    if zone not in ('Z', 'z'):
        sign = 1 if zone[0] == '+' else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return ('abs', seconds * 1000 + ms)


def request_action(a):
    """The API's ScheduledAction from the module's option."""
    kind = a['kind']
    if kind == 'drain-address':
        return clean(dict(kind=kind, address=a['address'], record=a['record'], drained=a['drained']))
    if kind == 'drain-datacenter':
        return dict(kind=kind, datacenter=a['datacenter'], drained=a['drained'])
    if kind == 'check-set':
        return dict(kind=kind, check=a['check'], state=a['state'])
    return dict(kind=kind, record=a['record'])


def canon_request(a):
    kind = a['kind']
    if kind == 'drain-address':
        return ('drain', 'address', norm_address(a['address']), norm_record_label(a['record']),
                bool(a['drained']))
    if kind == 'drain-datacenter':
        return ('drain', 'datacenter', a['datacenter'], bool(a['drained']))
    if kind == 'check-set':
        return ('check-set', a['check'], a['state'])
    return ('resume', norm_record_label(a['record']))


def canon_stored(action):
    """The action of a listed schedule, as gtm's command carries it
    (``{"Drain": {"target": {"Address": {...}}, "drained": true}}``), else None."""
    if not isinstance(action, dict) or len(action) != 1:
        return None
    (name, body), = action.items()
    if not isinstance(body, dict):
        return None
    try:
        if name == 'Drain':
            target = body['target']
            if 'Address' in target:
                t = target['Address']
                return ('drain', 'address', norm_address(t['address']),
                        norm_record_label(t.get('record')), bool(body['drained']))
            if 'Datacenter' in target:
                return ('drain', 'datacenter', target['Datacenter']['name'], bool(body['drained']))
        if name == 'SetCheck':
            return ('check-set', body['check'], body['state'])
        if name == 'Resume':
            return ('resume', norm_record_label(body['record']))
    except (KeyError, TypeError, AttributeError):
        return None
    return None


def describe(a):
    """The action in gtm's words (``drain datacenter dc1``): compared with a
    listed schedule's ``what`` when its action is in a form not known here."""
    kind = a['kind']
    if kind in ('drain-address', 'drain-datacenter'):
        verb = 'drain' if a['drained'] else 'undrain'
        if kind == 'drain-datacenter':
            return '%s datacenter %s' % (verb, a['datacenter'])
        if a['record']:
            return '%s %s of %s' % (verb, norm_address(a['address']), norm_record_label(a['record']))
        return '%s %s (every record)' % (verb, norm_address(a['address']))
    if kind == 'check-set':
        return 'set check %s to %s' % (a['check'], a['state'])
    return 'resume %s' % norm_record_label(a['record'])


def waiting(s):
    """Still has something to fire: its action, or its reverse."""
    state = s.get('state')
    if state == 'pending':
        return True
    return state == 'fired' and s.get('until_ms') is not None and not s.get('reversed')


def same_action(s, a):
    stored = canon_stored(s.get('action'))
    if stored is not None:
        return stored == canon_request(a)
    return s.get('what') == describe(a)


def same_time(s, field, parsed):
    value = s.get(field)
    if parsed is None:
        return value is None
    kind, ms = parsed
    if kind == 'abs':
        return value == ms
    return value is not None and waiting(s)


def matching(schedules, a, at, until, times_required):
    """The schedules, not cancelled, of action ``a`` at those times. With
    ``times_required`` (adding) a time not given must be absent too (no
    ``until``); otherwise (cancelling) a time not given matches any."""
    out = []
    for s in schedules:
        if s.get('state') == 'cancelled' or not same_action(s, a):
            continue
        if (at is not None or times_required) and not same_time(s, 'at_ms', at):
            continue
        if (until is not None or times_required) and not same_time(s, 'until_ms', until):
            continue
        out.append(s)
    return out


def summary(s):
    """What a diff shows of a schedule."""
    if not s:
        return {}
    out = dict((k, s[k]) for k in ('id', 'what', 'at', 'until', 'reverse', 'state', 'force')
               if s.get(k) is not None)
    for field, ms in (('at', s.get('at_ms')), ('until', s.get('until_ms'))):
        if field not in out and ms is not None:
            out[field] = utc(ms)
    return out


def utc(ms):
    """Milliseconds since the epoch as gtm writes a time (RFC 3339, UTC)."""
    t = datetime(1970, 1, 1) + timedelta(milliseconds=ms)
    text = t.strftime('%Y-%m-%dT%H:%M:%S')
    if ms % 1000:
        text += '.%03d' % (ms % 1000)
    return text + 'Z'


def main():
    spec = gtm_argument_spec()
    spec.update(
        state=dict(type='str', default='present', choices=['present', 'absent']),
        at=dict(type='str'),
        until=dict(type='str'),
        action=dict(type='dict', options=dict(
            kind=dict(type='str', required=True,
                      choices=['drain-address', 'drain-datacenter', 'check-set', 'resume']),
            address=dict(type='str'),
            record=dict(type='str'),
            datacenter=dict(type='str'),
            drained=dict(type='bool', default=True),
            check=dict(type='str'),
            state=dict(type='str', choices=['ok', 'error']),
        ), required_if=[
            ('kind', 'drain-address', ('address',)),
            ('kind', 'drain-datacenter', ('datacenter',)),
            ('kind', 'check-set', ('check', 'state')),
            ('kind', 'resume', ('record',)),
        ]),
        id=dict(type='int'),
        force=dict(type='bool', default=False),
    )
    module = AnsibleModule(
        argument_spec=spec,
        supports_check_mode=True,
        required_if=[('state', 'present', ('at', 'action'))],
        required_one_of=[('action', 'id')],
        mutually_exclusive=[('action', 'id')],
    )
    p = module.params
    if p['id'] is not None and p['state'] == 'present':
        module.fail_json(msg='id names a schedule to cancel (state=absent); to add one, give at and action')
    client = GtmClient(module)
    result = dict(changed=False, schedules=[])
    try:
        schedules = client.get('/schedules') or []
    except GtmApiError as e:
        fail(module, client, e, **result)

    if p['state'] == 'absent':
        if p['id'] is not None:
            found = [s for s in schedules if s.get('id') == p['id']]
        else:
            at = parse_time(p['at'])
            until = parse_time(p['until'])
            if (at and at[0] == 'unknown') or (until and until[0] == 'unknown'):
                module.fail_json(msg='at/until: give RFC 3339 with its offset '
                                     '(2026-12-01T02:00:00Z) or a relative time (+30m)')
            found = matching(schedules, p['action'], at, until, times_required=False)
        cancel = [s for s in found if waiting(s)]
        result['schedules'] = cancel
        if not cancel:
            module.exit_json(**result)
        result['changed'] = True
        after = []
        for s in cancel:
            if module.check_mode:
                after.append(dict(summary(s), state='cancelled'))
                continue
            try:
                done = client.request('DELETE', '/schedules/%d' % s['id'])
            except GtmApiError as e:
                fail(module, client, e, **result)
            after.append(summary(done))
        if module._diff:
            result['diff'] = dict(
                before=dict(schedules=[summary(s) for s in cancel]),
                after=dict(schedules=after),
                before_header='schedules', after_header='schedules (cancelled)')
        result['command_ids'] = list(client.command_ids)
        module.exit_json(**result)

    action = p['action']
    body = dict(at=p['at'], action=request_action(action))
    if p['until'] is not None:
        body['until'] = p['until']
    if p['force']:
        body['force'] = True
    at = parse_time(p['at'])
    until = parse_time(p['until'])
    if at[0] == 'unknown' or (until and until[0] == 'unknown'):
        # A form this module does not read: gtm reads it (or says why not)
        # and its dry run gives the instants to compare.
        try:
            dry = client.request('POST', '/schedules', body=body, query=dict(dry_run='true'))
        except GtmApiError as e:
            fail(module, client, e, **result)
        at = ('abs', dry.get('at_ms'))
        until = ('abs', dry.get('until_ms')) if dry.get('until_ms') is not None else None
    found = matching(schedules, action, at, until, times_required=True)
    result['schedules'] = found
    if found:
        result['schedule'] = found[0]
        result['command_ids'] = []
        module.exit_json(**result)

    result['changed'] = True
    try:
        if module.check_mode:
            added = client.request('POST', '/schedules', body=body, query=dict(dry_run='true'))
            result['warnings_gtm'] = added.get('warnings') or []
            sentence = emptied_sentence(added.get('devices'))
            if sentence and not p['force']:
                # What gtm answers the add itself (409 conflict).
                result['schedule'] = added
                result['changed'] = False
                module.fail_json(
                    msg='if it fired now, %s; gtm refuses this schedule unless force=true '
                        '(check mode: judged by its dry run, nothing was added)' % sentence,
                    **result)
            for w in result['warnings_gtm']:
                module.warn('gtm: %s' % w)
            shown = dict(summary(added), force=p['force'] or None)
        else:
            added = client.request('POST', '/schedules', body=body)
            shown = summary(added)
    except GtmApiError as e:
        if module.check_mode:
            asked = clean(dict(what=describe(action), at=p['at'], until=p['until'],
                               force=p['force'] or None))
            dry_run_refused(module, client, e, diff=dict(
                before={}, after=asked, before_header='schedules (none matches)',
                after_header='schedule (dry run refused)'), **result)
        fail(module, client, e, **result)
    result['schedule'] = added
    if module._diff:
        result['diff'] = dict(before={}, after=clean(shown),
                              before_header='schedules (none matches)',
                              after_header='schedule %s' % (added.get('id', '(dry run)')))
    result['command_ids'] = list(client.command_ids)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
