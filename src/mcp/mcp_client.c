/*
 * The MCP client: initialize, request helpers with progress-aware timeouts,
 * automatic paging, and handlers for the server's requests. See
 * include/acp/mcp.h for the contract.
 */
#include <stdio.h>

#include "mcp_int.h"

/* MARK: - Types (Private) */

enum { P_PLAIN = 0, P_INIT, P_PAGE };
enum { R_ROOTS = 0, R_SAMPLING, R_ELICIT, R_COUNT };

#define MAX_PAGES 10000

static const char *const req_methods[R_COUNT] = {
    "roots/list", "sampling/createMessage", "elicitation/create"};
static const char *const list_methods[4] = {
    "tools/list", "resources/list", "resources/templates/list", "prompts/list"};

struct acp_mcp_client_callbacks {
  acp_mcp_client_request_cb req[R_COUNT];
  acp_mcp_client_request_cb cancelled;
  acp_mcp_log_cb log;
  acp_mcp_list_changed_cb list_changed;
  acp_mcp_updated_cb updated;
  acp_mcp_client_notification_cb notification;
};

typedef struct mcp_pager {
  acp_mcp_list which;
  acp_mcp_request_opts opts;
  acp_mcp_page_cb cb;
  void *ud;
  size_t pages;
  char *cursor; /* the cursor of the request in flight, or NULL */
} mcp_pager;

typedef struct mcp_pending {
  struct mcp_pending *next;
  struct mcp_pending *prev;
  acp_mcp_client *c;
  int64_t id;
  int kind;
  acp_mcp_result_cb cb;
  void *ud;
  uint64_t timeout;
  uint64_t deadline; /* UINT64_MAX: none */
  uint64_t hard;     /* UINT64_MAX: none */
  int64_t token;
  bool has_token;
  acp_mcp_progress_cb on_progress;
  void *pud;
  bool timed_out;
  bool cancelled;
  mcp_pager *pager;
} mcp_pending;

struct acp_mcp_client_request {
  acp_mcp_client_request *next;
  acp_mcp_client_request *prev;
  uint64_t handle;
  const char *method;
  bool in_cb;
  bool answered;
  bool cancelled;
};

struct acp_mcp_client {
  acp_mem mem;
  acp_rpc_session *rpc;
  acp_json_writer *w;  /* helper params */
  acp_json_writer *pw; /* params with _meta.progressToken */
  acp_json_doc *doc;
  acp_mcp_client_callbacks cbs;
  void *user_data;
  char *name;
  char *version_str;
  acp_mcp_version asked;
  acp_mcp_version version;
  bool init_sent;
  bool ready;
  bool roots_list_changed;
  char *server_caps;
  size_t server_caps_len;
  char *server_info;
  size_t server_info_len;
  char *instructions;
  mcp_pending *pending;
  acp_mcp_client_request *reqs;
  uint64_t timeout_ms;
  uint64_t max_total_ms;
  int64_t next_token;
  uint64_t now_ms;
};

/* MARK: - Callbacks (Public) */

int acp_mcp_client_callbacks_new(acp_mcp_client_callbacks **out) {
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = acp__calloc(acp_mem_default(), 1, sizeof(**out));
  return *out ? 0 : ACP_ERR_NOMEM;
}

void acp_mcp_client_callbacks_free(acp_mcp_client_callbacks *cbs) {
  acp__free(acp_mem_default(), cbs);
}

void acp_mcp_client_callbacks_set_on_roots_list(acp_mcp_client_callbacks *cbs,
                                                acp_mcp_client_request_cb cb) {
  if (cbs)
    cbs->req[R_ROOTS] = cb;
}

void acp_mcp_client_callbacks_set_on_sampling(acp_mcp_client_callbacks *cbs,
                                              acp_mcp_client_request_cb cb) {
  if (cbs)
    cbs->req[R_SAMPLING] = cb;
}

void acp_mcp_client_callbacks_set_on_elicitation(acp_mcp_client_callbacks *cbs,
                                                 acp_mcp_client_request_cb cb) {
  if (cbs)
    cbs->req[R_ELICIT] = cb;
}

void acp_mcp_client_callbacks_set_on_request_cancelled(
    acp_mcp_client_callbacks *cbs, acp_mcp_client_request_cb cb) {
  if (cbs)
    cbs->cancelled = cb;
}

void acp_mcp_client_callbacks_set_on_log(acp_mcp_client_callbacks *cbs,
                                         acp_mcp_log_cb cb) {
  if (cbs)
    cbs->log = cb;
}

void acp_mcp_client_callbacks_set_on_list_changed(acp_mcp_client_callbacks *cbs,
                                                  acp_mcp_list_changed_cb cb) {
  if (cbs)
    cbs->list_changed = cb;
}

void acp_mcp_client_callbacks_set_on_resource_updated(
    acp_mcp_client_callbacks *cbs, acp_mcp_updated_cb cb) {
  if (cbs)
    cbs->updated = cb;
}

void acp_mcp_client_callbacks_set_on_notification(
    acp_mcp_client_callbacks *cbs, acp_mcp_client_notification_cb cb) {
  if (cbs)
    cbs->notification = cb;
}

