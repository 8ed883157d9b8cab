/*
 * term_conn.h - the byte stream under the CLI's WebSocket client (term.c): a TCP connection
 * for ws://, TLS through libcurl's connect-only mode for wss://. Both are non-blocking; the
 * blocking helpers wait with poll(2) on the socket.
 */
#ifndef SBX_CLI_TERM_CONN_H
#define SBX_CLI_TERM_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct term_conn {
    int fd;     /* the socket to poll; -1 when closed */
    void *tls;  /* libcurl's easy handle (CURL *) for wss://, NULL for ws:// */
    char *host; /* for the Host header */
    char *port;
    const char *path; /* into the URL given to term_conn_open */
};

/* Connect to a "ws://host[:port]/path" or "wss://host[:port]/path" URL. wss:// verifies the
 * server's certificate and name as every other request of the CLI does (the system's CAs, or
 * the PEM file in $SBX_CA_CERT). On failure returns -1 with a message in err. */
int term_conn_open(struct term_conn *c, const char *url, char *err, size_t errlen);
/* Non-blocking: bytes sent; -1 with errno EAGAIN when the socket is full, another errno on
 * failure. */
ssize_t term_conn_send(struct term_conn *c, const void *p, size_t n);
/* Non-blocking: bytes read, 0 at the end of the stream, -1 with errno EAGAIN when nothing is
 * there (for TLS: read until EAGAIN before polling again, since libcurl may hold decrypted
 * bytes the socket no longer shows). */
ssize_t term_conn_recv(struct term_conn *c, void *p, size_t n);
/* Blocking forms, for the handshake. */
int term_conn_send_all(struct term_conn *c, const void *p, size_t n);
ssize_t term_conn_recv_wait(struct term_conn *c, void *p, size_t n);
void term_conn_close(struct term_conn *c);

#endif
