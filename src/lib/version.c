#include "sbx/version.h"

const char *
sbx_version(void)
{
    return SBX_VERSION;
}
