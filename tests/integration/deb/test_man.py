#!/usr/bin/env python3
"""The man pages against their sources (packaging/genman.py makes them):

- sbx(1) lists every verb of `sbx help` with its summary; every verb has its sbx-VERB(1) whose
  rendered text holds every paragraph of `sbx VERB --help` (words and order; the layout is
  roff's), so a help text and its page cannot drift;
- sbx.conf(5) shows every key of packaging/sbx.conf with its default;
- every page renders with man-db and groff without a warning;
- the pages the build made (<build>/man, what the package installs) are those the sources
  make now (no stale page);
- and the comparison itself catches a page that lost a line of its help.

  test_man.py SBX_BINARY PACKAGING_DIR BUILD_MAN_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

sbx, packaging, built = sys.argv[1:4]
fails = 0


def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    fails += 0 if ok else 1


def norm(text):
    return " ".join(text.split())


def render(page):
    """The page as man shows it (ASCII, no formatting), and the warnings of man and groff."""
    env = dict(os.environ, LC_ALL="C", MANWIDTH="100", MAN_KEEP_FORMATTING="")
    r = subprocess.run(["man", "--warnings", "-E", "ascii", "-l", page], env=env,
                       capture_output=True, text=True)
    g = subprocess.run(["groff", "-man", "-Tascii", "-ww", "-z", page], capture_output=True,
                       text=True)
    return r.stdout, (r.stderr + g.stderr).strip(), r.returncode


def paragraphs(text):
    """`sbx VERB --help` as paragraphs of normalized text; Usage: lines lose the label."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        if block.startswith("Usage:"):
            block = re.sub(r"(^|\n)\s*(Usage:)?\s*", r"\1", block)
        out.append(norm(block))
    return out


def missing_paragraphs(help_text, page_text):
    page = norm(page_text)
    return [p for p in paragraphs(help_text) if p not in page]


def run(*args):
    return subprocess.run([sbx, *args], check=True, capture_output=True, text=True).stdout


with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(packaging, "genman.py"), sbx,
                    os.path.join(packaging, "sbx.conf"), tmp], check=True)
    overview = run("help")
    verbs = re.findall(r"^  ([a-z][a-z0-9-]*)\s+(.+)$",
                       overview.split("Commands:", 1)[1].split("\n\n", 1)[0], re.M)
    check(len(verbs) > 10, f"{len(verbs)} verbs in sbx help")
    names = sorted(os.listdir(tmp))
    want = sorted(["sbx.1", "sbx.conf.5"] + [f"sbx-{v}.1" for v, _ in verbs])
    check(names == want, f"one page per verb, sbx(1) and sbx.conf(5) (made: {names})")

    for name in names:
        text, warnings, rc = render(os.path.join(tmp, name))
        check(rc == 0 and not warnings and "NAME" in text,
              f"{name} renders without warnings {warnings!r}")

    text, _, _ = render(os.path.join(tmp, "sbx.1"))
    for verb, summary in verbs:
        check(norm(f"{verb} {summary}") in norm(text), f"sbx(1) lists {verb}: {summary}")

    for verb, summary in verbs:
        help_text = run(verb, "--help")
        text, _, _ = render(os.path.join(tmp, f"sbx-{verb}.1"))
        lost = missing_paragraphs(help_text, text)
        check(not lost and f"sbx-{verb} - {summary}" in norm(text),
              f"sbx-{verb}(1) has its summary and all of `sbx {verb} --help`" +
              (f"; not in the page: {lost}" if lost else ""))

    # The comparison is not vacuous: a page that lost one help line is caught.
    run_help = run("run", "--help")
    text, _, _ = render(os.path.join(tmp, "sbx-run.1"))
    line = next(l for l in run_help.split("\n") if "--pids" in l)
    desc = norm(line.split("  ")[-1] if "  " in line.strip() else line)
    damaged = norm(text).replace(desc, "")
    check(desc and missing_paragraphs(run_help, damaged),
          "a page missing one help line would fail this test")

    conf_text, _, _ = render(os.path.join(tmp, "sbx.conf.5"))
    conf = open(os.path.join(packaging, "sbx.conf"), encoding="utf-8").read()
    groups, keys = [], 0
    for line in conf.split("\n"):
        s = line.strip()
        if m := re.match(r"^#?([a-z_]+) = \{$", s):
            groups.append(m.group(1))
            check(".".join(groups) in conf_text, f"sbx.conf(5) has the group {'.'.join(groups)}")
        elif re.match(r"^#?\};$", s):
            groups.pop()
        elif m := re.match(r"^#([a-z_]+ = .*);$", s):
            keys += 1
            if norm(m.group(1)) not in norm(conf_text):
                check(False, f"sbx.conf(5) shows {'.'.join(groups)}: {m.group(1)}")
    check(keys > 40, f"sbx.conf(5) shows all {keys} keys of sbx.conf with their defaults")

    if os.path.isdir(built):
        for name in names:
            path = os.path.join(built, name)
            same = os.path.exists(path) and open(path).read() == open(os.path.join(tmp, name)).read()
            check(same, f"{built}/{name} is up to date")
    else:
        check(False, f"the build made no man pages in {built}")

sys.exit(1 if fails else 0)
