#!/usr/bin/env python3
"""Volumes on the `native` provider, through the API: `host` binds (read-only refuses writes
with EROFS, read-write writes reach the host, subPath), the allow-list (none by default; paths
outside it, `..`, look-alike prefixes and symlinks planted on the host or by another sandbox
are all 400 VOLUME::*), `pvc` named volumes (shared by claimName, data kept across sandboxes,
deleteOnSandboxTermination once the last user goes, createIfNotExists=false), `ossfs` refused,
and volumes that stay mounted and are released after kill -9 of the server. Skips when this
build has no runtime or the host cannot make sandboxes."""
import os
import shutil

from harness import Skip, check, main

NATIVE = 'providers = { supported = ["native", "process"]; default = "native"; };\n'


def config(allowed):
    paths = ", ".join('"%s"' % p for p in allowed)
    return ('providers = { supported = ["native", "process"]; default = "native";\n'
            '  native = { allowed_host_paths = [%s]; }; };\n' % paths)


def vol(name, mount, **kw):
    v = {"name": name, "mountPath": mount}
    v.update(kw)
    return v


def create(s, vols, **kw):
    return s.create(volumes=vols, entrypoint=["sleep", "3600"], **kw)


def must_create(s, vols):
    r = create(s, vols)
    check(r.status == 202, "create with volumes: %r" % r)
    return r.json()["id"]


def refused(s, vols, code, what):
    r = create(s, vols)
    check(r.status == 400 and r.json()["code"] == code,
          "%s: want 400 %s, got %r" % (what, code, r))
    return r.json()["message"]


def inside(s, sid, cmd):
    out, events = s.run(sid, cmd)
    ok = events[-1]["type"] == "execution_complete"
    err = [e.get("text", "") for e in events if e["type"] == "stderr"]
    return ok, out, err


def delete(s, sid):
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete %s" % sid)
    s.wait_native_gone(sid)


def start_native(new_server, text, tag):
    s = new_server(config_text=text, tag=tag)
    s.start_native()
    r = s.create()
    if r.status != 202:
        raise Skip("the runtime cannot make sandboxes on this host: %r" % r)
    delete(s, r.json()["id"])
    return s


def default_denies_host_paths(new_server):
    """No allow-list configured: every host path is refused, pvcs still work."""
    s = start_native(new_server, NATIVE, "vol-default")
    msg = refused(s, [vol("h", "/data", host={"path": "/tmp"})], "VOLUME::HOST_PATH_NOT_ALLOWED",
                  "host path without an allow-list")
    check("allowed_host_paths" in msg, "the message says how to allow it: %r" % msg)
    refused(s, [vol("o", "/data", ossfs={"bucket": "b", "endpoint": "e", "accessKeyId": "k",
                                         "accessKeySecret": "s"})],
            "VOLUME::UNSUPPORTED_BACKEND", "ossfs")
    r = s.create(provider="process", volumes=[vol("p", "/data", pvc={"claimName": "x"})])
    check(r.status == 400 and r.json()["code"] == "SANDBOX::API_NOT_SUPPORTED",
          "the process provider cannot mount: %r" % r)
    check(s.stop() == 0, "clean stop")


