/*
 * JSON-RPC 2.0 session over newline-delimited JSON (sans I/O).
 *
 * Data structures:
 *   - out: every outgoing line, appended in order; send() hands it out whole.
 *   - line: the partial tail of the input (complete lines are parsed where
 *     they lie in the caller's buffer).
 *   - pend/pend_hash/heap: this side's requests awaiting a response. Entries
 *     live in a slab with stable indices; an open-addressing table maps id to
 *     slab index and a binary min-heap orders the deadlines.
 *   - in: the peer's requests not yet answered, in a slab; a handle is the
 *     slot index plus a generation counter, so a stale handle never matches.
 *   - batches: one record per received batch that still awaits answers; the
 *     responses are collected there and emitted as one array line.
 */
#include "acp/ndjson.h"
#include "acp/rpc.h"
#include "rpc_int.h"
#include "internal.h"
#include "json/json_int.h"

/* MARK: - Types (Private) */

struct acp_rpc_callbacks {
  acp_rpc_on_request_cb on_request;
  acp_rpc_on_notification_cb on_notification;
  acp_rpc_on_cancel_cb on_cancel;
  acp_rpc_on_protocol_error_cb on_protocol_error;
};

struct acp_rpc_options {
  size_t max_line;
  size_t max_pending;
  size_t max_incoming;
  size_t max_output;
  int batches;
  uint32_t max_depth;
  acp_rpc_cancel_style cancel_style;
};

typedef struct rpc_batch {
  struct rpc_batch *prev;
  struct rpc_batch *next;
  acp__buf buf;       /* the responses so far, comma separated */
  size_t nresp;       /* responses in buf */
  size_t outstanding; /* requests of this batch not yet answered */
  bool complete;      /* every element has been dispatched */
} rpc_batch;

#define NO_INDEX UINT32_MAX
#define ID_INLINE 32
#define DONE_RING 256

typedef struct out_req {
  int64_t id;
  acp_rpc_response_cb cb;
  void *user_data;
  uint64_t deadline; /* 0: none */
  uint32_t heap_pos; /* NO_INDEX when not in the heap */
  uint32_t next_free;
  bool used;
} out_req;

typedef struct in_req {
  char *heap_id; /* NULL when the id is stored inline */
  void *tag;     /* the caller's (acp__rpc_set_tag()) */
  size_t id_len;
  size_t key_len; /* escaped string ids: decoded key stored after the id */
  rpc_batch *batch;
  uint32_t gen;
  uint32_t next_free;
  bool used;
  bool has_key;
  char inl[ID_INLINE];
} in_req;

/* A piece of the output that stays in the input: it goes before the byte
 * at `off` of the session's output buffer. */
typedef struct out_span {
  size_t off;
  const char *p;
  size_t n;
} out_span;

/* Raw pieces at least this long are borrowed rather than copied: below it
 * a copy costs less than one more piece for the kernel. */
#define BORROW_MIN ((size_t)4096)

struct acp_rpc_session {
  acp_mem mem;
  acp_rpc_callbacks cbs;
  acp_rpc_options opts;
  void *user_data;

  acp_json_doc *doc;
  acp_json_writer *esc;
  acp__buf out;
  acp_ndjson framer;
  acp__buf method; /* NUL-terminated copy of the current method */
  acp__buf emsg;   /* NUL-terminated copy of the current error message */

  bool eof;
  bool paused;
  int failed; /* fatal code, or 0 */
  int in_cb;  /* callback nesting depth (re-entrancy guard) */

  out_req *pend;
  uint32_t pend_cap;
  uint32_t pend_count;
  uint32_t pend_free;
  uint32_t *pend_hash; /* slab index + 1, 0 = empty */
  uint32_t hash_cap;   /* power of two, or 0 */
  uint32_t *heap;
  uint32_t heap_len;
  uint32_t heap_cap;
  int64_t next_id;
  int64_t done[DONE_RING]; /* ids completed locally, answers ignored */
  unsigned done_head;
  unsigned done_count;

  in_req *in;
  uint32_t in_cap;
  uint32_t in_count;
  uint32_t in_free;
  /* The cancel index (see "The cancel index"), NULL until needed:
   * in_idx[b] is the first slot + 1 of bucket b (0: none), idx_link[2k]
   * and [2k + 1] the next and previous slot + 1 of slot k's chain. */
  uint32_t *in_idx;
  uint32_t *idx_link;
  uint32_t idx_cap;   /* buckets, a power of two */
  uint32_t idx_slots; /* the in_cap idx_link was made for */
  uint64_t idx_seed;

  rpc_batch *batches;

  /* Borrowed output (acp_rpc_session_set_borrow_output()): large raw pieces of
   * the line being dispatched, [in_lo, in_hi), are not copied into `out`
   * but recorded as spans at their offsets, and handed out in place by
   * acp_rpc_session_send_iov(). */
  bool borrow;
  const char *in_lo;
  const char *in_hi;
  out_span *spans;
  size_t nspans;
  size_t spans_cap;
  size_t ext_total; /* bytes in spans */
  bool ref_spans;   /* a span references a caller's text (ACP__PART_STR_REF) */
  acp_rpc_iov *iov;
  size_t iov_cap;
  acp_rpc_iov one; /* the single piece when the list cannot grow */

  char errmsg[128];
};

#define DEFAULT_MAX_LINE ((size_t)64 * 1024 * 1024)
#define DEFAULT_MAX_PENDING 65536
#define DEFAULT_MAX_INCOMING 65536
#define DEFAULT_MAX_OUTPUT ((size_t)1024 * 1024 * 1024)
#define SLAB_LIMIT ((size_t)UINT32_MAX - 1)

/* MARK: - Callbacks and options (Public) */

int acp_rpc_callbacks_new(acp_rpc_callbacks **out) {
  acp_rpc_callbacks *c;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  c = acp__calloc(acp_mem_default(), 1, sizeof(*c));
  *out = c;
  return c ? 0 : ACP_ERR_NOMEM;
}

void acp_rpc_callbacks_free(acp_rpc_callbacks *cbs) {
  acp__free(acp_mem_default(), cbs);
}

void acp_rpc_callbacks_set_on_request(acp_rpc_callbacks *cbs,
                                      acp_rpc_on_request_cb cb) {
  if (cbs)
    cbs->on_request = cb;
}

void acp_rpc_callbacks_set_on_notification(acp_rpc_callbacks *cbs,
                                           acp_rpc_on_notification_cb cb) {
  if (cbs)
    cbs->on_notification = cb;
}

void acp_rpc_callbacks_set_on_cancel(acp_rpc_callbacks *cbs,
                                     acp_rpc_on_cancel_cb cb) {
  if (cbs)
    cbs->on_cancel = cb;
}

void acp_rpc_callbacks_set_on_protocol_error(acp_rpc_callbacks *cbs,
                                             acp_rpc_on_protocol_error_cb cb) {
  if (cbs)
    cbs->on_protocol_error = cb;
}

static void options_default(acp_rpc_options *o) {
  o->max_line = DEFAULT_MAX_LINE;
  o->max_pending = DEFAULT_MAX_PENDING;
  o->max_incoming = DEFAULT_MAX_INCOMING;
  o->max_output = DEFAULT_MAX_OUTPUT;
  o->batches = 1;
  o->max_depth = ACP_JSON_DEFAULT_MAX_DEPTH;
  o->cancel_style = ACP_RPC_CANCEL_STYLE_ACP;
}

int acp_rpc_options_new(acp_rpc_options **out) {
  acp_rpc_options *o;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  o = acp__malloc(acp_mem_default(), sizeof(*o));
  *out = o;
  if (o == NULL)
    return ACP_ERR_NOMEM;
  options_default(o);
  return 0;
}

void acp_rpc_options_free(acp_rpc_options *opts) {
  acp__free(acp_mem_default(), opts);
}

void acp_rpc_options_set_max_line(acp_rpc_options *opts, size_t max) {
  if (opts)
    opts->max_line = max ? max : DEFAULT_MAX_LINE;
}

void acp_rpc_options_set_max_pending(acp_rpc_options *opts, size_t max) {
  if (opts)
    opts->max_pending = max ? max : DEFAULT_MAX_PENDING;
}

void acp_rpc_options_set_max_incoming(acp_rpc_options *opts, size_t max) {
  if (opts)
    opts->max_incoming = max ? max : DEFAULT_MAX_INCOMING;
}

void acp_rpc_options_set_max_output(acp_rpc_options *opts, size_t max) {
  if (opts)
    opts->max_output = max ? max : DEFAULT_MAX_OUTPUT;
}

void acp_rpc_options_set_batches(acp_rpc_options *opts, int on) {
  if (opts)
    opts->batches = on ? 1 : 0;
}

void acp_rpc_options_set_max_depth(acp_rpc_options *opts, uint32_t depth) {
  if (opts)
    opts->max_depth = depth ? depth : ACP_JSON_DEFAULT_MAX_DEPTH;
}

void acp_rpc_options_set_cancel_style(acp_rpc_options *opts,
                                      acp_rpc_cancel_style style) {
  if (opts &&
      (style == ACP_RPC_CANCEL_STYLE_ACP || style == ACP_RPC_CANCEL_STYLE_MCP))
    opts->cancel_style = style;
}

/* MARK: - Small helpers (Private) */

static void set_errmsg(acp_rpc_session *s, const char *msg) {
  size_t n = strlen(msg);

  if (n >= sizeof(s->errmsg))
    n = sizeof(s->errmsg) - 1;
  memcpy(s->errmsg, msg, n);
  s->errmsg[n] = '\0';
}

/* Enter the failed state (first fatal code wins) and return `code`. */
static int fail(acp_rpc_session *s, int code, const char *msg) {
  if (s->failed == 0) {
    s->failed = code;
    set_errmsg(s, msg);
  }
  return code;
}

/* Map an error from building output: NOMEM is fatal, the rest is returned. */
static int out_error(acp_rpc_session *s, int rv) {
  if (rv == ACP_ERR_NOMEM)
    return fail(s, rv, "out of memory");
  if (rv == ACP_ERR_LIMIT)
    set_errmsg(s, "output buffer limit reached");
  else if (rv == ACP_ERR_INVALID_ARGUMENT)
    set_errmsg(s, "string is not valid UTF-8");
  return rv;
}

/* Interpret a callback's return value. */
static int cb_result(acp_rpc_session *s, int rv) {
  /* Something the callback submitted may have failed fatally (NOMEM). */
  if (s->failed != 0)
    return s->failed;
  if (rv == 0)
    return 0;
  if (rv == ACP_ERR_PAUSE) {
    s->paused = true;
    return 0;
  }
  return fail(s, ACP_ERR_CALLBACK_FAILURE, "a callback returned an error");
}

static void report(acp_rpc_session *s, int code, const char *msg) {
  if (s->cbs.on_protocol_error == NULL)
    return;
  s->in_cb++;
  s->cbs.on_protocol_error(s, code, msg, s->user_data);
  s->in_cb--;
}

