# -*- coding: utf-8 -*-
# Copyright gtm authors
# Apache License 2.0 (see the repository's Cargo.toml)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The connection options every gtm module takes.
    DOCUMENTATION = r'''
options:
  url:
    description:
      - The device's API address, e.g. C(http://127.0.0.1:8053) or C(https://gtm1.example.net:8053)
        (a trailing C(/api/v1) is accepted).
      - Any device of a cluster takes writes (a follower forwards them to the leader);
        every device applies them.
      - Defaults to the environment variable C(GTM_API), as the gtm command line does.
    type: str
    required: true
  token:
    description:
      - >-
        An API token, sent as C(Authorization: Bearer TOKEN) -- the device's C(api-token) file
        (role admin) or a named token made with C(gtm token create NAME --role operator).
      - Configuration writes (M(gtm.gtm.record), M(gtm.gtm.check)) need the role admin;
        drains and schedules need operator.
      - Defaults to the environment variable C(GTM_TOKEN).
    type: str
    required: true
  validate_certs:
    description:
      - Verify the device's TLS certificate (C(https://) URLs).
    type: bool
    default: true
  ca_path:
    description:
      - A PEM file of the certificate authority that signed the device's certificate
        (the node file's C(tls_ca), or the data directory's C(api-ca.pem)).
      - Defaults to the environment variable C(GTM_CA).
    type: path
  api_timeout:
    description:
      - Seconds to wait for each answer of the device. A write waits for the cluster to
        commit it, so keep this above gtm's own deadlines (8 s, longer for a large configuration).
    type: int
    default: 60
notes:
  - Talks to the device's REST API (C(/api/v1), OpenAPI at C(/api/v1/openapi.json)) with
    ansible's own HTTP client; no other Python package is needed.
  - >-
    Run it where the device's API can be reached, usually with C(delegate_to: localhost)
    or C(connection: local).
  - >-
    A failed task's message is gtm's error text, naming the object and the key at fault
    (C(check web: path "health" must start with /)); C(api_error) holds gtm's error body
    (C(status), C(error), C(message), C(errors)).
  - >-
    Check mode asks gtm's dry run against the device's state as it is: the tasks before it in
    the play did not change anything. A dry run refused only for want of another object (a
    target gtm does not have, C(404 not-found), or a configuration whose every error names an
    unknown object, C(unknown check "web"), as when a record names a check an earlier task
    would create, or a check is deleted while a record an earlier task would delete names it)
    is reported as a change, with gtm's words in a warning; any other refusal fails the task,
    as the write would.
  - >-
    Each write carries a new command id (header C(x-gtm-command)), returned in C(command_ids):
    after an C(outcome-unknown) answer, C(GET /api/v1/commands/ID) (C(gtm command status ID))
    tells whether it applied.
'''
