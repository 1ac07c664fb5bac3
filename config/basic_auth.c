/* config/basic_auth.c — a route's basic_auth section and the htpasswd file it names, read at
 * load (so at start, `h2gate -t` and every reload): which hash kinds are accepted, what is
 * refused and why, each problem at "FILE:LINE:COL" of the `users:` key with the users file's
 * own FILE:LINE. */
#include <crypt.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/err.h"
#include "config/config_internal.h"

/* A users file larger than this is refused (an htpasswd line is ~100 bytes: 160,000 users). */
#define USERS_FILE_MAX (16u << 20)
#define USER_MAX 255

static const field_t auth_fields[] = {
    {"pass", F_BOOL, offsetof(gw_cfg_basic_auth_t, pass), 0, 0},
    FLD(gw_cfg_basic_auth_t, cache_entries, F_UINT, 0, 1000000),
    {"cache_ttl", F_DUR, offsetof(gw_cfg_basic_auth_t, cache_ttl_ms), 0, 3600000},
    FLD(gw_cfg_basic_auth_t, max_failures, F_UINT, 0, 1000000),
    FLD(gw_cfg_basic_auth_t, max_verifying, F_UINT, 1, 100000),
    FLD(gw_cfg_basic_auth_t, max_waiting, F_UINT, 1, 100000),
};

/* ---- the htpasswd file ---------------------------------------------------------------------- */

typedef struct {
    const gw_cfg_pos_t *at;
    const char *file;
    gw_config_errors_t *errs;
    int bad, nomem;
} hp_t;

static void hp_err(hp_t *h, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void hp_err(hp_t *h, size_t line, const char *fmt, ...)
{
    char body[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    h->bad = 1;
    if (gw_config_error_add(h->errs, h->at, "users file %s:%zu: %s", h->file, line, body) < 0)
        h->nomem = 1;
}

/* crypt(3)'s base-64 alphabet ("./0-9A-Za-z"). */
static int b64c(char c)
{
    return c == '.' || c == '/' || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
           (c >= 'a' && c <= 'z');
}
static int all_b64c(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!b64c(s[i]))
            return 0;
    return 1;
}

/* Why hash (of user) is refused, or NULL when it is an accepted kind, well formed, and
 * libcrypt's crypt_r handles it (crypt_checksalt: libxcrypt 4.4 calls $5$ "legacy", which is
 * still computed). */
static const char *hash_refused(const char *hash)
{
    size_t n = strlen(hash);
    if (!strncmp(hash, "$2y$", 4) || !strncmp(hash, "$2b$", 4) || !strncmp(hash, "$2a$", 4)) {
        /* $2y$NN$ then 22 characters of salt and 31 of hash */
        if (n != 60 || hash[4] < '0' || hash[4] > '3' || hash[5] < '0' || hash[5] > '9' ||
            hash[6] != '$' || !all_b64c(hash + 7, 53))
            return "a malformed bcrypt hash (expected $2y$NN$ and 53 characters)";
        int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
        if (cost < 4 || cost > 31)
            return "a bcrypt cost outside 4..31";
    } else if (!strncmp(hash, "$5$", 3) || !strncmp(hash, "$6$", 3)) {
        /* $5$[rounds=N$]salt$hash: salt up to 16 characters, hash 43 ($5$) or 86 ($6$) */
        size_t want = hash[1] == '5' ? 43 : 86;
        const char *p = hash + 3;
        if (!strncmp(p, "rounds=", 7)) {
            p += 7;
            if (*p < '1' || *p > '9')
                return "a malformed SHA-crypt rounds= field";
            while (*p >= '0' && *p <= '9')
                p++;
            if (*p++ != '$')
                return "a malformed SHA-crypt rounds= field";
        }
        const char *d = strchr(p, '$');
        if (!d || d == p || (size_t)(d - p) > 16 || !all_b64c(p, (size_t)(d - p)) ||
            strlen(d + 1) != want || !all_b64c(d + 1, want))
            return "a malformed SHA-crypt hash";
    } else if (!strncmp(hash, "$apr1$", 6)) {
        return "an MD5 ($apr1$) hash, which is refused: make it again with htpasswd -B (bcrypt) "
               "or -5 (SHA-512)";
    } else if (!strncmp(hash, "$1$", 3)) {
        return "an MD5-crypt ($1$) hash, which is refused: make it again with htpasswd -B";
    } else if (!strncmp(hash, "{SHA}", 5)) {
        return "a SHA-1 ({SHA}) hash, which is refused: make it again with htpasswd -B";
    } else if (hash[0] == '$') {
        return "a hash of an unknown kind (accepted: $2y$, $2b$, $2a$, $5$, $6$)";
    } else if (n == 13 && all_b64c(hash, 13)) {
        return "a crypt(3) DES hash (or a plain-text password), which is refused: make it again "
               "with htpasswd -B";
    } else {
        return "a plain-text password (no hash), which is refused: make it with htpasswd -B";
    }
    int cs = crypt_checksalt(hash);
    if (cs != CRYPT_SALT_OK && cs != CRYPT_SALT_METHOD_LEGACY)
        return "a hash this system's libcrypt cannot check";
    return NULL;
}

static int user_cmp(const void *a, const void *b)
{
    const gw_cfg_htuser_t *x = a, *y = b;
    return strcmp(x->user, y->user);
}

void gw_cfg_htusers_free(gw_cfg_htuser_t *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gw_free(u[i].user);
        gw_free(u[i].hash);
    }
    gw_free(u);
}

