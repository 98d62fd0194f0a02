/*
 * The ACP client role: dispatch of client-side methods (permission, fs,
 * terminal, elicitation, session/update, unstable mcp/...) to typed handlers
 * and one call helper per agent method.
 */
#include "acp/types_v2.h"
#include "json/json_int.h"
#include "role_int.h"

#include "acp/version.h"

#define CLIENT_PROTOCOL_VERSION 1

/* Call kinds that the client post-processes. */
enum { CALL_PLAIN = 0, CALL_INITIALIZE = 1 };

struct acp_client_callbacks {
  acp_client_request_cb req[ACP_METHOD__COUNT];
  acp_client_notification_cb notif[ACP_METHOD__COUNT];
  acp_client_session_update_cb session_update;
  acp_client_cancel_request_cb cancel_request;
  acp_client_request_cb ext_request;
  acp_client_notification_cb ext_notification;
};

struct acp_client {
  acp__role role;
  acp_client_callbacks cbs;
  void *user_data;
  int64_t protocol_version;
  int max_version; /* highest version initialize asks for (0 means 1) */
  char *agent_caps;
  size_t agent_caps_len;
};

/* MARK: - Update kinds */

/* Each name with its length: the lookup compares lengths before bytes
 * and measures nothing per update. */
#define UPDATE_NAME(s)                                                         \
  { s, sizeof(s) - 1 }
static const struct {
  const char *name;
  size_t len;
} update_names[] = {
    {NULL, 0},
    UPDATE_NAME("user_message_chunk"),
    UPDATE_NAME("agent_message_chunk"),
    UPDATE_NAME("agent_thought_chunk"),
    UPDATE_NAME("tool_call"),
    UPDATE_NAME("tool_call_update"),
    UPDATE_NAME("plan"),
    UPDATE_NAME("available_commands_update"),
    UPDATE_NAME("current_mode_update"),
    UPDATE_NAME("config_option_update"),
    UPDATE_NAME("session_info_update"),
    UPDATE_NAME("usage_update"),
    UPDATE_NAME("plan_update"),
    UPDATE_NAME("plan_removed"),
    UPDATE_NAME("notice"),
    UPDATE_NAME("compaction_update"),
    UPDATE_NAME("compaction_summary_chunk"),
    UPDATE_NAME("subagent_update"),
    UPDATE_NAME("session_message"),
    UPDATE_NAME("session_message_chunk"),
};
#undef UPDATE_NAME

const char *acp_update_kind_name(acp_update_kind kind) {
  if ((int)kind <= 0 ||
      (size_t)kind >= sizeof(update_names) / sizeof(update_names[0]))
    return NULL;
  return update_names[kind].name;
}

acp_update_kind acp_update_kind_from_name(const char *name, size_t len) {
  size_t i;

  if (name == NULL)
    return ACP_UPDATE_UNKNOWN;
  for (i = 1; i < sizeof(update_names) / sizeof(update_names[0]); i++)
    if (update_names[i].len == len &&
        memcmp(update_names[i].name, name, len) == 0)
      return (acp_update_kind)i;
  return ACP_UPDATE_UNKNOWN;
}

/* MARK: - Callbacks */

int acp_client_callbacks_new(acp_client_callbacks **out) {
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = acp__calloc(acp_mem_default(), 1, sizeof(**out));
  return *out ? 0 : ACP_ERR_NOMEM;
}

void acp_client_callbacks_free(acp_client_callbacks *cbs) {
  acp__free(acp_mem_default(), cbs);
}

#define REQ_SETTER(fn, id)                                                     \
  void acp_client_callbacks_set_on_##fn(acp_client_callbacks *cbs,             \
                                        acp_client_request_cb cb) {            \
    if (cbs)                                                                   \
      cbs->req[id] = cb;                                                       \
  }
#define NOTIF_SETTER(fn, id)                                                   \
  void acp_client_callbacks_set_on_##fn(acp_client_callbacks *cbs,             \
                                        acp_client_notification_cb cb) {       \
    if (cbs)                                                                   \
      cbs->notif[id] = cb;                                                     \
  }

REQ_SETTER(request_permission, ACP_METHOD_SESSION_REQUEST_PERMISSION)
REQ_SETTER(fs_read_text_file, ACP_METHOD_FS_READ_TEXT_FILE)
REQ_SETTER(fs_write_text_file, ACP_METHOD_FS_WRITE_TEXT_FILE)
REQ_SETTER(terminal_create, ACP_METHOD_TERMINAL_CREATE)
REQ_SETTER(terminal_output, ACP_METHOD_TERMINAL_OUTPUT)
REQ_SETTER(terminal_wait_for_exit, ACP_METHOD_TERMINAL_WAIT_FOR_EXIT)
REQ_SETTER(terminal_kill, ACP_METHOD_TERMINAL_KILL)
REQ_SETTER(terminal_release, ACP_METHOD_TERMINAL_RELEASE)
REQ_SETTER(elicitation_create, ACP_METHOD_ELICITATION_CREATE)
REQ_SETTER(mcp_connect, ACP_METHOD_MCP_CONNECT)
REQ_SETTER(mcp_disconnect, ACP_METHOD_MCP_DISCONNECT)
REQ_SETTER(mcp_message, ACP_METHOD_MCP_MESSAGE)
NOTIF_SETTER(elicitation_complete, ACP_METHOD_ELICITATION_COMPLETE)
NOTIF_SETTER(mcp_message_notification, ACP_METHOD_MCP_MESSAGE)
NOTIF_SETTER(auth_status_update, ACP_METHOD_AUTH_STATUS_UPDATE)

