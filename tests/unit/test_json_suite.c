/*
 * Conformance: every file of JSONTestSuite's test_parsing/ through
 * acp_json_doc_parse() and acp_json_validate(). y_ files must be accepted,
 * n_ files rejected, and for the implementation-defined i_ files the
 * decision must match the table below so that a change of behaviour is
 * noticed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/json.h"

#define SUITE_DIR ACP_SPEC_DIR "/json-test-suite/test_parsing/"

/*
 * Our decisions for the i_ files. Numbers outside the range of int64 or
 * double are valid syntax (the accessors report ACP_ERR_RANGE). Escaped lone
 * surrogates are valid syntax and decode to U+FFFD. Invalid UTF-8, UTF-16
 * input and a byte order mark are rejected. 500 nested arrays are within the
 * default depth limit of 512.
 */
static const struct {
  const char *name;
  int accept;
} i_table[] = {
    {"i_number_double_huge_neg_exp.json", 1},
    {"i_number_huge_exp.json", 1},
    {"i_number_neg_int_huge_exp.json", 1},
    {"i_number_pos_double_huge_exp.json", 1},
    {"i_number_real_neg_overflow.json", 1},
    {"i_number_real_pos_overflow.json", 1},
    {"i_number_real_underflow.json", 1},
    {"i_number_too_big_neg_int.json", 1},
    {"i_number_too_big_pos_int.json", 1},
    {"i_number_very_big_negative_int.json", 1},
    {"i_object_key_lone_2nd_surrogate.json", 1},
    {"i_string_1st_surrogate_but_2nd_missing.json", 1},
    {"i_string_1st_valid_surrogate_2nd_invalid.json", 1},
    {"i_string_UTF-16LE_with_BOM.json", 0},
    {"i_string_UTF-8_invalid_sequence.json", 0},
    {"i_string_UTF8_surrogate_U+D800.json", 0},
    {"i_string_incomplete_surrogate_and_escape_valid.json", 1},
    {"i_string_incomplete_surrogate_pair.json", 1},
    {"i_string_incomplete_surrogates_escape_valid.json", 1},
    {"i_string_invalid_lonely_surrogate.json", 1},
    {"i_string_invalid_surrogate.json", 1},
    {"i_string_invalid_utf-8.json", 0},
    {"i_string_inverted_surrogates_U+1D11E.json", 1},
    {"i_string_iso_latin_1.json", 0},
    {"i_string_lone_second_surrogate.json", 1},
    {"i_string_lone_utf8_continuation_byte.json", 0},
    {"i_string_not_in_unicode_range.json", 0},
    {"i_string_overlong_sequence_2_bytes.json", 0},
    {"i_string_overlong_sequence_6_bytes.json", 0},
    {"i_string_overlong_sequence_6_bytes_null.json", 0},
    {"i_string_truncated-utf-8.json", 0},
    {"i_string_utf16BE_no_BOM.json", 0},
    {"i_string_utf16LE_no_BOM.json", 0},
    {"i_structure_500_nested_arrays.json", 1},
    {"i_structure_UTF-8_BOM_empty_object.json", 0},
};

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t cap = 0;
  size_t n = 0;
  size_t r;

  if (f == NULL)
    return NULL;
  for (;;) {
    if (n == cap) {
      char *nb;
      cap = cap ? cap * 2 : 4096;
      nb = realloc(buf, cap);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    r = fread(buf + n, 1, cap - n, f);
    if (r == 0)
      break;
    n += r;
  }
  fclose(f);
  *len = n;
  return buf;
}

static int i_expected(const char *name) {
  size_t i;

  for (i = 0; i < sizeof(i_table) / sizeof(i_table[0]); i++)
    if (strcmp(i_table[i].name, name) == 0)
      return i_table[i].accept;
  return -1;
}

static void test_json_suite_all_files(void **state) {
  DIR *d;
  struct dirent *e;
  acp_json_doc *doc = NULL;
  int ny = 0, nn = 0, ni = 0, bad = 0;

  (void)state;
  assert_int_equal(acp_json_doc_new(&doc, NULL), 0);
  d = opendir(SUITE_DIR);
  assert_non_null(d);
  while ((e = readdir(d)) != NULL) {
    char path[1024];
    char *data;
    size_t len = 0;
    int rv;
    int rv2;
    int accepted;
    acp_json_err err;

    if (e->d_name[0] == '.' || strstr(e->d_name, ".json") == NULL)
      continue;
    snprintf(path, sizeof(path), "%s%s", SUITE_DIR, e->d_name);
    data = read_file(path, &len);
    assert_non_null(data);
    rv = acp_json_doc_parse(doc, data, len, &err);
    rv2 = acp_json_validate(data, len, NULL);
    if (rv != rv2) {
      printf("MISMATCH parse/validate %s: %d vs %d\n", e->d_name, rv, rv2);
      bad++;
    }
    accepted = rv == 0;
    if (accepted)
      assert_non_null(acp_json_doc_root(doc));
    else
      assert_null(acp_json_doc_root(doc));
    if (e->d_name[0] == 'y') {
      ny++;
      if (!accepted) {
        printf("FAIL %s rejected: %s at %zu\n", e->d_name, err.msg, err.pos);
        bad++;
      }
    } else if (e->d_name[0] == 'n') {
      nn++;
      if (accepted) {
        printf("FAIL %s accepted\n", e->d_name);
        bad++;
      }
    } else if (e->d_name[0] == 'i') {
      int want = i_expected(e->d_name);
      ni++;
      printf("  %-55s %s\n", e->d_name, accepted ? "accept" : "reject");
      if (want != accepted) {
        printf("FAIL %s: expected %s\n", e->d_name,
               want < 0 ? "an entry in i_table" : (want ? "accept" : "reject"));
        bad++;
      }
    }
    free(data);
  }
  closedir(d);
  acp_json_doc_free(doc);
  printf("JSONTestSuite: %d y_, %d n_, %d i_ files, %d failures\n", ny, nn, ni,
         bad);
  assert_true(ny >= 95);
  assert_true(nn >= 180);
  assert_int_equal(ni, (int)(sizeof(i_table) / sizeof(i_table[0])));
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_suite_all_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