static int usable(const acp_rpc_session *s) {
  if (s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (s->failed != 0)
    return ACP_ERR_INVALID_STATE;
  return 0;
}

/* MARK: - Output building (Private) */

/* Reserve room for a whole message at once; the exact size is checked by
 * the appends, so a generous estimate must not trip the cap. */
static int presize(acp__buf *b, size_t n) {
  int rv = acp__buf_reserve(b, n);

  return rv == ACP_ERR_LIMIT ? 0 : rv;
}

/* A buffer over caller storage: max == cap, so it never reallocates. */
static void stack_buf(acp__buf *b, const acp_mem *mem, char *p, size_t cap) {
  acp__buf_init(b, mem, cap);
  b->data = p;
  b->cap = cap;
}

/* A string literal's bytes: its length is known at compile time (no
 * strlen per piece of every envelope); `"" lit ""` takes only a literal. */
#define put_lit(b, lit) acp__buf_append((b), "" lit "", sizeof(lit) - 1)

/* Two digits a step (a division by 100 and a table load, not a division
 * per digit): ids and error codes are written on every message. */
static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536"
    "37383940414243444546474849505152535455565758596061626364656667686970717273"
    "7475767778798081828384858687888990919293949596979899";

static int put_i64(acp__buf *b, int64_t v) {
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  uint64_t t = u;
  size_t nd = 1;
  char *d;
  int rv;

  /* The digits are counted first and written straight into the buffer,
   * from the last pair back: no copy from a scratch array (a memcpy call
   * of a few bytes for every id). */
  while (t >= 100) {
    t /= 100;
    nd += 2;
  }
  if (t >= 10)
    nd++;
  rv = acp__buf_reserve(b, nd + 1);
  if (rv != 0)
    return rv;
  d = b->data + b->len;
  if (v < 0)
    *d++ = '-';
  b->len += nd + (v < 0);
  d += nd;
  while (u >= 100) {
    unsigned r = (unsigned)(u % 100);
    u /= 100;
    d -= 2;
    memcpy(d, digit_pairs + 2 * r, 2);
  }
  if (u >= 10) {
    d -= 2;
    memcpy(d, digit_pairs + 2 * u, 2);
  } else {
    *--d = (char)('0' + u);
  }
  return 0;
}

/*
 * Whether s[0..n) needs no escaping as a JSON string: no quote, backslash,
 * control byte or byte >= 0x80 (what the JSON writer would copy as is; it
 * copies 0x7f as is too). For the short strings of an envelope (method
 * names, session ids, short texts): 16 bytes a step with SSE2, the last
 * step overlapping the one before; 8 or 4 bytes a step below 16 bytes.
 */
static bool plain_str(const char *p, size_t n) {
  const uint64_t ones = UINT64_C(0x0101010101010101);
  uint64_t w[2];
  uint64_t m = 0;
  int k;

#if defined(__SSE2__)
  if (n >= 16) {
    __m128i acc = _mm_setzero_si128();
    size_t i;

    for (i = 0; i + 16 < n; i += 16)
      acc = _mm_or_si128(acc, acp__json_special16(_mm_loadu_si128(
                                  (const __m128i *)(const void *)(p + i))));
    acc = _mm_or_si128(acc, acp__json_special16(_mm_loadu_si128(
                                (const __m128i *)(const void *)(p + n - 16))));
    return _mm_movemask_epi8(acc) == 0;
  }
#endif
  if (n >= 8) {
    size_t i;

    /* Eight bytes a step, the last eight again, overlapping. */
    for (i = 0; i + 8 < n; i += 8) {
      memcpy(&w[0], p + i, 8);
      uint64_t x = w[0] ^ (ones * '"');
      m |= (x - ones) & ~x;
      x = w[0] ^ (ones * '\\');
      m |= (x - ones) & ~x;
      m |= ((w[0] - ones * 0x20) & ~w[0]) | w[0];
    }
    memcpy(&w[0], p + n - 8, 8);
    w[1] = w[0];
  } else if (n >= 4) {
    uint32_t a;
    uint32_t b;

    /* The first four and the last four, overlapping. */
    memcpy(&a, p, 4);
    memcpy(&b, p + n - 4, 4);
    w[0] = a | ((uint64_t)b << 32);
    w[1] = w[0];
  } else {
    size_t i;

    for (i = 0; i < n; i++) {
      unsigned char c = (unsigned char)p[i];
      if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\')
        return false;
    }
    return true;
  }
  for (k = 0; k < 2; k++) {
    uint64_t x = w[k] ^ (ones * '"');
    m |= (x - ones) & ~x;
    x = w[k] ^ (ones * '\\');
    m |= (x - ones) & ~x;
    m |= ((w[k] - ones * 0x20) & ~w[k]) | w[k];
  }
  return (m & (ones * 0x80)) == 0;
}

/* Append s[0..n), known plain (plain_str()), with its quotes. */
static int put_quoted(acp__buf *b, const char *p, size_t n) {
  int rv = acp__buf_reserve(b, n + 2);

  if (rv != 0)
    return rv;
  b->data[b->len++] = '"';
  if (n > 0)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len++] = '"';
  return 0;
}

/* Append a caller's JSON value. In valid JSON, CR and LF can only be
 * whitespace between tokens (a string holds them escaped), so turning them
 * into spaces keeps the value's meaning, and keeps a pretty-printed value
 * from ending the message's line early: the peer would read its pieces as
 * broken messages. */
static int put_json(acp__buf *b, const char *p, size_t n) {
  const uint64_t ones = UINT64_C(0x0101010101010101);
  size_t at = b->len;
  int rv = acp__buf_append(b, p, n);
  const char *d = b->data + at;
  uint64_t m = 0;
  size_t i;

  if (rv != 0)
    return rv;
  /* Most values have neither byte, and many are short (a prompt's
   * result): find out in as few steps as plain_str() takes, overlapping
   * the last one; the vector scanner past 64 bytes. */
  if (n >= 64) {
    i = acp__eol_find(d, n);
    if (i < n)
      acp__eol_blank(b->data + at + i, n - i);
    return 0;
  }
#if defined(__SSE2__)
  if (n >= 16) {
    const __m128i lf = _mm_set1_epi8('\n');
    const __m128i cr = _mm_set1_epi8('\r');
    __m128i acc = _mm_setzero_si128();
    __m128i v;

    for (i = 0; i + 16 < n; i += 16) {
      v = _mm_loadu_si128((const __m128i *)(const void *)(d + i));
      acc = _mm_or_si128(
          acc, _mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr)));
    }
    v = _mm_loadu_si128((const __m128i *)(const void *)(d + n - 16));
    acc = _mm_or_si128(
        acc, _mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr)));
    if (_mm_movemask_epi8(acc) != 0)
      acp__eol_blank(b->data + at, n);
    return 0;
  }
#endif
  if (n >= 8) {
    for (i = 0;; i = i + 8 < n - 8 ? i + 8 : n - 8) {
      uint64_t w;
      uint64_t x;
      memcpy(&w, d + i, 8);
      x = w ^ (ones * '\n');
      m |= (x - ones) & ~x;
      x = w ^ (ones * '\r');
      m |= (x - ones) & ~x;
      if (i == n - 8)
        break;
    }
    if (m & (ones * 0x80))
      acp__eol_blank(b->data + at, n);
    return 0;
  }
  for (i = 0; i < n; i++)
    if (d[i] == '\n' || d[i] == '\r') {
      acp__eol_blank(b->data + at, n);
      break;
    }
  return 0;
}

/* Append s[0..n) as a JSON string. Plain text is copied directly;
 * anything else goes through the JSON writer so that escaping follows one
 * set of rules. */
static int put_str(acp_rpc_session *s, acp__buf *b, const char *p, size_t n) {
  int rv;
  const char *d;
  size_t dlen;

  if (plain_str(p, n))
    return put_quoted(b, p, n);
  acp_json_writer_reset(s->esc);
  rv = acp_json_write_str(s->esc, p, n);
  if (rv != 0)
    return rv;
  d = acp_json_writer_data(s->esc, &dlen);
  return acp__buf_append(b, d, dlen);
}

/*
 * Whether a raw piece may stay where it is (a span) instead of being copied
 * into the output: only while borrowing, only a piece of the line being
 * dispatched (which the runtime leaves in place until it has taken the
 * output), only a large one, and only within the output cap, which counts
 * the spans too (over it the copy fails as it always did).
 */
static inline bool borrowable(const acp_rpc_session *s, const acp__buf *b,
                              const acp__rpc_part *part) {
  uintptr_t lo;
  uintptr_t p;
  size_t room;

  /* The common case first: small pieces, and output outside a dispatch. */
  if (part->n < BORROW_MIN || s->in_lo == NULL || !s->borrow || b != &s->out ||
      part->str)
    return false;
  lo = (uintptr_t)s->in_lo;
  p = (uintptr_t)part->p;
  if (p < lo || p > (uintptr_t)s->in_hi ||
      part->n > (size_t)((uintptr_t)s->in_hi - p))
    return false;
  room = s->out.max - s->out.len;
  return s->out.max >= s->out.len && room >= s->ext_total &&
         room - s->ext_total >= part->n;
}

/*
 * Whether a string piece the caller lends (ACP__PART_STR_REF) may be
 * referenced: while borrowing, into the output, large, within the output
 * cap, and needing no escaping (`plain` == its length, with the quotes
 * around it written as own bytes).
 */
static inline bool ref_borrowable(const acp_rpc_session *s, const acp__buf *b,
                                  const acp__rpc_part *part, size_t plain) {
  size_t room;

  if (!part->ref || !s->borrow || b != &s->out || part->n < BORROW_MIN ||
      plain != part->n)
    return false;
  room = s->out.max - s->out.len;
  return s->out.max >= s->out.len && room >= s->ext_total &&
         room - s->ext_total >= part->n;
}

static int span_add(acp_rpc_session *s, const char *p, size_t n) {
  if (s->nspans == s->spans_cap) {
    size_t ncap = s->spans_cap ? s->spans_cap * 2 : 4;
    out_span *ns = acp__realloc(&s->mem, s->spans, ncap * sizeof(*ns));

    if (ns == NULL)
      return ACP_ERR_NOMEM;
    s->spans = ns;
    s->spans_cap = ncap;
  }
  s->spans[s->nspans].off = s->out.len;
  s->spans[s->nspans].p = p;
  s->spans[s->nspans].n = n;
  s->nspans++;
  s->ext_total += n;
  return 0;
}

/* Drop the spans of a message being rolled back to `mark`. */
static void spans_rollback(acp_rpc_session *s, size_t mark) {
  while (s->nspans > 0 && s->spans[s->nspans - 1].off >= mark) {
    s->nspans--;
    s->ext_total -= s->spans[s->nspans].n;
  }
}

/*
 * Copy the borrowed spans into the output buffer, in order: before the
 * input they point into can move, and for acp_rpc_session_send(), which
 * hands out one contiguous buffer. The buffer grows once; each stretch of
 * own bytes moves back to its final place, last first.
 */
static int spans_flatten(acp_rpc_session *s) {
  size_t total;
  size_t end;
  size_t src_end;
  size_t i;
  int rv;

  if (s->nspans == 0)
    return 0;
  rv = acp__buf_reserve(&s->out, s->ext_total);
  if (rv != 0)
    return fail(s, ACP_ERR_NOMEM, "out of memory");
  total = s->out.len + s->ext_total;
  end = total;
  src_end = s->out.len;
  for (i = s->nspans; i-- > 0;) {
    const out_span *sp = &s->spans[i];
    size_t tail = src_end - sp->off;

    memmove(s->out.data + end - tail, s->out.data + sp->off, tail);
    end -= tail;
    end -= sp->n;
    memcpy(s->out.data + end, sp->p, sp->n);
    src_end = sp->off;
  }
  s->out.len = total;
  s->nspans = 0;
  s->ext_total = 0;
  s->ref_spans = false;
  return 0;
}

/* Before a response callback runs: the caller may free a text it lent to
 * its request (ACP__PART_STR_REF) from there on, so anything still
 * referenced is copied in first. Rare: the runtime has normally written the
 * request long before its answer comes. */
static int release_refs(acp_rpc_session *s) {
  if (!s->ref_spans || s->nspans == 0)
    return 0;
  return spans_flatten(s);
}

/* Strings of a request up to this length are checked by plain_str() first
 * (longer ones would be scanned twice when they need escaping). */
#define SHORT_STR 64

