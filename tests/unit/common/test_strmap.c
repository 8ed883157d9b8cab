#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/strmap.h"

static void
test_put_get_del(void **state)
{
    (void)state;
    struct sbx_strmap m;
    sbx_strmap_init(&m);
    int a = 1;
    int b = 2;
    assert_null(sbx_strmap_get(&m, "x"));
    assert_null(sbx_strmap_del(&m, "x"));
    assert_null(sbx_strmap_put(&m, "x", &a));
    assert_ptr_equal(sbx_strmap_get(&m, "x"), &a);
    assert_ptr_equal(sbx_strmap_put(&m, "x", &b), &a); /* replace */
    assert_int_equal(sbx_strmap_count(&m), 1);
    assert_ptr_equal(sbx_strmap_get(&m, "x"), &b);
    assert_null(sbx_strmap_get(&m, "y"));
    assert_ptr_equal(sbx_strmap_del(&m, "x"), &b);
    assert_null(sbx_strmap_get(&m, "x"));
    assert_int_equal(sbx_strmap_count(&m), 0);
    sbx_strmap_free(&m);
}

static void
test_many_grow_and_remove(void **state)
{
    (void)state;
    enum {
        N = 20000
    };
    static int vals[N];
    struct sbx_strmap m;
    sbx_strmap_init(&m);
    char key[64];
    for (int i = 0; i < N; i++) {
        (void)snprintf(key, sizeof key, "%08x-sandbox-%d", (unsigned)i * 2654435761U, i);
        vals[i] = i;
        assert_null(sbx_strmap_put(&m, key, &vals[i]));
    }
    assert_int_equal(sbx_strmap_count(&m), N);
    for (int i = 0; i < N; i += 2) { /* every other one goes */
        (void)snprintf(key, sizeof key, "%08x-sandbox-%d", (unsigned)i * 2654435761U, i);
        assert_ptr_equal(sbx_strmap_del(&m, key), &vals[i]);
    }
    assert_int_equal(sbx_strmap_count(&m), N / 2);
    for (int i = 0; i < N; i++) {
        (void)snprintf(key, sizeof key, "%08x-sandbox-%d", (unsigned)i * 2654435761U, i);
        int *v = sbx_strmap_get(&m, key);
        if (i % 2)
            assert_true(v && *v == i);
        else
            assert_null(v);
    }
    sbx_strmap_free(&m);
    assert_int_equal(sbx_strmap_count(&m), 0);
    assert_null(sbx_strmap_get(&m, "anything")); /* usable (empty) after free */
}

static void
sum_cb(const char *key, void *val, void *ud)
{
    assert_true(strncmp(key, "k", 1) == 0);
    *(long *)ud += *(int *)val;
}

static void
test_each(void **state)
{
    (void)state;
    static int vals[100];
    struct sbx_strmap m;
    sbx_strmap_init(&m);
    long sum = 0;
    sbx_strmap_each(&m, sum_cb, &sum); /* empty: no call */
    assert_int_equal(sum, 0);
    char key[16];
    for (int i = 0; i < 100; i++) {
        vals[i] = i;
        (void)snprintf(key, sizeof key, "k%d", i);
        (void)sbx_strmap_put(&m, key, &vals[i]);
    }
    sbx_strmap_each(&m, sum_cb, &sum);
    assert_int_equal(sum, 4950);
    sbx_strmap_free(&m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_del),
        cmocka_unit_test(test_many_grow_and_remove),
        cmocka_unit_test(test_each),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
