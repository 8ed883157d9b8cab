#!/usr/bin/python3
"""The server image of deploy/images/build.sh (`sbx:VERSION`: mmdebstrap, slow), for real.

Built from a release build only (a sanitizer build's sbx-full needs libasan: this test says so
and skips), once per build dir while its inputs are unchanged (<build>/images/sbx.tar). Then:

  the archive: user 10001:10001, entrypoint `sbx serve`, the sbx binaries and
  /etc/sbx/sbx.conf (deploy/kubernetes/sbx.conf) in it, the user in /etc/passwd, no apt;
  loaded into a private dockerd (or podman) started and stopped by PID by this test, and run
  the way the Deployment runs it (user 10001, read-only root, all capabilities dropped,
  no-new-privileges, the volumes bound where the pod mounts them, the Secret's files as a
  Secret volume has them: root-owned, group 10001, 0440):
  - `sbx serve --help`;
  - the init container `keys` with the command of the rendered Deployment: the two keys copied
    0600; a master key of the wrong size refused with the Secret named;
  - the server with the ConfigMap's sbx.conf: /health answers (seen from the container's own
    network namespace), the Secret's API key is the one it takes, a create fails with the
    in-cluster provider's "not running in a cluster" (it is not): the config is the cluster's;
  - the server with the process provider instead: a sandbox runs a command through the
    router, so sbx-full and the execd in the image work together.

argv: SBX_CLI IMAGE_TAR. Root (mmdebstrap, a container engine)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "docker"))
import images  # noqa: E402
from images import Fail, check  # noqa: E402

SKIP = 77
UID = 10001


def inputs(bindir):
    return [os.path.join(bindir, x) for x in ("sbx", "sbx-full")] + [
        images.BUILD, os.path.join(images.TOP, "deploy", "kubernetes", "sbx.conf"),
        os.path.join(images.TOP, "images", "desktop", "mkimage.py")]


def image(bindir, tar):
    if os.path.exists(tar) and all(os.path.getmtime(tar) > os.path.getmtime(f)
                                   for f in inputs(bindir) if os.path.exists(f)):
        print("ok   reusing %s (newer than its inputs)" % tar)
        return tar
    os.makedirs(os.path.dirname(tar), exist_ok=True)
    t0 = time.time()
    out = tempfile.mkdtemp(prefix="sbx-server-image-", dir=os.path.dirname(tar))
    try:
        built = images.build("server", bindir, out)
        os.replace(built, tar)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("ok   build.sh server: %s (%d MiB, %.0f s)" % (tar, os.path.getsize(tar) >> 20,
                                                        time.time() - t0))
    return tar


def archive_checks(tar):
    manifest, config, names = images.read(tar)
    with open(os.path.join(images.TOP, "CMakeLists.txt")) as f:
        version = re.search(r"project\(sbx VERSION ([0-9.]+)", f.read()).group(1)
    check(manifest["RepoTags"] == ["sbx:" + version], "tag: %r" % manifest["RepoTags"])
    c = config["config"]
    check(c.get("User") == "%d:%d" % (UID, UID), "the image's user is %d: %r" % (UID, c))
    check(c.get("Entrypoint") == ["/usr/bin/sbx", "serve"] and
          c.get("Cmd") == ["--config", "/etc/sbx/sbx.conf"], "entrypoint sbx serve: %r" % c)
    have = {n.lstrip("./") for n in names}
    for f in ("usr/bin/sbx", "usr/bin/sbx-full", "usr/lib/sbx/sbx-execd", "etc/sbx/sbx.conf",
              "usr/bin/sh", "usr/bin/install", "var/lib/sbx"):
        check(f in have, "the image has /%s" % f)
    check("usr/bin/apt" not in have and "usr/bin/python3" not in have and
          not any(n.startswith("usr/share/perl/") for n in have),
          "no apt, no python, no perl beyond perl-base: only what the server needs")
    print("ok   the archive: sbx:%s, user %d, entrypoint sbx serve, %d files"
          % (version, UID, len(names)))
    return "sbx:" + version


def deployment():
    import manifests as m
    objs = m.load(m.kustomize())
    return m, objs, m.of_kind(objs, "Deployment")[0]["spec"]["template"]["spec"]


class Runner:
    """Containers of the image with the Deployment's security settings."""

    def __init__(self, eng, e, ref, tmp):
        self.eng, self.e, self.ref, self.tmp = eng, e, ref, tmp
        self.n = 0

    def create(self, binds, entrypoint=None, cmd=None, env=None):
        self.n += 1
        body = {"Image": self.ref, "User": "%d:%d" % (UID, UID), "Env": env or [],
                "HostConfig": {"Binds": binds, "ReadonlyRootfs": True, "CapDrop": ["ALL"],
                               "SecurityOpt": ["no-new-privileges"], "GroupAdd": [str(UID)],
                               "NetworkMode": "none", "Tmpfs": {"/tmp": "size=64m"},
                               "CgroupParent": self.e.cgroup_parent}}
        if entrypoint is not None:
            body["Entrypoint"] = entrypoint
        if cmd is not None:
            body["Cmd"] = cmd
        status, out = self.eng.api(self.e.socket, "POST", "/containers/create?name=sbx-srvimg-%d-%d"
                                   % (os.getpid(), self.n), body)
        check(status == 201, "create a container: %d %r" % (status, out))
        status, err = self.eng.api(self.e.socket, "POST", "/containers/%s/start" % out["Id"])
        check(status == 204, "start: %d %r" % (status, err))
        return out["Id"]

    def run(self, binds, entrypoint=None, cmd=None):
        cid = self.create(binds, entrypoint, cmd)
        try:
            status, out = self.eng.api(self.e.socket, "POST", "/containers/%s/wait" % cid,
                                       timeout=120)
            check(status == 200, "wait: %d %r" % (status, out))
            return out.get("StatusCode"), self.logs(cid)
        finally:
            self.remove(cid)

    def logs(self, cid):
        _, raw = self.eng.api(self.e.socket, "GET",
                              "/containers/%s/logs?stdout=1&stderr=1" % cid)
        raw = raw if isinstance(raw, bytes) else str(raw).encode()
        out, i = b"", 0
        while i + 8 <= len(raw) and raw[i] in (1, 2) and raw[i + 1:i + 4] == b"\0\0\0":
            n = int.from_bytes(raw[i + 4:i + 8], "big")
            out += raw[i + 8:i + 8 + n]
            i += 8 + n
        return (out if i else raw).decode(errors="replace")

    def remove(self, cid):
        self.eng.api(self.e.socket, "DELETE", "/containers/%s?force=1" % cid)

    def pid(self, cid):
        status, info = self.eng.api(self.e.socket, "GET", "/containers/%s/json" % cid)
        check(status == 200, "inspect: %r" % info)
        return info["State"]["Pid"]


