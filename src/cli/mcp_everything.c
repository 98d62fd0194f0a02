/*
 * The "everything" fixture set (see mcp_everything.h).
 */
#include "mcp_everything.h"

#include "acp/http.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A 1x1 red PNG and a tiny 8 kHz mono 8-bit WAV (8 samples of silence). */
#define EV_PNG_B64                                                             \
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mP4z8AAAAMBAQD3A0" \
  "FDAAAAAElFTkSuQmCC"
#define EV_WAV_B64                                                             \
  "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="

#define EV_IMAGE                                                               \
  "{\"type\":\"image\",\"data\":\"" EV_PNG_B64 "\",\"mimeType\":\"image/"      \
  "png\"}"

/* MARK: - Helpers */

void mcp_write_user_text(acp_json_writer *w, const char *text, size_t len) {
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "role");
  acp_json_write_strz(w, "user");
  acp_json_write_keyz(w, "content");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "type");
  acp_json_write_strz(w, "text");
  acp_json_write_keyz(w, "text");
  acp_json_write_str(w, text, len);
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
}

/* Decoded string member `key` of `obj` (valid during a handler): 0, or
 * ACP_ERR_NOT_FOUND when it is missing or not a string. */
static int arg_str(acp_json_doc *doc, const acp_json_val *obj, const char *key,
                   const char **s, size_t *n) {
  const acp_json_val *v = acp_json_obj_getz(obj, key);

  if (acp_json_type_of(v) != ACP_JSON_STRING)
    return ACP_ERR_NOT_FOUND;
  return acp_json_doc_str(doc, v, s, n);
}

/* The string argument `key` of a tool call: 0 with *s set; or, when it is
 * missing or not a string, answer the tool error "<key> must be a string",
 * set *s to NULL and return what answering returned; or a negative error. */
static int tool_str_arg(acp_mcp_call *call, const acp_json_val *args,
                        const char *key, const char **s, size_t *n) {
  int rv = arg_str(acp_mcp_call_doc(call), args, key, s, n);
  char msg[64];
  int k;

  if (rv != ACP_ERR_NOT_FOUND)
    return rv;
  *s = NULL;
  k = snprintf(msg, sizeof(msg), "%s must be a string", key);
  return acp_mcp_call_respond_text(call, msg, (size_t)k, true);
}

/* Close a {"messages":[...]} prompt result begun by messages_begin(),
 * answer the call with it and free `w`. */
static int respond_messages(acp_mcp_call *call, acp_json_writer *w) {
  const char *p;
  size_t n;
  int rv;

  acp_json_write_arr_end(w);
  rv = acp_json_write_obj_end(w);
  if (rv == 0) {
    p = acp_json_writer_data(w, &n);
    rv = acp_mcp_call_respond_raw(call, p, n);
  }
  acp_json_writer_free(w);
  return rv;
}

/* A new writer holding `{"messages":[`. */
static int messages_begin(acp_json_writer **w) {
  int rv = acp_json_writer_new(w, 0, NULL);

  if (rv != 0)
    return rv;
  acp_json_write_obj_begin(*w);
  acp_json_write_keyz(*w, "messages");
  acp_json_write_arr_begin(*w);
  return 0;
}

/* One part of a text built by respond_parts(). */
typedef struct ev_part {
  const char *p;
  size_t n;
} ev_part;

/* The concatenation of `parts` (malloc'd, not NUL-terminated; its length in
 * *len), or NULL when out of memory. */
static char *join_parts(const ev_part *parts, size_t nparts, size_t *len) {
  size_t i, total = 0, at = 0;
  char *buf;

  for (i = 0; i < nparts; i++)
    total += parts[i].n;
  buf = malloc(total ? total : 1);
  if (buf == NULL)
    return NULL;
  for (i = 0; i < nparts; i++) {
    if (parts[i].n)
      memcpy(buf + at, parts[i].p, parts[i].n);
    at += parts[i].n;
  }
  *len = total;
  return buf;
}

/* Answer a tool call with one text block, the concatenation of `parts`. */
static int respond_parts(acp_mcp_call *call, const ev_part *parts,
                         size_t nparts, bool is_error) {
  acp_json_writer *w = NULL;
  const char *p;
  size_t n, total;
  char *buf = join_parts(parts, nparts, &total);
  int rv;

  if (buf == NULL)
    return ACP_ERR_NOMEM;
  rv = acp_json_writer_new(&w, 0, NULL);
  if (rv != 0) {
    free(buf);
    return rv;
  }
  acp_json_write_arr_begin(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "type");
  acp_json_write_strz(w, "text");
  acp_json_write_keyz(w, "text");
  acp_json_write_str(w, buf, total);
  acp_json_write_obj_end(w);
  rv = acp_json_write_arr_end(w);
  free(buf);
  if (rv == 0) {
    p = acp_json_writer_data(w, &n);
    rv = acp_mcp_call_respond_tool(call, p, n, NULL, 0, is_error);
  }
  acp_json_writer_free(w);
  return rv;
}

