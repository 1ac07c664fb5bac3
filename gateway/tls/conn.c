/* tls/conn.c — one TLS connection of either role over a BIO of our own (see tls.h). */
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "tls/tls_internal.h"

/* One BIO of our own for both directions instead of a memory BIO pair: every idle connection
 * carries its BIOs, and a memory BIO is a BIO, a lock, a BUF_MEM and its state (about 250
 * bytes each). The write side appends records to t->out, which go to the socket from there, so
 * no BIO_read copy and no BUF_MEM_grow_clean memset (together about 9 % of the gateway's CPU on
 * 256 KiB responses over TLS, perf cpu-clock); the read side hands OpenSSL what gw_tls_feed
 * appended to t->in, and reports "retry" when it is used up (as a memory BIO with
 * BIO_set_mem_eof_return(-1) does). */
/* The ciphertext buffers are lent, not kept. Records go to t->out only until the caller sends
 * them, and what gw_tls_feed puts in t->in only until OpenSSL has read it; then the buffer goes
 * back to the thread, and the next connection that writes (or is fed) gets it, still in the
 * cache. A buffer of its own per connection, kept between requests, was cold by the time its
 * connection used it again when many connections take turns: copying one 1 KiB response's
 * record into it cost 17.5 simulated LL write misses (cachegrind, 1 MiB LL, 500 TLS
 * connections), most of what TLS added per request beside OpenSSL's own state. The thread keeps
 * at most one buffer of each kind (of up to SPARE_MAX bytes; a connection emptying a larger one
 * keeps it until gw_tls_trim, as before), freed when the thread exits. */
#define SPARE_MAX (1u << 20)
enum { SPARE_IN, SPARE_OUT };
static _Thread_local gw_bytes_t spare[2];
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static int spare_key_ok;
static _Thread_local int spare_keyed; /* the thread's destructor is registered */

/* OpenSSL's own record buffers, taken and given back once per record under
 * SSL_MODE_RELEASE_BUFFERS (an idle connection holds none: server.c, client.c), come from a
 * stack of a few blocks per thread instead of glibc's large-chunk paths: a manyconns request
 * (one record each way) spent about 1,200 instructions in the malloc and free of its two
 * 16.5 KiB buffers (callgrind, scripts/lib/cg_manyconns.sh). Every request of a size OpenSSL
 * gives such a buffer (RECBUF_MIN..RECBUF_CAP) gets a block of RECBUF_CAP bytes aligned to
 * RECBUF_ALIGN; a block freed with that alignment and a usable size of RECBUF_CAP..
 * RECBUF_CAP + RECBUF_SLACK goes on the stack (any such glibc block serves any such request).
 * The free hook sees every pointer OpenSSL frees (about 1,100 per full handshake), with no
 * size: the alignment tells it, without a call, that all but about one in 256 of the others
 * (glibc aligns to 16 bytes) cannot be one of these blocks. Asking glibc the usable size of
 * every pointer instead cost about 30,000 instructions per handshake, the call and the frame it
 * needed (scripts/lib/cg_handshake.sh). */
#define RECBUF_MIN 16384u
/* 16 KiB of plaintext with the largest overheads, compression's included */
#define RECBUF_CAP (17u * 1024 + 512)
#define RECBUF_ALIGN 4096u
/* glibc's posix_memalign leaves a tail shorter than its smallest chunk (32 bytes) on the block */
#define RECBUF_SLACK 64u
#define RECBUF_KEEP 4
static _Thread_local void *recbuf[RECBUF_KEEP];
static _Thread_local unsigned recbuf_n;
static int recbuf_on; /* the hooks are installed */
#ifdef GW_TEST_API
static _Thread_local unsigned long recbuf_hits, recbuf_misses, ossl_frees, ossl_sized;
#endif

