"""OSWorld's evaluator: postconfig, then `func`/`conj`/`result`/`expected`/`options` scored as
upstream scores them (lists with `and`/`or`, `infeasible` and the FAIL action, a getter's
missing file = 0). Getters and metrics are written here from OSWorld's documented behaviour;
an unknown one fails the evaluation with its name, never a silent 0.
"""

from __future__ import annotations

import csv
import datetime
import difflib
import json
import os
import re
import urllib.parse
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

from ..errors import SbxError
from . import chrome as _chrome
from . import office as _office
from . import reltime as _reltime
from . import setup as _setup
from . import table as _table
from .errors import EvaluationError

if TYPE_CHECKING:
    from .env import DesktopEnv


# ---- getters: (env, config) -> state
def _pull(env: "DesktopEnv", path: str, dest: str) -> Optional[str]:
    body = urllib.parse.urlencode({"file_path": path}).encode()
    try:
        data = env.osworld("POST", "/file", raw=body, headers={
            "Content-Type": "application/x-www-form-urlencoded"})
    except SbxError as e:
        if e.status == 404:
            return None  # OSWorld: a missing file is None, which scores 0
        raise
    local = os.path.join(env.cache_dir, dest)
    with open(local, "wb") as f:
        f.write(data if isinstance(data, bytes) else json.dumps(data).encode())
    return local


