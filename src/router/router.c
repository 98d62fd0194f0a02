/*
 * The conductor's routing core: see include/acp/router.h for the rules.
 *
 * Every input line is parsed once into a reused tape; the outgoing message
 * is assembled directly in the destination link's output buffer from a few
 * literal envelope pieces and spans of the input (ids, method names, params,
 * results), so a forwarded payload is copied exactly once. A line given
 * with acp_router_recv_framed_ref() is not copied at all where it is large:
 * its big spans stay where they lie and are handed out as pieces
 * (acp_router_send_iov()), which the runtime writes with one writev.
 */
#include <stdio.h>
#include "acp/json.h"
#include "acp/mcp_acp.h"
#include "acp/rpc.h"
#include "json/json_int.h"
#include "router_int.h"

/* MARK: - Types (Private) */

#define DEFAULT_MAX_PENDING 65536
#define DEFAULT_MAX_OUTPUT ((size_t)1 << 30)
#define MAX_COMPONENTS 65535
#define MAX_MCP 65536 /* MCP-over-ACP server and connection ids remembered */
/* Spans of a lent input line at least this long are borrowed rather than
 * copied: below it a copy costs less than one more piece for the kernel
 * (the JSON-RPC session's figure, BORROW_MIN in rpc_session.c). */
#define BORROW_MIN ((size_t)4096)

enum { DIR_RIGHT = 0, DIR_LEFT = 1 };

struct acp_router_options {
  acp_router_mode mode;
  acp_router_proxy_methods pm;
  size_t max_pending;
  size_t max_output;
  uint32_t max_depth;
  acp_router_trace_cb trace;
  acp_router_event_cb event;
};

/* A borrowed span of the line being routed: it belongs before
 * out.data[off] in the link's output. */
typedef struct rt_span {
  size_t off;
  const char *p;
  size_t n;
} rt_span;

typedef struct rt_link {
  acp__buf out;
  /* Output borrowed from a lent line (acp_router_recv_framed_ref()), in
   * order; `ext` is their total length, counted against the output cap
   * together with out.len. */
  rt_span *spans;
  size_t nspans;
  size_t spans_cap;
  size_t ext;
  acp_rpc_iov *iov; /* acp_router_send_iov()'s pieces */
  size_t iov_cap;
  acp_rpc_iov one;
  acp_router_link_state state;
  acp_router_wire wire;
  bool handed;     /* out was returned by acp_router_send() */
  bool batch_open; /* an array line is being written (batch) */
  int64_t next_id;
  char *reason; /* closed: escaped JSON string, quotes included */
  size_t reason_len;
  char *data; /* closed: error data, or NULL */
  size_t data_len;
  bool has_init;     /* an initialize was delivered to this link */
  char *init_params; /* its params (NULL: none) */
  size_t init_params_len;
  char *init_result; /* its successful InitializeResponse result */
  size_t init_result_len;
  int64_t init_version; /* that result's protocolVersion, -1 if none */
} rt_link;

/* An MCP-over-ACP server id declared by a component, or a connection id
 * its mcp/connect answer gave: which link serves it. */
typedef struct rt_mcp {
  char *id; /* decoded; NULL: a free slot (a connection that ended) */
  size_t len;
  uint32_t link;
  /* Slot + 1 of the next in this slot's bucket (mcp_hash) or, for a free
   * slot, of the next free one; 0 ends either list. */
  uint32_t next;
  bool conn;
  bool dead; /* the link died: nothing more is routed for it */
} rt_mcp;

struct acp_router {
  acp_mem mem;
  rt_mcp *mcp;
  size_t nmcp, capmcp;
  /* Past MCP_INDEX_MIN slots, the ids are found by hash (mcp_find()):
   * buckets of slot + 1, from a seed of this router's own (the agent
   * picks connection ids); and the slots of ended connections wait in a
   * list for the next (mcp_add()). */
  uint32_t *mcp_hash;
  size_t mcp_hcap;
  uint64_t mcp_seed;
  uint32_t mcp_free;
  struct acp_router_options o;
  void *user_data;
  size_t n;
  rt_link *links;
  rt_table tab;
  acp_json_doc *doc;
  acp_json_doc *doc2; /* re-parsing stored params (G0 fallback) */
  bool in_batch;
  bool in_cb;
  /* The request the next written message answers (trace only). */
  uint32_t ans_link;
  int64_t ans_id;
  bool fatal;
  uint32_t ncut; /* live RT_F_CUT entries */
  /* The line being routed, while it may be borrowed from
   * (acp_router_recv_framed_ref()); NULL otherwise. */
  const char *in_lo;
  const char *in_hi;
};

/* An outgoing message being written to one link. */
typedef struct wmsg {
  acp_router *r;
  uint32_t to;
  uint32_t from;
  size_t mark;  /* out.len before anything of this message */
  size_t start; /* first byte of the message proper */
  bool opened;  /* this message opened the batch array */
  int err;
} wmsg;

/* MARK: - Small helpers (Private) */

static bool is_agent(const acp_router *r, uint32_t k) {
  return r->o.mode == ACP_ROUTER_MODE_AGENT && k == r->n;
}

static bool is_proxy(const acp_router *r, uint32_t k) {
  return k >= 1 && k <= r->n && !is_agent(r, k);
}

static void event(acp_router *r, acp_router_event_type t, uint32_t link,
                  const char *detail) {
  if (r->o.event == NULL)
    return;
  r->in_cb = true;
  r->o.event(r, t, link == RT_SELF ? ACP_ROUTER_SELF : link, detail,
             r->user_data);
  r->in_cb = false;
}

static int nomem(acp_router *r, int rv) {
  if (rv == ACP_ERR_NOMEM)
    r->fatal = true;
  return rv;
}

static char *dup_bytes(acp_router *r, const char *p, size_t n) {
  char *d = acp__malloc(&r->mem, n);

  if (d != NULL && n > 0)
    memcpy(d, p, n);
  return d;
}

static size_t fmt_i64(char *buf, int64_t v) {
  char tmp[24];
  size_t n = 0;
  size_t i = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

  do {
    tmp[n++] = (char)('0' + (int)(u % 10));
    u /= 10;
  } while (u != 0);
  if (v < 0)
    buf[i++] = '-';
  while (n > 0)
    buf[i++] = tmp[--n];
  return i;
}

/* Whether v is the string `lit` (a literal: its length is not counted at
 * run time, which matters for the few compares every routed call pays). */
#define str_is(v, lit) (ACP_JSON_STR_EQ_LIT((v), lit) != 0)

/* right(k): next live component after k; link 0 past the end (proxy mode). */
static uint32_t right_of(const acp_router *r, uint32_t k) {
  size_t j;

  for (j = (size_t)k + 1; j <= r->n; j++)
    if (r->links[j].state != ACP_ROUTER_LINK_BYPASSED)
      return (uint32_t)j;
  return 0;
}

/* left(k): previous live component before k, else link 0. */
static uint32_t left_of(const acp_router *r, uint32_t k) {
  size_t j;

  for (j = k; j-- > 1;)
    if (r->links[j].state != ACP_ROUTER_LINK_BYPASSED)
      return (uint32_t)j;
  return 0;
}

/* MARK: - Writing (Private) */

/* Bytes the link's output may still take, borrowed spans counted. */
static size_t out_room(const rt_link *l) {
  size_t used = l->out.len + l->ext;

  return used < l->out.len || used > l->out.max ? 0 : l->out.max - used;
}

/* Whether p[0..n) lies inside the line being routed, which may be lent
 * (compared as integers: ordering pointers into different objects is
 * undefined). */
static bool in_line(const acp_router *r, const char *p, size_t n) {
  uintptr_t lo = (uintptr_t)r->in_lo;
  uintptr_t q = (uintptr_t)p;

  return r->in_lo != NULL && q >= lo && q <= (uintptr_t)r->in_hi &&
         n <= (size_t)((uintptr_t)r->in_hi - q);
}

static int span_add(acp_router *r, rt_link *l, const char *p, size_t n) {
  if (l->nspans == l->spans_cap) {
    size_t ncap = l->spans_cap ? l->spans_cap * 2 : 4;
    rt_span *ns = acp__realloc(&r->mem, l->spans, ncap * sizeof(*ns));

    if (ns == NULL)
      return ACP_ERR_NOMEM;
    l->spans = ns;
    l->spans_cap = ncap;
  }
  l->spans[l->nspans].off = l->out.len;
  l->spans[l->nspans].p = p;
  l->spans[l->nspans].n = n;
  l->nspans++;
  l->ext += n;
  return 0;
}

/* Forget a link's output (written, or discarded). */
static void out_reset(rt_link *l) {
  l->out.len = 0;
  l->nspans = 0;
  l->ext = 0;
  l->handed = false;
}

/*
 * Copy a link's borrowed spans into its buffer, in order: for
 * acp_router_send(), which hands out one contiguous buffer, and before the
 * lent line changes (acp_router_copy_borrowed()). The buffer grows once
 * (past the cap if need be: the spans were counted against it already);
 * each stretch of own bytes moves back to its final place, last first.
 */
static int spans_flatten(acp_router *r, rt_link *l) {
  size_t max = l->out.max;
  size_t end, src_end, i;
  int rv;

  if (l->nspans == 0)
    return 0;
  l->out.max = SIZE_MAX;
  rv = acp__buf_reserve(&l->out, l->ext);
  l->out.max = max;
  if (rv != 0)
    return nomem(r, ACP_ERR_NOMEM);
  end = l->out.len + l->ext;
  src_end = l->out.len;
  for (i = l->nspans; i-- > 0;) {
    const rt_span *sp = &l->spans[i];
    size_t tail = src_end - sp->off;

    memmove(l->out.data + end - tail, l->out.data + sp->off, tail);
    end -= tail;
    end -= sp->n;
    memcpy(l->out.data + end, sp->p, sp->n);
    src_end = sp->off;
  }
  l->out.len += l->ext;
  l->nspans = 0;
  l->ext = 0;
  return 0;
}

/* Append bytes to the message: copied, or, for a large piece of a lent
 * line, borrowed. The cap counts both. */
static void w_put(wmsg *w, const char *s, size_t n) {
  rt_link *l;

  if (w->err != 0)
    return;
  l = &w->r->links[w->to];
  if (n >= BORROW_MIN && in_line(w->r, s, n)) {
    w->err = n > out_room(l) ? ACP_ERR_LIMIT : span_add(w->r, l, s, n);
    return;
  }
  if (l->ext > 0 && n > out_room(l)) {
    w->err = ACP_ERR_LIMIT;
    return;
  }
  w->err = acp__buf_append(&l->out, s, n);
}

static void w_lit(wmsg *w, const char *s) {
  w_put(w, s, strlen(s));
}

static void w_val(wmsg *w, const acp_json_val *v) {
  size_t n;
  const char *p = acp_json_raw(v, &n);

  w_put(w, p, n);
}

