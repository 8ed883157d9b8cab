/*
 * gosig.h - signal names as Go's syscall.Signal.String() spells them ("killed",
 * "terminated"...): execd reports a signalled command as `signal: NAME` (COMPAT 2.3, the
 * reference's ExitError text), and libsbx reads the signal back from that text.
 */
#ifndef SBX_COMMON_GOSIG_H
#define SBX_COMMON_GOSIG_H

/* Go's name of signal `sig` (1..31), or NULL (Go then writes "signal N"). */
const char *sbx_go_signal_name(int sig);
/* The signal of an ExitError text "signal: NAME" (or "signal: signal N"); 0 when it is not
 * one. */
int sbx_go_signal_parse(const char *text);

#endif
