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
STUB(execd_metrics_get)
STUB(execd_metrics_watch)
void
execd_metrics_free_all(struct execd *ex)
{
    (void)ex;
}
