/*
 * Every x-method of the ACP v1 schemas (stable, then unstable) sent from
 * the correct side reaches its typed handler on the other side. The method
 * list is read from the schema files at test time with our JSON layer, so a
 * method added to the schema without a route (or without a row in the
 * params table below) fails this test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "acp_roles_pair.h"

/* MARK: - Minimal valid params per method */

static const struct {
  const char *method;
  const char *params;
} params_table[] = {
    {"initialize", "{\"protocolVersion\":1}"},
    {"authenticate", "{\"methodId\":\"m\"}"},
    {"logout", "{}"},
    {"session/new", "{\"cwd\":\"/\",\"mcpServers\":[]}"},
    {"session/load", "{\"sessionId\":\"s\",\"cwd\":\"/\",\"mcpServers\":[]}"},
    {"session/list", "{}"},
    {"session/delete", "{\"sessionId\":\"s\"}"},
    {"session/resume", "{\"sessionId\":\"s\",\"cwd\":\"/\"}"},
    {"session/close", "{\"sessionId\":\"s\"}"},
    {"session/set_mode", "{\"sessionId\":\"s\",\"modeId\":\"m\"}"},
    {"session/set_config_option",
     "{\"sessionId\":\"s\",\"configId\":\"c\",\"value\":\"v\"}"},
    {"session/prompt", "{\"sessionId\":\"s\",\"prompt\":[]}"},
    {"session/cancel", "{\"sessionId\":\"s\"}"},
    {"session/fork", "{\"sessionId\":\"s\",\"cwd\":\"/\"}"},
    {"providers/list", "{}"},
    {"providers/set",
     "{\"providerId\":\"p\",\"apiType\":\"openai\",\"baseUrl\":\"http://"
     "x\"}"},
    {"providers/disable", "{\"providerId\":\"p\"}"},
    {"nes/start", "{}"},
    {"nes/suggest",
     "{\"sessionId\":\"s\",\"uri\":\"file:///a\",\"version\":1,\"position\":"
     "{\"line\":0,\"character\":0},\"triggerKind\":\"automatic\"}"},
    {"nes/close", "{\"sessionId\":\"s\"}"},
    {"nes/accept", "{\"sessionId\":\"s\",\"id\":\"n\"}"},
    {"nes/reject", "{\"sessionId\":\"s\",\"id\":\"n\"}"},
    {"document/didOpen",
     "{\"sessionId\":\"s\",\"uri\":\"file:///a\",\"languageId\":\"c\","
     "\"version\":1,\"text\":\"\"}"},
    {"document/didChange",
     "{\"sessionId\":\"s\",\"uri\":\"file:///a\",\"version\":2,"
     "\"contentChanges\":[]}"},
    {"document/didClose", "{\"sessionId\":\"s\",\"uri\":\"file:///a\"}"},
    {"document/didSave", "{\"sessionId\":\"s\",\"uri\":\"file:///a\"}"},
    {"document/didFocus",
     "{\"sessionId\":\"s\",\"uri\":\"file:///a\",\"version\":1,\"position\":"
     "{\"line\":0,\"character\":0},\"visibleRange\":{\"start\":{\"line\":0,"
     "\"character\":0},\"end\":{\"line\":1,\"character\":0}}}"},
    {"session/request_permission",
     "{\"sessionId\":\"s\",\"toolCall\":{\"toolCallId\":\"t\"},\"options\":"
     "[]}"},
    {"fs/read_text_file", "{\"sessionId\":\"s\",\"path\":\"/a\"}"},
    {"fs/write_text_file",
     "{\"sessionId\":\"s\",\"path\":\"/a\",\"content\":\"x\"}"},
    {"terminal/create", "{\"sessionId\":\"s\",\"command\":\"ls\"}"},
    {"terminal/output", "{\"sessionId\":\"s\",\"terminalId\":\"t\"}"},
    {"terminal/release", "{\"sessionId\":\"s\",\"terminalId\":\"t\"}"},
    {"terminal/wait_for_exit", "{\"sessionId\":\"s\",\"terminalId\":\"t\"}"},
    {"terminal/kill", "{\"sessionId\":\"s\",\"terminalId\":\"t\"}"},
    {"elicitation/create",
     "{\"message\":\"m\",\"mode\":\"url\",\"url\":\"http://x\","
     "\"elicitationId\":\"e\"}"},
    {"elicitation/complete", "{\"elicitationId\":\"e\"}"},
    {"session/update",
     "{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"plan\","
     "\"entries\":[]}}"},
    {"mcp/connect", "{\"serverId\":\"srv\"}"},
    {"mcp/message",
     "{\"connectionId\":\"c\",\"method\":\"tools/list\",\"params\":{}}"},
    {"mcp/disconnect", "{\"connectionId\":\"c\"}"},
    {"$/cancel_request", "{\"requestId\":0}"},
    {"session/set_title", "{\"sessionId\":\"s\",\"title\":\"t\"}"},
    {"session/archive", "{\"sessionId\":\"s\"}"},
    {"session/unarchive", "{\"sessionId\":\"s\"}"},
    {"session/status", "{\"sessionId\":\"s\"}"},
    {"auth/status", "{}"},
    {"auth/status_update", "{\"state\":\"authenticated\"}"},
};

