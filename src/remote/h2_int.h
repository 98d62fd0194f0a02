/*
 * HTTP/2 for the Streamable HTTP profile of libacp-remote (h2.c), and the
 * "exchange" the profile's ACP connections are served through, whatever
 * HTTP version carries them. Not installed.
 *
 * An exchange (acp__hx) is one request and its response: an HTTP/1.1
 * socket between requests of a kept-alive connection (remote_uv.c) or one
 * HTTP/2 stream (h2.c). The ACP connection logic of remote_uv.c (the
 * initialize waiter, the connection's SSE stream, session streams) holds
 * exchanges and answers through their ops, so it does not know which
 * version carries them; one ACP connection's exchanges may be spread over
 * several sockets and versions.
 *
 * h2.c is a server session of nghttp2 driven without I/O (mem_recv,
 * mem_send): the runtime hands it the bytes of a connection that is HTTP/2
 * (the cleartext preface today; ALPN "h2" after TLS later) and writes what
 * it produces. It never touches the loop.
 */
#ifndef ACP_H2_INT_H
#define ACP_H2_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "ws_int.h"

/* MARK: - Exchanges */

typedef struct acp__hx acp__hx;

/* A response. */
typedef struct acp__hx_resp {
  int status;             /* 200 (initialize), 202, or an error status */
  const char *detail;     /* errors: the text/plain body ("\n" added) */
  const char *conn_id;    /* 200: Acp-Connection-Id */
  const char *set_cookie; /* 200: a Set-Cookie value, or NULL */
  const char *p1;         /* 200: the JSON body, p1 + p2 */
  size_t n1;
  const char *p2;
  size_t n2;
} acp__hx_resp;

typedef struct acp__hx_ops {
  /* Answer the request (once). The exchange may be gone when this
   * returns (an HTTP/1.1 error closes its socket). Returns 0, or an
   * ACP_ERR_* code when the response could not be queued (the socket was
   * closed or the stream reset: the client does not wait for it). */
  int (*respond)(acp__hx *x, const acp__hx_resp *r);
  /* Answer 200 text/event-stream and hold the body open. Returns 0, or
   * an ACP_ERR_* code when the answer could not be queued: the stream is
   * then reset (HTTP/2) or its socket closed (HTTP/1.1), and the caller
   * must not attach the exchange (what it would carry would be lost). */
  int (*open_sse)(acp__hx *x);
  /* Body bytes of an open SSE response; `credit` link bytes are reported
   * (acp__hx_credit / the runtime) once they are written. */
  int (*send)(acp__hx *x, const uv_buf_t *b, unsigned nb, size_t credit);
  /* End the SSE body (the exchange was detached first). */
  void (*finish)(acp__hx *x);
  /* HTTP/1.1 only (may be NULL): the request's bytes are no longer
   * needed (its body was copied). */
  void (*taken)(acp__hx *x);
  /* Break the exchange off as a fault would (the exchange was detached
   * first): HTTP/2 resets its stream (RST_STREAM INTERNAL_ERROR, once
   * what was queued on it is written) on a connection that stays up;
   * HTTP/1.1 closes its socket (what libuv still held is lost; the link
   * bytes it carried were handed back when the exchange was detached,
   * see hx_detach in remote_uv.c). Used by a test hook of the server. Returns
   * the link bytes the exchange still held, no longer credited by it (the
   * detached exchange has no link to credit): the caller credits them, as the
   * events go again in the replay, so the link's queue does not stay inflated
   * for good. */
  size_t (*reset)(acp__hx *x);
} acp__hx_ops;

struct acp__hx {
  const acp__hx_ops *ops;
  struct hconn *hc; /* the ACP connection it serves, or NULL */
  int role;         /* what it is to hc (remote_uv.c) */
  acp__hx *next;    /* in hc's list of session streams */
};

/* MARK: - HTTP/2 server connections */

typedef struct acp__h2 acp__h2;

