/*
 * The ACP proxy role: one JSON-RPC session to the conductor, plain traffic
 * from the client side, proxy/successor-wrapped traffic from the agent side,
 * byte-exact forwarding with per-direction id mapping, and the
 * proxy/initialize handshake in the three wire generations. Built on the
 * role base (role.c) with side 0: every request is admitted by routing
 * (proxy_admit), none is checked against the schema.
 */
#include <stdio.h>

#include "role_int.h"

/* MARK: - Types (Private) */

struct acp_proxy_callbacks {
  acp_proxy_msg_cb from_client;
  acp_proxy_msg_cb from_agent;
  acp_proxy_response_hook_cb response;
  acp_proxy_cancel_cb cancel;
  acp_proxy_init_cb initialized;
  acp_proxy_receive_cb receive;
};

enum req_state {
  RS_NEW = 0,   /* being delivered, no decision yet */
  RS_HELD,      /* kept by the proxy, or its answer came back */
  RS_FORWARDED, /* sent on, answer pending */
  RS_ANSWERED   /* answered; freed when no callback holds it */
};

/* The base's call kinds: a forwarded request's copy, or an injected one. */
enum { CALL_FORWARD = 0, CALL_INJECT_AGENT, CALL_INJECT_CLIENT };

/* The base's request (id_raw, method_name: the inner method, in_cb, ...)
 * plus the routing state. */
struct acp_proxy_request {
  acp__req base; /* first: the role base allocates req_size */
  acp__call fwd; /* the forwarded copy's call record */
  acp_proxy_dir from;
  int state;
  int64_t out_id; /* id of the forwarded copy, when forwarded */
  bool is_init;
};

typedef struct acp_proxy_request preq;

enum { INIT_NONE = 0, INIT_PENDING, INIT_DONE };

struct acp_proxy {
  acp__role role; /* first: the session's user_data is the proxy's address */
  acp_proxy_callbacks cbs;
  void *user_data;
  acp_proxy_wire wire;
  int init_state;
  acp__buf name;   /* decoded inner method, NUL-terminated */
  acp__buf tmp;    /* span surgery output */
  char *succ_init; /* successor's InitializeResponse result */
  size_t succ_init_len;
  char *init_repl; /* replacement set in on_initialized */
  size_t init_repl_len;
  bool in_init_cb;
  /* Between admitting a request and its on_request: how it routes. */
  acp_proxy_msg adm;
  int adm_wire;             /* the initialize generation, or -1 */
  const acp_proxy_msg *cur; /* message being delivered */
  bool cur_done;            /* cur was forwarded by the callback */
};

#define PROXY(r) ((acp_proxy *)(r)->owner)

/* MARK: - Method names (Private) */

static bool name_is(const char *m, size_t n, const char *lit) {
  size_t l = strlen(lit);

  return n == l && memcmp(m, lit, l) == 0;
}

static bool is_successor_method(const char *m, size_t n) {
  return name_is(m, n, "proxy/successor") ||
         name_is(m, n, "_proxy/successor") ||
         name_is(m, n, "_proxy/successor/request") ||
         name_is(m, n, "_proxy/successor/notification");
}

static const char *successor_method(const acp_proxy *p, bool request) {
  switch (p->wire) {
  case ACP_PROXY_WIRE_G0:
    return request ? "_proxy/successor/request"
                   : "_proxy/successor/notification";
  case ACP_PROXY_WIRE_G1:
    return "_proxy/successor";
  default:
    return "proxy/successor";
  }
}

/* G0 marks its proxy initialize with params._meta.proxy == true. */
static bool is_g0_initialize(const acp_rpc_msg *msg) {
  const acp_json_val *meta = ACP__OBJ_GETL(msg->params, "_meta");
  bool b = false;

  if (acp_json_get_bool(ACP__OBJ_GETL(meta, "proxy"), &b) != 0)
    return false;
  return b;
}

/* MARK: - Request objects (Private) */

/* Keep r alive across answers (the base frees an answered request that no
 * handler holds); returns the previous hold for unhold(). */
static bool hold(preq *r) {
  bool was = r->base.in_cb;

  r->base.in_cb = true;
  return was;
}

/* Drop the hold and release r if it was answered meanwhile. */
static void unhold(acp_proxy *p, preq *r, bool was) {
  r->base.in_cb = was;
  acp__role_settle(&p->role, &r->base);
}

/* MARK: - Output helpers (Private) */

/* Build {"method": M, "params": P} in the role's scratch writer. */
static int build_wrapper(acp_proxy *p, const char *method, size_t mlen,
                         const char *params, size_t plen, const char **out,
                         size_t *out_len) {
  acp_json_writer *w = p->role.w;
  int rv;

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "method");
  acp_json_write_str(w, method, mlen);
  if (params != NULL) {
    ACP__W_KEYL(w, "params");
    acp_json_write_raw(w, params, plen);
  }
  acp_json_write_obj_end(w);
  rv = acp_json_writer_error(w);
  if (rv != 0)
    return rv;
  *out = acp_json_writer_data(w, out_len);
  return 0;
}

