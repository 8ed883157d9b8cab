#!/usr/bin/env python3
"""credentialProxy over HTTPS on the docker provider, against a real engine (a private dockerd,
else podman, started and stopped by PID) with real traffic on this machine only: the "internet"
of server/test_credinject.py (upstream DNS, HTTP on 80 and HTTPS on 443 of every address with a
certificate of the test's own CA, bad.test's address with a self-signed one), its peers on
198.18.9.0/24 here. The images are the test's BusyBox ones (pushed to the test's registry):

- `ca`: /etc/ssl/certs/ca-certificates.crt a relative symlink to ../cert.pem (the engine
  resolves it inside the image) holding a base CA of the image's;
- `hostlink`: the bundle an absolute symlink to a file of the host's (a unique marker): the
  engine resolves it inside the image, where it does not exist: no bundle, no CA, HTTPS
  spliced (as native does with an image without a bundle), never the host's file;
- `huge`: a 9 MiB bundle (beyond the 8 MiB limit): not taken (no bundle, no CA), the create
  succeeds and the server's memory is never asked for it;
- the plain BusyBox image: no bundle at all, the same.

BusyBox has no TLS client: the HTTPS requests are made by the host's python3 inside the
container's network namespace (nsenter -n), verifying with the container's own bundle (read
through /proc/<pid>/root, i.e. the container's mount view), after the container itself
resolved the names through sbx's resolver (BusyBox nslookup), which is what lets the proxy
inject. Checked:

- the container's bundle: the image's base CA, then the sandbox's CA (its certificate only,
  never a key), read-only; SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS name it;
- injection over HTTPS (a leaf of the sandbox's CA, which the bundle verifies), the upstream
  verified with providers.docker.credproxy_upstream_ca (the test's CA);
- an unbound name is spliced: the client sees the upstream's own certificate;
- the SNI/Host spoof: evil.test's address with SNI and Host api.test is spliced to evil.test
  (its own certificate, nothing injected); Host other than the SNI: nothing injected;
- an upstream whose certificate does not verify (bad.test) gets nothing;
- no value in the container (environment, files); the CA's key nowhere in it;
- kill -9 of the server and a restart: a new 443 listener, injected again, the same CA;
- delete: the sandbox's bundle file gone from the server's state dir.

  test_credproxy_https_docker.py SBX ENGINE      ENGINE: dockerd or podman (the other the fallback)
"""
import base64
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, HERE)

import engine as eng  # noqa: E402
import test_credinject as ci  # noqa: E402
from harness import check, main, remove_bridge, wait_for  # noqa: E402
from test_egress_docker import NFT_LIST, create, in_ns, sh  # noqa: E402
from test_egress_docker import pid_of as T_pid  # noqa: E402

NET = "198.18.9."
ADDRS = {k: v.replace("203.0.113.", NET) for k, v in ci.ADDRS.items()}
UP = ci.UP.replace("203.0.113.", NET)
SECRET = ci.SECRET
BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def base_ca(pki):
    """A CA the image's bundle holds (the image's own trust)."""
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", "base.key", "-out",
                        "base.pem", "-days", "2", "-subj", "/CN=sbx test image base CA"],
                       capture_output=True, text=True, cwd=pki)
    check(r.returncode == 0, "openssl: %s" % r.stderr[-300:])
    with open(os.path.join(pki, "base.pem"), "rb") as f:
        return f.read()


def resolve(s, sid, *names):
    """The container itself asks sbx's resolver (what lets the proxy inject for a name)."""
    for n in names:
        out = sh(s, sid, "nslookup %s 2>&1; true" % n)
        check(ADDRS[n] in out, "%s resolved in the container: %r" % (n, out))


