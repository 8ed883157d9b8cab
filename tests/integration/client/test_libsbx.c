/*
 * test_libsbx.c - libsbx against a real server (started by run_libsbx.sh, which exports
 * SBX_HOST and SBX_API_KEY) and real sandboxes on the provider named in argv[1].
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx/client.h"

static const char *provider = "native";

struct lines {
    char text[8][64];
    int n;
    int stop_after;
};

static int
collect(const char *data, size_t len, void *payload)
{
    struct lines *l = payload;
    if (l->n < 8)
        (void)snprintf(l->text[l->n++], sizeof l->text[0], "%.*s", (int)len, data);
    return l->stop_after && l->n >= l->stop_after;
}

static sbx_client *
connect_client(void)
{
    sbx_client *c = NULL;
    assert_int_equal(sbx_client_new(&c, NULL, NULL), 0);
    return c;
}

static char *
make_sandbox(sbx_client *c, const char *role)
{
    sbx_create_options o = SBX_CREATE_OPTIONS_INIT;
    const sbx_kv md[] = {{"suite", "libsbx"}, {"role", role}};
    const sbx_kv env[] = {{"GREETING", "hello"}};
    o.metadata = md;
    o.n_metadata = 2;
    o.env = env;
    o.n_env = 1;
    o.timeout_s = 600;
    o.provider = provider;
    sbx_sandbox *s = NULL;
    int ret = sbx_sandbox_create(&s, c, &o);
    if (ret < 0)
        fail_msg("create: %s", sbx_client_last_error(c));
    assert_string_equal(sbx_sandbox_state(s), "Running");
    assert_non_null(sbx_sandbox_expires_at(s));
    char *id = strdup(sbx_sandbox_id(s));
    sbx_sandbox_free(s);
    return id;
}

static void
test_lifecycle(void **state)
{
    (void)state;
    sbx_client *c = connect_client();
    char *id = make_sandbox(c, "life");
    sbx_sandbox *s = NULL;
    assert_int_equal(sbx_sandbox_get(&s, c, id), 0);
    assert_string_equal(sbx_sandbox_id(s), id);
    int found_role = 0;
    for (size_t i = 0; i < sbx_sandbox_metadata_count(s); i++)
        found_role |= strcmp(sbx_sandbox_metadata_key(s, i), "role") == 0 &&
                      strcmp(sbx_sandbox_metadata_value(s, i), "life") == 0;
    assert_true(found_role);
    assert_string_equal(sbx_sandbox_metadata_get(s, "role"), "life");
    assert_null(sbx_sandbox_metadata_get(s, "no-such-label"));
    assert_true(sbx_sandbox_entrypoint_count(s) >= 1);
    assert_null(sbx_sandbox_entrypoint(s, sbx_sandbox_entrypoint_count(s)));
    sbx_sandbox_free(s);

    const char *states[] = {"running"};
    const sbx_kv md[] = {{"role", "life"}};
    sbx_list_options lo = SBX_LIST_OPTIONS_INIT;
    lo.states = states;
    lo.n_states = 1;
    lo.metadata = md;
    lo.n_metadata = 1;
    sbx_sandbox **list = NULL;
    size_t n = 0;
    assert_int_equal(sbx_sandbox_list(&list, &n, c, &lo), 0);
    assert_int_equal(n, 1);
    assert_string_equal(sbx_sandbox_id(list[0]), id);
    sbx_sandbox_list_free(list, n);

    assert_int_equal(sbx_sandbox_pause(c, id), 0);
    assert_int_equal(sbx_sandbox_pause(c, id), -SBX_ECONFLICT);
    assert_true(strlen(sbx_client_last_error(c)) > 0);
    assert_int_equal(sbx_sandbox_resume(c, id), 0);
    assert_int_equal(sbx_sandbox_resume(c, id), -SBX_ECONFLICT);
    assert_int_equal(sbx_sandbox_start(c, id), -SBX_ECONFLICT);
    assert_int_equal(sbx_sandbox_stop(c, id), 0);
    assert_int_equal(sbx_sandbox_get(&s, c, id), 0);
    assert_string_equal(sbx_sandbox_state(s), "Stopped");
    sbx_sandbox_free(s);
    assert_int_equal(sbx_sandbox_stop(c, id), -SBX_ECONFLICT);
    assert_int_equal(sbx_sandbox_start(c, id), 0);
    char *expires = NULL;
    assert_int_equal(sbx_sandbox_renew(&expires, c, id, 3600), 0);
    assert_non_null(expires);
    free(expires);
    assert_int_equal(sbx_sandbox_delete(c, id), 0);
    assert_int_equal(sbx_sandbox_get(&s, c, id), -SBX_ENOTFOUND);
    assert_null(s);
    assert_int_equal(sbx_sandbox_delete(c, id), -SBX_ENOTFOUND);
    free(id);
    sbx_client_free(c);
}

static void
test_reuse_key(void **state)
{
    (void)state;
    sbx_client *c = connect_client();
    sbx_create_options o = SBX_CREATE_OPTIONS_INIT;
    o.provider = provider;
    o.reuse_key = "libsbx:reuse";
    sbx_sandbox *a = NULL;
    sbx_sandbox *b = NULL;
    assert_int_equal(sbx_sandbox_create(&a, c, &o), 0);
    assert_int_equal(sbx_sandbox_create(&b, c, &o), 0);
    assert_string_equal(sbx_sandbox_id(a), sbx_sandbox_id(b)); /* found, not created */
    o.version = 1; /* a version-1 caller: no reuse_key field, always a new sandbox */
    sbx_sandbox *v1 = NULL;
    assert_int_equal(sbx_sandbox_create(&v1, c, &o), 0);
    assert_string_not_equal(sbx_sandbox_id(v1), sbx_sandbox_id(a));
    assert_int_equal(sbx_sandbox_delete(c, sbx_sandbox_id(a)), 0);
    assert_int_equal(sbx_sandbox_delete(c, sbx_sandbox_id(v1)), 0);
    sbx_sandbox_free(a);
    sbx_sandbox_free(b);
    sbx_sandbox_free(v1);
    sbx_client_free(c);
}

