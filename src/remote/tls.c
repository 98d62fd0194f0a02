/*
 * TLS for libacp-remote: the public configuration object (acp/remote.h,
 * acp_remote_tls_*) and the per-connection filter of tls_int.h.
 *
 * Why memory BIOs (docs/decisions.md): libuv owns the sockets, reads into
 * our buffers and queues our writes with their completion callbacks, which
 * is where backpressure comes from (a link's bytes count as sent when the
 * write that carries them completes). Letting OpenSSL read and write the
 * file descriptor would take that away and make every path a second one.
 * With a read BIO we fill and a write BIO we drain, the filter is a pure
 * bytes-in / bytes-out transform the connection code calls at the two
 * points where it touches the socket, and it can be driven without a
 * socket at all (tests/unit/test_remote_tls.c runs two filters into each
 * other).
 *
 * OpenSSL allocates its own memory (its allocator is process-wide, so we
 * leave it alone); the filter's own structures use the caller's acp_mem.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls_int.h"

/* A client's newest session with one server; `key` is "host\nport\nSNI". */
typedef struct csess {
  char *key; /* NULL: a free slot */
  SSL_SESSION *sess;
  uint64_t used; /* the configuration's tick when last stored or offered */
} csess;

/* A session-ticket key: its name (the first 16 bytes of every ticket made
 * with it), the AES-256-CBC and HMAC-SHA256 keys, and when it became the
 * current key (seconds on the configuration's clock). */
typedef struct tkey {
  bool set;
  unsigned char name[16];
  unsigned char aes[32];
  unsigned char hmac[32];
  uint64_t born;
} tkey;

struct acp_remote_tls {
  acp_mem mem;
  SSL_CTX *ctx;
  int role;
  unsigned refs;
  bool have_cert;
  bool have_ca;   /* client: a --ca file replaced the system store */
  bool no_resume; /* acp_remote_tls_set_resumption(t, 0) */
  /* server: the ALPN list, wire format (a length byte before each name) */
  unsigned char alpn[16];
  unsigned alpn_len;
  /* client: sessions kept for the next socket to the same server */
  csess sess[ACP_REMOTE_TLS_CLIENT_SESSIONS];
  uint64_t tick;
  /* server: the ticket key ring (see "Ticket keys" below) */
  tkey tk_cur, tk_prev;
  uint64_t tk_period; /* seconds */
  uint64_t (*clock)(void *arg);
  void *clock_arg;
  char err[256];
};

struct acp__tls {
  acp_mem mem;
  acp_remote_tls *conf;
  SSL *ssl;
  BIO *rbio, *wbio; /* owned by ssl */
  acp__buf early;   /* plaintext written before the handshake ended */
  char *key;        /* client: where its sessions are kept, or NULL */
  bool ready;
  bool failed;
  bool closed; /* close_notify queued */
  bool plain_http;
  bool offered; /* client: a kept session was offered */
  bool resumed; /* the handshake resumed a session */
  char err[256];
  char alpn[32];
};

/*
 * ALPN, in wire format (a length byte before each name), most preferred
 * first. The server offers HTTP/2 and HTTP/1.1 unless told otherwise
 * (acp_remote_tls_set_alpn()): it picks the first of its list the client
 * offers, and the connection needs no branch on the result, since an
 * HTTP/2 client's first bytes are the connection preface either way
 * (remote_uv.c looks for it after TLS as on cleartext, when ALPN agreed on
 * h2 or on nothing and h2 is offered). The client asks for HTTP/1.1 only:
 * its Streamable HTTP and WebSocket code speak nothing else, and a server
 * that agreed to h2 would expect frames.
 */
static const unsigned char alpn_server[] = "\x02h2\x08http/1.1";
static const unsigned char alpn_client[] = "\x08http/1.1";
/* A client that speaks HTTP/2 (ACP_REMOTE_HTTP2) asks for it first. */
static const unsigned char alpn_client_h2[] = "\x02h2\x08http/1.1";

/* MARK: - Errors (Private) */

/* "what: reason" from OpenSSL's error queue (which is then cleared). */
static void ossl_err(char *out, size_t cap, const char *what) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  char code[64];
  if (e && !r) {
    snprintf(code, sizeof(code), "error %lu", e);
    r = code;
  }
  /* A reason cut at cap is still worth reporting; only a failure empties it. */
  if (snprintf(out, cap, "%s%s%s", what, r ? ": " : "", r ? r : "") < 0)
    out[0] = '\0';
  ERR_clear_error();
}

