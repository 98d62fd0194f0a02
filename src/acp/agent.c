/*
 * The ACP agent role: dispatch of agent-side methods to typed handlers,
 * initialize negotiation, prompt-turn tracking and the client-call and
 * session/update helpers.
 */
#include <stdio.h>

#include "json/json_int.h"
#include "role_int.h"

#include "acp/version.h"

/* The version answered unless the application opts in to the v2 draft
 * (acp_agent_set_max_protocol_version()). */
#define AGENT_PROTOCOL_VERSION 1

struct acp_agent_callbacks {
  acp_agent_request_cb req[ACP_METHOD__COUNT];
  acp_agent_notification_cb notif[ACP_METHOD__COUNT];
  acp_agent_session_cancel_cb session_cancel;
  acp_agent_cancel_request_cb cancel_request;
  acp_agent_request_cb ext_request;
  acp_agent_notification_cb ext_notification;
  acp_agent_update_sent_cb update_sent;
};

/* Prompt-turn state of one ACP session. */
typedef struct agent_sess {
  struct agent_sess *next, *prev; /* a->sessions */
  struct agent_sess *hnext;       /* a->by_id's bucket */
  char *id;
  size_t id_len;
  acp__req *prompt;    /* pending session/prompt or NULL */
  bool cancelled;      /* the pending (or last) turn was cancelled */
  bool blocked;        /* a cancelled turn was answered: no updates */
  char reply_id[32];   /* v2: messageId of the agent's reply in this turn */
  char thought_id[32]; /* v2: messageId of its thoughts in this turn */
} agent_sess;

struct acp_agent {
  acp__role role;
  acp_agent_callbacks cbs;
  void *user_data;
  agent_sess *sessions;
  /* Past SESS_INDEX_MIN sessions tracked, also by id (chained through
   * hnext; by_id_cap buckets, a power of two, at least twice nsess). */
  agent_sess **by_id;
  size_t by_id_cap, nsess;
  uint64_t sess_seed; /* ids a client picks to collide do not here */
  char *client_caps;  /* clientCapabilities of initialize (raw), or NULL */
  size_t client_caps_len;
  bool initialized;
  int max_version;  /* highest version the application speaks (1 or 2) */
  int version;      /* negotiated by the last answered initialize, else 0 */
  uint64_t msg_seq; /* v2: message ids the library assigns */
  size_t update_at; /* update_begin: where the update starts */
  const char *update_session; /* update_begin: its session id */
  acp__req *accepting; /* v2: the prompt whose handler runs, not accepted */
};

/*
 * The version an initialize request gets: 2 when the application opted in
 * and the client asked for 2 or more, else 1 (the spec: answer the asked
 * version if supported, else the latest supported one).
 */
static int negotiated_version(const acp_agent *a, const acp__req *req) {
  if (a->max_version >= ACP_PROTOCOL_V2 &&
      req->protocol_version >= ACP_PROTOCOL_V2)
    return ACP_PROTOCOL_V2;
  return AGENT_PROTOCOL_VERSION;
}

static int v2_accept_prompt(acp_agent *a, agent_sess *s, acp__req *req);
static int accept_now(acp_agent *a);
static acp_json_writer *update_begin(acp_agent *a, const char *session_id,
                                     const char *kind);
static int update_end(acp_agent *a, const char *extra, size_t extra_len);

/* MARK: - Callbacks */

int acp_agent_callbacks_new(acp_agent_callbacks **out) {
  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = acp__calloc(acp_mem_default(), 1, sizeof(**out));
  return *out ? 0 : ACP_ERR_NOMEM;
}

void acp_agent_callbacks_free(acp_agent_callbacks *cbs) {
  acp__free(acp_mem_default(), cbs);
}

#define REQ_SETTER(fn, id)                                                     \
  void acp_agent_callbacks_set_on_##fn(acp_agent_callbacks *cbs,               \
                                       acp_agent_request_cb cb) {              \
    if (cbs)                                                                   \
      cbs->req[id] = cb;                                                       \
  }
#define NOTIF_SETTER(fn, id)                                                   \
  void acp_agent_callbacks_set_on_##fn(acp_agent_callbacks *cbs,               \
                                       acp_agent_notification_cb cb) {         \
    if (cbs)                                                                   \
      cbs->notif[id] = cb;                                                     \
  }

REQ_SETTER(initialize, ACP_METHOD_INITIALIZE)
REQ_SETTER(authenticate, ACP_METHOD_AUTHENTICATE)
REQ_SETTER(logout, ACP_METHOD_LOGOUT)
REQ_SETTER(session_new, ACP_METHOD_SESSION_NEW)
REQ_SETTER(session_load, ACP_METHOD_SESSION_LOAD)
REQ_SETTER(session_resume, ACP_METHOD_SESSION_RESUME)
REQ_SETTER(session_list, ACP_METHOD_SESSION_LIST)
REQ_SETTER(session_delete, ACP_METHOD_SESSION_DELETE)
REQ_SETTER(session_close, ACP_METHOD_SESSION_CLOSE)
REQ_SETTER(session_set_mode, ACP_METHOD_SESSION_SET_MODE)
REQ_SETTER(session_set_config_option, ACP_METHOD_SESSION_SET_CONFIG_OPTION)
REQ_SETTER(session_prompt, ACP_METHOD_SESSION_PROMPT)
REQ_SETTER(session_fork, ACP_METHOD_SESSION_FORK)
REQ_SETTER(providers_list, ACP_METHOD_PROVIDERS_LIST)
REQ_SETTER(providers_set, ACP_METHOD_PROVIDERS_SET)
REQ_SETTER(providers_disable, ACP_METHOD_PROVIDERS_DISABLE)
REQ_SETTER(nes_start, ACP_METHOD_NES_START)
REQ_SETTER(nes_suggest, ACP_METHOD_NES_SUGGEST)
REQ_SETTER(nes_close, ACP_METHOD_NES_CLOSE)
REQ_SETTER(mcp_message, ACP_METHOD_MCP_MESSAGE)
REQ_SETTER(session_set_title, ACP_METHOD_SESSION_SET_TITLE)
REQ_SETTER(session_archive, ACP_METHOD_SESSION_ARCHIVE)
REQ_SETTER(session_unarchive, ACP_METHOD_SESSION_UNARCHIVE)
REQ_SETTER(session_status, ACP_METHOD_SESSION_STATUS)
REQ_SETTER(auth_status, ACP_METHOD_AUTH_STATUS)
REQ_SETTER(auth_login, ACP_METHOD_AUTH_LOGIN)
REQ_SETTER(auth_logout, ACP_METHOD_AUTH_LOGOUT)
REQ_SETTER(tool_call_cancel, ACP_METHOD_TOOL_CALL_CANCEL)
REQ_SETTER(terminal_cancel, ACP_METHOD_TERMINAL_CANCEL)
NOTIF_SETTER(nes_accept, ACP_METHOD_NES_ACCEPT)
NOTIF_SETTER(nes_reject, ACP_METHOD_NES_REJECT)
NOTIF_SETTER(document_did_open, ACP_METHOD_DOCUMENT_DID_OPEN)
NOTIF_SETTER(document_did_change, ACP_METHOD_DOCUMENT_DID_CHANGE)
NOTIF_SETTER(document_did_close, ACP_METHOD_DOCUMENT_DID_CLOSE)
NOTIF_SETTER(document_did_save, ACP_METHOD_DOCUMENT_DID_SAVE)
NOTIF_SETTER(document_did_focus, ACP_METHOD_DOCUMENT_DID_FOCUS)
NOTIF_SETTER(mcp_message_notification, ACP_METHOD_MCP_MESSAGE)