static int build_request(acp_rpc_session *s, acp__buf *b, const int64_t *id,
                         const char *method, size_t mlen, bool method_lit,
                         const acp__rpc_part *parts, size_t nparts) {
  int rv;
  size_t need = mlen + 64;
  size_t i;
  /* Borrowing is possible at all: while dispatching, into the output. */
  bool may = s->in_lo != NULL && s->borrow && b == &s->out;
  /* The one lent string (ACP__PART_STR_REF; a later one is copied): its
   * plain prefix, found once, decides whether it is referenced, and
   * otherwise is copied without a second scan. */
  size_t ref_i = SIZE_MAX;
  size_t ref_plain = 0;
  bool ref_lent = false;

  for (i = 0; i < nparts; i++) {
    if (parts[i].ref && ref_i == SIZE_MAX && parts[i].str && s->borrow &&
        b == &s->out && parts[i].n >= BORROW_MIN) {
      ref_i = i;
      ref_plain = acp__json_plain_len(parts[i].p, parts[i].n);
      ref_lent = ref_borrowable(s, b, &parts[i], ref_plain);
      if (ref_lent) {
        need += 2;
        continue;
      }
    }
    if (!may || !borrowable(s, b, &parts[i]))
      need += parts[i].n + (parts[i].str ? 2 : 0);
  }
  rv = presize(b, need);
  if (rv == 0 && id) {
    rv = put_lit(b, "{\"jsonrpc\":\"2.0\",\"id\":");
    if (rv == 0)
      rv = put_i64(b, *id);
    if (rv == 0)
      rv = put_lit(b, ",\"method\":");
  } else if (rv == 0) {
    rv = put_lit(b, "{\"jsonrpc\":\"2.0\",\"method\":");
  }
  if (rv == 0)
    rv = method_lit ? put_quoted(b, method, mlen) : put_str(s, b, method, mlen);
  if (rv == 0 && nparts > 0)
    rv = put_lit(b, ",\"params\":");
  for (i = 0; rv == 0 && i < nparts; i++) {
    if (i == ref_i) {
      if (!ref_lent) {
        rv = acp__json_escape_append_from(b, parts[i].p, parts[i].n, ref_plain);
        continue;
      }
      rv = acp__buf_putc(b, '"');
      if (rv == 0)
        rv = span_add(s, parts[i].p, parts[i].n);
      if (rv == 0) {
        s->ref_spans = true;
        rv = acp__buf_putc(b, '"');
      }
    } else if (parts[i].str) {
      /* A short plain string (a session id, a small text) without the
       * writer's round trip; anything else is escaped by the writer. */
      rv = parts[i].n <= SHORT_STR && plain_str(parts[i].p, parts[i].n)
               ? put_quoted(b, parts[i].p, parts[i].n)
               : acp__json_escape_append(b, parts[i].p, parts[i].n);
    } else if (may && borrowable(s, b, &parts[i])) {
      /* A piece of the line being dispatched: no LF in it. */
      rv = span_add(s, parts[i].p, parts[i].n);
    } else if (parts[i].clean) {
      rv = acp__buf_append(b, parts[i].p, parts[i].n);
    } else {
      rv = put_json(b, parts[i].p, parts[i].n);
    }
  }
  if (rv == 0)
    rv = acp__buf_putc(b, '}');
  return rv;
}

static int build_result(acp__buf *b, const char *id, size_t id_len,
                        const char *result, size_t rlen) {
  int rv;

  if (result == NULL) {
    result = "null";
    rlen = 4;
  }
  rv = presize(b, id_len + rlen + 40);
  if (rv == 0)
    rv = put_lit(b, "{\"jsonrpc\":\"2.0\",\"id\":");
  if (rv == 0)
    rv = acp__buf_append(b, id, id_len);
  if (rv == 0)
    rv = put_lit(b, ",\"result\":");
  if (rv == 0)
    rv = put_json(b, result, rlen);
  if (rv == 0)
    rv = acp__buf_putc(b, '}');
  return rv;
}

static int build_error(acp_rpc_session *s, acp__buf *b, const char *id,
                       size_t id_len, int64_t code, const char *msg,
                       size_t msg_len, const char *data, size_t dlen) {
  int rv;

  rv = presize(b, id_len + msg_len + (data ? dlen : 0) + 80);
  if (rv == 0)
    rv = put_lit(b, "{\"jsonrpc\":\"2.0\",\"id\":");
  if (rv == 0)
    rv = acp__buf_append(b, id, id_len);
  if (rv == 0)
    rv = put_lit(b, ",\"error\":{\"code\":");
  if (rv == 0)
    rv = put_i64(b, code);
  if (rv == 0)
    rv = put_lit(b, ",\"message\":");
  if (rv == 0)
    rv = put_str(s, b, msg ? msg : "", msg ? msg_len : 0);
  if (rv == 0 && data) {
    rv = put_lit(b, ",\"data\":");
    if (rv == 0)
      rv = put_json(b, data, dlen);
  }
  if (rv == 0)
    rv = put_lit(b, "}}");
  return rv;
}

/* MARK: - Outgoing request table (Private) */

static uint32_t hash_id(int64_t id) {
  uint64_t x = (uint64_t)id * UINT64_C(0x9E3779B97F4A7C15);
  return (uint32_t)(x >> 32);
}

static uint32_t pend_find_slot(const acp_rpc_session *s, int64_t id) {
  uint32_t mask;
  uint32_t i;

  if (s->hash_cap == 0)
    return NO_INDEX;
  mask = s->hash_cap - 1;
  i = hash_id(id) & mask;
  while (s->pend_hash[i] != 0) {
    if (s->pend[s->pend_hash[i] - 1].id == id)
      return i;
    i = (i + 1) & mask;
  }
  return NO_INDEX;
}

static void hash_insert(uint32_t *tab, uint32_t cap, int64_t id, uint32_t idx) {
  uint32_t mask = cap - 1;
  uint32_t i = hash_id(id) & mask;

  while (tab[i] != 0)
    i = (i + 1) & mask;
  tab[i] = idx + 1;
}

/* Backward-shift deletion keeps linear probing free of tombstones. */
static void hash_delete(acp_rpc_session *s, uint32_t i) {
  uint32_t mask = s->hash_cap - 1;
  uint32_t j = i;

  for (;;) {
    uint32_t k;
    j = (j + 1) & mask;
    if (s->pend_hash[j] == 0)
      break;
    k = hash_id(s->pend[s->pend_hash[j] - 1].id) & mask;
    if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
      s->pend_hash[i] = s->pend_hash[j];
      i = j;
    }
  }
  s->pend_hash[i] = 0;
}

static bool heap_less(const acp_rpc_session *s, uint32_t a, uint32_t b) {
  return s->pend[s->heap[a]].deadline < s->pend[s->heap[b]].deadline;
}

static void heap_swap(acp_rpc_session *s, uint32_t a, uint32_t b) {
  uint32_t t = s->heap[a];

  s->heap[a] = s->heap[b];
  s->heap[b] = t;
  s->pend[s->heap[a]].heap_pos = a;
  s->pend[s->heap[b]].heap_pos = b;
}

static void heap_up(acp_rpc_session *s, uint32_t i) {
  while (i > 0) {
    uint32_t parent = (i - 1) / 2;
    if (!heap_less(s, i, parent))
      break;
    heap_swap(s, i, parent);
    i = parent;
  }
}

static void heap_down(acp_rpc_session *s, uint32_t i) {
  for (;;) {
    uint32_t l = 2 * i + 1;
    uint32_t r = l + 1;
    uint32_t m = i;
    if (l < s->heap_len && heap_less(s, l, m))
      m = l;
    if (r < s->heap_len && heap_less(s, r, m))
      m = r;
    if (m == i)
      break;
    heap_swap(s, i, m);
    i = m;
  }
}

static void heap_remove(acp_rpc_session *s, uint32_t pos) {
  uint32_t last = s->heap_len - 1;

  s->pend[s->heap[pos]].heap_pos = NO_INDEX;
  if (pos != last) {
    s->heap[pos] = s->heap[last];
    s->pend[s->heap[pos]].heap_pos = pos;
  }
  s->heap_len--;
  if (pos != last) {
    heap_up(s, pos);
    heap_down(s, pos);
  }
}

/* Make room for one more pending request. Each array grows independently,
 * so a failure leaves a consistent (merely larger) table. */
static int pend_reserve(acp_rpc_session *s, bool with_deadline) {
  if ((size_t)s->pend_count + 1 > (size_t)s->hash_cap / 2) {
    uint32_t ncap = s->hash_cap ? s->hash_cap * 2 : 32;
    uint32_t *tab;
    uint32_t i;
    if (s->hash_cap >= (UINT32_C(1) << 31))
      return ACP_ERR_LIMIT;
    tab = acp__calloc(&s->mem, ncap, sizeof(*tab));
    if (tab == NULL)
      return ACP_ERR_NOMEM;
    for (i = 0; i < s->hash_cap; i++) {
      uint32_t v = s->pend_hash[i];
      if (v != 0)
        hash_insert(tab, ncap, s->pend[v - 1].id, v - 1);
    }
    acp__free(&s->mem, s->pend_hash);
    s->pend_hash = tab;
    s->hash_cap = ncap;
  }
  if (s->pend_free == NO_INDEX) {
    uint32_t ncap = s->pend_cap ? s->pend_cap * 2 : 16;
    out_req *p;
    uint32_t i;
    p = acp__realloc(&s->mem, s->pend, (size_t)ncap * sizeof(*p));
    if (p == NULL)
      return ACP_ERR_NOMEM;
    s->pend = p;
    for (i = ncap; i > s->pend_cap; i--) {
      p[i - 1].used = false;
      p[i - 1].next_free = s->pend_free;
      s->pend_free = i - 1;
    }
    s->pend_cap = ncap;
  }
  if (with_deadline && s->heap_len == s->heap_cap) {
    uint32_t ncap = s->heap_cap ? s->heap_cap * 2 : 16;
    uint32_t *h = acp__realloc(&s->mem, s->heap, (size_t)ncap * sizeof(*h));
    if (h == NULL)
      return ACP_ERR_NOMEM;
    s->heap = h;
    s->heap_cap = ncap;
  }
  return 0;
}

static void pend_add(acp_rpc_session *s, int64_t id, acp_rpc_response_cb cb,
                     void *ud, uint64_t deadline) {
  uint32_t idx = s->pend_free;
  out_req *r = &s->pend[idx];

  s->pend_free = r->next_free;
  r->used = true;
  r->id = id;
  r->cb = cb;
  r->user_data = ud;
  r->deadline = deadline;
  r->heap_pos = NO_INDEX;
  r->next_free = NO_INDEX;
  hash_insert(s->pend_hash, s->hash_cap, id, idx);
  if (deadline != 0) {
    r->heap_pos = s->heap_len;
    s->heap[s->heap_len++] = idx;
    heap_up(s, r->heap_pos);
  }
  s->pend_count++;
}

/* Remove the request at hash slot `slot`, returning its callback. */
static void pend_remove(acp_rpc_session *s, uint32_t slot,
                        acp_rpc_response_cb *cb, void **ud, int64_t *id) {
  uint32_t idx = s->pend_hash[slot] - 1;
  out_req *r = &s->pend[idx];

  *cb = r->cb;
  *ud = r->user_data;
  *id = r->id;
  if (r->heap_pos != NO_INDEX)
    heap_remove(s, r->heap_pos);
  hash_delete(s, slot);
  r->used = false;
  r->next_free = s->pend_free;
  s->pend_free = idx;
  s->pend_count--;
}

static void done_add(acp_rpc_session *s, int64_t id) {
  s->done[s->done_head] = id;
  s->done_head = (s->done_head + 1) % DONE_RING;
  if (s->done_count < DONE_RING)
    s->done_count++;
}

