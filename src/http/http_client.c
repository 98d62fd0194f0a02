/*
 * MCP client transport over HTTP: libcurl's multi-socket interface driven by
 * the libuv loop (socket callback -> uv_poll_t per socket, timer callback ->
 * uv_timer_t), carrying one acp_mcp_client (MCP mode) or the caller's raw
 * JSON-RPC messages (raw mode) over Streamable HTTP or the legacy HTTP+SSE
 * transport. Both modes share every path; only where messages come from
 * (take_output) and go to (deliver), and the protocol version, differ.
 */
#include "acp/http.h"
#include "acp/ndjson.h"
#include "http_internal.h"
#include "sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

enum { X_POST, X_GET, X_LEGACY, X_DELETE };

typedef struct hc_xfer hc_xfer;

struct hc_xfer {
  acp_http_client *hc;
  hc_xfer *next;
  CURL *e;
  struct curl_slist *hdrs;
  int kind;
  char *body; /* request body (POST) */
  size_t body_len;
  char *req_id; /* raw id of the request posted, or NULL */
  bool got_response;
  bool probe;     /* AUTO: the first POST, which decides the transport */
  bool stateless; /* a 2026-07-28 message: no MCP-Session-Id */
  bool typed;     /* content type checked */
  bool is_sse;
  bool new_nonce;     /* the answer carried a DPoP-Nonce */
  bool nonce_retried; /* this is the retry with that nonce */
  acp__buf resp;
  acp__sse sse;
};

typedef struct hc_sock {
  uv_poll_t poll;
  acp_http_client *hc;
  curl_socket_t fd;
} hc_sock;

struct acp_http_client {
  acp_mem mem;
  uv_loop_t *loop;
  acp_mcp_client *mc;            /* MCP mode, or NULL */
  acp_http_client_msg_cb msg_cb; /* raw mode */
  acp__buf outq;                 /* raw mode: lines from send_raw */
  acp__buf sending;              /* raw mode: the lines being posted */
  char *proto;    /* raw mode: protocolVersion from the initialize answer */
  char *init_id;  /* raw id of the initialize request awaiting its answer */
  acp__buf xhdrs; /* extra "Name: value" headers, each NUL-terminated */
  bool started;   /* a transfer was started: no more extra headers */
  bool legacy_started;
  bool probing; /* an AUTO probe is in flight */
  char *url;
  acp_http_transport mode;
  acp_http_transport transport;
  CURLM *multi;
  uv_timer_t curl_timer;
  uv_timer_t exp_timer;
  uv_prepare_t prepare;
  uv_timer_t retry_timer;
  int open_handles;
  hc_xfer *xfers;
  char *session_id;
  char *endpoint;       /* legacy POST URL */
  acp__buf held;        /* lines waiting (endpoint, probe, initialize answer) */
  acp_ndjson out_lines; /* frames what take_output() hands out */
  acp__buf line;
  acp_json_doc *doc;
  acp_http_client_end_cb end_cb;
  void *ud;
  bool ended;
  bool closing;
  bool want_get;
  bool get_started;
  acp_http_get_state get_state;
  acp_http_client_get_cb get_cb;
  void *get_ud;
  hc_xfer *get_x; /* the standalone GET transfer while it runs */
  long last_status;
  char *www_auth;        /* of the last 401/403 */
  acp_http_oauth *oauth; /* per-request Authorization and DPoP, or NULL */
  char err[CURL_ERROR_SIZE + 64];
  /* resumption of a POST stream that ended early */
  char *resume_id;
  char *resume_req;
  int64_t retry_ms;
  acp_http_client_close_cb close_cb;
  void *close_ud;
  uint64_t close_timeout;
  hc_xfer *del;
};

static void hc_fail(acp_http_client *hc, int reason, const char *what);
static int start_xfer(acp_http_client *hc, int kind, const char *url,
                      const char *body, size_t len, hc_xfer **out);

/* The MCP-Protocol-Version to send, or NULL while unknown. */
static const char *proto_version(const acp_http_client *hc) {
  if (hc->mc)
    return acp_mcp_client_protocol(hc->mc);
  return hc->proto;
}

/* MARK: - 2026-07-28 request headers */

/* Whether `s` can be a header value as is (visible ASCII and inner spaces,
 * no leading or trailing whitespace). */
static bool header_safe(const char *s, size_t n) {
  size_t i;
  if (n > 0 &&
      (s[0] == ' ' || s[n - 1] == ' ' || s[0] == '\t' || s[n - 1] == '\t'))
    return false;
  for (i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x20 || ch > 0x7e)
      return false;
  }
  return true;
}

/* "Name: value" into `out` (heap), the value in the spec's Base64 sentinel
 * form (=?base64?...?=) when it is not header-safe. */
static char *header_line(const acp_mem *m, const char *name, const char *v,
                         size_t n) {
  size_t nl = strlen(name);
  size_t cap = nl + 2 + 11 + acp__b64_encoded_len(n, ACP__B64_STD) + 1;
  char *out = acp__malloc(m, cap);
  char *q;

  if (out == NULL)
    return NULL;
  memcpy(out, name, nl);
  q = out + nl;
  if (n == 0) {
    /* libcurl reads "Name:" as "remove this header", "Name;" as "send it
     * empty". */
    *q++ = ';';
    *q = '\0';
    return out;
  }
  *q++ = ':';
  *q++ = ' ';
  if (header_safe(v, n)) {
    memcpy(q, v, n);
    q[n] = '\0';
    return out;
  }
  memcpy(q, "=?base64?", 9);
  q += 9;
  q += acp__b64_encode(q, v, n, ACP__B64_STD);
  memcpy(q, "?=", 3);
  return out;
}

static int add_line(hc_xfer *x, char *line) {
  struct curl_slist *l;
  if (line == NULL)
    return ACP_ERR_NOMEM;
  l = curl_slist_append(x->hdrs, line);
  acp__free(&x->hc->mem, line);
  if (l == NULL)
    return ACP_ERR_NOMEM;
  x->hdrs = l;
  return 0;
}

/* One Mcp-Param-{name} header (acp_mcp_client_param_headers()). */
static int add_param(const char *name, size_t name_len, const char *value,
                     size_t value_len, void *ud) {
  hc_xfer *x = ud;
  char hname[128];

  if (name_len > sizeof(hname) - 11)
    return 0; /* no header line that long: leave it out */
  memcpy(hname, "Mcp-Param-", 10);
  memcpy(hname + 10, name, name_len);
  hname[10 + name_len] = '\0';
  return add_line(x, header_line(&x->hc->mem, hname, value, value_len));
}

