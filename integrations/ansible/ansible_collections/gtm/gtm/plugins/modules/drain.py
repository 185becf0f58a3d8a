#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright gtm authors
# Apache License 2.0 (see the repository's Cargo.toml)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: drain
short_description: Drain an address or a datacenter out of gtm's answers, or back
description:
  - >-
    Drains an address (of one record, or of every record) or every address of a datacenter
    out of gtm's answers, as if unhealthy, or undrains it, through
    C(PUT /api/v1/drain/address) and C(PUT /api/v1/drain/datacenter). A drain is replicated
    operator state: every device of the cluster applies it, and it survives restarts.
  - >-
    A drain is identified by what it names, as gtm's C(GET /api/v1/drains) lists it:
    an address with O(record) (that record only) or without it (every record), or a datacenter.
    An undrain names exactly one such drain (C(undrain 192.0.2.10) does not undo a drain of
    C(192.0.2.10) of one record).
  - >-
    Idempotent: the module reads the active drains first and does nothing when the drain
    is already as asked.
  - >-
    Check mode sends the drain with C(dry_run=true): gtm checks its target and judges it on
    every device (each record's answers now and after), changing nothing. A drain that would
    leave a record with no answer on some device fails in check mode as it would be refused,
    unless O(force=true).
  - Diff mode shows the drain's state before and after, and each device's answers of the
    records it changes (from gtm's dry run).
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
  address:
    description: An address (IP, or a CNAME record's target) to drain. Exactly one of
      O(address) and O(datacenter).
    type: str
  record:
    description: With O(address), only this record (C(www.example.test/A)); every record when
      not given.
    type: str
  datacenter:
    description: A datacenter, all of whose addresses are drained.
    type: str
  state:
    description: C(drained) takes it out of answers; C(undrained) puts it back.
    type: str
    choices: [drained, undrained]
    default: drained
  force:
    description: Drain even if some record is left with no answer on some device (gtm refuses
      that otherwise, naming the records and the devices).
    type: bool
    default: false
'''

EXAMPLES = r'''
- name: Take 192.0.2.10 out of www's answers
  gtm.gtm.drain:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    address: 192.0.2.10
    record: www.example.test/A

- name: Drain a whole datacenter for maintenance
  gtm.gtm.drain:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    datacenter: dc1

- name: And back
  gtm.gtm.drain:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    datacenter: dc1
    state: undrained
'''

RETURN = r'''
drain:
  description: The active drain after the task (as gtm lists it in C(GET /api/v1/drains),
    with who made it and when), or null when it is not drained.
  returned: always
  type: dict
  sample: {"address": "192.0.2.10", "record": "www.example.test/A", "actor": {"user": "admin", "device": "gtm1"}, "time_ms": 1796556613477}
records:
  description: The records the drain changed, with their state after it (gtm's RecordView list).
  returned: when a drain or undrain was applied
  type: list
  elements: dict
judgement:
  description: gtm's dry run, each device's answers of the records the change touches, now
    and after (C(action), C(devices)).
  returned: in check mode and diff mode, when a change is needed
  type: dict
command_ids:
  description: The command ids of the writes sent.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gtm.gtm.plugins.module_utils.gtm import (
    GtmApiError, GtmClient, dry_run_refused, emptied_sentence, fail, gtm_argument_spec,
    norm_address, norm_record_label,
)


def matches(drain, p):
    if p['datacenter'] is not None:
        return drain.get('datacenter') == p['datacenter'] and not drain.get('address')
    if drain.get('datacenter') or drain.get('address') is None:
        return False
    return (norm_address(drain['address']) == norm_address(p['address'])
            and norm_record_label(drain.get('record')) == norm_record_label(p['record']))


def answers(judgement, side):
    """{device: {record: [addresses]}} of one side (``before``/``after``) of a
    judgement; a record answering its fail-safe values says so."""
    out = {}
    for dev in (judgement or {}).get('devices') or []:
        records = {}
        for change in dev.get('changes') or []:
            set_ = change.get(side) or {}
            addrs = list(set_.get('addresses') or [])
            if set_.get('fail_safe'):
                addrs.append('(fail-safe)')
            records[change.get('record')] = addrs
        if records or dev.get('basis') != 'now':
            entry = records
            if dev.get('basis') != 'now':
                entry = dict(records, **{'(judged from)': '%s%s' % (
                    dev.get('basis'), (': %s' % dev['why']) if dev.get('why') else '')})
            out[dev.get('device')] = entry
    return out


def main():
    spec = gtm_argument_spec()
    spec.update(
        address=dict(type='str'),
        record=dict(type='str'),
        datacenter=dict(type='str'),
        state=dict(type='str', default='drained', choices=['drained', 'undrained']),
        force=dict(type='bool', default=False),
    )
    module = AnsibleModule(
        argument_spec=spec,
        supports_check_mode=True,
        mutually_exclusive=[('address', 'datacenter'), ('record', 'datacenter')],
        required_one_of=[('address', 'datacenter')],
    )
    p = module.params
    client = GtmClient(module)
    want = p['state'] == 'drained'
    result = dict(changed=False)

    if p['datacenter'] is not None:
        route = '/drain/datacenter'
        body = dict(datacenter=p['datacenter'], drained=want)
        what = dict(datacenter=p['datacenter'])
    else:
        route = '/drain/address'
        body = dict(address=p['address'], drained=want)
        if p['record'] is not None:
            body['record'] = p['record']
        what = dict(address=p['address'], record=p['record'])
    # The drain in gtm's words (its dry run's `action`).
    if p['datacenter'] is not None:
        target = 'datacenter %s' % p['datacenter']
    elif p['record'] is not None:
        target = '%s of %s' % (norm_address(p['address']), norm_record_label(p['record']))
    else:
        target = '%s (every record)' % norm_address(p['address'])
    phrase = '%s %s' % ('drain' if want else 'undrain', target)
    if p['force'] and want:
        body['force'] = True

    try:
        drains = client.get('/drains') or []
    except GtmApiError as e:
        fail(module, client, e, **result)
    current = next((d for d in drains if matches(d, p)), None)
    result['drain'] = current
    if (current is not None) == want:
        result['command_ids'] = []
        module.exit_json(**result)

    result['changed'] = True
    judgement = None
    if module.check_mode or module._diff:
        try:
            judgement = client.request('PUT', route, body=body, query=dict(dry_run='true'))
        except GtmApiError as e:
            if module.check_mode:
                dry_run_refused(module, client, e, diff=dict(
                    before=dict(what, drained=not want), after=dict(what, drained=want),
                    before_header=phrase, after_header=phrase), **result)
            fail(module, client, e, **result)
        result['judgement'] = judgement
        sentence = emptied_sentence(judgement)
        if module.check_mode and want and sentence and not p['force']:
            # What gtm answers the drain itself (409 conflict); its dry run
            # judges without refusing.
            result['changed'] = False
            module.fail_json(
                msg='%s; gtm refuses this drain unless force=true (check mode: judged by its '
                    'dry run, nothing was changed)' % sentence,
                **result)

    if module._diff:
        result['diff'] = dict(
            before=dict(what, drained=not want, answers=answers(judgement, 'before')),
            after=dict(what, drained=want, answers=answers(judgement, 'after')),
            before_header=(judgement or {}).get('action') or phrase,
            after_header=(judgement or {}).get('action') or phrase,
        )

    if not module.check_mode:
        try:
            result['records'] = client.request('PUT', route, body=body)
            drains = client.get('/drains') or []
        except GtmApiError as e:
            fail(module, client, e, **result)
        result['drain'] = next((d for d in drains if matches(d, p)), None)
    else:
        result['drain'] = dict(what) if want else None
    result['command_ids'] = list(client.command_ids)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
