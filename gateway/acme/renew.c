/* acme/renew.c — when to order, without I/O: renew_before, ARI (RFC 9773) and the hourly cap.
 * The clock and the random numbers come from the caller (acme/renew.h). */
#include <jansson.h>
#include <openssl/asn1.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "acme/renew.h"
#include "common/alloc.h"
#include "common/err.h"
#include "http/http.h"

/* ---- renew_before ------------------------------------------------------------------------ */

int64_t gw_acme_renew_at(int64_t not_before, int64_t not_after, uint64_t before_ms,
                         unsigned before_pct, int *halved)
{
    uint64_t life = not_after > not_before ? (uint64_t)(not_after - not_before) : 0;
    uint64_t left = life / 3;
    if (halved)
        *halved = 0;
    if (before_ms > 0) {
        left = before_ms / 1000;
        if (left >= life) {
            left = life / 2;
            if (halved)
                *halved = 1;
        }
    } else if (before_pct > 0) {
        left = life * before_pct / 100;
    }
    return not_after - (int64_t)left;
}

/* ---- ARI --------------------------------------------------------------------------------- */

/* The content octets of a DER TLV at p[0..n): into *v, *vn. 0 or -1. */
static int der_content(const uint8_t *p, size_t n, const uint8_t **v, size_t *vn)
{
    if (n < 2)
        return -1;
    size_t len = p[1], off = 2;
    if (len & 0x80) { /* long form: that many length octets follow (X.690 §8.1.3.5) */
        size_t k = len & 0x7f;
        if (k == 0 || k > 4 || n < 2 + k)
            return -1;
        len = 0;
        for (size_t i = 0; i < k; i++)
            len = len << 8 | p[2 + i];
        off += k;
    }
    if (off + len != n)
        return -1;
    *v = p + off;
    *vn = len;
    return 0;
}

int gw_acme_ari_cert_id(X509 *leaf, char out[GW_ACME_ARI_MAX_ID])
{
    const ASN1_OCTET_STRING *kid = X509_get0_authority_key_id(leaf);
    if (!kid || ASN1_STRING_length(kid) <= 0)
        return GW_E_NOENT;
    /* §4.1: the serial's DER encoding without tag and length: i2d gives the whole TLV */
    uint8_t der[64], *p = der;
    const ASN1_INTEGER *sn = X509_get0_serialNumber(leaf);
    int dl = i2d_ASN1_INTEGER(sn, NULL);
    if (dl <= 0 || dl > (int)sizeof(der))
        return GW_E_RANGE;
    i2d_ASN1_INTEGER(sn, &p);
    const uint8_t *v;
    size_t vn;
    size_t kl = (size_t)ASN1_STRING_length(kid);
    if (der_content(der, (size_t)dl, &v, &vn) < 0 || vn == 0 || kl > 64)
        return GW_E_RANGE;
    /* base64url of at most 64 and 62 bytes: 86 and 83 characters, the dot and the NUL */
    size_t n = gw_http_base64(ASN1_STRING_get0_data(kid), kl, out, 1);
    out[n++] = '.';
    n += gw_http_base64(v, vn, out + n, 1);
    out[n] = 0;
    return 0;
}

int gw_acme_ari_directory(const uint8_t *body, size_t len, char **out)
{
    *out = NULL;
    json_t *j = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return GW_E_PARSE;
    }
    json_t *m = json_object_get(j, "renewalInfo");
    const char *u = json_string_value(m);
    int rv = 0;
    if (!m)
        rv = GW_E_NOENT;
    else if (!u || strlen(u) > 2048 ||
             (strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0))
        rv = GW_E_PARSE;
    else if (!(*out = gw_strdup(u)))
        rv = GW_E_NOMEM;
    json_decref(j);
    return rv;
}

/* n digits at s into *v; 0 or -1. */
static int digits(const char *s, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        *v = *v * 10 + (s[i] - '0');
    }
    return 0;
}

static int valid_ymdhms(int y, int mo, int d, int h, int mi, int s)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return y >= 1970 && mo >= 1 && mo <= 12 && d >= 1 && d <= mdays[mo - 1] && h <= 23 &&
           mi <= 59 && s <= 60; /* 60: a leap second (RFC 3339 §5.7) */
}

int gw_acme_rfc3339(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, sec;
    if (!s || strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) ||
        s[7] != '-' || digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
        digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' ||
        digits(s + 17, 2, &sec) || !valid_ymdhms(y, mo, d, h, mi, sec))
        return GW_E_PARSE;
    const char *p = s + 19;
    if (*p == '.') { /* time-secfrac: dropped */
        p++;
        if (*p < '0' || *p > '9')
            return GW_E_PARSE;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return GW_E_PARSE;
        off = (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return GW_E_PARSE;
    }
    if (*p)
        return GW_E_PARSE;
    *out = gw_http_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
    return 0;
}

/* An IMF-fixdate (RFC 9110 §5.6.7: "Sun, 06 Nov 1994 08:49:37 GMT") as unix seconds. */
static int imf_fixdate(const char *s, int64_t *out)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    int d, y, h, mi, sec, mo = 0;
    if (strlen(s) != 29 || s[3] != ',' || s[4] != ' ' || digits(s + 5, 2, &d) || s[7] != ' ' ||
        s[11] != ' ' || digits(s + 12, 4, &y) || s[16] != ' ' || digits(s + 17, 2, &h) ||
        s[19] != ':' || digits(s + 20, 2, &mi) || s[22] != ':' || digits(s + 23, 2, &sec) ||
        strcmp(s + 25, " GMT") != 0)
        return GW_E_PARSE;
    for (int i = 0; i < 12 && !mo; i++)
        if (!strncmp(s + 8, months + 3 * i, 3))
            mo = i + 1;
    if (!mo || !valid_ymdhms(y, mo, d, h, mi, sec))
        return GW_E_PARSE;
    *out = gw_http_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    return 0;
}

