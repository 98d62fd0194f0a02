/*
 * Unit tests of the sans-I/O JSON-RPC session (src/rpc).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/rpc.h"
#include "failmem.h"
#include "rpc/rpc_int.h"

/* MARK: - Harness */

enum {
  MODE_STORE = 0, /* keep the handle, answer later */
  MODE_ECHO,      /* answer with params (or null) */
  MODE_PAUSE,     /* keep the handle, return ACP_ERR_PAUSE */
  MODE_FAIL,      /* return a non-pause error */
  MODE_REENTER,   /* call recv and send from inside the callback */
  MODE_REQUEST    /* send a request from inside the callback */
};

typedef struct rec {
  int mode;
  int nreq;
  int nnotif;
  int ncancel;
  int nperr;
  int nresp;
  int last_perr;
  uint64_t handles[256];
  int nhandles;
  uint64_t cancelled[16];
  char method[256];
  size_t method_len;
  bool in_batch;
  const char *raw_ptr;
  size_t raw_len;
  int reenter_recv;
  int reenter_send;
  int reenter_expiry;
  int reenter_eof;
  /* response callback */
  int resp_ret;
  int64_t err_code;
  bool local;
  bool had_result;
  char resp_raw[512];
  char err_msg[128];
  char result[128];
} rec;

static char out[1 << 16];
static size_t out_len;

static const char *drain(acp_rpc_session *s) {
  const char *d;
  acp_ssize n = acp_rpc_session_send(s, &d);

  assert_true(n >= 0);
  assert_true(out_len + (size_t)n < sizeof(out));
  memcpy(out + out_len, d, (size_t)n);
  out_len += (size_t)n;
  out[out_len] = '\0';
  return out;
}

static void reset_out(void) {
  out_len = 0;
  out[0] = '\0';
}

static int on_request(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  rec *r = ud;
  size_t n;
  const char *p;

  r->nreq++;
  assert_int_equal(msg->kind, ACP_RPC_REQUEST);
  assert_non_null(msg->id);
  n = msg->method_len < sizeof(r->method) - 1 ? msg->method_len
                                              : sizeof(r->method) - 1;
  memcpy(r->method, msg->method, n);
  r->method[n] = '\0';
  assert_int_equal(msg->method[msg->method_len], '\0');
  r->method_len = msg->method_len;
  r->in_batch = msg->in_batch;
  r->raw_ptr = msg->raw;
  r->raw_len = msg->raw_len;
  if (r->nhandles < 256)
    r->handles[r->nhandles++] = msg->handle;
  switch (r->mode) {
  case MODE_ECHO:
    p = acp_json_raw(msg->params, &n);
    return acp_rpc_session_respond(s, msg->handle, p, n);
  case MODE_PAUSE:
    return ACP_ERR_PAUSE;
  case MODE_FAIL:
    return -1;
  case MODE_REENTER: {
    const char *d;
    r->reenter_recv = (int)acp_rpc_session_recv(s, "\n", 1, 0);
    r->reenter_send = (int)acp_rpc_session_send(s, &d);
    r->reenter_expiry = acp_rpc_session_handle_expiry(s, 0);
    r->reenter_eof = acp_rpc_session_recv_eof(s, 0);
    return 0;
  }
  case MODE_REQUEST:
    return acp_rpc_session_request(s, "ping", 4, NULL, 0, 0, 0, NULL, NULL,
                                   NULL);
  default:
    return 0;
  }
}

static int on_notification(acp_rpc_session *s, const acp_rpc_msg *msg,
                           void *ud) {
  rec *r = ud;
  size_t n;

  (void)s;
  r->nnotif++;
  assert_int_equal(msg->kind, ACP_RPC_NOTIFICATION);
  assert_null(msg->id);
  n = msg->method_len < sizeof(r->method) - 1 ? msg->method_len
                                              : sizeof(r->method) - 1;
  memcpy(r->method, msg->method, n);
  r->method[n] = '\0';
  r->in_batch = msg->in_batch;
  return r->mode == MODE_FAIL ? -1 : 0;
}

static int on_cancel(acp_rpc_session *s, uint64_t handle, void *ud) {
  rec *r = ud;

  (void)s;
  if (r->ncancel < 16)
    r->cancelled[r->ncancel] = handle;
  r->ncancel++;
  return 0;
}

static void on_perr(acp_rpc_session *s, int code, const char *msg, void *ud) {
  rec *r = ud;

  (void)s;
  assert_non_null(msg);
  r->nperr++;
  r->last_perr = code;
}

static int on_response(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  rec *r = ud;
  size_t n;
  const char *p;

  (void)s;
  r->nresp++;
  assert_int_equal(msg->kind, ACP_RPC_RESPONSE);
  r->local = msg->local;
  r->err_code = msg->error ? msg->error_code : 0;
  if (msg->local)
    r->err_code = msg->error_code;
  r->had_result = msg->result != NULL;
  n = msg->raw_len < sizeof(r->resp_raw) - 1 ? msg->raw_len
                                             : sizeof(r->resp_raw) - 1;
  memcpy(r->resp_raw, msg->raw, n);
  r->resp_raw[n] = '\0';
  r->err_msg[0] = '\0';
  if (msg->error_message) {
    n = msg->error_message_len < sizeof(r->err_msg) - 1
            ? msg->error_message_len
            : sizeof(r->err_msg) - 1;
    memcpy(r->err_msg, msg->error_message, n);
    r->err_msg[n] = '\0';
  }
  r->result[0] = '\0';
  if (msg->result) {
    p = acp_json_raw(msg->result, &n);
    if (n < sizeof(r->result)) {
      memcpy(r->result, p, n);
      r->result[n] = '\0';
    }
  }
  return r->resp_ret;
}

typedef struct cfg {
  bool no_request_cb;
  size_t max_line;
  size_t max_incoming;
  size_t max_pending;
  size_t max_output;
  int batches_off;
  int mcp;
} cfg;

static acp_rpc_session *mk(rec *r, const cfg *c, const acp_mem *mem) {
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_options *o = NULL;
  acp_rpc_session *s = NULL;

  assert_int_equal(acp_rpc_callbacks_new(&cbs), 0);
  if (!(c && c->no_request_cb))
    acp_rpc_callbacks_set_on_request(cbs, on_request);
  acp_rpc_callbacks_set_on_notification(cbs, on_notification);
  acp_rpc_callbacks_set_on_cancel(cbs, on_cancel);
  acp_rpc_callbacks_set_on_protocol_error(cbs, on_perr);
  assert_int_equal(acp_rpc_options_new(&o), 0);
  if (c) {
    if (c->max_line)
      acp_rpc_options_set_max_line(o, c->max_line);
    if (c->max_incoming)
      acp_rpc_options_set_max_incoming(o, c->max_incoming);
    if (c->max_pending)
      acp_rpc_options_set_max_pending(o, c->max_pending);
    if (c->max_output)
      acp_rpc_options_set_max_output(o, c->max_output);
    if (c->batches_off)
      acp_rpc_options_set_batches(o, 0);
    if (c->mcp)
      acp_rpc_options_set_cancel_style(o, ACP_RPC_CANCEL_STYLE_MCP);
  }
  assert_int_equal(acp_rpc_session_new(&s, cbs, r, o, mem), 0);
  acp_rpc_callbacks_free(cbs);
  acp_rpc_options_free(o);
  reset_out();
  return s;
}

static void feed(acp_rpc_session *s, const char *text) {
  size_t n = strlen(text);

  assert_int_equal(acp_rpc_session_recv(s, text, n, 0), (acp_ssize)n);
}

/* Feed and expect exactly `expect` as output. */
static void roundtrip(acp_rpc_session *s, const char *in, const char *expect) {
  reset_out();
  feed(s, in);
  drain(s);
  assert_string_equal(out, expect);
}

/* MARK: - Requests and responses */

static void test_rpc_echo_request_answered_with_exact_id(void **state) {
  rec r = {.mode = MODE_ECHO};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  roundtrip(s,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[1]}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1]}\n");
  roundtrip(
      s,
      "{\"jsonrpc\":\"2.0\",\"id\":12345678901234567890,\"method\":\"m\","
      "\"params\":{}}\n",
      "{\"jsonrpc\":\"2.0\",\"id\":12345678901234567890,\"result\":{}}\n");
  roundtrip(s, "{\"id\":\"a\\u0062c\",\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0062c\",\"result\":null}\n");
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":1.5e0,\"method\":\"m\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1.5e0,\"result\":null}\n");
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"m\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":null}\n");
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":-0,\"method\":\"m\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":-0,\"result\":null}\n");
  assert_int_equal(r.nreq, 6);
  assert_int_equal(r.nperr, 0);
  assert_int_equal(acp_rpc_session_incoming(s), 0);
  acp_rpc_session_free(s);
}

/* JSON values the caller passes may be pretty-printed: their CR and LF
 * (whitespace in valid JSON) go out as spaces, so each message stays one
 * line; an escaped newline inside a string is kept as it is. Before, the
 * raw bytes were copied and the peer read the pieces as broken lines. */
