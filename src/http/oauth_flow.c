/*
 * The MCP authorization flow (acp/http.h, acp_http_oauth_*): drives the
 * sans-I/O core (oauth.h) with blocking libcurl easy transfers. Blocking
 * because the flow runs between connection attempts, when the transport
 * has nothing else to do, and because the application's callback (a
 * browser, a person) is blocking by nature anyway.
 *
 * Tokens and secrets never reach a log or an error message; TLS
 * verification keeps libcurl's defaults (on); no transfer follows
 * redirects, so nothing is carried to another origin.
 */
#define _GNU_SOURCE 1 /* asprintf */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "acp/http.h"
#include "acp/json.h"
#include "oauth.h"

/* Metadata and token answers larger than this are refused. */
#define OAUTH_MAX_BODY (256 * 1024)
#define OAUTH_TIMEOUT_S 20L
/* Step-up authorizations (403 insufficient_scope) allowed per instance. */
#define OAUTH_MAX_STEP_UP 2

struct acp_http_oauth {
  char *mcp_url;
  char *redirect_uri;
  char *cfg_client_id; /* pre-registered */
  char *cfg_client_secret;
  char *cimd_url;
  acp_http_oauth_open_cb open_cb;
  void *open_ud;
  /* per issuer: the client registration and the tokens */
  char *issuer;
  char *client_id;
  char *client_secret;
  acp__oauth_auth auth;
  char *token_endpoint;
  char *resource;
  char *access_token;
  char *refresh_token;
  char *scope;
  time_t expires_at; /* 0: unknown */
  int step_ups;
  char err[256];
};

typedef struct resp {
  char *data;
  size_t len;
  bool over;
  char *location;
} resp;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
  resp *r = ud;
  size_t len = sz * n;
  char *d;
  if (r->len + len > OAUTH_MAX_BODY) {
    r->over = true;
    return 0;
  }
  d = realloc(r->data, r->len + len + 1);
  if (d == NULL)
    return 0;
  memcpy(d + r->len, p, len);
  r->len += len;
  d[r->len] = '\0';
  r->data = d;
  return len;
}

static void resp_free(resp *r) {
  free(r->data);
  free(r->location);
  memset(r, 0, sizeof(*r));
}

/* One request; body NULL: GET. Returns the status (0 on transport error). */
static long http_do(const char *url, const char *ctype, const char *body,
                    size_t blen, const char *authz, resp *r) {
  CURL *e = curl_easy_init();
  struct curl_slist *h = NULL;
  long status = 0;
  char line[4096];
  memset(r, 0, sizeof(*r));
  if (e == NULL)
    return 0;
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_TIMEOUT, OAUTH_TIMEOUT_S);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  h = curl_slist_append(h, "Accept: application/json");
  if (body != NULL) {
    snprintf(line, sizeof(line), "Content-Type: %s", ctype);
    h = curl_slist_append(h, line);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  }
  if (authz != NULL && strlen(authz) < sizeof(line) - 16) {
    snprintf(line, sizeof(line), "Authorization: %s", authz);
    h = curl_slist_append(h, line);
  }
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  if (curl_easy_perform(e) == CURLE_OK) {
    char *loc = NULL;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    if (curl_easy_getinfo(e, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc)
      r->location = strdup(loc);
  }
  memset(line, 0, sizeof(line));
  curl_slist_free_all(h);
  curl_easy_cleanup(e);
  return status;
}

static void set_err(acp_http_oauth *o, const char *what, const char *url) {
  if (url)
    snprintf(o->err, sizeof(o->err), "%s (%s)", what, url);
  else
    snprintf(o->err, sizeof(o->err), "%s", what);
}

static void sfree(char **p) {
  if (*p) {
    memset(*p, 0, strlen(*p)); /* secrets do not linger in freed memory */
    free(*p);
    *p = NULL;
  }
}

static int set_str(char **slot, const char *v) {
  char *c = NULL;
  if (v != NULL && (c = strdup(v)) == NULL)
    return ACP_ERR_NOMEM;
  sfree(slot);
  *slot = c;
  return 0;
}

