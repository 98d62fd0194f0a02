/*
 * libacp-uv - the libuv runtime: child processes, byte links, and the glue
 * that runs a sans-I/O JSON-RPC session (acp/rpc.h) on a libuv loop.
 *
 * This is the only public header that names libuv types.
 *
 * Objects
 * -------
 *   acp_uv_link     a byte transport: one readable and one writable side
 *                   (our stdin/stdout, a child's pipes, a socket).
 *   acp_uv_process  a child process in its own process group, with a link
 *                   on its stdin/stdout, optional stderr capture and a
 *                   shutdown ladder (stdin EOF, SIGTERM, SIGKILL).
 *   acp_uv_rpc      binds an acp_rpc_session to a link.
 *   acp_uv_signals  a SIGTERM/SIGINT watcher.
 *
 * Lifetime rules (see docs/ownership.md)
 * --------------------------------------
 *   1. Every object here embeds libuv handles. It is created by a function
 *      taking `T **out`, and released ONLY by its `_close` function, which
 *      closes the handles; the memory is freed from the last libuv close
 *      callback, right after the user's close callback (if any) returned.
 *      The loop must therefore run after `_close` (uv_run until it returns
 *      0) before uv_loop_close() can succeed.
 *   2. No callback of an object runs after its close callback.
 *   3. Bytes given to a write function are copied into the write request's
 *      own buffer, which is freed in the write callback; the caller's buffer
 *      may be reused as soon as the function returns.
 *   4. Bytes handed to a read callback are borrowed and valid only during
 *      the callback.
 *   5. A constructor that fails leaves `*out == NULL` and owns nothing that
 *      the caller must release (handles it had opened are closed on the
 *      loop by the library; running the loop reclaims them).
 *
 * Errors: functions return 0 or a negative ACP_ERR_* code (acp/common.h).
 * Where an operating-system error is available it is reported as a libuv
 * error code (negative UV_E*, use uv_strerror()) through a separate
 * accessor or out-parameter, never mixed into the ACP_ERR_* band.
 *
 * Thread-safety: every object belongs to the loop's thread. None of these
 * functions may be called from another thread.
 *
 * SIGPIPE: writing to a pipe whose reader is gone raises SIGPIPE, which
 * kills the process by default. Call acp_uv_ignore_sigpipe() once at start;
 * write failures then arrive as UV_EPIPE (acp_uv_link_write_error()).
 */
#ifndef ACP_UV_H
#define ACP_UV_H

/*
 * libuv's header needs POSIX declarations (pthread types). Under a strict
 * ISO mode (-std=c11, which hides them) ask for POSIX.1-2008, unless the
 * includer chose a feature set itself. This works only if no system
 * header was included before this one; otherwise compile with
 * -D_POSIX_C_SOURCE=200809L (or a GNU mode), as libuv itself requires.
 */
#if defined(__STRICT_ANSI__) && !defined(_WIN32) &&                            \
    !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) &&                    \
    !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <uv.h>

#include "common.h"
#include "rpc.h"
#include "mcp.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A timeout meaning "no limit" (wait as long as it takes). */
#define ACP_UV_FOREVER UINT64_MAX

/** Default high-water mark of a coupling (acp_uv_link_couple()): 1 MiB. */
#define ACP_UV_DEFAULT_HIGH_WATER ((size_t)1 << 20)

/** Default capacity of a child's captured stderr tail: 8 KiB. */
#define ACP_UV_DEFAULT_TAIL ((size_t)8 << 10)

/** Default wait of each shutdown-ladder rung, in milliseconds. */
#define ACP_UV_DEFAULT_GRACE_MS 1000

/* MARK: - Process-wide helpers */

/**
 * Ignore SIGPIPE for the whole process (sets its disposition to SIG_IGN),
 * so that writing to a closed pipe fails with UV_EPIPE instead of killing
 * the process. Idempotent. Not thread-safe with respect to other code
 * changing signal dispositions at the same time.
 * @return 0 or ACP_ERR_SYSTEM.
 */
ACP_EXTERN int acp_uv_ignore_sigpipe(void);

/* MARK: - Links (byte transports) */

/** A byte transport with one readable and one writable side. Opaque. */
typedef struct acp_uv_link acp_uv_link;

/**
 * Read callback.
 * @param link    the link.
 * @param status  0 when `data`/`len` hold received bytes (len > 0);
 *                UV_EOF once when the readable side reached end of input;
 *                another negative libuv code once on a read error. After
 *                UV_EOF or an error no further read callback comes.
 * @param data    received bytes, borrowed, valid during the call only.
 * @param len     number of bytes in `data` (0 unless status is 0).
 * @param user_data the pointer given to acp_uv_link_read_start().
 * The callback may call any link function, including _read_stop, _write
 * and _close on this link.
 */
typedef void (*acp_uv_link_read_cb)(acp_uv_link *link, int status,
                                    const char *data, size_t len,
                                    void *user_data);

/** Called once when a link is fully closed, just before it is freed. */
typedef void (*acp_uv_link_close_cb)(acp_uv_link *link, void *user_data);

