/*
 * spec.c - the desktop spec of `--desktop` and extensions["sbx.desktop"]: kept apart from the
 * desktop library so the server can check a create's spec without linking X.
 */
#include <stdio.h>
#include <string.h>

#include "desktop/desktop.h"

int
sbx_desktop_parse_spec(const char *spec, struct sbx_desktop_opts *o, sbx_error **err)
{
    if (!spec || !*spec || strcmp(spec, "true") == 0 || strcmp(spec, "1") == 0)
        return 0;
    const char *p = spec;
    if (*p >= '0' && *p <= '9') {
        unsigned w = 0;
        unsigned h = 0;
        unsigned depth = 0;
        int used = 0;
        int n = sscanf(p, "%ux%u%n", &w, &h, &used);
        if (n != 2)
            return sbx_error_set(err, SBX_EINVAL, 0, "desktop `%s`: want WxH[xD]", spec);
        p += used;
        if (*p == 'x') {
            if (sscanf(p + 1, "%u%n", &depth, &used) != 1)
                return sbx_error_set(err, SBX_EINVAL, 0, "desktop `%s`: want WxH[xD]", spec);
            p += used + 1;
        }
        if (w < 64 || h < 64 || w > 8192 || h > 8192)
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "desktop `%s`: width and height must be 64-8192", spec);
        if (depth && depth != 24) /* 32 bits per pixel: what the capture reads */
            return sbx_error_set(err, SBX_EINVAL, 0, "desktop `%s`: depth must be 24", spec);
        o->width = w;
        o->height = h;
        if (depth)
            o->depth = depth;
    }
    while (*p == ',') {
        p++;
        size_t n = strcspn(p, ",");
        if (n == 7 && strncmp(p, "wm=none", 7) == 0)
            o->no_wm = true;
        else if (n == 10 && strncmp(p, "wm=openbox", 10) == 0)
            o->no_wm = false;
        else
            return sbx_error_set(err, SBX_EINVAL, 0,
                                 "desktop `%s`: unknown option `%.*s` (wm=openbox|none)", spec,
                                 (int)n, p);
        p += n;
    }
    if (*p)
        return sbx_error_set(err, SBX_EINVAL, 0, "desktop `%s`: want WxH[xD][,wm=openbox|none]",
                             spec);
    return 0;
}