def tls(e, sid, to, sni, host, path="/v1/x", cafile=None, *extra):
    """ci.TLS in the container's network namespace, by address; cafile: the container's own
    bundle unless given."""
    pid = T_pid(e, sid)
    ca = cafile or "/proc/%d/root%s" % (pid, BUNDLE)
    r = subprocess.run(["nsenter", "-t", str(pid), "-n", "python3", "-c", ci.TLS, to, sni, host,
                        path, ca] + list(extra), capture_output=True, text=True, timeout=60)
    return r.stdout.strip()


def table(e, sid):
    return in_ns(e, sid, NFT_LIST)


def tls_port(e, sid):
    m = re.search(r"tcp dport 443 redirect to :(\d+)", table(e, sid))
    return int(m.group(1)) if m else None


def auths(h):
    return [v for n, v in ci.headers(h["head"]) if n == "authorization"]


def bundle_checks(s, e, a, base):
    pid = T_pid(e, a)
    with open("/proc/%d/root%s" % (pid, BUNDLE), "rb") as f:
        got = f.read()
    check(got.startswith(base.rstrip(b"\n")), "the image's base CA first in the bundle")
    check(got.count(b"BEGIN CERTIFICATE") == 2 and b"PRIVATE" not in got,
          "the base CA and the sandbox's CA certificate, no key: %r" % got[-200:])
    out = sh(s, a, "echo x >> %s 2>&1 && echo WROTE; env" % BUNDLE)
    check("WROTE" not in out, "the bundle is read-only in the container: %r" % out[:200])
    for v in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        check("%s=%s" % (v, BUNDLE) in out, "the env names the bundle (%s): %r" % (v, out[:300]))
    out = sh(s, a, "grep -rlsF 'PRIVATE KEY' /etc /tmp /root 2>/dev/null | head -3; echo scanned")
    check(out == "scanned", "no private key in the container: %r" % out)


def vault_setup(s, a):
    r = ci.vault(s, a, "POST", ci.token(s, a), {"credentials": [ci.cred("k", SECRET)],
                                                 "bindings": [{
        "name": "tls", "match": {"hosts": ["api.test", "bad.test", "alias.test"],
                                 "paths": ["/v1/*"]},
        "auth": {"type": "bearer", "credential": "k"}}]})
    check(r.status == 201, "an https binding on docker: %r" % r)
    ci.no_secret("the POST answer", r.body.decode())


def injected(e, a, up, what):
    out = tls(e, a, ADDRS["api.test"], "api.test", "api.test", "/v1/models", None,
              "Authorization:Bearer mine")
    check(out.startswith("ISSUER=sbx_credential_proxy_" + a[:8]) and
          "ok-from-" + ADDRS["api.test"] + "/tls" in out,
          "%s: HTTPS to a bound name, verified with the container's bundle: %r" % (what, out))
    ci.no_secret("the HTTPS answer", out)
    h = ci.one_head(up, what)
    hs = ci.headers(h["head"])
    check(h["to"] == ADDRS["api.test"] + "/tls" and auths(h) == ["Bearer " + SECRET] and
          ("connection", "close") in hs, "%s: injected over TLS: %r" % (what, h))


def spliced_and_spoofs(e, a, up, pki):
    test_ca = os.path.join(pki, "ca.pem")
    out = tls(e, a, ADDRS["other.test"], "other.test", "other.test", "/v1/x", test_ca)
    check(out.startswith("ISSUER=sbx_test_upstream_CA") and "ok-from-" in out,
          "an unbound name is spliced: the upstream's own certificate: %r" % out)
    h = ci.one_head(up, "spliced")
    check("keep-alive" in h["head"] and not auths(h), "untouched: %r" % h)
    out = tls(e, a, ADDRS["evil.test"], "api.test", "api.test", "/v1/x", test_ca)
    h = ci.one_head(up, "the SNI/Host spoof")
    check(h["to"] == ADDRS["evil.test"] + "/tls" and out.startswith("ISSUER=sbx_test_upstream"),
          "evil.test's address with SNI api.test: spliced to evil.test: %r %r" % (out, h))
    ci.no_secret("what evil.test got", h["head"])
    out = tls(e, a, ADDRS["alias.test"], "alias.test", "api.test", "/v1/x")
    h = ci.one_head(up, "Host other than the SNI")
    check("ok-from-" in out and not auths(h), "Host other than SNI: nothing: %r %r" % (out, h))
    out = tls(e, a, ADDRS["bad.test"], "bad.test", "bad.test", "/v1/x")
    check(out.startswith("ISSUER=sbx_credential_proxy") and "ok-from-" not in out,
          "bad.test: terminated, then closed unanswered: %r" % out)
    check(up.new() == [], "nothing reached an upstream that did not verify")


