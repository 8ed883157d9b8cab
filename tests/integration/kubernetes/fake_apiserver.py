#!/usr/bin/python3
"""A FAKE Kubernetes API server and kubelet, for the hermetic tests of sbx's `kubernetes`
provider (no real API server can run on these machines). It is not Kubernetes: one process,
one node (`fake-node`), no scheduler beyond volume/nodeSelector checks, no controllers, no RBAC,
no admission webhooks. What it serves, it serves on the real wire protocol (the official
python3-kubernetes client drives it in test_fake_apiserver.py):

  HTTPS, bearer token or client certificate (else 401 Status);
  /version, /api, /api/v1, /healthz, /api/v1/namespaces[/{ns}], /api/v1/nodes[/{name}];
  /api/v1/namespaces/{ns}/{pods,persistentvolumeclaims,secrets,events}[/{name}]:
    POST (generateName, 409 AlreadyExists), GET, list (labelSelector, fieldSelector, limit and
    continue), watch (?watch=1: resourceVersion, 410 Expired beyond --watch-history,
    allowWatchBookmarks, timeoutSeconds, selectors with ADDED/DELETED on (un)matching),
    DELETE (gracePeriodSeconds, preconditions, finalizers), PUT/PATCH (resourceVersion
    conflicts, pod spec immutability), DELETE collection;
  pods/{name}/log (container, tailLines, follow, limitBytes), pods/{name}/portforward
    (WebSocket, v4.channel.k8s.io / v4.base64.channel.k8s.io / portforward.k8s.io);
  every request body checked against the OpenAPI schema from the official client's generated
  models, then by the API server's semantic validation (k8s_validation.py).

The fake kubelet runs pods for real: each pod gets a network namespace, a veth on a bridge and
an IP from --pod-cidr; each container is a process (fake_shim.py: private mount namespace
with emptyDir and PVC directories bound at their mountPaths) whose output is the pod log;
readiness probes (tcpSocket, httpGet, exec) gate Ready.
Images are host directories (--image NAME=DIR). Pods keep running when this server stops
(--keep-on-exit) and are re-adopted from --state.

Test control, same auth, under /fake/ (see README.md): inject, reset-injections, requests,
config, pods/{ns}/{name}/{status,evict,oom,run}, pvcs/{ns}/{name}/status, node/lost,
node/ready, watches/close.

Usage: fake_apiserver.py --cert C --key K --token T [--client-ca CA] [--listen 127.0.0.1:0]
         [--port-file F] [--kubeconfig-out F] [--state F] [--data-dir D] [--image N=DIR]...
       fake_apiserver.py --teardown --state F      (kill and remove everything it recorded)
"""
from __future__ import annotations

import argparse
import base64
import collections
import copy
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fake_shim import CLONE_NEWNET, setns  # noqa: E402
from k8s_validation import (ApiError, check_schema, validate_pod, validate_pvc,  # noqa: E402
                            validate_secret)

Obj = dict[str, Any]
NODE = "fake-node"
# The API the schema comes from: python3-kubernetes N.x is generated from Kubernetes 1.N, so
# the fake says it is that version (fields newer than it are unknown to it, as to a real one).
K8S_MINOR = "22"
GIT_VERSION = "v1.%s.0-fake" % K8S_MINOR
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# resource -> (Kind, model class, semantic validator)
RESOURCES: dict[str, tuple[str, str, Optional[Callable[..., None]]]] = {
    "pods": ("Pod", "V1Pod", None),
    "persistentvolumeclaims": ("PersistentVolumeClaim", "V1PersistentVolumeClaim", None),
    "secrets": ("Secret", "V1Secret", None),
    "events": ("Event", "CoreV1Event", None),
}


def now(offset: float = 0) -> str:
    """RFC 3339 UTC to the second, as metav1.Time serializes."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


def log(msg: str) -> None:
    """One line to stderr (the test shows it when something fails)."""
    sys.stderr.write("fake-apiserver: %s\n" % msg)
    sys.stderr.flush()


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command (ip ...), raising with its stderr when it fails and check is set."""
    p = subprocess.run(list(argv), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), p.stderr.strip()))
    return p


def merge(dst: Obj, src: Obj) -> Obj:
    """JSON merge patch (RFC 7386): null removes, objects merge, the rest replaces."""
    for k, v in src.items():
        if v is None:
            dst.pop(k, None)
        elif isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = copy.deepcopy(v)
    return dst


def json_patch(doc: Obj, ops: list[Obj]) -> Obj:
    """RFC 6902 add/replace/remove/test (enough for metadata edits)."""
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent: Any = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent.setdefault(p, {})
        last = parts[-1]
        kind = op["op"]
        if kind in ("add", "replace"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                elif kind == "add":
                    parent.insert(int(last), op["value"])
                else:
                    parent[int(last)] = op["value"]
            else:
                parent[last] = op["value"]
        elif kind == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            else:
                del parent[last]
        elif kind == "test":
            cur = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if cur != op.get("value"):
                raise ApiError(422, "Invalid", "the server rejected our request due to an error "
                               "in our request")
        else:
            raise ApiError(400, "BadRequest", "Unexpected kind: %s" % kind)
    return doc


# ------------------------------------------------------------------------- selectors

class Selector:
    """A label selector (`a=b,c==d,e!=f,g in (x,y),h notin (z),i,!j`) or a field selector."""

    def __init__(self, text: str, fields: Optional[set[str]] = None) -> None:
        self.reqs: list[tuple[str, str, list[str]]] = []
        text = (text or "").strip()
        if not text:
            return
        for part in re.findall(r"(?:[^,(]|\([^)]*\))+", text):
            part = part.strip()
            m = re.fullmatch(r"([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)", part)
            if m:
                self.reqs.append((m.group(1), m.group(2),
                                  [v.strip() for v in m.group(3).split(",") if v.strip()]))
            elif (m := re.fullmatch(r"([^\s!=]+)\s*(==|=|!=)\s*(\S*)", part)):
                op = {"==": "=", "=": "=", "!=": "!="}[m.group(2)]
                self.reqs.append((m.group(1), op, [m.group(3)]))
            elif fields is None and (m := re.fullmatch(r"(!?)([^\s!=(),]+)", part)):
                self.reqs.append((m.group(2), "!exists" if m.group(1) else "exists", []))
            else:
                raise ApiError(400, "BadRequest", "unable to parse requirement: %s" % part
                               if fields is None else "invalid selector: '%s'; can't understand "
                               "'%s'" % (text, part))
            if fields is not None and self.reqs[-1][0] not in fields:
                raise ApiError(400, "BadRequest", 'field label not supported: %s'
                               % self.reqs[-1][0])

    def matches(self, values: dict[str, str], present: Optional[set[str]] = None) -> bool:
        for key, op, vals in self.reqs:
            has = key in values
            v = values.get(key)
            if op == "=" and not (has and v == vals[0]):
                return False
            if op == "!=" and has and v == vals[0]:
                return False
            if op == "in" and not (has and v in vals):
                return False
            if op == "notin" and has and v in vals:
                return False
            if op == "exists" and not has:
                return False
            if op == "!exists" and has:
                return False
        return True


FIELDS = {
    "pods": {"metadata.name", "metadata.namespace", "status.phase", "spec.nodeName",
             "spec.restartPolicy", "spec.serviceAccountName", "status.podIP"},
    "events": {"metadata.name", "metadata.namespace", "involvedObject.name",
               "involvedObject.kind", "involvedObject.uid", "involvedObject.namespace",
               "involvedObject.apiVersion", "involvedObject.resourceVersion",
               "involvedObject.fieldPath", "reason", "type", "source", "reportingComponent"},
    "persistentvolumeclaims": {"metadata.name", "metadata.namespace"},
    "secrets": {"metadata.name", "metadata.namespace", "type"},
}


def field_values(obj: Obj) -> dict[str, str]:
    """The field set a field selector sees."""
    out: dict[str, str] = {}

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(prefix + "." + k if prefix else k, x)
        elif v is not None and not isinstance(v, list):
            out[prefix] = str(v)
    walk("", {k: obj.get(k) for k in ("metadata", "spec", "status", "involvedObject",
                                       "reason", "type")})
    out.setdefault("spec.nodeName", "")
    if "source" in obj:
        out["source"] = (obj.get("source") or {}).get("component", "")
    return out


# ------------------------------------------------------------------------- the store

class Store:
    """Objects by resource, one resourceVersion counter (etcd's revision), per-resource event
    history for watches, persisted as JSON after every change."""

    def __init__(self, path: Optional[str], history: int) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.rv = 1
        self.objects: dict[str, dict[tuple[str, str], Obj]] = {r: {} for r in RESOURCES}
        self.history_len = history
        self.history: dict[str, collections.deque[tuple[int, str, Obj, Optional[Obj]]]] = {
            r: collections.deque() for r in RESOURCES}
        self.history_start: dict[str, int] = {r: 0 for r in RESOURCES}
        self.runtime: dict[str, Obj] = {}   # pod uid -> the kubelet's record
        self.extra: Obj = {}                 # network state and the like
        self.watch_generation = 0
        if path and os.path.exists(path):
            with open(path) as f:
                st = json.load(f)
            self.rv = st["rv"]
            for r, items in st["objects"].items():
                for o in items:
                    self.objects[r][(o["metadata"].get("namespace", ""), o["metadata"]["name"])] = o
            self.runtime = st.get("runtime", {})
            self.extra = st.get("extra", {})
            # the watch cache starts empty after a restart, as the real one does
            self.history_start = {r: self.rv for r in RESOURCES}

    def persist(self) -> None:
        """Write the state file (atomically)."""
        if not self.path:
            return
        st = {"rv": self.rv, "objects": {r: list(o.values()) for r, o in self.objects.items()},
              "runtime": self.runtime, "extra": self.extra}
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, self.path)

    def get(self, res: str, ns: str, name: str) -> Optional[Obj]:
        with self.lock:
            o = self.objects[res].get((ns, name))
            return copy.deepcopy(o) if o else None

    def list(self, res: str, ns: Optional[str]) -> list[Obj]:
        with self.lock:
            return [copy.deepcopy(o) for (n, _), o in sorted(self.objects[res].items())
                    if ns is None or n == ns]

    def _record(self, res: str, typ: str, obj: Obj, prev: Optional[Obj]) -> None:
        h = self.history[res]
        h.append((self.rv, typ, copy.deepcopy(obj), prev))
        while len(h) > self.history_len:
            self.history_start[res] = h.popleft()[0]
        self.persist()
        self.cond.notify_all()

    def put(self, res: str, obj: Obj) -> Obj:
        """Create or replace `obj`: a new resourceVersion, an ADDED/MODIFIED event."""
        with self.lock:
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            prev = self.objects[res].get(key)
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            self.objects[res][key] = copy.deepcopy(obj)
            self._record(res, "MODIFIED" if prev else "ADDED", obj, prev)
            return copy.deepcopy(obj)

    def remove(self, res: str, obj: Obj) -> Obj:
        """Delete `obj` for good: the DELETED event carries a new resourceVersion."""
        with self.lock:
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            prev = self.objects[res].pop(key, None)
            if prev is None:
                return obj
            self.rv += 1
            out = copy.deepcopy(prev)
            out["metadata"]["resourceVersion"] = str(self.rv)
            self._record(res, "DELETED", out, prev)
            return out

    def update(self, res: str, ns: str, name: str, fn: Callable[[Obj], Any]) -> Optional[Obj]:
        """Read-modify-write under the lock; nothing is written when fn leaves it unchanged."""
        with self.lock:
            cur = self.objects[res].get((ns, name))
            if cur is None:
                return None
            new = copy.deepcopy(cur)
            fn(new)
            if new == cur:
                return copy.deepcopy(cur)
            return self.put(res, new)


# ------------------------------------------------------------------------- networking

