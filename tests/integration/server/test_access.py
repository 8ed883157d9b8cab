#!/usr/bin/env python3
"""What a create asks for beyond the sandbox's contents is honoured or refused, never dropped:
`platform`, `credentialProxy`, `resourceRequests`, `resourceLimits` keys other than cpu and
memory, `access.renew.extend.seconds` (each refusal a 400 naming the field and the provider).
`secureAccess`: the endpoint hands out the sandbox's own token instead of the API key; it opens
that sandbox's routes and nothing else (not another sandbox's, not the API), and the sandbox
never sees it. Renew-on-access moves the expiry on router use. /health tells a locked store
(503) and, with the key only, the providers' states.
"""
import os
import platform
import sqlite3

from harness import check, main

ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def refused(s, what, code, **over):
    r = s.create(**over)
    j = r.json() if r.body else {}
    msg = j.get("message", "")
    check(r.status == 400 and j.get("code") == code and what in msg,
          "%s: 400 %s naming it: %r" % (what, code, r))
    if code == "SANDBOX::API_NOT_SUPPORTED":
        check("`%s`" % s.provider in msg, "%s: the refusal names the provider: %s" % (what, msg))


def fields(s):
    refused(s, "platform", "SANDBOX::API_NOT_SUPPORTED", platform={"os": "windows", "arch": ARCH})
    refused(s, "platform", "SANDBOX::API_NOT_SUPPORTED", platform={"os": "linux", "arch": "s390x"})
    refused(s, "platform", "SANDBOX::INVALID_PARAMETER", platform={"os": "linux"})
    refused(s, "credentialProxy", "SANDBOX::API_NOT_SUPPORTED", credentialProxy={"enabled": True})
    refused(s, "credentialProxy", "SANDBOX::INVALID_PARAMETER", credentialProxy={"enabled": 1})
    refused(s, "resourceRequests", "SANDBOX::API_NOT_SUPPORTED",
            resourceRequests={"cpu": "500m"})
    refused(s, "resourceLimits.gpu", "SANDBOX::API_NOT_SUPPORTED",
            resourceLimits={"cpu": "1", "memory": "1Gi", "gpu": "1"})
    refused(s, "secureAccess", "SANDBOX::INVALID_PARAMETER", secureAccess="yes")
    for bad in ("299", "86401", "1e3", "-300", "", "300 "):
        refused(s, "access.renew.extend.seconds", "SANDBOX::INVALID_PARAMETER",
                extensions={"access.renew.extend.seconds": bad})
    # what is honoured is accepted
    r = s.create(platform={"os": "linux", "arch": ARCH}, credentialProxy={"enabled": False},
                 resourceRequests={}, secureAccess=False)
    check(r.status == 202, "the host's platform, disabled proxy, empty requests: %r" % r)
    check(s.request("DELETE", "/v1/sandboxes/" + r.json()["id"]).status == 204, "delete")
    print("ok   refused by name: platform, credentialProxy, resourceRequests, gpu, bad renew "
          "extension; the host's own platform accepted", flush=True)


