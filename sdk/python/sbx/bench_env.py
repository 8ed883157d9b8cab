"""Run OSWorld task files on sbx desktops: ``python3 -m sbx.bench_env TASKS... [options]``.

Each task gets a fresh environment (:class:`sbx.desktop_env.DesktopEnv`): reset, the agent's
actions step by step, evaluate. N environments run at once. Per task a result directory like
OSWorld's ``lib_run_single`` writes: ``result.txt`` (the score), ``traj.jsonl`` (a line per
step), a screenshot per step, ``recording.mp4`` with ``--record``, and ``error.txt`` when the
task could not be run. A summary (success rate per domain, reset/step/evaluate times) is
printed and written to ``summary.json``. A task whose ``result.txt`` exists is skipped, so a
run that crashed is resumed by running the same command again.

Agents: ``--agent module:callable`` names ``agent(observation, instruction) -> actions`` (an
action, a list of them, or None/[] to stop), called once per step with the last observation;
``--agent replay`` (the default) plays the list of actions recorded in the task file under
``"sbx_replay"`` or in ``<task>.replay.json`` next to it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import importlib
import json
import os
import statistics
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

from .desktop_env import DesktopEnv

Agent = Callable[[Dict[str, Any], str], Any]


def find_tasks(paths: List[str]) -> List[Tuple[str, str]]:
    """(domain, task file) for every task: files as given, directories searched for *.json
    (a task's domain is its directory's name, as in OSWorld's examples/<domain>/<id>.json)."""
    out: List[Tuple[str, str]] = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in sorted(os.walk(p)):
                for f in sorted(files):
                    if f.endswith(".json") and not f.endswith(".replay.json"):
                        out.append((os.path.basename(root), os.path.join(root, f)))
        elif os.path.isfile(p):
            out.append((os.path.basename(os.path.dirname(os.path.abspath(p))), p))
        else:
            raise SystemExit("bench_env: no such task file or directory: %s" % p)
    return out


def replay_actions(task_file: str, task: Dict[str, Any]) -> List[Any]:
    if "sbx_replay" in task:
        return list(task["sbx_replay"])
    side = task_file[:-len(".json")] + ".replay.json"
    if os.path.exists(side):
        with open(side) as f:
            return list(json.load(f))
    raise ValueError("the replay agent needs the task's actions (\"sbx_replay\" in the task, "
                     "or %s)" % os.path.basename(side))


def load_agent(spec: str) -> Optional[Agent]:
    if spec == "replay":
        return None
    mod, _, name = spec.partition(":")
    if not mod or not name:
        raise SystemExit("bench_env: --agent wants module:callable or replay, not %r" % spec)
    fn = getattr(importlib.import_module(mod), name)
    if not callable(fn):
        raise SystemExit("bench_env: %s is not callable" % spec)
    return fn


class Run:
    """One run of many tasks: options, the result root, the per-task records."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.agent = load_agent(a.agent)
        self.lock = threading.Lock()
        self.records: List[Dict[str, Any]] = []

    def task_dir(self, domain: str, tid: str) -> str:
        return os.path.join(self.a.results, self.a.action_space, domain, tid)

    def env(self) -> DesktopEnv:
        w, h = (int(x) for x in self.a.screen.lower().split("x"))
        return DesktopEnv(provider_name=self.a.provider, snapshot_name=self.a.image,
                          action_space=self.a.action_space, screen_size=(w, h),
                          cache_dir=self.a.cache, require_a11y_tree=self.a.a11y)

    def actions_for(self, task: Dict[str, Any], obs: Dict[str, Any],
                    replay: List[Any]) -> List[Any]:
        if self.agent is None:
            return [replay.pop(0)] if replay else []
        got = self.agent(obs, task.get("instruction") or "")
        if got is None:
            return []
        return list(got) if isinstance(got, list) else [got]

    def run_steps(self, env: DesktopEnv, task_file: str, task: Dict[str, Any],
                  obs: Dict[str, Any], out: str) -> List[float]:
        replay = replay_actions(task_file, task) if self.agent is None else []
        step_times: List[float] = []
        deadline = time.monotonic() + self.a.task_timeout
        n = 0
        with open(os.path.join(out, "traj.jsonl"), "w") as traj:
            while n < self.a.max_steps and time.monotonic() < deadline:
                actions = self.actions_for(task, obs, replay)
                if not actions:
                    break
                done = False
                for action in actions:
                    n += 1
                    t0 = time.monotonic()
                    obs, reward, done, info = env.step(action, self.a.pause)
                    step_times.append(time.monotonic() - t0 - self.a.pause)
                    stamp = datetime.datetime.now().strftime("%Y%m%d@%H%M%S%f")
                    shot = "step_%d_%s.png" % (n, stamp)
                    with open(os.path.join(out, shot), "wb") as f:
                        f.write(obs["screenshot"])
                    traj.write(json.dumps({"step_num": n, "action_timestamp": stamp,
                                           "action": action, "reward": reward, "done": done,
                                           "info": info, "screenshot_file": shot}) + "\n")
                    traj.flush()
                    if done:
                        break
                if done:
                    break
        return step_times

    def one(self, domain: str, task_file: str) -> Dict[str, Any]:
        with open(task_file) as f:
            task = json.load(f)
        tid = str(task.get("id") or os.path.basename(task_file)[:-5])
        out = self.task_dir(domain, tid)
        rec: Dict[str, Any] = {"domain": domain, "id": tid, "file": task_file}
        if os.path.exists(os.path.join(out, "result.txt")):
            with open(os.path.join(out, "result.txt")) as f:
                rec.update(score=float(f.read().strip() or 0), resumed=True)
            return rec
        os.makedirs(out, exist_ok=True)
        env = self.env()
        try:
            t0 = time.monotonic()
            obs = env.reset(task_config=task)
            rec["reset_s"] = time.monotonic() - t0
            if self.a.record:
                env.sandbox.desktop.record_start(fps=10)
            rec["step_s"] = self.run_steps(env, task_file, task, obs, out)
            if self.a.record:
                with open(os.path.join(out, "recording.mp4"), "wb") as f:
                    f.write(env.sandbox.desktop.record_stop())
            t0 = time.monotonic()
            rec["score"] = float(env.evaluate())
            rec["evaluate_s"] = time.monotonic() - t0
            with open(os.path.join(out, "result.txt"), "w") as f:
                f.write("%s\n" % rec["score"])
        except Exception as e:  # noqa: BLE001 - a task's failure is recorded, the run goes on
            rec.update(score=0.0, error="%s: %s" % (type(e).__name__, e))
            with open(os.path.join(out, "error.txt"), "w") as f:
                f.write(traceback.format_exc())
        finally:
            env.close()
        return rec

    def run(self, tasks: List[Tuple[str, str]]) -> List[Dict[str, Any]]:
        with concurrent.futures.ThreadPoolExecutor(self.a.parallel) as pool:
            futs = {pool.submit(self.one, d, f): (d, f) for d, f in tasks}
            for fut in concurrent.futures.as_completed(futs):
                rec = fut.result()
                with self.lock:
                    self.records.append(rec)
                state = ("resumed" if rec.get("resumed") else
                         "error: " + rec["error"] if "error" in rec else "done")
                print("%-14s %-40s %.2f  %s" % (rec["domain"][:14], rec["id"][:40],
                                                rec["score"], state), flush=True)
        return self.records


def _p50(xs: List[float]) -> Optional[float]:
    return round(statistics.median(xs), 4) if xs else None


def summary(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    domains: Dict[str, Dict[str, Any]] = {}
    for r in records:
        d = domains.setdefault(r["domain"], {"tasks": 0, "success": 0.0, "errors": 0})
        d["tasks"] += 1
        d["success"] += r["score"]
        d["errors"] += "error" in r
    for d in domains.values():
        d["success_rate"] = round(d["success"] / d["tasks"], 4)
    fresh = [r for r in records if not r.get("resumed")]
    steps = [s for r in fresh for s in r.get("step_s", [])]
    return {
        "tasks": len(records), "success_rate": round(
            sum(r["score"] for r in records) / len(records), 4) if records else None,
        "domains": domains,
        "reset_s_p50": _p50([r["reset_s"] for r in fresh if "reset_s" in r]),
        "step_s_p50": _p50(steps),
        "evaluate_s_p50": _p50([r["evaluate_s"] for r in fresh if "evaluate_s" in r]),
        "resumed": len(records) - len(fresh),
    }


def print_summary(s: Dict[str, Any]) -> None:
    print("\n%-20s %6s %8s %7s" % ("domain", "tasks", "success", "errors"))
    for name, d in sorted(s["domains"].items()):
        print("%-20s %6d %7.1f%% %7d" % (name, d["tasks"], 100 * d["success_rate"],
                                          d["errors"]))
    rate = s["success_rate"]
    print("%-20s %6d %7.1f%%" % ("all", s["tasks"], 100 * (rate or 0)))
    print("p50: reset %s s, step %s s (without the pause), evaluate %s s; %d resumed"
          % (s["reset_s_p50"], s["step_s_p50"], s["evaluate_s_p50"], s["resumed"]))


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python3 -m sbx.bench_env",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="+", help="task files or directories of them")
    ap.add_argument("--agent", default="replay", help="module:callable, or replay (default)")
    ap.add_argument("--results", default="results", help="result root (default ./results)")
    ap.add_argument("--parallel", type=int, default=1, help="environments at once")
    ap.add_argument("--action-space", default="pyautogui",
                    choices=["pyautogui", "computer_13", "claude_computer_use"])
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--task-timeout", type=float, default=600,
                    help="seconds of steps per task; then it is evaluated as it stands")
    ap.add_argument("--pause", type=float, default=0.5, help="seconds after each action")
    ap.add_argument("--screen", default="1920x1080")
    ap.add_argument("--provider", default=None)
    ap.add_argument("--image", default="host")
    ap.add_argument("--cache", default="cache")
    ap.add_argument("--record", action="store_true", help="an MP4 of each task's steps")
    ap.add_argument("--no-a11y", dest="a11y", action="store_false",
                    help="no accessibility tree in the observations")
    a = ap.parse_args(argv)
    if a.parallel < 1 or a.max_steps < 1:
        ap.error("--parallel and --max-steps must be at least 1")
    return a


def main(argv: Optional[List[str]] = None) -> int:
    a = parse_args(argv)
    tasks = find_tasks(a.tasks)
    if not tasks:
        print("bench_env: no task files found", file=sys.stderr)
        return 2
    records = Run(a).run(tasks)
    s = summary(records)
    os.makedirs(os.path.join(a.results, a.action_space), exist_ok=True)
    with open(os.path.join(a.results, a.action_space, "summary.json"), "w") as f:
        json.dump({"summary": s, "tasks": records}, f, indent=1, default=str)
    print_summary(s)
    return 0 if not any("error" in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
