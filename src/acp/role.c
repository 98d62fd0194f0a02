/*
 * Shared machinery of the agent, client and proxy roles: the JSON-RPC
 * session glue, incoming request objects, outgoing call records and the
 * schema required-member check that yields -32602.
 */
#include <stdio.h>

#include "acp/types_v2.h"
#include "codec_int.h"
#include "json/json_int.h"
#include "role_int.h"

/* MARK: - Required members per method (from the v1 schemas) */

/*
 * Check params against the required members of the method, which
 * tools/gen_acp.py takes from the schema (acp__method_required_params():
 * "<t><n><name>" items back to back, t is s(tring), a(rray), o(bject),
 * i(nteger), n one byte holding the name's length, 1-255). The lengths are
 * the generator's, so a request costs no scan of the spec for the ends of
 * the names. Returns 0 when valid, else
 * writes "<path>: <reason>" into msg and the path into path.
 */
static int check_params(int version, acp_method_id id,
                        const acp_json_val *params, char *msg, size_t msgcap,
                        char *path, size_t pathcap) {
  const char *spec = acp__method_required_params_version(version, (int)id);
  const char *p = spec;

  if (params != NULL && acp_json_type_of(params) != ACP_JSON_OBJECT) {
    snprintf(path, pathcap, "%s", "");
    snprintf(msg, msgcap, "%s", "params: expected an object");
    return -1;
  }
  while (*p != '\0') {
    char t = p[0];
    const char *name = p + 2;
    const char *end = name + (unsigned char)p[1];
    const acp_json_val *v;
    const char *want = NULL;
    int64_t iv;

    p = end;
    if (params == NULL) {
      snprintf(path, pathcap, "/%.*s", (int)(end - name), name);
      snprintf(msg, msgcap, "%s: missing (no params)", path);
      return -1;
    }
    /* Inline (json_int.h): the general lookup's answer, without a call
     * per required member of every message. */
    v = acp__json_obj_get_inl(params, name, (size_t)(end - name));
    switch (t) {
    case 's':
      want = acp_json_type_of(v) == ACP_JSON_STRING ? NULL : "a string";
      break;
    case 'a':
      want = acp_json_type_of(v) == ACP_JSON_ARRAY ? NULL : "an array";
      break;
    case 'o':
      want = acp_json_type_of(v) == ACP_JSON_OBJECT ? NULL : "an object";
      break;
    case 'i':
      want = acp_json_get_int64(v, &iv) == 0 ? NULL : "an integer";
      break;
    default:
      break;
    }
    if (want != NULL) {
      /* The path is formatted only for the answer: every message passes
       * here, and snprintf was a tenth of a small prompt turn. */
      snprintf(path, pathcap, "/%.*s", (int)(end - name), name);
      if (v == NULL)
        snprintf(msg, msgcap, "%s: required member is missing", path);
      else
        snprintf(msg, msgcap, "%s: expected %s", path, want);
      return -1;
    }
  }
  return 0;
}

/*
 * ACP v2: the whole params through the generated v2 codec (types_v2.h), so a
 * v2 peer's message is checked member by member against the v2 schema, not
 * only its required top-level members. v1 keeps check_params() alone: its
 * peers are many and lenient, and it is the hot path of every v1 message.
 * Returns 0 when valid, -1 with msg and path set, or ACP_ERR_NOMEM.
 */
