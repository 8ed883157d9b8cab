#!/usr/bin/python3
"""(d) deploy/kubernetes's sbx.conf (the ConfigMap as `kubectl kustomize` renders it) loaded by
a real `sbx serve` in the in-cluster mode, against the FAKE Kubernetes API server
(tests/integration/kubernetes/fake_apiserver.py; pods run as real processes):

  the server runs as the Deployment's non-root user with the files the pod would have: the
  service account dir (token, ca.crt, namespace: SBX_KUBERNETES_SA_DIR, since
  /var/run/secrets/... is the host's), KUBERNETES_SERVICE_HOST/PORT, the master key at the
  config's secrets.key_file (a private mount namespace with a tmpfs on /run, as the pod's
  memory volume) and the API key in the state dir (what the init container `keys` copies);
  the execd image is the one deploy/images/build.sh makes, named as the config names it.
  Then: the key is the Secret's (no new key generated, a wrong one 401), the secret store
  opens with the configured master key, a sandbox is created in the service account's
  namespace (no provider named: the config's default), runs commands through the router
  (connect = "pod-ip"), and is deleted; every request the provider made is covered by the
  Role of the manifests, in that one namespace.

argv: SBX_CLI SBX_EXECD_STATIC. Root (the fake's network namespaces, the mount namespace)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "kubernetes"))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
from harness import Skip, check, main, wait_for, Server  # noqa: E402

SKIP = 77


def rbac_of(method, path, query):
    """The (apiGroup, resource, verb) RBAC checks for one request of the provider, and the
    namespace."""
    m = re.match(r"^/api/v1/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?(?:/([^/]+))?$", path)
    if not m:
        return None, ("", path, method)
    ns, res, name, sub = m.groups()
    if sub:
        res = res + "/" + sub
    watch = "watch=1" in query or "watch=true" in query
    verb = {"POST": "create", "DELETE": "delete", "PUT": "update", "PATCH": "patch"}.get(method)
    if method == "GET":
        verb = "watch" if watch else ("get" if name else "list")
    return ns, ("", res, verb)


class PodLikeServer(Server):
    """`sbx serve` as the Deployment runs it: its user, its config file, the master key on a
    tmpfs at /run/sbx/keys (its own mount namespace), the API key in the state dir."""

    def __init__(self, sbx, conf, uid, env, master_key):
        super().__init__(sbx, config_text=conf, tag="incluster", env=env)
        self.uid = uid
        self.master_key = master_key

    def start(self, expect_fail=False):
        for d in (self.tmp, self.state):
            os.makedirs(d, exist_ok=True)
            os.chown(d, self.uid, self.uid)
        os.chmod(self.tmp, 0o755)
        os.chmod(self.config, 0o644)
        key_dir = "/run/sbx/keys"
        script = ('set -e; mount -t tmpfs -o mode=0755 sbx-test-run /run; mkdir -p %s; '
                  'install -o %d -g %d -m 0600 "$1" %s/master.key; shift; exec "$@"'
                  % (key_dir, self.uid, self.uid, key_dir))
        self.wrapper = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                        script, "sh", self.master_key, "setpriv", "--reuid", str(self.uid),
                        "--regid", str(self.uid), "--clear-groups", "--"]
        self.extra_args = ["--log-format", "text"]
        return super().start(expect_fail)


def test(new_server):
    if os.geteuid() != 0:
        raise Skip("needs root (the fake's pods, a mount namespace)")
    try:
        import manifests as m
        import images
        from test_kube_fake import Fake, TOKEN
    except ImportError as e:
        raise Skip("%s (Debian's python3-kubernetes, python3-yaml)" % e)
    if not shutil.which("kubectl") or not shutil.which("openssl"):
        raise Skip("kubectl and openssl are needed")
    objs = m.load(m.kustomize())
    conf = m.conf_text(objs)
    dep = m.of_kind(objs, "Deployment")[0]
    ns = dep["metadata"]["namespace"]
    uid = dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    execd_ref = m.conf_value(conf, "execd_image")
    check(ns == "sbx", "the manifests' namespace: %r" % ns)

    tmp = tempfile.mkdtemp(prefix="sbx-deploy-incluster-")
    fake = None
    s = None
    try:
        # the execd image as build.sh makes it; the config must name it by its tag
        img = images.build("execd", os.path.dirname(os.path.abspath(sys.argv[2])), tmp)
        manifest, _, _ = images.read(img)
        check(manifest["RepoTags"] == [execd_ref],
              "the config's execd_image %r is the image build.sh tags (%r)"
              % (execd_ref, manifest["RepoTags"]))
        root = images.unpack(img, os.path.join(tmp, "execd-root"))
        fake = Fake(sys.argv[2], extra_args=["--image", "%s=%s" % (execd_ref, root)])
        fake.start()
        # what the pod has: its service account's files, and the Secret's keys
        sa = os.path.join(tmp, "serviceaccount")
        os.makedirs(sa)
        shutil.copy(fake.ca, os.path.join(sa, "ca.crt"))
        for name, text in (("token", TOKEN), ("namespace", ns)):
            with open(os.path.join(sa, name), "w") as f:
                f.write(text)
        for dirpath, _, files in os.walk(sa):
            os.chmod(dirpath, 0o755)
            for f in files:
                os.chown(os.path.join(dirpath, f), uid, uid)
                os.chmod(os.path.join(dirpath, f), 0o600)
        os.chmod(tmp, 0o755)
        master = os.path.join(tmp, "master.key")
        with open(master, "wb") as f:
            f.write(os.urandom(32))
        api_key = os.urandom(32).hex()
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
                   KUBERNETES_SERVICE_PORT=str(fake.port), SBX_KUBERNETES_SA_DIR=sa)
        env.pop("KUBECONFIG", None)
        s = PodLikeServer(sys.argv[1], conf, uid, env, master)
        os.makedirs(s.state)
        with open(os.path.join(s.state, "api-key"), "w") as f:
            f.write(api_key + "\n")
        os.chmod(os.path.join(s.state, "api-key"), 0o600)
        os.chown(os.path.join(s.state, "api-key"), uid, uid)
        s.start()
        lifecycle(s, fake, ns, uid, api_key, m)
        check(s.stop() == 0, "a clean stop")
    except Exception:
        if s:
            print("---- server log ----\n" + s.log())
        if fake:
            print("---- fake API server log ----\n" + fake.log())
            fake.dump()
        raise
    finally:
        if s:
            s.cleanup()
        if fake:
            fake.teardown()
        shutil.rmtree(tmp, ignore_errors=True)


def lifecycle(s, fake, ns, uid, api_key, m):
    check(s.key == api_key, "the server uses the Secret's API key")
    check("generated a new API key" not in s.log(), "no key generated: %s" % s.log())
    check(s.request("GET", "/v1/sandboxes", key="0" * 64).status == 401, "a wrong key: 401")
    owner = subprocess.run(["ps", "-o", "uid=", "-p", str(s.proc.pid)], capture_output=True,
                           text=True).stdout.strip()
    check(fake.requests() == [], "no request to the API server at startup (lazy)")
    # the secret store opens with secrets.key_file (the memory volume), not <state>'s own key
    r = s.request("PUT", "/v1/admin/secrets/DEPLOY_TEST", {"value": "v"})
    check(r.status == 200, "the secret store opens with the configured master key: %r" % r)
    check(not os.path.exists(os.path.join(s.state, "secrets", "master.key")),
          "no master key made in the state dir")
    r = s.request("POST", "/v1/sandboxes", {"image": {"uri": "sbx-base:test"},
                                            "entrypoint": ["sleep", "3600"], "timeout": 600,
                                            "resourceLimits": {"cpu": "500m",
                                                               "memory": "256Mi"}})
    check(r.status == 202, "create with the config's default provider: %r" % r)
    sid = r.json()["id"]
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"]
             == "Running", "sandbox %s Running" % sid, 90)
    pod = fake.pod(ns, "sbx-" + sid)
    check(pod is not None, "the pod is in the service account's namespace %s" % ns)
    init = pod["spec"]["initContainers"][0]
    check(init["image"] == m.conf_value(s_conf(s), "execd_image"),
          "the init container runs the configured execd image: %r" % init["image"])
    out, events = s.run(sid, "echo in-cluster-ok; id -u; echo $HOSTNAME")
    check(events[-1]["type"] == "execution_complete" and out[0] == "in-cluster-ok"
          and out[2] == "sbx-" + sid, "a command through the router (pod-ip): %r" % out)
    check(not [x for x in fake.requests() if "/portforward" in x.get("path", "")],
          "connect = pod-ip: no port-forward through the API server")
    r = s.request("DELETE", "/v1/sandboxes/" + sid)
    check(r.status == 204, "delete: %r" % r)
    check(fake.pod(ns, "sbx-" + sid) is None, "the pod is gone")
    # every call the provider made is allowed by the manifests' Role, in its namespace
    calls = set()
    for x in fake.requests():
        if x["path"].startswith("/fake/"):
            continue
        q = x.get("query") or ""
        if isinstance(q, dict):
            q = urllib.parse.urlencode(q, doseq=True)
        rns, rule = rbac_of(x["method"], x["path"], q)
        check(rns == ns, "a request outside the namespace %s: %r" % (ns, x))
        calls.add(rule)
    print("the provider's calls: %s" % sorted(calls))
    check(calls <= m.RBAC, "the Role covers every call; not covered: %r" % (calls - m.RBAC))
    check(owner == str(uid), "the server ran as the Deployment's user %d (ps: %r)"
          % (uid, owner))


def s_conf(s):
    with open(s.config) as f:
        return f.read()


if __name__ == "__main__":
    main(test)
