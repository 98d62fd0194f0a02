/*
 * Private helpers shared by the MCP server and client (src/mcp). Not
 * installed.
 */
#ifndef ACP_MCP_INT_H
#define ACP_MCP_INT_H

#include <stdbool.h>

#include "internal.h"

#include "acp/json.h"
#include "acp/mcp.h"
#include "acp/rpc.h"

/* Most variables in a URI template. */
#define ACP__MCP_MAX_VARS 16

/* Copy of a NUL-terminated string; NULL in gives NULL out with *rv 0. */
char *acp__mcp_dupz(const acp_mem *m, const char *s, int *rv);

/* Decode a string value into a NUL-terminated heap copy. */
int acp__mcp_str_dup(const acp_mem *m, acp_json_doc *doc, const acp_json_val *v,
                     char **out, size_t *len);

/* Whether msg's method is exactly the NUL-terminated name m. */
static inline bool acp__mcp_method_is(const acp_rpc_msg *msg, const char *m) {
  size_t n = strlen(m);
  return msg->method_len == n && memcmp(msg->method, m, n) == 0;
}

/* Status for a response message (see acp_mcp_result_cb). */
int acp__mcp_status(const acp_rpc_msg *msg);

#endif /* ACP_MCP_INT_H */
