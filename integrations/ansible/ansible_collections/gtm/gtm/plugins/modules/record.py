#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright gtm authors
# Apache License 2.0 (see the repository's Cargo.toml)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: record
short_description: A record of a gtm domain, with its addresses
description:
  - >-
    Creates, changes or deletes one record (a name and type) of a domain of gtm's replicated
    configuration through C(PUT)/C(PATCH)/C(DELETE /api/v1/domains/DOMAIN/records/NAME/TYPE).
    The write is one command of the cluster: every device applies it.
  - >-
    The options are the keys of a C([[domain.record]]) table (docs/configuration.md);
    gtm validates the result with the whole configuration, and a refused write changes
    nothing (the error names the record and the key, e.g.
    C(domain example.test / record www A / address 2: unknown datacenter "dc9")).
  - The domain must exist (write it with the configuration, C(gtm domain put) or the API).
  - Idempotent; C(changed) is true exactly when gtm lists changes.
  - Check mode sends the same write with C(dry_run=true)
    (gtm validates it, lists the changes and each device's answers now and after,
    applying nothing); diff mode shows the record before and after.
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
  domain:
    description: The domain (zone apex) the record belongs to.
    type: str
    required: true
  name:
    description:
      - The record's name relative to the domain (C(www), C(@) for the apex, C(*.app)).
      - A full name inside the domain (C(www.example.test)) is taken as its relative name.
    type: str
    required: true
  type:
    description: The record type. C(A), C(AAAA) and C(CNAME) are steered (O(addresses));
      the others are static (O(values)).
    type: str
    required: true
    choices: [A, AAAA, CNAME, MX, TXT, SRV, CAA]
  state:
    description: C(present) creates or changes the record; C(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  replace:
    description:
      - C(false) (the default) changes only the keys given and keeps the others, as
        C(gtm record put) does (a JSON merge patch).
      - >-
        C(true) writes the whole record, as C(gtm record put --replace): a key not given takes
        its default.
      - Either way, O(addresses) when given is the record's whole list of addresses (in answer
        order), and when not given the record keeps its addresses.
    type: bool
    default: false
  force:
    description: Apply even if the change leaves some record with no answer on some device
      (gtm refuses that otherwise, naming the records and the devices).
    type: bool
    default: false
  ttl:
    description: TTL of its answers (default the domain's).
    type: int
  mode:
    description: How candidates are chosen (default the domain's).
    type: str
    choices: [standalone, disaster-recovery, datacenter]
  balance:
    description: How answers are balanced among candidates (default C(round-robin)).
    type: str
    choices: [round-robin, weighted, random, priority, persist]
  max_answers:
    description: Addresses per answer (default all for round-robin/random, else 1).
    type: int
  dr_condition:
    description: C(automatic) or C(scenario:NAME) (C(always), C(never) built in).
    type: str
  dr_on_no_healthy:
    description: With a scenario condition, also switch when no Main address is healthy.
    type: bool
  failback:
    description: C(manual) keeps DR on until an operator resumes.
    type: str
    choices: [auto, manual]
  fail_safe:
    description: Values answered when nothing is healthy.
    type: list
    elements: str
  on_no_healthy:
    description: Without fail-safe values, C(empty) or C(all) when nothing is healthy.
    type: str
    choices: [empty, all]
  topology:
    description: Topological selection by the address's countries and continents.
    type: bool
  nearest:
    description: Answer clients from the nearest datacenter with a candidate.
    type: bool
  topology_rules:
    description: >-
      Topology rules (docs/topology.md), e.g. C({client: "10.20.0.0/16", datacenter: east}).
    type: list
    elements: dict
  view:
    description: The view whose clients alone get this record.
    type: str
  values:
    description: Static record data in zone-file syntax (MX, TXT, SRV, CAA), e.g. C(10 mail.example.test.).
    type: list
    elements: str
  addresses:
    description:
      - >-
        The record's addresses (A, AAAA, CNAME), in answer order. When given, this is the whole
        list: an address not in it is removed.
    type: list
    elements: dict
    suboptions:
      ip:
        description: The address (A, AAAA).
        type: str
      target:
        description: The target name (CNAME).
        type: str
      dc:
        description: Its datacenter (required in disaster-recovery and datacenter modes).
        type: str
      hc:
        description: C(static) (default), C(disabled), C(scenario:NAME) or C(check:NAME).
        type: str
      check:
        description: Shorthand for O(addresses[].hc=check:NAME), the check probed against this address.
        type: str
      weight:
        description: With C(balance=weighted) (default 1).
        type: int
      countries:
        description: With O(topology=true), the countries it answers.
        type: list
        elements: str
      continents:
        description: With O(topology=true), the continents it answers.
        type: list
        elements: str
      group:
        description: A name for a set of the record's addresses that topology rules answer from.
        type: str
'''

EXAMPLES = r'''
- name: www answers from two addresses, each probed by the check web
  gtm.gtm.record:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    domain: example.test
    name: www
    type: A
    ttl: 60
    balance: weighted
    addresses:
      - { ip: 192.0.2.10, dc: dc1, check: web, weight: 3 }
      - { ip: 192.0.2.11, dc: dc2, check: web }

- name: Disaster Recovery between two datacenters, manual failback
  gtm.gtm.record:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    domain: example.test
    name: app
    type: A
    mode: disaster-recovery
    failback: manual
    fail_safe: [198.51.100.9]
    addresses:
      - { ip: 192.0.2.20, dc: dc1, hc: "check:web" }
      - { ip: 192.0.2.30, dc: dc2, hc: "scenario:dc2-up" }

- name: Only the TTL changes; the addresses stay
  gtm.gtm.record:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    domain: example.test
    name: www
    type: A
    ttl: 300

- name: A static record
  gtm.gtm.record:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    domain: example.test
    name: "@"
    type: MX
    values: ["10 mail.example.test."]

- name: Delete a record
  gtm.gtm.record:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    domain: example.test
    name: www
    type: A
    state: absent
'''

RETURN = r'''
record:
  description: The record as configured after the task, with its addresses (as it would be
    in check mode); null once deleted.
  returned: always
  type: dict
  sample: {"name": "www", "type": "A", "ttl": 60, "addresses": [{"ip": "192.0.2.10", "dc": "dc1", "hc": "check:web"}]}
changes:
  description: gtm's field-level changes (empty when nothing changed).
  returned: always
  type: list
  elements: str
  sample: ['~ record www.example.test/A in domain example.test: ttl 60 → 300']
version:
  description: The configuration version after the write.
  returned: when a write was sent
  type: int
installed:
  description: Whether the device that answered serves the change already.
  returned: when a write was applied
  type: bool
devices:
  description: For a dry run, each device's answers of the records it touches, now and after
    (gtm's Judgement).
  returned: in check mode, when the change touches a steered record
  type: dict
command_ids:
  description: The command ids of the writes sent.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gtm.gtm.plugins.module_utils.gtm import (
    GtmClient, clean, ensure_object, gtm_argument_spec, norm_name, seg,
)

KEYS = (
    'ttl', 'mode', 'balance', 'max_answers', 'dr_condition', 'dr_on_no_healthy', 'failback',
    'fail_safe', 'on_no_healthy', 'topology', 'nearest', 'topology_rules', 'view', 'values',
)

ADDRESS_SPEC = dict(
    ip=dict(type='str'),
    target=dict(type='str'),
    dc=dict(type='str'),
    hc=dict(type='str'),
    check=dict(type='str'),
    weight=dict(type='int'),
    countries=dict(type='list', elements='str'),
    continents=dict(type='list', elements='str'),
    group=dict(type='str'),
)


def relative_name(name, domain):
    """``www.example.test`` in ``example.test`` -> ``www``; the apex -> ``@``."""
    full = norm_name(name)
    apex = norm_name(domain)
    if name.strip() == '@':
        return '@'
    if full == apex:
        return '@'
    if full.endswith('.' + apex):
        return name.strip().rstrip('.')[:-(len(apex) + 1)]
    return name.strip()


def main():
    spec = gtm_argument_spec()
    spec.update(
        domain=dict(type='str', required=True),
        name=dict(type='str', required=True),
        type=dict(type='str', required=True,
                  choices=['A', 'AAAA', 'CNAME', 'MX', 'TXT', 'SRV', 'CAA']),
        state=dict(type='str', default='present', choices=['present', 'absent']),
        replace=dict(type='bool', default=False),
        force=dict(type='bool', default=False),
        ttl=dict(type='int'),
        mode=dict(type='str', choices=['standalone', 'disaster-recovery', 'datacenter']),
        balance=dict(type='str', choices=['round-robin', 'weighted', 'random', 'priority', 'persist']),
        max_answers=dict(type='int'),
        dr_condition=dict(type='str'),
        dr_on_no_healthy=dict(type='bool'),
        failback=dict(type='str', choices=['auto', 'manual']),
        fail_safe=dict(type='list', elements='str'),
        on_no_healthy=dict(type='str', choices=['empty', 'all']),
        topology=dict(type='bool'),
        nearest=dict(type='bool'),
        topology_rules=dict(type='list', elements='dict'),
        view=dict(type='str'),
        values=dict(type='list', elements='str'),
        addresses=dict(type='list', elements='dict', options=ADDRESS_SPEC,
                       mutually_exclusive=[('ip', 'target'), ('hc', 'check')],
                       required_one_of=[('ip', 'target')]),
    )
    module = AnsibleModule(
        argument_spec=spec,
        supports_check_mode=True,
        mutually_exclusive=[('addresses', 'values')],
    )
    p = module.params
    client = GtmClient(module)
    body = clean(dict((k, p[k]) for k in KEYS))
    if p['addresses'] is not None:
        addresses = []
        for a in p['addresses']:
            a = dict(a)
            check = a.pop('check', None)
            if check is not None:
                a['hc'] = 'check:%s' % check
            addresses.append(clean(a))
        body['addresses'] = addresses
    name = relative_name(p['name'], p['domain'])
    path = '/domains/%s/records/%s/%s' % (seg(p['domain']), seg(name), seg(p['type']))
    ensure_object(module, client, path, body, 'record',
                  identity=dict(name=name, type=p['type']))


if __name__ == '__main__':
    main()
