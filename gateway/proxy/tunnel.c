/* proxy/tunnel.c — WebSocket through the gateway: which requests ask for it, the handshake
 * fields the origin is given, the check of its 101, and the exchange that becomes a tunnel.
 *
 * HTTP/1.1 (RFC 6455 §4.1, RFC 9110 §7.8): a GET with `Connection: upgrade` and `Upgrade:
 * websocket` goes to the origin with those two fields (they are hop-by-hop: nothing else of
 * the client's Connection or Upgrade passes; `h2c` never does); the client's Sec-WebSocket-*
 * fields pass as they are (its key must be one, of 16 bytes: RFC 6455 §4.2.1, else 400).
 * HTTP/2 (RFC 8441 §4-5): an extended CONNECT becomes that GET with a key of the gateway's own
 * (16 random bytes, base64); the client's Sec-WebSocket-Protocol and -Extensions pass, its
 * Sec-WebSocket-Key (it sends none over HTTP/2) does not.
 *
 * The origin's 101 is checked for both before any tunnel opens, as a WebSocket client checks
 * it (RFC 6455 §4.1): the gateway rewrites the 101's Upgrade and Connection for an HTTP/1.1
 * client and turns it into a 200 for an HTTP/2 one, so neither client can check what the
 * origin said, and the tunnel (a connection out of the pool, a max_tunnels slot) is held on
 * the origin's word: a peer's word that a protocol switched is checked, not relayed. */
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>

#include "common/err.h"
#include "common/log.h"
#include "proxy/proxy_internal.h"

/* RFC 6455 §1.3 */
static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static size_t b64(const uint8_t *in, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[k++] = t[(v >> 18) & 63];
        out[k++] = t[(v >> 12) & 63];
        out[k++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[k++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[k] = 0;
    return k;
}

int gw_proxy__ws_h1_request(gw_slice_t method, const gw_field_t *f, size_t n)
{
    /* RFC 6455 §4.1: a GET, Upgrade with "websocket", Connection with "upgrade" */
    return gw_slice_eq(method, GW_SLICE_LIT("GET")) &&
           gw_proxy__list_has(f, n, "upgrade", "websocket") &&
           gw_proxy__list_has(f, n, "connection", "upgrade");
}

int gw_proxy__ws_key(char out[GW_WS_KEY_LEN + 1])
{
    uint8_t r[16];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return GW_E_IO;
    b64(r, sizeof(r), out);
    return 0;
}

int gw_proxy__ws_accept(const char *key, size_t key_len, char out[GW_WS_ACCEPT_LEN + 1])
{
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) &&
             EVP_DigestUpdate(ctx, key, key_len) &&
             EVP_DigestUpdate(ctx, WS_GUID, sizeof(WS_GUID) - 1) &&
             EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 20;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return GW_E_NOMEM;
    b64(md, 20, out);
    return 0;
}

int gw_proxy__ws_h1_key(const gw_field_t *f, size_t n, char out[GW_WS_KEY_LEN + 1])
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const gw_field_t *key = NULL;
    for (size_t i = 0; i < n; i++)
        if (gw_proxy__name_is(f[i].name, "sec-websocket-key")) {
            if (key)
                return GW_E_PARSE; /* repeated: which one would the origin answer? */
            key = &f[i];
        }
    if (!key)
        return GW_E_PARSE;
    /* RFC 6455 §4.1: "a base64-encoded value that, when decoded, is 16 bytes in length": 22
     * characters of the alphabet and "==" */
    gw_slice_t v = gw_slice_trim(key->value);
    if (v.len != GW_WS_KEY_LEN || v.base[22] != '=' || v.base[23] != '=')
        return GW_E_PARSE;
    for (size_t i = 0; i < 22; i++)
        if (!memchr(alphabet, v.base[i], sizeof(alphabet) - 1))
            return GW_E_PARSE;
    if (out) {
        memcpy(out, v.base, GW_WS_KEY_LEN);
        out[GW_WS_KEY_LEN] = 0;
    }
    return 0;
}

