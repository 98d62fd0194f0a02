/*
 * The conductor's MCP-over-ACP bridge (include/acp/mcp_bridge.h), sans I/O.
 *
 * Declarations, tokens, the held session lines, the agent's capabilities
 * and the endpoints' framing live here; the MCP-over-ACP connections, the
 * requests in flight and their cancellation are mcp_acp.c's (through
 * mcp_acp_int.h).
 */
#include <stdio.h>
#include <string.h>

#include "acp/mcp_bridge.h"
#include "acp/mcp_acp.h"
#include "acp/ndjson.h"
#include "internal.h"
#include "mcp_acp_int.h"

#define BR_PREFIX "acpbr-"
#define BR_TOKEN_MAX 128
#define BR_DEFAULT_MAX_LINE ((size_t)64 << 20)

struct acp_mcp_bridge_options {
  acp_mem mem;
  acp_mcp_bridge_transport transport;
  char *program;
  size_t max_line;
  acp_mcp_bridge_random_cb random;
  acp_mcp_bridge_prepare_cb prepare;
  acp_mcp_bridge_endpoint_write_cb ep_write;
  acp_mcp_bridge_endpoint_close_cb ep_close;
  acp_mcp_bridge_event_cb event;
  acp_mcp_bridge_trace_cb trace;
};

/* One bridged declaration (a server id offered by a component). */
typedef struct srv {
  struct srv *next;
  char *id;         /* server id, decoded */
  char *name;       /* its declared name (or the id) */
  char token[33];   /* hex secret the endpoint sends first */
  char *session_id; /* its session, once known */
  char *req_id;     /* raw id of the session request that declared it,
                       until the agent answered it */
} srv;

/* One endpoint (an MCP client of the agent). */
typedef struct ep {
  struct ep *next;
  uint64_t id;
  srv *s;         /* NULL until the token was checked */
  acp__mcp_ep *t; /* the MCP-over-ACP connection, NULL once gone */
  acp_ndjson in;  /* its lines: capped at BR_TOKEN_MAX until the token */
  char *gone;     /* its server's provider died: why (requests get it) */
} ep;

struct acp_mcp_bridge {
  acp_mem mem;
  acp_mcp_bridge_options o;
  void *user_data;
  acp__mcp_lines *lines;
  acp_json_doc *doc;
  acp_json_writer *w;
  srv *srvs;
  ep *eps;
  uint64_t next_ep;
  char *sock;
  uint16_t http_port;
  bool http_announced;
  bool http_warned;
  bool no_program_warned;
  char *init_id; /* raw id of the agent's initialize */
  bool caps_seen, agent_acp, agent_http;
  size_t new_pending; /* srvs whose session request is unanswered */
  acp__buf hold;      /* lines held until the agent answered initialize */
  acp__buf out;       /* what to write to the agent */
  acp__buf chunk;     /* a copy of the router's output being filtered */
  acp__buf sent;      /* lines handed to the router */
  acp__buf line;      /* one line written by the bridge itself */
  acp_rpc_iov one;    /* acp_mcp_bridge_to_agent_iov()'s joined output */
  int fatal;
};

/* MARK: - Options */

int acp_mcp_bridge_options_new(acp_mcp_bridge_options **out) {
  acp_mem m;
  acp_mcp_bridge_options *o;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, NULL);
  o = acp__calloc(&m, 1, sizeof(*o));
  *out = o;
  if (o == NULL)
    return ACP_ERR_NOMEM;
  o->mem = m;
  o->transport = ACP_MCP_BRIDGE_TRANSPORT_STDIO;
  return 0;
}

void acp_mcp_bridge_options_free(acp_mcp_bridge_options *o) {
  if (o == NULL)
    return;
  acp__free(&o->mem, o->program);
  acp__free(&o->mem, o);
}

void acp_mcp_bridge_options_set_transport(acp_mcp_bridge_options *o,
                                          acp_mcp_bridge_transport t) {
  if (o != NULL && (t == ACP_MCP_BRIDGE_TRANSPORT_OFF ||
                    t == ACP_MCP_BRIDGE_TRANSPORT_STDIO ||
                    t == ACP_MCP_BRIDGE_TRANSPORT_HTTP))
    o->transport = t;
}

