/*
 * A minimal ACP agent: answers every prompt with "echo: " and the prompt's
 * first text block, sent as one agent_message_chunk, then ends the turn.
 * Speaks ACP on stdin/stdout; run it under any ACP client, e.g.
 *
 *     ./echo_client ./echo_agent
 *
 * Build: cc echo_agent.c $(pkg-config --cflags --libs libacp-uv)
 * This file is CC0: copy it and make it yours.
 */
#include <acp/uv.h> /* first: it sets up the POSIX declarations libuv needs */
#include <acp/acp.h>
#include <stdio.h>
#include <string.h>

static int on_session_new(acp_agent *agent, acp_agent_request *req,
                          void *user_data) {
  (void)user_data;
  return acp_agent_respond_session_new(agent, req, "session-1", NULL, 0);
}

static int on_prompt(acp_agent *agent, acp_agent_request *req,
                     void *user_data) {
  const acp_json_val *prompt =
      acp_json_obj_getz(acp_agent_request_params(req), "prompt");
  const acp_json_val *text =
      acp_json_obj_getz(acp_json_arr_get(prompt, 0), "text");
  const char *session_id = acp_agent_request_session_id(req);
  char reply[4096] = "echo: ";
  size_t n = 0;
  int rv;

  (void)user_data;
  /* Decode the text after "echo: " (truncated if it does not fit). */
  if (acp_json_str_unescape(text, reply + 6, sizeof(reply) - 7, &n) != 0 &&
      n >= sizeof(reply) - 7)
    n = sizeof(reply) - 7;
  rv = acp_agent_send_message_chunk(agent, session_id, reply, 6 + n, NULL, 0);
  if (rv != 0)
    return acp_agent_respond_error(agent, req, -32603, acp_strerror(rv), NULL,
                                   0);
  return acp_agent_respond_prompt(agent, req, "end_turn", NULL, 0);
}

int main(void) {
  acp_agent_callbacks *cbs = NULL;
  acp_agent *agent = NULL;
  int rv;

  rv = acp_agent_callbacks_new(&cbs);
  if (rv != 0)
    goto cleanup;
  /* initialize is answered by the library when no handler is set. */
  acp_agent_callbacks_set_on_session_new(cbs, on_session_new);
  acp_agent_callbacks_set_on_session_prompt(cbs, on_prompt);
  rv = acp_agent_new(&agent, cbs, NULL, NULL, NULL);
  if (rv != 0)
    goto cleanup;
  /* Serve stdin/stdout until the client closes its side. */
  rv = acp_uv_run_stdio(acp_agent_session(agent), 2000);
cleanup:
  if (rv != 0)
    fprintf(stderr, "echo_agent: %s\n", acp_strerror(rv));
  acp_agent_free(agent);
  acp_agent_callbacks_free(cbs);
  return rv == 0 ? 0 : 1;
}
