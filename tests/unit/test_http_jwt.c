/*
 * The resource server's token checks (src/http/jwt.c) and configuration
 * (src/http/auth.c): JWK Sets and JWT access tokens made here with
 * OpenSSL (fresh RSA 2048 and P-256 keys each run), valid RS256 and ES256
 * tokens, and every way a token or key set can be wrong; introspection
 * answers; the metadata; allocation failures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "acp/common.h"
#include "acp/http.h"
#include "failmem.h"
#include "http_test.h"
#include "http/http_internal.h"
#include "http/jwt.h"
#include "util.h"

#define ISS "https://as.example"
#define AUD "http://127.0.0.1:8080/mcp"

static EVP_PKEY *rsa_k, *rsa_small, *ec_k, *ec_other;
static char jwks[8192];
static int64_t now_s;

/* MARK: - making keys and tokens */

static void b64u(char *out, const void *in, size_t n) {
  out[acp__b64_encode(out, in, n, ACP__B64_URL)] = '\0';
}

static void bn_b64u(char *out, EVP_PKEY *k, const char *name, int pad) {
  BIGNUM *bn = NULL;
  unsigned char buf[512];
  int n;
  assert_int_equal(EVP_PKEY_get_bn_param(k, name, &bn), 1);
  n = pad ? BN_bn2binpad(bn, buf, pad) : BN_bn2bin(bn, buf);
  assert_true(n > 0);
  b64u(out, buf, (size_t)n);
  BN_free(bn);
}

static void rsa_jwk(char *out, size_t cap, EVP_PKEY *k, const char *kid,
                    const char *extra) {
  char n[700], e[16];
  bn_b64u(n, k, OSSL_PKEY_PARAM_RSA_N, 0);
  bn_b64u(e, k, OSSL_PKEY_PARAM_RSA_E, 0);
  snprintf(out, cap,
           "{\"kty\":\"RSA\",\"kid\":\"%s\",\"n\":\"%s\",\"e\":\"%s\"%s}", kid,
           n, e, extra);
}

static void ec_jwk(char *out, size_t cap, EVP_PKEY *k, const char *kid,
                   const char *extra) {
  char x[64], y[64];
  bn_b64u(x, k, OSSL_PKEY_PARAM_EC_PUB_X, 32);
  bn_b64u(y, k, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
  snprintf(out, cap,
           "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"%s\",\"x\":\"%s\","
           "\"y\":\"%s\"%s}",
           kid, x, y, extra);
}

/* header.payload.signature, signed with `k` (RSA: RS256, EC: ES256,
 * NULL: empty signature). */
static char *token(const char *header, const char *payload, EVP_PKEY *k) {
  static char out[16384];
  char *p = out;
  unsigned char sig[512], raw[64];
  size_t sl = sizeof(sig);
  EVP_MD_CTX *md;
  b64u(p, header, strlen(header));
  p += strlen(p);
  *p++ = '.';
  b64u(p, payload, strlen(payload));
  p += strlen(p);
  if (k == NULL) {
    *p++ = '.';
    *p = '\0';
    return out;
  }
  md = EVP_MD_CTX_new();
  assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k), 1);
  assert_int_equal(
      EVP_DigestSign(md, sig, &sl, (unsigned char *)out, (size_t)(p - out)), 1);
  EVP_MD_CTX_free(md);
  *p++ = '.';
  if (EVP_PKEY_is_a(k, "EC")) {
    const unsigned char *d = sig;
    ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &d, (long)sl);
    assert_non_null(es);
    BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32);
    ECDSA_SIG_free(es);
    b64u(p, raw, 64);
  } else
    b64u(p, sig, sl);
  return out;
}

static char *claims(const char *extra) {
  static char out[4096];
  snprintf(out, sizeof(out),
           "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"sub\":\"alice\","
           "\"exp\":%lld%s}",
           (long long)(now_s + 600), extra);
  return out;
}

static int setup(void **state) {
  char a[2048], b[2048], c[1024];
  (void)state;
  now_s = (int64_t)time(NULL);
  rsa_k = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
  rsa_small = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
  ec_k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  ec_other = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
  if (!rsa_k || !rsa_small || !ec_k || !ec_other)
    return -1;
  rsa_jwk(a, sizeof(a), rsa_k, "r1", ",\"alg\":\"RS256\",\"use\":\"sig\"");
  ec_jwk(b, sizeof(b), ec_k, "e1", "");
  rsa_jwk(c, sizeof(c), rsa_small, "small", "");
  snprintf(jwks, sizeof(jwks),
           "{\"keys\":[%s,%s,%s,{\"kty\":\"oct\",\"k\":"
           "\"c2VjcmV0\",\"kid\":\"h1\"}]}",
           a, b, c);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  EVP_PKEY_free(rsa_k);
  EVP_PKEY_free(rsa_small);
  EVP_PKEY_free(ec_k);
  EVP_PKEY_free(ec_other);
  return 0;
}

