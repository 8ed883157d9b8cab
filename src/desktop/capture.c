/*
 * capture.c - screenshots: an MIT-SHM grab on the desktop's connection (the server writes the
 * pixels into memory we share with it: ~0.1 ms for 1280x800, against ~4 ms for GetImage over
 * the socket), the cursor drawn in (XFixes: OSWorld's screenshots show it), a region, a
 * scale, then PNG or JPEG (encode.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xcb/shm.h>
#include <xcb/xcb.h>
#include <xcb/xfixes.h>

#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/desktop_int.h"

void
desk_shm_release(struct sbx_desktop *d)
{
    if (d->shm_ok && d->conn)
        xcb_shm_detach(d->conn, d->shm_seg);
    if (d->shm_mem)
        (void)munmap(d->shm_mem, d->shm_size);
    d->shm_mem = NULL;
    d->shm_size = 0;
    d->shm_ok = false;
}

/* A shared segment of at least size bytes, attached to the server by fd (memfd: no SysV
 * segment that outlives us). */
static bool
shm_ready(struct sbx_desktop *d, size_t size)
{
    if (d->shm_ok && d->shm_size >= size)
        return true;
    desk_shm_release(d);
    xcb_shm_query_version_reply_t *v =
        xcb_shm_query_version_reply(d->conn, xcb_shm_query_version(d->conn), NULL);
    bool fd_ok = v && (v->major_version > 1 || (v->major_version == 1 && v->minor_version >= 2));
    free(v);
    if (!fd_ok)
        return false;
    int fd = memfd_create("sbx-shot", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
        if (fd >= 0)
            (void)close(fd);
        return false;
    }
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
        (void)close(fd);
        return false;
    }
    d->shm_seg = xcb_generate_id(d->conn);
    /* xcb sends (and closes) fd with the request */
    xcb_generic_error_t *e =
        xcb_request_check(d->conn, xcb_shm_attach_fd_checked(d->conn, d->shm_seg, fd, 1));
    if (e) {
        free(e);
        (void)munmap(mem, size);
        return false;
    }
    d->shm_mem = mem;
    d->shm_size = size;
    d->shm_ok = true;
    return true;
}

struct rect {
    int x, y;
    unsigned w, h;
};

/* Pixels read from the server: in the shared segment, or in a reply to free (owned). */
struct pixels {
    uint8_t *px; /* BGRX, 4 bytes each, rows of w */
    void *owned;
};

/* The screen's pixels of the rectangle. */
static int
grab(struct sbx_desktop *d, const struct rect *rc, struct pixels *out, sbx_error **err)
{
    int x = rc->x;
    int y = rc->y;
    unsigned w = rc->w;
    unsigned h = rc->h;
    size_t size = (size_t)w * h * 4;
    out->owned = NULL;
    if (shm_ready(d, size)) {
        xcb_shm_get_image_reply_t *r = xcb_shm_get_image_reply(
            d->conn,
            xcb_shm_get_image(d->conn, d->root, (int16_t)x, (int16_t)y, (uint16_t)w, (uint16_t)h,
                              ~0U, XCB_IMAGE_FORMAT_Z_PIXMAP, d->shm_seg, 0),
            NULL);
        if (r) {
            free(r);
            out->px = d->shm_mem;
            return 0;
        }
        desk_shm_release(d); /* fall back below */
    }
    xcb_get_image_reply_t *r =
        xcb_get_image_reply(d->conn,
                            xcb_get_image(d->conn, XCB_IMAGE_FORMAT_Z_PIXMAP, d->root, (int16_t)x,
                                          (int16_t)y, (uint16_t)w, (uint16_t)h, ~0U),
                            NULL);
    if (!r || (size_t)xcb_get_image_data_length(r) < size) {
        free(r);
        return sbx_error_set(err, SBX_EIO, 0, "read the screen's pixels");
    }
    out->px = xcb_get_image_data(r);
    out->owned = r;
    return 0;
}

/* The cursor's ARGB image (premultiplied), alpha-blended at its place (region origin ox, oy). */
static void
draw_cursor(struct sbx_desktop *d, uint8_t *pix, const struct rect *rc)
{
    unsigned w = rc->w;
    unsigned h = rc->h;
    int ox = rc->x;
    int oy = rc->y;
    xcb_xfixes_query_version_reply_t *v =
        xcb_xfixes_query_version_reply(d->conn, xcb_xfixes_query_version(d->conn, 4, 0), NULL);
    free(v);
    if (!v)
        return;
    xcb_xfixes_get_cursor_image_reply_t *c =
        xcb_xfixes_get_cursor_image_reply(d->conn, xcb_xfixes_get_cursor_image(d->conn), NULL);
    if (!c)
        return;
    const uint32_t *src = xcb_xfixes_get_cursor_image_cursor_image(c);
    int cx = c->x - c->xhot - ox;
    int cy = c->y - c->yhot - oy;
    for (int j = 0; j < c->height; j++) {
        int y = cy + j;
        if (y < 0 || y >= (int)h)
            continue;
        for (int i = 0; i < c->width; i++) {
            int x = cx + i;
            if (x < 0 || x >= (int)w)
                continue;
            uint32_t p = src[(size_t)j * c->width + (size_t)i];
            uint32_t a = p >> 24;
            if (!a)
                continue;
            uint8_t *dst = pix + ((size_t)y * w + (size_t)x) * 4;
            for (int k = 0; k < 3; k++) { /* B, G, R; src is premultiplied */
                uint32_t s = (p >> (8 * k)) & 0xff;
                dst[k] = (uint8_t)(s + dst[k] * (255 - a) / 255);
            }
        }
    }
    free(c);
}