/*
 * Send a request or notification toward `to`. A request's answer goes to
 * proxy_on_response with `c`: the forwarded request's own record, or NULL
 * for one the base allocates from `tmpl` (an injected request).
 */
static int emit(acp_proxy *p, acp_proxy_dir to, acp_rpc_kind kind,
                const char *method, size_t mlen, const char *params,
                size_t plen, acp__call *c, const acp__call *tmpl,
                int64_t *id_out) {
  const char *wrapped;
  size_t wlen;
  const char *sm;
  int rv;

  if (to == ACP_PROXY_FROM_AGENT) {
    rv = build_wrapper(p, method, mlen, params, plen, &wrapped, &wlen);
    if (rv != 0)
      return rv;
    sm = successor_method(p, kind == ACP_RPC_REQUEST);
    method = sm;
    mlen = strlen(sm);
    params = wrapped;
    plen = wlen;
  }
  if (kind != ACP_RPC_REQUEST)
    return acp__role_notify_n(&p->role, method, mlen, params, plen);
  if (c != NULL)
    return acp__role_call_into(&p->role, method, mlen, params, plen, c, id_out);
  /* Injected requests name their method as a C string (mlen == strlen). */
  return acp__role_call(&p->role, method, params, plen, tmpl, id_out);
}

static acp_proxy_dir other_side(acp_proxy_dir d) {
  return d == ACP_PROXY_FROM_CLIENT ? ACP_PROXY_FROM_AGENT
                                    : ACP_PROXY_FROM_CLIENT;
}

static int answer_result(acp_proxy *p, preq *r, const char *result,
                         size_t len) {
  return acp__role_respond(&p->role, &r->base, result, len);
}

static int answer_error(acp_proxy *p, preq *r, int64_t code, const char *msg,
                        size_t msg_len, const char *data, size_t data_len) {
  return acp__role_respond_error_n(&p->role, &r->base, code, msg, msg_len, data,
                                   data_len);
}

/*
 * Relay an error object byte for byte. Inside a batch the session must
 * assemble the array, so the error is re-encoded from its decoded fields
 * there.
 */
static int answer_raw_error(acp_proxy *p, preq *r, const acp_rpc_msg *msg) {
  const char *err;
  const char *data;
  size_t err_len;
  size_t data_len;

  if (r->base.in_batch) {
    data = acp_json_raw(msg->error_data, &data_len);
    return answer_error(p, r, msg->error_code, msg->error_message,
                        msg->error_message_len, data, data_len);
  }
  err = acp_json_raw(msg->error, &err_len);
  return acp__role_respond_raw_error(&p->role, &r->base, err, err_len);
}

/* Relay a response (result, error, or local error) as the answer to r. */
static int relay(acp_proxy *p, preq *r, const acp_rpc_msg *msg) {
  const char *raw;
  size_t len;

  if (msg->local || msg->error != NULL) {
    if (msg->local)
      return answer_error(p, r, msg->error_code, msg->error_message,
                          msg->error_message_len, NULL, 0);
    return answer_raw_error(p, r, msg);
  }
  raw = acp_json_raw(msg->result, &len);
  return answer_result(p, r, raw, len);
}

/*
 * Errors while answering because the connection is gone are not the
 * proxy's failure; only fatal codes propagate.
 */
static int soft(int rv) {
  return acp_is_fatal(rv) ? rv : 0;
}

/* MARK: - Span surgery for the initialize answer (Private) */

/* out = whole with [at, at+cut) replaced by ins. */
static int splice(acp__buf *b, const char *whole, size_t wlen, const char *at,
                  size_t cut, const char *ins, size_t ins_len) {
  size_t head = (size_t)(at - whole);
  int rv;

  acp__buf_clear(b);
  rv = acp__buf_append(b, whole, head);
  if (rv == 0)
    rv = acp__buf_append(b, ins, ins_len);
  if (rv == 0)
    rv = acp__buf_append(b, at + cut, wlen - head - cut);
  return rv;
}

/* Insert `member` ("key":value) as the first member of object `obj`. */
static int insert_member(acp__buf *b, const char *whole, size_t wlen,
                         const acp_json_val *obj, const char *member,
                         size_t mlen) {
  const char *o;
  size_t olen;
  const char *at;
  int rv;

  o = acp_json_raw(obj, &olen);
  at = o + 1;
  acp__buf_clear(b);
  rv = acp__buf_append(b, whole, (size_t)(at - whole));
  if (rv == 0)
    rv = acp__buf_append(b, member, mlen);
  if (rv == 0 && acp_json_len(obj) > 0)
    rv = acp__buf_putc(b, ',');
  if (rv == 0)
    rv = acp__buf_append(b, at, wlen - (size_t)(at - whole));
  return rv;
}