static int check_params_v2(acp__role *r, acp_method_id id, bool notification,
                           const acp_json_val *params, char *msg, size_t msgcap,
                           char *path, size_t pathcap) {
  const acp_type_desc *t =
      notification
          ? acp_method_notification_desc_version(ACP_PROTOCOL_V2, (int)id)
          : acp_method_params_desc_version(ACP_PROTOCOL_V2, (int)id);
  char err[160];
  void *out;
  const char *p, *colon;
  size_t n = 0;
  int rv;

  if (t == NULL || params == NULL)
    return 0;
  if (r->arena == NULL && acp_arena_new(&r->arena, &r->mem) != 0)
    return ACP_ERR_NOMEM;
  out = acp_arena_alloc(r->arena, acp_type_size(t));
  rv = out == NULL ? ACP_ERR_NOMEM
                   : acp_decode_named(t, params, r->arena, out, "params", err,
                                      sizeof(err));
  acp_arena_reset(r->arena);
  if (rv != ACP_ERR_PARSE)
    return rv;
  /* "params.a[2].b: reason" -> path "/a/2/b", msg "/a/2/b: reason". */
  /* strstr is not among the libc symbols the core may use. */
  for (colon = strchr(err, ':'); colon != NULL && colon[1] != ' ';
       colon = strchr(colon + 1, ':'))
    ;
  p = err + strlen("params");
  while (*p != '\0' && p != colon && n + 1 < pathcap) {
    if (*p == '.' || *p == '[')
      path[n++] = '/';
    else if (*p != ']')
      path[n++] = *p;
    p++;
  }
  path[n] = '\0';
  snprintf(msg, msgcap, "%s: %s", n > 0 ? path : "params",
           colon != NULL ? colon + 2 : err);
  return -1;
}

static int respond_invalid_params(acp__role *r, uint64_t handle,
                                  const char *why, const char *path) {
  char message[256];
  acp_json_writer *w = r->w;
  const char *data;
  size_t len;
  int rv;

  snprintf(message, sizeof(message), "Invalid params: %s", why);
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "path");
  acp_json_write_strz(w, path);
  acp_json_write_obj_end(w);
  rv = acp_json_writer_error(w);
  if (rv != 0)
    return rv;
  data = acp_json_writer_data(w, &len);
  return acp_rpc_session_respond_error(r->rpc, handle, ACP_RPC_INVALID_PARAMS,
                                       message, strlen(message), data, len);
}

/* MARK: - Incoming requests */

static void req_free(acp__role *r, acp__req *req) {
  if (req->prev)
    req->prev->next = req->next;
  else if (r->reqs == req)
    r->reqs = req->next;
  if (req->next)
    req->next->prev = req->prev;
  /* One block kept for the next request: a served turn costs no
   * calloc/free pair (~330 instructions on glibc). A larger block replaces
   * a smaller spare, so the spare settles at the common size. */
  if (r->spare_req == NULL || r->spare_req_cap < req->block_cap) {
    acp__free(&r->mem, r->spare_req);
    r->spare_req = req;
    r->spare_req_cap = req->block_cap;
    return;
  }
  acp__free(&r->mem, req);
}

/* Room every request block gets at least, so that the spare fits the next
 * request of a usual size (ids, method names and session ids are short). */
#define REQ_BLOCK_MIN 256

/*
 * One block per request: the role's struct (which starts with the acp__req)
 * followed by the id's raw bytes, the recorded method name and the session
 * id (sid, may be NULL), each NUL-terminated. Linked at the head of r->reqs.
 * The block is the role's spare when one is kept and large enough.
 */
static acp__req *req_new(acp__role *r, const acp_rpc_msg *msg, const char *name,
                         size_t name_len, const char *sid, size_t sid_len) {
  size_t size = r->ops->req_size ? r->ops->req_size : sizeof(acp__req);
  const char *id;
  size_t id_len = 0;
  size_t need;
  acp__req *req;
  char *p;

  id = acp_json_raw(msg->id, &id_len);
  if (id == NULL) {
    id = "null";
    id_len = 4;
  }
  if (id_len > SIZE_MAX / 4 - size || name_len > SIZE_MAX / 4 - size ||
      sid_len > SIZE_MAX / 4 - size)
    return NULL;
  need = size + id_len + 1 + name_len + 1 + sid_len + 1;
  if (r->spare_req != NULL && r->spare_req_cap >= need) {
    req = r->spare_req;
    need = r->spare_req_cap;
    r->spare_req = NULL;
    r->spare_req_cap = 0;
    memset(req, 0, size);
  } else {
    if (need < REQ_BLOCK_MIN)
      need = REQ_BLOCK_MIN;
    req = acp__calloc(&r->mem, 1, need);
    if (req == NULL)
      return NULL;
  }
  req->block_cap = need;
  p = (char *)req + size;
  memcpy(p, id, id_len);
  p[id_len] = '\0';
  req->id_raw = p;
  req->id_len = id_len;
  p += id_len + 1;
  if (name_len > 0)
    memcpy(p, name, name_len);
  p[name_len] = '\0';
  req->method_name = p;
  p += name_len + 1;
  if (sid != NULL) {
    if (sid_len > 0)
      memcpy(p, sid, sid_len);
    p[sid_len] = '\0';
    req->session_id = p;
    req->session_id_len = sid_len;
  }
  req->role = r;
  req->handle = msg->handle;
  req->in_batch = msg->in_batch;
  req->protocol_version = -1;
  req->next = r->reqs;
  if (r->reqs)
    r->reqs->prev = req;
  r->reqs = req;
  acp__rpc_set_tag(r->rpc, req->handle, req);
  return req;
}

