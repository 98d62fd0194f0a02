/*
 * `acp proxy guard [--deny PATTERN]...`: a permission policy. A
 * session/request_permission from the agent whose tool call's title or kind
 * contains one of the patterns (case-insensitive substring) is answered by
 * the proxy itself: with the first reject option offered (reject_once or
 * reject_always), or with outcome "cancelled" when there is none. The
 * client never sees it. Every other message is forwarded unchanged. Without
 * patterns the proxy forwards everything.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_run.h"

static const char guard_usage[] =
    "usage: acp proxy guard [--deny PATTERN]...\n"
    "\n"
    "An ACP proxy (run it under a conductor) that rejects permission\n"
    "requests for tool calls whose title or kind contains a PATTERN\n"
    "(case-insensitive), and forwards everything else.\n"
    "\n"
    "options:\n"
    "  --deny PATTERN  reject matching tool calls (repeatable)\n"
    "  -h, --help      show this help\n";

typedef struct guard_app {
  char **deny;
  int ndeny;
} guard_app;

/* Case-insensitive (ASCII) search of pat in s[0..n). */
static int contains(const char *s, size_t n, const char *pat) {
  size_t m = strlen(pat);
  size_t i;
  size_t j;

  if (m == 0)
    return 1;
  for (i = 0; i + m <= n; i++) {
    for (j = 0; j < m; j++)
      if (tolower((unsigned char)s[i + j]) != tolower((unsigned char)pat[j]))
        break;
    if (j == m)
      return 1;
  }
  return 0;
}

static const char *match(const guard_app *g, acp_json_doc *doc,
                         const acp_json_val *v) {
  const char *s;
  size_t n;
  int i;

  if (acp_json_type_of(v) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, v, &s, &n) != 0)
    return NULL;
  for (i = 0; i < g->ndeny; i++)
    if (contains(s, n, g->deny[i]))
      return g->deny[i];
  return NULL;
}

/* The first option whose kind starts with "reject", or NULL. */
static const acp_json_val *reject_option(const acp_json_val *options) {
  const acp_json_val *o;

  for (o = acp_json_child(options); o; o = acp_json_next(o)) {
    const acp_json_val *kind = acp_json_obj_getz(o, "kind");

    if ((ACP_JSON_STR_EQ_LIT(kind, "reject_once") ||
         ACP_JSON_STR_EQ_LIT(kind, "reject_always")) &&
        acp_json_type_of(acp_json_obj_getz(o, "optionId")) == ACP_JSON_STRING)
      return o;
  }
  return NULL;
}

static int on_from_agent(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  guard_app *g = ud;
  const acp_json_val *tool;
  const acp_json_val *opt;
  const char *pat;
  char result[1024];
  int n;

  if (m->req == NULL || strcmp(m->method, "session/request_permission") != 0)
    return ACP_PROXY_FORWARD;
  tool = acp_json_obj_getz(m->params, "toolCall");
  pat = match(g, m->doc, acp_json_obj_getz(tool, "title"));
  if (pat == NULL)
    pat = match(g, m->doc, acp_json_obj_getz(tool, "kind"));
  if (pat == NULL)
    return ACP_PROXY_FORWARD;
  opt = reject_option(acp_json_obj_getz(m->params, "options"));
  if (opt != NULL) {
    size_t len;
    const char *id = acp_json_raw(acp_json_obj_getz(opt, "optionId"), &len);

    n = snprintf(result, sizeof(result),
                 "{\"outcome\":{\"outcome\":\"selected\",\"optionId\":%.*s}}",
                 (int)len, id);
  } else {
    n = snprintf(result, sizeof(result),
                 "{\"outcome\":{\"outcome\":\"cancelled\"}}");
  }
  if (n < 0 || (size_t)n >= sizeof(result))
    n = snprintf(result, sizeof(result),
                 "{\"outcome\":{\"outcome\":\"cancelled\"}}");
  proxy_log("guard", "rejected a tool call (pattern \"%s\")", pat);
  if (acp_proxy_respond(p, m->req, result, (size_t)n) != 0)
    return ACP_PROXY_FORWARD;
  return 0;
}

int proxy_guard_main(int argc, char **argv) {
  guard_app g;
  acp_proxy_callbacks *cbs = NULL;
  acp_proxy *p = NULL;
  int status = 1;
  int i;

  memset(&g, 0, sizeof(g));
  g.deny = calloc((size_t)argc + 1, sizeof(*g.deny));
  if (g.deny == NULL)
    return 1;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(guard_usage, stdout);
      free(g.deny);
      return 0;
    } else if (strcmp(argv[i], "--deny") == 0 && i + 1 < argc) {
      g.deny[g.ndeny++] = argv[++i];
    } else if (strncmp(argv[i], "--deny=", 7) == 0) {
      g.deny[g.ndeny++] = argv[i] + 7;
    } else {
      fprintf(stderr, "acp proxy guard: bad argument '%s'\n", argv[i]);
      fputs(guard_usage, stderr);
      free(g.deny);
      return 2;
    }
  }
  if (acp_proxy_callbacks_new(&cbs) != 0)
    goto cleanup;
  acp_proxy_callbacks_set_on_from_agent(cbs, on_from_agent);
  if (acp_proxy_new(&p, cbs, &g, NULL, NULL) != 0)
    goto cleanup;
  status = proxy_run_stdio(p, "guard");
cleanup:
  acp_proxy_free(p);
  acp_proxy_callbacks_free(cbs);
  free(g.deny);
  return status;
}
