/*
 * record.c - screen recordings: ffmpeg's x11grab on the desktop's display, H.264 in MP4
 * (what OSWorld's /start_recording runs), as one more supervised process of the desktop.
 * Stopping sends SIGINT, on which ffmpeg finishes the file (its moov atom) and exits; the
 * owner learns of the exit through sbx_desktop_child_exited and then takes the file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "desktop/desktop_int.h"

int
sbx_desktop_record_start(struct sbx_desktop *d, int fps, sbx_error **err)
{
    if (desk_need_x(d, err) < 0)
        return -SBX_ECONFLICT;
    if (d->pid[P_RECORDER] > 0)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "a recording is running already");
    if (fps < 1 || fps > 60)
        return sbx_error_set(err, SBX_EINVAL, 0, "fps must be 1-60");
    free(d->rec_path);
    d->rec_path =
        sbx_xasprintf("%s/recording-%llu.mp4", d->runtime_dir, (unsigned long long)sbx_now_ms());
    char size[32];
    char rate[8];
    char disp[16];
    snprintf(size, sizeof size, "%ux%u", d->opts.width, d->opts.height);
    snprintf(rate, sizeof rate, "%d", fps);
    snprintf(disp, sizeof disp, ":%d", d->display);
    /* ultrafast + yuv420p: cheap to make while the agent works, playable everywhere */
    char *argv[] = {"ffmpeg",      "-nostdin",    "-loglevel", "error",      "-f",
                    "x11grab",     "-draw_mouse", "1",         "-framerate", rate,
                    "-video_size", size,          "-i",        disp,         "-c:v",
                    "libx264",     "-preset",     "ultrafast", "-pix_fmt",   "yuv420p",
                    "-movflags",   "+faststart",  d->rec_path, NULL};
    d->rec_exited = false;
    d->rec_status = 0;
    int r = desk_spawn(d, P_RECORDER, argv, -1, err);
    if (r < 0)
        return sbx_error_wrap(err, "start the recording (ffmpeg with x11grab and libx264)");
    d->rec_start_ms = sbx_now_ms();
    return 0;
}

bool
sbx_desktop_recording(const struct sbx_desktop *d)
{
    return d && d->pid[P_RECORDER] > 0;
}

int
sbx_desktop_record_stop(struct sbx_desktop *d, sbx_error **err)
{
    if (d->pid[P_RECORDER] <= 0)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "no recording is running");
    /* the process group: ffmpeg is the leader of its own session */
    if (kill(-d->pid[P_RECORDER], SIGINT) < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "stop the recorder");
    return 0;
}

void
sbx_desktop_record_kill(struct sbx_desktop *d)
{
    if (d->pid[P_RECORDER] > 0)
        (void)kill(-d->pid[P_RECORDER], SIGKILL);
}

/* Why the recorder failed, from its log (the first line ffmpeg wrote). */
static void
log_reason(const struct sbx_desktop *d, char *buf, size_t n)
{
    buf[0] = '\0';
    sbx_autofree char *log = sbx_xasprintf("%s.log", d->rec_path);
    sbx_autofree char *text = NULL;
    if (sbx_read_file(log, 4096, &text, NULL, NULL) == 0 && text) {
        text[strcspn(text, "\n")] = '\0';
        snprintf(buf, n, ": %s", text);
    }
}

int
sbx_desktop_record_take(struct sbx_desktop *d, char **path, double *seconds, sbx_error **err)
{
    *path = NULL;
    if (!d->rec_exited || !d->rec_path)
        return sbx_error_set(err, SBX_ECONFLICT, 0, "no finished recording");
    d->rec_exited = false;
    int st = d->rec_status;
    /* 255: ffmpeg's exit after SIGINT on some builds; 0 the usual one */
    bool ok = (WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 255)) &&
              access(d->rec_path, R_OK) == 0;
    char why[512];
    log_reason(d, why, sizeof why);
    sbx_autofree char *log = sbx_xasprintf("%s.log", d->rec_path);
    (void)unlink(log);
    if (!ok) {
        (void)unlink(d->rec_path);
        return sbx_error_set(err, SBX_EIO, 0, "the recorder failed (%s %d)%s",
                             WIFSIGNALED(st) ? "signal" : "status",
                             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), why);
    }
    *seconds = (double)(sbx_now_ms() - d->rec_start_ms) / 1000.0;
    *path = d->rec_path;
    d->rec_path = NULL;
    return 0;
}