/**
 * Create a link over two file descriptors, typically our own stdin (0) and
 * stdout (1). Each descriptor is dup()ed; the originals stay open and are
 * never closed by the link. The kind of each is detected
 * (uv_guess_handle()): pipes and unix sockets use uv_pipe_t, TCP sockets
 * uv_tcp_t, terminals uv_tty_t, and regular files or character devices
 * such as /dev/null (on which uv_pipe_open fails) use sequential uv_fs
 * reads and writes on the thread pool. Pipes and sockets are switched to
 * non-blocking mode, which is shared with the original descriptor; the
 * original flags are restored when the link closes.
 *
 * @param out    receives the link (NULL on failure).
 * @param loop   the loop; must outlive the link.
 * @param in_fd  descriptor to read from, or -1 for no readable side (the
 *               link then never calls its read callback).
 * @param out_fd descriptor to write to, or -1 for no writable side (writes
 *               fail with ACP_ERR_CLOSED).
 * @param mem    allocator (copied) or NULL for the default.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL out/loop, both fds -1),
 *         ACP_ERR_UNSUPPORTED (a descriptor of unknown kind),
 *         ACP_ERR_SYSTEM (dup() or the libuv open failed), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_uv_link_new_fds(acp_uv_link **out, uv_loop_t *loop,
                                   int in_fd, int out_fd, const acp_mem *mem);

/**
 * Create a link over already-created libuv streams (a connected uv_tcp_t,
 * a uv_pipe_t on a unix socket, ...). `in` and `out` may be the same
 * stream (a socket). The link takes over the streams: it sets their `data`
 * field, starts and stops reading, writes, and uv_close()s them when the
 * link closes. The handle MEMORY stays the caller's and must stay valid
 * until the link's close callback has run; it may be freed from there.
 *
 * @param in   stream to read from, or NULL.
 * @param out  stream to write to, or NULL. At least one is required.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_uv_link_new_streams(acp_uv_link **out_link, uv_loop_t *loop,
                                       uv_stream_t *in, uv_stream_t *out,
                                       const acp_mem *mem);

/**
 * Start delivering received bytes to `cb`. May be called again to change
 * the callback or after acp_uv_link_read_stop(). Reading also stays
 * suspended while a coupling (acp_uv_link_couple()) holds the link back.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL link or cb),
 *         ACP_ERR_CLOSED (closing, no readable side, or EOF/error already
 *         reported), ACP_ERR_SYSTEM (uv_read_start failed).
 */
ACP_EXTERN int acp_uv_link_read_start(acp_uv_link *link, acp_uv_link_read_cb cb,
                                      void *user_data);

/**
 * Stop delivering bytes until the next acp_uv_link_read_start(). No read
 * callback runs after this returns (for file descriptors, a read already
 * in flight is held and delivered after the next start). Idempotent.
 */
ACP_EXTERN void acp_uv_link_read_stop(acp_uv_link *link);

/**
 * Nonzero if the link is currently reading: started by the user, not held
 * back by a coupling, not at EOF, not closing.
 */
ACP_EXTERN int acp_uv_link_is_reading(const acp_uv_link *link);

/**
 * Queue `len` bytes for writing. The bytes are copied (rule 3), so `data`
 * may be reused at once. Writes complete in order.
 * @return 0 (also for len == 0), ACP_ERR_INVALID_ARGUMENT (NULL link, or
 *         NULL data with len > 0), ACP_ERR_CLOSED (no writable side,
 *         closing, shut down, or an earlier write failed: see
 *         acp_uv_link_write_error()), ACP_ERR_SYSTEM (libuv refused the
 *         write at once; the error is kept for acp_uv_link_write_error()),
 *         ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_uv_link_write(acp_uv_link *link, const char *data,
                                 size_t len);

/**
 * Bytes accepted by acp_uv_link_write() whose write has not completed yet
 * (queued in libuv or in flight on the thread pool). This is the figure
 * couplings compare with their water marks.
 */
ACP_EXTERN size_t acp_uv_link_write_queue_size(const acp_uv_link *link);

/**
 * Largest finished write buffer the link keeps for its next write (default
 * 16 MiB). Reuse spares large messages fresh pages on every write (a third
 * of a 1 MiB round trip in the measurements); a process that forwards large
 * messages over many links and must stay small at rest (the conductor)
 * lowers it. 0 disables reuse; a kept buffer larger than `bytes` is freed
 * at once.
 */
ACP_EXTERN void acp_uv_link_set_spare_max(acp_uv_link *link, size_t bytes);

/**
 * The first write error (a negative libuv code such as UV_EPIPE), or 0.
 * After a write error the writable side discards everything and further
 * writes fail with ACP_ERR_CLOSED.
 */
ACP_EXTERN int acp_uv_link_write_error(const acp_uv_link *link);

/**
 * End the writable side gracefully: pending writes are flushed, then the
 * side is closed (pipes, TTYs, files) or shut down (a stream used for both
 * directions, via uv_shutdown), so the peer sees end of input. Reading
 * continues. Further writes fail with ACP_ERR_CLOSED. Idempotent.
 * @return 0, ACP_ERR_CLOSED (the link is closing).
 */
