#!/usr/bin/env python3
"""sbx.desktop_env.DesktopEnv against a real `sbx serve` (native provider, the host image's
desktop): OSWorld-format task files written for the test (no internet), solved by scripted
agents in each action space; evaluate gives 1.0 after and 0.0 before; infeasible tasks, list
metrics, the office-file metrics, setup steps and their failures, placeholders, parallel
environments with nothing left behind.

  test_desktop_env.py SBX_BINARY
"""
import concurrent.futures
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "integration", "server"))

import sbx  # noqa: E402
from sbx.desktop_env import DesktopEnv, EvaluationError, SetupError  # noqa: E402
from sbx.desktop_env import evaluate, setup  # noqa: E402
from harness import Server  # noqa: E402

SERVER = None
CACHE = None


def os_task(tid, solved_text="sbx-solved"):
    """An OSWorld-shaped task: a terminal to type into, scored on a file's content."""
    return {
        "id": tid, "snapshot": "os",
        "instruction": "Write %s into ~/work/out.txt from the terminal." % solved_text,
        "source": "test", "related_apps": ["os"], "proxy": False,
        "config": [
            {"type": "execute", "parameters": {"command": "mkdir -p ~/work", "shell": True}},
            {"type": "launch", "parameters": {"command": ["xterm", "-T", "task-term",
                                                          "-geometry", "80x20+0+0"]}},
            {"type": "execute_with_verification", "parameters": {
                "command": "true", "shell": True,
                "verification": {"window_exists": "task-term"}, "max_wait_time": 20,
                "check_interval": 0.2}},
            {"type": "activate_window", "parameters": {"window_name": "task-term"}},
        ],
        "evaluator": {
            "postconfig": [{"type": "sleep", "parameters": {"seconds": 0.2}}],
            "func": "exact_match",
            "result": {"type": "vm_command_line", "command": "cat ~/work/out.txt",
                       "shell": True},
            "expected": {"type": "rule", "rules": {"expected": solved_text + "\n"}},
        },
    }


