/*
 * JWT access tokens and JWK sets for the resource server (see jwt.h).
 *
 * The order of the checks matters: the token's structure and header are
 * read first (nothing in them is trusted beyond choosing a key), the
 * signature is checked next, and only then are the claims believed. The
 * algorithm is fixed by the key: a JWK's type (and its `alg` when given)
 * must fit the header's `alg`, so a token cannot make us use an RSA
 * public key as an HMAC secret, and no HMAC or `none` path exists at all.
 *
 * Every cryptographic operation is OpenSSL's (EVP): keys are imported
 * with EVP_PKEY_fromdata(), signatures checked with EVP_DigestVerify().
 * The only conversion done here is ES256's raw R||S signature into the
 * DER ECDSA-Sig-Value that EVP expects.
 */
#include "jwt.h"

#include <string.h>
#include <strings.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "acp/json.h"
#include "util.h"

enum { KTY_RSA = 1, KTY_EC = 2 };

typedef struct jwk {
  EVP_PKEY *pkey;
  char *kid; /* or NULL */
  int kty;
  bool alg_given; /* the JWK named an `alg` (then it fits kty) */
} jwk;

struct acp__jwks {
  acp_mem mem;
  jwk *keys;
  size_t n;
};

/* MARK: - small helpers */

/* A string member as a NUL-terminated copy; NULL when absent, not a
 * string, or holding a NUL. *nomem is set when the copy failed. */
static char *str_member(const acp_mem *m, acp_json_doc *doc,
                        const acp_json_val *obj, const char *key, bool *nomem) {
  const acp_json_val *v = acp_json_obj_getz(obj, key);
  const char *s;
  size_t n;
  char *r;
  if (v == NULL || acp_json_type_of(v) != ACP_JSON_STRING)
    return NULL;
  if (acp_json_doc_str(doc, v, &s, &n) != 0) {
    *nomem = true;
    return NULL;
  }
  if (memchr(s, '\0', n) != NULL)
    return NULL;
  r = acp__strndup(m, s, n);
  if (r == NULL)
    *nomem = true;
  return r;
}

static bool str_is(acp_json_doc *doc, const acp_json_val *v, const char *want) {
  const char *s;
  size_t n;
  if (v == NULL || acp_json_type_of(v) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, v, &s, &n) != 0)
    return false;
  return n == strlen(want) && memcmp(s, want, n) == 0;
}

/* Decode one base64url member of a JWK into b (cleared first). */
static int b64_member(acp_json_doc *doc, const acp_json_val *obj,
                      const char *key, acp__buf *b) {
  const acp_json_val *v = acp_json_obj_getz(obj, key);
  const char *s;
  size_t n;
  int rv;
  acp__buf_clear(b);
  if (v == NULL || acp_json_type_of(v) != ACP_JSON_STRING)
    return ACP_ERR_PARSE;
  if ((rv = acp_json_doc_str(doc, v, &s, &n)) != 0)
    return rv;
  return acp__b64_decode(b, s, n, ACP__B64_URL);
}

/* A number claim (integer or not) in whole seconds. */
static bool num_claim(const acp_json_val *obj, const char *key, int64_t *out) {
  const acp_json_val *v = acp_json_obj_getz(obj, key);
  double d;
  if (v == NULL || acp_json_type_of(v) != ACP_JSON_NUMBER)
    return false;
  if (acp_json_get_int64(v, out) == 0)
    return true;
  if (acp_json_get_double(v, &d) != 0 || d != d || d > 9.2e18 || d < -9.2e18)
    return false;
  *out = (int64_t)d;
  return true;
}

/* RFC 7519 4: a JWT with a claim (or header parameter) named twice must be
 * rejected (or read by its last occurrence; our parser finds the first,
 * so rejecting is the only safe choice). */
static bool dup_members(acp_json_doc *doc, const acp_json_val *obj) {
  const acp_json_val *k;
  for (k = acp_json_child(obj); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const char *s;
    size_t n;
    if (acp_json_doc_str(doc, k, &s, &n) != 0 ||
        acp_json_obj_get(obj, s, n) != acp_json_next(k))
      return true;
  }
  return false;
}

/* MARK: - JWK import (OpenSSL) */