/*
 * The server's choice: the first of its list the client offers. A client
 * that offered ALPN but nothing we speak is refused with
 * no_application_protocol (RFC 7301, 3.2): going on would hand an HTTP/2-
 * only client (node:http2) an HTTP/1.1 server, or the reverse, and it
 * would fail later with a less clear error. A client that sent no ALPN
 * does not get here.
 */
static int alpn_select(SSL *ssl, const unsigned char **out,
                       unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg) {
  const acp_remote_tls *conf = arg;
  unsigned char *o = NULL;
  (void)ssl;
  if (SSL_select_next_proto(&o, outlen, conf->alpn, conf->alpn_len, in,
                            inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = o;
  return SSL_TLSEXT_ERR_OK;
}

/* MARK: - Client sessions (Private) */

/*
 * Why the client keeps sessions itself instead of in OpenSSL's client
 * cache: OpenSSL never looks a client session up by itself (the caller has
 * to SSL_set_session() one), and the key that matters is the server's
 * (host, port, SNI), which OpenSSL does not know. In TLS 1.3 the ticket
 * comes after the handshake (in a NewSessionTicket message read with the
 * first records), so sessions are taken from the new-session callback,
 * which runs for TLS 1.2 at the end of the handshake too. The newest wins:
 * a resumed handshake brings a fresh ticket, and an older one may have
 * been issued with keys the server no longer has.
 */

static void csess_clear(csess *c, const acp_mem *mem) {
  if (!c->key)
    return;
  acp__free(mem, c->key);
  SSL_SESSION_free(c->sess);
  memset(c, 0, sizeof(*c));
}

static csess *csess_find(acp_remote_tls *conf, const char *key) {
  for (size_t i = 0; i < ACP_REMOTE_TLS_CLIENT_SESSIONS; i++)
    if (conf->sess[i].key && strcmp(conf->sess[i].key, key) == 0)
      return &conf->sess[i];
  return NULL;
}

/* Keep `sess` (our reference from now on) as `key`'s newest. 1 if kept. */
static int csess_keep(acp_remote_tls *conf, const char *key,
                      SSL_SESSION *sess) {
  csess *c = csess_find(conf, key);
  if (!c) {
    /* A free slot, else the least recently used. */
    c = &conf->sess[0];
    for (size_t i = 0; i < ACP_REMOTE_TLS_CLIENT_SESSIONS && c->key; i++)
      if (!conf->sess[i].key || conf->sess[i].used < c->used)
        c = &conf->sess[i];
    char *k = acp__strdup(&conf->mem, key);
    if (!k)
      return 0; /* not kept: the next socket does a full handshake */
    csess_clear(c, &conf->mem);
    c->key = k;
  }
  SSL_SESSION_free(c->sess);
  c->sess = sess;
  c->used = ++conf->tick;
  return 1;
}

/* OpenSSL's new-session callback (client configurations): returning 1
 * takes the reference it hands us. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess) {
  acp__tls *t = SSL_get_app_data(ssl);
  if (!t || !t->key || t->conf->no_resume || !SSL_SESSION_is_resumable(sess))
    return 0;
  return csess_keep(t->conf, t->key, sess);
}

/* MARK: - Ticket keys (Private) */

/*
 * Why our own key ring (docs/decisions.md): OpenSSL's built-in ticket keys
 * are drawn once by SSL_CTX_new() and never change, so a ticket stolen
 * from a client (or a key read from the process) would decrypt every
 * session of the server's whole life. Here the current key encrypts new
 * tickets and is replaced every tk_period seconds; the one it replaced
 * still decrypts (a client that got its ticket just before a rotation
 * still resumes, and is handed a fresh ticket under the current key), and
 * anything older is gone: a ticket is accepted for less than two periods
 * after its key became current, then the handshake is a full one.
 *
 * Rotation is lazy: the key ring looks at the clock whenever OpenSSL asks
 * for a key (issuing or opening a ticket), so no timer is needed and an
 * idle server rotates nothing until its next handshake; the ages are
 * still those above, since each key carries the time it became current.
 * acp_remote_tls_rotate_ticket_keys() rotates at once (tests, or a caller
 * with its own schedule). The configuration is used on one thread (the
 * server's loop), like everything else in it, so the ring has no lock.
 */

static uint64_t clock_monotonic(void *arg) {
  struct timespec ts;
  (void)arg;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec;
}

static void tkey_wipe(tkey *k) {
  OPENSSL_cleanse(k, sizeof(*k));
}

/* A fresh current key; the current one becomes the previous one. On a
 * failure of the random generator nothing changes (the ring keeps its
 * keys, or has none and issues no ticket). */
static int tk_rotate(acp_remote_tls *t, uint64_t now) {
  tkey k;
  memset(&k, 0, sizeof(k));
  if (RAND_bytes(k.name, sizeof(k.name)) != 1 ||
      RAND_bytes(k.aes, sizeof(k.aes)) != 1 ||
      RAND_bytes(k.hmac, sizeof(k.hmac)) != 1) {
    ERR_clear_error();
    tkey_wipe(&k);
    return ACP_ERR_NOMEM;
  }
  k.set = true;
  k.born = now;
  tkey_wipe(&t->tk_prev);
  t->tk_prev = t->tk_cur;
  t->tk_cur = k;
  tkey_wipe(&k);
  return 0;
}

/* Bring the ring up to `now`: a current key younger than a period, the
 * previous one only while it is younger than two. */
static void tk_update(acp_remote_tls *t, uint64_t now) {
  uint64_t p = t->tk_period;
  if (t->tk_prev.set && now - t->tk_prev.born >= 2 * p)
    tkey_wipe(&t->tk_prev);
  if (!t->tk_cur.set || now - t->tk_cur.born >= p) {
    bool stale = t->tk_cur.set && now - t->tk_cur.born >= 2 * p;
    if (tk_rotate(t, now) == 0 && stale)
      tkey_wipe(&t->tk_prev); /* two periods passed: it may not decrypt */
  }
}

static int tk_keys(const tkey *k, EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx,
                   unsigned char *iv, int enc) {
  OSSL_PARAM params[2];
  params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                               (char *)"SHA256", 0);
  params[1] = OSSL_PARAM_construct_end();
  if (EVP_CipherInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv, enc) != 1 ||
      EVP_MAC_CTX_set_params(hctx, params) != 1 ||
      EVP_MAC_init(hctx, k->hmac, sizeof(k->hmac), NULL) != 1) {
    ERR_clear_error();
    return -1;
  }
  return 1;
}