/* Text result "<a><b>". */
static int respond_text2(acp_mcp_call *call, const char *a, size_t an,
                         const char *b, size_t bn) {
  ev_part parts[2];

  parts[0].p = a;
  parts[0].n = an;
  parts[1].p = b;
  parts[1].n = bn;
  return respond_parts(call, parts, 2, false);
}

static int respond_textz(acp_mcp_call *call, const char *text) {
  return acp_mcp_call_respond_text(call, text, strlen(text), false);
}

static int respond_static(acp_mcp_call *call, const char *content) {
  return acp_mcp_call_respond_tool(call, content, strlen(content), NULL, 0,
                                   false);
}

/* MARK: - Tools with fixed results */

static int tool_simple_text(acp_mcp_call *call, const acp_json_val *args,
                            void *ud) {
  (void)args;
  (void)ud;
  return respond_textz(call, "This is a simple text response for testing.");
}

static int tool_image(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  (void)args;
  (void)ud;
  return respond_static(call, "[" EV_IMAGE "]");
}

static int tool_audio(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  (void)args;
  (void)ud;
  return respond_static(call, "[{\"type\":\"audio\",\"data\":\"" EV_WAV_B64
                              "\",\"mimeType\":\"audio/wav\"}]");
}

static int tool_embedded(acp_mcp_call *call, const acp_json_val *args,
                         void *ud) {
  (void)args;
  (void)ud;
  return respond_static(
      call, "[{\"type\":\"resource\",\"resource\":{\"uri\":\"test://"
            "embedded-resource\",\"mimeType\":\"text/plain\",\"text\":\"This "
            "is an embedded resource content.\"}}]");
}

static int tool_mixed(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  (void)args;
  (void)ud;
  return respond_static(
      call,
      "[{\"type\":\"text\",\"text\":\"Multiple content types test:\"}," EV_IMAGE
      ",{\"type\":\"resource\",\"resource\":{\"uri\":\"test://"
      "mixed-content-resource\",\"mimeType\":\"application/json\",\"text\":"
      "\"{\\\"test\\\":\\\"data\\\",\\\"value\\\":123}\"}}]");
}

static int tool_error(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  static const char msg[] =
      "This tool intentionally returns an error for testing";
  (void)args;
  (void)ud;
  return acp_mcp_call_respond_text(call, msg, sizeof(msg) - 1, true);
}

/* SEP-1699 polling: close the HTTP connection carrying the call's SSE
 * stream (when the transport can), then answer; the answer waits in the
 * stream and reaches the client when it reconnects with Last-Event-ID. */
static int tool_reconnection(acp_mcp_call *call, const acp_json_val *args,
                             void *ud) {
  mcp_everything_close_stream_fn close_stream =
      (mcp_everything_close_stream_fn)(uintptr_t)ud;

  (void)args;
  if (close_stream != NULL)
    (void)close_stream(call); /* not an HTTP conn: answer on the stream */
  return respond_textz(call, "Reconnection test completed successfully");
}

static int tool_json_schema(acp_mcp_call *call, const acp_json_val *args,
                            void *ud) {
  const char *raw;
  size_t n;

  (void)ud;
  raw = acp_json_raw(args, &n);
  if (raw == NULL) {
    raw = "{}";
    n = 2;
  }
  return respond_text2(call, "JSON Schema 2020-12 tool called with: ", 38, raw,
                       n);
}

static int tool_echo(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  const char *p;
  size_t n;
  int rv;

  (void)ud;
  rv = tool_str_arg(call, args, "message", &p, &n);
  if (rv != 0 || p == NULL)
    return rv;
  return respond_text2(call, "Echo: ", 6, p, n);
}

/* MARK: - Logging and progress */

/*
 * Paced tools: each step sends one notification, then the tool pings the
 * client and takes the next step when the pong arrives; the answer follows
 * the last pong. A sans-I/O stand-in for the scenarios' "~50 ms between
 * messages": every notification reaches the client in its own read, before
 * the answer. (The TypeScript SDK dispatches notifications a microtask
 * later than responses: progress that arrives in the same chunk as the
 * answer is dropped as "unknown token".) Any ping outcome (pong, error)
 * moves on; a cancelled call is released at once. The ping has no timeout:
 * every MCP client answers ping, and one that does not can still cancel
 * the call.
 */

