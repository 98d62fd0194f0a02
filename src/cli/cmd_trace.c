/*
 * `acp trace FILE [--json] [--html OUT.html]`: read a conductor trace
 * (`acp conductor --trace FILE`, one JSON object per hop) and print what
 * happened: messages and latency per hop, errors, cancellations, sessions;
 * or write one self-contained HTML page that draws it as a sequence
 * diagram (the page itself is src/cli/trace_page.html, embedded at build
 * time).
 *
 * The summary streams: one line in memory at a time, plus tables whose
 * sizes are capped (hops, methods, sessions, requests in flight), so a
 * trace of any length is summarised in bounded memory. The page needs one
 * small record per message (the diagram must know every arrow); the bytes
 * of the messages are copied from a second read of the file straight into
 * the page.
 *
 * Pairing. The conductor rewrites ids on every hop, so the id of a
 * response says nothing about the request as the trace shows it. Each
 * response line carries "answers": {"link", "id"}: the link its request was
 * written to and the id it had there; the request is the line with that
 * toLink and id. The MCP bridge's own hops (endpoint:K <-> bridge:SERVER)
 * keep the MCP ids, so there the pair is (requester, responder, id).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/json.h"
#include "cli.h"

/* The page template (generated from trace_page.html, see CMakeLists.txt). */
extern const char cli_trace_page[];
extern const size_t cli_trace_page_len;

/* MARK: - Limits */

enum {
  MAX_LINE = 64 << 20,   /* the conductor's default line cap */
  MAX_NAMES = 256,       /* distinct component names (lanes) */
  MAX_HOPS = 1024,       /* distinct from -> to pairs */
  MAX_METHODS = 4096,    /* distinct method names */
  MAX_SESSIONS = 65536,  /* distinct session ids */
  MAX_ERRORS = 1024,     /* distinct (code, method) */
  MAX_DETAILS = 4096,    /* distinct row details (page only) */
  MAX_PENDING = 1 << 20, /* requests waiting for an answer */
  MAX_BAD_KEPT = 20,     /* malformed lines listed by number */
  HIST_BUCKETS = 64 * 16,
  ID_TEXT = 24 /* id shown in the page, truncated */
};

/* MARK: - Interned strings */

/* A set of strings numbered in order of first appearance, with a cap:
 * past it, intern() answers `overflow` (the caller's "(other)" entry). */
typedef struct strtab {
  char **s;
  size_t *len;
  uint64_t *count; /* what count_in() counted */
  size_t n, cap_items;
  uint32_t *slots; /* index + 1, open addressing */
  size_t nslots;
  size_t max;
} strtab;