static void test_rpc_pretty_printed_values_stay_on_one_line(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  const char *pretty = "{\n  \"a\": [1,\r\n 2],\n  \"s\": \"x\\ny\"\n}";
  const char *flat = "{   \"a\": [1,   2],   \"s\": \"x\\ny\" }";
  const char *part[] = {"{\"p\":", pretty, "}"};
  acp__rpc_part parts[3];
  char want[512];

  (void)state;
  assert_int_equal(acp_rpc_session_request(s, "m", 1, pretty, strlen(pretty), 0,
                                           0, NULL, NULL, NULL),
                   0);
  assert_int_equal(acp_rpc_session_notify(s, "n", 1, pretty, strlen(pretty)),
                   0);
  for (size_t i = 0; i < 3; i++) {
    parts[i].p = part[i];
    parts[i].n = strlen(part[i]);
    parts[i].str = false;
    parts[i].ref = false;
    parts[i].clean = false;
  }
  assert_int_equal(acp__rpc_notify_parts(s, "q", 1, parts, 3), 0);
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"m\"}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"m\"}\n");
  assert_int_equal(r.nhandles, 2);
  assert_int_equal(
      acp_rpc_session_respond(s, r.handles[0], pretty, strlen(pretty)), 0);
  assert_int_equal(acp_rpc_session_respond_error(s, r.handles[1], 5, "e", 1,
                                                 pretty, strlen(pretty)),
                   0);
  drain(s);
  snprintf(want, sizeof(want),
           "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"m\",\"params\":%s}\n"
           "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":%s}\n"
           "{\"jsonrpc\":\"2.0\",\"method\":\"q\",\"params\":{\"p\":%s}}\n"
           "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":%s}\n"
           "{\"jsonrpc\":\"2.0\",\"id\":8,\"error\":{\"code\":5,\"message\":"
           "\"e\",\"data\":%s}}\n",
           flat, flat, flat, flat, flat);
  assert_string_equal(out, want);
  /* The caller's bytes are not changed. */
  assert_non_null(strchr(pretty, '\n'));

  /* Each length class of the scan: bytes, 8 a step, 16 a step, the
   * vector scanner; at the first and the last byte; and values without
   * either byte, left as they are. */
  {
    static const char *const cases[][2] = {
        {"[\n1]", "[ 1]"},
        {"\r\n", "  "},
        {"[1,2,\n3]", "[1,2, 3]"},
        {"[1,2,3,4,5,6,\r]", "[1,2,3,4,5,6, ]"},
        {"\n[1,2,3,4,5,6]", " [1,2,3,4,5,6]"},
        {"[1,2,3,4,5,6,7,8,9]\n", "[1,2,3,4,5,6,7,8,9] "},
        {"[\"abcdefghijklmnopqrstuvwxyz\",\n\"abcdefghijklmnopqrstuvwxyz\"]",
         "[\"abcdefghijklmnopqrstuvwxyz\", \"abcdefghijklmnopqrstuvwxyz\"]"},
        {"[\"abcdefghijklmnopqrstuvwxyz\",\"abcdefghijklmnopqrstuvwxyz\",1,"
         "\r\n2]",
         "[\"abcdefghijklmnopqrstuvwxyz\",\"abcdefghijklmnopqrstuvwxyz\",1,  "
         "2]"},
        {"7", "7"},
        {"[1,2,3,4]", "[1,2,3,4]"},
        {"[\"a\\n\\r\",\"bcdefghijk\"]", "[\"a\\n\\r\",\"bcdefghijk\"]"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
      reset_out();
      assert_int_equal(
          acp_rpc_session_notify(s, "n", 1, cases[k][0], strlen(cases[k][0])),
          0);
      drain(s);
      snprintf(want, sizeof(want),
               "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":%s}\n",
               cases[k][1]);
      assert_string_equal(out, want);
    }
  }
  acp_rpc_session_free(s);
}

static void test_rpc_method_is_decoded_and_nul_terminated(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\/b\\u00e9\"}\n");
  assert_string_equal(r.method, "a/b\xc3\xa9");
  assert_int_equal(r.method_len, 5);
  assert_int_equal(acp_rpc_session_incoming(s), 1);
  /* Without escapes the raw bytes are copied: exact, NUL-terminated, for
   * an empty name and for one longer than the previous. */
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"\"}\n");
  assert_string_equal(r.method, "");
  assert_int_equal(r.method_len, 0);
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/update\"}\n");
  assert_string_equal(r.method, "session/update");
  assert_int_equal(r.method_len, 14);
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"x\"}\n");
  assert_string_equal(r.method, "x");
  assert_int_equal(r.method_len, 1);
  acp_rpc_session_free(s);
}

static void test_rpc_complete_line_is_not_copied(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  char buf[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n";

  (void)state;
  assert_int_equal(acp_rpc_session_recv(s, buf, strlen(buf), 0),
                   (acp_ssize)strlen(buf));
  assert_ptr_equal(r.raw_ptr, buf);
  assert_int_equal(r.raw_len, strlen(buf) - 1);
  acp_rpc_session_free(s);
}

static void test_rpc_byte_by_byte_and_crlf(void **state) {
  rec r = {.mode = MODE_ECHO};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  const char *in =
      "\r\n  \t\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\"}\r\n"
      "\n{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n";
  size_t i;

  (void)state;
  for (i = 0; in[i]; i++)
    assert_int_equal(acp_rpc_session_recv(s, in + i, 1, 0), 1);
  drain(s);
  assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":null}\n");
  assert_int_equal(r.nreq, 1);
  assert_int_equal(r.nnotif, 1);
  assert_int_equal(r.nperr, 0);
  acp_rpc_session_free(s);
}

static void test_rpc_big_message_split_in_chunks(void **state) {
  rec r = {.mode = MODE_ECHO};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  size_t big = 1 << 20;
  char *msg = malloc(big + 100);
  size_t n;
  size_t pos;
  const char *d;
  acp_ssize got;

  (void)state;
  n = (size_t)sprintf(msg, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"m\","
                           "\"params\":[\"");
  memset(msg + n, 'x', big);
  n += big;
  n += (size_t)sprintf(msg + n, "\"]}\n");
  for (pos = 0; pos < n; pos += 4093) {
    size_t c = n - pos < 4093 ? n - pos : 4093;
    assert_int_equal(acp_rpc_session_recv(s, msg + pos, c, 0), (acp_ssize)c);
  }
  assert_int_equal(r.nreq, 1);
  got = acp_rpc_session_send(s, &d);
  assert_int_equal(got, (acp_ssize)(big + 39));
  assert_memory_equal(d, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":[\"xxx", 38);
  assert_memory_equal(d + got - 4, "\"]}\n", 4);
  free(msg);
  acp_rpc_session_free(s);
}

/* The same message and a small one after it, read in place into the
 * session's buffer (acp_rpc_session_read_buf()) in reads of various sizes;
 * nothing to lend inside a callback or after EOF. */
static void test_rpc_big_message_read_in_place(void **state) {
  static const size_t reads[] = {65536, 4093, 1 << 21};
  size_t big = 1 << 20;
  char *msg = malloc(big + 200);
  size_t n, k;

  (void)state;
  assert_non_null(msg);
  n = (size_t)sprintf(msg, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"m\","
                           "\"params\":[\"");
  memset(msg + n, 'x', big);
  n += big;
  n += (size_t)sprintf(msg + n, "\"]}\n{\"jsonrpc\":\"2.0\",\"id\":4,"
                                "\"method\":\"m\",\"params\":[1]}\n");
  for (k = 0; k < sizeof(reads) / sizeof(reads[0]); k++) {
    rec r = {.mode = MODE_ECHO};
    acp_rpc_session *s = mk(&r, NULL, NULL);
    size_t pos = 0, room = 0;
    const char *d;
    acp_ssize got;

    while (pos < n) {
      char *buf = acp_rpc_session_read_buf(s, &room);
      size_t c = n - pos < reads[k] ? n - pos : reads[k];

      assert_non_null(buf);
      if (c > room)
        c = room;
      memcpy(buf, msg + pos, c);
      assert_int_equal(acp_rpc_session_recv(s, buf, c, 0), (acp_ssize)c);
      pos += c;
    }
    assert_int_equal(r.nreq, 2);
    got = acp_rpc_session_send(s, &d);
    {
      static const char tail[] = "\"]}\n{\"jsonrpc\":\"2.0\",\"id\":4,"
                                 "\"result\":[1]}\n";
      assert_int_equal(got, (acp_ssize)(big + 35 + sizeof(tail) - 1));
      assert_memory_equal(d, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":[\"xxx",
                          38);
      assert_memory_equal(d + big + 35, tail, sizeof(tail) - 1);
    }
    assert_int_equal(acp_rpc_session_recv_eof(s, 0), 0);
    assert_null(acp_rpc_session_read_buf(s, &room));
    assert_int_equal(room, 0);
    acp_rpc_session_free(s);
  }
  assert_null(acp_rpc_session_read_buf(NULL, NULL));
  free(msg);
}

/* A line that lies whole in one input is parsed where it is, its end
 * found by the parse (no memchr first); anything else is framed first.
 * The two ways must be indistinguishable: the same stream fed at once,
 * line by line, byte by byte and split in two at every offset gives the
 * same answers, requests, notifications and protocol errors. */
typedef struct stream_result {
  char out[4096];
  int nreq;
  int nnotif;
  int nperr;
} stream_result;

static void feed_stream(const char *in, size_t n, const size_t *cuts,
                        size_t ncuts, stream_result *res) {
  rec r = {.mode = MODE_ECHO};
  cfg c = {.max_line = 120};
  acp_rpc_session *s = mk(&r, &c, NULL);
  size_t pos = 0;
  size_t i;

  for (i = 0; i <= ncuts; i++) {
    size_t end = i < ncuts ? cuts[i] : n;
    if (end > pos) {
      /* A private copy per chunk, freed at once: nothing may point into
       * a chunk after its call (ASan and valgrind check that). */
      char *chunk = malloc(end - pos);
      assert_non_null(chunk);
      memcpy(chunk, in + pos, end - pos);
      assert_int_equal(acp_rpc_session_recv(s, chunk, end - pos, 0),
                       (acp_ssize)(end - pos));
      free(chunk);
      pos = end;
    }
  }
  drain(s);
  assert_true(out_len < sizeof(res->out));
  memcpy(res->out, out, out_len + 1);
  res->nreq = r.nreq;
  res->nnotif = r.nnotif;
  res->nperr = r.nperr;
  acp_rpc_session_free(s);
}

