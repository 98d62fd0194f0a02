/*
 * libacp-remote: the TLS filter (src/remote/tls.c) without a socket. Two
 * filters, a client's and a server's, talk through memory: the ciphertext
 * one produces is fed to the other. Handshake, ALPN, data both ways (also
 * written before the handshake ended, and large), close_notify, the
 * client's checks (unknown CA, another name), mutual TLS, plaintext HTTP
 * and garbage sent to a server, session resumption (TLS 1.3 tickets, TLS
 * 1.2 tickets and session ids, turned off on either side, a restarted
 * server, the bounds of the server's session cache and of the client's),
 * the server's ALPN list, and an allocation-failure sweep over the
 * filter's own allocations. Over loopback: lines both ways, backpressure,
 * and a WebSocket reconnect that resumes its session. Certificates are
 * made in a temporary directory with the openssl program (the test is
 * skipped without it).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "acp/remote.h"
#include "failmem.h"
#include "remote/tls_int.h"
#include "remote_reset.h"

static char dir[256];
static bool have_certs;

static char *path(const char *name) {
  static char buf[8][320];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
  return buf[k];
}

static int sh(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  return system(cmd);
}

static int make_ca(const char *n) {
  return sh("openssl req -x509 -newkey ec -pkeyopt "
            "ec_paramgen_curve:prime256v1 -nodes -keyout %s/%s.key -out "
            "%s/%s.pem -days 2 -subj /CN=%s -addext "
            "basicConstraints=critical,CA:TRUE -addext "
            "keyUsage=critical,keyCertSign,cRLSign 2>/dev/null",
            dir, n, dir, n, n);
}

static int make_cert(const char *n, const char *ca, const char *san,
                     const char *eku) {
  return sh("openssl req -new -newkey ec -pkeyopt "
            "ec_paramgen_curve:prime256v1 -nodes -keyout %s/%s.key -out "
            "%s/%s.csr -subj /CN=%s 2>/dev/null && printf "
            "'basicConstraints=CA:FALSE\\nextendedKeyUsage=%s\\n"
            "subjectAltName=%s\\n' > %s/%s.ext && openssl x509 -req -in "
            "%s/%s.csr -CA %s/%s.pem -CAkey %s/%s.key -CAcreateserial -days 2 "
            "-extfile %s/%s.ext -out %s/%s.pem 2>/dev/null",
            dir, n, dir, n, n, eku, san, dir, n, dir, n, dir, ca, dir, ca, dir,
            n, dir, n);
}

static int setup_certs(void **state) {
  (void)state;
  snprintf(dir, sizeof(dir), "/tmp/acp-tls-test-XXXXXX");
  if (!mkdtemp(dir))
    return 0;
  have_certs =
      make_ca("ca") == 0 && make_ca("otherca") == 0 &&
      make_cert("server", "ca", "DNS:localhost,IP:127.0.0.1", "serverAuth") ==
          0 &&
      make_cert("client", "ca", "DNS:client", "clientAuth") == 0 &&
      make_cert("stranger", "otherca", "DNS:stranger", "clientAuth") == 0;
  return 0;
}

static int teardown_certs(void **state) {
  (void)state;
  if (dir[0])
    sh("rm -rf %s", dir);
  return 0;
}

#define NEED_CERTS()                                                           \
  do {                                                                         \
    if (!have_certs)                                                           \
      skip();                                                                  \
  } while (0)

/* MARK: - A pair through memory */

typedef struct pair {
  acp_remote_tls *sconf, *cconf;
  acp__tls *s, *c;
  acp__buf sin, cin; /* plaintext each side read */
  int srv, crv;      /* last acp__tls_read() results */
  acp_mem mem;
} pair;

/* Move the ciphertext `from` has to `to`; 1 if anything moved. */
static int move(acp__tls *from, acp__tls *to) {
  char buf[16384];
  size_t n;
  int moved = 0;
  while ((n = acp__tls_take(from, buf, sizeof(buf))) > 0) {
    if (acp__tls_feed(to, buf, n) != 0)
      return -1;
    moved = 1;
  }
  return moved;
}

/* Run both sides until nothing moves or one fails. */
static void run(pair *p) {
  for (int i = 0; i < 100; i++) {
    if (p->crv == 0)
      p->crv = acp__tls_read(p->c, &p->cin);
    int a = move(p->c, p->s);
    if (p->srv == 0)
      p->srv = acp__tls_read(p->s, &p->sin);
    int b = move(p->s, p->c);
    if (a < 0 || b < 0) {
      p->crv = p->srv = ACP_ERR_NOMEM;
      return;
    }
    if (a == 0 && b == 0)
      return;
  }
  fail_msg("the pair did not settle");
}

static int pair_open(pair *p, const acp_mem *mem, const char *client_ca,
                     const char *client_cert, const char *host) {
  int rv;
  memset(p, 0, sizeof(*p));
  p->mem = *mem;
  acp__buf_init(&p->sin, &p->mem, 0);
  acp__buf_init(&p->cin, &p->mem, 0);
  rv = acp_remote_tls_new(&p->sconf, ACP_REMOTE_TLS_SERVER, mem);
  if (rv == 0)
    rv = acp_remote_tls_set_cert(p->sconf, path("server.pem"),
                                 path("server.key"));
  if (rv == 0 && client_ca)
    rv = acp_remote_tls_set_client_ca(p->sconf, client_ca);
  if (rv == 0)
    rv = acp_remote_tls_new(&p->cconf, ACP_REMOTE_TLS_CLIENT, mem);
  if (rv == 0)
    rv = acp_remote_tls_set_ca(p->cconf, path("ca.pem"));
  if (rv == 0 && client_cert) {
    char key[320];
    snprintf(key, sizeof(key), "%.*s.key", (int)(strlen(client_cert) - 4),
             client_cert);
    rv = acp_remote_tls_set_cert(p->cconf, client_cert, key);
  }
  if (rv == 0)
    rv = acp__tls_new(&p->s, p->sconf, NULL, NULL, mem);
  if (rv == 0)
    rv = acp__tls_new(&p->c, p->cconf, host, "443", mem);
  return rv;
}

/* New filters on the same configurations: the client's next socket to a
 * server (`host`, `port`), as a reconnect or a second stream opens it. */
static int pair_reopen(pair *p, const char *host, const char *port) {
  acp__tls_free(p->s);
  acp__tls_free(p->c);
  p->s = p->c = NULL;
  acp__buf_clear(&p->sin);
  acp__buf_clear(&p->cin);
  p->srv = p->crv = 0;
  int rv = acp__tls_new(&p->s, p->sconf, NULL, NULL, &p->mem);
  if (rv == 0)
    rv = acp__tls_new(&p->c, p->cconf, host, port, &p->mem);
  return rv;
}

/* A request and its answer: the handshake, and in TLS 1.3 the server's
 * ticket, which arrives after it. 0 when both sides got their bytes. */
