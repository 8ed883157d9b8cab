/*
 * config_fuzz.c - the server's config file (libconfig syntax, then sbx's checks of every key):
 * any text is parsed or refused with a message, never a crash or a leak.
 */
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "fuzz/fuzz.h"
#include "providers/providers.h"
#include "server/config.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    char *text = sbx_xstrndup((const char *)data, size);
    struct sbx_server_config cfg;
    sbx_server_config_defaults(&cfg, sbx_providers_builtin);
    sbx_error *err = NULL;
    if (sbx_server_config_parse(&cfg, text, &err) < 0 && !sbx_error_msg(err)[0])
        __builtin_trap(); /* a refusal says why */
    sbx_error_clear(&err);
    sbx_server_config_dispose(&cfg);
    free(text);
    return 0;
}
