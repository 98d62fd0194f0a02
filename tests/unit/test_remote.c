/*
 * libacp-remote: the WebSocket codec and upgrade handshake without I/O,
 * then a server and a client on one loop over loopback: lines written on
 * one side arrive as lines on the other, a slow reader holds the writer
 * back, refusals reach the client with the server's status, and every
 * handle is closed at the end (uv_loop_close() == 0).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "acp/remote.h"
#include "failmem.h"
#include "remote/remote_int.h"
#include "remote/ws_int.h"
#include "remote_reset.h"

/* MARK: - Codec */

typedef struct got {
  char text[8][256];
  size_t n;
  bool pause_each;
} got;

static int on_msg(void *ud, char *d, size_t n) {
  got *g = ud;
  assert_true(g->n < 8 && n < 255);
  assert_int_equal(d[n], '\n');
  memcpy(g->text[g->n], d, n);
  g->text[g->n][n] = '\0';
  g->n++;
  return g->pause_each ? ACP_ERR_PAUSE : 0;
}

static size_t frame(uint8_t *out, int op, bool fin, const char *p, size_t n,
                    const uint8_t *mask) {
  size_t hl = acp__ws_header(out, op, n, mask);
  if (!fin)
    out[0] &= 0x7F;
  memcpy(out + hl, p, n);
  if (mask)
    acp__ws_apply_mask(out + hl, n, mask, 0);
  return hl + n;
}

static const uint8_t M[4] = {1, 2, 3, 4};