int acp_mcp_bridge_options_set_program(acp_mcp_bridge_options *o,
                                       const char *program) {
  char *p;

  if (o == NULL || program == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  p = acp__strndup(&o->mem, program, strlen(program));
  if (p == NULL)
    return ACP_ERR_NOMEM;
  acp__free(&o->mem, o->program);
  o->program = p;
  return 0;
}

void acp_mcp_bridge_options_set_max_line(acp_mcp_bridge_options *o,
                                         size_t max) {
  if (o != NULL)
    o->max_line = max;
}

void acp_mcp_bridge_options_set_random_cb(acp_mcp_bridge_options *o,
                                          acp_mcp_bridge_random_cb cb) {
  if (o != NULL)
    o->random = cb;
}

void acp_mcp_bridge_options_set_prepare_cb(acp_mcp_bridge_options *o,
                                           acp_mcp_bridge_prepare_cb cb) {
  if (o != NULL)
    o->prepare = cb;
}

void acp_mcp_bridge_options_set_endpoint_write_cb(
    acp_mcp_bridge_options *o, acp_mcp_bridge_endpoint_write_cb cb) {
  if (o != NULL)
    o->ep_write = cb;
}

void acp_mcp_bridge_options_set_endpoint_close_cb(
    acp_mcp_bridge_options *o, acp_mcp_bridge_endpoint_close_cb cb) {
  if (o != NULL)
    o->ep_close = cb;
}

void acp_mcp_bridge_options_set_event_cb(acp_mcp_bridge_options *o,
                                         acp_mcp_bridge_event_cb cb) {
  if (o != NULL)
    o->event = cb;
}

void acp_mcp_bridge_options_set_trace_cb(acp_mcp_bridge_options *o,
                                         acp_mcp_bridge_trace_cb cb) {
  if (o != NULL)
    o->trace = cb;
}

/* MARK: - Small helpers */

/* A log line: `msg`, then up to 300 bytes of `arg`. */
static void log_event(acp_mcp_bridge *b, const char *msg, const char *arg,
                      size_t n) {
  char line[400];

  if (b->o.event == NULL)
    return;
  snprintf(line, sizeof(line), "%s%.*s", msg, (int)(n > 300 ? 300 : n),
           arg != NULL ? arg : "");
  b->o.event(b, ACP_MCP_BRIDGE_EVENT_LOG, line, b->user_data);
}

static void event(acp_mcp_bridge *b, acp_mcp_bridge_event_type type,
                  const char *detail) {
  if (b->o.event != NULL)
    b->o.event(b, type, detail, b->user_data);
}

static void trace(acp_mcp_bridge *b, acp_mcp_bridge_hop_type type,
                  uint64_t endpoint, const srv *s, const char *d, size_t n) {
  acp_mcp_bridge_hop hop;

  if (b->o.trace == NULL)
    return;
  while (n > 0 && d[n - 1] == '\n')
    n--;
  hop.type = type;
  hop.endpoint = endpoint;
  hop.server = s != NULL ? s->name : NULL;
  hop.data = d;
  hop.len = n;
  b->o.trace(b, &hop, b->user_data);
}

static bool str_is(const char *s, size_t n, const char *z) {
  return s != NULL && strlen(z) == n && memcmp(s, z, n) == 0;
}

/* Where `needle` starts within the first 160 bytes of d, or NULL. The
 * router writes canonical envelopes: the id and method come first. */
static const char *find160(const char *d, size_t n, const char *needle) {
  size_t m = strlen(needle), i;

  if (n > 160)
    n = 160;
  for (i = 0; i + m <= n; i++)
    if (d[i] == needle[0] && memcmp(d + i, needle, m) == 0)
      return d + i;
  return NULL;
}

static bool has160(const char *d, size_t n, const char *needle) {
  return find160(d, n, needle) != NULL;
}

static ep *ep_find(const acp_mcp_bridge *b, uint64_t id) {
  ep *e;

  for (e = b->eps; e != NULL; e = e->next)
    if (e->id == id)
      return e;
  return NULL;
}

static ep *ep_of(const acp_mcp_bridge *b, const acp__mcp_ep *t) {
  ep *e;

  for (e = b->eps; e != NULL; e = e->next)
    if (e->t == t)
      return e;
  return NULL;
}

static void ep_unlink(acp_mcp_bridge *b, ep *e) {
  ep **pp;

  for (pp = &b->eps; *pp != NULL; pp = &(*pp)->next)
    if (*pp == e) {
      *pp = e->next;
      break;
    }
  acp_ndjson_dispose(&e->in);
  acp__free(&b->mem, e->gone);
  acp__free(&b->mem, e);
}

/* Forget an endpoint and tell the runtime to close it. */
static void ep_close(acp_mcp_bridge *b, ep *e, bool tell) {
  uint64_t id = e->id;

  if (e->t != NULL)
    acp__mcp_ep_close(e->t, tell);
  ep_unlink(b, e);
  if (b->o.ep_close != NULL)
    b->o.ep_close(b, id, b->user_data);
}

static void srv_free(acp_mcp_bridge *b, srv *s) {
  acp__free(&b->mem, s->id);
  acp__free(&b->mem, s->name);
  acp__free(&b->mem, s->session_id);
  acp__free(&b->mem, s->req_id);
  acp__free(&b->mem, s);
}

/* Remove a server: close its endpoints, revoke its token. */
static void srv_remove(acp_mcp_bridge *b, srv *s) {
  srv **pp;
  ep *e, *next;

  for (e = b->eps; e != NULL; e = next) {
    next = e->next;
    if (e->s == s)
      ep_close(b, e, true);
  }
  for (pp = &b->srvs; *pp != NULL; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  if (s->req_id != NULL && b->new_pending > 0)
    b->new_pending--;
  event(b, ACP_MCP_BRIDGE_EVENT_TOKEN_REMOVED, s->token);
  srv_free(b, s);
}

/* MARK: - The machinery's callbacks */

static int on_ep_write(acp__mcp_ep *t, const char *line, size_t len, void *ud) {
  acp_mcp_bridge *b = ud;
  ep *e = ep_of(b, t);

  if (e == NULL)
    return 0;
  trace(b, ACP_MCP_BRIDGE_HOP_TO_ENDPOINT, e->id, e->s, line, len);
  if (b->o.ep_write != NULL)
    b->o.ep_write(b, e->id, line, len, b->user_data);
  return 0;
}

static int on_ep_open(acp__mcp_ep *t, int status, const char *err,
                      size_t err_len, void *ud) {
  acp_mcp_bridge *b = ud;
  ep *e = ep_of(b, t);

  if (status == 0 || e == NULL)
    return 0;
  log_event(b, "mcp bridge: mcp/connect failed: ", err, err_len);
  e->t = NULL; /* freed by the machinery when this returns */
  ep_close(b, e, false);
  return 0;
}

/* MARK: - Lifetime */

int acp_mcp_bridge_new(acp_mcp_bridge **out, const acp_mcp_bridge_options *opts,
                       void *user_data, const acp_mem *mem) {
  acp_mcp_bridge *b;
  acp_mem m;
  const char *prog;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  b = acp__calloc(&m, 1, sizeof(*b));
  if (b == NULL)
    return ACP_ERR_NOMEM;
  b->mem = m;
  b->user_data = user_data;
  if (opts != NULL)
    b->o = *opts;
  else
    b->o.transport = ACP_MCP_BRIDGE_TRANSPORT_STDIO;
  b->o.mem = m;
  if (b->o.max_line == 0)
    b->o.max_line = BR_DEFAULT_MAX_LINE;
  prog = opts != NULL ? opts->program : NULL;
  b->o.program =
      prog != NULL ? acp__strndup(&b->mem, prog, strlen(prog)) : NULL;
  acp__buf_init(&b->hold, &b->mem, 0);
  acp__buf_init(&b->out, &b->mem, 0);
  acp__buf_init(&b->chunk, &b->mem, 0);
  acp__buf_init(&b->sent, &b->mem, 0);
  acp__buf_init(&b->line, &b->mem, 0);
  rv = prog != NULL && b->o.program == NULL ? ACP_ERR_NOMEM : 0;
  if (rv == 0)
    rv = acp__mcp_lines_new(&b->lines, BR_PREFIX, on_ep_write, on_ep_open, b,
                            &b->mem);
  if (rv == 0)
    rv = acp_json_doc_new(&b->doc, &b->mem);
  if (rv == 0)
    rv = acp_json_writer_new(&b->w, 0, &b->mem);
  if (rv != 0) {
    acp_mcp_bridge_free(b);
    return rv;
  }
  *out = b;
  return 0;
}

void acp_mcp_bridge_free(acp_mcp_bridge *b) {
  acp_mem m;

  if (b == NULL)
    return;
  m = b->mem;
  /* No callback runs: the endpoints' connections go with the machinery. */
  while (b->eps != NULL)
    ep_unlink(b, b->eps);
  acp__mcp_lines_free(b->lines);
  while (b->srvs != NULL) {
    srv *s = b->srvs;

    b->srvs = s->next;
    srv_free(b, s);
  }
  acp_json_doc_free(b->doc);
  acp_json_writer_free(b->w);
  acp__buf_dispose(&b->hold);
  acp__buf_dispose(&b->out);
  acp__buf_dispose(&b->chunk);
  acp__buf_dispose(&b->sent);
  acp__buf_dispose(&b->line);
  acp__free(&m, b->o.program);
  acp__free(&m, b->sock);
  acp__free(&m, b->init_id);
  acp__free(&m, b);
}

void *acp_mcp_bridge_get_user_data(const acp_mcp_bridge *b) {
  return b != NULL ? b->user_data : NULL;
}

int acp_mcp_bridge_set_socket(acp_mcp_bridge *b, const char *path) {
  char *p;

  if (b == NULL || path == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  p = acp__strndup(&b->mem, path, strlen(path));
  if (p == NULL)
    return ACP_ERR_NOMEM;
  acp__free(&b->mem, b->sock);
  b->sock = p;
  return 0;
}

void acp_mcp_bridge_set_http_port(acp_mcp_bridge *b, uint16_t port) {
  if (b != NULL)
    b->http_port = port;
}

int acp_mcp_bridge_agent_native(const acp_mcp_bridge *b) {
  return b != NULL && b->caps_seen && b->agent_acp;
}

/* MARK: - Declarations */

static bool rewrites(const acp_mcp_bridge *b) {
  return b->o.transport != ACP_MCP_BRIDGE_TRANSPORT_OFF && b->caps_seen &&
         !b->agent_acp;
}

/* The agent was sent initialize and has not answered: a session line with
 * acp declarations must wait. */
static bool may_hold(const acp_mcp_bridge *b) {
  return b->o.transport != ACP_MCP_BRIDGE_TRANSPORT_OFF && !b->caps_seen &&
         b->init_id != NULL;
}

static bool session_method(const acp_json_val *m) {
  return ACP_JSON_STR_EQ_LIT(m, "session/new") ||
         ACP_JSON_STR_EQ_LIT(m, "session/load") ||
         ACP_JSON_STR_EQ_LIT(m, "session/resume") ||
         ACP_JSON_STR_EQ_LIT(m, "session/fork");
}

/* session/new, load, resume or fork as the method: one scan (the first
 * "session/ of a canonical envelope is its method). */
static bool is_session_line(const char *d, size_t n) {
  static const char *const verbs[] = {"new\"", "load\"", "resume\"", "fork\""};
  const char *p = find160(d, n, "\"session/");
  size_t i, rest;

  if (p == NULL)
    return false;
  p += 9;
  rest = (size_t)(d + n - p);
  for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
    if (strlen(verbs[i]) <= rest && memcmp(p, verbs[i], strlen(verbs[i])) == 0)
      return true;
  return false;
}

static bool has_acp_decl(acp_mcp_bridge *b, const acp_json_val *root) {
  const acp_json_val *e = acp_json_child(
      ACP__OBJ_GETL(ACP__OBJ_GETL(root, "params"), "mcpServers"));

  for (; e != NULL; e = acp_json_next(e)) {
    const char *id;
    size_t n;

    if (acp_mcp_acp_decl_parse(b->doc, e, &id, &n, NULL) == 0)
      return true;
  }
  return false;
}

static srv *srv_find(const acp_mcp_bridge *b, const char *id, size_t n) {
  srv *s;

  for (s = b->srvs; s != NULL; s = s->next)
    if (str_is(id, n, s->id))
      return s;
  return NULL;
}

static srv *srv_for(acp_mcp_bridge *b, const char *id, size_t n,
                    const acp_json_val *decl) {
  srv *s = srv_find(b, id, n);
  uint8_t rnd[16];
  const char *name;
  size_t nl, i;

  if (s != NULL)
    return s;
  if (b->o.random == NULL || b->o.random(b, rnd, b->user_data) != 0)
    return NULL;
  s = acp__calloc(&b->mem, 1, sizeof(*s));
  if (s == NULL)
    return NULL;
  s->id = acp__strndup(&b->mem, id, n);
  if (acp_json_doc_str(b->doc, ACP__OBJ_GETL(decl, "name"), &name, &nl) != 0) {
    name = id;
    nl = n;
  }
  s->name = s->id != NULL ? acp__strndup(&b->mem, name, nl) : NULL;
  if (s->name == NULL) {
    srv_free(b, s);
    return NULL;
  }
  for (i = 0; i < 16; i++)
    snprintf(s->token + 2 * i, 3, "%02x", rnd[i]);
  s->next = b->srvs;
  b->srvs = s;
  event(b, ACP_MCP_BRIDGE_EVENT_TOKEN_ADDED, s->token);
  return s;
}

/* Tie a new declaration to its session: known now for load/resume/fork,
 * from the agent's answer for session/new. Until the agent answered the
 * request, its id is kept: a refused one takes the declarations it made
 * away (session_answer()), or their tokens would stay good for a session
 * nobody will close. */
static void srv_bind(acp_mcp_bridge *b, srv *s, const acp_json_val *root,
                     const acp_json_val *params) {
  const char *sid;
  size_t sl, il;
  const char *ir = acp_json_raw(ACP__OBJ_GETL(root, "id"), &il);

  if (s->session_id != NULL || s->req_id != NULL)
    return;
  if (!ACP_JSON_STR_EQ_LIT(ACP__OBJ_GETL(root, "method"), "session/new") &&
      acp_json_doc_str(b->doc, ACP__OBJ_GETL(params, "sessionId"), &sid, &sl) ==
          0)
    s->session_id = acp__strndup(&b->mem, sid, sl);
  if (ir != NULL && (s->req_id = acp__strndup(&b->mem, ir, il)) != NULL)
    b->new_pending++;
}

/* The declaration the agent gets for bridged server `s` (declared as `e`):
 * Streamable HTTP on the helper's port with the server's bearer token, or
 * the stdio shim with the socket and token as arguments. */
static void write_decl(acp_mcp_bridge *b, acp_json_writer *w, const srv *s,
                       const acp_json_val *e, bool http) {
  const char *name;
  size_t nl;

  acp_json_write_obj_begin(w);
  if (http) {
    ACP__W_KEYL(w, "type");
    acp_json_write_strz(w, "http");
  }
  ACP__W_KEYL(w, "name");
  if (acp_json_doc_str(b->doc, ACP__OBJ_GETL(e, "name"), &name, &nl) == 0)
    acp_json_write_str(w, name, nl);
  else
    acp_json_write_strz(w, s->id);
  if (http) {
    char url[64], bearer[48];

    snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp",
             (unsigned)b->http_port);
    snprintf(bearer, sizeof(bearer), "Bearer %s", s->token);
    ACP__W_KEYL(w, "url");
    acp_json_write_strz(w, url);
    ACP__W_KEYL(w, "headers");
    acp_json_write_arr_begin(w);
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "name");
    acp_json_write_strz(w, "Authorization");
    ACP__W_KEYL(w, "value");
    acp_json_write_strz(w, bearer);
    acp_json_write_obj_end(w);
    acp_json_write_arr_end(w);
  } else {
    ACP__W_KEYL(w, "command");
    acp_json_write_strz(w, b->o.program);
    ACP__W_KEYL(w, "args");
    acp_json_write_arr_begin(w);
    acp_json_write_strz(w, "mcp-shim");
    acp_json_write_strz(w, b->sock);
    acp_json_write_strz(w, s->token);
    acp_json_write_arr_end(w);
    ACP__W_KEYL(w, "env");
    acp_json_write_arr_begin(w);
    acp_json_write_arr_end(w);
  }
  acp_json_write_obj_end(w);
}

/* Which transport the agent gets now (false: stdio). */
static bool choose_http(acp_mcp_bridge *b) {
  if (b->o.transport != ACP_MCP_BRIDGE_TRANSPORT_HTTP)
    return false;
  if (!b->agent_http) {
    if (!b->http_warned)
      log_event(b,
                "mcp bridge: the agent does not advertise "
                "mcpCapabilities.http; bridging over stdio",
                NULL, 0);
    b->http_warned = true;
    return false;
  }
  if (b->o.prepare(b, ACP_MCP_BRIDGE_TRANSPORT_HTTP, b->user_data) != 0) {
    if (!b->http_warned)
      log_event(b,
                "mcp bridge: cannot start the HTTP bridge; bridging over "
                "stdio",
                NULL, 0);
    b->http_warned = true;
    return false;
  }
  if (!b->http_announced) {
    /* The helper starts now: every token so far becomes valid there. */
    srv *s;

    b->http_announced = true;
    for (s = b->srvs; s != NULL; s = s->next)
      event(b, ACP_MCP_BRIDGE_EVENT_TOKEN_ADDED, s->token);
  }
  return true;
}

/* session/new (load, resume, fork) to the agent: rewrite acp declarations.
 * Returns true when b->w holds the new line. */
static bool rewrite_session(acp_mcp_bridge *b, const acp_json_val *root) {
  const acp_json_val *params = ACP__OBJ_GETL(root, "params");
  const acp_json_val *list = ACP__OBJ_GETL(params, "mcpServers");
  const acp_json_val *e, *k, *q;
  acp_json_writer *w = b->w;
  bool http;

  if (!has_acp_decl(b, root))
    return false;
  if (b->o.program == NULL) {
    if (!b->no_program_warned)
      log_event(b,
                "mcp bridge: no bridge program is set; MCP-over-ACP "
                "declarations reach the agent unchanged",
                NULL, 0);
    b->no_program_warned = true;
    return false;
  }
  if (b->o.prepare == NULL ||
      b->o.prepare(b, ACP_MCP_BRIDGE_TRANSPORT_STDIO, b->user_data) != 0 ||
      b->sock == NULL)
    return false;
  http = choose_http(b);
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(root); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const char *key;
    size_t kl;

    if (acp_json_doc_str(b->doc, k, &key, &kl) != 0)
      return false;
    acp_json_write_key(w, key, kl);
    if (!ACP_JSON_STR_EQ_LIT(k, "params")) {
      acp_json_write_val(w, acp_json_next(k));
      continue;
    }
    acp_json_write_obj_begin(w);
    for (q = acp_json_child(params); q != NULL;
         q = acp_json_next(acp_json_next(q))) {
      if (acp_json_doc_str(b->doc, q, &key, &kl) != 0)
        return false;
      acp_json_write_key(w, key, kl);
      if (!ACP_JSON_STR_EQ_LIT(q, "mcpServers")) {
        acp_json_write_val(w, acp_json_next(q));
        continue;
      }
      acp_json_write_arr_begin(w);
      for (e = acp_json_child(list); e != NULL; e = acp_json_next(e)) {
        const char *id;
        size_t n;
        srv *s;

        if (acp_mcp_acp_decl_parse(b->doc, e, &id, &n, NULL) != 0 ||
            (s = srv_for(b, id, n, e)) == NULL) {
          acp_json_write_val(w, e);
          continue;
        }
        srv_bind(b, s, root, params);
        write_decl(b, w, s, e, http);
      }
      acp_json_write_arr_end(w);
    }
    acp_json_write_obj_end(w);
  }
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w) == 0;
}

