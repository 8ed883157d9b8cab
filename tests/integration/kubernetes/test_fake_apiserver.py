#!/usr/bin/python3
"""The FAKE Kubernetes API server (fake_apiserver.py) driven by the OFFICIAL client, Debian's
python3-kubernetes (CoreV1Api, kubernetes.watch.Watch, kubernetes.stream.portforward): if the
client can use it, it speaks the real wire protocol. A pod in the shape sbx's provider makes
(init container installing sbx-execd into an emptyDir, main container running it) runs for real
in its own network namespace; the test reaches execd through pods/portforward and straight at
the pod IP, runs a command, reads logs and events, selects, watches (410 after the history),
gets schema rejections, injected 429/500s, restarts the fake with --state (the pod survives),
evicts, OOM-kills, drives statuses, schedules on a PVC, and checks that every network
namespace, veth, bridge, process and directory it made is gone at the end.

Usage: test_fake_apiserver.py SBX_EXECD_STATIC   (root; exit 77 without root or the client)
"""
from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from typing import Any, Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
NS = "default"
TOKEN = "kfake-token-3f9c1d"
EXECD_TOKEN = "execd-token-77aa"
EXECD_PORT = 44772
PREFIX = "kt%x" % (os.getpid() & 0xFFFFF)


def free_cidr() -> str:
    """A /24 in 10.200-249.x.0 that no route on the host overlaps (parallel tests, sbx's
    10.88.0.0/16), starting from one derived from our pid."""
    import ipaddress
    routes = json.loads(subprocess.run(["ip", "-j", "-4", "route", "show"], capture_output=True,
                                       text=True).stdout or "[]")
    used = [ipaddress.ip_network(r["dst"], strict=False) for r in routes
            if r.get("dst") not in (None, "", "default")]
    for k in range(12800):
        n = (os.getpid() * 7 + k) % 12800
        net = ipaddress.ip_network("10.%d.%d.0/24" % (200 + n // 256, n % 256))
        if not any(net.overlaps(u) for u in used):
            return str(net)
    raise RuntimeError("no free /24 for the pod network")


CIDR = free_cidr()

try:
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException
    from kubernetes.stream import portforward
except ImportError as _e:
    print("SKIP: python3-kubernetes is missing (%s); scripts/deps.sh installs it" % _e)
    sys.exit(SKIP)


class Fail(Exception):
    """A failed check."""


def check(cond: Any, what: str) -> None:
    if not cond:
        raise Fail(what)


def wait_for(fn: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    raise Fail("timed out waiting for " + what)


START = time.time()


def note(what: str) -> None:
    """A progress line with the time since the start (the machine may be loaded)."""
    print("  .. %s (t=%.1f s)" % (what, time.time() - START), flush=True)


def sh(*argv: str) -> str:
    p = subprocess.run(list(argv), capture_output=True, text=True)
    check(p.returncode == 0, "%s: %s" % (" ".join(argv), p.stderr))
    return p.stdout


class Fake:
    """The fake API server process, its certificates, kubeconfig and state."""

    def __init__(self, tmp: str, execd: str) -> None:
        self.tmp = tmp
        self.state = os.path.join(tmp, "state.json")
        self.data = os.path.join(tmp, "data")
        self.kubeconfig = os.path.join(tmp, "kubeconfig")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.port = 0
        self.logf = os.path.join(tmp, "fake.log")
        self.make_certs()
        self.make_images(execd)

    def make_certs(self) -> None:
        t = self.tmp
        ca, cakey = os.path.join(t, "ca.pem"), os.path.join(t, "ca.key")
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", cakey,
           "-out", ca, "-days", "1", "-subj", "/CN=kfake-ca")
        for who, subj, ext in (("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1"),
                               ("client", "/CN=sbx/O=system:masters", "extendedKeyUsage="
                                "clientAuth")):
            key, csr, crt = (os.path.join(t, who + x) for x in (".key", ".csr", ".pem"))
            sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
               "-subj", subj)
            extf = os.path.join(t, who + ".ext")
            with open(extf, "w") as f:
                f.write(ext + "\n")
            sh("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey,
               "-CAcreateserial", "-out", crt, "-days", "1", "-extfile", extf)
        self.ca = ca
        self.ctx = ssl.create_default_context(cafile=ca)

    def make_images(self, execd: str) -> None:
        """`sbx-execd:test` holds /sbx-execd (and /bin/cp while execd has no --install)."""
        d = os.path.join(self.tmp, "img-execd")
        os.makedirs(os.path.join(d, "bin"))
        shutil.copy(execd, os.path.join(d, "sbx-execd"))
        shutil.copy("/bin/cp", os.path.join(d, "bin", "cp"))
        self.execd_img = d
        helpt = subprocess.run([execd, "--help"], capture_output=True, text=True).stdout
        self.install_cmd = (["/sbx-execd", "--install", "/opt/sbx/sbx-execd"]
                            if "--install" in helpt else
                            ["/bin/cp", "/sbx-execd", "/opt/sbx/sbx-execd"])

    def start(self, *extra: str) -> None:
        portf = os.path.join(self.tmp, "port")
        if os.path.exists(portf):
            os.unlink(portf)
        argv = [sys.executable, os.path.join(HERE, "fake_apiserver.py"),
                "--cert", os.path.join(self.tmp, "server.pem"),
                "--key", os.path.join(self.tmp, "server.key"),
                "--kubeconfig-ca", self.ca, "--client-ca", self.ca, "--token", TOKEN,
                "--listen", "127.0.0.1:%d" % self.port, "--port-file", portf,
                "--kubeconfig-out", self.kubeconfig, "--state", self.state,
                "--data-dir", self.data, "--pod-cidr", CIDR, "--name-prefix", PREFIX,
                "--image", "sbx-execd:test=" + self.execd_img, "--image", "sbx-base:test=/",
                "--pull-policy", "strict", "--watch-history", "60",
                "--bookmark-interval", "1", "--keep-on-exit"] + list(extra)
        with open(self.logf, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log)
        wait_for(lambda: os.path.exists(portf) or self.proc.poll() is not None,
                 "the fake to listen", 120)
        check(self.proc.poll() is None, "the fake started: %s" % self.log())
        self.port = int(open(portf).read())
        config.load_kube_config(self.kubeconfig)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        try:
            return open(self.logf).read()[-20000:]
        except OSError:
            return ""

    def raw(self, method: str, path: str, body: Any = None, token: Optional[str] = TOKEN,
            ctype: str = "application/json") -> tuple[int, Any, dict[str, str]]:
        """One request without the client: (status, parsed body or text, headers)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": ctype}
        if token:
            headers["Authorization"] = "Bearer " + token
        req = urllib.request.Request("https://127.0.0.1:%d%s" % (self.port, path), data=data,
                                     method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.ctx) as r:
                code, text, hdrs = r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            code, text, hdrs = e.code, e.read(), dict(e.headers)
        try:
            return code, json.loads(text), hdrs
        except ValueError:
            return code, text.decode(), hdrs

    def ctl(self, path: str, body: Any = None, method: str = "POST") -> Any:
        code, out, _ = self.raw(method, "/fake/" + path, body if body is not None else {})
        check(code == 200, "control %s: %s %s" % (path, code, out))
        return out


def contract_pod(fake: Fake, name: str, entry: list[str], labels: dict[str, str],
                 extra_volumes: Optional[list[Any]] = None,
                 extra_mounts: Optional[list[Any]] = None) -> dict[str, Any]:
    """The pod sbx's kubernetes provider makes (issue 14)."""
    mounts = [{"name": "sbx-bin", "mountPath": "/opt/sbx"}] + (extra_mounts or [])
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"sbx.dev/ttl": "600"}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "initContainers": [{"name": "install", "image": "sbx-execd:test",
                                "command": fake.install_cmd,
                                "volumeMounts": [{"name": "sbx-bin", "mountPath": "/opt/sbx"}]}],
            "containers": [{
                "name": "sandbox", "image": "sbx-base:test",
                "command": ["/opt/sbx/sbx-execd", "--port", str(EXECD_PORT), "--"],
                "args": entry,
                "env": [{"name": "EXECD_ACCESS_TOKEN", "value": EXECD_TOKEN},
                        {"name": "SBX_SANDBOX", "value": name},
                        {"name": "GREETING", "value": "hi-$(SBX_SANDBOX)"}],
                "workingDir": "/tmp",
                "ports": [{"containerPort": EXECD_PORT, "name": "execd"}],
                "resources": {"limits": {"cpu": "500m", "memory": "512Mi"},
                              "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": mounts}],
            "volumes": [{"name": "sbx-bin", "emptyDir": {}}] + (extra_volumes or [])}}


