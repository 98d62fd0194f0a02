/*
 * Internal interface of the HTTP runtime (src/http). Not installed; exposed
 * to the unit tests through the static library.
 */
#ifndef ACP_HTTP_INTERNAL_H
#define ACP_HTTP_INTERNAL_H

#include "acp/http.h"
#include "jwt.h"
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
 * *why), ACP_ERR_SYSTEM (keys unavailable; *why), ACP_ERR_NOMEM. A fetch
 * it needs (key set, introspection) blocks the calling thread. */
int acp__http_auth_check(acp_http_auth *a, const acp_mem *mem,
                         const char *resource, const char *token, size_t len,
                         struct acp__jwt_claims *out, const char **why);

/* A request whose token check waits for a fetch (acp__http_auth_check_on).
 * The fields are the auth module's; the caller owns the memory and sets
 * `done`, called on the loop's thread when the fetch has ended. */
typedef struct acp__auth_wait {
  void (*done)(struct acp__auth_wait *w);
  struct acp__auth_wait *next; /* in its job's list */
  void *job;                   /* the fetch waited for; NULL when none */
  bool has_result;             /* an introspection answer is held below */
  int rv;
  const char *why;
  acp__jwt_claims claims; /* allocated with the check's `mem` */
} acp__auth_wait;

/* As acp__http_auth_check, but a fetch runs on `loop`'s thread pool: then
 * ACP_ERR_AGAIN, `w` (zeroed by the caller before its first check) waits
 * for it, w->done is called when it ends, and the caller checks again
 * with the same `w`, which gives the answer. */
int acp__http_auth_check_on(acp_http_auth *a, const acp_mem *mem,
                            const char *resource, const char *token, size_t len,
                            acp__jwt_claims *out, const char **why,
                            uv_loop_t *loop, acp__auth_wait *w);

/* Stop waiting (the request is gone): w->done will not be called, and
 * what `w` holds is freed. No-op when `w` waits for nothing. */
void acp__http_auth_unwait(acp__auth_wait *w, const acp_mem *mem);

#endif /* ACP_HTTP_INTERNAL_H */