/* session/close to the agent: close the bridged connections of that
 * session and forget its declarations (their tokens stop working). */
static void session_end(acp_mcp_bridge *b, const acp_json_val *root) {
  const acp_json_val *params = ACP__OBJ_GETL(root, "params");
  const char *sid;
  size_t sl;
  srv *s, *next;
  char *copy;

  if (acp_json_doc_str(b->doc, ACP__OBJ_GETL(params, "sessionId"), &sid, &sl) !=
      0)
    return;
  copy = acp__strndup(&b->mem, sid, sl); /* the doc is reused below */
  if (copy == NULL)
    return;
  for (s = b->srvs; s != NULL; s = next) {
    next = s->next;
    if (s->session_id != NULL && str_is(copy, sl, s->session_id))
      srv_remove(b, s);
  }
  acp__free(&b->mem, copy);
}

/* MARK: - Router -> agent */

static bool interesting(const acp_mcp_bridge *b, const char *d, size_t n) {
  if (b->hold.len > 0 || (may_hold(b) && is_session_line(d, n)))
    return true;
  if (acp__mcp_lines_busy(b->lines) && has160(d, n, "\"id\":\"" BR_PREFIX))
    return true;
  if (b->eps != NULL &&
      (has160(d, n, "\"mcp/message\"") || has160(d, n, "\"mcp/disconnect\"") ||
       has160(d, n, "\"$/cancel_request\"")))
    return true;
  if (!b->caps_seen && has160(d, n, "\"initialize\""))
    return true;
  if (rewrites(b) && is_session_line(d, n))
    return true;
  return b->srvs != NULL && has160(d, n, "\"session/close\"");
}

