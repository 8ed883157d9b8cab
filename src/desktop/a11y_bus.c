/*
 * a11y_bus.c - one private libdbus connection and a pipeline of method calls over it.
 *
 * AT-SPI is a request/answer protocol, and pyatspi or libatspi wait for each answer before
 * asking the next question: one round trip through dbus-daemon per property. D-Bus lets a
 * client have any number of calls outstanding, each answer naming the serial of its call, so
 * here every queued call is sent at once (up to a window, so the bus never holds unbounded
 * memory for us) and the answers are matched by serial as they come. We choose the serials:
 * the low 12 bits index the slot that describes the call.
 *
 * Nothing here blocks past the snapshot's deadline: authentication and Hello go through the
 * same loop (dbus_bus_register would block up to 25 s on a frozen bus), and an application
 * that leaves calls unanswered for stall_ms is dropped (its late answers are ignored).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/a11y_int.h"

#define IF_ACC   "org.a11y.atspi.Accessible"
#define IF_PROPS "org.freedesktop.DBus.Properties"
#define ROOT     "/org/a11y/atspi/accessible/root"

enum {
    K_HELLO = 1000
};

/* One answer at most (a cache of ~100k objects); libdbus refuses larger messages and drops the
 * connection, which for an application means it is skipped. */
#define MAX_MESSAGE (64L * 1024 * 1024)

int
a11y_connect(struct a11y_ctx *c, const char *address, sbx_error **err)
{
    /* Boundary: a unix socket only (the bus execd started in the sandbox's own /tmp); never a
     * tcp: address or autolaunch, so a bad address cannot make us talk to anything else. */
    if (!sbx_str_starts(address, "unix:"))
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "accessibility bus address `%s` is not unix:", address);
    DBusError e;
    dbus_error_init(&e);
    c->conn = dbus_connection_open_private(address, &e);
    if (!c->conn) {
        int ret = sbx_error_set(err, SBX_EUNAVAIL, 0, "connect to accessibility bus `%s`: %s",
                                address, e.message ? e.message : "failed");
        dbus_error_free(&e);
        return ret;
    }
    dbus_connection_set_exit_on_disconnect(c->conn, FALSE);
    dbus_connection_set_max_message_size(c->conn, MAX_MESSAGE);
    /* Bus 0: the daemon (Hello), bus 1: the registry (the desktop's children). */
    (void)a11y_bus_index(c, "org.freedesktop.DBus");
    (void)a11y_bus_index(c, "org.a11y.atspi.Registry");
    a11y_queue(c, (enum a11y_kind)K_HELLO, a11y_node_get(c, 0, "/org/freedesktop/DBus"), 0);
    return a11y_pump(c, err);
}

void
a11y_disconnect(struct a11y_ctx *c)
{
    for (size_t i = 0; i < c->nbuses; i++) {
        if (c->buses[i].p2p) {
            dbus_connection_close(c->buses[i].p2p);
            dbus_connection_unref(c->buses[i].p2p);
            c->buses[i].p2p = NULL;
        }
    }
    if (c->conn) {
        dbus_connection_close(c->conn);
        dbus_connection_unref(c->conn);
        c->conn = NULL;
    }
}

void
a11y_queue(struct a11y_ctx *c, enum a11y_kind kind, uint32_t node, int32_t arg)
{
    if (c->qlen == c->qcap) {
        if (c->qhead > 0) { /* reuse the sent prefix before growing */
            memmove(c->queue, c->queue + c->qhead, (c->qlen - c->qhead) * sizeof(*c->queue));
            c->qlen -= c->qhead;
            c->qhead = 0;
        }
        if (c->qlen == c->qcap) {
            c->qcap = c->qcap ? c->qcap * 2 : 1024;
            c->queue = sbx_xrealloc(c->queue, c->qcap * sizeof(*c->queue));
        }
    }
    c->queue[c->qlen++] = (struct a11y_call){
        .node = node, .bus = c->nodes[node].bus, .kind = (uint16_t)kind, .arg = arg};
}

