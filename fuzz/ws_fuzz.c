/*
 * ws_fuzz.c - the live view's WebSocket frame parser and the published-ports spec: whatever
 * a browser (or an attacker) sends, a parsed frame lies inside the input and respects the
 * limit, and a spec that parses holds valid, distinct ports.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "server/publish.h"
#include "common/websocket.h"

static void
frames(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return;
    memcpy(buf, data, size);
    size_t off = 0;
    const size_t max = 4096;
    for (;;) {
        struct sbx_ws_frame f;
        const char *why = NULL;
        long used = sbx_ws_parse(buf + off, size - off, max, &f, &why);
        if (used <= 0) {
            if (used < 0 && !why)
                __builtin_trap(); /* a refusal always says why */
            break;
        }
        if ((size_t)used > size - off || f.len > max || f.payload < buf + off ||
            f.payload + f.len > buf + off + (size_t)used)
            __builtin_trap();
        off += (size_t)used;
    }
    free(buf);
}

static void
spec(const uint8_t *data, size_t size)
{
    char s[256];
    size_t k = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, k);
    s[k] = '\0';
    struct sbx_publish_spec p;
    sbx_error *err = NULL;
    if (sbx_publish_parse(s, &p, &err) == 0) {
        if (p.n < 1 || p.n > SBX_PUBLISH_MAX)
            __builtin_trap();
        for (int i = 0; i < p.n; i++) {
            if (p.port[i] < 1 || p.port[i] > 65535 || p.host_port[i] < 0 || p.host_port[i] > 65535)
                __builtin_trap();
            for (int j = 0; j < i; j++) {
                if (p.port[j] == p.port[i])
                    __builtin_trap();
            }
        }
    }
    sbx_error_clear(&err);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frames(data, size);
    spec(data, size);
    return 0;
}
