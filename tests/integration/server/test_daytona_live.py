#!/usr/bin/env python3
"""The `daytona` provider against the real Daytona - only when a secret store that holds
DAYTONA_API_KEY is named by the test environment:

  SBX_DAYTONA_LIVE_STATE=/path/to/state   (its secrets/ dir: `sbx secret set DAYTONA_API_KEY
                                          --state-dir /path/to/state`, optionally
                                          DAYTONA_ORGANIZATION_ID and DAYTONA_TARGET)

Otherwise it says it was skipped (exit 77). The scenario: create (Daytona's default snapshot),
a command through the router and Daytona's preview proxy, find-or-create, stop (not delete),
start with the file still there, delete."""
import json
import os
import shutil
import subprocess
import sys

from harness import SKIP, check, main

CONFIG = ('providers = { supported = ["process", "daytona"]; default = "process";\n'
          '  daytona = { wait_timeout_ms = 600000; poll_ms = 1000; }; };\n'
          'limits = { wait_usable_seconds = 600; };\n')


def store_has_key(sbx, state):
    p = subprocess.run([sbx, "secret", "ls", "--json", "--state-dir", state],
                       capture_output=True, text=True)
    names = [json.loads(line)["name"] for line in p.stdout.splitlines() if line.strip()]
    return p.returncode == 0 and "DAYTONA_API_KEY" in names


def run_ok(s, sid, cmd):
    out, events = s.run(sid, cmd, timeout=300)
    check(events[-1]["type"] == "execution_complete", "%r: %r" % (cmd, events))
    return out


def test(new_server):
    s = new_server(config_text=CONFIG, tag="daytona-live")
    os.makedirs(s.state, mode=0o700)
    shutil.copytree(os.path.join(os.environ["SBX_DAYTONA_LIVE_STATE"], "secrets"),
                    os.path.join(s.state, "secrets"))
    s.start()
    r = s.create(provider="daytona", extensions={"reuseKey": "sbx-live-test"}, timeout=3600)
    check(r.status == 202, "create on daytona: %r" % r)
    sid = r.json()["id"]
    try:
        check(run_ok(s, sid, "echo live; uname -s") == ["live", "Linux"], "a command")
        run_ok(s, sid, "echo kept > $HOME/sbx-live-marker")
        again = s.create(provider="daytona", extensions={"reuseKey": "sbx-live-test"},
                         timeout=3600)
        check(again.status == 202 and again.json()["id"] == sid, "find-or-create: %r" % again)
        check(s.request("POST", "/v1/sandboxes/%s/stop" % sid, timeout=900).status == 202, "stop")
        check(s.request("POST", "/v1/sandboxes/%s/start" % sid, timeout=900).status == 202,
              "start")
        check(run_ok(s, sid, "cat $HOME/sbx-live-marker") == ["kept"], "files survive stop")
    finally:
        d = s.request("DELETE", "/v1/sandboxes/" + sid, timeout=900)
    check(d.status == 204, "delete: %r" % d)
    check(s.stop() == 0, "clean stop")


if __name__ == "__main__":
    state = os.environ.get("SBX_DAYTONA_LIVE_STATE")
    if not state:
        print("skipped: set SBX_DAYTONA_LIVE_STATE to a state dir whose secret store holds "
              "DAYTONA_API_KEY to run against the real Daytona")
        sys.exit(SKIP)
    if not store_has_key(sys.argv[1], state):
        print("skipped: the secret store of %s has no DAYTONA_API_KEY" % state)
        sys.exit(SKIP)
    main(test)