void acp_client_callbacks_set_on_session_update(
    acp_client_callbacks *cbs, acp_client_session_update_cb cb) {
  if (cbs)
    cbs->session_update = cb;
}

void acp_client_callbacks_set_on_cancel_request(
    acp_client_callbacks *cbs, acp_client_cancel_request_cb cb) {
  if (cbs)
    cbs->cancel_request = cb;
}

void acp_client_callbacks_set_on_ext_request(acp_client_callbacks *cbs,
                                             acp_client_request_cb cb) {
  if (cbs)
    cbs->ext_request = cb;
}

void acp_client_callbacks_set_on_ext_notification(
    acp_client_callbacks *cbs, acp_client_notification_cb cb) {
  if (cbs)
    cbs->ext_notification = cb;
}

/* MARK: - Dispatch */

static int cb_result(int rv) {
  if (rv != 0 && rv != ACP_ERR_PAUSE)
    return ACP_ERR_CALLBACK_FAILURE;
  return rv;
}

static int client_on_request(acp__role *r, acp__req *req,
                             const acp_method_info *mi) {
  acp_client *c = r->owner;
  acp_client_request_cb cb = NULL;

  if (mi != NULL)
    cb = c->cbs.req[mi->id];
  if (cb == NULL)
    cb = c->cbs.ext_request;
  if (cb == NULL)
    return acp__role_respond_error(r, req, ACP_RPC_METHOD_NOT_FOUND,
                                   "Method not found", NULL, 0);
  return cb_result(cb(c, req, c->user_data));
}

static int client_on_session_update(acp_client *c, const acp_rpc_msg *msg) {
  acp_client_update u;
  const acp_json_val *sid;
  const acp_json_val *content;
  const acp_json_val *kind;
  int rv;

  memset(&u, 0, sizeof(u));
  u.msg = msg;
  /* Every streamed chunk comes this way: lookups and strings inline
   * (json_int.h), each the general function's answer. */
  u.update = ACP__OBJ_GETI(msg->params, "update");
  sid = ACP__OBJ_GETI(msg->params, "sessionId");
  rv = acp__json_doc_str_inl(msg->doc, sid, &u.session_id, &u.session_id_len);
  if (rv != 0)
    return rv;
  kind = ACP__OBJ_GETI(u.update, "sessionUpdate");
  content = ACP__OBJ_GETI(u.update, "content");
  if (acp_json_type_of(kind) == ACP_JSON_STRING) {
    rv = acp__json_doc_str_inl(msg->doc, kind, &u.kind_name, &u.kind_name_len);
    if (rv != 0)
      return rv;
    u.kind = acp_update_kind_from_name(u.kind_name, u.kind_name_len);
  }
  if (u.kind == ACP_UPDATE_USER_MESSAGE_CHUNK ||
      u.kind == ACP_UPDATE_AGENT_MESSAGE_CHUNK ||
      u.kind == ACP_UPDATE_AGENT_THOUGHT_CHUNK) {
    const acp_json_val *type = ACP__OBJ_GETI(content, "type");
    const acp_json_val *t;

    if (ACP__STR_EQI(type, "text") &&
        (t = ACP__OBJ_GETI(content, "text")) != NULL &&
        acp_json_type_of(t) == ACP_JSON_STRING) {
      rv = acp__json_doc_str_inl(msg->doc, t, &u.text, &u.text_len);
      if (rv != 0)
        return rv;
    }
  }
  return c->cbs.session_update(c, &u, c->user_data);
}

static int client_on_notification(acp__role *r, const acp_rpc_msg *msg,
                                  const acp_method_info *mi) {
  acp_client *c = r->owner;
  acp_client_notification_cb cb = NULL;

  if (mi != NULL && mi->id == ACP_METHOD_SESSION_UPDATE &&
      c->cbs.session_update != NULL)
    return cb_result(client_on_session_update(c, msg));
  if (mi != NULL)
    cb = c->cbs.notif[mi->id];
  if (cb == NULL)
    cb = c->cbs.ext_notification;
  if (cb == NULL)
    return 0;
  return cb_result(cb(c, msg, c->user_data));
}

static int client_on_cancel(acp__role *r, acp__req *req) {
  acp_client *c = r->owner;

  if (c->cbs.cancel_request == NULL)
    return 0;
  return cb_result(c->cbs.cancel_request(c, req, c->user_data));
}

