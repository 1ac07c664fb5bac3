#include "err.h"

#include <stdio.h>
#include <stdlib.h>

/* One row per code, from the X-macro table of err.h: its name and its description. */
typedef struct {
    int code;
    const char *name, *desc;
} err_row_t;

static const err_row_t err_rows[] = {{GW_OK, "GW_OK", "success"},
#define GW_ERR_ROW_(name, value, desc) {name, #name, desc},
                                     GW_ERRNO_MAP(GW_ERR_ROW_)
#undef GW_ERR_ROW_
};

static const err_row_t *err_row(int code)
{
    for (size_t i = 0; i < sizeof(err_rows) / sizeof(err_rows[0]); i++)
        if (err_rows[i].code == code)
            return &err_rows[i];
    return NULL;
}

const char *gw_strerror(int code)
{
    const err_row_t *r = err_row(code);
    return r ? r->desc : "unknown error";
}

const char *gw_errname(int code)
{
    const err_row_t *r = err_row(code);
    return r ? r->name : "GW_E_UNKNOWN";
}

const char *gw_name_of(const char *const *names, size_t n, size_t v, const char *unknown)
{
    return v < n && names[v] ? names[v] : unknown;
}

void gw__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "level=fatal msg=\"assertion failed\" expr=\"%s\" at=%s:%d\n", expr, file,
            line);
    abort();
}
