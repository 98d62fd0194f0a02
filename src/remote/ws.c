/*
 * RFC 6455 frames and the HTTP/1.1 upgrade, sans I/O. Our own codec rather
 * than wslay: docs/decisions.md says why (allocator, copies, control).
 */
#include <stddef.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ws_int.h"

/* MARK: - SHA-1 and base64 (Private) */

static uint32_t rol(uint32_t x, int n) {
  return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *p) {
  uint32_t w[80];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 80; i++)
    w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; i++) {
    uint32_t f, k;
    if (i < 20) {
      f = (b & c) | (~b & d);
      k = 0x5A827999u;
    } else if (i < 40) {
      f = b ^ c ^ d;
      k = 0x6ED9EBA1u;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8F1BBCDCu;
    } else {
      f = b ^ c ^ d;
      k = 0xCA62C1D6u;
    }
    uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = rol(b, 30);
    b = a;
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

void acp__sha1(const void *data, size_t len, uint8_t out[20]) {
  uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u,
                   0xC3D2E1F0u};
  const uint8_t *p = data;
  size_t n = len;
  uint8_t tail[128];
  while (n >= 64) {
    sha1_block(h, p);
    p += 64;
    n -= 64;
  }
  memset(tail, 0, sizeof(tail));
  memcpy(tail, p, n);
  tail[n] = 0x80;
  size_t tlen = n + 1 + 8 <= 64 ? 64 : 128;
  uint64_t bits = (uint64_t)len * 8;
  for (int i = 0; i < 8; i++)
    tail[tlen - 1 - i] = (uint8_t)(bits >> (8 * i));
  sha1_block(h, tail);
  if (tlen == 128)
    sha1_block(h, tail + 64);
  for (int i = 0; i < 5; i++) {
    out[4 * i] = (uint8_t)(h[i] >> 24);
    out[4 * i + 1] = (uint8_t)(h[i] >> 16);
    out[4 * i + 2] = (uint8_t)(h[i] >> 8);
    out[4 * i + 3] = (uint8_t)h[i];
  }
}

size_t acp__base64(const uint8_t *in, size_t n, char *out) {
  size_t o = acp__b64_encode(out, in, n, ACP__B64_STD);
  out[o] = '\0';
  return o;
}

void acp__ws_accept_key(const char *key, size_t key_len, char out[29]) {
  static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  char buf[128 + sizeof(guid)];
  uint8_t digest[20];
  if (key_len > 128)
    key_len = 128;
  memcpy(buf, key, key_len);
  memcpy(buf + key_len, guid, sizeof(guid) - 1);
  acp__sha1(buf, key_len + sizeof(guid) - 1, digest);
  acp__base64(digest, 20, out);
}

/* MARK: - Frame codec (Public) */

void acp__ws_init(acp__ws *ws, bool client, size_t max_msg,
                  const acp_mem *mem) {
  memset(ws, 0, sizeof(*ws));
  acp__mem_init(&ws->mem, mem);
  ws->client = client;
  ws->line_mode = true;
  ws->max_msg = max_msg;
  ws->hdr_need = 2;
  /* One byte over the cap: the '\n' of line mode. */
  acp__buf_init(&ws->msg, &ws->mem, max_msg == 0 ? 0 : max_msg + 1);
  acp__buf_init(&ws->out, &ws->mem, 0);
}

void acp__ws_dispose(acp__ws *ws) {
  acp__buf_dispose(&ws->msg);
  acp__buf_dispose(&ws->out);
}

void acp__ws_trim(acp__ws *ws, size_t keep) {
  /* Only between messages: the head of a message's first frame reserves
   * the buffer for its payload before any of it arrives, so an empty
   * buffer may still be spoken for (releasing it then made the next read
   * of the payload write through a null pointer). */
  if (ws->msg.cap <= keep || ws->msg_op != 0)
    return;
  size_t max = ws->msg.max;
  acp__buf_dispose(&ws->msg);
  acp__buf_init(&ws->msg, &ws->mem, max);
}

size_t acp__ws_header(uint8_t out[14], int op, uint64_t len,
                      const uint8_t *mask) {
  size_t n = 0;
  uint8_t mbit = mask ? 0x80 : 0;
  out[n++] = (uint8_t)(0x80 | (op & 0x0F));
  if (len < 126) {
    out[n++] = (uint8_t)(mbit | len);
  } else if (len <= 0xFFFF) {
    out[n++] = (uint8_t)(mbit | 126);
    out[n++] = (uint8_t)(len >> 8);
    out[n++] = (uint8_t)len;
  } else {
    out[n++] = (uint8_t)(mbit | 127);
    for (int i = 7; i >= 0; i--)
      out[n++] = (uint8_t)(len >> (8 * i));
  }
  if (mask) {
    memcpy(out + n, mask, 4);
    n += 4;
  }
  return n;
}

