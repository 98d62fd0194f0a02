/*
 * The MCP client: initialize, request helpers with progress-aware timeouts,
 * automatic paging, and handlers for the server's requests. See
 * include/acp/mcp.h for the contract.
 */
#include <stdio.h>
#include <stdlib.h>

#include "mcp_int.h"

/* MARK: - Types (Private) */

enum { P_PLAIN = 0, P_INIT, P_PAGE, P_DISCOVER };
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
  unsigned elicit_modes; /* ACP_MCP_ELICIT_*; 0: form */
  acp_mcp_elicitation_complete_cb elicit_complete;
};

typedef struct mcp_pager {
  acp_mcp_list which;
  acp_mcp_request_opts opts;
  acp_mcp_page_cb cb;
  void *ud;
  size_t pages;
  char *cursor; /* the cursor of the request in flight, or NULL */
  /* Inside pager_run(): a page answered from the list cache is delivered
   * while its request is being made; on_page() then leaves the next
   * request (next) or the end (done, with the callback's return) to
   * pager_run()'s loop rather than recursing, and never frees the pager
   * under it. */
  bool active;
  bool done;
  int done_rv;
  char *next;
  size_t next_len;
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
  /* 2026-07-28: what a multi round-trip retry or a cache store needs. */
  char *rq_params; /* the caller's params (NULL: none) */
  size_t rq_params_len;
  const char *rq_method;    /* static; NULL: not retryable */
  const char *cache_method; /* static; NULL: not cacheable */
  acp_mcp_request_opts rq_opts;
  int rounds;
} mcp_pending;

/* One input_required interim result whose inputRequests are being answered.
 * Owned by its requests (refs) until every one was answered. */
typedef struct mcp_round {
  const char *method;
  char *params;
  size_t params_len;
  acp_mcp_request_opts opts;
  acp_mcp_result_cb cb;
  void *ud;
  int rounds;
  char *state; /* raw JSON string of requestState, or NULL */
  size_t state_len;
  size_t n;
  char **keys; /* raw JSON strings of the inputRequests keys */
  size_t *key_lens;
  char **answers; /* raw JSON of each answer, NULL until answered */
  size_t *answer_lens;
  size_t refs; /* unanswered requests, plus one while being set up */
  bool failed;
} mcp_round;

typedef struct mcp_cache_entry {
  struct mcp_cache_entry *next;
  const char *method; /* static */
  char *params;
  size_t params_len;
  char *result;
  size_t result_len;
  uint64_t expires;
} mcp_cache_entry;

struct acp_mcp_client_request {
  acp_mcp_client_request *next;
  acp_mcp_client_request *prev;
  uint64_t handle;
  const char *method;
  bool in_cb;
  bool answered;
  bool cancelled;
  mcp_round *round; /* 2026: an inputRequests entry, else NULL */
  size_t index;
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
  bool tasks; /* declare the 2026 tasks extension */
  bool init_sent;
  bool ready;
  bool roots_list_changed;
  char *server_caps;
  size_t server_caps_len;
  char *server_info;
  size_t server_info_len;
  char *instructions;
  mcp_pending *pending;
  mcp_pending *spare; /* one freed record kept for the next call, or NULL */
  acp_mcp_client_request *reqs;
  uint64_t timeout_ms;
  uint64_t max_total_ms;
  int64_t next_token;
  uint64_t now_ms;
  /* 2026-07-28 */
  acp_mcp_client_mode mode;
  acp_mcp_era era;
  const char *protocol; /* static; the negotiated revision */
  bool discover_retried;
  /* Tools with x-mcp-header annotations, by name (a chained hash from a
   * seed of this client's own: the server picks the names). */
  struct mcp_hdr_tool **hdr_buckets;
  size_t hdr_nbuckets; /* 0 or a power of two */
  size_t hdr_count;
  uint64_t hdr_seed;
  /* The walk of tools/list pages under way: its number (the tools it saw
   * carry it), whether one is, and the cursor that continues it. */
  unsigned hdr_walk;
  bool hdr_walking;
  char *hdr_next;
  size_t hdr_next_len;
  char *init_json; /* {"capabilities","clientInfo"} for _meta */
  acp_json_doc *init_doc;
  acp_json_writer *sw; /* params with the 2026 _meta */
  acp_json_doc *sdoc;
  mcp_cache_entry *cache;
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

int acp_mcp_client_callbacks_set_elicitation_modes(
    acp_mcp_client_callbacks *cbs, unsigned modes) {
  if (cbs == NULL || modes == 0 ||
      (modes & ~(unsigned)(ACP_MCP_ELICIT_FORM | ACP_MCP_ELICIT_URL)) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  cbs->elicit_modes = modes;
  return 0;
}

void acp_mcp_client_callbacks_set_on_elicitation_complete(
    acp_mcp_client_callbacks *cbs, acp_mcp_elicitation_complete_cb cb) {
  if (cbs)
    cbs->elicit_complete = cb;
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
  acp__free(&c->mem, pg->next);
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
static int pager_run(acp_mcp_client *c, mcp_pager *pg, const char *cursor,
                     size_t len, const acp_rpc_msg *msg);

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

static int cache_lookup(acp_mcp_client *c, mcp_pending *p, const char *method,
                        const char *params, size_t params_len, bool *hit);
static void cache_drop(acp_mcp_client *c, acp_mcp_list which);

static const char *const mrtr_methods[3] = {"tools/call", "resources/read",
                                            "prompts/get"};

/* The static name of a method that may answer input_required, or NULL. */
static const char *mrtr_method(const char *m) {
  int i;
  for (i = 0; i < 3; i++)
    if (strcmp(m, mrtr_methods[i]) == 0)
      return mrtr_methods[i];
  return NULL;
}

static const char *list_method_static(const char *m) {
  int i;
  for (i = 0; i < 4; i++)
    if (strcmp(m, list_methods[i]) == 0)
      return list_methods[i];
  return NULL;
}

/* Wrap *params (a JSON object or NULL) with the 2026 request _meta into
 * c->sw. */
static int stateless_params(acp_mcp_client *c, const char **params,
                            size_t *params_len) {
  const acp_json_val *root = NULL;
  int rv;

  if (*params != NULL) {
    rv = acp_json_doc_parse(c->sdoc, *params, *params_len, NULL);
    root = acp_json_doc_root(c->sdoc);
    if (rv != 0 || acp_json_type_of(root) != ACP_JSON_OBJECT)
      return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
  }
  acp_json_writer_reset(c->sw);
  rv = acp_mcp_era_write_request_params(c->sw, root,
                                        acp_json_doc_root(c->init_doc));
  if (rv != 0)
    return rv == ACP_ERR_NOMEM || rv == ACP_ERR_LIMIT
               ? rv
               : ACP_ERR_INVALID_ARGUMENT;
  *params = acp_json_writer_data(c->sw, params_len);
  return 0;
}

/*
 * Send `params` (a JSON object or NULL) as `method`, splicing
 * _meta.progressToken when the options ask for progress.
 */
/* A finished call's record is kept as the one spare: sequential calls cost
 * no calloc/free pair (~350 instructions a call on glibc). */
static mcp_pending *pending_alloc(acp_mcp_client *c) {
  mcp_pending *p = c->spare;

  if (p == NULL)
    return acp__calloc(&c->mem, 1, sizeof(*p));
  c->spare = NULL;
  memset(p, 0, sizeof(*p));
  return p;
}

static void pending_free(acp_mcp_client *c, mcp_pending *p) {
  acp__free(&c->mem, p->rq_params);
  p->rq_params = NULL;
  if (c->spare == NULL) {
    c->spare = p;
    return;
  }
  acp__free(&c->mem, p);
}

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
      strcmp(method, "ping") != 0 && strcmp(method, "server/discover") != 0)
    return ACP_ERR_INVALID_STATE;
  if (opts && opts->timeout_ms)
    timeout = opts->timeout_ms;
  if (opts && opts->max_total_ms)
    max_total = opts->max_total_ms;
  p = pending_alloc(c);
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
  if (c->era == ACP_MCP_ERA_STATELESS && kind != P_INIT) {
    bool hit = false;

    if (mrtr_method(method) || list_method_static(method) != NULL) {
      if (params != NULL) {
        p->rq_params = acp__strndup(&c->mem, params, params_len);
        if (p->rq_params == NULL) {
          pending_free(c, p);
          return ACP_ERR_NOMEM;
        }
        p->rq_params_len = params_len;
      }
      if (opts)
        p->rq_opts = *opts;
      else
        p->rq_opts.version = ACP_MCP_REQUEST_OPTS_VERSION;
      p->rq_method = mrtr_method(method);
      p->cache_method = list_method_static(method);
    }
    if (p->cache_method != NULL) {
      rv = cache_lookup(c, p, p->cache_method, params, params_len, &hit);
      if (hit) {
        if (id_out)
          *id_out = -1;
        return rv;
      }
    }
  }
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
        pending_free(c, p);
        return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
      }
      meta = ACP__OBJ_GETL(root, "_meta");
    }
    acp_json_writer_reset(w);
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "_meta");
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "progressToken");
    acp_json_write_int(w, p->token);
    rv = copy_members(c, w, meta, "progressToken");
    acp_json_write_obj_end(w);
    if (rv == 0)
      rv = copy_members(c, w, root, "_meta");
    if (rv == 0)
      rv = acp_json_write_obj_end(w);
    if (rv != 0) {
      pending_free(c, p);
      return rv;
    }
    params = acp_json_writer_data(w, &params_len);
  }
  if ((c->era == ACP_MCP_ERA_STATELESS && kind != P_INIT) ||
      strcmp(method, "server/discover") == 0) {
    rv = stateless_params(c, &params, &params_len);
    if (rv != 0) {
      pending_free(c, p);
      return rv;
    }
  }
  rv =
      acp_rpc_session_request(c->rpc, method, strlen(method), params,
                              params_len, 0, c->now_ms, on_response, p, &p->id);
  if (rv != 0) {
    pending_free(c, p);
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
  const acp_json_val *pv = ACP__OBJ_GETL(msg->result, "protocolVersion");
  const acp_json_val *ins = ACP__OBJ_GETL(msg->result, "instructions");
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
  rv = copy_raw(c, ACP__OBJ_GETL(msg->result, "capabilities"), &c->server_caps,
                &c->server_caps_len);
  if (rv == 0)
    rv = copy_raw(c, ACP__OBJ_GETL(msg->result, "serverInfo"), &c->server_info,
                  &c->server_info_len);
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
  c->era = ACP_MCP_ERA_STATEFUL;
  c->protocol = acp_mcp_version_str(v);
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
    next = ACP__OBJ_GETL(msg->result, "nextCursor");
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
    if (pg->active) { /* pager_run() below us frees it */
      pg->done = true;
      pg->done_rv = rv;
      return rv;
    }
    pager_free(c, pg);
    return rv;
  }
  if (pg->active) {
    /* From the cache, inside pager_run(): the cursor outlives msg. */
    pg->next = acp__strndup(&c->mem, p, n);
    if (pg->next == NULL) {
      pg->done = true;
      pg->done_rv = ACP_ERR_NOMEM;
      (void)pg->cb(c, ACP_ERR_NOMEM, msg, true, pg->ud);
      return ACP_ERR_NOMEM;
    }
    pg->next_len = n;
    return 0;
  }
  return pager_run(c, pg, p, n, msg);
}