static int exchange(pair *p) {
  if (acp__tls_write(p->c, "ping", 4) != 0)
    return -1;
  run(p);
  if (p->crv != 0 || p->srv != 0 || p->sin.len != 4)
    return -1;
  if (acp__tls_write(p->s, "pong", 4) != 0)
    return -1;
  run(p);
  return p->crv == 0 && p->srv == 0 && p->cin.len == 4 ? 0 : -1;
}

/* A client configuration trusting ca.pem, maybe held to TLS 1.2 (and then
 * maybe without tickets, so that the server's session cache is used). */
static acp_remote_tls *client_conf(int tls12, int no_ticket) {
  acp_remote_tls *t = NULL;
  assert_int_equal(acp_remote_tls_new(&t, ACP_REMOTE_TLS_CLIENT, NULL), 0);
  assert_int_equal(acp_remote_tls_set_ca(t, path("ca.pem")), 0);
  SSL_CTX *ctx = acp__tls_conf_ssl_ctx(t);
  if (tls12)
    assert_int_equal(SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION), 1);
  if (no_ticket)
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  return t;
}

static bool described(const acp__tls *t, const char *what) {
  char d[200];
  acp__tls_describe(t, d, sizeof(d));
  if (strstr(d, what))
    return true;
  print_message("described as '%s', not '%s'\n", d, what);
  return false;
}

static void pair_close(pair *p) {
  acp__tls_free(p->s);
  acp__tls_free(p->c);
  acp_remote_tls_free(p->sconf);
  acp_remote_tls_free(p->cconf);
  acp__buf_dispose(&p->sin);
  acp__buf_dispose(&p->cin);
}

static const acp_mem *std_mem(void) {
  static acp_mem m;
  acp__mem_init(&m, NULL);
  return &m;
}

/* MARK: - Tests */

static void test_handshake_and_data(void **state) {
  (void)state;
  NEED_CERTS();
  pair p;
  assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "127.0.0.1"), 0);
  /* Written before anything was exchanged: sent after the handshake. */
  assert_int_equal(acp__tls_write(p.c, "GET /acp HTTP/1.1\r\n\r\n", 21), 0);
  assert_false(acp__tls_ready(p.c));
  run(&p);
  assert_int_equal(p.crv, 0);
  assert_int_equal(p.srv, 0);
  assert_true(acp__tls_ready(p.c));
  assert_true(acp__tls_ready(p.s));
  assert_string_equal(acp__tls_alpn(p.c), "http/1.1");
  assert_string_equal(acp__tls_alpn(p.s), "http/1.1");
  assert_int_equal(p.sin.len, 21);
  assert_memory_equal(p.sin.data, "GET /acp HTTP/1.1\r\n\r\n", 21);
  /* 1 MiB each way, in one write and in many. */
  size_t big = (size_t)1 << 20;
  char *d = malloc(big);
  assert_non_null(d);
  for (size_t i = 0; i < big; i++)
    d[i] = (char)(i * 7 + 3);
  assert_int_equal(acp__tls_write(p.s, d, big), 0);
  for (size_t off = 0; off < big; off += 1000)
    assert_int_equal(
        acp__tls_write(p.c, d + off, big - off < 1000 ? big - off : 1000), 0);
  run(&p);
  assert_int_equal(p.cin.len, big);
  assert_memory_equal(p.cin.data, d, big);
  assert_int_equal(p.sin.len, 21 + big);
  assert_memory_equal(p.sin.data + 21, d, big);
  free(d);
  /* close_notify: the other side reads the end, after the data. */
  assert_int_equal(acp__tls_write(p.c, "bye", 3), 0);
  acp__tls_close(p.c);
  assert_int_equal(acp__tls_write(p.c, "late", 4), ACP_ERR_CLOSED);
  run(&p);
  assert_int_equal(p.srv, ACP_ERR_CLOSED);
  assert_memory_equal(p.sin.data + p.sin.len - 3, "bye", 3);
  pair_close(&p);
}

static void test_client_checks(void **state) {
  (void)state;
  NEED_CERTS();
  pair p;
  /* Another name than the certificate's. */
  assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "elsewhere.example"),
                   0);
  run(&p);
  assert_int_equal(p.crv, ACP_ERR_PROTOCOL);
  assert_non_null(strstr(acp__tls_error(p.c),
                         "certificate verify failed: hostname mismatch"));
  assert_int_not_equal(p.srv, 0); /* it got the client's alert */
  assert_int_equal(acp__tls_write(p.c, "x", 1), ACP_ERR_PROTOCOL);
  pair_close(&p);
  /* A CA the client does not trust: the client trusts otherca only. */
  assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "localhost"), 0);
  acp__tls_free(p.c);
  acp_remote_tls_free(p.cconf);
  assert_int_equal(acp_remote_tls_new(&p.cconf, ACP_REMOTE_TLS_CLIENT, NULL),
                   0);
  assert_int_equal(acp_remote_tls_set_ca(p.cconf, path("otherca.pem")), 0);
  assert_int_equal(acp__tls_new(&p.c, p.cconf, "localhost", "443", std_mem()),
                   0);
  run(&p);
  assert_int_equal(p.crv, ACP_ERR_PROTOCOL);
  assert_non_null(strstr(acp__tls_error(p.c), "certificate verify failed"));
  pair_close(&p);
}

static void test_mutual_tls(void **state) {
  (void)state;
  NEED_CERTS();
  pair p;
  const char *cases[3] = {path("client.pem"), NULL, path("stranger.pem")};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(
        pair_open(&p, std_mem(), path("ca.pem"), cases[i], "localhost"), 0);
    assert_int_equal(acp__tls_write(p.c, "hello", 5), 0);
    run(&p);
    if (i == 0) {
      assert_int_equal(p.srv, 0);
      assert_int_equal(p.sin.len, 5);
    } else {
      /* Refused by the server; the client learns it from the alert. */
      assert_int_equal(p.srv, ACP_ERR_PROTOCOL);
      assert_int_equal(p.sin.len, 0);
      assert_int_equal(p.crv, ACP_ERR_PROTOCOL);
      assert_non_null(strstr(acp__tls_error(p.c), "alert"));
    }
    pair_close(&p);
  }
}

static void test_server_refuses_plaintext(void **state) {
  (void)state;
  NEED_CERTS();
  pair p;
  assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, NULL), 0);
  const char *req = "GET /acp HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(acp__tls_feed(p.s, req, strlen(req)), 0);
  assert_int_equal(acp__tls_read(p.s, &p.sin), ACP_ERR_PROTOCOL);
  assert_true(acp__tls_plain_http(p.s));
  assert_int_equal(acp__tls_read(p.s, &p.sin), ACP_ERR_PROTOCOL);
  pair_close(&p);
  /* A handshake record with garbage inside: refused, not a plain request. */
  assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, NULL), 0);
  static const char junk[] = {0x16, 3, 1, 0, 5, 1, 2, 3, 4, 5};
  assert_int_equal(acp__tls_feed(p.s, junk, sizeof(junk)), 0);
  assert_int_equal(acp__tls_read(p.s, &p.sin), ACP_ERR_PROTOCOL);
  assert_false(acp__tls_plain_http(p.s));
  assert_true(acp__tls_error(p.s)[0] != '\0');
  pair_close(&p);
}

