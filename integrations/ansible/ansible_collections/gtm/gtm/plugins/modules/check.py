#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright gtm authors
# Apache License 2.0 (see the repository's Cargo.toml)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
module: check
short_description: A gtm health check (a C([[check]]) of the configuration)
description:
  - >-
    Creates, changes or deletes one check of gtm's replicated configuration through
    C(PUT)/C(PATCH)/C(DELETE /api/v1/checks/NAME). The write is one command of the cluster:
    every device applies it.
  - The options are the keys of a C([[check]]) table (docs/configuration.md); gtm validates
    the result with the whole configuration, and a refused write changes nothing.
  - Idempotent; C(changed) is true exactly when gtm lists changes.
  - Check mode sends the same write with C(dry_run=true)
    (gtm validates it and lists the changes, applying nothing); diff mode shows the check before
    and after.
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
  name:
    description: The check's name (unique; not C(always)/C(never), no C(@)).
    type: str
    required: true
  state:
    description:
      - C(present) creates or changes the check; C(absent) deletes it (refused, with gtm's
        error, while an address or a scenario uses it).
    type: str
    choices: [present, absent]
    default: present
  replace:
    description:
      - C(false) (the default) changes only the keys given and keeps every other key, as
        C(gtm check put) does (a JSON merge patch).
      - >-
        C(true) writes the whole check, as C(gtm check put --replace): a key not given takes
        its default.
    type: bool
    default: false
  force:
    description: Apply even if the change leaves some record with no answer on some device
      (gtm refuses that otherwise, naming the records and the devices).
    type: bool
    default: false
  type:
    description: How it probes. Required to create a check.
    type: str
    choices: [http, https, http2, tcp, tls, dns, icmp, grpc, exec, manual]
  target:
    description: A fixed target (an IP or a name); without it the check is a template probed
      against each address whose C(hc) is C(check:NAME).
    type: str
  port:
    description: Port (default 443 for https/tls, 53 for dns, else 80).
    type: int
  path:
    description: HTTP path; must start with C(/).
    type: str
  host:
    description: Host header and TLS name (default the record's name).
    type: str
  expect_status:
    description: Accepted HTTP statuses, e.g. C(200,204) or C(200-299,304) (default C(200-399)).
    type: str
  expect_body:
    description: A substring expected in the first 1,024 bytes of the body.
    type: str
  send:
    description: TCP/TLS request string.
    type: str
  expect:
    description: TCP/TLS exact expected response.
    type: str
  tls_verify:
    description: Verify the target's certificate (https, http2, tls, grpc).
    type: bool
  proxy_protocol:
    description: Send a PROXY v1 header first.
    type: bool
  reuse_connection:
    description: HTTP checks keep their connection open between probes.
    type: bool
  query_name:
    description: DNS checks, the name asked (required for them).
    type: str
  query_type:
    description: DNS checks, the type asked (default C(A)).
    type: str
  expect_rcode:
    description: DNS checks, the expected rcode (default C(NOERROR)).
    type: str
  expect_answer:
    description: DNS checks, a value the answer must contain.
    type: str
  service:
    description: gRPC checks, the grpc.health.v1 service name.
    type: str
  tls:
    description: gRPC checks over TLS.
    type: bool
  command:
    description: Exec checks, the program and its arguments (exit 0 is OK).
    type: list
    elements: str
  interval:
    description: Start to start, e.g. C(500ms), C(10s), C(2m) (default C(30s)).
    type: str
  timeout:
    description: A probe's timeout, at most C(interval) (default C(3s)). This is the check's
      key; the HTTP timeout of the module's own requests is O(api_timeout).
    type: str
  failures:
    description: Consecutive failures that make the check Error (default 3).
    type: int
  successes:
    description: Consecutive successes that make the check OK (default 2).
    type: int
  run_on:
    description: C(all) devices (default) or one datacenter's.
    type: str
  policy:
    description: How reports of another datacenter combine.
    type: str
    choices: [any, all, majority]
'''

EXAMPLES = r'''
- name: An HTTP check probed against every address that names it
  gtm.gtm.check:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    name: web
    type: http
    path: /health
    expect_status: "200"
    interval: 10s
    timeout: 2s

- name: A manual check for maintenance windows
  gtm.gtm.check:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    name: maint
    type: manual

- name: Only the interval changes; every other key stays
  gtm.gtm.check:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    name: web
    interval: 30s

- name: Delete it
  gtm.gtm.check:
    url: http://127.0.0.11:8053
    token: "{{ gtm_token }}"
    name: web
    state: absent
'''

RETURN = r'''
check:
  description: The check as configured after the task (before it in check mode when nothing
    changes; as it would be in check mode otherwise); null once deleted.
  returned: always
  type: dict
  sample: {"name": "web", "type": "http", "path": "/health", "interval": "10s"}
changes:
  description: gtm's field-level changes (empty when nothing changed).
  returned: always
  type: list
  elements: str
  sample: ['+ check web: interval 10s, path "/health", type "http"']
version:
  description: The configuration version after the write (unchanged for a dry run or no change).
  returned: when a write was sent
  type: int
installed:
  description: Whether the device that answered serves the change already.
  returned: when a write was applied
  type: bool
devices:
  description: For a dry run, each device's record answers now and after (gtm's Judgement).
  returned: in check mode, when the change touches a steered record
  type: dict
