/*
 * MCP over ACP (RFD "MCP-over-ACP"): the provider (client or proxy side)
 * and the consumer (agent side), both sans I/O.
 *
 * Both sides are built on one object, the tunnel: an inner NDJSON session
 * (an acp_mcp_conn for a provider, an acp_mcp_client for a consumer) whose
 * requests, notifications and answers are carried as outer `mcp/message`
 * messages on the ACP connection. Incoming outer requests get a fresh inner
 * id; inner requests become outer requests whose answers are turned back
 * into inner responses.
 */
#include <stdio.h>
#include <string.h>

#include "acp/mcp_acp.h"
#include "acp/ndjson.h"
#include "internal.h"
#include "mcp_acp_int.h"

#define TUNNEL_MAGIC 0x4d435041u /* "MCPA" */
#define ERR_UNKNOWN_CONN "Unknown MCP connection"
#define ERR_UNKNOWN_SERVER "Unknown MCP server"

typedef struct tunnel tunnel;
typedef struct owner owner;
typedef struct out_req out_req;

/*
 * How an owner talks to its outer peer: one table per kind of owner (a
 * client, a proxy or an agent role object, or lines), set once when the
 * owner is created or attached; NULL until then. The lines owner is no role
 * object but a stream of NDJSON lines written as if by an agent (the
 * conductor's bridge, mcp_acp_int.h); its request handles are the raw outer
 * ids, NUL-terminated, owned by the in_req that holds them (owns_req).
 */
typedef struct peer_ops {
  int (*request)(owner *o, const char *method, const char *params, size_t len,
                 out_req *rec);
  int (*notify)(owner *o, const char *method, const char *params, size_t len);
  int (*respond)(owner *o, void *req, const char *result, size_t len);
  int (*error)(owner *o, void *req, int64_t code, const char *message,
               const char *data, size_t data_len);
  bool owns_req;
} peer_ops;

/* An outer request we sent (an inner request travelling outward, or an
 * mcp/connect). Owned by the owner: it survives its tunnel, because the
 * role object keeps our pointer until the answer comes. */
struct out_req {
  struct out_req *next, *prev;
  owner *own;
  tunnel *t;      /* NULL once the tunnel is gone */
  char *inner_id; /* raw JSON id of the inner request, NULL for connect */
  int64_t outer_id;
  int64_t m2_rid; /* consumer M2: the requestId we gave it */
  bool is_connect;
  bool m2;          /* consumer M2: the answer is a {result}/{error} carrier */
  bool m2_discover; /* ... to server/discover sent for the initialize */
  bool cancelled;   /* lines: the inner request was cancelled */
};

/* An outer request we received and fed to the inner session. */
typedef struct in_req {
  struct in_req *next, *prev;
  void *req; /* role request object; NULL for a synthetic one */
  int64_t inner_id;
  char *outer_id; /* raw JSON id of the outer request */
  bool carrier;   /* M2: answer {"result"} / {"error"} */
} in_req;

struct tunnel {
  uint32_t magic;
  tunnel *next, *prev;
  owner *own;
  acp_mcp_acp_shape shape;
  char *conn_id;
  char *m2_request_id; /* raw JSON */
  acp_mcp_acp_decl *decl;
  acp_mcp_conn *conn;     /* provider */
  acp_mcp_client *client; /* consumer, borrowed */
  char *server_id;        /* consumer */
  char *m2_init;          /* consumer M2: the initialize params (raw JSON) */
  bool endpoint;          /* lines: the inner side is a byte endpoint */
  void *ep_ud;
  acp_mcp_acp_open_cb open_cb;
  void *open_ud;
  in_req *ins;
  int64_t next_inner;
  acp__buf line;   /* inner input being fed */
  acp__buf out;    /* an endpoint's lines before its connection opened */
  acp_ndjson outl; /* the inner session's output, cut into lines */
  acp__buf local;  /* consumer M2: answers to feed once the drain is done */
  bool in_recv;
  bool open;
  bool done;    /* M2 request answered: free after the drain */
  bool counted; /* provider M0/M1: one of decl->nconns */
};

struct owner {
  acp_mem mem;
  const peer_ops *ops;
  union {
    acp_client *client;
    acp_proxy *proxy;
    acp_agent *agent;
  } peer;
  tunnel *tunnels;
  out_req *outs;
  acp_json_writer *w;
  acp_json_doc *doc;
  acp_json_doc *aux; /* a second document (consumer M2: initialize params) */
  uint64_t now_ms;
  uint64_t counter;
  void *user_data;
  /* lines */
  acp__buf up;     /* lines written as if by the agent */
  char prefix[16]; /* of our request ids: "<prefix><n>" */
  acp__mcp_ep_write_cb ep_write;
  acp__mcp_ep_open_cb ep_open;
};

struct acp_mcp_acp_decl {
  acp_mcp_acp_decl *next, *prev;
  acp_mcp_acp_provider *p;
  acp_mcp_server *server;
  char *name;
  char id[33];
  char *session_id;
  void *user_data;
  acp__buf json;
  size_t nconns; /* open mcp/connect connections (M0/M1) */
};

struct acp_mcp_acp_provider {
  owner o;
  acp_mcp_acp_decl *decls;
};

struct acp_mcp_acp_consumer {
  owner o;
};

/* MARK: - Small helpers */

static char *dup_raw(const acp_mem *m, const acp_json_val *v) {
  size_t n = 0;
  const char *s = acp_json_raw(v, &n);

  return s != NULL ? acp__strndup(m, s, n) : NULL;
}

static bool raw_eq(const acp_json_val *v, const char *s) {
  size_t n = 0;
  const char *r = acp_json_raw(v, &n);

  return r != NULL && s != NULL && strlen(s) == n && memcmp(r, s, n) == 0;
}

/* A string member, decoded; NULL when absent or not a string. */
static const char *get_str(acp_json_doc *doc, const acp_json_val *obj,
                           const char *key, size_t *len) {
  const acp_json_val *v = acp_json_obj_getz(obj, key);
  const char *s;

  if (acp_json_type_of(v) != ACP_JSON_STRING)
    return NULL;
  if (acp_json_doc_str(doc, v, &s, len) != 0)
    return NULL;
  return s;
}

static bool str_is(const char *s, size_t n, const char *z) {
  return s != NULL && strlen(z) == n && memcmp(s, z, n) == 0;
}

/* MARK: - The outer peer */

static int client_resp(acp_client *c, const acp_rpc_msg *msg, void *ud);
static int proxy_resp(acp_proxy *p, const acp_rpc_msg *msg, void *ud);
static int agent_resp(acp_agent *a, const acp_rpc_msg *msg, void *ud);

/* MARK: - The outer peer as lines */

/* Append to o->up; on failure roll back to `mark`. */
static int up_z(owner *o, const char *s) {
  return acp__buf_append(&o->up, s, strlen(s));
}

static int up_end(owner *o, size_t mark, int rv) {
  if (rv == 0)
    rv = acp__buf_append(&o->up, "}\n", 2);
  if (rv != 0)
    o->up.len = mark;
  return rv;
}

static int lines_msg(owner *o, const char *id, bool id_is_ours,
                     const char *method, const char *params, size_t len) {
  size_t mark = o->up.len;
  int rv = up_z(o, "{\"jsonrpc\":\"2.0\"");

  if (rv == 0 && id != NULL) {
    rv = up_z(o, id_is_ours ? ",\"id\":\"" : ",\"id\":");
    if (rv == 0)
      rv = up_z(o, id);
    if (rv == 0 && id_is_ours)
      rv = up_z(o, "\"");
  }
  if (rv == 0)
    rv = up_z(o, ",\"method\":\"");
  if (rv == 0)
    rv = up_z(o, method);
  if (rv == 0)
    rv = up_z(o, "\",\"params\":");
  if (rv == 0)
    rv = acp__buf_append(&o->up, params, len);
  return up_end(o, mark, rv);
}

static int lines_request(owner *o, const char *method, const char *params,
                         size_t len, out_req *rec) {
  char id[48];
  int rv;

  snprintf(id, sizeof(id), "%s%llu", o->prefix,
           (unsigned long long)(o->counter + 1));
  rv = lines_msg(o, id, true, method, params, len);
  if (rv == 0)
    rec->outer_id = (int64_t)++o->counter;
  return rv;
}

/* A lines request handle is its raw outer id, NUL-terminated. */
static int lines_respond(owner *o, void *id, const char *result, size_t len) {
  size_t mark = o->up.len;
  int rv = up_z(o, "{\"jsonrpc\":\"2.0\",\"id\":");

  if (rv == 0)
    rv = up_z(o, id);
  if (rv == 0)
    rv = up_z(o, ",\"result\":");
  if (rv == 0)
    rv = acp__buf_append(&o->up, result, len);
  return up_end(o, mark, rv);
}

static int lines_error(owner *o, void *id, int64_t code, const char *message,
                       const char *data, size_t data_len) {
  size_t mark = o->up.len;
  char head[64];
  int rv = up_z(o, "{\"jsonrpc\":\"2.0\",\"id\":");

  snprintf(head, sizeof(head),
           ",\"error\":{\"code\":%lld,\"message\":", (long long)code);
  if (rv == 0)
    rv = up_z(o, id);
  if (rv == 0)
    rv = up_z(o, head);
  if (rv == 0)
    rv = acp__json_escape_append(&o->up, message != NULL ? message : "error",
                                 message != NULL ? strlen(message) : 5);
  if (rv == 0 && data != NULL) {
    rv = up_z(o, ",\"data\":");
    if (rv == 0)
      rv = acp__buf_append(&o->up, data, data_len);
  }
  if (rv == 0)
    rv = up_z(o, "}");
  return up_end(o, mark, rv);
}

/* MARK: - The outer peer, one table per kind of owner */

static int lines_notify(owner *o, const char *method, const char *params,
                        size_t len) {
  return lines_msg(o, NULL, false, method, params, len);
}

static const peer_ops lines_ops = {
    .request = lines_request,
    .notify = lines_notify,
    .respond = lines_respond,
    .error = lines_error,
    .owns_req = true,
};

static int client_request(owner *o, const char *method, const char *params,
                          size_t len, out_req *rec) {
  return acp_client_call(o->peer.client, method, params, len, client_resp, rec,
                         &rec->outer_id);
}

static int client_notify(owner *o, const char *method, const char *params,
                         size_t len) {
  return acp_client_notify(o->peer.client, method, params, len);
}

static int client_respond(owner *o, void *req, const char *result, size_t len) {
  return acp_client_respond(o->peer.client, req, result, len);
}

static int client_error(owner *o, void *req, int64_t code, const char *message,
                        const char *data, size_t data_len) {
  return acp_client_respond_error(o->peer.client, req, code, message, data,
                                  data_len);
}

static const peer_ops client_ops = {
    .request = client_request,
    .notify = client_notify,
    .respond = client_respond,
    .error = client_error,
};

static int proxy_request(owner *o, const char *method, const char *params,
                         size_t len, out_req *rec) {
  return acp_proxy_send_to_agent(o->peer.proxy, method, params, len, proxy_resp,
                                 rec, &rec->outer_id);
}

static int proxy_notify(owner *o, const char *method, const char *params,
                        size_t len) {
  return acp_proxy_notify_agent(o->peer.proxy, method, params, len);
}

static int proxy_respond(owner *o, void *req, const char *result, size_t len) {
  return acp_proxy_respond(o->peer.proxy, req, result, len);
}

static int proxy_error(owner *o, void *req, int64_t code, const char *message,
                       const char *data, size_t data_len) {
  return acp_proxy_respond_error(o->peer.proxy, req, code, message, data,
                                 data_len);
}

static const peer_ops proxy_ops = {
    .request = proxy_request,
    .notify = proxy_notify,
    .respond = proxy_respond,
    .error = proxy_error,
};

static int agent_request(owner *o, const char *method, const char *params,
                         size_t len, out_req *rec) {
  return acp_agent_call(o->peer.agent, method, params, len, agent_resp, rec,
                        &rec->outer_id);
}

static int agent_notify(owner *o, const char *method, const char *params,
                        size_t len) {
  return acp_agent_notify(o->peer.agent, method, params, len);
}

static int agent_respond(owner *o, void *req, const char *result, size_t len) {
  return acp_agent_respond(o->peer.agent, req, result, len);
}

