/*
 * libacp-remote - remote ACP: the WebSocket profile of the RFD "Streamable
 * HTTP & WebSocket Transport" on one `/acp` endpoint, over HTTP/1.1.
 *
 * A remote connection is a byte link (acp/uv.h, acp_uv_link_new_user()):
 * each WebSocket text message arrives as one NDJSON line, and each line
 * written to the link leaves as one text message. So everything that runs
 * over stdio (acp_uv_rpc with the agent, client and proxy roles, couplings,
 * a relay to a child's pipes) runs over it unchanged.
 *
 * The server also serves the Streamable HTTP profile on the same endpoint,
 * as the TS SDK 2.4 ships it (HTTP/1.1): a POST of `initialize` without
 * Acp-Connection-Id creates a connection (a link handed to the accept
 * callback, like a WebSocket's) and is answered 200 with the agent's first
 * line as JSON and the new Acp-Connection-Id; every other POST is one
 * message (202); GET with Accept: text/event-stream opens the connection's
 * SSE stream; with Acp-Session-Id a session stream, which from then on
 * carries the agent's messages whose params.sessionId is that session and
 * the answers to requests POSTed with that Acp-Session-Id (the rest go on
 * the connection stream). Session events are numbered (SSE id); once a
 * session has had a stream, its events wait while it has none, and a GET
 * for it gets the events after its Last-Event-ID (without one: those not
 * yet written to a live stream) first; the newest 1 MiB written is kept
 * for that, older ones asked for get 410. A POST that finds the agent not
 * reading is held (in order; at most 32 per connection, 30 s each, then 503).
 * DELETE ends the link's read side. The end of the connection stream ends it
 * too. Streamable HTTP is served over HTTP/1.1 and over cleartext HTTP/2 with
 * prior knowledge (a socket whose first bytes are the HTTP/2 preface), on
 * the same port, with the same checks and answers (session streams and
 * held POSTs included); an HTTP/2 connection may carry many ACP
 * connections, and one ACP connection's requests may arrive on several.
 * Both profiles also run over TLS (https://, wss://): see acp_remote_tls
 * below, acp_remote_server_options.tls and acp_remote_client_options.tls.
 * Experimental.
 *
 * Lifetime: the same rules as acp/uv.h. A link handed out here belongs to
 * the receiver, who closes it with acp_uv_link_close(); closing it sends a
 * close frame (1000) and closes the socket once written.
 *
 * Thread-safety: everything belongs to the loop's thread.
 */
#ifndef ACP_REMOTE_H
#define ACP_REMOTE_H

#include "uv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MARK: - TLS */

/**
 * A TLS configuration (OpenSSL underneath; the socket stays libuv's): for
 * a server, its certificate and optionally the CA that client certificates
 * must chain to (mutual TLS); for a client, the CA its server's certificate
 * must chain to (default: the system store) and optionally its own
 * certificate. TLS 1.2 at least. ALPN: a server offers "h2" then
 * "http/1.1" (acp_remote_tls_set_alpn()), a client asks for "http/1.1"
 * ("h2" first with ACP_REMOTE_HTTP2). Opaque.
 *
 * Session resumption (on unless acp_remote_tls_set_resumption() turns it
 * off): a server configuration issues TLS 1.3 tickets and TLS 1.2
 * tickets, encrypted with a key drawn at random that changes every
 * ACP_REMOTE_TLS_TICKET_KEY_PERIOD seconds (the previous key still opens
 * tickets: acp_remote_tls_set_ticket_key_period(); the keys die with the
 * configuration, so a restarted server makes its clients do one full
 * handshake), and keeps up to
 * ACP_REMOTE_TLS_SESSION_CACHE TLS 1.2 sessions for clients that resume
 * by session id; a session lives ACP_REMOTE_TLS_SESSION_LIFETIME
 * seconds. A client configuration keeps the newest session per (host,
 * port, SNI), for up to ACP_REMOTE_TLS_CLIENT_SESSIONS servers (the least
 * recently used goes), and offers it on every new socket to that server:
 * the Streamable HTTP client's POST socket, SSE streams, DELETE and
 * reconnects, a WebSocket reconnect made with the same configuration.
 *
 * Lifetime: a server or client given one keeps what it needs (a
 * reference), so the caller may free it right after acp_remote_server_new()
 * or acp_remote_connect() returned, and may hand one to many of them (they
 * then share its session cache). Do not call a setter once handed out
 * (acp_remote_tls_rotate_ticket_keys() excepted, on the loop's thread);
 * the session cache inside changes as connections are made, on the
 * loop's thread, so one configuration must not serve two threads.
 */
typedef struct acp_remote_tls acp_remote_tls;

/** Which side a TLS configuration is for. */
typedef enum acp_remote_tls_role {
  ACP_REMOTE_TLS_CLIENT = 0,
  ACP_REMOTE_TLS_SERVER = 1
} acp_remote_tls_role;