ACP_EXTERN int acp_uv_link_shutdown(acp_uv_link *link);

/**
 * Close the link. Reading stops at once; then pending writes are given up
 * to `flush_timeout_ms` to complete (0: discard them at once;
 * ACP_UV_FOREVER: no limit), then every handle is closed and `cb` runs
 * (may be NULL), after which the link is freed (rule 1). Couplings that
 * involve the link are removed (a source held back by it resumes).
 * Calling it twice is a programming error, except that a second call while
 * flushing only shortens the wait to "now" when its timeout is 0.
 */
ACP_EXTERN void acp_uv_link_close(acp_uv_link *link, uint64_t flush_timeout_ms,
                                  acp_uv_link_close_cb cb, void *user_data);

/**
 * Say why the link is being closed, for a transport that can tell its peer
 * (a WebSocket close frame carries it): a WebSocket close code, e.g. 1000
 * (normal, the default) or 1011 (what stands behind the link failed, such
 * as an agent that died). Call before acp_uv_link_shutdown() or
 * acp_uv_link_close(). Links over pipes, sockets and files ignore it.
 */
ACP_EXTERN void acp_uv_link_set_close_code(acp_uv_link *link, int code);

/** Transport side: the code given to acp_uv_link_set_close_code(), or 0. */
ACP_EXTERN int acp_uv_link_close_code(const acp_uv_link *link);

/** The loop the link runs on. */
ACP_EXTERN uv_loop_t *acp_uv_link_loop(const acp_uv_link *link);

/**
 * Backpressure, in one place: couple `src` (whose reads are being written
 * to `dst`) to `dst`. Whenever `dst`'s write queue size
 * (acp_uv_link_write_queue_size()) exceeds `high_water` after a write,
 * reading from `src` is suspended; it resumes once the queue has drained
 * to `low_water` or below. The queue can thus exceed `high_water` by at
 * most one read callback's worth of data per coupled source.
 *
 * A destination has at most one source (a new call replaces the previous
 * coupling); a source may feed several destinations (it reads only while
 * none of them holds it back). `src` may equal `dst` (an RPC peer that
 * reads requests and writes responses on the same link). The coupling ends
 * when either link closes.
 *
 * @param high_water  0 selects ACP_UV_DEFAULT_HIGH_WATER.
 * @param low_water   must be < high_water; a value >= high_water (or 0 with
 *                    high_water 0) selects high_water / 2.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL link), ACP_ERR_CLOSED (either
 *         link is closing).
 */
ACP_EXTERN int acp_uv_link_couple(acp_uv_link *src, acp_uv_link *dst,
                                  size_t high_water, size_t low_water);

/** Remove the coupling feeding `dst`, if any (resuming its source). */
ACP_EXTERN void acp_uv_link_uncouple(acp_uv_link *dst);

/* MARK: - User links (a transport written outside libacp-uv) */

/**
 * The transport behind a user link (acp_uv_link_new_user()): a WebSocket,
 * a TLS stream, anything that can carry bytes. The link calls these from
 * the loop's thread; none of them may close the link.
 */
typedef struct acp_uv_link_ops {
  /**
   * Take `len` (> 0) bytes written to the link. The transport copies what
   * it keeps. It reports them sent with acp_uv_link_user_written() (the
   * figure couplings see as the write queue until then), or all pending
   * bytes lost with acp_uv_link_user_write_failed(). Return 0, or an
   * ACP_ERR_* code that acp_uv_link_write() returns (nothing was taken).
   * Required.
   */
  int (*write)(acp_uv_link *link, const char *data, size_t len,
               void *user_data);
  /**
   * Reading was turned on (1) or off (0): by the user, by a coupling, or by
   * the rpc glue. While off, acp_uv_link_user_deliver() refuses bytes; the
   * transport stops reading its own source and holds what it has. May be
   * NULL.
   */
  void (*read_changed)(acp_uv_link *link, int reading, void *user_data);
  /** The writable side ends (acp_uv_link_shutdown()), after every byte
   *  written before was reported sent. May be NULL. */
  void (*shutdown)(acp_uv_link *link, void *user_data);
  /**
   * The link is closing: after this returns the transport must not call
   * any acp_uv_link_user_* function on it again (the link is freed on a
   * later loop iteration). Called once. May be NULL.
   */
  void (*close)(acp_uv_link *link, void *user_data);
} acp_uv_link_ops;

/**
 * Create a link whose bytes come from and go to a transport outside the
 * runtime (`ops`, copied). Everything that runs on a link (acp_uv_rpc,
 * couplings, a relay) runs on it unchanged. The link starts with reading
 * off; `ops->read_changed` says when it turns on.
 * @param user_data passed to every op.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL out/loop/ops/ops->write),
 *         ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_uv_link_new_user(acp_uv_link **out, uv_loop_t *loop,
                                    const acp_uv_link_ops *ops, void *user_data,
                                    const acp_mem *mem);

/**
 * Transport side: hand received bytes to the link's read callback (they
 * are borrowed for the call). The callback may stop reading, so check the
 * result before delivering more.
 * @return 0 (delivered), ACP_ERR_PAUSE (not reading now: nothing was
 *         delivered; hold the bytes until read_changed(1)),
 *         ACP_ERR_INVALID_ARGUMENT (not a user link).
 */
