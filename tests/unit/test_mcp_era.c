/*
 * Era translation (2025 revisions <-> 2026-07-28): the three writers of
 * mcp.h "MARK: - Eras", checked on exact output bytes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "acp/mcp.h"
#include "failmem.h"

#define META_PV "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\""
#define META_CAPS "\"io.modelcontextprotocol/clientCapabilities\":"
#define META_INFO "\"io.modelcontextprotocol/clientInfo\":"

/* A 2025 initialize's params, with an escape and an odd number to prove
 * byte-exact copies. */
static const char INIT[] =
    "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"roots\":{"
    "\"listChanged\":true},\"x\":1.0e0},\"clientInfo\":{\"name\":"
    "\"ag\\u0065nt\","
    "\"version\":\"1\"}}";

typedef struct fx {
  acp_json_doc *a; /* init params */
  acp_json_doc *b; /* the value under test */
  acp_json_writer *w;
} fx;

static int setup(void **state) {
  fx *f = calloc(1, sizeof(*f));

  assert_non_null(f);
  assert_int_equal(acp_json_doc_new(&f->a, NULL), 0);
  assert_int_equal(acp_json_doc_new(&f->b, NULL), 0);
  assert_int_equal(acp_json_writer_new(&f->w, 0, NULL), 0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;

  acp_json_doc_free(f->a);
  acp_json_doc_free(f->b);
  acp_json_writer_free(f->w);
  free(f);
  return 0;
}

static const acp_json_val *parse(acp_json_doc *d, const char *s) {
  assert_int_equal(acp_json_doc_parse(d, s, strlen(s), NULL), 0);
  return acp_json_doc_root(d);
}

/* The writer's bytes, NUL-terminated in a static buffer; the writer is
 * reset for the next case. */
static const char *out(fx *f) {
  static char buf[2048];
  size_t n;
  const char *s = acp_json_writer_data(f->w, &n);

  assert_true(n < sizeof(buf));
  memcpy(buf, s, n);
  buf[n] = '\0';
  acp_json_writer_reset(f->w);
  return buf;
}

/* MARK: - initialize result from server/discover */

static void test_era_initialize_result_from_discover(void **state) {
  fx *f = *state;
  const acp_json_val *init = parse(f->a, INIT);
  const acp_json_val *d = parse(
      f->b,
      "{\"resultType\":\"complete\",\"supportedVersions\":[\"2026-07-28\"],"
      "\"capabilities\":{\"tools\":{\"listChanged\":true},\"n\":1.50},"
      "\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":"
      "\"S\\u00e9\",\"version\":\"2.0\"}},\"instructions\":\"use \\\"x\\\"\","
      "\"ttlMs\":0,\"cacheScope\":\"public\"}");

  assert_int_equal(
      acp_mcp_era_write_initialize_result(f->w, init, d, "fallback"), 0);
  assert_string_equal(
      out(f), "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":"
              "{\"listChanged\":true},\"n\":1.50},\"serverInfo\":{\"name\":"
              "\"S\\u00e9\",\"version\":\"2.0\"},\"instructions\":"
              "\"use \\\"x\\\"\"}");
}

static void test_era_initialize_result_version_negotiation(void **state) {
  fx *f = *state;
  const acp_json_val *d = parse(f->b, "{\"capabilities\":{}}");

  /* A revision we do not speak gets our latest, as a server answers. */
  assert_int_equal(
      acp_mcp_era_write_initialize_result(
          f->w, parse(f->a, "{\"protocolVersion\":\"2099-01-01\"}"), d, NULL),
      0);
  assert_string_equal(out(f),
                      "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                      "\"serverInfo\":{\"name\":\"mcp-server\",\"version\":"
                      "\"0\"}}");
  /* Every stateful revision is echoed. */
  assert_int_equal(
      acp_mcp_era_write_initialize_result(
          f->w, parse(f->a, "{\"protocolVersion\":\"2024-11-05\"}"), d, NULL),
      0);
  assert_non_null(strstr(out(f), "\"protocolVersion\":\"2024-11-05\""));
  /* 2026-07-28 itself is not a 2025-era answer. */
  assert_int_equal(
      acp_mcp_era_write_initialize_result(
          f->w, parse(f->a, "{\"protocolVersion\":\"2026-07-28\"}"), d, NULL),
      0);
  assert_non_null(strstr(out(f), "\"protocolVersion\":\"2025-11-25\""));
  /* No params, a non-string version: our latest. */
  assert_int_equal(acp_mcp_era_write_initialize_result(f->w, NULL, d, NULL), 0);
  assert_non_null(strstr(out(f), "\"protocolVersion\":\"2025-11-25\""));
  assert_int_equal(acp_mcp_era_write_initialize_result(
                       f->w, parse(f->a, "{\"protocolVersion\":7}"), d, NULL),
                   0);
  assert_non_null(strstr(out(f), "\"protocolVersion\":\"2025-11-25\""));
}

static void test_era_initialize_result_synthesized(void **state) {
  fx *f = *state;
  const acp_json_val *init = parse(f->a, INIT);

  assert_int_equal(
      acp_mcp_era_write_initialize_result(f->w, init, NULL, "tools"), 0);
  assert_string_equal(out(f), "{\"protocolVersion\":\"2025-06-18\","
                              "\"capabilities\":{\"tools\":{}},\"serverInfo\":"
                              "{\"name\":\"tools\",\"version\":\"0\"}}");
  /* Mistyped members of a discover result are not copied. */
  assert_int_equal(acp_mcp_era_write_initialize_result(
                       f->w, init,
                       parse(f->b, "{\"capabilities\":[],\"instructions\":3,"
                                   "\"_meta\":{\"io.modelcontextprotocol/"
                                   "serverInfo\":\"x\"}}"),
                       "n"),
                   0);
  assert_string_equal(out(f), "{\"protocolVersion\":\"2025-06-18\","
                              "\"capabilities\":{},\"serverInfo\":"
                              "{\"name\":\"n\",\"version\":\"0\"}}");
}

static void test_era_initialize_result_rejects_bad_arguments(void **state) {
  fx *f = *state;
  size_t n = 1;

  assert_int_equal(acp_mcp_era_write_initialize_result(NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(
      acp_mcp_era_write_initialize_result(f->w, parse(f->a, "[]"), NULL, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_era_write_initialize_result(
                       f->w, NULL, parse(f->b, "\"x\""), NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  (void)acp_json_writer_data(f->w, &n);
  assert_int_equal(n, 0); /* nothing written */
}

/* MARK: - request _meta */

static void test_era_request_params_adds_meta(void **state) {
  fx *f = *state;
  const acp_json_val *init = parse(f->a, INIT);

  /* No _meta: appended last; every other member byte for byte. */
  assert_int_equal(
      acp_mcp_era_write_request_params(
          f->w,
          parse(f->b, "{\"name\":\"ec\\u0068o\",\"arguments\":{\"n\":"
                      "12345678901234567890,\"f\":1.000000000000000000001}}"),
          init),
      0);
  assert_string_equal(
      out(f),
      "{\"name\":\"ec\\u0068o\",\"arguments\":{\"n\":12345678901234567890,"
      "\"f\":1.000000000000000000001},\"_meta\":{" META_PV "," META_CAPS
      "{\"roots\":{\"listChanged\":true},\"x\":1.0e0}," META_INFO
      "{\"name\":\"ag\\u0065nt\",\"version\":\"1\"}}}");
  /* No params at all. */
  assert_int_equal(acp_mcp_era_write_request_params(f->w, NULL, init), 0);
  assert_string_equal(out(f), "{\"_meta\":{" META_PV "," META_CAPS
                              "{\"roots\":{\"listChanged\":true},\"x\":1.0e0},"
                              "" META_INFO
                              "{\"name\":\"ag\\u0065nt\",\"version\":\"1\"}}}");
  /* No initialize seen: capabilities {}, no clientInfo. */
  assert_int_equal(
      acp_mcp_era_write_request_params(f->w, parse(f->b, "{}"), NULL), 0);
  assert_string_equal(out(f), "{\"_meta\":{" META_PV "," META_CAPS "{}}}");
}

static void test_era_request_params_keeps_existing_meta(void **state) {
  fx *f = *state;
  const acp_json_val *init = parse(f->a, INIT);

  /* _meta keeps its place and members (an escaped key too); a value the
   * caller set wins over ours. */
  assert_int_equal(
      acp_mcp_era_write_request_params(
          f->w,
          parse(f->b,
                "{\"a\":1,\"_meta\":{\"progressTo\\u006ben\":\"t1\","
                "\"io.modelcontextprotocol/protocolVersion\":\"2099-01-01\"},"
                "\"z\":[true]}"),
          init),
      0);
  assert_string_equal(
      out(f), "{\"a\":1,\"_meta\":{\"progressTo\\u006ben\":\"t1\","
              "\"io.modelcontextprotocol/protocolVersion\":"
              "\"2099-01-01\"," META_CAPS
              "{\"roots\":{\"listChanged\":true},\"x\":1.0e0}," META_INFO
              "{\"name\":\"ag\\u0065nt\",\"version\":\"1\"}},\"z\":"
              "[true]}");
  /* Nothing to add: the params come out unchanged. */
  {
    static const char full[] =
        "{\"_meta\":{\"io.modelcontextprotocol/"
        "protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{},"
        "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"a\"}},\"q\":null}";

    assert_int_equal(
        acp_mcp_era_write_request_params(f->w, parse(f->b, full), init), 0);
    assert_string_equal(out(f), full);
  }
}

static void test_era_request_params_rejects_bad_arguments(void **state) {
  fx *f = *state;
  size_t n = 1;

  assert_int_equal(
      acp_mcp_era_write_request_params(f->w, parse(f->b, "[1]"), NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_era_write_request_params(
                       f->w, parse(f->b, "{\"_meta\":[]}"), NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_era_write_request_params(f->w, parse(f->b, "{}"),
                                                    parse(f->a, "\"init\"")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_era_write_request_params(NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  (void)acp_json_writer_data(f->w, &n);
  assert_int_equal(n, 0);
}

/* MARK: - results */

static void test_era_result_strips_2026_members(void **state) {
  fx *f = *state;

  assert_int_equal(
      acp_mcp_era_write_result(
          f->w,
          parse(f->b,
                "{\"resultType\":\"complete\",\"tools\":[{\"name\":"
                "\"echo\",\"inputSchema\":{\"type\":\"object\"}}],"
                "\"ttlMs\":60000,\"cacheScope\":\"private\",\"_meta\":{"
                "\"io.modelcontextprotocol/serverInfo\":{\"name\":\"s\"}},"
                "\"n\":1E400}")),
      0);
  assert_string_equal(
      out(f), "{\"tools\":[{\"name\":\"echo\",\"inputSchema\":{\"type\":"
              "\"object\"}}],\"_meta\":{\"io.modelcontextprotocol/"
              "serverInfo\":{\"name\":\"s\"}},\"n\":1E400}");
  /* Nested members of the same names are content, not envelope. */
  assert_int_equal(
      acp_mcp_era_write_result(
          f->w, parse(f->b, "{\"content\":[{\"type\":\"text\",\"text\":\"x\","
                            "\"resultType\":1}],\"structuredContent\":{"
                            "\"ttlMs\":2}}")),
      0);
  assert_string_equal(
      out(f), "{\"content\":[{\"type\":\"text\",\"text\":\"x\","
              "\"resultType\":1}],\"structuredContent\":{\"ttlMs\":2}}");
  /* A 2025 result passes unchanged; so does an escaped spelling of the
   * key (decoded, it is resultType). */
  assert_int_equal(acp_mcp_era_write_result(f->w, parse(f->b, "{}")), 0);
  assert_string_equal(out(f), "{}");
  assert_int_equal(acp_mcp_era_write_result(
                       f->w, parse(f->b, "{\"result\\u0054ype\":\"complete\","
                                         "\"a\":1}")),
                   0);
  assert_string_equal(out(f), "{\"a\":1}");
}

static void test_era_result_refuses_input_required(void **state) {
  fx *f = *state;
  size_t n = 1;

  assert_int_equal(acp_mcp_era_write_result(
                       f->w, parse(f->b, "{\"resultType\":\"input_required\","
                                         "\"inputRequests\":{}}")),
                   ACP_ERR_UNSUPPORTED);
  assert_int_equal(
      acp_mcp_era_write_result(f->w, parse(f->b, "{\"resultType\":5}")),
      ACP_ERR_UNSUPPORTED);
  assert_int_equal(acp_mcp_era_write_result(f->w, parse(f->b, "[]")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_mcp_era_write_result(f->w, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  (void)acp_json_writer_data(f->w, &n);
  assert_int_equal(n, 0);
}

/* The writers append one value: they compose into a larger message. */
static void test_era_writers_compose_into_a_message(void **state) {
  fx *f = *state;

  acp_json_write_obj_begin(f->w);
  acp_json_write_keyz(f->w, "id");
  acp_json_write_int(f->w, 3);
  acp_json_write_keyz(f->w, "result");
  assert_int_equal(
      acp_mcp_era_write_result(f->w, parse(f->b, "{\"resultType\":\"complete\","
                                                 "\"content\":[]}")),
      0);
  acp_json_write_keyz(f->w, "params");
  assert_int_equal(acp_mcp_era_write_request_params(f->w, NULL, NULL), 0);
  assert_int_equal(acp_json_write_obj_end(f->w), 0);
  assert_string_equal(out(f),
                      "{\"id\":3,\"result\":{\"content\":[]},"
                      "\"params\":{\"_meta\":{" META_PV "," META_CAPS "{}}}}");
}

/* Allocation failure inside the writer is reported, never a crash. */
static void test_era_writer_failures_are_reported(void **state) {
  fx *f = *state;
  acp_json_writer *small = NULL;
  const acp_json_val *init = parse(f->a, INIT);
  const acp_json_val *p = parse(f->b, "{\"name\":\"echo\",\"arguments\":{}}");
  long i;

  (void)state;
  assert_int_equal(acp_json_writer_new(&small, 16, NULL), 0);
  assert_int_equal(acp_mcp_era_write_request_params(small, p, init),
                   ACP_ERR_LIMIT);
  acp_json_writer_free(small);
  for (i = 0; i < 4; i++) {
    failmem fm = {0, -1, 0};
    acp_mem mem = failmem_start(&fm, i);
    int rv;

    small = NULL;
    if (acp_json_writer_new(&small, 0, &mem) != 0)
      continue;
    rv = acp_mcp_era_write_request_params(small, p, init);
    assert_true(rv == 0 || rv == ACP_ERR_NOMEM);
    acp_json_writer_reset(small); /* one top-level value per writer */
    rv = acp_mcp_era_write_initialize_result(small, init, NULL, "x");
    assert_true(rv == 0 || rv == ACP_ERR_NOMEM);
    acp_json_writer_free(small);
    assert_int_equal(fm.live, 0);
  }
}

/* MARK: - the member Mcp-Name mirrors */

static void test_named_param(void **state) {
  fx *f = *state;
  const acp_json_val *m, *p, *v;
  static const struct {
    const char *msg, *want; /* want: the raw member, or NULL */
  } cases[] = {
      {"{\"method\":\"tools/"
       "call\",\"params\":{\"name\":\"echo\",\"uri\":\"x\"}}",
       "\"echo\""},
      {"{\"method\":\"prompts/get\",\"params\":{\"name\":7}}", "7"},
      {"{\"method\":\"resources/"
       "read\",\"params\":{\"name\":\"n\",\"uri\":\"a:b\"}}",
       "\"a:b\""},
      {"{\"method\":\"tools/list\",\"params\":{\"name\":\"echo\"}}", NULL},
      {"{\"method\":\"tools/call\",\"params\":{}}", NULL},
      {"{\"method\":\"tools/call\"}", NULL},
      {"{\"method\":7,\"params\":{\"name\":\"echo\"}}", NULL},
  };
  size_t i, n;
  const char *raw;

  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const acp_json_val *root = parse(f->b, cases[i].msg);
    m = acp_json_obj_getz(root, "method");
    p = acp_json_obj_getz(root, "params");
    v = acp_mcp_named_param(m, p);
    if (cases[i].want == NULL) {
      assert_null(v);
      continue;
    }
    assert_non_null(v);
    raw = acp_json_raw(v, &n);
    assert_int_equal(n, strlen(cases[i].want));
    assert_memory_equal(raw, cases[i].want, n);
  }
  assert_null(acp_mcp_named_param(NULL, NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_era_initialize_result_from_discover,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_era_initialize_result_version_negotiation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_era_initialize_result_synthesized,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_era_initialize_result_rejects_bad_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_era_request_params_adds_meta, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          test_era_request_params_keeps_existing_meta, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_era_request_params_rejects_bad_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_era_result_strips_2026_members,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_era_result_refuses_input_required,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_era_writers_compose_into_a_message,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_era_writer_failures_are_reported,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_named_param, setup, teardown),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
