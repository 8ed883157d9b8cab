#!/usr/bin/env python3
"""Big uploads into `native` sandboxes through the router (the benchmark's failure, issue 6
section 6: a 1 GiB upload answered 502 and every later upload broke with a broken pipe).

  - 1 GiB up and down through /sandboxes/{id}/proxy/44772/files/... into a sandbox with a
    512Mi memory limit, SHA-256 checked: the writable layer is on disk, so the file is page
    cache, not RAM charged to the sandbox (a RAM layer got execd OOM-killed);
  - a full writable layer (tmpfs mode, and a disk layer capped by upper_size, both 64Mi): 507
    {code, message}, no partial file, and the sandbox, the router and later uploads keep
    working; a capped layer's loop device and image go with the sandbox;
  - a sandbox whose init died: an upload in flight gets a JSON error, not a broken pipe.
Skips when this build has no runtime or the host cannot make sandboxes."""
import hashlib
import http.client
import json
import os
import signal

from harness import Skip, check, main, wait_for

MIB = 1 << 20
DISK = 'providers = { supported = ["native"]; default = "native"; };\n'
TMPFS = ('providers = { supported = ["native"]; default = "native";\n'
         '  native = { upper = "tmpfs"; upper_size = "64Mi"; }; };\n')
CAPPED = ('providers = { supported = ["native"]; default = "native";\n'
          '  native = { upper = "disk"; upper_size = "64Mi"; }; };\n')


def start(new_server, text, tag):
    s = new_server(config_text=text, tag=tag)
    s.start_native()
    return s


def make(s, memory="512Mi"):
    r = s.create(resourceLimits={"cpu": "1", "memory": memory}, entrypoint=["sleep", "3600"])
    if r.status != 202:
        raise Skip("the runtime cannot make sandboxes on this host: %r" % r)
    return r.json()["id"]


def upload(s, sid, path, size, conn=None):
    """Multipart upload streamed 1 MiB at a time (the answer is read after the whole body,
    as Python's http.client and the SDKs do). Returns (status, body, sha256 of the data)."""
    boundary = "sbxUPLOADtest42"
    meta = json.dumps({"path": path, "mode": 644}).encode()
    head = (("--%s\r\nContent-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
             "Content-Type: application/json\r\n\r\n" % boundary).encode() + meta +
            ("\r\n--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n" % boundary).encode())
    tail = ("\r\n--%s--\r\n" % boundary).encode()
    block = os.urandom(MIB)
    h = hashlib.sha256()

    def body():
        yield head
        for i in range(size // MIB):
            chunk = block[:-1] + bytes([i % 251])
            h.update(chunk)
            yield chunk
        yield tail
    c = conn or http.client.HTTPConnection("127.0.0.1", s.port, timeout=300)
    c.request("POST", "/sandboxes/%s/proxy/44772/files/upload" % sid, body=body(),
              headers={"OPEN-SANDBOX-API-KEY": s.key,
                       "Content-Type": "multipart/form-data; boundary=" + boundary,
                       "Content-Length": str(len(head) + size + len(tail))})
    r = c.getresponse()
    data = r.read()
    if not conn:
        c.close()
    return r.status, data, h.hexdigest()


def download_sha(s, sid, path):
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=300)
    c.request("GET", "/sandboxes/%s/proxy/44772/files/download?path=%s" % (sid, path),
              headers={"OPEN-SANDBOX-API-KEY": s.key})
    r = c.getresponse()
    h, n = hashlib.sha256(), 0
    while True:
        chunk = r.read(MIB)
        if not chunk:
            break
        h.update(chunk)
        n += len(chunk)
    c.close()
    return r.status, h.hexdigest(), n


def inside(s, sid, cmd):
    out, events = s.run(sid, cmd)
    check(events[-1]["type"] == "execution_complete", "%r: %r" % (cmd, events[-3:]))
    return out


