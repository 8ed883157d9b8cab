#!/usr/bin/env python3
"""The `docker` provider against a real engine (a private dockerd or podman service, started and
stopped by PID; images from a local docker-registry): through the server API, create -> Running
-> commands and another port through the router (no port published) -> limits seen inside ->
pause/resume -> kill -9 of the server and re-adoption -> stop/start (Stopped keeps the
container and its files, also across a server restart; find-or-create starts a stopped one) ->
delete removes the container; registry
auth from image.auth (never echoed or logged); bad input; the engine going down (clear 5xx,
server alive, sandboxes kept) and coming back; `reach = "address"` on a bridge network
(dockerd); the provider-level probe (stop/start keeps the filesystem, status classes); and
snapshots across providers (docker -> docker, docker -> native, native -> docker).

  test_docker.py SBX ENGINE PROBE     ENGINE: dockerd or podman (the other is the fallback)
Skips (77) only when neither engine can start."""
import concurrent.futures
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))

import busybox_image  # noqa: E402
import engine as eng  # noqa: E402
from harness import check, host_address, main, remove_bridge, wait_for  # noqa: E402

PASSWORD = "s3cret-Pass-%d" % os.getpid()


# Waits up to 5 s for the entrypoint's /tmp/ep: execd forks the entrypoint after it is ready.
WAIT_EP = "for i in $(seq 50); do [ -s /tmp/ep ] && break; sleep 0.1; done; "

def config(e, extra=""):
    return ('providers = { supported = ["docker", "process"]; default = "docker";\n'
            '  docker = { socket = "%s"; network = "none"; cgroup_parent = "%s";\n'
            '             stop_timeout_s = 5; %s }; };\n' % (e.socket, e.cgroup_parent, extra))


def inside(s, sid, cmd):
    out, events = s.run(sid, cmd)
    check(events[-1]["type"] == "execution_complete", "%r succeeded: %r" % (cmd, events[-3:]))
    return out


def container(e, sid):
    status, info = eng.api(e.socket, "GET", "/containers/sbx-%s/json" % sid)
    return info if status == 200 else None


def create(s, uri, **kw):
    body = {"image": {"uri": uri}, "entrypoint": ["sh", "-c", "echo started > /tmp/ep; "
                                                    "exec sleep 3600"],
            "resourceLimits": {"cpu": "500m", "memory": "128Mi"}, "timeout": 600}
    body.update(kw)
    return s.request("POST", "/v1/sandboxes", body, timeout=180)


def cgroup_value(s, sid, v1, v2):
    out = inside(s, sid, "cat /sys/fs/cgroup/%s 2>/dev/null || cat /sys/fs/cgroup/%s" % (v1, v2))
    return " ".join(out)


