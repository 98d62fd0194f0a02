/*
 * Base64 (RFC 4648) in the two forms the protocols use: the standard
 * alphabet with '=' padding (WebSocket accept keys, the Mcp-Name /
 * Mcp-Param-* header sentinel) and the URL-safe alphabet without padding
 * (MCP requestState, PKCE). One table per alphabet; decoding is strict, so
 * a value has one spelling (SEP-2243 rejects bad padding and characters
 * outside the alphabet, and a signed requestState must not have two).
 */
#include "util.h"

static const char std_tab[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char url_tab[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t acp__b64_encoded_len(size_t n, int form) {
  if (form == ACP__B64_URL)
    return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
  return (n + 2) / 3 * 4;
}

size_t acp__b64_encode(char *out, const void *in, size_t n, int form) {
  const char *tab = form == ACP__B64_URL ? url_tab : std_tab;
  const uint8_t *p = in;
  size_t i, o = 0;

  for (i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16;
    if (i + 1 < n)
      v |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n)
      v |= p[i + 2];
    out[o++] = tab[(v >> 18) & 63];
    out[o++] = tab[(v >> 12) & 63];
    if (i + 1 < n)
      out[o++] = tab[(v >> 6) & 63];
    else if (form == ACP__B64_STD)
      out[o++] = '=';
    if (i + 2 < n)
      out[o++] = tab[v & 63];
    else if (form == ACP__B64_STD)
      out[o++] = '=';
  }
  return o;
}

int acp__b64_append(acp__buf *b, const void *in, size_t n, int form) {
  size_t len = acp__b64_encoded_len(n, form);
  int rv = acp__buf_reserve(b, len);
  if (rv != 0)
    return rv;
  b->len += acp__b64_encode(b->data + b->len, in, n, form);
  return 0;
}

static int sextet(char c, int form) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == (form == ACP__B64_URL ? '-' : '+'))
    return 62;
  if (c == (form == ACP__B64_URL ? '_' : '/'))
    return 63;
  return -1;
}

int acp__b64_decode(acp__buf *b, const char *p, size_t n, int form) {
  uint32_t acc = 0;
  int bits = 0;
  size_t i;

  if (form == ACP__B64_STD) {
    /* Whole quanta, '=' only as the last one or two characters. */
    if (n % 4 != 0)
      return ACP_ERR_INVALID_ARGUMENT;
    if (n > 0 && p[n - 1] == '=')
      n--;
    if (n > 0 && p[n - 1] == '=')
      n--;
  } else if (n % 4 == 1) {
    return ACP_ERR_INVALID_ARGUMENT; /* no byte ends after one sextet */
  }
  for (i = 0; i < n; i++) {
    int v = sextet(p[i], form);
    if (v < 0)
      return ACP_ERR_INVALID_ARGUMENT;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (acp__buf_putc(b, (char)((acc >> bits) & 0xff)) != 0)
        return ACP_ERR_NOMEM;
    }
  }
  return 0;
}
