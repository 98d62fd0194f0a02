/*
 * MCP Streamable HTTP and legacy HTTP+SSE server: libmicrohttpd in
 * external-polling epoll mode, driven by the libuv loop (a uv_poll_t on the
 * daemon's epoll descriptor, a uv_timer_t for MHD's timeout and the conns'
 * deadlines, a uv_prepare_t that routes the conns' output to streams before
 * each wait). SSE streams are callback responses whose reader suspends the
 * connection when it has nothing to send; new output resumes it.
 */
#include "acp/http.h"
#include "acp/ndjson.h"
#include "http_internal.h"
#include "jwt.h"
#include "oauth.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <microhttpd.h>

#if defined(__linux__)
#include <sys/random.h>
#endif

#define SESSION_MAGIC 0x4d435048u /* "MCPH" */
/* Marker a conn's output carries where acp_http_call_close_stream() was
 * called (see route()); never sent to a client. */
#define CUT_METHOD "acp.internal/close_stream"
#define MAX_KEPT_STREAMS 16 /* finished POST streams kept for replay */
#define MAX_STREAM_LOG ((size_t)64 << 20)
#define TRIM_THRESHOLD ((size_t)64 << 10)
/* libmicrohttpd's per-connection pool: it holds the request line, the
 * headers and the read buffer (bodies stream through on_access, so their
 * size does not depend on it). MHD clears the whole pool before every
 * keep-alive request, so its size is paid on each request: at 64 KiB the
 * clearing was 19 % of the server's CPU under wrk (perf, 2026 tools/call),
 * at 16 KiB 8 %. 16 KiB admits a header block of about 14 KiB; a larger
 * one gets 431, like the 8-16 KiB limits of common proxies. */
#define CONN_POOL_BYTES ((size_t)16 << 10)

/* A relay session is an hs_session (the public name is its tag). */
typedef struct acp_http_relay_session hs_session;
typedef struct hs_stream hs_stream;
typedef struct hs_req hs_req;
typedef struct hs_watch hs_watch;

struct acp_http_server_options {
  acp_mem mem;
  char *addr;
  uint16_t port;
  char *path;
  char **origins;
  size_t norigins;
  char **hosts;
  size_t nhosts;
  size_t max_body, max_streams, max_sessions;
  uint32_t retry_ms;
  uint32_t keepalive_ms; /* SSE comment interval on idle streams; 0: none */
  uint32_t drain_ms;     /* acp_http_server_close()'s bound on the drain */
  int legacy;
  int listen_fd;
  char *prefix;        /* names this worker in session ids, or NULL */
  acp_http_auth *auth; /* borrowed, or NULL: no authorization */
};

typedef struct hs_event {
  uint64_t seq;
  uint64_t off; /* absolute offset of the event in the stream's log */
} hs_event;

struct hs_stream {
  hs_stream *next;
  hs_session *sess;
  uint64_t no;
  bool is_get;
  acp__buf log;  /* SSE bytes */
  uint64_t base; /* absolute offset of log.data[0] */
  uint64_t delivered;
  hs_event *ev;
  size_t nev, capev;
  uint64_t seq;
  char **ids; /* raw ids of requests still unanswered on this stream */
  size_t nids, capids;
  char **tokens; /* raw progress tokens */
  size_t ntokens, captokens;
  bool finished;
  /* SSE polling: end the current HTTP response at log offset `cut`
   * (absolute); what follows waits for the client's reconnection. */
  bool cut_set;
  uint64_t cut;
  bool cut_in_pre; /* asked while deciding: after pre message `cut_npre` */
  size_t cut_npre;
  bool deciding; /* POST being dispatched: JSON or SSE not decided yet */
  bool force_sse;
  acp__buf pre; /* messages routed while deciding, '\n'-separated */
  size_t npre;
  bool pre_other; /* something other than a response was routed */
  hs_req *rq;
  /* A relay POST suspended before any answer was queued: it becomes one
   * JSON body if its responses arrive with nothing else, else a stream. */
  hs_req *waiting;
};

typedef struct hs_omap {
  char *id;
  hs_stream *st;
} hs_omap;

/* A slot of a session's id index: the request id st->ids[k], or (tok)
 * the progress token st->tokens[k]. */
typedef struct hs_idslot {
  hs_stream *st; /* NULL: empty; ID_GONE: removed */
  size_t k;
  bool tok;
} hs_idslot;

struct acp_http_relay_session {
  uint32_t magic;
  acp_http_server *srv;
  hs_session *next;
  /* "[PREFIX-]<32 hex>": see acp_http_server_options_set_session_prefix() */
  char id[ACP_HTTP_MAX_SESSION_PREFIX + 1 + 32 + 1];
  acp_mcp_conn *conn; /* NULL for a relay session */
  bool legacy;
  bool ended; /* unlisted for session_find (a relay zombie may linger) */
  /* One 2026-07-28 request's conn: no id given out, never found, ended
   * with its POST (see handle_stateless_post()). */
  bool stateless;
  /* Relay sessions only. */
  bool relay;
  bool notified;    /* `closed` ran or is running */
  bool end_pending; /* acp_http_relay_session_end() from a callback */
  int busy;         /* inside `open` or `message` */
  void *ud;
  char *auth; /* Authorization of `open`, or NULL */
  size_t auth_len;
  /* With acp_http_auth: the subject of the token that opened the session
   * (NULL: a token without `sub`), which later requests must match. */
  char *sub;
  char *init_id; /* raw id of the initialize request, until answered */
  bool batch_ok; /* the answer to initialize said 2025-03-26 */
  bool prime;    /* ... said 2025-11-25 or later: see primes() */
  hs_stream *streams;
  hs_stream *get;
  hs_stream *ctx;
  uint64_t next_no;
  hs_omap *omap;
  size_t nomap, capomap;
  /* Every unanswered request id and every progress token of the
   * session's streams, by its raw text (open addressing, a power of two):
   * an answer or a progress notification finds its stream at once. A
   * search of each stream's ids made a batch of N requests cost N^2/2
   * comparisons (90,000 pings in a 4 MiB body: tens of seconds of the
   * server's one thread). Each key is in it once (collect() refuses a
   * request id already waiting and leaves a repeated token out): copies
   * of one key would pile into one run that every insertion walks. */
  hs_idslot *idx;
  size_t idx_cap, idx_used, idx_live; /* used: live + removed */
  uint64_t idx_seed; /* ids chosen to collide under one seed do not here */
  uint64_t used_ms;  /* last request, or last stream let go (loop time) */
};

enum { M_OTHER, M_GET, M_POST, M_DELETE };

struct hs_req {
  acp_http_server *srv;
  struct MHD_Connection *mc;
  hs_stream *wst; /* the stream of a waiting relay POST (hs_stream.waiting) */
  bool waiting;   /* suspended without an answer: see hs_stream.waiting */
  bool created;   /* ... and it opened its session (send MCP-Session-Id) */
  bool woken;     /* ... and was resumed: its handler runs again */
  hs_req *next;   /* in srv->reqs (requests with an SSE stream) */
  int method;
  acp__buf body;
  bool too_big;
  bool answered;
  hs_stream *st;
  uint64_t pos;
  bool suspended;
  bool legacy_stream; /* the GET /sse of a legacy session */
  hs_session *legacy_sess;
  hs_watch *watch;  /* the socket's watch while suspended, kept until done */
  bool gone;        /* the client closed while suspended: end this request */
  uint64_t susp_at; /* uv_now() when last suspended */
  bool authed;      /* claims holds the request's valid token */
  acp__jwt_claims claims; /* with acp_http_auth (never the token) */
  /* First member of its group so that auth_done() finds the request. */
  acp__auth_wait aw;   /* suspended for a token check's fetch (auth.c) */
  bool auth_waiting;   /* ... in srv->authq */
  bool auth_suspended; /* ... with the whole request in */
  bool auth_woken;     /* the fetch ended: check the token again */
  hs_req *auth_next;   /* in srv->authq */
};

/* A suspended connection is out of MHD's sight: a client that leaves would
 * be noticed only at the next write (a GET stream's next event, possibly
 * never) or, for a relay POST waiting for its answer, only when its session
 * ends; meanwhile it holds its stream, its place under max_streams and,
 * for a GET, the session's one GET (a reconnecting client got 409). So a
 * request suspended for WATCH_AFTER_MS has its socket watched for the
 * peer's close (EPOLLRDHUP, as Go's net/http does for its handlers'
 * contexts). Not at once: most suspensions last a few microseconds (a
 * relay POST waiting for its answer), and a watch costs six system calls
 * (libuv's check of the descriptor, then add and remove), measurable on
 * every bridged call. */
#define WATCH_AFTER_MS 200
struct hs_watch {
  uv_poll_t poll; /* first: the close callback gets the handle */
  acp_http_server *srv;
  hs_req *rq; /* NULL once the request is done */
};

struct acp_http_server {
  acp_mem mem;
  uv_loop_t *loop;
  acp_mcp_server *reg; /* NULL in relay mode */
  bool relay;
  acp_http_relay_callbacks rcb;
  void *rud;
  acp_json_doc *rdoc; /* parses acp_http_relay_deliver() messages */
  acp_json_doc *xdoc; /* a tool's schema, for its x-mcp-header params */
  acp__buf rtmp;
  acp_http_server_options *o;
  struct MHD_Daemon *d;
  uv_poll_t poll;
  uv_timer_t timer;
  uv_timer_t wtimer; /* arms watches on long suspensions (hs_watch) */
  uv_timer_t ktimer; /* keep-alive comments: 2026 streams, GET streams */
  uv_timer_t dtimer; /* bounds the drain of acp_http_server_close() */
  bool draining;     /* closing: open 2026 streams are finishing first */
  uv_prepare_t prepare;
  int open_handles;
  uint16_t port;
  hs_session *sessions;
  size_t nsessions;
  hs_req *reqs;
  hs_req *authq; /* requests waiting for a token check's fetch */
  size_t nstreams;
  size_t nwaiting; /* relay POSTs waiting for their answer (under the cap) */
  acp_json_doc *doc;
  acp__buf tmp;
  bool need_run;
  bool closing;
  bool in_run;
  acp_http_server_close_cb close_cb;
  void *close_ud;
  /* acp_http_auth: the resource URL, the metadata and where it is. */
  char *resource;
  char *prm;
  size_t prm_len;
  char *prm_path;             /* PRM_WELL_KNOWN and the MCP path */
  char *prm_url;              /* absolute, for WWW-Authenticate */
  const acp__jwt_claims *cur; /* the request being dispatched's token */
};

/* MARK: - Options */

int acp_http_server_options_new(acp_http_server_options **out,
                                const acp_mem *mem) {
  acp_http_server_options *o;
  acp_mem m;
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  o = acp__calloc(&m, 1, sizeof(*o));
  if (o == NULL)
    return ACP_ERR_NOMEM;
  o->mem = m;
  o->addr = acp__strdup(&m, "127.0.0.1");
  o->path = acp__strdup(&m, "/mcp");
  o->legacy = 1;
  o->listen_fd = -1;
  o->keepalive_ms = ACP_HTTP_DEFAULT_KEEPALIVE_MS;
  o->drain_ms = ACP_HTTP_DEFAULT_DRAIN_MS;
  if (o->addr == NULL || o->path == NULL) {
    acp_http_server_options_free(o);
    return ACP_ERR_NOMEM;
  }
  *out = o;
  return 0;
}

static void strv_free(const acp_mem *m, char **v, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    acp__free(m, v[i]);
  acp__free(m, v);
}

void acp_http_server_options_free(acp_http_server_options *o) {
  acp_mem m;
  if (o == NULL)
    return;
  m = o->mem;
  acp__free(&m, o->addr);
  acp__free(&m, o->path);
  acp__free(&m, o->prefix);
  strv_free(&m, o->origins, o->norigins);
  strv_free(&m, o->hosts, o->nhosts);
  acp__free(&m, o);
}