def lifecycle(s, e, image):
    r = create(s, image)
    check(r.status == 202 and r.json()["status"]["state"] == "Running", "create: %r" % r)
    sid = r.json()["id"]
    check(r.json()["provider"] == "docker", "default provider is docker")
    info = container(e, sid)
    check(info is not None, "container sbx-<id> exists")
    labels = info["Config"]["Labels"]
    check(labels.get("io.sbx.sandbox-id") == sid and labels.get("io.sbx.state-dir") == s.state,
          "labels record the sandbox and the server: %r" % labels)
    mounts = [m for m in info["Mounts"] if m["Destination"] == "/.sbx/bin/sbx-execd"]
    check(len(mounts) == 1 and mounts[0]["Type"] == "bind" and not mounts[0]["RW"],
          "execd bound read-only: %r" % info["Mounts"])
    check(not info["HostConfig"].get("PortBindings"), "no port published")

    # execd is PID 1, the entrypoint ran, the token is nowhere in the commands' environment
    # (the entrypoint starts once execd is ready, so its file may be a moment late)
    out = inside(s, sid, WAIT_EP + "tr '\\0' ' ' < /proc/1/cmdline; echo; hostname; cat /tmp/ep; "
                         "env | grep -c TOKEN; grep NoNewPrivs /proc/self/status")
    check(out[0].startswith("/.sbx/bin/sbx-execd --listen 127.0.0.1:44772"), "PID 1: %r" % out)
    check(out[1] == sid and out[2] == "started", "hostname and entrypoint: %r" % out)
    check(out[3] == "0", "no token in the environment: %r" % out)
    check(out[4].split() == ["NoNewPrivs:", "1"], "no_new_privs: %r" % out)
    cap = int(inside(s, sid, "grep CapEff /proc/self/status")[0].split()[1], 16)
    check(not cap & (1 << 13), "CAP_NET_RAW dropped: %x" % cap)
    _, events = s.run(sid, "echo x > /.sbx/bin/sbx-execd")
    check(events[-1]["type"] == "error", "execd is read-only inside: %r" % events[-2:])

    # limits, seen from inside
    mem = cgroup_value(s, sid, "memory/memory.limit_in_bytes", "memory.max")
    check(mem == str(128 << 20), "memory limit: %r" % mem)
    cpu = cgroup_value(s, sid, "cpu/cpu.cfs_quota_us", "cpu.max")
    check(cpu.split()[0] == "50000", "cpu quota 500m: %r" % cpu)
    pids = cgroup_value(s, sid, "pids/pids.max", "pids.max")
    check(pids == "4096", "pids limit: %r" % pids)
    _, events = s.run(sid, "tail /dev/zero", timeout=120)
    check(events[-1]["type"] == "error", "a memory bomb is killed: %r" % events[-2:])
    check(inside(s, sid, "echo alive") == ["alive"], "the sandbox survives its OOM")

    # another port through the router: a server on the container's loopback
    inside(s, sid, "mkdir -p /tmp/www && echo hello-from-8080 > /tmp/www/index.html && "
                   "(httpd -f -p 127.0.0.1:8080 -h /tmp/www </dev/null >/dev/null 2>&1 &)")
    wait_for(lambda: s.request("GET", "/sandboxes/%s/proxy/8080/index.html" % sid).status == 200,
             "httpd on 8080")
    r = s.request("GET", "/sandboxes/%s/proxy/8080/index.html" % sid)
    check(r.body == b"hello-from-8080\n", "port 8080 through the router: %r" % r)

    # pause / resume: the engine's freezer
    check(s.request("POST", "/v1/sandboxes/%s/pause" % sid).status == 202, "pause")
    check(container(e, sid)["State"]["Paused"], "the container is paused")
    check(s.request("GET", "/sandboxes/%s/proxy/44772/ping" % sid).status == 409,
          "a paused sandbox refuses the router")
    check(s.request("POST", "/v1/sandboxes/%s/resume" % sid).status == 202, "resume")
    check(inside(s, sid, "echo back") == ["back"], "commands after resume")
    print("ok lifecycle, limits, router, pause/resume")
    return sid


def restart(s, e, sid):
    """kill -9 of the server: the container runs on; the restart re-adopts it (running and
    paused ones), a container removed behind its back is SANDBOX_LOST."""
    r = create(s, e.image)
    paused = r.json()["id"]
    check(s.request("POST", "/v1/sandboxes/%s/pause" % paused).status == 202, "pause")
    r = create(s, e.image)
    lost = r.json()["id"]
    s.kill9()
    eng.api(e.socket, "DELETE", "/containers/sbx-%s?force=1" % lost)
    check(container(e, sid)["State"]["Running"], "the container outlives the server")
    s.start()
    got = {x["id"]: x["status"] for x in
           s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]}
    check(got[sid]["state"] == "Running", "re-adopted: %r" % got[sid])
    check(got[paused]["state"] == "Paused", "re-adopted paused: %r" % got[paused])
    check(got[lost]["state"] == "Failed" and got[lost]["reason"] == "SANDBOX_LOST",
          "lost: %r" % got[lost])
    check(inside(s, sid, "cat /tmp/ep") == ["started"], "answers after the restart")
    check(s.request("POST", "/v1/sandboxes/%s/resume" % paused).status == 202, "resume")
    check(inside(s, paused, "echo p") == ["p"], "the paused one answers after resume")
    for x in (paused, lost):
        check(s.request("DELETE", "/v1/sandboxes/" + x).status == 204, "delete")
    check(container(e, paused) is None, "delete removed the container")
    print("ok kill -9 and restart re-adopts")