/*
 * Copy b's content to a fresh allocation in *out (freeing the old one), so
 * the next surgery can read it while writing b.
 */
static int take(acp_proxy *p, acp__buf *b, char **out, size_t *len) {
  char *d = acp__strndup(&p->role.mem, b->data ? b->data : "", b->len);

  if (d == NULL)
    return ACP_ERR_NOMEM;
  acp__free(&p->role.mem, *out);
  *out = d;
  *len = b->len;
  return 0;
}

/*
 * The answer to the initialize request: the successor's result, or the
 * replacement with the successor's protocolVersion bytes forced in, plus
 * the G0 `_meta.proxy: true` marker. Result in p->tmp.
 */
static int build_init_answer(acp_proxy *p, const acp_json_val *succ_pv) {
  char *cur = NULL;
  size_t cur_len = 0;
  const acp_json_val *root;
  const acp_json_val *v;
  const char *raw;
  size_t len;
  int rv;

  cur = acp__strndup(&p->role.mem, p->init_repl ? p->init_repl : p->succ_init,
                     p->init_repl ? p->init_repl_len : p->succ_init_len);
  if (cur == NULL)
    return ACP_ERR_NOMEM;
  cur_len = p->init_repl ? p->init_repl_len : p->succ_init_len;
  rv = acp_json_doc_parse(p->role.doc, cur, cur_len, NULL);
  root = acp_json_doc_root(p->role.doc);
  if (rv == 0 && p->init_repl != NULL && succ_pv != NULL &&
      acp_json_type_of(root) == ACP_JSON_OBJECT) {
    const char *pv;
    size_t pv_len;

    pv = acp_json_raw(succ_pv, &pv_len);
    v = ACP__OBJ_GETL(root, "protocolVersion");
    if (v != NULL) {
      raw = acp_json_raw(v, &len);
      rv = splice(&p->tmp, cur, cur_len, raw, len, pv, pv_len);
    } else {
      acp__buf m;

      acp__buf_init(&m, &p->role.mem, 0);
      rv = acp__buf_append(&m, "\"protocolVersion\":", 18);
      if (rv == 0)
        rv = acp__buf_append(&m, pv, pv_len);
      if (rv == 0)
        rv = insert_member(&p->tmp, cur, cur_len, root, m.data, m.len);
      acp__buf_dispose(&m);
    }
    if (rv == 0)
      rv = take(p, &p->tmp, &cur, &cur_len);
    if (rv == 0)
      rv = acp_json_doc_parse(p->role.doc, cur, cur_len, NULL);
    root = acp_json_doc_root(p->role.doc);
  }
  if (rv == 0 && p->wire == ACP_PROXY_WIRE_G0 &&
      acp_json_type_of(root) == ACP_JSON_OBJECT) {
    const acp_json_val *meta = ACP__OBJ_GETL(root, "_meta");

    if (acp_json_type_of(meta) == ACP_JSON_OBJECT) {
      v = ACP__OBJ_GETL(meta, "proxy");
      if (v != NULL) {
        raw = acp_json_raw(v, &len);
        rv = splice(&p->tmp, cur, cur_len, raw, len, "true", 4);
      } else {
        rv = insert_member(&p->tmp, cur, cur_len, meta, "\"proxy\":true", 12);
      }
    } else if (meta == NULL) {
      rv = insert_member(&p->tmp, cur, cur_len, root,
                         "\"_meta\":{\"proxy\":true}", 22);
    } else {
      rv = splice(&p->tmp, cur, cur_len, cur, 0, "", 0);
    }
  } else if (rv == 0) {
    rv = splice(&p->tmp, cur, cur_len, cur, 0, "", 0);
  }
  acp__free(&p->role.mem, cur);
  return rv;
}

static int init_finish(acp_proxy *p, preq *r, const acp_rpc_msg *msg) {
  const acp_json_val *succ_pv;
  const char *raw;
  size_t len;
  int rv;

  if (msg->local || msg->error != NULL ||
      acp_json_type_of(msg->result) != ACP_JSON_OBJECT) {
    p->init_state = INIT_NONE;
    if (msg->local || msg->error != NULL)
      return soft(relay(p, r, msg));
    raw = acp_json_raw(msg->result, &len);
    return soft(answer_result(p, r, raw, len));
  }
  raw = acp_json_raw(msg->result, &len);
  acp__free(&p->role.mem, p->succ_init);
  p->succ_init = acp__strndup(&p->role.mem, raw, len);
  if (p->succ_init == NULL)
    return ACP_ERR_NOMEM;
  p->succ_init_len = len;
  if (p->cbs.initialized != NULL) {
    p->in_init_cb = true;
    rv = p->cbs.initialized(p, msg, p->user_data);
    p->in_init_cb = false;
    if (rv != 0 && rv != ACP_PROXY_FORWARD && rv != ACP_ERR_PAUSE)
      return rv;
  }
  succ_pv = ACP__OBJ_GETL(msg->result, "protocolVersion");
  rv = build_init_answer(p, succ_pv);
  acp__free(&p->role.mem, p->init_repl);
  p->init_repl = NULL;
  p->init_repl_len = 0;
  if (rv != 0)
    return rv;
  rv = answer_result(p, r, p->tmp.data, p->tmp.len);
  if (rv == 0)
    p->init_state = INIT_DONE;
  return soft(rv);
}

