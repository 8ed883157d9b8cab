#!/usr/bin/env python3
"""credentialProxy and the Credential Vault of egress-api.yaml (issue 15), on native sandboxes
with an egress policy, local peers only (nothing leaves the machine):

- create: `credentialProxy` without networkPolicy, on a provider without the capability, or
  malformed: 400 naming the field;
- the vault routes through the endpoints API (port 18080, OPENSANDBOX-EGRESS-AUTH): POST (201),
  GET, PATCH (add/replace/delete, expectedRevision), DELETE, the credentials and bindings
  lists and items; their shapes (CredentialVaultState, metadata only: never a value);
  400 for bad bodies (unknown fields, bad names, header names that frame a request, values
  with CR/LF), 404, 409 (create twice, add an existing name, a stale expectedRevision), 412
  (the sandbox has no Credential Proxy), 401 without the sandbox's token;
- bindings: those the proxy could never apply (a port other than 80 and 443) are refused with a
  400 saying why (nothing is stored and silently never applied); malformed ones get their
  schema's 400; the injection itself: test_credinject.py;
- hostile input: a body of 8 MiB, 10k bindings, 10k-character names; the server stays up;
- a server killed with SIGKILL: the vault (metadata and values) is the same after the restart;
- the value is never in an answer, the server's log, the state dir in clear, nor anywhere in
  the sandbox (env, /proc/1/environ, files, process list); deleting the sandbox deletes it."""
import os
import subprocess
import time

from harness import Skip, check, main, remove_bridge

SECRET = "sk-test-" + "%08x" % (os.getpid() * 2654435761 % 2**32) + "-Zq7"
SECRET2 = "pw-" + SECRET[::-1]


def vault(s, sid, method, ha, sub="", body=None, raw=None):
    return s.request(method, "/sandboxes/%s/proxy/18080/credential-vault%s" % (sid, sub),
                     body=body, raw=raw, headers=ha, key=False)


def cred(name, value):
    return {"name": name, "source": {"type": "inline", "value": value}}


def binding(name, cred_name, hosts=("api.test",), auth=None):
    return {"name": name,
            "match": {"schemes": ["http"], "ports": [80], "hosts": list(hosts)},
            "auth": auth or {"type": "bearer", "credential": cred_name}}


def no_value(what, text):
    check(SECRET not in text and SECRET2 not in text, "no credential value in %s" % what)


def creates(s):
    pol = {"defaultAction": "deny"}
    for kw in ({"credentialProxy": {"enabled": True}},
               {"credentialProxy": {"enabled": True}, "networkPolicy": None},
               {"credentialProxy": {"enabled": "yes"}, "networkPolicy": pol},
               {"credentialProxy": True, "networkPolicy": pol},
               {"credentialProxy": {"enabled": True}, "networkPolicy": pol,
                "provider": "process"}):
        r = s.create(**kw)
        check(r.status == 400 and "credentialProxy" in r.json()["message"],
              "create %r: %r" % (kw, r))


def shapes(s, a, ha):
    r = vault(s, a, "GET", ha)
    check(r.status == 404, "GET before any vault: %r" % r)
    r = vault(s, a, "PATCH", ha, body={"credentials": {"add": [cred("x", "y")]}})
    check(r.status == 404, "PATCH before any vault: %r" % r)
    # bindings the proxy cannot apply (a port other than 80 and 443) are refused, not ignored
    port = binding("port", "openai")
    port["match"]["ports"] = [80, 8080]
    tls = {"name": "tls", "match": {"hosts": ["api.test"], "ports": [8443]},
           "auth": {"type": "bearer", "credential": "openai"}}
    for b, why in ((tls, "port 8443"), (port, "port 8080")):
        r = vault(s, a, "POST", ha, body={"credentials": [cred("openai", SECRET)],
                                          "bindings": [b]})
        check(r.status == 400 and why in r.json()["message"],
              "a binding the proxy cannot apply is refused, not ignored: %r" % r)
        no_value("the refusal", r.body.decode())
    check(vault(s, a, "GET", ha).status == 404, "a refused POST stores nothing")
    body = {"credentials": [cred("openai", SECRET), cred("basic-pw", SECRET2)], "bindings": []}
    r = vault(s, a, "POST", ha, body=body)
    check(r.status == 201, "POST: %r" % r)
    st = r.json()
    no_value("the POST answer", r.body.decode())
    check(set(st) == {"revision", "credentials", "bindings"} and st["revision"] >= 1,
          "CredentialVaultState: %r" % st)
    rev = st["revision"]
    check(st["credentials"] == [{"name": "openai", "sourceType": "inline", "revision": rev},
                                {"name": "basic-pw", "sourceType": "inline", "revision": rev}]
          and st["bindings"] == [], "credential metadata: %r" % st)
    r = vault(s, a, "POST", ha, body=body)
    check(r.status == 409, "POST twice: %r" % r)
    for sub, want in (("", st),
                      ("/credentials", {"revision": rev, "credentials": st["credentials"]}),
                      ("/bindings", {"revision": rev, "bindings": []}),
                      ("/credentials/openai", st["credentials"][0])):
        r = vault(s, a, "GET", ha, sub)
        check(r.status == 200 and r.json() == want, "GET %s: %r" % (sub, r))
        no_value("GET " + sub, r.body.decode())
    for sub in ("/credentials/nope", "/bindings/nope", "/other", "/credentials/a%2fb"):
        r = vault(s, a, "GET", ha, sub)
        check(r.status == 404, "GET %s: %r" % (sub, r))
    r = vault(s, a, "PUT", ha, body={})
    check(r.status == 405, "PUT: %r" % r)
    r = vault(s, a, "POST", ha, "/credentials", body={})
    check(r.status == 405, "POST to a list: %r" % r)
    r = vault(s, a, "GET", {})
    check(r.status == 401, "no token: %r" % r)
    r = vault(s, a, "GET", {"OPEN-SANDBOX-API-KEY": s.key})
    check(r.status == 401, "the API key is not the token: %r" % r)
    return rev