static EVP_PKEY *import_key(const char *type, OSSL_PARAM_BLD *bld) {
  OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
  EVP_PKEY_CTX *ctx = NULL;
  EVP_PKEY *pkey = NULL;
  if (params == NULL)
    return NULL;
  ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
  if (ctx == NULL || EVP_PKEY_fromdata_init(ctx) <= 0 ||
      EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
    pkey = NULL;
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  if (pkey != NULL) {
    /* The point must lie on the curve, the modulus be odd and so on. */
    EVP_PKEY_CTX *chk = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    int ok = chk != NULL && EVP_PKEY_public_check(chk) == 1;
    EVP_PKEY_CTX_free(chk);
    if (!ok) {
      EVP_PKEY_free(pkey);
      pkey = NULL;
    }
  }
  return pkey;
}

static EVP_PKEY *rsa_key(acp_json_doc *doc, const acp_json_val *k,
                         acp__buf *b) {
  BIGNUM *n = NULL, *e = NULL;
  OSSL_PARAM_BLD *bld = NULL;
  EVP_PKEY *pkey = NULL;
  if (b64_member(doc, k, "n", b) != 0 || b->len == 0 || b->len > 1024)
    return NULL;
  n = BN_bin2bn((const unsigned char *)b->data, (int)b->len, NULL);
  if (b64_member(doc, k, "e", b) != 0 || b->len == 0 || b->len > 8)
    goto out;
  e = BN_bin2bn((const unsigned char *)b->data, (int)b->len, NULL);
  bld = OSSL_PARAM_BLD_new();
  if (n == NULL || e == NULL || bld == NULL ||
      !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) ||
      !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e))
    goto out;
  pkey = import_key("RSA", bld);
  /* RFC 7518 3.3: a key of 2048 bits or larger MUST be used. */
  if (pkey != NULL && EVP_PKEY_get_bits(pkey) < 2048) {
    EVP_PKEY_free(pkey);
    pkey = NULL;
  }
out:
  OSSL_PARAM_BLD_free(bld);
  BN_free(n);
  BN_free(e);
  return pkey;
}

static EVP_PKEY *ec_key(acp_json_doc *doc, const acp_json_val *k, acp__buf *b) {
  unsigned char pt[65];
  OSSL_PARAM_BLD *bld;
  EVP_PKEY *pkey = NULL;
  if (!str_is(doc, acp_json_obj_getz(k, "crv"), "P-256"))
    return NULL;
  pt[0] = 0x04; /* uncompressed point */
  if (b64_member(doc, k, "x", b) != 0 || b->len != 32)
    return NULL;
  memcpy(pt + 1, b->data, 32);
  if (b64_member(doc, k, "y", b) != 0 || b->len != 32)
    return NULL;
  memcpy(pt + 33, b->data, 32);
  bld = OSSL_PARAM_BLD_new();
  if (bld != NULL &&
      OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256",
                                      0) &&
      OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt,
                                       sizeof(pt)))
    pkey = import_key("EC", bld);
  OSSL_PARAM_BLD_free(bld);
  return pkey;
}

/* MARK: - JWK Set */

void acp__jwks_free(acp__jwks *k) {
  size_t i;
  if (k == NULL)
    return;
  for (i = 0; i < k->n; i++) {
    EVP_PKEY_free(k->keys[i].pkey);
    acp__free(&k->mem, k->keys[i].kid);
  }
  acp__free(&k->mem, k->keys);
  acp__free(&k->mem, k);
}

size_t acp__jwks_count(const acp__jwks *k) {
  return k ? k->n : 0;
}

