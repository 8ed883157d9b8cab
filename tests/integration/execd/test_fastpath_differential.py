#!/usr/bin/env python3
"""execd's direct exec (fastpath.c) against `bash -c`, over a generated corpus of command lines.

Each command line runs twice: through a real sbx-execd's `POST /command` (which execs plain
words itself and hands everything else to bash) and as `bash -c LINE` started here, with the
same environment, directory and stdin (/dev/null). Output (split into lines as execd's events
are), stderr and the exit status must be the same. The corpus mixes what the fast path takes
(plain words naming programs, some of them odd: scripts without `#!`, a missing interpreter,
files that are not executable, names bash treats specially) with every piece of shell syntax
it must leave to bash: quotes, escapes, globs, variables, tildes, redirections, `;`, `&&`,
pipes, `$(...)`, comments, unicode, empty arguments. The daemon's debug log says which path
each took; the test also checks that the fast path was taken where it should be.

usage: test_fastpath_differential.py SBX_EXECD
"""
from __future__ import annotations

import ctypes
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SKIP, Execd, check_contract  # noqa: E402

SHELL = "/bin/bash"
SEED = 20261127
GENERATED = 700


@dataclass(frozen=True)
class Outcome:
    code: int
    out: list[str]
    err: list[str]


def lines(data: bytes) -> list[str]:
    """Bytes as execd streams them: one event per line (\\n, \\r or \\r\\n), an empty line as
    "\\n", a last line without its newline as it is."""
    out: list[str] = []
    start = 0
    i = 0
    while i < len(data):
        c = data[i]
        if c in (10, 13):
            out.append(data[start:i].decode(errors="replace") or "\n")
            if c == 13 and i + 1 < len(data) and data[i + 1] == 10:
                i += 1
            start = i + 1
        i += 1
    if start < len(data):
        out.append(data[start:].decode(errors="replace"))
    return out