# The agents' (and the gold files') Python, one line as a pyautogui action runs it: %(path)s is
# the file to write, %(wrong)s a slip that makes the answer wrong.
OFFICE_CODE = {
    "compare_table": "import openpyxl; wb = openpyxl.Workbook(); ws = wb.active; "
                     "ws.title = 'Scores'; [ws.append(r) for r in [['Name', 'Score'], "
                     "['ann', 3.5], ['bob', 4%(wrong)s]]]; ws.freeze_panes = 'A2'; "
                     "wb.save(%(path)r)",
    "compare_docx_files": "import docx; d = docx.Document(); d.add_heading('Minutes', 1); "
                          "d.add_paragraph('Present: ann, bob%(wrong)s'); "
                          "d.add_paragraph('Next meeting on Monday.'); d.save(%(path)r)",
    "compare_images": "from PIL import Image, ImageDraw; im = Image.new('RGB', (160, 120), "
                      "'white'); ImageDraw.Draw(im).rectangle((20, 20, 80%(wrong)s, 90), "
                      "fill='red'); im.save(%(path)r)",
}
OFFICE_TASKS = [  # id, metric, the file the agent makes, options, the wrong answer's slip
    ("t-office-table", "compare_table", "/root/office/scores.xlsx", {"rules": [
        {"type": "sheet_name"}, {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
        {"type": "freeze", "sheet_idx0": "RNScores", "sheet_idx1": "ENScores"},
        {"type": "check_cell", "sheet_idx": 0, "coordinate": "B2",
         "props": {"value": {"method": "approx:0.01", "ref": 3.5}}}]}, "0"),
    ("t-office-docx", "compare_docx_files", "/root/office/minutes.docx",
     {"ignore_blanks": False}, ", eve"),
    ("t-office-image", "compare_images", "/root/office/red.png", {}, " + 40"),
]


def office_task(tid, func, made, options):
    """An office-file task: the agent writes `made`; the gold file is <cache>/<tid>/gold.*."""
    return {
        "id": tid, "instruction": "Write %s." % made, "related_apps": ["os"],
        "config": [{"type": "execute", "parameters": {
            "command": "mkdir -p %s" % os.path.dirname(made), "shell": True}}],
        "evaluator": {
            "func": func, "options": options,
            "result": {"type": "vm_file", "path": made, "dest": os.path.basename(made)},
            "expected": {"type": "cache_file", "path": "gold" + os.path.splitext(made)[1]},
        },
    }


class DesktopEnvTest(unittest.TestCase):
    client = None

    @classmethod
    def setUpClass(cls):
        cls.client = sbx.Client("127.0.0.1:%d" % SERVER.port, SERVER.key)

    def env(self, **kw):
        kw.setdefault("screen_size", (1024, 768))
        kw.setdefault("cache_dir", CACHE)
        kw.setdefault("memory", "1Gi")
        return DesktopEnv(provider_name="native", client=self.client, **kw)

    def test_pyautogui_task(self):
        with self.env(action_space="pyautogui") as env:
            obs = env.reset(task_config=os_task("t-pyautogui"))
            self.assertEqual(obs["screenshot"][:8], b"\x89PNG\r\n\x1a\n")
            self.assertIn("desktop-frame", obs["accessibility_tree"])
            self.assertEqual(obs["instruction"],
                             "Write sbx-solved into ~/work/out.txt from the terminal.")
            self.assertIsNone(obs["terminal"])
            print("reset %.3f s (create %.3f s)" % (env.timings["reset"],
                                                    env.timings["create"]), flush=True)
            self.assertEqual(env.evaluate(), 0.0, "untouched: 0")
            obs, reward, done, info = env.step(
                "pyautogui.typewrite('echo sbx-solved > ~/work/out.txt\\n')", pause=0.5)
            self.assertEqual((reward, done, info), (0.0, False, {}))
            self.assertEqual(env.evaluate(), 1.0, "solved: 1")
            obs, _, done, info = env.step("DONE")
            self.assertEqual((done, info), (True, {"done": True}))

    def test_computer_13_task(self):
        with self.env(action_space="computer_13", require_terminal=True) as env:
            obs = env.reset(task_config=os_task("t-c13", "c13-ok"))
            self.assertIsNone(obs["terminal"])  # no gnome-terminal on an sbx desktop
            env.step({"action_type": "TYPING",
                      "parameters": {"text": "echo c13-ok > ~/work/out.txt\n"}}, pause=0.5)
            self.assertEqual(env.evaluate(), 1.0)

    def test_infeasible_and_fail(self):
        task = {"id": "t-inf", "instruction": "impossible", "config": [],
                "evaluator": {"func": "infeasible"}}
        with self.env() as env:
            env.reset(task_config=task)
            env.step("DONE")
            self.assertEqual(env.evaluate(), 0.0, "infeasible needs FAIL")
            env.step("FAIL")
            self.assertEqual(env.evaluate(), 1.0)
            # a feasible task ending in FAIL scores 0 however the state is
            env.reset(task_config=os_task("t-failed"))
            env.step("pyautogui.typewrite('echo sbx-solved > ~/work/out.txt\\n')", pause=0.5)
            self.assertEqual(env.evaluate(), 1.0)
            env.step("FAIL")
            self.assertEqual(env.evaluate(), 0.0)

    def test_lists_files_placeholders(self):
        os.makedirs(os.path.join(CACHE, "t-files"), exist_ok=True)  # <cache>/<task id>/
        local = os.path.join(CACHE, "t-files", "upload-src.txt")
        with open(local, "w") as f:
            f.write("line one\nline two\n")
        task = {
            "id": "t-files", "instruction": "files",
            "config": [
                {"type": "upload_file", "parameters": {"files": [
                    {"local_path": local, "path": "/root/in/a.txt"}]}},
                {"type": "execute", "parameters": {
                    "command": "echo {SCREEN_WIDTH}x{SCREEN_HEIGHT} {SCREEN_WIDTH_HALF} "
                               "> ~/size.txt", "shell": True}},
                {"type": "command", "parameters": {"command": ["cp", "/root/in/a.txt",
                                                               "/root/in/b.txt"],
                                                   "until": {"returncode": 0}}},
            ],
            "evaluator": {
                "func": ["compare_text_file", "check_include_exclude", "exact_match"],
                "conj": "and",
                "result": [{"type": "vm_file", "path": "/root/in/b.txt", "dest": "b.txt"},
                           {"type": "vm_command_line", "command": "cat ~/size.txt",
                            "shell": True},
                           {"type": "vm_screen_size"}],
                "expected": [{"type": "cache_file", "path": "upload-src.txt"},
                             {"type": "rule", "rules": {"include": ["1024x768 512"],
                                                        "exclude": ["{SCREEN"]}},
                             {"type": "rule", "rules": {"expected": {"width": 1024,
                                                                     "height": 768}}}],
            },
        }
        with self.env() as env:
            env.reset(task_config=task)
            self.assertEqual(env.evaluate(), 1.0)
            # `or` takes the first 1; `and` the first 0; a missing file scores 0
            env.evaluator = {"func": ["exact_match", "check_include_exclude"], "conj": "or",
                             "result": [{"type": "vm_command_line", "command": "echo no",
                                         "shell": True},
                                        {"type": "vm_command_line", "command": "echo yes",
                                         "shell": True}],
                             "expected": [{"type": "rule", "rules": {"expected": "x"}},
                                          {"type": "rule", "rules": {"include": ["yes"]}}]}
            self.assertEqual(env.evaluate(), 1.0)
            env.evaluator["conj"] = "and"
            self.assertEqual(env.evaluate(), 0.0)
            env.evaluator = {"func": "compare_text_file",
                             "result": {"type": "vm_file", "path": "/no/such", "dest": "x"},
                             "expected": {"type": "cache_file", "path": "upload-src.txt"}}
            self.assertEqual(env.evaluate(), 0.0)
            env.evaluator = {"func": "compare_pptx_files", "result": {"type": "rule",
                                                                      "rules": {}}}
            with self.assertRaises(EvaluationError) as e:
                env.evaluate()
            self.assertIn("compare_pptx_files", str(e.exception))
            # rule_relativeTime: dates from the sandbox's clock
            got = evaluate.GETTERS["rule_relativeTime"](env, {"rules": {
                "relativeTime": {"from": "tomorrow"},
                "expected": {"time": "{MonthFull} {DayD}, {Year}"}}})
            want = env.osworld("POST", "/execute", {"command": "date -d tomorrow '+%B %-d, %Y'",
                                                     "shell": True})["output"].strip()
            self.assertEqual(got["expected"]["time"], want)
            env.evaluator = {"func": "exact_match", "result": {"type": "vlc_config"},
                             "expected": {"type": "rule", "rules": {"expected": 1}}}
            with self.assertRaises(EvaluationError) as e:
                env.evaluate()
            self.assertIn("vlc_config", str(e.exception))

    def test_chromium_tabs(self):
        """chrome_open_tabs / chrome_close_tabs over Chromium's DevTools (port 1337 in the
        sandbox, through the router), open_tabs_info / active_url_from_accessTree /
        active_tab_info, is_expected_tabs / is_expected_active_tab; pages from a server in
        the sandbox (no internet)."""
        if not shutil.which("chromium"):
            self.skipTest("chromium not installed")
        site = "http://127.0.0.1:8000/"
        pages = " && ".join("echo '<title>page %s</title><h1>%s</h1>' > /tmp/site/%s.html"
                            % (n, n, n) for n in "abc")
        task = {
            "id": "t-chrome", "instruction": "Open c.html in a new tab.",
            "config": [
                {"type": "execute", "parameters": {"command": "mkdir -p /tmp/site && " + pages,
                                                   "shell": True}},
                {"type": "launch", "parameters": {"command": [
                    "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1",
                    "--directory", "/tmp/site"]}},
                {"type": "launch", "parameters": {"command": [
                    "chromium", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update",
                    "--force-renderer-accessibility", "--user-data-dir=/tmp/chrome-profile",
                    "--remote-debugging-port=1337", "--window-position=0,0",
                    "--window-size=1024,768"]}},
                {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [
                    site + "a.html", site + "b.html"]}},
            ],
            "evaluator": {
                "func": "is_expected_tabs",
                "result": {"type": "open_tabs_info"},
                "expected": {"type": "rule", "rules": {"type": "url", "urls": [
                    site + "a.html", site + "b.html", site + "c.html"]}},
            },
        }
        with self.env(action_space="pyautogui") as env:
            env.reset(task_config=task)
            tabs = sorted(t["url"] for t in evaluate.GETTERS["open_tabs_info"](env, {}))
            self.assertEqual(tabs, [site + "a.html", site + "b.html"],
                             "the tabs opened, the first one closed")
            self.assertEqual(env.evaluate(), 0.0, "c.html is not open yet")
            env.step("pyautogui.hotkey('ctrl', 't')", pause=2)
            env.step("pyautogui.hotkey('ctrl', 'l'); pyautogui.typewrite('127.0.0.1:8000/c.html');"
                     " pyautogui.press('enter')", pause=1)
            deadline = time.time() + 20
            while env.evaluate() != 1.0 and time.time() < deadline:
                time.sleep(0.5)
            self.assertEqual(env.evaluate(), 1.0, "c.html opened by the agent: %r, windows %r"
                             % (evaluate.GETTERS["open_tabs_info"](env, {}),
                                env.sandbox.desktop.windows()))
            env.evaluator = {"func": "is_expected_active_tab",
                             "result": {"type": "active_url_from_accessTree",
                                        "goto_prefix": "http://"},
                             "expected": {"type": "rule", "rules": {
                                 "type": "url", "url": site + "c.html"}}}
            self.assertEqual(env.evaluate(), 1.0, "the address bar shows c.html")
            info = evaluate.GETTERS["active_tab_info"](env, {"goto_prefix": "http://"})
            self.assertEqual((info["title"], info["url"]), ("page c", site + "c.html"))
            self.assertIn("<h1>c</h1>", info["content"], "the page's HTML over DevTools")
            setup.run_step(env, {"type": "chrome_close_tabs", "parameters": {
                "urls_to_close": [site + "b.html"]}})
            tabs = sorted(t["url"] for t in evaluate.GETTERS["open_tabs_info"](env, {}))
            self.assertEqual(tabs, [site + "a.html", site + "c.html"], "b.html closed")

    def test_bench_env_runner(self):
        """python3 -m sbx.bench_env: a directory of tasks by domain, the replay agent (actions
        in the task or a .replay.json beside it), 2 environments at once, OSWorld's result
        layout, a summary per domain, a task that cannot be set up recorded as an error, and a
        second run resumed from the results."""
        root = tempfile.mkdtemp(prefix="sbx-bench-env-")
        tasks, results = os.path.join(root, "tasks"), os.path.join(root, "results")
        for d in ("os", "other"):
            os.makedirs(os.path.join(tasks, d))

        def write(path, obj):
            with open(path, "w") as f:
                json.dump(obj, f)
        t1 = os_task("t-bench-1", "b1")
        t1["sbx_replay"] = ["pyautogui.typewrite('echo b1 > ~/work/out.txt\\n')", "DONE"]
        write(os.path.join(tasks, "os", "t-bench-1.json"), t1)
        write(os.path.join(tasks, "os", "t-bench-2.json"), os_task("t-bench-2", "b2"))
        write(os.path.join(tasks, "os", "t-bench-2.replay.json"),
              ["pyautogui.typewrite('echo b2 > ~/work/out.txt\\n')", "WAIT", "DONE"])
        t3 = os_task("t-bench-idle", "never")
        t3["sbx_replay"] = ["WAIT"]
        write(os.path.join(tasks, "other", "t-bench-idle.json"), t3)
        write(os.path.join(tasks, "other", "t-bench-err.json"), {
            "id": "t-bench-err", "instruction": "x", "sbx_replay": ["DONE"],
            "config": [{"type": "teleport", "parameters": {}}],
            "evaluator": {"func": "exact_match"}})
        env = dict(os.environ, SBX_HOST="127.0.0.1:%d" % SERVER.port, SBX_API_KEY=SERVER.key,
                   PYTHONPATH=os.path.join(HERE, ".."))
        cmd = [sys.executable, "-m", "sbx.bench_env", tasks, "--results", results,
               "--parallel", "2", "--screen", "1024x768", "--cache", CACHE, "--pause", "0.3"]
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 1, "a task errored: %s %s" % (r.stdout, r.stderr))
            base = os.path.join(results, "pyautogui")

            def score(domain, tid):
                with open(os.path.join(base, domain, tid, "result.txt")) as f:
                    return float(f.read())
            self.assertEqual(score("os", "t-bench-1"), 1.0, r.stdout)
            self.assertEqual(score("os", "t-bench-2"), 1.0, r.stdout)
            self.assertEqual(score("other", "t-bench-idle"), 0.0)
            err = os.path.join(base, "other", "t-bench-err")
            self.assertFalse(os.path.exists(os.path.join(err, "result.txt")))
            with open(os.path.join(err, "error.txt")) as f:
                self.assertIn("teleport", f.read())
            with open(os.path.join(base, "os", "t-bench-2", "traj.jsonl")) as f:
                traj = [json.loads(line) for line in f]
            self.assertEqual([t["step_num"] for t in traj], [1, 2, 3])
            self.assertEqual(traj[-1]["done"], True)
            for t in traj:
                with open(os.path.join(base, "os", "t-bench-2", t["screenshot_file"]),
                          "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            with open(os.path.join(base, "summary.json")) as f:
                summ = json.load(f)["summary"]
            self.assertEqual(summ["domains"]["os"]["success_rate"], 1.0)
            self.assertEqual(summ["domains"]["other"]["success_rate"], 0.0)
            self.assertEqual(summ["domains"]["other"]["errors"], 1)
            self.assertIn("os", r.stdout)
            # again: the three scored tasks are resumed, not run
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            with open(os.path.join(base, "summary.json")) as f:
                self.assertEqual(json.load(f)["summary"]["resumed"], 3, r.stdout)
            # an agent of the user's: module:callable, given the observation and instruction
            with open(os.path.join(root, "my_agent.py"), "w") as f:
                f.write("def agent(obs, instruction):\n"
                        "    assert obs['screenshot'][:4] == b'\\x89PNG', 'a screenshot'\n"
                        "    word = instruction.split()[1]\n"
                        "    return ['pyautogui.typewrite(\"echo %s > ~/work/out.txt\\\\n\")'"
                        " % word, 'DONE']\n")
            env["PYTHONPATH"] += os.pathsep + root
            r = subprocess.run([sys.executable, "-m", "sbx.bench_env",
                                os.path.join(tasks, "os", "t-bench-1.json"), "--agent",
                                "my_agent:agent", "--results", results + "-agent", "--screen",
                                "1024x768", "--cache", CACHE, "--pause", "0.3"],
                               env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(results + "-agent", "pyautogui", "os", "t-bench-1",
                                   "result.txt")) as f:
                self.assertEqual(float(f.read()), 1.0)
            left = [s for s in self.client.list() if s.metadata.get("sbx-desktop-env")]
            self.assertEqual(left, [], "every environment's sandbox is gone")
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def test_office_metrics(self):
        """compare_table, compare_docx_files and compare_images, a task each: the agent writes
        the file in the sandbox with a Python action (Debian's openpyxl, python-docx and Pillow,
        which the sandbox sees in the host's /usr), `vm_file` pulls it, the gold file is in the
        task's cache (`cache_file`). Untouched 0, a wrong answer 0 (an image: its SSIM, under 1),
        the right one 1."""
        try:
            for module in ("docx", "numpy", "openpyxl", "PIL"):
                importlib.import_module(module)
        except ImportError as e:
            self.skipTest("%s: needs Debian's python3-openpyxl, -docx, -pil, -numpy" % e)
        with self.env() as env:
            for task_id, func, made, options, wrong in OFFICE_TASKS:
                gold = os.path.join(CACHE, task_id, "gold" + os.path.splitext(made)[1])
                os.makedirs(os.path.dirname(gold), exist_ok=True)
                exec(OFFICE_CODE[func] % {"path": gold, "wrong": ""}, {})
                env.reset(task_config=office_task(task_id, func, made, options))
                self.assertEqual(env.evaluate(), 0.0, "%s: untouched" % func)
                env.step(OFFICE_CODE[func] % {"path": made, "wrong": wrong}, pause=0.2)
                score = env.evaluate()
                if func == "compare_images":  # the SSIM of a wider red rectangle
                    self.assertTrue(0.0 < score < 0.99, "compare_images: wrong %s" % score)
                else:
                    self.assertEqual(score, 0.0, "%s: a wrong answer" % func)
                env.step(OFFICE_CODE[func] % {"path": made, "wrong": ""}, pause=0.2)
                self.assertEqual(env.evaluate(), 1.0, "%s: solved" % func)

    def test_setup_failures_name_the_step(self):
        with self.env() as env:
            for step, word in (({"type": "teleport", "parameters": {}}, "teleport"),
                               ({"type": "googledrive", "parameters": {}}, "outside account"),
                               ({"type": "launch", "parameters": {
                                   "command": ["/no/such/app"]}}, "launch"),
                               ({"type": "activate_window", "parameters": {
                                   "window_name": "nothing-like-this"}}, "activate_window")):
                with self.assertRaises(SetupError) as e:
                    env.reset(task_config={"id": "t-bad", "config": [step]})
                self.assertIn(word, str(e.exception))

    def test_parallel_envs(self):
        def one(i):
            with self.env(action_space="pyautogui") as env:
                env.reset(task_config=os_task("t-par-%d" % i, "par-%d" % i))
                env.step("pyautogui.typewrite('echo par-%d > ~/work/out.txt\\n')" % i,
                         pause=0.5)
                return env.evaluate(), env.timings["reset"]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            got = list(pool.map(one, range(8)))
        self.assertEqual([g[0] for g in got], [1.0] * 8)
        print("8 parallel resets: %s s" % ", ".join("%.2f" % g[1] for g in got), flush=True)
        left = [s for s in self.client.list() if s.metadata.get("sbx-desktop-env")]
        self.assertEqual(left, [], "every environment's sandbox is gone after close()")


def main():
    global SERVER, CACHE
    if not shutil.which("Xvnc") or os.geteuid() != 0:
        print("SKIP: needs root and Xvnc (scripts/deps.sh)")
        sys.exit(77)
    SERVER = Server(sys.argv[1], config_text='providers = { supported = ["native"]; '
                    'default = "native"; };\n', tag="desktop-env")
    SERVER.start()
    CACHE = tempfile.mkdtemp(prefix="sbx-desktop-env-cache-")
    try:
        prog = unittest.main(argv=[sys.argv[0], "-v"], exit=False)
        ok = prog.result.wasSuccessful()
        if not ok:
            print("---- server log ----\n" + SERVER.log())
    finally:
        SERVER.cleanup()
        shutil.rmtree(CACHE, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
