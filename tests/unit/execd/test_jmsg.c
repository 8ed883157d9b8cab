#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "execd/jmsg.h"

#define KEY "0123456789abcdef"

static void
msg_add(struct zmtp_msg *m, const char *s)
{
    m->parts = realloc(m->parts, (m->n + 1) * sizeof(*m->parts));
    m->parts[m->n].data = (uint8_t *)strdup(s);
    m->parts[m->n].len = strlen(s);
    m->n++;
}

static void
msg_free(struct zmtp_msg *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->parts[i].data);
    free(m->parts);
    memset(m, 0, sizeof(*m));
}

static const char *frames4[] = {"{\"msg_type\":\"status\"}", "{}", "{}",
                                "{\"execution_state\":\"idle\"}"};

static void
test_sign_vector(void **state)
{
    (void)state;
    struct iovec iov[4];
    for (int i = 0; i < 4; i++)
        iov[i] = (struct iovec){.iov_base = (void *)frames4[i], .iov_len = strlen(frames4[i])};
    char sig[JMSG_SIG_HEX + 1];
    jmsg_sign((const uint8_t *)KEY, strlen(KEY), iov, sig);
    /* python3 -c 'import hmac,hashlib; h=hmac.new(b"0123456789abcdef", ...)' */
    assert_string_equal(sig, "f1df25c0a33688565d282a21d3642d9e4b57f6ecf4990828cda39d6febcfb858");
}

static void
signed_msg(struct zmtp_msg *m, const char *topic, const char *sig)
{
    if (topic)
        msg_add(m, topic);
    msg_add(m, JMSG_DELIM);
    msg_add(m, sig);
    for (int i = 0; i < 4; i++)
        msg_add(m, frames4[i]);
}

static void
test_parse(void **state)
{
    (void)state;
    const char *good = "f1df25c0a33688565d282a21d3642d9e4b57f6ecf4990828cda39d6febcfb858";
    struct zmtp_msg m = {0};
    struct jmsg j;
    const char *why = NULL;
    /* an iopub topic before the delimiter */
    signed_msg(&m, "kernel.1234.status", good);
    assert_int_equal(jmsg_parse(&m, (const uint8_t *)KEY, strlen(KEY), &j, &why), 0);
    assert_string_equal(j.msg_type, "status");
    assert_string_equal(j.parent_id, "");
    assert_string_equal(json_string_value(json_object_get(j.content, "execution_state")), "idle");
    jmsg_clear(&j);
    msg_free(&m);
    /* one wrong hex digit */
    signed_msg(&m, NULL, "f1df25c0a33688565d282a21d3642d9e4b57f6ecf4990828cda39d6febcfb859");
    assert_int_equal(jmsg_parse(&m, (const uint8_t *)KEY, strlen(KEY), &j, &why), -1);
    assert_non_null(strstr(why, "signature"));
    /* without a key nothing is checked (Jupyter's empty key) */
    assert_int_equal(jmsg_parse(&m, (const uint8_t *)"", 0, &j, &why), 0);
    jmsg_clear(&j);
    msg_free(&m);
    /* no delimiter / too few frames */
    msg_add(&m, "x");
    assert_int_equal(jmsg_parse(&m, (const uint8_t *)KEY, strlen(KEY), &j, &why), -1);
    msg_add(&m, JMSG_DELIM);
    msg_add(&m, good);
    assert_int_equal(jmsg_parse(&m, (const uint8_t *)KEY, strlen(KEY), &j, &why), -1);
    msg_free(&m);
    /* frames that are not JSON objects, a header without msg_type */
    const char *bad[][4] = {
        {"[1]", "{}", "{}", "{}"},
        {"{\"msg_type\":\"x\"}", "nope", "{}", "{}"},
        {"{\"msg_type\":5}", "{}", "{}", "{}"},
    };
    for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
        msg_add(&m, JMSG_DELIM);
        msg_add(&m, "");
        for (int i = 0; i < 4; i++)
            msg_add(&m, bad[b][i]);
        assert_int_equal(jmsg_parse(&m, (const uint8_t *)"", 0, &j, &why), -1);
        msg_free(&m);
    }
}

static void
test_build_roundtrip(void **state)
{
    (void)state;
    struct jmsg_out o;
    jmsg_build(&o, (const uint8_t *)KEY, strlen(KEY), "sess", "execute_request",
               json_pack("{s:s}", "code", "2+2"));
    assert_int_equal(strlen(o.id), 32);
    struct zmtp_msg m = {0};
    msg_add(&m, "routing-id");
    for (int i = 0; i < 6; i++)
        msg_add(&m, o.frames[i]);
    struct jmsg j;
    const char *why = NULL;
    assert_int_equal(jmsg_parse(&m, (const uint8_t *)KEY, strlen(KEY), &j, &why), 0);
    assert_string_equal(j.msg_type, "execute_request");
    assert_string_equal(json_string_value(json_object_get(j.header, "msg_id")), o.id);
    assert_string_equal(json_string_value(json_object_get(j.header, "session")), "sess");
    assert_string_equal(json_string_value(json_object_get(j.header, "version")), "5.3");
    assert_string_equal(json_string_value(json_object_get(j.content, "code")), "2+2");
    jmsg_clear(&j);
    /* another key does not verify */
    assert_int_equal(jmsg_parse(&m, (const uint8_t *)"other", 5, &j, &why), -1);
    msg_free(&m);
    jmsg_out_clear(&o);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sign_vector),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_build_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