int gw_cfg_htpasswd_parse(const gw_cfg_pos_t *at, const char *file, const char *text, size_t len,
                          gw_cfg_htuser_t **users, size_t *n, gw_config_errors_t *errs)
{
    hp_t h = {.at = at, .file = file, .errs = errs};
    gw_cfg_htuser_t *u = NULL;
    size_t k = 0, cap = 0;
    size_t *lines = NULL; /* the line of each user, for "repeated" */
    /* the line at s is sl bytes long: lengths, not a pair of pointers, so that no length is
     * ever a difference the compiler cannot prove non-negative (gcc's stringop-overread on
     * the memchr below, with the sanitizers on) */
    size_t off = 0;
    for (size_t line = 1; off < len; line++) {
        const char *s = text + off;
        const char *eol = memchr(s, '\n', len - off);
        size_t sl = eol ? (size_t)(eol - s) : len - off;
        off += eol ? sl + 1 : sl;
        while (sl > 0 && (s[sl - 1] == '\r' || s[sl - 1] == ' ' || s[sl - 1] == '\t'))
            sl--;
        while (sl > 0 && (*s == ' ' || *s == '\t')) {
            s++;
            sl--;
        }
        if (sl == 0 || *s == '#') /* blank lines and comments (as Apache's htpasswd reads them) */
            continue;
        const char *colon = memchr(s, ':', sl);
        if (!colon) {
            hp_err(&h, line, "expected USER:HASH");
            continue;
        }
        size_t ul = (size_t)(colon - s), hl = sl - ul - 1;
        int ctl = 0;
        for (size_t i = 0; i < sl; i++)
            ctl |= (unsigned char)s[i] < 0x20 || s[i] == 0x7f;
        if (ctl) {
            hp_err(&h, line, "a control character (RFC 7617 §2 forbids them in a user-id)");
            continue;
        }
        if (ul == 0 || ul > USER_MAX) {
            hp_err(&h, line, "the user name must be 1 to %d bytes", USER_MAX);
            continue;
        }
        char *user = gw_malloc(ul + 1), *hash = gw_malloc(hl + 1);
        if (!user || !hash) {
            gw_free(user);
            gw_free(hash);
            h.nomem = 1;
            break;
        }
        memcpy(user, s, ul);
        user[ul] = 0;
        memcpy(hash, colon + 1, hl);
        hash[hl] = 0;
        const char *why = hash_refused(hash);
        if (why) {
            hp_err(&h, line, "user '%s' has %s", user, why);
            gw_free(user);
            gw_free(hash);
            continue;
        }
        size_t dup = 0;
        while (dup < k && strcmp(u[dup].user, user))
            dup++;
        if (dup < k) {
            hp_err(&h, line, "user '%s' is repeated (first on line %zu)", user, lines[dup]);
            gw_free(user);
            gw_free(hash);
            continue;
        }
        if (k == cap) {
            size_t nc = cap ? cap * 2 : 8;
            gw_cfg_htuser_t *nu = gw_realloc(u, nc * sizeof(*u));
            size_t *nl = nu ? gw_realloc(lines, nc * sizeof(*lines)) : NULL;
            if (nu)
                u = nu;
            if (nl)
                lines = nl;
            if (!nu || !nl) {
                gw_free(user);
                gw_free(hash);
                h.nomem = 1;
                break;
            }
            cap = nc;
        }
        lines[k] = line;
        u[k++] = (gw_cfg_htuser_t){.user = user, .hash = hash};
    }
    gw_free(lines);
    if (!h.nomem && !h.bad && k == 0)
        hp_err(&h, 1, "no user (a line USER:HASH, made with htpasswd -B)");
    if (h.nomem || h.bad) {
        gw_cfg_htusers_free(u, k);
        *users = NULL;
        *n = 0;
        return h.nomem ? GW_E_NOMEM : GW_E_PARSE;
    }
    qsort(u, k, sizeof(*u), user_cmp);
    *users = u;
    *n = k;
    return 0;
}

