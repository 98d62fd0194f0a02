/*
 * JWS signing of the authorization client (src/http/jws.c, libacp-http):
 * every signature is checked here with OpenSSL itself (sign, then verify
 * with the public key rebuilt from the JWK the module publishes, so the
 * JWK is checked too), ES256 in the JOSE r||s form (64 bytes), DPoP and
 * client assertion claims (ath recomputed with OpenSSL's SHA-256), bad keys
 * and bad PEM, and allocation failure: the test is linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc, so every allocation the
 * module (and the JSON writer and buffers under it) makes can be refused,
 * one after the other, and each function must fail cleanly (valgrind and
 * ASan see no leak) and then succeed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "wrapmem.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

#include "acp/common.h"
#include "acp/json.h"
#include "http/jws.h"
#include "http/oauth.h"

/* MARK: - Helpers (OpenSSL, independent of the module) */

static size_t b64url_dec(const char *s, size_t n, unsigned char *out) {
  static const char *a =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t i, o = 0;
  unsigned v = 0;
  int bits = 0;
  for (i = 0; i < n; i++) {
    const char *p = strchr(a, s[i]);
    assert_non_null(p);
    v = (v << 6) | (unsigned)(p - a);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (unsigned char)((v >> bits) & 0xff);
    }
  }
  return o;
}

static void b64url_enc(const unsigned char *in, size_t n, char *out) {
  EVP_EncodeBlock((unsigned char *)out, in, (int)n);
  for (char *p = out; *p; p++) {
    if (*p == '+')
      *p = '-';
    else if (*p == '/')
      *p = '_';
    else if (*p == '=') {
      *p = '\0';
      break;
    }
  }
}

/* The value of string member `k` of JSON object text `json`, copied. */
static char *json_member(const char *json, const char *k) {
  acp_json_doc *doc = NULL;
  const acp_json_val *v;
  const char *s;
  size_t n;
  char *r = NULL;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, json, strlen(json), NULL), 0);
  v = acp_json_obj_getz(acp_json_doc_root(doc), k);
  if (v != NULL && acp_json_type_of(v) == ACP_JSON_STRING &&
      acp_json_doc_str(doc, v, &s, &n) == 0)
    r = strndup(s, n);
  acp_json_doc_free(doc);
  return r;
}

static int64_t json_int(const char *json, const char *k) {
  acp_json_doc *doc = NULL;
  int64_t x = -1;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, json, strlen(json), NULL), 0);
  assert_int_equal(
      acp_json_get_int64(acp_json_obj_getz(acp_json_doc_root(doc), k), &x), 0);
  acp_json_doc_free(doc);
  return x;
}

/* The public key of an EC P-256 JWK {"crv","kty","x","y"}. */
static EVP_PKEY *ec_from_jwk(const char *jwk) {
  char *x = json_member(jwk, "x"), *y = json_member(jwk, "y");
  unsigned char pub[65];
  OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
  OSSL_PARAM *params;
  EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
  EVP_PKEY *pk = NULL;
  char *crv = json_member(jwk, "crv"), *kty = json_member(jwk, "kty");
  assert_string_equal(crv, "P-256");
  assert_string_equal(kty, "EC");
  assert_int_equal(strlen(x), 43);
  assert_int_equal(strlen(y), 43);
  pub[0] = 4;
  assert_int_equal(b64url_dec(x, 43, pub + 1), 32);
  assert_int_equal(b64url_dec(y, 43, pub + 33), 32);
  OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0);
  OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, pub, 65);
  params = OSSL_PARAM_BLD_to_param(b);
  assert_int_equal(EVP_PKEY_fromdata_init(ctx), 1);
  assert_int_equal(EVP_PKEY_fromdata(ctx, &pk, EVP_PKEY_PUBLIC_KEY, params), 1);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(b);
  EVP_PKEY_CTX_free(ctx);
  free(x);
  free(y);
  free(crv);
  free(kty);
  return pk;
}

/* Verify compact JWS `jws` with `pk`; ES256 signatures must be 64 bytes
 * r||s. Returns the decoded header in *hdr and payload in *payload. */