static bool done_has(const acp_rpc_session *s, int64_t id) {
  unsigned i;

  for (i = 0; i < s->done_count; i++) {
    if (s->done[i] == id)
      return true;
  }
  return false;
}

/* MARK: - Incoming request table (Private) */

static const char *in_id(const in_req *r) {
  return r->heap_id ? r->heap_id : r->inl;
}

/* A request's handle: its generation over its slot (in_lookup() undoes
 * it, and refuses a slot reused since). */
static uint64_t in_handle(const acp_rpc_session *s, const in_req *r) {
  return ((uint64_t)r->gen << 32) | (uint32_t)(r - s->in);
}

static in_req *in_lookup(const acp_rpc_session *s, uint64_t handle) {
  uint32_t idx = (uint32_t)(handle & 0xffffffffu);
  uint32_t gen = (uint32_t)(handle >> 32);
  in_req *r;

  if (idx >= s->in_cap)
    return NULL;
  r = &s->in[idx];
  if (!r->used || r->gen != gen)
    return NULL;
  return r;
}

/* Out of line and cold: only sessions that built the index call them, and
 * inlined they made the release every answer goes through heavier. */
__attribute__((noinline, cold)) static void idx_add(acp_rpc_session *s,
                                                    uint32_t slot);
__attribute__((noinline, cold)) static void idx_del(acp_rpc_session *s,
                                                    uint32_t slot);

static void in_release(acp_rpc_session *s, in_req *r) {
  uint32_t idx = (uint32_t)(r - s->in);

  if (s->in_idx)
    idx_del(s, idx);
  acp__free(&s->mem, r->heap_id);
  r->heap_id = NULL;
  r->used = false;
  r->gen++;
  if (r->gen == 0)
    r->gen = 1;
  r->next_free = s->in_free;
  s->in_free = idx;
  s->in_count--;
}

/* Register an incoming request; *handle receives its handle. `key` is the
 * decoded text of an escaped string id (NULL otherwise). */
static int in_add(acp_rpc_session *s, const char *id, size_t id_len,
                  const char *key, size_t key_len, rpc_batch *batch,
                  uint64_t *handle) {
  in_req *r;
  uint32_t idx;
  size_t total = id_len + (key ? key_len : 0);

  if (s->in_free == NO_INDEX) {
    size_t ncap = s->in_cap ? (size_t)s->in_cap * 2 : 16;
    in_req *p;
    uint32_t i;
    if (ncap > SLAB_LIMIT)
      ncap = SLAB_LIMIT;
    if (ncap <= s->in_cap)
      return ACP_ERR_LIMIT;
    p = acp__realloc(&s->mem, s->in, ncap * sizeof(*p));
    if (p == NULL)
      return ACP_ERR_NOMEM;
    s->in = p;
    for (i = (uint32_t)ncap; i > s->in_cap; i--) {
      p[i - 1].used = false;
      p[i - 1].gen = 1;
      p[i - 1].heap_id = NULL;
      p[i - 1].next_free = s->in_free;
      s->in_free = i - 1;
    }
    s->in_cap = (uint32_t)ncap;
  }
  idx = s->in_free;
  r = &s->in[idx];
  r->heap_id = NULL;
  if (total > ID_INLINE) {
    r->heap_id = acp__malloc(&s->mem, total);
    if (r->heap_id == NULL)
      return ACP_ERR_NOMEM;
  }
  s->in_free = r->next_free;
  r->tag = NULL;
  memcpy(r->heap_id ? r->heap_id : r->inl, id, id_len);
  r->has_key = key != NULL;
  r->key_len = key ? key_len : 0;
  if (key && key_len)
    memcpy((r->heap_id ? r->heap_id : r->inl) + id_len, key, key_len);
  r->id_len = id_len;
  r->batch = batch;
  r->used = true;
  r->next_free = NO_INDEX;
  s->in_count++;
  if (s->in_idx)
    idx_add(s, idx);
  *handle = in_handle(s, r);
  return 0;
}

/* MARK: - Id comparison (Private) */

typedef struct numview {
  bool neg;
  const char *ip; /* integer digits */
  size_t il;
  const char *fp; /* fraction digits */
  size_t fl;
  int64_t exp;
} numview;

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Split valid JSON number text. The exponent saturates at +-1e17, far
 * beyond anything a line of at most 4 GiB can compensate for. */
static void num_split(const char *p, size_t n, numview *v) {
  size_t i = 0;

  v->neg = false;
  v->fp = p;
  v->fl = 0;
  v->exp = 0;
  if (i < n && p[i] == '-') {
    v->neg = true;
    i++;
  }
  v->ip = p + i;
  while (i < n && is_digit(p[i]))
    i++;
  v->il = (size_t)(p + i - v->ip);
  if (i < n && p[i] == '.') {
    i++;
    v->fp = p + i;
    while (i < n && is_digit(p[i]))
      i++;
    v->fl = (size_t)(p + i - v->fp);
  }
  if (i < n && (p[i] == 'e' || p[i] == 'E')) {
    bool eneg = false;
    i++;
    if (i < n && (p[i] == '+' || p[i] == '-')) {
      eneg = p[i] == '-';
      i++;
    }
    while (i < n && is_digit(p[i])) {
      if (v->exp < INT64_C(100000000000000000))
        v->exp = v->exp * 10 + (p[i] - '0');
      i++;
    }
    if (eneg)
      v->exp = -v->exp;
  }
}

static char num_digit(const numview *v, size_t k) {
  return k < v->il ? v->ip[k] : v->fp[k - v->il];
}

/* Significant digits [*lo, *hi] and the power of ten of the last one.
 * Returns false for zero. */
static bool num_sig(const numview *v, size_t *lo, size_t *hi, int64_t *e) {
  size_t t = v->il + v->fl;
  size_t a = 0;
  size_t b = t;

  while (a < t && num_digit(v, a) == '0')
    a++;
  if (a == t)
    return false;
  while (b > a && num_digit(v, b - 1) == '0')
    b--;
  *lo = a;
  *hi = b;
  *e = v->exp - (int64_t)v->fl + (int64_t)(t - b);
  return true;
}

static bool num_equal(const char *a, size_t an, const char *b, size_t bn) {
  numview va;
  numview vb;
  size_t alo, ahi, blo, bhi, k;
  int64_t ae, be;
  bool anz;
  bool bnz;

  num_split(a, an, &va);
  num_split(b, bn, &vb);
  anz = num_sig(&va, &alo, &ahi, &ae);
  bnz = num_sig(&vb, &blo, &bhi, &be);
  if (!anz || !bnz)
    return anz == bnz;
  if (va.neg != vb.neg || ahi - alo != bhi - blo || ae != be)
    return false;
  for (k = 0; k < ahi - alo; k++) {
    if (num_digit(&va, alo + k) != num_digit(&vb, blo + k))
      return false;
  }
  return true;
}

/* Does the unanswered request r have the id v (compared by value)? */
static bool in_id_equals(acp_rpc_session *s, const in_req *r,
                         const acp_json_val *v) {
  const char *id = in_id(r);
  acp_json_type t = acp_json_type_of(v);
  const char *p;
  size_t n;

  if (t == ACP_JSON_NUMBER) {
    if (r->id_len == 0 || (id[0] != '-' && !is_digit(id[0])))
      return false;
    p = acp_json_raw(v, &n);
    return num_equal(id, r->id_len, p, n);
  }
  if (t == ACP_JSON_STRING) {
    if (r->id_len < 2 || id[0] != '"')
      return false;
    if (r->has_key)
      return acp_json_str_eq(v, id + r->id_len, r->key_len) != 0;
    return acp_json_str_eq(v, id + 1, r->id_len - 2) != 0;
  }
  (void)s;
  return false;
}

/* MARK: - The cancel index (Private) */

/*
 * Unanswered requests by id value, for $/cancel_request and
 * notifications/cancelled. A cancel used to compare its id with every
 * slot of the table, whose size is the high-water mark of requests in
 * flight (up to max_incoming, 65,536 by default): a peer that kept many
 * requests unanswered made each of its cancels cost that many
 * comparisons. The index is built at the first cancel on a table grown
 * past IDX_MIN slots, then kept up to date (in_add, in_release) for the
 * session's life, so a session with a few requests in flight never pays
 * for it. The hash is of the id's value (a number's sign, significant
 * digits and exponent; a string's decoded text), as in_id_equals()
 * compares, from a per-session seed. Chained, each bucket's chain doubly
 * linked, not open addressing: a peer may send many requests with one id,
 * which open addressing piles into one run that every insertion walks
 * (quadratic); chained, they make one chain that only a lookup of that
 * bucket walks, and adding or removing one is O(1). Out of memory, the
 * index is dropped and cancels scan as before.
 */
#define IDX_MIN 64u

static uint64_t hash_num(uint64_t h, const char *p, size_t n) {
  numview v;
  size_t lo, hi, k;
  int64_t e;

  num_split(p, n, &v);
  if (!num_sig(&v, &lo, &hi, &e))
    return acp__fnv1a(h, "0", 1); /* every zero is equal, -0 too */
  h = acp__fnv1a(h, v.neg ? "-" : "+", 1);
  h = acp__fnv1a(h, &e, sizeof(e));
  for (k = lo; k < hi; k++) {
    char c = num_digit(&v, k);
    h = acp__fnv1a(h, &c, 1);
  }
  return h;
}

static uint64_t hash_str(uint64_t h, const char *p, size_t n) {
  return acp__fnv1a(acp__fnv1a(h, "\"", 1), p, n);
}

static uint64_t in_hash(const acp_rpc_session *s, const in_req *r) {
  const char *id = in_id(r);

  if (r->id_len >= 2 && id[0] == '"')
    return r->has_key ? hash_str(s->idx_seed, id + r->id_len, r->key_len)
                      : hash_str(s->idx_seed, id + 1, r->id_len - 2);
  if (r->id_len > 0 && (id[0] == '-' || is_digit(id[0])))
    return hash_num(s->idx_seed, id, r->id_len);
  return s->idx_seed; /* null: no cancel names it */
}

static uint32_t idx_bucket(const acp_rpc_session *s, uint64_t h) {
  return (uint32_t)(h ^ (h >> 32)) & (s->idx_cap - 1);
}

static void idx_link_in(acp_rpc_session *s, uint32_t slot) {
  uint32_t b = idx_bucket(s, in_hash(s, &s->in[slot]));
  uint32_t first = s->in_idx[b];

  s->idx_link[2 * slot] = first;
  s->idx_link[2 * slot + 1] = 0;
  if (first)
    s->idx_link[2 * (first - 1) + 1] = slot + 1;
  s->in_idx[b] = slot + 1;
}

static void idx_drop(acp_rpc_session *s) {
  acp__free(&s->mem, s->in_idx);
  acp__free(&s->mem, s->idx_link);
  s->in_idx = NULL;
  s->idx_link = NULL;
  s->idx_cap = s->idx_slots = 0;
}

/* (Re)built for the table as it is: as many buckets as slots (64 at
 * least), every unanswered request in. False (no index) out of memory. */
static bool idx_build(acp_rpc_session *s) {
  uint64_t cap = 64;
  uint32_t i;

  idx_drop(s);
  while (cap < s->in_cap)
    cap *= 2;
  s->in_idx = acp__calloc(&s->mem, (size_t)cap, sizeof(*s->in_idx));
  s->idx_link = acp__malloc(&s->mem, (size_t)s->in_cap * 2 * sizeof(uint32_t));
  if (s->in_idx == NULL || s->idx_link == NULL) {
    idx_drop(s);
    return false;
  }
  s->idx_cap = (uint32_t)cap;
  s->idx_slots = s->in_cap;
  for (i = 0; i < s->in_cap; i++)
    if (s->in[i].used)
      idx_link_in(s, i);
  return true;
}