static uint64_t hash_bytes(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

static void strtab_dispose(strtab *t) {
  size_t i;
  for (i = 0; i < t->n; i++)
    free(t->s[i]);
  free(t->s);
  free(t->len);
  free(t->count);
  free(t->slots);
  memset(t, 0, sizeof(*t));
}

static int strtab_grow_slots(strtab *t) {
  size_t ns = t->nslots ? t->nslots * 2 : 64;
  uint32_t *slots = calloc(ns, sizeof(*slots));
  size_t i;
  if (slots == NULL)
    return -1;
  for (i = 0; i < t->n; i++) {
    size_t j = (size_t)hash_bytes(t->s[i], t->len[i]) & (ns - 1);
    while (slots[j] != 0)
      j = (j + 1) & (ns - 1);
    slots[j] = (uint32_t)(i + 1);
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = ns;
  return 0;
}

/* Index of s[0..n), added if new; -1 when full (or out of memory). */
static long strtab_intern(strtab *t, const char *s, size_t n) {
  size_t j;
  char *copy;

  if (t->nslots == 0 && strtab_grow_slots(t) != 0)
    return -1;
  j = (size_t)hash_bytes(s, n) & (t->nslots - 1);
  while (t->slots[j] != 0) {
    size_t i = t->slots[j] - 1;
    if (t->len[i] == n && memcmp(t->s[i], s, n) == 0)
      return (long)i;
    j = (j + 1) & (t->nslots - 1);
  }
  if (t->n >= t->max)
    return -1;
  if (t->n == t->cap_items) {
    size_t nc = t->cap_items ? t->cap_items * 2 : 16;
    char **ns = realloc(t->s, nc * sizeof(*ns));
    size_t *nl;
    if (ns == NULL)
      return -1;
    t->s = ns;
    nl = realloc(t->len, nc * sizeof(*nl));
    if (nl == NULL)
      return -1;
    t->len = nl;
    {
      uint64_t *ncount = realloc(t->count, nc * sizeof(*ncount));
      if (ncount == NULL)
        return -1;
      t->count = ncount;
    }
    t->cap_items = nc;
  }
  copy = malloc(n + 1);
  if (copy == NULL)
    return -1;
  memcpy(copy, s, n);
  copy[n] = '\0';
  t->s[t->n] = copy;
  t->len[t->n] = n;
  t->count[t->n] = 0;
  t->slots[j] = (uint32_t)(t->n + 1);
  t->n++;
  if (t->n * 2 > t->nslots && strtab_grow_slots(t) != 0)
    return (long)(t->n - 1); /* still findable: slots only got fuller */
  return (long)(t->n - 1);
}

/* MARK: - Statistics */

typedef struct hist {
  uint32_t *b; /* HIST_BUCKETS counts, allocated at the first sample */
  uint64_t count;
  double sum, max;
} hist;

typedef struct hop {
  uint32_t from, to; /* lane (name) indexes */
  uint64_t messages, requests, notifications, results, errors, cancels;
  uint64_t unanswered;
  hist lat;
} hop;

typedef struct lane {
  long long link; /* first link number seen with the name */
  bool seen;
} lane;

typedef struct errstat {
  int64_t code;
  long method; /* methods index, -1 unknown */
  uint64_t count;
} errstat;

typedef struct pending {
  char *key;
  size_t key_len;
  double t;
  uint32_t hop;
  long method;
  int64_t row;
  int32_t next; /* chain in bucket, or free list */
} pending;

typedef struct bad_line {
  uint64_t line;
  char why[64];
} bad_line;

/* One message of the page. */
typedef struct row {
  double t;
  uint32_t line;
  int32_t pair;
  int32_t method;
  int32_t session;
  int32_t detail; /* details index: an update's kind, an error's code */
  uint16_t from, to;
  uint8_t kind;
  uint8_t flags;
  char id[ID_TEXT];
} row;

enum { K_REQ = 0, K_NOTIF = 1, K_RESULT = 2, K_ERROR = 3, K_BAD = 4 };
enum { F_WRAPPED = 1, F_CANCEL = 2, F_ELEMENT = 4 };

typedef struct trace {
  const char *path;
  strtab names, methods, sessions, details;
  lane lanes[MAX_NAMES + 1];
  hop *hops;
  size_t nhops;
  errstat *errs;
  size_t nerrs;
  uint64_t lines, messages, malformed, batches;
  uint64_t requests, notifications, results, errors, paired, unmatched;
  uint64_t unpairable; /* responses without "answers" (older traces) */
  uint64_t cancels, pending_dropped, other_hops, other_names;
  /* answers that say a request was cancelled: a prompt turn that ended
   * "cancelled", an error -32800 (RequestCancelled) */
  uint64_t cancelled_turns, cancelled_requests;
  uint64_t other_methods, other_sessions;
  double t_first, t_last;
  bool have_time;
  bad_line bad[MAX_BAD_KEPT];
  size_t nbad;
  /* requests in flight */
  pending *pend;
  size_t npend, pend_used, pend_cap; /* live, slots ever used, slots */
  int32_t pend_free;
  int32_t *pend_buckets;
  size_t pend_nbuckets;
  /* the page's rows (NULL unless --html) */
  bool keep_rows;
  row *rows;
  size_t nrows, rows_cap;
  bool nomem;
} trace;

/* MARK: - Latency histogram */

/* Microseconds in buckets of 1/16 of a power of two: the most significant
 * bit and the four after it. Percentiles are then within 1/16 of the truth
 * whatever the range, with no libm and a fixed 4 KiB per hop. */
static size_t hist_bucket(uint64_t us) {
  int msb = 0;
  if (us < 16)
    return (size_t)us;
  while ((us >> msb) > 1)
    msb++;
  return (size_t)(msb * 16) + (size_t)((us >> (msb - 4)) & 15);
}

static double hist_value(size_t b) {
  uint64_t lo, width;
  int msb;
  if (b < 16)
    return (double)b / 1000.0;
  msb = (int)(b / 16);
  lo = ((uint64_t)1 << msb) + ((uint64_t)(b % 16) << (msb - 4));
  width = (uint64_t)1 << (msb - 4);
  return ((double)lo + (double)width / 2.0) / 1000.0;
}

static void hist_add(trace *tr, hist *h, double ms) {
  uint64_t us;
  if (ms < 0)
    ms = 0;
  if (h->b == NULL) {
    h->b = calloc(HIST_BUCKETS, sizeof(*h->b));
    if (h->b == NULL) {
      tr->nomem = true;
      return;
    }
  }
  us = ms > 1e15 ? (uint64_t)1e15 : (uint64_t)(ms * 1000.0 + 0.5);
  h->b[hist_bucket(us)]++;
  h->count++;
  h->sum += ms;
  if (ms > h->max)
    h->max = ms;
}

static double hist_pct(const hist *h, double q) {
  uint64_t rank, seen = 0;
  size_t i;
  double v;
  if (h->count == 0 || h->b == NULL)
    return 0;
  rank = (uint64_t)(q * (double)h->count);
  if ((double)rank < q * (double)h->count)
    rank++;
  if (rank == 0)
    rank = 1;
  for (i = 0; i < HIST_BUCKETS; i++) {
    seen += h->b[i];
    if (seen >= rank)
      break;
  }
  v = hist_value(i);
  return v > h->max ? h->max : v;
}

/* MARK: - Tables */

static long lane_of(trace *tr, const char *s, size_t n, long long link) {
  long i = strtab_intern(&tr->names, s, n);
  if (i < 0) {
    tr->other_names++;
    return MAX_NAMES; /* "(other)" */
  }
  if (!tr->lanes[i].seen) {
    tr->lanes[i].seen = true;
    tr->lanes[i].link = link;
  }
  return i;
}

static long hop_of(trace *tr, long from, long to) {
  size_t i;
  for (i = 0; i < tr->nhops; i++)
    if (tr->hops[i].from == (uint32_t)from && tr->hops[i].to == (uint32_t)to)
      return (long)i;
  if (tr->nhops >= MAX_HOPS) {
    tr->other_hops++;
    return -1;
  }
  if (tr->nhops % 16 == 0) {
    hop *nh = realloc(tr->hops, (tr->nhops + 16) * sizeof(*nh));
    if (nh == NULL) {
      tr->nomem = true;
      return -1;
    }
    tr->hops = nh;
  }
  memset(&tr->hops[tr->nhops], 0, sizeof(hop));
  tr->hops[tr->nhops].from = (uint32_t)from;
  tr->hops[tr->nhops].to = (uint32_t)to;
  return (long)tr->nhops++;
}

static long count_in(trace *tr, strtab *t, const char *s, size_t n,
                     uint64_t *other) {
  long i = strtab_intern(t, s, n);
  (void)tr;
  if (i < 0) {
    (*other)++;
    return -1;
  }
  t->count[i]++;
  return i;
}

static void note_error(trace *tr, int64_t code, long method) {
  size_t i;
  for (i = 0; i < tr->nerrs; i++)
    if (tr->errs[i].code == code && tr->errs[i].method == method) {
      tr->errs[i].count++;
      return;
    }
  if (tr->nerrs >= MAX_ERRORS)
    return;
  if (tr->nerrs % 16 == 0) {
    errstat *ne = realloc(tr->errs, (tr->nerrs + 16) * sizeof(*ne));
    if (ne == NULL) {
      tr->nomem = true;
      return;
    }
    tr->errs = ne;
  }
  tr->errs[tr->nerrs].code = code;
  tr->errs[tr->nerrs].method = method;
  tr->errs[tr->nerrs].count = 1;
  tr->nerrs++;
}

static void note_bad(trace *tr, const char *why) {
  tr->malformed++;
  if (tr->nbad < MAX_BAD_KEPT) {
    tr->bad[tr->nbad].line = tr->lines;
    snprintf(tr->bad[tr->nbad].why, sizeof(tr->bad[0].why), "%s", why);
    tr->nbad++;
  }
}

/* MARK: - Requests in flight */

static int32_t *pend_bucket(trace *tr, const char *k, size_t n) {
  return &tr->pend_buckets[hash_bytes(k, n) & (tr->pend_nbuckets - 1)];
}

static void pend_add(trace *tr, const char *k, size_t n, double t,
                     uint32_t hopi, long method, int64_t rowi) {
  int32_t i, *head;
  pending *p;

  if (tr->pend_buckets == NULL) {
    tr->pend_nbuckets = 1 << 16;
    tr->pend_buckets = malloc(tr->pend_nbuckets * sizeof(int32_t));
    if (tr->pend_buckets == NULL) {
      tr->nomem = true;
      return;
    }
    memset(tr->pend_buckets, 0xff, tr->pend_nbuckets * sizeof(int32_t));
    tr->pend_free = -1;
  }
  if (tr->npend >= MAX_PENDING) {
    tr->pending_dropped++;
    return;
  }
  if (tr->pend_free >= 0) {
    i = tr->pend_free;
    tr->pend_free = tr->pend[i].next;
  } else {
    if (tr->pend_used == tr->pend_cap) {
      size_t nc = tr->pend_cap ? tr->pend_cap * 2 : 64;
      pending *np = realloc(tr->pend, nc * sizeof(*np));
      if (np == NULL) {
        tr->nomem = true;
        return;
      }
      tr->pend = np;
      tr->pend_cap = nc;
    }
    i = (int32_t)tr->pend_used++;
  }
  p = &tr->pend[i];
  p->key = malloc(n);
  if (p->key == NULL) {
    tr->nomem = true;
    p->next = tr->pend_free;
    tr->pend_free = i;
    return;
  }
  memcpy(p->key, k, n);
  p->key_len = n;
  p->t = t;
  p->hop = hopi;
  p->method = method;
  p->row = rowi;
  head = pend_bucket(tr, k, n);
  p->next = *head;
  *head = i;
  tr->npend++;
}

/* Take the request waiting under key k: 1 and *out filled, or 0. */
static int pend_take(trace *tr, const char *k, size_t n, pending *out) {
  int32_t *link;
  if (tr->pend_buckets == NULL)
    return 0;
  link = pend_bucket(tr, k, n);
  while (*link >= 0) {
    pending *p = &tr->pend[*link];
    if (p->key_len == n && memcmp(p->key, k, n) == 0) {
      int32_t i = *link;
      *out = *p;
      *link = p->next;
      p->next = tr->pend_free;
      tr->pend_free = i;
      p->key = NULL;
      tr->npend--;
      return 1;
    }
    link = &p->next;
  }
  return 0;
}

/* MARK: - Reading one line */

static bool starts_with(const char *s, size_t n, const char *p) {
  size_t k = strlen(p);
  return n >= k && memcmp(s, p, k) == 0;
}

static bool is_successor(const acp_json_val *m) {
  return ACP_JSON_STR_EQ_LIT(m, "proxy/successor") ||
         ACP_JSON_STR_EQ_LIT(m, "_proxy/successor") ||
         ACP_JSON_STR_EQ_LIT(m, "_proxy/successor/request") ||
         ACP_JSON_STR_EQ_LIT(m, "_proxy/successor/notification");
}

/* The key of a request as written to `to` (or of its answer): see the
 * pairing note at the top. Returns the key's length in buf, 0 if none. */
static size_t req_key(char *buf, size_t cap, const char *requester, size_t rn,
                      const char *responder, size_t pn, long long link,
                      const char *id, size_t idn) {
  int n;
  if (starts_with(responder, pn, "bridge:") ||
      starts_with(responder, pn, "endpoint:"))
    n = snprintf(buf, cap, "N%.*s\x1f%.*s\x1f%.*s", (int)rn, requester, (int)pn,
                 responder, (int)idn, id);
  else
    n = snprintf(buf, cap, "L%lld\x1f%.*s", link, (int)idn, id);
  return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

typedef struct entry {
  double t;
  const char *from, *to;
  size_t from_n, to_n;
  long long from_link, to_link;
  const acp_json_val *answers;
  long lfrom, lto;
  uint32_t line;
} entry;

static void add_row(trace *tr, const entry *e, uint8_t kind, uint8_t flags,
                    long method, long session, const acp_json_val *id) {
  row *r;
  if (!tr->keep_rows)
    return;
  if (tr->nrows == tr->rows_cap) {
    size_t nc = tr->rows_cap ? tr->rows_cap * 2 : 1024;
    row *nr = realloc(tr->rows, nc * sizeof(*nr));
    if (nr == NULL) {
      tr->nomem = true;
      return;
    }
    tr->rows = nr;
    tr->rows_cap = nc;
  }
  r = &tr->rows[tr->nrows++];
  memset(r, 0, sizeof(*r));
  r->t = e ? e->t : 0;
  r->line = e ? e->line : (uint32_t)tr->lines;
  r->pair = -1;
  r->method = (int32_t)method;
  r->session = (int32_t)session;
  r->from = (uint16_t)(e ? e->lfrom : 0);
  r->to = (uint16_t)(e ? e->lto : 0);
  r->kind = kind;
  r->flags = flags;
  r->detail = -1;
  if (id != NULL) {
    size_t n;
    const char *p = acp_json_raw(id, &n);
    if (n >= sizeof(r->id))
      n = sizeof(r->id) - 1;
    memcpy(r->id, p, n);
    r->id[n] = '\0';
  }
}

/* A word or two that tells rows of one method apart in the diagram: the
 * kind of a session/update, the MCP method of an mcp/message, the code
 * and message of an error. */
static void set_detail(trace *tr, acp_json_doc *doc, const acp_json_val *method,
                       const acp_json_val *params, const acp_json_val *error) {
  char buf[128];
  const char *s;
  size_t n = 0;
  long i;

  if (!tr->keep_rows || tr->nrows == 0)
    return;
  if (error != NULL) {
    int64_t code = 0;
    const acp_json_val *msg = acp_json_obj_getz(error, "message");
    int k;
    (void)acp_json_get_int64(acp_json_obj_getz(error, "code"), &code);
    if (acp_json_doc_str(doc, msg, &s, &n) != 0)
      n = 0;
    k = snprintf(buf, sizeof(buf), "%lld %.*s", (long long)code,
                 (int)(n > 80 ? 80 : n), n ? s : "");
    n = k < 0 ? 0 : (size_t)k >= sizeof(buf) ? sizeof(buf) - 1 : (size_t)k;
    s = buf;
  } else if (ACP_JSON_STR_EQ_LIT(method, "session/update")) {
    const acp_json_val *kind =
        acp_json_obj_getz(acp_json_obj_getz(params, "update"), "sessionUpdate");
    if (acp_json_doc_str(doc, kind, &s, &n) != 0)
      return;
  } else if (ACP_JSON_STR_EQ_LIT(method, "mcp/message")) {
    /* The MCP method it carries. */
    if (acp_json_doc_str(doc, acp_json_obj_getz(params, "method"), &s, &n) != 0)
      return;
  } else {
    return;
  }
  i = strtab_intern(&tr->details, s, n);
  tr->rows[tr->nrows - 1].detail = (int32_t)i;
}

static long session_of(trace *tr, acp_json_doc *doc, const acp_json_val *obj) {
  const acp_json_val *sid = acp_json_obj_getz(obj, "sessionId");
  const char *s;
  size_t n;
  if (sid == NULL || acp_json_doc_str(doc, sid, &s, &n) != 0)
    return -1;
  return count_in(tr, &tr->sessions, s, n, &tr->other_sessions);
}

/* One message (an object, or anything else where one should be). */
static void one_message(trace *tr, acp_json_doc *doc, entry *e,
                        const acp_json_val *m, uint8_t flags) {
  const acp_json_val *method = acp_json_obj_getz(m, "method");
  const acp_json_val *id = acp_json_obj_getz(m, "id");
  const acp_json_val *params = acp_json_obj_getz(m, "params");
  const acp_json_val *result = acp_json_obj_getz(m, "result");
  const acp_json_val *error = acp_json_obj_getz(m, "error");
  long hopi = hop_of(tr, e->lfrom, e->lto);
  hop *h = hopi >= 0 ? &tr->hops[hopi] : NULL;
  long mi = -1, si = -1;
  char key[512];
  size_t kn;

  tr->messages++;
  if (h != NULL)
    h->messages++;
  if (acp_json_type_of(m) != ACP_JSON_OBJECT) {
    add_row(tr, e, K_BAD, flags, -1, -1, NULL);
    note_bad(tr, "message is not an object");
    return;
  }
  if (method != NULL && acp_json_type_of(method) == ACP_JSON_STRING) {
    const char *s;
    size_t n;
    const acp_json_val *inner = acp_json_obj_getz(params, "method");
    if (is_successor(method) && acp_json_type_of(inner) == ACP_JSON_STRING) {
      flags |= F_WRAPPED;
      method = inner;
      params = acp_json_obj_getz(params, "params");
    }
    if (acp_json_doc_str(doc, method, &s, &n) == 0)
      mi = count_in(tr, &tr->methods, s, n, &tr->other_methods);
    if (ACP_JSON_STR_EQ_LIT(method, "$/cancel_request") ||
        ACP_JSON_STR_EQ_LIT(method, "session/cancel")) {
      flags |= F_CANCEL;
      tr->cancels++;
      if (h != NULL)
        h->cancels++;
    }
    si = session_of(tr, doc, params);
    if (id != NULL) {
      size_t idn;
      const char *idp = acp_json_raw(id, &idn);
      tr->requests++;
      if (h != NULL)
        h->requests++;
      add_row(tr, e, K_REQ, flags, mi, si, id);
      set_detail(tr, doc, method, params, NULL);
      kn = req_key(key, sizeof(key), e->from, e->from_n, e->to, e->to_n,
                   e->to_link, idp, idn);
      if (kn > 0 && hopi >= 0)
        pend_add(tr, key, kn, e->t, (uint32_t)hopi, mi,
                 tr->keep_rows ? (int64_t)tr->nrows - 1 : -1);
    } else {
      tr->notifications++;
      if (h != NULL)
        h->notifications++;
      add_row(tr, e, K_NOTIF, flags, mi, si, NULL);
      set_detail(tr, doc, method, params, NULL);
    }
    return;
  }
  if (result != NULL || error != NULL) {
    pending p = {0};
    bool found = false;
    int64_t code = 0;

    kn = 0;
    if (e->answers != NULL) {
      int64_t link, aid;
      char num[24];
      if (acp_json_get_int64(acp_json_obj_getz(e->answers, "link"), &link) ==
              0 &&
          acp_json_get_int64(acp_json_obj_getz(e->answers, "id"), &aid) == 0) {
        int nn = snprintf(num, sizeof(num), "%lld", (long long)aid);
        kn = req_key(key, sizeof(key), "", 0, "", 0, (long long)link, num,
                     (size_t)nn);
      }
    } else if (id != NULL && (starts_with(e->from, e->from_n, "bridge:") ||
                              starts_with(e->from, e->from_n, "endpoint:"))) {
      size_t idn;
      const char *idp = acp_json_raw(id, &idn);
      kn = req_key(key, sizeof(key), e->to, e->to_n, e->from, e->from_n, 0, idp,
                   idn);
    } else {
      tr->unpairable++;
    }
    if (kn > 0)
      found = pend_take(tr, key, kn, &p) == 1;
    if (result != NULL && error == NULL) {
      tr->results++;
      if (h != NULL)
        h->results++;
      si = session_of(tr, doc, result);
      if (ACP_JSON_STR_EQ_LIT(acp_json_obj_getz(result, "stopReason"),
                              "cancelled"))
        tr->cancelled_turns++;
    } else {
      tr->errors++;
      if (h != NULL)
        h->errors++;
      (void)acp_json_get_int64(acp_json_obj_getz(error, "code"), &code);
      if (code == -32800)
        tr->cancelled_requests++;
    }
    if (found) {
      tr->paired++;
      free(p.key);
      hist_add(tr, &tr->hops[p.hop].lat, e->t - p.t);
      mi = p.method;
    } else {
      tr->unmatched++;
    }
    if (error != NULL)
      note_error(tr, code, mi);
    add_row(tr, e, error != NULL ? K_ERROR : K_RESULT, flags, mi, si, id);
    if (error != NULL)
      set_detail(tr, doc, NULL, NULL, error);
    if (found && p.row >= 0 && tr->keep_rows && tr->nrows > 0) {
      tr->rows[tr->nrows - 1].pair = (int32_t)p.row;
      tr->rows[p.row].pair = (int32_t)(tr->nrows - 1);
    }
    return;
  }
  add_row(tr, e, K_BAD, flags, -1, -1, NULL);
  note_bad(tr, "neither a request, a notification nor a response");
}

static int get_name(acp_json_doc *doc, const acp_json_val *obj, const char *k,
                    const char **s, size_t *n) {
  const acp_json_val *v = acp_json_obj_getz(obj, k);
  return acp_json_doc_str(doc, v, s, n);
}

/* Read the envelope of a trace entry into e; its message, or NULL when
 * the line is not a trace entry. Shared by both passes so that they agree
 * on what is a row. */
static const acp_json_val *entry_msg(acp_json_doc *doc,
                                     const acp_json_val *root, entry *e) {
  const acp_json_val *msg = acp_json_obj_getz(root, "message");
  int64_t link;

  if (acp_json_get_double(acp_json_obj_getz(root, "time"), &e->t) != 0 ||
      get_name(doc, root, "from", &e->from, &e->from_n) != 0 ||
      get_name(doc, root, "to", &e->to, &e->to_n) != 0 || msg == NULL)
    return NULL;
  e->from_link =
      acp_json_get_int64(acp_json_obj_getz(root, "fromLink"), &link) == 0
          ? (long long)link
          : -1;
  e->to_link = acp_json_get_int64(acp_json_obj_getz(root, "toLink"), &link) == 0
                   ? (long long)link
                   : -1;
  e->answers = acp_json_obj_getz(root, "answers");
  return msg;
}

static size_t trim_line(const char *line, size_t len) {
  while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' ||
                     line[len - 1] == '\t'))
    len--;
  return len;
}

static void one_line(trace *tr, acp_json_doc *doc, const char *line,
                     size_t len) {
  const acp_json_val *msg;
  acp_json_err err;
  entry e;

  memset(&e, 0, sizeof(e));
  e.line = (uint32_t)tr->lines;
  len = trim_line(line, len);
  if (len == 0)
    return;
  if (acp_json_doc_parse(doc, line, len, &err) != 0) {
    char why[64];
    snprintf(why, sizeof(why), "not JSON: %s at byte %zu", err.msg, err.pos);
    note_bad(tr, why);
    add_row(tr, NULL, K_BAD, 0, -1, -1, NULL);
    return;
  }
  msg = entry_msg(doc, acp_json_doc_root(doc), &e);
  if (msg == NULL) {
    note_bad(tr, "not a trace entry (time, from, to, message)");
    add_row(tr, NULL, K_BAD, 0, -1, -1, NULL);
    return;
  }
  e.lfrom = lane_of(tr, e.from, e.from_n, e.from_link);
  e.lto = lane_of(tr, e.to, e.to_n, e.to_link);
  if (!tr->have_time) {
    tr->have_time = true;
    tr->t_first = tr->t_last = e.t;
  }
  if (e.t < tr->t_first)
    tr->t_first = e.t;
  if (e.t > tr->t_last)
    tr->t_last = e.t;
  if (acp_json_type_of(msg) == ACP_JSON_ARRAY) {
    const acp_json_val *el;
    tr->batches++;
    for (el = acp_json_child(msg); el != NULL; el = acp_json_next(el))
      one_message(tr, doc, &e, el, F_ELEMENT);
    return;
  }
  one_message(tr, doc, &e, msg, 0);
}

/* MARK: - Reading the file */

typedef struct reader {
  FILE *f;
  char *buf;
  size_t cap, start, end;
  bool eof, skipping;
} reader;

/* The next line (without its newline) in *line and *len: 1, 0 at the end, or
 * -1 for a line over MAX_LINE (skipped; the caller counts it). */
static int next_line(reader *r, const char **line, size_t *len) {
  for (;;) {
    char *nl = r->end > r->start
                   ? memchr(r->buf + r->start, '\n', r->end - r->start)
                   : NULL;
    if (nl != NULL) {
      size_t s = r->start;
      r->start = (size_t)(nl - r->buf) + 1;
      if (r->skipping) {
        r->skipping = false;
        return -1;
      }
      *line = r->buf + s;
      *len = (size_t)(nl - r->buf) - s;
      return 1;
    }
    if (r->eof) {
      if (r->end > r->start && !r->skipping) {
        *line = r->buf + r->start;
        *len = r->end - r->start;
        r->start = r->end;
        return 1;
      }
      if (r->skipping) {
        r->skipping = false;
        return -1;
      }
      return 0;
    }
    if (r->skipping) {
      r->start = r->end = 0;
    } else if (r->start > 0) {
      memmove(r->buf, r->buf + r->start, r->end - r->start);
      r->end -= r->start;
      r->start = 0;
    }
    if (r->end == r->cap) {
      size_t nc = r->cap ? r->cap * 2 : 1 << 16;
      char *nb;
      if (r->cap >= MAX_LINE) {
        r->skipping = true;
        r->start = r->end = 0;
        continue;
      }
      nb = realloc(r->buf, nc);
      if (nb == NULL)
        return -2;
      r->buf = nb;
      r->cap = nc;
    }
    {
      size_t got = fread(r->buf + r->end, 1, r->cap - r->end, r->f);
      r->end += got;
      if (got == 0)
        r->eof = true;
    }
  }
}

static int read_trace(trace *tr, FILE *f) {
  acp_json_doc *doc = NULL;
  reader rd;
  const char *line;
  size_t len;
  int rv;

  memset(&rd, 0, sizeof(rd));
  rd.f = f;
  if (acp_json_doc_new(&doc, NULL) != 0)
    return -1;
  for (;;) {
    rv = next_line(&rd, &line, &len);
    if (rv == 0 || rv == -2)
      break;
    tr->lines++;
    if (rv == -1) {
      note_bad(tr, "line longer than 64 MiB");
      add_row(tr, NULL, K_BAD, 0, -1, -1, NULL);
      continue;
    }
    one_line(tr, doc, line, len);
    if (tr->nomem)
      break;
  }
  acp_json_doc_free(doc);
  free(rd.buf);
  if (rv == -2 || tr->nomem || ferror(f))
    return -1;
  return 0;
}

static void trace_dispose(trace *tr) {
  size_t i;
  strtab_dispose(&tr->names);
  strtab_dispose(&tr->methods);
  strtab_dispose(&tr->sessions);
  strtab_dispose(&tr->details);
  for (i = 0; i < tr->nhops; i++)
    free(tr->hops[i].lat.b);
  free(tr->hops);
  free(tr->errs);
  for (i = 0; i < tr->pend_used; i++)
    free(tr->pend[i].key);
  free(tr->pend);
  free(tr->pend_buckets);
  free(tr->rows);
}

/* MARK: - Lanes in diagram order */

/* Client (or parent) first, then the conductor, the components by link,
 * then the MCP bridge: the side that talks to the components, each
 * server's end, and the agent's MCP endpoints (shims) last. */
static int lane_rank(const trace *tr, size_t i) {
  const char *s = i < tr->names.n ? tr->names.s[i] : "";
  size_t n = i < tr->names.n ? tr->names.len[i] : 0;
  if (i >= tr->names.n)
    return 9;
  if (strcmp(s, "conductor") == 0)
    return 1;
  if (strcmp(s, "bridge") == 0)
    return 4;
  if (starts_with(s, n, "bridge:"))
    return 5;
  if (starts_with(s, n, "endpoint:"))
    return 6;
  return tr->lanes[i].link == 0 ? 0 : 2;
}

static int lane_cmp(const trace *tr, size_t a, size_t b) {
  int ra = lane_rank(tr, a), rb = lane_rank(tr, b);
  if (ra != rb)
    return ra < rb ? -1 : 1;
  if (tr->lanes[a].link != tr->lanes[b].link)
    return tr->lanes[a].link < tr->lanes[b].link ? -1 : 1;
  return a < b ? -1 : a > b;
}

/* order[p] = lane at position p; pos[lane] = its position. Lanes are few
 * (MAX_NAMES), so an insertion sort does. */
static size_t lane_order(const trace *tr, uint16_t *order, uint16_t *pos) {
  size_t n = tr->names.n, i, j;
  bool other = tr->other_names > 0;
  for (i = 0; i < n; i++) {
    uint16_t v = (uint16_t)i;
    for (j = i; j > 0 && lane_cmp(tr, order[j - 1], v) > 0; j--)
      order[j] = order[j - 1];
    order[j] = v;
  }
  if (other)
    order[n++] = MAX_NAMES;
  for (i = 0; i < n; i++)
    pos[order[i]] = (uint16_t)i;
  return n;
}

static const char *lane_name(const trace *tr, size_t i, size_t *len) {
  if (i < tr->names.n) {
    *len = tr->names.len[i];
    return tr->names.s[i];
  }
  *len = 7;
  return "(other)";
}

static const char *method_name(const trace *tr, long i) {
  return i >= 0 && (size_t)i < tr->methods.n ? tr->methods.s[i] : "?";
}

static uint64_t method_count(const trace *tr, const char *m) {
  size_t i;
  for (i = 0; i < tr->methods.n; i++)
    if (strcmp(tr->methods.s[i], m) == 0)
      return tr->methods.count[i];
  return 0;
}

/* MARK: - The summary */

static void finish(trace *tr) {
  size_t i;
  for (i = 0; i < tr->pend_used; i++)
    if (tr->pend[i].key != NULL)
      tr->hops[tr->pend[i].hop].unanswered++;
}

static void w_num(acp_json_writer *w, const char *k, double v) {
  acp_json_write_keyz(w, k);
  acp_json_write_double(w, (double)(int64_t)(v * 1000.0 + 0.5) / 1000.0);
}

static void w_u64(acp_json_writer *w, const char *k, uint64_t v) {
  acp_json_write_keyz(w, k);
  acp_json_write_uint(w, v);
}

static void w_lane(acp_json_writer *w, const trace *tr, size_t i) {
  size_t n;
  const char *s = lane_name(tr, i, &n);
  acp_json_write_str(w, s, n);
}

static int cmp_count_desc(const void *a, const void *b, const strtab *t) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  if (t->count[x] != t->count[y])
    return t->count[x] > t->count[y] ? -1 : 1;
  return x < y ? -1 : x > y;
}