static void test_rpc_fast_lines_match_framed_lines(void **state) {
  static const char in[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":[1,2]}\n"
      "\n"
      "   \t\n"
      "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"m\"}\r\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"note\"}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"m\"} x\n"
      "{\"jsonrpc\":\"2.0\",\n\"id\":4,\"method\":\"m\"}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"\xff\"}\n"
      "  {\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"m\",\"params\":{}}  \r\n"
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"m\",\"params\":\"" /* over */
      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
      "xxxxxxxxxxxxxxxxxxxxxxxx\"}\n"
      "[{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"m\"},"
      "{\"jsonrpc\":\"2.0\",\"method\":\"note\"}]\n"
      "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"m\",\"params\":[\"a\\nb\"]}"
      "\r\n"
      "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"m\"}\r\r\n"
      "123\n"
      "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"m\"}\n";
  const size_t n = sizeof(in) - 1;
  stream_result whole;
  stream_result other;
  size_t cuts[sizeof(in)];
  size_t i;
  size_t k;

  (void)state;
  feed_stream(in, n, NULL, 0, &whole);
  /* Byte by byte, no line is ever whole in one input: the framer-first
   * path. Answered: ids 1, 22, 6, 8 (in the batch), 9, 10 ("\r\r": one
   * '\r' ends the line, the other is JSON whitespace), 11; parse errors:
   * 3, the two halves of 4, 5; 123 is an invalid request; 7 over the cap. */
  for (i = 0; i < n; i++)
    cuts[i] = i + 1;
  feed_stream(in, n, cuts, n - 1, &other);
  assert_string_equal(whole.out, other.out);
  assert_int_equal(whole.nreq, other.nreq);
  assert_int_equal(whole.nnotif, other.nnotif);
  assert_int_equal(whole.nperr, other.nperr);
  assert_int_equal(whole.nreq, 7);
  assert_int_equal(whole.nnotif, 2);
  assert_non_null(strstr(whole.out, "\"id\":22,\"result\":null"));
  assert_non_null(strstr(whole.out, "\"id\":6,\"result\":{}"));
  assert_non_null(strstr(whole.out, "Message exceeds 120 bytes"));
  /* Line by line: every line alone in its input, the fast path each. */
  for (i = 0, k = 0; i < n; i++)
    if (in[i] == '\n')
      cuts[k++] = i + 1;
  feed_stream(in, n, cuts, k, &other);
  assert_string_equal(whole.out, other.out);
  assert_int_equal(whole.nperr, other.nperr);
  /* Split in two at every offset. */
  for (i = 1; i < n; i++) {
    cuts[0] = i;
    feed_stream(in, n, cuts, 1, &other);
    assert_string_equal(whole.out, other.out);
    assert_int_equal(whole.nreq, other.nreq);
    assert_int_equal(whole.nnotif, other.nnotif);
    assert_int_equal(whole.nperr, other.nperr);
  }
}

/* The largest single allocation a session made (a line over the cap must
 * not get a tape built for it by the fast path before the framer drops
 * it). */
static size_t big_alloc;
static void *big_malloc(size_t n, void *ud) {
  (void)ud;
  if (n > big_alloc)
    big_alloc = n;
  return malloc(n);
}
static void big_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *big_calloc(size_t m, size_t n, void *ud) {
  (void)ud;
  if (m * n > big_alloc)
    big_alloc = m * n;
  return calloc(m, n);
}
static void *big_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  if (n > big_alloc)
    big_alloc = n;
  return realloc(p, n);
}

static void test_rpc_fast_line_over_cap_not_parsed(void **state) {
  acp_mem mem = {NULL, big_malloc, big_free, big_calloc, big_realloc};
  rec r = {.mode = MODE_ECHO};
  cfg c = {.max_line = 64};
  acp_rpc_session *s;
  enum { N = 20000 };
  static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n";
  char *line = malloc(2 * N + 64);
  size_t n = 0;
  int i;

  (void)state;
  assert_non_null(line);
  big_alloc = 0;
  s = mk(&r, &c, &mem);
  /* A valid JSON line of 20,000 values, whole in one input. */
  line[n++] = '[';
  for (i = 0; i < N; i++) {
    line[n++] = '1';
    line[n++] = i + 1 < N ? ',' : ']';
  }
  line[n++] = '\n';
  memcpy(line + n, req, strlen(req));
  n += strlen(req);
  assert_int_equal(acp_rpc_session_recv(s, line, n, 0), (acp_ssize)n);
  drain(s);
  assert_string_equal(out,
                      "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":"
                      "-32600,\"message\":\"Message exceeds 64 bytes\"}}\n"
                      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}\n");
  /* A tape for 20,000 values would be hundreds of KiB. */
  assert_true(big_alloc < 16384);
  acp_rpc_session_free(s);
  free(line);
}

static void test_rpc_no_handler_answers_method_not_found(void **state) {
  rec r = {0};
  cfg c = {.no_request_cb = true};
  acp_rpc_session *s = mk(&r, &c, NULL);

  (void)state;
  roundtrip(
      s, "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"a\\\"b\"}\n",
      "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"error\":{\"code\":-32601,"
      "\"message\":\"Method not found\",\"data\":{\"method\":\"a\\\"b\"}}}"
      "\n");
  assert_int_equal(r.last_perr, ACP_RPC_METHOD_NOT_FOUND);
  acp_rpc_session_free(s);
}

static void test_rpc_too_many_incoming_answered_internal_error(void **state) {
  rec r = {.mode = MODE_STORE};
  cfg c = {.max_incoming = 2};
  acp_rpc_session *s = mk(&r, &c, NULL);

  (void)state;
  roundtrip(s,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n"
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\"}\n"
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"m\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32603,"
            "\"message\":\"Too many concurrent requests\"}}\n");
  assert_int_equal(r.nreq, 2);
  assert_int_equal(acp_rpc_session_respond(s, r.handles[0], "1", 1), 0);
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"m\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1}\n");
  assert_int_equal(r.nreq, 3);
  acp_rpc_session_free(s);
}

static void test_rpc_respond_twice_or_unknown_handle_not_found(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  uint64_t h;

  (void)state;
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n");
  h = r.handles[0];
  assert_int_equal(acp_rpc_session_respond_error(s, h, -5, "bad", 3, "[1]", 3),
                   0);
  assert_int_equal(acp_rpc_session_respond(s, h, NULL, 0), ACP_ERR_NOT_FOUND);
  assert_int_equal(acp_rpc_session_respond(s, 12345, NULL, 0),
                   ACP_ERR_NOT_FOUND);
  /* The slot is reused with a new generation: the old handle stays dead. */
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\"}\n");
  assert_true(r.handles[1] != h);
  assert_int_equal(acp_rpc_session_respond(s, h, NULL, 0), ACP_ERR_NOT_FOUND);
  assert_int_equal(
      acp_rpc_session_respond_error(s, r.handles[1], 7, "x", 1, NULL, 0), 0);
  drain(s);
  assert_string_equal(out,
                      "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-5,"
                      "\"message\":\"bad\",\"data\":[1]}}\n"
                      "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":7,"
                      "\"message\":\"x\"}}\n");
  acp_rpc_session_free(s);
}

/* Error codes are written by the session's own integer formatting (two
 * digits a step): every digit count, both signs, and the int64 ends,
 * against snprintf. */
static void test_rpc_error_codes_every_digit_count(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  int64_t codes[96];
  size_t n = 0, i;
  int64_t p = 1;
  char want[160];

  (void)state;
  for (i = 0; i < 18; i++) { /* 1, 9, 10, 99, 100, ... 10^17, 10^18 - 1 */
    codes[n++] = p;
    codes[n++] = -p;
    codes[n++] = p * 10 - 1;
    codes[n++] = -(p * 10 - 1);
    p *= 10;
  }
  codes[n++] = p; /* 10^18 */
  codes[n++] = -p;
  codes[n++] = 0;
  codes[n++] = INT64_MAX;
  codes[n++] = INT64_MIN;
  codes[n++] = -32602;
  for (i = 0; i < n; i++) {
    reset_out();
    feed(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n");
    assert_int_equal(r.nreq, (int)i + 1);
    assert_int_equal(acp_rpc_session_respond_error(s, r.handles[r.nhandles - 1],
                                                   codes[i], "x", 1, NULL, 0),
                     0);
    drain(s);
    snprintf(want, sizeof(want),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":%lld,"
             "\"message\":\"x\"}}\n",
             (long long)codes[i]);
    assert_string_equal(out, want);
  }
  acp_rpc_session_free(s);
}

/* MARK: - Invalid input */

static void test_rpc_parse_errors_and_invalid_utf8(void **state) {
  rec r = {.mode = MODE_ECHO};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  const char *pe =
      "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
      "\"message\":\"Parse error\"}}\n";

  (void)state;
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\n", pe);
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}\n", pe);
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"} x\n", pe);
  assert_int_equal(r.last_perr, ACP_RPC_PARSE_ERROR);
  assert_int_equal(r.nreq, 0);
  /* The connection continues. */
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}\n");
  acp_rpc_session_free(s);
}

#define INV(id, why)                                                           \
  "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"error\":{\"code\":-32600,\"message\":" \
  "\"Invalid Request\",\"data\":\"" why "\"}}\n"

static void test_rpc_invalid_requests_answered_invalid_request(void **state) {
  rec r = {.mode = MODE_ECHO};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  roundtrip(s, "1\n", INV("null", "message must be an object"));
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"m\"}\n",
            INV("null", "id must be a string, number or null"));
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"m\"}\n",
            INV("null", "id must be a string, number or null"));
  roundtrip(s, "{\"jsonrpc\":\"1.0\",\"id\":5,\"method\":\"m\"}\n",
            INV("5", "jsonrpc must be \\\"2.0\\\""));
  roundtrip(s, "{\"id\":\"x\",\"method\":\"m\"}\n",
            INV("\"x\"", "jsonrpc must be \\\"2.0\\\""));
  roundtrip(s, "{\"jsonrpc\":2.0,\"id\":5,\"method\":\"m\"}\n",
            INV("5", "jsonrpc must be \\\"2.0\\\""));
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":5}\n",
            INV("5", "method is missing"));
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":1}\n",
            INV("5", "method must be a string"));
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"m\",\"params\":1}\n",
            INV("5", "params must be an object or an array"));
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":\"s\"}\n",
            INV("null", "params must be an object or an array"));
  assert_int_equal(r.nreq, 0);
  assert_int_equal(r.nnotif, 0);
  assert_int_equal(r.nperr, 10);
  assert_int_equal(r.last_perr, ACP_RPC_INVALID_REQUEST);
  acp_rpc_session_free(s);
}

static void test_rpc_bad_responses_reported_not_answered(void **state) {
  rec r = {.mode = MODE_ECHO};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":1}\n", "");
  assert_int_equal(r.nperr, 1);
  assert_int_equal(r.last_perr, 0);
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"result\":1}\n", "");
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":[],\"error\":{}}\n", "");
  roundtrip(s, "{\"jsonrpc\":\"1.0\",\"id\":0,\"result\":1}\n", "");
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":1}}\n",
            "");
  assert_int_equal(r.nperr, 5);
  acp_rpc_session_free(s);
}

