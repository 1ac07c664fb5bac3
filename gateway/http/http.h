/* http/http.h — the rules of HTTP itself (RFC 9110 and its companions), version-neutral and
 * sans-IO: what a token, a request-target, an authority and a field value may hold, which
 * fields are connection-specific, the request methods and their properties.
 *
 * One home for each rule: the HTTP/1.1 codec (h1/), the HTTP/2 engine (h2/), the translator
 * (proxy/) and the fronts (front/) call these functions instead of keeping a copy. Nothing here
 * allocates or keeps state: every function reads the slice it is given and returns.
 *
 * Files: chars.c (the byte classes and the syntax predicates over them), fields.c (field lists
 * and values), method.c (request methods), list.c (lists and their parameters), sf.c
 * (Structured Field Values), priority.c (the Priority field of RFC 9218), cachectl.c (the
 * Cache-Control and Pragma directives of RFC 9111 §5.2, §5.4, and RFC 5861's), date.c
 * (HTTP-date, RFC 9110 §5.6.7).
 */
#ifndef GW_HTTP_HTTP_H
#define GW_HTTP_HTTP_H

#include <stdint.h>

#include "common/buf.h"

/* ---- byte classes (chars.c) ------------------------------------------------------------ */

/* GW_HTTP_C_*: the classes a byte belongs to, one bit each, in gw_http_char_class[byte]. */
enum {
    GW_HTTP_C_TCHAR = 1u << 0,  /* RFC 9110 §5.6.2 tchar: ALPHA, DIGIT, !#$%&'*+-.^_`|~ */
    GW_HTTP_C_TARGET = 1u << 1, /* RFC 3986 §3.3 pchar, "/" and §3.4 "?": unreserved,
                                   sub-delims, ":", "@", "/", "?" ("%" is checked apart) */
    GW_HTTP_C_HOST = 1u << 2,   /* a host name's or IPv4 address's bytes (RFC 1123 §2.1
                                   letters, digits, "-", "."; and "_"): RFC 3986 §3.2.2's
                                   reg-name as DNS names write it (gw_http_is_authority) */
    GW_HTTP_C_FIELD = 1u << 3,  /* a byte a field value may hold (RFC 9110 §5.5):
                                   field-vchar, obs-text, SP, HTAB; no other control, no DEL */
    GW_HTTP_C_H2NAME = 1u << 4, /* a byte an HTTP/2 field name may hold (RFC 9113 §8.2.1):
                                   0x21-0x7e but uppercase letters and ":" */
};

/* The one table of byte classes: GW_HTTP_C_* bits for every byte value. */
extern const uint8_t gw_http_char_class[256];

/* Non-zero when c is a tchar (RFC 9110 §5.6.2). */
static inline int gw_http_is_tchar(uint8_t c)
{
    return (gw_http_char_class[c] & GW_HTTP_C_TCHAR) != 0;
}

/* Non-zero when c may appear in a field value (GW_HTTP_C_FIELD). */
static inline int gw_http_is_field_byte(uint8_t c)
{
    return (gw_http_char_class[c] & GW_HTTP_C_FIELD) != 0;
}

/* How many bytes at the start of p[0..n) are field bytes (gw_http_is_field_byte), up to n: the
 * offset of the first that is not (a control byte but HTAB, or DEL), or n. Eight bytes at a
 * time: the HTTP/1.1 parser's scan of a head runs over every field line with it. */
size_t gw_http_field_run(const uint8_t *p, size_t n);

/* Non-zero when s is a non-empty token (RFC 9110 §5.6.2): a valid method or field name. */
int gw_http_is_token(gw_slice_t s);

/* Non-zero when s is a non-empty request-target made only of RFC 3986 path and query
 * characters (GW_HTTP_C_TARGET) and "%" followed by two hex digits (pct-encoded, passed on as
 * it is, never decoded). No control byte, space, DEL, byte >= 0x80, '#', or other delimiter: an
 * origin that splits the request line on whitespace must see the request we checked. Covers
 * origin-form and asterisk-form; an absolute-form target is checked by gw_http_target_form. */
