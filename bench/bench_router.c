/*
 * Router forwarding speed: 1 MiB messages through a chain of 3 proxies and
 * an agent, with the proxies simulated by pre-built lines (each forwards the
 * payload unchanged, as a pass-through proxy would). Only the router's work
 * is timed: parse the line, rewrite the envelope, copy the payload once into
 * the destination buffer, drain.
 *
 *   bench_router [reps]     (default 15 repetitions; the median is reported)
 *
 * down: client session/prompt (1 MiB params) -> P1 -> P2 -> P3 -> agent,
 *       4 router hops per message (3 of them unwrap proxy/successor), plus
 *       the small responses travelling back.
 * up:   agent session/update (1 MiB) -> P3 -> P2 -> P1 -> client, 4 hops
 *       (3 of them wrap in proxy/successor).
 * Anchors in the same run: memcpy of the message (the one copy a hop must
 * make) and acp_json_doc_parse of it (the validation a hop must do).
 * MiB/s counts payload bytes per hop (4 hops per message) and end to end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acp/json.h"
#include "acp/router.h"

#define PAYLOAD (1u << 20)

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "bench_router: %s\n", what);
  exit(1);
}

static size_t sink;

static void drain(acp_router *r, size_t link) {
  const char *d;
  acp_ssize n = acp_router_send(r, link, &d);
  if (n < 0)
    die("send");
  if (n > 0)
    sink += (size_t)n + (unsigned char)d[n - 1];
}

static void feed(acp_router *r, size_t link, const char *s, size_t n) {
  if (acp_router_recv(r, link, s, n) != 0)
    die("recv");
}

static void feedz(acp_router *r, size_t link, const char *s) {
  feed(r, link, s, strlen(s));
}

/* A JSON string body of about `n` bytes of text with some escapes. */
static char *make_text(size_t n) {
  static const char *const words[] = {"the ",
                                      "function ",
                                      "returns ",
                                      "caf\\u00e9 ",
                                      "\\\"quoted\\\" ",
                                      "line\\n",
                                      "tab\\t",
                                      "na\xc3\xafve ",
                                      "\xe6\x97\xa5\xe6\x9c\xac ",
                                      "path/to/file.c ",
                                      "12345678901234567890 "};
  char *s = malloc(n + 64);
  size_t len = 0;
  size_t i = 0;

  if (s == NULL)
    die("oom");
  while (len < n) {
    const char *w = words[i++ % (sizeof(words) / sizeof(words[0]))];
    size_t wl = strlen(w);
    memcpy(s + len, w, wl);
    len += wl;
  }
  s[len] = '\0';
  return s;
}

