/* config/acme.c — the `acme:` section and a listener's `tls.acme` names, with what is not built
 * yet refused by name. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "config/config_internal.h"
#include "gw_version.h"

static const field_t acme_fields[] = {
    FLD(gw_cfg_acme_t, directory, F_STR, 0, 0),
    FLD(gw_cfg_acme_t, directory_ca, F_STR, 0, 0),
    FLD(gw_cfg_acme_t, email, F_STR, 0, 0),
    FLD(gw_cfg_acme_t, state, F_STR, 0, 0),
    FLD(gw_cfg_acme_t, shared_key, F_STR, 0, 0),
    FLD(gw_cfg_acme_t, max_orders_per_hour, F_UINT, 1, 60),
    FLD(gw_cfg_acme_t, cluster_check_interval_ms, F_DUR, 1000, 600000),
};

/* renew_before: a duration ("30d", "12h") or a share of the lifetime ("33%"). A duration as
 * long as the certificate's lifetime is only known when one is issued (the client then renews
 * at half the lifetime and logs it); the longest a public certificate may live is 398 days. */
static void load_renew_before(ld_t *ld, yaml_node_t *v, gw_cfg_acme_t *a)
{
    const char *s = v->type == YAML_SCALAR_NODE ? gw_cfg__scalar(v) : NULL;
    size_t n = s ? strlen(s) : 0;
    a->renew_before_ms = 0;
    a->renew_before_pct = 0;
    if (n >= 2 && s[n - 1] == '%') {
        unsigned pct = 0;
        size_t i = 0;
        for (; i + 1 < n && s[i] >= '0' && s[i] <= '9' && pct < 1000; i++)
            pct = pct * 10 + (unsigned)(s[i] - '0');
        if (i + 1 == n && pct >= 1 && pct <= 99) {
            a->renew_before_pct = pct;
            return;
        }
    } else if (s) {
        uint64_t ms = 0;
        int rv = gw_parse_duration(s, &ms);
        if (rv == 0 && ms >= 1000 && ms <= 398 * DAY_MS) {
            a->renew_before_ms = ms;
            return;
        }
    }
    gw_cfg__err_at(ld, v,
                   "acme 'renew_before' must be a duration from 1s to 398d (30d, 12h) or a share "
                   "of the lifetime from 1%% to 99%% (33%%), not %s%s%s",
                   s ? "'" : "", s ? s : gw_cfg__kind_str(v), s ? "'" : "");
}

static int acme_pair(ld_t *ld, const char *key, yaml_node_t *k, yaml_node_t *v, void *obj)
{
    gw_cfg_acme_t *a = obj;
    if (!strcmp(key, "challenge")) {
        const char *c = v->type == YAML_SCALAR_NODE ? gw_cfg__scalar(v) : "";
        a->challenge_at = gw_cfg__pos(ld, v);
        if (!strcmp(c, "tls-alpn-01"))
            a->challenge = GW_CFG_ACME_TLS_ALPN_01;
        else if (!strcmp(c, "http-01"))
            a->challenge = GW_CFG_ACME_HTTP_01;
        else
            gw_cfg__err_at(ld, v, "acme 'challenge' must be tls-alpn-01 or http-01");
        return 0;
    }
    if (!strcmp(key, "key_type")) {
        const char *t = v->type == YAML_SCALAR_NODE ? gw_cfg__scalar(v) : "";
        if (!strcmp(t, "ec-p256"))
            a->key_type = GW_CFG_ACME_EC_P256;
        else if (!strcmp(t, "rsa-2048"))
            a->key_type = GW_CFG_ACME_RSA_2048;
        else
            gw_cfg__err_at(ld, v, "acme 'key_type' must be ec-p256 or rsa-2048");
        return 0;
    }
    if (!strcmp(key, "renew_before")) {
        load_renew_before(ld, v, a);
        return 0;
    }
    if (!strcmp(key, "directory_ca"))
        a->directory_ca_at = gw_cfg__pos(ld, v);
    if (!strcmp(key, "shared_key"))
        a->shared_key_at = gw_cfg__pos(ld, v);
    if (!gw_cfg__set_field(ld, acme_fields, NTAB(acme_fields), key, v, obj)) {
        static const char *const more[] = {"challenge", "key_type", "renew_before", NULL};
        gw_cfg__err_unknown_key(ld, k, key, "acme", acme_fields, NTAB(acme_fields), more);
    }
    return 0;
}

static int b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* s[0..len) as base64 (RFC 4648 §4, padded) of exactly GW_CFG_ACME_SHARED_KEY_LEN bytes into
 * out: 0, or -1. */
