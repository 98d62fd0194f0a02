/*
 * The MCP server: a transport-free registry (acp_mcp_server) and one
 * connection object per peer (acp_mcp_conn) on an rpc session. See
 * include/acp/mcp.h for the wire contract.
 */
#include <math.h>
#include <stdio.h>

#include "json/json_int.h"
#include "mcp_int.h"

/* MARK: - Types (Private) */

enum { K_TOOL = 0, K_RESOURCE = 1, K_TEMPLATE = 2, K_PROMPT = 3, K_COUNT };
enum { CALL_TOOL = 1, CALL_READ, CALL_PROMPT, CALL_COMPLETE };

/* One registered tool, resource, template or prompt. */
typedef struct mcp_item {
  char *key; /* name, uri or uri template */
  size_t key_len;
  char *json; /* the serialized list entry */
  size_t json_len;
  union {
    acp_mcp_tool_cb tool;
    acp_mcp_read_cb read;
    acp_mcp_prompt_cb prompt;
  } cb;
  acp_mcp_template_list_cb lister;
  void *ud;
  char *required; /* prompts: required argument names, NUL-separated */
  size_t nrequired;
  bool has_cache; /* resources, templates: own read hints */
  int64_t ttl;
  int scope;
  int task_support; /* tools: acp_mcp_task_support */
  size_t exec_off;  /* tools: where `execution` starts in json, or 0 */
} mcp_item;

/* A CacheableResult hint. */
typedef struct mcp_cache {
  int64_t ttl;
  int scope;
} mcp_cache;

enum { CACHE_COUNT = ACP_MCP_CACHE_READ + 1 };

/*
 * How the request being dispatched is served: by the conn's negotiated
 * stateful revision, or statelessly at 2026-07-28 with what its `_meta`
 * says. Copied into each call it opens.
 */
typedef struct mcp_req {
  bool stateless;
  bool cap_sampling;
  bool cap_elicitation;
  bool cap_roots;
  unsigned elicit_modes; /* ELICIT_FORM | ELICIT_URL */
  int log_level;         /* stateless: -1 when the request set no level */
  mcp_cache hint; /* stateless: ttl -1 when the result is not cacheable */
  const acp_json_val *caps;
} mcp_req;

/*
 * A registry list in registration order (what the list methods page
 * through) with an index by key: open addressing, linear probing, each
 * slot 0 (empty) or a position in v plus one; tab_cap is a power of two at
 * least twice n. A tools/call finds its tool in a few instructions
 * whatever the number of tools (a walk over the 36 tools of
 * `--everything` took ~500 instructions a call for the last one).
 */
typedef struct mcp_vec {
  mcp_item **v;
  size_t n;
  size_t cap;
  uint32_t *tab;
  size_t tab_cap;
} mcp_vec;

struct acp_mcp_server {
  acp_mem mem;
  char *name;
  char *version;
  char *title;
  char *instructions;
  mcp_vec lists[K_COUNT];
  size_t page_size;
  bool logging;
  bool subscribe;
  unsigned declared;
  acp_mcp_complete_cb complete_cb;
  void *complete_ud;
  acp_mcp_conn_cb on_initialized;
  acp_mcp_conn_notification_cb on_notification;
  acp_mcp_conn *conns;
  mcp_cache cache[CACHE_COUNT];
  uint8_t state_key[64]; /* HMAC key of requestState */
  size_t state_key_len;  /* 0: no multi round-trip results */
  /* Tasks (see MARK: - Tasks). */
  struct mcp_task *tasks;
  size_t ntasks;
  size_t max_tasks; /* 0: tasks off */
  uint64_t task_ttl;
  uint64_t task_poll;
  uint64_t task_seq;
  acp_mcp_conn *task_conn; /* holds the calls of running tasks */
  uint64_t now_ms;         /* the latest time a conn was given */
  int64_t epoch_ms;        /* Unix time in ms at now_ms 0 */
  /* One finished call's block kept for the next call (see call_new()). */
  struct acp_mcp_call *spare_call;
  void *user_data;
};

/* An input request of a stateless call whose response the retry carried:
 * its callback runs once the handler returned. */
typedef struct mcp_ready {
  struct mcp_ready *next;
  acp_mcp_call_response_cb cb;
  void *ud;
  const acp_json_val *result;
  acp_json_doc *doc;
} mcp_ready;

/*
 * An open 2026-07-28 subscriptions/listen request: it is never answered
 * while open, and its notifications carry its id (raw JSON) as
 * `_meta["io.modelcontextprotocol/subscriptionId"]`.
 */
typedef struct mcp_sub {
  struct mcp_sub *next, *prev; /* c->listens */
  uint64_t handle;
  char *id;
  size_t id_len;
  bool lists[K_COUNT]; /* templates follow resources */
  char **uris;
  size_t nuris;
  char **tasks; /* 2026 tasks extension: task ids whose status it gets */
  size_t ntasks;
} mcp_sub;

/* A server->client request issued from a call. */
typedef struct mcp_out {
  struct mcp_out *next;
  struct mcp_out *prev;
  acp_mcp_conn *conn;
  acp_mcp_call *call;
  acp_mcp_call_response_cb cb;
  void *ud;
  int64_t id;
  bool cancelling;
  bool for_task; /* a 2025 task's input request (see task_v1_request()) */
} mcp_out;

struct acp_mcp_call {
  acp_mcp_call *next;
  acp_mcp_call *prev;
  acp_mcp_conn *conn;
  uint64_t handle;
  const char *method;
  int kind;
  char *name;
  char *token; /* raw JSON of _meta.progressToken, or NULL */
  size_t token_len;
  double last_progress;
  bool sent_progress;
  char *vars; /* "name\0value\0" pairs */
  size_t nvars;
  const acp_rpc_msg *msg;
  bool in_cb;
  bool answered;
  bool cancelled;
  int refs;
  acp_mcp_cancel_cb on_cancel;
  void *cancel_ud;
  mcp_req req; /* req.caps is NULL: see caps below */
  char *caps;  /* stateless: raw clientCapabilities from _meta */
  size_t caps_len;
  /* Stateless multi round-trip (see stateless_input()). */
  acp_json_doc *sdoc;            /* the verified requestState */
  char *sbytes;                  /* ... its decoded bytes */
  const acp_json_val *prior;     /* its responses, or NULL */
  const acp_json_val *responses; /* inputResponses (during dispatch) */
  acp_json_doc *rdoc;            /* ... and their document */
  mcp_ready *ready;              /* answered, callbacks pending */
  mcp_ready **ready_tail;
  acp__buf inputs; /* "key":{...} members of inputRequests */
  size_t ninputs;
  unsigned seq;          /* unnamed input requests */
  bool task_ok;          /* the request may become a task */
  struct mcp_task *task; /* the task this call runs, or NULL */
  void *user_data;
  size_t block_cap; /* bytes of this block; the name may follow the struct */
};

struct acp_mcp_conn {
  acp_mcp_server *srv;
  acp_mcp_conn *next;
  acp_mcp_conn *prev;
  acp_rpc_session *rpc;
  acp_json_writer *w;  /* responses */
  acp_json_writer *nw; /* notifications */
  acp__buf tmp;
  acp__buf text_out; /* acp_mcp_call_respond_text()'s result */
  acp_mcp_version version;
  bool answered_init;
  bool initialized;
  char *client_caps;
  size_t client_caps_len;
  char *client_info;
  size_t client_info_len;
  bool cap_sampling;
  bool cap_elicitation;
  bool cap_roots;
  unsigned elicit_modes;
  int log_level;
  char **subs;
  size_t nsubs;
  size_t subs_cap;
  acp_mcp_call *calls;
  mcp_out *outs;
  mcp_sub *listens;
  size_t nlistens;     /* at most ACP_MCP_MAX_LISTENS */
  mcp_req req;         /* the request being dispatched */
  acp_json_doc *rdoc;  /* stateless: a result being rewritten */
  acp_json_writer *mw; /* stateless: the rewritten result */
  acp_json_writer *iw; /* stateless: serverInfo */
  uint64_t now_ms;
  void *user_data;
};

struct acp_mcp_resource_list {
  acp_mcp_server *srv;
  acp_json_writer *w;
  size_t offset;
  size_t limit; /* 0: no limit */
  size_t index;
  size_t emitted;
};

static const char *const list_keys[K_COUNT] = {"tools", "resources",
                                               "resourceTemplates", "prompts"};
static const char cursor_tags[K_COUNT] = {'t', 'r', 'T', 'p'};

static void tasks_free_all(acp_mcp_server *s);

enum { ELICIT_FORM = 1, ELICIT_URL = 2 };

/* The elicitation modes a client's capabilities declare: `elicitation: {}`
 * means form only (2025-11-25 keeps the older clients' meaning). */
static unsigned elicit_modes_of(const acp_json_val *caps) {
  const acp_json_val *e = ACP__OBJ_GETL(caps, "elicitation");
  unsigned m = 0;

  if (e == NULL)
    return 0;
  if (ACP__OBJ_GETL(e, "form") != NULL)
    m |= ELICIT_FORM;
  if (ACP__OBJ_GETL(e, "url") != NULL)
    m |= ELICIT_URL;
  return m ? m : ELICIT_FORM;
}

/* Whether the client takes an elicitation/create with these params: its
 * `mode` ("form" when absent) must be one it declared. 1 yes, 0 no, or
 * ACP_ERR_NOMEM. */
static int elicit_allowed(const acp_mem *m, unsigned modes, const char *params,
                          size_t len) {
  acp_json_doc *doc = NULL;
  const acp_json_val *mode;
  unsigned want = ELICIT_FORM;
  int rv;

  if (params != NULL) {
    rv = acp_json_doc_new(&doc, m);
    if (rv != 0)
      return rv;
    rv = acp_json_doc_parse(doc, params, len, NULL);
    if (rv == ACP_ERR_NOMEM) {
      acp_json_doc_free(doc);
      return rv;
    }
    mode = rv == 0 ? ACP__OBJ_GETL(acp_json_doc_root(doc), "mode") : NULL;
    if (mode != NULL && ACP_JSON_STR_EQ_LIT(mode, "url"))
      want = ELICIT_URL;
    else if (mode != NULL && !ACP_JSON_STR_EQ_LIT(mode, "form"))
      want = 0; /* an unknown mode: nobody declared it */
    acp_json_doc_free(doc);
  }
  return (modes & want) != 0;
}

/* MARK: - Registry (Public) */

static void item_free(const acp_mem *m, mcp_item *it) {
  if (it == NULL)
    return;
  acp__free(m, it->key);
  acp__free(m, it->json);
  acp__free(m, it->required);
  acp__free(m, it);
}

int acp_mcp_server_new(acp_mcp_server **out, const char *name,
                       const char *version, void *user_data,
                       const acp_mem *mem) {
  acp_mcp_server *s = NULL;
  acp_mem m;
  int rv = ACP_ERR_NOMEM;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (name == NULL || version == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, mem);
  s = acp__calloc(&m, 1, sizeof(*s));
  if (s == NULL)
    return ACP_ERR_NOMEM;
  s->mem = m;
  s->subscribe = true;
  s->user_data = user_data;
  s->name = acp__mcp_dupz(&s->mem, name, &rv);
  if (s->name == NULL)
    goto cleanup;
  s->version = acp__mcp_dupz(&s->mem, version, &rv);
  if (s->version == NULL)
    goto cleanup;
  *out = s;
  return 0;
cleanup:
  acp_mcp_server_free(s);
  return ACP_ERR_NOMEM;
}

void acp_mcp_server_free(acp_mcp_server *s) {
  int k;
  size_t i;

  if (s == NULL)
    return;
  while (s->conns)
    acp_mcp_conn_free(s->conns);
  tasks_free_all(s);
  acp__free(&s->mem, s->spare_call);
  for (k = 0; k < K_COUNT; k++) {
    for (i = 0; i < s->lists[k].n; i++)
      item_free(&s->mem, s->lists[k].v[i]);
    acp__free(&s->mem, s->lists[k].v);
    acp__free(&s->mem, s->lists[k].tab);
  }
  acp__free(&s->mem, s->name);
  acp__free(&s->mem, s->version);
  acp__free(&s->mem, s->title);
  acp__free(&s->mem, s->instructions);
  acp__free(&s->mem, s);
}

void *acp_mcp_server_get_user_data(const acp_mcp_server *s) {
  return s ? s->user_data : NULL;
}