/* MARK: - Session callbacks (Private) */

static int tap(acp_proxy *p, acp_proxy_dir from, const acp_rpc_msg *msg) {
  if (p->cbs.receive == NULL)
    return 0;
  return p->cbs.receive(p, from, msg, p->user_data);
}

/* The answer to a request we forwarded. */
static int fwd_response(acp_proxy *p, preq *r, const acp_rpc_msg *msg) {
  bool was = hold(r);
  int rv;

  rv = tap(p, other_side(r->from), msg);
  if (rv != 0)
    goto done;
  r->state = RS_HELD;
  if (r->is_init) {
    rv = init_finish(p, r, msg);
  } else {
    rv = ACP_PROXY_FORWARD;
    if (p->cbs.response != NULL)
      rv = p->cbs.response(p, r, msg, p->user_data);
    if (rv == ACP_PROXY_FORWARD) {
      rv = 0;
      if (r->state == RS_HELD)
        rv = soft(relay(p, r, msg));
    }
  }
done:
  unhold(p, r, was);
  return rv;
}

/* Forward the message being delivered, with the given params. */
static int forward_msg(acp_proxy *p, const acp_proxy_msg *m, const char *params,
                       size_t plen) {
  preq *r = m->req;
  int rv;

  if (r != NULL) {
    if (r->state != RS_NEW && r->state != RS_HELD)
      return ACP_ERR_INVALID_STATE;
    rv = emit(p, other_side(r->from), ACP_RPC_REQUEST, m->method, m->method_len,
              params, plen, &r->fwd, NULL, &r->out_id);
    if (rv == 0)
      r->state = RS_FORWARDED;
  } else {
    rv = emit(p, other_side(m->from), ACP_RPC_NOTIFICATION, m->method,
              m->method_len, params, plen, NULL, NULL, NULL);
  }
  if (rv == 0 && m == p->cur)
    p->cur_done = true;
  return rv;
}

/* A request we could not forward gets an error instead of silence. */
static int forward_failed(acp_proxy *p, preq *r, int err) {
  char msg[128];

  if (acp_is_fatal(err))
    return err;
  if (r == NULL)
    return 0;
  snprintf(msg, sizeof(msg), "proxy: cannot forward the request: %s",
           acp_strerror(err));
  return soft(
      answer_error(p, r, ACP_RPC_INTERNAL_ERROR, msg, strlen(msg), NULL, 0));
}

/* Hand a message to the user's callback and apply the verdict. */
static int deliver(acp_proxy *p, acp_proxy_msg *m) {
  acp_proxy_msg_cb cb;
  preq *r = m->req;
  int rv;
  int frv = 0;

  bool was = r != NULL && hold(r);

  cb =
      m->from == ACP_PROXY_FROM_CLIENT ? p->cbs.from_client : p->cbs.from_agent;
  p->cur = m;
  p->cur_done = false;
  rv = cb != NULL ? cb(p, m, p->user_data) : ACP_PROXY_FORWARD;
  if (rv == ACP_PROXY_FORWARD) {
    rv = 0;
    if (r != NULL ? r->state == RS_NEW : !p->cur_done)
      frv = forward_msg(p, m, m->params_raw, m->params_len);
  }
  p->cur = NULL;
  if (r != NULL && r->state == RS_NEW)
    r->state = RS_HELD;
  if (frv != 0) {
    frv = forward_failed(p, r, frv);
    if (frv != 0 && rv == 0)
      rv = frv;
  }
  if (r != NULL)
    unhold(p, r, was);
  return rv;
}

/* Pass a cancellation on to the hop a request was forwarded to. Returns 0
 * or a fatal code. ACP_ERR_NOT_FOUND means the answer came first; a cancel
 * refused by a cap (ACP_ERR_LIMIT) is dropped, as cancellation is only a
 * hint: the request is still answered. */
static int cancel_forward(acp_proxy *p, preq *r) {
  int rv;

  r->base.cancelled = true;
  if (r->state != RS_FORWARDED)
    return 0;
  rv = acp__role_cancel_call(&p->role, r->out_id);
  return acp_is_fatal(rv) ? rv : 0;
}

static int cancel_req(acp_proxy *p, preq *r) {
  bool was = hold(r);
  int rv = cancel_forward(p, r);

  if (rv == 0 && p->cbs.cancel != NULL)
    rv = p->cbs.cancel(p, r, p->user_data);
  unhold(p, r, was);
  return rv;
}

