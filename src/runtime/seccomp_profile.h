/*
 * seccomp_profile.h - the default seccomp profile as rules, and its compilation to BPF with
 * libseccomp. Used at build time (seccomp_gen.c) and by tests, never by the runtime, which
 * embeds the generated BPF (see security.c).
 */
#ifndef SBX_RUNTIME_SECCOMP_PROFILE_H
#define SBX_RUNTIME_SECCOMP_PROFILE_H

#include <linux/filter.h>
#include <stddef.h>

/* The denied syscalls with their errno (for docs and tests). */
struct sbx_seccomp_rule {
    const char *name;
    int err;
};
extern const struct sbx_seccomp_rule sbx_seccomp_denied[];
extern const size_t sbx_seccomp_n_denied;

/* Compile the profile; out->filter is malloc'ed. Returns 0 or -errno. */
int sbx_seccomp_profile_compile(struct sock_fprog *out);
/* The init's profile (`sbx run`'s PID 1 once its command runs): only these syscalls, every
 * other one EPERM. Same contract. */
extern const char *const sbx_seccomp_init_allowed[];
extern const size_t sbx_seccomp_n_init_allowed;
int sbx_seccomp_init_compile(struct sock_fprog *out);

#endif