/*
 * OpenSSL's ticket key callback (SSL_CTX_set_tlsext_ticket_key_evp_cb).
 * Issuing (enc 1): a random IV and the current key; 1, or 0 for no ticket
 * (no key). Opening (enc 0): 0 for a name we do not know (any more), a
 * full handshake; else 2, "resume and issue a fresh ticket", with either
 * key. With the previous key that is the point (the fresh ticket is made
 * with the current key, so the client keeps up with the rotation); with
 * the current one it is what OpenSSL's own keys do in TLS 1.3, where a 1
 * here would send no ticket at all: the client's only session is then
 * the one it just used, which OpenSSL marks not resumable when that
 * connection ends without close_notify (test_resume_tls13 caught it).
 * TLS 1.2 with the current key: 1, the client's ticket stays good.
 */
static int on_ticket_key(SSL *ssl, unsigned char key_name[16],
                         unsigned char *iv, EVP_CIPHER_CTX *cctx,
                         EVP_MAC_CTX *hctx, int enc) {
  acp_remote_tls *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
  if (!t)
    return 0;
  tk_update(t, t->clock(t->clock_arg));
  if (enc) {
    if (!t->tk_cur.set)
      return 0;
    int ivlen = EVP_CIPHER_get_iv_length(EVP_aes_256_cbc());
    if (RAND_bytes(iv, ivlen) != 1) {
      ERR_clear_error();
      return 0;
    }
    memcpy(key_name, t->tk_cur.name, sizeof(t->tk_cur.name));
    return tk_keys(&t->tk_cur, cctx, hctx, iv, 1);
  }
  if (t->tk_cur.set &&
      CRYPTO_memcmp(key_name, t->tk_cur.name, sizeof(t->tk_cur.name)) == 0) {
    int r = tk_keys(&t->tk_cur, cctx, hctx, iv, 0);
    return r == 1 && SSL_version(ssl) >= TLS1_3_VERSION ? 2 : r;
  }
  if (t->tk_prev.set &&
      CRYPTO_memcmp(key_name, t->tk_prev.name, sizeof(t->tk_prev.name)) == 0)
    return tk_keys(&t->tk_prev, cctx, hctx, iv, 0) == 1 ? 2 : -1;
  return 0;
}

/* MARK: - Configuration (Public) */

