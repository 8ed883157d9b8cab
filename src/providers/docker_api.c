/*
 * docker_api.c - Docker Engine API over a unix socket with libcurl: requests, image pulls with
 * progress in the server log, log tails; and the docker provider's pure helpers.
 *
 * One easy handle per request: calls come from many threads (create workers, the router, the
 * reaper) and a unix-socket connect costs microseconds, so there is no handle pool to lock.
 */
#include "providers/docker_api.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "common/xalloc.h"

#define DEFAULT_TIMEOUT_S 60
#define MAX_RESPONSE      (8u << 20) /* an inspect is ~10 KB; a container list of 1000 ~3 MB */
#define MAX_PULL_LINE     (64u << 10)
#define MAX_LAYERS        64

struct sbx_docker {
    char *socket;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        sbx_warn("curl_global_init failed");
}

struct sbx_docker *
sbx_docker_new(const char *socket_path)
{
    (void)pthread_once(&curl_once, curl_init_once);
    struct sbx_docker *d = sbx_xcalloc(1, sizeof *d);
    d->socket = sbx_xstrdup(socket_path);
    return d;
}

void
sbx_docker_free(struct sbx_docker *d)
{
    if (!d)
        return;
    free(d->socket);
    free(d);
}

const char *
sbx_docker_socket(const struct sbx_docker *d)
{
    return d->socket;
}

/* ---- one request ---- */

struct sink {
    struct sbx_buf buf;
    CURL *curl;   /* to read the status in the write callback */
    int out_fd;   /* > 0: a 2xx answer's body goes here (an error's stays in buf) */
    int io_errno; /* a failed write to out_fd (EFBIG: more than out_max) */
    size_t out_max, out_n;
    size_t (*line_fn)(struct sink *s, const char *line, size_t n); /* streaming mode */
    void *ud;
    bool overflow;
};

static void
sink_lines(struct sink *s)
{
    char *start = s->buf.data;
    char *nl = NULL;
    size_t left = s->buf.len;
    while (left && (nl = memchr(start, '\n', left))) {
        s->line_fn(s, start, (size_t)(nl - start));
        left -= (size_t)(nl - start) + 1;
        start = nl + 1;
    }
    memmove(s->buf.data, start, left);
    s->buf.len = left;
}

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct sink *s = ud;
    size_t n = size * nmemb;
    long st = 0;
    if (s->out_fd > 0 && curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &st) == CURLE_OK &&
        st >= 200 && st < 300) {
        s->out_n += n;
        if (s->out_max && s->out_n > s->out_max) {
            s->io_errno = EFBIG; /* an untrusted size (an image's file): never unbounded */
            return 0;
        }
        if (sbx_write_all(s->out_fd, ptr, n) < 0) {
            s->io_errno = errno;
            return 0;
        }
        return n;
    }
    if (sbx_buf_append(&s->buf, ptr, n, NULL) < 0) {
        s->overflow = true;
        return 0; /* abort: the answer is bigger than any answer we expect */
    }
    if (s->line_fn)
        sink_lines(s);
    return n;
}

static int
transport_error(struct sbx_docker *d, const struct sbx_docker_req *req, CURL *c, CURLcode rc,
                sbx_error **err)
{
    long os_errno = 0;
    (void)curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return sbx_error_set(err, SBX_ETIMEDOUT, 0, "docker: %s: no answer from %s within %ld s",
                             req->what, d->socket,
                             req->timeout_s ? req->timeout_s : DEFAULT_TIMEOUT_S);
    if (rc == CURLE_COULDNT_CONNECT || (rc == CURLE_GOT_NOTHING && os_errno))
        return sbx_error_set(err, SBX_EUNAVAIL, (int)os_errno, "docker: cannot reach %s%s",
                             d->socket, os_errno ? "" : ": connection failed");
    return sbx_error_set(err, SBX_EUNAVAIL, 0, "docker: %s: talking to %s: %s", req->what,
                         d->socket, curl_easy_strerror(rc));
}

