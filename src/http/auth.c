/*
 * The resource server's configuration and its I/O (acp_http_auth, see
 * acp/http.h): discovery of the issuer's JWK Set, its fetch and refetch,
 * token introspection. The token checks themselves are in jwt.c, which
 * does no I/O.
 *
 * The fetches are libcurl easy transfers. The server runs them on the
 * loop's thread pool (uv_queue_work) and suspends only the requests that
 * wait for them, so one slow issuer does not stall every other
 * connection; the sync acp__http_auth_check() (tests, tools) blocks. The
 * worker thread touches nothing of acp_http_auth: a job carries copies of
 * the URLs and credentials in, and the body out, and its result is
 * applied on the loop's thread.
 *
 * The key set is fetched once at the first token, then at most once per
 * JWKS_REFETCH_S when a token names an unknown kid (key rotation), so an
 * attacker sending random kids cannot make us fetch on every request; all
 * requests that need keys meanwhile wait for the one fetch. Introspection
 * fetches once per request (no cache: a revoked token must stop working).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <uv.h>

#include "http_internal.h"
#include "jwt.h"
#include "oauth.h"

#define FETCH_TIMEOUT_S 10L
#define FETCH_CONNECT_TIMEOUT_S 5L
#define JWKS_REFETCH_S 30
#define DEFAULT_LEEWAY_S 60
#define KEYS_RETRY_S 5

typedef struct tool_scope {
  char *tool;
  char *scopes; /* space-separated */
} tool_scope;

struct acp_http_auth {
  acp_mem mem;
  char *issuer;
  char *resource; /* or NULL: the server's default */
  char *audience; /* or NULL: the resource */
  char *scopes;   /* required for every request, space-separated, or NULL */
  tool_scope *tools;
  size_t ntools;
  char *introspect, *client_id, *client_secret;
  char *jwks_uri;    /* set or discovered */
  bool jwks_fixed;   /* acp_http_auth_set_jwks(): never fetch */
  acp__jwks *keys;   /* or NULL before the first fetch */
  time_t last_fetch; /* of the key set, 0: never */
  int64_t leeway;
  struct auth_job *keys_job; /* the key set fetch in flight, or NULL */
  struct auth_job *jobs;     /* every fetch in flight (auth_job.next) */
};

static bool http_url(const char *u) {
  return u != NULL && (strncasecmp(u, "http://", 7) == 0 ||
                       strncasecmp(u, "https://", 8) == 0);
}

/* A scope token (RFC 6749 3.3), also safe inside a quoted header value. */
static bool scope_token_ok(const char *s) {
  if (s == NULL || *s == '\0')
    return false;
  for (; *s; s++)
    if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f || *s == '"' ||
        *s == '\\')
      return false;
  return true;
}

static int set_str(acp_http_auth *a, char **dst, const char *v) {
  char *c = acp__strdup(&a->mem, v);
  if (c == NULL)
    return ACP_ERR_NOMEM;
  acp__free(&a->mem, *dst);
  *dst = c;
  return 0;
}

/* Append " word" (or "word") to a space-separated list held in *dst. */
static int add_word(acp_http_auth *a, char **dst, const char *w) {
  size_t old = *dst ? strlen(*dst) : 0, wl = strlen(w);
  char *c;
  if (*dst != NULL && acp__scope_covers(*dst, w))
    return 0;
  c = acp__malloc(&a->mem, old + 1 + wl + 1);
  if (c == NULL)
    return ACP_ERR_NOMEM;
  if (old > 0) {
    memcpy(c, *dst, old);
    c[old++] = ' ';
  }
  memcpy(c + old, w, wl + 1);
  acp__free(&a->mem, *dst);
  *dst = c;
  return 0;
}

