/*
 * fastpath.c - which commands execd may exec directly instead of `bash -c`, and the
 * environment bash would have given them. Pure functions apart from stat/eaccess/realpath
 * (tests/unit/execd/test_fastpath.c, and tests/integration/execd/test_commands.py compares
 * both paths' output).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "execd/execd.h"
#include "execd/fastpath.h"

#define BASH_VERSION_TAG "@(#)Bash version "
#define WORD_CHARS       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:,+@%^=-"
#define BLANKS           " \t"

static bool shell_version_ok(const char *data, size_t len);

/* Mapped, not read: bash is 1.2 MB, and a read costs a fresh 1.2 MB buffer (page faults and
 * zeroing) plus the copy, ~1 ms here; scanning the page cache's pages costs a fraction. */
bool
execd_fast_shell_ok(const char *shell_path)
{
    sbx_autoclose int fd = shell_path ? open(shell_path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        st.st_size > (16 << 20))
        return false;
    size_t len = (size_t)st.st_size;
    const char *data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED)
        return false;
    bool ok = shell_version_ok(data, len);
    (void)munmap((void *)data, len);
    return ok;
}

static bool
shell_version_ok(const char *data, size_t len)
{
    const char *tag = memmem(data, len, BASH_VERSION_TAG, strlen(BASH_VERSION_TAG));
    if (!tag)
        return false;
    const char *v = tag + strlen(BASH_VERSION_TAG);
    size_t left = len - (size_t)(v - data);
    unsigned major = 0;
    unsigned minor = 0;
    char probe[16] = "";
    memcpy(probe, v, left < sizeof(probe) - 1 ? left : sizeof(probe) - 1);
    if (sscanf(probe, "%u.%u", &major, &minor) != 2)
        return false;
    /* verified against 5.2 (SHLVL is decremented for the exec since 5.1); 6 may change it */
    return major == 5 && minor >= 2;
}

/* Reserved words and builtins of bash 5.2 (`compgen -k`, `compgen -b`). `[`, `[[`, `{`, `}`
 * and `!` cannot occur: their characters are outside WORD_CHARS. */
static const char *const shell_words[] = {
    "if",     "then",    "else",      "elif",     "fi",       "case",    "esac",     "for",
    "select", "while",   "until",     "do",       "done",     "in",      "function", "time",
    "coproc", ".",       ":",         "alias",    "bg",       "bind",    "break",    "builtin",
    "caller", "cd",      "command",   "compgen",  "complete", "compopt", "continue", "declare",
    "dirs",   "disown",  "echo",      "enable",   "eval",     "exec",    "exit",     "export",
    "false",  "fc",      "fg",        "getopts",  "hash",     "help",    "history",  "jobs",
    "kill",   "let",     "local",     "logout",   "mapfile",  "popd",    "printf",   "pushd",
    "pwd",    "read",    "readarray", "readonly", "return",   "set",     "shift",    "shopt",
    "source", "suspend", "test",      "times",    "trap",     "true",    "type",     "typeset",
    "ulimit", "umask",   "unalias",   "unset",    "wait",
};

static bool
is_shell_word(const char *w)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(shell_words); i++) {
        if (strcmp(w, shell_words[i]) == 0)
            return true;
    }
    return false;
}

char **
execd_fast_words(const char *cmd)
{
    if (strspn(cmd, WORD_CHARS BLANKS) != strlen(cmd))
        return NULL;
    size_t n = 0;
    char **v = sbx_xcalloc(1, sizeof(*v));
    const char *p = cmd + strspn(cmd, BLANKS);
    while (*p) {
        size_t len = strcspn(p, BLANKS);
        v = sbx_xrealloc(v, (n + 2) * sizeof(*v));
        v[n++] = sbx_xstrndup(p, len);
        v[n] = NULL;
        p += len;
        p += strspn(p, BLANKS);
    }
    /* `true` and `false` are builtins, but without arguments their programs behave the same
     * (no output, status 0 / 1); with arguments `--help` would not. */
    bool plain_true = n == 1 && (strcmp(v[0], "true") == 0 || strcmp(v[0], "false") == 0);
    /* A first word starting with `%` is a job spec to bash (`%1` means `fg %1`, even in a
     * `bash -c` without job control, which then fails), whatever PATH holds. */
    if (n == 0 || strchr(v[0], '=') || v[0][0] == '%' || (is_shell_word(v[0]) && !plain_true)) {
        execd_strv_free(v);
        return NULL;
    }
    return v;
}

static const char *
env_get(char *const *env, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; env && env[i]; i++) {
        if (strncmp(env[i], key, kl) == 0 && env[i][kl] == '=')
            return env[i] + kl + 1;
    }
    return NULL;
}

/* bash's file_status: stat, directories skipped, executable by eaccess(X_OK). Returns 1 for
 * an executable regular file, 0 to keep searching, -1 when bash would pick a file we do not
 * exec ourselves (executable but not regular). */
static int
exec_status(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0 || S_ISDIR(st.st_mode) || eaccess(path, X_OK) < 0)
        return 0;
    return S_ISREG(st.st_mode) ? 1 : -1;
}