/*
 * dst[i] = src[i] ^ mask[(at + i) & 3]; dst may be src. A block of 16 (or
 * a word of 8) starts at a multiple of its size from the start, and so at
 * the same mask phase as the start: one mask vector serves every block,
 * whatever the alignment. Byte by byte, masking was most of a 1 MiB
 * turn's CPU time; eight bytes a step, still three times a memcpy.
 */
void acp__ws_copy_mask(uint8_t *dst, const uint8_t *src, size_t n,
                       const uint8_t mask[4], uint64_t at) {
  uint8_t m16[16];
  size_t i = 0;

  for (int k = 0; k < 16; k++)
    m16[k] = mask[(at + (uint64_t)k) & 3];
#if defined(__SSE2__)
  __m128i m = _mm_loadu_si128((const __m128i *)(const void *)m16);
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 32));
    __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 48));
    _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm_xor_si128(a, m));
    _mm_storeu_si128((__m128i *)(void *)(dst + i + 16), _mm_xor_si128(b, m));
    _mm_storeu_si128((__m128i *)(void *)(dst + i + 32), _mm_xor_si128(c, m));
    _mm_storeu_si128((__m128i *)(void *)(dst + i + 48), _mm_xor_si128(d, m));
  }
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128(
        (__m128i *)(void *)(dst + i),
        _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)(src + i)),
                      m));
#endif
  uint64_t w;
  memcpy(&w, m16, 8);
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, src + i, 8);
    v ^= w;
    memcpy(dst + i, &v, 8);
  }
  for (; i < n; i++)
    dst[i] = src[i] ^ m16[i & 15];
}

void acp__ws_apply_mask(uint8_t *p, size_t n, const uint8_t mask[4],
                        uint64_t at) {
  acp__ws_copy_mask(p, p, n, mask, at);
}

int acp__ws_queue_control(acp__ws *ws, int op, const uint8_t *payload,
                          size_t len, const uint8_t *mask) {
  uint8_t hdr[14];
  size_t hl;
  int rv;
  if (len > 125)
    return ACP_ERR_INVALID_ARGUMENT;
  if (!mask && ws->client)
    mask = ws->auto_mask;
  hl = acp__ws_header(hdr, op, len, mask);
  rv = acp__buf_reserve(&ws->out, hl + len);
  if (rv != 0)
    return rv;
  acp__buf_append(&ws->out, hdr, hl);
  if (len > 0) {
    uint8_t *dst = (uint8_t *)ws->out.data + ws->out.len;
    acp__buf_append(&ws->out, payload, len);
    if (mask)
      acp__ws_apply_mask(dst, len, mask, 0);
  }
  return 0;
}

int acp__ws_queue_close(acp__ws *ws, int code, const char *reason,
                        const uint8_t *mask) {
  uint8_t p[125];
  size_t n = 2;
  if (ws->close_sent)
    return 0;
  ws->close_sent = true;
  if (ws->close_code == 0)
    ws->close_code = code;
  p[0] = (uint8_t)(code >> 8);
  p[1] = (uint8_t)code;
  if (reason) {
    size_t r = strlen(reason);
    if (r > sizeof(p) - 2)
      r = sizeof(p) - 2;
    memcpy(p + 2, reason, r);
    n += r;
  }
  return acp__ws_queue_control(ws, ACP__WS_OP_CLOSE, p, n, mask);
}

/* MARK: - Receiving (Private) */

/* RFC 6455 5.6: a text message (and a close reason) is UTF-8. */
static bool utf8_valid(const uint8_t *s, size_t n) {
  return acp__utf8_valid_len(s, n) == n;
}

static acp_ssize fail(acp__ws *ws, int code, int err) {
  ws->failed = true;
  int rv = acp__ws_queue_close(ws, code, NULL, NULL);
  return rv == ACP_ERR_NOMEM ? ACP_ERR_NOMEM : err;
}

static bool close_code_ok(int c) {
  return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) ||
         (c >= 3000 && c <= 4999);
}