static void w_begin(acp_router *r, wmsg *w, uint32_t from, uint32_t to) {
  rt_link *l = &r->links[to];

  w->r = r;
  w->to = to;
  w->from = from;
  w->err = 0;
  w->opened = false;
  if (l->handed)
    out_reset(l);
  w->mark = l->out.len;
  if (r->in_batch) {
    if (!l->batch_open) {
      w_put(w, "[", 1);
      l->batch_open = true;
      w->opened = true;
    } else {
      w_put(w, ",", 1);
    }
  }
  w->start = l->out.len;
}

static void w_abort(wmsg *w) {
  rt_link *l = &w->r->links[w->to];

  /* Every message starts and ends with own bytes: the spans at or past
   * the mark are this message's. */
  while (l->nspans > 0 && l->spans[l->nspans - 1].off >= w->mark) {
    l->nspans--;
    l->ext -= l->spans[l->nspans].n;
  }
  l->out.len = w->mark;
  if (w->opened)
    l->batch_open = false;
}

/* Finish a message: 0, or the write error (the message is then undone). */
static int w_end(wmsg *w) {
  acp_router *r = w->r;
  rt_link *l = &r->links[w->to];
  acp_router_hop hop;

  if (!r->in_batch)
    w_put(w, "\n", 1);
  if (w->err != 0) {
    w_abort(w);
    return w->err;
  }
  if (r->o.trace != NULL) {
    hop.from = w->from == RT_SELF ? ACP_ROUTER_SELF : w->from;
    hop.to = w->to;
    hop.data = l->out.data + w->start;
    hop.len = l->out.len - w->start - (r->in_batch ? 0 : 1);
    hop.in_batch = r->in_batch;
    hop.answers_link =
        r->ans_link == RT_SELF ? ACP_ROUTER_SELF : (size_t)r->ans_link;
    hop.answers_id = r->ans_link == RT_SELF ? 0 : r->ans_id;
    r->in_cb = true;
    r->o.trace(r, &hop, r->user_data);
    r->in_cb = false;
  }
  return 0;
}

/* Append an escaped JSON string (quotes included); bytes taken as UTF-8. */
static int buf_escaped(acp__buf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  size_t i;
  size_t run = 0;
  int rv = acp__buf_putc(b, '"');

  for (i = 0; i < n && rv == 0; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[6];
    size_t el = 2;
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    rv = acp__buf_append(b, s + run, i - run);
    run = i + 1;
    esc[0] = '\\';
    if (c == '"' || c == '\\') {
      esc[1] = (char)c;
    } else if (c == '\n') {
      esc[1] = 'n';
    } else if (c == '\t') {
      esc[1] = 't';
    } else if (c == '\r') {
      esc[1] = 'r';
    } else {
      esc[1] = 'u';
      esc[2] = '0';
      esc[3] = '0';
      esc[4] = hex[c >> 4];
      esc[5] = hex[c & 15];
      el = 6;
    }
    if (rv == 0)
      rv = acp__buf_append(b, esc, el);
  }
  if (rv == 0)
    rv = acp__buf_append(b, s + run, n - run);
  if (rv == 0)
    rv = acp__buf_putc(b, '"');
  return rv;
}

/*
 * Write an error response to `to`. `id` is raw JSON (NULL: null), `message`
 * a JSON string literal WITH quotes, `data` raw JSON or NULL. Output-cap
 * failures drop the answer (reported); only NOMEM is returned.
 */
static int emit_error(acp_router *r, uint32_t to, const char *id, size_t id_len,
                      int code, const char *message, size_t message_len,
                      const char *data, size_t data_len) {
  wmsg w;
  char num[24];
  int rv;

  if (r->links[to].state == ACP_ROUTER_LINK_CLOSED ||
      r->links[to].state == ACP_ROUTER_LINK_BYPASSED)
    return 0;
  w_begin(r, &w, RT_SELF, to);
  w_lit(&w, "{\"jsonrpc\":\"2.0\",\"id\":");
  if (id != NULL)
    w_put(&w, id, id_len);
  else
    w_lit(&w, "null");
  w_lit(&w, ",\"error\":{\"code\":");
  w_put(&w, num, fmt_i64(num, code));
  w_lit(&w, ",\"message\":");
  w_put(&w, message, message_len);
  if (data != NULL) {
    w_lit(&w, ",\"data\":");
    w_put(&w, data, data_len);
  }
  w_lit(&w, "}}");
  rv = w_end(&w);
  if (rv == ACP_ERR_LIMIT) {
    event(r, ACP_ROUTER_EVENT_DROPPED, to, "error answer exceeds output cap");
    return 0;
  }
  return nomem(r, rv);
}

/* Write a successful response with a literal `result` to `to`; as
 * emit_error(). */
static int emit_result(acp_router *r, uint32_t to, const char *id,
                       size_t id_len, const char *result) {
  wmsg w;
  int rv;

  if (r->links[to].state == ACP_ROUTER_LINK_CLOSED ||
      r->links[to].state == ACP_ROUTER_LINK_BYPASSED)
    return 0;
  w_begin(r, &w, RT_SELF, to);
  w_lit(&w, "{\"jsonrpc\":\"2.0\",\"id\":");
  w_put(&w, id, id_len);
  w_lit(&w, ",\"result\":");
  w_lit(&w, result);
  w_lit(&w, "}");
  rv = w_end(&w);
  if (rv == ACP_ERR_LIMIT) {
    event(r, ACP_ROUTER_EVENT_DROPPED, to, "answer exceeds output cap");
    return 0;
  }
  return nomem(r, rv);
}

/* An error answer with a static message and a static reason as `data`. */
static int reject(acp_router *r, uint32_t to, const acp_json_val *id, int code,
                  const char *message, const char *reason) {
  char msg[96];
  char data[160];
  size_t ml = strlen(message);
  size_t dl = strlen(reason);
  const char *idp = NULL;
  size_t idn = 0;

  if (ml + 2 > sizeof(msg) || dl + 2 > sizeof(data))
    return ACP_ERR_INTERNAL;
  msg[0] = '"';
  memcpy(msg + 1, message, ml);
  msg[ml + 1] = '"';
  data[0] = '"';
  memcpy(data + 1, reason, dl);
  data[dl + 1] = '"';
  if (id != NULL) {
    acp_json_type t = acp_json_type_of(id);
    if (t == ACP_JSON_STRING || t == ACP_JSON_NUMBER || t == ACP_JSON_NULL)
      idp = acp_json_raw(id, &idn);
  }
  event(r, ACP_ROUTER_EVENT_REJECTED, to, reason);
  return emit_error(r, to, idp, idn, code, msg, ml + 2, data, dl + 2);
}

/* The error for a request routed to a closed link. */
static int answer_closed(acp_router *r, uint32_t to, uint32_t closed,
                         const char *id, size_t id_len) {
  rt_link *c = &r->links[closed];

  return emit_error(r, to, id, id_len, ACP_RPC_INTERNAL_ERROR, c->reason,
                    c->reason_len, c->data, c->data_len);
}

/* MARK: - Proxy method names (Private) */

enum {
  PM_NONE = 0,
  PM_INIT,     /* proxy/initialize, _proxy/initialize */
  PM_SUCCESSOR /* proxy/successor and the older spellings */
};

static int classify_method(const acp_json_val *m, acp_router_wire *wire) {
  size_t n;
  const char *s = acp_json_str_raw(m, &n);

  if (s == NULL || acp_json_str_has_escapes(m)) {
    /* Escaped spellings are rare; compare decoded. */
    if (str_is(m, "proxy/successor")) {
      *wire = ACP_ROUTER_WIRE_G2;
      return PM_SUCCESSOR;
    }
    if (str_is(m, "_proxy/successor")) {
      *wire = ACP_ROUTER_WIRE_G1;
      return PM_SUCCESSOR;
    }
    if (str_is(m, "_proxy/successor/request") ||
        str_is(m, "_proxy/successor/notification")) {
      *wire = ACP_ROUTER_WIRE_G0;
      return PM_SUCCESSOR;
    }
    if (str_is(m, "proxy/initialize")) {
      *wire = ACP_ROUTER_WIRE_G2;
      return PM_INIT;
    }
    if (str_is(m, "_proxy/initialize")) {
      *wire = ACP_ROUTER_WIRE_G1;
      return PM_INIT;
    }
    return PM_NONE;
  }
  if (n < 15 || (s[0] != 'p' && s[0] != '_'))
    return PM_NONE;
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(s, lit, n) == 0)
  if (IS("proxy/successor")) {
    *wire = ACP_ROUTER_WIRE_G2;
    return PM_SUCCESSOR;
  }
  if (IS("_proxy/successor")) {
    *wire = ACP_ROUTER_WIRE_G1;
    return PM_SUCCESSOR;
  }
  if (IS("_proxy/successor/request") || IS("_proxy/successor/notification")) {
    *wire = ACP_ROUTER_WIRE_G0;
    return PM_SUCCESSOR;
  }
  if (IS("proxy/initialize")) {
    *wire = ACP_ROUTER_WIRE_G2;
    return PM_INIT;
  }
  if (IS("_proxy/initialize")) {
    *wire = ACP_ROUTER_WIRE_G1;
    return PM_INIT;
  }
#undef IS
  return PM_NONE;
}

static const char *successor_name(acp_router_wire wire, bool is_req) {
  switch (wire) {
  case ACP_ROUTER_WIRE_G1:
    return "\"_proxy/successor\"";
  case ACP_ROUTER_WIRE_G0:
    return is_req ? "\"_proxy/successor/request\""
                  : "\"_proxy/successor/notification\"";
  default:
    return "\"proxy/successor\"";
  }
}

static bool meta_proxy_true(const acp_json_val *params) {
  const acp_json_val *meta = acp_json_obj_getz(params, "_meta");
  bool b = false;

  return acp_json_get_bool(acp_json_obj_getz(meta, "proxy"), &b) == 0 && b;
}

/*
 * Write initialize params for a G0 proxy: the original object with
 * "proxy": true merged into its `_meta` (everything else spliced).
 */
static int w_g0_params(acp_router *r, wmsg *w, const char *params, size_t len) {
  const acp_json_val *root = NULL;
  const acp_json_val *k;
  const acp_json_val *meta = NULL;
  int rv;

  if (params != NULL) {
    if (r->doc2 == NULL) {
      rv = acp_json_doc_new(&r->doc2, &r->mem);
      if (rv != 0)
        return nomem(r, rv);
    }
    rv = acp_json_doc_parse(r->doc2, params, len, NULL);
    if (rv == ACP_ERR_NOMEM)
      return nomem(r, rv);
    if (rv == 0 &&
        acp_json_type_of(acp_json_doc_root(r->doc2)) == ACP_JSON_OBJECT)
      root = acp_json_doc_root(r->doc2);
  }
  meta = acp_json_obj_getz(root, "_meta");
  w_lit(w, "{\"_meta\":{\"proxy\":true");
  if (acp_json_type_of(meta) == ACP_JSON_OBJECT) {
    for (k = acp_json_child(meta); k; k = acp_json_next(acp_json_next(k))) {
      if (str_is(k, "proxy"))
        continue;
      w_lit(w, ",");
      w_val(w, k);
      w_lit(w, ":");
      w_val(w, acp_json_next(k));
    }
  }
  w_lit(w, "}");
  for (k = acp_json_child(root); k; k = acp_json_next(acp_json_next(k))) {
    if (str_is(k, "_meta"))
      continue;
    w_lit(w, ",");
    w_val(w, k);
    w_lit(w, ":");
    w_val(w, acp_json_next(k));
  }
  w_lit(w, "}");
  return 0;
}

