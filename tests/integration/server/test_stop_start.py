#!/usr/bin/env python3
"""Stop is not delete, and find-or-create, on the local providers (process always, native when
this build and host can make native sandboxes; docker in tests/integration/docker): a file
written before a stop is there after start; a create with extensions.reuseKey returns the
existing sandbox for the same key and spec (starting it when stopped), a new one for another
spec or when the old one is dead; creates with one key run one at a time; a stopped sandbox
stays Stopped across a server restart; delete removes what stop kept.

Native only: the writable layer a stop keeps (<state>/upper/<id>, marked kept) survives `sbx gc`
and a kill -9 of the server in the middle of a start; a capped layer (upper_size) is kept too; a
pvc volume stays while a stopped sandbox still uses it; `upper = "tmpfs"` refuses stop with a
400 and leaves the sandbox running."""
import concurrent.futures
import os
import random
import signal
import subprocess
import time

from harness import Skip, check, main, wait_for

NATIVE = 'providers = { supported = ["native", "process"]; default = "native"; };\n'


def native_conf(settings):
    return ('providers = { supported = ["native"]; default = "native";\n'
            '  native = { %s }; };\n' % settings)


def run_ok(s, sid, cmd):
    out, events = s.run(sid, cmd)
    check(events[-1]["type"] == "execution_complete", "%r succeeded: %r" % (cmd, events))
    return out


def state(s, sid):
    return s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"]


def create(s, key, **kw):
    ext = {"reuseKey": key} if key else {}
    ext.update(kw.pop("ext", {}))
    r = s.create(extensions=ext, **kw)
    check(r.status == 202, "create (reuse key %r): %r" % (key, r))
    return r.json()["id"]


def stop_keeps_files(s, provider):
    sid = create(s, "agent:a1:main")
    run_ok(s, sid, "echo kept > $HOME/marker")
    r = s.request("POST", "/v1/sandboxes/%s/stop" % sid)
    check(r.status == 202, "stop: %r" % r)
    check(state(s, sid) == "Stopped", "Stopped after stop")
    r = s.request("GET", "/sandboxes/%s/proxy/44772/ping" % sid)
    check(r.status == 409, "a stopped sandbox refuses the router: %r" % r)
    if provider == "process":
        check(all(not pids for pids in s.sandbox_pids().values()), "no process left after stop")
    r = s.request("POST", "/v1/sandboxes/%s/stop" % sid)
    check(r.status == 409 and r.json()["code"] == "SANDBOX::SANDBOX_NOT_RUNNING",
          "stop twice: %r" % r)
    r = s.request("POST", "/v1/sandboxes/%s/start" % sid)
    check(r.status == 202 and state(s, sid) == "Running", "start: %r" % r)
    check(run_ok(s, sid, "cat $HOME/marker") == ["kept"], "the file survived stop/start")
    r = s.request("POST", "/v1/sandboxes/%s/start" % sid)
    check(r.status == 409 and r.json()["code"] == "SANDBOX::SANDBOX_NOT_STOPPED",
          "start a running sandbox: %r" % r)
    return sid


def find_or_create(s, sid):
    check(create(s, "agent:a1:main") == sid, "same key + spec while Running: the same sandbox")
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop")
    check(create(s, "agent:a1:main") == sid, "same key + spec while Stopped: started again")
    check(state(s, sid) == "Running", "reuse started it")
    check(run_ok(s, sid, "cat $HOME/marker") == ["kept"], "and it is the same filesystem")
    other = create(s, "agent:a1:main", env={"X": "1"})
    check(other != sid, "another spec under the same key: a new sandbox")
    check(create(s, "agent:a1:main", env={"X": "1"}) == other, "which is reused in turn")
    check(create(s, "agent:a1:main", metadata={"m": "x"}) == sid, "metadata is not spec")
    fresh = create(s, None)
    check(fresh not in (sid, other), "no reuse key: always a new sandbox")
    r = s.create(extensions={"reuseKey": "bad key!"})
    check(r.status == 400, "bad reuse key: %r" % r)
    return other