/* MARK: - Pending requests (Private) */

static void pager_free(acp_mcp_client *c, mcp_pager *pg) {
  if (pg == NULL)
    return;
  acp__free(&c->mem, pg->cursor);
  acp__free(&c->mem, pg);
}

static void pending_unlink(acp_mcp_client *c, mcp_pending *p) {
  if (p->prev)
    p->prev->next = p->next;
  else
    c->pending = p->next;
  if (p->next)
    p->next->prev = p->prev;
}

static uint64_t pending_expiry(const mcp_pending *p) {
  return p->deadline < p->hard ? p->deadline : p->hard;
}

static uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int on_response(acp_rpc_session *rpc, const acp_rpc_msg *msg,
                       void *user_data);
static int page_next(acp_mcp_client *c, mcp_pager *pg, const char *cursor,
                     size_t cursor_len);

/* Copy the members of object `obj` (parsed in c->doc) except `skip`. */
static int copy_members(acp_mcp_client *c, acp_json_writer *w,
                        const acp_json_val *obj, const char *skip) {
  const acp_json_val *k;

  for (k = acp_json_child(obj); k; k = acp_json_next(acp_json_next(k))) {
    const char *p;
    size_t n;
    int rv;

    if (acp_json_str_eq(k, skip, strlen(skip)))
      continue;
    rv = acp_json_doc_str(c->doc, k, &p, &n);
    if (rv != 0)
      return rv;
    acp_json_write_key(w, p, n);
    acp_json_write_val(w, acp_json_next(k));
  }
  return 0;
}

/*
 * Send `params` (a JSON object or NULL) as `method`, splicing
 * _meta.progressToken when the options ask for progress.
 */
static int send_req(acp_mcp_client *c, const char *method, const char *params,
                    size_t params_len, const acp_mcp_request_opts *opts,
                    int kind, acp_mcp_result_cb cb, void *ud, mcp_pager *pager,
                    int64_t *id_out) {
  mcp_pending *p;
  uint64_t timeout = c->timeout_ms;
  uint64_t max_total = c->max_total_ms;
  int rv;

  if (opts != NULL && opts->version != ACP_MCP_REQUEST_OPTS_VERSION)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!c->ready && strcmp(method, "initialize") != 0 &&
      strcmp(method, "ping") != 0)
    return ACP_ERR_INVALID_STATE;
  if (opts && opts->timeout_ms)
    timeout = opts->timeout_ms;
  if (opts && opts->max_total_ms)
    max_total = opts->max_total_ms;
  p = acp__calloc(&c->mem, 1, sizeof(*p));
  if (p == NULL)
    return ACP_ERR_NOMEM;
  p->c = c;
  p->kind = kind;
  p->cb = cb;
  p->ud = ud;
  p->pager = pager;
  p->timeout = timeout;
  p->deadline = timeout ? add_sat(c->now_ms, timeout) : UINT64_MAX;
  p->hard = max_total ? add_sat(c->now_ms, max_total) : UINT64_MAX;
  if (opts && opts->on_progress) {
    acp_json_writer *w = c->pw;
    const acp_json_val *root = NULL;
    const acp_json_val *meta = NULL;

    p->has_token = true;
    p->token = c->next_token++;
    p->on_progress = opts->on_progress;
    p->pud = opts->progress_user_data;
    if (params != NULL) {
      rv = acp_json_doc_parse(c->doc, params, params_len, NULL);
      root = acp_json_doc_root(c->doc);
      if (rv != 0 || acp_json_type_of(root) != ACP_JSON_OBJECT) {
        acp__free(&c->mem, p);
        return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
      }
      meta = acp_json_obj_getz(root, "_meta");
    }
    acp_json_writer_reset(w);
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "_meta");
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "progressToken");
    acp_json_write_int(w, p->token);
    rv = copy_members(c, w, meta, "progressToken");
    acp_json_write_obj_end(w);
    if (rv == 0)
      rv = copy_members(c, w, root, "_meta");
    if (rv == 0)
      rv = acp_json_write_obj_end(w);
    if (rv != 0) {
      acp__free(&c->mem, p);
      return rv;
    }
    params = acp_json_writer_data(w, &params_len);
  }
  rv =
      acp_rpc_session_request(c->rpc, method, strlen(method), params,
                              params_len, 0, c->now_ms, on_response, p, &p->id);
  if (rv != 0) {
    acp__free(&c->mem, p);
    return rv;
  }
  p->next = c->pending;
  if (c->pending)
    c->pending->prev = p;
  c->pending = p;
  if (id_out)
    *id_out = p->id;
  return 0;
}

static int copy_raw(acp_mcp_client *c, const acp_json_val *v, char **out,
                    size_t *len) {
  const char *raw;
  size_t n;

  if (v == NULL)
    return 0;
  raw = acp_json_raw(v, &n);
  *out = acp__strndup(&c->mem, raw, n);
  if (*out == NULL)
    return ACP_ERR_NOMEM;
  *len = n;
  return 0;
}

