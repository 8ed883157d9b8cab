#!/usr/bin/env python3
"""sbx-execd as PID 1 of a pid namespace (as in a sandbox): orphans are reaped, SIGTERM is
forwarded to every process and execd exits cleanly."""
import os
import signal
import subprocess
import sys
import time

from harness import SKIP, Execd, Fail, check, children_of, wait_until


def states_of_children(pid):
    out = []
    for c in children_of(pid):
        try:
            with open("/proc/%d/stat" % c) as f:
                out.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            pass
    return out


def main():
    binary = sys.argv[1]
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                      capture_output=True).returncode != 0:
        print("SKIP: cannot create a pid namespace here (unshare --pid failed)")
        sys.exit(SKIP)
    ex = Execd(binary, external_ok=False,
               wrapper=("unshare", "--pid", "--fork", "--mount-proc"))
    try:
        wait_until(lambda: len(children_of(ex.pid)) == 1, 5, "execd under unshare")
        execd = children_of(ex.pid)[0]
        st, ev = ex.stream("/command", {"command": "echo $$ $PPID; cat /proc/1/comm"})
        check(st == 200 and ev[2]["text"] == "sbx-execd", "execd is not PID 1: %r" % ev)
        # orphans: each (sleep &) subshell exits at once, its sleep is re-parented to PID 1
        cmd = "for i in 1 2 3 4 5; do (sleep 0.3 &); done; sleep 30"
        st, ev = ex.stream("/command", {"command": cmd, "background": True})
        wait_until(lambda: len(children_of(execd)) >= 6, 5, "orphans re-parented to PID 1")
        time.sleep(1.0)
        states = states_of_children(execd)
        check("Z" not in states, "zombies not reaped by PID 1: %r" % states)
        check(len(children_of(execd)) == 1, "orphans still there: %r" % states)
        # a process that ignores SIGTERM is killed after the grace period
        ex.stream("/command", {"command": "trap '' TERM; sleep 100", "background": True})
        time.sleep(0.3)
        t0 = time.time()
        os.kill(execd, signal.SIGTERM)
        rc = ex.proc.wait(20)
        check(rc == 0, "execd as PID 1 exit code %d\n%s" % (rc, ex.read_log()))
        check(time.time() - t0 < 10, "stop took %.1fs" % (time.time() - t0))
        print("ok   pid1: reaping and SIGTERM", flush=True)
    except Fail as e:
        print("FAIL: %s\n%s" % (e, ex.read_log()[-3000:]))
        sys.exit(1)
    finally:
        ex.close()


if __name__ == "__main__":
    main()
