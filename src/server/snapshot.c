/*
 * snapshot.c - snapshots: records (SQLite, one JSON document each), the capture through the
 * manager (the sandbox busy for it, its processes frozen only for the copy), the image written
 * in the background (compress, commit into the image store), and the API.
 *
 * A record is {id, sandboxId, name?, status{state, reason, message?, lastTransitionAt},
 * createdAt} plus sbx's own keys starting with `_` (never shown): `_image` (the store name),
 * `_provider` (where the source ran), `_frozen_us`.
 *
 * The capture happens before the 202: the snapshot holds the files as they were when the
 * request was answered, and a sandbox deleted right after still has its snapshot.
 */
#include "server/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "image/image.h"
#include "server/manager.h"
#include "server/meta.h"
#include "server/store.h"

#define PAGE_SIZE_MAX 200
#define NAME_MAX_LEN  256
/* Labels of a snapshot's image: an exported snapshot keeps where it came from. */
#define LABEL_ID      "io.sbx.snapshot.id"
#define LABEL_SANDBOX "io.sbx.snapshot.sandbox"
#define LABEL_NAME    "io.sbx.snapshot.name"

struct sbx_snaps {
    struct sbx_store *store;
    struct sbx_mgr *mgr;
    char *image_root;
    char *tmp_dir;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    json_t *items; /* id -> record */
    int writers;   /* background image writes running */
};

/* ---- records ---- */

static void
now_string(char ts[32])
{
    sbx_srv_format_time(sbx_wall_ms(), ts);
}

static void
set_status(json_t *doc, const char *state, const char *reason, const char *message)
{
    char ts[32];
    now_string(ts);
    json_t *st =
        json_pack("{s:s,s:s,s:s}", "state", state, "reason", reason, "lastTransitionAt", ts);
    if (message)
        (void)json_object_set_new(st, "message", json_string(message));
    (void)json_object_set_new(doc, "status", st);
}

static const char *
state_of(const json_t *doc)
{
    const char *s = json_string_value(json_object_get(json_object_get(doc, "status"), "state"));
    return s ? s : "";
}

/* Persist doc (under s->mu); a failed write is logged: the record in memory stays right. */
static int
save(struct sbx_snaps *s, json_t *doc, sbx_error **err)
{
    const char *id = json_string_value(json_object_get(doc, "id"));
    return sbx_store_snapshot_put(s->store, id, doc, err);
}

/* The API's view: the record without sbx's private keys. */
static json_t *
public_json(const json_t *doc)
{
    json_t *o = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)doc, k, v) {
        if (k[0] != '_')
            (void)json_object_set(o, k, v);
    }
    return o;
}

static char *
image_name(const char *id)
{
    return sbx_xasprintf("%s:%s", SBX_SNAPSHOT_REPO, id);
}

static int
open_images(struct sbx_snaps *s, struct sbx_image_store **out, sbx_error **err)
{
    return sbx_image_store_open(out, s->image_root, err);
}

/* Drop the snapshot's image name; its layers stay while a sandbox restored from it pins them. */
static void
remove_image(struct sbx_snaps *s, const char *id)
{
    struct sbx_image_store *st = NULL;
    sbx_autoerror sbx_error *err = NULL;
    sbx_autofree char *name = image_name(id);
    if (open_images(s, &st, &err) == 0 && sbx_image_remove(st, name, &err) < 0 &&
        sbx_error_code(err) != SBX_ENOTFOUND)
        sbx_warn("snapshot %s: remove image: %s", id, sbx_error_msg(err));
    sbx_image_store_close(st);
}

/* ---- open: the records, and what a killed server left behind ---- */

static void
load_one(json_t *doc, void *ud)
{
    struct sbx_snaps *s = ud;
    const char *id = json_string_value(json_object_get(doc, "id"));
    if (!id) {
        json_decref(doc);
        return;
    }
    (void)json_object_set_new(s->items, id, doc);
}

