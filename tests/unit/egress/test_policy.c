/* The egress policy model (src/egress/policy.c) and the resolver's DNS messages (dnsmsg.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/dnsmsg.h"
#include "egress/policy.h"

static struct sbx_egress_policy *
parse(const char *text)
{
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(j);
    struct sbx_egress_policy *p = NULL;
    sbx_error *err = NULL;
    int r = sbx_egress_policy_parse(j, &p, &err);
    json_decref(j);
    if (r < 0) {
        sbx_error_clear(&err);
        return NULL;
    }
    return p;
}

/* The message of the error parsing text (static buffer). */
static const char *
parse_error(const char *text)
{
    static char msg[512];
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    struct sbx_egress_policy *p = NULL;
    sbx_error *err = NULL;
    assert_true(sbx_egress_policy_parse(j, &p, &err) < 0);
    (void)snprintf(msg, sizeof msg, "%s", sbx_error_msg(err));
    sbx_error_clear(&err);
    json_decref(j);
    return msg;
}

static void
test_parse_and_defaults(void **state)
{
    (void)state;
    struct sbx_egress_policy *p = parse("{}");
    assert_non_null(p);
    assert_int_equal(p->dflt, SBX_EGRESS_DENY); /* omitted: deny */
    assert_string_equal(sbx_egress_policy_mode(p), "deny_all");
    sbx_egress_policy_free(p);
    p = parse("{\"defaultAction\":\"allow\"}");
    assert_string_equal(sbx_egress_policy_mode(p), "allow_all");
    sbx_egress_policy_free(p);
    p = parse("{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
              "\"target\":\"PyPI.org.\"}]}");
    assert_non_null(p);
    assert_int_equal(p->n, 1);
    assert_string_equal(p->rules[0].target, "pypi.org"); /* lowercase, no final dot */
    assert_string_equal(sbx_egress_policy_mode(p), "enforcing");
    json_t *j = sbx_egress_policy_json(p);
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s, "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
                           "\"target\":\"pypi.org\"}]}");
    free(s);
    json_decref(j);
    sbx_egress_policy_free(p);
}

static void
test_bad_input(void **state)
{
    (void)state;
    assert_non_null(strstr(parse_error("[]"), "networkPolicy"));
    assert_non_null(strstr(parse_error("{\"defaultAction\":\"maybe\"}"), "defaultAction"));
    assert_non_null(strstr(parse_error("{\"defaultaction\":\"allow\"}"), "unknown key"));
    assert_non_null(strstr(parse_error("{\"egress\":{}}"), "list"));
    assert_non_null(strstr(parse_error("{\"egress\":[{\"action\":\"allow\"}]}"), "target"));
    assert_non_null(strstr(parse_error("{\"egress\":[{\"action\":\"allow\",\"target\":\"x.com\","
                                       "\"port\":1}]}"),
                           "unknown key `port`"));
    const char *ips[] = {"1.2.3.4", "10.0.0.0/8", "::1", "999.1.1.1", "2001:db8::/32"};
    for (size_t i = 0; i < sizeof ips / sizeof ips[0]; i++) {
        char text[128];
        (void)snprintf(text, sizeof text, "{\"egress\":[{\"action\":\"allow\",\"target\":\"%s\"}]}",
                       ips[i]);
        assert_non_null(strstr(parse_error(text), "not yet supported"));
    }
    const char *bad[] = {"",        "*",        "*.",      "a..b",          "-a.com",
                         "a b.com", "**.a.com", "a.*.com", "x\\u0000y.com", "\\u00e9.com",
                         "a/b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[128];
        (void)snprintf(text, sizeof text, "{\"egress\":[{\"action\":\"deny\",\"target\":\"%s\"}]}",
                       bad[i]);
        json_t *j = json_loads(text, JSON_ALLOW_NUL, NULL);
        struct sbx_egress_policy *p = NULL;
        sbx_error *err = NULL;
        assert_true(j == NULL || sbx_egress_policy_parse(j, &p, &err) < 0);
        sbx_error_clear(&err);
        json_decref(j);
    }
    char label[80];
    memset(label, 'a', 64);
    label[64] = '\0';
    char text[256];
    (void)snprintf(text, sizeof text, "{\"egress\":[{\"action\":\"deny\",\"target\":\"%s.com\"}]}",
                   label);
    assert_non_null(strstr(parse_error(text), "not a domain name"));
}

