/*
 * The sans-I/O OAuth 2.1 core of the MCP authorization client (see
 * oauth.h). Pure string work: parsing challenges and metadata, building
 * discovery URLs, PKCE, authorization and token requests.
 */
#include "oauth.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "acp/common.h"
#include "acp/json.h"
#include "util.h"

static char *xstrndup(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p == NULL)
    return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

/* The default allocator, for acp__buf (the core's strings use malloc). */
static const acp_mem *dflt_mem(void) {
  return acp_mem_default();
}

static char *xstrdup(const char *s) {
  return xstrndup(s, strlen(s));
}

/* printf into a new string. */
static char *xfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xfmt(const char *fmt, ...) {
  va_list ap;
  int n;
  char *p;
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return NULL;
  p = malloc((size_t)n + 1);
  if (p == NULL)
    return NULL;
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

/* MARK: - WWW-Authenticate */

static bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~/", c) != NULL;
}

void acp__oauth_challenge_free(acp__oauth_challenge *c) {
  if (c == NULL)
    return;
  free(c->resource_metadata);
  free(c->scope);
  free(c->error);
  memset(c, 0, sizeof(*c));
}

/*
 * Challenges are "scheme param=value, param="quoted", scheme2 ...". A token
 * followed by a space and then a token that is not followed by '=' starts
 * a new challenge; only the Bearer one's parameters are kept.
 */
int acp__oauth_parse_challenge(const char *hdr, acp__oauth_challenge *out) {
  const char *p = hdr;
  bool in_bearer = false;

  memset(out, 0, sizeof(*out));
  if (hdr == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  for (;;) {
    const char *name;
    size_t nlen;
    char *val = NULL;

    while (*p == ' ' || *p == '\t' || *p == ',')
      p++;
    if (*p == '\0')
      break;
    name = p;
    while (is_tchar(*p))
      p++;
    nlen = (size_t)(p - name);
    if (nlen == 0)
      goto bad;
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p != '=') {
      /* A scheme name. */
      /* RFC 9449 section 7.1: a DPoP challenge carries the same
       * parameters (and error="use_dpop_nonce"). */
      in_bearer = (nlen == 6 && strncasecmp(name, "Bearer", 6) == 0) ||
                  (nlen == 4 && strncasecmp(name, "DPoP", 4) == 0);
      if (in_bearer && nlen == 6)
        out->bearer = true;
      else if (in_bearer)
        out->dpop = true;
      continue;
    }
    p++;
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == '"') {
      char *w;
      p++;
      val = malloc(strlen(p) + 1);
      if (val == NULL) {
        acp__oauth_challenge_free(out);
        return ACP_ERR_NOMEM;
      }
      w = val;
      while (*p != '"') {
        if (*p == '\0') {
          free(val);
          goto bad;
        }
        if (*p == '\\' && p[1] != '\0')
          p++;
        *w++ = *p++;
      }
      *w = '\0';
      p++;
    } else {
      const char *v = p;
      while (*p != '\0' && *p != ',' && *p != ' ' && *p != '\t')
        p++;
      val = xstrndup(v, (size_t)(p - v));
      if (val == NULL) {
        acp__oauth_challenge_free(out);
        return ACP_ERR_NOMEM;
      }
    }
    if (in_bearer) {
      char **slot = NULL;
      if (nlen == 17 && strncasecmp(name, "resource_metadata", 17) == 0)
        slot = &out->resource_metadata;
      else if (nlen == 5 && strncasecmp(name, "scope", 5) == 0)
        slot = &out->scope;
      else if (nlen == 5 && strncasecmp(name, "error", 5) == 0)
        slot = &out->error;
      if (slot != NULL && *slot == NULL) {
        *slot = val;
        val = NULL;
      }
    }
    free(val);
  }
  return 0;
bad:
  acp__oauth_challenge_free(out);
  return ACP_ERR_INVALID_ARGUMENT;
}

/* MARK: - URLs */

/* Split an absolute http(s) URL: length of the origin, and the path (up to
 * '?' or '#', without a trailing '/'). -1 if not http(s). */
