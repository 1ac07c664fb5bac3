#include "err.h"

#include <stdio.h>
#include <stdlib.h>

const char *gw_strerror(int code)
{
    switch (code) {
    case GW_OK:
        return "success";
#define GW_ERR_STR_(name, value, desc)                                                             \
    case name:                                                                                     \
        return desc;
        GW_ERRNO_MAP(GW_ERR_STR_)
#undef GW_ERR_STR_
    }
    return "unknown error";
}

const char *gw_errname(int code)
{
    switch (code) {
    case GW_OK:
        return "GW_OK";
#define GW_ERR_NAME_(name, value, desc)                                                            \
    case name:                                                                                     \
        return #name;
        GW_ERRNO_MAP(GW_ERR_NAME_)
#undef GW_ERR_NAME_
    }
    return "GW_E_UNKNOWN";
}

void gw__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "level=fatal msg=\"assertion failed\" expr=\"%s\" at=%s:%d\n", expr, file,
            line);
    abort();
}
