/*
 * cmd_serve.c - `sbx serve`: run the control plane in the foreground.
 */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "common/log.h"
#include "providers/providers.h"
#include "server/server.h"

int
sbx_cmd_serve(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"state-dir", required_argument, NULL, 's'},
        {"config", required_argument, NULL, 'c'},
        {"log-format", required_argument, NULL, 'f'},
        {0},
    };
    struct sbx_server_opts so = {.factories = sbx_providers_builtin};
    enum sbx_log_format format = SBX_LOG_JSON;
    int c = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "l:s:c:f:", opts, NULL)) != -1) {
        if (c == 'f' && sbx_log_parse_format(optarg, &format) < 0) {
            fprintf(stderr, "sbx serve: --log-format must be `text` or `json`, not `%s`\n", optarg);
            return SBX_EXIT_USAGE;
        } else if (c == 'f')
            continue;
        if (c == 'l')
            so.listen = optarg;
        else if (c == 's')
            so.state_dir = optarg;
        else if (c == 'c')
            so.config_path = optarg;
        else {
            fprintf(stderr,
                    "sbx serve: unknown option or missing value `%s`; see `sbx serve --help`\n",
                    argv[optind - 1]);
            return SBX_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "sbx serve: unexpected argument `%s`\n", argv[optind]);
        return SBX_EXIT_USAGE;
    }
    sbx_log_init("sbx", sbx_log_level_current, format);
    sbx_error *err = NULL;
    if (sbx_server_run(&so, &err) < 0) {
        fprintf(stderr, "sbx serve: %s\n", sbx_error_msg(err));
        sbx_error_clear(&err);
        return SBX_EXIT_FAIL;
    }
    return SBX_EXIT_OK;
}