int acp_http_auth_new(acp_http_auth **out, const char *issuer,
                      const acp_mem *mem) {
  acp_mem m;
  acp_http_auth *a;
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (!http_url(issuer))
    return ACP_ERR_INVALID_ARGUMENT;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return ACP_ERR_SYSTEM;
  acp__mem_init(&m, mem);
  a = acp__calloc(&m, 1, sizeof(*a));
  if (a == NULL)
    return ACP_ERR_NOMEM;
  a->mem = m;
  a->leeway = DEFAULT_LEEWAY_S;
  if ((a->issuer = acp__strdup(&m, issuer)) == NULL) {
    acp__free(&m, a);
    return ACP_ERR_NOMEM;
  }
  *out = a;
  return 0;
}

static void orphan_jobs(acp_http_auth *a);

void acp_http_auth_free(acp_http_auth *a) {
  size_t i;
  if (a == NULL)
    return;
  for (i = 0; i < a->ntools; i++) {
    acp__free(&a->mem, a->tools[i].tool);
    acp__free(&a->mem, a->tools[i].scopes);
  }
  acp__free(&a->mem, a->tools);
  acp__free(&a->mem, a->issuer);
  acp__free(&a->mem, a->resource);
  acp__free(&a->mem, a->audience);
  acp__free(&a->mem, a->scopes);
  acp__free(&a->mem, a->introspect);
  acp__free(&a->mem, a->client_id);
  if (a->client_secret != NULL) {
    memset(a->client_secret, 0, strlen(a->client_secret));
    acp__free(&a->mem, a->client_secret);
  }
  acp__free(&a->mem, a->jwks_uri);
  acp__jwks_free(a->keys);
  orphan_jobs(a);
  acp__free(&a->mem, a);
}

int acp_http_auth_set_resource(acp_http_auth *a, const char *url) {
  if (a == NULL || !http_url(url))
    return ACP_ERR_INVALID_ARGUMENT;
  return set_str(a, &a->resource, url);
}

int acp_http_auth_set_audience(acp_http_auth *a, const char *aud) {
  if (a == NULL || aud == NULL || *aud == '\0')
    return ACP_ERR_INVALID_ARGUMENT;
  return set_str(a, &a->audience, aud);
}

int acp_http_auth_add_scope(acp_http_auth *a, const char *scope) {
  if (a == NULL || !scope_token_ok(scope))
    return ACP_ERR_INVALID_ARGUMENT;
  return add_word(a, &a->scopes, scope);
}

int acp_http_auth_add_tool_scope(acp_http_auth *a, const char *tool,
                                 const char *scope) {
  size_t i;
  tool_scope *t;
  if (a == NULL || tool == NULL || *tool == '\0' || !scope_token_ok(scope))
    return ACP_ERR_INVALID_ARGUMENT;
  for (i = 0; i < a->ntools; i++)
    if (strcmp(a->tools[i].tool, tool) == 0)
      return add_word(a, &a->tools[i].scopes, scope);
  t = acp__realloc(&a->mem, a->tools, (a->ntools + 1) * sizeof(*t));
  if (t == NULL)
    return ACP_ERR_NOMEM;
  a->tools = t;
  t = &a->tools[a->ntools];
  t->scopes = NULL;
  if ((t->tool = acp__strdup(&a->mem, tool)) == NULL)
    return ACP_ERR_NOMEM;
  if (add_word(a, &t->scopes, scope) != 0) {
    acp__free(&a->mem, t->tool);
    return ACP_ERR_NOMEM;
  }
  a->ntools++;
  return 0;
}