static int set_str(acp_mcp_server *s, char **slot, const char *v) {
  char *p;
  int rv;

  if (s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  p = acp__mcp_dupz(&s->mem, v, &rv);
  if (rv != 0)
    return rv;
  acp__free(&s->mem, *slot);
  *slot = p;
  return 0;
}

int acp_mcp_server_set_title(acp_mcp_server *s, const char *title) {
  return set_str(s, s ? &s->title : NULL, title);
}

int acp_mcp_server_set_instructions(acp_mcp_server *s, const char *text) {
  return set_str(s, s ? &s->instructions : NULL, text);
}

void acp_mcp_server_set_page_size(acp_mcp_server *s, size_t n) {
  if (s)
    s->page_size = n;
}

void acp_mcp_server_set_logging(acp_mcp_server *s, int on) {
  if (s)
    s->logging = on != 0;
}

void acp_mcp_server_set_subscribe(acp_mcp_server *s, int on) {
  if (s)
    s->subscribe = on != 0;
}

void acp_mcp_server_declare(acp_mcp_server *s, unsigned caps) {
  if (s)
    s->declared |= caps;
}

void acp_mcp_server_set_completion(acp_mcp_server *s, acp_mcp_complete_cb cb,
                                   void *user_data) {
  if (s) {
    s->complete_cb = cb;
    s->complete_ud = user_data;
  }
}

void acp_mcp_server_set_on_initialized(acp_mcp_server *s, acp_mcp_conn_cb cb) {
  if (s)
    s->on_initialized = cb;
}

void acp_mcp_server_set_on_notification(acp_mcp_server *s,
                                        acp_mcp_conn_notification_cb cb) {
  if (s)
    s->on_notification = cb;
}

/* Keys are the application's names and URIs; any spread will do. */
static size_t key_hash(const char *key, size_t len) {
  return (size_t)acp__fnv1a(ACP__FNV_SEED, key, len);
}

static void tab_put(uint32_t *tab, size_t cap, const mcp_item *it, size_t pos) {
  size_t i = key_hash(it->key, it->key_len) & (cap - 1);

  while (tab[i] != 0)
    i = (i + 1) & (cap - 1);
  tab[i] = (uint32_t)pos + 1;
}

/* Index v->v[0..n) again into v->tab (same capacity: no allocation). */
static void tab_fill(mcp_vec *v) {
  size_t i;

  memset(v->tab, 0, v->tab_cap * sizeof(*v->tab));
  for (i = 0; i < v->n; i++)
    tab_put(v->tab, v->tab_cap, v->v[i], i);
}

static mcp_item *vec_find(const mcp_vec *v, const char *key, size_t len,
                          size_t *idx) {
  size_t i;

  if (v->n == 0)
    return NULL;
  for (i = key_hash(key, len) & (v->tab_cap - 1); v->tab[i] != 0;
       i = (i + 1) & (v->tab_cap - 1)) {
    mcp_item *it = v->v[v->tab[i] - 1];
    if (it->key_len == len && memcmp(it->key, key, len) == 0) {
      if (idx)
        *idx = v->tab[i] - 1;
      return it;
    }
  }
  return NULL;
}

static mcp_item *vec_find_val(const mcp_vec *v, const acp_json_val *key) {
  const char *raw;
  size_t n;
  size_t i;

  if (acp_json_type_of(key) != ACP_JSON_STRING)
    return NULL;
  if (!acp_json_str_has_escapes(key)) {
    raw = acp_json_raw(key, &n);
    return vec_find(v, raw + 1, n - 2, NULL);
  }
  /* A name written with escapes: rare, compared decoded, one by one. */
  for (i = 0; i < v->n; i++) {
    if (acp_json_str_eq(key, v->v[i]->key, v->v[i]->key_len))
      return v->v[i];
  }
  return NULL;
}

static int vec_push(acp_mcp_server *s, mcp_vec *v, mcp_item *it) {
  if (v->n == v->cap) {
    size_t ncap = v->cap ? v->cap * 2 : 8;
    mcp_item **p = acp__realloc(&s->mem, v->v, ncap * sizeof(*p));

    if (p == NULL)
      return ACP_ERR_NOMEM;
    v->v = p;
    v->cap = ncap;
  }
  if ((v->n + 1) * 2 > v->tab_cap) {
    size_t ncap = v->tab_cap ? v->tab_cap * 2 : 16;
    uint32_t *t = acp__calloc(&s->mem, ncap, sizeof(*t));
    if (t == NULL)
      return ACP_ERR_NOMEM;
    acp__free(&s->mem, v->tab);
    v->tab = t;
    v->tab_cap = ncap;
    tab_fill(v);
  }
  tab_put(v->tab, v->tab_cap, it, v->n);
  v->v[v->n++] = it;
  return 0;
}

/* A JSON member of a definition: valid JSON whose first byte is `open`
 * ('{' or '['). */
static bool json_member_ok(const char *json, char open) {
  const char *p = json;

  if (json == NULL)
    return true;
  if (acp_json_validate(json, strlen(json), NULL) != 0)
    return false;
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
    p++;
  return *p == open;
}

static void w_opt_str(acp_json_writer *w, const char *key, const char *v) {
  if (v == NULL)
    return;
  acp_json_write_keyz(w, key);
  acp_json_write_strz(w, v);
}

static void w_opt_raw(acp_json_writer *w, const char *key, const char *v) {
  if (v == NULL)
    return;
  acp_json_write_keyz(w, key);
  acp_json_write_raw(w, v, strlen(v));
}

/* Finish an item: copy the writer's bytes and the key, then append. */
static int item_add(acp_mcp_server *s, int kind, acp_json_writer *w,
                    const char *key, mcp_item *tmpl) {
  mcp_item *it = NULL;
  const char *data;
  size_t len;
  int rv;

  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
  data = acp_json_writer_data(w, &len);
  it = acp__calloc(&s->mem, 1, sizeof(*it));
  if (it == NULL)
    return ACP_ERR_NOMEM;
  *it = *tmpl;
  it->key_len = strlen(key);
  it->key = acp__strndup(&s->mem, key, it->key_len);
  it->json = acp__strndup(&s->mem, data, len);
  it->json_len = len;
  if (it->key == NULL || it->json == NULL) {
    it->required = NULL; /* still owned by the caller on failure */
    item_free(&s->mem, it);
    return ACP_ERR_NOMEM;
  }
  rv = vec_push(s, &s->lists[kind], it);
  if (rv != 0) {
    it->required = NULL;
    item_free(&s->mem, it);
  }
  return rv;
}

int acp_mcp_server_add_tool(acp_mcp_server *s, const acp_mcp_tool_def *d) {
  acp_json_writer *w = NULL;
  mcp_item tmpl;
  int rv;

  if (s == NULL || d == NULL || d->version != ACP_MCP_DEF_VERSION ||
      d->name == NULL || d->handler == NULL ||
      !json_member_ok(d->input_schema, '{') ||
      !json_member_ok(d->output_schema, '{') ||
      !json_member_ok(d->annotations, '{') || !json_member_ok(d->icons, '[') ||
      !json_member_ok(d->meta, '{'))
    return ACP_ERR_INVALID_ARGUMENT;
  if (vec_find(&s->lists[K_TOOL], d->name, strlen(d->name), NULL))
    return ACP_ERR_INVALID_STATE;
  rv = acp_json_writer_new(&w, 0, &s->mem);
  if (rv != 0)
    return rv;
  acp_json_write_obj_begin(w);
  w_opt_str(w, "name", d->name);
  w_opt_str(w, "title", d->title);
  w_opt_str(w, "description", d->description);
  ACP__W_KEYL(w, "inputSchema");
  if (d->input_schema)
    acp_json_write_raw(w, d->input_schema, strlen(d->input_schema));
  else
    acp_json_write_raw(w, "{\"type\":\"object\"}", 17);
  w_opt_raw(w, "outputSchema", d->output_schema);
  w_opt_raw(w, "annotations", d->annotations);
  w_opt_raw(w, "icons", d->icons);
  w_opt_raw(w, "_meta", d->meta);
  memset(&tmpl, 0, sizeof(tmpl));
  tmpl.cb.tool = d->handler;
  tmpl.ud = d->user_data;
  rv = item_add(s, K_TOOL, w, d->name, &tmpl);
  acp_json_writer_free(w);
  return rv;
}

int acp_mcp_server_add_resource(acp_mcp_server *s,
                                const acp_mcp_resource_def *d) {
  acp_json_writer *w = NULL;
  mcp_item tmpl;
  int rv;

  if (s == NULL || d == NULL || d->version != ACP_MCP_DEF_VERSION ||
      d->uri == NULL || d->name == NULL || d->handler == NULL ||
      !json_member_ok(d->annotations, '{') || !json_member_ok(d->icons, '['))
    return ACP_ERR_INVALID_ARGUMENT;
  if (vec_find(&s->lists[K_RESOURCE], d->uri, strlen(d->uri), NULL))
    return ACP_ERR_INVALID_STATE;
  rv = acp_json_writer_new(&w, 0, &s->mem);
  if (rv != 0)
    return rv;
  acp_json_write_obj_begin(w);
  w_opt_str(w, "uri", d->uri);
  w_opt_str(w, "name", d->name);
  w_opt_str(w, "title", d->title);
  w_opt_str(w, "description", d->description);
  w_opt_str(w, "mimeType", d->mime_type);
  if (d->size >= 0) {
    ACP__W_KEYL(w, "size");
    acp_json_write_int(w, d->size);
  }
  w_opt_raw(w, "annotations", d->annotations);
  w_opt_raw(w, "icons", d->icons);
  memset(&tmpl, 0, sizeof(tmpl));
  tmpl.cb.read = d->handler;
  tmpl.ud = d->user_data;
  rv = item_add(s, K_RESOURCE, w, d->uri, &tmpl);
  acp_json_writer_free(w);
  return rv;
}

int acp_mcp_server_add_template(acp_mcp_server *s,
                                const acp_mcp_template_def *d) {
  acp_json_writer *w = NULL;
  mcp_item tmpl;
  int rv;

  if (s == NULL || d == NULL || d->version != ACP_MCP_DEF_VERSION ||
      d->uri_template == NULL || d->name == NULL || d->handler == NULL ||
      !json_member_ok(d->annotations, '{') || !json_member_ok(d->icons, '['))
    return ACP_ERR_INVALID_ARGUMENT;
  rv = acp_mcp_uri_template_match(d->uri_template, strlen(d->uri_template), "",
                                  0, NULL, NULL, 0, NULL);
  if (rv < 0)
    return rv;
  if (vec_find(&s->lists[K_TEMPLATE], d->uri_template, strlen(d->uri_template),
               NULL))
    return ACP_ERR_INVALID_STATE;
  rv = acp_json_writer_new(&w, 0, &s->mem);
  if (rv != 0)
    return rv;
  acp_json_write_obj_begin(w);
  w_opt_str(w, "uriTemplate", d->uri_template);
  w_opt_str(w, "name", d->name);
  w_opt_str(w, "title", d->title);
  w_opt_str(w, "description", d->description);
  w_opt_str(w, "mimeType", d->mime_type);
  w_opt_raw(w, "annotations", d->annotations);
  w_opt_raw(w, "icons", d->icons);
  memset(&tmpl, 0, sizeof(tmpl));
  tmpl.cb.read = d->handler;
  tmpl.lister = d->lister;
  tmpl.ud = d->user_data;
  rv = item_add(s, K_TEMPLATE, w, d->uri_template, &tmpl);
  acp_json_writer_free(w);
  return rv;
}

/* Collect the names of required prompt arguments ("a\0b\0"). */
static int prompt_required(acp_mcp_server *s, const char *args, char **out,
                           size_t *count) {
  acp_json_doc *doc = NULL;
  const acp_json_val *e;
  acp__buf b;
  int rv;

  *out = NULL;
  *count = 0;
  if (args == NULL)
    return 0;
  acp__buf_init(&b, &s->mem, 0);
  rv = acp_json_doc_new(&doc, &s->mem);
  if (rv != 0)
    return rv;
  rv = acp_json_doc_parse(doc, args, strlen(args), NULL);
  if (rv != 0 || acp_json_type_of(acp_json_doc_root(doc)) != ACP_JSON_ARRAY) {
    rv = rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
    goto cleanup;
  }
  for (e = acp_json_child(acp_json_doc_root(doc)); e; e = acp_json_next(e)) {
    const acp_json_val *name = ACP__OBJ_GETL(e, "name");
    const acp_json_val *req = ACP__OBJ_GETL(e, "required");
    const char *p;
    size_t n;
    bool on = false;

    if (acp_json_type_of(name) != ACP_JSON_STRING ||
        (req != NULL && acp_json_get_bool(req, &on) != 0)) {
      rv = ACP_ERR_INVALID_ARGUMENT;
      goto cleanup;
    }
    if (!on)
      continue;
    rv = acp_json_doc_str(doc, name, &p, &n);
    if (rv == 0)
      rv = acp__buf_append(&b, p, n);
    if (rv == 0)
      rv = acp__buf_putc(&b, '\0');
    if (rv != 0)
      goto cleanup;
    (*count)++;
  }
  if (b.len > 0) {
    *out = acp__strndup(&s->mem, b.data, b.len);
    if (*out == NULL)
      rv = ACP_ERR_NOMEM;
  }
cleanup:
  acp__buf_dispose(&b);
  acp_json_doc_free(doc);
  return rv;
}

int acp_mcp_server_add_prompt(acp_mcp_server *s, const acp_mcp_prompt_def *d) {
  acp_json_writer *w = NULL;
  mcp_item tmpl;
  int rv;

  if (s == NULL || d == NULL || d->version != ACP_MCP_DEF_VERSION ||
      d->name == NULL || d->handler == NULL ||
      !json_member_ok(d->arguments, '[') || !json_member_ok(d->icons, '['))
    return ACP_ERR_INVALID_ARGUMENT;
  if (vec_find(&s->lists[K_PROMPT], d->name, strlen(d->name), NULL))
    return ACP_ERR_INVALID_STATE;
  memset(&tmpl, 0, sizeof(tmpl));
  rv = prompt_required(s, d->arguments, &tmpl.required, &tmpl.nrequired);
  if (rv != 0)
    return rv;
  rv = acp_json_writer_new(&w, 0, &s->mem);
  if (rv != 0) {
    acp__free(&s->mem, tmpl.required);
    return rv;
  }
  acp_json_write_obj_begin(w);
  w_opt_str(w, "name", d->name);
  w_opt_str(w, "title", d->title);
  w_opt_str(w, "description", d->description);
  w_opt_raw(w, "arguments", d->arguments);
  w_opt_raw(w, "icons", d->icons);
  tmpl.cb.prompt = d->handler;
  tmpl.ud = d->user_data;
  rv = item_add(s, K_PROMPT, w, d->name, &tmpl);
  if (rv != 0)
    acp__free(&s->mem, tmpl.required);
  acp_json_writer_free(w);
  return rv;
}

static int vec_remove(acp_mcp_server *s, int kind, const char *key) {
  mcp_vec *v;
  size_t idx;

  if (s == NULL || key == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  v = &s->lists[kind];
  if (vec_find(v, key, strlen(key), &idx) == NULL)
    return ACP_ERR_NOT_FOUND;
  item_free(&s->mem, v->v[idx]);
  memmove(v->v + idx, v->v + idx + 1, (v->n - idx - 1) * sizeof(*v->v));
  v->n--;
  /* The positions after idx moved: index them again (removal is rare). */
  tab_fill(v);
  return 0;
}

int acp_mcp_server_remove_tool(acp_mcp_server *s, const char *name) {
  return vec_remove(s, K_TOOL, name);
}
int acp_mcp_server_remove_resource(acp_mcp_server *s, const char *uri) {
  return vec_remove(s, K_RESOURCE, uri);
}
int acp_mcp_server_remove_template(acp_mcp_server *s, const char *tpl) {
  return vec_remove(s, K_TEMPLATE, tpl);
}
int acp_mcp_server_remove_prompt(acp_mcp_server *s, const char *name) {
  return vec_remove(s, K_PROMPT, name);
}

static bool offers(const acp_mcp_server *s, int kind) {
  switch (kind) {
  case K_TOOL:
    return s->lists[K_TOOL].n > 0 || (s->declared & ACP_MCP_CAP_TOOLS);
  case K_RESOURCE:
  case K_TEMPLATE:
    return s->lists[K_RESOURCE].n > 0 || s->lists[K_TEMPLATE].n > 0 ||
           (s->declared & ACP_MCP_CAP_RESOURCES);
  default:
    return s->lists[K_PROMPT].n > 0 || (s->declared & ACP_MCP_CAP_PROMPTS);
  }
}

const char *acp_mcp_server_tool_json(const acp_mcp_server *s, const char *name,
                                     size_t name_len, size_t *len) {
  mcp_item *it = NULL;

  if (len)
    *len = 0;
  if (s != NULL && name != NULL)
    it = vec_find(&s->lists[K_TOOL], name, name_len, NULL);
  if (it == NULL)
    return NULL;
  if (len)
    *len = it->json_len;
  return it->json;
}

int acp_mcp_server_set_cache(acp_mcp_server *s, acp_mcp_cache_target target,
                             const char *key, uint64_t ttl_ms,
                             acp_mcp_cache_scope scope) {
  mcp_item *it;

  if (s == NULL || (int)target < 0 || (int)target >= CACHE_COUNT ||
      (scope != ACP_MCP_CACHE_PRIVATE && scope != ACP_MCP_CACHE_PUBLIC) ||
      ttl_ms > (uint64_t)INT64_MAX ||
      (key != NULL && target != ACP_MCP_CACHE_READ))
    return ACP_ERR_INVALID_ARGUMENT;
  if (key == NULL) {
    s->cache[target].ttl = (int64_t)ttl_ms;
    s->cache[target].scope = (int)scope;
    return 0;
  }
  it = vec_find(&s->lists[K_RESOURCE], key, strlen(key), NULL);
  if (it == NULL)
    it = vec_find(&s->lists[K_TEMPLATE], key, strlen(key), NULL);
  if (it == NULL)
    return ACP_ERR_NOT_FOUND;
  it->has_cache = true;
  it->ttl = (int64_t)ttl_ms;
  it->scope = (int)scope;
  return 0;
}

/* MARK: - Broadcasts (Public) */

/* An open listen's tag on its request (acp__rpc_set_tag()): its address
 * with the low bit set, which a call's tag (its block, allocated with
 * malloc's alignment) never has; a cancel's handle so says which it is. */
#define SUB_TAG(sub) ((void *)((uintptr_t)(sub) | 1u))

static void listen_link(acp_mcp_conn *c, mcp_sub *sub) {
  c->nlistens++;
  sub->prev = NULL;
  sub->next = c->listens;
  if (c->listens)
    c->listens->prev = sub;
  c->listens = sub;
  acp__rpc_set_tag(c->rpc, sub->handle, SUB_TAG(sub));
}

static void listen_unlink(acp_mcp_conn *c, mcp_sub *sub) {
  c->nlistens--;
  if (sub->prev)
    sub->prev->next = sub->next;
  else
    c->listens = sub->next;
  if (sub->next)
    sub->next->prev = sub->prev;
  sub->next = sub->prev = NULL;
  acp__rpc_set_tag(c->rpc, sub->handle, NULL);
}

static void sub_free(const acp_mem *m, mcp_sub *sub) {
  size_t i;
  for (i = 0; i < sub->nuris; i++)
    acp__free(m, sub->uris[i]);
  acp__free(m, sub->uris);
  for (i = 0; i < sub->ntasks; i++)
    acp__free(m, sub->tasks[i]);
  acp__free(m, sub->tasks);
  acp__free(m, sub->id);
  acp__free(m, sub);
}

/* Begin the params of a notification on `sub`: its _meta tag. The caller
 * adds its members and closes the object. */
static void sub_params_begin(acp_json_writer *w, const mcp_sub *sub) {
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "_meta");
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, ACP_MCP_META_SUBSCRIPTION_ID);
  acp_json_write_raw(w, sub->id, sub->id_len);
  acp_json_write_obj_end(w);
}

static int sub_notify(acp_mcp_conn *c, const char *method, const char *uri) {
  const char *p;
  size_t n;
  int rv;

  if (uri != NULL) {
    ACP__W_KEYL(c->nw, "uri");
    acp_json_write_strz(c->nw, uri);
  }
  rv = acp_json_write_obj_end(c->nw);
  if (rv != 0)
    return rv;
  p = acp_json_writer_data(c->nw, &n);
  return acp_rpc_session_notify(c->rpc, method, strlen(method), p, n);
}

int acp_mcp_server_list_changed(acp_mcp_server *s, acp_mcp_list which) {
  static const char *const methods[K_COUNT] = {
      "notifications/tools/list_changed",
      "notifications/resources/list_changed",
      "notifications/resources/list_changed",
      "notifications/prompts/list_changed"};
  acp_mcp_conn *c;
  int first = 0;

  if (s == NULL || (int)which < 0 || (int)which >= K_COUNT)
    return ACP_ERR_INVALID_ARGUMENT;
  for (c = s->conns; c != NULL; c = c->next) {
    int rv;
    mcp_sub *sub;

    for (sub = c->listens; sub != NULL; sub = sub->next) {
      if (!sub->lists[which])
        continue;
      sub_params_begin(c->nw, sub);
      rv = sub_notify(c, methods[which], NULL);
      if (rv != 0 && first == 0)
        first = rv;
    }
    if (!c->answered_init)
      continue;
    rv = acp_rpc_session_notify(c->rpc, methods[which], strlen(methods[which]),
                                NULL, 0);
    if (rv != 0 && first == 0)
      first = rv;
  }
  return first;
}

int acp_mcp_conn_is_subscribed(const acp_mcp_conn *c, const char *uri) {
  size_t i;

  if (c == NULL || uri == NULL)
    return 0;
  for (i = 0; i < c->nsubs; i++)
    if (strcmp(c->subs[i], uri) == 0)
      return 1;
  return 0;
}