/*
 * A 2026-07-28 message (a request carrying
 * _meta["io.modelcontextprotocol/protocolVersion"], or any message once the
 * MCP client is stateless) gets Mcp-Method, and for tools/call,
 * resources/read and prompts/get Mcp-Name (params.name or params.uri);
 * *version_out is the version it names. Returns 0 or ACP_ERR_NOMEM.
 */
static int add_2026_headers(acp_http_client *hc, hc_xfer *x,
                            const acp_json_val *root, bool *is_2026,
                            const char **version_out) {
  const acp_json_val *method = acp_json_obj_getz(root, "method");
  const acp_json_val *params = acp_json_obj_getz(root, "params");
  const acp_json_val *pv = acp_json_obj_getz(acp_json_obj_getz(params, "_meta"),
                                             ACP_MCP_META_PROTOCOL_VERSION);
  const acp_json_val *name = NULL;
  const char *s;
  size_t n;
  int rv;

  *is_2026 = false;
  if (acp_json_type_of(method) != ACP_JSON_STRING)
    return 0;
  if (acp_json_type_of(pv) == ACP_JSON_STRING)
    *version_out = ACP_JSON_STR_EQ_LIT(pv, ACP_MCP_PROTOCOL_2026_07_28)
                       ? ACP_MCP_PROTOCOL_2026_07_28
                       : NULL;
  else if (hc->mc == NULL ||
           acp_mcp_client_era(hc->mc) != ACP_MCP_ERA_STATELESS)
    return 0;
  *is_2026 = true;
  if (acp_json_doc_str(hc->doc, method, &s, &n) != 0)
    return 0;
  rv = add_line(x, header_line(&hc->mem, "Mcp-Method", s, n));
  if (rv != 0)
    return rv;
  name = acp_mcp_named_param(method, params);
  if (acp_json_type_of(name) == ACP_JSON_STRING &&
      acp_json_doc_str(hc->doc, name, &s, &n) == 0)
    rv = add_line(x, header_line(&hc->mem, "Mcp-Name", s, n));
  if (rv == 0 && hc->mc != NULL && ACP_JSON_STR_EQ_LIT(method, "tools/call"))
    rv = acp_mcp_client_param_headers(hc->mc, hc->doc, params, add_param, x);
  return rv;
}

static bool version_token_ok(const char *s, size_t n) {
  size_t i;
  if (n == 0 || n > 32)
    return false;
  for (i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
          (c >= 'A' && c <= 'Z') || c == '-' || c == '.' || c == '_'))
      return false;
  }
  return true;
}

static void set_get_state(acp_http_client *hc, acp_http_get_state st) {
  if (hc->get_state == st)
    return;
  hc->get_state = st;
  if (st != ACP_HTTP_GET_OPENING && hc->get_cb && !hc->closing)
    hc->get_cb(hc, st, hc->get_ud);
}

/* MARK: - Feeding the MCP client */

/* The message parsed into hc->doc when it is the response to request `id`
 * (raw JSON text, NUL-terminated); NULL otherwise. */
static const acp_json_val *response_to(acp_http_client *hc, const char *id,
                                       const char *msg, size_t len) {
  const acp_json_val *root;
  const char *raw;
  size_t n;
  if (acp_json_doc_parse(hc->doc, msg, len, NULL) != 0)
    return NULL;
  root = acp_json_doc_root(hc->doc);
  if (acp_json_obj_getz(root, "method") != NULL)
    return NULL;
  raw = acp_json_raw(acp_json_obj_getz(root, "id"), &n);
  if (raw == NULL || strlen(id) != n || memcmp(raw, id, n) != 0)
    return NULL;
  return root;
}

static void note_response(hc_xfer *x, const char *msg, size_t len) {
  if (x->req_id != NULL && !x->got_response &&
      response_to(x->hc, x->req_id, msg, len) != NULL)
    x->got_response = true;
}

/* The answer to initialize: messages held for it may go; in raw mode, it
 * tells the protocol version. */
static void note_init_answer(acp_http_client *hc, const char *msg, size_t len) {
  const acp_json_val *root = response_to(hc, hc->init_id, msg, len), *pv;
  const char *s;
  size_t n;
  if (root == NULL)
    return;
  acp__free(&hc->mem, hc->init_id);
  hc->init_id = NULL;
  pv = acp_json_obj_getz(acp_json_obj_getz(root, "result"), "protocolVersion");
  if (hc->mc == NULL && acp_json_type_of(pv) == ACP_JSON_STRING &&
      acp_json_doc_str(hc->doc, pv, &s, &n) == 0 && version_token_ok(s, n)) {
    char *p = acp__strndup(&hc->mem, s, n);
    if (p) {
      acp__free(&hc->mem, hc->proto);
      hc->proto = p;
    }
  }
}

static int deliver(acp_http_client *hc, const char *msg, size_t len) {
  acp_ssize r;
  size_t i;
  int rv;
  if (hc->closing || hc->ended)
    return 0;
  if (hc->init_id)
    note_init_answer(hc, msg, len);
  acp__buf_clear(&hc->line);
  rv = acp__buf_append(&hc->line, msg, len);
  if (rv == 0)
    rv = acp__buf_putc(&hc->line, '\n');
  if (rv != 0)
    return rv;
  for (i = 0; i + 1 < hc->line.len; i++)
    if (hc->line.data[i] == '\n' || hc->line.data[i] == '\r')
      hc->line.data[i] = ' ';
  if (hc->mc == NULL) {
    hc->msg_cb(hc, hc->line.data, hc->line.len - 1, hc->ud);
    return 0;
  }
  r = acp_mcp_client_recv(hc->mc, hc->line.data, hc->line.len,
                          uv_now(hc->loop));
  if (r < 0 && acp_is_fatal((int)r)) {
    hc_fail(hc, (int)r, "MCP client failed");
    return (int)r;
  }
  return 0;
}