static void test_accept_key_matches_rfc6455_example(void **state) {
  char out[29];
  (void)state;
  acp__ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", 24, out);
  assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_server_reassembles_fragments_around_a_ping(void **state) {
  acp__ws ws;
  got g = {0};
  uint8_t buf[512];
  size_t n = 0;
  (void)state;
  acp__ws_init(&ws, false, 1024, NULL);
  n += frame(buf + n, ACP__WS_OP_TEXT, false, "{\"a\":", 5, M);
  n += frame(buf + n, ACP__WS_OP_PING, true, "hi", 2, M);
  n += frame(buf + n, ACP__WS_OP_CONT, true, "\n1}", 3, M);
  /* one byte at a time: the parser resumes anywhere */
  for (size_t i = 0; i < n; i++)
    assert_int_equal(acp__ws_recv(&ws, buf + i, 1, on_msg, &g), 1);
  assert_int_equal(g.n, 1);
  assert_string_equal(g.text[0], "{\"a\": 1}"); /* LF became a space */
  /* the pong echoes the ping's payload, unmasked from a server */
  assert_int_equal(ws.out.len, 4);
  assert_memory_equal(ws.out.data, "\x8a\x02hi", 4);
  acp__ws_dispose(&ws);
}

static void test_pause_stops_after_the_message(void **state) {
  acp__ws ws;
  got g = {.pause_each = true};
  uint8_t buf[128];
  size_t n = 0, a;
  (void)state;
  acp__ws_init(&ws, false, 1024, NULL);
  a = n += frame(buf + n, ACP__WS_OP_TEXT, true, "{}", 2, M);
  n += frame(buf + n, ACP__WS_OP_TEXT, true, "[]", 2, M);
  assert_int_equal(acp__ws_recv(&ws, buf, n, on_msg, &g), (acp_ssize)a);
  assert_int_equal(acp__ws_recv(&ws, buf + a, n - a, on_msg, &g),
                   (acp_ssize)(n - a));
  assert_int_equal(g.n, 2);
  assert_string_equal(g.text[1], "[]");
  acp__ws_dispose(&ws);
}

static void expect_close(const uint8_t *in, size_t n, bool client, int err,
                         int code) {
  acp__ws ws;
  got g = {0};
  acp__ws_init(&ws, client, 16, NULL);
  assert_int_equal(acp__ws_recv(&ws, in, n, on_msg, &g), err);
  assert_int_equal(ws.close_code, code);
  assert_true(ws.close_sent);
  assert_int_equal((uint8_t)ws.out.data[0], 0x88);
  /* a client masks its frames (with the codec's auto_mask, zero here) */
  size_t at = client ? 6 : 2;
  assert_int_equal(
      ((uint8_t)ws.out.data[at] << 8) | (uint8_t)ws.out.data[at + 1], code);
  /* and nothing more is accepted */
  assert_int_equal(acp__ws_recv(&ws, in, n, on_msg, &g), ACP_ERR_PROTOCOL);
  assert_int_equal(g.n, 0);
  acp__ws_dispose(&ws);
}

static void test_bad_frames_close_with_the_right_code(void **state) {
  uint8_t buf[128];
  size_t n;
  (void)state;
  /* unmasked frame to a server */
  n = frame(buf, ACP__WS_OP_TEXT, true, "{}", 2, NULL);
  expect_close(buf, n, false, ACP_ERR_PROTOCOL, 1002);
  /* masked frame to a client */
  n = frame(buf, ACP__WS_OP_TEXT, true, "{}", 2, M);
  expect_close(buf, n, true, ACP_ERR_PROTOCOL, 1002);
  /* a reserved bit */
  n = frame(buf, ACP__WS_OP_TEXT, true, "{}", 2, M);
  buf[0] |= 0x40;
  expect_close(buf, n, false, ACP_ERR_PROTOCOL, 1002);
  /* continuation with nothing to continue */
  n = frame(buf, ACP__WS_OP_CONT, true, "{}", 2, M);
  expect_close(buf, n, false, ACP_ERR_PROTOCOL, 1002);
  /* a fragmented ping */
  n = frame(buf, ACP__WS_OP_PING, false, "", 0, M);
  expect_close(buf, n, false, ACP_ERR_PROTOCOL, 1002);
  /* over the 16-byte cap: 1009, before the payload arrives */
  n = frame(buf, ACP__WS_OP_TEXT, true, "01234567890123456", 17, M);
  expect_close(buf, 6, false, ACP_ERR_LIMIT, 1009);
  /* invalid UTF-8 in a text message */
  n = frame(buf, ACP__WS_OP_TEXT, true, "\xc0\xaf", 2, M);
  expect_close(buf, n, false, ACP_ERR_PROTOCOL, 1007);
  /* a close frame with a 1-byte body */
  n = frame(buf, ACP__WS_OP_CLOSE, true, "\x03", 1, M);
  expect_close(buf, n, false, ACP_ERR_PROTOCOL, 1002);
}

/* The wide masking against the rule of RFC 6455 5.3, byte by byte: every
 * phase, lengths across the 8-, 16- and 64-byte steps, misaligned source
 * and destination, apart and in place. */
static void test_masking_matches_the_rule_at_every_phase(void **state) {
  static const uint8_t mask[4] = {0x5a, 0xc3, 0x01, 0xfe};
  uint8_t src[300], dst[300], want[300];
  uint64_t at;
  size_t n, so, i;
  (void)state;
  for (i = 0; i < sizeof(src); i++)
    src[i] = (uint8_t)(i * 7 + 3);
  for (at = 0; at < 9; at++)
    for (n = 0; n <= 200; n += n < 20 ? 1 : 13)
      for (so = 0; so < 4; so++) {
        for (i = 0; i < n; i++)
          want[i] = src[so + i] ^ mask[(at + i) & 3];
        memset(dst, 0xAA, sizeof(dst));
        acp__ws_copy_mask(dst + 3 - so, src + so, n, mask, at);
        assert_memory_equal(dst + 3 - so, want, n);
        assert_int_equal(dst[3 - so + n], 0xAA); /* nothing past n */
        memcpy(dst, src, sizeof(src));
        acp__ws_apply_mask(dst + so, n, mask, at);
        assert_memory_equal(dst + so, want, n);
      }
}

/* A text message becomes one line: its CRs and LFs spaces, its UTF-8
 * checked in the same pass, wherever they fall around the 16-byte steps;
 * a bad sequence after a line feed still closes with 1007. */
static void test_text_message_becomes_one_checked_line(void **state) {
  static const char *const specials[] = {
      "\n", "\r", "\r\n", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
  size_t at, k;
  (void)state;
  for (k = 0; k < sizeof(specials) / sizeof(specials[0]); k++)
    for (at = 0; at < 70; at++) {
      char text[120], want[120];
      uint8_t buf[256];
      acp__ws ws;
      got g = {0};
      size_t sl = strlen(specials[k]), n = at + sl + 40, i, fl;
      memset(text, 'x', n);
      memcpy(text + at, specials[k], sl);
      text[n - 1] = '\n'; /* and one at the end */
      memcpy(want, text, n);
      for (i = 0; i < n; i++)
        if (want[i] == '\n' || want[i] == '\r')
          want[i] = ' ';
      want[n] = '\0';
      acp__ws_init(&ws, false, 1024, NULL);
      fl = frame(buf, ACP__WS_OP_TEXT, true, text, n, M);
      assert_int_equal(acp__ws_recv(&ws, buf, fl, on_msg, &g), (acp_ssize)fl);
      assert_int_equal(g.n, 1);
      assert_string_equal(g.text[0], want);
      acp__ws_dispose(&ws);

      /* an overlong '/' (C0 AF) after the special */
      memcpy(text + at + sl, "\xc0\xaf", 2);
      memset(&g, 0, sizeof(g));
      acp__ws_init(&ws, false, 1024, NULL);
      fl = frame(buf, ACP__WS_OP_TEXT, true, text, n, M);
      assert_int_equal(acp__ws_recv(&ws, buf, fl, on_msg, &g),
                       ACP_ERR_PROTOCOL);
      assert_int_equal(ws.close_code, 1007);
      assert_int_equal(g.n, 0);
      acp__ws_dispose(&ws);
    }
}

/* The codec keeps a message buffer the head of a frame reserved, even
 * while it holds no byte, and releases a big one between messages. */
static size_t trim_got;
static int trim_msg(void *ud, char *d, size_t n) {
  (void)ud;
  (void)d;
  trim_got = n;
  return 0;
}

static void test_trim_keeps_a_reserved_buffer(void **state) {
  enum { LEN = 70000 };
  acp__ws ws;
  uint8_t *buf = malloc(LEN + 14);
  char *text = malloc(LEN);
  size_t hl;
  (void)state;
  assert_non_null(buf);
  assert_non_null(text);
  memset(text, 'x', LEN);
  hl = frame(buf, ACP__WS_OP_TEXT, true, text, LEN, M) - LEN;
  acp__ws_init(&ws, false, 1 << 20, NULL);
  trim_got = 0;
  assert_int_equal(acp__ws_recv(&ws, buf, hl, trim_msg, NULL), (acp_ssize)hl);
  assert_true(ws.msg.cap >= LEN);
  acp__ws_trim(&ws, 1024); /* a message is coming: kept */
  assert_true(ws.msg.cap >= LEN);
  assert_int_equal(acp__ws_recv(&ws, buf + hl, LEN, trim_msg, NULL),
                   (acp_ssize)LEN);
  assert_int_equal(trim_got, LEN);
  acp__ws_trim(&ws, 1 << 20); /* small enough: kept */
  assert_true(ws.msg.cap >= LEN);
  acp__ws_trim(&ws, 1024); /* between messages, over: released */
  assert_int_equal(ws.msg.cap, 0);
  acp__ws_dispose(&ws);
  free(buf);
  free(text);
}

static void test_close_is_echoed_and_binary_ignored(void **state) {
  acp__ws ws;
  got g = {0};
  uint8_t buf[128];
  size_t n = 0;
  (void)state;
  acp__ws_init(&ws, false, 1024, NULL);
  n += frame(buf + n, ACP__WS_OP_BINARY, true, "\x00\x01", 2, M);
  n += frame(buf + n, ACP__WS_OP_TEXT, true, "{}", 2, M);
  size_t at = n;
  n += frame(buf + n, ACP__WS_OP_CLOSE, true, "\x03\xe8", 2, M);
  n += frame(buf + n, ACP__WS_OP_TEXT, true, "[]", 2, M);
  /* input stops after the close frame */
  assert_int_equal(acp__ws_recv(&ws, buf, n, on_msg, &g), (acp_ssize)(at + 8));
  assert_int_equal(g.n, 1);
  assert_true(ws.close_received);
  assert_int_equal(ws.close_code, 1000);
  assert_memory_equal(ws.out.data, "\x88\x02\x03\xe8", 4);
  acp__ws_dispose(&ws);
}

/* Every allocation of the codec failing in turn: each run ends with an
 * error or completes, and nothing is left allocated. */
static int codec_scenario(failmem *f) {
  acp_mem m = failmem_start(f, f->fail_at);
  acp__ws ws;
  got g = {0};
  uint8_t buf[1024];
  size_t n = 0;
  char big[300];
  memset(big, 'x', sizeof(big));
  acp__ws_init(&ws, false, 1024, &m);
  n += frame(buf + n, ACP__WS_OP_TEXT, false, "{\"a\":", 5, M);
  n += frame(buf + n, ACP__WS_OP_PING, true, "hi", 2, M);
  n += frame(buf + n, ACP__WS_OP_CONT, true, "1}", 2, M);
  n += frame(buf + n, ACP__WS_OP_BINARY, true, big, sizeof(big), M);
  n += frame(buf + n, ACP__WS_OP_CLOSE, true, "\x03\xe8", 2, M);
  acp_ssize r = acp__ws_recv(&ws, buf, n, on_msg, &g);
  acp__ws_dispose(&ws);
  if (r < 0) {
    assert_int_equal(r, ACP_ERR_NOMEM);
    return 0;
  }
  assert_int_equal(r, (acp_ssize)n);
  assert_int_equal(g.n, 1);
  return 1;
}

static void test_codec_allocation_failures(void **state) {
  (void)state;
  failmem_sweep(codec_scenario, 2);
}

/* MARK: - Handshake */

static int check(const char *req, const char *token) {
  acp__http_head h;
  char accept[29];
  static const char *const hosts[] = {"127.0.0.1:9", "localhost:9", NULL};
  acp__ws_policy p = {"/acp", token, hosts};
  acp_ssize n = acp__http_parse_head(req, strlen(req), false, &h);
  if (n <= 0)
    return (int)n;
  assert_int_equal((size_t)n, strlen(req));
  return acp__ws_check_request(&h, &p, accept);
}

#define UP                                                                     \
  "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"                  \
  "Sec-WebSocket-Version: 13\r\n"                                              \
  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"

static void test_upgrade_requests_get_the_right_status(void **state) {
  (void)state;
  assert_int_equal(
      check("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n" UP "\r\n", NULL), 101);
  assert_int_equal(check("GET /acp?x=1 HTTP/1.1\r\nHost: localhost:9\r\n" UP
                         "Origin: http://localhost:9\r\n\r\n",
                         NULL),
                   101);
  assert_int_equal(check("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n" UP
                         "Origin: https://evil.example\r\n\r\n",
                         NULL),
                   403);
  assert_int_equal(check("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n" UP
                         "Origin: null\r\n\r\n",
                         NULL),
                   403);
  assert_int_equal(
      check("GET /acp HTTP/1.1\r\nHost: evil.example:9\r\n" UP "\r\n", NULL),
      403);
  assert_int_equal(
      check("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n" UP "\r\n", "t0k"),
      401);
  assert_int_equal(check("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n" UP
                         "Authorization: Bearer t0kx\r\n\r\n",
                         "t0k"),
                   401);
  assert_int_equal(check("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n" UP
                         "Authorization: bearer t0k\r\n\r\n",
                         "t0k"),
                   101);
  assert_int_equal(
      check("GET /x HTTP/1.1\r\nHost: 127.0.0.1:9\r\n" UP "\r\n", NULL), 404);
  assert_int_equal(
      check("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n", NULL), 426);
  /* Streamable HTTP methods pass the policy and go to
   * acp__http_check_acp() (501 from this function means just that). */
  assert_int_equal(
      check("POST /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n", NULL), 501);
  assert_int_equal(
      check("POST /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n", "t0k"), 401);
  assert_int_equal(
      check("PUT /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n", NULL), 405);
  assert_int_equal(check("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
                         "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Sec-WebSocket-Version: 8\r\n"
                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                         NULL),
                   400);
  assert_int_equal(check("GET /acp HTTP/1.0\r\n" UP "\r\n", NULL), 400);
  assert_int_equal(check("GET /acp HTTP/1.1\r\nBad Header: x\r\n\r\n", NULL),
                   ACP_ERR_PARSE);
  assert_int_equal(check("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n", NULL),
                   0);
}

/* MARK: - Loopback */

typedef struct pair {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *srv_link;
  acp_uv_link *cli;
  char got[1 << 16];
  size_t got_len;
  int status;
  char detail[256];
  int ended;
  bool echo;
  bool hold;        /* the server side does not read */
  bool answer_init; /* answer initialize (Streamable HTTP), echo the rest */
  size_t want;      /* close the client after this many bytes (0: 30) */
  int transport;
  size_t max_queue;
  const char *version; /* acp_remote_http_version() when connected */
  /* delete_case: the server outlives the client, whose options' log
   * tells how its closing DELETE was answered. */
  bool keep_srv;
  char dlog[256];
  uv_timer_t stop;
  /* big_case: the big line's length (big_line()), and what the server
   * side read of it, checked as it comes */
  size_t big_len, big_in, big_bad;
  /* the server answers the big line with one as big, which the client
   * checks as it comes (else with "big") */
  bool big_echo;
  size_t big_back, big_back_bad;
} pair;

/* The big line: "[" then digits 0..9 in turn, then "]\n" (len - 3
 * digits). Free with free(). */
static char *big_line(size_t len) {
  char *m = malloc(len);
  assert_non_null(m);
  m[0] = '[';
  for (size_t i = 1; i < len - 2; i++)
    m[i] = (char)('0' + (i - 1) % 10);
  m[len - 2] = ']';
  m[len - 1] = '\n';
  return m;
}

/* Whether byte i of big_line() is c. */
static bool big_byte_ok(size_t i, size_t len, char c) {
  if (i == 0)
    return c == '[';
  if (i >= len - 2)
    return c == (i == len - 2 ? ']' : '\n');
  return c == (char)('0' + (i - 1) % 10);
}

static bool has(const char *d, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(d + i, needle, k) == 0)
      return true;
  return false;
}

static void srv_read(acp_uv_link *l, int status, const char *d, size_t n,
                     void *ud) {
  pair *p = ud;
  if (status != 0) {
    acp_uv_link_close(l, 0, NULL, NULL);
    p->srv_link = NULL;
    return;
  }
  int rv = 0;
  if (p->answer_init && has(d, n, "\"initialize\"")) {
    static const char r[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    rv = acp_uv_link_write(l, r, sizeof(r) - 1);
  } else if (p->big_in || (n >= 5 && memcmp(d, "[0123", 5) == 0)) {
    for (size_t i = 0; i < n; i++, p->big_in++)
      if (!big_byte_ok(p->big_in, p->big_len, d[i]))
        p->big_bad++;
    if (n > 0 && d[n - 1] == '\n' && p->big_echo) {
      char *m = big_line(p->big_len);
      rv = acp_uv_link_write(l, m, p->big_len);
      free(m);
    } else if (n > 0 && d[n - 1] == '\n') {
      static const char r[] = "\"big\"\n";
      rv = acp_uv_link_write(l, r, sizeof(r) - 1);
    }
  } else if (p->echo) {
    rv = acp_uv_link_write(l, d, n);
  }
  if (rv != 0) {
    /* What an agent does when it cannot write: it ends (a message lost
     * in silence would leave the client waiting). */
    acp_uv_link_close(l, 0, NULL, NULL);
    p->srv_link = NULL;
  }
}

static void on_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                      void *ud) {
  pair *p = ud;
  (void)s;
  assert_int_equal(strlen(id), 36);
  p->srv_link = link;
  if (!p->hold)
    acp_uv_link_read_start(link, srv_read, p);
}

static void cli_read(acp_uv_link *l, int status, const char *d, size_t n,
                     void *ud) {
  pair *p = ud;
  if (status != 0) {
    p->ended++;
    acp_uv_link_close(l, 0, NULL, NULL);
    p->cli = NULL;
    acp_remote_server_close(p->srv);
    p->srv = NULL;
    return;
  }
  if (p->big_echo) {
    for (size_t i = 0; i < n; i++, p->big_back++)
      if (!big_byte_ok(p->big_back, p->big_len, d[i]))
        p->big_back_bad++;
  } else {
    assert_true(p->got_len + n <= sizeof(p->got));
    memcpy(p->got + p->got_len, d, n);
    p->got_len += n;
  }
  if (p->big_echo ? p->big_back >= p->big_len
                  : p->got_len >= (p->want ? p->want : 30)) {
    acp_uv_link_close(l, 1000, NULL, NULL);
    p->cli = NULL;
    if (p->keep_srv)
      return; /* closed once the DELETE was answered */
    acp_remote_server_close(p->srv);
    p->srv = NULL;
  }
}

static void stop_srv(uv_timer_t *t) {
  pair *p = t->data;
  uv_close((uv_handle_t *)&p->stop, NULL);
  acp_remote_server_close(p->srv);
  p->srv = NULL;
}

static void del_log(const char *line, void *ud) {
  pair *p = ud;
  if (strncmp(line, "DELETE of connection ", 21) != 0)
    return;
  snprintf(p->dlog, sizeof(p->dlog), "%s", line);
  uv_timer_start(&p->stop, stop_srv, 0, 0); /* not from in here */
}

static void on_connected(acp_uv_link *l, int status, const char *detail,
                         void *ud) {
  pair *p = ud;
  p->status = status;
  p->version = acp_remote_http_version(l);
  snprintf(p->detail, sizeof(p->detail), "%s", detail);
}

static void start(pair *p, const char *token, const char *client_token) {
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  char url[64];
  assert_int_equal(uv_loop_init(&p->loop), 0);
  so.token = token;
  assert_int_equal(
      acp_remote_server_new(&p->srv, &p->loop, &so, on_accept, p, NULL, NULL),
      0);
  snprintf(url, sizeof(url), "%s://127.0.0.1:%d/acp",
           p->transport == ACP_REMOTE_HTTP || p->transport == ACP_REMOTE_HTTP2
               ? "http"
               : "ws",
           acp_remote_server_port(p->srv));
  co.token = client_token;
  co.transport = p->transport;
  if (p->keep_srv) {
    co.log = del_log;
    co.log_user_data = p;
    /* A DELETE that is never answered gives up after 2 s (no log line):
     * the server is closed then. */
    assert_int_equal(uv_timer_init(&p->loop, &p->stop), 0);
    p->stop.data = p;
    assert_int_equal(uv_timer_start(&p->stop, stop_srv, 30000, 0), 0);
  }
  p->status = 1;
  assert_int_equal(
      acp_remote_connect(&p->cli, &p->loop, url, &co, on_connected, p, NULL),
      0);
  assert_int_equal(acp_uv_link_read_start(p->cli, cli_read, p), 0);
}

static void test_lines_cross_the_socket_both_ways(void **state) {
  pair *p = calloc(1, sizeof(*p));
  (void)state;
  p->echo = true;
  start(p, "tok", "tok");
  /* written before the handshake is over: held, then sent in order; a
   * line split across writes is one message; blank lines are dropped */
  assert_int_equal(acp_uv_link_write(p->cli, "{\"a\":1}\n\n{\"b\"", 13), 0);
  assert_int_equal(acp_uv_link_write(p->cli, ":2}\r\n[3,4,5,6,7,8,9]\n", 21),
                   0);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(p->status, 0);
  assert_int_equal(strlen(p->detail), 36);
  p->got[p->got_len] = '\0';
  assert_string_equal(p->got, "{\"a\":1}\n{\"b\":2}\n[3,4,5,6,7,8,9]\n");
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

/* Streamable HTTP: initialize is POSTed and answered 200 (the first
 * line read), the rest is POSTed in order and comes back on the SSE
 * stream; closing the client DELETEs the connection (the server side sees
 * its read side end and closes). */
static void test_streamable_http_client_round_trip(void **state) {
  pair *p = calloc(1, sizeof(*p));
  (void)state;
  p->echo = true;
  p->answer_init = true;
  p->transport = ACP_REMOTE_HTTP;
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n";
  static const char want[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
                             "{\"a\":1}\n{\"b\":2}\n[3,4,5]\n";
  p->want = sizeof(want) - 1;
  start(p, "tok", "tok");
  assert_int_equal(acp_uv_link_write(p->cli, init, sizeof(init) - 1), 0);
  assert_int_equal(acp_uv_link_write(p->cli, "{\"a\":1}\n\n{\"b\"", 13), 0);
  assert_int_equal(acp_uv_link_write(p->cli, ":2}\r\n[3,4,5]\n", 13), 0);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(p->status, 0);
  assert_int_equal(strlen(p->detail), 36); /* the Acp-Connection-Id */
  p->got[p->got_len] = '\0';
  assert_string_equal(p->got, want);
  assert_null(p->srv_link); /* DELETE ended the server's link */
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

/* The same over HTTP/2 (h2c with prior knowledge): every POST, the SSE
 * stream and the DELETE are streams of one TCP connection. */
static void test_streamable_http2_client_round_trip(void **state) {
  pair *p = calloc(1, sizeof(*p));
  (void)state;
  p->echo = true;
  p->answer_init = true;
  p->transport = ACP_REMOTE_HTTP2;
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n";
  static const char want[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
                             "{\"a\":1}\n{\"b\":2}\n[3,4,5]\n";
  p->want = sizeof(want) - 1;
  start(p, "tok", "tok");
  assert_null(acp_remote_http_version(p->cli)); /* not connected yet */
  assert_int_equal(acp_uv_link_write(p->cli, init, sizeof(init) - 1), 0);
  assert_int_equal(acp_uv_link_write(p->cli, "{\"a\":1}\n\n{\"b\"", 13), 0);
  assert_int_equal(acp_uv_link_write(p->cli, ":2}\r\n[3,4,5]\n", 13), 0);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_string_equal(p->version, "HTTP/2");
  assert_int_equal(p->status, 0);
  assert_int_equal(strlen(p->detail), 36);
  p->got[p->got_len] = '\0';
  assert_string_equal(p->got, want);
  assert_null(p->srv_link); /* the DELETE stream ended the server's link */
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

/* Run the pair to its end and check that the client connected and read
 * exactly `want`. */
static void run_and_compare(pair *p, const char *want) {
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(p->status, 0);
  p->got[p->got_len] = '\0';
  assert_string_equal(p->got, want);
}

/* The client's closing DELETE is answered 2xx: the client ends its GET
 * stream first (as the TS SDK's client does), which already ended the
 * connection on the server (and its link: the owner closed it at once),
 * so the DELETE names a connection that is over; it was 404. */
static void delete_case(int transport) {
  pair *p = calloc(1, sizeof(*p));
  assert_non_null(p);
  p->echo = true;
  p->answer_init = true;
  p->keep_srv = true;
  p->transport = transport;
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n";
  static const char want[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
                             "{\"a\":1}\n";
  p->want = sizeof(want) - 1;
  start(p, NULL, NULL);
  assert_int_equal(acp_uv_link_write(p->cli, init, sizeof(init) - 1), 0);
  assert_int_equal(acp_uv_link_write(p->cli, "{\"a\":1}\n", 8), 0);
  run_and_compare(p, want);
  assert_null(p->srv_link); /* the server's link ended */
  char w[320];
  snprintf(w, sizeof(w), "DELETE of connection %s: HTTP 202", p->detail);
  assert_string_equal(p->dlog, w);
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

static void test_streamable_http_close_delete_is_answered_2xx(void **st) {
  (void)st;
  delete_case(ACP_REMOTE_HTTP);
}

static void test_streamable_http2_close_delete_is_answered_2xx(void **st) {
  (void)st;
  delete_case(ACP_REMOTE_HTTP2);
}

/* A POST bigger than the socket takes at once: the client's direct write
 * (uv_try_write) sends part, the rest is queued from where it stopped (in
 * the head or in the body); the server reads the message whole. */
static void test_streamable_http_big_post_partly_written(void **state) {
  pair *p = calloc(1, sizeof(*p));
  (void)state;
  assert_non_null(p);
  p->answer_init = true;
  p->transport = ACP_REMOTE_HTTP;
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n";
  static const char want[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
                             "\"big\"\n";
  p->want = sizeof(want) - 1;
  enum { BIG = 8 << 20 };
  p->big_len = BIG + 3;
  char *m = big_line(BIG + 3);
  start(p, NULL, NULL);
  assert_int_equal(acp_uv_link_write(p->cli, init, sizeof(init) - 1), 0);
  assert_int_equal(acp_uv_link_write(p->cli, m, BIG + 3), 0);
  free(m);
  run_and_compare(p, want);
  assert_int_equal(p->big_bad, 0);
  assert_int_equal(p->big_in, (size_t)BIG + 3);
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

/* A 3 MiB line each way over WebSocket, over many socket reads: the
 * server's codec unmasks the client's frame as it copies it, the client's
 * takes the server's plain one; both arrive whole. */
static void test_websocket_big_lines_both_ways(void **state) {
  pair *p = calloc(1, sizeof(*p));
  (void)state;
  assert_non_null(p);
  enum { BIG = (3 << 20) + 5 };
  p->transport = ACP_REMOTE_WEBSOCKET;
  p->big_len = BIG;
  p->big_echo = true;
  char *m = big_line(BIG);
  start(p, NULL, NULL);
  assert_int_equal(acp_uv_link_write(p->cli, m, BIG), 0);
  free(m);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(p->status, 0);
  assert_int_equal(p->big_bad, 0);
  assert_int_equal(p->big_in, (size_t)BIG);
  assert_int_equal(p->big_back_bad, 0);
  assert_int_equal(p->big_back, (size_t)BIG);
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

/* The server goes away once initialize is answered: the client's link
 * ends with the reason, and everything is freed. */
static void gone_connected(acp_uv_link *l, int status, const char *detail,
                           void *ud) {
  pair *p = ud;
  on_connected(l, status, detail, ud);
  if (status == 0 && p->srv) {
    if (p->srv_link)
      acp_uv_link_close(p->srv_link, 0, NULL, NULL);
    p->srv_link = NULL;
    acp_remote_server_close(p->srv);
    p->srv = NULL;
  }
}

static void test_streamable_http2_server_goes_away(void **state) {
  pair *p = calloc(1, sizeof(*p));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  char url[64];
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n";
  (void)state;
  p->echo = true;
  p->answer_init = true;
  p->want = 1 << 15; /* never: the end comes from the server */
  assert_int_equal(uv_loop_init(&p->loop), 0);
  assert_int_equal(
      acp_remote_server_new(&p->srv, &p->loop, &so, on_accept, p, NULL, NULL),
      0);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/acp",
           acp_remote_server_port(p->srv));
  co.transport = ACP_REMOTE_HTTP2;
  p->status = 1;
  assert_int_equal(
      acp_remote_connect(&p->cli, &p->loop, url, &co, gone_connected, p, NULL),
      0);
  assert_int_equal(acp_uv_link_read_start(p->cli, cli_read, p), 0);
  assert_int_equal(acp_uv_link_write(p->cli, init, sizeof(init) - 1), 0);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(p->ended, 1);      /* the link's read side ended */
  assert_int_not_equal(p->status, 0); /* reported once more, with why */
  assert_true(strstr(p->detail, "HTTP/2") != NULL ||
              strstr(p->detail, "connection stream") != NULL);
  assert_string_equal(p->version, "HTTP/2");
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

/* The first message must be initialize; a refusal names the status. */
static void test_streamable_http_client_refusals(void **state) {
  pair *p = calloc(1, sizeof(*p));
  (void)state;
  p->echo = true;
  p->transport = ACP_REMOTE_HTTP;
  start(p, "tok", "tok");
  acp_uv_link_write(p->cli, "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n", 31);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(p->status, ACP_ERR_PROTOCOL);
  assert_non_null(strstr(p->detail, "must be initialize"));
  assert_int_equal(p->ended, 1);
  assert_int_equal(uv_loop_close(&p->loop), 0);
  memset(p, 0, sizeof(*p));
  p->transport = ACP_REMOTE_HTTP;
  start(p, "tok", "wrong");
  acp_uv_link_write(
      p->cli, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n", 47);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(p->status, ACP_ERR_PROTOCOL);
  assert_non_null(strstr(p->detail, "HTTP 401"));
  assert_int_equal(p->ended, 1);
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

/* A server that answers initialize and opens the connection stream, then
 * never answers the DELETE the client sends when its link closes: the
 * client gives the DELETE its deadline and then drops the socket, so its
 * loop ends. (The deadline's timer used to be closed with the link, and
 * such a server kept the client's loop alive for ever.) */
typedef struct mute {
  uv_loop_t loop;
  uv_tcp_t lsn;
  uv_tcp_t conn[4];
  char buf[4][2048];
  size_t len[4];
  int nconn;
  bool is_delete[4];
  bool delete_dropped;
  bool stuck;
  uv_timer_t watchdog;
  acp_uv_link *cli;
  /* joined: the stream carries an event of three data lines, then one
   * of one, and the DELETE is answered; got: what the client read. */
  bool joined;
  char got[1024];
  size_t got_len;
} mute;

static void mute_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b) {
  mute *m = h->loop->data;
  int i = (int)((uv_tcp_t *)h - m->conn);
  (void)sz;
  *b = uv_buf_init(m->buf[i] + m->len[i],
                   (unsigned)(sizeof(m->buf[i]) - m->len[i] - 1));
}

static void mute_end(mute *m) {
  uv_close((uv_handle_t *)&m->lsn, NULL);
  for (int i = 0; i < m->nconn; i++)
    if (!uv_is_closing((uv_handle_t *)&m->conn[i]))
      uv_close((uv_handle_t *)&m->conn[i], NULL);
  uv_close((uv_handle_t *)&m->watchdog, NULL);
}

static void mute_written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

static void mute_send(uv_tcp_t *t, const char *s) {
  uv_write_t *w = malloc(sizeof(*w));
  uv_buf_t b = uv_buf_init((char *)s, (unsigned)strlen(s));
  assert_non_null(w);
  assert_int_equal(uv_write(w, (uv_stream_t *)t, &b, 1, mute_written), 0);
}

static void mute_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  mute *m = st->loop->data;
  int i = (int)((uv_tcp_t *)st - m->conn);
  (void)b;
  if (n < 0) {
    if (m->is_delete[i]) {
      m->delete_dropped = true; /* the client gave up on its DELETE */
      mute_end(m);
    } else if (!uv_is_closing((uv_handle_t *)st)) {
      uv_close((uv_handle_t *)st, NULL);
    }
    return;
  }
  m->len[i] += (size_t)n;
  m->buf[i][m->len[i]] = '\0';
  char *end = strstr(m->buf[i], "\r\n\r\n");
  if (!end)
    return;
  if (strncmp(m->buf[i], "DELETE ", 7) == 0 && m->joined) {
    mute_send((uv_tcp_t *)st, "HTTP/1.1 202 Accepted\r\n"
                              "Content-Length: 0\r\n\r\n");
    mute_end(m);
  } else if (strncmp(m->buf[i], "DELETE ", 7) == 0) {
    m->is_delete[i] = true; /* never answered */
  } else if (strncmp(m->buf[i], "GET ", 4) == 0) {
    mute_send((uv_tcp_t *)st, "HTTP/1.1 200 OK\r\nContent-Type: "
                              "text/event-stream\r\n\r\n");
    if (m->joined)
      mute_send((uv_tcp_t *)st,
                "data: {\"jsonrpc\":\"2.0\",\n"
                "data: \"method\":\"x/joined\",\r\n"
                "data:  \"params\":{}}\n\n"
                "data: {\"jsonrpc\":\"2.0\",\"method\":\"x/one\"}\n\n");
    m->len[i] = 0;
  } else if (strncmp(m->buf[i], "POST ", 5) == 0 &&
             strstr(end, "\"initialize\"") != NULL) {
    static const char body[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
    static char r[256];
    snprintf(r, sizeof(r),
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
             "Acp-Connection-Id: c1\r\nContent-Length: %zu\r\n\r\n%s",
             sizeof(body) - 1, body);
    mute_send((uv_tcp_t *)st, r);
    m->len[i] = 0;
  }
}

static void mute_accept(uv_stream_t *l, int status) {
  mute *m = l->loop->data;
  assert_int_equal(status, 0);
  assert_true(m->nconn < 4);
  uv_tcp_t *t = &m->conn[m->nconn++];
  uv_tcp_init(l->loop, t);
  assert_int_equal(uv_accept(l, (uv_stream_t *)t), 0);
  uv_read_start((uv_stream_t *)t, mute_alloc, mute_read);
}

static void mute_cli_read(acp_uv_link *l, int status, const char *d, size_t n,
                          void *ud) {
  mute *m = ud;
  if (m->joined && status == 0 && m->got_len + n < sizeof(m->got)) {
    memcpy(m->got + m->got_len, d, n);
    m->got_len += n;
    m->got[m->got_len] = '\0';
    if (!strstr(m->got, "x/one\"}\n"))
      return; /* more to come on the stream */
  }
  /* The answer to initialize (or an error), or with `joined` the
   * stream's two events: close, which sends DELETE. */
  acp_uv_link_close(l, 1000, NULL, NULL);
  m->cli = NULL;
}

static void mute_connected(acp_uv_link *l, int status, const char *detail,
                           void *ud) {
  (void)l;
  (void)status;
  (void)detail;
  (void)ud;
}

static void mute_watchdog(uv_timer_t *t) {
  mute *m = t->loop->data;
  m->stuck = true; /* not a timing check: the loop would never end */
  mute_end(m);
}

/* The client against the raw server `m` until its loop ends: initialize,
 * then whatever the server's mode makes of it. */
static void mute_run(mute *m) {
  struct sockaddr_in a;
  struct sockaddr_storage ss;
  int sl = sizeof(ss);
  char url[64];
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  assert_int_equal(uv_loop_init(&m->loop), 0);
  m->loop.data = m;
  uv_tcp_init(&m->loop, &m->lsn);
  uv_ip4_addr("127.0.0.1", 0, &a);
  assert_int_equal(uv_tcp_bind(&m->lsn, (const struct sockaddr *)&a, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&m->lsn, 8, mute_accept), 0);
  uv_tcp_getsockname(&m->lsn, (struct sockaddr *)&ss, &sl);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/acp",
           ntohs(((struct sockaddr_in *)&ss)->sin_port));
  uv_timer_init(&m->loop, &m->watchdog);
  uv_timer_start(&m->watchdog, mute_watchdog, 60000, 0);
  co.transport = ACP_REMOTE_HTTP;
  assert_int_equal(
      acp_remote_connect(&m->cli, &m->loop, url, &co, mute_connected, m, NULL),
      0);
  assert_int_equal(acp_uv_link_read_start(m->cli, mute_cli_read, m), 0);
  assert_int_equal(
      acp_uv_link_write(
          m->cli, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n",
          47),
      0);
  assert_int_equal(uv_run(&m->loop, UV_RUN_DEFAULT), 0);
  assert_false(m->stuck);
  assert_int_equal(uv_loop_close(&m->loop), 0);
}

static void test_streamable_http_delete_without_answer_ends(void **state) {
  mute *m = calloc(1, sizeof(*m));
  (void)state;
  assert_non_null(m);
  mute_run(m);
  assert_true(m->delete_dropped);
  free(m);
}

/* An SSE event of several data lines (joined by the parser with LFs, the
 * first line ended by LF, the second by CRLF) reaches the link as one
 * line, the LFs made spaces; a one-line event after it goes as it came.
 * The client takes the joined path only when the parser says the event
 * had more than one data field (acp__sse_one_line()). */
static void test_streamable_http_event_of_several_data_lines(void **state) {
  mute *m = calloc(1, sizeof(*m));
  (void)state;
  assert_non_null(m);
  m->joined = true;
  mute_run(m);
  assert_string_equal(
      m->got, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
              "{\"jsonrpc\":\"2.0\", \"method\":\"x/joined\",  \"params\":{}}\n"
              "{\"jsonrpc\":\"2.0\",\"method\":\"x/one\"}\n");
  free(m);
}

/* MARK: - Bodies and URLs */

/* Decode `in` fed in pieces of `step` bytes; returns the body. */
static int decode(const char *head, const char *in, size_t step, char *out,
                  size_t cap, size_t *out_len) {
  acp__http_head h;
  acp__http_body b;
  char buf[512];
  size_t have = 0, len = strlen(in), fed = 0;
  assert_true(acp__http_parse_head(head, strlen(head), true, &h) > 0);
  int rv = acp__http_body_init(&b, &h);
  if (rv != 0)
    return rv;
  *out_len = 0;
  while (!b.done && fed < len) {
    size_t k = len - fed < step ? len - fed : step;
    memcpy(buf + have, in + fed, k);
    have += k;
    fed += k;
    for (;;) {
      const char *p;
      size_t pn;
      acp_ssize n = acp__http_body_feed(&b, buf, have, &p, &pn);
      if (n < 0)
        return (int)n;
      assert_true(*out_len + pn <= cap);
      memcpy(out + *out_len, p, pn);
      *out_len += pn;
      memmove(buf, buf + n, have - (size_t)n);
      have -= (size_t)n;
      if (n == 0 || b.done)
        break;
    }
  }
  return b.done ? 0 : 1;
}

static void test_response_bodies_are_decoded(void **state) {
  char out[256];
  size_t n;
  (void)state;
  const char *chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const char *body =
      "5;ext=1\r\nhello\r\nA\r\n, chunked!\r\n0\r\nX-T: 1\r\n\r\n";
  for (size_t step = 1; step <= strlen(body); step++) {
    assert_int_equal(decode(chunked, body, step, out, sizeof(out), &n), 0);
    assert_int_equal(n, 15);
    assert_memory_equal(out, "hello, chunked!", 15);
  }
  assert_int_equal(decode("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
                          "abcdef", 2, out, sizeof(out), &n),
                   0);
  assert_int_equal(n, 3);
  /* close-delimited: never done by itself */
  assert_int_equal(
      decode("HTTP/1.1 200 OK\r\n\r\n", "abc", 1, out, sizeof(out), &n), 1);
  assert_int_equal(n, 3);
  assert_int_equal(
      decode("HTTP/1.1 204 No Content\r\n\r\n", "", 1, out, sizeof(out), &n),
      0);
  assert_int_equal(decode(chunked, "zz\r\n", 1, out, sizeof(out), &n),
                   ACP_ERR_PARSE);
  assert_int_equal(decode(chunked, "3\r\nabcX", 1, out, sizeof(out), &n),
                   ACP_ERR_PARSE);
  assert_int_equal(
      decode(chunked, "1111111111111111\r\n", 1, out, sizeof(out), &n),
      ACP_ERR_PARSE);
  assert_int_equal(decode("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "", 1,
                          out, sizeof(out), &n),
                   ACP_ERR_PARSE);
  assert_int_equal(decode("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                          "", 1, out, sizeof(out), &n),
                   ACP_ERR_PARSE);
}

/* The member scanner the transport routes with (no parse): top-level
 * members only, strings skipped whole (escaped quotes, braces inside),
 * raw values; not an object or broken: not found. */
static bool member_is(const char *json, const char *key, const char *want) {
  const char *vb, *ve;
  if (!acp__js_member(json, json + strlen(json), key, strlen(key), &vb, &ve))
    return want == NULL;
  return want != NULL && (size_t)(ve - vb) == strlen(want) &&
         memcmp(vb, want, strlen(want)) == 0;
}

static void test_json_members_are_found_without_a_parse(void **state) {
  (void)state;
  static const char m[] =
      "{\"jsonrpc\":\"2.0\", \"method\" : \"session/update\",\"params\":"
      "{\"text\":\"a \\\"}\\\\\",\"x\":[1,{\"id\":9}],\"sessionId\":\"s1\"},"
      "\"id\":-12.5e3 }";
  assert_true(member_is(m, "method", "\"session/update\""));
  assert_true(member_is(m, "id", "-12.5e3"));
  assert_true(member_is(m, "sessionId", NULL)); /* only in params */
  assert_true(member_is(m, "params",
                        "{\"text\":\"a \\\"}\\\\\",\"x\":[1,{\"id\":9}],"
                        "\"sessionId\":\"s1\"}"));
  const char *pb, *pe, *vb, *ve;
  assert_true(acp__js_member(m, m + strlen(m), "params", 6, &pb, &pe));
  assert_true(acp__js_member(pb, pe, "sessionId", 9, &vb, &ve));
  assert_int_equal(ve - vb, 4);
  assert_memory_equal(vb, "\"s1\"", 4);
  assert_true(member_is("[1,2]", "id", NULL));
  assert_true(member_is("{\"id\":\"unterminated}", "id", NULL));
  assert_true(member_is("{\"a\":1 \"id\":2}", "id", NULL)); /* no comma */
  assert_true(member_is("{\"a\":{\"b\":[}", "id", NULL));
  assert_true(member_is("{}", "id", NULL));
  assert_true(member_is(" {\"id\":null}", "id", "null"));

  /* params.sessionId without looking past it: found where the two-step
   * lookup finds it, not found where that does not find it, and found in
   * a params cut short after it (the step that looked for the end of
   * params failed there). */
  assert_true(acp__js_member_in(m, m + strlen(m), "params", 6, "sessionId", 9,
                                &vb, &ve));
  assert_int_equal(ve - vb, 4);
  assert_memory_equal(vb, "\"s1\"", 4);
  static const char *const none[] = {
      "{\"params\":{\"a\":{\"sessionId\":\"deep\"}},\"sessionId\":\"top\"}",
      "{\"params\":[\"sessionId\",\"x\"]}",
      "{\"params\":\"{\\\"sessionId\\\":1}\"}",
      "{\"params\":{\"a\":1},\"b\":{\"sessionId\":\"s\"}}",
      "{\"params\":{}}",
      "{\"params\":",
      "{\"x\":{\"sessionId\":\"s\"}}"};
  for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
    assert_false(acp__js_member_in(none[i], none[i] + strlen(none[i]), "params",
                                   6, "sessionId", 9, &vb, &ve));
  static const char cut[] =
      "{\"method\":\"session/update\",\"params\":{\"x\":[1],\"sessionId\":"
      "\"s2\",\"update\":{\"text\":\"never closed";
  assert_false(acp__js_member(cut, cut + strlen(cut), "params", 6, &pb, &pe));
  assert_true(acp__js_member_in(cut, cut + strlen(cut), "params", 6,
                                "sessionId", 9, &vb, &ve));
  assert_memory_equal(vb, "\"s2\"", 4);
}

/* acp__js_member_head() on the head of `full` cut at byte i, copied to a
 * buffer of exactly i bytes (ASan sees a read at or past the cut). A
 * member found whole is the full message's value at the same place; one
 * found cut off starts there (or at the cut) and runs to the cut, which
 * falls before the value's end or right on the end of a number. */
static int head_at(const char *full, size_t i, const char *key, const char **vb,
                   const char **ve) {
  size_t n = strlen(full), klen = strlen(key);
  const char *fb = NULL, *fe = NULL;
  bool whole = acp__js_member(full, full + n, key, klen, &fb, &fe);
  char *h = malloc(i ? i : 1);
  assert_non_null(h);
  memcpy(h, full, i);
  int r = acp__js_member_head(h, h + i, key, klen, vb, ve);
  if (r != 0) {
    assert_true(whole);
    assert_true(h <= *vb && *vb <= *ve && *ve <= h + i);
    assert_true(*vb == h + i || *vb - h == fb - full);
  }
  if (r == 1)
    assert_int_equal(*ve - *vb, fe - fb);
  if (r == 2)
    assert_true(*ve == h + i && i <= (size_t)(fe - full));
  if (whole && i > (size_t)(fe - full))
    assert_int_equal(r, 1); /* past the value (and what ends it): whole */
  if (!whole)
    assert_int_equal(r, 0);
  if (r != 0) { /* offsets into the full message: h is freed */
    *vb = full + (*vb - h);
    *ve = full + (*ve - h);
  }
  free(h);
  return r;
}

static void test_json_member_heads_at_every_cut(void **state) {
  (void)state;
  static const char upd[] =
      "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":"
      "{\"sessionId\":\"sess_1\",\"update\":{\"sessionUpdate\":"
      "\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":"
      "\"a \\\"}\\\\ b\"}}}}";
  static const char *const msgs[] = {
      upd,
      "{\"id\":12345,\"result\":{\"stopReason\":\"cancelled\"}}",
      " { \"a\" : true , \"b\" : [ 1 , \"]\" ] , \"c\" : null , "
      "\"id\" : -1.5e3 } ",
      "{\"jsonrpc\":\"2.0\", \"method\" : \"session/update\",\"params\":"
      "{\"text\":\"a \\\"}\\\\\",\"x\":[1,{\"id\":9}],\"sessionId\":\"s1\"},"
      "\"id\":-12.5e3 }",
  };
  static const char *const keys[] = {"method",  "id",    "params", "sessionId",
                                     "a",       "b",     "c",      "result",
                                     "jsonrpc", "update"};
  for (size_t m = 0; m < sizeof(msgs) / sizeof(msgs[0]); m++)
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
      for (size_t i = 0; i <= strlen(msgs[m]); i++) {
        const char *vb, *ve;
        (void)head_at(msgs[m], i, keys[k], &vb, &ve);
      }
  /* What serve's stale_head() asks of an update's head, at every cut:
   * method whole from its closing quote on, no id, params found (cut off
   * until its end), and in it sessionId whole from its closing quote on. */
  const char *sid = strstr(upd, "\"sess_1\"") + 8;
  const char *meth = strstr(upd, "\"session/update\"") + 16;
  for (size_t i = 0; i <= strlen(upd); i++) {
    const char *vb, *ve, *pb, *pe;
    int r = head_at(upd, i, "method", &vb, &ve);
    assert_int_equal(r, i >= (size_t)(meth - upd) ? 1 : r);
    if (i >= (size_t)(meth - upd))
      assert_memory_equal(vb, "\"session/update\"", 16);
    assert_int_equal(head_at(upd, i, "id", &vb, &ve), 0);
    r = head_at(upd, i, "params", &pb, &pe);
    if (i < (size_t)(sid - upd))
      continue;
    assert_int_equal(r, i >= strlen(upd) - 1 ? 1 : 2); /* then '}' */
    char *h = malloc((size_t)(pe - pb) ? (size_t)(pe - pb) : 1);
    assert_non_null(h);
    memcpy(h, pb, (size_t)(pe - pb));
    assert_int_equal(
        acp__js_member_head(h, h + (pe - pb), "sessionId", 9, &vb, &ve), 1);
    assert_int_equal(ve - vb, 8);
    assert_memory_equal(vb, "\"sess_1\"", 8);
    free(h);
  }
  /* A number cut at its last digit may go on: cut off, not whole. */
  static const char num[] = "{\"id\":12";
  const char *vb, *ve;
  assert_int_equal(acp__js_member_head(num, num + 8, "id", 2, &vb, &ve), 2);
  assert_int_equal(acp__js_member_head(num, num + 6, "id", 2, &vb, &ve), 2);
  assert_true(vb == num + 6 && ve == num + 6);
  /* Broken heads: never found, never read past the cut. */
  static const char *const bad[] = {
      "", "[", "{\"a\\", "{\"a\" x", "{\"a\":1 \"id\":2", "\"id\":1", "{,"};
  for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++)
    for (size_t i = 0; i <= strlen(bad[b]); i++)
      assert_int_equal(head_at(bad[b], i, "id", &vb, &ve), 0);
}

static void test_urls_are_parsed(void **state) {
  acp__url u;
  (void)state;
  assert_int_equal(acp__url_parse("http://127.0.0.1:8080/acp", &u), 0);
  assert_false(u.ws);
  assert_false(u.tls);
  assert_int_equal(u.host_len, 9);
  assert_memory_equal(u.port, "8080", 4);
  assert_string_equal(u.path, "/acp");
  assert_int_equal(acp__url_parse("ws://[::1]:9/x?y=1", &u), 0);
  assert_true(u.ws);
  assert_memory_equal(u.host, "::1", 3);
  assert_int_equal(u.host_len, 3);
  assert_int_equal(u.authority_len, 7);
  assert_int_equal(acp__url_parse("ws://h", &u), 0);
  assert_null(u.port);
  assert_string_equal(u.path, "/");
  assert_int_equal(acp__url_parse("https://h/acp", &u), 0);
  assert_true(u.tls);
  assert_int_equal(acp__url_parse("ftp://h/", &u), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__url_parse("http://u@h/", &u), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__url_parse("http:///acp", &u), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__url_parse("http://h:/", &u), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__url_parse("http://h:8x/", &u),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__url_parse("http://h/a b", &u),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp__url_parse("http://[::1/", &u),
                   ACP_ERR_INVALID_ARGUMENT);
}

static void test_refused_upgrade_reports_status(void **state) {
  pair *p = calloc(1, sizeof(*p));
  (void)state;
  start(p, "tok", "wrong");
  acp_uv_link_write(p->cli, "{}\n", 3);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(p->status, ACP_ERR_PROTOCOL);
  assert_non_null(strstr(p->detail, "HTTP 401"));
  assert_int_equal(p->ended, 1);
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

/* A server side that does not read: the client's writes pile up in its
 * link's queue (which a coupling would act on) instead of vanishing. */
static void on_check(uv_timer_t *t) {
  pair *p = t->data;
  size_t q = acp_uv_link_write_queue_size(p->cli);
  if (p->status == 1) {
    /* the handshake is not over yet (slow under valgrind): wait for it */
    uv_timer_start(t, on_check, 5, 0);
    return;
  }
  if (q < (size_t)8 << 20 && p->status == 0) {
    char chunk[4096];
    memset(chunk, 'x', sizeof(chunk) - 1);
    chunk[sizeof(chunk) - 1] = '\n';
    for (int i = 0; i < 256; i++)
      acp_uv_link_write(p->cli, chunk, sizeof(chunk));
    uv_timer_start(t, on_check, 5, 0);
    return;
  }
  p->max_queue = q;
  uv_close((uv_handle_t *)t, NULL);
  acp_uv_link_close(p->cli, 0, NULL, NULL);
  p->cli = NULL;
  if (p->srv_link) {
    acp_uv_link_close(p->srv_link, 0, NULL, NULL);
    p->srv_link = NULL;
  }
  acp_remote_server_close(p->srv);
  p->srv = NULL;
}

static void test_unread_socket_backs_up_into_the_link(void **state) {
  pair *p = calloc(1, sizeof(*p));
  uv_timer_t t;
  (void)state;
  p->hold = true;
  start(p, NULL, NULL);
  uv_timer_init(&p->loop, &t);
  t.data = p;
  uv_timer_start(&t, on_check, 5, 0);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_true(p->max_queue >= (size_t)8 << 20);
  assert_int_equal(uv_loop_close(&p->loop), 0);
  free(p);
}

/* Streamable HTTP: a client that opens its SSE stream and never reads it.
 * The agent's side keeps writing; what the socket does not take stays in
 * the server link's queue (the coupling in acp serve then stops reading
 * the agent's stdout) instead of being reported sent. The client is a
 * plain blocking socket on a thread, as dumb as a stalled reader gets. */
typedef struct hpair {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *link;
  int port;
  uv_thread_t th;
  uv_sem_t opened; /* the client sent its GET */
  uv_sem_t stop;   /* the test is over */
  bool sse_sent;
  char conn_id[37];
  size_t max_queue;
  bool initialized;
} hpair;

static int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

/* All n bytes at p to fd (a blocking socket). */
static void raw_write(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t k = write(fd, c, n);
    assert_true(k > 0);
    c += k;
    n -= (size_t)k;
  }
}

static void raw_send(int fd, const char *s) {
  raw_write(fd, s, strlen(s));
}

static void hclient(void *arg) {
  hpair *h = arg;
  char req[512], resp[4096];
  size_t have = 0;
  const char *body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";
  int fd = raw_connect(h->port);
  snprintf(req, sizeof(req),
           "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
           h->port, strlen(body), body);
  raw_send(fd, req);
  /* read the 200 up to its body: {"id":1,...} */
  while (have < sizeof(resp) - 1) {
    ssize_t k = read(fd, resp + have, sizeof(resp) - 1 - have);
    assert_true(k > 0);
    have += (size_t)k;
    resp[have] = '\0';
    if (strstr(resp, "\r\n\r\n") && strchr(strstr(resp, "\r\n\r\n"), '}'))
      break;
  }
  assert_non_null(strstr(resp, "HTTP/1.1 200"));
  const char *id = strstr(resp, "Acp-Connection-Id: ");
  assert_non_null(id);
  memcpy(h->conn_id, id + 19, 36);
  int sfd = raw_connect(h->port);
  snprintf(req, sizeof(req),
           "GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Accept: text/event-stream\r\nAcp-Connection-Id: %s\r\n\r\n",
           h->port, h->conn_id);
  raw_send(sfd, req);
  uv_sem_post(&h->opened);
  uv_sem_wait(&h->stop); /* never read the stream */
  close(sfd);
  close(fd);
}

static void h_read(acp_uv_link *l, int status, const char *d, size_t n,
                   void *ud) {
  hpair *h = ud;
  (void)d;
  (void)n;
  if (status != 0)
    return;
  if (!h->initialized) {
    h->initialized = true;
    const char *r = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    acp_uv_link_write(l, r, strlen(r));
  }
}

static void h_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                     void *ud) {
  hpair *h = ud;
  (void)s;
  assert_int_equal(strlen(id), 36);
  assert_null(h->link); /* one initialize, one connection */
  h->link = link;
  acp_uv_link_read_start(link, h_read, h);
}

static void h_flood(uv_timer_t *t) {
  hpair *h = t->data;
  if (!h->sse_sent) {
    /* wait (off the loop's back) until the client sent its GET */
    if (uv_sem_trywait(&h->opened) != 0) {
      uv_timer_start(t, h_flood, 5, 0);
      return;
    }
    h->sse_sent = true;
  }
  size_t q = h->link ? acp_uv_link_write_queue_size(h->link) : 0;
  if (h->link && q < (size_t)8 << 20) {
    char chunk[4096];
    memset(chunk, 'x', sizeof(chunk));
    memcpy(chunk, "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"", 38);
    memcpy(chunk + sizeof(chunk) - 3, "\"}\n", 3);
    for (int i = 0; i < 256; i++)
      acp_uv_link_write(h->link, chunk, sizeof(chunk));
    uv_timer_start(t, h_flood, 5, 0);
    return;
  }
  h->max_queue = q;
  uv_close((uv_handle_t *)t, NULL);
  uv_sem_post(&h->stop);
  if (h->link) {
    acp_uv_link_close(h->link, 0, NULL, NULL);
    h->link = NULL;
  }
  acp_remote_server_close(h->srv);
  h->srv = NULL;
}

static void test_unread_sse_stream_backs_up_into_the_link(void **state) {
  hpair *h = calloc(1, sizeof(*h));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  uv_timer_t t;
  (void)state;
  assert_int_equal(uv_loop_init(&h->loop), 0);
  assert_int_equal(
      acp_remote_server_new(&h->srv, &h->loop, &so, h_accept, h, NULL, NULL),
      0);
  h->port = acp_remote_server_port(h->srv);
  uv_sem_init(&h->opened, 0);
  uv_sem_init(&h->stop, 0);
  assert_int_equal(uv_thread_create(&h->th, hclient, h), 0);
  uv_timer_init(&h->loop, &t);
  t.data = h;
  uv_timer_start(&t, h_flood, 5, 0);
  assert_int_equal(uv_run(&h->loop, UV_RUN_DEFAULT), 0);
  uv_thread_join(&h->th);
  assert_true(h->max_queue >= (size_t)8 << 20);
  assert_int_equal(uv_loop_close(&h->loop), 0);
  uv_sem_destroy(&h->opened);
  uv_sem_destroy(&h->stop);
  free(h);
}

/* A client that keeps its stream open but stops reading it: once the
 * kernel takes nothing more of the server's output for stall_ms, the
 * connection ends as for a vanished peer (the agent's link reads
 * UV_ETIMEDOUT) instead of holding the agent back forever. A client that
 * reads slowly but keeps reading is never cut, even while one message
 * takes many stall_ms to leave: progress is bytes written, not messages.
 * The client is a blocking socket on a thread with a small receive
 * buffer; the agent's side floods (or writes one big message). */
enum { ST_SSE_MUTE, ST_SSE_SLOW, ST_WS_MUTE };
#define ST_STALL_MS 300u
#define ST_BIG ((size_t)8 << 20)

typedef struct spair {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *link;
  int port, mode;
  uv_thread_t th;
  uv_sem_t opened; /* the client sent its GET (or upgrade) */
  uv_sem_t stop;   /* the test is over: the client may close */
  bool go, initialized, big_sent, finished;
  int end_status; /* the agent link's read end (0: not ended) */
  size_t max_queue;
  /* ST_SSE_SLOW: what the client read of the big message, and how long
   * it took (set by the client thread before `done`) */
  size_t slow_read;
  uint64_t slow_ms;
  uv_sem_t done;
  uv_timer_t tick, guard;
} spair;

static int small_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int rcv = 4096;
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv)), 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

/* Read a response head (and for initialize its JSON body) into resp. */
static void read_head(int fd, char *resp, size_t cap, bool body) {
  size_t have = 0;
  for (;;) {
    assert_true(have < cap - 1);
    ssize_t k = read(fd, resp + have, 1); /* not past the head */
    assert_true(k > 0);
    have += (size_t)k;
    resp[have] = '\0';
    const char *e = strstr(resp, "\r\n\r\n");
    if (e && (!body || strchr(e, '}')))
      return;
  }
}

static void sclient(void *arg) {
  spair *h = arg;
  char req[512], resp[4096], id[37] = {0};
  int fd = -1, sfd;
  if (h->mode == ST_WS_MUTE) {
    sfd = small_connect(h->port);
    snprintf(req, sizeof(req),
             "GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" UP "\r\n", h->port);
    raw_send(sfd, req);
    read_head(sfd, resp, sizeof(resp), false);
    assert_non_null(strstr(resp, "HTTP/1.1 101"));
  } else {
    const char *b = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";
    fd = raw_connect(h->port);
    snprintf(req, sizeof(req),
             "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             h->port, strlen(b), b);
    raw_send(fd, req);
    read_head(fd, resp, sizeof(resp), true);
    assert_non_null(strstr(resp, "HTTP/1.1 200"));
    const char *p = strstr(resp, "Acp-Connection-Id: ");
    assert_non_null(p);
    memcpy(id, p + 19, 36);
    sfd = small_connect(h->port);
    snprintf(req, sizeof(req),
             "GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Accept: text/event-stream\r\nAcp-Connection-Id: %s\r\n\r\n",
             h->port, id);
    raw_send(sfd, req);
    read_head(sfd, resp, sizeof(resp), false);
    assert_non_null(strstr(resp, "HTTP/1.1 200"));
  }
  uv_sem_post(&h->opened);
  if (h->mode == ST_SSE_SLOW) {
    /* 4 KiB at a time with a pause after each: the 8 MiB message takes
     * seconds (many stall_ms), every gap is about a millisecond. Up to the
     * event that ends it: "..."}\n\n after the big payload. */
    char buf[4096], tail[8] = {0};
    size_t nread = 0;
    uint64_t t0 = uv_hrtime();
    for (;;) {
      ssize_t k = read(sfd, buf, sizeof(buf));
      if (k <= 0)
        break;
      nread += (size_t)k;
      size_t keep = (size_t)k < 7 ? (size_t)k : 7;
      memmove(tail, tail + keep, 7 - keep);
      memcpy(tail + 7 - keep, buf + k - keep, keep);
      if (nread > ST_BIG && memcmp(tail + 3, "\"}\n\n", 4) == 0)
        break;
      uv_sleep(1);
    }
    h->slow_read = nread;
    h->slow_ms = (uv_hrtime() - t0) / 1000000u;
    uv_sem_post(&h->done);
  }
  uv_sem_wait(&h->stop);
  close(sfd);
  if (fd >= 0)
    close(fd);
}

static void s_finish(spair *h) {
  if (h->finished)
    return;
  h->finished = true;
  uv_timer_stop(&h->tick);
  uv_timer_stop(&h->guard);
  if (h->link) {
    acp_uv_link_close(h->link, 0, NULL, NULL);
    h->link = NULL;
  }
  if (h->srv) {
    acp_remote_server_close(h->srv);
    h->srv = NULL;
  }
  uv_close((uv_handle_t *)&h->tick, NULL);
  uv_close((uv_handle_t *)&h->guard, NULL);
  uv_sem_post(&h->stop);
}

static void s_read(acp_uv_link *l, int status, const char *d, size_t n,
                   void *ud) {
  spair *h = ud;
  (void)d;
  (void)n;
  (void)l;
  if (status != 0) {
    h->end_status = status;
    s_finish(h);
    return;
  }
  if (!h->initialized) {
    h->initialized = true;
    const char *r = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    acp_uv_link_write(l, r, strlen(r));
  }
}

static void s_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                     void *ud) {
  spair *h = ud;
  (void)s;
  (void)id;
  assert_null(h->link);
  h->link = link;
  acp_uv_link_read_start(link, s_read, h);
}

static void s_tick(uv_timer_t *t) {
  spair *h = t->data;
  if (!h->go) {
    /* wait (off the loop's back) until the client's stream is open */
    if (uv_sem_trywait(&h->opened) != 0) {
      uv_timer_start(t, s_tick, 5, 0);
      return;
    }
    h->go = true;
  }
  if (!h->link)
    return;
  if (h->mode == ST_SSE_SLOW) {
    if (!h->big_sent) {
      /* one message bigger than every buffer on the way */
      static const char head[] = "{\"jsonrpc\":\"2.0\",\"method\":\"x\","
                                 "\"params\":\"";
      char *m = malloc(ST_BIG + 64);
      assert_non_null(m);
      memcpy(m, head, sizeof(head) - 1);
      memset(m + sizeof(head) - 1, 'x', ST_BIG);
      memcpy(m + sizeof(head) - 1 + ST_BIG, "\"}\n", 3);
      assert_int_equal(
          acp_uv_link_write(h->link, m, sizeof(head) - 1 + ST_BIG + 3), 0);
      free(m);
      h->big_sent = true;
    }
    if (uv_sem_trywait(&h->done) == 0) {
      h->max_queue = acp_uv_link_write_queue_size(h->link);
      s_finish(h);
      return;
    }
    uv_timer_start(t, s_tick, 5, 0);
    return;
  }
  /* a flood, until the link's queue holds 8 MiB (it then waits for the
   * stall to end the connection) */
  size_t q = acp_uv_link_write_queue_size(h->link);
  if (q > h->max_queue)
    h->max_queue = q;
  if (q < (size_t)8 << 20) {
    char chunk[4096];
    memset(chunk, 'x', sizeof(chunk));
    memcpy(chunk, "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"", 38);
    memcpy(chunk + sizeof(chunk) - 3, "\"}\n", 3);
    for (int i = 0; i < 256; i++)
      acp_uv_link_write(h->link, chunk, sizeof(chunk));
    uv_timer_start(t, s_tick, 5, 0);
  }
}

static void s_guard(uv_timer_t *t) {
  /* a deadlock guard, not a measurement: the stall never ended it */
  spair *h = t->data;
  h->end_status = 1;
  s_finish(h);
}

static spair *stall_case(int mode) {
  spair *h = calloc(1, sizeof(*h));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  assert_non_null(h);
  h->mode = mode;
  so.stall_ms = ST_STALL_MS;
  assert_int_equal(uv_loop_init(&h->loop), 0);
  assert_int_equal(
      acp_remote_server_new(&h->srv, &h->loop, &so, s_accept, h, NULL, NULL),
      0);
  h->port = acp_remote_server_port(h->srv);
  uv_sem_init(&h->opened, 0);
  uv_sem_init(&h->stop, 0);
  uv_sem_init(&h->done, 0);
  assert_int_equal(uv_thread_create(&h->th, sclient, h), 0);
  uv_timer_init(&h->loop, &h->tick);
  uv_timer_init(&h->loop, &h->guard);
  h->tick.data = h;
  h->guard.data = h;
  uv_timer_start(&h->tick, s_tick, 5, 0);
  uv_timer_start(&h->guard, s_guard, 120000, 0);
  assert_int_equal(uv_run(&h->loop, UV_RUN_DEFAULT), 0);
  uv_thread_join(&h->th);
  assert_int_equal(uv_loop_close(&h->loop), 0);
  uv_sem_destroy(&h->opened);
  uv_sem_destroy(&h->stop);
  uv_sem_destroy(&h->done);
  return h;
}

/* MARK: - A long frame in pieces */

/* A text frame over 1 MiB whose head arrives alone, then its payload in
 * three writes: the message buffer, reserved when the head was parsed, is
 * not released between the head and the payload (it once was, at a read
 * that ended right after the head, when it held no byte yet: the next
 * read wrote through a null pointer). */
enum { SPLIT_LEN = (3 << 19) + 11 }; /* 1.5 MiB and a bit */

typedef struct split_case {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *link;
  int port;
  uv_thread_t th;
  size_t got, bad;
  bool whole;
} split_case;

static char split_byte(size_t i) {
  return i == 0 || i == SPLIT_LEN - 1 ? '"' : (char)('a' + i % 26);
}

static void split_read(acp_uv_link *l, int status, const char *d, size_t n,
                       void *ud) {
  split_case *sc = ud;
  if (status == 0) {
    for (size_t i = 0; i < n; i++, sc->got++)
      if (sc->got < SPLIT_LEN ? d[i] != split_byte(sc->got) : d[i] != '\n')
        sc->bad++;
    if (sc->got < SPLIT_LEN + 1)
      return;
    sc->whole = true;
  }
  acp_uv_link_close(l, 1000, NULL, NULL);
  sc->link = NULL;
  acp_remote_server_close(sc->srv);
  sc->srv = NULL;
}

static void split_accept(acp_remote_server *s, acp_uv_link *link,
                         const char *id, void *ud) {
  split_case *sc = ud;
  (void)s;
  (void)id;
  sc->link = link;
  acp_uv_link_read_start(link, split_read, sc);
}

static void split_client(void *arg) {
  split_case *sc = arg;
  static const uint8_t mask[4] = {0x11, 0x22, 0x33, 0x44};
  char resp[1024];
  size_t have = 0;
  int fd = raw_connect(sc->port);
  char req[512];
  snprintf(req, sizeof(req),
           "GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" UP "\r\n", sc->port);
  raw_send(fd, req);
  while (have < sizeof(resp) - 1) {
    ssize_t k = read(fd, resp + have, sizeof(resp) - 1 - have);
    assert_true(k > 0);
    have += (size_t)k;
    resp[have] = '\0';
    if (strstr(resp, "\r\n\r\n"))
      break;
  }
  assert_non_null(strstr(resp, " 101 "));
  uint8_t *f = malloc(14 + SPLIT_LEN);
  assert_non_null(f);
  size_t hl = acp__ws_header(f, ACP__WS_OP_TEXT, SPLIT_LEN, mask);
  for (size_t i = 0; i < SPLIT_LEN; i++)
    f[hl + i] = (uint8_t)split_byte(i) ^ mask[i & 3];
  raw_write(fd, f, hl); /* the head alone, read alone */
  uv_sleep(150);
  size_t third = SPLIT_LEN / 3;
  raw_write(fd, f + hl, third);
  uv_sleep(30);
  raw_write(fd, f + hl + third, third);
  uv_sleep(30);
  raw_write(fd, f + hl + 2 * third, SPLIT_LEN - 2 * third);
  free(f);
  /* until the server closes */
  while (read(fd, resp, sizeof(resp)) > 0)
    ;
  close(fd);
}

static void test_long_frame_with_its_head_alone_arrives_whole(void **state) {
  split_case *sc = calloc(1, sizeof(*sc));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  (void)state;
  assert_non_null(sc);
  so.max_message = (size_t)4 << 20;
  assert_int_equal(uv_loop_init(&sc->loop), 0);
  assert_int_equal(acp_remote_server_new(&sc->srv, &sc->loop, &so, split_accept,
                                         sc, NULL, NULL),
                   0);
  sc->port = acp_remote_server_port(sc->srv);
  assert_int_equal(uv_thread_create(&sc->th, split_client, sc), 0);
  assert_int_equal(uv_run(&sc->loop, UV_RUN_DEFAULT), 0);
  uv_thread_join(&sc->th);
  assert_int_equal(uv_loop_close(&sc->loop), 0);
  assert_true(sc->whole);
  assert_int_equal(sc->bad, 0);
  assert_int_equal(sc->got, SPLIT_LEN + 1);
  free(sc);
}

static void test_unread_sse_stream_stalls_out(void **state) {
  (void)state;
  spair *h = stall_case(ST_SSE_MUTE);
  assert_int_equal(h->end_status, UV_ETIMEDOUT);
  assert_true(h->max_queue > 0); /* the agent was held back first */
  free(h);
}

static void test_unread_websocket_stalls_out(void **state) {
  (void)state;
  spair *h = stall_case(ST_WS_MUTE);
  assert_int_equal(h->end_status, UV_ETIMEDOUT);
  assert_true(h->max_queue > 0);
  free(h);
}

static void test_slow_sse_reader_is_not_cut(void **state) {
  (void)state;
  spair *h = stall_case(ST_SSE_SLOW);
  assert_int_equal(h->end_status, 0); /* never ended by the server */
  assert_true(h->slow_read > ST_BIG);
  /* the message took longer than the stall timeout to leave: only
   * progress counted kept the connection */
  assert_true(h->slow_ms > ST_STALL_MS);
  assert_int_equal(h->max_queue, 0); /* all of it was written */
  free(h);
}

/* The same over HTTP/2, with our client, on its session stream: the
 * agent's side floods session/update for session s1 (routed to the s1
 * session stream), and the client's link stops reading at the first one.
 * The client then gives no flow-control window back, so the server's
 * stream stops being drained and what the agent writes stays in the
 * server link's queue (acp serve's coupling stops reading the agent's
 * stdout on it) while the client holds no more than about one stream
 * window. Without backpressure on either side the client would take it
 * all (its memory is counted) or the queue would never fill (the flood
 * stops at 64 MiB written). */
typedef struct cmem {
  size_t live, peak;
} cmem;
static void *cm_malloc(size_t n, void *ud) {
  cmem *m = ud;
  size_t *b = malloc(n + 16);
  if (!b)
    return NULL;
  b[0] = n;
  m->live += n;
  if (m->live > m->peak)
    m->peak = m->live;
  return (char *)b + 16;
}
static void cm_free(void *q, void *ud) {
  cmem *m = ud;
  if (!q)
    return;
  size_t *b = (size_t *)(void *)((char *)q - 16);
  m->live -= b[0];
  free(b);
}
static void *cm_calloc(size_t k, size_t n, void *ud) {
  if (n && k > SIZE_MAX / n)
    return NULL;
  void *q = cm_malloc(k * n, ud);
  if (q)
    memset(q, 0, k * n);
  return q;
}
static void *cm_realloc(void *q, size_t n, void *ud) {
  cmem *m = ud;
  if (!q)
    return cm_malloc(n, ud);
  size_t *b = (size_t *)(void *)((char *)q - 16);
  size_t old = b[0];
  size_t *nb = realloc(b, n + 16);
  if (!nb)
    return NULL;
  nb[0] = n;
  m->live = m->live - old + n;
  if (m->live > m->peak)
    m->peak = m->live;
  return (char *)nb + 16;
}

typedef struct h2flood {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *link; /* the agent's side */
  acp_uv_link *cli;
  uv_timer_t t;
  bool flooding;
  bool stopped; /* the client's link stopped reading */
  size_t written, max_queue;
  int status;
  const char *version;
  cmem cm;
} h2flood;

static void f_end(h2flood *h) {
  uv_close((uv_handle_t *)&h->t, NULL);
  if (h->cli)
    acp_uv_link_close(h->cli, 0, NULL, NULL);
  h->cli = NULL;
  if (h->link)
    acp_uv_link_close(h->link, 0, NULL, NULL);
  h->link = NULL;
  acp_remote_server_close(h->srv);
  h->srv = NULL;
}

static void f_flood(uv_timer_t *t) {
  h2flood *h = t->data;
  size_t q = h->link ? acp_uv_link_write_queue_size(h->link) : 0;
  if (h->link && h->cli && q < (size_t)8 << 20 &&
      h->written < (size_t)64 << 20) {
    static char ev[4096];
    static const char head[] = "{\"jsonrpc\":\"2.0\",\"method\":\"session/"
                               "update\",\"params\":{\"sessionId\":\"s1\","
                               "\"u\":\"";
    memset(ev, 'x', sizeof(ev));
    memcpy(ev, head, sizeof(head) - 1);
    memcpy(ev + sizeof(ev) - 4, "\"}}\n", 4);
    for (int i = 0; i < 64; i++)
      if (acp_uv_link_write(h->link, ev, sizeof(ev)) == 0)
        h->written += sizeof(ev);
    uv_timer_start(t, f_flood, 2, 0);
    return;
  }
  h->max_queue = q;
  f_end(h);
}

static void f_srv_read(acp_uv_link *l, int status, const char *d, size_t n,
                       void *ud) {
  h2flood *h = ud;
  if (status != 0)
    return;
  if (has(d, n, "\"initialize\"")) {
    static const char r[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    assert_int_equal(acp_uv_link_write(l, r, sizeof(r) - 1), 0);
  } else if (has(d, n, "\"s1\"") && !h->flooding) {
    h->flooding = true; /* the session's stream is open: flood it */
    uv_timer_start(&h->t, f_flood, 0, 0);
  }
}

static void f_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                     void *ud) {
  h2flood *h = ud;
  (void)s;
  (void)id;
  h->link = link;
  assert_int_equal(acp_uv_link_read_start(link, f_srv_read, h), 0);
}

static void f_cli_read(acp_uv_link *l, int status, const char *d, size_t n,
                       void *ud) {
  h2flood *h = ud;
  assert_int_equal(status, 0); /* the test ends it, not a failure */
  if (has(d, n, "session/update")) {
    h->stopped = true;
    acp_uv_link_read_stop(l); /* and never again */
  }
}

static void f_connected(acp_uv_link *l, int status, const char *detail,
                        void *ud) {
  h2flood *h = ud;
  (void)detail;
  h->status = status;
  h->version = acp_remote_http_version(l);
}

static void test_unread_session_stream_h2_backs_up_into_the_link(void **st) {
  h2flood *h = calloc(1, sizeof(*h));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  acp_mem cm = {&h->cm, cm_malloc, cm_free, cm_calloc, cm_realloc};
  char url[64];
  static const char msgs[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\","
      "\"params\":{\"sessionId\":\"s1\"}}\n";
  (void)st;
  assert_int_equal(uv_loop_init(&h->loop), 0);
  uv_timer_init(&h->loop, &h->t);
  h->t.data = h;
  h->status = 1;
  assert_int_equal(
      acp_remote_server_new(&h->srv, &h->loop, &so, f_accept, h, NULL, NULL),
      0);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/acp",
           acp_remote_server_port(h->srv));
  co.transport = ACP_REMOTE_HTTP2;
  assert_int_equal(
      acp_remote_connect(&h->cli, &h->loop, url, &co, f_connected, h, &cm), 0);
  assert_int_equal(acp_uv_link_read_start(h->cli, f_cli_read, h), 0);
  assert_int_equal(acp_uv_link_write(h->cli, msgs, sizeof(msgs) - 1), 0);
  assert_int_equal(uv_run(&h->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(h->status, 0);
  assert_string_equal(h->version, "HTTP/2");
  assert_true(h->stopped);
  /* The agent's side was held back: 8 MiB wait in its link's queue. */
  assert_true(h->max_queue >= (size_t)8 << 20);
  assert_true(h->written < (size_t)64 << 20);
  /* ... and not in the client: about one stream window (1 MiB) at most. */
  assert_true(h->cm.peak < (size_t)4 << 20);
  assert_int_equal(h->cm.live, 0);
  assert_int_equal(uv_loop_close(&h->loop), 0);
  free(h);
}

/* A scripted turn over HTTP/2, our client against our server in-process:
 * the agent's session/request_permission reaches the client on session
 * s1's stream and the client's answer reaches the agent (POSTed with
 * Acp-Session-Id, the RFD's routing of responses); a session/cancel sent
 * while a turn waits reaches the agent, which ends the turn "cancelled";
 * a 1 MiB prompt arrives whole and a 1 MiB update comes back whole. */
#define BIG ((size_t)1 << 20)

typedef rc_line tline;

typedef struct h2turn {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *agent;
  acp_uv_link *cli;
  tline a, c; /* partial lines of each side */
  bool perm_seen, perm_answered, cancel_seen, cancelled, ended;
  size_t big_in, big_out;
  int status;
  const char *version;
} h2turn;

static void t_write(acp_uv_link *l, const char *s) {
  assert_int_equal(acp_uv_link_write(l, s, strlen(s)), 0);
}

/* `s` in line[0..n)? */
#define HAS(s) has(line, n, s)

static void t_agent_line(void *ud, const char *line, size_t n) {
  h2turn *t = ud;
  acp_uv_link *l = t->agent;
  if (HAS("\"initialize\"")) {
    t_write(l, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
  } else if (HAS("\"session/prompt\"") && HAS("\"id\":2,")) {
    t_write(l, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/"
               "request_permission\",\"params\":{\"sessionId\":\"s1\","
               "\"options\":[{\"optionId\":\"allow\",\"kind\":\"allow_once\","
               "\"name\":\"Allow\"}],\"toolCall\":{\"toolCallId\":\"t1\"}}}\n");
  } else if (HAS("\"id\":7,") && HAS("\"allow\"") && !HAS("\"method\"")) {
    t->perm_answered = true;
    t_write(l, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":"
               "{\"sessionId\":\"s1\",\"update\":{\"sessionUpdate\":"
               "\"agent_message_chunk\",\"content\":{\"type\":\"text\","
               "\"text\":\"allowed\"}}}}\n"
               "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"stopReason\":"
               "\"end_turn\"}}\n");
  } else if (HAS("\"session/prompt\"") && HAS("\"id\":3,")) {
    t_write(l, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":"
               "{\"sessionId\":\"s1\",\"update\":{\"sessionUpdate\":"
               "\"agent_message_chunk\",\"content\":{\"type\":\"text\","
               "\"text\":\"waiting\"}}}}\n");
  } else if (HAS("\"session/cancel\"") && HAS("\"s1\"")) {
    t->cancel_seen = true;
    t_write(l, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"stopReason\":"
               "\"cancelled\"}}\n");
  } else if (HAS("\"session/prompt\"") && HAS("\"id\":4,")) {
    t->big_in = n;
    static const char h1[] =
        "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
        "\"params\":{\"sessionId\":\"s1\",\"update\":{"
        "\"sessionUpdate\":\"agent_message_chunk\","
        "\"content\":{\"type\":\"text\",\"text\":\"";
    static const char t1[] = "\"}}}}\n{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":"
                             "{\"stopReason\":\"end_turn\"}}\n";
    char *m = malloc(sizeof(h1) - 1 + BIG + sizeof(t1) - 1);
    assert_non_null(m);
    memcpy(m, h1, sizeof(h1) - 1);
    memset(m + sizeof(h1) - 1, 'y', BIG);
    memcpy(m + sizeof(h1) - 1 + BIG, t1, sizeof(t1) - 1);
    assert_int_equal(
        acp_uv_link_write(l, m, sizeof(h1) - 1 + BIG + sizeof(t1) - 1), 0);
    free(m);
  }
}

static void t_end(h2turn *t) {
  t->ended = true;
  if (t->cli)
    acp_uv_link_close(t->cli, 1000, NULL, NULL);
  t->cli = NULL;
  if (t->agent)
    acp_uv_link_close(t->agent, 0, NULL, NULL);
  t->agent = NULL;
  acp_remote_server_close(t->srv);
  t->srv = NULL;
}

static void t_client_line(void *ud, const char *line, size_t n) {
  h2turn *t = ud;
  acp_uv_link *l = t->cli;
  if (HAS("\"id\":1,") && HAS("\"result\"")) {
    t_write(l, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\","
               "\"params\":{\"sessionId\":\"s1\",\"prompt\":[{\"type\":"
               "\"text\",\"text\":\"ask\"}]}}\n");
  } else if (HAS("\"session/request_permission\"")) {
    t->perm_seen = true;
    t_write(l, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"outcome\":{"
               "\"outcome\":\"selected\",\"optionId\":\"allow\"}}}\n");
  } else if (HAS("\"id\":2,") && HAS("\"end_turn\"")) {
    t_write(l, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/prompt\","
               "\"params\":{\"sessionId\":\"s1\",\"prompt\":[{\"type\":"
               "\"text\",\"text\":\"wait\"}]}}\n");
  } else if (HAS("\"waiting\"")) {
    t_write(l, "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\","
               "\"params\":{\"sessionId\":\"s1\"}}\n");
  } else if (HAS("\"id\":3,") && HAS("\"cancelled\"")) {
    t->cancelled = true;
    static const char h1[] = "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":"
                             "\"session/prompt\",\"params\":{\"sessionId\":"
                             "\"s1\",\"prompt\":[{\"type\":\"text\",\"text\":"
                             "\"";
    static const char t1[] = "\"}]}}\n";
    char *m = malloc(sizeof(h1) - 1 + BIG + sizeof(t1) - 1);
    assert_non_null(m);
    memcpy(m, h1, sizeof(h1) - 1);
    memset(m + sizeof(h1) - 1, 'x', BIG);
    memcpy(m + sizeof(h1) - 1 + BIG, t1, sizeof(t1) - 1);
    assert_int_equal(
        acp_uv_link_write(l, m, sizeof(h1) - 1 + BIG + sizeof(t1) - 1), 0);
    free(m);
  } else if (n > BIG && HAS("\"session/update\"")) {
    t->big_out = n;
  } else if (HAS("\"id\":4,") && HAS("\"end_turn\"")) {
    t_end(t);
  }
}
#undef HAS

static void t_agent_read(acp_uv_link *l, int status, const char *d, size_t n,
                         void *ud) {
  h2turn *t = ud;
  if (status != 0) {
    acp_uv_link_close(l, 0, NULL, NULL);
    t->agent = NULL;
    return;
  }
  rc_feed_lines(&t->a, d, n, &t->ended, t_agent_line, t);
}

static void t_client_read(acp_uv_link *l, int status, const char *d, size_t n,
                          void *ud) {
  h2turn *t = ud;
  (void)l;
  if (status != 0) {
    /* Not the scripted end: fail (and end the loop). */
    t_end(t);
    fail_msg("the client's link ended: %d", status);
  }
  rc_feed_lines(&t->c, d, n, &t->ended, t_client_line, t);
}

static void t_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                     void *ud) {
  h2turn *t = ud;
  (void)s;
  (void)id;
  assert_null(t->agent);
  t->agent = link;
  assert_int_equal(acp_uv_link_read_start(link, t_agent_read, t), 0);
}

static void t_connected(acp_uv_link *l, int status, const char *detail,
                        void *ud) {
  h2turn *t = ud;
  (void)detail;
  t->status = status;
  t->version = acp_remote_http_version(l);
}

static void test_streamable_http2_permission_cancel_and_1mib(void **state) {
  h2turn *t = calloc(1, sizeof(*t));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  char url[64];
  (void)state;
  assert_int_equal(uv_loop_init(&t->loop), 0);
  t->status = 1;
  assert_int_equal(
      acp_remote_server_new(&t->srv, &t->loop, &so, t_accept, t, NULL, NULL),
      0);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/acp",
           acp_remote_server_port(t->srv));
  co.transport = ACP_REMOTE_HTTP2;
  assert_int_equal(
      acp_remote_connect(&t->cli, &t->loop, url, &co, t_connected, t, NULL), 0);
  assert_int_equal(acp_uv_link_read_start(t->cli, t_client_read, t), 0);
  t_write(t->cli, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n");
  assert_int_equal(uv_run(&t->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(t->status, 0);
  assert_string_equal(t->version, "HTTP/2");
  assert_true(t->perm_seen);     /* the agent's request reached the client */
  assert_true(t->perm_answered); /* and its answer the agent */
  assert_true(t->cancel_seen);   /* session/cancel reached the agent */
  assert_true(t->cancelled);     /* and the turn ended cancelled */
  assert_true(t->big_in > BIG);  /* the 1 MiB prompt arrived whole */
  assert_true(t->big_in < BIG + 200);
  assert_true(t->big_out > BIG); /* and the 1 MiB update came back */
  assert_true(t->big_out < BIG + 200);
  assert_int_equal(uv_loop_close(&t->loop), 0);
  free(t->a.d);
  free(t->c.d);
  free(t);
}

/* A session stream cut in the middle of a turn, through a proxy on the
 * test's loop that cuts the first session stream (GET with Acp-Session-Id)
 * in the middle of event "u5": the client sees half an event and the end
 * of its stream. `server_side`: the proxy keeps the server's side open,
 * taking and dropping what the server writes (up to "u10": the server
 * believes those events delivered), then closes it; otherwise both sides
 * close at the cut. The agent writes u1..u10 when the prompt arrives, and
 * u11..u20 and the answer once the client opened its stream again (held
 * by the proxy meanwhile, so those wait for a stream): every update
 * arrives exactly once, in order.
 *
 * CUT_STALL: the proxy cuts as CUT_CLIENT does but swallows the reopened
 * stream's GET (the server never sees the session's stream again), and
 * the agent writes an update every tick: with a short stall timeout the
 * server ends the connection, and the agent's link reads UV_ETIMEDOUT. */
#define CUT_UPDATES 20

enum { CUT_CLIENT, CUT_SERVER, CUT_STALL };

typedef struct cutproxy cutproxy;

typedef struct cutpair {
  cutproxy *px;
  uv_tcp_t down, up;
  uv_connect_t creq;
  bool up_init, up_ok, session, discarding, held, swallow;
  char early[4096];
  size_t early_n;
  int open; /* handles not yet closed */
} cutpair;

struct cutproxy {
  uv_loop_t loop;
  uv_tcp_t lsn;
  struct sockaddr_in srv;
  int port;
  bool server_side;
  int mode;
  bool cut, reopened, last_event_id;
  int agent_status, cli_status; /* how the links ended (CUT_STALL) */
  unsigned ticks;
  uv_timer_t tick; /* CUT_STALL: the agent goes on writing */
  cutpair *pairs[32];
  unsigned npairs;
  acp_remote_server *rs;
  acp_uv_link *agent, *cli;
  tline a, c;
  unsigned got[CUT_UPDATES + 1]; /* times each update arrived */
  unsigned order_errors, next;
  bool answered, ended;
  uv_timer_t watchdog; /* a turn that never ends fails, not hangs */
};

static void cp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  (void)h;
  (void)hint;
  b->base = malloc(65536);
  b->len = b->base ? 65536 : 0;
}

static void cp_closed(uv_handle_t *h) {
  cutpair *p = h->data;
  p->open--; /* freed after the loop */
}

static void cp_close(uv_tcp_t *t) {
  cutpair *p = t->data;
  if (t == &p->up && !p->up_init)
    return;
  if (!uv_is_closing((uv_handle_t *)t))
    uv_close((uv_handle_t *)t, cp_closed);
}

static void cp_written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

static void cp_send(uv_tcp_t *t, const char *d, size_t n) {
  if (n == 0 || uv_is_closing((uv_handle_t *)t))
    return;
  uv_write_t *w = malloc(sizeof(*w) + n);
  assert_non_null(w);
  memcpy(w + 1, d, n);
  uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)n);
  if (uv_write(w, (uv_stream_t *)t, &b, 1, cp_written) != 0)
    free(w);
}

static void cut_agent_rest(cutproxy *px);
static void cp_connect_up(cutpair *p);
static void cut_tick(uv_timer_t *t);

static void cp_down_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  cutpair *p = st->data;
  cutproxy *px = p->px;
  if (n < 0) {
    cp_close(&p->down);
    cp_close(&p->up);
  } else if (n > 0 && p->swallow) {
    /* dropped: the server never sees this stream */
  } else if (n > 0) {
    if (px->mode == CUT_STALL && px->cut && !px->reopened &&
        has(b->base, (size_t)n, "GET ") &&
        has(b->base, (size_t)n, "Acp-Session-Id:")) {
      px->reopened = true;
      px->last_event_id = has(b->base, (size_t)n, "Last-Event-ID: 4\r\n");
      p->swallow = true;
      assert_int_equal(uv_timer_start(&px->tick, cut_tick, 0, 10), 0);
      free(b->base);
      return;
    }
    if (has(b->base, (size_t)n, "GET ") &&
        has(b->base, (size_t)n, "Acp-Session-Id:")) {
      p->session = true;
      if (px->cut && !px->reopened) {
        /* The client opened its session stream again: the rest of the
         * turn is written while this request waits. */
        px->reopened = true;
        px->last_event_id = has(b->base, (size_t)n, "Last-Event-ID: 4\r\n");
        p->held = true;
      }
    }
    if (!p->up_ok || p->held) {
      assert_true(p->early_n + (size_t)n <= sizeof(p->early));
      memcpy(p->early + p->early_n, b->base, (size_t)n);
      p->early_n += (size_t)n;
    } else {
      cp_send(&p->up, b->base, (size_t)n);
    }
    if (p->held) {
      p->held = false;
      cut_agent_rest(px);
      if (p->up_ok) {
        cp_send(&p->up, p->early, p->early_n);
        p->early_n = 0;
      }
    }
  }
  free(b->base);
}

static void cp_up_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  cutpair *p = st->data;
  cutproxy *px = p->px;
  if (n < 0) {
    cp_close(&p->down);
    cp_close(&p->up);
  } else if (n > 0 && p->discarding) {
    if (has(b->base, (size_t)n, "\"text\":\"u10\""))
      cp_close(&p->up); /* the server wrote u6..u10 into a dead stream */
  } else if (n > 0) {
    const char *mk = "\"text\":\"u5\"";
    size_t k = strlen(mk), at = (size_t)n;
    if (p->session && !px->cut)
      for (size_t i = 0; i + k <= (size_t)n; i++)
        if (memcmp(b->base + i, mk, k) == 0) {
          at = i;
          break;
        }
    cp_send(&p->down, b->base, at);
    if (at < (size_t)n) {
      px->cut = true;
      cp_close(&p->down);
      if (px->server_side && !has(b->base, (size_t)n, "\"text\":\"u10\""))
        p->discarding = true;
      else
        cp_close(&p->up);
    }
  }
  free(b->base);
}

static void cp_connected(uv_connect_t *cr, int status) {
  cutpair *p = cr->data;
  if (status != 0) {
    cp_close(&p->down);
    cp_close(&p->up);
    return;
  }
  p->up_ok = true;
  assert_int_equal(uv_read_start((uv_stream_t *)&p->up, cp_alloc, cp_up_read),
                   0);
  cp_send(&p->up, p->early, p->early_n);
  p->early_n = 0;
}

static void cp_connect_up(cutpair *p) {
  if (p->up_init)
    return; /* already connecting */
  p->up_init = true;
  assert_int_equal(uv_tcp_init(&p->px->loop, &p->up), 0);
  p->up.data = p;
  p->open++;
  p->creq.data = p;
  assert_int_equal(uv_tcp_connect(&p->creq, &p->up,
                                  (const struct sockaddr *)&p->px->srv,
                                  cp_connected),
                   0);
}

static void cp_accept(uv_stream_t *l, int status) {
  cutproxy *px = l->data;
  assert_int_equal(status, 0);
  cutpair *p = calloc(1, sizeof(*p));
  assert_non_null(p);
  p->px = px;
  assert_true(px->npairs < 32);
  px->pairs[px->npairs++] = p;
  assert_int_equal(uv_tcp_init(&px->loop, &p->down), 0);
  p->down.data = p;
  p->open = 1;
  assert_int_equal(uv_accept(l, (uv_stream_t *)&p->down), 0);
  assert_int_equal(
      uv_read_start((uv_stream_t *)&p->down, cp_alloc, cp_down_read), 0);
  cp_connect_up(p);
}

static void cut_update(cutproxy *px, unsigned i) {
  char m[300];
  int n = snprintf(m, sizeof(m),
                   "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                   "\"params\":{\"sessionId\":\"s1\",\"update\":{"
                   "\"sessionUpdate\":\"agent_message_chunk\",\"content\":{"
                   "\"type\":\"text\",\"text\":\"u%u\"}}}}\n",
                   i);
  assert_int_equal(acp_uv_link_write(px->agent, m, (size_t)n), 0);
}

/* CUT_STALL: one more update of the turn per tick (the first ones may
 * still go into the dying stream; the rest wait for a stream that does
 * not come), until the agent's link ends. */
static void cut_tick(uv_timer_t *t) {
  cutproxy *px = t->data;
  if (px->agent)
    cut_update(px, CUT_UPDATES + 1 + px->ticks++);
}

static void cut_agent_rest(cutproxy *px) {
  for (unsigned i = 11; i <= CUT_UPDATES; i++)
    cut_update(px, i);
  static const char ans[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{"
                            "\"stopReason\":\"end_turn\"}}\n";
  assert_int_equal(acp_uv_link_write(px->agent, ans, sizeof(ans) - 1), 0);
}

static void cut_agent_line(void *ud, const char *line, size_t n) {
  cutproxy *px = ud;
  if (has(line, n, "\"initialize\"")) {
    static const char r[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    assert_int_equal(acp_uv_link_write(px->agent, r, sizeof(r) - 1), 0);
  } else if (has(line, n, "\"session/prompt\"")) {
    for (unsigned i = 1; i <= 10; i++)
      cut_update(px, i);
  }
}

static void cut_end(cutproxy *px) {
  if (px->ended)
    return;
  px->ended = true;
  uv_close((uv_handle_t *)&px->watchdog, NULL);
  uv_close((uv_handle_t *)&px->tick, NULL);
  if (px->cli)
    acp_uv_link_close(px->cli, 1000, NULL, NULL);
  px->cli = NULL;
  if (px->agent)
    acp_uv_link_close(px->agent, 0, NULL, NULL);
  px->agent = NULL;
  acp_remote_server_close(px->rs);
  px->rs = NULL;
  uv_close((uv_handle_t *)&px->lsn, NULL);
  for (unsigned i = 0; i < px->npairs; i++) {
    cp_close(&px->pairs[i]->down);
    cp_close(&px->pairs[i]->up);
  }
}

static void cut_client_line(void *ud, const char *line, size_t n) {
  cutproxy *px = ud;
  if (has(line, n, "\"id\":1,") && has(line, n, "\"result\"")) {
    static const char p[] =
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\","
        "\"params\":{\"sessionId\":\"s1\",\"prompt\":[]}}\n";
    assert_int_equal(acp_uv_link_write(px->cli, p, sizeof(p) - 1), 0);
    return;
  }
  if (rc_count_update(line, n, px->got, &px->next, &px->order_errors,
                      CUT_UPDATES) == 0 &&
      has(line, n, "\"id\":2,") && has(line, n, "\"end_turn\"")) {
    px->answered = true;
    cut_end(px);
  }
}

static void cut_agent_read(acp_uv_link *l, int status, const char *d, size_t n,
                           void *ud) {
  cutproxy *px = ud;
  if (status != 0) {
    px->agent_status = status;
    acp_uv_link_close(l, 0, NULL, NULL);
    px->agent = NULL;
    if (px->mode == CUT_STALL)
      cut_end(px);
    return;
  }
  rc_feed_lines(&px->a, d, n, &px->ended, cut_agent_line, px);
}

static void cut_client_read(acp_uv_link *l, int status, const char *d, size_t n,
                            void *ud) {
  cutproxy *px = ud;
  (void)l;
  if (status != 0 && px->mode == CUT_STALL) {
    px->cli_status = status; /* after the agent's end: expected */
    return;
  }
  if (status != 0) {
    cut_end(px);
    fail_msg("the client's link ended: %d", status);
  }
  rc_feed_lines(&px->c, d, n, &px->ended, cut_client_line, px);
}

static void cut_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                       void *ud) {
  cutproxy *px = ud;
  (void)s;
  (void)id;
  px->agent = link;
  assert_int_equal(acp_uv_link_read_start(link, cut_agent_read, px), 0);
}

static void cut_watchdog(uv_timer_t *t) {
  cut_end(t->data); /* the asserts after the loop say what is missing */
}

static void cut_case(int mode) {
  cutproxy *px = calloc(1, sizeof(*px));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  struct sockaddr_in a;
  int alen = sizeof(a);
  char url[64];
  assert_non_null(px);
  px->server_side = mode == CUT_SERVER;
  px->mode = mode;
  assert_int_equal(uv_loop_init(&px->loop), 0);
  assert_int_equal(uv_timer_init(&px->loop, &px->tick), 0);
  px->tick.data = px;
  assert_int_equal(uv_timer_init(&px->loop, &px->watchdog), 0);
  px->watchdog.data = px;
  assert_int_equal(uv_timer_start(&px->watchdog, cut_watchdog, 60000, 0), 0);
  assert_int_equal(uv_tcp_init(&px->loop, &px->lsn), 0);
  px->lsn.data = px;
  uv_ip4_addr("127.0.0.1", 0, &a);
  assert_int_equal(uv_tcp_bind(&px->lsn, (const struct sockaddr *)&a, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&px->lsn, 16, cp_accept), 0);
  assert_int_equal(uv_tcp_getsockname(&px->lsn, (struct sockaddr *)&a, &alen),
                   0);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/acp", ntohs(a.sin_port));
  /* The client names the proxy's port in Host. */
  char host[32];
  snprintf(host, sizeof(host), "127.0.0.1:%d", ntohs(a.sin_port));
  const char *hosts[] = {host, NULL};
  so.allowed_hosts = hosts;
  if (mode == CUT_STALL)
    so.stall_ms = 200;
  assert_int_equal(acp_remote_server_new(&px->rs, &px->loop, &so, cut_accept,
                                         px, NULL, NULL),
                   0);
  uv_ip4_addr("127.0.0.1", acp_remote_server_port(px->rs), &px->srv);
  co.transport = ACP_REMOTE_HTTP;
  assert_int_equal(
      acp_remote_connect(&px->cli, &px->loop, url, &co, NULL, NULL, NULL), 0);
  assert_int_equal(acp_uv_link_read_start(px->cli, cut_client_read, px), 0);
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n";
  assert_int_equal(acp_uv_link_write(px->cli, init, sizeof(init) - 1), 0);
  assert_int_equal(uv_run(&px->loop, UV_RUN_DEFAULT), 0);
  assert_true(px->cut);           /* the stream was cut inside u5 */
  assert_true(px->reopened);      /* and opened again */
  assert_true(px->last_event_id); /* after the last whole event, u4 */
  if (mode == CUT_STALL) {
    /* The server gave up on the session's stream: the connection ended
     * as for a vanished peer (not by the watchdog, which ends the loop
     * with both links still open). */
    assert_int_equal(px->agent_status, UV_ETIMEDOUT);
    assert_false(px->answered);
    assert_int_equal(uv_loop_close(&px->loop), 0);
    for (unsigned i = 0; i < px->npairs; i++)
      free(px->pairs[i]);
    free(px->a.d);
    free(px->c.d);
    free(px);
    return;
  }
  assert_true(px->answered);
  for (unsigned i = 1; i <= CUT_UPDATES; i++)
    if (px->got[i] != 1)
      fail_msg("update u%u arrived %u times", i, px->got[i]);
  assert_int_equal(px->order_errors, 0);
  assert_int_equal(uv_loop_close(&px->loop), 0);
  for (unsigned i = 0; i < px->npairs; i++)
    free(px->pairs[i]);
  free(px->a.d);
  free(px->c.d);
  free(px);
}

static void test_session_stream_cut_client_side(void **state) {
  (void)state;
  cut_case(CUT_CLIENT);
}

static void test_session_stream_cut_server_side(void **state) {
  (void)state;
  cut_case(CUT_SERVER);
}

/* A session stream that ends and is never opened again: after the stall
 * timeout the connection ends (the agent's turn is cancelled), instead of
 * the server keeping the session's events, and the agent waiting, for
 * ever. */
static void test_session_stream_never_reopened_ends_connection(void **state) {
  (void)state;
  cut_case(CUT_STALL);
}

/* A session stream reset over HTTP/2 (h2c, prior knowledge): see
 * remote_reset.h. */
static void test_session_stream_reset_over_http2(void **state) {
  (void)state;
  reset_case(ACP_REMOTE_HTTP2, NULL, NULL);
}

static void test_session_stream_reset_hook_over_http1(void **state) {
  (void)state;
  reset_case(ACP_REMOTE_HTTP, NULL, NULL);
}

/* The server resets its own session stream (its test hook, issue 14): an
 * RST_STREAM of the server's over HTTP/2, the stream's socket closed by
 * the server over HTTP/1.1. The client resumes as after its own reset:
 * the stream opened again with Last-Event-ID, every update once, in
 * order, and the link goes on. */
static void test_session_stream_server_reset_over_http2(void **state) {
  (void)state;
  reset_case_by(ACP_REMOTE_HTTP2, NULL, NULL, true);
}

static void test_session_stream_server_cut_over_http1(void **state) {
  (void)state;
  reset_case_by(ACP_REMOTE_HTTP, NULL, NULL, true);
}

/* The same cut with u1..u4 of 512 KiB each: the socket cannot take them
 * at once, so writes are still queued when the server closes the stream's
 * socket. Their bytes must still be accounted written on the link (the
 * events go again in the replay), or the agent's output would be held
 * back for good by a queue that never empties. */
static void test_server_cut_with_writes_queued_frees_the_queue(void **state) {
  (void)state;
  reset_case_pad(ACP_REMOTE_HTTP, NULL, NULL, true, 512 * 1024);
}

static void test_server_reset_over_http2_with_writes_queued(void **state) {
  (void)state;
  reset_case_pad(ACP_REMOTE_HTTP2, NULL, NULL, true, 512 * 1024);
}

static void test_client_reset_over_http2_with_writes_queued(void **state) {
  (void)state;
  reset_case_pad(ACP_REMOTE_HTTP2, NULL, NULL, false, 512 * 1024);
}

static void test_client_cut_over_http1_with_writes_queued(void **state) {
  (void)state;
  reset_case_pad(ACP_REMOTE_HTTP, NULL, NULL, false, 512 * 1024);
}

/* Sessions opened and closed one after another over one Streamable HTTP
 * connection: each session/close the agent answers with a result ends
 * that session's stream (client side) and its route (server side); one
 * it refuses keeps them. A message the agent sends later about a closed
 * session comes on the connection stream, not into a route that waits
 * for a stream that will not come (which ended the connection when the
 * stall timeout came). */
#define CLOSER_ROUNDS 8u
#define CLOSER_REFUSED 3u /* the session whose close the agent refuses */

typedef struct closer {
  uv_loop_t loop;
  uv_timer_t poll, watchdog;
  acp_remote_server *srv;
  acp_uv_link *cli, *agent;
  tline a, c;
  unsigned round;       /* the session being used, 1.. */
  unsigned late_got;    /* late updates the client received */
  unsigned max_cli;     /* most session streams the client had open */
  unsigned bad_streams; /* a prompt answered with another count open */
  unsigned routes_end;  /* the server's session routes at the end */
  bool done;
} closer;

static unsigned closer_id(const char *line, size_t n) {
  char buf[512];
  unsigned id = 0;
  size_t k = n < sizeof(buf) - 1 ? n : sizeof(buf) - 1;
  memcpy(buf, line, k);
  buf[k] = '\0';
  const char *p = strstr(buf, "\"id\":");
  if (p)
    id = (unsigned)strtoul(p + 5, NULL, 10);
  return id;
}

static void closer_send(acp_uv_link *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void closer_send(acp_uv_link *l, const char *fmt, ...) {
  char m[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(m, sizeof(m), fmt, ap);
  va_end(ap);
  assert_true(n > 0 && (size_t)n < sizeof(m));
  assert_int_equal(acp_uv_link_write(l, m, (size_t)n), 0);
}

static void closer_end(closer *c) {
  if (c->done)
    return;
  c->done = true;
  uv_close((uv_handle_t *)&c->poll, NULL);
  uv_close((uv_handle_t *)&c->watchdog, NULL);
  if (c->cli)
    acp_uv_link_close(c->cli, 1000, NULL, NULL);
  c->cli = NULL;
  if (c->agent)
    acp_uv_link_close(c->agent, 0, NULL, NULL);
  c->agent = NULL;
  acp_remote_server_close(c->srv);
  c->srv = NULL;
}

static void closer_agent_line(void *ud, const char *line, size_t n) {
  closer *c = ud;
  unsigned id = closer_id(line, n);
  if (has(line, n, "\"initialize\"")) {
    closer_send(c->agent, "{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{}}\n",
                id);
  } else if (has(line, n, "\"session/new\"")) {
    unsigned k = id - 100;
    if (k > 1) /* late news of the session closed before */
      closer_send(c->agent,
                  "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                  "\"params\":{\"sessionId\":\"s%u\",\"update\":{"
                  "\"sessionUpdate\":\"late\"}}}\n",
                  k - 1);
    closer_send(c->agent,
                "{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{\"sessionId\":"
                "\"s%u\"}}\n",
                id, k);
  } else if (has(line, n, "\"session/prompt\"")) {
    closer_send(c->agent,
                "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                "\"params\":{\"sessionId\":\"s%u\",\"update\":{"
                "\"sessionUpdate\":\"agent_message_chunk\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{"
                "\"stopReason\":\"end_turn\"}}\n",
                id - 200, id);
  } else if (has(line, n, "\"session/close\"")) {
    if (id - 300 == CLOSER_REFUSED)
      closer_send(c->agent,
                  "{\"jsonrpc\":\"2.0\",\"id\":%u,\"error\":{\"code\":"
                  "-32603,\"message\":\"busy\"}}\n",
                  id);
    else
      closer_send(c->agent, "{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{}}\n",
                  id);
  }
}

/* Session streams the server should still hold: the refused one's (once
 * its session is past) and the current one's. */
static unsigned closer_held(const closer *c, bool current) {
  return (c->round > CLOSER_REFUSED) + (current ? 1u : 0u);
}

static void closer_next(closer *c) {
  c->round++;
  if (c->round > CLOSER_ROUNDS) {
    unsigned streams;
    c->routes_end = acp__remote_server_session_routes(c->srv, &streams);
    closer_end(c);
    return;
  }
  closer_send(c->cli,
              "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"session/new\","
              "\"params\":{\"cwd\":\"/\",\"mcpServers\":[]}}\n",
              100 + c->round);
}

/* After a close: wait for the server to see the session's stream end
 * (the client closed it), then go on. */
static void closer_poll(uv_timer_t *t) {
  closer *c = t->data;
  unsigned streams;
  (void)acp__remote_server_session_routes(c->srv, &streams);
  if (streams > closer_held(c, c->round == CLOSER_REFUSED))
    return;
  uv_timer_stop(t);
  closer_next(c);
}

static void closer_client_line(void *ud, const char *line, size_t n) {
  closer *c = ud;
  unsigned id = closer_id(line, n);
  if (has(line, n, "\"late\"")) {
    c->late_got++;
    return;
  }
  if (has(line, n, "\"method\""))
    return; /* the turn's update */
  if (id == 1) {
    closer_next(c);
  } else if (id == 100 + c->round) {
    assert_true(has(line, n, "\"sessionId\""));
    closer_send(c->cli,
                "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"session/prompt\","
                "\"params\":{\"sessionId\":\"s%u\",\"prompt\":[]}}\n",
                200 + c->round, c->round);
  } else if (id == 200 + c->round) {
    unsigned open = acp__remote_http_session_streams(c->cli);
    if (open > c->max_cli)
      c->max_cli = open;
    if (open != closer_held(c, true))
      c->bad_streams++;
    closer_send(c->cli,
                "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"session/close\","
                "\"params\":{\"sessionId\":\"s%u\"}}\n",
                300 + c->round, c->round);
  } else if (id == 300 + c->round) {
    assert_int_equal(uv_timer_start(&c->poll, closer_poll, 5, 5), 0);
  }
}

static void closer_agent_read(acp_uv_link *l, int status, const char *d,
                              size_t n, void *ud) {
  closer *c = ud;
  if (status != 0) {
    acp_uv_link_close(l, 0, NULL, NULL);
    c->agent = NULL;
    closer_end(c);
    return;
  }
  rc_feed_lines(&c->a, d, n, &c->done, closer_agent_line, c);
}

static void closer_client_read(acp_uv_link *l, int status, const char *d,
                               size_t n, void *ud) {
  closer *c = ud;
  (void)l;
  if (status != 0) {
    closer_end(c);
    fail_msg("the client's link ended: %d", status);
  }
  rc_feed_lines(&c->c, d, n, &c->done, closer_client_line, c);
}

static void closer_accept(acp_remote_server *s, acp_uv_link *link,
                          const char *id, void *ud) {
  closer *c = ud;
  (void)s;
  (void)id;
  c->agent = link;
  assert_int_equal(acp_uv_link_read_start(link, closer_agent_read, c), 0);
}

static void closer_watchdog(uv_timer_t *t) {
  closer_end(t->data); /* the asserts after the loop say what is missing */
}

static void closer_case(int transport) {
  closer *c = calloc(1, sizeof(*c));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  char url[64];
  assert_non_null(c);
  assert_int_equal(uv_loop_init(&c->loop), 0);
  assert_int_equal(uv_timer_init(&c->loop, &c->poll), 0);
  c->poll.data = c;
  assert_int_equal(uv_timer_init(&c->loop, &c->watchdog), 0);
  c->watchdog.data = c;
  assert_int_equal(uv_timer_start(&c->watchdog, closer_watchdog, 30000, 0), 0);
  so.stall_ms = 300; /* a late message kept for a dead stream ends it */
  assert_int_equal(acp_remote_server_new(&c->srv, &c->loop, &so, closer_accept,
                                         c, NULL, NULL),
                   0);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/acp",
           acp_remote_server_port(c->srv));
  co.transport = transport;
  assert_int_equal(
      acp_remote_connect(&c->cli, &c->loop, url, &co, NULL, NULL, NULL), 0);
  assert_int_equal(acp_uv_link_read_start(c->cli, closer_client_read, c), 0);
  closer_send(c->cli, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
                      "\"initialize\"}\n");
  assert_int_equal(uv_run(&c->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(c->round, CLOSER_ROUNDS + 1); /* every session done */
  assert_int_equal(c->bad_streams, 0);
  assert_int_equal(c->max_cli, 2u); /* the refused one's and the current */
  assert_int_equal(c->late_got, CLOSER_ROUNDS - 1);
  /* The refused session's route and the last one's (its stream gone,
   * not yet swept: that is done when a session stream opens). */
  assert_int_equal(c->routes_end, 2u);
  assert_int_equal(uv_loop_close(&c->loop), 0);
  free(c->a.d);
  free(c->c.d);
  free(c);
}

static void test_closed_sessions_give_their_streams_back(void **state) {
  (void)state;
  closer_case(ACP_REMOTE_HTTP);
}

static void test_closed_sessions_give_their_streams_back_h2(void **state) {
  (void)state;
  closer_case(ACP_REMOTE_HTTP2);
}

/* Lines the server's link is given in one write leave in one send: a
 * turn's last update and its answer (one read of the agent's stdout) were
 * two segments, and two wake-ups of the client. Seen from a raw client
 * socket: the data segments it received (TCP_INFO) while they came, once
 * as WebSocket frames and once as SSE events. */
typedef struct bpair {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *link;
  int port;
  bool sse; /* Streamable HTTP, else WebSocket */
  uv_thread_t th;
  uv_sem_t ready; /* the client is set to count */
  bool sent;
  bool initialized;
  /* the client's findings, checked on the test's thread */
  char got[256];
  size_t got_len;
  unsigned segs;
  bool ok;
} bpair;

static unsigned data_segs_in(int fd) {
  struct tcp_info ti;
  socklen_t n = sizeof(ti);
  memset(&ti, 0, sizeof(ti));
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &n) != 0)
    return 0;
  return ti.tcpi_data_segs_in;
}

/* Read until `stop` appears (after `from`), at most sizeof(buf) - 1. */
static size_t read_until(int fd, char *buf, size_t cap, size_t have,
                         const char *stop, size_t from) {
  while (have < cap - 1) {
    buf[have] = '\0';
    if (have > from && has(buf + from, have - from, stop))
      return have;
    ssize_t k = read(fd, buf + have, cap - 1 - have);
    if (k <= 0)
      return have;
    have += (size_t)k;
  }
  return have;
}

static void bclient(void *arg) {
  bpair *b = arg;
  char req[512], resp[4096];
  int fd = raw_connect(b->port), sfd = fd;
  size_t have;
  if (!b->sse) {
    snprintf(req, sizeof(req),
             "GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" UP "\r\n", b->port);
    raw_send(fd, req);
    have = read_until(fd, resp, sizeof(resp), 0, "\r\n\r\n", 0);
    b->ok = has(resp, have, "HTTP/1.1 101");
  } else {
    const char *body =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";
    snprintf(req, sizeof(req),
             "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             b->port, strlen(body), body);
    raw_send(fd, req);
    have = read_until(fd, resp, sizeof(resp), 0, "}", 0);
    const char *id = strstr(resp, "Acp-Connection-Id: ");
    b->ok = has(resp, have, "HTTP/1.1 200") && id != NULL;
    sfd = raw_connect(b->port);
    snprintf(req, sizeof(req),
             "GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Accept: text/event-stream\r\nAcp-Connection-Id: %.36s\r\n\r\n",
             b->port, id ? id + 19 : "");
    raw_send(sfd, req);
    have = read_until(sfd, resp, sizeof(resp), 0, "\r\n\r\n", 0);
    b->ok = b->ok && has(resp, have, "HTTP/1.1 200");
  }
  /* Everything before the two messages is in: count from here. */
  unsigned s0 = data_segs_in(sfd);
  uv_sem_post(&b->ready);
  b->got_len = read_until(sfd, b->got, sizeof(b->got), 0, "\"b\":2}", 0);
  if (b->sse)
    b->got_len = read_until(sfd, b->got, sizeof(b->got), b->got_len, "\n\n",
                            b->got_len > 2 ? b->got_len - 2 : 0);
  b->segs = data_segs_in(sfd) - s0;
  if (sfd != fd)
    close(sfd);
  close(fd);
}

static void b_read(acp_uv_link *l, int status, const char *d, size_t n,
                   void *ud) {
  bpair *b = ud;
  (void)d;
  (void)n;
  if (status != 0) {
    acp_uv_link_close(l, 0, NULL, NULL);
    b->link = NULL;
    acp_remote_server_close(b->srv);
    b->srv = NULL;
    return;
  }
  if (b->sse && !b->initialized) {
    b->initialized = true;
    const char *r = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    acp_uv_link_write(l, r, strlen(r));
  }
}

static void b_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                     void *ud) {
  bpair *b = ud;
  (void)s;
  (void)id;
  b->link = link;
  acp_uv_link_read_start(link, b_read, b);
}

static void b_tick(uv_timer_t *t) {
  bpair *b = t->data;
  if (uv_sem_trywait(&b->ready) != 0) {
    uv_timer_start(t, b_tick, 5, 0); /* not yet: look again */
    return;
  }
  static const char two[] = "{\"a\":1}\n{\"b\":2}\n";
  assert_non_null(b->link);
  assert_int_equal(acp_uv_link_write(b->link, two, sizeof(two) - 1), 0);
  b->sent = true;
  uv_close((uv_handle_t *)t, NULL);
}

static void batch_case(bool sse) {
  bpair *b = calloc(1, sizeof(*b));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  uv_timer_t t;
  b->sse = sse;
  assert_int_equal(uv_loop_init(&b->loop), 0);
  assert_int_equal(
      acp_remote_server_new(&b->srv, &b->loop, &so, b_accept, b, NULL, NULL),
      0);
  b->port = acp_remote_server_port(b->srv);
  uv_sem_init(&b->ready, 0);
  assert_int_equal(uv_thread_create(&b->th, bclient, b), 0);
  uv_timer_init(&b->loop, &t);
  t.data = b;
  uv_timer_start(&t, b_tick, 5, 0);
  /* The client's end closes the link (b_read), then the server. */
  assert_int_equal(uv_run(&b->loop, UV_RUN_DEFAULT), 0);
  uv_thread_join(&b->th);
  assert_true(b->ok);
  assert_true(b->sent);
  b->got[b->got_len] = '\0';
  if (sse) {
    assert_string_equal(b->got, "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n");
  } else {
    /* two unmasked text frames of 7 bytes */
    assert_int_equal(b->got_len, 18);
    assert_memory_equal(b->got, "\x81\x07{\"a\":1}\x81\x07{\"b\":2}", 18);
  }
  assert_int_equal(b->segs, 1);
  assert_int_equal(uv_loop_close(&b->loop), 0);
  uv_sem_destroy(&b->ready);
  free(b);
}

static void test_lines_of_one_write_leave_in_one_send(void **state) {
  (void)state;
  batch_case(false);
  batch_case(true);
}

/* A POST body that comes in many pieces, and a second POST pipelined
 * behind its last bytes, reach the link whole and in order (the server
 * reads a request into the buffer it parses, sized by Content-Length once
 * the head is in). */
typedef struct ppair {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *link;
  int port;
  uv_thread_t th;
  uv_sem_t done;
  bool initialized;
  char *got;
  size_t got_len, got_cap;
  char *body; /* the big body */
  size_t body_len;
  int accepted; /* 202s the client read */
} ppair;

static void pclient(void *arg) {
  ppair *q = arg;
  char head[512], resp[4096];
  const char *init = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";
  const char *small = "{\"jsonrpc\":\"2.0\",\"method\":\"small\"}";
  int fd = raw_connect(q->port);
  snprintf(head, sizeof(head),
           "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
           q->port, strlen(init), init);
  raw_send(fd, head);
  size_t have = read_until(fd, resp, sizeof(resp), 0, "}", 0);
  const char *id = strstr(resp, "Acp-Connection-Id: ");
  if (!has(resp, have, "HTTP/1.1 200") || !id) {
    close(fd);
    uv_sem_post(&q->done);
    return;
  }
  char cid[37];
  memcpy(cid, id + 19, 36);
  cid[36] = '\0';
  /* the big POST: head, then the body 1000 bytes a write, its last 10
   * bytes in one write with the whole small POST */
  snprintf(head, sizeof(head),
           "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Content-Type: application/json\r\nAcp-Connection-Id: %s\r\n"
           "Content-Length: %zu\r\n\r\n",
           q->port, cid, q->body_len);
  raw_send(fd, head);
  for (size_t off = 0; off + 10 < q->body_len; off += 1000) {
    size_t n = q->body_len - 10 - off < 1000 ? q->body_len - 10 - off : 1000;
    ssize_t k = write(fd, q->body + off, n);
    if (k != (ssize_t)n)
      break;
  }
  char tail[1024];
  int tn =
      snprintf(tail, sizeof(tail),
               "%.10sPOST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "Content-Type: application/json\r\nAcp-Connection-Id: "
               "%s\r\nContent-Length: %zu\r\n\r\n%s",
               q->body + q->body_len - 10, q->port, cid, strlen(small), small);
  ssize_t k = write(fd, tail, (size_t)tn);
  (void)k;
  /* two answers, each "HTTP/1.1 202 ...\r\nContent-Length: 0\r\n\r\n" */
  have = 0;
  while (q->accepted < 2 && have < sizeof(resp) - 1) {
    ssize_t r = read(fd, resp + have, sizeof(resp) - 1 - have);
    if (r <= 0)
      break;
    have += (size_t)r;
    resp[have] = '\0';
    q->accepted = 0;
    for (const char *a = resp; (a = strstr(a, "HTTP/1.1 202")); a++)
      if (strstr(a, "\r\n\r\n"))
        q->accepted++;
  }
  close(fd);
  uv_sem_post(&q->done);
}

static void p_read(acp_uv_link *l, int status, const char *d, size_t n,
                   void *ud) {
  ppair *q = ud;
  if (status != 0)
    return;
  if (q->got_len + n > q->got_cap) {
    q->got_cap = (q->got_len + n) * 2;
    q->got = realloc(q->got, q->got_cap);
    assert_non_null(q->got);
  }
  memcpy(q->got + q->got_len, d, n);
  q->got_len += n;
  if (!q->initialized) {
    q->initialized = true;
    const char *r = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    acp_uv_link_write(l, r, strlen(r));
  }
}

static void p_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                     void *ud) {
  ppair *q = ud;
  (void)s;
  (void)id;
  q->link = link;
  acp_uv_link_read_start(link, p_read, q);
}

static void p_tick(uv_timer_t *t) {
  ppair *q = t->data;
  if (uv_sem_trywait(&q->done) != 0) {
    uv_timer_start(t, p_tick, 5, 0);
    return;
  }
  uv_close((uv_handle_t *)t, NULL);
  if (q->link)
    acp_uv_link_close(q->link, 0, NULL, NULL);
  q->link = NULL;
  acp_remote_server_close(q->srv);
  q->srv = NULL;
}

static void test_post_in_pieces_then_a_pipelined_one(void **state) {
  ppair *q = calloc(1, sizeof(*q));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  uv_timer_t t;
  (void)state;
  q->body_len = 300000;
  q->body = malloc(q->body_len);
  assert_non_null(q->body);
  static const char pre[] =
      "{\"jsonrpc\":\"2.0\",\"method\":\"big\",\"params\":\"";
  memset(q->body, 'x', q->body_len);
  memcpy(q->body, pre, sizeof(pre) - 1);
  memcpy(q->body + q->body_len - 2, "\"}", 2);
  assert_int_equal(uv_loop_init(&q->loop), 0);
  assert_int_equal(
      acp_remote_server_new(&q->srv, &q->loop, &so, p_accept, q, NULL, NULL),
      0);
  q->port = acp_remote_server_port(q->srv);
  uv_sem_init(&q->done, 0);
  assert_int_equal(uv_thread_create(&q->th, pclient, q), 0);
  uv_timer_init(&q->loop, &t);
  t.data = q;
  uv_timer_start(&t, p_tick, 5, 0);
  assert_int_equal(uv_run(&q->loop, UV_RUN_DEFAULT), 0);
  uv_thread_join(&q->th);
  assert_int_equal(q->accepted, 2);
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n";
  static const char small[] = "{\"jsonrpc\":\"2.0\",\"method\":\"small\"}\n";
  size_t want = strlen(init) + q->body_len + 1 + strlen(small);
  assert_int_equal(q->got_len, want);
  assert_memory_equal(q->got, init, strlen(init));
  assert_memory_equal(q->got + strlen(init), q->body, q->body_len);
  assert_int_equal(q->got[strlen(init) + q->body_len], '\n');
  assert_memory_equal(q->got + strlen(init) + q->body_len + 1, small,
                      strlen(small));
  assert_int_equal(uv_loop_close(&q->loop), 0);
  uv_sem_destroy(&q->done);
  free(q->got);
  free(q->body);
  free(q);
}

/* The loopback exchange with every allocation of the server and the
 * client failing in turn: the loop always ends, every handle is closed,
 * nothing leaks. A run that completes delivers the whole echo. */
static void fm_on_accept(acp_remote_server *s, acp_uv_link *link,
                         const char *id, void *ud) {
  pair *p = ud;
  (void)s;
  (void)id;
  p->srv_link = link;
  if (acp_uv_link_read_start(link, srv_read, p) != 0) {
    acp_uv_link_close(link, 0, NULL, NULL);
    p->srv_link = NULL;
  }
}

static void fm_on_connected(acp_uv_link *l, int status, const char *detail,
                            void *ud) {
  on_connected(l, status, detail, ud);
}

static int pair_scenario(failmem *f) {
  pair *p = calloc(1, sizeof(*p));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_mem m = failmem_start(f, f->fail_at);
  char url[64];
  int done = 0;
  assert_int_equal(uv_loop_init(&p->loop), 0);
  p->echo = true;
  p->status = 1;
  if (acp_remote_server_new(&p->srv, &p->loop, &so, fm_on_accept, p, &m,
                            NULL) != 0)
    goto out;
  snprintf(url, sizeof(url), "ws://127.0.0.1:%d/acp",
           acp_remote_server_port(p->srv));
  if (acp_remote_connect(&p->cli, &p->loop, url, NULL, fm_on_connected, p,
                         &m) != 0) {
    acp_remote_server_close(p->srv);
    p->srv = NULL;
    goto out;
  }
  if (acp_uv_link_read_start(p->cli, cli_read, p) != 0 ||
      acp_uv_link_write(p->cli, "{\"a\":1}\n{\"b\":2}\n[3,4,5,6,7,8,9]\n",
                        32) != 0) {
    acp_uv_link_close(p->cli, 0, NULL, NULL);
    p->cli = NULL;
    acp_remote_server_close(p->srv);
    p->srv = NULL;
  }
out:
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  if (p->srv_link)
    acp_uv_link_close(p->srv_link, 0, NULL, NULL);
  if (p->srv)
    acp_remote_server_close(p->srv);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&p->loop), 0);
  done = p->got_len == 32;
  free(p);
  return done;
}

static void test_loopback_allocation_failures(void **state) {
  (void)state;
  failmem_sweep(pair_scenario, 10);
}

/* MARK: - A connection the server cannot afford */

/* An allocator that fails everything while `fail` is set. */
typedef struct tog {
  bool fail;
} tog;
static void *tog_malloc(size_t n, void *ud) {
  return ((tog *)ud)->fail ? NULL : malloc(n);
}
static void tog_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *tog_calloc(size_t a, size_t n, void *ud) {
  return ((tog *)ud)->fail ? NULL : calloc(a, n);
}
static void *tog_realloc(void *p, size_t n, void *ud) {
  return ((tog *)ud)->fail ? NULL : realloc(p, n);
}

/* A raw TCP client: sends `req` (or nothing), keeps what comes back until
 * the server ends the connection. */
typedef struct raw {
  uv_tcp_t tcp;
  uv_connect_t cr;
  uv_write_t wr;
  const char *req;
  char got[512];
  size_t n;
  bool ended;
  uv_timer_t guard; /* a deadlock guard, not a measurement */
  bool timed_out;
} raw;

static void raw_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  raw *r = h->data;
  (void)hint;
  b->base = r->got + r->n;
  b->len = sizeof(r->got) - 1 - r->n;
}

static void raw_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  raw *r = st->data;
  (void)b;
  if (n > 0) {
    r->n += (size_t)n;
    r->got[r->n] = '\0';
  } else if (n < 0) {
    r->ended = true;
    uv_close((uv_handle_t *)&r->tcp, NULL);
    uv_close((uv_handle_t *)&r->guard, NULL);
  }
}

static void raw_connected(uv_connect_t *cr, int status) {
  raw *r = cr->data;
  assert_int_equal(status, 0);
  assert_int_equal(uv_read_start((uv_stream_t *)&r->tcp, raw_alloc, raw_read),
                   0);
  if (r->req) {
    uv_buf_t b = uv_buf_init((char *)r->req, (unsigned)strlen(r->req));
    assert_int_equal(uv_write(&r->wr, (uv_stream_t *)&r->tcp, &b, 1, NULL), 0);
  }
}

static void raw_guard(uv_timer_t *t) {
  raw *r = t->data;
  r->timed_out = true;
  uv_close((uv_handle_t *)&r->tcp, NULL);
  uv_close((uv_handle_t *)&r->guard, NULL);
}

static void raw_run(uv_loop_t *loop, int port, raw *r, const char *req) {
  struct sockaddr_in a;
  memset(r, 0, sizeof(*r));
  r->req = req;
  uv_ip4_addr("127.0.0.1", port, &a);
  uv_tcp_init(loop, &r->tcp);
  r->tcp.data = r;
  r->cr.data = r;
  uv_timer_init(loop, &r->guard);
  r->guard.data = r;
  uv_timer_start(&r->guard, raw_guard, 30000, 0);
  assert_int_equal(
      uv_tcp_connect(&r->cr, &r->tcp, (struct sockaddr *)&a, raw_connected), 0);
  while (!r->ended && !r->timed_out)
    uv_run(loop, UV_RUN_ONCE);
  while (uv_run(loop, UV_RUN_NOWAIT) != 0 && !r->ended)
    ;
}

/* One HTTP/1.1 exchange on its own socket: the response is complete once
 * its head and Content-Length bytes of body are in. */
typedef struct xchg {
  uv_tcp_t tcp;
  uv_connect_t cr;
  uv_write_t wr;
  const char *req;
  char got[2048];
  size_t n;
  bool done;
} xchg;

static void x_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  xchg *x = h->data;
  (void)hint;
  b->base = x->got + x->n;
  b->len = sizeof(x->got) - 1 - x->n;
}

static void x_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  xchg *x = st->data;
  (void)b;
  if (n > 0) {
    x->n += (size_t)n;
    x->got[x->n] = '\0';
    const char *e = strstr(x->got, "\r\n\r\n");
    const char *cl = strstr(x->got, "Content-Length: ");
    if (!e ||
        (cl && x->n < (size_t)(e + 4 - x->got) + strtoul(cl + 16, NULL, 10)))
      return;
  } else if (n == 0) {
    return;
  }
  x->done = true;
  uv_close((uv_handle_t *)&x->tcp, NULL);
}

static void x_connected(uv_connect_t *cr, int status) {
  xchg *x = cr->data;
  assert_int_equal(status, 0);
  assert_int_equal(uv_read_start((uv_stream_t *)&x->tcp, x_alloc, x_read), 0);
  uv_buf_t b = uv_buf_init((char *)x->req, (unsigned)strlen(x->req));
  assert_int_equal(uv_write(&x->wr, (uv_stream_t *)&x->tcp, &b, 1, NULL), 0);
}

static void exchange(uv_loop_t *loop, int port, xchg *x, const char *req) {
  struct sockaddr_in a;
  memset(x, 0, sizeof(*x));
  x->req = req;
  uv_ip4_addr("127.0.0.1", port, &a);
  uv_tcp_init(loop, &x->tcp);
  x->tcp.data = x;
  x->cr.data = x;
  assert_int_equal(
      uv_tcp_connect(&x->cr, &x->tcp, (struct sockaddr *)&a, x_connected), 0);
  while (!x->done)
    uv_run(loop, UV_RUN_ONCE);
  uv_run(loop, UV_RUN_NOWAIT); /* the close callback */
}

/* The closing DELETE of a connection that ended: answered 202 for every
 * id ended within the window (60 s), not only for the last 32; past the
 * bound on how many are kept the oldest are forgotten (404). */
#define GONE_N 40
typedef struct gsrv {
  acp_uv_link *links[GONE_N];
  unsigned n;
} gsrv;

static void g_read(acp_uv_link *l, int status, const char *d, size_t n,
                   void *ud) {
  (void)ud;
  if (status == 0 && has(d, n, "\"initialize\"")) {
    static const char r[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    assert_int_equal(acp_uv_link_write(l, r, sizeof(r) - 1), 0);
  }
}

static void g_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                     void *ud) {
  gsrv *g = ud;
  (void)s;
  (void)id;
  assert_true(g->n < GONE_N);
  g->links[g->n++] = link;
  acp_uv_link_read_start(link, g_read, g);
}

/* End `count` connections (initialize, then the agent's side closes
 * its link) and DELETE ids[first] and ids[count - 1]: the statuses. */
static void gone_case(unsigned keep, unsigned count, int *st_first,
                      int *st_last) {
  uv_loop_t loop;
  gsrv g;
  acp_remote_server *srv = NULL;
  char ids[GONE_N][37], req[512];
  xchg x;
  static const char body[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";
  memset(&g, 0, sizeof(g));
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(
      acp_remote_server_new(&srv, &loop, NULL, g_accept, &g, NULL, NULL), 0);
  if (keep)
    acp__remote_server_gone_limits(srv, keep, 60000);
  int port = acp_remote_server_port(srv);
  for (unsigned i = 0; i < count; i++) {
    snprintf(req, sizeof(req),
             "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             port, sizeof(body) - 1, body);
    exchange(&loop, port, &x, req);
    assert_non_null(strstr(x.got, "HTTP/1.1 200"));
    const char *p = strstr(x.got, "Acp-Connection-Id: ");
    assert_non_null(p);
    memcpy(ids[i], p + 19, 36);
    ids[i][36] = '\0';
    assert_int_equal(g.n, i + 1);
    acp_uv_link_close(g.links[i], 0, NULL, NULL); /* the agent is done */
  }
  int *out[2] = {st_first, st_last};
  const char *which[2] = {ids[0], ids[count - 1]};
  for (int k = 0; k < 2; k++) {
    snprintf(req, sizeof(req),
             "DELETE /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Acp-Connection-Id: %s\r\n\r\n",
             port, which[k]);
    exchange(&loop, port, &x, req);
    assert_true(strncmp(x.got, "HTTP/1.1 ", 9) == 0);
    *out[k] = atoi(x.got + 9);
  }
  /* an id that never was ours */
  snprintf(req, sizeof(req),
           "DELETE /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Acp-Connection-Id: 00000000-0000-4000-8000-000000000000\r\n\r\n",
           port);
  exchange(&loop, port, &x, req);
  assert_true(strncmp(x.got, "HTTP/1.1 404", 12) == 0);
  acp_remote_server_close(srv);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_delete_after_many_ends_is_answered_2xx(void **state) {
  int first, last;
  (void)state;
  gone_case(0, GONE_N, &first, &last); /* more than the old ring's 32 */
  assert_int_equal(first, 202);
  assert_int_equal(last, 202);
  /* bounded: with room for 4 ids, the first of 6 is forgotten */
  gone_case(4, 6, &first, &last);
  assert_int_equal(first, 404);
  assert_int_equal(last, 202);
}

/* The window of ended ids expires (issue 14), measured on the test hook's
 * clock rather than waited for: an id is answered 202 up to 60 s after its
 * end (inclusive) and 404 after; the ids are forgotten oldest first, and
 * the ring's memory is given back once the window is empty. */
static int gone_delete(uv_loop_t *loop, int port, const char *id) {
  char req[512];
  xchg x;
  snprintf(req, sizeof(req),
           "DELETE /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Acp-Connection-Id: %s\r\n\r\n",
           port, id);
  exchange(loop, port, &x, req);
  assert_true(strncmp(x.got, "HTTP/1.1 ", 9) == 0);
  return atoi(x.got + 9);
}

static void test_delete_after_the_window_is_404_and_frees_it(void **state) {
  uv_loop_t loop;
  gsrv g;
  acp_remote_server *srv = NULL;
  char ids[2][37], req[512];
  xchg x;
  uint64_t clock = 1000000, t0 = clock;
  unsigned cap = 99;
  static const char body[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";
  (void)state;
  memset(&g, 0, sizeof(g));
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(
      acp_remote_server_new(&srv, &loop, NULL, g_accept, &g, NULL, NULL), 0);
  acp__remote_server_gone_clock(srv, &clock);
  int port = acp_remote_server_port(srv);
  assert_int_equal(acp__remote_server_gone_held(srv, &cap), 0);
  assert_int_equal(cap, 0); /* nothing taken before an end */
  for (unsigned i = 0; i < 2; i++) {
    clock = t0 + i * 30000; /* the ends: at t0 and t0 + 30 s */
    snprintf(req, sizeof(req),
             "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             port, sizeof(body) - 1, body);
    exchange(&loop, port, &x, req);
    assert_non_null(strstr(x.got, "HTTP/1.1 200"));
    const char *p = strstr(x.got, "Acp-Connection-Id: ");
    assert_non_null(p);
    memcpy(ids[i], p + 19, 36);
    ids[i][36] = '\0';
    acp_uv_link_close(g.links[i], 0, NULL, NULL); /* the agent is done */
    assert_int_equal(acp__remote_server_gone_held(srv, &cap), i + 1);
    assert_true(cap > 0);
  }
  clock = t0 + 60000; /* the first ended 60 s ago: still in */
  assert_int_equal(gone_delete(&loop, port, ids[0]), 202);
  clock = t0 + 60001; /* ... and now out; the second is still in */
  assert_int_equal(gone_delete(&loop, port, ids[0]), 404);
  assert_int_equal(acp__remote_server_gone_held(srv, &cap), 1);
  assert_true(cap > 0);
  assert_int_equal(gone_delete(&loop, port, ids[1]), 202);
  clock = t0 + 90001; /* both out: the ring is freed */
  assert_int_equal(gone_delete(&loop, port, ids[1]), 404);
  assert_int_equal(acp__remote_server_gone_held(srv, &cap), 0);
  assert_int_equal(cap, 0);
  acp_remote_server_close(srv);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void close_accept(acp_remote_server *s, acp_uv_link *link,
                         const char *id, void *ud) {
  (void)s;
  (void)id;
  (void)ud;
  acp_uv_link_close(link, 0, NULL, NULL);
}

static void test_unaffordable_connection_is_dropped(void **state) {
  uv_loop_t loop;
  tog t = {false};
  acp_mem m = {&t, tog_malloc, tog_free, tog_calloc, tog_realloc};
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_server *srv = NULL;
  raw r;
  (void)state;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(
      acp_remote_server_new(&srv, &loop, &so, close_accept, NULL, &m, NULL), 0);
  int port = acp_remote_server_port(srv);
  /* No memory for the connection: the client sees it end at once. */
  t.fail = true;
  raw_run(&loop, port, &r, NULL);
  assert_false(r.timed_out);
  assert_true(r.ended);
  assert_int_equal(r.n, 0);
  /* Memory again: the server accepts and answers the next one. Before,
   * the first connection stayed unaccepted and libuv stopped accepting. */
  t.fail = false;
  raw_run(&loop, port, &r,
          "GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  assert_false(r.timed_out);
  assert_true(strncmp(r.got, "HTTP/1.1 ", 9) == 0);
  acp_remote_server_close(srv);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* The same over Streamable HTTP, both ends on the failing allocator: the
 * client (http_client.c: initialize POST, SSE streams, a session stream
 * opened for a message naming a session, DELETE) and the server's side
 * (the connection, its session-stream routing). Every run ends, reports
 * or completes, and frees everything. Each point ends on its failure
 * event (the client's link ending, a write the agent cannot make), never
 * on a server deadline, so the ~80 points take well under a second. */
/* The client's end is the scenario's: its link ended (the failure was
 * reported) or the echo is complete. The server's side of the ACP
 * connection is closed then too, as the caller of acp_remote_serve would
 * when its agent is done: otherwise a connection whose SSE stream never
 * came would wait out the server's stream deadline at every point. */
static void fm_cli_read(acp_uv_link *l, int status, const char *d, size_t n,
                        void *ud) {
  pair *p = ud;
  cli_read(l, status, d, n, ud);
  if (!p->cli && p->srv_link) {
    acp_uv_link_close(p->srv_link, 0, NULL, NULL);
    p->srv_link = NULL;
  }
}

static int stream_pair_scenario(failmem *f, int transport) {
  pair *p = calloc(1, sizeof(*p));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  acp_mem m = failmem_start(f, f->fail_at);
  static const char msgs[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\","
      "\"params\":{\"sessionId\":\"s1\"}}\n"
      "{\"a\":1}\n";
  /* The answer to initialize, then the echo of the other two. */
  static const size_t want = 37 + 72 + 8;
  char url[64];
  int done = 0;
  assert_int_equal(uv_loop_init(&p->loop), 0);
  p->echo = true;
  p->answer_init = true;
  p->want = want;
  p->status = 1;
  if (acp_remote_server_new(&p->srv, &p->loop, &so, fm_on_accept, p, &m,
                            NULL) != 0)
    goto out;
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/acp",
           acp_remote_server_port(p->srv));
  co.transport = transport;
  if (acp_remote_connect(&p->cli, &p->loop, url, &co, fm_on_connected, p, &m) !=
      0) {
    acp_remote_server_close(p->srv);
    p->srv = NULL;
    goto out;
  }
  if (acp_uv_link_read_start(p->cli, fm_cli_read, p) != 0 ||
      acp_uv_link_write(p->cli, msgs, sizeof(msgs) - 1) != 0) {
    acp_uv_link_close(p->cli, 0, NULL, NULL);
    p->cli = NULL;
    acp_remote_server_close(p->srv);
    p->srv = NULL;
  }
out:
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  if (p->srv_link)
    acp_uv_link_close(p->srv_link, 0, NULL, NULL);
  if (p->srv)
    acp_remote_server_close(p->srv);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&p->loop), 0);
  done = p->got_len == want;
  free(p);
  return done;
}

static int http_pair_scenario(failmem *f) {
  return stream_pair_scenario(f, ACP_REMOTE_HTTP);
}

static void test_streamable_http_allocation_failures(void **state) {
  (void)state;
  failmem_sweep(http_pair_scenario, 20);
}

/* The same over HTTP/2 (h2c): every request a stream of one connection,
 * nghttp2's sessions on both ends on the failing allocator too. It found
 * two gaps in the server (h2.c): a session stream whose SSE answer could
 * not be queued was reset but still had the session's messages routed
 * into it (lost), and a POST body chunk that could not be kept was
 * dropped by nghttp2 and the rest answered 202 (the client waited for
 * ever for the echo). */
static int h2_pair_scenario(failmem *f) {
  return stream_pair_scenario(f, ACP_REMOTE_HTTP2);
}

static void test_streamable_http2_allocation_failures(void **state) {
  (void)state;
  failmem_sweep(h2_pair_scenario, 20);
}

/* MARK: - Streamable HTTP requests */

static int check_acp(const char *req, size_t max, acp__acp_req *r) {
  acp__http_head h;
  acp_ssize n = acp__http_parse_head(req, strlen(req), false, &h);
  assert_true(n > 0);
  return acp__http_check_acp(&h, max, r);
}

#define H "Host: 127.0.0.1:9\r\n"
#define CID "Acp-Connection-Id: 0f0e4b3a-1c2d-4e5f-8a9b-0c1d2e3f4a5b\r\n"

static void test_streamable_http_requests_are_classified(void **state) {
  acp__acp_req r;
  (void)state;
  /* initialize: no connection id yet */
  assert_int_equal(check_acp("POST /acp HTTP/1.1\r\n" H
                             "Content-Type: application/json\r\n"
                             "Content-Length: 42\r\n\r\n",
                             100, &r),
                   0);
  assert_int_equal(r.kind, ACP__REQ_POST);
  assert_int_equal(r.content_length, 42);
  assert_null(r.conn_id);
  assert_int_equal(check_acp("POST /acp HTTP/1.1\r\n" H CID
                             "Acp-Session-Id: s1\r\n"
                             "Content-Type: application/json; charset=utf-8\r\n"
                             "Content-Length: 0\r\n\r\n",
                             100, &r),
                   0);
  assert_int_equal(r.conn_id_len, 36);
  assert_int_equal(r.session_id_len, 2);
  assert_memory_equal(r.session_id, "s1", 2);
  /* limits and shapes */
  assert_int_equal(check_acp("POST /acp HTTP/1.1\r\n" H
                             "Content-Type: application/json\r\n"
                             "Content-Length: 101\r\n\r\n",
                             100, &r),
                   413);
  assert_int_equal(check_acp("POST /acp HTTP/1.1\r\n" H
                             "Content-Type: application/json\r\n"
                             "Content-Length: 99999999999999999999\r\n\r\n",
                             100, &r),
                   411);
  assert_int_equal(check_acp("POST /acp HTTP/1.1\r\n" H
                             "Content-Type: application/json\r\n"
                             "Content-Length: 1x\r\n\r\n",
                             100, &r),
                   400);
  assert_int_equal(check_acp("POST /acp HTTP/1.1\r\n" H
                             "Content-Type: application/json\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n",
                             100, &r),
                   411);
  assert_int_equal(check_acp("POST /acp HTTP/1.1\r\n" H
                             "Content-Type: text/plain\r\n"
                             "Content-Length: 2\r\n\r\n",
                             100, &r),
                   415);
  assert_int_equal(check_acp("POST /acp HTTP/1.1\r\n" H
                             "Content-Type: application/jsonx\r\n"
                             "Content-Length: 2\r\n\r\n",
                             100, &r),
                   415);
  /* GET: SSE needs Accept and a connection id; a plain GET stays 426 */
  assert_int_equal(check_acp("GET /acp HTTP/1.1\r\n" H CID
                             "Accept: text/event-stream\r\n\r\n",
                             100, &r),
                   0);
  assert_int_equal(r.kind, ACP__REQ_SSE);
  assert_null(r.session_id);
  assert_int_equal(check_acp("GET /acp HTTP/1.1\r\n" H
                             "Accept: text/event-stream\r\n\r\n",
                             100, &r),
                   400);
  assert_int_equal(check_acp("GET /acp HTTP/1.1\r\n" H CID "\r\n", 100, &r),
                   426);
  assert_int_equal(check_acp("DELETE /acp HTTP/1.1\r\n" H CID "\r\n", 100, &r),
                   0);
  assert_int_equal(r.kind, ACP__REQ_DELETE);
  assert_int_equal(check_acp("DELETE /acp HTTP/1.1\r\n" H "\r\n", 100, &r),
                   400);
  assert_int_equal(check_acp("PATCH /acp HTTP/1.1\r\n" H "\r\n", 100, &r), 405);
}

/* MARK: - Handoff (acp_remote_adopt, acp_remote_handoff_*) */

/* A connected TCP pair on loopback: c[0] the client's end, c[1] the
 * server's. */
static void tcp_pair(int c[2]) {
  struct sockaddr_in a;
  socklen_t al = sizeof(a);
  int l = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(l >= 0);
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(l, 1), 0);
  assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
  c[0] = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(connect(c[0], (struct sockaddr *)&a, sizeof(a)), 0);
  c[1] = accept(l, NULL, NULL);
  assert_true(c[1] >= 0);
  close(l);
}

typedef struct adopted {
  acp_uv_link *link;
  char text[256];
  size_t len;
  int status;
  bool closed;
} adopted;

static void adopted_closed(acp_uv_link *l, void *ud) {
  (void)l;
  ((adopted *)ud)->closed = true;
}

static void adopted_read(acp_uv_link *l, int status, const char *d, size_t n,
                         void *ud) {
  adopted *a = ud;
  if (status != 0) {
    a->status = status;
    return;
  }
  assert_true(a->len + n < sizeof(a->text));
  memcpy(a->text + a->len, d, n);
  a->len += n;
  if (a->len == 9) { /* "hi\nthere\n": answer, then close with 1011 */
    assert_int_equal(acp_uv_link_write(l, "ok\n", 3), 0);
    acp_uv_link_set_close_code(l, 1011);
    acp_uv_link_close(l, 1000, adopted_closed, a);
  }
}

/* Read exactly n bytes from a blocking socket. */
static void read_all(int fd, uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    assert_true(r > 0);
    p += r;
    n -= (size_t)r;
  }
}

/* The whole handoff in one process: a server-side socket and the bytes
 * read past the request go through the control socket
 * (acp__handoff_send_head, what acp serve sends) to
 * acp_remote_handoff_receive(); the adopted link reads the pre-read frame
 * first, then the one that comes on the socket, answers with a frame and
 * closes with the code it was given. The server sees "ok" on the control
 * socket. */
static void test_handoff_adopts_the_socket_with_its_pre_read_bytes(void **st) {
  (void)st;
  int tcp[2], ctl[2];
  uint8_t pre[64], f2[64], b[64];
  uv_loop_t loop;
  adopted a;
  acp_remote_handoff *h = NULL;
  memset(&a, 0, sizeof(a));
  tcp_pair(tcp);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl), 0);
  size_t pl = frame(pre, ACP__WS_OP_TEXT, true, "hi", 2, M);
  acp_remote_adopt_options o = ACP_REMOTE_ADOPT_OPTIONS_INIT;
  o.max_message = 1024;
  o.ping_ms = 60000;
  assert_int_equal(acp__handoff_send_head(ctl[0], tcp[1], pl, &o, 0), 0);
  assert_int_equal(write(ctl[0], pre, pl), (ssize_t)pl);
  close(tcp[1]); /* the server's copy: the agent's is in flight */
  assert_int_equal(acp_remote_handoff_receive(&h, ctl[1], NULL), 0);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(acp_remote_handoff_adopt(h, &loop, &a.link), 0);
  acp_uv_link *again = NULL;
  assert_int_equal(acp_remote_handoff_adopt(h, &loop, &again),
                   ACP_ERR_INVALID_ARGUMENT); /* once */
  assert_non_null(a.link);
  acp_remote_handoff_free(h);
  char ok[4] = {0};
  assert_int_equal(read(ctl[0], ok, 3), 3);
  assert_string_equal(ok, "ok\n");
  size_t fl = frame(f2, ACP__WS_OP_TEXT, true, "there", 5, M);
  assert_int_equal(write(tcp[0], f2, fl), (ssize_t)fl);
  assert_int_equal(acp_uv_link_read_start(a.link, adopted_read, &a), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_true(a.closed);
  assert_int_equal((int)a.len, 9);
  assert_memory_equal(a.text, "hi\nthere\n", 9);
  /* The answer (an unmasked text frame "ok"), then close 1011. */
  read_all(tcp[0], b, 4);
  assert_int_equal(b[0], 0x81);
  assert_int_equal(b[1], 2);
  assert_memory_equal(b + 2, "ok", 2);
  read_all(tcp[0], b, 4);
  assert_int_equal(b[0], 0x88);
  assert_int_equal((b[2] << 8) | b[3], 1011);
  assert_int_equal(uv_loop_close(&loop), 0);
  close(tcp[0]);
  close(ctl[0]);
  close(ctl[1]);
}

/* Bad control input: a clear error, nothing leaked, nothing blocked. */
static void test_handoff_receive_refuses_bad_input(void **st) {
  (void)st;
  int ctl[2];
  acp_remote_handoff *h = (acp_remote_handoff *)1;
  assert_int_equal(acp_remote_handoff_receive(&h, -1, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(h);
  assert_int_equal(acp_remote_handoff_receive(NULL, 0, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  /* Not a handoff line. */
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl), 0);
  assert_int_equal(write(ctl[0], "HELLO\n", 6), 6);
  assert_int_equal(acp_remote_handoff_receive(&h, ctl[1], NULL),
                   ACP_ERR_PROTOCOL);
  assert_null(h);
  /* A good line without a descriptor. */
  assert_int_equal(write(ctl[0], "ACP-HANDOFF 1 0 0 0\n", 20), 20);
  assert_int_equal(acp_remote_handoff_receive(&h, ctl[1], NULL),
                   ACP_ERR_PROTOCOL);
  /* A line longer than any head, no newline. */
  char junk[200];
  memset(junk, 'x', sizeof(junk));
  assert_int_equal(write(ctl[0], junk, sizeof(junk)), (ssize_t)sizeof(junk));
  assert_int_equal(acp_remote_handoff_receive(&h, ctl[1], NULL),
                   ACP_ERR_PROTOCOL);
  close(ctl[0]);
  close(ctl[1]);
  /* The end before a whole message, also in the announced payload. */
  int tcp[2];
  tcp_pair(tcp);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl), 0);
  acp_remote_adopt_options o = ACP_REMOTE_ADOPT_OPTIONS_INIT;
  assert_int_equal(acp__handoff_send_head(ctl[0], tcp[1], 10, &o, 0), 0);
  assert_int_equal(write(ctl[0], "abc", 3), 3);
  close(ctl[0]);
  assert_int_equal(acp_remote_handoff_receive(&h, ctl[1], NULL),
                   ACP_ERR_CLOSED);
  assert_int_equal(acp_remote_handoff_receive(&h, ctl[1], NULL),
                   ACP_ERR_CLOSED);
  close(ctl[1]);
  close(tcp[0]);
  close(tcp[1]);
  /* acp_remote_adopt() takes the descriptor even when it refuses. */
  acp_uv_link *l = (acp_uv_link *)1;
  int d = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(d >= 0);
  assert_int_equal(acp_remote_adopt(&l, NULL, d, NULL, 0, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(l);
  assert_int_equal(fcntl(d, F_GETFD), -1);
  acp_remote_handoff_free(NULL);
}

/* The message's two versions: version 1 (acp serve before the stall
 * setting: no resume) is still read; version 2 says whether the server
 * parks; anything else is refused with nothing leaked. */
static void test_handoff_reads_both_versions(void **st) {
  (void)st;
  static const struct {
    const char *line;
    int rv, resumable;
  } cases[] = {
      {"ACP-HANDOFF 1 0 1024 60000\n", 0, 0},
      {"ACP-HANDOFF 2 0 1024 60000 500 0\n", 0, 0},
      {"ACP-HANDOFF 2 0 1024 60000 18446744073709551615 1\n", 0, 1},
      {"ACP-HANDOFF 2 0 1024 60000 500\n", ACP_ERR_PROTOCOL, 0},
      {"ACP-HANDOFF 2 0 1024 60000 500 2\n", ACP_ERR_PROTOCOL, 0},
      {"ACP-HANDOFF 2 0 1024 -1 500 1\n", ACP_ERR_PROTOCOL, 0},
      {"ACP-HANDOFF 3 0 1024 60000 500 1\n", ACP_ERR_PROTOCOL, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int tcp[2], ctl[2];
    acp_remote_handoff *h = NULL;
    tcp_pair(tcp);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl), 0);
    assert_int_equal(acp__handoff_send_line(ctl[0], tcp[1], cases[i].line,
                                            strlen(cases[i].line)),
                     0);
    assert_int_equal(acp_remote_handoff_receive(&h, ctl[1], NULL), cases[i].rv);
    assert_int_equal(acp_remote_handoff_resumable(h), cases[i].resumable);
    acp_remote_handoff_free(h); /* closes the received descriptor */
    close(ctl[0]);
    close(ctl[1]);
    close(tcp[0]);
    close(tcp[1]);
  }
  assert_int_equal(acp_remote_handoff_resumable(NULL), 0);
}

typedef struct resumed {
  acp_uv_link *link;
  char text[256];
  size_t len;
  int status; /* the read side's end, 1 while open */
  int parks, resumes;
  bool closed;
} resumed;

static void resumed_read(acp_uv_link *l, int status, const char *d, size_t n,
                         void *ud) {
  resumed *r = ud;
  (void)l;
  if (status != 0) {
    r->status = status;
    return;
  }
  assert_true(r->len + n < sizeof(r->text));
  memcpy(r->text + r->len, d, n);
  r->len += n;
}

static void resumed_park(acp_uv_link *l, int parked, void *ud) {
  resumed *r = ud;
  assert_ptr_equal(l, r->link);
  if (parked) {
    r->parks++;
    /* What the agent writes while parked (its cancelled turn's end) is
     * dropped; a line left open here is not finished on the next
     * connection. */
    assert_int_equal(acp_uv_link_write(l, "lost\npart", 9), 0);
  } else {
    r->resumes++;
  }
}

static void resumed_closed(acp_uv_link *l, void *ud) {
  (void)l;
  ((resumed *)ud)->closed = true;
}

/* Run the loop until `*flag` reaches `want` (events, no clock). */
static void run_until(uv_loop_t *loop, const int *flag, int want) {
  for (int i = 0; i < 100000 && *flag != want; i++)
    uv_run(loop, UV_RUN_ONCE);
  assert_int_equal(*flag, want);
}

/* Read n bytes from a socket the loop writes to (the loop runs between
 * tries). */
static void run_read(uv_loop_t *loop, int fd, uint8_t *p, size_t n) {
  for (int i = 0; n > 0 && i < 100000; i++) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    uv_run(loop, UV_RUN_NOWAIT);
  }
  assert_int_equal((int)n, 0);
}

static void send_handoff(int ctl, int sock, const char *pre_text, int resume) {
  uint8_t pre[64];
  size_t pl = pre_text ? frame(pre, ACP__WS_OP_TEXT, true, pre_text,
                               strlen(pre_text), M)
                       : 0;
  acp_remote_adopt_options o = ACP_REMOTE_ADOPT_OPTIONS_INIT;
  o.stall_ms = 5000;
  assert_int_equal(acp__handoff_send_head(ctl, sock, pl, &o, resume), 0);
  if (pl > 0)
    assert_int_equal(write(ctl, pre, pl), (ssize_t)pl);
  close(sock); /* the server's copy */
}

static void expect_line(int fd, const char *want) {
  char rx[16] = {0};
  size_t n = strlen(want);
  read_all(fd, (uint8_t *)rx, n);
  assert_string_equal(rx, want);
}

/* acp_remote_handoff_open() with a server that parks (RESUME 1), in one
 * process: a connection is adopted and carries a line each way; it drops
 * (the client's socket closed without a close frame): the server is told
 * "parked", the callback runs, what the agent writes meanwhile is lost; a
 * second handoff on the same control socket is adopted (its pre-read
 * frame comes first), the agent's next line goes to the new client, and
 * the link closes it with the close code it was given (1001). */
static void test_handoff_link_parks_and_resumes(void **st) {
  (void)st;
  int a[2], b[2], ctl[2];
  uint8_t f[64], rx[64];
  uv_loop_t loop;
  resumed r;
  memset(&r, 0, sizeof(r));
  r.status = 1;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl), 0);
  tcp_pair(a);
  send_handoff(ctl[0], a[1], NULL, 1);
  assert_int_equal(
      acp_remote_handoff_open(&r.link, &loop, ctl[1], resumed_park, &r, NULL),
      0);
  assert_non_null(r.link);
  expect_line(ctl[0], "ok\n");
  assert_int_equal(acp_uv_link_read_start(r.link, resumed_read, &r), 0);
  size_t fl = frame(f, ACP__WS_OP_TEXT, true, "one", 3, M);
  assert_int_equal(write(a[0], f, fl), (ssize_t)fl);
  for (int i = 0; i < 100000 && r.len < 4; i++)
    uv_run(&loop, UV_RUN_ONCE);
  assert_memory_equal(r.text, "one\n", 4);
  assert_int_equal(acp_uv_link_write(r.link, "r1\n", 3), 0);
  run_read(&loop, a[0], rx, 4);
  assert_int_equal(rx[0], 0x81);
  assert_memory_equal(rx + 2, "r1", 2);
  /* The drop: no close frame. */
  close(a[0]);
  run_until(&loop, &r.parks, 1);
  assert_int_equal(r.status, 1); /* the link did not end */
  expect_line(ctl[0], "parked\n");
  assert_int_equal(acp_uv_link_write(r.link, "more lost\nand part", 18), 0);
  /* The reconnect, with a frame read past its request. */
  tcp_pair(b);
  send_handoff(ctl[0], b[1], "two", 1);
  run_until(&loop, &r.resumes, 1);
  expect_line(ctl[0], "ok\n");
  for (int i = 0; i < 100000 && r.len < 8; i++)
    uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal((int)r.len, 8);
  assert_memory_equal(r.text + 4, "two\n", 4);
  /* The rest of the line begun while parked is not sent. */
  assert_int_equal(acp_uv_link_write(r.link, "ial\nr2\n", 7), 0);
  acp_uv_link_set_close_code(r.link, 1001);
  acp_uv_link_close(r.link, 1000, resumed_closed, &r);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_true(r.closed);
  read_all(b[0], rx, 4);
  assert_int_equal(rx[0], 0x81);
  assert_int_equal(rx[1], 2);
  assert_memory_equal(rx + 2, "r2", 2);
  read_all(b[0], rx, 4);
  assert_int_equal(rx[0], 0x88);
  assert_int_equal((rx[2] << 8) | rx[3], 1001);
  assert_int_equal(r.parks, 1);
  assert_int_equal(uv_loop_close(&loop), 0);
  close(b[0]);
  close(ctl[0]);
  close(ctl[1]);
}

/* Parked, the server closes the control socket (the grace ran out): the
 * link's read side ends (UV_EOF) and nothing leaks. A close frame from
 * the client ends it too, without parking. A server that does not park
 * (RESUME 0) gets the adopted link itself: a drop ends it. */
static void test_handoff_link_ends_when_nobody_comes_back(void **st) {
  (void)st;
  for (int round = 0; round < 3; round++) {
    int a[2], ctl[2];
    uv_loop_t loop;
    resumed r;
    memset(&r, 0, sizeof(r));
    r.status = 1;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl), 0);
    tcp_pair(a);
    send_handoff(ctl[0], a[1], NULL, round != 2);
    assert_int_equal(
        acp_remote_handoff_open(&r.link, &loop, ctl[1], resumed_park, &r, NULL),
        0);
    expect_line(ctl[0], "ok\n");
    assert_int_equal(acp_uv_link_read_start(r.link, resumed_read, &r), 0);
    if (round == 1) {
      uint8_t f[16];
      size_t fl = frame(f, ACP__WS_OP_CLOSE, true, "\x03\xe8", 2, M);
      assert_int_equal(write(a[0], f, fl), (ssize_t)fl);
      run_until(&loop, &r.status, UV_EOF);
      assert_int_equal(r.parks, 0);
    } else if (round == 0) {
      close(a[0]);
      a[0] = -1;
      run_until(&loop, &r.parks, 1);
      expect_line(ctl[0], "parked\n");
      close(ctl[0]);
      ctl[0] = -1;
      run_until(&loop, &r.status, UV_EOF);
    } else {
      close(a[0]);
      a[0] = -1;
      for (int i = 0; i < 100000 && r.status == 1; i++)
        uv_run(&loop, UV_RUN_ONCE);
      assert_true(r.status < 0 && r.status != UV_EOF);
      assert_int_equal(r.parks, 0);
    }
    acp_uv_link_close(r.link, 0, resumed_closed, &r);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_true(r.closed);
    assert_int_equal(uv_loop_close(&loop), 0);
    if (a[0] >= 0)
      close(a[0]);
    if (ctl[0] >= 0)
      close(ctl[0]);
    close(ctl[1]);
  }
  acp_uv_link *l = (acp_uv_link *)1;
  assert_int_equal(acp_remote_handoff_open(&l, NULL, 0, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(l);
}

/* MARK: - HTTP/2 stream stalls (issue 14) */

/* A client that reads its HTTP/2 socket (so the socket's stall rule sees
 * progress) but gives one SSE stream no flow-control window: an nghttp2
 * client session driven by hand on a socket of the test's loop, with
 * SETTINGS_INITIAL_WINDOW_SIZE 4096 and a connection window of 16 MiB
 * kept open (every DATA byte consumed at the connection level), against
 * the server with stall_ms 300. It initializes, opens session s1's stream
 * and POSTs a notification for s1, at which the agent's side writes s1
 * updates of 4 KiB each.
 *  - HS_MUTE: the session stream's window is never given back. The agent
 *    floods until its link holds 1 MiB (backpressure), and after stall_ms
 *    the server resets that stream (RST_STREAM CANCEL) and the agent's
 *    link ends with UV_ETIMEDOUT; a second initialize on the same
 *    connection is then answered 200 (the connection went on, no GOAWAY).
 *    Before the per-stream rule nothing ended and the deadlock guard did.
 *  - HS_SLOW: the window comes back 4 KiB per 10 ms tick, 256 KiB in all
 *    (over 600 ms, twice stall_ms): never reset, everything arrives and
 *    the agent's link never ends. */
enum { HS_MUTE, HS_SLOW };
#define HS_STALL_MS 300u
#define HS_EVENTS 64
#define HS_EV 4096 /* bytes of one update line, '\n' included */

typedef struct hstall {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *agent[2];
  unsigned accepts;
  int mode, port;
  uv_tcp_t tcp;
  uv_connect_t cr;
  nghttp2_session *ng;
  char rbuf[65536];
  char conn_id[37];
  int32_t init_id, sess_id, note_id, init2_id;
  int status[32]; /* by stream id / 2 */
  bool closed[32];
  uint32_t code[32];
  bool goaway, sock_ended, flooding, ended, timed_out;
  size_t xs;      /* payload bytes of s1's updates that arrived */
  size_t pending; /* HS_SLOW: arrived, window not yet given back */
  size_t max_queue;
  int agent_status; /* how the first agent's link ended (0: it did not) */
  uint64_t first_at, last_at; /* loop time of s1's first and last bytes */
  uv_timer_t tick, guard;
} hstall;

/* An update of s1: the head, then 'x' up to HS_EV with "\"}}\n". */
static const char hs_head[] = "{\"jsonrpc\":\"2.0\",\"method\":\"session/"
                              "update\",\"params\":{\"sessionId\":\"s1\","
                              "\"u\":\"";
#define HS_X (HS_EV - (sizeof(hs_head) - 1) - 4) /* 'x' bytes in one */

static void hs_event(char *ev) {
  memset(ev, 'x', HS_EV);
  memcpy(ev, hs_head, sizeof(hs_head) - 1);
  memcpy(ev + HS_EV - 4, "\"}}\n", 4);
}

typedef struct hs_body {
  const char *p;
  size_t n;
} hs_body;

static void hs_written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

static void hs_flush(hstall *h) {
  const uint8_t *d;
  ssize_t n;
  if (h->ended)
    return;
  while ((n = nghttp2_session_mem_send(h->ng, &d)) > 0) {
    uv_write_t *w = malloc(sizeof(*w) + (size_t)n);
    assert_non_null(w);
    memcpy(w + 1, d, (size_t)n);
    uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)n);
    assert_int_equal(uv_write(w, (uv_stream_t *)&h->tcp, &b, 1, hs_written), 0);
  }
  assert_true(n == 0);
}

static void hs_end(hstall *h) {
  if (h->ended)
    return;
  h->ended = true;
  uv_close((uv_handle_t *)&h->tick, NULL);
  uv_close((uv_handle_t *)&h->guard, NULL);
  uv_close((uv_handle_t *)&h->tcp, NULL);
  for (int i = 0; i < 2; i++)
    if (h->agent[i]) {
      acp_uv_link_close(h->agent[i], 0, NULL, NULL);
      h->agent[i] = NULL;
    }
  acp_remote_server_close(h->srv);
  h->srv = NULL;
}

static ssize_t hs_read_body(nghttp2_session *s, int32_t id, uint8_t *buf,
                            size_t len, uint32_t *flags,
                            nghttp2_data_source *src, void *ud) {
  hs_body *b = src->ptr;
  (void)s;
  (void)id;
  (void)ud;
  size_t n = b->n < len ? b->n : len;
  memcpy(buf, b->p, n);
  b->p += n;
  b->n -= n;
  if (b->n == 0) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    free(src->ptr);
  }
  return (ssize_t)n;
}

/* A request on the connection; `body` (a literal) makes it a POST. */
static int32_t hs_request(hstall *h, const char *body, const char *sid) {
  char auth[32];
  nghttp2_nv nv[8];
  size_t k = 0;
  snprintf(auth, sizeof(auth), "127.0.0.1:%d", h->port);
#define HNV(n, v)                                                              \
  nv[k++] = (nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), \
                         NGHTTP2_NV_FLAG_NONE}
  HNV(":method", body ? "POST" : "GET");
  HNV(":scheme", "http");
  HNV(":authority", auth);
  HNV(":path", "/acp");
  if (body)
    HNV("content-type", "application/json");
  else
    HNV("accept", "text/event-stream");
  if (h->conn_id[0])
    HNV("acp-connection-id", h->conn_id);
  if (sid)
    HNV("acp-session-id", sid);
#undef HNV
  nghttp2_data_provider dp;
  if (body) {
    hs_body *b = malloc(sizeof(*b));
    assert_non_null(b);
    b->p = body;
    b->n = strlen(body);
    dp.source.ptr = b;
    dp.read_callback = hs_read_body;
  }
  int32_t id =
      nghttp2_submit_request(h->ng, NULL, nv, k, body ? &dp : NULL, NULL);
  assert_true(id > 0 && id < 64);
  return id; /* sent at the next hs_flush (not from nghttp2's callbacks) */
}

static const char hs_init[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";

static int hs_on_header(nghttp2_session *s, const nghttp2_frame *f,
                        const uint8_t *name, size_t nl, const uint8_t *value,
                        size_t vl, uint8_t flags, void *ud) {
  hstall *h = ud;
  int32_t id = f->hd.stream_id;
  (void)s;
  (void)flags;
  if (nl == 7 && memcmp(name, ":status", 7) == 0 && id < 64)
    h->status[id / 2] = atoi((const char *)value);
  if (nl == 17 && memcmp(name, "acp-connection-id", 17) == 0 && vl == 36 &&
      id == h->init_id) {
    memcpy(h->conn_id, value, 36);
    h->conn_id[36] = '\0';
  }
  return 0;
}

static int hs_on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
  hstall *h = ud;
  (void)s;
  if (f->hd.type == NGHTTP2_GOAWAY)
    h->goaway = true;
  /* s1's stream is open: tell the agent (a notification for s1) */
  if (f->hd.type == NGHTTP2_HEADERS && f->hd.stream_id == h->sess_id &&
      !h->note_id)
    h->note_id = hs_request(h,
                            "{\"jsonrpc\":\"2.0\",\"method\":\"session/"
                            "cancel\",\"params\":{\"sessionId\":\"s1\"}}",
                            "s1");
  return 0;
}

static int hs_on_data(nghttp2_session *s, uint8_t flags, int32_t id,
                      const uint8_t *data, size_t len, void *ud) {
  hstall *h = ud;
  (void)flags;
  assert_int_equal(nghttp2_session_consume_connection(s, len), 0);
  if (id != h->sess_id) {
    assert_int_equal(nghttp2_session_consume_stream(s, id, len), 0);
    return 0;
  }
  if (!h->first_at)
    h->first_at = uv_now(&h->loop);
  h->last_at = uv_now(&h->loop);
  for (size_t i = 0; i < len; i++)
    h->xs += data[i] == 'x';
  h->pending += len;
  if (h->mode == HS_SLOW && h->xs == (size_t)HS_EVENTS * HS_X)
    hs_end(h); /* every update arrived */
  return 0;
}

static int hs_on_close(nghttp2_session *s, int32_t id, uint32_t code,
                       void *ud) {
  hstall *h = ud;
  (void)s;
  if (id >= 64)
    return 0;
  h->closed[id / 2] = true;
  h->code[id / 2] = code;
  if (id == h->init_id && h->status[id / 2] == 200 && !h->sess_id)
    h->sess_id = hs_request(h, NULL, "s1");
  if (id == h->init2_id && h->init2_id)
    hs_end(h);
  return 0;
}

static void hs_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *b) {
  hstall *h = hd->data;
  (void)hint;
  *b = uv_buf_init(h->rbuf, sizeof(h->rbuf));
}

static void hs_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  hstall *h = st->data;
  if (h->ended)
    return;
  if (n < 0) {
    h->sock_ended = true; /* the server closed the connection */
    hs_end(h);
    return;
  }
  if (n > 0) {
    assert_true(nghttp2_session_mem_recv(h->ng, (const uint8_t *)b->base,
                                         (size_t)n) == n);
    hs_flush(h);
  }
}

static void hs_connected(uv_connect_t *cr, int status) {
  hstall *h = cr->data;
  nghttp2_session_callbacks *cbs;
  nghttp2_option *opt;
  assert_int_equal(status, 0);
  assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
  nghttp2_session_callbacks_set_on_header_callback(cbs, hs_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, hs_on_frame);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, hs_on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, hs_on_close);
  assert_int_equal(nghttp2_option_new(&opt), 0);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  assert_int_equal(nghttp2_session_client_new2(&h->ng, cbs, h, opt), 0);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4096},
                                 {NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
  assert_int_equal(nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, 2), 0);
  assert_int_equal(nghttp2_session_set_local_window_size(
                       h->ng, NGHTTP2_FLAG_NONE, 0, 16 << 20),
                   0);
  assert_int_equal(uv_read_start((uv_stream_t *)&h->tcp, hs_alloc, hs_read), 0);
  h->init_id = hs_request(h, hs_init, NULL);
  hs_flush(h);
}

