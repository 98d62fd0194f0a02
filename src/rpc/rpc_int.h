/*
 * Internal interface of the JSON-RPC session for the other core modules
 * (the ACP roles): sending a message whose params are given in pieces,
 * written straight into the session's output buffer. A large payload (a
 * 1 MiB prompt) then costs one copy, not a copy into a params writer and a
 * second one into the output.
 */
#ifndef ACP_RPC_INT_H
#define ACP_RPC_INT_H

#include <stdbool.h>

#include "acp/rpc.h"

/* One piece of a params value: raw JSON bytes, or (str) bytes written as
 * one JSON string with escapes. The pieces concatenated must form one JSON
 * value; that is not checked. CR and LF in a raw piece are turned into
 * spaces as it is copied (in valid JSON they can only be whitespace), so a
 * pretty-printed value keeps the message on one line; `clean` says a piece
 * has none (the library's literals, a parsed string's raw text), which
 * saves the pass. A string piece marked `ref` may be referenced
 * instead of copied (the caller keeps the bytes until the response
 * callback of the request runs): when it needs no escaping, borrowing is on
 * and it is large, the output hands it out in place
 * (acp_client_prompt_text_ref()). */
typedef struct acp__rpc_part {
  const char *p;
  size_t n;
  bool str;
  bool ref;
  bool clean;
} acp__rpc_part;

/* A raw piece from a string literal, and a string piece. */
#define ACP__PART_LIT(lit)                                                     \
  { (lit), sizeof(lit) - 1, false, false, true }
#define ACP__PART_STR(ptr, len)                                                \
  { (ptr), (len), true, false, false }
/* A string piece that may be referenced (above). */
#define ACP__PART_STR_REF(ptr, len)                                            \
  { (ptr), (len), true, true, false }

/* As acp_rpc_session_request() and _notify(), params from `parts`.
 * `method_len | ACP__RPC_METHOD_LIT` says the method is one of the
 * library's own names, a literal of plain ASCII: it is copied as it is,
 * not checked for bytes to escape on every message. */
#define ACP__RPC_METHOD_LIT ((size_t)1 << (sizeof(size_t) * 8 - 1))
int acp__rpc_request_parts(acp_rpc_session *s, const char *method,
                           size_t method_len, const acp__rpc_part *parts,
                           size_t nparts, uint64_t timeout_ms, uint64_t now_ms,
                           acp_rpc_response_cb cb, void *cb_user_data,
                           int64_t *id_out);
int acp__rpc_notify_parts(acp_rpc_session *s, const char *method,
                          size_t method_len, const acp__rpc_part *parts,
                          size_t nparts);

/*
 * A pointer of the caller's kept with the unanswered incoming request
 * `handle` (NULL until set): the on_cancel callback's handle then leads to
 * the caller's record of the request without a search of the caller's
 * list (a peer holding thousands of requests in flight made each of its
 * cancels such a search). Setting it for a handle no longer live does
 * nothing, and acp__rpc_tag() returns NULL for one. The caller clears it
 * when its record goes before the request is answered.
 */
void acp__rpc_set_tag(acp_rpc_session *s, uint64_t handle, void *tag);
void *acp__rpc_tag(const acp_rpc_session *s, uint64_t handle);

/*
 * The handle of the unanswered incoming request whose id has the value
 * of `id` (compared as cancels compare: 1.0e1 is 10, an escaped string
 * its decoded text), found as a cancel is (through the session's index
 * once it has many in flight). `id` must be a value of the message being
 * dispatched (the session's document). 0, or ACP_ERR_NOT_FOUND.
 */
int acp__rpc_find_request(acp_rpc_session *s, const acp_json_val *id,
                          uint64_t *handle);

#endif