static const strtab *sort_tab;
static int cmp_sort_tab(const void *a, const void *b) {
  return cmp_count_desc(a, b, sort_tab);
}

/* Indexes of t sorted by count, most first. Caller frees. */
static uint32_t *by_count(const strtab *t) {
  uint32_t *ix = malloc((t->n ? t->n : 1) * sizeof(*ix));
  size_t i;
  if (ix == NULL)
    return NULL;
  for (i = 0; i < t->n; i++)
    ix[i] = (uint32_t)i;
  sort_tab = t;
  qsort(ix, t->n, sizeof(*ix), cmp_sort_tab);
  return ix;
}

static int write_summary(const trace *tr, acp_json_writer *w) {
  uint16_t order[MAX_NAMES + 1], pos[MAX_NAMES + 1];
  size_t nl = lane_order(tr, order, pos), i;
  uint64_t unanswered = 0;
  uint32_t *ix;

  for (i = 0; i < tr->nhops; i++)
    unanswered += tr->hops[i].unanswered;
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "file");
  acp_json_write_strz(w, tr->path);
  w_u64(w, "lines", tr->lines);
  w_u64(w, "messages", tr->messages);
  w_u64(w, "batches", tr->batches);
  w_u64(w, "malformed", tr->malformed);
  acp_json_write_keyz(w, "malformedLines");
  acp_json_write_arr_begin(w);
  for (i = 0; i < tr->nbad; i++) {
    acp_json_write_obj_begin(w);
    w_u64(w, "line", tr->bad[i].line);
    acp_json_write_keyz(w, "reason");
    acp_json_write_strz(w, tr->bad[i].why);
    acp_json_write_obj_end(w);
  }
  acp_json_write_arr_end(w);
  w_num(w, "durationMs", tr->t_last - tr->t_first);
  w_u64(w, "requests", tr->requests);
  w_u64(w, "notifications", tr->notifications);
  w_u64(w, "responses", tr->results + tr->errors);
  w_u64(w, "errors", tr->errors);
  w_u64(w, "paired", tr->paired);
  w_u64(w, "unanswered", unanswered);
  w_u64(w, "unmatchedResponses", tr->unmatched);
  w_u64(w, "unpairable", tr->unpairable);
  w_u64(w, "cancels", tr->cancels);
  w_u64(w, "cancelledTurns", tr->cancelled_turns);
  w_u64(w, "cancelledRequests", tr->cancelled_requests);
  acp_json_write_keyz(w, "components");
  acp_json_write_arr_begin(w);
  for (i = 0; i < nl; i++) {
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "name");
    w_lane(w, tr, order[i]);
    acp_json_write_keyz(w, "link");
    acp_json_write_int(w, order[i] < MAX_NAMES ? tr->lanes[order[i]].link : -1);
    acp_json_write_obj_end(w);
  }
  acp_json_write_arr_end(w);
  acp_json_write_keyz(w, "hops");
  acp_json_write_arr_begin(w);
  for (i = 0; i < tr->nhops; i++) {
    const hop *h = &tr->hops[i];
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "from");
    w_lane(w, tr, h->from);
    acp_json_write_keyz(w, "to");
    w_lane(w, tr, h->to);
    w_u64(w, "messages", h->messages);
    w_u64(w, "requests", h->requests);
    w_u64(w, "notifications", h->notifications);
    w_u64(w, "results", h->results);
    w_u64(w, "errors", h->errors);
    w_u64(w, "cancels", h->cancels);
    w_u64(w, "unanswered", h->unanswered);
    acp_json_write_keyz(w, "latencyMs");
    acp_json_write_obj_begin(w);
    w_u64(w, "count", h->lat.count);
    w_num(w, "p50", hist_pct(&h->lat, 0.50));
    w_num(w, "p99", hist_pct(&h->lat, 0.99));
    w_num(w, "max", h->lat.max);
    w_num(w, "mean", h->lat.count ? h->lat.sum / (double)h->lat.count : 0);
    acp_json_write_obj_end(w);
    acp_json_write_obj_end(w);
  }
  acp_json_write_arr_end(w);
  acp_json_write_keyz(w, "errorsByCode");
  acp_json_write_arr_begin(w);
  for (i = 0; i < tr->nerrs; i++) {
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "code");
    acp_json_write_int(w, tr->errs[i].code);
    acp_json_write_keyz(w, "method");
    acp_json_write_strz(w, method_name(tr, tr->errs[i].method));
    w_u64(w, "count", tr->errs[i].count);
    acp_json_write_obj_end(w);
  }
  acp_json_write_arr_end(w);
  acp_json_write_keyz(w, "methods");
  acp_json_write_arr_begin(w);
  ix = by_count(&tr->methods);
  for (i = 0; ix != NULL && i < tr->methods.n; i++) {
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "method");
    acp_json_write_str(w, tr->methods.s[ix[i]], tr->methods.len[ix[i]]);
    w_u64(w, "count", tr->methods.count[ix[i]]);
    acp_json_write_obj_end(w);
  }
  free(ix);
  acp_json_write_arr_end(w);
  w_u64(w, "sessionCount", tr->sessions.n);
  acp_json_write_keyz(w, "sessions");
  acp_json_write_arr_begin(w);
  for (i = 0; i < tr->sessions.n; i++) {
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "id");
    acp_json_write_str(w, tr->sessions.s[i], tr->sessions.len[i]);
    w_u64(w, "messages", tr->sessions.count[i]);
    acp_json_write_obj_end(w);
  }
  acp_json_write_arr_end(w);
  acp_json_write_keyz(w, "overCap");
  acp_json_write_obj_begin(w);
  w_u64(w, "components", tr->other_names);
  w_u64(w, "hops", tr->other_hops);
  w_u64(w, "methods", tr->other_methods);
  w_u64(w, "sessions", tr->other_sessions);
  w_u64(w, "pending", tr->pending_dropped);
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w);
}