static void
test_exec(void **state)
{
    (void)state;
    sbx_client *c = connect_client();
    char *id = make_sandbox(c, "exec");
    struct lines out = {0};
    struct lines err = {0};
    sbx_exec_options eo = SBX_EXEC_OPTIONS_INIT;
    eo.on_stdout = collect;
    eo.on_stderr = collect;
    eo.payload = &out;
    int code = -2;
    assert_int_equal(sbx_exec(&code, c, id, "echo $GREETING; echo; echo two; exit 5", &eo), 0);
    assert_int_equal(code, 5);
    assert_int_equal(out.n, 3);
    assert_string_equal(out.text[0], "hello");
    assert_string_equal(out.text[1], "");
    assert_string_equal(out.text[2], "two");

    eo.payload = &err;
    eo.cwd = "/tmp";
    assert_int_equal(sbx_exec(&code, c, id, "pwd >&2", &eo), 0);
    assert_int_equal(code, 0);
    assert_string_equal(err.text[0], "/tmp");

    struct lines stop = {.stop_after = 2};
    eo.payload = &stop;
    eo.cwd = NULL;
    assert_int_equal(sbx_exec(&code, c, id, "while true; do echo y; sleep 0.01; done", &eo),
                     -SBX_ECONFLICT);
    assert_int_equal(stop.n, 2);

    /* a signal comes back as a shell's $? (execd sends evalue -1, "signal: terminated") */
    assert_int_equal(sbx_exec(&code, c, id, "kill -TERM $$", NULL), 0);
    assert_int_equal(code, 128 + 15);
    assert_int_equal(sbx_exec(&code, c, id, "kill -USR1 $$", NULL), 0);
    assert_int_equal(code, 128 + 10);
    /* a signal Go has no name for: "signal: signal 34" */
    assert_int_equal(sbx_exec(&code, c, id, "kill -34 $$", NULL), 0);
    assert_int_equal(code, 128 + 34);
    assert_int_equal(sbx_exec(&code, c, id, "no-such-command-here", NULL), 0);
    assert_int_equal(code, 127);

    assert_int_equal(sbx_exec(&code, c, "no-such-sandbox", "true", NULL), -SBX_ENOTFOUND);
    assert_int_equal(sbx_sandbox_delete(c, id), 0);
    free(id);
    sbx_client_free(c);
}