void acp_agent_callbacks_set_on_session_cancel(acp_agent_callbacks *cbs,
                                               acp_agent_session_cancel_cb cb) {
  if (cbs)
    cbs->session_cancel = cb;
}

void acp_agent_callbacks_set_on_cancel_request(acp_agent_callbacks *cbs,
                                               acp_agent_cancel_request_cb cb) {
  if (cbs)
    cbs->cancel_request = cb;
}

void acp_agent_callbacks_set_on_update_sent(acp_agent_callbacks *cbs,
                                            acp_agent_update_sent_cb cb) {
  if (cbs)
    cbs->update_sent = cb;
}

void acp_agent_callbacks_set_on_ext_request(acp_agent_callbacks *cbs,
                                            acp_agent_request_cb cb) {
  if (cbs)
    cbs->ext_request = cb;
}

void acp_agent_callbacks_set_on_ext_notification(acp_agent_callbacks *cbs,
                                                 acp_agent_notification_cb cb) {
  if (cbs)
    cbs->ext_notification = cb;
}

/* MARK: - Prompt-turn tracking */

/*
 * Sessions are found on every prompt, answer and v2 update. A search of
 * the list made an agent serving many sessions (a session tracked per
 * session prompted, until closed) pay for all of them on each message:
 * 20,000 sessions prompted once each took 0.72 s, growing as the square.
 * Past SESS_INDEX_MIN the sessions are also hashed by id; below it the
 * list costs less than hashing the id (the one-session prompt turn).
 */
#define SESS_INDEX_MIN 16

static size_t sess_bucket(const acp_agent *a, const char *id, size_t len) {
  return (size_t)acp__fnv1a(a->sess_seed, id, len) & (a->by_id_cap - 1);
}

__attribute__((noinline)) static agent_sess *
sess_find_hashed(acp_agent *a, const char *id, size_t len) {
  agent_sess *s;

  for (s = a->by_id[sess_bucket(a, id, len)]; s != NULL; s = s->hnext)
    if (s->id_len == len && memcmp(s->id, id, len) == 0)
      return s;
  return NULL;
}

static inline agent_sess *sess_find(acp_agent *a, const char *id, size_t len) {
  agent_sess *s;

  if (a->by_id != NULL)
    return sess_find_hashed(a, id, len);
  for (s = a->sessions; s != NULL; s = s->next)
    if (s->id_len == len && memcmp(s->id, id, len) == 0)
      return s;
  return NULL;
}

/* (Re)hash every session into a table for nsess; out of memory there is
 * no index (the list still finds them, slower). */
static void sess_index(acp_agent *a) {
  size_t cap = 64;
  agent_sess **t;

  while (cap < a->nsess * 2)
    cap *= 2;
  t = acp__calloc(&a->role.mem, cap, sizeof(*t));
  acp__free(&a->role.mem, a->by_id);
  a->by_id = t;
  a->by_id_cap = t ? cap : 0;
  for (agent_sess *s = t ? a->sessions : NULL; s != NULL; s = s->next) {
    size_t b = sess_bucket(a, s->id, s->id_len);
    s->hnext = t[b];
    t[b] = s;
  }
}

static agent_sess *sess_get(acp_agent *a, const char *id, size_t len) {
  agent_sess *s = sess_find(a, id, len);

  if (s != NULL)
    return s;
  s = acp__calloc(&a->role.mem, 1, sizeof(*s));
  if (s == NULL)
    return NULL;
  s->id = acp__malloc(&a->role.mem, len + 1);
  if (s->id == NULL) {
    acp__free(&a->role.mem, s);
    return NULL;
  }
  memcpy(s->id, id, len);
  s->id[len] = '\0';
  s->id_len = len;
  s->next = a->sessions;
  if (a->sessions != NULL)
    a->sessions->prev = s;
  a->sessions = s;
  a->nsess++;
  if (a->by_id != NULL && a->nsess * 2 <= a->by_id_cap) {
    size_t b = sess_bucket(a, id, len);
    s->hnext = a->by_id[b];
    a->by_id[b] = s;
  } else if (a->by_id != NULL || a->nsess > SESS_INDEX_MIN) {
    sess_index(a); /* s included */
  }
  return s;
}

static void sess_remove(acp_agent *a, agent_sess *target) {
  *(target->prev ? &target->prev->next : &a->sessions) = target->next;
  if (target->next != NULL)
    target->next->prev = target->prev;
  if (a->by_id != NULL) {
    agent_sess **pp = &a->by_id[sess_bucket(a, target->id, target->id_len)];
    for (; *pp != NULL; pp = &(*pp)->hnext)
      if (*pp == target) {
        *pp = target->hnext;
        break;
      }
  }
  a->nsess--;
  acp__free(&a->role.mem, target->id);
  acp__free(&a->role.mem, target);
}

static void agent_on_answered(acp__role *r, acp__req *req, bool is_error) {
  acp_agent *a = r->owner;
  agent_sess *s;

  if (req->method == ACP_METHOD_INITIALIZE && !is_error) {
    a->initialized = true;
    /* From now on incoming messages are checked and dispatched with the
     * negotiated version's table. */
    a->version = negotiated_version(a, req);
    r->version = a->version;
    return;
  }
  if (req->session_id == NULL)
    return;
  s = sess_find(a, req->session_id, req->session_id_len);
  if (s == NULL)
    return;
  switch (req->method) {
  case ACP_METHOD_SESSION_PROMPT:
    if (s->prompt == req) {
      s->prompt = NULL;
      s->blocked = s->cancelled || req->cancelled;
      /* A refused prompt (often for a session the application does not
       * know) leaves nothing to track: without this, every such prompt
       * with a new id would keep an entry for the connection's life. */
      if (is_error && !s->blocked && s->reply_id[0] == '\0')
        sess_remove(a, s);
    }
    break;
  case ACP_METHOD_SESSION_CLOSE:
  case ACP_METHOD_SESSION_DELETE:
    if (!is_error && s->prompt == NULL)
      sess_remove(a, s);
    break;
  default:
    break;
  }
}

/* MARK: - Dispatch */

static int respond_default_initialize(acp_agent *a, acp__req *req) {
  return acp_agent_respond_initialize(a, req, NULL, 0, NULL, 0, NULL, 0);
}