static const char *params_for(const char *method) {
  size_t i;

  for (i = 0; i < sizeof(params_table) / sizeof(params_table[0]); i++)
    if (strcmp(params_table[i].method, method) == 0)
      return params_table[i].params;
  return NULL;
}

/* MARK: - Handlers: one distinct function per setter */

/* The name of the method whose typed handler ran last. */
static char hit[64];
static int hits;
static int ext_hits;
static int cancel_hits;

#define AGENT_REQ(fn, name)                                                    \
  static int a_##fn(acp_agent *a, acp_agent_request *req, void *ud) {          \
    (void)ud;                                                                  \
    snprintf(hit, sizeof(hit), "%s", name);                                    \
    hits++;                                                                    \
    assert_string_equal(acp_agent_request_method(req), name);                  \
    assert_non_null(acp_agent_request_msg(req));                               \
    return acp_agent_respond(a, req, "{}", 2);                                 \
  }
#define AGENT_NOTIF(fn, name)                                                  \
  static int a_##fn(acp_agent *a, const acp_rpc_msg *msg, void *ud) {          \
    (void)a;                                                                   \
    (void)ud;                                                                  \
    snprintf(hit, sizeof(hit), "%s", name);                                    \
    hits++;                                                                    \
    assert_int_equal(msg->kind, ACP_RPC_NOTIFICATION);                         \
    return 0;                                                                  \
  }
#define CLIENT_REQ(fn, name)                                                   \
  static int c_##fn(acp_client *c, acp_client_request *req, void *ud) {        \
    (void)ud;                                                                  \
    snprintf(hit, sizeof(hit), "%s", name);                                    \
    hits++;                                                                    \
    assert_string_equal(acp_client_request_method(req), name);                 \
    return acp_client_respond(c, req, "{}", 2);                                \
  }
#define CLIENT_NOTIF(fn, name)                                                 \
  static int c_##fn(acp_client *c, const acp_rpc_msg *msg, void *ud) {         \
    (void)c;                                                                   \
    (void)ud;                                                                  \
    snprintf(hit, sizeof(hit), "%s", name);                                    \
    hits++;                                                                    \
    assert_int_equal(msg->kind, ACP_RPC_NOTIFICATION);                         \
    return 0;                                                                  \
  }

AGENT_REQ(initialize, "initialize")
AGENT_REQ(authenticate, "authenticate")
AGENT_REQ(logout, "logout")
AGENT_REQ(session_new, "session/new")
AGENT_REQ(session_load, "session/load")
AGENT_REQ(session_resume, "session/resume")
AGENT_REQ(session_list, "session/list")
AGENT_REQ(session_delete, "session/delete")
AGENT_REQ(session_close, "session/close")
AGENT_REQ(session_set_mode, "session/set_mode")
AGENT_REQ(session_set_config_option, "session/set_config_option")
AGENT_REQ(session_prompt, "session/prompt")
AGENT_REQ(session_fork, "session/fork")
AGENT_REQ(providers_list, "providers/list")
AGENT_REQ(providers_set, "providers/set")
AGENT_REQ(providers_disable, "providers/disable")
AGENT_REQ(nes_start, "nes/start")
AGENT_REQ(nes_suggest, "nes/suggest")
AGENT_REQ(nes_close, "nes/close")
AGENT_REQ(mcp_message, "mcp/message")
AGENT_REQ(session_set_title, "session/set_title")
AGENT_REQ(session_archive, "session/archive")
AGENT_REQ(session_unarchive, "session/unarchive")
AGENT_REQ(session_status, "session/status")
AGENT_REQ(auth_status, "auth/status")
AGENT_NOTIF(nes_accept, "nes/accept")
AGENT_NOTIF(nes_reject, "nes/reject")
AGENT_NOTIF(document_did_open, "document/didOpen")
AGENT_NOTIF(document_did_change, "document/didChange")
AGENT_NOTIF(document_did_close, "document/didClose")
AGENT_NOTIF(document_did_save, "document/didSave")
AGENT_NOTIF(document_did_focus, "document/didFocus")
AGENT_NOTIF(mcp_message_notification, "mcp/message")

