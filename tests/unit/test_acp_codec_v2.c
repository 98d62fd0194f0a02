/*
 * The generated ACP v2 types (include/acp/types_v2.h, tools/gen_acp.py) on
 * real v2 traffic and on hand-written inputs: every message of the v2 agent
 * transcripts round-trips through its method's v2 descriptor (and the
 * requests the agent refused as invalid fail to decode), typed access to
 * the v2-only and v2-changed members, errors naming the member, the lookup
 * functions, and allocation failure.
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

#include "acp/json.h"
#include "acp/methods.h"
#include "acp/types.h"
#include "acp/types_v2.h"
#include "codec_test.h"

#define TRANSCRIPTS ACP_SOURCE_DIR "/tests/transcripts/agent/"

/* MARK: - JSON equality (members order-insensitive, numbers by text) */

static bool json_eq(const acp_json_val *a, const acp_json_val *b) {
  const acp_json_val *x, *y;
  acp_json_type t = acp_json_type_of(a);
  size_t la, lb;
  const char *ra, *rb;

  if (t != acp_json_type_of(b))
    return false;
  switch (t) {
  case ACP_JSON_OBJECT:
    if (acp_json_len(a) != acp_json_len(b))
      return false;
    for (x = acp_json_child(a); x; x = acp_json_next(acp_json_next(x))) {
      ra = acp_json_str_raw(x, &la);
      y = acp_json_obj_get(b, ra, la);
      if (y == NULL || !json_eq(acp_json_next(x), y))
        return false;
    }
    return true;
  case ACP_JSON_ARRAY:
    if (acp_json_len(a) != acp_json_len(b))
      return false;
    for (x = acp_json_child(a), y = acp_json_child(b); x;
         x = acp_json_next(x), y = acp_json_next(y))
      if (!json_eq(x, y))
        return false;
    return true;
  default:
    ra = acp_json_raw(a, &la);
    rb = acp_json_raw(b, &lb);
    return la == lb && memcmp(ra, rb, la) == 0;
  }
}

/* Decode v with t, encode it, and check the output equals v. */
static void round_trip(codec_fixture *f, const acp_type_desc *t,
                       const acp_json_val *v, const char *where) {
  void *out = acp_arena_alloc(f->arena, acp_type_size(t));
  const char *p;
  size_t len;
  int rv;

  assert_non_null(out);
  rv = acp_decode_named(t, v, f->arena, out, "params", f->err, sizeof(f->err));
  if (rv != 0)
    fail_msg("%s (%s): %s", where, acp_type_name(t), f->err);
  acp_json_writer_reset(f->w);
  assert_int_equal(acp_encode(t, out, f->w), 0);
  p = acp_json_writer_data(f->w, &len);
  assert_int_equal(acp_json_doc_parse(f->doc2, p, len, NULL), 0);
  if (!json_eq(v, acp_json_doc_root(f->doc2)))
    fail_msg("%s (%s): round trip differs: %.*s", where, acp_type_name(t),
             (int)len, p);
}

/* MARK: - The v2 transcripts */

typedef struct idmap {
  char ids[64][24];
  char methods[64][40];
  int n;
} idmap;

static char *read_all(const char *path) {
  FILE *fp = fopen(path, "rb");
  char *buf;
  long n;

  if (fp == NULL)
    return NULL;
  fseek(fp, 0, SEEK_END);
  n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
  buf[n] = '\0';
  fclose(fp);
  return buf;
}

static void id_text(const acp_json_val *id, char *out, size_t cap) {
  size_t len;
  const char *p = acp_json_raw(id, &len);
  snprintf(out, cap, "%.*s", (int)len, p);
}