int gw_http_is_request_target(gw_slice_t s);

/* RFC 9112 §3.2: which form the request-target t has, and whether its bytes are valid for it.
 * GW_HTTP_TARGET_ORIGIN: it starts with '/' and is gw_http_is_request_target;
 * GW_HTTP_TARGET_ASTERISK: it is "*"; GW_HTTP_TARGET_ABSOLUTE: "http" or "https" (any case)
 * "://" authority path-abempty ["?" query] (§3.2.2), its authority (gw_http_is_authority, not
 * empty: an IP-literal host such as "[::1]:8080" is one) in *authority and what follows it
 * (path and query characters; may be empty, else starts with '/' or '?') in *rest; -1: none
 * of these (another scheme, an authority-form outside CONNECT, an empty authority, userinfo, a
 * byte no form admits, a '[' anywhere but around a well-formed IP-literal host). */
enum { GW_HTTP_TARGET_ORIGIN, GW_HTTP_TARGET_ASTERISK, GW_HTTP_TARGET_ABSOLUTE };
int gw_http_target_form(gw_slice_t t, gw_slice_t *authority, gw_slice_t *rest);

/* Non-zero when s is empty or an RFC 3986 §3.2 authority without userinfo: a host, then nothing
 * or ":" and a port of at most five digits (RFC 3986 §3.2.3; RFC 9110 §4.2.1: a TCP port). The
 * host is either a host name or IPv4 address: 1 to 255 GW_HTTP_C_HOST bytes, no empty label
 * (no leading ".", no "..": RFC 1034 §3.5; a trailing "." is the root's), or an IPv6 literal
 * (gw_http_is_ip_literal). That is narrower than RFC 3986's reg-name, on purpose: it is what
 * `$host` carries into header values and redirect URLs (config/template.c), so every
 * authority the fronts accept is one a route's rules can carry. The rest of reg-name never
 * names a host a client reaches over DNS: pct-encoding ("%61.test"), "~" and the sub-delims
 * ("!$&'()*+,;=", which would also split or end a list or parameter in X-Forwarded-Host or
 * Forwarded). '@' is refused: RFC 9113 §8.3.1 and RFC 9110 §4.2.4 forbid userinfo in http(s)
 * URIs; '[' and ']' anywhere else, or around a malformed literal ("[::1", "[zz]", "[::1]x"),
 * too; so are an unbracketed IPv6 address ("::1"), a second ':', a port with another byte
 * ("a.test:8a") and an empty host before a port (":80", RFC 9110 §4.2.1). */
int gw_http_is_authority(gw_slice_t s);

/* The path of a target (up to its '?') as origins commonly read it, into out (at least p.len
 * + 1 bytes): percent-encoded unreserved bytes decoded (RFC 3986 §6.2.2.2: equivalent), %2F and
 * %5C read as '/' (origins that decode before they route), ';' parameters cut from each
 * segment (Tomcat and Jetty read "/..;/" as "/../"), runs of '/' as one (nginx's
 * merge_slashes), then dot segments removed (RFC 3986 §5.2.4). Its length, at least 1 ("/"). */
size_t gw_http_path_as_read(gw_slice_t p, uint8_t *out);

/* Non-zero when s is exactly an RFC 3986 §3.2.2 IP-literal of an IPv6 address: "["
 * IPv6address "]" (hex groups, at most one "::", an optional dotted IPv4 tail; no zone
 * identifier). "[" IPvFuture "]" ("[v1.xyz]") is refused: it names nothing a client or an
 * origin uses, so the fronts answer it as a malformed authority (400, or a malformed HTTP/2
 * request) rather than route a host that `$host` and redirects cannot carry. */
int gw_http_is_ip_literal(gw_slice_t s);

/* Room for gw_http_ip_literal_canon's output: "[", INET6_ADDRSTRLEN (46, its NUL included),
 * "]". */
#define GW_HTTP_IP6_LITERAL_MAX 48

