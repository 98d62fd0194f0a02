/*
 * The sans-I/O pieces of the remote transport (libacp-remote): an RFC 6455
 * WebSocket frame codec and the HTTP/1.1 upgrade handshake, both without
 * I/O, clock or randomness (masks and keys are passed in). The runtime
 * glue (remote_uv.c) moves their bytes. Not installed.
 */
#ifndef ACP_WS_INT_H
#define ACP_WS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "acp/common.h"
#include "util.h"

/* MARK: - SHA-1 and base64 (for Sec-WebSocket-Accept) */

void acp__sha1(const void *data, size_t len, uint8_t out[20]);
/* Writes 4*ceil(n/3) characters and a NUL; `out` holds at least that + 1. */
size_t acp__base64(const uint8_t *in, size_t n, char *out);
/* Sec-WebSocket-Accept for `key` (28 characters and a NUL). */
void acp__ws_accept_key(const char *key, size_t key_len, char out[29]);

/* MARK: - Frame codec */

enum {
  ACP__WS_OP_CONT = 0x0,
  ACP__WS_OP_TEXT = 0x1,
  ACP__WS_OP_BINARY = 0x2,
  ACP__WS_OP_CLOSE = 0x8,
  ACP__WS_OP_PING = 0x9,
  ACP__WS_OP_PONG = 0xA
};

/* Close codes we send (RFC 6455 section 7.4.1). */
enum {
  ACP__WS_CLOSE_NORMAL = 1000,
  ACP__WS_CLOSE_GOING_AWAY = 1001,
  ACP__WS_CLOSE_PROTOCOL = 1002,
  ACP__WS_CLOSE_BAD_DATA = 1007,
  ACP__WS_CLOSE_TOO_BIG = 1009,
  ACP__WS_CLOSE_INTERNAL = 1011
};

/*
 * A complete text message. In line mode its CR and LF bytes (legal in JSON
 * only as whitespace between tokens) were turned into spaces and data[len]
 * is a '\n', so data[0..len] is one NDJSON line. Borrowed for the call.
 * Return 0 to go on, ACP_ERR_PAUSE to stop this acp__ws_recv() after this
 * message, anything else to fail it (returned as is).
 */
typedef int (*acp__ws_msg_cb)(void *user_data, char *data, size_t len);

typedef struct acp__ws {
  acp_mem mem;    /* a copy: the buffers point at it, so never move a codec */
  bool client;    /* we mask what we send and expect unmasked frames */
  bool line_mode; /* see acp__ws_msg_cb */
  size_t max_msg; /* cap of one assembled message (1009 beyond) */

  /* frame being parsed */
  uint8_t hdr[14];
  size_t hdr_have;
  size_t hdr_need;
  int op;
  bool fin;
  bool masked;
  uint8_t mask[4];
  uint64_t remain;  /* payload bytes of this frame still to come */
  uint64_t mask_at; /* payload offset, for the mask phase */

  int msg_op; /* TEXT or BINARY while a message is in progress, else 0 */
  acp__buf msg;
  uint8_t ctl[125];
  size_t ctl_len;

  acp__buf out;        /* control frames to send (pong, close) */
  bool close_received; /* the peer's close frame arrived */
  bool close_sent;     /* ours is in `out` (or was sent) */
  int close_code;      /* code we closed with, or the peer's */
  bool failed;         /* a protocol error closed it: input is ignored */
  unsigned pongs;      /* pong frames received */
  /* Mask of the control frames a client codec queues by itself (pong,
   * close): the runtime sets a fresh one before each acp__ws_recv(). */
  uint8_t auto_mask[4];
} acp__ws;

void acp__ws_init(acp__ws *ws, bool client, size_t max_msg, const acp_mem *mem);
void acp__ws_dispose(acp__ws *ws);
/* Release the message buffer if it has grown past `keep` bytes and no
 * message is being put together (an idle connection keeps no big buffer). */
void acp__ws_trim(acp__ws *ws, size_t keep);

/*
 * Feed received bytes. Calls `cb` for each complete text message (binary
 * messages are dropped, as the RFD says); answers pings and a close frame
 * into ws->out. Returns the bytes consumed (fewer than `len` only after a
 * callback paused, or once the peer's close frame arrived), or:
 * ACP_ERR_PROTOCOL (a framing error: a close frame with ws->close_code
 * 1002/1007 is in ws->out), ACP_ERR_LIMIT (a message over max_msg: close
 * 1009 queued), ACP_ERR_NOMEM, or a callback's error. After an error the
 * codec accepts no more input.
 */
