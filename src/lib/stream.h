/*
 * stream.h - the execd event stream (COMPAT 2.3) shared by sbx_exec, background commands,
 * session runs (exec.c) and code runs (execd_api.c).
 */
#ifndef SBX_LIB_STREAM_H
#define SBX_LIB_STREAM_H

#include "lib/client_internal.h"

struct exec_stream {
    sbx_client *c;
    const char *path; /* "/command", "/session/ID/run", "/code" */
    sbx_output_cb on_stdout;
    sbx_output_cb on_stderr;
    void *payload;
    int raw; /* code runs: output text as it is (not one line per event) */
    struct client_buf line;
    char *command_id; /* the init event's text */
    json_t *result;   /* the last `result` event's results (code) */
    json_t *error;    /* the `error` event's error object */
    int execution_count;
    int terminal;  /* a terminal event was seen */
    int exit_code; /* from the terminal event */
    int stopped;   /* a callback asked to stop */
    int bad;       /* protocol error (message in the handle) */
};

/* POST body to s->path of sandbox id's execd and follow the stream to its terminal event. */
int client_stream_run(struct exec_stream *s, const char *id, json_t *body);
void client_stream_dispose(struct exec_stream *s);

#endif