/* The canonical text (RFC 5952 §4: lower-case hex, no leading zeros, the longest run of two or
 * more zero groups as "::", the first of equal runs; an IPv4-mapped address's last 32 bits
 * dotted, §5) of the IPv6 literal s ("[0:0::0001]" → "[::1]", "[2001:DB8::AB]" →
 * "[2001:db8::ab]"), brackets included, NUL-terminated in out, of cap bytes (at least
 * GW_HTTP_IP6_LITERAL_MAX). Returns its length without the NUL, or 0 when s is not
 * gw_http_is_ip_literal (or cap is too small); out is then untouched. Every spelling of one
 * address gives the same text (RFC 4291 §2.2), so routes compare addresses, not spellings. */
size_t gw_http_ip_literal_canon(gw_slice_t s, char *out, size_t cap);

/* An authority read for comparing origins (gw_http_authority): host points into the
 * authority or, for an IPv6 literal, into ip6, so the struct is not to be copied. */
typedef struct {
    gw_slice_t host; /* a name or IPv4 address as written (not lowercased), or an IPv6
                        literal's canonical text (RFC 5952, gw_http_ip_literal_canon) */
    gw_slice_t port; /* its digits without leading zeros; empty when absent, empty or the
                        scheme's default (RFC 3986 §6.2.3) */
    char ip6[GW_HTTP_IP6_LITERAL_MAX];
} gw_http_authority_t;

/* The authority a (gw_http_is_authority) of a URI of scheme into *out, as every key of an
 * origin compares it (the cache's, coalescing's, learned hints', and a route's host): the
 * host an IPv6 literal's canonical text ([::1], [0::1] and [::0001] are one host), the port
 * a number without the scheme's default (:80 for http, :443 for https; "a.test", "a.test:"
 * and "a.test:080" are one authority of http). 0, or -1 when its host opens a "[" that is no
 * IPv6 literal: *out then holds a as written (the host all of it, the port empty), so what
 * is keyed on it still names that authority alone, without a fallback of the caller's (the
 * fronts' gw_http_is_authority lets no such one through). A host with neither "[" nor ":"
 * costs one memchr. Two authorities name one origin server when gw_http_authority_eq says
 * so. */
int gw_http_authority(gw_slice_t scheme, gw_slice_t a, gw_http_authority_t *out);

/* Whether x and y are the same authority: hosts compared without case (RFC 3986 §6.2.2.1;
 * IPv6 ones as addresses, already canonical), ports as numbers. */
int gw_http_authority_eq(const gw_http_authority_t *x, const gw_http_authority_t *y);

/* Non-zero when s holds a CR, LF or NUL: the bytes no field value may carry in any version
 * (RFC 9110 §5.5, RFC 9113 §8.2.1), whatever else it holds. Eight bytes at a time: for the
 * values of every request and response we write. */
int gw_http_has_crlfnul(gw_slice_t s);

/* ---- fields (fields.c) ----------------------------------------------------------------- */

/* A field value as RFC 9110 §5.5 writes it: only GW_HTTP_C_FIELD bytes (no control but HTAB,
 * no DEL), and no leading or trailing SP / HTAB. The empty value is valid. */
int gw_http_field_value_valid(gw_slice_t v);

/* Non-zero for the connection-specific fields (RFC 9110 §7.6.1, RFC 9113 §8.2.2): connection,
 * keep-alive, proxy-connection, transfer-encoding, upgrade and te, compared
 * case-insensitively. HTTP/2 allows te only as "trailers"; a proxy forwards none of them. */
int gw_http_field_is_connection_specific(gw_slice_t name);

/* A Content-Length value (RFC 9110 §8.6: 1*DIGIT) of 1 to 18 digits into *out: 0, or -1 when
 * it is not one (empty, a sign, a space, 19 digits or more). */
int gw_http_content_length_parse(gw_slice_t v, int64_t *out);

/* ---- request methods (method.c) -------------------------------------------------------- */

