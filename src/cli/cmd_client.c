/*
 * `acp client`: a terminal client for any ACP agent. It spawns the agent,
 * streams its text to stdout (notes such as tool calls and plans go to
 * stderr, so stdout is exactly what the agent said), asks the user on
 * permission requests, serves file requests inside the session's cwd and
 * runs terminal requests. With --mcp-tools it also offers an MCP server
 * ("client": echo, client_info) over the ACP connection (MCP-over-ACP).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "acp/client.h"
#include "acp/methods.h"
#include "acp/json.h"
#include "acp/mcp_acp.h"
#include "acp/remote.h"
#include "acp/types_v2.h"
#include "acp/uv.h"
#include "acp/version.h"
#include "cli.h"
#include "client_agents.h"
#include "client_tty.h"
#include "md_render.h"

#define MAX_FILE (64u << 20)
#define DEFAULT_TERM_LIMIT (1u << 20)

static const char client_usage[] =
    "usage: acp client [-p PROMPT] [--cwd DIR] [--yes] [--quiet]\n"
    "                  [--interactive] [--color WHEN]\n"
    "                  [--agent NAME [--agents-file FILE]]\n"
    "                  [--mcp-tools] [--protocol-v2] [-- AGENT_CMD [ARGS...]]\n"
    "       acp client [options] --url URL [--ws | --http [--h2]] [--token "
    "TOKEN]\n"
    "                  [--header 'Name: value']...\n"
    "                  [--ca FILE] [--cert FILE --key FILE]\n"
    "\n"
    "A terminal client for any ACP agent (default: acp agent). The agent's\n"
    "text goes to stdout as it streams; tool calls, plans, permission\n"
    "questions and other notes go to stderr.\n"
    "\n"
    "options:\n"
    "  -p, --prompt TEXT  run one prompt turn and exit; the exit status\n"
    "                     reflects the stop reason: 0 end_turn, 3 cancelled,\n"
    "                     4 refusal, 5 max_tokens, 6 max_turn_requests,\n"
    "                     1 on an error\n"
    "  --cwd DIR          the session's working directory (default: .);\n"
    "                     file requests outside it are refused\n"
    "  --yes              allow every permission request (first allow\n"
    "                     option) without asking\n"
    "  --quiet            do not print notes on stderr\n"
    "  --interactive      the interactive front end even when stdin is not\n"
    "                     a terminal (it is the default on a terminal):\n"
    "                     slash commands, a line editor with history\n"
    "  --color WHEN       auto (default: when stderr is a terminal and\n"
    "                     NO_COLOR is unset or empty), always, never; the\n"
    "                     agent's text is rendered as markdown when stdout\n"
    "                     is a terminal too (or with always)\n"
    "  --agent NAME       run the agent NAME of the agents file instead of\n"
    "                     AGENT_CMD\n"
    "  --agents-file FILE the agents file (default:\n"
    "                     $XDG_CONFIG_HOME/acp/agents.json, else\n"
    "                     ~/.config/acp/agents.json), shaped\n"
    "                     {\"agents\": {\"NAME\": {\"command\": \"...\",\n"
    "                     \"args\": [...], \"env\": {...}}}}\n"
    "  --mcp-tools        offer an MCP server named \"client\" to the agent\n"
    "                     over the ACP connection itself (MCP-over-ACP),\n"
    "                     with the tools `echo {message}` and\n"
    "                     `client_info {}` (names the ACP session of the\n"
    "                     call); declared in session/new only when the\n"
    "                     agent advertises mcpCapabilities.acp (a\n"
    "                     conductor always does)\n"
    "  --url URL          talk to a remote agent (e.g. one behind acp serve)\n"
    "                     instead of starting one: ws://HOST:PORT/PATH is\n"
    "                     WebSocket; http://... upgrades to WebSocket too\n"
    "                     unless --http is given; wss:// and https:// are\n"
    "                     the same over TLS (the server's certificate is\n"
    "                     checked against the system's CAs, or --ca, and\n"
    "                     must name the URL's host)\n"
    "  --ws               with --url: WebSocket (the default)\n"
    "  --http             with an http:// or https:// --url: Streamable\n"
    "                     HTTP (POST each\n"
    "                     message, the agent's on GET SSE streams, DELETE at\n"
    "                     the end; cookies kept and sent back)\n"
    "  --h2               with --http: over HTTP/2, every request a stream\n"
    "                     of one connection (http://: h2c with prior\n"
    "                     knowledge; https://: ALPN h2, HTTP/1.1 if the\n"
    "                     server picks it)\n"
    "  --verbose          with --url: say how the connection was made (the\n"
    "                     HTTP version; over TLS a line per socket: \"TLS\n"
    "                     session resumed\" or \"TLS full handshake\") on\n"
    "                     stderr\n"
    "  --token TOKEN      with --url: send 'Authorization: Bearer TOKEN'\n"
    "                     (also from the ACP_TOKEN environment)\n"
    "  --header 'N: V'    with --url: one more request header (repeatable)\n"
    "  --ca FILE          with a wss:// or https:// --url: trust the CAs in\n"
    "                     FILE (PEM) instead of the system's\n"
    "  --cert FILE --key FILE\n"
    "                     with a wss:// or https:// --url: present this\n"
    "                     client certificate (PEM; mutual TLS)\n"
    "  --protocol-v2      ask for the ACP v2 draft in initialize and speak\n"
    "                     what the agent answers (1 or 2)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Interactive use: each line you type is a prompt; Ctrl-C cancels the\n"
    "running turn (a second Ctrl-C, or Ctrl-D when idle, quits).\n"
    "In the interactive front end a line ending in \\ continues on the next,\n"
    "Up and Down recall history ($XDG_STATE_HOME/acp/history, else\n"
    "~/.local/state/acp/history), Tab completes /commands, Ctrl-C at the\n"
    "prompt clears the line, and /help lists the slash commands.\n";

typedef struct capp capp;

typedef struct term {
  capp *a;
  char id[32];
  acp_uv_process *p;
  char *out;
  size_t len;
  size_t limit;
  bool truncated;
  bool exited;
  bool eof;
  int64_t exit_code;
  int signal;
  acp_client_request *waiters[8];
  size_t nwaiters;
  struct term *next;
} term;

enum cstate { ST_INIT, ST_NEW, ST_IDLE, ST_PROMPT, ST_DONE, ST_CMD };

/* The title of a tool call still running, for its later updates (which
 * carry only the id). */
typedef struct tool_title {
  struct tool_title *next;
  char *id;
  char *title;
  bool cancelled; /* shown cancelled when the client sent session/cancel */
} tool_title;

struct capp {
  acp_arena *arena; /* typed v2 updates and results, reset after each use */
  uv_loop_t loop;
  acp_client *client;
  acp_uv_process *agent;
  acp_uv_rpc *rpc;
  acp_uv_link *remote; /* --url: the connection (ours to close) */
  acp_uv_link *in;
  acp_uv_signals *sig;
  acp_json_writer *w;
  char cwd[PATH_MAX];
  char *session_id;
  const char *prompt;
  bool yes;
  bool protocol_v2; /* --protocol-v2: ask for the ACP v2 draft */
  bool quiet;
  bool verbose; /* --verbose: say how the remote connection is made */
  bool want_h2; /* --h2 */
  bool interactive;
  bool stdin_eof;
  bool at_line_start;
  bool closing;
  enum cstate state;
  int exit_code;
  int cancels;
  char *line; /* partial stdin line */
  size_t line_len;
  acp_client_request *perm;   /* permission waiting for the user */
  char *perm_options;         /* copy of the options array */
  acp_client_request *elicit; /* elicitation waiting for the user */
  term *terms;
  unsigned next_term;
  bool mcp_tools;             /* --mcp-tools */
  acp_mcp_server *mcp_server; /* the "client" server's tools */
  acp_mcp_acp_provider *prov; /* offers it over the ACP connection */
  acp_mcp_acp_decl *decl;     /* its declaration on our session */
  tool_title *tools;          /* tool calls not finished yet */
  /* The interactive front end (client_tty.c and the slash commands). */
  bool fancy; /* slash commands, prompts shown by the editor */
  bool color; /* --color */
  bool md_on; /* agent text rendered as markdown (a tty, --color) */
  md_render md;
  ctty *tty;         /* the line editor, NULL when reading plain lines */
  char **agent_cmds; /* the agent's advertised command names */
  size_t nagent_cmds;
};

static void app_quit(capp *a, int code);
static void read_stdin(capp *a);
static void cancel_questions(capp *a);

/* MARK: - Output */