/* The initialize result: check the version, keep what the server said, send
 * notifications/initialized. Returns the status for the user callback, or a
 * fatal code through *fatal. */
static int init_result(acp_mcp_client *c, const acp_rpc_msg *msg, int *fatal) {
  const acp_json_val *pv = acp_json_obj_getz(msg->result, "protocolVersion");
  const acp_json_val *ins = acp_json_obj_getz(msg->result, "instructions");
  const char *p;
  size_t n;
  acp_mcp_version v;
  int rv;

  *fatal = 0;
  if (acp_json_type_of(pv) != ACP_JSON_STRING)
    return ACP_ERR_PROTOCOL;
  rv = acp_json_doc_str(msg->doc, pv, &p, &n);
  if (rv != 0) {
    *fatal = rv;
    return rv;
  }
  v = acp_mcp_version_parse(p, n);
  if (v == ACP_MCP_VERSION_UNKNOWN)
    return ACP_ERR_UNSUPPORTED;
  rv = copy_raw(c, acp_json_obj_getz(msg->result, "capabilities"),
                &c->server_caps, &c->server_caps_len);
  if (rv == 0)
    rv = copy_raw(c, acp_json_obj_getz(msg->result, "serverInfo"),
                  &c->server_info, &c->server_info_len);
  if (rv == 0 && acp_json_type_of(ins) == ACP_JSON_STRING)
    rv = acp__mcp_str_dup(&c->mem, msg->doc, ins, &c->instructions, NULL);
  if (rv == 0)
    rv = acp_rpc_session_notify(c->rpc, "notifications/initialized", 25, NULL,
                                0);
  if (rv != 0) {
    *fatal = rv;
    return rv;
  }
  c->version = v;
  c->ready = true;
  return 0;
}

static int on_page(acp_mcp_client *c, mcp_pager *pg, int status,
                   const acp_rpc_msg *msg) {
  const acp_json_val *next = NULL;
  const char *p = NULL;
  size_t n = 0;
  bool last = true;
  int rv;

  pg->pages++;
  if (status == 0) {
    next = acp_json_obj_getz(msg->result, "nextCursor");
    if (acp_json_type_of(next) == ACP_JSON_STRING) {
      rv = acp_json_doc_str(msg->doc, next, &p, &n);
      if (rv != 0)
        return rv;
      last = false;
      if (pg->pages >= MAX_PAGES || (pg->cursor && strlen(pg->cursor) == n &&
                                     memcmp(pg->cursor, p, n) == 0))
        status = ACP_ERR_PROTOCOL;
    }
  }
  if (status != 0)
    last = true;
  rv = pg->cb(c, status, msg, last, pg->ud);
  if (rv != 0 || last) {
    pager_free(c, pg);
    return rv;
  }
  rv = page_next(c, pg, p, n);
  if (rv != 0) {
    int crv = pg->cb(c, rv, msg, true, pg->ud);
    pager_free(c, pg);
    return acp_is_fatal(rv) ? rv : crv;
  }
  return 0;
}

static int on_response(acp_rpc_session *rpc, const acp_rpc_msg *msg,
                       void *user_data) {
  mcp_pending *p = user_data;
  acp_mcp_client *c = p->c;
  int status;
  int rv = 0;

  ACP_UNUSED(rpc);
  pending_unlink(c, p);
  if (p->timed_out)
    status = ACP_ERR_TIMEOUT;
  else if (p->cancelled)
    status = ACP_ERR_CANCELLED;
  else
    status = acp__mcp_status(msg);
  if (p->kind == P_INIT && status == 0) {
    int fatal;
    status = init_result(c, msg, &fatal);
    if (fatal != 0) {
      acp__free(&c->mem, p);
      return fatal;
    }
  }
  if (p->kind == P_PAGE)
    rv = on_page(c, p->pager, status, msg);
  else if (p->cb)
    rv = p->cb(c, status, msg, p->ud);
  acp__free(&c->mem, p);
  return rv;
}

/* MARK: - Incoming (Private) */

static void req_unlink_free(acp_mcp_client *c, acp_mcp_client_request *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    c->reqs = r->next;
  if (r->next)
    r->next->prev = r->prev;
  acp__free(&c->mem, r);
}

static int client_on_request(acp_rpc_session *rpc, const acp_rpc_msg *msg,
                             void *user_data) {
  acp_mcp_client *c = user_data;
  acp_mcp_client_request *r;
  int i;
  int rv;

  if (acp__mcp_method_is(msg, "ping")) {
    rv = acp_rpc_session_respond(rpc, msg->handle, "{}", 2);
    return rv == ACP_ERR_NOMEM ? rv : 0;
  }
  for (i = 0; i < R_COUNT; i++)
    if (acp__mcp_method_is(msg, req_methods[i]) && c->cbs.req[i] != NULL)
      break;
  if (i == R_COUNT) {
    rv = acp_rpc_session_respond_error(rpc, msg->handle,
                                       ACP_RPC_METHOD_NOT_FOUND,
                                       "Method not found", 16, NULL, 0);
    return rv == ACP_ERR_NOMEM ? rv : 0;
  }
  if (msg->params != NULL && acp_json_type_of(msg->params) != ACP_JSON_OBJECT) {
    rv = acp_rpc_session_respond_error(
        rpc, msg->handle, ACP_RPC_INVALID_PARAMS,
        "Invalid params: params must be an object", 40, NULL, 0);
    return rv == ACP_ERR_NOMEM ? rv : 0;
  }
  r = acp__calloc(&c->mem, 1, sizeof(*r));
  if (r == NULL)
    return ACP_ERR_NOMEM;
  r->handle = msg->handle;
  r->method = req_methods[i];
  r->next = c->reqs;
  if (c->reqs)
    c->reqs->prev = r;
  c->reqs = r;
  r->in_cb = true;
  rv = c->cbs.req[i](c, r, msg->params, c->user_data);
  r->in_cb = false;
  if (r->answered)
    req_unlink_free(c, r);
  return rv;
}