/**
 * Make an empty configuration for `role` (acp_remote_tls_role).
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL out, a bad role),
 *         ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_remote_tls_new(acp_remote_tls **out, int role,
                                  const acp_mem *mem);

/**
 * Load a certificate chain (PEM, the leaf first) and its private key (PEM,
 * unencrypted). A server needs one; for a client it is the certificate
 * presented to a server that asks (mutual TLS). The files are read now.
 * @return 0, or ACP_ERR_INVALID_ARGUMENT (NULL, a file that cannot be read
 *         or parsed, a key that does not match: acp_remote_tls_error()
 *         says which and why).
 */
ACP_EXTERN int acp_remote_tls_set_cert(acp_remote_tls *tls,
                                       const char *cert_path,
                                       const char *key_path);

/**
 * Server: require every client to present a certificate that chains to a
 * CA in `ca_path` (PEM, one or more). A client without one, or with one
 * from another CA, is refused during the handshake, before any HTTP (so
 * before a bearer token is looked at: with both set a client needs both).
 * @return 0, or ACP_ERR_INVALID_ARGUMENT (NULL, a client configuration,
 *         an unreadable file: see acp_remote_tls_error()).
 */
ACP_EXTERN int acp_remote_tls_set_client_ca(acp_remote_tls *tls,
                                            const char *ca_path);

/**
 * Client: trust the CAs in `ca_path` (PEM) instead of the system store.
 * Whatever the store, the server's certificate must name the URL's host
 * (a DNS name, sent as SNI too, or an IP address).
 * @return 0, or ACP_ERR_INVALID_ARGUMENT (NULL, a server configuration,
 *         an unreadable file: see acp_remote_tls_error()).
 */
ACP_EXTERN int acp_remote_tls_set_ca(acp_remote_tls *tls, const char *ca_path);

/**
 * Why the last setter failed (e.g. "cannot load the private key k.pem: no
 * start line"), or "". Borrowed until the next call on `tls`.
 */
ACP_EXTERN const char *acp_remote_tls_error(const acp_remote_tls *tls);

/**
 * Turn session resumption on (`on` non-zero, the default) or off. A server
 * without it issues no tickets, keeps no sessions and resumes none: every
 * handshake is a full one. A client without it keeps no sessions and
 * offers none.
 * @return 0, or ACP_ERR_INVALID_ARGUMENT (NULL).
 */
ACP_EXTERN int acp_remote_tls_set_resumption(acp_remote_tls *tls, int on);

/**
 * Server: the ALPN protocols offered, NULL-terminated, most preferred
 * first: "h2" and "http/1.1" (default: both, in that order). The server
 * picks the first of its list the client offers; a client that offers
 * ALPN but none of these is refused in the handshake with the
 * no_application_protocol alert (RFC 7301); one that offers no ALPN gets
 * HTTP/1.1, or HTTP/2 if its first bytes are the HTTP/2 preface and "h2"
 * is in the list. Without "h2" the server speaks only HTTP/1.1 over TLS
 * (an HTTP/2 client's ALPN h2 is refused, or falls back to http/1.1 if it
 * offers that too); without "http/1.1" only HTTP/2 clients get in.
 * @return 0, or ACP_ERR_INVALID_ARGUMENT (NULL, a client configuration,
 *         an empty list, an unknown or repeated name: see
 *         acp_remote_tls_error()).
 */
ACP_EXTERN int acp_remote_tls_set_alpn(acp_remote_tls *tls,
                                       const char *const *protocols);

/**
 * Server: how often the session-ticket key changes, in seconds, 1 to
 * ACP_REMOTE_TLS_TICKET_KEY_PERIOD_MAX (default
 * ACP_REMOTE_TLS_TICKET_KEY_PERIOD, 1 hour). New tickets (TLS 1.3, and
 * TLS 1.2 clients that take tickets) are encrypted with the current key;
 * the key it replaced still opens tickets, so a client that resumes just
 * after a rotation still resumes (and gets a fresh ticket under the current
 * key); older keys are wiped, so a ticket whose key became current two
 * periods ago or more is refused and the handshake is a full one. Keys are
 * drawn from the OpenSSL random generator and wiped when replaced or when
 * the configuration goes. Rotation happens when the server next issues or
 * opens a ticket after a period has passed (no timer). TLS 1.2 sessions
 * resumed by session id (the server's cache) are not tickets: they live
 * ACP_REMOTE_TLS_SESSION_LIFETIME.
 * @return 0, or ACP_ERR_INVALID_ARGUMENT (NULL, a client configuration,
 *         0 or more than the maximum).
 */
ACP_EXTERN int acp_remote_tls_set_ticket_key_period(acp_remote_tls *tls,
                                                    unsigned seconds);