static void print_summary(const trace *tr, FILE *f) {
  uint16_t order[MAX_NAMES + 1], pos[MAX_NAMES + 1];
  size_t nl = lane_order(tr, order, pos), i, n;
  uint64_t unanswered = 0;
  const char *s;

  for (i = 0; i < tr->nhops; i++)
    unanswered += tr->hops[i].unanswered;
  fprintf(f,
          "%s: %llu messages on %llu lines over %.1f ms, %llu malformed "
          "line%s\n",
          tr->path, (unsigned long long)tr->messages,
          (unsigned long long)tr->lines, tr->t_last - tr->t_first,
          (unsigned long long)tr->malformed, tr->malformed == 1 ? "" : "s");
  for (i = 0; i < tr->nbad; i++)
    fprintf(f, "  line %llu: %s\n", (unsigned long long)tr->bad[i].line,
            tr->bad[i].why);
  if (tr->malformed > tr->nbad)
    fprintf(f, "  (and %llu more)\n",
            (unsigned long long)(tr->malformed - tr->nbad));
  fputs("components:", f);
  for (i = 0; i < nl; i++) {
    s = lane_name(tr, order[i], &n);
    fprintf(f, "%s %.*s", i ? "," : "", (int)n, s);
  }
  fputs("\n\nhop                              msgs    req  notif   resp    err "
        " open   p50 ms   p99 ms   max ms\n",
        f);
  for (i = 0; i < tr->nhops; i++) {
    const hop *h = &tr->hops[i];
    char name[64];
    size_t an, bn;
    const char *a = lane_name(tr, h->from, &an), *b = lane_name(tr, h->to, &bn);
    snprintf(name, sizeof(name), "%.*s -> %.*s", (int)an, a, (int)bn, b);
    fprintf(f, "%-31s %6llu %6llu %6llu %6llu %6llu %5llu", name,
            (unsigned long long)h->messages, (unsigned long long)h->requests,
            (unsigned long long)h->notifications,
            (unsigned long long)h->results, (unsigned long long)h->errors,
            (unsigned long long)h->unanswered);
    if (h->lat.count > 0)
      fprintf(f, " %8.3f %8.3f %8.3f\n", hist_pct(&h->lat, 0.5),
              hist_pct(&h->lat, 0.99), h->lat.max);
    else
      fputs("        -        -        -\n", f);
  }
  fputs("(latency: a request sent on the hop until its answer came back; "
        "open: never answered)\n\n",
        f);
  fprintf(f,
          "requests %llu: answered %llu, unanswered %llu; responses with no "
          "request in the trace %llu\n",
          (unsigned long long)tr->requests, (unsigned long long)tr->paired,
          (unsigned long long)unanswered, (unsigned long long)tr->unmatched);
  if (tr->unpairable > 0)
    fprintf(f,
            "  %llu responses carry no \"answers\" (a trace from an older "
            "conductor): not paired\n",
            (unsigned long long)tr->unpairable);
  if (tr->nerrs == 0) {
    fputs("errors: none\n", f);
  } else {
    fprintf(f, "errors (%llu responses):\n", (unsigned long long)tr->errors);
    for (i = 0; i < tr->nerrs; i++)
      fprintf(f, "  %7lld  %-32s %llu\n", (long long)tr->errs[i].code,
              method_name(tr, tr->errs[i].method),
              (unsigned long long)tr->errs[i].count);
  }
  fprintf(f,
          "cancellations: %llu ($/cancel_request %llu, session/cancel %llu)\n",
          (unsigned long long)tr->cancels,
          (unsigned long long)method_count(tr, "$/cancel_request"),
          (unsigned long long)method_count(tr, "session/cancel"));
  fprintf(f,
          "  answers on all hops: %llu prompt turns ended \"cancelled\", %llu "
          "requests failed -32800\n",
          (unsigned long long)tr->cancelled_turns,
          (unsigned long long)tr->cancelled_requests);
  for (i = 0; i < tr->nhops; i++) {
    const hop *h = &tr->hops[i];
    size_t an, bn;
    const char *a = lane_name(tr, h->from, &an), *b = lane_name(tr, h->to, &bn);
    if (h->cancels > 0)
      fprintf(f, "  %.*s -> %.*s: %llu\n", (int)an, a, (int)bn, b,
              (unsigned long long)h->cancels);
  }
  fprintf(f, "sessions: %zu%s", tr->sessions.n, tr->other_sessions ? "+" : "");
  for (i = 0; i < tr->sessions.n && i < 10; i++)
    fprintf(f, "%s %.*s (%llu messages)", i ? "," : "",
            (int)tr->sessions.len[i], tr->sessions.s[i],
            (unsigned long long)tr->sessions.count[i]);
  if (tr->sessions.n > 10)
    fputs(", ...", f);
  fputc('\n', f);
}