int acp_remote_tls_new(acp_remote_tls **out, int role, const acp_mem *mem) {
  acp_mem m;
  if (out)
    *out = NULL;
  if (!out || (role != ACP_REMOTE_TLS_CLIENT && role != ACP_REMOTE_TLS_SERVER))
    return ACP_ERR_INVALID_ARGUMENT;
  acp__mem_init(&m, mem);
  acp_remote_tls *t = acp__calloc(&m, 1, sizeof(*t));
  if (!t)
    return ACP_ERR_NOMEM;
  t->mem = m;
  t->role = role;
  t->refs = 1;
  t->ctx = SSL_CTX_new(role == ACP_REMOTE_TLS_SERVER ? TLS_server_method()
                                                     : TLS_client_method());
  if (!t->ctx) {
    ERR_clear_error();
    acp__free(&m, t);
    return ACP_ERR_NOMEM;
  }
  SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
  /* No renegotiation (TLS 1.2): nothing here needs it, and it would let a
   * peer make us write while we only meant to read. */
  SSL_CTX_set_options(t->ctx, SSL_OP_NO_RENEGOTIATION);
  /* Writes go to a memory BIO, which always takes them whole. */
  SSL_CTX_set_mode(t->ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_timeout(t->ctx, ACP_REMOTE_TLS_SESSION_LIFETIME);
  if (role == ACP_REMOTE_TLS_SERVER) {
    memcpy(t->alpn, alpn_server, sizeof(alpn_server) - 1);
    t->alpn_len = sizeof(alpn_server) - 1;
    SSL_CTX_set_alpn_select_cb(t->ctx, alpn_select, t);
    /* Resumption (docs/decisions.md): tickets are made with our key
     * ring (on_ticket_key(), rotated every tk_period). One ticket per
     * handshake: they are stateless and may be used again (no 0-RTT data
     * here, so no replay to guard against), and our client offers its
     * newest on every socket. The session id context is required for
     * resumption when client certificates are verified (mutual TLS). */
    static const unsigned char sid_ctx[] = "libacp-remote";
    SSL_CTX_set_num_tickets(t->ctx, 1);
    SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(t->ctx, ACP_REMOTE_TLS_SESSION_CACHE);
    t->tk_period = ACP_REMOTE_TLS_TICKET_KEY_PERIOD;
    t->clock = clock_monotonic;
    SSL_CTX_set_app_data(t->ctx, t);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(t->ctx, on_ticket_key);
    if (SSL_CTX_set_session_id_context(t->ctx, sid_ctx, sizeof(sid_ctx) - 1) !=
        1) {
      ERR_clear_error();
      SSL_CTX_free(t->ctx);
      acp__free(&m, t);
      return ACP_ERR_NOMEM;
    }
  } else {
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    /* Sessions go to on_new_session() and nowhere else (see above). */
    SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_CLIENT |
                                               SSL_SESS_CACHE_NO_INTERNAL);
    SSL_CTX_sess_set_new_cb(t->ctx, on_new_session);
    if (SSL_CTX_set_alpn_protos(t->ctx, alpn_client, sizeof(alpn_client) - 1) !=
        0) {
      ERR_clear_error();
      SSL_CTX_free(t->ctx);
      acp__free(&m, t);
      return ACP_ERR_NOMEM;
    }
  }
  *out = t;
  return 0;
}

int acp_remote_tls_set_resumption(acp_remote_tls *t, int on) {
  if (!t)
    return ACP_ERR_INVALID_ARGUMENT;
  t->no_resume = !on;
  if (t->role == ACP_REMOTE_TLS_SERVER) {
    /* Off: no tickets issued (TLS 1.3), none taken (SSL_OP_NO_TICKET),
     * no session cached for TLS 1.2 session ids, so none looked up. */
    SSL_CTX_set_num_tickets(t->ctx, on ? 1 : 0);
    SSL_CTX_set_session_cache_mode(t->ctx, on ? SSL_SESS_CACHE_SERVER
                                              : SSL_SESS_CACHE_OFF);
    if (on)
      SSL_CTX_clear_options(t->ctx, SSL_OP_NO_TICKET);
    else
      SSL_CTX_set_options(t->ctx, SSL_OP_NO_TICKET);
  } else if (!on) {
    for (size_t i = 0; i < ACP_REMOTE_TLS_CLIENT_SESSIONS; i++)
      csess_clear(&t->sess[i], &t->mem);
  }
  return 0;
}

int acp_remote_tls_set_ticket_key_period(acp_remote_tls *t, unsigned seconds) {
  if (!t || t->role != ACP_REMOTE_TLS_SERVER || seconds == 0 ||
      seconds > ACP_REMOTE_TLS_TICKET_KEY_PERIOD_MAX)
    return ACP_ERR_INVALID_ARGUMENT;
  t->tk_period = seconds;
  return 0;
}

