/*
 * The authorization flow (src/http/oauth_flow.c) against a mock
 * authorization server on 127.0.0.1 (a plain socket thread here: resource
 * metadata, authorization server metadata, a token endpoint): token
 * refresh on expiry, honestly: the token endpoint answers the client
 * credentials grant with expires_in 10, inside the flow's 30 s refresh
 * margin, so the next acp_http_oauth_token() must refresh it with the
 * refresh token it got, whatever the clock says (no sleeps, no timing).
 * And: the token's headers only for the MCP server's origin; a refused
 * refresh keeps no refresh token; allocation failure: the test is linked
 * with malloc, calloc and realloc wrapped, and the whole flow (discovery,
 * token request, refresh) runs with each of its allocations refused in
 * turn: it must fail with an error, leak nothing (valgrind, ASan) and
 * succeed once nothing is refused. (libcurl's and libc's own allocations,
 * strdup and asprintf inside libc, are not wrapped.)
 */
#define _GNU_SOURCE 1 /* strcasestr */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "wrapmem.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acp/http.h"

typedef struct mock {
  int lfd;
  uint16_t port;
  pthread_t th;
  pthread_mutex_t mu;
  int token_calls;
  bool refuse_refresh;
  int bad;       /* BAD_*: how the authorization server misbehaves */
  int evil_hits; /* requests that reached the foreign origin's path */
  char last_token_body[1024];
  char last_authz[256];
} mock;