/* A whole control frame arrived in ws->ctl. */
static acp_ssize on_control(acp__ws *ws) {
  int rv = 0;
  if (ws->op == ACP__WS_OP_PING) {
    if (!ws->close_sent)
      rv = acp__ws_queue_control(ws, ACP__WS_OP_PONG, ws->ctl, ws->ctl_len,
                                 NULL);
  } else if (ws->op == ACP__WS_OP_PONG) {
    ws->pongs++;
  } else {
    int code = ACP__WS_CLOSE_NORMAL;
    ws->close_received = true;
    if (ws->ctl_len == 1)
      return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
    if (ws->ctl_len >= 2) {
      code = ws->ctl[0] << 8 | ws->ctl[1];
      if (!close_code_ok(code) || !utf8_valid(ws->ctl + 2, ws->ctl_len - 2))
        return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
    }
    if (ws->close_code == 0)
      ws->close_code = code;
    rv = acp__ws_queue_close(ws, code, NULL, NULL);
  }
  return rv;
}

static int deliver(acp__ws *ws, acp__ws_msg_cb cb, void *ud) {
  int op = ws->msg_op;
  ws->msg_op = 0;
  if (op != ACP__WS_OP_TEXT) {
    acp__buf_clear(&ws->msg);
    return 0;
  }
  uint8_t *d = (uint8_t *)ws->msg.data;
  size_t n = ws->msg.len;
  if (ws->line_mode) {
    int rv = acp__buf_putc(&ws->msg, '\n');
    if (rv != 0)
      return rv;
    d = (uint8_t *)ws->msg.data;
  }
  if ((ws->line_mode ? acp__utf8_line(d, n) : acp__utf8_valid_len(d, n)) != n)
    return (int)fail(ws, ACP__WS_CLOSE_BAD_DATA, ACP_ERR_PROTOCOL);
  acp__buf_clear(&ws->msg);
  return cb(ud, (char *)d, n);
}

static acp_ssize parse_header(acp__ws *ws) {
  const uint8_t *h = ws->hdr;
  int op = h[0] & 0x0F;
  uint64_t len = h[1] & 0x7F;
  size_t at = 2;
  if (h[0] & 0x70)
    return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
  ws->fin = (h[0] & 0x80) != 0;
  ws->masked = (h[1] & 0x80) != 0;
  if (len == 126) {
    len = (uint64_t)h[2] << 8 | h[3];
    at = 4;
    if (len < 126)
      return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
  } else if (len == 127) {
    len = 0;
    for (int i = 0; i < 8; i++)
      len = len << 8 | h[2 + i];
    at = 10;
    if (len >> 63 || len <= 0xFFFF)
      return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
  }
  if (ws->masked)
    memcpy(ws->mask, h + at, 4);
  /* A server must see masked frames, a client unmasked ones. */
  if (ws->masked == ws->client)
    return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
  ws->op = op;
  ws->remain = len;
  ws->mask_at = 0;
  if (op >= 0x8) {
    if (!ws->fin || len > 125 ||
        (op != ACP__WS_OP_CLOSE && op != ACP__WS_OP_PING &&
         op != ACP__WS_OP_PONG))
      return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
    ws->ctl_len = 0;
    return 0;
  }
  if (op == ACP__WS_OP_CONT) {
    if (ws->msg_op == 0)
      return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
  } else if (op == ACP__WS_OP_TEXT || op == ACP__WS_OP_BINARY) {
    if (ws->msg_op != 0)
      return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
    ws->msg_op = op;
  } else {
    return fail(ws, ACP__WS_CLOSE_PROTOCOL, ACP_ERR_PROTOCOL);
  }
  if (ws->max_msg != 0 && len > ws->max_msg - ws->msg.len)
    return fail(ws, ACP__WS_CLOSE_TOO_BIG, ACP_ERR_LIMIT);
  return acp__buf_reserve(&ws->msg, (size_t)len);
}

/* MARK: - Receiving (Public) */

