/*
 * route.c - route matching for the lifecycle API and the router.
 */
#include "server/route.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_SEGS 5

struct segs {
    const char *p[MAX_SEGS];
    size_t len[MAX_SEGS];
    int n;
    const char *after; /* path after the 4th segment (proxy rest) */
};

/* Split up to MAX_SEGS segments; remember where the fourth one ended for the proxy rest. */
static void
split(const char *path, struct segs *s)
{
    memset(s, 0, sizeof *s);
    const char *p = path;
    while (*p == '/' && s->n < MAX_SEGS) {
        p++;
        size_t n = strcspn(p, "/");
        s->p[s->n] = p;
        s->len[s->n] = n;
        s->n++;
        p += n;
        if (s->n == 4)
            s->after = p;
    }
    if (*p) /* more segments than we keep: only the proxy route allows that */
        s->n = MAX_SEGS + 1;
}

static bool
seg_is(const struct segs *s, int i, const char *lit)
{
    return i < s->n && s->len[i] == strlen(lit) && memcmp(s->p[i], lit, s->len[i]) == 0;
}

static void
copy_seg(char *dst, const struct segs *s, int i)
{
    if (s->len[i] > SBX_ROUTE_SEG_MAX) {
        dst[0] = '\0';
        return;
    }
    memcpy(dst, s->p[i], s->len[i]);
    dst[s->len[i]] = '\0';
}

static enum sbx_route_id
pick(const char *method, const char *want, enum sbx_route_id id)
{
    return strcmp(method, want) == 0 ? id : SBX_ROUTE_BAD_METHOD;
}

static enum sbx_route_id
match_sandbox_sub(const char *method, const struct segs *s, struct sbx_route_match *m)
{
    if (s->n == 3 && seg_is(s, 2, "metadata"))
        return pick(method, "PATCH", SBX_ROUTE_PATCH_METADATA);
    if (s->n == 3 && seg_is(s, 2, "pause"))
        return pick(method, "POST", SBX_ROUTE_PAUSE);
    if (s->n == 3 && seg_is(s, 2, "resume"))
        return pick(method, "POST", SBX_ROUTE_RESUME);
    if (s->n == 3 && seg_is(s, 2, "renew-expiration"))
        return pick(method, "POST", SBX_ROUTE_RENEW);
    if (s->n == 3 && seg_is(s, 2, "stop"))
        return pick(method, "POST", SBX_ROUTE_STOP);
    if (s->n == 3 && seg_is(s, 2, "start"))
        return pick(method, "POST", SBX_ROUTE_START);
    if (s->n == 4 && seg_is(s, 2, "endpoints")) {
        copy_seg(m->port, s, 3);
        return pick(method, "GET", SBX_ROUTE_ENDPOINT);
    }
    if (s->n == 4 && seg_is(s, 2, "desktop") && seg_is(s, 3, "view"))
        return pick(method, "POST", SBX_ROUTE_DESKTOP_VIEW);
    if (s->n == 4 && seg_is(s, 2, "desktop") && seg_is(s, 3, "vnc"))
        return pick(method, "GET", SBX_ROUTE_DESKTOP_VNC);
    if (s->n == 4 && seg_is(s, 2, "diagnostics") && seg_is(s, 3, "logs"))
        return pick(method, "GET", SBX_ROUTE_DIAG_LOGS);
    if (s->n == 4 && seg_is(s, 2, "diagnostics") && seg_is(s, 3, "events"))
        return pick(method, "GET", SBX_ROUTE_DIAG_EVENTS);
    if (s->n == 3 && seg_is(s, 2, "snapshots"))
        return pick(method, "POST", SBX_ROUTE_SNAPSHOT_CREATE);
    return SBX_ROUTE_NOT_FOUND;
}

static enum sbx_route_id
match_sandboxes(const char *method, const char *path, struct sbx_route_match *m)
{
    struct segs s;
    split(path, &s);
    /* The proxy takes any rest, so it is matched on the first four segments only. */
    if (s.after && seg_is(&s, 2, "proxy") && s.len[1] > 0) {
        copy_seg(m->sandbox_id, &s, 1);
        copy_seg(m->port, &s, 3);
        m->rest = s.after;
        return SBX_ROUTE_PROXY;
    }
    if (s.n > MAX_SEGS - 1)
        return SBX_ROUTE_NOT_FOUND;
    if (s.n == 1)
        return strcmp(method, "GET") == 0 ? SBX_ROUTE_LIST : pick(method, "POST", SBX_ROUTE_CREATE);
    if (s.len[1] == 0)
        return SBX_ROUTE_NOT_FOUND;
    copy_seg(m->sandbox_id, &s, 1);
    if (s.n == 2) {
        if (strcmp(method, "GET") == 0)
            return SBX_ROUTE_GET;
        return pick(method, "DELETE", SBX_ROUTE_DELETE);
    }
    return match_sandbox_sub(method, &s, m);
}

