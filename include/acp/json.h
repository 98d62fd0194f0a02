/*
 * libacp - JSON: a strict RFC 8259 reader that builds a tape of spans over
 * the caller's bytes, and a writer that can splice raw spans unchanged.
 *
 * Reading. acp_json_doc_parse() validates the whole input (syntax, UTF-8,
 * depth) in one pass and records one small record per value (a "tape")
 * pointing into the input. Nothing is copied or decoded until asked: a string
 * is unescaped only when acp_json_doc_str() or acp_json_str_unescape() is
 * called, a number converted only when acp_json_get_int64() (and friends) is
 * called. Every value keeps its exact original text (acp_json_raw()), which is
 * what lets a proxy forward a payload byte for byte.
 *
 * Writing. acp_json_writer appends compact JSON to a growable buffer with a
 * size cap. Errors are sticky: after the first failure every further call is
 * a no-op returning the same code, so a long sequence of writes can be
 * checked once at the end with acp_json_writer_error().
 *
 * Thread-safety: a doc or writer may be used by one thread at a time;
 * distinct objects are independent.
 */
#ifndef ACP_JSON_H
#define ACP_JSON_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MARK: - Reading */

/** A parsed document. Opaque; see acp_json_doc_new(). */
typedef struct acp_json_doc acp_json_doc;

/**
 * A value inside a parsed document. Opaque; a pointer to one is borrowed from
 * its document and valid until the document is parsed again or freed.
 */
typedef struct acp_json_val acp_json_val;

/** JSON value types. */
typedef enum acp_json_type {
  ACP_JSON_NONE = 0, /**< not a value (NULL pointer passed) */
  ACP_JSON_NULL,
  ACP_JSON_BOOL,
  ACP_JSON_NUMBER,
  ACP_JSON_STRING,
  ACP_JSON_ARRAY,
  ACP_JSON_OBJECT
} acp_json_type;

/**
 * Where and why parsing failed. `code` is an ACP_ERR_* value (ACP_ERR_PARSE
 * for bad syntax or UTF-8, ACP_ERR_LIMIT for depth or size, ACP_ERR_NOMEM),
 * `msg` a static English description, `pos` the byte offset of the problem.
 */
typedef struct acp_json_err {
  int code;
  const char *msg;
  size_t pos;
} acp_json_err;

/** Default maximum nesting depth of a parsed document. */
#define ACP_JSON_DEFAULT_MAX_DEPTH 512

/**
 * Create an empty, reusable document.
 *
 * @param out  receives the document; set to NULL on failure. The caller owns
 *             it and frees it with acp_json_doc_free().
 * @param mem  allocator, or NULL for the default. Copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (out is NULL) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_json_doc_new(acp_json_doc **out, const acp_mem *mem);

/** Free a document and everything it owns. Accepts NULL. */
ACP_EXTERN void acp_json_doc_free(acp_json_doc *doc);

/**
 * Set the maximum nesting depth (arrays and objects) accepted by later
 * parses. 0 restores ACP_JSON_DEFAULT_MAX_DEPTH.
 */
ACP_EXTERN void acp_json_doc_set_max_depth(acp_json_doc *doc,
                                           uint32_t max_depth);

/**
 * Parse exactly one JSON text (RFC 8259: one value with optional surrounding
 * whitespace; no BOM, no comments, no trailing commas, no NaN).
 *
 * The document REFERENCES `data`: the caller must keep those bytes alive and
 * unchanged until the next parse on this document or acp_json_doc_free().
 * Values and strings from an earlier parse become invalid. Memory (the tape)
 * is kept and reused across parses.
 *
 * @param doc   the document.
 * @param data  the bytes; need not be NUL-terminated. May be NULL if len is 0.
 * @param len   number of bytes. Inputs of 4 GiB or more are ACP_ERR_LIMIT.
 * @param err   optional; filled on failure (and zeroed on success).
 * @return 0, ACP_ERR_PARSE (invalid JSON or UTF-8), ACP_ERR_LIMIT (depth or
 *         size) or ACP_ERR_NOMEM. On failure the document holds no value.
 */
ACP_EXTERN int acp_json_doc_parse(acp_json_doc *doc, const char *data,
                                  size_t len, acp_json_err *err);

/** The root value of the last successful parse, or NULL. Borrowed. */
ACP_EXTERN const acp_json_val *acp_json_doc_root(const acp_json_doc *doc);

/**
 * Get the decoded (unescaped) bytes of a string value. When the string has
 * no escapes the pointer points into the parsed input; otherwise the string
 * is decoded into memory owned by the document. Either way the result is
 * valid until the next parse or free, is NOT guaranteed to be NUL-terminated
 * when pointing into the input, and may contain NUL bytes (from \u0000).
 * A string is decoded at most once per parse; later calls return the same
 * bytes. An escaped lone UTF-16 surrogate (e.g. "\ud800", valid JSON syntax
 * that JavaScript emits for a string cut inside a pair) decodes to U+FFFD,
 * so decoded strings are always valid UTF-8; the same applies to
 * acp_json_str_eq() and acp_json_str_unescape().
 *
 * @return 0, ACP_ERR_TYPE (not a string) or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_json_doc_str(acp_json_doc *doc, const acp_json_val *v,
                                const char **s, size_t *len);

/** Type of a value; ACP_JSON_NONE for NULL. */
ACP_EXTERN acp_json_type acp_json_type_of(const acp_json_val *v);