ACP_EXTERN int acp_uv_link_user_deliver(acp_uv_link *link, const char *data,
                                        size_t len);

/**
 * Transport side: the readable side ended; the read callback gets
 * `status` (UV_EOF for a clean end, or a negative libuv code). Once.
 */
ACP_EXTERN void acp_uv_link_user_end(acp_uv_link *link, int status);

/** Transport side: `len` bytes given to `ops->write` have been sent. */
ACP_EXTERN void acp_uv_link_user_written(acp_uv_link *link, size_t len);

/**
 * Transport side: the bytes not yet reported sent are lost (the peer is
 * gone); `uv_err` becomes acp_uv_link_write_error() and later writes fail.
 */
ACP_EXTERN void acp_uv_link_user_write_failed(acp_uv_link *link, int uv_err);

/* MARK: - Child processes */

/** A spawned child process. Opaque. */
typedef struct acp_uv_process acp_uv_process;

/** What happens to a child's stderr. */
typedef enum acp_uv_stderr_mode {
  /** The child writes to our stderr (default). */
  ACP_UV_STDERR_INHERIT = 0,
  /** The child's stderr goes to /dev/null. */
  ACP_UV_STDERR_IGNORE = 1,
  /**
   * Read through a pipe: the last bytes are kept (acp_uv_process_tail()),
   * and each line is passed to the line callback if one is set.
   */
  ACP_UV_STDERR_CAPTURE = 2
} acp_uv_stderr_mode;

/**
 * Called once when the child has exited and been reaped.
 * @param exit_status  the exit code (0..255) if it exited normally.
 * @param term_signal  the signal that killed it, or 0.
 * When stderr is captured, everything the child wrote to stderr before
 * exiting has been read (and passed to the line callback) before this runs.
 */
typedef void (*acp_uv_process_exit_cb)(acp_uv_process *p, int64_t exit_status,
                                       int term_signal, void *user_data);

/**
 * Called with each line the child writes to a captured stderr, without the
 * newline (`line` borrowed, not NUL-terminated). Lines longer than the
 * tail capacity are delivered in pieces of that size; an unterminated last
 * line is delivered at end of input.
 */
typedef void (*acp_uv_process_line_cb)(acp_uv_process *p, const char *line,
                                       size_t len, void *user_data);

/** Called when the shutdown ladder is complete (the child was reaped). */
typedef void (*acp_uv_process_shutdown_cb)(acp_uv_process *p, void *user_data);

/** Called once when a process object is fully closed, before it is freed. */
typedef void (*acp_uv_process_close_cb)(acp_uv_process *p, void *user_data);

/** Spawn options. Opaque; every setter copies what it is given. */
typedef struct acp_uv_process_options acp_uv_process_options;

/** @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM. */
ACP_EXTERN int acp_uv_process_options_new(acp_uv_process_options **out,
                                          const acp_mem *mem);
/** Accepts NULL. */
ACP_EXTERN void acp_uv_process_options_free(acp_uv_process_options *opts);
/**
 * The program and its arguments: a NULL-terminated array; argv[0] is the
 * program, looked up in PATH when it contains no '/'. Copied. Required.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL or empty argv), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_uv_process_options_set_argv(acp_uv_process_options *opts,
                                               const char *const *argv);
/**
 * Add one "KEY=VALUE" string to the child's environment, which is ours
 * plus these additions (an addition replaces an inherited variable of the
 * same name; later additions win). Copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL, or no '=' after a non-empty
 *         name), ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_uv_process_options_add_env(acp_uv_process_options *opts,
                                              const char *key_value);
/** Working directory of the child (copied), NULL for ours. 0 or NOMEM. */
ACP_EXTERN int acp_uv_process_options_set_cwd(acp_uv_process_options *opts,
                                              const char *cwd);
/**
 * Give the child our descriptor `fd` as its descriptor 3 (a listening
 * socket, say); -1 (the default) for none. Borrowed: the caller keeps and
 * closes its own `fd` (after acp_uv_process_spawn() returned).
 */
ACP_EXTERN void acp_uv_process_options_set_fd3(acp_uv_process_options *opts,
                                               int fd);
/** stderr handling; default ACP_UV_STDERR_INHERIT. */
ACP_EXTERN void acp_uv_process_options_set_stderr(acp_uv_process_options *opts,
                                                  acp_uv_stderr_mode mode);
/** Capacity of the stderr tail in bytes (0 = ACP_UV_DEFAULT_TAIL). */
ACP_EXTERN void
acp_uv_process_options_set_tail_size(acp_uv_process_options *opts,
                                     size_t bytes);
/** Exit callback (may be NULL). */
ACP_EXTERN void acp_uv_process_options_set_exit_cb(acp_uv_process_options *opts,
                                                   acp_uv_process_exit_cb cb);