/* `$/cancel_request` that arrived wrapped: it names the id of the
 * proxy/successor request that brought the agent's request, an incoming
 * request of our session, found as a plain cancel finds one (by value,
 * through the session's index and tag: a search of every request in
 * flight per cancel grew with what the agent kept unanswered). */
static int wrapped_cancel(acp_proxy *p, const acp_json_val *params) {
  uint64_t handle;
  preq *r;

  if (acp__rpc_find_request(p->role.rpc, ACP__OBJ_GETL(params, "requestId"),
                            &handle) != 0)
    return 0;
  r = acp__rpc_tag(p->role.rpc, handle);
  if (r != NULL && r->from == ACP_PROXY_FROM_AGENT && r->state != RS_ANSWERED)
    return cancel_req(p, r);
  return 0;
}

/* Unpack proxy/successor params into m. Returns 0 or -1 (invalid). */
static int unwrap(acp_proxy *p, const acp_rpc_msg *msg, acp_proxy_msg *m,
                  int *fatal) {
  const acp_json_val *inner_m = ACP__OBJ_GETL(msg->params, "method");
  const acp_json_val *inner_p = ACP__OBJ_GETL(msg->params, "params");
  const char *s;
  size_t n;
  int rv;

  *fatal = 0;
  if (acp_json_type_of(inner_m) != ACP_JSON_STRING)
    return -1;
  rv = acp_json_doc_str(msg->doc, inner_m, &s, &n);
  if (rv == 0) {
    acp__buf_clear(&p->name);
    rv = acp__buf_append(&p->name, s, n);
    if (rv == 0)
      rv = acp__buf_putc(&p->name, '\0');
  }
  if (rv != 0) {
    *fatal = rv;
    return -1;
  }
  m->from = ACP_PROXY_FROM_AGENT;
  m->method = p->name.data;
  m->method_len = n;
  m->params = inner_p;
  m->params_raw = acp_json_raw(inner_p, &m->params_len);
  m->envelope_meta = ACP__OBJ_GETL(msg->params, "_meta");
  if (m->envelope_meta == NULL)
    m->envelope_meta = ACP__OBJ_GETL(msg->params, "meta");
  return 0;
}

static void plain(const acp_rpc_msg *msg, acp_proxy_msg *m) {
  m->from = ACP_PROXY_FROM_CLIENT;
  m->method = msg->method;
  m->method_len = msg->method_len;
  m->params = msg->params;
  m->params_raw = acp_json_raw(msg->params, &m->params_len);
}

/* Answer a request that gets no record (refused before admission). */
static int refuse(acp_proxy *p, const acp_rpc_msg *msg, int64_t code,
                  const char *why) {
  int rv = acp_rpc_session_respond_error(p->role.rpc, msg->handle, code, why,
                                         strlen(why), NULL, 0);

  rv = soft(rv);
  return rv != 0 ? rv : ACP__ROLE_DONE;
}

/*
 * Route an incoming request before the base records it: the receive tap,
 * the initialize generations, and the proxy/successor envelope, whose inner
 * method is the one recorded. What proxy_on_request needs is left in
 * p->adm / p->adm_wire.
 */
static int proxy_admit(acp__role *role, const acp_rpc_msg *msg,
                       const char **name, size_t *name_len) {
  acp_proxy *p = PROXY(role);
  const char *mn = msg->method;
  size_t ml = msg->method_len;
  bool wrapped = is_successor_method(mn, ml);
  acp_proxy_msg *m = &p->adm;
  int fatal;
  int rv;

  rv = tap(p, wrapped ? ACP_PROXY_FROM_AGENT : ACP_PROXY_FROM_CLIENT, msg);
  if (rv != 0)
    return rv;
  p->adm_wire = -1;
  if (name_is(mn, ml, "proxy/initialize"))
    p->adm_wire = ACP_PROXY_WIRE_G2;
  else if (name_is(mn, ml, "_proxy/initialize"))
    p->adm_wire = ACP_PROXY_WIRE_G1;
  else if (name_is(mn, ml, "initialize")) {
    if (!is_g0_initialize(msg))
      return refuse(p, msg, ACP_RPC_INVALID_REQUEST,
                    "this component is a proxy: expected proxy/initialize");
    p->adm_wire = ACP_PROXY_WIRE_G0;
  }
  if (p->adm_wire >= 0) {
    if (p->init_state != INIT_NONE)
      return refuse(p, msg, ACP_RPC_INVALID_REQUEST,
                    "proxy already initialized");
    return 0;
  }
  memset(m, 0, sizeof(*m));
  m->kind = ACP_RPC_REQUEST;
  m->rpc = msg;
  m->doc = msg->doc;
  if (wrapped) {
    if (unwrap(p, msg, m, &fatal) != 0) {
      if (fatal != 0)
        return fatal;
      return refuse(p, msg, ACP_RPC_INVALID_PARAMS,
                    "Invalid params: proxy/successor needs a string "
                    "\"method\"");
    }
  } else {
    plain(msg, m);
  }
  *name = m->method;
  *name_len = m->method_len;
  return 0;
}