typedef struct ev_paced {
  int nsteps;
  int (*step)(acp_mcp_call *call, int i);
  const char *done;
} ev_paced;

static int on_paced_pong(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                         void *ud);

static int paced_run(acp_mcp_call *call, const ev_paced *p) {
  for (;;) {
    intptr_t i = (intptr_t)acp_mcp_call_get_user_data(call);
    int rv;

    if (i >= p->nsteps || acp_mcp_call_is_cancelled(call))
      return respond_textz(call, p->done);
    rv = p->step(call, (int)i);
    if (rv != 0)
      return rv;
    acp_mcp_call_set_user_data(call, (void *)(i + 1));
    rv = acp_mcp_call_request(call, "ping", NULL, 0, 0, on_paced_pong,
                              (void *)(uintptr_t)p);
    if (rv == 0)
      return 0;
    if (rv == ACP_ERR_NOMEM)
      return rv;
    /* Could not ping (e.g. the call was cancelled): go on unpaced. */
  }
}

static int on_paced_pong(acp_mcp_call *call, int status, const acp_rpc_msg *msg,
                         void *ud) {
  (void)status;
  (void)msg;
  return paced_run(call, (const ev_paced *)(uintptr_t)ud);
}

static int log_step(acp_mcp_call *call, int i) {
  static const char *const msgs[] = {"\"Tool execution started\"",
                                     "\"Tool processing data\"",
                                     "\"Tool execution completed\""};
  return acp_mcp_call_log(call, ACP_MCP_LOG_INFO, "test_tool_with_logging",
                          msgs[i], strlen(msgs[i]));
}

static const ev_paced ev_logging = {3, log_step,
                                    "Tool with logging executed successfully"};

static int tool_logging(acp_mcp_call *call, const acp_json_val *args,
                        void *ud) {
  (void)args;
  (void)ud;
  acp_mcp_call_set_user_data(call, (void *)0);
  return paced_run(call, &ev_logging);
}

static int progress_step(acp_mcp_call *call, int i) {
  return acp_mcp_call_progress(call, 50.0 * i, 100, NULL);
}

static const ev_paced ev_progress = {
    3, progress_step, "Tool with progress executed successfully"};

static int tool_progress(acp_mcp_call *call, const acp_json_val *args,
                         void *ud) {
  (void)args;
  (void)ud;
  if (!acp_mcp_call_has_progress_token(call))
    return respond_textz(call, ev_progress.done);
  acp_mcp_call_set_user_data(call, (void *)0);
  return paced_run(call, &ev_progress);
}

/* MARK: - Sampling and elicitation */

/* Answer with the tool error that snprintf() wrote into buf[size],
 * returning n (cut to what fits). */
static int respond_error_buf(acp_mcp_call *call, const char *buf, size_t size,
                             int n) {
  if (n < 0)
    n = 0;
  if ((size_t)n >= size)
    n = (int)size - 1;
  return acp_mcp_call_respond_text(call, buf, (size_t)n, true);
}

/* Answer a tool whose server->client request failed. */
static int respond_request_failure(acp_mcp_call *call, const char *what,
                                   int status, const acp_rpc_msg *msg) {
  char buf[256];
  int n;

  if (status == ACP_ERR_PROTOCOL && msg != NULL)
    n = snprintf(
        buf, sizeof(buf), "%s failed: %.*s (%lld)", what,
        (int)(msg->error_message_len > 150 ? 150 : msg->error_message_len),
        msg->error_message ? msg->error_message : "",
        (long long)msg->error_code);
  else
    n = snprintf(buf, sizeof(buf), "%s failed: status %d", what, status);
  return respond_error_buf(call, buf, sizeof(buf), n);
}

/* What sending a tool handler's request returned: `rv`, or when the request
 * could not be sent (no client capability, wrong state), what answering
 * the tool with that error returned. */
static int check_sent(acp_mcp_call *call, const char *what, int rv) {
  char buf[160];
  int n;

  if (rv == ACP_ERR_UNSUPPORTED)
    n = snprintf(buf, sizeof(buf), "The client does not support %s", what);
  else if (rv == ACP_ERR_INVALID_STATE)
    n = snprintf(buf, sizeof(buf), "Could not request %s (%d)", what, rv);
  else
    return rv;
  return respond_error_buf(call, buf, sizeof(buf), n);
}

