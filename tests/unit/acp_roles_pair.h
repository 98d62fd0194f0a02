/*
 * Test harness shared by test_acp_agent.c, test_acp_client.c and
 * test_acp_roles.c: an agent and a client connected back to back in memory.
 * Everything each side sends is also appended to a transcript so tests can
 * assert on the exact wire bytes.
 */
#ifndef ACP_ROLES_PAIR_H
#define ACP_ROLES_PAIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/acp.h"

/* A string literal and its length. */
#define LIT(s) s, (sizeof(s) - 1)

typedef struct tbuf {
  char *data;
  size_t len;
} tbuf;

static void tbuf_add(tbuf *b, const char *p, size_t n) {
  char *d = realloc(b->data, b->len + n + 1);

  if (d == NULL)
    abort();
  memcpy(d + b->len, p, n);
  b->len += n;
  d[b->len] = '\0';
  b->data = d;
}

static void tbuf_clear(tbuf *b) {
  free(b->data);
  b->data = NULL;
  b->len = 0;
}

/* Bytes the agent sent (a2c) and the client sent (c2a). */
typedef struct pair_wire {
  tbuf a2c;
  tbuf c2a;
} pair_wire;

/*
 * Shuttle bytes until both sides are quiet. Returns 0, or the first
 * negative code any recv/send returned.
 */
static inline int pump(acp_agent *a, acp_client *c, pair_wire *wire) {
  int i;

  for (i = 0; i < 1000; i++) {
    const char *d = NULL;
    acp_ssize n = acp_agent_send(a, &d);
    acp_ssize m;
    acp_ssize r;

    if (n < 0)
      return (int)n;
    if (n > 0) {
      if (wire)
        tbuf_add(&wire->a2c, d, (size_t)n);
      r = acp_client_recv(c, d, (size_t)n, 0);
      if (r < 0)
        return (int)r;
    }
    m = acp_client_send(c, &d);
    if (m < 0)
      return (int)m;
    if (m > 0) {
      if (wire)
        tbuf_add(&wire->c2a, d, (size_t)m);
      r = acp_agent_recv(a, d, (size_t)m, 0);
      if (r < 0)
        return (int)r;
    }
    if (n == 0 && m == 0)
      return 0;
  }
  return -1;
}

static inline void wire_clear(pair_wire *w) {
  tbuf_clear(&w->a2c);
  tbuf_clear(&w->c2a);
}

/* Feed one raw line to the agent and collect what it answers. */
static inline int agent_feed(acp_agent *a, const char *line, tbuf *out) {
  const char *d;
  acp_ssize n = acp_agent_recv(a, line, strlen(line), 0);

  if (n < 0)
    return (int)n;
  n = acp_agent_send(a, &d);
  if (n < 0)
    return (int)n;
  if (n > 0)
    tbuf_add(out, d, (size_t)n);
  return 0;
}

/* Feed one raw line to the client and collect what it answers. */
static inline int client_feed(acp_client *c, const char *line, tbuf *out) {
  const char *d;
  acp_ssize n = acp_client_recv(c, line, strlen(line), 0);

  if (n < 0)
    return (int)n;
  n = acp_client_send(c, &d);
  if (n < 0)
    return (int)n;
  if (n > 0)
    tbuf_add(out, d, (size_t)n);
  return 0;
}

/* Count non-overlapping occurrences of s in b. */
static inline int tbuf_count(const tbuf *b, const char *s) {
  int k = 0;
  const char *p = b->data;
  size_t n = strlen(s);

  if (p == NULL)
    return 0;
  while ((p = strstr(p, s)) != NULL) {
    k++;
    p += n;
  }
  return k;
}

#endif /* ACP_ROLES_PAIR_H */