void acp__role_settle(acp__role *r, acp__req *req) {
  if (req->answered && !req->in_cb)
    req_free(r, req);
}

int acp__req_param_str(const acp__req *req, const char *key, const char **s,
                       size_t *len) {
  const acp_json_val *v;

  if (req == NULL || key == NULL || s == NULL || len == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->msg == NULL)
    return ACP_ERR_INVALID_STATE;
  v = acp_json_obj_getz(req->msg->params, key);
  if (v == NULL)
    return ACP_ERR_NOT_FOUND;
  return acp_json_doc_str(req->msg->doc, v, s, len);
}

int acp__req_decode(const acp__req *req, acp_arena *arena, const void **out) {
  const acp_type_desc *t;
  void *p;
  int rv;

  if (req == NULL || arena == NULL || out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (req->msg == NULL)
    return ACP_ERR_INVALID_STATE;
  t = acp_method_params_desc_version(req->role->version, (int)req->method);
  if (t == NULL)
    return ACP_ERR_NOT_FOUND;
  p = acp_arena_alloc(arena, acp_type_size(t));
  if (p == NULL)
    return ACP_ERR_NOMEM;
  /* Lenient: the role checked what the method requires already (v2: the
   * whole params); params that are absent decode as an empty object. */
  rv =
      acp_decode_ex(t, req->msg->params, arena, p, "params",
                    req->msg->params == NULL ? ACP_DECODE_LENIENT : 0, NULL, 0);
  if (rv == 0)
    *out = p;
  return rv;
}

static int rpc_on_request(acp_rpc_session *s, const acp_rpc_msg *msg,
                          void *user_data) {
  acp__role *r = user_data;
  const acp_method_info *mi = NULL;
  const char *name = msg->method;
  size_t name_len = msg->method_len;
  const char *sid_p = NULL;
  size_t sid_n = 0;
  acp__req *req;
  int rv;

  ACP_UNUSED(s);
  if (r->ops->admit != NULL) {
    rv = r->ops->admit(r, msg, &name, &name_len);
    if (rv != 0)
      return rv == ACP__ROLE_DONE ? 0 : rv;
  }
  if (r->side != 0)
    mi = acp_method_by_name_version(r->version, msg->method, msg->method_len);
  if (mi != NULL && ((mi->side & r->side) == 0 || mi->is_notification))
    mi = NULL;
  if (mi != NULL) {
    char why[192];
    char path[96];

    if (check_params(r->version, mi->id, msg->params, why, sizeof(why), path,
                     sizeof(path)) != 0)
      return respond_invalid_params(r, msg->handle, why, path);
    if (r->version == ACP_PROTOCOL_V2) {
      rv = check_params_v2(r, mi->id, false, msg->params, why, sizeof(why),
                           path, sizeof(path));
      if (rv < -1 || rv > 0)
        return rv;
      if (rv == -1)
        return respond_invalid_params(r, msg->handle, why, path);
    }
  }
  /* Typed roles index requests by session; the proxy only routes. The
   * session id goes into the request's own block. */
  if (r->side != 0) {
    /* Inline (json_int.h): every request of a typed role comes here. */
    const acp_json_val *sid = ACP__OBJ_GETI(msg->params, "sessionId");

    if (acp_json_type_of(sid) == ACP_JSON_STRING) {
      rv = acp__json_doc_str_inl(msg->doc, sid, &sid_p, &sid_n);
      if (rv != 0)
        return rv;
    }
  }
  req = req_new(r, msg, name, name_len, sid_p, sid_n);
  if (req == NULL)
    return ACP_ERR_NOMEM;
  req->method = mi ? mi->id : ACP_METHOD_UNKNOWN;
  req->msg = msg;
  req->in_cb = true;
  rv = r->ops->on_request(r, req, mi);
  req->in_cb = false;
  req->msg = NULL;
  if (req->answered)
    req_free(r, req);
  return rv;
}

static int rpc_on_notification(acp_rpc_session *s, const acp_rpc_msg *msg,
                               void *user_data) {
  acp__role *r = user_data;
  const acp_method_info *mi = NULL;

  ACP_UNUSED(s);
  if (r->side != 0)
    mi = acp_method_by_name_version(r->version, msg->method, msg->method_len);
  if (mi != NULL && ((mi->side & r->side) == 0 ||
                     (!mi->is_notification && mi->notification_type == NULL)))
    mi = NULL;
  if (mi != NULL) {
    char why[192];
    char path[96];

    /* A notification cannot be answered: one that fails the check is
     * dropped. */
    if (check_params(r->version, mi->id, msg->params, why, sizeof(why), path,
                     sizeof(path)) != 0)
      return 0;
    if (r->version == ACP_PROTOCOL_V2) {
      int rv = check_params_v2(r, mi->id, true, msg->params, why, sizeof(why),
                               path, sizeof(path));
      if (rv != 0)
        return rv == -1 ? 0 : rv;
    }
  }
  return r->ops->on_notification(r, msg, mi);
}

static int rpc_on_cancel(acp_rpc_session *s, uint64_t handle, void *user_data) {
  acp__role *r = user_data;
  acp__req *req;

  /* Found through the session's tag, not a search of r->reqs. */
  req = acp__rpc_tag(s, handle);
  if (req == NULL || req->answered)
    return 0;
  req->cancelled = true;
  return r->ops->on_cancel(r, req);
}

/* Whether req belongs to r and may still be answered: 0 or an error. */
static int req_answerable(const acp__role *r, const acp__req *req) {
  if (req == NULL || req->role != r)
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->answered)
    return ACP_ERR_INVALID_STATE;
  return 0;
}