/* MARK: - Forwarding (Private) */

/*
 * What to deliver: a method (raw JSON string) with optional params (raw),
 * or, for `init`, an initialize whose name depends on the destination.
 */
typedef struct call {
  const char *method; /* raw JSON string, quotes included */
  size_t method_len;
  const char *params; /* raw JSON or NULL */
  size_t params_len;
  const char *id; /* raw original id, NULL for a notification */
  size_t id_len;
  bool init;
  int kind;        /* CK_*: the session methods a cut-off turn concerns */
  const char *sid; /* their params.sessionId (raw string), else NULL */
  size_t sid_len;
  uint32_t mcp; /* an mcp/connect: index in r->mcp of its server + 1 */
} call;

enum { CK_OTHER = 0, CK_PROMPT, CK_CANCEL, CK_UPDATE, CK_PERMISSION };

/*
 * Write a request/notification envelope to w->to. `form_wrap` wraps in the
 * destination's proxy/successor spelling; `init_wire` >= 0 writes a
 * proxy initialize in that spelling instead of the call's own method.
 */
static int w_call(acp_router *r, wmsg *w, const call *c, const char *newid,
                  size_t newid_len, bool wrap, int init_wire) {
  w_lit(w, "{\"jsonrpc\":\"2.0\"");
  if (newid != NULL) {
    w_lit(w, ",\"id\":");
    w_put(w, newid, newid_len);
  }
  if (wrap) {
    w_lit(w, ",\"method\":");
    w_lit(w, successor_name(r->links[w->to].wire, newid != NULL));
    w_lit(w, ",\"params\":{\"method\":");
    w_put(w, c->method, c->method_len);
    if (c->params != NULL) {
      w_lit(w, ",\"params\":");
      w_put(w, c->params, c->params_len);
    }
    w_lit(w, "}}");
    return 0;
  }
  w_lit(w, ",\"method\":");
  if (init_wire == ACP_ROUTER_WIRE_G2)
    w_lit(w, "\"proxy/initialize\"");
  else if (init_wire == ACP_ROUTER_WIRE_G1)
    w_lit(w, "\"_proxy/initialize\"");
  else if (init_wire == ACP_ROUTER_WIRE_G0)
    w_lit(w, "\"initialize\"");
  else
    w_put(w, c->method, c->method_len);
  if (init_wire == ACP_ROUTER_WIRE_G0) {
    int rv;
    w_lit(w, ",\"params\":");
    rv = w_g0_params(r, w, c->params, c->params_len);
    if (rv != 0)
      return rv;
  } else if (c->params != NULL) {
    w_lit(w, ",\"params\":");
    w_put(w, c->params, c->params_len);
  }
  w_lit(w, "}");
  return 0;
}

static int remember_init_params(acp_router *r, uint32_t to, const call *c) {
  rt_link *l = &r->links[to];
  char *p = NULL;

  if (c->params != NULL) {
    p = dup_bytes(r, c->params, c->params_len);
    if (p == NULL)
      return nomem(r, ACP_ERR_NOMEM);
  }
  acp__free(&r->mem, l->init_params);
  l->init_params = p;
  l->init_params_len = c->params_len;
  l->has_init = true;
  return 0;
}

/* MARK: - Cut-off turns (Private) */

/*
 * When the component that sent a session/prompt toward the agent dies, the
 * prompt's answer has nowhere to go, and `$/cancel_request` alone may be
 * ignored (ACP makes it optional): agents kept running the old turn and its
 * output showed up in the client's next one. So the router also sends
 * `session/cancel`, and keeps the entry (RT_F_CUT, source RT_SELF) until
 * the agent ends that turn by answering the prompt. Meanwhile, for that
 * session on that link: its session/update notifications are dropped (the
 * client was already told the prompt failed), its permission requests are
 * answered `cancelled`, and the next session/prompt waits in `hold` so it
 * starts a turn of its own once the old one has ended.
 */

static rt_entry *find_cut(acp_router *r, uint32_t link, const char *sid,
                          size_t sid_len) {
  uint32_t i;

  for (i = 0; i < r->tab.used; i++) {
    rt_entry *e = &r->tab.e[i];
    if ((e->flags & (RT_F_USED | RT_F_CUT)) == (RT_F_USED | RT_F_CUT) &&
        e->dst == link && e->sid_len == sid_len &&
        memcmp(e->sid, sid, sid_len) == 0)
      return e;
  }
  return NULL;
}

static int hold_prompt(acp_router *r, rt_entry *e, uint32_t from,
                       const call *c) {
  rt_hold *h;
  char *p;

  static const char busy[] =
      "\"A prompt is already waiting for the cancelled turn to end\"";

  if (e->hold != NULL) {
    event(r, ACP_ROUTER_EVENT_REJECTED, from, "second prompt during a cut");
    return emit_error(r, from, c->id, c->id_len, ACP_RPC_INTERNAL_ERROR, busy,
                      sizeof(busy) - 1, NULL, 0);
  }
  h = acp__malloc(&r->mem, sizeof(*h) + c->id_len + c->params_len);
  if (h == NULL)
    return nomem(r, ACP_ERR_NOMEM);
  p = (char *)(h + 1);
  h->src = from;
  memcpy(p, c->id, c->id_len);
  h->id = p;
  h->id_len = c->id_len;
  h->params = NULL;
  h->params_len = 0;
  if (c->params != NULL) {
    memcpy(p + c->id_len, c->params, c->params_len);
    h->params = p + c->id_len;
    h->params_len = c->params_len;
  }
  e->hold = h;
  event(r, ACP_ROUTER_EVENT_DROPPED, from,
        "prompt held until the cancelled turn ends");
  return 0;
}

/* Apply the rules above to `c`: 1 to route it as usual, 0 when handled, or
 * a fatal error. */
static int cut_filter(acp_router *r, uint32_t from, uint32_t to, int dir,
                      const call *c) {
  rt_entry *e;

  if (c->sid == NULL)
    return 1;
  switch (c->kind) {
  case CK_UPDATE:
    if (dir != DIR_LEFT || find_cut(r, from, c->sid, c->sid_len) == NULL)
      return 1;
    event(r, ACP_ROUTER_EVENT_DROPPED, from, "update of a cancelled turn");
    return 0;
  case CK_PERMISSION:
    if (dir != DIR_LEFT || c->id == NULL ||
        find_cut(r, from, c->sid, c->sid_len) == NULL)
      return 1;
    event(r, ACP_ROUTER_EVENT_DROPPED, from,
          "permission request of a cancelled turn");
    return emit_result(r, from, c->id, c->id_len,
                       "{\"outcome\":{\"outcome\":\"cancelled\"}}");
  case CK_PROMPT:
    if (dir != DIR_RIGHT || c->id == NULL ||
        (e = find_cut(r, to, c->sid, c->sid_len)) == NULL)
      return 1;
    return hold_prompt(r, e, from, c);
  case CK_CANCEL:
    /* The client gives up the prompt it is waiting with. */
    if (dir == DIR_RIGHT && (e = find_cut(r, to, c->sid, c->sid_len)) != NULL &&
        e->hold) {
      rt_hold *h = e->hold;
      int rv;
      e->hold = NULL;
      rv = emit_result(r, h->src, h->id, h->id_len,
                       "{\"stopReason\":\"cancelled\"}");
      acp__free(&r->mem, h);
      if (rv != 0)
        return rv;
    }
    return 1;
  default:
    return 1;
  }
}

/*
 * Deliver call `c` from `from` to `to`, travelling in direction `dir`.
 * Requests get a fresh id on `to` and a table entry.
 */
static int forward(acp_router *r, uint32_t from, uint32_t to, int dir,
                   const call *c) {
  rt_link *l = &r->links[to];
  bool wrap = (to == 0) ? (dir == DIR_RIGHT) : (dir == DIR_LEFT);
  int init_wire = -1;
  uint32_t idx = UINT32_MAX;
  rt_entry *e = NULL;
  char num[24];
  size_t numlen = 0;
  wmsg w;
  int rv;

  if (l->state == ACP_ROUTER_LINK_CLOSED) {
    if (c->id == NULL) {
      event(r, ACP_ROUTER_EVENT_DROPPED, from,
            "notification for a closed link");
      return 0;
    }
    event(r, ACP_ROUTER_EVENT_REJECTED, from, "request for a closed link");
    return answer_closed(r, from, to, c->id, c->id_len);
  }
  if (r->ncut > 0 && c->kind != CK_OTHER) {
    rv = cut_filter(r, from, to, dir, c);
    if (rv != 1)
      return rv;
  }
  if (c->init && !wrap && is_proxy(r, to))
    init_wire = (int)l->wire;
  if (c->id != NULL) {
    if (r->tab.count >= r->o.max_pending) {
      event(r, ACP_ROUTER_EVENT_REJECTED, from, "too many pending requests");
      return emit_error(r, from, c->id, c->id_len, ACP_RPC_INTERNAL_ERROR,
                        "\"Too many pending requests\"", 27, NULL, 0);
    }
    rv = rt__table_alloc(&r->tab, &idx);
    if (rv != 0)
      return nomem(r, rv);
    e = &r->tab.e[idx];
    e->dst = to;
    e->src = from;
    e->id = l->next_id++;
    e->wire = init_wire;
    rv = rt__entry_set_orig(&r->tab, e, c->id, c->id_len);
    if (rv == 0 && c->kind == CK_PROMPT && c->sid != NULL && dir == DIR_RIGHT) {
      e->sid = dup_bytes(r, c->sid, c->sid_len);
      e->sid_len = c->sid_len;
      if (e->sid == NULL)
        rv = ACP_ERR_NOMEM;
    }
    e->mcp = c->mcp;
    if (rv == 0 && c->init) {
      e->flags |= RT_F_INIT;
      if (c->params != NULL) {
        e->params = dup_bytes(r, c->params, c->params_len);
        e->params_len = c->params_len;
        if (e->params == NULL)
          rv = ACP_ERR_NOMEM;
      }
    }
    if (rv != 0) {
      rt__table_release(&r->tab, idx);
      return nomem(r, rv);
    }
    numlen = fmt_i64(num, e->id);
  }
  w_begin(r, &w, from, to);
  rv = w_call(r, &w, c, e ? num : NULL, numlen, wrap, init_wire);
  if (rv == 0)
    rv = w_end(&w);
  else
    w_abort(&w);
  if (rv != 0) {
    if (idx != UINT32_MAX)
      rt__table_release(&r->tab, idx);
    if (rv != ACP_ERR_LIMIT)
      return nomem(r, rv);
    if (c->id == NULL) {
      event(r, ACP_ROUTER_EVENT_DROPPED, from, "message exceeds output cap");
      return 0;
    }
    event(r, ACP_ROUTER_EVENT_REJECTED, from, "message exceeds output cap");
    return emit_error(r, from, c->id, c->id_len, ACP_RPC_INTERNAL_ERROR,
                      "\"Message too large\"", 19, NULL, 0);
  }
  if (idx != UINT32_MAX)
    rt__table_index(&r->tab, idx);
  if (c->init && !wrap && to != 0)
    return remember_init_params(r, to, c);
  return 0;
}