int acp_mcp_server_resource_updated(acp_mcp_server *s, const char *uri) {
  acp_mcp_conn *c;
  int first = 0;

  if (s == NULL || uri == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  for (c = s->conns; c != NULL; c = c->next) {
    const char *p;
    size_t n;
    int rv;
    mcp_sub *sub;

    for (sub = c->listens; sub != NULL; sub = sub->next) {
      size_t i;
      for (i = 0; i < sub->nuris; i++)
        if (strcmp(sub->uris[i], uri) == 0)
          break;
      if (i == sub->nuris)
        continue;
      sub_params_begin(c->nw, sub);
      rv = sub_notify(c, "notifications/resources/updated", uri);
      if (rv != 0 && first == 0)
        first = rv;
    }
    if (!acp_mcp_conn_is_subscribed(c, uri))
      continue;
    acp_json_writer_reset(c->nw);
    acp_json_write_obj_begin(c->nw);
    ACP__W_KEYL(c->nw, "uri");
    acp_json_write_strz(c->nw, uri);
    rv = acp_json_write_obj_end(c->nw);
    if (rv == 0) {
      p = acp_json_writer_data(c->nw, &n);
      rv = acp_rpc_session_notify(c->rpc, "notifications/resources/updated", 31,
                                  p, n);
    }
    if (rv != 0 && first == 0)
      first = rv;
  }
  return first;
}

int acp_mcp_server_log(acp_mcp_server *s, acp_mcp_log_level level,
                       const char *logger, const char *data, size_t len) {
  acp_mcp_conn *c;
  int first = 0;

  if (s == NULL || acp_mcp_log_level_str(level) == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  for (c = s->conns; c != NULL; c = c->next) {
    int rv = acp_mcp_conn_log(c, level, logger, data, len);
    if (rv != 0 && first == 0)
      first = rv;
  }
  return first;
}

int acp_mcp_resource_list_add(acp_mcp_resource_list *l, const char *uri,
                              const char *name, const char *mime_type,
                              const char *description) {
  acp_json_writer *w;

  if (l == NULL || uri == NULL || name == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = l->w;
  if (l->index++ < l->offset || (l->limit && l->emitted >= l->limit))
    return 0;
  l->emitted++;
  acp_json_write_obj_begin(w);
  w_opt_str(w, "uri", uri);
  w_opt_str(w, "name", name);
  w_opt_str(w, "mimeType", mime_type);
  w_opt_str(w, "description", description);
  return acp_json_write_obj_end(w);
}

/* MARK: - Calls (Private) */

/* Room every call block gets at least, so that the spare fits the next
 * call of a usual name (tool and prompt names are short). */
#define CALL_BLOCK_MIN (sizeof(acp_mcp_call) + 64)

/* Finish with a call's block: keep the larger of it and the spare. */
static void call_block_release(acp_mcp_server *s, acp_mcp_call *call) {
  if (s->spare_call == NULL || s->spare_call->block_cap < call->block_cap) {
    acp__free(&s->mem, s->spare_call);
    s->spare_call = call;
    return;
  }
  acp__free(&s->mem, call);
}

static void call_unlink_free(acp_mcp_call *call) {
  acp_mcp_conn *c = call->conn;
  const acp_mem *m = &c->srv->mem;

  /* Unanswered (the conn goes): a cancel must not find it. (Answered, its
   * tag went with its request's slot.) */
  if (!call->answered && acp__rpc_tag(c->rpc, call->handle) == call)
    acp__rpc_set_tag(c->rpc, call->handle, NULL);
  if (call->prev)
    call->prev->next = call->next;
  else
    c->calls = call->next;
  if (call->next)
    call->next->prev = call->prev;
  if (call->name != (char *)(call + 1))
    acp__free(m, call->name);
  acp__free(m, call->token);
  acp__free(m, call->vars);
  acp__free(m, call->caps);
  while (call->ready) {
    mcp_ready *r = call->ready;
    call->ready = r->next;
    acp__free(m, r);
  }
  acp__buf_dispose(&call->inputs);
  acp_json_doc_free(call->sdoc);
  acp__free(m, call->sbytes);
  call_block_release(c->srv, call);
}

static void call_maybe_free(acp_mcp_call *call) {
  if (call->answered && !call->in_cb && call->refs == 0)
    call_unlink_free(call);
}

/*
 * One block per call: the struct, then (when `name` is given) its name,
 * NUL-terminated. The server keeps one finished block for the next call
 * (the larger one when two are free), so a sequential call costs no
 * calloc/strndup/free/free (~500 instructions on glibc).
 */
static int call_new(acp_mcp_conn *c, const acp_rpc_msg *msg, const char *method,
                    int kind, const char *name, size_t name_len,
                    acp_mcp_call **out) {
  acp_mcp_server *s = c->srv;
  const acp_mem *m = &s->mem;
  acp_mcp_call *call;
  size_t need = sizeof(*call) + 1;
  const acp_json_val *meta;
  const acp_json_val *tok;

  *out = NULL;
  if (name != NULL) {
    if (name_len > SIZE_MAX - need)
      return ACP_ERR_NOMEM;
    need += name_len;
  }
  if (s->spare_call != NULL && s->spare_call->block_cap >= need) {
    call = s->spare_call;
    s->spare_call = NULL;
    need = call->block_cap;
    memset(call, 0, sizeof(*call));
  } else {
    if (need < CALL_BLOCK_MIN)
      need = CALL_BLOCK_MIN;
    call = acp__calloc(m, 1, need);
    if (call == NULL)
      return ACP_ERR_NOMEM;
  }
  call->block_cap = need;
  if (name != NULL) {
    call->name = (char *)(call + 1);
    if (name_len > 0)
      memcpy(call->name, name, name_len);
    call->name[name_len] = '\0';
  }
  call->conn = c;
  call->handle = msg->handle;
  call->method = method;
  call->kind = kind;
  call->req = c->req;
  call->req.caps = NULL;
  call->ready_tail = &call->ready;
  acp__buf_init(&call->inputs, m, 0);
  if (c->req.stateless && c->req.caps != NULL) {
    size_t n;
    const char *raw = acp_json_raw(c->req.caps, &n);
    call->caps = acp__strndup(m, raw, n);
    if (call->caps == NULL) {
      call_block_release(s, call);
      return ACP_ERR_NOMEM;
    }
    call->caps_len = n;
  }
  meta = ACP__OBJ_GETI(msg->params, "_meta");
  tok = ACP__OBJ_GETI(meta, "progressToken");
  if (acp_json_type_of(tok) == ACP_JSON_STRING ||
      acp_json_type_of(tok) == ACP_JSON_NUMBER) {
    size_t n;
    const char *raw = acp_json_raw(tok, &n);
    call->token = acp__strndup(m, raw, n);
    if (call->token == NULL) {
      acp__free(m, call->caps);
      call_block_release(s, call);
      return ACP_ERR_NOMEM;
    }
    call->token_len = n;
  }
  call->next = c->calls;
  if (c->calls)
    c->calls->prev = call;
  c->calls = call;
  acp__rpc_set_tag(c->rpc, call->handle, call); /* for conn_on_cancel */
  *out = call;
  return 0;
}

static int stateless_respond(acp_mcp_conn *c, uint64_t handle,
                             const char *result, size_t len,
                             const mcp_cache *hint);
static int task_start(acp_mcp_call *call);
static int task_finish(acp_mcp_call *call, bool is_error, const char *result,
                       size_t len, int64_t code, const char *message,
                       size_t message_len, const char *data, size_t dlen);
static int task_input(acp_mcp_call *call, const char *key, const char *method,
                      const char *params, size_t params_len,
                      acp_mcp_call_response_cb cb, void *user_data);
static void tasks_conn_gone(acp_mcp_conn *c);

static int call_answer(acp_mcp_call *call, bool is_error, const char *result,
                       size_t len, int64_t code, const char *message,
                       size_t message_len, const char *data, size_t dlen) {
  int rv;

  if (call == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (call->answered)
    return ACP_ERR_INVALID_STATE;
  /* A 2025 task-augmented request gets its task even when the handler
   * answers at once (the client waits for a CreateTaskResult). */
  if (call->task_ok && call->task == NULL && !call->req.stateless &&
      !call->cancelled) {
    rv = task_start(call);
    if (rv != 0)
      return rv;
  }
  if (call->task != NULL)
    return task_finish(call, is_error, result, len, code, message, message_len,
                       data, dlen);
  if (!call->cancelled) {
    if (is_error)
      rv = acp_rpc_session_respond_error(call->conn->rpc, call->handle, code,
                                         message, message_len, data, dlen);
    else if (call->req.stateless)
      rv = stateless_respond(call->conn, call->handle, result, len,
                             &call->req.hint);
    else
      rv = acp_rpc_session_respond(call->conn->rpc, call->handle, result, len);
    if (rv != 0)
      return rv;
  }
  call->answered = true;
  call_maybe_free(call);
  return 0;
}

/* MARK: - Calls (Public) */

acp_mcp_conn *acp_mcp_call_conn(const acp_mcp_call *call) {
  return call ? call->conn : NULL;
}

const acp_rpc_msg *acp_mcp_call_msg(const acp_mcp_call *call) {
  return call ? call->msg : NULL;
}

acp_json_doc *acp_mcp_call_doc(const acp_mcp_call *call) {
  return call && call->msg ? call->msg->doc : NULL;
}

const char *acp_mcp_call_method(const acp_mcp_call *call) {
  return call ? call->method : NULL;
}

const char *acp_mcp_call_name(const acp_mcp_call *call) {
  return call ? call->name : NULL;
}

int acp_mcp_call_uri_var(const acp_mcp_call *call, const char *name,
                         const char **value, size_t *len) {
  const char *p;
  size_t i;

  if (call == NULL || name == NULL || value == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  p = call->vars;
  for (i = 0; i < call->nvars; i++) {
    const char *v = p + strlen(p) + 1;
    if (strcmp(p, name) == 0) {
      *value = v;
      if (len)
        *len = strlen(v);
      return 0;
    }
    p = v + strlen(v) + 1;
  }
  return ACP_ERR_NOT_FOUND;
}

int acp_mcp_call_is_stateless(const acp_mcp_call *call) {
  return call && call->req.stateless ? 1 : 0;
}

const char *acp_mcp_call_client_capabilities(const acp_mcp_call *call,
                                             size_t *len) {
  if (call != NULL && call->req.stateless) {
    if (len)
      *len = call->caps_len;
    return call->caps;
  }
  return acp_mcp_conn_client_capabilities(call ? call->conn : NULL, len);
}

void acp_mcp_call_set_user_data(acp_mcp_call *call, void *ud) {
  if (call)
    call->user_data = ud;
}

void *acp_mcp_call_get_user_data(const acp_mcp_call *call) {
  return call ? call->user_data : NULL;
}

int acp_mcp_call_has_progress_token(const acp_mcp_call *call) {
  return call && call->token ? 1 : 0;
}

int acp_mcp_call_is_cancelled(const acp_mcp_call *call) {
  return call && call->cancelled ? 1 : 0;
}

void acp_mcp_call_set_on_cancel(acp_mcp_call *call, acp_mcp_cancel_cb cb,
                                void *user_data) {
  if (call) {
    call->on_cancel = cb;
    call->cancel_ud = user_data;
  }
}

int acp_mcp_call_respond_raw(acp_mcp_call *call, const char *result,
                             size_t len) {
  if (result == NULL) {
    result = "{}";
    len = 2;
  }
  return call_answer(call, false, result, len, 0, NULL, 0, NULL, 0);
}

int acp_mcp_call_respond_error(acp_mcp_call *call, int64_t code,
                               const char *message, const char *data,
                               size_t data_len) {
  if (message == NULL)
    message = "Error";
  return call_answer(call, true, NULL, 0, code, message, strlen(message), data,
                     data_len);
}

/* Respond with the conn's response writer; `rv` is its sticky error. */
static int respond_w(acp_mcp_call *call) {
  const char *p;
  size_t n;
  int rv = acp_json_writer_error(call->conn->w);

  if (rv != 0)
    return rv;
  p = acp_json_writer_data(call->conn->w, &n);
  return call_answer(call, false, p, n, 0, NULL, 0, NULL, 0);
}

static int respond_guard(acp_mcp_call *call, int kind) {
  if (call == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (call->answered || call->kind != kind)
    return ACP_ERR_INVALID_STATE;
  return 0;
}

int acp_mcp_call_respond_tool(acp_mcp_call *call, const char *content,
                              size_t content_len, const char *structured,
                              size_t structured_len, bool is_error) {
  acp_json_writer *w;
  int rv = respond_guard(call, CALL_TOOL);

  if (rv != 0)
    return rv;
  w = call->conn->w;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "content");
  if (content)
    acp_json_write_raw(w, content, content_len);
  else
    acp_json_write_raw(w, "[]", 2);
  if (structured) {
    ACP__W_KEYL(w, "structuredContent");
    acp_json_write_raw(w, structured, structured_len);
  }
  if (is_error) {
    ACP__W_KEYL(w, "isError");
    acp_json_write_bool(w, true);
  }
  acp_json_write_obj_end(w);
  return respond_w(call);
}

/* Append a string literal (its length known at compile time). */
#define APPEND_LIT(b, lit) acp__buf_append((b), "" lit "", sizeof(lit) - 1)

int acp_mcp_call_respond_text(acp_mcp_call *call, const char *text, size_t len,
                              bool is_error) {
  acp__buf *b;
  int rv = respond_guard(call, CALL_TOOL);

  if (rv != 0)
    return rv;
  if (text == NULL && len > 0)
    return ACP_ERR_INVALID_ARGUMENT;
  /* The bytes the JSON writer would write, from literals around the one
   * escaped string: the writer's keys and strings were ~1,500 instructions
   * of a short echo's answer. */
  b = &call->conn->text_out;
  acp__buf_clear(b);
  rv = APPEND_LIT(b, "{\"content\":[{\"type\":\"text\",\"text\":");
  if (rv == 0)
    rv = acp__json_escape_append(b, text ? text : "", len);
  if (rv == 0)
    rv =
        is_error ? APPEND_LIT(b, "}],\"isError\":true}") : APPEND_LIT(b, "}]}");
  if (rv == ACP_ERR_INVALID_STATE)
    rv = ACP_ERR_INVALID_ARGUMENT;
  if (rv != 0)
    return rv;
  return call_answer(call, false, b->data, b->len, 0, NULL, 0, NULL, 0);
}

int acp_mcp_call_respond_resource_text(acp_mcp_call *call, const char *uri,
                                       const char *mime_type, const char *text,
                                       size_t len) {
  acp_json_writer *w;
  int rv = respond_guard(call, CALL_READ);

  if (rv != 0)
    return rv;
  if (uri == NULL || (text == NULL && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  w = call->conn->w;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "contents");
  acp_json_write_arr_begin(w);
  acp_json_write_obj_begin(w);
  w_opt_str(w, "uri", uri);
  w_opt_str(w, "mimeType", mime_type);
  ACP__W_KEYL(w, "text");
  acp_json_write_str(w, text ? text : "", len);
  acp_json_write_obj_end(w);
  acp_json_write_arr_end(w);
  acp_json_write_obj_end(w);
  return respond_w(call);
}

int acp_mcp_call_respond_completion(acp_mcp_call *call,
                                    const char *const *values, size_t n,
                                    int64_t total, bool has_more) {
  acp_json_writer *w;
  size_t i;
  int rv = respond_guard(call, CALL_COMPLETE);

  if (rv != 0)
    return rv;
  if (values == NULL && n > 0)
    return ACP_ERR_INVALID_ARGUMENT;
  w = call->conn->w;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "completion");
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "values");
  acp_json_write_arr_begin(w);
  for (i = 0; i < n && i < 100; i++)
    acp_json_write_strz(w, values[i] ? values[i] : "");
  acp_json_write_arr_end(w);
  if (total >= 0) {
    ACP__W_KEYL(w, "total");
    acp_json_write_int(w, total);
  }
  ACP__W_KEYL(w, "hasMore");
  acp_json_write_bool(w, has_more || n > 100);
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  return respond_w(call);
}

int acp_mcp_call_progress(acp_mcp_call *call, double progress, double total,
                          const char *message) {
  acp_json_writer *w;
  const char *p;
  size_t n;
  int rv;

  if (call == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (call->answered && !call->cancelled)
    return ACP_ERR_INVALID_STATE;
  if (call->token == NULL || call->cancelled)
    return 0;
  if (!isfinite(progress) || (total >= 0 && !isfinite(total)) ||
      (call->sent_progress && !(progress > call->last_progress)))
    return ACP_ERR_INVALID_ARGUMENT;
  w = call->conn->nw;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "progressToken");
  acp_json_write_raw(w, call->token, call->token_len);
  ACP__W_KEYL(w, "progress");
  acp_json_write_double(w, progress);
  if (total >= 0) {
    ACP__W_KEYL(w, "total");
    acp_json_write_double(w, total);
  }
  w_opt_str(w, "message", message);
  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv;
  p = acp_json_writer_data(w, &n);
  rv = acp_rpc_session_notify(call->conn->rpc, "notifications/progress", 22, p,
                              n);
  if (rv != 0)
    return rv;
  call->sent_progress = true;
  call->last_progress = progress;
  return 0;
}

static int conn_log_send(acp_mcp_conn *c, acp_mcp_log_level level,
                         const char *logger, const char *data, size_t len);

int acp_mcp_call_log(acp_mcp_call *call, acp_mcp_log_level level,
                     const char *logger, const char *data, size_t len) {
  if (call == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!call->req.stateless)
    return acp_mcp_conn_log(call->conn, level, logger, data, len);
  /* 2026-07-28: only a request that set a level gets messages, at or above
   * it, on its own response stream. */
  if (acp_mcp_log_level_str(level) == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!call->conn->srv->logging || call->req.log_level < 0 ||
      (int)level < call->req.log_level || call->answered || call->cancelled)
    return 0;
  return conn_log_send(call->conn, level, logger, data, len);
}

/* MARK: - Server->client requests (Private) */

static void out_unlink(acp_mcp_conn *c, mcp_out *o) {
  if (o->prev)
    o->prev->next = o->next;
  else
    c->outs = o->next;
  if (o->next)
    o->next->prev = o->prev;
}

static void task_v1_input_done(acp_mcp_call *call);
static int task_v1_request(acp_mcp_call *call, const char *method,
                           const char *params, size_t params_len,
                           uint64_t timeout_ms, acp_mcp_call_response_cb cb,
                           void *user_data);

static int out_on_response(acp_rpc_session *rpc, const acp_rpc_msg *msg,
                           void *user_data) {
  mcp_out *o = user_data;
  acp_mcp_conn *c = o->conn;
  acp_mcp_call *call = o->call;
  int status = acp__mcp_status(msg);
  int rv = 0;

  ACP_UNUSED(rpc);
  out_unlink(c, o);
  if (o->for_task)
    task_v1_input_done(call);
  if (o->cb)
    rv = o->cb(call, status, msg, o->ud);
  acp__free(&c->srv->mem, o);
  call->refs--;
  call_maybe_free(call);
  return rv;
}

static int stateless_input(acp_mcp_call *call, const char *key,
                           const char *method, const char *params,
                           size_t params_len, acp_mcp_call_response_cb cb,
                           void *user_data);

int acp_mcp_call_request(acp_mcp_call *call, const char *method,
                         const char *params, size_t params_len,
                         uint64_t timeout_ms, acp_mcp_call_response_cb cb,
                         void *user_data) {
  return acp_mcp_call_request_named(call, NULL, method, params, params_len,
                                    timeout_ms, cb, user_data);
}

int acp_mcp_call_request_named(acp_mcp_call *call, const char *key,
                               const char *method, const char *params,
                               size_t params_len, uint64_t timeout_ms,
                               acp_mcp_call_response_cb cb, void *user_data) {
  acp_mcp_conn *c;
  mcp_out *o;
  int rv;

  if (call == NULL || method == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (call->answered || call->cancelled)
    return ACP_ERR_INVALID_STATE;
  c = call->conn;
  /* A 2025 task runs detached from its session: its requests go to the
   * session that made it, tied to it by related-task _meta. */
  if (call->task != NULL && !call->req.stateless)
    return task_v1_request(call, method, params, params_len, timeout_ms, cb,
                           user_data);
  /* 2026-07-28 has no server->client requests: the request becomes an
   * input request of a multi round-trip result. */
  if (call->req.stateless)
    return stateless_input(call, key, method, params, params_len, cb,
                           user_data);
  if ((strcmp(method, "sampling/createMessage") == 0 && !c->cap_sampling) ||
      (strcmp(method, "elicitation/create") == 0 && !c->cap_elicitation) ||
      (strcmp(method, "roots/list") == 0 && !c->cap_roots))
    return ACP_ERR_UNSUPPORTED;
  if (strcmp(method, "elicitation/create") == 0) {
    rv = elicit_allowed(&c->srv->mem, c->elicit_modes, params, params_len);
    if (rv != 1)
      return rv == 0 ? ACP_ERR_UNSUPPORTED : rv;
  }
  o = acp__calloc(&c->srv->mem, 1, sizeof(*o));
  if (o == NULL)
    return ACP_ERR_NOMEM;
  o->conn = c;
  o->call = call;
  o->cb = cb;
  o->ud = user_data;
  rv = acp_rpc_session_request(c->rpc, method, strlen(method), params,
                               params_len, timeout_ms, c->now_ms,
                               out_on_response, o, &o->id);
  if (rv != 0) {
    acp__free(&c->srv->mem, o);
    return rv;
  }
  o->next = c->outs;
  if (c->outs)
    c->outs->prev = o;
  c->outs = o;
  call->refs++;
  return 0;
}

int acp_mcp_call_create_message(acp_mcp_call *call, const char *params,
                                size_t params_len, uint64_t timeout_ms,
                                acp_mcp_call_response_cb cb, void *user_data) {
  return acp_mcp_call_request(call, "sampling/createMessage", params,
                              params_len, timeout_ms, cb, user_data);
}

int acp_mcp_call_elicit(acp_mcp_call *call, const char *params,
                        size_t params_len, uint64_t timeout_ms,
                        acp_mcp_call_response_cb cb, void *user_data) {
  return acp_mcp_call_request(call, "elicitation/create", params, params_len,
                              timeout_ms, cb, user_data);
}

int acp_mcp_call_list_roots(acp_mcp_call *call, uint64_t timeout_ms,
                            acp_mcp_call_response_cb cb, void *user_data) {
  return acp_mcp_call_request(call, "roots/list", NULL, 0, timeout_ms, cb,
                              user_data);
}

/* MARK: - Multi round-trip (Private) */

int acp_mcp_server_set_state_key(acp_mcp_server *s, const void *key,
                                 size_t len) {
  if (s == NULL || (key == NULL && len > 0) || (len > 0 && len < 16) ||
      len > sizeof(s->state_key))
    return ACP_ERR_INVALID_ARGUMENT;
  if (len > 0)
    memcpy(s->state_key, key, len);
  s->state_key_len = len;
  return 0;
}

/*
 * requestState is base64url(P) "." base64url(HMAC-SHA256(key, P)) with P
 * the JSON {"m": method, "n": tool or prompt name, "r": {key: response}}:
 * every response the request has gathered so far, so that a handler that
 * runs again on the next retry finds the answers of earlier rounds. The
 * name binds it to one tool; the MAC makes it opaque to forgery.
 */
static int state_write(acp_mcp_call *call, acp__buf *out) {
  acp_mcp_conn *c = call->conn;
  acp_json_writer *w = c->nw;
  const acp_json_val *k;
  uint8_t mac[32];
  const char *p;
  size_t n;
  int rv;

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "m");
  acp_json_write_strz(w, call->method);
  ACP__W_KEYL(w, "n");
  acp_json_write_strz(w, call->name ? call->name : "");
  ACP__W_KEYL(w, "r");
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(call->responses); k;
       k = acp_json_next(acp_json_next(k))) {
    acp__json_write_key_val(w, k);
    acp_json_write_val(w, acp_json_next(k));
  }
  for (k = acp_json_child(call->prior); k;
       k = acp_json_next(acp_json_next(k))) {
    size_t kn;
    const char *kr = acp_json_str_raw(k, &kn);
    if (acp_json_obj_get(call->responses, kr, kn) != NULL &&
        !acp_json_str_has_escapes(k))
      continue; /* the retry's answer wins */
    acp__json_write_key_val(w, k);
    acp_json_write_val(w, acp_json_next(k));
  }
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  rv = acp_json_writer_error(w);
  if (rv != 0)
    return rv;
  p = acp_json_writer_data(w, &n);
  acp__hmac_sha256(c->srv->state_key, c->srv->state_key_len, p, n, mac);
  rv = acp__b64_append(out, p, n, ACP__B64_URL);
  if (rv == 0)
    rv = acp__buf_putc(out, '.');
  if (rv == 0)
    rv = acp__b64_append(out, mac, sizeof(mac), ACP__B64_URL);
  return rv;
}

/* Check a retry's requestState for `method` / `name`; on success *doc
 * holds its payload. 1 when it is not ours (forged, altered, another
 * tool's), 0 when good, else a fatal code. */
static int state_verify(acp_mcp_conn *c, acp_json_doc *mdoc,
                        const acp_json_val *v, const char *method,
                        const char *name, acp_json_doc **doc, char **bytes) {
  acp_mcp_server *s = c->srv;
  acp__buf b;
  const char *p, *dot;
  size_t n;
  uint8_t mac[32];
  unsigned diff = 0;
  size_t i;
  int rv;

  *doc = NULL;
  *bytes = NULL;
  if (s->state_key_len == 0 || acp_json_type_of(v) != ACP_JSON_STRING)
    return 1;
  rv = acp_json_doc_str(mdoc, v, &p, &n);
  if (rv != 0)
    return rv;
  dot = memchr(p, '.', n);
  if (dot == NULL)
    return 1;
  acp__buf_init(&b, &s->mem, 0);
  rv = acp__b64_decode(&b, dot + 1, n - (size_t)(dot - p) - 1, ACP__B64_URL);
  if (rv == ACP_ERR_NOMEM || b.len != sizeof(mac)) {
    acp__buf_dispose(&b);
    return rv == ACP_ERR_NOMEM ? rv : 1;
  }
  memcpy(mac, b.data, sizeof(mac));
  acp__buf_clear(&b);
  rv = acp__b64_decode(&b, p, (size_t)(dot - p), ACP__B64_URL);
  if (rv != 0) {
    acp__buf_dispose(&b);
    return rv == ACP_ERR_NOMEM ? rv : 1;
  }
  {
    uint8_t want[32];
    acp__hmac_sha256(s->state_key, s->state_key_len, b.data ? b.data : "",
                     b.len, want);
    for (i = 0; i < sizeof(want); i++)
      diff |= (unsigned)(want[i] ^ mac[i]);
  }
  if (diff != 0) {
    acp__buf_dispose(&b);
    return 1;
  }
  /* The document points into the bytes: they live as long as it. */
  *bytes = acp__strndup(&s->mem, b.data ? b.data : "", b.len);
  n = b.len;
  acp__buf_dispose(&b);
  if (*bytes == NULL)
    return ACP_ERR_NOMEM;
  rv = acp_json_doc_new(doc, &s->mem);
  if (rv == 0)
    rv = acp_json_doc_parse(*doc, *bytes, n, NULL);
  if (rv == 0) {
    const acp_json_val *root = acp_json_doc_root(*doc);
    if (!acp_json_str_eq(ACP__OBJ_GETL(root, "m"), method, strlen(method)) ||
        !acp_json_str_eq(ACP__OBJ_GETL(root, "n"), name, strlen(name)) ||
        acp_json_type_of(ACP__OBJ_GETL(root, "r")) != ACP_JSON_OBJECT)
      rv = 1;
  } else if (rv != ACP_ERR_NOMEM) {
    rv = 1;
  }
  if (rv != 0) {
    acp_json_doc_free(*doc);
    *doc = NULL;
    acp__free(&s->mem, *bytes);
    *bytes = NULL;
  }
  return rv;
}

/* MARK: - Dispatch helpers (Private) */

/* Answer an error whose message is `prefix` followed by `detail`. */
static int reply_error(acp_mcp_conn *c, uint64_t handle, int64_t code,
                       const char *prefix, const char *detail,
                       size_t detail_len, const char *data, size_t dlen) {
  int rv;

  acp__buf_clear(&c->tmp);
  rv = acp__buf_append(&c->tmp, prefix, strlen(prefix));
  if (rv == 0 && detail)
    rv = acp__buf_append(&c->tmp, detail, detail_len);
  if (rv != 0)
    return rv;
  rv = acp_rpc_session_respond_error(c->rpc, handle, code, c->tmp.data,
                                     c->tmp.len, data, dlen);
  /* A name with invalid UTF-8 cannot reach here (the parser validated it),
   * and output limits are reported by the session; only NOMEM is fatal. */
  return rv == ACP_ERR_NOMEM ? rv : 0;
}

static int invalid_params(acp_mcp_conn *c, uint64_t handle, const char *why) {
  return reply_error(c, handle, ACP_RPC_INVALID_PARAMS, "Invalid params: ", why,
                     strlen(why), NULL, 0);
}

/* The serverInfo object of results and of initialize. */
static void w_server_info(acp_json_writer *w, const acp_mcp_server *s) {
  acp_json_write_obj_begin(w);
  w_opt_str(w, "name", s->name);
  w_opt_str(w, "title", s->title);
  w_opt_str(w, "version", s->version);
  acp_json_write_obj_end(w);
}

/*
 * Answer a stateless request with `result` (one JSON object) rewritten as a
 * 2026-07-28 result: resultType, the caching hints when `hint->ttl` >= 0,
 * serverInfo in `_meta`. A result that is not an object is sent as given
 * (the handler broke the contract; the client will say so).
 */
static int stateless_respond(acp_mcp_conn *c, uint64_t handle,
                             const char *result, size_t len,
                             const mcp_cache *hint) {
  static const char *const scopes[] = {"private", "public"};
  const char *info;
  const char *p;
  size_t info_len;
  size_t n;
  int rv;

  if (c->rdoc == NULL) {
    rv = acp_json_doc_new(&c->rdoc, &c->srv->mem);
    if (rv != 0)
      return rv;
  }
  rv = acp_json_doc_parse(c->rdoc, result, len, NULL);
  if (rv == ACP_ERR_NOMEM)
    return rv;
  if (rv != 0 ||
      acp_json_type_of(acp_json_doc_root(c->rdoc)) != ACP_JSON_OBJECT)
    return acp_rpc_session_respond(c->rpc, handle, result, len);
  acp_json_writer_reset(c->iw);
  w_server_info(c->iw, c->srv);
  rv = acp_json_writer_error(c->iw);
  if (rv != 0)
    return rv;
  info = acp_json_writer_data(c->iw, &info_len);
  acp_json_writer_reset(c->mw);
  rv = acp__mcp_era_write_stateless_result(
      c->mw, acp_json_doc_root(c->rdoc), info, info_len, hint->ttl,
      scopes[hint->scope == ACP_MCP_CACHE_PUBLIC]);
  if (rv == ACP_ERR_INVALID_ARGUMENT) /* a `_meta` that is not an object */
    return acp_rpc_session_respond(c->rpc, handle, result, len);
  if (rv != 0)
    return rv;
  p = acp_json_writer_data(c->mw, &n);
  return acp_rpc_session_respond(c->rpc, handle, p, n);
}

static int reply_w(acp_mcp_conn *c, uint64_t handle, acp_json_writer *w) {
  const char *p;
  size_t n;
  int rv = acp_json_writer_error(w);

  if (rv != 0)
    return rv;
  p = acp_json_writer_data(w, &n);
  if (c->req.stateless)
    rv = stateless_respond(c, handle, p, n, &c->req.hint);
  else
    rv = acp_rpc_session_respond(c->rpc, handle, p, n);
  return rv == ACP_ERR_NOMEM ? rv : 0;
}

/* MARK: - Multi round-trip: input requests (Private) */

/* Answer a stateless call with its input requests: an InputRequiredResult
 * carrying the signed requestState. */
static int input_required_answer(acp_mcp_call *call) {
  static const char head[] =
      "{\"resultType\":\"input_required\",\"inputRequests\":{";
  static const char mid[] = "},\"requestState\":\"";
  acp_mcp_conn *c = call->conn;
  acp__buf st;
  acp__buf out;
  int rv;

  acp__buf_init(&st, &c->srv->mem, 0);
  acp__buf_init(&out, &c->srv->mem, 0);
  rv = state_write(call, &st);
  if (rv == 0)
    rv = acp__buf_append(&out, head, sizeof(head) - 1);
  if (rv == 0 && call->inputs.len > 0)
    rv = acp__buf_append(&out, call->inputs.data, call->inputs.len);
  if (rv == 0)
    rv = acp__buf_append(&out, mid, sizeof(mid) - 1);
  if (rv == 0)
    rv = acp__buf_append(&out, st.data, st.len);
  if (rv == 0)
    rv = acp__buf_append(&out, "\"}", 2);
  if (rv == 0)
    rv = call_answer(call, false, out.data, out.len, 0, NULL, 0, NULL, 0);
  acp__buf_dispose(&st);
  acp__buf_dispose(&out);
  return rv;
}

/* {"method":M,"params":P}: one request the client is asked to run, as an
 * inputRequests member and as a running 2026 task's pending request (P is
 * raw JSON; none is {}). Errors stay in the writer. */
static void write_input_request(acp_json_writer *w, const char *method,
                                const char *params, size_t params_len) {
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "method");
  acp_json_write_strz(w, method);
  ACP__W_KEYL(w, "params");
  if (params != NULL)
    acp_json_write_raw(w, params, params_len);
  else
    acp_json_write_raw(w, "{}", 2);
  acp_json_write_obj_end(w);
}

/*
 * A server->client request from a stateless call. Its answer is looked up
 * by key in the retry's inputResponses, then in the requestState: found,
 * the callback runs once the handler returned (see stateless_drain());
 * not found, it joins the call's inputRequests, and the call is answered
 * input_required when the handler is done (at once when the handler
 * already returned). Unnamed requests are keyed by their order in the call
 * ("1", "2", ...), which a handler that runs the same way on each retry
 * keeps.
 */
static int stateless_input(acp_mcp_call *call, const char *key,
                           const char *method, const char *params,
                           size_t params_len, acp_mcp_call_response_cb cb,
                           void *user_data) {
  acp_mcp_conn *c = call->conn;
  const acp_json_val *found;
  acp_json_doc *doc;
  acp_json_writer *w = c->nw;
  char kbuf[24];
  const char *p;
  size_t n;
  int rv;

  if ((strcmp(method, "sampling/createMessage") == 0 &&
       !call->req.cap_sampling) ||
      (strcmp(method, "elicitation/create") == 0 &&
       !call->req.cap_elicitation) ||
      (strcmp(method, "roots/list") == 0 && !call->req.cap_roots))
    return ACP_ERR_UNSUPPORTED;
  if (strcmp(method, "elicitation/create") == 0) {
    rv = elicit_allowed(&c->srv->mem, call->req.elicit_modes, params,
                        params_len);
    if (rv != 1)
      return rv == 0 ? ACP_ERR_UNSUPPORTED : rv;
  }
  /* Only the three input request kinds exist; a ping has no 2026 form. */
  if (c->srv->state_key_len == 0 ||
      (strcmp(method, "sampling/createMessage") != 0 &&
       strcmp(method, "elicitation/create") != 0 &&
       strcmp(method, "roots/list") != 0) ||
      (call->kind != CALL_TOOL && call->kind != CALL_PROMPT))
    return ACP_ERR_UNSUPPORTED;
  if (params != NULL && acp_json_validate(params, params_len, NULL) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  if (call->task != NULL)
    return task_input(call, key, method, params, params_len, cb, user_data);
  if (key == NULL) {
    snprintf(kbuf, sizeof(kbuf), "%u", ++call->seq);
    key = kbuf;
  }
  doc = call->rdoc;
  found = acp_json_obj_getz(call->responses, key);
  if (found == NULL) {
    doc = call->sdoc;
    found = acp_json_obj_getz(call->prior, key);
  }
  if (found != NULL) {
    mcp_ready *r = acp__calloc(&c->srv->mem, 1, sizeof(*r));
    if (r == NULL)
      return ACP_ERR_NOMEM;
    r->cb = cb;
    r->ud = user_data;
    r->result = found;
    r->doc = doc;
    *call->ready_tail = r;
    call->ready_tail = &r->next;
    return 0;
  }
  /* "key":{"method":M,"params":P} appended to the inputRequests members;
   * a key already asked for in this round is asked once. */
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, key);
  write_input_request(w, method, params, params_len);
  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM || rv == ACP_ERR_LIMIT
               ? rv
               : ACP_ERR_INVALID_ARGUMENT;
  p = acp_json_writer_data(w, &n);
  rv = call->ninputs ? acp__buf_putc(&call->inputs, ',') : 0;
  if (rv == 0) /* without the enclosing braces */
    rv = acp__buf_append(&call->inputs, p + 1, n - 2);
  if (rv != 0)
    return rv;
  call->ninputs++;
  /* Outside the handler (a later request): nothing else can come. */
  if (!call->in_cb)
    return input_required_answer(call);
  return 0;
}

/* After a stateless call's handler: run the callbacks of the requests the
 * retry answered (they may ask for more), then answer input_required if
 * something is still missing and nobody answered. */
static int stateless_drain(acp_mcp_call *call, int rv) {
  while (call->ready != NULL && (rv >= 0 || rv == ACP_ERR_PAUSE) &&
         !call->answered) {
    mcp_ready *r = call->ready;
    acp_rpc_msg m;
    call->ready = r->next;
    if (call->ready == NULL)
      call->ready_tail = &call->ready;
    memset(&m, 0, sizeof(m));
    m.kind = ACP_RPC_RESPONSE;
    m.result = r->result;
    m.root = r->result;
    m.doc = r->doc;
    rv = r->cb ? r->cb(call, 0, &m, r->ud) : 0;
    acp__free(&call->conn->srv->mem, r);
  }
  if ((rv >= 0 || rv == ACP_ERR_PAUSE) && !call->answered && !call->cancelled &&
      call->ninputs > 0) {
    int arv = input_required_answer(call);
    if (arv != 0)
      rv = arv;
  }
  return rv;
}

/*
 * The multi round-trip members of a stateless tools/call or prompts/get:
 * `inputResponses` (an object of objects) and `requestState` (ours,
 * unaltered, for this method and name). 1 when an error was answered.
 */
static int stateless_prepare(acp_mcp_conn *c, const acp_rpc_msg *msg,
                             const char *method, const mcp_item *it,
                             acp_json_doc **sdoc, char **sbytes) {
  const acp_json_val *ir;
  const acp_json_val *rs;
  const acp_json_val *k;
  int rv;

  *sdoc = NULL;
  *sbytes = NULL;
  if (!c->req.stateless)
    return 0; /* before the lookups: a stateful call has none of these */
  ir = ACP__OBJ_GETL(msg->params, "inputResponses");
  rs = ACP__OBJ_GETL(msg->params, "requestState");
  if (ir != NULL && acp_json_type_of(ir) != ACP_JSON_OBJECT) {
    rv = invalid_params(c, msg->handle, "inputResponses must be an object");
    return rv != 0 ? rv : 1;
  }
  for (k = acp_json_child(ir); k; k = acp_json_next(acp_json_next(k)))
    if (acp_json_type_of(acp_json_next(k)) != ACP_JSON_OBJECT) {
      rv = invalid_params(c, msg->handle,
                          "each input response must be an object");
      return rv != 0 ? rv : 1;
    }
  if (rs == NULL)
    return 0;
  rv = state_verify(c, msg->doc, rs, method, it->key, sdoc, sbytes);
  if (rv == 1) {
    rv = invalid_params(c, msg->handle,
                        "requestState failed its integrity check");
    return rv != 0 ? rv : 1;
  }
  return rv;
}

/* Hand the prepared multi round-trip inputs to a started call. */
static void stateless_attach(acp_mcp_call *call, const acp_rpc_msg *msg,
                             acp_json_doc *sdoc, char *sbytes) {
  const acp_json_val *ir;

  if (!call->req.stateless)
    return;
  ir = ACP__OBJ_GETL(msg->params, "inputResponses");
  call->sdoc = sdoc;
  call->sbytes = sbytes;
  call->prior = sdoc ? ACP__OBJ_GETL(acp_json_doc_root(sdoc), "r") : NULL;
  call->responses = acp_json_type_of(ir) == ACP_JSON_OBJECT ? ir : NULL;
  call->rdoc = msg->doc;
}

/* After a handler returned: soft failure handling and release. */
static int handler_done(acp_mcp_call *call, int rv) {
  if (call->req.stateless)
    rv = stateless_drain(call, rv);
  /* A task-capable call left to be answered later becomes a task (unless
   * the store is full: then it is answered on its request as usual). */
  if ((rv >= 0 || rv == ACP_ERR_PAUSE) && call->task_ok && call->task == NULL &&
      !call->answered && !call->cancelled) {
    int trv = task_start(call);
    if (trv == ACP_ERR_NOMEM)
      return trv;
  }
  /* What the request carried is gone with its message. */
  call->responses = NULL;
  call->rdoc = NULL;
  call->msg = NULL;
  if (rv == ACP_ERR_PAUSE || rv >= 0) {
    call->in_cb = false;
    call_maybe_free(call);
    return rv == ACP_ERR_PAUSE ? rv : 0;
  }
  /* in_cb stays set while answering so the call outlives the answer. */
  if (!call->answered) {
    int arv;
    if (call->kind == CALL_TOOL) {
      const char *why = acp_strerror(rv);
      arv = acp_mcp_call_respond_text(call, why, strlen(why), true);
    } else {
      arv = acp_mcp_call_respond_error(call, ACP_RPC_INTERNAL_ERROR,
                                       "Internal error", NULL, 0);
    }
    if (arv == ACP_ERR_NOMEM)
      return arv;
    if (arv != 0) {
      /* Could not answer: release without a response. */
      acp_rpc_session_drop(call->conn->rpc, call->handle);
      call->answered = true;
    }
  }
  call->in_cb = false;
  call_maybe_free(call);
  return 0;
}

/* A member of the request's params by a literal name: inline, no strlen
 * (json_int.h; the general lookup's answer). */
#define param(msg, k) ACP__OBJ_GETI((msg)->params, k)

/* MARK: - Tasks (Private) */

/*
 * A task is a tools/call that answers its request at once with a task
 * handle and runs on: its call moves from the request's conn to the
 * server's task conn (a conn that never does I/O: the call keeps its
 * writers, and the request's conn, an HTTP POST's for instance, may go
 * away), and its answer lands in the task record, read back by polling.
 * Two wire shapes share the record: the 2025-11-25 tasks (tasks/get,
 * tasks/result, tasks/list, tasks/cancel, bound to the session that
 * created them) and the 2026-07-28 io.modelcontextprotocol/tasks
 * extension (tasks/get with the result inlined, tasks/update for input,
 * tasks/cancel).
 */
enum { T_WORKING, T_INPUT, T_COMPLETED, T_FAILED, T_CANCELLED };
static const char *const task_status_names[] = {
    "working", "input_required", "completed", "failed", "cancelled"};

/* An input request of a running 2026 task, waiting for tasks/update. */
typedef struct mcp_pend {
  struct mcp_pend *next;
  char *key;
  char *member; /* {"method":M,"params":P} */
  size_t member_len;
  acp_mcp_call_response_cb cb;
  void *ud;
} mcp_pend;

/* A 2025 tasks/result request held until its task ends. */
typedef struct mcp_waiter {
  struct mcp_waiter *next;
  acp_mcp_conn *conn;
  uint64_t handle;
} mcp_waiter;

typedef struct mcp_task {
  struct mcp_task *next;
  char id[33];
  int status;
  bool v2;             /* the 2026 extension's shape */
  acp_mcp_conn *owner; /* 2025: the creating session (NULL once gone) */
  uint64_t created;    /* server now_ms */
  uint64_t updated;
  uint64_t seq;       /* creation order (from 1): tasks/list cursors */
  acp_mcp_call *call; /* while running */
  char *result;       /* completed: the result object */
  size_t result_len;
  int64_t err_code; /* failed: the error */
  char *err_msg;
  size_t err_msg_len;
  char *err_data; /* JSON or NULL */
  size_t err_data_len;
  mcp_pend *pend;
  mcp_waiter *waiters;
  unsigned ninputs; /* 2025: requests to the requestor not answered yet */
} mcp_task;

static bool tasks_offered(const acp_mcp_server *s) {
  return s->max_tasks > 0 && s->state_key_len > 0;
}

static bool task_terminal(const mcp_task *t) {
  return t->status >= T_COMPLETED;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" for a Unix time in ms (proleptic Gregorian,
 * from the day count by the usual era arithmetic). */
static void iso_time(char out[64], int64_t ms) {
  int64_t days = ms >= 0 ? ms / 86400000 : -((-ms + 86399999) / 86400000);
  int64_t rem = ms - days * 86400000;
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t d = doy - (153 * mp + 2) / 5 + 1;
  int64_t mo = mp < 10 ? mp + 3 : mp - 9;

  if (mo <= 2)
    y++;
  snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (int)y, (int)mo,
           (int)d, (int)(rem / 3600000), (int)(rem / 60000 % 60),
           (int)(rem / 1000 % 60), (int)(rem % 1000));
}

/* The Task members: taskId, status, timestamps, ttl and poll interval
 * (2026 names them ttlMs / pollIntervalMs). */
static void w_task_fields(acp_json_writer *w, const acp_mcp_server *s,
                          const mcp_task *t) {
  char ts[64];

  ACP__W_KEYL(w, "taskId");
  acp_json_write_strz(w, t->id);
  ACP__W_KEYL(w, "status");
  acp_json_write_strz(w, task_status_names[t->status]);
  iso_time(ts, s->epoch_ms + (int64_t)t->created);
  ACP__W_KEYL(w, "createdAt");
  acp_json_write_strz(w, ts);
  iso_time(ts, s->epoch_ms + (int64_t)t->updated);
  ACP__W_KEYL(w, "lastUpdatedAt");
  acp_json_write_strz(w, ts);
  acp_json_write_keyz(w, t->v2 ? "ttlMs" : "ttl");
  acp_json_write_int(w, (int64_t)s->task_ttl);
  if (s->task_poll > 0) {
    acp_json_write_keyz(w, t->v2 ? "pollIntervalMs" : "pollInterval");
    acp_json_write_int(w, (int64_t)s->task_poll);
  }
}

static void pend_free_all(const acp_mem *m, mcp_task *t) {
  while (t->pend) {
    mcp_pend *p = t->pend;
    t->pend = p->next;
    acp__free(m, p->key);
    acp__free(m, p->member);
    acp__free(m, p);
  }
}

static void task_free(acp_mcp_server *s, mcp_task *t) {
  const acp_mem *m = &s->mem;

  if (t->call)
    t->call->task = NULL;
  pend_free_all(m, t);
  while (t->waiters) {
    mcp_waiter *wt = t->waiters;
    t->waiters = wt->next;
    acp__free(m, wt);
  }
  acp__free(m, t->result);
  acp__free(m, t->err_msg);
  acp__free(m, t->err_data);
  acp__free(m, t);
}

/* Drop ended tasks whose ttl (from creation) has passed. Running tasks
 * stay: their call still points at them. */
static void task_gc(acp_mcp_server *s) {
  mcp_task **tp = &s->tasks;

  while (*tp) {
    mcp_task *t = *tp;
    if (task_terminal(t) && t->waiters == NULL &&
        s->now_ms - t->created >= s->task_ttl && s->now_ms >= t->created) {
      *tp = t->next;
      s->ntasks--;
      task_free(s, t);
    } else {
      tp = &t->next;
    }
  }
}

/* The task `id` names for a request on `c` (2025 tasks only for the
 * session that made them; 2026 ones only to 2026 requests). */
static mcp_task *task_find(acp_mcp_conn *c, const acp_json_val *id) {
  mcp_task *t;

  task_gc(c->srv);
  for (t = c->srv->tasks; t; t = t->next)
    if (acp_json_str_eq(id, t->id, strlen(t->id)) &&
        t->v2 == c->req.stateless && (t->v2 || t->owner == c))
      return t;
  return NULL;
}

/* 128 bits that only the holder of the state key can predict. */
static void task_new_id(acp_mcp_server *s, char out[33]) {
  static const char hex[] = "0123456789abcdef";
  uint8_t in[24];
  uint8_t mac[32];
  uint64_t seq = ++s->task_seq;
  int i;

  memcpy(in, "acp-task", 8);
  for (i = 0; i < 8; i++) {
    in[8 + i] = (uint8_t)(seq >> (8 * i));
    in[16 + i] = (uint8_t)(s->now_ms >> (8 * i));
  }
  acp__hmac_sha256(s->state_key, s->state_key_len, in, sizeof(in), mac);
  for (i = 0; i < 16; i++) {
    out[2 * i] = hex[mac[i] >> 4];
    out[2 * i + 1] = hex[mac[i] & 15];
  }
  out[32] = 0;
}

/* notifications/tasks/status to the 2025 session that owns `t`. */
static int task_notify(acp_mcp_server *s, mcp_task *t) {
  acp_mcp_conn *o = t->owner;
  acp_json_writer *w;
  const char *p;
  size_t n;
  int rv;

  if (o == NULL || !o->initialized)
    return 0;
  w = o->nw;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  w_task_fields(w, s, t);
  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv;
  p = acp_json_writer_data(w, &n);
  rv = acp_rpc_session_notify(o->rpc, "notifications/tasks/status", 26, p, n);
  return rv == ACP_ERR_NOMEM ? rv : 0;
}

static int task_answer_result(acp_mcp_conn *c, uint64_t handle, mcp_task *t);
static void w_task_detail(acp_json_writer *w, const acp_mcp_server *s,
                          const mcp_task *t);

/*
 * A 2026 task changed status: notifications/tasks, the whole task as
 * tasks/get shows it (result, error or inputRequests inlined), to every
 * open subscriptions/listen that named it in its filter's taskIds, tagged
 * with the listen's id. A missed one costs nothing: tasks/get tells the
 * same.
 */
static int task_listen_notify(acp_mcp_server *s, const mcp_task *t) {
  acp_mcp_conn *c;
  int first = 0;

  if (!t->v2)
    return 0;
  for (c = s->conns; c != NULL; c = c->next) {
    mcp_sub *sub;
    for (sub = c->listens; sub != NULL; sub = sub->next) {
      size_t i;
      const char *p;
      size_t n;
      int rv;
      for (i = 0; i < sub->ntasks; i++)
        if (strcmp(sub->tasks[i], t->id) == 0)
          break;
      if (i == sub->ntasks)
        continue;
      sub_params_begin(c->nw, sub);
      w_task_detail(c->nw, s, t);
      rv = acp_json_write_obj_end(c->nw);
      if (rv == 0) {
        p = acp_json_writer_data(c->nw, &n);
        rv = acp_rpc_session_notify(c->rpc, "notifications/tasks", 19, p, n);
      }
      if (rv == ACP_ERR_NOMEM && first == 0)
        first = rv;
    }
  }
  return first;
}

/* A task reached a final status: answer its held tasks/result requests,
 * tell its session. */
static int task_settled(acp_mcp_server *s, mcp_task *t) {
  int rv = 0;

  while (t->waiters) {
    mcp_waiter *wt = t->waiters;
    int r;
    t->waiters = wt->next;
    r = task_answer_result(wt->conn, wt->handle, t);
    acp__free(&s->mem, wt);
    if (r == ACP_ERR_NOMEM)
      rv = r;
  }
  if (rv == 0)
    rv = task_notify(s, t);
  if (rv == 0)
    rv = task_listen_notify(s, t);
  return rv;
}

/*
 * A 2025-11-25 task's request to its requestor (elicitation, sampling,
 * roots; 2025-11-25 tasks, "input_required"): sent to the session that
 * made the task, its params' _meta carrying
 * ACP_MCP_META_RELATED_TASK = {taskId}. The task is input_required until
 * every such request is answered (tasks/get shows it, a
 * notifications/tasks/status tells the session), then working again; the
 * answer reaches `cb` as an ordinary call's request does.
 */
static int task_v1_request(acp_mcp_call *call, const char *method,
                           const char *params, size_t params_len,
                           uint64_t timeout_ms, acp_mcp_call_response_cb cb,
                           void *user_data) {
  mcp_task *t = call->task;
  acp_mcp_conn *c = t->owner;
  acp_mcp_server *s = call->conn->srv;
  acp_json_doc *doc = NULL;
  acp_json_writer *w = NULL;
  const acp_json_val *root = NULL, *k, *meta = NULL;
  const char *p;
  size_t n;
  mcp_out *o;
  int rv;

  if (c == NULL || !c->initialized)
    return ACP_ERR_INVALID_STATE; /* its session is gone */
  if ((strcmp(method, "sampling/createMessage") == 0 && !c->cap_sampling) ||
      (strcmp(method, "elicitation/create") == 0 && !c->cap_elicitation) ||
      (strcmp(method, "roots/list") == 0 && !c->cap_roots))
    return ACP_ERR_UNSUPPORTED;
  if (strcmp(method, "elicitation/create") == 0) {
    rv = elicit_allowed(&s->mem, c->elicit_modes, params, params_len);
    if (rv != 1)
      return rv == 0 ? ACP_ERR_UNSUPPORTED : rv;
  }
  /* The params with the related-task _meta merged in. */
  rv = acp_json_doc_new(&doc, &s->mem);
  if (rv == 0 && params != NULL) {
    if (acp_json_doc_parse(doc, params, params_len, NULL) != 0 ||
        acp_json_type_of(acp_json_doc_root(doc)) != ACP_JSON_OBJECT)
      rv = ACP_ERR_INVALID_ARGUMENT;
    else
      root = acp_json_doc_root(doc);
  }
  if (rv == 0)
    rv = acp_json_writer_new(&w, 0, &s->mem);
  if (rv == 0) {
    acp_json_write_obj_begin(w);
    for (k = acp_json_child(root); k && rv == 0;
         k = acp_json_next(acp_json_next(k))) {
      if (acp_json_str_eq(k, "_meta", 5)) {
        meta = acp_json_next(k);
        continue;
      }
      rv = acp_json_doc_str(doc, k, &p, &n);
      if (rv == 0) {
        acp_json_write_key(w, p, n);
        acp_json_write_val(w, acp_json_next(k));
      }
    }
    ACP__W_KEYL(w, "_meta");
    acp_json_write_obj_begin(w);
    for (k = acp_json_child(meta); k && rv == 0;
         k = acp_json_next(acp_json_next(k))) {
      if (acp_json_str_eq(k, ACP_MCP_META_RELATED_TASK,
                          strlen(ACP_MCP_META_RELATED_TASK)))
        continue;
      rv = acp_json_doc_str(doc, k, &p, &n);
      if (rv == 0) {
        acp_json_write_key(w, p, n);
        acp_json_write_val(w, acp_json_next(k));
      }
    }
    acp_json_write_keyz(w, ACP_MCP_META_RELATED_TASK);
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "taskId");
    acp_json_write_strz(w, t->id);
    acp_json_write_obj_end(w);
    acp_json_write_obj_end(w);
    if (rv == 0)
      rv = acp_json_write_obj_end(w);
  }
  o = rv == 0 ? acp__calloc(&s->mem, 1, sizeof(*o)) : NULL;
  if (rv == 0 && o == NULL)
    rv = ACP_ERR_NOMEM;
  if (rv == 0) {
    o->conn = c;
    o->call = call;
    o->cb = cb;
    o->ud = user_data;
    o->for_task = true;
    p = acp_json_writer_data(w, &n);
    rv = acp_rpc_session_request(c->rpc, method, strlen(method), p, n,
                                 timeout_ms, c->now_ms, out_on_response, o,
                                 &o->id);
    if (rv != 0)
      acp__free(&s->mem, o);
  }
  acp_json_writer_free(w);
  acp_json_doc_free(doc);
  if (rv != 0)
    return rv;
  o->next = c->outs;
  if (c->outs)
    c->outs->prev = o;
  c->outs = o;
  call->refs++;
  t->ninputs++;
  if (t->status == T_WORKING) {
    t->status = T_INPUT;
    t->updated = s->now_ms;
    (void)task_notify(s, t); /* best effort: tasks/get tells the same */
  }
  return 0;
}

