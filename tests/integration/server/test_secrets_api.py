#!/usr/bin/env python3
"""The secrets admin API (PUT/GET/DELETE /v1/admin/secrets[/{name}]) behind the API key: set
from the body, names and dates only in answers, remove; the same store as `sbx secret`; the
value never in an answer, an error, the server's log (at debug level), its argv, the files on
disk or a sandbox's environment."""
import os
import subprocess

from harness import check, main

VALUE = "s3cr3t-VALUE-4f1b9d"


def put(s, name, body=None, raw=None):
    if raw is not None:
        return s.request("PUT", "/v1/admin/secrets/" + name, raw=raw,
                         headers={"Content-Type": "application/json"})
    return s.request("PUT", "/v1/admin/secrets/" + name, body)


def crud(s):
    check(s.request("GET", "/v1/admin/secrets", key=False).status == 401, "needs the API key")
    r = s.request("GET", "/v1/admin/secrets")
    check(r.status == 200 and [x["name"] for x in r.json()["items"]] == ["MY_TOKEN"],
          "list: %r" % r)
    one = s.request("GET", "/v1/admin/secrets/MY_TOKEN")
    check(one.status == 200 and set(one.json()) == {"name", "createdAt", "updatedAt"},
          "get: names and dates only: %r" % one)
    again = put(s, "MY_TOKEN", {"value": VALUE + "-2"})
    check(again.status == 200 and again.json()["createdAt"] == one.json()["createdAt"],
          "replace keeps createdAt: %r" % again)
    check(again.json()["updatedAt"] >= one.json()["updatedAt"], "and moves updatedAt")
    for r in (one, again):
        check(VALUE not in r.body.decode(), "no value in an answer")


def shared_with_cli(s):
    p = subprocess.run([s.sbx, "secret", "ls", "--json", "--state-dir", s.state],
                       capture_output=True, text=True)
    check(p.returncode == 0 and "MY_TOKEN" in p.stdout and VALUE not in p.stdout,
          "the CLI sees what the API set: %r" % p)
    p = subprocess.run([s.sbx, "secret", "set", "FROM_CLI", "--state-dir", s.state],
                       input=b"cli-value", capture_output=True)
    check(p.returncode == 0, "cli set")
    names = [x["name"] for x in s.request("GET", "/v1/admin/secrets").json()["items"]]
    check(names == ["FROM_CLI", "MY_TOKEN"], "the API sees what the CLI set: %r" % names)
    for root, _, files in os.walk(os.path.join(s.state, "secrets")):
        for f in files:
            data = open(os.path.join(root, f), "rb").read()
            check(VALUE.encode() not in data, "no plaintext on disk (%s)" % f)


def bad_input(s):
    cases = [
        (put(s, "bad%21name", {"value": VALUE}), 400, "SECRET::INVALID_NAME"),
        (put(s, "X", raw=('{"value": "%s"' % VALUE).encode()), 400, "SECRET::INVALID_VALUE"),
        (put(s, "X", raw=b"[1,2]"), 400, "SECRET::INVALID_VALUE"),
        (put(s, "X", {"value": 5}), 400, "SECRET::INVALID_VALUE"),
        (put(s, "X", {"value": ""}), 400, "SECRET::INVALID_VALUE"),
        (put(s, "X", {"value": "v" * (64 * 1024 + 1)}), 400, "SECRET::INVALID_VALUE"),
        (s.request("GET", "/v1/admin/secrets/NOPE"), 404, "SECRET::NOT_FOUND"),
        (s.request("DELETE", "/v1/admin/secrets/NOPE"), 404, "SECRET::NOT_FOUND"),
        (s.request("POST", "/v1/admin/secrets"), 405, "GENERAL::METHOD_NOT_ALLOWED"),
    ]
    for r, status, code in cases:
        check(r.status == status and r.json()["code"] == code, "bad input: %r" % r)
        check(VALUE not in r.body.decode(), "no value echoed in an error: %r" % r)


def not_in_sandboxes(s):
    r = s.create()
    check(r.status == 202, "create")
    sid = r.json()["id"]
    out, _ = s.run(sid, "env")
    check(not any(VALUE in line for line in out), "no secret in a sandbox's environment")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")


def remove(s):
    check(s.request("DELETE", "/v1/admin/secrets/MY_TOKEN").status == 204, "delete")
    check(s.request("GET", "/v1/admin/secrets/MY_TOKEN").status == 404, "gone")
    check(not os.path.exists(os.path.join(s.state, "secrets", "MY_TOKEN.secret")), "file gone")


def test(new_server):
    env = dict(os.environ)
    env["SBX_LOG_LEVEL"] = "debug"  # 4xx answers are logged too
    s = new_server(tag="secrets", env=env)
    s.start()
    r = put(s, "MY_TOKEN", {"value": VALUE})
    check(r.status == 200 and r.json()["name"] == "MY_TOKEN", "set: %r" % r)
    crud(s)
    shared_with_cli(s)
    bad_input(s)
    not_in_sandboxes(s)
    remove(s)
    cmdline = open("/proc/%d/cmdline" % s.proc.pid, "rb").read()
    check(VALUE.encode() not in cmdline, "not in the server's argv")
    check(s.stop() == 0, "clean stop")
    log = s.log(full=True)
    check("SECRET::INVALID_VALUE" in log, "the debug log has the 4xx lines")
    check(VALUE not in log, "the value never reaches the log")


if __name__ == "__main__":
    main(test)