def shape_errors(s, allowed):
    """What is wrong with a Volume itself: the reference server's VOLUME::* codes."""
    ok_host = {"path": allowed}
    for vols, code in [
        ([vol("Bad_Name", "/d", host=ok_host)], "VOLUME::INVALID_NAME"),
        ([vol("a", "/d", host=ok_host), vol("a", "/e", host=ok_host)], "VOLUME::DUPLICATE_NAME"),
        ([vol("a", "relative", host=ok_host)], "VOLUME::INVALID_MOUNT_PATH"),
        ([vol("a", "/d/../etc", host=ok_host)], "VOLUME::INVALID_MOUNT_PATH"),
        ([vol("a", "/proc", host=ok_host)], "VOLUME::INVALID_MOUNT_PATH"),
        ([vol("a", "/.sbx/bin", host=ok_host)], "VOLUME::INVALID_MOUNT_PATH"),
        ([vol("a", "/", host=ok_host)], "VOLUME::INVALID_MOUNT_PATH"),
        ([vol("a", "/d", host=ok_host), vol("b", "/d", host=ok_host)],
         "VOLUME::INVALID_MOUNT_PATH"),
        ([vol("a", "/d", host=ok_host, subPath="../x")], "VOLUME::INVALID_SUB_PATH"),
        ([vol("a", "/d", host=ok_host, subPath="/abs")], "VOLUME::INVALID_SUB_PATH"),
        ([vol("a", "/d")], "VOLUME::INVALID_BACKEND"),
        ([vol("a", "/d", host=ok_host, pvc={"claimName": "c"})], "VOLUME::INVALID_BACKEND"),
        ([vol("a", "/d", host={"path": "relative"})], "VOLUME::INVALID_HOST_PATH"),
        ([vol("a", "/d", host={"path": allowed + "/../etc"})], "VOLUME::INVALID_HOST_PATH"),
        ([vol("a", "/d", host={"path": allowed + "//x"})], "VOLUME::INVALID_HOST_PATH"),
        ([vol("a", "/d", pvc={"claimName": "Not_A_Label"})], "VOLUME::INVALID_PVC_NAME"),
        ([vol("a", "/d", pvc={"claimName": "c", "createIfNotExists": "yes"})],
         "SANDBOX::INVALID_PARAMETER"),
        ([vol("a", "/d", host=ok_host, readOnly="yes")], "SANDBOX::INVALID_PARAMETER"),
    ]:
        refused(s, vols, code, "bad volume %r" % vols)


def host_volumes(s, base, allowed):
    """ro refuses writes (EROFS), rw writes reach the host, subPath mounts only the subdir."""
    os.makedirs(allowed + "/ro/sub")
    os.makedirs(allowed + "/rw")
    with open(allowed + "/ro/seed", "w") as f:
        f.write("seed\n")
    with open(allowed + "/ro/sub/only", "w") as f:
        f.write("only\n")
    sid = must_create(s, [vol("ro", "/in", host={"path": allowed + "/ro"}, readOnly=True),
                          vol("rw", "/out", host={"path": allowed + "/rw"}),
                          vol("sub", "/sub", host={"path": allowed + "/ro"}, subPath="sub",
                              readOnly=True)])
    ok, out, _ = inside(s, sid, "cat /in/seed")
    check(ok and out == ["seed"], "ro volume readable: %r" % out)
    ok, _, err = inside(s, sid, "echo x > /in/new")
    check(not ok and any("Read-only file system" in e for e in err),
          "a write to a read-only volume fails with EROFS: %r" % err)
    check(not os.path.exists(allowed + "/ro/new"), "nothing written through the ro volume")
    ok, _, err = inside(s, sid, "touch /in/seed")
    check(not ok, "ro volume: touch refused")
    ok, _, _ = inside(s, sid, "echo from-sandbox > /out/result && mkdir -p /out/d/e")
    check(ok, "write to the rw volume")
    check(open(allowed + "/rw/result").read() == "from-sandbox\n", "rw write visible on the host")
    check(os.path.isdir(allowed + "/rw/d/e"), "rw mkdir visible on the host")
    ok, out, _ = inside(s, sid, "ls /sub")
    check(ok and out == ["only"], "subPath mounts only the subdir: %r" % out)
    # the sources were handed to the runtime as fds: none of them may stay open inside (an fd
    # of a host directory would be a way out of the sandbox's root)
    ok, out, _ = inside(s, sid, "for p in /proc/[0-9]*/fd/*; do readlink $p; done 2>/dev/null; true")
    leaked = [x for x in out if "allowed" in x or x.split("/")[:2] in (["", "in"], ["", "out"],
                                                                        ["", "sub"])]
    check(ok and out and not leaked, "no volume fd open in the sandbox: %r" % leaked)
    # uploads through the router land in the volume too; into a read-only one they fail
    r = s.request("GET", "/sandboxes/%s/proxy/44772/files/info?path=/in/seed" % sid)
    check(r.status == 200, "files API sees the volume: %r" % r)
    delete(s, sid)
    check(open(allowed + "/rw/result").read() == "from-sandbox\n", "host data kept after delete")