static void test_rpc_overlong_line_skipped_and_answered(void **state) {
  rec r = {.mode = MODE_ECHO};
  cfg c = {.max_line = 40};
  acp_rpc_session *s = mk(&r, &c, NULL);
  const char *err =
      "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
      "\"message\":\"Message exceeds 40 bytes\"}}\n";
  const char *ok40 = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"abcd\"}";
  char line[128];
  int i;

  (void)state;
  assert_int_equal(strlen(ok40), 40);
  /* Exactly the cap is fine, with or without '\r'. */
  snprintf(line, sizeof(line), "%s\r\n", ok40);
  roundtrip(s, line, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}\n");
  snprintf(line, sizeof(line), "%s \n", ok40);
  roundtrip(s, line, err);
  assert_int_equal(r.last_perr, ACP_RPC_INVALID_REQUEST);
  /* Over many recv calls: answered once, nothing buffered, then continue. */
  reset_out();
  for (i = 0; i < 1000; i++)
    feed(s, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
  feed(s, "yyy\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\"}\n");
  drain(s);
  assert_string_equal(out,
                      "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":"
                      "-32600,\"message\":\"Message exceeds 40 bytes\"}}\n"
                      "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":null}\n");
  /* A partial line growing past the cap. */
  reset_out();
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":3,");
  feed(s, "\"method\":\"mmmmmmmmmmmmmmmmmmmmmmmmmm");
  feed(s, "\"}\n");
  drain(s);
  assert_string_equal(out, err);
  assert_int_equal(r.nreq, 2);
  acp_rpc_session_free(s);
}

/* MARK: - Outgoing requests */

/* Names past eight bytes: the scan goes eight bytes a step, and a byte to
 * escape in any step or in the tail still gets escaped. */
static void test_rpc_long_method_names_escaped_in_every_step(void **state) {
  rec r = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  static const struct {
    const char *name;
    size_t len;
  } names[] = {
      {"session/update_long_name", 24},
      {"abcdefgh\"ij", 11},
      {"abcdefghijklmno\\", 16},
      {"abcdefghijklmnop\n", 17},
      {"abcdefgh\xc3\xa9", 10},
      {"abcdefg\x01", 8},
      {"ab\"defghij", 10},
  };
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    assert_int_equal(
        acp_rpc_session_notify(s, names[i].name, names[i].len, NULL, 0), 0);
  drain(s);
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update_long_name\"}\n"
           "{\"jsonrpc\":\"2.0\",\"method\":\"abcdefgh\\\"ij\"}\n"
           "{\"jsonrpc\":\"2.0\",\"method\":\"abcdefghijklmno\\\\\"}\n"
           "{\"jsonrpc\":\"2.0\",\"method\":\"abcdefghijklmnop\\n\"}\n"
           "{\"jsonrpc\":\"2.0\",\"method\":\"abcdefgh\xc3\xa9\"}\n"
           "{\"jsonrpc\":\"2.0\",\"method\":\"abcdefg\\u0001\"}\n"
           "{\"jsonrpc\":\"2.0\",\"method\":\"ab\\\"defghij\"}\n");
  acp_rpc_session_free(s);
}

/* Method names of every length up to 40, plain or with one byte to escape
 * (or to pass as is: 0x7f, UTF-8) at every offset: the envelope's eight-
 * bytes-a-step check ends with an overlapping last step, so a byte missed
 * there would go out unescaped. The line must equal what the JSON writer
 * makes of the same name. */
static void test_rpc_method_names_every_length_and_offset(void **state) {
  static const char *const specials[] = {
      "", "\"", "\\", "\n", "\x01", "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac"};
  rec r = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  acp_json_writer *w = NULL;
  char name[96];
  char want[512];
  size_t k, len, at, i;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  for (k = 0; k < sizeof(specials) / sizeof(specials[0]); k++) {
    size_t sl = strlen(specials[k]);
    for (len = sl ? sl : 1; len <= 80; len++) {
      for (at = 0; at + sl <= len; at++) {
        const char *d;
        size_t dn;
        for (i = 0; i < len; i++)
          name[i] = (char)('a' + (i * 5) % 26);
        memcpy(name + at, specials[k], sl);
        acp_json_writer_reset(w);
        assert_int_equal(acp_json_write_str(w, name, len), 0);
        d = acp_json_writer_data(w, &dn);
        assert_true(dn + 40 < sizeof(want));
        snprintf(want, sizeof(want), "{\"jsonrpc\":\"2.0\",\"method\":%.*s}\n",
                 (int)dn, d);
        reset_out();
        assert_int_equal(acp_rpc_session_notify(s, name, len, NULL, 0), 0);
        drain(s);
        assert_string_equal(out, want);
        if (sl == 0)
          break;
      }
    }
  }
  acp_json_writer_free(w);
  acp_rpc_session_free(s);
}

/* String parts of a message's params (a session id, a short text) are
 * escaped as the JSON writer escapes them, whatever the length (short ones
 * are checked 16, 8 or 4 bytes a step) and wherever a byte that needs
 * escaping sits; an invalid one fails the message and leaves no output. */
static void test_rpc_string_parts_every_length_and_offset(void **state) {
  static const char *const specials[] = {
      "",     "\"",   "\\",   "\n",       "\x01",         "\x1f",
      "\x7f", "\x80", "\xff", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
      "\xc3"};
  rec r = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  acp_json_writer *w = NULL;
  char text[112];
  char want[512];
  size_t k, len, at, i;

  (void)state;
  assert_int_equal(acp_json_writer_new(&w, 0, NULL), 0);
  for (k = 0; k < sizeof(specials) / sizeof(specials[0]); k++) {
    size_t sl = strlen(specials[k]);
    for (len = sl; len <= 100; len++) {
      for (at = 0; at + sl <= len; at++) {
        acp__rpc_part parts[] = {ACP__PART_LIT("{\"t\":"),
                                 ACP__PART_STR(text, len), ACP__PART_LIT("}")};
        const char *d;
        size_t dn;
        int wrv;
        for (i = 0; i < len; i++)
          text[i] = (char)('A' + (i * 7) % 26);
        memcpy(text + at, specials[k], sl);
        acp_json_writer_reset(w);
        wrv = acp_json_write_str(w, text, len);
        reset_out();
        if (wrv != 0) {
          assert_true(acp__rpc_notify_parts(s, "m", 1, parts, 3) != 0);
          assert_false(acp_rpc_session_want_write(s));
          if (sl == 0)
            break;
          continue;
        }
        d = acp_json_writer_data(w, &dn);
        assert_true(dn + 60 < sizeof(want));
        snprintf(
            want, sizeof(want),
            "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"t\":%.*s}}\n",
            (int)dn, d);
        assert_int_equal(acp__rpc_notify_parts(s, "m", 1, parts, 3), 0);
        drain(s);
        assert_string_equal(out, want);
        if (sl == 0)
          break;
      }
    }
  }
  acp_json_writer_free(w);
  acp_rpc_session_free(s);
}

/* An envelope key that differs from one of the six names in one byte (at
 * every offset), or is one byte shorter or longer, is not that key: the
 * compare of the one candidate picked by the first byte must look at
 * every byte. */
static void test_rpc_envelope_key_near_misses(void **state) {
  static const char *const names[] = {"jsonrpc", "id",     "method",
                                      "params",  "result", "error"};
  rec r = {.mode = MODE_ECHO};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  char key[16];
  char in[160];
  const char *want;
  size_t n, j, len;
  int v;

  (void)state;
  for (n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
    len = strlen(names[n]);
    for (v = 0; v < (int)len + 2; v++) {
      memcpy(key, names[n], len + 1);
      if (v < (int)len) {
        j = (size_t)v;
        key[j] = (char)(key[j] ^ 0x20); /* the same letter, other case */
      } else if (v == (int)len) {
        key[len - 1] = '\0';
      } else {
        key[len] = 'x';
        key[len + 1] = '\0';
      }
      switch (n) {
      case 0:
        snprintf(in, sizeof(in), "{\"%s\":\"2.0\",\"id\":5,\"method\":\"m\"}\n",
                 key);
        want = INV("5", "jsonrpc must be \\\"2.0\\\"");
        break;
      case 1: /* not an id: a notification, not answered */
        snprintf(in, sizeof(in),
                 "{\"jsonrpc\":\"2.0\",\"%s\":{},\"method\":\"m\"}\n", key);
        want = "";
        break;
      case 2:
        snprintf(in, sizeof(in),
                 "{\"jsonrpc\":\"2.0\",\"id\":5,\"%s\":\"m\"}\n", key);
        want = INV("5", "method is missing");
        break;
      case 3: /* not params: ignored, the echo answers null */
        snprintf(in, sizeof(in),
                 "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"m\",\"%s\":1}\n",
                 key);
        want = "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":null}\n";
        break;
      default: /* not a response: a request without a method */
        snprintf(in, sizeof(in), "{\"jsonrpc\":\"2.0\",\"id\":99,\"%s\":1}\n",
                 key);
        want = INV("99", "method is missing");
        break;
      }
      roundtrip(s, in, want);
    }
  }
  /* "jsonrpc" is exactly "2.0", escaped or not */
  {
    static const char *const bad[] = {"2.1",  "2.00",     "3.0", "2,0",
                                      "2.",   "20",       "",    " 2.0",
                                      "2.0 ", "2\\u002e1"};
    char line[128];
    size_t b;
    for (b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
      snprintf(line, sizeof(line),
               "{\"jsonrpc\":\"%s\",\"id\":5,\"method\":\"m\"}\n", bad[b]);
      roundtrip(s, line, INV("5", "jsonrpc must be \\\"2.0\\\""));
    }
    roundtrip(s, "{\"jsonrpc\":\"2\\u002e0\",\"id\":6,\"method\":\"m\"}\n",
              "{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":null}\n");
  }
  /* and the exact names still work */
  roundtrip(
      s, "{\"params\":[7],\"method\":\"m\",\"id\":\"k\",\"jsonrpc\":\"2.0\"}\n",
      "{\"jsonrpc\":\"2.0\",\"id\":\"k\",\"result\":[7]}\n");
  acp_rpc_session_free(s);
}

/*
 * ACP__RPC_METHOD_LIT: a method the library marks as its own literal is
 * written with the bytes the unmarked method gives (request and
 * notification); the mark is not the public API's: a length carrying it is
 * refused there, with nothing queued.
 */