/**
 * Server: rotate the session-ticket key now, as if a period had passed (the
 * current key becomes the previous one, which still opens tickets until
 * the next rotation; the previous one is wiped). For a caller with its own
 * schedule, or tests. Not thread-safe, like the rest of the configuration:
 * call it on the thread of the server's loop.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL, a client configuration) or
 *         ACP_ERR_NOMEM (the random generator failed; the keys are as
 *         they were).
 */
ACP_EXTERN int acp_remote_tls_rotate_ticket_keys(acp_remote_tls *tls);

/** Drop the caller's reference (see the lifetime above). Accepts NULL. */
ACP_EXTERN void acp_remote_tls_free(acp_remote_tls *tls);

/** Sessions a server configuration keeps for TLS 1.2 resumption by
 *  session id, at most; past it the least recently used is dropped
 *  (tickets, TLS 1.3's and 1.2's, keep nothing on the server). */
#define ACP_REMOTE_TLS_SESSION_CACHE 1024u
/** Servers a client configuration keeps a session for, at most. */
#define ACP_REMOTE_TLS_CLIENT_SESSIONS 16u
/** How long a session (a ticket, a cached session) can be resumed, in
 *  seconds: 2 hours. */
#define ACP_REMOTE_TLS_SESSION_LIFETIME 7200L
/** Default session-ticket key period, in seconds: 1 hour (a ticket opens
 *  for less than two, see acp_remote_tls_set_ticket_key_period()). */
#define ACP_REMOTE_TLS_TICKET_KEY_PERIOD 3600u
/** Largest session-ticket key period, in seconds: 7 days. */
#define ACP_REMOTE_TLS_TICKET_KEY_PERIOD_MAX 604800u

/** Default cap of one message, in bytes: 16 MiB. */
#define ACP_REMOTE_DEFAULT_MAX_MESSAGE ((size_t)16 << 20)
/** Default cap of simultaneous connections of a server. */
#define ACP_REMOTE_DEFAULT_MAX_CONNECTIONS 256u
/** Default interval between pings; a peer silent for two is dropped. */
#define ACP_REMOTE_DEFAULT_PING_MS 30000u

/**
 * Server options. Transparent; start from ACP_REMOTE_SERVER_OPTIONS_INIT
 * so fields added later get their defaults.
 */