def state(s, sid):
    st = s.request("GET", "/v1/sandboxes/" + sid).json()["status"]
    return st["state"]


def stop_start(s, e):
    """Stop keeps the container and its filesystem (Stopped; the router refuses it), start runs
    the launcher again; stop works from Paused too; find-or-create starts a stopped sandbox of
    the same key and spec; a stopped container comes back Stopped (not Paused) after a kill -9
    of the server; delete removes it."""
    key = {"reuseKey": "docker:stop-start"}
    r = create(s, e.image, extensions=key)
    check(r.status == 202, "create: %r" % r)
    sid = r.json()["id"]
    inside(s, sid, "echo kept > /kept-marker; rm /tmp/ep")
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop")
    check(state(s, sid) == "Stopped", "Stopped after stop")
    info = container(e, sid)
    check(info is not None and not info["State"]["Running"], "the container is kept, stopped")
    check(s.request("GET", "/sandboxes/%s/proxy/44772/ping" % sid).status == 409,
          "a stopped sandbox refuses the router")
    r = s.request("POST", "/v1/sandboxes/%s/stop" % sid)
    check(r.status == 409 and r.json()["code"] == "SANDBOX::SANDBOX_NOT_RUNNING",
          "stop twice: %r" % r)
    r = s.request("POST", "/v1/sandboxes/%s/resume" % sid)
    check(r.status == 409, "resume is not start: %r" % r)
    check(s.request("POST", "/v1/sandboxes/%s/start" % sid).status == 202, "start")
    check(state(s, sid) == "Running", "Running after start")
    check(inside(s, sid, WAIT_EP + "cat /kept-marker; cat /tmp/ep") == ["kept", "started"],
          "the files survived and the entrypoint ran again")
    r = s.request("POST", "/v1/sandboxes/%s/start" % sid)
    check(r.status == 409 and r.json()["code"] == "SANDBOX::SANDBOX_NOT_STOPPED",
          "start a running sandbox: %r" % r)
    # from Paused: the frozen container is thawed and stopped
    check(s.request("POST", "/v1/sandboxes/%s/pause" % sid).status == 202, "pause")
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop a paused one")
    check(state(s, sid) == "Stopped", "Stopped from Paused")
    r = create(s, e.image, extensions=key)
    check(r.status == 202 and r.json()["id"] == sid, "find-or-create reuses it: %r" % r)
    check(state(s, sid) == "Running", "and started it")
    check(inside(s, sid, "cat /kept-marker") == ["kept"], "the same filesystem")
    # a server restart with the container stopped
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop")
    s.kill9()
    s.start()
    got = s.request("GET", "/v1/sandboxes/" + sid).json()["status"]
    check(got["state"] == "Stopped", "a stopped container is re-adopted Stopped: %r" % got)
    check(s.request("POST", "/v1/sandboxes/%s/start" % sid).status == 202, "start after restart")
    check(inside(s, sid, "cat /kept-marker") == ["kept"], "files after restart + start")
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop")
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete a stopped one")
    check(container(e, sid) is None, "delete removed the stopped container")
    print("ok stop/start")