/* One of a 2025 task's requests was answered (or dropped with its
 * session): the last one puts the task back to working. */
static void task_v1_input_done(acp_mcp_call *call) {
  mcp_task *t = call->task;

  if (t == NULL || t->v2 || t->ninputs == 0)
    return;
  if (--t->ninputs == 0 && t->status == T_INPUT) {
    acp_mcp_server *s = call->conn->srv;
    t->status = T_WORKING;
    t->updated = s->now_ms;
    (void)task_notify(s, t);
  }
}

static void call_unlink(acp_mcp_call *call) {
  acp_mcp_conn *c = call->conn;
  if (call->prev)
    call->prev->next = call->next;
  else
    c->calls = call->next;
  if (call->next)
    call->next->prev = call->prev;
  call->next = call->prev = NULL;
}

/*
 * Turn `call` into a task: answer its request with the task handle
 * (2026: a CreateTaskResult, resultType "task"; 2025: {"task":{...}}),
 * then move the call to the task conn.
 */
static int task_start(acp_mcp_call *call) {
  acp_mcp_conn *c = call->conn;
  acp_mcp_server *s = c->srv;
  acp_json_writer *w;
  mcp_task *t;
  const char *p;
  size_t n;
  int rv;

  if (!call->task_ok)
    return ACP_ERR_UNSUPPORTED;
  if (call->task != NULL || call->answered || call->cancelled ||
      call->refs > 0 || call->ninputs > 0)
    return ACP_ERR_INVALID_STATE;
  task_gc(s);
  if (s->ntasks >= s->max_tasks)
    return ACP_ERR_LIMIT;
  if (s->task_conn == NULL) {
    rv = acp_mcp_conn_new(&s->task_conn, s, NULL);
    if (rv != 0)
      return rv;
  }
  /* Not c->w: an answer being turned into a task may sit there. The
   * task conn's mw is never used otherwise (it answers nothing). */
  w = s->task_conn->mw;
  t = acp__calloc(&s->mem, 1, sizeof(*t));
  if (t == NULL)
    return ACP_ERR_NOMEM;
  task_new_id(s, t->id);
  t->status = T_WORKING;
  t->v2 = call->req.stateless;
  t->owner = t->v2 ? NULL : c;
  t->created = t->updated = s->now_ms;
  t->seq = s->task_seq; /* task_new_id() just counted it */

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  if (t->v2) {
    ACP__W_KEYL(w, "resultType");
    acp_json_write_strz(w, "task");
    w_task_fields(w, s, t);
  } else {
    ACP__W_KEYL(w, "task");
    acp_json_write_obj_begin(w);
    w_task_fields(w, s, t);
    acp_json_write_obj_end(w);
  }
  rv = acp_json_write_obj_end(w);
  if (rv == 0) {
    mcp_cache none = {-1, 0};
    p = acp_json_writer_data(w, &n);
    rv = t->v2 ? stateless_respond(c, call->handle, p, n, &none)
               : acp_rpc_session_respond(c->rpc, call->handle, p, n);
  }
  if (rv != 0) {
    acp__free(&s->mem, t);
    return rv;
  }
  t->next = s->tasks;
  s->tasks = t;
  s->ntasks++;
  call_unlink(call);
  call->conn = s->task_conn;
  call->next = s->task_conn->calls;
  if (s->task_conn->calls)
    s->task_conn->calls->prev = call;
  s->task_conn->calls = call;
  call->task = t;
  t->call = call;
  return 0;
}

