/* Unit tests of config/basic_auth.c: the htpasswd file's accepted hash kinds (made by Debian's
 * htpasswd), every refused kind with the user and FILE:LINE named, blank lines, comments,
 * CRLF, repeated users, and a route's basic_auth keys through the loader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include "config_test_util.h"

#include "common/err.h"
#include "config/config.h"

#define BCRYPT "$2y$04$uELP5JGjW95BkgyHZ/1InOxfbahzRCe8qoiAYjPi7G8cfOq5ewl7q"
#define SHA256 "$5$CGzy6iKi59Wtv3LD$iJwwSfkqbZU7E2KMLl06fOzfAJgHOHLgqszr17dCvl7"
#define SHA512                                                                                     \
    "$6$idMqkXoi2aJcIHrR$gi5rL6RSHBUZf.QxbN.slt4u9y/z2ACzElGWSm08xsIn1PJvzymgehV9y47vneZnNdodPaa"  \
    "xAZ7RJAyKKj1jf/"

static const gw_cfg_pos_t AT = {"gw.yaml", 7, 12};

static int parse(const char *text, gw_cfg_htuser_t **u, size_t *n, gw_config_errors_t *e)
{
    memset(e, 0, sizeof(*e));
    return gw_cfg_htpasswd_parse(&AT, "users", text, strlen(text), u, n, e);
}

static void test_accepted_kinds_sorted(void **st)
{
    (void)st;
    gw_cfg_htuser_t *u;
    size_t n;
    gw_config_errors_t e;
    const char *text = "# made by htpasswd\n\n"
                       "carol:" SHA512 "\r\n"
                       "   \t\n"
                       "alice:" BCRYPT "\n"
                       "  # indented comment\n"
                       "bob:" SHA256; /* no final newline */
    assert_int_equal(parse(text, &u, &n, &e), 0);
    assert_int_equal(e.len, 0);
    assert_int_equal(n, 3);
    assert_string_equal(u[0].user, "alice");
    assert_string_equal(u[0].hash, BCRYPT);
    assert_string_equal(u[1].user, "bob");
    assert_string_equal(u[2].user, "carol");
    assert_string_equal(u[2].hash, SHA512); /* the CR is not part of it */
    gw_cfg_basic_auth_t a = {.users = u, .users_len = n};
    assert_ptr_equal(gw_cfg_htuser_find(&a, "bob", 3), &u[1]);
    assert_ptr_equal(gw_cfg_htuser_find(&a, "bobx", 3), &u[1]);
    assert_null(gw_cfg_htuser_find(&a, "bo", 2));
    assert_null(gw_cfg_htuser_find(&a, "bobb", 4));
    assert_null(gw_cfg_htuser_find(&a, "zed", 3));
    gw_cfg_htusers_free(u, n);
}

static void test_2a_2b_and_rounds_accepted(void **st)
{
    (void)st;
    gw_cfg_htuser_t *u;
    size_t n;
    gw_config_errors_t e;
    const char *text =
        "a:$2a$04$uELP5JGjW95BkgyHZ/1InOxfbahzRCe8qoiAYjPi7G8cfOq5ewl7q\n"
        "b:$2b$04$uELP5JGjW95BkgyHZ/1InOxfbahzRCe8qoiAYjPi7G8cfOq5ewl7q\n"
        "c:$5$rounds=1000$CGzy6iKi59Wtv3LD$iJwwSfkqbZU7E2KMLl06fOzfAJgHOHLgqszr17dCvl7\n";
    assert_int_equal(parse(text, &u, &n, &e), 0);
    assert_int_equal(n, 3);
    gw_cfg_htusers_free(u, n);
}

static void test_refused_kinds_named(void **st)
{
    (void)st;
    gw_cfg_htuser_t *u;
    size_t n;
    gw_config_errors_t e;
    const char *text = "ok:" BCRYPT "\n"
                       "dave:$apr1$YjnFATc4$FMwf.f6g3kWUDqlum1YBO/\n"
                       "eve:9Li5u/DsNtMIs\n"
                       "frank:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n"
                       "gina:secret\n"
                       "hal:$1$abc$defdefdefdefdefdefdefd\n"
                       "ivy:$7$whatever\n"
                       "jo:$2y$04$short\n"
                       "kim:$6$salt$tooshort\n"
                       "no colon here\n"
                       ":" BCRYPT "\n"
                       "ok:" SHA256 "\n"
                       "tab\tuser:" BCRYPT "\n";
    assert_int_equal(parse(text, &u, &n, &e), GW_E_PARSE);
    assert_null(u);
    assert_int_equal(n, 0);
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:2: user 'dave' has an MD5 ($apr1$) hash, which "
            "is refused: make it again with htpasswd -B (bcrypt) or -5 (SHA-512)");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:3: user 'eve' has a crypt(3) DES hash (or a "
            "plain-text password), which is refused: make it again with htpasswd -B");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:4: user 'frank' has a SHA-1 ({SHA}) hash, "
            "which is refused: make it again with htpasswd -B");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:5: user 'gina' has a plain-text password (no "
            "hash), which is refused: make it with htpasswd -B");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:6: user 'hal' has an MD5-crypt ($1$) hash, "
            "which is refused: make it again with htpasswd -B");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:7: user 'ivy' has a hash of an unknown kind "
            "(accepted: $2y$, $2b$, $2a$, $5$, $6$)");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:8: user 'jo' has a malformed bcrypt hash "
            "(expected $2y$NN$ and 53 characters)");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:9: user 'kim' has a malformed SHA-crypt hash");
    gw_test_config_assert_has(&e, "gw.yaml:7:12: users file users:10: expected USER:HASH");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:11: the user name must be 1 to 255 bytes");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:12: user 'ok' is repeated (first on line 1)");
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:13: a control character (RFC 7617 §2 forbids "
            "them in a user-id)");
    assert_int_equal(e.len, 12);
    gw_config_errors_free(&e);
}