static void
test_eval(void **state)
{
    (void)state;
    struct sbx_egress_policy *p =
        parse("{\"egress\":[{\"action\":\"deny\",\"target\":\"bad.example.com\"},"
              "{\"action\":\"allow\",\"target\":\"*.example.com\"},"
              "{\"action\":\"allow\",\"target\":\"pypi.org\"}]}");
    assert_non_null(p);
    assert_int_equal(sbx_egress_policy_eval(p, "pypi.org"), SBX_EGRESS_ALLOW);
    assert_int_equal(sbx_egress_policy_eval(p, "PYPI.ORG."), SBX_EGRESS_ALLOW);
    assert_int_equal(sbx_egress_policy_eval(p, "files.pypi.org"), SBX_EGRESS_DENY);
    assert_int_equal(sbx_egress_policy_eval(p, "a.example.com"), SBX_EGRESS_ALLOW);
    assert_int_equal(sbx_egress_policy_eval(p, "a.b.example.com"), SBX_EGRESS_ALLOW);
    assert_int_equal(sbx_egress_policy_eval(p, "example.com"), SBX_EGRESS_DENY); /* not apex */
    assert_int_equal(sbx_egress_policy_eval(p, "notexample.com"), SBX_EGRESS_DENY);
    assert_int_equal(sbx_egress_policy_eval(p, "bad.example.com"), SBX_EGRESS_DENY); /* first */
    assert_int_equal(sbx_egress_policy_eval(p, "pypi.org.evil.com"), SBX_EGRESS_DENY);
    sbx_egress_policy_free(p);
    p = parse("{\"defaultAction\":\"allow\",\"egress\":[{\"action\":\"deny\","
              "\"target\":\"*.ads.test\"}]}");
    assert_int_equal(sbx_egress_policy_eval(p, "x.ads.test"), SBX_EGRESS_DENY);
    assert_int_equal(sbx_egress_policy_eval(p, "ads.test"), SBX_EGRESS_ALLOW);
    assert_int_equal(sbx_egress_policy_eval(p, "other.test"), SBX_EGRESS_ALLOW);
    sbx_egress_policy_free(p);
}

static struct sbx_egress_policy *
rules(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    struct sbx_egress_policy *p = NULL;
    sbx_error *err = NULL;
    int r = sbx_egress_rules_parse(j, &p, &err);
    sbx_error_clear(&err);
    json_decref(j);
    return r < 0 ? NULL : p;
}

static char *
dump(const struct sbx_egress_policy *p)
{
    json_t *j = sbx_egress_policy_json(p);
    char *s = json_dumps(json_object_get(j, "egress"), JSON_COMPACT);
    json_decref(j);
    return s;
}

static void
test_patch_and_delete(void **state)
{
    (void)state;
    struct sbx_egress_policy *p = parse("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\"},"
                                        "{\"action\":\"allow\",\"target\":\"b.com\"}]}");
    assert_null(rules("[]"));
    assert_null(rules("{}"));
    assert_null(rules("[{\"action\":\"allow\",\"target\":\"1.1.1.1\"}]"));
    /* incoming first, the first of a target wins, existing ones for other targets kept */
    struct sbx_egress_policy *in = rules("[{\"action\":\"deny\",\"target\":\"b.com\"},"
                                         "{\"action\":\"allow\",\"target\":\"b.com\"},"
                                         "{\"action\":\"allow\",\"target\":\"c.com\"}]");
    assert_non_null(in);
    sbx_error *err = NULL;
    assert_int_equal(sbx_egress_policy_patch(p, in, &err), 0);
    char *s = dump(p);
    assert_string_equal(s, "[{\"action\":\"deny\",\"target\":\"b.com\"},{\"action\":\"allow\","
                           "\"target\":\"c.com\"},{\"action\":\"allow\",\"target\":\"a.com\"}]");
    free(s);
    sbx_egress_policy_free(in);
    json_t *t = json_loads("[\"A.com\", \"nothere.com\"]", 0, NULL);
    assert_int_equal(sbx_egress_policy_remove(p, t, &err), 0);
    assert_int_equal(sbx_egress_policy_remove(p, t, &err), 0); /* idempotent */
    json_decref(t);
    s = dump(p);
    assert_string_equal(s, "[{\"action\":\"deny\",\"target\":\"b.com\"},{\"action\":\"allow\","
                           "\"target\":\"c.com\"}]");
    free(s);
    const char *bad[] = {"[]", "{}", "[1]", "[\"10.0.0.1\"]"};
    for (size_t i = 0; i < 4; i++) {
        t = json_loads(bad[i], 0, NULL);
        assert_true(sbx_egress_policy_remove(p, t, &err) < 0);
        sbx_error_clear(&err);
        json_decref(t);
    }
    assert_int_equal(p->n, 2);
    sbx_egress_policy_free(p);
}