int acp_http_oauth_new(acp_http_oauth **out, const char *mcp_url) {
  acp_http_oauth *o;
  char *origin;
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  origin = acp__oauth_origin(mcp_url);
  if (origin == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  free(origin);
  o = calloc(1, sizeof(*o));
  if (o == NULL || (o->mcp_url = strdup(mcp_url)) == NULL ||
      (o->redirect_uri = strdup("http://127.0.0.1/callback")) == NULL) {
    acp_http_oauth_free(o);
    return ACP_ERR_NOMEM;
  }
  *out = o;
  return 0;
}

void acp_http_oauth_free(acp_http_oauth *o) {
  if (o == NULL)
    return;
  sfree(&o->mcp_url);
  sfree(&o->redirect_uri);
  sfree(&o->cfg_client_id);
  sfree(&o->cfg_client_secret);
  sfree(&o->cimd_url);
  sfree(&o->issuer);
  sfree(&o->client_id);
  sfree(&o->client_secret);
  sfree(&o->token_endpoint);
  sfree(&o->resource);
  sfree(&o->access_token);
  sfree(&o->refresh_token);
  sfree(&o->scope);
  free(o);
}

int acp_http_oauth_set_client(acp_http_oauth *o, const char *client_id,
                              const char *client_secret) {
  if (o == NULL || client_id == NULL || client_id[0] == '\0')
    return ACP_ERR_INVALID_ARGUMENT;
  if (set_str(&o->cfg_client_id, client_id) != 0 ||
      set_str(&o->cfg_client_secret, client_secret) != 0)
    return ACP_ERR_NOMEM;
  return 0;
}

int acp_http_oauth_set_metadata_url(acp_http_oauth *o, const char *url) {
  char *origin = acp__oauth_origin(url);
  if (o == NULL || origin == NULL || strncmp(url, "https://", 8) != 0) {
    free(origin);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  free(origin);
  return set_str(&o->cimd_url, url);
}

int acp_http_oauth_set_redirect_uri(acp_http_oauth *o, const char *uri) {
  char *origin = acp__oauth_origin(uri);
  if (o == NULL || origin == NULL) {
    free(origin);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  free(origin);
  return set_str(&o->redirect_uri, uri);
}

void acp_http_oauth_set_open_cb(acp_http_oauth *o, acp_http_oauth_open_cb cb,
                                void *user_data) {
  if (o == NULL)
    return;
  o->open_cb = cb;
  o->open_ud = user_data;
}

const char *acp_http_oauth_error(const acp_http_oauth *o) {
  return o ? o->err : "";
}

const char *acp_http_oauth_token(acp_http_oauth *o) {
  if (o == NULL || o->access_token == NULL)
    return NULL;
  /* Refresh a token about to expire (or expired) when we can. */
  if (o->expires_at != 0 && time(NULL) + 30 >= o->expires_at &&
      o->refresh_token != NULL)
    acp_http_oauth_refresh(o);
  return o->access_token;
}

/* Fetch and parse the first protected resource metadata that answers. */
static int discover_prm(acp_http_oauth *o, const char *rm,
                        acp__oauth_prm *prm) {
  char *urls[ACP__OAUTH_MAX_URLS] = {0};
  size_t n = 0, i;
  int rv = ACP_ERR_NOT_FOUND;
  if (acp__oauth_prm_urls(o->mcp_url, rm, urls, &n) != 0)
    return ACP_ERR_NOMEM;
  for (i = 0; i < n && rv == ACP_ERR_NOT_FOUND; i++) {
    resp r;
    long st = http_do(urls[i], NULL, NULL, 0, NULL, &r);
    if (st == 200) {
      rv = acp__oauth_parse_prm(r.data, r.len, prm);
      if (rv != 0)
        set_err(o, "malformed protected resource metadata", urls[i]);
    }
    resp_free(&r);
  }
  for (i = 0; i < n; i++)
    free(urls[i]);
  return rv;
}

/* `strict`: the metadata must name `issuer` (RFC 8414 section 3.3). A
 * 2025-03-26 server without resource metadata has no recorded issuer to
 * compare with: its metadata is found from its own origin. */
static int discover_as(acp_http_oauth *o, const char *issuer, acp__oauth_as *as,
                       bool strict) {
  char *urls[ACP__OAUTH_MAX_URLS] = {0};
  size_t n = 0, i;
  int rv = ACP_ERR_NOT_FOUND;
  if (acp__oauth_as_urls(issuer, urls, &n) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  for (i = 0; i < n && rv == ACP_ERR_NOT_FOUND; i++) {
    resp r;
    long st = http_do(urls[i], NULL, NULL, 0, NULL, &r);
    if (st == 200) {
      rv = acp__oauth_parse_as(r.data, r.len, as);
      if (rv != 0) {
        set_err(o, "malformed authorization server metadata", urls[i]);
      } else if (strict && strcmp(as->issuer, issuer) != 0) {
        set_err(o, "authorization server metadata names another issuer",
                urls[i]);
        acp__oauth_as_free(as);
        rv = ACP_ERR_PROTOCOL;
      }
    }
    resp_free(&r);
  }
  for (i = 0; i < n; i++)
    free(urls[i]);
  return rv;
}

/* Dynamic client registration (RFC 7591). */
static int register_client(acp_http_oauth *o, const acp__oauth_as *as) {
  acp_json_writer *w = NULL;
  acp_json_doc *doc = NULL;
  const char *body;
  size_t blen;
  resp r;
  long st;
  int rv = ACP_ERR_PROTOCOL;
  bool loopback = strncmp(o->redirect_uri, "http://127.0.0.1", 16) == 0 ||
                  strncmp(o->redirect_uri, "http://localhost", 16) == 0;

  if (as->registration_endpoint == NULL) {
    set_err(o,
            "no client id and the authorization server offers neither "
            "client id metadata documents nor registration",
            NULL);
    return ACP_ERR_UNSUPPORTED;
  }
  if (acp_json_writer_new(&w, 0, NULL) != 0)
    return ACP_ERR_NOMEM;
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "client_name");
  acp_json_write_strz(w, "libacp");
  acp_json_write_keyz(w, "redirect_uris");
  acp_json_write_arr_begin(w);
  acp_json_write_strz(w, o->redirect_uri);
  acp_json_write_arr_end(w);
  acp_json_write_keyz(w, "grant_types");
  acp_json_write_arr_begin(w);
  acp_json_write_strz(w, "authorization_code");
  acp_json_write_strz(w, "refresh_token");
  acp_json_write_arr_end(w);
  acp_json_write_keyz(w, "response_types");
  acp_json_write_arr_begin(w);
  acp_json_write_strz(w, "code");
  acp_json_write_arr_end(w);
  acp_json_write_keyz(w, "token_endpoint_auth_method");
  acp_json_write_strz(w, "none");
  /* A loopback redirect is a native application's (OIDC Registration). */
  acp_json_write_keyz(w, "application_type");
  acp_json_write_strz(w, loopback ? "native" : "web");
  acp_json_write_obj_end(w);
  body = acp_json_writer_data(w, &blen);
  st = http_do(as->registration_endpoint, "application/json", body, blen, NULL,
               &r);
  acp_json_writer_free(w);
  if ((st == 200 || st == 201) && acp_json_doc_new(&doc, NULL) == 0 &&
      acp_json_doc_parse(doc, r.data ? r.data : "", r.len, NULL) == 0) {
    const acp_json_val *root = acp_json_doc_root(doc);
    const acp_json_val *id = acp_json_obj_getz(root, "client_id");
    const acp_json_val *sec = acp_json_obj_getz(root, "client_secret");
    const acp_json_val *m =
        acp_json_obj_getz(root, "token_endpoint_auth_method");
    const char *s;
    size_t n;
    if (id && acp_json_type_of(id) == ACP_JSON_STRING &&
        acp_json_doc_str(doc, id, &s, &n) == 0 && n > 0) {
      sfree(&o->client_id);
      o->client_id = strndup(s, n);
      sfree(&o->client_secret);
      if (sec && acp_json_type_of(sec) == ACP_JSON_STRING &&
          acp_json_doc_str(doc, sec, &s, &n) == 0 && n > 0)
        o->client_secret = strndup(s, n);
      o->auth = o->client_secret ? ACP__OAUTH_AUTH_BASIC : ACP__OAUTH_AUTH_NONE;
      if (o->client_secret && m && ACP_JSON_STR_EQ_LIT(m, "client_secret_post"))
        o->auth = ACP__OAUTH_AUTH_POST;
      else if (o->client_secret && m && ACP_JSON_STR_EQ_LIT(m, "none"))
        o->auth = ACP__OAUTH_AUTH_NONE;
      rv = o->client_id ? 0 : ACP_ERR_NOMEM;
    }
  }
  if (rv != 0 && o->err[0] == '\0')
    set_err(o, "client registration failed", as->registration_endpoint);
  acp_json_doc_free(doc);
  resp_free(&r);
  return rv;
}

/* The token endpoint auth method for a configured secret. */
static acp__oauth_auth pick_auth(const acp__oauth_as *as, const char *secret) {
  if (secret == NULL)
    return ACP__OAUTH_AUTH_NONE;
  if (!as->auth_methods_listed || as->auth_basic)
    return ACP__OAUTH_AUTH_BASIC;
  if (as->auth_post)
    return ACP__OAUTH_AUTH_POST;
  return as->auth_none ? ACP__OAUTH_AUTH_NONE : ACP__OAUTH_AUTH_BASIC;
}

static int token_call(acp_http_oauth *o, const char *body, const char *authz) {
  resp r;
  acp__oauth_token t;
  long st = http_do(o->token_endpoint, "application/x-www-form-urlencoded",
                    body, strlen(body), authz, &r);
  int rv;
  if (st != 200) {
    set_err(o, "the token endpoint refused the request", o->token_endpoint);
    resp_free(&r);
    return ACP_ERR_PROTOCOL;
  }
  rv = acp__oauth_parse_token(r.data, r.len, &t);
  resp_free(&r);
  if (rv != 0) {
    set_err(o, "malformed token response", o->token_endpoint);
    return rv;
  }
  sfree(&o->access_token);
  o->access_token = t.access_token;
  t.access_token = NULL;
  if (t.refresh_token) {
    sfree(&o->refresh_token);
    o->refresh_token = t.refresh_token;
    t.refresh_token = NULL;
  }
  o->expires_at = t.expires_in > 0 ? time(NULL) + t.expires_in : 0;
  acp__oauth_token_free(&t);
  return 0;
}

int acp_http_oauth_refresh(acp_http_oauth *o) {
  char *body = NULL, *authz = NULL;
  int rv;
  if (o == NULL || o->refresh_token == NULL || o->token_endpoint == NULL)
    return ACP_ERR_INVALID_STATE;
  rv = acp__oauth_token_request(
      "refresh_token", NULL, NULL, NULL, o->refresh_token, o->resource, NULL,
      o->client_id, o->client_secret, o->auth, &body, &authz);
  if (rv == 0)
    rv = token_call(o, body, authz);
  sfree(&body);
  sfree(&authz);
  if (rv != 0)
    sfree(&o->refresh_token); /* do not retry a refused one */
  return rv;
}

/* Forget everything bound to the previous authorization server. */
static void switch_issuer(acp_http_oauth *o, const char *issuer) {
  if (o->issuer != NULL && strcmp(o->issuer, issuer) == 0)
    return;
  sfree(&o->client_id);
  sfree(&o->client_secret);
  sfree(&o->access_token);
  sfree(&o->refresh_token);
  sfree(&o->token_endpoint);
  set_str(&o->issuer, issuer);
}

static int random_b64(char *out, size_t nbytes) {
  uint8_t b[32];
  size_t got = 0;
  while (got < nbytes) {
    ssize_t k = getrandom(b + got, nbytes - got, 0);
    if (k <= 0)
      return ACP_ERR_SYSTEM;
    got += (size_t)k;
  }
  acp__oauth_b64url(b, nbytes, out);
  return 0;
}

int acp_http_oauth_authorize(acp_http_oauth *o, long status,
                             const char *www_authenticate, int flags) {
  acp__oauth_challenge ch;
  acp__oauth_prm prm;
  acp__oauth_as as;
  char *origin = NULL, *scope = NULL, *url = NULL, *redirect = NULL;
  char *code = NULL, *body = NULL, *authz = NULL;
  char verifier[44], challenge[44], state[44];
  const char *issuer, *why;
  bool have_prm = false, have_as = false;
  uint8_t rnd[32];
  int rv;

  if (o == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  o->err[0] = '\0';
  memset(&prm, 0, sizeof(prm));
  memset(&as, 0, sizeof(as));
  if (acp__oauth_parse_challenge(www_authenticate ? www_authenticate : "",
                                 &ch) != 0)
    memset(&ch, 0, sizeof(ch));
  if (status == 403) {
    if (ch.error == NULL || strcmp(ch.error, "insufficient_scope") != 0) {
      set_err(o, "403 without insufficient_scope: not an authorization matter",
              NULL);
      rv = ACP_ERR_PROTOCOL;
      goto done;
    }
    if (++o->step_ups > OAUTH_MAX_STEP_UP) {
      set_err(o, "scope step-up retry limit reached", NULL);
      rv = ACP_ERR_LIMIT;
      goto done;
    }
  }
  rv = discover_prm(o, ch.resource_metadata, &prm);
  if (rv == 0) {
    have_prm = true;
    if (!acp__oauth_resource_matches(prm.resource, o->mcp_url)) {
      set_err(o, "protected resource metadata names another resource",
              prm.resource);
      rv = ACP_ERR_PROTOCOL;
      goto done;
    }
    issuer = prm.authorization_server;
  } else if (rv == ACP_ERR_NOT_FOUND) {
    /* MCP 2025-03-26: no resource metadata, the server's origin is the
     * authorization server. */
    origin = acp__oauth_origin(o->mcp_url);
    issuer = origin;
  } else {
    goto done;
  }
  rv = discover_as(o, issuer, &as, have_prm);
  if (rv == 0) {
    have_as = true;
  } else if (rv == ACP_ERR_NOT_FOUND && !have_prm) {
    /* MCP 2025-03-26 default endpoints (no metadata at all). */
    as.issuer = strdup(issuer);
    if (asprintf(&as.authorization_endpoint, "%s/authorize", origin) < 0 ||
        asprintf(&as.token_endpoint, "%s/token", origin) < 0 ||
        asprintf(&as.registration_endpoint, "%s/register", origin) < 0) {
      rv = ACP_ERR_NOMEM;
      goto done;
    }
    as.s256 = true; /* PKCE is mandatory in that revision */
  } else {
    if (rv == ACP_ERR_NOT_FOUND)
      set_err(o, "no authorization server metadata", issuer);
    goto done;
  }
  if (!as.s256) {
    set_err(o, "the authorization server does not support PKCE S256",
            as.issuer);
    rv = ACP_ERR_UNSUPPORTED;
    goto done;
  }
  switch_issuer(o, as.issuer);
  set_str(&o->token_endpoint, as.token_endpoint);
  set_str(&o->resource, have_prm ? prm.resource : NULL);
  if (o->client_id == NULL) {
    if (o->cfg_client_id != NULL) {
      set_str(&o->client_id, o->cfg_client_id);
      set_str(&o->client_secret, o->cfg_client_secret);
      o->auth = pick_auth(&as, o->client_secret);
    } else if (as.cimd && o->cimd_url != NULL) {
      set_str(&o->client_id, o->cimd_url);
      o->auth = ACP__OAUTH_AUTH_NONE;
    } else if ((rv = register_client(o, &as)) != 0) {
      goto done;
    }
  }
  if (flags & ACP_HTTP_OAUTH_CLIENT_CREDENTIALS) {
    scope = acp__oauth_select_scope(ch.scope, prm.scopes_supported, NULL);
    rv = acp__oauth_token_request("client_credentials", NULL, NULL, NULL, NULL,
                                  o->resource, scope, o->client_id,
                                  o->client_secret, o->auth, &body, &authz);
    if (rv == 0)
      rv = token_call(o, body, authz);
    goto done;
  }
  if (o->open_cb == NULL) {
    set_err(o, "no callback to open the authorization URL", NULL);
    rv = ACP_ERR_INVALID_STATE;
    goto done;
  }
  scope = acp__oauth_select_scope(ch.scope, prm.scopes_supported,
                                  as.refresh_ok ? as.scopes_supported : NULL);
  if (status == 403 && o->scope != NULL) {
    /* Step-up asks for what was granted before plus the challenge's
     * scope, so the new token does not lose earlier rights (SEP-2350). */
    char *u = acp__oauth_scope_union(o->scope, scope);
    if (u == NULL) {
      rv = ACP_ERR_NOMEM;
      goto done;
    }
    free(scope);
    scope = u;
  }
  set_str(&o->scope, scope);
  if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd) ||
      random_b64(state, 24) != 0) {
    rv = ACP_ERR_SYSTEM;
    goto done;
  }
  acp__oauth_pkce(rnd, verifier, challenge);
  url = acp__oauth_authorize_url(as.authorization_endpoint, o->client_id,
                                 o->redirect_uri, challenge, state, o->resource,
                                 scope);
  if (url == NULL) {
    rv = ACP_ERR_NOMEM;
    goto done;
  }
  rv = o->open_cb(o, url, &redirect, o->open_ud);
  if (rv != 0 || redirect == NULL) {
    set_err(o, "the application did not complete the authorization", NULL);
    rv = rv ? rv : ACP_ERR_CANCELLED;
    goto done;
  }
  rv = acp__oauth_parse_redirect(redirect, state, have_as ? as.issuer : NULL,
                                 have_as && as.iss_param, &code, &why);
  if (rv != 0) {
    set_err(o, why, NULL);
    goto done;
  }
  rv = acp__oauth_token_request(
      "authorization_code", code, verifier, o->redirect_uri, NULL, o->resource,
      NULL, o->client_id, o->client_secret, o->auth, &body, &authz);
  if (rv == 0)
    rv = token_call(o, body, authz);
done:
  memset(verifier, 0, sizeof(verifier));
  acp__oauth_challenge_free(&ch);
  acp__oauth_prm_free(&prm);
  acp__oauth_as_free(&as);
  free(origin);
  free(scope);
  free(url);
  sfree(&redirect);
  sfree(&code);
  sfree(&body);
  sfree(&authz);
  return rv;
}

int acp_http_oauth_fetch_redirect(const char *url, char **location) {
  resp r;
  long st;
  if (url == NULL || location == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *location = NULL;
  st = http_do(url, NULL, NULL, 0, NULL, &r);
  if (st >= 300 && st < 400 && r.location != NULL) {
    *location = r.location;
    r.location = NULL;
  }
  resp_free(&r);
  return *location ? 0 : ACP_ERR_PROTOCOL;
}

/* MARK: - Saving and restoring (acp mcp login) */

static void put_str(acp_json_writer *w, const char *k, const char *v) {
  if (v == NULL)
    return;
  acp_json_write_keyz(w, k);
  acp_json_write_strz(w, v);
}

int acp_http_oauth_export(acp_http_oauth *o, char **json) {
  acp_json_writer *w = NULL;
  const char *d;
  size_t n;
  if (o == NULL || json == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *json = NULL;
  if (o->access_token == NULL || o->issuer == NULL)
    return ACP_ERR_INVALID_STATE;
  if (acp_json_writer_new(&w, 0, NULL) != 0)
    return ACP_ERR_NOMEM;
  acp_json_write_obj_begin(w);
  put_str(w, "mcp_url", o->mcp_url);
  put_str(w, "issuer", o->issuer);
  put_str(w, "resource", o->resource);
  put_str(w, "token_endpoint", o->token_endpoint);
  put_str(w, "client_id", o->client_id);
  put_str(w, "client_secret", o->client_secret);
  acp_json_write_keyz(w, "token_endpoint_auth");
  acp_json_write_int(w, (int64_t)o->auth);
  put_str(w, "access_token", o->access_token);
  put_str(w, "refresh_token", o->refresh_token);
  put_str(w, "scope", o->scope);
  acp_json_write_keyz(w, "expires_at");
  acp_json_write_int(w, (int64_t)o->expires_at);
  acp_json_write_obj_end(w);
  d = acp_json_writer_data(w, &n);
  if (acp_json_writer_error(w) == 0 && d != NULL)
    *json = strndup(d, n);
  acp_json_writer_free(w);
  return *json ? 0 : ACP_ERR_NOMEM;
}

/* A string member as a malloc'ed copy (NULL when absent); false when it is
 * not a string or cannot be copied. */
static bool get_str(acp_json_doc *doc, const acp_json_val *root, const char *k,
                    char **out) {
  const acp_json_val *v = acp_json_obj_getz(root, k);
  const char *s;
  size_t n;
  *out = NULL;
  if (v == NULL)
    return true;
  if (acp_json_type_of(v) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, v, &s, &n) != 0 || memchr(s, '\0', n) != NULL)
    return false;
  *out = strndup(s, n);
  return *out != NULL;
}

int acp_http_oauth_import(acp_http_oauth *o, const char *json, size_t len) {
  acp_json_doc *doc = NULL;
  const acp_json_val *root;
  char *s[9] = {0};
  static const char *const keys[9] = {
      "mcp_url",        "issuer",        "resource",
      "token_endpoint", "client_id",     "client_secret",
      "access_token",   "refresh_token", "scope"};
  int64_t auth = 0, exp = 0;
  size_t i;
  int rv = 0;
  if (o == NULL || json == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (acp_json_doc_new(&doc, NULL) != 0)
    return ACP_ERR_NOMEM;
  if (acp_json_doc_parse(doc, json, len, NULL) != 0 ||
      acp_json_type_of(root = acp_json_doc_root(doc)) != ACP_JSON_OBJECT) {
    acp_json_doc_free(doc);
    return ACP_ERR_PARSE;
  }
  for (i = 0; i < 9 && rv == 0; i++)
    if (!get_str(doc, root, keys[i], &s[i]))
      rv = ACP_ERR_PARSE;
  if (rv == 0 &&
      (acp_json_get_int64(acp_json_obj_getz(root, "token_endpoint_auth"),
                          &auth) != 0 ||
       acp_json_get_int64(acp_json_obj_getz(root, "expires_at"), &exp) != 0 ||
       auth < 0 || auth > ACP__OAUTH_AUTH_POST))
    rv = ACP_ERR_PARSE;
  /* The state must be this server's, complete and well formed. */
  if (rv == 0 && (s[0] == NULL || strcmp(s[0], o->mcp_url) != 0 ||
                  s[1] == NULL || s[3] == NULL || s[6] == NULL))
    rv = ACP_ERR_PARSE;
  acp_json_doc_free(doc);
  if (rv != 0) {
    for (i = 0; i < 9; i++)
      sfree(&s[i]);
    return rv;
  }
  sfree(&s[0]);
  sfree(&o->issuer);
  o->issuer = s[1];
  sfree(&o->resource);
  o->resource = s[2];
  sfree(&o->token_endpoint);
  o->token_endpoint = s[3];
  sfree(&o->client_id);
  o->client_id = s[4];
  sfree(&o->client_secret);
  o->client_secret = s[5];
  sfree(&o->access_token);
  o->access_token = s[6];
  sfree(&o->refresh_token);
  o->refresh_token = s[7];
  sfree(&o->scope);
  o->scope = s[8];
  o->auth = (acp__oauth_auth)auth;
  o->expires_at = (time_t)exp;
  return 0;
}

const char *acp_http_oauth_issuer(const acp_http_oauth *o) {
  return o ? o->issuer : NULL;
}
