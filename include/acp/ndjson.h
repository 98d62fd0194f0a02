/*
 * libacp - the NDJSON line framer: one JSON-RPC message per line.
 *
 * Every place that cuts a byte stream into lines uses this framer: the
 * JSON-RPC session, the runtime's HTTP transports, the stdio<->HTTP relay
 * and the MCP bridge helpers. It is small, allocation-free on the fast
 * path and resumable, in the manner of picohttpparser:
 *
 *  - The framer is a caller-owned struct (on the stack or inside another
 *    object); _init/_dispose, no _new/_free.
 *  - A line that lies whole inside the input is handed out as a pointer
 *    into the input, without a copy. Only a line split across calls is
 *    gathered in the framer's carry buffer, which grows (through the
 *    allocator given to acp_ndjson_init()) up to the line cap and never
 *    beyond it.
 *  - "Need more input" is its own result, distinct from a line and from
 *    an error.
 *
 * The policy, the same for every user (docs/decisions.md, "One line
 * framer"):
 *
 *  1. A line ends at '\n'. One '\r' right before it is part of the line
 *     ending (CR LF), not of the line. A lone '\r' elsewhere is a byte.
 *  2. A line that is empty (after removing that '\r') is skipped: it is
 *     never handed out. Whitespace-only lines are handed out; the JSON
 *     layer decides about them.
 *  3. A line longer than the cap (counted without its line ending) is
 *     reported once, with ACP_NDJSON_OVERLONG, as soon as more than cap + 1
 *     bytes of it are pending (the + 1 is room for a '\r') or when its
 *     '\n' arrives, and everything up to and including that '\n' is
 *     dropped. The
 *     line after it is framed normally. Users answer it with
 *     acp_ndjson_overlong_reply(): a JSON-RPC error -32600 with id null
 *     and the message "Message exceeds N bytes".
 *  4. The framer passes bytes: it does not look at UTF-8, NUL bytes or
 *     JSON. Validation is the JSON layer's (acp_json_doc_parse() rejects
 *     invalid UTF-8), so a relay that forwards lines unparsed forwards them
 *     byte for byte.
 *  5. At the end of the input, acp_ndjson_finish() hands out the last line
 *     if it had no '\n'. Whether to use it is the caller's decision (the
 *     JSON-RPC session reports and drops it; the relay forwards it).
 *
 * Thread-safety: a framer is used by one thread at a time; framers are
 * independent of each other.
 */
#ifndef ACP_NDJSON_H
#define ACP_NDJSON_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Default line cap: 64 MiB, as the JSON-RPC session's default. */
#define ACP_NDJSON_DEFAULT_MAX_LINE ((size_t)64 * 1024 * 1024)

/** Room acp_ndjson_overlong_reply() needs at most, with its NUL. */
#define ACP_NDJSON_REPLY_MAX 128

/**
 * What acp_ndjson_next() and acp_ndjson_finish() found. Errors are
 * negative ACP_ERR_* codes besides these.
 */
typedef enum acp_ndjson_result {
  /** All input was taken; no complete line yet. Feed more. */
  ACP_NDJSON_NEED_MORE = 0,
  /** A line: *line and *line_len are set. */
  ACP_NDJSON_LINE = 1,
  /** A line passed the cap; it is dropped up to its newline (rule 3). */
  ACP_NDJSON_OVERLONG = 2
} acp_ndjson_result;

/**
 * A line framer. Allocate it yourself (it is a plain struct, so its size is
 * part of the ABI); every field is private and may change between versions:
 * use the functions only. What the line feed search learns about a line is
 * passed on through the functions that take the framer
 * (acp_router_recv_framed()), never read from the fields.
 */
typedef struct acp_ndjson {
  /* Private. */
  char *buf;       /* carry: the start of a line split across calls */
  size_t len;      /* bytes held in buf */
  size_t cap;      /* bytes allocated in buf */
  size_t max_line; /* the cap, line ending excluded */
  int skipping;    /* dropping an over-long line up to its newline */
  acp_mem mem;     /* allocator of buf */
  /* Private. [plain_lo, plain_hi): offsets into the current line (pending,
   * or the one just handed out) of a long run that holds no quote,
   * backslash, control byte or byte >= 0x80, seen by the line feed search;
   * equal if none. Inside libacp, the parse of the JSON-RPC session and of
   * the router (acp_router_recv_framed()) jumps over it. */
  size_t plain_lo;
  size_t plain_hi;
} acp_ndjson;

/**
 * Initialize a framer. Cannot fail and allocates nothing.
 *
 * @param f         the framer (not NULL).
 * @param max_line  longest line accepted, in bytes, without its line
 *                  ending; 0 means ACP_NDJSON_DEFAULT_MAX_LINE, SIZE_MAX no
 *                  cap.
 * @param mem       allocator for the carry buffer, copied; NULL for the
 *                  default allocator.
 */
ACP_EXTERN void acp_ndjson_init(acp_ndjson *f, size_t max_line,
                                const acp_mem *mem);

