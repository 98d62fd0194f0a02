/*
 * acp agent --unstable: providers, next edit suggestions and documents.
 *
 * Everything is read through the generated v1 types (types.h), so the
 * handlers see exactly what the schema says and nothing is parsed by hand.
 * The suggestion engine is deliberately trivial and predictable, for
 * transcripts: in an open, fully synced document every `TODO` is a
 * suggestion to write `DONE` there, first in the document first, skipping
 * the places the client rejected. The documents are kept as the client
 * sends them: the agent advertises incremental sync, so didChange brings
 * ranges to replace (a change without a range is the whole text), and
 * after the client applies an accepted edit and reports it, the suggestion
 * is gone because the text changed, not because the agent remembers it.
 *
 * Positions (`character`) count the units of the encoding the agent
 * picked at initialize from the client's clientCapabilities.positionEncodings
 * (PositionEncodingKind, as in LSP 3.17): the first one it knows of the
 * client's list in its order of preference (utf-16, utf-8 or utf-32), else
 * utf-16, the default; the agent states it as its positionEncoding. The
 * text is kept as UTF-8, so every position that comes in or goes out is
 * converted (units, pos_to_byte).
 */
#include "agent_nes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/methods.h"
#include "acp/types.h"
#include "acp/types_v2.h"

typedef struct rejected {
  int64_t line, character;
} rejected;

/* PositionEncodingKind: what a position's `character` counts. */
typedef enum { ENC_UTF16, ENC_UTF8, ENC_UTF32 } enc_kind;

static const char *const enc_names[] = {"utf-16", "utf-8", "utf-32"};

typedef struct ndoc {
  enc_kind enc; /* the connection's, at didOpen */
  char *uri;
  char *text;
  size_t len;
  int64_t version;
  bool synced; /* false after a change that cannot be applied */
  rejected *rej;
  size_t nrej;
  struct ndoc *next;
} ndoc;

/* A suggestion sent and not yet accepted or rejected. */
typedef struct pending {
  char id[24];
  char *uri;
  int64_t line, character;
  struct pending *next;
} pending;

typedef struct nsess {
  char id[24];
  ndoc *docs;
  pending *pending;
  struct nsess *next;
} nsess;

struct agent_nes {
  bool provider_set;
  char api[16];
  char *base_url;
  nsess *sessions;
  unsigned next_sess, next_sug;
  acp_arena *arena;
  acp_json_writer *w;
  enc_kind enc; /* picked at initialize (agent_nes_capabilities) */
  char caps[256];
};

const char *agent_nes_capabilities(agent_nes *n,
                                   const acp_json_val *client_caps) {
  const acp_json_val *offered =
      acp_json_obj_getz(client_caps, "positionEncodings");
  const acp_json_val *e;
  bool picked = false;

  n->enc = ENC_UTF16;
  /* Unknown or non-string entries are skipped (the schema's
   * x-deserialize-skip-invalid-items), not an error; a non-array gives no
   * child. */
  if (acp_json_type_of(offered) == ACP_JSON_ARRAY) {
    for (e = acp_json_child(offered); e != NULL && !picked;
         e = acp_json_next(e)) {
      size_t k;

      for (k = 0; k < 3 && !picked; k++) {
        if (acp_json_str_eq(e, enc_names[k], strlen(enc_names[k]))) {
          n->enc = (enc_kind)k;
          picked = true;
        }
      }
    }
  }
  snprintf(n->caps, sizeof(n->caps),
           "\"providers\":{},\"nes\":{\"events\":{\"document\":{"
           "\"didOpen\":{},\"didChange\":{\"syncKind\":\"incremental\"},"
           "\"didClose\":{},\"didSave\":{},\"didFocus\":{}}}},"
           "\"positionEncoding\":\"%s\"",
           enc_names[n->enc]);
  return n->caps;
}

agent_nes *agent_nes_new(void) {
  agent_nes *n = calloc(1, sizeof(*n));

  if (n == NULL)
    return NULL;
  if (acp_arena_new(&n->arena, NULL) != 0 ||
      acp_json_writer_new(&n->w, 0, NULL) != 0) {
    agent_nes_free(n);
    return NULL;
  }
  return n;
}