/* Record the method of every request of a file (id -> method). */
static void collect_requests(codec_fixture *f, const char *text, idmap *m) {
  const char *line = text;

  while (*line != '\0') {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (len > 0 && acp_json_doc_parse(f->doc, line, len, NULL) == 0 &&
        m->n < 64) {
      const acp_json_val *root = acp_json_doc_root(f->doc);
      const acp_json_val *id = acp_json_obj_getz(root, "id");
      const acp_json_val *meth = acp_json_obj_getz(root, "method");
      if (id != NULL && meth != NULL) {
        size_t ml;
        const char *mp = acp_json_str_raw(meth, &ml);
        id_text(id, m->ids[m->n], sizeof(m->ids[0]));
        snprintf(m->methods[m->n], sizeof(m->methods[0]), "%.*s", (int)ml, mp);
        m->n++;
      }
    }
    line = end ? end + 1 : line + len;
  }
}

static const char *method_of(const idmap *m, const acp_json_val *id) {
  char key[24];
  int i;

  id_text(id, key, sizeof(key));
  for (i = m->n - 1; i >= 0; i--)
    if (strcmp(m->ids[i], key) == 0)
      return m->methods[i];
  return NULL;
}

/* An error answer to request `id` in `answers`, or 0. */
static int64_t error_code_for(codec_fixture *f, const char *answers,
                              const char *id) {
  const char *line = answers;
  int64_t code = 0;

  while (*line != '\0') {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (len > 0 && acp_json_doc_parse(f->doc2, line, len, NULL) == 0) {
      const acp_json_val *root = acp_json_doc_root(f->doc2);
      const acp_json_val *rid = acp_json_obj_getz(root, "id");
      const acp_json_val *err = acp_json_obj_getz(root, "error");
      char key[24];
      if (rid != NULL && err != NULL &&
          acp_json_obj_getz(root, "method") == NULL) {
        id_text(rid, key, sizeof(key));
        if (strcmp(key, id) == 0)
          acp_json_get_int64(acp_json_obj_getz(err, "code"), &code);
      }
    }
    line = end ? end + 1 : line + len;
  }
  return code;
}

typedef struct counts {
  int params, results, invalid;
} counts;

/* Every line of `text`: params of v2 methods and results of requests the
 * other file sent round-trip; params the agent answered -32602 do not
 * decode. The v1 `initialize` exchange is skipped when not v2. */
static void check_lines(codec_fixture *f, const char *text, const idmap *peer,
                        const char *answers, const char *where, counts *n) {
  char *copy = strdup(text);
  char *line = copy;

  assert_non_null(copy);
  while (*line != '\0') {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const acp_json_val *root, *meth, *id, *v;
    const acp_method_info *mi = NULL;
    const acp_type_desc *t = NULL;
    bool is_params = false;

    if (end)
      *end = '\0';
    if (len == 0 || acp_json_doc_parse(f->doc, line, len, NULL) != 0)
      goto next;
    root = acp_json_doc_root(f->doc);
    meth = acp_json_obj_getz(root, "method");
    id = acp_json_obj_getz(root, "id");
    if (meth != NULL) {
      size_t ml;
      const char *mp = acp_json_str_raw(meth, &ml);
      mi = acp_method_by_name_version(ACP_PROTOCOL_V2, mp, ml);
      if (mi == NULL)
        goto next;
      t = id != NULL ? acp_method_params_desc_version(2, (int)mi->id)
                     : acp_method_notification_desc_version(2, (int)mi->id);
      v = acp_json_obj_getz(root, "params");
      is_params = true;
    } else {
      const char *m = id ? method_of(peer, id) : NULL;
      v = acp_json_obj_getz(root, "result");
      if (m == NULL || v == NULL)
        goto next;
      mi = acp_method_by_name_version(ACP_PROTOCOL_V2, m, strlen(m));
      if (mi == NULL)
        goto next;
      t = acp_method_result_desc_version(2, (int)mi->id);
    }
    if (t == NULL || v == NULL)
      goto next;
    if (mi->id == ACP_METHOD_INITIALIZE) {
      /* A v1 initialize (or its answer) is not a v2 message. */
      const acp_json_val *pv = acp_json_obj_getz(v, "protocolVersion");
      int64_t ver = 0;
      if (acp_json_get_int64(pv, &ver) != 0 || ver != 2)
        goto next;
    }
    if (is_params && id != NULL && answers != NULL) {
      char key[24];
      id_text(id, key, sizeof(key));
      if (error_code_for(f, answers, key) == -32602) {
        /* The agent refused it; the typed decoder must too, unless the
         * refusal is semantic (an unknown method id, no such tool call). */
        void *out = acp_arena_alloc(f->arena, acp_type_size(t));
        assert_int_equal(acp_json_doc_parse(f->doc, line, len, NULL), 0);
        root = acp_json_doc_root(f->doc);
        v = acp_json_obj_getz(root, "params");
        if (acp_decode_named(t, v, f->arena, out, "params", f->err,
                             sizeof(f->err)) != 0)
          n->invalid++;
        goto next;
      }
      assert_int_equal(acp_json_doc_parse(f->doc, line, len, NULL), 0);
      root = acp_json_doc_root(f->doc);
      v = acp_json_obj_getz(root, "params");
    }
    {
      char w[160];
      snprintf(w, sizeof(w), "%s: %.60s", where, line);
      round_trip(f, t, v, w);
    }
    if (is_params)
      n->params++;
    else
      n->results++;
  next:
    if (!end)
      break;
    line = end + 1;
  }
  free(copy);
}

