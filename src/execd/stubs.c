/*
 * stubs.c - endpoints not written yet.
 */
#include "execd/execd.h"
#include "execd/upload.h"

#define STUB(fn)                                                             \
    void fn(struct execd *ex, struct evhttp_request *req)                    \
    {                                                                        \
        (void)ex;                                                            \
        execd_reply_error(req, 501, "NOT_SUPPORTED", "not implemented yet"); \
    }
STUB(execd_files_info)
STUB(execd_files_remove)
STUB(execd_files_permissions)
STUB(execd_files_move)
STUB(execd_files_search)
STUB(execd_files_replace)
STUB(execd_files_download)
STUB(execd_dirs_list)
STUB(execd_dirs_create)
STUB(execd_dirs_remove)
STUB(execd_files_upload)
STUB(execd_metrics_get)
STUB(execd_metrics_watch)
void
execd_metrics_free_all(struct execd *ex)
{
    (void)ex;
}
void
execd_upload_install(struct execd *ex)
{
    (void)ex;
}
