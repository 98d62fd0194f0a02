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

/*
 * Test hook, not API: the next session stream of `link` (a Streamable
 * HTTP client link) that brings an event numbered above `after`, after
 * at least one event (so that it is opened again), is cut there, as a
 * fault would: that event is dropped unread and the stream
 * ends (over HTTP/2 the client resets just that stream, RST_STREAM
 * CANCEL, on a connection that stays up; over HTTP/1.1 its socket
 * closes). The client then handles it as any broken session stream:
 * it opens the stream again with Last-Event-ID. Once; `*done` (may be
 * NULL, must outlive the link) is incremented when it happened.
 * Returns 0, or ACP_ERR_INVALID_ARGUMENT for another kind of link.
 */
int acp__remote_http_cut_session_stream(acp_uv_link *link, uint64_t after,
                                        unsigned *done);

/*
 * Test hook, not API: how many ended Streamable HTTP connection ids
 * `srv` remembers for their closing DELETE (default 4096) and for how
 * long (default 60000 ms). `max` 0 keeps none. Call before any
 * connection ended.
 */
void acp__remote_server_gone_limits(acp_remote_server *srv, unsigned max,
                                    uint64_t ms);

/*
 * Test hook, not API: the server's side of a session stream fault. The
 * next event of a session stream of `srv` numbered above `after`, after
 * at least one event, is not sent: its stream is broken off first (over
 * HTTP/2 the server resets just that stream, RST_STREAM INTERNAL_ERROR,
 * on a connection that stays up; over HTTP/1.1 it closes the stream's
 * socket), and the event waits, as every event of a session whose stream
 * is gone does, for the client to open the stream again with
 * Last-Event-ID. Events batched for the stream just before may be lost
 * in the reset; they are replayed too. Once; `*done` (may be NULL, must
 * outlive the server) is incremented when it happened. Returns 0, or
 * ACP_ERR_INVALID_ARGUMENT without a server.
 */
int acp__remote_server_cut_session_stream(acp_remote_server *srv,
                                          uint64_t after, unsigned *done);

#endif /* ACP_REMOTE_INT_H */
