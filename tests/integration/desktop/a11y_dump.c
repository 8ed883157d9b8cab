/*
 * sbx-a11y-dump - print a desktop's accessibility tree and what it took (tests and bench only).
 *
 *   sbx-a11y-dump [--json] [--no-cache] [--no-direct] [--no-actions] [--window N] [--repeat N]
 * [--stall MS]
 * [--timeout MS]
 *                 [--max-bytes N] [-o FILE] BUS_ADDRESS
 *
 * The tree goes to stdout (or FILE); one line of stats per snapshot to stderr, as JSON:
 * {"ms":..,"connect":..,"tree":..,"details":..,"write":..,"nodes":..,"cached":..,"calls":..,
 *  "apps":..,"skipped":..,"truncated":..,"bytes":..,"note":".."}
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "desktop/a11y.h"

static int
usage(void)
{
    fprintf(stderr,
            "usage: sbx-a11y-dump [--json] [--no-cache] [--no-direct] [--no-actions] [--window N] "
            "[--repeat N] "
            "[--stall MS] [--timeout MS] [--max-bytes N] [-o FILE] BUS_ADDRESS\n");
    return 2;
}

static void
print_stats(const struct sbx_a11y_stats *st, size_t bytes)
{
    fprintf(stderr,
            "{\"ms\":%.3f,\"connect\":%.3f,\"tree\":%.3f,\"details\":%.3f,\"write\":%.3f,"
            "\"nodes\":%zu,\"cached\":%zu,\"calls\":%zu,\"apps\":%zu,\"skipped\":%zu,"
            "\"truncated\":%s,\"bytes\":%zu,\"note\":\"",
            st->ms_total, st->ms_connect, st->ms_tree, st->ms_details, st->ms_write, st->nodes,
            st->cached, st->calls, st->apps, st->apps_skipped, st->truncated ? "true" : "false",
            bytes);
    for (const char *p = st->note; *p; p++)
        fprintf(stderr, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
    fprintf(stderr, "\"}\n");
}

static int
parse_int(const char *s, long *out)
{
    char *end;
    *out = strtol(s, &end, 10);
    return *s && !*end && *out >= 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"no-cache", no_argument, NULL, 'n'},
        {"no-direct", no_argument, NULL, 'd'},
        {"no-actions", no_argument, NULL, 'a'},
        {"window", required_argument, NULL, 'w'},
        {"repeat", required_argument, NULL, 'r'},
        {"stall", required_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 't'},
        {"max-bytes", required_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    struct sbx_a11y_opts o = {0};
    long repeat = 1;
    long max_bytes = 256L << 20;
    long v = 0;
    const char *file = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        if (opt == 'j') {
            o.format = SBX_A11Y_JSON;
        } else if (opt == 'n') {
            o.no_cache = true;
        } else if (opt == 'a') {
            o.no_actions = true;
        } else if (opt == 'd') {
            o.no_direct = true;
        } else if (opt == 'o') {
            file = optarg;
        } else if (strchr("wrstb", opt) && parse_int(optarg, &v) == 0) {
            if (opt == 'w')
                o.window = (int)v;
            else if (opt == 'r')
                repeat = v;
            else if (opt == 's')
                o.stall_ms = (int)v;
            else if (opt == 't')
                o.timeout_ms = (int)v;
            else
                max_bytes = v;
        } else {
            return usage();
        }
    }
    if (optind != argc - 1)
        return usage();
    int rc = 0;
    for (long i = 0; i < repeat && rc == 0; i++) {
        sbx_autobuf struct sbx_buf out;
        sbx_buf_init(&out, (size_t)max_bytes);
        struct sbx_a11y_stats st;
        sbx_autoerror sbx_error *err = NULL;
        if (sbx_a11y_snapshot(argv[optind], &o, &out, &st, &err) < 0) {
            fprintf(stderr, "sbx-a11y-dump: %s\n", sbx_error_msg(err));
            return 1;
        }
        print_stats(&st, out.len);
        if (i + 1 < repeat)
            continue;
        FILE *f = file ? fopen(file, "we") : stdout;
        if (!f || fwrite(sbx_buf_str(&out), 1, out.len, f) != out.len || fputc('\n', f) == EOF)
            rc = 1;
        if (f && f != stdout && fclose(f) != 0)
            rc = 1;
    }
    return rc;
}