static int split_url(const char *url, size_t *origin_len, const char **path,
                     size_t *path_len) {
  const char *a, *e;
  size_t pl;
  if (url == NULL)
    return -1;
  if (strncasecmp(url, "https://", 8) == 0)
    a = url + 8;
  else if (strncasecmp(url, "http://", 7) == 0)
    a = url + 7;
  else
    return -1;
  e = a + strcspn(a, "/?#");
  if (e == a)
    return -1;
  *origin_len = (size_t)(e - url);
  pl = *e == '/' ? strcspn(e, "?#") : 0;
  while (pl > 0 && e[pl - 1] == '/')
    pl--;
  *path = e;
  *path_len = pl;
  return 0;
}

char *acp__oauth_origin(const char *url) {
  size_t ol, pl;
  const char *path;
  if (split_url(url, &ol, &path, &pl) != 0)
    return NULL;
  return xstrndup(url, ol);
}

static void free_urls(char **urls, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    free(urls[i]);
    urls[i] = NULL;
  }
}

int acp__oauth_prm_urls(const char *mcp_url, const char *resource_metadata,
                        char **urls, size_t *n) {
  size_t ol, pl, k = 0;
  const char *path;
  const char *wk = "/.well-known/oauth-protected-resource";

  *n = 0;
  if (split_url(mcp_url, &ol, &path, &pl) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  if (resource_metadata != NULL) {
    size_t rol, rpl;
    const char *rp;
    /* Only an absolute http(s) URL is followed. */
    if (split_url(resource_metadata, &rol, &rp, &rpl) == 0 &&
        (urls[k] = xstrdup(resource_metadata)) != NULL)
      k++;
  }
  if (pl > 0) {
    urls[k] = xfmt("%.*s%s%.*s", (int)ol, mcp_url, wk, (int)pl, path);
    if (urls[k++] == NULL)
      goto nomem;
  }
  urls[k] = xfmt("%.*s%s", (int)ol, mcp_url, wk);
  if (urls[k++] == NULL)
    goto nomem;
  *n = k;
  return 0;
nomem:
  free_urls(urls, k);
  return ACP_ERR_NOMEM;
}

int acp__oauth_as_urls(const char *issuer, char **urls, size_t *n) {
  size_t ol, pl, k = 0;
  const char *path;
  const char *oa = "/.well-known/oauth-authorization-server";
  const char *oid = "/.well-known/openid-configuration";

  *n = 0;
  if (split_url(issuer, &ol, &path, &pl) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  if (pl > 0) {
    urls[k++] = xfmt("%.*s%s%.*s", (int)ol, issuer, oa, (int)pl, path);
    urls[k++] = xfmt("%.*s%s%.*s", (int)ol, issuer, oid, (int)pl, path);
    urls[k++] = xfmt("%.*s%.*s%s", (int)ol, issuer, (int)pl, path, oid);
  } else {
    urls[k++] = xfmt("%.*s%s", (int)ol, issuer, oa);
    urls[k++] = xfmt("%.*s%s", (int)ol, issuer, oid);
  }
  for (size_t i = 0; i < k; i++)
    if (urls[i] == NULL) {
      free_urls(urls, k);
      return ACP_ERR_NOMEM;
    }
  *n = k;
  return 0;
}

bool acp__oauth_resource_matches(const char *resource, const char *mcp_url) {
  size_t rol, rpl, mol, mpl;
  const char *rp, *mp;
  if (split_url(resource, &rol, &rp, &rpl) != 0 ||
      split_url(mcp_url, &mol, &mp, &mpl) != 0)
    return false;
  if (rol != mol || strncasecmp(resource, mcp_url, rol) != 0)
    return false;
  if (rpl > mpl || memcmp(rp, mp, rpl) != 0)
    return false;
  return rpl == mpl || mp[rpl] == '/';
}

/* MARK: - Metadata documents */

static char *json_str(acp_json_doc *doc, const acp_json_val *obj,
                      const char *key) {
  const acp_json_val *v = acp_json_obj_getz(obj, key);
  const char *s;
  size_t n;
  if (v == NULL || acp_json_type_of(v) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, v, &s, &n) != 0 || memchr(s, '\0', n) != NULL)
    return NULL;
  return xstrndup(s, n);
}

/* A string array joined with spaces (NULL when absent or empty). */
static char *json_join(acp_json_doc *doc, const acp_json_val *obj,
                       const char *key) {
  const acp_json_val *arr = acp_json_obj_getz(obj, key);
  const acp_json_val *v;
  acp__buf b;
  char *out = NULL;
  if (arr == NULL || acp_json_type_of(arr) != ACP_JSON_ARRAY)
    return NULL;
  acp__buf_init(&b, dflt_mem(), 0);
  for (v = acp_json_child(arr); v != NULL; v = acp_json_next(v)) {
    const char *s;
    size_t n;
    if (acp_json_type_of(v) != ACP_JSON_STRING ||
        acp_json_doc_str(doc, v, &s, &n) != 0 || n == 0 ||
        memchr(s, ' ', n) != NULL || memchr(s, '\0', n) != NULL)
      continue;
    if ((b.len > 0 && acp__buf_putc(&b, ' ') != 0) ||
        acp__buf_append(&b, s, n) != 0)
      goto done;
  }
  if (b.len > 0)
    out = xstrndup(b.data, b.len);
done:
  acp__buf_dispose(&b);
  return out;
}

/* Whether the space-joined list has the word. */
static bool has_word(const char *list, const char *w) {
  size_t wl = strlen(w);
  const char *p = list;
  if (list == NULL)
    return false;
  while (*p) {
    size_t l = strcspn(p, " ");
    if (l == wl && memcmp(p, w, wl) == 0)
      return true;
    p += l;
    while (*p == ' ')
      p++;
  }
  return false;
}

static int parse_obj(const char *json, size_t len, acp_json_doc **doc,
                     const acp_json_val **root) {
  if (json == NULL || acp_json_doc_new(doc, NULL) != 0)
    return ACP_ERR_NOMEM;
  if (acp_json_doc_parse(*doc, json, len, NULL) != 0 ||
      acp_json_type_of(acp_json_doc_root(*doc)) != ACP_JSON_OBJECT) {
    acp_json_doc_free(*doc);
    *doc = NULL;
    return ACP_ERR_PROTOCOL;
  }
  *root = acp_json_doc_root(*doc);
  return 0;
}

static bool is_http_url(const char *s) {
  size_t ol, pl;
  const char *p;
  return s != NULL && split_url(s, &ol, &p, &pl) == 0;
}

void acp__oauth_prm_free(acp__oauth_prm *p) {
  if (p == NULL)
    return;
  free(p->resource);
  free(p->authorization_server);
  free(p->scopes_supported);
  memset(p, 0, sizeof(*p));
}

int acp__oauth_parse_prm(const char *json, size_t len, acp__oauth_prm *out) {
  acp_json_doc *doc;
  const acp_json_val *root, *as;
  int rv;
  memset(out, 0, sizeof(*out));
  if ((rv = parse_obj(json, len, &doc, &root)) != 0)
    return rv;
  out->resource = json_str(doc, root, "resource");
  as = acp_json_obj_getz(root, "authorization_servers");
  if (as != NULL && acp_json_type_of(as) == ACP_JSON_ARRAY &&
      acp_json_child(as) != NULL &&
      acp_json_type_of(acp_json_child(as)) == ACP_JSON_STRING) {
    const char *s;
    size_t n;
    if (acp_json_doc_str(doc, acp_json_child(as), &s, &n) == 0)
      out->authorization_server = xstrndup(s, n);
  }
  out->scopes_supported = json_join(doc, root, "scopes_supported");
  acp_json_doc_free(doc);
  if (!is_http_url(out->resource) || !is_http_url(out->authorization_server)) {
    acp__oauth_prm_free(out);
    return ACP_ERR_PROTOCOL;
  }
  return 0;
}

void acp__oauth_as_free(acp__oauth_as *a) {
  if (a == NULL)
    return;
  free(a->issuer);
  free(a->authorization_endpoint);
  free(a->token_endpoint);
  free(a->registration_endpoint);
  free(a->scopes_supported);
  free(a->jwks_uri);
  memset(a, 0, sizeof(*a));
}

int acp__oauth_parse_as(const char *json, size_t len, acp__oauth_as *out) {
  acp_json_doc *doc;
  const acp_json_val *root, *v;
  char *l;
  int rv;
  memset(out, 0, sizeof(*out));
  if ((rv = parse_obj(json, len, &doc, &root)) != 0)
    return rv;
  out->issuer = json_str(doc, root, "issuer");
  out->authorization_endpoint = json_str(doc, root, "authorization_endpoint");
  out->token_endpoint = json_str(doc, root, "token_endpoint");
  out->registration_endpoint = json_str(doc, root, "registration_endpoint");
  out->scopes_supported = json_join(doc, root, "scopes_supported");
  out->jwks_uri = json_str(doc, root, "jwks_uri");
  l = json_join(doc, root, "code_challenge_methods_supported");
  out->s256 = has_word(l, "S256");
  free(l);
  l = json_join(doc, root, "token_endpoint_auth_methods_supported");
  out->auth_methods_listed = l != NULL;
  out->auth_none = has_word(l, "none");
  out->auth_basic = has_word(l, "client_secret_basic");
  out->auth_post = has_word(l, "client_secret_post");
  out->auth_jwt = has_word(l, "private_key_jwt");
  free(l);
  l = json_join(doc, root, "grant_types_supported");
  out->refresh_ok = l == NULL || has_word(l, "refresh_token");
  free(l);
  l = json_join(doc, root, "dpop_signing_alg_values_supported");
  out->dpop_es256 = has_word(l, "ES256");
  free(l);
  v = acp_json_obj_getz(root, "client_id_metadata_document_supported");
  out->cimd = v != NULL && acp_json_get_bool(v, &out->cimd) == 0 && out->cimd;
  v = acp_json_obj_getz(root, "authorization_response_iss_parameter_supported");
  out->iss_param =
      v != NULL && acp_json_get_bool(v, &out->iss_param) == 0 && out->iss_param;
  acp_json_doc_free(doc);
  if (!is_http_url(out->issuer) || !is_http_url(out->authorization_endpoint) ||
      !is_http_url(out->token_endpoint) ||
      (out->registration_endpoint != NULL &&
       !is_http_url(out->registration_endpoint))) {
    acp__oauth_as_free(out);
    return ACP_ERR_PROTOCOL;
  }
  return 0;
}

/* MARK: - PKCE, scope */

size_t acp__oauth_b64url(const uint8_t *in, size_t n, char *out) {
  size_t o = acp__b64_encode(out, in, n, ACP__B64_URL);
  out[o] = '\0';
  return o;
}

void acp__oauth_pkce(const uint8_t rnd[32], char verifier[44],
                     char challenge[44]) {
  acp__sha256 s;
  uint8_t h[32];
  acp__oauth_b64url(rnd, 32, verifier);
  acp__sha256_init(&s);
  acp__sha256_update(&s, verifier, 43);
  acp__sha256_final(&s, h);
  acp__oauth_b64url(h, 32, challenge);
}

char *acp__oauth_select_scope(const char *challenge_scope,
                              const char *prm_scopes, const char *as_scopes) {
  const char *base = challenge_scope && challenge_scope[0]
                         ? challenge_scope
                         : (prm_scopes && prm_scopes[0] ? prm_scopes : NULL);
  bool offline = has_word(as_scopes, "offline_access");
  if (base == NULL)
    return NULL;
  if (offline && !has_word(base, "offline_access"))
    return xfmt("%s offline_access", base);
  return xstrdup(base);
}

char *acp__oauth_scope_union(const char *a, const char *b) {
  acp__buf u;
  const char *lists[2] = {a, b};
  char *out;
  int rv = 0;
  acp__buf_init(&u, dflt_mem(), 0);
  for (int k = 0; k < 2; k++) {
    const char *p = lists[k];
    if (p == NULL)
      continue;
    while (*p) {
      size_t l;
      while (*p == ' ')
        p++;
      l = strcspn(p, " ");
      if (l > 0) {
        char *w = xstrndup(p, l);
        char *have = u.len ? xstrndup(u.data, u.len) : NULL;
        if (w == NULL || (u.len && have == NULL))
          rv = ACP_ERR_NOMEM;
        else if (!has_word(have, w)) {
          if (u.len)
            rv |= acp__buf_putc(&u, ' ');
          rv |= acp__buf_append(&u, p, l);
        }
        free(w);
        free(have);
      }
      p += l;
    }
  }
  out = rv == 0 && u.len ? xstrndup(u.data, u.len) : NULL;
  acp__buf_dispose(&u);
  return out;
}

/* MARK: - Requests */

char *acp__oauth_form_enc(const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen(s), o = 0;
  char *out = malloc(n * 3 + 1);
  if (out == NULL)
    return NULL;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      out[o++] = (char)c;
    } else {
      out[o++] = '%';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    }
  }
  out[o] = '\0';
  return out;
}