/** Per-line callback for a captured stderr (may be NULL). */
ACP_EXTERN void acp_uv_process_options_set_line_cb(acp_uv_process_options *opts,
                                                   acp_uv_process_line_cb cb);
/**
 * Waits of the shutdown ladder: `stdin_grace_ms` after closing the child's
 * stdin before SIGTERM, `term_grace_ms` after SIGTERM before SIGKILL.
 * Default ACP_UV_DEFAULT_GRACE_MS each.
 */
ACP_EXTERN void acp_uv_process_options_set_grace(acp_uv_process_options *opts,
                                                 uint64_t stdin_grace_ms,
                                                 uint64_t term_grace_ms);

/**
 * Spawn a child with pipes on its stdin and stdout.
 *
 * The child runs in a new session and process group of its own (libuv's
 * UV_PROCESS_DETACHED, i.e. setsid() in the child) for two reasons:
 * signals can then be sent to the whole group, so grandchildren it started
 * die with it; and a Ctrl-C on our terminal (SIGINT to the foreground
 * group) does not reach the child directly, so the parent decides the
 * shutdown order. The handle still keeps the loop alive and the child is
 * still reaped. uv_disable_stdio_inheritance() is called once, before the
 * first spawn, so the child inherits no descriptor but its stdio.
 *
 * @param out        receives the process (NULL on failure).
 * @param loop       the loop; must outlive the process.
 * @param opts       options (argv required); copied, may be freed after.
 * @param user_data  passed to every callback of this process.
 * @param mem        allocator (copied) or NULL.
 * @param uv_err_out optional; receives the libuv error when the spawn
 *                   itself failed (e.g. UV_ENOENT), else 0.
 * @return 0; ACP_ERR_INVALID_ARGUMENT (NULL out/loop/opts, no argv);
 *         ACP_ERR_NOT_FOUND (the program does not exist: UV_ENOENT);
 *         ACP_ERR_SYSTEM (any other spawn failure); ACP_ERR_NOMEM. On a
 *         spawn failure the handles already initialised are closed by the
 *         library (rule 5): run the loop to reclaim them.
 */
ACP_EXTERN int acp_uv_process_spawn(acp_uv_process **out, uv_loop_t *loop,
                                    const acp_uv_process_options *opts,
                                    void *user_data, const acp_mem *mem,
                                    int *uv_err_out);

/**
 * The link on the child's stdout (readable) and stdin (writable).
 * Borrowed: owned by the process and closed by acp_uv_process_close();
 * never pass it to acp_uv_link_close(). acp_uv_link_shutdown() on it
 * closes the child's stdin.
 */
ACP_EXTERN acp_uv_link *acp_uv_process_link(const acp_uv_process *p);

/** The child's pid (also its process group id). */
ACP_EXTERN int acp_uv_process_pid(const acp_uv_process *p);

/** Nonzero once the child has exited and been reaped. */
ACP_EXTERN int acp_uv_process_exited(const acp_uv_process *p);

/**
 * The captured stderr tail: the last bytes written (at most the tail
 * size), starting at a line boundary when anything was dropped. Borrowed,
 * valid until the next loop iteration; not NUL-terminated. Returns NULL
 * with *len = 0 when stderr is not captured or nothing was written.
 */
ACP_EXTERN const char *acp_uv_process_tail(const acp_uv_process *p,
                                           size_t *len);

/**
 * Send `signum` to the child's whole process group.
 * @return 0, ACP_ERR_CLOSED (already exited), ACP_ERR_SYSTEM.
 */
ACP_EXTERN int acp_uv_process_kill(acp_uv_process *p, int signum);

/**
 * Stop the child gracefully with the shutdown ladder: close its stdin
 * (pending writes flushed first), wait up to the stdin grace for it to
 * exit, send SIGTERM to its process group, wait up to the term grace, send
 * SIGKILL to the group. When the child has been reaped (its exit callback
 * has run), any process left in its group is sent SIGKILL, then `cb` runs
 * (may be NULL). If the child had already exited, `cb` runs on the next
 * loop iteration.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (NULL p), ACP_ERR_INVALID_STATE (a
 *         shutdown is already under way, or the process is closing).
 */
ACP_EXTERN int acp_uv_process_shutdown(acp_uv_process *p,
                                       acp_uv_process_shutdown_cb cb);

/**
 * Release the process object. If the child is still running, its group is
 * sent SIGKILL and the handle is closed only after the child has been
 * reaped (no zombie is left). Its link is closed without flushing. `cb`
 * (may be NULL) runs once everything is closed; the object is then freed.
 * Accepts NULL. Call acp_uv_process_shutdown() first for a graceful stop.
 */
ACP_EXTERN void acp_uv_process_close(acp_uv_process *p,
                                     acp_uv_process_close_cb cb);

/* MARK: - Signals */

/** A SIGTERM + SIGINT watcher. Opaque. */
typedef struct acp_uv_signals acp_uv_signals;

/** Called on each SIGTERM or SIGINT received (`signum` tells which). */
typedef void (*acp_uv_signal_cb)(acp_uv_signals *sig, int signum,
                                 void *user_data);