static int out_line(acp_mcp_bridge *b, const char *d, size_t n) {
  int rv;

  trace(b, ACP_MCP_BRIDGE_HOP_TO_AGENT, 0, NULL, d, n);
  rv = acp__buf_append(&b->out, d, n);
  if (rv == 0)
    rv = acp__buf_putc(&b->out, '\n');
  return rv;
}

static int hold_line(acp_mcp_bridge *b, const char *d, size_t n) {
  int rv = acp__buf_append(&b->hold, d, n);

  if (rv == 0)
    rv = acp__buf_putc(&b->hold, '\n');
  return rv;
}

/* An endpoint the provider closed (mcp/disconnect). */
static void provider_closed(acp_mcp_bridge *b, void *closed) {
  ep *e;

  for (e = b->eps; e != NULL; e = e->next)
    if (e == closed) {
      e->t = NULL; /* freed by the machinery */
      ep_close(b, e, false);
      return;
    }
}

/* One line the router wrote for the agent. */
static int filter_line(acp_mcp_bridge *b, const char *d, size_t n) {
  const acp_json_val *root, *m, *id;
  void *closed = NULL;
  int rv;

  if (b->hold.len > 0)
    return hold_line(b, d, n); /* keep the order behind a held line */
  if (!interesting(b, d, n) || acp_json_doc_parse(b->doc, d, n, NULL) != 0 ||
      acp_json_type_of(root = acp_json_doc_root(b->doc)) != ACP_JSON_OBJECT)
    return out_line(b, d, n);
  m = ACP__OBJ_GETL(root, "method");
  id = ACP__OBJ_GETL(root, "id");
  if (m != NULL && ACP_JSON_STR_EQ_LIT(m, "initialize") && id != NULL &&
      !b->caps_seen) {
    size_t il;
    const char *ir = acp_json_raw(id, &il);

    acp__free(&b->mem, b->init_id);
    b->init_id = acp__strndup(&b->mem, ir, il);
    if (b->init_id == NULL)
      return ACP_ERR_NOMEM;
    return out_line(b, d, n);
  }
  if (m != NULL && may_hold(b) && session_method(m) && has_acp_decl(b, root))
    return hold_line(b, d, n);
  if (m != NULL && rewrites(b) && session_method(m) &&
      rewrite_session(b, root)) {
    size_t len;
    const char *s = acp_json_writer_data(b->w, &len);

    return out_line(b, s, len);
  }
  if (m == NULL || !ACP_JSON_STR_EQ_LIT(m, "session/close")) {
    rv = acp__mcp_lines_dispatch(b->lines, b->doc, root, &closed);
    if (rv == 0) {
      trace(b, ACP_MCP_BRIDGE_HOP_TO_BRIDGE, 0, NULL, d, n);
      if (closed != NULL)
        provider_closed(b, closed);
      return 0;
    }
    if (rv != ACP_MCP_ACP_NOT_MINE)
      return rv;
  } else {
    session_end(b, root);
  }
  return out_line(b, d, n);
}