static DBusMessage *
call_new(const char *dest, const char *path, const char *iface, const char *method)
{
    DBusMessage *m = dbus_message_new_method_call(dest, path, iface, method);
    if (!m)
        abort(); /* out of memory (or a name the bus itself gave us that libdbus rejects) */
    return m;
}

/* Properties.Get, one property at a time: at-spi2-atk's GetAll(Accessible) aborts the
 * application (libdbus assertion in its a{sv} writer; seen with Chromium 156, at-spi2-core
 * 2.46), so it is never used. */
static DBusMessage *
props_call(const char *dest, const char *path, const char *method, const char *iface,
           const char *prop)
{
    DBusMessage *m = call_new(dest, path, IF_PROPS, method);
    dbus_message_append_args(m, DBUS_TYPE_STRING, &iface, DBUS_TYPE_STRING, &prop,
                             DBUS_TYPE_INVALID);
    return m;
}

static DBusMessage *
accessible_call(const char *dest, const char *path, const struct a11y_call *call)
{
    static const char *const method[] = {
        [A11Y_K_ROLE] = "GetRole",         [A11Y_K_ROLE_NAME] = "GetRoleName",
        [A11Y_K_STATE] = "GetState",       [A11Y_K_IFACES] = "GetInterfaces",
        [A11Y_K_CHILDREN] = "GetChildren", [A11Y_K_ATTRS] = "GetAttributes",
        [A11Y_K_CALC_STATE] = "GetState",
    };
    if (call->kind == A11Y_K_CHILD_AT || call->kind == A11Y_K_CALC_CELL) {
        DBusMessage *m = call_new(dest, path, IF_ACC, "GetChildAtIndex");
        dbus_message_append_args(m, DBUS_TYPE_INT32, &call->arg, DBUS_TYPE_INVALID);
        return m;
    }
    return call_new(dest, path, IF_ACC, method[call->kind]);
}

static DBusMessage *
message_for(struct a11y_ctx *c, const struct a11y_call *call)
{
    const char *dest = c->buses[call->bus].name;
    const char *path = c->nodes[call->node].path;
    switch (call->kind) {
    case K_HELLO:
        return call_new(dest, path, "org.freedesktop.DBus", "Hello");
    case A11Y_K_APPS:
        return call_new(dest, ROOT, IF_ACC, "GetChildren");
    case A11Y_K_CACHE:
        return call_new(dest, "/org/a11y/atspi/cache", "org.a11y.atspi.Cache", "GetItems");
    case A11Y_K_NAME:
        return props_call(dest, path, "Get", IF_ACC, "Name");
    case A11Y_K_DESC:
        return props_call(dest, path, "Get", IF_ACC, "Description");
    case A11Y_K_COUNT:
        return props_call(dest, path, "Get", IF_ACC, "ChildCount");
    case A11Y_K_VALUE: {
        static const char *const prop[4] = {"CurrentValue", "MinimumValue", "MaximumValue",
                                            "MinimumIncrement"};
        return props_call(dest, path, "Get", "org.a11y.atspi.Value", prop[call->arg & 3]);
    }
    case A11Y_K_NCOLS:
        return props_call(dest, path, "Get", "org.a11y.atspi.Table", "NColumns");
    case A11Y_K_EXTENTS: {
        DBusMessage *m = call_new(dest, path, "org.a11y.atspi.Component", "GetExtents");
        uint32_t screen = 0;
        dbus_message_append_args(m, DBUS_TYPE_UINT32, &screen, DBUS_TYPE_INVALID);
        return m;
    }
    case A11Y_K_TEXT: {
        DBusMessage *m = call_new(dest, path, "org.a11y.atspi.Text", "GetText");
        int32_t from = 0;
        int32_t to = -1; /* to the end, as getText(0, characterCount) */
        dbus_message_append_args(m, DBUS_TYPE_INT32, &from, DBUS_TYPE_INT32, &to,
                                 DBUS_TYPE_INVALID);
        return m;
    }
    case A11Y_K_ACTIONS:
        return call_new(dest, path, "org.a11y.atspi.Action", "GetActions");
    case A11Y_K_P2P_ADDR:
        return call_new(dest, path, "org.a11y.atspi.Application", "GetApplicationBusAddress");
    case A11Y_K_PID: {
        DBusMessage *m = call_new("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                  "org.freedesktop.DBus", "GetConnectionUnixProcessID");
        dbus_message_append_args(m, DBUS_TYPE_STRING, &dest, DBUS_TYPE_INVALID);
        return m;
    }
    case A11Y_K_ACTION_NAME: {
        DBusMessage *m = call_new(dest, path, "org.a11y.atspi.Action", "GetName");
        dbus_message_append_args(m, DBUS_TYPE_INT32, &call->arg, DBUS_TYPE_INVALID);
        return m;
    }
    case A11Y_K_REGISTER: {
        /* A listener for a rare event: at-spi2-atk publishes /org/a11y/atspi/cache only once
         * some client listens to events (registryd drops it when this connection closes). */
        DBusMessage *m =
            call_new(dest, "/org/a11y/atspi/registry", "org.a11y.atspi.Registry", "RegisterEvent");
        const char *event = "window:activate";
        const char *app = "";
        DBusMessageIter it;
        DBusMessageIter a;
        dbus_message_iter_init_append(m, &it);
        dbus_message_iter_append_basic(&it, DBUS_TYPE_STRING, &event);
        dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "s", &a);
        dbus_message_iter_close_container(&it, &a);
        dbus_message_iter_append_basic(&it, DBUS_TYPE_STRING, &app);
        return m;
    }
    default:
        return accessible_call(dest, path, call);
    }
}