/**
 * Watch SIGTERM and SIGINT. The watcher does not keep the loop alive.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_SYSTEM, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_uv_signals_new(acp_uv_signals **out, uv_loop_t *loop,
                                  acp_uv_signal_cb cb, void *user_data,
                                  const acp_mem *mem);

/** Stop watching and free (from the close callback). Accepts NULL. */
ACP_EXTERN void acp_uv_signals_close(acp_uv_signals *sig);

/* MARK: - JSON-RPC session on a link */

/** Binds an acp_rpc_session to a link. Opaque. */
typedef struct acp_uv_rpc acp_uv_rpc;

/**
 * Called once when the connection ended.
 * @param reason 0: the peer closed its side (EOF) and the session was told
 *               (acp_rpc_session_recv_eof(); pending requests completed);
 *               ACP_ERR_SYSTEM: a read error (acp_uv_rpc_uv_error() tells
 *               which; the session was told EOF too);
 *               a fatal ACP_ERR_* code: the session failed.
 * Output produced until then has been handed to the link. The callback
 * typically closes the rpc object, then the link.
 */
typedef void (*acp_uv_rpc_end_cb)(acp_uv_rpc *r, int reason, void *user_data);

/** Called once when the rpc object is closed, before it is freed. */
typedef void (*acp_uv_rpc_close_cb)(acp_uv_rpc *r, void *user_data);

/**
 * Start running `session` on `link`: received bytes go to
 * acp_rpc_session_recv(s, data, len, uv_now(loop)); session output is
 * written to the link; a timer armed at acp_rpc_session_get_expiry() calls
 * acp_rpc_session_handle_expiry(); end of input calls
 * acp_rpc_session_recv_eof(). Output submitted at any time (inside or
 * outside callbacks) is flushed automatically by a prepare handle before
 * the loop next waits for I/O, which also re-arms the timer.
 *
 * When a session callback returns ACP_ERR_PAUSE, reading stops and the
 * unconsumed bytes are held until acp_uv_rpc_resume(). (A pause on the
 * last complete line of a read leaves nothing unconsumed and is not
 * observable through rpc.h; reading then simply continues.) The link is also
 * coupled to itself (acp_uv_link_couple(link, link, 0, 0)) so a peer that
 * does not read its responses stops being read.
 *
 * The rpc object takes over the link's read callback, but neither the
 * session nor the link is owned: both must outlive the rpc object.
 *
 * @param end_cb  may be NULL.
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_CLOSED (link cannot read),
 *         ACP_ERR_SYSTEM, ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_uv_rpc_new(acp_uv_rpc **out, acp_uv_link *link,
                              acp_rpc_session *session,
                              acp_uv_rpc_end_cb end_cb, void *user_data,
                              const acp_mem *mem);

/**
 * Opt-in bounded spin on the read side, for a program that serves one
 * peer over a pipe or socket (an agent on stdio, a client of one agent):
 * before the loop would sleep, after a round that received or sent bytes,
 * the link's descriptor is polled with read(2) until nothing has come for
 * `usec` microseconds; what comes is handled at once. A reply inside the
 * budget then skips the sleep and the wake-up through the kernel, which
 * costs about 50 us on machines where the peer runs on another CPU. The
 * price is CPU: up to `usec` of busy polling after each burst of traffic
 * (never while idle). 0 (the default) turns it off. It only applies to a
 * non-blocking stream link; while it spins, other handles of the loop
 * wait, so use it only where this link is all the program serves. The
 * trade, measured, is in docs/decisions.md. NULL is ignored.
 */
ACP_EXTERN void acp_uv_rpc_set_read_spin(acp_uv_rpc *r, uint32_t usec);

/**
 * Opt-in blocking reads, for a program whose one link is all it serves
 * (an agent on stdio, a client talking to the one agent it spawned):
 * whenever the loop has nothing else to wait for (no timer, no other
 * handle that could end the wait, nothing queued to write), the program
 * waits in read(2) on its input pipe, as `cat` does, instead of in epoll
 * and then read(2): one system call a message fewer, and the kernel's
 * direct pipe wake-up. Anything else puts the loop back in charge: a
 * callback that starts a timer, another stream or a write that must wait.
 * Signals the loop watches end the wait, whenever they come: libuv's
 * handlers for them are wrapped, process-wide, by one that counts them,
 * makes a read under way return (the wrapper does not restart system
 * calls) and makes one about to begin return at once; any signal since
 * the loop last had control sends it round again before it may block.
 * SIGCHLD counts as watched while a child process handle is active, so a
 * child's exit is seen even when a grandchild keeps the pipe open. With
 * watched signals the read blocks only on the main thread (where the
 * kernel delivers process signals first); on another thread the loop
 * waits as usual. Applies when the read side is a
 * pipe or FIFO (reopened blocking through /proc/self/fd) or a stream
 * socket that is not also the output (made blocking while the loop has
 * nothing else to do); elsewhere this is a no-op. 0 (the default) turns
 * it off. The trade, measured, is in docs/decisions.md. NULL is ignored.
 */
