#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "common/xalloc.h"
#include "execd/execd.h"
#include "execd/fastpath.h"

static void
check_words(const char *cmd, const char *const *want)
{
    char **w = execd_fast_words(cmd);
    if (!want) {
        assert_null(w);
        return;
    }
    assert_non_null(w);
    size_t i = 0;
    for (; want[i]; i++)
        assert_string_equal(w[i], want[i]);
    assert_null(w[i]);
    execd_strv_free(w);
}

static void
test_words(void **state)
{
    (void)state;
    check_words("ls -la /tmp", (const char *const[]){"ls", "-la", "/tmp", NULL});
    check_words("  env\t", (const char *const[]){"env", NULL});
    check_words("dd if=/dev/zero of=x bs=1k count=1",
                (const char *const[]){"dd", "if=/dev/zero", "of=x", "bs=1k", "count=1", NULL});
    check_words("git log --format=%H@x,y:z+^",
                (const char *const[]){"git", "log", "--format=%H@x,y:z+^", NULL});
    check_words("true", (const char *const[]){"true", NULL});
    check_words("false", (const char *const[]){"false", NULL});
    check_words("/usr/bin/env", (const char *const[]){"/usr/bin/env", NULL});
    /* shell syntax, expansions, quoting, comments, globs, tildes, newlines */
    const char *bash_only[] = {
        "echo $HOME", "ls *",        "ls ?",    "ls [a]",      "a | b",     "a; b",    "a && b",
        "a > f",      "a < f",       "a &",     "(a)",         "{ a; }",    "'a'",     "\"a\"",
        "a\\ b",      "ls ~",        "ls #x",   "! a",         "a\nb",      "`a`",     "a=b",
        "A=1 env",    "x{a,b}",      "",        "   ",         "time ls",   "cd /tmp", "exit 3",
        "echo hi",    "true --help", "false x", "exec ls",     ". file",    ": x",     "source f",
        "if",         "kill 1",      "pwd",     "printf x",    "test -f x", "read x",  "command ls",
        "type ls",    "builtin x",   "ls\x01",  "ls \xc3\xa9", "%1",        "%prog x",
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bash_only); i++) {
        char **w = execd_fast_words(bash_only[i]);
        if (w)
            fail_msg("`%s` should go to bash", bash_only[i]);
    }
}

static char *
make_exe(const char *dir, const char *name, mode_t mode)
{
    char *p = sbx_xasprintf("%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "#!/bin/sh\n", 10), 10);
    close(fd);
    assert_int_equal(chmod(p, mode), 0);
    return p;
}

static void
test_resolve(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/sbx-fastpath-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char *a = sbx_xasprintf("%s/a", tmpl);
    char *b = sbx_xasprintf("%s/b", tmpl);
    assert_int_equal(mkdir(a, 0755), 0);
    assert_int_equal(mkdir(b, 0755), 0);
    free(make_exe(a, "noexec", 0644)); /* skipped: bash keeps searching */
    char *want = make_exe(b, "noexec", 0755);
    char *dir = sbx_xasprintf("%s/dir", a);
    assert_int_equal(mkdir(dir, 0755), 0); /* directories are skipped */
    char *want_dir = make_exe(b, "dir", 0755);
    char *path = sbx_xasprintf("PATH=%s:%s", a, b);
    char *env[] = {path, NULL};
    char *got = execd_fast_resolve("noexec", env);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
    got = execd_fast_resolve("dir", env);
    assert_string_equal(got, want_dir);
    free(got);
    assert_null(execd_fast_resolve("missing", env));
    /* relative path elements, `~`, PATH unset, relative names with a slash: bash decides */
    char *rel = sbx_xasprintf("PATH=:%s", b);
    char *env_rel[] = {rel, NULL};
    assert_null(execd_fast_resolve("noexec", env_rel));
    char *tilde = sbx_xasprintf("PATH=~/bin:%s", b);
    char *env_tilde[] = {tilde, NULL};
    assert_null(execd_fast_resolve("noexec", env_tilde));
    char *none[] = {NULL};
    assert_null(execd_fast_resolve("noexec", none));
    assert_null(execd_fast_resolve("b/noexec", env));
    got = execd_fast_resolve(want, none);
    assert_string_equal(got, want);
    free(got);
    /* a relative element after the match does not matter */
    char *late = sbx_xasprintf("PATH=%s:.", b);
    char *env_late[] = {late, NULL};
    got = execd_fast_resolve("noexec", env_late);
    assert_string_equal(got, want);
    free(got);
    assert_int_equal(sbx_rm_rf(tmpl, NULL), 0);
    char *bufs[] = {a, b, dir, want, want_dir, path, rel, tilde, late};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bufs); i++)
        free(bufs[i]);
}