int acp__jwks_parse(const acp_mem *mem, const char *json, size_t len,
                    acp__jwks **out) {
  acp_mem m;
  acp_json_doc *doc = NULL;
  const acp_json_val *root, *keys, *k;
  acp__jwks *set = NULL;
  acp__buf b;
  int rv;
  *out = NULL;
  if (len > ACP__JWKS_MAX_BYTES)
    return ACP_ERR_LIMIT;
  acp__mem_init(&m, mem);
  acp__buf_init(&b, &m, 4096);
  if ((rv = acp_json_doc_new(&doc, &m)) != 0)
    return rv;
  if ((rv = acp_json_doc_parse(doc, json, len, NULL)) != 0) {
    acp_json_doc_free(doc);
    return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_PARSE;
  }
  root = acp_json_doc_root(doc);
  keys = acp_json_obj_getz(root, "keys");
  if (acp_json_type_of(root) != ACP_JSON_OBJECT ||
      acp_json_type_of(keys) != ACP_JSON_ARRAY) {
    acp_json_doc_free(doc);
    return ACP_ERR_PARSE;
  }
  set = acp__calloc(&m, 1, sizeof(*set));
  if (set == NULL ||
      (set->keys = acp__calloc(&m, ACP__JWKS_MAX_KEYS, sizeof(jwk))) == NULL)
    goto nomem;
  set->mem = m;
  for (k = acp_json_child(keys); k != NULL && set->n < ACP__JWKS_MAX_KEYS;
       k = acp_json_next(k)) {
    const acp_json_val *use = acp_json_obj_getz(k, "use");
    const acp_json_val *alg = acp_json_obj_getz(k, "alg");
    bool nomem = false;
    jwk *j = &set->keys[set->n];
    if (acp_json_type_of(k) != ACP_JSON_OBJECT)
      continue;
    if (use != NULL && !str_is(doc, use, "sig"))
      continue;
    if (str_is(doc, acp_json_obj_getz(k, "kty"), "RSA")) {
      if (alg != NULL && !str_is(doc, alg, "RS256"))
        continue;
      j->kty = KTY_RSA;
      j->pkey = rsa_key(doc, k, &b);
    } else if (str_is(doc, acp_json_obj_getz(k, "kty"), "EC")) {
      if (alg != NULL && !str_is(doc, alg, "ES256"))
        continue;
      j->kty = KTY_EC;
      j->pkey = ec_key(doc, k, &b);
    }
    if (j->pkey == NULL)
      continue;
    j->alg_given = alg != NULL;
    j->kid = str_member(&m, doc, k, "kid", &nomem);
    if (nomem) {
      EVP_PKEY_free(j->pkey);
      j->pkey = NULL;
      goto nomem;
    }
    set->n++;
  }
  acp__buf_dispose(&b);
  acp_json_doc_free(doc);
  *out = set;
  return 0;
nomem:
  acp__buf_dispose(&b);
  acp_json_doc_free(doc);
  if (set != NULL && set->keys == NULL) {
    acp__free(&m, set);
    set = NULL;
  }
  acp__jwks_free(set);
  return ACP_ERR_NOMEM;
}

/* MARK: - Signatures */

static bool verify_sig(EVP_PKEY *pkey, int kty, const char *data, size_t dlen,
                       const unsigned char *sig, size_t slen) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  unsigned char *der = NULL;
  int derlen = 0;
  bool ok = false;
  if (md == NULL)
    return false;
  if (kty == KTY_EC) {
    /* JWS (RFC 7518 3.4): R and S, 32 bytes each, big-endian. */
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = NULL, *s = NULL;
    if (es != NULL && slen == 64) {
      r = BN_bin2bn(sig, 32, NULL);
      s = BN_bin2bn(sig + 32, 32, NULL);
      if (r != NULL && s != NULL && ECDSA_SIG_set0(es, r, s) == 1) {
        r = s = NULL; /* owned by es */
        derlen = i2d_ECDSA_SIG(es, &der);
      }
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(es);
    if (derlen <= 0)
      goto out;
    sig = der;
    slen = (size_t)derlen;
  }
  ok = EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pkey) == 1 &&
       EVP_DigestVerify(md, sig, slen, (const unsigned char *)data, dlen) == 1;
out:
  OPENSSL_free(der);
  EVP_MD_CTX_free(md);
  return ok;
}

/* MARK: - Claims */

void acp__jwt_claims_free(const acp_mem *mem, acp__jwt_claims *c) {
  acp_mem m;
  if (c == NULL)
    return;
  acp__mem_init(&m, mem);
  acp__free(&m, c->sub);
  acp__free(&m, c->scope);
  acp__free(&m, c->client_id);
  memset(c, 0, sizeof(*c));
}