/* Any token is a method (RFC 9110 §9.1: "the method token is case-sensitive"; the set is
 * extensible): the HTTP/1.1 and HTTP/2 fronts accept the same methods and refuse the same
 * non-tokens (400, or RST_STREAM(PROTOCOL_ERROR) for HTTP/2). What the gateway does with a
 * request depends on the properties below, which it knows for the methods of RFC 9110 and RFC
 * 5789 only: a method it does not know (`BREW`, `PROPFIND`, a misspelt `get`) is forwarded as
 * unsafe and non-idempotent, so it is never sent twice (retry, pipelining) and never shares an
 * answer (coalescing). CONNECT (§9.3.6) is the one method the gateway refuses itself (405). */

/* GW_HTTP_METHOD_F_*: what RFC 9110 §9.2 says of a method. */
enum {
    GW_HTTP_METHOD_F_SAFE = 1u << 0,       /* §9.2.1: GET, HEAD, OPTIONS, TRACE */
    GW_HTTP_METHOD_F_IDEMPOTENT = 1u << 1, /* §9.2.2: the safe ones, PUT, DELETE: may be sent
                                              again */
    GW_HTTP_METHOD_F_CACHEABLE = 1u << 2,  /* §9.2.3: GET, HEAD, POST (RFC 9111 §3 narrows
                                              POST) */
};

/* Non-zero when m may be a method: a non-empty token (RFC 9110 §9.1, §5.6.2). */
int gw_http_method_valid(gw_slice_t m);

/* The GW_HTTP_METHOD_F_* properties of m (compared case-sensitively); 0 for a method the
 * gateway does not know, whatever it is called. */
unsigned gw_http_method_flags(gw_slice_t m);

/* Non-zero when m may be sent again (GW_HTTP_METHOD_F_IDEMPOTENT). */
static inline int gw_http_method_idempotent(gw_slice_t m)
{
    return (gw_http_method_flags(m) & GW_HTTP_METHOD_F_IDEMPOTENT) != 0;
}

/* Non-zero for CONNECT (§9.3.6), which asks for a tunnel rather than a representation. */
int gw_http_method_is_connect(gw_slice_t m);

/* ---- lists and parameters (list.c) ----------------------------------------------------- */

/* The comma-separated lists of RFC 9110 §5.6.1 (`#element`) and the ";"-separated parameters
 * of one element (§5.6.6), read one element at a time: every slice points into the value
 * given, nothing is allocated. Empty elements are skipped, as §5.6.1 asks of a recipient; the
 * elements come without the OWS around them. Where a separator does not split is the
 * caller's choice (GW_HTTP_LIST_F_*): by default every separator splits, which a caller that
 * only looks for names (Cache-Control directives, Pragma) may prefer, since a piece of a
 * quoted string then errs towards the stricter answer. */

/* GW_HTTP_LIST_F_*: how a list is split. */
enum {
    GW_HTTP_LIST_F_QUOTED = 1u << 0, /* a separator inside a quoted-string (§5.6.4, quoted-pairs
                                        included) does not split */
    GW_HTTP_LIST_F_ANGLE = 1u << 1,  /* nor one inside "<" ... ">" (RFC 8288 §3: the
                                        URI-Reference of a link-value) */
    GW_HTTP_LIST_F_SPACE = 1u << 2,  /* SP and HTAB separate too: a list of bare tokens
                                        (Connection, RFC 9110 §7.6.1) */
};

/* A cursor over a list: p moves towards end. */
typedef struct {
    const uint8_t *p, *end;
    uint8_t sep;   /* ',' for a list, ';' for parameters */
    uint8_t flags; /* GW_HTTP_LIST_F_* */
} gw_http_list_t;

/* A cursor at the start of v (v.base may be NULL when v.len is 0), splitting at sep. */
static inline gw_http_list_t gw_http_list(gw_slice_t v, uint8_t sep, unsigned flags)
{
    return (gw_http_list_t){v.base, v.base ? v.base + v.len : v.base, sep, (uint8_t)flags};
}

/* The next non-empty element into *elem, without the OWS around it: 1, or 0 after the last
 * one. A quoted-string's quotes and escapes stay as written. */
int gw_http_list_next(gw_http_list_t *l, gw_slice_t *elem);

