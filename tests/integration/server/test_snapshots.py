#!/usr/bin/env python3
"""Snapshots on the native provider, through the API as the SDKs use it: POST
/sandboxes/{id}/snapshots answers 202 + Location with the files captured, the image is written
in the background (Creating -> Ready), list filters and pagination, GET, DELETE; a create with
`snapshotId` runs a sandbox with the snapshot's files (new and changed files, deletions of the
image's files, a directory replaced, hard links, symlinks kept as symlinks, a 10 MB file
byte-exact), entrypoint `tail -f /dev/null` by default, `snapshotId` in its record; snapshots of
a paused sandbox (stays paused) and a stopped one; a snapshot outlives its sandbox and a restored
sandbox outlives its snapshot; export (an OCI layout that is also a docker-save archive) and
import as a new snapshot; a server killed while writing one reports it Failed after its
restart; bad requests get 4xx with {code, message}. Symlinks the sandbox plants to host files
are captured as symlinks, never followed."""
import concurrent.futures
import io
import json
import os
import sqlite3
import subprocess
import tarfile
import time

import sys

from harness import Skip, check, main, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "scripts"))
import busybox_image  # noqa: E402

CONFIG = 'providers = { supported = ["native"]; default = "native"; };\n'
IMAGE = "sbx-test/busybox:1"
LIMITS = {"cpu": "1", "memory": "512Mi"}


def run_ok(s, sid, cmd):
    out, events = s.run(sid, cmd)
    check(events[-1]["type"] == "execution_complete", "%r succeeded: %r" % (cmd, events))
    return out


def create(s, **kw):
    body = {"image": {"uri": IMAGE}, "entrypoint": ["sleep", "3600"], "resourceLimits": LIMITS}
    body.update(kw)
    r = s.request("POST", "/v1/sandboxes", {k: v for k, v in body.items() if v is not None})
    check(r.status == 202, "create %r: %r" % (kw, r))
    return r.json()["id"]


def snapshot(s, sid, name=None):
    r = s.request("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": name} if name else None)
    check(r.status == 202, "snapshot of %s: %r" % (sid, r))
    snap = r.json()
    check(r.header("Location") == "/v1/snapshots/" + snap["id"], "Location: %r" % r.headers)
    check(snap["sandboxId"] == sid and snap["status"]["state"] in ("Creating", "Ready"),
          "the 202's Snapshot: %r" % snap)
    check(not any(k.startswith("_") for k in snap), "no private keys: %r" % snap)
    return snap["id"]


def ready(s, snap):
    def is_ready():
        r = s.request("GET", "/v1/snapshots/" + snap)
        check(r.status == 200, "get snapshot: %r" % r)
        st = r.json()["status"]
        check(st["state"] != "Failed", "snapshot failed: %r" % st)
        return st["state"] == "Ready"
    wait_for(is_ready, "snapshot %s Ready" % snap, timeout=60)


SETUP = ("echo hello > /root/file && rm /etc/base-file && rm -rf /opt/lower && "
         "mkdir -p /opt/lower/new /opt/d && echo fresh > /opt/lower/new/f && "
         "dd if=/dev/urandom of=/opt/d/big bs=1M count=10 2>/dev/null && "
         "ln /opt/d/big /opt/d/hard && ln -s ../../../../../../etc/shadow /opt/evil && "
         "ln -s /proc/1/root/etc/hostname /opt/evil2 && mkfifo /opt/fifo")
CHECK = ("cat /root/file; ls /etc | grep -c base-file; echo $(ls /opt/lower); cat /opt/lower/new/f; "
         "md5sum /opt/d/big | cut -d' ' -f1; stat -c %i /opt/d/big; stat -c %i /opt/d/hard; "
         "readlink /opt/evil; readlink /opt/evil2; stat -c %F /opt/fifo")


def restored_matches(s, src_md5, sid):
    out = run_ok(s, sid, CHECK)
    check(out[0] == "hello", "new file restored: %r" % out)
    check(out[1] == "0", "a deleted image file stays deleted (whiteout): %r" % out)
    check(out[2] == "new", "a replaced directory hides the image's files (opaque): %r" % out)
    check(out[3] == "fresh", "files in the replaced directory: %r" % out)
    check(out[4] == src_md5, "10 MB file byte-exact: %r vs %s" % (out, src_md5))
    check(out[5] == out[6], "hard link kept: %r" % out)
    check(out[7] == "../../../../../../etc/shadow" and out[8] == "/proc/1/root/etc/hostname",
          "symlinks kept as symlinks, not followed: %r" % out)
    check(out[9] == "fifo", "fifo kept: %r" % out)