def mutations(s, a, ha, rev):
    r = vault(s, a, "PATCH", ha, body={"expectedRevision": rev + 7,
                                        "credentials": {"add": [cred("n", "v")]}})
    check(r.status == 409, "a stale expectedRevision: %r" % r)
    r = vault(s, a, "PATCH", ha, body={"credentials": {"add": [cred("openai", "v")]}})
    check(r.status == 409, "add an existing credential: %r" % r)
    r = vault(s, a, "PATCH", ha, body={"credentials": {"replace": [cred("nope", "v")]}})
    check(r.status == 404, "replace a missing credential: %r" % r)
    r = vault(s, a, "PATCH", ha, body={"credentials": {"delete": ["nope"]}})
    check(r.status == 404, "delete a missing credential: %r" % r)
    r = vault(s, a, "PATCH", ha, body={"bindings": {"delete": ["nope"]}})
    check(r.status == 404, "delete a missing binding: %r" % r)
    r = vault(s, a, "PATCH", ha, body={"bindings": {"add": [{
        "name": "tls", "match": {"hosts": ["api.test"], "ports": [8443]},
        "auth": {"type": "bearer", "credential": "openai"}}]}})
    check(r.status == 400 and "8443" in r.json()["message"],
          "PATCH adding a binding on port 8443 is refused: %r" % r)
    r = vault(s, a, "PATCH", ha, body={"credentials": {"add": [cred("x", "v"), cred("x", "w")]}})
    check(r.status == 409, "the same name added twice: %r" % r)
    check(vault(s, a, "GET", ha).json()["revision"] == rev, "refusals change nothing")
    r = vault(s, a, "PATCH", ha, body={
        "expectedRevision": rev,
        "credentials": {"replace": [cred("openai", SECRET)], "add": [cred("c3", SECRET2)]}})
    check(r.status == 200, "PATCH: %r" % r)
    st = r.json()
    no_value("the PATCH answer", r.body.decode())
    nrev = st["revision"]
    check(nrev == rev + 1, "one revision more: %r" % st)
    revs = {c["name"]: c["revision"] for c in st["credentials"]}
    check(revs == {"openai": nrev, "basic-pw": rev, "c3": nrev},
          "changed items carry the new revision: %r" % revs)
    r = vault(s, a, "PATCH", ha, body={"expectedRevision": nrev,
                                        "credentials": {"delete": ["c3"]}})
    check(r.status == 200 and r.json()["revision"] == nrev + 1 and
          [c["name"] for c in r.json()["credentials"]] == ["basic-pw", "openai"],
          "PATCH delete: %r" % r)
    return nrev + 1