def kill_mid_create(s, e, keep):
    """kill -9 during a burst of creates: after the restart every sandbox is Running (and
    answers) or Failed, every container of this server belongs to a listed sandbox, and
    deleting the sandboxes leaves no container."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        futs = [pool.submit(create, s, e.image) for _ in range(6)]
        time.sleep(random.uniform(0.05, 0.6))
        s.kill9()
        for f in futs:
            try:
                f.result()
            except OSError:
                pass
    s.start()
    time.sleep(1)  # a create the daemon was still working on when the server died lands now
    items = s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]
    states = {x["id"]: x["status"]["state"] for x in items if x["id"] != keep}
    check(set(states.values()) <= {"Running", "Failed"}, "nothing transient: %r" % states)
    for sid, state in states.items():
        if state == "Running":
            check(inside(s, sid, "echo up") == ["up"], "%s answers" % sid)
    owned = {c["Labels"]["io.sbx.sandbox-id"] for c in e.containers("io.sbx.state-dir=" + s.state)}
    check(owned <= set(states) | {keep},
          "containers without a sandbox: %r" % (owned - set(states)))
    for sid in states:
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    left = e.containers("io.sbx.state-dir=" + s.state)
    check([c["Labels"]["io.sbx.sandbox-id"] for c in left] == [keep],
          "containers left: %r" % [c["Names"] for c in left])
    print("ok kill -9 during creates (%d running, %d failed)" % (
        list(states.values()).count("Running"), list(states.values()).count("Failed")))


def bad_input(s, e, setup):
    image = setup.image
    reg = image.split("/")[0]
    r = create(s, reg + "/sbx-test/no-such:1")
    check(r.status == 400 and "no-such" in r.json()["message"],
          "an image the registry lacks is a clear 400: %r" % r)
    r = create(s, "bad image name")
    check(r.status == 400, "a malformed reference is a 400: %r" % r)
    r = create(s, image, resourceLimits={"cpu": "lots", "memory": "1Gi"})
    check(r.status == 400 and "cpu" in r.json()["message"], "bad cpu: %r" % r)
    # (credentialProxy itself works on docker: docker/credproxy-*)
    r = create(s, image, credentialProxy={"enabled": True})
    check(r.status == 400 and r.json()["code"] == "SANDBOX::INVALID_PARAMETER" and
          "networkPolicy" in r.json()["message"],
          "credentialProxy without a networkPolicy refused, not ignored: %r" % r)
    nosh = setup.registry.push_busybox(tag="nosh", shell=False)
    r = create(s, nosh)
    check(r.status in (400, 500) and "/bin/sh" in r.json()["message"],
          "an image without /bin/sh cannot run the launcher, and says so: %r" % r)
    r = create(s, image, entrypoint=["/no/such/binary"])
    check(r.status == 202, "a missing entrypoint binary still leaves execd up: %r" % r)
    check(s.request("DELETE", "/v1/sandboxes/" + r.json()["id"]).status == 204, "delete")
    failed = [x for x in s.request("GET", "/v1/sandboxes?pageSize=200").json()["items"]
              if x["status"]["state"] == "Failed"]
    for x in failed:
        s.request("DELETE", "/v1/sandboxes/" + x["id"])
    left = e.containers("io.sbx.state-dir=" + s.state)
    check(len(left) == 1, "failed creates leave no container: %r" % [c["Names"] for c in left])
    print("ok bad input")


def missing_execd(new_server, e):
    """A missing execd is a clear error before the engine is asked (whose legacy binds would
    create the missing path as a directory on the host)."""
    path = "/nonexistent-sbx-%d/sbx-execd" % os.getpid()
    s = new_server(config_text=config(e, 'execd = "%s";' % path), tag="noexecd")
    s.start()
    r = create(s, e.image)
    check(r.status == 500 and path in r.json()["message"], "missing execd: %r" % r)
    check(not os.path.exists(os.path.dirname(path)), "nothing made on the host")
    check(s.stop() == 0, "clean stop")
    print("ok missing execd")


def registry_auth(s, e, setup):
    """image.auth reaches the engine's pull as X-Registry-Auth; it is never shown or logged."""
    if not shutil_which("htpasswd"):
        print("note: htpasswd missing, registry auth not checked")
        return
    authreg = eng.Registry(os.path.join(setup.tmp, "authreg"))
    htpasswd = os.path.join(setup.tmp, "htpasswd")
    subprocess.run(["htpasswd", "-Bbc", htpasswd, "alice", PASSWORD], check=True,
                   capture_output=True)
    authreg.extra = "auth:\n  htpasswd:\n    realm: sbx-test\n    path: %s\n" % htpasswd
    authreg.start()
    try:
        ref = authreg.push_busybox(creds="alice:" + PASSWORD)
        if e.kind == "podman":
            e.registry_ports.append(authreg.port)
            e.restart()
        r = create(s, ref)
        check(r.status >= 500 and ("auth" in r.json()["message"].lower()
                                   or "unauthorized" in r.json()["message"].lower()),
              "no credentials: %r" % r)
        r = create(s, ref, image={"uri": ref, "auth": {"username": "alice",
                                                        "password": PASSWORD}})
        check(r.status == 202, "pull with image.auth: %r" % r)
        sid = r.json()["id"]
        got = s.request("GET", "/v1/sandboxes/" + sid)
        check(PASSWORD.encode() not in got.body and got.json()["image"] == {"uri": ref},
              "image.auth is not shown: %r" % got)
        check(PASSWORD not in s.log_all(), "the password is not in the server log")
        with open(os.path.join(s.state, "sbx.db"), "rb") as f:
            check(PASSWORD.encode() not in f.read(), "nor in the store")
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    finally:
        authreg.stop()
    print("ok registry auth")


