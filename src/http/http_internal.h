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

/* The resource server's side of acp_http_auth (auth.c). */
struct acp__jwt_claims;
/* Scopes every request needs, space-separated ("" for none). */
const char *acp__http_auth_scopes(const acp_http_auth *a);
/* The configured resource URL, or NULL (the server's default applies). */
const char *acp__http_auth_resource(const acp_http_auth *a);
/* Scopes tool `tool` (len bytes) needs, space-separated, or NULL. */
const char *acp__http_auth_tool_scopes(const acp_http_auth *a, const char *tool,
                                       size_t len);
/* The protected resource metadata JSON for `resource` (allocated with
 * `mem`; *len its length), or NULL when out of memory. */
char *acp__http_auth_prm(const acp_http_auth *a, const acp_mem *mem,
                         const char *resource, size_t *len);
/* Check a bearer token: 0 (claims filled, allocated with `mem`: free with
 * acp__jwt_claims_free(mem, ...)), ACP_ERR_PROTOCOL (invalid;
 * *why), ACP_ERR_SYSTEM (keys unavailable; *why), ACP_ERR_NOMEM. */
int acp__http_auth_check(acp_http_auth *a, const acp_mem *mem,
                         const char *resource, const char *token, size_t len,
                         struct acp__jwt_claims *out, const char **why);

#endif /* ACP_HTTP_INTERNAL_H */
