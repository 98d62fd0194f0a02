/*
 * Era translation between the stateful MCP revisions (2024-11-05 ..
 * 2025-11-25) and the stateless 2026-07-28: writers that turn one era's
 * message parts into the other's, built on the JSON layer so that every
 * member they do not touch is copied byte for byte.
 */
#include "mcp_int.h"

#define DEFAULT_SERVER_NAME "mcp-server"

static bool is_obj(const acp_json_val *v) {
  return acp_json_type_of(v) == ACP_JSON_OBJECT;
}

static bool key_is(const acp_json_val *k, const char *z) {
  return acp_json_str_eq(k, z, strlen(z)) != 0;
}

/* The revision to answer a 2025 client that asked for `asked`: the one it
 * asked for when we speak it, else our latest. */
static const char *answer_version(const acp_json_val *asked) {
  char buf[16];
  size_t n = 0;
  acp_mcp_version v = ACP_MCP_VERSION_UNKNOWN;

  if (acp_json_str_unescape(asked, buf, sizeof(buf), &n) == 0)
    v = acp_mcp_version_parse(buf, n);
  if (v == ACP_MCP_VERSION_UNKNOWN)
    v = ACP_MCP_VERSION_LATEST;
  return acp_mcp_version_str(v);
}

int acp_mcp_era_write_initialize_result(acp_json_writer *w,
                                        const acp_json_val *init_params,
                                        const acp_json_val *discover,
                                        const char *fallback_name) {
  const acp_json_val *caps = NULL;
  const acp_json_val *info = NULL;
  const acp_json_val *ins = NULL;
  const char *name =
      fallback_name != NULL ? fallback_name : DEFAULT_SERVER_NAME;

  if (w == NULL || (init_params != NULL && !is_obj(init_params)) ||
      (discover != NULL && !is_obj(discover)))
    return ACP_ERR_INVALID_ARGUMENT;
  if (discover != NULL) {
    caps = ACP__OBJ_GETL(discover, "capabilities");
    info = acp_json_obj_getz(ACP__OBJ_GETL(discover, "_meta"),
                             ACP_MCP_META_SERVER_INFO);
    ins = ACP__OBJ_GETL(discover, "instructions");
    if (!is_obj(caps))
      caps = NULL;
    if (!is_obj(info))
      info = NULL;
    if (acp_json_type_of(ins) != ACP_JSON_STRING)
      ins = NULL;
  }
  acp_json_write_obj_begin(w);
  ACP__W_KEYL(w, "protocolVersion");
  acp_json_write_strz(
      w, answer_version(ACP__OBJ_GETL(init_params, "protocolVersion")));
  ACP__W_KEYL(w, "capabilities");
  if (caps != NULL)
    acp_json_write_val(w, caps);
  else if (discover == NULL)
    acp_json_write_raw(w, "{\"tools\":{}}", 12);
  else
    acp_json_write_raw(w, "{}", 2);
  ACP__W_KEYL(w, "serverInfo");
  if (info != NULL) {
    acp_json_write_val(w, info);
  } else {
    acp_json_write_obj_begin(w);
    ACP__W_KEYL(w, "name");
    acp_json_write_strz(w, name);
    ACP__W_KEYL(w, "version");
    acp_json_write_strz(w, "0");
    acp_json_write_obj_end(w);
  }
  if (ins != NULL) {
    ACP__W_KEYL(w, "instructions");
    acp_json_write_val(w, ins);
  }
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w);
}

/* The members of the 2026 request `_meta` that `meta` (an object or NULL)
 * lacks. */
static void write_meta_members(acp_json_writer *w, const acp_json_val *meta,
                               const acp_json_val *init_params) {
  const acp_json_val *caps = ACP__OBJ_GETL(init_params, "capabilities");
  const acp_json_val *info = ACP__OBJ_GETL(init_params, "clientInfo");

  if (acp_json_obj_getz(meta, ACP_MCP_META_PROTOCOL_VERSION) == NULL) {
    acp_json_write_keyz(w, ACP_MCP_META_PROTOCOL_VERSION);
    acp_json_write_strz(w, ACP_MCP_PROTOCOL_2026_07_28);
  }
  if (acp_json_obj_getz(meta, ACP_MCP_META_CLIENT_CAPABILITIES) == NULL) {
    acp_json_write_keyz(w, ACP_MCP_META_CLIENT_CAPABILITIES);
    if (is_obj(caps))
      acp_json_write_val(w, caps);
    else
      acp_json_write_raw(w, "{}", 2);
  }
  if (info != NULL &&
      acp_json_obj_getz(meta, ACP_MCP_META_CLIENT_INFO) == NULL) {
    acp_json_write_keyz(w, ACP_MCP_META_CLIENT_INFO);
    acp_json_write_val(w, info);
  }
}