int acp_http_auth_set_introspection(acp_http_auth *a, const char *url,
                                    const char *client_id,
                                    const char *client_secret) {
  char *u, *id, *sec;
  if (a == NULL || !http_url(url) || client_id == NULL || client_secret == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  u = acp__strdup(&a->mem, url);
  id = acp__strdup(&a->mem, client_id);
  sec = acp__strdup(&a->mem, client_secret);
  if (u == NULL || id == NULL || sec == NULL) {
    acp__free(&a->mem, u);
    acp__free(&a->mem, id);
    acp__free(&a->mem, sec);
    return ACP_ERR_NOMEM;
  }
  acp__free(&a->mem, a->introspect);
  acp__free(&a->mem, a->client_id);
  acp__free(&a->mem, a->client_secret);
  a->introspect = u;
  a->client_id = id;
  a->client_secret = sec;
  return 0;
}

int acp_http_auth_set_jwks_uri(acp_http_auth *a, const char *url) {
  if (a == NULL || !http_url(url))
    return ACP_ERR_INVALID_ARGUMENT;
  return set_str(a, &a->jwks_uri, url);
}

int acp_http_auth_set_jwks(acp_http_auth *a, const char *json, size_t len) {
  acp__jwks *k;
  int rv;
  if (a == NULL || json == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if ((rv = acp__jwks_parse(&a->mem, json, len, &k)) != 0)
    return rv;
  acp__jwks_free(a->keys);
  a->keys = k;
  a->jwks_fixed = true;
  return 0;
}

void acp_http_auth_set_leeway(acp_http_auth *a, unsigned seconds) {
  if (a != NULL)
    a->leeway = seconds;
}

/* MARK: - Internal accessors (http_server.c) */

const char *acp__http_auth_scopes(const acp_http_auth *a) {
  return a->scopes ? a->scopes : "";
}

const char *acp__http_auth_resource(const acp_http_auth *a) {
  return a->resource;
}

const char *acp__http_auth_tool_scopes(const acp_http_auth *a, const char *tool,
                                       size_t len) {
  size_t i;
  for (i = 0; i < a->ntools; i++)
    if (strlen(a->tools[i].tool) == len &&
        memcmp(a->tools[i].tool, tool, len) == 0)
      return a->tools[i].scopes;
  return NULL;
}

/* The protected resource metadata (RFC 9728) for `resource`. */
char *acp__http_auth_prm(const acp_http_auth *a, const acp_mem *mem,
                         const char *resource, size_t *len) {
  acp_json_writer *w = NULL;
  char *all = NULL, *r = NULL;
  const char *d;
  size_t i, n;
  acp_http_auth *ma = (acp_http_auth *)a; /* add_word() allocates only */
  if (acp_json_writer_new(&w, 64 << 10, &a->mem) != 0)
    return NULL;
  if (a->scopes != NULL && add_word(ma, &all, a->scopes) != 0)
    goto out;
  for (i = 0; i < a->ntools; i++) {
    /* add_word() takes one word: add the tool's one by one. */
    const char *p = a->tools[i].scopes;
    while (*p) {
      char word[256];
      size_t wl = strcspn(p, " ");
      if (wl > 0 && wl < sizeof(word)) {
        memcpy(word, p, wl);
        word[wl] = '\0';
        if (add_word(ma, &all, word) != 0)
          goto out;
      }
      p += wl;
      while (*p == ' ')
        p++;
    }
  }
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "resource");
  acp_json_write_strz(w, resource);
  acp_json_write_keyz(w, "authorization_servers");
  acp_json_write_arr_begin(w);
  acp_json_write_strz(w, a->issuer);
  acp_json_write_arr_end(w);
  if (all != NULL) {
    const char *p = all;
    acp_json_write_keyz(w, "scopes_supported");
    acp_json_write_arr_begin(w);
    while (*p) {
      size_t wl = strcspn(p, " ");
      acp_json_write_str(w, p, wl);
      p += wl;
      while (*p == ' ')
        p++;
    }
    acp_json_write_arr_end(w);
  }
  acp_json_write_keyz(w, "bearer_methods_supported");
  acp_json_write_arr_begin(w);
  acp_json_write_strz(w, "header");
  acp_json_write_arr_end(w);
  acp_json_write_obj_end(w);
  if (acp_json_writer_error(w) != 0)
    goto out;
  d = acp_json_writer_data(w, &n);
  if ((r = acp__strndup(mem, d, n)) != NULL)
    *len = n;
out:
  acp__free(&a->mem, all);
  acp_json_writer_free(w);
  return r;
}

/* MARK: - Fetching */

typedef struct sink {
  acp__buf b;
  bool over;
} sink;

static size_t on_data(char *p, size_t sz, size_t n, void *ud) {
  sink *s = ud;
  if (acp__buf_append(&s->b, p, sz * n) != 0) {
    s->over = true;
    return 0; /* aborts the transfer */
  }
  return sz * n;
}

/* GET (form == NULL) or POST a form to `url`; 200 answers only, the body
 * (capped) in s. Credentials, when given, go as HTTP Basic. */
static int fetch(const acp_mem *mem, const char *url, const char *form,
                 const char *user, const char *pass, sink *s) {
  CURL *c = curl_easy_init();
  struct curl_slist *h = NULL;
  long status = 0;
  CURLcode cc;
  acp__buf_init(&s->b, mem, ACP__JWKS_MAX_BYTES);
  s->over = false;
  if (c == NULL)
    return ACP_ERR_SYSTEM;
  h = curl_slist_append(h, "Accept: application/json");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, FETCH_TIMEOUT_S);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, FETCH_CONNECT_TIMEOUT_S);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  if (form != NULL) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, form);
    if (user != NULL) {
      curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
      curl_easy_setopt(c, CURLOPT_USERNAME, user);
      curl_easy_setopt(c, CURLOPT_PASSWORD, pass);
    }
  }
  cc = curl_easy_perform(c);
  if (cc == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  if (s->over) {
    acp__buf_dispose(&s->b);
    return ACP_ERR_LIMIT;
  }
  if (cc != CURLE_OK || status != 200) {
    acp__buf_dispose(&s->b);
    return ACP_ERR_PROTOCOL;
  }
  return 0;
}

