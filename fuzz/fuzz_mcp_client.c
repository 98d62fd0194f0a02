/*
 * Fuzz target: the MCP client (src/mcp/mcp_client.c) against a server that
 * says anything: answers of any shape to its requests (interim
 * input_required results, pages, tool lists with x-mcp-header schemas,
 * task results), requests and notifications of its own, at any time.
 *
 * Input layout: byte 0 picks the handshake (bits 0-1: stateful
 * initialize, auto (server/discover, then initialize as the server
 * answers), stateless 2026-07-28, none), bit 2 request timeouts, bit 3
 * that the server's requests are answered later rather than in their
 * callback, bit 4 the tasks extension. The rest is split at '\n'; the
 * first byte of each piece picks the step (as libgit2's fuzzers use
 * data[0]), b % 8:
 *   0 the rest is a line from the server, as it is;
 *   1 the rest is the result of the client's newest request;
 *   2 the rest is the error object of the client's newest request;
 *   3 a client request, picked by the next byte, the rest its argument;
 *   4 answer the oldest server request held (result: the rest; or an
 *     error when the next byte is odd);
 *   5 cancel the newest request, or (next byte odd) let b * 100 ms pass
 *     and expire what is due;
 *   6 the headers a tools/call with the rest as params would carry;
 *   7 clear the list cache, or declare the roots changed.
 * At the end the input closes (every pending request completes), the held
 * requests are answered, and the client is freed. Every line the client
 * sends must be one valid JSON object (or, answering a batch, an array of
 * them); results are read through.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/mcp.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HELD_MAX 8

static struct {
  acp_mcp_client *c;
  acp_json_doc *doc; /* for the client's lines */
  uint64_t now;
  int64_t newest; /* id of the newest request the client sent, or -1 */
  acp_mcp_client_request *held[HELD_MAX];
  unsigned nheld;
  bool hold;
  bool answer_tasks;
  volatile size_t sink;
} F;

static void touch(const acp_json_val *v) {
  size_t n = 0;
  const char *raw = acp_json_raw(v, &n);
  size_t sum = 0;

  for (size_t i = 0; raw != NULL && i < n; i++)
    sum += (unsigned char)raw[i];
  F.sink += sum;
}

/* One line the client sent: an object (or, answering a batch, an array
 * of them); the id of its last request is kept for steps 1, 2 and 5. */
static void client_line(const acp_json_val *root, void *ud) {
  int64_t id;

  (void)ud;
  if (acp_json_type_of(root) == ACP_JSON_ARRAY) {
    for (const acp_json_val *e = acp_json_child(root); e != NULL;
         e = acp_json_next(e))
      CHECK(acp_json_type_of(e) == ACP_JSON_OBJECT);
    return;
  }
  CHECK(acp_json_type_of(root) == ACP_JSON_OBJECT);
  if (acp_json_obj_getz(root, "method") != NULL &&
      acp_json_get_int64(acp_json_obj_getz(root, "id"), &id) == 0)
    F.newest = id;
}

/* Everything the client has to send. */
static void drain(void) {
  const char *d;
  acp_ssize n;

  while ((n = acp_mcp_client_send(F.c, &d)) > 0)
    fuzz_check_lines(d, (size_t)n, F.doc, client_line, NULL);
  CHECK(n == 0);
}

static int on_result(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                     void *ud) {
  (void)ud;
  /* The header's promise: status 0 comes with the result. */
  CHECK(status != 0 || (msg != NULL && msg->result != NULL));
  if (msg != NULL) {
    touch(msg->result);
    touch(msg->error);
  }
  /* A task's input, answered from its own result (most are refused). */
  if (status == 0 && F.answer_tasks && msg != NULL)
    (void)acp_mcp_client_task_answer(c, "t1", msg, F.now, on_result, NULL);
  return 0;
}

static int on_page(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                   bool last, void *ud) {
  (void)last;
  return on_result(c, status, status == 0 ? msg : NULL, ud);
}

static int on_progress(acp_mcp_client *c, double progress, double total,
                       const char *message, size_t message_len, void *ud) {
  (void)c;
  (void)ud;
  F.sink += (size_t)(progress > total) + message_len;
  for (size_t i = 0; message != NULL && i < message_len; i++)
    F.sink += (unsigned char)message[i];
  return 0;
}