static void spare_free(void *p)
{
    gw_bytes_t *s = p;
    gw_bytes_free(&s[SPARE_IN]);
    gw_bytes_free(&s[SPARE_OUT]);
    while (recbuf_n)
        free(recbuf[--recbuf_n]);
}

static void spare_key_init(void)
{
    spare_key_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

/* Whether the thread's destructor (spare_free) is registered: what the thread keeps is freed
 * when it exits. */
static int thread_keyed(void)
{
    if (!spare_keyed) {
        pthread_once(&spare_once, spare_key_init);
        spare_keyed = spare_key_ok && pthread_setspecific(spare_key, spare) == 0;
    }
    return spare_keyed;
}

/* A block for the stack (out of line: ossl_malloc's other paths need no frame). */
__attribute__((noinline)) static void *new_recbuf(void)
{
    void *p;
    return posix_memalign(&p, RECBUF_ALIGN, RECBUF_CAP) == 0 ? p : NULL;
}

static void *ossl_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    if (n < RECBUF_MIN || n > RECBUF_CAP || !recbuf_on)
        return malloc(n);
    if (recbuf_n) {
#ifdef GW_TEST_API
        recbuf_hits++;
#endif
        return recbuf[--recbuf_n];
    }
#ifdef GW_TEST_API
    recbuf_misses++;
#endif
    return new_recbuf();
}

static void *ossl_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return realloc(p, n);
}

/* p has a record buffer's alignment: on the thread's stack if it is such a block and there is
 * room, else to glibc. */
__attribute__((noinline)) static void keep_or_free(void *p)
{
#ifdef GW_TEST_API
    ossl_sized++;
#endif
    size_t usable = malloc_usable_size(p);
    if (recbuf_n < RECBUF_KEEP && usable >= RECBUF_CAP && usable - RECBUF_CAP < RECBUF_SLACK &&
        thread_keyed())
        recbuf[recbuf_n++] = p;
    else
        free(p);
}

static void ossl_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
#ifdef GW_TEST_API
    ossl_frees += p != NULL;
#endif
    if (p && ((uintptr_t)p & (RECBUF_ALIGN - 1)) == 0)
        keep_or_free(p);
    else
        free(p);
}

void gw_tls_alloc_init(void)
{
    /* refused once OpenSSL has allocated anything: then its own malloc and free serve */
    if (CRYPTO_set_mem_functions(ossl_malloc, ossl_realloc, ossl_free))
        recbuf_on = 1;
}

#ifdef GW_TEST_API
void gw_tls__recbuf_stats(unsigned long *hits, unsigned long *misses)
{
    *hits = recbuf_hits;
    *misses = recbuf_misses;
}

void gw_tls__free_stats(unsigned long *frees, unsigned long *sized)
{
    *frees = ossl_frees;
    *sized = ossl_sized;
}
#endif

/* b (t->in or t->out) is empty: its buffer goes to the thread when the thread has none of that
 * kind, else it is freed (the thread's is the warmer one to use next). */
static void give_back(gw_bytes_t *b, int kind)
{
    if (!b->cap || b->cap > SPARE_MAX)
        return;
    if (spare[kind].cap || !thread_keyed())
        gw_bytes_free(b);
    else
        spare[kind] = *b;
    gw_bytes_init(b, 0);
}

/* b has no buffer: take the thread's, if it has one. */
static void borrow(gw_bytes_t *b, int kind)
{
    if (!b->cap && spare[kind].cap) {
        *b = spare[kind];
        b->len = 0;
        gw_bytes_init(&spare[kind], 0);
    }
}

static int bio_write_ex(BIO *b, const char *p, size_t n, size_t *done)
{
    gw_tls_conn_t *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    borrow(&t->out, SPARE_OUT);
    if (gw_bytes_append(&t->out, p, n) < 0) {
        *done = 0;
        return 0;
    }
    *done = n;
    return 1;
}