def basic(s):
    src = create(s, metadata={"team": "a"})
    run_ok(s, src, SETUP)
    md5 = run_ok(s, src, "md5sum /opt/d/big | cut -d' ' -f1")[0]
    run_ok(s, src, "sleep 3600 >/dev/null 2>&1 &")
    snap = snapshot(s, src, "first")
    # the sandbox runs on after the freeze: a command answers, no process is left stopped
    out = run_ok(s, src, "echo alive; grep -h State /proc/[0-9]*/status | sort | uniq -c")
    check(out[0] == "alive" and not any("stopped" in l or "T (" in l for l in out[1:]),
          "thawed after the snapshot: %r" % out)
    ready(s, snap)
    got = s.request("GET", "/v1/snapshots/" + snap).json()
    check(got["name"] == "first" and got["sandboxId"] == src and "createdAt" in got,
          "GET snapshot: %r" % got)
    check(got["status"]["reason"] == "snapshot_ready", "reason: %r" % got)
    # restore: defaults, record, files
    r = s.request("POST", "/v1/sandboxes", {"snapshotId": snap, "resourceLimits": LIMITS})
    check(r.status == 202, "create from the snapshot: %r" % r)
    check(r.json()["entrypoint"] == ["tail", "-f", "/dev/null"], "default entrypoint: %r" % r)
    dst = r.json()["id"]
    rec = s.request("GET", "/v1/sandboxes/" + dst).json()
    check(rec.get("snapshotId") == snap and "image" not in rec, "restored record: %r" % rec)
    restored_matches(s, md5, dst)
    # the restored sandbox is a sandbox of its own
    run_ok(s, dst, "echo changed > /root/file")
    check(run_ok(s, src, "cat /root/file") == ["hello"], "the source is untouched")
    return src, snap, md5, dst


def listing(s, src, snap):
    other = create(s)
    run_ok(s, other, "echo other > /root/o")
    s2 = snapshot(s, other)
    ready(s, s2)
    items = s.request("GET", "/v1/snapshots").json()
    check({i["id"] for i in items["items"]} >= {snap, s2}, "list: %r" % items)
    check(items["pagination"]["totalItems"] >= 2, "pagination: %r" % items)
    mine = s.request("GET", "/v1/snapshots?sandboxId=" + src).json()["items"]
    check([i["id"] for i in mine] == [snap], "sandboxId filter: %r" % mine)
    named = s.request("GET", "/v1/snapshots?name=first").json()["items"]
    check([i["id"] for i in named] == [snap], "name filter: %r" % named)
    check(s.request("GET", "/v1/snapshots?state=Failed").json()["items"] == [],
          "state filter: none failed")
    both = s.request("GET", "/v1/snapshots?state=Ready&state=Creating&pageSize=1").json()
    check(len(both["items"]) == 1 and both["pagination"]["hasNextPage"],
          "pageSize 1: %r" % both)
    for q in ("page=0", "pageSize=201", "pageSize=x", "sandboxId=", "name="):
        r = s.request("GET", "/v1/snapshots?" + q)
        check(r.status == 400 and "code" in r.json(), "bad %s: %r" % (q, r))
    s.request("DELETE", "/v1/sandboxes/" + other)
    return s2


def paused_and_stopped(s):
    sid = create(s)
    run_ok(s, sid, "echo p > /root/p")
    check(s.request("POST", "/v1/sandboxes/%s/pause" % sid).status == 202, "pause")
    snap = snapshot(s, sid)
    st = s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"]
    check(st == "Paused", "a paused sandbox stays paused: %s" % st)
    check(s.request("POST", "/v1/sandboxes/%s/resume" % sid).status == 202, "resume")
    run_ok(s, sid, "echo s > /root/s")
    check(s.request("POST", "/v1/sandboxes/%s/stop" % sid).status == 202, "stop")
    snap2 = snapshot(s, sid)
    for x, files in ((snap, "p"), (snap2, "p s")):
        ready(s, x)
        d = create(s, image=None, snapshotId=x, entrypoint=["sleep", "3600"])
        out = run_ok(s, d, "cd /root && ls | tr '\\n' ' '")
        check(out[0].strip() == files, "snapshot %s has %r: %r" % (x, files, out))
        s.request("DELETE", "/v1/sandboxes/" + d)
    s.request("DELETE", "/v1/sandboxes/" + sid)


