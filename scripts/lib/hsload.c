/* hsload: a TLS handshake load for scripts/bench (the handshake and resume scenarios).
 *
 * h2load keeps its connections and cannot resume a session, so a handshake per request needs
 * its own client. N connections over C worker processes (fork), each connection: connect,
 * a full TLS 1.3 handshake (or, with --resume, one offering the ticket of the worker's
 * previous connection, as a browser does), one GET (HTTP/2 by ALPN, or HTTP/1.1 with --h1),
 * the answer read to its end, close. Every worker's first connection is a full handshake
 * (it has no ticket yet). A ticket is used once, as browsers do (RFC 8446 appendix C.4: a
 * client should not reuse a ticket), so resumption lasts only while the server sends a new
 * ticket on resumed connections too. Prints one line:
 *
 *   handshakes=N ok=N failed=N resumed=N ticketed=N seconds=S rate=R p50_ms=X p99_ms=Y
 *
 * where ok counts the connections answered 200, resumed those SSL_session_reused() reported,
 * ticketed those that received at least one new ticket, and the percentiles are of the time
 * from connect to the answer's last byte.
 *
 * Key exchange X25519 (as browsers and h2load offer first), the server signs with its
 * certificate's key (ECDSA P-256 in scripts/bench).
 * Without --resume the tickets a server sends are read and dropped (the server's cost of
 * issuing them stays in the figure, as with a browser that comes back later).
 *
 * With --size BYTES an answer counts only when its body is that long (openssl s_server -WWW
 * answers 200 even for a file it cannot open).
 *
 * Usage: hsload [--resume] [--h1] [--cipher SUITE] [--size BYTES] HOST PORT PATH N C
 * Built by scripts/bench: cc -O2 -Wall -Wextra -Werror hsload.c -lssl -lcrypto */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct opts {
    int resume;
    int h1;
    const char *cipher;
    const char *host;
    int port;
    const char *path;
    long n;
    int c;
    long size; /* the body's expected length, or -1 */
};

/* What a worker sends its parent through a pipe. */
struct tally {
    long ok;
    long failed;
    long resumed;
    long ticketed;
    long nlat;
};

static SSL_SESSION *saved; /* the worker's latest unused ticket (--resume) */
static long tickets;       /* tickets received by this worker */

