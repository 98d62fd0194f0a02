/*
 * Private helpers shared by the MCP server and client (src/mcp). Not
 * installed.
 */
#ifndef ACP_MCP_INT_H
#define ACP_MCP_INT_H

#include "internal.h"

#include "acp/json.h"
#include "acp/mcp.h"
#include "acp/rpc.h"

/* Most variables in a URI template. */
#define ACP__MCP_MAX_VARS 16

/* NUL-terminated copy of s[0..n) (s may be NULL when n is 0). */
char *acp__mcp_dupn(const acp_mem *m, const char *s, size_t n);
/* Copy of a NUL-terminated string; NULL in gives NULL out with *rv 0. */
char *acp__mcp_dupz(const acp_mem *m, const char *s, int *rv);

/* Decode a string value into a NUL-terminated heap copy. */
int acp__mcp_str_dup(const acp_mem *m, acp_json_doc *doc, const acp_json_val *v,
                     char **out, size_t *len);

/* Status for a response message (see acp_mcp_result_cb). */
int acp__mcp_status(const acp_rpc_msg *msg);

#endif /* ACP_MCP_INT_H */
