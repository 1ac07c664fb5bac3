/* acme/acme_internal.h — what the files of gateway/acme/ share (not a public interface).
 *
 * jws.c:   base64url, the account key as a JWK and its thumbprint, key authorizations, the
 *          signed request bodies (JWS, ES256) and the CSR.
 * order.c: the state machine of one order, from the directory to the certificate chain.
 */
#ifndef GW_ACME_INTERNAL_H
#define GW_ACME_INTERNAL_H

#include "acme/order.h"

/* The prefix of the ACME error types (RFC 8555 §6.7). */
#define GW_ACME_ERR_PREFIX "urn:ietf:params:acme:error:"

/* s is non-empty and only of the base64url alphabet (RFC 4648 §5), no padding. */
int gw_acme__is_b64url(const char *s);

#endif
