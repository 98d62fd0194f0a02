#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec_test.h"

int codec_setup(void **state) {
  codec_fixture *f = calloc(1, sizeof(*f));

  if (f == NULL || acp_json_doc_new(&f->doc, NULL) != 0 ||
      acp_json_doc_new(&f->doc2, NULL) != 0 ||
      acp_arena_new(&f->arena, NULL) != 0 ||
      acp_json_writer_new(&f->w, 0, NULL) != 0) {
    if (f != NULL) {
      *state = f;
      codec_teardown(state);
    }
    return -1;
  }
  *state = f;
  return 0;
}

int codec_teardown(void **state) {
  codec_fixture *f = *state;

  acp_json_writer_free(f->w);
  acp_arena_free(f->arena);
  acp_json_doc_free(f->doc2);
  acp_json_doc_free(f->doc);
  free(f);
  return 0;
}

int codec_decode_into(codec_fixture *f, const acp_type_desc *t,
                      const char *json, void *out) {
  assert_int_equal(acp_json_doc_parse(f->doc, json, strlen(json), NULL), 0);
  /* Not empty before: a test of the error text sees it was written. */
  f->err[0] = 'x';
  f->err[1] = '\0';
  return acp_decode_named(t, acp_json_doc_root(f->doc), f->arena, out, "params",
                          f->err, sizeof(f->err));
}

int codec_decode_new(codec_fixture *f, const acp_type_desc *t, const char *json,
                     void **out) {
  *out = acp_arena_alloc(f->arena, acp_type_size(t));
  assert_non_null(*out);
  return codec_decode_into(f, t, json, *out);
}

const char *codec_encode(codec_fixture *f, const acp_type_desc *t,
                         const void *in) {
  size_t len;
  const char *p;
  char *s;

  acp_json_writer_reset(f->w);
  assert_int_equal(acp_encode(t, in, f->w), 0);
  p = acp_json_writer_data(f->w, &len);
  s = acp_arena_alloc(f->arena, len + 1);
  assert_non_null(s);
  memcpy(s, p, len);
  s[len] = '\0';
  return s;
}

acp_mem failmem_mem(failmem *f) {
  acp_mem m = {f, fm_malloc, fm_free, fm_calloc, fm_realloc};

  return m;
}

long codec_nomem_sweep(int (*scenario)(failmem *f), long min_points) {
  failmem f;
  long total, i;

  (void)failmem_start(&f, -1);
  assert_int_equal(scenario(&f), 0);
  assert_int_equal(f.live, 0);
  total = f.count;
  assert_true(total > min_points);
  for (i = 0; i < total; i++) {
    (void)failmem_start(&f, i);
    assert_int_equal(scenario(&f), ACP_ERR_NOMEM);
    assert_int_equal(f.live, 0);
  }
  return total;
}