acp_ssize acp__ws_recv(acp__ws *ws, const uint8_t *data, size_t len,
                       acp__ws_msg_cb cb, void *user_data) {
  size_t off = 0;
  if (ws->failed)
    return ACP_ERR_PROTOCOL;
  while (off < len && !ws->close_received) {
    if (ws->hdr_have < ws->hdr_need) {
      ws->hdr[ws->hdr_have++] = data[off++];
      if (ws->hdr_have == 2) {
        size_t l7 = ws->hdr[1] & 0x7F;
        ws->hdr_need = 2 +
                       (l7 == 126   ? 2
                        : l7 == 127 ? 8
                                    : 0) +
                       ((ws->hdr[1] & 0x80) ? 4 : 0);
      }
      if (ws->hdr_have < ws->hdr_need)
        continue;
      acp_ssize rv = parse_header(ws);
      if (rv != 0)
        return rv;
      if (ws->remain > 0)
        continue;
    } else {
      size_t take = len - off;
      if ((uint64_t)take > ws->remain)
        take = (size_t)ws->remain;
      uint8_t *dst;
      if (ws->op >= 0x8) {
        dst = ws->ctl + ws->ctl_len;
        ws->ctl_len += take;
      } else {
        dst = (uint8_t *)ws->msg.data + ws->msg.len;
        ws->msg.len += take;
      }
      /* One pass: the copy unmasks. */
      if (ws->masked)
        acp__ws_copy_mask(dst, data + off, take, ws->mask, ws->mask_at);
      else
        memcpy(dst, data + off, take);
      ws->mask_at += take;
      ws->remain -= take;
      off += take;
      if (ws->remain > 0)
        continue;
    }
    /* The frame is complete. */
    ws->hdr_have = 0;
    ws->hdr_need = 2;
    if (ws->op >= 0x8) {
      acp_ssize rv = on_control(ws);
      if (rv != 0)
        return rv;
      continue;
    }
    if (!ws->fin)
      continue;
    int rv = deliver(ws, cb, user_data);
    if (rv == ACP_ERR_PAUSE)
      return (acp_ssize)off;
    if (rv != 0) {
      ws->failed = true;
      return rv;
    }
  }
  return (acp_ssize)off;
}

/* MARK: - HTTP/1.1 heads (Public) */

static bool tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool ieq(const char *a, size_t n, const char *b) {
  if (strlen(b) != n)
    return false;
  for (size_t i = 0; i < n; i++) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z')
      x = (char)(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z')
      y = (char)(y - 'A' + 'a');
    if (x != y)
      return false;
  }
  return true;
}

/* The end of the line starting at `p` (pointing at "\r\n"), or NULL. */
static const char *line_end(const char *p, const char *end) {
  for (; p + 1 < end; p++) {
    if (p[0] == '\r' && p[1] == '\n')
      return p;
    if (p[0] == '\n' || p[0] == '\r' || p[0] == '\0')
      return NULL;
  }
  return NULL;
}

acp_ssize acp__http_parse_head(const char *buf, size_t len, bool response,
                               acp__http_head *h) {
  const char *term = NULL;
  memset(h, 0, sizeof(*h));
  for (size_t i = 0; i + 3 < len; i++) {
    if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
        buf[i + 3] == '\n') {
      term = buf + i;
      break;
    }
  }
  if (!term)
    return len >= ACP__HTTP_MAX_HEAD ? ACP_ERR_LIMIT : 0;
  if ((size_t)(term - buf) + 4 > ACP__HTTP_MAX_HEAD)
    return ACP_ERR_LIMIT;
  const char *end = term + 2;
  const char *p = buf;
  const char *e = line_end(p, end);
  if (!e)
    return ACP_ERR_PARSE;
  /* Start line. */
  const char *sp1 = memchr(p, ' ', (size_t)(e - p));
  if (!sp1)
    return ACP_ERR_PARSE;
  if (response) {
    if (sp1 - p != 8 || memcmp(p, "HTTP/1.", 7) != 0 || e - sp1 < 4)
      return ACP_ERR_PARSE;
    h->minor_version = p[7] - '0';
    int st = 0;
    for (int i = 1; i <= 3; i++) {
      char c = sp1[i];
      if (c < '0' || c > '9')
        return ACP_ERR_PARSE;
      st = st * 10 + (c - '0');
    }
    h->status = st;
    h->target = sp1 + 4 < e ? sp1 + 5 : e;
    h->target_len = (size_t)(e - h->target);
  } else {
    const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(e - sp1 - 1));
    if (!sp2 || sp1 == p || sp2 == sp1 + 1 || e - sp2 != 9 ||
        memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || sp2[8] < '0' || sp2[8] > '9')
      return ACP_ERR_PARSE;
    for (const char *q = p; q < sp1; q++)
      if (!tchar(*q))
        return ACP_ERR_PARSE;
    for (const char *q = sp1 + 1; q < sp2; q++)
      if ((unsigned char)*q <= 0x20 || *q == 0x7F)
        return ACP_ERR_PARSE;
    h->method = p;
    h->method_len = (size_t)(sp1 - p);
    h->target = sp1 + 1;
    h->target_len = (size_t)(sp2 - sp1 - 1);
    h->minor_version = sp2[8] - '0';
  }
  p = e + 2;
  while (p < end) {
    e = line_end(p, end + 2);
    if (!e)
      return ACP_ERR_PARSE;
    if (e == p)
      break;
    const char *colon = memchr(p, ':', (size_t)(e - p));
    if (!colon || colon == p)
      return ACP_ERR_PARSE;
    for (const char *q = p; q < colon; q++)
      if (!tchar(*q))
        return ACP_ERR_PARSE;
    const char *v = colon + 1;
    const char *ve = e;
    while (v < ve && (*v == ' ' || *v == '\t'))
      v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
      ve--;
    for (const char *q = v; q < ve; q++)
      if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7F)
        return ACP_ERR_PARSE;
    if (h->nheaders == ACP__HTTP_MAX_HEADERS)
      return ACP_ERR_LIMIT;
    acp__http_header *hd = &h->headers[h->nheaders++];
    hd->name = p;
    hd->name_len = (size_t)(colon - p);
    hd->value = v;
    hd->value_len = (size_t)(ve - v);
    p = e + 2;
  }
  return (acp_ssize)(term - buf + 4);
}