def errors(s, src, snap):
    def bad(method, path, body, status, code=None):
        r = s.request(method, path, body)
        check(r.status == status, "%s %s %r -> %d: %r" % (method, path, body, status, r))
        check("code" in r.json() and "message" in r.json(), "error envelope: %r" % r)
        if code:
            check(r.json()["code"] == code, "code %s: %r" % (code, r))

    host = s.create()  # the built-in host image: not an OCI image
    check(host.status == 202, "host sandbox: %r" % host)
    bad("POST", "/v1/sandboxes/%s/snapshots" % host.json()["id"], None, 400,
        "SANDBOX::API_NOT_SUPPORTED")
    s.request("DELETE", "/v1/sandboxes/" + host.json()["id"])
    bad("POST", "/v1/sandboxes/%s/snapshots" % ("0" * 8 + "-0000-4000-8000-" + "0" * 12), None,
        404)
    bad("POST", "/v1/sandboxes/not-a-uuid/snapshots", None, 404)
    bad("POST", "/v1/sandboxes/%s/snapshots" % src, {"name": ""}, 400)
    bad("POST", "/v1/sandboxes/%s/snapshots" % src, {"name": 7}, 400)
    bad("POST", "/v1/sandboxes/%s/snapshots" % src, {"name": "a\nb"}, 400)
    bad("POST", "/v1/sandboxes/%s/snapshots" % src, {"other": 1}, 400)
    bad("POST", "/v1/sandboxes/%s/snapshots" % src, [1], 400)
    bad("POST", "/v1/sandboxes", {"snapshotId": snap, "image": {"uri": IMAGE},
                                  "entrypoint": ["sh"]}, 400)
    bad("POST", "/v1/sandboxes", {"snapshotId": "nope"}, 400)
    bad("POST", "/v1/sandboxes", {"snapshotId": 5}, 400)
    bad("POST", "/v1/sandboxes",
        {"snapshotId": "00000000-0000-4000-8000-000000000000", "resourceLimits": LIMITS}, 400)
    bad("GET", "/v1/snapshots/00000000-0000-4000-8000-000000000000", None, 404)
    bad("GET", "/v1/snapshots/x", None, 404)
    bad("DELETE", "/v1/snapshots/00000000-0000-4000-8000-000000000000", None, 404)
    bad("GET", "/v1/snapshots/00000000-0000-4000-8000-000000000000/export", None, 404)
    bad("POST", "/v1/snapshots/import", None, 400)
    r = s.request("POST", "/v1/snapshots/import", raw=b"not an archive" * 100)
    check(r.status == 400 and "code" in r.json(), "import of garbage: %r" % r)


def export_import(s, snap, md5):
    r = s.request("GET", "/v1/snapshots/%s/export" % snap, timeout=120)
    check(r.status == 200 and r.header("Content-Type") == "application/x-tar",
          "export: %r" % r)
    with tarfile.open(fileobj=io.BytesIO(r.body)) as t:
        names = t.getnames()
        check({"oci-layout", "index.json", "manifest.json"} <= set(names),
              "an OCI layout and a docker-save archive: %r" % names)
        manifest = json.load(t.extractfile("manifest.json"))
        check(manifest[0]["RepoTags"] == ["sbx.local/snapshots:" + snap], "RepoTags: %r" % manifest)
        check(all(n in names for n in manifest[0]["Layers"]), "layers in the archive")
    r = s.request("POST", "/v1/snapshots/import", raw=r.body, timeout=120)
    check(r.status == 201, "import: %r" % r)
    new = r.json()
    check(new["status"]["state"] == "Ready" and new["id"] != snap and new["name"] == "first",
          "imported snapshot: %r" % new)
    d = create(s, image=None, snapshotId=new["id"], entrypoint=["sleep", "3600"])
    restored_matches(s, md5, d)
    s.request("DELETE", "/v1/sandboxes/" + d)
    # no room for the upload on the image store's disk: a clear 507, nothing half-imported
    tmpdir = os.path.join(s.state, "images", "tmp")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tmpdir], check=True)
    try:
        r = s.request("POST", "/v1/snapshots/import", raw=b"x" * (3 << 20), timeout=120)
    finally:
        # the server closes the upload's temp file once the request is over, a moment after
        # its answer: wait for that, then unmount
        wait_for(lambda: subprocess.run(["umount", tmpdir], capture_output=True).returncode == 0,
                 "the import's temp file to be closed", timeout=10)
    check(r.status == 507 and "space" in r.json()["message"], "import on a full disk: %r" % r)
    return new["id"]


