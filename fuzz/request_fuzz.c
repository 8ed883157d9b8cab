/*
 * request_fuzz.c - request bodies: RunCommandRequest validation and Permission objects.
 */
#include <string.h>

#include <jansson.h>

#include "execd/files.h"
#include "execd/proc.h"
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *j = json_loadb((const char *)data, size, 0, &jerr);
    if (!j)
        return 0;
    struct execd_cmd_req req;
    char msg[256];
    if (execd_cmd_req_parse(&req, j, msg, sizeof(msg)) == 0) {
        if (!req.command || !req.command[0] || (req.has_gid && !req.has_uid))
            __builtin_trap(); /* accepted something invalid */
    }
    const char *key;
    json_t *v;
    const char *why = NULL;
    json_object_foreach (j, key, v)
        (void)execd_perm_check(v, &why);
    json_decref(j);
    return 0;
}