/* MARK: - Fetch jobs */

enum { JOB_KEYS, JOB_INTROSPECT };

/* One fetch. The worker (job_run) reads only the copies under "in" and
 * writes only "out"; everything else is the loop thread's. */
typedef struct auth_job {
  uv_work_t work;
  acp_mem mem;           /* a copy of the auth's: the copies below */
  acp_http_auth *a;      /* NULL once acp_http_auth_free() ran */
  struct auth_job *next; /* in a->jobs */
  int kind;
  acp__auth_wait *waiters;
  /* In. */
  char *issuer;
  char *url;  /* JOB_KEYS: the jwks_uri, or NULL to discover it */
  char *form; /* JOB_INTROSPECT: the form, and Basic credentials */
  char *user, *pass;
  /* Out. */
  char *found_uri; /* JOB_KEYS: the discovered jwks_uri (malloc), or NULL */
  int rv;          /* of the fetch */
  sink s;          /* the body when rv == 0 (default allocator) */
  /* JOB_INTROSPECT: what the answer is checked against, and with. */
  char *audience;
  int64_t leeway;
  acp_mem cmem; /* the check's allocator, for the claims */
} auth_job;

static void free_secret(const acp_mem *m, char *p) {
  if (p != NULL) {
    memset(p, 0, strlen(p));
    acp__free(m, p);
  }
}

static void job_free(auth_job *j) {
  acp__free(&j->mem, j->issuer);
  acp__free(&j->mem, j->url);
  acp__free(&j->mem, j->audience);
  free_secret(&j->mem, j->form);
  free_secret(&j->mem, j->user);
  free_secret(&j->mem, j->pass);
  free(j->found_uri);
  if (j->rv == 0)
    acp__buf_dispose(&j->s.b);
  acp__free(&j->mem, j);
}

static auth_job *job_new(acp_http_auth *a, int kind) {
  auth_job *j = acp__calloc(&a->mem, 1, sizeof(*j));
  if (j == NULL)
    return NULL;
  j->mem = a->mem;
  j->a = a;
  j->kind = kind;
  j->rv = ACP_ERR_SYSTEM;
  j->issuer = acp__strdup(&a->mem, a->issuer);
  if (j->issuer == NULL) {
    job_free(j);
    return NULL;
  }
  return j;
}

/* The issuer's jwks_uri from its metadata (RFC 8414 path insertion, then
 * OpenID discovery), checked to be the issuer's own metadata. On any
 * thread: malloc only. */