static void test_v2_transcripts_round_trip(void **state) {
  codec_fixture *f = *state;
  DIR *d = opendir(TRANSCRIPTS);
  struct dirent *e;
  counts n = {0, 0, 0};
  int dirs = 0;

  assert_non_null(d);
  while ((e = readdir(d)) != NULL) {
    char path[512];
    char *in, *expect;
    idmap *req_in, *req_out;
    size_t nl = strlen(e->d_name);

    if (nl < 3 || strcmp(e->d_name + nl - 3, "_v2") != 0)
      continue;
    snprintf(path, sizeof(path), "%s%s/in.jsonl", TRANSCRIPTS, e->d_name);
    in = read_all(path);
    snprintf(path, sizeof(path), "%s%s/expect.jsonl", TRANSCRIPTS, e->d_name);
    expect = read_all(path);
    assert_non_null(in);
    assert_non_null(expect);
    req_in = calloc(1, sizeof(*req_in));
    req_out = calloc(1, sizeof(*req_out));
    assert_non_null(req_in);
    assert_non_null(req_out);
    collect_requests(f, in, req_in);
    collect_requests(f, expect, req_out);
    check_lines(f, in, req_out, expect, e->d_name, &n);
    check_lines(f, expect, req_in, NULL, e->d_name, &n);
    acp_arena_reset(f->arena);
    free(req_in);
    free(req_out);
    free(in);
    free(expect);
    dirs++;
  }
  closedir(d);
  print_message("v2 transcripts: %d dirs, %d params, %d results, %d refused\n",
                dirs, n.params, n.results, n.invalid);
  assert_true(dirs >= 7);
  assert_true(n.params >= 60);
  assert_true(n.results >= 20);
  /* auth_cancel_v2 and others send malformed params on purpose. */
  assert_true(n.invalid >= 2);
}

/* MARK: - Typed access */