/* Append "&key=enc(val)" (no '&' first) to b; skipped when val is NULL. */
static int add_param(acp__buf *b, const char *key, const char *val) {
  char *e;
  int rv = 0;
  if (val == NULL)
    return 0;
  e = acp__oauth_form_enc(val);
  if (e == NULL)
    return ACP_ERR_NOMEM;
  if (b->len > 0)
    rv = acp__buf_putc(b, '&');
  if (rv == 0)
    rv = acp__buf_append(b, key, strlen(key));
  if (rv == 0)
    rv = acp__buf_putc(b, '=');
  if (rv == 0)
    rv = acp__buf_append(b, e, strlen(e));
  free(e);
  return rv;
}

static char *buf_take(acp__buf *b) {
  char *s = b->data ? xstrndup(b->data, b->len) : xstrdup("");
  acp__buf_dispose(b);
  return s;
}

char *acp__oauth_authorize_url(const char *endpoint, const char *client_id,
                               const char *redirect_uri, const char *challenge,
                               const char *state, const char *resource,
                               const char *scope) {
  acp__buf q;
  char *qs, *url;
  int rv = 0;
  if (!is_http_url(endpoint) || client_id == NULL || redirect_uri == NULL ||
      challenge == NULL || state == NULL)
    return NULL;
  acp__buf_init(&q, dflt_mem(), 0);
  rv |= add_param(&q, "response_type", "code");
  rv |= add_param(&q, "client_id", client_id);
  rv |= add_param(&q, "redirect_uri", redirect_uri);
  rv |= add_param(&q, "code_challenge", challenge);
  rv |= add_param(&q, "code_challenge_method", "S256");
  rv |= add_param(&q, "state", state);
  rv |= add_param(&q, "resource", resource);
  rv |= add_param(&q, "scope", scope);
  qs = buf_take(&q);
  if (rv != 0 || qs == NULL) {
    free(qs);
    return NULL;
  }
  url = xfmt("%s%c%s", endpoint, strchr(endpoint, '?') ? '&' : '?', qs);
  free(qs);
  return url;
}