CLIENT_REQ(request_permission, "session/request_permission")
CLIENT_REQ(fs_read_text_file, "fs/read_text_file")
CLIENT_REQ(fs_write_text_file, "fs/write_text_file")
CLIENT_REQ(terminal_create, "terminal/create")
CLIENT_REQ(terminal_output, "terminal/output")
CLIENT_REQ(terminal_wait_for_exit, "terminal/wait_for_exit")
CLIENT_REQ(terminal_kill, "terminal/kill")
CLIENT_REQ(terminal_release, "terminal/release")
CLIENT_REQ(elicitation_create, "elicitation/create")
CLIENT_REQ(mcp_connect, "mcp/connect")
CLIENT_REQ(mcp_disconnect, "mcp/disconnect")
CLIENT_REQ(mcp_message, "mcp/message")
CLIENT_NOTIF(elicitation_complete, "elicitation/complete")
CLIENT_NOTIF(mcp_message_notification, "mcp/message")
CLIENT_NOTIF(auth_status_update, "auth/status_update")

static int a_session_cancel(acp_agent *a, const char *sid, size_t len,
                            acp_agent_request *prompt, const acp_rpc_msg *msg,
                            void *ud) {
  (void)a;
  (void)prompt;
  (void)msg;
  (void)ud;
  assert_int_equal(len, 1);
  assert_memory_equal(sid, "s", 1);
  snprintf(hit, sizeof(hit), "%s", "session/cancel");
  hits++;
  return 0;
}

static int c_session_update(acp_client *c, const acp_client_update *u,
                            void *ud) {
  (void)c;
  (void)ud;
  assert_int_equal(u->kind, ACP_UPDATE_PLAN);
  snprintf(hit, sizeof(hit), "%s", "session/update");
  hits++;
  return 0;
}

/* Requests held (not answered) so $/cancel_request can name them. */
static acp_agent_request *held_a;
static acp_client_request *held_c;

static int a_hold(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)a;
  (void)ud;
  held_a = req;
  return 0;
}
static int c_hold(acp_client *c, acp_client_request *req, void *ud) {
  (void)c;
  (void)ud;
  held_c = req;
  return 0;
}
static int a_cancel_req(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  assert_ptr_equal(req, held_a);
  cancel_hits++;
  return acp_agent_respond_cancelled(a, req);
}
static int c_cancel_req(acp_client *c, acp_client_request *req, void *ud) {
  (void)ud;
  assert_ptr_equal(req, held_c);
  cancel_hits++;
  return acp_client_respond_cancelled(c, req);
}
static int a_ext(acp_agent *a, acp_agent_request *req, void *ud) {
  (void)ud;
  ext_hits++;
  return acp_agent_respond(a, req, "{}", 2);
}
static int c_ext(acp_client *c, acp_client_request *req, void *ud) {
  (void)ud;
  ext_hits++;
  return acp_client_respond(c, req, "{}", 2);
}