def engine_down(s, e, sid):
    """The engine stops: the server stays up and says so clearly; the sandbox is not declared
    lost by a restart of the server while the engine is away; once the engine is back the
    stopped container is found dead and delete removes it."""
    e.down()
    r = create(s, e.image)
    check(r.status == 500 and "docker: cannot reach %s" % e.socket in r.json()["message"],
          "create with the engine down: %r" % r)
    check(set(r.json()) >= {"code", "message"}, "{code, message}: %r" % r)
    r = s.request("POST", "/v1/sandboxes/%s/pause" % sid)
    check(r.status == 503 and "cannot reach" in r.json()["message"], "pause: %r" % r)
    check(s.request("GET", "/health", key=False).status == 200, "the server is alive")
    s.kill9()
    s.start()
    got = s.request("GET", "/v1/sandboxes/" + sid).json()
    check(got["status"]["state"] == "Running", "kept while the engine is down: %r" % got)
    r = s.request("DELETE", "/v1/sandboxes/" + sid)
    check(r.status == 503, "delete with the engine down: %r" % r)
    e.restart()
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete after it is back")
    check(container(e, sid) is None, "the container is removed")
    r = create(s, e.image)
    check(r.status == 202, "creates work again: %r" % r)
    check(s.request("DELETE", "/v1/sandboxes/" + r.json()["id"]).status == 204, "delete")
    print("ok engine down and back")