const acp__http_header *acp__http_find(const acp__http_head *h,
                                       const char *name) {
  for (size_t i = 0; i < h->nheaders; i++)
    if (ieq(h->headers[i].name, h->headers[i].name_len, name))
      return &h->headers[i];
  return NULL;
}

bool acp__http_has_token(const acp__http_head *h, const char *name,
                         const char *tok) {
  for (size_t i = 0; i < h->nheaders; i++) {
    const acp__http_header *hd = &h->headers[i];
    if (!ieq(hd->name, hd->name_len, name))
      continue;
    const char *p = hd->value, *end = hd->value + hd->value_len;
    while (p < end) {
      const char *c = memchr(p, ',', (size_t)(end - p));
      const char *te = c ? c : end;
      const char *a = p, *b = te;
      while (a < b && (*a == ' ' || *a == '\t'))
        a++;
      while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
        b--;
      if (ieq(a, (size_t)(b - a), tok))
        return true;
      p = c ? c + 1 : end;
    }
  }
  return false;
}

/* Host (or the authority of an Origin) allowed by the policy? */
static bool host_ok(const acp__ws_policy *p, const char *v, size_t n) {
  if (!p->hosts)
    return true;
  for (size_t i = 0; p->hosts[i]; i++)
    if (ieq(v, n, p->hosts[i]))
      return true;
  return false;
}

static bool const_time_eq(const char *a, size_t an, const char *b, size_t bn) {
  unsigned char d = an != bn;
  for (size_t i = 0; i < an && i < bn; i++)
    d |= (unsigned char)(a[i] ^ b[i]);
  return d == 0;
}

int acp__ws_check_request(const acp__http_head *h, const acp__ws_policy *p,
                          char accept[29]) {
  const acp__http_header *hd;
  size_t plen = strlen(p->path);
  size_t tl = h->target_len;
  const char *q = memchr(h->target, '?', tl);
  if (q)
    tl = (size_t)(q - h->target);
  if (tl != plen || memcmp(h->target, p->path, plen) != 0)
    return 404;
  hd = acp__http_find(h, "Host");
  if (!hd || h->minor_version < 1)
    return 400;
  if (!host_ok(p, hd->value, hd->value_len))
    return 403;
  hd = acp__http_find(h, "Origin");
  if (hd) {
    /* "null" and anything but scheme://authority is refused. */
    const char *s = memchr(hd->value, ':', hd->value_len);
    if (!s || (size_t)(s - hd->value) + 3 > hd->value_len || s[1] != '/' ||
        s[2] != '/')
      return 403;
    const char *auth = s + 3;
    size_t an = hd->value_len - (size_t)(auth - hd->value);
    if (!host_ok(p, auth, an))
      return 403;
  }
  if (p->token) {
    hd = acp__http_find(h, "Authorization");
    if (!hd || hd->value_len < 7 || !ieq(hd->value, 7, "Bearer ") ||
        !const_time_eq(hd->value + 7, hd->value_len - 7, p->token,
                       strlen(p->token)))
      return 401;
  }
  if (!ieq(h->method, h->method_len, "GET")) {
    if (ieq(h->method, h->method_len, "POST") ||
        ieq(h->method, h->method_len, "DELETE"))
      return 501;
    return 405;
  }
  if (!acp__http_find(h, "Upgrade"))
    return 426;
  if (!acp__http_has_token(h, "Upgrade", "websocket") ||
      !acp__http_has_token(h, "Connection", "upgrade"))
    return 400;
  hd = acp__http_find(h, "Sec-WebSocket-Version");
  if (!hd || hd->value_len != 2 || memcmp(hd->value, "13", 2) != 0)
    return 400;
  hd = acp__http_find(h, "Sec-WebSocket-Key");
  /* A key is 16 bytes in base64: 24 characters. */
  if (!hd || hd->value_len != 24)
    return 400;
  acp__ws_accept_key(hd->value, hd->value_len, accept);
  return 101;
}