static void
recover(struct sbx_snaps *s)
{
    const char *id;
    json_t *doc;
    void *tmp;
    json_object_foreach_safe(s->items, tmp, id, doc)
    {
        sbx_autoerror sbx_error *err = NULL;
        if (strcmp(state_of(doc), "Creating") == 0) {
            /* Its image may be half written: the name goes, the record says why. */
            remove_image(s, id);
            set_status(doc, "Failed", "snapshot_interrupted",
                       "the server stopped while the snapshot was written");
            if (save(s, doc, &err) < 0)
                sbx_warn("snapshot %s: %s", id, sbx_error_msg(err));
        } else if (strcmp(state_of(doc), "Deleting") == 0) {
            remove_image(s, id);
            if (sbx_store_snapshot_delete(s->store, id, &err) < 0)
                sbx_warn("snapshot %s: %s", id, sbx_error_msg(err));
            else
                (void)json_object_del(s->items, id);
        }
    }
}

int
sbx_snaps_open(struct sbx_snaps **out, struct sbx_store *store, struct sbx_mgr *mgr,
               const char *state_dir, sbx_error **err)
{
    struct sbx_snaps *s = sbx_xcalloc(1, sizeof *s);
    s->store = store;
    s->mgr = mgr;
    s->image_root = sbx_image_default_root(state_dir);
    s->tmp_dir = sbx_xasprintf("%s/tmp", s->image_root);
    s->items = json_object();
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (sbx_store_snapshot_load(store, load_one, s, err) < 0) {
        sbx_snaps_close(s);
        return sbx_error_wrap(err, "load snapshots");
    }
    recover(s);
    *out = s;
    return 0;
}

