/*
 * The sans-I/O OAuth core (src/http/oauth.c, in libacp-http): challenges,
 * discovery URLs, metadata, PKCE, requests, redirects, token responses,
 * with bad input for each; and allocation failure: the test is linked
 * with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc so each allocation
 * the core (and the JSON parser and buffers under it) makes can be refused
 * in turn: every function must fail cleanly (an error or NULL, nothing
 * leaked under valgrind and ASan) and succeed once nothing is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "wrapmem.h"

#include "acp/common.h"
#include "http/oauth.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void test_challenge(void **state) {
  acp__oauth_challenge c;
  (void)state;
  assert_int_equal(acp__oauth_parse_challenge(
                       "Bearer error=\"insufficient_scope\", scope=\"a b\", "
                       "resource_metadata=\"https://x/.well-known/"
                       "oauth-protected-resource\"",
                       &c),
                   0);
  assert_true(c.bearer);
  assert_string_equal(c.error, "insufficient_scope");
  assert_string_equal(c.scope, "a b");
  assert_string_equal(c.resource_metadata,
                      "https://x/.well-known/oauth-protected-resource");
  acp__oauth_challenge_free(&c);

  /* Another scheme first; token68-less Basic; unquoted values. */
  assert_int_equal(acp__oauth_parse_challenge(
                       "Basic realm=\"r\", bearer scope=read error=x", &c),
                   0);
  assert_true(c.bearer);
  assert_string_equal(c.scope, "read");
  assert_string_equal(c.error, "x");
  assert_null(c.resource_metadata);
  acp__oauth_challenge_free(&c);

  /* Parameters of another scheme are not Bearer's. */
  assert_int_equal(acp__oauth_parse_challenge("Basic scope=\"s\"", &c), 0);
  assert_false(c.bearer);
  assert_null(c.scope);
  acp__oauth_challenge_free(&c);

  /* Bad input. */
  assert_int_equal(acp__oauth_parse_challenge("Bearer scope=\"open", &c),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__oauth_parse_challenge("Bearer \"x\"", &c),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__oauth_parse_challenge(NULL, &c),
                   ACP_ERR_INVALID_ARGUMENT);
}

static void free_urls(char **u, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(u[i]);
}

