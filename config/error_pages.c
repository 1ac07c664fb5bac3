/* config/error_pages.c — error_pages (the top level's and each route's): the status each file
 * is for, and the files, read when the whole document is known (error_page_max may come after
 * them) and so again at every reload. A status is one the gateway answers with itself (400,
 * 401, 403, 404, 405, 408, 429, 501, 502, 503, 504) or any 5xx (an origin's, replaced on a
 * route with intercept_errors). The Content-Type comes from the file name. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/config_internal.h"

const gw_cfg_error_page_t *gw_cfg_error_page(const gw_config_t *c, const gw_cfg_route_t *r,
                                             unsigned status)
{
    if (r)
        for (size_t i = 0; i < r->error_pages.n; i++)
            if (r->error_pages.v[i].status == status)
                return &r->error_pages.v[i];
    for (size_t i = 0; i < c->error_pages.n; i++)
        if (c->error_pages.v[i].status == status)
            return &c->error_pages.v[i];
    return NULL;
}

/* The 4xx the gateway makes itself: 400 (malformed HTTP/1.1 request), 401 (basic auth), 403
 * (access list, client certificate), 404 (no route), 405 (CONNECT), 408 (request body stopped),
 * 429 (request rate). Any 5xx may be listed: the gateway's (501, 502, 503, 504) and, for
 * intercept_errors, the origin's. */
static int status_ok(unsigned s)
{
    static const unsigned own4xx[] = {400, 401, 403, 404, 405, 408, 429};
    for (size_t i = 0; i < NTAB(own4xx); i++)
        if (s == own4xx[i])
            return 1;
    return s >= 500 && s <= 599;
}

/* The Content-Type of a page named path, by its extension (case ignored). */
static const char *type_of(const char *path)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".htm", "text/html; charset=utf-8"},
        {".json", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
    };
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash : path, '.');
    for (size_t i = 0; dot && i < NTAB(types); i++)
        if (!strcasecmp(dot, types[i].ext))
            return types[i].type;
    return "application/octet-stream";
}

static int page_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    gw_cfg_error_pages_t *pp = obj;
    size_t nd = strspn(key, "0123456789");
    unsigned status = nd == 3 && !key[3] ? (unsigned)strtoul(key, NULL, 10) : 0;
    if (!status_ok(status)) {
        gw_cfg__err_at(ld, k,
                       "error_pages: '%s' is not a status the gateway answers with (400, 401, "
                       "403, 404, 405, 408, 429, or 500..599)",
                       key);
        return 0;
    }
    if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
        return 0;
    const char *path = gw_cfg__scalar(v);
    if (!path[0]) {
        gw_cfg__err_at(ld, v, "error_pages: the page of %u must be a file name", status);
        return 0;
    }
    gw_cfg_error_page_t *pg = &pp->v[pp->n++];
    pg->status = status;
    pg->path = gw_cfg__xstrdup(ld, path);
    pg->type = type_of(path);
    pg->at = gw_cfg__pos(ld, v);
    return 0;
}

void gw_cfg__load_error_pages(ld_t *ld, yaml_node_t *v, gw_cfg_error_pages_t *pages)
{
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "error_pages"))
        return;
    gw_cfg__free_error_pages(pages);
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    if (!n)
        return;
    if (!(pages->v = gw_calloc(n, sizeof(*pages->v)))) {
        ld->nomem = 1;
        return;
    }
    gw_cfg__each_pair(ld, v, page_pair, pages);
}

/* pg's file into pg->body: a regular file of at most max bytes. Errors at the file's name. */
static void read_page(ld_t *ld, gw_cfg_error_page_t *pg, size_t max)
{
    if (!pg->path)
        return; /* out of memory: reported by the load */
    FILE *f = fopen(pg->path, "rb");
    if (!f) {
        gw_cfg__err_line(ld, pg->at.line, pg->at.col, "error page '%s' cannot be read: %s",
                         pg->path, strerror(errno));
        return;
    }
    struct stat st;
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
        gw_cfg__err_line(ld, pg->at.line, pg->at.col, "error page '%s' is not a regular file",
                         pg->path);
        fclose(f);
        return;
    }
    if ((uint64_t)st.st_size > max) {
        gw_cfg__err_line(ld, pg->at.line, pg->at.col,
                         "error page '%s' has %llu bytes, more than error_page_max (%zu)", pg->path,
                         (unsigned long long)st.st_size, max);
        fclose(f);
        return;
    }
    /* one byte more than fstat said is asked for: a file that grew since is caught */
    size_t size = (size_t)st.st_size;
    uint8_t *b = gw_malloc(size + 1);
    if (!b) {
        ld->nomem = 1;
        fclose(f);
        return;
    }
    size_t n = fread(b, 1, size + 1, f);
    int err = ferror(f);
    fclose(f);
    if (err || n != size) {
        gw_cfg__err_line(ld, pg->at.line, pg->at.col, "error page '%s' cannot be read: %s",
                         pg->path, err ? "read error" : "it changed while being read");
        gw_free(b);
        return;
    }
    pg->body = b;
    pg->len = n;
}

void gw_cfg__read_error_pages(ld_t *ld)
{
    gw_config_t *c = ld->c;
    for (size_t i = 0; i < c->error_pages.n; i++)
        read_page(ld, &c->error_pages.v[i], c->error_page_max);
    for (size_t r = 0; r < c->routes_len; r++)
        for (size_t i = 0; i < c->routes[r].error_pages.n; i++)
            read_page(ld, &c->routes[r].error_pages.v[i], c->error_page_max);
}