static int bio_read_ex(BIO *b, char *p, size_t n, size_t *done)
{
    gw_tls_conn_t *t = BIO_get_data(b);
    size_t avail = t->in.len - t->in_off;
    BIO_clear_retry_flags(b);
    if (avail == 0) {
        BIO_set_retry_read(b);
        *done = 0;
        return 0;
    }
    if (n > avail)
        n = avail;
    memcpy(p, t->in.base + t->in_off, n);
    t->in_off += n;
    if (t->in_off == t->in.len) {
        t->in.len = t->in_off = 0;
        give_back(&t->in, SPARE_IN);
    }
    *done = n;
    return 1;
}

/* OpenSSL 3.0 calls this about 13 times per request of one record each way, mostly to ask
 * whether the BIO does kernel TLS (answered 0): the connection is looked up only for the
 * two questions that need it. */
static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_WPENDING:
        return (long)((gw_tls_conn_t *)BIO_get_data(b))->out.len;
    case BIO_CTRL_PENDING: {
        const gw_tls_conn_t *t = BIO_get_data(b);
        return (long)(t->in.len - t->in_off);
    }
    default:
        return 0;
    }
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_method_once = PTHREAD_ONCE_INIT;

static void bio_method_init(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "h2gate");
    if (m && (!BIO_meth_set_write_ex(m, bio_write_ex) || !BIO_meth_set_read_ex(m, bio_read_ex) ||
              !BIO_meth_set_ctrl(m, bio_ctrl) || !BIO_meth_set_create(m, bio_create))) {
        BIO_meth_free(m);
        m = NULL;
    }
    bio_method = m; /* lives for the process */
}

gw_tls_conn_t *gw_tls__conn_alloc(SSL_CTX *ssl_ctx, int client)
{
    gw_tls_conn_t *t = gw_calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    gw_bytes_init(&t->in, 0);
    gw_bytes_init(&t->out, 0);
    pthread_once(&bio_method_once, bio_method_init);
    t->ssl = SSL_new(ssl_ctx);
    t->bio = bio_method ? BIO_new(bio_method) : NULL;
    if (!t->ssl || !t->bio) {
        SSL_free(t->ssl);
        BIO_free(t->bio);
        gw_free(t);
        ERR_clear_error();
        return NULL;
    }
    BIO_set_data(t->bio, t);
    SSL_set_bio(t->ssl, t->bio, t->bio); /* one reference, for both directions */
    if (client)
        SSL_set_connect_state(t->ssl);
    else
        SSL_set_accept_state(t->ssl);
    return t;
}

void gw_tls__set_reason(gw_tls_conn_t *t, const char *fallback, const char *fmt, ...)
{
    char buf[192];
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
    } else {
        unsigned long e = ERR_peek_last_error();
        const char *r = e ? ERR_reason_error_string(e) : NULL;
        snprintf(buf, sizeof(buf), "%s", r ? r : fallback);
    }
    ERR_clear_error();
    gw_free(t->reason);
    t->reason = gw_strdup(buf); /* NULL (no memory): the reason reads "" */
}

void gw_tls_conn_del(gw_tls_conn_t *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    gw_bytes_free(&t->in);
    gw_bytes_free(&t->out);
    gw_free(t->reason);
    gw_free(t->peer_verify);
    gw_free(t->peer_subject);
    if (t->client)
        gw_tls__client_ctx_unref(t->client);
    gw_free(t);
}

int gw_tls_feed(gw_tls_conn_t *t, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    if (t->in_off) { /* what OpenSSL left unread moves to the front */
        gw_bytes_consume(&t->in, t->in_off);
        t->in_off = 0;
    }
    borrow(&t->in, SPARE_IN);
    return gw_bytes_append(&t->in, p, n) < 0 ? GW_E_NOMEM : 0;
}