/* The server's requests: answered at once, or held for step 4. */
static int on_request(acp_mcp_client *c, acp_mcp_client_request *req,
                      const acp_json_val *params, void *ud) {
  const char *m = acp_mcp_client_request_method(req);
  (void)ud;
  touch(params);
  CHECK(m != NULL);
  if (F.hold && F.nheld < HELD_MAX) {
    F.held[F.nheld++] = req;
    return 0;
  }
  if (strcmp(m, "roots/list") == 0)
    return acp_mcp_client_respond(c, req, "{\"roots\":[]}", 12);
  if (strcmp(m, "elicitation/create") == 0)
    return acp_mcp_client_respond(c, req, "{\"action\":\"decline\"}", 20);
  return acp_mcp_client_respond_error(c, req, -1, "no");
}

static int on_cancelled(acp_mcp_client *c, acp_mcp_client_request *req,
                        const acp_json_val *params, void *ud) {
  (void)c;
  (void)ud;
  touch(params);
  F.sink += acp_mcp_client_request_is_cancelled(req) != 0;
  return 0;
}

static int on_log(acp_mcp_client *c, acp_mcp_log_level level,
                  const char *logger, size_t logger_len, const acp_json_val *d,
                  void *ud) {
  (void)c;
  (void)ud;
  F.sink += (size_t)level + logger_len + (logger != NULL);
  touch(d);
  return 0;
}

static int on_changed(acp_mcp_client *c, acp_mcp_list which, void *ud) {
  (void)c;
  (void)ud;
  F.sink += (size_t)which;
  return 0;
}

static int on_updated(acp_mcp_client *c, const char *uri, size_t len,
                      void *ud) {
  (void)c;
  (void)ud;
  for (size_t i = 0; i < len; i++)
    F.sink += (unsigned char)uri[i];
  return 0;
}

static int on_note(acp_mcp_client *c, const acp_rpc_msg *msg, void *ud) {
  (void)c;
  (void)ud;
  touch(msg->params);
  return 0;
}

static int on_elicit_done(acp_mcp_client *c, const char *id, size_t len,
                          void *ud) {
  (void)c;
  (void)ud;
  for (size_t i = 0; i < len; i++)
    F.sink += (unsigned char)id[i];
  return 0;
}