/* MARK: - The page */

/* JSON from our writer inside a <script> element: '<' only occurs inside
 * strings there, where \u003c means the same and cannot end the element. */
static void put_script_safe(FILE *f, const char *p, size_t n) {
  size_t i, run = 0;
  for (i = 0; i < n; i++) {
    if (p[i] == '<') {
      fwrite(p + run, 1, i - run, f);
      fputs("\\u003c", f);
      run = i + 1;
    }
  }
  fwrite(p + run, 1, n - run, f);
}

/* Length of the valid UTF-8 sequence at p, or 0. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  size_t k, i;
  unsigned c = p[0];
  uint32_t cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    k = 2;
  else if (c >= 0xe0 && c <= 0xef)
    k = 3;
  else if (c >= 0xf0 && c <= 0xf4)
    k = 4;
  else
    return 0;
  if (n < k)
    return 0;
  cp = c & (0x7f >> k);
  for (i = 1; i < k; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return k;
}

/* Bytes as a JSON string safe inside <script>: the exact bytes for valid
 * UTF-8 (every message line the reader accepted), U+FFFD for a byte that
 * is not (only in a malformed line, shown as it was). */
static void put_json_str(FILE *f, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0, run = 0;
  fputc('"', f);
  while (i < n) {
    unsigned char c = p[i];
    size_t k;
    if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c < 0x80) {
      i++;
      continue;
    }
    k = c < 0x80 ? 1 : utf8_len(p + i, n - i);
    if (k > 1) {
      i += k;
      continue;
    }
    fwrite(s + run, 1, i - run, f);
    if (c == '"' || c == '\\') {
      fputc('\\', f);
      fputc(c, f);
    } else if (k == 0) {
      fputs("\\ufffd", f);
    } else {
      fputs("\\u00", f);
      fputc(hex[c >> 4], f);
      fputc(hex[c & 15], f);
    }
    i++;
    run = i;
  }
  fwrite(s + run, 1, n - run, f);
  fputc('"', f);
}