/* MARK: - Cancellation (Private) */

static bool id_equal(acp_router *r, const rt_entry *e, const acp_json_val *id) {
  size_t n;
  const char *p = acp_json_raw(id, &n);

  if (n == e->orig_len && memcmp(p, e->orig, n) == 0)
    return true;
  /* Strings may be spelled with different escapes. */
  if (acp_json_type_of(id) == ACP_JSON_STRING && e->orig_len >= 2 &&
      e->orig[0] == '"' &&
      (acp_json_str_has_escapes(id) ||
       memchr(e->orig, '\\', e->orig_len) != NULL)) {
    char tmp[256];
    size_t dl = 0;
    /* Decode the stored id through a second document (rare path). The
     * current message lives in r->doc, so r->doc2 is free here. */
    if (r->doc2 == NULL && acp_json_doc_new(&r->doc2, &r->mem) != 0)
      return false;
    if (acp_json_doc_parse(r->doc2, e->orig, e->orig_len, NULL) == 0 &&
        acp_json_str_unescape(acp_json_doc_root(r->doc2), tmp, sizeof(tmp),
                              &dl) == 0)
      return acp_json_str_eq(id, tmp, dl) != 0;
    return false;
  }
  return false;
}

static int send_cancel(acp_router *r, uint32_t from, uint32_t to, int64_t id) {
  wmsg w;
  char num[24];
  int rv;

  if (r->links[to].state == ACP_ROUTER_LINK_CLOSED ||
      r->links[to].state == ACP_ROUTER_LINK_BYPASSED)
    return 0;
  w_begin(r, &w, from, to);
  w_lit(&w, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\","
            "\"params\":{\"requestId\":");
  w_put(&w, num, fmt_i64(num, id));
  w_lit(&w, "}}");
  rv = w_end(&w);
  if (rv == ACP_ERR_LIMIT) {
    event(r, ACP_ROUTER_EVENT_DROPPED, from, "cancel exceeds output cap");
    return 0;
  }
  return nomem(r, rv);
}

static int translate_cancel(acp_router *r, uint32_t k,
                            const acp_json_val *params) {
  const acp_json_val *rid = acp_json_obj_getz(params, "requestId");
  acp_json_type t = acp_json_type_of(rid);
  uint32_t i;

  if (t != ACP_JSON_STRING && t != ACP_JSON_NUMBER) {
    event(r, ACP_ROUTER_EVENT_DROPPED, k, "cancel without a requestId");
    return 0;
  }
  for (i = 0; i < r->tab.used; i++) {
    rt_entry *e = &r->tab.e[i];
    if ((e->flags & RT_F_USED) && e->src == k && id_equal(r, e, rid))
      return send_cancel(r, k, e->dst, e->id);
  }
  for (i = 0; r->ncut > 0 && i < r->tab.used; i++) {
    rt_entry *e = &r->tab.e[i];
    size_t n;
    const char *p = acp_json_raw(rid, &n);
    rt_hold *h = e->hold;
    if ((e->flags & RT_F_USED) && h != NULL && h->src == k && h->id_len == n &&
        memcmp(h->id, p, n) == 0) {
      /* A prompt held back by a cut-off turn (see end_cut): it never
       * started, so it ends here. */
      int rv;
      e->hold = NULL;
      rv =
          emit_result(r, k, h->id, h->id_len, "{\"stopReason\":\"cancelled\"}");
      acp__free(&r->mem, h);
      return rv;
    }
  }
  event(r, ACP_ROUTER_EVENT_DROPPED, k, "cancel for an unknown request");
  return 0;
}

/* The agent answered a cut-off prompt: the turn is over. Release the
 * entry and send the prompt held meanwhile, if any. */
static int end_cut(acp_router *r, uint32_t idx) {
  rt_entry *e = &r->tab.e[idx];
  rt_hold *h = e->hold;
  char *sid = e->sid;
  size_t sid_len = e->sid_len;
  int rv = 0;

  e->hold = NULL;
  e->sid = NULL;
  r->ncut--;
  rt__table_release(&r->tab, idx);
  if (h != NULL) {
    call c;
    memset(&c, 0, sizeof(c));
    c.method = "\"session/prompt\"";
    c.method_len = 16;
    c.params = h->params;
    c.params_len = h->params_len;
    c.id = h->id;
    c.id_len = h->id_len;
    c.kind = CK_PROMPT;
    c.sid = sid;
    c.sid_len = sid_len;
    rv = forward(r, h->src, right_of(r, h->src), DIR_RIGHT, &c);
  }
  acp__free(&r->mem, h);
  acp__free(&r->mem, sid);
  return rv;
}

/* `link` died with entry `e` (a session/prompt it sent, source `link`)
 * pending: cancel the turn both ways and keep the entry as RT_F_CUT (see
 * "Cut-off turns"); other requests are cancelled and forgotten. */
static int cut_request(acp_router *r, uint32_t idx) {
  rt_entry *e = &r->tab.e[idx];
  uint32_t dst = e->dst;
  acp__buf params;
  call c;
  int rv;

  rv = send_cancel(r, RT_SELF, dst, e->id);
  if (rv != 0 || e->sid == NULL ||
      r->links[dst].state == ACP_ROUTER_LINK_CLOSED) {
    rt__table_release(&r->tab, idx);
    return rv;
  }
  acp__buf_init(&params, &r->mem, 0);
  rv = acp__buf_append(&params, "{\"sessionId\":", 13);
  if (rv == 0)
    rv = acp__buf_append(&params, e->sid, e->sid_len);
  if (rv == 0)
    rv = acp__buf_putc(&params, '}');
  if (rv != 0) {
    acp__buf_dispose(&params);
    return nomem(r, rv);
  }
  e->src = RT_SELF;
  e->flags |= RT_F_CUT;
  r->ncut++;
  memset(&c, 0, sizeof(c));
  c.method = "\"session/cancel\"";
  c.method_len = 16;
  c.params = params.data;
  c.params_len = params.len;
  c.kind = CK_CANCEL;
  rv = forward(r, RT_SELF, dst, DIR_RIGHT, &c);
  acp__buf_dispose(&params);
  return rv;
}

/* MARK: - Routing (Private) */

static void call_from(call *c, const acp_json_val *method,
                      const acp_json_val *params, const acp_json_val *id) {
  memset(c, 0, sizeof(*c));
  c->method = acp_json_raw(method, &c->method_len);
  if (params != NULL)
    c->params = acp_json_raw(params, &c->params_len);
  if (id != NULL)
    c->id = acp_json_raw(id, &c->id_len);
  if (str_is(method, "session/update"))
    c->kind = CK_UPDATE;
  else if (str_is(method, "session/prompt"))
    c->kind = CK_PROMPT;
  else if (str_is(method, "session/cancel"))
    c->kind = CK_CANCEL;
  else if (str_is(method, "session/request_permission"))
    c->kind = CK_PERMISSION;
  if (c->kind != CK_OTHER) {
    const acp_json_val *sid = acp_json_obj_getz(params, "sessionId");
    if (acp_json_type_of(sid) == ACP_JSON_STRING)
      c->sid = acp_json_raw(sid, &c->sid_len);
  }
}

/* MARK: - MCP-over-ACP servers (Private) */

/* A few ids are found quicker by comparing each than by hashing one. */
#define MCP_INDEX_MIN 8

static size_t mcp_bucket(const acp_router *r, bool conn, const char *id,
                         size_t len) {
  uint64_t h = acp__fnv1a(r->mcp_seed ^ (uint64_t)conn, id, len);
  return (size_t)(h ^ (h >> 32)) & (r->mcp_hcap - 1);
}

static rt_mcp *mcp_find(acp_router *r, bool conn, const char *id, size_t len) {
  size_t i;

  if (r->mcp_hash != NULL) {
    uint32_t j = r->mcp_hash[mcp_bucket(r, conn, id, len)];
    rt_mcp *hit = NULL;

    for (; j != 0 && hit == NULL; j = r->mcp[j - 1].next) {
      rt_mcp *m = &r->mcp[j - 1];
      if (m->conn == conn && m->len == len && memcmp(m->id, id, len) == 0)
        hit = m;
    }
#ifdef ACP__SELFCHECK
    /* Fuzz builds: the index finds what a search of the table finds (ids
     * are unique per kind, so the same slot). */
    for (i = 0; i < r->nmcp; i++) {
      rt_mcp *m = &r->mcp[i];
      if (m->id != NULL && m->conn == conn && m->len == len &&
          memcmp(m->id, id, len) == 0 && m != hit)
        abort();
    }
    if (hit != NULL && hit->id == NULL)
      abort();
#endif
    return hit;
  }
  for (i = r->nmcp; i > 0; i--) {
    rt_mcp *m = &r->mcp[i - 1];
    if (m->id != NULL && m->conn == conn && m->len == len &&
        memcmp(m->id, id, len) == 0)
      return m;
  }
  return NULL;
}

static void mcp_link(acp_router *r, size_t i) {
  rt_mcp *m = &r->mcp[i];
  size_t b = mcp_bucket(r, m->conn, m->id, m->len);

  m->next = r->mcp_hash[b];
  r->mcp_hash[b] = (uint32_t)i + 1;
}

/* (Re)build the index for at least `want` ids; false if out of memory
 * (the old index, or the scan, goes on serving). */
static bool mcp_index(acp_router *r, size_t want) {
  size_t cap = 16;
  uint32_t *h;
  size_t i;

  while (cap < want * 2)
    cap *= 2;
  h = acp__calloc(&r->mem, cap, sizeof(*h));
  if (h == NULL)
    return false;
  acp__free(&r->mem, r->mcp_hash);
  r->mcp_hash = h;
  r->mcp_hcap = cap;
  for (i = 0; i < r->nmcp; i++)
    if (r->mcp[i].id != NULL)
      mcp_link(r, i);
  return true;
}

