/*
 * `acp proxy context [--file PATH]`: prepends the content of a file, as a
 * text block, to the first prompt of each session. The default file is
 * AGENTS.md in the session's cwd (remembered from session/new, session/load
 * and session/resume, per sessionId), used only if present. This is the
 * Proxy Chains RFD's example of a proxy replacing AGENTS.md support inside
 * agents.
 *
 * Everything else is forwarded unchanged; the prompt itself changes only by
 * the inserted block (the rest of its bytes are spliced as received).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_run.h"

#define MAX_CONTEXT_BYTES (4u * 1024u * 1024u)

static const char context_usage[] =
    "usage: acp proxy context [--file PATH]\n"
    "\n"
    "An ACP proxy (run it under a conductor) that prepends the content of a\n"
    "file as a text block to the first prompt of each session.\n"
    "\n"
    "options:\n"
    "  --file PATH  the file to prepend (default: AGENTS.md in the session's\n"
    "               cwd, if present)\n"
    "  -h, --help   show this help\n";

typedef struct csession {
  struct csession *next;
  char *id;
  char *cwd; /* NULL when unknown */
  int prompted;
} csession;

typedef struct context_app {
  const char *file;
  csession *sessions;
  acp_json_writer *w;
} context_app;

static char *dup_str(acp_json_doc *doc, const acp_json_val *v) {
  const char *s;
  size_t n;
  char *d;

  if (acp_json_type_of(v) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, v, &s, &n) != 0 || memchr(s, '\0', n) != NULL)
    return NULL;
  d = malloc(n + 1);
  if (d == NULL)
    return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

static csession *find_session(context_app *a, const char *id) {
  csession *s;

  for (s = a->sessions; s; s = s->next)
    if (strcmp(s->id, id) == 0)
      return s;
  return NULL;
}

/* Remember (or update) a session; takes ownership of id and cwd. */
static csession *add_session(context_app *a, char *id, char *cwd) {
  csession *s = find_session(a, id);

  if (s != NULL) {
    free(id);
    if (cwd != NULL) {
      free(s->cwd);
      s->cwd = cwd;
    }
    return s;
  }
  s = calloc(1, sizeof(*s));
  if (s == NULL) {
    free(id);
    free(cwd);
    return NULL;
  }
  s->id = id;
  s->cwd = cwd;
  s->next = a->sessions;
  a->sessions = s;
  return s;
}

/* The whole file in a malloc'd buffer, or NULL if absent or unreadable. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t cap = 0;
  size_t n = 0;

  if (f == NULL)
    return NULL;
  for (;;) {
    size_t got;

    if (n == cap) {
      char *nb;

      if (cap >= MAX_CONTEXT_BYTES)
        break;
      cap = cap ? cap * 2 : 4096;
      nb = realloc(buf, cap);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  fclose(f);
  *len = n;
  return buf;
}

static char *context_path(const context_app *a, const csession *s) {
  char *path;
  size_t n;

  if (a->file != NULL)
    return strdup(a->file);
  if (s == NULL || s->cwd == NULL)
    return NULL;
  n = strlen(s->cwd) + sizeof("/AGENTS.md");
  path = malloc(n);
  if (path != NULL)
    snprintf(path, n, "%s/AGENTS.md", s->cwd);
  return path;
}

/*
 * Forward the prompt with a text block holding `text` inserted as the first
 * element of params.prompt. Returns 0 when forwarded.
 */
static int forward_with_context(acp_proxy *p, context_app *a,
                                const acp_proxy_msg *m, const char *text,
                                size_t text_len) {
  const acp_json_val *prompt = acp_json_obj_getz(m->params, "prompt");
  const char *block;
  const char *raw;
  size_t block_len;
  size_t raw_len;
  size_t head;
  char *buf;
  size_t n = 0;
  int rv;

  if (acp_json_type_of(prompt) != ACP_JSON_ARRAY)
    return -1;
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "type");
  acp_json_write_strz(a->w, "text");
  acp_json_write_keyz(a->w, "text");
  acp_json_write_str(a->w, text, text_len);
  acp_json_write_obj_end(a->w);
  if (acp_json_writer_error(a->w) != 0)
    return -1; /* e.g. the file is not UTF-8 */
  block = acp_json_writer_data(a->w, &block_len);
  raw = acp_json_raw(prompt, &raw_len);
  head = (size_t)(raw - m->params_raw) + 1; /* just after '[' */
  buf = malloc(m->params_len + block_len + 1);
  if (buf == NULL)
    return -1;
  memcpy(buf, m->params_raw, head);
  n = head;
  memcpy(buf + n, block, block_len);
  n += block_len;
  if (acp_json_len(prompt) > 0)
    buf[n++] = ',';
  memcpy(buf + n, m->params_raw + head, m->params_len - head);
  n += m->params_len - head;
  rv = acp_proxy_forward_transformed(p, m, buf, n);
  free(buf);
  return rv;
}

