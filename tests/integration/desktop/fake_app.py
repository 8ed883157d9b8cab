"""A small AT-SPI application for the tests (Debian's python3 with python3-dbus and GLib).

    /usr/bin/python3 fake_app.py BUS --name NAME [--calc] [--cache] [--hang-after N]
                                     [--die-on METHOD] [--odd]

It joins the accessibility bus, embeds itself in the registry (as at-spi2-atk does) and
answers the calls a tree dump makes. Trees: a small window with a button, an entry and a slider
(--odd adds names with control characters, a role without a table entry, an attribute key that
is not an XML name, duplicate action names, a child reference with an invalid bus name); --calc a LibreOffice-like sheet whose table has
1024 columns x 1048576 rows of cells, rows 0-9 x columns 2-5 showing (--grid: the same table
in a text document, so walkers take its first 1024 children by index). --cache serves
Cache.GetItems; without it, walkers must use GetChildren. --hang-after N stops answering after N
calls (the main loop sleeps); --die-on M exits when M is called. Prints "ready" when embedded.
"""
import argparse
import os
import sys
import time

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

P = "/org/a11y/atspi/accessible/"
ACC = "org.a11y.atspi.Accessible"
SHOWING, VISIBLE, ENABLED, SENSITIVE, FOCUSABLE = 25, 30, 8, 24, 11
COLS, ROWS = 1024, 1048576


def states(*bits):
    v = 0
    for b in bits:
        v |= 1 << b
    return [dbus.UInt32(v & 0xffffffff), dbus.UInt32(v >> 32)]


class Node:
    def __init__(self, oid, role, name, ifaces=(), kids=(), st=(ENABLED, SENSITIVE, SHOWING,
                 VISIBLE), ext=(0, 0, 0, 0), text=None, attrs=None, actions=(), value=None,
                 role_name=None):
        self.oid, self.role, self.name = oid, role, name
        self.ifaces = ["org.a11y.atspi.Accessible"] + ["org.a11y.atspi." + i for i in ifaces]
        self.kids, self.st, self.ext, self.text = list(kids), st, ext, text
        self.attrs, self.actions, self.value = attrs or {}, list(actions), value
        self.role_name = role_name
        self.parent = None
        for i, k in enumerate(self.kids):
            k.parent, k.index = self, i
        self.index = 0


def small_tree(name, odd):
    btn = Node("btn", 43, "OK", ("Component", "Action", "Text"), ext=(40, 50, 80, 30),
               text="OK", attrs={"id": "ok"}, actions=[("press", "Press it", "Return")])
    entry = Node("entry", 79, "Search", ("Component", "Text", "EditableText"),
                 ext=(40, 90, 200, 24), text="hello\ufffc world", st=(ENABLED, SENSITIVE,
                 SHOWING, VISIBLE, FOCUSABLE, 12))
    slider = Node("slider", 51, "Volume", ("Component", "Value"), ext=(40, 130, 200, 20),
                  value=(0.25, 0.0, 100.0, 1e-05))
    hidden = Node("hidden", 29, "not shown", ("Component",), st=(ENABLED,), ext=(1, 2, 3, 4))
    image = Node("img", 27, "logo", ("Component", "Image", "Selection"), ext=(300, 10, 32, 32))
    kids = [btn, entry, slider, hidden, image]
    if odd:
        kids.append(Node("odd", 200, "bell\x07 <&> \"q\"", ("Action", "Text"),
                         text="tab\there\x01", role_name="weird role",
                         attrs={"a b:c": "1", "": "empty", "9lives": "x"},
                         actions=[("click", "first", "a"), ("click", "second", "b"),
                                  ("jump to", "", "")]))
    frame = Node("frame", 23, name + " window", ("Component",), kids=kids, ext=(0, 0, 640, 480))
    return Node("root", 75, name, ("Application",), kids=[frame])


