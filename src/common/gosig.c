/*
 * gosig.c - Go's signal names (runtime/sigtab_linux_generic.go's syscall table for Linux).
 */
#include <stdlib.h>
#include <string.h>

#include "common/gosig.h"

static const char *const names[] = {
    [1] = "hangup",
    [2] = "interrupt",
    [3] = "quit",
    [4] = "illegal instruction",
    [5] = "trace/breakpoint trap",
    [6] = "aborted",
    [7] = "bus error",
    [8] = "floating point exception",
    [9] = "killed",
    [10] = "user defined signal 1",
    [11] = "segmentation fault",
    [12] = "user defined signal 2",
    [13] = "broken pipe",
    [14] = "alarm clock",
    [15] = "terminated",
    [16] = "stack fault",
    [17] = "child exited",
    [18] = "continued",
    [19] = "stopped (signal)",
    [20] = "stopped",
    [21] = "stopped (tty input)",
    [22] = "stopped (tty output)",
    [23] = "urgent I/O condition",
    [24] = "CPU time limit exceeded",
    [25] = "file size limit exceeded",
    [26] = "virtual timer expired",
    [27] = "profiling timer expired",
    [28] = "window changed",
    [29] = "I/O possible",
    [30] = "power failure",
    [31] = "bad system call",
};

#define N_NAMES ((int)(sizeof(names) / sizeof(names[0])))

const char *
sbx_go_signal_name(int sig)
{
    return sig > 0 && sig < N_NAMES ? names[sig] : NULL;
}

int
sbx_go_signal_parse(const char *text)
{
    if (!text || strncmp(text, "signal: ", 8) != 0)
        return 0;
    const char *name = text + 8;
    for (int i = 1; i < N_NAMES; i++) {
        if (strcmp(name, names[i]) == 0)
            return i;
    }
    if (strncmp(name, "signal ", 7) == 0)
        name += 7; /* Go's spelling of a signal it has no name for */
    char *end = NULL;
    long v = strtol(name, &end, 10);
    return end != name && *end == '\0' && v > 0 && v < 128 ? (int)v : 0;
}
