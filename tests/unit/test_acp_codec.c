/*
 * The generic typed codec (src/acp/codec.c) on hand-written inputs: typed
 * access, preservation of unknown members and _meta, error paths, open enum
 * round trips, building from scratch, and allocation failure.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "acp/json.h"
#include "acp/methods.h"
#include "acp/types.h"
#include "codec_test.h"

static void test_codec_prompt_typed_access(void **state) {
  codec_fixture *f = *state;
  acp_prompt_request r;
  const char *json =
      "{\"sessionId\":\"s\\u0031\",\"prompt\":[{\"type\":\"text\","
      "\"text\":\"hi\"},{\"type\":\"resource_link\",\"uri\":\"file:///a\","
      "\"name\":\"a\",\"size\":12}]}";

  assert_int_equal(codec_decode_into(f, &acp_type_prompt_request, json, &r), 0);
  assert_int_equal(r.session_id.len, 2);
  assert_memory_equal(r.session_id.ptr, "s1", 2);
  assert_int_equal(r.prompt_count, 2);
  assert_int_equal(r.prompt[0].kind, ACP_CONTENT_BLOCK_KIND_TEXT);
  assert_non_null(r.prompt[0].text);
  assert_int_equal(r.prompt[0].text->text.len, 2);
  assert_int_equal(r.prompt[1].kind, ACP_CONTENT_BLOCK_KIND_RESOURCE_LINK);
  assert_true(r.prompt[1].resource_link->has_size);
  assert_int_equal(r.prompt[1].resource_link->size, 12);
  assert_null(r.meta);
  assert_string_equal(codec_encode(f, &acp_type_prompt_request, &r),
                      "{\"sessionId\":\"s1\",\"prompt\":[{\"type\":\"text\","
                      "\"text\":\"hi\"},{\"type\":\"resource_link\","
                      "\"name\":\"a\",\"size\":12,\"uri\":\"file:///a\"}]}");
}

/* Lenient decoding reads what older peers wrote; encoding does not invent
 * the required members the source lacked, but does emit one set later. */
static void test_codec_lenient_decode_invents_nothing(void **state) {
  codec_fixture *f = *state;
  acp_prompt_request r;
  const char *json = "{\"sessionId\":\"s\",\"content\":[]}";

  assert_int_equal(codec_decode_into(f, &acp_type_prompt_request, json, &r),
                   ACP_ERR_PARSE);
  assert_string_equal(f->err, "params.prompt: missing required member");
  assert_int_equal(acp_json_doc_parse(f->doc, json, strlen(json), NULL), 0);
  assert_int_equal(acp_decode_ex(&acp_type_prompt_request,
                                 acp_json_doc_root(f->doc), f->arena, &r,
                                 "params", ACP_DECODE_LENIENT, f->err,
                                 sizeof(f->err)),
                   0);
  assert_null(r.prompt);
  assert_int_equal(r.prompt_count, 0);
  assert_string_equal(codec_encode(f, &acp_type_prompt_request, &r), json);
  /* Without a source, a required array is written, empty. */
  r.raw = NULL;
  assert_string_equal(codec_encode(f, &acp_type_prompt_request, &r),
                      "{\"sessionId\":\"s\",\"prompt\":[]}");
}

static void test_codec_keeps_unknown_members_and_meta(void **state) {
  codec_fixture *f = *state;
  acp_session_notification n;
  const char *json =
      "{\"zzz\":[1,2],\"sessionId\":\"s\",\"_meta\":{\"a\":1},"
      "\"update\":{\"sessionUpdate\":\"agent_message_chunk\","
      "\"content\":{\"type\":\"text\",\"text\":\"t\",\"extra\":true},"
      "\"future\":null},\"x\":1.50}";

  assert_int_equal(
      codec_decode_into(f, &acp_type_session_notification, json, &n), 0);
  assert_non_null(n.meta);
  assert_int_equal(n.update->kind, ACP_SESSION_UPDATE_KIND_AGENT_MESSAGE_CHUNK);
  assert_int_equal(n.update->agent_message_chunk->content->kind,
                   ACP_CONTENT_BLOCK_KIND_TEXT);
  /* Known members first, then unknown ones verbatim in input order. */
  assert_string_equal(
      codec_encode(f, &acp_type_session_notification, &n),
      "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
      "\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"t\","
      "\"extra\":true},\"future\":null},\"_meta\":{\"a\":1},\"zzz\":[1,2],"
      "\"x\":1.50}");
}