/* Filter the lines in b->chunk (`rv`: how filling it went) into b->out. */
static acp_ssize filter_chunk(acp_mcp_bridge *b, int rv, const char **out) {
  size_t off = 0;
  size_t n = b->chunk.len;

  acp__buf_clear(&b->out);
  while (rv == 0 && off < n) {
    const char *s = b->chunk.data + off;
    const char *nl = memchr(s, '\n', n - off);
    size_t ln = nl ? (size_t)(nl - s) : n - off;

    if (ln > 0)
      rv = filter_line(b, s, ln);
    off += ln + 1;
  }
  if (rv != 0) {
    b->fatal = rv;
    return rv;
  }
  *out = b->out.data;
  return (acp_ssize)b->out.len;
}

static acp_ssize filter(acp_mcp_bridge *b, const char *data, size_t n,
                        const char **out) {
  acp__buf_clear(&b->chunk);
  return filter_chunk(b, acp__buf_append(&b->chunk, data, n), out);
}

acp_ssize acp_mcp_bridge_to_agent(acp_mcp_bridge *b, const char *data,
                                  size_t len, const char **out) {
  size_t off = 0;
  bool any = false;

  if (b == NULL || out == NULL || (data == NULL && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  if (b->fatal)
    return b->fatal;
  *out = data;
  /* Fast path: nothing for the bridge in this chunk, write it as is. */
  while (off < len && !any) {
    const char *s = data + off;
    const char *nl = memchr(s, '\n', len - off);
    size_t ln = nl ? (size_t)(nl - s) : len - off;

    any = interesting(b, s, ln);
    off += ln + 1;
  }
  if (!any) {
    if (b->o.trace != NULL)
      for (off = 0; off < len;) {
        const char *s = data + off;
        const char *nl = memchr(s, '\n', len - off);
        size_t ln = nl ? (size_t)(nl - s) : len - off;

        if (ln > 0)
          trace(b, ACP_MCP_BRIDGE_HOP_TO_AGENT, 0, NULL, s, ln);
        off += ln + 1;
      }
    return (acp_ssize)len;
  }
  return filter(b, data, len, out);
}

/* Bytes of a line's head that interesting() looks at: find160()'s 160,
 * and room after it for the method is_session_line() compares. */
#define HEAD_MAX 176

/* The head of the line starting at in[i] + off (up to HEAD_MAX bytes, not
 * past its newline), gathered across pieces into `head`. */
static size_t iov_head(const acp_rpc_iov *in, size_t nin, size_t i, size_t off,
                       char *head) {
  size_t h = 0;

  for (; i < nin && h < HEAD_MAX; i++, off = 0) {
    const char *d = in[i].data + off;
    size_t n = in[i].len - off;
    size_t lim = n < HEAD_MAX - h ? n : HEAD_MAX - h;
    const char *nl = lim > 0 ? memchr(d, '\n', lim) : NULL;
    size_t take = nl ? (size_t)(nl - d) : lim;

    memcpy(head + h, d, take);
    h += take;
    if (nl != NULL)
      break;
  }
  return h;
}

acp_ssize acp_mcp_bridge_to_agent_iov(acp_mcp_bridge *b, const acp_rpc_iov *in,
                                      size_t nin, const acp_rpc_iov **out,
                                      size_t *nout) {
  size_t total = 0, i;
  int rv = 0;
  const char *d;
  acp_ssize n;

  if (out != NULL)
    *out = NULL;
  if (nout != NULL)
    *nout = 0;
  if (b == NULL || out == NULL || nout == NULL || (in == NULL && nin > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  for (i = 0; i < nin; i++) {
    if (in[i].data == NULL && in[i].len > 0)
      return ACP_ERR_INVALID_ARGUMENT;
    if (acp__add_overflow(total, in[i].len, &total) != 0 ||
        total > (size_t)PTRDIFF_MAX)
      return ACP_ERR_INVALID_ARGUMENT;
  }
  if (b->fatal)
    return b->fatal;
  /* Fast path, as acp_mcp_bridge_to_agent()'s: nothing for the bridge in
   * any line (judged by its head, gathered across pieces), so the pieces go
   * to the agent as they are, a borrowed 1 MiB text included. A tracer or
   * held lines take the slow path, which sees whole lines. */
  if (b->o.trace == NULL && b->hold.len == 0) {
    bool any = false;
    bool at_start = true;
    char head[HEAD_MAX];

    for (i = 0; i < nin && !any; i++) {
      size_t off = 0;

      while (off < in[i].len) {
        const char *nl;

        if (at_start) {
          any = interesting(b, head, iov_head(in, nin, i, off, head));
          if (any)
            break;
          at_start = false;
        }
        nl = memchr(in[i].data + off, '\n', in[i].len - off);
        if (nl == NULL)
          break;
        off = (size_t)(nl - in[i].data) + 1;
        at_start = true;
      }
    }
    if (!any) {
      *out = in;
      *nout = nin;
      return (acp_ssize)total;
    }
  }
  /* Something is for the bridge: join the pieces and filter the lines. */
  acp__buf_clear(&b->chunk);
  for (i = 0; i < nin && rv == 0; i++)
    rv = acp__buf_append(&b->chunk, in[i].data, in[i].len);
  n = filter_chunk(b, rv, &d);
  if (n <= 0)
    return n;
  b->one.data = d;
  b->one.len = (size_t)n;
  *out = &b->one;
  *nout = 1;
  return n;
}

int acp_mcp_bridge_want_release(const acp_mcp_bridge *b) {
  return b != NULL && b->hold.len > 0 && b->caps_seen;
}

acp_ssize acp_mcp_bridge_release(acp_mcp_bridge *b, const char **out) {
  acp__buf held;
  acp_ssize n;

  if (b == NULL || out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (!acp_mcp_bridge_want_release(b))
    return 0;
  held = b->hold;
  acp__buf_init(&b->hold, &b->mem, 0);
  n = filter(b, held.data, held.len, out);
  acp__buf_dispose(&held);
  return n;
}

/* MARK: - Agent -> router */

/* The agent answered a session request we rewrote: a session/new's
 * answer names the session of its declarations; a refused request takes
 * the declarations it made away. */
static void session_answer(acp_mcp_bridge *b, const char *line, size_t len) {
  const acp_json_val *root, *res;
  const char *ir, *sid = NULL;
  size_t il, sl = 0;
  srv *s, *next;

  if (acp_json_doc_parse(b->doc, line, len, NULL) != 0)
    return;
  root = acp_json_doc_root(b->doc);
  ir = acp_json_raw(ACP__OBJ_GETL(root, "id"), &il);
  if (ir == NULL || ACP__OBJ_GETL(root, "method") != NULL)
    return;
  res = ACP__OBJ_GETL(root, "result");
  (void)acp_json_doc_str(b->doc, ACP__OBJ_GETL(res, "sessionId"), &sid, &sl);
  for (s = b->srvs; s != NULL; s = next) {
    next = s->next;
    if (s->req_id == NULL || !str_is(ir, il, s->req_id))
      continue;
    if (res == NULL) {
      srv_remove(b, s);
      continue;
    }
    acp__free(&b->mem, s->req_id);
    s->req_id = NULL;
    b->new_pending--;
    if (sid != NULL && s->session_id == NULL)
      s->session_id = acp__strndup(&b->mem, sid, sl);
  }
}

/* The initialize answer with mcpCapabilities.acp, in b->w. */
static bool caps_rewrite(acp_mcp_bridge *b, const acp_json_val *root,
                         const acp_json_val *res) {
  acp_json_writer *w = b->w;
  const acp_json_val *k;

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(root); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const char *key;
    size_t kl;
    const acp_json_val *v = acp_json_next(k);
    bool seen = false;
    const acp_json_val *q;

    if (acp_json_doc_str(b->doc, k, &key, &kl) != 0)
      return false;
    acp_json_write_key(w, key, kl);
    if (v != res) {
      acp_json_write_val(w, v);
      continue;
    }
    acp_json_write_obj_begin(w);
    for (q = acp_json_child(res); q != NULL;
         q = acp_json_next(acp_json_next(q))) {
      const acp_json_val *qv = acp_json_next(q);

      if (acp_json_doc_str(b->doc, q, &key, &kl) != 0)
        return false;
      acp_json_write_key(w, key, kl);
      if (!seen && ACP_JSON_STR_EQ_LIT(q, "agentCapabilities") &&
          acp_json_type_of(qv) == ACP_JSON_OBJECT) {
        size_t cl;
        const char *cr = acp_json_raw(qv, &cl);

        seen = true;
        if (acp_mcp_acp_caps_enable(w, cr, cl) != 0)
          return false;
      } else {
        acp_json_write_val(w, qv);
      }
    }
    if (!seen) {
      ACP__W_KEYL(w, "agentCapabilities");
      if (acp_mcp_acp_caps_enable(w, NULL, 0) != 0)
        return false;
    }
    acp_json_write_obj_end(w);
  }
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w) == 0;
}

acp_ssize acp_mcp_bridge_from_agent(acp_mcp_bridge *b, const char *line,
                                    size_t len, const char **out) {
  const acp_json_val *root, *res, *caps;
  size_t il;
  const char *ir;
  bool http = false;

  if (b == NULL || out == NULL || (line == NULL && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  *out = line;
  /* Only while a session request is out: any answer may be its own (a
   * load's result has no sessionId, a refusal none either). */
  if (b->new_pending > 0 && !has160(line, len, "\"method\""))
    session_answer(b, line, len);
  if (b->caps_seen || b->init_id == NULL ||
      find160(line, len, b->init_id) == NULL ||
      acp_json_doc_parse(b->doc, line, len, NULL) != 0)
    return (acp_ssize)len;
  root = acp_json_doc_root(b->doc);
  ir = acp_json_raw(ACP__OBJ_GETL(root, "id"), &il);
  res = ACP__OBJ_GETL(root, "result");
  if (ir == NULL || !str_is(ir, il, b->init_id) ||
      ACP__OBJ_GETL(root, "method") != NULL)
    return (acp_ssize)len;
  b->caps_seen = true;
  if (acp_json_type_of(res) != ACP_JSON_OBJECT)
    return (acp_ssize)len;
  {
    int64_t pv = 1;

    /* ACP v2 (or later) has no agentCapabilities and another MCP-over-ACP
     * binding: the bridge stays out of such a chain, which then carries
     * every byte unchanged. */
    if (acp_json_get_int64(ACP__OBJ_GETL(res, "protocolVersion"), &pv) == 0 &&
        pv > 1) {
      b->agent_acp = true;
      return (acp_ssize)len;
    }
  }
  caps = ACP__OBJ_GETL(res, "agentCapabilities");
  b->agent_acp = acp_mcp_acp_caps_has_acp(caps) != 0;
  if (acp_json_get_bool(
          ACP__OBJ_GETL(ACP__OBJ_GETL(caps, "mcpCapabilities"), "http"),
          &http) == 0)
    b->agent_http = http;
  if (b->agent_acp || !caps_rewrite(b, root, res))
    return (acp_ssize)len;
  *out = acp_json_writer_data(b->w, &il);
  return (acp_ssize)il;
}

acp_ssize acp_mcp_bridge_send(acp_mcp_bridge *b, const char **data) {
  acp__buf *up;

  if (b == NULL || data == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  up = acp__mcp_lines_up(b->lines);
  *data = NULL;
  if (up->len == 0)
    return 0;
  /* Swap the machinery's buffer with ours: what it writes next (while the
   * caller routes these lines) goes to the other one, and neither is
   * allocated again. Both use our allocator. */
  {
    acp__buf tmp = b->sent;

    b->sent = *up;
    *up = tmp;
    b->sent.mem = &b->mem;
    up->mem = &b->mem;
    up->len = 0;
  }
  *data = b->sent.data;
  return (acp_ssize)b->sent.len;
}

/* MARK: - Endpoints */

int acp_mcp_bridge_endpoint_new(acp_mcp_bridge *b, uint64_t *out) {
  ep *e;

  if (b == NULL || out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = 0;
  e = acp__calloc(&b->mem, 1, sizeof(*e));
  if (e == NULL)
    return ACP_ERR_NOMEM;
  e->id = ++b->next_ep;
  acp_ndjson_init(&e->in, BR_TOKEN_MAX, &b->mem);
  e->next = b->eps;
  b->eps = e;
  *out = e->id;
  return 0;
}

/* The first line: the token of a server. */
static int first_line(acp_mcp_bridge *b, ep *e, const char *line, size_t len) {
  srv *s;
  int rv;

  for (s = b->srvs; s != NULL; s = s->next) {
    unsigned char diff = 0;
    size_t i;

    if (len != 32)
      continue;
    for (i = 0; i < 32; i++)
      diff |= (unsigned char)(s->token[i] ^ line[i]);
    if (diff == 0)
      break;
  }
  if (s == NULL) {
    log_event(b, "mcp bridge: refused a connection with a wrong token", NULL,
              0);
    ep_close(b, e, false);
    return 0;
  }
  e->s = s;
  rv = acp__mcp_lines_connect(b->lines, s->id, ACP_MCP_ACP_SHAPE_M1, e, &e->t);
  if (rv != 0)
    ep_close(b, e, false);
  return rv == ACP_ERR_NOMEM ? rv : 0;
}

/* A line for a server whose provider is gone: a request is answered with
 * the MCP error at once; nothing is routed. */
static int gone_line(acp_mcp_bridge *b, ep *e, const char *line, size_t len) {
  const acp_json_val *root, *id;
  acp_json_writer *w = b->w;
  size_t n;
  const char *d;
  int rv = acp_json_doc_parse(b->doc, line, len, NULL);

  if (rv != 0)
    return rv == ACP_ERR_NOMEM ? rv : 0;
  root = acp_json_doc_root(b->doc);
  id = ACP__OBJ_GETL(root, "id");
  if (id == NULL || ACP__OBJ_GETL(root, "method") == NULL)
    return 0;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "jsonrpc");
  acp_json_write_strz(w, "2.0");
  ACP__W_KEYL(w, "id");
  acp_json_write_val(w, id);
  ACP__W_KEYL(w, "error");
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "code");
  acp_json_write_int(w, ACP_MCP_ACP_SERVER_UNAVAILABLE);
  ACP__W_KEYL(w, "message");
  acp_json_write_strz(w, e->gone);
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  rv = acp_json_writer_error(w);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM ? rv : 0;
  d = acp_json_writer_data(w, &n);
  acp__buf_clear(&b->line);
  rv = acp__buf_append(&b->line, d, n);
  if (rv == 0)
    rv = acp__buf_putc(&b->line, '\n');
  if (rv != 0)
    return rv;
  trace(b, ACP_MCP_BRIDGE_HOP_TO_ENDPOINT, e->id, NULL, b->line.data,
        b->line.len);
  if (b->o.ep_write != NULL)
    b->o.ep_write(b, e->id, b->line.data, b->line.len, b->user_data);
  return 0;
}

static int ep_line(acp_mcp_bridge *b, ep *e, const char *line, size_t len) {
  uint64_t id = e->id;
  int rv;

  if (e->gone != NULL)
    return gone_line(b, e, line, len);
  if (e->s != NULL) {
    trace(b, ACP_MCP_BRIDGE_HOP_FROM_ENDPOINT, e->id, e->s, line, len);
    return acp__mcp_ep_line(e->t, line, len);
  }
  rv = first_line(b, e, line, len);
  if (rv == 0 && ep_find(b, id) == e && e->s != NULL) {
    /* Accepted: MCP lines from here, up to the bridge's cap. The line was
     * the framer's last output, so nothing is carried. */
    acp_ndjson_dispose(&e->in);
    acp_ndjson_init(&e->in, b->o.max_line, &b->mem);
  }
  return rv;
}

/* An over-long line: before the token, a refusal like a wrong token; after
 * it, the answer every libacp component gives (acp/ndjson.h, rule 3), and
 * the endpoint goes on. Its peer is the agent's MCP client, which `acp mcp
 * relay` would answer the same way. */
static void ep_overlong(acp_mcp_bridge *b, ep *e) {
  char reply[ACP_NDJSON_REPLY_MAX + 1];
  size_t n;

  acp_ndjson_dispose(&e->in); /* give the carry back; the drop goes on */
  if (e->s == NULL && e->gone == NULL) {
    log_event(b,
              "mcp bridge: refused a connection whose first line is not "
              "a token",
              NULL, 0);
    ep_close(b, e, false);
    return;
  }
  n = acp_ndjson_overlong_reply(reply, sizeof(reply), b->o.max_line);
  if (n == 0)
    return;
  log_event(b, "mcp bridge: answered an over-long line from an endpoint", NULL,
            0);
  reply[n++] = '\n';
  trace(b, ACP_MCP_BRIDGE_HOP_TO_ENDPOINT, e->id, e->s, reply, n);
  if (b->o.ep_write != NULL)
    b->o.ep_write(b, e->id, reply, n, b->user_data);
}

int acp_mcp_bridge_endpoint_recv(acp_mcp_bridge *b, uint64_t endpoint,
                                 const char *data, size_t len) {
  ep *e;
  uint64_t id = endpoint;
  int rv = 0;

  if (b == NULL || (data == NULL && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  if (b->fatal)
    return b->fatal;
  e = ep_find(b, endpoint);
  if (e == NULL)
    return ACP_ERR_NOT_FOUND;
  while (len > 0 && rv == 0) {
    const char *line;
    size_t used, n;
    int r = acp_ndjson_next(&e->in, data, len, &used, &line, &n);

    data += used;
    len -= used;
    if (r == ACP_NDJSON_NEED_MORE)
      break;
    if (r == ACP_NDJSON_LINE)
      rv = ep_line(b, e, line, n);
    else if (r == ACP_NDJSON_OVERLONG)
      ep_overlong(b, e);
    else
      rv = r;
    if (ep_find(b, id) != e)
      break; /* closed by that line */
  }
  if (rv != 0)
    b->fatal = rv;
  return rv;
}

int acp_mcp_bridge_endpoint_accepted(const acp_mcp_bridge *b,
                                     uint64_t endpoint) {
  const ep *e = b != NULL ? ep_find(b, endpoint) : NULL;

  return e != NULL && e->s != NULL;
}

void acp_mcp_bridge_endpoint_closed(acp_mcp_bridge *b, uint64_t endpoint) {
  ep *e = b != NULL ? ep_find(b, endpoint) : NULL;

  if (e == NULL)
    return;
  if (e->t != NULL)
    acp__mcp_ep_close(e->t, true);
  ep_unlink(b, e);
}

size_t acp_mcp_bridge_endpoint_count(const acp_mcp_bridge *b) {
  const ep *e;
  size_t n = 0;

  for (e = b != NULL ? b->eps : NULL; e != NULL; e = e->next)
    n++;
  return n;
}

int acp_mcp_bridge_server_gone(acp_mcp_bridge *b, const char *server_id,
                               size_t len, const char *reason) {
  srv *s = b != NULL ? srv_find(b, server_id, len) : NULL;
  ep *e, *next;
  acp__buf msg;

  if (s == NULL)
    return 0;
  acp__buf_init(&msg, &b->mem, 0);
  if (acp__buf_append(&msg, "MCP server '", 12) != 0 ||
      acp__buf_append(&msg, s->name, strlen(s->name)) != 0 ||
      acp__buf_append(&msg, "' is unavailable: its provider is gone", 38) !=
          0 ||
      (reason != NULL && (acp__buf_append(&msg, " (", 2) != 0 ||
                          acp__buf_append(&msg, reason, strlen(reason)) != 0 ||
                          acp__buf_putc(&msg, ')') != 0)) ||
      acp__buf_putc(&msg, '\0') != 0)
    acp__buf_clear(&msg);
  for (e = b->eps; e != NULL; e = next) {
    const char *why = msg.len > 0 ? msg.data : "MCP server unavailable";

    next = e->next;
    if (e->s != s)
      continue;
    /* The connection ends; the endpoint stays, answering every request
     * with the error (its MCP client learns why), until it ends. */
    if (e->t != NULL)
      acp__mcp_ep_fail(e->t, ACP_MCP_ACP_SERVER_UNAVAILABLE, why);
    e->t = NULL;
    e->s = NULL;
    e->gone = acp__strndup(&b->mem, why, strlen(why));
    if (e->gone == NULL)
      ep_close(b, e, false);
  }
  acp__buf_dispose(&msg);
  if (b->o.event != NULL) {
    char line[400];

    snprintf(line, sizeof(line),
             "mcp bridge: server '%.200s' is gone with its provider; its "
             "connections are closed, their calls answered with an error",
             s->name);
    b->o.event(b, ACP_MCP_BRIDGE_EVENT_LOG, line, b->user_data);
  }
  srv_remove(b, s);
  return 1;
}