static int on_sse_event(void *ud, const char *type, size_t tl, const char *data,
                        size_t dl, const char *id, size_t il) {
  hc_xfer *x = ud;
  acp_http_client *hc = x->hc;
  (void)id;
  (void)il;
  if (x->kind == X_LEGACY && tl == 8 && memcmp(type, "endpoint", 8) == 0) {
    CURLU *u = curl_url();
    char *full = NULL, *ep;
    if (u == NULL)
      return ACP_ERR_NOMEM;
    ep = acp__strndup(&hc->mem, data, dl);
    if (ep == NULL || curl_url_set(u, CURLUPART_URL, hc->url, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_URL, ep, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &full, 0) != CURLUE_OK) {
      acp__free(&hc->mem, ep);
      curl_url_cleanup(u);
      hc_fail(hc, ACP_ERR_PROTOCOL, "bad endpoint event");
      return ACP_ERR_PROTOCOL;
    }
    acp__free(&hc->mem, ep);
    acp__free(&hc->mem, hc->endpoint);
    hc->endpoint = acp__strndup(&hc->mem, full, strlen(full));
    curl_free(full);
    curl_url_cleanup(u);
    if (hc->endpoint == NULL)
      return ACP_ERR_NOMEM;
    hc->transport = ACP_HTTP_LEGACY_SSE;
    /* What was held is sent by pump(): no transfer may be added from
     * inside a libcurl callback. */
    return 0;
  }
  if (tl != 7 || memcmp(type, "message", 7) != 0 || dl == 0)
    return 0; /* priming events, other types */
  note_response(x, data, dl);
  return deliver(hc, data, dl);
}

/* MARK: - Transfers */

static size_t on_header(char *buf, size_t size, size_t n, void *ud) {
  hc_xfer *x = ud;
  acp_http_client *hc = x->hc;
  size_t len = size * n;
  if (x == hc->get_x && (len == 2 || len == 1) &&
      (buf[0] == '\r' || buf[0] == '\n')) {
    /* End of the GET stream's headers (of the final response). */
    long status = 0;
    char *ct = NULL;
    curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(x->e, CURLINFO_CONTENT_TYPE, &ct);
    if (status >= 200 && status < 300 && ct &&
        strncasecmp(ct, "text/event-stream", 17) == 0)
      set_get_state(hc, ACP_HTTP_GET_OPEN);
    else if (status >= 200)
      set_get_state(hc, ACP_HTTP_GET_REFUSED);
    return len;
  }
  if (len > 17 && strncasecmp(buf, "www-authenticate:", 17) == 0) {
    size_t a = 17, b = len;
    while (a < b && (buf[a] == ' ' || buf[a] == '\t'))
      a++;
    while (b > a &&
           (buf[b - 1] == '\r' || buf[b - 1] == '\n' || buf[b - 1] == ' '))
      b--;
    {
      char *v = acp__strndup(&hc->mem, buf + a, b - a);
      if (v) {
        acp__free(&hc->mem, hc->www_auth);
        hc->www_auth = v;
      }
    }
  }
  if (hc->oauth != NULL && len > 11 &&
      strncasecmp(buf, "dpop-nonce:", 11) == 0) {
    /* RFC 9449 section 9: the resource server's nonce for later proofs. */
    size_t a = 11, b = len;
    char *v;
    while (a < b && (buf[a] == ' ' || buf[a] == '\t'))
      a++;
    while (b > a &&
           (buf[b - 1] == '\r' || buf[b - 1] == '\n' || buf[b - 1] == ' '))
      b--;
    v = acp__strndup(&hc->mem, buf + a, b - a);
    if (v != NULL && acp_http_oauth_set_dpop_nonce(hc->oauth, v) == 0)
      x->new_nonce = true;
    acp__free(&hc->mem, v);
  }
  /* 2026-07-28 has no sessions: a session id on its answers is ignored. */
  if (!x->stateless && len > 15 &&
      strncasecmp(buf, "mcp-session-id:", 15) == 0) {
    size_t a = 15, b = len;
    while (a < b && (buf[a] == ' ' || buf[a] == '\t'))
      a++;
    while (b > a &&
           (buf[b - 1] == '\r' || buf[b - 1] == '\n' || buf[b - 1] == ' '))
      b--;
    if (b > a) {
      char *sid = acp__strndup(&hc->mem, buf + a, b - a);
      if (sid) {
        acp__free(&hc->mem, hc->session_id);
        hc->session_id = sid;
      }
    }
  }
  return len;
}

static size_t on_data(char *buf, size_t size, size_t n, void *ud) {
  hc_xfer *x = ud;
  size_t len = size * n;
  long status = 0;
  if (!x->typed) {
    char *ct = NULL;
    x->typed = true;
    curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(x->e, CURLINFO_CONTENT_TYPE, &ct);
    x->is_sse = status >= 200 && status < 300 && ct &&
                strncasecmp(ct, "text/event-stream", 17) == 0;
  }
  if (x->is_sse) {
    int rv = acp__sse_feed(&x->sse, buf, len, on_sse_event, x);
    if (rv != 0)
      return 0; /* abort the transfer */
    {
      int64_t r = acp__sse_retry(&x->sse);
      if (r >= 0)
        x->hc->retry_ms = r;
    }
    return len;
  }
  if (acp__buf_append(&x->resp, buf, len) != 0)
    return 0;
  return len;
}

static void xfer_free(hc_xfer *x) {
  acp_http_client *hc = x->hc;
  hc_xfer **pp;
  if (x->probe)
    hc->probing = false;
  if (hc->get_x == x) {
    hc->get_x = NULL;
    set_get_state(hc, hc->get_state == ACP_HTTP_GET_OPEN
                          ? ACP_HTTP_GET_ENDED
                          : ACP_HTTP_GET_REFUSED);
  }
  for (pp = &hc->xfers; *pp; pp = &(*pp)->next)
    if (*pp == x) {
      *pp = x->next;
      break;
    }
  if (x->e) {
    curl_multi_remove_handle(hc->multi, x->e);
    curl_easy_cleanup(x->e);
  }
  curl_slist_free_all(x->hdrs);
  acp__buf_dispose(&x->resp);
  acp__sse_dispose(&x->sse);
  acp__free(&hc->mem, x->body);
  acp__free(&hc->mem, x->req_id);
  acp__free(&hc->mem, x);
}

static int add_header(hc_xfer *x, const char *name, const char *value) {
  char buf[512];
  struct curl_slist *l;
  int n = snprintf(buf, sizeof(buf), "%s: %s", name, value);
  if (n < 0 || (size_t)n >= sizeof(buf))
    return ACP_ERR_LIMIT;
  l = curl_slist_append(x->hdrs, buf);
  if (l == NULL)
    return ACP_ERR_NOMEM;
  x->hdrs = l;
  return 0;
}