static bool
status_ok(long status, const int *ok)
{
    if (status >= 200 && status < 300)
        return true;
    for (; ok && *ok; ok++) {
        if (*ok == status)
            return true;
    }
    return false;
}

/* The daemon's error message: docker says {"message"}, podman {"cause","message","response"}. */
static int
http_error(const struct sbx_docker_req *req, long status, const char *body, sbx_error **err)
{
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    const char *msg = json_string_value(json_object_get(j, "message"));
    int code = status == 400   ? SBX_EINVAL
               : status == 404 ? SBX_ENOTFOUND
               : status == 409 ? SBX_ECONFLICT
                               : SBX_EIO;
    int r = sbx_error_set(err, code, 0, "docker: %s: %s (HTTP %ld)", req->what,
                          msg ? msg : "no message", status);
    json_decref(j);
    return r;
}

static struct curl_slist *
headers_for(const struct sbx_docker_req *req)
{
    struct curl_slist *h = NULL;
    if (req->body)
        h = curl_slist_append(h, "Content-Type: application/json");
    if (req->in_fd > 0)
        h = curl_slist_append(h, "Content-Type: application/x-tar");
    if (req->auth) {
        sbx_autofree char *line = sbx_xasprintf("X-Registry-Auth: %s", req->auth);
        h = curl_slist_append(h, line);
    }
    return h;
}

static size_t
on_upload(char *buf, size_t size, size_t nmemb, void *ud)
{
    int fd = *(int *)ud;
    for (;;) {
        ssize_t n = read(fd, buf, size * nmemb);
        if (n >= 0)
            return (size_t)n;
        if (errno != EINTR)
            return CURL_READFUNC_ABORT;
    }
}

/* POST the file at fd (from its current offset to its end) as the body. */
static void
set_upload(CURL *c, const int *fd)
{
    struct stat st;
    off_t at = lseek(*fd, 0, SEEK_CUR);
    curl_off_t size = fstat(*fd, &st) == 0 && at >= 0 ? (curl_off_t)(st.st_size - at) : -1;
    (void)curl_easy_setopt(c, CURLOPT_POST, 1L);
    (void)curl_easy_setopt(c, CURLOPT_READFUNCTION, on_upload);
    (void)curl_easy_setopt(c, CURLOPT_READDATA, (void *)fd);
    (void)curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, size);
}

static int
perform(struct sbx_docker *d, const struct sbx_docker_req *req, struct sink *s, long *status,
        sbx_error **err)
{
    CURL *c = curl_easy_init();
    if (!c)
        return sbx_error_set(err, SBX_ENOMEM, 0, "curl_easy_init failed");
    sbx_autofree char *url =
        sbx_xasprintf("http://docker/v" SBX_DOCKER_API_VERSION "%s", req->path);
    sbx_autofree char *body = req->body ? json_dumps(req->body, JSON_COMPACT) : NULL;
    struct curl_slist *h = headers_for(req);
    (void)curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->socket);
    (void)curl_easy_setopt(c, CURLOPT_URL, url);
    (void)curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    (void)curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    (void)curl_easy_setopt(c, CURLOPT_TIMEOUT, req->timeout_s ? req->timeout_s : DEFAULT_TIMEOUT_S);
    (void)curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    (void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    (void)curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    s->curl = c;
    s->out_fd = req->out_fd;
    s->out_max = req->out_max;
    if (req->in_fd > 0) {
        set_upload(c, &req->in_fd);
    } else if (strcmp(req->method, "POST") == 0) {
        (void)curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
    } else if (strcmp(req->method, "GET") != 0) {
        (void)curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
    }
    CURLcode rc = curl_easy_perform(c);
    int r = 0;
    if (s->io_errno)
        r = sbx_error_set(err, SBX_EIO, s->io_errno, "docker: %s: write the answer", req->what);
    else if (s->overflow)
        r = sbx_error_set(err, SBX_EIO, 0, "docker: %s: the answer is larger than %u bytes",
                          req->what, MAX_RESPONSE);
    else if (rc != CURLE_OK)
        r = transport_error(d, req, c, rc, err);
    else
        (void)curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}

