/*
 * publish.h - sandbox ports published on host ports (extensions["sbx.publish"]), for clients
 * that take an address and a port rather than a URL (OSWorld's PythonController: IP + 5000).
 * See publish.c and docs/server.md "Published ports".
 */
#ifndef SBX_SERVER_PUBLISH_H
#define SBX_SERVER_PUBLISH_H

#include <stdbool.h>

#include "common/error.h"
#include "server/sandbox.h"

#define SBX_PUBLISH_EXT "sbx.publish"
#define SBX_PUBLISH_MAX 8

struct sbx_srv;
struct sbx_publisher;

struct sbx_publish_spec {
    int n;
    int port[SBX_PUBLISH_MAX];      /* in the sandbox */
    int host_port[SBX_PUBLISH_MAX]; /* 0: any free one */
};

/* "PORT[:HOSTPORT][,...]": up to SBX_PUBLISH_MAX distinct sandbox ports, 1-65535 each. */
int sbx_publish_parse(const char *spec, struct sbx_publish_spec *out, sbx_error **err);

/* Start the publisher of srv (bind address: srv->cfg->publish_addr) and re-open the published
 * ports of every sandbox the manager has (after a restart: the host ports they had). */
int sbx_publish_start(struct sbx_srv *srv, sbx_error **err);
/* Stop accepting and close every listener (open connections end with the server's upgraded
 * connections). */
void sbx_publish_stop(struct sbx_srv *srv);

/* Listeners bound for a sandbox being created, not yet serving. */
struct sbx_publish_bound {
    struct sbx_publish_spec spec; /* host ports resolved */
    int fd[SBX_PUBLISH_MAX];
};

/* Bind sb's published ports (extensions["sbx.publish"]; nothing when absent) and write the host
 * ports into that extension ("5000:40123,..."), so the record keeps them. SBX_ECONFLICT when a
 * host port is taken. */
int sbx_publish_bind(struct sbx_srv *srv, struct sbx_record *sb, struct sbx_publish_bound *out,
                     sbx_error **err);
/* Serve them for sandbox id (the publisher owns the fds from here). */
void sbx_publish_commit(struct sbx_srv *srv, const char *id, struct sbx_publish_bound *b);
/* Close them (the create failed, or found an existing sandbox). */
void sbx_publish_abort(struct sbx_publish_bound *b);

/* The host port sandbox port `port` of sb is published on, or 0. */
int sbx_publish_host_port(const struct sbx_record *sb, int port);

#endif
