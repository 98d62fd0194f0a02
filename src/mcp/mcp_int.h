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
#include "rpc/rpc_int.h"

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

/*
 * Write `result` as a 2026-07-28 result: every member copied byte for byte
 * except `_meta`, `ttlMs` and `cacheScope`; `resultType` "complete" added
 * when absent; for a complete result with ttl_ms >= 0 the CacheableResult
 * hints `ttlMs` and `cacheScope` (NULL: "private"); `_meta` last, with the
 * result's own members and, when server_info is not NULL (one JSON
 * object), `io.modelcontextprotocol/serverInfo`. Appends one object to w.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (result or its _meta not an object)
 *         or the writer's error.
 */
int acp__mcp_era_write_stateless_result(acp_json_writer *w,
                                        const acp_json_val *result,
                                        const char *server_info,
                                        size_t info_len, int64_t ttl_ms,
                                        const char *cache_scope);

#endif /* ACP_MCP_INT_H */