def reach_address(new_server, e):
    """A remote-style setup: execd on the container's network, the router connects to the
    container's address. Needs a network the host can route to: a bridge made by dockerd."""
    if e.kind != "dockerd":
        return
    bridge = "sbxt%d" % (os.getpid() % 100000)
    status, body = eng.api(e.socket, "POST", "/networks/create", {
        "Name": "sbx-test-net", "Driver": "bridge",
        "Options": {"com.docker.network.bridge.name": bridge}})
    check(status == 201, "create a bridge network: %r" % body)
    try:
        s = new_server(config_text=config(e, 'reach = "address";').replace(
            'network = "none"', 'network = "sbx-test-net"'), tag="addr")
        s.start()
        r = create(s, e.image)
        check(r.status == 202, "create (address): %r" % r)
        sid = r.json()["id"]
        info = container(e, sid)
        ip = info["NetworkSettings"]["Networks"]["sbx-test-net"]["IPAddress"]
        check(ip, "the container has an address")
        out = inside(s, sid, "tr '\\0' ' ' < /proc/1/cmdline")
        check("--listen 0.0.0.0:44772" in out[0], "execd on all interfaces: %r" % out)
        # networkPolicy needs the container's namespace on this host
        r = create(s, e.image, networkPolicy={"defaultAction": "deny"})
        check(r.status == 400 and r.json()["code"] == "SANDBOX::API_NOT_SUPPORTED" and
              "reach" in r.json()["message"], "a remote-style engine refuses networkPolicy: %r" % r)
        check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        check(s.stop() == 0, "clean stop")
    finally:
        e.remove_all()
        eng.api(e.socket, "DELETE", "/networks/sbx-test-net")
    check(not os.path.exists("/sys/class/net/" + bridge), "the bridge is gone")
    print("ok reach = address")


def foreign_pidns(new_server, setup):
    """The netns boundary: a daemon whose container pids are not this host's (podman in a pid
    namespace of its own). The pid it reports is some unrelated host process (or none); the
    provider must refuse to enter its namespace, and say why, instead of connecting the router
    to whatever has that pid here."""
    if not shutil_which("podman") or not shutil_which("unshare"):
        print("note: podman or unshare missing, foreign pid namespace not checked")
        return
    e = eng.Engine("podman", setup.tmp, pidns=True, name="podman-pidns")
    try:
        e.start([setup.registry.port])
    except eng.EngineError as ex:
        print("note: podman in a pid namespace did not start (%s): not checked" % ex)
        e.stop()
        return
    try:
        s = new_server(config_text=config(e), tag="pidns")
        s.start()
        r = create(s, setup.image)
        check(r.status >= 500 and "is not on this host" in r.json()["message"] and
              'reach = \"address\"' in r.json()["message"],
              "a pid of another pid namespace is never entered: %r" % r)
        check(not e.containers(), "the failed create removed its container")
        check(s.stop() == 0, "clean stop")
    finally:
        e.stop()
    print("ok a foreign pid namespace is refused")


def probe(e, image, probe_bin, sbx, tmp):
    d = os.path.dirname(os.path.abspath(sbx))
    execd = os.path.join(d, "sbx-execd-static")
    if not os.access(execd, os.X_OK):
        execd = os.path.join(d, "sbx-execd")
    state = os.path.join(tmp, "probe-state")
    os.makedirs(state, exist_ok=True)
    r = subprocess.run([probe_bin, e.socket, image, e.cgroup_parent, execd, state],
                       capture_output=True, text=True, timeout=300)
    print(r.stdout, end="")
    check(r.returncode == 0, "docker_probe: %s" % r.stderr)


def shutil_which(name):
    import shutil
    return shutil.which(name)