def dead_is_replaced(s, sid):
    """A sandbox whose workload died is never reused: find-or-create marks it Failed and makes
    a new one."""
    pids = s.sandbox_pids().get(sid, [])
    check(pids, "the sandbox has processes")
    for p in pids:
        os.kill(p, signal.SIGKILL)
    wait_for(lambda: not s.sandbox_pids().get(sid), "the sandbox's processes to die")
    new = create(s, "agent:a1:main")
    check(new != sid, "a dead sandbox is not reused")
    check(state(s, sid) == "Failed", "the dead one is Failed: %s" % state(s, sid))
    return new


def concurrent_same_key(s):
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        ids = list(pool.map(lambda _: create(s, "burst:1"), range(6)))
    check(len(set(ids)) == 1, "six concurrent creates with one key make one sandbox: %r" % ids)
    return ids[0]


def restart_keeps_stopped(s, sid):
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop")
    check(s.stop() == 0, "clean server stop")
    s.start()
    check(state(s, sid) == "Stopped", "Stopped after a server restart: %s" % state(s, sid))
    check(s.request("POST", "/v1/sandboxes/%s/start" % sid).status == 202, "start after restart")
    check(run_ok(s, sid, "cat $HOME/marker") == ["kept"], "files after restart + start")


def delete_all(s, provider):
    items = s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]
    some_stopped = False
    for x in items:
        if x["status"]["state"] == "Running" and not some_stopped:
            check(s.request("POST", "/v1/sandboxes/%s/stop" % x["id"]).status == 202, "stop")
            some_stopped = True
        check(s.request("DELETE", "/v1/sandboxes/" + x["id"]).status == 204, "delete %s" % x)
    if provider == "process":
        base = os.path.join(s.state, "sandboxes")
        check(not os.listdir(base), "delete removes the sandbox dirs: %r" % os.listdir(base))
    else:
        for x in items:
            s.wait_native_gone(x["id"])
        check(not layers(s), "delete removes the writable layers: %r" % layers(s))


def layers(s):
    """The writable layers on disk (not the templates of capped ones)."""
    base = os.path.join(s.state, "upper")
    return sorted(x for x in os.listdir(base) if not x.startswith("."))


def sbx_gc(s):
    r = subprocess.run([s.sbx, "gc", "--state-dir", s.state], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, "sbx gc: %s" % r.stderr)


def native_kept_layer(s):
    """The layer a stop keeps: marked, left alone by gc (the records live on a tmpfs, so gc at
    boot sees no record for it), and the next start runs on it."""
    sid = create(s, None)
    run_ok(s, sid, "echo gc-proof > /root/marker")
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop")
    layer = os.path.join(s.state, "upper", sid)
    check(os.path.exists(os.path.join(layer, "kept")), "the stopped sandbox's layer is kept")
    # it ran mounted volatile (no syncs); the stop synced it and cleared overlayfs's mark, with
    # this boot's id in the kept mark (docs/runtime.md "The writable layer")
    check(not os.path.exists(os.path.join(layer, "work/work/incompat/volatile")),
          "the stop settled the layer")
    with open(os.path.join(layer, "kept")) as f, open("/proc/sys/kernel/random/boot_id") as b:
        check(f.read() == b.read().strip(), "the kept mark names this boot")
    check(not os.path.exists(os.path.join(s.state, "run", sid)), "no runtime record while stopped")
    sbx_gc(s)
    check(os.path.isdir(os.path.join(layer, "upper")), "sbx gc leaves a kept layer alone")
    # kill -9 of the server during a start: after the restart the sandbox is Stopped (a
    # half-made start is undone) or Running (the start had finished), never without its files
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        fut = pool.submit(s.request, "POST", "/v1/sandboxes/%s/start" % sid)
        time.sleep(random.uniform(0.005, 0.08))
        s.kill9()
        try:
            fut.result()
        except OSError:
            pass
    s.start()
    now = state(s, sid)
    check(now in ("Stopped", "Running"), "after kill -9 during a start: %s" % now)
    if now == "Stopped":
        check(not os.path.exists(os.path.join(s.state, "run", sid)),
              "the half-made start is undone")
        check(s.request("POST", "/v1/sandboxes/%s/start" % sid).status == 202, "start")
    print("native: kill -9 during a start left the sandbox %s" % now)
    check(run_ok(s, sid, "cat /root/marker") == ["gc-proof"], "files after gc, kill -9, start")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    s.wait_native_gone(sid)
    check(sid not in layers(s), "delete removes the kept layer")


