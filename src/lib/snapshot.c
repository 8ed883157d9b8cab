/*
 * snapshot.c - libsbx's snapshot calls: create, get, list, delete (the OpenSandbox Snapshot API)
 * and export/import of a snapshot's image (sbx's GET /snapshots/{id}/export and
 * POST /snapshots/import), streamed to and from files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/client_internal.h"

/* The answer as JSON text (caller frees). */
static int
to_text(sbx_client *c, json_t *ans, char **json)
{
    if (!json)
        return 0;
    *json = ans ? json_dumps(ans, JSON_COMPACT) : client_strdup(c, "{}");
    return *json ? 0 : client_fail(c, SBX_ENOMEM, "out of memory");
}

/* "/v1/snapshots/<id><suffix>", or NULL (the failure is in c). */
static char *
snapshot_path(sbx_client *c, const char *id, const char *suffix)
{
    if (!id || !*id) {
        (void)client_fail(c, SBX_EINVAL, "empty snapshot id");
        return NULL;
    }
    char *eid = client_escape(c, id);
    char *path = NULL;
    if (!eid || asprintf(&path, "/v1/snapshots/%s%s", eid, suffix) < 0) {
        path = NULL;
        (void)client_fail(c, SBX_ENOMEM, "out of memory");
    }
    curl_free(eid);
    return path;
}

static int
call_text(sbx_client *c, const char *method, char *path, json_t *body, char **json)
{
    if (!path) {
        json_decref(body);
        return -SBX_EINVAL;
    }
    json_t *ans = NULL;
    int ret = client_call(c, method, path, body, &ans);
    if (ret == 0)
        ret = to_text(c, ans, json);
    json_decref(ans);
    json_decref(body);
    free(path);
    return ret;
}

int
sbx_snapshot_create(char **json, sbx_client *c, const char *id, const char *name)
{
    if (!c || !id || !*id)
        return c ? client_fail(c, SBX_EINVAL, "empty sandbox id") : -SBX_EINVAL;
    char *eid = client_escape(c, id);
    char *path = NULL;
    if (!eid || asprintf(&path, "/v1/sandboxes/%s/snapshots", eid) < 0)
        path = NULL;
    curl_free(eid);
    if (!path)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    json_t *body = name ? json_pack("{s:s}", "name", name) : json_object();
    return call_text(c, "POST", path, body, json);
}

int
sbx_snapshot_get(char **json, sbx_client *c, const char *snapshot_id)
{
    if (!c)
        return -SBX_EINVAL;
    return call_text(c, "GET", snapshot_path(c, snapshot_id, ""), NULL, json);
}

int
sbx_snapshot_list(char **json, sbx_client *c, const char *id)
{
    if (!c)
        return -SBX_EINVAL;
    char *eid = id ? client_escape(c, id) : NULL;
    char *path = NULL;
    if ((id && !eid) || asprintf(&path, "/v1/snapshots?pageSize=200%s%s", id ? "&sandboxId=" : "",
                                 id ? eid : "") < 0)
        path = NULL;
    curl_free(eid);
    if (!path)
        return client_fail(c, SBX_ENOMEM, "out of memory");
    return call_text(c, "GET", path, NULL, json);
}

int
sbx_snapshot_delete(sbx_client *c, const char *snapshot_id)
{
    if (!c)
        return -SBX_EINVAL;
    return call_text(c, "DELETE", snapshot_path(c, snapshot_id, ""), NULL, NULL);
}

int
sbx_snapshot_export(sbx_client *c, const char *snapshot_id, const char *local_path)
{
    if (!c || !local_path)
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    char *path = snapshot_path(c, snapshot_id, "/export");
    char *url = NULL;
    if (!path)
        return -SBX_EINVAL;
    int ret = asprintf(&url, "%s%s", c->host, path) < 0
                  ? client_fail(c, SBX_ENOMEM, "out of memory")
                  : client_download(c, url, NULL, local_path);
    if (ret == -SBX_ENOMEM)
        url = NULL;
    free(url);
    free(path);
    return ret;
}

static size_t
collect(char *p, size_t size, size_t nmemb, void *userdata)
{
    return client_buf_append(userdata, p, size * nmemb) < 0 ? 0 : size * nmemb;
}

static int
post_file(sbx_client *c, const char *url, FILE *f, off_t size, struct client_buf *resp)
{
    struct curl_slist *h = NULL;
    int ret = client_prepare(c, url, &h);
    struct curl_slist *t =
        ret == 0 ? curl_slist_append(h, "Content-Type: application/x-tar") : NULL;
    if (ret == 0 && !t)
        ret = client_fail(c, SBX_ENOMEM, "out of memory");
    if (ret == 0) {
        h = t;
        (void)curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
        (void)curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
        (void)curl_easy_setopt(c->curl, CURLOPT_READDATA, f);
        (void)curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)size);
        (void)curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, collect);
        (void)curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, resp);
        CURLcode rc = curl_easy_perform(c->curl);
        long status = 0;
        (void)curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
        if (rc != CURLE_OK)
            ret = client_fail(c, rc == CURLE_COULDNT_CONNECT ? SBX_EUNAVAIL : SBX_EIO, "%s: %s",
                              url, client_curl_error(c, rc));
        else if (status < 200 || status > 299)
            ret = client_http_error(c, status, resp->data, resp->len);
    }
    curl_slist_free_all(h);
    return ret;
}

int
sbx_snapshot_import(char **json, sbx_client *c, const char *local_path)
{
    if (!c || !local_path)
        return c ? client_fail(c, SBX_EINVAL, "invalid arguments") : -SBX_EINVAL;
    FILE *f = fopen(local_path, "rbe");
    struct stat st;
    if (!f || fstat(fileno(f), &st) < 0) {
        int e = errno;
        if (f)
            (void)fclose(f);
        return client_fail(c, e == ENOENT ? SBX_ENOTFOUND : SBX_EIO, "%s: %s", local_path,
                           strerror(e)); // NOLINT(concurrency-mt-unsafe): message only
    }
    char *url = NULL;
    struct client_buf resp;
    client_buf_init(&resp, SBX_CLIENT_MAX_BODY);
    int ret = asprintf(&url, "%s/v1/snapshots/import", c->host) < 0
                  ? client_fail(c, SBX_ENOMEM, "out of memory")
                  : post_file(c, url, f, st.st_size, &resp);
    (void)fclose(f);
    if (ret == 0 && json) {
        *json = malloc(resp.len + 1);
        if (*json) {
            memcpy(*json, resp.data ? resp.data : "", resp.len);
            (*json)[resp.len] = '\0';
        } else {
            ret = client_fail(c, SBX_ENOMEM, "out of memory");
        }
    }
    client_buf_free(&resp);
    free(url);
    return ret;
}