static void doc_free(ndoc *d) {
  free(d->uri);
  free(d->text);
  free(d->rej);
  free(d);
}

static void pending_free(pending *p) {
  free(p->uri);
  free(p);
}

static void sess_free(nsess *s) {
  while (s->docs != NULL) {
    ndoc *d = s->docs;
    s->docs = d->next;
    doc_free(d);
  }
  while (s->pending != NULL) {
    pending *p = s->pending;
    s->pending = p->next;
    pending_free(p);
  }
  free(s);
}

void agent_nes_free(agent_nes *n) {
  if (n == NULL)
    return;
  while (n->sessions != NULL) {
    nsess *s = n->sessions;
    n->sessions = s->next;
    sess_free(s);
  }
  free(n->base_url);
  acp_arena_free(n->arena);
  acp_json_writer_free(n->w);
  free(n);
}

/* MARK: - Helpers */

static bool str_eq(acp_str s, const char *z) {
  return s.ptr != NULL && s.len == strlen(z) && memcmp(s.ptr, z, s.len) == 0;
}

static char *dup_str(acp_str s) {
  char *p = malloc(s.len + 1);

  if (p != NULL) {
    memcpy(p, s.ptr, s.len);
    p[s.len] = '\0';
  }
  return p;
}

static nsess *find_sess(agent_nes *n, acp_str id) {
  nsess *s;

  for (s = n->sessions; s != NULL; s = s->next)
    if (str_eq(id, s->id))
      return s;
  return NULL;
}

static ndoc **find_doc(nsess *s, acp_str uri) {
  ndoc **d;

  for (d = &s->docs; *d != NULL; d = &(*d)->next)
    if (str_eq(uri, (*d)->uri))
      return d;
  return d;
}

/* Typed params of a request, or -32602 answered and NULL. */
static const void *req_params(agent_nes *n, acp_agent *agent,
                              acp_agent_request *req) {
  const acp_agent_request *r = req;
  const acp_type_desc *t;
  const acp_rpc_msg *msg = acp_agent_request_msg(r);
  char err[160], why[200];
  void *p;

  /* acp_agent_request_decode() without its error text: decoded here to
   * name the member in the answer. */
  const char *name = acp_agent_request_method(r);
  int version = acp_agent_protocol_version(agent);
  const acp_method_info *mi =
      acp_method_by_name_version(version, name, strlen(name));

  acp_arena_reset(n->arena);
  t = mi != NULL ? acp_method_params_desc_version(version, (int)mi->id) : NULL;
  p = t != NULL ? acp_arena_alloc(n->arena, acp_type_size(t)) : NULL;
  if (p == NULL || msg == NULL) {
    acp_agent_respond_error(agent, req, -32603, "Internal error", NULL, 0);
    return NULL;
  }
  if (acp_decode_ex(t, msg->params, n->arena, p, "params",
                    msg->params == NULL ? ACP_DECODE_LENIENT : 0, err,
                    sizeof(err)) != 0) {
    snprintf(why, sizeof(why), "Invalid params: %s", err);
    acp_agent_respond_error(agent, req, -32602, why, NULL, 0);
    return NULL;
  }
  return p;
}

/* Typed params of a notification of method `id`, or NULL (dropped). */
static const void *notif_params(agent_nes *n, acp_method_id id,
                                const acp_rpc_msg *msg) {
  const acp_type_desc *t = acp_method_notification_desc((int)id);
  void *p;

  acp_arena_reset(n->arena);
  if (t == NULL || msg->params == NULL)
    return NULL;
  p = acp_arena_alloc(n->arena, acp_type_size(t));
  if (p == NULL || acp_decode(t, msg->params, n->arena, p, NULL, 0) != 0)
    return NULL;
  return p;
}

static int respond_w(agent_nes *n, acp_agent *agent, acp_agent_request *req) {
  size_t len;
  const char *d = acp_json_writer_data(n->w, &len);

  if (acp_json_writer_error(n->w) != 0)
    return acp_agent_respond_error(agent, req, -32603, "Internal error", NULL,
                                   0);
  return acp_agent_respond(agent, req, d, len);
}

static void kvs(acp_json_writer *w, const char *k, const char *v) {
  acp_json_write_keyz(w, k);
  acp_json_write_strz(w, v);
}