/* MARK: - Streamable HTTP requests */

static bool has_substr_ci(const char *v, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (ieq(v + i, k, needle))
      return true;
  return false;
}

int acp__http_check_acp(const acp__http_head *h, size_t max_body,
                        acp__acp_req *r) {
  const acp__http_header *hd;
  memset(r, 0, sizeof(*r));
  hd = acp__http_find(h, "Acp-Connection-Id");
  if (hd && hd->value_len > 0) {
    r->conn_id = hd->value;
    r->conn_id_len = hd->value_len;
  }
  hd = acp__http_find(h, "Acp-Session-Id");
  if (hd && hd->value_len > 0) {
    r->session_id = hd->value;
    r->session_id_len = hd->value_len;
  }
  if (ieq(h->method, h->method_len, "GET")) {
    hd = acp__http_find(h, "Accept");
    /* A plain GET keeps its old answer: this endpoint upgrades. */
    if (!hd || !has_substr_ci(hd->value, hd->value_len, "text/event-stream"))
      return 426;
    if (!r->conn_id)
      return 400;
    r->kind = ACP__REQ_SSE;
    return 0;
  }
  if (ieq(h->method, h->method_len, "DELETE")) {
    if (!r->conn_id)
      return 400;
    r->kind = ACP__REQ_DELETE;
    return 0;
  }
  if (!ieq(h->method, h->method_len, "POST"))
    return 405;
  r->kind = ACP__REQ_POST;
  if (acp__http_find(h, "Transfer-Encoding"))
    return 411; /* Node's fetch sends a string body with a length */
  hd = acp__http_find(h, "Content-Length");
  if (!hd || hd->value_len == 0 || hd->value_len > 19)
    return 411;
  uint64_t cl = 0;
  for (size_t i = 0; i < hd->value_len; i++) {
    if (hd->value[i] < '0' || hd->value[i] > '9')
      return 400;
    cl = cl * 10 + (uint64_t)(hd->value[i] - '0');
  }
  if (cl > max_body)
    return 413;
  r->content_length = (size_t)cl;
  hd = acp__http_find(h, "Content-Type");
  if (!hd || hd->value_len < 16 || !ieq(hd->value, 16, "application/json") ||
      (hd->value_len > 16 && hd->value[16] != ';' && hd->value[16] != ' '))
    return 415;
  return 0;
}

/* MARK: - Response bodies */

int acp__http_body_init(acp__http_body *b, const acp__http_head *h) {
  memset(b, 0, sizeof(*b));
  if (h->status == 204 || h->status == 304 ||
      (h->status >= 100 && h->status < 200)) {
    b->mode = ACP__BODY_LENGTH;
    b->done = true;
    return 0;
  }
  const acp__http_header *te = acp__http_find(h, "Transfer-Encoding");
  if (te) {
    /* Only "chunked" alone: a server sends nothing else to a client that
     * offers no TE. */
    const char *v = te->value;
    size_t n = te->value_len;
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
      n--;
    if (!ieq(v, n, "chunked"))
      return ACP_ERR_PARSE;
    b->mode = ACP__BODY_CHUNKED;
    return 0;
  }
  const acp__http_header *cl = acp__http_find(h, "Content-Length");
  if (cl) {
    uint64_t v = 0;
    if (cl->value_len == 0 || cl->value_len > 15)
      return ACP_ERR_PARSE;
    for (size_t i = 0; i < cl->value_len; i++) {
      char c = cl->value[i];
      if (c < '0' || c > '9')
        return ACP_ERR_PARSE;
      v = v * 10 + (uint64_t)(c - '0');
    }
    b->mode = ACP__BODY_LENGTH;
    b->remain = v;
    b->done = v == 0;
    return 0;
  }
  b->mode = ACP__BODY_CLOSE;
  return 0;
}

/* Chunked framing states. */
enum {
  CS_SIZE = 0, /* hex digits of a chunk size */
  CS_EXT,      /* extensions up to the LF */
  CS_DATA,     /* chunk data */
  CS_DATA_END, /* the CRLF after the data */
  CS_TRAILER,  /* at the start of a trailer line */
  CS_TLINE     /* inside a trailer line */
};