static int on_sampling_result(acp_mcp_call *call, int status,
                              const acp_rpc_msg *msg, void *ud) {
  const acp_json_val *content;
  const char *p = NULL;
  size_t n = 0;

  (void)ud;
  if (status != 0)
    return respond_request_failure(call, "sampling/createMessage", status, msg);
  content = acp_json_obj_getz(msg->result, "content");
  if (acp_json_type_of(content) == ACP_JSON_ARRAY)
    content = acp_json_arr_get(content, 0);
  if (arg_str(msg->doc, content, "text", &p, &n) != 0) {
    /* Not a text block: show the raw content. */
    p = acp_json_raw(content, &n);
    if (p == NULL) {
      p = "";
      n = 0;
    }
  }
  return respond_text2(call, "LLM response: ", 14, p, n);
}

static int tool_sampling(acp_mcp_call *call, const acp_json_val *args,
                         void *ud) {
  acp_json_writer *w = NULL;
  const char *prompt, *p;
  size_t plen, n;
  int rv;

  (void)ud;
  rv = tool_str_arg(call, args, "prompt", &prompt, &plen);
  if (rv != 0 || prompt == NULL)
    return rv;
  rv = messages_begin(&w);
  if (rv != 0)
    return rv;
  mcp_write_user_text(w, prompt, plen);
  acp_json_write_arr_end(w);
  acp_json_write_keyz(w, "maxTokens");
  acp_json_write_int(w, 100);
  rv = acp_json_write_obj_end(w);
  if (rv == 0) {
    p = acp_json_writer_data(w, &n);
    rv = check_sent(
        call, "sampling",
        acp_mcp_call_create_message(call, p, n, 0, on_sampling_result, NULL));
  }
  acp_json_writer_free(w);
  return rv;
}

/* Result text prefixes of the elicitation tools (user_data of the cb). */
static const char EV_USER_RESPONSE[] = "User response: action=";
static const char EV_ELICIT_DONE[] = "Elicitation completed: action=";

static int on_elicit_result(acp_mcp_call *call, int status,
                            const acp_rpc_msg *msg, void *ud) {
  const char *prefix = ud;
  const char *action = NULL, *content;
  size_t alen = 0, clen;
  ev_part parts[4];

  if (status != 0)
    return respond_request_failure(call, "elicitation/create", status, msg);
  if (arg_str(msg->doc, msg->result, "action", &action, &alen) != 0)
    return acp_mcp_call_respond_text(call, "elicitation result has no action",
                                     32, true);
  content = acp_json_raw(acp_json_obj_getz(msg->result, "content"), &clen);
  if (content == NULL) {
    content = "{}";
    clen = 2;
  }
  /* "<prefix><action>, content=<json>" */
  parts[0].p = prefix;
  parts[0].n = strlen(prefix);
  parts[1].p = action;
  parts[1].n = alen;
  parts[2].p = ", content=";
  parts[2].n = 10;
  parts[3].p = content;
  parts[3].n = clen;
  return respond_parts(call, parts, 4, false);
}

static int elicit(acp_mcp_call *call, const char *message, size_t mlen,
                  const char *schema, const char *prefix) {
  acp_json_writer *w = NULL;
  const char *p;
  size_t n;
  int rv;

  rv = acp_json_writer_new(&w, 0, NULL);
  if (rv != 0)
    return rv;
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "message");
  acp_json_write_str(w, message, mlen);
  acp_json_write_keyz(w, "requestedSchema");
  acp_json_write_raw(w, schema, strlen(schema));
  rv = acp_json_write_obj_end(w);
  if (rv == 0) {
    p = acp_json_writer_data(w, &n);
    rv = check_sent(
        call, "elicitation",
        acp_mcp_call_elicit(call, p, n, 0, on_elicit_result, (void *)prefix));
  }
  acp_json_writer_free(w);
  return rv;
}

static int tool_elicitation(acp_mcp_call *call, const acp_json_val *args,
                            void *ud) {
  const char *m;
  size_t n;
  int rv;

  (void)ud;
  rv = tool_str_arg(call, args, "message", &m, &n);
  if (rv != 0 || m == NULL)
    return rv;
  return elicit(
      call, m, n,
      "{\"type\":\"object\",\"properties\":{"
      "\"username\":{\"type\":\"string\",\"description\":\"User's response\"},"
      "\"email\":{\"type\":\"string\",\"description\":\"User's email "
      "address\"}},\"required\":[\"username\",\"email\"]}",
      EV_USER_RESPONSE);
}