class World:
    """A directory to run in (a few files for globs) and a bin directory on PATH holding
    programs the fast path must get right or leave to bash."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="execd-fastpath-%d-" % os.getpid())
        self.cwd = os.path.join(self.root, "work")
        self.bin = os.path.join(self.root, "bin")
        self.home = os.path.join(self.root, "home")
        for d in (self.cwd, self.bin, self.home, os.path.join(self.cwd, "sub")):
            os.makedirs(d, exist_ok=True)
        for name in ("a.txt", "b.txt", "c.log", "sp ace", "h\u00e9llo", "-n"):
            with open(os.path.join(self.cwd, name), "w") as f:
                f.write(name + "\n")
        self.prog("noshebang", "echo no-shebang \"$#\" \"$1\"\n")  # ENOEXEC: bash runs it
        self.prog("shebang", "#!/bin/sh\necho shebang \"$0\" \"$@\"\nexit 3\n")
        self.prog("badinterp", "#!/nonexistent/interp\necho never\n")
        self.prog("errout", "#!/bin/sh\necho to-stderr >&2\necho to-stdout\nexit 7\n")
        self.prog("killself", "#!/bin/sh\nkill -TERM $$\n")
        self.prog("notexec", "echo not executable\n", mode=0o644)
        self.prog("%1", "#!/bin/sh\necho percent-one\n")
        self.prog("a=b", "#!/bin/sh\necho assignment-named\n")
        os.makedirs(os.path.join(self.bin, "adir"), exist_ok=True)  # bash skips directories
        self.prog("ls.sh", "#!/bin/sh\necho wrapper\n")
        self.env = {
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": self.home,
            "LANG": "C.UTF-8",
            "X": "value of x",
            "EMPTY": "",
            "PWD": self.cwd,
            "SHLVL": "1",
        }

    def prog(self, name: str, text: str, mode: int = 0o755) -> None:
        path = os.path.join(self.bin, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)

    def bash(self, line: str) -> Outcome:
        p = subprocess.run([SHELL, "-c", line], env=self.env, cwd=self.cwd,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                           check=False, start_new_session=True,  # its own group, as execd's
                           preexec_fn=default_libc_signals)
        code = p.returncode if p.returncode >= 0 else -1  # execd: -1 for a signal
        return Outcome(code, lines(p.stdout), lines(p.stderr))


def default_libc_signals() -> None:
    """In the reference bash's child: glibc's internal signals 32 and 33 back to SIG_DFL. A
    parent that started us with posix_spawn (GNU make does, so `make test` -> ctest -> here)
    left them ignored, and an ignored signal stays ignored across exec: the reference would
    show SigIgn bits that a shell started by a clean parent does not have. glibc's sigaction
    refuses these two, so rt_sigaction is called directly (a zeroed struct: SIG_DFL)."""
    nr = {"x86_64": 13, "aarch64": 134}.get(os.uname().machine)  # SYS_rt_sigaction
    if nr is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    act = ctypes.create_string_buffer(32)
    for sig in (32, 33):
        libc.syscall(nr, sig, act, None, 8)


def via_execd(ex: Execd, line: str, cwd: str) -> Outcome:
    st, ev = ex.stream("/command", {"command": line, "cwd": cwd})
    if st != 200:
        raise AssertionError(f"{line!r}: status {st} {ev!r}")
    _, code, out, err = check_contract(ev)
    return Outcome(code, out, err)


# ---- the corpus ----

# Commands the fast path may take (plain words, a program on PATH) and ones that only look so.
PROGRAMS = ["ls", "cat", "/bin/echo", "/usr/bin/printf", "basename", "dirname", "expr", "seq",
            "head", "wc", "sort", "uniq", "id", "true", "false", "/bin/true", "/bin/false",
            "test", "/usr/bin/test", "/usr/bin/[", "echo", "printf", "env", "/usr/bin/env",
            "noshebang", "shebang", "badinterp", "errout", "killself", "notexec",
            "%1", "adir", "ls.sh", "no-such-command", "/no/such/path", "./shebang", "bin/x",
            "..", ".", "type", "command", "exec", "cd", "pwd", "hash",
            "nohup", "nice", "timeout"]
PLAIN_ARGS = ["a", "-n", "-e", "--", "-l", "-1", "x=y", "a:b", "1,2", "@x", "%s", "%d", "^",
              "+", ".", "..", "/", "/usr", "a.txt", "b.txt", "sub", "nothere", "3", "0", "-d",
              "--help=x", "A_B", "=", "-", "%", "a^b", "/proc/self/cmdline", "1", "5", "+2",
              "/dev/null"]
SHELL_ARGS = ["'a b'", '"a b"', "''", '""', '"$X"', "$X", "${X:-d}", "${NOPE:-dflt}", "$EMPTY",
              '"$EMPTY"', "$1", "$#", "$?", "a\\ b", "\\\\", "\\n", "\\$X", "'\\n'", "*",
              "*.txt", "?.txt", "[ab]*", "/e*", "no*match", "~", "~/x", "~root", "a~",
              "h\u00e9llo", "\u65e5\u672c", "'\u00e9'", "#c", "a#b", "$(echo sub)", "`echo bt`",
              "$((1+2))", "{a,b}", "{1..3}", ">/dev/null", "2>&1", "2>/dev/null", "</dev/null",
              "1>&2", "&>/dev/null", "'$X'", '"\\$X"', "$'a\\tb'", "\\", "a\\", '"a\'b"',
              "$HOME", '"$HOME"', "${#X}", "!x", "a=b", "$'\\x41'"]
JOINERS = [" ; ", ";", " && ", " || ", " | ", "|", " & wait; ", "\n"]
SEPARATORS = [" ", "  ", "\t", " \t "]
HAND_WRITTEN = [
    " ", "\t", "ls", "  ls  ", "ls\t-d\tsub", "ls -d /", "cat a.txt", "cat a.txt b.txt",
    "ls nothere", "noshebang", "noshebang one two", "shebang", "shebang x y", "badinterp",
"errout", "killself", "notexec", "%1", "a=b", "adir", "ls.sh",
    "no-such-command", "/no/such/path", "./shebang", "true", "false", "true --help",
    "false x", "echo hi", "printf %s x", "env", "/usr/bin/env", "test -d sub",
    "/usr/bin/test -d sub", "/usr/bin/[ -d sub ]", "expr 1 + 2", "expr 1 / 0", "seq 3",
    "seq -s, 3", "basename /a/b.txt .txt", "dirname /a/b", "head -c 3 a.txt", "wc -c a.txt",
    "id -u", "ls /proc/self/fd", "cat /proc/self/cmdline", "grep SigIgn /proc/self/status",
    "grep SigBlk /proc/self/status", "grep -c . /proc/self/environ", "timeout 5 true",
    "nice -n 1 true", "nohup true", "stat -c %n a.txt", "ls -- -n", "cat -- -n",
    "ls a.txt\n", "ls\nls", "ls # comment", "#ls", "ls;", "(ls)", "{ ls; }",
    "ls | cat", "ls && ls", "{ time ls; } 2>&1 | wc -l", "exec ls", "command ls", "X=1 env", "cd sub",
    "cd sub && ls", "ls ~", "ls $HOME", "echo $SHLVL", "echo $PWD", "echo $OLDPWD",
    "echo $_", "env -0", "ls -d h\u00e9llo", "ls -d 'sp ace'", "ls -d sp\\ ace",
]


def generate(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    for _ in range(n):
        words = [rng.choice(PROGRAMS)]
        for _ in range(rng.randint(0, 4)):
            pool = PLAIN_ARGS if rng.random() < 0.6 else SHELL_ARGS
            words.append(rng.choice(pool))
        line = words[0]
        for w in words[1:]:
            line += rng.choice(SEPARATORS) + w
        if rng.random() < 0.15:
            line += rng.choice(JOINERS) + rng.choice(PROGRAMS) + " " + rng.choice(PLAIN_ARGS)
        if rng.random() < 0.1:
            line = rng.choice(SEPARATORS) + line + rng.choice(SEPARATORS)
        out.append(line)
    return out


CONCURRENT = re.compile(r"\||(?<![<>])&(?!>)")  # a pipe or `&` (not `>&`, `&>`)


def normalise(line: str, o: Outcome) -> Outcome:
    """What may differ without being the fast path's doing: bash orders the environment its own
    way (docs/execd.md), and the stderr of processes running at once (a pipeline, `&`)
    interleaves in any order, even inside a line: then only its bytes are compared, and the
    number of lines (one per newline, which interleaving does not change; where the newlines
    fall it does, so an empty line, the event "\n", is in one run and not in another)."""
    out, err = o.out, o.err
    if "env" in line:
        out = sorted("\n".join(out).replace("\0", "\n").split("\n"))
    if CONCURRENT.search(line):
        err = ["%d lines" % len(err)] + sorted("".join(x for x in err if x != "\n"))
    return Outcome(o.code, out, err)


class DirectExecs:
    """Direct execs in the daemon's debug log since the last look."""

    def __init__(self, ex: Execd) -> None:
        self.log = open(os.path.join(ex.tmp, "execd.log"), "rb")

    def since_last(self) -> int:
        return len(re.findall(rb"direct exec of [^\n]*: started", self.log.read()))


