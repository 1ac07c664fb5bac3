/* Unit tests of proxy/auth.c's Authorization parser (RFC 7617 §2): the scheme in any case, the
 * base64 checked strictly, the user-id without ':', no control characters, the size bound. */
#include "proxy_test_util.h"

#include "common/err.h"

static int creds(const char *v, char *user, char *pass)
{
    uint8_t out[GW_PROXY_AUTH_CRED_MAX];
    size_t ul, pl;
    int rv = gw_proxy__basic_credentials(gw_slice_str(v), out, sizeof(out), &ul, &pl);
    if (rv == 0) {
        memcpy(user, out, ul);
        user[ul] = 0;
        memcpy(pass, out + ul + 1, pl);
        pass[pl] = 0;
    }
    return rv;
}

static void test_accepted(void **st)
{
    (void)st;
    char u[GW_PROXY_AUTH_CRED_MAX], p[GW_PROXY_AUTH_CRED_MAX];
    assert_int_equal(creds("Basic YWxpY2U6c2VjcmV0", u, p), 0); /* alice:secret */
    assert_string_equal(u, "alice");
    assert_string_equal(p, "secret");
    assert_int_equal(creds("bAsIc   YWxpY2U6c2VjcmV0", u, p), 0); /* §2: scheme any case */
    assert_string_equal(u, "alice");
    assert_int_equal(creds("Basic YTpiOmM=", u, p), 0); /* a:b:c: the password may hold ':' */
    assert_string_equal(u, "a");
    assert_string_equal(p, "b:c");
    assert_int_equal(creds("Basic OnB3", u, p), 0); /* ":pw": an empty user-id parses */
    assert_string_equal(u, "");
    assert_string_equal(p, "pw");
    assert_int_equal(creds("Basic YWI6", u, p), 0); /* "ab:": an empty password */
    assert_string_equal(u, "ab");
    assert_string_equal(p, "");
    assert_int_equal(creds("Basic w7w6cA==", u, p), 0); /* UTF-8 user-id (§2.1) */
    assert_string_equal(u, "\xc3\xbc");
}

static void test_refused(void **st)
{
    (void)st;
    char u[GW_PROXY_AUTH_CRED_MAX], p[GW_PROXY_AUTH_CRED_MAX];
    static const char *const bad[] = {
        "",
        "Basic",
        "Basic ",
        "BasicYWxpY2U6c2VjcmV0",     /* no space */
        "Bearer YWxpY2U6c2VjcmV0",   /* another scheme */
        "Digest username=\"alice\"", /* another scheme */
        "Basic YWxpY2U6c2VjcmV0 ",   /* trailing space */
        "Basic YWxpY2U6c2VjcmV",     /* length not a multiple of 4 */
        "Basic YWxpY2U6c2VjcmV0=",   /* padding where none belongs */
        "Basic YTpiOmM",             /* padding missing */
        "Basic YTpi=mM=",            /* '=' inside */
        "Basic YWxp Y2U6c2VjcmV0",   /* a space inside */
        "Basic YWxpY2U6c2VjcmV0\t",  /* a tab */
        "Basic YWxpY2U6c2VjcmV0-_",  /* base64url characters */
        "Basic YTpiOmN=",            /* non-zero bits after the last byte */
        "Basic bm9jb2xvbg==",        /* "nocolon" */
        "Basic YQE6cA==",            /* a control character (§2) */
        "Basic realm=\"x\"",         /* an auth-param, not token68 */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (creds(bad[i], u, p) != GW_E_PARSE)
            fail_msg("accepted: '%s'", bad[i]);
    }
}

static void test_size_bound(void **st)
{
    (void)st;
    /* 1023 decoded bytes fit GW_PROXY_AUTH_CRED_MAX; 1026 do not */
    static char v[2048];
    char u[GW_PROXY_AUTH_CRED_MAX], p[GW_PROXY_AUTH_CRED_MAX];
    strcpy(v, "Basic YTpi"); /* "a:b", then "aaa" groups ("YWFh") */
    for (int i = 0; i < 340; i++)
        strcat(v, "YWFh");
    assert_int_equal(creds(v, u, p), 0);
    assert_int_equal(strlen(p), 1 + 340 * 3);
    strcat(v, "YWFh");
    assert_int_equal(creds(v, u, p), GW_E_PARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_size_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
