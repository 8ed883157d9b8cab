/*
 * state.c - the per-sandbox record <run_dir>/<id>/state.json.
 *
 * Written (temp file + rename) before each host-side resource is created, so that a destroy
 * after a crash removes exactly what exists. No fsync: the record only has to survive the
 * caller's crash, and a machine crash takes the cgroups and processes with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "common/xalloc.h"
#include "runtime/internal.h"

static const char *const role_key[SBX_CG_NROLES] = {
    [SBX_CG_MEMORY] = "memory",   [SBX_CG_PIDS] = "pids",       [SBX_CG_CPU] = "cpu",
    [SBX_CG_CPUACCT] = "cpuacct", [SBX_CG_FREEZER] = "freezer",
};

static json_t *
state_to_json(const struct sbx_state *st)
{
    json_t *cg = json_object();
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        if (st->cgroups[r])
            json_object_set_new(cg, role_key[r], json_string(st->cgroups[r]));
    }
    return json_pack("{s:s, s:i, s:i, s:I, s:s?, s:o, s:b, s:b, s:i, s:I}", "id", st->id, "owner",
                     (int)st->owner, "pid", (int)st->pid, "start_time", (json_int_t)st->start_time,
                     "cgroup_backend", st->cgroup_backend, "cgroups", cg, "lease", st->lease,
                     "upper", st->upper, "net", st->net, "memory_limit",
                     (json_int_t)st->memory_limit);
}

static int
write_no_sync(const char *path, const char *data, sbx_error **err)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    sbx_autoclose int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return sbx_error_set(err, SBX_EGENERIC, errno, "create `%s`", tmp);
    if (sbx_write_all(fd, data, strlen(data)) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        (void)unlink(tmp);
        return sbx_error_set(err, SBX_EGENERIC, e, "write `%s`", path);
    }
    return 0;
}

int
sbx_state_write(const char *dir, const struct sbx_state *st, sbx_error **err)
{
    json_t *j = state_to_json(st);
    if (!j)
        return sbx_error_set(err, SBX_EGENERIC, 0, "encode state of `%s`", st->id);
    sbx_autofree char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    sbx_autofree char *path = sbx_xasprintf("%s/state.json", dir);
    return write_no_sync(path, text, err);
}

static int
state_from_json(struct sbx_state *st, json_t *j, sbx_error **err)
{
    const char *id = NULL;
    const char *backend = NULL;
    json_t *cg = NULL;
    int pid = 0;
    int owner = 0;
    int lease = 0;
    int upper = 0;
    json_int_t start = 0;
    json_int_t mem = 0;
    json_error_t je;
    /* `upper` is absent from records written before disk-backed layers existed (tmpfs). */
    if (json_unpack_ex(j, &je, 0, "{s:s, s?i, s:i, s:I, s?s, s:o, s:b, s?b, s:i, s?I}", "id", &id,
                       "owner", &owner, "pid", &pid, "start_time", &start, "cgroup_backend",
                       &backend, "cgroups", &cg, "lease", &lease, "upper", &upper, "net", &st->net,
                       "memory_limit", &mem) < 0)
        return sbx_error_set(err, SBX_EINVAL, 0, "bad state record: %s", je.text);
    if (strlen(id) >= sizeof st->id)
        return sbx_error_set(err, SBX_EINVAL, 0, "bad state record: id too long");
    memcpy(st->id, id, strlen(id) + 1);
    st->pid = pid;
    st->owner = owner;
    st->start_time = (uint64_t)start;
    st->lease = lease;
    st->upper = upper;
    st->memory_limit = (uint64_t)mem;
    st->cgroup_backend = backend ? sbx_xstrdup(backend) : NULL;
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        const char *v = json_string_value(json_object_get(cg, role_key[r]));
        st->cgroups[r] = v ? sbx_xstrdup(v) : NULL;
    }
    return 0;
}

int
sbx_state_read(struct sbx_state *st, const char *dir, sbx_error **err)
{
    memset(st, 0, sizeof *st);
    sbx_autofree char *path = sbx_xasprintf("%s/state.json", dir);
    sbx_autofree char *text = NULL;
    int ret = sbx_read_file(path, 1 << 20, &text, NULL, err);
    if (ret < 0)
        return ret;
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        return sbx_error_set(err, SBX_EINVAL, 0, "parse `%s`: %s", path, je.text);
    ret = state_from_json(st, j, err);
    json_decref(j);
    return ret;
}

void
sbx_state_release(struct sbx_state *st)
{
    free(st->cgroup_backend);
    st->cgroup_backend = NULL;
    for (int r = 0; r < SBX_CG_NROLES; r++) {
        free(st->cgroups[r]);
        st->cgroups[r] = NULL;
    }
}

uint64_t
sbx_proc_start_time(pid_t pid)
{
    char path[64];
    char buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    sbx_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* comm (field 2) may hold spaces and parens: count fields after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p += 2; /* field 3: a zombie (or dead) init counts as gone, whoever reaps it later */
    if (*p == 'Z' || *p == 'X')
        return 0;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        p = p ? p + 1 : NULL;
    }
    return p ? strtoull(p, NULL, 10) : 0;
}