/* MARK: - Providers */

static int on_providers_list(acp_agent *agent, acp_agent_request *req,
                             void *ud) {
  agent_nes *n = agent_nes_of(ud);
  acp_json_writer *w = n->w;

  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "providers");
  acp_json_write_arr_begin(w);
  acp_json_write_obj_begin(w);
  kvs(w, "providerId", "main");
  acp_json_write_keyz(w, "supported");
  acp_json_write_arr_begin(w);
  acp_json_write_strz(w, "anthropic");
  acp_json_write_strz(w, "openai");
  acp_json_write_arr_end(w);
  acp_json_write_keyz(w, "required");
  acp_json_write_bool(w, false);
  if (n->provider_set) {
    acp_json_write_keyz(w, "current");
    acp_json_write_obj_begin(w);
    kvs(w, "apiType", n->api);
    kvs(w, "baseUrl", n->base_url);
    acp_json_write_obj_end(w);
  }
  acp_json_write_obj_end(w);
  acp_json_write_arr_end(w);
  acp_json_write_obj_end(w);
  return respond_w(n, agent, req);
}

static int on_providers_set(acp_agent *agent, acp_agent_request *req,
                            void *ud) {
  agent_nes *n = agent_nes_of(ud);
  const acp_set_provider_request *p = req_params(n, agent, req);
  const char *api;
  char *url;

  if (p == NULL)
    return 0;
  if (!str_eq(p->provider_id, "main"))
    return acp_agent_respond_error(agent, req, -32602,
                                   "Invalid params: unknown provider", NULL, 0);
  api = acp_llm_protocol_to_str(p->api_type);
  if (p->api_type != ACP_LLM_PROTOCOL_ANTHROPIC &&
      p->api_type != ACP_LLM_PROTOCOL_OPENAI)
    return acp_agent_respond_error(
        agent, req, -32602,
        "Invalid params: apiType not supported by provider main", NULL, 0);
  if (!((p->base_url.len > 7 && memcmp(p->base_url.ptr, "http://", 7) == 0) ||
        (p->base_url.len > 8 && memcmp(p->base_url.ptr, "https://", 8) == 0)))
    return acp_agent_respond_error(
        agent, req, -32602, "Invalid params: baseUrl must be an http(s) URL",
        NULL, 0);
  url = dup_str(p->base_url);
  if (url == NULL)
    return ACP_ERR_NOMEM;
  free(n->base_url);
  n->base_url = url;
  strncpy(n->api, api, sizeof(n->api) - 1);
  n->provider_set = true;
  return acp_agent_respond(agent, req, "{}", 2);
}

static int on_providers_disable(acp_agent *agent, acp_agent_request *req,
                                void *ud) {
  agent_nes *n = agent_nes_of(ud);
  const acp_disable_provider_request *p = req_params(n, agent, req);

  if (p == NULL)
    return 0;
  if (!str_eq(p->provider_id, "main"))
    return acp_agent_respond_error(agent, req, -32602,
                                   "Invalid params: unknown provider", NULL, 0);
  n->provider_set = false;
  free(n->base_url);
  n->base_url = NULL;
  return acp_agent_respond(agent, req, "{}", 2);
}

/* MARK: - NES sessions */

static int on_nes_start(acp_agent *agent, acp_agent_request *req, void *ud) {
  agent_nes *n = agent_nes_of(ud);
  nsess *s;

  if (req_params(n, agent, req) == NULL)
    return 0;
  s = calloc(1, sizeof(*s));
  if (s == NULL)
    return ACP_ERR_NOMEM;
  snprintf(s->id, sizeof(s->id), "nes_%u", ++n->next_sess);
  s->next = n->sessions;
  n->sessions = s;
  acp_json_writer_reset(n->w);
  acp_json_write_obj_begin(n->w);
  kvs(n->w, "sessionId", s->id);
  acp_json_write_obj_end(n->w);
  return respond_w(n, agent, req);
}

static int no_session(acp_agent *agent, acp_agent_request *req) {
  return acp_agent_respond_error(
      agent, req, -32002, "Resource not found: no such NES session", NULL, 0);
}