__attribute__((noinline, cold)) static void idx_add(acp_rpc_session *s,
                                                    uint32_t slot) {
  if (s->idx_slots != s->in_cap) {
    (void)idx_build(s); /* the table grew; in_add() marked the slot used */
    return;
  }
  idx_link_in(s, slot);
}

__attribute__((noinline, cold)) static void idx_del(acp_rpc_session *s,
                                                    uint32_t slot) {
  uint32_t next = s->idx_link[2 * slot];
  uint32_t prev = s->idx_link[2 * slot + 1];

  if (prev)
    s->idx_link[2 * (prev - 1)] = next;
  else
    s->in_idx[idx_bucket(s, in_hash(s, &s->in[slot]))] = next;
  if (next)
    s->idx_link[2 * (next - 1) + 1] = prev;
}

/* The unanswered request whose id has the value of `v`, or NULL. */
static in_req *idx_find(acp_rpc_session *s, const acp_json_val *v) {
  acp_json_type t = acp_json_type_of(v);
  const char *p;
  size_t n;
  uint64_t h;

  if (t == ACP_JSON_NUMBER) {
    p = acp_json_raw(v, &n);
    h = hash_num(s->idx_seed, p, n);
  } else if (t == ACP_JSON_STRING && acp_json_doc_str(s->doc, v, &p, &n) == 0) {
    h = hash_str(s->idx_seed, p, n);
  } else {
    return NULL; /* no other id can match (in_id_equals) */
  }
  for (uint32_t e = s->in_idx[idx_bucket(s, h)]; e;
       e = s->idx_link[2 * (e - 1)])
    if (s->in[e - 1].used && in_id_equals(s, &s->in[e - 1], v))
      return &s->in[e - 1];
  return NULL;
}

/* MARK: - Batches (Private) */

static int batch_new(acp_rpc_session *s, rpc_batch **out) {
  rpc_batch *b = acp__calloc(&s->mem, 1, sizeof(*b));

  *out = b;
  if (b == NULL)
    return ACP_ERR_NOMEM;
  acp__buf_init(&b->buf, &s->mem, s->opts.max_output);
  b->next = s->batches;
  if (s->batches)
    s->batches->prev = b;
  s->batches = b;
  return 0;
}

static void batch_free(acp_rpc_session *s, rpc_batch *b) {
  if (b->prev)
    b->prev->next = b->next;
  else
    s->batches = b->next;
  if (b->next)
    b->next->prev = b->prev;
  acp__buf_dispose(&b->buf);
  acp__free(&s->mem, b);
}

/* Emit the collected responses of a finished batch as one array line. On
 * failure the output is unchanged. */
static int batch_flush(acp_rpc_session *s, rpc_batch *b) {
  size_t mark = s->out.len;
  int rv;

  if (b->nresp == 0)
    return 0;
  rv = acp__buf_reserve(&s->out, b->buf.len + 3);
  if (rv == 0) {
    s->out.data[s->out.len++] = '[';
    memcpy(s->out.data + s->out.len, b->buf.data, b->buf.len);
    s->out.len += b->buf.len;
    s->out.data[s->out.len++] = ']';
    s->out.data[s->out.len++] = '\n';
  }
  if (rv != 0)
    s->out.len = mark;
  return rv;
}

/* MARK: - Answering (Private) */

/* Start a response in `b`: the comma between batch elements. */
static int resp_begin(rpc_batch *batch, acp__buf *b) {
  if (batch && batch->nresp > 0)
    return acp__buf_putc(b, ',');
  return 0;
}

static int resp_end(rpc_batch *batch, acp__buf *b) {
  if (batch == NULL)
    return acp__buf_putc(b, '\n');
  return 0;
}

/* An error answer generated by the session itself. Output that does not fit
 * under max_output is dropped and reported; only NOMEM is returned. */
static int auto_error(acp_rpc_session *s, rpc_batch *batch, const char *id,
                      size_t id_len, int64_t code, const char *msg,
                      const char *data, size_t dlen) {
  acp__buf *b = batch ? &batch->buf : &s->out;
  size_t mark = b->len;
  int rv;

  if (id == NULL) {
    id = "null";
    id_len = 4;
  }
  rv = resp_begin(batch, b);
  if (rv == 0)
    rv = build_error(s, b, id, id_len, code, msg, strlen(msg), data, dlen);
  if (rv == 0)
    rv = resp_end(batch, b);
  if (rv != 0) {
    b->len = mark;
    if (rv == ACP_ERR_NOMEM)
      return fail(s, rv, "out of memory");
    report(s, 0, "output limit reached; error response dropped");
    return 0;
  }
  if (batch)
    batch->nresp++;
  return 0;
}

static int invalid_request(acp_rpc_session *s, rpc_batch *batch,
                           const acp_json_val *id, const char *why) {
  const char *idp = NULL;
  size_t idn = 0;
  char data[160];
  acp__buf tmp;
  int rv;

  report(s, ACP_RPC_INVALID_REQUEST, why);
  if (id)
    idp = acp_json_raw(id, &idn);
  /* The detail is a static ASCII string: quote it by hand. */
  stack_buf(&tmp, &s->mem, data, sizeof(data));
  rv = put_str(s, &tmp, why, strlen(why));
  if (rv != 0)
    return fail(s, ACP_ERR_INTERNAL, "detail too long");
  return auto_error(s, batch, idp, idn, ACP_RPC_INVALID_REQUEST,
                    "Invalid Request", data, tmp.len);
}

static int respond_common(acp_rpc_session *s, uint64_t handle, bool is_error,
                          const char *result, size_t rlen, int64_t code,
                          const char *msg, size_t msg_len, const char *data,
                          size_t dlen) {
  in_req *r;
  rpc_batch *batch;
  acp__buf *b;
  size_t mark;
  int rv;

  rv = usable(s);
  if (rv != 0)
    return rv;
  r = in_lookup(s, handle);
  if (r == NULL)
    return ACP_ERR_NOT_FOUND;
  batch = r->batch;
  b = batch ? &batch->buf : &s->out;
  mark = b->len;
  rv = resp_begin(batch, b);
  if (rv == 0 && is_error)
    rv = build_error(s, b, in_id(r), r->id_len, code, msg, msg_len, data, dlen);
  else if (rv == 0)
    rv = build_result(b, in_id(r), r->id_len, result, rlen);
  if (rv == 0)
    rv = resp_end(batch, b);
  if (rv != 0) {
    b->len = mark;
    return out_error(s, rv);
  }
  if (batch) {
    batch->nresp++;
    batch->outstanding--;
    if (batch->complete && batch->outstanding == 0) {
      rv = batch_flush(s, batch);
      if (rv != 0) {
        batch->nresp--;
        batch->outstanding++;
        b->len = mark;
        return out_error(s, rv);
      }
      batch_free(s, batch);
    }
  }
  in_release(s, r);
  return 0;
}

/* MARK: - Dispatch (Private) */

enum { K_JSONRPC, K_ID, K_METHOD, K_PARAMS, K_RESULT, K_ERROR, K_COUNT };

static const struct {
  const char *name;
  size_t len;
} keys[K_COUNT] = {{"jsonrpc", 7}, {"id", 2},     {"method", 6},
                   {"params", 6},  {"result", 6}, {"error", 5}};

/* Equality of an envelope key of n bytes (2-7, as every name above) with
 * a name: two overlapping loads a side, not a memcmp call (four keys a
 * message). */
static bool name_eq(const char *a, const char *b, size_t n) {
  uint32_t x;
  uint32_t y;
  uint16_t u;
  uint16_t v;

  if (n >= 4) {
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    if (x != y)
      return false;
    memcpy(&x, a + n - 4, 4);
    memcpy(&y, b + n - 4, 4);
    return x == y;
  }
  memcpy(&u, a, 2);
  memcpy(&v, b, 2);
  if (u != v)
    return false;
  memcpy(&u, a + n - 2, 2);
  memcpy(&v, b + n - 2, 2);
  return u == v;
}

/* Whether "jsonrpc" is "2.0": off the tape record when it has no escapes
 * (every message has one; a call to acp_json_str_eq() was ~50
 * instructions), decoded otherwise. */
static bool is_jsonrpc_2(const acp_json_val *v) {
  if (v == NULL || v->type != ACP_JSON_STRING)
    return false;
  if ((v->flags & ACP__JF_ESC) == 0)
    return v->len == 5 && v->raw[1] == '2' && v->raw[2] == '.' &&
           v->raw[3] == '0';
  return ACP_JSON_STR_EQ_LIT(v, "2.0");
}

static int key_index(const acp_json_val *k) {
  size_t n;
  const char *p;
  int i;

  /* Read off the tape record (a key is always a string; the check stays). */
  if (k->type != ACP_JSON_STRING)
    return -1;
  p = k->raw + 1;
  n = k->len - 2;
  if ((k->flags & ACP__JF_ESC) == 0) {
    /* The first byte picks the one candidate: one compare per key of the
     * envelope, not a memcmp call per name tried. */
    if (n == 0)
      return -1;
    switch (p[0]) {
    case 'j':
      i = K_JSONRPC;
      break;
    case 'i':
      i = K_ID;
      break;
    case 'm':
      i = K_METHOD;
      break;
    case 'p':
      i = K_PARAMS;
      break;
    case 'r':
      i = K_RESULT;
      break;
    case 'e':
      i = K_ERROR;
      break;
    default:
      return -1;
    }
    return n == keys[i].len && name_eq(p, keys[i].name, n) ? i : -1;
  }
  for (i = 0; i < K_COUNT; i++) {
    if (acp_json_str_eq(k, keys[i].name, keys[i].len))
      return i;
  }
  return -1;
}

/* Decode string `v` into `buf` with a NUL after it. */
static int copy_z(acp_rpc_session *s, acp__buf *buf, const acp_json_val *v,
                  const char **out, size_t *len) {
  const char *p;
  size_t n;
  int rv;

  /* A string without escapes is its raw bytes between the quotes: read
   * off the tape record (as key_index() does), no call. */
  if (v->type == ACP_JSON_STRING && (v->flags & ACP__JF_ESC) == 0) {
    p = v->raw + 1;
    n = v->len - 2;
  } else {
    rv = acp_json_doc_str(s->doc, v, &p, &n);
    if (rv != 0)
      return rv;
  }
  buf->len = 0;
  rv = acp__buf_reserve(buf, n + 1);
  if (rv != 0)
    return rv;
  memcpy(buf->data, p, n);
  buf->data[n] = '\0';
  buf->len = n;
  *out = buf->data;
  *len = n;
  return 0;
}

static bool is_cancel_method(const acp_rpc_session *s, const char *m,
                             size_t n) {
  if (s->opts.cancel_style == ACP_RPC_CANCEL_STYLE_MCP)
    return n == 23 && memcmp(m, "notifications/cancelled", 23) == 0;
  return n == 16 && memcmp(m, "$/cancel_request", 16) == 0;
}

/* The unanswered request whose id has the value of `rid` (through the
 * index once the table is large, which builds it), or NULL. */