int acp_http_server_options_set_address(acp_http_server_options *o,
                                        const char *addr, uint16_t port) {
  struct in6_addr a6;
  struct in_addr a4;
  char *p;
  if (o == NULL || addr == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (inet_pton(AF_INET, addr, &a4) != 1 && inet_pton(AF_INET6, addr, &a6) != 1)
    return ACP_ERR_INVALID_ARGUMENT;
  p = acp__strdup(&o->mem, addr);
  if (p == NULL)
    return ACP_ERR_NOMEM;
  acp__free(&o->mem, o->addr);
  o->addr = p;
  o->port = port;
  return 0;
}

int acp_http_server_options_set_path(acp_http_server_options *o,
                                     const char *path) {
  char *p;
  if (o == NULL || path == NULL || path[0] != '/')
    return ACP_ERR_INVALID_ARGUMENT;
  p = acp__strdup(&o->mem, path);
  if (p == NULL)
    return ACP_ERR_NOMEM;
  acp__free(&o->mem, o->path);
  o->path = p;
  return 0;
}

static int strv_add(const acp_mem *m, char ***v, size_t *n, const char *s) {
  char **nv;
  char *d;
  d = acp__strdup(m, s);
  if (d == NULL)
    return ACP_ERR_NOMEM;
  nv = acp__realloc(m, *v, (*n + 1) * sizeof(char *));
  if (nv == NULL) {
    acp__free(m, d);
    return ACP_ERR_NOMEM;
  }
  nv[(*n)++] = d;
  *v = nv;
  return 0;
}

int acp_http_server_options_add_origin(acp_http_server_options *o,
                                       const char *origin) {
  if (o == NULL || origin == NULL || origin[0] == 0)
    return ACP_ERR_INVALID_ARGUMENT;
  return strv_add(&o->mem, &o->origins, &o->norigins, origin);
}

int acp_http_server_options_add_host(acp_http_server_options *o,
                                     const char *host) {
  if (o == NULL || host == NULL || host[0] == 0)
    return ACP_ERR_INVALID_ARGUMENT;
  return strv_add(&o->mem, &o->hosts, &o->nhosts, host);
}

void acp_http_server_options_set_max_body(acp_http_server_options *o,
                                          size_t bytes) {
  if (o)
    o->max_body = bytes;
}
void acp_http_server_options_set_max_streams(acp_http_server_options *o,
                                             size_t n) {
  if (o)
    o->max_streams = n;
}
void acp_http_server_options_set_max_sessions(acp_http_server_options *o,
                                              size_t n) {
  if (o)
    o->max_sessions = n;
}
void acp_http_server_options_set_retry(acp_http_server_options *o,
                                       uint32_t ms) {
  if (o)
    o->retry_ms = ms;
}
void acp_http_server_options_set_keepalive(acp_http_server_options *o,
                                           uint32_t ms) {
  if (o)
    o->keepalive_ms = ms;
}
void acp_http_server_options_set_drain_timeout(acp_http_server_options *o,
                                               uint32_t ms) {
  if (o)
    o->drain_ms = ms;
}
void acp_http_server_options_set_legacy(acp_http_server_options *o, int on) {
  if (o)
    o->legacy = on != 0;
}
void acp_http_server_options_set_listen_fd(acp_http_server_options *o, int fd) {
  if (o)
    o->listen_fd = fd < 0 ? -1 : fd;
}

/* The characters are a subset of what an nginx map key, a file name and an
 * HTTP header value can all carry unquoted; no '-', so the id splits at its
 * first '-' without ambiguity. */
void acp_http_server_options_set_auth(acp_http_server_options *o,
                                      acp_http_auth *auth) {
  if (o != NULL)
    o->auth = auth;
}

int acp_http_server_options_set_session_prefix(acp_http_server_options *o,
                                               const char *prefix) {
  size_t i, n;
  char *p = NULL;
  if (o == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  n = prefix ? strlen(prefix) : 0;
  if (n > ACP_HTTP_MAX_SESSION_PREFIX)
    return ACP_ERR_INVALID_ARGUMENT;
  for (i = 0; i < n; i++) {
    char c = prefix[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_'))
      return ACP_ERR_INVALID_ARGUMENT;
  }
  if (n > 0) {
    p = acp__strdup(&o->mem, prefix);
    if (p == NULL)
      return ACP_ERR_NOMEM;
  }
  acp__free(&o->mem, o->prefix);
  o->prefix = p;
  return 0;
}

static int options_copy(acp_http_server_options **out,
                        const acp_http_server_options *src,
                        const acp_mem *mem) {
  acp_http_server_options *o;
  size_t i;
  int rv = acp_http_server_options_new(&o, mem);
  if (rv != 0)
    return rv;
  if (src) {
    rv = acp_http_server_options_set_address(o, src->addr, src->port);
    if (rv == 0)
      rv = acp_http_server_options_set_path(o, src->path);
    for (i = 0; rv == 0 && i < src->norigins; i++)
      rv = acp_http_server_options_add_origin(o, src->origins[i]);
    for (i = 0; rv == 0 && i < src->nhosts; i++)
      rv = acp_http_server_options_add_host(o, src->hosts[i]);
    o->max_body = src->max_body;
    o->max_streams = src->max_streams;
    o->max_sessions = src->max_sessions;
    o->retry_ms = src->retry_ms;
    o->keepalive_ms = src->keepalive_ms;
    o->drain_ms = src->drain_ms;
    o->legacy = src->legacy;
    o->listen_fd = src->listen_fd;
    o->auth = src->auth;
    if (rv == 0)
      rv = acp_http_server_options_set_session_prefix(o, src->prefix);
  }
  if (o->max_body == 0)
    o->max_body = ACP_HTTP_DEFAULT_MAX_BODY;
  if (o->max_streams == 0)
    o->max_streams = ACP_HTTP_DEFAULT_MAX_STREAMS;
  if (o->max_sessions == 0)
    o->max_sessions = ACP_HTTP_DEFAULT_MAX_SESSIONS;
  if (o->retry_ms == 0)
    o->retry_ms = ACP_HTTP_DEFAULT_RETRY_MS;
  if (rv != 0) {
    acp_http_server_options_free(o);
    return rv;
  }
  *out = o;
  return 0;
}

/* MARK: - Helpers */

int acp__http_random_hex(char *out, size_t nbytes) {
  unsigned char b[64];
  size_t got = 0, i;
  static const char hex[] = "0123456789abcdef";
  if (nbytes > sizeof(b))
    return ACP_ERR_INVALID_ARGUMENT;
#if defined(__linux__)
  while (got < nbytes) {
    ssize_t n = getrandom(b + got, nbytes - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    got += (size_t)n;
  }
#endif
  if (got < nbytes) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return ACP_ERR_SYSTEM;
    while (got < nbytes) {
      ssize_t n = read(fd, b + got, nbytes - got);
      if (n <= 0) {
        if (n < 0 && errno == EINTR)
          continue;
        close(fd);
        return ACP_ERR_SYSTEM;
      }
      got += (size_t)n;
    }
    close(fd);
  }
  for (i = 0; i < nbytes; i++) {
    out[2 * i] = hex[b[i] >> 4];
    out[2 * i + 1] = hex[b[i] & 15];
  }
  out[2 * nbytes] = 0;
  return 0;
}

/* Host part of "host[:port]" or "[v6]:port" (bracketless for v6). */
static void split_host(const char *h, size_t n, const char **host, size_t *hl) {
  if (n > 0 && h[0] == '[') {
    const char *e = memchr(h, ']', n);
    if (e) {
      *host = h + 1;
      *hl = (size_t)(e - h - 1);
      return;
    }
  }
  {
    const char *c = memchr(h, ':', n);
    *host = h;
    *hl = c ? (size_t)(c - h) : n;
  }
}

static bool ieq(const char *a, size_t al, const char *b) {
  return strlen(b) == al && strncasecmp(a, b, al) == 0;
}

static bool host_is_loopback(const char *h, size_t n) {
  return ieq(h, n, "localhost") || ieq(h, n, "127.0.0.1") || ieq(h, n, "::1");
}

bool acp__http_host_ok(const acp_http_server_options *o, const char *hv) {
  const char *h;
  size_t hl, i;
  if (hv == NULL)
    return true; /* HTTP/1.0 without Host: nothing to rebind */
  split_host(hv, strlen(hv), &h, &hl);
  if (host_is_loopback(h, hl))
    return true;
  if (o->addr && ieq(h, hl, o->addr) && strcmp(o->addr, "0.0.0.0") != 0 &&
      strcmp(o->addr, "::") != 0)
    return true;
  for (i = 0; i < o->nhosts; i++)
    if (ieq(h, hl, o->hosts[i]))
      return true;
  return false;
}

bool acp__http_origin_ok(const acp_http_server_options *o, const char *ov) {
  const char *p, *h;
  size_t hl, i, n;
  if (ov == NULL)
    return true;
  for (i = 0; i < o->norigins; i++)
    if (strcasecmp(ov, o->origins[i]) == 0)
      return true;
  if (strncasecmp(ov, "http://", 7) == 0)
    p = ov + 7;
  else if (strncasecmp(ov, "https://", 8) == 0)
    p = ov + 8;
  else
    return false;
  n = strcspn(p, "/");
  if (p[n] != 0 && strcmp(p + n, "/") != 0)
    return false;
  split_host(p, n, &h, &hl);
  return host_is_loopback(h, hl);
}

static enum MHD_Result reply_hdr(struct MHD_Connection *mc, unsigned status,
                                 const char *ctype, const char *body,
                                 size_t len, const char *session_id,
                                 const char *hname, const char *hval) {
  struct MHD_Response *r;
  enum MHD_Result ret;
  r = MHD_create_response_from_buffer(len, (void *)(uintptr_t)body,
                                      MHD_RESPMEM_MUST_COPY);
  if (r == NULL)
    return MHD_NO;
  if (ctype)
    MHD_add_response_header(r, "Content-Type", ctype);
  if (session_id)
    MHD_add_response_header(r, "MCP-Session-Id", session_id);
  if (hname)
    MHD_add_response_header(r, hname, hval);
  ret = MHD_queue_response(mc, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply(struct MHD_Connection *mc, unsigned status,
                             const char *ctype, const char *body, size_t len,
                             const char *session_id) {
  return reply_hdr(mc, status, ctype, body, len, session_id, NULL, NULL);
}

static enum MHD_Result reply_unauthorized(struct MHD_Connection *mc) {
  static const char body[] =
      "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32000,\"message\":"
      "\"Unauthorized\"},\"id\":null}";
  return reply_hdr(mc, MHD_HTTP_UNAUTHORIZED, "application/json", body,
                   sizeof(body) - 1, NULL, "WWW-Authenticate", "Bearer");
}

/* Constant-time comparison of a request's Authorization with the value a
 * relay session was opened with: the time depends on the stored length
 * only. Absent matches absent only. */
static bool auth_ok(const hs_session *s, const char *given) {
  size_t gl, i;
  unsigned char d;
  if (!s->relay)
    return true;
  if (s->auth == NULL || given == NULL)
    return s->auth == NULL && given == NULL;
  gl = strlen(given);
  d = gl != s->auth_len;
  for (i = 0; i < s->auth_len; i++)
    d |= (unsigned char)((i < gl ? (unsigned char)given[i] : 0) ^
                         (unsigned char)s->auth[i]);
  return d == 0;
}

static enum MHD_Result reply_error(struct MHD_Connection *mc, unsigned status,
                                   int code, const char *message) {
  char body[512];
  int n = snprintf(body, sizeof(body),
                   "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":%d,\"message\":"
                   "\"%s\"},\"id\":null}",
                   code, message);
  if (n < 0 || (size_t)n >= sizeof(body))
    n = 0;
  return reply(mc, status, "application/json", body, (size_t)n, NULL);
}

static uint64_t now_ms(acp_http_server *srv) {
  return uv_now(srv->loop);
}

/* MARK: - Streams */

static char *raw_dup(const acp_mem *m, const acp_json_val *v) {
  size_t n;
  const char *r = acp_json_raw(v, &n);
  return r ? acp__strndup(m, r, n) : NULL;
}

/* MARK: - The id index (see hs_session.idx) */

static hs_stream id_gone_mark;
#define ID_GONE (&id_gone_mark)

static size_t id_hash(uint64_t seed, const char *p, size_t n) {
  uint64_t h = acp__fnv1a(seed, p, n);
  return (size_t)(h ^ (h >> 29));
}

static bool slot_live(const hs_idslot *e) {
  return e->st != NULL && e->st != ID_GONE;
}

static const char *slot_key(const hs_stream *st, size_t k, bool tok) {
  return tok ? st->tokens[k] : st->ids[k];
}

/* The live slot holding st->ids[k] (tok: st->tokens[k]). */
static hs_idslot *idx_slot_of(hs_session *s, const hs_stream *st, size_t k,
                              bool tok) {
  const char *key = slot_key(st, k, tok);
  size_t mask, i;
  if (s->idx_cap == 0)
    return NULL;
  mask = s->idx_cap - 1;
  for (i = id_hash(s->idx_seed, key, strlen(key)) & mask; s->idx[i].st != NULL;
       i = (i + 1) & mask)
    if (s->idx[i].st == st && s->idx[i].k == k && s->idx[i].tok == tok)
      return &s->idx[i];
  return NULL;
}

/* A live slot whose id (tok: progress token, of a usable stream unless
 * `any`) is p[0..n), or NULL. */
static hs_idslot *idx_find(hs_session *s, const char *p, size_t n, bool tok,
                           bool any) {
  size_t mask = s->idx_cap - 1;
  size_t i;
  if (s->idx_live == 0)
    return NULL;
  for (i = id_hash(s->idx_seed, p, n) & mask; s->idx[i].st != NULL;
       i = (i + 1) & mask) {
    const hs_idslot *e = &s->idx[i];
    if (slot_live(e) && e->tok == tok && (!tok || any || !e->st->finished)) {
      const char *key = slot_key(e->st, e->k, tok);
      if (strlen(key) == n && memcmp(key, p, n) == 0)
        return &s->idx[i];
    }
  }
  return NULL;
}

static void idx_place(hs_idslot *tab, size_t cap, uint64_t seed, hs_stream *st,
                      size_t k, bool tok) {
  const char *key = slot_key(st, k, tok);
  size_t i = id_hash(seed, key, strlen(key)) & (cap - 1);
  while (tab[i].st != NULL)
    i = (i + 1) & (cap - 1);
  tab[i].st = st;
  tab[i].k = k;
  tab[i].tok = tok;
}

/* Index st->ids[k] (tok: st->tokens[k]). At most 3/4 of the slots in use
 * (removed ones count): past that the table is rebuilt, twice as large if
 * the live keys need it. */
static int idx_add(hs_session *s, hs_stream *st, size_t k, bool tok) {
  if ((s->idx_used + 1) * 4 > s->idx_cap * 3) {
    size_t cap = s->idx_cap ? s->idx_cap : 8; /* most POSTs: one id */
    hs_idslot *tab;
    size_t i;
    while ((s->idx_live + 1) * 2 > cap)
      cap *= 2;
    tab = acp__calloc(&s->srv->mem, cap, sizeof(*tab));
    if (tab == NULL)
      return ACP_ERR_NOMEM;
    for (i = 0; i < s->idx_cap; i++)
      if (slot_live(&s->idx[i]))
        idx_place(tab, cap, s->idx_seed, s->idx[i].st, s->idx[i].k,
                  s->idx[i].tok);
    acp__free(&s->srv->mem, s->idx);
    s->idx = tab;
    s->idx_cap = cap;
    s->idx_used = s->idx_live;
  }
  idx_place(s->idx, s->idx_cap, s->idx_seed, st, k, tok);
  s->idx_used++;
  s->idx_live++;
  return 0;
}

static void idx_remove(hs_session *s, hs_idslot *e) {
  e->st = ID_GONE;
  s->idx_live--;
}

/* Forget st->ids[k] (index and array; the last id takes its place). */
static void stream_drop_id(hs_stream *st, size_t k) {
  hs_session *s = st->sess;
  hs_idslot *e = idx_slot_of(s, st, k, false);
  size_t last = st->nids - 1;
  if (e != NULL)
    idx_remove(s, e);
  acp__free(&s->srv->mem, st->ids[k]);
  if (k != last) {
    hs_idslot *m = idx_slot_of(s, st, last, false);
    st->ids[k] = st->ids[last];
    if (m != NULL)
      m->k = k;
  }
  st->nids = last;
}

static hs_stream *stream_new(hs_session *s, bool is_get) {
  acp_http_server *srv = s->srv;
  hs_stream *st = acp__calloc(&srv->mem, 1, sizeof(*st));
  if (st == NULL)
    return NULL;
  st->sess = s;
  st->no = s->next_no++;
  st->is_get = is_get;
  acp__buf_init(&st->log, &srv->mem, MAX_STREAM_LOG);
  acp__buf_init(&st->pre, &srv->mem, MAX_STREAM_LOG);
  st->next = s->streams;
  s->streams = st;
  return st;
}

static void req_detach(hs_req *rq);
static void server_unref(acp_http_server *srv);
static void waiting_wake(hs_req *rq);

static void watch_stop(hs_req *rq) {
  if (rq->watch != NULL)
    uv_poll_stop(&rq->watch->poll);
}

static void on_watch_closed(uv_handle_t *h) {
  hs_watch *w = (hs_watch *)h;
  acp_http_server *srv = w->srv;
  acp__free(&srv->mem, w);
  server_unref(srv);
}

/* The request is done (MHD closes or reuses its socket next). */
static void watch_free(hs_req *rq) {
  hs_watch *w = rq->watch;
  if (w == NULL)
    return;
  rq->watch = NULL;
  w->rq = NULL;
  uv_close((uv_handle_t *)&w->poll, on_watch_closed);
}

/* The client closed its end while we held its request suspended: resume
 * it so that MHD ends it (sse_reader and answer_waiting see `gone`). */
static void on_hangup(uv_poll_t *p, int status, int events) {
  hs_watch *w = (hs_watch *)p;
  hs_req *rq = w->rq;
  (void)status;
  (void)events;
  uv_poll_stop(p);
  if (rq == NULL)
    return;
  rq->gone = true;
  if (rq->waiting) {
    waiting_wake(rq);
  } else if (rq->suspended) {
    rq->suspended = false;
    MHD_resume_connection(rq->mc);
    rq->srv->need_run = true;
  }
}

/* Watch a just-suspended request's socket. Without a watch (no memory, or
 * the descriptor cannot be polled) the request only learns later, as
 * before. */
static void watch_start(hs_req *rq) {
  acp_http_server *srv = rq->srv;
  const union MHD_ConnectionInfo *ci;
  hs_watch *w = rq->watch;
  if (w == NULL) {
    ci = MHD_get_connection_info(rq->mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL)
      return;
    w = acp__calloc(&srv->mem, 1, sizeof(*w));
    if (w == NULL)
      return;
    if (uv_poll_init_socket(srv->loop, &w->poll, ci->connect_fd) != 0) {
      acp__free(&srv->mem, w);
      return;
    }
    w->srv = srv;
    w->rq = rq;
    rq->watch = w;
    srv->open_handles++;
  }
  (void)uv_poll_start(&w->poll, UV_DISCONNECT, on_hangup);
}

static bool watch_active(const hs_req *rq) {
  return rq->watch != NULL &&
         uv_is_active((const uv_handle_t *)&rq->watch->poll);
}

/* Watch what has been suspended for WATCH_AFTER_MS; stop when nothing is
 * suspended any more. */
static void on_wtimer(uv_timer_t *t) {
  acp_http_server *srv = t->data;
  uint64_t now = uv_now(srv->loop);
  bool any = false;
  hs_session *s;
  hs_stream *st;
  for (s = srv->sessions; s != NULL; s = s->next)
    for (st = s->streams; st != NULL; st = st->next) {
      hs_req *rq = st->rq != NULL && st->rq->suspended ? st->rq : NULL;
      hs_req *wq =
          st->waiting != NULL && !st->waiting->woken ? st->waiting : NULL;
      int k;
      for (k = 0; k < 2; k++) {
        hs_req *q = k == 0 ? rq : wq;
        if (q == NULL)
          continue;
        any = true;
        if (!watch_active(q) && now - q->susp_at >= WATCH_AFTER_MS)
          watch_start(q);
      }
    }
  if (!any)
    uv_timer_stop(t);
}

static void suspended_note(hs_req *rq) {
  acp_http_server *srv = rq->srv;
  rq->susp_at = uv_now(srv->loop);
  if (!srv->closing && !uv_is_active((uv_handle_t *)&srv->wtimer))
    uv_timer_start(&srv->wtimer, on_wtimer, WATCH_AFTER_MS, WATCH_AFTER_MS);
}

/* Resume a waiting relay POST (once): MHD calls its handler again. */
static void waiting_wake(hs_req *rq) {
  if (rq->woken)
    return;
  rq->woken = true;
  watch_stop(rq);
  MHD_resume_connection(rq->mc);
  rq->srv->need_run = true;
}

static void stream_free(hs_stream *st) {
  hs_session *s = st->sess;
  const acp_mem *m = &s->srv->mem;
  hs_stream **pp;
  size_t i;
  if (st->rq)
    req_detach(st->rq);
  if (st->waiting) {
    /* Its handler runs again and answers without the stream. */
    st->waiting->wst = NULL;
    waiting_wake(st->waiting);
    st->waiting = NULL;
  }
  for (pp = &s->streams; *pp; pp = &(*pp)->next)
    if (*pp == st) {
      *pp = st->next;
      break;
    }
  for (i = 0; i < s->nomap;) {
    if (s->omap[i].st == st) {
      acp__free(m, s->omap[i].id);
      s->omap[i] = s->omap[--s->nomap];
    } else
      i++;
  }
  if (s->get == st)
    s->get = NULL;
  if (s->ctx == st)
    s->ctx = NULL;
  acp__buf_dispose(&st->log);
  acp__buf_dispose(&st->pre);
  acp__free(m, st->ev);
  while (st->nids > 0)
    stream_drop_id(st, st->nids - 1);
  acp__free(m, st->ids);
  for (size_t k = 0; k < st->ntokens; k++) {
    hs_idslot *e = idx_slot_of(st->sess, st, k, true);
    if (e != NULL)
      idx_remove(st->sess, e);
  }
  strv_free(m, st->tokens, st->ntokens);
  acp__free(m, st);
}

static void wake(hs_stream *st) {
  hs_req *rq = st->rq;
  if (rq && rq->suspended) {
    rq->suspended = false;
    watch_stop(rq);
    MHD_resume_connection(rq->mc);
    st->sess->srv->need_run = true;
  }
}

/* Append one SSE event ("id" and "event" optional). */
static int stream_event(hs_stream *st, const char *event, const char *data,
                        size_t len, bool with_id, bool retry) {
  acp_http_server *srv = st->sess->srv;
  char head[96];
  int n, rv = 0;
  if (with_id) {
    if (st->nev == st->capev) {
      size_t nc = st->capev ? st->capev * 2 : 8;
      hs_event *ne = acp__realloc(&srv->mem, st->ev, nc * sizeof(*ne));
      if (ne == NULL)
        return ACP_ERR_NOMEM;
      st->ev = ne;
      st->capev = nc;
    }
    st->ev[st->nev].seq = st->seq;
    st->ev[st->nev].off = st->base + st->log.len;
    st->nev++;
    n = snprintf(head, sizeof(head), "id: %llu-%llu\n",
                 (unsigned long long)st->no, (unsigned long long)st->seq);
    st->seq++;
    rv = acp__buf_append(&st->log, head, (size_t)n);
  }
  if (rv == 0 && retry) {
    n = snprintf(head, sizeof(head), "retry: %u\n", srv->o->retry_ms);
    rv = acp__buf_append(&st->log, head, (size_t)n);
  }
  if (rv == 0 && event) {
    rv = acp__buf_append(&st->log, "event: ", 7);
    if (rv == 0)
      rv = acp__buf_append(&st->log, event, strlen(event));
    if (rv == 0)
      rv = acp__buf_putc(&st->log, '\n');
  }
  if (rv == 0)
    rv = acp__buf_append(&st->log, "data: ", 6);
  if (rv == 0)
    rv = acp__buf_append(&st->log, data, len);
  if (rv == 0)
    rv = acp__buf_append(&st->log, "\n\n", 2);
  wake(st);
  return rv;
}

static int stream_message(hs_stream *st, const char *msg, size_t len) {
  if (st->deciding) {
    int rv = acp__buf_append(&st->pre, msg, len);
    if (rv == 0)
      rv = acp__buf_putc(&st->pre, '\n');
    st->npre++;
    return rv;
  }
  if (st->sess->legacy)
    return stream_event(st, "message", msg, len, false, false);
  /* 2026-07-28 has no resumability: no event ids. */
  return stream_event(st, NULL, msg, len, !st->sess->stateless, false);
}

/* Drop delivered bytes of a long-lived stream. */
static void stream_trim(hs_stream *st) {
  size_t drop, i, j;
  if (!st->is_get || st->delivered <= st->base)
    return;
  drop = (size_t)(st->delivered - st->base);
  if (drop < TRIM_THRESHOLD)
    return;
  acp__buf_consume(&st->log, drop);
  st->base += drop;
  for (i = 0, j = 0; i < st->nev; i++)
    if (st->ev[i].off >= st->base)
      st->ev[j++] = st->ev[i];
  st->nev = j;
}

/* Remove finished, delivered POST streams beyond the kept count. */
static void session_gc(hs_session *s) {
  hs_stream *st, *oldest;
  size_t kept;
  for (;;) {
    kept = 0;
    oldest = NULL;
    for (st = s->streams; st; st = st->next) {
      if (st->is_get || !st->finished || st->rq || st->deciding)
        continue;
      kept++;
      if (oldest == NULL || st->no < oldest->no)
        oldest = st;
    }
    if (kept <= MAX_KEPT_STREAMS || oldest == NULL)
      return;
    stream_free(oldest);
  }
}

/* MARK: - Sessions */

static void session_end(hs_session *s);

static hs_session *session_find(acp_http_server *srv, const char *id) {
  hs_session *s;
  if (id == NULL)
    return NULL;
  for (s = srv->sessions; s; s = s->next)
    if (!s->ended && strcmp(s->id, id) == 0)
      return s;
  return NULL;
}

static void session_close(hs_session *s);

/* The session idle for longest: one with nothing in progress (no stream
 * connected, no request of the client's or of the conn's unanswered, not
 * inside a relay callback, not a one-request 2026 session). NULL when
 * every session is busy. */
static hs_session *session_idlest(acp_http_server *srv) {
  hs_session *best = NULL;
  for (hs_session *s = srv->sessions; s; s = s->next) {
    bool busy = s->ended || s->stateless || s->busy || s->end_pending ||
                s->notified || s->nomap > 0 ||
                (s->conn != NULL &&
                 acp_rpc_session_incoming(acp_mcp_conn_session(s->conn)) > 0);
    for (hs_stream *st = s->streams; st && !busy; st = st->next)
      busy = st->rq != NULL || st->nids > 0 || st->waiting != NULL;
    if (!busy && (best == NULL || s->used_ms < best->used_ms))
      best = s;
  }
  return best;
}

static int session_new(acp_http_server *srv, bool legacy, hs_session **out) {
  hs_session *s;
  int rv;
  *out = NULL;
  if (srv->nsessions >= srv->o->max_sessions) {
    /* Clients that go away without a DELETE leave their sessions: at the
     * cap, the one idle for longest makes room (its client, if it comes
     * back, gets 404 and initializes again, as MCP allows a server to end
     * a session at any time). Only when all are busy is a new one
     * refused. */
    hs_session *old = session_idlest(srv);
    if (old == NULL)
      return ACP_ERR_LIMIT;
    session_close(old);
  }
  s = acp__calloc(&srv->mem, 1, sizeof(*s));
  if (s == NULL)
    return ACP_ERR_NOMEM;
  s->magic = SESSION_MAGIC;
  s->srv = srv;
  s->legacy = legacy;
  s->idx_seed = acp__fnv1a(ACP__FNV_SEED, &s, sizeof(s)); /* ASLR moves it */
  s->relay = srv->relay;
  if (srv->o->prefix) {
    /* The random part keeps its 128 bits: the prefix is public. */
    size_t pl = strlen(srv->o->prefix);
    memcpy(s->id, srv->o->prefix, pl);
    s->id[pl] = '-';
    rv = acp__http_random_hex(s->id + pl + 1, 16);
  } else
    rv = acp__http_random_hex(s->id, 16);
  if (rv == 0 && !srv->relay)
    rv = acp_mcp_conn_new(&s->conn, srv->reg, s);
  if (rv == 0) {
    s->get = stream_new(s, true);
    if (s->get == NULL)
      rv = ACP_ERR_NOMEM;
  }
  if (rv != 0) {
    if (s->get)
      stream_free(s->get);
    acp_mcp_conn_free(s->conn);
    acp__free(&srv->mem, s);
    return rv;
  }
  s->used_ms = uv_now(srv->loop);
  s->next = srv->sessions;
  srv->sessions = s;
  srv->nsessions++;
  *out = s;
  return 0;
}

/* End a session now: free its conn and streams (their requests end).
 * Also frees a relay zombie (already ended, see session_reap()). */
static void session_end(hs_session *s) {
  acp_http_server *srv = s->srv;
  hs_session **pp;
  size_t i;
  if (!s->ended) {
    s->ended = true;
    srv->nsessions--;
  }
  for (pp = &srv->sessions; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  while (s->streams)
    stream_free(s->streams);
  acp_mcp_conn_free(s->conn);
  for (i = 0; i < s->nomap; i++)
    acp__free(&srv->mem, s->omap[i].id);
  acp__free(&srv->mem, s->omap);
  acp__free(&srv->mem, s->idx);
  acp__free(&srv->mem, s->auth);
  acp__free(&srv->mem, s->sub);
  acp__free(&srv->mem, s->init_id);
  s->magic = 0;
  acp__free(&srv->mem, s);
}

/* End a session from the HTTP side: a live relay session's `closed` runs
 * first (not after acp_http_relay_session_end()). */
static void session_close(hs_session *s) {
  acp_http_server *srv = s->srv;
  if (s->relay && !s->ended && !s->notified && !s->end_pending) {
    s->notified = true;
    if (srv->rcb.closed)
      srv->rcb.closed(s, srv->rud);
  }
  session_end(s);
}

/* An ended relay session lingers while streams are connected: they are
 * finished (they end after what they hold); the rest is freed, and the
 * session too once no stream is left. */
static void session_reap(hs_session *s) {
  hs_stream *st, *next;
  for (st = s->streams; st; st = next) {
    next = st->next;
    if (st->rq) {
      st->finished = true;
      wake(st);
    } else
      stream_free(st);
  }
  if (s->streams == NULL)
    session_end(s);
}

static void session_soft_end(hs_session *s) {
  if (!s->ended) {
    s->ended = true;
    s->srv->nsessions--;
  }
  session_reap(s);
}

/* After a request that ran relay callbacks: apply a deferred end. */
static void relay_settle(hs_session *s) {
  if (s->end_pending && !s->ended) {
    s->end_pending = false;
    session_soft_end(s);
  }
}

static bool usable(hs_stream *st) {
  return st && !st->finished;
}

/* A response for `id`: the stream waiting for it (removing it). */
static hs_stream *take_response(hs_session *s, const acp_json_val *idv) {
  size_t n;
  const char *id = acp_json_raw(idv, &n);
  hs_idslot *e;
  hs_stream *st;
  if (id == NULL || (e = idx_find(s, id, n, false, false)) == NULL)
    return NULL;
  st = e->st;
  stream_drop_id(st, e->k);
  return st;
}

static void stream_maybe_finish(hs_stream *st) {
  if (!st->is_get && st->nids == 0) {
    st->finished = true;
    wake(st);
  }
}

/* The close_stream marker for stream {"stream": N}: end its current HTTP
 * response after what was routed to it so far. */
static void apply_cut(hs_session *s, const acp_json_val *params) {
  int64_t no;
  hs_stream *st;
  if (acp_json_get_int64(acp_json_obj_getz(params, "stream"), &no) != 0)
    return;
  for (st = s->streams; st; st = st->next)
    if (st->no == (uint64_t)no)
      break;
  if (st == NULL || st->is_get)
    return;
  if (st->deciding) {
    if (!st->cut_in_pre) {
      st->cut_in_pre = true;
      st->cut_npre = st->npre;
    }
  } else if (st->rq != NULL && !st->cut_set) {
    st->cut_set = true;
    st->cut = st->base + st->log.len;
    wake(st);
  }
}

/* Whether a protocolVersion string is 2025-11-25 or later. Revisions are
 * dates, so a later one we do not know yet compares as a later string. */
static bool version_primes(const acp_json_val *v) {
  static const char first[] = "2025-11-25";
  size_t n;
  const char *p = acp_json_str_raw(v, &n);
  if (p == NULL || n != sizeof(first) - 1)
    return false;
  return memcmp(p, first, n) >= 0;
}

/* Whether SSE streams of `s` open with the priming event (an id and empty
 * data). It came with 2025-11-25: a client of an earlier revision parses
 * the empty data as a JSON-RPC message, fails, and may drop the server. A
 * relay session whose version is not known yet (its initialize still
 * unanswered) gets none. */
static bool primes(const hs_session *s) {
  if (s->conn != NULL)
    return acp_mcp_conn_version(s->conn) >= ACP_MCP_VERSION_2025_11_25;
  return s->prime;
}

/* A relay session's answer to initialize: note whether batches are on and
 * whether streams are primed. */
static void sniff_init(hs_session *s, const acp_json_val *id,
                       const acp_json_val *root) {
  size_t n;
  const char *raw = acp_json_raw(id, &n);
  const acp_json_val *v;
  if (raw == NULL || strlen(s->init_id) != n || memcmp(s->init_id, raw, n))
    return;
  v = acp_json_obj_getz(acp_json_obj_getz(root, "result"), "protocolVersion");
  s->batch_ok = ACP_JSON_STR_EQ_LIT(v, "2025-03-26") != 0;
  s->prime = version_primes(v);
  acp__free(&s->srv->mem, s->init_id);
  s->init_id = NULL;
}

/* Route one line of a conn's output (or a relayed message), parsed with
 * `doc`. */
static int route(hs_session *s, acp_json_doc *doc, const char *line,
                 size_t len) {
  const acp_json_val *root, *id, *method;
  hs_stream *st = NULL;
  bool response = false;
  int rv;
  if (s->legacy)
    return stream_message(s->get, line, len);
  if (acp_json_doc_parse(doc, line, len, NULL) != 0)
    return stream_message(s->get, line, len);
  root = acp_json_doc_root(doc);
  if (acp_json_type_of(root) == ACP_JSON_ARRAY) {
    const acp_json_val *e;
    for (e = acp_json_child(root); e; e = acp_json_next(e)) {
      hs_stream *t = take_response(s, acp_json_obj_getz(e, "id"));
      if (st == NULL)
        st = t;
    }
    response = true;
  } else {
    id = acp_json_obj_getz(root, "id");
    method = acp_json_obj_getz(root, "method");
    if (method == NULL) {
      if (s->init_id)
        sniff_init(s, id, root);
      st = take_response(s, id);
      response = true;
    } else if (id != NULL) {
      /* A server->client request: the context's stream. */
      st = usable(s->ctx) ? s->ctx : NULL;
      if (st && !st->is_get) {
        if (s->nomap == s->capomap) {
          size_t nc = s->capomap ? s->capomap * 2 : 4;
          hs_omap *nm = acp__realloc(&s->srv->mem, s->omap, nc * sizeof(*nm));
          if (nm == NULL)
            return ACP_ERR_NOMEM;
          s->omap = nm;
          s->capomap = nc;
        }
        s->omap[s->nomap].id = raw_dup(&s->srv->mem, id);
        if (s->omap[s->nomap].id == NULL)
          return ACP_ERR_NOMEM;
        s->omap[s->nomap].st = st;
        s->nomap++;
      }
    } else if (ACP_JSON_STR_EQ_LIT(method, CUT_METHOD)) {
      apply_cut(s, acp_json_obj_getz(root, "params"));
      return 0;
    } else {
      if (ACP_JSON_STR_EQ_LIT(method, "notifications/progress")) {
        const acp_json_val *tok = acp_json_obj_getz(
            acp_json_obj_getz(root, "params"), "progressToken");
        size_t tl;
        const char *t = acp_json_raw(tok, &tl);
        hs_idslot *e = t ? idx_find(s, t, tl, true, false) : NULL;
        if (e != NULL)
          st = e->st;
      }
      if (st == NULL && usable(s->ctx))
        st = s->ctx;
    }
  }
  if (st == NULL) {
    if (response)
      return 0; /* nobody waits for it (stream gone): drop */
    /* A 2026 conn has no GET stream: what it says later (a
     * subscriptions/listen's notifications) goes to its one POST. */
    st = s->stateless ? (usable(s->streams) ? s->streams : NULL) : s->get;
  }
  if (st == NULL)
    return 0;
  if (!response && st->deciding)
    st->pre_other = true;
  rv = stream_message(st, line, len);
  if (response)
    stream_maybe_finish(st);
  if (st->waiting && (st->nids == 0 || st->pre_other))
    waiting_wake(st->waiting);
  return rv;
}

/* Take everything the conn has to send and route it. */
static int session_flush(hs_session *s) {
  acp_ndjson f;
  const char *data;
  acp_ssize n;
  int rv = 0;
  if (s->conn == NULL)
    return 0;
  /* The conn hands out whole lines: the framer never carries a byte. */
  acp_ndjson_init(&f, SIZE_MAX, NULL);
  while ((n = acp_mcp_conn_send(s->conn, &data)) > 0) {
    size_t len = (size_t)n, i = 0;
    while (i < len) {
      const char *line;
      size_t ln, used;
      int r = acp_ndjson_next(&f, data + i, len - i, &used, &line, &ln);
      i += used;
      if (r != ACP_NDJSON_LINE)
        break;
      r = route(s, s->srv->doc, line, ln);
      if (r != 0 && rv == 0)
        rv = r;
    }
  }
  acp_ndjson_dispose(&f);
  if (n < 0 && rv == 0)
    rv = (int)n;
  return rv;
}

/* MARK: - SSE responses */

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  hs_req *rq = cls;
  hs_stream *st = rq->st;
  uint64_t end;
  (void)pos;
  if (rq->gone)
    return MHD_CONTENT_READER_END_WITH_ERROR;
  if (st == NULL)
    return MHD_CONTENT_READER_END_OF_STREAM;
  if (rq->pos < st->base)
    rq->pos = st->base;
  end = st->base + st->log.len;
  if (st->cut_set && st->cut < end)
    end = st->cut;
  if (rq->pos < end) {
    size_t n = (size_t)(end - rq->pos);
    if (n > max)
      n = max;
    memcpy(buf, st->log.data + (rq->pos - st->base), n);
    rq->pos += n;
    if (rq->pos > st->delivered)
      st->delivered = rq->pos;
    stream_trim(st);
    return (ssize_t)n;
  }
  if (st->finished || st->cut_set) {
    st->cut_set = false;
    req_detach(rq);
    return MHD_CONTENT_READER_END_OF_STREAM;
  }
  rq->suspended = true;
  MHD_suspend_connection(rq->mc);
  suspended_note(rq);
  return 0;
}

static void req_detach(hs_req *rq) {
  hs_stream *st = rq->st;
  acp_http_server *srv = rq->srv;
  hs_req **pp;
  if (st == NULL)
    return;
  st->rq = NULL;
  rq->st = NULL;
  st->sess->used_ms = uv_now(srv->loop); /* idle from now, not before */
  for (pp = &srv->reqs; *pp; pp = &(*pp)->next)
    if (*pp == rq) {
      *pp = rq->next;
      break;
    }
  srv->nstreams--;
  if (rq->suspended) {
    rq->suspended = false;
    watch_stop(rq);
    MHD_resume_connection(rq->mc);
    srv->need_run = true;
  }
}

static enum MHD_Result queue_sse(hs_req *rq, hs_stream *st, uint64_t pos,
                                 const char *session_id) {
  struct MHD_Response *r;
  enum MHD_Result ret;
  acp_http_server *srv = rq->srv;
  r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, sse_reader,
                                        rq, NULL);
  if (r == NULL)
    return MHD_NO;
  MHD_add_response_header(r, "Content-Type", "text/event-stream");
  MHD_add_response_header(r, "Cache-Control", "no-cache");
  if (session_id)
    MHD_add_response_header(r, "MCP-Session-Id", session_id);
  if (srv->o->prefix)
    MHD_add_response_header(r, "X-Acp-Worker", srv->o->prefix);
  rq->st = st;
  rq->pos = pos;
  st->rq = rq;
  rq->next = srv->reqs;
  srv->reqs = rq;
  srv->nstreams++;
  ret = MHD_queue_response(rq->mc, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
}

/* MARK: - Request handling */

static const char *hdr(struct MHD_Connection *mc, const char *name) {
  return MHD_lookup_connection_value(mc, MHD_HEADER_KIND, name);
}

static bool accepts(const char *accept, const char *type) {
  if (accept == NULL)
    return true;
  return strstr(accept, type) != NULL || strstr(accept, "*/*") != NULL;
}

static int feed(hs_session *s, acp__buf *body) {
  acp_ssize r;
  int rv;
  /* A raw CR or LF is whitespace in JSON: the body becomes one line. */
  acp__eol_blank(body->data, body->len);
  rv = acp__buf_putc(body, '\n');
  if (rv != 0)
    return rv;
  r = acp_mcp_conn_recv(s->conn, body->data, body->len, now_ms(s->srv));
  if (r < 0 && acp_is_fatal((int)r))
    return (int)r;
  return session_flush(s);
}

/* Hand each message of a POST body (parsed into srv->doc as `root`) to
 * the relay's `message` callback. The callbacks may deliver (parsed with
 * srv->rdoc, so `root` stays valid) or end the session (deferred). */
static void relay_feed(hs_session *s, acp__buf *body,
                       const acp_json_val *root) {
  acp_http_server *srv = s->srv;
  const acp_json_val *e;
  size_t n;
  const char *raw;
  /* A raw CR or LF becomes a space, the body one line: only whitespace
   * between tokens changes, so the parse stays valid. */
  acp__eol_blank(body->data, body->len);
  e = acp_json_type_of(root) == ACP_JSON_ARRAY ? acp_json_child(root) : root;
  for (; e;
       e = acp_json_type_of(root) == ACP_JSON_ARRAY ? acp_json_next(e) : NULL) {
    if (s->end_pending || s->ended)
      break;
    raw = acp_json_raw(e, &n);
    s->busy++;
    srv->rcb.message(s, raw, n, srv->rud);
    s->busy--;
  }
}

typedef struct post_info {
  size_t nreq, nother;
  bool initialize;
  bool batch;
  bool invalid;
  bool dup; /* a request id already waiting for its answer in the session */
} post_info;

/* Keep the raw text of `v` on `st` as an unanswered request id (tok: a
 * progress token), indexed for the session. */
static int stream_note(hs_stream *st, const acp_mem *m, const acp_json_val *v,
                       bool tok) {
  char ***arr = tok ? &st->tokens : &st->ids;
  size_t *n = tok ? &st->ntokens : &st->nids;
  size_t *cap = tok ? &st->captokens : &st->capids;
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 4;
    char **nv = acp__realloc(m, *arr, nc * sizeof(char *));
    if (nv == NULL)
      return ACP_ERR_NOMEM;
    *arr = nv;
    *cap = nc;
  }
  (*arr)[*n] = raw_dup(m, v);
  if ((*arr)[*n] == NULL)
    return ACP_ERR_NOMEM;
  if (idx_add(st->sess, st, *n, tok) != 0) {
    acp__free(m, (*arr)[*n]);
    return ACP_ERR_NOMEM;
  }
  (*n)++;
  return 0;
}

static int collect(hs_stream *st, const acp_mem *m, const acp_json_val *msg,
                   post_info *pi) {
  const acp_json_val *method = acp_json_obj_getz(msg, "method");
  const acp_json_val *id = acp_json_obj_getz(msg, "id");
  if (acp_json_type_of(msg) != ACP_JSON_OBJECT) {
    pi->invalid = true;
    return 0;
  }
  if (method && ACP_JSON_STR_EQ_LIT(method, "initialize"))
    pi->initialize = true;
  if (method && id) {
    acp_json_type t = acp_json_type_of(id);
    /* JSON-RPC ids are strings, numbers or null. The conn answers another
     * one with id null, which matches no request of the stream: the POST
     * would wait for ever (and its stream stay with the session). */
    if (t != ACP_JSON_STRING && t != ACP_JSON_NUMBER && t != ACP_JSON_NULL) {
      pi->invalid = true;
      return 0;
    }
    pi->nreq++;
    if (st) {
      const acp_json_val *tok = acp_json_obj_getz(
          acp_json_obj_getz(acp_json_obj_getz(msg, "params"), "_meta"),
          "progressToken");
      size_t n;
      const char *raw = acp_json_raw(id, &n);
      int rv;
      /* An id (or token) already waiting in the session: its answer
       * could not say which request it is for, and the index would pile
       * such keys into one run that every later one walks (a batch of
       * 40,000 requests with one id took seconds). The request is
       * refused; a repeated token is left to the first request. */
      if (idx_find(st->sess, raw, n, false, true) != NULL) {
        pi->dup = true;
        return 0;
      }
      rv = stream_note(st, m, id, false);
      raw = tok ? acp_json_raw(tok, &n) : NULL;
      if (rv == 0 && raw != NULL &&
          idx_find(st->sess, raw, n, true, true) == NULL)
        rv = stream_note(st, m, tok, true);
      if (rv != 0)
        return rv;
    }
  } else
    pi->nother++;
  return 0;
}

static int scan(hs_stream *st, const acp_mem *m, const acp_json_val *root,
                post_info *pi) {
  int rv = 0;
  memset(pi, 0, sizeof(*pi));
  if (acp_json_type_of(root) == ACP_JSON_ARRAY) {
    const acp_json_val *e;
    pi->batch = true;
    if (acp_json_child(root) == NULL)
      pi->invalid = true;
    for (e = acp_json_child(root); e && rv == 0; e = acp_json_next(e))
      rv = collect(st, m, e, pi);
  } else
    rv = collect(st, m, root, pi);
  return rv;
}

/* The stream a response posted by the client relates to (its request's). */
static hs_stream *response_context(hs_session *s, const acp_json_val *root) {
  const acp_json_val *id;
  size_t n, i;
  const char *raw;
  if (acp_json_type_of(root) == ACP_JSON_ARRAY)
    root = acp_json_child(root);
  if (acp_json_obj_getz(root, "method") != NULL)
    return NULL;
  id = acp_json_obj_getz(root, "id");
  raw = acp_json_raw(id, &n);
  for (i = 0; raw && i < s->nomap; i++)
    if (strlen(s->omap[i].id) == n && memcmp(s->omap[i].id, raw, n) == 0) {
      hs_stream *st = s->omap[i].st;
      acp__free(&s->srv->mem, s->omap[i].id);
      s->omap[i] = s->omap[--s->nomap];
      return usable(st) ? st : NULL;
    }
  return NULL;
}

/* Keep what a new relay session needs, then ask `open`. 0 accepted,
 * ACP_ERR_NOMEM, or ACP_ERR_CALLBACK_FAILURE (refused). */
static int relay_open(hs_session *s, const char *auth,
                      const acp_json_val *root) {
  acp_http_server *srv = s->srv;
  int rv = 0;
  if (auth) {
    s->auth = acp__strdup(&srv->mem, auth);
    if (s->auth == NULL)
      return ACP_ERR_NOMEM;
    s->auth_len = strlen(auth);
  }
  s->init_id = raw_dup(&srv->mem, acp_json_obj_getz(root, "id"));
  if (s->init_id == NULL)
    return ACP_ERR_NOMEM;
  if (srv->rcb.open) {
    s->busy++;
    rv = srv->rcb.open(s, auth, srv->rud);
    s->busy--;
  }
  return rv == 0 ? 0 : ACP_ERR_CALLBACK_FAILURE;
}

static bool version_ok(struct MHD_Connection *mc) {
  const char *v = hdr(mc, "MCP-Protocol-Version");
  if (v == NULL)
    return true;
  return acp_mcp_version_parse(v, strlen(v)) != ACP_MCP_VERSION_UNKNOWN;
}

/* MARK: - Authorization (acp_http_auth) */

#define PRM_WELL_KNOWN "/.well-known/oauth-protected-resource"

static bool same_subject(const char *a, const char *b) {
  if (a == NULL || b == NULL)
    return a == NULL && b == NULL;
  return strcmp(a, b) == 0;
}

/* 401 or 403 with `WWW-Authenticate: Bearer resource_metadata=...` (RFC
 * 9728 5.1, RFC 6750 3). `error`, `desc` and `scope` may be NULL or "";
 * they hold no quote or backslash (static reasons, checked scope
 * tokens). */
static enum MHD_Result reply_challenge(hs_req *rq, unsigned status,
                                       const char *error, const char *desc,
                                       const char *scope) {
  acp_http_server *srv = rq->srv;
  acp__buf h;
  enum MHD_Result ret;
  const char *body =
      status == MHD_HTTP_FORBIDDEN
          ? "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32000,\"message\":"
            "\"Forbidden: insufficient scope\"},\"id\":null}"
          : "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32000,\"message\":"
            "\"Unauthorized\"},\"id\":null}";
  int rv;
  acp__buf_init(&h, &srv->mem, 0);
  rv = acp__buf_append(&h, "Bearer resource_metadata=\"", 26);
  if (rv == 0)
    rv = acp__buf_append(&h, srv->prm_url, strlen(srv->prm_url));
  if (rv == 0)
    rv = acp__buf_putc(&h, '"');
  if (rv == 0 && scope != NULL && *scope) {
    rv = acp__buf_append(&h, ", scope=\"", 9);
    if (rv == 0)
      rv = acp__buf_append(&h, scope, strlen(scope));
    if (rv == 0)
      rv = acp__buf_putc(&h, '"');
  }
  if (rv == 0 && error != NULL) {
    rv = acp__buf_append(&h, ", error=\"", 9);
    if (rv == 0)
      rv = acp__buf_append(&h, error, strlen(error));
    if (rv == 0)
      rv = acp__buf_putc(&h, '"');
  }
  if (rv == 0 && desc != NULL) {
    rv = acp__buf_append(&h, ", error_description=\"", 21);
    if (rv == 0)
      rv = acp__buf_append(&h, desc, strlen(desc));
    if (rv == 0)
      rv = acp__buf_putc(&h, '"');
  }
  if (rv == 0)
    rv = acp__buf_putc(&h, '\0');
  if (rv != 0) {
    acp__buf_dispose(&h);
    return reply_error(rq->mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  }
  ret = reply_hdr(rq->mc, status, "application/json", body, strlen(body), NULL,
                  "WWW-Authenticate", h.data);
  acp__buf_dispose(&h);
  return ret;
}

static void authq_remove(hs_req *rq) {
  hs_req **pp;
  for (pp = &rq->srv->authq; *pp; pp = &(*pp)->auth_next)
    if (*pp == rq) {
      *pp = rq->auth_next;
      break;
    }
  rq->auth_next = NULL;
  rq->auth_waiting = false;
}

/* The fetch a suspended request waited for has ended: its handler runs
 * again and checks the token with what the fetch brought. */
static void auth_done(acp__auth_wait *w) {
  hs_req *rq = (hs_req *)((char *)w - offsetof(hs_req, aw));
  authq_remove(rq);
  rq->auth_woken = true;
  if (rq->auth_suspended) {
    rq->auth_suspended = false;
    MHD_resume_connection(rq->mc);
    rq->srv->need_run = true;
  }
}

/* The bearer token of a request to the MCP endpoint, checked (see
 * acp_http_auth in acp/http.h): 1 when it may go on, 0 when an answer was
 * queued (*ret), -1 when the request is suspended until a fetch the check
 * needs has ended (auth_done). */
static int authorize(hs_req *rq, enum MHD_Result *ret) {
  acp_http_server *srv = rq->srv;
  acp_http_auth *auth = srv->o->auth;
  const char *h = hdr(rq->mc, "Authorization");
  const char *base = acp__http_auth_scopes(auth);
  const char *why = NULL;
  size_t n;
  int rv;
  if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) {
    *ret = reply_challenge(rq, MHD_HTTP_UNAUTHORIZED, NULL, NULL, base);
    return 0;
  }
  h += 7;
  while (*h == ' ')
    h++;
  n = strlen(h);
  while (n > 0 && h[n - 1] == ' ')
    n--;
  rq->aw.done = auth_done;
  rv = acp__http_auth_check_on(auth, &srv->mem, srv->resource, h, n,
                               &rq->claims, &why, srv->loop, &rq->aw);
  if (rv == ACP_ERR_AGAIN) {
    /* Other connections are served meanwhile. A client that leaves while
     * suspended is noticed when the fetch ends (at most its timeout). */
    rq->auth_waiting = true;
    rq->auth_next = srv->authq;
    srv->authq = rq;
    return -1;
  }
  if (rv == ACP_ERR_NOMEM) {
    *ret = reply_error(rq->mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
    return 0;
  }
  if (rv == ACP_ERR_SYSTEM) {
    *ret = reply_error(rq->mc, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                       "Service Unavailable: the authorization server's "
                       "keys cannot be fetched");
    return 0;
  }
  if (rv != 0) {
    *ret = reply_challenge(rq, MHD_HTTP_UNAUTHORIZED, "invalid_token",
                           why ? why : "invalid token", base);
    return 0;
  }
  rq->authed = true;
  if (!acp__scope_covers(rq->claims.scope, base)) {
    *ret = reply_challenge(rq, MHD_HTTP_FORBIDDEN, "insufficient_scope", NULL,
                           base);
    return 0;
  }
  return 1;
}

/* The scopes a POST's tools/call messages need beyond the token's:
 * NULL when the token covers them all (or no tool has required scopes),
 * else (in *need, allocated) every scope those calls need. */
static int tool_scopes_missing(hs_req *rq, const acp_json_val *root,
                               char **need) {
  acp_http_server *srv = rq->srv;
  acp_http_auth *auth = srv->o->auth;
  const acp_json_val *e;
  bool arr = acp_json_type_of(root) == ACP_JSON_ARRAY;
  bool short_ = false;
  acp__buf b;
  int rv = 0;
  *need = NULL;
  acp__buf_init(&b, &srv->mem, 0);
  rv = acp__buf_append(&b, acp__http_auth_scopes(auth),
                       strlen(acp__http_auth_scopes(auth)));
  for (e = arr ? acp_json_child(root) : root; e != NULL && rv == 0;
       e = arr ? acp_json_next(e) : NULL) {
    const acp_json_val *name;
    const char *nm, *ts;
    size_t nl;
    if (!ACP_JSON_STR_EQ_LIT(acp_json_obj_getz(e, "method"), "tools/call"))
      continue;
    name = acp_json_obj_getz(acp_json_obj_getz(e, "params"), "name");
    if (acp_json_type_of(name) != ACP_JSON_STRING ||
        acp_json_doc_str(srv->doc, name, &nm, &nl) != 0)
      continue; /* the conn answers it -32602 */
    ts = acp__http_auth_tool_scopes(auth, nm, nl);
    if (ts == NULL)
      continue;
    if (!acp__scope_covers(rq->claims.scope, ts))
      short_ = true;
    if (b.len > 0)
      rv = acp__buf_putc(&b, ' ');
    if (rv == 0)
      rv = acp__buf_append(&b, ts, strlen(ts));
  }
  if (rv == 0 && short_ && (rv = acp__buf_putc(&b, '\0')) == 0) {
    *need = b.data;
    return 0;
  }
  acp__buf_dispose(&b);
  return rv;
}

/* The resource URL and the metadata of a server with authorization. */
static int auth_setup(acp_http_server *srv) {
  acp_http_auth *auth = srv->o->auth;
  const char *r = acp__http_auth_resource(auth);
  char *origin;
  size_t n;
  if (r != NULL)
    srv->resource = acp__strdup(&srv->mem, r);
  else {
    bool v6 = strchr(srv->o->addr, ':') != NULL;
    n = strlen(srv->o->addr) + strlen(srv->o->path) + 32;
    srv->resource = acp__malloc(&srv->mem, n);
    if (srv->resource != NULL)
      snprintf(srv->resource, n, "http://%s%s%s:%u%s", v6 ? "[" : "",
               srv->o->addr, v6 ? "]" : "", (unsigned)srv->port, srv->o->path);
  }
  if (srv->resource == NULL)
    return ACP_ERR_NOMEM;
  n = sizeof(PRM_WELL_KNOWN) + strlen(srv->o->path);
  if ((srv->prm_path = acp__malloc(&srv->mem, n)) == NULL)
    return ACP_ERR_NOMEM;
  snprintf(srv->prm_path, n, "%s%s", PRM_WELL_KNOWN, srv->o->path);
  origin = acp__oauth_origin(srv->resource);
  if (origin == NULL)
    return ACP_ERR_NOMEM;
  n = strlen(origin) + strlen(srv->prm_path) + 1;
  srv->prm_url = acp__malloc(&srv->mem, n);
  if (srv->prm_url != NULL)
    snprintf(srv->prm_url, n, "%s%s", origin, srv->prm_path);
  free(origin);
  if (srv->prm_url == NULL)
    return ACP_ERR_NOMEM;
  /* A resource_metadata value goes into a quoted header parameter. */
  if (strpbrk(srv->prm_url, "\"\\\r\n") != NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  srv->prm = acp__http_auth_prm(auth, &srv->mem, srv->resource, &srv->prm_len);
  return srv->prm == NULL ? ACP_ERR_NOMEM : 0;
}

static void auth_dispose(acp_http_server *srv, const acp_mem *m) {
  acp__free(m, srv->resource);
  acp__free(m, srv->prm_path);
  acp__free(m, srv->prm_url);
  acp__free(m, srv->prm);
}

/* The Streamable session a request names, checked: the id is present
 * (400) and live (404), the Authorization matches a relay session's (401),
 * MCP-Protocol-Version is one we know (400). NULL when an error answer
 * was queued; *ret is then what to return. */
static hs_session *request_session(hs_req *rq, enum MHD_Result *ret) {
  struct MHD_Connection *mc = rq->mc;
  const char *sid = hdr(mc, "MCP-Session-Id");
  hs_session *s;
  if (sid == NULL) {
    *ret = reply_error(mc, MHD_HTTP_BAD_REQUEST, -32000,
                       "Bad Request: Mcp-Session-Id header is required");
    return NULL;
  }
  s = session_find(rq->srv, sid);
  if (s == NULL || s->legacy) {
    *ret = reply_error(mc, MHD_HTTP_NOT_FOUND, -32001, "Session not found");
    return NULL;
  }
  if (!auth_ok(s, hdr(mc, "Authorization"))) {
    *ret = reply_unauthorized(mc);
    return NULL;
  }
  if (rq->srv->o->auth != NULL && !same_subject(s->sub, rq->claims.sub)) {
    *ret = reply_error(mc, MHD_HTTP_FORBIDDEN, -32000,
                       "Forbidden: the session belongs to another subject");
    return NULL;
  }
  if (!version_ok(mc)) {
    *ret = reply_error(mc, MHD_HTTP_BAD_REQUEST, -32000,
                       "Bad Request: Unsupported protocol version");
    return NULL;
  }
  s->used_ms = uv_now(rq->srv->loop);
  return s;
}

/* The HTTP status of a 2026-07-28 JSON answer: 404 for Method not found,
 * 400 for the errors the transport binds to Bad Request (Invalid params,
 * HeaderMismatch, MissingRequiredClientCapability, UnsupportedProtocol-
 * Version), else 200. */
static unsigned stateless_status(acp_http_server *srv, const char *body,
                                 size_t len) {
  const acp_json_val *code;
  int64_t c = 0;
  if (acp_json_doc_parse(srv->doc, body, len, NULL) != 0)
    return MHD_HTTP_OK;
  code = acp_json_obj_getz(
      acp_json_obj_getz(acp_json_doc_root(srv->doc), "error"), "code");
  if (code == NULL || acp_json_get_int64(code, &c) != 0)
    return MHD_HTTP_OK;
  if (c == ACP_RPC_METHOD_NOT_FOUND)
    return MHD_HTTP_NOT_FOUND;
  if (c == ACP_RPC_INVALID_PARAMS || c == ACP_MCP_HEADER_MISMATCH ||
      c == ACP_MCP_MISSING_REQUIRED_CLIENT_CAPABILITY ||
      c == ACP_MCP_UNSUPPORTED_PROTOCOL_VERSION)
    return MHD_HTTP_BAD_REQUEST;
  return MHD_HTTP_OK;
}

/* Answer a POST whose stream `st` holds every response (in st->pre) and
 * nothing else: one application/json body (an array for a batch). Frees
 * st. */
static enum MHD_Result answer_json(hs_req *rq, hs_stream *st, bool created) {
  hs_session *s = st->sess;
  acp_http_server *srv = s->srv;
  enum MHD_Result ret;
  const char *body = st->pre.data;
  size_t len = st->pre.len;
  int rv = 0;
  acp__buf_clear(&srv->tmp);
  if (st->npre > 1) {
    /* Several responses to a batch: join as one array. */
    size_t i;
    rv = acp__buf_putc(&srv->tmp, '[');
    for (i = 0; rv == 0 && i < len; i++)
      rv = acp__buf_putc(&srv->tmp,
                         body[i] == '\n' ? (i + 1 < len ? ',' : ']') : body[i]);
    body = srv->tmp.data;
    len = srv->tmp.len;
  } else if (len > 0)
    len--; /* the trailing '\n' */
  if (rv != 0) {
    stream_free(st);
    return reply_error(rq->mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  }
  ret = reply_hdr(
      rq->mc, s->stateless ? stateless_status(srv, body, len) : MHD_HTTP_OK,
      "application/json", len ? body : "", len, created ? s->id : NULL,
      srv->o->prefix ? "X-Acp-Worker" : NULL, srv->o->prefix);
  stream_free(st);
  if (s->stateless)
    session_end(s);
  else if (created && s->conn != NULL &&
           acp_mcp_conn_version(s->conn) == ACP_MCP_VERSION_UNKNOWN)
    session_end(s); /* initialize failed: no session */
  else if (s->relay)
    relay_settle(s);
  return ret;
}

/* Answer a POST as an SSE stream: the priming event, what was routed to
 * `st` while deciding, then live. */
static enum MHD_Result answer_sse(hs_req *rq, hs_stream *st, bool created) {
  hs_session *s = st->sess;
  acp_http_server *srv = s->srv;
  int rv;
  if (srv->nstreams >= srv->o->max_streams) {
    stream_free(st);
    if (created && s->relay)
      session_close(s);
    return reply_error(rq->mc, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                       "Too many streams");
  }
  rv = primes(s) ? stream_event(st, NULL, "", 0, true, true) : 0;
  {
    size_t i = 0, k = 0;
    for (;;) {
      const char *nl;
      size_t e;
      if (st->cut_in_pre && k == st->cut_npre) {
        /* close_stream was called here: the response ends after what
         * came before; the rest waits for the reconnection. */
        st->cut_in_pre = false;
        st->cut_set = true;
        st->cut = st->base + st->log.len;
      }
      if (rv != 0 || i >= st->pre.len)
        break;
      nl = memchr(st->pre.data + i, '\n', st->pre.len - i);
      e = (size_t)(nl - st->pre.data);
      rv = stream_message(st, st->pre.data + i, e - i);
      i = e + 1;
      k++;
    }
  }
  acp__buf_dispose(&st->pre);
  acp__buf_init(&st->pre, &srv->mem, 0);
  if (rv != 0) {
    stream_free(st);
    if (created && s->relay)
      session_close(s);
    return reply_error(rq->mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  }
  {
    enum MHD_Result ret = queue_sse(rq, st, st->base, created ? s->id : NULL);
    relay_settle(s);
    return ret;
  }
}

/* MARK: - 2026-07-28 requests */

/* A POST without a session that is a 2026-07-28 request: server/discover,
 * a request whose _meta names a protocol version, or one whose
 * MCP-Protocol-Version header says 2026-07-28. */
static bool is_stateless_post(struct MHD_Connection *mc,
                              const acp_json_val *root) {
  const acp_json_val *params = acp_json_obj_getz(root, "params");
  const char *v = hdr(mc, "MCP-Protocol-Version");
  if (ACP_JSON_STR_EQ_LIT(acp_json_obj_getz(root, "method"), "server/discover"))
    return true;
  if (acp_json_obj_getz(acp_json_obj_getz(params, "_meta"),
                        ACP_MCP_META_PROTOCOL_VERSION) != NULL)
    return true;
  return v != NULL && strcmp(v, ACP_MCP_PROTOCOL_2026_07_28) == 0;
}

/* A header value: visible ASCII, space and tab only. */
static bool header_chars_ok(const char *v) {
  for (; *v; v++) {
    unsigned char c = (unsigned char)*v;
    if (c != '\t' && (c < 0x20 || c > 0x7e))
      return false;
  }
  return true;
}

static bool header_value(acp_http_server *srv, const char *v);

/* Whether header value `v` (NULL: absent) carries the string `body`, the
 * `=?base64?...?=` form decoded first. */
static bool header_matches(acp_http_server *srv, const char *v,
                           const acp_json_val *body) {
  return header_value(srv, v) &&
         acp_json_str_eq(body, srv->tmp.data ? srv->tmp.data : "",
                         srv->tmp.len) != 0;
}

/* The HeaderMismatch check of a 2026 POST: the message naming the first
 * required header that is missing or disagrees with the body, or NULL.
 * Body members of the wrong type are left to the MCP server (-32602). */
static const char *param_mismatch(acp_http_server *srv,
                                  struct MHD_Connection *mc,
                                  const acp_json_val *name,
                                  const acp_json_val *args);

static bool contains(const char *p, size_t n, const char *needle) {
  size_t k = strlen(needle), i;
  for (i = 0; i + k <= n; i++)
    if (memcmp(p + i, needle, k) == 0)
      return true;
  return false;
}

static const char *header_mismatch(acp_http_server *srv,
                                   struct MHD_Connection *mc,
                                   const acp_json_val *root) {
  const acp_json_val *method = acp_json_obj_getz(root, "method");
  const acp_json_val *params = acp_json_obj_getz(root, "params");
  const acp_json_val *pv = acp_json_obj_getz(acp_json_obj_getz(params, "_meta"),
                                             ACP_MCP_META_PROTOCOL_VERSION);
  const acp_json_val *name = NULL;
  const char *v = hdr(mc, "MCP-Protocol-Version");
  if (v == NULL)
    return "Header mismatch: MCP-Protocol-Version header is required";
  if (acp_json_type_of(pv) == ACP_JSON_STRING && !header_matches(srv, v, pv))
    return "Header mismatch: MCP-Protocol-Version header does not match "
           "_meta.io.modelcontextprotocol/protocolVersion";
  if (!header_matches(srv, hdr(mc, "Mcp-Method"), method))
    return "Header mismatch: Mcp-Method header is missing or does not "
           "match the method";
  name = acp_mcp_named_param(method, params);
  if (acp_json_type_of(name) == ACP_JSON_STRING &&
      !header_matches(srv, hdr(mc, "Mcp-Name"), name))
    return "Header mismatch: Mcp-Name header is missing or does not match "
           "the body";
  if (ACP_JSON_STR_EQ_LIT(method, "tools/call"))
    return param_mismatch(srv, mc, name,
                          acp_json_obj_getz(params, "arguments"));
  return NULL;
}

/* The decoded value of header `v` (OWS trimmed, the base64 form decoded)
 * into srv->tmp; false when it has invalid characters or bad base64. */
static bool header_value(acp_http_server *srv, const char *v) {
  static const char pre[] = "=?base64?";
  size_t n;
  acp__buf_clear(&srv->tmp);
  if (v == NULL || !header_chars_ok(v))
    return false;
  while (*v == ' ' || *v == '\t')
    v++;
  n = strlen(v);
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
    n--;
  if (n >= sizeof(pre) + 1 && memcmp(v, pre, sizeof(pre) - 1) == 0 &&
      v[n - 2] == '?' && v[n - 1] == '=')
    return acp__b64_decode(&srv->tmp, v + sizeof(pre) - 1, n - sizeof(pre) - 1,
                           ACP__B64_STD) == 0;
  return acp__buf_append(&srv->tmp, v, n) == 0;
}

/* Whether the decoded header value (srv->tmp) stands for body value `v`:
 * a string exactly, a number numerically, a boolean as true / false. */
static bool param_matches(acp_http_server *srv, const acp_json_val *v) {
  const char *h = srv->tmp.data ? srv->tmp.data : "";
  size_t n = srv->tmp.len;
  switch (acp_json_type_of(v)) {
  case ACP_JSON_STRING:
    return acp_json_str_eq(v, h, n) != 0;
  case ACP_JSON_NUMBER: {
    char buf[64];
    char *end;
    double a, b;
    if (n == 0 || n >= sizeof(buf) || acp_json_get_double(v, &b) != 0)
      return false;
    memcpy(buf, h, n);
    buf[n] = '\0';
    a = strtod(buf, &end);
    return *end == '\0' && a == b;
  }
  case ACP_JSON_BOOL: {
    bool b = false;
    acp_json_get_bool(v, &b);
    return b ? n == 4 && memcmp(h, "true", 4) == 0
             : n == 5 && memcmp(h, "false", 5) == 0;
  }
  default: {
    size_t rn;
    const char *raw = acp_json_raw(v, &rn);
    return raw != NULL && rn == n && memcmp(raw, h, n) == 0;
  }
  }
}

/* The Mcp-Param-{Name} headers of a tools/call: each argument whose
 * property the tool's inputSchema marks with "x-mcp-header": Name must
 * come with that header, equal to it; NULL when all do. */
static const char *param_mismatch(acp_http_server *srv,
                                  struct MHD_Connection *mc,
                                  const acp_json_val *name,
                                  const acp_json_val *args) {
  const char *tool, *tn;
  size_t tlen, tnl;
  const acp_json_val *props, *k;
  if (srv->reg == NULL || acp_json_type_of(name) != ACP_JSON_STRING)
    return NULL;
  if (acp_json_doc_str(srv->doc, name, &tn, &tnl) != 0)
    return NULL;
  tool = acp_mcp_server_tool_json(srv->reg, tn, tnl, &tlen);
  /* Most tools have none: do not parse their schema. */
  if (tool == NULL || !contains(tool, tlen, "x-mcp-header"))
    return NULL;
  if (srv->xdoc == NULL && acp_json_doc_new(&srv->xdoc, &srv->mem) != 0)
    return "Header mismatch: out of memory";
  if (acp_json_doc_parse(srv->xdoc, tool, tlen, NULL) != 0)
    return NULL;
  props = acp_json_obj_getz(
      acp_json_obj_getz(acp_json_doc_root(srv->xdoc), "inputSchema"),
      "properties");
  for (k = acp_json_child(props); k; k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *h = acp_json_obj_getz(acp_json_next(k), "x-mcp-header");
    const acp_json_val *v;
    char hname[128];
    const char *hp;
    size_t hn, kn;
    const char *kr = acp_json_str_raw(k, &kn);
    if (acp_json_type_of(h) != ACP_JSON_STRING || acp_json_str_has_escapes(k))
      continue;
    v = acp_json_obj_get(args, kr, kn);
    if (v == NULL || acp_json_type_of(v) == ACP_JSON_NULL)
      continue; /* no value: no header expected */
    hp = acp_json_str_raw(h, &hn);
    if (hp == NULL || hn + 11 > sizeof(hname))
      continue;
    memcpy(hname, "Mcp-Param-", 10);
    memcpy(hname + 10, hp, hn);
    hname[10 + hn] = '\0';
    if (!header_value(srv, hdr(mc, hname)) || !param_matches(srv, v))
      return "Header mismatch: an Mcp-Param header is missing, malformed or "
             "does not match its argument";
  }
  return NULL;
}

/* An error answer that keeps the request's id (2026 clients match it). */
static enum MHD_Result reply_error_id(hs_req *rq, unsigned status, int code,
                                      const char *message,
                                      const acp_json_val *id) {
  acp_http_server *srv = rq->srv;
  size_t n;
  const char *raw = acp_json_raw(id, &n);
  char head[64];
  int hn = snprintf(head, sizeof(head), "{\"jsonrpc\":\"2.0\",\"id\":");
  int rv;
  acp__buf_clear(&srv->tmp);
  rv = acp__buf_append(&srv->tmp, head, (size_t)hn);
  if (rv == 0)
    rv = raw ? acp__buf_append(&srv->tmp, raw, n)
             : acp__buf_append(&srv->tmp, "null", 4);
  if (rv == 0) {
    hn = snprintf(head, sizeof(head), ",\"error\":{\"code\":%d,\"message\":\"",
                  code);
    rv = acp__buf_append(&srv->tmp, head, (size_t)hn);
  }
  if (rv == 0)
    rv = acp__buf_append(&srv->tmp, message, strlen(message));
  if (rv == 0)
    rv = acp__buf_append(&srv->tmp, "\"}}", 3);
  if (rv != 0)
    return reply_error(rq->mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  return reply(rq->mc, status, "application/json", srv->tmp.data, srv->tmp.len,
               NULL);
}

/*
 * One 2026-07-28 request: headers checked against the body, then served by
 * a conn of its own that lives as long as the POST (no MCP-Session-Id, no
 * event ids, nothing to resume). Concurrent requests never share a conn,
 * so clients may reuse JSON-RPC ids freely.
 */
static enum MHD_Result handle_stateless_post(hs_req *rq,
                                             const acp_json_val *root,
                                             const char *accept) {
  acp_http_server *srv = rq->srv;
  struct MHD_Connection *mc = rq->mc;
  const char *why = header_mismatch(srv, mc, root);
  hs_session *s = NULL;
  hs_stream *st;
  post_info pi;
  int rv;
  if (why != NULL)
    return reply_error_id(rq, MHD_HTTP_BAD_REQUEST, ACP_MCP_HEADER_MISMATCH,
                          why, acp_json_obj_getz(root, "id"));
  rv = session_new(srv, false, &s);
  if (rv == ACP_ERR_LIMIT)
    return reply_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                       "Too many sessions");
  if (rv != 0)
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  s->stateless = true;
  s->ended = true; /* never found by id */
  srv->nsessions--;
  st = stream_new(s, false);
  if (st == NULL || scan(st, &srv->mem, root, &pi) != 0) {
    session_end(s);
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  }
  st->deciding = true;
  s->ctx = st;
  rv = feed(s, &rq->body);
  s->ctx = NULL;
  st->deciding = false;
  if (rv != 0 && acp_is_fatal(rv)) {
    session_end(s);
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  }
  if (st->nids == 0 && !st->pre_other && accepts(accept, "application/json"))
    return answer_json(rq, st, false);
  {
    enum MHD_Result ret = answer_sse(rq, st, false);
    hs_stream *x;
    /* answer_sse() frees the stream when it cannot answer: then nothing
     * will end the conn but us. */
    for (x = s->streams; x != NULL; x = x->next)
      if (x->rq == rq)
        break;
    if (x == NULL)
      session_end(s);
    return ret;
  }
}

static enum MHD_Result handle_post(hs_req *rq) {
  acp_http_server *srv = rq->srv;
  struct MHD_Connection *mc = rq->mc;
  const char *sid = hdr(mc, "MCP-Session-Id");
  const char *accept = hdr(mc, "Accept");
  const acp_json_val *root;
  hs_session *s = NULL;
  hs_stream *st = NULL;
  post_info pi;
  bool created = false;
  int rv;

  if (!accepts(accept, "application/json") &&
      !accepts(accept, "text/event-stream"))
    return reply_error(mc, MHD_HTTP_NOT_ACCEPTABLE, -32000,
                       "Not Acceptable: Accept must list application/json "
                       "and text/event-stream");
  if (acp_json_doc_parse(srv->doc, rq->body.data, rq->body.len, NULL) != 0)
    return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32700, "Parse error");
  root = acp_json_doc_root(srv->doc);
  rv = scan(NULL, &srv->mem, root, &pi);
  if (rv != 0)
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  if (pi.invalid || (acp_json_type_of(root) != ACP_JSON_OBJECT && !pi.batch))
    return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32600, "Invalid Request");
  /* A relay answers requests on a stream; check the cap before anything
   * reaches upstream. */
  if (srv->relay && pi.nreq > 0 &&
      srv->nstreams + srv->nwaiting >= srv->o->max_streams)
    return reply_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                       "Too many streams");
  if (srv->o->auth != NULL) {
    /* Per-tool scopes: refused before anything reaches the conn. */
    char *need = NULL;
    enum MHD_Result ret;
    if (tool_scopes_missing(rq, root, &need) != 0)
      return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                         "Internal error");
    if (need != NULL) {
      ret = reply_challenge(rq, MHD_HTTP_FORBIDDEN, "insufficient_scope", NULL,
                            need);
      acp__free(&srv->mem, need);
      return ret;
    }
  }
  if (sid == NULL && !srv->relay && !pi.batch && pi.nreq == 1 &&
      is_stateless_post(mc, root))
    return handle_stateless_post(rq, root, accept);
  if (pi.initialize && sid == NULL) {
    if (pi.batch)
      return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32600,
                         "Invalid Request: initialize must not be batched");
    if (srv->relay && pi.nreq == 0)
      return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32600,
                         "Invalid Request: initialize must be a request");
    rv = session_new(srv, false, &s);
    if (rv == ACP_ERR_LIMIT)
      return reply_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                         "Too many sessions");
    if (rv != 0)
      return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                         "Internal error");
    created = true;
    if (srv->o->auth != NULL && rq->claims.sub != NULL &&
        (s->sub = acp__strdup(&srv->mem, rq->claims.sub)) == NULL) {
      session_end(s);
      return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                         "Internal error");
    }
    if (srv->relay) {
      rv = relay_open(s, hdr(mc, "Authorization"), root);
      if (rv != 0) {
        session_end(s);
        if (rv == ACP_ERR_NOMEM)
          return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                             "Internal error");
        return reply_unauthorized(mc);
      }
    }
  } else {
    enum MHD_Result ret;
    if ((s = request_session(rq, &ret)) == NULL)
      return ret;
    /* Only 2025-03-26 has batches. Refused here, not by the conn: its one
     * error (id null) would answer none of the batch's requests, and the
     * POST would wait for ever. */
    if (pi.batch && !(s->relay ? s->batch_ok
                               : acp_mcp_conn_version(s->conn) ==
                                     ACP_MCP_VERSION_2025_03_26))
      return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32600,
                         "Invalid Request: batches need protocol version "
                         "2025-03-26");
  }

  if (pi.nreq == 0) {
    /* Notifications and responses only: 202. */
    enum MHD_Result ret;
    s->ctx = response_context(s, root);
    rv = 0;
    if (s->relay)
      relay_feed(s, &rq->body, root);
    else
      rv = feed(s, &rq->body);
    s->ctx = NULL;
    if (rv != 0) {
      /* Not taken (a cap, no memory): the client must not think it was.
       * After a fatal error the conn is unusable: end the session. */
      if (acp_is_fatal(rv))
        session_close(s);
      return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                         "Internal error");
    }
    ret = reply(mc, MHD_HTTP_ACCEPTED, NULL, "", 0, NULL);
    relay_settle(s);
    return ret;
  }

  st = stream_new(s, false);
  if (st == NULL)
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  /* The document still holds the body: collect ids and tokens. */
  rv = scan(st, &srv->mem, root, &pi);
  if (rv != 0 || pi.dup) {
    stream_free(st);
    if (created && s->relay)
      session_close(s);
    if (rv == 0)
      return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32600,
                         "Invalid Request: a request id already waits for "
                         "its answer in this session");
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  }
  st->deciding = true;
  s->ctx = st;
  if (s->relay) {
    relay_feed(s, &rq->body, root);
    rv = 0;
  } else
    rv = feed(s, &rq->body);
  s->ctx = NULL;
  if (s->relay && st->nids > 0 && !st->pre_other && !pi.batch &&
      accepts(accept, "application/json")) {
    /* Upstream answers later. Wait for it without answering yet: a sole
     * response becomes one JSON body (one write, one wakeup for the
     * client); anything else first turns it into a stream. */
    st->waiting = rq;
    rq->wst = st;
    rq->waiting = true;
    rq->created = created;
    srv->nwaiting++;
    MHD_suspend_connection(mc);
    suspended_note(rq);
    relay_settle(s);
    return MHD_YES;
  }
  st->deciding = false;
  if (s->relay && st->nids > 0)
    st->force_sse = true;
  if (rv != 0 && acp_is_fatal(rv)) {
    stream_free(st);
    if (created)
      session_end(s);
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  }
  if (st->nids == 0 && !st->pre_other && !st->force_sse &&
      accepts(accept, "application/json"))
    return answer_json(rq, st, created);
  return answer_sse(rq, st, created);
}