static int on_progress_note(acp_mcp_client *c, const acp_rpc_msg *msg) {
  const acp_json_val *tok = acp_json_obj_getz(msg->params, "progressToken");
  const acp_json_val *pv = acp_json_obj_getz(msg->params, "progress");
  const acp_json_val *tv = acp_json_obj_getz(msg->params, "total");
  const acp_json_val *mv = acp_json_obj_getz(msg->params, "message");
  mcp_pending *p;
  int64_t token;
  double progress;
  double total = -1;
  const char *m = NULL;
  size_t mn = 0;
  int rv;

  if (acp_json_get_int64(tok, &token) != 0 ||
      acp_json_get_double(pv, &progress) != 0)
    return 0;
  for (p = c->pending; p != NULL; p = p->next)
    if (p->has_token && p->token == token && !p->timed_out && !p->cancelled)
      break;
  if (p == NULL)
    return 0;
  if (p->timeout) {
    uint64_t d = add_sat(c->now_ms, p->timeout);
    p->deadline = d;
  }
  if (tv != NULL && acp_json_get_double(tv, &total) != 0)
    total = -1;
  if (acp_json_type_of(mv) == ACP_JSON_STRING) {
    rv = acp_json_doc_str(msg->doc, mv, &m, &mn);
    if (rv != 0)
      return rv;
  }
  return p->on_progress(c, progress, total, m, mn, p->pud);
}

static int client_on_notification(acp_rpc_session *rpc, const acp_rpc_msg *msg,
                                  void *user_data) {
  acp_mcp_client *c = user_data;
  const acp_json_val *params = msg->params;
  int rv;

  ACP_UNUSED(rpc);
  if (acp__mcp_method_is(msg, "notifications/progress"))
    return on_progress_note(c, msg);
  if (acp__mcp_method_is(msg, "notifications/message")) {
    const acp_json_val *lv = acp_json_obj_getz(params, "level");
    const acp_json_val *lg = acp_json_obj_getz(params, "logger");
    const char *p;
    const char *logger = NULL;
    size_t n;
    size_t logger_len = 0;
    int level;

    if (c->cbs.log == NULL || acp_json_type_of(lv) != ACP_JSON_STRING)
      return 0;
    rv = acp_json_doc_str(msg->doc, lv, &p, &n);
    if (rv != 0)
      return rv;
    level = acp_mcp_log_level_parse(p, n);
    if (level < 0)
      return 0;
    if (acp_json_type_of(lg) == ACP_JSON_STRING) {
      rv = acp_json_doc_str(msg->doc, lg, &logger, &logger_len);
      if (rv != 0)
        return rv;
    }
    return c->cbs.log(c, (acp_mcp_log_level)level, logger, logger_len,
                      acp_json_obj_getz(params, "data"), c->user_data);
  }
  if (acp__mcp_method_is(msg, "notifications/tools/list_changed") ||
      acp__mcp_method_is(msg, "notifications/resources/list_changed") ||
      acp__mcp_method_is(msg, "notifications/prompts/list_changed")) {
    acp_mcp_list which =
        acp__mcp_method_is(msg, "notifications/tools/list_changed")
            ? ACP_MCP_LIST_TOOLS
        : acp__mcp_method_is(msg, "notifications/prompts/list_changed")
            ? ACP_MCP_LIST_PROMPTS
            : ACP_MCP_LIST_RESOURCES;
    return c->cbs.list_changed ? c->cbs.list_changed(c, which, c->user_data)
                               : 0;
  }
  if (acp__mcp_method_is(msg, "notifications/resources/updated")) {
    const acp_json_val *uv = acp_json_obj_getz(params, "uri");
    const char *p;
    size_t n;

    if (c->cbs.updated == NULL || acp_json_type_of(uv) != ACP_JSON_STRING)
      return 0;
    rv = acp_json_doc_str(msg->doc, uv, &p, &n);
    if (rv != 0)
      return rv;
    return c->cbs.updated(c, p, n, c->user_data);
  }
  return c->cbs.notification ? c->cbs.notification(c, msg, c->user_data) : 0;
}