static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    (void)ssl;
    if (saved)
        SSL_SESSION_free(saved);
    saved = sess;
    tickets++;
    return 1; /* we keep the reference */
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int write_all(SSL *ssl, const unsigned char *p, size_t len)
{
    while (len > 0) {
        int w = SSL_write(ssl, p, (int)len);
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* HTTP/1.1: a GET with Connection: close, read to the end; 0 when the status line is 200. */
static int get_h1(SSL *ssl, const struct opts *o)
{
    char req[512];
    int len = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                       o->path, o->host);
    if (len < 0 || (size_t)len >= sizeof req || write_all(ssl, (unsigned char *)req, (size_t)len))
        return -1;
    /* the head is kept until its blank line; then only the body's bytes are counted */
    char head[4096];
    size_t have = 0;
    long body = -1;
    char buf[16384];
    for (;;) {
        int r = SSL_read(ssl, buf, sizeof buf);
        if (r <= 0)
            break;
        if (body >= 0) {
            body += r;
            continue;
        }
        size_t take = sizeof head - 1 - have < (size_t)r ? sizeof head - 1 - have : (size_t)r;
        memcpy(head + have, buf, take);
        have += take;
        head[have] = '\0';
        char *end = strstr(head, "\r\n\r\n");
        if (end)
            body = (long)(have - (size_t)(end + 4 - head)) + (r - (long)take);
        else if (have == sizeof head - 1)
            return -1; /* a head this long is not what we asked for */
    }
    /* "HTTP/1.x 200", read to the end (Connection: close) */
    if (body < 0 || memcmp(head, "HTTP/1.", 7) != 0 || memcmp(head + 9, "200", 3) != 0)
        return -1;
    return o->size < 0 || body == o->size ? 0 : -1;
}

static void put_frame_head(unsigned char *p, size_t len, int type, int flags, uint32_t stream)
{
    p[0] = (unsigned char)(len >> 16);
    p[1] = (unsigned char)(len >> 8);
    p[2] = (unsigned char)len;
    p[3] = (unsigned char)type;
    p[4] = (unsigned char)flags;
    p[5] = (unsigned char)(stream >> 24);
    p[6] = (unsigned char)(stream >> 16);
    p[7] = (unsigned char)(stream >> 8);
    p[8] = (unsigned char)stream;
}

/* An HPACK literal without indexing, name from the static table (RFC 7541 section 6.2.2):
 * 4-bit name index prefix, then a 7-bit length prefixed raw string. */
static size_t put_literal(unsigned char *p, int name_index, const char *value)
{
    size_t n = 0, len = strlen(value);
    p[n++] = (unsigned char)name_index; /* 0000xxxx: index < 15 fits the prefix */
    if (len < 127) {
        p[n++] = (unsigned char)len;
    } else {
        p[n++] = 127;
        size_t rest = len - 127;
        while (rest >= 128) {
            p[n++] = (unsigned char)(rest % 128 + 128);
            rest /= 128;
        }
        p[n++] = (unsigned char)rest;
    }
    memcpy(p + n, value, len);
    return n + len;
}

static int read_exact(SSL *ssl, unsigned char *p, size_t len)
{
    while (len > 0) {
        int r = SSL_read(ssl, p, (int)len);
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* HTTP/2: preface, empty SETTINGS, one HEADERS on stream 1, frames read until stream 1 ends;
 * 0 when its status was 200. */
static int get_h2(SSL *ssl, const struct opts *o)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    unsigned char out[1024];
    size_t n = sizeof preface - 1;
    memcpy(out, preface, n);
    put_frame_head(out + n, 0, 0x4, 0, 0); /* SETTINGS */
    n += 9;
    size_t hdr = n;
    n += 9;
    size_t block = n;
    out[n++] = 0x82; /* :method GET (static index 2) */
    out[n++] = 0x87; /* :scheme https (static index 7) */
    if (strlen(o->path) + strlen(o->host) > 512)
        return -1;
    n += put_literal(out + n, 4, o->path);             /* :path */
    n += put_literal(out + n, 1, o->host);             /* :authority */
    put_frame_head(out + hdr, n - block, 0x1, 0x5, 1); /* HEADERS, END_STREAM|END_HEADERS */
    if (write_all(ssl, out, n))
        return -1;
    int status_ok = -1;
    long body = 0;
    unsigned char fh[9];
    static unsigned char payload[1 << 24];
    for (;;) {
        if (read_exact(ssl, fh, 9))
            return -1;
        size_t len = ((size_t)fh[0] << 16) | ((size_t)fh[1] << 8) | fh[2];
        int type = fh[3], flags = fh[4];
        uint32_t stream = ((uint32_t)(fh[5] & 0x7f) << 24) | ((uint32_t)fh[6] << 16) |
                          ((uint32_t)fh[7] << 8) | fh[8];
        if (read_exact(ssl, payload, len))
            return -1;
        if (type == 0x7) /* GOAWAY */
            return -1;
        if (stream != 1)
            continue;
        if (type == 0x3) /* RST_STREAM */
            return -1;
        if (type == 0x1 && status_ok < 0) {
            /* the first header field of a response is :status; every server here sends 200
             * as the static table's index 8 (0x88). Skip padding and priority fields
             * (RFC 9113 section 6.2). */
            size_t off = 0;
            if (flags & 0x8)
                off += 1;
            if (flags & 0x20)
                off += 5;
            status_ok = off < len && payload[off] == 0x88 ? 1 : 0;
        }
        if (type == 0x0) { /* DATA: less its padding (RFC 9113 section 6.1) */
            size_t pad = (flags & 0x8) && len > 0 ? (size_t)payload[0] + 1 : 0;
            body += pad <= len ? (long)(len - pad) : 0;
        }
        if ((type == 0x0 || type == 0x1) && (flags & 0x1))
            return status_ok == 1 && (o->size < 0 || body == o->size) ? 0 : -1;
    }
}

static SSL_CTX *make_ctx(const struct opts *o)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return NULL;
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    if (!SSL_CTX_set_ciphersuites(ctx, o->cipher) ||
        !SSL_CTX_set1_groups_list(ctx, "X25519:P-256")) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    static const unsigned char alpn_h2[] = "\x02h2";
    static const unsigned char alpn_h1[] = "\x08http/1.1";
    if (o->h1)
        SSL_CTX_set_alpn_protos(ctx, alpn_h1, sizeof alpn_h1 - 1);
    else
        SSL_CTX_set_alpn_protos(ctx, alpn_h2, sizeof alpn_h2 - 1);
    if (o->resume) {
        SSL_CTX_set_session_cache_mode(ctx,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    }
    return ctx;
}

/* One connection; returns 0 when answered 200; *resumed set from SSL_session_reused,
 * *ticketed when the server sent a new ticket. */
static int one(SSL_CTX *ctx, const struct opts *o, const struct sockaddr_in *sa, int *resumed,
               int *ticketed)
{
    long before = tickets;
    *resumed = 0;
    *ticketed = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0) {
        close(fd);
        return -1;
    }
    SSL *ssl = SSL_new(ctx);
    int rc = -1;
    if (!ssl)
        goto out;
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, "localhost");
    if (o->resume && saved) {
        SSL_set_session(ssl, saved); /* the SSL takes its own reference */
        SSL_SESSION_free(saved);
        saved = NULL; /* used once */
    }
    if (SSL_connect(ssl) != 1)
        goto out;
    rc = o->h1 ? get_h1(ssl, o) : get_h2(ssl, o);
    *resumed = SSL_session_reused(ssl);
    *ticketed = tickets > before;
    SSL_shutdown(ssl);
out:
    if (ssl)
        SSL_free(ssl);
    close(fd);
    ERR_clear_error();
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void worker(const struct opts *o, long count, int fd)
{
    struct tally t = {0, 0, 0, 0, 0};
    double *lat = calloc((size_t)(count > 0 ? count : 1), sizeof *lat);
    SSL_CTX *ctx = make_ctx(o);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)o->port);
    if (!lat || !ctx || inet_pton(AF_INET, o->host, &sa.sin_addr) != 1) {
        t.failed = count;
        count = 0;
    }
    for (long i = 0; i < count; i++) {
        int resumed, ticketed;
        double t0 = now_s();
        if (one(ctx, o, &sa, &resumed, &ticketed) == 0) {
            t.ok++;
            lat[t.nlat++] = now_s() - t0;
        } else {
            t.failed++;
        }
        t.resumed += resumed;
        t.ticketed += ticketed;
    }
    if (write(fd, &t, sizeof t) != (ssize_t)sizeof t ||
        (t.nlat &&
         write(fd, lat, (size_t)t.nlat * sizeof *lat) != (ssize_t)((size_t)t.nlat * sizeof *lat)))
        _exit(1);
    _exit(0);
}