/* A connection ended: its slot leaves the index for the free list. */
static void mcp_release(acp_router *r, rt_mcp *m) {
  uint32_t at = (uint32_t)(m - r->mcp) + 1;

  if (r->mcp_hash != NULL) {
    uint32_t *pp = &r->mcp_hash[mcp_bucket(r, m->conn, m->id, m->len)];
    while (*pp != 0 && *pp != at)
      pp = &r->mcp[*pp - 1].next;
    if (*pp == at)
      *pp = m->next;
  }
  acp__free(&r->mem, m->id);
  m->id = NULL;
  m->next = r->mcp_free;
  r->mcp_free = at;
}

static int mcp_add(acp_router *r, bool conn, const char *id, size_t len,
                   uint32_t link) {
  rt_mcp *m;
  size_t i = r->nmcp;
  char *copy;

  if (mcp_find(r, conn, id, len) != NULL)
    return 0;
  copy = dup_bytes(r, id, len ? len : 1);
  if (copy == NULL)
    return nomem(r, ACP_ERR_NOMEM);
  /* A connection id takes the slot of one that ended, so that a long
   * session's connect/disconnect cycles neither fill the table nor
   * lengthen every search. (Server slots never move: calls hold their
   * index.) */
  if (conn && r->mcp_free != 0) {
    i = r->mcp_free - 1;
    r->mcp_free = r->mcp[i].next;
  } else {
    if (r->nmcp >= MAX_MCP) {
      acp__free(&r->mem, copy);
      return 0;
    }
    if (r->nmcp == r->capmcp) {
      size_t cap = r->capmcp ? r->capmcp * 2 : 8;
      rt_mcp *n = acp__realloc(&r->mem, r->mcp, cap * sizeof(*n));
      if (n == NULL) {
        acp__free(&r->mem, copy);
        return nomem(r, ACP_ERR_NOMEM);
      }
      r->mcp = n;
      r->capmcp = cap;
    }
    r->nmcp++;
  }
  m = &r->mcp[i];
  m->id = copy;
  m->len = len;
  m->link = link;
  m->conn = conn;
  m->dead = false;
  m->next = 0;
  if (r->mcp_hash == NULL) {
    if (r->nmcp > MCP_INDEX_MIN)
      (void)mcp_index(r, r->nmcp); /* i included */
  } else if (r->nmcp * 2 <= r->mcp_hcap || !mcp_index(r, r->nmcp)) {
    mcp_link(r, i);
  }
  return 0;
}

static bool is_session_setup(const acp_json_val *method) {
  return str_is(method, "session/new") || str_is(method, "session/load") ||
         str_is(method, "session/resume") || str_is(method, "session/fork");
}

/* A session set-up travelling right from link k: the MCP-over-ACP servers
 * first seen here are k's. */
static int note_decls(acp_router *r, uint32_t k, const acp_json_val *method,
                      const acp_json_val *params) {
  const acp_json_val *e;
  int rv = 0;

  if (!is_session_setup(method))
    return 0;
  e = acp_json_child(acp_json_obj_getz(params, "mcpServers"));
  for (; e != NULL && rv == 0; e = acp_json_next(e)) {
    const char *id;
    size_t n;

    if (acp_mcp_acp_decl_parse(r->doc, e, &id, &n, NULL) == 0 &&
        mcp_find(r, false, id, n) == NULL)
      rv = mcp_add(r, false, id, n, k);
  }
  return rv;
}

/* A decoded string member of params (the first of two names), or NULL. */
static const char *mcp_str(acp_router *r, const acp_json_val *params,
                           const char *a, const char *b, size_t *len) {
  const acp_json_val *v = acp_json_obj_getz(params, a);
  const char *s;

  if (v == NULL && b != NULL)
    v = acp_json_obj_getz(params, b);
  if (acp_json_type_of(v) != ACP_JSON_STRING ||
      acp_json_doc_str(r->doc, v, &s, len) != 0)
    return NULL;
  return s;
}

/*
 * MCP-over-ACP traffic from the agent for a server whose provider died:
 * answered here (a request) or dropped, never routed on (rule MCP). For a
 * live server's mcp/connect, c->mcp remembers it so that the answer's
 * connectionId is learnt. Sets *done when the message was handled.
 */
static int mcp_guard(acp_router *r, uint32_t k, const acp_json_val *id,
                     const acp_json_val *method, const acp_json_val *params,
                     call *c, bool *done) {
  const char *s = NULL;
  size_t n = 0;
  rt_mcp *m = NULL;
  bool connect = false;
  char why[80];

  *done = false;
  if (r->nmcp == 0)
    return 0;
  if (str_is(method, "mcp/connect") || str_is(method, "_mcp/connect")) {
    connect = true;
    s = mcp_str(r, params, "serverId", "acpId", &n);
    if (s == NULL)
      s = mcp_str(r, params, "id", NULL, &n);
    if (s == NULL && (s = mcp_str(r, params, "acp_url", NULL, &n)) != NULL) {
      if (n < 4 || memcmp(s, "acp:", 4) != 0)
        return 0;
      s += 4;
      n -= 4;
    }
    if (s != NULL)
      m = mcp_find(r, false, s, n);
  } else if (str_is(method, "mcp/message") || str_is(method, "_mcp/message") ||
             str_is(method, "mcp/disconnect") ||
             str_is(method, "_mcp/disconnect")) {
    s = mcp_str(r, params, "connectionId", "connection_id", &n);
    if (s != NULL)
      m = mcp_find(r, true, s, n);
    else if ((s = mcp_str(r, params, "serverId", NULL, &n)) != NULL)
      m = mcp_find(r, false, s, n);
  }
  if (m == NULL)
    return 0;
  if (m->conn &&
      (str_is(method, "mcp/disconnect") || str_is(method, "_mcp/disconnect"))) {
    /* Routed (or answered below) once; the id is done with either way. */
    bool dead = m->dead;
    mcp_release(r, m);
    if (!dead)
      return 0;
  } else if (!m->dead) {
    if (connect)
      c->mcp = (uint32_t)(m - r->mcp) + 1;
    return 0;
  }
  *done = true;
  if (id == NULL) {
    event(r, ACP_ROUTER_EVENT_DROPPED, k,
          "MCP notification for a server whose provider is gone");
    return 0;
  }
  {
    static const char a[] = "its provider (component ";
    static const char b[] = ") is gone";
    size_t p = sizeof(a) - 1;
    memcpy(why, a, p);
    p += fmt_i64(why + p, (int64_t)m->link);
    memcpy(why + p, b, sizeof(b));
  }
  return reject(r, k, id, ACP_MCP_ACP_SERVER_UNAVAILABLE,
                "MCP server unavailable", why);
}

/* An answer to an mcp/connect of a known server: learn its connection. */
static int mcp_connected(acp_router *r, const rt_entry *e,
                         const acp_json_val *result) {
  const char *s;
  size_t n;

  if (e->mcp == 0 || e->mcp > r->nmcp || result == NULL)
    return 0;
  s = mcp_str(r, result, "connectionId", "connection_id", &n);
  return s != NULL ? mcp_add(r, true, s, n, r->mcp[e->mcp - 1].link) : 0;
}

const char *acp_router_mcp_server(const acp_router *r, size_t link,
                                  size_t index, size_t *len) {
  size_t i;

  if (r == NULL || len == NULL)
    return NULL;
  for (i = 0; i < r->nmcp; i++) {
    const rt_mcp *m = &r->mcp[i];
    if (m->conn || m->link != link)
      continue;
    if (index-- == 0) {
      *len = m->len;
      return m->id;
    }
  }
  return NULL;
}

/* A successor-family message (wrapped traffic) from link k. */
static int route_successor(acp_router *r, uint32_t k, const acp_json_val *id,
                           const acp_json_val *params, acp_router_wire wire) {
  const acp_json_val *im = acp_json_obj_getz(params, "method");
  const acp_json_val *ip = acp_json_obj_getz(params, "params");
  acp_router_wire dummy;
  call c;
  uint32_t to;

  if (k == 0 && r->o.mode == ACP_ROUTER_MODE_AGENT)
    return id ? reject(r, k, id, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                       "the client is not a proxy: it has no successor")
              : (event(r, ACP_ROUTER_EVENT_DROPPED, k,
                       "proxy/successor from the client"),
                 0);
  if (is_agent(r, k))
    return id ? reject(r, k, id, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                       "the agent has no successor")
              : (event(r, ACP_ROUTER_EVENT_DROPPED, k,
                       "proxy/successor from the agent"),
                 0);
  if (k == 0 || r->o.pm == ACP_ROUTER_PROXY_METHODS_AUTO)
    r->links[k].wire = wire;
  if (acp_json_type_of(im) != ACP_JSON_STRING) {
    if (id == NULL) {
      event(r, ACP_ROUTER_EVENT_DROPPED, k, "proxy/successor without method");
      return 0;
    }
    return reject(r, k, id, ACP_RPC_INVALID_PARAMS, "Invalid params",
                  "proxy/successor needs a string method");
  }
  if (str_is(im, "$/cancel_request"))
    return translate_cancel(r, k, ip);
  if (classify_method(im, &dummy) == PM_INIT)
    return id ? reject(r, k, id, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                       "proxy/initialize is sent by the conductor, not to it")
              : 0;
  call_from(&c, im, ip, id);
  if (k == 0) {
    /* The parent's successor talks to our last proxy. */
    to = left_of(r, (uint32_t)r->n + 1);
    return forward(r, k, to, DIR_LEFT, &c);
  }
  to = right_of(r, k);
  c.init = str_is(im, "initialize");
  if (c.init && id != NULL && r->links[k].state == ACP_ROUTER_LINK_RESTARTING &&
      r->links[to].init_result != NULL) {
    /* A restarted proxy: its successor is already initialized. */
    size_t n;
    const char *idp = acp_json_raw(id, &n);
    wmsg w;
    int rv;
    w_begin(r, &w, to, k);
    w_lit(&w, "{\"jsonrpc\":\"2.0\",\"id\":");
    w_put(&w, idp, n);
    w_lit(&w, ",\"result\":");
    w_put(&w, r->links[to].init_result, r->links[to].init_result_len);
    w_lit(&w, "}");
    rv = w_end(&w);
    return rv == ACP_ERR_LIMIT ? 0 : nomem(r, rv);
  }
  if (note_decls(r, k, im, ip) != 0)
    return ACP_ERR_NOMEM;
  return forward(r, k, to, DIR_RIGHT, &c);
}

