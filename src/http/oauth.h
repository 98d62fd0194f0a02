/*
 * The sans-I/O core of the MCP authorization client (OAuth 2.1): pure
 * functions over strings, no I/O, no clock, no randomness of their own
 * (callers pass random bytes in). src/http/oauth_flow.c drives them with
 * libcurl. Every returned string is malloc'ed and owned by the caller
 * (free()); on error nothing is returned and outputs are left NULL.
 */
#ifndef ACP_HTTP_OAUTH_H
#define ACP_HTTP_OAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A parsed `WWW-Authenticate` Bearer challenge (RFC 6750 section 3). */
typedef struct acp__oauth_challenge {
  bool bearer; /* the Bearer scheme was present */
  bool dpop;   /* the DPoP scheme was present (RFC 9449 section 7.1) */
  char *resource_metadata;
  char *scope;
  char *error;
} acp__oauth_challenge;

/* Parse a WWW-Authenticate value (the parameters of the Bearer and DPoP
 * challenges). 0, or ACP_ERR_INVALID_ARGUMENT for a
 * malformed value (unterminated quote, missing '='), ACP_ERR_NOMEM. A
 * value without a Bearer challenge parses with bearer false. */
int acp__oauth_parse_challenge(const char *hdr, acp__oauth_challenge *out);
void acp__oauth_challenge_free(acp__oauth_challenge *c);

/* The longest URL list the discovery builders produce. */
#define ACP__OAUTH_MAX_URLS 4

/* Protected resource metadata URLs to try, in order (RFC 9728, MCP
 * 2025-11-25): `resource_metadata` from the challenge (when not NULL),
 * then the path-inserted well-known URL (when the MCP URL has a path),
 * then the root one. Fills urls[0..*n). 0, ACP_ERR_INVALID_ARGUMENT
 * (not an absolute http(s) URL), ACP_ERR_NOMEM. */
int acp__oauth_prm_urls(const char *mcp_url, const char *resource_metadata,
                        char **urls, size_t *n);

/* Authorization server metadata URLs for `issuer`, in the spec's order:
 * with a path, RFC 8414 path insertion, OpenID path insertion, OpenID
 * path appending; without, RFC 8414 then OpenID. */
int acp__oauth_as_urls(const char *issuer, char **urls, size_t *n);

/* The origin ("scheme://host[:port]") of an absolute URL, or NULL. */
char *acp__oauth_origin(const char *url);

/* Protected resource metadata (RFC 9728). */
typedef struct acp__oauth_prm {
  char *resource;
  char *authorization_server; /* the first listed */
  char *scopes_supported;     /* space-joined, or NULL */
} acp__oauth_prm;
int acp__oauth_parse_prm(const char *json, size_t len, acp__oauth_prm *out);
void acp__oauth_prm_free(acp__oauth_prm *p);

/* Whether the metadata's `resource` names the MCP server at `mcp_url`:
 * same origin and a path that is a prefix of the URL's at a '/' boundary
 * (the resource identifier may be the server's origin). */
bool acp__oauth_resource_matches(const char *resource, const char *mcp_url);

/* Authorization server metadata (RFC 8414 / OpenID discovery). */
typedef struct acp__oauth_as {
  char *issuer;
  char *authorization_endpoint;
  char *token_endpoint;
  char *registration_endpoint;
  char *scopes_supported; /* space-joined, or NULL */
  char *jwks_uri;         /* or NULL (read by the resource server) */
  bool s256;              /* code_challenge_methods_supported has S256 */
  bool auth_none, auth_basic, auth_post; /* token endpoint auth methods */
  bool auth_jwt;                         /* private_key_jwt */
  bool auth_methods_listed;
  bool dpop_es256; /* dpop_signing_alg_values_supported has ES256 */
  bool cimd;       /* client_id_metadata_document_supported */
  bool iss_param;  /* authorization_response_iss_parameter_supported */
  bool refresh_ok; /* grant_types_supported lists refresh_token */
} acp__oauth_as;
/* ACP_ERR_PROTOCOL when a required endpoint is missing or not http(s). */
int acp__oauth_parse_as(const char *json, size_t len, acp__oauth_as *out);
void acp__oauth_as_free(acp__oauth_as *a);

/* PKCE (RFC 7636) S256 from 32 random bytes: the verifier (43 chars) and
 * its challenge (43 chars), both NUL-terminated. */