def delete_order(s, src, snap, dst):
    # the snapshot outlives its sandbox ...
    check(s.request("DELETE", "/v1/sandboxes/" + src).status == 204, "delete the source")
    check(s.request("GET", "/v1/snapshots/" + snap).status == 200, "snapshot after its sandbox")
    # ... and a restored sandbox its snapshot (its image stays pinned)
    check(s.request("DELETE", "/v1/snapshots/" + snap).status == 204, "delete snapshot")
    check(s.request("GET", "/v1/snapshots/" + snap).status == 404, "deleted snapshot is gone")
    check(s.request("DELETE", "/v1/snapshots/" + snap).status == 404, "delete twice: 404")
    r = s.request("POST", "/v1/sandboxes", {"snapshotId": snap, "resourceLimits": LIMITS})
    check(r.status == 400, "restore from a deleted snapshot: %r" % r)
    check(run_ok(s, dst, "cat /root/file") == ["changed"], "restored sandbox still runs")
    s.request("POST", "/v1/sandboxes/%s/stop" % dst)
    check(s.request("POST", "/v1/sandboxes/%s/start" % dst).status == 202,
          "a restored sandbox starts again without its snapshot")
    check(run_ok(s, dst, "cat /root/file") == ["changed"], "its files after the restart")


def racing_delete(s):
    """A snapshot asked while the sandbox is being deleted: captured before the delete (202, and
    then written) or refused (404/409), never a 5xx or a snapshot stuck in Creating."""
    got = []
    for i in range(6):
        sid = create(s)
        run_ok(s, sid, "dd if=/dev/urandom of=/root/r bs=1M count=4 2>/dev/null")
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            d = pool.submit(s.request, "DELETE", "/v1/sandboxes/" + sid)
            time.sleep(0.002 * i)
            sn = pool.submit(s.request, "POST", "/v1/sandboxes/%s/snapshots" % sid, None)
            d, sn = d.result(), sn.result()
        check(d.status == 204, "delete: %r" % d)
        check(sn.status in (202, 404, 409) and (sn.status == 202 or "code" in sn.json()),
              "a snapshot racing a delete: %r" % sn)
        got.append(sn.status)
        if sn.status == 202:
            ready(s, sn.json()["id"])
            s.request("DELETE", "/v1/snapshots/" + sn.json()["id"])
    print("snapshots racing deletes: %s" % got)


def interrupted(new_server, s, snap):
    """A server killed while a snapshot is Creating reports it Failed after a restart (the
    state is set in the store while the server is down: a kill at that exact moment is not
    reproducible)."""
    s.kill9()
    db = sqlite3.connect(os.path.join(s.state, "sbx.db"))
    doc = json.loads(db.execute("SELECT doc FROM snapshots WHERE id = ?", (snap,)).fetchone()[0])
    doc["status"]["state"] = "Creating"
    db.execute("UPDATE snapshots SET doc = ? WHERE id = ?", (json.dumps(doc), snap))
    db.commit()
    db.close()
    s.start()
    st = s.request("GET", "/v1/snapshots/" + snap).json()["status"]
    check(st["state"] == "Failed" and st["reason"] == "snapshot_interrupted",
          "interrupted snapshot after a restart: %r" % st)
    r = s.request("POST", "/v1/sandboxes", {"snapshotId": snap, "resourceLimits": LIMITS})
    check(r.status == 409, "a Failed snapshot cannot be restored: %r" % r)
    check(s.request("DELETE", "/v1/snapshots/" + snap).status == 204, "delete a failed one")


def test(new_server):
    s = new_server(config_text=CONFIG, tag="snap")
    archive = os.path.join(s.tmp, "busybox.tar")
    try:
        busybox_image.write(archive, IMAGE)
    except OSError as e:
        raise Skip("no busybox to build an image: %s" % e)
    subprocess.run([s.sbx, "image", "import", "--state-dir", s.state, archive], check=True,
                   capture_output=True)
    s.start()
    probe = s.create()
    if probe.status != 202:
        if "unknown provider `native`" in s.log():
            raise Skip("this build has no native provider")
        raise Skip("the runtime cannot make sandboxes on this host: %r" % probe)
    s.request("DELETE", "/v1/sandboxes/" + probe.json()["id"])
    src, snap, md5, dst = basic(s)
    other = listing(s, src, snap)
    paused_and_stopped(s)
    errors(s, src, snap)
    export_import(s, snap, md5)
    delete_order(s, src, snap, dst)
    racing_delete(s)
    interrupted(new_server, s, other)


if __name__ == "__main__":
    main(test)
