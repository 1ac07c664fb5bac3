/* config/hints.c — the loader's messages that say more than "wrong": the key valid at that
 * place that a misspelt one is closest to ("did you mean 'servers'?"), an address that is a port
 * alone or whose port is out of range, a tab where YAML wants spaces. */
#include <ctype.h>
#include <stdint.h>
#include <string.h>
#include <yaml.h>

#include "common/err.h"
#include "config/config_internal.h"

#define KEY_CMP_MAX 64

/* Edits (insert, delete, replace, swap two neighbours) from a to b, case ignored: the optimal
 * string alignment distance. Keys longer than KEY_CMP_MAX are never close. */
static size_t key_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > KEY_CMP_MAX || lb > KEY_CMP_MAX)
        return SIZE_MAX;
    _Static_assert(KEY_CMP_MAX < 255, "distances fit a byte");
    unsigned char d[KEY_CMP_MAX + 1][KEY_CMP_MAX + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned char)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned char)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int ai = tolower((unsigned char)a[i - 1]), bj = tolower((unsigned char)b[j - 1]);
            unsigned best = d[i - 1][j - 1] + (ai != bj);
            if (d[i - 1][j] + 1u < best)
                best = d[i - 1][j] + 1u;
            if (d[i][j - 1] + 1u < best)
                best = d[i][j - 1] + 1u;
            if (i > 1 && j > 1 && ai == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == bj && d[i - 2][j - 2] + 1u < best)
                best = d[i - 2][j - 2] + 1u;
            d[i][j] = (unsigned char)best;
        }
    return d[la][lb];
}

void gw_cfg__suggest(gw_cfg_suggest_t *sg, const char *word, const char *cand)
{
    size_t n = strlen(cand);
    /* a typo, not another word: one edit in short names, up to three in long ones */
    size_t allowed = n <= 4 ? 1 : n <= 8 ? 2 : 3;
    size_t d = key_distance(word, cand);
    /* the internal spelling of a duration (`idle_ms`) means the key without the suffix */
    size_t wl = strlen(word);
    if (wl == n + 3 && !strncmp(word, cand, n) && !strcmp(word + n, "_ms"))
        d = 1;
    if (d <= allowed && d < sg->dist) {
        sg->best = cand;
        sg->dist = d;
    }
}

void gw_cfg__err_unknown_key(ld_t *ld, yaml_node_t *k, const char *key, const char *where,
                             const field_t *tab, size_t ntab, const char *const *more)
{
    gw_cfg_suggest_t sg = {.dist = SIZE_MAX};
    for (size_t i = 0; tab && i < ntab; i++)
        gw_cfg__suggest(&sg, key, gw_cfg__yaml_name(tab[i].name));
    for (size_t i = 0; more && more[i]; i++)
        gw_cfg__suggest(&sg, key, more[i]);
    gw_cfg__err_at(ld, k, "unknown key '%s'%s%s%s%s%s", key, where ? " in " : "",
                   where ? where : "", sg.best ? "; did you mean '" : "", sg.best ? sg.best : "",
                   sg.best ? "'?" : "");
}

/* The port of a text that names no host (`8443`, `:8443`, `*:8443`: nginx's ways to say
 * "every interface"), or NULL. */
static const char *port_alone(const char *text)
{
    const char *p = text[0] == ':' ? text + 1 : text[0] == '*' && text[1] == ':' ? text + 2 : text;
    if (!*p || strlen(p) > 5)
        return NULL;
    unsigned long port = 0;
    for (const char *q = p; *q; q++) {
        if (*q < '0' || *q > '9')
            return NULL;
        port = port * 10 + (unsigned long)(*q - '0');
    }
    return port >= 1 && port <= 65535 ? p : NULL;
}

void gw_cfg__err_addr(ld_t *ld, yaml_node_t *v, const char *key, int rv, int listen,
                      const char *forms)
{
    const char *text = gw_cfg__scalar(v) ? gw_cfg__scalar(v) : "";
    const char *port = port_alone(text);
    if (rv == GW_E_RANGE)
        gw_cfg__err_at(ld, v, "'%s' port is out of range (1-65535): '%s'", key, text);
    else if (port && listen)
        gw_cfg__err_at(ld, v,
                       "'%s' names a port but no interface: write '0.0.0.0:%s' (every IPv4 "
                       "interface), '[::]:%s' (every IPv6 interface) or '127.0.0.1:%s' (this "
                       "host only), not '%s'",
                       key, port, port, port, text);
    else if (port)
        gw_cfg__err_at(ld, v,
                       "'%s' names a port but no host: write '127.0.0.1:%s' (this host) "
                       "or HOST:%s, not '%s'",
                       key, port, port, text);
    else
        gw_cfg__err_at(ld, v, "'%s' must be %s, not '%s'", key, forms, text);
}

/* Whether a tab is where libyaml stopped (line, column from 0) or in that line's indentation:
 * libyaml then only says it "found character that cannot start any token". */
int gw_cfg__tab_at(const char *text, size_t len, size_t line, size_t column)
{
    size_t i = 0;
    for (size_t l = 0; l < line && i < len; i++)
        if (text[i] == '\n')
            l++;
    for (size_t c = 0; i < len && text[i] != '\n'; i++, c++) {
        if (text[i] == '\t' && c <= column)
            return 1;
        if (text[i] != ' ' && text[i] != '\t' && c >= column)
            break;
    }
    return 0;
}
