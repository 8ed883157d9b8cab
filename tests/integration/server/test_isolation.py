#!/usr/bin/env python3
"""What a server's native sandbox must not reach, tried from inside real sandboxes (issue 18):

- the host's device nodes: usable, never changeable (`chmod 0660 /dev/full` inside once changed
  the host's /dev/full);
- execd as PID 1: its memory, environment (the access token) and fds are closed to the
  sandbox's processes, and no host file is behind its stdout (a log file in the state dir was
  writable through /proc/1/fd/1 past every limit); its log and the entrypoint's output are a
  bounded ring served by GET /logs;
- a full /dev/shm in a small sandbox: the command fails, execd (PID 1) and the sandbox live.

Each check has a control showing the operation itself works where it should."""
import json
import os

from harness import Skip, check, main

CONFIG = 'providers = { supported = ["native"]; default = "native"; };\n'


def inside(s, sid, cmd, timeout=60):
    """(stdout lines, stderr lines, exit code or None) of a command through the router."""
    _, events = s.run(sid, cmd, timeout=timeout)
    out = [e["text"] for e in events if e["type"] == "stdout"]
    err = [e["text"] for e in events if e["type"] == "stderr"]
    code = 0
    for e in events:
        if e["type"] == "error":
            ev = e.get("error", {})
            code = int(ev.get("evalue", "1")) if str(ev.get("evalue", "")).isdigit() else 1
    return out, err, code


def execd_pid(s, sid):
    with open(os.path.join(s.state, "run", sid, "state.json")) as f:
        return json.load(f)["pid"]


def host_devices(s, sid):
    """Each attempt sets what is there already (mode, owner, times): EROFS where the boundary
    holds, harmless where a regression lets it through (the test must not break its host);
    the host's inodes are compared before and after all the same."""
    before = {n: os.stat("/dev/" + n) for n in ("null", "full", "zero", "tty")}
    script = ("chmod %o /dev/full; chmod %o /dev/null; chown %d:%d /dev/zero; "
              "touch -h -r /dev/tty /dev/tty; chmod %o /proc/self/fd/0; "
              "echo ok > /dev/null && echo wrote"
              % (before["full"].st_mode & 0o7777, before["null"].st_mode & 0o7777,
                 before["zero"].st_uid, before["zero"].st_gid, before["null"].st_mode & 0o7777))
    out, err, _ = inside(s, sid, script)
    after = {n: os.stat("/dev/" + n) for n in before}
    for n in before:
        b, a = before[n], after[n]
        if (b.st_mode, b.st_uid, b.st_gid, b.st_mtime_ns) != (a.st_mode, a.st_uid, a.st_gid,
                                                              a.st_mtime_ns):
            os.chown("/dev/" + n, b.st_uid, b.st_gid)  # put the host right before failing
            os.chmod("/dev/" + n, b.st_mode & 0o7777)
            check(False, "the host's /dev/%s changed from inside a sandbox" % n)
    check(out == ["wrote"], "the devices still work: %r" % out)
    refused = [x for x in err if "Read-only file system" in x]
    check(len(refused) == 5, "every change refused with EROFS: %r" % err)


def pid1_closed(s, sid):
    out, err, _ = inside(s, sid, "cat /proc/1/environ; cat /proc/1/mem; readlink -v /proc/1/fd/1; "
                                 "head -c 1048576 /dev/zero >> /proc/1/fd/1; "
                                 "readlink -v /proc/1/exe; cat /proc/self/environ >/dev/null && "
                                 "echo self-ok")
    check(out == ["self-ok"], "control: a process reads its own environ: %r %r" % (out, err))
    denied = [x for x in err if "Permission denied" in x]
    check(len(denied) == 5, "PID 1's environ, mem, fds, exe are closed: %r" % err)
    pid = execd_pid(s, sid)
    # From the host: what is behind execd's stdio is the sandbox's /dev/null, not a host file.
    for fd in (0, 1, 2):
        target = os.readlink("/proc/%d/fd/%d" % (pid, fd))
        check(target == "/dev/null", "execd's fd %d is %r" % (fd, target))
    check(not os.path.exists(os.path.join(s.state, "native-logs")), "no log dir on the host")
    with open("/proc/%d/environ" % pid, "rb") as f:
        environ = f.read()
    check(b"EXECD_ACCESS_TOKEN=" in environ, "control: the token's variable was there")
    token_bytes = environ.split(b"EXECD_ACCESS_TOKEN=", 1)[1].split(b"\0", 1)[0]
    check(token_bytes == b"", "the token is wiped from execd's environ block")


def logs(s):
    """The entrypoint's output goes to execd's ring: GET /logs (through the router) has its
    end, bounded, the start dropped."""
    ep = ["/bin/sh", "-c", "echo EP-BEGIN; head -c 2000000 /dev/zero | tr '\\0' y; echo; "
                           "echo EP-DONE; exec sleep 3600"]
    r = s.create(entrypoint=ep)
    check(r.status == 202, "create: %r" % r)
    sid = r.json()["id"]
    body = b""
    for _ in range(100):
        r = s.request("GET", "/sandboxes/%s/proxy/44772/logs" % sid)
        check(r.status == 200, "GET /logs: %r" % r)
        body = r.body
        if b"EP-DONE" in body:
            break
    check(b"EP-DONE" in body, "the entrypoint's output is in the log: %r" % body[-200:])
    check(len(body) <= 256 * 1024, "bounded: %d bytes" % len(body))
    check(b"EP-BEGIN" not in body, "the oldest output dropped first")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")


def shm_full(s):
    r = s.create(resourceLimits={"cpu": "1", "memory": "64Mi"})
    check(r.status == 202, "create with 64Mi: %r" % r)
    sid = r.json()["id"]
    out, _, _ = inside(s, sid, "df -k /dev/shm | tail -1 | awk '{print $2}'")
    check(out and int(out[0]) <= 32 * 1024, "/dev/shm is half the memory limit: %r" % out)
    out, err, _ = inside(s, sid, "dd if=/dev/zero of=/dev/shm/fill bs=1M count=200 2>&1 | "
                                 "grep -o 'No space left on device'; ls -s /dev/shm/fill")
    check(any("No space left" in x for x in out + err), "filling /dev/shm stops at its size: "
          "%r %r" % (out, err))
    # Memory with /dev/shm full: the hog dies, not execd.
    inside(s, sid, "tail /dev/zero", timeout=120)
    out, _, _ = inside(s, sid, "cat /proc/1/oom_score_adj; cat /proc/self/oom_score_adj; "
                               "echo alive")
    check(out == ["0", "500", "alive"], "execd survives, its children go first: %r" % out)
    got = s.request("GET", "/v1/sandboxes/" + sid).json()
    check(got["status"]["state"] == "Running", "the sandbox lives: %r" % got)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")


def test(new_server):
    s = new_server(config_text=CONFIG, tag="isolation")
    try:
        s.start()
    except Exception as e:  # noqa: BLE001 - the reason is in the log
        if "unknown provider `native`" in s.log():
            raise Skip("this build has no native provider")
        raise e
    r = s.create()
    if r.status != 202:
        raise Skip("the runtime cannot make sandboxes on this host: %r" % r)
    sid = r.json()["id"]
    host_devices(s, sid)
    pid1_closed(s, sid)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    logs(s)
    shm_full(s)
    check(s.stop() == 0, "clean stop")


if __name__ == "__main__":
    main(test)
