"""The cases of cases.json that h2gate (cachesuite.h2gate_config) does not pass, each with the
reason. test_cache_suite.py fails when another case fails (a regression) and when one of these
passes (a fix: take it off the list). Upstream's kind is in brackets: [required] conformance,
[optimal] a cache could do better, [check] a survey of behaviour with no right answer."""

_DUP_MAX_AGE = ("[check] two max-age values that disagree: the answer is taken as stale "
                "(RFC 9111 §4.2.1 allows that or the first); the case asks that one be used")
_BAD_MAX_AGE = ("[check] a max-age that is not delta-seconds is invalid and the answer stale "
                "(RFC 9111 §1.2.2); the case asks whether a number is read out of it")
_LAX_MAX_AGE = ("[check] `max-age = 3600` (spaces around '=') is read as max-age=3600; the "
                "case asks that it be ignored (RFC 9110 §5.6.6 has no spaces there)")
_AGE_PARAM = ("[check] an Age that is not delta-seconds (`7200;foo=bar`) is ignored, so the "
              "answer is fresh; the case asks whether 7200 is read out of it")
_DATE_CASE = ("[optimal] HTTP-date day and month names are case-sensitive (RFC 9110 §5.6.7, "
              "%s\"...\"): the Expires is invalid, so the answer is stale (RFC 9111 §5.3)")
_NO_CACHE = ("[optimal] an answer with no-cache and no explicit freshness is not stored (only "
             "answers with max-age, s-maxage or Expires are, issue 41 item 2): request 2 goes "
             "forward unconditionally; the origin's 999 (no 304 generated) becomes a 502 "
             "(RFC 9110 §15: a status outside 100..599 is taken as a 5xx)")
_NO_CACHE_QUALIFIED = ("[check] no-cache with field names is taken as plain no-cache (RFC "
                       "9111 §5.2.2.4 allows it): the answer is revalidated at each use")
_WARNING = "[check] no Warning field on a stale answer (Warning is obsolete in RFC 9111)"
_HEURISTIC = ("heuristic freshness is off (`cache.heuristic: false`, the default; nginx has "
              "none): an answer with only Last-Modified is not stored")
_UNQUOTED = ("[check] an entity-tag without its quotes or with a malformed W/ prefix is not "
             "an entity-tag (RFC 9110 §8.8.3): it matches nothing, so the answer is 200")
_FORWARD_ETAG = ("[check] a malformed entity-tag (no quotes) is sent on as it came, not quoted "
                 "by the cache")
_CONTENT_RANGE = ("a 304's Content-Range does not replace the stored one (gw_cache_304_updates: "
                  "RFC 9111 §3.2 lets a cache keep the fields that describe the stored body)")
_SET_COOKIE = ("answers with Set-Cookie are never stored, whatever their directives (issue 41 "
               "item 2: stricter than RFC 9111 §7.3)")
_HEAD_410 = ("[check] a HEAD answered 410 (or 404) says the resource is gone: the stored GET "
             "answer is removed (proxy/cache.c freshen_by_head), so request 3 goes to the "
             "origin. The case asks that the stored 200 take the 410's fields and its "
             "max-age=1000 instead, i.e. that a 200 the origin calls gone be served for that "
             "long; RFC 9111 §4.3.5 grants updates from a HEAD's 200 only")