static int discover(const char *issuer, char **found) {
  char *urls[ACP__OAUTH_MAX_URLS];
  size_t n = 0, i;
  int rv = ACP_ERR_PROTOCOL;
  *found = NULL;
  if (acp__oauth_as_urls(issuer, urls, &n) != 0)
    return ACP_ERR_NOMEM;
  for (i = 0; i < n && rv != 0; i++) {
    sink s;
    acp__oauth_as as;
    if (fetch(acp_mem_default(), urls[i], NULL, NULL, NULL, &s) != 0)
      continue;
    if (acp__oauth_parse_as(s.b.data, s.b.len, &as) == 0) {
      if (as.issuer != NULL && strcmp(as.issuer, issuer) == 0 &&
          http_url(as.jwks_uri)) {
        *found = strdup(as.jwks_uri);
        rv = *found != NULL ? 0 : ACP_ERR_NOMEM;
      }
      acp__oauth_as_free(&as);
    }
    acp__buf_dispose(&s.b);
  }
  for (i = 0; i < n; i++)
    free(urls[i]);
  return rv;
}

/* The fetch itself: on a worker thread, or on the caller's (sync). */
static void job_run(auth_job *j) {
  const char *url = j->url;
  if (j->kind == JOB_KEYS && url == NULL) {
    j->rv = discover(j->issuer, &j->found_uri);
    if (j->rv != 0)
      return;
    url = j->found_uri;
  }
  j->rv = fetch(acp_mem_default(), url, j->form, j->user, j->pass, &j->s);
}

/* A key set fetch has ended: keep what it found (loop thread). */
static void keys_apply(acp_http_auth *a, auth_job *j) {
  acp__jwks *k;
  if (j->found_uri != NULL)
    (void)set_str(a, &a->jwks_uri, j->found_uri);
  if (j->rv != 0 || acp__jwks_parse(&a->mem, j->s.b.data, j->s.b.len, &k) != 0)
    return; /* the old keys, if any, stay */
  acp__jwks_free(a->keys);
  a->keys = k;
}

/* An introspection fetch has ended: the token's answer. */
static int introspect_result(auth_job *j, const acp_mem *mem,
                             const acp__jwt_expect *x, acp__jwt_claims *out,
                             const char **why) {
  if (j->rv != 0) {
    *why = "introspection failed";
    return ACP_ERR_PROTOCOL;
  }
  return acp__introspection_check(mem, j->s.b.data, j->s.b.len, x, out, why);
}

static void on_work(uv_work_t *w) {
  job_run((auth_job *)w->data);
}

static void on_after_work(uv_work_t *w, int status) {
  auth_job *j = w->data;
  acp__auth_wait *wt, *next;
  acp__jwt_expect x;
  if (status != 0) {
    /* Cancelled (the loop is closing): whatever it fetched is dropped,
     * and every waiter gets the same ACP_ERR_CANCELLED. */
    if (j->rv == 0)
      acp__buf_dispose(&j->s.b);
    j->rv = ACP_ERR_CANCELLED;
  }
  if (j->a != NULL) {
    auth_job **pp;
    for (pp = &j->a->jobs; *pp; pp = &(*pp)->next)
      if (*pp == j) {
        *pp = j->next;
        break;
      }
    if (j->a->keys_job == j)
      j->a->keys_job = NULL;
    if (j->kind == JOB_KEYS)
      keys_apply(j->a, j);
  }
  /* What an introspection answer is checked against: the same for every
   * waiter of the job. */
  x.issuer = j->issuer;
  x.audience = j->audience;
  x.now = (int64_t)time(NULL);
  x.leeway = j->leeway;
  for (wt = j->waiters; wt; wt = next) {
    next = wt->next;
    wt->next = NULL;
    wt->job = NULL;
    if (j->kind == JOB_INTROSPECT) {
      wt->why = NULL;
      wt->rv = introspect_result(j, &j->cmem, &x, &wt->claims, &wt->why);
      wt->has_result = true;
    }
    wt->done(wt);
  }
  job_free(j);
}

static void orphan_jobs(acp_http_auth *a) {
  auth_job *j;
  for (j = a->jobs; j; j = j->next)
    j->a = NULL;
  a->jobs = NULL;
  a->keys_job = NULL;
}

