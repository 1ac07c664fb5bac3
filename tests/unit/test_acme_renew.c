/* Unit tests of acme/renew.c: when to order. renew_before (a duration, a share, the default
 * third, a duration past the lifetime halved), ARI (RFC 9773): the certID of §4.1's example
 * certificate, the directory's renewalInfo, scripted renewalInfo answers (a window, Retry-After
 * as seconds and as a date and bounded, malformed windows refused), the pick inside the window;
 * the hourly cap on orders with the clock passed in, its record as text (what survives a
 * restart) and a clock set back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "acme/renew.h"
#include "common/alloc.h"
#include "common/err.h"

#define DAY 86400

static void test_renew_at_default_duration_share_and_halved(void **state)
{
    (void)state;
    int halved = -1;
    /* a 90-day certificate: the default renews 30 days before its end */
    assert_int_equal(gw_acme_renew_at(0, 90 * DAY, 0, 0, &halved), 60 * DAY);
    assert_int_equal(halved, 0);
    /* renew_before: 30d, 12h */
    assert_int_equal(gw_acme_renew_at(1000, 1000 + 90 * DAY, 30ull * DAY * 1000, 0, &halved),
                     1000 + 60 * DAY);
    assert_int_equal(gw_acme_renew_at(0, 90 * DAY, 12ull * 3600 * 1000, 0, NULL),
                     90 * DAY - 12 * 3600);
    assert_int_equal(halved, 0);
    /* a share of the lifetime: 50 % of 90 days */
    assert_int_equal(gw_acme_renew_at(0, 90 * DAY, 0, 50, &halved), 45 * DAY);
    assert_int_equal(halved, 0);
    /* a duration as long as the lifetime (a 6-day certificate, renew_before 30d, or 6d):
     * at half the lifetime, and said */
    assert_int_equal(gw_acme_renew_at(0, 6 * DAY, 30ull * DAY * 1000, 0, &halved), 3 * DAY);
    assert_int_equal(halved, 1);
    assert_int_equal(gw_acme_renew_at(0, 6 * DAY, 6ull * DAY * 1000, 0, &halved), 3 * DAY);
    assert_int_equal(halved, 1);
    /* one second shorter than the lifetime is honoured */
    assert_int_equal(gw_acme_renew_at(0, 6 * DAY, (6ull * DAY - 1) * 1000, 0, &halved), 1);
    assert_int_equal(halved, 0);
}

/* A certificate with the given AKI keyIdentifier (NULL: none) and serial. */
static X509 *make_cert(const uint8_t *kid, size_t kid_len, const char *serial_hex)
{
    X509 *x = X509_new();
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(x);
    assert_non_null(k);
    BIGNUM *bn = NULL;
    assert_true(BN_hex2bn(&bn, serial_hex) > 0);
    assert_non_null(BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)));
    BN_free(bn);
    X509_set_version(x, 2);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, k);
    if (kid) {
        AUTHORITY_KEYID *aki = AUTHORITY_KEYID_new();
        aki->keyid = ASN1_OCTET_STRING_new();
        ASN1_OCTET_STRING_set(aki->keyid, kid, (int)kid_len);
        assert_int_equal(X509_add1_ext_i2d(x, NID_authority_key_identifier, aki, 0, 0), 1);
        AUTHORITY_KEYID_free(aki);
    }
    assert_true(X509_sign(x, k, EVP_sha256()) > 0);
    EVP_PKEY_free(k);
    return x;
}

static void test_ari_cert_id_of_the_rfc_example(void **state)
{
    (void)state;
    /* RFC 9773 §4.1: keyIdentifier 69:88:5B:6B:87:46:40:41:E1:B3:7B:84:7B:A0:AE:2C:DE:01:C8:D4,
     * serial 00:87:65:43:21 (the leading zero is part of the DER encoding) */
    static const uint8_t kid[] = {0x69, 0x88, 0x5B, 0x6B, 0x87, 0x46, 0x40, 0x41, 0xE1, 0xB3,
                                  0x7B, 0x84, 0x7B, 0xA0, 0xAE, 0x2C, 0xDE, 0x01, 0xC8, 0xD4};
    char id[GW_ACME_ARI_MAX_ID];
    X509 *x = make_cert(kid, sizeof(kid), "87654321");
    assert_int_equal(gw_acme_ari_cert_id(x, id), 0);
    assert_string_equal(id, "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE");
    X509_free(x);
    /* a serial without its high bit set has no leading zero */
    x = make_cert(kid, sizeof(kid), "01");
    assert_int_equal(gw_acme_ari_cert_id(x, id), 0);
    assert_string_equal(id, "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AQ");
    X509_free(x);
    /* a 20-octet serial (RFC 5280's longest) */
    x = make_cert(kid, sizeof(kid), "7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF");
    assert_int_equal(gw_acme_ari_cert_id(x, id), 0);
    assert_string_equal(id, "aYhba4dGQEHhs3uEe6CuLN4ByNQ.f_________________________8");
    X509_free(x);
    /* no Authority Key Identifier: ARI cannot name the certificate */
    x = make_cert(NULL, 0, "01");
    assert_int_equal(gw_acme_ari_cert_id(x, id), GW_E_NOENT);
    X509_free(x);
}

