/*
 * `acp proxy tools`: offers one MCP server over ACP (RFD "MCP-over-ACP") on
 * every session. Its declaration {"type":"acp","name":"tools","id":ID} is
 * appended to the mcpServers of session/new, session/load, session/resume
 * and session/fork on their way to the agent; the agent connects back with
 * mcp/connect and calls the tools through mcp/message, which this proxy
 * answers itself (everything else is forwarded unchanged).
 *
 * Tools:
 *   echo {message}               returns the message as text
 *   read_lines {path, start?, count?}
 *                                lines start.. (1-based, default 1) of a
 *                                file under the session's cwd, at most
 *                                `count` (default 100); paths that resolve
 *                                outside the cwd are refused
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/mcp_acp.h"
#include "proxy_run.h"

static const char tools_usage[] =
    "usage: acp proxy tools [--name NAME]\n"
    "\n"
    "An ACP proxy (run it under a conductor) that offers an MCP server over\n"
    "ACP on every session, with the tools `echo {message}` and\n"
    "`read_lines {path, start, count}` (files under the session's cwd).\n"
    "The server is declared as {\"type\":\"acp\",\"name\":NAME,\"id\":...}\n"
    "(default NAME: tools).\n";

typedef struct cwd_node {
  struct cwd_node *next;
  char path[];
} cwd_node;

typedef struct tools_app {
  acp_mcp_server *server;
  acp_mcp_acp_provider *prov;
  const char *name;
  cwd_node *cwds; /* session cwds, freed at exit */
  FILE *urandom;
} tools_app;

/* MARK: - Tools */

static int tool_echo(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  const char *s;
  size_t n;

  (void)ud;
  if (acp_json_doc_str(acp_mcp_call_doc(call),
                       acp_json_obj_getz(args, "message"), &s, &n) != 0)
    return acp_mcp_call_respond_text(call, "message: expected a string", 26,
                                     true);
  return acp_mcp_call_respond_text(call, s, n, false);
}

static int refuse(acp_mcp_call *call, const char *why) {
  return acp_mcp_call_respond_text(call, why, strlen(why), true);
}

static int tool_read_lines(acp_mcp_call *call, const acp_json_val *args,
                           void *ud) {
  const char *cwd = acp_mcp_acp_decl_get_user_data(acp_mcp_acp_call_decl(call));
  char want[PATH_MAX * 2];
  char real_cwd[PATH_MAX];
  char real[PATH_MAX];
  const char *path;
  size_t plen;
  int64_t start = 1;
  int64_t count = 100;
  int64_t line = 1;
  char *out = NULL;
  size_t out_len = 0;
  size_t rl;
  FILE *f;
  int c;
  int rv;

  (void)ud;
  if (cwd == NULL)
    return refuse(call, "no session cwd is known for this connection");
  if (acp_json_doc_str(acp_mcp_call_doc(call), acp_json_obj_getz(args, "path"),
                       &path, &plen) != 0 ||
      plen == 0 || memchr(path, '\0', plen) != NULL)
    return refuse(call, "path: expected a non-empty string");
  if (acp_json_obj_getz(args, "start") != NULL &&
      (acp_json_get_int64(acp_json_obj_getz(args, "start"), &start) != 0 ||
       start < 1))
    return refuse(call, "start: expected an integer >= 1");
  if (acp_json_obj_getz(args, "count") != NULL &&
      (acp_json_get_int64(acp_json_obj_getz(args, "count"), &count) != 0 ||
       count < 0))
    return refuse(call, "count: expected an integer >= 0");
  if (path[0] == '/')
    snprintf(want, sizeof(want), "%.*s", (int)plen, path);
  else
    snprintf(want, sizeof(want), "%s/%.*s", cwd, (int)plen, path);
  if (realpath(cwd, real_cwd) == NULL)
    return refuse(call, "the session cwd does not exist");
  if (realpath(want, real) == NULL)
    return refuse(call, strerror(errno));
  rl = strlen(real_cwd);
  if (strncmp(real, real_cwd, rl) != 0 ||
      (real[rl] != '/' && real[rl] != '\0' && strcmp(real_cwd, "/") != 0))
    return refuse(call, "refused: the path is outside the session cwd");
  f = fopen(real, "rb");
  if (f == NULL)
    return refuse(call, strerror(errno));
  /* Copy lines [start, start + count). */
  while ((c = fgetc(f)) != EOF && line < start + count) {
    if (line >= start) {
      char *grown = realloc(out, out_len + 2);

      if (grown == NULL) {
        free(out);
        fclose(f);
        return ACP_ERR_NOMEM;
      }
      out = grown;
      out[out_len++] = (char)c;
    }
    if (c == '\n')
      line++;
  }
  fclose(f);
  rv = acp_mcp_call_respond_text(call, out != NULL ? out : "", out_len, false);
  free(out);
  return rv;
}