/*
 * Ask the page at `cursor`, then, while pages come from the list cache
 * (each delivered through on_page() during its own request), the ones
 * after it: a loop, so that a long or cyclic run of cached pages neither
 * grows the stack nor frees the pager under a caller. The pager is freed
 * here when the walk ended; a failure to ask is reported through the
 * callback (`msg`: the last page, or NULL) once a page was delivered, and
 * returned as it is before that.
 */
static int pager_run(acp_mcp_client *c, mcp_pager *pg, const char *cursor,
                     size_t len, const acp_rpc_msg *msg) {
  int rv;

  pg->active = true;
  rv = page_next(c, pg, cursor, len);
  while (rv == 0 && !pg->done && pg->next != NULL) {
    char *cur = pg->next;

    pg->next = NULL;
    rv = page_next(c, pg, cur, pg->next_len);
    acp__free(&c->mem, cur);
  }
  pg->active = false;
  if (pg->done) {
    rv = pg->done_rv;
    pager_free(c, pg);
    return rv;
  }
  if (rv != 0) {
    bool told = pg->pages > 0;
    int crv = told ? pg->cb(c, rv, msg, true, pg->ud) : 0;
    pager_free(c, pg);
    return acp_is_fatal(rv) || !told ? rv : crv;
  }
  return 0;
}

/* The result's resultType is "input_required" (absent means complete). */
static bool is_input_required(const acp_json_val *result) {
  const acp_json_val *rt = ACP__OBJ_GETL(result, "resultType");
  return rt != NULL && ACP_JSON_STR_EQ_LIT(rt, "input_required");
}

static int send_initialize(acp_mcp_client *c, acp_mcp_result_cb cb, void *ud);
static int mrtr_start(acp_mcp_client *c, mcp_pending *p,
                      const acp_rpc_msg *msg);
static int cache_store(acp_mcp_client *c, const mcp_pending *p,
                       const acp_rpc_msg *msg);
static int tools_list_response(acp_mcp_client *c, mcp_pending *p,
                               const acp_rpc_msg *msg);
static void hdr_tools_free(acp_mcp_client *c);
static int hdr_page_kind(acp_mcp_client *c, const mcp_pending *p);
static int hdr_filter_tools(acp_mcp_client *c, const acp_rpc_msg *msg, int kind,
                            char **out_json, size_t *out_len);

/* Whether a list of versions (an array or NULL) has 2026-07-28. */
static bool supported_has_2026(const acp_json_val *list) {
  const acp_json_val *v;
  if (acp_json_type_of(list) != ACP_JSON_ARRAY)
    return false;
  for (v = acp_json_child(list); v != NULL; v = acp_json_next(v))
    if (ACP_JSON_STR_EQ_LIT(v, ACP_MCP_PROTOCOL_2026_07_28))
      return true;
  return false;
}

/* Whether a discover result lists 2026-07-28. */
static bool discover_has_2026(const acp_json_val *result) {
  return supported_has_2026(ACP__OBJ_GETL(result, "supportedVersions"));
}

/* The server/discover answer: become stateless, fall back to initialize, or
 * fail. Returns the status for the user callback (1: the callback is
 * deferred to initialize), or a fatal code through *fatal. */
static int discover_result(acp_mcp_client *c, mcp_pending *p, int status,
                           const acp_rpc_msg *msg, int *fatal) {
  const acp_json_val *ins;
  int rv;

  *fatal = 0;
  if (status == ACP_ERR_TIMEOUT || status == ACP_ERR_CLOSED ||
      status == ACP_ERR_CANCELLED)
    return status;
  if (status == ACP_ERR_PROTOCOL &&
      msg->error_code == ACP_MCP_UNSUPPORTED_PROTOCOL_VERSION &&
      !c->discover_retried &&
      supported_has_2026(ACP__OBJ_GETL(msg->error_data, "supported"))) {
    /* Rejected although the server names 2026-07-28 among the supported
     * versions (a server that refuses a first request, or one that
     * changed): ask once more. */
    c->discover_retried = true;
    rv = send_req(c, "server/discover", NULL, 0, NULL, P_DISCOVER, p->cb, p->ud,
                  NULL, NULL);
    if (rv != 0) {
      if (acp_is_fatal(rv))
        *fatal = rv;
      return rv;
    }
    return 1;
  }
  if (status != 0 || !discover_has_2026(msg->result)) {
    if (c->mode == ACP_MCP_CLIENT_STATELESS)
      return ACP_ERR_UNSUPPORTED;
    rv = send_initialize(c, p->cb, p->ud);
    if (rv != 0) {
      if (acp_is_fatal(rv))
        *fatal = rv;
      return rv;
    }
    return 1;
  }
  ins = ACP__OBJ_GETL(msg->result, "instructions");
  rv = copy_raw(c, ACP__OBJ_GETL(msg->result, "capabilities"), &c->server_caps,
                &c->server_caps_len);
  if (rv == 0)
    rv = copy_raw(c,
                  acp_json_obj_getz(ACP__OBJ_GETL(msg->result, "_meta"),
                                    ACP_MCP_META_SERVER_INFO),
                  &c->server_info, &c->server_info_len);
  if (rv == 0 && acp_json_type_of(ins) == ACP_JSON_STRING)
    rv = acp__mcp_str_dup(&c->mem, msg->doc, ins, &c->instructions, NULL);
  if (rv != 0) {
    *fatal = rv;
    return rv;
  }
  c->era = ACP_MCP_ERA_STATELESS;
  c->protocol = ACP_MCP_PROTOCOL_2026_07_28;
  c->ready = true;
  return 0;
}

/* Hand a completed request to its caller. */
static int deliver(acp_mcp_client *c, mcp_pending *p, int status,
                   const acp_rpc_msg *msg) {
  if (p->kind == P_PAGE)
    return on_page(c, p->pager, status, msg);
  if (p->cb)
    return p->cb(c, status, msg, p->ud);
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
      pending_free(c, p);
      return fatal;
    }
  }
  if (p->kind == P_DISCOVER) {
    int fatal;
    status = discover_result(c, p, status, msg, &fatal);
    if (fatal != 0 || status == 1) {
      pending_free(c, p);
      return fatal;
    }
  }
  if (status == 0 && p->rq_method != NULL && is_input_required(msg->result)) {
    rv = mrtr_start(c, p, msg);
    pending_free(c, p);
    return rv;
  }
  if (status == 0 && p->cache_method == list_methods[ACP_MCP_LIST_TOOLS])
    return tools_list_response(c, p, msg);
  if (status == 0 && p->cache_method != NULL) {
    rv = cache_store(c, p, msg);
    if (rv != 0) {
      pending_free(c, p);
      return rv;
    }
  }
  rv = deliver(c, p, status, msg);
  pending_free(c, p);
  return rv;
}

/* A stateless tools/list result: tools with an invalid x-mcp-header are
 * dropped from what is cached and delivered (a copy of the result). */
