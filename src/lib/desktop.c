/*
 * desktop.c - sbx_desktop_call(): a sandbox's desktop endpoints (execd's /desktop/..., through
 * the server's router like every execd call; docs/desktop.md lists them), on client_execd_call,
 * which sbx_pty_open (pty.c) uses too.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/client_internal.h"

/* Screenshots of an 8192x8192 screen and accessibility trees stay under this. */
#define DESKTOP_MAX_BODY (256u << 20)

static size_t
collect(char *p, size_t size, size_t nmemb, void *userdata)
{
    size_t n = size * nmemb;
    return client_buf_append(userdata, p, n) == 0 ? n : 0;
}

static int
check_path(sbx_client *c, const char *path)
{
    /* Only below /desktop: the call cannot be pointed at another execd endpoint. */
    if (!path || path[0] != '/' || strstr(path, "..") || strpbrk(path, " \r\n#"))
        return client_fail(c, SBX_EINVAL,
                           "desktop path `%s` must start with / (e.g. "
                           "/screenshot?format=jpeg)",
                           path ? path : "");
    return 0;
}

static int
perform(sbx_client *c, const char *method, const char *json_body, struct curl_slist *h,
        struct client_buf *resp)
{
    (void)curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    if (json_body) {
        (void)curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, json_body);
        (void)curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(json_body));
    } else if (strcmp(method, "GET") != 0) {
        (void)curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, "");
        (void)curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, 0L);
    }
    (void)curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
    (void)curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, collect);
    (void)curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, resp);
    CURLcode rc = curl_easy_perform(c->curl);
    if (rc != CURLE_OK)
        return client_fail(c, rc == CURLE_WRITE_ERROR ? SBX_ELIMIT : SBX_EIO, "execd: %s",
                           client_curl_error(c, rc));
    long status = 0;
    (void)curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status > 299)
        return client_http_error(c, status, resp->data, resp->len);
    return 0;
}

int
client_execd_call(sbx_client *c, const char *id, const sbx_desktop_request *req, char **out,
                  size_t *out_len)
{
    *out = NULL;
    if (out_len)
        *out_len = 0;
    char *base = NULL;
    struct curl_slist *ep = NULL;
    int ret = client_execd_endpoint(c, id, &base, &ep);
    char *url = NULL;
    if (ret == 0 && asprintf(&url, "%s%s", base, req->path) < 0)
        ret = client_fail(c, SBX_ENOMEM, "out of memory");
    struct curl_slist *h = NULL;
    if (ret == 0)
        ret = client_prepare(c, url, &h);
    for (struct curl_slist *e = ep; ret == 0 && e; e = e->next) {
        struct curl_slist *n = curl_slist_append(h, e->data);
        ret = n ? 0 : client_fail(c, SBX_ENOMEM, "out of memory");
        h = n ? n : h;
    }
    if (ret == 0 && req->json_body) {
        struct curl_slist *n = curl_slist_append(h, "Content-Type: application/json");
        ret = n ? 0 : client_fail(c, SBX_ENOMEM, "out of memory");
        h = n ? n : h;
    }
    struct client_buf resp;
    client_buf_init(&resp, DESKTOP_MAX_BODY);
    if (ret == 0)
        ret = perform(c, req->method ? req->method : "GET", req->json_body, h, &resp);
    (void)curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, NULL);
    (void)curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, NULL);
    (void)curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
    curl_slist_free_all(h);
    curl_slist_free_all(ep);
    free(url);
    free(base);
    if (ret == 0 && !resp.data)
        resp.data = calloc(1, 1); /* an empty answer: "" */
    if (ret == 0 && !resp.data)
        ret = client_fail(c, SBX_ENOMEM, "out of memory");
    if (ret < 0) {
        client_buf_free(&resp);
        return ret;
    }
    *out = resp.data; /* NUL-terminated by client_buf_append */
    if (out_len)
        *out_len = resp.len;
    return 0;
}

int
sbx_desktop_call(sbx_client *c, const char *id, const sbx_desktop_request *req, char **out,
                 size_t *out_len)
{
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (check_path(c, req->path) < 0)
        return -SBX_EINVAL;
    char *path = NULL;
    if (asprintf(&path, "/desktop%s", strcmp(req->path, "/") ? req->path : "") < 0)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    sbx_desktop_request r = *req;
    r.path = path;
    int ret = client_execd_call(c, id, &r, out, out_len);
    free(path);
    return ret;
}