def bad_bodies(s, a, ha):
    ok_c = cred("z", "v")
    bad_posts = [[], "x", {}, {"credentials": []}, {"credentials": [], "bindings": [], "x": 1},
                 {"credentials": [cred("bad name", "v")], "bindings": []},
                 {"credentials": [cred("z" * 200, "v")], "bindings": []},
                 {"credentials": [cred("z", "a\r\nX-Evil: 1")], "bindings": []},
                 {"credentials": [cred("z", "")], "bindings": []},
                 {"credentials": [{"name": "z", "source": {"type": "env", "value": "v"}}],
                  "bindings": []},
                 {"credentials": [{"name": "z", "source": {"type": "inline", "value": "v",
                                                            "extra": 1}}], "bindings": []},
                 {"credentials": [ok_c, ok_c], "bindings": []},
                 {"credentials": [ok_c], "bindings": [binding("b", "missing")]},
                 {"credentials": [ok_c], "bindings": [dict(binding("b", "z"), extra=1)]},
                 {"credentials": [ok_c], "bindings": [binding("b", "z", hosts=["10.0.0.1"])]},
                 {"credentials": [ok_c], "bindings": [binding("b", "z", hosts=[])]},
                 {"credentials": [ok_c], "bindings": [binding("b", "z", auth={
                     "type": "apiKey", "name": "Host", "credential": "z"})]},
                 {"credentials": [ok_c], "bindings": [binding("b", "z", auth={
                     "type": "apiKey", "name": "X Y", "credential": "z"})]},
                 {"credentials": [ok_c], "bindings": [binding("b", "z", auth={
                     "type": "customHeaders", "headers": []})]},
                 {"credentials": [ok_c], "bindings": [binding("b", "z", auth={
                     "type": "oauth", "credential": "z"})]},
                 {"credentials": [ok_c], "bindings": [{"name": "b", "match": {
                     "hosts": ["a.test"], "schemes": ["ftp"]},
                     "auth": {"type": "bearer", "credential": "z"}}]},
                 {"credentials": [ok_c], "bindings": [{"name": "b", "match": {
                     "hosts": ["a.test"], "ports": [0]},
                     "auth": {"type": "bearer", "credential": "z"}}]}]
    for body in bad_posts:
        r = vault(s, a, "POST", ha, body=body)
        check(r.status == 400 and r.json()["message"], "POST %.80r: %r" % (body, r))
        no_value("a 400", r.body.decode())
    r = vault(s, a, "POST", ha, raw=b'{"credentials": [], "credentials": [], "bindings": []}')
    check(r.status == 400, "duplicate keys: %r" % r)
    r = vault(s, a, "POST", ha, raw=b"{nope")
    check(r.status == 400, "bad JSON: %r" % r)
    r = vault(s, a, "POST", ha, raw=('{"credentials": [{"name": "k", "source": {"type": '
                                     '"inline", "value": %s}]}' % SECRET).encode())
    check(r.status == 400, "bad JSON around a value: %r" % r)
    no_value("a JSON error", r.body.decode())
    for body in ({"expectedRevision": "1"}, {"credentials": []}, {"bindings": {"put": []}},
                 {"credentials": {"delete": [1]}}, {"other": 1}):
        r = vault(s, a, "PATCH", ha, body=body)
        check(r.status == 400, "PATCH %r: %r" % (body, r))


def hostile(s, a, ha):
    try:
        r = vault(s, a, "POST", ha, raw=b'{"credentials": ["' + b"x" * (8 << 20) + b'"]}')
        check(r.status in (400, 413), "8 MiB body: %r" % r)
    except (BrokenPipeError, ConnectionResetError):
        pass  # answered 413 at its head and closed: the rest was never read
    many = {"credentials": [cred("z", "v")],
            "bindings": [binding("b%d" % i, "z") for i in range(10000)]}
    t0 = time.time()
    r = vault(s, a, "POST", ha, body=many)
    check(r.status == 400 and "1024" in r.json()["message"], "10k bindings: %r" % r)
    check(time.time() - t0 < 10, "10k bindings refused quickly")
    big = {"credentials": {"add": [cred("big%d" % i, "v" * 8000) for i in range(20)]}}
    r = vault(s, a, "PATCH", ha, body=big)
    check(r.status == 400, "160 kB of values: %r" % r)
    check(s.request("GET", "/health", key=False).status == 200, "the server answers")


def not_enabled(s, b, hb):
    r = vault(s, b, "POST", hb, body={"credentials": [], "bindings": []})
    check(r.status == 412, "a sandbox without credentialProxy: POST is 412: %r" % r)
    r = vault(s, b, "GET", hb)
    check(r.status == 404, "... GET is 404: %r" % r)


def sandbox_sees_nothing(s, a):
    checks = {"env": "env",
              "/proc/*/environ": "cat /proc/[0-9]*/environ | tr '\\0' '\\n'; echo scanned",
              "ps": "ps auxeww 2>/dev/null || cat /proc/*/cmdline | tr '\\0' ' '",
              # the sandbox's own writable places (its image is the host's tree here)
              "files": "grep -rlsF -e '%s' -e '%s' /etc /tmp /root /home /opt 2>/dev/null "
                       "| head -3; echo scanned" % (SECRET, SECRET2)}
    for what, cmd in checks.items():
        t0 = time.time()
        out, _ = s.run(a, cmd, timeout=120)
        print("%s: %.1f s" % (what, time.time() - t0))
        text = "\n".join(out)
        check(text.strip(), "the %s check produced output" % what)
        no_value("the sandbox's " + what, text)