static acp__jwks *keys(void) {
  acp__jwks *k = NULL;
  assert_int_equal(acp__jwks_parse(NULL, jwks, strlen(jwks), &k), 0);
  /* The 1024-bit RSA key and the symmetric one are not kept. */
  assert_int_equal(acp__jwks_count(k), 2);
  return k;
}

static int verify(const acp__jwks *k, const char *tok, acp__jwt_claims *c,
                  const char **why) {
  acp__jwt_expect x = {ISS, AUD, now_s, 60};
  return acp__jwt_verify(NULL, tok, strlen(tok), k, &x, c, why);
}

/* Expect an invalid token with reason `want`. */
static void refused(const acp__jwks *k, const char *tok, int code,
                    const char *want) {
  acp__jwt_claims c;
  const char *why = NULL;
  assert_int_equal(verify(k, tok, &c, &why), code);
  assert_non_null(why);
  assert_string_equal(why, want);
  assert_null(c.sub);
  assert_null(c.scope);
}

/* MARK: - tests */

static void test_valid_rs256_and_es256(void **state) {
  acp__jwks *k = keys();
  acp__jwt_claims c;
  const char *why;
  (void)state;
  assert_int_equal(
      verify(k,
             token("{\"alg\":\"RS256\",\"kid\":\"r1\",\"typ\":\"at+jwt\"}",
                   claims(",\"scope\":\"read write\",\"client_id\":\"cl\""),
                   rsa_k),
             &c, &why),
      0);
  assert_string_equal(c.sub, "alice");
  assert_string_equal(c.scope, "read write");
  assert_string_equal(c.client_id, "cl");
  assert_int_equal(c.exp, now_s + 600);
  acp__jwt_claims_free(NULL, &c);

  /* ES256, scp as an array, aud as an array, no kid (every EC key is
   * tried), nbf passed. */
  assert_int_equal(
      verify(k,
             token("{\"alg\":\"ES256\",\"typ\":\"JWT\"}",
                   "{\"iss\":\"" ISS "\",\"aud\":[\"other\",\"" AUD "\"],"
                   "\"exp\":9999999999,\"nbf\":1,\"scp\":[\"a\",\"b\"]}",
                   ec_k),
             &c, &why),
      0);
  assert_null(c.sub);
  assert_string_equal(c.scope, "a b");
  acp__jwt_claims_free(NULL, &c);

  /* No scope at all: "". Within the leeway: still valid. */
  {
    char p[512];
    snprintf(p, sizeof(p),
             "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":%lld,"
             "\"nbf\":%lld}",
             (long long)(now_s - 30), (long long)(now_s + 30));
    assert_int_equal(
        verify(k, token("{\"alg\":\"RS256\",\"kid\":\"r1\"}", p, rsa_k), &c,
               &why),
        0);
    assert_string_equal(c.scope, "");
    acp__jwt_claims_free(NULL, &c);
  }
  acp__jwks_free(k);
}

static void test_tampered(void **state) {
  acp__jwks *k = keys();
  char *t, *dot1, *dot2, saved[16384];
  (void)state;
  /* Payload swapped for another (more scopes) after signing. */
  t = token("{\"alg\":\"RS256\",\"kid\":\"r1\"}", claims(""), rsa_k);
  strcpy(saved, t);
  dot1 = strchr(saved, '.');
  dot2 = strchr(dot1 + 1, '.');
  {
    char *c2 = claims(",\"scope\":\"admin\"");
    char tmp[16384];
    snprintf(tmp, sizeof(tmp), "%.*s.", (int)(dot1 - saved), saved);
    b64u(tmp + strlen(tmp), c2, strlen(c2));
    strcat(tmp, dot2);
    refused(k, tmp, ACP_ERR_PROTOCOL, "bad signature");
  }
  /* One bit of the signature flipped (RSA, then EC). */
  strcpy(saved, t);
  saved[strlen(saved) - 5] = saved[strlen(saved) - 5] == 'A' ? 'B' : 'A';
  refused(k, saved, ACP_ERR_PROTOCOL, "bad signature");
  t = token("{\"alg\":\"ES256\",\"kid\":\"e1\"}", claims(""), ec_k);
  strcpy(saved, t);
  saved[strlen(saved) - 5] = saved[strlen(saved) - 5] == 'A' ? 'B' : 'A';
  refused(k, saved, ACP_ERR_PROTOCOL, "bad signature");
  /* Signed by a key the set does not hold, under a kid it does. */
  refused(k, token("{\"alg\":\"ES256\",\"kid\":\"e1\"}", claims(""), ec_other),
          ACP_ERR_PROTOCOL, "bad signature");
  /* An ES256 signature of the wrong length. */
  t = token("{\"alg\":\"ES256\",\"kid\":\"e1\"}", claims(""), ec_k);
  strcpy(saved, t);
  saved[strlen(saved) - 4] = '\0';
  refused(k, saved, ACP_ERR_PROTOCOL, "bad signature");
  acp__jwks_free(k);
}

