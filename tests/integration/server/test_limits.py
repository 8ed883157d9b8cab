#!/usr/bin/env python3
"""Limits that protect the host (issue 18), on real native sandboxes:

- defaults: a create without resourceLimits gets limits.sandbox_memory (2Gi); every sandbox
  gets providers.native.pids (1024) processes at most;
- aggregate: providers.native.total_pids / total_memory cap all sandboxes together (the common
  parent cgroup), whatever each one's own limit allows;
- disk: a create is refused while the state dir's file system has less than min_free_disk
  free, with a message saying so;
- open files: past what the server's RLIMIT_NOFILE allows, creates are refused with a 429."""
import json
import os
import shutil
import subprocess
import tempfile
import time

from harness import Skip, check, main

# Fork up to N children that sleep, print how many the kernel allowed. The program goes
# through bash -c: newlines are written as \n inside a Python string that exec() decodes.
SPAWN = ("python3 -c \"exec('import os,time\\nn=0\\nwhile n < %d:\\n try:\\n  pid=os.fork()\\n"
         " except OSError:\\n  break\\n if pid==0:\\n  time.sleep(8)\\n  os._exit(0)\\n"
         " n+=1\\nprint(n)')\"")


def inside(s, sid, cmd, timeout=120):
    out, events = s.run(sid, cmd, timeout=timeout)
    return out, events[-1]


def cg_read(s, sid, names):
    """A value of the sandbox's memory cgroup, read from the host (its runtime record names
    the dir): the first of names that exists."""
    with open(os.path.join(s.state, "run", sid, "state.json")) as f:
        d = (json.load(f).get("cgroups") or {}).get("memory")
    for name in names:
        try:
            with open(os.path.join(d, name)) as f:
                return int(f.read().split()[0])
        except (OSError, TypeError, ValueError, IndexError):
            continue
    return None


def memory_limit(s, sid):
    return cg_read(s, sid, ("memory.limit_in_bytes", "memory.max"))


def cg_cleanup(parent):
    subprocess.run("find /sys/fs/cgroup -mindepth 1 -maxdepth 8 -depth -type d -name '%s' "
                   "-exec rmdir {} + 2>/dev/null" % parent, shell=True)


def defaults(new_server):
    parent = "sbx-test-limits-d-%d" % os.getpid()
    s = new_server(config_text='providers = { supported = ["native"]; default = "native";\n'
                               '  native = { cgroup_parent = "%s"; }; };\n' % parent, tag="lim-d")
    s.start()
    try:
        r = s.request("POST", "/v1/sandboxes", {"image": {"uri": "host"},
                                                 "entrypoint": ["sleep", "600"], "timeout": 600})
        if r.status != 202:
            raise Skip("the runtime cannot make sandboxes here: %r" % r)
        sid = r.json()["id"]
        check(memory_limit(s, sid) == 2 << 30, "a create without limits gets 2 GiB: %r"
              % memory_limit(s, sid))
        out, _ = inside(s, sid, SPAWN % 2000)
        check(out and 900 <= int(out[0]) < 1024, "at most 1024 processes by default: %r" % out)
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        check(s.stop() == 0, "clean stop")
    finally:
        s.kill9()
        s.gc_runtime()
        cg_cleanup(parent)


def aggregate(new_server):
    parent = "sbx-test-limits-a-%d" % os.getpid()
    s = new_server(config_text='providers = { supported = ["native"]; default = "native";\n'
                               '  native = { cgroup_parent = "%s"; pids = 80; total_pids = 100;\n'
                               '             total_memory = "300Mi"; netns_pool = 0; }; };\n'
                   % parent, tag="lim-a")
    s.start()
    try:
        ids = []
        for _ in range(3):
            r = s.create(resourceLimits={"cpu": "1", "memory": "256Mi"})
            check(r.status == 202, "create: %r" % r)
            ids.append(r.json()["id"])
        got = []
        for sid in ids:
            out, _ = inside(s, sid, SPAWN % 70)
            got.append(int(out[0]) if out else -1)
        check(got[0] == 70, "the first sandbox gets its 70 (its own cap is 80): %r" % got)
        check(sum(got) <= 100 and got[1] < 70, "all together stay under 100: %r" % got)
        for sid in ids:
            inside(s, sid, "pkill -f 'time.sleep' ; true")
        # memory: 200 MiB fit each sandbox's own 256 MiB, but not twice the 300 MiB total
        # b'x' * n writes every page (a zeroed bytearray would only map them, charging nothing)
        hold = "python3 -c \"b=b'x'*(200<<20); import time; print('held'); time.sleep(20)\""
        r = s.request("POST", "/sandboxes/%s/proxy/44772/command" % ids[0],
                      {"command": hold, "background": True})
        check(r.status == 200, "first hog started: %r" % r)
        for _ in range(200):  # until the first hog holds its 200 MiB
            if (cg_read(s, ids[0], ("memory.usage_in_bytes", "memory.current")) or 0) > 190 << 20:
                break
            time.sleep(0.05)
        out, last = inside(s, ids[1], "python3 -c \"b=b'x'*(200<<20); print('held')\"")
        second = out == ["held"] and last["type"] == "execution_complete"
        # b'[x]': the pattern matches the hog's command line, not this shell's own
        first, _ = inside(s, ids[0], "pgrep -f \"b'[x]'\" >/dev/null && echo running || true")
        # The kernel enforces the total with an OOM kill in the sandboxes' hierarchy: the
        # second hog fails, or the first one (then the larger) was killed to make room.
        check(not (second and first == ["running"]),
              "both 200 MiB hogs live under a 300 MiB total: %r %r" % (out, first))
        check(inside(s, ids[1], "echo alive")[0] == ["alive"], "and the sandbox lives on")
        check(s.stop() == 0, "clean stop")
    finally:
        s.kill9()
        s.gc_runtime()
        cg_cleanup(parent)


