/*
 * sbx/version.h - version of libsbx.
 */
#ifndef SBX_VERSION_H
#define SBX_VERSION_H

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SBX_VERSION_MAJOR 0
#define SBX_VERSION_MINOR 1
#define SBX_VERSION_PATCH 0

/** The library's version as "MAJOR.MINOR.PATCH". Static string; never NULL. */
SBX_PUBLIC const char *sbx_version(void);

#ifdef __cplusplus
}
#endif
#endif