static void note(capp *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void md_end(capp *a);

static void note(capp *a, const char *fmt, ...) {
  va_list ap;

  if (a->quiet)
    return;
  /* The agent's text first, with its style closed: a note never comes out
   * bold because a **span was open. */
  md_end(a);
  ctty_hide(a->tty);
  if (!a->at_line_start) {
    fputc('\n', stdout);
    fflush(stdout);
    a->at_line_start = true;
  }
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
}

static void out_text(capp *a, const char *s, size_t n) {
  if (n == 0)
    return;
  ctty_hide(a->tty);
  fwrite(s, 1, n, stdout);
  fflush(stdout);
  a->at_line_start = s[n - 1] == '\n';
}

static void md_emit(void *ud, const char *s, size_t n) {
  capp *a = ud;

  fwrite(s, 1, n, stdout);
  fflush(stdout);
  a->at_line_start = s[n - 1] == '\n';
}

/* The agent's message text: rendered (md_render.c) on a colour tty,
 * written unchanged otherwise. */
static void out_agent_text(capp *a, const char *s, size_t n) {
  if (!a->md_on) {
    out_text(a, s, n);
    return;
  }
  ctty_hide(a->tty);
  md_feed(&a->md, s, n);
}

/* The text paused (a note, the end of the turn): held-back bytes out,
 * style reset. */
static void md_end(capp *a) {
  if (!a->md_on)
    return;
  ctty_hide(a->tty);
  md_flush(&a->md);
}

static int jstr(const acp_rpc_msg *msg, const acp_json_val *obj,
                const char *key, const char **s, size_t *len) {
  const acp_json_val *v = acp_json_obj_getz(obj, key);

  if (v == NULL || acp_json_type_of(v) != ACP_JSON_STRING)
    return -1;
  return acp_json_doc_str(msg->doc, v, s, len);
}

/* The connection speaks the v2 draft. */
static bool v2(const capp *a) {
  return acp_client_protocol_version(a->client) == ACP_PROTOCOL_V2;
}

/* MARK: - Session updates */

/* Every kind of session/update (stable and unstable ones of the v1 schema)
 * is shown as a line on stderr, except the agent's text, which is stdout. */

static bool str_is(const char *s, size_t n, const char *lit) {
  return s != NULL && strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static tool_title **tool_find(capp *a, const char *id, size_t n) {
  tool_title **pp;

  for (pp = &a->tools; *pp != NULL; pp = &(*pp)->next)
    if (strlen((*pp)->id) == n && memcmp((*pp)->id, id, n) == 0)
      return pp;
  return pp;
}

/* Remember (or change) the title of tool call `id`. Out of memory only
 * costs the title in later lines. */
static void tool_remember(capp *a, const char *id, size_t n, const char *title,
                          size_t tn) {
  tool_title **pp = tool_find(a, id, n);
  tool_title *t = *pp;
  char *copy = malloc(tn + 1);

  if (copy == NULL)
    return;
  memcpy(copy, title, tn);
  copy[tn] = '\0';
  if (t == NULL) {
    t = calloc(1, sizeof(*t));
    if (t == NULL || (t->id = malloc(n + 1)) == NULL) {
      free(t);
      free(copy);
      return;
    }
    memcpy(t->id, id, n);
    t->id[n] = '\0';
    *pp = t;
  }
  free(t->title);
  t->title = copy;
}

static void tool_forget(capp *a, const char *id, size_t n) {
  tool_title **pp = tool_find(a, id, n);
  tool_title *t = *pp;

  if (t == NULL)
    return;
  *pp = t->next;
  free(t->id);
  free(t->title);
  free(t);
}

/* A short description of a content block that is not text. */
static void note_content(capp *a, const acp_rpc_msg *msg, const char *lead,
                         const acp_json_val *c) {
  const char *type = NULL, *x = NULL, *y = NULL;
  size_t tn = 0, xn = 0, yn = 0;

  jstr(msg, c, "type", &type, &tn);
  if (str_is(type, tn, "text")) {
    jstr(msg, c, "text", &x, &xn);
    note(a, "%s%.*s\n", lead, (int)xn, x ? x : "");
  } else if (str_is(type, tn, "resource_link")) {
    jstr(msg, c, "name", &x, &xn);
    jstr(msg, c, "uri", &y, &yn);
    note(a, "%s[link] %.*s (%.*s)\n", lead, (int)xn, x ? x : "", (int)yn,
         y ? y : "");
  } else if (str_is(type, tn, "resource")) {
    jstr(msg, acp_json_obj_getz(c, "resource"), "uri", &x, &xn);
    note(a, "%s[resource] %.*s\n", lead, (int)xn, x ? x : "");
  } else {
    jstr(msg, c, "mimeType", &x, &xn);
    note(a, "%s[%.*s%s%.*s]\n", lead, (int)tn, type ? type : "content",
         xn ? " " : "", (int)xn, x ? x : "");
  }
}

/* v2: a call the user may cancel by itself (capabilities.cancel): say
 * how, with its id. */
static void note_cancellable(capp *a, const acp_client_update *u,
                             const char *id, size_t idn, const char *title,
                             size_t tn) {
  if (id != NULL &&
      acp_json_obj_getz(acp_json_obj_getz(u->update, "capabilities"),
                        "cancel") != NULL)
    note(a, "[tool] %.*s can be cancelled: /cancel-tool %.*s\n", (int)tn,
         title ? title : "", (int)idn, id);
}

static void note_tool(capp *a, const acp_client_update *u, bool first) {
  const char *id = NULL, *title = NULL, *status = NULL;
  size_t idn = 0, tn = 0, sn = 0;
  tool_title *t;

  jstr(u->msg, u->update, "toolCallId", &id, &idn);
  jstr(u->msg, u->update, "status", &status, &sn);
  if (jstr(u->msg, u->update, "title", &title, &tn) == 0 && id != NULL)
    tool_remember(a, id, idn, title, tn);
  if (first) {
    note(a, "[tool] %.*s (%.*s)\n", (int)tn, title ? title : "", (int)sn,
         status ? status : "pending");
    note_cancellable(a, u, id, idn, title, tn);
    return;
  }
  if (status == NULL && title == NULL)
    return; /* content or locations only: nothing new to say on one line */
  t = id ? *tool_find(a, id, idn) : NULL;
  if (t != NULL && t->cancelled && !str_is(status, sn, "completed")) {
    /* Already shown cancelled (cancel_tools): the agent's own end of it
     * (v1 has no "cancelled" status, so it may say failed) adds nothing.
     * A call that completed before the cancel reached the agent is still
     * worth saying. */
    if (str_is(status, sn, "failed") || str_is(status, sn, "cancelled"))
      tool_forget(a, id, idn);
    return;
  }
  if (t != NULL) {
    title = t->title;
    tn = strlen(t->title);
  } else if (title == NULL) {
    title = id; /* a call we never saw start */
    tn = idn;
  }
  if (status != NULL)
    note(a, "[tool] %.*s: %.*s\n", (int)tn, title ? title : "", (int)sn,
         status);
  else
    note(a, "[tool] %.*s\n", (int)tn, title ? title : "");
  note_cancellable(a, u, id, idn, title, tn);
  if (str_is(status, sn, "completed") || str_is(status, sn, "failed") ||
      str_is(status, sn, "cancelled"))
    tool_forget(a, id, idn);
}

/* Plan entries on one line: one line per update keeps progress readable. */
static void note_entries(capp *a, const acp_rpc_msg *msg, const char *lead,
                         const acp_json_val *entries) {
  const acp_json_val *e;

  note(a, "%s", lead);
  for (e = acp_json_child(entries); e != NULL; e = acp_json_next(e)) {
    const char *mark = "[ ]";
    const char *c = NULL, *st = NULL;
    size_t cn = 0, sn = 0;
    jstr(msg, e, "content", &c, &cn);
    jstr(msg, e, "status", &st, &sn);
    if (str_is(st, sn, "completed"))
      mark = "[x]";
    else if (str_is(st, sn, "in_progress"))
      mark = "[>]";
    note(a, " %s %.*s", mark, (int)cn, c ? c : "");
  }
  note(a, "\n");
}

static void note_plan_update(capp *a, const acp_client_update *u) {
  const acp_json_val *plan = acp_json_obj_getz(u->update, "plan");
  const char *id = NULL, *type = NULL, *x = NULL;
  size_t idn = 0, tn = 0, xn = 0;
  char lead[96];

  jstr(u->msg, plan, "planId", &id, &idn);
  jstr(u->msg, plan, "type", &type, &tn);
  snprintf(lead, sizeof(lead), "[plan %.*s]", (int)(idn < 64 ? idn : 64),
           id ? id : "");
  if (str_is(type, tn, "file")) {
    jstr(u->msg, plan, "uri", &x, &xn);
    note(a, "%s %.*s\n", lead, (int)xn, x ? x : "");
  } else if (str_is(type, tn, "markdown")) {
    jstr(u->msg, plan, "content", &x, &xn);
    note(a, "%s\n%.*s%s", lead, (int)xn, x ? x : "",
         xn > 0 && x[xn - 1] == '\n' ? "" : "\n");
  } else if (type == NULL || str_is(type, tn, "items")) {
    note_entries(a, u->msg, lead, acp_json_obj_getz(plan, "entries"));
  } else {
    /* A custom or future content type (`_`-prefixed or not yet known):
     * shown generically, its text if it has one (protocol/v2/
     * agent-plan.mdx: display it generically or ignore it). */
    jstr(u->msg, plan, "text", &x, &xn);
    note(a, "%s (%.*s)%s%.*s\n", lead, (int)(tn < 64 ? tn : 64), type,
         x ? " " : "", (int)xn, x ? x : "");
  }
}

static void note_commands(capp *a, const acp_client_update *u) {
  const acp_json_val *e;
  int n = 0;

  note(a, "[commands]");
  for (e = acp_json_child(acp_json_obj_getz(u->update, "availableCommands"));
       e != NULL; e = acp_json_next(e)) {
    const char *name = NULL;
    size_t nn = 0;
    if (jstr(u->msg, e, "name", &name, &nn) == 0) {
      note(a, " /%.*s", (int)nn, name);
      n++;
    }
  }
  note(a, n ? "\n" : " none\n");
}

static void note_config(capp *a, const acp_client_update *u) {
  const acp_json_val *e;

  note(a, "[config]");
  for (e = acp_json_child(acp_json_obj_getz(u->update, "configOptions"));
       e != NULL; e = acp_json_next(e)) {
    const acp_json_val *v = acp_json_obj_getz(e, "currentValue");
    const char *id = NULL, *val = NULL;
    size_t idn = 0, vn = 0;
    bool b;
    if (jstr(u->msg, e, "id", &id, &idn) != 0)
      jstr(u->msg, e, "configId", &id, &idn); /* v2 */
    if (acp_json_get_bool(v, &b) == 0) {
      val = b ? "true" : "false";
      vn = strlen(val);
    } else {
      jstr(u->msg, e, "currentValue", &val, &vn);
    }
    note(a, " %.*s=%.*s", (int)idn, id ? id : "?", (int)vn, val ? val : "?");
  }
  note(a, "\n");
}

static void note_usage(capp *a, const acp_client_update *u) {
  const acp_json_val *cost = acp_json_obj_getz(u->update, "cost");
  uint64_t used = 0, size = 0;
  double amount;
  const char *cur = NULL;
  size_t cn = 0;

  acp_json_get_uint64(acp_json_obj_getz(u->update, "used"), &used);
  acp_json_get_uint64(acp_json_obj_getz(u->update, "size"), &size);
  note(a, "[usage] %llu/%llu tokens", (unsigned long long)used,
       (unsigned long long)size);
  if (size > 0)
    note(a, " (%.1f%%)", 100.0 * (double)used / (double)size);
  if (acp_json_get_double(acp_json_obj_getz(cost, "amount"), &amount) == 0) {
    jstr(u->msg, cost, "currency", &cur, &cn);
    note(a, ", cost %.4g %.*s", amount, (int)cn, cur ? cur : "");
  }
  note(a, "\n");
}

static void note_session_info(capp *a, const acp_client_update *u) {
  const acp_json_val *title = acp_json_obj_getz(u->update, "title");
  const char *s = NULL, *at = NULL;
  size_t n = 0, an = 0;

  jstr(u->msg, u->update, "updatedAt", &at, &an);
  if (title != NULL) {
    if (jstr(u->msg, u->update, "title", &s, &n) == 0)
      note(a, "[title] %.*s", (int)n, s);
    else
      note(a, "[title] (cleared)");
    if (at != NULL)
      note(a, " (updated %.*s)", (int)an, at);
    note(a, "\n");
  } else if (at != NULL) {
    note(a, "[session] updated %.*s\n", (int)an, at);
  }
}

static void note_compaction(capp *a, const acp_client_update *u) {
  const acp_json_val *e;
  const char *id = NULL, *st = NULL, *err = NULL;
  size_t idn = 0, sn = 0, en = 0;
  char lead[96];

  jstr(u->msg, u->update, "compactionId", &id, &idn);
  snprintf(lead, sizeof(lead), "[compaction %.*s] ", (int)(idn < 64 ? idn : 64),
           id ? id : "");
  if (u->kind == ACP_UPDATE_COMPACTION_SUMMARY_CHUNK) {
    note_content(a, u->msg, lead, acp_json_obj_getz(u->update, "content"));
    return;
  }
  jstr(u->msg, u->update, "status", &st, &sn);
  if (jstr(u->msg, u->update, "error", &err, &en) == 0)
    note(a, "%s%.*s: %.*s\n", lead, (int)sn, st ? st : "", (int)en, err);
  else
    note(a, "%s%.*s\n", lead, (int)sn, st ? st : "");
  for (e = acp_json_child(acp_json_obj_getz(u->update, "summary")); e != NULL;
       e = acp_json_next(e))
    note_content(a, u->msg, "  ", e);
}

/* subagent_update: a child session this one created (unstable). */
static void note_subagent(capp *a, const acp_client_update *u) {
  const char *id = NULL, *title = NULL, *st = NULL;
  size_t idn = 0, tn = 0, sn = 0;

  jstr(u->msg, u->update, "sessionId", &id, &idn);
  jstr(u->msg, u->update, "title", &title, &tn);
  jstr(u->msg, acp_json_obj_getz(u->update, "state"), "state", &st, &sn);
  note(a, "[subagent %.*s]", (int)idn, id ? id : "?");
  if (title != NULL)
    note(a, " %.*s", (int)tn, title);
  if (st != NULL)
    note(a, " (%.*s)", (int)sn, st);
  note(a, "\n");
}

/* session_message (who to whom) and session_message_chunk (its text): a
 * message between sessions, e.g. a parent and its subagent (unstable). */
static void note_session_message(capp *a, const acp_client_update *u) {
  const char *id = NULL, *from = NULL, *to = NULL;
  size_t idn = 0, fn = 0, tn = 0;
  char lead[96];

  jstr(u->msg, u->update, "messageId", &id, &idn);
  snprintf(lead, sizeof(lead), "[message %.*s] ", (int)(idn < 64 ? idn : 64),
           id ? id : "");
  if (u->kind == ACP_UPDATE_SESSION_MESSAGE_CHUNK) {
    note_content(a, u->msg, lead, acp_json_obj_getz(u->update, "content"));
    return;
  }
  jstr(u->msg, u->update, "senderSessionId", &from, &fn);
  jstr(u->msg, u->update, "recipientSessionId", &to, &tn);
  note(a, "%s%.*s -> %.*s\n", lead, (int)fn, from ? from : "?", (int)tn,
       to ? to : "?");
}

/* MARK: - Colours and diffs (the interactive front end) */

/* The SGR sequence an update's lines are shown in under --color, or NULL:
 * thoughts dimmed, tool calls by status, plans, modes and config, usage. */
static const char *update_style(const acp_client_update *u) {
  const char *st = NULL;
  size_t sn = 0;

  switch (u->kind) {
  case ACP_UPDATE_AGENT_THOUGHT_CHUNK:
    return "\033[2;3m";
  case ACP_UPDATE_TOOL_CALL:
  case ACP_UPDATE_TOOL_CALL_UPDATE:
    jstr(u->msg, u->update, "status", &st, &sn);
    if (str_is(st, sn, "completed"))
      return "\033[32m";
    if (str_is(st, sn, "failed"))
      return "\033[31m";
    return "\033[33m";
  case ACP_UPDATE_PLAN:
  case ACP_UPDATE_PLAN_UPDATE:
  case ACP_UPDATE_PLAN_REMOVED:
    return "\033[36m";
  case ACP_UPDATE_CURRENT_MODE_UPDATE:
  case ACP_UPDATE_CONFIG_OPTION_UPDATE:
  case ACP_UPDATE_SESSION_INFO_UPDATE:
    return "\033[35m";
  case ACP_UPDATE_USAGE_UPDATE:
    return "\033[2m";
  case ACP_UPDATE_NOTICE:
    return "\033[1m";
  default:
    return NULL;
  }
}

/* The text's lines, each after `mark`, in `style` under --color. */
static void note_lines(capp *a, const char *style, const char *mark,
                       const char *s, size_t n) {
  while (n > 0) {
    const char *nl = memchr(s, '\n', n);
    size_t k = nl ? (size_t)(nl - s) : n;
    note(a, "%s%s%.*s%s\n", a->color ? style : "", mark, (int)k, s,
         a->color ? "\033[0m" : "");
    s += k;
    n -= k;
    if (nl != NULL) {
      s++;
      n--;
    }
  }
}

/* A v2 diff (rfds/v2/diff-file-states.mdx): `changes` is authoritative
 * (operation and path of each file, binary or not), the patch optional. */
static void note_v2_diff(capp *a, const acp_client_update *u,
                         const acp_json_val *c) {
  const acp_json_val *ch;
  const acp_json_val *patch = acp_json_obj_getz(c, "patch");
  const char *t = NULL;
  size_t tn = 0;

  for (ch = acp_json_child(acp_json_obj_getz(c, "changes")); ch != NULL;
       ch = acp_json_next(ch)) {
    const char *op = NULL, *path = NULL, *old = NULL, *ft = NULL;
    size_t on = 0, pn = 0, oldn = 0, fn = 0;
    jstr(u->msg, ch, "operation", &op, &on);
    jstr(u->msg, ch, "path", &path, &pn);
    jstr(u->msg, ch, "oldPath", &old, &oldn);
    jstr(u->msg, ch, "fileType", &ft, &fn);
    note(a, "%s  %.*s %.*s%s%.*s%s%.*s%s\n", a->color ? "\033[1m" : "", (int)on,
         op ? op : "change", (int)oldn, old ? old : "", old ? " -> " : "",
         (int)pn, path ? path : "", ft ? " (" : "", (int)fn, ft ? ft : "",
         ft ? ")" : "");
    if (a->color)
      note(a, "\033[0m");
  }
  if (jstr(u->msg, patch, "text", &t, &tn) != 0)
    return;
  while (tn > 0) {
    const char *nl = memchr(t, '\n', tn);
    size_t k = nl ? (size_t)(nl - t) : tn;
    const char *style = "";
    if (k > 0 && t[0] == '+' && !(k >= 3 && memcmp(t, "+++", 3) == 0))
      style = "\033[32m";
    else if (k > 0 && t[0] == '-' && !(k >= 3 && memcmp(t, "---", 3) == 0))
      style = "\033[31m";
    note(a, "%s  %.*s%s\n", a->color ? style : "", (int)k, t,
         a->color && style[0] ? "\033[0m" : "");
    t += k;
    tn -= k;
    if (nl != NULL) {
      t++;
      tn--;
    }
  }
}

/* A tool call's diff content: the old lines (-, red), then the new ones
 * (+, green). Shown in the interactive front end only. */
static void note_diffs(capp *a, const acp_client_update *u) {
  const acp_json_val *c;

  for (c = acp_json_child(acp_json_obj_getz(u->update, "content")); c != NULL;
       c = acp_json_next(c)) {
    const char *type = NULL, *path = NULL, *o = NULL, *nw = NULL;
    size_t tn = 0, pn = 0, on = 0, nn = 0;
    jstr(u->msg, c, "type", &type, &tn);
    if (!str_is(type, tn, "diff"))
      continue;
    if (acp_json_obj_getz(c, "changes") != NULL) {
      note_v2_diff(a, u, c);
      continue;
    }
    jstr(u->msg, c, "path", &path, &pn);
    jstr(u->msg, c, "oldText", &o, &on);
    jstr(u->msg, c, "newText", &nw, &nn);
    note(a, "%s  diff %.*s%s\n", a->color ? "\033[1m" : "", (int)pn,
         path ? path : "", a->color ? "\033[0m" : "");
    note_lines(a, "\033[31m", "  -", o, o ? on : 0);
    note_lines(a, "\033[32m", "  +", nw, nw ? nn : 0);
  }
}

static void remember_commands(capp *a, const acp_client_update *u);

/* Decode base64 `in` into a new buffer (*out, *n); -1 if it is not base64. */
static int b64_decode(const char *in, size_t len, char **out, size_t *n) {
  static const char tab[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *o = malloc(len / 4 * 3 + 3);
  unsigned v = 0;
  int bits = 0;
  size_t i, k = 0;

  if (o == NULL)
    return -1;
  for (i = 0; i < len && in[i] != '='; i++) {
    const char *p = in[i] != '\0' ? strchr(tab, in[i]) : NULL;
    if (p == NULL) {
      free(o);
      return -1;
    }
    v = (v << 6) | (unsigned)(p - tab);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      o[k++] = (char)((v >> bits) & 0xFF);
    }
  }
  *out = o;
  *n = k;
  return 0;
}

/* v2 agent-owned terminals (a v2 /run): terminal_update says what runs
 * and how it ended, terminal_output_chunk carries its output (base64),
 * shown as it comes. */
static void note_v2_terminal(capp *a, const acp_client_update *u) {
  const char *id = NULL, *x = NULL;
  size_t idn = 0, xn = 0;
  const acp_json_val *exit;
  int64_t code;

  jstr(u->msg, u->update, "terminalId", &id, &idn);
  if (str_is(u->kind_name, u->kind_name_len, "terminal_output_chunk")) {
    char *data;
    size_t n;
    if (jstr(u->msg, u->update, "data", &x, &xn) != 0 ||
        b64_decode(x, xn, &data, &n) != 0) {
      note(a, "[terminal %.*s] output that is not base64\n", (int)idn,
           id ? id : "");
      return;
    }
    note(a, "%.*s", (int)n, data);
    free(data);
    return;
  }
  if (jstr(u->msg, u->update, "command", &x, &xn) == 0)
    note(a, "[terminal %.*s] %.*s\n", (int)idn, id ? id : "", (int)xn, x);
  exit = acp_json_obj_getz(u->update, "exitStatus");
  if (exit == NULL || acp_json_type_of(exit) != ACP_JSON_OBJECT)
    return;
  if (jstr(u->msg, exit, "signal", &x, &xn) == 0)
    note(a, "[terminal %.*s] killed by %.*s\n", (int)idn, id ? id : "", (int)xn,
         x);
  else if (acp_json_get_int64(acp_json_obj_getz(exit, "exitCode"), &code) == 0)
    note(a, "[terminal %.*s] exited %lld\n", (int)idn, id ? id : "",
         (long long)code);
}
static void session_result_commands(capp *a, const acp_rpc_msg *msg);

static void v2_state_update(capp *a, const acp_client_update *u);

static int on_update(acp_client *client, const acp_client_update *u, void *ud) {
  capp *a = ud;
  const acp_json_val *content = acp_json_obj_getz(u->update, "content");
  const char *s = NULL, *s2 = NULL;
  size_t n = 0, n2 = 0;
  const char *style = a->color ? update_style(u) : NULL;

  (void)client;
  if (u->kind_name_len == 12 && memcmp(u->kind_name, "state_update", 12) == 0) {
    v2_state_update(a, u);
    return 0;
  }
  if (u->kind_name_len == 12 && memcmp(u->kind_name, "user_message", 12) == 0)
    return 0; /* v2: the prompt we sent, echoed with its messageId */
  if (style != NULL)
    note(a, "%s", style);
  switch (u->kind) {
  case ACP_UPDATE_AGENT_MESSAGE_CHUNK:
    if (u->text != NULL)
      out_agent_text(a, u->text, u->text_len);
    else
      note_content(a, u->msg, "", content);
    break;
  case ACP_UPDATE_AGENT_THOUGHT_CHUNK:
    note_content(a, u->msg, "(thinking) ", content);
    break;
  case ACP_UPDATE_USER_MESSAGE_CHUNK:
    note_content(a, u->msg, "> ", content);
    break;
  case ACP_UPDATE_TOOL_CALL:
    note_tool(a, u, true);
    break;
  case ACP_UPDATE_TOOL_CALL_UPDATE:
    note_tool(a, u, false);
    break;
  case ACP_UPDATE_PLAN:
    note_entries(a, u->msg, "[plan]", acp_json_obj_getz(u->update, "entries"));
    break;
  case ACP_UPDATE_PLAN_UPDATE:
    note_plan_update(a, u);
    break;
  case ACP_UPDATE_PLAN_REMOVED:
    jstr(u->msg, u->update, "planId", &s, &n);
    note(a, "[plan %.*s] removed\n", (int)n, s ? s : "");
    break;
  case ACP_UPDATE_AVAILABLE_COMMANDS_UPDATE:
    note_commands(a, u);
    remember_commands(a, u);
    break;
  case ACP_UPDATE_CURRENT_MODE_UPDATE:
    jstr(u->msg, u->update, "currentModeId", &s, &n);
    note(a, "[mode] %.*s\n", (int)n, s ? s : "");
    break;
  case ACP_UPDATE_CONFIG_OPTION_UPDATE:
    note_config(a, u);
    break;
  case ACP_UPDATE_SESSION_INFO_UPDATE:
    note_session_info(a, u);
    break;
  case ACP_UPDATE_USAGE_UPDATE:
    note_usage(a, u);
    break;
  case ACP_UPDATE_NOTICE:
    jstr(u->msg, u->update, "severity", &s, &n);
    jstr(u->msg, u->update, "title", &s2, &n2);
    note(a, "[%.*s] %.*s", (int)n, s ? s : "notice", (int)n2, s2 ? s2 : "");
    if (jstr(u->msg, u->update, "description", &s, &n) == 0)
      note(a, ": %.*s", (int)n, s);
    note(a, "\n");
    break;
  case ACP_UPDATE_COMPACTION_UPDATE:
  case ACP_UPDATE_COMPACTION_SUMMARY_CHUNK:
    note_compaction(a, u);
    break;
  case ACP_UPDATE_SUBAGENT_UPDATE:
    note_subagent(a, u);
    break;
  case ACP_UPDATE_SESSION_MESSAGE:
  case ACP_UPDATE_SESSION_MESSAGE_CHUNK:
    note_session_message(a, u);
    break;
  default:
    if (str_is(u->kind_name, u->kind_name_len, "terminal_update") ||
        str_is(u->kind_name, u->kind_name_len, "terminal_output_chunk")) {
      note_v2_terminal(a, u);
      break;
    }
    note(a, "[update] %.*s (a kind this client does not know)\n",
         (int)u->kind_name_len, u->kind_name);
    break;
  }
  if (style != NULL)
    note(a, "\033[0m");
  if (a->fancy && (u->kind == ACP_UPDATE_TOOL_CALL ||
                   u->kind == ACP_UPDATE_TOOL_CALL_UPDATE))
    note_diffs(a, u);
  return 0;
}

/* MARK: - Permission requests and elicitation */

/* kind starts with prefix ("allow" matches allow_once and allow_always) */
static bool kind_is(const char *kind, size_t kind_len, const char *prefix) {
  size_t n = strlen(prefix);

  return kind != NULL && kind_len >= n && memcmp(kind, prefix, n) == 0;
}

static void answer_permission(capp *a, const char *choice, size_t len) {
  acp_json_doc *doc = NULL;
  const acp_json_val *opt;
  const char *pick = NULL;
  const char *allow = NULL;
  const char *reject = NULL;
  size_t pick_len = 0;
  size_t allow_len = 0;
  size_t reject_len = 0;
  unsigned idx = 0;
  unsigned want = 0;
  char id[256];

  if (len > 0 && choice[0] >= '1' && choice[0] <= '9')
    want = (unsigned)strtoul(choice, NULL, 10);
  if (acp_json_doc_new(&doc, NULL) == 0 &&
      acp_json_doc_parse(doc, a->perm_options, strlen(a->perm_options), NULL) ==
          0) {
    for (opt = acp_json_child(acp_json_doc_root(doc)); opt != NULL;
         opt = acp_json_next(opt)) {
      const char *oid = NULL;
      const char *kind = NULL;
      size_t oid_len = 0;
      size_t kind_len = 0;
      const acp_json_val *v = acp_json_obj_getz(opt, "optionId");
      if (v == NULL || acp_json_doc_str(doc, v, &oid, &oid_len) != 0)
        continue;
      v = acp_json_obj_getz(opt, "kind");
      if (v != NULL)
        acp_json_doc_str(doc, v, &kind, &kind_len);
      if (++idx == want) {
        pick = oid;
        pick_len = oid_len;
      }
      if (allow == NULL && kind_is(kind, kind_len, "allow")) {
        allow = oid;
        allow_len = oid_len;
      }
      if (reject == NULL && kind_is(kind, kind_len, "reject")) {
        reject = oid;
        reject_len = oid_len;
      }
    }
  }
  /* A number picks that option; no choice picks the first allow option
   * under --yes and the first reject option otherwise (no input left to
   * ask with); a number out of range rejects. */
  if (pick == NULL && want != 0)
    note(a, "no such option; rejecting\n");
  if (pick == NULL && want == 0 && a->yes) {
    pick = allow;
    pick_len = allow_len;
  }
  if (pick == NULL) {
    pick = reject;
    pick_len = reject_len;
  }
  if (pick == NULL) {
    note(a, "no option to answer with; the request is cancelled\n");
    acp_client_respond_permission(a->client, a->perm, NULL);
  } else {
    snprintf(id, sizeof(id), "%.*s", (int)(pick_len < 255 ? pick_len : 255),
             pick);
    note(a, "-> %s\n", id);
    acp_client_respond_permission(a->client, a->perm, id);
  }
  acp_json_doc_free(doc);
  free(a->perm_options);
  a->perm_options = NULL;
  a->perm = NULL;
}

static int on_permission(acp_client *client, acp_client_request *req,
                         void *ud) {
  capp *a = ud;
  const acp_json_val *p = acp_client_request_params(req);
  const acp_json_val *opts = acp_json_obj_getz(p, "options");
  const acp_json_val *tc = acp_json_obj_getz(p, "toolCall");
  const acp_json_val *subject = acp_json_obj_getz(p, "subject"); /* v2 */
  const acp_rpc_msg *msg = acp_client_request_msg(req);
  const char *s = NULL;
  size_t sn = 0;
  const acp_json_val *o;
  const char *title = NULL;
  size_t tlen = 0;
  size_t n;
  const char *raw;
  unsigned i = 0;

  if (acp_json_type_of(opts) != ACP_JSON_ARRAY || a->perm != NULL) {
    acp_client_respond_error(client, req, -32602,
                             a->perm ? "another permission request is pending"
                                     : "Invalid params: options required",
                             NULL, 0);
    return 0;
  }
  /* v1 names the tool call (toolCall.title); v2 gives the prompt its own
   * title, its subject the tool call (subject.toolCall) or a command. */
  if (jstr(msg, p, "title", &title, &tlen) != 0 &&
      jstr(msg, tc, "title", &title, &tlen) != 0)
    jstr(msg, acp_json_obj_getz(subject, "toolCall"), "title", &title, &tlen);
  raw = acp_json_raw(opts, &n);
  a->perm_options = malloc(n + 1);
  if (a->perm_options == NULL)
    return ACP_ERR_NOMEM;
  memcpy(a->perm_options, raw, n);
  a->perm_options[n] = '\0';
  a->perm = req;
  note(a, "[permission] %.*s\n", (int)tlen, title ? title : "(tool call)");
  if (jstr(msg, p, "description", &s, &sn) == 0)
    note(a, "  %.*s\n", (int)sn, s);
  if (jstr(msg, subject, "command", &s, &sn) == 0) {
    note(a, "  $ %.*s", (int)sn, s);
    if (jstr(msg, subject, "cwd", &s, &sn) == 0)
      note(a, " (in %.*s)", (int)sn, s);
    note(a, "\n");
  }
  for (o = acp_json_child(opts); o != NULL; o = acp_json_next(o)) {
    const char *name = NULL;
    size_t nlen = 0;
    jstr(msg, o, "name", &name, &nlen);
    note(a, "  %u) %.*s\n", ++i, (int)nlen, name ? name : "?");
  }
  if (a->yes) {
    note(a, "--yes: allowing\n");
    answer_permission(a, "", 0);
    /* An empty choice picks the first allow option under --yes. */
    return 0;
  }
  if (a->stdin_eof && a->line_len == 0) {
    note(a, "no input to answer with; rejecting\n");
    answer_permission(a, "", 0);
    return 0;
  }
  if (a->tty == NULL)
    note(a, "choose 1-%u: ", i);
  read_stdin(a);
  return 0;
}

static int on_elicitation(acp_client *client, acp_client_request *req,
                          void *ud) {
  capp *a = ud;
  const char *m = NULL;
  size_t n = 0;

  const char *mode = NULL, *url = NULL;
  size_t mn = 0, un = 0;

  acp_client_request_param_str(req, "message", &m, &n);
  acp_client_request_param_str(req, "mode", &mode, &mn);
  if (str_is(mode, mn, "url")) {
    /* The user goes to the URL; the agent says when that is done
     * (elicitation/complete). Accepting only means "I will go". */
    acp_client_request_param_str(req, "url", &url, &un);
    note(a, "[visit] %.*s: %.*s\n", (int)n, m ? m : "", (int)un,
         url ? url : "");
    if (a->yes) {
      note(a, "--yes: accepted\n");
      acp_client_respond(client, req, "{\"action\":\"accept\"}", 19);
    } else {
      note(a, "declined (acp client answers url requests only with --yes)\n");
      acp_client_respond(client, req, "{\"action\":\"decline\"}", 20);
    }
    return 0;
  }
  note(a, "[question] %.*s\n", (int)n, m ? m : "");
  if (a->yes || (a->stdin_eof && a->line_len == 0) || a->elicit != NULL) {
    note(a, "declined (no interactive answer)\n");
    acp_client_respond(client, req, "{\"action\":\"decline\"}", 20);
    return 0;
  }
  a->elicit = req;
  if (a->tty == NULL)
    note(a, "answer: ");
  read_stdin(a);
  return 0;
}

static int on_elicitation_complete(acp_client *client, const acp_rpc_msg *msg,
                                   void *ud) {
  const char *id = NULL;
  size_t n = 0;

  (void)client;
  jstr(msg, msg->params, "elicitationId", &id, &n);
  note(ud, "[visit %.*s] done\n", (int)n, id ? id : "?");
  return 0;
}

/* auth/status_update: the agent's sign-in state changed (unstable). */
static int on_auth_status_update(acp_client *client, const acp_rpc_msg *msg,
                                 void *ud) {
  const char *st = NULL;
  size_t n = 0;

  (void)client;
  jstr(msg, msg->params, "state", &st, &n);
  note(ud, "[auth] %.*s\n", (int)n, st ? st : "unknown");
  return 0;
}

static void answer_elicitation(capp *a, const char *text, size_t len) {
  size_t n;
  const char *r;

  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "action");
  acp_json_write_strz(a->w, "accept");
  acp_json_write_keyz(a->w, "content");
  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "answer");
  acp_json_write_str(a->w, text, len);
  acp_json_write_obj_end(a->w);
  acp_json_write_obj_end(a->w);
  r = acp_json_writer_data(a->w, &n);
  if (acp_json_writer_error(a->w) != 0)
    acp_client_respond(a->client, a->elicit, "{\"action\":\"decline\"}", 20);
  else
    acp_client_respond(a->client, a->elicit, r, n);
  a->elicit = NULL;
}