static in_req *in_find(acp_rpc_session *s, const acp_json_val *rid) {
  in_req *r = NULL;

  if (rid == NULL || s->in_count == 0)
    return NULL;
  if (s->in_idx == NULL && s->in_cap > IDX_MIN)
    (void)idx_build(s);
  if (s->in_idx) {
    r = idx_find(s, rid);
#ifdef ACP__SELFCHECK
    /* Fuzz builds: the index finds a request exactly when a search does
     * (with duplicate ids in flight, not necessarily the same one). */
    bool any = false;
    for (uint32_t i = 0; i < s->in_cap && !any; i++)
      any = s->in[i].used && in_id_equals(s, &s->in[i], rid);
    if (any != (r != NULL) || (r && !in_id_equals(s, r, rid)))
      abort();
#endif
  } else {
    for (uint32_t i = 0; i < s->in_cap && !r; i++)
      if (s->in[i].used && in_id_equals(s, &s->in[i], rid))
        r = &s->in[i];
  }
  return r;
}

static int handle_cancel(acp_rpc_session *s, const acp_json_val *params) {
  in_req *r = in_find(s, ACP__OBJ_GETL(params, "requestId"));
  uint64_t handle;
  int rv;

  if (r == NULL || s->cbs.on_cancel == NULL)
    return 0;
  handle = in_handle(s, r);
  s->in_cb++;
  rv = s->cbs.on_cancel(s, handle, s->user_data);
  s->in_cb--;
  return cb_result(s, rv);
}

static int handle_request(acp_rpc_session *s, rpc_batch *batch,
                          acp_rpc_msg *msg) {
  const char *idp;
  size_t idn;
  const char *key = NULL;
  size_t key_len = 0;
  int rv;

  idp = acp_json_raw(msg->id, &idn);
  if (s->cbs.on_request == NULL) {
    const char *mraw;
    size_t mlen;
    acp__buf *d = &s->emsg;
    report(s, ACP_RPC_METHOD_NOT_FOUND, "no request handler");
    mraw = acp_json_raw(ACP__OBJ_GETL(msg->root, "method"), &mlen);
    d->len = 0;
    rv = put_lit(d, "{\"method\":");
    if (rv == 0)
      rv = acp__buf_append(d, mraw, mlen);
    if (rv == 0)
      rv = acp__buf_putc(d, '}');
    if (rv != 0)
      return fail(s, ACP_ERR_NOMEM, "out of memory");
    return auto_error(s, batch, idp, idn, ACP_RPC_METHOD_NOT_FOUND,
                      "Method not found", d->data, d->len);
  }
  if (s->in_count >= s->opts.max_incoming) {
    report(s, ACP_RPC_INTERNAL_ERROR, "too many concurrent requests");
    return auto_error(s, batch, idp, idn, ACP_RPC_INTERNAL_ERROR,
                      "Too many concurrent requests", NULL, 0);
  }
  if (acp_json_type_of(msg->id) == ACP_JSON_STRING &&
      acp_json_str_has_escapes(msg->id)) {
    rv = acp_json_doc_str(s->doc, msg->id, &key, &key_len);
    if (rv != 0)
      return fail(s, ACP_ERR_NOMEM, "out of memory");
  }
  rv = in_add(s, idp, idn, key, key_len, batch, &msg->handle);
  if (rv == ACP_ERR_LIMIT) {
    report(s, ACP_RPC_INTERNAL_ERROR, "too many concurrent requests");
    return auto_error(s, batch, idp, idn, ACP_RPC_INTERNAL_ERROR,
                      "Too many concurrent requests", NULL, 0);
  }
  if (rv != 0)
    return fail(s, ACP_ERR_NOMEM, "out of memory");
  if (batch)
    batch->outstanding++;
  s->in_cb++;
  rv = s->cbs.on_request(s, msg, s->user_data);
  s->in_cb--;
  return cb_result(s, rv);
}

static int handle_response(acp_rpc_session *s, acp_rpc_msg *msg) {
  int64_t id;
  uint32_t slot;
  acp_rpc_response_cb cb;
  void *ud;
  int rv;

  if (msg->result && msg->error) {
    report(s, 0, "response has both result and error");
    return 0;
  }
  if (acp_json_get_int64(msg->id, &id) != 0) {
    report(s, 0, "response to an unknown id");
    return 0;
  }
  slot = pend_find_slot(s, id);
  if (slot == NO_INDEX) {
    if (!done_has(s, id))
      report(s, 0, "response to an unknown id");
    return 0;
  }
  if (msg->error) {
    const acp_json_val *code = ACP__OBJ_GETL(msg->error, "code");
    const acp_json_val *m = ACP__OBJ_GETL(msg->error, "message");
    if (acp_json_get_int64(code, &msg->error_code) != 0)
      msg->error_code = 0;
    if (acp_json_type_of(m) == ACP_JSON_STRING) {
      rv = copy_z(s, &s->emsg, m, &msg->error_message, &msg->error_message_len);
      if (rv != 0)
        return fail(s, ACP_ERR_NOMEM, "out of memory");
    }
    msg->error_data = ACP__OBJ_GETL(msg->error, "data");
  }
  rv = release_refs(s);
  if (rv != 0)
    return rv;
  pend_remove(s, slot, &cb, &ud, &id);
  if (cb == NULL)
    return 0;
  s->in_cb++;
  rv = cb(s, msg, ud);
  s->in_cb--;
  return cb_result(s, rv);
}

static bool id_type_ok(const acp_json_val *id) {
  acp_json_type t = acp_json_type_of(id);

  return t == ACP_JSON_STRING || t == ACP_JSON_NUMBER || t == ACP_JSON_NULL;
}

/* Handle one message (a line's root, or one element of a batch). */
static int handle_message(acp_rpc_session *s, const acp_json_val *v,
                          rpc_batch *batch) {
  const acp_json_val *m[K_COUNT] = {0};
  const acp_json_val *k;
  acp_rpc_msg msg;
  bool response_shape;
  const acp_json_val *usable_id;
  int rv;

  if (acp_json_type_of(v) != ACP_JSON_OBJECT)
    return invalid_request(s, batch, NULL, "message must be an object");
  /* The members straight off the tape (json_int.h): a key, its value at
   * k + k->next, the next key at the value's next; the same walk as
   * acp_json_child()/acp_json_next() without two calls per member. */
  for (k = v->count ? v + 1 : NULL; k != NULL;) {
    const acp_json_val *val = k->next ? k + k->next : NULL;
    int i = key_index(k);
    if (i >= 0 && m[i] == NULL)
      m[i] = val;
    k = val && val->next ? val + val->next : NULL;
  }
  response_shape = m[K_METHOD] == NULL && (m[K_RESULT] || m[K_ERROR]);
  usable_id = m[K_ID] && id_type_ok(m[K_ID]) ? m[K_ID] : NULL;
  /* Never answer something that looks like a response: a peer doing the
   * same would make the two sides ping-pong forever. */
  if (response_shape) {
    if (m[K_ID] == NULL || !id_type_ok(m[K_ID])) {
      report(s, 0, "response without a valid id");
      return 0;
    }
    if (!is_jsonrpc_2(m[K_JSONRPC])) {
      report(s, 0, "response without \"jsonrpc\": \"2.0\"");
      return 0;
    }
  } else {
    if (m[K_ID] && usable_id == NULL)
      return invalid_request(s, batch, NULL,
                             "id must be a string, number or null");
    if (!is_jsonrpc_2(m[K_JSONRPC]))
      return invalid_request(s, batch, usable_id, "jsonrpc must be \"2.0\"");
    if (m[K_METHOD] == NULL)
      return invalid_request(s, batch, usable_id, "method is missing");
    if (acp_json_type_of(m[K_METHOD]) != ACP_JSON_STRING)
      return invalid_request(s, batch, usable_id, "method must be a string");
    if (m[K_PARAMS] && acp_json_type_of(m[K_PARAMS]) != ACP_JSON_OBJECT &&
        acp_json_type_of(m[K_PARAMS]) != ACP_JSON_ARRAY)
      return invalid_request(s, batch, usable_id,
                             "params must be an object or an array");
  }

  memset(&msg, 0, sizeof(msg));
  msg.id = m[K_ID];
  msg.root = v;
  msg.doc = s->doc;
  msg.raw = acp_json_raw(v, &msg.raw_len);
  msg.in_batch = batch != NULL;
  if (response_shape) {
    msg.kind = ACP_RPC_RESPONSE;
    msg.result = m[K_RESULT];
    msg.error = m[K_ERROR];
    return handle_response(s, &msg);
  }
  msg.params = m[K_PARAMS];
  rv = copy_z(s, &s->method, m[K_METHOD], &msg.method, &msg.method_len);
  if (rv != 0)
    return fail(s, ACP_ERR_NOMEM, "out of memory");
  if (m[K_ID] != NULL) {
    msg.kind = ACP_RPC_REQUEST;
    return handle_request(s, batch, &msg);
  }
  msg.kind = ACP_RPC_NOTIFICATION;
  if (is_cancel_method(s, msg.method, msg.method_len))
    return handle_cancel(s, msg.params);
  if (s->cbs.on_notification == NULL)
    return 0;
  s->in_cb++;
  rv = s->cbs.on_notification(s, &msg, s->user_data);
  s->in_cb--;
  return cb_result(s, rv);
}

static int handle_batch(acp_rpc_session *s, const acp_json_val *arr) {
  rpc_batch *batch;
  const acp_json_val *e;
  int rv;

  rv = batch_new(s, &batch);
  if (rv != 0)
    return fail(s, rv, "out of memory");
  for (e = acp_json_child(arr); e; e = acp_json_next(e)) {
    if (acp_json_type_of(e) == ACP_JSON_ARRAY)
      rv = invalid_request(s, batch, NULL, "nested batch");
    else
      rv = handle_message(s, e, batch);
    if (rv != 0)
      return rv; /* fatal; the batch is freed with the session */
  }
  batch->complete = true;
  if (batch->outstanding == 0) {
    rv = batch_flush(s, batch);
    if (rv == ACP_ERR_NOMEM)
      return fail(s, rv, "out of memory");
    if (rv != 0)
      report(s, 0, "output limit reached; batch response dropped");
    batch_free(s, batch);
  }
  return 0;
}

static bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int overlong(acp_rpc_session *s) {
  char msg[ACP_NDJSON_REPLY_MAX];

  /* ACP_NDJSON_REPLY_MAX fits the longest text, so this cannot fail; if
   * it ever did, say so instead of sending a truncated message. */
  if (acp_ndjson_overlong_message(msg, sizeof(msg), s->opts.max_line) == 0)
    return ACP_ERR_INTERNAL;
  report(s, ACP_RPC_INVALID_REQUEST, "line too long");
  return auto_error(s, NULL, NULL, 0, ACP_RPC_INVALID_REQUEST, msg, NULL, 0);
}

/* Parse and dispatch one complete line (line ending removed). */
/* Handle the message now parsed in s->doc. */
static int process_doc(acp_rpc_session *s) {
  const acp_json_val *root = acp_json_doc_root(s->doc);

  if (acp_json_type_of(root) == ACP_JSON_ARRAY) {
    if (!s->opts.batches)
      return invalid_request(s, NULL, NULL, "batches are not supported");
    if (acp_json_len(root) == 0)
      return invalid_request(s, NULL, NULL, "empty batch");
    return handle_batch(s, root);
  }
  return handle_message(s, root, NULL);
}

static int process_line(acp_rpc_session *s, const char *p, size_t n) {
  size_t i;
  int rv;

  for (i = 0; i < n && is_ws(p[i]); i++)
    ;
  if (i == n)
    return 0;
  rv = acp_json_doc_parse(s->doc, p, n, NULL);
  if (rv == ACP_ERR_NOMEM)
    return fail(s, rv, "out of memory");
  if (rv != 0) {
    report(s, ACP_RPC_PARSE_ERROR, "invalid JSON");
    return auto_error(s, NULL, NULL, 0, ACP_RPC_PARSE_ERROR, "Parse error",
                      NULL, 0);
  }
  return process_doc(s);
}

