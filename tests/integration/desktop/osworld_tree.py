"""The accessibility tree the way OSWorld's in-VM server builds it, with pyatspi (the reference
for the tests and the bench; written from its documented behaviour, see
../shared/reference/osworld-desktopenv.md section 6).

    /usr/bin/python3 osworld_tree.py [--repeat N]

Prints the XML on stdout and one JSON line per run on stderr: {"ms": ..., "nodes": ...}.
The same calls per node as OSWorld (state set, attributes, extents when visible and showing,
text, image/selection/value/action interfaces, role name; children by index), applications in
a thread pool, depth 50 and 1024 children. Its one change: a Calc table's columns per row come
from the table's NColumns instead of `libreoffice --version` (same number).
"""
import concurrent.futures
import json
import sys
import time
import xml.etree.ElementTree as ET

import pyatspi
from pyatspi import STATE_SHOWING, StateType

NS = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "doc": "https://accessibility.ubuntu.example.org/ns/document",
    "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
for prefix, uri in NS.items():
    ET.register_namespace(prefix, uri)
MAX_DEPTH = 50
MAX_WIDTH = 1024


def q(prefix, name):
    return "{%s}%s" % (NS[prefix], name)


def attributes_of(node):
    a = {"name": node.name}
    for st in node.getState().get_states():
        name = StateType._enum_lookup[st].split("_", 1)[1].lower()
        if name:
            a[q("st", name)] = "true"
    for k, v in node.get_attributes().items():
        if k:
            a[q("attr", k)] = v
    if a.get(q("st", "visible")) == "true" and a.get(q("st", "showing")) == "true":
        try:
            comp = node.queryComponent()
        except NotImplementedError:
            pass
        else:
            box = comp.getExtents(pyatspi.XY_SCREEN)
            a[q("cp", "screencoord")] = str(tuple(box[0:2]))
            a[q("cp", "size")] = str(tuple(box[2:]))
    return a


def text_of(node):
    try:
        t = node.queryText()
    except NotImplementedError:
        return ""
    return t.getText(0, t.characterCount).replace("\ufffc", "").replace("\ufffd", "")


def extras(node, a):
    for query, key in ((node.queryImage, "image"), (node.querySelection, "selection")):
        try:
            query()
            a[key] = "true"
        except NotImplementedError:
            pass
    try:
        v = node.queryValue()
        for name, get in (("value", lambda: v.currentValue), ("min", lambda: v.minimumValue),
                          ("max", lambda: v.maximumValue), ("step", lambda: v.minimumIncrement)):
            try:
                a[q("val", name)] = str(get())
            except Exception:
                pass
    except NotImplementedError:
        pass
    try:
        act = node.queryAction()
        for i in range(act.nActions):
            name = act.getName(i).replace(" ", "-")
            a[q("act", name + "_desc")] = act.getDescription(i)
            a[q("act", name + "_kb")] = act.getKeyBinding(i)
    except NotImplementedError:
        pass


def calc_cells(node, depth, flag, el):
    cols = node.queryTable().nColumns
    base, first, col_base = 0, False, None
    for r in range(1048576):
        for clm in range(col_base or 0, cols):
            cell = node[base + clm]
            if cell.getState().contains(STATE_SHOWING):
                el.append(build(cell, depth + 1, flag))
                if not first:
                    col_base, first = clm, True
            elif (first and col_base is not None) or clm >= 500:
                break
        if (first and clm == col_base) or (not first and r >= 500):
            break
        base += cols


def build(node, depth=0, flag=None):
    a = attributes_of(node)
    text = text_of(node)
    extras(node, a)
    raw = node.getRoleName().strip()
    tag = (raw or "unknown").replace(" ", "-")
    if not flag and raw == "document spreadsheet":
        flag = "calc"
    el = ET.Element(tag, a)
    if text:
        el.text = text
    if depth == MAX_DEPTH:
        return el
    if flag == "calc" and tag == "table":
        calc_cells(node, depth, flag, el)
        return el
    try:
        for i, ch in enumerate(node):
            if i == MAX_WIDTH:
                break
            el.append(build(ch, depth + 1, flag))
    except Exception:
        pass
    return el


def snapshot():
    desktop = pyatspi.Registry.getDesktop(0)
    root = ET.Element("desktop-frame")
    with concurrent.futures.ThreadPoolExecutor() as ex:
        futures = [ex.submit(build, app, 1) for app in desktop]
        for f in concurrent.futures.as_completed(futures):
            root.append(f.result())
    return root


def main():
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == "--repeat" else 1
    xml = ""
    for _ in range(repeat):
        t = time.perf_counter()
        root = snapshot()
        xml = ET.tostring(root, encoding="unicode")
        ms = (time.perf_counter() - t) * 1000
        print(json.dumps({"ms": round(ms, 3), "nodes": sum(1 for _ in root.iter())}),
              file=sys.stderr)
    print(xml)


if __name__ == "__main__":
    main()
