/*
 * `acp proxy arrow`: prefixes ">" to the text of the first
 * agent_message_chunk of each agent message, and forwards everything else
 * unchanged. With N arrow proxies in a chain the client sees N arrows in
 * front of each message: a visible proof that every proxy is on the path.
 *
 * A message is a run of agent_message_chunk updates of one session. A new
 * one starts with each prompt turn (the client's session/prompt), after any
 * other update of that session (a tool call, a thought, a plan...), and
 * whenever the chunk's `messageId` differs from the previous chunk's.
 * Chunks that are not text do not start or end a message.
 *
 * The edit is done on the raw bytes: the new params are the received params
 * with one byte inserted after the opening quote of `text`, so numbers, key
 * order, escapes, unknown fields and `_meta` are untouched.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_run.h"

static const char arrow_usage[] =
    "usage: acp proxy arrow\n"
    "\n"
    "An ACP proxy (run it under a conductor) that prefixes '>' to the text\n"
    "of the first agent_message_chunk of each agent message and forwards\n"
    "everything else unchanged.\n";

/* Per session: inside a message, and that message's raw messageId. */
typedef struct arrow_session {
  struct arrow_session *next;
  char *id;
  size_t id_len;
  bool in_message;
  char *msg_id; /* NULL: none */
  size_t msg_id_len;
} arrow_session;

/* The session named by params.sessionId, created if new; NULL when there is
 * no sessionId or no memory (the chunk is then treated as a first one). */
static arrow_session *session_of(arrow_session **list,
                                 const acp_json_val *params) {
  size_t n;
  const char *id = acp_json_str_raw(acp_json_obj_getz(params, "sessionId"), &n);
  arrow_session *s;

  if (id == NULL)
    return NULL;
  for (s = *list; s != NULL; s = s->next)
    if (s->id_len == n && memcmp(s->id, id, n) == 0)
      return s;
  s = calloc(1, sizeof(*s));
  if (s == NULL || (s->id = malloc(n + 1)) == NULL) {
    free(s);
    return NULL;
  }
  memcpy(s->id, id, n);
  s->id_len = n;
  s->next = *list;
  *list = s;
  return s;
}

/* Whether this text chunk starts a message (and note that one is open). */
static bool starts_message(arrow_session *s, const acp_json_val *update) {
  size_t n = 0;
  const char *mid =
      acp_json_str_raw(acp_json_obj_getz(update, "messageId"), &n);
  bool first;

  if (s == NULL)
    return true;
  first = !s->in_message ||
          (mid != NULL && (s->msg_id == NULL || s->msg_id_len != n ||
                           memcmp(s->msg_id, mid, n) != 0));
  s->in_message = true;
  if (first) {
    free(s->msg_id);
    s->msg_id = mid ? malloc(n + 1) : NULL;
    s->msg_id_len = s->msg_id ? n : 0;
    if (s->msg_id != NULL)
      memcpy(s->msg_id, mid, n);
  }
  return first;
}

static int on_from_client(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  arrow_session *s;

  (void)p;
  if (m->kind == ACP_RPC_REQUEST && strcmp(m->method, "session/prompt") == 0) {
    s = session_of(ud, m->params);
    if (s != NULL)
      s->in_message = false; /* a new turn: a new message */
  }
  return ACP_PROXY_FORWARD;
}

static int on_from_agent(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  const acp_json_val *update;
  const acp_json_val *content;
  const acp_json_val *text;
  arrow_session *s;
  const char *raw;
  size_t len;
  size_t head;
  char *buf;
  int rv;

  if (m->kind != ACP_RPC_NOTIFICATION ||
      strcmp(m->method, "session/update") != 0)
    return ACP_PROXY_FORWARD;
  update = acp_json_obj_getz(m->params, "update");
  content = acp_json_obj_getz(update, "content");
  text = acp_json_obj_getz(content, "text");
  s = session_of(ud, m->params);
  if (!ACP_JSON_STR_EQ_LIT(acp_json_obj_getz(update, "sessionUpdate"),
                           "agent_message_chunk")) {
    if (s != NULL)
      s->in_message = false;
    return ACP_PROXY_FORWARD;
  }
  if (!ACP_JSON_STR_EQ_LIT(acp_json_obj_getz(content, "type"), "text") ||
      acp_json_type_of(text) != ACP_JSON_STRING || !starts_message(s, update))
    return ACP_PROXY_FORWARD;
  raw = acp_json_raw(text, &len);
  head = (size_t)(raw - m->params_raw) + 1; /* just after the quote */
  buf = malloc(m->params_len + 1);
  if (buf == NULL)
    return ACP_PROXY_FORWARD; /* out of memory: pass it on untouched */
  memcpy(buf, m->params_raw, head);
  buf[head] = '>';
  memcpy(buf + head + 1, m->params_raw + head, m->params_len - head);
  rv = acp_proxy_forward_transformed(p, m, buf, m->params_len + 1);
  free(buf);
  return rv == 0 ? 0 : ACP_PROXY_FORWARD;
}

int proxy_arrow_main(int argc, char **argv) {
  acp_proxy_callbacks *cbs = NULL;
  acp_proxy *p = NULL;
  arrow_session *sessions = NULL;
  int status = 1;

  if (argc > 1) {
    int help = strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0;

    fputs(arrow_usage, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  if (acp_proxy_callbacks_new(&cbs) != 0)
    goto cleanup;
  acp_proxy_callbacks_set_on_from_client(cbs, on_from_client);
  acp_proxy_callbacks_set_on_from_agent(cbs, on_from_agent);
  if (acp_proxy_new(&p, cbs, &sessions, NULL, NULL) != 0)
    goto cleanup;
  status = proxy_run_stdio(p, "arrow");
cleanup:
  acp_proxy_free(p);
  acp_proxy_callbacks_free(cbs);
  while (sessions != NULL) {
    arrow_session *s = sessions;
    sessions = s->next;
    free(s->id);
    free(s->msg_id);
    free(s);
  }
  return status;
}