static int client_record_initialize(acp_client *c, const acp_rpc_msg *msg) {
  const acp_json_val *caps;
  int64_t v;

  if (msg->result == NULL)
    return 0;
  if (acp_json_get_int64(ACP__OBJ_GETL(msg->result, "protocolVersion"), &v) !=
      0)
    return 0;
  c->protocol_version = v;
  /* Speak what the agent answered, if we enabled it; an answer we cannot
   * speak leaves the v1 table (the application should close, see
   * acp_client_protocol_version()). */
  if (v == ACP_PROTOCOL_V2 && c->max_version >= ACP_PROTOCOL_V2)
    c->role.version = ACP_PROTOCOL_V2;
  else
    c->role.version = ACP_PROTOCOL_V1;
  acp__free(&c->role.mem, c->agent_caps);
  c->agent_caps = NULL;
  c->agent_caps_len = 0;
  caps = ACP__OBJ_GETL(msg->result, "agentCapabilities");
  if (caps == NULL) /* v2 spelling */
    caps = ACP__OBJ_GETL(msg->result, "capabilities");
  if (caps != NULL) {
    size_t n;
    const char *raw = acp_json_raw(caps, &n);

    c->agent_caps = acp__malloc(&c->role.mem, n + 1);
    if (c->agent_caps == NULL)
      return ACP_ERR_NOMEM;
    memcpy(c->agent_caps, raw, n);
    c->agent_caps[n] = '\0';
    c->agent_caps_len = n;
  }
  return 0;
}

static int client_on_response(acp__role *r, acp__call *call,
                              const acp_rpc_msg *msg) {
  acp_client *c = r->owner;
  int rv;

  if (call->kind == CALL_INITIALIZE) {
    rv = client_record_initialize(c, msg);
    if (rv != 0)
      return rv;
  }
  if (call->cb.client == NULL)
    return 0;
  return cb_result(call->cb.client(c, msg, call->cb_user_data));
}

static const acp__role_ops client_ops = {
    .on_request = client_on_request,
    .on_notification = client_on_notification,
    .on_cancel = client_on_cancel,
    .on_response = client_on_response,
    .on_answered = NULL,
};

/* MARK: - Lifecycle */

int acp_client_new(acp_client **out, const acp_client_callbacks *cbs,
                   void *user_data, const acp_rpc_options *opts,
                   const acp_mem *mem) {
  acp_client *c;
  acp_mem m;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  c = acp__calloc(&m, 1, sizeof(*c));
  if (c == NULL)
    return ACP_ERR_NOMEM;
  rv = acp__role_init(&c->role, ACP_SIDE_CLIENT, &client_ops, c, opts, &m);
  if (rv != 0) {
    acp__free(&m, c);
    return rv;
  }
  if (cbs != NULL)
    c->cbs = *cbs;
  c->user_data = user_data;
  *out = c;
  return 0;
}

void acp_client_free(acp_client *client) {
  acp_mem m;

  if (client == NULL)
    return;
  m = client->role.mem;
  acp__role_dispose(&client->role);
  acp__free(&m, client->agent_caps);
  acp__free(&m, client);
}

void *acp_client_get_user_data(const acp_client *client) {
  return client ? client->user_data : NULL;
}

acp_rpc_session *acp_client_session(acp_client *client) {
  return client ? client->role.rpc : NULL;
}

acp_ssize acp_client_recv(acp_client *client, const char *data, size_t len,
                          uint64_t now_ms) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_recv(&client->role, data, len, now_ms);
}

acp_ssize acp_client_send(acp_client *client, const char **data) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp_rpc_session_send(client->role.rpc, data);
}

int acp_client_recv_eof(acp_client *client, uint64_t now_ms) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  client->role.now_ms = now_ms;
  return acp_rpc_session_recv_eof(client->role.rpc, now_ms);
}

int acp_client_handle_expiry(acp_client *client, uint64_t now_ms) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_handle_expiry(&client->role, now_ms);
}

void acp_client_set_call_timeout(acp_client *client, uint64_t timeout_ms) {
  if (client)
    client->role.call_timeout_ms = timeout_ms;
}

int64_t acp_client_protocol_version(const acp_client *client) {
  return client ? client->protocol_version : 0;
}

const char *acp_client_agent_capabilities(const acp_client *client,
                                          size_t *len) {
  if (len)
    *len = client ? client->agent_caps_len : 0;
  return client ? client->agent_caps : NULL;
}

/* MARK: - Requests and answers */

const acp_rpc_msg *acp_client_request_msg(const acp_client_request *req) {
  return req ? req->msg : NULL;
}

const acp_json_val *acp_client_request_params(const acp_client_request *req) {
  return req && req->msg ? req->msg->params : NULL;
}

const char *acp_client_request_method(const acp_client_request *req) {
  return req ? req->method_name : NULL;
}

const char *acp_client_request_session_id(const acp_client_request *req) {
  return req ? req->session_id : NULL;
}