/* Percent- and '+'-decode n bytes; NULL on a bad escape or a NUL. */
static char *form_dec(const char *s, size_t n) {
  char *o = malloc(n + 1), *w = o;
  size_t i;
  if (o == NULL)
    return NULL;
  for (i = 0; i < n; i++) {
    if (s[i] == '+') {
      *w++ = ' ';
    } else if (s[i] == '%') {
      int h, l;
      if (i + 2 >= n)
        goto bad;
      h = acp__hexval(s[i + 1]);
      l = acp__hexval(s[i + 2]);
      if (h < 0 || l < 0 || (h == 0 && l == 0))
        goto bad;
      *w++ = (char)(h * 16 + l);
      i += 2;
    } else {
      *w++ = s[i];
    }
  }
  *w = '\0';
  return o;
bad:
  free(o);
  return NULL;
}

int acp__oauth_parse_redirect(const char *url, const char *state,
                              const char *issuer, bool iss_required,
                              char **code, const char **why) {
  const char *q;
  char *c = NULL, *st = NULL, *iss = NULL, *err = NULL;
  int rv = ACP_ERR_PROTOCOL;

  *code = NULL;
  *why = "no query in the redirect";
  if (url == NULL || (q = strchr(url, '?')) == NULL)
    return ACP_ERR_PROTOCOL;
  q++;
  while (*q && *q != '#') {
    size_t l = strcspn(q, "&#");
    const char *eq = memchr(q, '=', l);
    if (eq != NULL) {
      size_t kl = (size_t)(eq - q);
      char **slot = NULL;
      if (kl == 4 && memcmp(q, "code", 4) == 0)
        slot = &c;
      else if (kl == 5 && memcmp(q, "state", 5) == 0)
        slot = &st;
      else if (kl == 3 && memcmp(q, "iss", 3) == 0)
        slot = &iss;
      else if (kl == 5 && memcmp(q, "error", 5) == 0)
        slot = &err;
      if (slot != NULL) {
        if (*slot != NULL) {
          *why = "a parameter is repeated in the redirect";
          goto done;
        }
        *slot = form_dec(eq + 1, l - kl - 1);
        if (*slot == NULL) {
          *why = "bad percent-encoding in the redirect";
          goto done;
        }
      }
    }
    q += l;
    if (*q == '&')
      q++;
  }
  if (st == NULL || state == NULL || strcmp(st, state) != 0) {
    *why = "state mismatch in the redirect";
    goto done;
  }
  if (iss != NULL) {
    if (issuer == NULL || strcmp(iss, issuer) != 0) {
      *why = "iss in the redirect is not the authorization server's issuer";
      goto done;
    }
  } else if (iss_required) {
    *why = "the authorization server promised iss but the redirect lacks it";
    goto done;
  }
  if (err != NULL) {
    *why = "the authorization server answered with an error";
    goto done;
  }
  if (c == NULL || c[0] == '\0') {
    *why = "no code in the redirect";
    goto done;
  }
  *code = c;
  c = NULL;
  *why = NULL;
  rv = 0;
done:
  free(c);
  free(st);
  free(iss);
  free(err);
  return rv;
}

