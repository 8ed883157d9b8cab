#!/usr/bin/python3
"""deploy/kubernetes (the kustomize base) rendered by `kubectl kustomize`:

  (a) `kubectl apply --dry-run=client` accepts every object (against a FAKE discovery server:
      kubectl needs one even for a client dry run; no write reaches it);
  (b) every object validates against python3-kubernetes' models and the API server's semantic
      checks of pods and claims (tests/integration/kubernetes/k8s_validation.py);
  (c) the security properties: non-root, no privilege escalation, read-only root, no
      capabilities, RuntimeDefault seccomp, probes on /health, RBAC exactly the provider's
      verbs in a namespaced Role bound to the server's service account, one replica with
      Recreate, the state on the claim and the master key on a memory volume, no Secret
      committed.
Each check is also run on copies broken one property at a time, which it must reject.

Uses Debian's /usr/bin/python3 (python3-kubernetes) and kubectl; exit 77 without them."""
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    try:
        import manifests as m
    except ImportError as e:
        print("SKIP: %s (Debian's python3-kubernetes and python3-yaml)" % e)
        return 77
    if not shutil.which("kubectl"):
        print("SKIP: no kubectl")
        return 77
    fails = []
    text = m.kustomize()
    objs = m.load(text)
    kinds = sorted(o["kind"] for o in objs)
    print("rendered: %s" % ", ".join(kinds))
    want = ["ConfigMap", "Deployment", "PersistentVolumeClaim", "Role", "RoleBinding",
            "Service", "ServiceAccount"]
    if kinds != want:
        fails.append("kinds %r, not %r" % (kinds, want))
    if any((o["metadata"].get("namespace") != "sbx") for o in objs):
        fails.append("not every object is in the namespace sbx")
    problems, out = m.dry_run(text)
    fails += ["(a) " + x for x in problems]
    print("(a) kubectl apply --dry-run=client:\n" + out.strip())
    problems = m.validate(objs)
    fails += ["(b) " + x for x in problems]
    print("(b) %d objects against python3-kubernetes' models: %s" % (
        len(objs), "ok" if not problems else problems))
    for what, broken in m.schema_broken_copies(objs):
        if not m.validate(broken):
            fails.append("(b) the validation let a broken copy through: %s" % what)
    problems = m.security_problems(objs)
    fails += ["(c) " + x for x in problems]
    print("(c) security properties: %s" % ("ok" if not problems else problems))
    for what, broken in m.broken_copies(objs):
        if not m.security_problems(broken):
            fails.append("(c) the checks let a broken copy through: %s" % what)
    # an overlay moving everything to another namespace keeps the properties (the binding's
    # subject follows the namespace)
    with tempfile.TemporaryDirectory(prefix="sbx-deploy-overlay-") as tmp:
        moved = m.load(m.overlay(tmp, "agents-prod", image="registry.example/sbx:9.9"))
    if any(o["metadata"].get("namespace") != "agents-prod" for o in moved):
        fails.append("the overlay's namespace is not on every object")
    fails += ["(c) overlay: " + x for x in m.validate(moved) + m.security_problems(moved)]
    images = sorted({c["image"] for d in m.of_kind(moved, "Deployment") for c in
                     d["spec"]["template"]["spec"]["initContainers"] +
                     d["spec"]["template"]["spec"]["containers"]})
    if images != ["registry.example/sbx:9.9"]:
        fails.append("the overlay's image is not every container's: %r" % images)
    print("overlay (namespace agents-prod, another image): %s" % (
        "ok" if not fails else "see below"))
    # the images are the project's version, as deploy/images/build.sh tags them
    with open(os.path.join(m.TOP, "CMakeLists.txt")) as f:
        version = re.search(r"project\(sbx VERSION ([0-9.]+)", f.read()).group(1)
    spec = m.of_kind(objs, "Deployment")[0]["spec"]["template"]["spec"]
    used = sorted({c["image"] for c in spec["initContainers"] + spec["containers"]})
    if used != ["sbx:" + version]:
        fails.append("the server image is not sbx:%s: %r" % (version, used))
    if m.conf_value(m.conf_text(objs), "execd_image") != "sbx-execd:" + version:
        fails.append("sbx.conf's execd_image is not sbx-execd:%s" % version)
    # the image's default config is the ConfigMap's: one file, deploy/kubernetes/sbx.conf
    with open(os.path.join(m.TOP, "deploy", "kubernetes", "sbx.conf")) as f:
        if m.conf_text(objs) != f.read():
            fails.append("the ConfigMap's sbx.conf is not deploy/kubernetes/sbx.conf")
    for x in fails:
        print("FAIL: " + x)
    if not fails:
        print("ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
