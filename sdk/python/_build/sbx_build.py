"""A PEP 517 build backend for the sbx SDK with nothing but the standard library.

Why not setuptools: pip builds a project in an isolated environment and first installs the
backend's requirements from the package index. The machines sbx runs on often have no index
(this project's own CI has none), where `pip install ./sdk/python` with setuptools fails before
building anything. The SDK is pure Python, so a wheel is a zip of sbx/ plus three metadata
files (PEP 427, PEP 566): that is all this backend writes.
"""

import base64
import hashlib
import os
import tarfile
import zipfile

NAME = "sbx"
VERSION = "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"


def _metadata():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Python SDK of sbx: sandboxes, commands, files, code and desktops for AI "
            "agents\nRequires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n%s"
            % (NAME, VERSION, readme))


def _package_files():
    base = os.path.join(ROOT, NAME)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".typed")):
                full = os.path.join(dirpath, name)
                yield full, os.path.relpath(full, ROOT).replace(os.sep, "/")


def _digest(data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "sha256=" + h


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    dist_info = "%s-%s.dist-info" % (NAME, VERSION)
    wheel_name = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as z:
        def add(arcname, data):
            z.writestr(arcname, data)
            record.append("%s,%s,%d" % (arcname, _digest(data), len(data)))
        for full, arc in _package_files():
            with open(full, "rb") as f:
                add(arc, f.read())
        add(dist_info + "/METADATA", _metadata().encode())
        add(dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: sbx_build\n"
                                   "Root-Is-Purelib: true\nTag: %s\n" % TAG).encode())
        record.append(dist_info + "/RECORD,,")
        z.writestr(dist_info + "/RECORD", "\n".join(record) + "\n")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "README.md", "_build/sbx_build.py"):
            t.add(os.path.join(ROOT, rel), arcname=base + "/" + rel)
        for full, arc in _package_files():
            t.add(full, arcname=base + "/" + arc)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
