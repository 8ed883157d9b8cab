#!/usr/bin/python3
"""kubernetes/live: sbx against a REAL cluster, only when one is given; exit 77 otherwise.

  SBX_TEST_KUBECONFIG         a kubeconfig (required; its current context unless
                              SBX_TEST_KUBE_CONTEXT names another)
  SBX_TEST_KUBE_NAMESPACE     where part 1 makes its pods (default: the context's, else default)
  SBX_TEST_KUBE_EXECD_IMAGE   the execd image as the cluster pulls it (default
                              sbx-execd:VERSION, e.g. after `kind load image-archive
                              build/images/sbx-execd.tar`)
  SBX_TEST_KUBE_IMAGE         the sandboxes' image (default busybox:1.36)
  SBX_TEST_KUBE_SBX_IMAGE     the server image as the cluster pulls it (repo:tag); when set,
                              part 2 runs

Part 1, sbx outside the cluster: a local `sbx serve` with the kubernetes provider on that
kubeconfig (connect = "portforward"): create, Running, a command and a file through the router
(pods/portforward), delete; the pod is gone.

Part 2, sbx inside it (docs/deploy-kubernetes.md, step by step): a namespace of its own
(sbx-live-<pid>), the Secret sbx-keys, deploy/kubernetes applied through an overlay (that
namespace, the images), `kubectl rollout status`, `kubectl port-forward svc/sbx`, then the same
lifecycle through the deployed server (connect = "pod-ip"); the namespace is deleted at the
end whatever happened. Needs kubectl and a default StorageClass in the cluster.

argv: SBX_CLI. The cluster is the one given: this test sends traffic there and nowhere else."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, os.path.join(HERE, "..", "deploy"))
from harness import Fail, check, main, wait_for  # noqa: E402

KUBECONFIG = os.environ.get("SBX_TEST_KUBECONFIG", "")


def version():
    with open(os.path.join(TOP, "CMakeLists.txt")) as f:
        return re.search(r"project\(sbx VERSION ([0-9.]+)", f.read()).group(1)


EXECD_IMAGE = os.environ.get("SBX_TEST_KUBE_EXECD_IMAGE") or "sbx-execd:" + version()
IMAGE = os.environ.get("SBX_TEST_KUBE_IMAGE") or "busybox:1.36"
SBX_IMAGE = os.environ.get("SBX_TEST_KUBE_SBX_IMAGE", "")
CONTEXT = os.environ.get("SBX_TEST_KUBE_CONTEXT", "")
NAMESPACE = os.environ.get("SBX_TEST_KUBE_NAMESPACE", "")


def kubectl(*args, input=None, check_rc=True, timeout=300):
    argv = ["kubectl", "--kubeconfig", KUBECONFIG] + (["--context", CONTEXT] if CONTEXT else [])
    p = subprocess.run(argv + list(args), input=input, capture_output=True, text=True,
                       timeout=timeout)
    if check_rc:
        check(p.returncode == 0, "kubectl %s: %s" % (" ".join(args), p.stderr[-2000:]))
    return p


class Api:
    """The OpenSandbox API of a server at base with key (the harness's Server for part 1, a
    port-forwarded one for part 2)."""

    def __init__(self, base, key):
        self.base, self.key = base, key

    def request(self, method, path, body=None, timeout=120):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "OPEN-SANDBOX-API-KEY": self.key, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


def lifecycle(api, ns, what):
    t0 = time.time()
    status, body = api.request("POST", "/v1/sandboxes", {
        "image": {"uri": IMAGE}, "entrypoint": ["sleep", "3600"], "timeout": 900,
        "resourceLimits": {"cpu": "250m", "memory": "128Mi"}, "metadata": {"test": "live"}},
        timeout=600)
    check(status == 202, "%s: create: %d %s" % (what, status, body[:500]))
    sid = json.loads(body)["id"]
    try:
        def running():
            st, b = api.request("GET", "/v1/sandboxes/" + sid)
            state = json.loads(b)["status"] if st == 200 else {}
            check(state.get("state") not in ("Failed", "Terminated"),
                  "%s: the sandbox failed: %r" % (what, state))
            return state.get("state") == "Running"
        wait_for(running, "%s: sandbox %s Running" % (what, sid), 600)
        print("ok   %s: Running in %.1f s" % (what, time.time() - t0))
        pod = kubectl("-n", ns, "get", "pod", "sbx-" + sid, "-o", "json")
        spec = json.loads(pod.stdout)["spec"]
        check(spec["initContainers"][0]["image"] == EXECD_IMAGE,
              "%s: the init container runs %s" % (what, EXECD_IMAGE))
        status, body = api.request("POST", "/sandboxes/%s/proxy/44772/command" % sid,
                                   {"command": "echo live-ok; echo $HOSTNAME"})
        check(status == 200, "%s: a command through the router: %d %s" % (what, status, body))
        out = [e["text"] for e in (json.loads(x) for x in body.decode().split("\n\n")
                                   if x.strip()) if e["type"] == "stdout"]
        check(out[:2] == ["live-ok", "sbx-" + sid], "%s: the output: %r" % (what, out))
        print("ok   %s: a command in the pod through the router" % what)
    finally:
        status, _ = api.request("DELETE", "/v1/sandboxes/" + sid, timeout=300)
    check(status == 204, "%s: delete: %d" % (what, status))
    p = kubectl("-n", ns, "get", "pod", "sbx-" + sid, check_rc=False)
    check(p.returncode != 0 and "NotFound" in p.stderr, "%s: the pod is gone: %s"
          % (what, p.stdout + p.stderr))
    print("ok   %s: deleted, the pod is gone" % what)


def outside(new_server):
    ns = NAMESPACE or kubectl("config", "view", "--minify", "-o",
                              "jsonpath={..namespace}").stdout.strip() or "default"
    conf = ('providers = { supported = ["kubernetes"]; default = "kubernetes";\n'
            '  kubernetes = { kubeconfig = "%s"; %s namespace = "%s"; execd_image = "%s";\n'
            '    connect = "portforward"; }; };\n'
            % (os.path.abspath(KUBECONFIG), ('context = "%s";' % CONTEXT) if CONTEXT else "",
               ns, EXECD_IMAGE))
    s = new_server(config_text=conf, tag="kube-live")
    s.start()
    lifecycle(Api("http://127.0.0.1:%d" % s.port, s.key), ns, "outside (portforward)")
    check(s.stop() == 0, "a clean stop")


def inside():
    import manifests as m
    ns = "sbx-live-%d" % os.getpid()
    pf = None
    tmp = tempfile.mkdtemp(prefix="sbx-kube-live-")
    kubectl("create", "namespace", ns)
    try:
        key = os.urandom(32).hex()
        with open(os.path.join(tmp, "api-key"), "w") as f:
            f.write(key + "\n")
        with open(os.path.join(tmp, "master.key"), "wb") as f:
            f.write(os.urandom(32))
        kubectl("-n", ns, "create", "secret", "generic", "sbx-keys",
                "--from-file=api-key=" + os.path.join(tmp, "api-key"),
                "--from-file=master.key=" + os.path.join(tmp, "master.key"))
        with open(os.path.join(TOP, "deploy", "kubernetes", "sbx.conf")) as f:
            conf = re.sub(r'execd_image = "[^"]*";', 'execd_image = "%s";' % EXECD_IMAGE,
                          f.read())
        odir = os.path.join(tmp, "overlay")
        os.makedirs(odir)
        text = m.overlay(odir, ns, conf=conf, image=SBX_IMAGE)
        kubectl("apply", "-f", "-", input=text)
        t0 = time.time()
        p = kubectl("-n", ns, "rollout", "status", "deployment/sbx", "--timeout=300s",
                    check_rc=False, timeout=330)
        if p.returncode != 0:
            logs = kubectl("-n", ns, "logs", "deployment/sbx", "--all-containers",
                           check_rc=False).stdout
            desc = kubectl("-n", ns, "describe", "pods", check_rc=False).stdout
            raise Fail("the Deployment did not roll out: %s\n%s\n%s" % (p.stderr, logs[-3000:],
                                                                       desc[-3000:]))
        print("ok   inside: the Deployment is ready in %.1f s" % (time.time() - t0))
        argv = ["kubectl", "--kubeconfig", KUBECONFIG] + \
            (["--context", CONTEXT] if CONTEXT else []) + \
            ["-n", ns, "port-forward", "svc/sbx", ":8080"]
        pf = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = pf.stdout.readline()
        mt = re.search(r"127\.0\.0\.1:(\d+)", line)
        check(mt, "kubectl port-forward: %r %s" % (line, pf.stderr.read() if pf.poll() else ""))
        api = Api("http://127.0.0.1:%s" % mt.group(1), key)
        status, body = api.request("GET", "/health")
        check(status == 200, "/health through the Service: %d %s" % (status, body))
        status, _ = api.request("GET", "/v1/sandboxes")
        check(status == 200, "the Secret's API key: %d" % status)
        lifecycle(api, ns, "inside (the Deployment, pod-ip)")
    finally:
        if pf and pf.poll() is None:
            pf.send_signal(signal.SIGTERM)
            pf.wait(timeout=30)
        kubectl("delete", "namespace", ns, "--wait=true", "--timeout=300s", check_rc=False,
                timeout=330)


def test(new_server):
    outside(new_server)
    if SBX_IMAGE:
        inside()
    else:
        print("part 2 (the manifests in the cluster) skipped: SBX_TEST_KUBE_SBX_IMAGE is not set")


if __name__ == "__main__":
    if not KUBECONFIG:
        print("SKIP: no SBX_TEST_KUBECONFIG: the live Kubernetes test needs a real cluster "
              "(docs/deploy-kubernetes.md, \"Tests\")")
        sys.exit(77)
    if not os.path.exists(KUBECONFIG):
        print("FAIL: SBX_TEST_KUBECONFIG=%s does not exist" % KUBECONFIG)
        sys.exit(1)
    if not shutil.which("kubectl"):
        print("SKIP: no kubectl (not a Debian 12 package: the Kubernetes project's apt repository)")
        sys.exit(77)
    main(test)