/* HS_MUTE: the agent floods s1 until its link holds 1 MiB. HS_SLOW: the
 * client gives 4 KiB of s1's window back. */
static void hs_tick(uv_timer_t *t) {
  hstall *h = t->data;
  if (h->ended)
    return;
  if (h->mode == HS_SLOW) {
    size_t k = h->pending < 4096 ? h->pending : 4096;
    if (k) {
      assert_int_equal(nghttp2_session_consume_stream(h->ng, h->sess_id, k), 0);
      h->pending -= k;
      hs_flush(h);
    }
    uv_timer_start(t, hs_tick, 10, 0);
    return;
  }
  acp_uv_link *a = h->agent[0];
  if (!a)
    return;
  size_t q = acp_uv_link_write_queue_size(a);
  if (q > h->max_queue)
    h->max_queue = q;
  if (q >= (size_t)1 << 20)
    return; /* held back: the stall rule has to end it */
  static char ev[HS_EV];
  hs_event(ev);
  for (int i = 0; i < 16; i++)
    assert_int_equal(acp_uv_link_write(a, ev, sizeof(ev)), 0);
  uv_timer_start(t, hs_tick, 2, 0);
}

static void hs_agent_read(acp_uv_link *l, int status, const char *d, size_t n,
                          void *ud) {
  hstall *h = ud;
  if (status != 0) {
    if (l == h->agent[0]) {
      h->agent_status = status;
      h->agent[0] = NULL;
      /* a new ACP connection on the same HTTP/2 connection */
      if (h->mode == HS_MUTE && !h->ended) {
        h->conn_id[0] = '\0'; /* a new one: no Acp-Connection-Id */
        h->init2_id = hs_request(h, hs_init, NULL);
        hs_flush(h);
      }
    } else {
      h->agent[1] = NULL;
    }
    acp_uv_link_close(l, 0, NULL, NULL);
    return;
  }
  if (has(d, n, "\"initialize\"")) {
    static const char r[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    assert_int_equal(acp_uv_link_write(l, r, sizeof(r) - 1), 0);
  } else if (has(d, n, "session/cancel") && l == h->agent[0] && !h->flooding) {
    h->flooding = true;
    if (h->mode == HS_MUTE) {
      uv_timer_start(&h->tick, hs_tick, 0, 0);
      return;
    }
    /* HS_SLOW: 256 KiB at once, paced by the client's window */
    char *ev = malloc(HS_EV);
    assert_non_null(ev);
    hs_event(ev);
    for (int i = 0; i < HS_EVENTS; i++)
      assert_int_equal(acp_uv_link_write(l, ev, HS_EV), 0);
    free(ev);
    uv_timer_start(&h->tick, hs_tick, 10, 0);
  }
}

static void hs_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                      void *ud) {
  hstall *h = ud;
  (void)s;
  (void)id;
  assert_true(h->accepts < 2);
  h->agent[h->accepts++] = link;
  assert_int_equal(acp_uv_link_read_start(link, hs_agent_read, h), 0);
}