static void answer(int fd, int status, const char *body) {
  char h[256];
  int n = snprintf(h, sizeof(h),
                   "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                   status, strlen(body));
  if (write(fd, h, (size_t)n) < 0 || write(fd, body, strlen(body)) < 0)
    return;
}

/* Bad answers of the authorization server (test_bad_server). */
enum {
  BAD_NONE,
  BAD_META_REDIRECT,  /* metadata: 302 to another origin */
  BAD_TOKEN_REDIRECT, /* token endpoint: 307 to another origin */
  BAD_META_OVERSIZE,  /* metadata: 300 KiB */
  BAD_META_MALFORMED  /* metadata: truncated JSON */
};

/* A redirect to http://localhost:PORT/evil: the same socket, but another
 * origin (the host differs), so a request that followed it is counted. */
static void redirect_away(mock *m, int fd, int status) {
  char h[256];
  int n = snprintf(h, sizeof(h),
                   "HTTP/1.1 %d X\r\nLocation: http://localhost:%u/evil\r\n"
                   "Content-Length: 0\r\nConnection: close\r\n\r\n",
                   status, m->port);
  if (send(fd, h, (size_t)n, MSG_NOSIGNAL) < 0)
    return;
}

static void serve_one(mock *m, int fd) {
  char req[8192], body[2048];
  size_t len = 0;
  char *end, *cl, *authz;
  size_t want = 0;
  int bad;
  for (;;) { /* headers, then Content-Length bytes of body */
    ssize_t k = read(fd, req + len, sizeof(req) - 1 - len);
    if (k <= 0)
      return;
    len += (size_t)k;
    req[len] = '\0';
    if ((end = strstr(req, "\r\n\r\n")) != NULL) {
      cl = strcasestr(req, "content-length:");
      want = cl ? (size_t)atol(cl + 15) : 0;
      if (len >= (size_t)(end + 4 - req) + want)
        break;
    }
  }
  pthread_mutex_lock(&m->mu);
  bad = m->bad;
  if (strncmp(req, "GET /evil", 9) == 0 || strncmp(req, "POST /evil", 10) == 0)
    m->evil_hits++;
  pthread_mutex_unlock(&m->mu);
  if (strncmp(req, "GET /.well-known/oauth-authorization-server ", 44) == 0 &&
      bad != BAD_NONE && bad != BAD_TOKEN_REDIRECT) {
    if (bad == BAD_META_REDIRECT) {
      redirect_away(m, fd, 302);
    } else if (bad == BAD_META_MALFORMED) {
      answer(fd, 200, "{\"issuer\":\"http://127.0.0.1");
    } else { /* BAD_META_OVERSIZE: over the flow's 256 KiB cap */
      size_t big = 300 * 1024;
      char h[160], *b = malloc(big);
      int n;
      if (b == NULL)
        return;
      memset(b, ' ', big);
      b[0] = '{';
      b[big - 1] = '}';
      n = snprintf(h, sizeof(h),
                   "HTTP/1.1 200 X\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                   big);
      /* The client may hang up at its cap: no SIGPIPE. */
      if (send(fd, h, (size_t)n, MSG_NOSIGNAL) >= 0)
        (void)send(fd, b, big, MSG_NOSIGNAL);
      free(b);
    }
    return;
  }
  if (strncmp(req, "POST /token ", 12) == 0 && bad == BAD_TOKEN_REDIRECT) {
    pthread_mutex_lock(&m->mu);
    m->token_calls++;
    pthread_mutex_unlock(&m->mu);
    redirect_away(m, fd, 307);
    return;
  }
  if (strncmp(req, "GET /.well-known/oauth-protected-resource/mcp ", 46) == 0) {
    snprintf(body, sizeof(body),
             "{\"resource\":\"http://127.0.0.1:%u/mcp\","
             "\"authorization_servers\":[\"http://127.0.0.1:%u\"]}",
             m->port, m->port);
    answer(fd, 200, body);
  } else if (strncmp(req, "GET /.well-known/oauth-authorization-server ", 44) ==
             0) {
    snprintf(body, sizeof(body),
             "{\"issuer\":\"http://127.0.0.1:%u\","
             "\"authorization_endpoint\":\"http://127.0.0.1:%u/authorize\","
             "\"token_endpoint\":\"http://127.0.0.1:%u/token\","
             "\"code_challenge_methods_supported\":[\"S256\"],"
             "\"grant_types_supported\":[\"client_credentials\","
             "\"refresh_token\"],"
             "\"token_endpoint_auth_methods_supported\":"
             "[\"client_secret_basic\"]}",
             m->port, m->port, m->port);
    answer(fd, 200, body);
  } else if (strncmp(req, "POST /token ", 12) == 0) {
    const char *b = end + 4;
    bool refresh, refuse;
    pthread_mutex_lock(&m->mu);
    m->token_calls++;
    snprintf(m->last_token_body, sizeof(m->last_token_body), "%.*s", (int)want,
             b);
    authz = strcasestr(req, "\r\nauthorization: ");
    m->last_authz[0] = '\0';
    if (authz != NULL)
      snprintf(m->last_authz, sizeof(m->last_authz), "%.*s",
               (int)strcspn(authz + 17, "\r"), authz + 17);
    refresh = strstr(m->last_token_body, "grant_type=refresh_token") != NULL;
    refuse = m->refuse_refresh;
    pthread_mutex_unlock(&m->mu);
    if (refresh && refuse)
      answer(fd, 400, "{\"error\":\"invalid_grant\"}");
    else if (refresh)
      answer(fd, 200,
             "{\"access_token\":\"A2\",\"token_type\":\"Bearer\","
             "\"expires_in\":3600}");
    else
      answer(fd, 200,
             "{\"access_token\":\"A1\",\"token_type\":\"Bearer\","
             "\"expires_in\":10,\"refresh_token\":\"R1\"}");
  } else {
    answer(fd, 404, "{}");
  }
}

static void *mock_main(void *arg) {
  mock *m = arg;
  for (;;) {
    int fd = accept(m->lfd, NULL, NULL);
    if (fd < 0)
      return NULL; /* the listening socket was shut down */
    serve_one(m, fd);
    close(fd);
  }
}

static void mock_start(mock *m) {
  struct sockaddr_in a;
  socklen_t al = sizeof(a);
  int one = 1;
  memset(m, 0, sizeof(*m));
  pthread_mutex_init(&m->mu, NULL);
  m->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(m->lfd >= 0);
  setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(m->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(m->lfd, 8), 0);
  assert_int_equal(getsockname(m->lfd, (struct sockaddr *)&a, &al), 0);
  m->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&m->th, NULL, mock_main, m), 0);
}

static void mock_stop(mock *m) {
  shutdown(m->lfd, SHUT_RDWR);
  pthread_join(m->th, NULL);
  close(m->lfd);
  pthread_mutex_destroy(&m->mu);
}

static acp_http_oauth *authorized(mock *m) {
  char url[128], chal[256];
  acp_http_oauth *o = NULL;
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", m->port);
  snprintf(chal, sizeof(chal),
           "Bearer resource_metadata=\"http://127.0.0.1:%u/.well-known/"
           "oauth-protected-resource/mcp\"",
           m->port);
  assert_int_equal(acp_http_oauth_new(&o, url), 0);
  assert_int_equal(acp_http_oauth_set_client(o, "cid", "sec"), 0);
  assert_int_equal(
      acp_http_oauth_authorize(o, 401, chal, ACP_HTTP_OAUTH_CLIENT_CREDENTIALS),
      0);
  pthread_mutex_lock(&m->mu);
  assert_int_equal(m->token_calls, 1);
  assert_non_null(strstr(m->last_token_body, "grant_type=client_credentials"));
  assert_string_equal(m->last_authz, "Basic Y2lkOnNlYw=="); /* cid:sec */
  pthread_mutex_unlock(&m->mu);
  return o;
}