static uint32_t
free_slot(struct a11y_ctx *c)
{
    for (;;) {
        uint32_t s = c->free_slot++ & (A11Y_FLIGHT_SLOTS - 1);
        if (c->flight[s].serial == 0)
            return s;
    }
}

static void
send_one(struct a11y_ctx *c, struct a11y_call call)
{
    uint32_t slot = free_slot(c);
    if (++c->seq >= (1u << (32 - A11Y_FLIGHT_BITS)))
        c->seq = 1;
    call.serial = (c->seq << A11Y_FLIGHT_BITS) | slot;
    DBusMessage *m = message_for(c, &call);
    dbus_message_set_serial(m, call.serial);
    DBusConnection *conn =
        c->buses[call.bus].p2p && call.kind != A11Y_K_PID ? c->buses[call.bus].p2p : c->conn;
    if (!dbus_connection_send(conn, m, NULL))
        abort(); /* libdbus fails only when out of memory */
    dbus_message_unref(m);
    c->flight[slot] = call;
    c->inflight++;
    struct a11y_bus *b = &c->buses[call.bus];
    if (b->inflight++ == 0)
        b->last_ns = sbx_now_ns();
    if (c->st)
        c->st->calls++;
}

static void
send_some(struct a11y_ctx *c)
{
    while (c->qhead < c->qlen && c->inflight < (uint32_t)c->o.window) {
        struct a11y_call call = c->queue[c->qhead++];
        if (!c->buses[call.bus].dead)
            send_one(c, call);
    }
    if (c->qhead == c->qlen)
        c->qhead = c->qlen = 0;
}

void
a11y_kill_bus(struct a11y_ctx *c, uint32_t bus, const char *why)
{
    struct a11y_bus *b = &c->buses[bus];
    if (b->dead)
        return;
    b->dead = true;
    if (b->p2p) {
        dbus_connection_close(b->p2p);
        dbus_connection_unref(b->p2p);
        b->p2p = NULL;
    }
    for (uint32_t s = 0; s < A11Y_FLIGHT_SLOTS && b->inflight; s++) {
        if (c->flight[s].serial && c->flight[s].bus == bus) {
            c->flight[s].serial = 0;
            b->inflight--;
            c->inflight--;
        }
    }
    if (bus >= 2) {
        const char *app = c->nodes[a11y_node_get(c, bus, ROOT)].name; /* "" if never answered */
        char note[SBX_A11Y_NOTE_MAX];
        snprintf(note, sizeof(note), "application `%s` (%s) skipped: %s", app, b->name, why);
        a11y_note(c, note);
        if (c->st)
            c->st->apps_skipped++;
    }
}