/* MARK: - Files, confined to the session's cwd */

/* Resolve `path` (absolute, as ACP requires) and check it lies inside cwd.
 * For a file that does not exist yet, its directory must. */
static int confine(capp *a, const char *path, char *out, bool may_create) {
  char dir[PATH_MAX];
  const char *slash;
  size_t cl = strlen(a->cwd);

  if (path[0] != '/')
    return -1;
  if (realpath(path, out) == NULL) {
    if (!may_create || errno != ENOENT)
      return -2;
    slash = strrchr(path, '/');
    if (slash == NULL || (size_t)(slash - path) >= sizeof(dir))
      return -1;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    if (realpath(dir[0] ? dir : "/", out) == NULL)
      return -2;
    if (strlen(out) + strlen(slash) >= PATH_MAX)
      return -1;
    strcat(out, slash);
  }
  if (strncmp(out, a->cwd, cl) != 0 || (out[cl] != '/' && out[cl] != '\0'))
    return -1;
  return 0;
}

static int on_read_file(acp_client *client, acp_client_request *req, void *ud) {
  capp *a = ud;
  const acp_json_val *p = acp_client_request_params(req);
  char path[PATH_MAX];
  char real[PATH_MAX];
  const char *s;
  size_t n;
  int64_t line = 1;
  int64_t limit = -1;
  FILE *f;
  char *buf;
  size_t len;
  const char *start;
  const char *end;
  int rv;

  if (acp_client_request_param_str(req, "path", &s, &n) != 0 ||
      n >= sizeof(path)) {
    acp_client_respond_error(client, req, -32602,
                             "Invalid params: path required", NULL, 0);
    return 0;
  }
  memcpy(path, s, n);
  path[n] = '\0';
  if (acp_json_obj_getz(p, "line") != NULL &&
      acp_json_type_of(acp_json_obj_getz(p, "line")) != ACP_JSON_NULL &&
      (acp_json_get_int64(acp_json_obj_getz(p, "line"), &line) != 0 ||
       line < 1)) {
    acp_client_respond_error(client, req, -32602,
                             "Invalid params: line must be >= 1", NULL, 0);
    return 0;
  }
  if (acp_json_obj_getz(p, "limit") != NULL &&
      acp_json_type_of(acp_json_obj_getz(p, "limit")) != ACP_JSON_NULL &&
      (acp_json_get_int64(acp_json_obj_getz(p, "limit"), &limit) != 0 ||
       limit < 0)) {
    acp_client_respond_error(client, req, -32602,
                             "Invalid params: limit must be >= 0", NULL, 0);
    return 0;
  }
  rv = confine(a, path, real, false);
  if (rv == -1) {
    note(a, "[fs] refused read outside %s: %s\n", a->cwd, path);
    acp_client_respond_error(client, req, -32602,
                             "Invalid params: path is outside the session's "
                             "working directory",
                             NULL, 0);
    return 0;
  }
  f = rv == 0 ? fopen(real, "rb") : NULL;
  if (f == NULL) {
    acp_client_respond_error(client, req, -32002, "Resource not found", NULL,
                             0);
    return 0;
  }
  buf = malloc(MAX_FILE);
  len = buf ? fread(buf, 1, MAX_FILE, f) : 0;
  fclose(f);
  if (buf == NULL)
    return ACP_ERR_NOMEM;
  start = buf;
  end = buf + len;
  while (line > 1 && start < end) {
    const char *nl = memchr(start, '\n', (size_t)(end - start));
    start = nl ? nl + 1 : end;
    line--;
  }
  if (limit >= 0) {
    const char *q = start;
    while (limit > 0 && q < end) {
      const char *nl = memchr(q, '\n', (size_t)(end - q));
      q = nl ? nl + 1 : end;
      limit--;
    }
    end = q;
  }
  note(a, "[fs] read %s\n", real);
  if (acp_client_respond_read_text_file(client, req, start,
                                        (size_t)(end - start)) != 0)
    acp_client_respond_error(client, req, -32603,
                             "file is not valid UTF-8 text", NULL, 0);
  free(buf);
  return 0;
}

