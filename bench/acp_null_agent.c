/*
 * acp_null_agent: an agent that costs next to nothing, to tell how much of
 * a prompt turn is our client and how much our agent (bench/run-turns.sh
 * runs `acp bench-client` against it beside `acp agent --echo` and the
 * floor). It answers the bench client's lines without parsing JSON:
 * blocking read(2), one write(2) per answer, no event loop, no allocation
 * per message, and nothing scanned byte by byte that memchr() or memmem()
 * can find.
 *
 * It knows only the bench's workload: `initialize` (protocol version 1, no
 * capabilities), `session/new` (a fixed session id) and `session/prompt`
 * (one agent_message_chunk carrying the prompt's first "text" value as
 * written, escapes included, then the end_turn answer, both in one
 * write). Notifications are ignored. It is a measuring tool, not an agent.
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BUF (8 * 1024 * 1024)

static char in[BUF];
static char out[BUF + 1024];

#define SID "\"sess_00000000000000000000000000000000\""

/* The raw text of the value after `"key":` (a number up to ',' or '}', or
 * a whole string, quotes included), or NULL. Good enough for the lines
 * our client writes: compact JSON, keys that do not occur in values. */
static const char *field(const char *line, const char *end, const char *key,
                         size_t klen, size_t *len) {
  const char *k = memmem(line, (size_t)(end - line), key, klen);
  const char *v, *e;
  if (k == NULL)
    return NULL;
  v = k + klen;
  if (v < end && *v == '"') {
    /* The closing quote: one with an even run of backslashes before it. */
    for (e = v + 1;; e++) {
      const char *b;
      e = memchr(e, '"', (size_t)(end - e));
      if (e == NULL)
        return NULL;
      for (b = e; b > v + 1 && b[-1] == '\\'; b--)
        ;
      if ((e - b) % 2 == 0)
        break;
    }
    e++;
  } else {
    for (e = v; e < end && *e != ',' && *e != '}'; e++)
      ;
  }
  *len = (size_t)(e - v);
  return v;
}

static char *put(char *o, const char *s, size_t n) {
  memcpy(o, s, n);
  return o + n;
}
#define PUT(o, lit) put((o), (lit), sizeof(lit) - 1)

static int write_all(const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(1, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int answer(const char *line, const char *end) {
  size_t il, tl, ml;
  const char *id = field(line, end, "\"id\":", 5, &il);
  const char *m, *t;
  char *o = out;

  if (id == NULL || il > 64)
    return 0; /* a notification */
  m = field(line, end, "\"method\":", 9, &ml);
  if (m != NULL && ml == 12 && memcmp(m, "\"initialize\"", 12) == 0) {
    o = PUT(o, "{\"jsonrpc\":\"2.0\",\"id\":");
    o = put(o, id, il);
    o = PUT(o, ",\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{},"
               "\"authMethods\":[],\"agentInfo\":{\"name\":\"null\","
               "\"version\":\"0\"}}}\n");
  } else if (m != NULL && ml == 13 && memcmp(m, "\"session/new\"", 13) == 0) {
    o = PUT(o, "{\"jsonrpc\":\"2.0\",\"id\":");
    o = put(o, id, il);
    o = PUT(o, ",\"result\":{\"sessionId\":" SID "}}\n");
  } else {
    t = field(line, end, "\"text\":", 7, &tl);
    if (t == NULL || tl < 2 || *t != '"' || tl > BUF) {
      t = "\"\"";
      tl = 2;
    }
    o = PUT(o, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
               "\"sessionId\":" SID ",\"update\":{\"sessionUpdate\":"
               "\"agent_message_chunk\",\"content\":{\"type\":\"text\","
               "\"text\":");
    o = put(o, t, tl);
    o = PUT(o, "}}}}\n{\"jsonrpc\":\"2.0\",\"id\":");
    o = put(o, id, il);
    o = PUT(o, ",\"result\":{\"stopReason\":\"end_turn\"}}\n");
  }
  return write_all(out, (size_t)(o - out));
}

int main(void) {
  size_t len = 0;
  for (;;) {
    ssize_t r = read(0, in + len, sizeof(in) - len);
    const char *p, *nl, *stop;
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return 0;
    /* Lines end in the bytes just read: the search starts there. */
    p = in;
    stop = in + len + (size_t)r;
    for (const char *from = in + len;
         (nl = memchr(from, '\n', (size_t)(stop - from))) != NULL; from = p) {
      if (answer(p, nl) != 0)
        return 1;
      p = nl + 1;
    }
    len = (size_t)(stop - p);
    memmove(in, p, len);
    if (len == sizeof(in)) {
      fputs("acp_null_agent: line longer than 8 MiB\n", stderr);
      return 1;
    }
  }
}