/* MARK: - Proxy */

static int random_id(tools_app *app, uint8_t id[16]) {
  if (app->urandom == NULL)
    app->urandom = fopen("/dev/urandom", "rb");
  if (app->urandom == NULL || fread(id, 1, 16, app->urandom) != 16)
    return -1;
  return 0;
}

static const char *remember_cwd(tools_app *app, const acp_proxy_msg *m) {
  const char *s;
  size_t n;
  cwd_node *node;

  if (acp_json_doc_str(m->doc, acp_json_obj_getz(m->params, "cwd"), &s, &n) !=
      0)
    return NULL;
  node = malloc(sizeof(*node) + n + 1);
  if (node == NULL)
    return NULL;
  memcpy(node->path, s, n);
  node->path[n] = '\0';
  node->next = app->cwds;
  app->cwds = node;
  return node->path;
}

static int on_from_client(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  tools_app *app = ud;
  bool known_id;
  char sid[256];
  const char *s;
  size_t n;
  uint8_t id[16];
  acp_mcp_acp_decl *decl = NULL;
  acp_json_writer *w = NULL;
  const char *json;
  size_t len;
  int rv;

  if (m->kind != ACP_RPC_REQUEST)
    return ACP_PROXY_FORWARD;
  if (strcmp(m->method, "session/new") != 0 &&
      strcmp(m->method, "session/load") != 0 &&
      strcmp(m->method, "session/resume") != 0 &&
      strcmp(m->method, "session/fork") != 0)
    return ACP_PROXY_FORWARD;
  /* load and resume name the session; new and fork learn it from the
   * answer. */
  known_id = strcmp(m->method, "session/load") == 0 ||
             strcmp(m->method, "session/resume") == 0;
  sid[0] = '\0';
  if (known_id &&
      acp_json_doc_str(m->doc, acp_json_obj_getz(m->params, "sessionId"), &s,
                       &n) == 0 &&
      n < sizeof(sid)) {
    memcpy(sid, s, n);
    sid[n] = '\0';
  }
  if (random_id(app, id) != 0) {
    proxy_log("tools", "cannot read random bytes; session not equipped");
    return ACP_PROXY_FORWARD;
  }
  rv = acp_mcp_acp_provider_declare(app->prov, app->server, app->name,
                                    sid[0] ? sid : NULL, id, &decl);
  if (rv != 0)
    return ACP_PROXY_FORWARD;
  acp_mcp_acp_decl_set_user_data(decl, (void *)remember_cwd(app, m));
  rv = acp_mcp_acp_decl_json(decl, ACP_MCP_ACP_DECL_SERVER_ID, &json, &len);
  if (rv == 0)
    rv = acp_json_writer_new(&w, 0, NULL);
  if (rv == 0)
    rv = acp_mcp_acp_params_add_server(w, m->params, json, len);
  if (rv == 0) {
    const char *params = acp_json_writer_data(w, &len);

    acp_proxy_request_set_user_data(m->req, decl);
    rv = acp_proxy_forward_transformed(p, m, params, len);
  }
  acp_json_writer_free(w);
  if (rv != 0) {
    acp_mcp_acp_decl_remove(decl);
    return ACP_PROXY_FORWARD;
  }
  return 0;
}

/* The answer to a forwarded session/new or fork: bind the declaration to
 * the session id the agent chose. */