static int on_prompt(acp_proxy *p, context_app *a, const acp_proxy_msg *m) {
  char *sid = dup_str(m->doc, acp_json_obj_getz(m->params, "sessionId"));
  csession *s;
  char *path;
  char *text;
  size_t len = 0;

  if (sid == NULL)
    return ACP_PROXY_FORWARD;
  s = add_session(a, sid, NULL);
  if (s == NULL || s->prompted)
    return ACP_PROXY_FORWARD;
  s->prompted = 1;
  path = context_path(a, s);
  if (path == NULL)
    return ACP_PROXY_FORWARD;
  text = read_file(path, &len);
  if (text == NULL) {
    if (a->file != NULL)
      proxy_log("context", "cannot read %s", path);
    free(path);
    return ACP_PROXY_FORWARD;
  }
  if (forward_with_context(p, a, m, text, len) != 0) {
    proxy_log("context", "%s not added (not UTF-8, or a bad prompt)", path);
    free(text);
    free(path);
    return ACP_PROXY_FORWARD;
  }
  free(text);
  free(path);
  return 0;
}

static int on_from_client(acp_proxy *p, const acp_proxy_msg *m, void *ud) {
  context_app *a = ud;

  if (m->req == NULL)
    return ACP_PROXY_FORWARD;
  if (strcmp(m->method, "session/prompt") == 0)
    return on_prompt(p, a, m);
  if (strcmp(m->method, "session/new") == 0) {
    /* the sessionId comes with the response: keep the cwd until then */
    acp_proxy_request_set_user_data(
        m->req, dup_str(m->doc, acp_json_obj_getz(m->params, "cwd")));
  } else if (strcmp(m->method, "session/load") == 0 ||
             strcmp(m->method, "session/resume") == 0) {
    char *sid = dup_str(m->doc, acp_json_obj_getz(m->params, "sessionId"));

    if (sid != NULL)
      add_session(a, sid, dup_str(m->doc, acp_json_obj_getz(m->params, "cwd")));
  }
  return ACP_PROXY_FORWARD;
}

static int on_response(acp_proxy *p, acp_proxy_request *req,
                       const acp_rpc_msg *msg, void *ud) {
  context_app *a = ud;
  char *cwd = acp_proxy_request_get_user_data(req);
  char *sid;

  (void)p;
  if (cwd == NULL)
    return ACP_PROXY_FORWARD;
  acp_proxy_request_set_user_data(req, NULL);
  sid = dup_str(msg->doc, acp_json_obj_getz(msg->result, "sessionId"));
  if (sid != NULL)
    add_session(a, sid, cwd);
  else
    free(cwd);
  return ACP_PROXY_FORWARD;
}

int proxy_context_main(int argc, char **argv) {
  context_app a;
  acp_proxy_callbacks *cbs = NULL;
  acp_proxy *p = NULL;
  int status = 1;
  int i;

  memset(&a, 0, sizeof(a));
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(context_usage, stdout);
      return 0;
    } else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc) {
      a.file = argv[++i];
    } else if (strncmp(argv[i], "--file=", 7) == 0) {
      a.file = argv[i] + 7;
    } else {
      fprintf(stderr, "acp proxy context: bad argument '%s'\n", argv[i]);
      fputs(context_usage, stderr);
      return 2;
    }
  }
  if (acp_json_writer_new(&a.w, 0, NULL) != 0 ||
      acp_proxy_callbacks_new(&cbs) != 0)
    goto cleanup;
  acp_proxy_callbacks_set_on_from_client(cbs, on_from_client);
  acp_proxy_callbacks_set_on_response(cbs, on_response);
  if (acp_proxy_new(&p, cbs, &a, NULL, NULL) != 0)
    goto cleanup;
  status = proxy_run_stdio(p, "context");
cleanup:
  acp_proxy_free(p);
  acp_proxy_callbacks_free(cbs);
  acp_json_writer_free(a.w);
  while (a.sessions) {
    csession *s = a.sessions;

    a.sessions = s->next;
    free(s->id);
    free(s->cwd);
    free(s);
  }
  return status;
}
