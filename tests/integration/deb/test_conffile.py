#!/usr/bin/env python3
"""packaging/sbx.conf (the package's /etc/sbx/sbx.conf, and sbx.conf(5)) against the server:

- it names every key the server reads (config.c's groups and each provider's keys) and no
  other, so a key added to the code without the file fails here, naming it;
- as shipped (every key commented out) it parses and changes nothing;
- with every key uncommented it still parses (no unknown key, no wrong type) and each value it
  shows equals the server's embedded default.

  test_conffile.py CONF_PROBE SBX_CONF
"""
import re
import subprocess
import sys
import tempfile

probe, conf = sys.argv[1], sys.argv[2]
fails = 0


def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += 0 if ok else 1


def file_keys(text):
    """The dotted keys the file shows (commented or not), in order."""
    keys, groups = [], []
    for n, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if m := re.match(r"^#?([a-z_]+) = \{$", s):
            groups.append(m.group(1))
        elif re.match(r"^#?\};$", s):
            groups.pop()
        elif m := re.match(r"^#([a-z_]+) = (.*);$", s):
            keys.append(".".join(groups + [m.group(1)]))
        elif s and not s.startswith("# ") and s != "#":
            sys.exit(f"FAIL: {conf}:{n}: not a comment, a commented key or a group: {line!r}")
    return keys


def uncomment(text):
    return "\n".join(re.sub(r"^(\s*)#(?=[a-z_]+ = |\};)", r"\1", l) for l in text.split("\n"))


def values(path):
    r = subprocess.run([probe, "values", path], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    vals = {}
    for line in r.stdout.splitlines():
        k, v = line.split("=", 1)
        vals[k] = vals[k] + "," + v if k in vals else v
    return vals, ""


text = open(conf, encoding="utf-8").read()
code = subprocess.run([probe, "keys"], check=True, capture_output=True, text=True).stdout.split()
check(len(code) > 40, f"the server reads {len(code)} keys")
shown = file_keys(text)
dups = sorted({k for k in shown if shown.count(k) > 1})
check(not dups, f"each key shown once (twice: {dups})")
missing = [k for k in code if k not in shown]
check(not missing, "every key the server reads is in sbx.conf" +
      (f"; missing (add each, commented out, with its default and a line saying what it "
       f"does): {missing}" if missing else ""))
extra = [k for k in shown if k not in code]
check(not extra, "sbx.conf shows no key the server does not read" +
      (f"; unknown: {extra}" if extra else ""))

defaults, _ = values("-")
shipped, err = values(conf)
check(shipped == defaults, f"as shipped it parses and changes no default {err}")

with tempfile.NamedTemporaryFile("w", suffix=".conf") as f:
    f.write(uncomment(text))
    f.flush()
    full, err = values(f.name)
    check(full is not None, f"every key uncommented, it still parses {err}")
    # The defaults shown must be the server's (keys without one show an example value).
    for k, v in (defaults or {}).items():
        check(full is not None and full.get(k) == v,
              f"{k}: the file shows the default {v!r} (shown: {full and full.get(k)!r})")

sys.exit(1 if fails else 0)