int
sbx_docker_call(struct sbx_docker *d, const struct sbx_docker_req *req, long *status, json_t **resp,
                sbx_error **err)
{
    struct sink s = {0};
    sbx_buf_init(&s.buf, MAX_RESPONSE);
    long st = 0;
    int r = perform(d, req, &s, &st, err);
    const char *text = sbx_buf_str(&s.buf);
    if (r >= 0 && !status_ok(st, req->ok))
        r = http_error(req, st, text, err);
    if (status)
        *status = st;
    if (resp)
        *resp = r >= 0 && s.buf.len ? json_loads(text, 0, NULL) : NULL;
    sbx_buf_dispose(&s.buf);
    return r;
}

/* ---- pull with progress ---- */

struct pull {
    const char *ref;
    char ids[MAX_LAYERS][80];
    char states[MAX_LAYERS][40];
    size_t n;
    uint64_t last_progress_ms;
    char *error;
};

/* Index of layer id (added when new), or -1 when the table is full. */
static int
layer_slot(struct pull *p, const char *id)
{
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->ids[i], id) == 0)
            return (int)i;
    }
    if (p->n == MAX_LAYERS)
        return -1;
    (void)snprintf(p->ids[p->n], sizeof p->ids[0], "%s", id);
    p->states[p->n][0] = '\0';
    return (int)p->n++;
}

static void
pull_event(struct pull *p, const json_t *ev)
{
    const char *error = json_string_value(json_object_get(ev, "error"));
    if (!error) /* a non-2xx answer: {"message"} */
        error = json_string_value(json_object_get(ev, "message"));
    const char *status = json_string_value(json_object_get(ev, "status"));
    const char *id = json_string_value(json_object_get(ev, "id"));
    const char *progress = json_string_value(json_object_get(ev, "progress"));
    if (error) {
        if (!p->error)
            p->error = sbx_xstrdup(error);
        return;
    }
    if (!status)
        return;
    int slot = id ? layer_slot(p, id) : -1;
    bool changed = slot < 0 || strncmp(p->states[slot], status, sizeof p->states[0] - 1) != 0;
    if (slot >= 0)
        (void)snprintf(p->states[slot], sizeof p->states[0], "%s", status);
    uint64_t now = sbx_now_ms();
    if (changed) {
        sbx_info("docker pull %s: %s%s%s", p->ref, id ? id : "", id ? ": " : "", status);
    } else if (progress && now - p->last_progress_ms >= 1000) {
        sbx_info("docker pull %s: %s: %s %s", p->ref, id ? id : "", status, progress);
        p->last_progress_ms = now;
    }
}

static size_t
pull_line(struct sink *s, const char *line, size_t n)
{
    json_t *ev = json_loadb(line, n, 0, NULL);
    if (ev)
        pull_event(s->ud, ev);
    json_decref(ev);
    return n;
}

/* A missing image is the caller's mistake (400 at the API), anything else the daemon's. */
static int
pull_errc(long status, const char *msg)
{
    static const char *const missing[] = {"not found", "manifest unknown", "name unknown",
                                          "does not exist"};
    if (status == 404)
        return SBX_ENOTFOUND;
    for (size_t i = 0; msg && i < SBX_ARRAY_SIZE(missing); i++) {
        if (strstr(msg, missing[i]))
            return SBX_ENOTFOUND;
    }
    return SBX_EIO;
}

