/* libFuzzer target: the h1 client's response parser over arbitrary bytes, as an origin
 * connection feeds it (responses one after the other on one connection). The first byte picks
 * HEAD or not and a split size; the rest is fed whole and then in pieces of that size, and the
 * two runs must report the same events and the same outcome. Body offsets must fall inside the
 * piece being fed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "h1/client.h"

typedef struct {
    uint64_t digest; /* FNV-1a over the rendered events */
    size_t lo, hi;   /* bounds of the current feed */
    const uint8_t *buf;
} ev_t;

static void mix(ev_t *e, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        e->digest = (e->digest ^ b[i]) * 1099511628211ull;
}

static void mix_fields(ev_t *e, const gw_field_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mix(e, f[i].name.base, f[i].name.len);
        mix(e, ":", 1);
        mix(e, f[i].value.base, f[i].value.len);
        mix(e, "\n", 1);
    }
}

static int on_head(void *ud, const gw_h1_msg_t *m)
{
    ev_t *e = ud;
    mix(e, "H", 1);
    mix(e, &m->status, sizeof(m->status));
    mix_fields(e, m->fields, m->fields_len);
    return 0;
}

static int on_body(void *ud, size_t off, size_t len)
{
    ev_t *e = ud;
    if (off < e->lo || off + len > e->hi || len == 0)
        abort();
    mix(e, e->buf + off, len); /* no B marker: pieces of one body join up */
    return 0;
}

static int on_trailers(void *ud, const gw_field_t *f, size_t n)
{
    ev_t *e = ud;
    mix(e, "T", 1);
    mix_fields(e, f, n);
    return 0;
}

static int on_complete(void *ud)
{
    mix(ud, "C", 1);
    return 0;
}

static const gw_h1_client_cbs_t cbs = {on_head, on_body, on_trailers, on_complete};

/* Feed data[0..n) in pieces of step bytes, starting a new response after each complete one.
 * Returns the outcome (0 or an error code) and fills e->digest. */
static int run(const uint8_t *data, size_t n, size_t step, int head_only, ev_t *e)
{
    gw_h1_limits_t lim = {4096, 64};
    gw_h1_client_t *c = gw_h1_client_new(&lim, &cbs, e);
    if (!c)
        return GW_E_NOMEM;
    e->digest = 1469598103934665603ull;
    e->buf = data;
    gw_h1_client_start(c, head_only);
    size_t pos = 0;
    int rc = 0;
    while (pos < n) {
        if (gw_h1_client_state(c) == GW_H1_CLIENT_DONE) {
            mix(e, gw_h1_client_keep_alive(c) ? "K" : "k", 1);
            gw_h1_client_start(c, head_only);
        }
        size_t k = n - pos < step ? n - pos : step;
        e->lo = pos;
        e->hi = pos + k;
        ssize_t used = gw_h1_client_feed(c, data, pos, k);
        if (used < 0) {
            rc = (int)used;
            break;
        }
        if ((size_t)used > k)
            abort();
        pos += (size_t)used;
    }
    if (rc == 0)
        rc = gw_h1_client_eof(c);
    gw_h1_client_del(c);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int head_only = data[0] & 1;
    size_t step = (size_t)(data[0] >> 1) + 1;
    ev_t whole = {0}, split = {0};
    int a = run(data + 1, size - 1, size, head_only, &whole);
    int b = run(data + 1, size - 1, step, head_only, &split);
    /* Same verdict however the input is split; the same events when it is accepted. When
     * it is refused, which of two violations is met first may depend on the split (the
     * scanner sees a whole head at once, the field count grows piece by piece), so only the
     * refusal itself must agree. */
    if ((a < 0) != (b < 0) || (a == 0 && whole.digest != split.digest))
        abort();
    return 0;
}