/**
 * The exact original text of a value (strings include their quotes,
 * containers their brackets). Borrowed from the parsed input. Returns NULL
 * and sets *len to 0 for a NULL value.
 */
ACP_EXTERN const char *acp_json_raw(const acp_json_val *v, size_t *len);

/** The value of a boolean. @return 0 or ACP_ERR_TYPE. */
ACP_EXTERN int acp_json_get_bool(const acp_json_val *v, bool *out);

/**
 * A number as an exact 64-bit integer. Accepts only integer syntax (no
 * fraction or exponent) within range.
 * @return 0, ACP_ERR_TYPE (not a number, or not an integer) or ACP_ERR_RANGE.
 */
ACP_EXTERN int acp_json_get_int64(const acp_json_val *v, int64_t *out);

/** As acp_json_get_int64() for unsigned values (no minus sign). */
ACP_EXTERN int acp_json_get_uint64(const acp_json_val *v, uint64_t *out);

/**
 * A number as the nearest double. Accepts any JSON number.
 * @return 0, ACP_ERR_TYPE or ACP_ERR_RANGE (magnitude overflows to infinity).
 */
ACP_EXTERN int acp_json_get_double(const acp_json_val *v, double *out);

/**
 * The raw, still-escaped content of a string, between its quotes. Borrowed.
 * @return the pointer, or NULL (and *len = 0) if v is not a string.
 */
ACP_EXTERN const char *acp_json_str_raw(const acp_json_val *v, size_t *len);

/** Nonzero if the string value contains at least one backslash escape. */
ACP_EXTERN int acp_json_str_has_escapes(const acp_json_val *v);

/**
 * Nonzero if a string value's raw text (acp_json_raw(), quotes included)
 * may be written out in place of its decoded value escaped again: what the
 * parser accepted is valid JSON (UTF-8 checked, escapes well formed, no raw
 * control byte), so a reader decodes the raw text to the same string,
 * unless it has a \u escape of a UTF-16 surrogate (which decoding turns
 * into U+FFFD when unpaired). This is what lets a large text be forwarded
 * with one copy and no scan (acp_json_write_str_val()). 0 for a value that
 * is not a string or NULL.
 */
ACP_EXTERN int acp_json_str_passthrough(const acp_json_val *v);

/**
 * Nonzero if v is a string whose decoded content equals s[0..len).
 * Works without allocating, escapes included.
 */
ACP_EXTERN int acp_json_str_eq(const acp_json_val *v, const char *s,
                               size_t len);

/**
 * acp_json_str_eq() against a string literal, its length taken by the
 * compiler: `ACP_JSON_STR_EQ_LIT(method, "session/prompt")`. `lit` must be
 * a string literal (anything else does not compile); embedded NULs count.
 * Evaluates `v` once. Same result and cost as acp_json_str_eq().
 */
#define ACP_JSON_STR_EQ_LIT(v, lit)                                            \
  acp_json_str_eq((v), "" lit "", sizeof(lit) - 1)

/**
 * Decode a string into a caller buffer. Writes at most `cap` bytes and then
 * a NUL if room remains; *len receives the decoded length (always, so a
 * first call with cap 0 measures).
 * @return 0, ACP_ERR_TYPE or ACP_ERR_BUFFER (cap too small; *len is set).
 */
ACP_EXTERN int acp_json_str_unescape(const acp_json_val *v, char *buf,
                                     size_t cap, size_t *len);

/** Number of elements of an array or members of an object; 0 otherwise. */
ACP_EXTERN size_t acp_json_len(const acp_json_val *v);

/**
 * First child of an array or object, or NULL if empty or not a container.
 * The children of an object alternate key (a string value), value, key,
 * value. Iterate an object with:
 *
 *     for (k = acp_json_child(obj); k; k = acp_json_next(acp_json_next(k)))
 *       use(k, acp_json_next(k));
 */
ACP_EXTERN const acp_json_val *acp_json_child(const acp_json_val *v);

/** Next sibling in the enclosing container, or NULL after the last. O(1). */
ACP_EXTERN const acp_json_val *acp_json_next(const acp_json_val *v);

/** Element i of an array, or NULL. O(i). */
ACP_EXTERN const acp_json_val *acp_json_arr_get(const acp_json_val *arr,
                                                size_t i);

/**
 * Value of the first member named key[0..len) (compared decoded) of an
 * object, or NULL if absent or not an object. O(members).
 */
ACP_EXTERN const acp_json_val *acp_json_obj_get(const acp_json_val *obj,
                                                const char *key, size_t len);