/* Retry-After (RFC 9110 §10.2.3: delta-seconds or an HTTP-date) as seconds from now, within
 * [GW_ACME_ARI_RETRY_MIN_S, GW_ACME_ARI_RETRY_MAX_S]; absent or unreadable: the default. */
static uint64_t ari_retry(const char *ra, int64_t now)
{
    uint64_t v = 0;
    size_t i = 0;
    int64_t at;
    if (!ra)
        return GW_ACME_ARI_RETRY_DEFAULT_S;
    for (; ra[i] >= '0' && ra[i] <= '9' && i < 12; i++)
        v = v * 10 + (uint64_t)(ra[i] - '0');
    if (i > 0 && !ra[i])
        ; /* delta-seconds */
    else if (imf_fixdate(ra, &at) == 0)
        v = at > now ? (uint64_t)(at - now) : 0;
    else
        return GW_ACME_ARI_RETRY_DEFAULT_S;
    return v < GW_ACME_ARI_RETRY_MIN_S   ? GW_ACME_ARI_RETRY_MIN_S
           : v > GW_ACME_ARI_RETRY_MAX_S ? GW_ACME_ARI_RETRY_MAX_S
                                         : v;
}

int gw_acme_ari_parse(const uint8_t *body, size_t len, const char *retry_after, int64_t now,
                      gw_acme_ari_t *out)
{
    memset(out, 0, sizeof(*out));
    json_t *j = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *w = json_object_get(j, "suggestedWindow");
    int rv = GW_E_PARSE;
    /* §4.2: a window whose end is not after its start is malformed: the client decides alone */
    if (json_is_object(j) &&
        gw_acme_rfc3339(json_string_value(json_object_get(w, "start")), &out->start) == 0 &&
        gw_acme_rfc3339(json_string_value(json_object_get(w, "end")), &out->end) == 0 &&
        out->end > out->start) {
        const char *e = json_string_value(json_object_get(j, "explanationURL"));
        /* for the log: printable ASCII without quotes only */
        size_t n = 0;
        for (; e && e[n] && n + 1 < sizeof(out->explanation); n++) {
            if (e[n] <= ' ' || e[n] > '~' || e[n] == '"' || e[n] == '\\') {
                n = 0;
                break;
            }
            out->explanation[n] = e[n];
        }
        out->explanation[n] = 0;
        out->retry_s = ari_retry(retry_after, now);
        rv = 0;
    }
    json_decref(j);
    return rv;
}

int64_t gw_acme_ari_pick(const gw_acme_ari_t *w, uint64_t random)
{
    uint64_t span = (uint64_t)(w->end - w->start);
    return w->start + (int64_t)(random % span);
}

/* ---- the hourly cap ---------------------------------------------------------------------- */

#define HOUR_MS 3600000

int64_t gw_acme_cap_next(const gw_acme_starts_t *s, unsigned max, int64_t now_ms)
{
    if (max == 0 || max > GW_ACME_MAX_ORDERS_PER_HOUR || s->n < max)
        return now_ms;
    /* the max-th most recent start: one more now would make max + 1 within an hour of it */
    size_t i = (s->next + GW_ACME_MAX_ORDERS_PER_HOUR - max) % GW_ACME_MAX_ORDERS_PER_HOUR;
    int64_t free_at = (s->at[i] < now_ms ? s->at[i] : now_ms) + HOUR_MS;
    return free_at > now_ms ? free_at : now_ms;
}

void gw_acme_cap_record(gw_acme_starts_t *s, int64_t now_ms)
{
    s->at[s->next] = now_ms;
    s->next = (s->next + 1) % GW_ACME_MAX_ORDERS_PER_HOUR;
    if (s->n < GW_ACME_MAX_ORDERS_PER_HOUR)
        s->n++;
}

size_t gw_acme_cap_format(const gw_acme_starts_t *s, char *out, size_t cap)
{
    size_t len = 0;
    if (cap == 0)
        return 0;
    out[0] = 0;
    for (size_t k = 0; k < s->n; k++) {
        size_t i = (s->next + GW_ACME_MAX_ORDERS_PER_HOUR - s->n + k) % GW_ACME_MAX_ORDERS_PER_HOUR;
        int w = snprintf(out + len, cap - len, "%lld\n", (long long)s->at[i]);
        if (w < 0 || (size_t)w >= cap - len) {
            out[0] = 0;
            return 0;
        }
        len += (size_t)w;
    }
    return len;
}

void gw_acme_cap_parse(gw_acme_starts_t *s, const char *text, size_t len)
{
    memset(s, 0, sizeof(*s));
    size_t i = 0;
    while (i < len) {
        int64_t v = 0;
        size_t d = 0;
        for (; i < len && text[i] >= '0' && text[i] <= '9' && d < 18; i++, d++)
            v = v * 10 + (text[i] - '0');
        int ok = d > 0 && (i == len || text[i] == '\n');
        while (i < len && text[i] != '\n')
            i++;
        i++;
        if (ok)
            gw_acme_cap_record(s, v);
    }
}