/* A waiting relay POST, resumed: answer it now (see hs_stream.waiting). */
static enum MHD_Result answer_waiting(hs_req *rq) {
  hs_stream *st = rq->wst;
  rq->waiting = false;
  rq->woken = false;
  rq->srv->nwaiting--;
  if (rq->gone) {
    /* Nobody is left for its answers: drop the stream, close. */
    if (st != NULL) {
      st->waiting = NULL;
      rq->wst = NULL;
      stream_free(st);
    }
    return MHD_NO;
  }
  if (st == NULL) /* its session ended first */
    return reply_error(rq->mc, MHD_HTTP_NOT_FOUND, -32001, "Session not found");
  st->waiting = NULL;
  rq->wst = NULL;
  st->deciding = false;
  if (st->nids == 0 && !st->pre_other)
    return answer_json(rq, st, rq->created);
  return answer_sse(rq, st, rq->created);
}

static enum MHD_Result handle_get(hs_req *rq) {
  acp_http_server *srv = rq->srv;
  struct MHD_Connection *mc = rq->mc;
  const char *last = hdr(mc, "Last-Event-ID");
  enum MHD_Result ret;
  hs_session *s;
  hs_stream *st;
  uint64_t pos;
  if (!accepts(hdr(mc, "Accept"), "text/event-stream"))
    return reply_error(mc, MHD_HTTP_NOT_ACCEPTABLE, -32000,
                       "Not Acceptable: Accept must list text/event-stream");
  if ((s = request_session(rq, &ret)) == NULL)
    return ret;
  if (srv->nstreams >= srv->o->max_streams)
    return reply_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                       "Too many streams");
  if (last) {
    unsigned long long no, seq;
    char tail;
    size_t i;
    if (sscanf(last, "%llu-%llu%c", &no, &seq, &tail) != 2)
      return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32000,
                         "Bad Request: invalid Last-Event-ID");
    for (st = s->streams; st; st = st->next)
      if (st->no == no)
        break;
    if (st == NULL)
      return reply_error(mc, MHD_HTTP_NOT_FOUND, -32000, "Stream not found");
    if (st->rq)
      return reply_error(mc, MHD_HTTP_CONFLICT, -32000,
                         "Conflict: stream already connected");
    pos = st->base + st->log.len;
    for (i = 0; i < st->nev; i++)
      if (st->ev[i].seq > seq) {
        pos = st->ev[i].off;
        break;
      }
    if (st->nev > 0 && st->ev[0].seq > seq + 1)
      pos = st->base;    /* older events were trimmed: send what is kept */
    st->cut_set = false; /* a cut applied to the previous connection */
    return queue_sse(rq, st, pos, NULL);
  }
  st = s->get;
  if (st == NULL)
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  if (st->rq)
    return reply_error(mc, MHD_HTTP_CONFLICT, -32000,
                       "Conflict: Only one SSE stream is allowed per session");
  if (primes(s) && stream_event(st, NULL, "", 0, true, true) != 0)
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  /* Deliver what was queued while no GET stream was connected (the
   * priming event goes after it, which is harmless). */
  return queue_sse(rq, st, st->delivered > st->base ? st->delivered : st->base,
                   NULL);
}