static void test_codec_unknown_union_tag_round_trips(void **state) {
  codec_fixture *f = *state;
  acp_session_update u;
  const char *json = "{\"sessionUpdate\":\"brand_new\",\"n\":{\"k\":[]}}";

  assert_int_equal(codec_decode_into(f, &acp_type_session_update, json, &u), 0);
  assert_int_equal(u.kind, ACP_SESSION_UPDATE_KIND_UNKNOWN);
  assert_string_equal(codec_encode(f, &acp_type_session_update, &u), json);
}

static void test_codec_open_enum_unknown_value_round_trips(void **state) {
  codec_fixture *f = *state;
  acp_session_config_option o;
  const char *json = "{\"id\":\"m\",\"name\":\"Model\",\"category\":"
                     "\"_vendor_x\",\"type\":\"select\",\"currentValue\":"
                     "\"a\",\"options\":[]}";

  assert_int_equal(
      codec_decode_into(f, &acp_type_session_config_option, json, &o), 0);
  assert_int_equal(o.category, ACP_SESSION_CONFIG_OPTION_CATEGORY_UNKNOWN);
  assert_int_equal(o.category_raw.len, 9);
  assert_memory_equal(o.category_raw.ptr, "_vendor_x", 9);
  assert_int_equal(o.variant.kind, ACP_SESSION_CONFIG_OPTION_KIND_SELECT);
  assert_non_null(o.variant.select);
  assert_string_equal(codec_encode(f, &acp_type_session_config_option, &o),
                      json);
  assert_int_equal(acp_session_config_option_category_from_str("model", 5),
                   ACP_SESSION_CONFIG_OPTION_CATEGORY_MODEL);
  assert_int_equal(acp_session_config_option_category_from_str("_x", 2),
                   ACP_SESSION_CONFIG_OPTION_CATEGORY_UNKNOWN);
  assert_string_equal(acp_stop_reason_to_str(ACP_STOP_REASON_END_TURN),
                      "end_turn");
  assert_null(acp_stop_reason_to_str(ACP_STOP_REASON_UNKNOWN));
  assert_null(acp_stop_reason_to_str((acp_stop_reason)99));
}

static void test_codec_errors_name_the_path(void **state) {
  codec_fixture *f = *state;
  acp_prompt_request r;
  acp_prompt_response pr;
  acp_new_session_request ns;

  assert_int_equal(
      codec_decode_into(
          f, &acp_type_prompt_request,
          "{\"sessionId\":\"s\",\"prompt\":[{\"type\":\"text\",\"text\":"
          "\"a\"},{\"type\":\"text\",\"text\":\"b\"},{\"type\":3}]}",
          &r),
      ACP_ERR_PARSE);
  assert_string_equal(f->err, "params.prompt[2].type: expected string");

  assert_int_equal(
      codec_decode_into(f, &acp_type_prompt_request,
                        "{\"sessionId\":\"s\",\"prompt\":[{\"type\":"
                        "\"text\"}]}",
                        &r),
      ACP_ERR_PARSE);
  assert_string_equal(f->err, "params.prompt[0].text: missing required member");

  assert_int_equal(codec_decode_into(f, &acp_type_prompt_request, "[]", &r),
                   ACP_ERR_PARSE);
  assert_string_equal(f->err, "params: expected object");

  assert_int_equal(codec_decode_into(f, &acp_type_prompt_request,
                                     "{\"sessionId\":null,\"prompt\":[]}", &r),
                   ACP_ERR_PARSE);
  assert_string_equal(f->err, "params.sessionId: expected string");

  /* A closed enum rejects unknown values. */
  assert_int_equal(codec_decode_into(f, &acp_type_prompt_response,
                                     "{\"stopReason\":\"bored\"}", &pr),
                   ACP_ERR_PARSE);
  assert_string_equal(f->err, "params.stopReason: unknown enum value");

  /* McpServer: stdio has no "type"; missing command matches nothing. */
  assert_int_equal(
      codec_decode_into(f, &acp_type_new_session_request,
                        "{\"cwd\":\"/\",\"mcpServers\":[{\"name\":\"x\"}]}",
                        &ns),
      ACP_ERR_PARSE);
  assert_string_equal(f->err, "params.mcpServers[0].type: missing required "
                              "member");
  assert_int_equal(
      codec_decode_into(
          f, &acp_type_new_session_request,
          "{\"cwd\":\"/\",\"mcpServers\":[{\"name\":\"x\",\"command\":"
          "\"c\",\"args\":[],\"env\":[]},{\"type\":\"http\",\"name\":\"h\","
          "\"url\":\"u\",\"headers\":[]}]}",
          &ns),
      0);
  assert_int_equal(ns.mcp_servers[0].kind, ACP_MCP_SERVER_KIND_STDIO);
  assert_int_equal(ns.mcp_servers[1].kind, ACP_MCP_SERVER_KIND_HTTP);

  /* Integers: fractions and overflow are errors. */
  assert_int_equal(codec_decode_into(f, &acp_type_initialize_request,
                                     "{\"protocolVersion\":1.5}", &ns),
                   ACP_ERR_PARSE);
  assert_string_equal(f->err, "params.protocolVersion: expected integer");
  assert_int_equal(
      codec_decode_into(f, &acp_type_initialize_request,
                        "{\"protocolVersion\":99999999999999999999}", &ns),
      ACP_ERR_PARSE);
  assert_string_equal(f->err, "params.protocolVersion: integer out of range");
}