int acp__oauth_grant_request(const char *const *params, const char *client_id,
                             const char *client_secret, acp__oauth_auth auth,
                             char **body, char **authz) {
  acp__buf b;
  int rv = 0;
  size_t i;
  *body = NULL;
  *authz = NULL;
  if (params == NULL || params[0] == NULL ||
      (auth != ACP__OAUTH_AUTH_NONE && client_secret == NULL) ||
      (auth != ACP__OAUTH_AUTH_NONE && client_id == NULL))
    return ACP_ERR_INVALID_ARGUMENT;
  acp__buf_init(&b, dflt_mem(), 0);
  for (i = 0; params[i] != NULL; i += 2)
    rv |= add_param(&b, params[i], params[i + 1]);
  if (auth == ACP__OAUTH_AUTH_BASIC) {
    /* RFC 6749 section 2.3.1: form-encode id and secret, then base64. */
    char *id = acp__oauth_form_enc(client_id);
    char *sec = acp__oauth_form_enc(client_secret);
    char *pair = id && sec ? xfmt("%s:%s", id, sec) : NULL;
    free(id);
    free(sec);
    if (pair != NULL) {
      size_t n = strlen(pair), o = 6;
      char *h = malloc(6 + acp__b64_encoded_len(n, ACP__B64_STD) + 1);
      if (h != NULL) {
        memcpy(h, "Basic ", 6);
        o += acp__b64_encode(h + 6, pair, n, ACP__B64_STD);
        h[o] = '\0';
        *authz = h;
      }
      memset(pair, 0, n);
      free(pair);
    }
    if (*authz == NULL)
      rv = ACP_ERR_NOMEM;
  } else {
    rv |= add_param(&b, "client_id", client_id);
    if (auth == ACP__OAUTH_AUTH_POST)
      rv |= add_param(&b, "client_secret", client_secret);
    if (auth == ACP__OAUTH_AUTH_JWT) {
      /* RFC 7523 section 2.2. */
      rv |= add_param(&b, "client_assertion_type",
                      "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
      rv |= add_param(&b, "client_assertion", client_secret);
    }
  }
  *body = buf_take(&b);
  if (rv != 0 || *body == NULL) {
    free(*body);
    free(*authz);
    *body = NULL;
    *authz = NULL;
    return ACP_ERR_NOMEM;
  }
  return 0;
}

int acp__oauth_token_request(const char *grant, const char *code,
                             const char *verifier, const char *redirect_uri,
                             const char *refresh, const char *resource,
                             const char *scope, const char *client_id,
                             const char *client_secret, acp__oauth_auth auth,
                             char **body, char **authz) {
  const char *p[16];
  size_t n = 0;
  *body = NULL;
  *authz = NULL;
  if (grant == NULL || client_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  p[n++] = "grant_type";
  p[n++] = grant;
  if (strcmp(grant, "authorization_code") == 0) {
    if (code == NULL || verifier == NULL || redirect_uri == NULL)
      return ACP_ERR_INVALID_ARGUMENT;
    p[n++] = "code";
    p[n++] = code;
    p[n++] = "code_verifier";
    p[n++] = verifier;
    p[n++] = "redirect_uri";
    p[n++] = redirect_uri;
  } else if (strcmp(grant, "refresh_token") == 0) {
    if (refresh == NULL)
      return ACP_ERR_INVALID_ARGUMENT;
    p[n++] = "refresh_token";
    p[n++] = refresh;
  }
  p[n++] = "resource";
  p[n++] = resource;
  p[n++] = "scope";
  p[n++] = scope;
  p[n] = NULL;
  return acp__oauth_grant_request(p, client_id, client_secret, auth, body,
                                  authz);
}

void acp__oauth_token_free(acp__oauth_token *t) {
  if (t == NULL)
    return;
  free(t->access_token);
  free(t->refresh_token);
  free(t->scope);
  free(t->issued_token_type);
  memset(t, 0, sizeof(*t));
  t->expires_in = -1;
}

int acp__oauth_parse_token(const char *json, size_t len,
                           acp__oauth_token *out) {
  acp_json_doc *doc;
  const acp_json_val *root, *v;
  char *type;
  int rv;
  memset(out, 0, sizeof(*out));
  out->expires_in = -1;
  if ((rv = parse_obj(json, len, &doc, &root)) != 0)
    return rv;
  out->access_token = json_str(doc, root, "access_token");
  out->refresh_token = json_str(doc, root, "refresh_token");
  out->scope = json_str(doc, root, "scope");
  v = acp_json_obj_getz(root, "expires_in");
  if (v == NULL || acp_json_get_int64(v, &out->expires_in) != 0)
    out->expires_in = -1;
  out->issued_token_type = json_str(doc, root, "issued_token_type");
  type = json_str(doc, root, "token_type");
  acp_json_doc_free(doc);
  rv = 0;
  /* Bearer (RFC 6750), DPoP (RFC 9449 section 5) and N_A (RFC 8693
   * section 2.2.1: a token exchange result that is no access token, the
   * ID-JAG); the caller decides which it accepts. */
  if (type != NULL && strcasecmp(type, "Bearer") == 0)
    out->type = ACP__OAUTH_TOKEN_BEARER;
  else if (type != NULL && strcasecmp(type, "DPoP") == 0)
    out->type = ACP__OAUTH_TOKEN_DPOP;
  else if (type != NULL && strcasecmp(type, "N_A") == 0)
    out->type = ACP__OAUTH_TOKEN_NA;
  if (out->access_token == NULL || out->access_token[0] == '\0' ||
      out->type == ACP__OAUTH_TOKEN_NONE)
    rv = ACP_ERR_PROTOCOL;
  else
    for (const char *p = out->access_token; *p; p++)
      if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
        rv = ACP_ERR_PROTOCOL; /* not header-safe */
  free(type);
  if (rv != 0)
    acp__oauth_token_free(out);
  return rv;
}