/* Queue `j` on `loop` with `w` waiting for it: ACP_ERR_AGAIN, or the
 * error that kept it from being queued (the job is then freed). */
static int job_queue(acp_http_auth *a, auth_job *j, uv_loop_t *loop,
                     acp__auth_wait *w) {
  j->work.data = j;
  if (uv_queue_work(loop, &j->work, on_work, on_after_work) != 0) {
    job_free(j);
    return ACP_ERR_SYSTEM;
  }
  j->next = a->jobs;
  a->jobs = j;
  w->next = NULL;
  w->job = j;
  j->waiters = w;
  return ACP_ERR_AGAIN;
}

/* Fetch the key set: at once on this thread without a loop (0), else
 * start the fetch or join the one in flight (ACP_ERR_AGAIN). */
static int keys_fetch(acp_http_auth *a, uv_loop_t *loop, acp__auth_wait *w) {
  auth_job *j = a->keys_job;
  if (loop != NULL && j != NULL) {
    w->job = j;
    w->next = j->waiters;
    j->waiters = w;
    return ACP_ERR_AGAIN;
  }
  if ((j = job_new(a, JOB_KEYS)) == NULL)
    return ACP_ERR_NOMEM;
  if (a->jwks_uri != NULL &&
      (j->url = acp__strdup(&a->mem, a->jwks_uri)) == NULL) {
    job_free(j);
    return ACP_ERR_NOMEM;
  }
  /* From the start, so the requests that come meanwhile join this fetch
   * and those after it do not fetch again before the retry delay. */
  a->last_fetch = time(NULL);
  if (loop == NULL) {
    job_run(j);
    keys_apply(a, j);
    job_free(j);
    return 0;
  }
  a->keys_job = j;
  return job_queue(a, j, loop, w);
}

/* The introspection request for `token`: the form (RFC 7662 2.1) and the
 * client's credentials, form-encoded before Basic (RFC 6749 2.3.1). */
static auth_job *introspect_job(acp_http_auth *a, const char *token,
                                size_t len) {
  auth_job *j = job_new(a, JOB_INTROSPECT);
  acp__buf form;
  char *t, *enc = NULL;
  int rv = 0;
  if (j == NULL)
    return NULL;
  acp__buf_init(&form, &a->mem, 0);
  if ((t = acp__strndup(&a->mem, token, len)) == NULL ||
      (enc = acp__oauth_form_enc(t)) == NULL)
    rv = ACP_ERR_NOMEM;
  if (rv == 0)
    rv = acp__buf_append(&form, "token=", 6);
  if (rv == 0)
    rv = acp__buf_append(&form, enc, strlen(enc));
  if (rv == 0)
    rv = acp__buf_append(&form, "&token_type_hint=access_token", 29);
  if (rv == 0)
    rv = acp__buf_putc(&form, '\0');
  if (t != NULL) {
    memset(t, 0, len);
    acp__free(&a->mem, t);
  }
  if (enc != NULL) {
    memset(enc, 0, strlen(enc));
    free(enc);
  }
  if (rv == 0) {
    char *u = acp__oauth_form_enc(a->client_id);
    char *p = acp__oauth_form_enc(a->client_secret);
    j->url = acp__strdup(&a->mem, a->introspect);
    j->form = acp__strndup(&a->mem, form.data, form.len);
    j->user = u ? acp__strdup(&a->mem, u) : NULL;
    j->pass = p ? acp__strdup(&a->mem, p) : NULL;
    if (p != NULL) {
      memset(p, 0, strlen(p));
      free(p);
    }
    free(u);
    if (j->url == NULL || j->form == NULL || j->user == NULL || j->pass == NULL)
      rv = ACP_ERR_NOMEM;
  }
  if (form.data != NULL)
    memset(form.data, 0, form.len);
  acp__buf_dispose(&form);
  if (rv != 0) {
    job_free(j);
    return NULL;
  }
  return j;
}

