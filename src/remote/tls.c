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

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls_int.h"

struct acp_remote_tls {
  acp_mem mem;
  SSL_CTX *ctx;
  int role;
  unsigned refs;
  bool have_cert;
  bool have_ca; /* client: a --ca file replaced the system store */
  char err[256];
};

struct acp__tls {
  acp_mem mem;
  acp_remote_tls *conf;
  SSL *ssl;
  BIO *rbio, *wbio; /* owned by ssl */
  acp__buf early;   /* plaintext written before the handshake ended */
  bool ready;
  bool failed;
  bool closed; /* close_notify queued */
  bool plain_http;
  char err[256];
  char alpn[32];
};

/*
 * ALPN, in wire format (a length byte before each name), most preferred
 * first. The server offers HTTP/2 and HTTP/1.1: it picks the first of its
 * list the client offers, and the connection needs no branch on the
 * result, since an HTTP/2 client's first bytes are the connection preface
 * either way (remote_uv.c looks for it after TLS as on cleartext). The
 * client asks for HTTP/1.1 only: its Streamable HTTP and WebSocket code
 * speak nothing else, and a server that agreed to h2 would expect frames.
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

static int alpn_select(SSL *ssl, const unsigned char **out,
                       unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg) {
  (void)ssl;
  (void)arg;
  unsigned char *o = NULL;
  if (SSL_select_next_proto(&o, outlen, alpn_server, sizeof(alpn_server) - 1,
                            in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK; /* no ALPN agreed: HTTP/1.1 anyway */
  *out = o;
  return SSL_TLSEXT_ERR_OK;
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
  if (role == ACP_REMOTE_TLS_SERVER) {
    SSL_CTX_set_alpn_select_cb(t->ctx, alpn_select, NULL);
    /* No session resumption (nothing keeps sessions across connections
     * yet): TLS 1.3 tickets would be bytes and work for nothing. */
    SSL_CTX_set_num_tickets(t->ctx, 0);
    SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
  } else {
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
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
  SSL_CTX_free(t->ctx);
  acp__free(&t->mem, t);
}

bool acp__tls_conf_is_server(const acp_remote_tls *t) {
  return t->role == ACP_REMOTE_TLS_SERVER;
}

bool acp__tls_conf_ready(const acp_remote_tls *t) {
  return t->role == ACP_REMOTE_TLS_SERVER && t->have_cert;
}

/* MARK: - Filter (Internal) */

int acp__tls_new(acp__tls **out, acp_remote_tls *conf, const char *host,
                 const acp_mem *mem) {
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
  if (conf->role == ACP_REMOTE_TLS_SERVER) {
    SSL_set_accept_state(t->ssl);
  } else {
    SSL_set_connect_state(t->ssl);
    if (host && host[0]) {
      X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
      unsigned char ip[16];
      bool is_ip = uv_inet_pton(AF_INET, host, ip) == 0 ||
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
  }
  acp__tls_conf_ref(conf);
  t->conf = conf;
  *out = t;
  return 0;
}

int acp__tls_new_client(acp__tls **out, const acp_remote_tls *conf,
                        const char *host, const acp_mem *mem) {
  acp_remote_tls *own = NULL;
  if (!conf) {
    int rv = acp_remote_tls_new(&own, ACP_REMOTE_TLS_CLIENT, mem);
    if (rv != 0)
      return rv;
    conf = own;
  }
  /* The filter holds its own reference; `own` goes with it. */
  int rv = acp__tls_new(out, (acp_remote_tls *)conf, host, mem);
  acp_remote_tls_free(own);
  return rv;
}

void acp__tls_free(acp__tls *t) {
  if (!t)
    return;
  SSL_free(t->ssl);
  acp__buf_dispose(&t->early);
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