static enum MHD_Result handle_delete(hs_req *rq) {
  enum MHD_Result ret;
  hs_session *s = request_session(rq, &ret);
  if (s == NULL)
    return ret;
  session_close(s);
  return reply(rq->mc, MHD_HTTP_OK, NULL, "", 0, NULL);
}

static enum MHD_Result handle_legacy_sse(hs_req *rq) {
  acp_http_server *srv = rq->srv;
  struct MHD_Connection *mc = rq->mc;
  hs_session *s;
  char ep[96];
  int rv, n;
  if (!accepts(hdr(mc, "Accept"), "text/event-stream"))
    return reply_error(mc, MHD_HTTP_NOT_ACCEPTABLE, -32000,
                       "Not Acceptable: Accept must list text/event-stream");
  if (srv->nstreams >= srv->o->max_streams)
    return reply_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                       "Too many streams");
  rv = session_new(srv, true, &s);
  if (rv == ACP_ERR_LIMIT)
    return reply_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, -32000,
                       "Too many sessions");
  if (rv != 0)
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  n = snprintf(ep, sizeof(ep), "/message?sessionId=%s", s->id);
  rv = stream_event(s->get, "endpoint", ep, (size_t)n, false, false);
  if (rv != 0) {
    session_end(s);
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  }
  rq->legacy_stream = true;
  rq->legacy_sess = s;
  return queue_sse(rq, s->get, s->get->base, NULL);
}