class Cell(Node):
    def __init__(self, idx):
        r, c = divmod(idx, COLS)
        show = 0 <= r <= 9 and 2 <= c <= 5
        super().__init__("cell/%d" % idx, 56, "%s%d" % (chr(65 + c % 26), r + 1),
                         ("Component", "Text"),
                         st=(ENABLED, SENSITIVE, SHOWING, VISIBLE) if show else (ENABLED,),
                         ext=(100 * c, 20 * r, 100, 20), text="v%d" % idx)
        self.index = idx


def calc_tree(name, doc_role=92):
    table = Node("table", 55, "Sheet Sheet1", ("Component", "Table"), ext=(0, 40, 1280, 700),
                 st=(ENABLED, SENSITIVE, SHOWING, VISIBLE, 31))
    doc = Node("doc", doc_role, "Sheet1", ("Component",), kids=[table], ext=(0, 40, 1280, 700))
    frame = Node("frame", 23, "Untitled 1 - LibreOffice Calc", ("Component",), kids=[doc])
    return Node("root", 75, name, ("Application",), kids=[frame])


class App(dbus.service.FallbackObject):
    def __init__(self, bus, root, args):
        self.bus, self.root, self.args = bus, root, args
        self.nodes = {}
        self.calls = 0
        self.index(root)
        super().__init__(bus, "/org/a11y/atspi")  # every path below: objects and the cache
        bus.add_message_filter(self.filter)

    def index(self, n):
        self.nodes[n.oid] = n
        for k in n.kids:
            self.index(k)

    def node(self, path):
        oid = path[len(P):]
        if oid.startswith("cell/"):
            return Cell(int(oid[5:]))
        return self.nodes[oid]

    def ref(self, n):
        return (self.bus.get_unique_name(), dbus.ObjectPath(P + n.oid))

    def filter(self, bus, msg):
        # Counting, hanging and dying happen before any handler runs.
        if msg.get_type() == 1:  # a method call
            self.calls += 1
            if self.args.die_on and msg.get_member() == self.args.die_on:
                os._exit(3)
            if self.args.hang_after is not None and self.calls > self.args.hang_after:
                time.sleep(3600)
        return dbus.lowlevel.HANDLER_RESULT_NOT_YET_HANDLED

    def _message_cb(self, connection, message):
        try:
            reply = self.handle(message)
        except KeyError:
            reply = dbus.lowlevel.ErrorMessage(message, "org.freedesktop.DBus.Error.UnknownObject",
                                               "no such object")
        if reply is None:
            reply = dbus.lowlevel.ErrorMessage(message, "org.freedesktop.DBus.Error.UnknownMethod",
                                               "not here")
        connection.send_message(reply)

    def handle(self, m):
        iface, member, path = m.get_interface(), m.get_member(), m.get_path()
        if path == "/org/a11y/atspi/cache":
            if not self.args.cache or member != "GetItems":
                return None
            return self.reply(m, "a((so)(so)(so)iiassusau)", [self.items()])
        n = self.node(path)
        if iface == "org.freedesktop.DBus.Properties" and member == "Get":
            return self.prop(m, n, *m.get_args_list())
        return self.method(m, n, iface, member, m.get_args_list())

    def reply(self, m, sig, values):
        r = dbus.lowlevel.MethodReturnMessage(m)
        r.append(signature=sig, *values)
        return r

    def items(self):
        out = []
        for n in self.nodes.values():
            parent = self.ref(n.parent) if n.parent else ("", dbus.ObjectPath("/org/a11y/atspi/null"))
            count = ROWS * COLS if n.oid == "table" else len(n.kids)
            out.append((self.ref(n), self.ref(self.root), parent, n.index, min(count, 2**31 - 1),
                        n.ifaces, n.name, dbus.UInt32(n.role), "", states(*n.st)))
        return out

    def prop(self, m, n, iface, name):
        if iface == ACC:
            count = ROWS * COLS if n.oid == "table" else len(n.kids)
            v = {"Name": dbus.String(n.name, variant_level=1),
                 "Description": dbus.String("", variant_level=1),
                 "ChildCount": dbus.Int32(min(count, 2**31 - 1), variant_level=1),
                 "Parent": dbus.Struct(self.ref(n.parent) if n.parent else
                                       ("", dbus.ObjectPath("/org/a11y/atspi/null")),
                                       variant_level=1)}.get(name)
        elif iface == "org.a11y.atspi.Table" and name == "NColumns":
            v = dbus.Int32(COLS, variant_level=1)
        elif iface == "org.a11y.atspi.Text" and name == "CharacterCount":
            v = dbus.Int32(len(n.text or ""), variant_level=1)
        elif iface == "org.a11y.atspi.Action" and name == "NActions":
            v = dbus.Int32(len(n.actions), variant_level=1)
        elif iface == "org.a11y.atspi.Value" and n.value:
            i = ["CurrentValue", "MinimumValue", "MaximumValue", "MinimumIncrement"].index(name)
            v = dbus.Double(n.value[i], variant_level=1)
        else:
            v = None
        return None if v is None else self.reply(m, "v", [v])

    def method(self, m, n, iface, member, args):
        r = self.reply
        if member == "GetChildren":
            kids = [self.ref(k) for k in n.kids]
            if self.args.odd and n.oid == "frame":  # a reference no bus could route
                kids.append(("not a bus name!", dbus.ObjectPath("/x")))
            return r(m, "a(so)", [kids])
        if member == "GetChildAtIndex":
            if n.oid == "table":
                return r(m, "(so)", [self.ref(Cell(args[0]))])
            return r(m, "(so)", [self.ref(n.kids[args[0]])])
        table = {"GetRole": ("u", lambda: dbus.UInt32(n.role)),
                 "GetRoleName": ("s", lambda: n.role_name or "role"),
                 "GetState": ("au", lambda: states(*n.st)),
                 "GetInterfaces": ("as", lambda: n.ifaces),
                 "GetAttributes": ("a{ss}", lambda: n.attrs),
                 "GetIndexInParent": ("i", lambda: n.index),
                 "GetApplication": ("(so)", lambda: self.ref(self.root)),
                 "GetExtents": ("(iiii)", lambda: n.ext),
                 "GetText": ("s", lambda: (n.text or "")[args[0]:None if args[1] < 0 else args[1]]),
                 "GetActions": ("a(sss)", lambda: [("", d, k) for _, d, k in n.actions]),
                 "GetName": ("s", lambda: n.actions[args[0]][0]),
                 "GetDescription": ("s", lambda: n.actions[args[0]][1]),
                 "GetKeyBinding": ("s", lambda: n.actions[args[0]][2]),
                 "GetRelationSet": ("a(ua(so))", lambda: []),
                 "GetLocale": ("s", lambda: "C")}
        if member not in table:
            return None
        sig, get = table[member]
        return r(m, sig, [get()])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bus")
    ap.add_argument("--name", default="fake")
    ap.add_argument("--calc", action="store_true")
    ap.add_argument("--grid", action="store_true")  # the same table in a text document
    ap.add_argument("--cache", action="store_true")
    ap.add_argument("--odd", action="store_true")
    ap.add_argument("--hang-after", type=int)
    ap.add_argument("--die-on")
    args = ap.parse_args()
    DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.bus)
    if args.calc or args.grid:
        root = calc_tree(args.name, 92 if args.calc else 94)
    else:
        root = small_tree(args.name, args.odd)
    app = App(bus, root, args)
    reg = bus.get_object("org.a11y.atspi.Registry", P + "root")
    reg.Embed(app.ref(root), dbus_interface="org.a11y.atspi.Socket")
    print("ready", flush=True)
    app.calls = 0
    GLib.MainLoop().run()


if __name__ == "__main__":
    sys.exit(main())
