/*
 * A minimal ACP proxy: puts "[tagged] " in front of the first text block of
 * every prompt on its way to the agent, and forwards everything else
 * unchanged. Run it in a chain under a conductor:
 *
 *     ./echo_client acp conductor agent ./tag_proxy ./echo_agent
 *
 * prints "agent: echo: [tagged] hello".
 *
 * The edit is made on the raw bytes (nine bytes inserted after the opening
 * quote of `text`), so numbers, key order, escapes and unknown fields reach
 * the agent exactly as the client sent them.
 *
 * Build: cc tag_proxy.c $(pkg-config --cflags --libs libacp-uv)
 * This file is CC0: copy it and make it yours.
 */
#include <acp/uv.h> /* first: it sets up the POSIX declarations libuv needs */
#include <acp/acp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG "[tagged] "

static int on_from_client(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  const acp_json_val *block, *text;
  size_t len, at;
  char *params;
  int rv;

  (void)ud;
  if (m->kind != ACP_RPC_REQUEST || strcmp(m->method, "session/prompt") != 0)
    return ACP_PROXY_FORWARD;
  block = acp_json_arr_get(acp_json_obj_getz(m->params, "prompt"), 0);
  text = acp_json_obj_getz(block, "text");
  if (acp_json_type_of(text) != ACP_JSON_STRING)
    return ACP_PROXY_FORWARD;
  at = (size_t)(acp_json_raw(text, &len) - m->params_raw) + 1;
  params = malloc(m->params_len + strlen(TAG));
  if (params == NULL)
    return ACP_PROXY_FORWARD; /* out of memory: pass it on untouched */
  memcpy(params, m->params_raw, at);
  memcpy(params + at, TAG, strlen(TAG));
  memcpy(params + at + strlen(TAG), m->params_raw + at, m->params_len - at);
  rv = acp_proxy_forward_transformed(p, m, params, m->params_len + strlen(TAG));
  free(params);
  return rv == 0 ? 0 : ACP_PROXY_FORWARD;
}

int main(void) {
  acp_proxy_callbacks *cbs = NULL;
  acp_proxy *proxy = NULL;
  int rv;

  rv = acp_proxy_callbacks_new(&cbs);
  if (rv != 0)
    goto cleanup;
  acp_proxy_callbacks_set_on_from_client(cbs, on_from_client);
  rv = acp_proxy_new(&proxy, cbs, NULL, NULL, NULL);
  if (rv != 0)
    goto cleanup;
  /* The conductor speaks to us on stdin/stdout. */
  rv = acp_uv_run_stdio(acp_proxy_session(proxy), 2000);
cleanup:
  if (rv != 0)
    fprintf(stderr, "tag_proxy: %s\n", acp_strerror(rv));
  acp_proxy_free(proxy);
  acp_proxy_callbacks_free(cbs);
  return rv == 0 ? 0 : 1;
}