static int usage(void)
{
    fprintf(stderr,
            "usage: hsload [--resume] [--h1] [--cipher SUITE] [--size BYTES] HOST PORT PATH N C\n");
    return 2;
}

static int read_full(int fd, void *p, size_t len)
{
    char *c = p;
    while (len > 0) {
        ssize_t r = read(fd, c, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        len -= (size_t)r;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o = {0, 0, "TLS_AES_128_GCM_SHA256", NULL, 0, NULL, 0, 0, -1};
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--resume") == 0)
            o.resume = 1;
        else if (strcmp(argv[i], "--h1") == 0)
            o.h1 = 1;
        else if (strcmp(argv[i], "--cipher") == 0 && i + 1 < argc)
            o.cipher = argv[++i];
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc && atol(argv[i + 1]) >= 0)
            o.size = atol(argv[++i]);
        else
            return usage();
    }
    if (argc - i != 5)
        return usage();
    o.host = argv[i];
    o.port = atoi(argv[i + 1]);
    o.path = argv[i + 2];
    o.n = atol(argv[i + 3]);
    o.c = atoi(argv[i + 4]);
    if (o.port <= 0 || o.port > 65535 || o.n <= 0 || o.c <= 0 || o.c > o.n)
        return usage();

    int fds[1024];
    pid_t pids[1024];
    if (o.c > 1024)
        return usage();
    double t0 = now_s();
    for (int w = 0; w < o.c; w++) {
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 1;
        }
        long count = o.n / o.c + (w < o.n % o.c);
        pids[w] = fork();
        if (pids[w] < 0) {
            perror("fork");
            return 1;
        }
        if (pids[w] == 0) {
            close(p[0]);
            worker(&o, count, p[1]);
        }
        close(p[1]);
        fds[w] = p[0];
    }
    struct tally sum = {0, 0, 0, 0, 0};
    double *lat = calloc((size_t)o.n, sizeof *lat);
    if (!lat)
        return 1;
    int broken = 0;
    for (int w = 0; w < o.c; w++) {
        struct tally t;
        if (read_full(fds[w], &t, sizeof t) != 0 || t.nlat > o.n - sum.nlat ||
            (t.nlat && read_full(fds[w], lat + sum.nlat, (size_t)t.nlat * sizeof *lat) != 0)) {
            broken = 1;
        } else {
            sum.ok += t.ok;
            sum.failed += t.failed;
            sum.resumed += t.resumed;
            sum.ticketed += t.ticketed;
            sum.nlat += t.nlat;
        }
        close(fds[w]);
        waitpid(pids[w], NULL, 0);
    }
    double secs = now_s() - t0;
    if (broken) {
        fprintf(stderr, "hsload: a worker died without its tally\n");
        sum.failed = o.n - sum.ok;
    }
    qsort(lat, (size_t)sum.nlat, sizeof *lat, cmp_double);
    double p50 = 0, p99 = 0;
    if (sum.nlat) {
        /* nearest rank */
        p50 = lat[(sum.nlat * 50 + 99) / 100 - 1];
        p99 = lat[(sum.nlat * 99 + 99) / 100 - 1];
    }
    printf("handshakes=%ld ok=%ld failed=%ld resumed=%ld ticketed=%ld seconds=%.3f rate=%.1f "
           "p50_ms=%.3f p99_ms=%.3f\n",
           o.n, sum.ok, sum.failed, sum.resumed, sum.ticketed, secs,
           (double)(sum.ok + sum.failed) / secs, p50 * 1e3, p99 * 1e3);
    free(lat);
    return broken;
}