static void hs_guard(uv_timer_t *t) {
  hstall *h = t->data; /* a deadlock guard, not a measurement */
  h->timed_out = true;
  hs_end(h);
}

static hstall *hs_case(int mode) {
  hstall *h = calloc(1, sizeof(*h));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  struct sockaddr_in a;
  assert_non_null(h);
  h->mode = mode;
  so.stall_ms = HS_STALL_MS;
  assert_int_equal(uv_loop_init(&h->loop), 0);
  assert_int_equal(
      acp_remote_server_new(&h->srv, &h->loop, &so, hs_accept, h, NULL, NULL),
      0);
  h->port = acp_remote_server_port(h->srv);
  uv_timer_init(&h->loop, &h->tick);
  uv_timer_init(&h->loop, &h->guard);
  h->tick.data = h;
  h->guard.data = h;
  uv_timer_start(&h->guard, hs_guard, 60000, 0);
  uv_tcp_init(&h->loop, &h->tcp);
  h->tcp.data = h;
  h->cr.data = h;
  uv_ip4_addr("127.0.0.1", h->port, &a);
  assert_int_equal(
      uv_tcp_connect(&h->cr, &h->tcp, (struct sockaddr *)&a, hs_connected), 0);
  assert_int_equal(uv_run(&h->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&h->loop), 0);
  nghttp2_session_del(h->ng);
  return h;
}