void
sbx_snaps_close(struct sbx_snaps *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    while (s->writers > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    json_decref(s->items);
    free(s->image_root);
    free(s->tmp_dir);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int
sbx_snaps_image(struct sbx_snaps *s, const char *id, char **image, sbx_error **err)
{
    pthread_mutex_lock(&s->mu);
    json_t *doc = json_object_get(s->items, id);
    int r = 0;
    if (!doc)
        r = sbx_error_set(err, SBX_ENOTFOUND, 0, "snapshot `%.64s` not found", id);
    else if (strcmp(state_of(doc), "Ready") != 0)
        r = sbx_error_set(err, SBX_ECONFLICT, 0, "snapshot `%s` is %s, not Ready", id,
                          state_of(doc));
    else
        *image = image_name(id);
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* ---- writing the image (a thread per snapshot) ---- */

struct job {
    struct sbx_snaps *s;
    char id[SBX_UUID_LEN + 1];
    char sandbox[SBX_UUID_LEN + 1];
    char name[NAME_MAX_LEN + 1];
    struct sbx_snapshot_capture cap;
};

static void
capture_clear(struct sbx_snapshot_capture *c)
{
    if (c->fd >= 0)
        (void)close(c->fd);
    c->fd = -1;
    free(c->base);
    free(c->diff_id);
    c->base = c->diff_id = NULL;
}

static int
write_image(struct job *j, sbx_error **err)
{
    struct sbx_image_store *st = NULL;
    if (open_images(j->s, &st, err) < 0)
        return -sbx_error_code(*err);
    sbx_autofree char *name = image_name(j->id);
    int r = 0;
    if (j->cap.is_layer) {
        sbx_autofree char *comment =
            sbx_xasprintf("sbx snapshot %s of sandbox %s", j->id, j->sandbox);
        json_t *labels = json_pack("{s:s,s:s}", LABEL_ID, j->id, LABEL_SANDBOX, j->sandbox);
        if (*j->name)
            (void)json_object_set_new(labels, LABEL_NAME, json_string(j->name));
        struct sbx_image_commit_opts o = {.base = j->cap.base,
                                          .layer_fd = j->cap.fd,
                                          .diff_id = j->cap.diff_id,
                                          .name = name,
                                          .comment = comment,
                                          .labels = labels};
        r = sbx_image_commit(st, &o, NULL, err);
        json_decref(labels);
    } else {
        /* An archive (docker save) is imported from its path in /proc: the fd is unlinked. */
        sbx_autofree char *path = sbx_xasprintf("/proc/self/fd/%d", j->cap.fd);
        r = lseek(j->cap.fd, 0, SEEK_SET) < 0
                ? sbx_error_set(err, SBX_EIO, errno, "rewind the archive")
                : sbx_image_import(st, path, name, NULL, err);
    }
    sbx_image_store_close(st);
    return r;
}

static void *
job_run(void *arg)
{
    struct job *j = arg;
    struct sbx_snaps *s = j->s;
    uint64_t t0 = sbx_now_ms();
    sbx_autoerror sbx_error *err = NULL;
    int r = write_image(j, &err);
    capture_clear(&j->cap);
    pthread_mutex_lock(&s->mu);
    json_t *doc = json_object_get(s->items, j->id);
    if (doc) {
        if (r < 0) {
            sbx_warn("snapshot %s: %s", j->id, sbx_error_msg(err));
            set_status(doc, "Failed", "snapshot_capture_failed", sbx_error_msg(err));
        } else {
            sbx_info("snapshot %s of sandbox %s: ready (image written in %llu ms)", j->id,
                     j->sandbox, (unsigned long long)(sbx_now_ms() - t0));
            set_status(doc, "Ready", "snapshot_ready", NULL);
        }
        sbx_autoerror sbx_error *serr = NULL;
        if (save(s, doc, &serr) < 0)
            sbx_warn("snapshot %s: %s", j->id, sbx_error_msg(serr));
    }
    s->writers--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(j);
    return NULL;
}

static int
start_job(struct job *j, sbx_error **err)
{
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int e = pthread_create(&t, &at, job_run, j);
    pthread_attr_destroy(&at);
    return e ? sbx_error_set(err, SBX_EGENERIC, e, "start the snapshot writer") : 0;
}

/* ---- API ---- */

static const char *
snapshot_id(struct sbx_req *r, struct sbx_reply *out)
{
    if (!sbx_srv_is_uuid(r->route.snapshot_id)) {
        sbx_reply_error(out, 404, "SNAPSHOT::NOT_FOUND", "snapshot `%.64s` not found",
                        r->route.snapshot_id);
        return NULL;
    }
    return r->route.snapshot_id;
}

static bool
printable(const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return false;
    }
    return true;
}

/* The optional body {"name": string}; anything else is refused (additionalProperties false). */
static int
create_name(struct sbx_req *r, const char **name, json_t **body, struct sbx_reply *out)
{
    *name = NULL;
    *body = NULL;
    if (r->body.len == 0)
        return 0;
    json_error_t jerr;
    *body = json_loadb(r->body.data, r->body.len, 0, &jerr);
    const char *k;
    json_t *v;
    if (!json_is_object(*body)) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "body must be a JSON object");
        return -1;
    }
    json_object_foreach (*body, k, v) {
        if (strcmp(k, "name") != 0) {
            sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER", "unknown field `%.64s`", k);
            return -1;
        }
    }
    json_t *n = json_object_get(*body, "name");
    if (n && !json_is_null(n) &&
        (!json_is_string(n) || json_string_length(n) == 0 || json_string_length(n) > NAME_MAX_LEN ||
         !printable(json_string_value(n)))) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "`name` must be a string of 1-%d printable characters", NAME_MAX_LEN);
        return -1;
    }
    *name = json_string_value(n);
    return 0;
}

static void
capture_failed(struct sbx_reply *out, const sbx_error *err, const char *prov)
{
    switch (sbx_error_code(err)) {
    case SBX_ECONFLICT:
        sbx_reply_from(out, err, "SNAPSHOT::INVALID_SOURCE_STATE");
        return;
    case SBX_EINVAL:
        /* a provider without snapshots, or a sandbox it cannot capture (host image, RAM) */
        sbx_reply_from(out, err, "SANDBOX::API_NOT_SUPPORTED");
        if (!*prov)
            out->status = 501;
        return;
    default:
        sbx_reply_from(out, err, NULL);
    }
}