static enum MHD_Result handle_legacy_post(hs_req *rq) {
  acp_http_server *srv = rq->srv;
  struct MHD_Connection *mc = rq->mc;
  const char *sid =
      MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "sessionId");
  hs_session *s;
  const acp_json_val *root;
  if (sid == NULL)
    return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32000,
                       "Bad Request: sessionId is required");
  s = session_find(srv, sid);
  if (s == NULL || !s->legacy)
    return reply_error(mc, MHD_HTTP_NOT_FOUND, -32001, "Session not found");
  if (acp_json_doc_parse(srv->doc, rq->body.data, rq->body.len, NULL) != 0)
    return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32700, "Parse error");
  root = acp_json_doc_root(srv->doc);
  if (acp_json_type_of(root) != ACP_JSON_OBJECT &&
      acp_json_type_of(root) != ACP_JSON_ARRAY)
    return reply_error(mc, MHD_HTTP_BAD_REQUEST, -32600, "Invalid Request");
  if (feed(s, &rq->body) != 0)
    return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, -32603,
                       "Internal error");
  return reply(mc, MHD_HTTP_ACCEPTED, "text/plain", "Accepted", 8, NULL);
}

static bool json_ctype(const char *ct) {
  size_t n;
  if (ct == NULL)
    return true; /* lenient: many clients omit it */
  n = strcspn(ct, ";");
  while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
    n--;
  return ieq(ct, n, "application/json");
}

