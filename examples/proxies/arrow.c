/*
 * `acp proxy arrow`: prefixes ">" to the text of every agent_message_chunk
 * the agent sends, and forwards everything else unchanged. With N arrow
 * proxies in a chain the client sees N arrows: a visible proof that every
 * proxy is on the path.
 *
 * The edit is done on the raw bytes: the new params are the received params
 * with one byte inserted after the opening quote of `text`, so numbers, key
 * order, escapes, unknown fields and `_meta` are untouched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_run.h"

static const char arrow_usage[] =
    "usage: acp proxy arrow\n"
    "\n"
    "An ACP proxy (run it under a conductor) that prefixes '>' to the text\n"
    "of every agent_message_chunk and forwards everything else unchanged.\n";

static int on_from_agent(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  const acp_json_val *update;
  const acp_json_val *content;
  const acp_json_val *text;
  const char *raw;
  size_t len;
  size_t head;
  char *buf;
  int rv;

  (void)ud;
  if (m->kind != ACP_RPC_NOTIFICATION ||
      strcmp(m->method, "session/update") != 0)
    return ACP_PROXY_FORWARD;
  update = acp_json_obj_getz(m->params, "update");
  content = acp_json_obj_getz(update, "content");
  text = acp_json_obj_getz(content, "text");
  if (!acp_json_str_eq(acp_json_obj_getz(update, "sessionUpdate"),
                       "agent_message_chunk", 19) ||
      !acp_json_str_eq(acp_json_obj_getz(content, "type"), "text", 4) ||
      acp_json_type_of(text) != ACP_JSON_STRING)
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
  int status = 1;

  if (argc > 1) {
    int help = strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0;

    fputs(arrow_usage, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  if (acp_proxy_callbacks_new(&cbs) != 0)
    goto cleanup;
  acp_proxy_callbacks_set_on_from_agent(cbs, on_from_agent);
  if (acp_proxy_new(&p, cbs, NULL, NULL, NULL) != 0)
    goto cleanup;
  status = proxy_run_stdio(p, "arrow");
cleanup:
  acp_proxy_free(p);
  acp_proxy_callbacks_free(cbs);
  return status;
}
