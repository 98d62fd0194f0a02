/*
 * What the runtime files of libacp-remote share (remote_uv.c, the
 * WebSocket side and the server; http_client.c, the Streamable HTTP
 * client). Not installed.
 */
#ifndef ACP_REMOTE_INT_H
#define ACP_REMOTE_INT_H

#include "acp/remote.h"
#include "h2_int.h"
#include "ws_int.h"

/*
 * acp_remote_connect() for the Streamable HTTP profile: `u` was parsed
 * from the URL (not TLS), `opts` is never NULL. Same contract as
 * acp_remote_connect().
 */
int acp__remote_http_connect(acp_uv_link **out, uv_loop_t *loop,
                             const acp__url *u,
                             const acp_remote_client_options *opts,
                             acp_remote_connect_cb cb, void *user_data,
                             const acp_mem *mem);

#endif /* ACP_REMOTE_INT_H */