/* The answer of a task's call: kept for tasks/get and tasks/result. */
static int task_finish(acp_mcp_call *call, bool is_error, const char *result,
                       size_t len, int64_t code, const char *message,
                       size_t message_len, const char *data, size_t dlen) {
  mcp_task *t = call->task;
  acp_mcp_server *s = call->conn->srv;
  const acp_mem *m = &s->mem;
  bool settle = false;

  if (!task_terminal(t)) {
    if (is_error) {
      t->err_msg = acp__strndup(m, message, message_len);
      t->err_data = data ? acp__strndup(m, data, dlen) : NULL;
      if (t->err_msg == NULL || (data && t->err_data == NULL)) {
        acp__free(m, t->err_msg);
        acp__free(m, t->err_data);
        t->err_msg = t->err_data = NULL;
        return ACP_ERR_NOMEM;
      }
      t->err_code = code;
      t->err_msg_len = message_len;
      t->err_data_len = data ? dlen : 0;
      t->status = T_FAILED;
    } else {
      t->result = acp__strndup(m, result, len);
      if (t->result == NULL)
        return ACP_ERR_NOMEM;
      t->result_len = len;
      t->status = T_COMPLETED;
    }
    t->updated = s->now_ms;
    settle = true;
  }
  pend_free_all(m, t);
  t->call = NULL;
  call->task = NULL;
  call->answered = true;
  call_maybe_free(call);
  return settle ? task_settled(s, t) : 0;
}

/* Cancel a task: it ends `cancelled` at once; its call learns through
 * its cancel callback, and whatever it answers later is dropped. */
static int task_cancel(acp_mcp_server *s, mcp_task *t) {
  acp_mcp_call *call = t->call;
  int rv = 0;

  if (task_terminal(t))
    return 0;
  t->status = T_CANCELLED;
  t->updated = s->now_ms;
  pend_free_all(&s->mem, t);
  if (call != NULL && !call->cancelled) {
    call->cancelled = true;
    call->refs++;
    if (call->on_cancel)
      rv = call->on_cancel(call, call->cancel_ud);
    call->refs--;
    call_maybe_free(call);
  }
  if (rv == 0 || !acp_is_fatal(rv)) {
    int r = task_settled(s, t);
    if (r != 0)
      rv = r;
  }
  return rv;
}

/* A request from a running 2026 task: it joins the task's inputRequests
 * (status input_required) until tasks/update answers it. */
static int task_input(acp_mcp_call *call, const char *key, const char *method,
                      const char *params, size_t params_len,
                      acp_mcp_call_response_cb cb, void *user_data) {
  mcp_task *t = call->task;
  acp_mcp_server *s = call->conn->srv;
  acp_json_writer *w = call->conn->nw;
  mcp_pend *pd, **tail;
  char kbuf[24];
  const char *p;
  size_t n;
  int rv;

  if (!t->v2)
    return ACP_ERR_UNSUPPORTED;
  if (key == NULL) {
    snprintf(kbuf, sizeof(kbuf), "%u", ++call->seq);
    key = kbuf;
  }
  for (pd = t->pend; pd; pd = pd->next)
    if (strcmp(pd->key, key) == 0)
      return ACP_ERR_INVALID_STATE;
  acp_json_writer_reset(w);
  write_input_request(w, method, params, params_len);
  rv = acp_json_writer_error(w);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM || rv == ACP_ERR_LIMIT
               ? rv
               : ACP_ERR_INVALID_ARGUMENT;
  p = acp_json_writer_data(w, &n);
  pd = acp__calloc(&s->mem, 1, sizeof(*pd));
  if (pd == NULL)
    return ACP_ERR_NOMEM;
  pd->key = acp__strndup(&s->mem, key, strlen(key));
  pd->member = acp__strndup(&s->mem, p, n);
  if (pd->key == NULL || pd->member == NULL) {
    acp__free(&s->mem, pd->key);
    acp__free(&s->mem, pd->member);
    acp__free(&s->mem, pd);
    return ACP_ERR_NOMEM;
  }
  pd->member_len = n;
  pd->cb = cb;
  pd->ud = user_data;
  for (tail = &t->pend; *tail; tail = &(*tail)->next)
    ;
  *tail = pd;
  t->status = T_INPUT;
  t->updated = s->now_ms;
  (void)task_listen_notify(s, t); /* best effort: tasks/get tells the same */
  return 0;
}

/* Whether 2026 client capabilities declare the tasks extension. */
static bool caps_have_tasks(const acp_json_val *caps) {
  return acp_json_obj_getz(ACP__OBJ_GETL(caps, "extensions"),
                           ACP_MCP_EXT_TASKS) != NULL;
}

static int missing_tasks_capability(acp_mcp_conn *c, uint64_t handle) {
  static const char data[] =
      "{\"requiredCapabilities\":{\"extensions\":{\"" ACP_MCP_EXT_TASKS
      "\":{}}}}";
  return reply_error(c, handle, ACP_MCP_MISSING_REQUIRED_CLIENT_CAPABILITY,
                     "Missing required client capability: " ACP_MCP_EXT_TASKS,
                     NULL, 0, data, sizeof(data) - 1);
}

/* The task a tasks/ request names: NULL with the error answered (*rv
 * its status) when taskId is missing or unknown. */
static mcp_task *task_param(acp_mcp_conn *c, const acp_rpc_msg *msg, int *rv) {
  const acp_json_val *id = param(msg, "taskId");
  mcp_task *t;

  *rv = 0;
  if (acp_json_type_of(id) != ACP_JSON_STRING) {
    *rv = invalid_params(c, msg->handle, "taskId must be a string");
    return NULL;
  }
  t = task_find(c, id);
  if (t == NULL)
    *rv = invalid_params(c, msg->handle, "unknown taskId");
  return t;
}

/* tasks/get. 2026: the DetailedTask, with the result, error or pending
 * inputRequests inlined; 2025: the Task. */
static int do_tasks_get(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  acp_json_writer *w = c->w;
  mcp_task *t;
  int rv;

  t = task_param(c, msg, &rv);
  if (t == NULL)
    return rv;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  w_task_detail(w, c->srv, t);
  acp_json_write_obj_end(w);
  return reply_w(c, msg->handle, w);
}

/* The members of a task as tasks/get shows it (see do_tasks_get()). */
static void w_task_detail(acp_json_writer *w, const acp_mcp_server *s,
                          const mcp_task *t) {
  w_task_fields(w, s, t);
  if (t->v2 && t->status == T_COMPLETED) {
    ACP__W_KEYL(w, "result");
    acp_json_write_raw(w, t->result, t->result_len);
  } else if (t->v2 && t->status == T_FAILED) {
    ACP__W_KEYL(w, "error");
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "code");
    acp_json_write_int(w, t->err_code);
    ACP__W_KEYL(w, "message");
    acp_json_write_str(w, t->err_msg, t->err_msg_len);
    if (t->err_data) {
      ACP__W_KEYL(w, "data");
      acp_json_write_raw(w, t->err_data, t->err_data_len);
    }
    acp_json_write_obj_end(w);
  } else if (t->v2 && t->status == T_INPUT) {
    mcp_pend *pd;
    ACP__W_KEYL(w, "inputRequests");
    acp_json_write_obj_begin(w);
    for (pd = t->pend; pd; pd = pd->next) {
      acp_json_write_keyz(w, pd->key);
      acp_json_write_raw(w, pd->member, pd->member_len);
    }
    acp_json_write_obj_end(w);
  }
}

/* tasks/cancel. 2026: an empty ack, also for an ended task; 2025: the
 * cancelled Task, -32602 for an ended one. */
static int do_tasks_cancel(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  acp_json_writer *w = c->w;
  mcp_task *t;
  int rv;

  t = task_param(c, msg, &rv);
  if (t == NULL)
    return rv;
  if (!t->v2 && task_terminal(t))
    return invalid_params(c, msg->handle, "the task has already ended");
  rv = task_cancel(c->srv, t);
  if (rv != 0 && acp_is_fatal(rv))
    return rv;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  if (!t->v2)
    w_task_fields(w, c->srv, t);
  acp_json_write_obj_end(w);
  return reply_w(c, msg->handle, w);
}

/* tasks/update (2026): deliver inputResponses to the pending input
 * requests they name (others are ignored), then ack. */
static int do_tasks_update(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  const acp_json_val *ir = param(msg, "inputResponses");
  const acp_json_val *k;
  mcp_task *t;
  int rv;

  if (acp_json_type_of(ir) != ACP_JSON_OBJECT)
    return invalid_params(c, msg->handle, "inputResponses must be an object");
  for (k = acp_json_child(ir); k; k = acp_json_next(acp_json_next(k)))
    if (acp_json_type_of(acp_json_next(k)) != ACP_JSON_OBJECT)
      return invalid_params(c, msg->handle,
                            "each input response must be an object");
  t = task_param(c, msg, &rv);
  if (t == NULL)
    return rv;
  for (k = acp_json_child(ir); k && t->call && !task_terminal(t);
       k = acp_json_next(acp_json_next(k))) {
    mcp_pend **pp;
    for (pp = &t->pend; *pp; pp = &(*pp)->next)
      if (acp_json_str_eq(k, (*pp)->key, strlen((*pp)->key)))
        break;
    if (*pp != NULL) {
      mcp_pend *pd = *pp;
      acp_mcp_call *call = t->call;
      acp_rpc_msg m;
      *pp = pd->next;
      if (t->pend == NULL && t->status == T_INPUT) {
        t->status = T_WORKING;
        /* Best effort: tasks/get tells the same. */
        (void)task_listen_notify(c->srv, t);
      }
      t->updated = c->srv->now_ms;
      memset(&m, 0, sizeof(m));
      m.kind = ACP_RPC_RESPONSE;
      m.result = acp_json_next(k);
      m.root = m.result;
      m.doc = msg->doc;
      call->refs++;
      rv = pd->cb ? pd->cb(call, 0, &m, pd->ud) : 0;
      call->refs--;
      acp__free(&c->srv->mem, pd->key);
      acp__free(&c->srv->mem, pd->member);
      acp__free(&c->srv->mem, pd);
      call_maybe_free(call);
      if (rv != 0 && acp_is_fatal(rv))
        return rv;
    }
  }
  acp_json_writer_reset(c->w);
  acp_json_write_obj_begin(c->w);
  acp_json_write_obj_end(c->w);
  return reply_w(c, msg->handle, c->w);
}

/* The underlying request's answer, as 2025 tasks/result returns it:
 * the result with _meta["io.modelcontextprotocol/related-task"], or the
 * error. */
static int task_answer_result(acp_mcp_conn *c, uint64_t handle, mcp_task *t) {
  acp_json_writer *w = c->w;
  const acp_json_val *root;
  const acp_json_val *meta;
  const acp_json_val *k;
  const char *p;
  size_t n;
  int rv;

  if (t->status == T_FAILED)
    return acp_rpc_session_respond_error(c->rpc, handle, t->err_code,
                                         t->err_msg, t->err_msg_len,
                                         t->err_data, t->err_data_len);
  if (t->status == T_CANCELLED)
    return acp_rpc_session_respond_error(c->rpc, handle, ACP_RPC_INVALID_PARAMS,
                                         "Task cancelled", 14, NULL, 0);
  if (c->rdoc == NULL) {
    rv = acp_json_doc_new(&c->rdoc, &c->srv->mem);
    if (rv != 0)
      return rv;
  }
  rv = acp_json_doc_parse(c->rdoc, t->result, t->result_len, NULL);
  if (rv == ACP_ERR_NOMEM)
    return rv;
  root = rv == 0 ? acp_json_doc_root(c->rdoc) : NULL;
  meta = ACP__OBJ_GETL(root, "_meta");
  if (acp_json_type_of(root) != ACP_JSON_OBJECT ||
      (meta != NULL && acp_json_type_of(meta) != ACP_JSON_OBJECT))
    return acp_rpc_session_respond(c->rpc, handle, t->result, t->result_len);
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(root); k; k = acp_json_next(acp_json_next(k))) {
    if (acp_json_str_eq(k, "_meta", 5))
      continue;
    acp__json_write_key_val(w, k);
    acp_json_write_val(w, acp_json_next(k));
  }
  ACP__W_KEYL(w, "_meta");
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(meta); k; k = acp_json_next(acp_json_next(k))) {
    acp__json_write_key_val(w, k);
    acp_json_write_val(w, acp_json_next(k));
  }
  acp_json_write_keyz(w, ACP_MCP_META_RELATED_TASK);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "taskId");
  acp_json_write_strz(w, t->id);
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv;
  p = acp_json_writer_data(w, &n);
  return acp_rpc_session_respond(c->rpc, handle, p, n);
}

/* tasks/result (2025): the answer now when the task has ended, else held
 * until it does. */
static int do_tasks_result(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  mcp_waiter *wt;
  mcp_task *t;
  int rv;

  t = task_param(c, msg, &rv);
  if (t == NULL)
    return rv;
  if (task_terminal(t)) {
    rv = task_answer_result(c, msg->handle, t);
    return rv == ACP_ERR_NOMEM ? rv : 0;
  }
  wt = acp__calloc(&c->srv->mem, 1, sizeof(*wt));
  if (wt == NULL)
    return ACP_ERR_NOMEM;
  wt->conn = c;
  wt->handle = msg->handle;
  wt->next = t->waiters;
  t->waiters = wt;
  return 0;
}

