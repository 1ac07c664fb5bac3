/* common/http01.h — the answers to ACME http-01 challenges (RFC 8555 §8.3): one table per
 * process, token → key authorization, written by the ACME client on the main thread
 * (acme/client.c) and read by every worker's request stage (proxy/request.c), which answers
 * `GET /.well-known/acme-challenge/TOKEN` on the cleartext listeners from it.
 *
 * A token is published before its challenge is POSTed (the server may validate at once) and
 * withdrawn when its order ends, by its owner (one name set's job): gw_http01_withdraw()
 * removes every token of an owner at once. The table is bounded (GW_HTTP01_MAX entries,
 * fixed storage, nothing allocated) and guarded by one mutex held for a copy at most: the
 * workers take it only for a request under the challenge prefix.
 */
#ifndef GW_COMMON_HTTP01_H
#define GW_COMMON_HTTP01_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The path under which the answers are served (RFC 8555 §8.3). */
#define GW_HTTP01_PREFIX "/.well-known/acme-challenge/"
/* Tokens published at once in the process (every name of every order under way), the longest
 * token taken and the longest key authorization (token "." base64url SHA-256 thumbprint). */
#define GW_HTTP01_MAX 256
#define GW_HTTP01_TOKEN_MAX 256
#define GW_HTTP01_AUTHZ_MAX (GW_HTTP01_TOKEN_MAX + 64)

/* Publish key_authz as the answer for token, for owner (any pointer naming who withdraws it;
 * not NULL). A token published again (by any owner) is replaced. Both strings are copied.
 * 0, GW_E_INVAL (an empty or too long token or key authorization, owner NULL) or GW_E_LIMIT
 * (GW_HTTP01_MAX tokens are published). */
int gw_http01_publish(const void *owner, const char *token, const char *key_authz);

/* Withdraw every token of owner. How many were. */
size_t gw_http01_withdraw(const void *owner);

/* The key authorization published for token[0..len) copied into out[0..cap) (not
 * NUL-terminated): its length, GW_E_NOENT (no such token) or GW_E_BUFS (cap too small; a cap
 * of GW_HTTP01_AUTHZ_MAX always suffices). Safe from any thread. */
ssize_t gw_http01_find(const uint8_t *token, size_t len, char *out, size_t cap);

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
/* How many tokens are published. */
size_t gw_http01_count(void);
#endif

#endif
