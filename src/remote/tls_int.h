/*
 * The TLS filter of libacp-remote (tls.c): OpenSSL over two memory BIOs,
 * so it never touches a socket. The connection code feeds it the bytes its
 * socket read (acp__tls_feed), takes back plaintext (acp__tls_read), hands
 * it plaintext to send (acp__tls_write) and writes out whatever ciphertext
 * it produced (acp__tls_pending / acp__tls_take). libuv keeps the socket,
 * its buffers and its backpressure; the filter only transforms bytes.
 * Not installed.
 */
#ifndef ACP_TLS_INT_H
#define ACP_TLS_INT_H

#include <stdbool.h>

#include "acp/remote.h"
#include "util.h"

/* A configuration is shared by the server (or client) and every
 * connection made from it: acp_remote_tls_free() drops the caller's
 * reference, each holder drops its own with acp__tls_conf_unref(). */
void acp__tls_conf_ref(acp_remote_tls *conf);
void acp__tls_conf_unref(acp_remote_tls *conf);
/* The role the configuration was made for. */
bool acp__tls_conf_is_server(const acp_remote_tls *conf);
/* A server configuration with a certificate. */
bool acp__tls_conf_ready(const acp_remote_tls *conf);
/* A server configuration whose ALPN list has "h2": only then may a TLS
 * connection without ALPN start with the HTTP/2 preface. */
bool acp__tls_conf_offers_h2(const acp_remote_tls *conf);
/* For tests: the SSL_CTX underneath (to force TLS 1.2, shrink the session
 * cache, read its counters), and how many client sessions are kept. */
void *acp__tls_conf_ssl_ctx(acp_remote_tls *conf);
size_t acp__tls_conf_client_sessions(const acp_remote_tls *conf);
/* Server: the clock of the ticket key ring, in seconds (tests; NULL puts
 * back CLOCK_MONOTONIC). */
void acp__tls_conf_set_clock(acp_remote_tls *conf, uint64_t (*clock)(void *),
                             void *arg);

typedef struct acp__tls acp__tls;

/*
 * A filter for one connection. Client: `host` (NUL-terminated, not
 * bracketed) is sent as SNI (unless it is an IP address) and the server's
 * certificate must name it; `port` (or NULL) with `host` and the SNI names
 * the session kept in `conf` for the next socket to the same server (the
 * filter offers the one kept now, if any). Server: `host` and `port` are
 * NULL. 0 or ACP_ERR_NOMEM (a session that cannot be kept for want of
 * memory is not an error: the next socket does a full handshake).
 */
int acp__tls_new(acp__tls **out, acp_remote_tls *conf, const char *host,
                 const char *port, const acp_mem *mem);
void acp__tls_free(acp__tls *t);
/* A client filter from `conf`, or when it is NULL from a configuration of
 * our own (the system's CA store, no certificate). 0, ACP_ERR_NOMEM. */
int acp__tls_new_client(acp__tls **out, const acp_remote_tls *conf,
                        const char *host, const char *port, const acp_mem *mem);

/* Bytes the socket read. 0 or ACP_ERR_NOMEM. */
int acp__tls_feed(acp__tls *t, const char *data, size_t len);

/*
 * Advance the handshake and append every byte of plaintext that can be
 * decrypted now to `out`. Plaintext written before the handshake ended is
 * encrypted once it has. Returns 0 (maybe nothing yet: feed more),
 * ACP_ERR_CLOSED (the peer sent close_notify; `out` has all that came
 * before), ACP_ERR_PROTOCOL (the handshake or a record failed:
 * acp__tls_error() says why; an alert for the peer may be pending) or
 * ACP_ERR_NOMEM / ACP_ERR_LIMIT (from `out`). Call acp__tls_pending()
 * afterwards whatever it returns.
 */
int acp__tls_read(acp__tls *t, acp__buf *out);

/* Encrypt plaintext (held until the handshake is over). 0, ACP_ERR_NOMEM,
 * ACP_ERR_PROTOCOL (the connection failed before) or ACP_ERR_CLOSED
 * (after acp__tls_close()). */
int acp__tls_write(acp__tls *t, const char *data, size_t len);

/* Queue close_notify (once; nothing once the handshake failed). */
void acp__tls_close(acp__tls *t);

/* Ciphertext waiting to be sent, and taking it: up to `cap` bytes into
 * `buf`, returning how many. */
size_t acp__tls_pending(const acp__tls *t);
size_t acp__tls_take(acp__tls *t, char *buf, size_t cap);

/* The handshake is over. */
bool acp__tls_ready(const acp__tls *t);
/* Why the connection failed ("certificate verify failed: hostname
 * mismatch"), or "". */
const char *acp__tls_error(const acp__tls *t);
/* The failure was a plaintext HTTP request (a server can answer it in
 * plaintext). */
bool acp__tls_plain_http(const acp__tls *t);
/* A client filter (before its first byte): offer ALPN "h2" before
 * "http/1.1". 0 or ACP_ERR_NOMEM. */
int acp__tls_offer_h2(acp__tls *t);
/* The protocol ALPN agreed on ("h2", "http/1.1"), or NULL. */
const char *acp__tls_alpn(const acp__tls *t);
/* Once the handshake is over: it resumed a session; a client offered one
 * (kept from an earlier socket to the same server). */
bool acp__tls_resumed(const acp__tls *t);
bool acp__tls_offered(const acp__tls *t);
/* Once the handshake is over: "TLS session resumed (TLSv1.3, ALPN
 * http/1.1)" or "TLS full handshake (TLSv1.2[, ALPN h2][, the offered
 * session was not resumed])", into `buf` (always NUL-terminated). */
void acp__tls_describe(const acp__tls *t, char *buf, size_t cap);

#endif /* ACP_TLS_INT_H */