static int agent_error(owner *o, void *req, int64_t code, const char *message,
                       const char *data, size_t data_len) {
  return acp_agent_respond_error(o->peer.agent, req, code, message, data,
                                 data_len);
}

static const peer_ops agent_ops = {
    .request = agent_request,
    .notify = agent_notify,
    .respond = agent_respond,
    .error = agent_error,
};

static int peer_request(owner *o, const char *method, const char *params,
                        size_t len, out_req *rec) {
  if (o->ops == NULL)
    return ACP_ERR_INVALID_STATE;
  return o->ops->request(o, method, params, len, rec);
}

static int peer_notify(owner *o, const char *method, const char *params,
                       size_t len) {
  if (o->ops == NULL)
    return ACP_ERR_INVALID_STATE;
  return o->ops->notify(o, method, params, len);
}

static int peer_respond(owner *o, void *req, const char *result, size_t len) {
  if (o->ops == NULL)
    return ACP_ERR_INVALID_STATE;
  return o->ops->respond(o, req, result, len);
}

static int peer_error(owner *o, void *req, int64_t code, const char *message,
                      const char *data, size_t data_len) {
  if (o->ops == NULL)
    return ACP_ERR_INVALID_STATE;
  return o->ops->error(o, req, code, message, data, data_len);
}

/* An error answer to a request we do not keep: failures to answer are only
 * fatal when fatal. */
static int answer_error(owner *o, void *req, int64_t code, const char *message,
                        const char *key, const char *val, size_t val_len) {
  acp_json_writer *w = o->w;
  const char *data = NULL;
  size_t len = 0;
  int rv;

  if (key != NULL) {
    acp_json_writer_reset(w);
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, key);
    acp_json_write_str(w, val, val_len);
    acp_json_write_obj_end(w);
    rv = acp_json_writer_error(w);
    if (rv == 0)
      data = acp_json_writer_data(w, &len);
  }
  rv = peer_error(o, req, code, message, data, len);
  return acp_is_fatal(rv) ? rv : 0;
}

/* MARK: - Owner */

static int owner_init(owner *o, void *user_data, const acp_mem *mem) {
  int rv;

  memset(o, 0, sizeof(*o));
  acp__mem_init(&o->mem, mem);
  o->user_data = user_data;
  acp__buf_init(&o->up, &o->mem, 0);
  rv = acp_json_writer_new(&o->w, 0, &o->mem);
  if (rv == 0)
    rv = acp_json_doc_new(&o->doc, &o->mem);
  if (rv == 0)
    rv = acp_json_doc_new(&o->aux, &o->mem);
  return rv;
}

static void out_free(owner *o, out_req *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    o->outs = r->next;
  if (r->next)
    r->next->prev = r->prev;
  acp__free(&o->mem, r->inner_id);
  acp__free(&o->mem, r);
}

static out_req *out_new(owner *o, tunnel *t) {
  out_req *r = acp__calloc(&o->mem, 1, sizeof(*r));

  if (r == NULL)
    return NULL;
  r->own = o;
  r->t = t;
  r->next = o->outs;
  if (o->outs)
    o->outs->prev = r;
  o->outs = r;
  return r;
}

static void in_unlink(tunnel *t, in_req *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    t->ins = r->next;
  if (r->next)
    r->next->prev = r->prev;
  if (t->own->ops != NULL && t->own->ops->owns_req)
    acp__free(&t->own->mem, r->req);
  acp__free(&t->own->mem, r->outer_id);
  acp__free(&t->own->mem, r);
}

/* Free a tunnel. Pending outer requests are answered -32603 when `answer`
 * (the role object is alive), else dropped. */
static void tunnel_free(tunnel *t, bool answer) {
  owner *o = t->own;
  out_req *r;

  while (t->ins != NULL) {
    if (answer && t->ins->req != NULL)
      (void)peer_error(o, t->ins->req, ACP_RPC_INTERNAL_ERROR,
                       "MCP connection closed", NULL, 0);
    in_unlink(t, t->ins);
  }
  for (r = o->outs; r != NULL; r = r->next)
    if (r->t == t)
      r->t = NULL;
  if (t->counted)
    t->decl->nconns--;
  if (t->prev)
    t->prev->next = t->next;
  else if (o->tunnels == t)
    o->tunnels = t->next;
  if (t->next)
    t->next->prev = t->prev;
  t->magic = 0;
  acp_mcp_conn_free(t->conn);
  acp__buf_dispose(&t->line);
  acp__buf_dispose(&t->out);
  acp_ndjson_dispose(&t->outl);
  acp__buf_dispose(&t->local);
  acp__free(&o->mem, t->conn_id);
  acp__free(&o->mem, t->m2_request_id);
  acp__free(&o->mem, t->server_id);
  acp__free(&o->mem, t->m2_init);
  acp__free(&o->mem, t);
}

static void owner_dispose(owner *o) {
  while (o->tunnels != NULL)
    tunnel_free(o->tunnels, false);
  while (o->outs != NULL)
    out_free(o, o->outs);
  acp_json_writer_free(o->w);
  acp_json_doc_free(o->doc);
  acp_json_doc_free(o->aux);
  acp__buf_dispose(&o->up);
}

static tunnel *tunnel_new(owner *o) {
  tunnel *t = acp__calloc(&o->mem, 1, sizeof(*t));

  if (t == NULL)
    return NULL;
  t->magic = TUNNEL_MAGIC;
  t->own = o;
  t->next_inner = 1;
  acp__buf_init(&t->line, &o->mem, 0);
  acp__buf_init(&t->out, &o->mem, 0);
  /* No cap: these are our own session's lines, each already whole. */
  acp_ndjson_init(&t->outl, SIZE_MAX, &o->mem);
  acp__buf_init(&t->local, &o->mem, 0);
  t->next = o->tunnels;
  if (o->tunnels)
    o->tunnels->prev = t;
  o->tunnels = t;
  return t;
}

static tunnel *find_conn(owner *o, const char *id, size_t len) {
  tunnel *t;

  for (t = o->tunnels; t != NULL; t = t->next)
    if (t->conn_id != NULL && str_is(id, len, t->conn_id))
      return t;
  return NULL;
}

/* MARK: - Inner side */

static acp_ssize inner_recv(tunnel *t, const char *data, size_t len) {
  if (t->endpoint) {
    int rv = t->own->ep_write((acp__mcp_ep *)t, data, len, t->own->user_data);

    return rv != 0 ? rv : (acp_ssize)len;
  }
  if (t->conn != NULL)
    return acp_mcp_conn_recv(t->conn, data, len, t->own->now_ms);
  return acp_mcp_client_recv(t->client, data, len, t->own->now_ms);
}

static acp_ssize inner_send(tunnel *t, const char **data) {
  if (t->endpoint)
    return 0; /* an endpoint's lines are pushed (acp__mcp_ep_line) */
  if (t->conn != NULL)
    return acp_mcp_conn_send(t->conn, data);
  return acp_mcp_client_send(t->client, data);
}

static int drain(tunnel *t);
static int process_line(tunnel *t, const char *s, size_t n);

/* The lines an endpoint sent before its connection was open, each ending
 * with a newline, in t->out. */
static int drain_endpoint(tunnel *t) {
  acp__buf q = t->out;
  size_t off = 0;
  int rv = 0;

  acp__buf_init(&t->out, &t->own->mem, 0);
  while (off < q.len && rv == 0 && t->magic == TUNNEL_MAGIC) {
    const char *s = q.data + off;
    const char *nl = memchr(s, '\n', q.len - off);
    size_t n = (size_t)(nl - s);

    rv = process_line(t, s, n);
    off += n + 1;
  }
  acp__buf_dispose(&q);
  return rv;
}

/* Feed t->line (one message, newline added here) to the inner session. */
static int feed_line(tunnel *t) {
  acp_ssize n;
  int rv = acp__buf_putc(&t->line, '\n');

  if (rv != 0)
    return rv;
  t->in_recv = true;
  n = inner_recv(t, t->line.data, t->line.len);
  t->in_recv = false;
  acp__buf_clear(&t->line);
  if (n < 0 && acp_is_fatal((int)n))
    return (int)n;
  return drain(t);
}

/* Append `v` (or `raw`) to the line buffer. */
static int line_raw(tunnel *t, const char *s, size_t n) {
  return acp__buf_append(&t->line, s, n);
}

static int line_z(tunnel *t, const char *s) {
  return line_raw(t, s, strlen(s));
}

static int line_val(tunnel *t, const acp_json_val *v) {
  size_t n = 0;
  const char *s = acp_json_raw(v, &n);

  return line_raw(t, s, n);
}

/* Build {"jsonrpc":"2.0"[,"id":ID],"method":M[,"params":P]} from the
 * outer params (method and params members). */
static int build_inner_msg(tunnel *t, const char *id, const acp_json_val *op) {
  const acp_json_val *m = ACP__OBJ_GETL(op, "method");
  const acp_json_val *pa = ACP__OBJ_GETL(op, "params");
  int rv;

  acp__buf_clear(&t->line);
  rv = line_z(t, "{\"jsonrpc\":\"2.0\"");
  if (rv == 0 && id != NULL) {
    rv = line_z(t, ",\"id\":");
    if (rv == 0)
      rv = line_z(t, id);
  }
  if (rv == 0)
    rv = line_z(t, ",\"method\":");
  if (rv == 0)
    rv = line_val(t, m);
  if (rv == 0 && pa != NULL && acp_json_type_of(pa) != ACP_JSON_NULL) {
    rv = line_z(t, ",\"params\":");
    if (rv == 0)
      rv = line_val(t, pa);
  }
  if (rv == 0)
    rv = line_z(t, "}");
  return rv;
}

/* An outer request carrying an inner request: give it an inner id and feed
 * it. `outer_id` is the outer request's id (copied). */
static int feed_request(tunnel *t, void *req, const acp_json_val *outer_id,
                        const acp_json_val *op, bool carrier) {
  owner *o = t->own;
  in_req *r = acp__calloc(&o->mem, 1, sizeof(*r));
  char idbuf[24];
  int rv;

  if (r == NULL)
    return ACP_ERR_NOMEM;
  r->req = req;
  r->carrier = carrier;
  r->inner_id = t->next_inner++;
  if (outer_id != NULL) {
    r->outer_id = dup_raw(&o->mem, outer_id);
    if (r->outer_id == NULL) {
      acp__free(&o->mem, r);
      return ACP_ERR_NOMEM;
    }
  }
  snprintf(idbuf, sizeof(idbuf), "%lld", (long long)r->inner_id);
  rv = build_inner_msg(t, idbuf, op);
  if (rv != 0) {
    acp__free(&o->mem, r->outer_id);
    acp__free(&o->mem, r);
    return rv;
  }
  r->next = t->ins;
  if (t->ins)
    t->ins->prev = r;
  t->ins = r;
  return feed_line(t);
}

/* A response from the inner session to one of the requests we fed. */
static int inner_response(tunnel *t, acp_json_doc *doc,
                          const acp_json_val *root) {
  owner *o = t->own;
  const acp_json_val *id = ACP__OBJ_GETL(root, "id");
  const acp_json_val *result = ACP__OBJ_GETL(root, "result");
  const acp_json_val *err = ACP__OBJ_GETL(root, "error");
  int64_t n;
  in_req *r;
  int rv;

  if (acp_json_get_int64(id, &n) != 0)
    return 0;
  for (r = t->ins; r != NULL; r = r->next)
    if (r->inner_id == n)
      break;
  if (r == NULL)
    return 0;
  if (r->req == NULL) {
    in_unlink(t, r); /* a synthetic initialize: swallowed */
    return 0;
  }
  if (r->carrier) {
    acp_json_writer_reset(o->w);
    acp_json_write_obj_begin(o->w);
    acp_json_write_keyz(o->w, result != NULL ? "result" : "error");
    acp_json_write_val(o->w, result != NULL ? result : err);
    acp_json_write_obj_end(o->w);
    rv = acp_json_writer_error(o->w);
    if (rv == 0) {
      size_t len;
      const char *s = acp_json_writer_data(o->w, &len);

      rv = peer_respond(o, r->req, s, len);
    }
    t->done = true;
  } else if (result != NULL) {
    size_t len = 0;
    const char *s = acp_json_raw(result, &len);

    rv = peer_respond(o, r->req, s, len);
  } else {
    int64_t code = ACP_RPC_INTERNAL_ERROR;
    size_t mlen = 0;
    const char *msg = get_str(doc, err, "message", &mlen);
    char *msgz = NULL;
    const acp_json_val *data = ACP__OBJ_GETL(err, "data");
    size_t dlen = 0;
    const char *draw = data != NULL ? acp_json_raw(data, &dlen) : NULL;

    (void)acp_json_get_int64(ACP__OBJ_GETL(err, "code"), &code);
    if (msg != NULL) {
      msgz = acp__strndup(&o->mem, msg, mlen);
      if (msgz == NULL)
        return ACP_ERR_NOMEM;
    }
    rv = peer_error(o, r->req, code, msgz, draw, dlen);
    acp__free(&o->mem, msgz);
  }
  in_unlink(t, r);
  return acp_is_fatal(rv) || rv == ACP_ERR_NOMEM ? rv : 0;
}