static void test_discovery_urls(void **state) {
  char *u[ACP__OAUTH_MAX_URLS];
  size_t n;
  (void)state;
  assert_int_equal(acp__oauth_prm_urls("http://h:1/a/mcp/?q=1",
                                       "http://h:1/custom.json", u, &n),
                   0);
  assert_int_equal(n, 3);
  assert_string_equal(u[0], "http://h:1/custom.json");
  assert_string_equal(u[1],
                      "http://h:1/.well-known/oauth-protected-resource/a/mcp");
  assert_string_equal(u[2], "http://h:1/.well-known/oauth-protected-resource");
  free_urls(u, n);
  /* No path; a non-http resource_metadata is not followed. */
  assert_int_equal(acp__oauth_prm_urls("https://h", "file:///etc/x", u, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(u[0], "https://h/.well-known/oauth-protected-resource");
  free_urls(u, n);
  assert_int_equal(acp__oauth_prm_urls("ftp://h/x", NULL, u, &n),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__oauth_prm_urls("http:///x", NULL, u, &n),
                   ACP_ERR_INVALID_ARGUMENT);

  assert_int_equal(acp__oauth_as_urls("https://as/tenant1", u, &n), 0);
  assert_int_equal(n, 3);
  assert_string_equal(
      u[0], "https://as/.well-known/oauth-authorization-server/tenant1");
  assert_string_equal(u[1],
                      "https://as/.well-known/openid-configuration/tenant1");
  assert_string_equal(u[2],
                      "https://as/tenant1/.well-known/openid-configuration");
  free_urls(u, n);
  assert_int_equal(acp__oauth_as_urls("https://as/", u, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(u[0],
                      "https://as/.well-known/oauth-authorization-server");
  assert_string_equal(u[1], "https://as/.well-known/openid-configuration");
  free_urls(u, n);
  assert_int_equal(acp__oauth_as_urls("as", u, &n), ACP_ERR_INVALID_ARGUMENT);
}

static void test_resource_match(void **state) {
  (void)state;
  assert_true(acp__oauth_resource_matches("http://h:1/mcp", "http://h:1/mcp"));
  assert_true(acp__oauth_resource_matches("http://h:1", "http://h:1/mcp"));
  assert_true(acp__oauth_resource_matches("http://h:1/a", "http://h:1/a/mcp"));
  assert_false(acp__oauth_resource_matches("http://h:1/m", "http://h:1/mcp"));
  assert_false(acp__oauth_resource_matches("http://h:2/mcp", "http://h:1/mcp"));
  assert_false(
      acp__oauth_resource_matches("https://evil/mcp", "http://h:1/mcp"));
  assert_false(acp__oauth_resource_matches(NULL, "http://h:1/mcp"));
}

static void test_prm(void **state) {
  acp__oauth_prm p;
  const char *ok = "{\"resource\":\"http://h/mcp\",\"authorization_servers\":"
                   "[\"http://as\"],\"scopes_supported\":[\"a\",\"b\"]}";
  (void)state;
  assert_int_equal(acp__oauth_parse_prm(ok, strlen(ok), &p), 0);
  assert_string_equal(p.resource, "http://h/mcp");
  assert_string_equal(p.authorization_server, "http://as");
  assert_string_equal(p.scopes_supported, "a b");
  acp__oauth_prm_free(&p);
  /* Bad input: not JSON, not an object, no servers, a non-http server. */
  assert_int_equal(acp__oauth_parse_prm("{", 1, &p), ACP_ERR_PROTOCOL);
  assert_int_equal(acp__oauth_parse_prm("[]", 2, &p), ACP_ERR_PROTOCOL);
  assert_int_equal(acp__oauth_parse_prm("{\"resource\":\"http://h\"}", 23, &p),
                   ACP_ERR_PROTOCOL);
  {
    const char *bad = "{\"resource\":\"http://h\",\"authorization_servers\":"
                      "[\"javascript:x\"]}";
    assert_int_equal(acp__oauth_parse_prm(bad, strlen(bad), &p),
                     ACP_ERR_PROTOCOL);
  }
}

static void test_as(void **state) {
  acp__oauth_as a;
  const char *ok =
      "{\"issuer\":\"http://as\",\"authorization_endpoint\":\"http://as/a\","
      "\"token_endpoint\":\"http://as/t\",\"registration_endpoint\":"
      "\"http://as/r\",\"code_challenge_methods_supported\":[\"plain\","
      "\"S256\"],\"token_endpoint_auth_methods_supported\":[\"client_secret_"
      "post\"],\"scopes_supported\":[\"x\",\"offline_access\"],"
      "\"client_id_metadata_document_supported\":true,"
      "\"authorization_response_iss_parameter_supported\":true}";
  const char *no_s256 =
      "{\"issuer\":\"http://as\",\"authorization_endpoint\":\"http://as/a\","
      "\"token_endpoint\":\"http://as/t\"}";
  const char *no_token =
      "{\"issuer\":\"http://as\",\"authorization_endpoint\":\"http://as/a\"}";
  (void)state;
  assert_int_equal(acp__oauth_parse_as(ok, strlen(ok), &a), 0);
  assert_true(a.s256);
  assert_true(a.auth_post);
  assert_false(a.auth_basic);
  assert_true(a.cimd);
  assert_true(a.iss_param);
  assert_string_equal(a.registration_endpoint, "http://as/r");
  assert_string_equal(a.scopes_supported, "x offline_access");
  acp__oauth_as_free(&a);
  assert_int_equal(acp__oauth_parse_as(no_s256, strlen(no_s256), &a), 0);
  assert_false(a.s256); /* the flow refuses it */
  acp__oauth_as_free(&a);
  assert_int_equal(acp__oauth_parse_as(no_token, strlen(no_token), &a),
                   ACP_ERR_PROTOCOL);
  assert_int_equal(acp__oauth_parse_as("nope", 4, &a), ACP_ERR_PROTOCOL);
}

static void test_pkce(void **state) {
  /* RFC 7636 appendix B. */
  static const uint8_t rnd[32] = {116, 24,  223, 180, 151, 153, 224, 37,
                                  79,  250, 96,  125, 216, 173, 187, 186,
                                  22,  212, 37,  77,  105, 214, 191, 240,
                                  91,  88,  5,   88,  83,  132, 141, 121};
  char v[44], c[44];
  (void)state;
  acp__oauth_pkce(rnd, v, c);
  assert_string_equal(v, "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
  assert_string_equal(c, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
}

static void test_scope(void **state) {
  char *s;
  (void)state;
  s = acp__oauth_select_scope("a", "b c", NULL);
  assert_string_equal(s, "a");
  free(s);
  s = acp__oauth_select_scope(NULL, "b c", NULL);
  assert_string_equal(s, "b c");
  free(s);
  assert_null(acp__oauth_select_scope(NULL, NULL, "x"));
  s = acp__oauth_select_scope(NULL, "b", "b offline_access");
  assert_string_equal(s, "b offline_access");
  free(s);
  s = acp__oauth_select_scope("offline_access b", NULL, "offline_access");
  assert_string_equal(s, "offline_access b");
  free(s);
  /* Step-up: the union, in order, without repeats. */
  s = acp__oauth_scope_union("a  b", "b c a d");
  assert_string_equal(s, "a b c d");
  free(s);
  s = acp__oauth_scope_union(NULL, "x");
  assert_string_equal(s, "x");
  free(s);
  assert_null(acp__oauth_scope_union(NULL, "  "));
}

static void test_authorize_url(void **state) {
  char *u;
  (void)state;
  u = acp__oauth_authorize_url("http://as/authorize", "id 1",
                               "http://localhost/cb", "CH", "ST",
                               "http://h/mcp", "a b");
  assert_string_equal(u, "http://as/authorize?response_type=code&client_id=id%"
                         "201&redirect_uri=http%3A%2F%2Flocalhost%2Fcb&code_"
                         "challenge=CH&code_challenge_method=S256&state=ST&"
                         "resource=http%3A%2F%2Fh%2Fmcp&scope=a%20b");
  free(u);
  u = acp__oauth_authorize_url("http://as/a?x=1", "i", "http://l/", "C", "S",
                               NULL, NULL);
  assert_string_equal(u, "http://as/a?x=1&response_type=code&client_id=i&"
                         "redirect_uri=http%3A%2F%2Fl%2F&code_challenge=C&code_"
                         "challenge_method=S256&state=S");
  free(u);
  assert_null(
      acp__oauth_authorize_url("data:x", "i", "r", "c", "s", NULL, NULL));
}

static void test_redirect(void **state) {
  char *code;
  const char *why;
  (void)state;
  assert_int_equal(acp__oauth_parse_redirect(
                       "http://l/cb?code=a%2Bb&state=S&iss=http%3A%2F%2Fas",
                       "S", "http://as", true, &code, &why),
                   0);
  assert_string_equal(code, "a+b");
  free(code);
  /* iss absent and not promised: fine. */
  assert_int_equal(acp__oauth_parse_redirect("http://l/cb?code=c&state=S", "S",
                                             "http://as", false, &code, &why),
                   0);
  free(code);
  /* Bad: state mismatch, missing state, wrong iss, iss missing though
   * promised, iss where no issuer was recorded, error, no code,
   * repeated parameter, bad escape, no query. */
  assert_int_equal(acp__oauth_parse_redirect("http://l/cb?code=c&state=T", "S",
                                             NULL, false, &code, &why),
                   ACP_ERR_PROTOCOL);
  assert_null(code);
  assert_non_null(strstr(why, "state"));
  assert_int_equal(acp__oauth_parse_redirect("http://l/cb?code=c", "S", NULL,
                                             false, &code, &why),
                   ACP_ERR_PROTOCOL);
  assert_int_equal(
      acp__oauth_parse_redirect("http://l/cb?code=c&state=S&iss=http://evil",
                                "S", "http://as", false, &code, &why),
      ACP_ERR_PROTOCOL);
  assert_non_null(strstr(why, "iss"));
  assert_int_equal(acp__oauth_parse_redirect("http://l/cb?code=c&state=S", "S",
                                             "http://as", true, &code, &why),
                   ACP_ERR_PROTOCOL);
  assert_int_equal(
      acp__oauth_parse_redirect("http://l/cb?code=c&state=S&iss=http://as", "S",
                                NULL, false, &code, &why),
      ACP_ERR_PROTOCOL);
  assert_int_equal(
      acp__oauth_parse_redirect("http://l/cb?error=access_denied&state=S", "S",
                                NULL, false, &code, &why),
      ACP_ERR_PROTOCOL);
  assert_int_equal(acp__oauth_parse_redirect("http://l/cb?state=S", "S", NULL,
                                             false, &code, &why),
                   ACP_ERR_PROTOCOL);
  assert_int_equal(
      acp__oauth_parse_redirect("http://l/cb?code=a&code=b&state=S", "S", NULL,
                                false, &code, &why),
      ACP_ERR_PROTOCOL);
  assert_int_equal(acp__oauth_parse_redirect("http://l/cb?code=%4&state=S", "S",
                                             NULL, false, &code, &why),
                   ACP_ERR_PROTOCOL);
  assert_int_equal(acp__oauth_parse_redirect("http://l/cb?code=%00&state=S",
                                             "S", NULL, false, &code, &why),
                   ACP_ERR_PROTOCOL);
  assert_int_equal(
      acp__oauth_parse_redirect("http://l/cb", "S", NULL, false, &code, &why),
      ACP_ERR_PROTOCOL);
  assert_null(code);
}

static void test_token_request(void **state) {
  char *body, *authz;
  (void)state;
  assert_int_equal(
      acp__oauth_token_request("authorization_code", "C", "V", "http://l/cb",
                               NULL, "http://h/mcp", NULL, "id", NULL,
                               ACP__OAUTH_AUTH_NONE, &body, &authz),
      0);
  assert_string_equal(body, "grant_type=authorization_code&code=C&code_"
                            "verifier=V&redirect_uri=http%3A%2F%2Fl%2Fcb&"
                            "resource=http%3A%2F%2Fh%2Fmcp&client_id=id");
  assert_null(authz);
  free(body);
  /* client_secret_basic: RFC 6749 form-encoding, then base64. */
  assert_int_equal(acp__oauth_token_request(
                       "refresh_token", NULL, NULL, NULL, "R", NULL, NULL,
                       "a b", "s:", ACP__OAUTH_AUTH_BASIC, &body, &authz),
                   0);
  assert_string_equal(body, "grant_type=refresh_token&refresh_token=R");
  assert_string_equal(authz, "Basic YSUyMGI6cyUzQQ==");
  free(body);
  free(authz);
  assert_int_equal(acp__oauth_token_request(
                       "client_credentials", NULL, NULL, NULL, NULL, NULL, "x",
                       "i", "s", ACP__OAUTH_AUTH_POST, &body, &authz),
                   0);
  assert_string_equal(
      body,
      "grant_type=client_credentials&scope=x&client_id=i&client_secret=s");
  free(body);
  /* Bad: a secret method without a secret, a code grant without a code, a
   * refresh without a token. */
  assert_int_equal(acp__oauth_token_request(
                       "client_credentials", NULL, NULL, NULL, NULL, NULL, NULL,
                       "i", NULL, ACP__OAUTH_AUTH_BASIC, &body, &authz),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__oauth_token_request(
                       "authorization_code", NULL, "V", "r", NULL, NULL, NULL,
                       "i", NULL, ACP__OAUTH_AUTH_NONE, &body, &authz),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__oauth_token_request(
                       "refresh_token", NULL, NULL, NULL, NULL, NULL, NULL, "i",
                       NULL, ACP__OAUTH_AUTH_NONE, &body, &authz),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(body);
}

static void test_token_response(void **state) {
  acp__oauth_token t;
  const char *ok =
      "{\"access_token\":\"T\",\"token_type\":\"bearer\","
      "\"expires_in\":3600,\"refresh_token\":\"R\",\"scope\":\"a\"}";
  const char *err = "{\"error\":\"invalid_grant\"}";
  const char *mac = "{\"access_token\":\"T\",\"token_type\":\"mac\"}";
  const char *crlf =
      "{\"access_token\":\"T\\r\\nX: y\",\"token_type\":\"Bearer\"}";
  (void)state;
  assert_int_equal(acp__oauth_parse_token(ok, strlen(ok), &t), 0);
  assert_string_equal(t.access_token, "T");
  assert_string_equal(t.refresh_token, "R");
  assert_int_equal(t.expires_in, 3600);
  acp__oauth_token_free(&t);
  assert_int_equal(acp__oauth_parse_token(err, strlen(err), &t),
                   ACP_ERR_PROTOCOL);
  assert_int_equal(acp__oauth_parse_token(mac, strlen(mac), &t),
                   ACP_ERR_PROTOCOL);
  /* A token that would split the Authorization header. */
  assert_int_equal(acp__oauth_parse_token(crlf, strlen(crlf), &t),
                   ACP_ERR_PROTOCOL);
  assert_int_equal(acp__oauth_parse_token("", 0, &t), ACP_ERR_PROTOCOL);
}

/* One pass over every allocating function of the core; 0 when all of
 * them succeeded. Each result is freed whatever happened. */
static int core_pass(void) {
  static const char prm[] =
      "{\"resource\":\"https://r.example/mcp\",\"authorization_servers\":"
      "[\"https://as.example/t\"],\"scopes_supported\":[\"a\",\"b\"]}";
  static const char as[] =
      "{\"issuer\":\"https://as.example/t\",\"authorization_endpoint\":"
      "\"https://as.example/a\",\"token_endpoint\":\"https://as.example/"
      "tok\",\"code_challenge_methods_supported\":[\"S256\"],"
      "\"scopes_supported\":[\"x\",\"offline_access\"]}";
  static const char tok[] = "{\"access_token\":\"T\",\"token_type\":"
                            "\"Bearer\",\"refresh_token\":\"R\","
                            "\"scope\":\"a\",\"expires_in\":5}";
  const char *params[] = {"grant_type", "client_credentials", "scope", "a b",
                          NULL};
  acp__oauth_challenge c;
  acp__oauth_prm p;
  acp__oauth_as a;
  acp__oauth_token t;
  char *urls[ACP__OAUTH_MAX_URLS];
  size_t n = 0, i;
  char *s1, *s2, *s3, *code = NULL, *body = NULL, *authz = NULL;
  const char *why;
  int fails = 0;

  if (acp__oauth_parse_challenge("Bearer scope=\"a b\", error=x, "
                                 "resource_metadata=\"https://r/m\"",
                                 &c) != 0)
    fails++;
  acp__oauth_challenge_free(&c);
  if (acp__oauth_prm_urls("https://r.example/mcp", "https://r/m", urls, &n) !=
      0)
    fails++;
  else
    for (i = 0; i < n; i++)
      free(urls[i]);
  if (acp__oauth_as_urls("https://as.example/t", urls, &n) != 0)
    fails++;
  else
    for (i = 0; i < n; i++)
      free(urls[i]);
  if (acp__oauth_parse_prm(prm, strlen(prm), &p) != 0)
    fails++;
  acp__oauth_prm_free(&p);
  if (acp__oauth_parse_as(as, strlen(as), &a) != 0)
    fails++;
  acp__oauth_as_free(&a);
  s1 = acp__oauth_select_scope(NULL, "a b", "x offline_access");
  s2 = acp__oauth_scope_union("a b", "b c");
  s3 = acp__oauth_authorize_url("https://as.example/a", "cid",
                                "http://127.0.0.1/cb", "CH", "ST",
                                "https://r.example/mcp", "a b");
  fails += !s1 + !s2 + !s3;
  free(s1);
  free(s2);
  free(s3);
  if (acp__oauth_parse_redirect("http://127.0.0.1/cb?code=c%2B1&state=ST&"
                                "iss=https%3A%2F%2Fas.example%2Ft",
                                "ST", "https://as.example/t", true, &code,
                                &why) != 0)
    fails++;
  free(code);
  if (acp__oauth_token_request("authorization_code", "c", "v", "http://l/cb",
                               NULL, "https://r.example/mcp", NULL, "cid",
                               "sec", ACP__OAUTH_AUTH_BASIC, &body,
                               &authz) != 0)
    fails++;
  free(body);
  free(authz);
  if (acp__oauth_grant_request(params, "cid", "sec", ACP__OAUTH_AUTH_POST,
                               &body, &authz) != 0)
    fails++;
  free(body);
  free(authz);
  if (acp__oauth_parse_token(tok, strlen(tok), &t) != 0)
    fails++;
  acp__oauth_token_free(&t);
  return fails;
}

static void test_alloc_failure(void **state) {
  long i;
  bool done = false;
  (void)state;
  assert_int_equal(core_pass(), 0);
  for (i = 0; !done && i < 100000; i++) {
    int fails;
    wrapmem_arm(i);
    fails = core_pass();
    wrapmem_fail_at = -1;
    /* Only a refused allocation may make a step fail. */
    if (wrapmem_count <= i)
      done = fails == 0;
    else
      assert_true(fails >= 0);
  }
  assert_true(done);
  assert_true(i > 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_challenge),
      cmocka_unit_test(test_discovery_urls),
      cmocka_unit_test(test_resource_match),
      cmocka_unit_test(test_prm),
      cmocka_unit_test(test_as),
      cmocka_unit_test(test_pkce),
      cmocka_unit_test(test_scope),
      cmocka_unit_test(test_authorize_url),
      cmocka_unit_test(test_redirect),
      cmocka_unit_test(test_token_request),
      cmocka_unit_test(test_token_response),
      cmocka_unit_test(test_alloc_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