static int on_write_file(acp_client *client, acp_client_request *req,
                         void *ud) {
  capp *a = ud;
  const acp_rpc_msg *msg = acp_client_request_msg(req);
  const acp_json_val *p = acp_client_request_params(req);
  char path[PATH_MAX];
  char real[PATH_MAX];
  const char *s;
  const char *content;
  size_t n;
  size_t clen;
  FILE *f;

  if (acp_client_request_param_str(req, "path", &s, &n) != 0 ||
      n >= sizeof(path) || jstr(msg, p, "content", &content, &clen) != 0) {
    acp_client_respond_error(client, req, -32602,
                             "Invalid params: path and content required", NULL,
                             0);
    return 0;
  }
  memcpy(path, s, n);
  path[n] = '\0';
  if (confine(a, path, real, true) != 0) {
    note(a, "[fs] refused write outside %s: %s\n", a->cwd, path);
    acp_client_respond_error(client, req, -32602,
                             "Invalid params: path is outside the session's "
                             "working directory",
                             NULL, 0);
    return 0;
  }
  f = fopen(real, "wb");
  if (f == NULL || fwrite(content, 1, clen, f) != clen) {
    if (f != NULL)
      fclose(f);
    acp_client_respond_error(client, req, -32603, "cannot write the file", NULL,
                             0);
    return 0;
  }
  fclose(f);
  note(a, "[fs] wrote %s (%zu bytes)\n", real, clen);
  acp_client_respond(client, req, "null", 4);
  return 0;
}

/* MARK: - Terminals */

/* The terminal the request's terminalId names; when there is none, answer
 * the request with a "Resource not found" error and return NULL. */
static term *find_term(capp *a, acp_client_request *req) {
  const char *id;
  size_t n;
  term *t;

  if (acp_client_request_param_str(req, "terminalId", &id, &n) == 0)
    for (t = a->terms; t != NULL; t = t->next)
      if (strlen(t->id) == n && memcmp(t->id, id, n) == 0)
        return t;
  acp_client_respond_error(a->client, req, -32002,
                           "Resource not found: no such terminal", NULL, 0);
  return NULL;
}

static void write_exit_status(capp *a, term *t) {
  static const struct {
    int num;
    const char *name;
  } sigs[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
              {SIGABRT, "SIGABRT"}, {SIGKILL, "SIGKILL"}, {SIGSEGV, "SIGSEGV"},
              {SIGPIPE, "SIGPIPE"}, {SIGTERM, "SIGTERM"}};
  size_t i;

  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "exitCode");
  if (t->signal == 0)
    acp_json_write_int(a->w, t->exit_code);
  else
    acp_json_write_null(a->w);
  acp_json_write_keyz(a->w, "signal");
  if (t->signal == 0) {
    acp_json_write_null(a->w);
  } else {
    char buf[16];
    snprintf(buf, sizeof(buf), "SIG%d", t->signal);
    for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
      if (sigs[i].num == t->signal)
        snprintf(buf, sizeof(buf), "%s", sigs[i].name);
    acp_json_write_strz(a->w, buf);
  }
  acp_json_write_obj_end(a->w);
}

static void term_answer_waiters(term *t) {
  capp *a = t->a;
  size_t i;
  size_t n;
  const char *r;

  if (!t->exited || !t->eof)
    return;
  for (i = 0; i < t->nwaiters; i++) {
    acp_json_writer_reset(a->w);
    write_exit_status(a, t);
    r = acp_json_writer_data(a->w, &n);
    acp_client_respond(a->client, t->waiters[i], r, n);
  }
  t->nwaiters = 0;
}

static void term_read(acp_uv_link *link, int status, const char *data,
                      size_t len, void *ud) {
  term *t = ud;

  (void)link;
  if (status != 0 || len == 0) {
    if (status != 0) {
      t->eof = true;
      term_answer_waiters(t);
    }
    return;
  }
  if (t->len + len > t->limit) {
    /* Keep the newest output, dropping from the front at a character
     * boundary, as the terminals page asks. */
    size_t drop;
    if (len >= t->limit) {
      data += len - t->limit;
      len = t->limit;
      t->len = 0;
    } else {
      drop = t->len + len - t->limit;
      while (drop < t->len && ((unsigned char)t->out[drop] & 0xC0) == 0x80)
        drop++;
      memmove(t->out, t->out + drop, t->len - drop);
      t->len -= drop;
    }
    t->truncated = true;
  }
  memcpy(t->out + t->len, data, len);
  t->len += len;
}

static void term_exit(acp_uv_process *p, int64_t status, int sig, void *ud) {
  term *t = ud;

  (void)p;
  t->exited = true;
  t->exit_code = status;
  t->signal = sig;
  term_answer_waiters(t);
}

static int on_term_create(acp_client *client, acp_client_request *req,
                          void *ud) {
  capp *a = ud;
  const acp_rpc_msg *msg = acp_client_request_msg(req);
  const acp_json_val *p = acp_client_request_params(req);
  const acp_json_val *v;
  acp_uv_process_options *opts = NULL;
  const char *argv[66];
  char *strs[66];
  size_t nstr = 0;
  size_t argc = 0;
  const char *s;
  size_t n;
  int64_t limit;
  term *t;
  int rv;
  size_t i;

  if (acp_client_request_param_str(req, "command", &s, &n) != 0) {
    acp_client_respond_error(client, req, -32602,
                             "Invalid params: command required", NULL, 0);
    return 0;
  }
  t = calloc(1, sizeof(*t));
  if (t == NULL)
    return ACP_ERR_NOMEM;
  t->a = a;
  t->limit = DEFAULT_TERM_LIMIT;
  if (acp_json_get_int64(acp_json_obj_getz(p, "outputByteLimit"), &limit) ==
          0 &&
      limit > 0 && limit < (int64_t)DEFAULT_TERM_LIMIT * 64)
    t->limit = (size_t)limit;
  t->out = malloc(t->limit);
  /* stderr joins stdout, in order, as a terminal shows them. */
  argv[argc++] = "/bin/sh";
  argv[argc++] = "-c";
  argv[argc++] = "exec \"$0\" \"$@\" 2>&1";
  strs[nstr] = strndup(s, n);
  argv[argc++] = strs[nstr++];
  for (v = acp_json_child(acp_json_obj_getz(p, "args")); v != NULL && argc < 64;
       v = acp_json_next(v)) {
    if (acp_json_doc_str(msg->doc, v, &s, &n) != 0)
      continue;
    strs[nstr] = strndup(s, n);
    argv[argc++] = strs[nstr++];
  }
  argv[argc] = NULL;
  rv = acp_uv_process_options_new(&opts, NULL);
  if (rv == 0)
    rv = acp_uv_process_options_set_argv(opts, argv);
  if (rv == 0 && jstr(msg, p, "cwd", &s, &n) == 0) {
    char *cwd = strndup(s, n);
    rv = acp_uv_process_options_set_cwd(opts, cwd);
    free(cwd);
  } else if (rv == 0) {
    rv = acp_uv_process_options_set_cwd(opts, a->cwd);
  }
  for (v = acp_json_child(acp_json_obj_getz(p, "env")); v != NULL && rv == 0;
       v = acp_json_next(v)) {
    const char *k;
    const char *val;
    size_t kl;
    size_t vl;
    char kv[4096];
    if (jstr(msg, v, "name", &k, &kl) != 0 ||
        jstr(msg, v, "value", &val, &vl) != 0 || kl + vl + 2 > sizeof(kv))
      continue;
    snprintf(kv, sizeof(kv), "%.*s=%.*s", (int)kl, k, (int)vl, val);
    rv = acp_uv_process_options_add_env(opts, kv);
  }
  if (rv == 0) {
    acp_uv_process_options_set_exit_cb(opts, term_exit);
    rv = acp_uv_process_spawn(&t->p, &a->loop, opts, t, NULL, NULL);
  }
  acp_uv_process_options_free(opts);
  for (i = 0; i < nstr; i++)
    free(strs[i]);
  if (rv != 0 || t->out == NULL) {
    acp_client_respond_error(client, req, -32603, "cannot start the command",
                             NULL, 0);
    free(t->out);
    free(t);
    return 0;
  }
  acp_uv_link_read_start(acp_uv_process_link(t->p), term_read, t);
  acp_uv_link_shutdown(acp_uv_process_link(t->p));
  snprintf(t->id, sizeof(t->id), "term_%u", ++a->next_term);
  t->next = a->terms;
  a->terms = t;
  note(a, "[terminal] %s started\n", t->id);
  acp_client_respond_terminal_create(client, req, t->id);
  return 0;
}

static int on_term_output(acp_client *client, acp_client_request *req,
                          void *ud) {
  capp *a = ud;
  term *t = find_term(a, req);
  size_t n;
  const char *r;
  size_t keep;

  if (t == NULL)
    return 0;
  /* Never cut a UTF-8 sequence at the end. */
  keep = t->len;
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "output");
  if (acp_json_write_str(a->w, t->out, keep) != 0) {
    acp_json_writer_reset(a->w);
    acp_json_write_obj_begin(a->w);
    acp_json_write_keyz(a->w, "output");
    acp_json_write_strz(a->w, "(output is not valid UTF-8)");
  }
  acp_json_write_keyz(a->w, "truncated");
  acp_json_write_bool(a->w, t->truncated);
  if (t->exited) {
    acp_json_write_keyz(a->w, "exitStatus");
    write_exit_status(a, t);
  }
  acp_json_write_obj_end(a->w);
  r = acp_json_writer_data(a->w, &n);
  acp_client_respond(client, req, r, n);
  return 0;
}

static int on_term_wait(acp_client *client, acp_client_request *req, void *ud) {
  capp *a = ud;
  term *t = find_term(a, req);

  if (t == NULL)
    return 0;
  if (t->nwaiters == sizeof(t->waiters) / sizeof(t->waiters[0])) {
    acp_client_respond_error(client, req, -32603, "too many waiters", NULL, 0);
    return 0;
  }
  t->waiters[t->nwaiters++] = req;
  term_answer_waiters(t);
  return 0;
}

static int on_term_kill(acp_client *client, acp_client_request *req, void *ud) {
  capp *a = ud;
  term *t = find_term(a, req);

  if (t == NULL)
    return 0;
  if (!t->exited)
    acp_uv_process_kill(t->p, SIGKILL);
  acp_client_respond(client, req, "null", 4);
  return 0;
}

static void term_closed(acp_uv_process *p, void *ud) {
  term *t = ud;

  (void)p;
  free(t->out);
  free(t);
}

