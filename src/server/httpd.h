/*
 * httpd.h - the HTTP front of `sbx serve` (libmicrohttpd, thread per connection): request
 * context, replies, and the handler interface. The transport knows no handler by name: the
 * server (server.c) gives it one handler per route id (route.h), and the handlers (the API,
 * the router, the console...) call back into the transport only through this header.
 */
#ifndef SBX_SERVER_HTTPD_H
#define SBX_SERVER_HTTPD_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/buf.h"
#include "server/config.h"
#include "server/manager.h"
#include "server/route.h"

struct sbx_snaps;
struct sbx_http_handler;

struct sbx_srv {
    const struct sbx_server_config *cfg;
    struct sbx_mgr *mgr;
    struct sbx_registry *reg;
    struct sbx_srv_secrets *secrets;
    char api_key[129];
    struct MHD_Daemon *daemon;
    atomic_bool stopping;
    /* Upgraded (WebSocket) connections being spliced by the router; they must be closed
     * before MHD stops. */
    pthread_mutex_t splice_mu;
    pthread_cond_t splice_cv;
    struct sbx_upgraded *splices;
    size_t n_splices;
    struct sbx_connguard *guard; /* connguard.c: head deadlines */
    struct sbx_publisher *pub;   /* publish.c: sandbox ports on host ports */
    struct sbx_snaps *snaps;     /* snapshot.c */
    /* What answers each route id (server.c fills it before sbx_http_start; never NULL). */
    const struct sbx_http_handler *handlers[SBX_ROUTE__COUNT];
};

struct sbx_proxy;

/* An upgraded connection (the router's splice, the desktop's WebSocket bridge): linked in
 * srv->splices while its thread runs, so that a stopping server shuts it down and waits. */
struct sbx_upgraded {
    struct sbx_upgraded *next;
    int up;     /* the sandbox side */
    int client; /* MHD's socket */
};
void sbx_upgraded_link(struct sbx_srv *srv, struct sbx_upgraded *u);
/* Unlinked before its fds are closed, so a shutdown never hits a reused fd. */
void sbx_upgraded_unlink(struct sbx_srv *srv, struct sbx_upgraded *u);
/* Its thread is about to end: a stopping server stops waiting for it. */
void sbx_upgraded_done(struct sbx_srv *srv);

struct sbx_req {
    struct sbx_srv *srv;
    struct MHD_Connection *conn;
    const char *method;
    const char *path; /* raw (not percent-decoded), without the query */
    char *raw_uri;    /* the request target as sent, with the query */
    bool started;     /* the first access-handler call happened */
    char rid[129];
    struct sbx_route_match route;
    struct sbx_buf body;
    bool too_big;
    bool done;      /* a response was queued */
    bool sensitive; /* the body holds a secret: wiped when the request ends */
    bool close;     /* answer with Connection: close (the rest of the stream is not trusted) */
    struct sbx_proxy *proxy;
    int upload_fd;       /* snapshot import: the body in a temp file (> 0 when open) */
    uint64_t upload_len; /* bytes of it */
    int upload_errno;    /* why storing it failed (0: it did not, or it was too large) */
};

/* What an API handler produces: status + JSON body, or an error envelope. */
struct sbx_reply {
    int status;
    json_t *body;     /* owned; NULL = empty body */
    const char *code; /* error code when status >= 400 */
    char *message;    /* owned */
    char *location;   /* owned: a Location header */
    /* A file body instead of JSON (status < 400): file_fd (owned, sent from offset 0 to its
     * end, closed by the server) with this Content-Type; file_fd is -1 or 0 when unused. */
    int file_fd;
    const char *file_type;
};

void sbx_reply_error(struct sbx_reply *out, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An error reply from an sbx_error (status/code from the error table unless code given). */
void sbx_reply_from(struct sbx_reply *out, const sbx_error *err, const char *code);

/* A request header (NULL when absent). */
const char *sbx_req_header(struct sbx_req *r, const char *name);
/* Call fn for every query argument called name, value decoded once ("" for a bare name). */
void sbx_req_query_each(struct sbx_req *r, const char *name,
                        void (*fn)(const char *value, void *ud), void *ud);

/*
 * What answers a route. The transport calls, in order: reroute (right after the match; it
 * may make the request a CORS preflight, which the transport answers), the authentication (the API
 * key unless the route is public, or alt_auth / own_auth below), then begin (head accepted), data
 * (each body chunk), end (the body is complete), and done when the request is over, whatever
 * happened. Each step returns MHD_YES/MHD_NO like an access handler.
 */
struct sbx_http_handler {
    /* Optional: turn the matched route into another one (which then picks the handler). */
    void (*reroute)(struct sbx_req *r);
    /* Optional: a credential other than the API key that opens this route (true: let in). */
    bool (*alt_auth)(struct sbx_req *r);
    /* alt_auth is the only credential: the API key does not open the route; a request
     * without it gets 401 with this code and message. */
    const char *own_auth_code;
    const char *own_auth_message;
    /* Optional: the head is accepted. Default: a Content-Length above the limit gets 413. */
    enum MHD_Result (*begin)(struct sbx_req *r);
    /* Optional: a chunk of the body. Default: appended to r->body up to the limit (r->too_big
     * beyond it, answered 413 before end is called). */
    enum MHD_Result (*data)(struct sbx_req *r, const char *data, size_t n);
    /* The whole request is in: queue the answer. */
    enum MHD_Result (*end)(struct sbx_req *r);
    /* Optional: the request is over (answered, failed or cut off): free what begin made. */
    void (*done)(struct sbx_req *r);
    /* The largest body; 0: the server's max_body_bytes. */
    uint64_t body_limit;
};

/* Queue an API reply (JSON, a file or the error envelope) and release what it holds. */
enum MHD_Result sbx_http_send_reply(struct sbx_req *r, struct sbx_reply *rep);

/* Queue a JSON error on the connection (adds X-Request-ID, CORS). */
enum MHD_Result sbx_http_send_error(struct sbx_req *r, int status, const char *code,
                                    const char *message);
/* Add the headers every response carries. */
void sbx_http_common_headers(struct sbx_req *r, struct MHD_Response *resp);

/* The host[:port] clients reach this server at: config (public_addr), else the request's Host
 * (when it is a plain host name or address), else the listen address. */
const char *sbx_http_public_addr(struct sbx_req *r);
/* Whether the request carries the API key (header or bearer token). */
bool sbx_http_key_ok(struct sbx_req *r);

/* Check a listen address ("HOST:PORT", "[V6]:PORT") without opening anything. */
int sbx_http_check_listen(const char *listen, sbx_error **err);
/* Start listening on cfg->listen (srv->handlers filled). */
int sbx_http_start(struct sbx_srv *srv, sbx_error **err);
void sbx_http_stop(struct sbx_srv *srv);

#endif