/* What an HTTP/2 connection needs from the runtime that owns its socket. */
typedef struct acp__h2_io {
  /* Queue bytes on the socket (copied). 0 or an error. */
  int (*write)(void *ud, const char *data, size_t len);
  /* Whether the socket's queue can take more now (backpressure: while it
   * cannot, DATA stays in the streams and their link is not credited). */
  bool (*writable)(void *ud);
  /* A complete request on exchange `x` (an HTTP/1.1-shaped head with the
   * pseudo-headers mapped: :method, :path, :authority as Host; a POST
   * without content-length gets one for its body). Answer through x->ops
   * now or later. `body` is borrowed for the call; body[blen] is a spare
   * byte the callee may write (not NULL, even for an empty body). */
  void (*request)(void *ud, acp__hx *x, const acp__http_head *h, char *body,
                  size_t blen);
  /* The stream of `x` is gone (closed, reset, or the connection dropped):
   * report `credit` unsent link bytes and detach it. `stalled`: we reset
   * it by the stall rule (acp__h2_stall_check), and what it carried ends
   * as a stalled socket's does. */
  void (*release)(void *ud, acp__hx *x, size_t credit, bool stalled);
  /* `n` link bytes of x's SSE body were handed to the connection. */
  void (*credit)(void *ud, acp__hx *x, size_t n);
  /* The connection is over (it broke: out of memory, a write failed, a
   * GOAWAY for an error was sent; or every stream ended after GOAWAY),
   * found outside the runtime's own calls too (an answer or SSE bytes
   * queued from a timer or the agent's side). Finish the socket, from
   * the loop: never from inside this call. May come more than once. */
  void (*over)(void *ud);
  /* Some stream's output waits for nghttp2 to take it (its window or the
   * connection's is shut, or the socket is full): call
   * acp__h2_stall_check() a few times per stall timeout until it returns
   * false. Called after a flush, often: only start looking if not yet. */
  void (*waiting)(void *ud);
} acp__h2_io;

/* Cap of concurrent streams a client may open on one connection. */
#define ACP__H2_MAX_STREAMS 100u

/* Whether p[0..n) starts the HTTP/2 client preface: 1 (all 24 bytes are
 * there), 0 (not HTTP/2), -1 (a prefix of it: need more). */
int acp__h2_preface(const char *p, size_t n);

/*
 * A server connection: queues our SETTINGS at once. `io` is copied;
 * `max_body` caps a request body (413 beyond). Returns 0,
 * ACP_ERR_NOMEM.
 */
int acp__h2_new(acp__h2 **out, const acp__h2_io *io, void *ud, size_t max_body,
                const acp_mem *mem);

/*
 * Feed received bytes (the preface included) and flush. Returns 0, or
 * ACP_ERR_PROTOCOL when the connection is broken (a GOAWAY was queued
 * if it could be): finish the socket.
 */
int acp__h2_recv(acp__h2 *h, const char *data, size_t len);

/* Write what is pending while io->writable() (call when the socket
 * drained). */
void acp__h2_flush(acp__h2 *h);

/* A keep-alive comment on every open SSE stream, and flush. */
void acp__h2_keepalive(acp__h2 *h);

/* Whether some stream has output nghttp2 has not taken yet. */
bool acp__h2_waiting(const acp__h2 *h);

/*
 * The stall rule per stream, `now` being a clock in ms (the loop's): a
 * stream whose output waited `stall_ms` with not a byte taken by nghttp2
 * while the socket was writable (io.writable: a full socket is the
 * socket's own stall) is reset, RST_STREAM CANCEL, and released with
 * `stalled` once that is sent; the connection and its other streams go
 * on. Progress is looked at only when called: call it a few times per
 * stall_ms (the stall is found up to one interval late). Flushes when it
 * reset a stream, which may release streams and so free the connection
 * from inside (the runtime's release): do not use `h` after a call
 * without knowing it is still there. Returns whether output still waits
 * (call again later).
 */
bool acp__h2_stall_check(acp__h2 *h, uint64_t now, uint64_t stall_ms);

/* GOAWAY (no error): no new streams; the open ones go on. Flushes. */
void acp__h2_goaway(acp__h2 *h);

/* No stream is open. */
bool acp__h2_idle(const acp__h2 *h);

/* Nothing more to read or write (after GOAWAY or an error, once every
 * stream is closed): the runtime closes the socket. */
bool acp__h2_done(const acp__h2 *h);

/* Release every stream (io->release) and free. Safe from inside the
 * connection's own callbacks (then deferred). Accepts NULL. */
void acp__h2_free(acp__h2 *h);

#endif /* ACP_H2_INT_H */
