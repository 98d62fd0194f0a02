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
#include "jws.h"
#include "oauth.h"

/* Metadata and token answers larger than this are refused. */
#define OAUTH_MAX_BODY (256 * 1024)
#define OAUTH_TIMEOUT_S 20L
/* Step-up authorizations (403 insufficient_scope) allowed per instance. */
#define OAUTH_MAX_STEP_UP 2
/* Lifetime of a private_key_jwt client assertion (RFC 7523 section 3:
 * short, one use). */
#define OAUTH_ASSERTION_LIFETIME_S 300

#define GRANT_JWT_BEARER "urn:ietf:params:oauth:grant-type:jwt-bearer"
#define GRANT_TOKEN_EXCHANGE "urn:ietf:params:oauth:grant-type:token-exchange"
#define TOKEN_TYPE_ID_JAG "urn:ietf:params:oauth:token-type:id-jag"
#define TOKEN_TYPE_ID_TOKEN "urn:ietf:params:oauth:token-type:id_token"

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
  /* private_key_jwt: the client's signing key (acp_http_oauth_set_client_key)
   */
  acp__jws_key *client_key;
  /* DPoP (RFC 9449): the proof key, whether the current token is bound to
   * it, whether the token endpoint takes proofs, the servers' nonces. */
  acp__jws_key *dpop_key;
  bool token_dpop;
  bool as_dpop;
  char *as_nonce;
  char *rs_nonce;
  /* JWT bearer grant (RFC 7523 section 2.1): an external assertion. */
  char *assertion;
  /* Enterprise-managed authorization (SEP-990): the IdP side. */
  char *idp_token_endpoint;
  char *idp_id_token;
  char *idp_client_id;
  char *idp_client_secret;
  char err[256];
};

typedef struct resp {
  char *data;
  size_t len;
  bool over;
  char *location;
  char *dpop_nonce; /* the DPoP-Nonce answer header, or NULL */
} resp;

static size_t on_hdr(char *p, size_t sz, size_t n, void *ud) {
  resp *r = ud;
  size_t len = sz * n, a = 11, b = len;
  if (len > 11 && strncasecmp(p, "dpop-nonce:", 11) == 0) {
    while (a < b && (p[a] == ' ' || p[a] == '\t'))
      a++;
    while (b > a && (p[b - 1] == '\r' || p[b - 1] == '\n' || p[b - 1] == ' '))
      b--;
    free(r->dpop_nonce);
    r->dpop_nonce = b > a ? strndup(p + a, b - a) : NULL;
  }
  return len;
}

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
  free(r->dpop_nonce);
  memset(r, 0, sizeof(*r));
}

/* One request; body NULL: GET. `dpop`: a DPoP proof header value, or
 * NULL. Returns the status (0 on transport error). */