/* Outer params for an outgoing mcp/message carrying `root`'s method and
 * params. */
static int build_outer_params(tunnel *t, const acp_json_val *root,
                              const char *request_id_raw) {
  owner *o = t->own;
  acp_json_writer *w = o->w;
  const acp_json_val *pa = ACP__OBJ_GETL(root, "params");

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  if (t->shape == ACP_MCP_ACP_SHAPE_M2) {
    ACP__W_KEYL(w, "serverId");
    acp_json_write_strz(w, t->decl->id);
    ACP__W_KEYL(w, "requestId");
    acp_json_write_raw(w, t->m2_request_id, strlen(t->m2_request_id));
  } else {
    ACP__W_KEYL(w, "connectionId");
    acp_json_write_strz(w, t->conn_id);
  }
  ACP__W_KEYL(w, "method");
  acp_json_write_val(w, ACP__OBJ_GETL(root, "method"));
  if (request_id_raw != NULL) {
    /* notifications/cancelled with the requestId rewritten */
    ACP__W_KEYL(w, "params");
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "requestId");
    acp_json_write_raw(w, request_id_raw, strlen(request_id_raw));
    if (ACP__OBJ_GETL(pa, "reason") != NULL) {
      ACP__W_KEYL(w, "reason");
      acp_json_write_val(w, ACP__OBJ_GETL(pa, "reason"));
    }
    acp_json_write_obj_end(w);
  } else if (pa != NULL) {
    ACP__W_KEYL(w, "params");
    acp_json_write_val(w, pa);
  }
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w);
}

static const char *message_method(const tunnel *t) {
  return t->shape == ACP_MCP_ACP_SHAPE_M0 ? "_mcp/message" : "mcp/message";
}

/* MARK: - Consumer, connectionless (M2) */

static int lines_cancel(tunnel *t, const acp_json_val *root);
static int feed_line(tunnel *t);

/* The initialize params the consumer's client sent, parsed into the owner's
 * second document, or NULL. */
static const acp_json_val *m2_init_params(tunnel *t) {
  owner *o = t->own;

  if (t->m2_init == NULL ||
      acp_json_doc_parse(o->aux, t->m2_init, strlen(t->m2_init), NULL) != 0)
    return NULL;
  return acp_json_doc_root(o->aux);
}

/* Feed the answers queued in t->local (one line, see m2_answer_locally())
 * to the inner side. */
static int feed_local(tunnel *t) {
  int rv;

  acp__buf_clear(&t->line);
  rv = line_raw(t, t->local.data, t->local.len - 1); /* feed adds \n */
  acp__buf_clear(&t->local);
  return rv != 0 ? rv : feed_line(t);
}

/* Queue the inner response {"id": id, "result": result} for the client; it
 * is fed when the current drain is over (see drain()). */
static int m2_answer_locally(tunnel *t, const acp_json_val *id,
                             const char *result) {
  static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
  static const char mid[] = ",\"result\":";
  size_t n = 0;
  const char *raw = acp_json_raw(id, &n);
  int rv = acp__buf_append(&t->local, head, sizeof(head) - 1);

  if (rv == 0)
    rv = acp__buf_append(&t->local, raw, n);
  if (rv == 0)
    rv = acp__buf_append(&t->local, mid, sizeof(mid) - 1);
  if (rv == 0)
    rv = acp__buf_append(&t->local, result, strlen(result));
  if (rv == 0)
    rv = acp__buf_append(&t->local, "}\n", 2);
  return rv;
}

/* The pending outer request of `t` that carries its inner request `id`. */
static out_req *out_by_inner(tunnel *t, const acp_json_val *id) {
  out_req *r;

  for (r = t->own->outs; r != NULL; r = r->next)
    if (r->t == t && r->inner_id != NULL && raw_eq(id, r->inner_id))
      return r;
  return NULL;
}

/* The client cancels one of its requests: cancel the outer mcp/message
 * carrying it ($/cancel_request; the provider answers it -32800). */
static int m2_cancel(tunnel *t, const acp_json_val *params) {
  owner *o = t->own;
  out_req *r = out_by_inner(t, ACP__OBJ_GETL(params, "requestId"));

  if (r == NULL)
    return 0;
  return acp_agent_cancel_call(o->peer.agent, r->outer_id);
}

/*
 * A message the consumer's (2025-era) MCP client sent, on a connectionless
 * link: each request becomes one mcp/message {serverId, requestId, method,
 * params} whose params carry the 2026 _meta; initialize becomes
 * server/discover (answered in on_outer_response), ping is answered here
 * (2026 has none); notifications have no connectionless form except the
 * cancellation of a request.
 */
static int m2_outgoing(tunnel *t, const acp_json_val *root) {
  owner *o = t->own;
  acp_json_writer *w = o->w;
  const acp_json_val *id = ACP__OBJ_GETL(root, "id");
  const acp_json_val *m = ACP__OBJ_GETL(root, "method");
  const acp_json_val *pa = ACP__OBJ_GETL(root, "params");
  const acp_json_val *init;
  bool discover = false;
  char rid[24];
  out_req *r;
  const char *data;
  size_t len;
  int rv;

  if (id == NULL) {
    /* A bridge endpoint cancels hop by hop, like its other requests. */
    if (!ACP_JSON_STR_EQ_LIT(m, "notifications/cancelled"))
      return 0;
    return t->endpoint ? lines_cancel(t, root) : m2_cancel(t, pa);
  }
  if (ACP_JSON_STR_EQ_LIT(m, "ping")) {
    rv = m2_answer_locally(t, id, "{}");
    /* An endpoint is not drained from an inner session: answer now. */
    return rv != 0 || !t->endpoint ? rv : feed_local(t);
  }
  if (acp_json_type_of(pa) != ACP_JSON_OBJECT)
    pa = NULL;
  if (ACP_JSON_STR_EQ_LIT(m, "initialize")) {
    acp__free(&o->mem, t->m2_init);
    t->m2_init = pa != NULL ? dup_raw(&o->mem, pa) : NULL;
    if (pa != NULL && t->m2_init == NULL)
      return ACP_ERR_NOMEM;
    discover = true;
    pa = NULL;
  }
  init = m2_init_params(t);
  r = out_new(o, t);
  if (r == NULL)
    return ACP_ERR_NOMEM;
  r->m2 = true;
  r->m2_discover = discover;
  r->m2_rid = (int64_t)++o->counter;
  r->inner_id = dup_raw(&o->mem, id);
  if (r->inner_id == NULL) {
    out_free(o, r);
    return ACP_ERR_NOMEM;
  }
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "serverId");
  acp_json_write_strz(w, t->server_id);
  ACP__W_KEYL(w, "requestId");
  snprintf(rid, sizeof(rid), "%lld", (long long)r->m2_rid);
  acp_json_write_strz(w, rid); /* McpRequestId is a string */
  ACP__W_KEYL(w, "method");
  if (discover)
    acp_json_write_strz(w, "server/discover");
  else
    acp_json_write_val(w, m);
  ACP__W_KEYL(w, "params");
  rv = acp_mcp_era_write_request_params(w, pa, init);
  if (rv == 0)
    rv = acp_json_write_obj_end(w);
  if (rv == 0) {
    data = acp_json_writer_data(w, &len);
    rv = peer_request(o, "mcp/message", data, len, r);
  }
  if (rv != 0)
    out_free(o, r);
  return rv;
}

/* Write into o->w the inner response to `r` from the carrier `carrier` (the
 * outer result of a connectionless mcp/message). */
static int m2_inner_response(out_req *r, const acp_json_val *carrier) {
  tunnel *t = r->t;
  acp_json_writer *w = t->own->w;
  const acp_json_val *res = ACP__OBJ_GETL(carrier, "result");
  const acp_json_val *err = ACP__OBJ_GETL(carrier, "error");
  const char *fail = NULL;
  int64_t code = 0;
  int rv;

  if (acp_json_type_of(err) != ACP_JSON_OBJECT)
    err = NULL;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "jsonrpc");
  acp_json_write_strz(w, "2.0");
  ACP__W_KEYL(w, "id");
  acp_json_write_raw(w, r->inner_id, strlen(r->inner_id));
  (void)acp_json_get_int64(ACP__OBJ_GETL(err, "code"), &code);
  if (r->m2_discover && (res != NULL || code == ACP_RPC_METHOD_NOT_FOUND)) {
    /* server/discover answered, or unknown: the initialize result. */
    const acp_json_val *d = res;

    if (res == NULL || acp_json_type_of(res) != ACP_JSON_OBJECT)
      d = NULL;
    ACP__W_KEYL(w, "result");
    rv = acp_mcp_era_write_initialize_result(w, m2_init_params(t), d, NULL);
    if (rv == ACP_ERR_INVALID_ARGUMENT)
      fail = "Invalid server/discover result";
    else if (rv != 0)
      return rv;
  } else if (res != NULL) {
    ACP__W_KEYL(w, "result");
    if (acp_json_type_of(res) != ACP_JSON_OBJECT) {
      acp_json_write_val(w, res);
    } else {
      rv = acp_mcp_era_write_result(w, res);
      if (rv == ACP_ERR_UNSUPPORTED)
        fail = "MCP result needs input (input_required): not supported at "
               "this protocol revision";
      else if (rv != 0)
        return rv;
    }
  } else if (err != NULL) {
    ACP__W_KEYL(w, "error");
    acp_json_write_val(w, err);
  } else {
    fail = "Invalid MCP-over-ACP response carrier";
  }
  if (fail != NULL) {
    /* Start again: the answer is an error. */
    acp_json_writer_reset(w);
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "jsonrpc");
    acp_json_write_strz(w, "2.0");
    ACP__W_KEYL(w, "id");
    acp_json_write_raw(w, r->inner_id, strlen(r->inner_id));
    ACP__W_KEYL(w, "error");
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "code");
    acp_json_write_int(w, ACP_RPC_INTERNAL_ERROR);
    ACP__W_KEYL(w, "message");
    acp_json_write_strz(w, fail);
    acp_json_write_obj_end(w);
  }
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w);
}

/* An endpoint cancels one of its requests: cancel the outer request that
 * carries it hop by hop ($/cancel_request, which the conductor translates
 * along the chain) and drop its answer. */
static int lines_cancel(tunnel *t, const acp_json_val *root) {
  owner *o = t->own;
  out_req *r = out_by_inner(
      t, ACP__OBJ_GETL(ACP__OBJ_GETL(root, "params"), "requestId"));
  char params[80];

  if (r == NULL || r->cancelled)
    return 0;
  r->cancelled = true;
  snprintf(params, sizeof(params), "{\"requestId\":\"%s%lld\"}", o->prefix,
           (long long)r->outer_id);
  return lines_msg(o, NULL, false, "$/cancel_request", params, strlen(params));
}