static void test_rpc_method_literal_mark(void **state) {
  static const char *const names[] = {"session/prompt", "session/update", "a",
                                      "tools/call", ""};
  acp__rpc_part parts[] = {ACP__PART_LIT("{\"x\":"), ACP__PART_STR("y", 1),
                           ACP__PART_LIT("}")};
  char plain[512];
  size_t i;

  (void)state;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    rec r = {0};
    acp_rpc_session *s = mk(&r, NULL, NULL);
    size_t n = strlen(names[i]);
    int64_t id;

    reset_out();
    assert_int_equal(
        acp__rpc_request_parts(s, names[i], n, parts, 3, 0, 0, NULL, NULL, &id),
        0);
    assert_int_equal(acp__rpc_notify_parts(s, names[i], n, parts, 3), 0);
    drain(s);
    assert_true(out_len < sizeof(plain));
    memcpy(plain, out, out_len + 1);
    acp_rpc_session_free(s);

    s = mk(&r, NULL, NULL);
    reset_out();
    assert_int_equal(acp__rpc_request_parts(s, names[i],
                                            n | ACP__RPC_METHOD_LIT, parts, 3,
                                            0, 0, NULL, NULL, &id),
                     0);
    assert_int_equal(
        acp__rpc_notify_parts(s, names[i], n | ACP__RPC_METHOD_LIT, parts, 3),
        0);
    drain(s);
    assert_string_equal(out, plain);
    /* The public functions refuse the mark and queue nothing. */
    assert_int_equal(acp_rpc_session_request(s, names[i],
                                             n | ACP__RPC_METHOD_LIT, NULL, 0,
                                             0, 0, NULL, NULL, &id),
                     ACP_ERR_INVALID_ARGUMENT);
    assert_int_equal(
        acp_rpc_session_notify(s, names[i], n | ACP__RPC_METHOD_LIT, NULL, 0),
        ACP_ERR_INVALID_ARGUMENT);
    assert_false(acp_rpc_session_want_write(s));
    assert_int_equal(acp_rpc_session_pending(s), 1);
    acp_rpc_session_free(s);
  }
}

static void test_rpc_request_serialized_and_response_routed(void **state) {
  rec r = {0};
  rec r2 = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  int64_t id = -1;

  (void)state;
  assert_int_equal(acp_rpc_session_request(s, "a/b", 3, "{\"x\":1}", 7, 0, 0,
                                           on_response, &r2, &id),
                   0);
  assert_int_equal(id, 0);
  assert_int_equal(acp_rpc_session_request(s, "q\"\n\xc3\xa9", 5, NULL, 0, 0, 0,
                                           on_response, &r2, &id),
                   0);
  assert_int_equal(id, 1);
  assert_int_equal(acp_rpc_session_notify(s, "n", 1, "[]", 2), 0);
  assert_int_equal(acp_rpc_session_notify(s, "n", 1, NULL, 0), 0);
  assert_int_equal(acp_rpc_session_pending(s), 2);
  assert_true(acp_rpc_session_want_write(s));
  drain(s);
  assert_false(acp_rpc_session_want_write(s));
  assert_string_equal(
      out,
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"a/b\",\"params\":{\"x\":1}}"
      "\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"q\\\"\\n\xc3\xa9\"}\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":[]}\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n");
  /* Responses in any order, each callback once. */
  roundtrip(s,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,"
            "\"message\":\"auth\",\"data\":5}}\n",
            "");
  assert_int_equal(r2.nresp, 1);
  assert_int_equal(r2.err_code, -32000);
  assert_string_equal(r2.err_msg, "auth");
  assert_false(r2.local);
  roundtrip(s, "{\"result\":{\"ok\":true},\"id\":0,\"jsonrpc\":\"2.0\"}\n", "");
  assert_int_equal(r2.nresp, 2);
  assert_true(r2.had_result);
  assert_string_equal(r2.result, "{\"ok\":true}");
  assert_int_equal(acp_rpc_session_pending(s), 0);
  /* A second answer is an unknown id. */
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":1}\n", "");
  assert_int_equal(r2.nresp, 2);
  assert_int_equal(r.nperr, 1);
  acp_rpc_session_free(s);
}

static void test_rpc_response_with_result_and_error_dropped(void **state) {
  rec r = {0};
  rec r2 = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, on_response, &r2, NULL),
      0);
  drain(s);
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":1,\"error\":{}}\n",
            "");
  assert_int_equal(r2.nresp, 0);
  assert_int_equal(r.nperr, 1);
  assert_int_equal(acp_rpc_session_pending(s), 1);
  acp_rpc_session_free(s);
}

static void test_rpc_timeout_completes_locally_and_cancels(void **state) {
  rec r = {0};
  rec r2 = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  assert_int_equal(acp_rpc_session_get_expiry(s), UINT64_MAX);
  assert_int_equal(acp_rpc_session_request(s, "a", 1, NULL, 0, 500, 1000,
                                           on_response, &r2, NULL),
                   0);
  assert_int_equal(acp_rpc_session_request(s, "b", 1, NULL, 0, 100, 1000,
                                           on_response, &r2, NULL),
                   0);
  assert_int_equal(acp_rpc_session_request(s, "c", 1, NULL, 0, 0, 1000,
                                           on_response, &r2, NULL),
                   0);
  drain(s);
  reset_out();
  assert_int_equal(acp_rpc_session_get_expiry(s), 1100);
  assert_int_equal(acp_rpc_session_handle_expiry(s, 1099), 0);
  assert_int_equal(r2.nresp, 0);
  assert_int_equal(acp_rpc_session_handle_expiry(s, 1100), 0);
  assert_int_equal(r2.nresp, 1);
  assert_true(r2.local);
  assert_int_equal(r2.err_code, ACP_RPC_REQUEST_TIMEOUT);
  assert_string_equal(
      r2.resp_raw, "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32001,"
                   "\"message\":\"Request timed out\"}}");
  drain(s);
  assert_string_equal(out,
                      "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                      "\"params\":{\"requestId\":1}}\n");
  assert_int_equal(acp_rpc_session_get_expiry(s), 1500);
  /* The late answer is ignored silently. */
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1}\n", "");
  assert_int_equal(r.nperr, 0);
  assert_int_equal(r2.nresp, 1);
  assert_int_equal(acp_rpc_session_handle_expiry(s, 5000), 0);
  assert_int_equal(r2.nresp, 2);
  assert_int_equal(acp_rpc_session_get_expiry(s), UINT64_MAX);
  assert_int_equal(acp_rpc_session_pending(s), 1);
  acp_rpc_session_free(s);
}

static void test_rpc_cancel_styles_and_local_completion(void **state) {
  rec r = {0};
  rec r2 = {0};
  cfg c = {.mcp = 1};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  acp_rpc_session *m;

  (void)state;
  assert_int_equal(acp_rpc_session_cancel(s, 0, ACP_RPC_CANCEL_NOTIFY, 0),
                   ACP_ERR_NOT_FOUND);
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, on_response, &r2, NULL),
      0);
  drain(s);
  reset_out();
  assert_int_equal(acp_rpc_session_cancel(s, 0, ACP_RPC_CANCEL_NOTIFY, 0), 0);
  assert_int_equal(r2.nresp, 0);
  assert_int_equal(acp_rpc_session_pending(s), 1);
  assert_int_equal(
      acp_rpc_session_cancel(
          s, 0, ACP_RPC_CANCEL_NOTIFY | ACP_RPC_CANCEL_COMPLETE, 0),
      0);
  assert_int_equal(r2.nresp, 1);
  assert_true(r2.local);
  assert_int_equal(r2.err_code, ACP_RPC_REQUEST_CANCELLED);
  assert_int_equal(acp_rpc_session_pending(s), 0);
  drain(s);
  assert_string_equal(out,
                      "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                      "\"params\":{\"requestId\":0}}\n"
                      "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
                      "\"params\":{\"requestId\":0}}\n");
  roundtrip(s,
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{\"code\":-32800,"
            "\"message\":\"c\"}}\n",
            "");
  assert_int_equal(r.nperr, 0);
  acp_rpc_session_free(s);

  m = mk(&r, &c, NULL);
  assert_int_equal(
      acp_rpc_session_request(m, "m", 1, NULL, 0, 0, 0, NULL, NULL, NULL), 0);
  drain(m);
  reset_out();
  assert_int_equal(acp_rpc_session_cancel(m, 0, ACP_RPC_CANCEL_NOTIFY, 0), 0);
  drain(m);
  assert_string_equal(
      out, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
           "\"params\":{\"requestId\":0,\"reason\":\"Request "
           "cancelled\"}}\n");
  acp_rpc_session_free(m);
}

/* MARK: - Incoming cancellation */

static void test_rpc_incoming_cancel_matches_by_value(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"m\"}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0062\",\"method\":\"m\"}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":\"m\"}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":123456789012345678901234,"
          "\"method\":\"m\"}\n");
  assert_int_equal(r.nreq, 4);
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":1.0e1}}\n");
  assert_int_equal(r.ncancel, 1);
  assert_true(r.cancelled[0] == r.handles[0]);
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":\"ab\"}}\n");
  assert_int_equal(r.ncancel, 2);
  assert_true(r.cancelled[1] == r.handles[1]);
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":\"\\u0063\"}}\n");
  assert_int_equal(r.ncancel, 3);
  assert_true(r.cancelled[2] == r.handles[2]);
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":1234567890123456789012340e-1}}\n");
  assert_int_equal(r.ncancel, 4);
  assert_true(r.cancelled[3] == r.handles[3]);
  /* No match: different type, different value, unknown id. */
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":\"10\"}}\n"
          "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":123456789012345678901235}}\n"
          "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":-10}}\n"
          "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{}}\n");
  assert_int_equal(r.ncancel, 4);
  assert_int_equal(r.nnotif, 0);
  /* MCP-style notification is an ordinary notification in ACP style. */
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
          "\"params\":{\"requestId\":10}}\n");
  assert_int_equal(r.ncancel, 4);
  assert_int_equal(r.nnotif, 1);
  /* Once answered, a cancel no longer matches. */
  assert_int_equal(acp_rpc_session_respond(s, r.handles[0], NULL, 0), 0);
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":10}}\n");
  assert_int_equal(r.ncancel, 4);
  acp_rpc_session_free(s);
}

/* With more requests in flight than the table's first sizes, cancels go
 * through the index of ids by value: every form of a number (1.0e1 for
 * 10) and of a string (escaped or not) finds its request, through
 * answers (gone entries) and growth; answered and never-sent ids find
 * nothing. */
static void cancel_id_text(char *b, size_t n, int i, bool as_cancel) {
  switch (i % 4) {
  case 0: /* a number; cancelled as a decimal */
    snprintf(b, n, as_cancel ? "%d.0" : "%d", i);
    break;
  case 1: /* a string; cancelled with its first letter escaped */
    snprintf(b, n, as_cancel ? "\"\\u0073%d\"" : "\"s%d\"", i);
    break;
  case 2: /* an escaped string; cancelled plain */
    snprintf(b, n, as_cancel ? "\"t%d\"" : "\"\\u0074%d\"", i);
    break;
  default: /* an exponent form; cancelled as an integer */
    snprintf(b, n, as_cancel ? "%d" : "%d00e-2", i);
    break;
  }
}