static int client_on_cancel(acp_rpc_session *rpc, uint64_t handle,
                            void *user_data) {
  acp_mcp_client *c = user_data;
  acp_mcp_client_request *r;

  for (r = c->reqs; r != NULL; r = r->next)
    if (r->handle == handle && !r->answered && !r->cancelled)
      break;
  if (r == NULL)
    return 0;
  r->cancelled = true;
  acp_rpc_session_drop(rpc, handle);
  return c->cbs.cancelled ? c->cbs.cancelled(c, r, NULL, c->user_data) : 0;
}

/* MARK: - Lifecycle (Public) */

int acp_mcp_client_new(acp_mcp_client **out,
                       const acp_mcp_client_callbacks *cbs, const char *name,
                       const char *version, void *user_data,
                       const acp_mem *mem) {
  acp_rpc_callbacks *rcbs = NULL;
  acp_rpc_options *opts = NULL;
  acp_mcp_client *c;
  acp_mem m;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (name == NULL || version == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, mem);
  c = acp__calloc(&m, 1, sizeof(*c));
  if (c == NULL)
    return ACP_ERR_NOMEM;
  c->mem = m;
  if (cbs)
    c->cbs = *cbs;
  c->user_data = user_data;
  c->asked = ACP_MCP_VERSION_LATEST;
  c->name = acp__mcp_dupz(&c->mem, name, &rv);
  if (rv != 0)
    goto cleanup;
  c->version_str = acp__mcp_dupz(&c->mem, version, &rv);
  if (rv != 0)
    goto cleanup;
  rv = acp_rpc_callbacks_new(&rcbs);
  if (rv != 0)
    goto cleanup;
  acp_rpc_callbacks_set_on_request(rcbs, client_on_request);
  acp_rpc_callbacks_set_on_notification(rcbs, client_on_notification);
  acp_rpc_callbacks_set_on_cancel(rcbs, client_on_cancel);
  rv = acp_rpc_options_new(&opts);
  if (rv != 0)
    goto cleanup;
  acp_rpc_options_set_cancel_style(opts, ACP_RPC_CANCEL_STYLE_MCP);
  rv = acp_rpc_session_new(&c->rpc, rcbs, c, opts, &c->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_writer_new(&c->w, 0, &c->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_writer_new(&c->pw, 0, &c->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_doc_new(&c->doc, &c->mem);
  if (rv != 0)
    goto cleanup;
  *out = c;
cleanup:
  acp_rpc_callbacks_free(rcbs);
  acp_rpc_options_free(opts);
  if (rv != 0)
    acp_mcp_client_free(c);
  return rv;
}

void acp_mcp_client_free(acp_mcp_client *c) {
  if (c == NULL)
    return;
  while (c->pending) {
    mcp_pending *p = c->pending;
    c->pending = p->next;
    pager_free(c, p->pager);
    acp__free(&c->mem, p);
  }
  while (c->reqs)
    req_unlink_free(c, c->reqs);
  acp_rpc_session_free(c->rpc);
  acp_json_writer_free(c->w);
  acp_json_writer_free(c->pw);
  acp_json_doc_free(c->doc);
  acp__free(&c->mem, c->name);
  acp__free(&c->mem, c->version_str);
  acp__free(&c->mem, c->server_caps);
  acp__free(&c->mem, c->server_info);
  acp__free(&c->mem, c->instructions);
  acp__free(&c->mem, c);
}

void *acp_mcp_client_get_user_data(const acp_mcp_client *c) {
  return c ? c->user_data : NULL;
}

acp_rpc_session *acp_mcp_client_session(acp_mcp_client *c) {
  return c ? c->rpc : NULL;
}

acp_ssize acp_mcp_client_recv(acp_mcp_client *c, const char *data, size_t len,
                              uint64_t now_ms) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->now_ms = now_ms;
  return acp_rpc_session_recv(c->rpc, data, len, now_ms);
}

acp_ssize acp_mcp_client_send(acp_mcp_client *c, const char **data) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp_rpc_session_send(c->rpc, data);
}

int acp_mcp_client_recv_eof(acp_mcp_client *c, uint64_t now_ms) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->now_ms = now_ms;
  return acp_rpc_session_recv_eof(c->rpc, now_ms);
}

uint64_t acp_mcp_client_get_expiry(const acp_mcp_client *c) {
  const mcp_pending *p;
  uint64_t e;

  if (c == NULL)
    return UINT64_MAX;
  e = acp_rpc_session_get_expiry(c->rpc);
  for (p = c->pending; p != NULL; p = p->next) {
    uint64_t pe = pending_expiry(p);
    if (!p->timed_out && !p->cancelled && pe < e)
      e = pe;
  }
  return e;
}

