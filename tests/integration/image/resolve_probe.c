/*
 * resolve_probe.c - prints what sbx_image_resolve() answers, for the shell tests:
 *   resolve_probe ROOT REF   -> digest=, layer= (bottom first), env=, entrypoint=, cmd=, ...
 * Exit 0, or 1 with "code=N msg" on stderr.
 */
#include <stdio.h>

#include "common/error.h"
#include "image/image.h"

static void
print_strv(const char *key, char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        printf("%s=%s\n", key, v[i]);
}

int
main(int argc, char **argv)
{
    if (argc != 3) {
        fputs("usage: resolve_probe ROOT REF\n", stderr);
        return 2;
    }
    struct sbx_image_store *s = NULL;
    struct sbx_image *img = NULL;
    sbx_autoerror sbx_error *err = NULL;
    if (sbx_image_store_open(&s, argv[1], &err) < 0 ||
        sbx_image_resolve(&img, s, argv[2], &err) < 0) {
        fprintf(stderr, "code=%d %s\n", sbx_error_code(err), sbx_error_msg(err));
        sbx_image_store_close(s);
        return 1;
    }
    printf("digest=%s\n", img->digest);
    print_strv("layer", img->layers);
    print_strv("env", img->env);
    print_strv("entrypoint", img->entrypoint);
    print_strv("cmd", img->cmd);
    printf("workdir=%s\nuser=%s\n", img->workdir ? img->workdir : "", img->user ? img->user : "");
    sbx_image_free(img);
    sbx_image_store_close(s);
    return 0;
}