static int tools_list_response(acp_mcp_client *c, mcp_pending *p,
                               const acp_rpc_msg *msg) {
  acp_rpc_msg m = *msg;
  acp_json_doc *doc = NULL;
  char *json = NULL;
  size_t len = 0;
  int rv = hdr_filter_tools(c, msg, hdr_page_kind(c, p), &json, &len);

  if (rv == 0 && json != NULL) {
    rv = acp_json_doc_new(&doc, &c->mem);
    if (rv == 0)
      rv = acp_json_doc_parse(doc, json, len, NULL);
    if (rv == 0) {
      m.result = acp_json_doc_root(doc);
      m.doc = doc;
    }
  }
  if (rv == 0)
    rv = cache_store(c, p, &m);
  if (rv == 0)
    rv = deliver(c, p, 0, &m);
  acp_json_doc_free(doc);
  acp__free(&c->mem, json);
  pending_free(c, p);
  return rv;
}

/* MARK: - Incoming (Private) */

static int round_unref(acp_mcp_client *c, mcp_round *rd);

static void req_unlink_free(acp_mcp_client *c, acp_mcp_client_request *r) {
  mcp_round *rd = r->round;

  if (rd != NULL && !r->answered)
    rd->failed = true; /* freed unanswered: the client is going away */
  if (r->prev)
    r->prev->next = r->next;
  else
    c->reqs = r->next;
  if (r->next)
    r->next->prev = r->prev;
  if (rd == NULL && !r->answered) /* a cancel must not find it */
    acp__rpc_set_tag(c->rpc, r->handle, NULL);
  acp__free(&c->mem, r);
  if (rd != NULL)
    (void)round_unref(c, rd);
}

/* Whether an elicitation/create's mode ("form" when absent) is one the
 * client declared: the server must not send others. */
static bool elicit_mode_ok(const acp_mcp_client *c,
                           const acp_json_val *params) {
  unsigned m =
      c->cbs.elicit_modes ? c->cbs.elicit_modes : (unsigned)ACP_MCP_ELICIT_FORM;
  const acp_json_val *mode = ACP__OBJ_GETL(params, "mode");

  if (mode == NULL || ACP_JSON_STR_EQ_LIT(mode, "form"))
    return (m & ACP_MCP_ELICIT_FORM) != 0;
  if (ACP_JSON_STR_EQ_LIT(mode, "url"))
    return (m & ACP_MCP_ELICIT_URL) != 0;
  return false;
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
  if (i == R_ELICIT && !elicit_mode_ok(c, msg->params)) {
    static const char e[] = "Invalid params: unsupported elicitation mode";
    rv = acp_rpc_session_respond_error(rpc, msg->handle, ACP_RPC_INVALID_PARAMS,
                                       e, sizeof(e) - 1, NULL, 0);
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
  acp__rpc_set_tag(rpc, r->handle, r); /* for client_on_cancel */
  r->in_cb = true;
  rv = c->cbs.req[i](c, r, msg->params, c->user_data);
  r->in_cb = false;
  if (r->answered)
    req_unlink_free(c, r);
  return rv;
}

static int on_progress_note(acp_mcp_client *c, const acp_rpc_msg *msg) {
  const acp_json_val *tok = ACP__OBJ_GETL(msg->params, "progressToken");
  const acp_json_val *pv = ACP__OBJ_GETL(msg->params, "progress");
  const acp_json_val *tv = ACP__OBJ_GETL(msg->params, "total");
  const acp_json_val *mv = ACP__OBJ_GETL(msg->params, "message");
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
    const acp_json_val *lv = ACP__OBJ_GETL(params, "level");
    const acp_json_val *lg = ACP__OBJ_GETL(params, "logger");
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
                      ACP__OBJ_GETL(params, "data"), c->user_data);
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
    cache_drop(c, which);
    return c->cbs.list_changed ? c->cbs.list_changed(c, which, c->user_data)
                               : 0;
  }
  if (acp__mcp_method_is(msg, "notifications/elicitation/complete") &&
      c->cbs.elicit_complete != NULL) {
    const acp_json_val *iv = ACP__OBJ_GETL(params, "elicitationId");
    const char *p;
    size_t n;

    if (acp_json_type_of(iv) != ACP_JSON_STRING)
      return 0;
    rv = acp_json_doc_str(msg->doc, iv, &p, &n);
    if (rv != 0)
      return rv;
    return c->cbs.elicit_complete(c, p, n, c->user_data);
  }
  if (acp__mcp_method_is(msg, "notifications/resources/updated")) {
    const acp_json_val *uv = ACP__OBJ_GETL(params, "uri");
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
  acp_mcp_client_request *r = acp__rpc_tag(rpc, handle);

  if (r == NULL || r->answered || r->cancelled)
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
  c->hdr_seed = acp__fnv1a(ACP__FNV_SEED, &c, sizeof(c));
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
  rv = acp_json_writer_new(&c->sw, 0, &c->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_doc_new(&c->sdoc, &c->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_doc_new(&c->init_doc, &c->mem);
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
    pending_free(c, p);
  }
  acp__free(&c->mem, c->spare);
  while (c->reqs)
    req_unlink_free(c, c->reqs);
  acp_mcp_client_cache_clear(c);
  hdr_tools_free(c);
  acp_json_writer_free(c->sw);
  acp_json_doc_free(c->sdoc);
  acp_json_doc_free(c->init_doc);
  acp__free(&c->mem, c->init_json);
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

/* {"protocolVersion"?, "capabilities", "clientInfo"} into w: initialize's
 * params, or (without a version) what the 2026 _meta is built from. */
static int write_init_params(acp_mcp_client *c, acp_json_writer *w,
                             const char *version) {
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  if (version != NULL) {
    ACP__W_KEYL(w, "protocolVersion");
    acp_json_write_strz(w, version);
  }
  ACP__W_KEYL(w, "capabilities");
  acp_json_write_obj_begin(w);
  if (c->cbs.req[R_ROOTS]) {
    ACP__W_KEYL(w, "roots");
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "listChanged");
    acp_json_write_bool(w, c->roots_list_changed);
    acp_json_write_obj_end(w);
  }
  if (c->cbs.req[R_SAMPLING]) {
    ACP__W_KEYL(w, "sampling");
    acp_json_write_raw(w, "{}", 2);
  }
  if (c->cbs.req[R_ELICIT]) {
    unsigned m = c->cbs.elicit_modes ? c->cbs.elicit_modes
                                     : (unsigned)ACP_MCP_ELICIT_FORM;
    ACP__W_KEYL(w, "elicitation");
    /* Form only stays `{}` (what clients before 2025-11-25 send); URL mode
     * is declared only when the callback says it handles it. */
    if (m == ACP_MCP_ELICIT_FORM)
      acp_json_write_raw(w, "{}", 2);
    else if (m == ACP_MCP_ELICIT_URL)
      acp_json_write_raw(w, "{\"url\":{}}", 10);
    else
      acp_json_write_raw(w, "{\"form\":{},\"url\":{}}", 20);
  }
  /* The 2026 _meta only: a 2025 client's `tasks` capability would mean
   * it runs tasks for the server. */
  if (c->tasks && version == NULL) {
    ACP__W_KEYL(w, "extensions");
    acp_json_write_raw(w, "{\"" ACP_MCP_EXT_TASKS "\":{}}",
                       sizeof("{\"" ACP_MCP_EXT_TASKS "\":{}}") - 1);
  }
  acp_json_write_obj_end(w);
  ACP__W_KEYL(w, "clientInfo");
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "name");
  acp_json_write_strz(w, c->name);
  ACP__W_KEYL(w, "version");
  acp_json_write_strz(w, c->version_str);
  acp_json_write_obj_end(w);
  return acp_json_write_obj_end(w);
}

static int send_initialize(acp_mcp_client *c, acp_mcp_result_cb cb, void *ud) {
  const char *p;
  size_t n;
  int rv = write_init_params(c, c->w, acp_mcp_version_str(c->asked));

  if (rv != 0)
    return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
  p = acp_json_writer_data(c->w, &n);
  return send_req(c, "initialize", p, n, NULL, P_INIT, cb, ud, NULL, NULL);
}

/* server/discover with the 2026 _meta, built from what initialize would
 * declare (kept in init_doc for every later request). */
static int send_discover(acp_mcp_client *c, acp_mcp_result_cb cb, void *ud) {
  const char *p;
  size_t n;
  int rv = write_init_params(c, c->w, NULL);

  if (rv != 0)
    return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
  p = acp_json_writer_data(c->w, &n);
  acp__free(&c->mem, c->init_json);
  c->init_json = acp__strndup(&c->mem, p, n);
  if (c->init_json == NULL)
    return ACP_ERR_NOMEM;
  rv = acp_json_doc_parse(c->init_doc, c->init_json, n, NULL);
  if (rv != 0)
    return rv;
  return send_req(c, "server/discover", NULL, 0, NULL, P_DISCOVER, cb, ud, NULL,
                  NULL);
}

