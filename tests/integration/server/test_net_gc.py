#!/usr/bin/env python3
"""`sbx net gc` and `sbx gc` clean the leaf bridges and leases of every bridge network sbx made,
not only of the default one (docs/network.md "Crash cleanup").

A real server on a bridge of its own with two sandboxes per leaf bridge (leaf_size = 2; no
namespace pool, so the leases go in order): five sandboxes on three leaves. The server is killed
with SIGKILL and so are four of the sandboxes (their init, by pid): `sbx net gc` without
--bridge must release their leases and remove leaves 1 and 3 with their uplinks, and keep the
live sandbox's lease and its leaf 2. Then that sandbox is killed too and `sbx gc` (which cleans
the records, and every bridge network) must remove leaf 2 and the last lease. Bridges sbx did
not make (one named like a network and its leaf, without sbx's marks) are left alone, and so is a
device named like a leaf that is no bridge. A leaf whose bridge and lease dir are gone is found
by its marks and removed."""
import json
import os
import signal
import subprocess

from harness import Skip, check, main, remove_bridge, wait_for


def links():
    """{name: (kind, master name)} of the host's links."""
    out = subprocess.run(["ip", "-d", "-j", "link", "show"], capture_output=True, text=True)
    return {x["ifname"]: ((x.get("linkinfo") or {}).get("info_kind", ""), x.get("master"))
            for x in json.loads(out.stdout or "[]")}


def ports(all_links, master):
    return {n for n, (_, m) in all_links.items() if m == master}


def leases(bridge):
    """{address: sandbox id} of the bridge network's lease dir."""
    d = "/run/sbx/net/%s/leases" % bridge
    return {a: os.readlink(os.path.join(d, a)) for a in os.listdir(d)} if os.path.isdir(d) else {}


def veth_of(addr):
    return "vsbx%02x%02x%02x%02x" % tuple(int(x) for x in addr.split("."))


def init_pid(s, sid):
    with open(os.path.join(s.state, "run", sid, "state.json")) as f:
        return json.load(f)["pid"]


def age_leases(bridge):
    """A lease without its veth is released once a minute old (younger, an attach may hold it
    before its veth exists: tests/integration/net/cli_net.sh): make them old, as after a
    crash some time ago."""
    d = "/run/sbx/net/%s/leases" % bridge
    for a in os.listdir(d):
        subprocess.run(["touch", "-h", "-d", "2 hours ago", os.path.join(d, a)], check=True)