/*
 * The fast path of a line that lies whole in the input, no partial line
 * before it: parse it where it is and find its end in the same pass
 * (acp__json_doc_parse_line()), instead of a memchr for the line feed and
 * then the parse. Only valid JSON followed by its line feed goes this way,
 * within the line cap; anything else (bad JSON, an over-long or empty
 * line, a line cut by the end of the input) returns 0 and is framed and
 * parsed as before, which reports it as before. *used is the bytes taken,
 * the line feed included.
 */
static int fast_line(acp_rpc_session *s, const char *p, size_t n,
                     size_t *used) {
  size_t cap = acp_ndjson_max_line(&s->framer);
  size_t at;
  size_t k;

  *used = 0;
  /* Never look past the cap (+ CR LF): a line over it is the framer's to
   * drop unparsed, without a tape built for it first. */
  if (cap < SIZE_MAX - 2 && n > cap + 2)
    n = cap + 2;
  if (acp__json_doc_parse_line(s->doc, p, n, &at) != 0)
    return 0;
  k = at > 0 && p[at - 1] == '\r' ? at - 1 : at;
  if (k > cap)
    return 0; /* the framer reports it */
  *used = at + 1;
  return 1;
}

/* MARK: - Session (Public) */

int acp_rpc_session_new(acp_rpc_session **out, const acp_rpc_callbacks *cbs,
                        void *user_data, const acp_rpc_options *opts,
                        const acp_mem *mem) {
  acp_rpc_session *s = NULL;
  acp_mem m;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  s = acp__calloc(&m, 1, sizeof(*s));
  if (s == NULL)
    return ACP_ERR_NOMEM;
  s->mem = m;
  /* The cancel index's seed: ids a peer picks to collide under one seed
   * do not collide under another (the address moves with ASLR). */
  s->idx_seed = acp__fnv1a(ACP__FNV_SEED, &s, sizeof(s));
  if (cbs)
    s->cbs = *cbs;
  if (opts)
    s->opts = *opts;
  else
    options_default(&s->opts);
  s->user_data = user_data;
  s->pend_free = NO_INDEX;
  s->in_free = NO_INDEX;
  acp__buf_init(&s->out, &s->mem, s->opts.max_output);
  acp_ndjson_init(&s->framer, s->opts.max_line, &s->mem);
  acp__buf_init(&s->method, &s->mem, 0);
  acp__buf_init(&s->emsg, &s->mem, 0);

  rv = acp_json_doc_new(&s->doc, &s->mem);
  if (rv != 0)
    goto cleanup;
  acp_json_doc_set_max_depth(s->doc, s->opts.max_depth);
  rv = acp_json_writer_new(&s->esc, s->opts.max_output, &s->mem);
  if (rv != 0)
    goto cleanup;
  *out = s;
  return 0;

cleanup:
  acp_rpc_session_free(s);
  return rv;
}

void acp_rpc_session_free(acp_rpc_session *s) {
  uint32_t i;

  if (s == NULL)
    return;
  while (s->batches)
    batch_free(s, s->batches);
  for (i = 0; i < s->in_cap; i++)
    acp__free(&s->mem, s->in[i].heap_id);
  acp__free(&s->mem, s->in);
  idx_drop(s);
  acp__free(&s->mem, s->pend);
  acp__free(&s->mem, s->pend_hash);
  acp__free(&s->mem, s->heap);
  acp__buf_dispose(&s->out);
  acp__free(&s->mem, s->spans);
  acp__free(&s->mem, s->iov);
  acp_ndjson_dispose(&s->framer);
  acp__buf_dispose(&s->method);
  acp__buf_dispose(&s->emsg);
  acp_json_doc_free(s->doc);
  acp_json_writer_free(s->esc);
  acp__free(&s->mem, s);
}

void *acp_rpc_session_get_user_data(const acp_rpc_session *s) {
  return s ? s->user_data : NULL;
}

void acp_rpc_session_set_user_data(acp_rpc_session *s, void *user_data) {
  if (s)
    s->user_data = user_data;
}

const char *acp_rpc_session_errmsg(const acp_rpc_session *s) {
  return s ? s->errmsg : "";
}

char *acp_rpc_session_read_buf(acp_rpc_session *s, size_t *room) {
  if (room != NULL)
    *room = 0;
  if (s == NULL || room == NULL || s->failed || s->eof || s->in_cb > 0)
    return NULL;
  return acp_ndjson_read_buf(&s->framer, room);
}