/* After the session took the answer: tell the role, release the request. */
static void req_answered(acp__role *r, acp__req *req, bool is_error) {
  req->answered = true;
  if (r->ops->on_answered)
    r->ops->on_answered(r, req, is_error);
  if (!req->in_cb)
    req_free(r, req);
}

void acp__role_finish(acp__role *r, acp__req *req, bool is_error) {
  if (!req->answered)
    req_answered(r, req, is_error);
}

int acp__role_respond_early(acp__role *r, acp__req *req, const char *result,
                            size_t len) {
  int rv = req_answerable(r, req);

  if (rv != 0)
    return rv;
  return acp_rpc_session_respond(r->rpc, req->handle, result, len);
}

int acp__role_respond(acp__role *r, acp__req *req, const char *result,
                      size_t len) {
  int rv = req_answerable(r, req);

  if (rv != 0)
    return rv;
  rv = acp_rpc_session_respond(r->rpc, req->handle, result, len);
  if (rv != 0)
    return rv;
  req_answered(r, req, false);
  return 0;
}

static const char *std_message(int64_t code) {
  switch (code) {
  case ACP_RPC_PARSE_ERROR:
    return "Parse error";
  case ACP_RPC_INVALID_REQUEST:
    return "Invalid request";
  case ACP_RPC_METHOD_NOT_FOUND:
    return "Method not found";
  case ACP_RPC_INVALID_PARAMS:
    return "Invalid params";
  case ACP_RPC_REQUEST_CANCELLED:
    return "Request cancelled";
  case ACP_RPC_AUTH_REQUIRED:
    return "Authentication required";
  case ACP_RPC_RESOURCE_NOT_FOUND:
    return "Resource not found";
  default:
    return "Internal error";
  }
}