def net_gc(s):
    r = subprocess.run([s.sbx, "net", "gc"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "sbx net gc: %r" % (r,))
    return r.stdout


def make_foreign(name, bridge):
    """A bridge and a `<name>.1` bridge sbx did not make (no keep-alive port, no uplinks), and a
    veth named like a leaf of the test's network (`<bridge>.9`: not a bridge, so no leaf)."""
    for n in (name, name + ".1"):
        subprocess.run(["ip", "link", "add", n, "type", "bridge"], check=True)
    subprocess.run(["ip", "link", "add", bridge + ".9", "type", "veth", "peer", "name",
                    name + "p"], check=True)


def test_gc(s, bridge, foreign):
    ids = []
    for _ in range(5):
        r = s.create()
        check(r.status == 202, "create: %r" % r)
        ids.append(r.json()["id"])
    wait_for(lambda: len(leases(bridge)) == 5 and
             all(veth_of(a) in links() for a in leases(bridge)), "five sandboxes attached", 60)
    by_id = {v: a for a, v in leases(bridge).items()}
    check(set(by_id) == set(ids), "the leases are the sandboxes': %r %r" % (by_id, ids))
    ls = links()
    leaf = {sid: next((k for k in (1, 2, 3) if veth_of(by_id[sid]) in
                       ports(ls, "%s.%d" % (bridge, k))), None) for sid in ids}
    check(sorted(leaf.values()) == [1, 1, 2, 2, 3], "two per leaf: %r" % leaf)
    live = next(sid for sid in ids if leaf[sid] == 2)
    pids = {sid: init_pid(s, sid) for sid in ids}
    s.kill9()
    for sid in ids:
        if sid != live:
            os.kill(pids[sid], signal.SIGKILL)
    dead = [by_id[sid] for sid in ids if sid != live]
    wait_for(lambda: not any(veth_of(a) in links() for a in dead), "the dead sandboxes' veths "
             "to go (the kernel deletes them with their namespaces)", 30)
    age_leases(bridge)
    out = net_gc(s)
    check("%s: released 4 stale leases" % bridge in out, "net gc's report: %r" % out)
    ls = links()
    check("%s.1" % bridge not in ls and "%s.3" % bridge not in ls,
          "leaves 1 and 3 removed: %r" % sorted(n for n in ls if n.startswith(bridge)))
    check(veth_of(by_id[live]) in ports(ls, "%s.2" % bridge),
          "the live sandbox's leaf stays, with it on it")
    uplinks = [p for p in ports(ls, bridge) if p.startswith("usbx")]
    check(len(uplinks) == 1, "only leaf 2's uplink is left on the bridge: %r" % uplinks)
    check(leases(bridge) == {by_id[live]: live}, "only the live lease is left: %r"
          % leases(bridge))
    check(foreign in ls and foreign + ".1" in ls, "bridges sbx did not make are left alone")
    check(bridge + ".9" in ls, "a device named like a leaf that is no bridge is left alone")
    # the last one dies too: `sbx gc` of this state dir removes the records, and sweeps no
    # bridge network but the default one (other users' networks are not its business: only the
    # host's gc, of the default state dir, sweeps them all); `sbx net gc` then cleans this one
    os.kill(pids[live], signal.SIGKILL)
    wait_for(lambda: veth_of(by_id[live]) not in links(), "the last veth to go", 30)
    r = subprocess.run([s.sbx, "gc", "--state-dir", s.state], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0 and "removed 5 sandboxes" in r.stdout, "sbx gc: %r" % (r,))
    check("%s.2" % bridge in links(), "sbx gc --state-dir left the test's own bridge network")
    out = net_gc(s)
    check("%s: released" % bridge in out, "net gc's report: %r" % out)
    ls = links()
    check("%s.2" % bridge not in ls, "sbx net gc removed leaf 2")
    check(not [p for p in ports(ls, bridge) if p.startswith("usbx")], "and its uplink")
    check(leases(bridge) == {}, "and the last lease: %r" % leases(bridge))
    check(foreign in ls and foreign + ".1" in ls, "bridges sbx did not make are left alone")
    orphan_leaf(s, bridge, "%s: released 0 stale leases" % bridge)


def fnv(name):
    h = 2166136261
    for c in name.encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return h


def leaf_name(bridge, k):
    """src/net/leaf.c: `<bridge>.<k>`, or `lsbx<hash>.<k>` for a name longer than 10 bytes."""
    if len(bridge) <= 10:
        return "%s.%d" % (bridge, k)
    return "lsbx%06x.%d" % (fnv(bridge) & 0xffffff, k)


def orphan_leaf(s, bridge, said):
    """A leaf whose bridge is gone (deleted by hand, its lease dir too) is still found by its
    marks, its name and its uplink end named from its bridge's name, and removed when empty;
    `said`: what `sbx net gc` says of it."""
    leaf = leaf_name(bridge, 1)
    s.start()
    r = s.create()
    check(r.status == 202, "create: %r" % r)
    sid = r.json()["id"]
    wait_for(lambda: leaf in links() and leases(bridge), "a sandbox on leaf 1", 60)
    addr = next(iter(leases(bridge)))
    pid = init_pid(s, sid)
    s.kill9()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: veth_of(addr) not in links(), "its veth to go", 30)
    subprocess.run(["ip", "link", "del", bridge], check=True)
    subprocess.run(["rm", "-rf", "/run/sbx/net/" + bridge], check=True)
    ls = links()
    uplinks = [n for n in ls if n.startswith("usbx") and ls[n][1] == leaf]
    check(len(uplinks) == 1, "leaf 1 and its uplink outlived the bridge: %r" % uplinks)
    out = net_gc(s)
    check(said in out, "found by its leaf: %r" % out)
    ls = links()
    check(leaf not in ls, "the orphaned leaf %s removed" % leaf)
    check(uplinks[0] not in ls and uplinks[0][:11] not in " ".join(ls),
          "both ends of its uplink removed: %r" % sorted(ls))

def test(new_server):
    if os.geteuid() != 0:
        raise Skip("needs root (bridges)")
    tag = os.getpid() % 200 + 20
    bridge = "sbxng%d" % tag
    subnet = "10.241.%d.0/24" % tag
    foreign = "sbxnf%d" % tag
    config = ('providers = { supported = ["native"]; default = "native";\n'
              '  native = { bridge = "%s"; subnet = "%s"; leaf_size = 2; netns_pool = 0; }; };\n'
              % (bridge, subnet))
    s = new_server(config_text=config, tag="net-gc")
    s.start_native()
    make_foreign(foreign, bridge)
    # a bridge name longer than 10 bytes: its leaves are `lsbx<hash>.<k>`
    long_bridge = "sbxnglong%d" % tag
    long_subnet = "10.242.%d.0/24" % tag
    s2 = new_server(config_text=config.replace(bridge, long_bridge).replace(subnet, long_subnet),
                    tag="net-gc-long")
    try:
        test_gc(s, bridge, foreign)
        orphan_leaf(s2, long_bridge, "removed 1 leaf bridge whose bridge is gone")
    finally:
        s2.kill9()
        s2.gc_runtime()
        remove_bridge(s2.sbx, long_bridge, long_subnet)
        s.kill9()
        s.gc_runtime()
        remove_bridge(s.sbx, bridge, subnet)
        for n in (foreign + ".1", foreign, bridge + ".9"):
            subprocess.run(["ip", "link", "del", n], capture_output=True)


if __name__ == "__main__":
    main(test)