/* Errors that mean the application is gone, not that one object lacks something. */
static bool
error_kills(const char *name)
{
    return strcmp(name, DBUS_ERROR_SERVICE_UNKNOWN) == 0 ||
           strcmp(name, DBUS_ERROR_NO_REPLY) == 0 ||
           strcmp(name, DBUS_ERROR_NAME_HAS_NO_OWNER) == 0 ||
           strcmp(name, DBUS_ERROR_DISCONNECTED) == 0 ||
           strcmp(name, DBUS_ERROR_LIMITS_EXCEEDED) == 0;
}

static void
dispatch(struct a11y_ctx *c, DBusMessage *m)
{
    int type = dbus_message_get_type(m);
    if (type != DBUS_MESSAGE_TYPE_METHOD_RETURN && type != DBUS_MESSAGE_TYPE_ERROR)
        return; /* signals (NameAcquired) and calls to us: nothing to do */
    uint32_t serial = dbus_message_get_reply_serial(m);
    struct a11y_call *slot = &c->flight[serial & (A11Y_FLIGHT_SLOTS - 1)];
    if (serial == 0 || slot->serial != serial)
        return; /* the answer of an application already dropped */
    struct a11y_call call = *slot;
    slot->serial = 0;
    c->inflight--;
    struct a11y_bus *b = &c->buses[call.bus];
    b->inflight--;
    b->last_ns = sbx_now_ns();
    if (type == DBUS_MESSAGE_TYPE_ERROR) {
        const char *name = dbus_message_get_error_name(m);
        const char *msg = NULL;
        (void)dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &msg, DBUS_TYPE_INVALID);
        if (error_kills(name ? name : "")) {
            a11y_kill_bus(c, call.bus, msg ? msg : name);
            return;
        }
        if (call.kind != K_HELLO)
            a11y_on_error(c, &call, name ? name : "", msg ? msg : "");
        else
            a11y_kill_bus(c, call.bus, msg ? msg : "Hello refused");
        return;
    }
    if (call.kind != K_HELLO)
        a11y_on_reply(c, &call, m);
}

static void
check_stalls(struct a11y_ctx *c)
{
    uint64_t now = sbx_now_ns();
    uint64_t stall = (uint64_t)c->o.stall_ms * 1000000ULL;
    for (uint32_t i = 0; i < c->nbuses; i++) {
        struct a11y_bus *b = &c->buses[i];
        if (!b->dead && b->inflight && now - b->last_ns > stall) {
            char why[64];
            snprintf(why, sizeof(why), "no answer for %d ms", c->o.stall_ms);
            a11y_kill_bus(c, i, why);
        }
    }
}

static int
wait_ms(const struct a11y_ctx *c, sbx_error **err)
{
    uint64_t now = sbx_now_ns();
    if (now >= c->deadline_ns)
        return sbx_error_set(err, SBX_ETIMEDOUT, 0,
                             "accessibility snapshot: timed out after %d ms (%u calls unanswered)",
                             c->o.timeout_ms, c->inflight);
    uint64_t left = (c->deadline_ns - now) / 1000000ULL + 1;
    return left < 50 ? (int)left : 50; /* wake up now and then to look for stalled apps */
}

static void
drain(struct a11y_ctx *c, DBusConnection *conn)
{
    DBusMessage *m;
    while ((m = dbus_connection_pop_message(conn))) {
        dispatch(c, m);
        dbus_message_unref(m);
    }
}

static void
drain_all(struct a11y_ctx *c)
{
    drain(c, c->conn);
    for (uint32_t i = 0; i < c->nbuses; i++)
        if (c->buses[i].p2p)
            drain(c, c->buses[i].p2p); /* dispatch may drop it (kill_bus) */
}