static json_t *
new_record(const char *id, const char *sandbox, const char *name, const char *prov)
{
    char ts[32];
    now_string(ts);
    json_t *doc = json_pack("{s:s,s:s,s:s,s:s}", "id", id, "sandboxId", sandbox, "createdAt", ts,
                            "_provider", prov);
    if (name)
        (void)json_object_set_new(doc, "name", json_string(name));
    set_status(doc, "Creating", "snapshot_accepted", NULL);
    return doc;
}

/* Record the captured snapshot and hand its image to a writer thread (which owns j then). */
static int
accept_job(struct sbx_snaps *s, struct job *j, json_t *doc, sbx_error **err)
{
    pthread_mutex_lock(&s->mu);
    int r = save(s, doc, err);
    if (r == 0) {
        (void)json_object_set(s->items, j->id, doc);
        s->writers++;
    }
    pthread_mutex_unlock(&s->mu);
    if (r < 0)
        return r;
    if ((r = start_job(j, err)) < 0) {
        pthread_mutex_lock(&s->mu);
        s->writers--;
        (void)json_object_del(s->items, j->id);
        sbx_autoerror sbx_error *serr = NULL;
        (void)sbx_store_snapshot_delete(s->store, j->id, &serr);
        pthread_mutex_unlock(&s->mu);
    }
    return r;
}

static void
h_create(struct sbx_snaps *s, struct sbx_req *r, struct sbx_reply *out)
{
    const char *sandbox = r->route.sandbox_id;
    const char *name = NULL;
    json_t *body = NULL;
    if (create_name(r, &name, &body, out) < 0) {
        json_decref(body);
        return;
    }
    if (!sbx_srv_is_uuid(sandbox)) {
        json_decref(body);
        sbx_reply_error(out, 404, "SANDBOX::SANDBOX_NOT_FOUND", "sandbox `%.64s` not found",
                        sandbox);
        return;
    }
    struct job *j = sbx_xcalloc(1, sizeof *j);
    j->s = s;
    sbx_srv_uuid4(j->id);
    j->cap = (struct sbx_snapshot_capture){.id = j->id, .tmp_dir = s->tmp_dir, .fd = -1};
    (void)snprintf(j->sandbox, sizeof j->sandbox, "%.36s", sandbox);
    char prov[SBX_NAME_MAX] = "";
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_mgr_snapshot(s->mgr, sandbox, &j->cap, prov, &err) < 0) {
        capture_failed(out, err, prov);
        capture_clear(&j->cap);
        free(j);
        json_decref(body);
        return;
    }
    json_t *doc = new_record(j->id, sandbox, name, prov);
    if (name)
        (void)snprintf(j->name, sizeof j->name, "%s", name);
    json_decref(body);
    uint64_t frozen = j->cap.frozen_us;
    (void)json_object_set_new(doc, "_frozen_us", json_integer((json_int_t)frozen));
    char id[SBX_UUID_LEN + 1];
    memcpy(id, j->id, sizeof id);
    if (accept_job(s, j, doc, &err) < 0) {
        capture_clear(&j->cap);
        free(j);
        json_decref(doc);
        sbx_reply_from(out, err, NULL);
        return;
    }
    sbx_info("snapshot %s of sandbox %s: captured (frozen %llu us)", id, sandbox,
             (unsigned long long)frozen);
    out->status = 202;
    out->location = sbx_xasprintf("/v1/snapshots/%s", id);
    pthread_mutex_lock(&s->mu);
    out->body = public_json(doc);
    pthread_mutex_unlock(&s->mu);
    json_decref(doc);
}

/* ---- list ---- */

struct list_q {
    json_t *states;
    const char *sandbox;
    const char *name;
    int64_t page, page_size;
    const char *bad;
};

static void
q_state(const char *v, void *ud)
{
    struct list_q *q = ud;
    if (!v || !*v)
        q->bad = "state";
    else
        (void)json_array_append_new(q->states, json_string(v));
}

static void
q_sandbox(const char *v, void *ud)
{
    struct list_q *q = ud;
    if (!v || !*v)
        q->bad = "sandboxId";
    else
        q->sandbox = sbx_xstrdup(v); /* freed by h_list */
}