static bool aud_has(acp_json_doc *doc, const acp_json_val *aud,
                    const char *want) {
  const acp_json_val *v;
  if (acp_json_type_of(aud) == ACP_JSON_STRING)
    return str_is(doc, aud, want);
  if (acp_json_type_of(aud) != ACP_JSON_ARRAY)
    return false;
  for (v = acp_json_child(aud); v != NULL; v = acp_json_next(v))
    if (str_is(doc, v, want))
      return true;
  return false;
}

/* `scope` (a string) or `scp` (an array of strings, or a string) joined
 * with spaces; "" when neither. */
static int scopes_of(const acp_mem *m, acp_json_doc *doc,
                     const acp_json_val *obj, char **out) {
  const acp_json_val *v = acp_json_obj_getz(obj, "scope");
  acp__buf b;
  const char *s;
  size_t n;
  int rv = 0;
  acp__buf_init(&b, m, 64 << 10);
  if (v == NULL || acp_json_type_of(v) != ACP_JSON_STRING)
    v = acp_json_obj_getz(obj, "scp");
  if (acp_json_type_of(v) == ACP_JSON_STRING) {
    if ((rv = acp_json_doc_str(doc, v, &s, &n)) == 0)
      rv = acp__buf_append(&b, s, n);
  } else if (acp_json_type_of(v) == ACP_JSON_ARRAY) {
    const acp_json_val *e;
    for (e = acp_json_child(v); e != NULL && rv == 0; e = acp_json_next(e)) {
      if (acp_json_type_of(e) != ACP_JSON_STRING)
        continue;
      if ((rv = acp_json_doc_str(doc, e, &s, &n)) != 0)
        break;
      if (b.len > 0)
        rv = acp__buf_putc(&b, ' ');
      if (rv == 0)
        rv = acp__buf_append(&b, s, n);
    }
  }
  if (rv == 0)
    rv = acp__buf_putc(&b, '\0');
  if (rv != 0) {
    acp__buf_dispose(&b);
    return rv == ACP_ERR_LIMIT ? ACP_ERR_PROTOCOL : rv;
  }
  if (memchr(b.data, '\0', b.len - 1) != NULL) {
    acp__buf_dispose(&b);
    return ACP_ERR_PROTOCOL;
  }
  *out = b.data; /* the buffer's allocation, freed with acp__free */
  return 0;
}

/* The claims every token and introspection answer share. `jwt`: exp is
 * required (an introspection answer may omit it). */
static int check_claims(const acp_mem *m, acp_json_doc *doc,
                        const acp_json_val *obj, const acp__jwt_expect *x,
                        bool jwt, acp__jwt_claims *out, const char **why) {
  const acp_json_val *iss = acp_json_obj_getz(obj, "iss");
  const acp_json_val *aud = acp_json_obj_getz(obj, "aud");
  int64_t t;
  bool nomem = false;
  int rv;
  if (acp_json_type_of(obj) != ACP_JSON_OBJECT) {
    *why = "claims are not a JSON object";
    return ACP_ERR_PROTOCOL;
  }
  if (dup_members(doc, obj)) {
    *why = "duplicate claim";
    return ACP_ERR_PROTOCOL;
  }
  if ((jwt || iss != NULL) && !str_is(doc, iss, x->issuer)) {
    *why = "wrong issuer";
    return ACP_ERR_PROTOCOL;
  }
  if ((jwt || aud != NULL) && !aud_has(doc, aud, x->audience)) {
    *why = "wrong audience";
    return ACP_ERR_PROTOCOL;
  }
  if (num_claim(obj, "exp", &t)) {
    if (x->now - x->leeway >= t) {
      *why = "token expired";
      return ACP_ERR_PROTOCOL;
    }
    out->exp = t;
  } else if (jwt || acp_json_obj_getz(obj, "exp") != NULL) {
    *why = "no valid exp claim";
    return ACP_ERR_PROTOCOL;
  }
  if (num_claim(obj, "nbf", &t)) {
    if (t > x->now + x->leeway) {
      *why = "token not yet valid";
      return ACP_ERR_PROTOCOL;
    }
  } else if (acp_json_obj_getz(obj, "nbf") != NULL) {
    *why = "malformed nbf claim";
    return ACP_ERR_PROTOCOL;
  }
  if ((rv = scopes_of(m, doc, obj, &out->scope)) != 0) {
    if (rv == ACP_ERR_PROTOCOL)
      *why = "malformed scope claim";
    return rv;
  }
  out->sub = str_member(m, doc, obj, "sub", &nomem);
  if (!nomem)
    out->client_id = str_member(m, doc, obj, "client_id", &nomem);
  return nomem ? ACP_ERR_NOMEM : 0;
}

