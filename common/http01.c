/* common/http01.c — the process's table of http-01 answers (RFC 8555 §8.3): a fixed array
 * under one mutex. A few entries at a time (one per name being validated), so a linear scan
 * is the whole index. */
#include <pthread.h>
#include <string.h>

#include "common/err.h"
#include "common/http01.h"

typedef struct {
    const void *owner; /* NULL: a free entry */
    size_t token_len, authz_len;
    char token[GW_HTTP01_TOKEN_MAX];
    char authz[GW_HTTP01_AUTHZ_MAX];
} entry_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t table[GW_HTTP01_MAX];
static size_t used;

/* The entry of token (lock held), or NULL. */
static entry_t *find(const char *token, size_t len)
{
    for (size_t i = 0; i < GW_HTTP01_MAX; i++)
        if (table[i].owner && table[i].token_len == len && !memcmp(table[i].token, token, len))
            return &table[i];
    return NULL;
}

int gw_http01_publish(const void *owner, const char *token, const char *key_authz)
{
    size_t tl = token ? strlen(token) : 0, al = key_authz ? strlen(key_authz) : 0;
    if (!owner || tl == 0 || tl > GW_HTTP01_TOKEN_MAX || al == 0 || al > GW_HTTP01_AUTHZ_MAX)
        return GW_E_INVAL;
    pthread_mutex_lock(&lock);
    entry_t *e = find(token, tl);
    for (size_t i = 0; !e && i < GW_HTTP01_MAX; i++)
        if (!table[i].owner) {
            e = &table[i];
            used++;
        }
    if (e) {
        e->owner = owner;
        e->token_len = tl;
        e->authz_len = al;
        memcpy(e->token, token, tl);
        memcpy(e->authz, key_authz, al);
    }
    pthread_mutex_unlock(&lock);
    return e ? 0 : GW_E_LIMIT;
}

size_t gw_http01_withdraw(const void *owner)
{
    size_t n = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; owner && i < GW_HTTP01_MAX; i++)
        if (table[i].owner == owner) {
            /* the key authorization is not a secret (the server sends the token, the
             * thumbprint is public), but a withdrawn answer leaves nothing behind */
            memset(&table[i], 0, sizeof(table[i]));
            n++;
        }
    used -= n;
    pthread_mutex_unlock(&lock);
    return n;
}

ssize_t gw_http01_find(const uint8_t *token, size_t len, char *out, size_t cap)
{
    ssize_t rv = GW_E_NOENT;
    if (len == 0 || len > GW_HTTP01_TOKEN_MAX)
        return rv;
    pthread_mutex_lock(&lock);
    const entry_t *e = find((const char *)token, len);
    if (e && e->authz_len > cap) {
        rv = GW_E_BUFS;
    } else if (e) {
        memcpy(out, e->authz, e->authz_len);
        rv = (ssize_t)e->authz_len;
    }
    pthread_mutex_unlock(&lock);
    return rv;
}

#ifdef GW_TEST_API /* built with the unit tests only (meson.build) */
size_t gw_http01_count(void)
{
    pthread_mutex_lock(&lock);
    size_t n = used;
    pthread_mutex_unlock(&lock);
    return n;
}
#endif