static int agent_on_request(acp__role *r, acp__req *req,
                            const acp_method_info *mi) {
  acp_agent *a = r->owner;
  acp_agent_request_cb cb = NULL;
  bool accept = false;
  int rv;

  if (mi != NULL)
    cb = a->cbs.req[mi->id];
  switch (req->method) {
  case ACP_METHOD_INITIALIZE: {
    int64_t v = -1;

    acp_json_get_int64(ACP__OBJ_GETL(req->msg->params, "protocolVersion"), &v);
    if (v < 0 || v > 65535)
      return acp__role_respond_error(
          r, req, ACP_RPC_INVALID_PARAMS,
          "Invalid params: /protocolVersion: expected an integer in [0, "
          "65535]",
          "{\"path\":\"/protocolVersion\"}", 27);
    req->protocol_version = v;
    {
      /* Kept so that what the agent offers can follow what the client
       * said it handles (acp_agent_client_supports()). */
      size_t n = 0;
      const char *caps = acp_json_raw(
          ACP__OBJ_GETL(req->msg->params, "clientCapabilities"), &n);

      acp__free(&r->mem, a->client_caps);
      a->client_caps = NULL;
      a->client_caps_len = 0;
      if (caps != NULL) {
        a->client_caps = acp__strndup(&r->mem, caps, n);
        if (a->client_caps == NULL)
          return ACP_ERR_NOMEM;
        a->client_caps_len = n;
      }
    }
    if (cb == NULL)
      return respond_default_initialize(a, req);
    break;
  }
  case ACP_METHOD_SESSION_PROMPT: {
    agent_sess *s = sess_get(a, req->session_id, req->session_id_len);

    if (s == NULL)
      return ACP_ERR_NOMEM;
    if (s->prompt != NULL)
      return acp__role_respond_error(
          r, req, ACP_RPC_INVALID_REQUEST,
          "Invalid request: a prompt turn is already running in this session",
          NULL, 0);
    s->prompt = req;
    s->cancelled = false;
    s->blocked = false;
    /* v2: accepted once the handler takes it (accept_now()), so that a
     * handler refusing it (an unknown session, one already busy) answers
     * with an error rather than a turn that ends at once with "error". */
    accept = r->version == ACP_PROTOCOL_V2;
    break;
  }
  case ACP_METHOD_SESSION_LOAD:
  case ACP_METHOD_SESSION_RESUME: {
    agent_sess *s = sess_find(a, req->session_id, req->session_id_len);

    if (s != NULL)
      s->blocked = false;
    break;
  }
  default:
    break;
  }
  if (cb == NULL)
    cb = a->cbs.ext_request;
  if (cb == NULL)
    return acp__role_respond_error(r, req, ACP_RPC_METHOD_NOT_FOUND,
                                   "Method not found", NULL, 0);
  if (accept)
    a->accepting = req;
  rv = cb(a, req, a->user_data);
  if (a->accepting == req) {
    /* The handler keeps the turn for later (it neither refused it nor sent
     * anything yet): accept it now. */
    if (rv == 0 || rv == ACP_ERR_PAUSE) {
      int arv = accept_now(a);
      if (arv != 0)
        return arv;
    }
    a->accepting = NULL;
  }
  if (rv != 0 && rv != ACP_ERR_PAUSE)
    return ACP_ERR_CALLBACK_FAILURE;
  return rv;
}

/*
 * v2: accept the prompt whose handler is running, if it still waits: called
 * before anything the handler sends (updates, calls, other answers), so that
 * the acceptance comes first, and when the handler returns without having
 * refused it. 0 or the error of sending the acceptance.
 */
static int accept_now(acp_agent *a) {
  acp__req *req = a->accepting;
  agent_sess *s;

  if (req == NULL)
    return 0;
  a->accepting = NULL;
  if (req->answered || req->accepted)
    return 0;
  s = sess_find(a, req->session_id, req->session_id_len);
  if (s == NULL || s->prompt != req)
    return 0;
  return v2_accept_prompt(a, s, req);
}

/* accept_now() where nothing waits costs one test on the send paths. */
#define ACCEPT_FIRST(a)                                                        \
  do {                                                                         \
    if ((a)->accepting != NULL) {                                              \
      int arv_ = accept_now(a);                                                \
      if (arv_ != 0)                                                           \
        return arv_;                                                           \
    }                                                                          \
  } while (0)

/* session/update {state_update: state, stopReason}. */
static int v2_state(acp_agent *a, const char *session_id, const char *state,
                    const char *stop_reason) {
  acp_json_writer *w = acp__role_obj_begin(&a->role);

  acp__w_str(w, "sessionId", session_id);
  ACP__W_KEYL(w, "update");
  acp_json_write_obj_begin(w);
  acp__w_str(w, "sessionUpdate", "state_update");
  acp__w_str(w, "state", state);
  if (stop_reason != NULL)
    acp__w_str(w, "stopReason", stop_reason);
  acp_json_write_obj_end(w);
  return acp__role_notify_obj(&a->role, "session/update");
}

/*
 * ACP v2 prompt lifecycle on top of the v1-shaped handler API: the library
 * accepts the prompt (response {messageId}) and reports the inserted user
 * message and `state_update` running once the handler took it (accept_now());
 * acp_agent_respond_prompt() ends the turn with an idle `state_update`
 * carrying the stop reason instead of a response. Chunks sent in the turn
 * carry the turn's reply messageId. So one application serves v1 and v2
 * clients alike.
 */
static int v2_accept_prompt(acp_agent *a, agent_sess *s, acp__req *req) {
  acp__role *r = &a->role;
  acp_json_writer *w;
  char user_id[32];
  size_t n = 0;
  const char *prompt =
      acp_json_raw(ACP__OBJ_GETL(req->msg->params, "prompt"), &n);
  const char *out;
  size_t len;
  int rv;

  snprintf(user_id, sizeof(user_id), "msg_%llu",
           (unsigned long long)++a->msg_seq);
  snprintf(s->reply_id, sizeof(s->reply_id), "msg_%llu",
           (unsigned long long)++a->msg_seq);
  snprintf(s->thought_id, sizeof(s->thought_id), "msg_%llu",
           (unsigned long long)++a->msg_seq);
  w = acp__role_obj_begin(r);
  acp__w_str(w, "messageId", user_id);
  rv = acp__role_obj_end(r, &out, &len);
  if (rv == 0)
    rv = acp__role_respond_early(r, req, out, len);
  if (rv != 0)
    return rv;
  req->accepted = true;
  /* Through update_end, so that on_update_sent sees the inserted message
   * (an application keeping history replays it with its id). */
  w = update_begin(a, s->id, "user_message");
  acp__w_str(w, "messageId", user_id);
  acp__w_raw(w, "content", prompt, n, "[]");
  rv = update_end(a, NULL, 0);
  if (rv == 0)
    rv = v2_state(a, s->id, "running", NULL);
  return rv;
}

/* End an accepted v2 turn: idle with the stop reason; no response. */
static int v2_end_turn(acp_agent *a, acp__req *req, const char *stop_reason,
                       bool is_error) {
  int rv = v2_state(a, req->session_id, "idle", stop_reason);

  acp__role_finish(&a->role, req, is_error);
  return rv;
}

static int agent_on_session_cancel(acp_agent *a, const acp_rpc_msg *msg) {
  const acp_json_val *v = ACP__OBJ_GETL(msg->params, "sessionId");
  const char *id;
  size_t len;
  agent_sess *s;
  acp__req *prompt = NULL;
  int rv;

  rv = acp_json_doc_str(msg->doc, v, &id, &len);
  if (rv != 0)
    return rv;
  s = sess_find(a, id, len);
  if (s != NULL && s->prompt != NULL) {
    prompt = s->prompt;
    prompt->cancelled = true;
    s->cancelled = true;
  }
  if (a->cbs.session_cancel == NULL)
    return 0;
  return a->cbs.session_cancel(a, id, len, prompt, msg, a->user_data);
}

static int agent_on_notification(acp__role *r, const acp_rpc_msg *msg,
                                 const acp_method_info *mi) {
  acp_agent *a = r->owner;
  acp_agent_notification_cb cb = NULL;
  int rv;

  if (mi != NULL && mi->id == ACP_METHOD_SESSION_CANCEL)
    rv = agent_on_session_cancel(a, msg);
  else {
    if (mi != NULL)
      cb = a->cbs.notif[mi->id];
    if (cb == NULL)
      cb = a->cbs.ext_notification;
    if (cb == NULL)
      return 0;
    rv = cb(a, msg, a->user_data);
  }
  if (rv != 0 && rv != ACP_ERR_PAUSE)
    return ACP_ERR_CALLBACK_FAILURE;
  return rv;
}

