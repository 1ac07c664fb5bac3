/* libFuzzer target: HPACK decoding of arbitrary bytes, then a round trip: whatever decoded is
 * encoded and decoded again and must give the same fields. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "h2/hpack.h"

#define MAX_FIELDS 256

typedef struct {
    gw_bytes_t store; /* name\0value\0... */
    size_t n;
    size_t off[MAX_FIELDS][4]; /* name off, len, value off, len */
} list_t;

static int keep(void *ud, const gw_hpack_field_t *f)
{
    list_t *l = ud;
    if (l->n == MAX_FIELDS)
        return 0;
    l->off[l->n][0] = l->store.len;
    l->off[l->n][1] = f->name.len;
    if (gw_bytes_append(&l->store, f->name.base, f->name.len) < 0)
        return GW_E_NOMEM;
    l->off[l->n][2] = l->store.len;
    l->off[l->n][3] = f->value.len;
    if (gw_bytes_append(&l->store, f->value.base, f->value.len) < 0)
        return GW_E_NOMEM;
    l->n++;
    return 0;
}

static int same_table(const gw_hpack_table_t *x, const gw_hpack_table_t *y)
{
    if (gw_hpack_table_len(x) != gw_hpack_table_len(y) ||
        gw_hpack_table_size(x) != gw_hpack_table_size(y))
        return 0;
    for (size_t i = 0; i < gw_hpack_table_len(x); i++) {
        gw_hpack_entry_t ae, be, *a = &ae, *b = &be;
        if (!gw_hpack_table_get(x, i, a) || !gw_hpack_table_get(y, i, b))
            return 0;
        if (a->name_len != b->name_len || a->value_len != b->value_len ||
            memcmp(a->data, b->data, a->name_len + a->value_len))
            return 0;
    }
    return 1;
}

/* The table-only mode (no callback; or past max_list_size) must decode exactly as a reporting
 * decoder does: same result, same list size, same table. The input is fed
 * as two blocks, so the second one can name what the first added. */
static void table_only_agrees(const uint8_t *data, size_t size)
{
    gw_hpack_dec_t d[3];
    if (!size)
        return; /* libFuzzer may pass NULL: no offset from it (UBSan: zero offset to null) */
    size_t cut = data[0] % (size + 1);
    for (int k = 0; k < 3; k++)
        gw_hpack_dec_init(&d[k], 4096);
    for (int blk = 0; blk < 2; blk++) {
        const uint8_t *p = blk ? data + cut : data;
        size_t len = blk ? size - cut : cut;
        ssize_t rv[3];
        int end[3];
        for (int k = 0; k < 3; k++) {
            list_t l = {0};
            gw_bytes_init(&l.store, 1u << 20);
            gw_hpack_dec_begin(&d[k], k == 2 ? 64 : 1u << 20);
            rv[k] = gw_hpack_decode(&d[k], p, len, 1, k == 1 ? NULL : keep, &l);
            end[k] = rv[k] < 0 ? 0 : gw_hpack_dec_end(&d[k]);
            gw_bytes_free(&l.store);
        }
        if (rv[0] != rv[1] || rv[0] != rv[2])
            abort();
        if (rv[0] < 0)
            break;
        if (end[0] != end[1] || d[0].list_size != d[1].list_size || d[0].fields != d[1].fields ||
            d[0].list_size != d[2].list_size || !same_table(&d[0].t, &d[1].t) ||
            !same_table(&d[0].t, &d[2].t))
            abort();
    }
    for (int k = 0; k < 3; k++)
        gw_hpack_dec_free(&d[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); /* libFuzzer entry */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    table_only_agrees(data, size);

    gw_hpack_dec_t d;
    gw_hpack_dec_init(&d, 4096);
    list_t a = {0};
    gw_bytes_init(&a.store, 1u << 20);
    /* the first byte splits the input in two fragments */
    size_t cut = size ? data[0] % (size + 1) : 0;
    gw_hpack_dec_begin(&d, 1u << 20);
    ssize_t n = gw_hpack_decode(&d, data, cut, 0, keep, &a);
    if (n >= 0) {
        size_t rest = size - (size_t)n;
        uint8_t *buf = malloc(rest ? rest : 1);
        if (rest)
            memcpy(buf, data + n, rest);
        ssize_t m = gw_hpack_decode(&d, buf, rest, 1, keep, &a);
        free(buf);
        if (m >= 0 && gw_hpack_dec_end(&d) == 0) {
            /* round trip */
            gw_hpack_field_t f[MAX_FIELDS];
            /* empty fields leave the store unallocated: no offset from its NULL base */
            const uint8_t *sb = a.store.base ? a.store.base : (const uint8_t *)"";
            for (size_t i = 0; i < a.n; i++)
                f[i] = (gw_hpack_field_t){
                    {sb + a.off[i][0], a.off[i][1]}, {sb + a.off[i][2], a.off[i][3]}, 0};
            gw_hpack_enc_t e;
            gw_hpack_enc_init(&e, 4096);
            gw_bytes_t out;
            gw_bytes_init(&out, 0);
            if (gw_hpack_encode(&e, f, a.n, &out) == 0) {
                gw_hpack_dec_t d2;
                gw_hpack_dec_init(&d2, 4096);
                list_t b = {0};
                gw_bytes_init(&b.store, 1u << 20);
                gw_hpack_dec_begin(&d2, 1u << 20);
                ssize_t k = gw_hpack_decode(&d2, out.base, out.len, 1, keep, &b);
                if (k != (ssize_t)out.len || b.n != a.n || b.store.len != a.store.len ||
                    (a.store.len && memcmp(a.store.base, b.store.base, a.store.len)))
                    abort();
                gw_bytes_free(&b.store);
                gw_hpack_dec_free(&d2);
            }
            gw_bytes_free(&out);
            gw_hpack_enc_free(&e);
        }
    }
    gw_bytes_free(&a.store);
    gw_hpack_dec_free(&d);
    return 0;
}