class Network:
    """A bridge with the --pod-cidr's first address (kubenet's cbr0), a veth and a network
    namespace per pod. Names carry --name-prefix so parallel fakes do not clash."""

    def __init__(self, store: Store, cidr: str, prefix: str) -> None:
        self.store = store
        net = store.extra.setdefault("net", {})
        if net.get("cidr") and net["cidr"] != cidr:
            cidr = net["cidr"]  # a restart keeps the network it made
        self.cidr = ipaddress.ip_network(cidr)
        self.prefix = net.setdefault("prefix", prefix)
        self.bridge = net.setdefault("bridge", self.prefix + "br")
        net["cidr"] = str(self.cidr)
        net.setdefault("allocated", {})
        net.setdefault("counter", 0)
        self.gateway = str(next(self.cidr.hosts()))
        if not os.path.exists("/sys/class/net/" + self.bridge):
            for r in json.loads(run("ip", "-j", "-4", "route", "show").stdout or "[]"):
                dst = r.get("dst", "")
                if dst not in ("default", "") and ipaddress.ip_network(dst, strict=False)\
                        .overlaps(self.cidr):
                    raise SystemExit("fake-apiserver: --pod-cidr %s overlaps the route %s "
                                     "(dev %s): choose another" % (cidr, dst, r.get("dev")))
            run("ip", "link", "add", self.bridge, "type", "bridge")
            run("ip", "addr", "add", "%s/%d" % (self.gateway, self.cidr.prefixlen),
                "dev", self.bridge)
            run("ip", "link", "set", self.bridge, "up")
        store.persist()

    def setup(self, uid: str) -> tuple[str, str, str]:
        """A pod's sandbox network: (netns name, host veth, pod IP)."""
        with self.store.lock:
            net = self.store.extra["net"]
            net["counter"] += 1
            n = net["counter"]
            ip = next(str(h) for h in self.cidr.hosts()
                      if str(h) != self.gateway and str(h) not in net["allocated"])
            net["allocated"][ip] = uid
            self.store.persist()
        ns = "%s-%d" % (self.prefix, n)
        veth = "%sv%x" % (self.prefix, n)
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("ip", "link", "set", veth, "master", self.bridge, "up")
        run("ip", "-n", ns, "addr", "add", "%s/%d" % (ip, self.cidr.prefixlen), "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        run("ip", "-n", ns, "route", "add", "default", "via", self.gateway)
        return ns, veth, ip

    def teardown(self, ns: Optional[str], veth: Optional[str], ip: Optional[str]) -> None:
        """Remove a pod's namespace and veth; free its IP."""
        if ns:
            run("ip", "netns", "del", ns, check=False)
        if veth and os.path.exists("/sys/class/net/" + veth):
            run("ip", "link", "del", veth, check=False)
        if ip:
            with self.store.lock:
                self.store.extra["net"]["allocated"].pop(ip, None)
                self.store.persist()

    def destroy(self) -> None:
        """Remove the bridge."""
        if os.path.exists("/sys/class/net/" + self.bridge):
            run("ip", "link", "del", self.bridge, check=False)


def netns_pids(ns: str) -> list[int]:
    """The processes in a network namespace (`ip netns pids`)."""
    p = run("ip", "netns", "pids", ns, check=False)
    return [int(x) for x in p.stdout.split()] if p.returncode == 0 else []


def proc_start(pid: int) -> Optional[str]:
    """A process's start time in ticks (guards against PID reuse), None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            return None
        return fields[19]
    except (OSError, IndexError):
        return None


# ------------------------------------------------------------------------- the fake kubelet

class PodGone(Exception):
    """The pod object is gone (deleted at once, or force-deleted)."""


class PodDeleting(Exception):
    """The pod has a deletionTimestamp: stop it."""


class Stopping(Exception):
    """The fake is shutting down and leaves pods as they are."""


def image_ref(image: str) -> str:
    """The fully qualified reference containerd reports (`docker.io/library/busybox:latest`)."""
    name, tag = image, "latest"
    if "@" in image:
        return image
    m = re.fullmatch(r"(.+?)(?::([^/:]+))?", image)
    if m:
        name, tag = m.group(1), m.group(2) or "latest"
    first = name.split("/")[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in first and ":" not in first and first != "localhost":
        name = "docker.io/" + name
    return "%s:%s" % (name, tag)


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command, args and env values ($$ escapes)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


class Kubelet:
    """One worker thread per pod; the records it needs to re-adopt pods live in
    store.runtime[uid] (netns, veth, IP, per container: shim pid and its start time, files)."""

    def __init__(self, fake: "Fake") -> None:
        self.fake = fake
        self.store = fake.store
        self.workers: dict[str, threading.Thread] = {}
        self.popens: dict[int, subprocess.Popen[bytes]] = {}
        self.lock = threading.Lock()

    def ensure_worker(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        with self.lock:
            t = self.workers.get(uid)
            if t and t.is_alive():
                return
            w = PodWorker(self, pod["metadata"]["namespace"], pod["metadata"]["name"], uid)
            t = threading.Thread(target=w.run, name="pod-" + pod["metadata"]["name"],
                                 daemon=True)
            self.workers[uid] = t
            t.start()

    def housekeeping(self) -> None:
        """Start workers for pods that have none; let go of PVCs nobody uses."""
        while not self.fake.stopping:
            for pod in self.store.list("pods", None):
                if not self.fake.config["nodeLost"]:
                    self.ensure_worker(pod)
            self.fake.pvc_controller()
            with self.store.cond:
                self.store.cond.wait(0.5)

    # ---- events
    def event(self, pod: Obj, reason: str, message: str, typ: str = "Normal",
              component: str = "kubelet", field_path: Optional[str] = None) -> None:
        """A core/v1 Event about `pod` (repeats bump count and lastTimestamp)."""
        meta = pod["metadata"]
        ns = meta["namespace"]
        with self.store.lock:
            for ev in self.store.objects["events"].values():
                io = ev["involvedObject"]
                if io.get("uid") == meta["uid"] and ev["reason"] == reason and \
                        ev["message"] == message:
                    def bump(e: Obj) -> None:
                        e["count"] = e.get("count", 1) + 1
                        e["lastTimestamp"] = now()
                    self.store.update("events", ns, ev["metadata"]["name"], bump)
                    return
            io = {"kind": "Pod", "namespace": ns, "name": meta["name"], "uid": meta["uid"],
                  "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion", "")}
            if field_path:
                io["fieldPath"] = field_path
            t = now()
            self.store.put("events", {
                "kind": "Event", "apiVersion": "v1",
                "metadata": {"name": "%s.%x" % (meta["name"], time.time_ns()),
                             "namespace": ns, "uid": str(uuid.uuid4()),
                             "creationTimestamp": t},
                "involvedObject": io, "reason": reason, "message": message,
                "source": {"component": component} if component != "kubelet" else
                {"component": "kubelet", "host": NODE},
                "firstTimestamp": t, "lastTimestamp": t, "count": 1, "type": typ,
                "eventTime": None, "reportingComponent": component,
                "reportingInstance": NODE if component == "kubelet" else ""})


def _cstatus(ctr: Obj, state: Obj, **kw: Any) -> Obj:
    st = {"name": ctr["name"], "image": ctr.get("image", ""), "imageID": "",
          "ready": False, "restartCount": 0, "started": False, "state": state,
          "lastState": {}}
    st.update(kw)
    return st


class PodWorker:
    """The kubelet's work for one pod: schedule, sandbox, init containers, containers,
    monitor, kill, remove. Restart-safe: a new fake resumes from store.runtime."""

    def __init__(self, kl: Kubelet, ns: str, name: str, uid: str) -> None:
        self.kl, self.fake, self.store = kl, kl.fake, kl.store
        self.ns, self.name, self.uid = ns, name, uid

    # ---- helpers
    @property
    def rt(self) -> Obj:
        return self.store.runtime.setdefault(self.uid, {"containers": {}})

    def pod(self) -> Obj:
        p = self.store.get("pods", self.ns, self.name)
        if p is None or p["metadata"]["uid"] != self.uid:
            raise PodGone()
        return p

    def check(self) -> Obj:
        """The pod, raising when it is gone, being deleted, or the fake stops."""
        if self.fake.stopping:
            raise Stopping()
        p = self.pod()
        if p["metadata"].get("deletionTimestamp"):
            raise PodDeleting()
        return p

    def wait(self, seconds: float) -> Obj:
        with self.store.cond:
            self.store.cond.wait(seconds)
        while self.fake.config["nodeLost"] and not self.fake.stopping:
            with self.store.cond:  # a lost node's kubelet does nothing
                self.store.cond.wait(0.5)
            self.pod()
        return self.check()

    def status(self, fn: Callable[[Obj], None]) -> Obj:
        def apply(p: Obj) -> None:
            fn(p.setdefault("status", {}))
            recompute(p)
        out = self.store.update("pods", self.ns, self.name, apply)
        if out is None:
            raise PodGone()
        return out

    def persist(self) -> None:
        with self.store.lock:
            self.store.persist()

    # ---- main flow
    def run(self) -> None:
        try:
            try:
                self.flow()
            except PodDeleting:
                self.kill_and_remove()
            except PodGone:
                self.cleanup()
        except Stopping:
            pass
        except PodGone:
            self.cleanup()
        except Exception as e:  # a fake bug: say so loudly, keep serving
            import traceback
            log("pod %s/%s: %s\n%s" % (self.ns, self.name, e, traceback.format_exc()))

    def flow(self) -> None:
        pod = self.check()
        phase = (pod.get("status") or {}).get("phase")
        stage = self.rt.get("stage", "")
        if phase in ("Succeeded", "Failed", "Unknown") and not stage.startswith(("init", "main")):
            self.idle()
        if not stage:
            self.schedule()
            self.rt["stage"] = "scheduled"
            self.persist()
        pod = self.check()
        while not self.fake.config["autoRun"] and not self.rt.get("run"):
            pod = self.wait(0.5)
        if self.rt["stage"] == "scheduled":
            self.sandbox()
        if self.rt["stage"].startswith("init"):
            self.run_inits()
        if self.rt["stage"] in ("containers", "main"):
            self.run_main()
        self.idle()

    def idle(self) -> None:
        """A finished pod stays until deleted."""
        while True:
            self.wait(1)

    def schedule(self) -> None:
        """The scheduler's part: PVCs present and bound, nodeSelector matching."""
        while True:
            pod = self.check()
            why = self.unschedulable(pod)
            if why is None:
                break
            msg = "0/1 nodes are available: %s preemption: 0/1 nodes are available: 1 " \
                  "Preemption is not helpful for scheduling." % why
            self.status(lambda s: s.update(phase="Pending", conditions=[{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": msg, "lastProbeTime": None, "lastTransitionTime": now()}]))
            self.kl.event(pod, "FailedScheduling", msg, "Warning", "default-scheduler")
            while self.unschedulable(self.check()) == why:
                self.wait(0.5)

        def bind(p: Obj) -> None:
            p["spec"]["nodeName"] = NODE
            p.setdefault("status", {})["phase"] = "Pending"
            set_condition(p, "PodScheduled", "True")
        self.store.update("pods", self.ns, self.name, bind)
        self.kl.event(self.pod(), "Scheduled", "Successfully assigned %s/%s to %s"
                      % (self.ns, self.name, NODE), "Normal", "default-scheduler")

    def unschedulable(self, pod: Obj) -> Optional[str]:
        for v in pod["spec"].get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvc = self.store.get("persistentvolumeclaims", self.ns, claim)
            if pvc is None:
                return 'persistentvolumeclaim "%s" not found.' % claim
            if pvc["metadata"].get("deletionTimestamp"):
                return 'persistentvolumeclaim "%s" is being deleted.' % claim
            if (pvc.get("status") or {}).get("phase") != "Bound":
                return "1 pod has unbound immediate PersistentVolumeClaims."
        sel = pod["spec"].get("nodeSelector") or {}
        labels = self.fake.node_labels()
        if any(labels.get(k) != v for k, v in sel.items()):
            return "1 node(s) didn't match Pod's node affinity/selector."
        return None

    def sandbox(self) -> None:
        pod = self.check()
        ns, veth, ip = self.fake.net.setup(self.uid)
        self.rt.update(netns=ns, veth=veth, ip=ip, stage="init:0")
        self.persist()
        spec = pod["spec"]
        inits = spec.get("initContainers") or []

        def st(s: Obj) -> None:
            s.update(podIP=ip, podIPs=[{"ip": ip}], hostIP="127.0.0.1", startTime=now())
            s["initContainerStatuses"] = [_cstatus(c, {"waiting": {"reason": "PodInitializing"}})
                                          for c in inits] if inits else None
            if not inits:
                s.pop("initContainerStatuses", None)
            s["containerStatuses"] = [_cstatus(c, {"waiting": {
                "reason": "PodInitializing" if inits else "ContainerCreating"}})
                for c in spec["containers"]]
        self.status(st)

    def run_inits(self) -> None:
        inits = self.check()["spec"].get("initContainers") or []
        i = int(self.rt["stage"].split(":")[1])
        while i < len(inits):
            ctr = inits[i]
            rec = self.rt["containers"].get(ctr["name"])
            if rec is None:
                self.start(ctr, "initContainerStatuses")
            code = self.await_exit(ctr, "initContainerStatuses")
            if code != 0:
                pod = self.pod()
                policy = pod["spec"].get("restartPolicy", "Always")
                if policy == "Never":
                    self.rt["stage"] = "failed"
                    self.persist()

                    def fail(s: Obj) -> None:
                        s["phase"] = "Failed"
                        for c in s.get("containerStatuses") or []:
                            c["state"] = {"waiting": {"reason": "PodInitializing"}}
                    self.status(fail)
                    self.teardown_sandbox()
                    self.idle()
                self.backoff(ctr, "initContainerStatuses")
                continue
            i += 1
            self.rt["stage"] = "init:%d" % i
            self.persist()
        self.rt["stage"] = "containers"
        self.persist()

    def run_main(self) -> None:
        pod = self.check()
        ctrs = pod["spec"]["containers"]
        if self.rt["stage"] == "containers":
            for ctr in ctrs:
                if ctr["name"] not in self.rt["containers"]:
                    self.start(ctr, "containerStatuses")
            self.rt["stage"] = "main"
            self.persist()
        policy = pod["spec"].get("restartPolicy", "Always")
        done: dict[str, int] = {}
        while True:
            pod = self.check()
            if self.rt.get("stage") == "evicted":
                self.idle()  # the eviction manager owns this pod's status now
            for ctr in ctrs:
                if ctr["name"] in done:
                    continue
                code = self.exit_code(ctr, "containerStatuses")
                if code is None:
                    continue
                if policy == "Always" or (policy == "OnFailure" and code != 0):
                    self.backoff(ctr, "containerStatuses")
                    continue
                done[ctr["name"]] = code
            for ctr in ctrs:
                if ctr.get("readinessProbe") and ctr["name"] not in done:
                    self.readiness(pod, ctr)
            if len(done) == len(ctrs) and self.rt.get("stage") != "evicted":
                ok = all(c == 0 for c in done.values())
                self.rt["stage"] = "done"
                self.persist()
                self.status(lambda s: s.update(phase="Succeeded" if ok else "Failed"))
                self.teardown_sandbox()
                return
            self.wait(0.2)

    def readiness(self, pod: Obj, ctr: Obj) -> None:
        """readinessProbe (tcpSocket, httpGet from the host to the pod IP, as the kubelet
        does; exec inside the container with nsenter): ready after successThreshold
        successes, not ready after failureThreshold failures; Unhealthy events."""
        rec = self.rt["containers"].get(ctr["name"])
        if rec is None or "exit" in rec:
            return
        probe = ctr["readinessProbe"]
        st = self.__dict__.setdefault("probes", {}).setdefault(ctr["name"], {
            "next": time.time() + probe.get("initialDelaySeconds", 0), "ok": 0, "bad": 0,
            "ready": False})
        if time.time() < st["next"]:
            return
        st["next"] = time.time() + probe.get("periodSeconds", 10)
        err = probe_once(probe, ctr, self.rt.get("ip") or "", rec,
                         float(probe.get("timeoutSeconds", 1)))
        if err is None:
            st["ok"], st["bad"] = st["ok"] + 1, 0
            if st["ok"] >= probe.get("successThreshold", 1):
                st["ready"] = True
        else:
            st["ok"], st["bad"] = 0, st["bad"] + 1
            self.kl.event(pod, "Unhealthy", "Readiness probe failed: " + err, "Warning",
                          field_path="spec.containers{%s}" % ctr["name"])
            if st["bad"] >= probe.get("failureThreshold", 3):
                st["ready"] = False

        def upd(s: Obj) -> None:
            for c in s.get("containerStatuses") or []:
                if c["name"] == ctr["name"] and "running" in c["state"]:
                    c["ready"] = st["ready"]
        self.status(upd)

    def backoff(self, ctr: Obj, key: str) -> None:
        """CrashLoopBackOff: 1 s doubling to 10 s (the real one: 10 s to 5 min)."""
        rec = self.rt["containers"].pop(ctr["name"])
        n = rec.get("restarts", 0) + 1
        delay = min(10, 2 ** (n - 1))
        msg = "back-off %ds restarting failed container=%s pod=%s_%s(%s)" % (
            delay, ctr["name"], self.name, self.ns, self.uid)

        def st(s: Obj) -> None:
            for c in s.get(key) or []:
                if c["name"] == ctr["name"]:
                    c["lastState"] = {"terminated": c["state"].get("terminated")}
                    c["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": msg}}
                    c["restartCount"] = n
                    c["ready"] = c["started"] = False
        self.status(st)
        self.kl.event(self.pod(), "BackOff", "Back-off restarting failed container %s in pod "
                      "%s_%s(%s)" % (ctr["name"], self.name, self.ns, self.uid), "Warning",
                      field_path="spec.%s{%s}" % (key_field(key), ctr["name"]))
        end = time.time() + delay
        while time.time() < end:
            self.wait(0.2)
        self.start(ctr, key, restarts=n)

    # ---- containers
    def pull(self, ctr: Obj, key: str) -> str:
        """The image's host directory ('' = the host root) or, with the strict pull policy and
        no mapping, ErrImagePull / ImagePullBackOff until deleted."""
        image = ctr["image"]
        fp = "spec.%s{%s}" % (key_field(key), ctr["name"])
        tries = 0
        while True:
            d = self.fake.images().get(image)
            if d is not None or self.fake.config["pullPolicy"] != "strict":
                pod = self.check()
                self.kl.event(pod, "Pulled", 'Container image "%s" already present on machine'
                              % image, field_path=fp)
                # an image mapped to / is the host root itself
                return "" if not d or os.path.realpath(d) == "/" else d
            pod = self.check()
            ref = image_ref(image)
            msg = ('rpc error: code = NotFound desc = failed to pull and unpack image "%s": '
                   'failed to resolve reference "%s": %s: not found' % (ref, ref, ref))
            self.kl.event(pod, "Pulling", 'Pulling image "%s"' % image, field_path=fp)
            self.kl.event(pod, "Failed", 'Failed to pull image "%s": %s' % (image, msg),
                          "Warning", field_path=fp)
            self.kl.event(pod, "Failed", "Error: ErrImagePull", "Warning", field_path=fp)
            self.set_waiting(ctr, key, "ErrImagePull", msg)
            tries += 1
            end = time.time() + 1.0
            while time.time() < end:
                self.wait(0.2)
            pod = self.check()
            bmsg = 'Back-off pulling image "%s"' % image
            self.kl.event(pod, "BackOff", bmsg, "Normal", field_path=fp)
            self.kl.event(pod, "Failed", "Error: ImagePullBackOff", "Warning", field_path=fp)
            self.set_waiting(ctr, key, "ImagePullBackOff", bmsg)
            end = time.time() + min(10, 2 * tries)
            while time.time() < end:
                self.wait(0.2)

    def set_waiting(self, ctr: Obj, key: str, reason: str, message: str) -> None:
        def st(s: Obj) -> None:
            for c in s.get(key) or []:
                if c["name"] == ctr["name"]:
                    c["state"] = {"waiting": {"reason": reason, "message": message}}
        self.status(st)

    def container_env(self, pod: Obj, ctr: Obj) -> dict[str, str]:
        """The process environment: defaults, env (values, secretKeyRef, fieldRef) with $(VAR)
        expansion, envFrom secretRef. A missing secret raises ValueError (the kubelet's
        CreateContainerConfigError)."""
        env = {"PATH": DEFAULT_PATH, "HOSTNAME": pod["metadata"]["name"], "HOME": "/root",
               "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
        for ef in ctr.get("envFrom") or []:
            ref = ef.get("secretRef")
            if ref:
                sec = self.store.get("secrets", self.ns, ref["name"])
                if sec is None:
                    if ref.get("optional"):
                        continue
                    raise ValueError('secret "%s" not found' % ref["name"])
                for k, v in secret_data(sec).items():
                    env[(ef.get("prefix") or "") + k] = v
            elif ef.get("configMapRef") and not ef["configMapRef"].get("optional"):
                raise ValueError('configmap "%s" not found' % ef["configMapRef"]["name"])
        for e in ctr.get("env") or []:
            vf = e.get("valueFrom")
            if not vf:
                env[e["name"]] = expand(e.get("value") or "", env)
                continue
            if vf.get("secretKeyRef"):
                ref = vf["secretKeyRef"]
                sec = self.store.get("secrets", self.ns, ref["name"])
                if sec is None:
                    if ref.get("optional"):
                        continue
                    raise ValueError('secret "%s" not found' % ref["name"])
                data = secret_data(sec)
                if ref["key"] not in data:
                    if ref.get("optional"):
                        continue
                    raise ValueError("couldn't find key %s in Secret %s/%s"
                                     % (ref["key"], self.ns, ref["name"]))
                env[e["name"]] = data[ref["key"]]
            elif vf.get("fieldRef"):
                path = vf["fieldRef"]["fieldPath"]
                m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
                if m:
                    env[e["name"]] = (pod["metadata"].get(m.group(1)) or {}).get(m.group(2), "")
                else:
                    env[e["name"]] = field_values(pod).get(path, "")
            elif vf.get("configMapKeyRef") and not vf["configMapKeyRef"].get("optional"):
                raise ValueError('configmap "%s" not found' % vf["configMapKeyRef"]["name"])
        return env

    def start(self, ctr: Obj, key: str, restarts: int = 0) -> None:
        """Pull, create and start one container (a shim process)."""
        image_dir = self.pull(ctr, key)
        fp = "spec.%s{%s}" % (key_field(key), ctr["name"])
        while True:
            pod = self.check()
            try:
                env = self.container_env(pod, ctr)
                break
            except ValueError as e:
                self.set_waiting(ctr, key, "CreateContainerConfigError", str(e))
                self.kl.event(pod, "Failed", "Error: %s" % e, "Warning", field_path=fp)
                end = time.time() + 2
                while time.time() < end:
                    self.wait(0.2)
        argv = [expand(a, env) for a in (ctr.get("command") or []) + (ctr.get("args") or [])]
        pdir = os.path.join(self.fake.data_dir, "pods", self.uid)
        cdir = os.path.join(pdir, "containers", "%s-%d" % (ctr["name"], restarts))
        os.makedirs(cdir, exist_ok=True)
        mounts = []
        while True:
            try:
                self.mount_secrets(pod)
                break
            except ValueError as e:
                # the kubelet retries the mount; the container waits as it was
                self.kl.event(pod, "FailedMount", str(e), "Warning")
                end = time.time() + 2
                while time.time() < end:
                    self.wait(0.2)
                pod = self.check()
        for m in ctr.get("volumeMounts") or []:
            vol = next(v for v in pod["spec"].get("volumes") or [] if v["name"] == m["name"])
            src = self.volume_dir(pod, vol)
            if m.get("subPath"):
                src = os.path.join(src, m["subPath"])
                os.makedirs(src, exist_ok=True)
            mounts.append({"source": src, "path": m["mountPath"],
                           "readOnly": bool(m.get("readOnly"))})
        cid = hashlib.sha256(("%s/%s/%d" % (self.uid, ctr["name"], restarts)).encode())\
            .hexdigest()
        logf = os.path.join(pdir, "%s.log" % ctr["name"])
        spec = {"netns": "/run/netns/" + self.rt["netns"], "root": os.path.join(cdir, "root"),
                "mounts": mounts, "argv": argv, "env": env, "image": image_dir,
                "cwd": ctr.get("workingDir") or "/",
                "exit_file": os.path.join(cdir, "exit.json"),
                "pid_file": os.path.join(cdir, "pid.json"),
                "start_error": os.path.join(cdir, "start-error.json")}
        os.makedirs(spec["root"], exist_ok=True)
        with open(os.path.join(cdir, "spec.json"), "w") as f:
            json.dump(spec, f)
        self.kl.event(pod, "Created", "Created container " + ctr["name"], field_path=fp)
        if not argv:
            msg = ("failed to generate container \"%s\" spec: failed to generate spec: no "
                   "command specified" % cid)
            self.set_waiting(ctr, key, "CreateContainerError", msg)
            self.kl.event(pod, "Failed", "Error: " + msg, "Warning", field_path=fp)
            while True:
                self.wait(1)
        with open(logf, "ab") as out:
            p = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_shim.py"),
                                  os.path.join(cdir, "spec.json")],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 start_new_session=True, close_fds=True)
        self.kl.popens[p.pid] = p
        # containerd's Start returns once the task runs: wait for the shim's fork (or its end)
        deadline = time.time() + 20
        while time.time() < deadline and p.poll() is None and not any(
                os.path.exists(spec[k]) for k in ("pid_file", "exit_file")):
            time.sleep(0.02)
        started = now()
        self.rt["containers"][ctr["name"]] = {
            "shim": p.pid, "shimStart": proc_start(p.pid), "dir": cdir, "log": logf,
            "containerID": "containerd://" + cid, "startedAt": started, "restarts": restarts,
            "imageDir": image_dir}
        self.persist()
        self.kl.event(pod, "Started", "Started container " + ctr["name"], field_path=fp)
        ref = image_ref(ctr["image"])

        def st(s: Obj) -> None:
            for c in s.get(key) or []:
                if c["name"] == ctr["name"]:
                    c.update(state={"running": {"startedAt": started}}, ready=key !=
                             "initContainerStatuses" and not ctr.get("readinessProbe"),
                             started=True,
                             containerID="containerd://" + cid, imageID=ref.rsplit(":", 1)[0] +
                             "@sha256:" + hashlib.sha256(ref.encode()).hexdigest())
        self.status(st)

    def mount_secrets(self, pod: Obj) -> None:
        """Secret volumes: the keys (or the listed items) as files, defaultMode (0644) or the
        item's mode, written once per pod (the real kubelet uses a tmpfs and atomic symlink
        swaps; a Secret marked immutable is never refreshed either). A missing secret or key
        raises ValueError with the kubelet's FailedMount message."""
        for vol in pod["spec"].get("volumes") or []:
            sv = vol.get("secret")
            if sv is None:
                continue
            d = os.path.join(self.fake.data_dir, "pods", self.uid, "volumes", vol["name"])
            if os.path.exists(d + ".ready"):
                continue
            sec = self.store.get("secrets", self.ns, sv["secretName"])
            if sec is None:
                if sv.get("optional"):
                    continue
                raise ValueError('MountVolume.SetUp failed for volume "%s" : secret "%s" not '
                                 'found' % (vol["name"], sv["secretName"]))
            data = secret_data(sec)
            items = sv.get("items") or [{"key": k, "path": k} for k in sorted(data)]
            os.makedirs(d, exist_ok=True)
            for it in items:
                if it["key"] not in data:
                    raise ValueError('MountVolume.SetUp failed for volume "%s" : configured to '
                                     'use key name "%s" but the key is not present in the '
                                     'secret' % (vol["name"], it["key"]))
                path = os.path.join(d, it["path"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(data[it["key"]])
                os.chmod(path, it.get("mode", sv.get("defaultMode", 0o644)))
            open(d + ".ready", "w").close()

    def volume_dir(self, pod: Obj, vol: Obj) -> str:
        """The host directory behind a volume: emptyDir per pod, a PVC's directory."""
        if vol.get("persistentVolumeClaim"):
            pvc = self.store.get("persistentvolumeclaims", self.ns,
                                 vol["persistentVolumeClaim"]["claimName"])
            assert pvc is not None
            return self.fake.pvc_dir(pvc)
        d = os.path.join(self.fake.data_dir, "pods", self.uid, "volumes", vol["name"])
        os.makedirs(d, exist_ok=True)
        return d

    def exit_code(self, ctr: Obj, key: str) -> Optional[int]:
        """None while the container runs; its exit code once it has ended (status updated)."""
        rec = self.rt["containers"].get(ctr["name"])
        if rec is None:
            return None
        if "exit" in rec:
            return rec["exit"]["exitCode"]
        res: Optional[Obj] = None
        try:
            with open(os.path.join(rec["dir"], "exit.json")) as f:
                res = json.load(f)
        except (OSError, ValueError):
            p = self.kl.popens.get(rec["shim"])
            alive = p.poll() is None if p else proc_start(rec["shim"]) == rec["shimStart"]
            if alive:
                return None
            if os.path.exists(os.path.join(rec["dir"], "exit.json")):
                return self.exit_code(ctr, key)
            res = {"exitCode": 137, "finishedAt": now(), "unknown": True}
        rec["exit"] = res
        self.persist()
        if res.get("startError"):
            term = {"exitCode": 128, "reason": "StartError", "message": res["startError"],
                    "startedAt": "1970-01-01T00:00:00Z", "finishedAt": res["finishedAt"],
                    "containerID": rec["containerID"]}
            self.kl.event(self.pod(), "Failed", "Error: " + res["startError"], "Warning",
                          field_path="spec.%s{%s}" % (key_field(key), ctr["name"]))
        else:
            reason = "Completed" if res["exitCode"] == 0 else "Error"
            if rec.get("oom"):
                reason = "OOMKilled"
            if res.get("unknown"):
                reason = "ContainerStatusUnknown"
            term = {"exitCode": res["exitCode"], "reason": reason,
                    "startedAt": rec["startedAt"], "finishedAt": res["finishedAt"],
                    "containerID": rec["containerID"]}
            if res.get("unknown"):
                term["message"] = ("The container could not be located when the pod was "
                                   "terminated")
            if res.get("signal"):
                term["signal"] = res["signal"]

        def st(s: Obj) -> None:
            for c in s.get(key) or []:
                if c["name"] == ctr["name"]:
                    c.update(state={"terminated": term}, ready=False, started=False)
        self.status(st)
        return res["exitCode"]

    def await_exit(self, ctr: Obj, key: str) -> int:
        while True:
            code = self.exit_code(ctr, key)
            if code is not None:
                return code
            self.wait(0.2)

    # ---- stopping
    def signal_containers(self, sig: int, only: Optional[str] = None) -> None:
        for name, rec in self.rt.get("containers", {}).items():
            if (only and name != only) or "exit" in rec:
                continue
            try:
                with open(os.path.join(rec["dir"], "pid.json")) as f:
                    os.kill(json.load(f)["pid"], sig)
            except (OSError, ValueError, KeyError):
                pass

    def shims(self) -> set[int]:
        return {rec["shim"] for rec in self.rt.get("containers", {}).values()
                if proc_start(rec["shim"]) == rec.get("shimStart")}

    def kill_all(self, grace: float) -> None:
        """SIGTERM to each container's process, SIGKILL to everything in the pod's network
        namespace after `grace` seconds (the shims last, so they record the exits)."""
        ns = self.rt.get("netns")
        self.signal_containers(signal.SIGTERM)
        end = time.time() + grace
        while time.time() < end:
            if not ns or not set(netns_pids(ns)) - self.shims():
                break
            time.sleep(0.1)
        if ns:
            for _ in range(50):
                others = set(netns_pids(ns)) - self.shims()
                if not others:
                    break
                for pid in others:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.1)
            end = time.time() + 5
            while self.shims() and time.time() < end:
                for p in list(self.kl.popens.values()):
                    p.poll()
                time.sleep(0.05)
            for pid in netns_pids(ns):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        for p in list(self.kl.popens.values()):
            p.poll()

    def teardown_sandbox(self) -> None:
        """Kill what is left, remove the network namespace and the containers' roots."""
        self.kill_all(0)
        rt = self.rt
        self.fake.net.teardown(rt.get("netns"), rt.get("veth"), None)
        rt["netns"] = rt["veth"] = None
        self.persist()

    def kill_and_remove(self) -> None:
        """Graceful deletion: Killing events, SIGTERM, SIGKILL after the grace period, the
        containers' terminated states, then the object goes (DELETED)."""
        pod = self.pod()
        while self.fake.config["nodeLost"] and not self.fake.stopping:
            with self.store.cond:
                self.store.cond.wait(0.5)
            pod = self.pod()
        grace = pod["metadata"].get("deletionGracePeriodSeconds", 30)
        for name, rec in self.rt.get("containers", {}).items():
            if "exit" not in rec:
                self.kl.event(pod, "Killing", "Stopping container " + name,
                              field_path="spec.containers{%s}" % name)
        self.kill_all(grace)
        for key in ("initContainerStatuses", "containerStatuses"):
            for ctr in pod["spec"].get(key_field(key)) or []:
                try:
                    self.exit_code(ctr, key)
                except PodGone:
                    break
        self.cleanup()
        cur = self.store.get("pods", self.ns, self.name)
        if cur and cur["metadata"]["uid"] == self.uid and not cur["metadata"].get("finalizers"):
            self.store.remove("pods", cur)

    def cleanup(self) -> None:
        """Everything the pod had on this node: processes, network, directories, record."""
        rt = self.store.runtime.get(self.uid)
        if rt is None:
            return
        self.kill_all(0)
        self.fake.net.teardown(rt.get("netns"), rt.get("veth"), rt.get("ip"))
        shutil.rmtree(os.path.join(self.fake.data_dir, "pods", self.uid), ignore_errors=True)
        with self.store.lock:
            self.store.runtime.pop(self.uid, None)
            self.store.persist()
            self.store.cond.notify_all()


def probe_once(probe: Obj, ctr: Obj, ip: str, rec: Obj, timeout: float) -> Optional[str]:
    """One probe: None when it succeeds, else the kubelet's failure text."""
    def port_of(p: Any) -> int:
        if isinstance(p, int):
            return p
        for cp in ctr.get("ports") or []:
            if cp.get("name") == p:
                return int(cp["containerPort"])
        return int(p)
    if probe.get("tcpSocket"):
        port = port_of(probe["tcpSocket"]["port"])
        try:
            socket.create_connection((ip, port), timeout=timeout).close()
            return None
        except OSError as e:
            return "dial tcp %s:%d: connect: %s" % (ip, port, (e.strerror or str(e)).lower())
    if probe.get("httpGet"):
        g = probe["httpGet"]
        port = port_of(g["port"])
        import http.client
        cls = http.client.HTTPSConnection if g.get("scheme") == "HTTPS" else \
            http.client.HTTPConnection
        kw: Obj = {"context": ssl._create_unverified_context()} if g.get("scheme") == \
            "HTTPS" else {}
        try:
            conn = cls(ip, port, timeout=timeout, **kw)
            conn.request("GET", g.get("path") or "/", headers={
                h["name"]: h["value"] for h in g.get("httpHeaders") or []})
            code = conn.getresponse().status
            conn.close()
        except OSError as e:
            return 'Get "http://%s:%d%s": dial tcp %s:%d: connect: %s' % (
                ip, port, g.get("path") or "/", ip, port, (e.strerror or str(e)).lower())
        return None if 200 <= code < 400 else "HTTP probe failed with statuscode: %d" % code
    if probe.get("exec"):
        try:
            with open(os.path.join(rec["dir"], "pid.json")) as f:
                pid = json.load(f)["pid"]
            p = subprocess.run(["nsenter", "-t", str(pid), "-m", "-n", "-r", "-w", "--"] +
                               probe["exec"].get("command", []), capture_output=True,
                               timeout=max(timeout, 1))
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            return str(e)
        return None if p.returncode == 0 else (p.stdout + p.stderr).decode(errors="replace")
    return None


def key_field(key: str) -> str:
    return "initContainers" if key == "initContainerStatuses" else "containers"


def secret_data(sec: Obj) -> dict[str, str]:
    out = {k: base64.b64decode(v).decode("utf-8", "replace")
           for k, v in (sec.get("data") or {}).items()}
    out.update(sec.get("stringData") or {})
    return out


def set_condition_s(status: Obj, typ: str, value: str, reason: Optional[str] = None,
                    message: Optional[str] = None) -> None:
    """Set one pod condition, keeping lastTransitionTime when the status does not change."""
    conds = status.setdefault("conditions", []) or []
    status["conditions"] = conds
    for c in conds:
        if c["type"] == typ:
            if c["status"] != value:
                c["lastTransitionTime"] = now()
            c["status"] = value
            for k, v in (("reason", reason), ("message", message)):
                if v is None:
                    c.pop(k, None)
                else:
                    c[k] = v
            return
    c = {"type": typ, "status": value, "lastProbeTime": None, "lastTransitionTime": now()}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    conds.append(c)


def set_condition(pod: Obj, typ: str, value: str, reason: Optional[str] = None,
                  message: Optional[str] = None) -> None:
    set_condition_s(pod.setdefault("status", {}), typ, value, reason, message)


def recompute(pod: Obj) -> None:
    """The kubelet's conditions from the containers' states (generatePodStatus)."""
    s = pod.setdefault("status", {})
    if not pod.get("spec", {}).get("nodeName") or s.get("phase") == "Unknown":
        return
    if s.get("reason") == "Evicted":
        return
    inits = s.get("initContainerStatuses") or []
    pending_inits = [c["name"] for c in inits
                     if (c["state"].get("terminated") or {}).get("exitCode") != 0]
    if inits and pending_inits:
        set_condition(pod, "Initialized", "False", "ContainersNotInitialized",
                      "containers with incomplete status: [%s]" % " ".join(pending_inits))
    else:
        set_condition(pod, "Initialized", "True")
    ctrs = s.get("containerStatuses") or []
    unready = [c["name"] for c in ctrs if not c.get("ready")]
    phase = s.get("phase")
    if ctrs and all("running" in c["state"] or "terminated" in c["state"] for c in ctrs) \
            and any("running" in c["state"] for c in ctrs) and phase in ("Pending", None):
        s["phase"] = "Running"
    if ctrs and unready:
        done = phase in ("Succeeded", "Failed")
        for t in ("ContainersReady", "Ready"):
            set_condition(pod, t, "False", "PodCompleted" if done else "ContainersNotReady",
                          None if done else "containers with unready status: [%s]"
                          % " ".join(unready))
    elif ctrs:
        set_condition(pod, "ContainersReady", "True")
        set_condition(pod, "Ready", "True")
    order = ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
    s["conditions"].sort(key=lambda c: order.index(c["type"]) if c["type"] in order else 9)


# ------------------------------------------------------------------------- the API server

class Fake:
    """Everything one fake API server holds: store, network, kubelet, config, injections."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stopping = False
        self.data_dir = os.path.abspath(args.data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        self.store = Store(args.state, args.watch_history)
        cfg = self.store.extra.setdefault("config", {})
        cfg.setdefault("autoRun", True)
        cfg.setdefault("pullPolicy", args.pull_policy)
        cfg.setdefault("pvcPhase", "Bound")
        cfg.setdefault("nodeLost", False)
        cfg.setdefault("images", {})
        for spec in args.image or []:
            name, _, d = spec.partition("=")
            cfg["images"][name] = os.path.abspath(d)
        self.config: Obj = cfg
        self.namespaces = ["default", "kube-system", "kube-public", "kube-node-lease"] + \
            [n for n in args.namespace or [] if n not in ("default",)]
        self.injections: list[Obj] = []
        self.requests: collections.deque[Obj] = collections.deque(maxlen=2000)
        self.ilock = threading.Lock()
        self.net = Network(self.store, args.pod_cidr,
                           args.name_prefix or "kf%x" % os.getpid())
        self.kubelet = Kubelet(self)
        self.start_time = now()

    def images(self) -> dict[str, str]:
        return self.config["images"]

    def node_labels(self) -> dict[str, str]:
        labels = {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "fake"}
        for kv in self.args.node_label or []:
            k, _, v = kv.partition("=")
            labels[k] = v
        return labels

    def pvc_dir(self, pvc: Obj) -> str:
        d = os.path.join(self.data_dir, "pvcs", pvc["metadata"]["uid"])
        os.makedirs(d, exist_ok=True)
        return d

    def pvc_controller(self) -> None:
        """kubernetes.io/pvc-protection: a deleted PVC goes when no pod uses it any more (its
        volume is deleted with it: reclaimPolicy Delete)."""
        for pvc in self.store.list("persistentvolumeclaims", None):
            meta = pvc["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            used = any(any((v.get("persistentVolumeClaim") or {}).get("claimName") ==
                           meta["name"] for v in p["spec"].get("volumes") or [])
                       and p["metadata"]["uid"] in self.store.runtime
                       for p in self.store.list("pods", meta["namespace"]))
            if used:
                continue
            fins = [f for f in meta.get("finalizers") or [] if f != "kubernetes.io/pvc-protection"]
            if fins == (meta.get("finalizers") or []) and fins:
                continue
            if fins:
                self.store.update("persistentvolumeclaims", meta["namespace"], meta["name"],
                                  lambda o: o["metadata"].__setitem__("finalizers", fins))
                continue
            self.store.remove("persistentvolumeclaims", pvc)
            shutil.rmtree(os.path.join(self.data_dir, "pvcs", meta["uid"]), ignore_errors=True)

    # ---- objects
    def defaults(self, res: str, obj: Obj, ns: str) -> Obj:
        """Server-set metadata and the defaults the real API server applies."""
        meta = obj.setdefault("metadata", {})
        kind = RESOURCES[res][0]
        obj["kind"], obj["apiVersion"] = kind, "v1"
        meta["namespace"] = ns
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "selfLink"):
            meta.pop(k, None)
        meta.setdefault("generation", 1) if res == "pods" else None
        if res == "pods":
            self.default_pod(obj)
        elif res == "persistentvolumeclaims":
            spec = obj.setdefault("spec", {})
            spec.setdefault("volumeMode", "Filesystem")
            spec.setdefault("storageClassName", "standard")
            meta.setdefault("finalizers", []).append("kubernetes.io/pvc-protection")
            obj["status"] = {"phase": "Pending"}
        elif res == "secrets":
            obj.setdefault("type", "Opaque")
            if obj.get("stringData"):
                data = obj.setdefault("data", {}) or {}
                for k, v in obj.pop("stringData").items():
                    data[k] = base64.b64encode(v.encode()).decode()
                obj["data"] = data
        elif res == "events":
            obj.setdefault("count", 1)
        return obj

    def default_pod(self, pod: Obj) -> None:
        spec = pod["spec"]
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("securityContext", {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        spec["serviceAccount"] = spec["serviceAccountName"]
        tol = spec.setdefault("tolerations", []) or []
        spec["tolerations"] = tol
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(t.get("key") == key for t in tol):
                tol.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                            "tolerationSeconds": 300})
        for group in ("initContainers", "containers"):
            for c in spec.get(group) or []:
                c.setdefault("terminationMessagePath", "/dev/termination-log")
                c.setdefault("terminationMessagePolicy", "File")
                tag = c["image"].rsplit("/", 1)[-1]
                c.setdefault("imagePullPolicy", "Always" if ":" not in tag or
                             tag.endswith(":latest") else "IfNotPresent")
                c.setdefault("resources", {})
                for p in c.get("ports") or []:
                    p.setdefault("protocol", "TCP")
                res = c["resources"]
                if res.get("limits"):  # requests default to limits
                    req = res.setdefault("requests", {}) or {}
                    res["requests"] = req
                    for k, v in res["limits"].items():
                        req.setdefault(k, v)
                for k in ("limits", "requests"):  # quantities serialize as strings
                    if res.get(k):
                        res[k] = {n: str(v) for n, v in res[k].items()}
        ctrs = spec["containers"]
        qos = "BestEffort"
        if any((c.get("resources") or {}).get("requests") or
               (c.get("resources") or {}).get("limits") for c in ctrs):
            qos = "Burstable"
            if all(set((c.get("resources") or {}).get("limits") or {}) >= {"cpu", "memory"} and
                   ((c.get("resources") or {}).get("requests") or {}) ==
                   ((c.get("resources") or {}).get("limits") or {}) for c in ctrs):
                qos = "Guaranteed"
        pod["status"] = {"phase": "Pending", "qosClass": qos}

    def admit(self, res: str, obj: Obj, ns: str, fv: str = "Strict",
              warnings: Optional[list[str]] = None) -> None:
        """Schema, semantic validation, then admission (namespace, service account,
        RuntimeClass) for a create."""
        kind, model, _ = RESOURCES[res]
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else ""
        (warnings if warnings is not None else []).extend(
            check_schema(obj, model, kind, name or "", fv))
        if obj.get("apiVersion") not in (None, "", "v1"):
            raise ApiError(400, "BadRequest", "the API version in the data (%s) does not match "
                           "the expected API version (v1)" % obj["apiVersion"])
        if obj.get("kind") not in (None, "", kind):
            raise ApiError(400, "BadRequest", "the object provided is unrecognized (must be of "
                           "type %s): %s" % (kind, obj["kind"]))
        body_ns = (obj.get("metadata") or {}).get("namespace")
        if body_ns and body_ns != ns:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not "
                           "match the namespace sent on the request")
        if res == "pods":
            validate_pod(obj, lambda n: True)
        elif res == "persistentvolumeclaims":
            validate_pvc(obj)
        elif res == "secrets":
            validate_secret(obj)
        if ns not in self.namespaces:
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % ns,
                           {"name": ns, "kind": "namespaces"})
        if res == "pods":
            spec = obj["spec"]
            pname = obj["metadata"].get("name") or obj["metadata"].get("generateName", "")
            sa = spec.get("serviceAccountName") or spec.get("serviceAccount")
            if sa and sa != "default" and sa not in (self.args.service_account or []):
                raise ApiError(403, "Forbidden", 'pods "%s" is forbidden: error looking up '
                               'service account %s/%s: serviceaccount "%s" not found'
                               % (pname, ns, sa, sa), {"name": pname, "kind": "pods"})
            rc = spec.get("runtimeClassName")
            if rc and rc not in (self.args.runtime_class or []):
                raise ApiError(403, "Forbidden", 'pods "%s" is forbidden: pod rejected: '
                               'RuntimeClass "%s" not found' % (pname, rc),
                               {"name": pname, "kind": "pods"})

    def create(self, res: str, ns: str, obj: Obj, fv: str = "Strict",
               warnings: Optional[list[str]] = None) -> Obj:
        self.admit(res, obj, ns, fv, warnings)
        obj = self.defaults(res, copy.deepcopy(obj), ns)
        with self.store.lock:
            name = obj["metadata"]["name"]
            if self.store.get(res, ns, name) is not None:
                raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (res, name),
                               {"name": name, "kind": res})
            if res == "persistentvolumeclaims" and self.config["pvcPhase"] == "Bound":
                bind_pvc(obj)
            out = self.store.put(res, obj)
        if res == "persistentvolumeclaims" and (out.get("status") or {}).get("phase") == "Bound":
            self.pvc_dir(out)
        if res == "pods":
            self.kubelet.ensure_worker(out)
        return out

    def delete(self, res: str, ns: str, name: str, opts: Obj) -> Obj:
        with self.store.lock:
            cur = self.store.get(res, ns, name)
            if cur is None:
                raise not_found(res, name)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != cur["metadata"]["uid"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": '
                               'Precondition failed: UID in precondition: %s, UID in object '
                               'meta: %s' % (res, name, pre["uid"], cur["metadata"]["uid"]),
                               {"name": name, "kind": res})
            if pre.get("resourceVersion") and pre["resourceVersion"] != \
                    cur["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": '
                               'Precondition failed: ResourceVersion in precondition: %s, '
                               'ResourceVersion in object meta: %s'
                               % (res, name, pre["resourceVersion"],
                                  cur["metadata"]["resourceVersion"]),
                               {"name": name, "kind": res})
            grace = opts.get("gracePeriodSeconds")
            if res == "pods":
                if grace is None:
                    grace = cur["spec"].get("terminationGracePeriodSeconds", 30)
                if not cur["spec"].get("nodeName") or \
                        (cur.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    grace = 0
            else:
                grace = 0
            meta = cur["metadata"]
            if grace == 0 and not meta.get("finalizers"):
                return self.store.remove(res, cur)
            if meta.get("deletionTimestamp") and \
                    meta.get("deletionGracePeriodSeconds", 0) <= grace:
                return cur

            def mark(o: Obj) -> None:
                o["metadata"]["deletionTimestamp"] = now(grace)
                o["metadata"]["deletionGracePeriodSeconds"] = grace
                if res == "pods":
                    o["metadata"]["generation"] = o["metadata"].get("generation", 1) + 1
            out = self.store.update(res, ns, name, mark)
            assert out is not None
            return out

    def update(self, res: str, ns: str, name: str, new: Obj, fv: str = "Strict",
               warnings: Optional[list[str]] = None) -> Obj:
        """PUT: resourceVersion check, immutable fields, status kept (it is a subresource)."""
        kind, model, _ = RESOURCES[res]
        (warnings if warnings is not None else []).extend(
            check_schema(new, model, kind, name, fv))
        with self.store.lock:
            cur = self.store.get(res, ns, name)
            if cur is None:
                raise not_found(res, name)
            meta = new.get("metadata") or {}
            if meta.get("name") and meta["name"] != name:
                raise ApiError(400, "BadRequest", "the name of the object (%s) does not match "
                               "the name on the URL (%s)" % (meta["name"], name))
            rv = meta.get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the '
                               'object has been modified; please apply your changes to the '
                               'latest version and try again' % (res, name),
                               {"name": name, "kind": res})
            out = copy.deepcopy(cur)
            for k in ("labels", "annotations", "finalizers", "ownerReferences"):
                if meta.get(k) is None:
                    out["metadata"].pop(k, None)
                else:
                    out["metadata"][k] = meta[k]
            if res == "pods":
                validate_pod(dict(new, metadata=out["metadata"], spec=new.get("spec") or {}),
                             lambda n: True)
                want = copy.deepcopy(new.get("spec") or {})
                have = copy.deepcopy(cur["spec"])
                for g in ("containers", "initContainers"):
                    for a, b in zip(want.get(g) or [], have.get(g) or []):
                        b["image"] = a.get("image", b.get("image"))
                for k in ("activeDeadlineSeconds",):
                    if k in want:
                        have[k] = want[k]
                self.default_pod({"spec": want, "metadata": {}})
                want.pop("nodeName", None)
                have_cmp = dict(have)
                have_cmp.pop("nodeName", None)
                if want != have_cmp:
                    raise ApiError(422, "Invalid", 'Pod "%s" is invalid: spec: Forbidden: pod '
                                   'updates may not change fields other than '
                                   '`spec.containers[*].image`,`spec.initContainers[*].image`,'
                                   '`spec.activeDeadlineSeconds`,`spec.tolerations` (only '
                                   'additions to existing tolerations),'
                                   '`spec.terminationGracePeriodSeconds` (allow it to be set '
                                   'to 1 if it was previously negative)' % name,
                                   {"name": name, "kind": "Pod", "causes": [{
                                       "reason": "FieldValueForbidden", "field": "spec",
                                       "message": "Forbidden: pod updates may not change "
                                       "fields other than ..."}]})
                out["spec"] = have
            elif res == "persistentvolumeclaims":
                if (new.get("spec") or {}).get("resources") is not None:
                    out["spec"]["resources"] = new["spec"]["resources"]
            else:
                for k in ("data", "type", "involvedObject", "reason", "message", "count",
                          "lastTimestamp"):
                    if k in new:
                        out[k] = new[k]
            if res == "secrets" and new.get("stringData"):
                for k, v in new["stringData"].items():
                    out.setdefault("data", {})[k] = base64.b64encode(v.encode()).decode()
            if out == cur:
                return cur
            updated = self.store.put(res, out)
            # the last finalizer removed from a deleted object: it goes (a pod once the
            # kubelet has let go of it)
            if cur["metadata"].get("finalizers") and not out["metadata"].get("finalizers") \
                    and out["metadata"].get("deletionTimestamp") and \
                    (res != "pods" or out["metadata"]["uid"] not in self.store.runtime):
                return self.store.remove(res, updated)
            return updated


def bind_pvc(pvc: Obj) -> None:
    """What the PV controller and a dynamic provisioner do: a PV per claim, Bound."""
    spec = pvc["spec"]
    spec["volumeName"] = "pvc-" + pvc["metadata"]["uid"]
    ann = pvc["metadata"].setdefault("annotations", {}) or {}
    pvc["metadata"]["annotations"] = ann
    ann.update({"pv.kubernetes.io/bind-completed": "yes",
                "pv.kubernetes.io/bound-by-controller": "yes",
                "volume.kubernetes.io/storage-provisioner": "fake.sbx.dev/hostpath"})
    pvc["status"] = {"phase": "Bound", "accessModes": spec.get("accessModes"),
                     "capacity": {"storage": str(spec["resources"]["requests"]["storage"])}}


def not_found(res: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", '%s "%s" not found' % (res, name),
                    {"name": name, "kind": res})


# ------------------------------------------------------------------------- HTTP

FAKE: Fake  # set in main()


class Server(ThreadingHTTPServer):
    """Threads per connection; TLS handshakes happen in the connection's thread."""
    daemon_threads = True
    allow_reuse_address = True
    ssl_ctx: Optional[ssl.SSLContext] = None

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        if self.ssl_ctx:
            sock = self.ssl_ctx.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ssl.SSLError, ConnectionError, socket.timeout, OSError)):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """The API: routes, auth, injections, Status errors."""
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(30)
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()

    def log_message(self, fmt: str, *args: Any) -> None:
        if FAKE.args.verbose:
            log(fmt % args)

    # ---- plumbing
    def send_json(self, code: int, obj: Any, headers: Optional[dict[str, str]] = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_error_status(self, e: ApiError) -> None:
        self.send_json(e.code, e.status(), e.headers)

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(n)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def json_body(self, raw: bytes) -> Any:
        def no_dups(pairs: list[tuple[str, Any]]) -> Obj:
            seen: Obj = {}
            for k, v in pairs:
                if k in seen:
                    raise ApiError(400, "BadRequest",
                                   'strict decoding error: duplicate field "%s"' % k)
                seen[k] = v
            return seen
        try:
            return json.loads(raw or b"{}", object_pairs_hook=no_dups)
        except ValueError as e:
            raise ApiError(400, "BadRequest", "couldn't get version/kind; json parse error: %s"
                           % e)

    def authenticated(self) -> bool:
        auth = self.headers.get("Authorization", "")
        if FAKE.args.token and auth == "Bearer " + FAKE.args.token:
            return True
        if auth:
            return False  # a wrong token is not rescued by a certificate
        if isinstance(self.request, ssl.SSLSocket):
            try:
                return bool(self.request.getpeercert())
            except ValueError:
                return False
        return False

    def do_GET(self) -> None:
        self.dispatch("GET")

    def do_POST(self) -> None:
        self.dispatch("POST")

    def do_PUT(self) -> None:
        self.dispatch("PUT")

    def do_PATCH(self) -> None:
        self.dispatch("PATCH")

    def do_DELETE(self) -> None:
        self.dispatch("DELETE")

    def dispatch(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        raw = b"" if self.headers.get("Upgrade") else self.read_body()
        try:
            if not self.authenticated():
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if path.startswith("/fake/"):
                return self.control(method, path, raw)
            FAKE.requests.append({"method": method, "path": path, "query": url.query,
                                  "contentType": self.headers.get("Content-Type"),
                                  "body": raw.decode("utf-8", "replace")[:65536],
                                  "time": time.time()})
            self.inject(method, self.path)
            self.route(method, path, query, raw)
        except ApiError as e:
            self.send_error_status(e)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as e:  # a bug in the fake: a real 500, and a trace on stderr
            import traceback
            log(traceback.format_exc())
            self.send_error_status(ApiError(500, "InternalError",
                                            "Internal error occurred: %s" % e))

    def inject(self, method: str, full_path: str) -> None:
        """Serve a queued injected failure if one matches."""
        with FAKE.ilock:
            for rule in FAKE.injections:
                if rule["count"] == 0:
                    continue
                if rule.get("method") and rule["method"].upper() != method:
                    continue
                if not re.search(rule.get("path") or "", full_path):
                    continue
                if rule["count"] > 0:
                    rule["count"] -= 1
                rule["served"] = rule.get("served", 0) + 1
                code = int(rule["status"])
                reason, msg = {
                    409: ("Conflict", "Operation cannot be fulfilled: the object has been "
                          "modified; please apply your changes to the latest version and try "
                          "again"),
                    410: ("Gone", "The resourceVersion for the provided list is too old."),
                    429: ("TooManyRequests", "Too many requests, please try again later."),
                    500: ("InternalError", "Internal error occurred: injected by the fake"),
                    503: ("ServiceUnavailable", "The server is currently unable to handle the "
                          "request"),
                    504: ("Timeout", "Timeout: request did not complete within the allotted "
                          "timeout"),
                    403: ("Forbidden", "forbidden: injected by the fake"),
                    401: ("Unauthorized", "Unauthorized"),
                }.get(code, ("InternalError", "injected failure"))
                details: Optional[Obj] = None
                headers: dict[str, str] = {}
                if rule.get("retryAfter") is not None:
                    details = {"retryAfterSeconds": int(rule["retryAfter"])}
                    headers["Retry-After"] = str(int(rule["retryAfter"]))
                elif code == 429:
                    details = {"retryAfterSeconds": 1}
                    headers["Retry-After"] = "1"
                raise ApiError(code, rule.get("reason") or reason, rule.get("message") or msg,
                               details, headers)

    # ---- routes
    def route(self, method: str, path: str, q: dict[str, list[str]], raw: bytes) -> None:
        one = lambda k, d=None: (q.get(k) or [d])[0]  # noqa: E731
        if method == "GET" and path in ("/healthz", "/livez", "/readyz"):
            body = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(body)
            return
        if method == "GET" and path == "/version":
            return self.send_json(200, {"major": "1", "minor": K8S_MINOR, "gitVersion": GIT_VERSION,
                                        "gitCommit": "0" * 40, "gitTreeState": "clean",
                                        "buildDate": "2026-01-01T00:00:00Z",
                                        "goVersion": "go1.21.5", "compiler": "gc",
                                        "platform": "linux/amd64"})
        if method == "GET" and path == "/api":
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": [{
                                            "clientCIDR": "0.0.0.0/0",
                                            "serverAddress": "%s:%d" % self.server.server_address[:2]}]})
        if method == "GET" and path == "/apis":
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                        "groups": []})
        if method == "GET" and path == "/api/v1":
            return self.send_json(200, api_resources())
        if path == "/api/v1/namespaces" and method == "GET":
            return self.send_json(200, {"kind": "NamespaceList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": str(FAKE.store.rv)},
                                        "items": [namespace(n) for n in FAKE.namespaces]})
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)", path)
        if m and method == "GET":
            if m.group(1) not in FAKE.namespaces:
                raise ApiError(404, "NotFound", 'namespaces "%s" not found' % m.group(1),
                               {"name": m.group(1), "kind": "namespaces"})
            return self.send_json(200, dict(namespace(m.group(1)), kind="Namespace",
                                            apiVersion="v1"))
        if path == "/api/v1/nodes" and method == "GET":
            return self.send_json(200, {"kind": "NodeList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": str(FAKE.store.rv)},
                                        "items": [node()]})
        if path == "/api/v1/nodes/" + NODE and method == "GET":
            return self.send_json(200, dict(node(), kind="Node", apiVersion="v1"))
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/(log|portforward|status)",
                         path)
        if m:
            ns, name, sub = m.groups()
            if sub == "log" and method == "GET":
                return self.pod_log(ns, name, q)
            if sub == "portforward" and method in ("GET", "POST"):
                return self.portforward(ns, name, q)
            if sub == "status" and method == "GET":
                pod = FAKE.store.get("pods", ns, name)
                if pod is None:
                    raise not_found("pods", name)
                return self.send_json(200, pod)
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                           "the requested resource")
        m = re.fullmatch(r"/api/v1(?:/namespaces/([^/]+))?/([a-z]+)(?:/([^/]+))?", path)
        if not m or m.group(2) not in RESOURCES or (m.group(3) and not m.group(1)):
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           {})
        ns, res, name = m.groups()
        kind = RESOURCES[res][0]
        fv = one("fieldValidation") or FAKE.args.field_validation
        warns: list[str] = []
        if name is None:
            if method == "GET":
                if one("watch") in ("1", "true", "True"):
                    return self.watch(res, ns, q)
                return self.send_json(200, self.list_objects(res, ns, q))
            if method == "POST" and ns:
                body = self.json_body(raw)
                out = FAKE.create(res, ns, body, fv, warns)
                return self.send_json(201, out, warn_headers(warns))
            if method == "DELETE" and ns:
                lst = self.list_objects(res, ns, q)
                opts = self.json_body(raw) if raw else {}
                items = []
                for o in lst["items"]:
                    try:
                        items.append(FAKE.delete(res, ns, o["metadata"]["name"], opts))
                    except ApiError:
                        pass
                return self.send_json(200, {"kind": kind + "List", "apiVersion": "v1",
                                            "metadata": {"resourceVersion": str(FAKE.store.rv)},
                                            "items": items})
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                           "the requested resource")
        assert ns is not None
        if method == "GET":
            obj = FAKE.store.get(res, ns, name)
            if obj is None:
                raise not_found(res, name)
            return self.send_json(200, obj)
        if method == "DELETE":
            opts = self.json_body(raw) if raw else {}
            if opts:
                check_schema(opts, "V1DeleteOptions", "DeleteOptions", "")
            if one("gracePeriodSeconds") is not None:
                opts["gracePeriodSeconds"] = int(one("gracePeriodSeconds"))
            return self.send_json(200, FAKE.delete(res, ns, name, opts))
        if method == "PUT":
            out = FAKE.update(res, ns, name, self.json_body(raw), fv, warns)
            return self.send_json(200, out, warn_headers(warns))
        if method == "PATCH":
            cur = FAKE.store.get(res, ns, name)
            if cur is None:
                raise not_found(res, name)
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            patch = self.json_body(raw)
            if ctype == "application/json-patch+json":
                new = json_patch(copy.deepcopy(cur), patch)
            elif ctype in ("application/merge-patch+json",
                           "application/strategic-merge-patch+json"):
                new = merge(copy.deepcopy(cur), patch)
            else:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an "
                               "unknown format - accepted media types include: "
                               "application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml")
            if (patch.get("metadata") or {}).get("resourceVersion") is None and \
                    isinstance(patch, dict):
                new["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
            out = FAKE.update(res, ns, name, new, fv, warns)
            return self.send_json(200, out, warn_headers(warns))
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the "
                       "requested resource")

    def selectors(self, res: str, q: dict[str, list[str]]) -> tuple[Selector, Selector]:
        return (Selector((q.get("labelSelector") or [""])[0]),
                Selector((q.get("fieldSelector") or [""])[0], FIELDS.get(res, set())))

    def list_objects(self, res: str, ns: Optional[str], q: dict[str, list[str]]) -> Obj:
        """A list with selectors and limit/continue (items without kind/apiVersion, as the
        real server serializes them)."""
        lsel, fsel = self.selectors(res, q)
        with FAKE.store.lock:
            rv = FAKE.store.rv
            items = [o for o in FAKE.store.list(res, ns)
                     if lsel.matches(o["metadata"].get("labels") or {})
                     and fsel.matches(field_values(o))]
        cont = (q.get("continue") or [""])[0]
        start = 0
        if cont:
            try:
                tok = json.loads(base64.urlsafe_b64decode(cont + "=="))
                start = int(tok["start"])
            except (ValueError, KeyError):
                raise ApiError(400, "BadRequest", "continue key is not valid: illegal base64 "
                               "data at input byte 0")
        limit = int((q.get("limit") or ["0"])[0] or 0)
        meta: Obj = {"resourceVersion": str(rv)}
        page = items[start:]
        if limit and len(page) > limit:
            page = page[:limit]
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"v": "meta.k8s.io/v1", "rv": rv, "start": start + limit}).encode())\
                .decode().rstrip("=")
            meta["remainingItemCount"] = len(items) - start - limit
        for o in page:
            o.pop("kind", None)
            o.pop("apiVersion", None)
        return {"kind": RESOURCES[res][0] + "List", "apiVersion": "v1", "metadata": meta,
                "items": page}

    # ---- watch
    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, res: str, ns: Optional[str], q: dict[str, list[str]]) -> None:
        """A watch stream: chunked JSON lines; 410 Expired as an ERROR event for a
        resourceVersion older than the kept history."""
        lsel, fsel = self.selectors(res, q)
        rv_arg = (q.get("resourceVersion") or [""])[0]
        bookmarks = (q.get("allowWatchBookmarks") or [""])[0] in ("1", "true", "True")
        timeout = float((q.get("timeoutSeconds") or ["0"])[0] or 0) or \
            FAKE.args.watch_timeout * (1 + 0.0)
        store = FAKE.store

        def match(o: Optional[Obj]) -> bool:
            return o is not None and (ns is None or o["metadata"].get("namespace") == ns) and \
                lsel.matches(o["metadata"].get("labels") or {}) and \
                fsel.matches(field_values(o))
        initial: list[Obj] = []
        with store.lock:
            if rv_arg in ("", "0"):
                last = store.rv
                initial = [o for o in store.list(res, ns) if match(o)]
            else:
                try:
                    last = int(rv_arg)
                except ValueError:
                    raise ApiError(400, "BadRequest", 'invalid resource version: strconv.'
                                   'ParseUint: parsing "%s": invalid syntax' % rv_arg)
                if last > store.rv:
                    raise ApiError(504, "Timeout", "Too large resource version: %d, current: %d"
                                   % (last, store.rv), {"causes": [{
                                       "reason": "ResourceVersionTooLarge",
                                       "message": "Too large resource version"}],
                                       "retryAfterSeconds": 1})
            gen = store.watch_generation
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()

        def send(typ: str, obj: Obj) -> None:
            self.chunk(json.dumps({"type": typ, "object": obj}).encode() + b"\n")
        try:
            for o in initial:
                send("ADDED", o)
            deadline = time.time() + timeout
            next_bookmark = time.time() + FAKE.args.bookmark_interval
            while True:
                with store.cond:
                    events: list[tuple[int, str, Obj, Optional[Obj]]] = []
                    while True:
                        if store.watch_generation != gen or FAKE.stopping:
                            events = []
                            break
                        if last < store.history_start[res]:
                            break
                        events = [e for e in store.history[res] if e[0] > last]
                        if events or time.time() >= min(deadline, next_bookmark):
                            break
                        store.cond.wait(min(deadline, next_bookmark) - time.time())
                    gone = last < store.history_start[res]
                    oldest = store.history_start[res]
                    closed = store.watch_generation != gen or FAKE.stopping
                    cur_rv = store.rv
                if gone:
                    send("ERROR", ApiError(410, "Expired", "too old resource version: %d (%d)"
                                           % (last, oldest)).status())
                    break
                if closed:
                    break
                for rv, typ, obj, prev in events:
                    last = rv
                    now_m, was_m = match(obj), match(prev)
                    if typ == "DELETED":
                        if was_m:
                            send("DELETED", obj)
                    elif now_m and (was_m or typ == "ADDED"):
                        send(typ, obj)
                    elif now_m:
                        send("ADDED", obj)
                    elif was_m:
                        send("DELETED", obj)
                if time.time() >= deadline:
                    break
                if bookmarks and time.time() >= next_bookmark:
                    send("BOOKMARK", {"kind": RESOURCES[res][0], "apiVersion": "v1",
                                      "metadata": {"resourceVersion": str(max(last, cur_rv)),
                                                   "annotations": {
                                                       "k8s.io/initial-events-end": "true"}}})
                    last = max(last, cur_rv) if not events else last
                if time.time() >= next_bookmark:
                    next_bookmark = time.time() + FAKE.args.bookmark_interval
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True

    # ---- logs
    def pod_log(self, ns: str, name: str, q: dict[str, list[str]]) -> None:
        pod = FAKE.store.get("pods", ns, name)
        if pod is None:
            raise not_found("pods", name)
        spec = pod["spec"]
        names = [c["name"] for c in spec["containers"]]
        inits = [c["name"] for c in spec.get("initContainers") or []]
        cname = (q.get("container") or [""])[0]
        if not cname:
            if len(names) != 1:
                raise ApiError(400, "BadRequest", "a container name must be specified for pod "
                               "%s, choose one of: [%s] or one of the init containers: [%s]"
                               % (name, " ".join(names), " ".join(inits)))
            cname = names[0]
        if cname not in names + inits:
            raise ApiError(400, "BadRequest", "container %s is not valid for pod %s"
                           % (cname, name))
        st = pod.get("status") or {}
        cst = next((c for c in (st.get("containerStatuses") or []) +
                    (st.get("initContainerStatuses") or []) if c["name"] == cname), None)
        rt = FAKE.store.runtime.get(pod["metadata"]["uid"], {})
        rec = (rt.get("containers") or {}).get(cname)
        if rec is None:
            waiting = ((cst or {}).get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason") or "ContainerCreating"
            if reason in ("ErrImagePull", "ImagePullBackOff"):
                reason = "trying and failing to pull image"
            raise ApiError(400, "BadRequest", 'container "%s" in pod "%s" is waiting to start: '
                           '%s' % (cname, name, reason))
        if (q.get("previous") or [""])[0] in ("1", "true"):
            raise ApiError(400, "BadRequest", 'previous terminated container "%s" in pod "%s" '
                           'not found' % (cname, name))
        try:
            with open(rec["log"], "rb") as f:
                data = f.read()
        except OSError:
            data = b""
        tail = (q.get("tailLines") or [""])[0]
        if tail:
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-int(tail):]) if int(tail) > 0 else b""
        limit = (q.get("limitBytes") or [""])[0]
        if limit:
            data = data[:int(limit)]
        follow = (q.get("follow") or [""])[0] in ("1", "true", "True")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if not follow:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if data:
                self.chunk(data)
            pos = os.path.getsize(rec["log"]) if os.path.exists(rec["log"]) else 0
            while not FAKE.stopping:
                with open(rec["log"], "rb") as f:
                    f.seek(pos)
                    more = f.read()
                if more:
                    pos += len(more)
                    self.chunk(more)
                    continue
                cur = FAKE.store.runtime.get(pod["metadata"]["uid"], {})
                r = (cur.get("containers") or {}).get(cname)
                if r is None or "exit" in r:
                    break
                time.sleep(0.2)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    # ---- control
    def control(self, method: str, path: str, raw: bytes) -> None:
        body = json.loads(raw or b"{}")
        store = FAKE.store
        if path == "/fake/inject" and method == "POST":
            rule = dict(body)
            rule.setdefault("count", 1)
            re.compile(rule.get("path") or "")
            with FAKE.ilock:
                FAKE.injections.append(rule)
            return self.send_json(200, rule)
        if path == "/fake/reset-injections" and method == "POST":
            with FAKE.ilock:
                FAKE.injections.clear()
            return self.send_json(200, {})
        if path == "/fake/injections":
            return self.send_json(200, FAKE.injections)
        if path == "/fake/requests":
            if method == "DELETE":
                FAKE.requests.clear()
            return self.send_json(200, list(FAKE.requests))
        if path == "/fake/config" and method in ("GET", "POST"):
            with store.lock:
                for k, v in body.items():
                    if k == "images":
                        FAKE.config["images"].update({n: os.path.abspath(d)
                                                      for n, d in v.items()})
                    elif k in ("autoRun", "pullPolicy", "pvcPhase"):
                        FAKE.config[k] = v
                    else:
                        raise ApiError(400, "BadRequest", "unknown config key %s" % k)
                store.persist()
                store.cond.notify_all()
            return self.send_json(200, FAKE.config)
        if path == "/fake/watches/close" and method == "POST":
            with store.cond:
                store.watch_generation += 1
                store.cond.notify_all()
            return self.send_json(200, {})
        if path == "/fake/node/lost" and method == "POST":
            with store.lock:
                FAKE.config["nodeLost"] = True
                for pod in store.list("pods", None):
                    if not pod["spec"].get("nodeName"):
                        continue

                    def lost(p: Obj) -> None:
                        s = p.setdefault("status", {})
                        s.update(phase="Unknown", reason="NodeLost",
                                 message="Node %s which was running pod %s is unresponsive"
                                 % (NODE, p["metadata"]["name"]))
                        set_condition(p, "Ready", "False", "NodeNotReady")
                    store.update("pods", pod["metadata"]["namespace"],
                                 pod["metadata"]["name"], lost)
                store.persist()
            return self.send_json(200, node())
        if path == "/fake/node/ready" and method == "POST":
            with store.cond:
                FAKE.config["nodeLost"] = False
                store.persist()
                store.cond.notify_all()
            return self.send_json(200, node())
        m = re.fullmatch(r"/fake/pvcs/([^/]+)/([^/]+)/status", path)
        if m and method == "POST":
            def pvc_status(o: Obj) -> None:
                if body.get("phase") == "Bound" and (o.get("status") or {}).get("phase") \
                        != "Bound":
                    bind_pvc(o)
                merge(o.setdefault("status", {}), body)
            out = store.update("persistentvolumeclaims", m.group(1), m.group(2), pvc_status)
            if out is None:
                raise not_found("persistentvolumeclaims", m.group(2))
            return self.send_json(200, out)
        m = re.fullmatch(r"/fake/pods/([^/]+)/([^/]+)/(status|evict|oom|run|runtime)", path)
        if m and method in ("POST", "GET"):
            return self.control_pod(m.group(1), m.group(2), m.group(3), body)
        raise ApiError(404, "NotFound", "no such control endpoint %s %s" % (method, path))

    def control_pod(self, ns: str, name: str, what: str, body: Obj) -> None:
        store = FAKE.store
        pod = store.get("pods", ns, name)
        if pod is None:
            raise not_found("pods", name)
        uid = pod["metadata"]["uid"]
        rt = store.runtime.get(uid, {})
        if what == "runtime":
            return self.send_json(200, rt)
        if what == "status":
            out = store.update("pods", ns, name,
                               lambda p: merge(p.setdefault("status", {}), body))
            return self.send_json(200, out)
        if what == "run":
            with store.cond:
                store.runtime.setdefault(uid, {"containers": {}})["run"] = True
                store.persist()
                store.cond.notify_all()
            return self.send_json(200, pod)
        worker = PodWorker(FAKE.kubelet, ns, name, uid)
        if what == "oom":
            main = pod["spec"]["containers"][0]["name"]
            rec = (rt.get("containers") or {}).get(main)
            if rec is None or "exit" in rec:
                raise ApiError(409, "Conflict", "container %s is not running" % main)
            rec["oom"] = True
            store.persist()
            worker.signal_containers(signal.SIGKILL, only=main)
            return self.send_json(200, store.get("pods", ns, name))
        # evict: the kubelet's eviction manager under memory pressure
        msg = body.get("message") or (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
            "51200Ki. Container %s was using 1048576Ki, request is 0, has larger consumption "
            "of memory. " % pod["spec"]["containers"][0]["name"])
        with store.lock:
            if uid in store.runtime:
                store.runtime[uid]["stage"] = "evicted"
                store.persist()

        def evict(p: Obj) -> None:
            s = p.setdefault("status", {})
            s.update(phase="Failed", reason="Evicted", message=msg)
            for t in ("Ready", "ContainersReady"):
                set_condition(p, t, "False", "PodFailed")
        store.update("pods", ns, name, evict)
        FAKE.kubelet.event(pod, "Evicted", msg, "Warning")
        if rt.get("netns"):
            worker.kill_all(0)
            for c in pod["spec"]["containers"]:
                rec = (rt.get("containers") or {}).get(c["name"])
                if rec is not None and "exit" not in rec:
                    worker.exit_code(c, "containerStatuses")
            worker.teardown_sandbox()
        return self.send_json(200, store.get("pods", ns, name))

    # ---- portforward
    def portforward(self, ns: str, name: str, q: dict[str, list[str]]) -> None:
        pod = FAKE.store.get("pods", ns, name)
        if pod is None:
            raise not_found("pods", name)
        upgrade = (self.headers.get("Upgrade") or "").lower()
        conn = (self.headers.get("Connection") or "").lower()
        if upgrade != "websocket" or "upgrade" not in conn:
            raise ApiError(400, "BadRequest", "Upgrade request required")
        if not pod["spec"].get("nodeName"):
            raise ApiError(400, "BadRequest", "pod %s does not have a host assigned" % name)
        if FAKE.config["nodeLost"]:
            raise ApiError(500, "InternalError", "error dialing backend: dial tcp "
                           "127.0.0.1:10250: i/o timeout")
        ports: list[int] = []
        for v in q.get("ports") or []:
            if not v:
                raise ApiError(400, "BadRequest", 'query parameter "ports" cannot be empty')
            for p in v.split(","):
                if not p.isdigit() or not 0 < int(p) < 65536:
                    raise ApiError(400, "BadRequest", 'unable to parse "%s" as a port: '
                                   'strconv.ParseUint: parsing "%s": invalid syntax' % (v, p))
                ports.append(int(p))
        if not ports:
            raise ApiError(400, "BadRequest", 'query parameter "ports" is required')
        rt = FAKE.store.runtime.get(pod["metadata"]["uid"], {})
        if not rt.get("netns") or (pod.get("status") or {}).get("phase") != "Running":
            raise ApiError(500, "InternalError", "error: unable to upgrade connection: "
                           "sandbox container is not running")
        offered = [p.strip() for p in
                   (self.headers.get("Sec-WebSocket-Protocol") or "").split(",") if p.strip()]
        supported = {"v4.channel.k8s.io": False, "channel.k8s.io": False,
                     "portforward.k8s.io": False, "v4.base64.channel.k8s.io": True,
                     "base64.channel.k8s.io": True}
        proto = ""
        if offered:
            proto = next((p for p in offered if p in supported), "")
            if not proto:
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        key = self.headers.get("Sec-WebSocket-Key") or ""
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        if proto:
            self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        PortForward(self, ports, rt["netns"], pod, supported.get(proto, False)).run()