def host_escapes(s, base, allowed):
    """Symlinks and look-alike prefixes never lead out of the allow-list."""
    os.makedirs(base + "/secret")
    with open(base + "/secret/key", "w") as f:
        f.write("secret\n")
    os.symlink(base + "/secret", allowed + "/link")      # planted on the host
    os.symlink("/etc", allowed + "/etc-link")
    os.makedirs(allowed + "/real")
    os.symlink("../link", allowed + "/real/up")            # relative, climbing out
    os.makedirs(base + "/allowed-sibling")                # shares the prefix as a string
    cases = [
        ({"path": allowed + "/link"}, None, "VOLUME::HOST_PATH_NOT_ALLOWED"),
        ({"path": allowed + "/link/key"}, None, "VOLUME::HOST_PATH_NOT_ALLOWED"),
        ({"path": allowed + "/etc-link"}, None, "VOLUME::HOST_PATH_NOT_ALLOWED"),
        ({"path": allowed}, "link", "VOLUME::INVALID_SUB_PATH"),
        ({"path": allowed}, "real/up", "VOLUME::INVALID_SUB_PATH"),
        ({"path": allowed + "/real"}, "up/key", "VOLUME::INVALID_SUB_PATH"),
        ({"path": base + "/allowed-sibling"}, None, "VOLUME::HOST_PATH_NOT_ALLOWED"),
        ({"path": base + "/secret"}, None, "VOLUME::HOST_PATH_NOT_ALLOWED"),
        ({"path": "/etc"}, None, "VOLUME::HOST_PATH_NOT_ALLOWED"),
        ({"path": allowed + "/missing"}, None, "VOLUME::HOST_PATH_NOT_FOUND"),
        ({"path": allowed}, "missing", "VOLUME::HOST_PATH_NOT_FOUND"),
    ]
    for host, sub, code in cases:
        v = vol("h", "/data", host=host)
        if sub:
            v["subPath"] = sub
        refused(s, [v], code, "escape attempt %r subPath %r" % (host, sub))
    # A sandbox with a writable volume plants a symlink to the host's /etc in it; another
    # sandbox that names it (as host path or subPath) is refused, not led to /etc.
    os.makedirs(allowed + "/shared")
    a = must_create(s, [vol("w", "/w", host={"path": allowed + "/shared"})])
    ok, _, _ = inside(s, a, "ln -s /etc /w/planted && ln -s ../../secret /w/rel")
    check(ok and os.path.islink(allowed + "/shared/planted"), "symlinks planted")
    refused(s, [vol("x", "/x", host={"path": allowed + "/shared/planted"})],
            "VOLUME::HOST_PATH_NOT_ALLOWED", "sandbox-planted symlink as host path")
    refused(s, [vol("x", "/x", host={"path": allowed + "/shared"}, subPath="planted")],
            "VOLUME::INVALID_SUB_PATH", "sandbox-planted symlink as subPath")
    refused(s, [vol("x", "/x", host={"path": allowed + "/shared"}, subPath="rel")],
            "VOLUME::INVALID_SUB_PATH", "sandbox-planted relative symlink as subPath")
    # inside the sandbox a symlink in a volume resolves in the sandbox's own root
    ok, out, _ = inside(s, a, "ln -s " + base + "/secret/key /w/k; cat /w/k || echo unreadable")
    check(out and out[-1] != "secret", "a volume symlink never reaches the host: %r" % out)
    delete(s, a)