/* A request or notification the inner session sent: carry it outward. */
static int inner_outgoing(tunnel *t, const acp_json_val *root) {
  owner *o = t->own;
  const acp_json_val *id = ACP__OBJ_GETL(root, "id");
  const char *data;
  char rid[24];
  const char *rewrite = NULL;
  size_t len;
  int rv;

  if ((t->client != NULL || t->endpoint) && t->shape == ACP_MCP_ACP_SHAPE_M2)
    return m2_outgoing(t, root);
  if (id == NULL && t->endpoint &&
      ACP_JSON_STR_EQ_LIT(ACP__OBJ_GETL(root, "method"),
                          "notifications/cancelled"))
    return lines_cancel(t, root);
  if (id == NULL && t->client != NULL &&
      ACP_JSON_STR_EQ_LIT(ACP__OBJ_GETL(root, "method"),
                          "notifications/cancelled")) {
    /* The consumer's MCP client cancels one of its requests: name the
     * outer request that carries it. */
    out_req *r = out_by_inner(
        t, ACP__OBJ_GETL(ACP__OBJ_GETL(root, "params"), "requestId"));

    if (r != NULL) {
      snprintf(rid, sizeof(rid), "%lld", (long long)r->outer_id);
      rewrite = rid;
    }
  }
  if (t->shape == ACP_MCP_ACP_SHAPE_M2 && id != NULL)
    return 0; /* no server->client requests in the connectionless form */
  rv = build_outer_params(t, root, rewrite);
  if (rv != 0)
    return rv;
  data = acp_json_writer_data(o->w, &len);
  if (id == NULL) {
    rv = peer_notify(o, message_method(t), data, len);
  } else {
    out_req *r = out_new(o, t);

    if (r == NULL)
      return ACP_ERR_NOMEM;
    r->inner_id = dup_raw(&o->mem, id);
    if (r->inner_id == NULL) {
      out_free(o, r);
      return ACP_ERR_NOMEM;
    }
    rv = peer_request(o, message_method(t), data, len, r);
    if (rv != 0)
      out_free(o, r);
  }
  return rv;
}

static int process_line(tunnel *t, const char *s, size_t n) {
  acp_json_doc *doc = t->own->doc;
  const acp_json_val *root;
  int rv = acp_json_doc_parse(doc, s, n, NULL);

  if (rv == ACP_ERR_NOMEM)
    return rv;
  if (rv != 0)
    return 0;
  root = acp_json_doc_root(doc);
  if (acp_json_type_of(root) == ACP_JSON_ARRAY) {
    const acp_json_val *e;

    for (e = acp_json_child(root); e != NULL && rv == 0; e = acp_json_next(e))
      rv = ACP__OBJ_GETL(e, "method") != NULL ? inner_outgoing(t, e)
                                              : inner_response(t, doc, e);
    return rv;
  }
  if (ACP__OBJ_GETL(root, "method") != NULL)
    return inner_outgoing(t, root);
  return inner_response(t, doc, root);
}

/* Move everything the inner session produced to the outer connection. */
static int drain(tunnel *t) {
  int rv = 0;

  if (t->in_recv)
    return 0;
  if (t->client != NULL && !t->open)
    return 0; /* not connected yet: the client's output waits */
  if (t->endpoint)
    return t->open ? drain_endpoint(t) : 0;
  for (;;) {
    const char *data;
    acp_ssize n = inner_send(t, &data);
    size_t len;

    if (n < 0)
      return (int)n;
    if (n == 0)
      break;
    /* The lines point into the session's output, valid until its next
     * call: processing a line never calls the inner session (answers it
     * needs are fed after the loop, from t->local). */
    len = (size_t)n;
    while (len > 0 && rv == 0) {
      const char *line;
      size_t used, ln;
      int r = acp_ndjson_next(&t->outl, data, len, &used, &line, &ln);

      data += used;
      len -= used;
      if (r == ACP_NDJSON_LINE)
        rv = process_line(t, line, ln);
      else if (r < 0)
        rv = r;
    }
    if (rv != 0)
      return rv;
  }
  if (t->local.len > 0) {
    /* Answers the consumer gave itself (M2), fed now that the client's
     * output was consumed: feeding them inside the loop would re-enter it. */
    return feed_local(t);
  }
  return 0;
}

/* An outer response to an out_req: turn it into an inner response. */
static int send_connect(tunnel *t);

/* The link falls back to the connectionless form: it is open at once. */
static int open_connectionless(tunnel *t) {
  int rv = 0;

  t->shape = ACP_MCP_ACP_SHAPE_M2;
  t->open = true;
  if (t->open_cb != NULL)
    rv = t->open_cb((acp_mcp_acp_link *)t, 0, NULL, t->open_ud);
  if (rv == 0 && t->magic == TUNNEL_MAGIC)
    rv = drain(t);
  return rv;
}

static int on_outer_response(out_req *r, const acp_rpc_msg *msg) {
  owner *o = r->own;
  tunnel *t = r->t;
  int rv = 0;

  if (r->is_connect) {
    out_free(o, r);
    if (t == NULL)
      return 0;
    if (!msg->local && msg->error != NULL &&
        msg->error_code == ACP_RPC_METHOD_NOT_FOUND) {
      /* The provider does not know this shape: try the next one. */
      if (t->shape == ACP_MCP_ACP_SHAPE_M0) {
        t->shape = ACP_MCP_ACP_SHAPE_M1;
        rv = send_connect(t);
        if (rv == 0)
          return 0;
        if (acp_is_fatal(rv))
          return rv;
      } else {
        return open_connectionless(t);
      }
    }
    if (msg->local || msg->error != NULL) {
      acp_mcp_acp_open_cb cb = t->open_cb;
      void *ud = t->open_ud;

      rv = cb != NULL
               ? cb((acp_mcp_acp_link *)t,
                    msg->local ? ACP_ERR_CLOSED : ACP_ERR_PROTOCOL, msg, ud)
               : 0;
      tunnel_free(t, false);
      return rv;
    } else {
      const char *id;
      size_t len = 0;

      id = get_str(msg->doc, msg->result, "connectionId", &len);
      if (id == NULL)
        id = get_str(msg->doc, msg->result, "connection_id", &len);
      if (id == NULL) {
        rv = t->open_cb != NULL ? t->open_cb((acp_mcp_acp_link *)t,
                                             ACP_ERR_PROTOCOL, msg, t->open_ud)
                                : 0;
        tunnel_free(t, false);
        return rv;
      }
      t->conn_id = acp__strndup(&o->mem, id, len);
      if (t->conn_id == NULL)
        return ACP_ERR_NOMEM;
      t->open = true;
      if (t->open_cb != NULL)
        rv = t->open_cb((acp_mcp_acp_link *)t, 0, msg, t->open_ud);
      if (rv == 0 && t->magic == TUNNEL_MAGIC)
        rv = drain(t);
      return rv;
    }
  }
  if (t == NULL || r->cancelled) {
    out_free(o, r);
    return 0;
  }
  if (r->m2 && msg->result != NULL) {
    size_t n;
    const char *s;

    rv = m2_inner_response(r, msg->result);
    out_free(o, r);
    if (rv != 0)
      return rv;
    s = acp_json_writer_data(o->w, &n);
    acp__buf_clear(&t->line);
    rv = line_raw(t, s, n);
    return rv != 0 ? rv : feed_line(t);
  }
  acp__buf_clear(&t->line);
  rv = line_z(t, "{\"jsonrpc\":\"2.0\",\"id\":");
  if (rv == 0)
    rv = line_z(t, r->inner_id);
  if (rv == 0 && msg->result != NULL) {
    rv = line_z(t, ",\"result\":");
    if (rv == 0)
      rv = line_val(t, msg->result);
  } else if (rv == 0 && msg->error != NULL && !msg->local) {
    rv = line_z(t, ",\"error\":");
    if (rv == 0)
      rv = line_val(t, msg->error);
  } else if (rv == 0) {
    char head[64];

    snprintf(head, sizeof(head), ",\"error\":{\"code\":%lld,\"message\":",
             (long long)msg->error_code);
    rv = line_z(t, head);
    if (rv == 0) {
      acp__buf tmp;

      acp__buf_init(&tmp, &o->mem, 0);
      rv = acp__json_escape_append(
          &tmp, msg->error_message != NULL ? msg->error_message : "error",
          msg->error_message != NULL ? msg->error_message_len : 5);
      if (rv == 0)
        rv = line_raw(t, tmp.data, tmp.len);
      acp__buf_dispose(&tmp);
    }
    if (rv == 0)
      rv = line_z(t, "}");
  }
  if (rv == 0)
    rv = line_z(t, "}");
  out_free(o, r);
  if (rv != 0)
    return rv;
  return feed_line(t);
}

static int client_resp(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  (void)c;
  return on_outer_response(ud, msg);
}

static int proxy_resp(acp_proxy *p, const acp_rpc_msg *msg, void *ud) {
  (void)p;
  return on_outer_response(ud, msg);
}

static int agent_resp(acp_agent *a, const acp_rpc_msg *msg, void *ud) {
  (void)a;
  return on_outer_response(ud, msg);
}

/* An incoming outer notification carrying an inner one. Cancellation names
 * the outer request; translate it to the inner id. */
static int feed_notification(tunnel *t, const acp_json_val *op) {
  owner *o = t->own;
  const acp_json_val *m = ACP__OBJ_GETL(op, "method");

  if (ACP_JSON_STR_EQ_LIT(m, "notifications/cancelled")) {
    const acp_json_val *pa = ACP__OBJ_GETL(op, "params");
    const acp_json_val *x = ACP__OBJ_GETL(pa, "requestId");
    in_req *r;

    for (r = t->ins; r != NULL; r = r->next)
      if (r->outer_id != NULL && raw_eq(x, r->outer_id))
        break;
    if (r != NULL) {
      char line[96];
      void *req = r->req;
      int rv;

      snprintf(line, sizeof(line),
               "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
               "\"params\":{\"requestId\":%lld}}",
               (long long)r->inner_id);
      rv = req != NULL ? peer_error(o, req, ACP_RPC_REQUEST_CANCELLED,
                                    "Request cancelled", NULL, 0)
                       : 0;
      in_unlink(t, r);
      if (acp_is_fatal(rv))
        return rv;
      acp__buf_clear(&t->line);
      rv = line_z(t, line);
      return rv != 0 ? rv : feed_line(t);
    }
  }
  {
    int rv = build_inner_msg(t, NULL, op);

    return rv != 0 ? rv : feed_line(t);
  }
}

/* $/cancel_request for an outer request we fed. */
static int cancel_outer(owner *o, void *req) {
  tunnel *t;

  for (t = o->tunnels; t != NULL; t = t->next) {
    in_req *r;

    for (r = t->ins; r != NULL; r = r->next) {
      if (r->req == req) {
        char line[96];
        int rv;

        snprintf(line, sizeof(line),
                 "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                 "\"params\":{\"requestId\":%lld}}",
                 (long long)r->inner_id);
        rv = peer_error(o, req, ACP_RPC_REQUEST_CANCELLED, "Request cancelled",
                        NULL, 0);
        in_unlink(t, r);
        if (acp_is_fatal(rv))
          return rv;
        acp__buf_clear(&t->line);
        rv = line_z(t, line);
        if (rv == 0)
          rv = feed_line(t);
        if (t->shape == ACP_MCP_ACP_SHAPE_M2)
          tunnel_free(t, false);
        return rv;
      }
    }
  }
  return ACP_MCP_ACP_NOT_MINE;
}

static int owner_flush(owner *o, uint64_t now_ms) {
  tunnel *t;
  tunnel *next;
  int first = 0;

  o->now_ms = now_ms;
  for (t = o->tunnels; t != NULL; t = next) {
    int rv;

    next = t->next;
    rv = drain(t);
    if (rv != 0 && first == 0)
      first = rv;
    if (t->done)
      tunnel_free(t, true);
  }
  return first;
}

/* MARK: - Provider: declarations */

int acp_mcp_acp_provider_new(acp_mcp_acp_provider **out, void *user_data,
                             const acp_mem *mem) {
  acp_mcp_acp_provider *p;
  acp_mem m;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  p = acp__calloc(&m, 1, sizeof(*p));
  if (p == NULL)
    return ACP_ERR_NOMEM;
  rv = owner_init(&p->o, user_data, &m);
  if (rv != 0) {
    owner_dispose(&p->o);
    acp__free(&m, p);
    return rv;
  }
  *out = p;
  return 0;
}

static void decl_free(acp_mcp_acp_decl *d) {
  acp_mcp_acp_provider *p = d->p;
  tunnel *t;
  tunnel *next;

  for (t = p->o.tunnels; t != NULL; t = next) {
    next = t->next;
    if (t->decl == d)
      tunnel_free(t, true);
  }
  if (d->prev)
    d->prev->next = d->next;
  else
    p->decls = d->next;
  if (d->next)
    d->next->prev = d->prev;
  acp__free(&p->o.mem, d->name);
  acp__free(&p->o.mem, d->session_id);
  acp__buf_dispose(&d->json);
  acp__free(&p->o.mem, d);
}

