/*
 * acp_http_oauth_export() / _import() / _issuer() (src/http/oauth_flow.c):
 * the state `acp mcp login` stores, restored in another process; bad and
 * foreign states are refused without changing anything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "acp/http.h"

#define URL "http://127.0.0.1:9/mcp"
#define STATE                                                                  \
  "{\"mcp_url\":\"" URL "\",\"issuer\":\"http://as\",\"resource\":\"" URL      \
  "\",\"token_endpoint\":\"http://as/token\",\"client_id\":\"c1\","            \
  "\"token_endpoint_auth\":0,\"access_token\":\"AT\",\"refresh_token\":"       \
  "\"RT\",\"scope\":\"a b\",\"expires_at\":0}"

static void test_round_trip(void **state) {
  acp_http_oauth *o = NULL, *p = NULL;
  char *a = NULL, *b = NULL;
  (void)state;
  assert_int_equal(acp_http_oauth_new(&o, URL), 0);
  /* Nothing to export before a token. */
  assert_int_equal(acp_http_oauth_export(o, &a), ACP_ERR_INVALID_STATE);
  assert_null(a);
  assert_null(acp_http_oauth_issuer(o));
  assert_int_equal(acp_http_oauth_import(o, STATE, strlen(STATE)), 0);
  assert_string_equal(acp_http_oauth_issuer(o), "http://as");
  /* expires_at 0: unknown, so no refresh is attempted. */
  assert_string_equal(acp_http_oauth_token(o), "AT");
  assert_int_equal(acp_http_oauth_export(o, &a), 0);
  assert_int_equal(acp_http_oauth_new(&p, URL), 0);
  assert_int_equal(acp_http_oauth_import(p, a, strlen(a)), 0);
  assert_int_equal(acp_http_oauth_export(p, &b), 0);
  assert_string_equal(a, b);
  assert_non_null(strstr(a, "\"refresh_token\":\"RT\""));
  free(a);
  free(b);
  acp_http_oauth_free(o);
  acp_http_oauth_free(p);
}

static void test_bad_states(void **state) {
  acp_http_oauth *o = NULL;
  static const char *const bad[] = {
      "",
      "nope",
      "[]",
      "{}",
      /* another server's */
      "{\"mcp_url\":\"http://other/mcp\",\"issuer\":\"i\",\"token_endpoint\":"
      "\"t\",\"access_token\":\"x\",\"token_endpoint_auth\":0,\"expires_at\":"
      "0}",
      /* no token, no issuer, no endpoint */
      "{\"mcp_url\":\"" URL "\",\"issuer\":\"i\",\"token_endpoint\":\"t\","
      "\"token_endpoint_auth\":0,\"expires_at\":0}",
      "{\"mcp_url\":\"" URL "\",\"token_endpoint\":\"t\",\"access_token\":"
      "\"x\",\"token_endpoint_auth\":0,\"expires_at\":0}",
      "{\"mcp_url\":\"" URL "\",\"issuer\":\"i\",\"access_token\":\"x\","
      "\"token_endpoint_auth\":0,\"expires_at\":0}",
      /* wrong types and ranges */
      "{\"mcp_url\":\"" URL "\",\"issuer\":1,\"token_endpoint\":\"t\","
      "\"access_token\":\"x\",\"token_endpoint_auth\":0,\"expires_at\":0}",
      "{\"mcp_url\":\"" URL "\",\"issuer\":\"i\",\"token_endpoint\":\"t\","
      "\"access_token\":\"x\",\"token_endpoint_auth\":7,\"expires_at\":0}",
      "{\"mcp_url\":\"" URL "\",\"issuer\":\"i\",\"token_endpoint\":\"t\","
      "\"access_token\":\"x\",\"token_endpoint_auth\":0}",
      "{\"mcp_url\":\"" URL "\",\"issuer\":\"i\",\"token_endpoint\":\"t\","
      "\"access_token\":\"a\\u0000b\",\"token_endpoint_auth\":0,"
      "\"expires_at\":0}",
  };
  size_t i;
  char *a = NULL;
  (void)state;
  assert_int_equal(acp_http_oauth_new(&o, URL), 0);
  assert_int_equal(acp_http_oauth_import(o, STATE, strlen(STATE)), 0);
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(acp_http_oauth_import(o, bad[i], strlen(bad[i])),
                     ACP_ERR_PARSE);
  /* The good state is untouched. */
  assert_string_equal(acp_http_oauth_token(o), "AT");
  assert_int_equal(acp_http_oauth_import(NULL, STATE, 1),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_oauth_import(o, NULL, 0), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_oauth_export(NULL, &a), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_oauth_export(o, NULL), ACP_ERR_INVALID_ARGUMENT);
  acp_http_oauth_free(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_bad_states),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
