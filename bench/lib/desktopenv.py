"""Section 9 (desktopenv): OSWorld's loop on sbx, through the Python SDK's DesktopEnv against a
server of the native provider (the host image's desktop): reset of a one-step task (a fresh
sandbox with a 1280x800 desktop, its OSWorld API up, the step run), a step with a screenshot
observation (pause 0), an evaluate, the memory of an idle environment, and the reset time as
more environments reset at once.

  desktopenv.py --work W --url URL --api-key KEY --mode quick|full

OSWorld's own reset is a VM snapshot revert, >= 60 s (reference section 8): a published figure,
not run here.
"""
import argparse
import concurrent.futures
import os
import shutil
import statistics
import sys
import time

import api
import bench
import desktop as desk

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))

import sbx  # noqa: E402
from sbx.desktop_env import DesktopEnv  # noqa: E402

SECTION = "desktopenv"
TASK = {
    "id": "bench-one-step", "instruction": "Write ok into ~/work/out.txt.",
    "config": [{"type": "execute", "parameters": {"command": "mkdir -p ~/work", "shell": True}}],
    "evaluator": {"func": "exact_match",
                  "result": {"type": "vm_command_line", "command": "cat ~/work/out.txt",
                             "shell": True},
                  "expected": {"type": "rule", "rules": {"expected": "ok\n"}}},
}


def timed_list(fn, n):
    out, codes, err = [], [], None
    for _ in range(n):
        t0 = time.monotonic()
        try:
            fn()
            codes.append(0)
        except (sbx.SbxError, OSError, RuntimeError, ValueError) as e:
            codes.append(1)
            err = err or str(e)[:300]
        out.append(time.monotonic() - t0)
    return out, codes, err


def rec(work, rid, variant, what, data, target):
    s, codes, err = data
    r = api.latency_record(SECTION, rid, variant, what, s, codes,
                           {"ratio_key": rid, **({"first_error": err} if err else {})})
    ok = [x for x, c in zip(s, codes) if c == 0]
    if ok and target:
        p50 = statistics.median(ok)
        r["facts"] = {"issue target": "%s: **%s** (p50 %.3f s)" % (
            target[0], "met" if p50 <= target[1] else "missed", p50)}
    api.record(work, r)


def sandbox_pss_kib(sid):
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cgroup" % d) as f:
                    if ("/sbx/" + sid) in f.read():
                        pids.append(int(d))
            except OSError:
                pass
    return desk.pss_kib(pids), len(pids)


def env_for(client):
    return DesktopEnv(provider_name=None, client=client, action_space="computer_13",
                      screen_size=(1280, 800), require_a11y_tree=False, memory="1Gi", cpu="1",
                      cache_dir=os.path.join(os.environ.get("TMPDIR", "/tmp"), "sbx-bench-cache"))


def parallel_resets(client, k):
    """Reset times of k environments resetting at once."""
    envs = [env_for(client) for _ in range(k)]

    def one(e):
        t0 = time.monotonic()
        e.reset(task_config=TASK)
        return time.monotonic() - t0
    try:
        with concurrent.futures.ThreadPoolExecutor(k) as pool:
            return list(pool.map(one, envs))
    finally:
        for e in envs:
            e.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--api-key", required=True)
    ap.add_argument("--mode", default="quick")
    a = ap.parse_args()
    full = a.mode == "full"
    if not shutil.which("Xvnc"):
        bench.write_record(a.work, {"section": SECTION, "id": "desktopenv.reset", "tool": "sbx",
                                    "variant": "", "what": "", "kind": "latency",
                                    "status": "not_measured",
                                    "reason": "Xvnc not installed (scripts/deps.sh)"})
        return 0
    client = sbx.Client(a.url.replace("http://", ""), a.api_key)
    api.PROVIDER["name"] = "native"
    env = env_for(client)
    try:
        rec(a.work, "desktopenv.reset", "DesktopEnv.reset(one-step task)",
            "reset: a fresh sandbox with a 1280x800 desktop, its OSWorld API up, one setup "
            "step run", timed_list(lambda: env.reset(task_config=TASK), 20 if full else 5),
            ("<= 1 s", 1.0))
        xs = iter(range(10 ** 9))

        def step():
            i = next(xs)
            obs, _, _, _ = env.step({"action_type": "MOVE_TO",
                                     "parameters": {"x": 100 + i % 500, "y": 300}}, pause=0)
            if obs["screenshot"][:4] != b"\x89PNG":
                raise ValueError("no screenshot")
        rec(a.work, "desktopenv.step", "DesktopEnv.step(computer_13 MOVE_TO, pause=0)",
            "a step: the action, then the observation (a 1280x800 PNG screenshot)",
            timed_list(step, 100 if full else 20), ("<= 20 ms", 0.020))
        env.step({"action_type": "TYPING", "parameters": {"text": "x"}}, pause=0)
        rec(a.work, "desktopenv.evaluate", "DesktopEnv.evaluate() (vm_command_line + "
            "exact_match)", "evaluate: a command in the sandbox and the metric",
            timed_list(env.evaluate, 20 if full else 5), None)
        time.sleep(1.0)
        kib, nproc = sandbox_pss_kib(env.sandbox.id)
        api.record(a.work, {
            "section": SECTION, "id": "desktopenv.pss", "tool": "sbx", "kind": "curve",
            "variant": "idle environment", "status": "measured" if kib else "failed",
            "what": "memory of an idle environment: PSS of every process of its sandbox "
                    "(execd, the desktop, OSWorld's API server; %d processes)" % nproc,
            "facts": {"PSS": "%.1f MiB" % (kib / 1024.0),
                      "OSWorld (reference)": "a VM per environment, a few GB each"}})
        env.close()
        counts = (1, 2, 4, 8, 16) if full else (1, 4)
        facts = {}
        for k in counts:
            ts = parallel_resets(client, k)
            facts["%d at once" % k] = "reset p50 %.2f s, max %.2f s" % (statistics.median(ts),
                                                                       max(ts))
        api.record(a.work, {
            "section": SECTION, "id": "desktopenv.parallel", "tool": "sbx", "kind": "curve",
            "variant": "environments resetting at once", "status": "measured",
            "what": "reset time as the number of environments resetting at once grows "
                    "(2 cores)", "facts": facts})
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