def isolation(new_server, e):
    """network = "sbx" (the default with a local engine): containers start on the engine's
    `none` network and the server attaches them to sbx's bridge, isolated as native sandboxes
    are: the host's listener is out of reach (but for the address the operator allowed), and
    containers do not reach each other; each still serves itself, and the router reaches all."""
    import socket
    import threading
    host = host_address()
    if not host:
        print("isolation part skipped: no non-loopback address on this host")
        return
    tag = os.getpid() % 200 + 20
    bridge, subnet, gateway = "sbxdk%d" % tag, "10.232.%d.0/24" % tag, "10.232.%d.1" % tag
    lis = socket.socket()
    lis.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lis.bind(("0.0.0.0", 0))
    lis.listen(16)
    hits = []

    def serve():
        while True:
            try:
                c, _ = lis.accept()
            except OSError:
                return
            hits.append(1)
            c.sendall(b"host-secret\n")
            c.close()
    threading.Thread(target=serve, daemon=True).start()
    port = lis.getsockname()[1]
    s = new_server(config_text=(
        'providers = { supported = ["docker"]; default = "docker";\n'
        '  docker = { socket = "%s"; cgroup_parent = "%s"; stop_timeout_s = 5;\n'
        '             bridge = "%s"; subnet = "%s"; network_allow = ["%s"]; }; };\n'
        % (e.socket, e.cgroup_parent, bridge, subnet, host)), tag="docker-iso")
    try:
        s.start()
        ids = {}
        for name in ("a", "b"):
            r = create(s, e.image, entrypoint=["sh", "-c", "echo started > /tmp/ep; exec nc -ll "
                                               "-p 7070 -e echo from-%s" % name])
            check(r.status == 202, "create %s: %r" % (name, r))
            ids[name] = r.json()["id"]
        addr = {}
        for name, sid in ids.items():
            out = inside(s, sid, "ip -4 -o addr show eth0 | awk '{print $4}'")
            addr[name] = out[0].split("/")[0]
            check(addr[name].startswith("10.232.%d." % tag), "%s on sbx's bridge: %r" %
                  (name, out))

        def nc(sid, a, p):
            return " ".join(inside(s, sid, WAIT_EP + "nc -w 2 %s %d 2>&1; true" % (a, p)))
        for name, sid in ids.items():
            check("from-" + name in nc(sid, "127.0.0.1", 7070), "%s serves itself" % name)
        check("from-b" not in nc(ids["a"], addr["b"], 7070), "a reached b")
        check("host-secret" not in nc(ids["a"], gateway, port) and not hits,
              "the host's listener through the gateway")
        check("host-secret" in nc(ids["a"], host, port), "the allowed host address answers")
        info = container(e, ids["a"])
        check(info["HostConfig"]["NetworkMode"] == "none", "the engine's network: none")
        # stop/start: a new namespace, attached again
        check(s.request("POST", "/v1/sandboxes/%s/stop" % ids["b"]).status == 202, "stop")
        wait_for(lambda: s.request("GET", "/v1/sandboxes/" + ids["b"]).json()["status"][
            "state"] == "Stopped", "b stopped", 60)
        check(s.request("POST", "/v1/sandboxes/%s/start" % ids["b"]).status == 202, "start")
        wait_for(lambda: s.request("GET", "/v1/sandboxes/" + ids["b"]).json()["status"][
            "state"] == "Running", "b running again", 60)
        out = inside(s, ids["b"], "ip -4 -o addr show eth0 | awk '{print $4}'")
        check(out and out[0].startswith("10.232.%d." % tag), "b attached again: %r" % out)
        for sid in ids.values():
            check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
        leases = "/run/sbx/net/%s/leases" % bridge
        wait_for(lambda: not os.path.isdir(leases) or not os.listdir(leases),
                 "the leases to be released", 10)
        check(s.stop() == 0, "clean stop")
        print("ok   network \"sbx\": on sbx's bridge, isolated like native sandboxes")
    finally:
        lis.close()
        s.kill9()
        remove_bridge(s.sbx, bridge, subnet)


def snapshot_ready(s, sid):
    r = s.request("POST", "/v1/sandboxes/%s/snapshots" % sid, None, timeout=300)
    check(r.status == 202, "snapshot of %s: %r" % (sid, r))
    snap = r.json()["id"]

    def ready():
        st = s.request("GET", "/v1/snapshots/" + snap).json()["status"]
        check(st["state"] != "Failed", "snapshot failed: %r" % st)
        return st["state"] == "Ready"
    wait_for(ready, "snapshot %s Ready" % snap, timeout=300)
    return snap


def restore(s, snap, provider):
    r = s.request("POST", "/v1/sandboxes", {
        "snapshotId": snap, "provider": provider, "entrypoint": ["sleep", "3600"],
        "resourceLimits": {"cpu": "500m", "memory": "128Mi"}}, timeout=300)
    check(r.status == 202, "restore %s on %s: %r" % (snap, provider, r))
    return r.json()["id"]