int acp_client_request_param_str(const acp_client_request *req, const char *key,
                                 const char **s, size_t *len) {
  return acp__req_param_str(req, key, s, len);
}

int acp_client_request_decode(const acp_client_request *req, acp_arena *arena,
                              const void **out) {
  return acp__req_decode(req, arena, out);
}

int acp_client_update_decode(const acp_client *client,
                             const acp_client_update *update, acp_arena *arena,
                             const void **out) {
  const acp_type_desc *t;
  void *p;
  int rv;

  if (client == NULL || update == NULL || update->update == NULL ||
      arena == NULL || out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  t = client->role.version == ACP_PROTOCOL_V2 ? &acp_type_v2_session_update
                                              : &acp_type_session_update;
  p = acp_arena_alloc(arena, acp_type_size(t));
  if (p == NULL)
    return ACP_ERR_NOMEM;
  rv = acp_decode_named(t, update->update, arena, p, "update", NULL, 0);
  if (rv == 0)
    *out = p;
  return rv;
}

int acp_client_request_is_cancelled(const acp_client_request *req) {
  return req && req->cancelled;
}

int acp_client_respond(acp_client *client, acp_client_request *req,
                       const char *result, size_t result_len) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_respond(&client->role, req, result, result_len);
}

int acp_client_respond_error(acp_client *client, acp_client_request *req,
                             int64_t code, const char *message,
                             const char *data, size_t data_len) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_respond_error(&client->role, req, code, message, data,
                                 data_len);
}

int acp_client_respond_cancelled(acp_client *client, acp_client_request *req) {
  return acp_client_respond_error(client, req, ACP_RPC_REQUEST_CANCELLED, NULL,
                                  NULL, 0);
}

int acp_client_respond_empty(acp_client *client, acp_client_request *req) {
  return acp_client_respond(client, req, "{}", 2);
}

static int respond_w(acp_client *c, acp_client_request *req) {
  const char *out;
  size_t len;
  int rv = acp__role_obj_end(&c->role, &out, &len);

  if (rv != 0)
    return rv;
  return acp__role_respond(&c->role, req, out, len);
}

int acp_client_respond_permission(acp_client *client, acp_client_request *req,
                                  const char *option_id) {
  acp_json_writer *w;

  if (client == NULL || req == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->answered)
    return ACP_ERR_INVALID_STATE;
  w = acp__role_obj_begin(&client->role);
  ACP__W_KEYL(w, "outcome");
  acp_json_write_obj_begin(w);
  if (option_id != NULL) {
    acp__w_str(w, "outcome", "selected");
    acp__w_str(w, "optionId", option_id);
  } else {
    acp__w_str(w, "outcome", "cancelled");
  }
  acp_json_write_obj_end(w);
  return respond_w(client, req);
}

int acp_client_respond_read_text_file(acp_client *client,
                                      acp_client_request *req,
                                      const char *content, size_t content_len) {
  acp_json_writer *w;

  if (client == NULL || req == NULL || (content == NULL && content_len))
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->answered)
    return ACP_ERR_INVALID_STATE;
  w = acp__role_obj_begin(&client->role);
  ACP__W_KEYL(w, "content");
  acp_json_write_str(w, content ? content : "", content_len);
  return respond_w(client, req);
}

int acp_client_respond_terminal_create(acp_client *client,
                                       acp_client_request *req,
                                       const char *terminal_id) {
  acp_json_writer *w;

  if (client == NULL || req == NULL || terminal_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->answered)
    return ACP_ERR_INVALID_STATE;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "terminalId", terminal_id);
  return respond_w(client, req);
}

/* MARK: - Calls to the agent */

static int client_call(acp_client *c, int kind, const char *method,
                       const char *params, size_t len,
                       acp_client_response_cb cb, void *ud, int64_t *id_out) {
  acp__call tmpl;

  memset(&tmpl, 0, sizeof(tmpl));
  tmpl.kind = kind;
  tmpl.cb.client = cb;
  tmpl.cb_user_data = ud;
  return acp__role_call(&c->role, method, params, len, &tmpl, id_out);
}

static int client_call_w(acp_client *c, int kind, const char *method,
                         acp_client_response_cb cb, void *ud, int64_t *id_out) {
  const char *out;
  size_t len;
  int rv = acp__role_obj_end(&c->role, &out, &len);

  if (rv != 0)
    return rv;
  return client_call(c, kind, method, out, len, cb, ud, id_out);
}

int acp_client_call(acp_client *client, const char *method, const char *params,
                    size_t params_len, acp_client_response_cb cb,
                    void *cb_user_data, int64_t *id_out) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return client_call(client, CALL_PLAIN, method, params, params_len, cb,
                     cb_user_data, id_out);
}

int acp_client_notify(acp_client *client, const char *method,
                      const char *params, size_t params_len) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_notify(&client->role, method, params, params_len);
}

