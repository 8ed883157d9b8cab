#!/usr/bin/env python3
"""sbx-execd --install DEST: the binary copied to DEST (0755, the same bytes, no temp file
left), replacing a file already there; exit 0. A DEST in a missing directory fails (exit 1)
with a message naming it. What the kubernetes provider's init container runs."""
import filecmp
import os
import stat
import subprocess
import sys
import tempfile


def check(cond, what):
    if not cond:
        print("FAIL: %s" % what)
        sys.exit(1)


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        dest = os.path.join(d, "sbx-execd")
        with open(dest, "w") as f:
            f.write("old")
        p = subprocess.run([binary, "--install", dest], capture_output=True, text=True,
                           timeout=30)
        check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr))
        check(filecmp.cmp(binary, dest, shallow=False), "same bytes")
        check(stat.S_IMODE(os.stat(dest).st_mode) == 0o755, "mode 0755")
        check(os.listdir(d) == ["sbx-execd"], "no temp file left: %s" % os.listdir(d))
        v = subprocess.run([dest, "--version"], capture_output=True, text=True, timeout=30)
        check(v.returncode == 0 and v.stdout.startswith("sbx-execd "), "the copy runs")
        bad = os.path.join(d, "missing", "sbx-execd")
        p = subprocess.run([binary, "--install", bad], capture_output=True, text=True,
                           timeout=30)
        check(p.returncode == 1 and "missing" in p.stderr, "a bad DEST fails: %r" % p.stderr)
        h = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
        check("--install DEST" in h.stdout, "--help names --install")
    print("ok   --install")


if __name__ == "__main__":
    main()