static void test_http2_stream_without_window_stalls_out(void **state) {
  (void)state;
  hstall *h = hs_case(HS_MUTE);
  assert_false(h->timed_out);
  assert_true(h->max_queue >= (size_t)1 << 20); /* held back first */
  assert_int_equal(h->agent_status, UV_ETIMEDOUT);
  assert_true(h->closed[h->sess_id / 2]);
  assert_int_equal(h->code[h->sess_id / 2], NGHTTP2_CANCEL);
  /* the connection went on: a new ACP connection was served on it */
  assert_int_equal(h->status[h->init2_id / 2], 200);
  assert_int_equal(h->accepts, 2);
  assert_false(h->goaway);
  assert_false(h->sock_ended);
  free(h);
}

static void test_http2_stream_given_window_slowly_is_not_cut(void **state) {
  (void)state;
  hstall *h = hs_case(HS_SLOW);
  assert_false(h->timed_out);
  assert_int_equal(h->agent_status, 0); /* never ended by the server */
  assert_int_equal(h->xs, (size_t)HS_EVENTS * HS_X);
  assert_false(h->closed[h->sess_id / 2]);
  /* the transfer took longer than the stall timeout: only progress kept
   * the stream */
  assert_true(h->last_at - h->first_at > HS_STALL_MS);
  free(h);
}