int
sbx_docker_pull(struct sbx_docker *d, const char *ref, const char *auth, long timeout_s,
                sbx_error **err)
{
    sbx_autofree char *path = sbx_xasprintf("/images/create?fromImage=%s", ref);
    sbx_autofree char *what = sbx_xasprintf("pull `%s`", ref);
    struct sbx_docker_req req = {
        .method = "POST", .path = path, .auth = auth, .timeout_s = timeout_s, .what = what};
    struct pull p = {.ref = ref};
    struct sink s = {.line_fn = pull_line, .ud = &p};
    sbx_buf_init(&s.buf, MAX_PULL_LINE);
    long st = 0;
    sbx_info("docker: pulling %s", ref);
    int r = perform(d, &req, &s, &st, err);
    if (r >= 0 && s.buf.len)
        (void)pull_line(&s, s.buf.data, s.buf.len); /* a last line without a newline */
    if (r >= 0 && (p.error || !status_ok(st, NULL)))
        r = sbx_error_set(err, pull_errc(st, p.error), 0, "docker: pull `%s`: %s (HTTP %ld)", ref,
                          p.error ? p.error : "no message", st);
    if (r >= 0)
        sbx_info("docker: pulled %s", ref);
    free(p.error);
    sbx_buf_dispose(&s.buf);
    return r;
}

/* ---- logs ---- */

/* Non-TTY logs are frames: [stream, 0, 0, 0, size (4 bytes, big endian)] then size bytes. */
static void
demux(const unsigned char *in, size_t n, struct sbx_buf *out)
{
    size_t i = 0;
    while (i + 8 <= n) {
        size_t len = (size_t)in[i + 4] << 24 | (size_t)in[i + 5] << 16 | (size_t)in[i + 6] << 8 |
                     (size_t)in[i + 7];
        i += 8;
        if (len > n - i)
            len = n - i;
        (void)sbx_buf_append(out, in + i, len, NULL);
        i += len;
    }
}

void
sbx_docker_logs_tail(struct sbx_docker *d, const char *name, char *out, size_t n)
{
    sbx_autofree char *path = sbx_xasprintf("/containers/%s/logs?stdout=1&stderr=1&tail=10", name);
    struct sbx_docker_req req = {.method = "GET", .path = path, .what = "logs", .timeout_s = 10};
    struct sink s = {0};
    sbx_buf_init(&s.buf, 1 << 16);
    long st = 0;
    out[0] = '\0';
    if (perform(d, &req, &s, &st, NULL) == 0 && st == 200) {
        struct sbx_buf text;
        sbx_buf_init(&text, 1 << 16);
        demux((const unsigned char *)s.buf.data, s.buf.len, &text);
        (void)snprintf(out, n, "%s", sbx_buf_str(&text));
        sbx_buf_dispose(&text);
    }
    sbx_buf_dispose(&s.buf);
    size_t len = strlen(out);
    while (len && (out[len - 1] == '\n' || out[len - 1] == '\r'))
        out[--len] = '\0';
    for (char *c = out; *c; c++) {
        if (*c == '\n' || *c == '\r')
            *c = '|';
    }
}

/* ---- pure helpers ---- */

