/*
 * Fuzz target for the MCP era writers (mcp.h, MARK: - Eras).
 *
 * Input: one JSON text. If it parses, it is used as every argument the
 * writers take (request params, initialize params, server/discover result,
 * result). Checks, for each writer that returns 0:
 *   - the output is one valid JSON object;
 *   - acp_mcp_era_write_request_params(): its `_meta` has the 2026
 *     protocolVersion and clientCapabilities members;
 *   - acp_mcp_era_write_result(): no top-level resultType, ttlMs or
 *     cacheScope is left, and every other member is kept;
 *   - acp_mcp_era_write_initialize_result(): protocolVersion is a revision
 *     the library speaks, serverInfo and capabilities are objects.
 * Errors must be one of the documented codes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "acp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const acp_json_val *reparse(acp_json_doc *doc, acp_json_writer *w) {
  size_t n;
  const char *s = acp_json_writer_data(w, &n);

  CHECK(acp_json_doc_parse(doc, s, n, NULL) == 0);
  CHECK(acp_json_type_of(acp_json_doc_root(doc)) == ACP_JSON_OBJECT);
  return acp_json_doc_root(doc);
}

static const acp_json_val *obj_or_null(const acp_json_val *v) {
  return acp_json_type_of(v) == ACP_JSON_OBJECT ? v : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  acp_json_doc *in = NULL;
  acp_json_doc *out = NULL;
  acp_json_writer *w = NULL;
  const acp_json_val *v;
  const acp_json_val *o;
  const acp_json_val *k;
  int rv;

  if (acp_json_doc_new(&in, NULL) != 0 || acp_json_doc_new(&out, NULL) != 0 ||
      acp_json_writer_new(&w, 0, NULL) != 0)
    abort();
  if (acp_json_doc_parse(in, (const char *)data, size, NULL) != 0)
    goto done;
  v = acp_json_doc_root(in);

  rv = acp_mcp_era_write_request_params(w, v, obj_or_null(v));
  CHECK(rv == 0 || rv == ACP_ERR_INVALID_ARGUMENT);
  if (rv == 0) {
    const acp_json_val *meta;

    o = reparse(out, w);
    meta = acp_json_obj_getz(o, "_meta");
    CHECK(acp_json_type_of(meta) == ACP_JSON_OBJECT);
    CHECK(acp_json_obj_getz(meta, ACP_MCP_META_PROTOCOL_VERSION) != NULL);
    CHECK(acp_json_obj_getz(meta, ACP_MCP_META_CLIENT_CAPABILITIES) != NULL);
    CHECK(acp_json_len(o) == acp_json_len(v) ||
          acp_json_len(o) == acp_json_len(v) + 1);
  }
  acp_json_writer_reset(w);

  rv = acp_mcp_era_write_result(w, v);
  CHECK(rv == 0 || rv == ACP_ERR_INVALID_ARGUMENT || rv == ACP_ERR_UNSUPPORTED);
  if (rv == 0) {
    size_t dropped = 0;

    for (k = acp_json_child(v); k != NULL; k = acp_json_next(acp_json_next(k)))
      if (acp_json_str_eq(k, "resultType", 10) ||
          acp_json_str_eq(k, "ttlMs", 5) ||
          acp_json_str_eq(k, "cacheScope", 10))
        dropped++;
    o = reparse(out, w);
    CHECK(acp_json_len(o) + dropped == acp_json_len(v));
    for (k = acp_json_child(o); k != NULL; k = acp_json_next(acp_json_next(k)))
      CHECK(!acp_json_str_eq(k, "resultType", 10) &&
            !acp_json_str_eq(k, "ttlMs", 5) &&
            !acp_json_str_eq(k, "cacheScope", 10));
  }
  acp_json_writer_reset(w);

  rv = acp_mcp_era_write_initialize_result(w, obj_or_null(v), obj_or_null(v),
                                           "fuzz");
  CHECK(rv == 0);
  {
    const acp_json_val *pv;
    char buf[16];
    size_t n = 0;

    o = reparse(out, w);
    pv = acp_json_obj_getz(o, "protocolVersion");
    CHECK(acp_json_str_unescape(pv, buf, sizeof(buf), &n) == 0);
    CHECK(acp_mcp_version_parse(buf, n) != ACP_MCP_VERSION_UNKNOWN);
    CHECK(acp_json_type_of(acp_json_obj_getz(o, "serverInfo")) ==
          ACP_JSON_OBJECT);
    CHECK(acp_json_type_of(acp_json_obj_getz(o, "capabilities")) ==
          ACP_JSON_OBJECT);
  }

done:
  acp_json_writer_free(w);
  acp_json_doc_free(out);
  acp_json_doc_free(in);
  return 0;
}