def native_pvc_kept(s):
    """A pvc made with deleteOnSandboxTermination by one sandbox and used by another: while the
    other one is stopped it is still a user, so deleting the maker does not remove the data."""
    vol = {"name": "shared", "mountPath": "/data",
           "pvc": {"claimName": "stopstart", "deleteOnSandboxTermination": True}}
    maker = s.create(volumes=[vol]).json()["id"]
    run_ok(s, maker, "echo shared-data > /data/f")
    user = s.create(volumes=[vol]).json()["id"]
    check(s.request("POST", "/v1/sandboxes/%s/stop" % user).status == 202, "stop the user")
    check(s.request("DELETE", "/v1/sandboxes/" + maker).status == 204, "delete the maker")
    s.wait_native_gone(maker)
    check(os.path.isdir(os.path.join(s.state, "volumes", "stopstart")),
          "the pvc stays while a stopped sandbox uses it")
    check(s.request("POST", "/v1/sandboxes/%s/start" % user).status == 202, "start the user")
    check(run_ok(s, user, "cat /data/f") == ["shared-data"], "the volume after start")
    check(s.request("DELETE", "/v1/sandboxes/" + user).status == 204, "delete the user")
    s.wait_native_gone(user)
    check(not os.path.exists(os.path.join(s.state, "volumes", "stopstart")),
          "the pvc goes with its last user")


def native_capped(new_server):
    s = new_server(config_text=native_conf('upper_size = "64Mi";'), tag="stopstart-capped")
    s.start()
    sid = create(s, None)
    run_ok(s, sid, "echo capped > /root/marker")
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop (capped)")
    check(s.request("POST", "/v1/sandboxes/%s/start" % sid).status == 202, "start (capped)")
    check(run_ok(s, sid, "cat /root/marker") == ["capped"], "a capped layer keeps its files")
    out = run_ok(s, sid, "df -k / | tail -1")
    check(int(out[0].split()[1]) < 64 * 1024, "still capped after start: %r" % out)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    s.wait_native_gone(sid)
    check(not layers(s), "no layer left: %r" % layers(s))
    check(s.stop() == 0, "clean stop (capped)")


def native_tmpfs_refuses(new_server):
    s = new_server(config_text=native_conf('upper = "tmpfs";'), tag="stopstart-tmpfs")
    s.start()
    sid = create(s, None)
    run_ok(s, sid, "echo ram > /root/marker")
    r = s.request("POST", "/v1/sandboxes/%s/stop" % sid)
    check(r.status == 400 and r.json()["code"] == "SANDBOX::API_NOT_SUPPORTED" and
          "tmpfs" in r.json()["message"], "a layer in RAM refuses stop: %r" % r)
    check(state(s, sid) == "Running", "and the sandbox keeps running")
    check(run_ok(s, sid, "cat /root/marker") == ["ram"], "with its files")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    check(s.stop() == 0, "clean stop (tmpfs)")


def scenario(s, provider):
    sid = stop_keeps_files(s, provider)
    find_or_create(s, sid)
    if provider == "process":
        dead_is_replaced(s, sid)
        sid = create(s, "agent:a1:main")
        run_ok(s, sid, "echo kept > $HOME/marker")
    concurrent_same_key(s)
    restart_keeps_stopped(s, sid)
    if provider == "native":
        native_kept_layer(s)
        native_pvc_kept(s)
    delete_all(s, provider)
    check(s.stop() == 0, "clean stop (sanitizers)")


def test(new_server):
    s = new_server(tag="stopstart")
    s.start()
    scenario(s, "process")
    n = new_server(config_text=NATIVE, tag="stopstart-native")
    try:
        n.start()
    except Exception as e:  # noqa: BLE001 - the reason is in the log
        if "unknown provider `native`" in n.log():
            print("native: skipped (this build has no runtime)")
            return
        raise e
    r = n.create()
    if r.status != 202:
        raise Skip("the runtime cannot make sandboxes on this host: %r" % r)
    check(n.request("DELETE", "/v1/sandboxes/" + r.json()["id"]).status == 204, "delete probe")
    try:
        scenario(n, "native")
        native_tmpfs_refuses(new_server)
        native_capped(new_server)
    finally:
        n.kill9()
        n.gc_runtime()


if __name__ == "__main__":
    main(test)