static int start_initialize(acp_proxy *p, preq *r) {
  const acp_rpc_msg *msg = r->base.msg;
  const char *params;
  size_t plen;
  int rv;

  r->from = ACP_PROXY_FROM_CLIENT;
  r->is_init = true;
  p->wire = (acp_proxy_wire)p->adm_wire;
  p->init_state = INIT_PENDING;
  params = acp_json_raw(msg->params, &plen);
  rv = emit(p, ACP_PROXY_FROM_AGENT, ACP_RPC_REQUEST, "initialize", 10, params,
            plen, &r->fwd, NULL, &r->out_id);
  if (rv == 0) {
    r->state = RS_FORWARDED;
    return 0;
  }
  p->init_state = INIT_NONE;
  return forward_failed(p, r, rv);
}

static int proxy_on_request(acp__role *role, acp__req *req,
                            const acp_method_info *mi) {
  acp_proxy *p = PROXY(role);
  preq *r = (preq *)req;

  ACP_UNUSED(mi);
  if (p->adm_wire >= 0)
    return start_initialize(p, r);
  r->from = p->adm.from;
  p->adm.req = r;
  /* The recorded copy outlives the scratch buffer that p->name is. */
  if (r->from == ACP_PROXY_FROM_AGENT)
    p->adm.method = req->method_name;
  return deliver(p, &p->adm);
}

static int proxy_on_notification(acp__role *role, const acp_rpc_msg *msg,
                                 const acp_method_info *mi) {
  acp_proxy *p = PROXY(role);
  bool wrapped = is_successor_method(msg->method, msg->method_len);
  acp_proxy_msg m;
  int fatal;
  int rv;

  ACP_UNUSED(mi);
  rv = tap(p, wrapped ? ACP_PROXY_FROM_AGENT : ACP_PROXY_FROM_CLIENT, msg);
  if (rv != 0)
    return rv;
  if (name_is(msg->method, msg->method_len, "proxy/initialize") ||
      name_is(msg->method, msg->method_len, "_proxy/initialize"))
    return 0; /* meaningless as a notification */
  memset(&m, 0, sizeof(m));
  m.kind = ACP_RPC_NOTIFICATION;
  m.rpc = msg;
  m.doc = msg->doc;
  if (wrapped) {
    if (unwrap(p, msg, &m, &fatal) != 0)
      return fatal; /* an invalid notification is dropped */
    if (name_is(m.method, m.method_len, "$/cancel_request"))
      return wrapped_cancel(p, m.params);
  } else {
    plain(msg, &m);
  }
  return deliver(p, &m);
}

static int proxy_on_cancel(acp__role *role, acp__req *req) {
  return cancel_req(PROXY(role), (preq *)req);
}

/* The answer to one of our requests: a forwarded copy or an injection. */
static int proxy_on_response(acp__role *role, acp__call *c,
                             const acp_rpc_msg *msg) {
  acp_proxy *p = PROXY(role);
  int rv;

  if (c->kind == CALL_FORWARD)
    return fwd_response(p, (preq *)((char *)c - offsetof(preq, fwd)), msg);
  rv = tap(p,
           c->kind == CALL_INJECT_AGENT ? ACP_PROXY_FROM_AGENT
                                        : ACP_PROXY_FROM_CLIENT,
           msg);
  if (rv == 0 && c->cb.proxy != NULL)
    rv = c->cb.proxy(p, msg, c->cb_user_data);
  return rv;
}

static void proxy_on_answered(acp__role *role, acp__req *req, bool is_error) {
  ACP_UNUSED(role);
  ACP_UNUSED(is_error);
  ((preq *)req)->state = RS_ANSWERED;
}

static const acp__role_ops proxy_ops = {
    .req_size = sizeof(preq),
    .admit = proxy_admit,
    .on_request = proxy_on_request,
    .on_notification = proxy_on_notification,
    .on_cancel = proxy_on_cancel,
    .on_response = proxy_on_response,
    .on_answered = proxy_on_answered,
};

/* MARK: - Callbacks (Public) */

int acp_proxy_callbacks_new(acp_proxy_callbacks **out) {
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = acp__calloc(acp_mem_default(), 1, sizeof(**out));
  return *out ? 0 : ACP_ERR_NOMEM;
}

void acp_proxy_callbacks_free(acp_proxy_callbacks *cbs) {
  acp__free(acp_mem_default(), cbs);
}

void acp_proxy_callbacks_set_on_from_client(acp_proxy_callbacks *cbs,
                                            acp_proxy_msg_cb cb) {
  if (cbs)
    cbs->from_client = cb;
}

void acp_proxy_callbacks_set_on_from_agent(acp_proxy_callbacks *cbs,
                                           acp_proxy_msg_cb cb) {
  if (cbs)
    cbs->from_agent = cb;
}