static int
same_contents(const char *a, const char *b)
{
    FILE *fa = fopen(a, "re");
    FILE *fb = fopen(b, "re");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa);
        int cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        (void)fclose(fa);
    if (fb)
        (void)fclose(fb);
    return same;
}

static void
test_files(void **state)
{
    (void)state;
    sbx_client *c = connect_client();
    char *id = make_sandbox(c, "files");
    char dir[] = "/tmp/sbx-libsbx-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char in[64];
    char back[64];
    (void)snprintf(in, sizeof in, "%s/in", dir);
    (void)snprintf(back, sizeof back, "%s/back", dir);
    FILE *f = fopen(in, "we");
    assert_non_null(f);
    for (int i = 0; i < 100000; i++)
        fprintf(f, "%d\n", i);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(sbx_upload(c, id, in, "/tmp/up/in.txt"), 0);
    assert_int_equal(sbx_download(c, id, "/tmp/up/in.txt", back), 0);
    assert_true(same_contents(in, back));
    assert_int_equal(sbx_upload(c, id, in, "relative/path"), -SBX_EINVAL);
    assert_int_equal(sbx_upload(c, id, "/no/such/local", "/tmp/x"), -SBX_ENOTFOUND);
    assert_int_equal(sbx_download(c, id, "/no/such/remote", back), -SBX_ENOTFOUND);
    /* A failed download leaves the earlier file alone and no partial file behind. */
    struct stat st;
    assert_int_equal(stat(back, &st), 0);
    assert_int_equal(st.st_size, 588890);
    (void)unlink(in);
    (void)unlink(back);
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(sbx_sandbox_delete(c, id), 0);
    free(id);
    sbx_client_free(c);
}

/* Files, directories, background commands, sessions and code contexts (docs/execd.md). */
static void
test_execd_files(void **state)
{
    (void)state;
    sbx_client *c = connect_client();
    char *id = make_sandbox(c, "files-api");
    const char bin[] = "a\0b\r\n\xff";
    assert_int_equal(sbx_dir_create(c, id, "/tmp/api/sub", 0750), 0);
    assert_int_equal(sbx_file_write(c, id, "/tmp/api/sub/f.bin", bin, sizeof bin, 0640), 0);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(sbx_file_read(&data, &len, c, id, "/tmp/api/sub/f.bin"), 0);
    assert_int_equal(len, sizeof bin);
    assert_memory_equal(data, bin, sizeof bin);
    free(data);
    char *json = NULL;
    assert_int_equal(sbx_file_info(&json, c, id, "/tmp/api/sub/f.bin"), 0);
    assert_non_null(strstr(json, "\"mode\":640"));
    free(json);
    assert_int_equal(sbx_file_chmod(c, id, "/tmp/api/sub/f.bin", 0600), 0);
    assert_int_equal(sbx_file_move(c, id, "/tmp/api/sub/f.bin", "/tmp/api/g.bin"), 0);
    assert_int_equal(sbx_file_info(&json, c, id, "/tmp/api/sub/f.bin"), -SBX_ENOTFOUND);
    assert_int_equal(sbx_file_info(&json, c, id, "/tmp/api/g.bin"), 0);
    assert_non_null(strstr(json, "\"mode\":600"));
    free(json);
    assert_int_equal(sbx_dir_list(&json, c, id, "/tmp/api", 2), 0);
    assert_non_null(strstr(json, "/tmp/api/sub"));
    assert_non_null(strstr(json, "/tmp/api/g.bin"));
    free(json);
    assert_int_equal(sbx_file_search(&json, c, id, "/tmp/api", "*.bin"), 0);
    assert_non_null(strstr(json, "g.bin"));
    free(json);
    assert_int_equal(sbx_file_remove(c, id, "/tmp/api/g.bin"), 0);
    assert_int_equal(sbx_dir_remove(c, id, "/tmp/api"), 0);
    assert_int_equal(sbx_file_info(&json, c, id, "/tmp/api"), -SBX_ENOTFOUND);
    assert_int_equal(sbx_sandbox_delete(c, id), 0);
    free(id);
    sbx_client_free(c);
}