static int ari_dir(const char *json, char **out)
{
    return gw_acme_ari_directory((const uint8_t *)json, strlen(json), out);
}

static void test_ari_directory_renewal_info(void **state)
{
    (void)state;
    char *u = NULL;
    assert_int_equal(ari_dir("{\"newNonce\":\"https://ca/n\",\"renewalInfo\":"
                             "\"https://ca/draft-ietf-acme-ari-03/renewalInfo\"}",
                             &u),
                     0);
    assert_string_equal(u, "https://ca/draft-ietf-acme-ari-03/renewalInfo");
    gw_free(u);
    /* pebble 2.4's directory: no ARI */
    assert_int_equal(ari_dir("{\"newNonce\":\"https://ca/n\",\"newOrder\":\"https://ca/o\"}", &u),
                     GW_E_NOENT);
    assert_null(u);
    assert_int_equal(ari_dir("{\"renewalInfo\":7}", &u), GW_E_PARSE);
    assert_int_equal(ari_dir("{\"renewalInfo\":\"ftp://ca/ri\"}", &u), GW_E_PARSE);
    assert_int_equal(ari_dir("[\"renewalInfo\"]", &u), GW_E_PARSE);
    assert_int_equal(ari_dir("{\"renewalInfo\":\"https://a\",\"renewalInfo\":\"https://b\"}", &u),
                     GW_E_PARSE);
    assert_null(u);
}