const gw_cfg_htuser_t *gw_cfg_htuser_find(const gw_cfg_basic_auth_t *a, const char *user,
                                          size_t len)
{
    size_t lo = 0, hi = a->users_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *m = a->users[mid].user;
        size_t ml = strlen(m);
        int c = memcmp(m, user, ml < len ? ml : len);
        if (c == 0)
            c = ml < len ? -1 : ml > len;
        if (c == 0)
            return &a->users[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Read the users file into a (errors at the `users:` key n). */
static void load_users(ld_t *ld, gw_cfg_basic_auth_t *a, yaml_node_t *n)
{
    FILE *f = fopen(a->users_path, "rb");
    if (!f) {
        gw_cfg__err_at(ld, n, "users file '%s' cannot be read: %s", a->users_path, strerror(errno));
        return;
    }
    char *buf = gw_malloc(USERS_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        ld->nomem = 1;
        return;
    }
    size_t len = fread(buf, 1, USERS_FILE_MAX + 1, f);
    int err = ferror(f);
    fclose(f);
    if (err)
        gw_cfg__err_at(ld, n, "users file '%s' cannot be read", a->users_path);
    else if (len > USERS_FILE_MAX)
        gw_cfg__err_at(ld, n, "users file '%s' is larger than %u bytes", a->users_path,
                       USERS_FILE_MAX);
    else {
        size_t before = ld->errs ? ld->errs->len : 0;
        gw_config_errors_t sink = {0};
        gw_config_errors_t *e = ld->errs ? ld->errs : &sink;
        int rv = gw_cfg_htpasswd_parse(&a->users_at, a->users_path, buf, len, &a->users,
                                       &a->users_len, e);
        if (rv == GW_E_NOMEM)
            ld->nomem = 1;
        else if (rv < 0)
            ld->nerr += ld->errs ? ld->errs->len - before : 1;
        gw_config_errors_free(&sink);
    }
    explicit_bzero(buf, len < USERS_FILE_MAX ? len : USERS_FILE_MAX);
    gw_free(buf);
}

/* RFC 7235 §2.2: realm is a quoted-string; kept to what needs no escaping. */
static int realm_ok(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '"' || *s == '\\')
            return 0;
    return 1;
}

typedef struct {
    gw_cfg_basic_auth_t *a;
    yaml_node_t *users, *realm;
} auth_ld_t;

static int auth_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    auth_ld_t *x = obj;
    if (!strcmp(key, "realm") || !strcmp(key, "users")) {
        if (!gw_cfg__expect(ld, v, YAML_SCALAR_NODE, key))
            return 0;
        char **dst = key[0] == 'r' ? &x->a->realm : &x->a->users_path;
        *(key[0] == 'r' ? &x->realm : &x->users) = v;
        gw_free(*dst);
        *dst = gw_cfg__xstrdup(ld, gw_cfg__scalar(v));
    } else if (!gw_cfg__set_field(ld, auth_fields, NTAB(auth_fields), key, v, x->a)) {
        static const char *const more[] = {"realm", "users", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "basic_auth", auth_fields, NTAB(auth_fields), more);
    }
    return 0;
}

void gw_cfg__load_basic_auth(ld_t *ld, yaml_node_t *v, gw_cfg_basic_auth_t **out)
{
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "basic_auth"))
        return;
    gw_cfg__free_basic_auth(*out);
    gw_cfg_basic_auth_t *a = *out = gw_calloc(1, sizeof(*a));
    if (!a) {
        ld->nomem = 1;
        return;
    }
    a->cache_entries = 1024;
    a->cache_ttl_ms = 60000;
    a->max_failures = 10;
    a->max_verifying = 64;
    a->max_waiting = 1024;
    auth_ld_t x = {.a = a};
    gw_cfg__each_pair(ld, v, auth_pair, &x);
    if (ld->nomem)
        return;
    if (!a->realm)
        a->realm = gw_cfg__xstrdup(ld, "h2gate");
    else if (!a->realm[0] || strlen(a->realm) > 200 || !realm_ok(a->realm))
        gw_cfg__err_at(ld, x.realm,
                       "basic_auth realm must be 1 to 200 characters without '\"', '\\' or "
                       "control characters");
    if (!x.users) {
        gw_cfg__err_at(ld, v, "missing required key 'users' (an htpasswd file) in basic_auth");
        return;
    }
    a->users_at = gw_cfg__pos(ld, x.users);
    load_users(ld, a, x.users);
}

void gw_cfg__free_basic_auth(gw_cfg_basic_auth_t *a)
{
    if (!a)
        return;
    gw_free(a->realm);
    gw_free(a->users_path);
    gw_cfg_htusers_free(a->users, a->users_len);
    gw_free(a);
}