/* /admin/secrets[/{name}] */
static enum sbx_route_id
match_secrets(const char *method, const char *path, struct sbx_route_match *m)
{
    const char *rest = path + strlen("/admin/secrets");
    if (*rest == '\0')
        return pick(method, "GET", SBX_ROUTE_SECRET_LIST);
    rest++; /* the '/' */
    size_t n = strlen(rest);
    if (n == 0 || strchr(rest, '/'))
        return SBX_ROUTE_NOT_FOUND;
    if (n <= SBX_ROUTE_SECRET_MAX)
        memcpy(m->secret, rest, n + 1);
    if (strcmp(method, "GET") == 0)
        return SBX_ROUTE_SECRET_GET;
    if (strcmp(method, "PUT") == 0)
        return SBX_ROUTE_SECRET_SET;
    return pick(method, "DELETE", SBX_ROUTE_SECRET_DELETE);
}

/* The live view's page and files: /desktop/view/{id}, /desktop/static/{f}, /desktop/novnc/... */
static enum sbx_route_id
match_desktop(const char *method, const char *path, struct sbx_route_match *m)
{
    static const char page[] = "/desktop/view/";
    static const char stat[] = "/desktop/static/";
    static const char novnc[] = "/desktop/novnc/";
    if (strncmp(path, page, sizeof page - 1) == 0) {
        const char *id = path + sizeof page - 1;
        size_t n = strlen(id);
        if (n == 0 || n > SBX_ROUTE_SEG_MAX || strchr(id, '/'))
            return SBX_ROUTE_NOT_FOUND;
        memcpy(m->sandbox_id, id, n + 1);
        return pick(method, "GET", SBX_ROUTE_DESKTOP_PAGE);
    }
    if (strncmp(path, stat, sizeof stat - 1) == 0) {
        m->rest = path + sizeof stat - 1;
        return pick(method, "GET", SBX_ROUTE_DESKTOP_STATIC);
    }
    if (strncmp(path, novnc, sizeof novnc - 1) == 0) {
        m->rest = path + sizeof novnc - 1;
        return pick(method, "GET", SBX_ROUTE_NOVNC);
    }
    return SBX_ROUTE_NOT_FOUND;
}

/* /snapshots, /snapshots/{id}, /snapshots/{id}/export */
static enum sbx_route_id
match_snapshots(const char *method, const char *path, struct sbx_route_match *m)
{
    struct segs s;
    split(path, &s);
    if (s.n == 1)
        return pick(method, "GET", SBX_ROUTE_SNAPSHOT_LIST);
    if (s.n > 3 || s.len[1] == 0)
        return SBX_ROUTE_NOT_FOUND;
    if (s.n == 2 && seg_is(&s, 1, "import") && strcmp(method, "POST") == 0)
        return SBX_ROUTE_SNAPSHOT_IMPORT;
    copy_seg(m->snapshot_id, &s, 1);
    if (s.n == 3)
        return seg_is(&s, 2, "export") ? pick(method, "GET", SBX_ROUTE_SNAPSHOT_EXPORT)
                                       : SBX_ROUTE_NOT_FOUND;
    if (strcmp(method, "GET") == 0)
        return SBX_ROUTE_SNAPSHOT_GET;
    return pick(method, "DELETE", SBX_ROUTE_SNAPSHOT_DELETE);
}

/* /pools, /pools/{name} (and the same under /warmpools) */
static enum sbx_route_id
match_pools(const char *method, const char *path, struct sbx_route_match *m)
{
    struct segs s;
    split(path, &s);
    if (s.n == 1)
        return strcmp(method, "GET") == 0 ? SBX_ROUTE_POOL_LIST
                                          : pick(method, "POST", SBX_ROUTE_POOL_CREATE);
    if (s.n != 2 || s.len[1] == 0)
        return SBX_ROUTE_NOT_FOUND;
    copy_seg(m->pool, &s, 1);
    if (strcmp(method, "GET") == 0)
        return SBX_ROUTE_POOL_GET;
    if (strcmp(method, "PUT") == 0)
        return SBX_ROUTE_POOL_UPDATE;
    return pick(method, "DELETE", SBX_ROUTE_POOL_DELETE);
}