static void make_pair(acp_agent **a, acp_client **c) {
  acp_agent_callbacks *ac;
  acp_client_callbacks *cc;

  assert_int_equal(acp_agent_callbacks_new(&ac), 0);
  acp_agent_callbacks_set_on_initialize(ac, a_initialize);
  acp_agent_callbacks_set_on_authenticate(ac, a_authenticate);
  acp_agent_callbacks_set_on_logout(ac, a_logout);
  acp_agent_callbacks_set_on_session_new(ac, a_session_new);
  acp_agent_callbacks_set_on_session_load(ac, a_session_load);
  acp_agent_callbacks_set_on_session_resume(ac, a_session_resume);
  acp_agent_callbacks_set_on_session_list(ac, a_session_list);
  acp_agent_callbacks_set_on_session_delete(ac, a_session_delete);
  acp_agent_callbacks_set_on_session_close(ac, a_session_close);
  acp_agent_callbacks_set_on_session_set_mode(ac, a_session_set_mode);
  acp_agent_callbacks_set_on_session_set_config_option(
      ac, a_session_set_config_option);
  acp_agent_callbacks_set_on_session_prompt(ac, a_session_prompt);
  acp_agent_callbacks_set_on_session_cancel(ac, a_session_cancel);
  acp_agent_callbacks_set_on_session_fork(ac, a_session_fork);
  acp_agent_callbacks_set_on_providers_list(ac, a_providers_list);
  acp_agent_callbacks_set_on_providers_set(ac, a_providers_set);
  acp_agent_callbacks_set_on_providers_disable(ac, a_providers_disable);
  acp_agent_callbacks_set_on_nes_start(ac, a_nes_start);
  acp_agent_callbacks_set_on_nes_suggest(ac, a_nes_suggest);
  acp_agent_callbacks_set_on_nes_close(ac, a_nes_close);
  acp_agent_callbacks_set_on_nes_accept(ac, a_nes_accept);
  acp_agent_callbacks_set_on_nes_reject(ac, a_nes_reject);
  acp_agent_callbacks_set_on_document_did_open(ac, a_document_did_open);
  acp_agent_callbacks_set_on_document_did_change(ac, a_document_did_change);
  acp_agent_callbacks_set_on_document_did_close(ac, a_document_did_close);
  acp_agent_callbacks_set_on_document_did_save(ac, a_document_did_save);
  acp_agent_callbacks_set_on_document_did_focus(ac, a_document_did_focus);
  acp_agent_callbacks_set_on_mcp_message(ac, a_mcp_message);
  acp_agent_callbacks_set_on_mcp_message_notification(
      ac, a_mcp_message_notification);
  acp_agent_callbacks_set_on_session_set_title(ac, a_session_set_title);
  acp_agent_callbacks_set_on_session_archive(ac, a_session_archive);
  acp_agent_callbacks_set_on_session_unarchive(ac, a_session_unarchive);
  acp_agent_callbacks_set_on_session_status(ac, a_session_status);
  acp_agent_callbacks_set_on_auth_status(ac, a_auth_status);
  acp_agent_callbacks_set_on_cancel_request(ac, a_cancel_req);
  acp_agent_callbacks_set_on_ext_request(ac, a_ext);
  assert_int_equal(acp_agent_new(a, ac, NULL, NULL, NULL), 0);
  acp_agent_callbacks_free(ac);

  assert_int_equal(acp_client_callbacks_new(&cc), 0);
  acp_client_callbacks_set_on_request_permission(cc, c_request_permission);
  acp_client_callbacks_set_on_fs_read_text_file(cc, c_fs_read_text_file);
  acp_client_callbacks_set_on_fs_write_text_file(cc, c_fs_write_text_file);
  acp_client_callbacks_set_on_terminal_create(cc, c_terminal_create);
  acp_client_callbacks_set_on_terminal_output(cc, c_terminal_output);
  acp_client_callbacks_set_on_terminal_wait_for_exit(cc,
                                                     c_terminal_wait_for_exit);
  acp_client_callbacks_set_on_terminal_kill(cc, c_terminal_kill);
  acp_client_callbacks_set_on_terminal_release(cc, c_terminal_release);
  acp_client_callbacks_set_on_elicitation_create(cc, c_elicitation_create);
  acp_client_callbacks_set_on_elicitation_complete(cc, c_elicitation_complete);
  acp_client_callbacks_set_on_session_update(cc, c_session_update);
  acp_client_callbacks_set_on_mcp_connect(cc, c_mcp_connect);
  acp_client_callbacks_set_on_mcp_disconnect(cc, c_mcp_disconnect);
  acp_client_callbacks_set_on_mcp_message(cc, c_mcp_message);
  acp_client_callbacks_set_on_mcp_message_notification(
      cc, c_mcp_message_notification);
  acp_client_callbacks_set_on_auth_status_update(cc, c_auth_status_update);
  acp_client_callbacks_set_on_cancel_request(cc, c_cancel_req);
  acp_client_callbacks_set_on_ext_request(cc, c_ext);
  assert_int_equal(acp_client_new(c, cc, NULL, NULL, NULL), 0);
  acp_client_callbacks_free(cc);
}

/* MARK: - Responses */

static int n_ok;
static int n_err;

static int a_resp(acp_agent *a, const acp_rpc_msg *msg, void *ud) {
  (void)a;
  (void)ud;
  if (msg->error)
    n_err++;
  else
    n_ok++;
  return 0;
}
static int c_resp(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  (void)c;
  (void)ud;
  if (msg->error)
    n_err++;
  else
    n_ok++;
  return 0;
}

/* MARK: - Schema walk */

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf;
  long n;

  if (f == NULL)
    return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static void str_of(acp_json_doc *doc, const acp_json_val *v, char *out,
                   size_t cap) {
  const char *s;
  size_t n;

  assert_int_equal(acp_json_doc_str(doc, v, &s, &n), 0);
  assert_true(n < cap);
  memcpy(out, s, n);
  out[n] = '\0';
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s);
  size_t b = strlen(suffix);

  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Send one schema entry from the correct side and check its handler. */
static void route_one(acp_agent *a, acp_client *c, const char *method,
                      const char *side, int is_notif, int from_agent) {
  const char *params = params_for(method);
  int before = hits;
  int ok_before = n_ok;

  if (params == NULL)
    fail_msg("no params row for schema method %s", method);
  hit[0] = '\0';
  if (from_agent) {
    if (is_notif)
      assert_int_equal(acp_agent_notify(a, method, params, strlen(params)), 0);
    else
      assert_int_equal(
          acp_agent_call(a, method, params, strlen(params), a_resp, NULL, NULL),
          0);
  } else {
    if (is_notif)
      assert_int_equal(acp_client_notify(c, method, params, strlen(params)), 0);
    else
      assert_int_equal(acp_client_call(c, method, params, strlen(params),
                                       c_resp, NULL, NULL),
                       0);
  }
  assert_int_equal(pump(a, c, NULL), 0);
  if (hits != before + 1 || strcmp(hit, method) != 0)
    fail_msg("%s (side %s, %s) did not reach its typed handler (hit '%s')",
             method, side, is_notif ? "notification" : "request", hit);
  if (!is_notif && n_ok != ok_before + 1)
    fail_msg("%s: no successful response came back", method);
}