static int agent_on_cancel(acp__role *r, acp__req *req) {
  acp_agent *a = r->owner;
  int rv;

  if (req->method == ACP_METHOD_SESSION_PROMPT && req->session_id) {
    agent_sess *s = sess_find(a, req->session_id, req->session_id_len);

    if (s != NULL && s->prompt == req)
      s->cancelled = true;
  }
  if (a->cbs.cancel_request == NULL)
    return 0;
  rv = a->cbs.cancel_request(a, req, a->user_data);
  if (rv != 0 && rv != ACP_ERR_PAUSE)
    return ACP_ERR_CALLBACK_FAILURE;
  return rv;
}

static int agent_on_response(acp__role *r, acp__call *c,
                             const acp_rpc_msg *msg) {
  acp_agent *a = r->owner;
  int rv;

  if (c->cb.agent == NULL)
    return 0;
  rv = c->cb.agent(a, msg, c->cb_user_data);
  if (rv != 0 && rv != ACP_ERR_PAUSE)
    return ACP_ERR_CALLBACK_FAILURE;
  return rv;
}

static const acp__role_ops agent_ops = {
    .on_request = agent_on_request,
    .on_notification = agent_on_notification,
    .on_cancel = agent_on_cancel,
    .on_response = agent_on_response,
    .on_answered = agent_on_answered,
};

/* MARK: - Lifecycle */

int acp_agent_new(acp_agent **out, const acp_agent_callbacks *cbs,
                  void *user_data, const acp_rpc_options *opts,
                  const acp_mem *mem) {
  acp_agent *a;
  acp_mem m;
  int rv;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  a = acp__calloc(&m, 1, sizeof(*a));
  if (a == NULL)
    return ACP_ERR_NOMEM;
  rv = acp__role_init(&a->role, ACP_SIDE_AGENT, &agent_ops, a, opts, &m);
  if (rv != 0) {
    acp__free(&m, a);
    return rv;
  }
  if (cbs != NULL)
    a->cbs = *cbs;
  a->user_data = user_data;
  a->sess_seed = acp__fnv1a(ACP__FNV_SEED, &a, sizeof(a)); /* ASLR moves it */
  *out = a;
  return 0;
}

void acp_agent_free(acp_agent *agent) {
  acp_mem m;

  if (agent == NULL)
    return;
  m = agent->role.mem;
  while (agent->sessions != NULL)
    sess_remove(agent, agent->sessions);
  acp__free(&m, agent->by_id);
  acp__free(&m, agent->client_caps);
  acp__role_dispose(&agent->role);
  acp__free(&m, agent);
}

const char *acp_agent_client_capabilities(const acp_agent *agent, size_t *len) {
  if (len != NULL)
    *len = agent != NULL ? agent->client_caps_len : 0;
  return agent != NULL ? agent->client_caps : NULL;
}

int acp_agent_client_supports(acp_agent *agent, const char *path) {
  const acp_json_val *v;
  const char *p = path;
  bool b;

  if (agent == NULL || path == NULL || agent->client_caps == NULL)
    return 0;
  if (acp_json_doc_parse(agent->role.doc, agent->client_caps,
                         agent->client_caps_len, NULL) != 0)
    return 0;
  v = acp_json_doc_root(agent->role.doc);
  while (v != NULL) {
    const char *dot = strchr(p, '.');
    size_t n = dot != NULL ? (size_t)(dot - p) : strlen(p);

    if (acp_json_type_of(v) != ACP_JSON_OBJECT)
      return 0;
    v = acp_json_obj_get(v, p, n);
    if (dot == NULL)
      break;
    p = dot + 1;
  }
  if (v == NULL || acp_json_type_of(v) == ACP_JSON_NULL)
    return 0;
  return acp_json_get_bool(v, &b) == 0 ? b : 1;
}

void *acp_agent_get_user_data(const acp_agent *agent) {
  return agent ? agent->user_data : NULL;
}

acp_rpc_session *acp_agent_session(acp_agent *agent) {
  return agent ? agent->role.rpc : NULL;
}

acp_ssize acp_agent_recv(acp_agent *agent, const char *data, size_t len,
                         uint64_t now_ms) {
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_recv(&agent->role, data, len, now_ms);
}

acp_ssize acp_agent_send(acp_agent *agent, const char **data) {
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp_rpc_session_send(agent->role.rpc, data);
}

int acp_agent_recv_eof(acp_agent *agent, uint64_t now_ms) {
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  agent->role.now_ms = now_ms;
  return acp_rpc_session_recv_eof(agent->role.rpc, now_ms);
}

int acp_agent_drop_calls(acp_agent *agent) {
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp_rpc_session_drop_pending(agent->role.rpc);
}

int acp_agent_handle_expiry(acp_agent *agent, uint64_t now_ms) {
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_handle_expiry(&agent->role, now_ms);
}

void acp_agent_set_call_timeout(acp_agent *agent, uint64_t timeout_ms) {
  if (agent)
    agent->role.call_timeout_ms = timeout_ms;
}

int acp_agent_is_initialized(const acp_agent *agent) {
  return agent && agent->initialized;
}

int acp_agent_protocol_version(const acp_agent *agent) {
  return acp_agent_is_initialized(agent) ? agent->version : 0;
}

int acp_agent_set_max_protocol_version(acp_agent *agent, int version) {
  if (agent == NULL ||
      (version != ACP_PROTOCOL_V1 && version != ACP_PROTOCOL_V2))
    return ACP_ERR_INVALID_ARGUMENT;
  agent->max_version = version;
  return 0;
}

/* MARK: - Requests */

const acp_rpc_msg *acp_agent_request_msg(const acp_agent_request *req) {
  return req ? req->msg : NULL;
}

const acp_json_val *acp_agent_request_params(const acp_agent_request *req) {
  return req && req->msg ? req->msg->params : NULL;
}

const char *acp_agent_request_method(const acp_agent_request *req) {
  return req ? req->method_name : NULL;
}

const char *acp_agent_request_session_id(const acp_agent_request *req) {
  return req ? req->session_id : NULL;
}

int acp_agent_request_param_str(const acp_agent_request *req, const char *key,
                                const char **s, size_t *len) {
  return acp__req_param_str(req, key, s, len);
}

int acp_agent_request_decode(const acp_agent_request *req, acp_arena *arena,
                             const void **out) {
  return acp__req_decode(req, arena, out);
}

int64_t acp_agent_request_protocol_version(const acp_agent_request *req) {
  return req ? req->protocol_version : -1;
}

int acp_agent_request_is_cancelled(const acp_agent_request *req) {
  return req && req->cancelled;
}

/* MARK: - Answers */