/**
 * Release the carry buffer and forget any partial line. The framer stays
 * usable with the same cap and allocator: a runtime can call this after a
 * very large line, or right after ACP_NDJSON_OVERLONG, to give the memory
 * back at once. An over-long line being dropped stays dropped up to its
 * newline (rule 3); to start a new stream, call acp_ndjson_init() after.
 * NULL is accepted.
 */
ACP_EXTERN void acp_ndjson_dispose(acp_ndjson *f);

/**
 * Take the next event from data[0..len).
 *
 * Call it in a loop, advancing `data` by `*used` each time, until it
 * returns ACP_NDJSON_NEED_MORE (then *used == len: the tail, if any, is
 * kept in the framer). The caller may stop early after any line (to pause
 * reading) and come back with the rest of the input later.
 *
 * @param f         the framer.
 * @param data      input bytes; not kept after the call (may be NULL when
 *                  len is 0).
 * @param len       number of bytes at data.
 * @param used      out: bytes of data consumed by this call.
 * @param line      out: on ACP_NDJSON_LINE, the line, without '\n' or the
 *                  '\r' before it. It points into `data` or into the
 *                  framer, and is valid until the next call on the framer
 *                  or until `data` changes, whichever comes first.
 *                  Otherwise NULL.
 * @param line_len  out: its length (0 unless a line).
 * @return ACP_NDJSON_NEED_MORE, ACP_NDJSON_LINE, ACP_NDJSON_OVERLONG; or
 *         ACP_ERR_INVALID_ARGUMENT (a NULL pointer), ACP_ERR_NOMEM (the
 *         carry could not grow: the bytes before *used are consumed, the
 *         partial line is dropped as if over-long, and the framer stays
 *         usable).
 *
 * Cost: one memchr over the input; a line is copied only when it is split
 * across calls.
 */
ACP_EXTERN int acp_ndjson_next(acp_ndjson *f, const char *data, size_t len,
                               size_t *used, const char **line,
                               size_t *line_len);

/**
 * Where the next input may be read in place: the framer's buffer right
 * after the partial line it holds, with *room bytes free (at least 4 KiB;
 * the buffer grows so that a long line arrives in few reads and is never
 * copied). Read into it (read(2), a libuv alloc callback), then pass
 * exactly that pointer and the count read to acp_ndjson_next(): the bytes
 * are framed where they are, and a line split across reads is not copied
 * to be gathered. Any other call on the framer ends the loan.
 *
 * @param f     the framer.
 * @param room  out: free bytes at the pointer (0 with NULL).
 * @return the pointer, or NULL when the framer has no such room to lend
 *         (while dropping an over-long line, near the line cap, out of
 *         memory, or a NULL argument): use a buffer of your own then.
 */
ACP_EXTERN char *acp_ndjson_read_buf(acp_ndjson *f, size_t *room);

/**
 * End of input: hand out the last line if it had no newline, and reset the
 * framer for a new stream.
 *
 * @param f         the framer.
 * @param line      out: the line (valid until the next call on f), or NULL.
 * @param line_len  out: its length.
 * @return ACP_NDJSON_LINE (an unterminated, non-empty last line within the
 *         cap), ACP_NDJSON_OVERLONG (an unterminated last line over the cap,
 *         not reported yet) or ACP_NDJSON_NEED_MORE (nothing was pending,
 *         or the pending line was an over-long one already reported);
 *         ACP_ERR_INVALID_ARGUMENT when a pointer is NULL.
 */
ACP_EXTERN int acp_ndjson_finish(acp_ndjson *f, const char **line,
                                 size_t *line_len);

/**
 * Bytes of a partial line the framer holds (0 also while dropping an
 * over-long line).
 */
ACP_EXTERN size_t acp_ndjson_pending(const acp_ndjson *f);

/** The framer's line cap (as resolved by acp_ndjson_init()). */
ACP_EXTERN size_t acp_ndjson_max_line(const acp_ndjson *f);

/**
 * The message text every libacp component uses for an over-long line:
 * "Message exceeds N bytes", N being `max_line`.
 *
 * @param out  where to write, NUL-terminated.
 * @param cap  bytes at out; ACP_NDJSON_REPLY_MAX is always enough.
 * @return the length written (without the NUL), or 0 when cap is too small.
 */
ACP_EXTERN size_t acp_ndjson_overlong_message(char *out, size_t cap,
                                              size_t max_line);

/**
 * The whole answer to an over-long line, without newline:
 * {"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Message
 * exceeds N bytes"}}. The JSON-RPC session sends exactly these bytes; a
 * component without a session (a relay) writes them itself.
 *
 * @param out  where to write, NUL-terminated.
 * @param cap  bytes at out; ACP_NDJSON_REPLY_MAX is always enough.
 * @return the length written (without the NUL), or 0 when cap is too small.
 */
ACP_EXTERN size_t acp_ndjson_overlong_reply(char *out, size_t cap,
                                            size_t max_line);

#ifdef __cplusplus
}
#endif

#endif /* ACP_NDJSON_H */