typedef struct acp_remote_server_options {
  unsigned version; /**< 6 (1 to 5: the fields up to theirs) */
  /** Address to bind (numeric IPv4 or IPv6); NULL: "127.0.0.1". */
  const char *host;
  /** Port; 0 picks a free one (acp_remote_server_port()). */
  int port;
  /** Bearer token every request must carry, or NULL for none. */
  const char *token;
  /**
   * Host names accepted in Host and in Origin (each "name" or
   * "name:port"), NULL-terminated, in addition to the bound address and
   * "localhost" with the bound port. Requests naming another host are
   * refused with 403 (DNS rebinding, cross-site pages). NULL: none more.
   */
  const char *const *allowed_hosts;
  /** Cap of one message (0: ACP_REMOTE_DEFAULT_MAX_MESSAGE). Bigger
   *  messages close the connection with 1009. */
  size_t max_message;
  /** Cap of connections, handshaking or open (0: the default); past it
   *  a request is answered 503. */
  unsigned max_connections;
  /** Ping interval in ms (0: the default; UINT64_MAX: never). */
  uint64_t ping_ms;
  /**
   * Version 2. Name of an affinity cookie, or NULL for none. When set,
   * every new connection gets an affinity value: the one its request
   * presents in this cookie (36 characters of [0-9a-f-]), else its own
   * connection id; the answer that opens the connection (101, or the 200
   * to initialize) sets the cookie to it (Path=/; HttpOnly;
   * SameSite=Strict), and the accept callback reads it with
   * acp_remote_server_affinity(). A client that reconnects with its
   * cookies presents the value again (acp_remote_serve() uses it to give
   * a reconnecting client its agent back).
   */
  const char *affinity_cookie;
  /**
   * Version 3. Serve https:// and wss:// (TLS on every connection) with
   * this server configuration (acp_remote_tls_set_cert() done), or NULL
   * for plain TCP. The server keeps a reference. A connection that does
   * not complete the handshake within the handshake deadline (10 s, the
   * same that covers the HTTP request) is closed; one that sends
   * plaintext HTTP gets a plaintext 400 and is closed.
   */
  const acp_remote_tls *tls;
  /**
   * Version 4. How long, in ms, a Streamable HTTP POST may wait while its
   * agent is not reading (its stdin is full) before it is answered 503
   * (0: ACP_REMOTE_DEFAULT_HOLD_MS). At most 32 POSTs wait per connection,
   * in arrival order; more get 503 at once; those still waiting when the
   * connection ends get 410.
   */
  uint64_t hold_ms;
  /**
   * Version 4. Called with one line of text (no newline; borrowed for the
   * call) for events an operator should see and no caller is told of: a
   * connection refused in the TLS handshake ("TLS handshake from ADDR
   * refused: TLS: OpenSSL's reason"), plaintext HTTP sent to the TLS port,
   * a TLS error on an open connection. ADDR is the peer's address and
   * port. NULL: not reported. Runs on the loop's thread; it must not close
   * the server.
   */
  void (*log)(const char *line, void *user_data);
  /** Version 4. Passed to `log`. */
  void *log_user_data;
  /**
   * Version 5. Non-zero (with `tls` and `log`): `log` also gets a line per
   * TLS connection when its handshake ends, "TLS from ADDR: TLS session
   * resumed (TLSv1.3, ALPN h2)" or "TLS from ADDR: TLS full handshake
   * (...)", and one when the peer ends it first: "TLS end from ADDR:
   * close_notify (a clean close)" or "TLS end from ADDR: the socket ended
   * without close_notify". 0: neither (the default).
   */
  int log_tls;
  /**
   * Version 6. Stall timeout of a Streamable HTTP session stream, in ms
   * (0: ACP_REMOTE_DEFAULT_STALL_MS; UINT64_MAX: never). While a
   * session's GET stream (Acp-Session-Id) is gone, the agent's messages
   * for that session are kept for the next one (and the agent's output is
   * held back, bounded). If no stream of that session comes back to take
   * them within this time, the client is taken to be gone: the whole
   * connection ends, as when its connection stream ends (the link's read
   * callback gets UV_ETIMEDOUT; acp_remote_serve() then stops the agent,
   * which cancels its turn, or parks it with a session grace), and what
   * was kept is freed. A connection stream is not covered: its end ends
   * the connection at once, and a connection whose stream is not opened
   * within two ping intervals (at least 10 s) of initialize ends too.
   *
   * The same timeout covers a client that keeps a socket open but stops
   * reading it (a Streamable HTTP GET stream over HTTP/1.1, an HTTP/2
   * connection, a WebSocket): when output is queued on the socket (the
   * kernel took no more) and not a byte of it is taken by the peer for
   * stall_ms, what the socket carries ends the same way (UV_ETIMEDOUT on
   * the link's read callback; for HTTP/2 every connection with a stream
   * on that socket) and the socket is closed. Progress is counted in
   * bytes the peer acknowledged, not in messages: a slow reader of a big
   * message is not cut. Over HTTP/2 the same rule holds per stream: a
   * client that reads the socket but gives a stream no flow-control
   * window (no WINDOW_UPDATE, or a tiny SETTINGS_INITIAL_WINDOW_SIZE) so
   * that not a byte of that stream's output leaves for stall_ms (while
   * the socket could take more) gets that stream reset (RST_STREAM
   * CANCEL), and the connection it carried ends the same way
   * (UV_ETIMEDOUT); the HTTP/2 connection and its other streams go on.
   * A window granted slowly is progress and is not cut.
   *
   * A DELETE naming a connection that ended in the last 60 s is answered
   * 202 (as one still ending), up to 4096 such ids per server (44 bytes
   * each, taken as needed; beyond, the oldest are forgotten and get
   * 404); any other unknown id gets 404.
   */
  uint64_t stall_ms;
} acp_remote_server_options;

/** The default of acp_remote_server_options.hold_ms: 30 s. */
#define ACP_REMOTE_DEFAULT_HOLD_MS 30000
/** The default of acp_remote_server_options.stall_ms: 60 s (the TS SDK's
 *  maxOutputStallMs default). */
#define ACP_REMOTE_DEFAULT_STALL_MS 60000

#define ACP_REMOTE_SERVER_OPTIONS_INIT                                         \
  { 6, NULL, 0, NULL, NULL, 0, 0, 0, NULL, NULL, 0, NULL, NULL, 0, 0 }

/** A listening server. Opaque. */
typedef struct acp_remote_server acp_remote_server;

/**
 * A WebSocket connection was accepted. `link` belongs to the callee from
 * now on (close it with acp_uv_link_close()); its reading starts with
 * acp_uv_link_read_start() as for any link. `connection_id` is the
 * Acp-Connection-Id sent in the 101 response (borrowed for the call).
 */
typedef void (*acp_remote_accept_cb)(acp_remote_server *server,
                                     acp_uv_link *link,
                                     const char *connection_id,
                                     void *user_data);