static void test_config_errors(void **state) {
  (void)state;
  NEED_CERTS();
  acp_remote_tls *t = NULL;
  assert_int_equal(acp_remote_tls_new(NULL, ACP_REMOTE_TLS_SERVER, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_new(&t, 7, NULL), ACP_ERR_INVALID_ARGUMENT);
  assert_null(t);
  assert_int_equal(acp_remote_tls_new(&t, ACP_REMOTE_TLS_SERVER, NULL), 0);
  assert_string_equal(acp_remote_tls_error(t), "");
  assert_int_equal(acp_remote_tls_set_cert(t, path("none.pem"), path("x")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(
      strstr(acp_remote_tls_error(t), "cannot load the certificate"));
  assert_int_equal(
      acp_remote_tls_set_cert(t, path("server.pem"), path("client.key")),
      ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(acp_remote_tls_error(t), "mismatch"));
  assert_false(acp__tls_conf_ready(t));
  /* Roles: a server takes no server CA, a client no client CA. */
  assert_int_equal(acp_remote_tls_set_ca(t, path("ca.pem")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_set_client_ca(t, path("none.pem")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(acp_remote_tls_error(t), "cannot load the CA file"));
  assert_int_equal(
      acp_remote_tls_set_cert(t, path("server.pem"), path("server.key")), 0);
  assert_true(acp__tls_conf_ready(t));
  acp_remote_tls_free(t);
  assert_int_equal(acp_remote_tls_new(&t, ACP_REMOTE_TLS_CLIENT, NULL), 0);
  assert_int_equal(acp_remote_tls_set_client_ca(t, path("ca.pem")),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_false(acp__tls_conf_ready(t));
  acp_remote_tls_free(t);
  acp_remote_tls_free(NULL);
}

/* MARK: - Session resumption */

static void test_resume_tls13(void **state) {
  (void)state;
  NEED_CERTS();
  pair p;
  assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "localhost"), 0);
  assert_int_equal(exchange(&p), 0);
  assert_false(acp__tls_offered(p.c));
  assert_false(acp__tls_resumed(p.c));
  assert_false(acp__tls_resumed(p.s));
  assert_true(described(p.c, "TLS full handshake (TLSv1.3, ALPN http/1.1)"));
  /* The ticket came after the handshake, with the answer. */
  assert_int_equal(acp__tls_conf_client_sessions(p.cconf), 1);
  /* TLS 1.3 tickets keep nothing on the server. */
  assert_int_equal(SSL_CTX_sess_number(acp__tls_conf_ssl_ctx(p.sconf)), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
    assert_int_equal(exchange(&p), 0);
    assert_true(acp__tls_offered(p.c));
    assert_true(acp__tls_resumed(p.c));
    assert_true(acp__tls_resumed(p.s));
    assert_true(described(p.c, "TLS session resumed (TLSv1.3, ALPN http/1.1)"));
  }
  /* Another port or another name is another server: nothing offered. */
  assert_int_equal(pair_reopen(&p, "localhost", "444"), 0);
  assert_int_equal(exchange(&p), 0);
  assert_false(acp__tls_offered(p.c));
  assert_false(acp__tls_resumed(p.c));
  assert_int_equal(pair_reopen(&p, "127.0.0.1", "443"), 0);
  assert_int_equal(exchange(&p), 0);
  assert_false(acp__tls_offered(p.c));
  assert_int_equal(acp__tls_conf_client_sessions(p.cconf), 3);
  pair_close(&p);
}

/* TLS 1.2 with tickets, and without (the server's session-id cache). */
static void test_resume_tls12(void **state) {
  (void)state;
  NEED_CERTS();
  for (int no_ticket = 0; no_ticket < 2; no_ticket++) {
    pair p;
    assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "localhost"), 0);
    acp__tls_free(p.c);
    acp_remote_tls_free(p.cconf);
    p.c = NULL;
    p.cconf = client_conf(1, no_ticket);
    SSL_CTX *sctx = acp__tls_conf_ssl_ctx(p.sconf);
    for (int i = 0; i < 3; i++) {
      assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
      assert_int_equal(exchange(&p), 0);
      assert_int_equal(acp__tls_resumed(p.c), i > 0);
      assert_int_equal(acp__tls_resumed(p.s), i > 0);
      assert_true(described(p.c, i > 0 ? "TLS session resumed (TLSv1.2"
                                       : "TLS full handshake (TLSv1.2"));
    }
    /* Two resumed; by session id from the one session cached, by ticket
     * with none. */
    assert_int_equal(SSL_CTX_sess_hits(sctx), 2);
    assert_int_equal(SSL_CTX_sess_number(sctx), no_ticket ? 1 : 0);
    pair_close(&p);
  }
}

/* Resumption off on the server (TLS 1.3, TLS 1.2 by ticket and by id),
 * then on the client. */
static void test_resume_off(void **state) {
  (void)state;
  NEED_CERTS();
  for (int v = 0; v < 3; v++) {
    pair p;
    assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "localhost"), 0);
    assert_int_equal(acp_remote_tls_set_resumption(p.sconf, 0), 0);
    acp__tls_free(p.c);
    acp_remote_tls_free(p.cconf);
    p.c = NULL;
    p.cconf = client_conf(v > 0, v == 2);
    for (int i = 0; i < 3; i++) {
      assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
      assert_int_equal(exchange(&p), 0);
      assert_false(acp__tls_resumed(p.c));
      assert_false(acp__tls_resumed(p.s));
      assert_true(described(p.c, "TLS full handshake"));
    }
    /* Nothing was issued that could be resumed, so nothing was kept. */
    assert_int_equal(acp__tls_conf_client_sessions(p.cconf), 0);
    assert_int_equal(SSL_CTX_sess_number(acp__tls_conf_ssl_ctx(p.sconf)), 0);
    pair_close(&p);
  }
  pair p;
  assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "localhost"), 0);
  assert_int_equal(acp_remote_tls_set_resumption(p.cconf, 0), 0);
  assert_int_equal(acp_remote_tls_set_resumption(NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
    assert_int_equal(exchange(&p), 0);
    assert_false(acp__tls_offered(p.c));
    assert_false(acp__tls_resumed(p.c));
  }
  assert_int_equal(acp__tls_conf_client_sessions(p.cconf), 0);
  /* On again: the next socket keeps its session for the one after. */
  assert_int_equal(acp_remote_tls_set_resumption(p.cconf, 1), 0);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
    assert_int_equal(exchange(&p), 0);
    assert_int_equal(acp__tls_resumed(p.c), i > 0);
  }
  pair_close(&p);
}

/* A server that restarted (a new configuration: new ticket keys, an empty
 * cache) turns the kept session down; the handshake is a full one, says
 * so, and its session replaces the stale one. */