static long http_do(const char *url, const char *ctype, const char *body,
                    size_t blen, const char *authz, const char *dpop, resp *r) {
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
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_hdr);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
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
  if (dpop != NULL && strlen(dpop) < sizeof(line) - 16) {
    snprintf(line, sizeof(line), "DPoP: %s", dpop);
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

static int dpop_proof(acp_http_oauth *o, const char *htm, const char *htu,
                      const char *access_token, const char *nonce, char **out);

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
  sfree(&o->as_nonce);
  sfree(&o->rs_nonce);
  sfree(&o->assertion);
  sfree(&o->idp_token_endpoint);
  sfree(&o->idp_id_token);
  sfree(&o->idp_client_id);
  sfree(&o->idp_client_secret);
  acp__jws_key_free(o->client_key);
  acp__jws_key_free(o->dpop_key);
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

int acp_http_oauth_set_client_key(acp_http_oauth *o, const char *pem,
                                  size_t len, const char *alg) {
  acp__jws_key *k = NULL;
  const char *why = NULL;
  int rv;
  if (o == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  o->err[0] = '\0';
  rv = acp__jws_key_from_pem(pem, len, alg, &k, &why);
  if (rv != 0) {
    set_err(o, why ? why : "cannot load the client key", NULL);
    return rv;
  }
  acp__jws_key_free(o->client_key);
  o->client_key = k;
  return 0;
}

int acp_http_oauth_set_dpop(acp_http_oauth *o, int on) {
  if (o == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!on) {
    acp__jws_key_free(o->dpop_key);
    o->dpop_key = NULL;
    return 0;
  }
  if (o->dpop_key != NULL)
    return 0;
  /* One key per object: the tokens it gets are bound to it (cnf.jkt). */
  return acp__jws_key_generate_es256(&o->dpop_key);
}

int acp_http_oauth_set_dpop_nonce(acp_http_oauth *o, const char *nonce) {
  const char *c;
  if (o == NULL || nonce == NULL || nonce[0] == '\0')
    return ACP_ERR_INVALID_ARGUMENT;
  /* RFC 9449 section 8.1: nonce = 1*NQCHAR (printable ASCII, no '"' and
   * no '\'). */
  for (c = nonce; *c; c++)
    if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e || *c == '"' ||
        *c == '\\')
      return ACP_ERR_INVALID_ARGUMENT;
  return set_str(&o->rs_nonce, nonce);
}

int acp_http_oauth_set_assertion(acp_http_oauth *o, const char *jwt) {
  if (o == NULL || jwt == NULL || jwt[0] == '\0')
    return ACP_ERR_INVALID_ARGUMENT;
  return set_str(&o->assertion, jwt);
}

int acp_http_oauth_set_idp(acp_http_oauth *o, const char *token_endpoint,
                           const char *id_token, const char *client_id,
                           const char *client_secret) {
  char *origin = acp__oauth_origin(token_endpoint);
  if (o == NULL || origin == NULL || id_token == NULL || id_token[0] == '\0' ||
      (client_secret != NULL && client_id == NULL)) {
    free(origin);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  free(origin);
  if (set_str(&o->idp_token_endpoint, token_endpoint) != 0 ||
      set_str(&o->idp_id_token, id_token) != 0 ||
      set_str(&o->idp_client_id, client_id) != 0 ||
      set_str(&o->idp_client_secret, client_secret) != 0)
    return ACP_ERR_NOMEM;
  return 0;
}

const char *acp_http_oauth_token_type(const acp_http_oauth *o) {
  if (o == NULL || o->access_token == NULL)
    return NULL;
  return o->token_dpop ? "DPoP" : "Bearer";
}

/* Same origin (scheme, host, port): where the token may go. */
static bool same_origin(const char *a, const char *b) {
  char *x = acp__oauth_origin(a), *y = acp__oauth_origin(b);
  bool same = x != NULL && y != NULL && strcasecmp(x, y) == 0;
  free(x);
  free(y);
  return same;
}

int acp_http_oauth_request_headers(acp_http_oauth *o, const char *method,
                                   const char *url, char **authorization,
                                   char **dpop) {
  const char *tok;
  char *proof = NULL, *a = NULL;
  int rv = 0;
  if (authorization)
    *authorization = NULL;
  if (dpop)
    *dpop = NULL;
  if (o == NULL || method == NULL || url == NULL || authorization == NULL ||
      dpop == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  /* The token goes to the MCP server's origin only. */
  if (!same_origin(url, o->mcp_url))
    return ACP_ERR_INVALID_ARGUMENT;
  tok = acp_http_oauth_token(o);
  if (tok == NULL)
    return ACP_ERR_INVALID_STATE;
  if (o->token_dpop) {
    if (o->dpop_key == NULL)
      return ACP_ERR_INVALID_STATE;
    rv = dpop_proof(o, method, url, tok, o->rs_nonce, &proof);
    if (rv != 0)
      return rv;
  }
  if (asprintf(&a, "%s %s", o->token_dpop ? "DPoP" : "Bearer", tok) < 0) {
    sfree(&proof);
    return ACP_ERR_NOMEM;
  }
  *authorization = a;
  *dpop = proof;
  return 0;
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
    long st = http_do(urls[i], NULL, NULL, 0, NULL, NULL, &r);
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
    long st = http_do(urls[i], NULL, NULL, 0, NULL, NULL, &r);
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
               NULL, &r);
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

/* The token endpoint auth method for the configured credentials. */
static acp__oauth_auth pick_auth(const acp_http_oauth *o,
                                 const acp__oauth_as *as, const char *secret) {
  if (o->client_key != NULL && (as->auth_jwt || !as->auth_methods_listed))
    return ACP__OAUTH_AUTH_JWT;
  if (secret == NULL)
    return ACP__OAUTH_AUTH_NONE;
  if (!as->auth_methods_listed || as->auth_basic)
    return ACP__OAUTH_AUTH_BASIC;
  if (as->auth_post)
    return ACP__OAUTH_AUTH_POST;
  return as->auth_none ? ACP__OAUTH_AUTH_NONE : ACP__OAUTH_AUTH_BASIC;
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

/* A signed JWT of `claims` (JSON) under key k, header {"alg","typ"[,"jwk"]}. */
static int sign_jwt(const acp__jws_key *k, const char *typ, bool with_jwk,
                    const char *claims, char **out) {
  char *jwk = NULL, *hdr = NULL;
  int rv = 0;
  *out = NULL;
  if (claims == NULL)
    return ACP_ERR_NOMEM;
  if (with_jwk)
    rv = acp__jws_public_jwk(k, &jwk);
  if (rv == 0 && (hdr = acp__jws_header(acp__jws_key_alg(k), typ, jwk)) == NULL)
    rv = ACP_ERR_NOMEM;
  if (rv == 0)
    rv = acp__jws_sign(k, hdr, claims, out);
  free(jwk);
  free(hdr);
  return rv;
}

/* The client credential for o->auth: the secret, or for private_key_jwt a
 * fresh assertion (RFC 7523 section 3: iss = sub = client id, aud = the
 * issuer, a random jti, five minutes), malloc'ed into *owned. */
static int client_cred(acp_http_oauth *o, const char **cred, char **owned) {
  char jti[44], *claims;
  int rv;
  *owned = NULL;
  *cred = o->client_secret;
  if (o->auth != ACP__OAUTH_AUTH_JWT)
    return 0;
  if (o->client_key == NULL || o->client_id == NULL || o->issuer == NULL)
    return ACP_ERR_INVALID_STATE;
  if (random_b64(jti, 16) != 0)
    return ACP_ERR_SYSTEM;
  claims = acp__jws_assertion_claims(o->client_id, o->issuer, jti,
                                     (int64_t)time(NULL),
                                     OAUTH_ASSERTION_LIFETIME_S);
  rv = sign_jwt(o->client_key, "JWT", false, claims, owned);
  free(claims);
  *cred = *owned;
  if (rv != 0)
    set_err(o, "cannot sign the client assertion", NULL);
  return rv;
}

/* A DPoP proof (RFC 9449 section 4) for `htm` `htu`, bound to
 * `access_token` (NULL at the token endpoint) with `nonce` (or NULL). */
static int dpop_proof(acp_http_oauth *o, const char *htm, const char *htu,
                      const char *access_token, const char *nonce, char **out) {
  char jti[44], *claims;
  int rv;
  *out = NULL;
  if (random_b64(jti, 16) != 0)
    return ACP_ERR_SYSTEM;
  claims = acp__jws_dpop_claims(htm, htu, jti, (int64_t)time(NULL),
                                access_token, nonce);
  rv = sign_jwt(o->dpop_key, "dpop+jwt", true, claims, out);
  free(claims);
  return rv;
}

/* The OAuth `error` code of an error answer ({"error": code}, RFC 6749
 * section 5.2) into out, when it is a short run of the characters the RFC
 * allows (so it is safe to show); else "". */
static void answer_error(const resp *r, char out[64]) {
  acp_json_doc *doc = NULL;
  out[0] = '\0';
  if (r->data != NULL && acp_json_doc_new(&doc, NULL) == 0 &&
      acp_json_doc_parse(doc, r->data, r->len, NULL) == 0) {
    const acp_json_val *e = acp_json_obj_getz(acp_json_doc_root(doc), "error");
    const char *s;
    size_t n, i;
    if (e && acp_json_type_of(e) == ACP_JSON_STRING &&
        acp_json_doc_str(doc, e, &s, &n) == 0 && n > 0 && n < 64) {
      for (i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\')
          break;
      if (i == n) {
        memcpy(out, s, n);
        out[n] = '\0';
      }
    }
  }
  acp_json_doc_free(doc);
}

static bool answer_error_is(const resp *r, const char *code) {
  char e[64];
  answer_error(r, e);
  return strcmp(e, code) == 0;
}

/* POST a token request to `endpoint` and parse the answer into *t. With
 * `dpop`, a proof goes along; a `use_dpop_nonce` answer with a DPoP-Nonce
 * (RFC 9449 section 8) is retried once with that nonce. */
static int post_grant(acp_http_oauth *o, const char *endpoint, const char *body,
                      const char *authz, bool dpop, acp__oauth_token *t) {
  resp r;
  long st = 0;
  int rv = 0, attempt;
  memset(t, 0, sizeof(*t));
  memset(&r, 0, sizeof(r));
  for (attempt = 0; attempt < 2; attempt++) {
    char *proof = NULL;
    if (dpop && (rv = dpop_proof(o, "POST", endpoint, NULL, o->as_nonce,
                                 &proof)) != 0) {
      set_err(o, "cannot sign the DPoP proof", NULL);
      return rv;
    }
    st = http_do(endpoint, "application/x-www-form-urlencoded", body,
                 strlen(body), authz, proof, &r);
    free(proof);
    if (dpop && r.dpop_nonce != NULL) {
      sfree(&o->as_nonce);
      o->as_nonce = r.dpop_nonce;
      r.dpop_nonce = NULL;
      if (st == 400 && attempt == 0 && answer_error_is(&r, "use_dpop_nonce")) {
        resp_free(&r);
        continue;
      }
    }
    break;
  }
  if (st != 200) {
    char e[64], what[128];
    answer_error(&r, e);
    /* The OAuth error code is not a secret and says what to fix
     * (invalid_grant, invalid_scope, unauthorized_client...). */
    snprintf(what, sizeof(what), "the token endpoint refused the request%s%s",
             e[0] ? ": " : "", e);
    set_err(o, what, endpoint);
    resp_free(&r);
    return ACP_ERR_PROTOCOL;
  }
  rv = acp__oauth_parse_token(r.data, r.len, t);
  resp_free(&r);
  if (rv != 0)
    set_err(o, "malformed token response", endpoint);
  return rv;
}

/* A grant at the MCP authorization server's token endpoint: client
 * authentication added, the answer becomes the current token. */
static int grant(acp_http_oauth *o, const char *const *params) {
  const char *cred;
  char *owned = NULL, *body = NULL, *authz = NULL;
  acp__oauth_token t;
  bool dpop = o->dpop_key != NULL && o->as_dpop;
  int rv = client_cred(o, &cred, &owned);
  if (rv == 0)
    rv = acp__oauth_grant_request(params, o->client_id, cred, o->auth, &body,
                                  &authz);
  if (rv == 0)
    rv = post_grant(o, o->token_endpoint, body, authz, dpop, &t);
  sfree(&owned);
  sfree(&body);
  sfree(&authz);
  if (rv != 0)
    return rv;
  /* A DPoP-bound token only when a proof was sent (RFC 9449 section 5);
   * N_A is not an access token. */
  if (t.type == ACP__OAUTH_TOKEN_NA ||
      (t.type == ACP__OAUTH_TOKEN_DPOP && !dpop)) {
    set_err(o, "the token endpoint answered an unexpected token_type",
            o->token_endpoint);
    acp__oauth_token_free(&t);
    return ACP_ERR_PROTOCOL;
  }
  sfree(&o->access_token);
  o->access_token = t.access_token;
  t.access_token = NULL;
  o->token_dpop = t.type == ACP__OAUTH_TOKEN_DPOP;
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
  const char *p[] = {"grant_type", "refresh_token", "refresh_token",
                     NULL,         "resource",      NULL,
                     NULL};
  int rv;
  if (o == NULL || o->refresh_token == NULL || o->token_endpoint == NULL)
    return ACP_ERR_INVALID_STATE;
  p[3] = o->refresh_token;
  p[5] = o->resource;
  rv = grant(o, p);
  if (rv != 0)
    sfree(&o->refresh_token); /* do not retry a refused one */
  return rv;
}

/* SEP-990: exchange the IdP's ID token for an ID-JAG at the IdP (RFC 8693),
 * audience the MCP authorization server, resource the MCP server. The
 * ID-JAG goes to *jag. */
static int exchange_id_jag(acp_http_oauth *o, const char *scope, char **jag) {
  const char *p[] = {"grant_type",
                     GRANT_TOKEN_EXCHANGE,
                     "requested_token_type",
                     TOKEN_TYPE_ID_JAG,
                     "subject_token",
                     o->idp_id_token,
                     "subject_token_type",
                     TOKEN_TYPE_ID_TOKEN,
                     "audience",
                     o->issuer,
                     "resource",
                     o->resource ? o->resource : o->mcp_url,
                     "scope",
                     scope,
                     NULL};
  char *body = NULL, *authz = NULL;
  acp__oauth_token t;
  int rv = acp__oauth_grant_request(p, o->idp_client_id, o->idp_client_secret,
                                    o->idp_client_secret ? ACP__OAUTH_AUTH_BASIC
                                                         : ACP__OAUTH_AUTH_NONE,
                                    &body, &authz);
  *jag = NULL;
  if (rv == 0)
    rv = post_grant(o, o->idp_token_endpoint, body, authz, false, &t);
  sfree(&body);
  sfree(&authz);
  if (rv != 0)
    return rv;
  if (t.issued_token_type == NULL ||
      strcmp(t.issued_token_type, TOKEN_TYPE_ID_JAG) != 0) {
    set_err(o, "the identity provider issued no ID-JAG", o->idp_token_endpoint);
    acp__oauth_token_free(&t);
    return ACP_ERR_PROTOCOL;
  }
  *jag = t.access_token;
  t.access_token = NULL;
  acp__oauth_token_free(&t);
  return 0;
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

int acp_http_oauth_authorize(acp_http_oauth *o, long status,
                             const char *www_authenticate, int flags) {
  acp__oauth_challenge ch;
  acp__oauth_prm prm;
  acp__oauth_as as;
  char *origin = NULL, *scope = NULL, *url = NULL, *redirect = NULL;
  char *code = NULL;
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
  /* DPoP at the token endpoint when the application enabled it and the
   * authorization server takes ES256 proofs (RFC 9449 section 5.1). */
  o->as_dpop = o->dpop_key != NULL && as.dpop_es256;
  if (o->client_id == NULL) {
    if (o->cfg_client_id != NULL) {
      set_str(&o->client_id, o->cfg_client_id);
      set_str(&o->client_secret, o->cfg_client_secret);
      o->auth = pick_auth(o, &as, o->client_secret);
    } else if (flags & (ACP_HTTP_OAUTH_JWT_BEARER | ACP_HTTP_OAUTH_ID_JAG)) {
      /* The assertion grants need no client id of their own. */
      o->auth = ACP__OAUTH_AUTH_NONE;
    } else if (as.cimd && o->cimd_url != NULL) {
      set_str(&o->client_id, o->cimd_url);
      o->auth = ACP__OAUTH_AUTH_NONE;
    } else if ((rv = register_client(o, &as)) != 0) {
      goto done;
    }
  }
  if (flags & (ACP_HTTP_OAUTH_CLIENT_CREDENTIALS | ACP_HTTP_OAUTH_JWT_BEARER |
               ACP_HTTP_OAUTH_ID_JAG)) {
    const char *p[] = {"grant_type", "client_credentials", "assertion", NULL,
                       "resource",   o->resource,          "scope",     NULL,
                       NULL};
    char *jag = NULL;
    scope = acp__oauth_select_scope(ch.scope, prm.scopes_supported, NULL);
    p[7] = scope;
    if (flags & ACP_HTTP_OAUTH_ID_JAG) {
      if (o->idp_token_endpoint == NULL) {
        set_err(o, "no identity provider set (acp_http_oauth_set_idp)", NULL);
        rv = ACP_ERR_INVALID_STATE;
        goto done;
      }
      if ((rv = exchange_id_jag(o, scope, &jag)) != 0)
        goto done;
      p[1] = GRANT_JWT_BEARER;
      p[3] = jag;
    } else if (flags & ACP_HTTP_OAUTH_JWT_BEARER) {
      if (o->assertion == NULL) {
        set_err(o, "no assertion set (acp_http_oauth_set_assertion)", NULL);
        rv = ACP_ERR_INVALID_STATE;
        goto done;
      }
      p[1] = GRANT_JWT_BEARER;
      p[3] = o->assertion;
    } else if (o->client_id == NULL) {
      set_err(o, "the client credentials grant needs a client id", NULL);
      rv = ACP_ERR_INVALID_STATE;
      goto done;
    }
    rv = grant(o, p);
    sfree(&jag);
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
  {
    const char *p[] = {"grant_type",
                       "authorization_code",
                       "code",
                       code,
                       "code_verifier",
                       verifier,
                       "redirect_uri",
                       o->redirect_uri,
                       "resource",
                       o->resource,
                       NULL};
    rv = grant(o, p);
  }
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
  return rv;
}

int acp_http_oauth_fetch_redirect(const char *url, char **location) {
  resp r;
  long st;
  if (url == NULL || location == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *location = NULL;
  st = http_do(url, NULL, NULL, 0, NULL, NULL, &r);
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