def disk(new_server):
    mnt = tempfile.mkdtemp(prefix="sbx-limits-disk-")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "sbx-test", mnt]).returncode:
        raise Skip("cannot mount a tmpfs")
    parent = "sbx-test-limits-k-%d" % os.getpid()
    state = os.path.join(mnt, "state")
    s = new_server(config_text='providers = { supported = ["native"]; default = "native";\n'
                               '  native = { cgroup_parent = "%s"; min_free_disk = "40Mi";\n'
                               '             netns_pool = 0; }; };\n' % parent,
                   tag="lim-k", state=state)
    try:
        s.start()
        filler = os.path.join(mnt, "filler")
        with open(filler, "wb") as f:
            f.write(b"\0" * (70 << 20))
        r = s.create()
        check(r.status == 429 and "min_free_disk" in r.json()["message"],
              "a create on a nearly full state dir is refused, saying why: %r" % r)
        os.unlink(filler)
        r = s.create()
        check(r.status == 202, "with room again it works: %r" % r)
        check(s.request("DELETE", "/v1/sandboxes/" + r.json()["id"]).status == 204, "delete")
        check(s.stop() == 0, "clean stop")
    finally:
        s.kill9()
        s.gc_runtime()
        subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(mnt, ignore_errors=True)
        cg_cleanup(parent)


def total_disk(new_server):
    """providers.native.total_disk: all writable layers on one capped file system, so a
    sandbox writing without end gets ENOSPC and the state dir's disk keeps its room."""
    mnt = tempfile.mkdtemp(prefix="sbx-limits-tdisk-")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m", "sbx-test", mnt]).returncode:
        raise Skip("cannot mount a tmpfs")
    parent = "sbx-test-limits-t-%d" % os.getpid()
    state = os.path.join(mnt, "state")
    s = new_server(config_text='providers = { supported = ["native"]; default = "native";\n'
                               '  native = { cgroup_parent = "%s"; total_disk = "200Mi";\n'
                               '             min_free_disk = "10Mi"; netns_pool = 0; }; };\n'
                   % parent, tag="lim-t", state=state)
    try:
        s.start()
        check(os.path.ismount(os.path.join(state, "upper")), "the layers' file system mounted")
        r = s.create(resourceLimits={"cpu": "1", "memory": "1Gi"})
        check(r.status == 202, "create: %r" % r)
        sid = r.json()["id"]
        out, last = inside(s, sid, "dd if=/dev/zero of=/root/big bs=1M count=400 2>&1; "
                                   "echo rc=$?")
        check(any("No space left" in o for o in out) and out[-1] != "rc=0",
              "writing 400 MiB under a 200 MiB total gets ENOSPC: %r" % out[-3:])
        used = shutil.disk_usage(mnt).used
        check(used < (260 << 20), "the state dir's disk kept its room: %d MiB used" %
              (used >> 20))
        out, _ = inside(s, sid, "rm /root/big; echo alive")
        check(out == ["alive"], "the sandbox (and its execd) still work: %r" % out)
        r2 = s.create(resourceLimits={"cpu": "1", "memory": "1Gi"})
        check(r2.status == 202, "another create: %r" % r2)
        out, _ = inside(s, r2.json()["id"], "dd if=/dev/zero of=/root/f bs=1M count=100 "
                                            "2>/dev/null; echo rc=$?")
        check(out == ["rc=0"], "room for the next sandbox once the first freed it: %r" % out)
        for x in (sid, r2.json()["id"]):
            check(s.request("DELETE", "/v1/sandboxes/" + x).status == 204, "delete")
        check(s.stop() == 0, "clean stop")
    finally:
        s.kill9()
        s.gc_runtime()
        subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(mnt, ignore_errors=True)
        cg_cleanup(parent)


def open_files(new_server):
    """An open-files limit too small for limits.max_sandboxes (the server cannot raise it: no
    CAP_SYS_RESOURCE): a warning at start naming both, and creates past what fits are refused
    with a 429 that names the limit, not failed half-way with EMFILE. Process provider: the
    cap is the server's, whatever the provider."""
    s = new_server(tag="nofile")
    s.wrapper = ["setpriv", "--bounding-set=-sys_resource", "prlimit", "--nofile=1060:1060", "--"]
    s.start()
    fit = 1060 - 1024  # one descriptor per sandbox
    check("open files limit (RLIMIT_NOFILE) is 1060" in s.log() and
          "beyond %d sandboxes" % fit in s.log(), "the warning at start: %s" % s.log()[-600:])
    ids = []
    try:
        for _ in range(fit):
            r = s.create()
            check(r.status == 202, "create within the limit: %r" % r)
            ids.append(r.json()["id"])
        r = s.create()
        msg = r.json().get("message", "") if r.status == 429 else ""
        check(r.status == 429 and r.json().get("code") == "SANDBOX::LIMIT_EXCEEDED" and
              "RLIMIT_NOFILE is 1060" in msg and "ulimit -Hn" in msg,
              "a create past the open-files limit: %r" % r)
        check(s.request("DELETE", "/v1/sandboxes/" + ids.pop()).status == 204, "delete one")
        r = s.create()
        check(r.status == 202, "a create fits again: %r" % r)
        ids.append(r.json()["id"])
    finally:
        for sid in ids:
            s.request("DELETE", "/v1/sandboxes/" + sid)
        check(s.stop() == 0, "clean stop")


def test(new_server):
    open_files(new_server)
    defaults(new_server)
    aggregate(new_server)
    disk(new_server)
    total_disk(new_server)


if __name__ == "__main__":
    main(test)