static void
test_execd_commands(void **state)
{
    (void)state;
    sbx_client *c = connect_client();
    char *id = make_sandbox(c, "commands-api");
    char *cmd = NULL;
    assert_int_equal(sbx_exec_background(&cmd, c, id, "echo one; sleep 30", NULL), 0);
    unsigned long long cursor = 0;
    char *out = NULL;
    size_t len = 0;
    for (int i = 0; i < 100 && len == 0; i++) {
        free(out);
        out = NULL;
        assert_int_equal(sbx_command_logs(&out, &len, &cursor, c, id, cmd), 0);
        if (len == 0)
            (void)usleep(20000);
    }
    assert_string_equal(out, "one\n");
    assert_int_equal(cursor, 4);
    free(out);
    char *json = NULL;
    assert_int_equal(sbx_command_status(&json, c, id, cmd), 0);
    assert_non_null(strstr(json, "\"running\":true"));
    free(json);
    assert_int_equal(sbx_command_interrupt(c, id, cmd), 0);
    free(cmd);

    char *sid = NULL;
    assert_int_equal(sbx_session_create(&sid, c, id, "/tmp"), 0);
    int code = -2;
    assert_int_equal(sbx_session_run(&code, c, id, sid, "export KEPT=yes; cd /", NULL), 0);
    struct lines l = {0};
    sbx_exec_options eo;
    sbx_exec_options_init(&eo);
    eo.on_stdout = collect;
    eo.payload = &l;
    assert_int_equal(sbx_session_run(&code, c, id, sid, "echo $KEPT $PWD; exit 3", &eo), 0);
    assert_int_equal(code, 3);
    assert_string_equal(l.text[0], "yes /");
    assert_int_equal(sbx_session_delete(c, id, sid), 0);
    assert_int_equal(sbx_session_run(&code, c, id, sid, "true", NULL), -SBX_ENOTFOUND);
    free(sid);

    char *ctx = NULL;
    assert_int_equal(sbx_code_context_create(&ctx, c, id, "bash", NULL), 0);
    sbx_code_options co;
    sbx_code_options_init(&co);
    co.context_id = ctx;
    sbx_code_result *r = NULL;
    assert_int_equal(sbx_code_run(&r, c, id, "export X=42", &co), 0);
    assert_null(sbx_code_result_error_name(r));
    sbx_code_result_free(r);
    struct lines cl = {0};
    co.on_stdout = collect;
    co.payload = &cl;
    assert_int_equal(sbx_code_run(&r, c, id, "echo $X", &co), 0);
    int saw = 0; /* output as execd sends it: a bash context's lines, a kernel's text */
    for (int i = 0; i < cl.n; i++)
        saw |= strncmp(cl.text[i], "42", 2) == 0;
    assert_true(saw);
    sbx_code_result_free(r);
    assert_int_equal(sbx_code_context_delete(c, id, ctx), 0);
    free(ctx);
    assert_int_equal(sbx_sandbox_delete(c, id), 0);
    free(id);
    sbx_client_free(c);
}