static void test_algorithms(void **state) {
  acp__jwks *k = keys();
  char pem[4096], tok[16384], *p;
  uint8_t mac[32];
  BIO *bio;
  long n;
  (void)state;
  /* alg none, with and without a signature part. */
  refused(k, token("{\"alg\":\"none\"}", claims(""), NULL), ACP_ERR_PROTOCOL,
          "unsupported alg");
  refused(k, token("{\"alg\":\"None\",\"kid\":\"r1\"}", claims(""), NULL),
          ACP_ERR_PROTOCOL, "unsupported alg");
  /* HS256 keyed with the RSA public key (PEM): the classic confusion. */
  bio = BIO_new(BIO_s_mem());
  assert_int_equal(PEM_write_bio_PUBKEY(bio, rsa_k), 1);
  n = BIO_read(bio, pem, sizeof(pem) - 1);
  BIO_free(bio);
  assert_true(n > 0);
  p = token("{\"alg\":\"HS256\",\"kid\":\"r1\"}", claims(""), NULL);
  strcpy(tok, p);
  acp__hmac_sha256(pem, (size_t)n, tok, strlen(tok) - 1, mac);
  b64u(tok + strlen(tok), mac, 32);
  refused(k, tok, ACP_ERR_PROTOCOL, "unsupported alg");
  /* HS256 naming the symmetric key of the set (skipped at parse). */
  refused(k, token("{\"alg\":\"HS256\",\"kid\":\"h1\"}", claims(""), NULL),
          ACP_ERR_PROTOCOL, "unsupported alg");
  /* Other algorithms we do not take, and alg not a string. */
  refused(k, token("{\"alg\":\"PS256\",\"kid\":\"r1\"}", claims(""), rsa_k),
          ACP_ERR_PROTOCOL, "unsupported alg");
  refused(k, token("{\"alg\":1}", claims(""), rsa_k), ACP_ERR_PROTOCOL,
          "unsupported alg");
  refused(k, token("{\"kid\":\"r1\"}", claims(""), rsa_k), ACP_ERR_PROTOCOL,
          "unsupported alg");
  /* alg/key mismatch: ES256 naming the RSA key, RS256 naming the EC
   * key: no key fits. */
  refused(k, token("{\"alg\":\"ES256\",\"kid\":\"r1\"}", claims(""), ec_k),
          ACP_ERR_NOT_FOUND, "no key for the token's kid and alg");
  refused(k, token("{\"alg\":\"RS256\",\"kid\":\"e1\"}", claims(""), rsa_k),
          ACP_ERR_NOT_FOUND, "no key for the token's kid and alg");
  /* Unknown kid. */
  refused(k, token("{\"alg\":\"RS256\",\"kid\":\"r9\"}", claims(""), rsa_k),
          ACP_ERR_NOT_FOUND, "no key for the token's kid and alg");
  /* The 1024-bit key was not kept. */
  refused(k,
          token("{\"alg\":\"RS256\",\"kid\":\"small\"}", claims(""), rsa_small),
          ACP_ERR_NOT_FOUND, "no key for the token's kid and alg");
  /* typ of something that is not an access token; crit. */
  refused(k,
          token("{\"alg\":\"RS256\",\"kid\":\"r1\",\"typ\":\"dpop+jwt\"}",
                claims(""), rsa_k),
          ACP_ERR_PROTOCOL, "unsupported JOSE header");
  refused(k,
          token("{\"alg\":\"RS256\",\"kid\":\"r1\",\"crit\":[\"x\"],"
                "\"x\":1}",
                claims(""), rsa_k),
          ACP_ERR_PROTOCOL, "unsupported JOSE header");
  refused(k, token("{\"alg\":\"RS256\",\"kid\":7}", claims(""), rsa_k),
          ACP_ERR_PROTOCOL, "malformed kid");
  acp__jwks_free(k);
}

