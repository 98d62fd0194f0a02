/*
 * acp/conductor.h: options and component specs (shell-like and JSON), and
 * acp_conductor_run() argument checks and a failing spawn. The conductor
 * with real processes is tested by tests/integration/run-conductor.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acp/conductor.h"

static acp_conductor_options *opts(void) {
  acp_conductor_options *o = NULL;
  assert_int_equal(acp_conductor_options_new(&o, NULL), 0);
  assert_non_null(o);
  return o;
}

static void test_new_free(void **state) {
  (void)state;
  assert_int_equal(acp_conductor_options_new(NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_conductor_options_free(NULL);
  assert_int_equal(acp_conductor_options_component_count(NULL), 0);
  /* setters accept NULL */
  acp_conductor_options_set_mode(NULL, ACP_ROUTER_MODE_PROXY);
  acp_conductor_options_set_on_crash(NULL, ACP_CONDUCTOR_ON_CRASH_BYPASS);
  assert_int_equal(acp_conductor_options_set_trace_file(NULL, "x"), 0);
}

static void test_add_component(void **state) {
  acp_conductor_options *o = opts();
  const char *argv[] = {"acp", "agent", NULL};
  const char *env[] = {"A=1", NULL};
  const char *bad_env[] = {"NOEQUALS", NULL};
  const char *empty[] = {NULL};
  (void)state;
  assert_int_equal(acp_conductor_options_add_component(o, argv, env, NULL), 0);
  assert_int_equal(acp_conductor_options_add_component(o, argv, NULL, "x"), 0);
  assert_int_equal(acp_conductor_options_add_component(o, argv, bad_env, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_conductor_options_add_component(o, empty, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_conductor_options_add_component(NULL, argv, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_conductor_options_component_count(o), 2);
  acp_conductor_options_free(o);
}

static void test_spec_shell(void **state) {
  acp_conductor_options *o = opts();
  char err[128];
  (void)state;
  assert_int_equal(
      acp_conductor_options_add_component_spec(
          o, "A=1 B='x y' acp proxy \"arr\\\"ow\" a\\ b ''", err, sizeof(err)),
      0);
  assert_int_equal(acp_conductor_options_add_component_spec(o, "  sh -c 'a b'",
                                                            err, sizeof(err)),
                   0);
  assert_int_equal(acp_conductor_options_component_count(o), 2);
  assert_int_equal(
      acp_conductor_options_add_component_spec(o, "sh 'open", err, sizeof(err)),
      ACP_ERR_PARSE);
  assert_non_null(strstr(err, "single quote"));
  assert_int_equal(acp_conductor_options_add_component_spec(o, "sh \"open", err,
                                                            sizeof(err)),
                   ACP_ERR_PARSE);
  assert_int_equal(
      acp_conductor_options_add_component_spec(o, "sh \\", err, sizeof(err)),
      ACP_ERR_PARSE);
  assert_int_equal(
      acp_conductor_options_add_component_spec(o, "FOO=bar", err, sizeof(err)),
      ACP_ERR_PARSE);
  assert_non_null(strstr(err, "no command"));
  assert_int_equal(acp_conductor_options_add_component_spec(o, "   ", NULL, 0),
                   ACP_ERR_PARSE);
  assert_int_equal(acp_conductor_options_add_component_spec(o, NULL, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_conductor_options_component_count(o), 2);
  acp_conductor_options_free(o);
}

/* URL components: one word with a remote scheme, however it was given;
 * `acp conductor` runs the chain in acp-remote only when there is one. */
static void test_url_components(void **state) {
  acp_conductor_options *o = opts();
  const char *url_argv[] = {"wss://h:1/acp", NULL};
  const char *two_words[] = {"ws://h:1/acp", "x", NULL};
  char err[128];
  (void)state;
  assert_int_equal(acp_conductor_options_url_component_count(NULL), 0);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "acp proxy arrow", err, sizeof(err)),
                   0);
  /* A URL as an argument, or a scheme that is not a remote one, is a
   * process. */
  assert_int_equal(acp_conductor_options_add_component_spec(o, "curl http://h/",
                                                            err, sizeof(err)),
                   0);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "file:///bin/agent", err, sizeof(err)),
                   0);
  assert_int_equal(
      acp_conductor_options_add_component(o, two_words, NULL, NULL), 0);
  assert_int_equal(acp_conductor_options_url_component_count(o), 0);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "http://127.0.0.1:9/acp", err, sizeof(err)),
                   0);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "A=1 'ws://h:2/acp'", err, sizeof(err)),
                   0);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "{\"command\":\"https://h/acp\"}", err, sizeof(err)),
                   0);
  assert_int_equal(acp_conductor_options_add_component(o, url_argv, NULL, NULL),
                   0);
  assert_int_equal(acp_conductor_options_url_component_count(o), 4);
  assert_int_equal(acp_conductor_options_component_count(o), 8);
  acp_conductor_options_free(o);
}

