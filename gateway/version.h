/* gateway/version.h — what `h2gate --version` prints: the build, as `nginx -V` does. */
#ifndef GW_GATEWAY_VERSION_H
#define GW_GATEWAY_VERSION_H

#include <stdio.h>

/* Write to f: "h2gate VERSION" on the first line, then the compiler, the meson options the build
 * was configured with, and one line per library: "NAME: built with X, running Y" (the version
 * of the headers compiled against, and the one the library reports at run time where it has a
 * function for it; "not built in" for an optional coding left out). */
void gw_version_print(FILE *f);

#endif