static char **
env_of(const char *const *kv)
{
    size_t n = 0;
    while (kv[n])
        n++;
    char **e = sbx_xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        e[i] = sbx_xstrdup(kv[i]);
    return e;
}

static const char *
get(char **env, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; env[i]; i++) {
        if (strncmp(env[i], key, kl) == 0 && env[i][kl] == '=')
            return env[i] + kl + 1;
    }
    return NULL;
}

static void
test_env(void **state)
{
    (void)state;
    char real_tmp[PATH_MAX];
    assert_non_null(realpath("/tmp", real_tmp));
    /* bash 5.2: PWD set to the cwd, SHLVL 0, `_` = program; other variables as they were */
    char **e = env_of((const char *const[]){"FOO=1", "A-B=odd name", NULL});
    assert_true(execd_fast_env(&e, "/tmp", "/usr/bin/env"));
    assert_string_equal(get(e, "PWD"), real_tmp);
    assert_string_equal(get(e, "SHLVL"), "0");
    assert_string_equal(get(e, "_"), "/usr/bin/env");
    assert_string_equal(get(e, "FOO"), "1");
    assert_string_equal(get(e, "A-B"), "odd name");
    execd_strv_free(e);
    /* an inherited PWD naming the cwd is kept as written; OLDPWD kept when a directory */
    e = env_of((const char *const[]){"PWD=/tmp/./", "OLDPWD=/", "SHLVL=007", "_=x", NULL});
    assert_true(execd_fast_env(&e, "/tmp", "/bin/true"));
    assert_string_equal(get(e, "PWD"), "/tmp/./");
    assert_string_equal(get(e, "OLDPWD"), "/");
    assert_string_equal(get(e, "SHLVL"), "7");
    assert_string_equal(get(e, "_"), "/bin/true");
    execd_strv_free(e);
    /* a PWD elsewhere is replaced, an OLDPWD that is no directory dropped */
    e = env_of((const char *const[]){"PWD=/", "OLDPWD=/nonexistent-sbx", "SHLVL=", NULL});
    assert_true(execd_fast_env(&e, "/tmp", "/bin/true"));
    assert_string_equal(get(e, "PWD"), real_tmp);
    assert_null(get(e, "OLDPWD"));
    assert_string_equal(get(e, "SHLVL"), "0");
    execd_strv_free(e);
    /* variables bash treats specially: refused, env untouched */
    const char *special[] = {
        "BASH_ENV=/x", "BASH_FUNC_f%%=() { :; }",
        "BASHOPTS=x",  "SHELLOPTS=x",
        "IFS=x",       "PS4=x",
        "PPID=1",      "POSIXLY_CORRECT=1",
        "ENV=/x",      "EXECIGNORE=*",
        "LC_ALL=xx",   "SHLVL=999",
        "SHLVL=-1",    "SHLVL= 2",
        "SHLVL=abc",   "OLDPWD=relative",
        "RANDOM=4",    "OPTIND=2",
        "BASH=/x",
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(special); i++) {
        e = env_of((const char *const[]){"FOO=1", special[i], NULL});
        if (execd_fast_env(&e, "/tmp", "/bin/true"))
            fail_msg("`%s` should make the command go to bash", special[i]);
        assert_string_equal(e[1], special[i]);
        assert_null(e[2]);
        execd_strv_free(e);
    }
    e = env_of((const char *const[]){"LC_ALL=C", "LANG=whatever", NULL});
    assert_true(execd_fast_env(&e, NULL, "/bin/true"));
    execd_strv_free(e);
    e = env_of((const char *const[]){"FOO=1", NULL});
    assert_false(execd_fast_env(&e, "/nonexistent-sbx", "/bin/true"));
    execd_strv_free(e);
}

static void
test_shell_version(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/sbx-fastpath-XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    const char blob[] = "\x7f"
                        "ELF junk @(#)Bash version 5.2.15(1) release GNU more";
    assert_int_equal(write(fd, blob, sizeof(blob)), (ssize_t)sizeof(blob));
    assert_true(execd_fast_shell_ok(tmpl));
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, "@(#)Bash version 5.1.16(1)", 27, 0), 27);
    assert_false(execd_fast_shell_ok(tmpl));
    assert_int_equal(pwrite(fd, "@(#)Bash version 6.0.0(1)", 26, 0), 26);
    assert_false(execd_fast_shell_ok(tmpl));
    assert_int_equal(pwrite(fd, "BusyBox v1.35.0 multi-call ", 27, 0), 27);
    assert_false(execd_fast_shell_ok(tmpl));
    close(fd);
    unlink(tmpl);
    assert_false(execd_fast_shell_ok("/nonexistent-sbx"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_shell_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
