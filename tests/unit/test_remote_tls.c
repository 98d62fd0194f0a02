/*
 * libacp-remote: the TLS filter (src/remote/tls.c) without a socket. Two
 * filters, a client's and a server's, talk through memory: the ciphertext
 * one produces is fed to the other. Handshake, ALPN, data both ways (also
 * written before the handshake ended, and large), close_notify, the
 * client's checks (unknown CA, another name), mutual TLS, plaintext HTTP
 * and garbage sent to a server, and an allocation-failure sweep over the
 * filter's own allocations. Certificates are made in a temporary directory
 * with the openssl program (the test is skipped without it).
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

#include "acp/remote.h"
#include "failmem.h"
#include "remote/tls_int.h"

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
    rv = acp__tls_new(&p->s, p->sconf, NULL, mem);
  if (rv == 0)
    rv = acp__tls_new(&p->c, p->cconf, host, mem);
  return rv;
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
  assert_int_equal(acp__tls_new(&p.c, p.cconf, "localhost", std_mem()), 0);
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

int main(void) {
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
  };
  return cmocka_run_group_tests(tests, setup_certs, teardown_certs);
}
