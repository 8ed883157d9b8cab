"""The accessibility tree of small AT-SPI applications made for the test (fake_app.py).

    test_a11y_apps.py SBX_A11Y_DUMP [SBX_A11Y_DUMP_STATIC]

- Applications with and without Cache.GetItems, a LibreOffice-Calc-like sheet, and the same
  table of a billion cells outside a spreadsheet (its first 1024 children, by index): the XML
  equals OSWorld's tree made with pyatspi (with and without --no-cache); the sheet's table holds
  exactly its showing cells, in OSWorld's order.
- Hostile strings (control characters, names that are not XML names, duplicate action names,
  a role without a name in the table): the XML still parses.
- An application that hangs, or dies mid-walk, is skipped and named in the note; the rest of the
  tree is there, in bounded time. The whole-snapshot timeout fails cleanly. A small output limit
  cuts the tree at an element and keeps it well-formed.
- The -static build of the same code (libdbus-1.a) is static and gives the same tree.
"""
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import env  # noqa: E402
import treediff  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ATTR = "{https://accessibility.ubuntu.example.org/ns/attributes}"
ACT = "{https://accessibility.ubuntu.example.org/ns/action}"


def fake(d, *args):
    p = d.spawn([env.SYS_PYTHON, os.path.join(HERE, "fake_app.py"), d.bus] + list(args),
                stdout=subprocess.PIPE)
    line = p.stdout.readline()
    assert line.strip() == b"ready", f"fake app {args} did not start: {line!r}"
    return p


def stop(p):
    p.kill()
    p.wait()
    time.sleep(0.2)  # registryd drops it from the desktop


def check_against_pyatspi(d):
    apps = [fake(d, "--name", "plain"), fake(d, "--name", "cached", "--cache"),
            fake(d, "--name", "sheet", "--calc"), fake(d, "--name", "grid", "--grid")]
    ref = d.pyatspi(os.path.join(HERE, "osworld_tree.py"))
    for args in ((), ("--no-cache",)):
        xml, st = d.dump(*args)
        diffs = treediff.diff(xml, ref)
        assert not diffs, f"{args}: differs from pyatspi:\n" + "\n".join(diffs[:20])
        print(f"equal to pyatspi {args}: {st[0]['nodes']} nodes, {st[0]['calls']} calls, "
              f"{st[0]['cached']} cached")
    # --no-actions: the same tree without act:* (and fewer calls).
    lean, lst = d.dump("--no-actions")
    assert "act:" not in lean and lst[0]["calls"] < st[0]["calls"], lst
    diffs = treediff.diff(lean, ref, ignore=_act_keys(ref))
    assert not diffs, "--no-actions differs beyond act:*:\n" + "\n".join(diffs[:20])
    if len(sys.argv) > 2:  # the static build: the same tree
        static = sys.argv[2]
        kind = subprocess.run(["file", "-L", static], capture_output=True, text=True).stdout
        assert "statically linked" in kind, kind
        r = subprocess.run([static, d.bus], capture_output=True, text=True, env=d.env)
        assert r.returncode == 0, r.stderr
        diffs = treediff.diff(r.stdout, ref)
        assert not diffs, "static build differs:\n" + "\n".join(diffs[:20])
        print("static build: same tree")
    root = ET.fromstring(xml)
    grid = root.find("application[@name='grid']")
    assert len(list(next(grid.iter("table")))) == 1024  # MAX_WIDTH, by index
    table = next(root.find("application[@name='sheet']").iter("table"))
    cells = [c.get("name") for c in table]
    want = [f"{chr(65 + col)}{row + 1}" for row in range(10) for col in range(2, 6)]
    assert cells == want, cells
    for p in apps:
        stop(p)


def _act_keys(xml):
    return {k for el in ET.fromstring(xml).iter() for k in el.attrib if k.startswith(ACT)}


def check_odd(d):
    p = fake(d, "--name", "odd", "--odd")
    xml, _ = d.dump()
    root = ET.fromstring(xml)  # parses despite the control characters
    el = next(root.iter("weird-role"))
    assert el.get("name") == 'bell <&> "q"', el.get("name")
    assert el.text == "tab\there", repr(el.text)
    assert el.get(ATTR + "a-b_c") == "1" and el.get(ATTR + "_9lives") == "x", el.attrib
    assert el.get(ACT + "click_desc") == "second" and el.get(ACT + "jump-to_kb") == "", el.attrib
    entry = next(root.iter("entry"))
    assert entry.text == "hello world", entry.text  # U+FFFC dropped, as OSWorld does
    slider = next(root.iter("slider"))
    vals = {k.split("}")[1]: v for k, v in slider.attrib.items() if "/value}" in k}
    assert vals == {"value": "0.25", "min": "0.0", "max": "100.0", "step": "1e-05"}, vals
    js, _ = d.dump("--json")
    j = json.loads(js)
    w = env.find(j, lambda n: n["role"] == "weird-role")
    assert w["name"] == 'bell\x07 <&> "q"' and w["text"] == "tab\there\x01", w
    s = env.find(j, lambda n: n["role"] == "slider")
    assert s["value"] == {"current": 0.25, "min": 0.0, "max": 100.0, "step": 1e-05}, s
    stop(p)


def check_hang_and_death(d):
    good = fake(d, "--name", "good")
    hung = fake(d, "--name", "hung", "--hang-after", "0")
    t = time.time()
    xml, st = d.dump("--stall", "500")
    took = time.time() - t
    assert took < 5, f"a hung application held the snapshot {took:.1f} s"
    assert ET.fromstring(xml).find("application[@name='good']") is not None
    assert st[0]["skipped"] == 1 and "no answer for 500 ms" in st[0]["note"], st
    assert "<!-- sbx: application" in xml

    # The whole snapshot's deadline, shorter than the stall allowance: a clean failure.
    r = subprocess.run([d.dump_bin, "--stall", "5000", "--timeout", "400", d.bus],
                       capture_output=True, text=True, env=d.env, timeout=30)
    assert r.returncode == 1 and "timed out after 400 ms" in r.stderr, r.stderr
    stop(hung)

    dying = fake(d, "--name", "dying", "--die-on", "GetText")
    xml, st = d.dump()
    assert st[0]["skipped"] == 1 and "skipped" in st[0]["note"], st
    assert ET.fromstring(xml).find("application[@name='good']") is not None
    dying.wait()
    stop(good)


def check_truncation(d):
    apps = [fake(d, "--name", "one"), fake(d, "--name", "two", "--calc")]
    full, _ = d.dump()
    xml, st = d.dump("--max-bytes", "9000")
    assert len(xml.encode()) <= 9000 and st[0]["truncated"], (len(xml), st)
    root = ET.fromstring(xml)
    assert 1 < sum(1 for _ in root.iter()) < sum(1 for _ in ET.fromstring(full).iter())
    js, st = d.dump("--json", "--max-bytes", "9000")
    assert json.loads(js)["truncated"] is True and len(js.encode()) <= 9000
    for p in apps:
        stop(p)


def main():
    env.enter_private_namespace()
    with env.Desktop(dump=sys.argv[1]) as d:
        check_against_pyatspi(d)
        check_odd(d)
        check_hang_and_death(d)
        check_truncation(d)
    print("ok")


if __name__ == "__main__":
    main()