bool
sbx_docker_ref_ok(const char *ref)
{
    static const char allowed[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789._:/@-";
    size_t n = strlen(ref);
    return n > 0 && n <= 512 && strspn(ref, allowed) == n && ref[0] != '/' && ref[0] != '-';
}

char *
sbx_docker_pull_ref(const char *ref)
{
    const char *slash = strrchr(ref, '/');
    const char *last = slash ? slash + 1 : ref;
    if (strchr(ref, '@') || strchr(last, ':'))
        return sbx_xstrdup(ref);
    return sbx_xasprintf("%s:latest", ref);
}

char *
sbx_docker_ref_registry(const char *ref)
{
    const char *slash = strchr(ref, '/');
    if (!slash)
        return sbx_xstrdup("docker.io");
    size_t n = (size_t)(slash - ref);
    /* Docker's rule: the first component is a host when it has a dot or a port, or is
     * "localhost". */
    bool host =
        memchr(ref, '.', n) || memchr(ref, ':', n) || (n == 9 && strncmp(ref, "localhost", 9) == 0);
    return host ? sbx_xstrndup(ref, n) : sbx_xstrdup("docker.io");
}

char *
sbx_docker_auth_header(const json_t *auth, const char *serveraddress)
{
    const char *user = json_string_value(json_object_get(auth, "username"));
    const char *pass = json_string_value(json_object_get(auth, "password"));
    if (!user && !pass)
        return NULL;
    json_t *j = json_pack("{s:s, s:s, s:s}", "username", user ? user : "", "password",
                          pass ? pass : "", "serveraddress", serveraddress);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    size_t len = strlen(text);
    size_t cap = sodium_base64_encoded_len(len, sodium_base64_VARIANT_URLSAFE);
    char *out = sbx_xmalloc(cap);
    (void)sodium_bin2base64(out, cap, (const unsigned char *)text, len,
                            sodium_base64_VARIANT_URLSAFE);
    sodium_memzero(text, len); /* it holds the password */
    free(text);
    return out;
}

static void
exited(const json_t *state, bool stopped_by_us, struct sbx_provider_status *out)
{
    json_int_t code = json_integer_value(json_object_get(state, "ExitCode"));
    if (stopped_by_us)
        sbx_provider_status_set(out, "exited", SBX_CLASS_STARTABLE, "CONTAINER_STOPPED");
    else if (json_is_true(json_object_get(state, "OOMKilled")))
        sbx_provider_status_set(out, "exited", SBX_CLASS_TERMINAL, "CONTAINER_OOM_KILLED");
    else
        sbx_provider_status_set(out, "exited", SBX_CLASS_TERMINAL,
                                code == 0 ? "CONTAINER_EXITED" : "CONTAINER_EXITED_ERROR");
}

void
sbx_docker_state_map(const json_t *state, bool stopped_by_us, struct sbx_provider_status *out)
{
    const char *s = json_string_value(json_object_get(state, "Status"));
    if (!s)
        s = "unknown";
    if (strcmp(s, "running") == 0)
        sbx_provider_status_set(out, s, SBX_CLASS_USABLE, "CONTAINER_RUNNING");
    else if (strcmp(s, "paused") == 0)
        sbx_provider_status_set(out, s, SBX_CLASS_STARTABLE, "CONTAINER_PAUSED");
    else if (strcmp(s, "restarting") == 0)
        sbx_provider_status_set(out, s, SBX_CLASS_TRANSIENT, "CONTAINER_RESTARTING");
    else if (strcmp(s, "created") == 0 || strcmp(s, "configured") == 0)
        sbx_provider_status_set(out, s, SBX_CLASS_TRANSIENT, "CONTAINER_STARTING");
    else if (strcmp(s, "stopping") == 0) /* podman, on its way to exited */
        sbx_provider_status_set(out, s, SBX_CLASS_TRANSIENT, "CONTAINER_STOPPING");
    else if (strcmp(s, "exited") == 0 || strcmp(s, "stopped") == 0) /* podman: cleanup pending */
        exited(state, stopped_by_us, out);
    else if (strcmp(s, "dead") == 0 || strcmp(s, "removing") == 0)
        sbx_provider_status_set(out, s, SBX_CLASS_TERMINAL, "CONTAINER_DEAD");
    else
        sbx_provider_status_set(out, s, SBX_CLASS_TERMINAL, "CONTAINER_STATE_UNKNOWN");
}

int
sbx_docker_parse_cpu(const char *s, uint64_t *millis)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || !(v > 0) || v > 1e6)
        return -1;
    if (strcmp(end, "m") == 0)
        *millis = (uint64_t)v;
    else if (*end == '\0')
        *millis = (uint64_t)(v * 1000.0);
    else
        return -1;
    return *millis > 0 ? 0 : -1;
}
