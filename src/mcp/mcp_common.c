/*
 * MCP pieces shared by both roles: revision and log-level tables, the RFC
 * 6570 level-1 matcher and small string helpers.
 */
#include "mcp_int.h"

/* MARK: - Versions and levels */

static const char *const versions[] = {NULL, "2024-11-05", "2025-03-26",
                                       "2025-06-18", "2025-11-25"};

const char *acp_mcp_version_str(acp_mcp_version v) {
  if ((int)v <= 0 || (int)v > (int)ACP_MCP_VERSION_LATEST)
    return NULL;
  return versions[v];
}

acp_mcp_version acp_mcp_version_parse(const char *s, size_t len) {
  int i;

  if (s == NULL)
    return ACP_MCP_VERSION_UNKNOWN;
  for (i = 1; i <= (int)ACP_MCP_VERSION_LATEST; i++) {
    if (len == 10 && memcmp(s, versions[i], 10) == 0)
      return (acp_mcp_version)i;
  }
  return ACP_MCP_VERSION_UNKNOWN;
}

static const char *const levels[] = {"debug",   "info",     "notice",
                                     "warning", "error",    "critical",
                                     "alert",   "emergency"};

const char *acp_mcp_log_level_str(acp_mcp_log_level level) {
  if ((int)level < 0 || (int)level > (int)ACP_MCP_LOG_EMERGENCY)
    return NULL;
  return levels[level];
}

int acp_mcp_log_level_parse(const char *s, size_t len) {
  int i;

  if (s == NULL)
    return -1;
  for (i = 0; i <= (int)ACP_MCP_LOG_EMERGENCY; i++) {
    if (strlen(levels[i]) == len && memcmp(s, levels[i], len) == 0)
      return i;
  }
  return -1;
}

/* MARK: - URI templates */

typedef struct tpl_part {
  const char *p; /* literal text or variable name */
  size_t n;
  bool is_var;
} tpl_part;

static int tpl_split(const char *t, size_t tn, tpl_part *parts, size_t cap,
                     size_t *nparts, size_t *nvars) {
  size_t i = 0;
  size_t np = 0;
  size_t nv = 0;

  while (i < tn) {
    if (np == cap)
      return ACP_ERR_INVALID_ARGUMENT;
    if (t[i] == '{') {
      size_t j = i + 1;
      while (j < tn && t[j] != '}' && t[j] != '{')
        j++;
      if (j >= tn || t[j] != '}' || j == i + 1)
        return ACP_ERR_INVALID_ARGUMENT;
      parts[np].p = t + i + 1;
      parts[np].n = j - i - 1;
      parts[np].is_var = true;
      np++;
      nv++;
      i = j + 1;
    } else if (t[i] == '}') {
      return ACP_ERR_INVALID_ARGUMENT;
    } else {
      size_t j = i;
      while (j < tn && t[j] != '{' && t[j] != '}')
        j++;
      parts[np].p = t + i;
      parts[np].n = j - i;
      parts[np].is_var = false;
      np++;
      i = j;
    }
  }
  if (nv > ACP__MCP_MAX_VARS)
    return ACP_ERR_INVALID_ARGUMENT;
  *nparts = np;
  *nvars = nv;
  return 0;
}

static bool var_char(char c) {
  return c != '/' && c != '?' && c != '#';
}

/* Match parts[k..] against u[0..un); fills vs/vl for variables from vi. */
static int tpl_match(const tpl_part *parts, size_t np, size_t k, const char *u,
                     size_t un, size_t off, size_t *vs, size_t *vl, size_t vi) {
  size_t n;

  if (k == np)
    return un == 0;
  if (!parts[k].is_var) {
    if (un < parts[k].n || memcmp(u, parts[k].p, parts[k].n) != 0)
      return 0;
    return tpl_match(parts, np, k + 1, u + parts[k].n, un - parts[k].n,
                     off + parts[k].n, vs, vl, vi);
  }
  /* Longest run first, then shorter ones (backtracking). */
  n = 0;
  while (n < un && var_char(u[n]))
    n++;
  for (; n >= 1; n--) {
    if (tpl_match(parts, np, k + 1, u + n, un - n, off + n, vs, vl, vi + 1)) {
      vs[vi] = off;
      vl[vi] = n;
      return 1;
    }
  }
  return 0;
}

int acp_mcp_uri_template_match(const char *tpl, size_t tpl_len, const char *uri,
                               size_t uri_len, size_t *starts, size_t *lens,
                               size_t max_vars, size_t *nvars) {
  tpl_part parts[2 * ACP__MCP_MAX_VARS + 2];
  size_t vs[ACP__MCP_MAX_VARS];
  size_t vl[ACP__MCP_MAX_VARS];
  size_t np = 0;
  size_t nv = 0;
  size_t i;
  int rv;

  if (tpl == NULL || (uri == NULL && uri_len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  rv = tpl_split(tpl, tpl_len, parts, sizeof(parts) / sizeof(parts[0]), &np,
                 &nv);
  if (rv != 0)
    return rv;
  if ((starts != NULL || lens != NULL) && nv > max_vars)
    return ACP_ERR_INVALID_ARGUMENT;
  if (nvars)
    *nvars = nv;
  if (!tpl_match(parts, np, 0, uri, uri_len, 0, vs, vl, 0))
    return 0;
  for (i = 0; i < nv; i++) {
    if (starts)
      starts[i] = vs[i];
    if (lens)
      lens[i] = vl[i];
  }
  return 1;
}

/* MARK: - Helpers */

char *acp__mcp_dupz(const acp_mem *m, const char *s, int *rv) {
  char *p;

  *rv = 0;
  if (s == NULL)
    return NULL;
  p = acp__strndup(m, s, strlen(s));
  if (p == NULL)
    *rv = ACP_ERR_NOMEM;
  return p;
}

int acp__mcp_str_dup(const acp_mem *m, acp_json_doc *doc, const acp_json_val *v,
                     char **out, size_t *len) {
  const char *p;
  size_t n;
  int rv = acp_json_doc_str(doc, v, &p, &n);

  *out = NULL;
  if (rv != 0)
    return rv;
  *out = acp__strndup(m, p, n);
  if (*out == NULL)
    return ACP_ERR_NOMEM;
  if (len)
    *len = n;
  return 0;
}

int acp__mcp_status(const acp_rpc_msg *msg) {
  if (msg->error == NULL && !msg->local)
    return 0;
  if (msg->local) {
    switch (msg->error_code) {
    case ACP_RPC_REQUEST_TIMEOUT:
      return ACP_ERR_TIMEOUT;
    case ACP_RPC_REQUEST_CANCELLED:
      return ACP_ERR_CANCELLED;
    case ACP_RPC_CONNECTION_CLOSED:
      return ACP_ERR_CLOSED;
    default:
      break;
    }
  }
  return ACP_ERR_PROTOCOL;
}