ACP_EXTERN void acp_uv_rpc_set_read_block(acp_uv_rpc *r, int on);

/**
 * Write everything the session has to send now and re-arm the timer.
 * Normally unnecessary (automatic before each wait); useful before closing.
 * @return 0, ACP_ERR_CLOSED (link write side gone), or a fatal code from
 *         the session.
 */
ACP_EXTERN int acp_uv_rpc_flush(acp_uv_rpc *r);

/**
 * Resume reading after a session callback returned ACP_ERR_PAUSE. Held
 * bytes are fed to the session on the next loop iteration (never from
 * inside this call, so it may be called from a session callback).
 */
ACP_EXTERN void acp_uv_rpc_resume(acp_uv_rpc *r);

/** Nonzero while paused by ACP_ERR_PAUSE. */
ACP_EXTERN int acp_uv_rpc_paused(const acp_uv_rpc *r);

/** The libuv error behind an ACP_ERR_SYSTEM end reason, else 0. */
ACP_EXTERN int acp_uv_rpc_uv_error(const acp_uv_rpc *r);

/**
 * Detach from the link (reading stops; the link is left open) after a
 * final flush, close the handles, run `cb` (may be NULL) and free.
 * Accepts NULL.
 */
ACP_EXTERN void acp_uv_rpc_close(acp_uv_rpc *r, acp_uv_rpc_close_cb cb);

/**
 * Blocking convenience: run `session` on our stdin (fd 0) and stdout
 * (fd 1) on a private loop until stdin reaches EOF (or SIGTERM/SIGINT
 * arrives, which acts as EOF), then flush the output for up to
 * `flush_timeout_ms` (ACP_UV_FOREVER: no limit), close everything and
 * return. Ignores SIGPIPE (acp_uv_ignore_sigpipe()). When stdin is a pipe
 * or a socket the wait for the next message is a read(2) on it, not epoll
 * (acp_uv_rpc_set_read_block(): the handlers of SIGTERM and SIGINT are
 * then wrapped, process-wide, and do not restart system calls).
 * @return the end reason (0 for EOF or a signal, ACP_ERR_SYSTEM, a fatal
 *         session code) or an error from creating the objects.
 */
ACP_EXTERN int acp_uv_run_stdio(acp_rpc_session *session,
                                uint64_t flush_timeout_ms);

/**
 * As acp_uv_run_stdio(), with explicit descriptors (e.g. a file as input).
 */
ACP_EXTERN int acp_uv_run_fds(acp_rpc_session *session, int in_fd, int out_fd,
                              uint64_t flush_timeout_ms);

/* MARK: - MCP server on stdio */

/*
 * In libacp-uv, not libacp-http: a stdio MCP server links neither libcurl
 * nor libmicrohttpd.
 */

/**
 * Blocking: serve `conn` on `in_fd` / `out_fd` (newline-delimited JSON-RPC,
 * the MCP stdio transport) on a private loop until end of input, a fatal
 * conn error, or SIGTERM/SIGINT (which acts as end of input); then flush
 * the output for up to `flush_timeout_ms` (ACP_UV_FOREVER: no limit) and
 * return. Received bytes go to acp_mcp_conn_recv() with the loop's
 * uv_now(), and a timer drives acp_mcp_conn_handle_expiry(), so the
 * timeouts of server->client requests (acp_mcp_call_request()) run on
 * the loop's clock; output produced from any callback is written before
 * the loop next waits. Input left unconsumed by a handler that returned
 * ACP_ERR_PAUSE is offered again on each loop iteration. The conn is
 * borrowed (not freed). Ignores SIGPIPE. Descriptors are dup()ed (as
 * acp_uv_link_new_fds()).
 * @return the end reason: 0 (end of input or a signal), ACP_ERR_SYSTEM (a
 *         read error), a fatal code from the conn; or ACP_ERR_INVALID_ARGUMENT,
 *         ACP_ERR_SYSTEM, ACP_ERR_UNSUPPORTED, ACP_ERR_NOMEM from setting up.
 */
ACP_EXTERN int acp_mcp_run_fds(acp_mcp_conn *conn, int in_fd, int out_fd,
                               uint64_t flush_timeout_ms);
/** acp_mcp_run_fds(conn, 0, 1, flush_timeout_ms). */
ACP_EXTERN int acp_mcp_run_stdio(acp_mcp_conn *conn, uint64_t flush_timeout_ms);

/**
 * acp_mcp_run_fds() with a bounded spin on the read side (0: none, as
 * acp_mcp_run_fds()): after a loop iteration that read or wrote, the read
 * descriptor is polled for up to `read_spin_us` microseconds since the last
 * bytes came, yielding the CPU between polls, before the loop sleeps; bytes
 * that come meanwhile are handled at once. It saves the wake-up through the
 * kernel of a client that sends its next request soon after our answer,
 * at the price of that much CPU after each burst of traffic and none while
 * idle; only a pipe or socket is polled (docs/decisions.md, "Wake-ups").
 * Same arguments, behaviour and results as acp_mcp_run_fds() otherwise.
 */