int acp__role_respond_error(acp__role *r, acp__req *req, int64_t code,
                            const char *message, const char *data,
                            size_t data_len) {
  if (message == NULL)
    message = std_message(code);
  return acp__role_respond_error_n(r, req, code, message, strlen(message), data,
                                   data_len);
}

int acp__role_respond_error_n(acp__role *r, acp__req *req, int64_t code,
                              const char *message, size_t message_len,
                              const char *data, size_t data_len) {
  int rv = req_answerable(r, req);

  if (rv != 0)
    return rv;
  rv = acp_rpc_session_respond_error(r->rpc, req->handle, code, message,
                                     message_len, data, data_len);
  if (rv != 0)
    return rv;
  req_answered(r, req, true);
  return 0;
}

/*
 * Write the envelope ourselves around the request's raw id and release the
 * handle. Inside a batch the session must assemble the array, so this is
 * refused there.
 */
int acp__role_respond_raw_error(acp__role *r, acp__req *req, const char *err,
                                size_t err_len) {
  acp__buf *b = &r->buf;
  int rv = req_answerable(r, req);

  if (rv != 0)
    return rv;
  if (req->in_batch || err == NULL)
    return ACP_ERR_INVALID_STATE;
  acp__buf_clear(b);
  rv = acp__buf_append(b, "{\"jsonrpc\":\"2.0\",\"id\":", 22);
  if (rv == 0)
    rv = acp__buf_append(b, req->id_raw, req->id_len);
  if (rv == 0)
    rv = acp__buf_append(b, ",\"error\":", 9);
  if (rv == 0)
    rv = acp__buf_append(b, err, err_len);
  if (rv == 0)
    rv = acp__buf_putc(b, '}');
  if (rv != 0)
    return rv;
  rv = acp_rpc_session_send_raw(r->rpc, b->data, b->len);
  if (rv != 0)
    return rv;
  rv = acp_rpc_session_drop(r->rpc, req->handle);
  req_answered(r, req, true);
  return rv;
}

/* MARK: - Outgoing calls */

static void call_unlink(acp__role *r, acp__call *c) {
  if (c->prev)
    c->prev->next = c->next;
  else if (r->calls == c)
    r->calls = c->next;
  if (c->next)
    c->next->prev = c->prev;
  c->next = c->prev = NULL;
}

/* A record the base owns goes back as the role's one spare: a call per turn
 * (the client's session/prompt) costs no calloc/free pair. */
static void call_release(acp__role *r, acp__call *c) {
  if (r->spare_call == NULL) {
    r->spare_call = c;
    return;
  }
  acp__free(&r->mem, c);
}

static int rpc_on_response(acp_rpc_session *s, const acp_rpc_msg *msg,
                           void *user_data) {
  acp__call *c = user_data;
  acp__role *r = c->role;
  bool owned = c->owned; /* the handler may free a record it owns */
  int rv;

  ACP_UNUSED(s);
  call_unlink(r, c);
  rv = r->ops->on_response(r, c, msg);
  if (owned)
    call_release(r, c);
  return rv;
}

static int call_send(acp__role *r, const char *method, size_t method_len,
                     const acp__rpc_part *parts, size_t nparts, acp__call *c,
                     int64_t *id_out) {
  int rv;

  c->role = r;
  rv = acp__rpc_request_parts(r->rpc, method, method_len, parts, nparts,
                              r->call_timeout_ms, r->now_ms, rpc_on_response, c,
                              id_out);
  if (rv != 0)
    return rv;
  c->prev = NULL;
  c->next = r->calls;
  if (r->calls)
    r->calls->prev = c;
  r->calls = c;
  return 0;
}

int acp__role_call(acp__role *r, const char *method, const char *params,
                   size_t params_len, const acp__call *tmpl, int64_t *id_out) {
  acp__rpc_part part = {params, params_len, false, false, false};

  return acp__role_call_parts(r, method, &part, params != NULL ? 1 : 0, tmpl,
                              id_out);
}

