/* front/client_cert.c — the client certificate of a TLS connection, read once after its
 * handshake: the verification's result and subject for the client streams (and through them
 * the header rules and the access log), the RFC 9440 field values for the origin, and the
 * metric of handshakes by verification result. */
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "front/front_internal.h"
#include "http/http.h"

#define CHAIN_MAX 17 /* client_auth.depth is at most 16 intermediates */

struct gw_front_ccert {
    size_t cert_len;  /* Client-Cert's value at v */
    size_t chain_len; /* Client-Cert-Chain's value at v + cert_len + 1 (0: no intermediate) */
    char v[];
};

void gw_front__client_cert_count(conn_t *c, int failed)
{
    const char *r = gw_tls_client_result(c->tls);
    if (!r)
        return;
    /* a handshake that failed before the client's certificate was judged is not counted */
    if (failed && strcmp(r, "failed") && !strstr(gw_tls_reason(c->tls), "certificate"))
        return;
    W(c)->m.client_verify[!strcmp(r, "success") ? 0 : !strcmp(r, "failed") ? 1 : 2]++;
    if (failed) /* mode require: what the operator looks for when a client cannot connect */
        GW_LOG_INFO("tls_client_cert_refused", "peer=%s verify=\"%s\" subject=\"%s\" reason=\"%s\"",
                    PEER(c), gw_tls_client_verify(c->tls), gw_tls_client_subject(c->tls),
                    gw_tls_reason(c->tls));
}

int gw_front__client_cert_init(conn_t *c)
{
    uint8_t *der[CHAIN_MAX];
    size_t len[CHAIN_MAX], n = 0, bytes = 0;
    int rv = 0;
    if (!gw_tls_client_verified(c->tls))
        return 0;
    while (n < CHAIN_MAX && (rv = gw_tls_client_der(c->tls, n, &der[n], &len[n])) == 1) {
        bytes += GW_HTTP_SF_BYTES_LEN(len[n]) + 2;
        n++;
    }
    if (rv < 0 || n == 0)
        goto out;
    struct gw_front_ccert *cc = gw_malloc(sizeof(*cc) + bytes + 2);
    if (!cc) {
        rv = GW_E_NOMEM;
        goto out;
    }
    /* RFC 9440 §2.2: Client-Cert is the leaf's DER as a Byte Sequence; §2.3:
     * Client-Cert-Chain a List of Byte Sequences, the leaf's issuer first */
    cc->cert_len = gw_http_sf_bytes(der[0], len[0], cc->v);
    char *ch = cc->v + cc->cert_len + 1;
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (i > 1) {
            memcpy(ch + k, ", ", 2);
            k += 2;
        }
        k += gw_http_sf_bytes(der[i], len[i], ch + k);
    }
    ch[k] = 0;
    cc->chain_len = k;
    c->ccert = cc;
    rv = 0;
out:
    for (size_t i = 0; i < n; i++)
        gw_free(der[i]);
    return rv;
}

void gw_front__client_cert_stream(conn_t *c, gw_cstream_t *s)
{
    if (!c->tls)
        return;
    s->tls_client_verify = gw_tls_client_verify(c->tls);
    s->tls_client_subject = gw_tls_client_subject(c->tls);
    if (c->ccert) {
        s->tls_client_cert = (gw_slice_t){(const uint8_t *)c->ccert->v, c->ccert->cert_len};
        s->tls_client_cert_chain = (gw_slice_t){
            (const uint8_t *)c->ccert->v + c->ccert->cert_len + 1, c->ccert->chain_len};
    }
}
