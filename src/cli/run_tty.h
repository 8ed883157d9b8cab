/*
 * run_tty.h - `sbx run -t`: a pseudo-terminal for the command (see run_tty.c).
 */
#ifndef SBX_CLI_RUN_TTY_H
#define SBX_CLI_RUN_TTY_H

#include <pthread.h>
#include <stdbool.h>
#include <termios.h>

struct sbx_run_tty {
    int master, slave;
    bool input; /* -i: the caller's stdin is copied to the terminal */
    bool raw;   /* the caller's terminal was put in raw mode (restored at finish) */
    struct termios saved;
    int stop[2]; /* a pipe that ends the copy thread */
    int winch;   /* signalfd of SIGWINCH */
    pthread_t tid;
    bool running;
};

/* A pty pair sized as the caller's terminal (80x24 without one); with input and a terminal on
 * stdin, that terminal goes raw (keys, Ctrl-C included, reach the command's terminal as
 * bytes). Returns 0 or -errno. */
int sbx_run_tty_open(struct sbx_run_tty *t, bool input);
/* The sandbox holds the slave now: drop ours and start copying. Returns 0 or -errno. */
int sbx_run_tty_start(struct sbx_run_tty *t);
/* The command is done: copy what it wrote last, stop, restore the caller's terminal. */
void sbx_run_tty_finish(struct sbx_run_tty *t);

#endif