static void test_spec_json(void **state) {
  acp_conductor_options *o = opts();
  char err[128];
  (void)state;
  assert_int_equal(
      acp_conductor_options_add_component_spec(
          o,
          "{\"command\":\"acp\",\"args\":[\"proxy\",\"a\\u0072row\"],"
          "\"env\":{\"K\":\"v\"},\"name\":\"n\"}",
          err, sizeof(err)),
      0);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o,
                       "{\"command\":\"x\",\"env\":[{\"name\":\"K\","
                       "\"value\":\"v\"}]}",
                       err, sizeof(err)),
                   0);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "{\"command\":3}", err, sizeof(err)),
                   ACP_ERR_PARSE);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "{\"command\":\"\"}", err, sizeof(err)),
                   ACP_ERR_PARSE);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "{\"command\":\"x\",\"args\":[1]}", err, sizeof(err)),
                   ACP_ERR_PARSE);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "{\"command\":\"x\",\"args\":{}}", err, sizeof(err)),
                   ACP_ERR_PARSE);
  assert_int_equal(
      acp_conductor_options_add_component_spec(
          o, "{\"command\":\"x\",\"env\":{\"K\":1}}", err, sizeof(err)),
      ACP_ERR_PARSE);
  assert_int_equal(
      acp_conductor_options_add_component_spec(
          o, "{\"command\":\"x\",\"env\":{\"\":\"v\"}}", err, sizeof(err)),
      ACP_ERR_PARSE);
  assert_int_equal(
      acp_conductor_options_add_component_spec(
          o, "{\"command\":\"x\",\"env\":\"K=v\"}", err, sizeof(err)),
      ACP_ERR_PARSE);
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "{\"command\":", err, sizeof(err)),
                   ACP_ERR_PARSE);
  assert_int_equal(acp_conductor_options_component_count(o), 2);
  acp_conductor_options_free(o);
}

static void test_run_args(void **state) {
  acp_conductor_options *o = opts();
  int st = 5;
  (void)state;
  assert_int_equal(acp_conductor_run(NULL, 0, 1, &st),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_conductor_run(o, 0, 1, NULL), ACP_ERR_INVALID_ARGUMENT);
  /* agent mode needs the agent */
  assert_int_equal(acp_conductor_run(o, 0, 1, &st), ACP_ERR_INVALID_ARGUMENT);
  acp_conductor_options_free(o);
}

/* A chain whose agent cannot be spawned: the initialize is answered with
 * an error naming it and the run reports failure. */
static void test_run_spawn_failure(void **state) {
  acp_conductor_options *o = opts();
  int in[2], out[2], st = 0;
  char buf[4096];
  ssize_t n;
  size_t got = 0;
  const char *init = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                     "\"params\":{\"protocolVersion\":1}}\n";
  (void)state;
  assert_int_equal(acp_conductor_options_add_component_spec(
                       o, "/nonexistent/acp-test-agent", NULL, 0),
                   0);
  acp_conductor_options_set_stderr_passthrough(o, false);
  acp_conductor_options_set_grace(o, 100, 100);
  assert_int_equal(pipe(in), 0);
  assert_int_equal(pipe(out), 0);
  assert_int_equal(write(in[1], init, strlen(init)), (ssize_t)strlen(init));
  close(in[1]);
  assert_int_equal(acp_conductor_run(o, in[0], out[1], &st), 0);
  assert_int_equal(st, 1);
  close(out[1]);
  while ((n = read(out[0], buf + got, sizeof(buf) - 1 - got)) > 0)
    got += (size_t)n;
  buf[got] = '\0';
  assert_non_null(strstr(buf, "\"id\":1,\"error\""));
  assert_non_null(strstr(buf, "could not be started"));
  close(in[0]);
  close(out[0]);
  acp_conductor_options_free(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_free),
      cmocka_unit_test(test_add_component),
      cmocka_unit_test(test_spec_shell),
      cmocka_unit_test(test_spec_json),
      cmocka_unit_test(test_url_components),
      cmocka_unit_test(test_run_args),
      cmocka_unit_test(test_run_spawn_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
