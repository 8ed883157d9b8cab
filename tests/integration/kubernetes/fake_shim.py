"""The container shim of the FAKE kubelet (fake_apiserver.py), the part containerd-shim plays.

`python3 fake_shim.py SPEC.json`, started by the fake kubelet in its own session with
stdout/stderr on the container's log file:

  1. joins the pod's network namespace (/run/netns/NAME, made by `ip netns add`);
  2. makes a private mount namespace and a root for the container: a tmpfs whose top-level
     entries are recursive binds of the host's, with the image directory's files laid over
     them (SPEC["image"]: image files win, what the image lacks is the host's), so a volume's mountPath that does not exist on
     the host (`/opt/sbx`, `/workspace`) is made inside that namespace only (a parent that does
     exist is replaced, in the namespace, by a tmpfs holding binds of its entries); each
     emptyDir / PVC host directory is bound at its mountPath (read-only when asked);
  3. forks the container process: chroot into that root, chdir workingDir, exec the command
     (an exec failure is written to SPEC["start_error"] and exits 128, as runc's StartError);
  4. waits for it and writes {"exitCode", "signal", "finishedAt"} to SPEC["exit_file"]
     (atomically), then exits. The shim ignores SIGTERM/SIGINT/SIGHUP, so it outlives the
     container and records how it ended even when the fake API server is down.

Standard library only (ctypes for setns/unshare/mount), no kubernetes import: it starts fast.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import stat
import sys
import time
from typing import Any, Optional

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def mount(src: Optional[str], dst: str, fstype: Optional[str], flags: int,
          data: Optional[str] = None) -> None:
    """mount(2)."""
    _check(_libc.mount(src.encode() if src else None, dst.encode(),
                       fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                       data.encode() if data else None), "mount %s on %s" % (src, dst))


def umount(path: str) -> None:
    """umount2(path, MNT_DETACH)."""
    _check(_libc.umount2(path.encode(), MNT_DETACH), "umount " + path)


def setns(path: str, nstype: int) -> None:
    """Join the namespace at `path` (this thread only for network namespaces)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, nstype), "setns " + path)
    finally:
        os.close(fd)


def _bind_entry(src: str, dst: str) -> None:
    """Recreate one directory entry `src` at `dst`: symlinks copied, the rest bound."""
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
        return
    if stat.S_ISDIR(st.st_mode):
        os.mkdir(dst)
    else:
        open(dst, "w").close()
    mount(src, dst, None, MS_BIND | MS_REC)


def build_root(root: str) -> None:
    """A tmpfs at `root` whose top-level entries mirror the host's /."""
    mount("tmpfs", root, "tmpfs", 0, "mode=755")
    for name in sorted(os.listdir("/")):
        try:
            _bind_entry("/" + name, os.path.join(root, name))
        except OSError:
            pass  # an entry that cannot be bound (a socket...) is left out


_WRITABLE: set[str] = set()


def make_writable(root: str, cur: str) -> None:
    """Make directory `cur` (under `root`) one whose entries can be added without touching the
    host: a tmpfs over it holding binds of what it had (done once per directory)."""
    if cur == root or cur in _WRITABLE:
        return
    stage = os.path.join(root, ".kfake-stage")
    os.mkdir(stage)
    mount(cur, stage, None, MS_BIND | MS_REC)
    mount("tmpfs", cur, "tmpfs", 0, "mode=755")
    for name in os.listdir(stage):
        try:
            _bind_entry(os.path.join(stage, name), os.path.join(cur, name))
        except OSError:
            pass
    umount(stage)
    os.rmdir(stage)
    _WRITABLE.add(cur)


def ensure_dir(root: str, path: str) -> str:
    """Make `path` (absolute, in the container) exist under `root`, touching nothing on the
    host: the first missing component's parent is replaced by a tmpfs that mirrors it."""
    cur = root
    for part in [p for p in path.split("/") if p and p != "."]:
        nxt = os.path.join(cur, part)
        if os.path.lexists(nxt):
            if os.path.islink(nxt):  # follow inside the container's root
                target = os.readlink(nxt)
                rel = target if target.startswith("/") else \
                    os.path.join(cur[len(root):] or "/", target)
                nxt = ensure_dir(root, os.path.normpath(rel))
            cur = nxt
            continue
        make_writable(root, cur)
        os.mkdir(nxt, 0o755)
        _WRITABLE.add(nxt)
        cur = nxt
    return cur


