/*
 * route.h - the route table of the lifecycle API (pure: method + raw path in, route out).
 *
 * Every route is mounted at `/` and at `/v1`. Paths are matched raw (not percent-decoded), so
 * an encoded `/` or `..` can never change which route is picked.
 */
#ifndef SBX_SERVER_ROUTE_H
#define SBX_SERVER_ROUTE_H

enum sbx_route_id {
    SBX_ROUTE_NOT_FOUND = 0,
    SBX_ROUTE_BAD_METHOD, /* path known, method not */
    SBX_ROUTE_HEALTH,
    SBX_ROUTE_LIST,
    SBX_ROUTE_CREATE,
    SBX_ROUTE_GET,
    SBX_ROUTE_DELETE,
    SBX_ROUTE_PATCH_METADATA,
    SBX_ROUTE_PAUSE,
    SBX_ROUTE_RESUME,
    SBX_ROUTE_RENEW,
    SBX_ROUTE_STOP,  /* sbx extension: stop, keep the filesystem */
    SBX_ROUTE_START, /* sbx extension: start a stopped sandbox */
    SBX_ROUTE_ENDPOINT,
    SBX_ROUTE_PROXY,
    SBX_ROUTE_METRICS_EVENTS,
    SBX_ROUTE_UNSUPPORTED, /* known OpenSandbox API we do not implement (snapshots, pools...) */
    SBX_ROUTE_PREFLIGHT,   /* CORS OPTIONS */
    SBX_ROUTE_SECRET_LIST, /* sbx admin API: GET /admin/secrets */
    SBX_ROUTE_SECRET_GET,  /* GET /admin/secrets/{name}: names and dates, never values */
    SBX_ROUTE_SECRET_SET,  /* PUT /admin/secrets/{name} */
    SBX_ROUTE_SECRET_DELETE,
    SBX_ROUTE_DESKTOP_VIEW,    /* POST /sandboxes/{id}/desktop/view: a view token */
    SBX_ROUTE_DESKTOP_VNC,     /* GET /sandboxes/{id}/desktop/vnc: WebSocket (key or token) */
    SBX_ROUTE_DESKTOP_PAGE,    /* GET /desktop/view/{id}: the live-view page (public, static) */
    SBX_ROUTE_DESKTOP_STATIC,  /* GET /desktop/static/{file}: its script and style (rest) */
    SBX_ROUTE_NOVNC,           /* GET /desktop/novnc/{path}: Debian's noVNC (rest) */
    SBX_ROUTE_DIAG_LOGS,       /* GET /sandboxes/{id}/diagnostics/logs?scope= */
    SBX_ROUTE_DIAG_EVENTS,     /* GET /sandboxes/{id}/diagnostics/events?scope= */
    SBX_ROUTE_METRICS,         /* GET /metrics: Prometheus (the key unless metrics_auth=false) */
    SBX_ROUTE_SNAPSHOT_CREATE, /* POST /sandboxes/{id}/snapshots */
    SBX_ROUTE_SNAPSHOT_LIST,   /* GET /snapshots */
    SBX_ROUTE_SNAPSHOT_GET,    /* GET /snapshots/{id} */
    SBX_ROUTE_SNAPSHOT_DELETE, /* DELETE /snapshots/{id} */
    SBX_ROUTE_SNAPSHOT_EXPORT, /* GET /snapshots/{id}/export (sbx: the image as an archive) */
    SBX_ROUTE_SNAPSHOT_IMPORT, /* POST /snapshots/import (sbx: such an archive, streamed) */
    SBX_ROUTE_CONSOLE_PAGE,    /* GET /console, /console/: the web console (public, static) */
    SBX_ROUTE_CONSOLE_STATIC,  /* GET /console/static/{file}: its script and style (rest) */
    SBX_ROUTE_SERVER_INFO,     /* GET /admin/server: version, providers, limits, images */
    /* /sandboxes/{id}/proxy/18080/policy of a sandbox with an egress policy (never matched
     * here: httpd.c turns such a proxy route into it, api_egress.c) */
    SBX_ROUTE_EGRESS_POLICY,
    SBX_ROUTE__COUNT /* not a route: the number of ids (server.c's handler table) */
};

#define SBX_ROUTE_SEG_MAX    64
#define SBX_ROUTE_SECRET_MAX 128

struct sbx_route_match {
    enum sbx_route_id id;
    char sandbox_id[SBX_ROUTE_SEG_MAX + 1];  /* raw segment ("" when too long) */
    char port[SBX_ROUTE_SEG_MAX + 1];        /* raw segment */
    char secret[SBX_ROUTE_SECRET_MAX + 1];   /* admin: the raw secret name segment */
    char snapshot_id[SBX_ROUTE_SEG_MAX + 1]; /* /snapshots/{id}: raw segment */
    /* proxy: the path after the port ("" or starting with '/'), in path; desktop static and
     * noVNC routes: the path after their prefix */
    const char *rest;
};

/* Match method and raw path; never fails (unknown routes give SBX_ROUTE_NOT_FOUND). */
void sbx_route_match(const char *method, const char *path, struct sbx_route_match *m);

/* Parse a port segment: 1..65535, decimal digits only. Returns the port or -1. */
int sbx_route_port(const char *s);

/* Whether a route needs the API key. */
int sbx_route_needs_auth(enum sbx_route_id id);

#endif