static void cancel_one(acp_rpc_session *s, rec *r, int i, bool match) {
  char id[64];
  char line[160];

  cancel_id_text(id, sizeof(id), i, true);
  snprintf(line, sizeof(line),
           "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
           "\"params\":{\"requestId\":%s}}\n",
           id);
  r->ncancel = 0;
  feed(s, line);
  if (!match) {
    if (r->ncancel != 0)
      fail_msg("cancel of %s matched an answered request", id);
    return;
  }
  if (r->ncancel != 1 || r->cancelled[0] != r->handles[i])
    fail_msg("cancel of %s did not find request %d", id, i);
}

static void test_rpc_incoming_cancel_indexed(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  char id[64];
  char line[160];
  int i;

  (void)state;
  for (i = 0; i < 256; i++) {
    cancel_id_text(id, sizeof(id), i, false);
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"m\"}\n", id);
    feed(s, line);
  }
  assert_int_equal(r.nreq, 256);
  assert_int_equal(acp_rpc_session_incoming(s), 256);
  for (i = 0; i < 256; i += 3)
    cancel_one(s, &r, i, true);
  /* Answer every other one: their entries are gone from the index. */
  for (i = 0; i < 256; i += 2)
    assert_int_equal(acp_rpc_session_respond(s, r.handles[i], NULL, 0), 0);
  for (i = 0; i < 256; i++)
    cancel_one(s, &r, i, i % 2 == 1);
  /* Not ids in flight: the string "10" for the number 10, values never
   * sent, a null. */
  r.ncancel = 0;
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":\"11\"}}\n"
          "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":-11}}\n"
          "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":\"s12\"}}\n"
          "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":null}}\n");
  assert_int_equal(r.ncancel, 0);
  /* Answer the rest and send as many new ones (the slots and the index
   * are reused; the index grows past its gone entries). */
  for (i = 1; i < 256; i += 2)
    assert_int_equal(acp_rpc_session_respond(s, r.handles[i], NULL, 0), 0);
  assert_int_equal(acp_rpc_session_incoming(s), 0);
  r.nhandles = 0;
  for (i = 0; i < 256; i++) {
    cancel_id_text(id, sizeof(id), i, false);
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"m\"}\n", id);
    feed(s, line);
  }
  for (i = 255; i >= 0; i--)
    cancel_one(s, &r, i, true);
  /* Zero has one value, whatever its sign or form: request 0 (id 0). */
  r.ncancel = 0;
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":-0.0e5}}\n");
  assert_int_equal(r.ncancel, 1);
  assert_true(r.cancelled[0] == r.handles[0]);
  acp_rpc_session_free(s);
}

/* Many requests in flight with one id (a peer's fault, but one it can
 * commit): each cancel of that id finds one of them still unanswered,
 * until all are answered; the other ids are still found. */
static void test_rpc_incoming_cancel_duplicate_ids(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  bool answered[256] = {false};
  char line[128];
  int i, k;

  (void)state;
  for (i = 0; i < 65; i++) { /* past the 64 slots where the index starts */
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"m\"}\n", 1000 + i);
    feed(s, line);
  }
  for (i = 0; i < 180; i++)
    feed(s, "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"m\"}\n");
  assert_int_equal(r.nhandles, 245);
  for (k = 0; k < 180; k++) {
    r.ncancel = 0;
    feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
            "\"params\":{\"requestId\":\"d\"}}\n");
    assert_int_equal(r.ncancel, 1);
    for (i = 65; i < 245 && r.handles[i] != r.cancelled[0]; i++)
      ;
    assert_true(i < 245);
    assert_false(answered[i]);
    answered[i] = true;
    assert_int_equal(acp_rpc_session_respond(s, r.handles[i], NULL, 0), 0);
    if (k % 60 == 0) {
      r.ncancel = 0;
      snprintf(line, sizeof(line),
               "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
               "\"params\":{\"requestId\":%d}}\n",
               1000 + k / 60);
      feed(s, line);
      assert_int_equal(r.ncancel, 1);
      assert_true(r.cancelled[0] == r.handles[k / 60]);
    }
  }
  r.ncancel = 0;
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":\"d\"}}\n");
  assert_int_equal(r.ncancel, 0);
  assert_int_equal(acp_rpc_session_incoming(s), 65);
  acp_rpc_session_free(s);
}

static void test_rpc_incoming_cancel_mcp_style(void **state) {
  rec r = {.mode = MODE_STORE};
  cfg c = {.mcp = 1};
  acp_rpc_session *s = mk(&r, &c, NULL);

  (void)state;
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"m\"}\n"
          "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
          "\"params\":{\"requestId\":0}}\n");
  assert_int_equal(r.ncancel, 0);
  assert_int_equal(r.nnotif, 1);
  feed(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
          "\"params\":{\"requestId\":0,\"reason\":\"x\"}}\n");
  assert_int_equal(r.ncancel, 1);
  assert_int_equal(r.nnotif, 1);
  acp_rpc_session_free(s);
}

/* MARK: - Batches */

static void test_rpc_batch_mixed_answered_as_one_array(void **state) {
  rec r = {.mode = MODE_ECHO};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  roundtrip(s,
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":[1]},"
            "{\"jsonrpc\":\"2.0\",\"method\":\"n\"},1,[],"
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}]\n",
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1]},"
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
            "\"message\":\"Invalid Request\",\"data\":\"message must be an "
            "object\"}},"
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
            "\"message\":\"Invalid Request\",\"data\":\"nested batch\"}},"
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":null}]\n");
  assert_true(r.in_batch);
  assert_int_equal(r.nnotif, 1);
  roundtrip(s, "[{\"jsonrpc\":\"2.0\",\"method\":\"n\"}]\n", "");
  roundtrip(s, "[]\n", INV("null", "empty batch"));
  roundtrip(s, " [ ] \n", INV("null", "empty batch"));
  acp_rpc_session_free(s);
}

static void test_rpc_batch_with_deferred_answers(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  roundtrip(s,
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"},"
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}]\n"
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"c\"}\n",
            "");
  assert_int_equal(acp_rpc_session_respond(s, r.handles[2], "3", 1), 0);
  assert_int_equal(acp_rpc_session_respond(s, r.handles[1], "2", 1), 0);
  drain(s);
  assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":3}\n");
  reset_out();
  assert_int_equal(
      acp_rpc_session_respond_error(s, r.handles[0], 1, "e", 1, NULL, 0), 0);
  drain(s);
  assert_string_equal(out,
                      "[{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":2},"
                      "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,"
                      "\"message\":\"e\"}}]\n");
  acp_rpc_session_free(s);
}

static void test_rpc_batches_off_answers_invalid_request(void **state) {
  rec r = {.mode = MODE_ECHO};
  cfg c = {.batches_off = 1};
  acp_rpc_session *s = mk(&r, &c, NULL);

  (void)state;
  roundtrip(s, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}]\n",
            INV("null", "batches are not supported"));
  assert_int_equal(r.nreq, 0);
  acp_rpc_session_free(s);
}

static void test_rpc_batch_of_responses(void **state) {
  rec r = {0};
  rec r2 = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, on_response, &r2, NULL),
      0);
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, on_response, &r2, NULL),
      0);
  drain(s);
  roundtrip(s,
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1},"
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":0},"
            "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":0}]\n",
            "");
  assert_int_equal(r2.nresp, 2);
  assert_int_equal(r.nperr, 1);
  acp_rpc_session_free(s);
}

/* MARK: - Callback contract */

static void test_rpc_pause_returns_consumed_bytes(void **state) {
  rec r = {.mode = MODE_PAUSE};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  const char *l1 = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n";
  char in[256];
  acp_ssize n;

  (void)state;
  snprintf(in, sizeof(in), "%s%s%s", l1, l1, l1);
  n = acp_rpc_session_recv(s, in, strlen(in), 0);
  assert_int_equal(n, (acp_ssize)strlen(l1));
  assert_int_equal(r.nreq, 1);
  n = acp_rpc_session_recv(s, in + strlen(l1), strlen(in) - strlen(l1), 0);
  assert_int_equal(n, (acp_ssize)strlen(l1));
  r.mode = MODE_STORE;
  n = acp_rpc_session_recv(s, in + 2 * strlen(l1), strlen(l1), 0);
  assert_int_equal(n, (acp_ssize)strlen(l1));
  assert_int_equal(r.nreq, 3);
  acp_rpc_session_free(s);
}

static void test_rpc_pause_in_batch_takes_effect_after_batch(void **state) {
  rec r = {.mode = MODE_PAUSE};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  const char *b = "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"},"
                  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\"}]\n";
  char in[256];
  acp_ssize n;

  (void)state;
  snprintf(in, sizeof(in), "%s%s", b, b);
  n = acp_rpc_session_recv(s, in, strlen(in), 0);
  assert_int_equal(n, (acp_ssize)strlen(b));
  assert_int_equal(r.nreq, 2);
  assert_int_equal(acp_rpc_session_respond(s, r.handles[1], "2", 1), 0);
  assert_int_equal(acp_rpc_session_respond(s, r.handles[0], "1", 1), 0);
  drain(s);
  assert_string_equal(out, "[{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":2},"
                           "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1}]\n");
  acp_rpc_session_free(s);
}

static int answer_then_fail(acp_rpc_session *s, const acp_rpc_msg *msg,
                            void *ud) {
  int *calls = ud;

  if ((*calls)++ == 0)
    return acp_rpc_session_respond(s, msg->handle, "1", 1);
  return -1;
}

/* Regression (integration tests): a reply queued before a callback failed
 * must still be handed out once, so the peer gets it. */
static void test_rpc_send_after_fatal_delivers_queued_lines(void **state) {
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_session *s = NULL;
  int calls = 0;
  const char *in = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n"
                   "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}\n";
  const char *want = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1}\n";
  const char *d;
  acp_ssize n;

  (void)state;
  assert_int_equal(acp_rpc_callbacks_new(&cbs), 0);
  acp_rpc_callbacks_set_on_request(cbs, answer_then_fail);
  assert_int_equal(acp_rpc_session_new(&s, cbs, &calls, NULL, NULL), 0);
  assert_int_equal(acp_rpc_session_recv(s, in, strlen(in), 0),
                   ACP_ERR_CALLBACK_FAILURE);
  n = acp_rpc_session_send(s, &d);
  assert_int_equal(n, (acp_ssize)strlen(want));
  assert_memory_equal(d, want, strlen(want));
  assert_int_equal(acp_rpc_session_send(s, &d), ACP_ERR_INVALID_STATE);
  acp_rpc_session_free(s);
  acp_rpc_callbacks_free(cbs);
}