void acp_mcp_acp_provider_free(acp_mcp_acp_provider *p) {
  acp_mem m;

  if (p == NULL)
    return;
  m = p->o.mem;
  while (p->o.tunnels != NULL)
    tunnel_free(p->o.tunnels, false);
  while (p->decls != NULL)
    decl_free(p->decls);
  owner_dispose(&p->o);
  acp__free(&m, p);
}

void *acp_mcp_acp_provider_get_user_data(const acp_mcp_acp_provider *p) {
  return p != NULL ? p->o.user_data : NULL;
}

int acp_mcp_acp_provider_attach_client(acp_mcp_acp_provider *p,
                                       acp_client *client) {
  if (p == NULL || client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (p->o.ops != NULL)
    return ACP_ERR_INVALID_STATE;
  p->o.ops = &client_ops;
  p->o.peer.client = client;
  return 0;
}

int acp_mcp_acp_provider_attach_proxy(acp_mcp_acp_provider *p,
                                      acp_proxy *proxy) {
  if (p == NULL || proxy == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (p->o.ops != NULL)
    return ACP_ERR_INVALID_STATE;
  p->o.ops = &proxy_ops;
  p->o.peer.proxy = proxy;
  return 0;
}

acp_mcp_acp_decl *acp_mcp_acp_provider_find(const acp_mcp_acp_provider *p,
                                            const char *id) {
  acp_mcp_acp_decl *d;

  if (p == NULL || id == NULL)
    return NULL;
  for (d = p->decls; d != NULL; d = d->next)
    if (strcmp(d->id, id) == 0)
      return d;
  return NULL;
}

static acp_mcp_acp_decl *find_decl(const acp_mcp_acp_provider *p,
                                   const char *id, size_t len) {
  acp_mcp_acp_decl *d;

  for (d = p->decls; d != NULL; d = d->next)
    if (str_is(id, len, d->id))
      return d;
  return NULL;
}

int acp_mcp_acp_provider_declare(acp_mcp_acp_provider *p,
                                 acp_mcp_server *server, const char *name,
                                 const char *session_id, const uint8_t id[16],
                                 acp_mcp_acp_decl **out) {
  static const char hex[] = "0123456789abcdef";
  acp_mcp_acp_decl *d;
  int i;

  if (out != NULL)
    *out = NULL;
  if (p == NULL || server == NULL || name == NULL || id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  d = acp__calloc(&p->o.mem, 1, sizeof(*d));
  if (d == NULL)
    return ACP_ERR_NOMEM;
  for (i = 0; i < 16; i++) {
    d->id[2 * i] = hex[id[i] >> 4];
    d->id[2 * i + 1] = hex[id[i] & 15];
  }
  d->id[32] = '\0';
  if (acp_mcp_acp_provider_find(p, d->id) != NULL) {
    acp__free(&p->o.mem, d);
    return ACP_ERR_INVALID_STATE;
  }
  d->p = p;
  d->server = server;
  acp__buf_init(&d->json, &p->o.mem, 0);
  d->name = acp__strndup(&p->o.mem, name, strlen(name));
  if (session_id != NULL)
    d->session_id = acp__strndup(&p->o.mem, session_id, strlen(session_id));
  if (d->name == NULL || (session_id != NULL && d->session_id == NULL)) {
    acp__free(&p->o.mem, d->name);
    acp__free(&p->o.mem, d->session_id);
    acp__free(&p->o.mem, d);
    return ACP_ERR_NOMEM;
  }
  d->next = p->decls;
  if (p->decls)
    p->decls->prev = d;
  p->decls = d;
  if (out != NULL)
    *out = d;
  return 0;
}

int acp_mcp_acp_provider_close_session(acp_mcp_acp_provider *p,
                                       const char *session_id) {
  acp_mcp_acp_decl *d;
  acp_mcp_acp_decl *next;
  int n = 0;

  if (p == NULL || session_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  for (d = p->decls; d != NULL; d = next) {
    next = d->next;
    if (d->session_id != NULL && strcmp(d->session_id, session_id) == 0) {
      decl_free(d);
      n++;
    }
  }
  return n;
}

size_t acp_mcp_acp_provider_connection_count(const acp_mcp_acp_provider *p) {
  const tunnel *t;
  size_t n = 0;

  if (p == NULL)
    return 0;
  for (t = p->o.tunnels; t != NULL; t = t->next)
    n++;
  return n;
}

int acp_mcp_acp_provider_flush(acp_mcp_acp_provider *p, uint64_t now_ms) {
  if (p == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return owner_flush(&p->o, now_ms);
}

const char *acp_mcp_acp_decl_id(const acp_mcp_acp_decl *d) {
  return d != NULL ? d->id : NULL;
}

const char *acp_mcp_acp_decl_name(const acp_mcp_acp_decl *d) {
  return d != NULL ? d->name : NULL;
}

const char *acp_mcp_acp_decl_session_id(const acp_mcp_acp_decl *d) {
  return d != NULL ? d->session_id : NULL;
}

int acp_mcp_acp_decl_set_session(acp_mcp_acp_decl *d, const char *session_id) {
  char *s;

  if (d == NULL || session_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  s = acp__strndup(&d->p->o.mem, session_id, strlen(session_id));
  if (s == NULL)
    return ACP_ERR_NOMEM;
  acp__free(&d->p->o.mem, d->session_id);
  d->session_id = s;
  return 0;
}

acp_mcp_server *acp_mcp_acp_decl_server(const acp_mcp_acp_decl *d) {
  return d != NULL ? d->server : NULL;
}

void acp_mcp_acp_decl_set_user_data(acp_mcp_acp_decl *d, void *ud) {
  if (d != NULL)
    d->user_data = ud;
}

void *acp_mcp_acp_decl_get_user_data(const acp_mcp_acp_decl *d) {
  return d != NULL ? d->user_data : NULL;
}

int acp_mcp_acp_decl_json(acp_mcp_acp_decl *d, acp_mcp_acp_decl_form form,
                          const char **json, size_t *len) {
  acp__buf *b;
  int rv;

  if (d == NULL || json == NULL || len == NULL ||
      (form != ACP_MCP_ACP_DECL_ID && form != ACP_MCP_ACP_DECL_SERVER_ID &&
       form != ACP_MCP_ACP_DECL_URL))
    return ACP_ERR_INVALID_ARGUMENT;
  b = &d->json;
  acp__buf_clear(b);
  rv = acp__buf_append(b, "{\"type\":", 8);
  if (rv == 0)
    rv = form == ACP_MCP_ACP_DECL_URL ? acp__buf_append(b, "\"http\"", 6)
                                      : acp__buf_append(b, "\"acp\"", 5);
  if (rv == 0)
    rv = acp__buf_append(b, ",\"name\":", 8);
  if (rv == 0)
    rv = acp__json_escape_append(b, d->name, strlen(d->name));
  if (rv == 0) {
    const char *k = form == ACP_MCP_ACP_DECL_ID          ? ",\"id\":\""
                    : form == ACP_MCP_ACP_DECL_SERVER_ID ? ",\"serverId\":\""
                                                         : ",\"url\":\"acp:";

    rv = acp__buf_append(b, k, strlen(k));
  }
  if (rv == 0)
    rv = acp__buf_append(b, d->id, 32);
  if (rv == 0)
    rv = form == ACP_MCP_ACP_DECL_URL
             ? acp__buf_append(b, "\",\"headers\":[]}", 15)
             : acp__buf_append(b, "\"}", 2);
  if (rv == 0)
    rv = acp__buf_putc(b, '\0'); /* NUL-terminated for convenience */
  if (rv != 0)
    return rv;
  *json = b->data;
  *len = b->len - 1;
  return 0;
}

void acp_mcp_acp_decl_remove(acp_mcp_acp_decl *d) {
  if (d != NULL)
    decl_free(d);
}

static tunnel *conn_tunnel(const acp_mcp_conn *conn) {
  tunnel *t;

  if (conn == NULL)
    return NULL;
  t = acp_mcp_conn_get_user_data(conn);
  if (t == NULL || t->magic != TUNNEL_MAGIC || t->conn != conn)
    return NULL;
  return t;
}

acp_mcp_acp_decl *acp_mcp_acp_conn_decl(const acp_mcp_conn *conn) {
  tunnel *t = conn_tunnel(conn);

  return t != NULL ? t->decl : NULL;
}

acp_mcp_acp_decl *acp_mcp_acp_call_decl(const acp_mcp_call *call) {
  return call != NULL ? acp_mcp_acp_conn_decl(acp_mcp_call_conn(call)) : NULL;
}

const char *acp_mcp_acp_call_session_id(const acp_mcp_call *call) {
  return acp_mcp_acp_decl_session_id(acp_mcp_acp_call_decl(call));
}

acp_mcp_acp_shape acp_mcp_acp_conn_shape(const acp_mcp_conn *conn) {
  tunnel *t = conn_tunnel(conn);

  return t != NULL ? t->shape : ACP_MCP_ACP_SHAPE_M1;
}

/* MARK: - Provider: dispatch */

/* The generic form of an incoming message, whatever the role object. */
typedef struct in_msg {
  void *req; /* NULL for notifications */
  const char *method;
  size_t method_len;
  const acp_json_val *params;
  const acp_json_val *id; /* outer id (requests) */
  acp_json_doc *doc;
  bool forward_unknown; /* proxy: ids we do not know are someone else's */
} in_msg;

/* An incoming message as the dispatchers see it; `req` is NULL for a
 * notification. */
static void in_msg_from_rpc(in_msg *m, const acp_rpc_msg *msg, void *req) {
  memset(m, 0, sizeof(*m));
  m->req = req;
  m->method = msg->method;
  m->method_len = msg->method_len;
  m->params = msg->params;
  m->id = req != NULL ? msg->id : NULL;
  m->doc = msg->doc;
}

static int open_conn(acp_mcp_acp_provider *p, acp_mcp_acp_decl *d,
                     acp_mcp_acp_shape shape, tunnel **out) {
  owner *o = &p->o;
  tunnel *t = tunnel_new(o);
  char buf[64];
  int rv;

  *out = NULL;
  if (t == NULL)
    return ACP_ERR_NOMEM;
  t->decl = d;
  t->shape = shape;
  if (shape != ACP_MCP_ACP_SHAPE_M2) {
    /* Each connection holds a whole MCP session until mcp/disconnect,
     * which a peer may never send: bounded per server. (M2's one-request
     * conns are bounded by the requests in flight.) */
    if (d->nconns >= ACP_MCP_ACP_MAX_CONNS) {
      tunnel_free(t, false);
      return ACP_ERR_LIMIT;
    }
    d->nconns++;
    t->counted = true;
  }
  rv = acp_mcp_conn_new(&t->conn, d->server, t);
  if (rv == 0 && shape != ACP_MCP_ACP_SHAPE_M2) {
    snprintf(buf, sizeof(buf), "%s:%llu", d->id,
             (unsigned long long)++o->counter);
    t->conn_id = acp__strndup(&o->mem, buf, strlen(buf));
    if (t->conn_id == NULL)
      rv = ACP_ERR_NOMEM;
  }
  if (rv != 0) {
    tunnel_free(t, false);
    return rv;
  }
  *out = t;
  return 0;
}

static int provider_connect(acp_mcp_acp_provider *p, const in_msg *m, bool m0) {
  owner *o = &p->o;
  const char *id = NULL;
  size_t len = 0;
  acp_mcp_acp_decl *d;
  tunnel *t;
  int rv;

  if (m0) {
    id = get_str(m->doc, m->params, "acp_url", &len);
    if (id != NULL && len >= 4 && memcmp(id, "acp:", 4) == 0) {
      id += 4;
      len -= 4;
    } else {
      id = NULL;
    }
  } else {
    static const char *const keys[] = {"acpId", "serverId", "id"};
    size_t i;

    for (i = 0; i < 3 && id == NULL; i++)
      id = get_str(m->doc, m->params, keys[i], &len);
  }
  if (id == NULL) {
    if (m->forward_unknown && m0)
      return ACP_MCP_ACP_NOT_MINE;
    if (m->req == NULL)
      return 0;
    return answer_error(o, m->req, ACP_RPC_INVALID_PARAMS,
                        "Invalid params: missing MCP server id", NULL, NULL, 0);
  }
  d = find_decl(p, id, len);
  if (d == NULL) {
    if (m->forward_unknown)
      return ACP_MCP_ACP_NOT_MINE;
    if (m->req == NULL)
      return 0;
    return answer_error(o, m->req, ACP_RPC_INVALID_PARAMS, ERR_UNKNOWN_SERVER,
                        "serverId", id, len);
  }
  if (m->req == NULL)
    return 0; /* a connect sent as a notification cannot be answered */
  rv = open_conn(p, d, m0 ? ACP_MCP_ACP_SHAPE_M0 : ACP_MCP_ACP_SHAPE_M1, &t);
  if (rv == ACP_ERR_LIMIT)
    return answer_error(o, m->req, ACP_MCP_ACP_SERVER_UNAVAILABLE,
                        "MCP server unavailable: too many connections to it "
                        "(mcp/disconnect some)",
                        NULL, NULL, 0);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM ? rv : 0;
  acp_json_writer_reset(o->w);
  acp_json_write_obj_begin(o->w);
  acp_json_write_keyz(o->w, m0 ? "connection_id" : "connectionId");
  acp_json_write_strz(o->w, t->conn_id);
  acp_json_write_obj_end(o->w);
  rv = acp_json_writer_error(o->w);
  if (rv == 0) {
    size_t n;
    const char *s = acp_json_writer_data(o->w, &n);

    rv = peer_respond(o, m->req, s, n);
  }
  if (rv != 0)
    tunnel_free(t, false);
  return acp_is_fatal(rv) || rv == ACP_ERR_NOMEM ? rv : 0;
}

static int provider_disconnect(acp_mcp_acp_provider *p, const in_msg *m) {
  owner *o = &p->o;
  size_t len = 0;
  const char *id = get_str(m->doc, m->params, "connectionId", &len);
  tunnel *t;
  int rv = 0;

  if (id == NULL)
    id = get_str(m->doc, m->params, "connection_id", &len);
  t = id != NULL ? find_conn(o, id, len) : NULL;
  if (t == NULL) {
    if (m->forward_unknown)
      return ACP_MCP_ACP_NOT_MINE;
    if (m->req == NULL)
      return 0;
    return answer_error(o, m->req, ACP_RPC_INVALID_PARAMS, ERR_UNKNOWN_CONN,
                        "connectionId", id != NULL ? id : "",
                        id != NULL ? len : 0);
  }
  (void)acp_mcp_conn_recv_eof(t->conn, o->now_ms);
  tunnel_free(t, true);
  if (m->req != NULL)
    rv = peer_respond(o, m->req, "{}", 2);
  return acp_is_fatal(rv) || rv == ACP_ERR_NOMEM ? rv : 0;
}

/* M2: one fresh conn per request, initialized by us. */
static int provider_m2(acp_mcp_acp_provider *p, const in_msg *m,
                       const char *sid, size_t sid_len) {
  owner *o = &p->o;
  acp_mcp_acp_decl *d = find_decl(p, sid, sid_len);
  const acp_json_val *rid = ACP__OBJ_GETL(m->params, "requestId");
  tunnel *t;
  int rv;

  if (d == NULL) {
    if (m->forward_unknown)
      return ACP_MCP_ACP_NOT_MINE;
    if (m->req == NULL)
      return 0;
    return answer_error(o, m->req, ACP_MCP_ACP_SERVER_UNAVAILABLE,
                        ERR_UNKNOWN_SERVER, "serverId", sid, sid_len);
  }
  if (m->req == NULL)
    return 0; /* consumers send requests only in this form */
  if (rid == NULL ||
      acp_json_type_of(ACP__OBJ_GETL(m->params, "method")) != ACP_JSON_STRING)
    return answer_error(o, m->req, ACP_RPC_INVALID_PARAMS,
                        "Invalid params: requestId and method are required",
                        NULL, NULL, 0);
  rv = open_conn(p, d, ACP_MCP_ACP_SHAPE_M2, &t);
  if (rv != 0)
    return rv;
  t->m2_request_id = dup_raw(&o->mem, rid);
  if (t->m2_request_id == NULL) {
    tunnel_free(t, false);
    return ACP_ERR_NOMEM;
  }
  if (!ACP_JSON_STR_EQ_LIT(ACP__OBJ_GETL(m->params, "method"), "initialize")) {
    static const char init[] =
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
        "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
        "\"clientInfo\":{\"name\":\"mcp-over-acp\",\"version\":\"0\"}}}\n"
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    acp_ssize n;

    t->in_recv = true;
    n = acp_mcp_conn_recv(t->conn, init, sizeof(init) - 1, o->now_ms);
    t->in_recv = false;
    if (n < 0) {
      tunnel_free(t, false);
      return acp_is_fatal((int)n) ? (int)n : 0;
    }
    /* Discard the initialize answer. */
    for (;;) {
      const char *data;

      n = acp_mcp_conn_send(t->conn, &data);
      if (n <= 0)
        break;
    }
  }
  rv = feed_request(t, m->req, m->id, m->params, true);
  if (rv == 0 && t->ins == NULL) {
    t->done = true;
  }
  if (t->done || rv != 0) {
    if (rv != 0 && t->ins != NULL) {
      /* Could not feed: answer the request ourselves. */
      tunnel_free(t, true);
    } else {
      tunnel_free(t, false);
    }
  }
  return rv == ACP_ERR_NOMEM || acp_is_fatal(rv) ? rv : 0;
}

static int provider_message(acp_mcp_acp_provider *p, const in_msg *m, bool m0) {
  owner *o = &p->o;
  size_t len = 0;
  const char *id = get_str(m->doc, m->params, "connectionId", &len);
  tunnel *t;
  int rv;

  if (id == NULL && !m0) {
    size_t sl = 0;
    const char *sid = get_str(m->doc, m->params, "serverId", &sl);

    if (sid != NULL) {
      char *copy = acp__strndup(&o->mem, sid, sl);

      if (copy == NULL)
        return ACP_ERR_NOMEM;
      rv = provider_m2(p, m, copy, sl);
      acp__free(&o->mem, copy);
      return rv;
    }
  }
  t = id != NULL ? find_conn(o, id, len) : NULL;
  if (t == NULL) {
    if (m->forward_unknown)
      return ACP_MCP_ACP_NOT_MINE;
    if (m->req == NULL)
      return 0;
    return answer_error(o, m->req, ACP_RPC_INVALID_PARAMS, ERR_UNKNOWN_CONN,
                        "connectionId", id != NULL ? id : "",
                        id != NULL ? len : 0);
  }
  if (acp_json_type_of(ACP__OBJ_GETL(m->params, "method")) != ACP_JSON_STRING) {
    if (m->req == NULL)
      return 0;
    return answer_error(o, m->req, ACP_RPC_INVALID_PARAMS,
                        "Invalid params: method is required", NULL, NULL, 0);
  }
  if (m->req != NULL)
    rv = feed_request(t, m->req, m->id, m->params, false);
  else
    rv = feed_notification(t, m->params);
  return rv == ACP_ERR_NOMEM || acp_is_fatal(rv) ? rv : 0;
}

static int provider_dispatch(acp_mcp_acp_provider *p, in_msg *m) {
  const char *s = m->method;
  size_t n = m->method_len;
  int rv;

  if (p == NULL || s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (str_is(s, n, "mcp/connect"))
    rv = provider_connect(p, m, false);
  else if (str_is(s, n, "_mcp/connect"))
    rv = provider_connect(p, m, true);
  else if (str_is(s, n, "mcp/message"))
    rv = provider_message(p, m, false);
  else if (str_is(s, n, "_mcp/message"))
    rv = provider_message(p, m, true);
  else if (str_is(s, n, "mcp/disconnect") || str_is(s, n, "_mcp/disconnect"))
    rv = provider_disconnect(p, m);
  else
    return ACP_MCP_ACP_NOT_MINE;
  return rv;
}

/* An ACP request (req non-NULL) or notification for the provider. */
static int provider_rpc(acp_mcp_acp_provider *p, const acp_rpc_msg *msg,
                        void *req) {
  in_msg m;

  if (p == NULL || msg == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  in_msg_from_rpc(&m, msg, req);
  return provider_dispatch(p, &m);
}

int acp_mcp_acp_provider_client_request(acp_mcp_acp_provider *p,
                                        acp_client_request *req) {
  return provider_rpc(p, acp_client_request_msg(req), req);
}

int acp_mcp_acp_provider_client_notification(acp_mcp_acp_provider *p,
                                             const acp_rpc_msg *msg) {
  return provider_rpc(p, msg, NULL);
}

int acp_mcp_acp_provider_client_cancel(acp_mcp_acp_provider *p,
                                       acp_client_request *req) {
  if (p == NULL || req == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return cancel_outer(&p->o, req);
}

int acp_mcp_acp_provider_proxy_msg(acp_mcp_acp_provider *p,
                                   const acp_proxy_msg *msg) {
  in_msg m;

  if (p == NULL || msg == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (msg->from != ACP_PROXY_FROM_AGENT)
    return ACP_MCP_ACP_NOT_MINE;
  memset(&m, 0, sizeof(m));
  m.req = msg->req;
  m.method = msg->method;
  m.method_len = msg->method_len;
  m.params = msg->params;
  m.id = msg->rpc != NULL ? msg->rpc->id : NULL;
  m.doc = msg->doc;
  m.forward_unknown = true;
  return provider_dispatch(p, &m);
}

int acp_mcp_acp_provider_proxy_cancel(acp_mcp_acp_provider *p,
                                      acp_proxy_request *req) {
  if (p == NULL || req == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return cancel_outer(&p->o, req);
}

/* Write the key `k` (a parsed string) exactly as its decoded value. */
static int write_key_of(acp_json_writer *w, const acp_json_val *k) {
  char small[256];
  size_t n = 0;
  const char *raw = acp_json_str_raw(k, &n);
  acp_mem m;
  char *big;
  int rv;

  if (!acp_json_str_has_escapes(k))
    return acp_json_write_key(w, raw, n);
  if (acp_json_str_unescape(k, small, sizeof(small), &n) == 0)
    return acp_json_write_key(w, small, n);
  acp__mem_init(&m, NULL);
  big = acp__malloc(&m, n + 1);
  if (big == NULL)
    return ACP_ERR_NOMEM;
  rv = acp_json_str_unescape(k, big, n + 1, &n);
  if (rv == 0)
    rv = acp_json_write_key(w, big, n);
  acp__free(&m, big);
  return rv;
}

/* MARK: - JSON helpers */

int acp_mcp_acp_params_add_server(acp_json_writer *w,
                                  const acp_json_val *params, const char *decl,
                                  size_t len) {
  const acp_json_val *k;
  bool seen = false;

  if (w == NULL || decl == NULL || acp_json_type_of(params) != ACP_JSON_OBJECT)
    return ACP_ERR_INVALID_ARGUMENT;
  k = ACP__OBJ_GETL(params, "mcpServers");
  if (k != NULL && acp_json_type_of(k) != ACP_JSON_ARRAY)
    return ACP_ERR_INVALID_ARGUMENT;
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(params); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *v = acp_json_next(k);
    int rv = write_key_of(w, k);

    if (rv != 0)
      return rv;
    if (ACP_JSON_STR_EQ_LIT(k, "mcpServers") && !seen) {
      const acp_json_val *e;

      seen = true;
      acp_json_write_arr_begin(w);
      for (e = acp_json_child(v); e != NULL; e = acp_json_next(e))
        acp_json_write_val(w, e);
      acp_json_write_raw(w, decl, len);
      acp_json_write_arr_end(w);
    } else {
      acp_json_write_val(w, v);
    }
  }
  if (!seen) {
    ACP__W_KEYL(w, "mcpServers");
    acp_json_write_arr_begin(w);
    acp_json_write_raw(w, decl, len);
    acp_json_write_arr_end(w);
  }
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w);
}

int acp_mcp_acp_caps_enable(acp_json_writer *w, const char *caps, size_t len) {
  acp_json_doc *doc = NULL;
  const acp_json_val *root = NULL;
  const acp_json_val *k;
  bool seen = false;
  int rv = 0;

  if (w == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (caps != NULL) {
    rv = acp_json_doc_new(&doc, NULL);
    if (rv != 0)
      return rv;
    rv = acp_json_doc_parse(doc, caps, len, NULL);
    root = acp_json_doc_root(doc);
    if (rv != 0 || acp_json_type_of(root) != ACP_JSON_OBJECT) {
      acp_json_doc_free(doc);
      return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
    }
  }
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(root); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *v = acp_json_next(k);

    rv = write_key_of(w, k);
    if (rv != 0)
      break;
    if (!seen && ACP_JSON_STR_EQ_LIT(k, "mcpCapabilities") &&
        acp_json_type_of(v) == ACP_JSON_OBJECT) {
      const acp_json_val *q;

      seen = true;
      acp_json_write_obj_begin(w);
      for (q = acp_json_child(v); q != NULL;
           q = acp_json_next(acp_json_next(q))) {
        if (ACP_JSON_STR_EQ_LIT(q, "acp"))
          continue;
        rv = write_key_of(w, q);
        if (rv != 0)
          break;
        acp_json_write_val(w, acp_json_next(q));
      }
      ACP__W_KEYL(w, "acp");
      acp_json_write_bool(w, true);
      acp_json_write_obj_end(w);
    } else if (ACP_JSON_STR_EQ_LIT(k, "mcpCapabilities")) {
      acp_json_write_obj_begin(w);
      ACP__W_KEYL(w, "acp");
      acp_json_write_bool(w, true);
      acp_json_write_obj_end(w);
      seen = true;
    } else {
      acp_json_write_val(w, v);
    }
  }
  if (!seen) {
    ACP__W_KEYL(w, "mcpCapabilities");
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "acp");
    acp_json_write_bool(w, true);
    acp_json_write_obj_end(w);
  }
  acp_json_write_obj_end(w);
  acp_json_doc_free(doc);
  return rv != 0 ? rv : acp_json_writer_error(w);
}

int acp_mcp_acp_caps_has_acp(const acp_json_val *caps) {
  bool b = false;

  if (acp_json_get_bool(
          ACP__OBJ_GETL(ACP__OBJ_GETL(caps, "mcpCapabilities"), "acp"), &b) !=
      0)
    return 0;
  return b ? 1 : 0;
}

int acp_mcp_acp_decl_parse(acp_json_doc *doc, const acp_json_val *decl,
                           const char **id, size_t *id_len,
                           acp_mcp_acp_shape *shape) {
  size_t n = 0;
  const char *type;
  const char *s = NULL;

  if (doc == NULL || id == NULL || id_len == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (acp_json_type_of(decl) != ACP_JSON_OBJECT)
    return ACP_ERR_NOT_FOUND;
  type = get_str(doc, decl, "type", &n);
  if (type == NULL)
    type = get_str(doc, decl, "transport", &n);
  if (str_is(type, n, "acp")) {
    static const char *const keys[] = {"id", "serverId", "acpId"};
    size_t i;

    for (i = 0; i < 3 && s == NULL; i++)
      s = get_str(doc, decl, keys[i], &n);
    if (s == NULL)
      return ACP_ERR_NOT_FOUND;
    if (shape != NULL)
      *shape = ACP_MCP_ACP_SHAPE_M1;
  } else if (str_is(type, n, "http")) {
    s = get_str(doc, decl, "url", &n);
    if (s == NULL || n < 4 || memcmp(s, "acp:", 4) != 0)
      return ACP_ERR_NOT_FOUND;
    s += 4;
    n -= 4;
    if (shape != NULL)
      *shape = ACP_MCP_ACP_SHAPE_M0;
  } else {
    return ACP_ERR_NOT_FOUND;
  }
  *id = s;
  *id_len = n;
  return 0;
}

/* MARK: - Consumer */

int acp_mcp_acp_consumer_new(acp_mcp_acp_consumer **out, acp_agent *agent,
                             void *user_data, const acp_mem *mem) {
  acp_mcp_acp_consumer *c;
  acp_mem m;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, mem);
  c = acp__calloc(&m, 1, sizeof(*c));
  if (c == NULL)
    return ACP_ERR_NOMEM;
  rv = owner_init(&c->o, user_data, &m);
  if (rv != 0) {
    owner_dispose(&c->o);
    acp__free(&m, c);
    return rv;
  }
  c->o.ops = &agent_ops;
  c->o.peer.agent = agent;
  *out = c;
  return 0;
}

void acp_mcp_acp_consumer_free(acp_mcp_acp_consumer *c) {
  acp_mem m;

  if (c == NULL)
    return;
  m = c->o.mem;
  owner_dispose(&c->o);
  acp__free(&m, c);
}

void *acp_mcp_acp_consumer_get_user_data(const acp_mcp_acp_consumer *c) {
  return c != NULL ? c->o.user_data : NULL;
}

/* Send the mcp/connect (M1) or _mcp/connect (M0) of a consumer link. */
static int send_connect(tunnel *t) {
  owner *o = t->own;
  out_req *r = out_new(o, t);
  int rv;

  if (r == NULL)
    return ACP_ERR_NOMEM;
  r->is_connect = true;
  acp_json_writer_reset(o->w);
  acp_json_write_obj_begin(o->w);
  if (t->shape == ACP_MCP_ACP_SHAPE_M0) {
    acp__buf b;

    acp__buf_init(&b, &o->mem, 0);
    rv = acp__buf_append(&b, "acp:", 4);
    if (rv == 0)
      rv = acp__buf_append(&b, t->server_id, strlen(t->server_id));
    ACP__W_KEYL(o->w, "acp_url");
    if (rv == 0)
      acp_json_write_str(o->w, b.data, b.len);
    acp__buf_dispose(&b);
    if (rv != 0) {
      out_free(o, r);
      return rv;
    }
  } else {
    /* Both spellings: the seed form reads acpId, the RFD serverId. */
    ACP__W_KEYL(o->w, "acpId");
    acp_json_write_strz(o->w, t->server_id);
    ACP__W_KEYL(o->w, "serverId");
    acp_json_write_strz(o->w, t->server_id);
  }
  acp_json_write_obj_end(o->w);
  rv = acp_json_writer_error(o->w);
  if (rv == 0) {
    size_t n;
    const char *s = acp_json_writer_data(o->w, &n);

    rv = peer_request(
        o, t->shape == ACP_MCP_ACP_SHAPE_M0 ? "_mcp/connect" : "mcp/connect", s,
        n, r);
  }
  if (rv != 0)
    out_free(o, r);
  return rv;
}

int acp_mcp_acp_consumer_open(acp_mcp_acp_consumer *c, const char *server_id,
                              acp_mcp_acp_shape shape, acp_mcp_client *client,
                              acp_mcp_acp_open_cb cb, void *user_data,
                              acp_mcp_acp_link **out) {
  owner *o;
  tunnel *t;
  int rv;

  if (out != NULL)
    *out = NULL;
  if (c == NULL || server_id == NULL || client == NULL ||
      (shape != ACP_MCP_ACP_SHAPE_M0 && shape != ACP_MCP_ACP_SHAPE_M1 &&
       shape != ACP_MCP_ACP_SHAPE_M2))
    return ACP_ERR_INVALID_ARGUMENT;
  o = &c->o;
  t = tunnel_new(o);
  if (t == NULL)
    return ACP_ERR_NOMEM;
  t->shape = shape;
  t->client = client;
  t->open_cb = cb;
  t->open_ud = user_data;
  t->server_id = acp__strndup(&o->mem, server_id, strlen(server_id));
  if (t->server_id == NULL) {
    tunnel_free(t, false);
    return ACP_ERR_NOMEM;
  }
  if (out != NULL)
    *out = (acp_mcp_acp_link *)t;
  if (shape == ACP_MCP_ACP_SHAPE_M2)
    return open_connectionless(t);
  rv = send_connect(t);
  if (rv != 0) {
    if (out != NULL)
      *out = NULL;
    tunnel_free(t, false);
  }
  return rv;
}

void acp_mcp_acp_link_close(acp_mcp_acp_link *link) {
  tunnel *t = (tunnel *)link;
  owner *o;

  if (t == NULL)
    return;
  o = t->own;
  if (t->open && t->conn_id != NULL) {
    acp_json_writer_reset(o->w);
    acp_json_write_obj_begin(o->w);
    acp_json_write_keyz(o->w, t->shape == ACP_MCP_ACP_SHAPE_M0
                                  ? "connection_id"
                                  : "connectionId");
    acp_json_write_strz(o->w, t->conn_id);
    acp_json_write_obj_end(o->w);
    if (acp_json_writer_error(o->w) == 0) {
      size_t n;
      const char *s = acp_json_writer_data(o->w, &n);

      if (t->shape == ACP_MCP_ACP_SHAPE_M0)
        (void)peer_notify(o, "_mcp/disconnect", s, n);
      else
        (void)acp_agent_call(o->peer.agent, "mcp/disconnect", s, n, NULL, NULL,
                             NULL);
    }
  }
  if (t->shape == ACP_MCP_ACP_SHAPE_M2) {
    /* No connection to close: cancel the requests still running. */
    out_req *r;

    for (r = o->outs; r != NULL; r = r->next)
      if (r->t == t)
        (void)acp_agent_cancel_call(o->peer.agent, r->outer_id);
  }
  (void)acp_mcp_client_recv_eof(t->client, o->now_ms);
  tunnel_free(t, true);
}

acp_mcp_client *acp_mcp_acp_link_client(acp_mcp_acp_link *link) {
  return link != NULL ? ((tunnel *)link)->client : NULL;
}

acp_mcp_acp_shape acp_mcp_acp_link_shape(const acp_mcp_acp_link *link) {
  return link != NULL ? ((const tunnel *)link)->shape : ACP_MCP_ACP_SHAPE_M1;
}

const char *acp_mcp_acp_link_connection_id(const acp_mcp_acp_link *link) {
  return link != NULL ? ((const tunnel *)link)->conn_id : NULL;
}

int acp_mcp_acp_link_is_open(const acp_mcp_acp_link *link) {
  return link != NULL && ((const tunnel *)link)->open;
}

int acp_mcp_acp_consumer_flush(acp_mcp_acp_consumer *c, uint64_t now_ms) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return owner_flush(&c->o, now_ms);
}

/* A connectionless notification {serverId, requestId, method, params}: fed
 * to the link or bridge endpoint whose request it names (progress, log
 * messages). ACP_MCP_ACP_NOT_MINE when it names none of our requests. */
static int m2_notification(owner *o, acp_json_doc *doc,
                           const acp_json_val *params) {
  size_t len = 0;
  const char *sid = get_str(doc, params, "serverId", &len);
  const acp_json_val *rid = ACP__OBJ_GETL(params, "requestId");
  out_req *r;
  int rv;

  if (sid == NULL ||
      acp_json_type_of(ACP__OBJ_GETL(params, "method")) != ACP_JSON_STRING)
    return ACP_MCP_ACP_NOT_MINE;
  for (r = o->outs; r != NULL; r = r->next) {
    char buf[24];

    if (!r->m2 || r->t == NULL || !str_is(sid, len, r->t->server_id))
      continue;
    snprintf(buf, sizeof(buf), "%lld", (long long)r->m2_rid);
    if (acp_json_str_eq(rid, buf, strlen(buf)))
      break;
  }
  if (r == NULL)
    return ACP_MCP_ACP_NOT_MINE;
  rv = feed_notification(r->t, params);
  return rv == ACP_ERR_NOMEM || acp_is_fatal(rv) ? rv : 0;
}

static int consumer_dispatch(acp_mcp_acp_consumer *c, const in_msg *m) {
  owner *o = &c->o;
  size_t len = 0;
  const char *id;
  tunnel *t;
  int rv;

  if (!str_is(m->method, m->method_len, "mcp/message") &&
      !str_is(m->method, m->method_len, "_mcp/message"))
    return ACP_MCP_ACP_NOT_MINE;
  id = get_str(m->doc, m->params, "connectionId", &len);
  if (id == NULL && m->req == NULL &&
      ACP__OBJ_GETL(m->params, "serverId") != NULL) {
    /* Dropped when that request is over, as the SDK's caller does. */
    rv = m2_notification(o, m->doc, m->params);
    return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
  }
  t = id != NULL ? find_conn(o, id, len) : NULL;
  if (t == NULL || !t->open ||
      acp_json_type_of(ACP__OBJ_GETL(m->params, "method")) != ACP_JSON_STRING) {
    if (m->req == NULL)
      return 0;
    return answer_error(o, m->req, ACP_RPC_INVALID_PARAMS,
                        t == NULL ? ERR_UNKNOWN_CONN
                                  : "Invalid params: method is required",
                        t == NULL ? "connectionId" : NULL, id != NULL ? id : "",
                        id != NULL ? len : 0);
  }
  if (m->req != NULL)
    rv = feed_request(t, m->req, m->id, m->params, false);
  else
    rv = feed_notification(t, m->params);
  return rv == ACP_ERR_NOMEM || acp_is_fatal(rv) ? rv : 0;
}

/* An ACP request (req non-NULL) or notification for the consumer. */
static int consumer_rpc(acp_mcp_acp_consumer *c, const acp_rpc_msg *msg,
                        void *req) {
  in_msg m;

  if (c == NULL || msg == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  in_msg_from_rpc(&m, msg, req);
  return consumer_dispatch(c, &m);
}

int acp_mcp_acp_consumer_agent_request(acp_mcp_acp_consumer *c,
                                       acp_agent_request *req) {
  return consumer_rpc(c, acp_agent_request_msg(req), req);
}

int acp_mcp_acp_consumer_agent_notification(acp_mcp_acp_consumer *c,
                                            const acp_rpc_msg *msg) {
  return consumer_rpc(c, msg, NULL);
}

/* MARK: - Lines (the conductor's bridge, mcp_acp_int.h) */

struct acp__mcp_lines {
  owner o;
};

int acp__mcp_lines_new(acp__mcp_lines **out, const char *prefix,
                       acp__mcp_ep_write_cb write_cb,
                       acp__mcp_ep_open_cb open_cb, void *user_data,
                       const acp_mem *mem) {
  acp__mcp_lines *l;
  acp_mem m;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (prefix == NULL || strlen(prefix) >= sizeof(l->o.prefix) ||
      write_cb == NULL || open_cb == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, mem);
  l = acp__calloc(&m, 1, sizeof(*l));
  if (l == NULL)
    return ACP_ERR_NOMEM;
  rv = owner_init(&l->o, user_data, &m);
  if (rv != 0) {
    owner_dispose(&l->o);
    acp__free(&m, l);
    return rv;
  }
  l->o.ops = &lines_ops;
  l->o.ep_write = write_cb;
  l->o.ep_open = open_cb;
  memcpy(l->o.prefix, prefix, strlen(prefix) + 1);
  *out = l;
  return 0;
}

void acp__mcp_lines_free(acp__mcp_lines *l) {
  acp_mem m;

  if (l == NULL)
    return;
  m = l->o.mem;
  owner_dispose(&l->o);
  acp__free(&m, l);
}

acp__buf *acp__mcp_lines_up(acp__mcp_lines *l) {
  return &l->o.up;
}

bool acp__mcp_lines_busy(const acp__mcp_lines *l) {
  return l->o.outs != NULL;
}

static int ep_open_adapter(acp_mcp_acp_link *link, int status,
                           const acp_rpc_msg *msg, void *user_data) {
  tunnel *t = (tunnel *)link;
  size_t n = 0;
  const char *err = msg != NULL ? acp_json_raw(msg->error, &n) : NULL;

  (void)user_data;
  return t->own->ep_open((acp__mcp_ep *)t, status, err, n, t->own->user_data);
}

int acp__mcp_lines_connect(acp__mcp_lines *l, const char *server_id,
                           acp_mcp_acp_shape shape, void *ep_user_data,
                           acp__mcp_ep **out) {
  owner *o;
  tunnel *t;
  int rv;

  if (out != NULL)
    *out = NULL;
  if (l == NULL || server_id == NULL || shape != ACP_MCP_ACP_SHAPE_M1)
    return ACP_ERR_INVALID_ARGUMENT;
  o = &l->o;
  t = tunnel_new(o);
  if (t == NULL)
    return ACP_ERR_NOMEM;
  t->shape = shape;
  t->endpoint = true;
  t->ep_ud = ep_user_data;
  t->open_cb = ep_open_adapter;
  t->server_id = acp__strndup(&o->mem, server_id, strlen(server_id));
  rv = t->server_id != NULL ? send_connect(t) : ACP_ERR_NOMEM;
  if (rv != 0) {
    tunnel_free(t, false);
    return rv;
  }
  if (out != NULL)
    *out = (acp__mcp_ep *)t;
  return 0;
}

int acp__mcp_ep_line(acp__mcp_ep *ep, const char *line, size_t len) {
  tunnel *t = (tunnel *)ep;
  int rv;

  if (!t->open) {
    rv = acp__buf_append(&t->out, line, len);
    if (rv == 0)
      rv = acp__buf_putc(&t->out, '\n');
    return rv;
  }
  rv = process_line(t, line, len);
  return rv == ACP_ERR_NOMEM ? rv : 0;
}

void acp__mcp_ep_close(acp__mcp_ep *ep, bool tell) {
  tunnel *t = (tunnel *)ep;
  owner *o;

  if (t == NULL)
    return;
  o = t->own;
  if (tell && t->open && t->conn_id != NULL) {
    out_req *r = out_new(o, NULL);

    acp_json_writer_reset(o->w);
    acp_json_write_obj_begin(o->w);
    ACP__W_KEYL(o->w, "connectionId");
    acp_json_write_strz(o->w, t->conn_id);
    acp_json_write_obj_end(o->w);
    if (r != NULL && acp_json_writer_error(o->w) == 0) {
      size_t n;
      const char *s = acp_json_writer_data(o->w, &n);

      if (peer_request(o, "mcp/disconnect", s, n, r) != 0)
        out_free(o, r);
    } else if (r != NULL) {
      out_free(o, r);
    }
  }
  tunnel_free(t, true);
}

void acp__mcp_ep_fail(acp__mcp_ep *ep, int64_t code, const char *message) {
  tunnel *t = (tunnel *)ep;
  owner *o = t->own;
  out_req *r;

  for (r = o->outs; r != NULL; r = r->next) {
    char head[64];

    if (r->t != t || r->is_connect || r->inner_id == NULL || r->cancelled)
      continue;
    r->t = NULL;
    acp__buf_clear(&t->line);
    snprintf(head, sizeof(head),
             ",\"error\":{\"code\":%lld,\"message\":", (long long)code);
    if (line_z(t, "{\"jsonrpc\":\"2.0\",\"id\":") != 0 ||
        line_z(t, r->inner_id) != 0 || line_z(t, head) != 0 ||
        acp__json_escape_append(&t->line, message, strlen(message)) != 0 ||
        line_z(t, "}}\n") != 0)
      continue;
    (void)inner_recv(t, t->line.data, t->line.len);
  }
  tunnel_free(t, true);
}

void *acp__mcp_ep_user_data(const acp__mcp_ep *ep) {
  return ep != NULL ? ((const tunnel *)ep)->ep_ud : NULL;
}

bool acp__mcp_ep_is_open(const acp__mcp_ep *ep) {
  return ep != NULL && ((const tunnel *)ep)->open;
}

/* An answer to "<prefix><n>" (0), or not one of ours (NOT_MINE). */
static int lines_answer(owner *o, acp_json_doc *doc, const acp_json_val *root,
                        const acp_json_val *id) {
  size_t pl = strlen(o->prefix), n = 0, i;
  const char *s;
  uint64_t num = 0;
  acp_rpc_msg msg;
  out_req *r;

  if (acp_json_type_of(id) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, id, &s, &n) != 0 || n <= pl || n - pl > 19 ||
      memcmp(s, o->prefix, pl) != 0)
    return ACP_MCP_ACP_NOT_MINE;
  for (i = pl; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return 0;
    num = num * 10 + (uint64_t)(s[i] - '0');
  }
  for (r = o->outs; r != NULL; r = r->next)
    if ((uint64_t)r->outer_id == num)
      break;
  if (r == NULL)
    return 0;
  memset(&msg, 0, sizeof(msg));
  msg.kind = ACP_RPC_RESPONSE;
  msg.id = id;
  msg.root = root;
  msg.doc = doc;
  msg.result = ACP__OBJ_GETL(root, "result");
  msg.error = msg.result == NULL ? ACP__OBJ_GETL(root, "error") : NULL;
  if (msg.result == NULL && msg.error == NULL)
    msg.result = ACP__OBJ_GETL(root, "result");
  if (msg.error != NULL) {
    msg.error_code = ACP_RPC_INTERNAL_ERROR;
    (void)acp_json_get_int64(ACP__OBJ_GETL(msg.error, "code"), &msg.error_code);
    msg.error_message =
        get_str(doc, msg.error, "message", &msg.error_message_len);
    msg.error_data = ACP__OBJ_GETL(msg.error, "data");
  }
  return on_outer_response(r, &msg);
}

static tunnel *lines_conn(owner *o, acp_json_doc *doc,
                          const acp_json_val *params) {
  size_t len = 0;
  const char *id = get_str(doc, params, "connectionId", &len);
  tunnel *t;

  if (id == NULL)
    id = get_str(doc, params, "connection_id", &len);
  t = id != NULL ? find_conn(o, id, len) : NULL;
  return t != NULL && t->endpoint && t->open ? t : NULL;
}

int acp__mcp_lines_dispatch(acp__mcp_lines *l, acp_json_doc *doc,
                            const acp_json_val *root, void **closed_ud) {
  owner *o = &l->o;
  const acp_json_val *m = ACP__OBJ_GETL(root, "method");
  const acp_json_val *id = ACP__OBJ_GETL(root, "id");
  const acp_json_val *params = ACP__OBJ_GETL(root, "params");
  tunnel *t;
  int rv;

  *closed_ud = NULL;
  if (m == NULL)
    return lines_answer(o, doc, root, id);
  if (ACP_JSON_STR_EQ_LIT(m, "$/cancel_request")) {
    const acp_json_val *x = ACP__OBJ_GETL(params, "requestId");

    for (t = o->tunnels; t != NULL; t = t->next) {
      in_req *r;

      for (r = t->ins; t->endpoint && r != NULL; r = r->next)
        if (r->outer_id != NULL && raw_eq(x, r->outer_id))
          return cancel_outer(o, r->req);
    }
    return ACP_MCP_ACP_NOT_MINE;
  }
  if (ACP_JSON_STR_EQ_LIT(m, "mcp/disconnect") ||
      ACP_JSON_STR_EQ_LIT(m, "_mcp/disconnect")) {
    t = lines_conn(o, doc, params);
    if (t == NULL)
      return ACP_MCP_ACP_NOT_MINE;
    *closed_ud = t->ep_ud;
    tunnel_free(t, true);
    if (id == NULL)
      return 0;
    {
      char *raw = dup_raw(&o->mem, id);

      if (raw == NULL)
        return ACP_ERR_NOMEM;
      rv = lines_respond(o, raw, "{}", 2);
      acp__free(&o->mem, raw);
    }
    return rv;
  }
  if (!ACP_JSON_STR_EQ_LIT(m, "mcp/message") &&
      !ACP_JSON_STR_EQ_LIT(m, "_mcp/message"))
    return ACP_MCP_ACP_NOT_MINE;
  t = lines_conn(o, doc, params);
  if (t == NULL && id == NULL && ACP__OBJ_GETL(params, "serverId") != NULL)
    return m2_notification(o, doc, params); /* connectionless */
  if (t == NULL ||
      acp_json_type_of(ACP__OBJ_GETL(params, "method")) != ACP_JSON_STRING)
    return ACP_MCP_ACP_NOT_MINE;
  if (id == NULL) {
    rv = feed_notification(t, params);
  } else {
    char *req = dup_raw(&o->mem, id);

    if (req == NULL)
      return ACP_ERR_NOMEM;
    rv = feed_request(t, req, id, params, false);
    if (rv != 0 && (t->ins == NULL || t->ins->req != req))
      acp__free(&o->mem, req);
  }
  return rv == ACP_ERR_NOMEM ? rv : 0;
}