static void test_resume_restarted_server(void **state) {
  (void)state;
  NEED_CERTS();
  for (int v = 0; v < 2; v++) {
    pair p;
    assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "localhost"), 0);
    acp__tls_free(p.c);
    acp_remote_tls_free(p.cconf);
    p.c = NULL;
    p.cconf = client_conf(v, v);
    assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
    assert_int_equal(exchange(&p), 0);
    acp__tls_free(p.s);
    p.s = NULL;
    acp_remote_tls_free(p.sconf);
    assert_int_equal(acp_remote_tls_new(&p.sconf, ACP_REMOTE_TLS_SERVER, NULL),
                     0);
    assert_int_equal(acp_remote_tls_set_cert(p.sconf, path("server.pem"),
                                             path("server.key")),
                     0);
    assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
    assert_int_equal(exchange(&p), 0);
    assert_true(acp__tls_offered(p.c));
    assert_false(acp__tls_resumed(p.c));
    assert_true(described(p.c, "the offered session was not resumed"));
    assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
    assert_int_equal(exchange(&p), 0);
    assert_true(acp__tls_resumed(p.c));
    pair_close(&p);
  }
}

/* MARK: - Ticket key rotation */

static uint64_t fake_clock(void *arg) {
  return *(const uint64_t *)arg;
}

/* The next socket of the pair: 1 if it resumed (both sides agree), 0 for
 * a full handshake. */
static int reopen_resumed(pair *p) {
  assert_int_equal(pair_reopen(p, "localhost", "443"), 0);
  assert_int_equal(exchange(p), 0);
  assert_int_equal(acp__tls_resumed(p->c), acp__tls_resumed(p->s));
  return acp__tls_resumed(p->c) ? 1 : 0;
}

/* Forced rotations (the API) and timed ones (a fake clock), TLS 1.3 and
 * TLS 1.2 with tickets: a ticket resumes across one rotation, and the
 * resumed handshake hands out a fresh ticket under the new key (so the
 * next rotation does not cut it off); across two it is refused and the
 * handshake is a full one, whose ticket resumes again. */
static void test_ticket_key_rotation(void **state) {
  (void)state;
  NEED_CERTS();
  for (int v = 0; v < 2; v++) {
    uint64_t now = 1000;
    pair p;
    assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "localhost"), 0);
    acp__tls_conf_set_clock(p.sconf, fake_clock, &now);
    assert_int_equal(acp_remote_tls_set_ticket_key_period(p.sconf, 100), 0);
    acp__tls_free(p.c);
    acp_remote_tls_free(p.cconf);
    p.c = NULL;
    p.cconf = client_conf(v, 0);
    assert_int_equal(reopen_resumed(&p), 0);
    assert_int_equal(reopen_resumed(&p), 1);
    /* One rotation: the previous key opens the ticket. */
    assert_int_equal(acp_remote_tls_rotate_ticket_keys(p.sconf), 0);
    assert_int_equal(reopen_resumed(&p), 1);
    /* The ticket that handshake brought is under the new key. */
    assert_int_equal(acp_remote_tls_rotate_ticket_keys(p.sconf), 0);
    assert_int_equal(reopen_resumed(&p), 1);
    /* Two rotations with no handshake between: refused, said so. */
    assert_int_equal(acp_remote_tls_rotate_ticket_keys(p.sconf), 0);
    assert_int_equal(acp_remote_tls_rotate_ticket_keys(p.sconf), 0);
    assert_int_equal(reopen_resumed(&p), 0);
    assert_true(acp__tls_offered(p.c));
    assert_true(described(p.c, "the offered session was not resumed"));
    assert_int_equal(reopen_resumed(&p), 1);

    /* On the clock: a fresh ring whose current key (A) is born now. */
    assert_int_equal(acp_remote_tls_rotate_ticket_keys(p.sconf), 0);
    assert_int_equal(acp_remote_tls_rotate_ticket_keys(p.sconf), 0);
    assert_int_equal(reopen_resumed(&p), 0);
    now += 99; /* within the period: the same key */
    assert_int_equal(reopen_resumed(&p), 1);
    now += 1; /* 1100, one period: B is current, A opens the ticket */
    assert_int_equal(reopen_resumed(&p), 1);
    /* A second client takes a ticket under B (born at 1100). */
    acp_remote_tls *c1 = p.cconf;
    p.cconf = client_conf(v, 0);
    assert_int_equal(reopen_resumed(&p), 0);
    acp_remote_tls *c2 = p.cconf;
    p.cconf = c1;
    now = 1250; /* the first client: C is current, B opens its ticket */
    assert_int_equal(reopen_resumed(&p), 1);
    /* 1300: B is two periods old, so the second client's ticket is
     * refused, though the ring last rotated 50 s ago. */
    now = 1300;
    p.cconf = c2;
    assert_int_equal(reopen_resumed(&p), 0);
    assert_true(described(p.c, "the offered session was not resumed"));
    assert_int_equal(reopen_resumed(&p), 1);
    p.cconf = c1;
    assert_int_equal(reopen_resumed(&p), 1); /* its ticket is under C */
    /* Long idle (many periods): every old key is gone at once. */
    now += 100000;
    assert_int_equal(reopen_resumed(&p), 0);
    assert_int_equal(reopen_resumed(&p), 1);
    acp__tls_free(p.c);
    p.c = NULL;
    acp_remote_tls_free(c2);
    pair_close(&p);
  }
}

