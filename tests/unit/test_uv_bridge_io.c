/*
 * Unit tests of the MCP bridge's handshakes (src/uv/bridge_io.c): the HTTP
 * helper's control lines and the argument checks of the shim and of the
 * helper's connection.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "acp/uv.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

static void test_uv_bridge_ctl_lines_round_trip(void **state) {
  char line[64];
  const char *tok;
  int valid = -1;
  (void)state;
  assert_int_equal(acp_uv_bridge_ctl_format(line, sizeof(line), 1, TOKEN), 34);
  assert_string_equal(line, "+" TOKEN "\n");
  assert_int_equal(acp_uv_bridge_ctl_parse(line, 33, &valid, &tok), 0);
  assert_int_equal(valid, 1);
  assert_memory_equal(tok, TOKEN, 32);
  assert_int_equal(acp_uv_bridge_ctl_format(line, sizeof(line), 0, TOKEN), 34);
  assert_string_equal(line, "-" TOKEN "\n");
  assert_int_equal(acp_uv_bridge_ctl_parse(line, 33, &valid, &tok), 0);
  assert_int_equal(valid, 0);
}

static void test_uv_bridge_ctl_rejects_other_lines(void **state) {
  char line[64];
  const char *tok;
  int valid;
  (void)state;
  assert_int_equal(acp_uv_bridge_ctl_format(line, 34, 1, TOKEN),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_uv_bridge_ctl_format(line, sizeof(line), 1, "abc"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_uv_bridge_ctl_parse("*" TOKEN, 33, &valid, &tok),
                   ACP_ERR_PARSE);
  assert_int_equal(acp_uv_bridge_ctl_parse("+" TOKEN "0", 34, &valid, &tok),
                   ACP_ERR_PARSE);
  assert_int_equal(acp_uv_bridge_ctl_parse("+", 1, &valid, &tok),
                   ACP_ERR_PARSE);
}

static void test_uv_bridge_bad_arguments(void **state) {
  char path[200];
  uv_pipe_t p;
  uv_connect_t req;
  (void)state;
  memset(path, 'x', sizeof(path) - 1);
  path[sizeof(path) - 1] = '\0';
  assert_int_equal(acp_uv_bridge_shim_run(path, TOKEN, 1),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_uv_bridge_shim_run(NULL, TOKEN, 1),
                   ACP_ERR_INVALID_ARGUMENT);
  /* Nobody listens there. */
  assert_int_equal(acp_uv_bridge_shim_run("/nonexistent/acp.sock", TOKEN, 1),
                   ACP_ERR_SYSTEM);
  assert_int_equal(acp_uv_bridge_connect(&p, &req, "/x", "short", NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_uv_bridge_connect(NULL, &req, "/x", TOKEN, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uv_bridge_ctl_lines_round_trip),
      cmocka_unit_test(test_uv_bridge_ctl_rejects_other_lines),
      cmocka_unit_test(test_uv_bridge_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