/* An element `value *( OWS ";" OWS parameter )` (RFC 9110 §5.6.6, the media types of §8.3.1,
 * the codings of §12.5.3, the link-values of RFC 8288 §3): returns its value before the first
 * ";" that splits under flags (trimmed; may be empty) and sets *params to a cursor over its
 * parameters (sep ';', the same flags). */
gw_slice_t gw_http_elem_params(gw_slice_t elem, unsigned flags, gw_http_list_t *params);

/* A parameter or directive `name [ BWS "=" BWS value ]` split at its first "=": *name
 * trimmed, *value trimmed with a quoted-string's outer quotes removed (its quoted-pairs left as
 * written). Returns 1 when there is an "=" (the value may be empty), 0 when not (*value is
 * then {NULL, 0}). */
int gw_http_param_split(gw_slice_t param, gw_slice_t *name, gw_slice_t *value);

/* ---- Structured Field Values (sf.c) ---------------------------------------------------- */

/* RFC 8941, read one member or parameter at a time: nothing is allocated, every slice points
 * into the value given. A Dictionary (§3.2) is read with gw_http_sf_dict_next(), the
 * parameters of a member (§3.1.2) with gw_http_sf_param_next() over its `params`. An Inner
 * List (§3.1.1) is checked and returned whole; its items are not read. */

typedef enum {
    GW_HTTP_SF_INTEGER = 1, /* §3.3.1: at most 15 digits, the value in .integer */
    GW_HTTP_SF_DECIMAL,     /* §3.3.2 */
    GW_HTTP_SF_STRING,      /* §3.3.3: raw with its quotes and escapes */
    GW_HTTP_SF_TOKEN,       /* §3.3.4 */
    GW_HTTP_SF_BYTES,       /* §3.3.5: raw with its colons, base64 not decoded */
    GW_HTTP_SF_BOOLEAN,     /* §3.3.6: 0 or 1 in .integer */
    GW_HTTP_SF_INNER_LIST,  /* §3.1.1: raw from "(" to the end of the list's parameters */
} gw_http_sf_type_t;

typedef struct {
    gw_http_sf_type_t type;
    int64_t integer; /* an Integer's value, a Boolean's 0 or 1; 0 for the other types */
    gw_slice_t raw;  /* the item as written (empty for the true of a bare key, §3.2) */
} gw_http_sf_item_t;

typedef struct {
    gw_slice_t key;          /* §3.1.2: lcalpha or "*", then lcalpha, DIGIT, "_-.*" */
    gw_http_sf_item_t value; /* a key without "=" is Boolean true (§3.2) */
    gw_slice_t params;       /* its parameters as written, from the first ";" (may be empty) */
} gw_http_sf_member_t;

/* A cursor over a field value (or over a member's params): p moves towards end. */
typedef struct {
    const uint8_t *p, *end;
} gw_http_sf_t;

/* A cursor at the start of v (v.base may be NULL when v.len is 0). */
static inline gw_http_sf_t gw_http_sf(gw_slice_t v)
{
    return (gw_http_sf_t){v.base, v.base ? v.base + v.len : v.base};
}

/* The next member of a Dictionary into *m: 1, 0 after the last one, or -1 for a malformed
 * member (no key, an item that is none of §3.3's, junk before the next ","), which the cursor
 * skips up to and past the next top-level comma (a comma inside a String does not count), *m
 * then unspecified. RFC 8941 §4.2 fails the whole field on a malformed member; RFC 9218 §4
 * ignores that member only: the caller chooses by going on or not. A later member with the
 * same key replaces an earlier one (§4.2.2): the caller keeps the last. */
int gw_http_sf_dict_next(gw_http_sf_t *c, gw_http_sf_member_t *m);

/* The next parameter at c (a cursor over a member's params) into *key and *value: 1, 0 after
 * the last one, or -1 when the parameters are malformed (never for the params of a member
 * gw_http_sf_dict_next() returned). A key without "=" is Boolean true. */
int gw_http_sf_param_next(gw_http_sf_t *c, gw_slice_t *key, gw_http_sf_item_t *value);