static int on_response(acp_proxy *p, acp_proxy_request *req,
                       const acp_rpc_msg *msg, void *ud) {
  acp_mcp_acp_decl *decl = acp_proxy_request_get_user_data(req);
  const char *s;
  size_t n;
  int rv;

  (void)p;
  (void)ud;
  if (decl == NULL)
    return ACP_PROXY_FORWARD;
  if (msg->result == NULL) {
    acp_mcp_acp_decl_remove(decl); /* the session was not created */
  } else if (acp_mcp_acp_decl_session_id(decl) == NULL &&
             acp_json_doc_str(msg->doc,
                              acp_json_obj_getz(msg->result, "sessionId"), &s,
                              &n) == 0) {
    char sid[256];

    snprintf(sid, sizeof(sid), "%.*s", (int)n, s);
    rv = acp_mcp_acp_decl_set_session(decl, sid);
    if (rv != 0)
      return rv; /* no memory: the proxy cannot serve the session */
  }
  return ACP_PROXY_FORWARD;
}

static int on_from_agent(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  tools_app *app = ud;

  (void)p;
  /* ACP_MCP_ACP_NOT_MINE == ACP_PROXY_FORWARD: not ours, pass it on. */
  return acp_mcp_acp_provider_proxy_msg(app->prov, m);
}

static int on_cancel(acp_proxy *p, acp_proxy_request *req, void *ud) {
  tools_app *app = ud;
  int rv = acp_mcp_acp_provider_proxy_cancel(app->prov, req);

  (void)p;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

static int add_tools(acp_mcp_server *server) {
  acp_mcp_tool_def def;
  int rv;

  memset(&def, 0, sizeof(def));
  def.version = ACP_MCP_DEF_VERSION;
  def.name = "echo";
  def.description = "Return the message as text.";
  def.input_schema = "{\"type\":\"object\",\"properties\":{\"message\":{"
                     "\"type\":\"string\"}},\"required\":[\"message\"]}";
  def.handler = tool_echo;
  rv = acp_mcp_server_add_tool(server, &def);
  if (rv != 0)
    return rv;
  def.name = "read_lines";
  def.description = "Read lines of a file under the session's working "
                    "directory (start is 1-based).";
  def.input_schema =
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
      "\"start\":{\"type\":\"integer\",\"minimum\":1},\"count\":{\"type\":"
      "\"integer\",\"minimum\":0}},\"required\":[\"path\"]}";
  def.handler = tool_read_lines;
  return acp_mcp_server_add_tool(server, &def);
}

int proxy_tools_main(int argc, char **argv) {
  tools_app app;
  acp_proxy_callbacks *cbs = NULL;
  acp_proxy *p = NULL;
  int status = 1;
  int i;

  memset(&app, 0, sizeof(app));
  app.name = "tools";
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(tools_usage, stdout);
      return 0;
    }
    if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
      app.name = argv[++i];
      continue;
    }
    fputs(tools_usage, stderr);
    return 2;
  }
  if (acp_mcp_server_new(&app.server, "acp-proxy-tools", "1.0", &app, NULL) !=
          0 ||
      add_tools(app.server) != 0 ||
      acp_mcp_acp_provider_new(&app.prov, &app, NULL) != 0 ||
      acp_proxy_callbacks_new(&cbs) != 0)
    goto cleanup;
  acp_proxy_callbacks_set_on_from_client(cbs, on_from_client);
  acp_proxy_callbacks_set_on_from_agent(cbs, on_from_agent);
  acp_proxy_callbacks_set_on_response(cbs, on_response);
  acp_proxy_callbacks_set_on_cancel(cbs, on_cancel);
  if (acp_proxy_new(&p, cbs, &app, NULL, NULL) != 0 ||
      acp_mcp_acp_provider_attach_proxy(app.prov, p) != 0)
    goto cleanup;
  status = proxy_run_stdio(p, "tools");
cleanup:
  acp_proxy_free(p);
  acp_proxy_callbacks_free(cbs);
  acp_mcp_acp_provider_free(app.prov);
  acp_mcp_server_free(app.server);
  while (app.cwds != NULL) {
    cwd_node *next = app.cwds->next;

    free(app.cwds);
    app.cwds = next;
  }
  if (app.urandom != NULL)
    fclose(app.urandom);
  return status;
}