def secure_access(s):
    a = s.create(secureAccess=True).json()["id"]
    b = s.create(secureAccess=True).json()["id"]
    plain = s.create().json()["id"]
    ep = s.request("GET", "/v1/sandboxes/%s/endpoints/44772" % a).json()
    tok = ep["headers"].get("OpenSandbox-Secure-Access")
    check(tok and len(tok) == 64 and "OPEN-SANDBOX-API-KEY" not in ep["headers"],
          "a secureAccess endpoint carries the sandbox's token, not the API key: %r" % ep)
    tok_b = s.request("GET", "/v1/sandboxes/%s/endpoints/44772" % b).json()["headers"][
        "OpenSandbox-Secure-Access"]
    check(tok != tok_b, "each sandbox its own token")
    hdr = {"OpenSandbox-Secure-Access": tok}
    r = s.request("GET", "/sandboxes/%s/proxy/44772/ping" % a, headers=hdr, key=False)
    check(r.status == 200, "the token opens its sandbox's routes: %r" % r)
    r = s.request("POST", "/sandboxes/%s/proxy/44772/command" % a,
                  {"command": "env; cat /proc/self/environ"}, headers=hdr, key=False)
    check(r.status == 200 and tok.encode() not in r.body, "the sandbox never sees the token")
    for what, path in (("another sandbox's routes", "/sandboxes/%s/proxy/44772/ping" % b),
                       ("a plain sandbox's routes", "/sandboxes/%s/proxy/44772/ping" % plain),
                       ("the API", "/v1/sandboxes"),
                       ("its own record", "/v1/sandboxes/" + a),
                       ("a wrong token", None)):
        h = hdr if path else {"OpenSandbox-Secure-Access": tok_b[:-1] + "0"}
        r = s.request("GET", path or "/sandboxes/%s/proxy/44772/ping" % a, headers=h, key=False)
        check(r.status == 401, "the token does not open %s: %r" % (what, r))
    r = s.request("GET", "/sandboxes/%s/proxy/44772/ping" % a)
    check(r.status == 200, "the API key still opens a secureAccess sandbox")
    ep = s.request("GET", "/v1/sandboxes/%s/endpoints/44772" % plain).json()
    check(ep["headers"] == {"OPEN-SANDBOX-API-KEY": s.key}, "plain sandboxes: as before")
    g = s.request("GET", "/v1/sandboxes/" + a).body
    check(tok.encode() not in g, "the token is not in the sandbox's record as the API shows it")
    for sid in (a, b, plain):
        s.request("DELETE", "/v1/sandboxes/" + sid)
    print("ok   secureAccess: own token per sandbox, its routes only, hidden from the sandbox",
          flush=True)


def renew_on_access(s):
    r = s.create(timeout=600, extensions={"access.renew.extend.seconds": "3600"})
    sid = r.json()["id"]
    before = s.request("GET", "/v1/sandboxes/" + sid).json()["expiresAt"]
    check(s.request("GET", "/sandboxes/%s/proxy/44772/ping" % sid).status == 200, "a router use")
    after = s.request("GET", "/v1/sandboxes/" + sid).json()["expiresAt"]
    check(after > before, "the expiry moved on router use: %s -> %s" % (before, after))
    plain = s.create(timeout=600).json()["id"]
    b2 = s.request("GET", "/v1/sandboxes/" + plain).json()["expiresAt"]
    s.request("GET", "/sandboxes/%s/proxy/44772/ping" % plain)
    check(s.request("GET", "/v1/sandboxes/" + plain).json()["expiresAt"] == b2,
          "without the extension, use does not renew")
    for x in (sid, plain):
        s.request("DELETE", "/v1/sandboxes/" + x)
    print("ok   renew-on-access: %s -> %s" % (before, after), flush=True)


def health(s):
    r = s.request("GET", "/health", key=False)
    check(r.status == 200 and r.json() == {"status": "healthy"},
          "/health without the key: just the status: %r" % r)
    j = s.request("GET", "/health").json()
    check(j["store"] == {"writable": True} and
          [p["name"] for p in j["providers"]] and
          all(p["state"] in ("ready", "not built yet", "failed") for p in j["providers"]),
          "/health with the key: store and providers: %r" % j)
    db = sqlite3.connect(os.path.join(s.state, "sbx.db"), timeout=1)
    db.execute("BEGIN EXCLUSIVE")
    try:
        r = s.request("GET", "/health", timeout=30)
        print("locked store: %d %s" % (r.status, r.body[:300]), flush=True)
        j = r.json()
        check(r.status == 503 and j["status"] == "unhealthy" and not j["store"]["writable"]
              and "lock" in j["store"]["reason"], "a locked store: 503 and why: %r" % r)
    finally:
        db.rollback()
        db.close()
    check(s.request("GET", "/health", key=False).status == 200, "healthy again")
    print("ok   /health: 200, 503 with a locked store, details only with the key", flush=True)


def test(new_server):
    s = new_server(tag="access")
    s.start()
    s.provider = s.request("GET", "/health").json()["providers"][0]["name"]
    fields(s)
    secure_access(s)
    renew_on_access(s)
    health(s)
    check(s.stop() == 0, "clean stop")


if __name__ == "__main__":
    main(test)
