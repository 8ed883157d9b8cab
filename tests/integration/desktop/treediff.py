"""Compare two OSWorld-style XML trees element by element (tag, attributes, text, children).

    diff(a_xml, b_xml, ignore=()) -> list of differences (strings), [] when equal

Applications are matched by order after sorting by name (OSWorld appends them as its threads
finish). `ignore` names attributes (Clark notation or plain) left out of the comparison.
"""
import xml.etree.ElementTree as ET


def _attrs(el, ignore):
    return {k: v for k, v in el.attrib.items() if k not in ignore}


def _walk(a, b, path, out, ignore, limit):
    if len(out) >= limit:
        return
    here = f"{path}/{a.tag}[{a.get('name', '')!r}]"
    if a.tag != b.tag:
        out.append(f"{here}: tag {a.tag} != {b.tag}")
        return
    aa, bb = _attrs(a, ignore), _attrs(b, ignore)
    if aa != bb:
        keys = sorted(set(aa) | set(bb))
        d = {k: (aa.get(k), bb.get(k)) for k in keys if aa.get(k) != bb.get(k)}
        out.append(f"{here}: attributes differ {d}")
    if (a.text or "") != (b.text or ""):
        out.append(f"{here}: text {a.text!r} != {b.text!r}")
    ka, kb = list(a), list(b)
    if len(ka) != len(kb):
        out.append(f"{here}: {len(ka)} children != {len(kb)}: "
                   f"{[k.tag for k in ka][:8]} vs {[k.tag for k in kb][:8]}")
    for x, y in zip(ka, kb):
        _walk(x, y, here, out, ignore, limit)


def diff(a_xml, b_xml, ignore=(), limit=50):
    a, b = ET.fromstring(a_xml), ET.fromstring(b_xml)
    out = []
    if a.tag != b.tag:
        return [f"root {a.tag} != {b.tag}"]
    apps_a = sorted(a, key=lambda e: e.get("name", ""))
    apps_b = sorted(b, key=lambda e: e.get("name", ""))
    if len(apps_a) != len(apps_b):
        out.append(f"{len(apps_a)} applications != {len(apps_b)}")
    for x, y in zip(apps_a, apps_b):
        _walk(x, y, "", out, set(ignore), limit)
    return out


if __name__ == "__main__":
    import sys
    with open(sys.argv[1]) as f1, open(sys.argv[2]) as f2:
        for line in diff(f1.read(), f2.read()):
            print(line)
