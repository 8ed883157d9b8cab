#!/usr/bin/env python3
"""The `daytona` provider against a FAKE Daytona (fake_daytona.py; the real one is a remote
cloud): routing by provider name; lazy secrets (nothing read at startup, the environment's
DAYTONA_API_KEY ignored, a missing secret is a 503 naming it and the command that sets it, and
`sbx secret set` / the admin API make the same request work without a restart); commands
through the router and Daytona's preview proxy; the label query of find-or-create (also across
servers, with ownership on delete); stop-not-delete; transient states then usable; dead states
→ a fresh create; pause refused; the key never in logs, API answers, sandbox env or commands."""
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from harness import check, main, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
KEY = "dtn-FAKE-key-7c1e55aa"        # what the fake accepts, set as a secret by the test
ENV_KEY = "env-key-MUST-NOT-BE-USED"  # in the server's environment: must be ignored
REMOTE_DIR = "/tmp/.sbx-fake-daytona"


class FakeDaytona:
    def __init__(self, tls=False):
        self.tmp = tempfile.mkdtemp(prefix="sbx-fake-daytona-")
        keyfile = os.path.join(self.tmp, "key")
        with open(keyfile, "w") as f:
            f.write(KEY)
        ports = os.path.join(self.tmp, "ports.json")
        argv = [sys.executable, os.path.join(HERE, "fake_daytona.py"), "--key-file", keyfile,
                "--root", os.path.join(self.tmp, "root"), "--remote-dir", REMOTE_DIR,
                "--ports-file", ports]
        self.ca, self.ctx = None, None
        if tls:
            self.ca = os.path.join(self.tmp, "cert.pem")
            tkey = os.path.join(self.tmp, "tls.key")
            p = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                                "-keyout", tkey, "-out", self.ca, "-days", "1",
                                "-subj", "/CN=127.0.0.1", "-addext",
                                "subjectAltName=IP:127.0.0.1"], capture_output=True)
            check(p.returncode == 0, "openssl makes a test certificate: %r" % p.stderr)
            argv += ["--tls-cert", self.ca, "--tls-key", tkey]
            self.ctx = ssl.create_default_context(cafile=self.ca)
        self.proc = subprocess.Popen(argv)
        os.makedirs(os.path.join(self.tmp, "root"))
        wait_for(lambda: os.path.exists(ports), "the fake daytona to listen")
        p = json.load(open(ports))
        self.api = "%s://127.0.0.1:%d" % ("https" if tls else "http", p["api"])

    def call(self, method, path, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers=headers or {})
        with urllib.request.urlopen(req, timeout=30, context=self.ctx) as r:
            return json.loads(r.read() or b"null")

    def requests(self):
        return self.call("GET", "/fake/requests")

    def sandbox(self, rid):
        return self.call("GET", "/fake/sandbox/" + rid)

    def states(self, rid, states):
        return self.call("POST", "/fake/sandbox/%s/states" % rid, {"states": states})

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        subprocess.run(["rm", "-rf", self.tmp])


def config(fake, ca=None):
    return ('providers = { supported = ["process", "daytona"]; default = "process";\n'
            '  daytona = { api_url = "%s/api"; toolbox_url = "%s/toolbox"; %s\n'
            '              remote_dir = "%s"; poll_ms = 50; wait_timeout_ms = 20000; }; };\n'
            'limits = { wait_usable_seconds = 20; };\n'
            % (fake.api, fake.api, 'ca_file = "%s";' % ca if ca else "", REMOTE_DIR))


def server_env():
    env = dict(os.environ)
    env["DAYTONA_API_KEY"] = ENV_KEY
    env["DAYTONA_ORGANIZATION_ID"] = ENV_KEY
    return env


def dcreate(s, key=None, **kw):
    ext = {"reuseKey": key} if key else {}
    ext.update(kw.pop("ext", {}))
    return s.create(provider="daytona", extensions=ext, **kw)


def ok_create(s, key=None, **kw):
    r = dcreate(s, key, **kw)
    check(r.status == 202, "daytona create: %r" % r)
    check(r.json()["provider"] == "daytona", "provider is daytona")
    return r.json()["id"]


def rid_of(fake, sid):
    found = [x for x in all_remote(fake) if x["labels"].get("sbx.id") == sid]
    check(len(found) == 1, "one remote sandbox labelled %s: %r" % (sid, found))
    return found[0]["id"]


def all_remote(fake):
    # the list endpoint with no label filter, authenticated like the provider
    return fake.call("GET", "/api/sandbox", headers={"Authorization": "Bearer " + KEY})


def count(fake, method, path_re):
    return sum(1 for x in fake.requests()
               if x["method"] == method and re.fullmatch(path_re, x["path"]))


def run_ok(s, sid, cmd):
    out, events = s.run(sid, cmd)
    check(events[-1]["type"] == "execution_complete", "%r: %r" % (cmd, events))
    return out