def main() -> int:
    if not os.path.exists(SHELL):
        print("SKIP: no /bin/bash")
        return SKIP
    world = World()
    ex = Execd(sys.argv[1], args=["--log-level", "debug"], env=world.env, external_ok=False)
    failures: list[str] = []
    fast = 0
    try:
        corpus = HAND_WRITTEN + generate(random.Random(SEED), GENERATED)
        direct = DirectExecs(ex)
        for line in corpus:
            got = via_execd(ex, line, world.cwd)
            took_fast = direct.since_last() > 0
            fast += took_fast
            want = world.bash(line)
            got, want = normalise(line, got), normalise(line, want)
            if got != want:
                failures.append(f"{line!r} ({'direct exec' if took_fast else 'bash'}):\n"
                                f"  execd   {str(got)[:1500]}\n  bash -c {str(want)[:1500]}")
        print(f"{len(corpus)} command lines, {fast} through the direct exec, "
              f"{len(failures)} differences")
        # plain words naming a program on PATH: the fast path, or the corpus tests little
        if fast < 50:
            failures.append(f"only {fast} command lines took the direct exec")
        rc = ex.stop()
        if rc != 0:
            failures.append(f"execd exit code {rc}:\n{ex.read_log()[-3000:]}")
    finally:
        if ex.proc and ex.proc.poll() is None:
            ex.stop()
        shutil.rmtree(world.root, ignore_errors=True)
        shutil.rmtree(ex.tmp, ignore_errors=True)
    for f in failures[:40]:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
