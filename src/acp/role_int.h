/*
 * The role base shared by the three ACP roles (src/acp/agent.c,
 * src/acp/client.c, src/acp/proxy.c; src/acp/role.c): the JSON-RPC session,
 * the table of unanswered incoming requests, the table of outgoing calls,
 * the scratch writer/doc and the recv/expiry path. Not installed.
 */
#ifndef ACP_ROLE_INT_H
#define ACP_ROLE_INT_H

#include "rpc/rpc_int.h"
#include "internal.h"

#include "acp/agent.h"
#include "acp/client.h"
#include "acp/json.h"
#include "acp/methods.h"
#include "acp/types.h"
#include "acp/proxy.h"
#include "acp/rpc.h"

typedef struct acp__role acp__role;

/* One unanswered incoming request (public names acp_agent_request and
 * acp_client_request). A role whose requests carry more state embeds it as
 * the first member of a larger struct (acp__role_ops.req_size; the proxy's
 * acp_proxy_request). */
struct acp_incoming_request {
  struct acp_incoming_request *next;
  struct acp_incoming_request *prev;
  acp__role *role;
  uint64_t handle;
  acp_method_id method;
  const char *method_name; /* NUL-terminated, in the request's own block */
  const char *id_raw;      /* the id's exact bytes as received, same block */
  size_t id_len;
  size_t block_cap;       /* bytes of the block (the spare's size when freed) */
  const char *session_id; /* NUL-terminated, same block, or NULL (typed
                             roles only) */
  size_t session_id_len;
  int64_t protocol_version;
  const acp_rpc_msg *msg; /* only while a handler runs */
  void *user_data;        /* the owner's slot */
  bool in_cb;             /* held: answering does not free it */
  bool answered;
  bool cancelled;
  /* ACP v2 session/prompt: the response (the prompt's acceptance) went out
   * already; the turn ends with an idle state_update (agent.c). */
  bool accepted;
  bool in_batch; /* arrived in a batch: the session assembles the answer */
};

typedef struct acp_incoming_request acp__req;

/* One outgoing call waiting for its response. */
typedef struct acp__call {
  struct acp__call *next;
  struct acp__call *prev;
  acp__role *role;
  int kind; /* role-defined tag (e.g. client initialize) */
  union {
    acp_agent_response_cb agent;
    acp_client_response_cb client;
    acp_proxy_response_cb proxy;
  } cb;
  void *cb_user_data;
  bool owned; /* allocated by the base, freed after the answer */
} acp__call;

/* acp__role_ops.admit: the role answered or dropped the request itself. */
#define ACP__ROLE_DONE 1

typedef struct acp__role_ops {
  /* Size of the role's request struct, which starts with an acp__req;
   * 0 for a plain acp__req. */
  size_t req_size;
  /* Optional, for a role that routes requests before typing them (the
   * proxy, whose side is 0: it checks no schema): sees every incoming
   * request before its record exists. Returns 0 to admit it, with *name
   * (preset to the wire method) the method to record; ACP__ROLE_DONE when
   * it answered or dropped the request itself; or an error. */
  int (*admit)(acp__role *r, const acp_rpc_msg *msg, const char **name,
               size_t *name_len);
  /* A request to dispatch; mi is NULL for unknown methods. */
  int (*on_request)(acp__role *r, acp__req *req, const acp_method_info *mi);
  /* A notification; mi is NULL for unknown methods. */
  int (*on_notification)(acp__role *r, const acp_rpc_msg *msg,
                         const acp_method_info *mi);
  /* $/cancel_request for an unanswered request (req->msg is NULL). */
  int (*on_cancel)(acp__role *r, acp__req *req);
  /* The response to one of our calls. */
  int (*on_response)(acp__role *r, acp__call *call, const acp_rpc_msg *msg);
  /* A request was just answered (before it is freed). */
  void (*on_answered)(acp__role *r, acp__req *req, bool is_error);
} acp__role_ops;

struct acp__role {
  acp_mem mem;
  acp_rpc_session *rpc;
  acp_json_writer *w; /* params / result scratch */
  acp_json_doc *doc;  /* scratch parser (extra-field splices) */
  acp__buf buf;       /* scratch bytes */
  acp__req *reqs;
  acp__req *spare_req;  /* one freed request block kept for reuse, or NULL */
  size_t spare_req_cap; /* its size in bytes */
  acp__call *calls;
  acp__call *spare_call; /* one freed owned call record kept, or NULL */
  uint64_t now_ms;
  uint64_t call_timeout_ms;
  acp_side side; /* ACP_SIDE_AGENT or _CLIENT: methods we handle; 0 for
                     the proxy, which handles every method by routing */
  const acp__role_ops *ops;
  void *owner;
  /* Protocol version whose method table validates and dispatches incoming
   * messages (ACP_PROTOCOL_V1 until initialize negotiated another). */
  int version;
  /* v2: scratch arena of the typed params check (created on first use,
   * reset after each message). */
  acp_arena *arena;
};