static void verify(const char *jws, EVP_PKEY *pk, bool ec, char **hdr,
                   char **payload) {
  const char *d1 = strchr(jws, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
  unsigned char sig[1024], der[128], *dp = der;
  size_t slen;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  assert_non_null(d2);
  assert_null(strchr(d2 + 1, '.'));
  *hdr = calloc(1, 2048);
  *payload = calloc(1, 2048);
  b64url_dec(jws, (size_t)(d1 - jws), (unsigned char *)*hdr);
  b64url_dec(d1 + 1, (size_t)(d2 - d1 - 1), (unsigned char *)*payload);
  slen = b64url_dec(d2 + 1, strlen(d2 + 1), sig);
  if (ec) {
    ECDSA_SIG *es = ECDSA_SIG_new();
    int dl;
    assert_int_equal(slen, 64); /* JOSE r||s, not DER */
    ECDSA_SIG_set0(es, BN_bin2bn(sig, 32, NULL), BN_bin2bn(sig + 32, 32, NULL));
    dl = i2d_ECDSA_SIG(es, &dp);
    assert_true(dl > 0);
    ECDSA_SIG_free(es);
    memcpy(sig, der, (size_t)dl);
    slen = (size_t)dl;
  }
  assert_int_equal(EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pk), 1);
  assert_int_equal(EVP_DigestVerify(ctx, sig, slen, (const unsigned char *)jws,
                                    (size_t)(d2 - jws)),
                   1);
  /* One flipped bit of the signed input does not verify. */
  {
    char *bad = strdup(jws);
    bad[0] = bad[0] == 'e' ? 'f' : 'e';
    assert_int_equal(EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pk),
                     1);
    assert_int_not_equal(EVP_DigestVerify(ctx, sig, slen,
                                          (const unsigned char *)bad,
                                          (size_t)(d2 - jws)),
                         1);
    free(bad);
  }
  EVP_MD_CTX_free(ctx);
}

static char *pem_of(EVP_PKEY *pk, bool traditional) {
  BIO *b = BIO_new(BIO_s_mem());
  char *data, *r;
  long n;
  if (traditional)
    assert_int_equal(
        PEM_write_bio_PrivateKey_traditional(b, pk, NULL, NULL, 0, NULL, NULL),
        1);
  else
    assert_int_equal(PEM_write_bio_PrivateKey(b, pk, NULL, NULL, 0, NULL, NULL),
                     1);
  n = BIO_get_mem_data(b, &data);
  r = strndup(data, (size_t)n);
  BIO_free(b);
  return r;
}

/* MARK: - Tests */

static void test_es256_generated(void **state) {
  acp__jws_key *k = NULL;
  char *jwk = NULL, *hdr_json, *jws = NULL, *hdr, *payload, tp[44], tp2[44];
  EVP_PKEY *pub;
  (void)state;
  assert_int_equal(acp__jws_key_generate_es256(&k), 0);
  assert_string_equal(acp__jws_key_alg(k), "ES256");
  assert_int_equal(acp__jws_public_jwk(k, &jwk), 0);
  /* RFC 7638: required members only, in lexicographic order, no spaces. */
  assert_int_equal(
      strncmp(jwk, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"", 31), 0);
  assert_null(strstr(jwk, "\"d\""));
  assert_int_equal(acp__jws_thumbprint(k, tp), 0);
  acp__jws_sha256_b64url(jwk, tp2);
  assert_string_equal(tp, tp2);
  assert_int_equal(strlen(tp), 43);
  pub = ec_from_jwk(jwk);
  hdr_json = acp__jws_header("ES256", "dpop+jwt", jwk);
  assert_non_null(hdr_json);
  for (int i = 0; i < 5; i++) { /* ECDSA is randomized: sign a few times */
    assert_int_equal(acp__jws_sign(k, hdr_json, "{\"a\":1}", &jws), 0);
    verify(jws, pub, true, &hdr, &payload);
    assert_string_equal(hdr, hdr_json);
    assert_string_equal(payload, "{\"a\":1}");
    free(hdr);
    free(payload);
    free(jws);
  }
  free(hdr_json);
  free(jwk);
  EVP_PKEY_free(pub);
  acp__jws_key_free(k);
}