char *
execd_fast_resolve(const char *word, char *const *env)
{
    if (strchr(word, '/'))
        return word[0] == '/' && exec_status(word) == 1 ? sbx_xstrdup(word) : NULL;
    const char *path = env_get(env, "PATH");
    if (!path || !path[0])
        return NULL;
    for (const char *p = path;;) {
        size_t len = strcspn(p, ":");
        /* an empty or relative element is searched relative to the cwd, `~` is expanded:
         * leave those to bash */
        if (len == 0 || p[0] != '/')
            return NULL;
        /* always dir + "/" + name, like bash's make_full_pathname (it shows in `_`) */
        char *cand = sbx_xasprintf("%.*s/%s", (int)len, p, word);
        int st = exec_status(cand);
        if (st == 1)
            return cand;
        free(cand);
        if (st < 0 || p[len] == '\0')
            return NULL;
        p += len + 1;
    }
}

/* Variables bash 5.2 sets, changes, drops or warns about when they come from the
 * environment (measured with `env -i NAME=x bash -c env`), or that change how it runs or
 * finds a command; PWD, OLDPWD, SHLVL and `_` are emulated below. Names starting with BASH
 * (BASH_ENV, BASH_FUNC_*, BASHOPTS, ...) are refused as well. */
static const char *const special_vars[] = {
    "COMP_WORDBREAKS", "ENV",       "EPOCHREALTIME", "EPOCHSECONDS", "EXECIGNORE",
    "HISTCMD",         "IFS",       "LINENO",        "OPTERR",       "OPTIND",
    "POSIXLY_CORRECT", "PPID",      "PS1",           "PS2",          "PS4",
    "RANDOM",          "SHELLOPTS", "SRANDOM",
};

static bool
env_is_special(const char *kv)
{
    size_t kl = strcspn(kv, "=");
    if (strncmp(kv, "BASH", 4) == 0)
        return true;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(special_vars); i++) {
        if (strlen(special_vars[i]) == kl && strncmp(kv, special_vars[i], kl) == 0)
            return true;
    }
    /* an LC_ALL bash cannot set makes it print a warning; C and POSIX always exist */
    if (kl == 6 && strncmp(kv, "LC_ALL", 6) == 0)
        return strcmp(kv + 7, "C") != 0 && strcmp(kv + 7, "POSIX") != 0;
    return false;
}

static ssize_t
env_index(char **env, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; env[i]; i++) {
        if (strncmp(env[i], key, kl) == 0 && env[i][kl] == '=')
            return (ssize_t)i;
    }
    return -1;
}

static void
env_put(char ***env, const char *key, const char *val)
{
    char *kv = sbx_xasprintf("%s=%s", key, val);
    ssize_t i = env_index(*env, key);
    if (i >= 0) {
        free((*env)[i]);
        (*env)[i] = kv;
        return;
    }
    size_t n = 0;
    while ((*env)[n])
        n++;
    *env = sbx_xrealloc(*env, (n + 2) * sizeof(char *));
    (*env)[n] = kv;
    (*env)[n + 1] = NULL;
}

static void
env_drop(char **env, const char *key)
{
    ssize_t i = env_index(env, key);
    if (i < 0)
        return;
    free(env[i]);
    for (size_t j = (size_t)i; env[j]; j++)
        env[j] = env[j + 1];
}

/* SHLVL: bash adds one at start and takes it back for the exec; an unset or empty value is
 * 0, and 999 or more makes it warn. Other spellings (signs, blanks, junk) are refused. */
static bool
shlvl_value(const char *v, char out[16])
{
    if (!v || !v[0]) {
        (void)snprintf(out, 16, "0");
        return true;
    }
    uint64_t lvl = 0;
    if (strspn(v, "0123456789") != strlen(v) || strlen(v) > 3 || sbx_parse_u64(v, &lvl, NULL) < 0 ||
        lvl > 998)
        return false;
    (void)snprintf(out, 16, "%u", (unsigned)lvl);
    return true;
}

static bool
same_file(const char *a, const char *b)
{
    struct stat sa;
    struct stat sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

bool
execd_fast_env(char ***env, const char *cwd, const char *prog)
{
    for (char **e = *env; *e; e++) {
        if (env_is_special(*e))
            return false;
    }
    char shlvl[16];
    if (!shlvl_value(env_get(*env, "SHLVL"), shlvl))
        return false;
    const char *old = env_get(*env, "OLDPWD");
    if (old && old[0] && old[0] != '/')
        return false; /* relative to the shell's cwd: not worth emulating */
    char real[PATH_MAX];
    if (!realpath(cwd ? cwd : ".", real))
        return false;
    const char *pwd = env_get(*env, "PWD");
    /* bash keeps an inherited PWD that is absolute and names the same directory */
    bool keep_pwd = pwd && pwd[0] == '/' && same_file(pwd, real);
    struct stat st;
    bool drop_old = old && !(old[0] && stat(old, &st) == 0 && S_ISDIR(st.st_mode));
    if (!keep_pwd)
        env_put(env, "PWD", real);
    if (drop_old)
        env_drop(*env, "OLDPWD");
    env_put(env, "SHLVL", shlvl);
    env_put(env, "_", prog);
    return true;
}