static int tool_elicitation_defaults(acp_mcp_call *call,
                                     const acp_json_val *args, void *ud) {
  static const char msg[] = "Please review and update the form fields with "
                            "defaults";
  (void)args;
  (void)ud;
  return elicit(
      call, msg, sizeof(msg) - 1,
      "{\"type\":\"object\",\"properties\":{"
      "\"name\":{\"type\":\"string\",\"description\":\"User name\","
      "\"default\":\"John Doe\"},"
      "\"age\":{\"type\":\"integer\",\"description\":\"User age\","
      "\"default\":30},"
      "\"score\":{\"type\":\"number\",\"description\":\"User score\","
      "\"default\":95.5},"
      "\"status\":{\"type\":\"string\",\"description\":\"User status\","
      "\"enum\":[\"active\",\"inactive\",\"pending\"],\"default\":\"active\"},"
      "\"verified\":{\"type\":\"boolean\",\"description\":\"Verification "
      "status\",\"default\":true}},\"required\":[]}",
      EV_ELICIT_DONE);
}

static int tool_elicitation_enums(acp_mcp_call *call, const acp_json_val *args,
                                  void *ud) {
  static const char msg[] = "Please select options from the enum fields";
  (void)args;
  (void)ud;
  return elicit(
      call, msg, sizeof(msg) - 1,
      "{\"type\":\"object\",\"properties\":{"
      "\"untitledSingle\":{\"type\":\"string\",\"description\":\"Select one "
      "option\",\"enum\":[\"option1\",\"option2\",\"option3\"]},"
      "\"titledSingle\":{\"type\":\"string\",\"description\":\"Select one "
      "option with titles\",\"oneOf\":["
      "{\"const\":\"value1\",\"title\":\"First Option\"},"
      "{\"const\":\"value2\",\"title\":\"Second Option\"},"
      "{\"const\":\"value3\",\"title\":\"Third Option\"}]},"
      "\"legacyEnum\":{\"type\":\"string\",\"description\":\"Select one option "
      "(legacy)\",\"enum\":[\"opt1\",\"opt2\",\"opt3\"],\"enumNames\":["
      "\"Option One\",\"Option Two\",\"Option Three\"]},"
      "\"untitledMulti\":{\"type\":\"array\",\"description\":\"Select multiple "
      "options\",\"minItems\":1,\"maxItems\":3,\"items\":{\"type\":\"string\","
      "\"enum\":[\"option1\",\"option2\",\"option3\"]}},"
      "\"titledMulti\":{\"type\":\"array\",\"description\":\"Select multiple "
      "options with titles\",\"minItems\":1,\"maxItems\":3,\"items\":{"
      "\"anyOf\":[{\"const\":\"value1\",\"title\":\"First Choice\"},"
      "{\"const\":\"value2\",\"title\":\"Second Choice\"},"
      "{\"const\":\"value3\",\"title\":\"Third Choice\"}]}}},"
      "\"required\":[]}",
      EV_ELICIT_DONE);
}

/* MARK: - Resources */

static int res_static_text(acp_mcp_call *call, const char *uri, size_t len,
                           void *ud) {
  static const char text[] = "This is the content of the static text resource.";
  (void)len;
  (void)ud;
  return acp_mcp_call_respond_resource_text(call, uri, "text/plain", text,
                                            sizeof(text) - 1);
}

static int res_static_binary(acp_mcp_call *call, const char *uri, size_t len,
                             void *ud) {
  static const char result[] =
      "{\"contents\":[{\"uri\":\"test://static-binary\",\"mimeType\":"
      "\"image/png\",\"blob\":\"" EV_PNG_B64 "\"}]}";
  (void)uri;
  (void)len;
  (void)ud;
  return acp_mcp_call_respond_raw(call, result, sizeof(result) - 1);
}

static int res_watched(acp_mcp_call *call, const char *uri, size_t len,
                       void *ud) {
  static const char text[] = "Watched resource content";
  (void)len;
  (void)ud;
  return acp_mcp_call_respond_resource_text(call, uri, "text/plain", text,
                                            sizeof(text) - 1);
}