static void term_free(capp *a, term *t) {
  term **pp;
  size_t i;

  for (pp = &a->terms; *pp != NULL; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  for (i = 0; i < t->nwaiters; i++)
    acp_client_respond_error(a->client, t->waiters[i], -32603,
                             "terminal released", NULL, 0);
  t->nwaiters = 0;
  acp_uv_process_close(t->p, term_closed);
}

static int on_term_release(acp_client *client, acp_client_request *req,
                           void *ud) {
  capp *a = ud;
  term *t = find_term(a, req);

  if (t == NULL)
    return 0;
  term_free(a, t);
  acp_client_respond(client, req, "null", 4);
  return 0;
}

/* MARK: - MCP over ACP (--mcp-tools) */

/* Without --mcp-tools this client offers no MCP servers over ACP: a
 * request that reaches it for one is answered as the connectionless
 * binding says. */
static int on_mcp_message(acp_client *client, acp_client_request *req,
                          void *ud) {
  (void)ud;
  acp_client_respond_error(client, req, ACP_MCP_ACP_SERVER_UNAVAILABLE,
                           "MCP server unavailable: this client offers none",
                           NULL, 0);
  return 0;
}

static int tool_echo(acp_mcp_call *call, const acp_json_val *args, void *ud) {
  (void)ud;
  return cli_mcp_echo(call, args, "message: expected a string");
}

/* Which ACP session the call came through (the provider's correlation),
 * and which one this client created. */
static int tool_client_info(acp_mcp_call *call, const acp_json_val *args,
                            void *ud) {
  capp *a = ud;
  const char *sid = acp_mcp_acp_call_session_id(call);
  const char *mine = a->session_id;
  char text[512];
  int n;

  (void)args;
  /* The session the provider correlated the call with; this client's own
   * session id is added only when they differ (they never should). */
  if (sid != NULL && mine != NULL && strcmp(sid, mine) == 0)
    n = snprintf(text, sizeof(text), "acp-client %s; session %s", ACP_VERSION,
                 sid);
  else
    n = snprintf(text, sizeof(text),
                 "acp-client %s; session %s (this client's session: %s)",
                 ACP_VERSION, sid != NULL ? sid : "(unknown)",
                 mine != NULL ? mine : "(none yet)");
  if (n < 0)
    return ACP_ERR_INVALID_STATE;
  if ((size_t)n >= sizeof(text))
    n = (int)sizeof(text) - 1;
  return acp_mcp_call_respond_text(call, text, (size_t)n, false);
}

static int mcp_server_create(capp *a) {
  acp_mcp_tool_def def;
  int rv;

  rv = acp_mcp_server_new(&a->mcp_server, "acp-client", ACP_VERSION, a, NULL);
  if (rv != 0)
    return rv;
  memset(&def, 0, sizeof(def));
  def.version = ACP_MCP_DEF_VERSION;
  def.name = "echo";
  def.description = "Return the message as text.";
  def.input_schema = "{\"type\":\"object\",\"properties\":{\"message\":{"
                     "\"type\":\"string\"}},\"required\":[\"message\"]}";
  def.handler = tool_echo;
  def.user_data = a;
  rv = acp_mcp_server_add_tool(a->mcp_server, &def);
  if (rv != 0)
    return rv;
  def.name = "client_info";
  def.description = "Name the client and the ACP session this call "
                    "belongs to.";
  def.input_schema = "{\"type\":\"object\",\"properties\":{}}";
  def.handler = tool_client_info;
  rv = acp_mcp_server_add_tool(a->mcp_server, &def);
  if (rv != 0)
    return rv;
  rv = acp_mcp_acp_provider_new(&a->prov, a, NULL);
  if (rv != 0)
    return rv;
  return acp_mcp_acp_provider_attach_client(a->prov, a->client);
}

/* mcp/connect, mcp/message (M1 and connectionless M2), mcp/disconnect and
 * the `_mcp/...` extension methods (M0) go to the provider; it answers
 * unknown servers and connections itself. */
static int on_mcp_request(acp_client *client, acp_client_request *req,
                          void *ud) {
  capp *a = ud;
  int rv = acp_mcp_acp_provider_client_request(a->prov, req);

  if (rv == ACP_MCP_ACP_NOT_MINE)
    return acp_client_respond_error(client, req, ACP_RPC_METHOD_NOT_FOUND, NULL,
                                    NULL, 0);
  return rv;
}

static int on_mcp_notification(acp_client *client, const acp_rpc_msg *msg,
                               void *ud) {
  capp *a = ud;
  int rv = acp_mcp_acp_provider_client_notification(a->prov, msg);

  (void)client;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

static int on_cancel_request(acp_client *client, acp_client_request *req,
                             void *ud) {
  capp *a = ud;
  int rv = acp_mcp_acp_provider_client_cancel(a->prov, req);

  (void)client;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

static int random_id(uint8_t id[16]) {
  FILE *f = fopen("/dev/urandom", "rb");
  size_t n = 0;

  if (f != NULL) {
    n = fread(id, 1, 16, f);
    fclose(f);
  }
  return n == 16 ? 0 : -1;
}

/* The mcpServers array of session/new into a->w: our server when the
 * agent can take it (initialize answered mcpCapabilities.acp), else []. */
static int mcp_servers_json(capp *a, const acp_rpc_msg *init, const char **json,
                            size_t *len) {
  const acp_json_val *caps =
      acp_json_obj_getz(init->result, "agentCapabilities");
  uint8_t id[16];
  const char *decl;
  size_t dlen;
  int rv;

  *json = "[]";
  *len = 2;
  if (!a->mcp_tools)
    return 0;
  if (!acp_mcp_acp_caps_has_acp(caps)) {
    /* A note even under --quiet: the option asked for was not honoured. */
    cli_err("client", "the agent cannot take MCP-over-ACP servers (no "
                      "mcpCapabilities.acp); going on without the \"client\" "
                      "MCP server");
    return 0;
  }
  if (random_id(id) != 0) {
    cli_err("client", "cannot read random bytes for the MCP server id");
    return ACP_ERR_INVALID_STATE;
  }
  rv = acp_mcp_acp_provider_declare(a->prov, a->mcp_server, "client", NULL, id,
                                    &a->decl);
  if (rv == 0)
    rv = acp_mcp_acp_decl_json(a->decl, ACP_MCP_ACP_DECL_SERVER_ID, &decl,
                               &dlen);
  if (rv != 0)
    return rv;
  acp_json_writer_reset(a->w);
  acp_json_write_arr_begin(a->w);
  acp_json_write_raw(a->w, decl, dlen);
  acp_json_write_arr_end(a->w);
  *json = acp_json_writer_data(a->w, len);
  return acp_json_writer_error(a->w);
}

/* MARK: - The conversation */

static int stop_reason_code(const char *s, size_t n) {
  static const struct {
    const char *name;
    int code;
  } map[] = {{"end_turn", CLI_EXIT_OK},
             {"cancelled", CLI_EXIT_CANCELLED},
             {"refusal", CLI_EXIT_REFUSAL},
             {"max_tokens", CLI_EXIT_MAX_TOKENS},
             {"max_turn_requests", CLI_EXIT_MAX_TURN_REQUESTS}};
  size_t i;

  for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
    if (strlen(map[i].name) == n && memcmp(map[i].name, s, n) == 0)
      return map[i].code;
  return CLI_EXIT_FAILURE;
}

static void send_prompt(capp *a, const char *text, size_t len, bool lasting);

/* The idle prompt: printed on stderr, or shown by the line editor. */
static void show_prompt(capp *a) {
  if (a->tty == NULL)
    fputs("> ", stderr);
}

/* The PromptResponse's usage (unstable): this turn's tokens. */
static void note_turn_usage(capp *a, const acp_rpc_msg *msg) {
  const acp_json_val *u = acp_json_obj_getz(msg->result, "usage");
  uint64_t in = 0, out = 0, total = 0, thought = 0;

  if (acp_json_type_of(u) != ACP_JSON_OBJECT)
    return;
  acp_json_get_uint64(acp_json_obj_getz(u, "inputTokens"), &in);
  acp_json_get_uint64(acp_json_obj_getz(u, "outputTokens"), &out);
  acp_json_get_uint64(acp_json_obj_getz(u, "totalTokens"), &total);
  if (a->color)
    note(a, "\033[2m");
  note(a, "[turn] %llu tokens in, %llu out, %llu total", (unsigned long long)in,
       (unsigned long long)out, (unsigned long long)total);
  if (acp_json_get_uint64(acp_json_obj_getz(u, "thoughtTokens"), &thought) == 0)
    note(a, " (%llu thinking)", (unsigned long long)thought);
  note(a, "%s\n", a->color ? "\033[0m" : "");
}

static void turn_ended(capp *a, int code);

/* ACP v2: the turn ends with an idle state_update carrying the stop
 * reason, not with the session/prompt response. */
static void v2_state_update(capp *a, const acp_client_update *u) {
  const acp_v2_session_update *su = NULL;
  const acp_v2_state_update *st;
  const char *s = NULL;
  size_t n = 0;
  int code;

  /* The generated v2 union (types_v2.h): state_update is a StateUpdate
   * tagged by `state`, an idle one tagged again by its stopReason. */
  acp_arena_reset(a->arena);
  if (acp_client_update_decode(a->client, u, a->arena, (const void **)&su) !=
          0 ||
      su->kind != ACP_V2_SESSION_UPDATE_KIND_STATE_UPDATE)
    return;
  st = su->state_update;
  if (st->kind == ACP_V2_STATE_UPDATE_KIND_REQUIRES_ACTION) {
    /* The turn waits on the user (a permission or a question follows or
     * is pending); running or idle comes after. */
    note(a, "[waiting for you]\n");
    return;
  }
  if (st->kind != ACP_V2_STATE_UPDATE_KIND_IDLE || a->state != ST_PROMPT)
    return;
  s = acp_v2_idle_state_update_kind_to_str(st->idle->variant.kind);
  if (s != NULL)
    n = strlen(s);
  else /* a stop reason this version does not know: kept in raw */
    jstr(u->msg, u->update, "stopReason", &s, &n);
  code = s ? stop_reason_code(s, n) : CLI_EXIT_OK;
  md_end(a);
  if (!a->at_line_start)
    out_text(a, "\n", 1);
  if (code != CLI_EXIT_OK)
    note(a, "[stop] %.*s\n", (int)n, s ? s : "(none)");
  turn_ended(a, code);
}

static int on_prompt_done(acp_client *client, const acp_rpc_msg *msg,
                          void *ud) {
  capp *a = ud;
  const char *s = NULL;
  size_t n = 0;
  int code;

  if (msg->result != NULL &&
      acp_client_protocol_version(client) == ACP_PROTOCOL_V2) {
    /* v2: the prompt was accepted ({messageId}, types_v2.h); the turn ends
     * on state_update idle. An answer of another shape ends it now. */
    acp_v2_prompt_response pr;
    char err[160];

    acp_arena_reset(a->arena);
    if (acp_decode_named(&acp_type_v2_prompt_response, msg->result, a->arena,
                         &pr, "result", err, sizeof(err)) == 0)
      return 0;
    note(a, "error: the agent's prompt answer is not v2: %s\n", err);
    turn_ended(a, CLI_EXIT_FAILURE);
    return 0;
  }
  if (msg->result == NULL) {
    note(a, "error %lld: %.*s\n", (long long)msg->error_code,
         (int)msg->error_message_len,
         msg->error_message ? msg->error_message : "");
    code = CLI_EXIT_FAILURE;
  } else {
    jstr(msg, msg->result, "stopReason", &s, &n);
    code = s ? stop_reason_code(s, n) : CLI_EXIT_FAILURE;
    md_end(a);
    if (!a->at_line_start) {
      out_text(a, "\n", 1);
    }
    if (code != CLI_EXIT_OK)
      note(a, "[stop] %.*s\n", (int)n, s ? s : "(none)");
    note_turn_usage(a, msg);
  }
  turn_ended(a, code);
  return 0;
}

static void turn_ended(capp *a, int code) {
  a->cancels = 0;
  if (!a->interactive) {
    app_quit(a, code);
    return;
  }
  a->state = ST_IDLE;
  if (a->stdin_eof && a->line_len == 0) {
    app_quit(a, CLI_EXIT_OK);
    return;
  }
  show_prompt(a);
  read_stdin(a); /* lines typed ahead are used first */
}

/* `lasting`: the text outlives the turn (the -p argument, which lives as
 * long as the program): it is lent to the library
 * (acp_client_prompt_text_ref()), which writes a large plain text from
 * where it lies instead of copying it into its output. A typed line lives
 * in the line editor's or the stdin buffer, which the turn reuses (the
 * editor reads "turn> " lines meanwhile): it is copied. */
static void send_prompt(capp *a, const char *text, size_t len, bool lasting) {
  int rv;

  if (a->session_id == NULL) {
    note(a, "no session: /new starts one, /load ID or /resume ID opens "
            "one\n");
    read_stdin(a);
    return;
  }
  a->state = ST_PROMPT;
  a->at_line_start = true;
  if (lasting)
    rv = acp_client_prompt_text_ref(a->client, a->session_id, text, len,
                                    on_prompt_done, a, NULL);
  else
    rv = acp_client_prompt_text(a->client, a->session_id, text, len,
                                on_prompt_done, a, NULL);
  if (rv != 0) {
    note(a, "cannot send the prompt\n");
    app_quit(a, CLI_EXIT_FAILURE);
  }
}

static int on_session_new(acp_client *client, const acp_rpc_msg *msg,
                          void *ud) {
  capp *a = ud;
  const char *s;
  size_t n;

  (void)client;
  if (msg->result == NULL || jstr(msg, msg->result, "sessionId", &s, &n)) {
    note(a, "session/new failed: %.*s\n", (int)msg->error_message_len,
         msg->error_message ? msg->error_message : "no sessionId");
    app_quit(a, CLI_EXIT_FAILURE);
    return 0;
  }
  a->session_id = strndup(s, n);
  if (a->session_id == NULL) {
    app_quit(a, CLI_EXIT_FAILURE);
    return 0;
  }
  session_result_commands(a, msg);
  if (a->decl != NULL) {
    /* The declaration belongs to the session the agent just named. */
    if (acp_mcp_acp_decl_set_session(a->decl, a->session_id) != 0) {
      app_quit(a, CLI_EXIT_FAILURE);
      return 0;
    }
    note(a,
         "[mcp] offering MCP server \"client\" (id %s) over ACP on "
         "session %s\n",
         acp_mcp_acp_decl_id(a->decl), a->session_id);
  }
  if (a->prompt != NULL) {
    send_prompt(a, a->prompt, strlen(a->prompt), true);
  } else {
    a->state = ST_IDLE;
    note(a, "session %s in %s; type a prompt (Ctrl-D quits)\n", a->session_id,
         a->cwd);
    show_prompt(a);
    read_stdin(a);
  }
  return 0;
}

static int on_initialized(acp_client *client, const acp_rpc_msg *msg,
                          void *ud) {
  capp *a = ud;
  const char *servers;
  size_t servers_len;

  if (msg->result == NULL) {
    note(a, "initialize failed: %.*s\n", (int)msg->error_message_len,
         msg->error_message ? msg->error_message : "");
    app_quit(a, CLI_EXIT_FAILURE);
    return 0;
  }
  a->state = ST_NEW;
  if (acp_client_protocol_version(client) > 1)
    note(a, "protocol version %lld\n",
         (long long)acp_client_protocol_version(client));
  if (acp_client_protocol_version(client) > 1 && !a->protocol_v2) {
    /* The spec: close when the answer is a version we cannot speak. */
    note(a,
         "the agent answered protocol version %lld; acp client speaks 1 "
         "(2 with --protocol-v2)\n",
         (long long)acp_client_protocol_version(client));
    app_quit(a, CLI_EXIT_FAILURE);
    return 0;
  }
  if (mcp_servers_json(a, msg, &servers, &servers_len) != 0 ||
      acp_client_session_new(client, a->cwd, servers, servers_len,
                             on_session_new, a, NULL) != 0)
    app_quit(a, CLI_EXIT_FAILURE);
  return 0;
}

/* MARK: - Slash commands (the interactive front end) */

static const char *const builtin_cmds[] = {
    "new",    "list", "load",  "resume", "fork",        "close", "mode",
    "config", "auth", "title", "cancel", "cancel-tool", "help",  "quit"};
#define NBUILTIN (sizeof(builtin_cmds) / sizeof(builtin_cmds[0]))

static const char slash_help[] =
    "  /new               start a new session\n"
    "  /list              list the agent's sessions\n"
    "  /load ID           load session ID (its history is replayed)\n"
    "  /resume ID         resume session ID (no replay)\n"
    "  /fork              fork the current session and switch to the copy\n"
    "  /close             close the current session\n"
    "  /mode NAME         set the session mode\n"
    "  /config ID VALUE   set a config option (true/false for booleans)\n"
    "  /auth METHOD       authenticate with METHOD\n"
    "  /title TEXT        set the session title\n"
    "  /cancel            send session/cancel (typed while a turn runs: as\n"
    "                     Ctrl-C)\n"
    "  /cancel-tool ID    v2: cancel one tool call (tool_call/cancel); taken\n"
    "                     at once while a turn runs\n"
    "  /help              this list\n"
    "  /quit              quit (as Ctrl-D)\n"
    "  //TEXT             send /TEXT to the agent as a prompt\n";

/* Tab completes the built-in names and the agent's. */
static void update_completion(capp *a) {
  const char *names[NBUILTIN + 64];
  size_t i, n = 0;

  for (i = 0; i < NBUILTIN; i++)
    names[n++] = builtin_cmds[i];
  for (i = 0; i < a->nagent_cmds && n < sizeof(names) / sizeof(names[0]); i++)
    names[n++] = a->agent_cmds[i];
  ctty_set_commands(a->tty, names, n);
}

static void free_agent_cmds(capp *a) {
  size_t i;

  for (i = 0; i < a->nagent_cmds; i++)
    free(a->agent_cmds[i]);
  free(a->agent_cmds);
  a->agent_cmds = NULL;
  a->nagent_cmds = 0;
}

static void remember_command_list(capp *a, const acp_rpc_msg *msg,
                                  const acp_json_val *list);

static void remember_commands(capp *a, const acp_client_update *u) {
  remember_command_list(a, u->msg,
                        acp_json_obj_getz(u->update, "availableCommands"));
}

/* v2: session/new and resume results may carry the initial commands
 * (NewSessionResponse.availableCommands, SDK 2.4 schema); later
 * available_commands_update notifications replace them. */
static void session_result_commands(capp *a, const acp_rpc_msg *msg) {
  const acp_json_val *list =
      acp_json_obj_getz(msg->result, "availableCommands");
  const acp_json_val *e;

  if (list == NULL || acp_json_type_of(list) != ACP_JSON_ARRAY)
    return;
  remember_command_list(a, msg, list);
  if (!a->interactive)
    return;
  note(a, "[commands]");
  for (e = acp_json_child(list); e != NULL; e = acp_json_next(e)) {
    const char *name = NULL;
    size_t nn = 0;
    if (jstr(msg, e, "name", &name, &nn) == 0)
      note(a, " /%.*s", (int)nn, name);
  }
  note(a, "%s\n", acp_json_child(list) != NULL ? "" : " none");
}

static void remember_command_list(capp *a, const acp_rpc_msg *msg,
                                  const acp_json_val *list) {
  const acp_json_val *e;
  size_t n = 0;

  free_agent_cmds(a);
  for (e = acp_json_child(list); e != NULL; e = acp_json_next(e))
    n++;
  a->agent_cmds = calloc(n + 1, sizeof(char *));
  if (a->agent_cmds == NULL)
    return;
  for (e = acp_json_child(list); e != NULL; e = acp_json_next(e)) {
    const char *name = NULL;
    size_t nn = 0;
    if (jstr(msg, e, "name", &name, &nn) == 0 && nn > 0 &&
        memchr(name, ' ', nn) == NULL &&
        (a->agent_cmds[a->nagent_cmds] = strndup(name, nn)) != NULL)
      a->nagent_cmds++;
  }
  update_completion(a);
}

static bool agent_has_command(const capp *a, const char *name, size_t n) {
  size_t i;

  for (i = 0; i < a->nagent_cmds; i++)
    if (strlen(a->agent_cmds[i]) == n && memcmp(a->agent_cmds[i], name, n) == 0)
      return true;
  return false;
}

/* A command's answer is in: back to the prompt. */
static void cmd_finished(capp *a) {
  if (a->state == ST_CMD)
    a->state = ST_IDLE;
  a->cancels = 0;
  show_prompt(a);
  read_stdin(a);
}

/* The slash command waiting for its answer, for messages. */
static char running_cmd[32];

static bool cmd_failed(capp *a, const acp_rpc_msg *msg) {
  if (msg->result != NULL)
    return false;
  if (msg->error_code == ACP_RPC_METHOD_NOT_FOUND)
    note(a, "%s: this agent does not support it (method not found)\n",
         running_cmd);
  else
    note(a, "%s failed: error %lld: %.*s\n", running_cmd,
         (long long)msg->error_code, (int)msg->error_message_len,
         msg->error_message ? msg->error_message : "");
  return true;
}

static int on_cmd_ok(acp_client *client, const acp_rpc_msg *msg, void *ud) {
  capp *a = ud;

  (void)client;
  if (!cmd_failed(a, msg))
    note(a, "ok\n");
  cmd_finished(a);
  return 0;
}

/* session/new, load, resume and fork: the session they name becomes the
 * current one (load and resume answer no id: the one asked for). */
static char *pending_sid;

static int on_cmd_session(acp_client *client, const acp_rpc_msg *msg,
                          void *ud) {
  capp *a = ud;
  const char *s = NULL;
  size_t n = 0;

  (void)client;
  if (!cmd_failed(a, msg)) {
    char *id = jstr(msg, msg->result, "sessionId", &s, &n) == 0 ? strndup(s, n)
                                                                : pending_sid;
    if (id == pending_sid)
      pending_sid = NULL;
    if (id != NULL) {
      free(a->session_id);
      a->session_id = id;
      note(a, "session %s\n", id);
    }
    session_result_commands(a, msg);
  }
  free(pending_sid);
  pending_sid = NULL;
  cmd_finished(a);
  return 0;
}

static int on_cmd_list(acp_client *client, const acp_rpc_msg *msg, void *ud) {
  capp *a = ud;
  const acp_json_val *e;
  int n = 0;

  (void)client;
  if (!cmd_failed(a, msg)) {
    for (e = acp_json_child(acp_json_obj_getz(msg->result, "sessions"));
         e != NULL; e = acp_json_next(e), n++) {
      const char *id = NULL, *title = NULL, *at = NULL;
      size_t idn = 0, tn = 0, an = 0;
      jstr(msg, e, "sessionId", &id, &idn);
      jstr(msg, e, "title", &title, &tn);
      jstr(msg, e, "updatedAt", &at, &an);
      note(a, "%s %.*s  %.*s%s%.*s\n",
           a->session_id && str_is(id, idn, a->session_id) ? "*" : " ",
           (int)idn, id ? id : "?", (int)tn, title ? title : "", at ? "  " : "",
           (int)an, at ? at : "");
    }
    if (n == 0)
      note(a, "no sessions\n");
  }
  cmd_finished(a);
  return 0;
}

static int on_cmd_closed(acp_client *client, const acp_rpc_msg *msg, void *ud) {
  capp *a = ud;

  (void)client;
  if (!cmd_failed(a, msg)) {
    note(a, "session %s closed (/new, /load or /resume to go on)\n",
         a->session_id);
    free(a->session_id);
    a->session_id = NULL;
  }
  cmd_finished(a);
  return 0;
}

/* "/config ID VALUE": true/false go as booleans, anything else as a
 * value id. */
static int send_config(capp *a, const char *id, const char *val) {
  const char *p;
  size_t n;
  bool b = strcmp(val, "true") == 0 || strcmp(val, "false") == 0;

  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "sessionId");
  acp_json_write_strz(a->w, a->session_id);
  acp_json_write_keyz(a->w, "configId");
  acp_json_write_strz(a->w, id);
  if (b) {
    acp_json_write_keyz(a->w, "type");
    acp_json_write_strz(a->w, "boolean");
    acp_json_write_keyz(a->w, "value");
    acp_json_write_raw(a->w, val, strlen(val));
  } else {
    acp_json_write_keyz(a->w, "value");
    acp_json_write_strz(a->w, val);
  }
  acp_json_write_obj_end(a->w);
  p = acp_json_writer_data(a->w, &n);
  if (acp_json_writer_error(a->w) != 0)
    return -1;
  return acp_client_call(a->client, "session/set_config_option", p, n,
                         on_cmd_ok, a, NULL);
}

/* The line starts with '/': run a built-in command, send an advertised
 * agent command as a prompt, or say what is wrong. `line` is modified. */
static void slash_command(capp *a, char *line, size_t len) {
  char *name = line + 1, *arg, *arg2 = NULL, *end = line + len;
  size_t nlen;
  int rv = 0;
  bool need_session;
  char sep;

  if (len >= 2 && line[1] == '/') {
    send_prompt(a, line + 1, len - 1, false);
    return;
  }
  nlen = strcspn(name, " \t\n");
  arg = name + nlen;
  while (arg < end && (*arg == ' ' || *arg == '\t'))
    arg++;
  sep = name[nlen];
  name[nlen] = '\0';
  if (!(strcmp(name, "mode") && strcmp(name, "config") &&
        strcmp(name, "title") && strcmp(name, "fork") &&
        strcmp(name, "close") && strcmp(name, "cancel") &&
        strcmp(name, "cancel-tool")))
    need_session = true;
  else
    need_session = false;
  if (strcmp(name, "config") == 0) {
    arg2 = arg + strcspn(arg, " \t");
    if (*arg2 != '\0')
      *arg2++ = '\0';
    while (*arg2 == ' ' || *arg2 == '\t')
      arg2++;
  }
  if (need_session && a->session_id == NULL) {
    note(a, "/%s: no session (/new, /load ID or /resume ID first)\n", name);
    show_prompt(a);
    return;
  }
  a->state = ST_CMD;
  snprintf(running_cmd, sizeof(running_cmd), "/%s", name);
  if (strcmp(name, "help") == 0) {
    size_t i;
    note(a, "slash commands:\n%s", slash_help);
    if (a->nagent_cmds > 0) {
      note(a, "the agent's commands (sent as prompts):");
      for (i = 0; i < a->nagent_cmds; i++)
        note(a, " /%s", a->agent_cmds[i]);
      note(a, "\n");
    }
    cmd_finished(a);
    return;
  } else if (strcmp(name, "quit") == 0) {
    app_quit(a, CLI_EXIT_OK);
    return;
  } else if (strcmp(name, "new") == 0) {
    rv = acp_client_session_new(a->client, a->cwd, NULL, 0, on_cmd_session, a,
                                NULL);
  } else if (strcmp(name, "list") == 0) {
    rv = acp_client_session_list(a->client, a->cwd, NULL, on_cmd_list, a, NULL);
  } else if ((strcmp(name, "load") == 0 || strcmp(name, "resume") == 0) &&
             *arg != '\0') {
    free(pending_sid);
    pending_sid = strdup(arg);
    if (v2(a)) /* v2 has no session/load: resume, replaying for /load */
      rv = acp_client_session_resume_replay(
          a->client, arg, a->cwd, NULL, 0,
          name[0] == 'l' ? "{\"type\":\"start\"}" : NULL,
          name[0] == 'l' ? 16 : 0, on_cmd_session, a, NULL);
    else
      rv = name[0] == 'l'
               ? acp_client_session_load(a->client, arg, a->cwd, NULL, 0,
                                         on_cmd_session, a, NULL)
               : acp_client_session_resume(a->client, arg, a->cwd, NULL, 0,
                                           on_cmd_session, a, NULL);
  } else if (strcmp(name, "fork") == 0) {
    rv = acp_client_session_fork(a->client, a->session_id, a->cwd, NULL, 0,
                                 on_cmd_session, a, NULL);
  } else if (strcmp(name, "close") == 0) {
    rv = acp_client_session_close(a->client, a->session_id, on_cmd_closed, a,
                                  NULL);
  } else if (strcmp(name, "mode") == 0 && *arg != '\0' && v2(a)) {
    rv = send_config(a, "mode", arg); /* v2: the mode is a config option */
  } else if (strcmp(name, "mode") == 0 && *arg != '\0') {
    rv = acp_client_set_mode(a->client, a->session_id, arg, on_cmd_ok, a, NULL);
  } else if (strcmp(name, "config") == 0 && *arg != '\0' && *arg2 != '\0') {
    rv = send_config(a, arg, arg2);
  } else if (strcmp(name, "auth") == 0 && *arg != '\0' && v2(a)) {
    rv = acp_client_auth_login(a->client, arg, on_cmd_ok, a, NULL);
  } else if (strcmp(name, "auth") == 0 && *arg != '\0') {
    rv = acp_client_authenticate(a->client, arg, on_cmd_ok, a, NULL);
  } else if (strcmp(name, "title") == 0 && *arg != '\0') {
    rv = acp_client_session_set_title(a->client, a->session_id, arg, on_cmd_ok,
                                      a, NULL);
  } else if (strcmp(name, "cancel-tool") == 0 && *arg != '\0') {
    /* Idle: no turn runs, so no call can be cancelled; the agent says so
     * (-32602), which is what the user learns. During a turn the line is
     * taken at once (turn_line). */
    rv = acp_client_tool_call_cancel(a->client, a->session_id, arg, on_cmd_ok,
                                     a, NULL);
  } else if (strcmp(name, "cancel") == 0) {
    rv = acp_client_cancel(a->client, a->session_id);
    note(a, "sent session/cancel (Ctrl-C cancels a running turn)\n");
    cmd_finished(a);
    return;
  } else if (agent_has_command(a, name, nlen)) {
    a->state = ST_IDLE;
    name[nlen] = sep;
    send_prompt(a, line, len, false);
    return;
  } else {
    size_t i;
    bool known = false;
    for (i = 0; i < NBUILTIN; i++)
      known = known || strcmp(builtin_cmds[i], name) == 0;
    if (known)
      note(a, "/%s: missing argument (see /help)\n", name);
    else
      note(a,
           "unknown command /%s (/help lists them; //%s sends it to the "
           "agent as is)\n",
           name, name);
    cmd_finished(a);
    return;
  }
  if (rv != 0) {
    note(a, "/%s: cannot send the request\n", name);
    cmd_finished(a);
  }
}

/* MARK: - Input */

static void handle_line(capp *a, char *line, size_t len) {
  while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n'))
    len--;
  if (a->perm != NULL) {
    answer_permission(a, line, len);
  } else if (a->elicit != NULL) {
    answer_elicitation(a, line, len);
  } else if (a->state == ST_IDLE && a->interactive) {
    if (len == 0) {
      show_prompt(a);
      return;
    }
    if ((len == 5 && memcmp(line, "/quit", 5) == 0)) {
      app_quit(a, CLI_EXIT_OK);
      return;
    }
    if (a->fancy && line[0] == '/') {
      line[len] = '\0';
      slash_command(a, line, len);
      return;
    }
    send_prompt(a, line, len, false);
  }
}

static int on_tool_cancel_done(acp_client *client, const acp_rpc_msg *msg,
                               void *ud) {
  capp *a = ud;

  (void)client;
  if (msg->result != NULL)
    note(a, "[cancel-tool] accepted\n");
  else
    note(a, "[cancel-tool] refused: error %lld: %.*s\n",
         (long long)msg->error_code, (int)msg->error_message_len,
         msg->error_message ? msg->error_message : "");
  return 0;
}

/* The line is `/cancel-tool ID` (blanks around ID ignored); *id, *n: ID. */
static bool is_cancel_tool(const char *line, size_t len, const char **id,
                           size_t *n) {
  static const char cmd[] = "/cancel-tool";
  const char *p = line + sizeof(cmd) - 1, *end = line + len;

  while (end > line && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' ||
                        end[-1] == '\t'))
    end--;
  if ((size_t)(end - line) < sizeof(cmd) ||
      memcmp(line, cmd, sizeof(cmd) - 1) != 0 || (*p != ' ' && *p != '\t'))
    return false;
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  *id = p;
  *n = (size_t)(end - p);
  return *n > 0;
}

/*
 * During a v2 turn, `/cancel-tool ID` lines are taken at once (the call to
 * cancel is running now); other lines wait for the turn to end, in order.
 * Sends tool_call/cancel; the agent's tool_call_update (status cancelled)
 * and its answer are shown as they come. Pipe input; the line editor has
 * its own way (tty_turn_line).
 */
static void take_turn_lines(capp *a) {
  size_t at = 0;

  while (at < a->line_len) {
    char *l = a->line + at;
    char *nl = memchr(l, '\n', a->line_len - at);
    size_t n;
    const char *id;
    size_t idn;

    if (nl == NULL)
      break;
    n = (size_t)(nl - l) + 1;
    if (!is_cancel_tool(l, n, &id, &idn)) {
      at += n;
      continue;
    }
    {
      char *tid = strndup(id, idn);
      if (tid == NULL)
        return;
      note(a, "[cancel-tool] %s\n", tid);
      if (acp_client_tool_call_cancel(a->client, a->session_id, tid,
                                      on_tool_cancel_done, a, NULL) != 0)
        note(a, "[cancel-tool] cannot send tool_call/cancel\n");
      free(tid);
    }
    memmove(l, l + n, a->line_len - at - n);
    a->line_len -= n;
  }
}

static void cancel_turn(capp *a);

/* A turn runs in the line editor: it keeps reading (prompt "turn> ") so
 * that /cancel and /cancel-tool ID can be typed, not only Ctrl-C. */
static bool tty_turn_reads(const capp *a) {
  return a->tty != NULL && !a->closing && a->state == ST_PROMPT &&
         a->perm == NULL && a->elicit == NULL && a->session_id != NULL;
}

/* A line typed in the editor while a turn runs: /cancel cancels the turn
 * as Ctrl-C does, /cancel-tool ID (v2) one call; anything else is not
 * sent (a prompt cannot start during a turn) and the user is told so; the
 * editor's history keeps it for Up. */
static void tty_turn_line(capp *a, const char *line, size_t len) {
  const char *id;
  size_t idn;

  while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t'))
    len--;
  if (is_cancel_tool(line, len, &id, &idn)) {
    char *tid;

    if (!v2(a)) {
      note(a, "[cancel-tool] needs ACP v2 (tool_call/cancel); /cancel "
              "cancels the turn\n");
      return;
    }
    tid = strndup(id, idn);
    if (tid == NULL)
      return;
    note(a, "[cancel-tool] %s\n", tid);
    if (acp_client_tool_call_cancel(a->client, a->session_id, tid,
                                    on_tool_cancel_done, a, NULL) != 0)
      note(a, "[cancel-tool] cannot send tool_call/cancel\n");
    free(tid);
    return;
  }
  if (len == 7 && memcmp(line, "/cancel", 7) == 0) {
    cancel_turn(a);
    return;
  }
  if (len > 0)
    note(a, "not sent: a turn is running (/cancel or Ctrl-C cancels it, "
            "/cancel-tool ID one tool call; Up recalls the line)\n");
}

/* A v2 turn runs in the interactive front end: /cancel-tool may come. */
static bool takes_turn_lines(const capp *a) {
  return !a->closing && a->fancy && a->tty == NULL && a->state == ST_PROMPT &&
         a->perm == NULL && a->elicit == NULL && v2(a) && a->session_id != NULL;
}

/* Whether a line of input would be used now. */
static bool wants_line(const capp *a) {
  return !a->closing && (a->perm != NULL || a->elicit != NULL ||
                         (a->interactive && a->state == ST_IDLE));
}

/* Use buffered lines (at end of input also an unterminated last one) while
 * something wants them. Lines typed ahead, or piped in all at once, wait
 * in the buffer until the running turn ends. */
static void drain_lines(capp *a) {
  while (wants_line(a) && a->line_len > 0) {
    char *nl = memchr(a->line, '\n', a->line_len);
    size_t n;
    char *copy;

    if (nl == NULL && !a->stdin_eof)
      break;
    n = nl ? (size_t)(nl - a->line) + 1 : a->line_len;
    copy = malloc(n + 1);
    if (copy == NULL)
      break;
    memcpy(copy, a->line, n);
    copy[n] = '\0';
    memmove(a->line, a->line + n, a->line_len - n);
    a->line_len -= n;
    handle_line(a, copy, n);
    free(copy);
  }
}

/* End of input with nothing buffered: answer what is still waiting. */
static void stdin_ended(capp *a) {
  if (a->perm != NULL) {
    note(a, "no input to answer with; rejecting\n");
    answer_permission(a, "", 0);
  }
  if (a->elicit != NULL) {
    acp_client_respond(a->client, a->elicit, "{\"action\":\"cancel\"}", 19);
    a->elicit = NULL;
  }
  if (a->interactive && a->state == ST_IDLE)
    app_quit(a, CLI_EXIT_OK);
}

static void stdin_read(acp_uv_link *link, int status, const char *data,
                       size_t len, void *ud) {
  capp *a = ud;

  (void)link;
  if (status != 0) {
    a->stdin_eof = true;
    acp_uv_link_read_stop(a->in);
  } else {
    char *nb = realloc(a->line, a->line_len + len + 1);
    if (nb == NULL)
      return;
    a->line = nb;
    memcpy(a->line + a->line_len, data, len);
    a->line_len += len;
  }
  read_stdin(a);
}

/* Something wants a line: use a buffered one, or read more. Reading stops
 * while nothing waits for the user. */
static void read_stdin(capp *a) {
  if (a->tty != NULL) {
    if (tty_turn_reads(a) && !a->stdin_eof)
      ctty_read(a->tty, "turn> ");
    else if (!wants_line(a))
      ctty_stop(a->tty);
    else if (a->stdin_eof)
      stdin_ended(a);
    else
      ctty_read(a->tty, a->perm ? "choose: " : a->elicit ? "answer: " : "> ");
    return;
  }
  drain_lines(a);
  if (takes_turn_lines(a)) {
    take_turn_lines(a);
    if (!a->stdin_eof && a->in == NULL &&
        acp_uv_link_new_fds(&a->in, &a->loop, 0, -1, NULL) != 0)
      a->stdin_eof = true;
    if (!a->stdin_eof && !acp_uv_link_is_reading(a->in))
      acp_uv_link_read_start(a->in, stdin_read, a);
    return;
  }
  if (!wants_line(a)) {
    if (a->in != NULL && acp_uv_link_is_reading(a->in))
      acp_uv_link_read_stop(a->in);
    return;
  }
  if (!a->stdin_eof && a->in == NULL &&
      acp_uv_link_new_fds(&a->in, &a->loop, 0, -1, NULL) != 0)
    a->stdin_eof = true;
  if (a->stdin_eof) {
    stdin_ended(a);
    return;
  }
  if (!acp_uv_link_is_reading(a->in))
    acp_uv_link_read_start(a->in, stdin_read, a);
}

/* A line from the editor (NULL: Ctrl-D). */
static void tty_line(void *ud, const char *line, size_t len) {
  capp *a = ud;
  char *copy;

  if (line == NULL) {
    a->stdin_eof = true;
    stdin_ended(a);
    return;
  }
  if (tty_turn_reads(a)) {
    tty_turn_line(a, line, len);
    read_stdin(a);
    return;
  }
  copy = strndup(line, len);
  if (copy == NULL)
    return;
  handle_line(a, copy, len);
  free(copy);
  read_stdin(a);
}

/* The history file: $XDG_STATE_HOME/acp/history, else
 * ~/.local/state/acp/history; NULL when neither can be named. */
static char *history_path(void) {
  const char *x = getenv("XDG_STATE_HOME");
  const char *home = getenv("HOME");
  char buf[PATH_MAX];
  int n;

  if (x != NULL && x[0] == '/')
    n = snprintf(buf, sizeof(buf), "%s/acp/history", x);
  else if (home != NULL && home[0] != '\0')
    n = snprintf(buf, sizeof(buf), "%s/.local/state/acp/history", home);
  else
    return NULL;
  return n > 0 && (size_t)n < sizeof(buf) ? strdup(buf) : NULL;
}

/* MARK: - Lifecycle */

static void agent_exited(acp_uv_process *p, int64_t status, int sig, void *ud) {
  capp *a = ud;
  size_t n;
  const char *tail;

  (void)p;
  /* After a failure (e.g. the connection closed first) a bad exit status
   * still says why; after a normal quit it is not news. */
  if (a->closing &&
      (a->exit_code != CLI_EXIT_FAILURE || (status == 0 && sig == 0)))
    return;
  tail = acp_uv_process_tail(p, &n);
  (void)tail;
  note(a, "the agent exited (status %lld, signal %d)\n", (long long)status,
       sig);
  app_quit(a, CLI_EXIT_FAILURE);
}

static void agent_stopped(acp_uv_process *p, void *ud) {
  (void)ud;
  acp_uv_process_close(p, NULL);
}

static void app_quit(capp *a, int code) {
  term *t;

  if (a->closing)
    return;
  a->closing = true;
  a->exit_code = code;
  a->state = ST_DONE;
  cancel_questions(a);
  while ((t = a->terms) != NULL)
    term_free(a, t);
  acp_uv_signals_close(a->sig);
  a->sig = NULL;
  ctty_free(a->tty);
  a->tty = NULL;
  if (a->in != NULL) {
    acp_uv_link_close(a->in, 0, NULL, NULL);
    a->in = NULL;
  }
  acp_uv_rpc_close(a->rpc, NULL);
  a->rpc = NULL;
  if (a->remote != NULL) {
    acp_uv_link_close(a->remote, 1000, NULL, NULL);
    a->remote = NULL;
  }
  if (a->agent != NULL) {
    if (acp_uv_process_shutdown(a->agent, agent_stopped) != 0)
      acp_uv_process_close(a->agent, NULL);
    a->agent = NULL;
  }
}

static void on_rpc_end(acp_uv_rpc *r, int reason, void *ud) {
  capp *a = ud;

  (void)r;
  (void)reason;
  if (!a->closing)
    note(a, "the agent closed the connection\n");
  app_quit(a, a->state == ST_DONE ? a->exit_code : CLI_EXIT_FAILURE);
}

/* The client sent session/cancel: its tool calls not finished yet are
 * shown cancelled now, as ACP asks of a client (protocol/v1/prompt-turn,
 * Cancellation: it "SHOULD preemptively mark all non-finished tool calls
 * pertaining to the current turn as cancelled as soon as it sends the
 * session/cancel notification"). */
static void cancel_tools(capp *a) {
  tool_title *t;

  for (t = a->tools; t != NULL; t = t->next) {
    if (t->cancelled)
      continue;
    t->cancelled = true;
    note(a, "[tool] %s: cancelled\n", t->title);
  }
}

/* A cancelled turn's questions are answered "cancelled", as ACP asks of
 * a client that cancels: the permission outcome, the elicitation action. */
static void cancel_questions(capp *a) {
  if (a->perm != NULL) {
    acp_client_respond_permission(a->client, a->perm, NULL);
    a->perm = NULL;
    free(a->perm_options);
    a->perm_options = NULL;
  }
  if (a->elicit != NULL) {
    acp_client_respond(a->client, a->elicit, "{\"action\":\"cancel\"}", 19);
    a->elicit = NULL;
  }
}

/* Ctrl-C, or /cancel typed during the turn: session/cancel, and what the
 * client itself must do then. */
static void cancel_turn(capp *a) {
  if (a->cancels > 0) {
    note(a, "the turn is being cancelled (Ctrl-C again quits)\n");
    return;
  }
  a->cancels++;
  note(a, "cancelling the turn (again to quit)\n");
  acp_client_cancel(a->client, a->session_id);
  cancel_tools(a);
  cancel_questions(a);
}

static void on_signal(acp_uv_signals *sig, int signum, void *ud) {
  capp *a = ud;

  (void)sig;
  if (signum == SIGINT && a->tty != NULL && a->state != ST_PROMPT &&
      ctty_reading(a->tty)) {
    ctty_interrupt(a->tty); /* at the prompt: drop the line */
    return;
  }
  if (signum == SIGINT && a->state == ST_CMD && a->cancels == 0) {
    /* A slash command's request has no turn to cancel: wait for it. */
    a->cancels++;
    note(a, "^C: still waiting for the answer to %s (again to quit)\n",
         running_cmd);
    return;
  }
  if (signum == SIGINT && a->state == ST_PROMPT && a->cancels == 0) {
    note(a, "^C: ");
    cancel_turn(a);
    return;
  }
  app_quit(a, signum == SIGINT ? 130 : 143);
}

/* --verbose: how each TLS socket was set up (the remote client's log). */
static void on_remote_log(const char *line, void *ud) {
  (void)ud;
  fprintf(stderr, "acp client: %s\n", line);
}

static void on_remote(acp_uv_link *link, int status, const char *detail,
                      void *ud) {
  capp *a = ud;

  if (status == 0) {
    const char *ver = cli_remote->http_version(link);
    if (a->verbose && ver && a->want_h2 && strcmp(ver, "HTTP/2") != 0)
      fprintf(stderr, "acp client: the server's ALPN chose http/1.1: "
                      "Streamable HTTP over HTTP/1.1\n");
    if (a->verbose)
      fprintf(stderr, "acp client: connected over %s (Acp-Connection-Id %s)\n",
              ver ? ver : "WebSocket", detail);
    if (!a->quiet && a->interactive)
      note(a, "connected (Acp-Connection-Id %s)\n", detail);
    return;
  }
  cli_err("client", "%s", detail);
  app_quit(a, CLI_EXIT_FAILURE);
}

int cmd_client(int argc, char **argv) {
  capp a;
  acp_client_callbacks *cbs = NULL;
  acp_uv_process_options *popts = NULL;
  const char *default_agent[3];
  const char *const *agent_argv;
  const char *cwd = ".";
  const char *url = NULL;
  int transport = ACP_REMOTE_AUTO;
  const char *token = getenv("ACP_TOKEN");
  const char *headers[33];
  size_t nheaders = 0;
  const char *v;
  const char *tls_ca = NULL, *tls_cert = NULL, *tls_key = NULL;
  acp_remote_tls *tls = NULL;
  const char *color = "auto";
  const char *agent_name = NULL;
  const char *agents_file = NULL;
  char agents_path[PATH_MAX];
  char **named_agent = NULL;
  char *hist = NULL;
  bool force_interactive = false;
  int i;
  int ok;
  int rv = CLI_EXIT_FAILURE;
  int uverr = 0;
  static const char caps[] =
      "{\"fs\":{\"readTextFile\":true,\"writeTextFile\":true},"
      "\"terminal\":true,\"elicitation\":{\"form\":{},\"url\":{}},"
      "\"session\":{\"configOptions\":{\"boolean\":{}}}}";
  char info[128];
  char tls_err[256];

  memset(&a, 0, sizeof(a));
  a.at_line_start = true;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(client_usage, stdout);
      return CLI_EXIT_OK;
    } else if (strcmp(argv[i], "--yes") == 0 || strcmp(argv[i], "-y") == 0) {
      a.yes = true;
    } else if (strcmp(argv[i], "--protocol-v2") == 0) {
      a.protocol_v2 = true;
    } else if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) {
      a.quiet = true;
    } else if (strcmp(argv[i], "--mcp-tools") == 0) {
      a.mcp_tools = true;
    } else if (strcmp(argv[i], "--interactive") == 0) {
      force_interactive = true;
    } else if ((v = cli_opt_value(argc, argv, &i, "--color", &ok)) != NULL) {
      color = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--agent", &ok)) != NULL) {
      agent_name = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--agents-file", &ok)) !=
               NULL) {
      agents_file = v;
    } else if (strcmp(argv[i], "-p") == 0) {
      if (i + 1 >= argc) {
        cli_err("client", "-p needs a prompt");
        return CLI_EXIT_USAGE;
      }
      a.prompt = argv[++i];
    } else if ((v = cli_opt_value(argc, argv, &i, "--prompt", &ok)) != NULL) {
      a.prompt = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--cwd", &ok)) != NULL) {
      cwd = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--url", &ok)) != NULL) {
      url = v;
    } else if (strcmp(argv[i], "--ws") == 0) {
      transport = ACP_REMOTE_WEBSOCKET;
    } else if (strcmp(argv[i], "--http") == 0) {
      transport = ACP_REMOTE_HTTP;
    } else if (strcmp(argv[i], "--h2") == 0) {
      a.want_h2 = true;
    } else if (strcmp(argv[i], "--verbose") == 0) {
      a.verbose = true;
    } else if ((v = cli_opt_value(argc, argv, &i, "--token", &ok)) != NULL) {
      token = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--ca", &ok)) != NULL) {
      tls_ca = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--cert", &ok)) != NULL) {
      tls_cert = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--key", &ok)) != NULL) {
      tls_key = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--header", &ok)) != NULL) {
      if (nheaders == 32) {
        cli_err("client", "too many --header");
        return CLI_EXIT_USAGE;
      }
      headers[nheaders++] = v;
    } else {
      if (ok < 0)
        return CLI_EXIT_USAGE;
      cli_err("client", "unknown option '%s' (see acp client --help)", argv[i]);
      return CLI_EXIT_USAGE;
    }
  }
  if (realpath(cwd, a.cwd) == NULL) {
    cli_err("client", "--cwd %s: %s", cwd, strerror(errno));
    return CLI_EXIT_USAGE;
  }
  if (url != NULL && i < argc) {
    cli_err("client", "--url and an agent command exclude each other");
    return CLI_EXIT_USAGE;
  }
  if (a.want_h2 && transport != ACP_REMOTE_HTTP) {
    cli_err("client", "--h2 goes with --http (Streamable HTTP)");
    return CLI_EXIT_USAGE;
  }
  if (transport != ACP_REMOTE_AUTO && url == NULL) {
    cli_err("client", "--ws and --http go with --url");
    return CLI_EXIT_USAGE;
  }
  if (transport == ACP_REMOTE_HTTP && strncmp(url, "http://", 7) != 0 &&
      strncmp(url, "https://", 8) != 0) {
    cli_err("client",
            "--http needs an http:// or https:// URL (ws:// is WebSocket)");
    return CLI_EXIT_USAGE;
  }
  if ((tls_ca || tls_cert || tls_key) &&
      (url == NULL ||
       (strncmp(url, "wss://", 6) != 0 && strncmp(url, "https://", 8) != 0))) {
    cli_err("client", "--ca, --cert and --key go with a wss:// or https:// "
                      "--url");
    return CLI_EXIT_USAGE;
  }
  if ((tls_cert != NULL) != (tls_key != NULL)) {
    cli_err("client", "--cert and --key go together");
    return CLI_EXIT_USAGE;
  }
  headers[nheaders] = NULL;
  if (i < argc) {
    agent_argv = (const char *const *)(argv + i);
  } else {
    default_agent[0] = cli_self_path();
    default_agent[1] = "agent";
    default_agent[2] = NULL;
    agent_argv = default_agent;
  }
  if (strcmp(color, "always") == 0) {
    a.color = true;
    a.md_on = true;
  } else if (strcmp(color, "auto") == 0) {
    v = getenv("NO_COLOR");
    a.color = isatty(2) && (v == NULL || v[0] == '\0');
    /* Markdown styling goes to stdout: only when that is a terminal too
     * (a pipe or a file gets the agent's bytes unchanged). */
    a.md_on = a.color && isatty(1);
  } else if (strcmp(color, "never") != 0) {
    cli_err("client", "--color must be auto, always or never");
    return CLI_EXIT_USAGE;
  }
  md_init(&a.md, md_emit, &a);
  if (agent_name != NULL && i < argc) {
    cli_err("client", "--agent and an agent command exclude each other");
    return CLI_EXIT_USAGE;
  }
  if (agent_name != NULL && url != NULL) {
    cli_err("client", "--agent and --url exclude each other");
    return CLI_EXIT_USAGE;
  }
  if (agent_name != NULL) {
    if (agents_file == NULL) {
      if (client_agents_default_path(agents_path, sizeof(agents_path)) != 0) {
        cli_err("client", "no agents file: set XDG_CONFIG_HOME or HOME, or "
                          "use --agents-file");
        return CLI_EXIT_USAGE;
      }
      agents_file = agents_path;
    }
    if (client_agents_find(agents_file, agent_name, &named_agent) != 0)
      return CLI_EXIT_USAGE;
    agent_argv = (const char *const *)named_agent;
  }
  a.interactive = a.prompt == NULL;
  /* The front end: on a terminal, or asked for. */
  a.fancy = a.interactive && (force_interactive || isatty(0));
  if (cli_remote == NULL &&
      (url != NULL || (a.fancy && isatty(0) && cli_helper_has_editor))) {
    /* The remote transports and the line editor are in acp-remote (cli.h):
     * the command runs there, from the start (nothing is done yet). */
    rv = cli_exec_beside("acp-remote", argc, argv);
    if (url != NULL) {
      client_agents_free_argv(named_agent);
      return rv;
    }
    /* On a terminal, plain lines still work (the note below says why). */
  }
  acp_uv_ignore_sigpipe();
  if (uv_loop_init(&a.loop) != 0)
    return CLI_EXIT_FAILURE;
  if (acp_json_writer_new(&a.w, 0, NULL) != 0 ||
      acp_client_callbacks_new(&cbs) != 0 ||
      acp_uv_process_options_new(&popts, NULL) != 0)
    goto cleanup;
  acp_client_callbacks_set_on_session_update(cbs, on_update);
  acp_client_callbacks_set_on_request_permission(cbs, on_permission);
  acp_client_callbacks_set_on_fs_read_text_file(cbs, on_read_file);
  acp_client_callbacks_set_on_fs_write_text_file(cbs, on_write_file);
  acp_client_callbacks_set_on_terminal_create(cbs, on_term_create);
  acp_client_callbacks_set_on_terminal_output(cbs, on_term_output);
  acp_client_callbacks_set_on_terminal_wait_for_exit(cbs, on_term_wait);
  acp_client_callbacks_set_on_terminal_kill(cbs, on_term_kill);
  acp_client_callbacks_set_on_terminal_release(cbs, on_term_release);
  acp_client_callbacks_set_on_elicitation_create(cbs, on_elicitation);
  acp_client_callbacks_set_on_elicitation_complete(cbs,
                                                   on_elicitation_complete);
  acp_client_callbacks_set_on_auth_status_update(cbs, on_auth_status_update);
  if (a.mcp_tools) {
    acp_client_callbacks_set_on_mcp_connect(cbs, on_mcp_request);
    acp_client_callbacks_set_on_mcp_message(cbs, on_mcp_request);
    acp_client_callbacks_set_on_mcp_disconnect(cbs, on_mcp_request);
    acp_client_callbacks_set_on_mcp_message_notification(cbs,
                                                         on_mcp_notification);
    acp_client_callbacks_set_on_ext_request(cbs, on_mcp_request);
    acp_client_callbacks_set_on_ext_notification(cbs, on_mcp_notification);
    acp_client_callbacks_set_on_cancel_request(cbs, on_cancel_request);
  } else {
    acp_client_callbacks_set_on_mcp_message(cbs, on_mcp_message);
  }
  if (acp_arena_new(&a.arena, NULL) != 0 ||
      acp_client_new(&a.client, cbs, &a, NULL, NULL) != 0)
    goto cleanup;
  if (a.protocol_v2 &&
      acp_client_set_max_protocol_version(a.client, ACP_PROTOCOL_V2) != 0)
    goto cleanup;
  if (a.mcp_tools && mcp_server_create(&a) != 0)
    goto cleanup;
  if (url != NULL) {
    acp_remote_client_options ro = ACP_REMOTE_CLIENT_OPTIONS_INIT;
    ro.token = token;
    ro.headers = headers;
    ro.transport = a.want_h2 ? ACP_REMOTE_HTTP2 : transport;
    ro.log = a.verbose ? on_remote_log : NULL;
    if ((tls_ca || tls_cert) &&
        cli_remote->tls_new(&tls, tls_ca, tls_cert, tls_key, tls_err,
                            sizeof(tls_err)) != 0) {
      cli_err("client", "%s", tls_err);
      rv = CLI_EXIT_USAGE;
      goto cleanup;
    }
    ro.tls = tls;
    int crv =
        cli_remote->connect(&a.remote, &a.loop, url, &ro, on_remote, &a, NULL);
    if (tls != NULL)
      cli_remote->tls_free(tls); /* the connection keeps its reference */
    tls = NULL;
    if (crv != 0) {
      cli_err("client", "--url %s: %s", url,
              "not a ws://, wss://, http:// or https:// URL (or a bad "
              "--header)");
      rv = CLI_EXIT_USAGE;
      goto cleanup;
    }
  } else {
    acp_uv_process_options_set_argv(popts, agent_argv);
    acp_uv_process_options_set_cwd(popts, a.cwd);
    acp_uv_process_options_set_exit_cb(popts, agent_exited);
    if (acp_uv_process_spawn(&a.agent, &a.loop, popts, &a, NULL, &uverr) != 0) {
      cli_err("client", "cannot start the agent '%s': %s", agent_argv[0],
              uverr ? uv_strerror(uverr) : "error");
      goto cleanup;
    }
  }
  if (acp_uv_rpc_new(&a.rpc, a.remote ? a.remote : acp_uv_process_link(a.agent),
                     acp_client_session(a.client), on_rpc_end, &a, NULL) != 0)
    goto cleanup;
  acp_uv_signals_new(&a.sig, &a.loop, on_signal, &a, NULL);
  if (a.fancy && isatty(0)) {
    if (!ctty_available())
      note(&a, cli_helper_has_editor
                   ? "interactive editing is unavailable (acp-remote did "
                     "not start); reading plain lines\n"
                   : "interactive editing is unavailable (acp was built "
                     "without libedit); reading plain lines\n");
    else if (ctty_new(&a.tty, &a.loop, (hist = history_path()), tty_line, &a) !=
             0)
      note(&a, "cannot start the line editor; reading plain lines\n");
    free(hist);
    update_completion(&a);
  }
  snprintf(info, sizeof(info),
           "{\"name\":\"acp-client\",\"title\":\"libacp terminal client\","
           "\"version\":\"%s\"}",
           ACP_VERSION);
  if (acp_client_initialize(a.client, caps, sizeof(caps) - 1, info,
                            strlen(info), on_initialized, &a, NULL) != 0)
    goto cleanup;
  uv_run(&a.loop, UV_RUN_DEFAULT);
  rv = a.exit_code;
cleanup:
  if (tls != NULL)
    cli_remote->tls_free(tls);
  if (!a.closing)
    app_quit(&a, rv);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  uv_loop_close(&a.loop);
  acp_client_free(a.client);
  acp_arena_free(a.arena);
  /* After the client, which may hold response callbacks into it. */
  acp_mcp_acp_provider_free(a.prov);
  acp_mcp_server_free(a.mcp_server);
  acp_client_callbacks_free(cbs);
  acp_uv_process_options_free(popts);
  acp_json_writer_free(a.w);
  while (a.tools != NULL) {
    tool_title *tt = a.tools;
    a.tools = tt->next;
    free(tt->id);
    free(tt->title);
    free(tt);
  }
  client_agents_free_argv(named_agent);
  free_agent_cmds(&a);
  free(pending_sid);
  pending_sid = NULL;
  free(a.session_id);
  free(a.line);
  free(a.perm_options);
  return rv;
}
