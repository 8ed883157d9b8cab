"""The images of deploy/images/build.sh as the tests use them: build, read a `docker save`
tar (manifest, config, the one layer) and unpack its file tree, load it into the first
container engine that starts here (tests/integration/docker/engine.py)."""
import json
import os
import subprocess
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
BUILD = os.path.join(TOP, "deploy", "images", "build.sh")


def build(what, bin_dir, out_dir, timeout=1500):
    p = subprocess.run([BUILD, "--bin-dir", bin_dir, "-o", out_dir, what],
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("build.sh %s: %d\n%s%s" % (what, p.returncode, p.stdout,
                                                        p.stderr[-4000:]))
    return os.path.join(out_dir, "sbx-execd.tar" if what == "execd" else "sbx.tar")


def read(tar_path):
    """(manifest entry, config, [member names of the layer])"""
    with tarfile.open(tar_path) as t:
        manifest = json.load(t.extractfile("manifest.json"))
        if len(manifest) != 1 or len(manifest[0]["Layers"]) != 1:
            raise AssertionError("not a one-image one-layer archive: %r" % manifest)
        config = json.load(t.extractfile(manifest[0]["Config"]))
        with tarfile.open(fileobj=t.extractfile(manifest[0]["Layers"][0])) as layer:
            names = [m.name for m in layer.getmembers()]
    return manifest[0], config, names


def unpack(tar_path, dest):
    """The layer's files into dest (root-owned as in the image)."""
    with tarfile.open(tar_path) as t:
        manifest = json.load(t.extractfile("manifest.json"))
        with tarfile.open(fileobj=t.extractfile(manifest[0]["Layers"][0])) as layer:
            layer.extractall(dest, numeric_owner=True)
    return dest


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def load(eng, e, tar):
    """`docker load` of tar into engine e (eng: the engine module)."""
    c = eng.UnixHTTP(e.socket, timeout=300)
    try:
        c.putrequest("POST", "/v1.41/images/load?quiet=1")
        c.putheader("Content-Type", "application/x-tar")
        c.putheader("Content-Length", str(os.path.getsize(tar)))
        c.endheaders()
        with open(tar, "rb") as f:
            c.send(f.read())
        r = c.getresponse()
        body = r.read()
        check(r.status == 200, "the engine loads the image: %d %r" % (r.status, body[:300]))
    finally:
        c.close()


def in_first_engine(tmp, fn, what):
    """fn(eng, e) on the first of a private dockerd or podman that starts (stopped after);
    said, and skipped, when neither can start here."""
    import engine as eng  # pylint: disable=import-outside-toplevel

    why = []
    for kind in ("dockerd", "podman"):
        e = eng.Engine(kind, os.path.join(tmp, "engine"))
        try:
            e.start()
        except eng.EngineError as ex:
            why.append("%s: %s" % (kind, ex))
            e.stop()
            continue
        try:
            fn(eng, e)
            return
        finally:
            e.stop()
    print("%s skipped: no engine could start: %s" % (what, "; ".join(why)))
