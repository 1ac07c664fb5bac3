/* libFuzzer target: an ACME order (acme/order.h) fed the input as the server's answers, one
 * per request it sends. Each answer is: a status byte (indexing STATUSES), a flags byte (bit 0:
 * a Replay-Nonce, bit 1: a Location, bit 2: a Retry-After of the next byte in seconds), a
 * 16-bit big-endian body length, the body (JSON, a problem document, a PEM chain, anything).
 * Waits and publications are resumed at once; the run ends when the input does, or the order
 * is done or failed. Whatever the answers, the order must neither crash nor leak nor loop: it
 * is bounded to a few thousand steps. */
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acme/order.h"
#include "common/err.h"

static const int STATUSES[] = {200, 201, 204, 400, 403, 404, 429, 500, 302, 100};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static EVP_PKEY *akey, *ckey;
    if (!akey) {
        akey = EVP_EC_gen("P-256");
        ckey = EVP_EC_gen("P-256");
    }
    static const char *const names[] = {"a.test", "b.test"};
    gw_acme_params_t p = {.directory = "https://ca.test/dir",
                          .email = "ops@a.test",
                          .names = names,
                          .n_names = 2,
                          .challenge = (size & 1) ? GW_ACME_CH_TLS_ALPN_01 : GW_ACME_CH_HTTP_01,
                          .account_key = akey,
                          .cert_key = ckey};
    gw_acme_order_t *o = NULL;
    if (gw_acme_order_new(&p, &o) < 0)
        return 0;
    const uint8_t *q = data, *e = data + size;
    char nonce[32], retry[8];
    unsigned n = 0;
    for (int steps = 0; steps < 4096; steps++) {
        gw_acme_action_t a;
        if (gw_acme_order_next(o, &a) < 0)
            break;
        if (a.what == GW_ACME_DO_DONE || a.what == GW_ACME_DO_FAIL)
            break;
        if (a.what == GW_ACME_DO_WAIT || a.what == GW_ACME_DO_PUBLISH) {
            gw_acme_order_resume(o);
            continue;
        }
        if (e - q < 4)
            break;
        int status = STATUSES[q[0] % (sizeof(STATUSES) / sizeof(STATUSES[0]))];
        uint8_t flags = q[1];
        size_t len = (size_t)q[2] << 8 | q[3];
        q += 4;
        if (len > (size_t)(e - q))
            len = (size_t)(e - q);
        snprintf(nonce, sizeof(nonce), "n%u", n++);
        snprintf(retry, sizeof(retry), "%u", len ? q[0] : 0u);
        gw_acme_response_t r = {.status = status,
                                .replay_nonce = (flags & 1) ? nonce : NULL,
                                .location = (flags & 2) ? "https://ca.test/loc" : NULL,
                                .retry_after = (flags & 4) ? retry : NULL,
                                .body = q,
                                .body_len = len};
        gw_acme_order_recv(o, &r);
        q += len;
    }
    gw_acme_order_del(o);
    return 0;
}