def no_bundle(s, e, sid, up, pki, marker, what, md5):
    """An image without a bundle (or with one only the host has, or one too large): nothing
    bound, no CA, HTTPS spliced, never injected. md5: the image's own file's, or None (none)."""
    # (read by the container: through /proc/<pid>/root the host would follow an absolute link)
    got = sh(s, sid, "md5sum %s 2>&1; cat %s 2>&1 | head -c 4096; echo read" % (BUNDLE, BUNDLE))
    check(got.endswith("read") and marker not in got and
          (md5 in got if md5 else "No such file" in got and "BEGIN" not in got),
          "%s: the image's own file (none, not the host's), no CA: %r" % (what, got[:160]))
    check(not os.path.exists(os.path.join(s.state, "credproxy", sid + ".pem")),
          "%s: no bundle made" % what)
    check("SSL_CERT_FILE" not in sh(s, sid, "env"), "%s: no bundle in the env" % what)
    resolve(s, sid, "api.test")
    out = tls(e, sid, ADDRS["api.test"], "api.test", "api.test", "/v1/x",
              os.path.join(pki, "ca.pem"))
    check(out.startswith("ISSUER=sbx_test_upstream_CA") and "ok-from-" in out,
          "%s: HTTPS spliced end to end: %r" % (what, out))
    h = ci.one_head(up, what)
    check(not auths(h), "%s: never injected: %r" % (what, h))


def restart(s, e, a, up):
    port = tls_port(e, a)
    s.kill9()
    s.start()
    wait_for(lambda: tls_port(e, a) not in (None, port), "a new 443 listener after the restart "
             "(%s)" % table(e, a), 30)
    resolve(s, a, "api.test")
    injected(e, a, up, "after kill -9 and a restart (the same CA: the bundle still verifies)")