static int route_call(acp_router *r, uint32_t k, const acp_json_val *id,
                      const acp_json_val *method, const acp_json_val *params) {
  acp_router_wire wire = ACP_ROUTER_WIRE_G2;
  int pm = classify_method(method, &wire);
  call c;

  if (pm == PM_NONE && str_is(method, "$/cancel_request")) {
    if (id != NULL)
      return reject(r, k, id, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                    "$/cancel_request must be a notification");
    return translate_cancel(r, k, params);
  }
  if (pm == PM_SUCCESSOR)
    return route_successor(r, k, id, params, wire);
  if (pm == PM_INIT) {
    if (k != 0 || r->o.mode != ACP_ROUTER_MODE_PROXY)
      return id ? reject(r, k, id, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                         k ? "proxy/initialize is sent by the conductor, "
                             "not to it"
                           : "this conductor is not a proxy")
                : (event(r, ACP_ROUTER_EVENT_DROPPED, k,
                         "proxy/initialize notification"),
                   0);
    r->links[0].wire = wire;
    call_from(&c, method, params, id);
    c.method = "\"initialize\"";
    c.method_len = 12;
    c.init = true;
    return forward(r, k, right_of(r, 0), DIR_RIGHT, &c);
  }
  call_from(&c, method, params, id);
  if (k == 0) {
    if (str_is(method, "initialize")) {
      if (r->o.mode == ACP_ROUTER_MODE_PROXY) {
        if (!meta_proxy_true(params))
          return id ? reject(r, k, id, ACP_RPC_INVALID_REQUEST,
                             "Invalid Request",
                             "this conductor runs in proxy mode: expected "
                             "proxy/initialize")
                    : 0;
        r->links[0].wire = ACP_ROUTER_WIRE_G0;
      }
      c.init = true;
    }
    if (note_decls(r, k, method, params) != 0)
      return ACP_ERR_NOMEM;
    return forward(r, k, right_of(r, 0), DIR_RIGHT, &c);
  }
  if (is_agent(r, k)) {
    bool done;
    int rv = mcp_guard(r, k, id, method, params, &c, &done);
    if (rv != 0 || done)
      return rv;
  }
  return forward(r, k, left_of(r, k), DIR_LEFT, &c);
}

/*
 * A proxy's initialize answer whose protocolVersion differs from its
 * successor's: the router translates nothing between protocol versions
 * (ACP v1 and the v2 draft differ in methods and shapes), so such a chain
 * cannot work and is refused at initialize.
 */
static bool init_version_mismatch(const acp_router *r, uint32_t k,
                                  const acp_json_val *result) {
  uint32_t s = right_of(r, k);
  int64_t v = -1;

  if (s == 0 || s == k || r->links[s].init_result == NULL)
    return false;
  (void)acp_json_get_int64(acp_json_obj_getz(result, "protocolVersion"), &v);
  return v != r->links[s].init_version;
}

static int refuse_init_mismatch(acp_router *r, uint32_t k, uint32_t idx,
                                const acp_json_val *result) {
  rt_entry *e = &r->tab.e[idx];
  uint32_t s = right_of(r, k);
  long long sv = (long long)r->links[s].init_version;
  char msg[240];
  char data[160];
  int64_t v = -1;
  int m, n;
  int rv;

  (void)acp_json_get_int64(acp_json_obj_getz(result, "protocolVersion"), &v);
  /* msg is a JSON string literal: nothing in it needs escaping. */
  m = snprintf(msg, sizeof(msg),
               "\"protocol version mismatch in the chain: component %u "
               "answered initialize with protocolVersion %lld, its successor "
               "%u with %lld; the conductor translates nothing between "
               "versions\"",
               (unsigned)k, (long long)v, (unsigned)s, sv);
  n = snprintf(data, sizeof(data),
               "{\"component\":%u,\"protocolVersion\":%lld,\"successor\":%u,"
               "\"successorProtocolVersion\":%lld}",
               (unsigned)k, (long long)v, (unsigned)s, sv);
  event(r, ACP_ROUTER_EVENT_REJECTED, k, "protocol version mismatch");
  if (e->src == RT_SELF) {
    rt__table_release(&r->tab, idx);
    return 0;
  }
  rv = emit_error(r, e->src, e->orig, e->orig_len, ACP_RPC_INTERNAL_ERROR, msg,
                  (size_t)m, data, (size_t)n);
  rt__table_release(&r->tab, idx);
  return rv;
}

static int route_response(acp_router *r, uint32_t k, const acp_json_val *id,
                          const acp_json_val *result,
                          const acp_json_val *error) {
  int64_t n;
  uint32_t idx;
  rt_entry *e;
  int64_t code = 0;
  bool ok = error == NULL;
  const acp_json_val *payload = ok ? result : error;
  wmsg w;
  int rv;

  if (acp_json_get_int64(id, &n) != 0 ||
      (idx = rt__table_find(&r->tab, k, n)) == UINT32_MAX) {
    event(r, ACP_ROUTER_EVENT_DROPPED, k, "response to an unknown id");
    return 0;
  }
  e = &r->tab.e[idx];
  if (!ok)
    (void)acp_json_get_int64(acp_json_obj_getz(error, "code"), &code);
  if ((e->flags & RT_F_INIT) && !ok && code == ACP_RPC_METHOD_NOT_FOUND &&
      r->o.pm == ACP_ROUTER_PROXY_METHODS_AUTO && is_proxy(r, k) &&
      (e->wire == ACP_ROUTER_WIRE_G2 || e->wire == ACP_ROUTER_WIRE_G1)) {
    /* Older proxy: say it again in the next older spelling. */
    call c;
    char num[24];
    memset(&c, 0, sizeof(c));
    c.params = e->params;
    c.params_len = e->params_len;
    c.init = true;
    e->wire =
        e->wire == ACP_ROUTER_WIRE_G2 ? ACP_ROUTER_WIRE_G1 : ACP_ROUTER_WIRE_G0;
    r->links[k].wire = (acp_router_wire)e->wire;
    rt__table_rekey(&r->tab, idx, r->links[k].next_id++);
    event(r, ACP_ROUTER_EVENT_WIRE_FALLBACK, k,
          e->wire == ACP_ROUTER_WIRE_G1 ? "_proxy/initialize"
                                        : "initialize with _meta.proxy");
    w_begin(r, &w, RT_SELF, k);
    rv = w_call(r, &w, &c, num, fmt_i64(num, e->id), false, e->wire);
    if (rv == 0)
      rv = w_end(&w);
    else
      w_abort(&w);
    if (rv == 0)
      return 0;
    if (rv != ACP_ERR_LIMIT)
      return nomem(r, rv);
    /* Could not retry: pass the -32601 back as it is. */
  }
  if (e->flags & RT_F_INIT) {
    rt_link *l = &r->links[k];
    if (ok && result != NULL && init_version_mismatch(r, k, result))
      return refuse_init_mismatch(r, k, idx, result);
    if (ok && result != NULL) {
      size_t len;
      const char *p = acp_json_raw(result, &len);
      char *copy = dup_bytes(r, p, len);
      if (copy == NULL)
        return nomem(r, ACP_ERR_NOMEM);
      acp__free(&r->mem, l->init_result);
      l->init_result = copy;
      l->init_result_len = len;
      l->init_version = -1;
      (void)acp_json_get_int64(acp_json_obj_getz(result, "protocolVersion"),
                               &l->init_version);
      event(r, ACP_ROUTER_EVENT_INITIALIZED, k, "initialized");
    }
    if (l->state == ACP_ROUTER_LINK_RESTARTING) {
      l->state = ACP_ROUTER_LINK_OPEN;
      if (!ok)
        event(r, ACP_ROUTER_EVENT_REINIT_FAILED, k,
              "restarted proxy refused proxy/initialize");
    }
  }
  if (e->flags & RT_F_CUT)
    return end_cut(r, idx);
  if (e->src == RT_SELF) {
    rt__table_release(&r->tab, idx);
    return 0;
  }
  if (ok && e->mcp != 0 && mcp_connected(r, e, result) != 0)
    return ACP_ERR_NOMEM;
  w_begin(r, &w, k, e->src);
  w_lit(&w, "{\"jsonrpc\":\"2.0\",\"id\":");
  w_put(&w, e->orig, e->orig_len);
  w_lit(&w, ok ? ",\"result\":" : ",\"error\":");
  if (payload != NULL)
    w_val(&w, payload);
  else
    w_lit(&w, "null");
  w_lit(&w, "}");
  r->ans_link = k;
  r->ans_id = e->id;
  rv = w_end(&w);
  r->ans_link = RT_SELF;
  if (rv == ACP_ERR_LIMIT) {
    event(r, ACP_ROUTER_EVENT_REJECTED, k, "response exceeds output cap");
    rv = emit_error(r, e->src, e->orig, e->orig_len, ACP_RPC_INTERNAL_ERROR,
                    "\"Message too large\"", 19, NULL, 0);
  }
  rt__table_release(&r->tab, idx);
  return nomem(r, rv);
}

/* One message object (or anything else found where a message should be). */
static int route_message(acp_router *r, uint32_t k, const acp_json_val *m) {
  const acp_json_val *method;
  const acp_json_val *id;
  const acp_json_val *result;
  const acp_json_val *error;
  acp_json_type idt;

  if (acp_json_type_of(m) != ACP_JSON_OBJECT)
    return reject(r, k, NULL, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                  "a message must be an object");
  method = acp_json_obj_getz(m, "method");
  id = acp_json_obj_getz(m, "id");
  idt = acp_json_type_of(id);
  if (method != NULL) {
    if (id != NULL && idt != ACP_JSON_STRING && idt != ACP_JSON_NUMBER &&
        idt != ACP_JSON_NULL)
      return reject(r, k, NULL, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                    "id must be a string or a number");
    if (acp_json_type_of(method) != ACP_JSON_STRING) {
      if (id == NULL) {
        event(r, ACP_ROUTER_EVENT_DROPPED, k, "method is not a string");
        return 0;
      }
      return reject(r, k, id, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                    "method must be a string");
    }
    return route_call(r, k, id, method, acp_json_obj_getz(m, "params"));
  }
  result = acp_json_obj_getz(m, "result");
  error = acp_json_obj_getz(m, "error");
  if (result != NULL || error != NULL) {
    if (idt != ACP_JSON_NUMBER && idt != ACP_JSON_STRING) {
      event(r, ACP_ROUTER_EVENT_DROPPED, k, "response without a usable id");
      return 0;
    }
    if (error != NULL && acp_json_type_of(error) != ACP_JSON_OBJECT) {
      event(r, ACP_ROUTER_EVENT_DROPPED, k, "error is not an object");
      return 0;
    }
    return route_response(r, k, id, result, error);
  }
  return reject(r, k, id, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                "neither a call nor a response");
}

/* Close every array line a batch opened. */
static int end_batch(acp_router *r) {
  size_t j;
  int rv = 0;

  r->in_batch = false;
  for (j = 0; j <= r->n; j++) {
    rt_link *l = &r->links[j];
    if (l->batch_open) {
      /* The closing bytes are always written, even past the cap, so that a
       * started line is never left unterminated. */
      size_t max = l->out.max;
      int rv2;
      l->out.max = SIZE_MAX;
      rv2 = acp__buf_append(&l->out, "]\n", 2);
      l->out.max = max;
      l->batch_open = false;
      if (rv2 != 0 && rv == 0)
        rv = rv2;
    }
  }
  return nomem(r, rv);
}

/* MARK: - Options (Public) */