int acp_remote_tls_rotate_ticket_keys(acp_remote_tls *t) {
  if (!t || t->role != ACP_REMOTE_TLS_SERVER)
    return ACP_ERR_INVALID_ARGUMENT;
  uint64_t now = t->clock(t->clock_arg);
  /* A ring never used has no key yet: the first one is drawn, and the
   * rotation asked for replaces it, so the count of rotations holds. */
  if (!t->tk_cur.set) {
    int rv = tk_rotate(t, now);
    if (rv != 0)
      return rv;
  }
  return tk_rotate(t, now);
}

int acp_remote_tls_set_alpn(acp_remote_tls *t, const char *const *protocols) {
  unsigned char w[sizeof(t->alpn)];
  unsigned n = 0;
  if (!t || !protocols || t->role != ACP_REMOTE_TLS_SERVER)
    return ACP_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; protocols[i]; i++) {
    const char *p = protocols[i];
    size_t len = strlen(p);
    if (strcmp(p, "h2") != 0 && strcmp(p, "http/1.1") != 0) {
      snprintf(t->err, sizeof(t->err),
               "unknown ALPN protocol '%.64s' (h2 and http/1.1 are known)", p);
      return ACP_ERR_INVALID_ARGUMENT;
    }
    for (unsigned j = 0; j < n; j += 1u + w[j])
      if (w[j] == len && memcmp(w + j + 1, p, len) == 0) {
        snprintf(t->err, sizeof(t->err), "ALPN protocol '%.16s' given twice",
                 p);
        return ACP_ERR_INVALID_ARGUMENT;
      }
    /* Two known names, each once: at most 12 bytes. */
    w[n] = (unsigned char)len;
    memcpy(w + n + 1, p, len);
    n += 1u + (unsigned)len;
  }
  if (n == 0) {
    snprintf(t->err, sizeof(t->err), "no ALPN protocol given");
    return ACP_ERR_INVALID_ARGUMENT;
  }
  memcpy(t->alpn, w, n);
  t->alpn_len = n;
  return 0;
}

int acp_remote_tls_set_cert(acp_remote_tls *t, const char *cert_path,
                            const char *key_path) {
  if (!t || !cert_path || !key_path)
    return ACP_ERR_INVALID_ARGUMENT;
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(t->ctx, cert_path) != 1) {
    char what[200];
    snprintf(what, sizeof(what), "cannot load the certificate %s", cert_path);
    ossl_err(t->err, sizeof(t->err), what);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  if (SSL_CTX_use_PrivateKey_file(t->ctx, key_path, SSL_FILETYPE_PEM) != 1) {
    char what[200];
    snprintf(what, sizeof(what), "cannot load the private key %s", key_path);
    ossl_err(t->err, sizeof(t->err), what);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  if (SSL_CTX_check_private_key(t->ctx) != 1) {
    ossl_err(t->err, sizeof(t->err),
             "the private key does not match the certificate");
    return ACP_ERR_INVALID_ARGUMENT;
  }
  t->have_cert = true;
  return 0;
}

static int load_ca(acp_remote_tls *t, const char *ca_path) {
  ERR_clear_error();
  if (SSL_CTX_load_verify_locations(t->ctx, ca_path, NULL) != 1) {
    char what[200];
    snprintf(what, sizeof(what), "cannot load the CA file %s", ca_path);
    ossl_err(t->err, sizeof(t->err), what);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  return 0;
}

int acp_remote_tls_set_client_ca(acp_remote_tls *t, const char *ca_path) {
  if (!t || !ca_path || t->role != ACP_REMOTE_TLS_SERVER)
    return ACP_ERR_INVALID_ARGUMENT;
  int rv = load_ca(t, ca_path);
  if (rv != 0)
    return rv;
  /* Tell the client which CAs we take, so it can pick its certificate. */
  STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca_path);
  if (names)
    SSL_CTX_set_client_CA_list(t->ctx, names);
  ERR_clear_error();
  SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     NULL);
  return 0;
}

int acp_remote_tls_set_ca(acp_remote_tls *t, const char *ca_path) {
  if (!t || !ca_path || t->role != ACP_REMOTE_TLS_CLIENT)
    return ACP_ERR_INVALID_ARGUMENT;
  int rv = load_ca(t, ca_path);
  if (rv == 0)
    t->have_ca = true;
  return rv;
}

const char *acp_remote_tls_error(const acp_remote_tls *t) {
  return t ? t->err : "";
}

void acp_remote_tls_free(acp_remote_tls *t) {
  acp__tls_conf_unref(t);
}

/* MARK: - Configuration (Internal) */