def wait_phase(v1: client.CoreV1Api, name: str, phases: set[str], timeout: float = 90,
               rv: Optional[str] = None) -> tuple[client.V1Pod, list[str]]:
    """Watch the pod (official Watch) until its phase is in `phases`; the event types seen."""
    seen: list[str] = []
    w = watch.Watch()
    kw: dict[str, Any] = {"field_selector": "metadata.name=" + name,
                          "timeout_seconds": int(timeout)}
    if rv:
        kw["resource_version"] = rv
    for ev in w.stream(v1.list_namespaced_pod, NS, **kw):
        seen.append(ev["type"])
        pod = ev["object"]
        if pod.status and pod.status.phase in phases:
            w.stop()
            return pod, seen
    raise Fail("pod %s never reached %s (events %s): %s" % (name, phases, seen,
                                                             v1.read_namespaced_pod(name, NS)))


def pf_api() -> client.CoreV1Api:
    """A CoreV1Api of its own for each port-forward: kubernetes.stream swaps the ApiClient's
    request method during the call, which is not thread-safe on a shared client."""
    return client.CoreV1Api(client.ApiClient())


def execd_http(sock: Any, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    """HTTP/1.1 to execd over an already connected socket (a port-forward's)."""
    conn = http.client.HTTPConnection("127.0.0.1", EXECD_PORT, timeout=20)
    conn.sock = sock
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"X-EXECD-ACCESS-TOKEN": EXECD_TOKEN,
                                                   "Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.read()


def run_command(sock: Any, cmd: str) -> str:
    """POST /command through `sock`; stdout joined."""
    code, body = execd_http(sock, "POST", "/command", {"command": cmd})
    check(code == 200, "execd /command: %d %r" % (code, body))
    out = []
    for chunk in body.split(b"\n\n"):
        if chunk.strip():
            ev = json.loads(chunk)
            if ev.get("type") == "stdout":
                out.append(ev["text"])
            check(ev.get("type") != "error", "command failed: %r" % ev)
    return "\n".join(out)


def expect_api_error(fn: Callable[[], Any], status: int, what: str) -> dict[str, Any]:
    try:
        fn()
    except ApiException as e:
        check(e.status == status, "%s: status %s, wanted %d: %s" % (what, e.status, status,
                                                                  e.body))
        body = json.loads(e.body)
        check(body.get("kind") == "Status" and body.get("apiVersion") == "v1" and
              body.get("status") == "Failure" and body.get("code") == status,
              "%s: a Status object: %r" % (what, body))
        return body
    raise Fail("%s: no error" % what)


# ------------------------------------------------------------------------- the scenarios

def test_discovery_auth(fake: Fake) -> None:
    v = client.VersionApi().get_code()
    check(v.major == "1" and v.git_version.startswith("v1."), "version: %r" % v)
    code, body, _ = fake.raw("GET", "/api")
    check(code == 200 and body["versions"] == ["v1"], "/api: %r" % body)
    code, body, _ = fake.raw("GET", "/api/v1")
    check("pods/portforward" in [r["name"] for r in body["resources"]], "/api/v1: %r" % body)
    for token in (None, "wrong"):
        code, body, _ = fake.raw("GET", "/api/v1/namespaces/default/pods", token=token)
        check(code == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized",
              "no/wrong token is 401 Status: %r" % body)
    # a client certificate signed by --client-ca (mTLS), loaded by the official client
    kc = json.load(open(fake.kubeconfig))
    import base64
    user = {"client-certificate-data": base64.b64encode(
        open(os.path.join(fake.tmp, "client.pem"), "rb").read()).decode(),
        "client-key-data": base64.b64encode(
            open(os.path.join(fake.tmp, "client.key"), "rb").read()).decode()}
    kc["users"][0]["user"] = user
    certkc = os.path.join(fake.tmp, "kubeconfig-cert")
    json.dump(kc, open(certkc, "w"))
    api = config.new_client_from_config(certkc)
    pods = client.CoreV1Api(api).list_namespaced_pod(NS)
    check(pods.kind == "PodList", "mTLS list works")
    expect_api_error(lambda: client.CoreV1Api().read_namespace("nope"), 404, "no namespace")


def test_validation(fake: Fake, v1: client.CoreV1Api) -> None:
    def pod(**spec_over: Any) -> dict[str, Any]:
        p = {"metadata": {"name": "val"}, "spec": {"containers": [
            {"name": "c", "image": "sbx-base:test", "command": ["/bin/true"]}]}}
        p["spec"].update(spec_over)
        return p

    def create(body: Any) -> Any:
        return v1.create_namespaced_pod(NS, body)
    p = pod()
    p["spec"]["containers"][0]["foo"] = 1
    p["spec"]["bogus"] = True
    b = expect_api_error(lambda: create(p), 400, "unknown fields")
    check(b["reason"] == "BadRequest" and b["message"] == 'strict decoding error: unknown field '
          '"spec.bogus", unknown field "spec.containers[0].foo"' or b["message"] ==
          'strict decoding error: unknown field "spec.containers[0].foo", unknown field '
          '"spec.bogus"', "unknown field message: %r" % b["message"])
    p = pod()
    p["spec"]["containers"][0]["name"] = 7
    b = expect_api_error(lambda: create(p), 400, "wrong type")
    check("cannot unmarshal number into Go struct field" in b["message"] and
          "of type string" in b["message"], "type error message: %r" % b["message"])
    p = pod()
    p["metadata"]["labels"] = {"ok": "fine", "bad": "-no-", "x" * 64: "v"}
    b = expect_api_error(lambda: create(p), 422, "bad labels")
    check(b["reason"] == "Invalid" and b["details"]["kind"] == "Pod" and
          all(c["field"] == "metadata.labels" for c in b["details"]["causes"]) and
          len(b["details"]["causes"]) == 2, "label causes: %r" % b)
    p = pod()
    del p["spec"]["containers"][0]["image"]
    b = expect_api_error(lambda: create(p), 422, "missing image")
    check({"reason": "FieldValueRequired", "message": "Required value",
           "field": "spec.containers[0].image"} in b["details"]["causes"], "image: %r" % b)
    p = pod()
    del p["spec"]["containers"][0]["name"]
    b = expect_api_error(lambda: create(p), 422, "missing name (schema required)")
    check(any(c["field"] == "spec.containers[0].name" for c in b["details"]["causes"]),
          "name required: %r" % b)
    b = expect_api_error(lambda: create(pod(restartPolicy="Sometimes")), 422, "restartPolicy")
    check(b["details"]["causes"][0]["reason"] == "FieldValueNotSupported", "enum: %r" % b)
    p = pod()
    p["spec"]["containers"][0]["volumeMounts"] = [{"name": "nope", "mountPath": "/x"}]
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 70000}]
    p["spec"]["containers"].append({"name": "c", "image": "x"})
    b = expect_api_error(lambda: create(p), 422, "mounts, ports, duplicates")
    fields = {(c["field"], c["reason"]) for c in b["details"]["causes"]}
    check({("spec.containers[0].volumeMounts[0].name", "FieldValueNotFound"),
           ("spec.containers[0].ports[0].containerPort", "FieldValueInvalid"),
           ("spec.containers[1].name", "FieldValueDuplicate")} <= fields, "causes: %r" % fields)
    p = pod()
    p["metadata"]["name"] = "Bad_Name"
    b = expect_api_error(lambda: create(p), 422, "bad name")
    check(b["details"]["causes"][0]["field"] == "metadata.name" and "RFC 1123 subdomain" in
          b["message"], "name: %r" % b)
    p = pod()
    p["spec"]["containers"][0]["resources"] = {"limits": {"memory": "12Q"}}
    b = expect_api_error(lambda: create(p), 400, "bad quantity")
    check("quantities must match the regular expression" in b["message"], "qty: %r" % b)
    p = pod()
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}, "requests": {"cpu": 2}}
    b = expect_api_error(lambda: create(p), 422, "requests over limits")
    check("must be less than or equal to cpu limit" in b["message"], "limit: %r" % b)
    p = pod(volumes=[{"name": "v", "emptyDir": {}, "persistentVolumeClaim": {"claimName": "c"}}])
    expect_api_error(lambda: create(p), 422, "two volume sources")
    expect_api_error(lambda: v1.create_namespaced_pod("nowhere", pod()), 404, "no namespace")
    b = expect_api_error(lambda: create(pod(runtimeClassName="gvisor")), 403, "RuntimeClass")
    check('RuntimeClass "gvisor" not found' in b["message"], "runtimeclass: %r" % b)
    code, b, _ = fake.raw("POST", "/api/v1/namespaces/default/pods", {"metadata": 1})
    check(code == 400, "metadata as a number: %r" % b)
    check(v1.list_namespaced_pod(NS, field_selector="metadata.name=val").items == [],
          "nothing was created by the rejected requests")
    # fieldValidation=Warn/Ignore: unknown fields dropped (with a Warning header for Warn)
    for mode, name in (("Warn", "fv-warn"), ("Ignore", "fv-ignore")):
        p = pod()
        p["metadata"]["name"] = name
        p["spec"]["bogus"] = 1
        code, b, hdrs = fake.raw("POST", "/api/v1/namespaces/default/pods?fieldValidation="
                                 + mode, p)
        warning = hdrs.get("Warning") or ""
        check(code == 201 and "bogus" not in b["spec"], "%s: created without it: %r"
              % (mode, b))
        check(('unknown field \\"spec.bogus\\"' in warning) == (mode == "Warn"),
              "%s: Warning header %r" % (mode, warning))
        v1.delete_namespaced_pod(name, NS, grace_period_seconds=0)
    code, b, _ = fake.raw("POST", "/api/v1/namespaces/default/pods?fieldValidation=Loose",
                          pod())
    check(code == 400 and "fieldValidation must be one of" in b["message"], "bad mode %r" % b)
    # a valid one, then the same name again
    v1.create_namespaced_pod(NS, pod())
    b = expect_api_error(lambda: create(pod()), 409, "AlreadyExists")
    check(b["reason"] == "AlreadyExists", "409 reason: %r" % b)
    v1.delete_namespaced_pod("val", NS, grace_period_seconds=0)
    gen = v1.create_namespaced_pod(NS, {"metadata": {"generateName": "gen-"}, "spec": pod()[
        "spec"]})
    check(gen.metadata.name.startswith("gen-") and len(gen.metadata.name) == 9,
          "generateName: %s" % gen.metadata.name)
    v1.delete_namespaced_pod(gen.metadata.name, NS, grace_period_seconds=0)