static void test_codec_lenient_and_null_members_are_kept(void **state) {
  codec_fixture *f = *state;
  acp_tool_call_update u;
  /* title has the wrong type but is default-on-error: ignored, kept. */
  const char *json = "{\"toolCallId\":\"t\",\"title\":7,\"kind\":null}";

  assert_int_equal(codec_decode_into(f, &acp_type_tool_call_update, json, &u),
                   0);
  assert_null(u.title.ptr);
  assert_int_equal(u.kind, ACP_TOOL_KIND_UNKNOWN);
  assert_string_equal(codec_encode(f, &acp_type_tool_call_update, &u), json);
}

static void test_codec_builds_from_scratch(void **state) {
  codec_fixture *f = *state;
  acp_prompt_response r;
  acp_request_permission_response rp;
  acp_request_permission_outcome out;
  acp_selected_permission_outcome sel;
  acp_initialize_request ir;

  memset(&r, 0, sizeof(r));
  r.stop_reason = ACP_STOP_REASON_END_TURN;
  assert_string_equal(codec_encode(f, &acp_type_prompt_response, &r),
                      "{\"stopReason\":\"end_turn\"}");

  memset(&rp, 0, sizeof(rp));
  memset(&out, 0, sizeof(out));
  memset(&sel, 0, sizeof(sel));
  sel.option_id.ptr = "allow";
  sel.option_id.len = 5;
  out.kind = ACP_REQUEST_PERMISSION_OUTCOME_KIND_SELECTED;
  out.selected = &sel;
  rp.outcome = &out;
  assert_string_equal(
      codec_encode(f, &acp_type_request_permission_response, &rp),
      "{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"allow\"}}");

  /* Missing required members are refused. */
  memset(&r, 0, sizeof(r));
  acp_json_writer_reset(f->w);
  assert_int_equal(acp_encode(&acp_type_prompt_response, &r, f->w),
                   ACP_ERR_INVALID_ARGUMENT);
  out.selected = NULL;
  acp_json_writer_reset(f->w);
  assert_int_equal(acp_encode(&acp_type_request_permission_response, &rp, f->w),
                   ACP_ERR_INVALID_ARGUMENT);
  memset(&ir, 0, sizeof(ir));
  ir.protocol_version = 1;
  assert_string_equal(codec_encode(f, &acp_type_initialize_request, &ir),
                      "{\"protocolVersion\":1}");
  assert_int_equal(acp_encode(NULL, &ir, f->w), ACP_ERR_INVALID_ARGUMENT);
}

static void test_codec_lookup(void **state) {
  (void)state;
  assert_ptr_equal(acp_type_by_name("InitializeRequest"),
                   &acp_type_initialize_request);
  assert_ptr_equal(acp_type_by_name("SessionUpdate"), &acp_type_session_update);
  assert_null(acp_type_by_name("NoSuchType"));
  assert_null(acp_type_by_name(NULL));
  assert_string_equal(acp_type_name(&acp_type_content_block), "ContentBlock");
  assert_int_equal(acp_type_size(&acp_type_content_block),
                   sizeof(acp_content_block));
  assert_ptr_equal(acp_method_params_desc(ACP_METHOD_SESSION_PROMPT),
                   &acp_type_prompt_request);
  assert_ptr_equal(acp_method_result_desc(ACP_METHOD_SESSION_PROMPT),
                   &acp_type_prompt_response);
  assert_ptr_equal(acp_method_notification_desc(ACP_METHOD_SESSION_UPDATE),
                   &acp_type_session_notification);
  assert_null(acp_method_result_desc(ACP_METHOD_MCP_MESSAGE));
  assert_null(acp_method_params_desc(ACP_METHOD__COUNT));
  assert_null(acp_method_params_desc(0));
}