/* RFC 4648: n bytes as base64 (§4, padded with '=') or, with url, base64url (§5, unpadded, as
 * JWS and ACME use it) into out (room for GW_HTTP_BASE64_LEN(n) + 1 bytes: it is
 * NUL-terminated). Returns its length. */
#define GW_HTTP_BASE64_LEN(n) (4 * (((size_t)(n) + 2) / 3))
size_t gw_http_base64(const uint8_t *in, size_t n, char *out, int url);

/* RFC 8941 §4.1.8: n bytes as a Byte Sequence, ":" base64 ":", into out (room for
 * GW_HTTP_SF_BYTES_LEN(n) + 1 bytes: it is NUL-terminated). Returns its length. A List of them
 * (§4.1.1) joins the members with ", ". */
#define GW_HTTP_SF_BYTES_LEN(n) (4 * (((size_t)(n) + 2) / 3) + 2)
size_t gw_http_sf_bytes(const uint8_t *in, size_t n, char *out);

/* ---- the Priority field (priority.c) --------------------------------------------------- */

/* RFC 9218 (extensible priorities). The same value travels in the `priority` request and
 * response field (§5, §8) and in HTTP/2's PRIORITY_UPDATE frame (§7.1). It is a Dictionary of
 * which §4 defines `u` (urgency, Integer 0-7, default 3) and `i` (incremental, Boolean, default
 * false). Unknown keys, their values and parameters are skipped; a malformed member is ignored
 * up to the next top-level comma; a `u` outside 0-7 or of another type is ignored (§4.1), so is
 * an `i` that is not a Boolean (§4.2). The last occurrence of a key wins (RFC 8941 §4.2.2), so
 * `u=1, u=9` leaves the default. */

#define GW_HTTP_PRIO_DEFAULT_URGENCY 3
#define GW_HTTP_PRIO_F_URGENCY 0x1     /* a valid `u` was present */
#define GW_HTTP_PRIO_F_INCREMENTAL 0x2 /* a valid `i` was present */

/* Parse the Priority field value v (v.base may be NULL: no field). *urgency and *incremental
 * are set to the defaults (3, 0) and then to the values found. Returns the GW_HTTP_PRIO_F_*
 * bits of the parameters present (0 = none, defaults apply); never fails. urgency and
 * incremental must not be NULL. */
int gw_http_priority_parse(gw_slice_t v, uint8_t *urgency, uint8_t *incremental);

/* ---- Cache-Control and Pragma (cachectl.c) -------------------------------------------- */

/* RFC 9111 §5.2 (and RFC 5861 §3, §4, RFC 8246): the directives of every Cache-Control field
 * line of a request or a response, gathered into one gw_http_cc_t. The one reader of these
 * directives: coalescing (proxy/coalesce.c) and the cache (cache/) ask it.
 *
 * Lists are split at every comma, quoted or not (no GW_HTTP_LIST_F_QUOTED): a piece of a
 * quoted argument (`private="set-cookie, x"`) is never a directive name looked for, so a
 * reading errs only towards the stricter answer. Names are case-insensitive (§5.2). A
 * qualified no-cache or private (with field names, §5.2.2.4, §5.2.2.7) sets the same bit as
 * the bare directive: the callers treat both as the bare one, the stricter reading. */