static int res_template(acp_mcp_call *call, const char *uri, size_t len,
                        void *ud) {
  acp_json_writer *inner = NULL;
  const char *id, *p;
  size_t idlen, n;
  int rv;

  (void)len;
  (void)ud;
  rv = acp_mcp_call_uri_var(call, "id", &id, &idlen);
  if (rv != 0)
    return rv;
  /* {"id":"<id>","templateTest":true,"data":"Data for ID: <id>"} */
  rv = acp_json_writer_new(&inner, 0, NULL);
  if (rv != 0)
    return rv;
  acp_json_write_obj_begin(inner);
  acp_json_write_keyz(inner, "id");
  acp_json_write_str(inner, id, idlen);
  acp_json_write_keyz(inner, "templateTest");
  acp_json_write_bool(inner, true);
  acp_json_write_keyz(inner, "data");
  {
    char buf[512];
    int k = snprintf(buf, sizeof(buf), "Data for ID: %.*s",
                     (int)(idlen > 400 ? 400 : idlen), id);
    acp_json_write_str(inner, buf, k < 0 ? 0 : (size_t)k);
  }
  rv = acp_json_write_obj_end(inner);
  if (rv == 0) {
    p = acp_json_writer_data(inner, &n);
    rv =
        acp_mcp_call_respond_resource_text(call, uri, "application/json", p, n);
  }
  acp_json_writer_free(inner);
  return rv;
}

/* MARK: - Prompts */

static int prompt_simple(acp_mcp_call *call, const acp_json_val *args,
                         void *ud) {
  static const char r[] =
      "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\","
      "\"text\":\"This is a simple prompt for testing.\"}}]}";
  (void)args;
  (void)ud;
  return acp_mcp_call_respond_raw(call, r, sizeof(r) - 1);
}

static int prompt_with_args(acp_mcp_call *call, const acp_json_val *args,
                            void *ud) {
  acp_json_writer *w = NULL;
  const char *a1, *a2;
  size_t n1, n2, n;
  char *text;
  int rv;

  (void)ud;
  if (arg_str(acp_mcp_call_doc(call), args, "arg1", &a1, &n1) != 0 ||
      arg_str(acp_mcp_call_doc(call), args, "arg2", &a2, &n2) != 0)
    return acp_mcp_call_respond_error(call, -32602,
                                      "arg1 and arg2 must be strings", NULL, 0);
  {
    /* "Prompt with arguments: arg1='<a1>', arg2='<a2>'" */
    const ev_part parts[5] = {{"Prompt with arguments: arg1='", 29},
                              {a1, n1},
                              {"', arg2='", 9},
                              {a2, n2},
                              {"'", 1}};
    text = join_parts(parts, 5, &n);
  }
  if (text == NULL)
    return ACP_ERR_NOMEM;
  rv = messages_begin(&w);
  if (rv == 0) {
    mcp_write_user_text(w, text, n);
    rv = respond_messages(call, w);
  }
  free(text);
  return rv;
}

static int prompt_embedded(acp_mcp_call *call, const acp_json_val *args,
                           void *ud) {
  static const char please[] =
      "{\"role\":\"user\",\"content\":{\"type\":\"text\","
      "\"text\":\"Please process the embedded resource above.\"}}";
  acp_json_writer *w = NULL;
  const char *uri;
  size_t ulen;
  int rv;

  (void)ud;
  if (arg_str(acp_mcp_call_doc(call), args, "resourceUri", &uri, &ulen) != 0)
    return acp_mcp_call_respond_error(call, -32602,
                                      "resourceUri must be a string", NULL, 0);
  rv = messages_begin(&w);
  if (rv != 0)
    return rv;
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "role");
  acp_json_write_strz(w, "user");
  acp_json_write_keyz(w, "content");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "type");
  acp_json_write_strz(w, "resource");
  acp_json_write_keyz(w, "resource");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "uri");
  acp_json_write_str(w, uri, ulen);
  acp_json_write_keyz(w, "mimeType");
  acp_json_write_strz(w, "text/plain");
  acp_json_write_keyz(w, "text");
  acp_json_write_strz(w, "Embedded resource content for testing.");
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  acp_json_write_raw(w, please, sizeof(please) - 1);
  return respond_messages(call, w);
}

static int prompt_image(acp_mcp_call *call, const acp_json_val *args,
                        void *ud) {
  static const char r[] =
      "{\"messages\":[{\"role\":\"user\",\"content\":" EV_IMAGE "},"
      "{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"Please "
      "analyze the image above.\"}}]}";
  (void)args;
  (void)ud;
  return acp_mcp_call_respond_raw(call, r, sizeof(r) - 1);
}

/* MARK: - Completion */