def test_contract_pod(fake: Fake, v1: client.CoreV1Api) -> client.V1Pod:
    created = v1.create_namespaced_pod(NS, contract_pod(
        fake, "sbx-1", ["/bin/sh", "-c", "echo entry-started $GREETING; exec sleep 100000"],
        {"sbx.dev/sandbox": "sbx-1", "app": "sbx", "tier": "a"}))
    check(created.status.phase == "Pending" and created.metadata.uid and
          int(created.metadata.resource_version) > 0, "created Pending with uid and rv")
    check(created.spec.restart_policy == "Never" and created.status.qos_class == "Burstable",
          "defaults: %s %s" % (created.spec.restart_policy, created.status.qos_class))
    pod, seen = wait_phase(v1, "sbx-1", {"Running", "Failed"}, 90,
                           created.metadata.resource_version)
    check(pod.status.phase == "Running", "Running: %s" % pod.status)
    check(seen and set(seen) <= {"MODIFIED"}, "watch from the create's rv: MODIFIED: %r" % seen)
    conds = {c.type: c.status for c in pod.status.conditions}
    check(all(conds.get(t) == "True" for t in ("PodScheduled", "Initialized",
                                               "ContainersReady", "Ready")), "conds %r" % conds)
    ini = pod.status.init_container_statuses[0]
    check(ini.state.terminated.exit_code == 0 and ini.state.terminated.reason == "Completed",
          "init completed: %r" % ini)
    cs = pod.status.container_statuses[0]
    check(cs.state.running and cs.state.running.started_at and cs.ready,
          "main running: %r" % cs)
    check(pod.status.pod_ip and pod.status.pod_ip.startswith(CIDR.rsplit(".", 1)[0]),
          "pod IP in the CIDR: %s" % pod.status.pod_ip)
    return pod


def wait_execd(v1: client.CoreV1Api, name: str) -> None:
    """Running is not listening (no readiness probe): ping through fresh forwards until execd
    answers; before that the forward's error channel says the connection was refused."""
    errors: list[str] = []

    def ping() -> bool:
        pf = portforward(pf_api().connect_get_namespaced_pod_portforward, name, NS,
                         ports=str(EXECD_PORT))
        try:
            code, _ = execd_http(pf.socket(EXECD_PORT), "GET", "/ping")
            return code == 200
        except OSError:
            errors.append(pf.error(EXECD_PORT) or "")
            return False
        finally:
            pf.close()
    wait_for(ping, "execd's /ping through a port-forward", 60)
    check(all("connection refused" in e for e in errors if e), "early errors: %r" % errors)


