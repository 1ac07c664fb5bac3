/* h1/head.c — the rules a complete HTTP/1.1 message head must meet, whatever parser read it:
 * its framing (RFC 9112 §6), and for a request its version, its Host and its target. */
#include "common/err.h"
#include "h1/h1_internal.h"
#include "http/http.h"

/* why = {code, status, reason}; returns -1. */
static int refuse(gw_h1__refusal_t *why, int code, unsigned status, const char *reason)
{
    *why = (gw_h1__refusal_t){code, status, reason};
    return -1;
}

/* Last comma-separated token of a list value, trimmed. */
static gw_slice_t last_token(gw_slice_t v)
{
    size_t i = v.len;
    while (i > 0 && v.base[i - 1] != ',')
        i--;
    return gw_slice_trim((gw_slice_t){v.base + i, v.len - i});
}

/* Whether tok is an element of the list v (RFC 9110 §5.6.1), compared case-insensitively. */
static int has_token(gw_slice_t v, const char *tok)
{
    gw_http_list_t l = gw_http_list(v, ',', 0);
    gw_slice_t e;
    while (gw_http_list_next(&l, &e))
        if (gw_slice_eq_nocase(e, gw_slice_str(tok)))
            return 1;
    return 0;
}

void gw_h1__count_fields(const gw_h1_field_t *fields, size_t n, gw_h1__fields_t *hf)
{
    *hf = (gw_h1__fields_t){0};
    for (size_t i = 0; i < n; i++) {
        const gw_h1_field_t *f = &fields[i];
        if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("content-length")))
            hf->n_cl++;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("transfer-encoding")))
            hf->n_te++, hf->te = f->value;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("host")))
            hf->n_host++;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("expect")) &&
                 gw_slice_eq_nocase(f->value, GW_SLICE_LIT("100-continue")))
            hf->flags |= GW_H1_MSG_F_EXPECT_100;
        else if (gw_slice_eq_nocase(f->name, GW_SLICE_LIT("upgrade")) && has_token(f->value, "h2c"))
            hf->flags |= GW_H1_MSG_F_UPGRADE_H2C;
    }
}

/* The body's framing (RFC 9112 §6): one Content-Length or a Transfer-Encoding of chunked alone,
 * never both. 0, or -1 with *why set. */
static int check_framing(const gw_h1__head_t *h, const gw_h1__fields_t *hf, gw_h1__refusal_t *why)
{
    /* RFC 9112 §6.1 / §6.3: both framings at once is a smuggling attempt. */
    if (hf->n_cl && hf->n_te)
        return refuse(why, GW_E_PARSE, 400, "content-length with transfer-encoding");
    /* Repeated Content-Length, even with equal values: refused rather than merged. */
    if (hf->n_cl > 1)
        return refuse(why, GW_E_PARSE, 400, "repeated content-length");
    if (hf->n_te) {
        if (h->kind == GW_H1_REQUEST && h->major == 1 && h->minor == 0)
            return refuse(why, GW_E_PARSE, 400, "transfer-encoding in an HTTP/1.0 request");
        /* RFC 9112 §6.3: chunked must be the final coding of a request. A response whose final
         * coding is not chunked would be close-delimited (§6.3 rule 4); we refuse it too rather
         * than lose the connection to a framing an intermediary may read differently. */
        if (hf->n_te > 1 || !gw_slice_eq_nocase(last_token(hf->te), GW_SLICE_LIT("chunked")))
            return refuse(why, GW_E_PARSE, 400, "transfer-encoding does not end in chunked");
        /* We de-chunk and re-frame the body but apply no other coding, so a coding before
         * chunked ("gzip, chunked") would be lost on the way: the recipient would take the
         * gzip bytes for the content. RFC 9112 §6.1: a server answers a transfer coding it
         * does not understand with 501; from an origin the response is unusable (502). */
        if (!gw_slice_eq_nocase(gw_slice_trim(hf->te), GW_SLICE_LIT("chunked"))) {
            if (h->kind == GW_H1_REQUEST)
                return refuse(why, GW_E_UNSUPPORTED, 501, "transfer coding not supported");
            return refuse(why, GW_E_PARSE, 400, "transfer coding other than chunked");
        }
    }
    /* http-parser takes a Content-Length up to 2^64 - 2; ours are int64_t everywhere
     * downstream (2^63 and above would turn negative) */
    if (hf->n_cl && !h->chunked && h->content_length != UINT64_MAX &&
        h->content_length > (uint64_t)INT64_MAX)
        return refuse(why, GW_E_PARSE, 400, "content-length too large");
    return 0;
}

/* A request's version, Host and target. 0, or -1 with *why set. */
static int check_request(const gw_h1__head_t *h, const gw_h1__fields_t *hf, gw_h1__refusal_t *why)
{
    /* RFC 9110 §6.2, §15.6.6: a major version other than 1 is not ours to read (a higher
     * minor is read as HTTP/1.1, its highest minor we speak) */
    if (h->major != 1)
        return refuse(why, GW_E_PARSE, 505, "HTTP version not supported");
    /* RFC 9112 §3.2: exactly one Host in HTTP/1.1. */
    if (h->minor >= 1 && hf->n_host != 1)
        return refuse(why, GW_E_PARSE, 400, hf->n_host ? "repeated host" : "missing host");
    if (hf->n_host > 1)
        return refuse(why, GW_E_PARSE, 400, "repeated host");
    /* §3.2: origin-form, asterisk-form or an http(s) absolute-form (the authority-form is
     * CONNECT's, refused before). http-parser lets some bytes through the target (HTAB, FF,
     * DEL, >= 0x80, ...): only RFC 3986 path and query characters go on to an origin (the rule
     * of both fronts, http/http.h), '[' and ']' only around an absolute-form's IP-literal host
     * (§3.2.2 and RFC 3986 §3.2.2: the front sends it on as Host, never in the target), and
     * the Host an authority (RFC 9112 §3.2, RFC 3986 §3.2) */
    gw_slice_t authority, rest;
    int form = gw_http_target_form(h->target, &authority, &rest);
    if (form < 0)
        return refuse(why, GW_E_PARSE, 400, "invalid request-target");
    /* §3.2.4: the asterisk-form is OPTIONS's alone ("GET *" names no resource) */
    if (form == GW_HTTP_TARGET_ASTERISK && !gw_slice_eq(h->method, GW_SLICE_LIT("OPTIONS")))
        return refuse(why, GW_E_PARSE, 400, "asterisk-form is for OPTIONS");
    for (size_t i = 0; i < h->fields_len; i++)
        if (gw_slice_eq_nocase(h->fields[i].name, GW_SLICE_LIT("host")) &&
            !gw_http_is_authority(h->fields[i].value))
            return refuse(why, GW_E_PARSE, 400, "invalid host");
    return 0;
}

int gw_h1__check_head(const gw_h1__head_t *h, const gw_h1__fields_t *hf, gw_h1__refusal_t *why)
{
    if (check_framing(h, hf, why) < 0)
        return -1;
    if (h->kind == GW_H1_REQUEST && check_request(h, hf, why) < 0)
        return -1;
    return 0;
}
