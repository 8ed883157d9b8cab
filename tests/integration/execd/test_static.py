#!/usr/bin/env python3
"""The release sbx-execd is a static ELF (no PT_INTERP, no PT_DYNAMIC: it runs in any image)
and idles in at most 2 MiB of RSS."""
import struct
import sys
import time

from harness import SKIP, Execd, Fail, check, rss_kib


def program_header_types(path):
    with open(path, "rb") as f:
        data = f.read(1 << 20)
    check(data[:4] == b"\x7fELF" and data[4] == 2, "not a 64-bit ELF")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]


def main():
    binary, static = sys.argv[1], sys.argv[2]
    if static != "ON":
        print("SKIP: this build links sbx-execd dynamically (sanitizers); the release build "
              "is the static one")
        sys.exit(SKIP)
    try:
        types = program_header_types(binary)
        check(3 not in types, "PT_INTERP present: not static")
        check(2 not in types, "PT_DYNAMIC present: not static")
        ex = Execd(binary, external_ok=False, env={})
        try:
            for _ in range(50):
                ex.request("GET", "/ping")
            st, ev = ex.stream("/command", {"command": "echo hi"})
            check(st == 200 and ev[1]["text"] == "hi", "static execd runs commands")
            time.sleep(0.2)
            rss = rss_kib(ex.pid)
            print("     idle RSS %d KiB" % rss)
            check(rss <= 2048, "idle RSS %d KiB > 2 MiB" % rss)
            check(ex.stop() == 0, "exit code")
        finally:
            ex.close()
    except Fail as e:
        print("FAIL: %s" % e)
        sys.exit(1)
    print("ok   static ELF, idle RSS")


if __name__ == "__main__":
    main()
