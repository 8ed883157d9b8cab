"""A BusyBox image as a `docker save` archive (static busybox, its applet links, /tmp, /etc
with a passwd and a marker file), for tests and the bench that need an OCI image of their
own; no registry, no network. Debian's busybox-static provides /bin/busybox (scripts/deps.sh)."""
import hashlib
import io
import json
import platform
import subprocess
import sys
import tarfile

BUSYBOX = "/bin/busybox"
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def layer_bytes() -> bytes:
    buf = io.BytesIO()
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for d, mode in (("bin", 0o755), ("tmp", 0o1777), ("etc", 0o755), ("root", 0o700),
                        ("opt", 0o755), ("opt/lower", 0o755)):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode = tarfile.DIRTYPE, mode
            t.addfile(ti)
        t.add(BUSYBOX, "bin/busybox")
        for a in applets:
            if a != "busybox":
                ti = tarfile.TarInfo("bin/" + a)
                ti.type, ti.linkname = tarfile.SYMTYPE, "busybox"
                t.addfile(ti)
        for name, data in (("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"),
                           ("etc/base-file", b"base\n"), ("opt/lower/old", b"old\n")):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def archive(tag: str) -> bytes:
    """The archive's bytes, naming the image tag."""
    buf = io.BytesIO()
    write(buf, tag)
    return buf.getvalue()


def write(out, tag: str) -> None:
    """Write the archive to out (a path or a binary file object), naming the image tag."""
    layer = layer_bytes()
    diff = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": ARCH, "os": "linux",
                         "config": {"Env": ["PATH=/bin"], "Cmd": ["sh"]},
                         "rootfs": {"type": "layers", "diff_ids": [diff]}}).encode()
    chex = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{"Config": chex + ".json", "RepoTags": [tag],
                            "Layers": ["layer.tar"]}]).encode()
    opened = tarfile.open(out, "w") if isinstance(out, str) else tarfile.open(fileobj=out, mode="w")
    with opened as t:
        for name, data in (("manifest.json", manifest), (chex + ".json", config),
                           ("layer.tar", layer)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2])
