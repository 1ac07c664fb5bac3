/* h2/hpack.h — HPACK header compression (RFC 7541), sans-IO.
 *
 * Decoder: fed the bytes of one header block (possibly in fragments), calls back once per
 * field. Encoder: appends the encoding of a field list to a byte buffer. Both keep a dynamic
 * table bounded by its configured size (RFC 7541 §4), so their memory is bounded whatever the
 * peer sends.
 *
 * Encoder policy: a field equal to a static or dynamic entry is sent indexed (1 byte for the
 * first 127 entries); otherwise as a literal with incremental indexing, with the name as an
 * index when the name is known, so that a response header set repeated on a connection comes
 * out as indexed fields the second time. Exceptions: `authorization`, `proxy-authorization`,
 * `cookie`, `set-cookie` and fields flagged GW_HPACK_F_NEVER_INDEX are literals never indexed
 * (RFC 7541 §7.1.3); fields flagged GW_HPACK_F_NO_INDEX, values larger than half the table,
 * and `:path`, `age` and `x-request-id` (values that rarely repeat) are literals without
 * indexing; fields never or not indexed by name are not looked for in the dynamic table.
 * `content-length`, `date`, `etag`, `last-modified` and `expires` are indexed: a connection
 * that gets the same resource again gets them as one byte each. Strings are Huffman coded
 * when that is shorter.
 */
#ifndef GW_H2_HPACK_H
#define GW_H2_HPACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"

/* The largest dynamic table (§4.2) a decoder is given or an encoder keeps (2 MiB; the
 * configuration's bound, h2.header_table_size, is 1 MiB): larger sizes are taken as this. */
#define GW_HPACK_MAX_TABLE ((size_t)65535 * 32)

#define GW_HPACK_F_NEVER_INDEX 0x1 /* was / must be sent as never indexed (§6.2.3) */
#define GW_HPACK_F_NO_INDEX 0x2    /* encode as a literal without indexing (§6.2.2) */

typedef struct {
    gw_slice_t name, value;
    unsigned flags;
} gw_hpack_field_t;

/* An entry of a dynamic table (§2.3.2), as gw_hpack_table_get shows it: its name bytes then its
 * value bytes at data, valid until the table changes. */
typedef struct {
    const uint8_t *data;
    uint32_t name_len, value_len;
} gw_hpack_entry_t;

typedef struct {
    /* Dynamic table (§2.3.2): a ring of cap slots, newest at index 62, in one block allocated
     * on the first insertion: the slots (each its entry's offset among the records; an
     * encoder's (indexed) also its hash and bucket chain); an encoder's table then has its
     * bucket heads, cap / 2 of them, each the slot + 1 of the newest entry whose hash falls
     * there (0 = none); then bunits * 32 bytes of records, oldest first, each an entry's
     * lengths and its name and value. */
    uint32_t *offs;
    /* 32-bit: a table is bounded by a SETTINGS_HEADER_TABLE_SIZE (a 32-bit value), and every
     * HTTP/2 connection keeps two tables for its whole life */
    uint32_t head;   /* slot of the newest entry */
    uint32_t len;    /* entries in use */
    uint32_t cap;    /* slots allocated: 0, or 16 << k (a power of two) */
    uint32_t size;   /* §4.1 size: sum of name + value + 32 */
    uint32_t max;    /* current maximum size */
    uint8_t indexed; /* entries are found by hash (the encoder's table) */
    uint16_t bunits; /* the block's byte space, in units of 32 bytes (0: no block) */
} gw_hpack_table_t;

/* Buffers for Huffman-decoded strings, kept between blocks for speed, given back by
 * gw_hpack_dec_trim(); or the caller's, shared by decoders (gw_hpack_dec_share_bufs). They
 * hold the string of the representation being decoded, nothing across gw_hpack_decode calls. */
typedef struct {
    gw_bytes_t name, value;
} gw_hpack_strbufs_t;

/* Free a strbufs' buffers (not the struct). */
void gw_hpack_strbufs_free(gw_hpack_strbufs_t *b);

typedef struct gw_hpack_dec {
    gw_hpack_table_t t;
    uint32_t max_allowed;     /* the SETTINGS_HEADER_TABLE_SIZE we advertised */
    uint32_t fields;          /* representations decoded in this block (size updates excluded) */
    size_t max_list;          /* of the current block */
    size_t list_size;         /* running §4.1 size of the current block */
    uint8_t overflow;         /* list size passed max_list: fields are no longer reported */
    uint8_t pending;          /* a partial representation was left unconsumed */
    uint8_t shared_bufs;      /* bufs are the caller's (gw_hpack_dec_share_bufs) */
    gw_hpack_strbufs_t *bufs; /* NULL until a string needs one */
} gw_hpack_dec_t;

/* 0 or GW_E_NOMEM. max_table_size: the SETTINGS_HEADER_TABLE_SIZE we advertise. */
int gw_hpack_dec_init(gw_hpack_dec_t *d, size_t max_table_size);
void gw_hpack_dec_free(gw_hpack_dec_t *d);
/* Give back the string buffers (between blocks; an idle connection's decoder then holds only
 * its dynamic table). The table is untouched. */