int acp_mcp_client_initialize(acp_mcp_client *c, uint64_t now_ms,
                              acp_mcp_result_cb cb, void *user_data) {
  int rv;

  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (c->init_sent)
    return ACP_ERR_INVALID_STATE;
  c->now_ms = now_ms;
  if (c->mode == ACP_MCP_CLIENT_STATEFUL)
    rv = send_initialize(c, cb, user_data);
  else
    rv = send_discover(c, cb, user_data);
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
    ACP__W_KEYL(c->w, "cursor");
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
  /* The cursor in flight before the request: an answer from the cache
   * comes during send_req() and is checked against it. */
  acp__free(&c->mem, pg->cursor);
  pg->cursor = copy;
  return send_req(c, list_methods[pg->which], p, n, &pg->opts, P_PAGE, NULL,
                  NULL, pg, NULL);
}

int acp_mcp_client_list_all(acp_mcp_client *c, acp_mcp_list which,
                            const acp_mcp_request_opts *opts, uint64_t now_ms,
                            acp_mcp_page_cb cb, void *user_data) {
  mcp_pager *pg;

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
  return pager_run(c, pg, NULL, 0, NULL);
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
    ACP__W_KEYL(w, "arguments");
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

/* MARK: - Tasks (Public) */

int acp_mcp_client_set_tasks(acp_mcp_client *c, int on) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (c->init_sent)
    return ACP_ERR_INVALID_STATE;
  c->tasks = on != 0;
  return 0;
}

int acp_mcp_client_call_tool_task(acp_mcp_client *c, const char *name,
                                  const char *args, size_t args_len,
                                  uint64_t ttl_ms,
                                  const acp_mcp_request_opts *opts,
                                  uint64_t now_ms, acp_mcp_result_cb cb,
                                  void *user_data, int64_t *id_out) {
  acp_json_writer *w;

  if (c == NULL || name == NULL || ttl_ms > (uint64_t)INT64_MAX)
    return ACP_ERR_INVALID_ARGUMENT;
  if (c->era == ACP_MCP_ERA_STATELESS) {
    /* The server decides; the extension must have been declared. */
    if (!c->tasks)
      return ACP_ERR_INVALID_STATE;
    return acp_mcp_client_call_tool(c, name, args, args_len, opts, now_ms, cb,
                                    user_data, id_out);
  }
  if (c->ready && c->version < ACP_MCP_VERSION_2025_11_25)
    return ACP_ERR_UNSUPPORTED;
  w = c->w;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "name");
  acp_json_write_strz(w, name);
  if (args) {
    ACP__W_KEYL(w, "arguments");
    acp_json_write_raw(w, args, args_len);
  }
  ACP__W_KEYL(w, "task");
  acp_json_write_obj_begin(w);
  if (ttl_ms > 0) {
    ACP__W_KEYL(w, "ttl");
    acp_json_write_int(w, (int64_t)ttl_ms);
  }
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  return send_w(c, "tools/call", opts, now_ms, cb, user_data, id_out);
}

/* tasks/<verb> {"taskId"[, extra members]}. */
static int send_task(acp_mcp_client *c, const char *method, const char *task_id,
                     const char *extra_key, const char *extra, size_t extra_len,
                     uint64_t now_ms, acp_mcp_result_cb cb, void *ud) {
  acp_json_writer *w;

  if (c == NULL || task_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = c->w;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "taskId");
  acp_json_write_strz(w, task_id);
  if (extra_key) {
    acp_json_write_keyz(w, extra_key);
    acp_json_write_raw(w, extra, extra_len);
  }
  acp_json_write_obj_end(w);
  return send_w(c, method, NULL, now_ms, cb, ud, NULL);
}

int acp_mcp_client_task_get(acp_mcp_client *c, const char *task_id,
                            uint64_t now_ms, acp_mcp_result_cb cb, void *ud) {
  return send_task(c, "tasks/get", task_id, NULL, NULL, 0, now_ms, cb, ud);
}

int acp_mcp_client_task_cancel(acp_mcp_client *c, const char *task_id,
                               uint64_t now_ms, acp_mcp_result_cb cb,
                               void *ud) {
  return send_task(c, "tasks/cancel", task_id, NULL, NULL, 0, now_ms, cb, ud);
}

int acp_mcp_client_task_result(acp_mcp_client *c, const char *task_id,
                               uint64_t now_ms, acp_mcp_result_cb cb,
                               void *ud) {
  if (c != NULL && c->era == ACP_MCP_ERA_STATELESS)
    return ACP_ERR_UNSUPPORTED;
  return send_task(c, "tasks/result", task_id, NULL, NULL, 0, now_ms, cb, ud);
}

