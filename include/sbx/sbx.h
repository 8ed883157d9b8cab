/*
 * sbx/sbx.h - umbrella header of libsbx, the C client library of sbx.
 */
#ifndef SBX_SBX_H
#define SBX_SBX_H

#include "error.h"
#include "version.h"
#include "client.h"

#endif