int acp_mcp_era_write_request_params(acp_json_writer *w,
                                     const acp_json_val *params,
                                     const acp_json_val *init_params) {
  const acp_json_val *meta = ACP__OBJ_GETL(params, "_meta");
  const acp_json_val *k;
  bool done = false;

  if (w == NULL || (params != NULL && !is_obj(params)) ||
      (meta != NULL && !is_obj(meta)) ||
      (init_params != NULL && !is_obj(init_params)))
    return ACP_ERR_INVALID_ARGUMENT;
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(params); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *v = acp_json_next(k);
    const acp_json_val *m;

    acp__json_write_key_val(w, k);
    if (done || v != meta) {
      acp_json_write_val(w, v);
      continue;
    }
    /* The first `_meta` (the one acp_json_obj_getz() found): keep its
     * members, add ours after them. */
    acp_json_write_obj_begin(w);
    for (m = acp_json_child(v); m != NULL;
         m = acp_json_next(acp_json_next(m))) {
      acp__json_write_key_val(w, m);
      acp_json_write_val(w, acp_json_next(m));
    }
    write_meta_members(w, meta, init_params);
    acp_json_write_obj_end(w);
    done = true;
  }
  if (!done) {
    ACP__W_KEYL(w, "_meta");
    acp_json_write_obj_begin(w);
    write_meta_members(w, NULL, init_params);
    acp_json_write_obj_end(w);
  }
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w);
}

int acp_mcp_era_write_result(acp_json_writer *w, const acp_json_val *result) {
  const acp_json_val *rt = ACP__OBJ_GETL(result, "resultType");
  const acp_json_val *k;

  if (w == NULL || !is_obj(result))
    return ACP_ERR_INVALID_ARGUMENT;
  if (rt != NULL && !acp_json_str_eq(rt, "complete", 8))
    return ACP_ERR_UNSUPPORTED;
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(result); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    if (key_is(k, "resultType") || key_is(k, "ttlMs") ||
        key_is(k, "cacheScope"))
      continue;
    acp__json_write_key_val(w, k);
    acp_json_write_val(w, acp_json_next(k));
  }
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w);
}

int acp__mcp_era_write_stateless_result(acp_json_writer *w,
                                        const acp_json_val *result,
                                        const char *server_info,
                                        size_t info_len, int64_t ttl_ms,
                                        const char *cache_scope) {
  const acp_json_val *rt = ACP__OBJ_GETL(result, "resultType");
  const acp_json_val *meta = ACP__OBJ_GETL(result, "_meta");
  const acp_json_val *k;
  bool complete = rt == NULL || acp_json_str_eq(rt, "complete", 8);

  if (w == NULL || !is_obj(result) || (meta != NULL && !is_obj(meta)))
    return ACP_ERR_INVALID_ARGUMENT;
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(result); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const acp_json_val *v = acp_json_next(k);
    /* The hints are ours to set on cacheable complete results; other
     * results keep their own `ttlMs` (a task's lifetime). */
    if (key_is(k, "_meta") || (complete && ttl_ms >= 0 &&
                               (key_is(k, "ttlMs") || key_is(k, "cacheScope"))))
      continue;
    acp__json_write_key_val(w, k);
    acp_json_write_val(w, v);
  }
  if (rt == NULL) {
    ACP__W_KEYL(w, "resultType");
    acp_json_write_strz(w, "complete");
  }
  if (complete && ttl_ms >= 0) {
    ACP__W_KEYL(w, "ttlMs");
    acp_json_write_int(w, ttl_ms);
    ACP__W_KEYL(w, "cacheScope");
    acp_json_write_strz(w, cache_scope != NULL ? cache_scope : "private");
  }
  ACP__W_KEYL(w, "_meta");
  acp_json_write_obj_begin(w);
  for (k = acp_json_child(meta); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    if (server_info != NULL && key_is(k, ACP_MCP_META_SERVER_INFO))
      continue;
    acp__json_write_key_val(w, k);
    acp_json_write_val(w, acp_json_next(k));
  }
  if (server_info != NULL) {
    acp_json_write_keyz(w, ACP_MCP_META_SERVER_INFO);
    acp_json_write_raw(w, server_info, info_len);
  }
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  return acp_json_writer_error(w);
}

const acp_json_val *acp_mcp_named_param(const acp_json_val *method,
                                        const acp_json_val *params) {
  if (ACP_JSON_STR_EQ_LIT(method, "tools/call") ||
      ACP_JSON_STR_EQ_LIT(method, "prompts/get"))
    return ACP__OBJ_GETL(params, "name");
  if (ACP_JSON_STR_EQ_LIT(method, "resources/read"))
    return ACP__OBJ_GETL(params, "uri");
  if (ACP_JSON_STR_EQ_LIT(method, "tasks/get") ||
      ACP_JSON_STR_EQ_LIT(method, "tasks/update") ||
      ACP_JSON_STR_EQ_LIT(method, "tasks/cancel"))
    return ACP__OBJ_GETL(params, "taskId");
  return NULL;
}
