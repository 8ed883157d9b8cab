"""What the deploy tests check in rendered manifests (deploy/kubernetes through
`kubectl kustomize`, deploy/helm/sbx through `helm template`): the client dry run, the
objects against python3-kubernetes' models, and the security properties. Each check returns
a list of problems (empty: fine), so a test can also show that a broken copy is caught."""
import copy
import os
import re
import subprocess
import sys
import tempfile

import yaml  # Debian's python3-yaml (python3-kubernetes depends on it)

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "kubernetes"))
import k8s_validation as kv  # noqa: E402
from fake_discovery import FakeDiscovery  # noqa: E402

# The RBAC the server gets, exactly: (apiGroup, resource, verb). Why each: role.yaml.
RBAC = {("", "pods", v) for v in ("create", "delete", "get", "list", "watch")} | \
       {("", "pods/log", "get"), ("", "pods/portforward", "create"),
        ("", "pods/portforward", "get")} | \
       {("", "persistentvolumeclaims", v) for v in ("create", "delete", "get", "list")} | \
       {("", "secrets", v) for v in ("create", "delete", "get", "list")}

MODELS = {"ServiceAccount": "V1ServiceAccount", "Role": "V1Role", "RoleBinding": "V1RoleBinding",
          "ConfigMap": "V1ConfigMap", "Service": "V1Service", "Deployment": "V1Deployment",
          "PersistentVolumeClaim": "V1PersistentVolumeClaim"}


def kustomize(path=os.path.join(TOP, "deploy", "kubernetes")):
    p = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("kubectl kustomize %s: %s" % (path, p.stderr))
    return p.stdout


def overlay(tmp, namespace, conf=None, image=None):
    """An overlay of the base in tmp: another namespace, and optionally another sbx.conf and
    server image ("repo:tag"); returns its rendering."""
    base = os.path.relpath(os.path.join(TOP, "deploy", "kubernetes"), tmp)
    k = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
         "namespace": namespace, "resources": [base]}
    if conf is not None:
        with open(os.path.join(tmp, "sbx.conf"), "w") as f:
            f.write(conf)
        k["configMapGenerator"] = [{"name": "sbx-config", "behavior": "replace",
                                    "files": ["sbx.conf"]}]
    if image:
        repo, _, tag = image.rpartition(":")
        k["images"] = [{"name": "sbx", "newName": repo, "newTag": tag}]
    with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
        yaml.safe_dump(k, f)
    return kustomize(tmp)


def load(text):
    return [o for o in yaml.safe_load_all(text) if o]


def dry_run(text):
    """`kubectl apply --dry-run=client` of the manifests against the FAKE discovery server.
    Returns (problems, kubectl's output)."""
    fake = FakeDiscovery().start()
    try:
        with tempfile.TemporaryDirectory(prefix="sbx-deploy-kubectl-") as tmp:
            kc = fake.kubeconfig(os.path.join(tmp, "kubeconfig"))
            p = subprocess.run(["kubectl", "--kubeconfig", kc, "--cache-dir",
                                os.path.join(tmp, "cache"), "apply", "--dry-run=client",
                                "--validate=false", "-f", "-"], input=text,
                               capture_output=True, text=True, timeout=120)
    finally:
        fake.stop()
    problems = []
    if p.returncode != 0:
        problems.append("kubectl apply --dry-run=client failed (%d): %s" % (p.returncode,
                                                                            p.stderr[-2000:]))
    n = len(load(text))
    created = [x for x in p.stdout.splitlines() if x.endswith("created (dry run)")]
    if len(created) != n:
        problems.append("%d objects, %d created (dry run): %s" % (n, len(created), p.stdout))
    writes = [r for r in fake.requests if r[0] != "GET"]
    if writes:
        problems.append("a client dry run wrote to the API server: %r" % writes)
    return problems, p.stdout


def validate(objs):
    """Every object against python3-kubernetes' model of its kind (unknown fields, types,
    required fields), the Deployment's pod template and the PVC through the API server's
    semantic checks (k8s_validation.py)."""
    problems = []
    for o in objs:
        kind = o.get("kind")
        name = (o.get("metadata") or {}).get("name", "?")
        if kind not in MODELS:
            problems.append("unexpected kind %s (%s)" % (kind, name))
            continue
        try:
            kv.check_schema(o, MODELS[kind], kind, name)
            if kind == "Deployment":
                tpl = o["spec"]["template"]
                pod = {"metadata": dict(tpl.get("metadata") or {}, name=name),
                       "spec": tpl["spec"]}
                kv.validate_pod(pod, lambda _name: True)
            if kind == "PersistentVolumeClaim":
                kv.validate_pvc(o)
        except kv.ApiError as e:
            problems.append("%s %s: %d %s %s" % (kind, name, e.code, e.message,
                                                 (e.details or {}).get("causes", "")))
    return problems


def of_kind(objs, kind):
    return [o for o in objs if o.get("kind") == kind]


def conf_text(objs):
    cms = [o for o in of_kind(objs, "ConfigMap") if "sbx.conf" in (o.get("data") or {})]
    return cms[0]["data"]["sbx.conf"] if len(cms) == 1 else None