static bool is_rejected(const ndoc *d, int64_t line, int64_t ch) {
  size_t i;

  for (i = 0; i < d->nrej; i++)
    if (d->rej[i].line == line && d->rej[i].character == ch)
      return true;
  return false;
}

/* The units of the encoding that UTF-8 byte `b` adds to a position. utf-8:
 * 1 for every byte. utf-16 and utf-32 count at the first byte of a
 * sequence, 0 for a continuation byte: utf-16 2 for a 4-byte sequence (a
 * surrogate pair), else 1; utf-32 1 (an invalid byte counts as one unit,
 * U+FFFD). */
static int units(enc_kind enc, unsigned char b) {
  if (enc == ENC_UTF8)
    return 1;
  if ((b & 0xC0) == 0x80)
    return 0;
  return enc == ENC_UTF16 && b >= 0xF0 ? 2 : 1;
}

/* The first TODO of the document not rejected there: its line and column
 * in units of the document's encoding. */
static bool find_todo(const ndoc *d, int64_t *line, int64_t *ch) {
  int64_t l = 0, c = 0;
  size_t i;

  for (i = 0; i + 4 <= d->len; i++) {
    if (memcmp(d->text + i, "TODO", 4) == 0 && !is_rejected(d, l, c)) {
      *line = l;
      *ch = c;
      return true;
    }
    if (d->text[i] == '\n') {
      l++;
      c = 0;
    } else {
      c += units(d->enc, (unsigned char)d->text[i]);
    }
  }
  return false;
}

/*
 * The byte offset of position (line, ch) of the document, ch in units of
 * the document's encoding. As in LSP, a character past the end of its line
 * means the line's end (before its "\n"). -1 when the line does not exist
 * or ch falls inside a character (a surrogate pair in utf-16, a multi-byte
 * sequence in utf-8): such a change cannot be applied.
 */
static int64_t pos_to_byte(const ndoc *d, int64_t line, int64_t ch) {
  size_t i = 0;
  int64_t l = 0, c = 0;

  if (line < 0 || ch < 0)
    return -1;
  while (l < line) {
    const char *nl = memchr(d->text + i, '\n', d->len - i);
    if (nl == NULL)
      return -1;
    i = (size_t)(nl - d->text) + 1;
    l++;
  }
  while (c < ch && i < d->len && d->text[i] != '\n') {
    c += units(d->enc, (unsigned char)d->text[i]);
    i++;
    while (i < d->len && units(d->enc, (unsigned char)d->text[i]) == 0)
      i++;
  }
  if (c > ch || (i < d->len && ((unsigned char)d->text[i] & 0xC0) == 0x80))
    return -1;
  return (int64_t)i;
}

/* Replace [from, to) of the text with `text`. */
static int splice(ndoc *d, size_t from, size_t to, acp_str text) {
  size_t len = d->len - (to - from) + text.len;
  char *t = malloc(len + 1);

  if (t == NULL)
    return ACP_ERR_NOMEM;
  memcpy(t, d->text, from);
  memcpy(t + from, text.ptr, text.len);
  memcpy(t + from + text.len, d->text + to, d->len - to);
  t[len] = '\0';
  free(d->text);
  d->text = t;
  d->len = len;
  return 0;
}

static void w_pos(acp_json_writer *w, const char *key, int64_t l, int64_t c) {
  acp_json_write_keyz(w, key);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "line");
  acp_json_write_int(w, l);
  acp_json_write_keyz(w, "character");
  acp_json_write_int(w, c);
  acp_json_write_obj_end(w);
}

