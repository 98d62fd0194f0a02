/*
 * JSON throughput against json-c, in the same run, on ~1 MiB of realistic
 * ACP NDJSON traffic (streamed message chunks with escapes and non-ASCII
 * text, tool calls with nested rawInput, responses with numbers and _meta).
 *
 *   bench_json [reps]      (default 21 repetitions; the median is reported)
 *
 * parse: ours = acp_json_doc_parse() reusing one document; json-c =
 *        json_tokener_parse_ex() with one tokener reset per message (the
 *        json_object tree freed each time, which is part of its cost).
 * write: ours = walk each parsed document and re-serialize it through the
 *        typed writer API (strings decoded and re-escaped); json-c =
 *        json_object_to_json_string_ext(JSON_C_TO_STRING_PLAIN).
 * Throughput is input bytes per second in both cases.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acp/json.h"

#ifdef ACP_HAVE_JSONC
#include <json-c/json.h>
#endif

#define TARGET_BYTES (1u << 20)

typedef struct corpus {
  char *data;
  size_t len;
  size_t cap;
  size_t *off; /* start of each line */
  size_t *lens;
  size_t n;
  size_t ncap;
} corpus;

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void add_line(corpus *c, const char *s, size_t n) {
  if (c->len + n + 1 > c->cap) {
    c->cap = (c->len + n + 1) * 2;
    c->data = realloc(c->data, c->cap);
  }
  if (c->n == c->ncap) {
    c->ncap = c->ncap ? c->ncap * 2 : 1024;
    c->off = realloc(c->off, c->ncap * sizeof(size_t));
    c->lens = realloc(c->lens, c->ncap * sizeof(size_t));
  }
  if (c->data == NULL || c->off == NULL || c->lens == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memcpy(c->data + c->len, s, n);
  c->off[c->n] = c->len;
  c->lens[c->n] = n;
  c->n++;
  c->len += n;
  c->data[c->len++] = '\n';
}

static const char *const words[] = {"the",
                                    "function",
                                    "returns",
                                    "caf\\u00e9",
                                    "\\\"quoted\\\"",
                                    "line\\n",
                                    "tab\\t",
                                    "na\xc3\xafve",
                                    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
                                    "emoji \\ud83d\\ude00",
                                    "path/to/file.c",
                                    "error:",
                                    "\xe2\x80\x94",
                                    "x",
                                    "buffer",
                                    "size_t",
                                    "{braces}",
                                    "[42]"};

static void build_corpus(corpus *c) {
  char line[8192];
  char text[4096];
  unsigned seed = 12345;
  unsigned i = 0;
  int n;

  while (c->len < TARGET_BYTES) {
    size_t t = 0;
    int k;
    int nw;
    seed = seed * 1103515245u + 12345u;
    nw = 8 + (int)((seed >> 16) % 60);
    for (k = 0; k < nw; k++) {
      const char *wd =
          words[(seed >> (k % 13)) % (sizeof(words) / sizeof(words[0]))];
      size_t wl = strlen(wd);
      memcpy(text + t, wd, wl);
      t += wl;
      text[t++] = ' ';
    }
    text[t] = '\0';
    switch (i % 5) {
    case 0:
    case 1:
      n = snprintf(
          line, sizeof(line),
          "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":"
          "{\"sessionId\":\"sess_7f3a9c2e41\",\"update\":{\"sessionUpdate\":"
          "\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":"
          "\"%s\"}}}}",
          text);
      break;
    case 2:
      n = snprintf(
          line, sizeof(line),
          "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
          "\"sessionId\":\"sess_7f3a9c2e41\",\"update\":{\"sessionUpdate\":"
          "\"tool_call\",\"toolCallId\":\"call_%u\",\"title\":\"Edit "
          "src/json/json_read.c\",\"kind\":\"edit\",\"status\":\"pending\","
          "\"rawInput\":{\"file_path\":\"/home/user/project/src/json/"
          "json_read.c\",\"old_string\":\"%s\",\"new_string\":\"%s\","
          "\"replace_all\":false,\"options\":{\"context\":3,\"ranges\":[[1,"
          "20],[35,80],[120,121]],\"ratio\":0.75,\"nested\":{\"a\":{\"b\":{"
          "\"c\":[true,null,-1.5e-3]}}}}},\"locations\":[{\"path\":\"/home/"
          "user/project/src/json/json_read.c\",\"line\":%u}],\"_meta\":{"
          "\"claudecode/toolName\":\"Edit\",\"ts\":1732244400123}}}}",
          i, text, text, i % 977);
      break;
    case 3:
      n = snprintf(
          line, sizeof(line),
          "{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{\"stopReason\":"
          "\"end_turn\",\"usage\":{\"inputTokens\":%u,\"outputTokens\":"
          "%u,\"cachedReadTokens\":12345678901,\"cost\":%u.%03u},"
          "\"_meta\":{\"elapsedMs\":%u,\"model\":\"claude-sonnet\"}}}",
          i, i * 37, i * 11, i % 7, i % 1000, i * 3);
      break;
    default:
      n = snprintf(
          line, sizeof(line),
          "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":"
          "\"session/request_permission\",\"params\":{\"sessionId\":"
          "\"sess_7f3a9c2e41\",\"toolCall\":{\"toolCallId\":\"call_%u\","
          "\"title\":\"Run command\",\"rawInput\":{\"command\":\"ls -la "
          "| grep \\\"*.c\\\"\",\"cwd\":\"/home/user\",\"env\":[]}},"
          "\"options\":[{\"optionId\":\"allow\",\"name\":\"Allow\",\"kind\":"
          "\"allow_once\"},{\"optionId\":\"reject\",\"name\":\"Reject\","
          "\"kind\":\"reject_once\"}]}}",
          i, i);
      break;
    }
    if (n <= 0 || (size_t)n >= sizeof(line)) {
      fprintf(stderr, "line too long\n");
      exit(1);
    }
    add_line(c, line, (size_t)n);
    i++;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a;
  double y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return v[n / 2];
}

/* Re-serialize a value through the typed API. */
static void walk(acp_json_doc *doc, const acp_json_val *v, acp_json_writer *w) {
  const acp_json_val *c;
  const char *s;
  size_t len;
  int64_t i;
  bool b;

  switch (acp_json_type_of(v)) {
  case ACP_JSON_NULL:
    acp_json_write_null(w);
    break;
  case ACP_JSON_BOOL:
    acp_json_get_bool(v, &b);
    acp_json_write_bool(w, b);
    break;
  case ACP_JSON_NUMBER:
    if (acp_json_get_int64(v, &i) == 0)
      acp_json_write_int(w, i);
    else
      acp_json_write_val(w, v);
    break;
  case ACP_JSON_STRING:
    acp_json_doc_str(doc, v, &s, &len);
    acp_json_write_str(w, s, len);
    break;
  case ACP_JSON_ARRAY:
    acp_json_write_arr_begin(w);
    for (c = acp_json_child(v); c; c = acp_json_next(c))
      walk(doc, c, w);
    acp_json_write_arr_end(w);
    break;
  case ACP_JSON_OBJECT:
    acp_json_write_obj_begin(w);
    for (c = acp_json_child(v); c; c = acp_json_next(acp_json_next(c))) {
      acp_json_doc_str(doc, c, &s, &len);
      acp_json_write_key(w, s, len);
      walk(doc, acp_json_next(c), w);
    }
    acp_json_write_obj_end(w);
    break;
  default:
    break;
  }
}

int main(int argc, char **argv) {
  corpus c = {0};
  int reps = argc > 1 ? atoi(argv[1]) : 21;
  double *t;
  double ours_parse, ours_write;
  double mb;
  size_t k;
  int r;
  acp_json_doc *doc = NULL;
  acp_json_doc **docs;
  acp_json_writer *w = NULL;
  size_t out_bytes = 0;

  if (reps < 15)
    reps = 15;
  t = calloc((size_t)reps, sizeof(double));
  build_corpus(&c);
  mb = (double)c.len / 1e6;
  printf("corpus: %zu messages, %zu bytes, %d reps (median)\n", c.n, c.len,
         reps);

  /* ours: parse */
  acp_json_doc_new(&doc, NULL);
  for (k = 0; k < c.n; k++) {
    if (acp_json_doc_parse(doc, c.data + c.off[k], c.lens[k], NULL) != 0) {
      fprintf(stderr, "message %zu does not parse\n", k);
      return 1;
    }
  }
  for (r = 0; r < reps; r++) {
    double t0 = now_sec();
    for (k = 0; k < c.n; k++)
      acp_json_doc_parse(doc, c.data + c.off[k], c.lens[k], NULL);
    t[r] = now_sec() - t0;
  }
  ours_parse = mb / median(t, reps);

  /* ours: write (documents parsed beforehand) */
  docs = calloc(c.n, sizeof(*docs));
  for (k = 0; k < c.n; k++) {
    acp_json_doc_new(&docs[k], NULL);
    acp_json_doc_parse(docs[k], c.data + c.off[k], c.lens[k], NULL);
  }
  acp_json_writer_new(&w, 0, NULL);
  for (r = 0; r < reps; r++) {
    double t0 = now_sec();
    out_bytes = 0;
    for (k = 0; k < c.n; k++) {
      size_t len;
      acp_json_writer_reset(w);
      walk(docs[k], acp_json_doc_root(docs[k]), w);
      acp_json_writer_data(w, &len);
      out_bytes += len;
    }
    t[r] = now_sec() - t0;
    if (acp_json_writer_error(w) != 0) {
      fprintf(stderr, "writer error %d\n", acp_json_writer_error(w));
      return 1;
    }
  }
  ours_write = mb / median(t, reps);

  printf("\n%-8s %14s %14s %8s\n", "", "libacp MB/s", "json-c MB/s", "ratio");
#ifdef ACP_HAVE_JSONC
  {
    struct json_tokener *tok = json_tokener_new();
    json_object **objs = calloc(c.n, sizeof(*objs));
    double jc_parse, jc_write;
    size_t jc_out = 0;

    for (r = 0; r < reps; r++) {
      double t0 = now_sec();
      for (k = 0; k < c.n; k++) {
        json_object *o;
        json_tokener_reset(tok);
        o = json_tokener_parse_ex(tok, c.data + c.off[k], (int)c.lens[k]);
        json_object_put(o);
      }
      t[r] = now_sec() - t0;
    }
    jc_parse = mb / median(t, reps);

    for (k = 0; k < c.n; k++) {
      json_tokener_reset(tok);
      objs[k] = json_tokener_parse_ex(tok, c.data + c.off[k], (int)c.lens[k]);
      if (objs[k] == NULL) {
        fprintf(stderr, "json-c rejects message %zu\n", k);
        return 1;
      }
    }
    for (r = 0; r < reps; r++) {
      double t0 = now_sec();
      jc_out = 0;
      for (k = 0; k < c.n; k++)
        jc_out += strlen(
            json_object_to_json_string_ext(objs[k], JSON_C_TO_STRING_PLAIN));
      t[r] = now_sec() - t0;
    }
    jc_write = mb / median(t, reps);
    printf("%-8s %14.1f %14.1f %7.2fx\n", "parse", ours_parse, jc_parse,
           ours_parse / jc_parse);
    printf("%-8s %14.1f %14.1f %7.2fx\n", "write", ours_write, jc_write,
           ours_write / jc_write);
    printf("(output bytes: libacp %zu, json-c %zu; json-c escapes '/' and "
           "non-ASCII differently)\n",
           out_bytes, jc_out);
    for (k = 0; k < c.n; k++)
      json_object_put(objs[k]);
    free(objs);
    json_tokener_free(tok);
  }
#else
  printf("%-8s %14.1f %14s\n", "parse", ours_parse, "n/a");
  printf("%-8s %14.1f %14s\n", "write", ours_write, "n/a");
#endif
  {
    /* validate only, for reference */
    for (r = 0; r < reps; r++) {
      double t0 = now_sec();
      for (k = 0; k < c.n; k++)
        acp_json_validate(c.data + c.off[k], c.lens[k], NULL);
      t[r] = now_sec() - t0;
    }
    printf("%-8s %14.1f\n", "validate", mb / median(t, reps));
  }

  for (k = 0; k < c.n; k++)
    acp_json_doc_free(docs[k]);
  free(docs);
  acp_json_writer_free(w);
  acp_json_doc_free(doc);
  free(t);
  free(c.data);
  free(c.off);
  free(c.lens);
  return 0;
}