/* tasks/list (2025): this session's tasks, newest first, in pages of the
 * server's page size (acp_mcp_server_set_page_size(); 0: one page). The
 * cursor "k<seq>" means "tasks created before task number seq": unlike an
 * offset it stays right while tasks are created and dropped between
 * pages (the list is kept newest first, so seq falls along it). */
static int do_tasks_list(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  acp_mcp_server *s = c->srv;
  acp_json_writer *w = c->w;
  const acp_json_val *cur = param(msg, "cursor");
  uint64_t before = UINT64_MAX;
  size_t emitted = 0;
  mcp_task *t;

  if (cur != NULL && acp_json_type_of(cur) != ACP_JSON_NULL) {
    const char *p;
    size_t n, i;
    uint64_t v = 0;
    bool bad = acp_json_type_of(cur) != ACP_JSON_STRING ||
               acp_json_doc_str(msg->doc, cur, &p, &n) != 0 || n < 2 ||
               n > 21 || p[0] != 'k' || p[1] == '0';
    for (i = 1; !bad && i < n; i++) {
      if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - 9) / 10)
        bad = true;
      else
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (bad)
      return invalid_params(c, msg->handle, "invalid cursor");
    before = v;
  }
  task_gc(s);
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "tasks");
  acp_json_write_arr_begin(w);
  for (t = s->tasks; t; t = t->next) {
    if (t->v2 || t->owner != c || t->seq >= before)
      continue;
    if (s->page_size > 0 && emitted == s->page_size) {
      /* More remain: the next page starts below the last one given. */
      char buf[32];
      acp_json_write_arr_end(w);
      snprintf(buf, sizeof(buf), "k%llu", (unsigned long long)before);
      ACP__W_KEYL(w, "nextCursor");
      acp_json_write_strz(w, buf);
      acp_json_write_obj_end(w);
      return reply_w(c, msg->handle, w);
    }
    acp_json_write_obj_begin(w);
    w_task_fields(w, s, t);
    acp_json_write_obj_end(w);
    emitted++;
    before = t->seq;
  }
  acp_json_write_arr_end(w);
  acp_json_write_obj_end(w);
  return reply_w(c, msg->handle, w);
}

/* A conn goes away: its 2025 tasks lose their session, its held
 * tasks/result requests are dropped; the task conn takes its calls. */
static void tasks_conn_gone(acp_mcp_conn *c) {
  acp_mcp_server *s = c->srv;
  mcp_task *t;

  if (c == s->task_conn)
    s->task_conn = NULL;
  for (t = s->tasks; t; t = t->next) {
    mcp_waiter **wp = &t->waiters;
    if (t->owner == c)
      t->owner = NULL;
    if (t->call && t->call->conn == c)
      t->call = NULL; /* freed with the conn */
    while (*wp) {
      if ((*wp)->conn == c) {
        mcp_waiter *wt = *wp;
        *wp = wt->next;
        acp__free(&s->mem, wt);
      } else {
        wp = &(*wp)->next;
      }
    }
  }
}

static void tasks_free_all(acp_mcp_server *s) {
  while (s->tasks) {
    mcp_task *t = s->tasks;
    s->tasks = t->next;
    task_free(s, t);
  }
  s->ntasks = 0;
}

/* MARK: - Closing listens (Public) */

int acp_mcp_conn_close_listens(acp_mcp_conn *c) {
  mcp_cache none = {-1, 0};
  int rv = 0;

  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  /* Each open subscriptions/listen ends with its (only) answer, an empty
   * complete result: the client knows the stream ended on purpose. */
  while (c->listens) {
    mcp_sub *sub = c->listens;
    int r;
    listen_unlink(c, sub);
    r = stateless_respond(c, sub->handle, "{}", 2, &none);
    if (r != 0 && rv == 0)
      rv = r;
    sub_free(&c->srv->mem, sub);
  }
  return rv;
}

int acp_mcp_server_close_listens(acp_mcp_server *s) {
  acp_mcp_conn *c;
  int rv = 0;

  if (s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  for (c = s->conns; c; c = c->next) {
    int r = acp_mcp_conn_close_listens(c);
    if (r != 0 && rv == 0)
      rv = r;
  }
  return rv;
}

/* MARK: - URL elicitation (Public) */

int acp_mcp_call_respond_url_elicitation_required(acp_mcp_call *call,
                                                  const char *elicitations,
                                                  size_t len) {
  static const char msg[] = "This request requires more information.";
  acp_mcp_conn *c;
  acp_json_doc *doc = NULL;
  const acp_json_val *e;
  unsigned modes;
  acp__buf b;
  int rv;

  if (call == NULL || elicitations == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (call->answered)
    return ACP_ERR_INVALID_STATE;
  c = call->conn;
  modes = call->req.stateless ? call->req.elicit_modes : c->elicit_modes;
  if (!(modes & ELICIT_URL))
    return ACP_ERR_UNSUPPORTED;
  /* A non-empty array of URL elicitations, each with its id. */
  rv = acp_json_doc_new(&doc, &c->srv->mem);
  if (rv != 0)
    return rv;
  rv = acp_json_doc_parse(doc, elicitations, len, NULL);
  if (rv == 0 && (acp_json_type_of(acp_json_doc_root(doc)) != ACP_JSON_ARRAY ||
                  acp_json_child(acp_json_doc_root(doc)) == NULL))
    rv = ACP_ERR_INVALID_ARGUMENT;
  for (e = rv == 0 ? acp_json_child(acp_json_doc_root(doc)) : NULL; e;
       e = acp_json_next(e))
    if (!ACP_JSON_STR_EQ_LIT(ACP__OBJ_GETL(e, "mode"), "url") ||
        acp_json_type_of(ACP__OBJ_GETL(e, "elicitationId")) !=
            ACP_JSON_STRING ||
        acp_json_type_of(ACP__OBJ_GETL(e, "url")) != ACP_JSON_STRING ||
        acp_json_type_of(ACP__OBJ_GETL(e, "message")) != ACP_JSON_STRING)
      rv = ACP_ERR_INVALID_ARGUMENT;
  acp_json_doc_free(doc);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM ? rv : ACP_ERR_INVALID_ARGUMENT;
  acp__buf_init(&b, &c->srv->mem, 0);
  rv = acp__buf_append(&b, "{\"elicitations\":", 16);
  if (rv == 0)
    rv = acp__buf_append(&b, elicitations, len);
  if (rv == 0)
    rv = acp__buf_putc(&b, '}');
  if (rv == 0)
    rv = acp_mcp_call_respond_error(call, ACP_MCP_URL_ELICITATION_REQUIRED, msg,
                                    b.data, b.len);
  acp__buf_dispose(&b);
  return rv;
}

int acp_mcp_conn_elicitation_complete(acp_mcp_conn *c,
                                      const char *elicitation_id) {
  acp_json_writer *w;
  const char *p;
  size_t n;
  int rv;

  if (c == NULL || elicitation_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!(c->elicit_modes & ELICIT_URL))
    return ACP_ERR_UNSUPPORTED;
  w = c->nw;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "elicitationId");
  acp_json_write_strz(w, elicitation_id);
  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM || rv == ACP_ERR_LIMIT
               ? rv
               : ACP_ERR_INVALID_ARGUMENT;
  p = acp_json_writer_data(w, &n);
  return acp_rpc_session_notify(c->rpc, "notifications/elicitation/complete",
                                34, p, n);
}

/* MARK: - Tasks (Public) */

int acp_mcp_server_set_tasks(acp_mcp_server *s, size_t max_tasks,
                             uint64_t ttl_ms, uint64_t poll_interval_ms) {
  if (s == NULL || ttl_ms == 0 || ttl_ms > (uint64_t)INT64_MAX ||
      poll_interval_ms > (uint64_t)INT64_MAX)
    return ACP_ERR_INVALID_ARGUMENT;
  s->max_tasks = max_tasks;
  s->task_ttl = ttl_ms;
  s->task_poll = poll_interval_ms;
  return 0;
}

void acp_mcp_server_set_epoch(acp_mcp_server *s, int64_t epoch_ms) {
  if (s)
    s->epoch_ms = epoch_ms;
}

int acp_mcp_server_set_tool_task_support(acp_mcp_server *s, const char *name,
                                         acp_mcp_task_support support) {
  static const char *const names[] = {NULL, "optional", "required"};
  mcp_item *it;
  acp__buf b;
  size_t base;
  int rv = 0;

  if (s == NULL || name == NULL || (int)support < ACP_MCP_TASK_FORBIDDEN ||
      (int)support > ACP_MCP_TASK_REQUIRED)
    return ACP_ERR_INVALID_ARGUMENT;
  it = vec_find(&s->lists[K_TOOL], name, strlen(name), NULL);
  if (it == NULL)
    return ACP_ERR_NOT_FOUND;
  /* The list entry ends in "}": `execution` goes last, replaced on each
   * change. */
  base = it->exec_off ? it->exec_off : it->json_len - 1;
  acp__buf_init(&b, &s->mem, 0);
  rv = acp__buf_append(&b, it->json, base);
  if (rv == 0 && support != ACP_MCP_TASK_FORBIDDEN) {
    static const char a[] = ",\"execution\":{\"taskSupport\":\"";
    rv = acp__buf_append(&b, a, sizeof(a) - 1);
    if (rv == 0)
      rv = acp__buf_append(&b, names[support], strlen(names[support]));
    if (rv == 0)
      rv = acp__buf_append(&b, "\"}", 2);
  }
  if (rv == 0)
    rv = acp__buf_append(&b, "}", 2); /* with the NUL */
  if (rv != 0) {
    acp__buf_dispose(&b);
    return rv;
  }
  acp__free(&s->mem, it->json);
  it->json = (char *)b.data; /* the buffer's storage is ours now */
  it->json_len = b.len - 1;
  it->exec_off = support != ACP_MCP_TASK_FORBIDDEN ? base : 0;
  it->task_support = (int)support;
  return 0;
}

int acp_mcp_call_start_task(acp_mcp_call *call) {
  if (call == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return task_start(call);
}

const char *acp_mcp_call_task_id(const acp_mcp_call *call) {
  return call && call->task ? call->task->id : NULL;
}

size_t acp_mcp_server_task_count(const acp_mcp_server *s) {
  return s ? s->ntasks : 0;
}

/* MARK: - Methods (Private) */

/*
 * The server's capabilities, from the registry; the same in both eras
 * (at 2026-07-28 list changes and resource updates reach clients through
 * subscriptions/listen, at 2025 through the session).
 */
/* era: 0 a stateful revision before 2025-11-25, 1 2025-11-25, 2 the
 * stateless 2026-07-28. */
static void w_capabilities(acp_json_writer *w, const acp_mcp_server *s,
                           int era) {
  acp_json_write_obj_begin(w);
  if (tasks_offered(s) && era == 1) {
    ACP__W_KEYL(w, "tasks");
    acp_json_write_raw(w,
                       "{\"list\":{},\"cancel\":{},\"requests\":{\"tools\":{"
                       "\"call\":{}}}}",
                       56);
  }
  if (tasks_offered(s) && era == 2) {
    ACP__W_KEYL(w, "extensions");
    acp_json_write_raw(w, "{\"" ACP_MCP_EXT_TASKS "\":{}}",
                       sizeof("{\"" ACP_MCP_EXT_TASKS "\":{}}") - 1);
  }
  if (offers(s, K_TOOL)) {
    ACP__W_KEYL(w, "tools");
    acp_json_write_raw(w, "{\"listChanged\":true}", 20);
  }
  if (offers(s, K_RESOURCE)) {
    ACP__W_KEYL(w, "resources");
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "subscribe");
    acp_json_write_bool(w, s->subscribe);
    ACP__W_KEYL(w, "listChanged");
    acp_json_write_bool(w, true);
    acp_json_write_obj_end(w);
  }
  if (offers(s, K_PROMPT)) {
    ACP__W_KEYL(w, "prompts");
    acp_json_write_raw(w, "{\"listChanged\":true}", 20);
  }
  if (s->logging) {
    ACP__W_KEYL(w, "logging");
    acp_json_write_raw(w, "{}", 2);
  }
  if (s->complete_cb) {
    ACP__W_KEYL(w, "completions");
    acp_json_write_raw(w, "{}", 2);
  }
  acp_json_write_obj_end(w);
}

static int do_initialize(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  acp_mcp_server *s = c->srv;
  const acp_json_val *pv = param(msg, "protocolVersion");
  const acp_json_val *caps = param(msg, "capabilities");
  const acp_json_val *info = param(msg, "clientInfo");
  acp_json_writer *w = c->w;
  acp_mcp_version v;
  const char *p;
  size_t n;
  int rv;

  if (c->answered_init)
    return reply_error(c, msg->handle, ACP_RPC_INVALID_REQUEST,
                       "Already initialized", NULL, 0, NULL, 0);
  if (acp_json_type_of(pv) != ACP_JSON_STRING)
    return invalid_params(c, msg->handle, "protocolVersion must be a string");
  if (caps != NULL && acp_json_type_of(caps) != ACP_JSON_OBJECT)
    return invalid_params(c, msg->handle, "capabilities must be an object");
  if (info != NULL && acp_json_type_of(info) != ACP_JSON_OBJECT)
    return invalid_params(c, msg->handle, "clientInfo must be an object");
  rv = acp_json_doc_str(msg->doc, pv, &p, &n);
  if (rv != 0)
    return rv;
  v = acp_mcp_version_parse(p, n);
  if (v == ACP_MCP_VERSION_UNKNOWN)
    v = ACP_MCP_VERSION_LATEST;

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "protocolVersion");
  acp_json_write_strz(w, acp_mcp_version_str(v));
  ACP__W_KEYL(w, "capabilities");
  w_capabilities(w, s, v >= ACP_MCP_VERSION_2025_11_25 ? 1 : 0);
  ACP__W_KEYL(w, "serverInfo");
  w_server_info(w, s);
  w_opt_str(w, "instructions", s->instructions);
  acp_json_write_obj_end(w);
  rv = acp_json_writer_error(w);
  if (rv != 0)
    return rv;

  if (caps) {
    const char *raw = acp_json_raw(caps, &n);
    c->client_caps = acp__strndup(&s->mem, raw, n);
    if (c->client_caps == NULL)
      return ACP_ERR_NOMEM;
    c->client_caps_len = n;
    c->cap_sampling = ACP__OBJ_GETL(caps, "sampling") != NULL;
    c->cap_elicitation = ACP__OBJ_GETL(caps, "elicitation") != NULL;
    c->elicit_modes = elicit_modes_of(caps);
    c->cap_roots = ACP__OBJ_GETL(caps, "roots") != NULL;
  }
  if (info) {
    const char *raw = acp_json_raw(info, &n);
    c->client_info = acp__strndup(&s->mem, raw, n);
    if (c->client_info == NULL)
      return ACP_ERR_NOMEM;
    c->client_info_len = n;
  }
  p = acp_json_writer_data(w, &n);
  rv = acp_rpc_session_respond(c->rpc, msg->handle, p, n);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM ? rv : 0;
  c->answered_init = true;
  c->version = v;
  /* Only 2025-03-26 has JSON-RPC batching. */
  acp_rpc_session_set_batches(c->rpc, v == ACP_MCP_VERSION_2025_03_26);
  return 0;
}

/* Parse the optional cursor of a list request into an offset. */
static int parse_cursor(const acp_rpc_msg *msg, int kind, size_t *offset,
                        bool *bad) {
  const acp_json_val *cur = param(msg, "cursor");
  const char *p;
  size_t n;
  size_t i;
  size_t off = 0;
  int rv;

  *offset = 0;
  *bad = false;
  if (cur == NULL || acp_json_type_of(cur) == ACP_JSON_NULL)
    return 0;
  if (acp_json_type_of(cur) != ACP_JSON_STRING) {
    *bad = true;
    return 0;
  }
  rv = acp_json_doc_str(msg->doc, cur, &p, &n);
  if (rv != 0)
    return rv;
  if (n < 2 || n > 21 || p[0] != cursor_tags[kind] || p[1] == '0') {
    *bad = true;
    return 0;
  }
  for (i = 1; i < n; i++) {
    if (p[i] < '0' || p[i] > '9' || off > (SIZE_MAX - 9) / 10) {
      *bad = true;
      return 0;
    }
    off = off * 10 + (size_t)(p[i] - '0');
  }
  *offset = off;
  return 0;
}

static void w_next_cursor(acp_json_writer *w, int kind, size_t next) {
  char buf[32];

  snprintf(buf, sizeof(buf), "%c%zu", cursor_tags[kind], next);
  ACP__W_KEYL(w, "nextCursor");
  acp_json_write_strz(w, buf);
}

static int do_list(acp_mcp_conn *c, const acp_rpc_msg *msg, int kind) {
  acp_mcp_server *s = c->srv;
  acp_mcp_resource_list l;
  acp_json_writer *w = c->w;
  const mcp_vec *v = &s->lists[kind];
  size_t offset;
  size_t i;
  bool bad;
  int rv;

  rv = parse_cursor(msg, kind, &offset, &bad);
  if (rv != 0)
    return rv;
  if (bad)
    return invalid_params(c, msg->handle, "invalid cursor");
  memset(&l, 0, sizeof(l));
  l.srv = s;
  l.w = w;
  l.offset = offset;
  l.limit = s->page_size;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, list_keys[kind]);
  acp_json_write_arr_begin(w);
  for (i = 0; i < v->n; i++) {
    if (l.index++ < l.offset || (l.limit && l.emitted >= l.limit))
      continue;
    l.emitted++;
    acp_json_write_raw(w, v->v[i]->json, v->v[i]->json_len);
  }
  if (kind == K_RESOURCE) {
    const mcp_vec *t = &s->lists[K_TEMPLATE];
    for (i = 0; i < t->n; i++) {
      if (t->v[i]->lister == NULL)
        continue;
      rv = t->v[i]->lister(s, &l, t->v[i]->ud);
      if (rv == ACP_ERR_NOMEM)
        return rv;
      if (rv != 0)
        return reply_error(c, msg->handle, ACP_RPC_INTERNAL_ERROR,
                           "Internal error", NULL, 0, NULL, 0);
    }
  }
  if (offset > 0 && offset >= l.index)
    return invalid_params(c, msg->handle, "invalid cursor");
  acp_json_write_arr_end(w);
  if (l.offset + l.emitted < l.index)
    w_next_cursor(w, kind, l.offset + l.emitted);
  acp_json_write_obj_end(w);
  return reply_w(c, msg->handle, w);
}

/*
 * Open the call for the named item `it` and mark it as inside its handler;
 * on failure nothing is left behind.
 */
static int call_start(acp_mcp_conn *c, const acp_rpc_msg *msg,
                      const char *method, int kind, const mcp_item *it,
                      acp_mcp_call **out) {
  acp_mcp_call *call;
  int rv = call_new(c, msg, method, kind, it->key, it->key_len, &call);

  if (rv != 0)
    return rv;
  call->msg = msg;
  call->in_cb = true;
  *out = call;
  return 0;
}

/*
 * Whether a tools/call may become a task: the tool supports tasks and the
 * client asked for them (2026: the tasks extension in the request's
 * clientCapabilities; 2025-11-25: a `task` param; the 2026 extension
 * ignores a legacy `task` param). A tool that requires a task called
 * without is refused (2026: -32021; 2025: -32601), as is a 2025 task
 * request for a tool that forbids them. 1 when an error was answered.
 */
static int tool_task_mode(acp_mcp_conn *c, const acp_rpc_msg *msg,
                          const mcp_item *it, bool *ok) {
  acp_mcp_server *s = c->srv;
  bool asked;
  int rv;

  *ok = false;
  if (!tasks_offered(s))
    return 0;
  if (c->req.stateless)
    asked = caps_have_tasks(c->req.caps);
  else if (c->version >= ACP_MCP_VERSION_2025_11_25)
    asked = acp_json_type_of(param(msg, "task")) == ACP_JSON_OBJECT;
  else
    return 0;
  if (it->task_support == ACP_MCP_TASK_REQUIRED && !asked) {
    rv = c->req.stateless
             ? missing_tasks_capability(c, msg->handle)
             : reply_error(c, msg->handle, ACP_RPC_METHOD_NOT_FOUND,
                           "This tool must be called as a task", NULL, 0, NULL,
                           0);
    return rv != 0 ? rv : 1;
  }
  if (it->task_support == ACP_MCP_TASK_FORBIDDEN && asked &&
      !c->req.stateless) {
    rv = reply_error(c, msg->handle, ACP_RPC_METHOD_NOT_FOUND,
                     "This tool does not support tasks", NULL, 0, NULL, 0);
    return rv != 0 ? rv : 1;
  }
  *ok = asked && it->task_support != ACP_MCP_TASK_FORBIDDEN;
  if (*ok) {
    task_gc(s);
    if (s->ntasks >= s->max_tasks) {
      *ok = false;
      if (!c->req.stateless) {
        rv = reply_error(c, msg->handle, ACP_RPC_INTERNAL_ERROR,
                         "Too many tasks", NULL, 0, NULL, 0);
        return rv != 0 ? rv : 1;
      }
    }
  }
  return 0;
}