/**
 * Listen for ACP connections on `opts->host`:`opts->port`, path `/acp`.
 * Requests are checked in this order: path (404), Host and Origin (403),
 * bearer token (401), connection cap (503), method and upgrade headers
 * (405, 426, 400); a valid upgrade gets 101 and `cb`. With `opts->tls`
 * (version 3) the TLS handshake comes first, within the same 10 s
 * deadline as the request head. Streamable HTTP
 * requests then get 400, 411, 413, 415, 404 (unknown Acp-Connection-Id),
 * 409 (a second connection stream), 503 (connection cap, or the agent is
 * not reading and 32 POSTs wait already, or one waited 30 s), 502 (the
 * link was closed before initialize was answered), 410 (a held POST whose
 * connection ended).
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL out/loop/cb, a bad host),
 *         ACP_ERR_SYSTEM (bind or listen failed: `*uv_err_out`, if not
 *         NULL, gets the libuv error), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_remote_server_new(acp_remote_server **out, uv_loop_t *loop,
                                     const acp_remote_server_options *opts,
                                     acp_remote_accept_cb cb, void *user_data,
                                     const acp_mem *mem, int *uv_err_out);

/**
 * During the accept callback: the new connection's affinity value (see
 * acp_remote_server_options.affinity_cookie), or NULL (no affinity
 * cookie configured, or outside the callback). Borrowed for the call.
 */
ACP_EXTERN const char *
acp_remote_server_affinity(const acp_remote_server *server);

/** The port the server listens on. */
ACP_EXTERN int acp_remote_server_port(const acp_remote_server *server);

/** Connections open now (handshaking or handed out and not closed). */
ACP_EXTERN unsigned
acp_remote_server_connections(const acp_remote_server *server);

/**
 * Stop listening and drop connections still handshaking; links already
 * handed out stay open (they are their owners'). Frees the server once its
 * handles are closed (run the loop). Accepts NULL.
 */
ACP_EXTERN void acp_remote_server_close(acp_remote_server *server);

/** Which profile acp_remote_connect() speaks. */
typedef enum acp_remote_transport {
  /** From the URL: ws:// and http:// (wss:// and https:// over TLS) all
   *  upgrade to WebSocket (the profile every RFD server offers). */
  ACP_REMOTE_AUTO = 0,
  /** WebSocket (GET with Upgrade: websocket). */
  ACP_REMOTE_WEBSOCKET = 1,
  /** Streamable HTTP (POST, GET SSE streams, DELETE); http:// or
   *  https://. */
  ACP_REMOTE_HTTP = 2,
  /** Streamable HTTP over HTTP/2: one TCP connection carries every POST
   *  and SSE stream as HTTP/2 streams. http:// speaks h2c with prior
   *  knowledge (the server must know HTTP/2); https:// offers ALPN "h2"
   *  then "http/1.1" and goes on over HTTP/1.1 when the server picks it
   *  (acp_remote_http_version() tells which). */
  ACP_REMOTE_HTTP2 = 3
} acp_remote_transport;

/** Client options; start from ACP_REMOTE_CLIENT_OPTIONS_INIT. */
typedef struct acp_remote_client_options {
  unsigned version; /**< 4 (1: without `transport`, 2: without `tls`, 3:
                         without `log`) */
  /** Sent as "Authorization: Bearer TOKEN", or NULL. */
  const char *token;
  /** More request headers, each "Name: value", NULL-terminated, or NULL. */
  const char *const *headers;
  /** Cap of one received message (0: the default). */
  size_t max_message;
  /** Ping interval in ms (0: the default; UINT64_MAX: never). WebSocket
   *  only. */
  uint64_t ping_ms;
  /** The profile (acp_remote_transport). Version 2. */
  int transport;
  /**
   * Version 3. A client configuration for wss:// and https:// URLs (a CA
   * file, a client certificate), or NULL: the system's CA store, no
   * client certificate. Ignored for ws:// and http://. The connection
   * keeps a reference.
   */
  const acp_remote_tls *tls;
  /**
   * Version 4. Called with one line of text (no newline; borrowed for the
   * call) for each TLS socket the connection opens once its handshake is
   * over, e.g. "socket 2 (SSE stream) to 127.0.0.1:8443: TLS session
   * resumed (TLSv1.3, ALPN http/1.1)" or "...: TLS full handshake
   * (...)" (", the offered session was not resumed" when the server
   * turned the session down). Also, for Streamable HTTP, how the DELETE
   * sent when the link is closed was answered: "DELETE of connection ID:
   * HTTP 202" (this one comes after acp_uv_link_close(), while the loop
   * runs, at most 2 s later; none if the DELETE got no answer). NULL: not
   * reported. Runs on the loop's thread; it must not close the link.
   */
  void (*log)(const char *line, void *user_data);
  /** Version 4. Passed to `log`. */
  void *log_user_data;
} acp_remote_client_options;

#define ACP_REMOTE_CLIENT_OPTIONS_INIT                                         \
  { 4, NULL, NULL, 0, 0, ACP_REMOTE_AUTO, NULL, NULL, NULL }