static void put_strtab(FILE *f, const strtab *t) {
  size_t i;
  fputc('[', f);
  for (i = 0; i < t->n; i++) {
    if (i)
      fputc(',', f);
    put_json_str(f, t->s[i], t->len[i]);
  }
  fputc(']', f);
}

/* The index: one small record per message, as columns. */
static void put_index(FILE *f, const trace *tr) {
  uint16_t order[MAX_NAMES + 1], pos[MAX_NAMES + 1];
  size_t nl = lane_order(tr, order, pos), i, n;
  const row *r;
  const char *s;

  fputs("{\"lanes\":[", f);
  for (i = 0; i < nl; i++) {
    s = lane_name(tr, order[i], &n);
    if (i)
      fputc(',', f);
    put_json_str(f, s, n);
  }
  fputs("],\"methods\":", f);
  put_strtab(f, &tr->methods);
  fputs(",\"sessions\":", f);
  put_strtab(f, &tr->sessions);
  fputs(",\"details\":", f);
  put_strtab(f, &tr->details);
#define COLUMN(name, fmt, expr)                                                \
  do {                                                                         \
    fputs(",\"" name "\":[", f);                                               \
    for (i = 0; i < tr->nrows; i++) {                                          \
      r = &tr->rows[i];                                                        \
      if (i)                                                                   \
        fputc(',', f);                                                         \
      fprintf(f, fmt, expr);                                                   \
    }                                                                          \
    fputc(']', f);                                                             \
  } while (0)
  COLUMN("t", "%.3f", r->kind == K_BAD && r->t == 0 ? 0.0 : r->t);
  COLUMN("f", "%d", r->kind == K_BAD ? -1 : (int)pos[r->from]);
  COLUMN("o", "%d", r->kind == K_BAD ? -1 : (int)pos[r->to]);
  COLUMN("k", "%d", (int)r->kind);
  COLUMN("g", "%d", (int)r->flags);
  COLUMN("m", "%d", (int)r->method);
  COLUMN("s", "%d", (int)r->session);
  COLUMN("d", "%d", (int)r->detail);
  COLUMN("p", "%d", (int)r->pair);
  COLUMN("l", "%u", (unsigned)r->line);
#undef COLUMN
  fputs(",\"id\":[", f);
  for (i = 0; i < tr->nrows; i++) {
    if (i)
      fputc(',', f);
    put_json_str(f, tr->rows[i].id, strlen(tr->rows[i].id));
  }
  fputs("]}", f);
}