/* The mean of a box of BGRX pixels into o. */
static void
box_mean(const uint8_t *src, unsigned w, const struct rect *box, uint8_t *o)
{
    uint32_t sum[3] = {0, 0, 0};
    for (unsigned y = (unsigned)box->y; y < (unsigned)box->y + box->h; y++) {
        const uint8_t *row = src + ((size_t)y * w + (size_t)box->x) * 4;
        for (unsigned x = 0; x < box->w; x++, row += 4) {
            sum[0] += row[0];
            sum[1] += row[1];
            sum[2] += row[2];
        }
    }
    uint32_t n = box->w * box->h;
    for (int k = 0; k < 3; k++)
        o[k] = (uint8_t)(sum[k] / n);
    o[3] = 0xff;
}

/* Box-filter downscale of BGRX w x h into a new w2 x h2 buffer. */
static uint8_t *
downscale(const uint8_t *src, unsigned w, unsigned h, unsigned w2, unsigned h2)
{
    uint8_t *dst = sbx_xmalloc((size_t)w2 * h2 * 4);
    for (unsigned y2 = 0; y2 < h2; y2++) {
        unsigned y0 = (unsigned)((uint64_t)y2 * h / h2);
        unsigned y1 = (unsigned)((uint64_t)(y2 + 1) * h / h2);
        for (unsigned x2 = 0; x2 < w2; x2++) {
            unsigned x0 = (unsigned)((uint64_t)x2 * w / w2);
            unsigned x1 = (unsigned)((uint64_t)(x2 + 1) * w / w2);
            struct rect box = {(int)x0, (int)y0, x1 > x0 ? x1 - x0 : 1, y1 > y0 ? y1 - y0 : 1};
            box_mean(src, w, &box, dst + ((size_t)y2 * w2 + x2) * 4);
        }
    }
    return dst;
}

static int
region(struct sbx_desktop *d, const struct sbx_shot_opts *o, struct rect *rc, sbx_error **err)
{
    unsigned sw = 0;
    unsigned sh = 0;
    if (sbx_desktop_screen_size(d, &sw, &sh, err) < 0)
        return -SBX_EIO;
    rc->x = o->x;
    rc->y = o->y;
    rc->w = o->w ? (unsigned)o->w : sw;
    rc->h = o->h ? (unsigned)o->h : sh;
    if (o->x < 0 || o->y < 0 || o->w < 0 || o->h < 0 || (uint64_t)rc->x + rc->w > sw ||
        (uint64_t)rc->y + rc->h > sh || !rc->w || !rc->h)
        return sbx_error_set(err, SBX_EINVAL, 0,
                             "region %d,%d %dx%d is not inside the %ux%u screen", o->x, o->y, o->w,
                             o->h, sw, sh);
    return 0;
}

int
sbx_desktop_screenshot(struct sbx_desktop *d, const struct sbx_shot_opts *o, struct sbx_buf *out,
                       struct sbx_shot_stats *st, sbx_error **err)
{
    struct sbx_shot_stats local;
    st = st ? st : &local;
    memset(st, 0, sizeof *st);
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    if (o->scale < 0 || o->scale > 1 || (o->jpeg && (o->quality < 0 || o->quality > 100)))
        return sbx_error_set(err, SBX_EINVAL, 0, "scale must be in (0, 1] and quality in 1-100");
    struct rect rc = {0};
    if (region(d, o, &rc, err) < 0)
        return -SBX_EINVAL;
    uint64_t t = sbx_now_ns();
    struct pixels px = {0};
    if (grab(d, &rc, &px, err) < 0)
        return -SBX_EIO;
    if (!px.px)
        return sbx_error_set(err, SBX_EIO, 0, "no pixels read");
    st->ms_grab = (double)(sbx_now_ns() - t) / 1e6;
    t = sbx_now_ns();
    if (!o->no_cursor)
        draw_cursor(d, px.px, &rc);
    st->ms_cursor = (double)(sbx_now_ns() - t) / 1e6;
    t = sbx_now_ns();
    uint8_t *scaled = NULL;
    struct desk_image im = {.px = px.px, .w = rc.w, .h = rc.h};
    if (o->scale > 0 && o->scale < 1) {
        im.w = (unsigned)(rc.w * o->scale + 0.5);
        im.h = (unsigned)(rc.h * o->scale + 0.5);
        im.w = im.w ? im.w : 1;
        im.h = im.h ? im.h : 1;
        scaled = downscale(px.px, rc.w, rc.h, im.w, im.h);
        im.px = scaled;
    }
    im.stride = (size_t)im.w * 4;
    st->ms_scale = (double)(sbx_now_ns() - t) / 1e6;
    t = sbx_now_ns();
    int r = o->jpeg ? desk_encode_jpeg(&im, o->quality ? o->quality : 80, out, err)
                    : desk_encode_png(&im, out, err);
    st->ms_encode = (double)(sbx_now_ns() - t) / 1e6;
    st->width = im.w;
    st->height = im.h;
    free(scaled);
    free(px.owned);
    return r;
}