/**
 * Called once when the handshake of acp_remote_connect() is over (for
 * Streamable HTTP: when `initialize` was answered, or refused). Over
 * Streamable HTTP it is called once more, with an error, if the connection
 * fails later (a refused POST or stream, the connection stream ending),
 * before the link's read side ends: `detail` then says why (e.g. "the
 * server refused a message: HTTP 404: unknown Acp-Connection-Id").
 * @param status  0: connected; otherwise an ACP_ERR_* code
 *                (ACP_ERR_NOT_FOUND: the name did not resolve;
 *                ACP_ERR_SYSTEM: connect failed; ACP_ERR_PROTOCOL: the
 *                server refused the upgrade or answered nonsense, or the
 *                TLS handshake failed: `detail` then names OpenSSL's
 *                reason, e.g. "TLS: certificate verify failed: hostname
 *                mismatch").
 * @param detail  what went wrong (e.g. "HTTP 401: invalid token"), or the
 *                Acp-Connection-Id on success; borrowed for the call.
 * On failure the link's read side then ends with an error.
 */
typedef void (*acp_remote_connect_cb)(acp_uv_link *link, int status,
                                      const char *detail, void *user_data);

/**
 * Connect to `url` (ws://HOST[:PORT]/PATH, http://..., or over TLS
 * wss://... and https://..., see acp_remote_client_options.tls) and return
 * the link at once: what is written before the handshake completes is sent
 * after it.
 *
 * WebSocket (ACP_REMOTE_AUTO, ACP_REMOTE_WEBSOCKET): one upgrade, then a
 * text frame per line each way.
 *
 * Streamable HTTP (ACP_REMOTE_HTTP, http:// or https://): each line written is
 * one POST, sent in order (the next when the previous is answered); the
 * first must be an `initialize` request, whose 200 answer (checked to be
 * its response) is the first line read and names the Acp-Connection-Id.
 * The agent's other messages are read from the connection's GET SSE
 * stream and from a session stream per session (opened when a response
 * names a `sessionId` or a message for a session is sent); POSTs carry
 * Acp-Session-Id for a session's messages and for answers to the agent's
 * requests about a session. A session stream that ends after carrying
 * events is opened again at once with Last-Event-ID, and an event already
 * read (by its id) is dropped. TLS sockets end with close_notify.
 * Cookies set by any answer are sent with every
 * later request. A refused POST of a request (other than 401, 403, 404,
 * 410) becomes a JSON-RPC error response to it (code -32603, data
 * {status, body}); anything else refused ends the link (see
 * acp_remote_connect_cb). Closing the link sends DELETE.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL, a URL we cannot parse, a bad
 *         header or token, ACP_REMOTE_HTTP with ws:// or wss://, a
 *         server TLS configuration), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_remote_connect(acp_uv_link **out, uv_loop_t *loop,
                                  const char *url,
                                  const acp_remote_client_options *opts,
                                  acp_remote_connect_cb cb, void *user_data,
                                  const acp_mem *mem);

/* MARK: - Serving an agent */

/** Options of acp_remote_serve(). */
typedef struct acp_remote_serve_options {
  unsigned version; /**< 4 (1: up to user_data, 2: up to session_grace_ms,
                         3: up to read_spin_us) */
  acp_remote_server_options server;
  /** The agent command (argv[0] looked up in PATH), NULL-terminated. */
  const char *const *agent_argv;
  /** Print a line per connection on stderr. */
  int verbose;
  /**
   * Called once listening, with the port (e.g. to print it). May be NULL.
   */
  void (*on_listening)(int port, void *user_data);
  void *user_data;
  /**
   * Version 2. How long (ms) an agent outlives a connection that dropped
   * (a socket or stream that broke, a peer that stopped answering pings;
   * not a WebSocket close or a DELETE, which end it at once), so that the
   * client can reconnect and session/load or session/resume its sessions
   * in the same agent process. 0 (default): stopped at once. The server
   * then sets the affinity cookie "acp_agent" (unless
   * server.affinity_cookie names another); a new connection presenting
   * the value of a waiting agent is given that agent (it is sent the new
   * connection's initialize; what the agent wrote meanwhile was dropped,
   * up to a line boundary). A connection that drops with prompt turns in
   * flight (session/prompt requests not yet answered) first sends the
   * agent session/cancel for each of their sessions. At most
   * server.max_connections agents wait at once (they do not count as
   * connections): a drop beyond that stops the one that waited longest.
   */
  uint64_t session_grace_ms;
  /**
   * Version 3. Bounded read spin on the agent's stdout, in microseconds
   * (0, the default: off). After a client message was written to its
   * agent, just before the loop would sleep, the agent's stdout is polled
   * with read(2) (sched_yield() between polls) until its answer came and
   * was relayed, or for at most this long: an answer inside the budget
   * saves the server a sleep in epoll and a wake-up. Never while idle and
   * never without a message just forwarded; it costs up to this much CPU
   * per client message the agent does not answer within the budget (a
   * notification, a long turn), and other connections wait while it
   * spins. Measurements: docs/decisions.md.
   */
  uint32_t read_spin_us;
  /**
   * Version 4. Non-zero: hand each plain WebSocket connection (not TLS,
   * not Streamable HTTP: those stay relayed) to its agent after the 101,
   * which then speaks WebSocket itself and this process leaves the data
   * path. The agent is started with a control socket as its descriptor 3,
   * named by the environment variable ACP_REMOTE_HANDOFF_ENV, and its
   * stdin closed at once; after the 101 the connection's socket, the
   * bytes already read past the request and the WebSocket settings
   * (max_message, ping_ms, server.stall_ms) are sent there
   * (acp_remote_handoff_receive() reads them). Once the agent answers that it
   * took the connection, our copy of the socket is closed without a word to the
   * client; the agent stays the connection's owner here (it counts against
   * max_connections, is stopped with the shutdown ladder on SIGTERM, and
   * its exit ends the connection). An agent that does not answer within
   * 10 s, closes the control socket or exits first did not take it: the
   * client gets close 1011 and a line on stderr says why. The agent's
   * stdout is read and dropped. When the connection ends here (SIGTERM,
   * SIGINT, a failure) a handed agent is sent SIGTERM at once (its stdin
   * rung is moot) and then the ladder: an agent from
   * acp_remote_handoff_open() run by `acp agent` closes its WebSocket
   * with 1001 on SIGTERM, as a relayed connection is closed here.
   * The message also carries server.stall_ms and whether connections
   * park: with session_grace_ms, an agent whose connection dropped says
   * so on its control socket ("parked") and is kept as a relayed one is
   * (grace timer, affinity cookie); a reconnect presenting the cookie is
   * handed to it with a second message on the same socket. The Host,
   * Origin, token and connection-cap checks all happen before.
   */
  int handoff;
} acp_remote_serve_options;

