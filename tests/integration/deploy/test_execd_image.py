#!/usr/bin/python3
"""The execd image of deploy/images/build.sh (`sbx-execd:VERSION`), for real:

  the archive: one layer holding exactly /sbx-execd (root-owned, 0755, the very bytes of the
  static binary given, no program interpreter), tagged sbx-execd:VERSION; unpacked, the binary
  runs `--install` as the kubernetes provider's init container does; then the tar is loaded
  into a private dockerd (or podman) started and stopped by PID by this test
  (tests/integration/docker/engine.py), and a container of it runs
  `/sbx-execd --install /x/sbx-execd` into a bind-mounted dir, which must hold the same bytes,
  mode 0755, and run. Without an engine here the container part is said to be skipped.

argv: SBX_EXECD_STATIC. Root (a container engine)."""
import hashlib
import os
import re
import shutil
import stat
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


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def version():
    with open(os.path.join(images.TOP, "CMakeLists.txt")) as f:
        return re.search(r"project\(sbx VERSION ([0-9.]+)", f.read()).group(1)


def archive_checks(tar, execd, tmp):
    manifest, config, names = images.read(tar)
    tag = "sbx-execd:" + version()
    check(manifest["RepoTags"] == [tag], "tagged %s: %r" % (tag, manifest["RepoTags"]))
    check(sorted(n.lstrip("./") for n in names if n not in (".", "./")) == ["sbx-execd"],
          "the layer holds only /sbx-execd: %r" % names)
    check(config["os"] == "linux" and "Entrypoint" not in config["config"],
          "a plain linux image without an entrypoint: %r" % config["config"])
    root = images.unpack(tar, os.path.join(tmp, "root"))
    f = os.path.join(root, "sbx-execd")
    st = os.stat(f)
    check(stat.S_IMODE(st.st_mode) == 0o755 and st.st_uid == 0 and st.st_gid == 0,
          "/sbx-execd is root's, 0755: %o %d:%d" % (st.st_mode, st.st_uid, st.st_gid))
    check(sha(f) == sha(execd), "/sbx-execd is the given binary")
    elf = subprocess.run(["readelf", "-l", f], capture_output=True, text=True).stdout
    check("program interpreter" not in elf, "/sbx-execd is static (no PT_INTERP)")
    dest = os.path.join(tmp, "unpacked-install", "sbx-execd")
    os.makedirs(os.path.dirname(dest))
    p = subprocess.run([f, "--install", dest], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, "the unpacked binary installs itself: %s" % p.stderr)
    check(sha(dest) == sha(execd) and stat.S_IMODE(os.stat(dest).st_mode) == 0o755,
          "--install wrote the same bytes, 0755")
    print("ok   the archive: %s, one layer with only /sbx-execd (static, root 0755); "
          "--install from the unpacked layer" % tag)
    return tag


def in_engine(tar, tag, execd, tmp):
    images.in_first_engine(tmp, lambda eng, e: run_install(eng, e, tar, tag, execd, tmp),
                           "docker part")


def run_install(eng, e, tar, tag, execd, tmp):
    images.load(eng, e, tar)
    ref = "localhost/" + tag if e.kind == "podman" else tag
    status, info = eng.api(e.socket, "GET", "/images/%s/json" % ref)
    check(status == 200, "the loaded image is there as %s: %d %r" % (ref, status, info))
    x = os.path.join(tmp, "x")
    os.makedirs(x)
    body = {"Image": ref, "Cmd": ["/sbx-execd", "--install", "/x/sbx-execd"],
            "HostConfig": {"Binds": [x + ":/x"], "NetworkMode": "none",
                           "CgroupParent": e.cgroup_parent}}
    status, out = eng.api(e.socket, "POST", "/containers/create?name=sbx-execd-install-%d"
                          % os.getpid(), body)
    check(status == 201, "create the container: %d %r" % (status, out))
    cid = out["Id"]
    try:
        status, out = eng.api(e.socket, "POST", "/containers/%s/start" % cid)
        check(status == 204, "start: %d %r" % (status, out))
        status, out = eng.api(e.socket, "POST", "/containers/%s/wait" % cid, timeout=60)
        check(status == 200, "wait: %d %r" % (status, out))
        _, logs = eng.api(e.socket, "GET", "/containers/%s/logs?stdout=1&stderr=1" % cid)
        check(out.get("StatusCode") == 0, "`/sbx-execd --install /x/sbx-execd` in the "
              "container exits 0: %r %r" % (out, logs))
    finally:
        eng.api(e.socket, "DELETE", "/containers/%s?force=1" % cid)
    dest = os.path.join(x, "sbx-execd")
    check(os.path.isfile(dest), "the container installed /x/sbx-execd")
    check(sha(dest) == sha(execd) and stat.S_IMODE(os.stat(dest).st_mode) == 0o755,
          "the installed copy is the binary, 0755")
    p = subprocess.run([dest, "--help"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and "--install" in p.stdout + p.stderr,
          "the installed copy runs: %d %s" % (p.returncode, p.stderr))
    print("ok   %s: the image loaded, `/sbx-execd --install /x/sbx-execd` in a container wrote "
          "the binary (same bytes, 0755) and it runs" % e.kind)


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root (a container engine)")
        return SKIP
    execd = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="sbx-deploy-execd-image-", dir="/var/tmp")
    try:
        t0 = time.time()
        tar = images.build("execd", os.path.dirname(execd), tmp)
        print("ok   build.sh execd: %s (%d KiB, %.1f s)" % (tar, os.path.getsize(tar) >> 10,
                                                            time.time() - t0))
        if os.path.basename(execd) != "sbx-execd-static" and \
                os.path.exists(os.path.join(os.path.dirname(execd), "sbx-execd-static")):
            execd = os.path.join(os.path.dirname(execd), "sbx-execd-static")
        tag = archive_checks(tar, execd, tmp)
        in_engine(tar, tag, execd, tmp)
    except Fail as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
