/*
 * session_bus.c - the session bus learns the desktop's environment: the bus starts while X
 * does (session.c), so it has no DISPLAY; services it starts on demand (gnome-terminal-server,
 * dconf-service...) would get none and fail. What dbus-update-activation-environment does, in
 * one call.
 */
#include <string.h>

#include <dbus/dbus.h>

#include "common/log.h"
#include "desktop/desktop_int.h"

#define UPDATE_TIMEOUT_MS 2000

static void
append_env(DBusMessageIter *dict, char *const *env)
{
    for (size_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq)
            continue;
        char key[128];
        size_t n = (size_t)(eq - env[i]);
        if (n == 0 || n >= sizeof key)
            continue;
        memcpy(key, env[i], n);
        key[n] = '\0';
        const char *k = key;
        const char *v = eq + 1;
        DBusMessageIter e;
        (void)dbus_message_iter_open_container(dict, DBUS_TYPE_DICT_ENTRY, NULL, &e);
        (void)dbus_message_iter_append_basic(&e, DBUS_TYPE_STRING, &k);
        (void)dbus_message_iter_append_basic(&e, DBUS_TYPE_STRING, &v);
        (void)dbus_message_iter_close_container(dict, &e);
    }
}

void
desk_session_bus_env(struct sbx_desktop *d)
{
    if (!d->session_bus || !d->env)
        return;
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *c = dbus_connection_open_private(d->session_bus, &err);
    if (c && !dbus_bus_register(c, &err)) {
        dbus_connection_close(c);
        dbus_connection_unref(c);
        c = NULL;
    }
    DBusMessage *m =
        c ? dbus_message_new_method_call("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "UpdateActivationEnvironment")
          : NULL;
    if (m) {
        DBusMessageIter it;
        DBusMessageIter dict;
        dbus_message_iter_init_append(m, &it);
        (void)dbus_message_iter_open_container(&it, DBUS_TYPE_ARRAY, "{ss}", &dict);
        append_env(&dict, d->env);
        (void)dbus_message_iter_close_container(&it, &dict);
        DBusMessage *r = dbus_connection_send_with_reply_and_block(c, m, UPDATE_TIMEOUT_MS, &err);
        if (r)
            dbus_message_unref(r);
        dbus_message_unref(m);
    }
    if (dbus_error_is_set(&err))
        sbx_warn("desktop: the session bus's activation environment: %s", err.message);
    dbus_error_free(&err);
    if (c) {
        dbus_connection_close(c);
        dbus_connection_unref(c);
    }
}
