"""Chromium in the sandbox through its DevTools HTTP endpoints (``/json/list``, ``/json/new``,
``/json/close``), reached through the server's router on the sandbox's port: 9222, where
OSWorld's tasks forward it with socat, else 1337, where they start the browser
(``--remote-debugging-port=1337``). That gives OSWorld's setup steps ``chrome_open_tabs`` /
``chrome_close_tabs`` and the getters ``open_tabs_info``, ``active_url_from_accessTree`` and
``active_tab_info`` without Playwright in the sandbox or on the client.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from ..errors import SbxError
from .errors import SetupError

if TYPE_CHECKING:
    from .env import DesktopEnv

PORTS = (9222, 1337)
# OSWorld's connect_over_cdp: 15 tries, 5 s apart. A poll is cheap here: every 0.2 s, as long.
CONNECT_TIMEOUT_S = 75.0
LOAD_TIMEOUT_S = 60.0  # page.goto's timeout in OSWorld's chrome_open_tabs


def compare_urls(url1: Optional[str], url2: Optional[str]) -> bool:
    """OSWorld's URL equality: scheme (default http) and host lowercased, `www.` dropped, a
    bare `/` path the same as none; query and fragment compared as they are."""
    if url1 is None or url2 is None:
        return url1 == url2

    def norm(u: str) -> str:
        p = urllib.parse.urlparse(u)
        return urllib.parse.urlunparse(p._replace(
            scheme=(p.scheme or "http").lower(), netloc=p.netloc.lower().replace("www.", ""),
            path=p.path if p.path != "/" else ""))
    return norm(url1) == norm(url2)


def _get(env: "DesktopEnv", port: int, path: str, method: str = "GET",
         timeout: float = 10) -> Any:
    r = env._need().proxy(method, port, path, timeout=timeout)
    data = r.read()
    return json.loads(data) if data else None


def port(env: "DesktopEnv", timeout: float = CONNECT_TIMEOUT_S) -> int:
    """The sandbox port Chromium's DevTools answer on; waits for the browser to come up."""
    end = time.monotonic() + timeout
    last: Optional[Exception] = None
    while True:
        for p in PORTS:
            try:
                if isinstance(_get(env, p, "/json/version", timeout=5), dict):
                    return p
            except (SbxError, OSError, ValueError) as e:
                last = e
        if time.monotonic() > end:
            raise SetupError("chrome", "no Chromium DevTools on the sandbox's port 9222 or 1337 "
                             "after %.0f s (launch it with --remote-debugging-port=1337): %s"
                             % (timeout, last))
        time.sleep(0.2)


def pages(env: "DesktopEnv", p: Optional[int] = None) -> List[Dict[str, Any]]:
    """The browser's tabs (targets of type page), as /json/list gives them."""
    got = _get(env, p or port(env), "/json/list")
    return [t for t in got or [] if t.get("type") == "page"]


def _wait_loaded(env: "DesktopEnv", p: int, target: str, url: str) -> None:
    """Until the new tab shows url (its navigation committed), at most LOAD_TIMEOUT_S; like
    OSWorld, a tab that does not load in time is left as it is."""
    end = time.monotonic() + LOAD_TIMEOUT_S
    while time.monotonic() < end:
        for t in pages(env, p):
            if t.get("id") == target and compare_urls(t.get("url"), url):
                return
        time.sleep(0.1)


def _wait_closed(env: "DesktopEnv", p: int, target: str) -> None:
    """Until the tab is gone from /json/list, at most 5 s: /json/close answers when the close
    is asked for, and the list can show the tab a moment longer (seen under load), so the
    next step or getter would see a tab the step closed."""
    end = time.monotonic() + 5
    while time.monotonic() < end and any(t.get("id") == target for t in pages(env, p)):
        time.sleep(0.1)


def _close_default(env: "DesktopEnv", p: int, before: List[Dict[str, Any]], ours: str) -> None:
    """Close the tab the browser started with. A browser that has just started may list it
    only a moment after its DevTools answer: wait for it (2 s at most)."""
    end = time.monotonic() + 2
    while not before and time.monotonic() < end:
        before = [t for t in pages(env, p) if t.get("id") != ours]
        if not before:
            time.sleep(0.1)
    if before:
        env._need().proxy("GET", p, "/json/close/" + before[0]["id"]).read()
        _wait_closed(env, p, before[0]["id"])