static int complete(acp_mcp_call *call, const acp_json_val *ref,
                    const acp_json_val *argument, const acp_json_val *context,
                    void *ud) {
  static const char *const arg1_vals[] = {"paris", "park", "party", "test",
                                          "testing"};
  static const char *const arg2_vals[] = {"hello", "help", "world"};
  static const char *const id_vals[] = {"1", "2", "3", "42", "123"};
  static const char *const style_vals[] = {"casual", "formal", "technical"};
  const char *const *cands = NULL;
  size_t ncands = 0, nout = 0, i, vlen = 0;
  const char *out[8];
  const char *value = "";
  acp_json_doc *doc = acp_mcp_call_doc(call);
  const acp_json_val *type = acp_json_obj_getz(ref, "type");
  const acp_json_val *name = acp_json_obj_getz(argument, "name");

  (void)context;
  (void)ud;
  if (arg_str(doc, argument, "value", &value, &vlen) != 0) {
    value = "";
    vlen = 0;
  }
  if (ACP_JSON_STR_EQ_LIT(type, "ref/prompt")) {
    if (ACP_JSON_STR_EQ_LIT(name, "arg1")) {
      cands = arg1_vals;
      ncands = sizeof(arg1_vals) / sizeof(arg1_vals[0]);
    } else if (ACP_JSON_STR_EQ_LIT(name, "arg2")) {
      cands = arg2_vals;
      ncands = sizeof(arg2_vals) / sizeof(arg2_vals[0]);
    } else if (ACP_JSON_STR_EQ_LIT(name, "style")) {
      cands = style_vals;
      ncands = sizeof(style_vals) / sizeof(style_vals[0]);
    }
  } else if (ACP_JSON_STR_EQ_LIT(name, "id")) {
    cands = id_vals;
    ncands = sizeof(id_vals) / sizeof(id_vals[0]);
  }
  for (i = 0; i < ncands && nout < sizeof(out) / sizeof(out[0]); i++)
    if (strlen(cands[i]) >= vlen && memcmp(cands[i], value, vlen) == 0)
      out[nout++] = cands[i];
  return acp_mcp_call_respond_completion(call, out, nout, (int64_t)nout, false);
}

/* MARK: - Registration */

static const char EV_EMPTY_SCHEMA[] = "{\"type\":\"object\",\"properties\":{}}";

typedef struct ev_tool {
  const char *name;
  const char *description;
  const char *schema; /* NULL: EV_EMPTY_SCHEMA */
  acp_mcp_tool_cb cb;
} ev_tool;

static const ev_tool ev_tools[] = {
    {"test_simple_text", "Tests simple text content response", NULL,
     tool_simple_text},
    {"test_image_content", "Tests image content response", NULL, tool_image},
    {"test_audio_content", "Tests audio content response", NULL, tool_audio},
    {"test_embedded_resource", "Tests embedded resource content response", NULL,
     tool_embedded},
    {"test_multiple_content_types",
     "Tests response with multiple content types (text, image, resource)", NULL,
     tool_mixed},
    {"test_tool_with_logging",
     "Tests tool that emits log messages during execution", NULL, tool_logging},
    {"test_tool_with_progress",
     "Tests tool that reports progress notifications", NULL, tool_progress},
    {"test_error_handling", "Tests error response handling", NULL, tool_error},
    {"test_sampling",
     "Tests server-initiated sampling (LLM completion request)",
     "{\"type\":\"object\",\"properties\":{\"prompt\":{\"type\":\"string\","
     "\"description\":\"The prompt to send to the LLM\"}},\"required\":["
     "\"prompt\"]}",
     tool_sampling},
    {"test_elicitation",
     "Tests server-initiated elicitation (user input request)",
     "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\","
     "\"description\":\"The message to show the user\"}},\"required\":["
     "\"message\"]}",
     tool_elicitation},
    {"test_elicitation_sep1034_defaults",
     "Tests elicitation with default values per SEP-1034", NULL,
     tool_elicitation_defaults},
    {"test_elicitation_sep1330_enums",
     "Tests elicitation with enum schema improvements per SEP-1330", NULL,
     tool_elicitation_enums},
    {"json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features",
     "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
     "\"type\":\"object\",\"$defs\":{\"address\":{\"type\":\"object\","
     "\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":"
     "\"string\"}}}},\"properties\":{\"name\":{\"type\":\"string\"},"
     "\"address\":{\"$ref\":\"#/$defs/address\"}},\"additionalProperties\":"
     "false}",
     tool_json_schema},
    {"test_reconnection",
     "Tests SSE stream reconnection (the result may arrive after the client "
     "reconnects)",
     NULL, tool_reconnection},
    {"echo", "Echoes back the input",
     "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\","
     "\"description\":\"Message to echo\"}},\"required\":[\"message\"]}",
     tool_echo},
};