def warn_headers(warnings: list[str]) -> dict[str, str]:
    """The API server's `Warning: 299 - "..."` header (one, joined: http.server's
    send_header cannot repeat a name through our dict)."""
    if not warnings:
        return {}
    return {"Warning": ", ".join('299 - "%s"' % w.replace('"', '\\"') for w in warnings)}


def api_resources() -> Obj:
    def r(name: str, kind: str, verbs: list[str], ns: bool = True) -> Obj:
        return {"name": name, "singularName": "", "namespaced": ns, "kind": kind,
                "verbs": verbs}
    crud = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    return {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        r("events", "Event", crud), r("namespaces", "Namespace", ["get", "list"], False),
        r("nodes", "Node", ["get", "list"], False),
        r("persistentvolumeclaims", "PersistentVolumeClaim", crud),
        r("pods", "Pod", crud), r("pods/log", "Pod", ["get"]),
        r("pods/portforward", "PodPortForwardOptions", ["create", "get"]),
        r("pods/status", "Pod", ["get"]), r("secrets", "Secret", crud)]}


def namespace(name: str) -> Obj:
    return {"metadata": {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                         "resourceVersion": "1", "creationTimestamp": FAKE.start_time,
                         "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def node() -> Obj:
    ready = "Unknown" if FAKE.config["nodeLost"] else "True"
    return {"metadata": {"name": NODE, "labels": FAKE.node_labels(), "resourceVersion": "1",
                         "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, NODE)),
                         "creationTimestamp": FAKE.start_time},
            "spec": {"podCIDR": str(FAKE.net.cidr), "podCIDRs": [str(FAKE.net.cidr)]},
            "status": {"conditions": [{"type": "Ready", "status": ready,
                                       "reason": "KubeletReady" if ready == "True" else
                                       "NodeStatusUnknown",
                                       "lastHeartbeatTime": now(),
                                       "lastTransitionTime": FAKE.start_time}],
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": NODE}],
                       "capacity": {"cpu": str(os.cpu_count()), "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": str(os.cpu_count()), "memory": "8Gi",
                                       "pods": "110"},
                       "nodeInfo": {"kubeletVersion": GIT_VERSION,
                                    "kubeProxyVersion": GIT_VERSION,
                                    "containerRuntimeVersion": "fake://1.0",
                                    "operatingSystem": "linux", "architecture": "amd64",
                                    "bootID": str(uuid.uuid5(uuid.NAMESPACE_DNS, "boot")),
                                    "machineID": "0" * 32, "systemUUID": "0" * 32,
                                    "kernelVersion": os.uname().release,
                                    "osImage": "fake node"}}}


# ------------------------------------------------------------------------- port-forward

def ws_frame(opcode: int, payload: bytes) -> bytes:
    """One unmasked, final server frame."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def ws_parse(buf: bytearray) -> Optional[tuple[bool, int, bytes, bool]]:
    """(fin, opcode, unmasked payload, was masked) of the first complete frame in `buf`,
    removed from it; None when incomplete."""
    if len(buf) < 2:
        return None
    b0, b1 = buf[0], buf[1]
    n, off = b1 & 0x7F, 2
    if n == 126:
        if len(buf) < 4:
            return None
        n, off = struct.unpack("!H", buf[2:4])[0], 4
    elif n == 127:
        if len(buf) < 10:
            return None
        n, off = struct.unpack("!Q", buf[2:10])[0], 10
    masked = bool(b1 & 0x80)
    key = b""
    if masked:
        if len(buf) < off + 4:
            return None
        key, off = bytes(buf[off:off + 4]), off + 4
    if len(buf) < off + n:
        return None
    data = bytes(buf[off:off + n])
    del buf[:off + n]
    if masked:
        mask = (key * (n // 4 + 1))[:n]
        data = (int.from_bytes(data, "big") ^ int.from_bytes(mask, "big")).to_bytes(n, "big") \
            if n else b""
    return bool(b0 & 0x80), b0 & 0x0F, data, masked


def connect_in_netns(netns: str, port: int) -> tuple[Optional[socket.socket], str]:
    """Dial localhost:port inside the pod's network namespace, as containerd's PortForward
    does (a thread that joins the namespace, so the server's threads stay on the host)."""
    out: dict[str, Any] = {}

    def work() -> None:
        try:
            setns("/run/netns/" + netns, CLONE_NEWNET)
        except OSError as e:
            out["err"] = str(e)
            return
        errs = []
        for fam, host, net in ((socket.AF_INET, "127.0.0.1", "tcp4"),
                               (socket.AF_INET6, "::1", "tcp6")):
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(10)
            try:
                s.connect((host, port))
                s.settimeout(None)
                out["sock"] = s
                return
            except OSError as e:
                s.close()
                addr = "%s:%d" % (host, port) if fam == socket.AF_INET else "[%s]:%d" % (host,
                                                                                          port)
                errs.append("dial %s %s: connect: %s" % (net, addr,
                                                         (e.strerror or str(e)).lower()))
        out["err"] = "IPv4: %s IPv6 %s " % (errs[0], errs[1])
    t = threading.Thread(target=work, name="netns-dial")
    t.start()
    t.join()
    return out.get("sock"), out.get("err", "")


class PortForward:
    """One pods/portforward WebSocket: channel 2i carries port i's bytes both ways, 2i+1 its
    errors (server to client); each channel's first server frame is the port, 2 bytes
    little-endian. Ping answered with pong, close echoed, fragmented and masked client frames
    reassembled. The WebSocket closes (1000) when every port's connection has ended."""

    def __init__(self, h: Handler, ports: list[int], netns: str, pod: Obj, b64: bool) -> None:
        self.h, self.ports, self.netns, self.pod, self.b64 = h, ports, netns, pod, b64
        self.sock: socket.socket = h.request
        self.socks: list[Optional[socket.socket]] = [None] * len(ports)
        self.pending: list[bytearray] = [bytearray() for _ in ports]
        self.done = [False] * len(ports)
        self.wsout = bytearray()

    def send(self, opcode: int, payload: bytes) -> None:
        """Queue a frame; the loop writes it without blocking, so it keeps reading meanwhile
        (a client that writes while we write cannot deadlock us)."""
        self.wsout += ws_frame(opcode, payload)
        self.flush()

    def flush(self) -> None:
        while self.wsout:
            try:
                n = self.sock.send(bytes(self.wsout[:65536]))
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                return
            del self.wsout[:n]

    def send_channel(self, ch: int, data: bytes) -> None:
        if self.b64:
            self.send(0x1, bytes([ord("0") + ch]) + base64.b64encode(data))
        else:
            self.send(0x2, bytes([ch]) + data)

    def run(self) -> None:
        inbuf = bytearray()
        # bytes the HTTP parser may already hold past the handshake
        try:
            self.sock.settimeout(0.001)
            inbuf += self.h.rfile.read1(65536)
        except (socket.timeout, ssl.SSLError, OSError):
            pass
        self.sock.setblocking(False)
        sandbox = hashlib.sha256(self.pod["metadata"]["uid"].encode()).hexdigest()
        try:
            for i, port in enumerate(self.ports):
                pb = struct.pack("<H", port)
                self.send_channel(2 * i, pb)
                self.send_channel(2 * i + 1, pb)
            for i, port in enumerate(self.ports):
                s, err = connect_in_netns(self.netns, port)
                if s is None:
                    self.send_channel(2 * i + 1, (
                        "error forwarding port %d to pod %s, uid : failed to execute portforward "
                        "in network namespace \"/var/run/netns/%s\": failed to connect to "
                        "localhost:%d inside namespace \"%s\", %s"
                        % (port, sandbox, self.netns, port, sandbox, err)).encode())
                    self.done[i] = True
                else:
                    s.setblocking(False)
                    self.socks[i] = s
            self.loop(inbuf)
        except (OSError, ssl.SSLError):
            pass
        finally:
            for s in self.socks:
                if s:
                    s.close()
            try:
                self.sock.close()
            except OSError:
                pass

    def loop(self, inbuf: bytearray) -> None:
        import select
        message = bytearray()
        msg_op = 0
        closing = False
        deadline = 0.0
        while True:
            if all(self.done) and not closing:
                self.send(0x8, struct.pack("!H", 1000))
                closing, deadline = True, time.time() + 5
            if closing and (not self.wsout or time.time() > deadline):
                return
            active = [i for i, s in enumerate(self.socks) if s and not self.done[i]]
            rl: list[Any] = [] if closing else [self.sock]
            if len(self.wsout) < (4 << 20):  # backpressure: the client reads slower
                rl += [self.socks[i] for i in active]
            wl: list[Any] = [self.socks[i] for i in active if self.pending[i]]
            if self.wsout:
                wl.append(self.sock)
            ready = bool(inbuf) or (isinstance(self.sock, ssl.SSLSocket) and
                                   self.sock.pending() > 0)
            r, w, _ = select.select(rl, wl, [], 0 if ready else 1)
            if self.sock in w:
                self.flush()
            if not closing and (self.sock in r or ready):
                try:
                    data: Optional[bytes] = self.sock.recv(262144)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    data = None
                if data == b"":
                    return  # the client went away
                if data:
                    inbuf += data
                while not closing:
                    fr = ws_parse(inbuf)
                    if fr is None:
                        break
                    fin, op, payload, masked = fr
                    if not masked:
                        self.send(0x8, struct.pack("!H", 1002) + b"frame not masked")
                        closing, deadline = True, time.time() + 5
                    elif op == 0x8:
                        self.send(0x8, payload[:2] if len(payload) >= 2 else b"")
                        closing, deadline = True, time.time() + 5
                    elif op == 0x9:
                        self.send(0xA, payload)
                    elif op == 0xA:
                        pass
                    elif op in (0x1, 0x2, 0x0):
                        if op == 0x0:
                            message += payload
                        else:
                            message, msg_op = bytearray(payload), op
                        if fin:
                            self.deliver(bytes(message), msg_op)
                            message = bytearray()
                    else:
                        self.send(0x8, struct.pack("!H", 1002))
                        closing, deadline = True, time.time() + 5
            for i in active:
                s = self.socks[i]
                assert s is not None
                if s in r and not self.done[i]:
                    try:
                        got = s.recv(262144)
                    except BlockingIOError:
                        got = None
                    except OSError:
                        got = b""
                    if got == b"":
                        self.done[i] = True  # the pod side ended: this port's forward ends
                    elif got:
                        self.send_channel(2 * i, got)
                if s in w and self.pending[i] and not self.done[i]:
                    try:
                        n = s.send(self.pending[i])
                        del self.pending[i][:n]
                    except BlockingIOError:
                        pass
                    except OSError:
                        self.done[i] = True

    def deliver(self, msg: bytes, op: int) -> None:
        """A client message: channel byte (or digit in base64), then data for a port."""
        if not msg:
            return
        ch = msg[0] - ord("0") if self.b64 else msg[0]
        data = base64.b64decode(msg[1:]) if self.b64 else msg[1:]
        if ch % 2 or ch // 2 >= len(self.ports):
            return  # error channels are server-to-client; unknown channels are dropped
        i = ch // 2
        if self.done[i] or self.socks[i] is None:
            return
        self.pending[i] += data
        try:
            n = self.socks[i].send(self.pending[i])
            del self.pending[i][:n]
        except BlockingIOError:
            pass
        except OSError:
            self.done[i] = True


# ------------------------------------------------------------------------- main

def write_kubeconfig(args: argparse.Namespace, port: int) -> None:
    """A kubeconfig for this server (JSON, which is YAML): CA data, token or client cert."""
    with open(args.cert, "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    if args.kubeconfig_ca:
        with open(args.kubeconfig_ca, "rb") as f:
            ca = base64.b64encode(f.read()).decode()
    user: Obj = {}
    if args.kubeconfig_client_cert:
        with open(args.kubeconfig_client_cert, "rb") as f:
            user["client-certificate-data"] = base64.b64encode(f.read()).decode()
        with open(args.kubeconfig_client_key, "rb") as f:
            user["client-key-data"] = base64.b64encode(f.read()).decode()
    else:
        user["token"] = args.token
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
           "clusters": [{"name": "fake", "cluster": {
               "server": "https://%s:%d" % (args.listen.rsplit(":", 1)[0], port),
               "certificate-authority-data": ca}}],
           "users": [{"name": "fake-user", "user": user}],
           "contexts": [{"name": "fake", "context": {
               "cluster": "fake", "user": "fake-user",
               "namespace": args.kubeconfig_namespace}}],
           "preferences": {}}
    tmp = args.kubeconfig_out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cfg, f, indent=1)
    os.replace(tmp, args.kubeconfig_out)


def teardown(args: argparse.Namespace) -> None:
    """Kill every pod process the state records, remove their namespaces, veths, bridge and
    directories (the fake's --teardown mode, also what it does on exit without
    --keep-on-exit)."""
    if not args.state or not os.path.exists(args.state):
        return
    with open(args.state) as f:
        st = json.load(f)
    net = st.get("extra", {}).get("net", {})
    for uid, rt in st.get("runtime", {}).items():
        ns = rt.get("netns")
        shims = [r["shim"] for r in (rt.get("containers") or {}).values()
                 if proc_start(r["shim"]) == r.get("shimStart")]
        for pid in (netns_pids(ns) if ns else []) + shims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if ns:
            run("ip", "netns", "del", ns, check=False)
        veth = rt.get("veth")
        if veth and os.path.exists("/sys/class/net/" + veth):
            run("ip", "link", "del", veth, check=False)
    if net.get("bridge") and os.path.exists("/sys/class/net/" + net["bridge"]):
        run("ip", "link", "del", net["bridge"], check=False)
    data = st.get("extra", {}).get("dataDir")
    if data and os.path.isdir(data):
        shutil.rmtree(data, ignore_errors=True)
    st["runtime"] = {}
    with open(args.state, "w") as f:
        json.dump(st, f)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="A FAKE Kubernetes API server + kubelet for tests.")
    p.add_argument("--listen", default="127.0.0.1:0", help="ADDR:PORT (port 0 = pick one)")
    p.add_argument("--cert", help="server certificate (PEM); without it: plain HTTP")
    p.add_argument("--key", help="server key (PEM)")
    p.add_argument("--client-ca", help="accept client certificates signed by this CA")
    p.add_argument("--token", help="accept `Authorization: Bearer TOKEN`")
    p.add_argument("--port-file", help="write the chosen port here once listening")
    p.add_argument("--kubeconfig-out", help="write a kubeconfig for this server here")
    p.add_argument("--kubeconfig-ca", help="CA to put in the kubeconfig (default: --cert)")
    p.add_argument("--kubeconfig-client-cert", help="client cert for the kubeconfig's user "
                   "(default: the token)")
    p.add_argument("--kubeconfig-client-key")
    p.add_argument("--kubeconfig-namespace", default="default")
    p.add_argument("--state", help="JSON state file: objects, resourceVersion, pod records "
                   "(written after every change, read at start)")
    p.add_argument("--data-dir", help="emptyDirs, PVC directories, logs (default: a temp dir)")
    p.add_argument("--image", action="append", help="NAME=DIR: the image NAME's files")
    p.add_argument("--pull-policy", choices=["strict", "host"], default="host",
                   help="strict: unmapped images fail to pull; host: they run on the host root")
    p.add_argument("--pod-cidr", default="10.244.0.0/16")
    p.add_argument("--name-prefix", help="prefix of netns/veth/bridge names (default kf<pid>)")
    p.add_argument("--field-validation", choices=["Strict", "Warn", "Ignore"],
                   default="Strict", help="unknown fields when a request has no "
                   "fieldValidation parameter (the real default is Warn since 1.27, none "
                   "before: Strict here so provider mistakes show)")
    p.add_argument("--watch-history", type=int, default=1000,
                   help="events kept per resource for watches (older: 410)")
    p.add_argument("--bookmark-interval", type=float, default=10.0)
    p.add_argument("--watch-timeout", type=float, default=1800.0,
                   help="server-side end of watches without timeoutSeconds")
    p.add_argument("--namespace", action="append", help="an extra namespace that exists")
    p.add_argument("--service-account", action="append", help="an extra service account name "
                   "that exists in every namespace (besides `default`)")
    p.add_argument("--runtime-class", action="append", help="a RuntimeClass that exists")
    p.add_argument("--node-label", action="append", help="K=V on the fake node")
    p.add_argument("--keep-on-exit", action="store_true",
                   help="leave pods running when stopped (the API server going down)")
    p.add_argument("--teardown", action="store_true",
                   help="with --state: kill and remove everything recorded, then exit")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    if not args.teardown and not (args.token or args.client_ca):
        p.error("give --token and/or --client-ca")
    if bool(args.cert) != bool(args.key):
        p.error("--cert and --key go together")
    return args


def main(argv: list[str]) -> int:
    global FAKE, K8S_MINOR, GIT_VERSION
    import kubernetes
    K8S_MINOR = kubernetes.__version__.split(".")[0]
    GIT_VERSION = "v1.%s.0-fake" % K8S_MINOR
    args = parse_args(argv)
    if args.teardown:
        teardown(args)
        return 0
    own_data = False
    if not args.data_dir:
        import tempfile
        args.data_dir = tempfile.mkdtemp(prefix="kfake-data-")
        own_data = True
    FAKE = Fake(args)
    FAKE.store.extra["dataDir"] = FAKE.data_dir
    host, port = args.listen.rsplit(":", 1)
    srv = Server((host, int(port)), Handler)
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        if args.client_ca:
            ctx.load_verify_locations(args.client_ca)
            ctx.verify_mode = ssl.CERT_OPTIONAL
        srv.ssl_ctx = ctx
    port_n = srv.server_address[1]
    if args.kubeconfig_out:
        write_kubeconfig(args, port_n)
    with FAKE.store.lock:
        FAKE.store.persist()
    threading.Thread(target=FAKE.kubelet.housekeeping, daemon=True, name="kubelet").start()

    def stop(signum: int, frame: Any) -> None:
        FAKE.stopping = True
        with FAKE.store.cond:
            FAKE.store.cond.notify_all()
        threading.Thread(target=srv.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(port_n))
        os.replace(args.port_file + ".tmp", args.port_file)
    print("fake-apiserver: serving on %s://%s:%d" % ("https" if args.cert else "http", host,
                                                       port_n), flush=True)
    srv.serve_forever(poll_interval=0.2)
    srv.server_close()
    time.sleep(0.3)  # let workers see `stopping`
    if not args.keep_on_exit:
        with FAKE.store.lock:
            FAKE.store.persist()
        if args.state:
            teardown(args)
        else:
            for uid, rt in list(FAKE.store.runtime.items()):
                ns = rt.get("netns")
                for pid in netns_pids(ns) if ns else []:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                FAKE.net.teardown(ns, rt.get("veth"), None)
            FAKE.net.destroy()
            if own_data:
                shutil.rmtree(FAKE.data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