acp_ssize acp__ws_recv(acp__ws *ws, const uint8_t *data, size_t len,
                       acp__ws_msg_cb cb, void *user_data);

/*
 * Header of a frame (FIN set) of `op` carrying `len` bytes into `out`;
 * masked with `mask` when it is not NULL. Returns the header's length.
 */
size_t acp__ws_header(uint8_t out[14], int op, uint64_t len,
                      const uint8_t *mask);

/* dst[0..n) = src[0..n) XOR `mask`, the payload starting at offset `at`
 * (dst may be src). */
void acp__ws_copy_mask(uint8_t *dst, const uint8_t *src, size_t n,
                       const uint8_t mask[4], uint64_t at);
/* XOR p[0..n) with `mask`, the payload starting at offset `at`. */
void acp__ws_apply_mask(uint8_t *p, size_t n, const uint8_t mask[4],
                        uint64_t at);

/* Queue a control frame (PING, PONG, CLOSE: len <= 125) into ws->out. */
int acp__ws_queue_control(acp__ws *ws, int op, const uint8_t *payload,
                          size_t len, const uint8_t *mask);
/* Queue our close frame (once) with `code`. */
int acp__ws_queue_close(acp__ws *ws, int code, const char *reason,
                        const uint8_t *mask);

/* MARK: - HTTP/1.1 handshake */

#define ACP__HTTP_MAX_HEAD 8192
#define ACP__HTTP_MAX_HEADERS 48

typedef struct acp__http_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} acp__http_header;

typedef struct acp__http_head {
  /* request: method and target; response: status (and reason in target) */
  const char *method;
  size_t method_len;
  const char *target;
  size_t target_len;
  int status;
  int minor_version;
  acp__http_header headers[ACP__HTTP_MAX_HEADERS];
  size_t nheaders;
} acp__http_head;

/*
 * Parse a request (`response` false) or response head in buf[0..len).
 * Returns the head's length including the blank line, 0 when more bytes
 * are needed, ACP_ERR_PARSE for a malformed head, ACP_ERR_LIMIT when it
 * is longer than ACP__HTTP_MAX_HEAD or has too many headers. Pointers in
 * `h` point into `buf`.
 */
acp_ssize acp__http_parse_head(const char *buf, size_t len, bool response,
                               acp__http_head *h);

/* The value of header `name` (case-insensitive), or NULL. */
const acp__http_header *acp__http_find(const acp__http_head *h,
                                       const char *name);

/* Nonzero if the comma-separated header `name` holds token `tok`. */
bool acp__http_has_token(const acp__http_head *h, const char *name,
                         const char *tok);

/* What the server decides about an upgrade request. */
typedef struct acp__ws_policy {
  const char *path;  /* "/acp" */
  const char *token; /* bearer token, or NULL */
  /* Hosts accepted in Host and Origin (host or host:port), NULL-ended;
   * NULL: any. */
  const char *const *hosts;
} acp__ws_policy;

/*
 * Check an upgrade request against `policy`. Returns the HTTP status to
 * answer: 101 (go: `accept` holds Sec-WebSocket-Accept), 400 (not a valid
 * upgrade), 401 (token missing or wrong), 403 (Origin or Host refused),
 * 404 (another path), 405 (not GET), 426 (a plain request to the path:
 * upgrade required), 501 (Streamable HTTP methods, not served yet).
 */
int acp__ws_check_request(const acp__http_head *h, const acp__ws_policy *p,
                          char accept[29]);

/* MARK: - Streamable HTTP */

enum { ACP__REQ_POST = 1, ACP__REQ_SSE, ACP__REQ_DELETE };

typedef struct acp__acp_req {
  int kind;              /* ACP__REQ_* */
  size_t content_length; /* POST: the body's length */
  const char *conn_id;   /* Acp-Connection-Id, or NULL (points into head) */
  size_t conn_id_len;
  const char *session_id; /* Acp-Session-Id, or NULL */
  size_t session_id_len;
} acp__acp_req;

/*
 * Classify a Streamable HTTP request to the endpoint, for which
 * acp__ws_check_request() answered 501 (POST, DELETE) or 426 (GET without
 * an upgrade): path, Host, Origin and token were checked already. Returns
 * 0 (go: `r` filled) or the status to answer: 400 (GET SSE or DELETE
 * without Acp-Connection-Id, a bad Content-Length), 405, 411 (POST without
 * a Content-Length: chunked bodies are not taken), 413 (body over
 * `max_body`), 415 (not application/json), 426 (a GET that does not accept
 * text/event-stream). Whether an Acp-Connection-Id is known is the
 * caller's business (404).
 */