const char *gw_proxy__ws_check_101(const gw_field_t *f, size_t n, const char *key)
{
    /* RFC 6455 §4.1, the client's checks of the server's handshake answer, in its order */
    const gw_field_t *up = NULL, *acc = NULL;
    for (size_t i = 0; i < n; i++) {
        if (gw_proxy__name_is(f[i].name, "upgrade")) {
            if (up)
                return "Upgrade repeated";
            up = &f[i];
        } else if (gw_proxy__name_is(f[i].name, "sec-websocket-accept")) {
            if (acc)
                return "Sec-WebSocket-Accept repeated";
            acc = &f[i];
        }
    }
    /* the value is "websocket", nothing more: RFC 9110 §7.8 lets a server switch only to what
     * the request named, and the request named websocket alone */
    if (!up || !gw_slice_eq_nocase(gw_slice_trim(up->value), GW_SLICE_LIT("websocket")))
        return "101 without Upgrade: websocket";
    if (!gw_proxy__list_has(f, n, "connection", "upgrade"))
        return "101 without Connection: upgrade";
    char want[GW_WS_ACCEPT_LEN + 1];
    if (!key || gw_proxy__ws_accept(key, strlen(key), want) < 0)
        return "no key to check Sec-WebSocket-Accept against";
    if (!acc || !gw_slice_eq(gw_slice_trim(acc->value), gw_slice_str(want)))
        return "Sec-WebSocket-Accept does not match the key";
    return NULL;
}

/* The origin agreed to a WebSocket (101): checked, then the client is told (HTTP/1.1: the 101
 * with Upgrade and Connection; HTTP/2: 200, RFC 8441 §5) and bytes flow both ways: the origin's
 * through the body store and pump() as a response body, the client's through upload.c as a
 * request body, written as they are (back/: a tunnel). */
void gw_proxy__tunnel_open(ox_t *ox, const gw_back_head_t *h)
{
    px_t *px = GW_CONTAINER_OF(ox->subs.next, px_t, slink); /* never coalesced: alone */
    gw_field_t f[GW_PROXY_MAX_RESP_FIELDS];
    char lower[16384];
    int64_t cl;
    size_t n =
        gw_proxy__resp_fields(ox->route, h->fields, h->fields_len, f, lower, sizeof(lower), &cl, 1);
    const char *bad = gw_proxy__ws_check_101(h->fields, h->fields_len, ox->ws ? ox->ws_key : NULL);
    if (bad) {
        GW_LOG_WARN("websocket_bad_101", "peer=%s path=%.*s upstream=%s reason=\"%s\" status=502",
                    px->s->peer, PX_PATH(px), px->route->upstream_name, bad);
        gw_proxy__ox_abort(ox, GW_E_PARSE);
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) /* HTTP/2: the accept answered our key, not the client's */
        if (!(px->proto == GW_REQ_H2 && gw_proxy__name_is(f[i].name, "sec-websocket-accept")))
            f[k++] = f[i];
    unsigned status = 200;
    if (px->proto == GW_REQ_HTTP1 && k + 2 <= GW_PROXY_MAX_RESP_FIELDS) {
        f[k++] = (gw_field_t){GW_SLICE_LIT("upgrade"), GW_SLICE_LIT("websocket")};
        f[k++] = (gw_field_t){GW_SLICE_LIT("connection"), GW_SLICE_LIT("Upgrade")};
        status = 101;
    }
    ox->tunnel = 1;
    (*ox->p->tunnels)++;
    px->tunnel = 1;
    px->status = status;
    px->resp_cl = -1;
    gw_proxy__resp_reached(px, PX_RESP_HEAD);
    if (px->s->ops->respond(px->s, status, f, k, -1, 0) < 0)
        gw_proxy__do_reset(px, GW_CS_RESET_INTERNAL);
}

/* RFC 8441 §5, RFC 9113 §8.5: to an HTTP/2 client a 2xx answer to its extended CONNECT is the
 * switch itself. An origin that ignored Upgrade and answered 2xx (a page, a 204) did not
 * switch, and its body is no WebSocket: the client gets a 502, never that 2xx. Other answers
 * (a 403, a 426) are refusals and pass as they are; an HTTP/1.1 client sees any of them as the
 * plain answer it is (RFC 9110 §7.8: a server may ignore Upgrade). 1 when it was answered. */
int gw_proxy__ws_false_switch(ox_t *ox, const gw_back_head_t *h)
{
    if (!ox->ws || gw_list_empty(&ox->subs)) /* not a WebSocket, or nobody to tell */
        return 0;
    px_t *px = GW_CONTAINER_OF(ox->subs.next, px_t, slink); /* never coalesced: alone */
    if (px->proto != GW_REQ_H2 || h->status < 200 || h->status > 299)
        return 0;
    GW_LOG_WARN("websocket_bad_101",
                "peer=%s path=%.*s upstream=%s reason=\"%d instead of 101\" status=502",
                px->s->peer, PX_PATH(px), px->route->upstream_name, h->status);
    gw_proxy__ox_abort(ox, GW_E_PARSE);
    return 1;
}