static void test_ticket_key_api(void **state) {
  (void)state;
  acp_remote_tls *s = NULL, *c = NULL;
  assert_int_equal(acp_remote_tls_new(&s, ACP_REMOTE_TLS_SERVER, NULL), 0);
  assert_int_equal(acp_remote_tls_new(&c, ACP_REMOTE_TLS_CLIENT, NULL), 0);
  assert_int_equal(acp_remote_tls_set_ticket_key_period(NULL, 10),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_set_ticket_key_period(c, 10),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_set_ticket_key_period(s, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_set_ticket_key_period(
                       s, ACP_REMOTE_TLS_TICKET_KEY_PERIOD_MAX + 1),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_set_ticket_key_period(
                       s, ACP_REMOTE_TLS_TICKET_KEY_PERIOD_MAX),
                   0);
  assert_int_equal(acp_remote_tls_set_ticket_key_period(s, 1), 0);
  assert_int_equal(acp_remote_tls_rotate_ticket_keys(NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_rotate_ticket_keys(c),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_rotate_ticket_keys(s), 0);
  acp_remote_tls_free(s);
  acp_remote_tls_free(c);
}

/* The server's session cache has a cap (ACP_REMOTE_TLS_SESSION_CACHE);
 * past it the least recently used session goes. Shown with a cap of 8
 * and 20 TLS 1.2 clients resuming by session id. */
static void test_server_cache_bounded(void **state) {
  (void)state;
  NEED_CERTS();
  acp_remote_tls *sconf = NULL, *cl[20];
  assert_int_equal(acp_remote_tls_new(&sconf, ACP_REMOTE_TLS_SERVER, NULL), 0);
  assert_int_equal(
      acp_remote_tls_set_cert(sconf, path("server.pem"), path("server.key")),
      0);
  SSL_CTX *sctx = acp__tls_conf_ssl_ctx(sconf);
  assert_int_equal(SSL_CTX_sess_get_cache_size(sctx),
                   ACP_REMOTE_TLS_SESSION_CACHE);
  assert_int_equal(SSL_CTX_get_timeout(sctx), ACP_REMOTE_TLS_SESSION_LIFETIME);
  SSL_CTX_sess_set_cache_size(sctx, 8);
  for (int i = 0; i < 20; i++) {
    pair p;
    memset(&p, 0, sizeof(p));
    p.mem = *std_mem();
    acp__buf_init(&p.sin, &p.mem, 0);
    acp__buf_init(&p.cin, &p.mem, 0);
    cl[i] = client_conf(1, 1);
    p.sconf = sconf;
    p.cconf = cl[i];
    assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
    assert_int_equal(exchange(&p), 0);
    assert_false(acp__tls_resumed(p.c));
    assert_true(SSL_CTX_sess_number(sctx) <= 8);
    acp__tls_free(p.s);
    acp__tls_free(p.c);
    acp__buf_dispose(&p.sin);
    acp__buf_dispose(&p.cin);
  }
  /* Full (OpenSSL 3.0 makes room before adding, down to 7, then adds). */
  assert_true(SSL_CTX_sess_number(sctx) >= 7);
  /* The newest client resumes; the first one's session was dropped. */
  for (int k = 0; k < 2; k++) {
    pair p;
    memset(&p, 0, sizeof(p));
    p.mem = *std_mem();
    acp__buf_init(&p.sin, &p.mem, 0);
    acp__buf_init(&p.cin, &p.mem, 0);
    p.sconf = sconf;
    p.cconf = k == 0 ? cl[19] : cl[0];
    assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
    assert_int_equal(exchange(&p), 0);
    assert_true(acp__tls_offered(p.c));
    assert_int_equal(acp__tls_resumed(p.c), k == 0);
    acp__tls_free(p.s);
    acp__tls_free(p.c);
    acp__buf_dispose(&p.sin);
    acp__buf_dispose(&p.cin);
  }
  assert_true(SSL_CTX_sess_number(sctx) <= 8);
  for (int i = 0; i < 20; i++)
    acp_remote_tls_free(cl[i]);
  acp_remote_tls_free(sconf);
}

/* The client keeps a session for ACP_REMOTE_TLS_CLIENT_SESSIONS servers
 * at most, dropping the least recently used. */
static void test_client_sessions_bounded(void **state) {
  (void)state;
  NEED_CERTS();
  pair p;
  char port[16];
  assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "localhost"), 0);
  for (int i = 0; i < 20; i++) {
    snprintf(port, sizeof(port), "%d", 1000 + i);
    assert_int_equal(pair_reopen(&p, "localhost", port), 0);
    assert_int_equal(exchange(&p), 0);
    assert_true(acp__tls_conf_client_sessions(p.cconf) <=
                ACP_REMOTE_TLS_CLIENT_SESSIONS);
    if (i == 15) {
      /* 1000 used again after 1001-1015: it stays while 1001-1004, now
       * the least recently used, are dropped for 1016-1019. */
      assert_int_equal(pair_reopen(&p, "localhost", "1000"), 0);
      assert_int_equal(exchange(&p), 0);
    }
  }
  assert_int_equal(acp__tls_conf_client_sessions(p.cconf),
                   ACP_REMOTE_TLS_CLIENT_SESSIONS);
  static const struct {
    const char *port;
    bool kept;
  } want[] = {{"1019", true},
              {"1005", true},
              {"1000", true},
              {"1004", false},
              {"1001", false}};
  for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
    assert_int_equal(pair_reopen(&p, "localhost", want[k].port), 0);
    assert_int_equal(exchange(&p), 0);
    assert_int_equal(acp__tls_offered(p.c), want[k].kept);
    assert_int_equal(acp__tls_resumed(p.c), want[k].kept);
  }
  pair_close(&p);
}

/* MARK: - ALPN */