int acp_router_options_new(acp_router_options **out) {
  acp_router_options *o;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  o = acp_mem_default()->calloc(1, sizeof(*o), NULL);
  if (o == NULL)
    return ACP_ERR_NOMEM;
  o->max_pending = DEFAULT_MAX_PENDING;
  o->max_output = DEFAULT_MAX_OUTPUT;
  *out = o;
  return 0;
}

void acp_router_options_free(acp_router_options *opts) {
  if (opts != NULL)
    acp_mem_default()->free(opts, NULL);
}

void acp_router_options_set_mode(acp_router_options *opts,
                                 acp_router_mode mode) {
  if (opts != NULL &&
      (mode == ACP_ROUTER_MODE_AGENT || mode == ACP_ROUTER_MODE_PROXY))
    opts->mode = mode;
}

void acp_router_options_set_proxy_methods(acp_router_options *opts,
                                          acp_router_proxy_methods pm) {
  if (opts != NULL && (pm == ACP_ROUTER_PROXY_METHODS_AUTO ||
                       pm == ACP_ROUTER_PROXY_METHODS_SPEC ||
                       pm == ACP_ROUTER_PROXY_METHODS_UNDERSCORE))
    opts->pm = pm;
}

void acp_router_options_set_max_pending(acp_router_options *opts, size_t max) {
  if (opts != NULL)
    opts->max_pending = max ? max : DEFAULT_MAX_PENDING;
}

void acp_router_options_set_max_output(acp_router_options *opts, size_t max) {
  if (opts != NULL)
    opts->max_output = max ? max : DEFAULT_MAX_OUTPUT;
}

void acp_router_options_set_max_depth(acp_router_options *opts,
                                      uint32_t depth) {
  if (opts != NULL)
    opts->max_depth = depth;
}

void acp_router_options_set_trace_cb(acp_router_options *opts,
                                     acp_router_trace_cb cb) {
  if (opts != NULL)
    opts->trace = cb;
}

void acp_router_options_set_event_cb(acp_router_options *opts,
                                     acp_router_event_cb cb) {
  if (opts != NULL)
    opts->event = cb;
}

/* MARK: - Router (Public) */

int acp_router_new(acp_router **out, size_t ncomponents,
                   const acp_router_options *opts, void *user_data,
                   const acp_mem *mem) {
  acp_router *r = NULL;
  acp_mem m;
  size_t i;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (ncomponents > MAX_COMPONENTS ||
      (ncomponents == 0 &&
       (opts == NULL || opts->mode != ACP_ROUTER_MODE_PROXY)))
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, mem);
  r = acp__calloc(&m, 1, sizeof(*r));
  if (r == NULL)
    return ACP_ERR_NOMEM;
  r->mem = m;
  r->ans_link = RT_SELF;
  r->user_data = user_data;
  r->n = ncomponents;
  /* From the router's address: differs from run to run where addresses
   * do (the agent picks the connection ids the index hashes). */
  r->mcp_seed = acp__fnv1a(ACP__FNV_SEED, &r, sizeof(r));
  if (opts != NULL) {
    r->o = *opts;
  } else {
    r->o.max_pending = DEFAULT_MAX_PENDING;
    r->o.max_output = DEFAULT_MAX_OUTPUT;
  }
  rt__table_init(&r->tab, &r->mem);
  r->links = acp__calloc(&r->mem, ncomponents + 1, sizeof(*r->links));
  if (r->links == NULL) {
    rv = ACP_ERR_NOMEM;
    goto cleanup;
  }
  for (i = 0; i <= ncomponents; i++) {
    rt_link *l = &r->links[i];
    acp__buf_init(&l->out, &r->mem, r->o.max_output);
    l->next_id = 1;
    l->wire = (i > 0 && r->o.pm == ACP_ROUTER_PROXY_METHODS_UNDERSCORE)
                  ? ACP_ROUTER_WIRE_G1
                  : ACP_ROUTER_WIRE_G2;
  }
  rv = acp_json_doc_new(&r->doc, &r->mem);
  if (rv != 0)
    goto cleanup;
  if (r->o.max_depth != 0)
    acp_json_doc_set_max_depth(r->doc, r->o.max_depth);
  *out = r;
  return 0;

cleanup:
  acp_router_free(r);
  return rv;
}

static void link_forget_close(acp_router *r, rt_link *l) {
  acp__free(&r->mem, l->reason);
  acp__free(&r->mem, l->data);
  l->reason = NULL;
  l->data = NULL;
  l->reason_len = 0;
  l->data_len = 0;
}

void acp_router_free(acp_router *r) {
  size_t i;

  if (r == NULL)
    return;
  if (r->links != NULL) {
    for (i = 0; i <= r->n; i++) {
      rt_link *l = &r->links[i];
      acp__buf_dispose(&l->out);
      acp__free(&r->mem, l->spans);
      acp__free(&r->mem, l->iov);
      link_forget_close(r, l);
      acp__free(&r->mem, l->init_params);
      acp__free(&r->mem, l->init_result);
    }
  }
  rt__table_dispose(&r->tab);
  for (i = 0; i < r->nmcp; i++)
    acp__free(&r->mem, r->mcp[i].id);
  acp__free(&r->mem, r->mcp);
  acp__free(&r->mem, r->mcp_hash);
  acp_json_doc_free(r->doc);
  acp_json_doc_free(r->doc2);
  acp__free(&r->mem, r->links);
  acp__free(&r->mem, r);
}

size_t acp_router_link_count(const acp_router *r) {
  return r ? r->n + 1 : 0;
}

static int check_call(const acp_router *r) {
  if (r->in_cb || r->fatal)
    return ACP_ERR_INVALID_STATE;
  return 0;
}

/*
 * `framer`: the acp_ndjson that just produced `line` (acp_router_recv_framed),
 * or NULL. Its line holds no line feed and may carry a plain run that the
 * parse need not scan again: on a 1 MiB message those were two of the
 * conductor's passes over the bytes per hop (docs/decisions.md, issue 11).
 */