void acp__tls_conf_ref(acp_remote_tls *t) {
  t->refs++;
}

void acp__tls_conf_unref(acp_remote_tls *t) {
  if (!t || --t->refs > 0)
    return;
  for (size_t i = 0; i < ACP_REMOTE_TLS_CLIENT_SESSIONS; i++)
    csess_clear(&t->sess[i], &t->mem);
  SSL_CTX_free(t->ctx);
  tkey_wipe(&t->tk_cur);
  tkey_wipe(&t->tk_prev);
  acp__free(&t->mem, t);
}

bool acp__tls_conf_is_server(const acp_remote_tls *t) {
  return t->role == ACP_REMOTE_TLS_SERVER;
}

bool acp__tls_conf_ready(const acp_remote_tls *t) {
  return t->role == ACP_REMOTE_TLS_SERVER && t->have_cert;
}

bool acp__tls_conf_offers_h2(const acp_remote_tls *t) {
  for (unsigned j = 0; j < t->alpn_len; j += 1u + t->alpn[j])
    if (t->alpn[j] == 2 && memcmp(t->alpn + j + 1, "h2", 2) == 0)
      return true;
  return false;
}

void *acp__tls_conf_ssl_ctx(acp_remote_tls *t) {
  return t->ctx;
}

void acp__tls_conf_set_clock(acp_remote_tls *t, uint64_t (*clock)(void *),
                             void *arg) {
  t->clock = clock ? clock : clock_monotonic;
  t->clock_arg = arg;
}

size_t acp__tls_conf_client_sessions(const acp_remote_tls *t) {
  size_t n = 0;
  for (size_t i = 0; i < ACP_REMOTE_TLS_CLIENT_SESSIONS; i++)
    n += t->sess[i].key != NULL;
  return n;
}

/* MARK: - Filter (Internal) */

int acp__tls_new(acp__tls **out, acp_remote_tls *conf, const char *host,
                 const char *port, const acp_mem *mem) {
  acp_mem m;
  *out = NULL;
  acp__mem_init(&m, mem);
  acp__tls *t = acp__calloc(&m, 1, sizeof(*t));
  if (!t)
    return ACP_ERR_NOMEM;
  t->mem = m;
  acp__buf_init(&t->early, &t->mem, 0);
  /* The system store is read the first time a client needs it, not when
   * the configuration is made (a --ca file replaces it). */
  if (conf->role == ACP_REMOTE_TLS_CLIENT && !conf->have_ca) {
    if (SSL_CTX_set_default_verify_paths(conf->ctx) != 1)
      ERR_clear_error(); /* then every verification fails, and says so */
    conf->have_ca = true;
  }
  t->ssl = SSL_new(conf->ctx);
  t->rbio = BIO_new(BIO_s_mem());
  t->wbio = BIO_new(BIO_s_mem());
  if (!t->ssl || !t->rbio || !t->wbio) {
    BIO_free(t->rbio);
    BIO_free(t->wbio);
    SSL_free(t->ssl);
    ERR_clear_error();
    acp__free(&m, t);
    return ACP_ERR_NOMEM;
  }
  /* An empty read BIO means "wait for more", not end of file. */
  BIO_set_mem_eof_return(t->rbio, -1);
  SSL_set_bio(t->ssl, t->rbio, t->wbio);
  SSL_set_app_data(t->ssl, t); /* for on_new_session() */
  if (conf->role == ACP_REMOTE_TLS_SERVER) {
    SSL_set_accept_state(t->ssl);
  } else {
    SSL_set_connect_state(t->ssl);
    bool is_ip = false;
    if (host && host[0]) {
      X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
      unsigned char ip[16];
      is_ip = uv_inet_pton(AF_INET, host, ip) == 0 ||
              uv_inet_pton(AF_INET6, host, ip) == 0;
      ERR_clear_error();
      int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, host)
                     : (SSL_set_tlsext_host_name(t->ssl, host) == 1 &&
                        X509_VERIFY_PARAM_set1_host(vp, host, 0) == 1);
      if (!ok) {
        ERR_clear_error();
        SSL_free(t->ssl);
        acp__free(&m, t);
        return ACP_ERR_NOMEM;
      }
    }
    /* The server's (host, port, SNI): a session resumed skips the
     * certificate check, so it is only offered to the name it was
     * checked for. Without memory for the key, no session is kept. */
    if (host && !conf->no_resume) {
      const char *p = port ? port : "";
      size_t hl = strlen(host), pl = strlen(p);
      size_t sl = is_ip ? 0 : hl;
      t->key = acp__malloc(&m, hl + pl + sl + 3);
      if (t->key) {
        memcpy(t->key, host, hl);
        t->key[hl] = '\n';
        memcpy(t->key + hl + 1, p, pl);
        t->key[hl + 1 + pl] = '\n';
        memcpy(t->key + hl + pl + 2, host, sl);
        t->key[hl + pl + 2 + sl] = '\0';
        csess *c = csess_find(conf, t->key);
        if (c && !SSL_SESSION_is_resumable(c->sess)) {
          csess_clear(c, &conf->mem); /* its connection failed */
          c = NULL;
        }
        if (c && SSL_set_session(t->ssl, c->sess) == 1) {
          t->offered = true;
          c->used = ++conf->tick;
        }
        ERR_clear_error();
      }
    }
  }
  acp__tls_conf_ref(conf);
  t->conf = conf;
  *out = t;
  return 0;
}