def secret_set(s, name, value):
    p = subprocess.run([s.sbx, "secret", "set", name, "--state-dir", s.state],
                       input=value.encode(), capture_output=True)
    check(p.returncode == 0, "sbx secret set %s: %r" % (name, p.stderr))


def lazy_secret(s, fake):
    """Nothing read at startup; the env var is ignored; a clear 503; then a late secret."""
    check(fake.requests() == [], "no request to daytona at startup")
    check(not os.path.exists(os.path.join(s.state, "secrets", "master.key")),
          "the secret store is not even opened at startup")
    r = dcreate(s)
    check(r.status == 503, "create without the secret: %r" % r)
    e = r.json()
    check(e["code"] == "SANDBOX::PROVIDER_UNAVAILABLE", "code: %r" % e)
    check("DAYTONA_API_KEY" in e["message"] and "sbx secret set DAYTONA_API_KEY" in e["message"],
          "the message names the secret and the command: %r" % e["message"])
    check(fake.requests() == [], "the DAYTONA_API_KEY of the environment was not used")
    p = s.create()
    check(p.status == 202 and p.json()["provider"] == "process",
          "routing: no provider named = the default (process) still works: %r" % p)
    env_lines, _ = s.run(p.json()["id"], "env")
    check(not any(ENV_KEY in line for line in env_lines),
          "the server's environment does not reach a sandbox")
    check(s.request("DELETE", "/v1/sandboxes/" + p.json()["id"]).status == 204, "delete")
    r = s.create(provider="nosuch")
    check(r.status == 400 and r.json()["code"] == "SANDBOX::UNSUPPORTED_PROVIDER" and
          "daytona" in r.json()["message"], "unknown provider names the supported: %r" % r)
    secret_set(s, "DAYTONA_API_KEY", KEY)  # the CLI writes the store file; no restart
    sid = ok_create(s)
    auth = {x["headers"].get("Authorization") for x in fake.requests() if x["method"] != "PREVIEW"}
    check(auth == {"Bearer " + KEY}, "every call carries the stored key: %r" % auth)
    return sid


def through_router(s, fake, sid):
    check(run_ok(s, sid, "echo hello-from-fake; echo $HOME")[0] == "hello-from-fake",
          "a command through the router and the preview proxy")
    rid = rid_of(fake, sid)
    prev = [x for x in fake.requests() if x["method"] == "PREVIEW"]
    check(prev and all(x["headers"].get("x-daytona-preview-token") for x in prev),
          "the router sends the preview token")
    check(all(x["headers"].get("host", "").startswith("127.0.0.1:") for x in prev),
          "and the preview URL's host as Host")
    created = [json.loads(x["body"]) for x in fake.requests()
               if x["method"] == "POST" and x["path"] == "/api/sandbox"]
    check(created[-1]["labels"]["sbx.id"] == sid and "sbx.spec-hash" in created[-1]["labels"],
          "labels: %r" % created[-1]["labels"])
    check(os.access(os.path.join(fake.sandbox(rid)["root"], "remote", "sbx-execd"), os.X_OK),
          "sbx-execd was uploaded through the toolbox")
    # execd's token reaches the remote side as an uploaded file's body, never in a command
    # (Daytona logs commands; the remote process list shows them)
    tokens = {x["headers"].get("x-execd-access-token") for x in prev} - {None, ""}
    check(len(tokens) == 1, "the router sends execd's token: %r" % tokens)
    token = tokens.pop()
    commands = [x["body"] for x in fake.requests() if x["path"].startswith("/toolbox/")
                and "/process/" in x["path"]]
    check(commands and not any(token in c for c in commands),
          "the token is in no toolbox command: %r" % [c for c in commands if token in c][:1])
    check(not os.path.exists(os.path.join(fake.sandbox(rid)["root"], "remote", "execd.token")),
          "the token file is gone once execd has it")
    return rid


def stop_not_delete(s, fake, sid, rid):
    run_ok(s, sid, "echo persisted > $HOME/marker")
    posts = count(fake, "POST", "/api/sandbox")
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop")
    check(fake.sandbox(rid)["state"] == "stopped", "stopped on daytona")
    check(count(fake, "DELETE", "/api/sandbox/.*") == 0, "stop never deletes")
    check(s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] == "Stopped",
          "Stopped in the API")
    check(s.request("POST", "/v1/sandboxes/%s/start" % sid).status == 202, "start")
    check(run_ok(s, sid, "cat $HOME/marker") == ["persisted"], "the filesystem survived")
    check(count(fake, "POST", "/api/sandbox") == posts, "no new sandbox for a start")
    r = s.request("POST", "/v1/sandboxes/%s/pause" % sid)
    check(r.status == 400 and r.json()["code"] == "SANDBOX::API_NOT_SUPPORTED",
          "pause is not a daytona operation: %r" % r)