/* The early answers that come after the token check, before any body is
 * read: MHD_YES with rq->answered false when the request goes on. */
static enum MHD_Result early_checks(hs_req *rq) {
  struct MHD_Connection *mc = rq->mc;
  const char *cl;
  if (rq->method == M_POST) {
    cl = hdr(mc, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > (unsigned long long)rq->srv->o->max_body)
      return reply_error(mc, MHD_HTTP_CONTENT_TOO_LARGE, -32000,
                         "Payload Too Large");
    if (!json_ctype(hdr(mc, "Content-Type")))
      return reply_error(mc, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, -32000,
                         "Unsupported Media Type: Content-Type must be "
                         "application/json");
  }
  rq->answered = false;
  return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc,
                                 const char *url, const char *method,
                                 const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
  acp_http_server *srv = cls;
  hs_req *rq = *con_cls;
  bool is_mcp, is_sse, is_msg;
  (void)version;
  is_mcp = strcmp(url, srv->o->path) == 0;
  /* The legacy transport is off with authorization (acp/http.h). */
  is_sse = srv->o->legacy && !srv->relay && srv->o->auth == NULL &&
           strcmp(url, "/sse") == 0;
  is_msg = srv->o->legacy && !srv->relay && srv->o->auth == NULL &&
           strcmp(url, "/message") == 0;
  if (rq == NULL) {
    rq = acp__calloc(&srv->mem, 1, sizeof(*rq));
    if (rq == NULL)
      return MHD_NO;
    rq->srv = srv;
    rq->mc = mc;
    acp__buf_init(&rq->body, &srv->mem, srv->o->max_body + 1);
    *con_cls = rq;
    if (strcmp(method, "POST") == 0)
      rq->method = M_POST;
    else if (strcmp(method, "GET") == 0)
      rq->method = M_GET;
    else if (strcmp(method, "DELETE") == 0)
      rq->method = M_DELETE;
    /* Early answers (before any body is read). */
    rq->answered = true;
    if (!acp__http_host_ok(srv->o, hdr(mc, "Host")))
      return reply_error(mc, MHD_HTTP_FORBIDDEN, -32000,
                         "Forbidden: invalid Host header");
    if (!acp__http_origin_ok(srv->o, hdr(mc, "Origin")))
      return reply_error(mc, MHD_HTTP_FORBIDDEN, -32000,
                         "Forbidden: invalid Origin header");
    if (srv->o->auth != NULL &&
        (strcmp(url, srv->prm_path) == 0 || strcmp(url, PRM_WELL_KNOWN) == 0)) {
      if (rq->method == M_GET)
        return reply(mc, MHD_HTTP_OK, "application/json", srv->prm,
                     srv->prm_len, NULL);
      return reply_hdr(mc, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, "", 0, NULL,
                       "Allow", "GET");
    }
    if (!is_mcp && !is_sse && !is_msg)
      return reply_error(mc, MHD_HTTP_NOT_FOUND, -32000, "Not Found");
    if ((is_sse && rq->method != M_GET) || (is_msg && rq->method != M_POST) ||
        (is_mcp && rq->method == M_OTHER)) {
      struct MHD_Response *r =
          MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
      enum MHD_Result ret;
      if (r == NULL)
        return MHD_NO;
      MHD_add_response_header(r, "Allow",
                              is_sse   ? "GET"
                              : is_msg ? "POST"
                                       : "GET, POST, DELETE");
      ret = MHD_queue_response(mc, MHD_HTTP_METHOD_NOT_ALLOWED, r);
      MHD_destroy_response(r);
      return ret;
    }
    if (is_mcp && rq->method != M_OTHER && srv->o->auth != NULL) {
      enum MHD_Result ret;
      /* < 0: a fetch runs; the body is read meanwhile and the request
       * waits for it at the end (rq->auth_waiting). */
      if (authorize(rq, &ret) == 0)
        return ret;
    }
    return early_checks(rq);
  }
  if (rq->waiting)
    return answer_waiting(rq);
  if (rq->answered) {
    *upload_size = 0; /* discard the body of an answered request */
    return MHD_YES;
  }
  if (*upload_size > 0) {
    if (!rq->too_big && acp__buf_append(&rq->body, upload, *upload_size) != 0) {
      rq->too_big = true;
      acp__buf_dispose(&rq->body);
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (rq->auth_waiting) {
    /* The whole request is in; its token still waits for a fetch. MHD
     * calls this handler again once auth_done() resumes it. */
    rq->auth_suspended = true;
    MHD_suspend_connection(mc);
    return MHD_YES;
  }
  rq->answered = true;
  if (rq->auth_woken) {
    /* The fetch the token check waited for has ended: check it again. */
    enum MHD_Result ret;
    rq->auth_woken = false;
    if (authorize(rq, &ret) == 0)
      return ret;
    if (rq->auth_waiting) {
      /* Another fetch (a key set refetch after the first): wait again. */
      rq->answered = false;
      rq->auth_suspended = true;
      MHD_suspend_connection(mc);
      return MHD_YES;
    }
  }
  /* The body buffer holds one byte more than max_body (the newline the
   * conn is fed with), so a body without Content-Length is checked here. */
  if (rq->too_big || rq->body.len > srv->o->max_body)
    return reply_error(mc, MHD_HTTP_CONTENT_TOO_LARGE, -32000,
                       "Payload Too Large");
  if (is_sse)
    return handle_legacy_sse(rq);
  if (is_msg)
    return handle_legacy_post(rq);
  switch (rq->method) {
  case M_POST: {
    enum MHD_Result ret;
    /* acp_http_call_auth() reads the token's claims while handlers run. */
    srv->cur = rq->authed ? &rq->claims : NULL;
    ret = handle_post(rq);
    srv->cur = NULL;
    return ret;
  }
  case M_GET:
    return handle_get(rq);
  default:
    return handle_delete(rq);
  }
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  acp_http_server *srv = cls;
  hs_req *rq = *con_cls;
  hs_stream *st;
  (void)mc;
  (void)toe;
  if (rq == NULL)
    return;
  *con_cls = NULL;
  watch_free(rq);
  if (rq->auth_waiting)
    authq_remove(rq);
  acp__http_auth_unwait(&rq->aw, &srv->mem);
  if (rq->waiting)
    srv->nwaiting--;
  if (rq->wst != NULL) {
    /* Ended while waiting: nobody is left for its answers. */
    hs_stream *w = rq->wst;
    w->waiting = NULL;
    rq->wst = NULL;
    stream_free(w);
  }
  st = rq->st;
  if (st) {
    rq->suspended = false; /* MHD is done with the connection */
    req_detach(rq);
  }
  if (rq->legacy_stream) {
    hs_session *s;
    for (s = srv->sessions; s; s = s->next)
      if (s == rq->legacy_sess) {
        session_end(s);
        break;
      }
  } else if (st && st->sess->stateless) {
    /* The request's conn goes with its POST: a 2026 request whose
     * stream broke is lost (the client re-issues it). */
    session_end(st->sess);
  } else if (st && !st->sess->ended)
    session_gc(st->sess);
  acp__buf_dispose(&rq->body);
  acp__jwt_claims_free(&srv->mem, &rq->claims);
  acp__free(&srv->mem, rq);
}

/* MARK: - Loop integration */

static void arm(acp_http_server *srv);

static void drive(acp_http_server *srv) {
  hs_session *s, *next;
  int i;
  if (srv->d == NULL || srv->in_run)
    return;
  srv->in_run = true;
  for (i = 0; i < 8; i++) {
    for (s = srv->sessions; s; s = next) {
      next = s->next;
      (void)session_flush(s);
    }
    srv->need_run = false;
    MHD_run(srv->d);
    for (s = srv->sessions; s; s = next) {
      next = s->next;
      if (s->ended && !s->stateless)
        session_reap(s); /* a relay zombie whose streams have drained */
      else
        (void)session_flush(s);
    }
    if (!srv->need_run) {
      /* MHD has more to do at once (e.g. the end of a chunked response
       * whose last data it just wrote): do it now rather than on the
       * next turn of the loop, which costs the client a wakeup. */
      MHD_UNSIGNED_LONG_LONG to;
      if (MHD_get_timeout(srv->d, &to) != MHD_YES || to != 0)
        break;
    }
  }
  srv->in_run = false;
  arm(srv);
}

/* An SSE comment on every open 2026 stream: proxies and clients with an
 * idle timeout (nginx's proxy_read_timeout is 60 s) would otherwise cut a
 * quiet subscriptions/listen. A comment is not an event: clients skip it,
 * and 2026 streams have no event ids or replay log to keep it out of. */
static void on_ktimer(uv_timer_t *t) {
  acp_http_server *srv = t->data;
  hs_session *s;
  hs_stream *st;
  static const char ka[] = ": keep-alive\n\n";
  if (srv->closing || srv->draining)
    return;
  for (s = srv->sessions; s != NULL; s = s->next) {
    if (s->stateless) {
      for (st = s->streams; st != NULL; st = st->next)
        if (st->rq != NULL && !st->deciding && !st->finished &&
            acp__buf_append(&st->log, ka, sizeof(ka) - 1) == 0)
          wake(st);
    } else if ((st = s->get) != NULL && st->rq != NULL && !st->finished &&
               acp__buf_append(&st->log, ka, sizeof(ka) - 1) == 0) {
      /* A session's standalone GET stream (2025 Streamable HTTP, legacy
       * /sse) idles as long as a listen. The comment carries no id, so a
       * resumption (Last-Event-ID) still starts at an event; only a
       * connected stream gets it, so nothing piles up for a client that
       * is away; delivered bytes are trimmed as events are. */
      wake(st);
    }
  }
  if (srv->need_run)
    drive(srv);
}

static void on_timer(uv_timer_t *t) {
  acp_http_server *srv = t->data;
  hs_session *s, *next;
  uint64_t now = uv_now(srv->loop);
  for (s = srv->sessions; s; s = next) {
    next = s->next;
    /* After a fatal error (no memory for the timeout errors) the conn is
     * unusable: end the session rather than keep a dead one. */
    if (s->conn && acp_mcp_conn_get_expiry(s->conn) <= now &&
        acp_is_fatal(acp_mcp_conn_handle_expiry(s->conn, now)))
      session_close(s);
  }
  drive(srv);
}

static void arm(acp_http_server *srv) {
  MHD_UNSIGNED_LONG_LONG to;
  uint64_t wait = UINT64_MAX, now = uv_now(srv->loop);
  hs_session *s;
  if (srv->closing)
    return;
  if (srv->d && MHD_get_timeout(srv->d, &to) == MHD_YES)
    wait = to;
  for (s = srv->sessions; s; s = s->next) {
    uint64_t e = s->conn ? acp_mcp_conn_get_expiry(s->conn) : UINT64_MAX;
    if (e != UINT64_MAX) {
      uint64_t w = e > now ? e - now : 0;
      if (w < wait)
        wait = w;
    }
  }
  if (wait == UINT64_MAX)
    uv_timer_stop(&srv->timer);
  else
    uv_timer_start(&srv->timer, on_timer, wait, 0);
}

static void on_poll(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  drive(p->data);
}

static void drain_check(acp_http_server *srv);

static void on_prepare(uv_prepare_t *p) {
  acp_http_server *srv = p->data;
  hs_session *s, *next;
  for (s = srv->sessions; s; s = next) {
    next = s->next;
    (void)session_flush(s);
  }
  if (srv->need_run)
    drive(srv);
  else
    arm(srv);
  drain_check(srv);
}

/* MARK: - Public */

/* Check a caller's listening socket: its family and port. */
static int listen_fd_check(int fd, int *family, uint16_t *port) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  int v = 0, fl;
  socklen_t vl = sizeof(v);
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  if (ss.ss_family == AF_INET)
    *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  else if (ss.ss_family == AF_INET6)
    *port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  else
    return ACP_ERR_INVALID_ARGUMENT;
  *family = ss.ss_family;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl) != 0 || v != SOCK_STREAM)
    return ACP_ERR_INVALID_ARGUMENT;
  vl = sizeof(v);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) != 0 || v == 0)
    return ACP_ERR_INVALID_ARGUMENT;
  fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
    return ACP_ERR_SYSTEM;
  fl = fcntl(fd, F_GETFD);
  if (fl >= 0)
    (void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
  return 0;
}