int acp__tls_new_client(acp__tls **out, const acp_remote_tls *conf,
                        const char *host, const char *port,
                        const acp_mem *mem) {
  acp_remote_tls *own = NULL;
  if (!conf) {
    int rv = acp_remote_tls_new(&own, ACP_REMOTE_TLS_CLIENT, mem);
    if (rv != 0)
      return rv;
    conf = own;
  }
  /* The filter holds its own reference; `own` goes with it. */
  int rv = acp__tls_new(out, (acp_remote_tls *)conf, host, port, mem);
  acp_remote_tls_free(own);
  return rv;
}

void acp__tls_free(acp__tls *t) {
  if (!t)
    return;
  /* OpenSSL takes a connection freed without close_notify sent for a
   * truncated one and makes its session unresumable (the server drops it
   * from its cache, the client marks it), an old TLS 1.0 rule. Ours end
   * that way all the time for good reasons (a socket closed after its
   * answer, a peer that closed first), so a connection that did not fail
   * is marked as shut down (nothing is sent) and its session stays good.
   * A failed one's session is dropped, as OpenSSL means it to be. */
  if (t->ready && !t->failed)
    SSL_set_shutdown(t->ssl, SSL_get_shutdown(t->ssl) | SSL_SENT_SHUTDOWN);
  SSL_free(t->ssl);
  acp__buf_dispose(&t->early);
  acp__free(&t->mem, t->key);
  acp__tls_conf_unref(t->conf);
  acp__free(&t->mem, t);
}