static void test_rfc3339_times(void **state)
{
    (void)state;
    int64_t t;
    assert_int_equal(gw_acme_rfc3339("1970-01-01T00:00:00Z", &t), 0);
    assert_int_equal(t, 0);
    assert_int_equal(gw_acme_rfc3339("2025-01-02T04:00:00Z", &t), 0);
    assert_int_equal(t, 1735790400);
    /* a fraction dropped, an offset applied, lower case t and z */
    assert_int_equal(gw_acme_rfc3339("2025-01-02T05:30:00.123456+01:30", &t), 0);
    assert_int_equal(t, 1735790400);
    assert_int_equal(gw_acme_rfc3339("2025-01-01t23:00:00-05:00", &t), 0);
    assert_int_equal(t, 1735790400);
    assert_int_equal(gw_acme_rfc3339("2024-02-29T00:00:00z", &t), 0);
    assert_int_equal(t, 1709164800);
    static const char *const bad[] = {
        "2025-01-02 04:00:00Z",     "2025-01-02T04:00:00",
        "2025-13-02T04:00:00Z",     "2025-02-30T04:00:00Z",
        "2025-01-02T24:00:00Z",     "2025-01-02T04:00:00.Z",
        "2025-1-02T04:00:00Z",      "2025-01-02T04:00:00Zx",
        "2025-01-02T04:00:00+0100", "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gw_acme_rfc3339(bad[i], &t), GW_E_PARSE);
    assert_int_equal(gw_acme_rfc3339(NULL, &t), GW_E_PARSE);
}

#define WINDOW                                                                                     \
    "{\"suggestedWindow\":{\"start\":\"2025-01-02T04:00:00Z\",\"end\":\"2025-01-03T04:00:00Z\"},"  \
    "\"explanationURL\":\"https://acme.example.com/docs/ari\"}"

static int ari(const char *body, const char *retry_after, gw_acme_ari_t *w)
{
    return gw_acme_ari_parse((const uint8_t *)body, strlen(body), retry_after, 1735700000, w);
}

static void test_ari_answers_scripted(void **state)
{
    (void)state;
    gw_acme_ari_t w;
    /* RFC 9773 §4.2's example, with Retry-After: 21600 */
    assert_int_equal(ari(WINDOW, "21600", &w), 0);
    assert_int_equal(w.start, 1735790400);
    assert_int_equal(w.end, 1735790400 + DAY);
    assert_int_equal(w.retry_s, 21600);
    assert_string_equal(w.explanation, "https://acme.example.com/docs/ari");
    /* Retry-After bounded to [1 min, 1 day]; absent or unreadable: six hours */
    assert_int_equal(ari(WINDOW, "5", &w), 0);
    assert_int_equal(w.retry_s, 60);
    assert_int_equal(ari(WINDOW, "999999", &w), 0);
    assert_int_equal(w.retry_s, 86400);
    assert_int_equal(ari(WINDOW, NULL, &w), 0);
    assert_int_equal(w.retry_s, 21600);
    assert_int_equal(ari(WINDOW, "soon", &w), 0);
    assert_int_equal(w.retry_s, 21600);
    /* an HTTP-date: two hours after now (1735700000 is Wed, 01 Jan 2025 02:53:20 GMT) */
    assert_int_equal(ari(WINDOW, "Wed, 01 Jan 2025 04:53:20 GMT", &w), 0);
    assert_int_equal(w.retry_s, 7200);
    /* an explanation with a quote is not logged */
    assert_int_equal(ari("{\"suggestedWindow\":{\"start\":\"2025-01-02T04:00:00Z\",\"end\":"
                         "\"2025-01-02T05:00:00Z\"},\"explanationURL\":\"https://x/\\\"a\"}",
                         "60", &w),
                     0);
    assert_string_equal(w.explanation, "");
    /* malformed: the driver falls back to renew_before */
    static const char *const bad[] = {
        "not json",
        "[]",
        "{}",
        "{\"suggestedWindow\":{\"start\":\"2025-01-02T04:00:00Z\"}}",
        /* §4.2: an end equal to or before the start */
        "{\"suggestedWindow\":{\"start\":\"2025-01-02T04:00:00Z\",\"end\":\"2025-01-02T04:00:00Z\"}"
        "}",
        "{\"suggestedWindow\":{\"start\":\"2025-01-03T04:00:00Z\",\"end\":\"2025-01-02T04:00:00Z\"}"
        "}",
        "{\"suggestedWindow\":{\"start\":\"yesterday\",\"end\":\"2025-01-02T04:00:00Z\"}}",
        "{\"suggestedWindow\":{\"start\":1735790400,\"end\":1735876800}}",
        "{\"suggestedWindow\":\"2025-01-02T04:00:00Z/2025-01-03T04:00:00Z\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(ari(bad[i], "60", &w), GW_E_PARSE);
}

static void test_ari_pick_stays_inside_the_window(void **state)
{
    (void)state;
    gw_acme_ari_t w = {.start = 1000, .end = 1000 + DAY};
    assert_int_equal(gw_acme_ari_pick(&w, 0), 1000);
    assert_int_equal(gw_acme_ari_pick(&w, DAY - 1), 1000 + DAY - 1);
    assert_int_equal(gw_acme_ari_pick(&w, DAY), 1000);
    assert_int_equal(gw_acme_ari_pick(&w, UINT64_MAX), 1000 + (int64_t)(UINT64_MAX % DAY));
    /* spread: 1000 draws of a simple generator fall in every tenth of the window */
    unsigned tenths[10] = {0};
    uint64_t r = 88172645463325252ull;
    for (int i = 0; i < 1000; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17; /* xorshift64 */
        int64_t t = gw_acme_ari_pick(&w, r);
        assert_true(t >= w.start && t < w.end);
        tenths[(t - w.start) * 10 / DAY]++;
    }
    for (int i = 0; i < 10; i++)
        assert_in_range(tenths[i], 50, 150);
}

static void test_hourly_cap_defers_the_fourth_order(void **state)
{
    (void)state;
    gw_acme_starts_t s = {0};
    const int64_t t0 = 1000000000000;
    /* three orders in a minute (the backoff's first waits): allowed */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gw_acme_cap_next(&s, 3, t0 + i * 20000), t0 + i * 20000);
        gw_acme_cap_record(&s, t0 + i * 20000);
    }
    /* the fourth: an hour after the first */
    assert_int_equal(gw_acme_cap_next(&s, 3, t0 + 60000), t0 + 3600000);
    assert_int_equal(gw_acme_cap_next(&s, 3, t0 + 3599999), t0 + 3600000);
    assert_int_equal(gw_acme_cap_next(&s, 3, t0 + 3600000), t0 + 3600000);
    gw_acme_cap_record(&s, t0 + 3600000);
    /* the next one: an hour after the second (a sliding hour, not a clock hour) */
    assert_int_equal(gw_acme_cap_next(&s, 3, t0 + 3600001), t0 + 20000 + 3600000);
    /* a larger cap lets it through now; a cap of one waits an hour after the last */
    assert_int_equal(gw_acme_cap_next(&s, 5, t0 + 3600001), t0 + 3600001);
    assert_int_equal(gw_acme_cap_next(&s, 1, t0 + 3600001), t0 + 7200000);
    /* the ring wraps: GW_ACME_MAX_ORDERS_PER_HOUR + 5 starts, a minute apart */
    gw_acme_starts_t r = {0};
    for (int i = 0; i < GW_ACME_MAX_ORDERS_PER_HOUR + 5; i++)
        gw_acme_cap_record(&r, t0 + i * 60000);
    int64_t now = t0 + (GW_ACME_MAX_ORDERS_PER_HOUR + 5) * 60000;
    assert_int_equal(gw_acme_cap_next(&r, GW_ACME_MAX_ORDERS_PER_HOUR, now),
                     t0 + 5 * 60000 + 3600000);
    assert_int_equal(gw_acme_cap_next(&r, 2, now), now - 2 * 60000 + 3600000);
}

