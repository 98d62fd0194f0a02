/*
 * Transcript tests of the JSON-RPC session: every directory under
 * tests/transcripts/rpc/ holds in.jsonl (bytes fed to the session) and
 * expect.jsonl (the exact bytes it must send), plus optional files:
 *   max_line   the line cap (decimal)
 *   batches    "0" to turn batches off
 *   case.txt   a one-line description
 *
 * The session's on_request handles these methods:
 *   echo    answered with its params (null when absent)
 *   error   answered with an error built from params {code, message, data}
 *   defer   answered with its params after the whole input was processed
 *   other   answered -32601 "Method not found"
 * A $/cancel_request for an unanswered request answers it -32800 at once.
 *
 * Each case runs twice: input fed in one call, and fed in 7-byte pieces;
 * both must produce the expected output.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/rpc.h"

#define CASES_DIR ACP_SOURCE_DIR "/tests/transcripts/rpc"

typedef struct deferred {
  uint64_t handle;
  char *params; /* NULL: none */
  size_t len;
} deferred;

typedef struct runner {
  deferred d[64];
  int nd;
} runner;

static char *read_file(const char *dir, const char *name, size_t *len) {
  char path[1024];
  FILE *f;
  char *buf;
  long n;

  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = '\0';
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static int on_request(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  runner *r = ud;
  const char *p = NULL;
  size_t n = 0;

  if (msg->params)
    p = acp_json_raw(msg->params, &n);
  if (strcmp(msg->method, "echo") == 0)
    return acp_rpc_session_respond(s, msg->handle, p, n);
  if (strcmp(msg->method, "error") == 0) {
    const acp_json_val *code = acp_json_obj_getz(msg->params, "code");
    const acp_json_val *m = acp_json_obj_getz(msg->params, "message");
    const acp_json_val *data = acp_json_obj_getz(msg->params, "data");
    int64_t c = 0;
    const char *ms = "";
    size_t ml = 0;
    const char *dp = NULL;
    size_t dl = 0;
    acp_json_get_int64(code, &c);
    if (m)
      assert_int_equal(acp_json_doc_str(msg->doc, m, &ms, &ml), 0);
    if (data)
      dp = acp_json_raw(data, &dl);
    return acp_rpc_session_respond_error(s, msg->handle, c, ms, ml, dp, dl);
  }
  if (strcmp(msg->method, "defer") == 0) {
    deferred *d;
    assert_true(r->nd < 64);
    d = &r->d[r->nd++];
    d->handle = msg->handle;
    d->params = NULL;
    d->len = n;
    if (p) {
      d->params = malloc(n);
      assert_non_null(d->params);
      memcpy(d->params, p, n);
    }
    return 0;
  }
  return acp_rpc_session_respond_error(s, msg->handle, -32601,
                                       "Method not found", 16, NULL, 0);
}

static int on_cancel(acp_rpc_session *s, uint64_t handle, void *ud) {
  (void)ud;
  return acp_rpc_session_respond_error(s, handle, -32800, "Request cancelled",
                                       17, NULL, 0);
}

/* Run one case; returns the output (malloc'd) in *got. */
static void run_case(const char *dir, const char *in, size_t in_len,
                     size_t piece, char **got, size_t *got_len) {
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_options *o = NULL;
  acp_rpc_session *s = NULL;
  runner r;
  size_t pos;
  size_t cap = 1024;
  size_t len = 0;
  char *outb = malloc(cap);
  char *opt;
  size_t optlen;
  const char *d;
  acp_ssize n;
  int i;

  memset(&r, 0, sizeof(r));
  assert_int_equal(acp_rpc_callbacks_new(&cbs), 0);
  acp_rpc_callbacks_set_on_request(cbs, on_request);
  acp_rpc_callbacks_set_on_cancel(cbs, on_cancel);
  assert_int_equal(acp_rpc_options_new(&o), 0);
  opt = read_file(dir, "max_line", &optlen);
  if (opt) {
    acp_rpc_options_set_max_line(o, (size_t)strtoull(opt, NULL, 10));
    free(opt);
  }
  opt = read_file(dir, "batches", &optlen);
  if (opt) {
    acp_rpc_options_set_batches(o, atoi(opt));
    free(opt);
  }
  assert_int_equal(acp_rpc_session_new(&s, cbs, &r, o, NULL), 0);
  acp_rpc_callbacks_free(cbs);
  acp_rpc_options_free(o);

  for (pos = 0; pos < in_len; pos += piece) {
    size_t c = in_len - pos < piece ? in_len - pos : piece;
    assert_int_equal(acp_rpc_session_recv(s, in + pos, c, 0), (acp_ssize)c);
  }
  for (i = 0; i < r.nd; i++) {
    int rv =
        acp_rpc_session_respond(s, r.d[i].handle, r.d[i].params, r.d[i].len);
    /* Cancelled ones were answered already. */
    assert_true(rv == 0 || rv == ACP_ERR_NOT_FOUND);
    free(r.d[i].params);
  }
  assert_int_equal(acp_rpc_session_recv_eof(s, 0), 0);
  n = acp_rpc_session_send(s, &d);
  assert_true(n >= 0);
  if ((size_t)n + 1 > cap) {
    cap = (size_t)n + 1;
    outb = realloc(outb, cap);
  }
  memcpy(outb, d, (size_t)n);
  len = (size_t)n;
  outb[len] = '\0';
  acp_rpc_session_free(s);
  *got = outb;
  *got_len = len;
}

/* Compare line by line; print the first difference. */
static int compare(const char *name, const char *exp, size_t exp_len,
                   const char *got, size_t got_len) {
  size_t ep = 0;
  size_t gp = 0;
  int line = 1;

  while (ep < exp_len || gp < got_len) {
    const char *en = memchr(exp + ep, '\n', exp_len - ep);
    const char *gn = memchr(got + gp, '\n', got_len - gp);
    size_t el = en ? (size_t)(en - (exp + ep)) : exp_len - ep;
    size_t gl = gn ? (size_t)(gn - (got + gp)) : got_len - gp;
    if (ep >= exp_len || gp >= got_len || el != gl ||
        memcmp(exp + ep, got + gp, el) != 0 || !en != !gn) {
      fprintf(stderr,
              "case %s: line %d differs\n  expected: %.*s\n  got:      "
              "%.*s\n",
              name, line, ep < exp_len ? (int)el : 9,
              ep < exp_len ? exp + ep : "(nothing)", gp < got_len ? (int)gl : 9,
              gp < got_len ? got + gp : "(nothing)");
      return 1;
    }
    ep += el + 1;
    gp += gl + 1;
    line++;
  }
  return 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_rpc_transcripts(void **state) {
  DIR *dir = opendir(CASES_DIR);
  struct dirent *e;
  char *names[256];
  int count = 0;
  int cases = 0;
  int failed = 0;
  int i;

  (void)state;
  assert_non_null(dir);
  while ((e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    assert_true(count < 256);
    names[count++] = strdup(e->d_name);
  }
  closedir(dir);
  qsort(names, (size_t)count, sizeof(names[0]), cmp_names);
  for (i = 0; i < count; i++) {
    char path[1024];
    char *in;
    char *exp;
    size_t in_len;
    size_t exp_len;
    size_t pieces[2];
    int k;

    snprintf(path, sizeof(path), "%s/%s", CASES_DIR, names[i]);
    in = read_file(path, "in.jsonl", &in_len);
    if (in == NULL) {
      free(names[i]);
      continue; /* not a case directory */
    }
    cases++;
    exp = read_file(path, "expect.jsonl", &exp_len);
    assert_non_null(exp);
    pieces[0] = in_len ? in_len : 1;
    pieces[1] = 7;
    for (k = 0; k < 2; k++) {
      char *got;
      size_t got_len;
      run_case(path, in, in_len, pieces[k], &got, &got_len);
      if (compare(names[i], exp, exp_len, got, got_len) != 0)
        failed++;
      free(got);
    }
    free(in);
    free(exp);
    free(names[i]);
    names[i] = NULL;
  }
  printf("rpc transcripts: %d cases, %d failures\n", cases, failed);
  assert_true(cases >= 25);
  assert_int_equal(failed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rpc_transcripts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