int acp_client_set_max_protocol_version(acp_client *client, int version) {
  if (client == NULL ||
      (version != ACP_PROTOCOL_V1 && version != ACP_PROTOCOL_V2))
    return ACP_ERR_INVALID_ARGUMENT;
  client->max_version = version;
  return 0;
}

int acp_client_cancel_call(acp_client *client, int64_t id) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_cancel_call(&client->role, id);
}

int acp_client_initialize(acp_client *client, const char *caps, size_t caps_len,
                          const char *info, size_t info_len,
                          acp_client_response_cb cb, void *cb_user_data,
                          int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  ACP__W_KEYL(w, "protocolVersion");
  if (client->max_version >= ACP_PROTOCOL_V2) {
    /* Ask for 2 with both spellings: a v1 agent answering 1 reads
     * clientCapabilities/clientInfo, a v2 one capabilities/info. */
    acp_json_write_int(w, ACP_PROTOCOL_V2);
    acp__w_raw(w, "clientCapabilities", caps, caps_len, "{}");
    acp__w_raw(w, "capabilities", caps, caps_len, "{}");
    acp__w_raw(w, "clientInfo", info, info_len, NULL);
    if (info != NULL) {
      acp__w_raw(w, "info", info, info_len, NULL);
    } else {
      ACP__W_KEYL(w, "info");
      acp_json_write_obj_begin(w);
      acp__w_str(w, "name", "libacp");
      acp__w_str(w, "version", ACP_VERSION);
      acp_json_write_obj_end(w);
    }
  } else {
    acp_json_write_int(w, CLIENT_PROTOCOL_VERSION);
    acp__w_raw(w, "clientCapabilities", caps, caps_len, "{}");
    acp__w_raw(w, "clientInfo", info, info_len, NULL);
  }
  return client_call_w(client, CALL_INITIALIZE, "initialize", cb, cb_user_data,
                       id_out);
}

/* One-string-param calls: {key: value}. */
static int call_1(acp_client *c, const char *method, const char *key,
                  const char *value, acp_client_response_cb cb, void *ud,
                  int64_t *id_out) {
  acp_json_writer *w;

  if (c == NULL || value == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&c->role);
  acp__w_str(w, key, value);
  return client_call_w(c, CALL_PLAIN, method, cb, ud, id_out);
}

int acp_client_authenticate(acp_client *client, const char *method_id,
                            acp_client_response_cb cb, void *cb_user_data,
                            int64_t *id_out) {
  return call_1(client, "authenticate", "methodId", method_id, cb, cb_user_data,
                id_out);
}

int acp_client_logout(acp_client *client, acp_client_response_cb cb,
                      void *cb_user_data, int64_t *id_out) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return client_call(client, CALL_PLAIN, "logout", "{}", 2, cb, cb_user_data,
                     id_out);
}

int acp_client_session_new(acp_client *client, const char *cwd,
                           const char *mcp_servers, size_t mcp_servers_len,
                           acp_client_response_cb cb, void *cb_user_data,
                           int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL || cwd == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "cwd", cwd);
  acp__w_raw(w, "mcpServers", mcp_servers, mcp_servers_len, "[]");
  return client_call_w(client, CALL_PLAIN, "session/new", cb, cb_user_data,
                       id_out);
}

static int load_or_resume(acp_client *c, const char *method,
                          const char *session_id, const char *cwd,
                          const char *mcp, size_t mcp_len, const char *dflt,
                          acp_client_response_cb cb, void *ud,
                          int64_t *id_out) {
  acp_json_writer *w;

  if (c == NULL || session_id == NULL || cwd == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&c->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "cwd", cwd);
  acp__w_raw(w, "mcpServers", mcp, mcp_len, dflt);
  return client_call_w(c, CALL_PLAIN, method, cb, ud, id_out);
}

int acp_client_session_load(acp_client *client, const char *session_id,
                            const char *cwd, const char *mcp_servers,
                            size_t mcp_servers_len, acp_client_response_cb cb,
                            void *cb_user_data, int64_t *id_out) {
  return load_or_resume(client, "session/load", session_id, cwd, mcp_servers,
                        mcp_servers_len, "[]", cb, cb_user_data, id_out);
}

int acp_client_session_resume(acp_client *client, const char *session_id,
                              const char *cwd, const char *mcp_servers,
                              size_t mcp_servers_len, acp_client_response_cb cb,
                              void *cb_user_data, int64_t *id_out) {
  return load_or_resume(client, "session/resume", session_id, cwd, mcp_servers,
                        mcp_servers_len, NULL, cb, cb_user_data, id_out);
}

int acp_client_session_list(acp_client *client, const char *cwd,
                            const char *cursor, acp_client_response_cb cb,
                            void *cb_user_data, int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  if (cwd != NULL)
    acp__w_str(w, "cwd", cwd);
  if (cursor != NULL)
    acp__w_str(w, "cursor", cursor);
  return client_call_w(client, CALL_PLAIN, "session/list", cb, cb_user_data,
                       id_out);
}