static void test_v2_typed_prompt_and_updates(void **state) {
  codec_fixture *f = *state;
  acp_v2_prompt_response *pr;
  acp_v2_update_session_notification *u;
  acp_v2_new_session_response *ns;
  void *out;

  assert_ptr_equal(acp_method_result_desc_version(2, ACP_METHOD_SESSION_PROMPT),
                   &acp_type_v2_prompt_response);
  assert_int_equal(codec_decode_new(f, &acp_type_v2_prompt_response,
                                    "{\"messageId\":\"msg_1\"}", &out),
                   0);
  pr = out;
  assert_int_equal(pr->message_id.len, 5);
  assert_memory_equal(pr->message_id.ptr, "msg_1", 5);

  assert_int_equal(
      codec_decode_new(
          f, &acp_type_v2_update_session_notification,
          "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
          "\"state_update\",\"state\":\"idle\",\"stopReason\":\"end_turn\","
          "\"usage\":{\"totalTokens\":3,\"inputTokens\":1,"
          "\"outputTokens\":2}}}",
          &out),
      0);
  u = out;
  assert_int_equal(u->update->kind, ACP_V2_SESSION_UPDATE_KIND_STATE_UPDATE);
  assert_int_equal(u->update->state_update->kind,
                   ACP_V2_STATE_UPDATE_KIND_IDLE);
  /* stopReason is the variant's tag (the `error` variant has members). */
  assert_int_equal(u->update->state_update->idle->variant.kind,
                   ACP_V2_IDLE_STATE_UPDATE_KIND_END_TURN);
  assert_non_null(u->update->state_update->idle->usage);
  assert_int_equal(u->update->state_update->idle->usage->total_tokens, 3);

  assert_int_equal(
      codec_decode_new(f, &acp_type_v2_update_session_notification,
                       "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
                       "\"state_update\",\"state\":\"running\"}}",
                       &out),
      0);
  u = out;
  assert_int_equal(u->update->state_update->kind,
                   ACP_V2_STATE_UPDATE_KIND_RUNNING);

  assert_int_equal(
      codec_decode_new(
          f, &acp_type_v2_update_session_notification,
          "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
          "\"agent_message_chunk\",\"messageId\":\"m2\",\"content\":"
          "{\"type\":\"text\",\"text\":\"hi\"}}}",
          &out),
      0);
  u = out;
  assert_int_equal(u->update->kind,
                   ACP_V2_SESSION_UPDATE_KIND_AGENT_MESSAGE_CHUNK);
  assert_memory_equal(u->update->agent_message_chunk->message_id.ptr, "m2", 2);
  assert_int_equal(u->update->agent_message_chunk->content->kind,
                   ACP_V2_CONTENT_BLOCK_KIND_TEXT);

  assert_int_equal(
      codec_decode_new(f, &acp_type_v2_update_session_notification,
                       "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
                       "\"user_message\",\"messageId\":\"m1\",\"content\":"
                       "[{\"type\":\"text\",\"text\":\"hi\"}]}}",
                       &out),
      0);
  u = out;
  assert_int_equal(u->update->kind, ACP_V2_SESSION_UPDATE_KIND_USER_MESSAGE);
  assert_memory_equal(u->update->user_message->message_id.ptr, "m1", 2);
  assert_int_equal(u->update->user_message->content_count, 1);

  assert_ptr_equal(acp_method_result_desc_version(2, ACP_METHOD_SESSION_NEW),
                   &acp_type_v2_new_session_response);
  assert_int_equal(
      codec_decode_new(f, &acp_type_v2_new_session_response,
                       "{\"sessionId\":\"s1\",\"availableCommands\":[{\"type\":"
                       "\"command\",\"name\":\"x\",\"description\":\"d\"}]}",
                       &out),
      0);
  ns = out;
  assert_memory_equal(ns->session_id.ptr, "s1", 2);
  assert_int_equal(ns->available_commands_count, 1);
}

static void test_v2_typed_cancel_and_auth(void **state) {
  codec_fixture *f = *state;
  acp_v2_cancel_tool_call_request *tc;
  acp_v2_cancel_terminal_request *tm;
  acp_v2_login_auth_request *li;
  void *out;

  assert_ptr_equal(
      acp_method_params_desc_version(2, ACP_METHOD_TOOL_CALL_CANCEL),
      &acp_type_v2_cancel_tool_call_request);
  assert_ptr_equal(
      acp_method_params_desc_version(2, ACP_METHOD_TERMINAL_CANCEL),
      &acp_type_v2_cancel_terminal_request);
  assert_ptr_equal(acp_method_params_desc_version(2, ACP_METHOD_AUTH_LOGIN),
                   &acp_type_v2_login_auth_request);
  assert_ptr_equal(acp_method_params_desc_version(2, ACP_METHOD_AUTH_LOGOUT),
                   &acp_type_v2_logout_auth_request);
  assert_ptr_equal(acp_method_result_desc_version(2, ACP_METHOD_AUTH_LOGOUT),
                   &acp_type_v2_logout_auth_response);

  assert_int_equal(
      codec_decode_new(f, &acp_type_v2_cancel_tool_call_request,
                       "{\"sessionId\":\"s\",\"toolCallId\":\"t1\"}", &out),
      0);
  tc = out;
  assert_memory_equal(tc->tool_call_id.ptr, "t1", 2);
  assert_int_equal(
      codec_decode_new(f, &acp_type_v2_cancel_terminal_request,
                       "{\"sessionId\":\"s\",\"terminalId\":\"term\"}", &out),
      0);
  tm = out;
  assert_memory_equal(tm->terminal_id.ptr, "term", 4);
  assert_int_equal(codec_decode_new(f, &acp_type_v2_login_auth_request,
                                    "{\"methodId\":\"k\"}", &out),
                   0);
  li = out;
  assert_memory_equal(li->method_id.ptr, "k", 1);
  assert_int_equal(
      codec_decode_new(f, &acp_type_v2_logout_auth_request, "{}", &out), 0);
}