static void
q_name(const char *v, void *ud)
{
    struct list_q *q = ud;
    if (!v || !*v)
        q->bad = "name";
    else
        q->name = sbx_xstrdup(v); /* freed by h_list */
}

static void
q_num(const char *v, int64_t *dst, const char *name, struct list_q *q, int64_t max)
{
    uint64_t n = 0;
    if (!v || sbx_parse_u64(v, &n, NULL) < 0 || n < 1 || n > (uint64_t)max)
        q->bad = name;
    else
        *dst = (int64_t)n;
}

static void
q_page(const char *v, void *ud)
{
    q_num(v, &((struct list_q *)ud)->page, "page", ud, INT32_MAX);
}

static void
q_page_size(const char *v, void *ud)
{
    q_num(v, &((struct list_q *)ud)->page_size, "pageSize", ud, PAGE_SIZE_MAX);
}

static bool
list_keep(const json_t *doc, const struct list_q *q)
{
    if (q->sandbox && strcmp(json_string_value(json_object_get(doc, "sandboxId")), q->sandbox) != 0)
        return false;
    const char *name = json_string_value(json_object_get(doc, "name"));
    if (q->name && (!name || strcmp(name, q->name) != 0))
        return false;
    if (json_array_size(q->states) == 0)
        return true;
    size_t i;
    json_t *v;
    json_array_foreach (q->states, i, v) {
        if (strcasecmp(json_string_value(v), state_of(doc)) == 0)
            return true;
    }
    return false;
}

static int
by_created_desc(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a;
    const json_t *y = *(json_t *const *)b;
    int c = strcmp(json_string_value(json_object_get(y, "createdAt")),
                   json_string_value(json_object_get(x, "createdAt")));
    return c ? c
             : strcmp(json_string_value(json_object_get(x, "id")),
                      json_string_value(json_object_get(y, "id")));
}

static json_t *
list_json(struct sbx_snaps *s, const struct list_q *q)
{
    pthread_mutex_lock(&s->mu);
    size_t n = json_object_size(s->items);
    size_t kept = 0;
    json_t **all = sbx_xcalloc(n + 1, sizeof(json_t *));
    const char *k;
    json_t *doc;
    json_object_foreach (s->items, k, doc) {
        if (list_keep(doc, q))
            all[kept++] = public_json(doc);
    }
    pthread_mutex_unlock(&s->mu);
    qsort(all, kept, sizeof(json_t *), by_created_desc);
    struct sbx_page pg;
    sbx_page_calc(kept, (size_t)q->page, (size_t)q->page_size, &pg);
    json_t *items = json_array();
    for (size_t i = 0; i < kept; i++) {
        if (i >= pg.start && i < pg.start + pg.count)
            (void)json_array_append(items, all[i]);
        json_decref(all[i]);
    }
    free(all);
    return json_pack("{s:o, s:{s:I, s:I, s:I, s:I, s:b}}", "items", items, "pagination", "page",
                     (json_int_t)q->page, "pageSize", (json_int_t)q->page_size, "totalItems",
                     (json_int_t)kept, "totalPages", (json_int_t)pg.total_pages, "hasNextPage",
                     pg.has_next);
}

static void
h_list(struct sbx_snaps *s, struct sbx_req *r, struct sbx_reply *out)
{
    struct list_q q = {.states = json_array(), .page = 1, .page_size = 20};
    sbx_req_query_each(r, "state", q_state, &q);
    sbx_req_query_each(r, "sandboxId", q_sandbox, &q);
    sbx_req_query_each(r, "name", q_name, &q);
    sbx_req_query_each(r, "page", q_page, &q);
    sbx_req_query_each(r, "pageSize", q_page_size, &q);
    if (q.bad) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "bad `%s` (page >= 1, 1 <= pageSize <= %d)", q.bad, PAGE_SIZE_MAX);
    } else {
        out->status = 200;
        out->body = list_json(s, &q);
    }
    json_decref(q.states);
    free((char *)q.sandbox);
    free((char *)q.name);
}

