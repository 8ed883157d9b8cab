"""The accessibility tree of Chromium on a page with a button, against the screen and pyatspi.

    test_a11y_chromium.py SBX_A11Y_DUMP

The XML parses, holds the button as push-button with its name, and its cp:screencoord/cp:size
sit where the page puts it (relative to the document-web element, whose position we also
check by clicking: xdotool at the button's centre changes the page; a click just beside it does
not). The JSON says the same. A structural change (an item added by the click) shows in the
next snapshot. The whole XML equals OSWorld's tree made with pyatspi on the same page.
"""
import json
import os
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import env  # noqa: E402
import treediff  # noqa: E402

ST = "{https://accessibility.ubuntu.example.org/ns/state}"
CP = "{https://accessibility.ubuntu.example.org/ns/component}"
PAGE = """<!doctype html><html><head><title>A11y Test</title><style>
body{margin:0} #b{position:absolute;left:100px;top:50px;width:200px;height:60px;border:0;
background:#c00;color:#fff} #s{position:absolute;left:0;top:200px;margin:0}
ul{position:absolute;top:260px}</style></head><body>
<button id="b" onclick="document.getElementById('s').textContent='clicked';
var li=document.createElement('li');li.textContent='added item';
document.getElementById('l').appendChild(li)">Press me</button>
<p id="s">not yet</p><ul id="l"><li>first item</li></ul></body></html>"""


def pair(s):
    x, y = s.strip("()").split(",")
    return int(x), int(y)


def xml_find(root, tag, name=None):
    for el in root.iter(tag):
        if name is None or el.get("name") == name:
            return el
    return None


def main():
    env.enter_private_namespace()
    dump = sys.argv[1]
    with env.Desktop(dump=dump) as d:
        page = os.path.join(d.tmp, "page.html")
        with open(page, "w") as f:
            f.write(PAGE)
        d.chromium(page)
        d.wait_for(lambda j: env.find(j, lambda n: n.get("name") == "Press me"
                                      and "x" in n) is not None, what="the button")
        time.sleep(0.5)  # let the first layout settle

        xml, stats = d.dump()
        root = ET.fromstring(xml)
        assert root.tag == "desktop-frame", root.tag
        assert "xmlns:st=\"https://accessibility.ubuntu.example.org/ns/state\"" in xml
        btn = xml_find(root, "push-button", "Press me")
        assert btn is not None, "no push-button named 'Press me'"
        assert btn.get(ST + "showing") == "true" and btn.get(ST + "focusable") == "true"
        doc = xml_find(root, "document-web")
        assert doc is not None, "no document-web"
        bx, by = pair(btn.get(CP + "screencoord"))
        bw, bh = pair(btn.get(CP + "size"))
        dx, dy = pair(doc.get(CP + "screencoord"))
        assert (bx - dx, by - dy, bw, bh) == (100, 50, 200, 60), (bx, by, bw, bh, dx, dy)
        assert btn.text == "Press me", btn.text
        print(f"button at ({bx}, {by}) size ({bw}, {bh}); document at ({dx}, {dy}); "
              f"{stats[0]['nodes']} nodes in {stats[0]['ms']:.1f} ms")

        # JSON: the same tree, numbers instead of strings.
        js, _ = d.dump("--json")
        j = json.loads(js)
        jb = env.find(j, lambda n: n["role"] == "push-button" and n.get("name") == "Press me")
        assert (jb["x"], jb["y"], jb["width"], jb["height"]) == (bx, by, bw, bh), jb
        assert "focusable" in jb["states"] and jb["text"] == "Press me", jb
        assert env.count(j) == sum(1 for _ in root.iter()), (env.count(j), "vs XML")
        assert j["truncated"] is False and j["note"] == ""

        # Pyatspi, OSWorld's way, on the same page: the same elements, attributes and text.
        ref = d.pyatspi(os.path.join(os.path.dirname(__file__), "osworld_tree.py"))
        xml, _ = d.dump()
        diffs = treediff.diff(xml, ref)
        assert not diffs, "differs from pyatspi:\n" + "\n".join(diffs[:20])

        # The position is the screen's: a click beside the button does nothing, on it works.
        d.xdotool("mousemove", bx - 15, by + bh // 2, "click", "1")
        time.sleep(0.5)
        xml, _ = d.dump()
        assert xml_find(ET.fromstring(xml), "paragraph").text == "not yet"
        d.xdotool("mousemove", bx + bw // 2, by + bh // 2, "click", "1")
        j = d.wait_for(lambda j: env.find(j, lambda n: n.get("text") == "clicked") is not None,
                       what="the page to change after the click")
        added = env.find(j, lambda n: n.get("text") == "added item" or
                         n.get("name") == "added item")
        assert added is not None, "the item the click added is not in the next snapshot"
    print("ok")


if __name__ == "__main__":
    main()