static void
test_bad_arguments(void **state)
{
    (void)state;
    sbx_client *c = NULL;
    sbx_client_options bad = SBX_CLIENT_OPTIONS_INIT;
    bad.version = 99;
    sbx_err *err = NULL;
    assert_int_equal(sbx_client_new(&c, &bad, &err), -SBX_EINVAL);
    assert_null(c);
    assert_int_equal(sbx_err_code(err), -SBX_EINVAL);
    assert_non_null(strstr(sbx_err_message(err), "version"));
    sbx_err_free(err);
    assert_int_equal(sbx_client_new(NULL, NULL, NULL), -SBX_EINVAL); /* no err: no crash */
    c = connect_client();
    sbx_sandbox *s = NULL;
    assert_int_equal(sbx_sandbox_get(&s, c, ""), -SBX_EINVAL);
    assert_int_equal(sbx_sandbox_get(&s, c, "../../etc"), -SBX_ENOTFOUND);
    sbx_create_options co = SBX_CREATE_OPTIONS_INIT;
    co.provider = "no-such-provider";
    assert_int_equal(sbx_sandbox_create(&s, c, &co), -SBX_EINVAL);
    assert_non_null(strstr(sbx_client_last_error(c), "native"));
    sbx_client_free(c);

    sbx_client_options wrong = SBX_CLIENT_OPTIONS_INIT;
    wrong.api_key = "wrong-key";
    assert_int_equal(sbx_client_new(&c, &wrong, NULL), 0);
    assert_int_equal(sbx_sandbox_get(&s, c, "x"), -SBX_EPERM);
    sbx_client_free(c);
    sbx_client_options away = SBX_CLIENT_OPTIONS_INIT;
    away.host = "127.0.0.1:1";
    assert_int_equal(sbx_client_new(&c, &away, NULL), 0);
    assert_int_equal(sbx_sandbox_get(&s, c, "x"), -SBX_EUNAVAIL);
    sbx_client_free(c);
    sbx_client_free(NULL);
}

/* The library must never write to stderr: each test runs with fd 2 sent to a file that must
 * stay empty (what an assertion printed there is copied back, so failures stay readable). */
static int saved_stderr = -1;
static char errpath[] = "/tmp/sbx-libsbx-stderr-XXXXXX";

static int
redirect_stderr(void **state)
{
    (void)state;
    int fd = open(errpath, O_WRONLY | O_TRUNC | O_CLOEXEC);
    int ok = fd >= 0 && dup2(fd, STDERR_FILENO) >= 0;
    if (fd >= 0)
        (void)close(fd);
    return ok ? 0 : -1;
}

static int
check_stderr(void **state)
{
    (void)state;
    (void)fflush(stderr);
    (void)dup2(saved_stderr, STDERR_FILENO);
    FILE *f = fopen(errpath, "re");
    char buf[4096];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        (void)fclose(f);
    buf[n] = '\0';
    if (n)
        fprintf(stderr, "written to stderr during the test:\n%s\n", buf);
    return n == 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
    if (argc > 1)
        provider = argv[1];
    int fd = mkstemp(errpath);
    saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
    if (fd < 0 || saved_stderr < 0)
        return 1;
    (void)close(fd);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lifecycle, redirect_stderr, check_stderr),
        cmocka_unit_test_setup_teardown(test_reuse_key, redirect_stderr, check_stderr),
        cmocka_unit_test_setup_teardown(test_exec, redirect_stderr, check_stderr),
        cmocka_unit_test_setup_teardown(test_files, redirect_stderr, check_stderr),
        cmocka_unit_test_setup_teardown(test_execd_files, redirect_stderr, check_stderr),
        cmocka_unit_test_setup_teardown(test_execd_commands, redirect_stderr, check_stderr),
        cmocka_unit_test_setup_teardown(test_bad_arguments, redirect_stderr, check_stderr),
    };
    if (sbx_global_init() < 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    sbx_global_cleanup();
    (void)unlink(errpath);
    return rc;
}