def test_portforward(fake: Fake, v1: client.CoreV1Api, pod: client.V1Pod) -> None:
    wait_execd(v1, "sbx-1")
    pf = portforward(pf_api().connect_get_namespaced_pod_portforward, "sbx-1", NS,
                     ports=str(EXECD_PORT))
    out = run_command(pf.socket(EXECD_PORT), "echo out-$SBX_SANDBOX; cat /proc/net/fib_trie "
                      "| grep -c %s; pwd; ls /opt/sbx" % pod.status.pod_ip)
    lines = out.split("\n")
    check(lines[0] == "out-sbx-1", "command output through execd: %r" % out)
    check(int(lines[1]) >= 1, "the command runs in the pod's network namespace: %r" % out)
    check(lines[2] == "/tmp" and lines[3] == "sbx-execd",
          "workingDir and the emptyDir at /opt/sbx: %r" % out)
    pf.close()
    # several forwards at once, one of them to a closed port (the error channel)
    results: list[Any] = []

    def one(i: int) -> None:
        try:
            f = portforward(pf_api().connect_get_namespaced_pod_portforward, "sbx-1", NS,
                            ports="%d,%d" % (EXECD_PORT, 1))
            s = f.socket(EXECD_PORT)
            s.settimeout(120)  # a stuck forward fails the check below instead of hanging
            results.append(run_command(s, "echo par-%d" % i))
            err = wait_for(lambda: f.error(1), "the error channel of port 1", 60)
            results.append(err)
            f.close()
        except Exception:  # collected, checked below
            results.append("thread %d: %s" % (i, traceback.format_exc()))
    ts = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(180)
    check(not any(t.is_alive() for t in ts), "the parallel forwards finished: %r" % results)
    outs = sorted(r for r in results if isinstance(r, str) and r.startswith("par-"))
    errs = [r for r in results if isinstance(r, str) and "connection refused" in r]
    check(outs == ["par-%d" % i for i in range(4)] and len(errs) == 4,
          "4 parallel forwards, each with a refused port: %r" % results)
    check("error forwarding port 1 to pod" in errs[0], "containerd's message: %r" % errs[0])
    # a larger transfer both ways
    f = portforward(pf_api().connect_get_namespaced_pod_portforward, "sbx-1", NS,
                    ports=str(EXECD_PORT))
    out = run_command(f.socket(EXECD_PORT), "head -c 300000 /dev/zero | tr '\\0' x")
    body = out.replace("\n", "")  # execd splits lines over 16 KiB into several events
    check(len(body) == 300000 and set(body) == {"x"}, "300 kB through the forward: %d"
          % len(body))
    f.close()
    # the pod IP straight from the host (sbx in-cluster)
    with urllib.request.urlopen("http://%s:%d/ping" % (pod.status.pod_ip, EXECD_PORT),
                                timeout=10) as r:
        check(r.status == 200, "podIP reachable from the host")
    # not a WebSocket: 400 as the real server; unknown pod: 404
    code, b, _ = fake.raw("GET", "/api/v1/namespaces/default/pods/sbx-1/portforward?ports=1")
    check(code == 400 and b["message"] == "Upgrade request required", "no upgrade: %r" % b)
    try:
        portforward(pf_api().connect_get_namespaced_pod_portforward, "nope", NS, ports="80")
        raise Fail("port-forward to an unknown pod")
    except ApiException as e:
        check("404" in str(e.reason), "unknown pod: handshake 404: %s" % e.reason)


def test_websocket_details(fake: Fake) -> None:
    """The WebSocket layer below the official client: base64 subprotocol, repeated `ports`
    parameters, ping/pong, a fragmented message, an unmasked frame, a refused subprotocol."""
    import base64
    import struct
    import websocket
    from websocket import ABNF
    url = "wss://127.0.0.1:%d/api/v1/namespaces/default/pods/sbx-1/portforward" % fake.port
    ssl_opts = {"ca_certs": fake.ca}
    hdr = ["Authorization: Bearer " + TOKEN]

    def http10(path: str) -> bytes:
        return ("GET %s HTTP/1.0\r\nX-EXECD-ACCESS-TOKEN: %s\r\n\r\n"
                % (path, EXECD_TOKEN)).encode()
    ws = websocket.create_connection(url + "?ports=%d&ports=1" % EXECD_PORT, sslopt=ssl_opts,
                                     header=hdr, subprotocols=["v4.base64.channel.k8s.io"])
    check(ws.getsubprotocol() == "v4.base64.channel.k8s.io", "base64 subprotocol chosen")
    first = [ws.recv() for _ in range(4)]
    want = {"%d%s" % (ch, base64.b64encode(struct.pack("<H", port)).decode())
            for ch, port in ((0, EXECD_PORT), (1, EXECD_PORT), (2, 1), (3, 1))}
    check(set(first) == want, "base64 initial frames %r, want %r" % (first, want))
    err = ws.recv()
    check(err.startswith("3") and b"connection refused" in base64.b64decode(err[1:]),
          "port 1 refused on channel 3: %r" % err)
    ws.send("0" + base64.b64encode(http10("/ping")).decode())
    got = b""
    while b"200" not in got:
        m = ws.recv()
        check(m[0] == "0", "data on channel 0: %r" % m)
        got += base64.b64decode(m[1:])
    ws.close()
    ws = websocket.create_connection(url + "?ports=%d" % EXECD_PORT, sslopt=ssl_opts,
                                     header=hdr, subprotocols=["v4.channel.k8s.io"])
    for _ in range(2):
        check(ws.recv_data(control_frame=True)[1][1:] == struct.pack("<H", EXECD_PORT),
              "binary initial frames")
    ws.ping(b"are-you-there")
    op, fr = ws.recv_data_frame(control_frame=True)
    check(op == ABNF.OPCODE_PONG and fr.data == b"are-you-there", "pong echoes the ping")
    req = b"\x00" + http10("/ping")
    ws.send_frame(ABNF.create_frame(req[:7], ABNF.OPCODE_BINARY, fin=0))
    ws.ping(b"between fragments")
    ws.send_frame(ABNF.create_frame(req[7:20], ABNF.OPCODE_CONT, fin=0))
    ws.send_frame(ABNF.create_frame(req[20:], ABNF.OPCODE_CONT, fin=1))
    got, pongs = b"", 0
    while True:
        op, fr = ws.recv_data_frame(control_frame=True)
        if op == ABNF.OPCODE_PONG:
            pongs += 1
            continue
        if op == ABNF.OPCODE_CLOSE:
            code = struct.unpack("!H", fr.data[:2])[0]
            break
        check(fr.data[0] == 0, "execd's answer on channel 0")
        got += fr.data[1:]
    check(pongs == 1 and got.startswith(b"HTTP/1.") and b" 200 " in got.split(b"\r\n")[0],
          "a fragmented request reassembled, a ping between fragments answered: %r" % got)
    check(code == 1000, "closed (1000) once the pod side closed: %d" % code)
    ws.close()
    ws = websocket.create_connection(url + "?ports=%d" % EXECD_PORT, sslopt=ssl_opts,
                                     header=hdr)
    check(ws.getsubprotocol() is None, "no subprotocol offered: binary, none echoed")
    ws.recv_data(True)
    ws.recv_data(True)
    ws.sock.sendall(b"\x82\x02\x00x")  # an unmasked binary frame
    op, fr = ws.recv_data_frame(control_frame=True)
    check(op == ABNF.OPCODE_CLOSE and struct.unpack("!H", fr.data[:2])[0] == 1002,
          "an unmasked client frame: close 1002")
    ws.close()
    try:
        websocket.create_connection(url + "?ports=80", sslopt=ssl_opts, header=hdr,
                                    subprotocols=["v5.channel.k8s.io"])
        raise Fail("an unsupported subprotocol is refused")
    except websocket.WebSocketBadStatusException as e:
        check(e.status_code == 403, "unsupported subprotocol: 403: %s" % e.status_code)


