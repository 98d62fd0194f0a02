/*
 * Internal interface of the HTTP runtime (src/http). Not installed; exposed
 * to the unit tests through the static library.
 */
#ifndef ACP_HTTP_INTERNAL_H
#define ACP_HTTP_INTERNAL_H

#include "acp/http.h"
#include "util.h"

#include <stdbool.h>

/* Fill out[0 .. 2*nbytes] with nbytes random bytes from the OS as lower-case
 * hex, NUL-terminated (nbytes <= 64). 0 or ACP_ERR_SYSTEM. */
int acp__http_random_hex(char *out, size_t nbytes);
/* Host and Origin header checks of a server with options `o` (NULL header:
 * absent, accepted). */
bool acp__http_host_ok(const acp_http_server_options *o, const char *host);
bool acp__http_origin_ok(const acp_http_server_options *o, const char *origin);

#endif /* ACP_HTTP_INTERNAL_H */
