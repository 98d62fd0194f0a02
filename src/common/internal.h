/*
 * Internal helpers of the core (libacp) modules: those shared with the
 * runtime libraries (util.h) and the core's own. Not installed; not for
 * the runtime libraries, which include util.h.
 */
#ifndef ACP_INTERNAL_H
#define ACP_INTERNAL_H

#include "util.h"

/* Append `s` as one JSON string (quotes, escapes) to `b` (src/json).
 * 0, ACP_ERR_INVALID_ARGUMENT (not UTF-8), ACP_ERR_LIMIT or ACP_ERR_NOMEM;
 * on error `b` may hold a partial string: callers roll back. */
int acp__json_escape_append(acp__buf *b, const char *s, size_t len);
/* The length of the prefix of s[0..len) that a JSON string takes as is (no
 * quote, backslash or control byte; valid UTF-8): the bytes the escaping
 * above would copy unchanged. len if the whole text needs no escaping. */
size_t acp__json_plain_len(const char *s, size_t len);
/* acp__json_escape_append() of s[0..len) whose first `plain` bytes are known
 * to need no escaping (plain <= acp__json_plain_len(s, len)): copied
 * without a second scan. */
int acp__json_escape_append_from(acp__buf *b, const char *s, size_t len,
                                 size_t plain);

/* Write the object key `k` (a string value of a parsed document) exactly as
 * it was in its input, escapes included: the byte-exact counterpart of
 * acp_json_write_key(). Same errors as the writer's functions. */
struct acp_json_writer;
struct acp_json_val;
int acp__json_write_key_val(struct acp_json_writer *w,
                            const struct acp_json_val *k);

#endif /* ACP_INTERNAL_H */
