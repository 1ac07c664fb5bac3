/* Sans-IO guard: codecs (common, h1, h2, config) must not use libuv or OpenSSL. */
#error "a sans-IO module must not include <openssl/err.h> (see docs/ARCHITECTURE.md)"