def state_in_clear(s):
    """Every file of the server's state (the store, records, credvault, logs), not the sandboxes'
    root filesystems mounted under it (-xdev: the host image is the host's whole tree)."""
    r = subprocess.run(["find", s.state, "-xdev", "-type", "f", "-size", "-64M"],
                       capture_output=True, text=True)
    hits = []
    for path in r.stdout.split("\n"):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if SECRET.encode() in data or SECRET2.encode() in data:
            hits.append(path)
    check(len(r.stdout.split("\n")) > 3, "control: the state dir has files")
    check(not hits, "values in clear in the state dir: %r" % hits)


T0 = time.time()


def phase(name):
    print("%6.1f s %s" % (time.time() - T0, name), flush=True)


def test(new_server):
    tag = os.getpid() % 200 + 20
    bridge = "sbxcp%d" % tag
    subnet = "10.233.%d.0/24" % tag
    config = ('providers = { supported = ["native", "process"]; default = "native";\n'
              '  native = { bridge = "%s"; subnet = "%s"; egress_dns = "127.0.0.1"; }; };\n'
              % (bridge, subnet))
    s = new_server(config_text=config, tag="credproxy")
    try:
        s.start_native()
        pol = {"defaultAction": "deny", "egress": [{"action": "allow", "target": "api.test"}]}
        r = s.create(networkPolicy=pol, credentialProxy={"enabled": True})
        if r.status != 202:
            raise Skip("the runtime cannot make sandboxes on this host: %r" % r)
        a = r.json()["id"]
        r = s.create(networkPolicy=pol)
        check(r.status == 202, "create b: %r" % r)
        b = r.json()["id"]
        phase('creates')
        creates(s)
        ep = s.request("GET", "/v1/sandboxes/%s/endpoints/18080" % a).json()
        ha = {"OPENSANDBOX-EGRESS-AUTH": ep["headers"]["OPENSANDBOX-EGRESS-AUTH"]}
        hb = {"OPENSANDBOX-EGRESS-AUTH": s.request(
            "GET", "/v1/sandboxes/%s/endpoints/18080" % b).json()["headers"][
            "OPENSANDBOX-EGRESS-AUTH"]}
        r = vault(s, a, "GET", hb)
        check(r.status == 401, "another sandbox's token: %r" % r)
        phase('rev = shapes')
        rev = shapes(s, a, ha)
        phase('rev = mutations')
        rev = mutations(s, a, ha, rev)
        phase('bad_bodies')
        bad_bodies(s, a, ha)
        t0 = time.time()
        hostile(s, a, ha)
        print("hostile: %.1f s" % (time.time() - t0))
        phase('not_enabled')
        not_enabled(s, b, hb)
        phase('sandbox_sees_nothing')
        sandbox_sees_nothing(s, a)
        phase('state_in_clear')
        state_in_clear(s)
        before = vault(s, a, "GET", ha).json()
        phase('s.kill9')
        s.kill9()
        s.start()
        r = vault(s, a, "GET", ha)
        check(r.status == 200 and r.json() == before, "the vault survives kill -9: %r" % r)
        r = vault(s, a, "PATCH", ha, body={"expectedRevision": rev,
                                            "credentials": {"delete": ["basic-pw"]}})
        check(r.status == 200 and r.json()["revision"] == rev + 1, "PATCH after restart: %r" % r)
        r = vault(s, a, "DELETE", ha)
        check(r.status == 204, "DELETE: %r" % r)
        check(vault(s, a, "GET", ha).status == 404, "GET after DELETE")
        check(vault(s, a, "DELETE", ha).status == 404, "DELETE twice")
        r = vault(s, a, "POST", ha, body={"credentials": [cred("k", SECRET)], "bindings": []})
        check(r.status == 201 and r.json()["revision"] > rev + 1,
              "a new vault: revisions never go back: %r" % r)
        vdir = os.path.join(s.state, "credvault")
        check(any(n.startswith("v.") for n in os.listdir(vdir)), "control: a's values file")
        check(s.request("DELETE", "/v1/sandboxes/" + a).status == 204, "delete a")
        check(not any(n.startswith("v.") for n in os.listdir(vdir)),
              "deleting the sandbox deletes its values: %r" % os.listdir(vdir))
        check(s.request("DELETE", "/v1/sandboxes/" + b).status == 204, "delete b")
        no_value("the server's log", s.log(full=True))
        phase('check')
        check(s.stop() == 0, "clean stop")
    finally:
        s.kill9()
        s.gc_runtime()
        remove_bridge(s.sbx, bridge, subnet)


if __name__ == "__main__":
    main(test)