static void test_refresh_on_expiry(void **state) {
  mock m;
  acp_http_oauth *o;
  char *authz = NULL, *dpop = NULL, url[128];
  (void)state;
  mock_start(&m);
  o = authorized(&m);
  /* expires_in 10 is within the 30 s margin: refreshed now. */
  assert_string_equal(acp_http_oauth_token(o), "A2");
  pthread_mutex_lock(&m.mu);
  assert_int_equal(m.token_calls, 2);
  assert_non_null(strstr(m.last_token_body, "grant_type=refresh_token"));
  assert_non_null(strstr(m.last_token_body, "refresh_token=R1"));
  assert_string_equal(m.last_authz, "Basic Y2lkOnNlYw==");
  pthread_mutex_unlock(&m.mu);
  /* The new one lasts an hour: no further refresh. */
  assert_string_equal(acp_http_oauth_token(o), "A2");
  assert_string_equal(acp_http_oauth_token_type(o), "Bearer");
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", m.port);
  assert_int_equal(
      acp_http_oauth_request_headers(o, "POST", url, &authz, &dpop), 0);
  assert_string_equal(authz, "Bearer A2");
  assert_null(dpop);
  free(authz);
  pthread_mutex_lock(&m.mu);
  assert_int_equal(m.token_calls, 2);
  pthread_mutex_unlock(&m.mu);
  /* Another origin never gets the token (another port is one). */
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", m.port + 1);
  assert_int_equal(
      acp_http_oauth_request_headers(o, "POST", url, &authz, &dpop),
      ACP_ERR_INVALID_ARGUMENT);
  assert_null(authz);
  assert_int_equal(acp_http_oauth_request_headers(
                       o, "POST", "https://evil.example/mcp", &authz, &dpop),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_null(authz);
  acp_http_oauth_free(o);
  mock_stop(&m);
}

static void test_refresh_refused(void **state) {
  mock m;
  acp_http_oauth *o;
  (void)state;
  mock_start(&m);
  o = authorized(&m);
  pthread_mutex_lock(&m.mu);
  m.refuse_refresh = true;
  pthread_mutex_unlock(&m.mu);
  /* The refresh fails: the old token is what there is, and the refused
   * refresh token is not tried again. */
  assert_string_equal(acp_http_oauth_token(o), "A1");
  /* The server's OAuth error code is told. */
  assert_non_null(strstr(acp_http_oauth_error(o),
                         "the token endpoint refused the request: "
                         "invalid_grant"));
  assert_int_equal(acp_http_oauth_refresh(o), ACP_ERR_INVALID_STATE);
  assert_string_equal(acp_http_oauth_token(o), "A1");
  pthread_mutex_lock(&m.mu);
  assert_int_equal(m.token_calls, 2);
  pthread_mutex_unlock(&m.mu);
  acp_http_oauth_free(o);
  mock_stop(&m);
}

/* Bad answers from the authorization server: a redirect to another origin
 * (of the metadata, and of the token request, which carries the client
 * secret), metadata over the size cap, malformed metadata. Each fails the
 * flow with a reason, follows nothing, and no token is had. */
static void test_bad_server(void **state) {
  static const struct {
    int bad;
    int token_calls; /* requests the token endpoint got */
  } cases[] = {{BAD_META_REDIRECT, 0},
               {BAD_TOKEN_REDIRECT, 1},
               {BAD_META_OVERSIZE, 0},
               {BAD_META_MALFORMED, 0}};
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    mock m;
    acp_http_oauth *o = NULL;
    char url[128], chal[256];
    mock_start(&m);
    m.bad = cases[i].bad;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", m.port);
    snprintf(chal, sizeof(chal),
             "Bearer resource_metadata=\"http://127.0.0.1:%u/.well-known/"
             "oauth-protected-resource/mcp\"",
             m.port);
    assert_int_equal(acp_http_oauth_new(&o, url), 0);
    assert_int_equal(acp_http_oauth_set_client(o, "cid", "sec"), 0);
    assert_int_not_equal(acp_http_oauth_authorize(
                             o, 401, chal, ACP_HTTP_OAUTH_CLIENT_CREDENTIALS),
                         0);
    assert_non_null(acp_http_oauth_error(o));
    assert_true(strlen(acp_http_oauth_error(o)) > 0);
    print_message("bad server %d: %s\n", cases[i].bad, acp_http_oauth_error(o));
    assert_null(acp_http_oauth_token(o));
    pthread_mutex_lock(&m.mu);
    assert_int_equal(m.evil_hits, 0);
    assert_int_equal(m.token_calls, cases[i].token_calls);
    pthread_mutex_unlock(&m.mu);
    acp_http_oauth_free(o);
    mock_stop(&m);
  }
}