/* ---- one snapshot ---- */

/* A copy of the record, or an error reply. */
static json_t *
find_doc(struct sbx_snaps *s, struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = snapshot_id(r, out);
    if (!id)
        return NULL;
    pthread_mutex_lock(&s->mu);
    json_t *doc = json_deep_copy(json_object_get(s->items, id));
    pthread_mutex_unlock(&s->mu);
    if (!doc)
        sbx_reply_error(out, 404, "SNAPSHOT::NOT_FOUND", "snapshot `%s` not found", id);
    return doc;
}

static void
h_get(struct sbx_snaps *s, struct sbx_req *r, struct sbx_reply *out)
{
    json_t *doc = find_doc(s, r, out);
    if (!doc)
        return;
    out->status = 200;
    out->body = public_json(doc);
    json_decref(doc);
}

static void
h_delete(struct sbx_snaps *s, struct sbx_req *r, struct sbx_reply *out)
{
    const char *id = snapshot_id(r, out);
    if (!id)
        return;
    sbx_autoerror sbx_error *err = NULL;
    pthread_mutex_lock(&s->mu);
    json_t *doc = json_object_get(s->items, id);
    const char *state = doc ? state_of(doc) : "";
    if (!doc) {
        sbx_reply_error(out, 404, "SNAPSHOT::NOT_FOUND", "snapshot `%s` not found", id);
    } else if (strcmp(state, "Creating") == 0 || strcmp(state, "Deleting") == 0) {
        sbx_reply_error(out, 409, "SNAPSHOT::INVALID_STATE",
                        "snapshot `%s` is %s; delete it once it is Ready or Failed", id, state);
        doc = NULL;
    } else {
        set_status(doc, "Deleting", "snapshot_deleting", NULL);
        if (save(s, doc, &err) < 0) {
            sbx_reply_from(out, err, NULL);
            doc = NULL;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!doc)
        return;
    /* Deleting is durable first: a server killed here finishes the delete when it starts. */
    remove_image(s, id);
    pthread_mutex_lock(&s->mu);
    int rc = sbx_store_snapshot_delete(s->store, id, &err);
    if (rc == 0)
        (void)json_object_del(s->items, id);
    pthread_mutex_unlock(&s->mu);
    if (rc < 0)
        sbx_reply_from(out, err, NULL);
    else
        out->status = 204;
}

/* The snapshot's image as an archive (OCI layout + docker save in one tar): written to an
 * unlinked temp file first, so the reply has a length and a failure is an error reply. */
static void
h_export(struct sbx_snaps *s, struct sbx_req *r, struct sbx_reply *out)
{
    json_t *doc = find_doc(s, r, out);
    if (!doc)
        return;
    const char *id = json_string_value(json_object_get(doc, "id"));
    sbx_autoerror sbx_error *err = NULL;
    sbx_autofree char *image = NULL;
    if (sbx_snaps_image(s, id, &image, &err) < 0) {
        json_decref(doc);
        sbx_reply_from(out, err,
                       sbx_error_code(err) == SBX_ECONFLICT ? "SNAPSHOT::INVALID_STATE"
                                                            : "SNAPSHOT::NOT_FOUND");
        return;
    }
    json_decref(doc);
    int fd = open(s->tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    struct sbx_image_store *st = NULL;
    int rc = fd < 0 ? sbx_error_set(&err, SBX_EGENERIC, errno, "temp file in `%s`", s->tmp_dir)
                    : open_images(s, &st, &err);
    if (rc == 0)
        rc = sbx_image_export(st, image, fd, &err);
    sbx_image_store_close(st);
    if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0)
        rc = sbx_error_set(&err, SBX_EIO, errno, "rewind the archive");
    if (rc < 0) {
        if (fd >= 0)
            (void)close(fd);
        sbx_reply_from(out, err, NULL);
        return;
    }
    out->status = 200;
    out->file_fd = fd;
    out->file_type = "application/x-tar";
}

int
sbx_snaps_tmpfile(struct sbx_snaps *s)
{
    (void)sbx_mkdir_p(s->tmp_dir, 0700, NULL);
    return open(s->tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

/* The record of an imported archive: where it came from, from the image's labels. */
static json_t *
imported_record(struct sbx_image_store *st, const char *id, const char *image)
{
    json_t *labels = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_image_labels(st, image, &labels, &err) < 0)
        labels = json_object();
    const char *sandbox = json_string_value(json_object_get(labels, LABEL_SANDBOX));
    const char *name = json_string_value(json_object_get(labels, LABEL_NAME));
    json_t *doc = new_record(id, sandbox ? sandbox : "", name, "import");
    const char *from = json_string_value(json_object_get(labels, LABEL_ID));
    if (from)
        (void)json_object_set_new(doc, "_imported_from", json_string(from));
    set_status(doc, "Ready", "snapshot_imported", NULL);
    json_decref(labels);
    return doc;
}

/* An archive of an image (an export, `docker save`, an OCI layout) becomes a Ready snapshot:
 * any image can be a snapshot to create sandboxes from. */
static void
h_import(struct sbx_snaps *s, struct sbx_req *r, struct sbx_reply *out)
{
    if (r->upload_fd <= 0 || r->upload_len == 0) {
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "the body must be an image archive (sbx snapshot export, docker save)");
        return;
    }
    char id[SBX_UUID_LEN + 1];
    sbx_srv_uuid4(id);
    sbx_autofree char *image = image_name(id);
    sbx_autofree char *path = sbx_xasprintf("/proc/self/fd/%d", r->upload_fd);
    struct sbx_image_store *st = NULL;
    sbx_autoerror sbx_error *err = NULL;
    int rc = open_images(s, &st, &err);
    if (rc == 0)
        rc = sbx_image_import(st, path, image, NULL, &err);
    json_t *doc = rc == 0 ? imported_record(st, id, image) : NULL;
    sbx_image_store_close(st);
    if (rc < 0 && (sbx_error_code(err) == SBX_EIO || sbx_error_code(err) == SBX_EINVAL)) {
        /* the reason without the temp file's /proc path the importer was given */
        const char *why = strrchr(sbx_error_msg(err), '`');
        why = why && strstr(why, ": ") ? strstr(why, ": ") + 2 : sbx_error_msg(err);
        sbx_reply_error(out, 400, "SANDBOX::INVALID_PARAMETER",
                        "the body is not an image archive (sbx snapshot export, docker save, an "
                        "OCI layout): %s",
                        why);
        return;
    }
    if (rc < 0) {
        sbx_reply_from(out, err, NULL);
        return;
    }
    out->body = public_json(doc);
    pthread_mutex_lock(&s->mu);
    rc = save(s, doc, &err);
    if (rc == 0)
        (void)json_object_set(s->items, id, doc);
    pthread_mutex_unlock(&s->mu);
    json_decref(doc);
    if (rc < 0) {
        json_decref(out->body);
        out->body = NULL;
        remove_image(s, id);
        sbx_reply_from(out, err, NULL);
        return;
    }
    out->status = 201;
    out->location = sbx_xasprintf("/v1/snapshots/%s", id);
}

void
sbx_api_snapshots(struct sbx_req *r, struct sbx_reply *out)
{
    struct sbx_snaps *s = r->srv->snaps;
    enum sbx_route_id id = r->route.id;
    if (id == SBX_ROUTE_SNAPSHOT_CREATE)
        h_create(s, r, out);
    else if (id == SBX_ROUTE_SNAPSHOT_LIST)
        h_list(s, r, out);
    else if (id == SBX_ROUTE_SNAPSHOT_GET)
        h_get(s, r, out);
    else if (id == SBX_ROUTE_SNAPSHOT_DELETE)
        h_delete(s, r, out);
    else if (id == SBX_ROUTE_SNAPSHOT_EXPORT)
        h_export(s, r, out);
    else if (id == SBX_ROUTE_SNAPSHOT_IMPORT)
        h_import(s, r, out);
    else
        sbx_reply_error(out, 404, "GENERAL::NOT_FOUND", "no route for %s", r->method);
}
