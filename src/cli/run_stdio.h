/*
 * run_stdio.h - `sbx run`'s stdio when the caller's is a host file (see run_stdio.c).
 */
#ifndef SBX_CLI_RUN_STDIO_H
#define SBX_CLI_RUN_STDIO_H

#include <pthread.h>
#include <stdbool.h>

struct sbx_run_relay {
    int from, to;
    bool input; /* the caller's stdin into the sandbox */
    pthread_t tid;
    bool running;
};

struct sbx_run_stdio {
    int child_end[3]; /* the pipe ends the sandbox gets, -1 when the caller's fd is passed */
    struct sbx_run_relay relays[3];
};

/* Replace each io[i] that the runtime would refuse (a file open for writing) by a pipe with a
 * copying thread. Returns 0 or -errno. */
int sbx_run_stdio_setup(struct sbx_run_stdio *s, int io[3]);
/* The sandbox exists: drop our copies of its pipe ends. */
void sbx_run_stdio_started(struct sbx_run_stdio *s);
/* The command is done: wait until everything it wrote is copied. */
void sbx_run_stdio_finish(struct sbx_run_stdio *s);

#endif