int gw_tls_handshake(gw_tls_conn_t *t)
{
    if (t->no_host) {
        gw_tls__set_reason(t, NULL, "no host name to verify the certificate against");
        return GW_E_PROTO;
    }
    int r = SSL_do_handshake(t->ssl);
    if (r == 1)
        return 1;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    const char *verr = t->client ? gw_tls__client_verify_error(t) : NULL;
    if (verr)
        /* "unable to get local issuer certificate", "hostname mismatch", "IP address
         * mismatch", "certificate has expired", ... */
        gw_tls__set_reason(t, NULL, "certificate verify failed: %s", verr);
    else
        gw_tls__set_reason(t, "handshake failed", NULL);
    if (!t->client)
        GW_LOG_DEBUG("tls_handshake_failed", "reason=\"%s\"", gw_tls_reason(t));
    return GW_E_PROTO;
}

ssize_t gw_tls_read(gw_tls_conn_t *t, void *buf, size_t cap)
{
    size_t n = 0;
    int r = SSL_read_ex(t->ssl, buf, cap, &n);
    if (r == 1)
        return (ssize_t)n;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return GW_E_AGAIN;
    if (e == SSL_ERROR_ZERO_RETURN)
        return GW_E_CLOSED;
    gw_tls__set_reason(t, "read failed", NULL);
    return GW_E_PROTO;
}

int gw_tls_drained(const gw_tls_conn_t *t)
{
    return t->in_off == t->in.len && !SSL_has_pending(t->ssl);
}

int gw_tls_write(gw_tls_conn_t *t, const void *p, size_t n)
{
    size_t w = 0;
    if (n == 0)
        return 0;
    if (SSL_write_ex(t->ssl, p, n, &w) != 1 || w != n) {
        gw_tls__set_reason(t, "write failed", NULL);
        return GW_E_PROTO;
    }
    return 0;
}

/* Each SSL_write is at least one record, with its own AEAD pass and 22 bytes of overhead, and
 * the client's decryption of it. The pieces are one byte stream cut into full records: small
 * pieces (a frame header, a HEADERS block, a 1 KiB DATA payload) are gathered into a record
 * with their neighbours, a large one tops up the record being gathered, then its whole records
 * are encrypted where they lie and its tail starts the next gathered record. Writing a DATA
 * frame's header on its own (in front of a payload sent by reference) made a 9-byte record per
 * frame: two records per 16 KiB frame instead of about one. */
#define TLS_RECORD_MAX 16384u

int gw_tls_writev(gw_tls_conn_t *t, const struct iovec *v, size_t cnt)
{
    uint8_t st[TLS_RECORD_MAX];
    size_t sn = 0;
    for (size_t i = 0; i < cnt; i++) {
        const uint8_t *p = v[i].iov_base;
        size_t n = v[i].iov_len;
        if (n == 0)
            continue;
        if (sn) {
            size_t k = n < sizeof(st) - sn ? n : sizeof(st) - sn;
            memcpy(st + sn, p, k);
            sn += k;
            p += k;
            n -= k;
            if (sn < sizeof(st))
                continue; /* the piece is all in the record */
            if (gw_tls_write(t, st, sn) < 0)
                return GW_E_PROTO;
            sn = 0;
        }
        size_t whole = n - n % TLS_RECORD_MAX;
        if (whole && gw_tls_write(t, p, whole) < 0)
            return GW_E_PROTO;
        if (n > whole)
            memcpy(st, p + whole, n - whole);
        sn = n - whole;
    }
    return sn ? gw_tls_write(t, st, sn) : 0;
}

void gw_tls_trim(gw_tls_conn_t *t)
{
    /* the handshake flights made both buffers grow to a few KiB */
    if (t->in.len == t->in_off && t->in.cap) {
        gw_bytes_free(&t->in);
        gw_bytes_init(&t->in, 0);
        t->in_off = 0;
    }
    if (t->out.len == 0 && t->out.cap) {
        gw_bytes_free(&t->out);
        gw_bytes_init(&t->out, 0);
    }
}

