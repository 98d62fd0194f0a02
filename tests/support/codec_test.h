/*
 * Shared helpers of the typed codec tests (test_acp_codec.c for v1,
 * test_acp_codec_v2.c for v2): one fixture (two JSON documents, an arena,
 * a writer, an error buffer), decode and encode with cmocka assertions on
 * the steps that must not fail, and the allocation-failure sweep of a
 * decode/encode scenario.
 */
#ifndef ACP_TEST_CODEC_TEST_H
#define ACP_TEST_CODEC_TEST_H

#include "acp/json.h"
#include "acp/types.h"
#include "failmem.h"

typedef struct codec_fixture {
  acp_json_doc *doc;  /* what codec_decode_*() parse into */
  acp_json_doc *doc2; /* free for the test (a second document) */
  acp_arena *arena;   /* decoded structs and codec_encode() results */
  acp_json_writer *w;
  char err[256]; /* the last decode's error text */
} codec_fixture;

/* cmocka setup/teardown: *state is a new codec_fixture. */
int codec_setup(void **state);
int codec_teardown(void **state);

/* Parse `json` (it must parse) and decode it as `t` into `out`, root path
 * "params"; returns acp_decode_named()'s result, the error text in
 * f->err. */
int codec_decode_into(codec_fixture *f, const acp_type_desc *t,
                      const char *json, void *out);

/* The same into a struct of t's size allocated in the arena (*out). */
int codec_decode_new(codec_fixture *f, const acp_type_desc *t, const char *json,
                     void **out);

/* Encode `in` as `t` (it must succeed); a NUL-terminated copy in the
 * arena. */
const char *codec_encode(codec_fixture *f, const acp_type_desc *t,
                         const void *in);

/*
 * Allocation failure: `scenario` (decode and encode with the acp_mem of
 * failmem_mem(f)) returns 0 when it ran through, and it is run once so and
 * then once with each of its allocations failing, where it must return
 * ACP_ERR_NOMEM; nothing may stay allocated after any run. Fails the test
 * when a clean run makes `min_points` allocations or fewer. Returns the
 * number of allocation points.
 */
long codec_nomem_sweep(int (*scenario)(failmem *f), long min_points);

/* The acp_mem over `f` (its counters as they are). */
acp_mem failmem_mem(failmem *f);

#endif