/* A string argument from the rest of a piece (NUL-terminated copy). */
static char *arg_str(const uint8_t *p, size_t n) {
  char *s = malloc(n + 1);
  if (s == NULL)
    abort();
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

/* Step 3: one of the client's requests. */
static void client_request(uint8_t which, const uint8_t *p, size_t n) {
  acp_mcp_request_opts o = ACP_MCP_REQUEST_OPTS_INIT;
  const acp_mcp_request_opts *opts = (which & 0x80) ? &o : NULL;
  char *s = arg_str(p, n);
  /* Raw JSON arguments are the caller's to get right (spliced unchecked,
   * as the headers say): only valid ones are passed. */
  bool valid = n > 0 && acp_json_validate(s, n, NULL) == 0;
  const char *json = valid ? s : NULL;

  o.on_progress = on_progress;
  o.timeout_ms = (which & 0x40) ? 50 : 0;
  switch ((which & 0x3f) % 16) {
  case 0:
    (void)acp_mcp_client_list(F.c, (acp_mcp_list)(which % 4), n > 0 ? s : NULL,
                              opts, F.now, on_result, NULL, NULL);
    break;
  case 1:
    (void)acp_mcp_client_list_all(F.c, (acp_mcp_list)(which % 4), opts, F.now,
                                  on_page, NULL);
    break;
  case 2:
    (void)acp_mcp_client_call_tool(F.c, "tool", json, valid ? n : 0, opts,
                                   F.now, on_result, NULL, NULL);
    break;
  case 3:
    (void)acp_mcp_client_call_tool_task(F.c, "tool", json, valid ? n : 0, 1000,
                                        opts, F.now, on_result, NULL, NULL);
    break;
  case 4:
    (void)acp_mcp_client_read_resource(F.c, s, opts, F.now, on_result, NULL,
                                       NULL);
    break;
  case 5:
    (void)acp_mcp_client_get_prompt(F.c, "p", json, valid ? n : 0, opts, F.now,
                                    on_result, NULL, NULL);
    break;
  case 6:
    (void)acp_mcp_client_complete(F.c,
                                  "{\"type\":\"ref/prompt\",\"name\":\"p\"}",
                                  "a", s, NULL, F.now, on_result, NULL);
    break;
  case 7:
    (void)acp_mcp_client_ping(F.c, F.now, on_result, NULL);
    break;
  case 8:
    (void)acp_mcp_client_subscribe(F.c, s, F.now, on_result, NULL);
    break;
  case 9:
    (void)acp_mcp_client_unsubscribe(F.c, s, F.now, on_result, NULL);
    break;
  case 10:
    (void)acp_mcp_client_set_log_level(F.c, (acp_mcp_log_level)(which % 8),
                                       F.now, on_result, NULL);
    break;
  case 11:
    (void)acp_mcp_client_task_get(F.c, s, F.now, on_result, NULL);
    break;
  case 12:
    (void)acp_mcp_client_task_cancel(F.c, s, F.now, on_result, NULL);
    break;
  case 13:
    (void)acp_mcp_client_task_result(F.c, s, F.now, on_result, NULL);
    break;
  case 14:
    (void)acp_mcp_client_task_update(F.c, "t1", s, n, F.now, on_result, NULL);
    break;
  default:
    (void)acp_mcp_client_send_request(F.c, "x/y", json, valid ? n : 0, opts,
                                      F.now, on_result, NULL, NULL);
    break;
  }
  free(s);
}

/* Step 4: the oldest held server request, answered. */
static void answer_held(bool error, const uint8_t *p, size_t n) {
  acp_mcp_client_request *req;

  if (F.nheld == 0)
    return;
  req = F.held[0];
  memmove(F.held, F.held + 1, (F.nheld - 1) * sizeof(F.held[0]));
  F.nheld--;
  /* A result must be one valid JSON object (not checked, as documented). */
  if (error || n == 0 || p[0] != '{' ||
      acp_json_validate((const char *)p, n, NULL) != 0)
    (void)acp_mcp_client_respond_error(F.c, req, -32000, "refused");
  else
    (void)acp_mcp_client_respond(F.c, req, (const char *)p, n);
}

/* A line from the server (its line feed added), given at once. */
static int server_bytes(const char *d, size_t k, void *ud) {
  (void)ud;
  (void)acp_mcp_client_recv(F.c, d, k, F.now);
  return 0;
}

static void feed_line(const uint8_t *line, size_t n) {
  fuzz_feed_line(line, n, 0, server_bytes, NULL);
}

static void answer_newest(bool error, const uint8_t *p, size_t n) {
  static const char a[] = "{\"jsonrpc\":\"2.0\",\"id\":";
  char head[64];
  size_t hl;
  uint8_t *line;

  if (F.newest < 0)
    return;
  hl = (size_t)snprintf(head, sizeof(head), "%s%lld,\"%s\":", a,
                        (long long)F.newest, error ? "error" : "result");
  line = malloc(hl + n + 1);
  CHECK(line != NULL);
  memcpy(line, head, hl);
  memcpy(line + hl, p, n);
  line[hl + n] = '}';
  feed_line(line, hl + n + 1);
  free(line);
}

/* A header must be a token name and a value with no line break. */
static int on_header(const char *name, size_t nl, const char *value, size_t vl,
                     void *ud) {
  (void)ud;
  CHECK(nl > 0 && memchr(name, '\n', nl) == NULL &&
        memchr(name, '\r', nl) == NULL && memchr(value, '\n', vl) == NULL &&
        memchr(value, '\r', vl) == NULL);
  return 0;
}

static void headers(const uint8_t *p, size_t n) {
  acp_json_doc *doc = NULL;

  if (acp_json_doc_new(&doc, NULL) != 0)
    abort();
  if (acp_json_doc_parse(doc, (const char *)p, n, NULL) == 0)
    (void)acp_mcp_client_param_headers(F.c, doc, acp_json_doc_root(doc),
                                       on_header, NULL);
  acp_json_doc_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  acp_mcp_client_callbacks *cbs = NULL;
  fuzz_pieces it;
  uint8_t step;
  const uint8_t *rest;
  size_t rn;
  uint8_t opt;

  if (size < 1)
    return 0;
  memset(&F, 0, sizeof(F));
  F.now = 1000;
  F.newest = -1;
  opt = data[0];
  F.hold = (opt & 8) != 0;
  F.answer_tasks = (opt & 32) != 0;
  if (acp_mcp_client_callbacks_new(&cbs) != 0 ||
      acp_json_doc_new(&F.doc, NULL) != 0)
    abort();
  acp_mcp_client_callbacks_set_on_roots_list(cbs, on_request);
  acp_mcp_client_callbacks_set_on_sampling(cbs, on_request);
  acp_mcp_client_callbacks_set_on_elicitation(cbs, on_request);
  acp_mcp_client_callbacks_set_elicitation_modes(cbs, ACP_MCP_ELICIT_FORM |
                                                          ACP_MCP_ELICIT_URL);
  acp_mcp_client_callbacks_set_on_request_cancelled(cbs, on_cancelled);
  acp_mcp_client_callbacks_set_on_log(cbs, on_log);
  acp_mcp_client_callbacks_set_on_list_changed(cbs, on_changed);
  acp_mcp_client_callbacks_set_on_resource_updated(cbs, on_updated);
  acp_mcp_client_callbacks_set_on_notification(cbs, on_note);
  acp_mcp_client_callbacks_set_on_elicitation_complete(cbs, on_elicit_done);
  if (acp_mcp_client_new(&F.c, cbs, "fuzz", "1", NULL, NULL) != 0)
    abort();
  acp_mcp_client_callbacks_free(cbs);
  if (opt & 4)
    acp_mcp_client_set_timeouts(F.c, 100, 1000);
  if (opt & 16)
    (void)acp_mcp_client_set_tasks(F.c, 1);
  switch (opt & 3) {
  case 0:
    (void)acp_mcp_client_initialize(F.c, F.now, on_result, NULL);
    break;
  case 1:
    (void)acp_mcp_client_set_protocol(F.c, NULL);
    (void)acp_mcp_client_initialize(F.c, F.now, on_result, NULL);
    break;
  case 2:
    (void)acp_mcp_client_set_protocol(F.c, "2026-07-28");
    (void)acp_mcp_client_initialize(F.c, F.now, on_result, NULL);
    break;
  default:
    break;
  }
  drain();

  it.p = data + 1;
  it.end = data + size;
  while (fuzz_next_piece(&it, &step, &rest, &rn)) {
    uint8_t b1 = rn > 0 ? rest[0] : 0;

    switch (step % 8) {
    case 0:
      feed_line(rest, rn);
      break;
    case 1:
    case 2:
      answer_newest(step % 8 == 2, rest, rn);
      break;
    case 3:
      if (rn > 0)
        client_request(b1, rest + 1, rn - 1);
      break;
    case 4:
      answer_held((b1 & 1) != 0, rn > 0 ? rest + 1 : rest, rn > 0 ? rn - 1 : 0);
      break;
    case 5:
      if (b1 & 1) {
        F.now += (uint64_t)b1 * 100;
        (void)acp_mcp_client_handle_expiry(F.c, F.now);
      } else if (F.newest >= 0) {
        (void)acp_mcp_client_cancel(F.c, F.newest, (b1 & 2) ? "why" : NULL,
                                    F.now);
      }
      break;
    case 6:
      headers(rest, rn);
      break;
    default:
      if (b1 & 1)
        acp_mcp_client_cache_clear(F.c);
      else
        (void)acp_mcp_client_roots_changed(F.c);
      break;
    }
    drain();
  }

  (void)acp_mcp_client_recv_eof(F.c, F.now);
  drain();
  while (F.nheld > 0)
    answer_held(false, (const uint8_t *)"{}", 2);
  drain();
  acp_mcp_client_free(F.c);
  acp_json_doc_free(F.doc);
  return 0;
}