int acp_mcp_client_task_update(acp_mcp_client *c, const char *task_id,
                               const char *input_responses, size_t len,
                               uint64_t now_ms, acp_mcp_result_cb cb,
                               void *ud) {
  if (c != NULL && c->era != ACP_MCP_ERA_STATELESS)
    return ACP_ERR_UNSUPPORTED;
  if (input_responses == NULL ||
      acp_json_validate(input_responses, len, NULL) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  return send_task(c, "tasks/update", task_id, "inputResponses",
                   input_responses, len, now_ms, cb, ud);
}

int acp_mcp_client_task_answer(acp_mcp_client *c, const char *task_id,
                               const acp_rpc_msg *task, uint64_t now_ms,
                               acp_mcp_result_cb cb, void *ud) {
  mcp_pending p;
  int rv;

  if (c == NULL || task_id == NULL || task == NULL || task->result == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (c->era != ACP_MCP_ERA_STATELESS)
    return ACP_ERR_UNSUPPORTED;
  if (acp_json_type_of(ACP__OBJ_GETL(task->result, "inputRequests")) !=
      ACP_JSON_OBJECT)
    return ACP_ERR_INVALID_ARGUMENT;
  /* The task's inputRequests go through the same round as an
   * input_required result; its "retry" is tasks/update {taskId,
   * inputResponses} (round_retry adds the answers to these params). */
  acp_json_writer_reset(c->w);
  acp_json_write_obj_begin(c->w);
  ACP__W_KEYL(c->w, "taskId");
  acp_json_write_strz(c->w, task_id);
  rv = acp_json_write_obj_end(c->w);
  if (rv != 0)
    return rv;
  memset(&p, 0, sizeof(p));
  {
    size_t n;
    const char *d = acp_json_writer_data(c->w, &n);
    p.rq_params = acp__strndup(&c->mem, d, n);
    if (p.rq_params == NULL)
      return ACP_ERR_NOMEM;
    p.rq_params_len = n;
  }
  p.rq_method = "tasks/update";
  p.rq_opts.version = ACP_MCP_REQUEST_OPTS_VERSION;
  p.cb = cb;
  p.ud = ud;
  c->now_ms = now_ms;
  rv = mrtr_start(c, &p, task);
  acp__free(&c->mem, p.rq_params); /* NULL once mrtr_start took it */
  return rv;
}

int acp_mcp_client_task_list(acp_mcp_client *c, const char *cursor,
                             uint64_t now_ms, acp_mcp_result_cb cb, void *ud) {
  int rv;
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (c->era == ACP_MCP_ERA_STATELESS)
    return ACP_ERR_UNSUPPORTED;
  rv = list_params(c, cursor, cursor ? strlen(cursor) : 0);
  if (rv != 0 && rv != ACP_ERR_NOMEM)
    rv = 0; /* send_w reports the writer's error */
  return send_w(c, "tasks/list", NULL, now_ms, cb, ud, NULL);
}

int acp_mcp_result_task(const acp_rpc_msg *msg, const char **task_id,
                        size_t *id_len, const char **status,
                        size_t *status_len) {
  const acp_json_val *r;
  const acp_json_val *id;
  const acp_json_val *st;
  size_t ignored;

  if (msg == NULL || msg->result == NULL || msg->doc == NULL)
    return 0;
  r = msg->result;
  if (acp_json_type_of(ACP__OBJ_GETL(r, "task")) == ACP_JSON_OBJECT &&
      ACP__OBJ_GETL(r, "taskId") == NULL)
    r = ACP__OBJ_GETL(r, "task"); /* 2025 CreateTaskResult */
  id = ACP__OBJ_GETL(r, "taskId");
  st = ACP__OBJ_GETL(r, "status");
  if (acp_json_type_of(id) != ACP_JSON_STRING ||
      acp_json_type_of(st) != ACP_JSON_STRING)
    return 0;
  if (task_id != NULL &&
      acp_json_doc_str(msg->doc, id, task_id, id_len ? id_len : &ignored) != 0)
    return 0;
  if (status != NULL &&
      acp_json_doc_str(msg->doc, st, status,
                       status_len ? status_len : &ignored) != 0)
    return 0;
  return 1;
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
  ACP__W_KEYL(w, "ref");
  acp_json_write_raw(w, ref, strlen(ref));
  ACP__W_KEYL(w, "argument");
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "name");
  acp_json_write_strz(w, arg_name);
  ACP__W_KEYL(w, "value");
  acp_json_write_strz(w, arg_value);
  acp_json_write_obj_end(w);
  if (context_args) {
    ACP__W_KEYL(w, "context");
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "arguments");
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
  ACP__W_KEYL(w, "requestId");
  acp_json_write_int(w, id);
  if (reason) {
    ACP__W_KEYL(w, "reason");
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

static int round_answer(acp_mcp_client *c, acp_mcp_client_request *r,
                        bool is_error, const char *result, size_t len);

static int req_answer(acp_mcp_client *c, acp_mcp_client_request *r,
                      bool is_error, const char *result, size_t len,
                      int64_t code, const char *message) {
  int rv = 0;

  if (c == NULL || r == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (r->answered)
    return ACP_ERR_INVALID_STATE;
  if (r->round != NULL)
    return round_answer(c, r, is_error, result, len);
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

/* MARK: - 2026-07-28: multi round-trip requests (Private) */

static void round_free(acp_mcp_client *c, mcp_round *rd) {
  size_t i;

  for (i = 0; i < rd->n; i++) {
    acp__free(&c->mem, rd->keys[i]);
    acp__free(&c->mem, rd->answers[i]);
  }
  acp__free(&c->mem, rd->keys);
  acp__free(&c->mem, rd->key_lens);
  acp__free(&c->mem, rd->answers);
  acp__free(&c->mem, rd->answer_lens);
  acp__free(&c->mem, rd->params);
  acp__free(&c->mem, rd->state);
  acp__free(&c->mem, rd);
}

/* End the original request with `status` (msg NULL), once. */
static int round_fail(acp_mcp_client *c, mcp_round *rd, int status) {
  int rv = 0;

  if (rd->failed)
    return 0;
  rd->failed = true;
  if (rd->cb)
    rv = rd->cb(c, status, NULL, rd->ud);
  return rv == 0 || rv == ACP_ERR_PAUSE ? 0 : ACP_ERR_CALLBACK_FAILURE;
}

/* Send the original request again with inputResponses and requestState. */
static int round_retry(acp_mcp_client *c, mcp_round *rd) {
  acp_json_writer *w = c->w;
  const acp_json_val *root = NULL;
  const acp_json_val *k;
  mcp_pending *p;
  const char *d;
  size_t n;
  size_t i;
  int rv;

  if (rd->params != NULL) {
    rv = acp_json_doc_parse(c->doc, rd->params, rd->params_len, NULL);
    if (rv != 0)
      return rv;
    root = acp_json_doc_root(c->doc);
  }
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(root); k; k = acp_json_next(acp_json_next(k))) {
    if (ACP_JSON_STR_EQ_LIT(k, "inputResponses") ||
        ACP_JSON_STR_EQ_LIT(k, "requestState"))
      continue;
    acp__json_write_key_val(w, k);
    acp_json_write_val(w, acp_json_next(k));
  }
  if (rd->n > 0) {
    /* Keys are the server's raw JSON strings and answers raw JSON values
     * (acp_mcp_client_respond() takes them verbatim): splice the object
     * whole. */
    size_t len = 2;
    char *obj;
    char *q;

    for (i = 0; i < rd->n; i++)
      len += rd->key_lens[i] + 1 + rd->answer_lens[i] + 1;
    obj = acp__malloc(&c->mem, len);
    if (obj == NULL)
      return ACP_ERR_NOMEM;
    q = obj;
    *q++ = '{';
    for (i = 0; i < rd->n; i++) {
      memcpy(q, rd->keys[i], rd->key_lens[i]);
      q += rd->key_lens[i];
      *q++ = ':';
      memcpy(q, rd->answers[i], rd->answer_lens[i]);
      q += rd->answer_lens[i];
      if (i + 1 < rd->n)
        *q++ = ',';
    }
    *q++ = '}';
    ACP__W_KEYL(w, "inputResponses");
    acp_json_write_raw(w, obj, (size_t)(q - obj));
    acp__free(&c->mem, obj);
  }
  if (rd->state != NULL) {
    ACP__W_KEYL(w, "requestState");
    acp_json_write_raw(w, rd->state, rd->state_len);
  }
  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv;
  d = acp_json_writer_data(w, &n);
  rv = send_req(c, rd->method, d, n, &rd->opts, P_PLAIN, rd->cb, rd->ud, NULL,
                NULL);
  if (rv != 0)
    return rv;
  p = c->pending; /* send_req pushed it first */
  p->rounds = rd->rounds;
  return 0;
}

static int round_unref(acp_mcp_client *c, mcp_round *rd) {
  int rv = 0;

  if (--rd->refs > 0)
    return 0;
  if (!rd->failed) {
    rv = round_retry(c, rd);
    if (rv != 0 && !acp_is_fatal(rv))
      rv = round_fail(c, rd, rv);
  }
  round_free(c, rd);
  return rv;
}

static int round_answer(acp_mcp_client *c, acp_mcp_client_request *r,
                        bool is_error, const char *result, size_t len) {
  mcp_round *rd = r->round;
  int rv = 0;

  if (is_error) {
    rv = round_fail(c, rd, ACP_ERR_CANCELLED);
  } else if (!rd->failed) {
    rd->answers[r->index] = acp__strndup(&c->mem, result, len);
    if (rd->answers[r->index] == NULL)
      return ACP_ERR_NOMEM;
    rd->answer_lens[r->index] = len;
  }
  r->answered = true;
  if (!r->in_cb) {
    int urv;

    r->round = NULL; /* unref here, to return the retry's outcome */
    req_unlink_free(c, r);
    urv = round_unref(c, rd);
    if (rv == 0)
      rv = urv;
  }
  return rv;
}

static int req_index(const acp_json_val *entry) {
  const acp_json_val *m = ACP__OBJ_GETL(entry, "method");
  int i;

  if (acp_json_type_of(entry) != ACP_JSON_OBJECT ||
      acp_json_type_of(m) != ACP_JSON_STRING)
    return -1;
  for (i = 0; i < R_COUNT; i++)
    if (acp_json_str_eq(m, req_methods[i], strlen(req_methods[i])))
      return i;
  return -1;
}

/* An input_required result: hand each inputRequests entry to its callback;
 * the last answer sends the retry (round_unref). */
static int mrtr_start(acp_mcp_client *c, mcp_pending *p,
                      const acp_rpc_msg *msg) {
  const acp_json_val *reqs = ACP__OBJ_GETL(msg->result, "inputRequests");
  const acp_json_val *state = ACP__OBJ_GETL(msg->result, "requestState");
  const acp_json_val *k;
  mcp_round *rd;
  size_t n = 0;
  size_t i;
  int rv = 0;

  rd = acp__calloc(&c->mem, 1, sizeof(*rd));
  if (rd == NULL)
    return ACP_ERR_NOMEM;
  rd->method = p->rq_method;
  rd->params = p->rq_params;
  rd->params_len = p->rq_params_len;
  p->rq_params = NULL;
  rd->opts = p->rq_opts;
  rd->cb = p->cb;
  rd->ud = p->ud;
  rd->rounds = p->rounds + 1;
  rd->refs = 1;
  if (rd->rounds > ACP_MCP_CLIENT_MAX_ROUNDS ||
      (reqs != NULL && acp_json_type_of(reqs) != ACP_JSON_OBJECT) ||
      (state != NULL && acp_json_type_of(state) != ACP_JSON_STRING) ||
      (reqs == NULL && state == NULL)) {
    rv = round_fail(c, rd, ACP_ERR_PROTOCOL);
    round_free(c, rd);
    return rv;
  }
  for (k = acp_json_child(reqs); k; k = acp_json_next(acp_json_next(k))) {
    int ix = req_index(acp_json_next(k));
    if (ix < 0 || c->cbs.req[ix] == NULL) {
      rv = round_fail(c, rd, ACP_ERR_UNSUPPORTED);
      round_free(c, rd);
      return rv;
    }
    n++;
  }
  if (state != NULL) {
    const char *raw = acp_json_raw(state, &rd->state_len);
    rd->state = acp__strndup(&c->mem, raw, rd->state_len);
    if (rd->state == NULL)
      goto nomem;
  }
  if (n > 0) {
    rd->keys = acp__calloc(&c->mem, n, sizeof(*rd->keys));
    rd->key_lens = acp__calloc(&c->mem, n, sizeof(*rd->key_lens));
    rd->answers = acp__calloc(&c->mem, n, sizeof(*rd->answers));
    rd->answer_lens = acp__calloc(&c->mem, n, sizeof(*rd->answer_lens));
    if (!rd->keys || !rd->key_lens || !rd->answers || !rd->answer_lens)
      goto nomem;
  }
  rd->n = n;
  for (i = 0, k = acp_json_child(reqs); k;
       i++, k = acp_json_next(acp_json_next(k))) {
    const char *raw = acp_json_raw(k, &rd->key_lens[i]);
    rd->keys[i] = acp__strndup(&c->mem, raw, rd->key_lens[i]);
    if (rd->keys[i] == NULL)
      goto nomem;
  }
  for (i = 0, k = acp_json_child(reqs); k && rv == 0 && !rd->failed;
       i++, k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *entry = acp_json_next(k);
    const acp_json_val *params = ACP__OBJ_GETL(entry, "params");
    int ix = req_index(entry);
    acp_mcp_client_request *r;

    if (params != NULL && acp_json_type_of(params) != ACP_JSON_OBJECT)
      params = NULL;
    r = acp__calloc(&c->mem, 1, sizeof(*r));
    if (r == NULL) {
      rv = ACP_ERR_NOMEM;
      break;
    }
    r->method = req_methods[ix];
    r->round = rd;
    r->index = i;
    rd->refs++;
    r->next = c->reqs;
    if (c->reqs)
      c->reqs->prev = r;
    c->reqs = r;
    r->in_cb = true;
    rv = c->cbs.req[ix](c, r, params, c->user_data);
    r->in_cb = false;
    if (r->answered)
      req_unlink_free(c, r); /* unrefs: never the last (setup holds one) */
  }
  if (rv != 0)
    rd->failed = true;
  {
    int urv = round_unref(c, rd);
    return rv != 0 ? rv : urv;
  }
nomem:
  round_free(c, rd);
  return ACP_ERR_NOMEM;
}

/* MARK: - 2026-07-28: list cache (Private) */

/* Entries one client keeps (mcp.h: List caching). */
#define MCP_CACHE_MAX 256

static bool cache_key_is(const mcp_cache_entry *e, const char *method,
                         const char *params, size_t params_len) {
  if (e->method != method || e->params_len != params_len)
    return false;
  return params_len == 0 || memcmp(e->params, params, params_len) == 0;
}

static void cache_entry_free(acp_mcp_client *c, mcp_cache_entry *e) {
  acp__free(&c->mem, e->params);
  acp__free(&c->mem, e->result);
  acp__free(&c->mem, e);
}

static void cache_drop(acp_mcp_client *c, acp_mcp_list which) {
  mcp_cache_entry **pp = &c->cache;

  while (*pp != NULL) {
    mcp_cache_entry *e = *pp;
    bool drop = e->method == list_methods[which] ||
                (which == ACP_MCP_LIST_RESOURCES &&
                 e->method == list_methods[ACP_MCP_LIST_RESOURCE_TEMPLATES]);
    if (drop) {
      *pp = e->next;
      cache_entry_free(c, e);
    } else {
      pp = &e->next;
    }
  }
}

void acp_mcp_client_cache_clear(acp_mcp_client *c) {
  if (c == NULL)
    return;
  while (c->cache) {
    mcp_cache_entry *e = c->cache;
    c->cache = e->next;
    cache_entry_free(c, e);
  }
}

static int cache_store(acp_mcp_client *c, const mcp_pending *p,
                       const acp_rpc_msg *msg) {
  const acp_json_val *ttl = ACP__OBJ_GETL(msg->result, "ttlMs");
  const acp_json_val *scope = ACP__OBJ_GETL(msg->result, "cacheScope");
  mcp_cache_entry **pp;
  mcp_cache_entry *e;
  const char *raw;
  size_t n;
  int64_t ms;

  if (is_input_required(msg->result) || acp_json_get_int64(ttl, &ms) != 0 ||
      ms <= 0 || scope == NULL ||
      !(ACP_JSON_STR_EQ_LIT(scope, "private") ||
        ACP_JSON_STR_EQ_LIT(scope, "public")))
    return 0;
  {
    /* The entry it replaces goes, so do expired ones; past
     * MCP_CACHE_MAX the oldest (the list's tail) goes too: the server
     * picks the cursors (a walk of one list may store thousands of pages)
     * and the TTLs, so without a bound the cache grows with what it says. */
    size_t count = 0;
    mcp_cache_entry **last = NULL;
    for (pp = &c->cache; *pp != NULL;) {
      e = *pp;
      if (e->expires <= c->now_ms ||
          cache_key_is(e, p->cache_method, p->rq_params, p->rq_params_len)) {
        *pp = e->next;
        cache_entry_free(c, e);
        continue;
      }
      count++;
      last = pp;
      pp = &e->next;
    }
    if (count >= MCP_CACHE_MAX && last != NULL) {
      e = *last;
      *last = NULL;
      cache_entry_free(c, e);
    }
  }
  e = acp__calloc(&c->mem, 1, sizeof(*e));
  if (e == NULL)
    return ACP_ERR_NOMEM;
  raw = acp_json_raw(msg->result, &n);
  e->method = p->cache_method;
  e->result = acp__strndup(&c->mem, raw, n);
  e->result_len = n;
  if (p->rq_params_len > 0)
    e->params = acp__strndup(&c->mem, p->rq_params, p->rq_params_len);
  e->params_len = p->rq_params_len;
  e->expires = add_sat(c->now_ms, (uint64_t)ms);
  if (e->result == NULL || (p->rq_params_len > 0 && e->params == NULL)) {
    cache_entry_free(c, e);
    return ACP_ERR_NOMEM;
  }
  e->next = c->cache;
  c->cache = e;
  return 0;
}

/* Answer `p` from a fresh cache entry (the callback runs now). *hit tells
 * whether it did; p is consumed then. */
static int cache_lookup(acp_mcp_client *c, mcp_pending *p, const char *method,
                        const char *params, size_t params_len, bool *hit) {
  mcp_cache_entry **pp;
  mcp_cache_entry *e = NULL;
  acp_json_doc *doc = NULL;
  acp_rpc_msg m;
  char *copy;
  int rv;

  *hit = false;
  for (pp = &c->cache; *pp != NULL;) {
    if ((*pp)->expires <= c->now_ms) {
      mcp_cache_entry *old = *pp;
      *pp = old->next;
      cache_entry_free(c, old);
      continue;
    }
    if (cache_key_is(*pp, method, params, params_len)) {
      e = *pp;
      break;
    }
    pp = &(*pp)->next;
  }
  if (e == NULL)
    return 0;
  /* The callback may clear the cache: deliver from a copy. */
  copy = acp__strndup(&c->mem, e->result, e->result_len);
  if (copy == NULL)
    return ACP_ERR_NOMEM;
  rv = acp_json_doc_new(&doc, &c->mem);
  if (rv == 0)
    rv = acp_json_doc_parse(doc, copy, e->result_len, NULL);
  if (rv != 0) {
    acp_json_doc_free(doc);
    acp__free(&c->mem, copy);
    return rv;
  }
  memset(&m, 0, sizeof(m));
  m.kind = ACP_RPC_RESPONSE;
  m.result = acp_json_doc_root(doc);
  m.root = m.result;
  m.doc = doc;
  m.raw = copy;
  m.raw_len = e->result_len;
  m.local = true;
  if (method == list_methods[ACP_MCP_LIST_TOOLS]) {
    /* Stored without its rejected tools: nothing is filtered out again,
     * but the page counts in a walk of the list. */
    char *json = NULL;
    size_t len = 0;
    rv = hdr_filter_tools(c, &m, hdr_page_kind(c, p), &json, &len);
    acp__free(&c->mem, json);
    if (rv != 0) {
      acp_json_doc_free(doc);
      acp__free(&c->mem, copy);
      return rv;
    }
  }
  *hit = true;
  rv = deliver(c, p, 0, &m);
  pending_free(c, p);
  acp_json_doc_free(doc);
  acp__free(&c->mem, copy);
  if (rv == 0 || rv == ACP_ERR_PAUSE)
    return 0;
  return acp_is_fatal(rv) ? rv : ACP_ERR_CALLBACK_FAILURE;
}

/* MARK: - 2026-07-28 (Public) */

int acp_mcp_client_set_mode(acp_mcp_client *c, acp_mcp_client_mode mode) {
  if (c == NULL || (int)mode < 0 || (int)mode > (int)ACP_MCP_CLIENT_STATELESS)
    return ACP_ERR_INVALID_ARGUMENT;
  if (c->init_sent)
    return ACP_ERR_INVALID_STATE;
  c->mode = mode;
  return 0;
}

int acp_mcp_client_set_protocol(acp_mcp_client *c, const char *version) {
  acp_mcp_version v;

  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (c->init_sent)
    return ACP_ERR_INVALID_STATE;
  if (version == NULL || strcmp(version, "auto") == 0) {
    c->asked = ACP_MCP_VERSION_LATEST;
    c->mode = ACP_MCP_CLIENT_AUTO;
    return 0;
  }
  if (strcmp(version, ACP_MCP_PROTOCOL_2026_07_28) == 0) {
    c->mode = ACP_MCP_CLIENT_STATELESS;
    return 0;
  }
  v = acp_mcp_version_parse(version, strlen(version));
  if (v == ACP_MCP_VERSION_UNKNOWN)
    return ACP_ERR_INVALID_ARGUMENT;
  c->asked = v;
  c->mode = ACP_MCP_CLIENT_STATEFUL;
  return 0;
}

acp_mcp_era acp_mcp_client_era(const acp_mcp_client *c) {
  return c ? c->era : ACP_MCP_ERA_NONE;
}

const char *acp_mcp_client_protocol(const acp_mcp_client *c) {
  return c ? c->protocol : NULL;
}

/* MARK: - 2026-07-28: x-mcp-header (Private) */

/*
 * A tool whose inputSchema marks parameters with `x-mcp-header` has them
 * mirrored into `Mcp-Param-{name}` headers by a Streamable HTTP transport.
 * tools/list results (stateless era) are checked here: a tool with an
 * invalid annotation is removed from the result the caller sees (the spec
 * says such tools MUST be excluded), and the schema of every tool with a
 * valid one is kept, by name, for acp_mcp_client_param_headers().
 */

#define HDR_MAX 64
#define HDR_DEPTH 32

typedef struct hdr_scan {
  const char *names[HDR_MAX];
  size_t lens[HDR_MAX];
  size_t n;
  bool bad;
} hdr_scan;

static bool is_tchar(unsigned char ch) {
  return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
         (ch >= 'A' && ch <= 'Z') || (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool ascii_case_eq(const char *a, const char *b, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    unsigned char x = (unsigned char)a[i];
    unsigned char y = (unsigned char)b[i];
    if (x >= 'A' && x <= 'Z')
      x = (unsigned char)(x + 32);
    if (y >= 'A' && y <= 'Z')
      y = (unsigned char)(y + 32);
    if (x != y)
      return false;
  }
  return true;
}

/* One x-mcp-header value on a property schema `prop`. */
static void hdr_check(hdr_scan *hs, acp_json_doc *doc, const acp_json_val *prop,
                      const acp_json_val *h) {
  const acp_json_val *type = ACP__OBJ_GETL(prop, "type");
  const char *s;
  size_t n;
  size_t i;

  if (acp_json_type_of(h) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, h, &s, &n) != 0 || n == 0 || hs->n == HDR_MAX) {
    hs->bad = true;
    return;
  }
  for (i = 0; i < n; i++)
    if (!is_tchar((unsigned char)s[i])) {
      hs->bad = true;
      return;
    }
  if (!(ACP_JSON_STR_EQ_LIT(type, "string") ||
        ACP_JSON_STR_EQ_LIT(type, "integer") ||
        ACP_JSON_STR_EQ_LIT(type, "boolean"))) {
    hs->bad = true;
    return;
  }
  for (i = 0; i < hs->n; i++)
    if (hs->lens[i] == n && ascii_case_eq(hs->names[i], s, n)) {
      hs->bad = true;
      return;
    }
  /* Names point into the document (or its unescape space, which is not
   * reused while the same document is read). Keep the raw span instead to
   * stay safe: the raw string is compared after decoding only for escapes,
   * which a valid token never has. */
  hs->names[hs->n] = acp_json_str_raw(h, &hs->lens[hs->n]);
  hs->n++;
}

/* Walk a schema value: `reach` when its `properties` are statically
 * reachable from the root, `is_prop` when it is itself such a property. */
static void hdr_walk(hdr_scan *hs, acp_json_doc *doc, const acp_json_val *v,
                     bool reach, bool is_prop, int depth) {
  const acp_json_val *k;

  if (hs->bad)
    return;
  if (depth > HDR_DEPTH) {
    hs->bad = true;
    return;
  }
  if (acp_json_type_of(v) == ACP_JSON_ARRAY) {
    for (k = acp_json_child(v); k != NULL; k = acp_json_next(k))
      hdr_walk(hs, doc, k, false, false, depth + 1);
    return;
  }
  if (acp_json_type_of(v) != ACP_JSON_OBJECT)
    return;
  for (k = acp_json_child(v); k != NULL && !hs->bad;
       k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *m = acp_json_next(k);
    if (ACP_JSON_STR_EQ_LIT(k, "x-mcp-header")) {
      if (!is_prop)
        hs->bad = true;
      else
        hdr_check(hs, doc, v, m);
    } else if (ACP_JSON_STR_EQ_LIT(k, "properties") && reach &&
               acp_json_type_of(m) == ACP_JSON_OBJECT) {
      const acp_json_val *p;
      for (p = acp_json_child(m); p != NULL;
           p = acp_json_next(acp_json_next(p)))
        hdr_walk(hs, doc, acp_json_next(p), true, true, depth + 1);
    } else {
      hdr_walk(hs, doc, m, false, false, depth + 1);
    }
  }
}

typedef struct mcp_hdr_tool {
  struct mcp_hdr_tool *next; /* in its bucket */
  uint64_t hash;
  unsigned walk; /* the last walk of the list that saw it */
  char *name;
  size_t name_len;
  char *schema; /* raw JSON of the inputSchema */
  size_t schema_len;
} mcp_hdr_tool;

static uint64_t hdr_hash(const acp_mcp_client *c, const char *name, size_t n) {
  return acp__fnv1a(c->hdr_seed, name, n);
}

/* The link that holds the tool named `name`, or the empty link at its
 * bucket's end. */
static mcp_hdr_tool **hdr_link(acp_mcp_client *c, const char *name, size_t n,
                               uint64_t h) {
  mcp_hdr_tool **pp;

  if (c->hdr_nbuckets == 0)
    return NULL;
  pp = &c->hdr_buckets[h & (c->hdr_nbuckets - 1)];
  while (*pp != NULL && !((*pp)->hash == h && (*pp)->name_len == n &&
                          memcmp((*pp)->name, name, n) == 0))
    pp = &(*pp)->next;
#ifdef ACP__SELFCHECK
  {
    /* Fuzz builds: the count is the tools', a name is kept at most once,
     * and the bucket search finds it when a search of all does. */
    size_t i, count = 0, same = 0;
    for (i = 0; i < c->hdr_nbuckets; i++)
      for (const mcp_hdr_tool *t = c->hdr_buckets[i]; t != NULL; t = t->next) {
        count++;
        same += t->name_len == n && memcmp(t->name, name, n) == 0;
      }
    if (count != c->hdr_count || same != (*pp != NULL))
      abort();
  }
#endif
  return pp;
}

static void hdr_tool_free(acp_mcp_client *c, mcp_hdr_tool *t) {
  acp__free(&c->mem, t->name);
  acp__free(&c->mem, t->schema);
  acp__free(&c->mem, t);
}

static void hdr_tool_forget(acp_mcp_client *c, const char *name, size_t n) {
  mcp_hdr_tool **pp = hdr_link(c, name, n, hdr_hash(c, name, n));
  mcp_hdr_tool *t = pp != NULL ? *pp : NULL;

  if (t == NULL)
    return;
  *pp = t->next;
  hdr_tool_free(c, t);
  c->hdr_count--;
}

/* Keep `t` (its name not kept yet), growing the buckets to one a tool. */
static int hdr_tool_add(acp_mcp_client *c, mcp_hdr_tool *t) {
  mcp_hdr_tool **pp;

  if (c->hdr_count >= c->hdr_nbuckets) {
    size_t nb = c->hdr_nbuckets ? c->hdr_nbuckets * 2 : 16;
    mcp_hdr_tool **b;
    size_t i;

    if (nb > SIZE_MAX / sizeof(*b))
      return ACP_ERR_NOMEM;
    b = acp__calloc(&c->mem, nb, sizeof(*b));
    if (b == NULL)
      return ACP_ERR_NOMEM;
    for (i = 0; i < c->hdr_nbuckets; i++)
      while (c->hdr_buckets[i] != NULL) {
        mcp_hdr_tool *m = c->hdr_buckets[i];
        c->hdr_buckets[i] = m->next;
        m->next = b[m->hash & (nb - 1)];
        b[m->hash & (nb - 1)] = m;
      }
    acp__free(&c->mem, c->hdr_buckets);
    c->hdr_buckets = b;
    c->hdr_nbuckets = nb;
  }
  pp = &c->hdr_buckets[t->hash & (c->hdr_nbuckets - 1)];
  t->next = *pp;
  *pp = t;
  c->hdr_count++;
  return 0;
}

/* Forget the tools the current walk did not see (`all`: every tool). */
static void hdr_tools_prune(acp_mcp_client *c, bool all) {
  size_t i;

  for (i = 0; i < c->hdr_nbuckets; i++) {
    mcp_hdr_tool **pp = &c->hdr_buckets[i];
    while (*pp != NULL) {
      mcp_hdr_tool *t = *pp;
      if (all || t->walk != c->hdr_walk) {
        *pp = t->next;
        hdr_tool_free(c, t);
        c->hdr_count--;
      } else {
        pp = &t->next;
      }
    }
  }
}

static void hdr_tools_free(acp_mcp_client *c) {
  hdr_tools_prune(c, true);
  acp__free(&c->mem, c->hdr_buckets);
  c->hdr_buckets = NULL;
  c->hdr_nbuckets = 0;
  acp__free(&c->mem, c->hdr_next);
  c->hdr_next = NULL;
  c->hdr_walking = false;
}

/*
 * Where a tools/list page stands in a walk of the server's list: the
 * first page (asked without a cursor), the next page of the walk under way
 * (asked with the cursor its last page gave), or another page. A walk
 * that reaches its last page names every tool the server has, so what it
 * did not see is gone from the server; anything else only adds (a page
 * asked with another cursor, one whose request cannot be read). Pages the
 * cache answers take part too: a walk may be half from the cache.
 */
enum { HDR_PAGE_OTHER, HDR_PAGE_FIRST, HDR_PAGE_NEXT };

static int hdr_page_kind(acp_mcp_client *c, const mcp_pending *p) {
  acp_json_doc *doc = NULL;
  const acp_json_val *cur;
  const char *s;
  size_t n;
  int kind = HDR_PAGE_OTHER;

  if (p->rq_params == NULL)
    return HDR_PAGE_FIRST;
  if (acp_json_doc_new(&doc, &c->mem) != 0 ||
      acp_json_doc_parse(doc, p->rq_params, p->rq_params_len, NULL) != 0) {
    acp_json_doc_free(doc);
    return HDR_PAGE_OTHER;
  }
  cur = ACP__OBJ_GETL(acp_json_doc_root(doc), "cursor");
  if (cur == NULL)
    kind = HDR_PAGE_FIRST;
  else if (c->hdr_walking && acp_json_type_of(cur) == ACP_JSON_STRING &&
           acp_json_doc_str(doc, cur, &s, &n) == 0 && n == c->hdr_next_len &&
           memcmp(s, c->hdr_next, n) == 0)
    kind = HDR_PAGE_NEXT;
  acp_json_doc_free(doc);
  return kind;
}

/* After a page of the walk: keep the cursor that continues it, or at its
 * last page forget what it did not see. */
static int hdr_walk_step(acp_mcp_client *c, const acp_rpc_msg *msg) {
  const acp_json_val *next = ACP__OBJ_GETL(msg->result, "nextCursor");
  const char *s;
  size_t n;

  acp__free(&c->mem, c->hdr_next);
  c->hdr_next = NULL;
  c->hdr_walking = false;
  if (next == NULL || acp_json_type_of(next) == ACP_JSON_NULL) {
    hdr_tools_prune(c, false);
    return 0;
  }
  if (acp_json_type_of(next) != ACP_JSON_STRING ||
      acp_json_doc_str(msg->doc, next, &s, &n) != 0)
    return 0; /* not a cursor: the walk ends here, forgetting nothing */
  c->hdr_next = acp__strndup(&c->mem, s, n);
  if (c->hdr_next == NULL)
    return ACP_ERR_NOMEM;
  c->hdr_next_len = n;
  c->hdr_walking = true;
  return 0;
}

/*
 * Check the tools of a tools/list page (`kind`: its place in a walk) and
 * keep the annotated ones. *out_json is set (heap, the caller frees) to
 * the result without the rejected tools when there were any, else NULL.
 */
static int hdr_filter_tools(acp_mcp_client *c, const acp_rpc_msg *msg, int kind,
                            char **out_json, size_t *out_len) {
  const acp_json_val *tools = ACP__OBJ_GETL(msg->result, "tools");
  const acp_json_val *t;
  const acp_json_val *k;
  acp_json_writer *w = NULL;
  size_t rejected = 0;
  int rv = 0;

  *out_json = NULL;
  *out_len = 0;
  if (acp_json_type_of(tools) != ACP_JSON_ARRAY) {
    if (kind != HDR_PAGE_OTHER)
      c->hdr_walking = false; /* not a page: no walk goes through it */
    return 0;
  }
  if (kind == HDR_PAGE_FIRST) {
    c->hdr_walk++;
    c->hdr_walking = true;
  }
  for (t = acp_json_child(tools); t != NULL; t = acp_json_next(t)) {
    const acp_json_val *nv = ACP__OBJ_GETL(t, "name");
    const acp_json_val *schema = ACP__OBJ_GETL(t, "inputSchema");
    const char *name;
    size_t nn;
    hdr_scan hs;

    if (acp_json_type_of(nv) != ACP_JSON_STRING ||
        acp_json_doc_str(msg->doc, nv, &name, &nn) != 0)
      continue;
    memset(&hs, 0, sizeof(hs));
    hdr_walk(&hs, msg->doc, schema, true, false, 0);
    hdr_tool_forget(c, name, nn);
    if (hs.bad) {
      rejected++;
    } else if (hs.n > 0) {
      mcp_hdr_tool *e = acp__calloc(&c->mem, 1, sizeof(*e));
      const char *raw;
      size_t rn;

      if (e == NULL)
        return ACP_ERR_NOMEM;
      raw = acp_json_raw(schema, &rn);
      e->name = acp__strndup(&c->mem, name, nn);
      e->schema = acp__strndup(&c->mem, raw, rn);
      e->name_len = nn;
      e->schema_len = rn;
      e->hash = hdr_hash(c, name, nn);
      e->walk = c->hdr_walk;
      if (e->name == NULL || e->schema == NULL ||
          (rv = hdr_tool_add(c, e)) != 0) {
        hdr_tool_free(c, e);
        return ACP_ERR_NOMEM;
      }
    }
  }
  if (kind != HDR_PAGE_OTHER) {
    rv = hdr_walk_step(c, msg);
    if (rv != 0)
      return rv;
  }
  if (rejected == 0)
    return 0;
  rv = acp_json_writer_new(&w, 0, &c->mem);
  if (rv != 0)
    return rv;
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(msg->result); k;
       k = acp_json_next(acp_json_next(k))) {
    acp__json_write_key_val(w, k);
    if (acp_json_next(k) != tools) {
      acp_json_write_val(w, acp_json_next(k));
      continue;
    }
    acp_json_write_arr_begin(w);
    for (t = acp_json_child(tools); t != NULL; t = acp_json_next(t)) {
      hdr_scan hs;

      memset(&hs, 0, sizeof(hs));
      hdr_walk(&hs, msg->doc, ACP__OBJ_GETL(t, "inputSchema"), true, false, 0);
      if (!hs.bad)
        acp_json_write_val(w, t);
    }
    acp_json_write_arr_end(w);
  }
  rv = acp_json_write_obj_end(w);
  if (rv == 0) {
    const char *d = acp_json_writer_data(w, out_len);
    *out_json = acp__strndup(&c->mem, d, *out_len);
    if (*out_json == NULL)
      rv = ACP_ERR_NOMEM;
  }
  acp_json_writer_free(w);
  return rv;
}

/* Emit the headers of `schema`'s annotated properties found in `args`. */
static int hdr_emit(acp_json_doc *sdoc, const acp_json_val *schema,
                    acp_json_doc *adoc, const acp_json_val *args,
                    acp_mcp_param_header_cb cb, void *ud, int depth) {
  const acp_json_val *props = ACP__OBJ_GETL(schema, "properties");
  const acp_json_val *p;
  int rv;

  if (depth > HDR_DEPTH || acp_json_type_of(args) != ACP_JSON_OBJECT)
    return 0;
  for (p = acp_json_child(props); p != NULL;
       p = acp_json_next(acp_json_next(p))) {
    const acp_json_val *ps = acp_json_next(p);
    const acp_json_val *h = ACP__OBJ_GETL(ps, "x-mcp-header");
    const acp_json_val *v = NULL;
    const acp_json_val *a;
    const char *pn;
    size_t pnl;
    char num[32];
    const char *val = NULL;
    size_t vl = 0;

    if (acp_json_doc_str(sdoc, p, &pn, &pnl) != 0)
      continue;
    for (a = acp_json_child(args); a != NULL;
         a = acp_json_next(acp_json_next(a)))
      if (acp_json_str_eq(a, pn, pnl))
        v = acp_json_next(a);
    if (v == NULL)
      continue;
    if (h == NULL) {
      rv = hdr_emit(sdoc, ps, adoc, v, cb, ud, depth + 1);
      if (rv != 0)
        return rv;
      continue;
    }
    if (acp_json_type_of(v) == ACP_JSON_STRING) {
      if (acp_json_doc_str(adoc, v, &val, &vl) != 0)
        continue;
    } else if (acp_json_type_of(v) == ACP_JSON_BOOL) {
      bool bv = false;
      acp_json_get_bool(v, &bv);
      val = bv ? "true" : "false";
      vl = bv ? 4 : 5;
    } else {
      int64_t iv;
      const int64_t max_safe = ((int64_t)1 << 53) - 1;
      if (acp_json_get_int64(v, &iv) != 0 || iv > max_safe || iv < -max_safe)
        continue;
      vl = (size_t)snprintf(num, sizeof(num), "%lld", (long long)iv);
      val = num;
    }
    {
      const char *hn;
      size_t hnl;
      if (acp_json_doc_str(sdoc, h, &hn, &hnl) != 0)
        continue;
      rv = cb(hn, hnl, val, vl, ud);
      if (rv != 0)
        return rv;
    }
  }
  return 0;
}

/* MARK: - 2026-07-28: x-mcp-header (Public) */

int acp_mcp_client_param_headers(acp_mcp_client *c, acp_json_doc *doc,
                                 const acp_json_val *params,
                                 acp_mcp_param_header_cb cb, void *user_data) {
  const acp_json_val *nv = ACP__OBJ_GETL(params, "name");
  const mcp_hdr_tool *t;
  acp_json_doc *sdoc = NULL;
  const char *name;
  size_t nn;
  int rv;

  if (c == NULL || doc == NULL || cb == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (acp_json_type_of(nv) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, nv, &name, &nn) != 0)
    return 0;
  {
    mcp_hdr_tool **pp = hdr_link(c, name, nn, hdr_hash(c, name, nn));
    t = pp != NULL ? *pp : NULL;
  }
  if (t == NULL)
    return 0;
  rv = acp_json_doc_new(&sdoc, &c->mem);
  if (rv == 0)
    rv = acp_json_doc_parse(sdoc, t->schema, t->schema_len, NULL);
  if (rv == 0)
    rv = hdr_emit(sdoc, acp_json_doc_root(sdoc), doc,
                  ACP__OBJ_GETL(params, "arguments"), cb, user_data, 0);
  acp_json_doc_free(sdoc);
  return rv;
}