/* Second pass: the exact bytes of every row's message, in row order. */
static size_t put_raw(FILE *f, FILE *in) {
  acp_json_doc *doc = NULL;
  reader rd;
  const char *line;
  size_t len, rows = 0;
  int rv;

  memset(&rd, 0, sizeof(rd));
  rd.f = in;
  fputc('[', f);
  if (acp_json_doc_new(&doc, NULL) != 0)
    goto done;
  for (;;) {
    const acp_json_val *msg, *el;
    entry e;
    rv = next_line(&rd, &line, &len);
    if (rv == 0 || rv == -2)
      break;
    if (rv == -1) {
      if (rows++)
        fputc(',', f);
      fputs("\"(a line longer than 64 MiB: not kept)\"", f);
      continue;
    }
    len = trim_line(line, len);
    if (len == 0)
      continue;
    memset(&e, 0, sizeof(e));
    msg = acp_json_doc_parse(doc, line, len, NULL) == 0
              ? entry_msg(doc, acp_json_doc_root(doc), &e)
              : NULL;
    if (msg == NULL) {
      if (rows++)
        fputc(',', f);
      put_json_str(f, line, len);
      continue;
    }
    if (acp_json_type_of(msg) == ACP_JSON_ARRAY) {
      for (el = acp_json_child(msg); el != NULL; el = acp_json_next(el)) {
        const char *p = acp_json_raw(el, &len);
        if (rows++)
          fputc(',', f);
        put_json_str(f, p, len);
      }
      continue;
    }
    {
      const char *p = acp_json_raw(msg, &len);
      if (rows++)
        fputc(',', f);
      put_json_str(f, p, len);
    }
  }
done:
  fputc(']', f);
  acp_json_doc_free(doc);
  free(rd.buf);
  return rows;
}