static void test_claims(void **state) {
  acp__jwks *k = keys();
  char p[1024];
  const char *h = "{\"alg\":\"RS256\",\"kid\":\"r1\"}";
  (void)state;
  snprintf(p, sizeof(p),
           "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":%lld}",
           (long long)(now_s - 61));
  refused(k, token(h, p, rsa_k), ACP_ERR_PROTOCOL, "token expired");
  snprintf(p, sizeof(p),
           "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":%lld,"
           "\"nbf\":%lld}",
           (long long)(now_s + 600), (long long)(now_s + 120));
  refused(k, token(h, p, rsa_k), ACP_ERR_PROTOCOL, "token not yet valid");
  refused(k, token(h, "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\"}", rsa_k),
          ACP_ERR_PROTOCOL, "no valid exp claim");
  refused(k,
          token(h,
                "{\"iss\":\"" ISS "\",\"aud\":\"" AUD
                "\",\"exp\":\"9999999999\"}",
                rsa_k),
          ACP_ERR_PROTOCOL, "no valid exp claim");
  refused(k,
          token(h,
                "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":9999999999,"
                "\"nbf\":\"x\"}",
                rsa_k),
          ACP_ERR_PROTOCOL, "malformed nbf claim");
  refused(k,
          token(h,
                "{\"iss\":\"https://evil.example\",\"aud\":\"" AUD
                "\",\"exp\":9999999999}",
                rsa_k),
          ACP_ERR_PROTOCOL, "wrong issuer");
  refused(k, token(h, "{\"aud\":\"" AUD "\",\"exp\":9999999999}", rsa_k),
          ACP_ERR_PROTOCOL, "wrong issuer");
  refused(k,
          token(h,
                "{\"iss\":\"" ISS "\",\"aud\":\"http://127.0.0.1:8080\","
                "\"exp\":9999999999}",
                rsa_k),
          ACP_ERR_PROTOCOL, "wrong audience");
  refused(k,
          token(h, "{\"iss\":\"" ISS "\",\"aud\":[\"a\",1],\"exp\":9999999999}",
                rsa_k),
          ACP_ERR_PROTOCOL, "wrong audience");
  refused(k, token(h, "{\"iss\":\"" ISS "\",\"exp\":9999999999}", rsa_k),
          ACP_ERR_PROTOCOL, "wrong audience");
  refused(k, token(h, "[1]", rsa_k), ACP_ERR_PROTOCOL,
          "claims are not a JSON object");
  /* A claim named twice (a parser reading the first or the last would
   * disagree on who this is). */
  refused(k,
          token(h,
                "{\"iss\":\"" ISS "\",\"aud\":\"" AUD
                "\",\"exp\":9999999999,\"sub\":\"a\",\"sub\":\"b\"}",
                rsa_k),
          ACP_ERR_PROTOCOL, "duplicate claim");
  refused(k,
          token("{\"alg\":\"RS256\",\"kid\":\"r1\",\"alg\":\"none\"}",
                claims(""), rsa_k),
          ACP_ERR_PROTOCOL, "unsupported JOSE header");
  refused(k, token(h, "{\"iss\":", rsa_k), ACP_ERR_PROTOCOL,
          "malformed claims");
  refused(k,
          token(h,
                "{\"iss\":\"" ISS "\",\"aud\":\"" AUD
                "\",\"exp\":9999999999,\"scope\":\"a\\u0000b\"}",
                rsa_k),
          ACP_ERR_PROTOCOL, "malformed scope claim");
  acp__jwks_free(k);
}