/* Rewrite an initialize result so that protocolVersion is ours. */
static int respond_initialize_raw(acp_agent *a, acp__req *req,
                                  const char *result, size_t len) {
  acp__role *r = &a->role;
  acp_json_writer *w;
  const acp_json_val *root;
  const acp_json_val *k;
  const char *out;
  size_t out_len;
  int rv;

  if (result == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  rv = acp_json_doc_parse(r->doc, result, len, NULL);
  if (rv == ACP_ERR_NOMEM)
    return rv;
  root = acp_json_doc_root(r->doc);
  if (rv != 0 || acp_json_type_of(root) != ACP_JSON_OBJECT)
    return ACP_ERR_INVALID_ARGUMENT;
  w = acp__role_obj_begin(r);
  ACP__W_KEYL(w, "protocolVersion");
  acp_json_write_int(w, negotiated_version(a, req));
  for (k = acp_json_child(root); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const char *s;
    size_t n;

    if (ACP_JSON_STR_EQ_LIT(k, "protocolVersion"))
      continue;
    rv = acp_json_doc_str(r->doc, k, &s, &n);
    if (rv != 0)
      return rv;
    acp_json_write_key(w, s, n);
    acp_json_write_val(w, acp_json_next(k));
  }
  rv = acp__role_obj_end(r, &out, &out_len);
  if (rv != 0)
    return rv;
  return acp__role_respond(r, req, out, out_len);
}

int acp_agent_respond(acp_agent *agent, acp_agent_request *req,
                      const char *result, size_t result_len) {
  if (agent == NULL || req == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  /* A v2 prompt is accepted by the library and ended with
   * acp_agent_respond_prompt(): a second answer would break the turn. */
  if (req->answered || req->accepted || req == agent->accepting)
    return ACP_ERR_INVALID_STATE;
  ACCEPT_FIRST(agent);
  if (req->method == ACP_METHOD_INITIALIZE)
    return respond_initialize_raw(agent, req, result, result_len);
  return acp__role_respond(&agent->role, req, result, result_len);
}

int acp_agent_respond_error(acp_agent *agent, acp_agent_request *req,
                            int64_t code, const char *message, const char *data,
                            size_t data_len) {
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (req != NULL && req == agent->accepting)
    agent->accepting = NULL; /* refused: a plain error, no turn */
  else
    ACCEPT_FIRST(agent);
  if (req != NULL && req->accepted && !req->answered)
    /* An accepted v2 prompt cannot be answered twice: the turn ends. */
    return v2_end_turn(agent, req, req->cancelled ? "cancelled" : "error",
                       true);
  return acp__role_respond_error(&agent->role, req, code, message, data,
                                 data_len);
}

int acp_agent_respond_cancelled(acp_agent *agent, acp_agent_request *req) {
  return acp_agent_respond_error(agent, req, ACP_RPC_REQUEST_CANCELLED, NULL,
                                 NULL, 0);
}

int acp_agent_respond_empty(acp_agent *agent, acp_agent_request *req) {
  return acp_agent_respond(agent, req, "{}", 2);
}

int acp_agent_respond_initialize(acp_agent *agent, acp_agent_request *req,
                                 const char *caps, size_t caps_len,
                                 const char *info, size_t info_len,
                                 const char *auth, size_t auth_len) {
  acp_json_writer *w;
  bool v2;

  if (agent == NULL || req == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->answered)
    return ACP_ERR_INVALID_STATE;
  ACCEPT_FIRST(agent);
  v2 = negotiated_version(agent, req) == ACP_PROTOCOL_V2;
  w = acp__role_obj_begin(&agent->role);
  ACP__W_KEYL(w, "protocolVersion");
  acp_json_write_int(w, v2 ? ACP_PROTOCOL_V2 : AGENT_PROTOCOL_VERSION);
  /* v2 renamed agentCapabilities and agentInfo (InitializeResponse). */
  acp__w_raw(w, v2 ? "capabilities" : "agentCapabilities", caps, caps_len,
             "{}");
  if (info != NULL) {
    acp__w_raw(w, v2 ? "info" : "agentInfo", info, info_len, NULL);
  } else {
    acp_json_write_keyz(w, v2 ? "info" : "agentInfo");
    acp_json_write_obj_begin(w);
    acp__w_str(w, "name", "libacp");
    acp__w_str(w, "version", ACP_VERSION);
    acp_json_write_obj_end(w);
  }
  acp__w_raw(w, "authMethods", auth, auth_len, "[]");
  return acp__role_respond_obj(&agent->role, req);
}

int acp_agent_respond_session_new(acp_agent *agent, acp_agent_request *req,
                                  const char *session_id, const char *extra,
                                  size_t extra_len) {
  acp_json_writer *w;
  int rv;

  if (agent == NULL || req == NULL || session_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->answered)
    return ACP_ERR_INVALID_STATE;
  ACCEPT_FIRST(agent);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "sessionId", session_id);
  rv = acp__w_members(&agent->role, w, extra, extra_len);
  if (rv != 0)
    return rv;
  return acp__role_respond_obj(&agent->role, req);
}

/*
 * The whole result for a stop reason of the schema's StopReason enum, or
 * NULL for any other string (written and escaped by the writer as before).
 * The turn's common answer then skips the JSON writer (about 150
 * instructions a turn); the bytes are the ones the writer produces.
 */
#define STOP_RESULT(s)                                                         \
  { s, "{\"stopReason\":\"" s "\"}", sizeof("{\"stopReason\":\"" s "\"}") - 1 }
static const struct {
  const char *reason;
  const char *result;
  size_t len;
} stop_results[] = {
    STOP_RESULT("end_turn"),   STOP_RESULT("cancelled"),
    STOP_RESULT("max_tokens"), STOP_RESULT("max_turn_requests"),
    STOP_RESULT("refusal"),
};
#undef STOP_RESULT

static const char *stop_result(const char *reason, size_t *len) {
  size_t i;

  for (i = 0; i < sizeof(stop_results) / sizeof(stop_results[0]); i++)
    if (strcmp(reason, stop_results[i].reason) == 0) {
      *len = stop_results[i].len;
      return stop_results[i].result;
    }
  return NULL;
}

int acp_agent_respond_prompt(acp_agent *agent, acp_agent_request *req,
                             const char *stop_reason, const char *usage,
                             size_t usage_len) {
  acp_json_writer *w;
  const char *lit;
  size_t lit_len;

  if (agent == NULL || req == NULL || stop_reason == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (req->answered)
    return ACP_ERR_INVALID_STATE;
  ACCEPT_FIRST(agent);
  if (req->cancelled)
    stop_reason = "cancelled";
  if (req->accepted)
    return v2_end_turn(agent, req, stop_reason, false);
  if (usage == NULL && (lit = stop_result(stop_reason, &lit_len)) != NULL)
    return acp__role_respond(&agent->role, req, lit, lit_len);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "stopReason", stop_reason);
  acp__w_raw(w, "usage", usage, usage_len, NULL);
  return acp__role_respond_obj(&agent->role, req);
}

/* MARK: - Calls to the client */

static int agent_call(acp_agent *a, const char *method, const char *params,
                      size_t len, acp_agent_response_cb cb, void *ud,
                      int64_t *id_out) {
  acp__call tmpl;

  memset(&tmpl, 0, sizeof(tmpl));
  tmpl.cb.agent = cb;
  tmpl.cb_user_data = ud;
  return acp__role_call(&a->role, method, params, len, &tmpl, id_out);
}

/* Finish the params object in the scratch writer and send it. */
static int agent_call_w(acp_agent *a, const char *method,
                        acp_agent_response_cb cb, void *ud, int64_t *id_out) {
  const char *out;
  size_t len;
  int rv = acp__role_obj_end(&a->role, &out, &len);

  if (rv != 0)
    return rv;
  return agent_call(a, method, out, len, cb, ud, id_out);
}

int acp_agent_call(acp_agent *agent, const char *method, const char *params,
                   size_t params_len, acp_agent_response_cb cb,
                   void *cb_user_data, int64_t *id_out) {
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  return agent_call(agent, method, params, params_len, cb, cb_user_data,
                    id_out);
}

int acp_agent_notify(acp_agent *agent, const char *method, const char *params,
                     size_t params_len) {
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  return acp__role_notify(&agent->role, method, params, params_len);
}

int acp_agent_cancel_call(acp_agent *agent, int64_t id) {
  if (agent == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return acp__role_cancel_call(&agent->role, id);
}

/*
 * v2 moved the tool call under a typed subject and gave the prompt its own
 * title (RequestPermissionRequest: title*, subject {type: "tool_call",
 * toolCall}, options*). The title is the tool call's when it has one, so a
 * v1-shaped caller still produces a valid v2 request.
 */
static int v2_request_permission(acp_agent *agent, const char *session_id,
                                 const char *tc, size_t tc_len,
                                 const char *options, size_t options_len,
                                 acp_agent_response_cb cb, void *ud,
                                 int64_t *id_out) {
  acp_json_doc *doc = NULL;
  const char *title = NULL;
  size_t title_len = 0;
  acp_json_writer *w;
  int rv;

  rv = acp_json_doc_new(&doc, &agent->role.mem);
  if (rv != 0)
    return rv;
  if (acp_json_doc_parse(doc, tc, tc_len, NULL) != 0 ||
      acp_json_type_of(acp_json_doc_root(doc)) != ACP_JSON_OBJECT) {
    acp_json_doc_free(doc);
    return ACP_ERR_INVALID_ARGUMENT;
  }
  (void)acp_json_doc_str(doc, ACP__OBJ_GETL(acp_json_doc_root(doc), "title"),
                         &title, &title_len);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "sessionId", session_id);
  ACP__W_KEYL(w, "title");
  if (title != NULL)
    acp_json_write_str(w, title, title_len);
  else
    acp_json_write_strz(w, "Permission requested");
  ACP__W_KEYL(w, "subject");
  acp_json_write_obj_begin(w);
  acp__w_str(w, "type", "tool_call");
  acp__w_raw(w, "toolCall", tc, tc_len, NULL);
  acp_json_write_obj_end(w);
  acp__w_raw(w, "options", options, options_len, NULL);
  acp_json_doc_free(doc);
  return agent_call_w(agent, "session/request_permission", cb, ud, id_out);
}

int acp_agent_request_permission(acp_agent *agent, const char *session_id,
                                 const char *tool_call_json,
                                 size_t tool_call_len, const char *options_json,
                                 size_t options_len, acp_agent_response_cb cb,
                                 void *cb_user_data, int64_t *id_out) {
  acp_json_writer *w;

  if (agent == NULL || session_id == NULL || tool_call_json == NULL ||
      options_json == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  if (agent->role.version == ACP_PROTOCOL_V2)
    return v2_request_permission(agent, session_id, tool_call_json,
                                 tool_call_len, options_json, options_len, cb,
                                 cb_user_data, id_out);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_raw(w, "toolCall", tool_call_json, tool_call_len, NULL);
  acp__w_raw(w, "options", options_json, options_len, NULL);
  return agent_call_w(agent, "session/request_permission", cb, cb_user_data,
                      id_out);
}

int acp_agent_fs_read_text_file(acp_agent *agent, const char *session_id,
                                const char *path, uint32_t line, uint32_t limit,
                                acp_agent_response_cb cb, void *cb_user_data,
                                int64_t *id_out) {
  acp_json_writer *w;

  if (agent == NULL || session_id == NULL || path == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "path", path);
  if (line != 0) {
    ACP__W_KEYL(w, "line");
    acp_json_write_uint(w, line);
  }
  if (limit != 0) {
    ACP__W_KEYL(w, "limit");
    acp_json_write_uint(w, limit);
  }
  return agent_call_w(agent, "fs/read_text_file", cb, cb_user_data, id_out);
}

int acp_agent_fs_write_text_file(acp_agent *agent, const char *session_id,
                                 const char *path, const char *content,
                                 size_t content_len, acp_agent_response_cb cb,
                                 void *cb_user_data, int64_t *id_out) {
  acp_json_writer *w;

  if (agent == NULL || session_id == NULL || path == NULL ||
      (content == NULL && content_len != 0))
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "path", path);
  ACP__W_KEYL(w, "content");
  acp_json_write_str(w, content ? content : "", content_len);
  return agent_call_w(agent, "fs/write_text_file", cb, cb_user_data, id_out);
}

int acp_agent_terminal_create(acp_agent *agent, const char *session_id,
                              const char *command, const char *args_json,
                              size_t args_len, const char *extra,
                              size_t extra_len, acp_agent_response_cb cb,
                              void *cb_user_data, int64_t *id_out) {
  acp_json_writer *w;
  int rv;

  if (agent == NULL || session_id == NULL || command == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "command", command);
  acp__w_raw(w, "args", args_json, args_len, NULL);
  rv = acp__w_members(&agent->role, w, extra, extra_len);
  if (rv != 0)
    return rv;
  return agent_call_w(agent, "terminal/create", cb, cb_user_data, id_out);
}

static int terminal_call(acp_agent *agent, const char *method,
                         const char *session_id, const char *terminal_id,
                         acp_agent_response_cb cb, void *ud, int64_t *id_out) {
  acp_json_writer *w;

  if (agent == NULL || session_id == NULL || terminal_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_str(w, "terminalId", terminal_id);
  return agent_call_w(agent, method, cb, ud, id_out);
}

int acp_agent_terminal_output(acp_agent *agent, const char *session_id,
                              const char *terminal_id, acp_agent_response_cb cb,
                              void *cb_user_data, int64_t *id_out) {
  return terminal_call(agent, "terminal/output", session_id, terminal_id, cb,
                       cb_user_data, id_out);
}

int acp_agent_terminal_wait_for_exit(acp_agent *agent, const char *session_id,
                                     const char *terminal_id,
                                     acp_agent_response_cb cb,
                                     void *cb_user_data, int64_t *id_out) {
  return terminal_call(agent, "terminal/wait_for_exit", session_id, terminal_id,
                       cb, cb_user_data, id_out);
}

int acp_agent_terminal_kill(acp_agent *agent, const char *session_id,
                            const char *terminal_id, acp_agent_response_cb cb,
                            void *cb_user_data, int64_t *id_out) {
  return terminal_call(agent, "terminal/kill", session_id, terminal_id, cb,
                       cb_user_data, id_out);
}

int acp_agent_terminal_release(acp_agent *agent, const char *session_id,
                               const char *terminal_id,
                               acp_agent_response_cb cb, void *cb_user_data,
                               int64_t *id_out) {
  return terminal_call(agent, "terminal/release", session_id, terminal_id, cb,
                       cb_user_data, id_out);
}

int acp_agent_elicitation_create(acp_agent *agent, const char *params,
                                 size_t params_len, acp_agent_response_cb cb,
                                 void *cb_user_data, int64_t *id_out) {
  if (agent == NULL || params == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  return agent_call(agent, "elicitation/create", params, params_len, cb,
                    cb_user_data, id_out);
}

int acp_agent_elicitation_complete(acp_agent *agent,
                                   const char *elicitation_id) {
  acp_json_writer *w;

  if (agent == NULL || elicitation_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "elicitationId", elicitation_id);
  return acp__role_notify_obj(&agent->role, "elicitation/complete");
}

int acp_agent_send_auth_status_update(acp_agent *agent, const char *state,
                                      const char *accounts,
                                      size_t accounts_len) {
  acp_json_writer *w;

  if (agent == NULL || state == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  ACCEPT_FIRST(agent);
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "state", state);
  acp__w_raw(w, "accounts", accounts, accounts_len, NULL);
  return acp__role_notify_obj(&agent->role, "auth/status_update");
}

/* MARK: - session/update senders */

/* update_check() with the id's length known (the chunk sender measures it
 * once for the check and for the message). */
static int update_check_n(acp_agent *a, const char *session_id, size_t len) {
  agent_sess *s;

  ACCEPT_FIRST(a);
  s = sess_find(a, session_id, len);
  if (s != NULL && s->blocked)
    return ACP_ERR_INVALID_STATE;
  return 0;
}

static int update_check(acp_agent *a, const char *session_id) {
  if (a == NULL || session_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  return update_check_n(a, session_id, strlen(session_id));
}

/*
 * Begin {"sessionId":..,"update":{"sessionUpdate":kind in the scratch
 * writer; update_end closes both objects and sends.
 */
static acp_json_writer *update_begin(acp_agent *a, const char *session_id,
                                     const char *kind) {
  acp_json_writer *w = acp__role_obj_begin(&a->role);

  acp__w_str(w, "sessionId", session_id);
  ACP__W_KEYL(w, "update");
  acp_json_writer_data(w, &a->update_at);
  a->update_session = session_id;
  acp_json_write_obj_begin(w);
  acp__w_str(w, "sessionUpdate", kind);
  return w;
}

static int update_end(acp_agent *a, const char *extra, size_t extra_len) {
  int rv = acp__w_members(&a->role, a->role.w, extra, extra_len);

  if (rv != 0)
    return rv;
  acp_json_write_obj_end(a->role.w);
  if (a->cbs.update_sent != NULL) {
    /* The update is a slice of the params; the notify copies the params
     * into the session's output and leaves the writer as it was. */
    size_t end;

    acp_json_writer_data(a->role.w, &end);
    rv = acp__role_notify_obj(&a->role, "session/update");
    if (rv == 0)
      a->cbs.update_sent(a, a->update_session,
                         acp_json_writer_data(a->role.w, NULL) + a->update_at,
                         end - a->update_at, a->user_data);
    return rv;
  }
  return acp__role_notify_obj(&a->role, "session/update");
}

/* v2: the message a chunk of `kind` belongs to in the session's turn (a
 * chunk outside a turn gets msg_0). */
static const char *v2_message_id(const agent_sess *s, const char *kind) {
  const char *id;

  if (s == NULL)
    return "msg_0";
  id = strcmp(kind, "agent_thought_chunk") == 0 ? s->thought_id : s->reply_id;
  return id[0] ? id : "msg_0";
}

/*
 * v2: a message chunk the application wrote without a messageId gets the
 * turn's reply id (ContentChunk requires one). Sends it and returns 0, or 1
 * when the update needs no change (the caller sends it as is).
 */
static int v2_chunk_with_id(acp_agent *a, const char *session_id,
                            const char *update, size_t len) {
  acp__role *r = &a->role;
  const acp_json_val *root, *kind, *k;
  agent_sess *s;
  acp_json_writer *w;
  size_t at, end;
  int rv = acp_json_doc_parse(r->doc, update, len, NULL);

  if (rv == ACP_ERR_NOMEM)
    return rv;
  root = acp_json_doc_root(r->doc);
  if (rv != 0 || acp_json_type_of(root) != ACP_JSON_OBJECT ||
      ACP__OBJ_GETL(root, "messageId") != NULL)
    return 1;
  kind = ACP__OBJ_GETL(root, "sessionUpdate");
  if (!ACP_JSON_STR_EQ_LIT(kind, "agent_message_chunk") &&
      !ACP_JSON_STR_EQ_LIT(kind, "agent_thought_chunk"))
    return 1;
  s = sess_find(a, session_id, strlen(session_id));
  w = acp__role_obj_begin(r);
  acp__w_str(w, "sessionId", session_id);
  ACP__W_KEYL(w, "update");
  acp_json_writer_data(w, &at);
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(root); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const char *ks;
    size_t kn;

    rv = acp_json_doc_str(r->doc, k, &ks, &kn);
    if (rv != 0)
      return rv;
    acp_json_write_key(w, ks, kn);
    acp_json_write_val(w, acp_json_next(k));
    if (ACP_JSON_STR_EQ_LIT(k, "sessionUpdate"))
      acp__w_str(
          w, "messageId",
          v2_message_id(s, ACP_JSON_STR_EQ_LIT(kind, "agent_thought_chunk")
                               ? "agent_thought_chunk"
                               : "agent_message_chunk"));
  }
  acp_json_write_obj_end(w);
  acp_json_writer_data(w, &end);
  rv = acp__role_notify_obj(r, "session/update");
  /* The update as sent, with its messageId (a history replays it with the
   * id the client saw), a slice of the params as in update_end. */
  if (rv == 0 && a->cbs.update_sent != NULL)
    a->cbs.update_sent(a, session_id, acp_json_writer_data(w, NULL) + at,
                       end - at, a->user_data);
  return rv;
}

/* The raw update is spliced unchanged, so a malformed one would reach the
 * client as a broken line: check it is one JSON object first. */
static bool raw_object(const char *p, size_t n) {
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
    i++;
  return i < n && p[i] == '{' && acp_json_validate(p, n, NULL) == 0;
}

int acp_agent_send_update_raw(acp_agent *agent, const char *session_id,
                              const char *update, size_t update_len) {
  acp_json_writer *w;
  int rv = update_check(agent, session_id);

  if (rv != 0)
    return rv;
  if (update == NULL || !raw_object(update, update_len))
    return ACP_ERR_INVALID_ARGUMENT;
  if (agent->role.version == ACP_PROTOCOL_V2) {
    rv = v2_chunk_with_id(agent, session_id, update, update_len);
    if (rv != 1)
      return rv;
  }
  w = acp__role_obj_begin(&agent->role);
  acp__w_str(w, "sessionId", session_id);
  acp__w_raw(w, "update", update, update_len, NULL);
  rv = acp__role_notify_obj(&agent->role, "session/update");
  if (rv == 0 && agent->cbs.update_sent != NULL)
    agent->cbs.update_sent(agent, session_id, update, update_len,
                           agent->user_data);
  return rv;
}

/* One text chunk. The text is either `text` (escaped here) or `val`, a
 * parsed string whose raw text passes as it is (acp_json_str_passthrough()
 * was checked by the caller): then the bytes are copied once, unscanned. */
static int send_chunk_n(acp_agent *a, const char *session_id, const char *kind,
                        size_t kind_len, const char *text, size_t text_len,
                        const acp_json_val *val, const char *extra,
                        size_t extra_len) {
  acp_json_writer *w;
  size_t sid_len;
  int rv;

  if (a == NULL || session_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  /* Measured once: for the check and for the message (a strlen each was
   * two calls a turn). */
  sid_len = strlen(session_id);
  rv = update_check_n(a, session_id, sid_len);
  if (rv != 0)
    return rv;
  if (text == NULL && text_len != 0)
    return ACP_ERR_INVALID_ARGUMENT;
  if (extra == NULL && a->cbs.update_sent == NULL &&
      a->role.version != ACP_PROTOCOL_V2) {
    /* The common, large case goes straight into the session's output: the
     * text is copied once, not into a params writer first. */
    size_t raw_len = 0;
    const char *raw = val ? acp_json_raw(val, &raw_len) : NULL;
    acp__rpc_part parts[] = {
        ACP__PART_LIT("{\"sessionId\":"),
        ACP__PART_STR(session_id, sid_len),
        /* kind is one of this file's names (plain ASCII): raw, not
         * scanned for escapes on every chunk. */
        ACP__PART_LIT(",\"update\":{\"sessionUpdate\":\""),
        {kind, kind_len, false, false, true},
        ACP__PART_LIT("\",\"content\":{\"type\":\"text\",\"text\":"),
        ACP__PART_STR(text ? text : "", text_len),
        ACP__PART_LIT("}}}"),
    };
    if (raw != NULL) {
      parts[5].p = raw;
      parts[5].n = raw_len;
      parts[5].str = false;
      parts[5].clean = true; /* a parsed string: CR and LF are escaped */
    }
    return acp__role_notify_parts_n(&a->role,
                                    ACP__ROLE_METHOD_LIT("session/update"),
                                    parts, sizeof(parts) / sizeof(parts[0]));
  }
  w = update_begin(a, session_id, kind);
  if (a->role.version == ACP_PROTOCOL_V2) {
    /* v2 chunks belong to a message: the turn's reply. */
    agent_sess *s = sess_find(a, session_id, sid_len);

    acp__w_str(w, "messageId", v2_message_id(s, kind));
  }
  ACP__W_KEYL(w, "content");
  acp_json_write_obj_begin(w);
  acp__w_str(w, "type", "text");
  ACP__W_KEYL(w, "text");
  if (val != NULL)
    acp_json_write_val(w, val);
  else
    acp_json_write_str(w, text ? text : "", text_len);
  acp_json_write_obj_end(w);
  return update_end(a, extra, extra_len);
}

/* send_chunk_n() with a literal kind: its length at compile time. */
#define send_chunk(a, sid, kind, ...)                                          \
  send_chunk_n((a), (sid), "" kind "", sizeof(kind) - 1, __VA_ARGS__)

int acp_agent_send_message_chunk(acp_agent *agent, const char *session_id,
                                 const char *text, size_t text_len,
                                 const char *extra, size_t extra_len) {
  return send_chunk(agent, session_id, "agent_message_chunk", text, text_len,
                    NULL, extra, extra_len);
}

int acp_agent_send_message_chunk_val(acp_agent *agent, const char *session_id,
                                     acp_json_doc *doc,
                                     const acp_json_val *text,
                                     const char *extra, size_t extra_len) {
  const char *s;
  size_t n;
  int rv;

  if (text == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (acp_json_type_of(text) != ACP_JSON_STRING)
    return ACP_ERR_TYPE;
  if (acp_json_str_passthrough(text))
    return send_chunk(agent, session_id, "agent_message_chunk", "", 0, text,
                      extra, extra_len);
  if (doc == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  rv = acp_json_doc_str(doc, text, &s, &n);
  if (rv != 0)
    return rv;
  return send_chunk(agent, session_id, "agent_message_chunk", s, n, NULL, extra,
                    extra_len);
}

int acp_agent_send_thought_chunk(acp_agent *agent, const char *session_id,
                                 const char *text, size_t text_len,
                                 const char *extra, size_t extra_len) {
  return send_chunk(agent, session_id, "agent_thought_chunk", text, text_len,
                    NULL, extra, extra_len);
}

int acp_agent_send_user_message_chunk(acp_agent *agent, const char *session_id,
                                      const char *text, size_t text_len,
                                      const char *extra, size_t extra_len) {
  return send_chunk(agent, session_id, "user_message_chunk", text, text_len,
                    NULL, extra, extra_len);
}

int acp_agent_send_tool_call(acp_agent *agent, const char *session_id,
                             const char *tool_call_id, const char *title,
                             const char *kind, const char *status,
                             const char *extra, size_t extra_len) {
  acp_json_writer *w;
  int rv = update_check(agent, session_id);

  if (rv != 0)
    return rv;
  if (tool_call_id == NULL || title == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  /* v2 has one upsert for tool calls: a first-seen toolCallId creates it. */
  w = update_begin(agent, session_id,
                   agent->role.version == ACP_PROTOCOL_V2 ? "tool_call_update"
                                                          : "tool_call");
  acp__w_str(w, "toolCallId", tool_call_id);
  acp__w_str(w, "title", title);
  if (kind != NULL)
    acp__w_str(w, "kind", kind);
  if (status != NULL)
    acp__w_str(w, "status", status);
  return update_end(agent, extra, extra_len);
}

int acp_agent_send_tool_call_update(acp_agent *agent, const char *session_id,
                                    const char *tool_call_id,
                                    const char *status, const char *extra,
                                    size_t extra_len) {
  acp_json_writer *w;
  int rv = update_check(agent, session_id);

  if (rv != 0)
    return rv;
  if (tool_call_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = update_begin(agent, session_id, "tool_call_update");
  acp__w_str(w, "toolCallId", tool_call_id);
  if (status != NULL)
    acp__w_str(w, "status", status);
  return update_end(agent, extra, extra_len);
}

static int send_raw_member(acp_agent *a, const char *session_id,
                           const char *kind, const char *key, const char *json,
                           size_t len) {
  acp_json_writer *w;
  int rv = update_check(a, session_id);

  if (rv != 0)
    return rv;
  if (json == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = update_begin(a, session_id, kind);
  acp__w_raw(w, key, json, len, NULL);
  return update_end(a, NULL, 0);
}

int acp_agent_send_plan(acp_agent *agent, const char *session_id,
                        const char *entries, size_t entries_len) {
  /* v2 has no bare `plan`: the session's one plan is an items plan_update
   * with a fixed id (acp_agent_send_plan_update() names others). */
  if (agent != NULL && agent->role.version == ACP_PROTOCOL_V2)
    return acp_agent_send_plan_update(agent, session_id, "plan", entries,
                                      entries_len);
  return send_raw_member(agent, session_id, "plan", "entries", entries,
                         entries_len);
}

int acp_agent_send_plan_update(acp_agent *agent, const char *session_id,
                               const char *plan_id, const char *entries,
                               size_t entries_len) {
  acp_json_writer *w;
  int rv = update_check(agent, session_id);

  if (rv != 0)
    return rv;
  if (plan_id == NULL || entries == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = update_begin(agent, session_id, "plan_update");
  ACP__W_KEYL(w, "plan");
  acp_json_write_obj_begin(w);
  acp__w_str(w, "type", "items");
  acp__w_str(w, "planId", plan_id);
  acp__w_raw(w, "entries", entries, entries_len, NULL);
  acp_json_write_obj_end(w);
  return update_end(agent, NULL, 0);
}

int acp_agent_send_state(acp_agent *agent, const char *session_id,
                         const char *state) {
  int rv = update_check(agent, session_id);

  if (rv != 0)
    return rv;
  if (state == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (agent->role.version != ACP_PROTOCOL_V2)
    return ACP_ERR_INVALID_STATE; /* v1 has no session states */
  return v2_state(agent, session_id, state, NULL);
}

int acp_agent_send_available_commands(acp_agent *agent, const char *session_id,
                                      const char *commands,
                                      size_t commands_len) {
  return send_raw_member(agent, session_id, "available_commands_update",
                         "availableCommands", commands, commands_len);
}

int acp_agent_send_config_options(acp_agent *agent, const char *session_id,
                                  const char *options, size_t options_len) {
  return send_raw_member(agent, session_id, "config_option_update",
                         "configOptions", options, options_len);
}

int acp_agent_send_current_mode(acp_agent *agent, const char *session_id,
                                const char *mode_id) {
  acp_json_writer *w;
  int rv = update_check(agent, session_id);

  if (rv != 0)
    return rv;
  if (mode_id == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  w = update_begin(agent, session_id, "current_mode_update");
  acp__w_str(w, "currentModeId", mode_id);
  return update_end(agent, NULL, 0);
}

int acp_agent_send_session_info(acp_agent *agent, const char *session_id,
                                const char *title, const char *extra,
                                size_t extra_len) {
  acp_json_writer *w;
  int rv = update_check(agent, session_id);

  if (rv != 0)
    return rv;
  w = update_begin(agent, session_id, "session_info_update");
  if (title != NULL)
    acp__w_str(w, "title", title);
  return update_end(agent, extra, extra_len);
}

int acp_agent_send_usage(acp_agent *agent, const char *session_id,
                         uint64_t used, uint64_t size, const char *extra,
                         size_t extra_len) {
  acp_json_writer *w;
  int rv = update_check(agent, session_id);

  if (rv != 0)
    return rv;
  w = update_begin(agent, session_id, "usage_update");
  ACP__W_KEYL(w, "used");
  acp_json_write_uint(w, used);
  ACP__W_KEYL(w, "size");
  acp_json_write_uint(w, size);
  return update_end(agent, extra, extra_len);
}
