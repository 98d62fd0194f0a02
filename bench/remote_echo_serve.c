/*
 * remote_echo_serve - the echo agent of `acp agent --echo` hosted IN the
 * server process, on one libuv loop: ws://HOST:PORT/acp and Streamable
 * HTTP on the same endpoint, no agent process, no pipes.
 *
 * The benchmark's "agent in process" rows (bench/run-remote.sh): the TS
 * SDK's server (experimental/server) runs its agent inside the server
 * process, while `acp serve -- acp agent --echo` relays every message
 * through a second process. This is the same shape as the SDK's, built on
 * the public API only, so it doubles as the shortest example of embedding
 * an agent behind libacp-remote:
 *
 *   acp_remote_server_new()   listen; each connection is a link (acp/uv.h)
 *   acp_agent_new()           one agent (one JSON-RPC session) per link
 *   acp_uv_rpc_new()          run that session on the link
 *
 * and on the way out acp_uv_rpc_close(), acp_uv_link_close(),
 * acp_agent_free().
 *
 * Usage: remote_echo_serve [--listen HOST:PORT]   (default 127.0.0.1:0)
 * Prints "remote_echo_serve: listening on ws://HOST:PORT/acp" on stderr
 * (the line `acp serve` prints), serves until SIGTERM or SIGINT.
 */
#include <acp/uv.h> /* first: it sets up the POSIX declarations libuv needs */
#include <acp/acp.h>
#include <acp/remote.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct conn {
  acp_agent *agent;
  acp_uv_rpc *rpc;
  acp_uv_link *link;
  struct conn *prev, *next;
} conn;

typedef struct server {
  acp_remote_server *srv;
  acp_uv_signals *sig;
  acp_agent_callbacks *cbs;
  conn *conns;
} server;

static int on_session_new(acp_agent *agent, acp_agent_request *req,
                          void *user_data) {
  (void)user_data;
  return acp_agent_respond_session_new(agent, req, "session-1", NULL, 0);
}

/* As `acp agent --echo`: one agent_message_chunk with the prompt's text,
 * forwarded as it came (not decoded and escaped again), then end_turn. */
static int on_prompt(acp_agent *agent, acp_agent_request *req,
                     void *user_data) {
  const acp_json_val *prompt =
      acp_json_obj_getz(acp_agent_request_params(req), "prompt");
  const acp_json_val *block = acp_json_arr_get(prompt, 0);
  const acp_json_val *text = acp_json_obj_getz(block, "text");
  int rv;

  (void)user_data;
  if (acp_json_len(prompt) != 1 || acp_json_type_of(text) != ACP_JSON_STRING)
    return acp_agent_respond_error(
        agent, req, -32602, "Invalid params: one text block expected", NULL, 0);
  rv = acp_agent_send_message_chunk_val(
      agent, acp_agent_request_session_id(req), acp_agent_request_msg(req)->doc,
      text, NULL, 0);
  if (rv != 0)
    return acp_agent_respond_error(agent, req, -32603, acp_strerror(rv), NULL,
                                   0);
  return acp_agent_respond_prompt(agent, req, "end_turn", NULL, 0);
}

/* Teardown, in order: the rpc glue lets go of the link, the link closes
 * (a WebSocket close frame), then the agent and the entry are freed. */
static void on_link_closed(acp_uv_link *link, void *user_data) {
  conn *c = user_data;
  (void)link;
  acp_agent_free(c->agent);
  free(c);
}

static void on_rpc_closed(acp_uv_rpc *r, void *user_data) {
  conn *c = user_data;
  (void)r;
  acp_uv_link_close(c->link, 1000, on_link_closed, c);
}

static void conn_end(server *s, conn *c) {
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  acp_uv_rpc_close(c->rpc, on_rpc_closed);
}

static void on_end(acp_uv_rpc *r, int reason, void *user_data) {
  conn *c = user_data;
  (void)r;
  (void)reason;
  conn_end(acp_agent_get_user_data(c->agent), c);
}

static void on_accept(acp_remote_server *srv, acp_uv_link *link,
                      const char *connection_id, void *user_data) {
  server *s = user_data;
  conn *c = calloc(1, sizeof(*c));
  (void)srv;
  (void)connection_id;
  if (c == NULL || acp_agent_new(&c->agent, s->cbs, s, NULL, NULL) != 0 ||
      acp_uv_rpc_new(&c->rpc, link, acp_agent_session(c->agent), on_end, c,
                     NULL) != 0) {
    if (c != NULL)
      acp_agent_free(c->agent);
    free(c);
    acp_uv_link_close(link, 0, NULL, NULL);
    return;
  }
  c->link = link;
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
}

static void on_signal(acp_uv_signals *sig, int signum, void *user_data) {
  server *s = user_data;
  (void)signum;
  acp_remote_server_close(s->srv);
  while (s->conns)
    conn_end(s, s->conns);
  acp_uv_signals_close(sig);
}

int main(int argc, char **argv) {
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  server s;
  uv_loop_t loop;
  char host[64] = "127.0.0.1";
  int uverr = 0, rv;

  if (argc == 3 && strcmp(argv[1], "--listen") == 0) {
    const char *colon = strrchr(argv[2], ':');
    if (colon == NULL || colon == argv[2] ||
        (size_t)(colon - argv[2]) >= sizeof(host)) {
      fprintf(stderr, "remote_echo_serve: --listen needs HOST:PORT\n");
      return 2;
    }
    memcpy(host, argv[2], (size_t)(colon - argv[2]));
    host[colon - argv[2]] = '\0';
    so.port = atoi(colon + 1);
  } else if (argc != 1) {
    fprintf(stderr, "usage: remote_echo_serve [--listen HOST:PORT]\n");
    return 2;
  }
  so.host = host;
  memset(&s, 0, sizeof(s));
  acp_uv_ignore_sigpipe();
  uv_loop_init(&loop);
  rv = acp_agent_callbacks_new(&s.cbs);
  if (rv == 0) {
    acp_agent_callbacks_set_on_session_new(s.cbs, on_session_new);
    acp_agent_callbacks_set_on_session_prompt(s.cbs, on_prompt);
    rv = acp_remote_server_new(&s.srv, &loop, &so, on_accept, &s, NULL, &uverr);
  }
  if (rv == 0)
    rv = acp_uv_signals_new(&s.sig, &loop, on_signal, &s, NULL);
  if (rv != 0) {
    fprintf(stderr, "remote_echo_serve: %s%s%s\n", acp_strerror(rv),
            uverr ? ": " : "", uverr ? uv_strerror(uverr) : "");
    acp_remote_server_close(s.srv);
  } else {
    fprintf(stderr, "remote_echo_serve: listening on ws://%s:%d/acp\n", host,
            acp_remote_server_port(s.srv));
    fflush(stderr);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  acp_agent_callbacks_free(s.cbs);
  return rv == 0 ? 0 : 1;
}