command_ids:
  description: The command ids of the writes sent (for C(GET /api/v1/commands/ID)).
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gtm.gtm.plugins.module_utils.gtm import (
    GtmClient, clean, ensure_object, gtm_argument_spec, seg,
)

KEYS = (
    'type', 'target', 'port', 'path', 'host', 'expect_status', 'expect_body', 'send',
    'expect', 'tls_verify', 'proxy_protocol', 'reuse_connection', 'query_name',
    'query_type', 'expect_rcode', 'expect_answer', 'service', 'tls', 'command', 'interval',
    'timeout', 'failures', 'successes', 'run_on', 'policy',
)


def main():
    spec = gtm_argument_spec()
    spec.update(
        name=dict(type='str', required=True),
        state=dict(type='str', default='present', choices=['present', 'absent']),
        replace=dict(type='bool', default=False),
        force=dict(type='bool', default=False),
        type=dict(type='str', choices=['http', 'https', 'http2', 'tcp', 'tls', 'dns', 'icmp',
                                       'grpc', 'exec', 'manual']),
        target=dict(type='str'),
        port=dict(type='int'),
        path=dict(type='str'),
        host=dict(type='str'),
        expect_status=dict(type='str'),
        expect_body=dict(type='str'),
        send=dict(type='str'),
        expect=dict(type='str'),
        tls_verify=dict(type='bool'),
        proxy_protocol=dict(type='bool'),
        reuse_connection=dict(type='bool'),
        query_name=dict(type='str'),
        query_type=dict(type='str'),
        expect_rcode=dict(type='str'),
        expect_answer=dict(type='str'),
        service=dict(type='str'),
        tls=dict(type='bool'),
        command=dict(type='list', elements='str'),
        interval=dict(type='str'),
        timeout=dict(type='str'),
        failures=dict(type='int'),
        successes=dict(type='int'),
        run_on=dict(type='str'),
        policy=dict(type='str', choices=['any', 'all', 'majority']),
    )
    module = AnsibleModule(
        argument_spec=spec,
        supports_check_mode=True,
        required_if=[('replace', True, ('type',))],
    )
    client = GtmClient(module)
    body = clean(dict((k, module.params[k]) for k in KEYS))
    path = '/checks/%s' % seg(module.params['name'])
    ensure_object(module, client, path, body, 'check',
                  identity=dict(name=module.params['name']))


if __name__ == '__main__':
    main()