static int do_tool_call(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  const acp_json_val *name = param(msg, "name");
  const acp_json_val *args = param(msg, "arguments");
  bool task_ok;
  acp_json_doc *sdoc;
  char *sbytes;
  acp_mcp_call *call;
  mcp_item *it;
  const char *p;
  size_t n;
  int rv;

  if (acp_json_type_of(name) != ACP_JSON_STRING)
    return invalid_params(c, msg->handle, "name must be a string");
  if (args != NULL && acp_json_type_of(args) != ACP_JSON_OBJECT &&
      acp_json_type_of(args) != ACP_JSON_NULL)
    return invalid_params(c, msg->handle, "arguments must be an object");
  if (acp_json_type_of(args) == ACP_JSON_NULL)
    args = NULL;
  it = vec_find_val(&c->srv->lists[K_TOOL], name);
  if (it == NULL) {
    rv = acp_json_doc_str(msg->doc, name, &p, &n);
    if (rv != 0)
      return rv;
    return reply_error(c, msg->handle, ACP_RPC_INVALID_PARAMS,
                       "Unknown tool: ", p, n, NULL, 0);
  }
  rv = tool_task_mode(c, msg, it, &task_ok);
  if (rv != 0)
    return rv == 1 ? 0 : rv;
  rv = stateless_prepare(c, msg, "tools/call", it, &sdoc, &sbytes);
  if (rv != 0)
    return rv == 1 ? 0 : rv;
  rv = call_start(c, msg, "tools/call", CALL_TOOL, it, &call);
  if (rv != 0) {
    acp_json_doc_free(sdoc);
    acp__free(&c->srv->mem, sbytes);
    return rv;
  }
  call->task_ok = task_ok;
  stateless_attach(call, msg, sdoc, sbytes);
  rv = it->cb.tool(call, args, it->ud);
  return handler_done(call, rv);
}

/* Copy the template variables of `uri` into call->vars. */
static int store_vars(acp_mcp_conn *c, acp_mcp_call *call, const mcp_item *t,
                      const char *uri, const size_t *vs, const size_t *vl,
                      size_t nv) {
  acp__buf b;
  const char *p = t->key;
  size_t i;
  int rv = 0;

  acp__buf_init(&b, &c->srv->mem, 0);
  for (i = 0; i < nv && rv == 0; i++) {
    const char *open = strchr(p, '{');
    const char *close = open ? strchr(open, '}') : NULL;
    if (close == NULL)
      break;
    rv = acp__buf_append(&b, open + 1, (size_t)(close - open - 1));
    if (rv == 0)
      rv = acp__buf_putc(&b, '\0');
    if (rv == 0)
      rv = acp__buf_append(&b, uri + vs[i], vl[i]);
    if (rv == 0)
      rv = acp__buf_putc(&b, '\0');
    p = close + 1;
  }
  if (rv == 0 && b.len > 0) {
    call->vars = acp__strndup(&c->srv->mem, b.data, b.len);
    if (call->vars == NULL)
      rv = ACP_ERR_NOMEM;
    call->nvars = nv;
  }
  acp__buf_dispose(&b);
  return rv;
}

static int do_read(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  acp_mcp_server *s = c->srv;
  const acp_json_val *uv = param(msg, "uri");
  size_t vs[ACP__MCP_MAX_VARS];
  size_t vl[ACP__MCP_MAX_VARS];
  size_t nv = 0;
  acp_mcp_call *call;
  mcp_item *it;
  bool from_template;
  const char *uri;
  size_t n;
  size_t i;
  char *copy;
  int rv;

  if (acp_json_type_of(uv) != ACP_JSON_STRING)
    return invalid_params(c, msg->handle, "uri must be a string");
  rv = acp_json_doc_str(msg->doc, uv, &uri, &n);
  if (rv != 0)
    return rv;
  it = vec_find(&s->lists[K_RESOURCE], uri, n, NULL);
  from_template = it == NULL;
  for (i = 0; it == NULL && i < s->lists[K_TEMPLATE].n; i++) {
    mcp_item *t = s->lists[K_TEMPLATE].v[i];
    if (acp_mcp_uri_template_match(t->key, t->key_len, uri, n, vs, vl,
                                   ACP__MCP_MAX_VARS, &nv) == 1)
      it = t;
  }
  if (it == NULL) {
    acp_json_writer *w = c->w;
    acp_json_writer_reset(w);
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "uri");
    acp_json_write_val(w, uv);
    acp_json_write_obj_end(w);
    rv = acp_json_writer_error(w);
    if (rv != 0)
      return rv;
    {
      const char *d;
      size_t dn;
      d = acp_json_writer_data(w, &dn);
      /* 2026-07-28 renumbered resource-not-found to Invalid params. */
      return reply_error(c, msg->handle,
                         c->req.stateless ? ACP_RPC_INVALID_PARAMS
                                          : ACP_MCP_RESOURCE_NOT_FOUND,
                         "Resource not found", NULL, 0, d, dn);
    }
  }
  copy = acp__strndup(&s->mem, uri, n);
  if (copy == NULL)
    return ACP_ERR_NOMEM;
  if (c->req.stateless && it->has_cache) {
    c->req.hint.ttl = it->ttl;
    c->req.hint.scope = it->scope;
  } else if (c->req.stateless) {
    c->req.hint = s->cache[ACP_MCP_CACHE_READ];
  }
  rv = call_new(c, msg, "resources/read", CALL_READ, NULL, 0, &call);
  if (rv == 0 && from_template)
    rv = store_vars(c, call, it, uri, vs, vl, nv);
  if (rv != 0) {
    acp__free(&s->mem, copy);
    if (call) {
      call->answered = true;
      call_unlink_free(call);
    }
    return rv;
  }
  call->name = copy;
  call->msg = msg;
  call->in_cb = true;
  rv = it->cb.read(call, copy, n, it->ud);
  return handler_done(call, rv);
}

static int do_prompt_get(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  const acp_json_val *name = param(msg, "name");
  const acp_json_val *args = param(msg, "arguments");
  const acp_json_val *k;
  acp_json_doc *sdoc;
  char *sbytes;
  acp_mcp_call *call;
  mcp_item *it;
  const char *p;
  size_t n;
  size_t i;
  int rv;

  if (acp_json_type_of(name) != ACP_JSON_STRING)
    return invalid_params(c, msg->handle, "name must be a string");
  if (acp_json_type_of(args) == ACP_JSON_NULL)
    args = NULL;
  if (args != NULL && acp_json_type_of(args) != ACP_JSON_OBJECT)
    return invalid_params(c, msg->handle, "arguments must be an object");
  for (k = acp_json_child(args); k; k = acp_json_next(acp_json_next(k)))
    if (acp_json_type_of(acp_json_next(k)) != ACP_JSON_STRING)
      return invalid_params(c, msg->handle, "argument values must be strings");
  it = vec_find_val(&c->srv->lists[K_PROMPT], name);
  if (it == NULL) {
    rv = acp_json_doc_str(msg->doc, name, &p, &n);
    if (rv != 0)
      return rv;
    return reply_error(c, msg->handle, ACP_RPC_INVALID_PARAMS,
                       "Unknown prompt: ", p, n, NULL, 0);
  }
  p = it->required;
  for (i = 0; i < it->nrequired; i++) {
    n = strlen(p);
    if (acp_json_obj_get(args, p, n) == NULL)
      return reply_error(c, msg->handle, ACP_RPC_INVALID_PARAMS,
                         "Missing required argument: ", p, n, NULL, 0);
    p += n + 1;
  }
  rv = stateless_prepare(c, msg, "prompts/get", it, &sdoc, &sbytes);
  if (rv != 0)
    return rv == 1 ? 0 : rv;
  rv = call_start(c, msg, "prompts/get", CALL_PROMPT, it, &call);
  if (rv != 0) {
    acp_json_doc_free(sdoc);
    acp__free(&c->srv->mem, sbytes);
    return rv;
  }
  stateless_attach(call, msg, sdoc, sbytes);
  rv = it->cb.prompt(call, args, it->ud);
  return handler_done(call, rv);
}

static int do_complete(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  acp_mcp_server *s = c->srv;
  const acp_json_val *ref = param(msg, "ref");
  const acp_json_val *arg = param(msg, "argument");
  const acp_json_val *ctx = param(msg, "context");
  const acp_json_val *type = ACP__OBJ_GETL(ref, "type");
  acp_mcp_call *call;
  int rv;

  if (acp_json_type_of(ref) != ACP_JSON_OBJECT ||
      acp_json_type_of(type) != ACP_JSON_STRING)
    return invalid_params(c, msg->handle, "ref must be an object with a type");
  if (acp_json_type_of(arg) != ACP_JSON_OBJECT ||
      acp_json_type_of(ACP__OBJ_GETL(arg, "name")) != ACP_JSON_STRING ||
      acp_json_type_of(ACP__OBJ_GETL(arg, "value")) != ACP_JSON_STRING)
    return invalid_params(c, msg->handle,
                          "argument must be an object with name and value");
  if (acp_json_type_of(ctx) == ACP_JSON_NULL)
    ctx = NULL;
  if (ctx != NULL && acp_json_type_of(ctx) != ACP_JSON_OBJECT)
    return invalid_params(c, msg->handle, "context must be an object");
  if (ACP_JSON_STR_EQ_LIT(type, "ref/prompt")) {
    const acp_json_val *name = ACP__OBJ_GETL(ref, "name");
    if (acp_json_type_of(name) != ACP_JSON_STRING)
      return invalid_params(c, msg->handle, "ref.name must be a string");
    if (vec_find_val(&s->lists[K_PROMPT], name) == NULL)
      return invalid_params(c, msg->handle, "unknown prompt");
  } else if (ACP_JSON_STR_EQ_LIT(type, "ref/resource")) {
    const acp_json_val *uri = ACP__OBJ_GETL(ref, "uri");
    if (acp_json_type_of(uri) != ACP_JSON_STRING)
      return invalid_params(c, msg->handle, "ref.uri must be a string");
    if (vec_find_val(&s->lists[K_TEMPLATE], uri) == NULL &&
        vec_find_val(&s->lists[K_RESOURCE], uri) == NULL)
      return invalid_params(c, msg->handle, "unknown resource");
  } else {
    return invalid_params(c, msg->handle, "unknown ref type");
  }
  rv = call_new(c, msg, "completion/complete", CALL_COMPLETE, NULL, 0, &call);
  if (rv != 0)
    return rv;
  call->msg = msg;
  call->in_cb = true;
  rv = s->complete_cb(call, ref, arg, ctx, s->complete_ud);
  return handler_done(call, rv);
}

static int do_subscribe(acp_mcp_conn *c, const acp_rpc_msg *msg, bool on) {
  const acp_mem *m = &c->srv->mem;
  const acp_json_val *uv = param(msg, "uri");
  const char *uri;
  size_t n;
  size_t i;
  int rv;

  if (acp_json_type_of(uv) != ACP_JSON_STRING)
    return invalid_params(c, msg->handle, "uri must be a string");
  rv = acp_json_doc_str(msg->doc, uv, &uri, &n);
  if (rv != 0)
    return rv;
  for (i = 0; i < c->nsubs; i++)
    if (strlen(c->subs[i]) == n && memcmp(c->subs[i], uri, n) == 0)
      break;
  if (on && i == c->nsubs) {
    char *copy;
    if (memchr(uri, '\0', n) != NULL)
      return invalid_params(c, msg->handle, "uri contains NUL");
    /* Any URI may be subscribed (a resource may appear later), so the
     * list is bounded here: a client subscribing for ever would grow the
     * conn, and every update and subscribe scans the list. */
    if (c->nsubs >= ACP_MCP_MAX_SUBSCRIPTIONS) {
      rv = reply_error(c, msg->handle, ACP_RPC_INTERNAL_ERROR,
                       "Too many subscriptions", NULL, 0, NULL, 0);
      return rv == ACP_ERR_NOMEM ? rv : 0;
    }
    if (c->nsubs == c->subs_cap) {
      size_t ncap = c->subs_cap ? c->subs_cap * 2 : 4;
      char **p = acp__realloc(m, c->subs, ncap * sizeof(*p));
      if (p == NULL)
        return ACP_ERR_NOMEM;
      c->subs = p;
      c->subs_cap = ncap;
    }
    copy = acp__strndup(m, uri, n);
    if (copy == NULL)
      return ACP_ERR_NOMEM;
    c->subs[c->nsubs++] = copy;
  } else if (!on && i < c->nsubs) {
    acp__free(m, c->subs[i]);
    c->subs[i] = c->subs[--c->nsubs];
  }
  rv = acp_rpc_session_respond(c->rpc, msg->handle, "{}", 2);
  return rv == ACP_ERR_NOMEM ? rv : 0;
}

static int do_set_level(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  const acp_json_val *lv = param(msg, "level");
  const char *p;
  size_t n;
  int level;
  int rv;

  if (acp_json_type_of(lv) != ACP_JSON_STRING)
    return invalid_params(c, msg->handle, "level must be a string");
  rv = acp_json_doc_str(msg->doc, lv, &p, &n);
  if (rv != 0)
    return rv;
  level = acp_mcp_log_level_parse(p, n);
  if (level < 0)
    return invalid_params(c, msg->handle, "unknown log level");
  c->log_level = level;
  rv = acp_rpc_session_respond(c->rpc, msg->handle, "{}", 2);
  return rv == ACP_ERR_NOMEM ? rv : 0;
}

static int not_found(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  return reply_error(c, msg->handle, ACP_RPC_METHOD_NOT_FOUND,
                     "Method not found", NULL, 0, NULL, 0);
}

/* MARK: - Stateless requests (Private) */

static const char supported_versions[] =
    "[\"" ACP_MCP_PROTOCOL_2026_07_28 "\"]";

static int do_discover(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  acp_mcp_server *s = c->srv;
  acp_json_writer *w = c->w;

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "supportedVersions");
  acp_json_write_raw(w, supported_versions, sizeof(supported_versions) - 1);
  ACP__W_KEYL(w, "capabilities");
  w_capabilities(w, s, 2);
  w_opt_str(w, "instructions", s->instructions);
  acp_json_write_obj_end(w);
  return reply_w(c, msg->handle, w);
}

/* Read one boolean member of a SubscriptionFilter: -1 when it is present
 * and not a boolean. */
static int filter_flag(const acp_json_val *f, const char *k) {
  const acp_json_val *v = acp_json_obj_getz(f, k);
  if (v == NULL)
    return 0;
  bool on = false;
  if (acp_json_type_of(v) != ACP_JSON_BOOL || acp_json_get_bool(v, &on) != 0)
    return -1;
  return on ? 1 : 0;
}

/* The strings of a filter array (checked by the caller) into *out: a
 * partial copy is left for the caller's sub_free() on failure. */
static int strs_copy(const acp_mem *m, acp_json_doc *doc,
                     const acp_json_val *arr, char ***out, size_t *count) {
  const acp_json_val *e;
  const char *p;
  size_t n;
  int rv;

  if (acp_json_len(arr) == 0)
    return 0;
  *out = acp__calloc(m, acp_json_len(arr), sizeof(**out));
  if (*out == NULL)
    return ACP_ERR_NOMEM;
  for (e = acp_json_child(arr); e != NULL; e = acp_json_next(e)) {
    rv = acp_json_doc_str(doc, e, &p, &n);
    if (rv != 0)
      return rv;
    (*out)[*count] = acp__strndup(m, p, n);
    if ((*out)[*count] == NULL)
      return ACP_ERR_NOMEM;
    (*count)++;
  }
  return 0;
}

static void w_strs(acp_json_writer *w, const char *key, char *const *v,
                   size_t n) {
  size_t i;
  acp_json_write_keyz(w, key);
  acp_json_write_arr_begin(w);
  for (i = 0; i < n; i++)
    acp_json_write_strz(w, v[i]);
  acp_json_write_arr_end(w);
}

/*
 * subscriptions/listen: keep the request open, acknowledge the part of its
 * filter the registry can honor, then tag every matching broadcast with its
 * id until the client cancels it or the conn goes (on HTTP: the POST).
 */
static int do_listen(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  static const char *const keys[K_COUNT] = {
      "toolsListChanged", "resourcesListChanged", NULL, "promptsListChanged"};
  acp_mcp_server *s = c->srv;
  const acp_mem *m = &s->mem;
  const acp_json_val *f = param(msg, "notifications");
  const acp_json_val *uv = ACP__OBJ_GETL(f, "resourceSubscriptions");
  const acp_json_val *tv = ACP__OBJ_GETL(f, "taskIds");
  const acp_json_val *e;
  bool want_uris, want_tasks;
  const char *p;
  size_t n;
  mcp_sub *sub;
  int k;
  int rv;

  if (acp_json_type_of(f) != ACP_JSON_OBJECT)
    return invalid_params(c, msg->handle, "notifications must be an object");
  for (k = 0; k < K_COUNT; k++)
    if (keys[k] != NULL && filter_flag(f, keys[k]) < 0)
      return invalid_params(c, msg->handle,
                            "notifications members must be booleans");
  if (uv != NULL && acp_json_type_of(uv) != ACP_JSON_ARRAY)
    return invalid_params(c, msg->handle,
                          "resourceSubscriptions must be an array");
  for (e = acp_json_child(uv); e != NULL; e = acp_json_next(e)) {
    if (acp_json_type_of(e) != ACP_JSON_STRING)
      return invalid_params(c, msg->handle,
                            "resourceSubscriptions must hold strings");
    rv = acp_json_doc_str(msg->doc, e, &p, &n);
    if (rv != 0)
      return rv;
    if (memchr(p, '\0', n) != NULL)
      return invalid_params(c, msg->handle, "uri contains NUL");
  }
  if (tv != NULL && acp_json_type_of(tv) != ACP_JSON_ARRAY)
    return invalid_params(c, msg->handle, "taskIds must be an array");
  for (e = acp_json_child(tv); e != NULL; e = acp_json_next(e)) {
    if (acp_json_type_of(e) != ACP_JSON_STRING)
      return invalid_params(c, msg->handle, "taskIds must hold strings");
    rv = acp_json_doc_str(msg->doc, e, &p, &n);
    if (rv != 0)
      return rv;
    if (memchr(p, '\0', n) != NULL)
      return invalid_params(c, msg->handle, "taskId contains NUL");
  }
  /* Each open listen keeps copies of its filter for its whole life: both
   * are bounded, or a client opening listens with long lists would grow
   * the conn without end (and each broadcast scans every listen). */
  if (acp_json_len(uv) > ACP_MCP_MAX_SUBSCRIPTIONS ||
      acp_json_len(tv) > ACP_MCP_MAX_SUBSCRIPTIONS ||
      c->nlistens >= ACP_MCP_MAX_LISTENS) {
    rv = reply_error(c, msg->handle, ACP_RPC_INTERNAL_ERROR,
                     c->nlistens >= ACP_MCP_MAX_LISTENS
                         ? "Too many open listens"
                         : "Too many subscriptions",
                     NULL, 0, NULL, 0);
    return rv == ACP_ERR_NOMEM ? rv : 0;
  }
  sub = acp__calloc(m, 1, sizeof(*sub));
  if (sub == NULL)
    return ACP_ERR_NOMEM;
  sub->handle = msg->handle;
  p = acp_json_raw(msg->id, &n);
  sub->id = acp__strndup(m, p, n);
  if (sub->id == NULL)
    goto nomem;
  sub->id_len = n;
  for (k = 0; k < K_COUNT; k++)
    if (keys[k] != NULL)
      sub->lists[k] = offers(s, k) && filter_flag(f, keys[k]) == 1;
  sub->lists[K_TEMPLATE] = sub->lists[K_RESOURCE];
  /* Only what the server announces is honored (see w_capabilities()). */
  want_uris = uv != NULL && offers(s, K_RESOURCE) && s->subscribe;
  rv = want_uris ? strs_copy(m, msg->doc, uv, &sub->uris, &sub->nuris) : 0;
  /* Task status (the tasks extension, not the core filter): only for a
   * client that declared the extension, from a server that offers it. */
  want_tasks = tv != NULL && tasks_offered(s) && caps_have_tasks(c->req.caps);
  if (rv == 0 && want_tasks)
    rv = strs_copy(m, msg->doc, tv, &sub->tasks, &sub->ntasks);
  if (rv == ACP_ERR_NOMEM)
    goto nomem;
  if (rv != 0) {
    sub_free(m, sub);
    return rv;
  }
  sub_params_begin(c->nw, sub);
  ACP__W_KEYL(c->nw, "notifications");
  acp_json_write_obj_begin(c->nw);
  for (k = 0; k < K_COUNT; k++)
    if (keys[k] != NULL && sub->lists[k]) {
      acp_json_write_keyz(c->nw, keys[k]);
      acp_json_write_bool(c->nw, true);
    }
  if (want_uris)
    w_strs(c->nw, "resourceSubscriptions", sub->uris, sub->nuris);
  if (want_tasks)
    w_strs(c->nw, "taskIds", sub->tasks, sub->ntasks);
  acp_json_write_obj_end(c->nw);
  rv = sub_notify(c, "notifications/subscriptions/acknowledged", NULL);
  if (rv != 0) {
    /* Not acknowledged (output full): no subscription, say so. */
    sub_free(m, sub);
    if (rv == ACP_ERR_NOMEM)
      return rv;
    return reply_error(c, msg->handle, ACP_RPC_INTERNAL_ERROR, "Internal error",
                       NULL, 0, NULL, 0);
  }
  listen_link(c, sub);
  if (sub->ntasks > 0) {
    /* Each named task's status now: one that changed (or ended) before
     * the listen opened is not missed. Unknown ids stay silent. */
    mcp_task *t;
    size_t i;
    task_gc(s);
    for (i = 0; i < sub->ntasks; i++)
      for (t = s->tasks; t != NULL; t = t->next)
        if (t->v2 && strcmp(t->id, sub->tasks[i]) == 0) {
          sub_params_begin(c->nw, sub);
          w_task_detail(c->nw, s, t);
          rv = acp_json_write_obj_end(c->nw);
          if (rv == 0) {
            const char *q;
            size_t qn;
            q = acp_json_writer_data(c->nw, &qn);
            rv = acp_rpc_session_notify(c->rpc, "notifications/tasks", 19, q,
                                        qn);
          }
          (void)rv; /* best effort: tasks/get tells the same */
        }
  }
  return 0;
nomem:
  sub_free(m, sub);
  return ACP_ERR_NOMEM;
}