int acp__role_init(acp__role *r, acp_side side, const acp__role_ops *ops,
                   void *owner, const acp_rpc_options *opts,
                   const acp_mem *mem);
void acp__role_dispose(acp__role *r);

acp_ssize acp__role_recv(acp__role *r, const char *data, size_t len,
                         uint64_t now_ms);
int acp__role_handle_expiry(acp__role *r, uint64_t now_ms);

/* Answer a request; frees it unless its handler is running. */
int acp__role_respond(acp__role *r, acp__req *req, const char *result,
                      size_t len);
int acp__role_respond_error(acp__role *r, acp__req *req, int64_t code,
                            const char *message, const char *data,
                            size_t data_len);
/* As acp__role_respond_error() with a counted message (not defaulted). */
int acp__role_respond_error_n(acp__role *r, acp__req *req, int64_t code,
                              const char *message, size_t message_len,
                              const char *data, size_t data_len);
/* Answer with an error object relayed byte for byte (err is its raw JSON).
 * Not for a request that arrived in a batch (ACP_ERR_INVALID_STATE). */
int acp__role_respond_raw_error(acp__role *r, acp__req *req, const char *err,
                                size_t err_len);
/* Free an answered request that no handler holds (in_cb clear). */
void acp__role_settle(acp__role *r, acp__req *req);

/* Send a request; `call` fields cb/kind are copied from `tmpl`. */
int acp__role_call(acp__role *r, const char *method, const char *params,
                   size_t params_len, const acp__call *tmpl, int64_t *id_out);
int acp__role_notify(acp__role *r, const char *method, const char *params,
                     size_t params_len);
/* As acp__role_notify() with a counted method name. */
int acp__role_notify_n(acp__role *r, const char *method, size_t method_len,
                       const char *params, size_t params_len);
/* Send a request whose answer goes to ops->on_response with `c`, a record
 * the caller owns (e.g. inside the request it forwards: no allocation);
 * c->kind, cb and cb_user_data are the caller's. c stays linked until the
 * answer, or until acp__role_dispose(). */
int acp__role_call_into(acp__role *r, const char *method, size_t method_len,
                        const char *params, size_t params_len, acp__call *c,
                        int64_t *id_out);
/* As acp__role_call() and _notify(), params given in pieces written
 * straight into the session's output (one copy of a large payload). */
int acp__role_call_parts(acp__role *r, const char *method,
                         const acp__rpc_part *parts, size_t nparts,
                         const acp__call *tmpl, int64_t *id_out);
int acp__role_notify_parts(acp__role *r, const char *method,
                           const acp__rpc_part *parts, size_t nparts);
/* The same with the method's length known (a literal: no strlen). */
int acp__role_notify_parts_n(acp__role *r, const char *method,
                             size_t method_len, const acp__rpc_part *parts,
                             size_t nparts);
/* acp__role_call_parts() with the method's length known. Either _n
 * function takes a literal of the library's own marked as needing no
 * escapes (ACP__RPC_METHOD_LIT, rpc_int.h) via ACP__ROLE_METHOD_LIT. */
int acp__role_call_parts_n(acp__role *r, const char *method, size_t method_len,
                           const acp__rpc_part *parts, size_t nparts,
                           const acp__call *tmpl, int64_t *id_out);
/* A literal method name and its marked length. */
#define ACP__ROLE_METHOD_LIT(lit)                                              \
  "" lit "", (sizeof(lit) - 1) | ACP__RPC_METHOD_LIT
int acp__role_cancel_call(acp__role *r, int64_t id);

/* Scratch writer, reset, with an object opened. */
acp_json_writer *acp__role_obj_begin(acp__role *r);
/* Close the object opened by acp__role_obj_begin and expose the bytes. */
int acp__role_obj_end(acp__role *r, const char **data, size_t *len);
/* Close that object and send it as req's result / as method's params. */
int acp__role_respond_obj(acp__role *r, acp__req *req);
/* Mark req answered without writing a response (its response was already
 * written straight to the session, as a v2 prompt acceptance). */
void acp__role_finish(acp__role *r, acp__req *req, bool is_error);
/* Write a response for req now but keep req pending for the role. */
int acp__role_respond_early(acp__role *r, acp__req *req, const char *result,
                            size_t len);
int acp__role_notify_obj(acp__role *r, const char *method);

/* Writer helpers; all errors are sticky on the writer. */
void acp__w_str(acp_json_writer *w, const char *key, const char *s);
void acp__w_raw(acp_json_writer *w, const char *key, const char *json,
                size_t len, const char *dflt);
/* Splice the members of the raw object `extra` into the object being
 * written (which must have at least one member already written or none).
 * ACP_ERR_INVALID_ARGUMENT if extra is not an object. */
int acp__w_members(acp__role *r, acp_json_writer *w, const char *extra,
                   size_t extra_len);

/* Request accessors shared by both roles. */
int acp__req_param_str(const acp__req *req, const char *key, const char **s,
                       size_t *len);
int acp__req_decode(const acp__req *req, acp_arena *arena, const void **out);

#endif /* ACP_ROLE_INT_H */