def conf_value(conf, key):
    """A string value `key = "..."` of sbx.conf (the keys used here are unique in the file)."""
    m = re.search(r'^\s*%s\s*=\s*"([^"]*)"\s*;' % re.escape(key), conf, re.M)
    return m.group(1) if m else None


def container_problems(c, where):
    p = []
    sc = c.get("securityContext") or {}
    if sc.get("allowPrivilegeEscalation") is not False:
        p.append("%s: allowPrivilegeEscalation is not false" % where)
    if sc.get("readOnlyRootFilesystem") is not True:
        p.append("%s: readOnlyRootFilesystem is not true" % where)
    if sc.get("privileged"):
        p.append("%s: privileged" % where)
    caps = sc.get("capabilities") or {}
    if caps.get("drop") != ["ALL"] or caps.get("add"):
        p.append("%s: capabilities are not drop [ALL] with nothing added: %r" % (where, caps))
    if sc.get("runAsUser") == 0 or sc.get("runAsNonRoot") is False:
        p.append("%s: may run as root" % where)
    if not (c.get("resources") or {}).get("limits"):
        p.append("%s: no resource limits" % where)
    return p


def probe_problems(c, port_name):
    p = []
    ports = {x.get("name"): x.get("containerPort") for x in c.get("ports") or []}
    for kind in ("livenessProbe", "readinessProbe"):
        get = (c.get(kind) or {}).get("httpGet") or {}
        if get.get("path") != "/health":
            p.append("%s is not an httpGet of /health: %r" % (kind, c.get(kind)))
        elif get.get("port") not in (port_name, ports.get(port_name)):
            p.append("%s is not on the API port %s: %r" % (kind, port_name, get))
    return p


