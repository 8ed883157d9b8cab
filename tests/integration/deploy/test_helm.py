#!/usr/bin/python3
"""deploy/helm/sbx, the Helm chart.

With `helm` on PATH: `helm lint`, `helm template` with the default values and with the sandbox
values set, each rendering through the same checks as the kustomize base (test_manifests.py:
kubectl's client dry run, python3-kubernetes' models, the security properties), and the
sandbox values reaching sbx.conf.

Without helm (it is not packaged in Debian 12, so not on these machines): the render is
SKIPPED, and that is printed; what can be checked without it is: Chart.yaml and values.yaml
parse, the chart's appVersion is the project's version, every `.Values.X` a template uses is
in values.yaml, every template `include`d is defined, the `{{ }}` pairs balance, and the
templates with their Go-template actions taken out parse as YAML with the same RBAC, probes,
replicas, strategy and pod security context as the kustomize base."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def values_has(values, path):
    node = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def detemplate(text):
    """A template with its actions taken out: lines that are only actions go, inline ones
    become a placeholder."""
    out = []
    for line in text.splitlines():
        if re.fullmatch(r"\s*\{\{.*\}\}\s*", line):
            continue
        out.append(re.sub(r"\{\{.*?\}\}", "TPL", line))
    return "\n".join(out)


def static_checks(m, chart):
    import yaml
    fails = []
    with open(os.path.join(chart, "Chart.yaml")) as f:
        meta = yaml.safe_load(f)
    with open(os.path.join(chart, "values.yaml")) as f:
        values = yaml.safe_load(f)
    with open(os.path.join(m.TOP, "CMakeLists.txt")) as f:
        version = re.search(r"project\(sbx VERSION ([0-9.]+)", f.read()).group(1)
    if meta.get("apiVersion") != "v2" or meta.get("name") != "sbx":
        fails.append("Chart.yaml: apiVersion v2 and name sbx: %r" % meta)
    if str(meta.get("appVersion")) != version:
        fails.append("appVersion %r is not the project's %s" % (meta.get("appVersion"), version))
    tdir = os.path.join(chart, "templates")
    texts = {}
    for name in sorted(os.listdir(tdir)):
        with open(os.path.join(tdir, name)) as f:
            texts[name] = f.read()
    defined = set(re.findall(r'\{\{-?\s*define\s+"([^"]+)"', "".join(texts.values())))
    refs = 0
    for name, text in texts.items():
        if text.count("{{") != text.count("}}"):
            fails.append("%s: unbalanced {{ }}" % name)
        for path in re.findall(r"\.Values\.([A-Za-z0-9_.]+)", text):
            refs += 1
            if not values_has(values, path.rstrip(".")):
                fails.append("%s: .Values.%s is not in values.yaml" % (name, path))
        for inc in re.findall(r'include\s+"([^"]+)"', text):
            if inc not in defined:
                fails.append("%s: include \"%s\" is not defined" % (name, inc))
    print("static: %d templates, %d .Values references, %d defines"
          % (len(texts), refs, len(defined)))
    role = [o for o in yaml.safe_load_all(detemplate(texts["role.yaml"])) if o]
    fails += ["role.yaml: " + x for x in m.rbac_problems(
        role + [{"kind": "Deployment", "spec": {"template": {"spec": {
            "serviceAccountName": "TPL"}}}}]) if "RoleBinding's subjects" not in x]
    dep = yaml.safe_load(detemplate(texts["deployment.yaml"]))
    if dep["spec"].get("replicas") != 1 or dep["spec"]["strategy"]["type"] != "Recreate":
        fails.append("deployment.yaml: not one replica with Recreate")
    spec = dep["spec"]["template"]["spec"]
    base = [o for o in m.load(m.kustomize()) if o["kind"] == "Deployment"][0]
    bspec = base["spec"]["template"]["spec"]
    if spec["securityContext"] != bspec["securityContext"]:
        fails.append("the pod security context differs from the kustomize base")
    main = spec["containers"][0]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        if main.get(probe) != bspec["containers"][0].get(probe):
            fails.append("deployment.yaml: %s differs from the kustomize base" % probe)
    if texts["deployment.yaml"].count('include "sbx.containerSecurityContext"') != 2:
        fails.append("deployment.yaml: the two containers' security context is not the helper's")
    helper = texts["_helpers.tpl"]
    sc = yaml.safe_load(re.search(r'define "sbx.containerSecurityContext" -\}\}\n(.*?)\{\{-',
                                  helper, re.S).group(1))
    if sc != bspec["containers"][0]["securityContext"]:
        fails.append("sbx.containerSecurityContext differs from the base's: %r" % sc)
    if values["resources"] != bspec["containers"][0]["resources"]:
        fails.append("values.yaml resources differ from the base's")
    return fails


def render_checks(m, chart):
    fails = []
    p = subprocess.run(["helm", "lint", chart], capture_output=True, text=True)
    if p.returncode != 0:
        fails.append("helm lint: %s%s" % (p.stdout, p.stderr))
    with tempfile.TemporaryDirectory() as tmp:
        vals = os.path.join(tmp, "values.yaml")
        with open(vals, "w") as f:
            f.write('sandboxes:\n  runtimeClassName: gvisor\n  nodeSelector: {sbx.dev/pool: "a"}\n'
                    '  tolerations: [{key: sandbox, operator: Exists, effect: NoSchedule}]\n'
                    '  imagePullSecrets: [regcred]\n  labels: {team: agents}\n')
        for extra in ([], ["-f", vals]):
            p = subprocess.run(["helm", "template", "sbx", chart, "--namespace", "sbx"] + extra,
                               capture_output=True, text=True)
            if p.returncode != 0:
                fails.append("helm template %s: %s" % (extra, p.stderr))
                continue
            objs = m.load(p.stdout)
            problems, _ = m.dry_run(p.stdout)
            fails += problems + m.validate(objs) + m.security_problems(objs)
            conf = m.conf_text(objs) or ""
            if extra:
                for want in ('runtime_class = "gvisor";', 'node_selector = ["sbx.dev/pool=a"];',
                             'image_pull_secrets = ["regcred"];', 'labels = ["team=agents"];',
                             '"NoSchedule'):
                    if want not in conf.replace('\\"', '"'):
                        fails.append("sbx.conf lacks %s:\n%s" % (want, conf))
    return fails


def main():
    try:
        import manifests as m
    except ImportError as e:
        print("SKIP: %s (Debian's python3-kubernetes and python3-yaml)" % e)
        return 77
    chart = os.path.join(m.TOP, "deploy", "helm", "sbx")
    fails = static_checks(m, chart)
    if shutil.which("helm"):
        fails += render_checks(m, chart)
        print("rendered with helm: lint, template (default and sandbox values), dry run, "
              "models, security")
    else:
        print("NOTE: helm is not installed: the chart was NOT rendered (helm template, the "
              "dry run and the model and security checks of its output were skipped); only "
              "the static checks ran")
    for x in fails:
        print("FAIL: " + x)
    if not fails:
        print("ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
