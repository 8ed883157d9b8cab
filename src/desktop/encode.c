/*
 * encode.c - screenshots to PNG (libpng: zlib level 1 and no row filter, the fast end that
 * host-facts measured: 3-10 ms for 1280x800 instead of 22-80 ms at the defaults) and JPEG
 * (libjpeg-turbo's TurboJPEG API, straight from BGRX: ~1.5 ms).
 *
 * Tried and measured (release, 1280x800 with an xterm): zlib's Z_RLE strategy 7.3 ms against
 * 6.0 ms; libdeflate level 1 on the whole image (its API has no streaming) 10.9 ms, most of
 * it the 3 MB row buffer and output it needs. Deflate itself is most of the 6 ms.
 */
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "common/xalloc.h"
#include "desktop/desktop_int.h"

struct png_sink {
    struct sbx_buf *out;
    bool full;
};

static void
png_write(png_structp png, png_bytep data, png_size_t len)
{
    struct png_sink *s = png_get_io_ptr(png);
    if (!s->full && sbx_buf_append(s->out, data, len, NULL) < 0)
        s->full = true;
}

static void
png_flush(png_structp png)
{
    (void)png;
}

int
desk_encode_png(const struct desk_image *im, struct sbx_buf *out, sbx_error **err)
{
    const uint8_t *bgrx = im->px;
    unsigned w = im->w;
    unsigned h = im->h;
    size_t stride = im->stride;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return sbx_error_set(err, SBX_ENOMEM, 0, "png: out of memory");
    }
    struct png_sink sink = {.out = out};
    uint8_t *row = sbx_xmalloc((size_t)w * 3); /* set before setjmp, never changed after */
    /* libpng reports errors by longjmp; nothing here owns memory across it but png, info and
     * row. */
    if (setjmp(png_jmpbuf(png))) { // NOLINT(cert-err52-cpp): libpng's error protocol
        png_destroy_write_struct(&png, &info);
        free(row);
        return sbx_error_set(err, SBX_EIO, 0, "png: encoding failed");
    }
    png_set_write_fn(png, &sink, png_write, png_flush);
    png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(png, 1);
    png_set_filter(png, 0, PNG_FILTER_NONE);
    png_write_info(png, info);
    /* BGRX to RGB here, a row at a time: 6.0 ms instead of 6.6 ms for 1280x800 with
     * libpng's own bgr + filler transforms (its generic per-row transform path). */
    for (unsigned y = 0; y < h; y++) {
        const uint8_t *src = bgrx + (size_t)y * stride;
        uint8_t *dst = row;
        for (unsigned x = 0; x < w; x++, src += 4, dst += 3) {
            dst[0] = src[2];
            dst[1] = src[1];
            dst[2] = src[0];
        }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    if (sink.full)
        return sbx_error_set(err, SBX_ELIMIT, 0, "png: larger than the output limit");
    return 0;
}

int
desk_encode_jpeg(const struct desk_image *im, int quality, struct sbx_buf *out, sbx_error **err)
{
    const uint8_t *bgrx = im->px;
    unsigned w = im->w;
    unsigned h = im->h;
    size_t stride = im->stride;
    tjhandle tj = tjInitCompress();
    if (!tj)
        return sbx_error_set(err, SBX_ENOMEM, 0, "jpeg: cannot initialise");
    unsigned char *jpeg = NULL;
    unsigned long len = 0;
    int r = tjCompress2(tj, bgrx, (int)w, (int)stride, (int)h, TJPF_BGRX, &jpeg, &len, TJSAMP_420,
                        quality, TJFLAG_FASTDCT);
    if (r == 0 && sbx_buf_append(out, jpeg, len, NULL) < 0)
        r = -2;
    tjFree(jpeg);
    tjDestroy(tj);
    if (r == -2)
        return sbx_error_set(err, SBX_ELIMIT, 0, "jpeg: larger than the output limit");
    if (r != 0)
        return sbx_error_set(err, SBX_EIO, 0, "jpeg: encoding failed");
    return 0;
}
