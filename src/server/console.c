/*
 * console.c - the web console: a page of plain HTML, CSS and JavaScript (www/console.*),
 * served from inside the binary, that drives the lifecycle API with the API key.
 *
 *   GET /console, /console/            the page (public: it holds no data and no key)
 *   GET /console/static/{console.js,console.css}
 *   GET /admin/server                  (API key) what the server page shows
 *
 * The page asks for the API key and keeps it in the tab's sessionStorage; every call sends it
 * as the OPEN-SANDBOX-API-KEY header (never a cookie), so another site's page cannot make the
 * browser call the API with it (docs/security.md, "The web console"). The page's
 * Content-Security-Policy allows scripts, styles, connections and frames (the desktop viewer)
 * from this origin only, no inline script or style, and no page of any origin may frame it.
 */
#include "server/console.h"

#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "server/config.h"
#include "server/provider.h"
#ifdef SBX_HAVE_RUNTIME
#include "image/image.h"
#endif

#define CSP_CONSOLE                                                                         \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " \
    "connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; "            \
    "form-action 'none'; frame-ancestors 'none'"

extern const unsigned char sbx_console_html[], sbx_console_js[], sbx_console_css[];
extern const size_t sbx_console_html_len, sbx_console_js_len, sbx_console_css_len;

static enum MHD_Result
send_static(struct sbx_req *r, const void *data, size_t len, const char *type)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
    (void)MHD_add_response_header(resp, "Content-Type", type);
    (void)MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    (void)MHD_add_response_header(resp, "Cache-Control", "no-cache");
    /* on every file, not only the page: a script or style opened on its own is inert too */
    (void)MHD_add_response_header(resp, "Content-Security-Policy", CSP_CONSOLE);
    (void)MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    (void)MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    (void)MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
    (void)MHD_add_response_header(resp, "X-Request-ID", r->rid);
    enum MHD_Result ret = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    r->done = true;
    return ret;
}

static enum MHD_Result
console_handle(struct sbx_req *r)
{
    if (r->route.id == SBX_ROUTE_CONSOLE_PAGE)
        return send_static(r, sbx_console_html, sbx_console_html_len, "text/html; charset=utf-8");
    if (strcmp(r->route.rest, "console.js") == 0)
        return send_static(r, sbx_console_js, sbx_console_js_len, "text/javascript; charset=utf-8");
    if (strcmp(r->route.rest, "console.css") == 0)
        return send_static(r, sbx_console_css, sbx_console_css_len, "text/css; charset=utf-8");
    return sbx_http_send_error(r, 404, "GENERAL::NOT_FOUND", "no such file");
}

/* ---- GET /admin/server ---- */

static json_t *
limits_json(const struct sbx_server_config *c)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s*}", "maxSandboxes",
                     (json_int_t)c->max_sandboxes, "maxTimeoutSeconds",
                     (json_int_t)c->max_timeout_s, "maxBodyBytes", (json_int_t)c->max_body_bytes,
                     "createWorkers", (json_int_t)c->create_workers, "maxConnections",
                     (json_int_t)c->max_connections, "maxConnectionsPerClient",
                     (json_int_t)c->max_connections_per_client, "waitUsableSeconds",
                     (json_int_t)c->wait_usable_s, "sandboxMemory", c->sandbox_memory);
}

/* The images of the native provider's store, or an empty list when there is no store (a
 * server without the native provider, or one that never pulled): never created here. */
static json_t *
images_json(const struct sbx_server_config *c)
{
    json_t *a = json_array();
#ifdef SBX_HAVE_RUNTIME
    sbx_autofree char *root = sbx_image_default_root(c->state_dir);
    sbx_autofree char *index = sbx_xasprintf("%s/index.json", root);
    struct sbx_image_store *s = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (access(index, R_OK) < 0 || sbx_image_store_open(&s, root, &err) < 0)
        return a;
    struct sbx_image_info *v = NULL;
    size_t n = 0;
    if (sbx_image_list(&v, &n, s, &err) == 0) {
        for (size_t i = 0; i < n; i++)
            (void)json_array_append_new(
                a, json_pack("{s:s, s:s, s:I, s:s*}", "name", v[i].name, "digest", v[i].digest,
                             "size", (json_int_t)v[i].size, "created", v[i].created));
        sbx_image_info_free(v, n);
    }
    sbx_image_store_close(s);
#else
    (void)c;
#endif
    return a;
}

void
sbx_api_server_info(struct sbx_req *r, struct sbx_reply *out)
{
    const struct sbx_server_config *c = r->srv->cfg;
    json_t *supported = json_array();
    for (size_t i = 0; i < c->n_providers; i++)
        (void)json_array_append_new(supported, json_string(c->providers[i]));
    out->status = 200;
    out->body = json_pack("{s:s, s:s, s:s, s:s*, s:b, s:{s:o, s:s*, s:o}, s:o, s:o}", "version",
                          SBX_VERSION, "listen", c->listen, "stateDir", c->state_dir, "publicAddr",
                          c->public_addr, "metricsAuth", !c->metrics_public, "providers",
                          "supported", supported, "default", c->default_provider, "status",
                          sbx_registry_status(r->srv->reg), "limits", limits_json(c), "images",
                          images_json(c));
}

const struct sbx_http_handler sbx_console_handler = {.end = console_handle};
