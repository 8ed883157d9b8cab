"""sudo for a sandbox's desktop user: asks execd (the sandbox's PID 1) to run the command as
root once the password checks out (src/execd/sudo.c says why there is no setuid sudo). Speaks
sudo's common options; `/usr/local/bin/sudo` of sbx's OSWorld image runs it.

    sudo [-S] [-k|-K] [-v] [-n] [-E] [-H] [-i|-s] [-u USER] [-p PROMPT] [--] [COMMAND...]
"""
import getpass
import json
import os
import signal
import socket
import sys

SOCK = "/run/sbx-sudo.sock"
TRIES = 3
USAGE = ("usage: sudo -h | -K | -k | -V\n"
         "usage: sudo -v [-knS] [-p prompt] [-u user]\n"
         "usage: sudo -l [-knS] [-p prompt] [-u user]\n"
         "usage: sudo [-EHknS] [-i | -s] [-p prompt] [-u user] [--] [command [arg ...]]\n")


def die(msg, code=1):
    sys.stderr.write("sudo: %s\n" % msg)
    sys.exit(code)


def parse(argv):
    o = {"stdin": False, "user": "root", "prompt": None, "validate": False, "list": False,
         "login": False, "shell": False, "reset": False, "noninteractive": False,
         "preserve": False}
    i = 0
    flags = {"S": "stdin", "v": "validate", "l": "list", "i": "login", "s": "shell",
             "k": "reset", "K": "reset", "n": "noninteractive", "E": "preserve", "H": None,
             "b": None}
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        if a in ("-V", "--version"):
            sys.stdout.write("Sudo version 1.9 (sbx: through execd, no setuid)\n")
            sys.exit(0)
        if not a.startswith("-") or a == "-":
            break
        j = 1
        while j < len(a):
            f = a[j]
            if f in ("u", "p", "g", "C", "D", "h", "r", "t", "T", "U"):
                val = a[j + 1:] or (argv[i + 1] if i + 1 < len(argv) else None)
                if val is None:
                    die("option requires an argument -- '%s'\n%s" % (f, USAGE.rstrip()))
                if not a[j + 1:]:
                    i += 1
                if f == "u":
                    o["user"] = val
                elif f == "p":
                    o["prompt"] = val
                else:
                    die("option -%s is not supported here" % f)
                break
            if f not in flags:
                die("invalid option -- '%s'\n%s" % (f, USAGE.rstrip()))
            if flags[f]:
                o[flags[f]] = True
            j += 1
        i += 1
    return o, argv[i:]


def command_of(o, rest):
    if o["login"] or o["shell"]:
        shell = "/bin/bash" if o["login"] else os.environ.get("SHELL", "/bin/sh")
        base = [shell, "-l"] if o["login"] else [shell]
        return base + (["-c", " ".join(rest)] if rest else [])
    return rest


def ask(o, user, attempt):
    prompt = o["prompt"] or "[sudo] password for %s: " % user
    prompt = prompt.replace("%p", user).replace("%u", user)
    if o["stdin"]:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        line = read_line(0)
        if line is None:
            die("no password was provided" if attempt == 0 else
                "%d incorrect password attempt%s" % (attempt, "s" if attempt > 1 else ""))
        return line
    if o["noninteractive"]:
        die("a password is required")
    try:
        return getpass.getpass(prompt)
    except (EOFError, OSError):
        die("a terminal is required to read the password; either use the -S option to read "
            "from standard input or configure an askpass helper")
    return ""


def read_line(fd):
    """One line of fd, byte by byte: what follows it is the command's input, not ours."""
    out = bytearray()
    while True:
        b = os.read(fd, 1)
        if not b:
            return out.decode(errors="replace") if out else None
        if b == b"\n":
            return out.decode(errors="replace")
        out += b


def request(msg, fds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(SOCK)
    except OSError as e:
        die("cannot reach the sandbox's execd (%s): is the desktop running?" % e.strerror)
    socket.send_fds(s, [json.dumps(msg).encode()], fds)
    return s


def answer(s):
    data = s.recv(65536)
    return json.loads(data) if data else {}


def main():
    o, rest = parse(sys.argv[1:])
    if o["reset"] and not rest and not o["validate"]:
        return 0
    if o["list"]:
        me = getpass.getuser()
        sys.stdout.write("User %s may run the following commands on this host:\n"
                         "    (ALL : ALL) ALL\n" % me)
        return 0
    cmd = command_of(o, rest)
    if not cmd and not o["validate"]:
        sys.stderr.write(USAGE)
        return 1
    me = getpass.getuser()
    env = dict(os.environ) if o["preserve"] else {
        k: v for k, v in os.environ.items()
        if k in ("DISPLAY", "TERM", "COLORTERM", "LANG", "LANGUAGE", "XAUTHORITY",
                 "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "COLORS", "LS_COLORS")
        or k.startswith("LC_")}
    msg = {"argv": cmd, "user": o["user"], "cwd": os.getcwd(), "env": env}
    if o["validate"]:
        msg["validate"] = True
    for attempt in range(TRIES):
        if os.getuid() != 0:
            msg["password"] = ask(o, me, attempt)
        s = request(msg, [0, 1, 2])
        a = answer(s)
        if a.get("code") == "SUDO_PASSWORD" and attempt + 1 < TRIES:
            sys.stderr.write("Sorry, try again.\n")
            s.close()
            continue
        if a.get("code") == "SUDO_PASSWORD":
            die("%d incorrect password attempts" % TRIES)
        if "code" in a:
            die(a.get("message", a["code"]))
        if "status" in a:
            return a["status"]
        return wait(s)
    return 1


def wait(s):
    def forward(sig, _frame):
        try:
            s.send(json.dumps({"kill": sig}).encode())
        except OSError:
            pass
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    while True:
        try:
            a = answer(s)
        except InterruptedError:
            continue
        if "signal" in a:
            signal.signal(a["signal"], signal.SIG_DFL)
            os.kill(os.getpid(), a["signal"])
            return 128 + a["signal"]
        return int(a.get("status", 1))


if __name__ == "__main__":
    sys.exit(main())