static int start_xfer(acp_http_client *hc, int kind, const char *url,
                      const char *body, size_t len, hc_xfer **out) {
  hc_xfer *x;
  const char *v = proto_version(hc);
  size_t hi;
  int rv = 0;
  if (out)
    *out = NULL;
  x = acp__calloc(&hc->mem, 1, sizeof(*x));
  if (x == NULL)
    return ACP_ERR_NOMEM;
  x->hc = hc;
  x->kind = kind;
  acp__buf_init(&x->resp, &hc->mem, (size_t)64 << 20);
  acp__sse_init(&x->sse, &hc->mem, (size_t)64 << 20);
  x->e = curl_easy_init();
  if (x->e == NULL) {
    acp__free(&hc->mem, x);
    return ACP_ERR_SYSTEM;
  }
  x->next = hc->xfers;
  hc->xfers = x;
  curl_easy_setopt(x->e, CURLOPT_URL, url);
  curl_easy_setopt(x->e, CURLOPT_PRIVATE, x);
  curl_easy_setopt(x->e, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(x->e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(x->e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(x->e, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(x->e, CURLOPT_ERRORBUFFER, hc->err);
  curl_easy_setopt(x->e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(x->e, CURLOPT_PROTOCOLS_STR, "http,https");
  if (kind == X_POST) {
    const acp_json_val *root, *id, *method;
    bool is_2026 = false;
    x->body = acp__strndup(&hc->mem, body, len);
    if (x->body == NULL)
      rv = ACP_ERR_NOMEM;
    x->body_len = len;
    if (rv == 0 && acp_json_doc_parse(hc->doc, body, len, NULL) == 0) {
      root = acp_json_doc_root(hc->doc);
      id = acp_json_obj_getz(root, "id");
      method = acp_json_obj_getz(root, "method");
      if (id && method) {
        size_t n;
        const char *raw = acp_json_raw(id, &n);
        x->req_id = acp__strndup(&hc->mem, raw, n);
        if (x->req_id == NULL)
          rv = ACP_ERR_NOMEM;
        if (rv == 0 && ACP_JSON_STR_EQ_LIT(method, "initialize")) {
          acp__free(&hc->mem, hc->init_id);
          hc->init_id = acp__strndup(&hc->mem, raw, n);
          if (hc->init_id == NULL)
            rv = ACP_ERR_NOMEM;
        }
      }
      if (rv == 0 && hc->transport != ACP_HTTP_LEGACY_SSE)
        rv = add_2026_headers(hc, x, root, &is_2026, &v);
      if (is_2026)
        x->stateless = true;
    }
    if (rv == 0) {
      curl_easy_setopt(x->e, CURLOPT_POST, 1L);
      curl_easy_setopt(x->e, CURLOPT_POSTFIELDS, x->body);
      curl_easy_setopt(x->e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
      rv = add_header(x, "Content-Type", "application/json");
    }
    if (rv == 0)
      rv = add_header(x, "Accept", "application/json, text/event-stream");
  } else if (kind == X_DELETE) {
    curl_easy_setopt(x->e, CURLOPT_CUSTOMREQUEST, "DELETE");
  } else {
    curl_easy_setopt(x->e, CURLOPT_HTTPGET, 1L);
    rv = add_header(x, "Accept", "text/event-stream");
    if (rv == 0 && body)
      rv = add_header(x, "Last-Event-ID", body);
  }
  if (rv == 0 && kind != X_LEGACY && hc->session_id && !x->stateless &&
      hc->transport != ACP_HTTP_LEGACY_SSE)
    rv = add_header(x, "MCP-Session-Id", hc->session_id);
  if (rv == 0 && kind != X_LEGACY && v != NULL &&
      hc->transport != ACP_HTTP_LEGACY_SSE)
    rv = add_header(x, "MCP-Protocol-Version", v);
  if (rv == 0 && hc->oauth != NULL) {
    /* A fresh Authorization (and DPoP proof) per request; no token yet
     * (the first request that earns the 401) sends none. */
    char *authz = NULL, *proof = NULL;
    const char *m = kind == X_POST     ? "POST"
                    : kind == X_DELETE ? "DELETE"
                                       : "GET";
    if (acp_http_oauth_request_headers(hc->oauth, m, url, &authz, &proof) ==
        0) {
      rv = add_line(
          x, header_line(&hc->mem, "Authorization", authz, strlen(authz)));
      if (rv == 0 && proof != NULL)
        rv = add_line(x, header_line(&hc->mem, "DPoP", proof, strlen(proof)));
    }
    if (authz != NULL)
      memset(authz, 0, strlen(authz));
    free(authz);
    free(proof);
  }
  for (hi = 0; rv == 0 && hi < hc->xhdrs.len;) {
    const char *h = hc->xhdrs.data + hi;
    struct curl_slist *l = curl_slist_append(x->hdrs, h);
    if (l == NULL)
      rv = ACP_ERR_NOMEM;
    else
      x->hdrs = l;
    hi += strlen(h) + 1;
  }
  if (rv == 0) {
    curl_easy_setopt(x->e, CURLOPT_HTTPHEADER, x->hdrs);
    if (curl_multi_add_handle(hc->multi, x->e) != CURLM_OK)
      rv = ACP_ERR_SYSTEM;
  }
  if (rv != 0) {
    xfer_free(x);
    return rv;
  }
  hc->started = true;
  if (kind == X_LEGACY)
    hc->legacy_started = true;
  if (out)
    *out = x;
  return 0;
}

/* A request whose POST failed: answer it locally so its caller learns. */
static void synth_error(acp_http_client *hc, hc_xfer *x, long status) {
  char buf[256];
  int n;
  if (x->req_id == NULL || x->got_response || strlen(x->req_id) > 100)
    return;
  n = snprintf(buf, sizeof(buf),
               "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32000,"
               "\"message\":\"HTTP status %ld\"}}",
               x->req_id, status);
  if (n > 0 && (size_t)n < sizeof(buf))
    (void)deliver(hc, buf, (size_t)n);
}

static void on_retry(uv_timer_t *t) {
  acp_http_client *hc = t->data;
  char *id = hc->resume_id;
  hc_xfer *x = NULL;
  if (id == NULL || hc->ended || hc->closing)
    return;
  hc->resume_id = NULL;
  if (start_xfer(hc, X_GET, hc->url, id, strlen(id), &x) == 0 && x) {
    x->req_id = hc->resume_req;
    hc->resume_req = NULL;
  }
  acp__free(&hc->mem, id);
}

static void xfer_done(hc_xfer *x, CURLcode res) {
  acp_http_client *hc = x->hc;
  long status = 0;
  curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &status);
  if (status)
    hc->last_status = status;
  if (x->kind == X_DELETE) {
    xfer_free(x);
    if (hc->del == x)
      hc->del = NULL;
    return;
  }
  if (res != CURLE_OK &&
      !(x->is_sse && res == CURLE_WRITE_ERROR && hc->ended)) {
    char what[CURL_ERROR_SIZE + 64];
    snprintf(what, sizeof(what), "%s",
             hc->err[0] ? hc->err : curl_easy_strerror(res));
    xfer_free(x);
    hc_fail(hc, ACP_ERR_SYSTEM, what);
    return;
  }
  if (status == 401 && x->kind == X_POST && x->new_nonce && !x->nonce_retried &&
      hc->oauth != NULL && !hc->ended && !hc->closing) {
    /* 401 use_dpop_nonce with a new DPoP-Nonce (RFC 9449 section 9): send
     * the same POST once more, its proof now carrying the nonce. */
    hc_xfer *nx = NULL;
    if (start_xfer(hc, X_POST,
                   hc->transport == ACP_HTTP_LEGACY_SSE && hc->endpoint
                       ? hc->endpoint
                       : hc->url,
                   x->body, x->body_len, &nx) == 0 &&
        nx != NULL) {
      nx->nonce_retried = true;
      nx->probe = x->probe;
      x->probe = false; /* the retry carries the probe on */
      xfer_free(x);
      return;
    }
  }
  if (x->probe && x->stateless && (status < 200 || status >= 300)) {
    /* A 2026 server/discover probe refused by a server of an earlier
     * revision (which wants a session first): the transport is still
     * unknown. The MCP client gets the error below and falls back to
     * initialize, which probes again. */
    x->probe = false;
    hc->probing = false;
  }
  if (x->probe && (status == 400 || status == 404 || status == 405)) {
    /* Fall back to the legacy transport: GET the URL, hold the probe
     * (initialize) ahead of what was held behind it. */
    acp__buf h;
    int rv;
    acp__buf_init(&h, &hc->mem, 0);
    rv = acp__buf_append(&h, x->body, x->body_len);
    if (rv == 0)
      rv = acp__buf_putc(&h, '\n');
    if (rv == 0)
      rv = acp__buf_append(&h, hc->held.data, hc->held.len);
    acp__buf_dispose(&hc->held);
    hc->held = h;
    acp__free(&hc->mem, hc->init_id); /* set again when re-posted */
    hc->init_id = NULL;
    hc->transport = ACP_HTTP_LEGACY_SSE;
    xfer_free(x);
    if (rv == 0)
      rv = start_xfer(hc, X_LEGACY, hc->url, NULL, 0, NULL);
    if (rv != 0)
      hc_fail(hc, rv, "cannot start the legacy SSE stream");
    return;
  }
  if (x->probe && status >= 200 && status < 300)
    hc->transport = ACP_HTTP_STREAMABLE;
  if (x->kind == X_LEGACY) {
    xfer_free(x);
    hc_fail(hc,
            status >= 200 && status < 300 ? ACP_ERR_CLOSED : ACP_ERR_PROTOCOL,
            "the legacy SSE stream ended");
    return;
  }
  if (x->kind == X_GET && x->req_id == NULL) {
    /* The standalone stream: 405 means not offered; otherwise just end. */
    xfer_free(x);
    return;
  }
  if (status == 404 && hc->session_id && !x->probe) {
    xfer_free(x);
    hc_fail(hc, ACP_ERR_CLOSED, "session not found (404)");
    return;
  }
  if (status < 200 || status >= 300) {
    /* A 2026-07-28 error may come with an HTTP error status and its
     * JSON-RPC answer as the body (UnsupportedProtocolVersionError with the
     * supported list, HeaderMismatchError): hand that over as it is. */
    if (x->stateless && !x->is_sse && x->resp.len > 0) {
      note_response(x, x->resp.data, x->resp.len);
      if (x->got_response)
        (void)deliver(hc, x->resp.data, x->resp.len);
    }
    synth_error(hc, x, status);
    xfer_free(x);
    return;
  }
  if (!x->is_sse && x->resp.len > 0) {
    const acp_json_val *root, *e;
    acp__buf body = x->resp; /* keep the bytes alive while feeding */
    x->resp.data = NULL;
    x->resp.len = x->resp.cap = 0;
    if (status == 202 ||
        acp_json_doc_parse(hc->doc, body.data, body.len, NULL) != 0) {
      /* Not a message (the "Accepted" text some servers put in a 202). */
    } else if (acp_json_type_of(root = acp_json_doc_root(hc->doc)) ==
               ACP_JSON_ARRAY) {
      /* A batch answer: feed each element (spans stay valid in body). */
      size_t cnt = acp_json_len(root), i;
      for (i = 0; i < cnt; i++) {
        size_t n;
        const char *raw;
        if (acp_json_doc_parse(hc->doc, body.data, body.len, NULL) != 0)
          break;
        e = acp_json_arr_get(acp_json_doc_root(hc->doc), i);
        raw = acp_json_raw(e, &n);
        note_response(x, raw, n);
        if (deliver(hc, raw, n) != 0)
          break;
      }
    } else {
      note_response(x, body.data, body.len);
      (void)deliver(hc, body.data, body.len);
    }
    acp__buf_dispose(&body);
  }
  if (x->stateless && x->is_sse && x->req_id && !x->got_response &&
      !hc->ended) {
    /* 2026-07-28 has no resumability: a stream that ended before the
     * answer lost the request. Fail it now (the caller may send it again,
     * a new request with a new id) rather than leave it to a timeout. */
    char buf[256];
    int n = snprintf(buf, sizeof(buf),
                     "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":"
                     "-32000,\"message\":\"The response stream ended before "
                     "the response\"}}",
                     x->req_id);
    if (strlen(x->req_id) <= 100 && n > 0 && (size_t)n < sizeof(buf))
      (void)deliver(hc, buf, (size_t)n);
  } else if (x->is_sse && x->req_id && !x->got_response && !hc->ended) {
    /* The server closed the stream before answering: resume it. */
    size_t il;
    const char *last = acp__sse_last_id(&x->sse, &il);
    if (il > 0 && hc->resume_id == NULL) {
      hc->resume_id = acp__strndup(&hc->mem, last, il);
      hc->resume_req = x->req_id;
      x->req_id = NULL;
      uv_timer_start(&hc->retry_timer, on_retry,
                     hc->retry_ms >= 0 ? (uint64_t)hc->retry_ms : 1000, 0);
    }
  }
  if (x->req_id && !x->got_response && hc->init_id &&
      hc->transport != ACP_HTTP_LEGACY_SSE &&
      strcmp(x->req_id, hc->init_id) == 0) {
    /* initialize went unanswered: stop holding what follows it. */
    acp__free(&hc->mem, hc->init_id);
    hc->init_id = NULL;
  }
  xfer_free(x);
}

static void check_done(acp_http_client *hc) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(hc->multi, &left)) != NULL) {
    if (m->msg == CURLMSG_DONE) {
      hc_xfer *x = NULL;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
      if (x)
        xfer_done(x, m->data.result);
    }
  }
}

/* MARK: - libcurl <-> libuv */

static void on_sock_closed(uv_handle_t *h) {
  hc_sock *s = h->data;
  acp_http_client *hc = s->hc;
  acp__free(&hc->mem, s);
  if (--hc->open_handles == 0 && hc->closing) {
    acp_mem m = hc->mem;
    if (hc->close_cb)
      hc->close_cb(hc, hc->close_ud);
    acp__free(&m, hc);
  }
}

static void on_sock(uv_poll_t *p, int status, int events) {
  hc_sock *s = p->data;
  acp_http_client *hc = s->hc;
  int flags = 0, running;
  if (status < 0)
    flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE)
    flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE)
    flags |= CURL_CSELECT_OUT;
  curl_multi_socket_action(hc->multi, s->fd, flags, &running);
  check_done(hc);
}