static int b64_key(const char *s, size_t len, uint8_t *out)
{
    /* 32 bytes: 43 characters of data, then one '=' */
    if (len != 44 || s[43] != '=')
        return -1;
    uint32_t acc = 0;
    size_t bits = 0, n = 0;
    for (size_t i = 0; i < 43; i++) {
        int v = b64_value(s[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return n == GW_CFG_ACME_SHARED_KEY_LEN && (acc & ((1u << bits) - 1)) == 0 ? 0 : -1;
}

/* acme.shared_key: a regular file nobody but its owner and group may read, of 32 bytes, or
 * of those bytes in base64 (44 characters, a final newline allowed). The bytes go to
 * a->shared_key_bytes; every problem is an error at the key. */
static void read_shared_key(ld_t *ld, gw_cfg_acme_t *a, yaml_node_t *at)
{
    int fd = open(a->shared_key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        gw_cfg__err_at(ld, at, "acme 'shared_key' file '%s' cannot be read: %s", a->shared_key,
                       strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    char buf[64];
    ssize_t n = -1;
    if (!S_ISREG(st.st_mode))
        gw_cfg__err_at(ld, at, "acme 'shared_key' '%s' is not a regular file", a->shared_key);
    else if (st.st_mode & S_IROTH)
        gw_cfg__err_at(ld, at,
                       "acme 'shared_key' file '%s' may be read by anyone (mode %03o): it "
                       "must not be world-readable (chmod o-r)",
                       a->shared_key, (unsigned)(st.st_mode & 0777));
    else if ((n = read(fd, buf, sizeof(buf))) < 0)
        gw_cfg__err_at(ld, at, "acme 'shared_key' file '%s' cannot be read: %s", a->shared_key,
                       strerror(errno));
    close(fd);
    if (n < 0)
        return;
    size_t len = (size_t)n;
    if (len == GW_CFG_ACME_SHARED_KEY_LEN) {
        memcpy(a->shared_key_bytes, buf, len);
        a->has_shared_key = 1;
    } else {
        if (len > 0 && buf[len - 1] == '\n')
            len--;
        if (b64_key(buf, len, a->shared_key_bytes) == 0)
            a->has_shared_key = 1;
        else
            gw_cfg__err_at(ld, at,
                           "acme 'shared_key' file '%s' must hold 32 bytes, raw or in base64 "
                           "(e.g. `head -c 32 /dev/urandom | base64`), not %zd bytes",
                           a->shared_key, n);
    }
    for (volatile char *b = buf; b < buf + sizeof(buf); b++)
        *b = 0;
}

void gw_cfg__load_acme(ld_t *ld, yaml_node_t *v)
{
    gw_cfg_acme_t *a = &ld->c->acme;
    if (!GW_HAVE_ACME) {
        gw_cfg__err_at(ld, v,
                       "'acme' needs the ACME client, which this h2gate was built without "
                       "(libjansson-dev was missing at build time)");
        return;
    }
    if (!gw_cfg__expect(ld, v, YAML_MAPPING_NODE, "acme"))
        return;
    a->enabled = 1;
    a->at = gw_cfg__pos(ld, v);
    /* 3: a failing name set retries within the hour (the backoff's 2, 4 s...) and stays under
     * Let's Encrypt's 5 failed validations per name and account per hour, leaving room for
     * a second instance or a person */
    a->max_orders_per_hour = 3;
    /* 10 s: one GET of acme:orders per instance every 10 s while idle, and the first
     * validation of a clustered order 12.5 s after the lock was taken */
    a->cluster_check_interval_ms = 10000;
    gw_cfg__each_pair(ld, v, acme_pair, a);
    if (!a->directory)
        gw_cfg__err_at(ld, v, "missing required key 'directory' in acme");
    else if (strncmp(a->directory, "https://", 8) != 0 && strncmp(a->directory, "http://", 7) != 0)
        gw_cfg__err_at(ld, gw_cfg__map_value(ld, v, "directory"),
                       "acme 'directory' must be an http:// or https:// URL, not '%s'",
                       a->directory);
    if (a->email && (!a->email[0] || strchr(a->email, '@') == NULL))
        gw_cfg__err_at(ld, gw_cfg__map_value(ld, v, "email"),
                       "acme 'email' must be an address (user@domain), not '%s'", a->email);
    if (a->directory_ca && access(a->directory_ca, R_OK) != 0)
        gw_cfg__err_at(ld, gw_cfg__map_value(ld, v, "directory_ca"),
                       "acme 'directory_ca' file '%s' cannot be read: %s", a->directory_ca,
                       strerror(errno));
    if (a->state && !a->state[0])
        gw_cfg__err_at(ld, gw_cfg__map_value(ld, v, "state"), "acme 'state' must be a folder");
    if (a->shared_key)
        read_shared_key(ld, a, gw_cfg__map_value(ld, v, "shared_key"));
}

/* A DNS name the tls-alpn-01 challenge can prove: letters, digits, hyphens and dots, labels
 * of 1 to 63 characters, at most 253 in all (RFC 1035 §2.3.4); no wildcard (RFC 8555 §7.1.3:
 * wildcards need dns-01) and no IP address. */
static const char *name_problem(const char *n)
{
    size_t len = strlen(n), label = 0;
    int alpha = 0;
    if (len == 0 || len > 253)
        return "must be 1 to 253 characters";
    if (n[0] == '*')
        return "is a wildcard, which needs the dns-01 challenge (not supported)";
    for (size_t i = 0; i < len; i++) {
        char ch = n[i];
        if (ch == '.') {
            if (label == 0)
                return "has an empty label";
            label = 0;
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-'))
            return "may hold only letters, digits, '-' and '.'";
        alpha |= !(ch >= '0' && ch <= '9');
        if (++label > 63)
            return "has a label longer than 63 characters";
    }
    if (label == 0)
        return "ends with a dot";
    if (!alpha)
        return "is an IP address, which needs another challenge (not supported)";
    return NULL;
}

void gw_cfg__load_tls_acme(ld_t *ld, gw_cfg_tls_t *tls, yaml_node_t *v)
{
    gw_cfg__free_str_list(tls->acme, tls->acme_len);
    tls->acme = gw_cfg__load_str_list(ld, v, "acme", &tls->acme_len);
    tls->acme_at = gw_cfg__pos(ld, v);
    if (!tls->acme)
        return;
    if (tls->acme_len == 0 || tls->acme_len > GW_CFG_ACME_MAX_NAMES)
        gw_cfg__err_at(ld, v, "tls 'acme' must list 1 to %d names", GW_CFG_ACME_MAX_NAMES);
    for (size_t i = 0; i < tls->acme_len; i++) {
        const char *why = tls->acme[i] ? name_problem(tls->acme[i]) : NULL;
        if (why)
            gw_cfg__err_at(ld, v, "tls 'acme' name '%s' %s", tls->acme[i], why);
        for (size_t j = 0; why == NULL && j < i; j++)
            if (tls->acme[j] && tls->acme[i] && !strcasecmp(tls->acme[j], tls->acme[i]))
                gw_cfg__err_at(ld, v, "tls 'acme' names '%s' twice", tls->acme[i]);
    }
}

void gw_cfg__check_acme(ld_t *ld)
{
    gw_config_t *c = ld->c;
    for (size_t i = 0; i < c->listen_len; i++) {
        const gw_cfg_tls_t *t = c->listen[i].tls;
        if (!t || !t->acme)
            continue;
        if (!c->acme.enabled)
            gw_cfg__err_line(ld, t->acme_at.line, t->acme_at.col,
                             "tls 'acme' needs the top-level 'acme' section (its 'directory')");
        for (size_t j = 0; j < i; j++) {
            const gw_cfg_tls_t *o = c->listen[j].tls;
            /* one certificate per name set: two listeners with the same names would order
             * twice and write the same files */
            if (o && o->acme && o->acme_len == t->acme_len) {
                size_t same = 0;
                for (size_t a = 0; a < t->acme_len; a++)
                    for (size_t b = 0; b < o->acme_len; b++)
                        same += t->acme[a] && o->acme[b] && !strcasecmp(t->acme[a], o->acme[b]);
                if (same == t->acme_len)
                    gw_cfg__err_line(ld, t->acme_at.line, t->acme_at.col,
                                     "tls 'acme' lists the same names as the listener of "
                                     "line %u: list the address there once per port instead",
                                     o->acme_at.line);
            }
        }
    }
    /* RFC 8555 §8.3: http-01 is validated over cleartext HTTP (port 80 of each name), which
     * only a listener without TLS answers */
    int cleartext = 0;
    for (size_t i = 0; i < c->listen_len; i++)
        cleartext |= c->listen[i].tls == NULL;
    if (c->acme.enabled && c->acme.challenge == GW_CFG_ACME_HTTP_01 && !cleartext)
        gw_cfg__err_line(ld, c->acme.challenge_at.line, c->acme.challenge_at.col,
                         "acme 'challenge: http-01' needs a listener without tls (the "
                         "authority validates over cleartext HTTP on port 80)");
    /* the instances of a cluster share their certificates through Redis, the keys encrypted
     * with shared_key: without it a key would sit in Redis in clear */
    int any = 0;
    for (size_t i = 0; i < c->listen_len; i++)
        any |= c->listen[i].tls && c->listen[i].tls->acme;
    if (c->acme.enabled && c->cluster.enabled && any && !c->acme.shared_key)
        gw_cfg__err_line(ld, c->acme.at.line, c->acme.at.col,
                         "acme needs 'shared_key' with 'cluster' (the file of the key, 32 "
                         "bytes that every instance has, that encrypts the certificate keys "
                         "shared through Redis)");
    if (c->acme.enabled && !c->acme.state) {
        const char *base = c->state_dir ? c->state_dir : "state";
        size_t n = strlen(base) + sizeof("/acme");
        c->acme.state = gw_malloc(n);
        if (c->acme.state)
            snprintf(c->acme.state, n, "%s/acme", base);
        else
            ld->nomem = 1;
    }
}
