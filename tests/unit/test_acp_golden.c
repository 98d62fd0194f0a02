/*
 * Round-trips every golden fixture under spec/acp/golden (java-sdk and
 * python-sdk) through the generated typed codecs: decode with acp_decode(),
 * encode with acp_encode(), and compare the output with the original as JSON
 * values (json-c parses both; object members compared order-insensitively,
 * numbers by value). A second encode of the re-decoded output must give the
 * same bytes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "acp/json.h"
#include "acp/methods.h"
#include "acp/types.h"

#define GOLDEN_DIR ACP_SPEC_DIR "/acp/golden/"

/* Fixtures that are not JSON-RPC messages: the schema type by file name. */
static const struct {
  const char *file;
  const char *type;
} by_name[] = {
    {"agent-capabilities-with-meta.json", "AgentCapabilities"},
    {"initialize-request-with-meta.json", "InitializeRequest"},
    {"initialize-response.json", "InitializeResponse"},
    {"session-load-request.json", "LoadSessionRequest"},
    {"session-load-response.json", "LoadSessionResponse"},
    {"session-new-response-with-modes.json", "NewSessionResponse"},
    {"session-new-response.json", "NewSessionResponse"},
    {"session-new-with-mcp-http.json", "NewSessionRequest"},
    {"session-new-with-mcp-mixed.json", "NewSessionRequest"},
    {"session-new-with-mcp-sse.json", "NewSessionRequest"},
    {"session-new-with-mcp-stdio.json", "NewSessionRequest"},
    {"session-prompt-with-meta.json", "PromptRequest"},
    {"session-set-mode-request.json", "SetSessionModeRequest"},
    {"session-update-agent-message-chunk.json", "SessionUpdate"},
    {"session-update-agent-thought-chunk.json", "SessionUpdate"},
    {"session-update-available-commands.json", "SessionUpdate"},
    {"session-update-current-mode.json", "SessionUpdate"},
    {"session-update-plan.json", "SessionUpdate"},
    {"session-update-tool-call-complete.json", "SessionUpdate"},
    {"session-update-tool-call-update.json", "SessionUpdate"},
    {"session-update-tool-call.json", "SessionUpdate"},
    {"session-update-usage-update.json", "SessionUpdate"},
    {"session-update-user-message-chunk.json", "SessionUpdate"},
    {"cancel_notification.json", "CancelNotification"},
    {"content_audio.json", "ContentBlock"},
    {"content_image.json", "ContentBlock"},
    {"content_resource_blob.json", "ContentBlock"},
    {"content_resource_link.json", "ContentBlock"},
    {"content_resource_text.json", "ContentBlock"},
    {"content_text.json", "ContentBlock"},
    {"fs_read_text_file_request.json", "ReadTextFileRequest"},
    {"fs_read_text_file_response.json", "ReadTextFileResponse"},
    {"fs_write_text_file_request.json", "WriteTextFileRequest"},
    {"initialize_request.json", "InitializeRequest"},
    {"initialize_response.json", "InitializeResponse"},
    {"new_session_request.json", "NewSessionRequest"},
    {"new_session_response.json", "NewSessionResponse"},
    {"permission_outcome_cancelled.json", "RequestPermissionOutcome"},
    {"permission_outcome_selected.json", "RequestPermissionOutcome"},
    {"prompt_request.json", "PromptRequest"},
    {"request_permission_request.json", "RequestPermissionRequest"},
    {"request_permission_response_selected.json", "RequestPermissionResponse"},
    {"session_update_agent_message_chunk.json", "SessionUpdate"},
    {"session_update_agent_thought_chunk.json", "SessionUpdate"},
    {"session_update_plan.json", "SessionUpdate"},
    {"session_update_tool_call.json", "SessionUpdate"},
    {"session_update_tool_call_edit.json", "SessionUpdate"},
    {"session_update_tool_call_locations_rawinput.json", "SessionUpdate"},
    {"session_update_tool_call_read.json", "SessionUpdate"},
    {"session_update_tool_call_update_content.json", "SessionUpdate"},
    {"session_update_tool_call_update_more_fields.json", "SessionUpdate"},
    {"session_update_user_message_chunk.json", "SessionUpdate"},
    {"tool_content_content_text.json", "ToolCallContent"},
    {"tool_content_diff.json", "ToolCallContent"},
    {"tool_content_diff_no_old.json", "ToolCallContent"},
    {"tool_content_terminal.json", "ToolCallContent"},
};

/*
 * Fixtures that do not match the ACP v1 schema (written against older SDK
 * shapes). The decoder must reject them with exactly this message.
 */
static const struct {
  const char *file;
  const char *error;
} invalid[] = {
    {"session-new-request.json", "params.mcpServers: missing required member"},
    {"session-prompt-request.json", "params.prompt: missing required member"},
};