static int unsupported_version(acp_mcp_conn *c, const acp_rpc_msg *msg,
                               const acp_json_val *pv) {
  acp_json_writer *w = c->w;
  const char *d;
  size_t n;
  int rv;

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "supported");
  acp_json_write_raw(w, supported_versions, sizeof(supported_versions) - 1);
  ACP__W_KEYL(w, "requested");
  acp_json_write_val(w, pv);
  acp_json_write_obj_end(w);
  rv = acp_json_writer_error(w);
  if (rv != 0)
    return rv;
  d = acp_json_writer_data(w, &n);
  return reply_error(c, msg->handle, ACP_MCP_UNSUPPORTED_PROTOCOL_VERSION,
                     "Unsupported protocol version", NULL, 0, d, n);
}

/*
 * A request carrying `_meta["io.modelcontextprotocol/protocolVersion"]`, or
 * server/discover: check the per-request fields, then serve it at
 * 2026-07-28 from the same registry, whatever the conn negotiated.
 */
static int do_stateless(acp_mcp_conn *c, const acp_rpc_msg *msg) {
  acp_mcp_server *s = c->srv;
  const acp_json_val *meta = param(msg, "_meta");
  const acp_json_val *pv = ACP__OBJ_GETL(meta, ACP_MCP_META_PROTOCOL_VERSION);
  const acp_json_val *caps =
      ACP__OBJ_GETL(meta, ACP_MCP_META_CLIENT_CAPABILITIES);
  const acp_json_val *info = ACP__OBJ_GETL(meta, ACP_MCP_META_CLIENT_INFO);
  const acp_json_val *lv = ACP__OBJ_GETL(meta, ACP_MCP_META_LOG_LEVEL);
  int kind = -1;

  if (acp_json_type_of(meta) != ACP_JSON_OBJECT)
    return invalid_params(c, msg->handle, "_meta is required");
  if (acp_json_type_of(pv) != ACP_JSON_STRING)
    return invalid_params(c, msg->handle,
                          "_meta." ACP_MCP_META_PROTOCOL_VERSION
                          " must be a string");
  if (!ACP_JSON_STR_EQ_LIT(pv, ACP_MCP_PROTOCOL_2026_07_28))
    return unsupported_version(c, msg, pv);
  if (acp_json_type_of(caps) != ACP_JSON_OBJECT)
    return invalid_params(c, msg->handle,
                          "_meta." ACP_MCP_META_CLIENT_CAPABILITIES
                          " must be an object");
  if (info != NULL && acp_json_type_of(info) != ACP_JSON_OBJECT)
    return invalid_params(
        c, msg->handle, "_meta." ACP_MCP_META_CLIENT_INFO " must be an object");
  memset(&c->req, 0, sizeof(c->req));
  c->req.log_level = -1;
  if (lv != NULL) {
    const char *p;
    size_t n;
    int rv;

    if (acp_json_type_of(lv) != ACP_JSON_STRING)
      return invalid_params(c, msg->handle, "unknown log level");
    rv = acp_json_doc_str(msg->doc, lv, &p, &n);
    if (rv != 0)
      return rv;
    c->req.log_level = acp_mcp_log_level_parse(p, n);
    if (c->req.log_level < 0)
      return invalid_params(c, msg->handle, "unknown log level");
  }
  c->req.stateless = true;
  c->req.caps = caps;
  c->req.cap_sampling = ACP__OBJ_GETL(caps, "sampling") != NULL;
  c->req.cap_elicitation = ACP__OBJ_GETL(caps, "elicitation") != NULL;
  c->req.elicit_modes = elicit_modes_of(caps);
  c->req.cap_roots = ACP__OBJ_GETL(caps, "roots") != NULL;
  c->req.hint.ttl = -1;

  if (acp__mcp_method_is(msg, "server/discover")) {
    c->req.hint = s->cache[ACP_MCP_CACHE_DISCOVER];
    return do_discover(c, msg);
  }
  if (acp__mcp_method_is(msg, "tools/list"))
    kind = K_TOOL;
  else if (acp__mcp_method_is(msg, "resources/list"))
    kind = K_RESOURCE;
  else if (acp__mcp_method_is(msg, "resources/templates/list"))
    kind = K_TEMPLATE;
  else if (acp__mcp_method_is(msg, "prompts/list"))
    kind = K_PROMPT;
  if (kind >= 0) {
    if (!offers(s, kind))
      return not_found(c, msg);
    /* acp_mcp_list and the list cache targets share their numbering. */
    c->req.hint = s->cache[kind == K_TOOL       ? ACP_MCP_CACHE_TOOLS_LIST
                           : kind == K_RESOURCE ? ACP_MCP_CACHE_RESOURCES_LIST
                           : kind == K_TEMPLATE ? ACP_MCP_CACHE_TEMPLATES_LIST
                                                : ACP_MCP_CACHE_PROMPTS_LIST];
    return do_list(c, msg, kind);
  }
  if (acp__mcp_method_is(msg, "tools/call"))
    return offers(s, K_TOOL) ? do_tool_call(c, msg) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "resources/read"))
    return offers(s, K_RESOURCE) ? do_read(c, msg) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "prompts/get"))
    return offers(s, K_PROMPT) ? do_prompt_get(c, msg) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "completion/complete"))
    return s->complete_cb ? do_complete(c, msg) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "subscriptions/listen"))
    return do_listen(c, msg);
  if (acp__mcp_method_is(msg, "tasks/get") ||
      acp__mcp_method_is(msg, "tasks/update") ||
      acp__mcp_method_is(msg, "tasks/cancel")) {
    if (!tasks_offered(s))
      return not_found(c, msg);
    if (!caps_have_tasks(caps))
      return missing_tasks_capability(c, msg->handle);
    if (acp__mcp_method_is(msg, "tasks/get"))
      return do_tasks_get(c, msg);
    if (acp__mcp_method_is(msg, "tasks/update"))
      return do_tasks_update(c, msg);
    return do_tasks_cancel(c, msg);
  }
  /* tasks/result and tasks/list are gone from the 2026 extension.
   * initialize, ping, logging/setLevel, resources/(un)subscribe do not
   * exist at 2026-07-28. */
  return not_found(c, msg);
}

static bool is_stateless_request(const acp_rpc_msg *msg) {
  if (acp__mcp_method_is(msg, "server/discover"))
    return true;
  return ACP__OBJ_GETL(ACP__OBJ_GETI(msg->params, "_meta"),
                       ACP_MCP_META_PROTOCOL_VERSION) != NULL;
}

static int conn_on_request(acp_rpc_session *rpc, const acp_rpc_msg *msg,
                           void *user_data) {
  acp_mcp_conn *c = user_data;
  acp_mcp_server *s = c->srv;
  int rv;

  ACP_UNUSED(rpc);
  memset(&c->req, 0, sizeof(c->req));
  if (msg->params != NULL && acp_json_type_of(msg->params) == ACP_JSON_OBJECT &&
      is_stateless_request(msg)) {
    rv = do_stateless(c, msg);
    memset(&c->req, 0, sizeof(c->req));
    return rv;
  }
  if (msg->params == NULL && acp__mcp_method_is(msg, "server/discover"))
    return invalid_params(c, msg->handle, "_meta is required");
  if (acp__mcp_method_is(msg, "ping")) {
    rv = acp_rpc_session_respond(c->rpc, msg->handle, "{}", 2);
    return rv == ACP_ERR_NOMEM ? rv : 0;
  }
  if (msg->params != NULL && acp_json_type_of(msg->params) != ACP_JSON_OBJECT)
    return invalid_params(c, msg->handle, "params must be an object");
  if (acp__mcp_method_is(msg, "initialize"))
    return do_initialize(c, msg);
  if (!c->answered_init)
    return reply_error(c, msg->handle, ACP_RPC_INVALID_REQUEST,
                       "Server not initialized", NULL, 0, NULL, 0);
  if (acp__mcp_method_is(msg, "tools/list"))
    return offers(s, K_TOOL) ? do_list(c, msg, K_TOOL) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "tools/call"))
    return offers(s, K_TOOL) ? do_tool_call(c, msg) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "resources/list"))
    return offers(s, K_RESOURCE) ? do_list(c, msg, K_RESOURCE)
                                 : not_found(c, msg);
  if (acp__mcp_method_is(msg, "resources/templates/list"))
    return offers(s, K_RESOURCE) ? do_list(c, msg, K_TEMPLATE)
                                 : not_found(c, msg);
  if (acp__mcp_method_is(msg, "resources/read"))
    return offers(s, K_RESOURCE) ? do_read(c, msg) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "resources/subscribe") ||
      acp__mcp_method_is(msg, "resources/unsubscribe")) {
    if (!offers(s, K_RESOURCE) || !s->subscribe)
      return not_found(c, msg);
    return do_subscribe(c, msg, acp__mcp_method_is(msg, "resources/subscribe"));
  }
  if (acp__mcp_method_is(msg, "prompts/list"))
    return offers(s, K_PROMPT) ? do_list(c, msg, K_PROMPT) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "prompts/get"))
    return offers(s, K_PROMPT) ? do_prompt_get(c, msg) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "completion/complete"))
    return s->complete_cb ? do_complete(c, msg) : not_found(c, msg);
  if (acp__mcp_method_is(msg, "logging/setLevel"))
    return s->logging ? do_set_level(c, msg) : not_found(c, msg);
  if (tasks_offered(s) && c->version >= ACP_MCP_VERSION_2025_11_25) {
    if (acp__mcp_method_is(msg, "tasks/get"))
      return do_tasks_get(c, msg);
    if (acp__mcp_method_is(msg, "tasks/result"))
      return do_tasks_result(c, msg);
    if (acp__mcp_method_is(msg, "tasks/list"))
      return do_tasks_list(c, msg);
    if (acp__mcp_method_is(msg, "tasks/cancel"))
      return do_tasks_cancel(c, msg);
  }
  return not_found(c, msg);
}

static int conn_on_notification(acp_rpc_session *rpc, const acp_rpc_msg *msg,
                                void *user_data) {
  acp_mcp_conn *c = user_data;
  acp_mcp_server *s = c->srv;

  ACP_UNUSED(rpc);
  if (!c->answered_init)
    return 0;
  if (acp__mcp_method_is(msg, "notifications/initialized")) {
    if (c->initialized)
      return 0;
    c->initialized = true;
    return s->on_initialized ? s->on_initialized(c, c->user_data) : 0;
  }
  if (s->on_notification)
    return s->on_notification(c, msg, c->user_data);
  return 0;
}

static int conn_on_cancel(acp_rpc_session *rpc, uint64_t handle,
                          void *user_data) {
  acp_mcp_conn *c = user_data;
  acp_mcp_call *call;
  /* What the handle is, from its tag: no search of the conn's lists. */
  void *tag = acp__rpc_tag(rpc, handle);
  int rv = 0;

  if (tag == NULL)
    return 0;
  if ((uintptr_t)tag & 1u) {
    /* A cancelled subscriptions/listen ends silently (MCP: no response). */
    mcp_sub *sub = (mcp_sub *)((uintptr_t)tag & ~(uintptr_t)1u);
    listen_unlink(c, sub);
    sub_free(&c->srv->mem, sub);
    return acp_rpc_session_drop(rpc, handle) == ACP_ERR_NOMEM ? ACP_ERR_NOMEM
                                                              : 0;
  }
  call = tag;
  if (call->answered || call->cancelled)
    return 0;
  call->cancelled = true;
  acp_rpc_session_drop(rpc, handle);
  call->refs++; /* keep the call alive through the callbacks below */
  for (;;) {
    mcp_out *o;
    for (o = c->outs; o != NULL; o = o->next)
      if (o->call == call && !o->cancelling)
        break;
    if (o == NULL)
      break;
    o->cancelling = true;
    rv = acp_rpc_session_cancel(
        rpc, o->id, ACP_RPC_CANCEL_NOTIFY | ACP_RPC_CANCEL_COMPLETE, c->now_ms);
    if (rv != 0 && acp_is_fatal(rv))
      break;
    rv = 0;
  }
  if (rv == 0 && call->on_cancel)
    rv = call->on_cancel(call, call->cancel_ud);
  call->refs--;
  call_maybe_free(call);
  return rv;
}

/* MARK: - Connections (Public) */

int acp_mcp_conn_new(acp_mcp_conn **out, acp_mcp_server *s, void *user_data) {
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_options *opts = NULL;
  acp_mcp_conn *c = NULL;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c = acp__calloc(&s->mem, 1, sizeof(*c));
  if (c == NULL)
    return ACP_ERR_NOMEM;
  c->srv = s;
  c->user_data = user_data;
  acp__buf_init(&c->tmp, &s->mem, 0);
  acp__buf_init(&c->text_out, &s->mem, 0);
  rv = acp_rpc_callbacks_new(&cbs);
  if (rv != 0)
    goto cleanup;
  acp_rpc_callbacks_set_on_request(cbs, conn_on_request);
  acp_rpc_callbacks_set_on_notification(cbs, conn_on_notification);
  acp_rpc_callbacks_set_on_cancel(cbs, conn_on_cancel);
  rv = acp_rpc_options_new(&opts);
  if (rv != 0)
    goto cleanup;
  acp_rpc_options_set_cancel_style(opts, ACP_RPC_CANCEL_STYLE_MCP);
  acp_rpc_options_set_batches(opts, 0);
  rv = acp_rpc_session_new(&c->rpc, cbs, c, opts, &s->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_writer_new(&c->w, 0, &s->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_writer_new(&c->nw, 0, &s->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_writer_new(&c->mw, 0, &s->mem);
  if (rv != 0)
    goto cleanup;
  rv = acp_json_writer_new(&c->iw, 0, &s->mem);
  if (rv != 0)
    goto cleanup;
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  *out = c;
cleanup:
  acp_rpc_callbacks_free(cbs);
  acp_rpc_options_free(opts);
  if (rv != 0) {
    acp_json_writer_free(c->mw);
    acp_json_writer_free(c->iw);
    acp_json_writer_free(c->w);
    acp_json_writer_free(c->nw);
    acp_rpc_session_free(c->rpc);
    acp__buf_dispose(&c->tmp);
    acp__buf_dispose(&c->text_out);
    acp__free(&s->mem, c);
  }
  return rv;
}

/* The conn goes with calls still running: a handler that holds one (a
 * timer, a request of its own) learns it through the call's cancel
 * callback, as for notifications/cancelled, instead of keeping a pointer
 * to a call about to be freed. Whatever it answers is dropped. */
static void conn_cancel_calls(acp_mcp_conn *c) {
  acp_mcp_call *call;

  for (call = c->calls; call != NULL; call = call->next) {
    if (call->answered || call->cancelled || call->on_cancel == NULL)
      continue;
    call->cancelled = true;
    /* tasks_conn_gone() detached its task already; the answer must not
     * reach it either. */
    call->task = NULL;
    call->refs++; /* freed below with the conn, not by an answer */
    (void)call->on_cancel(call, call->cancel_ud);
    call->refs--;
  }
}

/* The calls of `c` go: 2025 task requests they sent to other sessions
 * (task_v1_request()) end now with a local cancellation (their callbacks
 * run, the calls being cancelled already), so no response can reach a
 * freed call. */
static void conn_drop_task_requests(acp_mcp_conn *c) {
  acp_mcp_conn *x;
  mcp_out *o;

  for (x = c->srv->conns; x != NULL; x = x->next) {
    if (x == c)
      continue;
    do {
      for (o = x->outs; o != NULL; o = o->next)
        if (o->for_task && o->call->conn == c)
          break;
      if (o != NULL &&
          acp_rpc_session_cancel(x->rpc, o->id, ACP_RPC_CANCEL_COMPLETE,
                                 x->now_ms) != 0) {
        /* Not pending any more (cannot happen): unlink it by hand. */
        out_unlink(x, o);
        task_v1_input_done(o->call);
        o->call->refs--;
        acp__free(&c->srv->mem, o);
      }
    } while (o != NULL);
  }
}

void acp_mcp_conn_free(acp_mcp_conn *c) {
  acp_mcp_server *s;
  size_t i;

  if (c == NULL)
    return;
  s = c->srv;
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  tasks_conn_gone(c);
  conn_cancel_calls(c);
  conn_drop_task_requests(c);
  while (c->outs) {
    mcp_out *o = c->outs;
    c->outs = o->next;
    if (o->for_task) {
      /* A 2025 task's request to this session, never to be answered: the
       * task (on the task conn) lets go of it. */
      task_v1_input_done(o->call);
      o->call->refs--;
      call_maybe_free(o->call);
    }
    acp__free(&s->mem, o);
  }
  while (c->calls)
    call_unlink_free(c->calls);
  while (c->listens) {
    mcp_sub *sub = c->listens;
    listen_unlink(c, sub);
    sub_free(&s->mem, sub);
  }
  for (i = 0; i < c->nsubs; i++)
    acp__free(&s->mem, c->subs[i]);
  acp__free(&s->mem, c->subs);
  acp__free(&s->mem, c->client_caps);
  acp__free(&s->mem, c->client_info);
  acp_json_doc_free(c->rdoc);
  acp_json_writer_free(c->mw);
  acp_json_writer_free(c->iw);
  acp_json_writer_free(c->w);
  acp_json_writer_free(c->nw);
  acp_rpc_session_free(c->rpc);
  acp__buf_dispose(&c->tmp);
  acp__buf_dispose(&c->text_out);
  acp__free(&s->mem, c);
}

void *acp_mcp_conn_get_user_data(const acp_mcp_conn *c) {
  return c ? c->user_data : NULL;
}

acp_mcp_server *acp_mcp_conn_server(const acp_mcp_conn *c) {
  return c ? c->srv : NULL;
}

acp_rpc_session *acp_mcp_conn_session(acp_mcp_conn *c) {
  return c ? c->rpc : NULL;
}

acp_ssize acp_mcp_conn_recv(acp_mcp_conn *c, const char *data, size_t len,
                            uint64_t now_ms) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->now_ms = now_ms;
  c->srv->now_ms = now_ms;
  return acp_rpc_session_recv(c->rpc, data, len, now_ms);
}

acp_ssize acp_mcp_conn_send(acp_mcp_conn *c, const char **data) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp_rpc_session_send(c->rpc, data);
}

int acp_mcp_conn_recv_eof(acp_mcp_conn *c, uint64_t now_ms) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->now_ms = now_ms;
  c->srv->now_ms = now_ms;
  return acp_rpc_session_recv_eof(c->rpc, now_ms);
}

uint64_t acp_mcp_conn_get_expiry(const acp_mcp_conn *c) {
  return c ? acp_rpc_session_get_expiry(c->rpc) : UINT64_MAX;
}

int acp_mcp_conn_handle_expiry(acp_mcp_conn *c, uint64_t now_ms) {
  if (c == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c->now_ms = now_ms;
  c->srv->now_ms = now_ms;
  return acp_rpc_session_handle_expiry(c->rpc, now_ms);
}

acp_mcp_version acp_mcp_conn_version(const acp_mcp_conn *c) {
  return c ? c->version : ACP_MCP_VERSION_UNKNOWN;
}

int acp_mcp_conn_is_initialized(const acp_mcp_conn *c) {
  return c && c->initialized ? 1 : 0;
}

const char *acp_mcp_conn_client_capabilities(const acp_mcp_conn *c,
                                             size_t *len) {
  if (len)
    *len = c ? c->client_caps_len : 0;
  return c ? c->client_caps : NULL;
}

const char *acp_mcp_conn_client_info(const acp_mcp_conn *c, size_t *len) {
  if (len)
    *len = c ? c->client_info_len : 0;
  return c ? c->client_info : NULL;
}

acp_mcp_log_level acp_mcp_conn_log_level(const acp_mcp_conn *c) {
  return c ? (acp_mcp_log_level)c->log_level : ACP_MCP_LOG_DEBUG;
}

int acp_mcp_conn_log(acp_mcp_conn *c, acp_mcp_log_level level,
                     const char *logger, const char *data, size_t len) {
  if (c == NULL || acp_mcp_log_level_str(level) == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!c->srv->logging || !c->answered_init || (int)level < c->log_level)
    return 0;
  return conn_log_send(c, level, logger, data, len);
}

static int conn_log_send(acp_mcp_conn *c, acp_mcp_log_level level,
                         const char *logger, const char *data, size_t len) {
  acp_json_writer *w;
  const char *p;
  size_t n;
  int rv;

  w = c->nw;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "level");
  acp_json_write_strz(w, acp_mcp_log_level_str(level));
  w_opt_str(w, "logger", logger);
  ACP__W_KEYL(w, "data");
  if (data)
    acp_json_write_raw(w, data, len);
  else
    acp_json_write_null(w);
  rv = acp_json_write_obj_end(w);
  if (rv != 0)
    return rv == ACP_ERR_NOMEM || rv == ACP_ERR_LIMIT
               ? rv
               : ACP_ERR_INVALID_ARGUMENT;
  p = acp_json_writer_data(w, &n);
  return acp_rpc_session_notify(c->rpc, "notifications/message", 21, p, n);
}

int acp_mcp_conn_notify(acp_mcp_conn *c, const char *method, const char *params,
                        size_t params_len) {
  if (c == NULL || method == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp_rpc_session_notify(c->rpc, method, strlen(method), params,
                                params_len);
}