/* MARK: - Errors */

static void expect_error(codec_fixture *f, const acp_type_desc *t,
                         const char *json, const char *want) {
  void *out;
  assert_int_equal(codec_decode_new(f, t, json, &out), ACP_ERR_PARSE);
  if (strcmp(f->err, want) != 0)
    fail_msg("%s: got \"%s\", want \"%s\"", json, f->err, want);
}

static void test_v2_malformed_names_the_member(void **state) {
  codec_fixture *f = *state;

  expect_error(f, &acp_type_v2_cancel_tool_call_request,
               "{\"sessionId\":\"s\"}",
               "params.toolCallId: missing required member");
  expect_error(f, &acp_type_v2_cancel_tool_call_request,
               "{\"sessionId\":\"s\",\"toolCallId\":5}",
               "params.toolCallId: expected string");
  expect_error(f, &acp_type_v2_cancel_terminal_request,
               "{\"terminalId\":\"t\"}",
               "params.sessionId: missing required member");
  expect_error(f, &acp_type_v2_login_auth_request, "{\"methodId\":[]}",
               "params.methodId: expected string");
  expect_error(f, &acp_type_v2_prompt_response, "{}",
               "params.messageId: missing required member");
  expect_error(f, &acp_type_v2_update_session_notification,
               "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
               "\"agent_message_chunk\",\"content\":{\"type\":\"text\","
               "\"text\":\"x\"}}}",
               "params.update.messageId: missing required member");
  expect_error(f, &acp_type_v2_update_session_notification,
               "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
               "\"state_update\",\"state\":\"idle\",\"stopReason\":7}}",
               "params.update.stopReason: expected string");
  expect_error(f, &acp_type_v2_new_session_response, "{\"sessionId\":5}",
               "params.sessionId: expected string");
  expect_error(f, &acp_type_v2_cancel_tool_call_request, "[]",
               "params: expected object");
}

/* MARK: - Lookup */

static void test_v2_lookup(void **state) {
  (void)state;
  assert_ptr_equal(acp_type_by_name_version(2, "PromptResponse"),
                   &acp_type_v2_prompt_response);
  assert_ptr_equal(acp_type_by_name_version(1, "PromptResponse"),
                   &acp_type_prompt_response);
  assert_ptr_equal(acp_type_by_name_version(2, "CancelToolCallRequest"),
                   &acp_type_v2_cancel_tool_call_request);
  /* A type v2 shares with v1 is the v1 one. */
  assert_ptr_equal(acp_type_by_name_version(2, "PlanRemoved"),
                   &acp_type_plan_removed);
  assert_null(acp_type_by_name_version(1, "CancelToolCallRequest"));
  assert_null(acp_type_by_name_version(3, "PromptResponse"));
  assert_null(acp_type_by_name_version(2, NULL));
  assert_null(acp_type_by_name_version(2, "NoSuchType"));
  /* session/load is v1 only. */
  assert_null(acp_method_params_desc_version(2, ACP_METHOD_SESSION_LOAD));
  assert_ptr_equal(acp_method_params_desc_version(1, ACP_METHOD_SESSION_LOAD),
                   acp_method_params_desc(ACP_METHOD_SESSION_LOAD));
  assert_null(acp_method_params_desc_version(2, 0));
  assert_null(acp_method_params_desc_version(2, ACP_METHOD__COUNT));
  assert_null(acp_method_result_desc_version(7, ACP_METHOD_SESSION_NEW));
  assert_null(acp_method_notification_desc_version(2, -1));
  assert_ptr_equal(
      acp_method_notification_desc_version(2, ACP_METHOD_SESSION_UPDATE),
      &acp_type_v2_update_session_notification);
}

