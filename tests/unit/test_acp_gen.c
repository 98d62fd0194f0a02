/*
 * Checks the generated method table (tools/gen_acp.py) against the schema
 * files themselves, parsed at test time with libacp's JSON reader.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/json.h"
#include "acp/methods.h"

#define SCHEMA_DIR ACP_SPEC_DIR "/acp/schema/v1/"

typedef struct loaded {
  char *data;
  size_t len;
  acp_json_doc *doc;
  const acp_json_val *root;
} loaded;

static void load(loaded *l, const char *name) {
  char path[512];
  FILE *f;
  long n;
  int rv;

  if (strchr(name, '/') != NULL) /* a path under spec/ */
    snprintf(path, sizeof(path), "%s/%s", ACP_SPEC_DIR, name);
  else
    snprintf(path, sizeof(path), "%s%s", SCHEMA_DIR, name);
  f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  n = ftell(f);
  assert_true(n > 0);
  rewind(f);
  l->data = malloc((size_t)n);
  assert_non_null(l->data);
  assert_int_equal(fread(l->data, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  l->len = (size_t)n;
  assert_int_equal(acp_json_doc_new(&l->doc, NULL), 0);
  rv = acp_json_doc_parse(l->doc, l->data, l->len, NULL);
  assert_int_equal(rv, 0);
  l->root = acp_json_doc_root(l->doc);
  assert_non_null(l->root);
}

static void unload(loaded *l) {
  acp_json_doc_free(l->doc);
  free(l->data);
}

/* Copy a string value into a NUL-terminated buffer. */
static void str_of(const acp_json_val *v, char *buf, size_t cap) {
  size_t len = 0;
  assert_int_equal(acp_json_str_unescape(v, buf, cap, &len), 0);
  assert_true(len < cap);
  buf[len] = '\0';
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s);
  size_t m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static acp_side side_of(const char *x) {
  if (strcmp(x, "agent") == 0)
    return ACP_SIDE_AGENT;
  if (strcmp(x, "client") == 0)
    return ACP_SIDE_CLIENT;
  if (strcmp(x, "both") == 0)
    return ACP_SIDE_BOTH;
  if (strcmp(x, "protocol") == 0)
    return ACP_SIDE_PROTOCOL;
  fail_msg("unexpected x-side %s", x);
  return (acp_side)0;
}

#define MAX_SEEN 128

typedef struct seen_set {
  char names[MAX_SEEN][64];
  size_t n;
} seen_set;

static void seen_add(seen_set *s, const char *name) {
  size_t i;
  for (i = 0; i < s->n; i++)
    if (strcmp(s->names[i], name) == 0)
      return;
  assert_true(s->n < MAX_SEEN);
  snprintf(s->names[s->n], sizeof(s->names[0]), "%s", name);
  s->n++;
}

static bool seen_has(const seen_set *s, const char *name) {
  size_t i;
  for (i = 0; i < s->n; i++)
    if (strcmp(s->names[i], name) == 0)
      return true;
  return false;
}

/* Set while reading the newer copy (spec/acp/schema-sdk-2.4.0): only its
 * methods the main copy lacks are in the table, the proxy ones not at
 * all. */
static const seen_set *overlay_skip;
/* The protocol version whose table check_schema() reads. */
static int table_version = ACP_PROTOCOL_V1;

/*
 * Every $defs entry with an x-method must be in the table with the x-side
 * as its side, and its role (params, notification params, result) must match
 * the entry's name suffix.
 */
static size_t check_schema(const char *file, bool unstable_file,
                           seen_set *seen) {
  loaded l;
  const acp_json_val *defs;
  const acp_json_val *k;
  size_t checked = 0;

  load(&l, file);
  defs = acp_json_obj_getz(l.root, "$defs");
  assert_int_equal(acp_json_type_of(defs), ACP_JSON_OBJECT);
  for (k = acp_json_child(defs); k; k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *def = acp_json_next(k);
    const acp_json_val *xm = acp_json_obj_getz(def, "x-method");
    const acp_json_val *xs = acp_json_obj_getz(def, "x-side");
    const acp_method_info *mi;
    char name[128], method[64], side[32];

    if (xm == NULL)
      continue;
    str_of(k, name, sizeof(name));
    str_of(xm, method, sizeof(method));
    assert_non_null(xs);
    str_of(xs, side, sizeof(side));
    if (overlay_skip != NULL &&
        (seen_has(overlay_skip, method) || strcmp(side, "proxy") == 0))
      continue;
    if (table_version == ACP_PROTOCOL_V2 && strcmp(side, "proxy") == 0)
      continue; /* proxy methods: not generated (gen_acp.py overlay()) */
    mi = acp_method_by_name_version(table_version, method, strlen(method));
    if (mi == NULL)
      fail_msg("%s: %s (%s) not in the method table", file, method, name);
    assert_string_equal(mi->name, method);
    assert_int_equal(mi->name_len, strlen(method));
    assert_ptr_equal(acp_method_by_id_version(table_version, mi->id), mi);
    /* The SDK's v2 copy spells mcp/message (both) as two types, one per
     * side. */
    if (table_version == ACP_PROTOCOL_V2)
      assert_int_equal(mi->side & side_of(side), side_of(side));
    else
      assert_int_equal(mi->side, side_of(side));
    if (!unstable_file)
      assert_false(mi->unstable);
    if (ends_with(name, "Notification")) {
      assert_non_null(mi->notification_type);
      assert_string_equal(mi->notification_type, name);
      if (mi->is_notification) {
        assert_string_equal(mi->params_type, name);
        assert_null(mi->result_type);
      }
    } else if (ends_with(name, "Request")) {
      assert_false(mi->is_notification);
      assert_string_equal(mi->params_type, name);
    } else if (ends_with(name, "Response")) {
      assert_false(mi->is_notification);
      assert_non_null(mi->result_type);
      assert_string_equal(mi->result_type, name);
    } else {
      fail_msg("%s: unexpected method type name %s", file, name);
    }
    seen_add(seen, method);
    checked++;
  }
  unload(&l);
  return checked;
}

/* Every method of the meta tables is in the table on the right side. */
static void check_meta(const char *file, seen_set *seen) {
  static const struct {
    const char *table;
    int side_bit;
  } tables[] = {{"agentMethods", ACP_SIDE_AGENT},
                {"clientMethods", ACP_SIDE_CLIENT},
                {"protocolMethods", ACP_SIDE_PROTOCOL}};
  loaded l;
  size_t t;

  load(&l, file);
  for (t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
    const acp_json_val *tab = acp_json_obj_getz(l.root, tables[t].table);
    const acp_json_val *k;
    assert_int_equal(acp_json_type_of(tab), ACP_JSON_OBJECT);
    for (k = acp_json_child(tab); k; k = acp_json_next(acp_json_next(k))) {
      char method[64];
      const acp_method_info *mi;
      str_of(acp_json_next(k), method, sizeof(method));
      mi = acp_method_by_name(method, strlen(method));
      if (mi == NULL)
        fail_msg("%s: %s not in the method table", file, method);
      assert_true(((int)mi->side & tables[t].side_bit) != 0);
      seen_add(seen, method);
    }
  }
  unload(&l);
}

static void test_gen_table_matches_schema(void **state) {
  seen_set *stable = calloc(1, sizeof(*stable));
  seen_set *all = calloc(1, sizeof(*all));
  seen_set *newer;
  size_t i, n_unstable = 0;
  (void)state;

  assert_non_null(stable);
  assert_non_null(all);
  assert_true(check_schema("schema.json", false, stable) > 0);
  check_meta("meta.json", stable);
  assert_true(check_schema("schema.unstable.json", true, all) > 0);
  check_meta("meta.unstable.json", all);
  overlay_skip = all;
  newer = calloc(1, sizeof(*newer));
  assert_non_null(newer);
  /* 5 requests, their 5 responses, 1 notification. */
  assert_int_equal(
      check_schema("acp/schema-sdk-2.4.0/v1/schema.unstable.json", true, newer),
      11);
  overlay_skip = NULL;
  for (i = 0; i < newer->n; i++)
    seen_add(all, newer->names[i]);
  free(newer);
  /* The unstable set is a superset of the stable one here, but count the
   * union to be safe. */
  for (i = 0; i < stable->n; i++)
    seen_add(all, stable->names[i]);
  assert_int_equal(acp_method_count(), all->n);
  /* The ids after the v1 ones belong to the methods only v2 has. */
  assert_true(acp_method_count() < (size_t)ACP_METHOD__COUNT - 1);
  assert_int_equal(acp_method_by_name("auth/login", 10), NULL);
  for (i = 0; i < acp_method_count(); i++) {
    const acp_method_info *mi = acp_method_at(i);
    size_t j;
    bool in_stable = false;
    assert_non_null(mi);
    assert_int_equal((size_t)mi->id, i + 1);
    for (j = 0; j < stable->n; j++)
      if (strcmp(stable->names[j], mi->name) == 0)
        in_stable = true;
    assert_int_equal(mi->unstable, !in_stable);
    if (mi->unstable)
      n_unstable++;
    assert_non_null(mi->params_type);
    assert_int_equal(mi->is_notification, mi->result_type == NULL);
  }
  assert_int_equal(acp_method_count() - n_unstable, stable->n);
  print_message("methods: %zu (%zu stable, %zu unstable)\n", acp_method_count(),
                stable->n, n_unstable);
  free(stable);
  free(all);
}

static void test_gen_known_kinds(void **state) {
  const acp_method_info *mi;
  (void)state;

  mi = acp_method_by_name("session/cancel", 14);
  assert_non_null(mi);
  assert_int_equal(mi->id, ACP_METHOD_SESSION_CANCEL);
  assert_true(mi->is_notification);
  assert_int_equal(mi->side, ACP_SIDE_AGENT);
  assert_string_equal(mi->params_type, "CancelNotification");

  mi = acp_method_by_name("session/update", 14);
  assert_non_null(mi);
  assert_true(mi->is_notification);
  assert_int_equal(mi->side, ACP_SIDE_CLIENT);
  assert_string_equal(mi->params_type, "SessionNotification");

  mi = acp_method_by_name("$/cancel_request", 16);
  assert_non_null(mi);
  assert_int_equal(mi->id, ACP_METHOD_CANCEL_REQUEST);
  assert_int_equal(mi->side, ACP_SIDE_PROTOCOL);
  assert_true(mi->is_notification);

  mi = acp_method_by_name("mcp/message", 11);
  assert_non_null(mi);
  assert_int_equal(mi->side, ACP_SIDE_BOTH);
  assert_false(mi->is_notification);
  assert_true(mi->unstable);
  assert_string_equal(mi->notification_type, "MessageMcpNotification");

  mi = acp_method_by_id(ACP_METHOD_INITIALIZE);
  assert_non_null(mi);
  assert_string_equal(mi->name, "initialize");
  assert_string_equal(mi->params_type, "InitializeRequest");
  assert_string_equal(mi->result_type, "InitializeResponse");
  assert_false(mi->unstable);

  mi = acp_method_by_name("document/didOpen", 16);
  assert_non_null(mi);
  assert_int_equal(mi->id, ACP_METHOD_DOCUMENT_DID_OPEN);
}

static void test_gen_lookup_rejects_unknown(void **state) {
  static const char buf[] = "session/newer";
  (void)state;

  assert_null(acp_method_by_name(NULL, 3));
  assert_null(acp_method_by_name("", 0));
  assert_null(acp_method_by_name("session/ne", 10));
  assert_null(acp_method_by_name("session/neW", 11));
  assert_null(acp_method_by_name("_x/session/new", 14));
  assert_null(acp_method_by_name("initialize\0", 11));
  assert_null(acp_method_by_name(buf, sizeof(buf) - 1));
  /* Not NUL-terminated: a prefix of a longer buffer. */
  assert_non_null(acp_method_by_name(buf, 11));
  assert_int_equal(acp_method_by_name(buf, 11)->id, ACP_METHOD_SESSION_NEW);
  assert_null(acp_method_by_id(ACP_METHOD_UNKNOWN));
  assert_null(acp_method_by_id(ACP_METHOD__COUNT));
  assert_null(acp_method_by_id((acp_method_id)-1));
  assert_null(acp_method_at(acp_method_count()));
  assert_non_null(acp_method_at(acp_method_count() - 1));
}

/* The v2 table: every method of the v2 schemas (and of the SDK 2.4.0 copy)
 * and nothing else, ids shared with v1 where the wire name is, the methods
 * v2 dropped absent, and the v2 required members. */
static void test_gen_v2_table(void **state) {
  seen_set *stable = calloc(1, sizeof(*stable));
  seen_set *all = calloc(1, sizeof(*all));
  const acp_method_info *mi;
  size_t i;
  (void)state;

  assert_non_null(stable);
  assert_non_null(all);
  table_version = ACP_PROTOCOL_V2;
  assert_true(check_schema("acp/schema/v2/schema.json", false, stable) > 0);
  assert_true(
      check_schema("acp/schema-sdk-2.4.0/v2/schema.json", false, stable) > 0);
  for (i = 0; i < stable->n; i++)
    seen_add(all, stable->names[i]);
  check_schema("acp/schema/v2/schema.unstable.json", true, all);
  check_schema("acp/schema-sdk-2.4.0/v2/schema.unstable.json", true, all);
  table_version = ACP_PROTOCOL_V1;
  assert_int_equal(acp_method_count_version(ACP_PROTOCOL_V2), all->n);
  for (i = 0; i < acp_method_count_version(ACP_PROTOCOL_V2); i++) {
    mi = acp_method_at_version(ACP_PROTOCOL_V2, i);
    assert_non_null(mi);
    assert_true(seen_has(all, mi->name));
    assert_int_equal(mi->unstable, !seen_has(stable, mi->name));
  }
  assert_null(acp_method_at_version(ACP_PROTOCOL_V2, all->n));
  /* v2 dropped these. */
  assert_null(acp_method_by_name_version(ACP_PROTOCOL_V2, "session/load", 12));
  assert_null(
      acp_method_by_name_version(ACP_PROTOCOL_V2, "fs/read_text_file", 17));
  assert_null(acp_method_by_name_version(ACP_PROTOCOL_V2, "authenticate", 12));
  /* Shared methods keep their id; v2-only ones come after v1's. */
  mi = acp_method_by_name_version(ACP_PROTOCOL_V2, "session/prompt", 14);
  assert_non_null(mi);
  assert_int_equal(mi->id, ACP_METHOD_SESSION_PROMPT);
  assert_ptr_not_equal(mi, acp_method_by_id(ACP_METHOD_SESSION_PROMPT));
  mi = acp_method_by_name_version(ACP_PROTOCOL_V2, "tool_call/cancel", 16);
  assert_non_null(mi);
  assert_false(mi->unstable);
  assert_true((size_t)mi->id > acp_method_count());
  assert_ptr_equal(acp_method_by_id(mi->id), mi);
  assert_null(acp_method_by_id_version(ACP_PROTOCOL_V1, mi->id));
  assert_null(acp_method_by_name_version(3, "initialize", 10));
  assert_int_equal(acp_method_count_version(0), 0);
  free(stable);
  free(all);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gen_table_matches_schema),
      cmocka_unit_test(test_gen_known_kinds),
      cmocka_unit_test(test_gen_lookup_rejects_unknown),
      cmocka_unit_test(test_gen_v2_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
