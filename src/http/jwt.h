/*
 * The sans-I/O part of the resource server (acp_http_auth): JSON Web Key
 * sets (RFC 7517/7518), JWT access tokens (RFC 7519, compact JWS RFC
 * 7515) checked against them, and token introspection answers (RFC
 * 7662). No network, no clock: the caller fetches the key set and passes
 * the time in. Signatures are checked by OpenSSL's libcrypto (EVP); this
 * file only frames and parses.
 *
 * Accepted algorithms: RS256 (RSA keys of 2048 bits or more) and ES256
 * (P-256). Everything else, `none` and the HMAC family included, is
 * refused, as is a key whose type or `alg` does not fit the token's
 * `alg` (the "HS256 with the RSA public key as secret" confusion).
 *
 * Failures carry a short static reason (`why`) meant for a
 * WWW-Authenticate error_description or a test; it never quotes the
 * token.
 */
#ifndef ACP_HTTP_JWT_H
#define ACP_HTTP_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "acp/common.h"

/* A token longer than this is refused without being decoded. */
#define ACP__JWT_MAX_TOKEN 8192
/* A key set larger than this is refused (also the fetch cap). */
#define ACP__JWKS_MAX_BYTES ((size_t)256 << 10)
/* At most this many usable keys are kept from one set. */
#define ACP__JWKS_MAX_KEYS 32

typedef struct acp__jwks acp__jwks;

/* Parse a JWK Set ({"keys":[...]}). Keys that are not RSA or EC P-256
 * signature keys (or are malformed) are skipped; a set with no usable key
 * is still a set (every token then fails with ACP_ERR_NOT_FOUND).
 * @return 0, ACP_ERR_PARSE (not JSON, not an object, no `keys` array),
 *         ACP_ERR_LIMIT (over ACP__JWKS_MAX_BYTES), ACP_ERR_NOMEM. */
int acp__jwks_parse(const acp_mem *m, const char *json, size_t len,
                    acp__jwks **out);
void acp__jwks_free(acp__jwks *k);
size_t acp__jwks_count(const acp__jwks *k);

/* What a token must satisfy. */
typedef struct acp__jwt_expect {
  const char *issuer;   /* `iss` must equal it */
  const char *audience; /* `aud` (string or array) must contain it */
  int64_t now;          /* seconds since the epoch */
  int64_t leeway;       /* seconds allowed on exp and nbf */
} acp__jwt_expect;

/* What a valid token says (strings allocated with the caller's acp_mem;
 * acp__jwt_claims_free()). */
typedef struct acp__jwt_claims {
  char *sub;       /* or NULL */
  char *scope;     /* space-separated, from `scope` or `scp`; never NULL */
  char *client_id; /* or NULL */
  int64_t exp;     /* 0 when absent (introspection only) */
} acp__jwt_claims;
void acp__jwt_claims_free(const acp_mem *m, acp__jwt_claims *c);

/* Verify a compact JWS access token against `keys` and `x`.
 * @return 0 (claims filled), ACP_ERR_NOT_FOUND (no key of the set fits
 *         the token's `kid`/`alg`: the caller may refetch the set once),
 *         ACP_ERR_PROTOCOL (invalid: *why says why), ACP_ERR_NOMEM. */
int acp__jwt_verify(const acp_mem *m, const char *token, size_t len,
                    const acp__jwks *keys, const acp__jwt_expect *x,
                    acp__jwt_claims *out, const char **why);

/* Check an introspection answer (RFC 7662): `active` true; `iss`, `aud`,
 * `exp`, `nbf` checked against `x` when present.
 * @return 0, ACP_ERR_PROTOCOL (*why), ACP_ERR_NOMEM. */
int acp__introspection_check(const acp_mem *m, const char *json, size_t len,
                             const acp__jwt_expect *x, acp__jwt_claims *out,
                             const char **why);

/* Whether every word of space-separated `need` is a word of `have`. */
bool acp__scope_covers(const char *have, const char *need);

#endif
