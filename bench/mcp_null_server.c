/*
 * mcp_null_server: the floor of a stdio MCP round trip on this machine. It
 * answers bench_mcp_stdio's lines without parsing JSON: blocking read(2),
 * one write(2) per answer, no event loop, no allocation per message. What
 * it costs is what the two pipes and two wake-ups cost; no real server can
 * be faster over the same pipes, so bench/run-mcp.sh reports it beside
 * ours and theirs as the ceiling of any stdio ratio.
 *
 * It knows only the bench's workload: `initialize` (answered with the
 * version asked for and a tools capability), notifications (ignored) and
 * `tools/call echo {"message": TEXT}` (answered with one text block, TEXT
 * copied as written, escapes included). It is a measuring tool, not an MCP
 * server: anything else gets the same echo answer.
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <string.h>

#include "bench_io.h"

#define BUF (1024 * 1024)

static char in[BUF];
static char out[BUF + 512];

/* The raw text of the value after `"key":` (a number or a whole string,
 * quotes included), or NULL. Good enough for lines our client writes. */
static const char *field(const char *line, const char *end, const char *key,
                         size_t *len) {
  size_t kl = strlen(key);
  const char *p = line;
  for (; p + kl + 3 <= end; p++) {
    if (p[0] != '"' || memcmp(p + 1, key, kl) != 0 || p[kl + 1] != '"' ||
        p[kl + 2] != ':')
      continue;
    const char *v = p + kl + 3, *e = v;
    if (e < end && *e == '"') {
      for (e++; e < end && *e != '"'; e++)
        if (*e == '\\')
          e++;
      e++;
    } else {
      while (e < end && *e != ',' && *e != '}')
        e++;
    }
    if (e > end)
      return NULL;
    *len = (size_t)(e - v);
    return v;
  }
  return NULL;
}

static int answer(const char *line, const char *end) {
  size_t il, vl, ml;
  const char *id = field(line, end, "id", &il);
  const char *v, *m;
  int n;
  if (id == NULL)
    return 0; /* a notification */
  if (field(line, end, "method", &vl) != NULL &&
      memmem(line, (size_t)(end - line), "\"initialize\"", 12) != NULL) {
    v = field(line, end, "protocolVersion", &vl);
    if (v == NULL) {
      v = "\"2025-11-25\"";
      vl = 12;
    }
    n = snprintf(out, sizeof(out),
                 "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":{"
                 "\"protocolVersion\":%.*s,\"capabilities\":{\"tools\":{}},"
                 "\"serverInfo\":{\"name\":\"null\",\"version\":\"0\"}}}\n",
                 (int)il, id, (int)vl, v);
  } else {
    m = field(line, end, "message", &ml);
    if (m == NULL || ml < 2 || *m != '"') {
      m = "\"\"";
      ml = 2;
    }
    n = snprintf(out, sizeof(out),
                 "{\"jsonrpc\":\"2.0\",\"id\":%.*s,\"result\":{\"content\":[{"
                 "\"type\":\"text\",\"text\":%.*s}]}}\n",
                 (int)il, id, (int)ml, m);
  }
  if (n < 0 || (size_t)n >= sizeof(out))
    return -1;
  return bench_write_all(1, out, (size_t)n);
}

int main(void) {
  return bench_serve_lines(in, sizeof(in), "mcp_null_server", answer);
}
