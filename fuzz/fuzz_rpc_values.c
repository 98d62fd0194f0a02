/*
 * Fuzz target: the JSON values a caller hands the JSON-RPC session (params,
 * results, error data) on their way into a message. The input, when it is
 * one valid JSON text (whitespace of any kind around and between tokens,
 * CR and LF included), is sent as a notification's params, a request's
 * params, a result and an error's data. Each message must come out as one
 * line that parses, and its value must be the input's: the same types,
 * members, array elements, decoded strings and number texts, whatever
 * whitespace the input had (rpc_session.c turns CR and LF into spaces).
 * Input that is not valid JSON is skipped: the caller promises valid JSON.
 */
#include <stdlib.h>
#include <string.h>

#include "acp/json.h"
#include "acp/rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t handle;
static int got;

static int on_request(acp_rpc_session *s, const acp_rpc_msg *msg, void *ud) {
  (void)s;
  (void)ud;
  handle = msg->handle;
  got = 1;
  return 0;
}

/* Whether a and b (in docs da, db) are the same JSON value. */
static int same(acp_json_doc *da, const acp_json_val *a, acp_json_doc *db,
                const acp_json_val *b, int depth) {
  const acp_json_val *x;
  const acp_json_val *y;
  const char *p;
  const char *q;
  size_t n;
  size_t m;

  if (a == NULL || b == NULL || depth > 1000)
    return a == b;
  if (acp_json_type_of(a) != acp_json_type_of(b))
    return 0;
  switch (acp_json_type_of(a)) {
  case ACP_JSON_OBJECT:
  case ACP_JSON_ARRAY:
    for (x = acp_json_child(a), y = acp_json_child(b); x != NULL && y != NULL;
         x = acp_json_next(x), y = acp_json_next(y))
      if (!same(da, x, db, y, depth + 1))
        return 0;
    return x == NULL && y == NULL;
  case ACP_JSON_STRING:
    if (acp_json_doc_str(da, a, &p, &n) != 0)
      return 0;
    /* The first decoded string may live in scratch space the second
     * decoding reuses: compare from a copy. */
    {
      char *c = malloc(n + 1);
      int eq;
      if (c == NULL)
        return 0;
      memcpy(c, p, n);
      eq = acp_json_doc_str(db, b, &q, &m) == 0 && m == n &&
           memcmp(c, q, n) == 0;
      free(c);
      return eq;
    }
  default:
    p = acp_json_raw(a, &n);
    q = acp_json_raw(b, &m);
    return n == m && memcmp(p, q, n) == 0;
  }
}

/* The session's output: exactly one line, whose `member` (a path of up to
 * two keys) is the value parsed in `in`. */
static void check_one(acp_rpc_session *s, acp_json_doc *in, acp_json_doc *out,
                      const char *member, const char *inner) {
  const char *d;
  acp_ssize n = acp_rpc_session_send(s, &d);
  const acp_json_val *v;
  int rv;

  if (n <= 0 || d[n - 1] != '\n' || memchr(d, '\n', (size_t)n - 1) != NULL)
    abort(); /* one message, one line */
  rv = acp_json_doc_parse(out, d, (size_t)n - 1, NULL);
  if (rv == ACP_ERR_LIMIT || rv == ACP_ERR_NOMEM)
    return; /* the envelope's levels over the depth limit: not our case */
  if (rv != 0)
    abort();
  v = acp_json_obj_getz(acp_json_doc_root(out), member);
  if (inner != NULL)
    v = acp_json_obj_getz(v, inner);
  if (!same(in, acp_json_doc_root(in), out, v, 0))
    abort();
}

/* Feed the session a request to answer; its handle goes to `handle`. */
static void take_request(acp_rpc_session *s) {
  static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n";

  got = 0;
  if (acp_rpc_session_recv(s, req, sizeof(req) - 1, 0) !=
          (acp_ssize)(sizeof(req) - 1) ||
      !got)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *p = (const char *)data;
  acp_rpc_callbacks *cbs = NULL;
  acp_rpc_session *s = NULL;
  acp_json_doc *in = NULL;
  acp_json_doc *out = NULL;

  if (size == 0 || acp_json_validate(p, size, NULL) != 0)
    return 0;
  if (acp_rpc_callbacks_new(&cbs) != 0 || acp_json_doc_new(&in, NULL) != 0 ||
      acp_json_doc_new(&out, NULL) != 0)
    goto done;
  acp_rpc_callbacks_set_on_request(cbs, on_request);
  if (acp_rpc_session_new(&s, cbs, NULL, NULL, NULL) != 0)
    goto done;
  switch (acp_json_doc_parse(in, p, size, NULL)) {
  case 0:
    break;
  case ACP_ERR_PARSE:
    abort(); /* validate said it was JSON */
  default:
    goto done; /* a limit of the document's */
  }

  if (acp_rpc_session_notify(s, "n", 1, p, size) != 0)
    abort();
  check_one(s, in, out, "params", NULL);
  if (acp_rpc_session_request(s, "r", 1, p, size, 0, 0, NULL, NULL, NULL) != 0)
    abort();
  check_one(s, in, out, "params", NULL);

  take_request(s);
  if (acp_rpc_session_respond(s, handle, p, size) != 0)
    abort();
  check_one(s, in, out, "result", NULL);
  take_request(s);
  if (acp_rpc_session_respond_error(s, handle, 1, "e", 1, p, size) != 0)
    abort();
  check_one(s, in, out, "error", "data");

done:
  acp_rpc_session_free(s);
  acp_json_doc_free(in);
  acp_json_doc_free(out);
  acp_rpc_callbacks_free(cbs);
  return 0;
}