def find_or_create(s, fake):
    sid = ok_create(s, "agent:a7:main")
    check(ok_create(s, "agent:a7:main") == sid, "same key and spec: the same sandbox")
    rid = rid_of(fake, sid)
    # stopped behind our back (Daytona's auto-stop): reuse starts it again
    fake.states(rid, ["stopping", "stopped"])
    check(ok_create(s, "agent:a7:main") == sid, "auto-stopped: reused after a start")
    check(fake.sandbox(rid)["state"] == "started", "started on daytona")
    check(run_ok(s, sid, "echo again") == ["again"], "and usable")
    # transient states are waited for, never a reason for a new sandbox
    fake.states(rid, ["resizing", "snapshotting", "unknown", "started"])
    posts = count(fake, "POST", "/api/sandbox")
    check(ok_create(s, "agent:a7:main") == sid, "transient states: waited, then reused")
    check(count(fake, "POST", "/api/sandbox") == posts, "no create while transient")
    # dead states are never reused
    for dead in ("error", "build_failed", "destroyed"):
        fake.states(rid, [dead])
        new = ok_create(s, "agent:a7:main")
        check(new != sid, "%s: a fresh sandbox" % dead)
        check(s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] == "Failed",
              "the %s one is Failed" % dead)
        sid, rid = new, rid_of(fake, new)
    q = [x for x in fake.requests()
         if x["method"] == "GET" and x["path"] == "/api/sandbox" and "labels=" in x["query"]]
    check(q, "the provider queried by label")
    want = json.loads(urllib.parse.parse_qs(q[-1]["query"])["labels"][0])
    check(want.get("sbx.reuse-key") == "agent:a7:main" and "sbx.spec-hash" in want and
          "sbx.id" not in want, "label query shape: %r" % want)
    return sid, rid


def transient_create(s, fake):
    fake.call("POST", "/fake/config",
              {"create_states": ["pending_build", "building_snapshot", "pulling_snapshot",
                                 "creating"]})
    sid = ok_create(s, image={"uri": "python:3.11"})
    fake.call("POST", "/fake/config", {"create_states": ["creating"]})
    rid = rid_of(fake, sid)
    # The POST answers pending_build; the fake serves one state per GET, so the provider needs
    # 4 GETs to get through building_snapshot, pulling_snapshot and creating to started. (A 5th
    # came only from the manager's liveness check, which used to run on every spurious wake-up.)
    check(count(fake, "GET", "/api/sandbox/" + rid) >= 4, "polled through 4 transient states")
    body = [json.loads(x["body"]) for x in fake.requests()
            if x["method"] == "POST" and x["path"] == "/api/sandbox"][-1]
    check(body["buildInfo"] == {"dockerfileContent": "FROM python:3.11\n"}, "image: %r" % body)
    snap = ok_create(s, ext={"daytona.snapshot": "my-snap"})
    body = [json.loads(x["body"]) for x in fake.requests()
            if x["method"] == "POST" and x["path"] == "/api/sandbox"][-1]
    check(body.get("snapshot") == "my-snap" and "buildInfo" not in body, "snapshot: %r" % body)
    for x in (sid, snap):
        check(s.request("DELETE", "/v1/sandboxes/" + x).status == 204, "delete")
    check(fake.sandbox(rid)["state"] == "destroyed", "delete deletes on daytona")


def across_servers(new_server, fake, first, sid, rid):
    """A second server (own state dir, same Daytona account) finds the sandbox by label and
    adopts it; the first server's delete then leaves it alone (it is not its owner any more)."""
    b = new_server(config_text=config(fake), tag="daytona-b", env=server_env())
    b.start()
    secret_set(b, "DAYTONA_API_KEY", KEY)
    posts = count(fake, "POST", "/api/sandbox")
    adopted = ok_create(b, "agent:a7:main")
    check(count(fake, "POST", "/api/sandbox") == posts, "adopted, not created")
    check(rid_of(fake, adopted) == rid, "the same daytona sandbox, relabelled")
    check(run_ok(b, adopted, "echo adopted") == ["adopted"], "usable from the second server")
    check(first.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "first server deletes")
    check(fake.sandbox(rid)["state"] == "started", "but not the sandbox it no longer owns")
    check(b.request("DELETE", "/v1/sandboxes/" + adopted).status == 204, "owner deletes")
    check(fake.sandbox(rid)["state"] == "destroyed", "gone")
    check(b.stop() == 0, "clean stop of the second server")