size_t gw_tls_pending_out(const gw_tls_conn_t *t)
{
    return t->out.len - t->out_off;
}

const uint8_t *gw_tls_out_peek(const gw_tls_conn_t *t, size_t *len)
{
    *len = t->out.len - t->out_off;
    return t->out.base + t->out_off;
}

void gw_tls_out_consume(gw_tls_conn_t *t, size_t n)
{
    size_t left = t->out.len - t->out_off;
    if (n >= left) {
        t->out.len = 0;
        t->out_off = 0;
        give_back(&t->out, SPARE_OUT);
    } else {
        t->out_off += n;
    }
}

void *gw_tls_out_hand_over(gw_tls_conn_t *t, size_t *off, size_t *len, size_t *cap)
{
    *off = t->out_off;
    *len = t->out.len - t->out_off;
    *cap = t->out.cap;
    void *base = t->out.base;
    if (!*len)
        return NULL;
    gw_bytes_init(&t->out, 0); /* the next records go to another buffer (borrow) */
    t->out_off = 0;
    return base;
}

void gw_tls_out_release(void *base, size_t cap)
{
    if (!base)
        return;
    gw_bytes_t b;
    gw_bytes_init(&b, 0);
    b.base = base;
    b.cap = cap;
    if (cap > SPARE_MAX) {
        gw_bytes_free(&b);
        return;
    }
    /* the larger one is kept: the thread's may be one a connection took meanwhile for a few
     * records, and the next round of a transfer would grow it again (realloc after realloc) */
    if (spare[SPARE_OUT].cap && spare[SPARE_OUT].cap < cap)
        gw_bytes_free(&spare[SPARE_OUT]);
    give_back(&b, SPARE_OUT);
}

size_t gw_tls_take_out(gw_tls_conn_t *t, void *buf, size_t cap)
{
    size_t n;
    const uint8_t *p = gw_tls_out_peek(t, &n);
    if (n > cap)
        n = cap;
    if (n)
        memcpy(buf, p, n);
    gw_tls_out_consume(t, n);
    return n;
}

void gw_tls_shutdown(gw_tls_conn_t *t)
{
    if (SSL_is_init_finished(t->ssl))
        SSL_shutdown(t->ssl);
    ERR_clear_error();
}

const char *gw_tls_reason(const gw_tls_conn_t *t)
{
    return t->reason ? t->reason : "";
}

const char *gw_tls_alpn(const gw_tls_conn_t *t)
{
    static _Thread_local char proto[32];
    const unsigned char *p = NULL;
    unsigned len = 0;
    SSL_get0_alpn_selected(t->ssl, &p, &len);
    if (!p || len >= sizeof(proto))
        return "";
    memcpy(proto, p, len);
    proto[len] = 0;
    return proto;
}

const char *gw_tls_version(const gw_tls_conn_t *t)
{
    return SSL_get_version(t->ssl);
}

const char *gw_tls_cipher(const gw_tls_conn_t *t)
{
    const SSL_CIPHER *c = SSL_get_current_cipher(t->ssl);
    return c ? SSL_CIPHER_get_name(c) : "-";
}

int gw_tls_resumed(const gw_tls_conn_t *t)
{
    return SSL_session_reused(t->ssl) == 1;
}

const char *gw_tls_sni(const gw_tls_conn_t *t)
{
    return SSL_get_servername(t->ssl, TLSEXT_NAMETYPE_host_name);
}

int gw_tls_h2_cipher_ok(const gw_tls_conn_t *t)
{
    if (SSL_version(t->ssl) >= TLS1_3_VERSION)
        return 1;
    const SSL_CIPHER *c = SSL_get_current_cipher(t->ssl);
    if (!c)
        return 0;
    int kx = SSL_CIPHER_get_kx_nid(c);
    return (kx == NID_kx_ecdhe || kx == NID_kx_dhe) && SSL_CIPHER_is_aead(c);
}
