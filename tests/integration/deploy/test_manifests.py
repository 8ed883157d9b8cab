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
import shutil
import sys

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