def test_logs_events_lists(fake: Fake, v1: client.CoreV1Api) -> None:
    logs = wait_for(lambda: "entry-started hi-sbx-1" in v1.read_namespaced_pod_log(
        "sbx-1", NS, container="sandbox") and v1.read_namespaced_pod_log(
        "sbx-1", NS, container="sandbox"), "the entrypoint's output in the pod log")
    check("sbx-execd: listening" in logs, "execd's stderr is in the log: %r" % logs)
    tail = v1.read_namespaced_pod_log("sbx-1", NS, tail_lines=1)
    check(tail.count("\n") == 1 and logs.endswith(tail), "tailLines=1: %r" % tail)
    b = expect_api_error(lambda: v1.read_namespaced_pod_log("sbx-1", NS, container="zzz"), 400,
                         "bad container")
    check("is not valid for pod" in b["message"], "log container: %r" % b)
    evs = v1.list_namespaced_event(NS, field_selector="involvedObject.name=sbx-1").items
    reasons = [e.reason for e in evs]
    for r in ("Scheduled", "Pulled", "Created", "Started"):
        check(r in reasons, "event %s in %r" % (r, reasons))
    check(all(e.involved_object.name == "sbx-1" for e in evs), "event field selector")
    sched = next(e for e in evs if e.reason == "Scheduled")
    check(sched.source.component == "default-scheduler" and sched.type == "Normal",
          "Scheduled event: %r" % sched)
    # a second pod, then selectors
    v1.create_namespaced_pod(NS, {"metadata": {"name": "plain", "labels": {
        "app": "sbx", "tier": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "sbx-base:test", "command": ["/bin/sleep", "1000"]}]}})
    wait_phase(v1, "plain", {"Running"})

    def names(**kw: Any) -> list[str]:
        return sorted(p.metadata.name for p in v1.list_namespaced_pod(NS, **kw).items)
    check(names(label_selector="app=sbx") == ["plain", "sbx-1"], "app=sbx")
    check(names(label_selector="app==sbx,tier!=a") == ["plain"], "== and !=")
    check(names(label_selector="tier in (a,c)") == ["sbx-1"], "in")
    check(names(label_selector="tier notin (a)") == ["plain"], "notin")
    check(names(label_selector="sbx.dev/sandbox") == ["sbx-1"], "exists")
    check(names(label_selector="!sbx.dev/sandbox,app") == ["plain"], "!exists")
    check(names(field_selector="metadata.name=plain") == ["plain"], "field name")
    check(names(field_selector="status.phase=Running,metadata.name!=plain") == ["sbx-1"],
          "field phase")
    expect_api_error(lambda: v1.list_namespaced_pod(NS, field_selector="spec.bogus=1"), 400,
                     "unsupported field selector")
    page = v1.list_namespaced_pod(NS, limit=1)
    check(len(page.items) == 1 and page.metadata._continue, "limit=1 gives a continue token")
    rest = v1.list_namespaced_pod(NS, limit=1, _continue=page.metadata._continue)
    check(rest.items[0].metadata.name != page.items[0].metadata.name, "continue: next page")
    # PATCH labels (merge patch), then a PUT with a stale resourceVersion: 409
    p = v1.patch_namespaced_pod("plain", NS, {"metadata": {"labels": {"tier": "c"}}})
    check(p.metadata.labels["tier"] == "c", "patched label")
    stale = v1.read_namespaced_pod("plain", NS)
    v1.patch_namespaced_pod("plain", NS, {"metadata": {"annotations": {"x": "1"}}})
    stale.metadata.labels["tier"] = "d"
    expect_api_error(lambda: v1.replace_namespaced_pod("plain", NS, stale), 409, "stale PUT")
    cur = v1.read_namespaced_pod("plain", NS)
    cur.spec.containers[0].command = ["/bin/other"]
    expect_api_error(lambda: v1.replace_namespaced_pod("plain", NS, cur), 422,
                     "pod spec immutable")
    d = v1.delete_namespaced_pod("plain", NS, grace_period_seconds=1)
    check(d.metadata.deletion_timestamp is not None, "graceful delete answers the object "
          "with a deletionTimestamp")
    wait_for(lambda: not names(field_selector="metadata.name=plain"), "plain deleted")
    expect_api_error(lambda: v1.delete_namespaced_pod("plain", NS), 404, "delete twice")


def test_watch_410_bookmarks(fake: Fake, v1: client.CoreV1Api) -> None:
    rv = v1.list_namespaced_pod(NS).metadata.resource_version
    for i in range(65):  # more pod changes than --watch-history 60
        fake.ctl("pods/default/sbx-1/status", {"message": "churn %d" % i})
    try:
        for _ in watch.Watch().stream(v1.list_namespaced_pod, NS, resource_version=rv,
                                      timeout_seconds=5):
            pass
        raise Fail("a watch from an rv older than the history must fail")
    except ApiException as e:
        check(e.status == 410 and "Expired: too old resource version: %s" % rv in e.reason,
              "410 Expired: %s %s" % (e.status, e.reason))
    # the raw stream: HTTP 200, one ERROR event carrying the Status
    code, body, _ = fake.raw("GET", "/api/v1/namespaces/default/pods?watch=1&"
                             "resourceVersion=%s" % rv)
    ev = json.loads(body.strip().split("\n")[0]) if isinstance(body, str) else body
    check(code == 200 and ev["type"] == "ERROR" and ev["object"]["code"] == 410 and
          ev["object"]["reason"] == "Expired", "raw 410 event: %r" % ev)
    # a recent rv works; bookmarks come when allowed; selector changes give ADDED/DELETED
    rv = v1.list_namespaced_pod(NS).metadata.resource_version
    got: list[tuple[str, str]] = []

    def watcher() -> None:
        for ev in watch.Watch().stream(v1.list_namespaced_pod, NS, resource_version=rv,
                                       label_selector="mark=yes", allow_watch_bookmarks=True,
                                       timeout_seconds=4, _request_timeout=10):
            got.append((ev["type"], ev["raw_object"]["metadata"].get("name", "")))
    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.5)
    v1.patch_namespaced_pod("sbx-1", NS, {"metadata": {"labels": {"mark": "yes"}}})
    time.sleep(0.3)
    v1.patch_namespaced_pod("sbx-1", NS, {"metadata": {"labels": {"mark": None}}})
    t.join(15)
    check(("ADDED", "sbx-1") in got and ("DELETED", "sbx-1") in got,
          "a pod entering/leaving the selector: ADDED then DELETED: %r" % got)
    code, body, _ = fake.raw("GET", "/api/v1/namespaces/default/pods?watch=true&"
                             "allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion=%s"
                             % v1.list_namespaced_pod(NS).metadata.resource_version)
    types = [json.loads(x)["type"] for x in body.strip().split("\n") if x]
    check("BOOKMARK" in types, "bookmarks with allowWatchBookmarks: %r" % types)
    code, body, _ = fake.raw("GET", "/api/v1/namespaces/default/pods?watch=1&"
                             "resourceVersion=999999999")
    check(code == 504 and body["details"]["causes"][0]["reason"] ==
          "ResourceVersionTooLarge", "future rv: %r" % body)


def test_injection(fake: Fake, v1: client.CoreV1Api) -> None:
    fake.ctl("inject", {"method": "POST", "path": "/pods$", "status": 429, "count": 1,
                        "retryAfter": 1})
    body = {"metadata": {"name": "inj"}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "sbx-base:test", "command": ["/bin/true"]}]}}
    try:
        v1.create_namespaced_pod(NS, body)
        raise Fail("injected 429")
    except ApiException as e:
        b = json.loads(e.body)
        check(e.status == 429 and b["reason"] == "TooManyRequests" and
              e.headers.get("Retry-After") == "1" and b["details"]["retryAfterSeconds"] == 1,
              "429 with Retry-After: %s %r %r" % (e.status, e.headers, b))
    v1.create_namespaced_pod(NS, body)  # count 1: served once
    fake.ctl("inject", {"path": "/pods/inj$", "status": 500, "count": 2})
    for _ in range(2):
        b = expect_api_error(lambda: v1.read_namespaced_pod("inj", NS), 500, "injected 500")
        check(b["reason"] == "InternalError", "500 InternalError: %r" % b)
    pod, _ = wait_phase(v1, "inj", {"Succeeded", "Failed"})
    check(pod.status.phase == "Succeeded" and pod.status.container_statuses[0].state
          .terminated.reason == "Completed", "exit 0: Succeeded/Completed")
    fake.ctl("inject", {"method": "DELETE", "status": 503, "count": -1})
    expect_api_error(lambda: v1.delete_namespaced_pod("inj", NS), 503, "503 until reset")
    fake.ctl("reset-injections")
    v1.delete_namespaced_pod("inj", NS)
    reqs = fake.ctl("requests", method="GET")
    check(any(r["method"] == "POST" and r["path"].endswith("/pods") and '"inj"' in r["body"]
              for r in reqs), "requests are recorded")