static char *fmt(const char *pre, const char *mid, const char *post) {
  size_t a = strlen(pre), b = strlen(mid), c = strlen(post);
  char *s = malloc(a + b + c + 1);
  if (s == NULL)
    die("oom");
  memcpy(s, pre, a);
  memcpy(s + a, mid, b);
  memcpy(s + a + b, post, c + 1);
  return s;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static acp_router *make_chain(void) {
  acp_router *r = NULL;
  size_t i;
  char line[256];

  if (acp_router_new(&r, 4, NULL, NULL, NULL) != 0)
    die("new");
  feedz(r, 0,
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
        "\"params\":{\"protocolVersion\":1}}");
  for (i = 1; i <= 3; i++) {
    drain(r, i);
    feedz(r, i,
          "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"proxy/successor\","
          "\"params\":{\"method\":\"initialize\",\"params\":{}}}");
  }
  drain(r, 4);
  for (i = 4; i >= 1; i--) {
    snprintf(line, sizeof(line),
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
    feedz(r, i, line);
    drain(r, i - 1);
  }
  return r;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 15;
  char *text = make_text(PAYLOAD - 64);
  char *params = fmt("{\"sessionId\":\"s\",\"prompt\":[{\"type\":\"text\","
                     "\"text\":\"",
                     text, "\"}]}");
  char *c_req = fmt("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":"
                    "\"session/prompt\",\"params\":",
                    params, "}");
  char *p_req = fmt("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":"
                    "\"proxy/successor\",\"params\":{\"method\":"
                    "\"session/prompt\",\"params\":",
                    params, "}}");
  char *a_up = fmt("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                   "\"params\":",
                   params, "}");
  size_t c_len = strlen(c_req), p_len = strlen(p_req), a_len = strlen(a_up);
  double *down = calloc((size_t)reps, sizeof(double));
  double *up = calloc((size_t)reps, sizeof(double));
  double *cp = calloc((size_t)reps, sizeof(double));
  double *ps = calloc((size_t)reps, sizeof(double));
  acp_router *r = make_chain();
  acp_json_doc *doc = NULL;
  char *copy = malloc(c_len);
  const int per = 16;
  int rep, i;
  int64_t id[5] = {0, 2, 2, 2, 2}; /* next router id per link */
  char line[128];
  double mib = (double)strlen(params) / (1024.0 * 1024.0);

  if (!down || !up || !cp || !ps || !copy || acp_json_doc_new(&doc, NULL))
    die("oom");
  for (rep = 0; rep < reps; rep++) {
    double t0 = now_sec();
    for (i = 0; i < per; i++) {
      size_t k;
      feed(r, 0, c_req, c_len);
      drain(r, 1);
      for (k = 1; k <= 3; k++) {
        feed(r, k, p_req, p_len);
        drain(r, k + 1);
      }
      for (k = 4; k >= 1; k--) {
        snprintf(line, sizeof(line),
                 "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{\"stopReason\":"
                 "\"end_turn\"}}",
                 (long long)id[k]++);
        feedz(r, k, line);
        drain(r, k - 1);
      }
    }
    down[rep] = (now_sec() - t0) / per;
    t0 = now_sec();
    for (i = 0; i < per; i++) {
      size_t k;
      for (k = 4; k >= 1; k--) {
        feed(r, k, a_up, a_len);
        drain(r, k - 1);
      }
    }
    up[rep] = (now_sec() - t0) / per;
    t0 = now_sec();
    for (i = 0; i < per * 4; i++) {
      memcpy(copy, c_req, c_len);
      sink += (unsigned char)copy[i];
    }
    cp[rep] = (now_sec() - t0) / (per * 4);
    t0 = now_sec();
    for (i = 0; i < per * 4; i++)
      if (acp_json_doc_parse(doc, c_req, c_len, NULL) != 0)
        die("parse");
    ps[rep] = (now_sec() - t0) / (per * 4);
  }
  if (acp_router_pending(r) != 0)
    die("requests left pending");
  qsort(down, (size_t)reps, sizeof(double), cmp);
  qsort(up, (size_t)reps, sizeof(double), cmp);
  qsort(cp, (size_t)reps, sizeof(double), cmp);
  qsort(ps, (size_t)reps, sizeof(double), cmp);
  printf("router, 3 proxies + agent, %.2f MiB payload, median of %d x %d:\n",
         mib, reps, per);
  printf("  down (prompt, 4 hops + 4 small responses): %8.1f MiB/s end to "
         "end, %8.1f MiB/s per hop\n",
         mib / down[reps / 2], 4 * mib / down[reps / 2]);
  printf("  up   (session/update, 4 hops):             %8.1f MiB/s end to "
         "end, %8.1f MiB/s per hop\n",
         mib / up[reps / 2], 4 * mib / up[reps / 2]);
  printf("  anchor memcpy of one message:              %8.1f MiB/s\n",
         mib / cp[reps / 2]);
  printf("  anchor acp_json_doc_parse of one message:  %8.1f MiB/s\n",
         mib / ps[reps / 2]);
  acp_router_free(r);
  acp_json_doc_free(doc);
  free(text);
  free(params);
  free(c_req);
  free(p_req);
  free(a_up);
  free(copy);
  free(down);
  free(up);
  free(cp);
  free(ps);
  return sink == 42 ? 1 : 0;
}