/* GW_HTTP_CC_*: one bit per directive. */
enum {
    GW_HTTP_CC_NO_STORE = 1u << 0,         /* §5.2.1.5, §5.2.2.5 */
    GW_HTTP_CC_NO_CACHE = 1u << 1,         /* §5.2.1.4, §5.2.2.4 (qualified or not) */
    GW_HTTP_CC_PRIVATE = 1u << 2,          /* §5.2.2.7 (qualified or not) */
    GW_HTTP_CC_PUBLIC = 1u << 3,           /* §5.2.2.9 */
    GW_HTTP_CC_MUST_REVALIDATE = 1u << 4,  /* §5.2.2.2 */
    GW_HTTP_CC_PROXY_REVALIDATE = 1u << 5, /* §5.2.2.8 */
    GW_HTTP_CC_NO_TRANSFORM = 1u << 6,     /* §5.2.1.6, §5.2.2.6 */
    GW_HTTP_CC_ONLY_IF_CACHED = 1u << 7,   /* §5.2.1.7 */
    GW_HTTP_CC_MUST_UNDERSTAND = 1u << 8,  /* §5.2.2.3 */
    GW_HTTP_CC_IMMUTABLE = 1u << 9,        /* RFC 8246 */
    GW_HTTP_CC_MAX_AGE = 1u << 10,         /* §5.2.1.1, §5.2.2.1: delta-seconds */
    GW_HTTP_CC_S_MAXAGE = 1u << 11,        /* §5.2.2.10: delta-seconds */
    GW_HTTP_CC_MAX_STALE = 1u << 12,       /* §5.2.1.2: optional delta-seconds */
    GW_HTTP_CC_MIN_FRESH = 1u << 13,       /* §5.2.1.3: delta-seconds */
    GW_HTTP_CC_SWR = 1u << 14,             /* RFC 5861 §3 stale-while-revalidate */
    GW_HTTP_CC_SIE = 1u << 15,             /* RFC 5861 §4 stale-if-error */
};

/* RFC 9111 §1.2.2: a delta-seconds too large for us is taken as 2^31. */
#define GW_HTTP_DELTA_MAX 2147483648u
/* max-stale without an argument: any staleness is accepted (§5.2.1.2). */
#define GW_HTTP_MAX_STALE_ANY UINT32_MAX

typedef struct {
    uint32_t flags; /* GW_HTTP_CC_*: the directives present (by name, whatever their argument) */
    uint32_t valid; /* of the directives with an argument: those with at least one valid one */
    uint32_t bad;   /* those with an occurrence whose argument is missing or not delta-seconds,
                       or with two occurrences that disagree (§4.2.1: the answer is then
                       taken as stale) */
    /* the smallest valid argument of each (0 when none is valid): */
    uint32_t max_age, s_maxage, max_stale, min_fresh, swr, sie;
} gw_http_cc_t;

/* delta-seconds (RFC 9111 §1.2.2: 1*DIGIT) into *out, capped at GW_HTTP_DELTA_MAX: 0, or -1
 * when a is empty or holds a non-digit. */
int gw_http_delta_seconds(gw_slice_t a, uint32_t *out);

/* Read the directives of one Cache-Control field value into *cc, adding to what it holds
 * (start from a zeroed gw_http_cc_t; call once per field line). Unknown directives are
 * ignored (§5.2.3). Never fails. */
void gw_http_cc_parse(gw_http_cc_t *cc, gw_slice_t value);

/* The Cache-Control of every field line named cache-control in f[0..n) into *cc (zeroed first). */
void gw_http_cc_fields(gw_http_cc_t *cc, const gw_field_t *f, size_t n);

/* Non-zero when a Pragma field of f[0..n) holds no-cache (RFC 9111 §5.4; a cache honours it
 * only when the request has no Cache-Control, which the caller decides). */
int gw_http_pragma_no_cache(const gw_field_t *f, size_t n);

/* ---- HTTP-date (date.c) ---------------------------------------------------------------- */

/* RFC 9110 §5.6.7: an HTTP-date in any of its three forms (IMF-fixdate, the obsolete RFC 850
 * and asctime forms, as a recipient must accept) into seconds since the epoch (UTC): 0, or -1
 * when v is none of them (a bad day, month, hour…). Reads no clock, so the two-digit year of
 * the RFC 850 form is read as 1970-2069 (§5.6.7 asks for "not more than 50 years ahead":
 * the same answer until 2019+50). Leap seconds (second 60) are accepted. */
int gw_http_date_parse(gw_slice_t v, int64_t *out);

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d (Howard Hinnant's
 * days_from_civil): no time zone, no locale. For the HTTP-date here and RFC 3339 times. */
int64_t gw_http_days_from_civil(int64_t y, int m, int d);

#endif