/* MARK: - HTTP/1.1 session stream ended with writes queued (issue 14) */

/* A session stream over HTTP/1.1 whose client reads nothing (SO_RCVBUF
 * 4096, reading stopped after the response head), so that 2 MiB of s1's
 * updates wait in libuv's queue, credited to no one yet. Then the stream
 * ends while they wait: QC_CUT, the server's test hook breaks it off
 * (the exchange is detached first, then its socket closed); QC_CLOSE, the
 * client closes its socket. The writes are cancelled or fail, and what
 * they carried must still be accounted on the agent's link (the events
 * are replayed from the kept ones, with no credit): its queue must come
 * back to what is really withheld (QC_CUT: the held-back event; QC_CLOSE:
 * nothing), else the coupled agent stays held back for good. Before, a
 * cancelled write found no exchange to credit (report_credit) and the
 * deadlock guard ended the wait with 2 MiB still counted. */
enum { QC_CUT, QC_CLOSE };
#define QC_BIG ((size_t)256 << 10)
#define QC_HELD ((size_t)2 << 20)

typedef struct qcut {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *agent;
  int port, mode;
  char conn_id[37];
  uv_tcp_t sse;
  uv_connect_t cr;
  uv_write_t wr;
  char req[512];
  char head[4096];
  size_t hn;
  bool head_done, sse_closed, done, timed_out;
  unsigned cuts, events;
  size_t want, queued;
  uv_idle_t watch;
  uv_timer_t guard;
} qcut;