/* $/cancel_request both ways: each side's cancel handler runs. */
static void route_cancel(acp_agent *a, acp_client *c) {
  acp_agent_callbacks *ac;
  acp_client_callbacks *cc;
  acp_agent *a2;
  acp_client *c2;
  int64_t id;
  int before = cancel_hits;
  int err_before = n_err;

  (void)a;
  (void)c;
  assert_int_equal(acp_agent_callbacks_new(&ac), 0);
  acp_agent_callbacks_set_on_ext_request(ac, a_hold);
  acp_agent_callbacks_set_on_cancel_request(ac, a_cancel_req);
  assert_int_equal(acp_agent_new(&a2, ac, NULL, NULL, NULL), 0);
  acp_agent_callbacks_free(ac);
  assert_int_equal(acp_client_callbacks_new(&cc), 0);
  acp_client_callbacks_set_on_ext_request(cc, c_hold);
  acp_client_callbacks_set_on_cancel_request(cc, c_cancel_req);
  assert_int_equal(acp_client_new(&c2, cc, NULL, NULL, NULL), 0);
  acp_client_callbacks_free(cc);

  assert_int_equal(acp_client_call(c2, "_slow", NULL, 0, c_resp, NULL, &id), 0);
  assert_int_equal(pump(a2, c2, NULL), 0);
  assert_non_null(held_a);
  assert_int_equal(acp_client_cancel_call(c2, id), 0);
  assert_int_equal(pump(a2, c2, NULL), 0);
  assert_int_equal(acp_agent_call(a2, "_slow", NULL, 0, a_resp, NULL, &id), 0);
  assert_int_equal(pump(a2, c2, NULL), 0);
  assert_non_null(held_c);
  assert_int_equal(acp_agent_cancel_call(a2, id), 0);
  assert_int_equal(pump(a2, c2, NULL), 0);
  assert_int_equal(cancel_hits, before + 2);
  assert_int_equal(n_err, err_before + 2);
  held_a = NULL;
  held_c = NULL;
  acp_client_free(c2);
  acp_agent_free(a2);
}

/* Read and parse spec/acp/schema/v1/<file>; the text stays alive as long as
 * the document (free both). Returns its $defs. */
static const acp_json_val *load_defs(const char *file, char **text,
                                     acp_json_doc **doc) {
  char path[1024];
  size_t len = 0;
  const acp_json_val *defs;

  if (strchr(file, '/') != NULL) /* a path under spec/ */
    snprintf(path, sizeof(path), "%s/%s", ACP_SPEC_DIR, file);
  else
    snprintf(path, sizeof(path), "%s/acp/schema/v1/%s", ACP_SPEC_DIR, file);
  *text = read_file(path, &len);
  if (*text == NULL)
    fail_msg("cannot read %s", path);
  assert_int_equal(acp_json_doc_new(doc, NULL), 0);
  assert_int_equal(acp_json_doc_parse(*doc, *text, len, NULL), 0);
  defs = acp_json_obj_getz(acp_json_doc_root(*doc), "$defs");
  assert_non_null(defs);
  return defs;
}

/* Is `method` an x-method of defs? */
static int has_method(acp_json_doc *doc, const acp_json_val *defs,
                      const char *method) {
  const acp_json_val *k;

  for (k = acp_json_child(defs); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *xm = acp_json_obj_getz(acp_json_next(k), "x-method");
    char m[128];

    if (xm == NULL)
      continue;
    str_of(doc, xm, m, sizeof(m));
    if (strcmp(m, method) == 0)
      return 1;
  }
  return 0;
}

/* Send every method of `file` (only those `base` lacks, when not NULL). */
static void walk_schema_new(const char *file, const char *base,
                            int *n_methods) {
  char *text;
  char *btext = NULL;
  acp_json_doc *doc;
  acp_json_doc *bdoc = NULL;
  const acp_json_val *defs;
  const acp_json_val *bdefs = NULL;
  const acp_json_val *k;
  acp_agent *a;
  acp_client *c;

  defs = load_defs(file, &text, &doc);
  if (base != NULL)
    bdefs = load_defs(base, &btext, &bdoc);
  make_pair(&a, &c);
  *n_methods = 0;
  for (k = acp_json_child(defs); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *def = acp_json_next(k);
    const acp_json_val *xm = acp_json_obj_getz(def, "x-method");
    char name[128];
    char method[128];
    char side[32];
    int is_notif;

    if (xm == NULL)
      continue;
    str_of(doc, k, name, sizeof(name));
    str_of(doc, xm, method, sizeof(method));
    str_of(doc, acp_json_obj_getz(def, "x-side"), side, sizeof(side));
    if (ends_with(name, "Response"))
      continue;
    if (bdefs != NULL && has_method(bdoc, bdefs, method))
      continue;
    if (bdefs != NULL && strcmp(side, "proxy") == 0)
      continue; /* proxy methods: not generated (gen_acp.py overlay()) */
    is_notif = ends_with(name, "Notification");
    if (!is_notif && !ends_with(name, "Request"))
      fail_msg("unexpected def %s for %s", name, method);
    (*n_methods)++;
    if (strcmp(side, "agent") == 0) {
      route_one(a, c, method, side, is_notif, 0);
    } else if (strcmp(side, "client") == 0) {
      route_one(a, c, method, side, is_notif, 1);
    } else if (strcmp(side, "both") == 0) {
      route_one(a, c, method, side, is_notif, 0);
      route_one(a, c, method, side, is_notif, 1);
    } else if (strcmp(side, "protocol") == 0) {
      assert_string_equal(method, "$/cancel_request");
      route_cancel(a, c);
    } else {
      fail_msg("unknown x-side %s for %s", side, method);
    }
  }
  assert_int_equal(ext_hits, 0);
  acp_client_free(c);
  acp_agent_free(a);
  acp_json_doc_free(doc);
  acp_json_doc_free(bdoc);
  free(text);
  free(btext);
}