/* MARK: - Allocation failure */

/* One scenario: decode (escaped strings force arena copies) and encode. */
static int scenario(failmem *fm) {
  acp_mem mem = failmem_mem(fm);
  static const char json[] =
      "{\"sessionId\":\"s\\n\",\"prompt\":[{\"type\":\"text\",\"text\":"
      "\"\\u00e9\"},{\"type\":\"resource\",\"resource\":{\"uri\":\"u\","
      "\"text\":\"x\\ty\"}}],\"_meta\":{\"k\\u0041\":1},\"unk\\u0042\":2}";
  acp_json_doc *doc = NULL;
  acp_arena *arena = NULL;
  acp_json_writer *w = NULL;
  acp_prompt_request r;
  int rv;

  rv = acp_json_doc_new(&doc, &mem);
  if (rv == 0)
    rv = acp_json_doc_parse(doc, json, sizeof(json) - 1, NULL);
  if (rv == 0)
    rv = acp_arena_new(&arena, &mem);
  if (rv == 0) {
    /* A tiny first block would hide nothing: force several blocks. */
    size_t i;
    for (i = 0; i < 3 && rv == 0; i++)
      if (acp_arena_alloc(arena, 3000) == NULL)
        rv = ACP_ERR_NOMEM;
  }
  if (rv == 0)
    rv = acp_decode(&acp_type_prompt_request, acp_json_doc_root(doc), arena, &r,
                    NULL, 0);
  if (rv == 0)
    rv = acp_json_writer_new(&w, 0, &mem);
  if (rv == 0)
    rv = acp_encode(&acp_type_prompt_request, &r, w);
  if (rv == 0) {
    size_t len;
    const char *p = acp_json_writer_data(w, &len);
    static const char want[] =
        "{\"sessionId\":\"s\\n\",\"prompt\":[{\"type\":\"text\",\"text\":"
        "\"\xc3\xa9\"},{\"type\":\"resource\",\"resource\":{\"text\":"
        "\"x\\ty\",\"uri\":\"u\"}}],\"_meta\":{\"k\\u0041\":1},\"unkB\":2}";
    assert_int_equal(len, sizeof(want) - 1);
    assert_memory_equal(p, want, len);
  }
  acp_json_writer_free(w);
  acp_arena_free(arena);
  acp_json_doc_free(doc);
  return rv;
}

static void test_codec_allocation_failure_leaks_nothing(void **state) {
  (void)state;
  (void)codec_nomem_sweep(scenario, 4);
}

static void test_codec_arena(void **state) {
  acp_arena *a = NULL;
  char *p, *q;
  (void)state;

  assert_int_equal(acp_arena_new(NULL, NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_arena_new(&a, NULL), 0);
  p = acp_arena_alloc(a, 0);
  q = acp_arena_alloc(a, 0);
  assert_non_null(p);
  assert_non_null(q);
  assert_ptr_not_equal(p, q);
  p = acp_arena_alloc(a, 100000);
  assert_non_null(p);
  assert_int_equal(p[99999], 0);
  assert_null(acp_arena_alloc(a, SIZE_MAX));
  assert_int_equal(((uintptr_t)acp_arena_alloc(a, 3)) % sizeof(void *), 0);
  acp_arena_reset(a);
  assert_non_null(acp_arena_alloc(a, 10));
  acp_arena_free(a);
  acp_arena_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_codec_prompt_typed_access,
                                      codec_setup, codec_teardown),
      cmocka_unit_test_setup_teardown(test_codec_lenient_decode_invents_nothing,
                                      codec_setup, codec_teardown),
      cmocka_unit_test_setup_teardown(test_codec_keeps_unknown_members_and_meta,
                                      codec_setup, codec_teardown),
      cmocka_unit_test_setup_teardown(test_codec_unknown_union_tag_round_trips,
                                      codec_setup, codec_teardown),
      cmocka_unit_test_setup_teardown(
          test_codec_open_enum_unknown_value_round_trips, codec_setup,
          codec_teardown),
      cmocka_unit_test_setup_teardown(test_codec_errors_name_the_path,
                                      codec_setup, codec_teardown),
      cmocka_unit_test_setup_teardown(
          test_codec_lenient_and_null_members_are_kept, codec_setup,
          codec_teardown),
      cmocka_unit_test_setup_teardown(test_codec_builds_from_scratch,
                                      codec_setup, codec_teardown),
      cmocka_unit_test(test_codec_lookup),
      cmocka_unit_test(test_codec_allocation_failure_leaks_nothing),
      cmocka_unit_test(test_codec_arena),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