/* 10k rules are fine, one more is refused, also through a merge. */
static void
test_limits(void **state)
{
    (void)state;
    json_t *arr = json_array();
    for (int i = 0; i < SBX_EGRESS_RULES_MAX; i++) {
        char name[32];
        (void)snprintf(name, sizeof name, "h%d.example.com", i);
        (void)json_array_append_new(arr, json_pack("{s:s,s:s}", "action", "allow", "target", name));
    }
    json_t *pol = json_pack("{s:O}", "egress", arr);
    struct sbx_egress_policy *p = NULL;
    sbx_error *err = NULL;
    assert_int_equal(sbx_egress_policy_parse(pol, &p, &err), 0);
    assert_int_equal(sbx_egress_policy_eval(p, "h9999.example.com"), SBX_EGRESS_ALLOW);
    assert_int_equal(sbx_egress_policy_eval(p, "h10000.example.com"), SBX_EGRESS_DENY);
    struct sbx_egress_policy *in = rules("[{\"action\":\"allow\",\"target\":\"new.com\"}]");
    assert_true(sbx_egress_policy_patch(p, in, &err) < 0);
    assert_non_null(strstr(sbx_error_msg(err), "at most"));
    sbx_error_clear(&err);
    assert_int_equal(p->n, SBX_EGRESS_RULES_MAX); /* unchanged */
    sbx_egress_policy_free(in);
    sbx_egress_policy_free(p);
    (void)json_array_append_new(arr, json_pack("{s:s,s:s}", "action", "allow", "target", "x.com"));
    json_object_set(pol, "egress", arr);
    assert_true(sbx_egress_policy_parse(pol, &p, &err) < 0);
    sbx_error_clear(&err);
    json_decref(arr);
    json_decref(pol);
}

static void
test_dns_query(void **state)
{
    (void)state;
    uint8_t q[512];
    size_t n = sbx_dns_a_query(q, sizeof q, "Allowed.Test", 0x1234);
    assert_true(n > 12);
    struct sbx_dns_question qq;
    assert_int_equal(sbx_dns_parse_query(q, n, &qq), 0);
    assert_string_equal(qq.name, "allowed.test");
    assert_int_equal(qq.qtype, 1);
    assert_int_equal(qq.end, n);
    uint8_t out[512];
    size_t rn = sbx_dns_error_reply(out, sizeof out, q, qq.end, SBX_DNS_NXDOMAIN);
    assert_int_equal(rn, n);
    assert_int_equal(out[0], 0x12);
    assert_int_equal(out[3] & 0x0f, SBX_DNS_NXDOMAIN);
    assert_true(out[2] & 0x80);
    /* a label holding a '.' is refused: it would read as another name */
    uint8_t dot[] = {0,   1,   1,   0,   0,   1,   0,   0,   0, 0, 0, 0, 9, 'a',
                     'l', 'l', 'o', '.', 't', 'e', 's', 't', 0, 0, 1, 0, 1};
    assert_int_equal(sbx_dns_parse_query(dot, sizeof dot, &qq), -SBX_DNS_REFUSED);
    /* truncated, a response, two questions, a pointer */
    assert_int_equal(sbx_dns_parse_query(q, n - 1, &qq), -SBX_DNS_FORMERR);
    assert_int_equal(sbx_dns_parse_query(q, 11, &qq), -SBX_DNS_FORMERR);
    q[2] |= 0x80;
    assert_int_equal(sbx_dns_parse_query(q, n, &qq), -SBX_DNS_FORMERR);
    q[2] &= 0x7f;
    q[5] = 2;
    assert_int_equal(sbx_dns_parse_query(q, n, &qq), -SBX_DNS_FORMERR);
    q[5] = 1;
    q[12] = 0xc0;
    assert_int_equal(sbx_dns_parse_query(q, n, &qq), -SBX_DNS_REFUSED);
    assert_int_equal(sbx_dns_a_query(q, sizeof q, "a..b", 1), 0);
    /* an answer: allowed.test A 198.51.100.7 TTL 300 */
    uint8_t reply[512];
    n = sbx_dns_a_query(reply, sizeof reply, "allowed.test", 7);
    reply[2] = 0x81;
    reply[3] = 0x80;
    reply[7] = 1;
    const uint8_t rr[] = {0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 198, 51, 100, 7};
    memcpy(reply + n, rr, sizeof rr);
    struct sbx_dns_addr a[4];
    assert_int_equal(sbx_dns_a_records(reply, n + sizeof rr, a, 4), 1);
    assert_string_equal(a[0].addr, "198.51.100.7");
    assert_int_equal(a[0].ttl, 300);
    assert_int_equal(sbx_dns_a_records(reply, n + sizeof rr - 1, a, 4), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_defaults),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_eval),
        cmocka_unit_test(test_patch_and_delete),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_dns_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