static const char *find_marker(const char *p, size_t n, const char *m) {
  size_t k = strlen(m), i;
  for (i = 0; i + k <= n; i++)
    if (memcmp(p + i, m, k) == 0)
      return p + i;
  return NULL;
}

static int write_page(const trace *tr, const char *in_path, const char *out,
                      const char *summary, size_t summary_len) {
  static const char marker[] = "<!--TRACE-DATA-->";
  const char *at = find_marker(cli_trace_page, cli_trace_page_len, marker);
  FILE *in = NULL, *f = NULL;
  size_t raw_rows;
  int rv = -1;

  if (at == NULL) {
    cli_err("trace", "the page template has no data marker\n");
    return -1;
  }
  in = fopen(in_path, "rb");
  if (in == NULL) {
    cli_err("trace", "cannot read %s: %s\n", in_path, strerror(errno));
    return -1;
  }
  f = strcmp(out, "-") == 0 ? stdout : fopen(out, "wb");
  if (f == NULL) {
    cli_err("trace", "cannot write %s: %s\n", out, strerror(errno));
    goto cleanup;
  }
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  fwrite(cli_trace_page, 1, (size_t)(at - cli_trace_page), f);
  fputs("<script id=\"trace-summary\" type=\"application/json\">", f);
  put_script_safe(f, summary, summary_len);
  fputs("</script>\n<script id=\"trace-index\" type=\"application/json\">", f);
  put_index(f, tr);
  fputs("</script>\n<script id=\"trace-raw\" type=\"application/json\">", f);
  raw_rows = put_raw(f, in);
  fputs("</script>", f);
  at += sizeof(marker) - 1;
  fwrite(at, 1, cli_trace_page_len - (size_t)(at - cli_trace_page), f);
  if (raw_rows != tr->nrows) {
    cli_err("trace", "%s changed while being read\n", in_path);
    goto cleanup;
  }
  if (fflush(f) != 0 || ferror(f)) {
    cli_err("trace", "cannot write %s: %s\n", out, strerror(errno));
    goto cleanup;
  }
  rv = 0;
cleanup:
  if (f != NULL && f != stdout && fclose(f) != 0 && rv == 0) {
    cli_err("trace", "cannot write %s: %s\n", out, strerror(errno));
    rv = -1;
  }
  fclose(in);
  return rv;
}

/* MARK: - The command */

static const char trace_usage_text[] =
    "usage: acp trace FILE [--json] [--html OUT.html]\n"
    "\n"
    "Read a trace written by `acp conductor --trace FILE` (one JSON object\n"
    "per message hop) and summarise it: messages per hop, latency per hop\n"
    "(a request until its answer: p50, p99, max), errors by code and method,\n"
    "cancellations, sessions. Malformed lines are counted and listed.\n"
    "\n"
    "options:\n"
    "  --json           print the summary as one JSON object\n"
    "  --html OUT.html  write one self-contained page (no network) that draws\n"
    "                   the trace as a sequence diagram: a lane per "
    "component,\n"
    "                   an arrow per message, its exact bytes on click, the\n"
    "                   request and its response linked, filters by session\n"
    "                   and method; the summary is printed as well\n"
    "  -h, --help       show this help\n"
    "\n"
    "FILE may be - (standard input) for the summary. Exit status: 0, 1 when\n"
    "the file cannot be read or the page written, 2 for a bad command line.\n";

int cmd_trace(int argc, char **argv) {
  const char *path = NULL, *html = NULL, *v;
  bool json = false;
  acp_json_writer *w = NULL;
  const char *sum = NULL;
  size_t sum_len = 0;
  trace tr;
  FILE *in;
  int i, ok, rv = CLI_EXIT_FAILURE;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(trace_usage_text, stdout);
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
      continue;
    }
    v = cli_opt_value(argc, argv, &i, "--html", &ok);
    if (ok < 0)
      return CLI_EXIT_USAGE;
    if (ok > 0) {
      html = v;
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_err("trace", "unknown option '%s'\n", argv[i]);
      fputs(trace_usage_text, stderr);
      return CLI_EXIT_USAGE;
    }
    if (path != NULL) {
      cli_err("trace", "one trace file at a time\n");
      return CLI_EXIT_USAGE;
    }
    path = argv[i];
  }
  if (path == NULL) {
    fputs(trace_usage_text, stderr);
    return CLI_EXIT_USAGE;
  }
  if (html != NULL && strcmp(path, "-") == 0) {
    cli_err("trace", "--html reads the file twice: give a file, not -\n");
    return CLI_EXIT_USAGE;
  }
  in = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (in == NULL) {
    cli_err("trace", "cannot read %s: %s\n", path, strerror(errno));
    return CLI_EXIT_FAILURE;
  }
  memset(&tr, 0, sizeof(tr));
  tr.path = path;
  tr.names.max = MAX_NAMES;
  tr.methods.max = MAX_METHODS;
  tr.sessions.max = MAX_SESSIONS;
  tr.details.max = MAX_DETAILS;
  tr.keep_rows = html != NULL;
  if (read_trace(&tr, in) != 0) {
    cli_err("trace", "cannot read %s: %s\n", path,
            tr.nomem ? "out of memory" : strerror(errno));
    goto cleanup;
  }
  finish(&tr);
  if (acp_json_writer_new(&w, 0, NULL) != 0 || write_summary(&tr, w) != 0) {
    cli_err("trace", "out of memory\n");
    goto cleanup;
  }
  sum = acp_json_writer_data(w, &sum_len);
  if (json) {
    fwrite(sum, 1, sum_len, stdout);
    fputc('\n', stdout);
  } else {
    print_summary(&tr, stdout);
  }
  if (html != NULL) {
    if (write_page(&tr, path, html, sum, sum_len) != 0)
      goto cleanup;
    if (!json)
      printf("\nwrote %s (%zu messages)\n", html, tr.nrows);
  }
  rv = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
cleanup:
  acp_json_writer_free(w);
  trace_dispose(&tr);
  if (in != stdin)
    fclose(in);
  return rv;
}
