/*
 * Fuzz target: the remote transport's sans-I/O pieces (src/remote/ws.c, in
 * libacp-remote): the WebSocket frame codec as server and as client, and
 * the HTTP/1.1 upgrade request and response parsers.
 *
 * Byte 0: bits 0-1 pick the piece (0 server codec, 1 client codec, 2 the
 * upgrade request and its check, then the Streamable HTTP request
 * classifier for POST/GET/DELETE, 3 a response head, its body decoded
 * (Content-Length, chunked or to the end) and the input as a URL; modes
 * 2 and 3 also run the JSON member scanner over the input); bits
 * 2-7 the piece size the codec and the body decoder are fed in (1..64).
 * Feeding the same bytes at once and in pieces must deliver the same
 * messages (body bytes) and end the same way; every delivered message is
 * within the cap and is one NDJSON line.
 */
#include <stdlib.h>
#include <string.h>

#include "remote/ws_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
  uint64_t hash;
  size_t msgs;
  size_t cap;
} fz;

static int on_msg(void *ud, char *d, size_t n) {
  fz *f = ud;
  if (n > f->cap || d[n] != '\n' || memchr(d, '\n', n) != NULL)
    abort();
  for (size_t i = 0; i < n; i++)
    f->hash = f->hash * 31 + (unsigned char)d[i];
  f->msgs++;
  return 0;
}

static int run_codec(bool client, const uint8_t *d, size_t n, size_t piece,
                     fz *f) {
  acp__ws ws;
  int end = 0;
  acp__ws_init(&ws, client, f->cap, NULL);
  size_t off = 0;
  while (off < n) {
    size_t k = n - off < piece ? n - off : piece;
    acp_ssize r = acp__ws_recv(&ws, d + off, k, on_msg, f);
    if (r < 0) {
      end = (int)r;
      break;
    }
    if ((size_t)r < k) {
      if (!ws.close_received)
        abort(); /* only a close frame stops short without pausing */
      end = 1;
      break;
    }
    off += k;
  }
  if (ws.out.len > 0 && (ws.out.data[0] & 0x80) == 0)
    abort(); /* what we queue is always a final frame */
  acp__ws_dispose(&ws);
  return end;
}

/* Decode a body fed in pieces of `piece` bytes (held bytes carried
 * over, as the client does); the hash of the body, how it ended. */
static int run_body(const acp__http_head *h, const uint8_t *d, size_t n,
                    size_t piece, uint64_t *hash, size_t *total) {
  acp__http_body b;
  uint8_t held[256];
  size_t have = 0, off = 0;
  *hash = 0; /* compared by the caller even when the head is refused */
  *total = 0;
  if (acp__http_body_init(&b, h) != 0)
    return -1;
  while (off < n && !b.done) {
    size_t k = n - off < piece ? n - off : piece;
    if (have + k > sizeof(held))
      abort(); /* the decoder never holds back more than it is given */
    memcpy(held + have, d + off, k);
    have += k;
    off += k;
    for (;;) {
      const char *p;
      size_t pn;
      acp_ssize r = acp__http_body_feed(&b, (const char *)held, have, &p, &pn);
      if (r < 0)
        return -2;
      if ((size_t)r > have || p < (const char *)held ||
          p + pn > (const char *)held + (size_t)r)
        abort();
      for (size_t i = 0; i < pn; i++)
        *hash = *hash * 31 + (unsigned char)p[i];
      *total += pn;
      memmove(held, held + r, have - (size_t)r);
      have -= (size_t)r;
      if (r == 0 || b.done || have == 0)
        break;
    }
    if (have != 0 && !b.done)
      abort(); /* everything given is consumed until the body ends */
  }
  return b.done ? 1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  int mode = data[0] & 3;
  size_t piece = (size_t)(data[0] >> 2) + 1;
  const uint8_t *d = data + 1;
  size_t n = size - 1;
  if (mode <= 1) {
    fz a = {0, 0, 4096}, b = {0, 0, 4096};
    int ea = run_codec(mode == 1, d, n, n ? n : 1, &a);
    int eb = run_codec(mode == 1, d, n, piece, &b);
    if (ea != eb || a.hash != b.hash || a.msgs != b.msgs)
      abort();
    return 0;
  }
  acp__http_head h;
  acp_ssize r = acp__http_parse_head((const char *)d, n, mode == 3, &h);
  if (r > 0) {
    if ((size_t)r > n)
      abort();
    for (size_t i = 0; i < h.nheaders; i++)
      if (h.headers[i].name_len == 0 ||
          h.headers[i].name + h.headers[i].name_len > (const char *)d + n)
        abort();
    if (mode == 2) {
      static const char *const hosts[] = {"127.0.0.1:8080", NULL};
      acp__ws_policy p = {"/acp", "tok", hosts};
      char accept[29];
      int st = acp__ws_check_request(&h, &p, accept);
      if (st == 101 && strlen(accept) != 28)
        abort();
      if (st == 501 || st == 426) {
        /* Streamable HTTP: whatever it says, what it points at is in the
         * head and a POST's length is within the cap. */
        acp__acp_req q;
        int hs = acp__http_check_acp(&h, 4096, &q);
        if (hs == 0 && q.kind == ACP__REQ_POST && q.content_length > 4096)
          abort();
        if (q.conn_id && (q.conn_id < (const char *)d ||
                          q.conn_id + q.conn_id_len > (const char *)d + n))
          abort();
        if (q.session_id &&
            (q.session_id < (const char *)d ||
             q.session_id + q.session_id_len > (const char *)d + n))
          abort();
      }
    }
    if (mode == 3) {
      uint64_t ha, hb;
      size_t ta, tb;
      int ea = run_body(&h, d + r, n - (size_t)r, 64, &ha, &ta);
      int eb = run_body(&h, d + r, n - (size_t)r, piece, &hb, &tb);
      if (ea != eb || ha != hb || ta != tb)
        abort();
    }
  }
  if (mode == 2 || mode == 3) {
    /* The member scanner: whatever it finds is a non-empty span of the
     * input, a string one with both quotes. */
    static const char *const keys[] = {"id", "method", "params", "result"};
    const char *e = (const char *)d + n, *vb, *ve, *sb, *se;
    for (size_t k = 0; k < 4; k++) {
      if (!acp__js_member((const char *)d, e, keys[k], strlen(keys[k]), &vb,
                          &ve))
        continue;
      if (vb < (const char *)d || ve > e || ve <= vb)
        abort();
      bool two = acp__js_member(vb, ve, "sessionId", 9, &sb, &se);
      if (two && (sb < vb || se > ve || se <= sb ||
                  (*sb == '"' && (se - sb < 2 || se[-1] != '"'))))
        abort();
      /* Without the parent's end: whatever the two steps find, the one
       * finds too, the same span. */
      const char *ib, *ie;
      bool one = acp__js_member_in((const char *)d, e, keys[k], strlen(keys[k]),
                                   "sessionId", 9, &ib, &ie);
      if ((two && (!one || ib != sb || ie != se)) ||
          (one && (ib < vb || ie > e || ie <= ib)))
        abort();
    }
  }
  if (mode == 3 && n < 4096) {
    char url[4096];
    acp__url u;
    memcpy(url, d, n);
    url[n] = '\0';
    if (acp__url_parse(url, &u) == 0 &&
        (u.host_len == 0 || u.host + u.host_len > url + n ||
         u.authority + u.authority_len > url + n || u.path[0] != '/'))
      abort();
  }
  return 0;
}