def rbac_problems(objs):
    p = []
    for bad in ("ClusterRole", "ClusterRoleBinding"):
        if of_kind(objs, bad):
            p.append("a %s: the server's rights must stay in its namespace" % bad)
    roles = of_kind(objs, "Role")
    if len(roles) != 1:
        return p + ["%d Roles, not 1" % len(roles)]
    got = set()
    for r in roles[0].get("rules") or []:
        if r.get("resourceNames") or r.get("nonResourceURLs"):
            p.append("unexpected rule shape: %r" % r)
        for g in r.get("apiGroups") or []:
            for res in r.get("resources") or []:
                for v in r.get("verbs") or []:
                    got.add((g, res, v))
    if got != RBAC:
        p.append("RBAC is not exactly the provider's: extra %r, missing %r"
                 % (sorted(got - RBAC), sorted(RBAC - got)))
    deps = of_kind(objs, "Deployment")
    sa = deps[0]["spec"]["template"]["spec"].get("serviceAccountName") if deps else None
    rbs = of_kind(objs, "RoleBinding")
    if len(rbs) != 1:
        return p + ["%d RoleBindings, not 1" % len(rbs)]
    rb = rbs[0]
    ns = rb["metadata"].get("namespace")
    if rb["roleRef"] != {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": roles[0]["metadata"]["name"]}:
        p.append("the RoleBinding does not bind the Role: %r" % rb["roleRef"])
    want = [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
    if rb.get("subjects") != want:
        p.append("the RoleBinding's subjects are not the server's service account %r: %r"
                 % (want, rb.get("subjects")))
    return p


def mount_of(c, volume):
    for m in c.get("volumeMounts") or []:
        if m.get("name") == volume:
            return m
    return None


def deployment_problems(objs):
    p = []
    deps = of_kind(objs, "Deployment")
    if len(deps) != 1:
        return ["%d Deployments, not 1" % len(deps)]
    d = deps[0]
    if d["spec"].get("replicas") != 1:
        p.append("replicas is not 1 (SQLite has one writer)")
    if (d["spec"].get("strategy") or {}).get("type") != "Recreate":
        p.append("strategy is not Recreate (two pods would open one store)")
    spec = d["spec"]["template"]["spec"]
    psc = spec.get("securityContext") or {}
    if psc.get("runAsNonRoot") is not True or not psc.get("runAsUser"):
        p.append("the pod does not run as a non-root user: %r" % psc)
    if (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        p.append("no RuntimeDefault seccomp profile: %r" % psc)
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(host):
            p.append("the pod sets %s" % host)
    vols = {v["name"]: v for v in spec.get("volumes") or []}
    if any("hostPath" in v for v in vols.values()):
        p.append("a hostPath volume")
    ctrs = spec.get("containers") or []
    inits = spec.get("initContainers") or []
    for c in inits + ctrs:
        p += container_problems(c, "container " + c.get("name", "?"))
    if len(ctrs) != 1:
        return p + ["%d containers, not 1" % len(ctrs)]
    main = ctrs[0]
    p += probe_problems(main, "http")
    conf = conf_text(objs)
    if conf is None:
        return p + ["no ConfigMap with sbx.conf"]
    if not re.search(r'supported\s*=\s*\[\s*"kubernetes"\s*\]\s*;', conf):
        p.append("sbx.conf enables more than the kubernetes provider")
    if re.search(r"^\s*kubeconfig", conf, re.M):
        p.append("sbx.conf names a kubeconfig: in the cluster the service account is used")
    listen = conf_value(conf, "listen") or ""
    port = {x.get("name"): x.get("containerPort") for x in main.get("ports") or []}.get("http")
    if not listen.endswith(":%s" % port):
        p.append("sbx.conf listens on %r, the container port is %r" % (listen, port))
    # the state dir on the claim, the master key on the memory volume the init container fills
    state = mount_of(main, "state")
    if not state or state["mountPath"] != conf_value(conf, "state_dir"):
        p.append("the state dir %r is not the claim's mount %r"
                 % (conf_value(conf, "state_dir"), state))
    if "persistentVolumeClaim" not in vols.get("state", {}):
        p.append("the state volume is not a PersistentVolumeClaim")
    keys = mount_of(main, "keys")
    key_file = conf_value(conf, "key_file") or ""
    if not keys or os.path.dirname(key_file) != keys["mountPath"] or not keys.get("readOnly"):
        p.append("secrets.key_file %r is not on the read-only keys mount %r" % (key_file, keys))
    if (vols.get("keys", {}).get("emptyDir") or {}).get("medium") != "Memory":
        p.append("the keys volume is not in memory")
    sec = vols.get("keys-secret", {}).get("secret") or {}
    if not sec.get("secretName"):
        p.append("the keys do not come from a Secret")
    if of_kind(objs, "Secret"):
        p.append("a Secret in the manifests: the keys are the user's, never committed")
    if spec.get("automountServiceAccountToken") is not True:
        p.append("the server's pod does not mount its service account token")
    for sa in of_kind(objs, "ServiceAccount"):
        if sa.get("automountServiceAccountToken") is not False:
            p.append("the ServiceAccount automounts its token into every pod using it")
    svcs = of_kind(objs, "Service")
    labels = d["spec"]["template"]["metadata"].get("labels") or {}
    if len(svcs) != 1:
        p.append("%d Services, not 1" % len(svcs))
    else:
        sel = svcs[0]["spec"].get("selector") or {}
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            p.append("the Service does not select the pod: %r vs %r" % (sel, labels))
        if svcs[0]["spec"].get("type", "ClusterIP") != "ClusterIP":
            p.append("the Service is exposed outside the cluster by default")
    return p


def security_problems(objs):
    return rbac_problems(objs) + deployment_problems(objs)


def broken_copies(objs):
    """(what, objects) pairs each breaking one property: the checks must catch every one."""
    def edit(fn):
        o = copy.deepcopy(objs)
        fn(o)
        return o

    def dep(o):
        return of_kind(o, "Deployment")[0]["spec"]["template"]["spec"]

    def role(o):
        return of_kind(o, "Role")[0]

    return [
        ("root user", edit(lambda o: dep(o)["securityContext"].update(runAsUser=0,
                                                                     runAsNonRoot=False))),
        ("escalation", edit(lambda o: dep(o)["containers"][0]["securityContext"].update(
            allowPrivilegeEscalation=True))),
        ("init writable root", edit(lambda o: dep(o)["initContainers"][0]["securityContext"]
                                    .update(readOnlyRootFilesystem=False))),
        ("a capability", edit(lambda o: dep(o)["containers"][0]["securityContext"][
            "capabilities"].update(add=["NET_ADMIN"]))),
        ("no seccomp", edit(lambda o: dep(o)["securityContext"].pop("seccompProfile"))),
        ("hostPath", edit(lambda o: dep(o)["volumes"].append(
            {"name": "h", "hostPath": {"path": "/"}}))),
        ("probe path", edit(lambda o: dep(o)["containers"][0]["livenessProbe"]["httpGet"]
                            .update(path="/"))),
        ("extra verb", edit(lambda o: role(o)["rules"][0]["verbs"].append("patch"))),
        ("pods/exec", edit(lambda o: role(o)["rules"].append(
            {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}))),
        ("missing verb", edit(lambda o: role(o)["rules"][2]["verbs"].remove("get"))),
        ("cluster role", edit(lambda o: o.append(dict(copy.deepcopy(role(o)),
                                                      kind="ClusterRole")))),
        ("two replicas", edit(lambda o: of_kind(o, "Deployment")[0]["spec"].update(replicas=2))),
        ("rolling", edit(lambda o: of_kind(o, "Deployment")[0]["spec"].update(
            strategy={"type": "RollingUpdate"}))),
        ("a committed Secret", edit(lambda o: o.append(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}))),
    ]


def schema_broken_copies(objs):
    def edit(fn):
        o = copy.deepcopy(objs)
        fn(o)
        return o

    def dep(o):
        return of_kind(o, "Deployment")[0]["spec"]["template"]["spec"]

    return [
        ("unknown field", edit(lambda o: dep(o)["containers"][0].update(imagePolicy="x"))),
        ("wrong type", edit(lambda o: dep(o)["containers"][0]["ports"][0].update(
            containerPort="eighty"))),
        ("undeclared volume", edit(lambda o: dep(o)["containers"][0]["volumeMounts"].append(
            {"name": "nosuch", "mountPath": "/x"}))),
    ]
