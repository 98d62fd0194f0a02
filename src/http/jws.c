/*
 * JWS signing for the authorization client (jws.h). The asymmetric
 * crypto is OpenSSL libcrypto's (EVP, the 3.0 API): key parsing, key
 * generation, signatures. What is not crypto stays ours and pure: the
 * JSON of headers and claims (the library's JSON writer, so strings are
 * escaped), Base64url and SHA-256 from src/util (the same functions PKCE
 * uses; the digest inside a signature is libcrypto's).
 *
 * ES256 signatures: libcrypto produces DER (ECDSA-Sig-Value); JOSE wants
 * the two integers as fixed 32-byte big-endian halves (RFC 7518 section
 * 3.4), so the DER is decoded with d2i_ECDSA_SIG and re-encoded padded.
 */
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "acp/common.h"
#include "acp/json.h"
#include "jws.h"
#include "util.h"

struct acp__jws_key {
  EVP_PKEY *pkey;
  bool ec; /* ES256 (EC P-256); else RS256 */
};

static bool is_p256(EVP_PKEY *pk) {
  char name[64];
  size_t n = 0;
  if (EVP_PKEY_get_base_id(pk) != EVP_PKEY_EC)
    return false;
  if (EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME, name,
                                     sizeof(name), &n) != 1)
    return false;
  return strcmp(name, "prime256v1") == 0 || strcmp(name, "P-256") == 0;
}