def one_gib(new_server):
    s = start(new_server, DISK, "upload-disk")
    sid = make(s)
    st, body, digest = upload(s, sid, "/root/big.bin", 1024 * MIB)
    check(st == 200, "1 GiB upload through the router: %d %r" % (st, body[:300]))
    st, got, n = download_sha(s, sid, "/root/big.bin")
    check(st == 200 and n == 1024 * MIB and got == digest,
          "1 GiB download: %d, %d bytes, sha256 %s" % (st, n, "ok" if got == digest else "BAD"))
    check(inside(s, sid, "echo alive") == ["alive"], "the sandbox lives on")
    layers = os.listdir(os.path.join(s.state, "upper"))
    check(layers == [sid], "the writable layer is on disk under the state dir: %r" % layers)
    st, body, _ = upload(s, sid, "/root/small.bin", MIB)
    check(st == 200, "a later upload: %d %r" % (st, body[:200]))
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    wait_for(lambda: not os.listdir(os.path.join(s.state, "upper")), "the layer to be removed")
    check(s.stop() == 0, "clean stop")


def loop_devices(state):
    """Loop devices whose backing file is under the state dir (but the one of all writable
    layers, providers.native.total_disk, which stays while the server runs)."""
    out = []
    for dev in os.listdir("/sys/block"):
        try:
            backing = open("/sys/block/%s/loop/backing_file" % dev).read().strip()
        except OSError:
            continue
        if backing.startswith(state) and not backing.endswith("/upper.img"):
            out.append(dev)
    return out


def full_layer(new_server, text, tag):
    s = start(new_server, text, tag)
    sid = make(s)
    layers = [x for x in os.listdir(os.path.join(s.state, "upper")) if not x.startswith(".")]
    if text == TMPFS:
        check(not layers, "tmpfs mode: nothing on disk")
    else:
        img = os.path.join(s.state, "upper", sid, "layer.img")
        check(os.path.getsize(img) == 64 * MIB, "capped layer image of 64Mi")
        check(os.stat(img).st_blocks * 512 < 8 * MIB, "the image is sparse (copied from the "
              "size's template, holes kept)")
        check(len(loop_devices(s.state)) == 1, "one loop device for the capped layer")
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=300)
    st, body, _ = upload(s, sid, "/root/too-big.bin", 100 * MIB, conn=c)
    err = json.loads(body)
    check(st == 507 and err["code"] == "INSUFFICIENT_STORAGE" and err["message"],
          "a full layer is 507 {code, message}: %d %r" % (st, body[:300]))
    out = inside(s, sid, "ls -a /root; df -m / | tail -1")
    check(not [x for x in out if "too-big" in x or "sbx-upload" in x],
          "no partial file left: %r" % out)
    # the same kept-alive connection, a new one, and a command: all still work
    st, body, digest = upload(s, sid, "/root/fits.bin", 8 * MIB, conn=c)
    check(st == 200, "upload on the same connection after the 507: %d %r" % (st, body[:200]))
    c.close()
    st, got, n = download_sha(s, sid, "/root/fits.bin")
    check(st == 200 and got == digest and n == 8 * MIB, "download after the 507")
    st, body, _ = upload(s, sid, "/root/more.bin", MIB)
    check(st == 200, "upload on a new connection: %d %r" % (st, body[:200]))
    state = s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"]
    check(state == "Running", "still Running: %s" % state)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    s.wait_native_gone(sid)
    left = [x for x in os.listdir(os.path.join(s.state, "upper")) if not x.startswith(".")]
    check(not left, "layer removed: %r" % left)
    wait_for(lambda: not loop_devices(s.state), "the loop device to detach")
    check(s.stop() == 0, "clean stop")


def dead_sandbox(new_server):
    s = start(new_server, DISK, "upload-dead")
    sid = make(s)
    rec = json.load(open(os.path.join(s.state, "run", sid, "state.json")))
    os.kill(rec["pid"], signal.SIGKILL)
    st, body, _ = upload(s, sid, "/root/x.bin", 16 * MIB)
    check(st in (404, 409, 502) and json.loads(body)["code"],
          "an upload to a dead sandbox is answered: %d %r" % (st, body[:200]))
    wait_for(lambda: s.request("GET", "/v1/sandboxes/" + sid).json()["status"]["state"] ==
             "Failed", "the dead sandbox to turn Failed", timeout=20)
    check(s.request("DELETE", "/v1/sandboxes/" + sid).status == 204, "delete")
    check(s.stop() == 0, "clean stop")


def test(new_server):
    full_layer(new_server, TMPFS, "upload-full")
    full_layer(new_server, CAPPED, "upload-capped")
    dead_sandbox(new_server)
    one_gib(new_server)


if __name__ == "__main__":
    main(test)