static int on_nes_suggest(acp_agent *agent, acp_agent_request *req, void *ud) {
  agent_nes *n = agent_nes_of(ud);
  const acp_suggest_nes_request *p = req_params(n, agent, req);
  acp_json_writer *w = n->w;
  nsess *s;
  ndoc *d;
  int64_t line, ch;

  if (p == NULL)
    return 0;
  s = find_sess(n, p->session_id);
  if (s == NULL)
    return no_session(agent, req);
  d = *find_doc(s, p->uri);
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "suggestions");
  acp_json_write_arr_begin(w);
  /* Only for the version the agent has: a stale request gets nothing. */
  if (d != NULL && d->synced && d->version == p->version &&
      find_todo(d, &line, &ch)) {
    pending *pd = calloc(1, sizeof(*pd));

    if (pd == NULL || (pd->uri = strdup(d->uri)) == NULL) {
      free(pd);
      return ACP_ERR_NOMEM;
    }
    snprintf(pd->id, sizeof(pd->id), "sug_%u", ++n->next_sug);
    pd->line = line;
    pd->character = ch;
    pd->next = s->pending;
    s->pending = pd;
    acp_json_write_obj_begin(w);
    kvs(w, "kind", "edit");
    kvs(w, "id", pd->id);
    kvs(w, "uri", d->uri);
    acp_json_write_keyz(w, "edits");
    acp_json_write_arr_begin(w);
    acp_json_write_obj_begin(w);
    acp_json_write_keyz(w, "range");
    acp_json_write_obj_begin(w);
    w_pos(w, "start", line, ch);
    w_pos(w, "end", line, ch + 4);
    acp_json_write_obj_end(w);
    kvs(w, "newText", "DONE");
    acp_json_write_obj_end(w);
    acp_json_write_arr_end(w);
    acp_json_write_obj_end(w);
  }
  acp_json_write_arr_end(w);
  acp_json_write_obj_end(w);
  return respond_w(n, agent, req);
}

static int on_nes_close(acp_agent *agent, acp_agent_request *req, void *ud) {
  agent_nes *n = agent_nes_of(ud);
  const acp_close_nes_request *p = req_params(n, agent, req);
  nsess **sp;

  if (p == NULL)
    return 0;
  for (sp = &n->sessions; *sp != NULL; sp = &(*sp)->next) {
    if (str_eq(p->session_id, (*sp)->id)) {
      nsess *s = *sp;
      *sp = s->next;
      sess_free(s);
      return acp_agent_respond(agent, req, "{}", 2);
    }
  }
  return no_session(agent, req);
}

/* Take the pending suggestion `id` out of its session (NULL if unknown). */
static pending *take_pending(nsess *s, acp_str id) {
  pending **pp;

  for (pp = &s->pending; *pp != NULL; pp = &(*pp)->next) {
    if (str_eq(id, (*pp)->id)) {
      pending *p = *pp;
      *pp = p->next;
      return p;
    }
  }
  return NULL;
}

static int on_nes_accept(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  agent_nes *n = agent_nes_of(ud);
  const acp_accept_nes_notification *p =
      notif_params(n, ACP_METHOD_NES_ACCEPT, msg);
  nsess *s = p != NULL ? find_sess(n, p->session_id) : NULL;
  pending *pd = s != NULL ? take_pending(s, p->id) : NULL;

  (void)agent;
  /* The client applies the edit and reports it with didChange. */
  if (pd != NULL)
    pending_free(pd);
  return 0;
}

static int on_nes_reject(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  agent_nes *n = agent_nes_of(ud);
  const acp_reject_nes_notification *p =
      notif_params(n, ACP_METHOD_NES_REJECT, msg);
  nsess *s = p != NULL ? find_sess(n, p->session_id) : NULL;
  pending *pd = s != NULL ? take_pending(s, p->id) : NULL;
  ndoc *d;

  (void)agent;
  if (pd == NULL)
    return 0;
  d = *find_doc(s, (acp_str){pd->uri, strlen(pd->uri)});
  if (d != NULL) {
    rejected *r = realloc(d->rej, (d->nrej + 1) * sizeof(*r));
    if (r == NULL) {
      pending_free(pd);
      return ACP_ERR_NOMEM;
    }
    d->rej = r;
    d->rej[d->nrej].line = pd->line;
    d->rej[d->nrej].character = pd->character;
    d->nrej++;
  }
  pending_free(pd);
  return 0;
}

/* MARK: - Documents */

static int set_text(ndoc *d, acp_str text) {
  char *t = dup_str(text);

  if (t == NULL)
    return ACP_ERR_NOMEM;
  free(d->text);
  d->text = t;
  d->len = text.len;
  return 0;
}