def get_vm_file(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    if c.get("multi"):
        paths = [_pull(env, p, d) for p, d in zip(c["path"], c["dest"])]
        gives = c.get("gives") or [0]
        return [paths[i] for i in gives] if len(gives) > 1 else paths[gives[0]]
    return _pull(env, c["path"], c["dest"])


def _execute(env: "DesktopEnv", c: Mapping[str, Any]) -> Mapping[str, Any]:
    return env.osworld("POST", "/execute", {"command": c["command"],
                                            "shell": bool(c.get("shell", False))})


def get_vm_command_line(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    return _execute(env, c).get("output")


def get_vm_command_error(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    return _execute(env, c).get("error")


def get_vm_terminal_output(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    return env.osworld("GET", "/terminal").get("output")


def get_accessibility_tree(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    return env.osworld("GET", "/accessibility").get("AT")


def get_list_directory(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    return env.osworld("POST", "/list_directory", {"path": c["path"]}).get("directory_tree")


def get_vm_screen_size(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    return env.osworld("POST", "/screen_size")


def get_vm_window_size(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    body = urllib.parse.urlencode({"app_class_name": c["app_class_name"]}).encode()
    try:
        return env.osworld("POST", "/window_size", raw=body, headers={
            "Content-Type": "application/x-www-form-urlencoded"})
    except SbxError as e:
        if e.status == 404:
            return None
        raise


def get_vm_wallpaper(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    try:
        data = env.osworld("POST", "/wallpaper")
    except SbxError as e:
        if e.status == 404:
            return None
        raise
    local = os.path.join(env.cache_dir, c.get("dest", "wallpaper.png"))
    with open(local, "wb") as f:
        f.write(data)
    return local


def get_rule(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    return c["rules"]


def get_rule_relativeTime(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    """The rule with its dates written relative to the sandbox's local time (reltime.py)."""
    out = env.osworld("POST", "/execute", {"command": "date +%Y-%m-%dT%H:%M:%S",
                                           "shell": True})
    try:
        now = datetime.datetime.strptime(str(out.get("output", "")).strip(), "%Y-%m-%dT%H:%M:%S")
    except ValueError as e:
        raise EvaluationError("rule_relativeTime: cannot read the sandbox's clock: %s" % e)
    return _reltime.resolve(c["rules"], now)


def get_cache_file(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    p = os.path.join(env.cache_dir, c["path"])
    return p if os.path.exists(p) else None


def get_cloud_file(env: "DesktopEnv", c: Mapping[str, Any]) -> Any:
    """The gold file from its URL, kept in the task's cache (so it works offline once there)."""
    def one(url: str, dest: str) -> str:
        local = os.path.join(env.cache_dir, dest)
        if not os.path.exists(local):
            cached = _setup.download_to_cache(env, url, dest)
            os.replace(cached, local)
        return local
    if c.get("multi"):
        paths = [one(u, d) for u, d in zip(c["path"], c["dest"])]
        gives = c.get("gives") or [0]
        return [paths[i] for i in gives] if len(gives) > 1 else paths[gives[0]]
    return one(c["path"], c["dest"])


GETTERS: Dict[str, Callable[["DesktopEnv", Mapping[str, Any]], Any]] = {
    "vm_file": get_vm_file, "vm_command_line": get_vm_command_line,
    "vm_command_error": get_vm_command_error, "vm_terminal_output": get_vm_terminal_output,
    "accessibility_tree": get_accessibility_tree, "list_directory": get_list_directory,
    "vm_screen_size": get_vm_screen_size, "vm_window_size": get_vm_window_size,
    "vm_wallpaper": get_vm_wallpaper, "rule": get_rule, "cache_file": get_cache_file,
    "rule_relativeTime": get_rule_relativeTime,
    "cloud_file": get_cloud_file, "open_tabs_info": _chrome.get_open_tabs_info,
    "active_url_from_accessTree": _chrome.get_active_url_from_accessTree,
    "active_tab_info": _chrome.get_active_tab_info,
}


# ---- metrics: (result, expected?, **options) -> float in [0, 1]
def exact_match(result: Any, rules: Mapping[str, Any], **_: Any) -> float:
    return float(result == rules["expected"])


def check_include_exclude(result: Any, rules: Mapping[str, Any], **_: Any) -> float:
    if result is None:
        return 0.0
    inc = rules.get("include", [])
    exc = rules.get("exclude", [])
    return float(all(s in result for s in inc) and not any(s in result for s in exc))


def match_in_list(result: Any, rules: Mapping[str, Any], **_: Any) -> float:
    return float(result in rules["expected"])


def is_in_list(result: Any, rules: Mapping[str, Any], **_: Any) -> float:
    return float(result is not None and rules["expected"] in result)


def literal_match(result: Any, expected: Any, **options: Any) -> float:
    if result is None:
        return 0.0
    if options.get("ignore_case"):
        result = result.lower() if isinstance(result, str) else [str(r).lower() for r in result]
        expected = (expected.lower() if isinstance(expected, str)
                    else [str(e).lower() for e in expected])
    return float(result == expected)


def fuzzy_match(result: Any, rules: Mapping[str, Any], **_: Any) -> float:
    if result is None:
        return 0.0
    return difflib.SequenceMatcher(None, str(result), str(rules["expected"])).ratio()


def _read(path: Optional[str]) -> Optional[str]:
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def compare_text_file(result: Optional[str], expected: Optional[str], **options: Any) -> float:
    a, b = _read(result), _read(expected)
    if a is None or b is None:
        return 0.0
    if options.get("ignore_blanks"):
        a, b = re.sub(r"\s+", " ", a).strip(), re.sub(r"\s+", " ", b).strip()
    if options.get("ignore_case"):
        a, b = a.lower(), b.lower()
    return float(a == b)


def diff_text_file(result: Optional[str], expected: Optional[str], **_: Any) -> float:
    a, b = _read(result), _read(expected)
    if a is None or b is None:
        return 0.0
    return difflib.SequenceMatcher(None, a.splitlines(), b.splitlines()).ratio()


def check_list(result: Optional[str], rules: Mapping[str, Any], **_: Any) -> float:
    text = _read(result)
    if text is None:
        return 0.0
    lines = text.splitlines()
    for pat in rules.get("expect", []):
        if not any(re.search(pat, ln) for ln in lines):
            return 0.0
    for pat in rules.get("unexpect", []):
        if any(re.search(pat, ln) for ln in lines):
            return 0.0
    return 1.0


def check_direct_json_object(result: Any, rules: Mapping[str, Any], **_: Any) -> float:
    if result is None:
        return 0.0
    if isinstance(result, str):
        try:
            result = json.loads(result.strip())
        except ValueError:
            return 0.0
    expected = rules["expected"]
    if rules.get("expect_in_result"):
        return float(all(str(v) in str(result.get(k)) for k, v in expected.items()))
    return float(all(result.get(k) == v for k, v in expected.items()))


def check_json_settings(actual: Optional[str], expected: Mapping[str, Any], **_: Any) -> float:
    text = _read(actual)
    if text is None:
        return 0.0
    try:
        data = json.loads(text)
    except ValueError:
        return 0.0
    want = expected.get("expected", expected)
    return float(all(data.get(k) == v for k, v in want.items()))


def compare_csv(result: Optional[str], expected: Optional[str], **_: Any) -> float:
    a, b = _read(result), _read(expected)
    if a is None or b is None:
        return 0.0
    return float(list(csv.reader(a.splitlines())) == list(csv.reader(b.splitlines())))


def check_accessibility_tree(result: Optional[str], rules: Any, **_: Any) -> float:
    """rules: a dict or a list of {xpath, text?, exact?}: every one must find a node (whose
    text equals, or contains, `text`)."""
    if not result:
        return 0.0
    try:
        root = ET.fromstring(result)
    except ET.ParseError:
        return 0.0
    for r in rules if isinstance(rules, list) else [rules]:
        xpath = r.get("xpath")
        if not xpath:
            raise EvaluationError("check_accessibility_tree: a rule without `xpath` (CSS "
                                  "selectors are not supported)")
        nodes = root.findall(xpath if xpath.startswith(".") else "." + xpath)
        if not nodes:
            return 0.0
        if "text" in r:
            want = r["text"]
            texts = [(n.text or "") for n in nodes]
            if not any((t == want) if r.get("exact", True) else (want in t) for t in texts):
                return 0.0
    return 1.0


def _lists_equal(a: List[Any], b: List[Any], same: Callable[[Any, Any], bool]) -> bool:
    """OSWorld's are_lists_equal: same length, each of a matched by some item of b."""
    return len(a) == len(b) and all(any(same(x, y) for y in b) for x in a)


def is_expected_tabs(open_tabs: Any, rule: Mapping[str, Any], **_: Any) -> float:
    """The open tabs' URLs are the expected ones (type "url"; any order, OSWorld's compare)."""
    if not open_tabs or rule.get("type") != "url":
        return 0.0
    return float(_lists_equal(list(rule["urls"]), [t["url"] for t in open_tabs],
                              _chrome.compare_urls))


def is_expected_active_tab(active_tab_info: Any, rule: Mapping[str, Any], **_: Any) -> float:
    """The active tab's URL (a dict's `url`, or the value itself) is rule["url"]."""
    if not active_tab_info or rule.get("type") != "url":
        return 0.0
    url = active_tab_info.get("url") if isinstance(active_tab_info, dict) else active_tab_info
    return float(_chrome.compare_urls(rule["url"], url))


METRICS: Dict[str, Callable[..., float]] = {
    f.__name__: f for f in (exact_match, check_include_exclude, match_in_list, is_in_list,
                            literal_match, fuzzy_match, compare_text_file, diff_text_file,
                            check_list, check_direct_json_object, check_json_settings,
                            compare_csv, check_accessibility_tree, is_expected_tabs,
                            is_expected_active_tab, _office.compare_images,
                            _office.compare_docx_files, _table.compare_table)}


def _as_list(v: Any, n: int) -> List[Any]:
    if isinstance(v, list):
        if len(v) != n:
            raise EvaluationError("the evaluator's lists have different lengths")
        return v
    return [v] * n


def _getter(env: "DesktopEnv", cfg: Optional[Mapping[str, Any]]) -> Any:
    if cfg is None:
        return None
    name = cfg.get("type")
    fn = GETTERS.get(str(name))
    if fn is None:
        raise EvaluationError("getter `%s` is not available in sbx (have: %s)"
                              % (name, ", ".join(sorted(GETTERS))))
    try:
        return fn(env, cfg)
    except FileNotFoundError:
        return None


def evaluate(env: "DesktopEnv") -> float:
    ev = env.evaluator
    if not ev:
        raise EvaluationError("the task has no evaluator")
    _setup.run_steps(env, ev.get("postconfig") or [])
    func = ev["func"]
    last = env.action_history[-1] if env.action_history else None
    last_kind = last if isinstance(last, str) else (
        last.get("action_type") if isinstance(last, Mapping) else None)
    if func == "infeasible":
        return float(last_kind == "FAIL")
    if last_kind == "FAIL":
        return 0.0
    funcs = func if isinstance(func, list) else [func]
    n = len(funcs)
    results = _as_list(ev.get("result"), n)
    expecteds = _as_list(ev.get("expected"), n) if "expected" in ev else [None] * n
    options = _as_list(ev.get("options", {}), n)
    conj = ev.get("conj", "and")
    scores = []
    for f, rc, ec, oc in zip(funcs, results, expecteds, options):
        metric = METRICS.get(f)
        if metric is None:
            raise EvaluationError("metric `%s` is not available in sbx (have: %s)"
                                  % (f, ", ".join(sorted(METRICS))))
        result = _getter(env, rc)
        if ec is not None:
            score = metric(result, _getter(env, ec), **(oc or {}))
        else:
            score = metric(result, **(oc or {}))
        if n > 1 and conj == "and" and score == 0:
            return 0.0
        if n > 1 and conj == "or" and score == 1:
            return 1.0
        scores.append(float(score))
    if n == 1:
        return scores[0]
    return sum(scores) / len(scores) if conj == "and" else max(scores)
