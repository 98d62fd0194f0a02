/*
 * Internal interface between the modules of the libuv runtime. Not
 * installed.
 */
#ifndef ACP_UV_INTERNAL_H
#define ACP_UV_INTERNAL_H

#include "acp/uv.h"
#include "util.h"

/* Reasons a link's reading is suspended (bits of acp_uv_link.pause). */
enum {
  ACP__UV_PAUSE_USER = 1, /* not started / acp_uv_link_read_stop() */
  ACP__UV_PAUSE_RPC = 2   /* the rpc glue holds bytes after ACP_ERR_PAUSE */
};

/*
 * Create a link for a child: two uv_pipe_t initialised (not opened) for
 * uv_spawn's stdio container. *rd_out is the pipe to read the child's
 * stdout from, *wr_out the pipe to its stdin.
 */
int acp__uv_link_new_child(acp_uv_link **out, uv_loop_t *loop,
                           const acp_mem *mem, uv_pipe_t **rd_out,
                           uv_pipe_t **wr_out);

/* Set or clear a pause reason. */
void acp__uv_link_pause(acp_uv_link *l, unsigned reason, bool on);
/* As acp_uv_link_read_start(), with the consumer lending the buffer each
 * stream read goes into: buf_fn returns where to read and its room, or
 * NULL for the link's own buffer. The bytes are handed to cb at that
 * pointer. acp_uv_link_read_start() ends the loan. */
/* Bounded spin on the read side of a stream link (acp_uv_rpc_set_read_spin):
 * read(2) the non-blocking descriptor until no byte has come for
 * budget_ns, delivering what comes as the loop would. Returns 1 if
 * anything was delivered. A no-op (0) for links that are not a
 * non-blocking stream, or not reading. */
int acp__uv_link_spin(acp_uv_link *l, uint64_t budget_ns);
/* The same with `reply` true: waiting for one answer, not a stream of
 * traffic. The spin ends as soon as the bytes that came are drained (the
 * first read that finds nothing after a delivery), or budget_ns after it
 * started if nothing came. */
int acp__uv_link_spin_ex(acp_uv_link *l, uint64_t budget_ns, bool reply);
/* For tests of the spins (link.c, "Spinning reads"): how many a link made
 * that read in time on a CPU nobody else wanted (hits) and that did not
 * (misses), and how many read anything at all (got); and a switch for
 * the checks of the machine's load: 1 there is room and a yield never
 * counts as having run another task (so that a loaded machine cannot
 * decide a test), 2 there is room, -1 there is none, 0 (the default)
 * look at /proc/loadavg. */
void acp__uv_link_spin_counts(const acp_uv_link *l, unsigned long *hits,
                              unsigned long *misses, unsigned long *got);
extern int acp__uv_spin_room_force;
/* The running tasks in a /proc/loadavg text ("0.66 0.71 0.92 1/75 17798"
 * gives 1), or -1 when it has none. */
long acp__uv_loadavg_running(const char *text);
/* Blocking reads (acp_uv_rpc_set_read_block): while the loop has nothing
 * to do but wait for this link's input (no timer, no other handle that
 * could end the wait but signal watchers and child processes, nothing
 * queued to write, no signal since the loop last ran), read(2) a blocking
 * description of the read pipe (or a descriptor of the read socket)
 * instead of waiting in epoll, delivering what comes as the loop would;
 * back to the loop on anything else (end of input, a watched signal, a
 * callback that started a timer or a write). `self` is the caller's
 * prepare handle. With spin_ns > 0 each blocking read is preceded by a
 * spin of up to spin_ns (non-blocking reads, sched_yield() between them),
 * backed off while it misses or finds the CPU wanted by another task (see
 * block_spin() in link.c). Returns 1 if anything was delivered. A no-op
 * (0) unless the read side is a pipe, FIFO or stream socket. */
int acp__uv_link_block(acp_uv_link *l, const uv_prepare_t *self,
                       uint64_t spin_ns);
typedef char *(*acp__uv_link_buf_fn)(void *user_data, size_t *room);
int acp__uv_link_read_start_buf(acp_uv_link *l, acp_uv_link_read_cb cb,
                                acp__uv_link_buf_fn buf_fn, void *user_data);

/* As acp_uv_link_write(), of the concatenation of bufs[0..n): a stream
 * link with nothing queued hands them to the kernel in one writev, from
 * where they lie; what it does not take is copied, as by
 * acp_uv_link_write(). The bytes need not outlive the call. */
int acp__uv_link_writev(acp_uv_link *l, const uv_buf_t *bufs, size_t n);

/* Nonzero if the link writes to a stream (a pipe, a socket), where
 * acp__uv_link_writev() sends pieces without joining them; a user link
 * (a remote transport) takes one buffer, so pieces are joined first. */
int acp__uv_link_writes_stream(const acp_uv_link *l);

/* The source coupled to `dst`, or NULL. */
acp_uv_link *acp__uv_link_src(const acp_uv_link *dst);

/* The user_data of a user link made with ops whose write is `write`, or
 * NULL (another kind of link): lets a transport answer queries about its
 * own links. */
void *acp__uv_link_user_data(const acp_uv_link *l,
                             int (*write)(acp_uv_link *, const char *, size_t,
                                          void *));

/* Map a libuv error to an ACP_ERR_* code. */
int acp__uv_err(int uv_err);

#endif /* ACP_UV_INTERNAL_H */
