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
 * Test hook, not API: how many session streams the Streamable HTTP
 * client `link` has open (0 for another kind of link).
 */
unsigned acp__remote_http_session_streams(acp_uv_link *link);

/*
 * Test hook, not API: over every Streamable HTTP connection of `srv`,
 * how many session routes it holds (a session's numbered, kept events;
 * those of closed sessions until they are swept), and in *streams how
 * many session streams are open.
 */
unsigned acp__remote_server_session_routes(const acp_remote_server *srv,
                                           unsigned *streams);

/*
 * Test hook, not API: how many ended Streamable HTTP connection ids
 * `srv` remembers for their closing DELETE (default 4096) and for how
 * long (default 60000 ms). `max` 0 keeps none. Call before any
 * connection ended.
 */
void acp__remote_server_gone_limits(acp_remote_server *srv, unsigned max,
                                    uint64_t ms);

/*
 * Test hook, not API: the clock (ms) the window of ended ids is measured
 * with: *now_ms (read at each use; it must outlive the server or be
 * unset) instead of the loop's; NULL gives the loop's back. Set it before
 * any connection ended: the ids keep the time they were stamped with.
 */
void acp__remote_server_gone_clock(acp_remote_server *srv,
                                   const uint64_t *now_ms);

/*
 * Test hook, not API: how many ended ids `srv` remembers now, and in
 * *cap the slots allocated for them (0: the ring is freed).
 */
unsigned acp__remote_server_gone_held(const acp_remote_server *srv,
                                      unsigned *cap);

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

/*
 * acp_remote_serve()'s handoff: the socket of `link` (an open server
 * WebSocket, plain TCP, the 101 written) as *fd (borrowed, still ours)
 * and the bytes read past its request (borrowed, valid until
 * acp__remote_link_handed() or the link's close). Stops its pings; the
 * link must not be read. ACP_ERR_UNSUPPORTED for any other link (TLS,
 * Streamable HTTP, a client, the 101 still queued): relay it.
 */
int acp__remote_link_handoff_fd(acp_uv_link *link, int *fd, const char **pre,
                                size_t *pre_len);

/*
 * The agent took the socket: close our copy without a close frame or a
 * shutdown. The link stays (closing it later sends nothing) so that the
 * connection still counts against the server's cap.
 */
void acp__remote_link_handed(acp_uv_link *link);

/*
 * The head of a handoff message (handoff.c says its format, version 2)
 * with `sock` attached, on `control` (a unix stream socket with room for
 * it): the WebSocket settings in `o` (max_message, ping_ms, stall_ms) and
 * whether a dropped connection is parked (`resume`). The PRE_LEN bytes it
 * announces are the caller's to send next.
 * Returns 0 or ACP_ERR_SYSTEM (errno).
 */
int acp__handoff_send_head(int control, int sock, size_t pre_len,
                           const acp_remote_adopt_options *o, int resume);

/* One line `line[0..n)` with `sock` attached (the tests send old heads). */
int acp__handoff_send_line(int control, int sock, const char *line, size_t n);

#endif /* ACP_REMOTE_INT_H */