def pvc_lifecycle(s):
    """A pvc made by the first sandbox, shared by name, kept across sandboxes, removed with its
    maker (deleteOnSandboxTermination) only once its last user is gone."""
    vdir = os.path.join(s.state, "volumes")
    refused(s, [vol("p", "/p", pvc={"claimName": "nope", "createIfNotExists": False})],
            "VOLUME::PVC_NOT_FOUND", "missing pvc without createIfNotExists")
    check(not os.path.exists(vdir + "/nope"), "a refused pvc is not made")
    # kept: data written by one sandbox is there for the next one
    a = must_create(s, [vol("p", "/p", pvc={"claimName": "keep"})])
    check(inside(s, a, "echo persisted > /p/f")[0], "write to pvc")
    delete(s, a)
    check(os.path.isdir(vdir + "/keep"), "pvc kept after its sandbox (default)")
    b = must_create(s, [vol("p", "/p", pvc={"claimName": "keep", "createIfNotExists": False}),
                        vol("q", "/q", pvc={"claimName": "keep"}, subPath="deep/er",
                            readOnly=True)])
    ok, out, _ = inside(s, b, "cat /p/f; ls -d /p/deep/er")
    check(ok and out == ["persisted", "/p/deep/er"], "pvc data across sandboxes: %r" % out)
    ok, _, err = inside(s, b, "echo x > /q/y")
    check(not ok and any("Read-only" in e for e in err), "read-only pvc subPath: %r" % err)
    delete(s, b)
    # deleteOnSandboxTermination: its maker asked; a second user keeps it alive until it goes
    c = must_create(s, [vol("p", "/p", pvc={"claimName": "tmp-vol",
                                            "deleteOnSandboxTermination": True})])
    check(inside(s, c, "echo shared > /p/f")[0], "write")
    d = must_create(s, [vol("p", "/p", pvc={"claimName": "tmp-vol"})])
    delete(s, c)
    check(os.path.isdir(vdir + "/tmp-vol"), "pvc still used by d is kept")
    ok, out, _ = inside(s, d, "cat /p/f")
    check(ok and out == ["shared"], "d still reads it: %r" % out)
    delete(s, d)
    check(not os.path.exists(vdir + "/tmp-vol"), "removed with its last user")
    # only the maker's flag counts: a later user asking for removal does not remove it
    e = must_create(s, [vol("p", "/p", pvc={"claimName": "keep",
                                            "deleteOnSandboxTermination": True})])
    delete(s, e)
    check(os.path.isdir(vdir + "/keep"), "a volume is removed only by its maker's request")
    # a symlink planted in a pvc is never followed as a subPath
    f = must_create(s, [vol("p", "/p", pvc={"claimName": "keep"})])
    check(inside(s, f, "ln -s /etc /p/etc-link")[0], "plant")
    refused(s, [vol("p", "/p", pvc={"claimName": "keep"}, subPath="etc-link")],
            "VOLUME::INVALID_SUB_PATH", "pvc subPath through a planted symlink")
    delete(s, f)
    check(sorted(os.listdir(vdir)) == ["keep"], "nothing else under volumes: %r"
          % os.listdir(vdir))


def survives_restart(s, allowed):
    """kill -9 of the server: the sandbox keeps its mounts, the restarted server still knows
    its volumes and releases them on delete."""
    os.makedirs(allowed + "/live")
    sid = must_create(s, [vol("h", "/h", host={"path": allowed + "/live"}),
                          vol("p", "/p", pvc={"claimName": "crash-vol",
                                              "deleteOnSandboxTermination": True})])
    check(inside(s, sid, "echo before > /h/a && echo before > /p/a")[0], "writes before")
    s.kill9()
    s.start()
    got = s.request("GET", "/v1/sandboxes/" + sid).json()
    check(got["status"]["state"] == "Running", "re-adopted: %r" % got)
    ok, out, _ = inside(s, sid, "cat /h/a /p/a; echo after > /h/b")
    check(ok and out == ["before", "before"], "volumes still mounted: %r" % out)
    check(open(allowed + "/live/b").read() == "after\n", "host volume written after restart")
    delete(s, sid)
    check(not os.path.exists(os.path.join(s.state, "volumes", "crash-vol")),
          "pvc released by the restarted server")


def test(new_server):
    default_denies_host_paths(new_server)
    probe = new_server(tag="vol-paths")  # only for its temp dir
    base = os.path.join(probe.tmp, "host")
    allowed = base + "/allowed"
    os.makedirs(allowed)
    os.chmod(probe.tmp, 0o755)
    bad = new_server(config_text=config(["/nonexistent-sbx-prefix-%d" % os.getpid()]),
                     tag="vol-bad")
    check(bad.start(expect_fail=True) != 0 and "allowed_host_paths" in bad.log(),
          "a missing allowed prefix stops the server at startup: %s" % bad.log())
    s = new_server(config_text=config([allowed]), tag="vol")
    s.start()
    try:
        shape_errors(s, allowed)
        host_volumes(s, base, allowed)
        host_escapes(s, base, allowed)
        pvc_lifecycle(s)
        survives_restart(s, allowed)
        check(s.stop() == 0, "clean stop")
    finally:
        s.kill9()
        s.gc_runtime()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main(test)
