/*
 * fastpath.h - POST /command without a shell when bash would only exec one program.
 *
 * `bash -c 'prog arg'` parses the string, finds prog on PATH and execs it in place (its
 * one-shot optimisation): the program runs as the spawned process with bash's exported
 * environment. For a string of plain words that is all bash does, so execd can exec the
 * program itself and skip bash's ~0.5 ms start. The rule (docs/execd.md) is deliberately
 * narrow; anything it does not cover runs through bash as before.
 */
#ifndef SBX_EXECD_FASTPATH_H
#define SBX_EXECD_FASTPATH_H

#include <stdbool.h>

/* True when the file at shell_path is a bash whose exec behaviour is emulated here (5.2 or
 * a later 5.x: read from its "@(#)Bash version" string, no process started). */
bool execd_fast_shell_ok(const char *shell_path);

/* The words of cmd when it is nothing but plain words (conservative charset, no shell
 * syntax) and its first word is no keyword, builtin or assignment (`true`/`false` without
 * arguments excepted: identical to their programs). NULL-ended, caller frees with
 * execd_strv_free; NULL when bash must run it. */
char **execd_fast_words(const char *cmd);

/* word resolved the way bash resolves a command name: an absolute path as is, otherwise the
 * first regular executable file in PATH (env's). NULL when bash must decide (not found,
 * PATH unset or holding a relative element, a relative path with a slash). Caller frees. */
char *execd_fast_resolve(const char *word, char *const *env);

/* Turn env (NULL-ended, malloc'ed "K=V" strings) into the environment bash 5.2 hands the
 * program it execs for `bash -c` started in directory cwd: PWD kept when it names cwd else
 * set to its physical path, OLDPWD dropped unless a directory, SHLVL normalised, `_` = prog.
 * False (env untouched) when env holds a variable bash treats specially (BASH*, SHELLOPTS,
 * IFS, LC_ALL other than C/POSIX, ...): then bash must run the command. */
bool execd_fast_env(char ***env, const char *cwd, const char *prog);

#endif