static void qc_line(acp_uv_link *l, const char *text, size_t pad) {
  size_t n = strlen(text);
  char *m = malloc(n + pad + 8);
  assert_non_null(m);
  memcpy(m, text, n);
  memset(m + n, 'p', pad);
  memcpy(m + n + pad, "\"}}\n", 4);
  assert_int_equal(acp_uv_link_write(l, m, n + pad + 4), 0);
  free(m);
}

/* s1's events until 2 MiB wait unwritten (the kernel's buffers on the
 * way take some first), at most 256 of them in all. */
static void qc_fill(qcut *q, acp_uv_link *l) {
  while (q->events < 256 && acp_uv_link_write_queue_size(l) < QC_HELD) {
    qc_line(l,
            "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
            "\"params\":{\"sessionId\":\"s1\",\"u\":\"",
            QC_BIG);
    q->events++;
  }
}

static void qc_agent_read(acp_uv_link *l, int status, const char *d, size_t n,
                          void *ud) {
  qcut *q = ud;
  (void)l;
  if (status != 0) {
    acp_uv_link_close(l, 0, NULL, NULL);
    q->agent = NULL;
    return;
  }
  if (has(d, n, "\"initialize\"")) {
    static const char r[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    assert_int_equal(acp_uv_link_write(l, r, sizeof(r) - 1), 0);
  } else if (has(d, n, "session/cancel")) {
    qc_fill(q, l);
  }
}

static void qc_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                      void *ud) {
  qcut *q = ud;
  (void)s;
  (void)id;
  assert_null(q->agent);
  q->agent = link;
  assert_int_equal(acp_uv_link_read_start(link, qc_agent_read, q), 0);
}