/* The setters' bad input (no server needed). */
static void test_setters(void **state) {
  acp_http_oauth *o = NULL;
  (void)state;
  assert_int_equal(acp_http_oauth_new(&o, "http://127.0.0.1:1/mcp"), 0);
  assert_null(acp_http_oauth_token_type(o));
  assert_int_equal(acp_http_oauth_set_client_key(o, "junk", 4, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(acp_http_oauth_error(o), "private key"));
  assert_int_equal(acp_http_oauth_set_client_key(o, NULL, 0, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_oauth_set_assertion(o, ""),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_oauth_set_idp(o, "ftp://x/token", "t", NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_oauth_set_idp(o, "https://x/token", "t", NULL, "s"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_oauth_set_idp(o, "https://x/token", "t", "c", NULL),
                   0);
  assert_int_equal(acp_http_oauth_set_dpop_nonce(o, "a\"b"),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_http_oauth_set_dpop_nonce(o, "ok-nonce"), 0);
  assert_int_equal(acp_http_oauth_set_dpop(o, 1), 0);
  assert_int_equal(acp_http_oauth_set_dpop(o, 1), 0); /* kept */
  assert_int_equal(acp_http_oauth_set_dpop(o, 0), 0);
  {
    char *a = (char *)1, *d = (char *)1;
    /* No token yet. */
    assert_int_equal(acp_http_oauth_request_headers(
                         o, "POST", "http://127.0.0.1:1/mcp", &a, &d),
                     ACP_ERR_INVALID_STATE);
    assert_null(a);
    assert_null(d);
  }
  assert_int_equal(acp_http_oauth_set_dpop(NULL, 1), ACP_ERR_INVALID_ARGUMENT);
  acp_http_oauth_free(o);
}

/* The flow with each allocation refused in turn. */
static void test_alloc_failure(void **state) {
  mock m;
  char url[128], chal[256];
  long i;
  bool done = false;
  (void)state;
  mock_start(&m);
  snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", m.port);
  snprintf(chal, sizeof(chal),
           "Bearer resource_metadata=\"http://127.0.0.1:%u/.well-known/"
           "oauth-protected-resource/mcp\"",
           m.port);
  for (i = 0; !done && i < 5000; i++) {
    acp_http_oauth *o = NULL;
    int rv;
    const char *tok = NULL;
    wrapmem_arm(i);
    rv = acp_http_oauth_new(&o, url);
    if (rv == 0)
      rv = acp_http_oauth_set_client(o, "cid", "sec");
    if (rv == 0)
      rv = acp_http_oauth_authorize(o, 401, chal,
                                    ACP_HTTP_OAUTH_CLIENT_CREDENTIALS);
    if (rv == 0)
      tok = acp_http_oauth_token(o); /* refreshes (expires_in 10) */
    wrapmem_fail_at = -1;
    if (wrapmem_count <= i) {
      /* Nothing was refused: the whole flow must have worked. */
      assert_int_equal(rv, 0);
      assert_non_null(tok);
      assert_string_equal(tok, "A2");
      done = true;
    } else {
      /* A refused allocation: an error code (or, when it hit the refresh,
       * the old token kept), never a crash or a leak. */
      assert_true(rv <= 0);
    }
    acp_http_oauth_free(o);
  }
  assert_true(done);
  fprintf(stderr, "flow: %ld allocations refused in turn\n", i - 1);
  assert_true(i > 10);
  mock_stop(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refresh_on_expiry),
      cmocka_unit_test(test_refresh_refused),
      cmocka_unit_test(test_bad_server),
      cmocka_unit_test(test_setters),
      cmocka_unit_test(test_alloc_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
