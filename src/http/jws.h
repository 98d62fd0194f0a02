/*
 * JSON Web Signatures for the MCP authorization client (libacp-http, not
 * installed): the signing key (OpenSSL libcrypto, EVP), compact JWS
 * serialization (RFC 7515) with RS256 and ES256 (RFC 7518; ES256 in the
 * JOSE r||s form), the public JWK of a key (RFC 7517) and its thumbprint
 * (RFC 7638). And the pure part, kept free of I/O, clock and randomness
 * (callers pass times and random ids in): the claims of an RFC 7523 client
 * assertion and of an RFC 9449 DPoP proof.
 *
 * Returned strings are malloc'ed and owned by the caller (free()); on
 * error outputs are NULL. Private key material never leaves the key
 * object and is never written to a message.
 */
#ifndef ACP_HTTP_JWS_H
#define ACP_HTTP_JWS_H

#include <stddef.h>
#include <stdint.h>

typedef struct acp__jws_key acp__jws_key;

/* Load a private key from PEM (PKCS#8 "PRIVATE KEY", or the traditional
 * "EC PRIVATE KEY" / "RSA PRIVATE KEY"). `alg` "ES256", "RS256" or NULL
 * (from the key: EC P-256 gives ES256, RSA gives RS256). 0;
 * ACP_ERR_INVALID_ARGUMENT with a reason in *why (static text) for PEM
 * that does not parse, a key of another type or curve than `alg` needs, an
 * RSA key under 2048 bits, or an unknown alg; ACP_ERR_NOMEM. */
int acp__jws_key_from_pem(const char *pem, size_t len, const char *alg,
                          acp__jws_key **out, const char **why);
/* A fresh EC P-256 key (ES256), for DPoP. 0, ACP_ERR_SYSTEM, NOMEM. */
int acp__jws_key_generate_es256(acp__jws_key **out);
void acp__jws_key_free(acp__jws_key *k);
/* "ES256" or "RS256". */
const char *acp__jws_key_alg(const acp__jws_key *k);

/* The public JWK as a JSON object with only the required members in
 * lexicographic order ({"crv","kty","x","y"} / {"e","kty","n"}), which is
 * also the RFC 7638 thumbprint input. 0, ACP_ERR_NOMEM, ACP_ERR_SYSTEM. */
int acp__jws_public_jwk(const acp__jws_key *k, char **jwk);
/* base64url(SHA-256(public JWK)) (RFC 7638), 43 chars + NUL. */
int acp__jws_thumbprint(const acp__jws_key *k, char out[44]);

/* Compact JWS of `header_json` and `payload_json` (JSON object texts, used
 * as given: the header must carry the key's "alg"). 0,
 * ACP_ERR_INVALID_ARGUMENT (NULL), ACP_ERR_SYSTEM (libcrypto refused),
 * ACP_ERR_NOMEM. */
int acp__jws_sign(const acp__jws_key *k, const char *header_json,
                  const char *payload_json, char **out);

/* --- pure builders (no I/O, no clock, no randomness) --------------------- */

/* The header {"alg":alg,"typ":typ} (typ may be NULL), or with the public
 * `jwk` (JSON object text) for DPoP: {"alg","typ","jwk"}. */
char *acp__jws_header(const char *alg, const char *typ, const char *jwk);

/* RFC 7523 section 3 client assertion claims: iss and sub the client id,
 * aud the authorization server's issuer, jti, iat and exp = iat +
 * lifetime. NULL on NULL input or no memory. */
char *acp__jws_assertion_claims(const char *client_id, const char *audience,
                                const char *jti, int64_t iat, int64_t lifetime);

/* RFC 9449 section 4.2 DPoP proof claims: jti, htm, htu (its query and
 * fragment dropped), iat, `ath` = base64url(SHA-256(access_token)) when
 * access_token is not NULL, `nonce` when not NULL. */
char *acp__jws_dpop_claims(const char *htm, const char *htu, const char *jti,
                           int64_t iat, const char *access_token,
                           const char *nonce);

/* base64url(SHA-256(s)) without padding: 43 chars + NUL. */
void acp__jws_sha256_b64url(const char *s, char out[44]);

#endif /* ACP_HTTP_JWS_H */