static void test_hourly_cap_kept_as_text_and_clock_set_back(void **state)
{
    (void)state;
    const int64_t t0 = 1000000000000;
    gw_acme_starts_t s = {0}, r;
    char text[GW_ACME_CAP_TEXT];
    /* empty: nothing written, nothing read */
    assert_int_equal(gw_acme_cap_format(&s, text, sizeof(text)), 0);
    gw_acme_cap_parse(&r, "", 0);
    assert_int_equal(r.n, 0);
    /* more than the ring holds, written and read back: the last GW_ACME_MAX_ORDERS_PER_HOUR,
     * oldest first, and the same answers */
    for (int i = 0; i < GW_ACME_MAX_ORDERS_PER_HOUR + 3; i++)
        gw_acme_cap_record(&s, t0 + i * 1000);
    size_t n = gw_acme_cap_format(&s, text, sizeof(text));
    assert_true(n > 0 && n < sizeof(text));
    assert_memory_equal(text, "1000000003000\n1000000004000\n", 28);
    gw_acme_cap_parse(&r, text, n);
    assert_int_equal(r.n, GW_ACME_MAX_ORDERS_PER_HOUR);
    for (unsigned max = 1; max <= GW_ACME_MAX_ORDERS_PER_HOUR; max += 7)
        assert_int_equal(gw_acme_cap_next(&r, max, t0 + 70000),
                         gw_acme_cap_next(&s, max, t0 + 70000));
    /* a file gone wrong: lines that are not times skipped, a last line without its newline */
    static const char bad[] = "12x\n\n-5\n99999999999999999999\n1000000000000\n1000000001000";
    gw_acme_cap_parse(&r, bad, sizeof(bad) - 1);
    assert_int_equal(r.n, 2);
    assert_int_equal(gw_acme_cap_next(&r, 2, t0 + 2000), t0 + 3600000);
    /* too small a buffer: nothing */
    assert_int_equal(gw_acme_cap_format(&s, text, 10), 0);
    assert_string_equal(text, "");
    /* the clock set back a day after three orders: the wait is an hour, not a day and one */
    gw_acme_starts_t c = {0};
    for (int i = 0; i < 3; i++)
        gw_acme_cap_record(&c, t0 + i * 1000);
    int64_t back = t0 - 86400000;
    assert_int_equal(gw_acme_cap_next(&c, 3, back), back + 3600000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_renew_at_default_duration_share_and_halved),
        cmocka_unit_test(test_ari_cert_id_of_the_rfc_example),
        cmocka_unit_test(test_ari_directory_renewal_info),
        cmocka_unit_test(test_rfc3339_times),
        cmocka_unit_test(test_ari_answers_scripted),
        cmocka_unit_test(test_ari_pick_stays_inside_the_window),
        cmocka_unit_test(test_hourly_cap_defers_the_fourth_order),
        cmocka_unit_test(test_hourly_cap_kept_as_text_and_clock_set_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