def test_failures(fake: Fake, v1: client.CoreV1Api) -> None:
    def simple(name: str, image: str, cmd: list[str], init: Optional[list[str]] = None) -> None:
        spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": image, "command": cmd}]}
        if init:
            spec["initContainers"] = [{"name": "init", "image": "sbx-base:test",
                                       "command": init}]
        v1.create_namespaced_pod(NS, {"metadata": {"name": name}, "spec": spec})
    simple("pull", "registry.example/nope:1", ["/bin/true"])

    def waiting() -> Optional[str]:
        cs = v1.read_namespaced_pod("pull", NS).status.container_statuses or []
        w = cs and cs[0].state.waiting
        return w and w.reason
    wait_for(lambda: waiting() == "ErrImagePull", "ErrImagePull")
    wait_for(lambda: waiting() == "ImagePullBackOff", "ImagePullBackOff")
    pod = v1.read_namespaced_pod("pull", NS)
    check(pod.status.phase == "Pending" and 'Back-off pulling image "registry.example/nope:1"'
          == pod.status.container_statuses[0].state.waiting.message, "backoff: %r" % pod.status)
    evs = {(e.reason, e.type) for e in v1.list_namespaced_event(
        NS, field_selector="involvedObject.name=pull").items}
    check({("Failed", "Warning"), ("BackOff", "Normal")} <= evs, "pull events: %r" % evs)
    b = expect_api_error(lambda: v1.read_namespaced_pod_log("pull", NS), 400, "log waiting")
    check("is waiting to start: trying and failing to pull image" in b["message"], "%r" % b)
    simple("initfail", "sbx-base:test", ["/bin/true"], init=["/bin/sh", "-c", "exit 3"])
    pod, _ = wait_phase(v1, "initfail", {"Failed", "Succeeded"})
    t = pod.status.init_container_statuses[0].state.terminated
    check(t.exit_code == 3 and t.reason == "Error" and
          pod.status.container_statuses[0].state.waiting.reason == "PodInitializing",
          "Init:Error: %r" % pod.status)
    simple("exit4", "sbx-base:test", ["/bin/sh", "-c", "echo bye; exit 4"])
    pod, _ = wait_phase(v1, "exit4", {"Failed", "Succeeded"})
    t = pod.status.container_statuses[0].state.terminated
    check(pod.status.phase == "Failed" and t.exit_code == 4 and t.reason == "Error",
          "exit 4: Failed/Error: %r" % t)
    check(v1.read_namespaced_pod_log("exit4", NS) == "bye\n", "log of a finished container")
    simple("noexec", "sbx-base:test", ["/no/such/binary"])
    pod, _ = wait_phase(v1, "noexec", {"Failed", "Succeeded"})
    t = pod.status.container_statuses[0].state.terminated
    check(t.reason == "StartError" and t.exit_code == 128 and "no such file" in t.message,
          "exec failure: StartError: %r" % t)
    for n in ("pull", "initfail", "exit4", "noexec"):
        v1.delete_namespaced_pod(n, NS)
    wait_for(lambda: not [p for p in v1.list_namespaced_pod(NS).items
                          if p.metadata.name in ("pull", "initfail", "exit4", "noexec")],
             "the failed pods deleted")


def test_probes(v1: client.CoreV1Api) -> None:
    """readinessProbe: Running is not Ready until the probe passes."""
    def pod(name: str, cmd: list[str], probe: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "sbx-base:test", "command": cmd,
            "ports": [{"name": "web", "containerPort": 8080}],
            "readinessProbe": dict(probe, periodSeconds=1)}]}}
    v1.create_namespaced_pod(NS, pod("probe-bad", ["/bin/sleep", "1000"],
                                     {"tcpSocket": {"port": 9}}))
    v1.create_namespaced_pod(NS, pod("probe-ok", ["/usr/bin/python3", "-m", "http.server",
                                                  "8080"], {"httpGet": {"path": "/",
                                                                        "port": "web"}}))
    wait_phase(v1, "probe-bad", {"Running"})
    ev = wait_for(lambda: [e for e in v1.list_namespaced_event(
        NS, field_selector="involvedObject.name=probe-bad").items if e.reason == "Unhealthy"],
        "an Unhealthy event")
    check("Readiness probe failed: dial tcp" in ev[0].message and "connection refused" in
          ev[0].message, "probe failure: %s" % ev[0].message)
    p = v1.read_namespaced_pod("probe-bad", NS)
    check(p.status.phase == "Running" and not p.status.container_statuses[0].ready and
          any(c.type == "Ready" and c.status == "False" for c in p.status.conditions),
          "Running, not Ready: %r" % p.status)
    def ok_ready() -> bool:
        cs = v1.read_namespaced_pod("probe-ok", NS).status.container_statuses
        return bool(cs and cs[0].ready)
    wait_for(ok_ready, "probe-ok Ready once its server answers")
    for n in ("probe-bad", "probe-ok"):
        v1.delete_namespaced_pod(n, NS, grace_period_seconds=0)


def secret_volumes(v1: client.CoreV1Api) -> None:
    """A secret volume: the listed items as files with defaultMode; a missing secret holds
    the pod in ContainerCreating with FailedMount events; a bad item path is a 422."""
    def pod(name: str, secret: str, items: Optional[list[Any]] = None) -> dict[str, Any]:
        sv: dict[str, Any] = {"secretName": secret, "defaultMode": 0o400}
        if items is not None:
            sv["items"] = items
        return {"metadata": {"name": name}, "spec": {
            "restartPolicy": "Never", "volumes": [{"name": "s", "secret": sv}],
            "containers": [{"name": "main", "image": "sbx-base:test",
                            "command": ["/bin/sh", "-c", "stat -c %a /s/t/tok; cat /s/t/tok; echo; "
                                        "ls /s"],
                            "volumeMounts": [{"name": "s", "mountPath": "/s",
                                              "readOnly": True}]}]}}
    v1.create_namespaced_pod(NS, pod("secvol", "creds", [{"key": "token", "path": "t/tok"}]))
    wait_phase(v1, "secvol", {"Succeeded"})
    log = v1.read_namespaced_pod_log("secvol", NS)
    check(log == "400\ns3cr3t\nt\n", "the item as a file, mode 0400, nothing else: %r" % log)
    v1.create_namespaced_pod(NS, pod("secvol-missing", "nope"))

    def failed_mount() -> Any:
        evs = v1.list_namespaced_event(NS).items
        return [e for e in evs if e.involved_object.name == "secvol-missing" and
                e.reason == "FailedMount"]
    ev = wait_for(failed_mount, "FailedMount for a missing secret")[0]
    check('secret "nope" not found' in ev.message and ev.type == "Warning", "%r" % ev.message)
    check(v1.read_namespaced_pod("secvol-missing", NS).status.phase == "Pending",
          "held Pending")
    try:
        v1.create_namespaced_pod(NS, pod("secvol-bad", "creds",
                                         [{"key": "token", "path": "../up"}]))
        raise Fail("a secret item path with .. was accepted")
    except ApiException as e:
        check(e.status == 422 and "must not contain '..'" in e.body, "422: %s" % e.body)
    for n in ("secvol", "secvol-missing"):
        v1.delete_namespaced_pod(n, NS, grace_period_seconds=0)