/* MARK: - JWT */

/* typ (RFC 9068 2.1 asks for at+jwt; plain JWT is what most issuers
 * still send). Anything else (a DPoP proof, an ID token typed as such)
 * is not an access token. */
static bool typ_ok(acp_json_doc *doc, const acp_json_val *typ) {
  const char *s;
  size_t n;
  if (typ == NULL)
    return true;
  if (acp_json_type_of(typ) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, typ, &s, &n) != 0)
    return false;
  return (n == 3 && strncasecmp(s, "JWT", 3) == 0) ||
         (n == 6 && strncasecmp(s, "at+jwt", 6) == 0) ||
         (n == 18 && strncasecmp(s, "application/at+jwt", 18) == 0);
}

int acp__jwt_verify(const acp_mem *mem, const char *tok, size_t len,
                    const acp__jwks *keys, const acp__jwt_expect *x,
                    acp__jwt_claims *out, const char **why) {
  acp_mem m;
  const char *d1, *d2;
  acp_json_doc *doc = NULL;
  const acp_json_val *root;
  acp__buf hdr, pay, sig;
  char *kid = NULL;
  int kty = 0, rv;
  bool nomem = false, tried = false, good = false;
  size_t i;
  static const char *dummy;
  if (why == NULL)
    why = &dummy;
  *why = NULL;
  memset(out, 0, sizeof(*out));
  acp__mem_init(&m, mem);
  if (tok == NULL || len == 0) {
    *why = "empty token";
    return ACP_ERR_PROTOCOL;
  }
  if (len > ACP__JWT_MAX_TOKEN) {
    *why = "token too large";
    return ACP_ERR_PROTOCOL;
  }
  d1 = memchr(tok, '.', len);
  d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok)) : NULL;
  if (d1 == NULL || d2 == NULL ||
      memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - tok)) != NULL) {
    *why = "not a compact JWS";
    return ACP_ERR_PROTOCOL;
  }
  acp__buf_init(&hdr, &m, ACP__JWT_MAX_TOKEN);
  acp__buf_init(&pay, &m, ACP__JWT_MAX_TOKEN);
  acp__buf_init(&sig, &m, ACP__JWT_MAX_TOKEN);
  rv = acp__b64_decode(&hdr, tok, (size_t)(d1 - tok), ACP__B64_URL);
  if (rv == 0)
    rv = acp__b64_decode(&pay, d1 + 1, (size_t)(d2 - d1 - 1), ACP__B64_URL);
  if (rv == 0)
    rv = acp__b64_decode(&sig, d2 + 1, len - (size_t)(d2 + 1 - tok),
                         ACP__B64_URL);
  if (rv != 0) {
    if (rv != ACP_ERR_NOMEM) {
      *why = "malformed base64url";
      rv = ACP_ERR_PROTOCOL;
    }
    goto out;
  }
  if ((rv = acp_json_doc_new(&doc, &m)) != 0)
    goto out;

  /* The header: alg, kid, typ, crit. */
  if ((rv = acp_json_doc_parse(doc, hdr.data, hdr.len, NULL)) != 0 ||
      acp_json_type_of(root = acp_json_doc_root(doc)) != ACP_JSON_OBJECT) {
    if (rv != ACP_ERR_NOMEM) {
      *why = "malformed JOSE header";
      rv = ACP_ERR_PROTOCOL;
    }
    goto out;
  }
  if (str_is(doc, acp_json_obj_getz(root, "alg"), "RS256"))
    kty = KTY_RSA;
  else if (str_is(doc, acp_json_obj_getz(root, "alg"), "ES256"))
    kty = KTY_EC;
  else {
    *why = "unsupported alg";
    rv = ACP_ERR_PROTOCOL;
    goto out;
  }
  if (!typ_ok(doc, acp_json_obj_getz(root, "typ")) ||
      acp_json_obj_getz(root, "crit") != NULL || dup_members(doc, root)) {
    *why = "unsupported JOSE header";
    rv = ACP_ERR_PROTOCOL;
    goto out;
  }
  if (acp_json_obj_getz(root, "kid") != NULL) {
    kid = str_member(&m, doc, root, "kid", &nomem);
    if (nomem) {
      rv = ACP_ERR_NOMEM;
      goto out;
    }
    if (kid == NULL) {
      *why = "malformed kid";
      rv = ACP_ERR_PROTOCOL;
      goto out;
    }
  }

  /* The signature, with each key that fits alg and kid. */
  for (i = 0; keys != NULL && i < keys->n && !good; i++) {
    const jwk *j = &keys->keys[i];
    if (j->kty != kty)
      continue;
    if (kid != NULL && (j->kid == NULL || strcmp(j->kid, kid) != 0))
      continue;
    tried = true;
    good = verify_sig(j->pkey, kty, tok, (size_t)(d2 - tok),
                      (const unsigned char *)sig.data, sig.len);
  }
  if (!tried) {
    *why = "no key for the token's kid and alg";
    rv = ACP_ERR_NOT_FOUND;
    goto out;
  }
  if (!good) {
    *why = "bad signature";
    rv = ACP_ERR_PROTOCOL;
    goto out;
  }

  /* Only now are the claims worth reading. */
  if ((rv = acp_json_doc_parse(doc, pay.data, pay.len, NULL)) != 0) {
    if (rv != ACP_ERR_NOMEM) {
      *why = "malformed claims";
      rv = ACP_ERR_PROTOCOL;
    }
    goto out;
  }
  rv = check_claims(&m, doc, acp_json_doc_root(doc), x, true, out, why);