static void walk_schema(const char *file, int *n_methods) {
  walk_schema_new(file, NULL, n_methods);
}

static void test_roles_every_stable_method_reaches_typed_handler(void **s) {
  int n = 0;

  (void)s;
  walk_schema("schema.json", &n);
  /* 13 agent + 11 client + 1 protocol (METHODS.md), minus none. */
  assert_int_equal(n, 25);
}

static void test_roles_every_unstable_method_reaches_typed_handler(void **s) {
  int n = 0;

  (void)s;
  walk_schema("schema.unstable.json", &n);
  assert_true(n > 25);
  /* The newer copy's additions: session/set_title, archive, unarchive,
   * status, auth/status, auth/status_update. */
  walk_schema_new("acp/schema-sdk-2.4.0/v1/schema.unstable.json",
                  "schema.unstable.json", &n);
  assert_int_equal(n, 6);
}

/* The typed calls of the newest unstable methods reach the typed handlers
 * with the params the schema requires (no -32602 from the check). */
static void test_roles_unstable_typed_calls(void **s) {
  acp_agent *a;
  acp_client *c;
  int ok_before = n_ok;
  struct {
    int rv;
    const char *method;
  } sent[8];
  size_t i = 0;
  size_t k;
  static const char accounts[] = "[{\"label\":\"k\",\"active\":true}]";

  (void)s;
  make_pair(&a, &c);
#define TYPED(call, name)                                                      \
  do {                                                                         \
    hit[0] = '\0';                                                             \
    sent[i].rv = (call);                                                       \
    sent[i].method = name;                                                     \
    assert_int_equal(sent[i].rv, 0);                                           \
    assert_int_equal(pump(a, c, NULL), 0);                                     \
    assert_string_equal(hit, name);                                            \
    i++;                                                                       \
  } while (0)
  TYPED(acp_client_session_fork(c, "s", "/", NULL, 0, c_resp, NULL, NULL),
        "session/fork");
  TYPED(acp_client_session_set_title(c, "s", "T", c_resp, NULL, NULL),
        "session/set_title");
  TYPED(acp_client_session_archive(c, "s", c_resp, NULL, NULL),
        "session/archive");
  TYPED(acp_client_session_unarchive(c, "s", c_resp, NULL, NULL),
        "session/unarchive");
  TYPED(acp_client_session_status(c, "s", c_resp, NULL, NULL),
        "session/status");
  TYPED(acp_client_auth_status(c, c_resp, NULL, NULL), "auth/status");
  TYPED(acp_agent_send_auth_status_update(a, "authenticated", accounts,
                                          strlen(accounts)),
        "auth/status_update");
#undef TYPED
  assert_int_equal(n_ok, ok_before + 6);
  for (k = 0; k < i; k++)
    assert_int_equal(sent[k].rv, 0);
  assert_int_equal(acp_client_session_set_title(c, "s", NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_agent_send_auth_status_update(a, NULL, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  acp_client_free(c);
  acp_agent_free(a);
}

/* The typed calls of the unstable providers, NES and document methods reach
 * the typed handlers, and what they put on the wire decodes strictly with
 * the method's generated params type (so it is what the schema asks). */
static void test_roles_providers_nes_documents_typed_calls(void **s) {
  acp_agent *a;
  acp_client *c;
  pair_wire w = {{0}, {0}};
  acp_json_doc *doc;
  acp_arena *arena;
  char err[160];
  int n = 0;
  static const char range[] =
      "{\"start\":{\"line\":0,\"character\":0},\"end\":{\"line\":9,"
      "\"character\":0}}";
  static const char changes[] = "[{\"text\":\"x = 1\\n\"}]";
  static const char folders[] = "[{\"uri\":\"file:///w\",\"name\":\"w\"}]";
  static const char headers[] = "{\"x-k\":\"v\"}";

  (void)s;
  make_pair(&a, &c);
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  assert_int_equal(acp_arena_new(&arena, NULL), 0);
#define WIRE(call, name)                                                       \
  do {                                                                         \
    const acp_json_val *root;                                                  \
    const acp_method_info *mi;                                                 \
    const acp_type_desc *t;                                                    \
    void *out;                                                                 \
    wire_clear(&w);                                                            \
    hit[0] = '\0';                                                             \
    assert_int_equal((call), 0);                                               \
    assert_int_equal(pump(a, c, &w), 0);                                       \
    assert_string_equal(hit, name);                                            \
    assert_int_equal(acp_json_doc_parse(doc, w.c2a.data, w.c2a.len, NULL), 0); \
    root = acp_json_doc_root(doc);                                             \
    mi = acp_method_by_name(name, strlen(name));                               \
    assert_non_null(mi);                                                       \
    t = mi->is_notification ? acp_method_notification_desc(mi->id)             \
                            : acp_method_params_desc(mi->id);                  \
    assert_non_null(t);                                                        \
    out = acp_arena_alloc(arena, acp_type_size(t));                            \
    if (acp_decode(t, acp_json_obj_getz(root, "params"), arena, out, err,      \
                   sizeof(err)) != 0)                                          \
      fail_msg("%s: %s", name, err);                                           \
    n++;                                                                       \
  } while (0)
  WIRE(acp_client_providers_list(c, c_resp, NULL, NULL), "providers/list");
  WIRE(acp_client_providers_set(c, "main", "openai", "https://h.invalid/v1",
                                LIT(headers), c_resp, NULL, NULL),
       "providers/set");
  WIRE(acp_client_providers_set(c, "main", "anthropic", "http://127.0.0.1:1",
                                NULL, 0, c_resp, NULL, NULL),
       "providers/set");
  WIRE(acp_client_providers_disable(c, "main", c_resp, NULL, NULL),
       "providers/disable");
  WIRE(acp_client_nes_start(c, "file:///w", LIT(folders), c_resp, NULL, NULL),
       "nes/start");
  WIRE(acp_client_nes_start(c, NULL, NULL, 0, c_resp, NULL, NULL), "nes/start");
  WIRE(acp_client_nes_suggest(c, "n1", "file:///w/a.py", 2, 0, 4, "manual",
                              NULL, 0, c_resp, NULL, NULL),
       "nes/suggest");
  WIRE(acp_client_nes_close(c, "n1", c_resp, NULL, NULL), "nes/close");
  WIRE(acp_client_nes_accept(c, "n1", "sug_1"), "nes/accept");
  WIRE(acp_client_nes_reject(c, "n1", "sug_2", "ignored"), "nes/reject");
  WIRE(acp_client_nes_reject(c, "n1", "sug_3", NULL), "nes/reject");
  WIRE(acp_client_document_did_open(c, "n1", "file:///w/a.py", "python", 1,
                                    LIT("x = \"\\u00e9\"\n")),
       "document/didOpen");
  WIRE(acp_client_document_did_change(c, "n1", "file:///w/a.py", 2,
                                      LIT(changes)),
       "document/didChange");
  WIRE(acp_client_document_did_save(c, "n1", "file:///w/a.py"),
       "document/didSave");
  WIRE(acp_client_document_did_focus(c, "n1", "file:///w/a.py", 2, 1, 0,
                                     LIT(range)),
       "document/didFocus");
  WIRE(acp_client_document_did_close(c, "n1", "file:///w/a.py"),
       "document/didClose");
#undef WIRE
  assert_int_equal(n, 16);
  assert_int_equal(
      acp_client_providers_set(c, "m", NULL, "u", NULL, 0, NULL, NULL, NULL),
      ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_providers_disable(c, NULL, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_nes_suggest(c, "n", "u", 1, -1, 0, "manual", NULL,
                                          0, NULL, NULL, NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_nes_accept(c, "n", NULL),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_document_did_open(NULL, "n", "u", "c", 1, "", 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_document_did_change(c, "n", "u", 1, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_document_did_focus(c, "n", "u", 1, 0, 0, NULL, 0),
                   ACP_ERR_INVALID_ARGUMENT);
  assert_int_equal(acp_client_document_did_close(c, NULL, "u"),
                   ACP_ERR_INVALID_ARGUMENT);
  wire_clear(&w);
  acp_arena_free(arena);
  acp_json_doc_free(doc);
  acp_client_free(c);
  acp_agent_free(a);
}

/* The required-member check follows the schema (generated from it): for
 * every request whose params type has `required` members, params `{}` are
 * refused with -32602 naming one of them, and the typed handler does not
 * run. mcp/connect and mcp/message are checked by their handlers (several
 * wire shapes are in use) and are skipped. */
static char last_err_path[128];
static int64_t last_err_code;

static int a_resp_err(acp_agent *a, const acp_rpc_msg *msg, void *ud) {
  (void)a;
  (void)ud;
  last_err_code = msg->error ? msg->error_code : 0;
  last_err_path[0] = '\0';
  if (msg->error_data != NULL) {
    const acp_json_val *p = acp_json_obj_getz(msg->error_data, "path");
    const char *t;
    size_t n;
    if (p != NULL && acp_json_doc_str(msg->doc, p, &t, &n) == 0 &&
        n < sizeof(last_err_path)) {
      memcpy(last_err_path, t, n);
      last_err_path[n] = '\0';
    }
  }
  return 0;
}

static int c_resp_err(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  (void)c;
  return a_resp_err(NULL, msg, ud);
}

/* Is `path` "/<one of def.required>"? */
static int names_required(acp_json_doc *doc, const acp_json_val *req,
                          const char *path) {
  const acp_json_val *r;
  char name[128];

  for (r = acp_json_child(req); r != NULL; r = acp_json_next(r)) {
    str_of(doc, r, name, sizeof(name));
    if (path[0] == '/' && strcmp(path + 1, name) == 0)
      return 1;
  }
  return 0;
}

static void test_roles_required_members_follow_schema(void **s) {
  char *text;
  acp_json_doc *doc;
  const acp_json_val *defs;
  const acp_json_val *k;
  acp_agent *a;
  acp_client *c;
  int checked = 0;

  (void)s;
  defs = load_defs("schema.unstable.json", &text, &doc);
  make_pair(&a, &c);
  for (k = acp_json_child(defs); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *def = acp_json_next(k);
    const acp_json_val *xm = acp_json_obj_getz(def, "x-method");
    const acp_json_val *req = acp_json_obj_getz(def, "required");
    char name[128];
    char method[128];
    char side[32];
    int before = hits;

    if (xm == NULL || req == NULL || acp_json_child(req) == NULL)
      continue;
    str_of(doc, k, name, sizeof(name));
    str_of(doc, xm, method, sizeof(method));
    str_of(doc, acp_json_obj_getz(def, "x-side"), side, sizeof(side));
    if (!ends_with(name, "Request") || strncmp(method, "mcp/", 4) == 0 ||
        strcmp(side, "protocol") == 0)
      continue;
    last_err_code = 0;
    last_err_path[0] = '\0';
    if (strcmp(side, "client") == 0)
      assert_int_equal(
          acp_agent_call(a, method, "{}", 2, a_resp_err, NULL, NULL), 0);
    else
      assert_int_equal(
          acp_client_call(c, method, "{}", 2, c_resp_err, NULL, NULL), 0);
    assert_int_equal(pump(a, c, NULL), 0);
    if (last_err_code != -32602)
      fail_msg("%s with {}: got code %lld, want -32602", method,
               (long long)last_err_code);
    if (!names_required(doc, req, last_err_path))
      fail_msg("%s with {}: error path '%s' names no required member", method,
               last_err_path);
    if (hits != before)
      fail_msg("%s with {}: the typed handler ran", method);
    checked++;
  }
  /* initialize, authenticate, session/new, load, ... in v1 unstable. */
  assert_true(checked >= 20);
  acp_client_free(c);
  acp_agent_free(a);
  acp_json_doc_free(doc);
  free(text);
}

/* The method table of methods.h agrees with the routing: every known method
 * sent from its handling side's peer reaches a typed handler (no ext). */
static void test_roles_method_table_is_fully_routed(void **s) {
  size_t i;
  acp_agent *a;
  acp_client *c;

  (void)s;
  make_pair(&a, &c);
  for (i = 0; i < acp_method_count(); i++) {
    const acp_method_info *mi = acp_method_at(i);

    if (mi->side == ACP_SIDE_PROTOCOL)
      continue;
    if (mi->side & ACP_SIDE_AGENT)
      route_one(a, c, mi->name, "agent", mi->is_notification, 0);
    if (mi->side & ACP_SIDE_CLIENT)
      route_one(a, c, mi->name, "client", mi->is_notification, 1);
    if (mi->notification_type != NULL && !mi->is_notification) {
      if (mi->side & ACP_SIDE_AGENT)
        route_one(a, c, mi->name, "agent", 1, 0);
      if (mi->side & ACP_SIDE_CLIENT)
        route_one(a, c, mi->name, "client", 1, 1);
    }
  }
  assert_int_equal(ext_hits, 0);
  acp_client_free(c);
  acp_agent_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roles_every_stable_method_reaches_typed_handler),
      cmocka_unit_test(test_roles_every_unstable_method_reaches_typed_handler),
      cmocka_unit_test(test_roles_unstable_typed_calls),
      cmocka_unit_test(test_roles_providers_nes_documents_typed_calls),
      cmocka_unit_test(test_roles_method_table_is_fully_routed),
      cmocka_unit_test(test_roles_required_members_follow_schema),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
