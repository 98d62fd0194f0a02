/*
 * A minimal ACP client: starts an agent, opens a session, sends the prompt
 * "hello", prints the reply and checks it (exit 0 when it is "echo: hello",
 * or $ECHO_EXPECT when set; else 1).
 *
 *     ./echo_client ./echo_agent
 *
 * Build: cc echo_client.c $(pkg-config --cflags --libs libacp-uv)
 * This file is CC0: copy it and make it yours.
 */
#include <acp/uv.h> /* first: it sets up the POSIX declarations libuv needs */
#include <acp/acp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct app {
  uv_loop_t loop;
  acp_uv_process *agent;
  acp_uv_rpc *rpc;
  char session_id[128];
  char reply[4096]; /* the agent's message chunks, NUL-terminated */
  size_t reply_len;
  int status; /* the exit status, once decided (-1 before) */
} app;

static void agent_stopped(acp_uv_process *p, void *ud) {
  (void)ud;
  acp_uv_process_close(p, NULL);
}

/* Stop: detach the session, close the agent's stdin, reap it. */
static void finish(app *a, int status) {
  if (a->status >= 0)
    return;
  a->status = status;
  acp_uv_rpc_close(a->rpc, NULL);
  if (acp_uv_process_shutdown(a->agent, agent_stopped) != 0)
    acp_uv_process_close(a->agent, NULL);
}

static int on_update(acp_client *c, const acp_client_update *u, void *ud) {
  app *a = ud;
  (void)c;
  if (u->kind == ACP_UPDATE_AGENT_MESSAGE_CHUNK && u->text != NULL &&
      u->text_len < sizeof(a->reply) - a->reply_len) {
    memcpy(a->reply + a->reply_len, u->text, u->text_len);
    a->reply_len += u->text_len;
  }
  return 0;
}

static int on_prompt_done(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  const char *expect = getenv("ECHO_EXPECT");
  app *a = ud;
  (void)c;
  printf("agent: %s\n", a->reply);
  finish(a, msg->error == NULL &&
                    strcmp(a->reply, expect ? expect : "echo: hello") == 0
                ? 0
                : 1);
  return 0;
}

static int on_session(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  app *a = ud;
  const acp_json_val *id = acp_json_obj_getz(msg->result, "sessionId");
  size_t n;
  if (acp_json_str_unescape(id, a->session_id, sizeof(a->session_id), &n) ||
      n == sizeof(a->session_id) ||
      acp_client_prompt_text(c, a->session_id, "hello", 5, on_prompt_done, a,
                             NULL) != 0)
    finish(a, 1);
  return 0;
}

static int on_initialized(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  if (msg->error != NULL ||
      acp_client_session_new(c, "/", NULL, 0, on_session, ud, NULL) != 0)
    finish(ud, 1);
  return 0;
}

static void on_end(acp_uv_rpc *r, int reason, void *ud) {
  (void)r;
  fprintf(stderr, "echo_client: the agent left (%s)\n", acp_strerror(reason));
  finish(ud, 1);
}

int main(int argc, char **argv) {
  app a = {.status = -1};
  acp_uv_process_options *opts = NULL;
  acp_client_callbacks *cbs = NULL;
  acp_client *client = NULL;
  int rv;

  if (argc < 2) {
    fprintf(stderr, "usage: echo_client AGENT [ARGS...]\n");
    return 2;
  }
  uv_loop_init(&a.loop);
  acp_uv_ignore_sigpipe();
  rv = acp_uv_process_options_new(&opts, NULL);
  if (rv == 0)
    rv = acp_uv_process_options_set_argv(opts, (const char *const *)argv + 1);
  if (rv == 0)
    rv = acp_uv_process_spawn(&a.agent, &a.loop, opts, &a, NULL, NULL);
  if (rv == 0)
    rv = acp_client_callbacks_new(&cbs);
  if (rv == 0) {
    acp_client_callbacks_set_on_session_update(cbs, on_update);
    rv = acp_client_new(&client, cbs, &a, NULL, NULL);
  }
  if (rv == 0) /* the session runs on the agent's stdin and stdout */
    rv = acp_uv_rpc_new(&a.rpc, acp_uv_process_link(a.agent),
                        acp_client_session(client), on_end, &a, NULL);
  if (rv == 0)
    rv = acp_client_initialize(client, NULL, 0, NULL, 0, on_initialized, &a,
                               NULL);
  if (rv != 0) {
    fprintf(stderr, "echo_client: %s\n", acp_strerror(rv));
    finish(&a, 1);
  }
  uv_run(&a.loop, UV_RUN_DEFAULT);
  acp_client_free(client);
  acp_client_callbacks_free(cbs);
  acp_uv_process_options_free(opts);
  return uv_loop_close(&a.loop) == 0 ? a.status : 1;
}