acp_ssize acp_rpc_session_recv(acp_rpc_session *s, const char *data, size_t len,
                               uint64_t now_ms) {
  size_t pos = 0;
  bool fast;
  int rv;

  ACP_UNUSED(now_ms);
  if (s == NULL || (data == NULL && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  if (s->failed || s->eof || s->in_cb > 0)
    return ACP_ERR_INVALID_STATE;
  if (len > (size_t)PTRDIFF_MAX)
    len = (size_t)PTRDIFF_MAX;
  s->paused = false;
  /* Input that ends with a line feed holds whole lines only (after any
   * partial one the framer keeps): those can take the fast path. A read
   * that ends inside a line goes to the framer, so a long line is never
   * parsed in vain before its end is in. */
  fast = len > 0 && data[len - 1] == '\n';
  while (pos < len) {
    const char *line;
    size_t n;
    size_t used;

    if (fast && acp_ndjson_pending(&s->framer) == 0 && !s->framer.skipping &&
        fast_line(s, data + pos, len - pos, &used)) {
      s->in_lo = data + pos;
      s->in_hi = data + pos + used;
      pos += used;
      rv = process_doc(s);
      s->in_lo = s->in_hi = NULL;
      if (rv != 0)
        return rv;
      if (s->paused)
        break;
      continue;
    }
    /* The framer may move a partial line over the lines before it: what
     * the output borrowed from them is copied first. */
    if (s->nspans > 0) {
      rv = spans_flatten(s);
      if (rv != 0)
        return rv;
    }
    rv = acp_ndjson_next(&s->framer, data + pos, len - pos, &used, &line, &n);
    pos += used;
    if (rv == ACP_NDJSON_NEED_MORE)
      break;
    if (rv == ACP_NDJSON_LINE) {
      s->in_lo = line;
      s->in_hi = line + n;
      /* A long run the framer's line feed search found plain: the parse
       * jumps over it rather than scanning it a second time. */
      if (s->framer.plain_hi > s->framer.plain_lo && s->framer.plain_hi <= n)
        acp__json_doc_set_plain(s->doc, line + s->framer.plain_lo,
                                line + s->framer.plain_hi);
      rv = process_line(s, line, n);
      acp__json_doc_set_plain(s->doc, NULL, NULL);
      s->in_lo = s->in_hi = NULL;
    } else if (rv == ACP_NDJSON_OVERLONG)
      rv = overlong(s);
    else
      rv = fail(s, rv, "out of memory");
    if (rv != 0)
      return rv;
    if (s->paused)
      break;
  }
  return (acp_ssize)pos;
}

/* Complete the pending request at hash slot `slot` with a synthesized error
 * response, remembering its id so that a late answer is ignored. */
static int complete_local(acp_rpc_session *s, uint32_t slot, int64_t code,
                          const char *message, bool remember) {
  acp_rpc_response_cb cb;
  void *ud;
  int64_t id;
  char idtxt[24];
  char raw[160];
  acp__buf ib;
  acp__buf b;
  acp_rpc_msg msg;
  int rv;

  rv = release_refs(s);
  if (rv != 0)
    return rv;
  pend_remove(s, slot, &cb, &ud, &id);
  if (remember)
    done_add(s, id);
  if (cb == NULL)
    return 0;
  stack_buf(&ib, &s->mem, idtxt, sizeof(idtxt));
  stack_buf(&b, &s->mem, raw, sizeof(raw));
  rv = put_i64(&ib, id);
  if (rv == 0)
    rv = build_error(s, &b, ib.data, ib.len, code, message, strlen(message),
                     NULL, 0);
  if (rv != 0)
    return fail(s, ACP_ERR_INTERNAL, "local response too long");
  memset(&msg, 0, sizeof(msg));
  msg.kind = ACP_RPC_RESPONSE;
  msg.error_code = code;
  msg.error_message = message;
  msg.error_message_len = strlen(message);
  msg.raw = raw;
  msg.raw_len = b.len;
  msg.local = true;
  s->in_cb++;
  rv = cb(s, &msg, ud);
  s->in_cb--;
  return cb_result(s, rv);
}

/* Complete every pending request with an id below `below` with the local
 * "Connection closed" error. Entries keep their index in s->pend (only the
 * hash moves), so one pass sees each; a callback may cancel others (the
 * used flag says so) or add new ones (ids from `below` on: skipped). */
static int close_pending(acp_rpc_session *s, int64_t below, bool remember) {
  for (uint32_t i = 0; i < s->pend_cap && s->pend_count > 0; i++) {
    int rv;
    if (!s->pend[i].used || s->pend[i].id >= below)
      continue;
    rv = complete_local(s, pend_find_slot(s, s->pend[i].id),
                        ACP_RPC_CONNECTION_CLOSED, "Connection closed",
                        remember);
    if (rv != 0)
      return rv;
  }
  return 0;
}

int acp_rpc_session_recv_eof(acp_rpc_session *s, uint64_t now_ms) {

  ACP_UNUSED(now_ms);
  if (s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (s->failed || s->in_cb > 0)
    return ACP_ERR_INVALID_STATE;
  if (s->eof)
    return 0;
  s->eof = true;
  {
    const char *line;
    size_t n;

    if (acp_ndjson_pending(&s->framer) > 0 &&
        acp_ndjson_finish(&s->framer, &line, &n) != ACP_NDJSON_NEED_MORE)
      report(s, 0, "partial line discarded at end of input");
  }
  /* No request can be added now (eof is set), so one pass finds them all. */
  return close_pending(s, INT64_MAX, false);
}

int acp_rpc_session_drop_pending(acp_rpc_session *s) {
  if (s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (s->failed || s->in_cb > 0)
    return ACP_ERR_INVALID_STATE;
  /* Unlike at end of input, a callback may send new requests (to the peer
   * that comes back); ids grow, so those are told apart by theirs. */
  return close_pending(s, s->next_id, true);
}

acp_ssize acp_rpc_session_send(acp_rpc_session *s, const char **data) {
  size_t n;

  if (s == NULL || data == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *data = "";
  /* After a fatal error the lines queued before it are still whole
   * messages (emitters roll back partial ones), so they are handed out
   * once: a reply produced before the failure still reaches the peer. */
  if (s->in_cb > 0 || (s->failed && s->out.len == 0))
    return ACP_ERR_INVALID_STATE;
  if (s->nspans > 0 && spans_flatten(s) != 0) {
    /* Nothing of the failed output goes out: it would be cut short. */
    s->out.len = 0;
    s->nspans = 0;
    s->ext_total = 0;
    return ACP_ERR_NOMEM;
  }
  n = s->out.len;
  if (n == 0)
    return 0;
  *data = s->out.data;
  /* The bytes stay where they are until the next call appends output. */
  s->out.len = 0;
  return (acp_ssize)n;
}

void acp_rpc_session_set_borrow_output(acp_rpc_session *s, int on) {
  if (s == NULL)
    return;
  if (!on && s->nspans > 0)
    (void)spans_flatten(s);
  s->borrow = on != 0;
}

acp_ssize acp_rpc_session_send_iov(acp_rpc_session *s, const acp_rpc_iov **iov,
                                   size_t *niov) {
  size_t need;
  size_t at = 0;
  size_t k = 0;
  size_t i;
  size_t n;

  if (s == NULL || iov == NULL || niov == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *niov = 0;
  if (s->in_cb > 0 || (s->failed && s->out.len == 0)) {
    *iov = NULL;
    return ACP_ERR_INVALID_STATE;
  }
  /* Nothing borrowed: the buffer, as acp_rpc_session_send() gives it. */
  *iov = &s->one;
  if (s->nspans == 0) {
    n = s->out.len;
    if (n == 0)
      return 0;
    s->one.data = s->out.data;
    s->one.len = n;
    s->out.len = 0;
    *niov = 1;
    return (acp_ssize)n;
  }
  n = s->out.len + s->ext_total;
  need = 2 * s->nspans + 1;
  if (need > s->iov_cap) {
    acp_rpc_iov *ni = acp__realloc(&s->mem, s->iov, need * sizeof(*ni));

    if (ni == NULL) {
      /* One contiguous piece still works: copy the spans in. */
      const char *d;
      acp_ssize r = acp_rpc_session_send(s, &d);

      if (r <= 0)
        return r;
      s->one.data = d;
      s->one.len = (size_t)r;
      *iov = &s->one;
      *niov = 1;
      return r;
    }
    s->iov = ni;
    s->iov_cap = need;
  }
  for (i = 0; i < s->nspans; i++) {
    const out_span *sp = &s->spans[i];

    if (sp->off > at) {
      s->iov[k].data = s->out.data + at;
      s->iov[k++].len = sp->off - at;
    }
    s->iov[k].data = sp->p;
    s->iov[k++].len = sp->n;
    at = sp->off;
  }
  if (s->out.len > at) {
    s->iov[k].data = s->out.data + at;
    s->iov[k++].len = s->out.len - at;
  }
  /* As acp_rpc_session_send(): the bytes stay until output is appended. */
  s->out.len = 0;
  s->nspans = 0;
  s->ext_total = 0;
  s->ref_spans = false;
  *iov = s->iov;
  *niov = k;
  return (acp_ssize)n;
}

int acp_rpc_session_want_read(const acp_rpc_session *s) {
  return s != NULL && !s->eof && s->failed == 0;
}

int acp_rpc_session_want_write(const acp_rpc_session *s) {
  return s != NULL && s->failed == 0 && s->out.len > 0;
}

/* Append one line to the output, built by `build_request`. */
static int emit_parts(acp_rpc_session *s, const int64_t *id, const char *method,
                      size_t mlen, const acp__rpc_part *parts, size_t nparts) {
  size_t mark = s->out.len;
  bool lit = (mlen & ACP__RPC_METHOD_LIT) != 0;
  int rv;

  rv = build_request(s, &s->out, id, method, mlen & ~ACP__RPC_METHOD_LIT, lit,
                     parts, nparts);
  if (rv == 0)
    rv = acp__buf_putc(&s->out, '\n');
  if (rv != 0) {
    s->out.len = mark;
    spans_rollback(s, mark);
    return out_error(s, rv);
  }
  return 0;
}

static int emit_request(acp_rpc_session *s, const int64_t *id,
                        const char *method, size_t mlen, const char *params,
                        size_t plen) {
  acp__rpc_part part = {params, plen, false, false, false};

  return emit_parts(s, id, method, mlen, &part, params != NULL ? 1 : 0);
}

int acp_rpc_session_request(acp_rpc_session *s, const char *method,
                            size_t method_len, const char *params,
                            size_t params_len, uint64_t timeout_ms,
                            uint64_t now_ms, acp_rpc_response_cb cb,
                            void *cb_user_data, int64_t *id_out) {
  acp__rpc_part part = {params, params_len, false, false, false};

  /* The internal literal mark is not the caller's to set. */
  if (method_len & ACP__RPC_METHOD_LIT)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__rpc_request_parts(s, method, method_len, &part,
                                params != NULL ? 1 : 0, timeout_ms, now_ms, cb,
                                cb_user_data, id_out);
}

int acp__rpc_request_parts(acp_rpc_session *s, const char *method,
                           size_t method_len, const acp__rpc_part *parts,
                           size_t nparts, uint64_t timeout_ms, uint64_t now_ms,
                           acp_rpc_response_cb cb, void *cb_user_data,
                           int64_t *id_out) {
  int64_t id;
  uint64_t deadline = 0;
  int rv;

  rv = usable(s);
  if (rv != 0)
    return rv;
  if (method == NULL && method_len > 0)
    return ACP_ERR_INVALID_ARGUMENT;
  if (s->eof)
    return ACP_ERR_INVALID_STATE;
  if (s->pend_count >= s->opts.max_pending) {
    set_errmsg(s, "too many pending requests");
    return ACP_ERR_LIMIT;
  }
  if (timeout_ms > 0) {
    deadline = now_ms + timeout_ms;
    if (deadline < now_ms)
      deadline = UINT64_MAX;
  }
  rv = pend_reserve(s, deadline != 0);
  if (rv != 0)
    return out_error(s, rv);
  id = s->next_id;
  rv = emit_parts(s, &id, method ? method : "", method_len, parts, nparts);
  if (rv != 0)
    return rv;
  s->next_id++;
  pend_add(s, id, cb, cb_user_data, deadline);
  if (id_out)
    *id_out = id;
  return 0;
}

int acp_rpc_session_notify(acp_rpc_session *s, const char *method,
                           size_t method_len, const char *params,
                           size_t params_len) {
  acp__rpc_part part = {params, params_len, false, false, false};

  if (method_len & ACP__RPC_METHOD_LIT)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__rpc_notify_parts(s, method, method_len, &part,
                               params != NULL ? 1 : 0);
}

int acp__rpc_notify_parts(acp_rpc_session *s, const char *method,
                          size_t method_len, const acp__rpc_part *parts,
                          size_t nparts) {
  int rv = usable(s);

  if (rv != 0)
    return rv;
  if (method == NULL && method_len > 0)
    return ACP_ERR_INVALID_ARGUMENT;
  return emit_parts(s, NULL, method ? method : "", method_len, parts, nparts);
}

int acp_rpc_session_respond(acp_rpc_session *s, uint64_t handle,
                            const char *result, size_t result_len) {
  return respond_common(s, handle, false, result, result_len, 0, NULL, 0, NULL,
                        0);
}

int acp_rpc_session_respond_error(acp_rpc_session *s, uint64_t handle,
                                  int64_t code, const char *message,
                                  size_t message_len, const char *data,
                                  size_t data_len) {
  if (s != NULL && message == NULL && message_len > 0)
    return ACP_ERR_INVALID_ARGUMENT;
  return respond_common(s, handle, true, NULL, 0, code, message, message_len,
                        data, data_len);
}

/* Send the configured cancel notification for our request `id`. */
static int send_cancel(acp_rpc_session *s, int64_t id) {
  char params[96];
  acp__buf p;
  int rv;

  stack_buf(&p, &s->mem, params, sizeof(params));
  rv = put_lit(&p, "{\"requestId\":");
  if (rv == 0)
    rv = put_i64(&p, id);
  if (rv == 0 && s->opts.cancel_style == ACP_RPC_CANCEL_STYLE_MCP)
    rv = put_lit(&p, ",\"reason\":\"Request cancelled\"");
  if (rv == 0)
    rv = acp__buf_putc(&p, '}');
  if (rv != 0)
    return fail(s, ACP_ERR_INTERNAL, "cancel params too long");
  if (s->opts.cancel_style == ACP_RPC_CANCEL_STYLE_MCP)
    return emit_request(s, NULL, "notifications/cancelled", 23, p.data, p.len);
  return emit_request(s, NULL, "$/cancel_request", 16, p.data, p.len);
}

int acp_rpc_session_cancel(acp_rpc_session *s, int64_t id, unsigned flags,
                           uint64_t now_ms) {
  uint32_t slot;
  int rv;

  ACP_UNUSED(now_ms);
  rv = usable(s);
  if (rv != 0)
    return rv;
  slot = pend_find_slot(s, id);
  if (slot == NO_INDEX)
    return ACP_ERR_NOT_FOUND;
  if (flags & ACP_RPC_CANCEL_NOTIFY) {
    rv = send_cancel(s, id);
    if (rv != 0)
      return rv;
  }
  if (flags & ACP_RPC_CANCEL_COMPLETE)
    return complete_local(s, slot, ACP_RPC_REQUEST_CANCELLED,
                          "Request cancelled", true);
  return 0;
}

size_t acp_rpc_session_pending(const acp_rpc_session *s) {
  return s ? s->pend_count : 0;
}

int acp_rpc_session_drop(acp_rpc_session *s, uint64_t handle) {
  in_req *r;
  rpc_batch *batch;
  int rv;

  if (s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  r = in_lookup(s, handle);
  if (r == NULL)
    return ACP_ERR_NOT_FOUND;
  batch = r->batch;
  if (batch) {
    batch->outstanding--;
    if (batch->complete && batch->outstanding == 0) {
      rv = batch_flush(s, batch);
      if (rv != 0) {
        batch->outstanding++;
        return out_error(s, rv);
      }
      batch_free(s, batch);
    }
  }
  in_release(s, r);
  return 0;
}

void acp_rpc_session_set_batches(acp_rpc_session *s, int on) {
  if (s)
    s->opts.batches = on ? 1 : 0;
}

size_t acp_rpc_session_incoming(const acp_rpc_session *s) {
  return s ? s->in_count : 0;
}

int acp__rpc_find_request(acp_rpc_session *s, const acp_json_val *id,
                          uint64_t *handle) {
  in_req *r = s != NULL ? in_find(s, id) : NULL;

  if (r == NULL)
    return ACP_ERR_NOT_FOUND;
  *handle = in_handle(s, r);
  return 0;
}

void acp__rpc_set_tag(acp_rpc_session *s, uint64_t handle, void *tag) {
  in_req *r = s ? in_lookup(s, handle) : NULL;

  if (r)
    r->tag = tag;
}

void *acp__rpc_tag(const acp_rpc_session *s, uint64_t handle) {
  const in_req *r = s ? in_lookup(s, handle) : NULL;

  return r ? r->tag : NULL;
}

uint64_t acp_rpc_session_get_expiry(const acp_rpc_session *s) {
  if (s == NULL || s->heap_len == 0)
    return UINT64_MAX;
  return s->pend[s->heap[0]].deadline;
}

int acp_rpc_session_handle_expiry(acp_rpc_session *s, uint64_t now_ms) {
  int rv;

  if (s == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (s->failed || s->in_cb > 0)
    return ACP_ERR_INVALID_STATE;
  while (s->heap_len > 0 && s->pend[s->heap[0]].deadline <= now_ms) {
    int64_t id = s->pend[s->heap[0]].id;
    if (s->opts.cancel_style == ACP_RPC_CANCEL_STYLE_ACP) {
      /* A full output buffer must not keep the request alive: the local
       * completion matters more than the courtesy notification. */
      rv = send_cancel(s, id);
      if (rv != 0 && rv != ACP_ERR_LIMIT)
        return rv;
    }
    rv = complete_local(s, pend_find_slot(s, id), ACP_RPC_REQUEST_TIMEOUT,
                        "Request timed out", true);
    if (rv != 0)
      return rv;
  }
  return 0;
}

int acp_rpc_session_send_raw(acp_rpc_session *s, const char *json, size_t len) {
  size_t mark;
  int rv;

  rv = usable(s);
  if (rv != 0)
    return rv;
  if ((json == NULL && len > 0) || (len > 0 && memchr(json, '\n', len)))
    return ACP_ERR_INVALID_ARGUMENT;
  mark = s->out.len;
  rv = acp__buf_reserve(&s->out, len + 1);
  if (rv == 0) {
    if (len > 0)
      memcpy(s->out.data + s->out.len, json, len);
    s->out.len += len;
    s->out.data[s->out.len++] = '\n';
  }
  if (rv != 0) {
    s->out.len = mark;
    return out_error(s, rv);
  }
  return 0;
}
