/*
 * sbx_hello.c - a program of another project using libsbx: built against the installed
 * library through `pkg-config --cflags --libs sbx` only (installed_libsbx.sh), run against a
 * real `sbx serve`: create a sandbox, run a command, read the file it wrote, delete it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sbx.h>

static int
out_line(const char *data, size_t len, void *payload)
{
    (void)payload;
    printf("stdout: %.*s\n", (int)len, data);
    return 0;
}

static int
fail(sbx_client *c, const char *what)
{
    fprintf(stderr, "sbx_hello: %s: %s\n", what, sbx_client_last_error(c));
    return 1;
}

static int
run(sbx_client *c, const char *provider)
{
    sbx_create_options co;
    sbx_create_options_init(&co);
    co.provider = provider;
    co.timeout_s = 300;
    sbx_sandbox *s = NULL;
    if (sbx_sandbox_create(&s, c, &co) < 0)
        return fail(c, "create");
    printf("created %s (%s)\n", sbx_sandbox_id(s), sbx_sandbox_state(s));
    sbx_exec_options eo;
    sbx_exec_options_init(&eo);
    eo.on_stdout = out_line;
    int code = -1;
    int rc = 0;
    if (sbx_exec(&code, c, sbx_sandbox_id(s), "echo written > /tmp/hello; echo ran", &eo) < 0)
        rc = fail(c, "exec");
    char *data = NULL;
    size_t len = 0;
    if (rc == 0 && sbx_file_read(&data, &len, c, sbx_sandbox_id(s), "/tmp/hello") < 0)
        rc = fail(c, "read");
    if (rc == 0)
        printf("exit %d, file: %.*s", code, (int)len, data);
    free(data);
    if (sbx_sandbox_delete(c, sbx_sandbox_id(s)) < 0)
        rc = fail(c, "delete");
    sbx_sandbox_free(s);
    return rc;
}

int
main(int argc, char **argv)
{
    if (sbx_global_init() < 0)
        return 1;
    printf("libsbx %s\n", sbx_version());
    sbx_client_options bad;
    sbx_client_options_init(&bad);
    bad.version = 1000;
    sbx_client *c = NULL;
    sbx_err *err = NULL;
    if (sbx_client_new(&c, &bad, &err) == 0)
        return 1;
    printf("a bad client: %s\n", sbx_err_message(err));
    sbx_err_free(err);
    if (sbx_client_new(&c, NULL, &err) < 0) {
        fprintf(stderr, "sbx_hello: %s\n", sbx_err_message(err));
        sbx_err_free(err);
        return 1;
    }
    int rc = run(c, argc > 1 ? argv[1] : NULL);
    sbx_client_free(c);
    sbx_global_cleanup();
    return rc;
}