/* The web console: /console, /console/ (the page), /console/static/{f} (its files). */
static enum sbx_route_id
match_console(const char *method, const char *path, struct sbx_route_match *m)
{
    static const char stat[] = "/console/static/";
    if (strcmp(path, "/console") == 0 || strcmp(path, "/console/") == 0)
        return pick(method, "GET", SBX_ROUTE_CONSOLE_PAGE);
    if (strncmp(path, stat, sizeof stat - 1) == 0) {
        m->rest = path + sizeof stat - 1;
        return pick(method, "GET", SBX_ROUTE_CONSOLE_STATIC);
    }
    return SBX_ROUTE_NOT_FOUND;
}

static enum sbx_route_id
match(const char *method, const char *path, struct sbx_route_match *m)
{
    if (strcmp(path, "/v1") == 0 || strncmp(path, "/v1/", 4) == 0)
        path += 3;
    if (strcmp(path, "/health") == 0)
        return pick(method, "GET", SBX_ROUTE_HEALTH);
    if (strcmp(path, "/metrics") == 0)
        return pick(method, "GET", SBX_ROUTE_METRICS);
    if (strcmp(path, "/metrics/events") == 0)
        return pick(method, "POST", SBX_ROUTE_METRICS_EVENTS);
    if (strcmp(path, "/sandboxes") == 0 || strncmp(path, "/sandboxes/", 11) == 0)
        return match_sandboxes(method, path, m);
    if (strcmp(path, "/admin/secrets") == 0 || strncmp(path, "/admin/secrets/", 15) == 0)
        return match_secrets(method, path, m);
    if (strncmp(path, "/desktop/", 9) == 0)
        return match_desktop(method, path, m);
    if (strcmp(path, "/admin/server") == 0)
        return pick(method, "GET", SBX_ROUTE_SERVER_INFO);
    if (strcmp(path, "/console") == 0 || strncmp(path, "/console/", 9) == 0)
        return match_console(method, path, m);
    if (strcmp(path, "/snapshots") == 0 || strncmp(path, "/snapshots/", 11) == 0)
        return match_snapshots(method, path, m);
    if (strcmp(path, "/pools") == 0 || strncmp(path, "/pools/", 7) == 0 ||
        strcmp(path, "/warmpools") == 0 || strncmp(path, "/warmpools/", 11) == 0)
        return match_pools(method, path, m);
    return SBX_ROUTE_NOT_FOUND;
}

void
sbx_route_match(const char *method, const char *path, struct sbx_route_match *m)
{
    memset(m, 0, sizeof *m);
    m->rest = "";
    m->id = match(method, path, m);
    /* CORS preflight for any API path; the proxy forwards OPTIONS to the sandbox instead. */
    if (strcmp(method, "OPTIONS") == 0 && m->id != SBX_ROUTE_PROXY && m->id != SBX_ROUTE_NOT_FOUND)
        m->id = SBX_ROUTE_PREFLIGHT;
}

int
sbx_route_port(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 5 || strspn(s, "0123456789") != n)
        return -1;
    int port = 0;
    for (size_t i = 0; i < n; i++)
        port = port * 10 + (s[i] - '0');
    return port >= 1 && port <= 65535 ? port : -1;
}

int
sbx_route_needs_auth(enum sbx_route_id id)
{
    /* The desktop's VNC WebSocket checks the key or a view token itself (desktop_view.c); its
     * page and files are static and public, as are the console's (console.c: the page asks
     * for the key and sends it as a header on each API call). */
    return id != SBX_ROUTE_HEALTH && id != SBX_ROUTE_PREFLIGHT && id != SBX_ROUTE_DESKTOP_VNC &&
           id != SBX_ROUTE_DESKTOP_PAGE && id != SBX_ROUTE_DESKTOP_STATIC &&
           id != SBX_ROUTE_NOVNC && id != SBX_ROUTE_CONSOLE_PAGE && id != SBX_ROUTE_CONSOLE_STATIC;
}