static short
events_of(DBusConnection *conn)
{
    return (short)(POLLIN | (dbus_connection_has_messages_to_send(conn) ? POLLOUT : 0));
}

/* Wait up to ms for any connection, then let libdbus read and write what it can. */
static int
poll_all(struct a11y_ctx *c, int ms, sbx_error **err)
{
    size_t n = 0;
    struct pollfd *pf = calloc(c->nbuses + 1, sizeof(*pf));
    uint32_t *who = calloc(c->nbuses + 1, sizeof(*who));
    if (!pf || !who)
        abort();
    for (uint32_t i = 0; i <= c->nbuses; i++) {
        DBusConnection *conn = i == c->nbuses ? c->conn : c->buses[i].p2p;
        int fd = -1;
        if (!conn || !dbus_connection_get_unix_fd(conn, &fd))
            continue;
        pf[n] = (struct pollfd){.fd = fd, .events = events_of(conn)};
        who[n++] = i;
    }
    int ret = 0;
    if (poll(pf, (nfds_t)n, ms) < 0 && errno != EINTR)
        ret = sbx_error_set(err, SBX_EIO, errno, "poll the accessibility bus");
    for (size_t k = 0; ret == 0 && k < n; k++) {
        if (!pf[k].revents)
            continue;
        if (who[k] == c->nbuses) {
            if (!dbus_connection_read_write(c->conn, 0))
                ret = sbx_error_set(err, SBX_EIO, 0, "accessibility bus closed the connection");
        } else if (c->buses[who[k]].p2p && !dbus_connection_read_write(c->buses[who[k]].p2p, 0)) {
            a11y_kill_bus(c, who[k], "its direct connection closed");
        }
    }
    free(pf);
    free(who);
    return ret;
}

int
a11y_pump(struct a11y_ctx *c, sbx_error **err)
{
    for (;;) {
        send_some(c);
        drain_all(c);
        if (c->buses[0].dead || (c->nbuses > 1 && c->buses[1].dead))
            return sbx_error_set(err, SBX_EUNAVAIL, 0, "accessibility bus: the %s does not answer",
                                 c->buses[0].dead ? "bus daemon" : "registry (at-spi2-registryd)");
        send_some(c);
        if (c->inflight == 0 && c->qlen == 0)
            return 0;
        int ms = wait_ms(c, err);
        if (ms < 0)
            return ms;
        int ret = poll_all(c, ms, err);
        if (ret < 0)
            return ret;
        check_stalls(c);
    }
}

/* Boundary: the address comes from the application, which is inside this sandbox like us.
 * Only a unix socket is accepted, and only if the process at its other end is the one the bus
 * daemon says owns the application's name: nothing else can be reached through it. */
void
a11y_open_p2p(struct a11y_ctx *c, uint32_t bus)
{
    struct a11y_bus *b = &c->buses[bus];
    if (c->o.no_direct || !b->p2p_addr || !b->pid || b->dead ||
        !sbx_str_starts(b->p2p_addr, "unix:") || strchr(b->p2p_addr, ';'))
        return;
    DBusError e;
    dbus_error_init(&e);
    DBusConnection *conn = dbus_connection_open_private(b->p2p_addr, &e);
    dbus_error_free(&e);
    if (!conn)
        return;
    dbus_connection_set_exit_on_disconnect(conn, FALSE);
    dbus_connection_set_max_message_size(conn, MAX_MESSAGE);
    int fd = -1;
    struct ucred cred = {0};
    socklen_t len = sizeof(cred);
    if (!dbus_connection_get_socket(conn, &fd) ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0 ||
        (uint32_t)cred.pid != b->pid || cred.uid != geteuid()) {
        /* (a uid of its own: the app's bridge serves only its own user on the direct
         * connection; a desktop run as the image's user is asked through the bus instead) */
        dbus_connection_close(conn);
        dbus_connection_unref(conn);
        return;
    }
    b->p2p = conn;
}
