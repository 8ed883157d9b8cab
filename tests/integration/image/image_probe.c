/*
 * image_probe.c - drives the parts of the image API the CLI does not expose, for the shell
 * tests:
 *   image_probe ROOT REF                 resolve: digest=, layer= (bottom first), env=, ...
 *   image_probe ROOT pin OWNER DIGEST    sbx_image_pin
 *   image_probe ROOT unpin OWNER         sbx_image_unpin
 *   image_probe ROOT gc                  sbx_image_gc
 * Exit 0, or 1 with "code=N msg" on stderr.
 */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "image/image.h"

static void
print_strv(const char *key, char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        printf("%s=%s\n", key, v[i]);
}

static int
resolve(struct sbx_image_store *s, const char *ref, sbx_error **err)
{
    struct sbx_image *img = NULL;
    int ret = sbx_image_resolve(&img, s, ref, err);
    if (ret < 0)
        return ret;
    printf("digest=%s\n", img->digest);
    print_strv("layer", img->layers);
    print_strv("env", img->env);
    print_strv("entrypoint", img->entrypoint);
    print_strv("cmd", img->cmd);
    printf("workdir=%s\nuser=%s\n", img->workdir ? img->workdir : "", img->user ? img->user : "");
    sbx_image_free(img);
    return 0;
}

static int
run(struct sbx_image_store *s, int argc, char **argv, sbx_error **err)
{
    if (argc == 3 && strcmp(argv[2], "gc") == 0)
        return sbx_image_gc(s, err);
    if (argc == 4 && strcmp(argv[2], "unpin") == 0)
        return sbx_image_unpin(s, argv[3], err);
    if (argc == 5 && strcmp(argv[2], "pin") == 0)
        return sbx_image_pin(s, argv[3], argv[4], err);
    if (argc == 3)
        return resolve(s, argv[2], err);
    return sbx_error_set(err, SBX_EINVAL, 0, "usage: image_probe ROOT REF|pin|unpin|gc ...");
}

int
main(int argc, char **argv)
{
    if (argc < 3) {
        fputs("usage: image_probe ROOT REF|pin OWNER DIGEST|unpin OWNER|gc\n", stderr);
        return 2;
    }
    struct sbx_image_store *s = NULL;
    sbx_autoerror sbx_error *err = NULL;
    int ret = sbx_image_store_open(&s, argv[1], &err);
    if (ret == 0)
        ret = run(s, argc, argv, &err);
    sbx_image_store_close(s);
    if (ret < 0) {
        fprintf(stderr, "code=%d %s\n", sbx_error_code(err), sbx_error_msg(err));
        return 1;
    }
    return 0;
}
