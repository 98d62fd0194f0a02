/*
 * libacp - common definitions shared by every public header.
 *
 * This header defines the export macro, the error codes every function
 * returns, the per-object allocator and a few small types. It includes only
 * C standard headers and is safe to include alone (C11 or C++).
 */
#ifndef ACP_COMMON_H
#define ACP_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * ACP_EXTERN marks every public function. Build the library with
 * ACP_BUILDING_LIBRARY defined (the CMake files do) and -fvisibility=hidden;
 * define ACP_STATICLIB when linking a static build on Windows.
 */
#if defined(ACP_STATICLIB)
#define ACP_EXTERN
#elif defined(_WIN32)
#ifdef ACP_BUILDING_LIBRARY
#define ACP_EXTERN __declspec(dllexport)
#else
#define ACP_EXTERN __declspec(dllimport)
#endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#define ACP_EXTERN __attribute__((visibility("default")))
#else
#define ACP_EXTERN
#endif

/**
 * Signed size: a byte count (>= 0) or a negative ACP_ERR_* code.
 */
typedef ptrdiff_t acp_ssize;

/**
 * Library error codes. Every function that can fail returns 0 (or a byte
 * count) on success and one of these negative codes on failure. The band is
 * [-999, -500]. Codes below ACP_ERR_FATAL are fatal: after one of them the
 * only valid call on the object that returned it is its _free function.
 *
 * Codes are never renumbered or reused. JSON-RPC error codes (-32700 ...)
 * are protocol data, not library errors: see acp_rpc_errcode in rpc.h.
 */
typedef enum acp_error {
  /** An argument is invalid (NULL where not allowed, bad option value). */
  ACP_ERR_INVALID_ARGUMENT = -501,
  /** The operation is not valid in the object's current state. */
  ACP_ERR_INVALID_STATE = -502,
  /** A value does not have the JSON type the caller asked for. */
  ACP_ERR_TYPE = -503,
  /** A number does not fit the requested C type. */
  ACP_ERR_RANGE = -504,
  /** The input is not valid (JSON syntax, UTF-8, JSON-RPC shape). */
  ACP_ERR_PARSE = -505,
  /** A configured limit was hit (line size, depth, pending requests). */
  ACP_ERR_LIMIT = -506,
  /** Something looked up does not exist (member, request id, session). */
  ACP_ERR_NOT_FOUND = -507,
  /** The output buffer or destination is too small. */
  ACP_ERR_BUFFER = -508,
  /** A callback asked to stop processing the current input for now. */
  ACP_ERR_PAUSE = -509,
  /** The operation would block or the peer is not ready (runtime). */
  ACP_ERR_AGAIN = -510,
  /** The connection or peer is closed. */
  ACP_ERR_CLOSED = -511,
  /** An operating-system call failed (runtime only). */
  ACP_ERR_SYSTEM = -512,
  /** The protocol peer answered with an error or broke the protocol. */
  ACP_ERR_PROTOCOL = -513,
  /** The operation timed out. */
  ACP_ERR_TIMEOUT = -514,
  /** The operation was cancelled. */
  ACP_ERR_CANCELLED = -515,
  /** A feature is not supported by this build or by the peer. */
  ACP_ERR_UNSUPPORTED = -516,

  /** Codes below this one are fatal. */
  ACP_ERR_FATAL = -900,
  /** Memory allocation failed. */
  ACP_ERR_NOMEM = -901,
  /** A callback returned a value other than 0 or ACP_ERR_PAUSE. */
  ACP_ERR_CALLBACK_FAILURE = -902,
  /** Internal inconsistency (a bug in libacp). */
  ACP_ERR_INTERNAL = -903
} acp_error;

/**
 * Return a static, human-readable description of a library error code,
 * never NULL. Unknown codes give "unknown error". Thread-safe.
 */
ACP_EXTERN const char *acp_strerror(int code);

/**
 * Return nonzero if `code` is fatal (below ACP_ERR_FATAL).
 */
ACP_EXTERN int acp_is_fatal(int code);

/**
 * Custom memory allocator. Every `_new` function takes a `const acp_mem *`;
 * NULL selects the C library allocator. The object keeps a copy of the
 * struct and uses it for everything it allocates, so the functions must stay
 * valid for the object's lifetime. `user_data` is passed to each function.
 * Memory obtained from one allocator is never released with another.
 */
typedef struct acp_mem {
  void *user_data;
  void *(*malloc)(size_t size, void *user_data);
  void (*free)(void *ptr, void *user_data);
  void *(*calloc)(size_t nmemb, size_t size, void *user_data);
  void *(*realloc)(void *ptr, size_t size, void *user_data);
} acp_mem;

/**
 * Return the default allocator (the C library's). Never NULL; the returned
 * object is static.
 */
ACP_EXTERN const acp_mem *acp_mem_default(void);

#ifdef __cplusplus
}
#endif

#endif /* ACP_COMMON_H */