static void test_empty_file_refused(void **st)
{
    (void)st;
    gw_cfg_htuser_t *u;
    size_t n;
    gw_config_errors_t e;
    assert_int_equal(parse("# nobody yet\n\n", &u, &n, &e), GW_E_PARSE);
    gw_test_config_assert_has(
        &e, "gw.yaml:7:12: users file users:1: no user (a line USER:HASH, made with "
            "htpasswd -B)");
    gw_config_errors_free(&e);
}

/* ---- through the loader ---- */

static char users_path[64];

static int load(const char *auth, gw_config_t **c, gw_config_errors_t *e)
{
    char text[1024];
    snprintf(text, sizeof(text),
             "listen: [{address: \"127.0.0.1:8080\"}]\n"
             "upstreams: {app: {servers: [\"127.0.0.1:9000\"]}}\n"
             "routes:\n"
             "  - upstream: app\n"
             "    basic_auth: %s\n",
             auth);
    memset(e, 0, sizeof(*e));
    *c = NULL;
    return gw_config_load_string("t.yaml", text, strlen(text), c, e);
}

static void test_loader_defaults_and_keys(void **st)
{
    (void)st;
    gw_config_t *c;
    gw_config_errors_t e;
    char a[256];
    snprintf(a, sizeof(a), "{users: %s}", users_path);
    assert_int_equal(load(a, &c, &e), 0);
    const gw_cfg_basic_auth_t *ba = c->routes[0].basic_auth;
    assert_non_null(ba);
    assert_string_equal(ba->realm, "h2gate");
    assert_int_equal(ba->pass, 0);
    assert_int_equal(ba->cache_entries, 1024);
    assert_int_equal(ba->cache_ttl_ms, 60000);
    assert_int_equal(ba->max_failures, 10);
    assert_int_equal(ba->users_len, 1);
    assert_string_equal(ba->users[0].user, "alice");
    gw_config_del(c);
    snprintf(a, sizeof(a),
             "{realm: \"Staff only\", users: %s, pass: true, cache_entries: 0, cache_ttl: 5s, "
             "max_failures: 3}",
             users_path);
    assert_int_equal(load(a, &c, &e), 0);
    ba = c->routes[0].basic_auth;
    assert_string_equal(ba->realm, "Staff only");
    assert_int_equal(ba->pass, 1);
    assert_int_equal(ba->cache_entries, 0);
    assert_int_equal(ba->cache_ttl_ms, 5000);
    assert_int_equal(ba->max_failures, 3);
    gw_config_del(c);
}

static void test_loader_errors(void **st)
{
    (void)st;
    gw_config_t *c;
    gw_config_errors_t e;
    char a[256];
    snprintf(a, sizeof(a), "{realm: 'a\"b', users: %s, cache_tl: 1s}", users_path);
    assert_int_not_equal(load(a, &c, &e), 0);
    assert_null(c);
    gw_test_config_assert_has(
        &e, "t.yaml:5:25: basic_auth realm must be 1 to 200 characters without '\"', '\\' "
            "or control characters");
    gw_test_config_assert_has(&e, "t.yaml:5:64: unknown key 'cache_tl' in basic_auth; did you mean "
                                  "'cache_ttl'?");
    gw_config_errors_free(&e);
    assert_int_not_equal(load("{realm: x}", &c, &e), 0);
    gw_test_config_assert_has(
        &e, "t.yaml:5:17: missing required key 'users' (an htpasswd file) in basic_auth");
    gw_config_errors_free(&e);
    assert_int_not_equal(load("{users: /nonexistent/users}", &c, &e), 0);
    gw_test_config_assert_has(
        &e, "t.yaml:5:25: users file '/nonexistent/users' cannot be read: No such file "
            "or directory");
    gw_config_errors_free(&e);
}

static void test_loader_bad_users_file(void **st)
{
    (void)st;
    char bad[] = "/tmp/gw_htpasswd_bad_XXXXXX";
    int fd = mkstemp(bad);
    assert_true(fd >= 0);
    const char *text = "alice:" BCRYPT "\nbob:$apr1$YjnFATc4$FMwf.f6g3kWUDqlum1YBO/\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    gw_config_t *c;
    gw_config_errors_t e;
    char a[256];
    snprintf(a, sizeof(a), "{users: %s}", bad);
    assert_int_not_equal(load(a, &c, &e), 0);
    char want[512];
    snprintf(want, sizeof(want),
             "t.yaml:5:25: users file %s:2: user 'bob' has an MD5 ($apr1$) hash, which is "
             "refused: make it again with htpasswd -B (bcrypt) or -5 (SHA-512)",
             bad);
    gw_test_config_assert_has(&e, want);
    gw_config_errors_free(&e);
    unlink(bad);
}

int main(void)
{
    snprintf(users_path, sizeof(users_path), "/tmp/gw_htpasswd_XXXXXX");
    int fd = mkstemp(users_path);
    if (fd < 0)
        return 1;
    const char *text = "alice:" BCRYPT "\n";
    if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return 1;
    close(fd);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted_kinds_sorted),
        cmocka_unit_test(test_2a_2b_and_rounds_accepted),
        cmocka_unit_test(test_refused_kinds_named),
        cmocka_unit_test(test_empty_file_refused),
        cmocka_unit_test(test_loader_defaults_and_keys),
        cmocka_unit_test(test_loader_errors),
        cmocka_unit_test(test_loader_bad_users_file),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(users_path);
    return rv;
}