int acp_client_session_delete(acp_client *client, const char *session_id,
                              acp_client_response_cb cb, void *cb_user_data,
                              int64_t *id_out) {
  return call_1(client, "session/delete", "sessionId", session_id, cb,
                cb_user_data, id_out);
}

int acp_client_session_close(acp_client *client, const char *session_id,
                             acp_client_response_cb cb, void *cb_user_data,
                             int64_t *id_out) {
  return call_1(client, "session/close", "sessionId", session_id, cb,
                cb_user_data, id_out);
}

int acp_client_set_mode(acp_client *client, const char *session_id,
                        const char *mode_id, acp_client_response_cb cb,
                        void *cb_user_data, int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || mode_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "modeId", mode_id);
  return client_call_w(client, CALL_PLAIN, "session/set_mode", cb, cb_user_data,
                       id_out);
}

int acp_client_set_config_option(acp_client *client, const char *session_id,
                                 const char *config_id, const char *value,
                                 size_t value_len, acp_client_response_cb cb,
                                 void *cb_user_data, int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || config_id == NULL ||
      value == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "configId", config_id);
  if (client->role.version == ACP_PROTOCOL_V2 && value_len > 0) {
    /* v2 requires the value's type: "id" for a value id, "boolean". */
    acp__w_str(w, "type",
               value[0] == 't' || value[0] == 'f' ? "boolean" : "id");
  }
  acp__w_raw(w, "value", value, value_len, NULL);
  return client_call_w(client, CALL_PLAIN, "session/set_config_option", cb,
                       cb_user_data, id_out);
}

/* MARK: - Providers, NES, documents (unstable) */

int acp_client_providers_list(acp_client *client, acp_client_response_cb cb,
                              void *cb_user_data, int64_t *id_out) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return client_call(client, CALL_PLAIN, "providers/list", "{}", 2, cb,
                     cb_user_data, id_out);
}

int acp_client_providers_set(acp_client *client, const char *provider_id,
                             const char *api_type, const char *base_url,
                             const char *headers, size_t headers_len,
                             acp_client_response_cb cb, void *cb_user_data,
                             int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL || provider_id == NULL || api_type == NULL ||
      base_url == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "providerId", provider_id);
  acp__w_str(w, "apiType", api_type);
  acp__w_str(w, "baseUrl", base_url);
  acp__w_raw(w, "headers", headers, headers_len, NULL);
  return client_call_w(client, CALL_PLAIN, "providers/set", cb, cb_user_data,
                       id_out);
}

int acp_client_providers_disable(acp_client *client, const char *provider_id,
                                 acp_client_response_cb cb, void *cb_user_data,
                                 int64_t *id_out) {
  return call_1(client, "providers/disable", "providerId", provider_id, cb,
                cb_user_data, id_out);
}

int acp_client_nes_start(acp_client *client, const char *workspace_uri,
                         const char *workspace_folders,
                         size_t workspace_folders_len,
                         acp_client_response_cb cb, void *cb_user_data,
                         int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  if (workspace_uri != NULL)
    acp__w_str(w, "workspaceUri", workspace_uri);
  acp__w_raw(w, "workspaceFolders", workspace_folders, workspace_folders_len,
             NULL);
  return client_call_w(client, CALL_PLAIN, "nes/start", cb, cb_user_data,
                       id_out);
}

/* "KEY": {"line": L, "character": C} */
static void w_position(acp_json_writer *w, const char *key, int64_t line,
                       int64_t character) {
  acp_json_write_keyz(w, key);
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "line");
  acp_json_write_int(w, line);
  ACP__W_KEYL(w, "character");
  acp_json_write_int(w, character);
  acp_json_write_obj_end(w);
}

int acp_client_nes_suggest(acp_client *client, const char *session_id,
                           const char *uri, int64_t version, int64_t line,
                           int64_t character, const char *trigger_kind,
                           const char *context, size_t context_len,
                           acp_client_response_cb cb, void *cb_user_data,
                           int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || uri == NULL ||
      trigger_kind == NULL || line < 0 || character < 0)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "uri", uri);
  ACP__W_KEYL(w, "version");
  acp_json_write_int(w, version);
  w_position(w, "position", line, character);
  acp__w_str(w, "triggerKind", trigger_kind);
  acp__w_raw(w, "context", context, context_len, NULL);
  return client_call_w(client, CALL_PLAIN, "nes/suggest", cb, cb_user_data,
                       id_out);
}

int acp_client_nes_close(acp_client *client, const char *session_id,
                         acp_client_response_cb cb, void *cb_user_data,
                         int64_t *id_out) {
  return call_1(client, "nes/close", "sessionId", session_id, cb, cb_user_data,
                id_out);
}

/* {sessionId, uri?}: the start of every nes/ and document/ notification. */
static acp_json_writer *doc_begin(acp_client *c, const char *session_id,
                                  const char *uri) {
  acp_json_writer *w = acp__role_obj_begin(&c->role);

  acp__w_str(w, "sessionId", session_id);
  if (uri != NULL)
    acp__w_str(w, "uri", uri);
  return w;
}