/** The environment variable naming the descriptor of the control socket
 *  of an agent started by acp_remote_serve() with `handoff`. */
#define ACP_REMOTE_HANDOFF_ENV "ACP_HANDOFF_FD"

/** Settings of an adopted WebSocket (acp_remote_adopt()). */
typedef struct acp_remote_adopt_options {
  unsigned version; /**< 1 */
  /** Cap of one message (0: ACP_REMOTE_DEFAULT_MAX_MESSAGE); bigger
   *  messages close the connection with 1009. */
  size_t max_message;
  /** Ping interval in ms (0: the default; UINT64_MAX: never). */
  uint64_t ping_ms;
  /** Stall timeout in ms (0: ACP_REMOTE_DEFAULT_STALL_MS; UINT64_MAX:
   *  never): output queued with not a byte taken by the client for this
   *  long ends the link (its read callback gets UV_ETIMEDOUT), as on a
   *  server's WebSocket (acp_remote_server_options.stall_ms). A handoff
   *  from acp_remote_serve() carries the server's value. */
  uint64_t stall_ms;
} acp_remote_adopt_options;

#define ACP_REMOTE_ADOPT_OPTIONS_INIT                                          \
  { 1, 0, 0, 0 }

/**
 * Adopt the server side of a WebSocket connection whose upgrade (the 101)
 * another process already answered: `fd` is its connected TCP socket,
 * `pre[0..pre_len)` the bytes that process read past the request head
 * (frames the client sent at once; copied). The result is the same kind
 * of link acp_remote_server_new()'s accept callback hands out: one line
 * per message, pings, 1009 over max_message, the close frame on
 * acp_uv_link_close() (with acp_uv_link_set_close_code()'s code). Its
 * reading starts with acp_uv_link_read_start().
 * @param out  receives the link (the caller owns it: acp_uv_link_close());
 *             NULL on failure.
 * @param fd   taken: on success the link owns and closes it; on failure
 *             it is closed too.
 * @param opts NULL for the defaults.
 * @param mem  allocator (copied) or NULL.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (NULL out or loop, fd < 0);
 *         ACP_ERR_NOMEM; ACP_ERR_SYSTEM (libuv refused the descriptor).
 */
ACP_EXTERN int acp_remote_adopt(acp_uv_link **out, uv_loop_t *loop, int fd,
                                const char *pre, size_t pre_len,
                                const acp_remote_adopt_options *opts,
                                const acp_mem *mem);

/** A connection handed over by acp_remote_serve() (`handoff`). Opaque. */
typedef struct acp_remote_handoff acp_remote_handoff;

/**
 * Agent side of `handoff`: read one handoff message from `control_fd`
 * (the descriptor ACP_REMOTE_HANDOFF_ENV names). Blocking; a short
 * process per connection reads it first thing.
 * @param out        receives the handoff (free it with
 *                   acp_remote_handoff_free()); NULL on failure.
 * @param control_fd borrowed: stays open (the serving process sees our
 *                   answer, then our exit, through it).
 * @param mem        allocator (copied) or NULL.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (NULL out, bad fd); ACP_ERR_CLOSED
 *         (the control socket ended before a whole message);
 *         ACP_ERR_PROTOCOL (not a handoff message, or no descriptor with
 *         it); ACP_ERR_SYSTEM (a read failed: errno); ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_remote_handoff_receive(acp_remote_handoff **out,
                                          int control_fd, const acp_mem *mem);

/**
 * Adopt the handed connection (acp_remote_adopt() with the settings the
 * server sent) and tell the server it was taken ("ok" on the control
 * socket), after which the server no longer touches it. Once per handoff.
 * @param out  receives the link (the caller owns it); NULL on failure.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (NULL, or adopted already);
 *         ACP_ERR_NOMEM; ACP_ERR_SYSTEM (the descriptor or the answer
 *         failed: the server then closes the connection with 1011).
 */