def wait_deadline(new_server, fake):
    """Wait-until-usable has a deadline: a sandbox stuck in a transient state is a 504, never a
    reuse and never a second sandbox; once it is usable the same create reuses it."""
    c = new_server(config_text=config(fake).replace("wait_usable_seconds = 20",
                                                    "wait_usable_seconds = 1"),
                   tag="daytona-deadline", env=server_env())
    c.start()
    secret_set(c, "DAYTONA_API_KEY", KEY)
    sid = ok_create(c, "deadline:1")
    rid = rid_of(fake, sid)
    fake.states(rid, ["starting"])  # sticks
    posts = count(fake, "POST", "/api/sandbox")
    r = dcreate(c, "deadline:1")
    check(r.status == 504 and "still `starting`" in r.json()["message"], "deadline: %r" % r)
    check(count(fake, "POST", "/api/sandbox") == posts, "no second sandbox meanwhile")
    fake.states(rid, ["started"])
    check(ok_create(c, "deadline:1") == sid, "usable again: reused")
    check(c.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    check(c.stop() == 0, "clean stop")


def restart_and_rotate(s, fake):
    """After a restart nothing is asked of daytona until a request needs it; with the secret
    removed that request is a 503, and setting it over the admin API fixes it at once."""
    sid = ok_create(s)
    check(s.stop() == 0, "clean stop")
    p = subprocess.run([s.sbx, "secret", "rm", "DAYTONA_API_KEY", "--state-dir", s.state],
                       capture_output=True)
    check(p.returncode == 0, "secret rm")
    before = len(fake.requests())
    s.start()
    time.sleep(0.5)
    check(len(fake.requests()) == before, "no daytona call at startup")
    check(s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] == "Running",
          "the stored state is kept until the provider is needed")
    r = s.request("GET", "/sandboxes/%s/proxy/44772/ping" % sid)
    check(r.status == 503 and "sbx secret set DAYTONA_API_KEY" in r.json()["message"],
          "router without the secret: %r" % r)
    r = s.request("PUT", "/v1/admin/secrets/DAYTONA_API_KEY", {"value": KEY})
    check(r.status == 200 and KEY not in r.body.decode(), "admin API set: %r" % r)
    check(run_ok(s, sid, "echo back") == ["back"], "the same request works now")
    return sid


def no_leaks(s, fake):
    texts = [s.log(full=True), s.request("GET", "/v1/sandboxes?pageSize=200").body.decode(),
             s.request("GET", "/v1/admin/secrets").body.decode()]
    for t in texts:
        check(KEY not in t, "the key is not in logs or API answers")
    for x in fake.requests():
        check(ENV_KEY not in json.dumps(x), "the environment's key was never sent")
        if x["method"] == "POST" and x["path"] == "/api/sandbox":
            check(KEY not in x["body"], "the key is not in a sandbox's env/labels")
        if "/process/" in x["path"]:
            check(KEY not in x["body"], "the key is not in a command")


def over_tls(new_server):
    """HTTPS everywhere: the API and toolbox through libcurl, the router through the TLS pump
    (output streamed line by line). The peer is verified: without the CA, nothing works."""
    fake = FakeDaytona(tls=True)
    try:
        plain = new_server(config_text=config(fake), tag="daytona-tls-noca", env=server_env())
        plain.start()
        secret_set(plain, "DAYTONA_API_KEY", KEY)
        r = dcreate(plain)
        check(r.status >= 500 and "certificate" in r.json()["message"],
              "an unknown CA is refused: %r" % r)
        check(plain.stop() == 0, "clean stop")
        s = new_server(config_text=config(fake, fake.ca), tag="daytona-tls", env=server_env())
        s.start()
        secret_set(s, "DAYTONA_API_KEY", KEY)
        sid = ok_create(s)
        out, events = s.run(sid, "for i in 1 2 3; do echo line$i; sleep 0.2; done")
        check(out == ["line1", "line2", "line3"], "streamed through TLS: %r" % events)
        check(any(x["method"] == "PREVIEW" for x in fake.requests()), "via the preview proxy")
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        check(s.stop() == 0, "clean stop")
    finally:
        fake.stop()


def test(new_server):
    over_tls(new_server)
    fake = FakeDaytona()
    try:
        s = new_server(config_text=config(fake), tag="daytona", env=server_env())
        s.start()
        sid = lazy_secret(s, fake)
        rid = through_router(s, fake, sid)
        stop_not_delete(s, fake, sid, rid)
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        transient_create(s, fake)
        rsid, rrid = find_or_create(s, fake)
        across_servers(new_server, fake, s, rsid, rrid)
        wait_deadline(new_server, fake)
        last = restart_and_rotate(s, fake)
        no_leaks(s, fake)
        check(s.request("DELETE", "/v1/sandboxes/" + last).status == 204, "delete")
        for x in s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]:
            check(s.request("DELETE", "/v1/sandboxes/" + x["id"]).status == 204, "delete all")
        check(s.stop() == 0, "clean stop (sanitizers)")
    finally:
        fake.stop()


if __name__ == "__main__":
    main(test)