int acp__jws_key_from_pem(const char *pem, size_t len, const char *alg,
                          acp__jws_key **out, const char **why) {
  BIO *bio;
  EVP_PKEY *pk;
  acp__jws_key *k;
  bool want_ec;
  const char *dummy;
  if (why == NULL)
    why = &dummy;
  *why = NULL;
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (pem == NULL || len == 0 || len > INT32_MAX) {
    *why = "no PEM key";
    return ACP_ERR_INVALID_ARGUMENT;
  }
  if (alg != NULL && strcmp(alg, "ES256") != 0 && strcmp(alg, "RS256") != 0) {
    *why = "unsupported signing algorithm (ES256 and RS256 are)";
    return ACP_ERR_INVALID_ARGUMENT;
  }
  bio = BIO_new_mem_buf(pem, (int)len);
  if (bio == NULL)
    return ACP_ERR_NOMEM;
  /* No password callback: an encrypted key is refused, not prompted for. */
  pk = PEM_read_bio_PrivateKey(bio, NULL, NULL, (void *)"");
  BIO_free(bio);
  ERR_clear_error(); /* the reason is ours to give, not the error queue's */
  if (pk == NULL) {
    *why = "the PEM text holds no readable (unencrypted) private key";
    return ACP_ERR_INVALID_ARGUMENT;
  }
  if (alg != NULL)
    want_ec = strcmp(alg, "ES256") == 0;
  else
    want_ec = EVP_PKEY_get_base_id(pk) == EVP_PKEY_EC;
  if (want_ec && !is_p256(pk)) {
    *why = "ES256 needs an EC key on curve P-256";
    EVP_PKEY_free(pk);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  if (!want_ec && EVP_PKEY_get_base_id(pk) != EVP_PKEY_RSA) {
    *why =
        alg ? "RS256 needs an RSA key" : "the key is neither EC P-256 nor RSA";
    EVP_PKEY_free(pk);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  if (!want_ec && EVP_PKEY_get_bits(pk) < 2048) {
    *why = "RSA keys under 2048 bits are refused (RFC 7518 section 3.3)";
    EVP_PKEY_free(pk);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  k = calloc(1, sizeof(*k));
  if (k == NULL) {
    EVP_PKEY_free(pk);
    return ACP_ERR_NOMEM;
  }
  k->pkey = pk;
  k->ec = want_ec;
  *out = k;
  return 0;
}

int acp__jws_key_generate_es256(acp__jws_key **out) {
  acp__jws_key *k;
  EVP_PKEY *pk;
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  pk = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  if (pk == NULL) {
    ERR_clear_error();
    return ACP_ERR_SYSTEM;
  }
  k = calloc(1, sizeof(*k));
  if (k == NULL) {
    EVP_PKEY_free(pk);
    return ACP_ERR_NOMEM;
  }
  k->pkey = pk;
  k->ec = true;
  *out = k;
  return 0;
}

void acp__jws_key_free(acp__jws_key *k) {
  if (k == NULL)
    return;
  EVP_PKEY_free(k->pkey); /* libcrypto clears private key memory */
  free(k);
}

const char *acp__jws_key_alg(const acp__jws_key *k) {
  return k == NULL ? NULL : k->ec ? "ES256" : "RS256";
}

/* base64url of a BIGNUM parameter into *out, left-padded to `pad` bytes
 * (0: none). 0, ACP_ERR_SYSTEM (no such parameter), ACP_ERR_NOMEM. */
static int bn_b64(const EVP_PKEY *pk, const char *param, size_t pad,
                  char **out) {
  BIGNUM *bn = NULL;
  unsigned char buf[1024];
  int n, rv = ACP_ERR_SYSTEM;
  *out = NULL;
  if (EVP_PKEY_get_bn_param(pk, param, &bn) != 1)
    return ACP_ERR_SYSTEM;
  n = pad ? (BN_num_bytes(bn) <= (int)pad ? (int)pad : -1) : BN_num_bytes(bn);
  if (n > 0 && (size_t)n <= sizeof(buf) && BN_bn2binpad(bn, buf, n) == n) {
    *out = malloc(acp__b64_encoded_len((size_t)n, ACP__B64_URL) + 1);
    if (*out != NULL) {
      (*out)[acp__b64_encode(*out, buf, (size_t)n, ACP__B64_URL)] = '\0';
      rv = 0;
    } else {
      rv = ACP_ERR_NOMEM;
    }
  }
  BN_free(bn);
  return rv;
}

static char *writer_take(acp_json_writer *w, int rv) {
  const char *d;
  size_t n;
  char *s = NULL;
  if (rv == 0 && (d = acp_json_writer_data(w, &n)) != NULL &&
      (s = malloc(n + 1)) != NULL) {
    memcpy(s, d, n);
    s[n] = '\0';
  }
  acp_json_writer_free(w);
  return s;
}

int acp__jws_public_jwk(const acp__jws_key *k, char **jwk) {
  acp_json_writer *w = NULL;
  char *a = NULL, *b = NULL;
  int rv = 0;
  if (jwk == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *jwk = NULL;
  if (k == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (k->ec) {
    rv = bn_b64(k->pkey, OSSL_PKEY_PARAM_EC_PUB_X, 32, &a);
    if (rv == 0)
      rv = bn_b64(k->pkey, OSSL_PKEY_PARAM_EC_PUB_Y, 32, &b);
  } else {
    rv = bn_b64(k->pkey, OSSL_PKEY_PARAM_RSA_E, 0, &a);
    if (rv == 0)
      rv = bn_b64(k->pkey, OSSL_PKEY_PARAM_RSA_N, 0, &b);
  }
  ERR_clear_error();
  if (rv != 0) {
    /* rv says why */
  } else if (acp_json_writer_new(&w, 0, NULL) != 0) {
    rv = ACP_ERR_NOMEM;
  } else {
    /* RFC 7638 section 3.2: required members only, sorted, no spaces. */
    rv |= acp_json_write_obj_begin(w);
    if (k->ec) {
      rv |= acp_json_write_keyz(w, "crv");
      rv |= acp_json_write_strz(w, "P-256");
      rv |= acp_json_write_keyz(w, "kty");
      rv |= acp_json_write_strz(w, "EC");
      rv |= acp_json_write_keyz(w, "x");
      rv |= acp_json_write_strz(w, a);
      rv |= acp_json_write_keyz(w, "y");
      rv |= acp_json_write_strz(w, b);
    } else {
      rv |= acp_json_write_keyz(w, "e");
      rv |= acp_json_write_strz(w, a);
      rv |= acp_json_write_keyz(w, "kty");
      rv |= acp_json_write_strz(w, "RSA");
      rv |= acp_json_write_keyz(w, "n");
      rv |= acp_json_write_strz(w, b);
    }
    rv |= acp_json_write_obj_end(w);
    *jwk = writer_take(w, rv);
    rv = *jwk ? 0 : ACP_ERR_NOMEM;
  }
  free(a);
  free(b);
  return rv;
}

void acp__jws_sha256_b64url(const char *s, char out[44]) {
  acp__sha256 h;
  uint8_t d[32];
  acp__sha256_init(&h);
  acp__sha256_update(&h, s, strlen(s));
  acp__sha256_final(&h, d);
  out[acp__b64_encode(out, d, sizeof(d), ACP__B64_URL)] = '\0';
}

int acp__jws_thumbprint(const acp__jws_key *k, char out[44]) {
  char *jwk = NULL;
  int rv = acp__jws_public_jwk(k, &jwk);
  if (rv != 0)
    return rv;
  acp__jws_sha256_b64url(jwk, out);
  free(jwk);
  return 0;
}

static int b64_append_str(acp__buf *b, const char *s) {
  return acp__b64_append(b, s, strlen(s), ACP__B64_URL);
}

int acp__jws_sign(const acp__jws_key *k, const char *header_json,
                  const char *payload_json, char **out) {
  acp__buf b;
  EVP_MD_CTX *ctx = NULL;
  unsigned char *sig = NULL;
  unsigned char rs[64];
  const unsigned char *der;
  size_t siglen = 0;
  ECDSA_SIG *es = NULL;
  int rv = 0;
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (k == NULL || header_json == NULL || payload_json == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__buf_init(&b, acp_mem_default(), 0);
  if (b64_append_str(&b, header_json) != 0 ||
      acp__buf_append(&b, ".", 1) != 0 ||
      b64_append_str(&b, payload_json) != 0) {
    acp__buf_dispose(&b);
    return ACP_ERR_NOMEM;
  }
  /* Both algorithms hash with SHA-256; RS256 is PKCS#1 v1.5, the RSA
   * default padding of EVP_DigestSign. */
  ctx = EVP_MD_CTX_new();
  if (ctx == NULL) {
    rv = ACP_ERR_NOMEM;
  } else if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k->pkey) != 1 ||
             EVP_DigestSign(ctx, NULL, &siglen, (const unsigned char *)b.data,
                            b.len) != 1) {
    rv = ACP_ERR_SYSTEM;
  } else if ((sig = malloc(siglen)) == NULL) {
    rv = ACP_ERR_NOMEM;
  } else if (EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)b.data,
                            b.len) != 1) {
    rv = ACP_ERR_SYSTEM;
  }
  if (rv == 0 && k->ec) {
    const BIGNUM *r, *s;
    der = sig;
    es = d2i_ECDSA_SIG(NULL, &der, (long)siglen);
    if (es == NULL) {
      rv = ACP_ERR_SYSTEM;
    } else {
      ECDSA_SIG_get0(es, &r, &s);
      if (BN_bn2binpad(r, rs, 32) != 32 || BN_bn2binpad(s, rs + 32, 32) != 32)
        rv = ACP_ERR_SYSTEM;
    }
  }
  if (rv == 0) {
    rv = acp__buf_append(&b, ".", 1);
    if (rv == 0)
      rv = k->ec ? acp__b64_append(&b, rs, sizeof(rs), ACP__B64_URL)
                 : acp__b64_append(&b, sig, siglen, ACP__B64_URL);
    if (rv == 0 && (*out = malloc(b.len + 1)) != NULL) {
      memcpy(*out, b.data, b.len);
      (*out)[b.len] = '\0';
    }
    rv = *out ? 0 : ACP_ERR_NOMEM;
  }
  ERR_clear_error();
  ECDSA_SIG_free(es);
  free(sig);
  EVP_MD_CTX_free(ctx);
  acp__buf_dispose(&b);
  return rv;
}

char *acp__jws_header(const char *alg, const char *typ, const char *jwk) {
  acp_json_writer *w = NULL;
  int rv = 0;
  if (alg == NULL || acp_json_writer_new(&w, 0, NULL) != 0)
    return NULL;
  rv |= acp_json_write_obj_begin(w);
  rv |= acp_json_write_keyz(w, "alg");
  rv |= acp_json_write_strz(w, alg);
  if (typ != NULL) {
    rv |= acp_json_write_keyz(w, "typ");
    rv |= acp_json_write_strz(w, typ);
  }
  if (jwk != NULL) {
    rv |= acp_json_write_keyz(w, "jwk");
    rv |= acp_json_write_raw(w, jwk, strlen(jwk));
  }
  rv |= acp_json_write_obj_end(w);
  return writer_take(w, rv);
}

char *acp__jws_assertion_claims(const char *client_id, const char *audience,
                                const char *jti, int64_t iat,
                                int64_t lifetime) {
  acp_json_writer *w = NULL;
  int rv = 0;
  if (client_id == NULL || audience == NULL || jti == NULL || lifetime <= 0 ||
      acp_json_writer_new(&w, 0, NULL) != 0)
    return NULL;
  rv |= acp_json_write_obj_begin(w);
  rv |= acp_json_write_keyz(w, "iss");
  rv |= acp_json_write_strz(w, client_id);
  rv |= acp_json_write_keyz(w, "sub");
  rv |= acp_json_write_strz(w, client_id);
  rv |= acp_json_write_keyz(w, "aud");
  rv |= acp_json_write_strz(w, audience);
  rv |= acp_json_write_keyz(w, "jti");
  rv |= acp_json_write_strz(w, jti);
  rv |= acp_json_write_keyz(w, "iat");
  rv |= acp_json_write_int(w, iat);
  rv |= acp_json_write_keyz(w, "exp");
  rv |= acp_json_write_int(w, iat + lifetime);
  rv |= acp_json_write_obj_end(w);
  return writer_take(w, rv);
}

char *acp__jws_dpop_claims(const char *htm, const char *htu, const char *jti,
                           int64_t iat, const char *access_token,
                           const char *nonce) {
  acp_json_writer *w = NULL;
  char ath[44];
  size_t ulen;
  int rv = 0;
  if (htm == NULL || htu == NULL || jti == NULL ||
      acp_json_writer_new(&w, 0, NULL) != 0)
    return NULL;
  /* RFC 9449 section 4.2: htu is the target URI without query and
   * fragment. */
  ulen = strcspn(htu, "?#");
  rv |= acp_json_write_obj_begin(w);
  rv |= acp_json_write_keyz(w, "jti");
  rv |= acp_json_write_strz(w, jti);
  rv |= acp_json_write_keyz(w, "htm");
  rv |= acp_json_write_strz(w, htm);
  rv |= acp_json_write_keyz(w, "htu");
  rv |= acp_json_write_str(w, htu, ulen);
  rv |= acp_json_write_keyz(w, "iat");
  rv |= acp_json_write_int(w, iat);
  if (access_token != NULL) {
    acp__jws_sha256_b64url(access_token, ath);
    rv |= acp_json_write_keyz(w, "ath");
    rv |= acp_json_write_strz(w, ath);
  }
  if (nonce != NULL) {
    rv |= acp_json_write_keyz(w, "nonce");
    rv |= acp_json_write_strz(w, nonce);
  }
  rv |= acp_json_write_obj_end(w);
  return writer_take(w, rv);
}