int acp_mcp_client_handle_expiry(acp_mcp_client *c, uint64_t now_ms) {
  char buf[96];
  int rv;

  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->now_ms = now_ms;
  for (;;) {
    mcp_pending *p;
    int n;
    for (p = c->pending; p != NULL; p = p->next)
      if (!p->timed_out && !p->cancelled && pending_expiry(p) <= now_ms)
        break;
    if (p == NULL)
      break;
    p->timed_out = true;
    n = snprintf(buf, sizeof(buf),
                 "{\"requestId\":%lld,\"reason\":\"Request timed out\"}",
                 (long long)p->id);
    rv = acp_rpc_session_notify(c->rpc, "notifications/cancelled", 23, buf,
                                (size_t)n);
    if (acp_is_fatal(rv))
      return rv;
    rv = acp_rpc_session_cancel(c->rpc, p->id, ACP_RPC_CANCEL_COMPLETE, now_ms);
    if (rv != 0)
      return rv;
  }
  return acp_rpc_session_handle_expiry(c->rpc, now_ms);
}

void acp_mcp_client_set_timeouts(acp_mcp_client *c, uint64_t timeout_ms,
                                 uint64_t max_total_ms) {
  if (c) {
    c->timeout_ms = timeout_ms;
    c->max_total_ms = max_total_ms;
  }
}

int acp_mcp_client_set_protocol_version(acp_mcp_client *c, acp_mcp_version v) {
  if (c == NULL || acp_mcp_version_str(v) == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->asked = v;
  return 0;
}

void acp_mcp_client_set_roots_list_changed(acp_mcp_client *c, int on) {
  if (c)
    c->roots_list_changed = on != 0;
}

int acp_mcp_client_initialize(acp_mcp_client *c, uint64_t now_ms,
                              acp_mcp_result_cb cb, void *user_data) {
  acp_json_writer *w;
  const char *p;
  size_t n;
  int rv;

  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (c->init_sent)
    return ACP_ERR_INVALID_STATE;
  c->now_ms = now_ms;
  w = c->w;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "protocolVersion");
  acp_json_write_strz(w, acp_mcp_version_str(c->asked));
  acp_json_write_keyz(w, "capabilities");
  acp_json_write_obj_begin(w);
  if (c->cbs.req[R_ROOTS]) {
    acp_json_write_keyz(w, "roots");
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "listChanged");
    acp_json_write_bool(w, c->roots_list_changed);
    acp_json_write_obj_end(w);
  }
  if (c->cbs.req[R_SAMPLING]) {
    acp_json_write_keyz(w, "sampling");
    acp_json_write_raw(w, "{}", 2);
  }
  if (c->cbs.req[R_ELICIT]) {
    acp_json_write_keyz(w, "elicitation");
    acp_json_write_raw(w, "{}", 2);
  }
  acp_json_write_obj_end(w);
  acp_json_write_keyz(w, "clientInfo");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "name");
  acp_json_write_strz(w, c->name);
  acp_json_write_keyz(w, "version");
  acp_json_write_strz(w, c->version_str);
  acp_json_write_obj_end(w);
  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
  p = acp_json_writer_data(w, &n);
  rv = send_req(c, "initialize", p, n, NULL, P_INIT, cb, user_data, NULL, NULL);
  if (rv == 0)
    c->init_sent = true;
  return rv;
}

acp_mcp_version acp_mcp_client_version(const acp_mcp_client *c) {
  return c ? c->version : ACP_MCP_VERSION_UNKNOWN;
}

const char *acp_mcp_client_server_capabilities(const acp_mcp_client *c,
                                               size_t *len) {
  if (len)
    *len = c ? c->server_caps_len : 0;
  return c ? c->server_caps : NULL;
}

const char *acp_mcp_client_server_info(const acp_mcp_client *c, size_t *len) {
  if (len)
    *len = c ? c->server_info_len : 0;
  return c ? c->server_info : NULL;
}

const char *acp_mcp_client_instructions(const acp_mcp_client *c) {
  return c ? c->instructions : NULL;
}

/* MARK: - Requests (Public) */