static void test_alpn_list(void **state) {
  (void)state;
  NEED_CERTS();
  static const char *const h1[] = {"http/1.1", NULL};
  static const char *const h2only[] = {"h2", NULL};
  static const char *const h1first[] = {"http/1.1", "h2", NULL};
  static const char *const empty[] = {NULL};
  static const char *const unknown[] = {"h2", "h3", NULL};
  static const char *const twice[] = {"h2", "h2", NULL};
  pair p;
  assert_int_equal(pair_open(&p, std_mem(), NULL, NULL, "localhost"), 0);
  assert_true(acp__tls_conf_offers_h2(p.sconf));
  assert_int_equal(acp_remote_tls_set_alpn(NULL, h1), ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_set_alpn(p.sconf, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_set_alpn(p.cconf, h1),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_remote_tls_set_alpn(p.sconf, empty),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(acp_remote_tls_error(p.sconf), "no ALPN protocol"));
  assert_int_equal(acp_remote_tls_set_alpn(p.sconf, unknown),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(acp_remote_tls_error(p.sconf), "'h3'"));
  assert_int_equal(acp_remote_tls_set_alpn(p.sconf, twice),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(acp_remote_tls_error(p.sconf), "twice"));
  /* The refused lists changed nothing: h2 is still chosen. */
  assert_int_equal(acp__tls_offer_h2(p.c), 0);
  assert_int_equal(exchange(&p), 0);
  assert_string_equal(acp__tls_alpn(p.c), "h2");
  /* HTTP/1.1 only: a client offering h2 then http/1.1 gets http/1.1. */
  assert_int_equal(acp_remote_tls_set_alpn(p.sconf, h1), 0);
  assert_false(acp__tls_conf_offers_h2(p.sconf));
  assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
  assert_int_equal(acp__tls_offer_h2(p.c), 0);
  assert_int_equal(exchange(&p), 0);
  assert_string_equal(acp__tls_alpn(p.c), "http/1.1");
  assert_string_equal(acp__tls_alpn(p.s), "http/1.1");
  /* The server's order wins. */
  assert_int_equal(acp_remote_tls_set_alpn(p.sconf, h1first), 0);
  assert_true(acp__tls_conf_offers_h2(p.sconf));
  assert_int_equal(pair_reopen(&p, "localhost", "443"), 0);
  assert_int_equal(acp__tls_offer_h2(p.c), 0);
  assert_int_equal(exchange(&p), 0);
  assert_string_equal(acp__tls_alpn(p.c), "http/1.1");
  /* Nothing in common (h2 only against a client asking for http/1.1):
   * refused in the handshake with no_application_protocol. */
  assert_int_equal(acp_remote_tls_set_alpn(p.sconf, h2only), 0);
  assert_int_equal(pair_reopen(&p, "localhost", "445"), 0);
  assert_int_equal(acp__tls_write(p.c, "x", 1), 0);
  run(&p);
  assert_int_equal(p.srv, ACP_ERR_PROTOCOL);
  assert_int_equal(p.crv, ACP_ERR_PROTOCOL);
  assert_non_null(strstr(acp__tls_error(p.c), "no application protocol"));
  assert_int_equal(p.sin.len, 0);
  pair_close(&p);
}

/* The filter's own allocations failing one by one: each run ends in an
 * error or completes, and frees everything. */
static int tls_scenario(failmem *f) {
  acp_mem m = failmem_start(f, f->fail_at);
  pair p;
  int ok = 0;
  if (pair_open(&p, &m, path("ca.pem"), path("client.pem"), "localhost") != 0) {
    pair_close(&p);
    return 0;
  }
  if (acp__tls_write(p.c, "early", 5) != 0)
    goto out;
  run(&p);
  if (p.crv != 0 || p.srv != 0)
    goto out;
  if (acp__tls_write(p.s, "answer", 6) != 0)
    goto out;
  run(&p);
  if (p.crv != 0 || p.srv != 0)
    goto out;
  assert_int_equal(p.sin.len, 5);
  assert_int_equal(p.cin.len, 6);
  /* The next socket: resumed if the session could be kept, else in full. */
  if (pair_reopen(&p, "localhost", "443") != 0 || exchange(&p) != 0)
    goto out;
  ok = 1;
out:
  pair_close(&p);
  return ok;
}

static void test_alloc_failures(void **state) {
  (void)state;
  NEED_CERTS();
  failmem_sweep(tls_scenario, 5);
}

/* MARK: - Over loopback */

/* A TLS server and a wss:// client on one loop: lines cross both ways,
 * and a client that stops reading makes the server's link queue grow
 * (the coupling in acp serve then stops reading the agent's stdout)
 * instead of TLS buffering it away. */
typedef struct lp {
  uv_loop_t loop;
  uv_timer_t timer;
  acp_remote_server *srv;
  acp_uv_link *srv_link, *cli;
  int status;
  char detail[256];
  char got[256];
  size_t got_len;
  bool hold; /* the client does not read after the first line */
  size_t max_queue;
} lp;

static void lp_stop(lp *p) {
  if (p->cli)
    acp_uv_link_close(p->cli, 0, NULL, NULL);
  if (p->srv_link)
    acp_uv_link_close(p->srv_link, 0, NULL, NULL);
  acp_remote_server_close(p->srv);
  p->cli = p->srv_link = NULL;
  p->srv = NULL;
  if (!uv_is_closing((uv_handle_t *)&p->timer))
    uv_close((uv_handle_t *)&p->timer, NULL);
}

static void lp_srv_read(acp_uv_link *l, int status, const char *d, size_t n,
                        void *ud) {
  (void)ud;
  if (status != 0)
    return;
  acp_uv_link_write(l, d, n); /* echo */
}

static void lp_fill(uv_timer_t *t) {
  lp *p = t->data;
  size_t q = p->srv_link ? acp_uv_link_write_queue_size(p->srv_link) : 0;
  if (p->srv_link && q < (size_t)8 << 20) {
    char chunk[4096];
    memset(chunk, 'x', sizeof(chunk) - 1);
    chunk[sizeof(chunk) - 1] = '\n';
    for (int i = 0; i < 256; i++)
      acp_uv_link_write(p->srv_link, chunk, sizeof(chunk));
    uv_timer_start(t, lp_fill, 5, 0);
    return;
  }
  p->max_queue = q;
  lp_stop(p);
}

static void lp_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                      void *ud) {
  lp *p = ud;
  (void)s;
  (void)id;
  p->srv_link = link;
  acp_uv_link_read_start(link, lp_srv_read, p);
}

static void lp_cli_read(acp_uv_link *l, int status, const char *d, size_t n,
                        void *ud) {
  lp *p = ud;
  if (status != 0) {
    lp_stop(p);
    return;
  }
  if (p->got_len + n < sizeof(p->got)) {
    memcpy(p->got + p->got_len, d, n);
    p->got_len += n;
  }
  if (p->hold) {
    /* Stop reading: from now on the server's writes back up. */
    acp_uv_link_read_stop(l);
    uv_timer_start(&p->timer, lp_fill, 0, 0);
    return;
  }
  if (p->got_len >= 16)
    lp_stop(p);
}

static void lp_connected(acp_uv_link *l, int status, const char *detail,
                         void *ud) {
  lp *p = ud;
  (void)l;
  p->status = status;
  snprintf(p->detail, sizeof(p->detail), "%s", detail);
  if (status != 0)
    lp_stop(p);
}