static int sock_cb(CURL *e, curl_socket_t fd, int what, void *ud, void *sockp) {
  acp_http_client *hc = ud;
  hc_sock *s = sockp;
  int ev = 0;
  (void)e;
  if (what == CURL_POLL_REMOVE) {
    if (s) {
      uv_poll_stop(&s->poll);
      uv_close((uv_handle_t *)&s->poll, on_sock_closed);
      curl_multi_assign(hc->multi, fd, NULL);
    }
    return 0;
  }
  if (s == NULL) {
    s = acp__calloc(&hc->mem, 1, sizeof(*s));
    if (s == NULL)
      return -1;
    s->hc = hc;
    s->fd = fd;
    if (uv_poll_init_socket(hc->loop, &s->poll, fd) != 0) {
      acp__free(&hc->mem, s);
      return -1;
    }
    s->poll.data = s;
    hc->open_handles++;
    curl_multi_assign(hc->multi, fd, s);
  }
  if (what & CURL_POLL_IN)
    ev |= UV_READABLE;
  if (what & CURL_POLL_OUT)
    ev |= UV_WRITABLE;
  uv_poll_start(&s->poll, ev, on_sock);
  return 0;
}

static void on_curl_timer(uv_timer_t *t) {
  acp_http_client *hc = t->data;
  int running;
  curl_multi_socket_action(hc->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_done(hc);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *ud) {
  acp_http_client *hc = ud;
  (void)multi;
  if (hc->closing && hc->multi == NULL)
    return 0;
  if (timeout_ms < 0)
    uv_timer_stop(&hc->curl_timer);
  else
    uv_timer_start(&hc->curl_timer, on_curl_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* MARK: - Output and deadlines */

static void on_expiry(uv_timer_t *t) {
  acp_http_client *hc = t->data;
  int rv;
  if (hc->mc == NULL)
    return;
  rv = acp_mcp_client_handle_expiry(hc->mc, uv_now(hc->loop));
  if (rv != 0 && acp_is_fatal(rv))
    hc_fail(hc, rv, "MCP client failed");
}

/* Messages wait in `held` while the legacy endpoint is unknown, while the
 * AUTO probe decides the transport, and while initialize is unanswered
 * (the session id comes with its answer). */
static bool must_hold(const acp_http_client *hc) {
  if (hc->init_id != NULL || hc->probing)
    return true;
  return hc->transport == ACP_HTTP_LEGACY_SSE && hc->endpoint == NULL;
}

/* POST one message to where the transport says. */
static int post_line(acp_http_client *hc, const char *line, size_t len) {
  hc_xfer *x = NULL;
  int rv;
  if (hc->transport == ACP_HTTP_LEGACY_SSE)
    return start_xfer(hc, X_POST, hc->endpoint, line, len, NULL);
  rv = start_xfer(hc, X_POST, hc->url, line, len, &x);
  if (rv == 0 && x && hc->transport == ACP_HTTP_AUTO) {
    x->probe = true;
    hc->probing = true;
  }
  return rv;
}

/* Send held lines, in order, until something must be waited for. */
static int flush_held(acp_http_client *hc) {
  acp_ndjson f;
  size_t i = 0;
  int rv = 0;
  acp_ndjson_init(&f, SIZE_MAX, &hc->mem);
  while (i < hc->held.len && !must_hold(hc)) {
    const char *line;
    size_t n, used;
    int r = acp_ndjson_next(&f, hc->held.data + i, hc->held.len - i, &used,
                            &line, &n);
    i += used;
    if (r == ACP_NDJSON_LINE)
      rv = post_line(hc, line, n);
    if (rv != 0 || r != ACP_NDJSON_LINE)
      break;
  }
  acp_ndjson_dispose(&f); /* held lines all end in '\n': nothing carried */
  acp__buf_consume(&hc->held, i);
  return rv;
}

/* Newline-separated output: of the MCP client, or queued by send_raw. */
static acp_ssize take_output(acp_http_client *hc, const char **data) {
  acp__buf t;
  if (hc->mc)
    return acp_mcp_client_send(hc->mc, data);
  acp__buf_clear(&hc->sending);
  if (hc->outq.len == 0)
    return 0;
  t = hc->sending;
  hc->sending = hc->outq;
  hc->outq = t;
  *data = hc->sending.data;
  return (acp_ssize)hc->sending.len;
}

static void pump(acp_http_client *hc) {
  const char *data;
  acp_ssize n = 0;
  uint64_t exp, now;
  int rv;
  if (hc->ended || hc->closing)
    return;
  if (hc->mode == ACP_HTTP_LEGACY_SSE && !hc->legacy_started) {
    rv = start_xfer(hc, X_LEGACY, hc->url, NULL, 0, NULL);
    if (rv != 0) {
      hc_fail(hc, rv, "cannot start the legacy SSE stream");
      return;
    }
  }
  rv = flush_held(hc);
  while (rv == 0 && (n = take_output(hc, &data)) > 0) {
    size_t len = (size_t)n, i = 0;
    while (rv == 0 && i < len) {
      const char *line;
      size_t ln, used;
      int r =
          acp_ndjson_next(&hc->out_lines, data + i, len - i, &used, &line, &ln);
      i += used;
      if (r == ACP_NDJSON_NEED_MORE)
        break;
      if (r != ACP_NDJSON_LINE)
        rv = r < 0 ? r : 0;
      else if (hc->held.len > 0 || must_hold(hc)) {
        rv = acp__buf_append(&hc->held, line, ln);
        if (rv == 0)
          rv = acp__buf_putc(&hc->held, '\n');
      } else
        rv = post_line(hc, line, ln);
    }
  }
  if (rv != 0) {
    hc_fail(hc, rv, "cannot send");
    return;
  }
  if (n < 0 && acp_is_fatal((int)n)) {
    hc_fail(hc, (int)n, "MCP client failed");
    return;
  }
  if (hc->want_get && !hc->get_started &&
      hc->transport == ACP_HTTP_STREAMABLE && proto_version(hc) != NULL) {
    hc->get_started = true;
    if (start_xfer(hc, X_GET, hc->url, NULL, 0, &hc->get_x) == 0)
      set_get_state(hc, ACP_HTTP_GET_OPENING);
    else
      set_get_state(hc, ACP_HTTP_GET_REFUSED);
  }
  if (hc->mc == NULL)
    return;
  exp = acp_mcp_client_get_expiry(hc->mc);
  now = uv_now(hc->loop);
  if (exp == UINT64_MAX)
    uv_timer_stop(&hc->exp_timer);
  else
    uv_timer_start(&hc->exp_timer, on_expiry, exp > now ? exp - now : 0, 0);
}

static void on_prepare(uv_prepare_t *p) {
  pump(p->data);
}

static void hc_fail(acp_http_client *hc, int reason, const char *what) {
  if (hc->ended)
    return;
  hc->ended = true;
  if (what && hc->err != what) {
    snprintf(hc->err, sizeof(hc->err), "%s", what);
  }
  /* The transport is over: the MCP client's pending calls end here, and a
   * failure of theirs has nowhere left to go but end_cb, which follows. */
  if (hc->mc)
    (void)acp_mcp_client_recv_eof(hc->mc, uv_now(hc->loop));
  if (hc->end_cb)
    hc->end_cb(hc, reason, hc->ud);
}

/* MARK: - Public */

static int client_new(acp_http_client **out, uv_loop_t *loop,
                      acp_mcp_client *client, acp_http_client_msg_cb msg_cb,
                      const char *url, acp_http_transport mode,
                      acp_http_client_end_cb end_cb, void *user_data,
                      const acp_mem *mem) {
  acp_http_client *hc;
  acp_mem m;
  int rv = 0;
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (loop == NULL || (client == NULL) == (msg_cb == NULL) || url == NULL ||
      (strncasecmp(url, "http://", 7) != 0 &&
       strncasecmp(url, "https://", 8) != 0) ||
      (unsigned)mode > ACP_HTTP_LEGACY_SSE)
    return ACP_ERR_INVALID_ARGUMENT;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return ACP_ERR_SYSTEM;
  acp__mem_init(&m, mem);
  hc = acp__calloc(&m, 1, sizeof(*hc));
  if (hc == NULL)
    return ACP_ERR_NOMEM;
  hc->mem = m;
  hc->loop = loop;
  hc->mc = client;
  hc->msg_cb = msg_cb;
  hc->mode = mode;
  hc->transport = mode;
  hc->end_cb = end_cb;
  hc->ud = user_data;
  hc->retry_ms = -1;
  acp__buf_init(&hc->held, &hc->mem, 0);
  acp_ndjson_init(&hc->out_lines, SIZE_MAX, &hc->mem);
  acp__buf_init(&hc->line, &hc->mem, 0);
  acp__buf_init(&hc->outq, &hc->mem, 0);
  acp__buf_init(&hc->sending, &hc->mem, 0);
  acp__buf_init(&hc->xhdrs, &hc->mem, 0);
  hc->url = acp__strndup(&hc->mem, url, strlen(url));
  if (hc->url == NULL)
    rv = ACP_ERR_NOMEM;
  if (rv == 0)
    rv = acp_json_doc_new(&hc->doc, &hc->mem);
  if (rv == 0) {
    hc->multi = curl_multi_init();
    if (hc->multi == NULL)
      rv = ACP_ERR_SYSTEM;
  }
  if (rv != 0) {
    acp_json_doc_free(hc->doc);
    acp__free(&m, hc->url);
    acp__free(&m, hc);
    return rv;
  }
  curl_multi_setopt(hc->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
  curl_multi_setopt(hc->multi, CURLMOPT_SOCKETDATA, hc);
  curl_multi_setopt(hc->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(hc->multi, CURLMOPT_TIMERDATA, hc);
  uv_timer_init(loop, &hc->curl_timer);
  uv_timer_init(loop, &hc->exp_timer);
  uv_timer_init(loop, &hc->retry_timer);
  uv_prepare_init(loop, &hc->prepare);
  hc->curl_timer.data = hc->exp_timer.data = hc->retry_timer.data = hc;
  hc->prepare.data = hc;
  hc->open_handles = 4;
  /* Every transfer, the legacy stream's GET included, starts from pump()
   * on the loop, so headers can still be added after this returns. */
  uv_prepare_start(&hc->prepare, on_prepare);
  *out = hc;
  return 0;
}

int acp_http_client_new(acp_http_client **out, uv_loop_t *loop,
                        acp_mcp_client *client, const char *url,
                        acp_http_transport mode, acp_http_client_end_cb end_cb,
                        void *user_data, const acp_mem *mem) {
  if (client == NULL) {
    if (out)
      *out = NULL;
    return ACP_ERR_INVALID_ARGUMENT;
  }
  return client_new(out, loop, client, NULL, url, mode, end_cb, user_data, mem);
}

int acp_http_client_new_raw(acp_http_client **out, uv_loop_t *loop,
                            const char *url, acp_http_transport mode,
                            acp_http_client_msg_cb msg_cb,
                            acp_http_client_end_cb end_cb, void *user_data,
                            const acp_mem *mem) {
  if (msg_cb == NULL) {
    if (out)
      *out = NULL;
    return ACP_ERR_INVALID_ARGUMENT;
  }
  return client_new(out, loop, NULL, msg_cb, url, mode, end_cb, user_data, mem);
}

int acp_http_client_send_raw(acp_http_client *hc, const char *msg, size_t len) {
  size_t a = 0, b = len, start, i;
  int rv;
  if (hc == NULL || hc->mc != NULL || hc->ended || hc->closing)
    return ACP_ERR_INVALID_STATE;
  if (msg == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  while (a < b &&
         (msg[a] == ' ' || msg[a] == '\t' || msg[a] == '\r' || msg[a] == '\n'))
    a++;
  while (b > a && (msg[b - 1] == ' ' || msg[b - 1] == '\t' ||
                   msg[b - 1] == '\r' || msg[b - 1] == '\n'))
    b--;
  if (a == b || (msg[a] != '{' && msg[a] != '['))
    return ACP_ERR_INVALID_ARGUMENT;
  rv = acp_json_validate(msg + a, b - a, NULL);
  if (rv == ACP_ERR_NOMEM)
    return rv;
  if (rv != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  start = hc->outq.len;
  rv = acp__buf_append(&hc->outq, msg + a, b - a);
  if (rv == 0)
    rv = acp__buf_putc(&hc->outq, '\n');
  if (rv != 0) {
    hc->outq.len = start; /* nothing queued */
    return rv;
  }
  /* Line breaks can only be whitespace between tokens in valid JSON. */
  for (i = start; i + 1 < hc->outq.len; i++)
    if (hc->outq.data[i] == '\n' || hc->outq.data[i] == '\r')
      hc->outq.data[i] = ' ';
  return 0;
}

int acp_http_client_add_header(acp_http_client *hc, const char *name,
                               const char *value) {
  size_t i, nl, vl, start;
  int rv;
  if (hc == NULL || name == NULL || value == NULL || name[0] == 0)
    return ACP_ERR_INVALID_ARGUMENT;
  nl = strlen(name);
  vl = strlen(value);
  for (i = 0; i < nl; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c <= ' ' || c == 0x7f || c == ':')
      return ACP_ERR_INVALID_ARGUMENT;
  }
  if (memchr(value, '\r', vl) || memchr(value, '\n', vl))
    return ACP_ERR_INVALID_ARGUMENT;
  if (hc->started || hc->ended || hc->closing)
    return ACP_ERR_INVALID_STATE;
  start = hc->xhdrs.len;
  /* libcurl reads "Name:" as "remove this header" and "Name;" as "send it
   * empty". */
  rv = acp__buf_append(&hc->xhdrs, name, nl);
  if (strspn(value, " \t") == vl)
    vl = 0; /* blank: send it empty */
  if (rv == 0 && vl == 0)
    rv = acp__buf_putc(&hc->xhdrs, ';');
  if (rv == 0 && vl > 0)
    rv = acp__buf_append(&hc->xhdrs, ": ", 2);
  if (rv == 0)
    rv = acp__buf_append(&hc->xhdrs, value, vl);
  if (rv == 0)
    rv = acp__buf_putc(&hc->xhdrs, 0);
  if (rv != 0) {
    hc->xhdrs.len = start;
    return ACP_ERR_NOMEM;
  }
  return 0;
}

acp_http_transport acp_http_client_transport(const acp_http_client *hc) {
  return hc ? hc->transport : ACP_HTTP_AUTO;
}

const char *acp_http_client_session_id(const acp_http_client *hc) {
  return hc ? hc->session_id : NULL;
}

void acp_http_client_set_get_stream(acp_http_client *hc, int on) {
  if (hc)
    hc->want_get = on != 0;
}

void acp_http_client_set_get_cb(acp_http_client *hc, acp_http_client_get_cb cb,
                                void *user_data) {
  if (hc) {
    hc->get_cb = cb;
    hc->get_ud = user_data;
  }
}

acp_http_get_state acp_http_client_get_state(const acp_http_client *hc) {
  return hc ? hc->get_state : ACP_HTTP_GET_NONE;
}

void acp_http_client_set_oauth(acp_http_client *hc, acp_http_oauth *o) {
  if (hc)
    hc->oauth = o;
}

const char *acp_http_client_www_authenticate(const acp_http_client *hc) {
  return hc && (hc->last_status == 401 || hc->last_status == 403) ? hc->www_auth
                                                                  : NULL;
}

long acp_http_client_last_status(const acp_http_client *hc) {
  return hc ? hc->last_status : 0;
}

const char *acp_http_client_error(const acp_http_client *hc) {
  return hc ? hc->err : "";
}

static void on_handle_closed(uv_handle_t *h) {
  acp_http_client *hc = h->data;
  if (--hc->open_handles == 0) {
    acp_mem m = hc->mem;
    if (hc->close_cb)
      hc->close_cb(hc, hc->close_ud);
    acp__free(&m, hc);
  }
}

static void finish_close(acp_http_client *hc) {
  while (hc->xfers)
    xfer_free(hc->xfers);
  curl_multi_cleanup(hc->multi);
  hc->multi = NULL;
  acp_json_doc_free(hc->doc);
  hc->doc = NULL;
  acp__buf_dispose(&hc->held);
  acp_ndjson_dispose(&hc->out_lines);
  acp__buf_dispose(&hc->line);
  acp__buf_dispose(&hc->outq);
  acp__buf_dispose(&hc->sending);
  acp__buf_dispose(&hc->xhdrs);
  acp__free(&hc->mem, hc->proto);
  acp__free(&hc->mem, hc->init_id);
  hc->proto = hc->init_id = NULL;
  acp__free(&hc->mem, hc->url);
  acp__free(&hc->mem, hc->session_id);
  acp__free(&hc->mem, hc->www_auth);
  acp__free(&hc->mem, hc->endpoint);
  acp__free(&hc->mem, hc->resume_id);
  acp__free(&hc->mem, hc->resume_req);
  hc->url = hc->session_id = hc->endpoint = NULL;
  uv_close((uv_handle_t *)&hc->curl_timer, on_handle_closed);
  uv_close((uv_handle_t *)&hc->exp_timer, on_handle_closed);
  uv_close((uv_handle_t *)&hc->retry_timer, on_handle_closed);
  uv_close((uv_handle_t *)&hc->prepare, on_handle_closed);
}

static void on_delete_wait(uv_timer_t *t) {
  acp_http_client *hc = t->data;
  if (hc->del == NULL || uv_now(hc->loop) >= (uint64_t)hc->retry_ms) {
    uv_timer_stop(t);
    finish_close(hc);
  } else
    uv_timer_start(t, on_delete_wait, 10, 0);
}

static void on_close_deferred(uv_timer_t *t) {
  acp_http_client *hc = t->data;
  /* Abort everything in flight. */
  while (hc->xfers)
    xfer_free(hc->xfers);
  if (hc->close_timeout > 0 && hc->session_id &&
      hc->transport == ACP_HTTP_STREAMABLE &&
      start_xfer(hc, X_DELETE, hc->url, NULL, 0, &hc->del) == 0) {
    hc->retry_ms = (int64_t)(uv_now(hc->loop) + hc->close_timeout);
    uv_timer_start(&hc->retry_timer, on_delete_wait, 10, 0);
    return;
  }
  finish_close(hc);
}

void acp_http_client_close(acp_http_client *hc, uint64_t timeout_ms,
                           acp_http_client_close_cb cb, void *user_data) {
  if (hc == NULL || hc->closing)
    return;
  hc->closing = true;
  hc->close_cb = cb;
  hc->close_ud = user_data;
  hc->close_timeout = timeout_ms;
  uv_prepare_stop(&hc->prepare);
  uv_timer_stop(&hc->exp_timer);
  /* Deferred: this may be called from inside a transfer's callback. */
  uv_timer_start(&hc->retry_timer, on_close_deferred, 0, 0);
}