int acp_mcp_client_send_request(acp_mcp_client *c, const char *method,
                                const char *params, size_t params_len,
                                const acp_mcp_request_opts *opts,
                                uint64_t now_ms, acp_mcp_result_cb cb,
                                void *user_data, int64_t *id_out) {
  if (c == NULL || method == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->now_ms = now_ms;
  if (strcmp(method, "initialize") == 0)
    return ACP_ERR_INVALID_ARGUMENT; /* use acp_mcp_client_initialize() */
  return send_req(c, method, params, params_len, opts, P_PLAIN, cb, user_data,
                  NULL, id_out);
}

/* Send the scratch writer's object as `method`. */
static int send_w(acp_mcp_client *c, const char *method,
                  const acp_mcp_request_opts *opts, uint64_t now_ms,
                  acp_mcp_result_cb cb, void *ud, int64_t *id_out) {
  const char *p;
  size_t n;
  int rv = acp_json_writer_error(c->w);

  if (rv != 0)
    return rv == ACP_ERR_NOMEM || rv == ACP_ERR_LIMIT
               ? rv
               : ACP_ERR_INVALID_ARGUMENT;
  p = acp_json_writer_data(c->w, &n);
  c->now_ms = now_ms;
  return send_req(c, method, p, n, opts, P_PLAIN, cb, ud, NULL, id_out);
}

static bool list_ok(acp_mcp_list which) {
  return (int)which >= 0 && (int)which < 4;
}

static int list_params(acp_mcp_client *c, const char *cursor, size_t len) {
  acp_json_writer_reset(c->w);
  acp_json_write_obj_begin(c->w);
  if (cursor) {
    acp_json_write_keyz(c->w, "cursor");
    acp_json_write_str(c->w, cursor, len);
  }
  return acp_json_write_obj_end(c->w);
}

int acp_mcp_client_list(acp_mcp_client *c, acp_mcp_list which,
                        const char *cursor, const acp_mcp_request_opts *opts,
                        uint64_t now_ms, acp_mcp_result_cb cb, void *user_data,
                        int64_t *id_out) {
  if (c == NULL || !list_ok(which))
    return ACP_ERR_INVALID_ARGUMENT;
  list_params(c, cursor, cursor ? strlen(cursor) : 0);
  return send_w(c, list_methods[which], opts, now_ms, cb, user_data, id_out);
}

static int page_next(acp_mcp_client *c, mcp_pager *pg, const char *cursor,
                     size_t cursor_len) {
  const char *p;
  size_t n;
  char *copy = NULL;
  int rv;

  if (cursor) {
    copy = acp__strndup(&c->mem, cursor, cursor_len);
    if (copy == NULL)
      return ACP_ERR_NOMEM;
  }
  rv = list_params(c, cursor, cursor_len);
  if (rv != 0) {
    acp__free(&c->mem, copy);
    return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
  }
  p = acp_json_writer_data(c->w, &n);
  rv = send_req(c, list_methods[pg->which], p, n, &pg->opts, P_PAGE, NULL, NULL,
                pg, NULL);
  if (rv != 0) {
    acp__free(&c->mem, copy);
    return rv;
  }
  acp__free(&c->mem, pg->cursor);
  pg->cursor = copy;
  return 0;
}

int acp_mcp_client_list_all(acp_mcp_client *c, acp_mcp_list which,
                            const acp_mcp_request_opts *opts, uint64_t now_ms,
                            acp_mcp_page_cb cb, void *user_data) {
  mcp_pager *pg;
  int rv;

  if (c == NULL || !list_ok(which) || cb == NULL ||
      (opts && opts->version != ACP_MCP_REQUEST_OPTS_VERSION))
    return ACP_ERR_INVALID_ARGUMENT;
  pg = acp__calloc(&c->mem, 1, sizeof(*pg));
  if (pg == NULL)
    return ACP_ERR_NOMEM;
  pg->which = which;
  if (opts)
    pg->opts = *opts;
  else
    pg->opts.version = ACP_MCP_REQUEST_OPTS_VERSION;
  pg->cb = cb;
  pg->ud = user_data;
  c->now_ms = now_ms;
  rv = page_next(c, pg, NULL, 0);
  if (rv != 0)
    pager_free(c, pg);
  return rv;
}

/* Write {"<key>": <str>, "arguments": <raw>} into the scratch writer. */
static void name_args(acp_mcp_client *c, const char *key, const char *name,
                      const char *args, size_t args_len) {
  acp_json_writer *w = c->w;

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, key);
  acp_json_write_strz(w, name);
  if (args) {
    acp_json_write_keyz(w, "arguments");
    acp_json_write_raw(w, args, args_len);
  }
  acp_json_write_obj_end(w);
}

/* Send {key: name[, "arguments": args]} as `method`; name is required. */
static int send_named(acp_mcp_client *c, const char *method, const char *key,
                      const char *name, const char *args, size_t args_len,
                      const acp_mcp_request_opts *opts, uint64_t now_ms,
                      acp_mcp_result_cb cb, void *ud, int64_t *id_out) {
  if (c == NULL || name == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  name_args(c, key, name, args, args_len);
  return send_w(c, method, opts, now_ms, cb, ud, id_out);
}

int acp_mcp_client_call_tool(acp_mcp_client *c, const char *name,
                             const char *args, size_t args_len,
                             const acp_mcp_request_opts *opts, uint64_t now_ms,
                             acp_mcp_result_cb cb, void *user_data,
                             int64_t *id_out) {
  return send_named(c, "tools/call", "name", name, args, args_len, opts, now_ms,
                    cb, user_data, id_out);
}

int acp_mcp_client_read_resource(acp_mcp_client *c, const char *uri,
                                 const acp_mcp_request_opts *opts,
                                 uint64_t now_ms, acp_mcp_result_cb cb,
                                 void *user_data, int64_t *id_out) {
  return send_named(c, "resources/read", "uri", uri, NULL, 0, opts, now_ms, cb,
                    user_data, id_out);
}

int acp_mcp_client_get_prompt(acp_mcp_client *c, const char *name,
                              const char *args, size_t args_len,
                              const acp_mcp_request_opts *opts, uint64_t now_ms,
                              acp_mcp_result_cb cb, void *user_data,
                              int64_t *id_out) {
  return send_named(c, "prompts/get", "name", name, args, args_len, opts,
                    now_ms, cb, user_data, id_out);
}

int acp_mcp_client_subscribe(acp_mcp_client *c, const char *uri,
                             uint64_t now_ms, acp_mcp_result_cb cb,
                             void *user_data) {
  return send_named(c, "resources/subscribe", "uri", uri, NULL, 0, NULL, now_ms,
                    cb, user_data, NULL);
}

int acp_mcp_client_unsubscribe(acp_mcp_client *c, const char *uri,
                               uint64_t now_ms, acp_mcp_result_cb cb,
                               void *user_data) {
  return send_named(c, "resources/unsubscribe", "uri", uri, NULL, 0, NULL,
                    now_ms, cb, user_data, NULL);
}

int acp_mcp_client_complete(acp_mcp_client *c, const char *ref,
                            const char *arg_name, const char *arg_value,
                            const char *context_args, uint64_t now_ms,
                            acp_mcp_result_cb cb, void *user_data) {
  acp_json_writer *w;

  if (c == NULL || ref == NULL || arg_name == NULL || arg_value == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = c->w;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "ref");
  acp_json_write_raw(w, ref, strlen(ref));
  acp_json_write_keyz(w, "argument");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "name");
  acp_json_write_strz(w, arg_name);
  acp_json_write_keyz(w, "value");
  acp_json_write_strz(w, arg_value);
  acp_json_write_obj_end(w);
  if (context_args) {
    acp_json_write_keyz(w, "context");
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "arguments");
    acp_json_write_raw(w, context_args, strlen(context_args));
    acp_json_write_obj_end(w);
  }
  acp_json_write_obj_end(w);
  return send_w(c, "completion/complete", NULL, now_ms, cb, user_data, NULL);
}

