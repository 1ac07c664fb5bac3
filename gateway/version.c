/* gateway/version.c — `h2gate --version`: the program's version, its compiler and meson
 * options, and each library's version as compiled against and as running (a distribution may
 * update a shared library under the binary: both matter in a bug report). */
#include "version.h"

#include <hiredis/hiredis.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <uv.h>
#include <yaml.h>
#include <zlib.h>

#include "gw_version.h"
#include "h1/parser.h"

#if GW_HAVE_BROTLI
#include <brotli/encode.h>
#endif
#if GW_HAVE_ZSTD
#include <zstd.h>
#endif

/* major << 16 | minor << 8 | patch (http-parser) as "M.m.p" */
static void dotted(char *dst, size_t cap, unsigned long v)
{
    snprintf(dst, cap, "%lu.%lu.%lu", v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff);
}

void gw_version_print(FILE *f)
{
    fprintf(f, "h2gate %s\n", GW_VERSION);
    fprintf(f, "compiler: %s\n", GW_BUILD_COMPILER);
    fprintf(f, "configure: %s\n", GW_BUILD_OPTIONS);
    fprintf(f, "OpenSSL: built with %s, running %s\n", OPENSSL_VERSION_TEXT,
            OpenSSL_version(OPENSSL_VERSION));
    fprintf(f, "libuv: built with %d.%d.%d, running %s\n", UV_VERSION_MAJOR, UV_VERSION_MINOR,
            UV_VERSION_PATCH, uv_version_string());
    fprintf(f, "zlib: built with %s, running %s\n", ZLIB_VERSION, zlibVersion());
#if GW_HAVE_BROTLI
    /* BrotliEncoderVersion(): major << 24 | minor << 12 | patch; the headers carry no version:
     * pkg-config's (meson) stands for it, as for libyaml */
    uint32_t b = BrotliEncoderVersion();
    fprintf(f, "brotli: built with %s, running %u.%u.%u\n", GW_BUILD_BROTLI, b >> 24,
            b >> 12 & 0xfff, b & 0xfff);
#else
    fprintf(f, "brotli: not built in\n");
#endif
#if GW_HAVE_ZSTD
    fprintf(f, "zstd: built with %s, running %s\n", ZSTD_VERSION_STRING, ZSTD_versionString());
#else
    fprintf(f, "zstd: not built in\n");
#endif
    unsigned long hp_built, hp_running;
    char hb[32], hr[32];
    gw_h1_http_parser_version(&hp_built, &hp_running);
    dotted(hb, sizeof(hb), hp_built);
    dotted(hr, sizeof(hr), hp_running);
    fprintf(f, "http-parser: built with %s, running %s\n", hb, hr);
    fprintf(f, "libyaml: built with %s, running %s\n", GW_BUILD_YAML, yaml_get_version_string());
    /* hiredis has no run-time version function */
    fprintf(f, "hiredis: built with %d.%d.%d\n", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
}