static void test_rpc_callback_failure_is_fatal(void **state) {
  rec r = {.mode = MODE_FAIL};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  const char *l1 = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n";
  const char *d;

  (void)state;
  assert_int_equal(acp_rpc_session_recv(s, l1, strlen(l1), 0),
                   ACP_ERR_CALLBACK_FAILURE);
  assert_string_not_equal(acp_rpc_session_errmsg(s), "");
  assert_int_equal(acp_rpc_session_recv(s, l1, strlen(l1), 0),
                   ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_rpc_session_send(s, &d), ACP_ERR_INVALID_STATE);
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, NULL, NULL, NULL),
      ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_rpc_session_respond(s, r.handles[0], NULL, 0),
                   ACP_ERR_INVALID_STATE);
  assert_false(acp_rpc_session_want_read(s));
  acp_rpc_session_free(s);
}

static void test_rpc_response_callback_failure_is_fatal(void **state) {
  rec r = {0};
  rec r2 = {.resp_ret = ACP_ERR_PROTOCOL};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  const char *l1 = "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":1}\n";

  (void)state;
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, on_response, &r2, NULL),
      0);
  assert_int_equal(acp_rpc_session_recv(s, l1, strlen(l1), 0),
                   ACP_ERR_CALLBACK_FAILURE);
  acp_rpc_session_free(s);
}

static void test_rpc_reentrant_calls_rejected(void **state) {
  rec r = {.mode = MODE_REENTER};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n");
  assert_int_equal(r.reenter_recv, ACP_ERR_INVALID_STATE);
  assert_int_equal(r.reenter_send, ACP_ERR_INVALID_STATE);
  assert_int_equal(r.reenter_expiry, ACP_ERR_INVALID_STATE);
  assert_int_equal(r.reenter_eof, ACP_ERR_INVALID_STATE);
  assert_true(acp_rpc_session_want_read(s));
  acp_rpc_session_free(s);
}

static void test_rpc_callbacks_may_submit(void **state) {
  rec r = {.mode = MODE_REQUEST};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  roundtrip(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"}\n");
  assert_int_equal(acp_rpc_session_pending(s), 1);
  acp_rpc_session_free(s);
}

/* MARK: - EOF, limits, raw */

static void test_rpc_eof_completes_pending(void **state) {
  rec r = {0};
  rec r2 = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, on_response, &r2, NULL),
      0);
  assert_int_equal(acp_rpc_session_request(s, "m", 1, NULL, 0, 10, 0,
                                           on_response, &r2, NULL),
                   0);
  feed(s, "{\"jsonrpc\":\"2.0\",");
  assert_true(acp_rpc_session_want_read(s));
  assert_int_equal(acp_rpc_session_recv_eof(s, 0), 0);
  assert_int_equal(r.nperr, 1);
  assert_int_equal(r2.nresp, 2);
  assert_true(r2.local);
  assert_int_equal(r2.err_code, ACP_RPC_CONNECTION_CLOSED);
  assert_int_equal(acp_rpc_session_pending(s), 0);
  assert_int_equal(acp_rpc_session_get_expiry(s), UINT64_MAX);
  assert_false(acp_rpc_session_want_read(s));
  assert_int_equal(acp_rpc_session_recv(s, "x", 1, 0), ACP_ERR_INVALID_STATE);
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, NULL, NULL, NULL),
      ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_rpc_session_notify(s, "m", 1, NULL, 0), 0);
  acp_rpc_session_free(s);
}

/* A response callback that asks again (to the peer that comes back). */
static int on_response_ask_again(acp_rpc_session *s, const acp_rpc_msg *msg,
                                 void *ud) {
  rec *r = ud;

  on_response(s, msg, ud);
  if (r->nresp > 1)
    return 0;
  r->reenter_eof = acp_rpc_session_drop_pending(s);
  /* Enough that some land in table slots the drop has not passed yet. */
  for (int i = 0; i < 12; i++) {
    int rv = acp_rpc_session_request(s, "again", 5, NULL, 0, 0, 0, on_response,
                                     r, NULL);
    if (rv != 0)
      return rv;
  }
  return 0;
}

/* A peer gone, the session kept (a resumed remote connection): pending
 * calls end with a local -32099, their late answers are ignored, the
 * session reads and calls on, and a call made from a callback stays. */
static void test_rpc_drop_pending_keeps_the_session(void **state) {
  rec r = {0};
  rec r2 = {0};
  rec r3 = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  assert_int_equal(acp_rpc_session_drop_pending(NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_rpc_session_drop_pending(s), 0); /* none: nothing */
  assert_int_equal(
      acp_rpc_session_request(s, "a", 1, NULL, 0, 0, 0, on_response, &r2, NULL),
      0);
  assert_int_equal(acp_rpc_session_request(s, "b", 1, NULL, 0, 10, 500,
                                           on_response, &r2, NULL),
                   0);
  assert_int_equal(acp_rpc_session_request(s, "c", 1, NULL, 0, 0, 0,
                                           on_response_ask_again, &r3, NULL),
                   0);
  drain(s);
  reset_out();
  feed(s, "{\"jsonrpc\":\"2.0\",");
  assert_int_equal(acp_rpc_session_drop_pending(s), 0);
  assert_int_equal(r2.nresp, 2);
  assert_true(r2.local);
  assert_int_equal(r2.err_code, ACP_RPC_CONNECTION_CLOSED);
  assert_string_equal(r2.err_msg, "Connection closed");
  assert_int_equal(r3.nresp, 1);
  assert_int_equal(r3.err_code, ACP_RPC_CONNECTION_CLOSED);
  /* Inside a callback it is refused; the calls made there (ids 3-14)
   * stay. */
  assert_int_equal(r3.reenter_eof, ACP_ERR_INVALID_STATE);
  assert_int_equal(acp_rpc_session_pending(s), 12);
  assert_int_equal(acp_rpc_session_get_expiry(s), UINT64_MAX);
  assert_true(acp_rpc_session_want_read(s));
  /* The rest of the partial line is still read; the late answers to 0-2
   * are ignored, the answers to 3-14 are delivered. */
  feed(s, "\"id\":0,\"result\":0}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":2}\n");
  assert_int_equal(r.nperr, 0);
  assert_int_equal(r2.nresp, 2);
  assert_int_equal(r3.nresp, 1);
  for (int id = 3; id <= 14; id++) {
    char line[64];
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":%d}\n", id, id);
    feed(s, line);
  }
  assert_int_equal(r.nperr, 0);
  assert_int_equal(r3.nresp, 13);
  assert_int_equal(r3.err_code, 0);
  assert_string_equal(r3.result, "14");
  assert_int_equal(acp_rpc_session_pending(s), 0);
  /* And the session calls on. */
  drain(s);
  reset_out();
  assert_int_equal(
      acp_rpc_session_request(s, "d", 1, NULL, 0, 0, 0, on_response, &r2, NULL),
      0);
  drain(s);
  assert_string_equal(out,
                      "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"d\"}\n");
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":15,\"result\":15}\n");
  assert_int_equal(r2.nresp, 3);
  assert_string_equal(r2.result, "15");
  acp_rpc_session_free(s);
}

static void test_rpc_output_and_pending_limits(void **state) {
  rec r = {.mode = MODE_STORE};
  cfg c = {.max_output = 100, .max_pending = 2};
  acp_rpc_session *s = mk(&r, &c, NULL);
  char big[200];

  (void)state;
  memset(big, ' ', sizeof(big));
  big[0] = '1';
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, big, 150, 0, 0, NULL, NULL, NULL),
      ACP_ERR_LIMIT);
  assert_false(acp_rpc_session_want_write(s));
  assert_int_equal(acp_rpc_session_pending(s), 0);
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, NULL, NULL, NULL), 0);
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, NULL, NULL, NULL), 0);
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 0, 0, NULL, NULL, NULL),
      ACP_ERR_LIMIT);
  drain(s);
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n");
  assert_int_equal(acp_rpc_session_respond(s, r.handles[0], big, 150),
                   ACP_ERR_LIMIT);
  assert_int_equal(acp_rpc_session_respond(s, r.handles[0], "1", 1), 0);
  acp_rpc_session_free(s);
}

static void test_rpc_invalid_utf8_error_message_rejected(void **state) {
  rec r = {.mode = MODE_STORE};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  feed(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n");
  assert_int_equal(
      acp_rpc_session_respond_error(s, r.handles[0], 1, "\xc3", 1, NULL, 0),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_rpc_session_incoming(s), 1);
  assert_false(acp_rpc_session_want_write(s));
  assert_int_equal(
      acp_rpc_session_respond_error(s, r.handles[0], 1, "\xc3\xa9", 2, NULL, 0),
      0);
  drain(s);
  assert_string_equal(out,
                      "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,"
                      "\"message\":\"\xc3\xa9\"}}\n");
  acp_rpc_session_free(s);
}

static void test_rpc_send_raw(void **state) {
  rec r = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  assert_int_equal(acp_rpc_session_send_raw(s, "{\"a\":\n1}", 8),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_rpc_session_send_raw(s, "{\"a\":1}", 7), 0);
  drain(s);
  assert_string_equal(out, "{\"a\":1}\n");
  acp_rpc_session_free(s);
}

static void test_rpc_free_drops_pending_without_callbacks(void **state) {
  rec r = {.mode = MODE_STORE};
  rec r2 = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);

  (void)state;
  assert_int_equal(
      acp_rpc_session_request(s, "m", 1, NULL, 0, 5, 0, on_response, &r2, NULL),
      0);
  feed(s,
       "[{\"jsonrpc\":\"2.0\",\"id\":\"a-long-string-id-that-is-not-inline\","
       "\"method\":\"m\"}]\n{\"jsonrpc\":");
  acp_rpc_session_free(s);
  assert_int_equal(r2.nresp, 0);
  acp_rpc_session_free(NULL);
}