def run(new_server, setup, tag, up, pki, images, marker):
    e = setup.engine
    bridge, subnet = "sbxdh%d" % tag, "10.236.%d.0/24" % tag
    s = new_server(config_text=(
        'providers = { supported = ["docker"]; default = "docker";\n'
        '  docker = { socket = "%s"; cgroup_parent = "%s"; stop_timeout_s = 2;\n'
        '             bridge = "%s"; subnet = "%s"; egress_dns = "%s";\n'
        '             credproxy_upstream_ca = "%s"; }; };\n'
        % (e.socket, e.cgroup_parent, bridge, subnet, UP, os.path.join(pki, "ca.pem"))),
        tag="docker-credproxy-https")
    pol = {"defaultAction": "deny", "egress": [
        {"action": "allow", "target": t} for t in ("api.test", "evil.test", "other.test",
                                                    "bad.test", "alias.test")]}
    print("engine: %s" % e.kind)
    try:
        s.start()
        e.image = images["ca"]
        r = create(s, e, networkPolicy=pol, credentialProxy={"enabled": True})
        check(r.status == 202, "create a: %r" % r)
        a = r.json()["id"]
        bundle_checks(s, e, a, images["base"])
        vault_setup(s, a)
        check(tls_port(e, a), "443 redirected to the proxy: %s" % table(e, a))
        resolve(s, a, "api.test", "other.test", "evil.test", "alias.test", "bad.test")
        t0 = time.time()
        injected(e, a, up, "HTTPS bearer")
        print("an injected HTTPS request (python in the container's namespace): %.2f s"
              % (time.time() - t0))
        spliced_and_spoofs(e, a, up, pki)
        for img in ("hostlink", "huge", "plain"):
            e.image = images[img]
            r = create(s, e, networkPolicy=pol, credentialProxy={"enabled": True})
            check(r.status == 202, "create (%s): %r" % (img, r))
            sid = r.json()["id"]
            r = ci.vault(s, sid, "POST", ci.token(s, sid), {
                "credentials": [ci.cred("k", SECRET)], "bindings": [{
                    "name": "tls", "match": {"hosts": ["api.test"]},
                    "auth": {"type": "bearer", "credential": "k"}}]})
            check(r.status == 201, "vault (%s): %r" % (img, r))
            no_bundle(s, e, sid, up, pki, marker, "image " + img, images.get(img + "-md5"))
            check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        for what, cmd in (("env", "env; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; echo scanned"),
                          ("files", "grep -rlsF -e '%s' /etc /tmp /root 2>/dev/null | head -3; "
                                    "echo scanned" % SECRET)):
            out = sh(s, a, cmd, timeout=120)
            check("scanned" in out, "the %s check ran" % what)
            ci.no_secret("the container's " + what, out)
        restart(s, e, a, up)
        print("checked: bundle, injection, splice, spoofs, bad upstream, no-bundle images, "
              "no value, kill -9 restart")
        pem = os.path.join(s.state, "credproxy", a + ".pem")
        check(os.path.exists(pem), "the sandbox's bundle in the state dir")
        check(s.request("DELETE", "/v1/sandboxes/" + a).status == 204, "delete a")
        check(not os.path.exists(pem), "delete: its bundle is gone")
        check(not [c for c in e.containers() if c.get("Names", [""])[0].endswith("-ca")],
              "no CA reader container left")
        ci.no_secret("the server's log", s.log(full=True))
        check(s.stop() == 0, "clean stop")
    finally:
        s.kill9()
        e.remove_all()
        remove_bridge(s.sbx, bridge, subnet)  # its leaf bridges too


def test(new_server):
    setup = eng.Setup(sys.argv[2] if len(sys.argv) > 2 else "dockerd")
    tag = os.getpid() % 200 + 20
    pki = tempfile.mkdtemp(prefix="sbx-dhttps-pki-")
    ci.make_pki(pki)
    base = base_ca(pki)
    marker = "host-only-" + base64.b16encode(os.urandom(8)).decode()
    host_file = os.path.join(pki, "hostfile.pem")
    with open(host_file, "w") as f:
        f.write(marker + "\n")
    fd, log = tempfile.mkstemp(prefix="sbx-dhttps-upstream-")
    os.close(fd)
    world = ci.World(tag, log, pki, net=NET, name="dh")
    huge = base * (9 * 2**20 // len(base))

    def images():
        return {"plain": setup.image, "base": base,
                "ca": setup.registry.push_busybox(tag="ca", extra=[
                    ("etc/ssl/cert.pem", base),
                    ("etc/ssl/certs/ca-certificates.crt", "->../cert.pem")]),
                "hostlink": setup.registry.push_busybox(tag="hostlink", extra=[
                    ("etc/ssl/certs/ca-certificates.crt", "->" + host_file)]),
                "huge": setup.registry.push_busybox(tag="huge", extra=[
                    ("etc/ssl/certs/ca-certificates.crt", huge)]),
                "huge-md5": hashlib.md5(huge).hexdigest()}

    def body(imgs):
        world.up()
        try:
            run(new_server, setup, tag, ci.Upstream(log), pki, imgs, marker)
        finally:
            world.down()

    setup.run_test(body, prepare=images,
                   cleanup=lambda: subprocess.run(["rm", "-rf", log, pki], capture_output=True))


if __name__ == "__main__":
    main(test)