def test_secrets_autorun_binding(fake: Fake, v1: client.CoreV1Api) -> None:
    """secretKeyRef env (and a missing secret: CreateContainerConfigError), autoRun off until
    /run, a Pending claim binding later."""
    def pod(name: str, cmd: list[str], env: Optional[list[Any]] = None,
            claim: Optional[str] = None) -> dict[str, Any]:
        c: dict[str, Any] = {"name": "main", "image": "sbx-base:test", "command": cmd,
                             "env": env or []}
        spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [c]}
        if claim:
            spec["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
            c["volumeMounts"] = [{"name": "d", "mountPath": "/data"}]
        return {"metadata": {"name": name}, "spec": spec}
    sec = v1.create_namespaced_secret(NS, {"metadata": {"name": "creds"},
                                           "stringData": {"token": "s3cr3t"}})
    check(sec.data == {"token": "czNjcjN0"} and sec.type == "Opaque", "stringData → data")
    ref = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}]
    v1.create_namespaced_pod(NS, pod("sec", ["/bin/sh", "-c", "echo TOKEN=$TOKEN"], ref))
    v1.create_namespaced_pod(NS, pod("sec-missing", ["/bin/true"], [
        {"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}]))
    wait_phase(v1, "sec", {"Succeeded"})
    check(v1.read_namespaced_pod_log("sec", NS) == "TOKEN=s3cr3t\n", "secretKeyRef env")

    def waiting() -> Any:
        cs = v1.read_namespaced_pod("sec-missing", NS).status.container_statuses or []
        return cs and cs[0].state.waiting and cs[0].state.waiting.reason == \
            "CreateContainerConfigError" and cs[0].state.waiting
    w = wait_for(waiting, "CreateContainerConfigError")
    check(w.message == 'secret "nope" not found', "missing secret: %r" % w)
    secret_volumes(v1)
    fake.ctl("config", {"autoRun": False})
    v1.create_namespaced_pod(NS, pod("held", ["/bin/sleep", "1000"]))
    wait_for(lambda: v1.read_namespaced_pod("held", NS).spec.node_name, "held scheduled")
    time.sleep(1)
    held = v1.read_namespaced_pod("held", NS)
    check(held.status.phase == "Pending" and not held.status.pod_ip, "autoRun off: Pending")
    fake.ctl("pods/default/held/run")
    fake.ctl("config", {"autoRun": True, "pvcPhase": "Pending"})
    wait_phase(v1, "held", {"Running"})
    pvc = v1.create_namespaced_persistent_volume_claim(NS, {
        "metadata": {"name": "slow"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "1Mi"}}}})
    check(pvc.status.phase == "Pending", "pvcPhase Pending")
    v1.create_namespaced_pod(NS, pod("unbound", ["/bin/sleep", "1000"], claim="slow"))

    def sched() -> Any:
        p = v1.read_namespaced_pod("unbound", NS)
        return next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
    c = wait_for(sched, "PodScheduled on an unbound claim")
    check(c.status == "False" and "pod has unbound immediate PersistentVolumeClaims" in
          c.message, "unbound: %r" % c)
    fake.ctl("pvcs/default/slow/status", {"phase": "Bound"})
    fake.ctl("config", {"pvcPhase": "Bound"})
    wait_phase(v1, "unbound", {"Running"})
    for n in ("sec", "sec-missing", "held", "unbound"):
        v1.delete_namespaced_pod(n, NS, grace_period_seconds=0)
    v1.delete_namespaced_persistent_volume_claim("slow", NS)
    v1.delete_namespaced_secret("creds", NS)
    wait_for(lambda: not v1.list_namespaced_persistent_volume_claim(NS).items, "slow gone")


def runtime(fake: Fake, name: str) -> dict[str, Any]:
    return fake.ctl("pods/default/%s/runtime" % name, method="GET")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def execd_pid(rt: dict[str, Any]) -> int:
    with open(os.path.join(rt["containers"]["sandbox"]["dir"], "pid.json")) as f:
        return int(json.load(f)["pid"])


def test_restart(fake: Fake, v1: client.CoreV1Api, pod: client.V1Pod) -> None:
    rt = runtime(fake, "sbx-1")
    pid = execd_pid(rt)
    v1.create_namespaced_pod(NS, {"metadata": {"name": "ends-while-down"}, "spec": {
        "restartPolicy": "Never", "containers": [{"name": "main", "image": "sbx-base:test",
                                                  "command": ["/bin/sh", "-c",
                                                              "sleep 3; exit 5"]}]}})
    wait_phase(v1, "ends-while-down", {"Running"})
    before = v1.list_namespaced_pod(NS)
    note("stopping the fake")
    fake.stop()
    note("fake stopped")
    # the API server is down: the pod is not
    with urllib.request.urlopen("http://%s:%d/ping" % (pod.status.pod_ip, EXECD_PORT),
                                timeout=10) as r:
        check(r.status == 200, "the pod serves while the API server is down")
    try:
        v1.list_namespaced_pod(NS, _request_timeout=3)
        raise Fail("the API is down")
    except ApiException:
        raise
    except Exception:
        pass
    time.sleep(4)  # ends-while-down exits meanwhile
    fake.start()
    note("fake started again")
    v1 = client.CoreV1Api()
    after = v1.list_namespaced_pod(NS)
    check(int(after.metadata.resource_version) >= int(before.metadata.resource_version),
          "resourceVersion survives")
    p = v1.read_namespaced_pod("sbx-1", NS)
    check(p.metadata.uid == pod.metadata.uid and p.status.phase == "Running" and
          p.status.pod_ip == pod.status.pod_ip, "the pod object survives")
    check(execd_pid(runtime(fake, "sbx-1")) == pid and pid_alive(pid),
          "the same execd process, re-adopted")
    f = portforward(pf_api().connect_get_namespaced_pod_portforward, "sbx-1", NS,
                    ports=str(EXECD_PORT))
    check(run_command(f.socket(EXECD_PORT), "echo again") == "again", "forward after restart")
    f.close()
    done, _ = wait_phase(v1, "ends-while-down", {"Failed", "Succeeded"})
    t = done.status.container_statuses[0].state.terminated
    check(t.exit_code == 5 and t.reason == "Error", "an exit while down is recorded: %r" % t)
    v1.delete_namespaced_pod("ends-while-down", NS)
    # the watch cache starts empty after a restart: an old rv is 410, as a real restart
    try:
        for _ in watch.Watch().stream(v1.list_namespaced_pod, NS, resource_version=str(
                int(before.metadata.resource_version) - 1), timeout_seconds=2):
            pass
        raise Fail("old rv after restart")
    except ApiException as e:
        check(e.status == 410, "410 after restart: %s" % e.status)


def test_evict_oom_status(fake: Fake, v1: client.CoreV1Api) -> None:
    for name in ("ev", "oom"):
        v1.create_namespaced_pod(NS, contract_pod(fake, name, ["/bin/sleep", "100000"],
                                                  {"app": "sbx"}))
    for name in ("ev", "oom"):
        wait_phase(v1, name, {"Running"})
    rt = runtime(fake, "ev")
    pid, netns = execd_pid(rt), rt["netns"]
    fake.ctl("pods/default/ev/evict")
    pod = v1.read_namespaced_pod("ev", NS)
    check(pod.status.phase == "Failed" and pod.status.reason == "Evicted" and
          pod.status.message.startswith("The node was low on resource: memory"),
          "evicted: %r" % pod.status)
    check(any(c.type == "Ready" and c.status == "False" for c in pod.status.conditions),
          "an evicted pod is not Ready")
    check(not pid_alive(pid), "an evicted pod's processes are gone")
    check(netns not in sh("ip", "netns", "list"), "an evicted pod's netns is gone")
    evs = [e.reason for e in v1.list_namespaced_event(NS, field_selector="involvedObject."
                                                      "name=ev").items]
    check("Evicted" in evs, "Evicted event: %r" % evs)
    fake.ctl("pods/default/oom/oom")
    pod, _ = wait_phase(v1, "oom", {"Failed"})
    t = pod.status.container_statuses[0].state.terminated
    check(t.reason == "OOMKilled" and t.exit_code == 137, "OOMKilled 137: %r" % t)
    out = fake.ctl("pods/default/oom/status", {"phase": "Unknown", "reason": "Driven",
                                               "message": "by the test"})
    pod = v1.read_namespaced_pod("oom", NS)
    check(pod.status.phase == "Unknown" and pod.status.reason == "Driven" and
          out["metadata"]["resourceVersion"] == pod.metadata.resource_version,
          "status driven by the test: %r" % pod.status)
    for name in ("ev", "oom"):
        v1.delete_namespaced_pod(name, NS)


def test_pvc(fake: Fake, v1: client.CoreV1Api) -> None:
    pod = contract_pod(fake, "with-pvc", ["/bin/sleep", "100000"], {"app": "sbx"},
                       [{"name": "ws", "persistentVolumeClaim": {"claimName": "ws-claim"}}],
                       [{"name": "ws", "mountPath": "/workspace"}])
    v1.create_namespaced_pod(NS, pod)

    def sched() -> Any:
        p = v1.read_namespaced_pod("with-pvc", NS)
        return next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
    note("pod with a missing claim created")
    c = wait_for(sched, "the PodScheduled condition")
    check(c.status == "False" and c.reason == "Unschedulable" and
          'persistentvolumeclaim "ws-claim" not found' in c.message, "unschedulable: %r" % c)
    time.sleep(0.5)
    check(v1.read_namespaced_pod("with-pvc", NS).status.phase == "Pending", "still Pending")
    evs = [e.reason for e in v1.list_namespaced_event(
        NS, field_selector="involvedObject.name=with-pvc").items]
    check("FailedScheduling" in evs, "FailedScheduling event: %r" % evs)
    expect_api_error(lambda: v1.create_namespaced_persistent_volume_claim(NS, {
        "metadata": {"name": "bad"}, "spec": {"accessModes": ["ReadWriteOnce"]}}), 422,
        "a PVC without a storage request")
    pvc = v1.create_namespaced_persistent_volume_claim(NS, {
        "metadata": {"name": "ws-claim"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {
            "storage": "1Gi"}}}})
    check(pvc.status.phase == "Bound" and pvc.status.capacity["storage"] == "1Gi",
          "PVC Bound: %r" % pvc.status)
    note("claim created")
    p, _ = wait_phase(v1, "with-pvc", {"Running", "Failed"})
    note("pod with the claim Running")
    check(p.status.phase == "Running", "runs once the claim exists")
    wait_execd(v1, "with-pvc")
    f = portforward(pf_api().connect_get_namespaced_pod_portforward, "with-pvc", NS,
                    ports=str(EXECD_PORT))
    run_command(f.socket(EXECD_PORT), "echo pvc-data > /workspace/hello")
    f.close()
    pvc_dir = os.path.join(fake.data, "pvcs", pvc.metadata.uid)
    check(open(os.path.join(pvc_dir, "hello")).read() == "pvc-data\n",
          "a file written through execd lands in the PVC's directory")
    check(not os.path.exists("/workspace"), "nothing made on the host root")
    # deleting the claim while in use: kept (pvc-protection) until the pod goes
    note("file written")
    v1.delete_namespaced_persistent_volume_claim("ws-claim", NS)
    time.sleep(1)
    kept = v1.read_namespaced_persistent_volume_claim("ws-claim", NS)
    check(kept.metadata.deletion_timestamp is not None and
          "kubernetes.io/pvc-protection" in kept.metadata.finalizers, "in-use PVC kept")
    note("claim kept while in use")
    v1.delete_namespaced_pod("with-pvc", NS, grace_period_seconds=1)
    wait_for(lambda: not v1.list_namespaced_persistent_volume_claim(NS).items,
             "the PVC goes with its last pod")
    wait_for(lambda: not os.path.exists(pvc_dir),
             "its volume deleted after the claim (reclaimPolicy Delete)")


def test_node_lost_and_delete(fake: Fake, v1: client.CoreV1Api) -> None:
    fake.ctl("node/lost")
    p = v1.read_namespaced_pod("sbx-1", NS)
    check(p.status.phase == "Unknown" and p.status.reason == "NodeLost", "NodeLost: %r" %
          p.status)
    code, _, _ = fake.raw("GET", "/api/v1/nodes/fake-node")
    n = v1.read_node("fake-node")
    check(n.status.conditions[0].status == "Unknown", "node NotReady/Unknown")
    try:
        portforward(pf_api().connect_get_namespaced_pod_portforward, "sbx-1", NS,
                    ports=str(EXECD_PORT))
        raise Fail("no port-forward to a lost node")
    except ApiException as e:
        check("500" in str(e.reason), "lost node: port-forward 500: %s" % e.reason)
    fake.ctl("node/ready")
    rt = runtime(fake, "sbx-1")
    pid, netns, veth = execd_pid(rt), rt["netns"], rt["veth"]
    rv = v1.list_namespaced_pod(NS).metadata.resource_version
    v1.delete_namespaced_pod("sbx-1", NS)
    seen = []
    for ev in watch.Watch().stream(v1.list_namespaced_pod, NS, resource_version=rv,
                                   field_selector="metadata.name=sbx-1", timeout_seconds=90):
        seen.append(ev["type"])
        if ev["type"] == "DELETED":
            break
    check(seen[-1:] == ["DELETED"] and "MODIFIED" in seen, "delete: MODIFIED then DELETED %r"
          % seen)
    check(not pid_alive(pid), "execd is gone with its pod")
    check(netns not in sh("ip", "netns", "list"), "the pod's netns is gone")
    check(not os.path.exists("/sys/class/net/" + veth), "the pod's veth is gone")


def leftovers() -> list[str]:
    out = [n for n in sh("ip", "netns", "list").split() if n.startswith(PREFIX)]
    out += [n for n in os.listdir("/sys/class/net") if n.startswith(PREFIX)]
    return out


def main() -> int:
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces)")
        return SKIP
    if len(sys.argv) < 2 or not os.path.exists(sys.argv[1]):
        print("SKIP: no sbx-execd-static given")
        return SKIP
    # a SIGTERM (ctest, a user) still runs the cleanup below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = tempfile.mkdtemp(prefix="kfake-test-")
    fake = Fake(tmp, sys.argv[1])
    ok = False
    t0 = [time.time()]

    def say(what: str) -> None:
        print("ok: %s (%.1f s)" % (what, time.time() - t0[0]), flush=True)
        t0[0] = time.time()
    try:
        fake.start()
        v1 = client.CoreV1Api()
        test_discovery_auth(fake)
        say("discovery, auth (token, mTLS, 401)")
        test_validation(fake, v1)
        say("schema and semantic validation")
        pod = test_contract_pod(fake, v1)
        say("contract pod Running (watch)")
        test_portforward(fake, v1, pod)
        say("port-forward, execd, pod IP")
        test_websocket_details(fake)
        say("WebSocket details: base64, ping, fragments, masking")
        test_logs_events_lists(fake, v1)
        say("logs, events, selectors, patch/put")
        test_watch_410_bookmarks(fake, v1)
        say("watch 410, bookmarks, selector transitions")
        test_injection(fake, v1)
        say("injections")
        test_failures(fake, v1)
        say("image pull, init, exit, exec failures")
        test_probes(v1)
        say("readiness probes")
        test_secrets_autorun_binding(fake, v1)
        say("secrets, autoRun, claim binding")
        test_restart(fake, v1, pod)
        v1 = client.CoreV1Api()
        say("API server restart")
        test_evict_oom_status(fake, v1)
        say("evict, OOM, status")
        test_pvc(fake, v1)
        say("PVC")
        test_node_lost_and_delete(fake, v1)
        say("node lost, delete")
        # stopped without --keep-on-exit semantics: the test tears down and checks
        fake.stop()
        subprocess.run([sys.executable, os.path.join(HERE, "fake_apiserver.py"), "--teardown",
                        "--state", fake.state], check=True)
        check(not leftovers(), "no netns/veth/bridge left: %r" % leftovers())
        check(not os.path.exists(fake.data), "the data dir is gone")
        ok = True
    except Exception:
        traceback.print_exc()
        print("---- fake log ----\n" + fake.log())
    finally:
        fake.stop(signal.SIGKILL)
        subprocess.run([sys.executable, os.path.join(HERE, "fake_apiserver.py"), "--teardown",
                        "--state", fake.state])
        for n in leftovers():  # belt and braces: nothing of ours stays
            if os.path.exists("/run/netns/" + n):
                subprocess.run(["ip", "netns", "del", n])
            else:
                subprocess.run(["ip", "link", "del", n])
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