def http(pid, method, path, key=None, body=None):
    """curl from inside the container's network namespace: (status, body)."""
    argv = ["nsenter", "--net=/proc/%d/ns/net" % pid, "curl", "-s", "-o", "-", "-w",
            "\n%{http_code}", "-X", method, "http://127.0.0.1:8080" + path]
    if key:
        argv += ["-H", "OPEN-SANDBOX-API-KEY: " + key]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "--data-binary", body]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    text, _, code = p.stdout.rpartition("\n")
    return int(code or 0), text


def wait_health(r, cid):
    pid = r.pid(cid)
    deadline = time.time() + 30
    while time.time() < deadline:
        if http(pid, "GET", "/health")[0] == 200:
            return pid
        time.sleep(0.2)
    raise Fail("no /health from the container: %s" % r.logs(cid))


def pod_dirs(tmp, master_key):
    """The pod's volumes as the kubelet makes them under fsGroup 10001."""
    d = {k: os.path.join(tmp, k) for k in ("secret", "keys", "state", "config")}
    for k, p in d.items():
        os.makedirs(p)
        os.chown(p, 0 if k in ("secret", "config") else UID, UID)
        os.chmod(p, 0o755 if k in ("secret", "config") else 0o2770)
    key = os.urandom(32).hex()
    for name, data in (("api-key", key.encode() + b"\n"), ("master.key", master_key)):
        f = os.path.join(d["secret"], name)
        with open(f, "wb") as fh:
            fh.write(data)
        os.chown(f, 0, UID)
        os.chmod(f, 0o440)
    return d, key


def init_container(r, spec, tmp, master_key):
    d, key = pod_dirs(tmp, master_key)
    init = spec["initContainers"][0]
    mounts = {x["name"]: x["mountPath"] for x in init["volumeMounts"]}
    binds = [d["secret"] + ":" + mounts["keys-secret"] + ":ro", d["keys"] + ":" + mounts["keys"],
             d["state"] + ":" + mounts["state"]]
    code, logs = r.run(binds, entrypoint=init["command"][:1], cmd=init["command"][1:])
    return code, logs, d, key


def in_engine(tar, ref, tmp):
    images.in_first_engine(tmp, lambda eng, e: pod(eng, e, tar, ref, tmp), "engine part")