typedef struct ev_resource {
  const char *uri;
  const char *name;
  const char *description;
  const char *mime_type;
  acp_mcp_read_cb cb;
} ev_resource;

static const ev_resource ev_resources[] = {
    {"test://static-text", "Static Text Resource",
     "A static text resource for testing", "text/plain", res_static_text},
    {"test://static-binary", "Static Binary Resource",
     "A static binary resource (image) for testing", "image/png",
     res_static_binary},
    {"test://watched-resource", "Watched Resource",
     "A resource that can be subscribed to", "text/plain", res_watched},
};

typedef struct ev_prompt {
  const char *name;
  const char *description;
  const char *arguments;
  acp_mcp_prompt_cb cb;
} ev_prompt;

static const ev_prompt ev_prompts[] = {
    {"test_simple_prompt", "A simple prompt without arguments", NULL,
     prompt_simple},
    {"test_prompt_with_arguments", "A prompt with required arguments",
     "[{\"name\":\"arg1\",\"description\":\"First test argument\","
     "\"required\":true},{\"name\":\"arg2\",\"description\":\"Second test "
     "argument\",\"required\":true}]",
     prompt_with_args},
    {"test_prompt_with_embedded_resource",
     "A prompt that includes an embedded "
     "resource",
     "[{\"name\":\"resourceUri\",\"description\":\"URI of the resource to "
     "embed\",\"required\":true}]",
     prompt_embedded},
    {"test_prompt_with_image", "A prompt that includes image content", NULL,
     prompt_image},
};

int mcp_everything_register_with(acp_mcp_server *s,
                                 mcp_everything_close_stream_fn close_stream) {
  size_t i;
  int rv;

  if (s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  for (i = 0; i < sizeof(ev_tools) / sizeof(ev_tools[0]); i++) {
    acp_mcp_tool_def d;
    memset(&d, 0, sizeof(d));
    d.version = ACP_MCP_DEF_VERSION;
    d.name = ev_tools[i].name;
    d.description = ev_tools[i].description;
    d.input_schema = ev_tools[i].schema ? ev_tools[i].schema : EV_EMPTY_SCHEMA;
    d.handler = ev_tools[i].cb;
    if (ev_tools[i].cb == tool_reconnection)
      d.user_data = (void *)(uintptr_t)close_stream;
    rv = acp_mcp_server_add_tool(s, &d);
    if (rv != 0)
      return rv;
  }
  for (i = 0; i < sizeof(ev_resources) / sizeof(ev_resources[0]); i++) {
    acp_mcp_resource_def d;
    memset(&d, 0, sizeof(d));
    d.version = ACP_MCP_DEF_VERSION;
    d.uri = ev_resources[i].uri;
    d.name = ev_resources[i].name;
    d.description = ev_resources[i].description;
    d.mime_type = ev_resources[i].mime_type;
    d.size = -1;
    d.handler = ev_resources[i].cb;
    rv = acp_mcp_server_add_resource(s, &d);
    if (rv != 0)
      return rv;
  }
  {
    acp_mcp_template_def d;
    memset(&d, 0, sizeof(d));
    d.version = ACP_MCP_DEF_VERSION;
    d.uri_template = "test://template/{id}/data";
    d.name = "Resource Template";
    d.description = "A resource template with parameter substitution";
    d.mime_type = "application/json";
    d.handler = res_template;
    rv = acp_mcp_server_add_template(s, &d);
    if (rv != 0)
      return rv;
  }
  for (i = 0; i < sizeof(ev_prompts) / sizeof(ev_prompts[0]); i++) {
    acp_mcp_prompt_def d;
    memset(&d, 0, sizeof(d));
    d.version = ACP_MCP_DEF_VERSION;
    d.name = ev_prompts[i].name;
    d.description = ev_prompts[i].description;
    d.arguments = ev_prompts[i].arguments;
    d.handler = ev_prompts[i].cb;
    rv = acp_mcp_server_add_prompt(s, &d);
    if (rv != 0)
      return rv;
  }
  acp_mcp_server_set_completion(s, complete, NULL);
  acp_mcp_server_set_logging(s, 1);
  acp_mcp_server_set_subscribe(s, 1);
  return 0;
}

#ifndef MCP_EVERYTHING_NO_HTTP
int mcp_everything_register(acp_mcp_server *s) {
  return mcp_everything_register_with(s, acp_http_call_close_stream);
}
#endif
