/*
 * acp_null_agent: an agent that costs next to nothing, to tell how much of
 * a prompt turn is our client and how much our agent (bench/run-turns.sh
 * runs `acp bench-client` against it beside `acp agent --echo` and the
 * floor). It answers the bench client's lines without parsing JSON:
 * blocking read(2), one write(2) per answer, no event loop, no allocation
 * per message. The bench client's prompt is read as that client writes it
 * (about 420 instructions a 5 B turn, all told; `cat` takes 110);
 * anything else is searched for its members with memchr().
 *
 * It knows only the bench's workload: `initialize` (protocol version 1, no
 * capabilities), `session/new` (a fixed session id) and `session/prompt`
 * (one agent_message_chunk carrying the prompt's first "text" value as
 * written, escapes included, then the end_turn answer, both in one
 * write). Notifications are ignored. It is a measuring tool, not an agent.
 */
#include <string.h>

#include "bench_io.h"

#define BUF (8 * 1024 * 1024)

static char in[BUF];
static char out[BUF + 1024];

#define SID "\"sess_00000000000000000000000000000000\""

/* Where `key` (`"name":`) starts in [p, end), or NULL: from quote to
 * quote, each compared once, which costs less than memmem() on lines of a
 * hundred bytes with a quote every few. A quote inside a value is escaped
 * (`\"`), so no key is found there. */
static const char *find_key(const char *p, const char *end, const char *key,
                            size_t klen) {
  while ((size_t)(end - p) >= klen) {
    p = memchr(p, '"', (size_t)(end - p) - klen + 1);
    if (p == NULL)
      return NULL;
    if (p[1] == key[1] && memcmp(p, key, klen) == 0)
      return p;
    p++;
  }
  return NULL;
}

/* Past the closing quote of the string that opens at v, or NULL: the
 * first quote with an even run of backslashes before it. */
static const char *str_end(const char *v, const char *end) {
  const char *e, *b;
  for (e = v + 1;; e++) {
    e = memchr(e, '"', (size_t)(end - e));
    if (e == NULL)
      return NULL;
    for (b = e; b > v + 1 && b[-1] == '\\'; b--)
      ;
    if ((e - b) % 2 == 0)
      return e + 1;
  }
}

/* The raw text of the value after `key`, looked for from `from` on and
 * then from the line's start (the bench client writes id, method and
 * params in that order): a number up to ',' or '}', or a whole string,
 * quotes included; NULL if absent. Good enough for the lines our client
 * writes: compact JSON, keys that do not occur in values. */
static const char *field(const char *line, const char *from, const char *end,
                         const char *key, size_t klen, size_t *len) {
  const char *k = find_key(from, end, key, klen);
  const char *v, *e;
  if (k == NULL && from != line)
    k = find_key(line, end, key, klen);
  if (k == NULL)
    return NULL;
  v = k + klen;
  if (v < end && *v == '"') {
    e = str_end(v, end);
    if (e == NULL)
      return NULL;
  } else {
    for (e = v; e < end && *e != ',' && *e != '}'; e++)
      ;
  }
  *len = (size_t)(e - v);
  return v;
}

/* A prompt exactly as `acp bench-client` writes it, read without a
 * search (the search above costs a thousand instructions a line, most of
 * this program's work): 1 with the id and the text's raw value, 0 for
 * anything else, which field() then handles. */
#define LIT(s) s, sizeof(s) - 1
static int bench_prompt(const char *p, const char *end, const char **id,
                        size_t *il, const char **t, size_t *tl) {
  static const char pre[] = "{\"jsonrpc\":\"2.0\",\"id\":";
  static const char mid[] =
      ",\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"";
  static const char txt[] = ",\"prompt\":[{\"type\":\"text\",\"text\":";
  const char *e;

  if ((size_t)(end - p) < sizeof(pre) - 1 || memcmp(p, LIT(pre)) != 0)
    return 0;
  p += sizeof(pre) - 1;
  *id = p;
  while (p < end && *p >= '0' && *p <= '9')
    p++;
  *il = (size_t)(p - *id);
  if (*il == 0 || *il > 20 || (size_t)(end - p) < sizeof(mid) - 1 ||
      memcmp(p, LIT(mid)) != 0)
    return 0;
  p += sizeof(mid) - 1;
  /* The session id's closing quote (an id with an escape is left to the
   * search), then the text's key and its opening quote. */
  p = memchr(p, '"', (size_t)(end - p));
  if (p == NULL || p[-1] == '\\')
    return 0;
  p++;
  if ((size_t)(end - p) < sizeof(txt) || memcmp(p, LIT(txt)) != 0)
    return 0;
  p += sizeof(txt) - 1;
  *t = p;
  if (*p != '"' || (e = str_end(p, end)) == NULL)
    return 0;
  *tl = (size_t)(e - p);
  return 1;
}

static char *put(char *o, const char *s, size_t n) {
  memcpy(o, s, n);
  return o + n;
}
#define PUT(o, lit) put((o), (lit), sizeof(lit) - 1)

/* The answer to anything but a prompt (initialize, session/new): its
 * length in out; 0 for a prompt, -1 for a notification. */
static int answer_other(const char *line, const char *end, const char **id,
                        size_t *il, const char **t, size_t *tl) {
  size_t ml = 0;
  const char *m;
  char *o = out;

  *id = field(line, line, end, "\"id\":", 5, il);
  if (*id == NULL || *il > 64)
    return -1;
  m = field(line, *id + *il, end, "\"method\":", 9, &ml);
  if (m != NULL && ml == 12 && memcmp(m, "\"initialize\"", 12) == 0) {
    o = PUT(o, "{\"jsonrpc\":\"2.0\",\"id\":");
    o = put(o, *id, *il);
    o = PUT(o, ",\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{},"
               "\"authMethods\":[],\"agentInfo\":{\"name\":\"null\","
               "\"version\":\"0\"}}}\n");
    return (int)(o - out);
  }
  if (m != NULL && ml == 13 && memcmp(m, "\"session/new\"", 13) == 0) {
    o = PUT(o, "{\"jsonrpc\":\"2.0\",\"id\":");
    o = put(o, *id, *il);
    o = PUT(o, ",\"result\":{\"sessionId\":" SID "}}\n");
    return (int)(o - out);
  }
  *t = field(line, m != NULL ? m + ml : line, end, "\"text\":", 7, tl);
  if (*t == NULL || *tl < 2 || **t != '"' || *tl > BUF) {
    *t = "\"\"";
    *tl = 2;
  }
  return 0;
}

static int answer(const char *line, const char *end) {
  size_t il = 0, tl = 0;
  const char *id = NULL, *t = NULL;
  char *o = out;

  if (!bench_prompt(line, end, &id, &il, &t, &tl)) {
    int n = answer_other(line, end, &id, &il, &t, &tl);
    if (n != 0)
      return n < 0 ? 0 : bench_write_all(1, out, (size_t)n);
  }
  o = PUT(o, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
             "\"sessionId\":" SID ",\"update\":{\"sessionUpdate\":"
             "\"agent_message_chunk\",\"content\":{\"type\":\"text\","
             "\"text\":");
  o = put(o, t, tl);
  o = PUT(o, "}}}}\n{\"jsonrpc\":\"2.0\",\"id\":");
  o = put(o, id, il);
  o = PUT(o, ",\"result\":{\"stopReason\":\"end_turn\"}}\n");
  return bench_write_all(1, out, (size_t)(o - out));
}

int main(void) {
  return bench_serve_lines(in, sizeof(in), "acp_null_agent", answer);
}