acp_ssize acp__http_body_feed(acp__http_body *b, const char *in, size_t len,
                              const char **out, size_t *out_len) {
  size_t i = 0;
  *out = in;
  *out_len = 0;
  if (b->done || len == 0)
    return 0;
  if (b->mode == ACP__BODY_CLOSE) {
    *out_len = len;
    return (acp_ssize)len;
  }
  if (b->mode == ACP__BODY_LENGTH) {
    size_t n = b->remain < len ? (size_t)b->remain : len;
    b->remain -= n;
    b->done = b->remain == 0;
    *out_len = n;
    return (acp_ssize)n;
  }
  while (i < len && !b->done) {
    char c = in[i];
    switch (b->cst) {
    case CS_SIZE: {
      int v = acp__hexval(c);
      if (v >= 0) {
        if (b->digits == 15)
          return ACP_ERR_PARSE;
        b->remain = (b->remain << 4) | (uint64_t)v;
        b->digits++;
        i++;
        break;
      }
      if (b->digits == 0)
        return ACP_ERR_PARSE;
      b->cst = CS_EXT;
      break;
    }
    case CS_EXT:
      i++;
      if (c == '\n') {
        b->digits = 0;
        b->cst = b->remain == 0 ? CS_TRAILER : CS_DATA;
      } else if ((unsigned char)c < 0x20 && c != '\r' && c != '\t') {
        return ACP_ERR_PARSE;
      }
      break;
    case CS_DATA: {
      size_t n = len - i;
      if (n > b->remain)
        n = (size_t)b->remain;
      b->remain -= n;
      if (b->remain == 0)
        b->cst = CS_DATA_END;
      *out = in + i;
      *out_len = n;
      return (acp_ssize)(i + n);
    }
    case CS_DATA_END:
      i++;
      if (c == '\n')
        b->cst = CS_SIZE;
      else if (c != '\r')
        return ACP_ERR_PARSE;
      break;
    case CS_TRAILER:
      i++;
      if (c == '\n')
        b->done = true;
      else if (c != '\r')
        b->cst = CS_TLINE;
      break;
    default: /* CS_TLINE */
      i++;
      if (c == '\n')
        b->cst = CS_TRAILER;
      break;
    }
  }
  return (acp_ssize)i;
}

/* MARK: - JSON members without a parse */

static const char *js_ws(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
    p++;
  return p;
}

/* p at '"': the byte after the closing quote, or NULL. */
static const char *js_str_end(const char *p, const char *e) {
  p++;
  for (;;) {
    const char *q = p < e ? memchr(p, '"', (size_t)(e - p)) : NULL;
    if (!q)
      return NULL;
    size_t bs = 0;
    while (q - bs > p && q[-1 - (ptrdiff_t)bs] == '\\')
      bs++;
    if (bs % 2 == 0)
      return q + 1;
    p = q + 1;
  }
}

/* The byte after the value at p, or NULL. */
static const char *js_val_end(const char *p, const char *e) {
  size_t depth = 0;
  while (p < e) {
    char ch = *p;
    if (ch == '"') {
      p = js_str_end(p, e);
      if (!p)
        return NULL;
      if (depth == 0)
        return p;
      continue;
    }
    if (ch == '{' || ch == '[') {
      depth++;
    } else if (ch == '}' || ch == ']') {
      if (depth == 0)
        return p; /* a scalar ended by its container */
      if (--depth == 0)
        return p + 1;
    } else if (depth == 0 && (ch == ',' || ch == ' ' || ch == '\t' ||
                              ch == '\r' || ch == '\n')) {
      return p;
    }
    p++;
  }
  return depth == 0 ? p : NULL;
}

/* acp__js_member(); with ve NULL, the value is not looked through: *vb is
 * where it starts (a 1 MiB params is not scanned to reach a member at its
 * head). */
static bool member_at(const char *p, const char *e, const char *key,
                      size_t klen, const char **vb, const char **ve) {
  p = js_ws(p, e);
  if (p >= e || *p != '{')
    return false;
  p++;
  for (;;) {
    p = js_ws(p, e);
    if (p >= e || *p != '"')
      return false;
    const char *ks = p + 1, *kend = js_str_end(p, e);
    if (!kend)
      return false;
    p = js_ws(kend, e);
    if (p >= e || *p != ':')
      return false;
    p = js_ws(p + 1, e);
    const char *v = p;
    bool hit = (size_t)(kend - 1 - ks) == klen && memcmp(ks, key, klen) == 0;
    if (hit && !ve) {
      *vb = v;
      return v < e;
    }
    p = js_val_end(p, e);
    if (!p || p == v)
      return false;
    if (hit) {
      *vb = v;
      *ve = p;
      return true;
    }
    p = js_ws(p, e);
    if (p >= e || *p != ',')
      return false;
    p++;
  }
}