ACP_EXTERN int acp_remote_handoff_adopt(acp_remote_handoff *h, uv_loop_t *loop,
                                        acp_uv_link **out);

/** Free a handoff (closes its socket unless adopted). Accepts NULL. */
ACP_EXTERN void acp_remote_handoff_free(acp_remote_handoff *h);

/** 1 if the server parks the connection of `h` when it drops (it serves
 *  with a session grace), else 0 (also for NULL). */
ACP_EXTERN int acp_remote_handoff_resumable(const acp_remote_handoff *h);

/**
 * Called by the link of acp_remote_handoff_open(): `parked` 1 when its
 * connection dropped and the server was told so (the link waits for a
 * reconnect; what is written to it meanwhile is dropped), 0 when a
 * reconnect was adopted (the client sends initialize again). On the
 * loop's thread; it may write to the link but not close it.
 */
typedef void (*acp_remote_handoff_park_cb)(acp_uv_link *link, int parked,
                                           void *user_data);

/**
 * Agent side of `handoff`, all of it: read the first handoff message
 * from `control_fd` (blocking, as acp_remote_handoff_receive()), adopt
 * the connection and answer the server. If the server does not park
 * connections (no session grace), *out is the adopted WebSocket link
 * itself and `cb` is never called. Otherwise *out is a link that outlives
 * its connections: when a connection drops (its socket breaks or ends
 * without a close frame, the peer stops answering pings, the stall
 * timeout) the link does not end: it tells the server "parked", calls
 * `cb` (1) and drops what is written to it (an agent should end its
 * turns in flight there: their client is gone) until the server hands
 * over a reconnect, which it adopts (`cb` (0)); the agent's next line
 * goes to the new client. Its read side ends (UV_EOF) on a close frame,
 * and when the server closes the control socket while parked (the grace
 * ran out; UV_EPROTO for a message it could not use). Closing it closes
 * the connection with its close code (acp_uv_link_set_close_code(), e.g.
 * 1001 for an agent told to stop).
 * @param out        receives the link; the caller owns it and closes it
 *                   with acp_uv_link_close(). NULL on failure.
 * @param control_fd borrowed: must stay open while the link lives (it is
 *                   watched while parked; the server sees our exit
 *                   through it). Made blocking.
 * @param cb         may be NULL.
 * @param mem        allocator (copied) or NULL.
 * @return 0, or the errors of acp_remote_handoff_receive() and
 *         acp_remote_handoff_adopt().
 */
ACP_EXTERN int acp_remote_handoff_open(acp_uv_link **out, uv_loop_t *loop,
                                       int control_fd,
                                       acp_remote_handoff_park_cb cb,
                                       void *user_data, const acp_mem *mem);

/**
 * Blocking: serve `opts->agent_argv` on a private loop, one agent process
 * per connection, relaying lines both ways with backpressure (a slow
 * reader stops the reading of its agent's stdout). When a connection ends
 * its agent is stopped with the shutdown ladder (stdin closed, SIGTERM,
 * SIGKILL). When an agent ends by itself its connection is closed once its
 * last line was relayed: over WebSocket with 1000 if it exited with status
 * 0, 1011 if it failed or was killed; over Streamable HTTP its streams end.
 * Over Streamable HTTP the agent's first line must be the response to the
 * initialize request (its id, a result or an error): anything else is
 * answered 502 and ends the connection. On SIGTERM or SIGINT it closes
 * everything (WebSocket: 1001) and returns. Ignores SIGPIPE. Lines of the
 * server's log (opts->server.log, version 4; refused TLS handshakes and
 * plaintext on the TLS port) go to stderr prefixed "acp serve: " unless
 * the caller set its own callback.
 * @return 0, or an error from starting the server (as
 *         acp_remote_server_new()).
 */
ACP_EXTERN int acp_remote_serve(const acp_remote_serve_options *opts);

/**
 * Which HTTP version a Streamable HTTP link from acp_remote_connect()
 * speaks: "HTTP/2" or "HTTP/1.1" (ACP_REMOTE_HTTP2 over https:// when the
 * server's ALPN chose http/1.1). NULL while that is not decided yet (the
 * TLS handshake is under way) and for any other link. The string is
 * static.
 */
ACP_EXTERN const char *acp_remote_http_version(const acp_uv_link *link);

#ifdef __cplusplus
}
#endif

#endif /* ACP_REMOTE_H */
