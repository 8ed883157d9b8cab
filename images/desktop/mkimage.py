#!/usr/bin/env python3
"""mkimage.py - a root file system tar as a one-layer image in `docker save` format (what
`docker load` and `sbx image import` both read): manifest.json, the image config, the layer.

    mkimage.py --rootfs ROOTFS.tar --tag NAME:TAG --output OUT.tar [--env K=V]... [--title T]
               [--entrypoint JSON] [--cmd JSON] [--user U] [--workdir D] [--created-by TEXT]

deploy/images/build.sh makes sbx's own images with it (--entrypoint, --cmd, --user).
"""
import argparse
import datetime
import hashlib
import io
import json
import os
import tarfile


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def config(diff_id: str, a: argparse.Namespace) -> bytes:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    cfg = {
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG=C.UTF-8"] + a.env,
        "Cmd": a.cmd,
        "Labels": {"org.opencontainers.image.title": a.title,
                   "org.opencontainers.image.description": a.description},
    }
    if a.entrypoint is not None:
        cfg["Entrypoint"] = a.entrypoint
    if a.user:
        cfg["User"] = a.user
    if a.workdir:
        cfg["WorkingDir"] = a.workdir
    return json.dumps({
        "architecture": "amd64" if os.uname().machine == "x86_64" else os.uname().machine,
        "os": "linux",
        "created": now,
        "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff_id]},
        "history": [{"created": now, "created_by": a.created_by}],
    }, sort_keys=True).encode()


def json_argv(text: str) -> list:
    v = json.loads(text)
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise argparse.ArgumentTypeError("wants a JSON array of strings, not %r" % text)
    return v


def add_bytes(out: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    out.addfile(info, io.BytesIO(data))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="an environment variable of the image's config (repeatable)")
    ap.add_argument("--title", default="sbx desktop")
    ap.add_argument("--description",
                    default="Debian bookworm with Xvnc, openbox, xterm, the accessibility bus "
                            "and python3, for sbx desktop sandboxes (images/desktop/build.sh)")
    ap.add_argument("--entrypoint", type=json_argv, default=None, metavar="JSON",
                    help='the Entrypoint, a JSON array: \'["/usr/bin/sbx", "serve"]\'')
    ap.add_argument("--cmd", type=json_argv, default=["/bin/bash"], metavar="JSON",
                    help="the Cmd, a JSON array (default [\"/bin/bash\"])")
    ap.add_argument("--user", default="", help="the User (uid[:gid] or a name)")
    ap.add_argument("--workdir", default="", help="the WorkingDir")
    ap.add_argument("--created-by", default="images/desktop/build.sh (mmdebstrap)")
    a = ap.parse_args()
    for e in a.env:
        if "=" not in e or e.startswith("="):
            ap.error("--env wants K=V, not %r" % e)
    diff_id = sha256_file(a.rootfs)
    cfg = config(diff_id, a)
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    layer = diff_id + "/layer.tar"
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [a.tag], "Layers": [layer]}]).encode()
    tmp = a.output + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as out:
        add_bytes(out, cfg_name, cfg)
        out.add(a.rootfs, arcname=layer, recursive=False)
        add_bytes(out, "manifest.json", manifest)
    os.replace(tmp, a.output)


if __name__ == "__main__":
    main()