out:
  if (rv != 0)
    acp__jwt_claims_free(&m, out);
  acp__free(&m, kid);
  acp_json_doc_free(doc);
  acp__buf_dispose(&hdr);
  acp__buf_dispose(&pay);
  acp__buf_dispose(&sig);
  return rv;
}

/* MARK: - Introspection */

int acp__introspection_check(const acp_mem *mem, const char *json, size_t len,
                             const acp__jwt_expect *x, acp__jwt_claims *out,
                             const char **why) {
  acp_mem m;
  acp_json_doc *doc = NULL;
  const acp_json_val *root;
  bool active = false;
  int rv;
  static const char *dummy;
  if (why == NULL)
    why = &dummy;
  *why = NULL;
  memset(out, 0, sizeof(*out));
  acp__mem_init(&m, mem);
  if ((rv = acp_json_doc_new(&doc, &m)) != 0)
    return rv;
  rv = acp_json_doc_parse(doc, json, len, NULL);
  root = acp_json_doc_root(doc);
  if (rv != 0 || acp_json_type_of(root) != ACP_JSON_OBJECT) {
    acp_json_doc_free(doc);
    if (rv == ACP_ERR_NOMEM)
      return rv;
    *why = "malformed introspection answer";
    return ACP_ERR_PROTOCOL;
  }
  if (acp_json_get_bool(acp_json_obj_getz(root, "active"), &active) != 0 ||
      !active) {
    acp_json_doc_free(doc);
    *why = "token not active";
    return ACP_ERR_PROTOCOL;
  }
  rv = check_claims(&m, doc, root, x, false, out, why);
  if (rv != 0)
    acp__jwt_claims_free(&m, out);
  acp_json_doc_free(doc);
  return rv;
}

/* MARK: - Scopes */

static bool has_word(const char *list, const char *w, size_t wl) {
  const char *p = list;
  while (p != NULL && *p) {
    size_t n;
    while (*p == ' ')
      p++;
    n = strcspn(p, " ");
    if (n == wl && n > 0 && memcmp(p, w, n) == 0)
      return true;
    p += n;
  }
  return false;
}

bool acp__scope_covers(const char *have, const char *need) {
  const char *p = need;
  while (p != NULL && *p) {
    size_t n;
    while (*p == ' ')
      p++;
    n = strcspn(p, " ");
    if (n > 0 && !has_word(have, p, n))
      return false;
    p += n;
  }
  return true;
}