static int server_new(acp_http_server **out, uv_loop_t *loop,
                      acp_mcp_server *registry,
                      const acp_http_relay_callbacks *cbs, void *rud,
                      const acp_http_server_options *opts, const acp_mem *mem) {
  acp_http_server *srv;
  acp_mem m;
  struct sockaddr_storage ss;
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  const union MHD_DaemonInfo *info;
  int rv, efd;
  /* The server owns a caller's listening socket from here on. */
  int lfd = opts ? opts->listen_fd : -1;
  uint16_t lport = 0;
  if (out == NULL) {
    rv = ACP_ERR_INVALID_ARGUMENT;
    goto fail_fd;
  }
  *out = NULL;
  if (loop == NULL || (registry == NULL && cbs == NULL) ||
      (cbs && cbs->message == NULL) || (cbs && opts && opts->auth != NULL)) {
    rv = ACP_ERR_INVALID_ARGUMENT;
    goto fail_fd;
  }
  acp__mem_init(&m, mem);
  srv = acp__calloc(&m, 1, sizeof(*srv));
  if (srv == NULL) {
    rv = ACP_ERR_NOMEM;
    goto fail_fd;
  }
  srv->mem = m;
  srv->loop = loop;
  srv->reg = registry;
  if (cbs) {
    srv->relay = true;
    srv->rcb = *cbs;
    srv->rud = rud;
  }
  acp__buf_init(&srv->tmp, &srv->mem, 0);
  acp__buf_init(&srv->rtmp, &srv->mem, 0);
  rv = options_copy(&srv->o, opts, &srv->mem);
  if (rv == 0)
    rv = acp_json_doc_new(&srv->doc, &srv->mem);
  if (rv == 0 && srv->relay)
    rv = acp_json_doc_new(&srv->rdoc, &srv->mem);
  if (rv != 0)
    goto fail;
  memset(&ss, 0, sizeof(ss));
  if (lfd >= 0) {
    int family = AF_INET;
    rv = listen_fd_check(lfd, &family, &lport);
    if (rv != 0)
      goto fail;
    if (family == AF_INET6)
      flags |= MHD_USE_IPv6;
  } else {
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, srv->o->addr, &a4->sin_addr) == 1) {
      a4->sin_family = AF_INET;
      a4->sin_port = htons(srv->o->port);
    } else if (inet_pton(AF_INET6, srv->o->addr, &a6->sin6_addr) == 1) {
      a6->sin6_family = AF_INET6;
      a6->sin6_port = htons(srv->o->port);
      flags |= MHD_USE_IPv6;
    } else {
      rv = ACP_ERR_INVALID_ARGUMENT;
      goto fail;
    }
  }
  if (lfd >= 0)
    srv->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, srv, MHD_OPTION_LISTEN_SOCKET, lfd,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONN_POOL_BYTES, MHD_OPTION_END);
  else
    srv->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, srv, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONN_POOL_BYTES,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
  if (srv->d == NULL) {
    /* Whether MHD closed the socket on failure depends on where it
     * failed: close it if it is still open. */
    if (lfd >= 0 && fcntl(lfd, F_GETFD) == -1)
      lfd = -1;
    rv = ACP_ERR_SYSTEM;
    goto fail;
  }
  lfd = -1; /* MHD_stop_daemon() closes it */
  if (lport != 0)
    srv->port = lport;
  else {
    info = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : srv->o->port;
  }
  if (srv->o->auth != NULL && (rv = auth_setup(srv)) != 0)
    goto fail;
  info = MHD_get_daemon_info(srv->d, MHD_DAEMON_INFO_EPOLL_FD);
  efd = info ? info->epoll_fd : -1;
  if (efd < 0 || uv_poll_init(loop, &srv->poll, efd) != 0) {
    rv = ACP_ERR_SYSTEM;
    goto fail;
  }
  srv->poll.data = srv;
  srv->open_handles++;
  uv_timer_init(loop, &srv->timer);
  srv->timer.data = srv;
  srv->open_handles++;
  uv_timer_init(loop, &srv->wtimer);
  srv->wtimer.data = srv;
  srv->open_handles++;
  uv_timer_init(loop, &srv->ktimer);
  srv->ktimer.data = srv;
  srv->open_handles++;
  uv_timer_init(loop, &srv->dtimer);
  srv->dtimer.data = srv;
  srv->open_handles++;
  if (srv->o->keepalive_ms > 0)
    uv_timer_start(&srv->ktimer, on_ktimer, srv->o->keepalive_ms,
                   srv->o->keepalive_ms);
  uv_prepare_init(loop, &srv->prepare);
  srv->prepare.data = srv;
  srv->open_handles++;
  uv_poll_start(&srv->poll, UV_READABLE, on_poll);
  uv_prepare_start(&srv->prepare, on_prepare);
  arm(srv);
  *out = srv;
  return 0;