bool acp__js_member(const char *p, const char *e, const char *key, size_t klen,
                    const char **vb, const char **ve) {
  return member_at(p, e, key, klen, vb, ve);
}

bool acp__js_member_in(const char *p, const char *e, const char *parent,
                       size_t plen, const char *key, size_t klen,
                       const char **vb, const char **ve) {
  const char *pb;
  /* Inside the parent's object the walk stops at its closing brace,
   * where a ',' would have to be: e is the message's end. */
  return member_at(p, e, parent, plen, &pb, NULL) &&
         member_at(pb, e, key, klen, vb, ve);
}

/* Like acp__js_member, for the head of a message cut off at e (a line too
 * long to hold): a member before the cut is found whole, the one the cut
 * falls in is found cut off. A scalar that runs up to e may go on after
 * it, so it counts as cut off; a string or container closed by e is
 * whole. Nothing at or after e is read. */
int acp__js_member_head(const char *p, const char *e, const char *key,
                        size_t klen, const char **vb, const char **ve) {
  p = js_ws(p, e);
  if (p >= e || *p != '{')
    return 0;
  p++;
  for (;;) {
    p = js_ws(p, e);
    if (p >= e || *p != '"')
      return 0;
    const char *ks = p + 1, *kend = js_str_end(p, e);
    if (!kend)
      return 0; /* the cut is in a key: not seen */
    bool hit = (size_t)(kend - 1 - ks) == klen && memcmp(ks, key, klen) == 0;
    p = js_ws(kend, e);
    if (p < e && *p != ':')
      return 0;
    const char *v = p < e ? js_ws(p + 1, e) : e;
    p = v < e ? js_val_end(v, e) : NULL;
    if (!p || (p == e && *v != '"' && *v != '{' && *v != '[')) {
      if (!hit)
        return 0;
      *vb = v;
      *ve = e;
      return 2;
    }
    if (p == v)
      return 0;
    if (hit) {
      *vb = v;
      *ve = p;
      return 1;
    }
    p = js_ws(p, e);
    if (p >= e || *p != ',')
      return 0;
    p++;
  }
}

/* MARK: - URLs */

int acp__url_parse(const char *url, acp__url *u) {
  const char *p;
  memset(u, 0, sizeof(*u));
  if (!url)
    return ACP_ERR_INVALID_ARGUMENT;
  if (strncmp(url, "ws://", 5) == 0) {
    p = url + 5;
    u->ws = true;
  } else if (strncmp(url, "http://", 7) == 0) {
    p = url + 7;
  } else if (strncmp(url, "wss://", 6) == 0) {
    p = url + 6;
    u->ws = u->tls = true;
  } else if (strncmp(url, "https://", 8) == 0) {
    p = url + 8;
    u->tls = true;
  } else {
    return ACP_ERR_INVALID_ARGUMENT;
  }
  for (const char *q = url; *q; q++)
    if ((unsigned char)*q <= 0x20 || *q == 0x7F)
      return ACP_ERR_INVALID_ARGUMENT;
  const char *slash = strchr(p, '/');
  size_t alen = slash ? (size_t)(slash - p) : strlen(p);
  if (alen == 0 || memchr(p, '@', alen) || memchr(p, '?', alen) ||
      memchr(p, '#', alen))
    return ACP_ERR_INVALID_ARGUMENT;
  u->path = slash ? slash : "/";
  u->authority = p;
  u->authority_len = alen;
  const char *pe = p + alen;
  const char *ps = NULL;
  if (*p == '[') {
    const char *rb = memchr(p, ']', alen);
    if (!rb)
      return ACP_ERR_INVALID_ARGUMENT;
    u->host = p + 1;
    u->host_len = (size_t)(rb - p - 1);
    if (rb + 1 < pe) {
      if (rb[1] != ':')
        return ACP_ERR_INVALID_ARGUMENT;
      ps = rb + 2;
    }
  } else {
    const char *colon = memchr(p, ':', alen);
    u->host = p;
    u->host_len = colon ? (size_t)(colon - p) : alen;
    if (colon)
      ps = colon + 1;
  }
  if (u->host_len == 0)
    return ACP_ERR_INVALID_ARGUMENT;
  if (ps) {
    u->port = ps;
    u->port_len = (size_t)(pe - ps);
    if (u->port_len == 0 || u->port_len > 5)
      return ACP_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < u->port_len; i++)
      if (ps[i] < '0' || ps[i] > '9')
        return ACP_ERR_INVALID_ARGUMENT;
  }
  return 0;
}
