/*
 * sbx/error.h - error codes shared by libsbx and the sbx programs.
 *
 * Functions in sbx return 0 (or a non-negative value) on success and the negative of one of
 * these codes on failure. Values are never renumbered; retired codes keep their slot.
 */
#ifndef SBX_ERROR_H
#define SBX_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(SBX_STATIC)
#define SBX_PUBLIC __attribute__((visibility("default")))
#else
#define SBX_PUBLIC
#endif

/** Error codes. The few *expected* failures get their own code; the rest is SBX_EGENERIC. */
typedef enum sbx_errc {
    SBX_OK = 0,
    SBX_EGENERIC = 1,  /**< anything not listed below (look at the message) */
    SBX_EINVAL = 2,    /**< bad argument or malformed input */
    SBX_ENOTFOUND = 3, /**< the named object does not exist */
    SBX_EEXISTS = 4,   /**< the object already exists */
    SBX_ELIMIT = 5,    /**< a size or count limit was exceeded */
    SBX_ETIMEDOUT = 6, /**< a deadline passed */
    SBX_EPERM = 7,     /**< not allowed (authentication, privileges) */
    SBX_ENOMEM = 8,    /**< out of memory (libsbx only; programs abort) */
    SBX_ECONFLICT = 9, /**< the object is in a state that does not allow this */
    SBX_EUNAVAIL = 10, /**< a backend or peer is unreachable or not supported here */
    SBX_EIO = 11,      /**< I/O or protocol error talking to a peer */
} sbx_errc;

/** Short English text for an error code. The string is static; never NULL. */
SBX_PUBLIC const char *sbx_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