fail:
  if (srv->open_handles) {
    /* Not reached: handles are opened last and cannot fail after. */
  }
  if (srv->d)
    MHD_stop_daemon(srv->d);
  auth_dispose(srv, &m);
  acp_json_doc_free(srv->doc);
  acp_json_doc_free(srv->rdoc);
  acp_json_doc_free(srv->xdoc);
  acp_http_server_options_free(srv->o);
  acp__buf_dispose(&srv->tmp);
  acp__buf_dispose(&srv->rtmp);
  acp__free(&m, srv);
fail_fd:
  if (lfd >= 0)
    close(lfd);
  return rv;
}

int acp_http_server_new(acp_http_server **out, uv_loop_t *loop,
                        acp_mcp_server *registry,
                        const acp_http_server_options *opts,
                        const acp_mem *mem) {
  if (registry == NULL) {
    if (opts && opts->listen_fd >= 0)
      close(opts->listen_fd);
    if (out)
      *out = NULL;
    return ACP_ERR_INVALID_ARGUMENT;
  }
  return server_new(out, loop, registry, NULL, NULL, opts, mem);
}

int acp_http_server_new_relay(acp_http_server **out, uv_loop_t *loop,
                              const acp_http_relay_callbacks *cbs,
                              void *user_data,
                              const acp_http_server_options *opts,
                              const acp_mem *mem) {
  if (cbs == NULL) {
    if (opts && opts->listen_fd >= 0)
      close(opts->listen_fd);
    if (out)
      *out = NULL;
    return ACP_ERR_INVALID_ARGUMENT;
  }
  return server_new(out, loop, NULL, cbs, user_data, opts, mem);
}

uint16_t acp_http_server_port(const acp_http_server *srv) {
  return srv ? srv->port : 0;
}

size_t acp_http_server_session_count(const acp_http_server *srv) {
  return srv ? srv->nsessions : 0;
}

static void on_handle_closed(uv_handle_t *h) {
  server_unref(h->data);
}

static void server_unref(acp_http_server *srv) {
  acp_mem m;
  if (--srv->open_handles > 0)
    return;
  if (srv->close_cb)
    srv->close_cb(srv, srv->close_ud);
  m = srv->mem;
  auth_dispose(srv, &m);
  acp_json_doc_free(srv->doc);
  acp_json_doc_free(srv->rdoc);
  acp_json_doc_free(srv->xdoc);
  acp_http_server_options_free(srv->o);
  acp__buf_dispose(&srv->tmp);
  acp__buf_dispose(&srv->rtmp);
  acp__free(&m, srv);
}

/* Open 2026 responses: a stateless request's stream still held by its
 * HTTP request (an open subscriptions/listen, a call not answered yet). */
static bool stateless_open(const acp_http_server *srv) {
  const hs_session *s;
  const hs_stream *st;
  for (s = srv->sessions; s != NULL; s = s->next)
    if (s->stateless)
      for (st = s->streams; st != NULL; st = st->next)
        if (st->rq != NULL)
          return true;
  return false;
}

static void close_now(acp_http_server *srv);

static void on_dtimer(uv_timer_t *t) {
  close_now(t->data);
}

/* Drained (see acp_http_server_close()): stop now. */
static void drain_check(acp_http_server *srv) {
  if (srv->draining && !srv->closing && !stateless_open(srv))
    close_now(srv);
}

void acp_http_server_close(acp_http_server *srv, acp_http_server_close_cb cb,
                           void *user_data) {
  hs_session *s;
  if (srv == NULL || srv->closing)
    return;
  if (srv->draining) {
    /* Asked again while draining: stop at once. */
    close_now(srv);
    return;
  }
  srv->close_cb = cb;
  srv->close_ud = user_data;
  if (srv->d == NULL || srv->o->drain_ms == 0 || !stateless_open(srv)) {
    close_now(srv);
    return;
  }
  /* Open 2026 listens end with their result (resultType "complete") and
   * calls in progress get drain_ms to answer, on a daemon that takes no
   * new connections (with SO_REUSEPORT the kernel sends them to the other
   * workers); then everything stops as below. */
  srv->draining = true;
  {
    MHD_socket lfd = MHD_quiesce_daemon(srv->d);
    if (lfd != MHD_INVALID_SOCKET)
      close(lfd);
  }
  for (s = srv->sessions; s != NULL; s = s->next)
    if (s->stateless && s->conn != NULL)
      (void)acp_mcp_conn_close_listens(s->conn);
  uv_timer_start(&srv->dtimer, on_dtimer, srv->o->drain_ms, 0);
  srv->need_run = true; /* on_prepare flushes and runs MHD */
}

static void close_now(acp_http_server *srv) {
  hs_req *rq;
  if (srv->closing)
    return;
  srv->closing = true;
  srv->draining = false;
  uv_poll_stop(&srv->poll);
  /* Every suspended connection must be resumed before MHD stops. */
  for (rq = srv->reqs; rq; rq = rq->next)
    if (rq->suspended) {
      rq->suspended = false;
      watch_stop(rq);
      MHD_resume_connection(rq->mc);
    }
  while ((rq = srv->authq) != NULL) {
    authq_remove(rq);
    acp__http_auth_unwait(&rq->aw, &srv->mem);
    if (rq->auth_suspended) {
      rq->auth_suspended = false;
      MHD_resume_connection(rq->mc);
    }
  }
  while (srv->sessions)
    session_close(srv->sessions);
  MHD_stop_daemon(srv->d);
  srv->d = NULL;
  uv_close((uv_handle_t *)&srv->poll, on_handle_closed);
  uv_close((uv_handle_t *)&srv->timer, on_handle_closed);
  uv_close((uv_handle_t *)&srv->wtimer, on_handle_closed);
  uv_close((uv_handle_t *)&srv->ktimer, on_handle_closed);
  uv_close((uv_handle_t *)&srv->dtimer, on_handle_closed);
  uv_close((uv_handle_t *)&srv->prepare, on_handle_closed);
}

int acp_http_call_close_stream(acp_mcp_call *call) {
  acp_mcp_conn *conn;
  hs_session *s;
  hs_stream *st;
  char params[48];
  int n;
  if (call == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  conn = acp_mcp_call_conn(call);
  s = conn ? acp_mcp_conn_get_user_data(conn) : NULL;
  /* A 2026-07-28 request has nothing to resume with: its stream stays. */
  if (s == NULL || s->magic != SESSION_MAGIC || s->legacy || s->stateless)
    return ACP_ERR_UNSUPPORTED;
  st = s->ctx;
  if (st == NULL || st->is_get)
    return ACP_ERR_INVALID_STATE;
  st->force_sse = true;
  /* The conn's earlier output is still queued in its session (it cannot
   * be taken from inside a handler): queue a marker behind it, which
   * route() turns into the end of the HTTP response at that point. What
   * follows (the answer, typically) waits for the client's GET with
   * Last-Event-ID. The marker never leaves the server. */
  n = snprintf(params, sizeof(params), "{\"stream\":%llu}",
               (unsigned long long)st->no);
  return acp_rpc_session_notify(acp_mcp_conn_session(conn), CUT_METHOD,
                                sizeof(CUT_METHOD) - 1, params, (size_t)n);
}

int acp_http_call_auth(const acp_mcp_call *call, const char **subject,
                       const char **scopes) {
  acp_mcp_conn *conn;
  hs_session *s;
  if (call == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  conn = acp_mcp_call_conn(call);
  s = conn ? acp_mcp_conn_get_user_data(conn) : NULL;
  if (s == NULL || s->magic != SESSION_MAGIC || s->srv->o->auth == NULL)
    return ACP_ERR_UNSUPPORTED;
  if (s->srv->cur == NULL || acp_mcp_call_msg(call) == NULL)
    return ACP_ERR_INVALID_STATE;
  if (subject != NULL)
    *subject = s->srv->cur->sub;
  if (scopes != NULL)
    *scopes = s->srv->cur->scope;
  return 0;
}

/* MARK: - Relay sessions (Public) */

static bool relay_live(const hs_session *s) {
  return s && s->magic == SESSION_MAGIC && s->relay;
}

int acp_http_relay_deliver(acp_http_relay_session *s, const char *msg,
                           size_t len) {
  acp_http_server *srv;
  int rv;
  if (!relay_live(s) || msg == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (s->ended || s->notified || s->end_pending)
    return ACP_ERR_CLOSED;
  srv = s->srv;
  while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == '\r' ||
                     msg[len - 1] == ' ' || msg[len - 1] == '\t'))
    len--;
  if (acp__eol_find(msg, len) < len) {
    /* SSE data must be one line: copy and flatten. */
    acp__buf_clear(&srv->rtmp);
    rv = acp__buf_append(&srv->rtmp, msg, len);
    if (rv != 0)
      return rv;
    acp__eol_blank(srv->rtmp.data, len);
    msg = srv->rtmp.data;
  }
  rv = acp_json_doc_parse(srv->rdoc, msg, len, NULL);
  if (rv == ACP_ERR_PARSE)
    return ACP_ERR_INVALID_ARGUMENT;
  if (rv != 0)
    return rv;
  if (acp_json_type_of(acp_json_doc_root(srv->rdoc)) != ACP_JSON_OBJECT)
    return ACP_ERR_INVALID_ARGUMENT;
  return route(s, srv->rdoc, msg, len);
}

void acp_http_relay_session_end(acp_http_relay_session *s) {
  if (!relay_live(s) || s->ended || s->notified)
    return;
  if (s->busy) {
    s->end_pending = true; /* relay_settle() ends it */
    return;
  }
  session_soft_end(s);
}

void acp_http_relay_session_set_user_data(acp_http_relay_session *s, void *ud) {
  if (s)
    s->ud = ud;
}

void *acp_http_relay_session_get_user_data(const acp_http_relay_session *s) {
  return s ? s->ud : NULL;
}

const char *acp_http_relay_session_id(const acp_http_relay_session *s) {
  return s ? s->id : NULL;
}