/* MARK: - Allocation failure */

/* Decode a v2 state_update and a chunk (escaped strings force arena
 * copies) and encode them back. */
static int scenario(failmem *fm) {
  acp_mem mem = failmem_mem(fm);
  static const char *const json[] = {
      "{\"sessionId\":\"s\\n\",\"update\":{\"sessionUpdate\":\"state_update\","
      "\"state\":\"idle\",\"stopReason\":\"end\\u005fturn\",\"usage\":"
      "{\"totalTokens\":3,\"inputTokens\":1,\"outputTokens\":2},"
      "\"x\\u0041\":1}}",
      "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
      "\"agent_message_chunk\",\"messageId\":\"m\\t\",\"content\":"
      "{\"type\":\"text\",\"text\":\"\\u00e9\"}},\"_meta\":{\"k\":1}}",
  };
  static const char *const want[] = {
      "{\"sessionId\":\"s\\n\",\"update\":{\"sessionUpdate\":\"state_update\","
      "\"state\":\"idle\",\"usage\":{\"totalTokens\":3,\"inputTokens\":1,"
      "\"outputTokens\":2},\"stopReason\":\"end_turn\",\"xA\":1}}",
      "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
      "\"agent_message_chunk\",\"messageId\":\"m\\t\",\"content\":"
      "{\"type\":\"text\",\"text\":\"\xc3\xa9\"}},\"_meta\":{\"k\":1}}",
  };
  acp_json_doc *doc = NULL;
  acp_arena *arena = NULL;
  acp_json_writer *w = NULL;
  acp_v2_update_session_notification n;
  size_t i;
  int rv;

  rv = acp_json_doc_new(&doc, &mem);
  if (rv == 0)
    rv = acp_arena_new(&arena, &mem);
  if (rv == 0)
    rv = acp_json_writer_new(&w, 0, &mem);
  for (i = 0; i < 2 && rv == 0; i++) {
    size_t k;
    rv = acp_json_doc_parse(doc, json[i], strlen(json[i]), NULL);
    for (k = 0; k < 3 && rv == 0; k++)
      if (acp_arena_alloc(arena, 3000) == NULL)
        rv = ACP_ERR_NOMEM;
    if (rv == 0)
      rv = acp_decode(&acp_type_v2_update_session_notification,
                      acp_json_doc_root(doc), arena, &n, NULL, 0);
    if (rv == 0) {
      acp_json_writer_reset(w);
      rv = acp_encode(&acp_type_v2_update_session_notification, &n, w);
    }
    if (rv == 0) {
      size_t len;
      const char *p = acp_json_writer_data(w, &len);
      if (len != strlen(want[i]) || memcmp(p, want[i], len) != 0)
        fail_msg("got %.*s", (int)len, p);
    }
    acp_arena_reset(arena);
  }
  acp_json_writer_free(w);
  acp_arena_free(arena);
  acp_json_doc_free(doc);
  return rv;
}

static void test_v2_allocation_failure_leaks_nothing(void **state) {
  (void)state;
  (void)codec_nomem_sweep(scenario, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_v2_transcripts_round_trip,
                                      codec_setup, codec_teardown),
      cmocka_unit_test_setup_teardown(test_v2_typed_prompt_and_updates,
                                      codec_setup, codec_teardown),
      cmocka_unit_test_setup_teardown(test_v2_typed_cancel_and_auth,
                                      codec_setup, codec_teardown),
      cmocka_unit_test_setup_teardown(test_v2_malformed_names_the_member,
                                      codec_setup, codec_teardown),
      cmocka_unit_test(test_v2_lookup),
      cmocka_unit_test(test_v2_allocation_failure_leaks_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