static void lp_run(lp *p, const char *host, bool client_ca_ok) {
  acp_remote_tls *st = NULL, *ct = NULL;
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  char url[96];
  assert_int_equal(uv_loop_init(&p->loop), 0);
  uv_timer_init(&p->loop, &p->timer);
  p->timer.data = p;
  assert_int_equal(acp_remote_tls_new(&st, ACP_REMOTE_TLS_SERVER, NULL), 0);
  assert_int_equal(
      acp_remote_tls_set_cert(st, path("server.pem"), path("server.key")), 0);
  so.tls = st;
  /* A client configuration is refused by a server, and the reverse. */
  assert_int_equal(acp_remote_tls_new(&ct, ACP_REMOTE_TLS_CLIENT, NULL), 0);
  assert_int_equal(
      acp_remote_tls_set_ca(ct, path(client_ca_ok ? "ca.pem" : "otherca.pem")),
      0);
  so.tls = ct;
  assert_int_equal(
      acp_remote_server_new(&p->srv, &p->loop, &so, lp_accept, p, NULL, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  so.tls = st;
  assert_int_equal(
      acp_remote_server_new(&p->srv, &p->loop, &so, lp_accept, p, NULL, NULL),
      0);
  snprintf(url, sizeof(url), "wss://%s:%d/acp", host,
           acp_remote_server_port(p->srv));
  co.tls = st;
  assert_int_equal(
      acp_remote_connect(&p->cli, &p->loop, url, &co, lp_connected, p, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  co.tls = ct;
  p->status = 1;
  assert_int_equal(
      acp_remote_connect(&p->cli, &p->loop, url, &co, lp_connected, p, NULL),
      0);
  /* Both hold their references: ours can go now. */
  acp_remote_tls_free(st);
  acp_remote_tls_free(ct);
  assert_int_equal(acp_uv_link_read_start(p->cli, lp_cli_read, p), 0);
  assert_int_equal(acp_uv_link_write(p->cli, "{\"a\":1}\n{\"b\":2}\n", 16), 0);
  assert_int_equal(uv_run(&p->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&p->loop), 0);
}

static void test_loopback_lines(void **state) {
  (void)state;
  NEED_CERTS();
  lp *p = calloc(1, sizeof(*p));
  lp_run(p, "localhost", true);
  assert_int_equal(p->status, 0);
  p->got[p->got_len] = '\0';
  assert_string_equal(p->got, "{\"a\":1}\n{\"b\":2}\n");
  free(p);
}

static void test_loopback_unknown_ca(void **state) {
  (void)state;
  NEED_CERTS();
  lp *p = calloc(1, sizeof(*p));
  lp_run(p, "127.0.0.1", false);
  assert_int_equal(p->status, ACP_ERR_PROTOCOL);
  assert_non_null(strstr(p->detail, "TLS: certificate verify failed"));
  free(p);
}

static void test_loopback_slow_reader_backs_up(void **state) {
  (void)state;
  NEED_CERTS();
  lp *p = calloc(1, sizeof(*p));
  p->hold = true;
  lp_run(p, "127.0.0.1", true);
  assert_int_equal(p->status, 0);
  assert_true(p->max_queue >= (size_t)8 << 20);
  free(p);
}

/* A wss:// client connecting twice with one configuration (a reconnect):
 * the second socket resumes the first one's session, and the options'
 * log says how each was set up. */
typedef struct rl {
  uv_loop_t loop;
  uv_timer_t timer;
  acp_remote_server *srv;
  acp_uv_link *srv_links[2], *cli;
  unsigned nsrv;
  acp_remote_tls *ct;
  char url[96];
  int round;
  int status[2];
  char log[2][400];
  int nlog;
} rl;

static void rl_log(const char *line, void *ud) {
  rl *r = ud;
  if (r->nlog < 2)
    snprintf(r->log[r->nlog], sizeof(r->log[0]), "%s", line);
  r->nlog++;
}

static void rl_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                      void *ud) {
  rl *r = ud;
  (void)s;
  (void)id;
  if (r->nsrv < 2)
    r->srv_links[r->nsrv++] = link;
  else
    acp_uv_link_close(link, 0, NULL, NULL);
}

static void rl_read(acp_uv_link *l, int status, const char *d, size_t n,
                    void *ud) {
  (void)l;
  (void)status;
  (void)d;
  (void)n;
  (void)ud;
}

static void rl_next(uv_timer_t *t);

static void rl_connected(acp_uv_link *l, int status, const char *detail,
                         void *ud) {
  rl *r = ud;
  (void)l;
  (void)detail;
  if (r->round >= 1 && r->round <= 2)
    r->status[r->round - 1] = status;
  uv_timer_start(&r->timer, rl_next, 0, 0); /* not inside its callback */
}

static void rl_connect(rl *r) {
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  co.tls = r->ct;
  co.log = rl_log;
  co.log_user_data = r;
  r->round++;
  assert_int_equal(
      acp_remote_connect(&r->cli, &r->loop, r->url, &co, rl_connected, r, NULL),
      0);
  assert_int_equal(acp_uv_link_read_start(r->cli, rl_read, r), 0);
}

static void rl_next(uv_timer_t *t) {
  rl *r = t->data;
  if (r->cli)
    acp_uv_link_close(r->cli, 0, NULL, NULL);
  r->cli = NULL;
  if (r->round < 2 && r->status[0] == 0) {
    rl_connect(r);
    return;
  }
  for (unsigned i = 0; i < r->nsrv; i++)
    acp_uv_link_close(r->srv_links[i], 0, NULL, NULL);
  acp_remote_server_close(r->srv);
  uv_close((uv_handle_t *)&r->timer, NULL);
}

static void test_loopback_ws_reconnect_resumes(void **state) {
  (void)state;
  NEED_CERTS();
  rl *r = calloc(1, sizeof(*r));
  acp_remote_tls *st = NULL;
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  assert_int_equal(uv_loop_init(&r->loop), 0);
  uv_timer_init(&r->loop, &r->timer);
  r->timer.data = r;
  r->status[0] = r->status[1] = 1;
  assert_int_equal(acp_remote_tls_new(&st, ACP_REMOTE_TLS_SERVER, NULL), 0);
  assert_int_equal(
      acp_remote_tls_set_cert(st, path("server.pem"), path("server.key")), 0);
  so.tls = st;
  assert_int_equal(
      acp_remote_server_new(&r->srv, &r->loop, &so, rl_accept, r, NULL, NULL),
      0);
  acp_remote_tls_free(st);
  r->ct = client_conf(0, 0);
  snprintf(r->url, sizeof(r->url), "wss://127.0.0.1:%d/acp",
           acp_remote_server_port(r->srv));
  char want[128];
  snprintf(want, sizeof(want), "socket 1 (WebSocket) to 127.0.0.1:%d: ",
           acp_remote_server_port(r->srv));
  rl_connect(r);
  assert_int_equal(uv_run(&r->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&r->loop), 0);
  assert_int_equal(r->status[0], 0);
  assert_int_equal(r->status[1], 0);
  assert_int_equal(r->nlog, 2);
  print_message("%s\n%s\n", r->log[0], r->log[1]);
  assert_non_null(strstr(r->log[0], want));
  assert_non_null(strstr(r->log[1], want));
  assert_non_null(strstr(r->log[0], "TLS full handshake (TLSv1.3"));
  assert_non_null(strstr(r->log[1], "TLS session resumed (TLSv1.3"));
  assert_int_equal(acp__tls_conf_client_sessions(r->ct), 1);
  acp_remote_tls_free(r->ct);
  free(r);
}

/* Our Streamable HTTP client over https:// (HTTP/1.1, then HTTP/2) ends
 * every TLS socket it closes with close_notify: the server, with log_tls,
 * reports each end it sees as a clean one, never a bare end of the
 * socket; and it reports each handshake (the first full, the later
 * sockets resumed). Waited for: every socket of the server closed. */
typedef struct sc {
  uv_loop_t loop;
  uv_idle_t check; /* started at the end: polls the server's sockets */
  acp_remote_server *srv;
  acp_uv_link *agent, *cli;
  bool closing;
  unsigned clean, bare, full, resumed, other;
  char first_bare[400];
} sc;

static bool sc_has(const char *d, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(d + i, needle, k) == 0)
      return true;
  return false;
}

static void sc_log(const char *line, void *ud) {
  sc *c = ud;
  print_message("server: %s\n", line);
  if (strstr(line, "TLS end from") && strstr(line, "close_notify (a clean"))
    c->clean++;
  else if (strstr(line, "TLS end from") &&
           strstr(line, "without close_notify")) {
    if (c->bare++ == 0)
      snprintf(c->first_bare, sizeof(c->first_bare), "%s", line);
  } else if (strstr(line, "TLS from") && strstr(line, "TLS full handshake"))
    c->full++;
  else if (strstr(line, "TLS from") && strstr(line, "TLS session resumed"))
    c->resumed++;
  else
    c->other++;
}

static void sc_check(uv_idle_t *h) {
  sc *c = h->data;
  if (!c->closing || acp_remote_server_connections(c->srv) > 0)
    return;
  if (c->agent)
    acp_uv_link_close(c->agent, 0, NULL, NULL);
  c->agent = NULL;
  acp_remote_server_close(c->srv);
  c->srv = NULL;
  uv_close((uv_handle_t *)&c->check, NULL);
}

static void sc_agent_read(acp_uv_link *l, int status, const char *d, size_t n,
                          void *ud) {
  sc *c = ud;
  if (status != 0) {
    acp_uv_link_close(l, 0, NULL, NULL);
    c->agent = NULL;
    return;
  }
  if (sc_has(d, n, "\"initialize\"")) {
    static const char r[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    acp_uv_link_write(l, r, sizeof(r) - 1);
  } else if (sc_has(d, n, "\"ping\"")) {
    static const char r[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n";
    acp_uv_link_write(l, r, sizeof(r) - 1);
  }
}

static void sc_accept(acp_remote_server *s, acp_uv_link *link, const char *id,
                      void *ud) {
  sc *c = ud;
  (void)s;
  (void)id;
  c->agent = link;
  acp_uv_link_read_start(link, sc_agent_read, c);
}

static void sc_cli_read(acp_uv_link *l, int status, const char *d, size_t n,
                        void *ud) {
  sc *c = ud;
  if (status == 0 && sc_has(d, n, "\"id\":1,")) {
    /* A second request: the POST socket is reused, the SSE stream is up. */
    static const char p[] =
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";
    acp_uv_link_write(l, p, sizeof(p) - 1);
    return;
  }
  if (status == 0 && !sc_has(d, n, "\"id\":2,"))
    return;
  /* The answer to the second (or the link failed): close; the client
   * DELETEs the connection and closes its sockets. */
  acp_uv_link_close(l, 0, NULL, NULL);
  c->cli = NULL;
  c->closing = true;
  /* An idle handle: the loop goes round until the last socket is gone
   * (a check handle would not wake it for the last close callback). */
  uv_idle_start(&c->check, sc_check);
}

static void sc_case(int transport) {
  sc *c = calloc(1, sizeof(*c));
  acp_remote_tls *st = NULL, *ct = client_conf(0, 0);
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  acp_remote_client_options co = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  char url[96];
  assert_non_null(c);
  assert_int_equal(uv_loop_init(&c->loop), 0);
  uv_idle_init(&c->loop, &c->check);
  c->check.data = c;
  assert_int_equal(acp_remote_tls_new(&st, ACP_REMOTE_TLS_SERVER, NULL), 0);
  assert_int_equal(
      acp_remote_tls_set_cert(st, path("server.pem"), path("server.key")), 0);
  so.tls = st;
  so.log = sc_log;
  so.log_user_data = c;
  so.log_tls = 1;
  assert_int_equal(
      acp_remote_server_new(&c->srv, &c->loop, &so, sc_accept, c, NULL, NULL),
      0);
  acp_remote_tls_free(st);
  snprintf(url, sizeof(url), "https://127.0.0.1:%d/acp",
           acp_remote_server_port(c->srv));
  co.tls = ct;
  co.transport = transport;
  assert_int_equal(
      acp_remote_connect(&c->cli, &c->loop, url, &co, NULL, NULL, NULL), 0);
  assert_int_equal(acp_uv_link_read_start(c->cli, sc_cli_read, c), 0);
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n";
  assert_int_equal(acp_uv_link_write(c->cli, init, sizeof(init) - 1), 0);
  assert_int_equal(uv_run(&c->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&c->loop), 0);
  acp_remote_tls_free(ct);
  if (c->bare > 0)
    fail_msg("%u sockets ended without close_notify: %s", c->bare,
             c->first_bare);
  /* HTTP/1.1: POST, SSE stream and DELETE sockets; HTTP/2: one. */
  assert_true(c->clean >= (transport == ACP_REMOTE_HTTP2 ? 1u : 2u));
  /* One full handshake; the later sockets (HTTP/1.1: the SSE stream and
   * the DELETE; HTTP/2: the DELETE's connection) resumed. */
  assert_int_equal(c->full, 1);
  assert_true(c->resumed >= (transport == ACP_REMOTE_HTTP2 ? 1u : 2u));
  assert_int_equal(c->other, 0);
  free(c);
}

static void test_client_sends_close_notify_http1(void **state) {
  (void)state;
  NEED_CERTS();
  sc_case(ACP_REMOTE_HTTP);
}

static void test_client_sends_close_notify_http2(void **state) {
  (void)state;
  NEED_CERTS();
  sc_case(ACP_REMOTE_HTTP2);
}

/* A session stream reset inside a turn over TLS, HTTP/2 by ALPN (see
 * remote_reset.h): the client resets just that stream, opens it again
 * with Last-Event-ID on the same connection, and every update arrives
 * once, in order. */
static void tls_reset_case(bool server) {
  NEED_CERTS();
  acp_remote_tls *st = NULL, *ct = client_conf(0, 0);
  assert_int_equal(acp_remote_tls_new(&st, ACP_REMOTE_TLS_SERVER, NULL), 0);
  assert_int_equal(
      acp_remote_tls_set_cert(st, path("server.pem"), path("server.key")), 0);
  reset_case_by(ACP_REMOTE_HTTP2, st, ct, server);
  acp_remote_tls_free(st);
  acp_remote_tls_free(ct);
}

static void test_session_stream_reset_over_tls_h2(void **state) {
  (void)state;
  tls_reset_case(false);
}

/* The same with the server resetting its own session stream (its test
 * hook): the client resumes the same way. */
static void test_session_stream_server_reset_over_tls_h2(void **state) {
  (void)state;
  tls_reset_case(true);
}

int main(void) {
  /* As the library asks (acp/uv.h): a peer that closed first makes a
   * write fail with EPIPE, not kill the test. */
  acp_uv_ignore_sigpipe();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handshake_and_data),
      cmocka_unit_test(test_client_checks),
      cmocka_unit_test(test_mutual_tls),
      cmocka_unit_test(test_server_refuses_plaintext),
      cmocka_unit_test(test_config_errors),
      cmocka_unit_test(test_alloc_failures),
      cmocka_unit_test(test_loopback_lines),
      cmocka_unit_test(test_loopback_unknown_ca),
      cmocka_unit_test(test_loopback_slow_reader_backs_up),
      cmocka_unit_test(test_resume_tls13),
      cmocka_unit_test(test_resume_tls12),
      cmocka_unit_test(test_resume_off),
      cmocka_unit_test(test_resume_restarted_server),
      cmocka_unit_test(test_ticket_key_rotation),
      cmocka_unit_test(test_ticket_key_api),
      cmocka_unit_test(test_server_cache_bounded),
      cmocka_unit_test(test_client_sessions_bounded),
      cmocka_unit_test(test_alpn_list),
      cmocka_unit_test(test_loopback_ws_reconnect_resumes),
      cmocka_unit_test(test_session_stream_reset_over_tls_h2),
      cmocka_unit_test(test_session_stream_server_reset_over_tls_h2),
      cmocka_unit_test(test_client_sends_close_notify_http1),
      cmocka_unit_test(test_client_sends_close_notify_http2),
  };
  return cmocka_run_group_tests(tests, setup_certs, teardown_certs);
}