/** As acp_json_obj_get() with a NUL-terminated key. */
ACP_EXTERN const acp_json_val *acp_json_obj_getz(const acp_json_val *obj,
                                                 const char *key);

/**
 * Check `data` is one valid JSON text without keeping a document. Uses no
 * heap memory for depth up to 64 and the default allocator beyond.
 * @return 0, ACP_ERR_PARSE, ACP_ERR_LIMIT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_json_validate(const char *data, size_t len,
                                 acp_json_err *err);

/* MARK: - Writing */

/** A growable output buffer with JSON writing helpers. Opaque. */
typedef struct acp_json_writer acp_json_writer;

/**
 * Create a writer.
 * @param out       receives the writer (NULL on failure); free with
 *                  acp_json_writer_free().
 * @param max_size  cap on the buffer in bytes; 0 means SIZE_MAX. Writes past
 *                  it fail with ACP_ERR_LIMIT.
 * @param mem       allocator or NULL. Copied.
 * @return 0, ACP_ERR_INVALID_ARGUMENT or ACP_ERR_NOMEM.
 */
ACP_EXTERN int acp_json_writer_new(acp_json_writer **out, size_t max_size,
                                   const acp_mem *mem);

/** Free a writer and its buffer. Accepts NULL. */
ACP_EXTERN void acp_json_writer_free(acp_json_writer *w);

/** Empty the buffer and clear any sticky error; capacity is kept. */
ACP_EXTERN void acp_json_writer_reset(acp_json_writer *w);

/**
 * The bytes written so far. Borrowed: valid until the next call that writes
 * to, resets or frees the writer. Not NUL-terminated.
 */
ACP_EXTERN const char *acp_json_writer_data(const acp_json_writer *w,
                                            size_t *len);

/** The first error any write hit since the last reset, or 0. */
ACP_EXTERN int acp_json_writer_error(const acp_json_writer *w);

/*
 * Each write below returns 0 or the sticky error (ACP_ERR_NOMEM,
 * ACP_ERR_LIMIT, ACP_ERR_INVALID_STATE for structural misuse such as a value
 * where a key is expected or unbalanced ends, ACP_ERR_INVALID_ARGUMENT for a
 * string that is not valid UTF-8 or a non-finite double). Commas and colons
 * are inserted automatically. Nesting is limited to 1024 levels.
 */
ACP_EXTERN int acp_json_write_obj_begin(acp_json_writer *w);
ACP_EXTERN int acp_json_write_obj_end(acp_json_writer *w);
ACP_EXTERN int acp_json_write_arr_begin(acp_json_writer *w);
ACP_EXTERN int acp_json_write_arr_end(acp_json_writer *w);
/** Write an object key (escaped as needed). */
ACP_EXTERN int acp_json_write_key(acp_json_writer *w, const char *k,
                                  size_t len);
/** Write an object key given as a NUL-terminated string. */
ACP_EXTERN int acp_json_write_keyz(acp_json_writer *w, const char *k);
/** Write a string value (escaped as needed; must be valid UTF-8). */
ACP_EXTERN int acp_json_write_str(acp_json_writer *w, const char *s,
                                  size_t len);
ACP_EXTERN int acp_json_write_strz(acp_json_writer *w, const char *s);
ACP_EXTERN int acp_json_write_int(acp_json_writer *w, int64_t v);
ACP_EXTERN int acp_json_write_uint(acp_json_writer *w, uint64_t v);
/** Write a finite double in the shortest form that reads back exactly. */
ACP_EXTERN int acp_json_write_double(acp_json_writer *w, double v);
ACP_EXTERN int acp_json_write_bool(acp_json_writer *w, bool v);
ACP_EXTERN int acp_json_write_null(acp_json_writer *w);
/**
 * Splice `json` verbatim as one value. The bytes are NOT checked: the caller
 * guarantees they are exactly one valid JSON value (e.g. acp_json_raw()).
 */
ACP_EXTERN int acp_json_write_raw(acp_json_writer *w, const char *json,
                                  size_t len);
/** Splice a parsed value's original text (acp_json_raw()) verbatim. */
ACP_EXTERN int acp_json_write_val(acp_json_writer *w, const acp_json_val *v);
/**
 * Write a parsed string value `v` of document `doc`: its raw text is
 * spliced when acp_json_str_passthrough() allows (one copy, no scan), and
 * otherwise decoded (acp_json_doc_str() on doc) and written as
 * acp_json_write_str() does. Either way the output decodes to the same
 * string as acp_json_doc_str(). `doc` may be NULL when the raw text passes.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (w or v NULL, or v needs decoding and
 *         doc is NULL), ACP_ERR_TYPE (v not a string), or a write error.
 */
ACP_EXTERN int acp_json_write_str_val(acp_json_writer *w, acp_json_doc *doc,
                                      const acp_json_val *v);

#ifdef __cplusplus
}
#endif

#endif /* ACP_JSON_H */