void gw_hpack_dec_trim(gw_hpack_dec_t *d);
/* Decode Huffman strings into bufs, the caller's, instead of buffers of d's own: decoders that
 * never decode at the same time (one thread's) share them, so a decoder of a connection that
 * comes back after thousands of others finds them in the cache, and no connection keeps its
 * own. d's buffers, if any, are given back; bufs must outlive d (or the next call). NULL
 * returns d to buffers of its own. */
void gw_hpack_dec_share_bufs(gw_hpack_dec_t *d, gw_hpack_strbufs_t *bufs);
/* Our advertised limit changed (after the peer ACKed our SETTINGS). */
void gw_hpack_dec_set_max_table_size(gw_hpack_dec_t *d, size_t max);

typedef int (*gw_hpack_field_cb)(void *user_data, const gw_hpack_field_t *f);

/* Start a header block whose fields may total max_list_size (§4.1 sizes). */
void gw_hpack_dec_begin(gw_hpack_dec_t *d, size_t max_list_size);

/* Decode representations from in[0..len). Returns the bytes consumed (whole representations
 * only) or a negative code. final == 0: an incomplete representation at the end is left
 * unconsumed; the caller passes those bytes again, followed by the next fragment. final == 1:
 * an incomplete representation is GW_E_COMPRESSION. The callback's slices are valid only
 * during the call. A negative return from the callback aborts decoding with that code. Past
 * max_list_size the table is still updated but the callback is not called and d->overflow is
 * set. cb may be NULL: the table is updated and the list size counted, nothing is reported.
 * Whenever fields are not reported (cb NULL or past max_list_size), a literal that does not
 * enter the table is checked and measured but not materialised (no copy, no buffer), so such
 * a block costs its own bytes, not the size of the entries it names. Decoding errors (index 0 or
 * past the table, integer overflow, a size update above the advertised maximum or after a field,
 * bad Huffman) are GW_E_COMPRESSION; GW_E_NOMEM when a table entry or string cannot be allocated.
 */
ssize_t gw_hpack_decode(gw_hpack_dec_t *d, const uint8_t *in, size_t len, int final,
                        gw_hpack_field_cb cb, void *user_data);

/* End of the block: 0, GW_E_LIMIT if the list overflowed, GW_E_COMPRESSION if a partial
 * representation is pending. */
int gw_hpack_dec_end(gw_hpack_dec_t *d);

typedef struct gw_hpack_enc {
    gw_hpack_table_t t;
    uint32_t own_max;       /* our own cap on the encoder table */
    uint32_t peer_max;      /* the peer's SETTINGS_HEADER_TABLE_SIZE */
    uint32_t min_pending;   /* smallest size since the last block (§4.2), or UINT32_MAX */
    uint8_t update_pending; /* a size update must open the next block */
    /* slot + 1 of the first entry the last block found in the table (0 = none): where the
     * next block's fields are looked for first (gw_hpack_encode), in the padding after
     * update_pending (no byte more per connection) */
    uint16_t run_start;
} gw_hpack_enc_t;

/* 0 or GW_E_NOMEM. max_table_size: our own cap (4096 is usual). */
int gw_hpack_enc_init(gw_hpack_enc_t *e, size_t max_table_size);
void gw_hpack_enc_free(gw_hpack_enc_t *e);
/* The peer's SETTINGS_HEADER_TABLE_SIZE. The table size becomes min(own cap, peer_max); the
 * next block starts with the size update(s) of §6.3 (the minimum reached, then the final). */
void gw_hpack_enc_set_peer_max(gw_hpack_enc_t *e, size_t peer_max);
/* Append the encoding of fields[0..n) to out. Names must be lowercase. 0, GW_E_NOMEM or
 * GW_E_LIMIT (out's cap); on error out is left as it was. */
int gw_hpack_encode(gw_hpack_enc_t *e, const gw_hpack_field_t *fields, size_t n, gw_bytes_t *out);

/* Huffman coding (§5.2, Appendix B). */
size_t gw_hpack_huff_encoded_len(const uint8_t *s, size_t len);
/* Writes gw_hpack_huff_encoded_len(s, len) bytes to out; returns that count. */
size_t gw_hpack_huff_encode(const uint8_t *s, size_t len, uint8_t *out);
/* Appends the decoding to out: 0, GW_E_COMPRESSION, GW_E_NOMEM or GW_E_LIMIT. */
int gw_hpack_huff_decode(const uint8_t *s, size_t len, gw_bytes_t *out);

/* Number of entries / §4.1 size of a table (tests and stats). */
static inline size_t gw_hpack_table_len(const gw_hpack_table_t *t)
{
    return t->len;
}
static inline size_t gw_hpack_table_size(const gw_hpack_table_t *t)
{
    return t->size;
}
/* Entry i of the dynamic table, 0 = newest, into *e: 1, or 0 past the end. */
int gw_hpack_table_get(const gw_hpack_table_t *t, size_t i, gw_hpack_entry_t *e);

#endif
