/*
 * files.h - shared helpers of the files endpoints.
 */
#ifndef SBX_EXECD_FILES_H
#define SBX_EXECD_FILES_H

#include <stdbool.h>
#include <sys/stat.h>

#include <jansson.h>

#include "execd/execd.h"

/* FileInfo object for path (st from lstat). */
json_t *execd_file_info(const char *path, const struct stat *st);
/* Validate a Permission object {owner?, group?, mode?}; -1 with *why when malformed. */
int execd_perm_check(json_t *perm, const char **why);
/* Apply a (checked) Permission object; -1 with errno on failure. */
int execd_perm_apply(const char *path, json_t *perm);
/* Drop the uid/gid name cache (e.g. after /etc/passwd changed). */
void execd_names_forget(void);

/* Normalise a client path or answer 400 and return NULL. Caller frees. */
char *execd_req_path(struct evhttp_request *req, const char *raw);
/* Answer an errno from a file operation: ENOENT 404 FILE_NOT_FOUND, EINVAL-like 400, else 500. */
void execd_reply_errno(struct evhttp_request *req, int err, const char *what, const char *path);

#endif