static void test_malformed(void **state) {
  acp__jwks *k = keys();
  char big[ACP__JWT_MAX_TOKEN + 2];
  char t[16384];
  (void)state;
  refused(k, "", ACP_ERR_PROTOCOL, "empty token");
  refused(k, "abc", ACP_ERR_PROTOCOL, "not a compact JWS");
  refused(k, "a.b", ACP_ERR_PROTOCOL, "not a compact JWS");
  refused(k, "a.b.c.d", ACP_ERR_PROTOCOL, "not a compact JWS");
  refused(k, "a.b.c.d.e", ACP_ERR_PROTOCOL, "not a compact JWS");
  refused(k, "@@@.e30.AA", ACP_ERR_PROTOCOL, "malformed base64url");
  refused(k, "e30=.e30.AA", ACP_ERR_PROTOCOL, "malformed base64url");
  refused(k, "e30.e30.A", ACP_ERR_PROTOCOL, "malformed base64url");
  /* Header "{" and header "[]" and a string. */
  refused(k, "ew.e30.AA", ACP_ERR_PROTOCOL, "malformed JOSE header");
  refused(k, "W10.e30.AA", ACP_ERR_PROTOCOL, "malformed JOSE header");
  refused(k, "ImEi.e30.AA", ACP_ERR_PROTOCOL, "malformed JOSE header");
  /* Oversize: refused before decoding. */
  strcpy(t, token("{\"alg\":\"RS256\",\"kid\":\"r1\"}", claims(""), rsa_k));
  memset(big, 'A', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  memcpy(big, t, strlen(t));
  refused(k, big, ACP_ERR_PROTOCOL, "token too large");
  /* No key set at all (NULL): no key fits. */
  refused(NULL, t, ACP_ERR_NOT_FOUND, "no key for the token's kid and alg");
  acp__jwks_free(k);
}

static void test_jwks_malformed(void **state) {
  acp__jwks *k = NULL;
  char bad[4096], pt_x[64];
  char *big;
  size_t i;
  (void)state;
  assert_int_equal(acp__jwks_parse(NULL, "not json", 8, &k), ACP_ERR_PARSE);
  assert_null(k);
  assert_int_equal(acp__jwks_parse(NULL, "[]", 2, &k), ACP_ERR_PARSE);
  assert_int_equal(acp__jwks_parse(NULL, "{}", 2, &k), ACP_ERR_PARSE);
  assert_int_equal(acp__jwks_parse(NULL, "{\"keys\":{}}", 11, &k),
                   ACP_ERR_PARSE);
  /* Entries that are not usable keys are skipped. */
  {
    const char *s =
        "{\"keys\":[1,\"x\",{},{\"kty\":\"RSA\"},{\"kty\":\"RSA\",\"n\":\"@\","
        "\"e\":\"AQAB\"},{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"AA\","
        "\"y\":\"AA\"},{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AA\","
        "\"y\":\"AA\"}]}";
    assert_int_equal(acp__jwks_parse(NULL, s, strlen(s), &k), 0);
    assert_int_equal(acp__jwks_count(k), 0);
    acp__jwks_free(k);
  }
  /* A P-256 point off the curve (y of another point), an RSA key whose
   * JWK says ES256, a key for encryption. */
  ec_jwk(bad, sizeof(bad), ec_k, "e1", "");
  bn_b64u(pt_x, ec_other, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
  {
    char *y = strstr(bad, "\"y\":\"") + 5;
    memcpy(y, pt_x, strlen(pt_x));
    char s[12288];
    char r[2048], e[2048];
    rsa_jwk(r, sizeof(r), rsa_k, "r1", ",\"alg\":\"ES256\"");
    ec_jwk(e, sizeof(e), ec_k, "e1", ",\"use\":\"enc\"");
    snprintf(s, sizeof(s), "{\"keys\":[%s,%s,%s]}", bad, r, e);
    assert_int_equal(acp__jwks_parse(NULL, s, strlen(s), &k), 0);
    assert_int_equal(acp__jwks_count(k), 0);
    acp__jwks_free(k);
  }
  /* Over the cap. */
  big = malloc(ACP__JWKS_MAX_BYTES + 2);
  assert_non_null(big);
  for (i = 0; i < ACP__JWKS_MAX_BYTES + 1; i++)
    big[i] = ' ';
  memcpy(big, "{\"keys\":[]}", 11);
  assert_int_equal(acp__jwks_parse(NULL, big, ACP__JWKS_MAX_BYTES + 1, &k),
                   ACP_ERR_LIMIT);
  free(big);
  /* At most ACP__JWKS_MAX_KEYS keys are kept. */
  {
    char one[1024];
    size_t cap = 64 * 1024, len;
    char *s = malloc(cap);
    ec_jwk(one, sizeof(one), ec_k, "e", "");
    strcpy(s, "{\"keys\":[");
    for (i = 0; i < ACP__JWKS_MAX_KEYS + 5; i++) {
      strcat(s, one);
      strcat(s, ",");
    }
    len = strlen(s);
    s[len - 1] = ']';
    strcat(s, "}");
    assert_int_equal(acp__jwks_parse(NULL, s, strlen(s), &k), 0);
    assert_int_equal(acp__jwks_count(k), ACP__JWKS_MAX_KEYS);
    acp__jwks_free(k);
    free(s);
  }
}

static void test_introspection(void **state) {
  acp__jwt_expect x = {ISS, AUD, 1000, 60};
  acp__jwt_claims c;
  const char *why;
  const char *ok = "{\"active\":true,\"sub\":\"bob\",\"scope\":\"r w\","
                   "\"iss\":\"" ISS "\",\"aud\":[\"" AUD "\"],\"exp\":2000}";
  (void)state;
  assert_int_equal(acp__introspection_check(NULL, ok, strlen(ok), &x, &c, &why),
                   0);
  assert_string_equal(c.sub, "bob");
  assert_string_equal(c.scope, "r w");
  acp__jwt_claims_free(NULL, &c);
  /* Minimal answer: only active. */
  assert_int_equal(
      acp__introspection_check(NULL, "{\"active\":true}", 15, &x, &c, &why), 0);
  assert_string_equal(c.scope, "");
  acp__jwt_claims_free(NULL, &c);
#define BAD(json, reason)                                                      \
  do {                                                                         \
    assert_int_equal(                                                          \
        acp__introspection_check(NULL, json, strlen(json), &x, &c, &why),      \
        ACP_ERR_PROTOCOL);                                                     \
    assert_string_equal(why, reason);                                          \
  } while (0)
  BAD("{\"active\":false}", "token not active");
  BAD("{\"active\":\"true\"}", "token not active");
  BAD("{}", "token not active");
  BAD("nope", "malformed introspection answer");
  BAD("{\"active\":true,\"iss\":\"x\"}", "wrong issuer");
  BAD("{\"active\":true,\"aud\":\"x\"}", "wrong audience");
  BAD("{\"active\":true,\"exp\":900}", "token expired");
  BAD("{\"active\":true,\"exp\":null}", "no valid exp claim");
#undef BAD
}

static void test_scope_covers(void **state) {
  (void)state;
  assert_true(acp__scope_covers("a b c", "c a"));
  assert_true(acp__scope_covers("a", ""));
  assert_true(acp__scope_covers("", NULL));
  assert_false(acp__scope_covers("ab", "a"));
  assert_false(acp__scope_covers("a b", "a bc"));
  assert_false(acp__scope_covers(NULL, "a"));
  assert_true(acp__scope_covers("  a   b ", "b  a"));
}

static void test_auth_config(void **state) {
  acp_http_auth *a = NULL;
  acp__jwt_claims c;
  const char *why;
  char *prm;
  size_t n;
  (void)state;
  assert_int_equal(acp_http_auth_new(&a, "ftp://x", NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(a);
  assert_int_equal(acp_http_auth_new(&a, NULL, NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_auth_new(NULL, ISS, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_auth_new(&a, ISS, NULL), 0);
  assert_int_equal(acp_http_auth_add_scope(a, "a b"), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_auth_add_scope(a, "a\""), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_auth_add_scope(a, ""), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_auth_add_scope(a, "mcp:read"), 0);
  assert_int_equal(acp_http_auth_add_scope(a, "mcp:read"), 0); /* once */
  assert_int_equal(acp_http_auth_add_tool_scope(a, "t", "mcp:admin"), 0);
  assert_int_equal(acp_http_auth_add_tool_scope(a, "t", "x"), 0);
  assert_int_equal(acp_http_auth_add_tool_scope(a, "", "x"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_auth_set_resource(a, "mailto:x"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_auth_set_introspection(a, "x", "id", "s"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_auth_set_jwks(a, "{", 1), ACP_ERR_PARSE);
  assert_string_equal(acp__http_auth_scopes(a), "mcp:read");
  assert_string_equal(acp__http_auth_tool_scopes(a, "t", 1), "mcp:admin x");
  assert_null(acp__http_auth_tool_scopes(a, "tt", 2));
  prm = acp__http_auth_prm(a, acp_mem_default(), AUD, &n);
  assert_non_null(prm);
  assert_string_equal(prm, "{\"resource\":\"" AUD "\",\"authorization_servers\""
                           ":[\"" ISS "\"],\"scopes_supported\":[\"mcp:read\","
                           "\"mcp:admin\",\"x\"],\"bearer_methods_supported\":"
                           "[\"header\"]}");
  assert_int_equal(n, strlen(prm));
  acp__free(acp_mem_default(), prm);
  /* A fixed key set: tokens checked without any fetch; the audience is
   * the resource unless set. */
  assert_int_equal(acp_http_auth_set_jwks(a, jwks, strlen(jwks)), 0);
  assert_int_equal(
      acp__http_auth_check(
          a, NULL, AUD,
          token("{\"alg\":\"RS256\",\"kid\":\"r1\"}", claims(""), rsa_k),
          strlen(
              token("{\"alg\":\"RS256\",\"kid\":\"r1\"}", claims(""), rsa_k)),
          &c, &why),
      0);
  acp__jwt_claims_free(NULL, &c);
  assert_int_equal(acp_http_auth_set_audience(a, "api://other"), 0);
  {
    char *t = token("{\"alg\":\"RS256\",\"kid\":\"r1\"}", claims(""), rsa_k);
    assert_int_equal(acp__http_auth_check(a, NULL, AUD, t, strlen(t), &c, &why),
                     ACP_ERR_PROTOCOL);
    assert_string_equal(why, "wrong audience");
    /* Unknown kid with a fixed set: refused, nothing fetched. */
    t = token("{\"alg\":\"RS256\",\"kid\":\"zz\"}", claims(""), rsa_k);
    assert_int_equal(acp__http_auth_check(a, NULL, AUD, t, strlen(t), &c, &why),
                     ACP_ERR_PROTOCOL);
  }
  acp_http_auth_free(a);
  acp_http_auth_free(NULL);
}

/* MARK: - The server with authorization (in process) */

typedef struct auth_thread {
  ht_server s; /* first: ht_setup()/ht_teardown() */
  acp_http_auth *auth;
  int runs;     /* times "t" ran */
  int auth_rv;  /* what acp_http_call_auth() said in "t" */
  char sub[64]; /* ... and the subject and scopes */
  char scopes[128];
} auth_thread;

static int tool_t(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  auth_thread *t = ud;
  const char *sub = NULL, *sc = NULL;
  (void)args;
  t->runs++;
  t->auth_rv = acp_http_call_auth(call, &sub, &sc);
  snprintf(t->sub, sizeof(t->sub), "%s", sub ? sub : "(null)");
  snprintf(t->scopes, sizeof(t->scopes), "%s", sc ? sc : "(null)");
  return acp_mcp_call_respond_text(call, "ran", 3, false);
}

static int auth_start(ht_server *s) {
  auth_thread *t = s->user_data;
  acp_http_server_options *o = NULL;
  assert_int_equal(acp_mcp_server_new(&s->reg, "t", "1", NULL, NULL), 0);
  assert_int_equal(ht_add_tool(s->reg, "t", NULL, tool_t, t), 0);
  assert_int_equal(ht_add_tool(s->reg, "echo", NULL, ht_tool_echo, NULL), 0);
  assert_int_equal(acp_http_auth_new(&t->auth, ISS, NULL), 0);
  assert_int_equal(acp_http_auth_set_jwks(t->auth, jwks, strlen(jwks)), 0);
  assert_int_equal(acp_http_auth_set_audience(t->auth, AUD), 0);
  assert_int_equal(acp_http_auth_add_scope(t->auth, "base"), 0);
  assert_int_equal(acp_http_auth_add_tool_scope(t->auth, "t", "tool"), 0);
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  acp_http_server_options_set_auth(o, t->auth);
  assert_int_equal(acp_http_server_new(&s->srv, &s->loop, s->reg, o, NULL), 0);
  acp_http_server_options_free(o);
  return 0;
}

static int auth_setup(void **state) {
  return ht_setup(state, sizeof(auth_thread), auth_start);
}

static int auth_teardown(void **state) {
  auth_thread *t = *state;
  acp_http_auth *a = t->auth;
  int rv = ht_teardown(state);
  acp_http_auth_free(a); /* after the server is gone */
  return rv;
}

static char *bearer(const char *scope, const char *sub) {
  static char h[16384];
  char p[512];
  snprintf(p, sizeof(p),
           "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"sub\":\"%s\","
           "\"exp\":%lld,\"scope\":\"%s\"}",
           sub, (long long)(now_s + 600), scope);
  snprintf(h, sizeof(h), "Authorization: Bearer %s\r\n",
           token("{\"alg\":\"ES256\",\"kid\":\"e1\"}", p, ec_k));
  return h;
}

#define CALL_T                                                                 \
  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":"        \
  "{\"name\":\"t\",\"arguments\":{}}}"

static void test_server_auth(void **state) {
  auth_thread *t = *state;
  uint16_t port = t->s.port;
  char *r, req[4096];
  const char *sid;
  char h[16384];

  /* The metadata, at both paths; GET only. */
  snprintf(req, sizeof(req),
           "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\n"
           "Host: 127.0.0.1\r\nConnection: close\r\n\r\n");
  r = ht_raw(port, req, NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "\"authorization_servers\":[\"" ISS "\"]"));
  assert_non_null(strstr(r, "\"scopes_supported\":[\"base\",\"tool\"]"));
  free(r);
  snprintf(req, sizeof(req),
           "POST /.well-known/oauth-protected-resource HTTP/1.1\r\n"
           "Host: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  r = ht_raw(port, req, NULL);
  assert_int_equal(ht_status(r), 405);
  free(r);
  /* The legacy endpoints are off. */
  snprintf(req, sizeof(req),
           "GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  r = ht_raw(port, req, NULL);
  assert_int_equal(ht_status(r), 404);
  free(r);

  /* No token: 401 and the challenge. */
  r = ht_post(port, "", ht_init_body, NULL);
  assert_int_equal(ht_status(r), 401);
  assert_non_null(strstr(r, "WWW-Authenticate: Bearer resource_metadata=\"http"
                            "://127.0.0.1:"));
  assert_non_null(strstr(r, "/.well-known/oauth-protected-resource/mcp\", "
                            "scope=\"base\""));
  free(r);
  /* A bad token: invalid_token. */
  r = ht_post(port, "Authorization: Bearer x.y.z\r\n", ht_init_body, NULL);
  assert_int_equal(ht_status(r), 401);
  assert_non_null(strstr(r, "error=\"invalid_token\""));
  free(r);

  /* A session with a token holding only the base scope. */
  r = ht_post(port, bearer("base", "alice"), ht_init_body, NULL);
  assert_int_equal(ht_status(r), 200);
  sid = ht_session_id(r);
  free(r);
  strcpy(h, bearer("base", "alice"));
  r = ht_post_s(port, sid, h, CALL_T, NULL);
  assert_int_equal(ht_status(r), 403);
  assert_non_null(strstr(r, "error=\"insufficient_scope\""));
  assert_non_null(strstr(r, "scope=\"base tool\""));
  free(r);
  assert_int_equal(t->runs, 0);
  /* The same in a batch (2025-11-25 has none: 403 before the conn
   * refuses it) and with the name escaped. */
  r = ht_post_s(port, sid, h,
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"\\u0074\",\"arguments\":{}}}",
                NULL);
  assert_int_equal(ht_status(r), 403);
  free(r);
  assert_int_equal(t->runs, 0);
  /* Another tool needs only the base scope. */
  r = ht_post_s(port, sid, h,
                "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":"
                "\"hi\"}}}",
                NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  /* With the tool's scope: it runs and sees the token. */
  strcpy(h, bearer("base tool", "alice"));
  r = ht_post_s(port, sid, h, CALL_T, NULL);
  assert_int_equal(ht_status(r), 200);
  assert_non_null(strstr(r, "ran"));
  free(r);
  assert_int_equal(t->runs, 1);
  assert_int_equal(t->auth_rv, 0);
  assert_string_equal(t->sub, "alice");
  assert_string_equal(t->scopes, "base tool");
  /* Bob's token on Alice's session: 403. */
  strcpy(h, bearer("base tool", "bob"));
  r = ht_post_s(port, sid, h, CALL_T, NULL);
  assert_int_equal(ht_status(r), 403);
  assert_non_null(strstr(r, "another subject"));
  free(r);
  assert_int_equal(t->runs, 1);
}

static int tool_probe(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  int *rv = ud;
  (void)args;
  *rv = acp_http_call_auth(call, NULL, NULL);
  return acp_mcp_call_respond_text(call, "ok", 2, false);
}

static int plain_start(ht_server *s) {
  assert_int_equal(acp_mcp_server_new(&s->reg, "t", "1", NULL, NULL), 0);
  assert_int_equal(ht_add_tool(s->reg, "probe", NULL, tool_probe,
                               (char *)s->user_data + sizeof(ht_server)),
                   0);
  return acp_http_server_new(&s->srv, &s->loop, s->reg, NULL, NULL);
}

static void test_call_auth_without_auth(void **state) {
  struct {
    ht_server s;
    int rv;
  } * t;
  char *r;
  const char *sid;
  (void)state;
  assert_int_equal(ht_setup((void **)&t, sizeof(*t), plain_start), 0);
  t->rv = 1;
  r = ht_post(t->s.port, "", ht_init_body, NULL);
  sid = ht_session_id(r);
  free(r);
  r = ht_post_s(t->s.port, sid, "",
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"probe\",\"arguments\":{}}}",
                NULL);
  assert_int_equal(ht_status(r), 200);
  free(r);
  assert_int_equal(t->rv, ACP_ERR_UNSUPPORTED);
  assert_int_equal(acp_http_call_auth(NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(ht_teardown((void **)&t), 0);
}

static void on_relay_msg(acp_http_relay_session *s, const char *m, size_t n,
                         void *ud) {
  (void)s;
  (void)m;
  (void)n;
  (void)ud;
}

static void test_relay_refuses_auth(void **state) {
  uv_loop_t loop;
  acp_http_server *srv = (acp_http_server *)1;
  acp_http_server_options *o = NULL;
  acp_http_auth *a = NULL;
  acp_http_relay_callbacks cbs;
  (void)state;
  memset(&cbs, 0, sizeof(cbs));
  cbs.message = on_relay_msg;
  uv_loop_init(&loop);
  assert_int_equal(acp_http_auth_new(&a, ISS, NULL), 0);
  assert_int_equal(acp_http_server_options_new(&o, NULL), 0);
  acp_http_server_options_set_auth(o, a);
  assert_int_equal(acp_http_server_new_relay(&srv, &loop, &cbs, NULL, o, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(srv);
  acp_http_server_options_free(o);
  acp_http_auth_free(a);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* Every allocation failing in turn: parse the set, check a valid token
 * and an introspection answer. */
static int alloc_scenario(failmem *f) {
  acp_mem m = failmem_start(f, f->fail_at);
  acp__jwks *k = NULL;
  acp__jwt_claims c;
  acp__jwt_expect x = {ISS, AUD, now_s, 60};
  const char *why;
  const char *in = "{\"active\":true,\"sub\":\"s\",\"scp\":[\"a\",\"b\"]}";
  char *t;
  int rv = acp__jwks_parse(&m, jwks, strlen(jwks), &k);
  if (rv != 0) {
    assert_int_equal(rv, ACP_ERR_NOMEM);
    return 0;
  }
  t = token("{\"alg\":\"ES256\",\"kid\":\"e1\"}",
            claims(",\"scp\":[\"x\",\"y\"],\"client_id\":\"c\""), ec_k);
  rv = acp__jwt_verify(&m, t, strlen(t), k, &x, &c, &why);
  acp__jwks_free(k);
  if (rv != 0) {
    assert_int_equal(rv, ACP_ERR_NOMEM);
    return 0;
  }
  assert_string_equal(c.scope, "x y");
  acp__jwt_claims_free(&m, &c);
  rv = acp__introspection_check(&m, in, strlen(in), &x, &c, &why);
  if (rv != 0) {
    assert_int_equal(rv, ACP_ERR_NOMEM);
    return 0;
  }
  acp__jwt_claims_free(&m, &c);
  return 1;
}

static void test_allocation_failures(void **state) {
  (void)state;
  failmem_sweep(alloc_scenario, 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_rs256_and_es256),
      cmocka_unit_test(test_tampered),
      cmocka_unit_test(test_algorithms),
      cmocka_unit_test(test_claims),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_jwks_malformed),
      cmocka_unit_test(test_introspection),
      cmocka_unit_test(test_scope_covers),
      cmocka_unit_test(test_auth_config),
      cmocka_unit_test(test_allocation_failures),
      cmocka_unit_test_setup_teardown(test_server_auth, auth_setup,
                                      auth_teardown),
      cmocka_unit_test(test_call_auth_without_auth),
      cmocka_unit_test(test_relay_refuses_auth),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