static void qc_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  qcut *q = h->data;
  (void)hint;
  *b = uv_buf_init(q->head + q->hn, (unsigned)(sizeof(q->head) - 1 - q->hn));
}

/* Up to the end of the response head, then not a byte more. */
static void qc_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  qcut *q = st->data;
  (void)b;
  assert_true(n >= 0); /* the stream is open until the test ends it */
  q->hn += (size_t)n;
  q->head[q->hn] = '\0';
  if (strstr(q->head, "\r\n\r\n")) {
    q->head_done = true;
    uv_read_stop(st);
  }
}

static void qc_connected(uv_connect_t *cr, int status) {
  qcut *q = cr->data;
  assert_int_equal(status, 0);
  uv_buf_t b = uv_buf_init(q->req, (unsigned)strlen(q->req));
  assert_int_equal(uv_write(&q->wr, (uv_stream_t *)&q->sse, &b, 1, NULL), 0);
  assert_int_equal(uv_read_start((uv_stream_t *)&q->sse, qc_alloc, qc_read), 0);
}

static void qc_watch(uv_idle_t *w) {
  qcut *q = w->data;
  if (q->agent && acp_uv_link_write_queue_size(q->agent) != q->want)
    return;
  q->done = true;
  uv_idle_stop(w);
}

static void qc_guard(uv_timer_t *t) {
  qcut *q = t->data; /* a deadlock guard, not a measurement */
  q->timed_out = true;
  uv_idle_stop(&q->watch);
}

static void qc_sse_closed(uv_handle_t *h) {
  qcut *q = h->data;
  q->sse_closed = true;
}

static void qc_case(int mode) {
  qcut *q = calloc(1, sizeof(*q));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  struct sockaddr_in a;
  char req[512];
  xchg x;
  uv_os_fd_t fd;
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";
  static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"session/"
                             "cancel\",\"params\":{\"sessionId\":\"s1\"}}";
  assert_non_null(q);
  q->mode = mode;
  so.stall_ms = UINT64_MAX; /* the stall rule must not end it first */
  so.ping_ms = 600000;      /* nor the wait for a connection stream */
  assert_int_equal(uv_loop_init(&q->loop), 0);
  assert_int_equal(
      acp_remote_server_new(&q->srv, &q->loop, &so, qc_accept, q, NULL, NULL),
      0);
  q->port = acp_remote_server_port(q->srv);
  uv_timer_init(&q->loop, &q->guard);
  q->guard.data = q;
  uv_timer_start(&q->guard, qc_guard, 60000, 0);
  uv_idle_init(&q->loop, &q->watch);
  q->watch.data = q;
  /* initialize */
  snprintf(req, sizeof(req),
           "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
           q->port, sizeof(init) - 1, init);
  exchange(&q->loop, q->port, &x, req);
  assert_non_null(strstr(x.got, "HTTP/1.1 200"));
  const char *p = strstr(x.got, "Acp-Connection-Id: ");
  assert_non_null(p);
  memcpy(q->conn_id, p + 19, 36);
  /* s1's stream, on a socket with a small receive buffer */
  assert_int_equal(uv_tcp_init_ex(&q->loop, &q->sse, AF_INET), 0);
  q->sse.data = q;
  q->cr.data = q;
  assert_int_equal(uv_fileno((uv_handle_t *)&q->sse, &fd), 0);
  int rcv = 4096;
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv)), 0);
  snprintf(q->req, sizeof(q->req),
           "GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Accept: text/event-stream\r\nAcp-Connection-Id: %s\r\n"
           "Acp-Session-Id: s1\r\n\r\n",
           q->port, q->conn_id);
  uv_ip4_addr("127.0.0.1", q->port, &a);
  assert_int_equal(
      uv_tcp_connect(&q->cr, &q->sse, (struct sockaddr *)&a, qc_connected), 0);
  while (!q->head_done && !q->timed_out)
    uv_run(&q->loop, UV_RUN_ONCE);
  assert_non_null(strstr(q->head, "HTTP/1.1 200"));
  /* the agent writes 2 MiB for s1 when this arrives */
  snprintf(req, sizeof(req),
           "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Content-Type: application/json\r\nAcp-Connection-Id: %s\r\n"
           "Acp-Session-Id: s1\r\nContent-Length: %zu\r\n\r\n%s",
           q->port, q->conn_id, sizeof(note) - 1, note);
  exchange(&q->loop, q->port, &x, req);
  assert_non_null(strstr(x.got, "HTTP/1.1 202"));
  assert_non_null(q->agent);
  /* most of it waits in libuv: the client reads nothing. The kernel's
   * buffers may have taken more since the agent wrote (its send buffer
   * grows; slow under valgrind): topped up again first. */
  qc_fill(q, q->agent);
  q->queued = acp_uv_link_write_queue_size(q->agent);
  assert_true(q->queued >= QC_HELD);
  if (mode == QC_CUT) {
    /* the next event is held back and the stream broken off (after
     * detaching its exchange) */
    assert_int_equal(
        acp__remote_server_cut_session_stream(q->srv, q->events, &q->cuts), 0);
    static const char last[] = "{\"jsonrpc\":\"2.0\",\"method\":\"session/"
                               "update\",\"params\":{\"sessionId\":\"s1\","
                               "\"u\":\"nine\"}}\n";
    assert_int_equal(acp_uv_link_write(q->agent, last, sizeof(last) - 1), 0);
    assert_int_equal(q->cuts, 1);
    q->want = sizeof(last) - 1; /* kept for a reopen, its credit withheld */
  } else {
    uv_close((uv_handle_t *)&q->sse, qc_sse_closed);
    q->want = 0;
  }
  assert_int_equal(uv_idle_start(&q->watch, qc_watch), 0);
  while (!q->done && !q->timed_out)
    uv_run(&q->loop, UV_RUN_ONCE);
  size_t left = q->agent ? acp_uv_link_write_queue_size(q->agent) : 0;
  /* the end */
  uv_close((uv_handle_t *)&q->watch, NULL);
  uv_close((uv_handle_t *)&q->guard, NULL);
  if (mode == QC_CUT)
    uv_close((uv_handle_t *)&q->sse, qc_sse_closed);
  if (q->agent)
    acp_uv_link_close(q->agent, 0, NULL, NULL);
  q->agent = NULL;
  acp_remote_server_close(q->srv);
  assert_int_equal(uv_run(&q->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&q->loop), 0);
  assert_false(q->timed_out);
  assert_true(q->done);
  assert_int_equal(left, q->want);
  assert_true(q->sse_closed);
  free(q);
}

static void
test_http1_session_stream_cut_with_writes_queued_credits(void **st) {
  (void)st;
  qc_case(QC_CUT);
}

static void
test_http1_session_stream_closed_with_writes_queued_credits(void **st) {
  (void)st;
  qc_case(QC_CLOSE);
}

/* A session stream (GET) or the connection stream, read to the end into
 * a fixed buffer. */
typedef struct rost {
  uv_tcp_t tcp;
  uv_connect_t cr;
  uv_write_t wr;
  char req[512];
  char got[16384];
  size_t n;
  bool closed;
} rost;

/* session/close answered with a result, then a POST naming the session
 * again (a session/load), then the session's stream goes: with
 * ROUTE_REUSED the route lives on and the session's next event waits for
 * its next stream; with ROUTE_CLOSED (no POST between) the route is dead
 * and the event goes on the connection stream. */
enum { ROUTE_REUSED, ROUTE_CLOSED };

typedef struct reopen {
  uv_loop_t loop;
  acp_remote_server *srv;
  acp_uv_link *agent;
  int port;
  char conn_id[37];
  rost conn, s1, s1b;
  uv_timer_t guard;
  bool timed_out;
} reopen;

static void ro_agent_read(acp_uv_link *l, int status, const char *d, size_t n,
                          void *ud) {
  reopen *r = ud;
  if (status != 0) {
    acp_uv_link_close(l, 0, NULL, NULL);
    r->agent = NULL;
    return;
  }
  /* Every request gets an empty result with its id (1, 7 or 8). */
  static const char *const ids[] = {"\"id\":1,", "\"id\":7,", "\"id\":8,"};
  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
    if (has(d, n, ids[i])) {
      char ans[64];
      int k = snprintf(ans, sizeof(ans),
                       "{\"jsonrpc\":\"2.0\",%s\"result\":{}}\n", ids[i]);
      assert_int_equal(acp_uv_link_write(l, ans, (size_t)k), 0);
    }
}

static void ro_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                      void *ud) {
  reopen *r = ud;
  (void)s;
  (void)id;
  assert_null(r->agent);
  r->agent = link;
  assert_int_equal(acp_uv_link_read_start(link, ro_agent_read, r), 0);
}

static void ro_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  rost *t = h->data;
  (void)hint;
  *b = uv_buf_init(t->got + t->n, (unsigned)(sizeof(t->got) - 1 - t->n));
}

static void ro_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
  rost *t = st->data;
  (void)b;
  if (n > 0) {
    t->n += (size_t)n;
    t->got[t->n] = '\0';
    assert_true(t->n < sizeof(t->got) - 1);
  }
}

static void ro_connected(uv_connect_t *cr, int status) {
  rost *t = cr->data;
  assert_int_equal(status, 0);
  uv_buf_t b = uv_buf_init(t->req, (unsigned)strlen(t->req));
  assert_int_equal(uv_write(&t->wr, (uv_stream_t *)&t->tcp, &b, 1, NULL), 0);
  assert_int_equal(uv_read_start((uv_stream_t *)&t->tcp, ro_alloc, ro_read), 0);
}

static void ro_closed(uv_handle_t *h) {
  ((rost *)h->data)->closed = true;
}

static void ro_guard(uv_timer_t *t) {
  ((reopen *)t->data)->timed_out = true; /* a deadlock guard */
}

/* Run the loop until `t` has received `what` (or the guard fires). */
static bool ro_wait_for(reopen *r, const rost *t, const char *what) {
  while (!strstr(t->got, what) && !r->timed_out)
    uv_run(&r->loop, UV_RUN_ONCE);
  return strstr(t->got, what) != NULL;
}

/* Until the server counts `want` session streams open. */
static bool ro_wait_streams(reopen *r, unsigned want) {
  unsigned streams = ~0u;
  for (;;) {
    (void)acp__remote_server_session_routes(r->srv, &streams);
    if (streams == want || r->timed_out)
      return streams == want;
    uv_run(&r->loop, UV_RUN_ONCE);
  }
}

/* GET the connection stream (sid NULL) or a session's stream. */
static void ro_open(reopen *r, rost *t, const char *sid) {
  struct sockaddr_in a;
  memset(t, 0, sizeof(*t));
  snprintf(t->req, sizeof(t->req),
           "GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Accept: text/event-stream\r\nAcp-Connection-Id: %s\r\n%s%s%s\r\n",
           r->port, r->conn_id, sid ? "Acp-Session-Id: " : "", sid ? sid : "",
           sid ? "\r\n" : "");
  assert_int_equal(uv_tcp_init(&r->loop, &t->tcp), 0);
  t->tcp.data = t;
  t->cr.data = t;
  uv_ip4_addr("127.0.0.1", r->port, &a);
  assert_int_equal(
      uv_tcp_connect(&t->cr, &t->tcp, (struct sockaddr *)&a, ro_connected), 0);
  assert_true(ro_wait_for(r, t, "\r\n\r\n"));
  assert_non_null(strstr(t->got, "HTTP/1.1 200"));
}

/* POST one message naming session s1; 202 expected. */
static void ro_post(reopen *r, const char *body) {
  char req[768];
  xchg x;
  snprintf(req, sizeof(req),
           "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Content-Type: application/json\r\nAcp-Connection-Id: %s\r\n"
           "Acp-Session-Id: s1\r\nContent-Length: %zu\r\n\r\n%s",
           r->port, r->conn_id, strlen(body), body);
  exchange(&r->loop, r->port, &x, req);
  assert_non_null(strstr(x.got, "HTTP/1.1 202"));
}

static void ro_case(int mode) {
  reopen *r = calloc(1, sizeof(*r));
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  char req[512];
  xchg x;
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}";
  static const char update[] =
      "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":"
      "{\"sessionId\":\"s1\",\"u\":\"after\"}}\n";
  assert_non_null(r);
  so.stall_ms = UINT64_MAX; /* a kept event must not end the connection */
  so.ping_ms = 600000;
  assert_int_equal(uv_loop_init(&r->loop), 0);
  assert_int_equal(
      acp_remote_server_new(&r->srv, &r->loop, &so, ro_accept, r, NULL, NULL),
      0);
  r->port = acp_remote_server_port(r->srv);
  uv_timer_init(&r->loop, &r->guard);
  r->guard.data = r;
  uv_timer_start(&r->guard, ro_guard, 60000, 0);
  snprintf(req, sizeof(req),
           "POST /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
           r->port, sizeof(init) - 1, init);
  exchange(&r->loop, r->port, &x, req);
  assert_non_null(strstr(x.got, "HTTP/1.1 200"));
  const char *p = strstr(x.got, "Acp-Connection-Id: ");
  assert_non_null(p);
  memcpy(r->conn_id, p + 19, 36);
  ro_open(r, &r->conn, NULL);
  ro_open(r, &r->s1, "s1");
  assert_true(ro_wait_streams(r, 1));
  /* The close's answer comes on s1's stream and marks the route. */
  ro_post(r, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/close\","
             "\"params\":{\"sessionId\":\"s1\"}}");
  assert_true(ro_wait_for(r, &r->s1, "\"id\":7"));
  if (mode == ROUTE_REUSED) {
    ro_post(r, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"session/load\","
               "\"params\":{\"sessionId\":\"s1\",\"cwd\":\"/\","
               "\"mcpServers\":[]}}");
    assert_true(ro_wait_for(r, &r->s1, "\"id\":8"));
  }
  uv_close((uv_handle_t *)&r->s1.tcp, ro_closed);
  assert_true(ro_wait_streams(r, 0));
  assert_int_equal(acp_uv_link_write(r->agent, update, sizeof(update) - 1), 0);
  if (mode == ROUTE_CLOSED) {
    assert_true(ro_wait_for(r, &r->conn, "\"after\""));
  } else {
    /* Kept for s1: its next stream gets it, the connection stream not. */
    ro_open(r, &r->s1b, "s1");
    assert_true(ro_wait_for(r, &r->s1b, "\"after\""));
    assert_null(strstr(r->conn.got, "\"after\""));
    uv_close((uv_handle_t *)&r->s1b.tcp, ro_closed);
  }
  assert_false(r->timed_out);
  uv_close((uv_handle_t *)&r->conn.tcp, ro_closed);
  uv_close((uv_handle_t *)&r->guard, NULL);
  if (r->agent)
    acp_uv_link_close(r->agent, 0, NULL, NULL);
  r->agent = NULL;
  acp_remote_server_close(r->srv);
  assert_int_equal(uv_run(&r->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&r->loop), 0);
  assert_true(r->conn.closed && r->s1.closed);
  free(r);
}

static void test_session_named_again_after_close_keeps_its_route(void **st) {
  (void)st;
  ro_case(ROUTE_REUSED);
}

static void test_closed_session_events_go_on_the_connection_stream(void **st) {
  (void)st;
  ro_case(ROUTE_CLOSED);
}

int main(void) {
  acp_uv_ignore_sigpipe();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accept_key_matches_rfc6455_example),
      cmocka_unit_test(test_handoff_adopts_the_socket_with_its_pre_read_bytes),
      cmocka_unit_test(test_handoff_receive_refuses_bad_input),
      cmocka_unit_test(test_handoff_reads_both_versions),
      cmocka_unit_test(test_handoff_link_parks_and_resumes),
      cmocka_unit_test(test_handoff_link_ends_when_nobody_comes_back),
      cmocka_unit_test(test_server_reassembles_fragments_around_a_ping),
      cmocka_unit_test(test_pause_stops_after_the_message),
      cmocka_unit_test(test_bad_frames_close_with_the_right_code),
      cmocka_unit_test(test_masking_matches_the_rule_at_every_phase),
      cmocka_unit_test(test_text_message_becomes_one_checked_line),
      cmocka_unit_test(test_trim_keeps_a_reserved_buffer),
      cmocka_unit_test(test_close_is_echoed_and_binary_ignored),
      cmocka_unit_test(test_codec_allocation_failures),
      cmocka_unit_test(test_upgrade_requests_get_the_right_status),
      cmocka_unit_test(test_lines_cross_the_socket_both_ways),
      cmocka_unit_test(test_refused_upgrade_reports_status),
      cmocka_unit_test(test_streamable_http_client_round_trip),
      cmocka_unit_test(test_streamable_http_client_refusals),
      cmocka_unit_test(test_streamable_http_delete_without_answer_ends),
      cmocka_unit_test(test_streamable_http_event_of_several_data_lines),
      cmocka_unit_test(test_streamable_http2_client_round_trip),
      cmocka_unit_test(test_streamable_http_close_delete_is_answered_2xx),
      cmocka_unit_test(test_streamable_http_big_post_partly_written),
      cmocka_unit_test(test_streamable_http2_close_delete_is_answered_2xx),
      cmocka_unit_test(test_streamable_http2_server_goes_away),
      cmocka_unit_test(test_response_bodies_are_decoded),
      cmocka_unit_test(test_urls_are_parsed),
      cmocka_unit_test(test_json_members_are_found_without_a_parse),
      cmocka_unit_test(test_json_member_heads_at_every_cut),
      cmocka_unit_test(test_unread_socket_backs_up_into_the_link),
      cmocka_unit_test(test_loopback_allocation_failures),
      cmocka_unit_test(test_unaffordable_connection_is_dropped),
      cmocka_unit_test(test_delete_after_many_ends_is_answered_2xx),
      cmocka_unit_test(test_delete_after_the_window_is_404_and_frees_it),
      cmocka_unit_test(test_streamable_http_allocation_failures),
      cmocka_unit_test(test_streamable_http2_allocation_failures),
      cmocka_unit_test(test_streamable_http_requests_are_classified),
      cmocka_unit_test(test_unread_sse_stream_backs_up_into_the_link),
      cmocka_unit_test(test_unread_sse_stream_stalls_out),
      cmocka_unit_test(test_unread_websocket_stalls_out),
      cmocka_unit_test(test_long_frame_with_its_head_alone_arrives_whole),
      cmocka_unit_test(test_websocket_big_lines_both_ways),
      cmocka_unit_test(test_slow_sse_reader_is_not_cut),
      cmocka_unit_test(test_http2_stream_without_window_stalls_out),
      cmocka_unit_test(test_http2_stream_given_window_slowly_is_not_cut),
      cmocka_unit_test(
          test_http1_session_stream_cut_with_writes_queued_credits),
      cmocka_unit_test(
          test_http1_session_stream_closed_with_writes_queued_credits),
      cmocka_unit_test(test_unread_session_stream_h2_backs_up_into_the_link),
      cmocka_unit_test(test_streamable_http2_permission_cancel_and_1mib),
      cmocka_unit_test(test_lines_of_one_write_leave_in_one_send),
      cmocka_unit_test(test_post_in_pieces_then_a_pipelined_one),
      cmocka_unit_test(test_session_stream_cut_client_side),
      cmocka_unit_test(test_closed_sessions_give_their_streams_back),
      cmocka_unit_test(test_closed_sessions_give_their_streams_back_h2),
      cmocka_unit_test(test_session_named_again_after_close_keeps_its_route),
      cmocka_unit_test(test_closed_session_events_go_on_the_connection_stream),
      cmocka_unit_test(test_session_stream_cut_server_side),
      cmocka_unit_test(test_session_stream_never_reopened_ends_connection),
      cmocka_unit_test(test_session_stream_reset_over_http2),
      cmocka_unit_test(test_session_stream_reset_hook_over_http1),
      cmocka_unit_test(test_session_stream_server_reset_over_http2),
      cmocka_unit_test(test_session_stream_server_cut_over_http1),
      cmocka_unit_test(test_server_cut_with_writes_queued_frees_the_queue),
      cmocka_unit_test(test_server_reset_over_http2_with_writes_queued),
      cmocka_unit_test(test_client_reset_over_http2_with_writes_queued),
      cmocka_unit_test(test_client_cut_over_http1_with_writes_queued),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