void acp__oauth_pkce(const uint8_t rnd[32], char verifier[44],
                     char challenge[44]);
/* base64url without padding of n bytes into out (room for 4n/3+2). */
size_t acp__oauth_b64url(const uint8_t *in, size_t n, char *out);

/* Scope to request: the challenge's, else the resource's
 * scopes_supported, else NULL (omitted). `offline_access` is appended
 * when the authorization server lists it and it is not there yet. */
char *acp__oauth_select_scope(const char *challenge_scope,
                              const char *prm_scopes, const char *as_scopes);

/* The words of a followed by those of b not in a (space-separated lists;
 * either may be NULL). NULL when both are empty, or out of memory. */
char *acp__oauth_scope_union(const char *a, const char *b);

/* An authorization request URL (OAuth 2.1 section 4.1.1 with PKCE S256,
 * RFC 8707 `resource`). `scope` may be NULL. */
char *acp__oauth_authorize_url(const char *endpoint, const char *client_id,
                               const char *redirect_uri, const char *challenge,
                               const char *state, const char *resource,
                               const char *scope);

/* Check the redirect back from the authorization endpoint: same `state`,
 * `iss` equal to `issuer` when present (RFC 9207), required when
 * `iss_required`, and a `code`. 0 with *code set; ACP_ERR_PROTOCOL with
 * a reason in `why` (static) otherwise. */
int acp__oauth_parse_redirect(const char *url, const char *state,
                              const char *issuer, bool iss_required,
                              char **code, const char **why);

/* application/x-www-form-urlencoded encoding of s (appended to b). */
char *acp__oauth_form_enc(const char *s);

/* Token endpoint authentication methods. */
typedef enum acp__oauth_auth {
  ACP__OAUTH_AUTH_NONE = 0,
  ACP__OAUTH_AUTH_BASIC = 1,
  ACP__OAUTH_AUTH_POST = 2,
  /* private_key_jwt (RFC 7523 section 2.2): the "secret" is the signed
   * client assertion, sent as client_assertion with client_id. */
  ACP__OAUTH_AUTH_JWT = 3
} acp__oauth_auth;

/* A token request body of any grant: `params` are name, value pairs ending
 * with a NULL name (a NULL value skips its pair), form-encoded in order,
 * then the client authentication of `auth` (see acp__oauth_token_request;
 * NONE sends client_id when it is not NULL). 0, ACP_ERR_INVALID_ARGUMENT,
 * ACP_ERR_NOMEM. */
int acp__oauth_grant_request(const char *const *params, const char *client_id,
                             const char *client_secret, acp__oauth_auth auth,
                             char **body, char **authz);

/* A token request body. `grant` is "authorization_code" (code, verifier,
 * redirect_uri), "refresh_token" (refresh) or "client_credentials".
 * `resource` and `scope` may be NULL. The client credentials go in the
 * body for NONE (client_id only) and POST; for BASIC *authz receives the
 * Authorization header value ("Basic ..."), else NULL. */
int acp__oauth_token_request(const char *grant, const char *code,
                             const char *verifier, const char *redirect_uri,
                             const char *refresh, const char *resource,
                             const char *scope, const char *client_id,
                             const char *client_secret, acp__oauth_auth auth,
                             char **body, char **authz);

typedef enum acp__oauth_token_type {
  ACP__OAUTH_TOKEN_NONE = 0,
  ACP__OAUTH_TOKEN_BEARER,
  ACP__OAUTH_TOKEN_DPOP,
  ACP__OAUTH_TOKEN_NA
} acp__oauth_token_type;

/* A token response (RFC 6749 section 5.1; RFC 8693 section 2.2.1). */
typedef struct acp__oauth_token {
  acp__oauth_token_type type;
  char *issued_token_type; /* token exchange, or NULL */
  char *access_token;
  char *refresh_token;
  char *scope;
  int64_t expires_in; /* seconds, -1 when absent */
} acp__oauth_token;
/* ACP_ERR_PROTOCOL for an error response, a missing access_token or a
 * token_type other than Bearer, DPoP and N_A (the caller checks which of
 * these it asked for). */
int acp__oauth_parse_token(const char *json, size_t len, acp__oauth_token *out);
void acp__oauth_token_free(acp__oauth_token *t);

#endif /* ACP_HTTP_OAUTH_H */