def pod(eng, e, tar, ref, tmp):
    images.load(eng, e, tar)
    r = Runner(eng, e, "localhost/" + ref if e.kind == "podman" else ref, tmp)
    code, logs = r.run([], cmd=["--help"])
    check(code == 0 and "Usage: sbx serve" in logs, "sbx serve --help: %d %s" % (code, logs))
    print("ok   %s: `sbx serve --help` in the image" % e.kind)
    m, objs, spec = deployment()
    code, logs, _, _ = init_container(r, spec, os.path.join(tmp, "pod-bad"), os.urandom(31))
    check(code != 0 and "master.key must be exactly 32 bytes" in logs,
          "a 31-byte master key is refused by the init container: %d %s" % (code, logs))
    code, logs, d, key = init_container(r, spec, os.path.join(tmp, "pod"), os.urandom(32))
    check(code == 0, "the init container `keys`: %d %s" % (code, logs))
    for f in (os.path.join(d["state"], "api-key"), os.path.join(d["keys"], "master.key")):
        st = os.stat(f)
        check(st.st_uid == UID and (st.st_mode & 0o777) == 0o600,
              "%s is the server's, 0600: %d %o" % (f, st.st_uid, st.st_mode))
    print("ok   the init container `keys` copied the Secret's keys (0600, uid %d) and refuses "
          "a bad master key" % UID)
    main = spec["containers"][0]
    mounts = {x["name"]: x["mountPath"] for x in main["volumeMounts"]}
    with open(os.path.join(d["config"], "sbx.conf"), "w") as f:
        f.write(m.conf_text(objs))
    binds = [d["config"] + ":" + mounts["config"] + ":ro", d["state"] + ":" + mounts["state"],
             d["keys"] + ":" + mounts["keys"] + ":ro"]
    cid = r.create(binds, cmd=main["args"])
    try:
        pid = wait_health(r, cid)
        code, _ = http(pid, "GET", "/v1/sandboxes", key=key)
        check(code == 200, "the Secret's API key is the server's: %d" % code)
        code, _ = http(pid, "GET", "/v1/sandboxes", key="0" * 64)
        check(code == 401, "another key: 401, not %d" % code)
        code, text = http(pid, "POST", "/v1/sandboxes", key=key, body=(
            '{"image": {"uri": "busybox"}, "entrypoint": ["sleep", "60"], "timeout": 60,'
            ' "resourceLimits": {"cpu": "1", "memory": "128Mi"}}'))
        check(code == 503 and "not running in a cluster" in text,
              "the kubernetes provider, in-cluster, is the config's: %d %s" % (code, text))
    finally:
        r.remove(cid)
    print("ok   the server as the Deployment runs it: /health, the Secret's key, the "
          "in-cluster kubernetes provider")
    with open(os.path.join(d["config"], "sbx.conf"), "w") as f:
        f.write('server = { listen = "0.0.0.0:8080"; };\n'
                'providers = { supported = ["process"]; default = "process"; };\n')
    cid = r.create(binds, cmd=main["args"])
    try:
        pid = wait_health(r, cid)
        code, text = http(pid, "POST", "/v1/sandboxes", key=key, body=(
            '{"image": {"uri": "host"}, "entrypoint": ["sleep", "60"], "timeout": 60,'
            ' "resourceLimits": {"cpu": "1", "memory": "128Mi"}}'))
        check(code == 202, "a process sandbox: %d %s" % (code, text))
        sid = re.search(r'"id":\s*"([^"]+)"', text).group(1)
        code, text = http(pid, "POST", "/sandboxes/%s/proxy/44772/command" % sid, key=key,
                          body='{"command": "echo from-the-image; id -u"}')
        check(code == 200 and "from-the-image" in text and str(UID) in text,
              "a command through the router: %d %s" % (code, text))
        code, _ = http(pid, "DELETE", "/v1/sandboxes/" + sid, key=key)
        check(code == 204, "delete: %d" % code)
    finally:
        r.remove(cid)
    print("ok   sbx-full and sbx-execd of the image: a process sandbox ran a command")


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root (mmdebstrap, a container engine)")
        return SKIP
    bindir = os.path.dirname(os.path.abspath(sys.argv[1]))
    full = os.path.join(bindir, "sbx-full")
    ldd = subprocess.run(["ldd", full], capture_output=True, text=True).stdout
    if "libasan" in ldd or "libubsan" in ldd:
        print("SKIP: %s is a sanitizer build; the server image is made from a release build: "
              "ctest --test-dir build/release -R deploy/server-image" % full)
        return SKIP
    tmp = tempfile.mkdtemp(prefix="sbx-deploy-server-image-", dir="/var/tmp")
    try:
        tar = image(bindir, os.path.abspath(sys.argv[2]))
        ref = archive_checks(tar)
        in_engine(tar, ref, tmp)
    except Fail as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
