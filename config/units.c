/* config/units.c — sizes, durations, rates, addresses and networks as written in the config
 * file, and the match of an address against a network. */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "config/config_internal.h"

/* Split "123unit" into the number and the unit; the number is a non-negative integer. */
static int split_num(const char *s, uint64_t *num, const char **unit)
{
    const char *p = s;
    while (*p == ' ')
        p++;
    if (!isdigit((unsigned char)*p))
        return GW_E_PARSE;
    uint64_t v = 0;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return GW_E_RANGE;
        v = v * 10 + d;
        p++;
    }
    while (*p == ' ')
        p++;
    *num = v;
    *unit = p;
    return 0;
}

static int mul(uint64_t v, uint64_t m, uint64_t *out)
{
    if (m && v > UINT64_MAX / m)
        return GW_E_RANGE;
    *out = v * m;
    return 0;
}

typedef struct {
    const char *name;
    uint64_t mult;
} unit_t;

/* Sizes: bytes; decimal (kB/KB, MB, GB: powers of 1000) and binary (KiB, MiB, GiB). Unit names
 * are case-sensitive except the plain "k"/"K" shorthand, which means KiB. */
static const unit_t size_units[] = {
    {"", 1},
    {"B", 1},
    {"k", 1024},
    {"K", 1024},
    {"KiB", 1024},
    {"MiB", 1024ull * 1024},
    {"GiB", 1024ull * 1024 * 1024},
    {"kB", 1000},
    {"KB", 1000},
    {"MB", 1000000},
    {"GB", 1000000000},
    {"M", 1024ull * 1024},
    {"G", 1024ull * 1024 * 1024},
};

static int lookup(const unit_t *units, size_t n, const char *u, uint64_t *mult)
{
    size_t len = strlen(u);
    while (len && u[len - 1] == ' ')
        len--;
    for (size_t i = 0; i < n; i++)
        if (strlen(units[i].name) == len && strncmp(units[i].name, u, len) == 0) {
            *mult = units[i].mult;
            return 0;
        }
    return GW_E_PARSE;
}

/* A number followed by one of the n units of tab (after optional spaces), in base units. */
static int parse_scaled(const char *s, const unit_t *tab, size_t n, uint64_t *out)
{
    uint64_t v, m;
    const char *u;
    int rv = split_num(s, &v, &u);
    if (rv < 0)
        return rv;
    if (lookup(tab, n, u, &m) < 0)
        return GW_E_PARSE;
    return mul(v, m, out);
}

int gw_parse_size(const char *s, uint64_t *bytes)
{
    return parse_scaled(s, size_units, sizeof(size_units) / sizeof(size_units[0]), bytes);
}

/* Durations: milliseconds; a bare number is seconds. */
static const unit_t dur_units[] = {
    {"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
};

int gw_parse_duration(const char *s, uint64_t *ms)
{
    return parse_scaled(s, dur_units, sizeof(dur_units) / sizeof(dur_units[0]), ms);
}

/* Rates: bytes per second, "<size>/s"; bit rates "kbit/s", "Mbit/s", "Gbit/s" (powers of
 * 1000, divided by 8). */
int gw_parse_rate(const char *s, uint64_t *bps)
{
    uint64_t v, m;
    const char *u;
    int rv = split_num(s, &v, &u);
    if (rv < 0)
        return rv;
    size_t len = strlen(u);
    if (len < 2 || strcmp(u + len - 2, "/s") != 0)
        return GW_E_PARSE;
    char unit[16];
    if (len - 2 >= sizeof(unit))
        return GW_E_PARSE;
    memcpy(unit, u, len - 2);
    unit[len - 2] = 0;
    static const unit_t bit_units[] = {
        {"bit", 1}, {"kbit", 1000}, {"Mbit", 1000000}, {"Gbit", 1000000000}};
    if (lookup(bit_units, 4, unit, &m) == 0) {
        if ((rv = mul(v, m, &v)) < 0)
            return rv;
        *bps = v / 8;
        return 0;
    }
    if (lookup(size_units, sizeof(size_units) / sizeof(size_units[0]), unit, &m) < 0)
        return GW_E_PARSE;
    return mul(v, m, bps);
}

int gw_parse_addr(const char *s, gw_cfg_addr_t *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof(out->text))
        return GW_E_PARSE;
    char host[64];
    const char *port;
    if (s[0] == '[') {
        const char *e = strchr(s, ']');
        if (!e || e[1] != ':' || (size_t)(e - s - 1) >= sizeof(host))
            return GW_E_PARSE;
        memcpy(host, s + 1, (size_t)(e - s - 1));
        host[e - s - 1] = 0;
        port = e + 2;
    } else {
        const char *c = strrchr(s, ':');
        if (!c || (size_t)(c - s) >= sizeof(host) || memchr(s, ':', (size_t)(c - s)))
            return GW_E_PARSE;
        memcpy(host, s, (size_t)(c - s));
        host[c - s] = 0;
        port = c + 1;
    }
    if (!*port || !host[0])
        return GW_E_PARSE;
    unsigned long p = 0;
    for (const char *q = port; *q; q++) {
        if (!isdigit((unsigned char)*q))
            return GW_E_PARSE;
        if (p <= 65535) /* past it the number only has to stay out of range */
            p = p * 10 + (unsigned long)(*q - '0');
    }
    if (p == 0 || p > 65535)
        return GW_E_RANGE;
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    struct sockaddr_in *v4 = (struct sockaddr_in *)&out->ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&out->ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)p);
        out->len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)p);
        out->len = sizeof(*v6);
    } else {
        return GW_E_NOENT; /* a name: not numeric */
    }
    memcpy(out->text, s, n + 1);
    return 0;
}

int gw_cfg__parse_net(const char *s, gw_cfg_net_t *n)
{
    char a[64];
    const char *slash = strchr(s, '/');
    size_t al = slash ? (size_t)(slash - s) : strlen(s);
    if (al == 0 || al >= sizeof(a))
        return -1;
    memcpy(a, s, al);
    a[al] = 0;
    memset(n, 0, sizeof(*n));
    unsigned max;
    if (inet_pton(AF_INET, a, n->addr) == 1) {
        n->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, a, n->addr) == 1) {
        n->family = AF_INET6;
        max = 128;
    } else {
        return -1;
    }
    n->bits = max;
    if (slash) {
        char *end;
        unsigned long b = strtoul(slash + 1, &end, 10);
        if (!slash[1] || *end || b > max)
            return -1;
        n->bits = (unsigned)b;
    }
    return 0;
}

int gw_cfg_net_match(const gw_cfg_net_t *n, const struct sockaddr *sa)
{
    const uint8_t *a;
    int fam = sa->sa_family;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (fam == AF_INET) {
        a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
    } else if (fam == AF_INET6) {
        a = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (n->family == AF_INET && !memcmp(a, mapped, 12)) {
            a += 12; /* ::ffff:a.b.c.d is a.b.c.d */
            fam = AF_INET;
        }
    } else {
        return 0;
    }
    if (fam != n->family)
        return 0;
    unsigned full = n->bits / 8, rest = n->bits % 8;
    if (memcmp(a, n->addr, full))
        return 0;
    if (rest) {
        uint8_t mask = (uint8_t)(0xFF << (8 - rest));
        if ((a[full] & mask) != (n->addr[full] & mask))
            return 0;
    }
    return 1;
}