int acp_client_nes_accept(acp_client *client, const char *session_id,
                          const char *suggestion_id) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || suggestion_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = doc_begin(client, session_id, NULL);
  acp__w_str(w, "id", suggestion_id);
  return acp__role_notify_obj(&client->role, "nes/accept");
}

int acp_client_nes_reject(acp_client *client, const char *session_id,
                          const char *suggestion_id, const char *reason) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || suggestion_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = doc_begin(client, session_id, NULL);
  acp__w_str(w, "id", suggestion_id);
  if (reason != NULL)
    acp__w_str(w, "reason", reason);
  return acp__role_notify_obj(&client->role, "nes/reject");
}

int acp_client_document_did_open(acp_client *client, const char *session_id,
                                 const char *uri, const char *language_id,
                                 int64_t version, const char *text,
                                 size_t text_len) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || uri == NULL ||
      language_id == NULL || (text == NULL && text_len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  w = doc_begin(client, session_id, uri);
  acp__w_str(w, "languageId", language_id);
  ACP__W_KEYL(w, "version");
  acp_json_write_int(w, version);
  ACP__W_KEYL(w, "text");
  acp_json_write_str(w, text != NULL ? text : "", text_len);
  return acp__role_notify_obj(&client->role, "document/didOpen");
}

int acp_client_document_did_change(acp_client *client, const char *session_id,
                                   const char *uri, int64_t version,
                                   const char *content_changes,
                                   size_t content_changes_len) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || uri == NULL ||
      content_changes == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = doc_begin(client, session_id, uri);
  ACP__W_KEYL(w, "version");
  acp_json_write_int(w, version);
  acp__w_raw(w, "contentChanges", content_changes, content_changes_len, NULL);
  return acp__role_notify_obj(&client->role, "document/didChange");
}

static int doc_uri_only(acp_client *c, const char *method,
                        const char *session_id, const char *uri) {
  if (c == NULL || session_id == NULL || uri == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  doc_begin(c, session_id, uri);
  return acp__role_notify_obj(&c->role, method);
}

int acp_client_document_did_close(acp_client *client, const char *session_id,
                                  const char *uri) {
  return doc_uri_only(client, "document/didClose", session_id, uri);
}

int acp_client_document_did_save(acp_client *client, const char *session_id,
                                 const char *uri) {
  return doc_uri_only(client, "document/didSave", session_id, uri);
}

int acp_client_document_did_focus(acp_client *client, const char *session_id,
                                  const char *uri, int64_t version,
                                  int64_t line, int64_t character,
                                  const char *visible_range,
                                  size_t visible_range_len) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || uri == NULL ||
      visible_range == NULL || line < 0 || character < 0)
    return ACP_ERR_INVALID_ARGUMENT;
  w = doc_begin(client, session_id, uri);
  ACP__W_KEYL(w, "version");
  acp_json_write_int(w, version);
  w_position(w, "position", line, character);
  acp__w_raw(w, "visibleRange", visible_range, visible_range_len, NULL);
  return acp__role_notify_obj(&client->role, "document/didFocus");
}

/* MARK: - v2 calls */

int acp_client_auth_login(acp_client *client, const char *method_id,
                          acp_client_response_cb cb, void *cb_user_data,
                          int64_t *id_out) {
  return call_1(client, "auth/login", "methodId", method_id, cb, cb_user_data,
                id_out);
}

int acp_client_auth_logout(acp_client *client, acp_client_response_cb cb,
                           void *cb_user_data, int64_t *id_out) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return client_call(client, CALL_PLAIN, "auth/logout", "{}", 2, cb,
                     cb_user_data, id_out);
}

/* {sessionId, KEY: id}: tool_call/cancel and terminal/cancel. */
static int call_2(acp_client *c, const char *method, const char *session_id,
                  const char *key, const char *value, acp_client_response_cb cb,
                  void *ud, int64_t *id_out) {
  acp_json_writer *w;

  if (c == NULL || session_id == NULL || value == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&c->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, key, value);
  return client_call_w(c, CALL_PLAIN, method, cb, ud, id_out);
}

int acp_client_tool_call_cancel(acp_client *client, const char *session_id,
                                const char *tool_call_id,
                                acp_client_response_cb cb, void *cb_user_data,
                                int64_t *id_out) {
  return call_2(client, "tool_call/cancel", session_id, "toolCallId",
                tool_call_id, cb, cb_user_data, id_out);
}

int acp_client_terminal_cancel(acp_client *client, const char *session_id,
                               const char *terminal_id,
                               acp_client_response_cb cb, void *cb_user_data,
                               int64_t *id_out) {
  return call_2(client, "terminal/cancel", session_id, "terminalId",
                terminal_id, cb, cb_user_data, id_out);
}