int acp__http_check_acp(const acp__http_head *h, size_t max_body,
                        acp__acp_req *r);

/* MARK: - HTTP/1.1 response bodies (the Streamable HTTP client) */

enum { ACP__BODY_LENGTH = 1, ACP__BODY_CHUNKED, ACP__BODY_CLOSE };

/* A response body being read: Content-Length, chunked, or up to the
 * socket's end. Sans-I/O and allocation-free. */
typedef struct acp__http_body {
  int mode;        /* ACP__BODY_* */
  uint64_t remain; /* LENGTH: bytes left; CHUNKED: left in this chunk */
  int cst;         /* chunked: where in the framing */
  unsigned digits; /* chunked: hex digits of the size seen */
  bool done;       /* the whole body was read */
} acp__http_body;

/*
 * Set up `b` for the body of response `h` (to a request of method `head`
 * true for HEAD). Returns 0 or ACP_ERR_PARSE (a bad Content-Length, a
 * transfer coding other than chunked).
 */
int acp__http_body_init(acp__http_body *b, const acp__http_head *h);

/*
 * Decode in[0..len). Sets *out / *out_len to the next span of body bytes
 * (pointing into `in`; possibly empty) and returns the bytes consumed
 * (0 only when len is 0 or b->done), or ACP_ERR_PARSE for broken chunk
 * framing. Call again with the rest until it consumes nothing.
 */
acp_ssize acp__http_body_feed(acp__http_body *b, const char *in, size_t len,
                              const char **out, size_t *out_len);

/* MARK: - JSON members without a parse */

/*
 * Just enough JSON to route a message without parsing it: messages can be
 * megabytes, and the transport needs a few members near the top (method,
 * id, params.sessionId, result.sessionId). Strings are skipped with
 * memchr, nothing is validated or allocated. In the object at p[0..e),
 * finds member `key` (compared as raw bytes: a key written with escapes is
 * not found) and sets [*vb, *ve) to its raw value (a string with its
 * quotes). False when absent or when the input is not a JSON object; a
 * caller then treats the message as having no such member (the JSON
 * parser of whoever reads the message reports what is wrong with it).
 */
bool acp__js_member(const char *p, const char *e, const char *key, size_t klen,
                    const char **vb, const char **ve);

/*
 * Member `key` of the object that is member `parent` of the object at
 * p[0..e) (params.sessionId), found without looking through the rest of
 * the parent: what precedes `key` in it is walked, what follows is not, so
 * a sessionId at the head of a 1 MiB params costs what the head does. A
 * parent that is cut short or malformed after `key` still gives it (the
 * message's reader reports the fault).
 */
bool acp__js_member_in(const char *p, const char *e, const char *parent,
                       size_t plen, const char *key, size_t klen,
                       const char **vb, const char **ve);

/*
 * The same for the head of a message, p[0..e) being only its first bytes
 * (a line too long to hold whole). Returns 1 when member `key` is there
 * whole ([*vb, *ve) its raw value, as acp__js_member gives it), 2 when
 * the cut falls in its value ([*vb, e) the value's head, perhaps empty; a
 * number or literal running up to e counts as cut off), 0 when it is not
 * in the head: absent, after the cut, or the input is not an object. No
 * byte at or after e is read.
 */
int acp__js_member_head(const char *p, const char *e, const char *key,
                        size_t klen, const char **vb, const char **ve);

/* MARK: - URLs */

/* ws://, http:// (and the TLS schemes, recognised to be refused). Parts
 * point into the URL. */
typedef struct acp__url {
  bool tls;         /* wss:// or https:// */
  bool ws;          /* ws:// or wss:// */
  const char *host; /* without brackets */
  size_t host_len;
  const char *port; /* NULL: the scheme's default */
  size_t port_len;
  const char *authority; /* host[:port] as written, for Host */
  size_t authority_len;
  const char *path; /* from the first '/', or "/" */
} acp__url;

/* Parse `url`. Returns 0 or ACP_ERR_INVALID_ARGUMENT (another scheme, no
 * host, user info, control characters or spaces). */
int acp__url_parse(const char *url, acp__url *u);

#endif /* ACP_WS_INT_H */
