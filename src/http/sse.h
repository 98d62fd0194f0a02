/*
 * Server-Sent Events (text/event-stream) parser, sans I/O, following the
 * WHATWG "event stream interpretation" algorithm: lines end in CRLF, LF or
 * CR; a leading BOM is skipped; `data` lines accumulate (joined with LF);
 * `event` sets the type; `id` (without NUL) sets the last event id; `retry`
 * (ASCII digits only) sets the reconnection time; lines starting with ':'
 * are comments; an empty line dispatches the event if any `data` field was
 * seen. Internal to libacp-http, whose HTTP client reads SSE streams; kept
 * sans-I/O (and fuzzed) like the core's parsers.
 */
#ifndef ACP_HTTP_SSE_H
#define ACP_HTTP_SSE_H

#include "util.h"

#include <stdbool.h>
#include <stdint.h>

/**
 * One dispatched event. `type` is "message" when no `event` field was
 * given; `id` is the last event id (possibly empty); all borrowed for the
 * call. `data` has its final LF removed; when data_len > 0 that LF is
 * still there to read, at data[data_len] (a consumer that wants the event
 * as one LF-terminated line can take it in place). Data lines after the
 * first are joined to it with LF. Return 0 to continue; any other value
 * stops the feed and is returned by acp__sse_feed().
 */
typedef int (*acp__sse_event_cb)(void *user_data, const char *type,
                                 size_t type_len, const char *data,
                                 size_t data_len, const char *id,
                                 size_t id_len);

typedef struct acp__sse {
  acp__buf line;     /* the line being assembled */
  acp__buf data;     /* data buffer of the event being assembled */
  size_t data_off;   /* where its data starts (see field() in sse.c) */
  acp__buf type;     /* event type buffer */
  acp__buf id;       /* last event id */
  int64_t retry;     /* last retry value (ms), -1 if none */
  size_t data_lines; /* data fields of the current event (0: none yet) */
  bool cr;           /* the previous byte was CR (swallow a following LF) */
  bool bom_done;     /* the first bytes were checked for a BOM */
  size_t bom_seen;
} acp__sse;

/** `max`: cap of a line and of an event's data (0: no cap). */
void acp__sse_init(acp__sse *p, const acp_mem *mem, size_t max);
void acp__sse_dispose(acp__sse *p);
/**
 * Feed bytes. @return 0, ACP_ERR_LIMIT (a line or event over the cap; the
 * parser is then unusable), ACP_ERR_NOMEM, or the callback's nonzero value.
 */
int acp__sse_feed(acp__sse *p, const char *data, size_t len,
                  acp__sse_event_cb cb, void *user_data);
/**
 * Inside an event callback: whether the event's data came from one `data`
 * field, so that it holds no LF (a field ends at the line's end; only the
 * joining of several puts an LF inside). A consumer that wants one line
 * need not look for one.
 */
static inline bool acp__sse_one_line(const acp__sse *p) {
  return p->data_lines == 1;
}
/** The last `retry` value in ms, or -1. */
static inline int64_t acp__sse_retry(const acp__sse *p) {
  return p->retry;
}
/** The last event id (borrowed; may be empty). */
static inline const char *acp__sse_last_id(const acp__sse *p, size_t *len) {
  *len = p->id.len;
  return p->id.data ? p->id.data : "";
}

#endif /* ACP_HTTP_SSE_H */