void acp_proxy_callbacks_set_on_response(acp_proxy_callbacks *cbs,
                                         acp_proxy_response_hook_cb cb) {
  if (cbs)
    cbs->response = cb;
}

void acp_proxy_callbacks_set_on_cancel(acp_proxy_callbacks *cbs,
                                       acp_proxy_cancel_cb cb) {
  if (cbs)
    cbs->cancel = cb;
}

void acp_proxy_callbacks_set_on_initialized(acp_proxy_callbacks *cbs,
                                            acp_proxy_init_cb cb) {
  if (cbs)
    cbs->initialized = cb;
}

void acp_proxy_callbacks_set_on_receive(acp_proxy_callbacks *cbs,
                                        acp_proxy_receive_cb cb) {
  if (cbs)
    cbs->receive = cb;
}

/* MARK: - Lifetime (Public) */

int acp_proxy_new(acp_proxy **out, const acp_proxy_callbacks *cbs,
                  void *user_data, const acp_rpc_options *opts,
                  const acp_mem *mem) {
  acp_proxy *p;
  acp_mem m;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  p = acp__calloc(&m, 1, sizeof(*p));
  if (p == NULL)
    return ACP_ERR_NOMEM;
  p->user_data = user_data;
  p->wire = ACP_PROXY_WIRE_G2;
  p->adm_wire = -1;
  if (cbs != NULL)
    p->cbs = *cbs;
  /* Side 0: the proxy handles every method, by routing. */
  rv = acp__role_init(&p->role, (acp_side)0, &proxy_ops, p, opts, &m);
  if (rv != 0) {
    acp__free(&m, p);
    return rv;
  }
  acp__buf_init(&p->name, &p->role.mem, 0);
  acp__buf_init(&p->tmp, &p->role.mem, 0);
  *out = p;
  return 0;
}

void acp_proxy_free(acp_proxy *p) {
  acp_mem m;

  if (p == NULL)
    return;
  m = p->role.mem;
  acp__role_dispose(&p->role);
  acp__buf_dispose(&p->name);
  acp__buf_dispose(&p->tmp);
  acp__free(&m, p->succ_init);
  acp__free(&m, p->init_repl);
  acp__free(&m, p);
}

void *acp_proxy_get_user_data(const acp_proxy *p) {
  return p ? p->user_data : NULL;
}

acp_rpc_session *acp_proxy_session(acp_proxy *p) {
  return p ? p->role.rpc : NULL;
}