def overlay_image(root: str, image: str, rel: str = "") -> None:
    """Lay the image directory's files over the container's root (image files win; paths the
    image lacks stay the host's, so dynamically linked host tools keep working)."""
    src_dir = os.path.join(image, rel)
    for name in sorted(os.listdir(src_dir)):
        src = os.path.join(src_dir, name)
        dst_rel = os.path.join(rel, name)
        dst = os.path.join(root, dst_rel)
        if os.path.isdir(src) and not os.path.islink(src) and os.path.isdir(dst) and \
                not os.path.islink(dst):
            overlay_image(root, image, dst_rel)
            continue
        if os.path.lexists(dst) and not os.path.islink(dst) and \
                os.path.isdir(dst) == os.path.isdir(src) and not os.path.islink(src):
            mount(src, dst, None, MS_BIND | MS_REC)  # over the host's entry
            continue
        parent = os.path.dirname(dst)
        make_writable(root, parent)
        if os.path.lexists(dst):
            if os.path.isdir(dst) and not os.path.islink(dst):
                umount_all(dst)
                os.rmdir(dst)
            else:
                os.unlink(dst)
        _bind_entry(src, dst)


def umount_all(path: str) -> None:
    """Detach whatever is mounted at `path`."""
    while True:
        try:
            umount(path)
        except OSError:
            return


def write_json(path: str, obj: Any) -> None:
    """Atomic write (rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, path)


def now() -> str:
    """RFC 3339, seconds, UTC: how the API serves times."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def main(spec_path: str) -> int:
    """Run one container as described by the JSON spec (see the module docstring)."""
    with open(spec_path) as f:
        spec = json.load(f)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    root = spec["root"]
    try:
        setns(spec["netns"], CLONE_NEWNET)
        _check(_libc.unshare(CLONE_NEWNS), "unshare")
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        build_root(root)
        if spec.get("image"):
            overlay_image(root, spec["image"])
        for m in sorted(spec["mounts"], key=lambda m: m["path"].count("/")):
            dst = ensure_dir(root, m["path"])
            mount(m["source"], dst, None, MS_BIND | MS_REC)
            if m.get("readOnly"):
                mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        cwd = spec.get("cwd") or "/"
        ensure_dir(root, cwd)
    except OSError as e:
        write_json(spec["exit_file"], {"exitCode": 128, "finishedAt": now(),
                                       "startError": "failed to create containerd task: %s" % e})
        return 1
    pid = os.fork()
    if pid == 0:  # the container process
        try:
            for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
                signal.signal(s, signal.SIG_DFL)
            os.chroot(root)
            os.chdir(cwd)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            argv = spec["argv"]
            os.execvpe(argv[0], argv, spec["env"])
        except OSError as e:
            msg = ("failed to create containerd task: failed to create shim task: OCI runtime "
                   "create failed: runc create failed: unable to start container process: "
                   "exec: \"%s\": %s: unknown"
                   % (spec["argv"][0], ("stat %s: " % spec["argv"][0] if e.errno == 2 else "")
                      + (e.strerror or str(e)).lower()))
            try:
                write_json(spec["start_error"], {"message": msg})
            finally:
                os._exit(128)
        os._exit(128)
    write_json(spec["pid_file"], {"pid": pid, "startedAt": now()})
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    out: dict[str, Any] = {"finishedAt": now()}
    if os.WIFSIGNALED(status):
        out["signal"] = os.WTERMSIG(status)
        out["exitCode"] = 128 + os.WTERMSIG(status)
    else:
        out["exitCode"] = os.WEXITSTATUS(status)
    # the start error (exec failed) travels in its own file, written by the child
    try:
        with open(spec["start_error"]) as f:
            out["startError"] = json.load(f)["message"]
    except (OSError, ValueError):
        pass
    write_json(spec["exit_file"], out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