int acp_mcp_client_set_log_level(acp_mcp_client *c, acp_mcp_log_level level,
                                 uint64_t now_ms, acp_mcp_result_cb cb,
                                 void *user_data) {
  return send_named(c, "logging/setLevel", "level",
                    acp_mcp_log_level_str(level), NULL, 0, NULL, now_ms, cb,
                    user_data, NULL);
}

int acp_mcp_client_ping(acp_mcp_client *c, uint64_t now_ms,
                        acp_mcp_result_cb cb, void *user_data) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->now_ms = now_ms;
  return send_req(c, "ping", NULL, 0, NULL, P_PLAIN, cb, user_data, NULL, NULL);
}

int acp_mcp_client_cancel(acp_mcp_client *c, int64_t id, const char *reason,
                          uint64_t now_ms) {
  acp_json_writer *w;
  mcp_pending *p;
  const char *d;
  size_t n;
  int rv;

  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  for (p = c->pending; p != NULL; p = p->next)
    if (p->id == id && !p->timed_out && !p->cancelled)
      break;
  if (p == NULL)
    return ACP_ERR_NOT_FOUND;
  if (p->kind == P_INIT)
    return ACP_ERR_INVALID_ARGUMENT;
  c->now_ms = now_ms;
  w = c->w;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "requestId");
  acp_json_write_int(w, id);
  if (reason) {
    acp_json_write_keyz(w, "reason");
    acp_json_write_strz(w, reason);
  }
  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM || rv == ACP_ERR_LIMIT
               ? rv
               : ACP_ERR_INVALID_ARGUMENT;
  d = acp_json_writer_data(w, &n);
  rv = acp_rpc_session_notify(c->rpc, "notifications/cancelled", 23, d, n);
  if (rv != 0)
    return rv;
  p->cancelled = true;
  return acp_rpc_session_cancel(c->rpc, id, ACP_RPC_CANCEL_COMPLETE, now_ms);
}

int acp_mcp_client_roots_changed(acp_mcp_client *c) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp_rpc_session_notify(c->rpc, "notifications/roots/list_changed", 32,
                                NULL, 0);
}

/* MARK: - Server requests (Public) */

const char *acp_mcp_client_request_method(const acp_mcp_client_request *r) {
  return r ? r->method : NULL;
}

int acp_mcp_client_request_is_cancelled(const acp_mcp_client_request *r) {
  return r && r->cancelled ? 1 : 0;
}

static int req_answer(acp_mcp_client *c, acp_mcp_client_request *r,
                      bool is_error, const char *result, size_t len,
                      int64_t code, const char *message) {
  int rv = 0;

  if (c == NULL || r == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (r->answered)
    return ACP_ERR_INVALID_STATE;
  if (!r->cancelled) {
    if (is_error)
      rv = acp_rpc_session_respond_error(c->rpc, r->handle, code, message,
                                         strlen(message), NULL, 0);
    else
      rv = acp_rpc_session_respond(c->rpc, r->handle, result, len);
    if (rv != 0)
      return rv;
  }
  r->answered = true;
  if (!r->in_cb)
    req_unlink_free(c, r);
  return 0;
}

int acp_mcp_client_respond(acp_mcp_client *c, acp_mcp_client_request *r,
                           const char *result, size_t len) {
  if (result == NULL) {
    result = "{}";
    len = 2;
  }
  return req_answer(c, r, false, result, len, 0, NULL);
}

int acp_mcp_client_respond_error(acp_mcp_client *c, acp_mcp_client_request *r,
                                 int64_t code, const char *message) {
  return req_answer(c, r, true, NULL, 0, code, message ? message : "Error");
}