acp_ssize acp_proxy_recv(acp_proxy *p, const char *data, size_t len,
                         uint64_t now_ms) {
  if (p == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_recv(&p->role, data, len, now_ms);
}

acp_ssize acp_proxy_send(acp_proxy *p, const char **data) {
  if (p == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp_rpc_session_send(p->role.rpc, data);
}

int acp_proxy_recv_eof(acp_proxy *p, uint64_t now_ms) {
  if (p == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  p->role.now_ms = now_ms;
  return acp_rpc_session_recv_eof(p->role.rpc, now_ms);
}

/* MARK: - State (Public) */

int acp_proxy_is_initialized(const acp_proxy *p) {
  return p != NULL && p->init_state == INIT_DONE;
}

acp_proxy_wire acp_proxy_get_wire(const acp_proxy *p) {
  return p ? p->wire : ACP_PROXY_WIRE_G2;
}

const char *acp_proxy_successor_init_result(const acp_proxy *p, size_t *len) {
  if (len)
    *len = p && p->succ_init ? p->succ_init_len : 0;
  return p ? p->succ_init : NULL;
}

int acp_proxy_set_init_result(acp_proxy *p, const char *result, size_t len) {
  char *d;
  int rv;

  if (p == NULL || result == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!p->in_init_cb)
    return ACP_ERR_INVALID_STATE;
  d = acp__strndup(&p->role.mem, result, len);
  if (d == NULL)
    return ACP_ERR_NOMEM;
  /* Validate on the scratch doc: the successor's result was parsed by the
   * session's own document, which stays untouched. */
  rv = acp_json_doc_parse(p->role.doc, d, len, NULL);
  if (rv == ACP_ERR_NOMEM) {
    acp__free(&p->role.mem, d);
    return rv;
  }
  if (rv != 0 ||
      acp_json_type_of(acp_json_doc_root(p->role.doc)) != ACP_JSON_OBJECT) {
    acp__free(&p->role.mem, d);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  acp__free(&p->role.mem, p->init_repl);
  p->init_repl = d;
  p->init_repl_len = len;
  return 0;
}

/* MARK: - Forwarding and answering (Public) */

int acp_proxy_forward(acp_proxy *p, const acp_proxy_msg *msg) {
  if (p == NULL || msg == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return forward_msg(p, msg, msg->params_raw, msg->params_len);
}

int acp_proxy_forward_transformed(acp_proxy *p, const acp_proxy_msg *msg,
                                  const char *params, size_t len) {
  if (p == NULL || msg == NULL || (params == NULL && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  return forward_msg(p, msg, params, len);
}

int acp_proxy_request_forward(acp_proxy *p, acp_proxy_request *req,
                              const char *params, size_t len) {
  int rv;

  if (p == NULL || req == NULL || (params == NULL && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->state != RS_NEW && req->state != RS_HELD)
    return ACP_ERR_INVALID_STATE;
  rv = emit(p, other_side(req->from), ACP_RPC_REQUEST, req->base.method_name,
            strlen(req->base.method_name), params, len, &req->fwd, NULL,
            &req->out_id);
  if (rv == 0) {
    req->state = RS_FORWARDED;
    if (req->base.cancelled)
      rv = cancel_forward(p, req);
  }
  return rv;
}

static int check_answerable(const acp_proxy *p, const preq *r) {
  if (p == NULL || r == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (r->state != RS_NEW && r->state != RS_HELD)
    return ACP_ERR_INVALID_STATE;
  return 0;
}

int acp_proxy_respond(acp_proxy *p, acp_proxy_request *req, const char *result,
                      size_t len) {
  int rv = check_answerable(p, req);

  if (rv != 0)
    return rv;
  if (result == NULL && len > 0)
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->is_init)
    return ACP_ERR_INVALID_STATE;
  return answer_result(p, req, result, len);
}

int acp_proxy_respond_error(acp_proxy *p, acp_proxy_request *req, int64_t code,
                            const char *message, const char *data,
                            size_t data_len) {
  int rv = check_answerable(p, req);

  if (rv != 0)
    return rv;
  if (req->is_init)
    return ACP_ERR_INVALID_STATE;
  if (message == NULL)
    message = "";
  return answer_error(p, req, code, message, strlen(message), data, data_len);
}

acp_proxy_dir acp_proxy_request_from(const acp_proxy_request *req) {
  return req ? req->from : ACP_PROXY_FROM_CLIENT;
}

const char *acp_proxy_request_method(const acp_proxy_request *req) {
  return req ? req->base.method_name : NULL;
}

int acp_proxy_request_is_cancelled(const acp_proxy_request *req) {
  return req != NULL && req->base.cancelled;
}

int acp_proxy_request_is_forwarded(const acp_proxy_request *req) {
  return req != NULL && req->state == RS_FORWARDED;
}

void acp_proxy_request_set_user_data(acp_proxy_request *req, void *user_data) {
  if (req)
    req->base.user_data = user_data;
}

void *acp_proxy_request_get_user_data(const acp_proxy_request *req) {
  return req ? req->base.user_data : NULL;
}

/* MARK: - Injecting (Public) */

static int send_request(acp_proxy *p, acp_proxy_dir to, const char *method,
                        const char *params, size_t plen,
                        acp_proxy_response_cb cb, void *cb_ud,
                        int64_t *id_out) {
  acp__call tmpl;

  if (p == NULL || method == NULL || (params == NULL && plen > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  memset(&tmpl, 0, sizeof(tmpl));
  tmpl.kind =
      to == ACP_PROXY_FROM_AGENT ? CALL_INJECT_AGENT : CALL_INJECT_CLIENT;
  tmpl.cb.proxy = cb;
  tmpl.cb_user_data = cb_ud;
  return emit(p, to, ACP_RPC_REQUEST, method, strlen(method), params, plen,
              NULL, &tmpl, id_out);
}

int acp_proxy_send_to_agent(acp_proxy *p, const char *method,
                            const char *params, size_t params_len,
                            acp_proxy_response_cb cb, void *cb_user_data,
                            int64_t *id_out) {
  return send_request(p, ACP_PROXY_FROM_AGENT, method, params, params_len, cb,
                      cb_user_data, id_out);
}

int acp_proxy_send_to_client(acp_proxy *p, const char *method,
                             const char *params, size_t params_len,
                             acp_proxy_response_cb cb, void *cb_user_data,
                             int64_t *id_out) {
  return send_request(p, ACP_PROXY_FROM_CLIENT, method, params, params_len, cb,
                      cb_user_data, id_out);
}

int acp_proxy_notify_agent(acp_proxy *p, const char *method, const char *params,
                           size_t params_len) {
  if (p == NULL || method == NULL || (params == NULL && params_len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  return emit(p, ACP_PROXY_FROM_AGENT, ACP_RPC_NOTIFICATION, method,
              strlen(method), params, params_len, NULL, NULL, NULL);
}

int acp_proxy_notify_client(acp_proxy *p, const char *method,
                            const char *params, size_t params_len) {
  if (p == NULL || method == NULL || (params == NULL && params_len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  return emit(p, ACP_PROXY_FROM_CLIENT, ACP_RPC_NOTIFICATION, method,
              strlen(method), params, params_len, NULL, NULL, NULL);
}

int acp_proxy_cancel(acp_proxy *p, int64_t id) {
  if (p == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_cancel_call(&p->role, id);
}