static const char *type_for_file(const char *file) {
  size_t i;
  for (i = 0; i < sizeof(by_name) / sizeof(by_name[0]); i++)
    if (strcmp(by_name[i].file, file) == 0)
      return by_name[i].type;
  return NULL;
}

static const char *expected_error(const char *file) {
  size_t i;
  for (i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
    if (strcmp(invalid[i].file, file) == 0)
      return invalid[i].error;
  return NULL;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf;
  long n;

  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  n = ftell(f);
  assert_true(n >= 0);
  rewind(f);
  buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  buf[n] = '\0';
  *len = (size_t)n;
  return buf;
}

/* JSON value equality: objects order-insensitive, numbers by value. */
static int json_equal(struct json_object *a, struct json_object *b) {
  enum json_type ta = json_object_get_type(a);
  enum json_type tb = json_object_get_type(b);

  if ((ta == json_type_int || ta == json_type_double) &&
      (tb == json_type_int || tb == json_type_double)) {
    if (ta == json_type_int && tb == json_type_int)
      return json_object_get_int64(a) == json_object_get_int64(b);
    return json_object_get_double(a) == json_object_get_double(b);
  }
  if (ta != tb)
    return 0;
  switch (ta) {
  case json_type_null:
    return 1;
  case json_type_boolean:
    return json_object_get_boolean(a) == json_object_get_boolean(b);
  case json_type_string:
    return json_object_get_string_len(a) == json_object_get_string_len(b) &&
           memcmp(json_object_get_string(a), json_object_get_string(b),
                  (size_t)json_object_get_string_len(a)) == 0;
  case json_type_array: {
    size_t i, n = json_object_array_length(a);
    if (n != json_object_array_length(b))
      return 0;
    for (i = 0; i < n; i++)
      if (!json_equal(json_object_array_get_idx(a, i),
                      json_object_array_get_idx(b, i)))
        return 0;
    return 1;
  }
  case json_type_object: {
    struct json_object_iterator it, end;
    if (json_object_object_length(a) != json_object_object_length(b))
      return 0;
    it = json_object_iter_begin(a);
    end = json_object_iter_end(a);
    while (!json_object_iter_equal(&it, &end)) {
      struct json_object *other;
      if (!json_object_object_get_ex(b, json_object_iter_peek_name(&it),
                                     &other))
        return 0;
      if (!json_equal(json_object_iter_peek_value(&it), other))
        return 0;
      json_object_iter_next(&it);
    }
    return 1;
  }
  default:
    return 0;
  }
}

static struct json_object *jsonc_parse(const char *s, size_t len) {
  struct json_tokener *tok = json_tokener_new();
  struct json_object *o;
  assert_non_null(tok);
  o = json_tokener_parse_ex(tok, s, (int)len);
  assert_int_equal(json_tokener_get_error(tok), json_tokener_success);
  json_tokener_free(tok);
  return o;
}

typedef struct counts {
  int failed;
  int round_tripped;
  int rejected_as_expected;
} counts;

static void check_file(const char *dir, const char *file, counts *n) {
  char path[1024];
  char err[256];
  acp_json_doc *doc = NULL;
  acp_arena *arena = NULL;
  acp_json_writer *w = NULL, *w2 = NULL;
  const acp_json_val *root, *v;
  const acp_json_val *method;
  const acp_type_desc *t = NULL;
  const char *root_name = NULL;
  const char *out, *out2;
  size_t len, out_len, out2_len;
  struct json_object *orig, *enc;
  void *s;
  char *data;
  int rv;
  unsigned flags = 0;

  snprintf(path, sizeof(path), "%s%s/%s", GOLDEN_DIR, dir, file);
  data = read_file(path, &len);
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_json_doc_parse(doc, data, len, NULL), 0);
  root = acp_json_doc_root(doc);
  v = root;

  method = acp_json_obj_getz(root, "method");
  if (method != NULL) {
    const char *m;
    size_t mlen;
    const acp_method_info *mi;
    m = acp_json_str_raw(method, &mlen);
    mi = acp_method_by_name(m, mlen);
    assert_non_null(mi);
    if (acp_json_obj_getz(root, "id") != NULL)
      t = acp_method_params_desc(mi->id);
    else
      t = acp_method_notification_desc(mi->id);
    v = acp_json_obj_getz(root, "params");
    root_name = "params";
  } else {
    const char *tn = type_for_file(file);
    if (tn == NULL)
      fail_msg("%s/%s: no type known for this fixture", dir, file);
    t = acp_type_by_name(tn);
    if (acp_json_obj_getz(root, "result") != NULL &&
        acp_json_obj_getz(root, "jsonrpc") != NULL) {
      v = acp_json_obj_getz(root, "result");
      root_name = "result";
    }
  }
  if (t == NULL)
    fail_msg("%s/%s: no type descriptor", dir, file);
  assert_non_null(v);

  assert_int_equal(acp_arena_new(&arena, NULL), 0);
  s = acp_arena_alloc(arena, acp_type_size(t));
  assert_non_null(s);
  rv = acp_decode_named(t, v, arena, s, root_name, err, sizeof(err));
  if (expected_error(file) != NULL) {
    if (rv != ACP_ERR_PARSE)
      fail_msg("%s/%s: expected rejection, got %d", dir, file, rv);
    assert_string_equal(err, expected_error(file));
    n->rejected_as_expected++;
    /* Written for an older schema: the strict decoder rejects it (above),
     * and the lenient one must still carry every byte of it through. */
    memset(s, 0, acp_type_size(t));
    flags = ACP_DECODE_LENIENT;
    rv = acp_decode_ex(t, v, arena, s, root_name, flags, err, sizeof(err));
    if (rv != 0)
      fail_msg("%s/%s: lenient decode failed: %s", dir, file, err);
  }
  if (rv != 0) {
    print_error("%s/%s: decode as %s failed: %s\n", dir, file, acp_type_name(t),
                err);
    n->failed++;
    goto done;
  }

  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  rv = acp_encode(t, s, w);
  if (rv != 0)
    fail_msg("%s/%s: encode failed: %d", dir, file, rv);
  out = acp_json_writer_data(w, &out_len);

  {
    size_t vlen;
    const char *vraw = acp_json_raw(v, &vlen);
    orig = jsonc_parse(vraw, vlen);
  }
  enc = jsonc_parse(out, out_len);
  if (!json_equal(orig, enc))
    fail_msg("%s/%s: round trip differs:\n%.*s", dir, file, (int)out_len, out);
  json_object_put(orig);
  json_object_put(enc);

  /* Decoding our own output and encoding again is byte-identical. */
  {
    acp_json_doc *doc2 = NULL;
    void *s2;
    assert_int_equal(acp_json_doc_new(&doc2, NULL), 0);
    assert_int_equal(acp_json_doc_parse(doc2, out, out_len, NULL), 0);
    s2 = acp_arena_alloc(arena, acp_type_size(t));
    assert_non_null(s2);
    assert_int_equal(acp_decode_ex(t, acp_json_doc_root(doc2), arena, s2, NULL,
                                   flags, err, sizeof(err)),
                     0);
    assert_int_equal(acp_json_writer_new(&w2, 0, NULL), 0);
    assert_int_equal(acp_encode(t, s2, w2), 0);
    out2 = acp_json_writer_data(w2, &out2_len);
    assert_int_equal(out2_len, out_len);
    assert_memory_equal(out2, out, out_len);
    acp_json_doc_free(doc2);
  }
  n->round_tripped++;

done:
  acp_json_writer_free(w);
  acp_json_writer_free(w2);
  acp_arena_free(arena);
  acp_json_doc_free(doc);
  free(data);
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_dir(const char *dir, counts *n) {
  char path[1024];
  char *names[256];
  size_t count = 0, i;
  struct dirent *e;
  DIR *d;

  snprintf(path, sizeof(path), "%s%s", GOLDEN_DIR, dir);
  d = opendir(path);
  assert_non_null(d);
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l < 5 || strcmp(e->d_name + l - 5, ".json") != 0)
      continue;
    assert_true(count < sizeof(names) / sizeof(names[0]));
    names[count] = strdup(e->d_name);
    assert_non_null(names[count]);
    count++;
  }
  closedir(d);
  qsort(names, count, sizeof(names[0]), name_cmp);
  for (i = 0; i < count; i++) {
    check_file(dir, names[i], n);
    free(names[i]);
  }
}

static void test_golden_java_sdk(void **state) {
  counts n = {0, 0, 0};
  (void)state;
  check_dir("java-sdk", &n);
  print_message("java-sdk: %d round-tripped, %d rejected as expected\n",
                n.round_tripped, n.rejected_as_expected);
  assert_int_equal(n.failed, 0);
  /* All 27 round-trip; the 2 written for an older schema only leniently. */
  assert_int_equal(n.round_tripped, 27);
  assert_int_equal(n.rejected_as_expected, 2);
}

static void test_golden_python_sdk(void **state) {
  counts n = {0, 0, 0};
  (void)state;
  check_dir("python-sdk", &n);
  print_message("python-sdk: %d round-tripped, %d rejected as expected\n",
                n.round_tripped, n.rejected_as_expected);
  assert_int_equal(n.failed, 0);
  assert_int_equal(n.round_tripped, 33);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_java_sdk),
      cmocka_unit_test(test_golden_python_sdk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
