/*
 * sbx-atspi-tree - the accessibility tree read with libatspi (C, its own cache), making the
 * calls OSWorld makes per object, for the speed comparison only (tests and bench).
 *
 *   sbx-atspi-tree [--repeat N]      (finds the bus as every AT-SPI client does: DISPLAY)
 *
 * Per object: name, state set, attributes, extents when visible and showing, text, image,
 * selection, value, actions (name, description, key binding each), role name, children by
 * index; depth 50, 1024 children. Prints {"ms": .., "nodes": ..} per run on stderr; builds no
 * XML (that would only add to its time).
 */
#include <atspi/atspi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void
drop_error(GError **e)
{
    g_clear_error(e);
}

static void
component(AtspiAccessible *a, GArray *states)
{
    gboolean visible = FALSE;
    gboolean showing = FALSE;
    for (guint i = 0; states && i < states->len; i++) {
        AtspiStateType st = g_array_index(states, AtspiStateType, i);
        visible |= st == ATSPI_STATE_VISIBLE;
        showing |= st == ATSPI_STATE_SHOWING;
    }
    AtspiComponent *comp = atspi_accessible_get_component_iface(a);
    if (!comp)
        return;
    if (visible && showing) {
        GError *e = NULL;
        g_free(atspi_component_get_extents(comp, ATSPI_COORD_TYPE_SCREEN, &e));
        drop_error(&e);
    }
    g_object_unref(comp);
}

static void
text_value(AtspiAccessible *a)
{
    GError *e = NULL;
    AtspiText *t = atspi_accessible_get_text_iface(a);
    if (t) {
        gint n = atspi_text_get_character_count(t, &e);
        drop_error(&e);
        g_free(atspi_text_get_text(t, 0, n, &e));
        drop_error(&e);
        g_object_unref(t);
    }
    AtspiValue *v = atspi_accessible_get_value_iface(a);
    if (v) {
        (void)atspi_value_get_current_value(v, &e);
        drop_error(&e);
        (void)atspi_value_get_minimum_value(v, &e);
        drop_error(&e);
        (void)atspi_value_get_maximum_value(v, &e);
        drop_error(&e);
        (void)atspi_value_get_minimum_increment(v, &e);
        drop_error(&e);
        g_object_unref(v);
    }
}

static void
extras(AtspiAccessible *a)
{
    GError *e = NULL;
    AtspiImage *img = atspi_accessible_get_image_iface(a);
    if (img)
        g_object_unref(img);
    AtspiSelection *sel = atspi_accessible_get_selection_iface(a);
    if (sel)
        g_object_unref(sel);
    AtspiAction *act = atspi_accessible_get_action_iface(a);
    if (!act)
        return;
    gint n = atspi_action_get_n_actions(act, &e);
    drop_error(&e);
    for (gint i = 0; i < n; i++) {
        g_free(atspi_action_get_action_name(act, i, &e));
        drop_error(&e);
        g_free(atspi_action_get_action_description(act, i, &e));
        drop_error(&e);
        g_free(atspi_action_get_key_binding(act, i, &e));
        drop_error(&e);
    }
    g_object_unref(act);
}

static long
node(AtspiAccessible *a, int depth)
{
    GError *e = NULL;
    g_free(atspi_accessible_get_name(a, &e));
    drop_error(&e);
    AtspiStateSet *ss = atspi_accessible_get_state_set(a);
    GArray *states = ss ? atspi_state_set_get_states(ss) : NULL;
    GHashTable *attrs = atspi_accessible_get_attributes(a, &e);
    drop_error(&e);
    if (attrs)
        g_hash_table_unref(attrs);
    component(a, states);
    if (states)
        g_array_free(states, TRUE);
    if (ss)
        g_object_unref(ss);
    text_value(a);
    extras(a);
    g_free(atspi_accessible_get_role_name(a, &e));
    drop_error(&e);
    long count = 1;
    if (depth == 50)
        return count;
    gint n = atspi_accessible_get_child_count(a, &e);
    drop_error(&e);
    for (gint i = 0; i < n && i < 1024; i++) {
        AtspiAccessible *k = atspi_accessible_get_child_at_index(a, i, &e);
        drop_error(&e);
        if (!k)
            break;
        count += node(k, depth + 1);
        g_object_unref(k);
    }
    return count;
}

int
main(int argc, char **argv)
{
    long repeat = argc == 3 && strcmp(argv[1], "--repeat") == 0 ? strtol(argv[2], NULL, 10) : 1;
    (void)atspi_init();
    for (long r = 0; r < repeat; r++) {
        double t = now_ms();
        GError *e = NULL;
        AtspiAccessible *desk = atspi_get_desktop(0);
        long nodes = 1;
        gint n = atspi_accessible_get_child_count(desk, &e);
        drop_error(&e);
        for (gint i = 0; i < n; i++) {
            AtspiAccessible *app = atspi_accessible_get_child_at_index(desk, i, &e);
            drop_error(&e);
            if (app) {
                nodes += node(app, 1);
                atspi_accessible_clear_cache(app);
                g_object_unref(app);
            }
        }
        g_object_unref(desk);
        fprintf(stderr, "{\"ms\": %.3f, \"nodes\": %ld}\n", now_ms() - t, nodes);
    }
    return 0;
}