static void test_es256_pem(void **state) {
  EVP_PKEY *pk = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  char *pem = pem_of(pk, false), *sec1 = pem_of(pk, true);
  acp__jws_key *k = NULL;
  const char *why = NULL;
  char *jws = NULL, *hdr, *payload, *claims;
  (void)state;
  assert_int_equal(acp__jws_key_from_pem(pem, strlen(pem), "ES256", &k, &why),
                   0);
  claims = acp__jws_assertion_claims("client-1", "https://as.example/", "j1",
                                     1000, 300);
  assert_non_null(claims);
  assert_int_equal(acp__jws_sign(k, "{\"alg\":\"ES256\"}", claims, &jws), 0);
  verify(jws, pk, true, &hdr, &payload); /* with the test's own key */
  assert_string_equal(payload, claims);
  {
    char *iss = json_member(payload, "iss"), *sub = json_member(payload, "sub");
    char *aud = json_member(payload, "aud"), *jti = json_member(payload, "jti");
    assert_string_equal(iss, "client-1");
    assert_string_equal(sub, "client-1");
    assert_string_equal(aud, "https://as.example/");
    assert_string_equal(jti, "j1");
    assert_int_equal(json_int(payload, "iat"), 1000);
    assert_int_equal(json_int(payload, "exp"), 1300);
    free(iss);
    free(sub);
    free(aud);
    free(jti);
  }
  free(hdr);
  free(payload);
  free(jws);
  free(claims);
  acp__jws_key_free(k);
  /* The traditional SEC1 form, alg taken from the key. */
  k = NULL;
  assert_int_equal(acp__jws_key_from_pem(sec1, strlen(sec1), NULL, &k, &why),
                   0);
  assert_string_equal(acp__jws_key_alg(k), "ES256");
  acp__jws_key_free(k);
  free(pem);
  free(sec1);
  EVP_PKEY_free(pk);
}

static void test_rs256_pem(void **state) {
  EVP_PKEY *pk = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
  char *pem = pem_of(pk, false), *jwk = NULL, *jws = NULL, *hdr, *payload;
  acp__jws_key *k = NULL;
  BIGNUM *n = NULL;
  unsigned char nb[256];
  char nenc[400];
  (void)state;
  assert_int_equal(acp__jws_key_from_pem(pem, strlen(pem), NULL, &k, NULL), 0);
  assert_string_equal(acp__jws_key_alg(k), "RS256");
  assert_int_equal(acp__jws_sign(k, "{\"alg\":\"RS256\"}", "{}", &jws), 0);
  verify(jws, pk, false, &hdr, &payload);
  assert_string_equal(payload, "{}");
  /* The JWK's n and e are the key's. */
  assert_int_equal(acp__jws_public_jwk(k, &jwk), 0);
  assert_int_equal(strncmp(jwk, "{\"e\":\"AQAB\",\"kty\":\"RSA\",\"n\":\"", 29),
                   0);
  assert_int_equal(EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_RSA_N, &n), 1);
  assert_int_equal(BN_bn2binpad(n, nb, 256), 256);
  b64url_enc(nb, 256, nenc);
  {
    char *jn = json_member(jwk, "n");
    assert_string_equal(jn, nenc);
    free(jn);
  }
  BN_free(n);
  free(jwk);
  free(hdr);
  free(payload);
  free(jws);
  free(pem);
  acp__jws_key_free(k);
  EVP_PKEY_free(pk);
}

static void test_dpop_claims(void **state) {
  const char *tok = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln";
  unsigned char d[32];
  char want[64], *c, *ath, *htu, *htm, *jti, *nonce;
  (void)state;
  c = acp__jws_dpop_claims("POST", "https://rs.example/mcp?x=1#f", "jti-1",
                           1700000000, tok, "n-1");
  assert_non_null(c);
  htu = json_member(c, "htu");
  htm = json_member(c, "htm");
  jti = json_member(c, "jti");
  ath = json_member(c, "ath");
  nonce = json_member(c, "nonce");
  assert_string_equal(htu, "https://rs.example/mcp"); /* no query, fragment */
  assert_string_equal(htm, "POST");
  assert_string_equal(jti, "jti-1");
  assert_string_equal(nonce, "n-1");
  assert_int_equal(json_int(c, "iat"), 1700000000);
  /* ath = base64url(SHA-256(ASCII token)), computed with OpenSSL here. */
  assert_int_equal(EVP_Digest(tok, strlen(tok), d, NULL, EVP_sha256(), NULL),
                   1);
  b64url_enc(d, 32, want);
  assert_string_equal(ath, want);
  free(c);
  free(htu);
  free(htm);
  free(jti);
  free(ath);
  free(nonce);
  /* At the token endpoint: no ath, no nonce. */
  c = acp__jws_dpop_claims("POST", "https://as.example/token", "j", 1, NULL,
                           NULL);
  assert_non_null(c);
  assert_null(strstr(c, "\"ath\""));
  assert_null(strstr(c, "\"nonce\""));
  free(c);
  /* Strings are escaped, not pasted. */
  c = acp__jws_dpop_claims("POST", "https://a/\"x", "j\"", 1, NULL, "\\");
  assert_non_null(c);
  jti = json_member(c, "jti");
  assert_string_equal(jti, "j\"");
  free(jti);
  free(c);
  assert_null(acp__jws_dpop_claims(NULL, "https://a/", "j", 1, NULL, NULL));
  assert_null(acp__jws_assertion_claims("c", "a", "j", 1, 0));
  assert_null(acp__jws_assertion_claims(NULL, "a", "j", 1, 10));
  assert_null(acp__jws_header(NULL, NULL, NULL));
}