int acp__role_call_into(acp__role *r, const char *method, size_t method_len,
                        const char *params, size_t params_len, acp__call *c,
                        int64_t *id_out) {
  acp__rpc_part part = {params, params_len, false, false, false};

  if (method == NULL || c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->owned = false;
  return call_send(r, method, method_len, &part, params != NULL ? 1 : 0, c,
                   id_out);
}

int acp__role_call_parts(acp__role *r, const char *method,
                         const acp__rpc_part *parts, size_t nparts,
                         const acp__call *tmpl, int64_t *id_out) {
  if (method == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_call_parts_n(r, method, strlen(method), parts, nparts, tmpl,
                                id_out);
}

int acp__role_call_parts_n(acp__role *r, const char *method, size_t method_len,
                           const acp__rpc_part *parts, size_t nparts,
                           const acp__call *tmpl, int64_t *id_out) {
  acp__call *c;
  int rv;

  if (method == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (r->spare_call != NULL) {
    c = r->spare_call;
    r->spare_call = NULL;
    memset(c, 0, sizeof(*c));
  } else {
    c = acp__calloc(&r->mem, 1, sizeof(*c));
    if (c == NULL)
      return ACP_ERR_NOMEM;
  }
  if (tmpl != NULL) {
    c->kind = tmpl->kind;
    c->cb = tmpl->cb;
    c->cb_user_data = tmpl->cb_user_data;
  }
  c->owned = true;
  rv = call_send(r, method, method_len, parts, nparts, c, id_out);
  if (rv != 0)
    call_release(r, c);
  return rv;
}

int acp__role_notify(acp__role *r, const char *method, const char *params,
                     size_t params_len) {
  if (method == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp_rpc_session_notify(r->rpc, method, strlen(method), params,
                                params_len);
}

int acp__role_notify_n(acp__role *r, const char *method, size_t method_len,
                       const char *params, size_t params_len) {
  return acp_rpc_session_notify(r->rpc, method, method_len, params, params_len);
}

int acp__role_notify_parts(acp__role *r, const char *method,
                           const acp__rpc_part *parts, size_t nparts) {
  if (method == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__rpc_notify_parts(r->rpc, method, strlen(method), parts, nparts);
}

int acp__role_notify_parts_n(acp__role *r, const char *method,
                             size_t method_len, const acp__rpc_part *parts,
                             size_t nparts) {
  if (method == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__rpc_notify_parts(r->rpc, method, method_len, parts, nparts);
}

int acp__role_cancel_call(acp__role *r, int64_t id) {
  return acp_rpc_session_cancel(r->rpc, id, ACP_RPC_CANCEL_NOTIFY, r->now_ms);
}

/* MARK: - Writing */

acp_json_writer *acp__role_obj_begin(acp__role *r) {
  acp_json_writer_reset(r->w);
  acp_json_write_obj_begin(r->w);
  return r->w;
}

int acp__role_obj_end(acp__role *r, const char **data, size_t *len) {
  int rv;

  acp_json_write_obj_end(r->w);
  rv = acp_json_writer_error(r->w);
  if (rv != 0)
    return rv;
  *data = acp_json_writer_data(r->w, len);
  return 0;
}

int acp__role_respond_obj(acp__role *r, acp__req *req) {
  const char *out;
  size_t len;
  int rv = acp__role_obj_end(r, &out, &len);

  if (rv != 0)
    return rv;
  return acp__role_respond(r, req, out, len);
}

int acp__role_notify_obj(acp__role *r, const char *method) {
  const char *out;
  size_t len;
  int rv = acp__role_obj_end(r, &out, &len);

  if (rv != 0)
    return rv;
  return acp__role_notify(r, method, out, len);
}

void acp__w_str(acp_json_writer *w, const char *key, const char *s) {
  acp_json_write_keyz(w, key);
  acp_json_write_strz(w, s);
}

void acp__w_raw(acp_json_writer *w, const char *key, const char *json,
                size_t len, const char *dflt) {
  if (json == NULL && dflt == NULL)
    return;
  acp_json_write_keyz(w, key);
  if (json != NULL)
    acp_json_write_raw(w, json, len);
  else
    acp_json_write_raw(w, dflt, strlen(dflt));
}

int acp__w_members(acp__role *r, acp_json_writer *w, const char *extra,
                   size_t extra_len) {
  const acp_json_val *root;
  const acp_json_val *k;
  int rv;

  if (extra == NULL)
    return 0;
  rv = acp_json_doc_parse(r->doc, extra, extra_len, NULL);
  if (rv == ACP_ERR_NOMEM)
    return rv;
  root = acp_json_doc_root(r->doc);
  if (rv != 0 || acp_json_type_of(root) != ACP_JSON_OBJECT)
    return ACP_ERR_INVALID_ARGUMENT;
  for (k = acp_json_child(root); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const char *s;
    size_t n;

    rv = acp_json_doc_str(r->doc, k, &s, &n);
    if (rv != 0)
      return rv;
    acp_json_write_key(w, s, n);
    acp_json_write_val(w, acp_json_next(k));
  }
  return acp_json_writer_error(w);
}

/* MARK: - Lifecycle */

int acp__role_init(acp__role *r, acp_side side, const acp__role_ops *ops,
                   void *owner, const acp_rpc_options *opts,
                   const acp_mem *mem) {
  acp_rpc_callbacks *cbs = NULL;
  int rv;

  memset(r, 0, sizeof(*r));
  acp__mem_init(&r->mem, mem);
  r->side = side;
  r->version = ACP_PROTOCOL_V1;
  r->ops = ops;
  r->owner = owner;
  acp__buf_init(&r->buf, &r->mem, 0);
  rv = acp_rpc_callbacks_new(&cbs);
  if (rv != 0)
    goto cleanup;
  acp_rpc_callbacks_set_on_request(cbs, rpc_on_request);
  acp_rpc_callbacks_set_on_notification(cbs, rpc_on_notification);
  acp_rpc_callbacks_set_on_cancel(cbs, rpc_on_cancel);
  rv = acp_rpc_session_new(&r->rpc, cbs, r, opts, &r->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_writer_new(&r->w, 0, &r->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_doc_new(&r->doc, &r->mem);
  if (rv != 0)
    goto cleanup;

cleanup:
  acp_rpc_callbacks_free(cbs);
  if (rv != 0)
    acp__role_dispose(r);
  return rv;
}

void acp__role_dispose(acp__role *r) {
  /* Calls first: a record the caller owns may live inside a request. */
  while (r->calls != NULL) {
    acp__call *c = r->calls;

    call_unlink(r, c);
    if (c->owned)
      acp__free(&r->mem, c);
  }
  while (r->reqs != NULL) {
    /* Unanswered (the only ones freed so; an answered one's tag went
     * with its slot): a cancel must not find it (acp__rpc_tag()). */
    acp__rpc_set_tag(r->rpc, r->reqs->handle, NULL);
    req_free(r, r->reqs);
  }
  acp__free(&r->mem, r->spare_req);
  r->spare_req = NULL;
  acp__free(&r->mem, r->spare_call);
  r->spare_call = NULL;
  r->spare_req_cap = 0;
  acp_rpc_session_free(r->rpc);
  r->rpc = NULL;
  acp_json_writer_free(r->w);
  r->w = NULL;
  acp_json_doc_free(r->doc);
  r->doc = NULL;
  acp_arena_free(r->arena);
  r->arena = NULL;
  acp__buf_dispose(&r->buf);
}

acp_ssize acp__role_recv(acp__role *r, const char *data, size_t len,
                         uint64_t now_ms) {
  r->now_ms = now_ms;
  return acp_rpc_session_recv(r->rpc, data, len, now_ms);
}

int acp__role_handle_expiry(acp__role *r, uint64_t now_ms) {
  r->now_ms = now_ms;
  return acp_rpc_session_handle_expiry(r->rpc, now_ms);
}