def open_tabs(env: "DesktopEnv", urls: List[str]) -> None:
    """chrome_open_tabs: a new tab per URL; after the first, the tab the browser started with
    is closed (as OSWorld's step does)."""
    p = port(env)
    before = pages(env, p)
    for i, url in enumerate(urls):
        quoted = urllib.parse.quote(url, safe=":/?&=%#@+,;~")
        t = _get(env, p, "/json/new?" + quoted, method="PUT")
        if not isinstance(t, dict) or "id" not in t:
            raise SetupError("chrome_open_tabs", "Chromium did not open a tab for %s" % url)
        _wait_loaded(env, p, t["id"], url)
        if i == 0:
            _close_default(env, p, before, t["id"])


def close_tabs(env: "DesktopEnv", urls: List[str]) -> None:
    """chrome_close_tabs: for each URL, the first tab showing it is closed."""
    p = port(env)
    for url in urls:
        for t in pages(env, p):
            if compare_urls(t.get("url"), url):
                env._need().proxy("GET", p, "/json/close/" + t["id"]).read()
                _wait_closed(env, p, t["id"])
                break


def get_open_tabs_info(env: "DesktopEnv", c: Mapping[str, Any]) -> List[Dict[str, str]]:
    """[{title, url}] of every tab; [] when no browser answers (as upstream)."""
    try:
        p = port(env, timeout=5)
    except SetupError:
        return []
    return [{"title": t.get("title", ""), "url": t.get("url", "")} for t in pages(env, p)]


APP_NAMES = ("Google Chrome", "Chromium")
ADDRESS_BAR = "Address and search bar"


def get_active_url_from_accessTree(env: "DesktopEnv", c: Mapping[str, Any]) -> Optional[str]:
    """The text of the browser's address bar in the accessibility tree (an `entry` named
    "Address and search bar" under the `application` Google Chrome or Chromium), with
    `goto_prefix` (default "https://") in front, as upstream does."""
    tree = env._need().desktop.accessibility_tree()
    try:
        root = ET.fromstring(tree)
    except ET.ParseError:
        return None
    for app in root.iter():
        if app.tag.rsplit("}", 1)[-1] != "application" or app.get("name") not in APP_NAMES:
            continue
        for e in app.iter():
            if e.tag.rsplit("}", 1)[-1] == "entry" and e.get("name") == ADDRESS_BAR:
                if not e.text:
                    return None
                return str(c.get("goto_prefix", "https://")) + e.text
    return None


HTML_EXPR = ("(document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '')"
             " + document.documentElement.outerHTML")


def page_html(env: "DesktopEnv", p: int, target: str) -> Optional[str]:
    """The HTML of tab `target` (Playwright's page.content()), over the page's DevTools
    WebSocket through the router."""
    sb = env._need()
    ws = sb._t.websocket("/sandboxes/%s/proxy/%d/devtools/page/%s" % (
        urllib.parse.quote(sb.id, safe=""), p, urllib.parse.quote(target, safe="")), timeout=30)
    try:
        ws.send(json.dumps({"id": 1, "method": "Runtime.evaluate",
                            "params": {"expression": HTML_EXPR, "returnByValue": True}}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("id") == 1:
                value = msg.get("result", {}).get("result", {}).get("value")
                return value if isinstance(value, str) else None
    finally:
        ws.close()


def get_active_tab_info(env: "DesktopEnv", c: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """{title, url, content} of the active tab: its URL from the address bar (as upstream),
    title and HTML from the tab that shows it. (Upstream loads that URL again in a new tab to
    read it; reading the tab itself gives the same page without a second load.)"""
    url = get_active_url_from_accessTree(env, c)
    if url is None:
        return None
    try:
        p = port(env, timeout=5)
    except SetupError:
        return None
    for t in pages(env, p):
        if compare_urls(t.get("url"), url):
            return {"title": t.get("title", ""), "url": t.get("url", ""),
                    "content": page_html(env, p, t["id"])}
    return None