int acp_client_session_resume_replay(acp_client *client, const char *session_id,
                                     const char *cwd, const char *mcp_servers,
                                     size_t mcp_servers_len,
                                     const char *replay_from,
                                     size_t replay_from_len,
                                     acp_client_response_cb cb,
                                     void *cb_user_data, int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || cwd == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "cwd", cwd);
  acp__w_raw(w, "mcpServers", mcp_servers, mcp_servers_len, NULL);
  acp__w_raw(w, "replayFrom", replay_from, replay_from_len, NULL);
  return client_call_w(client, CALL_PLAIN, "session/resume", cb, cb_user_data,
                       id_out);
}

static int prompt_text(acp_client *client, const char *session_id,
                       const char *text, size_t text_len, bool ref,
                       acp_client_response_cb cb, void *cb_user_data,
                       int64_t *id_out) {
  acp__call tmpl;
  /* Written straight into the session's output: a large prompt is copied
   * once, not into a params writer first; a lent one (ref) not at all when
   * it needs no escaping and the runtime writes pieces. */
  acp__rpc_part parts[] = {
      ACP__PART_LIT("{\"sessionId\":"),
      ACP__PART_STR(session_id, session_id ? strlen(session_id) : 0),
      ACP__PART_LIT(",\"prompt\":[{\"type\":\"text\",\"text\":"),
      ACP__PART_STR(text ? text : "", text_len),
      ACP__PART_LIT("}]}"),
  };

  if (client == NULL || session_id == NULL || (text == NULL && text_len))
    return ACP_ERR_INVALID_ARGUMENT;
  parts[3].ref = ref;
  memset(&tmpl, 0, sizeof(tmpl));
  tmpl.kind = CALL_PLAIN;
  tmpl.cb.client = cb;
  tmpl.cb_user_data = cb_user_data;
  return acp__role_call_parts_n(
      &client->role, ACP__ROLE_METHOD_LIT("session/prompt"), parts,
      sizeof(parts) / sizeof(parts[0]), &tmpl, id_out);
}

int acp_client_prompt_text(acp_client *client, const char *session_id,
                           const char *text, size_t text_len,
                           acp_client_response_cb cb, void *cb_user_data,
                           int64_t *id_out) {
  return prompt_text(client, session_id, text, text_len, false, cb,
                     cb_user_data, id_out);
}

int acp_client_prompt_text_ref(acp_client *client, const char *session_id,
                               const char *text, size_t text_len,
                               acp_client_response_cb cb, void *cb_user_data,
                               int64_t *id_out) {
  /* Without a callback the caller could not know when the text is free. */
  if (cb == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return prompt_text(client, session_id, text, text_len, true, cb, cb_user_data,
                     id_out);
}

int acp_client_prompt(acp_client *client, const char *session_id,
                      const char *blocks, size_t blocks_len,
                      acp_client_response_cb cb, void *cb_user_data,
                      int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || blocks == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_raw(w, "prompt", blocks, blocks_len, NULL);
  return client_call_w(client, CALL_PLAIN, "session/prompt", cb, cb_user_data,
                       id_out);
}

int acp_client_cancel(acp_client *client, const char *session_id) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "sessionId", session_id);
  return acp__role_notify_obj(&client->role, "session/cancel");
}

int acp_client_session_fork(acp_client *client, const char *session_id,
                            const char *cwd, const char *mcp_servers,
                            size_t mcp_servers_len, acp_client_response_cb cb,
                            void *cb_user_data, int64_t *id_out) {
  return load_or_resume(client, "session/fork", session_id, cwd, mcp_servers,
                        mcp_servers_len, NULL, cb, cb_user_data, id_out);
}

int acp_client_session_set_title(acp_client *client, const char *session_id,
                                 const char *title, acp_client_response_cb cb,
                                 void *cb_user_data, int64_t *id_out) {
  acp_json_writer *w;

  if (client == NULL || session_id == NULL || title == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(&client->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "title", title);
  return client_call_w(client, CALL_PLAIN, "session/set_title", cb,
                       cb_user_data, id_out);
}

int acp_client_session_archive(acp_client *client, const char *session_id,
                               acp_client_response_cb cb, void *cb_user_data,
                               int64_t *id_out) {
  return call_1(client, "session/archive", "sessionId", session_id, cb,
                cb_user_data, id_out);
}

int acp_client_session_unarchive(acp_client *client, const char *session_id,
                                 acp_client_response_cb cb, void *cb_user_data,
                                 int64_t *id_out) {
  return call_1(client, "session/unarchive", "sessionId", session_id, cb,
                cb_user_data, id_out);
}

int acp_client_session_status(acp_client *client, const char *session_id,
                              acp_client_response_cb cb, void *cb_user_data,
                              int64_t *id_out) {
  return call_1(client, "session/status", "sessionId", session_id, cb,
                cb_user_data, id_out);
}

int acp_client_auth_status(acp_client *client, acp_client_response_cb cb,
                           void *cb_user_data, int64_t *id_out) {
  if (client == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return client_call(client, CALL_PLAIN, "auth/status", "{}", 2, cb,
                     cb_user_data, id_out);
}