static int on_did_open(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  agent_nes *n = agent_nes_of(ud);
  const acp_did_open_document_notification *p =
      notif_params(n, ACP_METHOD_DOCUMENT_DID_OPEN, msg);
  nsess *s = p != NULL ? find_sess(n, p->session_id) : NULL;
  ndoc **dp, *d;

  (void)agent;
  if (s == NULL)
    return 0;
  dp = find_doc(s, p->uri);
  d = *dp;
  if (d == NULL) {
    d = calloc(1, sizeof(*d));
    if (d == NULL || (d->uri = dup_str(p->uri)) == NULL) {
      free(d);
      return ACP_ERR_NOMEM;
    }
    *dp = d;
  }
  d->enc = n->enc;
  d->version = p->version;
  d->synced = true;
  d->nrej = 0;
  return set_text(d, p->text);
}

static int on_did_change(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  agent_nes *n = agent_nes_of(ud);
  const acp_did_change_document_notification *p =
      notif_params(n, ACP_METHOD_DOCUMENT_DID_CHANGE, msg);
  nsess *s = p != NULL ? find_sess(n, p->session_id) : NULL;
  ndoc *d = s != NULL ? *find_doc(s, p->uri) : NULL;
  size_t i;

  (void)agent;
  if (d == NULL)
    return 0;
  d->version = p->version;
  /* Applied in order, each to the text the previous one left (LSP). A
   * change whose range is not in the text (a line past the end, an end
   * before its start, a split surrogate pair) leaves the text unknown: no
   * suggestions until a change without a range brings all of it again. */
  for (i = 0; i < p->content_changes_count; i++) {
    const acp_text_document_content_change_event *c = &p->content_changes[i];
    int64_t from, to;

    d->nrej = 0;
    if (c->range == NULL) {
      d->synced = true;
      if (set_text(d, c->text) != 0)
        return ACP_ERR_NOMEM;
      continue;
    }
    if (!d->synced)
      continue;
    from = pos_to_byte(d, c->range->start->line, c->range->start->character);
    to = pos_to_byte(d, c->range->end->line, c->range->end->character);
    if (from < 0 || to < from) {
      d->synced = false;
      continue;
    }
    if (splice(d, (size_t)from, (size_t)to, c->text) != 0)
      return ACP_ERR_NOMEM;
  }
  return 0;
}

static int on_did_close(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  agent_nes *n = agent_nes_of(ud);
  const acp_did_close_document_notification *p =
      notif_params(n, ACP_METHOD_DOCUMENT_DID_CLOSE, msg);
  nsess *s = p != NULL ? find_sess(n, p->session_id) : NULL;
  ndoc **dp, *d;

  (void)agent;
  if (s == NULL)
    return 0;
  dp = find_doc(s, p->uri);
  d = *dp;
  if (d != NULL) {
    *dp = d->next;
    doc_free(d);
  }
  return 0;
}

/* didSave and didFocus change nothing the engine uses: read (so a
 * malformed one is dropped like the others) and ignored. */
static int on_did_save(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  (void)agent;
  (void)notif_params(agent_nes_of(ud), ACP_METHOD_DOCUMENT_DID_SAVE, msg);
  return 0;
}

static int on_did_focus(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  (void)agent;
  (void)notif_params(agent_nes_of(ud), ACP_METHOD_DOCUMENT_DID_FOCUS, msg);
  return 0;
}

void agent_nes_register(acp_agent_callbacks *cbs) {
  acp_agent_callbacks_set_on_providers_list(cbs, on_providers_list);
  acp_agent_callbacks_set_on_providers_set(cbs, on_providers_set);
  acp_agent_callbacks_set_on_providers_disable(cbs, on_providers_disable);
  acp_agent_callbacks_set_on_nes_start(cbs, on_nes_start);
  acp_agent_callbacks_set_on_nes_suggest(cbs, on_nes_suggest);
  acp_agent_callbacks_set_on_nes_close(cbs, on_nes_close);
  acp_agent_callbacks_set_on_nes_accept(cbs, on_nes_accept);
  acp_agent_callbacks_set_on_nes_reject(cbs, on_nes_reject);
  acp_agent_callbacks_set_on_document_did_open(cbs, on_did_open);
  acp_agent_callbacks_set_on_document_did_change(cbs, on_did_change);
  acp_agent_callbacks_set_on_document_did_close(cbs, on_did_close);
  acp_agent_callbacks_set_on_document_did_save(cbs, on_did_save);
  acp_agent_callbacks_set_on_document_did_focus(cbs, on_did_focus);
}