int acp__tls_feed(acp__tls *t, const char *data, size_t len) {
  while (len > 0) {
    int chunk = len > INT_MAX ? INT_MAX : (int)len;
    int n = BIO_write(t->rbio, data, chunk);
    if (n <= 0) {
      ERR_clear_error();
      return ACP_ERR_NOMEM;
    }
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Record why the connection failed, from the verification result or the
 * error queue. */
static void fail(acp__tls *t, int ssl_err) {
  t->failed = true;
  long vr = SSL_get_verify_result(t->ssl);
  unsigned long e = ERR_peek_last_error();
  if (e && ERR_GET_LIB(e) == ERR_LIB_SSL &&
      ERR_GET_REASON(e) == SSL_R_HTTP_REQUEST)
    t->plain_http = true;
  if (vr != X509_V_OK && e &&
      ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    snprintf(t->err, sizeof(t->err), "TLS: certificate verify failed: %s",
             X509_verify_cert_error_string(vr));
    ERR_clear_error();
  } else if (e) {
    ossl_err(t->err, sizeof(t->err), "TLS");
  } else {
    snprintf(t->err, sizeof(t->err), "TLS: %s",
             ssl_err == SSL_ERROR_SYSCALL ? "the peer ended the connection"
                                          : "the connection failed");
  }
}

int acp__tls_offer_h2(acp__tls *t) {
  if (SSL_set_alpn_protos(t->ssl, alpn_client_h2, sizeof(alpn_client_h2) - 1) !=
      0) {
    ERR_clear_error();
    return ACP_ERR_NOMEM;
  }
  return 0;
}

static void mark_ready(acp__tls *t) {
  const unsigned char *p = NULL;
  unsigned int n = 0;
  t->ready = true;
  t->resumed = SSL_session_reused(t->ssl) == 1;
  /* A TLS 1.2 server that resumed us and sent a fresh ticket (ours does
   * after rotating its ticket key) replaced our session with a new one,
   * which OpenSSL hands to no callback on a resumed handshake; and it
   * marked the old one not resumable. Keep the new one. */
  if (t->resumed && t->key && !t->conf->no_resume &&
      SSL_version(t->ssl) < TLS1_3_VERSION) {
    csess *c = csess_find(t->conf, t->key);
    SSL_SESSION *now = SSL_get_session(t->ssl);
    if (now && (!c || c->sess != now) && SSL_SESSION_is_resumable(now) &&
        SSL_SESSION_up_ref(now) == 1 && !csess_keep(t->conf, t->key, now))
      SSL_SESSION_free(now);
  }
  SSL_get0_alpn_selected(t->ssl, &p, &n);
  if (p && n < sizeof(t->alpn)) {
    memcpy(t->alpn, p, n);
    t->alpn[n] = '\0';
  }
}

static int write_now(acp__tls *t, const char *data, size_t len) {
  while (len > 0) {
    int chunk = len > (1u << 30) ? (1 << 30) : (int)len;
    ERR_clear_error();
    int n = SSL_write(t->ssl, data, chunk);
    if (n <= 0) {
      fail(t, SSL_get_error(t->ssl, n));
      return ACP_ERR_PROTOCOL;
    }
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

int acp__tls_read(acp__tls *t, acp__buf *out) {
  if (t->failed)
    return ACP_ERR_PROTOCOL;
  if (!t->ready) {
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r != 1) {
      int e = SSL_get_error(t->ssl, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
      fail(t, e);
      return ACP_ERR_PROTOCOL;
    }
    mark_ready(t);
    if (t->early.len > 0) {
      int rv = write_now(t, t->early.data, t->early.len);
      acp__buf_dispose(&t->early);
      acp__buf_init(&t->early, &t->mem, 0);
      if (rv != 0)
        return rv;
    }
  }
  for (;;) {
    int rv = acp__buf_reserve(out, 16384);
    if (rv != 0)
      return rv;
    size_t room = out->cap - out->len;
    int chunk = room > INT_MAX ? INT_MAX : (int)room;
    ERR_clear_error();
    int n = SSL_read(t->ssl, out->data + out->len, chunk);
    if (n > 0) {
      out->len += (size_t)n;
      continue;
    }
    int e = SSL_get_error(t->ssl, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
      return 0;
    if (e == SSL_ERROR_ZERO_RETURN)
      return ACP_ERR_CLOSED;
    fail(t, e);
    return ACP_ERR_PROTOCOL;
  }
}

int acp__tls_write(acp__tls *t, const char *data, size_t len) {
  if (t->failed)
    return ACP_ERR_PROTOCOL;
  if (t->closed)
    return ACP_ERR_CLOSED;
  if (!t->ready) {
    /* A client's request written as soon as it connects: it goes out
     * after the handshake, which this starts. */
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
      mark_ready(t);
    } else {
      int e = SSL_get_error(t->ssl, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        fail(t, e);
        return ACP_ERR_PROTOCOL;
      }
      return acp__buf_append(&t->early, data, len);
    }
  }
  return write_now(t, data, len);
}

void acp__tls_close(acp__tls *t) {
  if (t->closed || t->failed || !t->ready)
    return;
  t->closed = true;
  ERR_clear_error();
  (void)SSL_shutdown(t->ssl);
  ERR_clear_error();
}

size_t acp__tls_pending(const acp__tls *t) {
  return BIO_ctrl_pending(t->wbio);
}

size_t acp__tls_take(acp__tls *t, char *buf, size_t cap) {
  int chunk = cap > INT_MAX ? INT_MAX : (int)cap;
  int n = chunk > 0 ? BIO_read(t->wbio, buf, chunk) : 0;
  return n > 0 ? (size_t)n : 0;
}

bool acp__tls_ready(const acp__tls *t) {
  return t->ready;
}

const char *acp__tls_error(const acp__tls *t) {
  return t->err;
}

bool acp__tls_plain_http(const acp__tls *t) {
  return t->plain_http;
}

const char *acp__tls_alpn(const acp__tls *t) {
  return t->alpn[0] ? t->alpn : NULL;
}

bool acp__tls_resumed(const acp__tls *t) {
  return t->resumed;
}

bool acp__tls_offered(const acp__tls *t) {
  return t->offered;
}

void acp__tls_describe(const acp__tls *t, char *buf, size_t cap) {
  if (cap == 0)
    return;
  if (snprintf(buf, cap, "TLS %s (%s%s%s%s)",
               t->resumed ? "session resumed" : "full handshake",
               SSL_get_version(t->ssl), t->alpn[0] ? ", ALPN " : "", t->alpn,
               t->offered && !t->resumed
                   ? ", the offered session was not resumed"
                   : "") < 0)
    buf[0] = '\0';
}