_PARTIAL = "[optimal] 206 answers are not stored (issue 41 item 2: full objects only)"
H2GATE = {
    # cc-parse
    "freshness-max-age-two-fresh-stale-sameline": _DUP_MAX_AGE,
    "freshness-max-age-two-fresh-stale-sepline": _DUP_MAX_AGE,
    "freshness-max-age-two-stale-fresh-sameline": _DUP_MAX_AGE,
    "freshness-max-age-two-stale-fresh-sepline": _DUP_MAX_AGE,
    "freshness-max-age-space-before-equals": _LAX_MAX_AGE,
    "freshness-max-age-space-after-equals": _LAX_MAX_AGE,
    "freshness-max-age-decimal-zero": _BAD_MAX_AGE,
    "freshness-max-age-decimal-five": _BAD_MAX_AGE,
    "freshness-max-age-a100": _BAD_MAX_AGE,
    "freshness-max-age-100a": _BAD_MAX_AGE,
    # age-parse
    "age-parse-parameter": _AGE_PARAM,
    "age-parse-numeric-parameter": _AGE_PARAM,
    # expires-parse
    "freshness-expires-wrong-case-weekday": _DATE_CASE,
    "freshness-expires-wrong-case-month": _DATE_CASE,
    "freshness-expires-wrong-case-tz": _DATE_CASE,
    # cc-response
    "cc-resp-no-cache-revalidate": _NO_CACHE,
    "headers-omit-headers-listed-in-Cache-Control-no-cache-single": _NO_CACHE_QUALIFIED,
    "headers-omit-headers-listed-in-Cache-Control-no-cache": _NO_CACHE_QUALIFIED,
    # stale
    "stale-warning-stored": _WARNING,
    "stale-warning-become": _WARNING,
    # heuristic
    **{f"heuristic-{st}-cached": "[optimal] " + _HEURISTIC
       for st in (200, 203, 204, 404, 405, 410, 414, 501, 599)},
    **{f"heuristic-delta-{d}": "[check] " + _HEURISTIC
       for d in (5, 10, 30, 60, 300, 600, 1200, 1800, 3600, 43200, 86400)},
    "pragma-response-no-cache-heuristic": "[check] " + _HEURISTIC,
    "other-heuristic-content-disposition-attachment": "[check] " + _HEURISTIC,
    # method
    "method-POST": "[optimal] only answers to GET are stored (RFC 9111 §3 leaves POST optional)",
    # cc-request
    "ccreq-no-store": ("[check] a request's no-store stops storing its answer, not serving a "
                       "stored one (RFC 9111 §5.2.1.5)"),
    # vary
    "vary-normalise-lang-order": ("[optimal] the Vary key normalises whitespace and combined "
                                  "lines, not the order of Accept-Language's ranges"),
    "vary-normalise-lang-case": ("[optimal] the Vary key keeps the case of values (language "
                                 "tags are case-insensitive: could be folded in key.c)"),
    "vary-normalise-lang-select": ("[optimal] no content negotiation in the Vary key (another "
                                   "Accept-Language that would select the same language)"),
    # conditional-lm
    "conditional-lm-fresh-no-lm": ("[optimal] a stored answer without Last-Modified whose Date "
                                   "is after If-Modified-Since is answered 200, as RFC 9111 "
                                   "§4.3.2 (second case) gives; the case expects a 304"),
    # conditional-inm
    "conditional-etag-quoted-respond-unquoted": _UNQUOTED,
    "conditional-etag-unquoted-respond-unquoted": _UNQUOTED,
    "conditional-etag-unquoted-respond-quoted": _UNQUOTED,
    "conditional-etag-weak-respond-lowercase": _UNQUOTED,
    "conditional-etag-weak-respond-backslash": _UNQUOTED,
    "conditional-etag-weak-respond-omit-slash": _UNQUOTED,
    "conditional-etag-vary-headers-mismatch": ("[check] validating for another Vary variant "
                                               "sends no If-None-Match with the stored "
                                               "variants' ETags (RFC 9111 §4.3.1 allows it)"),
    "conditional-etag-strong-generate-unquoted": _FORWARD_ETAG,
    "conditional-etag-forward-unquoted": _FORWARD_ETAG,
    # headers
    "headers-store-Set-Cookie": "[required] " + _SET_COOKIE,
    "headers-store-Transfer-Encoding": ("[required] the origin sends `Transfer-Encoding: "
                                        "<garbage>` (the body ends at its close, RFC 9112 "
                                        "§6.3): the gateway cannot undo a coding it does not "
                                        "know (§6.1), so it answers 502 and stores nothing"),
    # update304
    "304-etag-update-response-Content-Encoding": ("[check] a 304 does not update Content-"
                                                  "Encoding (gw_cache_304_updates: the stored "
                                                  "body keeps its coding; RFC 9111 §3.2 allows)"),
    "304-etag-update-response-Content-Range": "[check] " + _CONTENT_RANGE,
    "304-etag-update-response-Set-Cookie": "[check] " + _SET_COOKIE + (
        ": request 2 is not conditional; the origin's 999 becomes a 502"),
    # updateHEAD
    "head-410-update": _HEAD_410,
    # partial
    "partial-store-partial-reuse-partial": _PARTIAL,
    "partial-store-partial-reuse-partial-byterange": _PARTIAL,
    "partial-store-partial-reuse-partial-absent": _PARTIAL,
    "partial-store-partial-reuse-partial-suffix": _PARTIAL,
    "partial-store-partial-complete": _PARTIAL + ": the rest is not asked for with a Range",
    # other
    "other-age-delay": ("[check] no Age on an answer forwarded from the origin (a miss): Age "
                        "is added to answers from the store (RFC 9111 §5.1)"),
    "other-set-cookie": "[optimal] " + _SET_COOKIE,
}
