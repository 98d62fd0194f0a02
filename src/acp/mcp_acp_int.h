/*
 * Internal (libacp only): the MCP-over-ACP machinery of mcp_acp.c (tunnels,
 * outer request table, id translation, cancellation) offered to the
 * conductor's bridge (mcp_bridge.c), whose outer peer is not a role object
 * but a stream of lines written as if by the agent, and whose inner side is
 * not an MCP session but a byte endpoint (the agent's MCP client behind a
 * shim). One mechanism for both: the bridge keeps no id space, pending
 * table or cancel translation of its own.
 *
 * Lines (acp__mcp_lines) write requests with ids "<prefix><n>", answers and
 * notifications to a buffer (acp__mcp_lines_up()) that the caller feeds to
 * the router as if the agent had written them. An endpoint (acp__mcp_ep) is
 * one MCP connection: M1 (mcp/connect, mcp/message, mcp/disconnect) today;
 * the shape is a property of each endpoint, so M0 or M2 can be plugged in.
 * Callbacks run inside these calls and must not call back into them.
 */
#ifndef ACP_MCP_ACP_INT_H
#define ACP_MCP_ACP_INT_H

#include <stdbool.h>

#include "acp/mcp_acp.h"
#include "internal.h"

typedef struct acp__mcp_lines acp__mcp_lines;
typedef struct acp__mcp_ep acp__mcp_ep;

/* One MCP line (ending with a newline) for the endpoint. Nonzero fails
 * the operation that wrote it. */
typedef int (*acp__mcp_ep_write_cb)(acp__mcp_ep *ep, const char *line,
                                    size_t len, void *user_data);
/* The end of mcp/connect: status 0 (open), ACP_ERR_PROTOCOL (refused;
 * `err` is the raw error object, or NULL). After a nonzero status the
 * endpoint is freed when the callback returns. */
typedef int (*acp__mcp_ep_open_cb)(acp__mcp_ep *ep, int status, const char *err,
                                   size_t err_len, void *user_data);

int acp__mcp_lines_new(acp__mcp_lines **out, const char *prefix,
                       acp__mcp_ep_write_cb write_cb,
                       acp__mcp_ep_open_cb open_cb, void *user_data,
                       const acp_mem *mem);
void acp__mcp_lines_free(acp__mcp_lines *l);
/* The lines for the router; the caller consumes what it took. */
acp__buf *acp__mcp_lines_up(acp__mcp_lines *l);
/* Whether requests of ours are unanswered (connects and disconnects
 * included). Constant time. */
bool acp__mcp_lines_busy(const acp__mcp_lines *l);

/* Open an endpoint to `server_id`: writes mcp/connect. Lines the endpoint
 * sends before the answer wait. 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM. */
int acp__mcp_lines_connect(acp__mcp_lines *l, const char *server_id,
                           acp_mcp_acp_shape shape, void *ep_user_data,
                           acp__mcp_ep **out);
/* One MCP message (no newline) from the endpoint. 0 or ACP_ERR_NOMEM. */
int acp__mcp_ep_line(acp__mcp_ep *ep, const char *line, size_t len);
/* Free the endpoint; with `tell`, write mcp/disconnect when it was open.
 * Requests the provider sent through it are answered -32603. */
void acp__mcp_ep_close(acp__mcp_ep *ep, bool tell);
/* Its provider is gone: answer every request the endpoint sent that is
 * still pending with the MCP error {code, message}, then free it (no
 * mcp/disconnect: nobody is there to get it). */
void acp__mcp_ep_fail(acp__mcp_ep *ep, int64_t code, const char *message);
void *acp__mcp_ep_user_data(const acp__mcp_ep *ep);
bool acp__mcp_ep_is_open(const acp__mcp_ep *ep);

/* A message the router has for the agent (parsed in `doc`): an answer to
 * one of our requests, mcp/message or mcp/disconnect for an open endpoint,
 * or $/cancel_request for a request an endpoint is answering. Returns 0
 * (consumed; when mcp/disconnect freed an endpoint, *closed_ud is its user
 * data), ACP_MCP_ACP_NOT_MINE (for the agent), ACP_ERR_NOMEM. */
int acp__mcp_lines_dispatch(acp__mcp_lines *l, acp_json_doc *doc,
                            const acp_json_val *root, void **closed_ud);

#endif /* ACP_MCP_ACP_INT_H */