static int introspect(acp_http_auth *a, const acp_mem *mem,
                      const acp__jwt_expect *x, const char *token, size_t len,
                      acp__jwt_claims *out, const char **why, uv_loop_t *loop,
                      acp__auth_wait *w) {
  auth_job *j = introspect_job(a, token, len);
  int rv;
  if (j == NULL)
    return ACP_ERR_NOMEM;
  if (loop == NULL) {
    job_run(j);
    rv = introspect_result(j, mem, x, out, why);
    job_free(j);
    return rv;
  }
  acp__mem_init(&j->cmem, mem);
  j->leeway = x->leeway;
  if ((j->audience = acp__strdup(&a->mem, x->audience)) == NULL) {
    job_free(j);
    return ACP_ERR_NOMEM;
  }
  return job_queue(a, j, loop, w);
}

/* MARK: - Checking */

int acp__http_auth_check_on(acp_http_auth *a, const acp_mem *mem,
                            const char *resource, const char *token, size_t len,
                            acp__jwt_claims *out, const char **why,
                            uv_loop_t *loop, acp__auth_wait *w) {
  acp__jwt_expect x;
  time_t now = time(NULL);
  int rv;
  *why = NULL;
  memset(out, 0, sizeof(*out));
  if (w != NULL && w->has_result) {
    /* The answer of the introspection this request waited for. */
    *out = w->claims;
    *why = w->why;
    rv = w->rv;
    w->has_result = false;
    memset(&w->claims, 0, sizeof(w->claims));
    return rv;
  }
  if (w == NULL)
    loop = NULL;
  x.issuer = a->issuer;
  x.audience = a->audience ? a->audience : resource;
  x.now = (int64_t)now;
  x.leeway = a->leeway;
  if (a->introspect != NULL)
    return introspect(a, mem, &x, token, len, out, why, loop, w);
  /* No keys yet: fetch them (again at most every KEYS_RETRY_S while the
   * issuer cannot be reached, so requests do not each wait for it). */
  if (a->keys == NULL && !a->jwks_fixed &&
      (a->keys_job != NULL || a->last_fetch == 0 ||
       now - a->last_fetch >= KEYS_RETRY_S)) {
    rv = keys_fetch(a, loop, w);
    if (rv == ACP_ERR_AGAIN || rv == ACP_ERR_NOMEM)
      return rv;
  }
  if (a->keys == NULL) {
    *why = "the issuer's keys are unavailable";
    return ACP_ERR_SYSTEM;
  }
  rv = acp__jwt_verify(mem, token, len, a->keys, &x, out, why);
  if (rv == ACP_ERR_NOT_FOUND && !a->jwks_fixed &&
      (a->keys_job != NULL || now - a->last_fetch >= JWKS_REFETCH_S)) {
    /* Perhaps the issuer rotated its keys: fetch them once more. */
    int frv = keys_fetch(a, loop, w);
    if (frv == ACP_ERR_AGAIN || frv == ACP_ERR_NOMEM)
      return frv;
    rv = acp__jwt_verify(mem, token, len, a->keys, &x, out, why);
  }
  if (rv == ACP_ERR_NOT_FOUND)
    rv = ACP_ERR_PROTOCOL; /* *why says no key fits */
  return rv;
}

int acp__http_auth_check(acp_http_auth *a, const acp_mem *mem,
                         const char *resource, const char *token, size_t len,
                         acp__jwt_claims *out, const char **why) {
  return acp__http_auth_check_on(a, mem, resource, token, len, out, why, NULL,
                                 NULL);
}

void acp__http_auth_unwait(acp__auth_wait *w, const acp_mem *mem) {
  auth_job *j;
  acp__auth_wait **pp;
  if (w == NULL)
    return;
  if ((j = w->job) != NULL) {
    for (pp = &j->waiters; *pp; pp = &(*pp)->next)
      if (*pp == w) {
        *pp = w->next;
        break;
      }
    w->job = NULL;
    w->next = NULL;
  }
  if (w->has_result) {
    acp__jwt_claims_free(mem, &w->claims);
    w->has_result = false;
  }
}