static int recv_line(acp_router *r, size_t link, const acp_ndjson *framer,
                     const char *line, size_t len) {
  const acp_json_val *root;
  const acp_json_val *el;
  acp_json_err jerr;
  uint32_t k = (uint32_t)link;
  int rv;

  if (r == NULL || link > r->n || (line == NULL && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  rv = check_call(r);
  if (rv != 0)
    return rv;
  if (r->links[k].state == ACP_ROUTER_LINK_CLOSED ||
      r->links[k].state == ACP_ROUTER_LINK_BYPASSED)
    return ACP_ERR_INVALID_STATE;
  if (len > 0 && line[len - 1] == '\n')
    len--;
  if (len > 0 && line[len - 1] == '\r')
    len--;
  if (framer == NULL && len > 0 && memchr(line, '\n', len) != NULL) {
    event(r, ACP_ROUTER_EVENT_REJECTED, k, "line contains a newline");
    return emit_error(r, k, NULL, 0, ACP_RPC_PARSE_ERROR, "\"Parse error\"", 13,
                      NULL, 0);
  }
  /* The run is in offsets of the framer's line; a run that does not lie
   * inside what is parsed (a '\r' cut off above) is not used. The parse
   * clears it whatever happens. */
  if (framer != NULL && framer->plain_hi > framer->plain_lo &&
      framer->plain_hi <= len)
    acp__json_doc_set_plain(r->doc, line + framer->plain_lo,
                            line + framer->plain_hi);
  rv = acp_json_doc_parse(r->doc, line, len, &jerr);
  if (rv == ACP_ERR_NOMEM)
    return nomem(r, rv);
  if (rv != 0) {
    event(r, ACP_ROUTER_EVENT_REJECTED, k, "not valid JSON");
    return emit_error(r, k, NULL, 0, ACP_RPC_PARSE_ERROR, "\"Parse error\"", 13,
                      NULL, 0);
  }
  root = acp_json_doc_root(r->doc);
  if (acp_json_type_of(root) != ACP_JSON_ARRAY)
    return route_message(r, k, root);
  if (acp_json_len(root) == 0)
    return reject(r, k, NULL, ACP_RPC_INVALID_REQUEST, "Invalid Request",
                  "empty batch");
  r->in_batch = true;
  for (el = acp_json_child(root); el != NULL; el = acp_json_next(el)) {
    rv = route_message(r, k, el);
    if (rv != 0)
      break;
  }
  if (rv != 0) {
    r->in_batch = false;
    return rv;
  }
  return end_batch(r);
}

int acp_router_recv(acp_router *r, size_t link, const char *line, size_t len) {
  return recv_line(r, link, NULL, line, len);
}

int acp_router_recv_framed(acp_router *r, size_t link, const acp_ndjson *framer,
                           const char *line, size_t len) {
  return recv_line(r, link, framer, line, len);
}

int acp_router_recv_framed_ref(acp_router *r, size_t link,
                               const acp_ndjson *framer, const char *line,
                               size_t len) {
  int rv;

  /* A tracer is shown each message as one stretch of bytes: then nothing
   * is borrowed. A router in a callback or failed is refused below before
   * anything is written. */
  if (r != NULL && r->o.trace == NULL && !r->in_cb && line != NULL) {
    r->in_lo = line;
    r->in_hi = line + len;
  }
  rv = recv_line(r, link, framer, line, len);
  if (r != NULL && !r->in_cb) {
    r->in_lo = NULL;
    r->in_hi = NULL;
  }
  return rv;
}

int acp_router_borrowed(const acp_router *r) {
  size_t i;

  if (r == NULL)
    return 0;
  for (i = 0; i <= r->n; i++)
    if (r->links[i].nspans > 0 && !r->links[i].handed)
      return 1;
  return 0;
}

int acp_router_copy_borrowed(acp_router *r) {
  size_t i;

  if (r == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (r->in_cb)
    return ACP_ERR_INVALID_STATE;
  for (i = 0; i <= r->n; i++) {
    rt_link *l = &r->links[i];
    int rv;

    if (l->handed) {
      out_reset(l); /* taken: the pieces handed out end here */
      continue;
    }
    rv = spans_flatten(r, l);
    if (rv != 0)
      return rv;
  }
  return 0;
}

acp_ssize acp_router_send(acp_router *r, size_t link, const char **data) {
  rt_link *l;

  if (r == NULL || data == NULL || link > r->n)
    return ACP_ERR_INVALID_ARGUMENT;
  *data = NULL;
  if (r->in_cb)
    return ACP_ERR_INVALID_STATE;
  l = &r->links[link];
  if (l->handed)
    out_reset(l);
  /* Borrowed pieces are joined: one buffer, as this call always gave. */
  if (l->nspans > 0 && spans_flatten(r, l) != 0)
    return ACP_ERR_NOMEM;
  if (l->out.len == 0)
    return 0;
  l->handed = true;
  *data = l->out.data;
  return (acp_ssize)l->out.len;
}

acp_ssize acp_router_send_iov(acp_router *r, size_t link,
                              const acp_rpc_iov **iov, size_t *niov) {
  rt_link *l;
  size_t need, at = 0, k = 0, i;

  if (niov != NULL)
    *niov = 0;
  if (iov != NULL)
    *iov = NULL;
  if (r == NULL || iov == NULL || niov == NULL || link > r->n)
    return ACP_ERR_INVALID_ARGUMENT;
  if (r->in_cb)
    return ACP_ERR_INVALID_STATE;
  l = &r->links[link];
  if (l->handed)
    out_reset(l);
  if (l->out.len == 0 && l->nspans == 0)
    return 0;
  if (l->nspans == 0) {
    l->one.data = l->out.data;
    l->one.len = l->out.len;
    *iov = &l->one;
    *niov = 1;
    l->handed = true;
    return (acp_ssize)l->out.len;
  }
  need = 2 * l->nspans + 1;
  if (need > l->iov_cap) {
    acp_rpc_iov *ni = acp__realloc(&r->mem, l->iov, need * sizeof(*ni));

    if (ni == NULL) {
      /* One contiguous piece still works: copy the spans in. */
      const char *d;
      acp_ssize n = acp_router_send(r, link, &d);

      if (n <= 0)
        return n;
      l->one.data = d;
      l->one.len = (size_t)n;
      *iov = &l->one;
      *niov = 1;
      return n;
    }
    l->iov = ni;
    l->iov_cap = need;
  }
  for (i = 0; i < l->nspans; i++) {
    const rt_span *sp = &l->spans[i];

    if (sp->off > at) {
      l->iov[k].data = l->out.data + at;
      l->iov[k++].len = sp->off - at;
    }
    l->iov[k].data = sp->p;
    l->iov[k++].len = sp->n;
    at = sp->off;
  }
  if (l->out.len > at) {
    l->iov[k].data = l->out.data + at;
    l->iov[k++].len = l->out.len - at;
  }
  *iov = l->iov;
  *niov = k;
  l->handed = true;
  return (acp_ssize)(l->out.len + l->ext);
}

int acp_router_want_write(const acp_router *r, size_t link) {
  if (r == NULL || link > r->n)
    return 0;
  return !r->links[link].handed &&
         (r->links[link].out.len > 0 || r->links[link].nspans > 0);
}

/* Copy a reason as an escaped JSON string, invalid UTF-8 bytes as '?'. */
static int store_reason(acp_router *r, rt_link *l, uint32_t k,
                        const char *reason) {
  char fallback[48];
  acp__buf tmp;
  acp__buf esc;
  size_t i = 0;
  size_t n;
  int rv;

  if (reason == NULL) {
    size_t p = 0;
    memcpy(fallback, "component ", 10);
    p = 10 + fmt_i64(fallback + 10, k);
    memcpy(fallback + p, " closed", 8);
    reason = fallback;
  }
  n = strlen(reason);
  /* Sanitize into a scratch buffer, then escape into the stored copy. */
  acp__buf_init(&tmp, &r->mem, 0);
  rv = acp__buf_reserve(&tmp, n + 1);
  while (rv == 0 && i < n) {
    unsigned char c = (unsigned char)reason[i];
    size_t need = c < 0x80         ? 1
                  : (c >> 5) == 6  ? 2
                  : (c >> 4) == 14 ? 3
                  : (c >> 3) == 30 ? 4
                                   : 0;
    size_t j;
    bool good = need > 0 && i + need <= n;
    for (j = 1; good && j < need; j++)
      good = ((unsigned char)reason[i + j] >> 6) == 2;
    if (good && need == 2 && c < 0xC2)
      good = false;
    if (good && need == 3) {
      unsigned char c1 = (unsigned char)reason[i + 1];
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0))
        good = false;
    }
    if (good && need == 4) {
      unsigned char c1 = (unsigned char)reason[i + 1];
      if ((c == 0xF0 && c1 < 0x90) || c > 0xF4 || (c == 0xF4 && c1 >= 0x90))
        good = false;
    }
    if (good) {
      memcpy(tmp.data + tmp.len, reason + i, need);
      tmp.len += need;
      i += need;
    } else {
      tmp.data[tmp.len++] = '?';
      i++;
    }
  }
  if (rv != 0) {
    acp__buf_dispose(&tmp);
    return nomem(r, rv);
  }
  acp__buf_init(&esc, &r->mem, 0);
  rv = buf_escaped(&esc, tmp.data, tmp.len);
  acp__buf_dispose(&tmp);
  if (rv != 0) {
    acp__buf_dispose(&esc);
    return nomem(r, rv);
  }
  l->reason = esc.data; /* ownership moves to the link */
  l->reason_len = esc.len;
  return 0;
}

int acp_router_link_closed(acp_router *r, size_t link, const char *reason,
                           const char *data, size_t data_len) {
  uint32_t k = (uint32_t)link;
  rt_link *l;
  uint32_t i;
  int rv;

  if (r == NULL || link > r->n || (data == NULL && data_len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  rv = check_call(r);
  if (rv != 0)
    return rv;
  l = &r->links[k];
  if (l->state == ACP_ROUTER_LINK_CLOSED ||
      l->state == ACP_ROUTER_LINK_BYPASSED)
    return ACP_ERR_INVALID_STATE;
  if (data != NULL) {
    rv = acp_json_validate(data, data_len, NULL);
    if (rv == ACP_ERR_NOMEM)
      return nomem(r, rv);
    if (rv != 0 || memchr(data, '\n', data_len) != NULL)
      return ACP_ERR_INVALID_ARGUMENT;
  }
  out_reset(l);
  link_forget_close(r, l);
  rv = store_reason(r, l, k, reason);
  if (rv != 0)
    return rv;
  if (data != NULL) {
    l->data = dup_bytes(r, data, data_len);
    if (l->data == NULL)
      return nomem(r, ACP_ERR_NOMEM);
    l->data_len = data_len;
  }
  l->state = ACP_ROUTER_LINK_CLOSED;
  for (i = 0; i < r->nmcp; i++)
    if (r->mcp[i].link == k)
      r->mcp[i].dead = true;
  for (i = 0; i < r->tab.used && rv == 0; i++) {
    rt_entry *e = &r->tab.e[i];
    if (!(e->flags & RT_F_USED))
      continue;
    if (e->hold != NULL && (e->dst == k || e->hold->src == k)) {
      /* A prompt held for a turn that can no longer end, or whose sender
       * is gone. */
      rt_hold *h = e->hold;
      e->hold = NULL;
      if (h->src != k)
        rv = answer_closed(r, h->src, k, h->id, h->id_len);
      acp__free(&r->mem, h);
    }
    if (rv != 0)
      break;
    if (e->dst == k) {
      if (e->src != RT_SELF) {
        r->ans_link = k;
        r->ans_id = e->id;
        rv = answer_closed(r, e->src, k, e->orig, e->orig_len);
        r->ans_link = RT_SELF;
      }
      if (e->flags & RT_F_CUT)
        r->ncut--;
      rt__table_release(&r->tab, i);
    } else if (e->src == k) {
      rv = cut_request(r, i);
    }
  }
  return rv;
}

int acp_router_link_bypass(acp_router *r, size_t link) {
  int rv;

  if (r == NULL || link == 0 || link > r->n || is_agent(r, (uint32_t)link))
    return ACP_ERR_INVALID_ARGUMENT;
  rv = check_call(r);
  if (rv != 0)
    return rv;
  if (r->links[link].state != ACP_ROUTER_LINK_CLOSED)
    return ACP_ERR_INVALID_STATE;
  r->links[link].state = ACP_ROUTER_LINK_BYPASSED;
  return 0;
}

int acp_router_link_restart(acp_router *r, size_t link) {
  uint32_t k = (uint32_t)link;
  rt_link *l;
  call c;
  int rv;

  if (r == NULL || link == 0 || link > r->n || is_agent(r, k))
    return ACP_ERR_INVALID_ARGUMENT;
  rv = check_call(r);
  if (rv != 0)
    return rv;
  l = &r->links[k];
  if (l->state != ACP_ROUTER_LINK_CLOSED &&
      l->state != ACP_ROUTER_LINK_BYPASSED)
    return ACP_ERR_INVALID_STATE;
  out_reset(l);
  l->batch_open = false;
  link_forget_close(r, l);
  l->state = ACP_ROUTER_LINK_OPEN;
  if (!l->has_init)
    return 0;
  if (r->tab.count >= r->o.max_pending) {
    l->state = ACP_ROUTER_LINK_CLOSED;
    return ACP_ERR_LIMIT;
  }
  memset(&c, 0, sizeof(c));
  c.method = "\"initialize\"";
  c.method_len = 12;
  c.params = l->init_params;
  c.params_len = l->init_params_len;
  c.init = true;
  /* forward() would answer a failure to the source; do it by hand. */
  {
    uint32_t idx;
    rt_entry *e;
    char num[24];
    wmsg w;
    rv = rt__table_alloc(&r->tab, &idx);
    if (rv != 0)
      return nomem(r, rv);
    e = &r->tab.e[idx];
    e->dst = k;
    e->src = RT_SELF;
    e->id = l->next_id++;
    e->wire = (int)l->wire;
    e->flags |= RT_F_INIT;
    if (c.params != NULL) {
      e->params = dup_bytes(r, c.params, c.params_len);
      e->params_len = c.params_len;
      if (e->params == NULL) {
        rt__table_release(&r->tab, idx);
        return nomem(r, ACP_ERR_NOMEM);
      }
    }
    r->in_batch = false;
    w_begin(r, &w, RT_SELF, k);
    rv = w_call(r, &w, &c, num, fmt_i64(num, e->id), false, e->wire);
    if (rv == 0)
      rv = w_end(&w);
    else
      w_abort(&w);
    if (rv != 0) {
      rt__table_release(&r->tab, idx);
      l->state = ACP_ROUTER_LINK_CLOSED;
      return nomem(r, rv);
    }
    rt__table_index(&r->tab, idx);
  }
  l->state = ACP_ROUTER_LINK_RESTARTING;
  return 0;
}

acp_router_link_state acp_router_link_state_of(const acp_router *r,
                                               size_t link) {
  if (r == NULL || link > r->n)
    return ACP_ROUTER_LINK_CLOSED;
  return r->links[link].state;
}

acp_router_wire acp_router_link_wire(const acp_router *r, size_t link) {
  if (r == NULL || link > r->n)
    return ACP_ROUTER_WIRE_G2;
  return r->links[link].wire;
}

size_t acp_router_pending(const acp_router *r) {
  return r ? r->tab.count : 0;
}

void acp_router_release_memory(acp_router *r) {
  size_t i;

  if (r == NULL || r->in_cb)
    return;
  for (i = 0; i <= r->n; i++) {
    rt_link *l = &r->links[i];
    if (l->handed || (l->out.len == 0 && l->nspans == 0)) {
      acp__buf_dispose(&l->out);
      out_reset(l);
      acp__free(&r->mem, l->spans);
      acp__free(&r->mem, l->iov);
      l->spans = NULL;
      l->spans_cap = 0;
      l->iov = NULL;
      l->iov_cap = 0;
    }
  }
}