static void test_bad_keys(void **state) {
  acp__jws_key *k = (acp__jws_key *)1;
  const char *why = NULL;
  const char *junk = "-----BEGIN PRIVATE KEY-----\nnot base64\n"
                     "-----END PRIVATE KEY-----\n";
  EVP_PKEY *rsa1k = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
  EVP_PKEY *p384 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
  EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
  char *p1 = pem_of(rsa1k, false), *p2 = pem_of(p384, false);
  char *p3 = pem_of(ec, false), *p4 = pem_of(ed, false), *enc;
  char *jws = (char *)1;
  (void)state;
  assert_int_equal(acp__jws_key_from_pem(junk, strlen(junk), NULL, &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(k);
  assert_non_null(why);
  assert_non_null(strstr(why, "private key"));
  assert_int_equal(acp__jws_key_from_pem("", 0, NULL, &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__jws_key_from_pem(NULL, 10, NULL, &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__jws_key_from_pem(p1, strlen(p1), NULL, &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(why, "2048"));
  assert_int_equal(acp__jws_key_from_pem(p2, strlen(p2), NULL, &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(why, "P-256"));
  assert_int_equal(acp__jws_key_from_pem(p3, strlen(p3), "RS256", &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(why, "RSA"));
  assert_int_equal(acp__jws_key_from_pem(p3, strlen(p3), "HS256", &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(why, "algorithm"));
  assert_int_equal(acp__jws_key_from_pem(p4, strlen(p4), NULL, &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  /* A truncated PEM. */
  assert_int_equal(acp__jws_key_from_pem(p3, strlen(p3) / 2, NULL, &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  /* An encrypted key is refused, not prompted for. */
  {
    BIO *b = BIO_new(BIO_s_mem());
    char *d;
    long n;
    assert_int_equal(PEM_write_bio_PKCS8PrivateKey(b, ec, EVP_aes_128_cbc(),
                                                   "pw", 2, NULL, NULL),
                     1);
    n = BIO_get_mem_data(b, &d);
    enc = strndup(d, (size_t)n);
    BIO_free(b);
  }
  assert_int_equal(acp__jws_key_from_pem(enc, strlen(enc), NULL, &k, &why),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(k);
  assert_int_equal(acp__jws_sign(NULL, "{}", "{}", &jws),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(jws);
  assert_int_equal(acp__jws_public_jwk(NULL, &jws), ACP_ERR_INVALID_ARGUMENT);
  acp__jws_key_free(NULL);
  free(p1);
  free(p2);
  free(p3);
  free(p4);
  free(enc);
  EVP_PKEY_free(rsa1k);
  EVP_PKEY_free(p384);
  EVP_PKEY_free(ec);
  EVP_PKEY_free(ed);
}

/* Challenges with the DPoP scheme, DPoP token types, grant bodies. */
static void test_oauth_dpop_bits(void **state) {
  acp__oauth_challenge c;
  acp__oauth_token t;
  char *body = NULL, *authz = NULL;
  const char *p[] = {
      "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer",
      "assertion",  "a.b.c",
      "scope",      NULL,
      NULL};
  const char *dp = "{\"access_token\":\"T\",\"token_type\":\"DPoP\"}";
  const char *na = "{\"access_token\":\"J\",\"token_type\":\"N_A\","
                   "\"issued_token_type\":\"urn:x\"}";
  (void)state;
  assert_int_equal(
      acp__oauth_parse_challenge(
          "DPoP error=\"use_dpop_nonce\", resource_metadata=\"https://r/m\"",
          &c),
      0);
  assert_true(c.dpop);
  assert_false(c.bearer);
  assert_string_equal(c.error, "use_dpop_nonce");
  assert_string_equal(c.resource_metadata, "https://r/m");
  acp__oauth_challenge_free(&c);
  assert_int_equal(acp__oauth_parse_token(dp, strlen(dp), &t), 0);
  assert_int_equal(t.type, ACP__OAUTH_TOKEN_DPOP);
  acp__oauth_token_free(&t);
  assert_int_equal(acp__oauth_parse_token(na, strlen(na), &t), 0);
  assert_int_equal(t.type, ACP__OAUTH_TOKEN_NA);
  assert_string_equal(t.issued_token_type, "urn:x");
  acp__oauth_token_free(&t);
  /* private_key_jwt: the assertion in the body, no Authorization. */
  assert_int_equal(acp__oauth_grant_request(p, "cid", "x.y.z",
                                            ACP__OAUTH_AUTH_JWT, &body, &authz),
                   0);
  assert_string_equal(
      body, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&"
            "assertion=a.b.c&client_id=cid&client_assertion_type=urn%3Aietf%"
            "3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_"
            "assertion=x.y.z");
  assert_null(authz);
  free(body);
  /* No client id at all (a public assertion grant). */
  assert_int_equal(acp__oauth_grant_request(p, NULL, NULL, ACP__OAUTH_AUTH_NONE,
                                            &body, &authz),
                   0);
  assert_null(strstr(body, "client_id"));
  free(body);
  assert_int_equal(acp__oauth_grant_request(p, "cid", NULL, ACP__OAUTH_AUTH_JWT,
                                            &body, &authz),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(body);
}

/* Every allocation refused in turn: a clean ACP_ERR_NOMEM (or NULL), no
 * leak, and success once nothing is refused. */
static void test_alloc_failure(void **state) {
  acp__jws_key *k = NULL;
  EVP_PKEY *pk = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  char *pem = pem_of(pk, false);
  long i;
  bool done = false;
  (void)state;
  for (i = 0; !done && i < 10000; i++) {
    char *jwk = NULL, *jws = NULL, *claims, *hdr, tp[44];
    const char *why;
    int r1, r2 = -1, r3 = -1, r4 = -1;
    wrapmem_arm(i);
    k = NULL;
    r1 = acp__jws_key_from_pem(pem, strlen(pem), "ES256", &k, &why);
    if (r1 == 0) {
      r2 = acp__jws_public_jwk(k, &jwk);
      r3 = acp__jws_thumbprint(k, tp);
    }
    claims = acp__jws_dpop_claims("GET", "https://a/b", "j", 1, "tok", "n");
    hdr = acp__jws_header("ES256", "dpop+jwt", jwk);
    if (r1 == 0 && claims && hdr)
      r4 = acp__jws_sign(k, hdr, claims, &jws);
    wrapmem_fail_at = -1;
    assert_true(r1 == 0 || r1 == ACP_ERR_NOMEM);
    if (r1 == 0) {
      assert_true(r2 == 0 || r2 == ACP_ERR_NOMEM);
      assert_true(r3 == 0 || r3 == ACP_ERR_NOMEM);
      assert_true(r4 == 0 || r4 == ACP_ERR_NOMEM || r4 == -1);
      if (r2 != 0)
        assert_null(jwk);
      if (r4 != 0)
        assert_null(jws);
    }
    done = r1 == 0 && r2 == 0 && r3 == 0 && r4 == 0 && wrapmem_count <= i;
    free(jwk);
    free(jws);
    free(claims);
    free(hdr);
    acp__jws_key_free(k);
  }
  assert_true(done);
  assert_true(i > 3); /* allocations were refused on the way */
  free(pem);
  EVP_PKEY_free(pk);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_es256_generated),
      cmocka_unit_test(test_es256_pem),
      cmocka_unit_test(test_rs256_pem),
      cmocka_unit_test(test_dpop_claims),
      cmocka_unit_test(test_bad_keys),
      cmocka_unit_test(test_oauth_dpop_bits),
      cmocka_unit_test(test_alloc_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