def snapshots(new_server, e):
    """Snapshots across providers: a docker sandbox's (the engine's commit, saved into sbx's
    image store) restored on docker and on native; a native sandbox's restored on docker (the
    image exported from sbx's store and loaded into the engine). Files written and files of the
    image deleted arrive; the source keeps running."""
    s = new_server(config_text=config(e).replace('supported = ["docker", "process"]',
                                                 'supported = ["docker", "native"]'),
                   tag="docker-snap")
    archive = os.path.join(s.tmp, "busybox.tar")
    busybox_image.write(archive, "sbx-test/local:1")
    subprocess.run([s.sbx, "image", "import", "--state-dir", s.state, archive], check=True,
                   capture_output=True)
    s.start()
    r = create(s, e.image)
    check(r.status == 202, "docker sandbox: %r" % r)
    src = r.json()["id"]
    inside(s, src, "mkdir -p /root && echo from-docker > /root/f && rm /bin/vi")
    snap = snapshot_ready(s, src)
    check(inside(s, src, "echo alive") == ["alive"], "the docker source runs on")
    check(container(e, src)["State"]["Status"] == "running", "not left paused")
    status, _ = eng.api(e.socket, "GET", "/images/sbx.local/snapshots:%s/json" % snap)
    check(status == 404, "the engine's committed copy is removed after the save")
    for prov in ("docker", "native"):
        d = restore(s, snap, prov)
        out = inside(s, d, "cat /root/f; ls /bin/vi 2>/dev/null | wc -l")
        check(out == ["from-docker", "0"], "docker snapshot on %s: %r" % (prov, out))
        check(s.request("DELETE", "/v1/sandboxes/" + d).status == 204, "delete restored")
    r = s.request("POST", "/v1/sandboxes", {
        "image": {"uri": "sbx-test/local:1"}, "provider": "native",
        "entrypoint": ["sleep", "3600"], "resourceLimits": {"cpu": "1", "memory": "256Mi"}})
    if r.status != 202:
        print("skip native -> docker: no native sandbox here: %r" % r)
    else:
        nat = r.json()["id"]
        inside(s, nat, "echo from-native > /root/n && rm /etc/base-file")
        nsnap = snapshot_ready(s, nat)
        d = restore(s, nsnap, "docker")
        out = inside(s, d, "cat /root/n; ls /etc/base-file 2>/dev/null | wc -l")
        check(out == ["from-native", "0"], "native snapshot on docker: %r" % out)
        check(s.request("DELETE", "/v1/sandboxes/" + d).status == 204, "delete restored")
        s.request("DELETE", "/v1/sandboxes/" + nat)
        print("ok   snapshots: native -> docker")
    s.request("DELETE", "/v1/sandboxes/" + src)
    print("ok   snapshots: docker -> docker, docker -> native")
    check(s.stop() == 0, "clean stop")


def run(new_server, setup):
    e = setup.engine
    e.image = setup.image
    probe(e, setup.image, sys.argv[3], sys.argv[1], setup.tmp)
    s = new_server(config_text=config(e), tag="docker")
    s.log_all = lambda: open(s.logpath, errors="replace").read()
    s.start()
    sid = lifecycle(s, e, setup.image)
    restart(s, e, sid)
    stop_start(s, e)
    kill_mid_create(s, e, sid)
    bad_input(s, e, setup)
    missing_execd(new_server, e)
    registry_auth(s, e, setup)
    engine_down(s, e, sid)
    check(s.stop() == 0, "clean stop")
    snapshots(new_server, e)
    isolation(new_server, e)
    reach_address(new_server, e)
    if e.kind == "podman":
        foreign_pidns(new_server, setup)


def test(new_server):
    setup = eng.Setup(sys.argv[2])
    setup.run_test(lambda _: run(new_server, setup))


if __name__ == "__main__":
    main(test)