static void test_rpc_bad_arguments(void **state) {
  acp_rpc_session *s = (acp_rpc_session *)1;
  const char *d;

  (void)state;
  assert_int_equal(acp_rpc_session_new(NULL, NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_rpc_session_new(&s, NULL, NULL, NULL, NULL), 0);
  assert_int_equal(acp_rpc_session_recv(s, NULL, 1, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_rpc_session_recv(NULL, "x", 1, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_rpc_session_send(s, NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_rpc_session_send(s, &d), 0);
  assert_string_equal(acp_rpc_session_errmsg(s), "");
  assert_null(acp_rpc_session_get_user_data(s));
  acp_rpc_session_set_user_data(s, &s);
  assert_ptr_equal(acp_rpc_session_get_user_data(s), &s);
  assert_int_equal(
      acp_rpc_session_request(NULL, "m", 1, NULL, 0, 0, 0, NULL, NULL, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  /* An invalid UTF-8 method cannot be written. */
  assert_int_equal(acp_rpc_session_notify(s, "\xff", 1, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_false(acp_rpc_session_want_write(s));
  acp_rpc_session_free(s);
}

/* Many requests answered out of order and expiring: exercises hash deletion
 * and the deadline heap. */
static void test_rpc_many_pending_out_of_order(void **state) {
  rec r = {0};
  rec r2 = {0};
  acp_rpc_session *s = mk(&r, NULL, NULL);
  const int n = 3000;
  int i;
  char line[128];
  uint64_t last = 0;

  (void)state;
  for (i = 0; i < n; i++) {
    uint64_t t = (uint64_t)((i * 7919) % 1000) + 1;
    assert_int_equal(acp_rpc_session_request(s, "m", 1, NULL, 0,
                                             i % 3 == 0 ? 0 : t, 0, on_response,
                                             &r2, NULL),
                     0);
    if (i % 100 == 0) {
      const char *d;
      acp_rpc_session_send(s, &d);
    }
  }
  {
    const char *d;
    acp_rpc_session_send(s, &d);
  }
  /* Answer every 5th id in a scrambled order. */
  for (i = 0; i < n; i += 5) {
    int id = (i * 37) % n;
    id -= id % 5;
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":1}\n", id);
    assert_int_equal(acp_rpc_session_recv(s, line, strlen(line), 0),
                     (acp_ssize)strlen(line));
  }
  /* Expiries come out in deadline order. */
  while (acp_rpc_session_get_expiry(s) != UINT64_MAX) {
    uint64_t e = acp_rpc_session_get_expiry(s);
    const char *d;
    assert_true(e >= last);
    last = e;
    assert_int_equal(acp_rpc_session_handle_expiry(s, e), 0);
    acp_rpc_session_send(s, &d);
  }
  assert_int_equal(r.nperr, 0);
  assert_int_equal(acp_rpc_session_recv_eof(s, 0), 0);
  assert_int_equal(r2.nresp, n);
  acp_rpc_session_free(s);
}

/* MARK: - Allocation failure */

typedef struct fmstate {
  uint64_t h[8];
  int n;
} fmstate;

static int fm_on_request(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  fmstate *st = ud;
  if (msg->method_len == 5 && memcmp(msg->method, "defer", 5) == 0) {
    if (st->n < 8)
      st->h[st->n++] = msg->handle;
    return 0;
  }
  return acp_rpc_session_respond(s, msg->handle, "[1,2,3]", 7);
}

static int fm_on_response(acp_rpc_session *s, const acp_rpc_msg *msg,
                          void *ud) {
  (void)s;
  (void)msg;
  (*(int *)ud)++;
  return 0;
}

static int check(int rv, int *nomem) {
  if (rv == ACP_ERR_NOMEM) {
    *nomem = 1;
    return 1;
  }
  assert_true(rv >= 0);
  return 0;
}

/* Returns 1 if the scenario hit NOMEM (and stopped), 0 if it completed. */
static int fm_scenario(failmem *f) {
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_session *s = NULL;
  acp_mem mem = {f, fm_malloc, fm_free, fm_calloc, fm_realloc};
  int nomem = 0;
  int nresp = 0;
  int i;
  const char *d;
  fmstate st = {{0}, 0};
  const char *in =
      "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0062-long-string-id-xxxxxxxxxxxxxxxxxx"
      "xxxxxxx\",\"method\":\"m\\u00e9\",\"params\":[1]}\n"
      "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"defer\"},"
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\"},5]\n"
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"error\":{\"code\":1,\"message\":"
      "\"\\u00e9"
      "\"}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\n"
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"defer\"}\n";
  size_t n = strlen(in);
  size_t pos;

  if (acp_rpc_callbacks_new(&cbs) != 0)
    return 1; /* the callbacks use the default allocator: not counted */
  acp_rpc_callbacks_set_on_request(cbs, fm_on_request);
  if (check(acp_rpc_session_new(&s, cbs, &st, NULL, &mem), &nomem))
    goto done;
  assert_non_null(s);
  for (i = 0; i < 40 && !nomem; i++)
    check(acp_rpc_session_request(s, "m\xc3\xa9", 3, "{}", 2, i % 2 ? 100 : 0,
                                  0, fm_on_response, &nresp, NULL),
          &nomem);
  if (nomem)
    goto done;
  /* Split the input in uneven pieces so some lines are buffered. */
  for (pos = 0; pos < n && !nomem; pos += 37) {
    size_t c = n - pos < 37 ? n - pos : 37;
    check((int)acp_rpc_session_recv(s, in + pos, c, 0), &nomem);
  }
  if (nomem)
    goto done;
  assert_int_equal(st.n, 2);
  for (i = 0; i < st.n && !nomem; i++)
    check(acp_rpc_session_respond(s, st.h[i], "1", 1), &nomem);
  if (nomem)
    goto done;
  if (check((int)acp_rpc_session_send(s, &d), &nomem))
    goto done;
  check(acp_rpc_session_cancel(s, 4, ACP_RPC_CANCEL_NOTIFY, 0), &nomem);
  if (nomem)
    goto done;
  check(acp_rpc_session_handle_expiry(s, 1000), &nomem);
  if (nomem)
    goto done;
  check(acp_rpc_session_recv_eof(s, 0), &nomem);

done:
  if (nomem && s != NULL) {
    /* NOMEM is fatal: later calls are refused. */
    assert_int_equal(acp_rpc_session_recv(s, "\n", 1, 0),
                     ACP_ERR_INVALID_STATE);
  }
  acp_rpc_session_free(s);
  acp_rpc_callbacks_free(cbs);
  return nomem;
}

static void test_rpc_every_allocation_failure_is_clean(void **state) {
  failmem f = {.count = 0, .fail_at = -1, .live = 0};
  long total;
  long i;

  (void)state;
  assert_int_equal(fm_scenario(&f), 0);
  assert_int_equal(f.live, 0);
  total = f.count;
  assert_true(total > 10);
  print_message("allocations in the scenario: %ld\n", total);
  for (i = 0; i < total; i++) {
    failmem g = {.count = 0, .fail_at = i, .live = 0};
    assert_int_equal(fm_scenario(&g), 1);
    assert_int_equal(g.live, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rpc_echo_request_answered_with_exact_id),
      cmocka_unit_test(test_rpc_pretty_printed_values_stay_on_one_line),
      cmocka_unit_test(test_rpc_method_is_decoded_and_nul_terminated),
      cmocka_unit_test(test_rpc_complete_line_is_not_copied),
      cmocka_unit_test(test_rpc_byte_by_byte_and_crlf),
      cmocka_unit_test(test_rpc_big_message_split_in_chunks),
      cmocka_unit_test(test_rpc_big_message_read_in_place),
      cmocka_unit_test(test_rpc_fast_lines_match_framed_lines),
      cmocka_unit_test(test_rpc_fast_line_over_cap_not_parsed),
      cmocka_unit_test(test_rpc_no_handler_answers_method_not_found),
      cmocka_unit_test(test_rpc_too_many_incoming_answered_internal_error),
      cmocka_unit_test(test_rpc_respond_twice_or_unknown_handle_not_found),
      cmocka_unit_test(test_rpc_error_codes_every_digit_count),
      cmocka_unit_test(test_rpc_parse_errors_and_invalid_utf8),
      cmocka_unit_test(test_rpc_invalid_requests_answered_invalid_request),
      cmocka_unit_test(test_rpc_bad_responses_reported_not_answered),
      cmocka_unit_test(test_rpc_overlong_line_skipped_and_answered),
      cmocka_unit_test(test_rpc_request_serialized_and_response_routed),
      cmocka_unit_test(test_rpc_method_literal_mark),
      cmocka_unit_test(test_rpc_long_method_names_escaped_in_every_step),
      cmocka_unit_test(test_rpc_method_names_every_length_and_offset),
      cmocka_unit_test(test_rpc_string_parts_every_length_and_offset),
      cmocka_unit_test(test_rpc_envelope_key_near_misses),
      cmocka_unit_test(test_rpc_response_with_result_and_error_dropped),
      cmocka_unit_test(test_rpc_timeout_completes_locally_and_cancels),
      cmocka_unit_test(test_rpc_cancel_styles_and_local_completion),
      cmocka_unit_test(test_rpc_incoming_cancel_matches_by_value),
      cmocka_unit_test(test_rpc_incoming_cancel_indexed),
      cmocka_unit_test(test_rpc_incoming_cancel_duplicate_ids),
      cmocka_unit_test(test_rpc_incoming_cancel_mcp_style),
      cmocka_unit_test(test_rpc_batch_mixed_answered_as_one_array),
      cmocka_unit_test(test_rpc_batch_with_deferred_answers),
      cmocka_unit_test(test_rpc_batches_off_answers_invalid_request),
      cmocka_unit_test(test_rpc_batch_of_responses),
      cmocka_unit_test(test_rpc_pause_returns_consumed_bytes),
      cmocka_unit_test(test_rpc_pause_in_batch_takes_effect_after_batch),
      cmocka_unit_test(test_rpc_callback_failure_is_fatal),
      cmocka_unit_test(test_rpc_send_after_fatal_delivers_queued_lines),
      cmocka_unit_test(test_rpc_response_callback_failure_is_fatal),
      cmocka_unit_test(test_rpc_reentrant_calls_rejected),
      cmocka_unit_test(test_rpc_callbacks_may_submit),
      cmocka_unit_test(test_rpc_eof_completes_pending),
      cmocka_unit_test(test_rpc_drop_pending_keeps_the_session),
      cmocka_unit_test(test_rpc_output_and_pending_limits),
      cmocka_unit_test(test_rpc_invalid_utf8_error_message_rejected),
      cmocka_unit_test(test_rpc_send_raw),
      cmocka_unit_test(test_rpc_free_drops_pending_without_callbacks),
      cmocka_unit_test(test_rpc_bad_arguments),
      cmocka_unit_test(test_rpc_many_pending_out_of_order),
      cmocka_unit_test(test_rpc_every_allocation_failure_is_clean),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