ACP_EXTERN int acp_mcp_run_fds_spin(acp_mcp_conn *conn, int in_fd, int out_fd,
                                    uint64_t flush_timeout_ms,
                                    uint32_t read_spin_us);

/**
 * acp_mcp_run_fds_spin(), and with `read_block` nonzero, blocking reads:
 * while the loop has nothing else to wait for (no timer, no server->client
 * request in flight, nothing queued to write), it waits in read(2) on
 * `in_fd` instead of in epoll, as acp_uv_rpc_set_read_block() describes
 * (a pipe, FIFO or stream socket; elsewhere the flag changes nothing). Same
 * arguments, behaviour and results otherwise.
 */
ACP_EXTERN int acp_mcp_run_fds_ex(acp_mcp_conn *conn, int in_fd, int out_fd,
                                  uint64_t flush_timeout_ms,
                                  uint32_t read_spin_us, int read_block);

/* MARK: - MCP bridge handshakes */

/*
 * How the MCP endpoints of a conductor's bridge (acp/mcp_bridge.h) reach
 * it: the shim (`acp mcp-shim SOCKET TOKEN`, the stdio server an agent is
 * given) and the HTTP helper (`acp mcp http-bridge`, one connection per
 * Streamable HTTP session) connect to the conductor's private unix socket
 * and send TOKEN and a newline first, then one JSON-RPC message per line
 * each way. The shim sends its token with its own stdin and stdout
 * attached (SCM_RIGHTS), so that the conductor reads and writes the
 * agent's pipes itself; it falls back to relaying bytes. The helper's
 * stdin is a control input of lines "+TOKEN" (a server's bearer token is
 * valid) and "-TOKEN" (no longer); its end ends the helper. These are the
 * only places that know those formats.
 */

/** Length of a bridge token (hex digits). */
#define ACP_UV_BRIDGE_TOKEN_LEN 32

/**
 * The whole shim: connect to `socket_path`, send `token`; unless `relay`
 * with our stdin and stdout attached, after which our own copies point at
 * /dev/null and we wait for the conductor to close the connection;
 * otherwise (or when passing them fails) copy stdin to the socket and the
 * socket to stdout until either ends. Blocking, plain POSIX (poll): a shim
 * is one short process per MCP connection. Ignores SIGPIPE.
 * @return 0 (the connection ended), ACP_ERR_INVALID_ARGUMENT (NULL, or a
 *         path too long for a unix socket), ACP_ERR_SYSTEM (cannot connect
 *         or send; errno tells why).
 */
ACP_EXTERN int acp_uv_bridge_shim_run(const char *socket_path,
                                      const char *token, int relay);

/**
 * A control line for the HTTP helper: "+TOKEN\n" (`valid`) or "-TOKEN\n".
 * @param out  at least ACP_UV_BRIDGE_TOKEN_LEN + 3 bytes (NUL-terminated).
 * @return its length (without the NUL), or ACP_ERR_INVALID_ARGUMENT (a
 *         token of another length, or `cap` too small).
 */
ACP_EXTERN int acp_uv_bridge_ctl_format(char *out, size_t cap, int valid,
                                        const char *token);
/**
 * Parse one control line (no newline): `*valid` gets 1 for "+", 0 for "-";
 * `*token` points into `line` (ACP_UV_BRIDGE_TOKEN_LEN bytes).
 * @return 0, or ACP_ERR_PARSE (not a control line: ignore it).
 */
ACP_EXTERN int acp_uv_bridge_ctl_parse(const char *line, size_t len, int *valid,
                                       const char **token);

/**
 * Conductor side: after a shim's token line arrived on `control` (a pipe
 * initialised with ipc = 1), take the two descriptors it passed with it
 * (its stdin, then its stdout) into `rd` and `wr`, initialised here on
 * `loop`. `rd` is not read yet. Whatever the result, when this returned
 * anything but 0 (no descriptors: the shim relays), `rd` and `wr` are
 * initialised and must be closed with `control`.
 * @return 0 (nothing was passed; `rd` and `wr` untouched), 1 (taken),
 *         ACP_ERR_SYSTEM.
 */
ACP_EXTERN int acp_uv_bridge_take_fds(uv_loop_t *loop, uv_pipe_t *control,
                                      uv_pipe_t *rd, uv_pipe_t *wr);

/**
 * HTTP helper side: connect `pipe` (initialised, ipc = 0) to the
 * conductor's `socket_path` and queue `token` and a newline as its first
 * bytes (writes queue until the connection is made). `cb` runs when the
 * connection is made or failed (status as uv_pipe_connect's).
 * @return 0, ACP_ERR_INVALID_ARGUMENT, ACP_ERR_NOMEM, ACP_ERR_SYSTEM.
 */
ACP_EXTERN int acp_uv_bridge_connect(uv_pipe_t *pipe, uv_connect_t *req,
                                     const char *socket_path, const char *token,
                                     uv_connect_cb cb);

#ifdef __cplusplus
}
#endif

#endif /* ACP_UV_H */
