/*
 * `acp agent`: the reference ACP agent. Deterministic, no model: a prompt's
 * text is a small script (agent_script.h) that exercises the protocol, so
 * clients, proxies and tests can see every feature working.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "acp/agent.h"
#include "acp/json.h"
#include "acp/mcp_acp.h"
#include "acp/methods.h"
#include "acp/types.h"
#include "acp/types_v2.h"
#include "acp/uv.h"
#include "acp/version.h"
#include "agent_script.h"
#include "agent_nes.h"
#include "agent_store.h"
#include "cli.h"

#define BIG_CHUNK (64 * 1024)
#define LIST_PAGE 50
#define KILL_GRACE_MS 2000 /* --kill-grace default */

static const char agent_usage[] =
    "usage: acp agent [--echo] [--name NAME] [--mcp-acp native|off]\n"
    "                 [--mcp-http on|off] [--state-dir DIR] [--unstable]\n"
    "                 [--protocol-v2] [--read-spin-us N] [--no-read-block]\n"
    "                 [--kill-grace MS]\n"
    "\n"
    "The reference ACP agent, speaking ACP (JSON-RPC, one message per line) "
    "on\n"
    "stdin/stdout. Deterministic: it has no model; each prompt is a script.\n"
    "\n"
    "options:\n"
    "  --echo       answer every prompt with its text in one\n"
    "               agent_message_chunk and end the turn (benchmark workload)\n"
    "  --name NAME  the agentInfo.name to report (default acp-agent)\n"
    "  --mcp-acp native|off\n"
    "               native (default): advertise mcpCapabilities.acp and\n"
    "               consume MCP servers declared {\"type\":\"acp\"} over\n"
    "               the ACP connection (/mcp-tools, /mcp-call SERVER TOOL\n"
    "               {json}), in any shape: mcp/connect, _mcp/connect, or\n"
    "               the connectionless mcp/message (MCP 2026-07-28) when\n"
    "               a connect is answered -32601; off: do not\n"
    "  --mcp-http on|off\n"
    "               on (default): advertise mcpCapabilities.http and .sse\n"
    "               and reach such servers through `acp mcp relay`; off: do\n"
    "               not advertise them\n"
    "  --state-dir DIR\n"
    "               keep each session in DIR/<sessionId>.json (cwd, MCP\n"
    "               servers, mode, config, title, history), rewritten\n"
    "               atomically as it changes, so load, resume and list work\n"
    "               across restarts; DIR is created if missing. One agent\n"
    "               process per DIR at a time. An unreadable file is\n"
    "               reported on stderr and that session answers -32603\n"
    "  --unstable   also advertise and serve the unstable methods:\n"
    "               session/fork, session/set_title, session/archive,\n"
    "               session/unarchive, session/status, auth/status (see the\n"
    "               unstable commands below), providers/* (provider main),\n"
    "               nes/* and document/* (nes/suggest turns each TODO of an\n"
    "               open document into a DONE edit suggestion)\n"
    "  --protocol-v2\n"
    "               speak the ACP v2 draft with a client that asks for 2\n"
    "               (initialize protocolVersion >= 2); others get 1. Under\n"
    "               v2 the v1-only methods (session/load, session/set_mode,\n"
    "               authenticate, fs/*, terminal/*) are not served;\n"
    "               auth/login and auth/logout are; a prompt is accepted at\n"
    "               once and its turn ends with state_update idle\n"
    "  --read-spin-us N\n"
    "               before sleeping, poll stdin for up to N microseconds,\n"
    "               yielding the CPU: a message within N skips the sleep\n"
    "               and the wake-up. Backs off while messages come later,\n"
    "               never spins while the machine has no idle CPU; none\n"
    "               while idle (default 20, 0: off; docs/decisions.md)\n"
    "  --no-read-block\n"
    "               wait for input in the event loop (epoll) even when\n"
    "               stdin is all there is to wait for; by default the agent\n"
    "               then waits in read(2) on its stdin pipe, as cat does:\n"
    "               one system call a message fewer\n"
    "  --kill-grace MS\n"
    "               a command a v2 /run runs that is stopped (session/cancel,\n"
    "               terminal/cancel, end of input) gets SIGTERM, then SIGKILL\n"
    "               if it has not exited MS milliseconds later (default 2000;\n"
    "               0: SIGKILL at once); its exit is reported either way\n"
    "  -h, --help   show this help\n"
    "\n"
    "Sessions support load (history is replayed), resume, list, delete, "
    "close,\n"
    "modes (ask, code) and config options (model: fast|smart, verbose: bool).\n"
    "Session ids are sess_ and 32 hex digits from the OS's random source,\n"
    "unique across processes; with ACP_AGENT_SEQUENTIAL_IDS=1 in the\n"
    "environment they are sess_1, sess_2... (for tests).\n"
    "\n";

typedef struct app app;
typedef struct asession asession;
typedef struct turn turn;
typedef struct mcpsrv mcpsrv;
typedef struct aterm aterm;

struct asession {
  char *id;
  char *cwd;
  char *title;
  char mode[16];
  char model[16];
  bool verbose;
  acp_json_writer *history; /* session/update payloads, one per line */
  char *mcp_json;           /* the last mcpServers array given (raw) */
  bool dirty;               /* changed since last saved (--state-dir) */
  bool queued;              /* on a->dirty_list */
  bool archived;            /* session/archive (--unstable) */
  bool open; /* in memory for a connection (session/status): not after a
              * restart, close or archive until new, load or resume */
  turn *turn;
  mcpsrv *mcp;           /* MCP-over-ACP servers declared for this session */
  asession *next, *prev; /* a->sessions */
  asession *hnext;       /* in a->by_id's bucket */
  asession *dnext;       /* in a->dirty_list */
};

struct turn {
  app *a;
  asession *s;
  acp_agent_request *req;
  script sc;
  size_t pc;
  int sub;      /* position inside a multi-call step */
  int refs;     /* session + outstanding calls + open timer */
  bool done;    /* answered; nothing more is sent */
  bool waiting; /* a call, timer or cancel is awaited */
  bool timer_init;
  uv_timer_t timer;
  char tool_id[32];
  char *terminal_id;
  char exit_note[64];       /* /run: how the command failed, or "" */
  char *stop_reason;        /* set by /stop */
  acp_mcp_client *mcp_call; /* /mcp-call: the client of the call in flight */
  int64_t mcp_call_id;
  char *usage;      /* /turn-usage: the PromptResponse's usage, or NULL */
  bool kill;        /* /kill: terminal/kill after create */
  char *elicit_id;  /* /elicit-url: the elicitation to complete */
  bool cancellable; /* /cancellable: tool_id runs until cancelled */
  aterm *term;      /* v2 /run: the process the agent runs, or NULL */
  bool asking;      /* a session/request_permission awaits its answer */
  bool cancelling;  /* v2 session/cancel: ends when the work stopped */
};

/* v2 /run: v2 has no client terminals, so the agent runs the command
 * itself and shows it as a terminal it owns (terminal_update with
 * capabilities.cancel, terminal_output_chunk, exitStatus). */
struct aterm {
  turn *t; /* holds a reference until both handles are closed */
  uv_process_t proc;
  uv_pipe_t out;
  uv_timer_t grace; /* SIGTERM sent: SIGKILL when it fires (aterm_stop) */
  bool grace_init;
  int open; /* handles not closed yet */
  bool exited, eof, reported, cancelled;
  int64_t exit_status;
  int term_signal;
  char id[32];
};

struct app {
  uv_loop_t loop;
  acp_agent *agent;
  acp_uv_link *link;
  acp_uv_rpc *rpc;
  acp_uv_signals *sig;
  acp_json_writer *w;
  char *scratch; /* prompt text joined from several blocks */
  size_t scratch_len;
  size_t scratch_cap;
  int end_reason; /* why the connection ended: 0 or an ACP_ERR_* */
  acp_json_doc *doc;
  acp_json_doc *hdoc;  /* on_update_sent: the update's kind */
  acp_json_doc *sdoc;  /* reading state files */
  acp_json_writer *sw; /* writing state files */
  acp_arena *arena;    /* decoded mcpServers entries (mcp_record_stdio) */
  bool echo;
  uint32_t spin_us;       /* --read-spin-us */
  bool no_block;          /* --no-read-block */
  uint64_t kill_grace_ms; /* --kill-grace */
  const char *name;
  bool fs_read, fs_write, terminal, elicitation;
  asession *sessions;
  /* Past 16 sessions, also by id (chained through hnext, by_id_cap
   * buckets, a power of two): finding one (every prompt, update and new
   * id's uniqueness check) searched the list, and 20,000 session/new took
   * 1.8 s. Below, the list costs less than hashing the id. */
  asession **by_id;
  size_t by_id_cap, nsessions;
  unsigned next_session;
  unsigned next_tool;
  unsigned next_term; /* v2 /run terminal ids */
  bool closing;
  bool mcp_acp_off;          /* --mcp-acp off */
  bool mcp_http_off;         /* --mcp-http off */
  acp_mcp_acp_consumer *mcp; /* consumes acp-type MCP servers */
  const char *state_dir;     /* --state-dir, or NULL */
  bool sequential_ids;       /* ACP_AGENT_SEQUENTIAL_IDS=1 */
  bool replaying;            /* session/load: sent updates are old ones */
  bool flush_init;
  uv_idle_t flush;       /* saves dirty sessions once per loop iteration */
  asession *dirty_list;  /* the sessions it will look at */
  struct broken *broken; /* state files that could not be restored */
  bool unstable;         /* --unstable */
  agent_nes *nes;        /* --unstable: providers, NES, documents */
  bool protocol_v2;      /* --protocol-v2: answer 2 to a client asking 2 */
  char auth_state[32];   /* what auth/status answers (/auth changes it) */
  unsigned next_msg;     /* /message ids */
  unsigned next_elicit;  /* /elicit-url ids */
};

/* A state file that could not be read back: its session answers with
 * `why` instead of being forgotten or silently replaced. */
struct broken {
  char *id;
  char *why;
  struct broken *next;
};

/* MARK: - Small helpers */

/* A member whose value is a string. */
static void kvs(acp_json_writer *w, const char *key, const char *value) {
  acp_json_write_keyz(w, key);
  acp_json_write_strz(w, value);
}

/* `{"content":[{"type":"content","content":{"type":"text","text":T}}]}`:
 * the extra members of a tool call update that carries some text. */
static void write_tool_text(acp_json_writer *w, const char *text) {
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "content");
  acp_json_write_arr_begin(w);
  acp_json_write_obj_begin(w);
  kvs(w, "type", "content");
  acp_json_write_keyz(w, "content");
  acp_json_write_obj_begin(w);
  kvs(w, "type", "text");
  kvs(w, "text", text);
  acp_json_write_obj_end(w);
  acp_json_write_obj_end(w);
  acp_json_write_arr_end(w);
  acp_json_write_obj_end(w);
}

static char *xstrndup(const char *s, size_t n) {
  char *p = malloc(n + 1);

  if (p == NULL) {
    fputs("acp agent: out of memory\n", stderr);
    exit(CLI_EXIT_FAILURE);
  }
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

static const char *wdata(app *a, size_t *len) {
  return acp_json_writer_data(a->w, len);
}

static asession **session_bucket(app *a, const char *id) {
  return &a->by_id[cli_fnv1a(id) & (a->by_id_cap - 1)];
}

static asession *find_session(app *a, const char *id) {
  asession *s;

  if (id == NULL)
    return NULL;
  if (a->by_id == NULL) {
    for (s = a->sessions; s != NULL; s = s->next)
      if (strcmp(s->id, id) == 0)
        return s;
    return NULL;
  }
  for (s = *session_bucket(a, id); s != NULL; s = s->hnext)
    if (strcmp(s->id, id) == 0)
      return s;
  return NULL;
}

/* Count s (just put on a->sessions) and index it once there are more
 * than 16: twice as many buckets as sessions at most, so a chain is
 * short. */
static void session_index(app *a, asession *s) {
  if (a->by_id == NULL && a->nsessions + 1 <= 16) {
    a->nsessions++;
    return;
  }
  if ((a->nsessions + 1) * 2 > a->by_id_cap) {
    size_t cap = a->by_id_cap ? a->by_id_cap * 2 : 64;
    free(a->by_id);
    a->by_id = calloc(cap, sizeof(*a->by_id));
    if (a->by_id == NULL)
      exit(CLI_EXIT_FAILURE);
    a->by_id_cap = cap;
    for (asession *x = a->sessions; x != NULL; x = x->next)
      if (x != s) {
        asession **b = session_bucket(a, x->id);
        x->hnext = *b;
        *b = x;
      }
  }
  asession **b = session_bucket(a, s->id);
  s->hnext = *b;
  *b = s;
  a->nsessions++;
}

static void session_unindex(app *a, asession *s) {
  if (a->by_id == NULL) {
    a->nsessions--;
    return;
  }
  for (asession **pp = session_bucket(a, s->id); *pp; pp = &(*pp)->hnext)
    if (*pp == s) {
      *pp = s->hnext;
      a->nsessions--;
      return;
    }
}

/* Resolve `path` against the session's cwd unless it is absolute. */
static char *resolve_path(const asession *s, const char *path) {
  size_t n;
  char *p;

  if (path[0] == '/')
    return xstrndup(path, strlen(path));
  n = strlen(s->cwd) + 1 + strlen(path);
  p = malloc(n + 1);
  if (p == NULL)
    exit(CLI_EXIT_FAILURE);
  snprintf(p, n + 1, "%s/%s", s->cwd, path);
  return p;
}

/* Remember an update for session/load replay. */
static void history_add(asession *s, const char *upd, size_t len) {
  size_t cur;

  acp_json_writer_data(s->history, &cur);
  if (cur > (64u << 20))
    return; /* history is a convenience; keep it bounded */
  acp_json_write_raw(s->history, upd, len);
}

/* Send a text chunk of the given kind and keep it in the history. */
static int send_chunk(app *a, asession *s, const char *kind, const char *text,
                      size_t len) {
  const char *u;
  size_t ulen;
  int rv;

  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "sessionUpdate", kind);
  acp_json_write_keyz(a->w, "content");
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "type", "text");
  acp_json_write_keyz(a->w, "text");
  acp_json_write_str(a->w, text, len);
  acp_json_write_obj_end(a->w);
  acp_json_write_obj_end(a->w);
  rv = acp_json_writer_error(a->w);
  if (rv != 0)
    return rv;
  u = wdata(a, &ulen);
  return acp_agent_send_update_raw(a->agent, s->id, u, ulen);
}

static int send_text(app *a, asession *s, const char *text) {
  return send_chunk(a, s, "agent_message_chunk", text, strlen(text));
}

/* The connection speaks the v2 draft (negotiated at initialize). */
static bool is_v2(const app *a) {
  return acp_agent_protocol_version(a->agent) == ACP_PROTOCOL_V2;
}

/* The agent's two modes: v1 lists them as session modes (`id`), v2 as the
 * values of a config option of category "mode" (`value`). */
static void write_mode_list(app *a, const char *key) {
  static const char *modes[][3] = {
      {"ask", "Ask", "Ask before changing anything"},
      {"code", "Code", "Edit and run freely"}};
  size_t i;

  acp_json_write_arr_begin(a->w);
  for (i = 0; i < 2; i++) {
    acp_json_write_obj_begin(a->w);
    kvs(a->w, key, modes[i][0]);
    kvs(a->w, "name", modes[i][1]);
    kvs(a->w, "description", modes[i][2]);
    acp_json_write_obj_end(a->w);
  }
  acp_json_write_arr_end(a->w);
}

/* v2 has no session modes: the mode is a select config option of category
 * "mode" (protocol/v2/session-config-options.mdx). */
static void write_mode_option(app *a, asession *s) {
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "configId", "mode");
  kvs(a->w, "name", "Mode");
  kvs(a->w, "category", "mode");
  kvs(a->w, "type", "select");
  kvs(a->w, "currentValue", s->mode);
  acp_json_write_keyz(a->w, "options");
  write_mode_list(a, "value");
  acp_json_write_obj_end(a->w);
}

/* Write the session's config options array into a->w (v2 names the id
 * `configId` and adds the mode). */
static void write_config_options(app *a, asession *s) {
  static const char *models[][2] = {{"fast", "Fast"}, {"smart", "Smart"}};
  const char *id_key = is_v2(a) ? "configId" : "id";
  size_t i;

  acp_json_write_arr_begin(a->w);
  if (is_v2(a))
    write_mode_option(a, s);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, id_key, "model");
  kvs(a->w, "name", "Model");
  kvs(a->w, "category", "model");
  kvs(a->w, "type", "select");
  kvs(a->w, "currentValue", s->model);
  acp_json_write_keyz(a->w, "options");
  acp_json_write_arr_begin(a->w);
  for (i = 0; i < 2; i++) {
    acp_json_write_obj_begin(a->w);
    kvs(a->w, "value", models[i][0]);
    kvs(a->w, "name", models[i][1]);
    acp_json_write_obj_end(a->w);
  }
  acp_json_write_arr_end(a->w);
  acp_json_write_obj_end(a->w);
  /* Boolean options only for clients that said they handle them
   * (protocol/v1/session-config-options.mdx). */
  if (acp_agent_client_supports(a->agent, "session.configOptions.boolean")) {
    acp_json_write_obj_begin(a->w);
    kvs(a->w, id_key, "verbose");
    kvs(a->w, "name", "Verbose");
    kvs(a->w, "type", "boolean");
    acp_json_write_keyz(a->w, "currentValue");
    acp_json_write_bool(a->w, s->verbose);
    acp_json_write_obj_end(a->w);
  }
  acp_json_write_arr_end(a->w);
}

static void write_modes(app *a, asession *s) {
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "currentModeId", s->mode);
  acp_json_write_keyz(a->w, "availableModes");
  write_mode_list(a, "id");
  acp_json_write_obj_end(a->w);
}

/* The commands the agent advertises: in an available_commands_update
 * (/commands), and under v2 in the session/new and resume results. v2
 * tags each command and its input (AvailableCommand {type: "command"},
 * AvailableCommandInput {type: "text", hint}); a v2 peer drops v1-shaped
 * ones as invalid items. */
static const char agent_commands[] =
    "[{\"name\":\"plan\",\"description\":\"Show a plan\","
    "\"input\":{\"hint\":\"steps separated by ;\"}},"
    "{\"name\":\"read\",\"description\":\"Read a file through the "
    "client\",\"input\":{\"hint\":\"path\"}},"
    "{\"name\":\"wait\",\"description\":\"Wait for cancellation\"}]";
static const char agent_commands_v2[] =
    "[{\"type\":\"command\",\"name\":\"plan\",\"description\":\"Show a "
    "plan\",\"input\":{\"type\":\"text\",\"hint\":\"steps separated by "
    ";\"}},"
    "{\"type\":\"command\",\"name\":\"read\",\"description\":\"Read a "
    "file through the client\",\"input\":{\"type\":\"text\",\"hint\":"
    "\"path\"}},"
    "{\"type\":\"command\",\"name\":\"wait\",\"description\":\"Wait for "
    "cancellation\"}]";

static const char *commands_json(const app *a, size_t *len) {
  bool v2 = acp_agent_protocol_version(a->agent) == ACP_PROTOCOL_V2;

  *len = v2 ? sizeof(agent_commands_v2) - 1 : sizeof(agent_commands) - 1;
  return v2 ? agent_commands_v2 : agent_commands;
}

/* Members shared by session/new, load and resume results (no braces).
 * v1: modes and config options. v2 (NewSessionResponse and
 * ResumeSessionResponse of the SDK 2.4 schema): no modes (the mode is a
 * config option), the config options and the initial availableCommands,
 * so a v2 client knows the commands without waiting for an update. */
static void write_session_state(app *a, asession *s) {
  if (!is_v2(a)) {
    acp_json_write_keyz(a->w, "modes");
    write_modes(a, s);
  }
  acp_json_write_keyz(a->w, "configOptions");
  write_config_options(a, s);
  if (is_v2(a)) {
    size_t n;
    const char *c = commands_json(a, &n);
    acp_json_write_keyz(a->w, "availableCommands");
    acp_json_write_raw(a->w, c, n);
  }
}

/* MARK: - Persistence (--state-dir) */

static struct broken *find_broken(app *a, const char *id) {
  struct broken *b;

  for (b = a->broken; b != NULL && id != NULL; b = b->next)
    if (strcmp(b->id, id) == 0)
      return b;
  return NULL;
}

static void broken_drop(app *a, const char *id) {
  struct broken **pp;

  for (pp = &a->broken; *pp != NULL; pp = &(*pp)->next) {
    if (strcmp((*pp)->id, id) == 0) {
      struct broken *b = *pp;
      *pp = b->next;
      free(b->id);
      free(b->why);
      free(b);
      return;
    }
  }
}

/* Write DIR/ID.json now: the session's state, then its history array. */
static void session_save(app *a, asession *s) {
  acp_json_writer *w = a->sw;
  const char *parts[4];
  size_t lens[4];

  if (a->state_dir == NULL)
    return;
  s->dirty = false;
  acp_json_writer_reset(w);
  acp_json_write_obj_begin(w);
  acp_json_write_keyz(w, "version");
  acp_json_write_int(w, 1);
  kvs(w, "sessionId", s->id);
  kvs(w, "cwd", s->cwd);
  if (s->title != NULL)
    kvs(w, "title", s->title);
  kvs(w, "mode", s->mode);
  kvs(w, "model", s->model);
  acp_json_write_keyz(w, "verbose");
  acp_json_write_bool(w, s->verbose);
  acp_json_write_keyz(w, "nextTool");
  acp_json_write_uint(w, a->next_tool);
  acp_json_write_keyz(w, "archived");
  acp_json_write_bool(w, s->archived);
  acp_json_write_keyz(w, "mcpServers");
  if (s->mcp_json != NULL)
    acp_json_write_raw(w, s->mcp_json, strlen(s->mcp_json));
  else
    acp_json_write_raw(w, "[]", 2);
  if (acp_json_writer_error(w) != 0) {
    cli_err("agent", "cannot save session %s: out of memory", s->id);
    return;
  }
  /* The writers hold an open object and an open array: close both here
   * rather than copy a history that may be megabytes long. */
  parts[0] = acp_json_writer_data(w, &lens[0]);
  parts[1] = ",\"history\":";
  lens[1] = strlen(parts[1]);
  parts[2] = acp_json_writer_data(s->history, &lens[2]);
  parts[3] = "]}\n";
  lens[3] = 3;
  if (store_write(a->state_dir, s->id, parts, lens, 4) != 0)
    cli_err("agent", "cannot save session %s in %s: %s", s->id, a->state_dir,
            strerror(errno));
}

/* Only the sessions changed since the last pass, not every one: a busy
 * session among thousands of idle ones saves at the cost of itself. */
static void flush_dirty(uv_idle_t *h) {
  app *a = h->data;

  uv_idle_stop(h);
  while (a->dirty_list != NULL) {
    asession *s = a->dirty_list;
    a->dirty_list = s->dnext;
    s->dnext = NULL;
    s->queued = false;
    if (s->dirty) /* not saved since (the end of a turn saves at once) */
      session_save(a, s);
  }
}

/* Save soon: updates come in bursts (a plan, a stream of chunks), so they
 * are written once per loop iteration, not once each. Answers that end a
 * turn or change state save at once (session_save) before they go out. */
static void session_changed(app *a, asession *s) {
  if (a->state_dir == NULL)
    return;
  s->dirty = true;
  if (!s->queued) {
    s->queued = true;
    s->dnext = a->dirty_list;
    a->dirty_list = s;
  }
  if (!a->flush_init) {
    uv_idle_init(&a->loop, &a->flush);
    a->flush.data = a;
    a->flush_init = true;
  }
  if (!uv_is_active((uv_handle_t *)&a->flush))
    uv_idle_start(&a->flush, flush_dirty);
}

/* The updates a session/load replays: the conversation itself. Modes,
 * config options, titles and usage are state, answered by load itself. */
static bool history_kind(const acp_json_val *kind) {
  static const char *const kinds[] = {
      "user_message_chunk",  "agent_message_chunk",
      "agent_thought_chunk", "tool_call",
      "tool_call_update",    "plan",
      "plan_update",         "plan_removed",
      "session_message",     "session_message_chunk",
      "subagent_update",     "user_message" /* v2: the prompt, with its id */};
  size_t i;

  for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (acp_json_str_eq(kind, kinds[i], strlen(kinds[i])))
      return true;
  return false;
}

/* Every session/update the agent sends passes here (acp_agent's
 * on_update_sent): the conversation part goes into the history. */
static void on_update_sent(acp_agent *agent, const char *session_id,
                           const char *update, size_t len, void *ud) {
  app *a = ud;
  asession *s;

  (void)agent;
  if (a->replaying)
    return;
  s = find_session(a, session_id);
  if (s == NULL || acp_json_doc_parse(a->hdoc, update, len, NULL) != 0 ||
      !history_kind(OBJ_GETL(acp_json_doc_root(a->hdoc), "sessionUpdate")))
    return;
  history_add(s, update, len);
  session_changed(a, s);
}

/* MARK: - Prompt turns */

static void turn_run(turn *t);
static void aterm_stop(aterm *at);

static void turn_unref(turn *t) {
  if (--t->refs > 0)
    return;
  script_free(&t->sc);
  free(t->terminal_id);
  free(t->stop_reason);
  free(t->usage);
  free(t->elicit_id);
  free(t);
}

static void timer_closed(uv_handle_t *h) {
  turn_unref(h->data);
}

/* Answer the prompt (once) and detach the turn from its session. */
static void turn_finish(turn *t, const char *stop_reason) {
  if (t->done)
    return;
  t->done = true;
  t->waiting = false;
  if (t->term != NULL && !t->term->exited) {
    /* The turn ends: so does the command it runs (its handles close
     * when it has exited and its output is drained). */
    aterm_stop(t->term);
  }
  if (t->mcp_call != NULL) {
    /* A tool call still runs for this turn: cancel it at the server before
     * the turn's answer goes out (its callback runs now, sees the turn
     * done and only drops its reference). */
    acp_mcp_client *c = t->mcp_call;

    t->mcp_call = NULL;
    (void)acp_mcp_client_cancel(c, t->mcp_call_id, "turn ended",
                                uv_now(&t->a->loop));
    (void)acp_mcp_acp_consumer_flush(t->a->mcp, uv_now(&t->a->loop));
  }
  /* The turn's history is on disk before the client hears it ended. */
  if (t->s != NULL && t->s->dirty)
    session_save(t->a, t->s);
  if (t->req != NULL)
    acp_agent_respond_prompt(t->a->agent, t->req, stop_reason, t->usage,
                             t->usage ? strlen(t->usage) : 0);
  t->req = NULL;
  if (t->s != NULL && t->s->turn == t)
    t->s->turn = NULL;
  t->s = NULL;
  if (t->timer_init) {
    t->timer_init = false;
    uv_close((uv_handle_t *)&t->timer, timer_closed);
  }
  turn_unref(t); /* the session's reference */
}

static void turn_fail(turn *t, int64_t code, const char *message) {
  if (t->done)
    return;
  acp_agent_respond_error(t->a->agent, t->req, code, message, NULL, 0);
  t->req = NULL;
  turn_finish(t, NULL);
}

/* A call made on behalf of a turn completed: resume it. */
static turn *turn_resume(void *ud) {
  turn *t = ud;

  if (t->done) {
    turn_unref(t); /* the call's reference; frees the turn if last */
    return NULL;
  }
  /* The session still holds a reference, so this never frees. */
  t->refs--;
  t->waiting = false;
  return t;
}

/* The turn's current step is over: take the next. */
static void turn_next(turn *t) {
  t->pc++;
  turn_run(t);
}

/* The turn's tool call ended with `status`: say so, take the next step. */
static void tool_done(turn *t, const char *status) {
  acp_agent_send_tool_call_update(t->a->agent, t->s->id, t->tool_id, status,
                                  NULL, 0);
  turn_next(t);
}

static int call_ok(const acp_rpc_msg *msg) {
  return msg->result != NULL;
}

static void report_error(turn *t, const char *what, const acp_rpc_msg *msg) {
  char buf[512];

  snprintf(buf, sizeof(buf), "%s failed: %.*s (%" PRId64 ")\n", what,
           (int)(msg->error_message_len > 400 ? 400 : msg->error_message_len),
           msg->error_message ? msg->error_message : "", msg->error_code);
  send_text(t->a, t->s, buf);
}

static int msg_str(const acp_rpc_msg *msg, const acp_json_val *obj,
                   const char *key, const char **s, size_t *len) {
  const acp_json_val *v = acp_json_obj_getz(obj, key);

  if (v == NULL || acp_json_type_of(v) != ACP_JSON_STRING)
    return -1;
  return acp_json_doc_str(msg->doc, v, s, len) == 0 ? 0 : -1;
}

static int on_permission(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  turn *t = turn_resume(ud);
  const acp_json_val *outcome;
  const char *o = NULL;
  const char *opt = NULL;
  size_t olen = 0;
  size_t optlen = 0;
  bool allowed;
  char buf[256];

  (void)agent;
  if (t == NULL)
    return 0;
  t->asking = false;
  if (t->cancelling) {
    /* v2: the question was the work left; its call is cancelled and the
     * turn ends, after that update (v2 prompt-lifecycle: updates after
     * session/cancel go before the idle state_update). */
    acp_agent_send_tool_call_update(t->a->agent, t->s->id, t->tool_id,
                                    "cancelled", NULL, 0);
    turn_finish(t, "cancelled");
    return 0;
  }
  outcome = call_ok(msg) ? OBJ_GETL(msg->result, "outcome") : NULL;
  msg_str(msg, outcome, "outcome", &o, &olen);
  msg_str(msg, outcome, "optionId", &opt, &optlen);
  if (o != NULL && olen == 9 && memcmp(o, "cancelled", 9) == 0) {
    /* The client cancelled the turn; session/cancel ends it (idle). */
    t->waiting = true;
    return 0;
  }
  /* v2: requires_action is over, the turn goes on. */
  if (is_v2(t->a))
    acp_agent_send_state(t->a->agent, t->s->id, "running");
  if (!call_ok(msg)) {
    report_error(t, "session/request_permission", msg);
    tool_done(t, "failed");
    return 0;
  }
  allowed = opt != NULL && optlen >= 5 && memcmp(opt, "allow", 5) == 0;
  snprintf(buf, sizeof(buf), "permission %s (%.*s)\n",
           allowed ? "granted" : "denied", (int)(optlen > 64 ? 64 : optlen),
           opt ? opt : "none");
  write_tool_text(t->a->w, buf);
  {
    size_t n;
    const char *extra = wdata(t->a, &n);
    /* The extra object's members are spliced into the update. */
    acp_agent_send_tool_call_update(t->a->agent, t->s->id, t->tool_id,
                                    allowed ? "completed" : "failed", extra, n);
  }
  send_text(t->a, t->s, buf);
  turn_next(t);
  return 0;
}

static int on_read(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  turn *t = turn_resume(ud);
  const char *content = NULL;
  size_t len = 0;

  (void)agent;
  if (t == NULL)
    return 0;
  if (!call_ok(msg)) {
    report_error(t, "fs/read_text_file", msg);
  } else if (msg_str(msg, msg->result, "content", &content, &len) != 0) {
    send_text(t->a, t->s, "fs/read_text_file: no content in the result\n");
  } else {
    send_chunk(t->a, t->s, "agent_message_chunk", content, len);
  }
  tool_done(t, call_ok(msg) ? "completed" : "failed");
  return 0;
}

static int on_write(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  turn *t = turn_resume(ud);

  (void)agent;
  if (t == NULL)
    return 0;
  if (!call_ok(msg))
    report_error(t, "fs/write_text_file", msg);
  else
    send_text(t->a, t->s, "file written\n");
  tool_done(t, call_ok(msg) ? "completed" : "failed");
  return 0;
}

static int on_elicit(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  turn *t = turn_resume(ud);
  const char *action = NULL;
  size_t alen = 0;
  char buf[160];

  (void)agent;
  if (t == NULL)
    return 0;
  if (!call_ok(msg)) {
    report_error(t, "elicitation/create", msg);
  } else {
    msg_str(msg, msg->result, "action", &action, &alen);
    snprintf(buf, sizeof(buf), "elicitation: %.*s\n",
             (int)(alen > 64 ? 64 : alen), action ? action : "?");
    send_text(t->a, t->s, buf);
    if (action != NULL && alen == 6 && memcmp(action, "accept", 6) == 0 &&
        t->elicit_id != NULL) {
      /* The user went to the URL; the out-of-band part is done. */
      if (acp_agent_elicitation_complete(t->a->agent, t->elicit_id) == 0)
        send_text(t->a, t->s, "elicitation complete\n");
    } else if (action != NULL && alen == 6 &&
               memcmp(action, "accept", 6) == 0) {
      const acp_json_val *c = OBJ_GETL(msg->result, "content");
      size_t n;
      const char *raw = acp_json_raw(c, &n);
      if (raw != NULL)
        send_chunk(t->a, t->s, "agent_message_chunk", raw, n);
    }
  }
  turn_next(t);
  return 0;
}

/* /run: create -> wait_for_exit -> output -> release, one call at a time. */
static int on_terminal(acp_agent *agent, const acp_rpc_msg *msg, void *ud);

static void terminal_next(turn *t) {
  int rv = 0;

  t->refs++;
  t->waiting = true;
  switch (t->sub) {
  case 1:
    rv = acp_agent_terminal_wait_for_exit(t->a->agent, t->s->id, t->terminal_id,
                                          on_terminal, t, NULL);
    break;
  case 2:
    rv = acp_agent_terminal_output(t->a->agent, t->s->id, t->terminal_id,
                                   on_terminal, t, NULL);
    break;
  case 4: /* /kill, between create and wait_for_exit */
    rv = acp_agent_terminal_kill(t->a->agent, t->s->id, t->terminal_id,
                                 on_terminal, t, NULL);
    break;
  default:
    rv = acp_agent_terminal_release(t->a->agent, t->s->id, t->terminal_id,
                                    on_terminal, t, NULL);
    break;
  }
  if (rv != 0) {
    t->refs--;
    t->waiting = false;
    send_text(t->a, t->s, "terminal call failed\n");
    t->pc++;
  }
}

static int on_terminal(acp_agent *agent, const acp_rpc_msg *msg, void *ud) {
  turn *t = turn_resume(ud);
  const char *s = NULL;
  size_t len = 0;

  (void)agent;
  if (t == NULL)
    return 0;
  if (!call_ok(msg)) {
    report_error(t, "terminal", msg);
    if (t->sub == 0 || t->sub == 3) {
      turn_next(t);
      return 0;
    }
    t->sub = 3; /* still release what was created */
    terminal_next(t);
    turn_run(t);
    return 0;
  }
  switch (t->sub) {
  case 0:
    if (msg_str(msg, msg->result, "terminalId", &s, &len) != 0) {
      send_text(t->a, t->s, "terminal/create: no terminalId\n");
      turn_next(t);
      return 0;
    }
    free(t->terminal_id);
    t->terminal_id = xstrndup(s, len);
    acp_json_writer_reset(t->a->w);
    acp_json_write_obj_begin(t->a->w);
    acp_json_write_keyz(t->a->w, "content");
    acp_json_write_arr_begin(t->a->w);
    acp_json_write_obj_begin(t->a->w);
    kvs(t->a->w, "type", "terminal");
    kvs(t->a->w, "terminalId", t->terminal_id);
    acp_json_write_obj_end(t->a->w);
    acp_json_write_arr_end(t->a->w);
    acp_json_write_obj_end(t->a->w);
    {
      size_t n;
      const char *extra = wdata(t->a, &n);
      acp_agent_send_tool_call_update(t->a->agent, t->s->id, t->tool_id,
                                      "in_progress", extra, n);
    }
    if (t->kill) {
      t->sub = 4;
      terminal_next(t);
      turn_run(t);
      return 0;
    }
    break;
  case 4:
    send_text(t->a, t->s, "terminal killed\n");
    t->sub = 1;
    terminal_next(t);
    turn_run(t);
    return 0;
  case 1: {
    /* wait_for_exit: a failure is reported after the output. */
    int64_t code = 0;
    const char *sig = NULL;
    size_t siglen = 0;
    t->exit_note[0] = '\0';
    if (msg_str(msg, msg->result, "signal", &sig, &siglen) == 0)
      snprintf(t->exit_note, sizeof(t->exit_note), "killed by %.*s\n",
               (int)(siglen > 32 ? 32 : siglen), sig);
    else if (acp_json_get_int64(OBJ_GETL(msg->result, "exitCode"), &code) ==
                 0 &&
             code != 0)
      snprintf(t->exit_note, sizeof(t->exit_note), "exit status %" PRId64 "\n",
               code);
    break;
  }
  case 2:
    if (msg_str(msg, msg->result, "output", &s, &len) == 0)
      send_chunk(t->a, t->s, "agent_message_chunk", s, len);
    if (t->exit_note[0] != '\0') {
      if (s != NULL && len > 0 && s[len - 1] != '\n')
        send_text(t->a, t->s, "\n");
      send_text(t->a, t->s, t->exit_note);
    }
    break;
  case 3:
    tool_done(t, t->exit_note[0] ? "failed" : "completed");
    return 0;
  default:
    break;
  }
  t->sub++;
  terminal_next(t);
  turn_run(t);
  return 0;
}

static void timer_fired(uv_timer_t *h) {
  turn *t = h->data;

  if (t->done)
    return;
  t->waiting = false;
  turn_next(t);
}

static const char *tool_kind(const step *st, const char *dflt) {
  return st->arg2 != NULL && st->arg2[0] != '\0' ? st->arg2 : dflt;
}

static void new_tool_id(turn *t) {
  snprintf(t->tool_id, sizeof(t->tool_id), "tool_%u", ++t->a->next_tool);
}

static void step_plan(turn *t, const step *st) {
  app *a = t->a;
  char *entries[32];
  size_t n = 0;
  size_t i;
  size_t k;
  char *p = st->arg;

  while (p != NULL && *p != '\0' && n < 32) {
    char *semi = strchr(p, ';');
    char *e = semi ? semi : p + strlen(p);
    while (*p == ' ')
      p++;
    entries[n++] = xstrndup(p, (size_t)(e - p));
    p = semi ? semi + 1 : NULL;
  }
  /* One update per state change: all pending, then each in progress and
   * completed in turn, as a real agent working through its plan would. */
  for (k = 0; k <= 2 * n; k++) {
    size_t len;
    const char *u;
    acp_json_writer_reset(a->w);
    acp_json_write_arr_begin(a->w);
    for (i = 0; i < n; i++) {
      const char *status = "pending";
      if (k > 0 && i < (k - 1) / 2)
        status = "completed";
      else if (k > 0 && i == (k - 1) / 2)
        status = (k % 2 == 1) ? "in_progress" : "completed";
      acp_json_write_obj_begin(a->w);
      kvs(a->w, "content", entries[i]);
      kvs(a->w, "priority", i == 0 ? "high" : "medium");
      kvs(a->w, "status", status);
      acp_json_write_obj_end(a->w);
    }
    acp_json_write_arr_end(a->w);
    u = wdata(a, &len);
    /* /plan:ID names one of several plans (v2 plan_update planId; v1
     * unstable plan_update); plain /plan, and any plan for a stable v1
     * client, is the session's one plan. */
    if (st->arg2 != NULL && st->arg2[0] != '\0' && (is_v2(a) || a->unstable))
      acp_agent_send_plan_update(a->agent, t->s->id, st->arg2, u, len);
    else
      acp_agent_send_plan(a->agent, t->s->id, u, len);
  }
  for (i = 0; i < n; i++)
    free(entries[i]);
}

/*
 * /plan-other:ID TEXT: a plan in a content type of the agent's own, the
 * "other" variant of v2's PlanUpdateContent: a `_`-prefixed type and the
 * planId every variant carries; receivers that do not know the type keep
 * or show it generically, and it replaces earlier content of that planId
 * (protocol/v2/agent-plan.mdx). v1's plan has entries only.
 */
static void step_plan_other(turn *t, const step *st) {
  app *a = t->a;
  size_t len;
  const char *u;

  if (!is_v2(a)) {
    send_text(a, t->s, "plan content types other than entries need v2\n");
    return;
  }
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "sessionUpdate", "plan_update");
  acp_json_write_keyz(a->w, "plan");
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "type", "_acp_note");
  kvs(a->w, "planId",
      st->arg2 != NULL && st->arg2[0] != '\0' ? st->arg2 : "plan");
  kvs(a->w, "text", st->arg);
  acp_json_write_obj_end(a->w);
  acp_json_write_obj_end(a->w);
  u = wdata(a, &len);
  acp_agent_send_update_raw(a->agent, t->s->id, u, len);
}

static void step_big(turn *t, int64_t bytes) {
  static const char line[] =
      "The quick brown fox jumps over the lazy dog; 0123456789 ACP/MCP.\n";
  const size_t line_len = sizeof(line) - 1;
  char *buf;
  int64_t left = bytes;
  size_t i;

  if (left <= 0)
    return;
  /* One line longer than a chunk, so that each chunk can start where the
   * previous one stopped: the whole stream is the line repeated. */
  buf = malloc(BIG_CHUNK + line_len);
  if (buf == NULL)
    return;
  for (i = 0; i < BIG_CHUNK + line_len; i++)
    buf[i] = line[i % line_len];
  while (left > 0) {
    size_t n = left > BIG_CHUNK ? BIG_CHUNK : (size_t)left;
    size_t at = (size_t)((bytes - left) % (int64_t)line_len);
    acp_agent_send_message_chunk(t->a->agent, t->s->id, buf + at, n, NULL, 0);
    left -= (int64_t)n;
  }
  free(buf);
}

/* /chunks N TEXT: TEXT with \n and \\ decoded, in chunks of N bytes
 * (markdown markers split anywhere, UTF-8 sequences kept whole). */
static void step_chunks(turn *t, int64_t size, const char *text) {
  size_t n = strlen(text), len = 0, i, at;
  char *buf = malloc(n + 1);

  if (buf == NULL)
    return;
  for (i = 0; i < n; i++) {
    if (text[i] == '\\' && i + 1 < n &&
        (text[i + 1] == 'n' || text[i + 1] == '\\')) {
      buf[len++] = text[i + 1] == 'n' ? '\n' : '\\';
      i++;
    } else {
      buf[len++] = text[i];
    }
  }
  if (size <= 0)
    size = 1;
  for (at = 0; at < len; at += (size_t)size) {
    size_t k = len - at < (size_t)size ? len - at : (size_t)size;
    /* Never inside a UTF-8 sequence: each chunk is a JSON string. */
    while (at + k < len && ((unsigned char)buf[at + k] & 0xC0) == 0x80)
      k++;
    send_chunk(t->a, t->s, "agent_message_chunk", buf + at, k);
  }
  free(buf);
}

static void step_text(turn *t, const char *text) {
  const char *p = text;

  /* Stream line by line: each line (with its newline) is one chunk. */
  while (*p != '\0') {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
    send_chunk(t->a, t->s, "agent_message_chunk", p, n);
    p += n;
  }
}

/* Run steps until one has to wait or the script ends. */
static int step_mcp(turn *t, const char *line);

static int on_elicit(acp_agent *agent, const acp_rpc_msg *msg, void *ud);

/* The --unstable commands. 1 when the turn now waits (it resumes itself),
 * else 0. */
static int step_unstable(turn *t, const step *st) {
  app *a = t->a;
  asession *s = t->s;
  acp_json_writer *w = a->w;
  const char *u;
  size_t n;
  char id[48];

  acp_json_writer_reset(w);
  switch (st->kind) {
  case STEP_SUBAGENT:
    acp_json_write_obj_begin(w);
    kvs(w, "sessionUpdate", "subagent_update");
    kvs(w, "sessionId", st->arg);
    if (st->arg2 != NULL)
      kvs(w, "title", st->arg2);
    acp_json_write_keyz(w, "state");
    acp_json_write_obj_begin(w);
    kvs(w, "state", "running");
    acp_json_write_obj_end(w);
    acp_json_write_obj_end(w);
    u = wdata(a, &n);
    acp_agent_send_update_raw(a->agent, s->id, u, n);
    return 0;
  case STEP_MESSAGE:
    /* An upsert naming the participants, then the text as a chunk. */
    snprintf(id, sizeof(id), "msg_%u", ++a->next_msg);
    acp_json_write_obj_begin(w);
    kvs(w, "sessionUpdate", "session_message");
    kvs(w, "messageId", id);
    kvs(w, "senderSessionId", s->id);
    kvs(w, "recipientSessionId", st->arg);
    acp_json_write_obj_end(w);
    u = wdata(a, &n);
    acp_agent_send_update_raw(a->agent, s->id, u, n);
    acp_json_writer_reset(w);
    acp_json_write_obj_begin(w);
    kvs(w, "sessionUpdate", "session_message_chunk");
    kvs(w, "messageId", id);
    acp_json_write_keyz(w, "content");
    acp_json_write_obj_begin(w);
    kvs(w, "type", "text");
    kvs(w, "text", st->arg2 ? st->arg2 : "");
    acp_json_write_obj_end(w);
    acp_json_write_obj_end(w);
    u = wdata(a, &n);
    acp_agent_send_update_raw(a->agent, s->id, u, n);
    return 0;
  case STEP_AUTH:
    if (st->arg[0] == '\0' || strlen(st->arg) >= sizeof(a->auth_state)) {
      send_text(a, s,
                "usage: /auth authenticated|unauthenticated|"
                "not_required|unknown\n");
      return 0;
    }
    snprintf(a->auth_state, sizeof(a->auth_state), "%s", st->arg);
    acp_agent_send_auth_status_update(a->agent, a->auth_state, NULL, 0);
    return 0;
  case STEP_TURN_USAGE: {
    char *end1 = NULL;
    char *end2 = NULL;
    unsigned long long in = strtoull(st->arg, &end1, 10);
    unsigned long long out = st->arg2 ? strtoull(st->arg2, &end2, 10) : 0;
    char json[160];

    if (st->arg[0] == '\0' || *end1 != '\0' || st->arg2 == NULL ||
        *end2 != '\0') {
      send_text(a, s, "usage: /turn-usage INPUT_TOKENS OUTPUT_TOKENS\n");
      return 0;
    }
    snprintf(json, sizeof(json),
             "{\"inputTokens\":%llu,\"outputTokens\":%llu,"
             "\"totalTokens\":%llu}",
             in, out, in + out);
    free(t->usage);
    t->usage = xstrndup(json, strlen(json));
    return 0;
  }
  case STEP_ELICIT_URL: {
    int rv;
    if (!a->elicitation) {
      send_text(a, s, "the client does not offer elicitation\n");
      return 0;
    }
    snprintf(id, sizeof(id), "elicit_%u", ++a->next_elicit);
    free(t->elicit_id);
    t->elicit_id = xstrndup(id, strlen(id));
    acp_json_write_obj_begin(w);
    kvs(w, "sessionId", s->id);
    kvs(w, "mode", "url");
    kvs(w, "message", "Please sign in");
    kvs(w, "url", st->arg);
    kvs(w, "elicitationId", id);
    acp_json_write_obj_end(w);
    u = wdata(a, &n);
    t->refs++;
    t->waiting = true;
    rv = acp_agent_elicitation_create(a->agent, u, n, on_elicit, t, NULL);
    if (rv != 0) {
      t->refs--;
      t->waiting = false;
      turn_fail(t, -32603, "cannot send elicitation/create");
    }
    return 1;
  }
  default:
    return 0;
  }
}

/*
 * /diff[:OP[:TYPE]] PATH, /diff:move|copy OLD NEW: an edit tool call whose
 * content is a diff. v1 shows it as oldText/newText (one line changed);
 * v2 (diff file states) as `changes`, the authoritative list of paths,
 * operations and file types, plus a git patch with absolute paths when the
 * file is text (protocol/v2/tool-calls.mdx#diffs): a binary, directory or
 * symlink change comes without a patch, which clients must handle. v1
 * cannot say move, copy or a non-text file: those answer a line of text.
 */
static void step_diff(turn *t, const step *st) {
  app *a = t->a;
  asession *s = t->s;
  char opbuf[32];
  const char *op = "modify", *ftype = "text";
  bool add, del, pair, text;
  char *path, *old = NULL;
  char *patch = NULL;
  size_t n, plen;
  const char *extra;
  char title[600];

  if (st->arg2 != NULL) {
    char *colon;
    snprintf(opbuf, sizeof(opbuf), "%s", st->arg2);
    colon = strchr(opbuf, ':');
    if (colon != NULL) {
      *colon = '\0';
      ftype = st->arg2 + (colon - opbuf) + 1;
    }
    op = opbuf;
  }
  add = strcmp(op, "add") == 0;
  del = strcmp(op, "delete") == 0;
  pair = strcmp(op, "move") == 0 || strcmp(op, "copy") == 0;
  text = strcmp(ftype, "text") == 0;
  if (!add && !del && !pair && strcmp(op, "modify") != 0) {
    snprintf(title, sizeof(title),
             "unknown diff operation '%.64s' (modify, add, delete, move, "
             "copy)\n",
             op);
    send_text(a, s, title);
    return;
  }
  if (!text && strcmp(ftype, "binary") != 0 &&
      strcmp(ftype, "directory") != 0 && strcmp(ftype, "symlink") != 0) {
    snprintf(title, sizeof(title),
             "unknown diff file type '%.64s' (text, binary, directory, "
             "symlink)\n",
             ftype);
    send_text(a, s, title);
    return;
  }
  if (!is_v2(a) && (pair || !text)) {
    snprintf(title, sizeof(title), "%s diffs need v2\n", pair ? op : ftype);
    send_text(a, s, title);
    return;
  }
  if (pair) {
    const char *arg = st->arg ? st->arg : "";
    size_t k = strcspn(arg, " \t");
    const char *to = arg + k + strspn(arg + k, " \t");
    char *from = xstrndup(arg, k);
    if (k == 0 || *to == '\0') {
      free(from);
      send_text(a, s, "usage: /diff:move OLD NEW (or /diff:copy)\n");
      return;
    }
    old = resolve_path(s, from);
    free(from);
    path = resolve_path(s, to);
  } else {
    path = resolve_path(s, st->arg ? st->arg : "");
  }
  new_tool_id(t);
  snprintf(title, sizeof(title), "%s %.280s",
           pair ? (op[0] == 'm' ? "Move to" : "Copy to") : "Edit", path);
  acp_agent_send_tool_call(a->agent, s->id, t->tool_id, title, "edit",
                           "in_progress", NULL, 0);
  plen = 4 * strlen(path) + 2 * (old ? strlen(old) : 0) + 200;
  patch = malloc(plen);
  if (patch == NULL)
    exit(CLI_EXIT_FAILURE);
  if (pair) /* a whole-file move or copy: no content lines */
    snprintf(patch, plen,
             "diff --git %s %s\nsimilarity index 100%%\n%s from %s\n%s to "
             "%s\n",
             old, path, op[0] == 'm' ? "rename" : "copy", old,
             op[0] == 'm' ? "rename" : "copy", path);
  else if (add)
    snprintf(patch, plen,
             "diff --git %s %s\nnew file mode 100644\n--- /dev/null\n"
             "+++ %s\n@@ -0,0 +1 @@\n+new line\n",
             path, path, path);
  else if (del)
    snprintf(patch, plen,
             "diff --git %s %s\ndeleted file mode 100644\n--- %s\n"
             "+++ /dev/null\n@@ -1 +0,0 @@\n-old line\n",
             path, path, path);
  else
    snprintf(patch, plen,
             "diff --git %s %s\n--- %s\n+++ %s\n@@ -1 +1 @@\n-old line\n"
             "+new line\n",
             path, path, path, path);
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "content");
  acp_json_write_arr_begin(a->w);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "type", "diff");
  if (is_v2(a)) {
    acp_json_write_keyz(a->w, "changes");
    acp_json_write_arr_begin(a->w);
    acp_json_write_obj_begin(a->w);
    kvs(a->w, "operation", op);
    if (old != NULL)
      kvs(a->w, "oldPath", old);
    kvs(a->w, "path", path);
    kvs(a->w, "fileType", ftype);
    acp_json_write_obj_end(a->w);
    acp_json_write_arr_end(a->w);
    if (text) {
      acp_json_write_keyz(a->w, "patch");
      acp_json_write_obj_begin(a->w);
      kvs(a->w, "format", "git_patch");
      kvs(a->w, "text", patch);
      acp_json_write_obj_end(a->w);
    }
  } else {
    kvs(a->w, "path", path);
    acp_json_write_keyz(a->w, "oldText");
    if (add)
      acp_json_write_null(a->w);
    else
      acp_json_write_strz(a->w, "old line\n");
    kvs(a->w, "newText", del ? "" : "new line\n");
  }
  acp_json_write_obj_end(a->w);
  acp_json_write_arr_end(a->w);
  acp_json_write_obj_end(a->w);
  extra = wdata(a, &n);
  acp_agent_send_tool_call_update(a->agent, s->id, t->tool_id, "completed",
                                  extra, n);
  free(patch);
  free(path);
  free(old);
}

static void aterm_closed(uv_handle_t *h) {
  aterm *at = h->data;

  if (--at->open > 0)
    return;
  if (at->t->term == at)
    at->t->term = NULL;
  turn_unref(at->t);
  free(at);
}

static void aterm_grace_over(uv_timer_t *tm) {
  aterm *at = tm->data;

  if (!at->exited)
    (void)uv_process_kill(&at->proc, SIGKILL);
}

/* Stop the command: SIGTERM, and SIGKILL after the grace if it has not
 * exited by then. A command may ignore or trap SIGTERM; without the second
 * signal a cancelled turn would wait for it forever (its end is what ends
 * the turn). The timer is the aterm's third handle, closed at the exit. */
static void aterm_stop(aterm *at) {
  app *a = at->t->a;

  if (at->exited)
    return;
  if (a->kill_grace_ms == 0) {
    (void)uv_process_kill(&at->proc, SIGKILL);
    return;
  }
  (void)uv_process_kill(&at->proc, SIGTERM);
  if (at->grace_init)
    return; /* the first stop's grace runs */
  uv_timer_init(&a->loop, &at->grace);
  at->grace.data = at;
  at->grace_init = true;
  at->open++;
  uv_timer_start(&at->grace, aterm_grace_over, a->kill_grace_ms, 0);
}

static char *base64(const unsigned char *p, size_t n) {
  static const char tab[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
  size_t i;

  if (out == NULL)
    exit(CLI_EXIT_FAILURE);
  for (i = 0; i + 2 < n; i += 3) {
    *o++ = tab[p[i] >> 2];
    *o++ = tab[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
    *o++ = tab[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)];
    *o++ = tab[p[i + 2] & 63];
  }
  if (i < n) {
    *o++ = tab[p[i] >> 2];
    if (i + 1 < n) {
      *o++ = tab[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
      *o++ = tab[(p[i + 1] & 15) << 2];
    } else {
      *o++ = tab[(p[i] & 3) << 4];
      *o++ = '=';
    }
    *o++ = '=';
  }
  *o = '\0';
  return out;
}

/* The command has exited and its output is drained: say how it ended
 * (exitStatus, cancel no longer offered), end its tool call, go on. */
static void aterm_maybe_done(aterm *at) {
  turn *t = at->t;
  app *a = t->a;
  char buf[128];
  size_t n;
  const char *u;
  bool ok = at->term_signal == 0 && at->exit_status == 0;

  if (!at->exited || !at->eof || at->reported)
    return;
  at->reported = true;
  if (t->term == at)
    t->term = NULL; /* a later /run of the turn gets its own */
  uv_close((uv_handle_t *)&at->proc, aterm_closed);
  if (t->done || t->s == NULL || a->closing)
    return; /* the turn ended (cancel, close, end of input) */
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "sessionUpdate", "terminal_update");
  kvs(a->w, "terminalId", at->id);
  acp_json_write_keyz(a->w, "exitStatus");
  acp_json_write_obj_begin(a->w);
  if (at->term_signal != 0) {
    snprintf(buf, sizeof(buf), "%s",
             at->term_signal == SIGTERM   ? "SIGTERM"
             : at->term_signal == SIGKILL ? "SIGKILL"
             : at->term_signal == SIGINT  ? "SIGINT"
                                          : "");
    if (buf[0] == '\0')
      snprintf(buf, sizeof(buf), "SIG%d", at->term_signal);
    kvs(a->w, "signal", buf);
  } else {
    acp_json_write_keyz(a->w, "exitCode");
    acp_json_write_int(a->w, at->exit_status);
  }
  acp_json_write_obj_end(a->w);
  acp_json_write_keyz(a->w, "capabilities");
  acp_json_write_null(a->w);
  acp_json_write_obj_end(a->w);
  u = wdata(a, &n);
  acp_agent_send_update_raw(a->agent, t->s->id, u, n);
  if (t->cancelling) {
    /* v2 session/cancel stopped it: its end is reported, then the turn's */
    acp_agent_send_tool_call_update(a->agent, t->s->id, t->tool_id, "cancelled",
                                    NULL, 0);
    turn_finish(t, "cancelled");
    return;
  }
  acp_agent_send_tool_call_update(a->agent, t->s->id, t->tool_id,
                                  ok ? "completed" : "failed", NULL, 0);
  if (at->term_signal != 0)
    snprintf(buf, sizeof(buf), "%s %s\n",
             at->cancelled ? "terminal cancelled:" : "killed by",
             at->term_signal == SIGTERM   ? "SIGTERM"
             : at->term_signal == SIGKILL ? "SIGKILL"
                                          : "a signal");
  else
    snprintf(buf, sizeof(buf), "exit %" PRId64 "\n", at->exit_status);
  send_text(a, t->s, buf);
  t->waiting = false;
  turn_next(t);
}

static void aterm_exit(uv_process_t *p, int64_t status, int sig) {
  aterm *at = p->data;

  at->exited = true;
  at->exit_status = status;
  at->term_signal = sig;
  if (at->grace_init) {
    at->grace_init = false;
    uv_close((uv_handle_t *)&at->grace, aterm_closed);
  }
  if (at->t->cancelling && !at->eof) {
    /* A cancelled turn waits for the command, not for whatever it left
     * running with its stdout (a child of a shell killed by SIGTERM):
     * its output is no longer read, the turn ends now. */
    at->eof = true;
    uv_read_stop((uv_stream_t *)&at->out);
    uv_close((uv_handle_t *)&at->out, aterm_closed);
  }
  aterm_maybe_done(at);
}

static void aterm_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(size);
  buf->len = buf->base != NULL ? size : 0;
}

static void aterm_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  aterm *at = st->data;
  turn *t = at->t;

  if (nread > 0 && !t->done && t->s != NULL) {
    /* Each chunk is base64 on its own (the client decodes each). */
    char *b64 = base64((const unsigned char *)buf->base, (size_t)nread);
    size_t n;
    const char *u;
    acp_json_writer_reset(t->a->w);
    acp_json_write_obj_begin(t->a->w);
    kvs(t->a->w, "sessionUpdate", "terminal_output_chunk");
    kvs(t->a->w, "terminalId", at->id);
    kvs(t->a->w, "data", b64);
    acp_json_write_obj_end(t->a->w);
    u = wdata(t->a, &n);
    acp_agent_send_update_raw(t->a->agent, t->s->id, u, n);
    free(b64);
  }
  free(buf->base);
  if (nread < 0) {
    at->eof = true;
    uv_close((uv_handle_t *)&at->out, aterm_closed);
    aterm_maybe_done(at);
  }
}

static void step_run_v2(turn *t, const step *st) {
  app *a = t->a;
  asession *s = t->s;
  char *cmd = xstrndup(st->arg, strlen(st->arg));
  char *argv[64];
  size_t argc = 0;
  char *p = cmd;
  uv_process_options_t o;
  uv_stdio_container_t io[3];
  aterm *at;
  size_t n;
  const char *u;
  char buf[300];
  int rv;

  while (*p != '\0' && argc < 63) { /* blanks split, no quoting: a demo */
    while (*p == ' ')
      *p++ = '\0';
    if (*p == '\0')
      break;
    argv[argc++] = p;
    while (*p != '\0' && *p != ' ')
      p++;
  }
  argv[argc] = NULL;
  if (a->closing) { /* end of input: start nothing more */
    free(cmd);
    t->waiting = true;
    return;
  }
  if (argc == 0) {
    send_text(a, s, "/run needs a command\n");
    free(cmd);
    turn_next(t);
    return;
  }
  at = calloc(1, sizeof(*at));
  if (at == NULL)
    exit(CLI_EXIT_FAILURE);
  at->t = t;
  snprintf(at->id, sizeof(at->id), "term_%u", ++a->next_term);
  new_tool_id(t);
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "content");
  acp_json_write_arr_begin(a->w);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "type", "terminal");
  kvs(a->w, "terminalId", at->id);
  acp_json_write_obj_end(a->w);
  acp_json_write_arr_end(a->w);
  acp_json_write_obj_end(a->w);
  u = wdata(a, &n);
  acp_agent_send_tool_call(a->agent, s->id, t->tool_id, st->arg, "execute",
                           "in_progress", u, n);
  memset(&o, 0, sizeof(o));
  memset(io, 0, sizeof(io));
  uv_pipe_init(&a->loop, &at->out, 0);
  at->out.data = at;
  at->proc.data = at;
  io[0].flags = UV_IGNORE;
  io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  io[1].data.stream = (uv_stream_t *)&at->out;
  io[2].flags = UV_IGNORE;
  o.file = argv[0];
  o.args = argv;
  o.cwd = s->cwd;
  o.stdio = io;
  o.stdio_count = 3;
  o.exit_cb = aterm_exit;
  rv = uv_spawn(&a->loop, &at->proc, &o);
  free(cmd);
  t->refs++; /* the terminal's, dropped when its handles are closed */
  if (rv != 0) {
    /* Both handles were initialized: both are closed. */
    at->open = 2;
    uv_close((uv_handle_t *)&at->out, aterm_closed);
    uv_close((uv_handle_t *)&at->proc, aterm_closed);
    snprintf(buf, sizeof(buf), "cannot run %.200s: %s\n", st->arg,
             uv_strerror(rv));
    acp_agent_send_tool_call_update(a->agent, s->id, t->tool_id, "failed", NULL,
                                    0);
    send_text(a, s, buf);
    turn_next(t);
    return;
  }
  at->open = 2;
  t->term = at;
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "sessionUpdate", "terminal_update");
  kvs(a->w, "terminalId", at->id);
  kvs(a->w, "command", st->arg);
  kvs(a->w, "cwd", s->cwd);
  acp_json_write_keyz(a->w, "capabilities");
  acp_json_write_raw(a->w, "{\"cancel\":{}}", strlen("{\"cancel\":{}}"));
  acp_json_write_obj_end(a->w);
  u = wdata(a, &n);
  acp_agent_send_update_raw(a->agent, s->id, u, n);
  t->waiting = true;
  uv_read_start((uv_stream_t *)&at->out, aterm_alloc, aterm_read);
}

static void turn_run(turn *t) {
  app *a = t->a;
  int rv;

  while (!t->done && !t->waiting) {
    const step *st;
    asession *s = t->s;
    char buf[512];

    if (t->pc >= t->sc.n) {
      turn_finish(t, t->stop_reason ? t->stop_reason : "end_turn");
      return;
    }
    st = &t->sc.steps[t->pc];
    t->sub = 0;
    switch (st->kind) {
    case STEP_TEXT:
      step_text(t, st->arg);
      break;
    case STEP_THINK:
      send_chunk(a, s, "agent_thought_chunk", st->arg, strlen(st->arg));
      break;
    case STEP_PLAN:
      step_plan(t, st);
      break;
    case STEP_PLAN_OTHER:
      step_plan_other(t, st);
      break;
    case STEP_TOOL:
      new_tool_id(t);
      acp_agent_send_tool_call(a->agent, s->id, t->tool_id, st->arg,
                               tool_kind(st, "other"), "pending", NULL, 0);
      acp_agent_send_tool_call_update(a->agent, s->id, t->tool_id,
                                      "in_progress", NULL, 0);
      snprintf(buf, sizeof(buf), "done: %s", st->arg);
      write_tool_text(a->w, buf);
      {
        size_t n;
        const char *extra = wdata(a, &n);
        acp_agent_send_tool_call_update(a->agent, s->id, t->tool_id,
                                        "completed", extra, n);
      }
      break;
    case STEP_ASK: {
      static const char opts[] =
          "[{\"optionId\":\"allow_once\",\"name\":\"Allow once\","
          "\"kind\":\"allow_once\"},{\"optionId\":\"allow_always\","
          "\"name\":\"Always allow\",\"kind\":\"allow_always\"},"
          "{\"optionId\":\"reject_once\",\"name\":\"Reject\","
          "\"kind\":\"reject_once\"},{\"optionId\":\"reject_always\","
          "\"name\":\"Always reject\",\"kind\":\"reject_always\"}]";
      size_t n;
      const char *tc;
      new_tool_id(t);
      acp_agent_send_tool_call(a->agent, s->id, t->tool_id, st->arg,
                               tool_kind(st, "edit"), "pending", NULL, 0);
      acp_json_writer_reset(a->w);
      acp_json_write_obj_begin(a->w);
      kvs(a->w, "toolCallId", t->tool_id);
      kvs(a->w, "title", st->arg);
      kvs(a->w, "kind", tool_kind(st, "edit"));
      kvs(a->w, "status", "pending");
      acp_json_write_obj_end(a->w);
      tc = wdata(a, &n);
      /* v2: the turn cannot go on without the answer. */
      if (is_v2(a))
        acp_agent_send_state(a->agent, s->id, "requires_action");
      t->refs++;
      t->waiting = true;
      t->asking = true;
      rv = acp_agent_request_permission(a->agent, s->id, tc, n, opts,
                                        sizeof(opts) - 1, on_permission, t,
                                        NULL);
      if (rv != 0) {
        t->refs--;
        t->waiting = false;
        t->asking = false;
        turn_fail(t, -32603, "cannot send session/request_permission");
        return;
      }
      return;
    }
    case STEP_READ:
    case STEP_WRITE: {
      char *path = resolve_path(s, st->arg ? st->arg : "");
      bool can = st->kind == STEP_READ ? a->fs_read : a->fs_write;
      if (!can) {
        snprintf(buf, sizeof(buf), "the client does not offer fs/%s\n",
                 st->kind == STEP_READ ? "read_text_file" : "write_text_file");
        send_text(a, s, buf);
        free(path);
        break;
      }
      new_tool_id(t);
      snprintf(buf, sizeof(buf), "%s %s",
               st->kind == STEP_READ ? "Read" : "Write", path);
      acp_json_writer_reset(a->w);
      acp_json_write_obj_begin(a->w);
      acp_json_write_keyz(a->w, "locations");
      acp_json_write_arr_begin(a->w);
      acp_json_write_obj_begin(a->w);
      kvs(a->w, "path", path);
      acp_json_write_obj_end(a->w);
      acp_json_write_arr_end(a->w);
      acp_json_write_obj_end(a->w);
      {
        size_t n;
        const char *extra = wdata(a, &n);
        acp_agent_send_tool_call(a->agent, s->id, t->tool_id, buf,
                                 st->kind == STEP_READ ? "read" : "edit",
                                 "in_progress", extra, n);
      }
      t->refs++;
      t->waiting = true;
      if (st->kind == STEP_READ)
        rv = acp_agent_fs_read_text_file(a->agent, s->id, path, 0, 0, on_read,
                                         t, NULL);
      else
        rv = acp_agent_fs_write_text_file(
            a->agent, s->id, path, st->arg2 ? st->arg2 : "",
            st->arg2 ? strlen(st->arg2) : 0, on_write, t, NULL);
      free(path);
      if (rv != 0) {
        t->refs--;
        t->waiting = false;
        turn_fail(t, -32603, "cannot send an fs request");
      }
      return;
    }
    case STEP_KILL:
      if (!a->unstable) {
        send_text(a, s, "/kill needs acp agent --unstable\n");
        break;
      }
      t->kill = true; /* /run, then terminal/kill after create */
      /* fall through */
    case STEP_RUN: {
      char *cmd;
      char *p;
      if (is_v2(a) && st->kind == STEP_RUN) {
        step_run_v2(t, st);
        return;
      }
      if (!a->terminal) {
        send_text(a, s, "the client does not offer terminals\n");
        break;
      }
      /* Split "CMD ARGS..." on blanks (no quoting: this is a demo). */
      cmd = xstrndup(st->arg, strlen(st->arg));
      acp_json_writer_reset(a->w);
      acp_json_write_arr_begin(a->w);
      p = strchr(cmd, ' ');
      if (p != NULL) {
        *p++ = '\0';
        while (*p != '\0') {
          char *e;
          while (*p == ' ')
            p++;
          if (*p == '\0')
            break;
          e = strchr(p, ' ');
          acp_json_write_str(a->w, p, e ? (size_t)(e - p) : strlen(p));
          p = e ? e : p + strlen(p);
        }
      }
      acp_json_write_arr_end(a->w);
      new_tool_id(t);
      acp_agent_send_tool_call(a->agent, s->id, t->tool_id, st->arg, "execute",
                               "pending", NULL, 0);
      {
        size_t n;
        const char *args = wdata(a, &n);
        char *argscopy = xstrndup(args, n);
        char extra[1024];
        acp_json_writer_reset(a->w);
        acp_json_write_obj_begin(a->w);
        kvs(a->w, "cwd", s->cwd);
        acp_json_write_obj_end(a->w);
        {
          const char *cw = wdata(a, &n);
          snprintf(extra, sizeof(extra), "%.*s", (int)n, cw);
        }
        t->refs++;
        t->waiting = true;
        rv = acp_agent_terminal_create(a->agent, s->id, cmd, argscopy,
                                       strlen(argscopy), extra, strlen(extra),
                                       on_terminal, t, NULL);
        free(argscopy);
      }
      free(cmd);
      if (rv != 0) {
        t->refs--;
        t->waiting = false;
        turn_fail(t, -32603, "cannot send terminal/create");
      }
      return;
    }
    case STEP_MODE:
      if (strcmp(st->arg, "ask") != 0 && strcmp(st->arg, "code") != 0) {
        snprintf(buf, sizeof(buf), "unknown mode '%.64s'\n", st->arg);
        send_text(a, s, buf);
        break;
      }
      snprintf(s->mode, sizeof(s->mode), "%s", st->arg);
      session_changed(a, s);
      if (is_v2(a)) {
        /* v2 has no current_mode_update: the options changed. */
        size_t n;
        const char *opts;
        acp_json_writer_reset(a->w);
        write_config_options(a, s);
        opts = wdata(a, &n);
        acp_agent_send_config_options(a->agent, s->id, opts, n);
      } else {
        acp_agent_send_current_mode(a->agent, s->id, s->mode);
      }
      break;
    case STEP_CONFIG:
      if (strcmp(st->arg, "model") == 0 && st->arg2 != NULL &&
          (strcmp(st->arg2, "fast") == 0 || strcmp(st->arg2, "smart") == 0)) {
        snprintf(s->model, sizeof(s->model), "%s", st->arg2);
      } else if (strcmp(st->arg, "verbose") == 0 && st->arg2 != NULL) {
        s->verbose = strcmp(st->arg2, "true") == 0;
      } else {
        send_text(a, s,
                  "usage: /config model fast|smart, /config verbose "
                  "true|false\n");
        break;
      }
      session_changed(a, s);
      acp_json_writer_reset(a->w);
      write_config_options(a, s);
      {
        size_t n;
        const char *opts = wdata(a, &n);
        acp_agent_send_config_options(a->agent, s->id, opts, n);
      }
      break;
    case STEP_TITLE:
      free(s->title);
      s->title = xstrndup(st->arg, strlen(st->arg));
      session_changed(a, s);
      acp_agent_send_session_info(a->agent, s->id, s->title, NULL, 0);
      break;
    case STEP_USAGE:
      acp_agent_send_usage(a->agent, s->id, 1234, 200000, NULL, 0);
      break;
    case STEP_UPDATE:
      if (st->arg[0] != '{' ||
          acp_json_validate(st->arg, strlen(st->arg), NULL) != 0 ||
          acp_agent_send_update_raw(a->agent, s->id, st->arg,
                                    strlen(st->arg)) != 0)
        send_text(a, s, "usage: /update {\"sessionUpdate\":...}\n");
      break;
    case STEP_COMMANDS: {
      size_t n;
      const char *c = commands_json(a, &n);
      acp_agent_send_available_commands(a->agent, s->id, c, n);
      break;
    }
    case STEP_ELICIT: {
      size_t n;
      const char *params;
      if (!a->elicitation) {
        send_text(a, s, "the client does not offer elicitation\n");
        break;
      }
      acp_json_writer_reset(a->w);
      acp_json_write_obj_begin(a->w);
      kvs(a->w, "sessionId", s->id);
      kvs(a->w, "mode", "form");
      kvs(a->w, "message", st->arg);
      acp_json_write_keyz(a->w, "requestedSchema");
      acp_json_write_raw(
          a->w,
          "{\"type\":\"object\",\"properties\":{\"answer\":{\"type\":"
          "\"string\",\"title\":\"Answer\"}},\"required\":[\"answer\"]}",
          strlen("{\"type\":\"object\",\"properties\":{\"answer\":{\"type\":"
                 "\"string\",\"title\":\"Answer\"}},\"required\":["
                 "\"answer\"]}"));
      acp_json_write_obj_end(a->w);
      params = wdata(a, &n);
      t->refs++;
      t->waiting = true;
      rv =
          acp_agent_elicitation_create(a->agent, params, n, on_elicit, t, NULL);
      if (rv != 0) {
        t->refs--;
        t->waiting = false;
        turn_fail(t, -32603, "cannot send elicitation/create");
      }
      return;
    }
    case STEP_SUBAGENT:
    case STEP_MESSAGE:
    case STEP_AUTH:
    case STEP_TURN_USAGE:
    case STEP_ELICIT_URL:
      if (!a->unstable) {
        snprintf(buf, sizeof(buf), "this command needs acp agent --unstable\n");
        send_text(a, s, buf);
        break;
      }
      if (step_unstable(t, st))
        return;
      break;
    case STEP_CANCELLABLE:
      new_tool_id(t);
      /* v2: the client may cancel this one call (tool_call/cancel); v1
       * has no such method, so there only session/cancel ends it. */
      acp_agent_send_tool_call(
          a->agent, s->id, t->tool_id, st->arg, tool_kind(st, "execute"),
          "in_progress", is_v2(a) ? "{\"capabilities\":{\"cancel\":{}}}" : NULL,
          is_v2(a) ? strlen("{\"capabilities\":{\"cancel\":{}}}") : 0);
      t->cancellable = true;
      t->waiting = true;
      return;
    case STEP_DIFF:
      step_diff(t, st);
      break;
    case STEP_WAIT:
      send_text(a, s, "waiting for session/cancel\n");
      t->waiting = true; /* only session/cancel ends this turn */
      return;
    case STEP_SLEEP:
      if (!t->timer_init) {
        uv_timer_init(&a->loop, &t->timer);
        t->timer.data = t;
        t->timer_init = true;
        t->refs++;
      }
      t->waiting = true;
      uv_timer_start(&t->timer, timer_fired,
                     st->num > 0 ? (uint64_t)st->num : 0, 0);
      return;
    case STEP_ERROR:
      turn_fail(t, st->num ? st->num : -32603,
                st->arg[0] ? st->arg : "error requested by the prompt");
      return;
    case STEP_STOP:
      turn_finish(t, st->arg[0] ? st->arg : "end_turn");
      return;
    case STEP_BIG:
      step_big(t, st->num);
      break;
    case STEP_CHUNKS:
      step_chunks(t, st->num, st->arg);
      break;
    case STEP_UNKNOWN:
    default:
      if (st->kind == STEP_UNKNOWN && st->arg != NULL && step_mcp(t, st->arg))
        return;
      snprintf(buf, sizeof(buf), "unknown command: %.200s\n",
               st->arg ? st->arg : "");
      send_text(a, s, buf);
      break;
    }
    t->pc++;
  }
}

/* MARK: - MCP servers of a session (--mcp-acp native) */

/* A running stdio MCP server: its process, and the rpc binding its
 * stdout/stdin to the server's MCP client. Freed by stdio_close(). */
typedef struct stdio_conn {
  mcpsrv *m; /* NULL once detached from its server */
  acp_mcp_client *client;
  acp_uv_process *proc;
  acp_uv_rpc *rpc;
} stdio_conn;

/* One MCP server declared in a session: MCP-over-ACP, consumed natively,
 * or a stdio server (e.g. `acp mcp-shim` written by a bridging
 * conductor), spawned on first use. */
struct mcpsrv {
  char *name;
  char *id;
  acp_mcp_acp_shape shape;
  acp_mcp_client *client;
  acp_mcp_acp_link *link;
  bool ready;
  mcpsrv *next;
  char **argv; /* stdio: command and args, NULL-terminated */
  bool http;   /* an http server, reached through `acp mcp relay` */
  char **env;  /* stdio: "NAME=value" additions, NULL-terminated */
  stdio_conn *sc;
};

static void strv_free(char **v) {
  size_t i;
  for (i = 0; v != NULL && v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

static void stdio_on_rpc_closed(acp_uv_rpc *r, void *ud) {
  stdio_conn *sc = ud;
  (void)r;
  acp_uv_process_close(sc->proc, NULL);
  acp_mcp_client_free(sc->client);
  free(sc);
}

/* Detach a stdio server's connection: its pending requests complete with
 * ACP_ERR_CLOSED, the process is killed, everything is freed later. */
static void stdio_close(stdio_conn *sc) {
  if (sc->m != NULL) {
    sc->m->sc = NULL;
    sc->m->client = NULL;
    sc->m->ready = false;
    sc->m = NULL;
  }
  if (sc->rpc != NULL) {
    acp_uv_rpc *r = sc->rpc;
    sc->rpc = NULL;
    /* The connection is over: its pending calls are answered with an
     * error here; a failure of theirs has nowhere left to go. */
    (void)acp_mcp_client_recv_eof(sc->client, 0);
    acp_uv_rpc_close(r, stdio_on_rpc_closed);
  }
}

static void stdio_on_end(acp_uv_rpc *r, int reason, void *ud) {
  (void)r;
  (void)reason;
  stdio_close(ud);
}

/* One /mcp-tools or /mcp-call in progress. */
typedef struct mcpop {
  turn *t;
  mcpsrv *srv;  /* the server being worked on */
  bool listing; /* /mcp-tools: walk every server */
  char *tool;
  char *args;
} mcpop;

static void mcp_servers_free(asession *s) {
  while (s->mcp != NULL) {
    mcpsrv *m = s->mcp;

    s->mcp = m->next;
    if (m->sc != NULL) {
      stdio_close(m->sc);
    } else {
      acp_mcp_acp_link_close(m->link);
      acp_mcp_client_free(m->client);
    }
    strv_free(m->argv);
    strv_free(m->env);
    free(m->name);
    free(m->id);
    free(m);
  }
}

/* A JSON string as a new C string (NULL if not a string). */
/* A decoded string as a C string, or NULL when absent or holding a NUL. */
static char *str_dup(acp_str v) {
  if (v.ptr == NULL || memchr(v.ptr, 0, v.len) != NULL)
    return NULL;
  return xstrndup(v.ptr, v.len);
}

/* An http or sse server as the argv of `acp mcp relay --url URL [--sse]
 * [--header "NAME: VALUE"]...`: the relay lives in acp-mcp, so this program
 * does not load the HTTP stack. */
static char **http_relay_argv(acp_str url_s, const acp_http_header *headers,
                              size_t nheaders, bool sse) {
  char *url = str_dup(url_s);
  char **argv;
  size_t n = 0, i;

  if (url == NULL)
    return NULL;
  argv = calloc(7 + 2 * nheaders, sizeof(char *));
  if (argv == NULL)
    exit(CLI_EXIT_FAILURE);
  argv[n++] = xstrndup(cli_self_path(), strlen(cli_self_path()));
  argv[n++] = xstrndup("mcp", 3);
  argv[n++] = xstrndup("relay", 5);
  argv[n++] = xstrndup("--url", 5);
  argv[n++] = url;
  if (sse)
    argv[n++] = xstrndup("--sse", 5);
  for (i = 0; i < nheaders; i++) {
    char *k = str_dup(headers[i].name);
    char *val = str_dup(headers[i].value);
    if (k != NULL && val != NULL) {
      char *h = malloc(strlen(k) + strlen(val) + 3);
      if (h == NULL)
        exit(CLI_EXIT_FAILURE);
      sprintf(h, "%s: %s", k, val);
      argv[n++] = xstrndup("--header", 8);
      argv[n++] = h;
    }
    free(k);
    free(val);
  }
  return argv;
}

/*
 * Record a stdio server ({name, command, args, env}), an http or an sse
 * server ({type, name, url, headers}) of a session, decoded with the
 * schema's codec (McpServer). Leniently: members the schema requires but
 * peers often leave out (args, env, headers) count as empty. `type:
 * "stdio"`, which some clients write though the schema's stdio form has no
 * type, is read as stdio.
 */
static void mcp_record_stdio(app *a, asession *s, const acp_json_val *e) {
  acp_mcp_server srv;
  acp_mcp_server_stdio stdio_alone;
  const acp_mcp_server_stdio *st = NULL;
  mcpsrv *m, *old;
  char *name = NULL;
  size_t n = 0, i;
  int rv;

  acp_arena_reset(a->arena);
  rv = acp_decode_ex(&acp_type_mcp_server, e, a->arena, &srv, NULL,
                     ACP_DECODE_LENIENT, NULL, 0);
  if (rv == 0 && srv.kind == ACP_MCP_SERVER_KIND_UNKNOWN &&
      ACP_JSON_STR_EQ_LIT(OBJ_GETL(e, "type"), "stdio") &&
      acp_decode_ex(&acp_type_mcp_server_stdio, e, a->arena, &stdio_alone, NULL,
                    ACP_DECODE_LENIENT, NULL, 0) == 0) {
    srv.kind = ACP_MCP_SERVER_KIND_STDIO;
    srv.stdio = &stdio_alone;
  }
  if (rv != 0)
    return;
  switch (srv.kind) {
  case ACP_MCP_SERVER_KIND_STDIO:
    st = srv.stdio;
    name = str_dup(st->name);
    break;
  case ACP_MCP_SERVER_KIND_HTTP:
    name = str_dup(srv.http->name);
    break;
  case ACP_MCP_SERVER_KIND_SSE:
    name = str_dup(srv.sse->name);
    break;
  default:
    return;
  }
  if (name == NULL)
    return;
  for (old = s->mcp; old != NULL; old = old->next)
    if (strcmp(old->name, name) == 0)
      break;
  if (old != NULL) { /* load/resume: already known */
    free(name);
    return;
  }
  m = calloc(1, sizeof(*m));
  if (m == NULL)
    exit(CLI_EXIT_FAILURE);
  m->name = name;
  if (st == NULL) {
    bool sse = srv.kind == ACP_MCP_SERVER_KIND_SSE;
    m->http = true;
    m->argv = sse ? http_relay_argv(srv.sse->url, srv.sse->headers,
                                    srv.sse->headers_count, true)
                  : http_relay_argv(srv.http->url, srv.http->headers,
                                    srv.http->headers_count, false);
    m->env = calloc(1, sizeof(char *));
    if (m->argv == NULL || m->env == NULL) {
      strv_free(m->argv);
      free(m->env);
      free(m->name);
      free(m);
      return;
    }
    m->next = s->mcp;
    s->mcp = m;
    return;
  }
  m->argv = calloc(st->args_count + 2, sizeof(char *));
  m->env = calloc(st->env_count + 1, sizeof(char *));
  if (m->argv == NULL || m->env == NULL)
    exit(CLI_EXIT_FAILURE);
  m->argv[n++] = str_dup(st->command);
  if (m->argv[0] == NULL) {
    strv_free(m->argv);
    strv_free(m->env);
    free(m->name);
    free(m);
    return;
  }
  for (i = 0; i < st->args_count; i++) {
    char *arg = str_dup(st->args[i]);
    if (arg != NULL)
      m->argv[n++] = arg;
  }
  n = 0;
  for (i = 0; i < st->env_count; i++) {
    char *k = str_dup(st->env[i].name);
    char *val = str_dup(st->env[i].value);
    if (k != NULL && val != NULL && k[0] != '\0' && strchr(k, '=') == NULL) {
      char *kv = malloc(strlen(k) + strlen(val) + 2);
      if (kv == NULL)
        exit(CLI_EXIT_FAILURE);
      sprintf(kv, "%s=%s", k, val);
      m->env[n++] = kv;
    }
    free(k);
    free(val);
  }
  m->next = s->mcp;
  s->mcp = m;
}

/* Spawn a stdio server for `m` and bind an MCP client to it. */
static int stdio_start(app *a, mcpsrv *m) {
  acp_uv_process_options *po = NULL;
  stdio_conn *sc = calloc(1, sizeof(*sc));
  size_t i;
  int rv;

  if (sc == NULL)
    return ACP_ERR_NOMEM;
  rv = acp_mcp_client_new(&sc->client, NULL, a->name, ACP_VERSION, NULL, NULL);
  if (rv == 0)
    rv = acp_uv_process_options_new(&po, NULL);
  if (rv == 0)
    rv = acp_uv_process_options_set_argv(po, (const char *const *)m->argv);
  for (i = 0; rv == 0 && m->env[i] != NULL; i++)
    rv = acp_uv_process_options_add_env(po, m->env[i]);
  if (rv == 0)
    rv = acp_uv_process_spawn(&sc->proc, &a->loop, po, sc, NULL, NULL);
  acp_uv_process_options_free(po);
  if (rv == 0)
    rv = acp_uv_rpc_new(&sc->rpc, acp_uv_process_link(sc->proc),
                        acp_mcp_client_session(sc->client), stdio_on_end, sc,
                        NULL);
  if (rv != 0) {
    acp_uv_process_close(sc->proc, NULL);
    acp_mcp_client_free(sc->client);
    free(sc);
    return rv;
  }
  sc->m = m;
  m->sc = sc;
  m->client = sc->client;
  m->ready = false;
  return 0;
}

/* Record the servers of a mcpServers array (`list`, a value of `doc`). */
static void mcp_record_list(app *a, asession *s, acp_json_doc *doc,
                            const acp_json_val *list) {
  const acp_json_val *e;

  for (e = acp_json_child(list); e != NULL; e = acp_json_next(e)) {
    const char *id;
    const char *name;
    size_t n;
    size_t nn;
    acp_mcp_acp_shape shape;
    mcpsrv *m;
    mcpsrv *old;

    if (acp_mcp_acp_decl_parse(doc, e, &id, &n, &shape) != 0) {
      mcp_record_stdio(a, s, e);
      continue;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL)
      exit(CLI_EXIT_FAILURE);
    m->id = xstrndup(id, n);
    m->shape = shape;
    if (acp_json_doc_str(doc, OBJ_GETL(e, "name"), &name, &nn) != 0) {
      name = m->id;
      nn = strlen(m->id);
    }
    m->name = xstrndup(name, nn);
    for (old = s->mcp; old != NULL; old = old->next)
      if (strcmp(old->id, m->id) == 0)
        break;
    if (old != NULL || a->mcp_acp_off) {
      /* Already known (load/resume), or not consumed: keep the name only
       * for listing when off. */
      if (old != NULL) {
        free(m->id);
        free(m->name);
        free(m);
        continue;
      }
    }
    m->next = s->mcp;
    s->mcp = m;
  }
}

/* Record the servers of session/new, load or resume, and keep their
 * declaration for the state file. */
static void mcp_record(app *a, asession *s, acp_agent_request *req) {
  const acp_json_val *list =
      OBJ_GETL(acp_agent_request_params(req), "mcpServers");
  const acp_rpc_msg *msg = acp_agent_request_msg(req);
  const char *raw;
  size_t n;

  if (msg == NULL)
    return;
  raw = acp_json_raw(list, &n);
  if (raw != NULL && acp_json_type_of(list) == ACP_JSON_ARRAY) {
    free(s->mcp_json);
    s->mcp_json = xstrndup(raw, n);
  }
  mcp_record_list(a, s, msg->doc, list);
}

static void mcp_step_next(mcpop *op);

static void mcp_op_end(mcpop *op) {
  turn *t = op->t;

  free(op->tool);
  free(op->args);
  free(op);
  turn_next(t);
}

static int mcp_on_list(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                       void *ud) {
  mcpop *op = ud;
  turn *t = turn_resume(op->t);
  const acp_json_val *tool;
  char buf[512];

  (void)c;
  if (t == NULL) {
    free(op->tool);
    free(op->args);
    free(op);
    return 0;
  }
  if (status != 0) {
    snprintf(buf, sizeof(buf), "%s: tools/list failed (%s)\n", op->srv->name,
             acp_strerror(status));
    send_text(t->a, t->s, buf);
  } else {
    /* One line per server, sent as one chunk. */
    size_t used;
    used = (size_t)snprintf(buf, sizeof(buf), "%s (%s):", op->srv->name,
                            op->srv->http           ? "http"
                            : op->srv->argv != NULL ? "stdio"
                                                    : "acp");
    for (tool = acp_json_child(OBJ_GETL(msg->result, "tools"));
         tool != NULL && used < sizeof(buf) - 2; tool = acp_json_next(tool)) {
      const char *s;
      size_t n;

      if (acp_json_doc_str(msg->doc, OBJ_GETL(tool, "name"), &s, &n) == 0)
        used += (size_t)snprintf(buf + used, sizeof(buf) - used, " %.*s",
                                 (int)(n > 200 ? 200 : n), s);
    }
    if (used > sizeof(buf) - 2)
      used = sizeof(buf) - 2;
    buf[used] = '\n';
    buf[used + 1] = '\0';
    send_text(t->a, t->s, buf);
  }
  op->srv = op->srv->next;
  mcp_step_next(op);
  return 0;
}

static int mcp_on_call(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                       void *ud) {
  mcpop *op = ud;
  turn *t;
  const acp_json_val *b;
  char buf[512];
  bool is_error = false;

  (void)c;
  op->t->mcp_call = NULL;
  t = turn_resume(op->t);
  if (t == NULL) {
    free(op->tool);
    free(op->args);
    free(op);
    return 0;
  }
  if (status == ACP_ERR_PROTOCOL) {
    snprintf(buf, sizeof(buf), "%s/%s failed: %.*s (%" PRId64 ")\n",
             op->srv->name, op->tool,
             (int)(msg->error_message_len > 300 ? 300 : msg->error_message_len),
             msg->error_message ? msg->error_message : "", msg->error_code);
    send_text(t->a, t->s, buf);
  } else if (status != 0) {
    snprintf(buf, sizeof(buf), "%s/%s failed: %s\n", op->srv->name, op->tool,
             acp_strerror(status));
    send_text(t->a, t->s, buf);
  } else {
    (void)acp_json_get_bool(OBJ_GETL(msg->result, "isError"), &is_error);
    if (is_error)
      send_text(t->a, t->s, "(tool error) ");
    for (b = acp_json_child(OBJ_GETL(msg->result, "content")); b != NULL;
         b = acp_json_next(b)) {
      const char *s;
      size_t n;

      if (ACP_JSON_STR_EQ_LIT(OBJ_GETL(b, "type"), "text") &&
          acp_json_doc_str(msg->doc, OBJ_GETL(b, "text"), &s, &n) == 0)
        send_chunk(t->a, t->s, "agent_message_chunk", s, n);
    }
    send_text(t->a, t->s, "\n");
  }
  mcp_op_end(op);
  return 0;
}

/* Report `text` for the current server and go on: the next server when
 * listing, the end of the command when calling. */
static void mcp_skip(mcpop *op, const char *text) {
  send_text(op->t->a, op->t->s, text);
  if (op->listing) {
    op->srv = op->srv->next;
    mcp_step_next(op);
  } else {
    mcp_op_end(op);
  }
}

/* A step could not be sent: undo its wait and report why. */
static void mcp_step_failed(mcpop *op, int rv) {
  char buf[256];

  op->t->refs--;
  op->t->waiting = false;
  snprintf(buf, sizeof(buf), "%s: %s\n", op->srv->name, acp_strerror(rv));
  mcp_skip(op, buf);
}

/* The command itself on a ready server: tools/list or tools/call. */
static int mcp_request(mcpop *op) {
  acp_mcp_client *c = op->srv->client;

  if (op->listing)
    return acp_mcp_client_list(c, ACP_MCP_LIST_TOOLS, NULL, NULL, 0,
                               mcp_on_list, op, NULL);
  int64_t id;
  int rv = acp_mcp_client_call_tool(c, op->tool, op->args, strlen(op->args),
                                    NULL, 0, mcp_on_call, op, &id);

  if (rv == 0) {
    op->t->mcp_call = c;
    op->t->mcp_call_id = id;
  }
  return rv;
}

static int mcp_on_init(acp_mcp_client *c, int status, const acp_rpc_msg *msg,
                       void *ud) {
  mcpop *op = ud;

  (void)c;
  (void)msg;
  if (status == 0)
    op->srv->ready = true;
  if (turn_resume(op->t) == NULL) {
    free(op->tool);
    free(op->args);
    free(op);
    return 0;
  }
  if (status != 0) {
    char buf[256];

    snprintf(buf, sizeof(buf), "%s: initialize failed (%s)\n", op->srv->name,
             acp_strerror(status));
    mcp_skip(op, buf);
    return 0;
  }
  mcp_step_next(op);
  return 0;
}

static int mcp_on_open(acp_mcp_acp_link *link, int status,
                       const acp_rpc_msg *msg, void *ud) {
  mcpop *op = ud;
  turn *t = op->t;

  (void)msg;
  if (status != 0) {
    char buf[256];

    op->srv->link = NULL; /* freed by the library */
    if (turn_resume(t) == NULL) {
      free(op->tool);
      free(op->args);
      free(op);
      return 0;
    }
    snprintf(
        buf, sizeof(buf), "%s: mcp/connect refused (%.*s)\n", op->srv->name,
        msg != NULL && msg->error_message != NULL
            ? (int)(msg->error_message_len > 200 ? 200 : msg->error_message_len)
            : 0,
        msg != NULL && msg->error_message != NULL ? msg->error_message : "");
    mcp_skip(op, buf);
    return 0;
  }
  (void)link;
  if (acp_mcp_client_initialize(op->srv->client, 0, mcp_on_init, op) != 0)
    return ACP_ERR_NOMEM;
  return acp_mcp_acp_consumer_flush(t->a->mcp, 0);
}

/* mcp_step_next for a stdio server: spawn, initialize, list or call. */
static void mcp_step_stdio(mcpop *op) {
  turn *t = op->t;
  app *a = t->a;
  mcpsrv *m = op->srv;
  int rv = 0;

  t->refs++;
  t->waiting = true;
  if (m->sc == NULL) {
    rv = stdio_start(a, m);
    if (rv == 0)
      rv = acp_mcp_client_initialize(m->client, uv_now(&a->loop), mcp_on_init,
                                     op);
  } else if (!m->ready) {
    rv = ACP_ERR_INVALID_STATE;
  } else {
    rv = mcp_request(op);
  }
  if (rv != 0)
    mcp_step_failed(op, rv);
}

/* Do the next thing for `op`: connect, list, call, or end. */
static void mcp_step_next(mcpop *op) {
  turn *t = op->t;
  app *a = t->a;
  mcpsrv *m = op->srv;
  int rv;

  if (m == NULL) {
    if (!op->listing)
      send_text(a, t->s, "no such MCP server in this session\n");
    mcp_op_end(op);
    return;
  }
  if (m->argv != NULL) {
    mcp_step_stdio(op);
    return;
  }
  if (a->mcp_acp_off) {
    char buf[256];

    snprintf(buf, sizeof(buf),
             "%s (acp): not consumed (acp agent --mcp-acp off)\n", m->name);
    mcp_skip(op, buf);
    return;
  }
  t->refs++;
  t->waiting = true;
  if (m->client == NULL) {
    if (acp_mcp_client_new(&m->client, NULL, a->name, ACP_VERSION, NULL,
                           NULL) != 0)
      exit(CLI_EXIT_FAILURE);
  }
  if (m->link == NULL) {
    m->ready = false;
    rv = acp_mcp_acp_consumer_open(a->mcp, m->id, m->shape, m->client,
                                   mcp_on_open, op, &m->link);
  } else if (!m->ready) {
    rv = ACP_ERR_INVALID_STATE; /* still opening for another command */
  } else {
    rv = mcp_request(op);
  }
  if (rv == 0)
    rv = acp_mcp_acp_consumer_flush(a->mcp, 0);
  if (rv != 0)
    mcp_step_failed(op, rv);
}

/* /mcp-tools and /mcp-call SERVER TOOL {json}: 1 when `line` is one of
 * them (the step then advances the turn itself), else 0. */
static int step_mcp(turn *t, const char *line) {
  mcpop *op;

  if (strncmp(line, "/mcp-tools", 10) != 0 &&
      strncmp(line, "/mcp-call", 9) != 0)
    return 0;
  op = calloc(1, sizeof(*op));
  if (op == NULL)
    exit(CLI_EXIT_FAILURE);
  op->t = t;
  if (strncmp(line, "/mcp-tools", 10) == 0) {
    op->listing = true;
    op->srv = t->s->mcp;
    if (op->srv == NULL)
      send_text(t->a, t->s, "no MCP servers in this session\n");
  } else {
    const char *p = line + 9;
    const char *name;
    size_t name_len;
    const char *tool;
    size_t tool_len;
    mcpsrv *m;

    while (*p == ' ')
      p++;
    name = p;
    while (*p != '\0' && *p != ' ')
      p++;
    name_len = (size_t)(p - name);
    while (*p == ' ')
      p++;
    tool = p;
    while (*p != '\0' && *p != ' ')
      p++;
    tool_len = (size_t)(p - tool);
    while (*p == ' ')
      p++;
    op->tool = xstrndup(tool, tool_len);
    op->args = xstrndup(*p ? p : "{}", *p ? strlen(p) : 2);
    for (m = t->s->mcp; m != NULL; m = m->next)
      if (strlen(m->name) == name_len && memcmp(m->name, name, name_len) == 0)
        break;
    op->srv = m;
    if (tool_len == 0) {
      send_text(t->a, t->s, "usage: /mcp-call SERVER TOOL {json arguments}\n");
      mcp_op_end(op);
      return 1;
    }
  }
  /* mcp_step_next advances pc and resumes the turn when done. */
  mcp_step_next(op);
  return 1;
}

/* Append bytes to the scratch buffer (kept across prompts). */
static int scratch_add(app *a, const char *s, size_t n) {
  if (a->scratch_cap - a->scratch_len < n) {
    size_t cap = a->scratch_cap ? a->scratch_cap : 256;
    char *p;
    while (cap - a->scratch_len < n) {
      if (cap > SIZE_MAX / 2)
        return ACP_ERR_NOMEM;
      cap *= 2;
    }
    p = realloc(a->scratch, cap);
    if (p == NULL)
      return ACP_ERR_NOMEM;
    a->scratch = p;
    a->scratch_cap = cap;
  }
  if (n > 0)
    memcpy(a->scratch + a->scratch_len, s, n);
  a->scratch_len += n;
  return 0;
}

/* The prompt's content blocks as plain text. A single text block (the
 * common case, and the benchmark's) is returned in place, decoded from the
 * message; otherwise the blocks are joined into the app's scratch buffer,
 * reused across prompts so that large prompts cost no fresh pages. Valid
 * until the handler returns. */
static int prompt_text(app *a, const acp_rpc_msg *msg,
                       const acp_json_val *prompt, const char **out,
                       size_t *len_out) {
  const acp_json_val *b;
  const char *s = NULL;
  size_t slen = 0;
  int rv = 0;

  if (acp_json_len(prompt) == 1) {
    b = acp_json_child(prompt);
    if (ACP_JSON_STR_EQ_LIT(OBJ_GETL(b, "type"), "text") &&
        msg_str(msg, b, "text", out, len_out) == 0)
      return 0;
  }
  a->scratch_len = 0;
  for (b = acp_json_child(prompt); b != NULL && rv == 0; b = acp_json_next(b)) {
    const char *type = NULL;
    size_t tlen = 0;
    msg_str(msg, b, "type", &type, &tlen);
    if (type == NULL)
      continue;
    if (tlen == 4 && memcmp(type, "text", 4) == 0) {
      if (msg_str(msg, b, "text", &s, &slen) == 0)
        rv = scratch_add(a, s, slen);
    } else if (tlen == 13 && memcmp(type, "resource_link", 13) == 0) {
      if (msg_str(msg, b, "uri", &s, &slen) == 0) {
        rv = scratch_add(a, "\n[resource_link ", 16);
        if (rv == 0)
          rv = scratch_add(a, s, slen);
        if (rv == 0)
          rv = scratch_add(a, "]\n", 2);
      }
    } else if (tlen == 8 && memcmp(type, "resource", 8) == 0) {
      const acp_json_val *r = OBJ_GETL(b, "resource");
      if (msg_str(msg, r, "uri", &s, &slen) == 0) {
        rv = scratch_add(a, "\n[resource ", 11);
        if (rv == 0)
          rv = scratch_add(a, s, slen);
        if (rv == 0)
          rv = scratch_add(a, "]\n", 2);
      }
    }
  }
  if (rv != 0)
    return rv;
  *out = a->scratch_len > 0 ? a->scratch : "";
  *len_out = a->scratch_len;
  return 0;
}

/* MARK: - Agent method handlers */

static int on_initialize(acp_agent *agent, acp_agent_request *req, void *ud) {
  app *a = ud;
  const acp_json_val *p = acp_agent_request_params(req);
  const acp_json_val *caps = OBJ_GETL(p, "clientCapabilities");
  /* v2 (acp agent --protocol-v2 and a client asking 2): the v2 shape. */
  bool v2 = a->protocol_v2 &&
            acp_agent_request_protocol_version(req) >= ACP_PROTOCOL_V2;
  static const char caps_v2[] =
      "{\"session\":{\"prompt\":{\"image\":false,\"audio\":false,"
      "\"embeddedContext\":true},\"delete\":{}}}";
  const acp_json_val *fs = OBJ_GETL(caps, "fs");
  bool b;
  size_t n;
  const char *info;
  static const char caps_http[] =
      "{\"loadSession\":true,\"promptCapabilities\":{\"image\":false,"
      "\"audio\":false,\"embeddedContext\":true},\"mcpCapabilities\":{"
      "\"http\":true,\"sse\":true},\"sessionCapabilities\":{\"list\":{},"
      "\"resume\":{},\"close\":{},\"delete\":{}}}";
  static const char caps_no_http[] =
      "{\"loadSession\":true,\"promptCapabilities\":{\"image\":false,"
      "\"audio\":false,\"embeddedContext\":true},\"mcpCapabilities\":{"
      "\"http\":false,\"sse\":false},\"sessionCapabilities\":{\"list\":{},"
      "\"resume\":{},\"close\":{},\"delete\":{}}}";
  /* --unstable: the session methods and auth/status, advertised. */
  static const char caps_unstable[] =
      "{\"loadSession\":true,\"promptCapabilities\":{\"image\":false,"
      "\"audio\":false,\"embeddedContext\":true},\"mcpCapabilities\":{"
      "\"http\":%s,\"sse\":%s},\"sessionCapabilities\":{\"list\":{},"
      "\"resume\":{},\"close\":{},\"delete\":{},\"fork\":{},\"title\":{},"
      "\"archive\":{},\"status\":{}},\"auth\":{\"status\":{}},%s}";
  char ucaps[sizeof(caps_unstable) + 512];
  const char *agent_caps = a->mcp_http_off ? caps_no_http : caps_http;
  size_t agent_caps_len;

  if (a->unstable) {
    const char *on = a->mcp_http_off ? "false" : "true";
    snprintf(ucaps, sizeof(ucaps), caps_unstable, on, on,
             agent_nes_capabilities(a->nes, caps));
    agent_caps = ucaps;
  }
  if (v2) {
    agent_caps = caps_v2;
    caps = OBJ_GETL(p, "capabilities");
    fs = NULL; /* v2 has no fs or terminal client methods */
  }
  agent_caps_len = strlen(agent_caps);
  acp_json_writer *cw = NULL;
  int rv;

  a->fs_read = acp_json_get_bool(OBJ_GETL(fs, "readTextFile"), &b) == 0 && b;
  a->fs_write = acp_json_get_bool(OBJ_GETL(fs, "writeTextFile"), &b) == 0 && b;
  a->terminal = acp_json_get_bool(OBJ_GETL(caps, "terminal"), &b) == 0 && b;
  a->elicitation =
      acp_json_type_of(OBJ_GETL(caps, "elicitation")) == ACP_JSON_OBJECT;
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "name", a->name);
  kvs(a->w, "title", "libacp reference agent");
  kvs(a->w, "version", ACP_VERSION);
  acp_json_write_obj_end(a->w);
  info = wdata(a, &n);
  if (!a->mcp_acp_off && !v2) {
    /* --mcp-acp native: advertise mcpCapabilities.acp. */
    if (acp_json_writer_new(&cw, 0, NULL) != 0 ||
        acp_mcp_acp_caps_enable(cw, agent_caps, agent_caps_len) != 0)
      exit(CLI_EXIT_FAILURE);
    agent_caps = acp_json_writer_data(cw, &agent_caps_len);
  }
  rv = acp_agent_respond_initialize(agent, req, agent_caps, agent_caps_len,
                                    info, n, "[]", 2);
  acp_json_writer_free(cw);
  return rv == 0 ? 0 : ACP_ERR_CALLBACK_FAILURE;
}

static int on_authenticate(acp_agent *agent, acp_agent_request *req, void *ud) {
  (void)ud;
  /* No auth methods are advertised, so no methodId can be valid. */
  acp_agent_respond_error(agent, req, -32602, "unknown authentication method",
                          NULL, 0);
  return 0;
}

/* v2 tool_call/cancel and terminal/cancel: no tool call or terminal of
 * this agent advertises capabilities.cancel, and the spec answers -32602
 * for one that is unknown, final or not cancellable. */
static int on_cancel_not_cancellable(acp_agent *agent, acp_agent_request *req,
                                     void *ud) {
  (void)ud;
  acp_agent_respond_error(agent, req, -32602,
                          "Invalid params: not a cancellable tool call or "
                          "terminal of this session",
                          NULL, 0);
  return 0;
}

/* v2 tool_call/cancel: the /cancellable call of the session's running turn
 * stops. Answered first (accepted), then confirmed with a final status; the
 * turn goes on with its next step. Anything else: -32602. */
static int on_tool_call_cancel(acp_agent *agent, acp_agent_request *req,
                               void *ud) {
  app *a = ud;
  asession *s = find_session(a, acp_agent_request_session_id(req));
  turn *t = s != NULL ? s->turn : NULL;
  const acp_v2_cancel_tool_call_request *p = NULL;
  static const char gone[] = "{\"capabilities\":null}";

  /* The generated v2 params (types_v2.h); the role checked them already. */
  acp_arena_reset(a->arena);
  if (t == NULL || !t->cancellable || t->done ||
      acp_agent_request_decode(req, a->arena, (const void **)&p) != 0 ||
      p->tool_call_id.len != strlen(t->tool_id) ||
      memcmp(p->tool_call_id.ptr, t->tool_id, p->tool_call_id.len) != 0)
    return on_cancel_not_cancellable(agent, req, ud);
  acp_agent_respond_empty(agent, req);
  t->cancellable = false;
  acp_agent_send_tool_call_update(agent, s->id, t->tool_id, "cancelled", gone,
                                  sizeof(gone) - 1);
  send_text(a, s, "tool call cancelled\n");
  t->waiting = false;
  turn_next(t);
  return 0;
}

/* v2 terminal/cancel: stop the command a v2 /run runs (SIGTERM). Answered
 * first; the terminal_update with its exitStatus confirms it. */
static int on_terminal_cancel(acp_agent *agent, acp_agent_request *req,
                              void *ud) {
  app *a = ud;
  asession *s = find_session(a, acp_agent_request_session_id(req));
  turn *t = s != NULL ? s->turn : NULL;
  aterm *at = t != NULL ? t->term : NULL;
  const acp_v2_cancel_terminal_request *p = NULL;

  acp_arena_reset(a->arena);
  if (at == NULL || at->exited || at->cancelled ||
      acp_agent_request_decode(req, a->arena, (const void **)&p) != 0 ||
      p->terminal_id.len != strlen(at->id) ||
      memcmp(p->terminal_id.ptr, at->id, p->terminal_id.len) != 0)
    return on_cancel_not_cancellable(agent, req, ud);
  acp_agent_respond_empty(agent, req);
  at->cancelled = true;
  aterm_stop(at);
  return 0;
}

static int on_empty(acp_agent *agent, acp_agent_request *req, void *ud) {
  (void)ud;
  acp_agent_respond_empty(agent, req);
  return 0;
}

/* A session id no session here has: 128 random bits from the OS, so that
 * ids stay unique across processes and restarts (a client may keep them
 * and resume later) without a clock or a shared counter, and cannot be
 * guessed by another client of the same state dir; sequential for tests. */
static void new_session_id(app *a, char *buf, size_t size) {
  static const char hex[] = "0123456789abcdef";
  unsigned char r[16];
  size_t i;

  for (;;) {
    if (a->sequential_ids) {
      snprintf(buf, size, "sess_%u", ++a->next_session);
    } else {
      if (uv_random(NULL, NULL, r, sizeof(r), 0, NULL) != 0) {
        fputs("acp agent: no random source for session ids\n", stderr);
        exit(CLI_EXIT_FAILURE);
      }
      memcpy(buf, "sess_", 5);
      for (i = 0; i < sizeof(r) && 5 + 2 * i + 2 < size; i++) {
        buf[5 + 2 * i] = hex[r[i] >> 4];
        buf[5 + 2 * i + 1] = hex[r[i] & 15];
      }
      buf[5 + 2 * i] = '\0';
    }
    if (find_session(a, buf) == NULL && find_broken(a, buf) == NULL)
      return;
  }
}

static asession *session_alloc(app *a, const char *id, const char *cwd,
                               size_t cwd_len) {
  asession *s = calloc(1, sizeof(*s));

  if (s == NULL)
    exit(CLI_EXIT_FAILURE);
  s->id = xstrndup(id, strlen(id));
  s->cwd = xstrndup(cwd, cwd_len);
  snprintf(s->mode, sizeof(s->mode), "code");
  snprintf(s->model, sizeof(s->model), "fast");
  if (acp_json_writer_new(&s->history, 0, NULL) != 0)
    exit(CLI_EXIT_FAILURE);
  /* The history writer holds a JSON array so it stays well-formed. */
  acp_json_write_arr_begin(s->history);
  s->next = a->sessions;
  if (a->sessions)
    a->sessions->prev = s;
  a->sessions = s;
  session_index(a, s);
  return s;
}

static asession *session_create(app *a, const char *cwd, size_t cwd_len) {
  char id[40];

  new_session_id(a, id, sizeof(id));
  return session_alloc(a, id, cwd, cwd_len);
}

static void session_destroy(app *a, asession *s) {
  if (s->queued) {
    asession **pp = &a->dirty_list;
    while (*pp != s)
      pp = &(*pp)->dnext;
    *pp = s->dnext;
  }
  *(s->prev ? &s->prev->next : &a->sessions) = s->next;
  if (s->next)
    s->next->prev = s->prev;
  session_unindex(a, s);
  if (s->turn != NULL) {
    s->turn->s = NULL;
    turn_finish(s->turn, "cancelled");
  }
  mcp_servers_free(s);
  acp_json_writer_free(s->history);
  free(s->mcp_json);
  free(s->id);
  free(s->cwd);
  free(s->title);
  free(s);
}

/* A string member of a state file as a C string, or NULL. */
static char *state_str(app *a, const acp_json_val *obj, const char *key) {
  const char *v;
  size_t n;

  if (acp_json_type_of(acp_json_obj_getz(obj, key)) != ACP_JSON_STRING ||
      acp_json_doc_str(a->sdoc, acp_json_obj_getz(obj, key), &v, &n) != 0 ||
      memchr(v, 0, n) != NULL)
    return NULL;
  return xstrndup(v, n);
}

/* Read DIR/ID.json back into a session. On failure, why[] says what is
 * wrong with the file and nothing was created. */
static int session_restore(app *a, const char *id, char *why, size_t size) {
  char *data = NULL;
  size_t len = 0;
  acp_json_err jerr;
  const acp_json_val *root;
  const acp_json_val *hist;
  const acp_json_val *v;
  char *sid = NULL;
  char *cwd = NULL;
  char *mode = NULL;
  char *model = NULL;
  char *title = NULL;
  bool verbose = false;
  uint64_t next_tool = 0;
  asession *s;
  int rv = -1;

  if (store_read(a->state_dir, id, &data, &len) != 0) {
    snprintf(why, size, "%s", strerror(errno));
    goto cleanup;
  }
  memset(&jerr, 0, sizeof(jerr));
  if (acp_json_doc_parse(a->sdoc, data, len, &jerr) != 0) {
    snprintf(why, size, "not valid JSON (%s at byte %zu)",
             jerr.msg ? jerr.msg : "parse error", jerr.pos);
    goto cleanup;
  }
  root = acp_json_doc_root(a->sdoc);
  hist = OBJ_GETL(root, "history");
  sid = state_str(a, root, "sessionId");
  cwd = state_str(a, root, "cwd");
  mode = state_str(a, root, "mode");
  model = state_str(a, root, "model");
  title = state_str(a, root, "title");
  if (acp_json_type_of(root) != ACP_JSON_OBJECT) {
    snprintf(why, size, "not a JSON object");
  } else if (sid == NULL || strcmp(sid, id) != 0) {
    snprintf(why, size, "its sessionId is not %s", id);
  } else if (cwd == NULL || cwd[0] != '/') {
    snprintf(why, size, "no absolute cwd");
  } else if (mode == NULL ||
             (strcmp(mode, "ask") != 0 && strcmp(mode, "code") != 0)) {
    snprintf(why, size, "no valid mode");
  } else if (model == NULL ||
             (strcmp(model, "fast") != 0 && strcmp(model, "smart") != 0)) {
    snprintf(why, size, "no valid model");
  } else if (acp_json_type_of(hist) != ACP_JSON_ARRAY) {
    snprintf(why, size, "no history array");
  } else if (acp_json_get_bool(OBJ_GETL(root, "verbose"), &verbose) != 0 ||
             acp_json_get_uint64(OBJ_GETL(root, "nextTool"), &next_tool) != 0) {
    snprintf(why, size, "no valid verbose or nextTool");
  } else {
    rv = 0;
  }
  if (rv != 0)
    goto cleanup;
  s = session_alloc(a, id, cwd, strlen(cwd));
  snprintf(s->mode, sizeof(s->mode), "%s", mode);
  snprintf(s->model, sizeof(s->model), "%s", model);
  s->verbose = verbose;
  s->title = title;
  title = NULL;
  (void)acp_json_get_bool(OBJ_GETL(root, "archived"), &s->archived);
  for (v = acp_json_child(hist); v != NULL; v = acp_json_next(v)) {
    size_t n;
    const char *raw = acp_json_raw(v, &n);
    if (acp_json_type_of(v) == ACP_JSON_OBJECT)
      acp_json_write_raw(s->history, raw, n);
  }
  /* Tool call ids go on from where the file's process stopped, so a
   * loaded history never shows two calls with one id. */
  if (next_tool > a->next_tool && next_tool < UINT32_MAX)
    a->next_tool = (unsigned)next_tool;
  v = OBJ_GETL(root, "mcpServers");
  if (acp_json_type_of(v) == ACP_JSON_ARRAY) {
    size_t n;
    const char *raw = acp_json_raw(v, &n);
    s->mcp_json = xstrndup(raw, n);
    mcp_record_list(a, s, a->sdoc, v);
  }
cleanup:
  free(data);
  free(sid);
  free(cwd);
  free(mode);
  free(model);
  free(title);
  return rv;
}

/* --state-dir: bring back every session of DIR. A file that cannot be
 * read is reported, kept as it is, and its session answers with why. */
static int restore_all(app *a) {
  char **ids = NULL;
  char why[400];
  size_t i;

  if (store_mkdir(a->state_dir) != 0 || store_list(a->state_dir, &ids) != 0) {
    cli_err("agent", "--state-dir %s: %s", a->state_dir, strerror(errno));
    return -1;
  }
  for (i = 0; ids[i] != NULL; i++) {
    struct broken *b;
    char msg[600];

    if (session_restore(a, ids[i], why, sizeof(why)) == 0)
      continue;
    snprintf(msg, sizeof(msg), "session %s cannot be restored: %s/%s.json: %s",
             ids[i], a->state_dir, ids[i], why);
    cli_err("agent", "%s", msg);
    b = calloc(1, sizeof(*b));
    if (b == NULL)
      exit(CLI_EXIT_FAILURE);
    b->id = xstrndup(ids[i], strlen(ids[i]));
    b->why = xstrndup(msg, strlen(msg));
    b->next = a->broken;
    a->broken = b;
  }
  store_ids_free(ids);
  return 0;
}

static int check_cwd(acp_agent *agent, acp_agent_request *req, const char **cwd,
                     size_t *len) {
  if (acp_agent_request_param_str(req, "cwd", cwd, len) != 0 || *len == 0 ||
      (*cwd)[0] != '/') {
    acp_agent_respond_error(agent, req, -32602,
                            "Invalid params: cwd must be an absolute path",
                            NULL, 0);
    return -1;
  }
  return 0;
}

/* Answer `req` with the JSON in a->w. */
static int respond_w(app *a, acp_agent_request *req) {
  size_t n;
  const char *r = wdata(a, &n);

  return acp_agent_respond(a->agent, req, r, n);
}

static int respond_state(app *a, acp_agent_request *req, asession *s,
                         bool with_id) {
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  if (with_id) {
    kvs(a->w, "sessionId", s->id);
  }
  write_session_state(a, s);
  acp_json_write_obj_end(a->w);
  return respond_w(a, req);
}

static int on_session_new(acp_agent *agent, acp_agent_request *req, void *ud) {
  app *a = ud;
  const char *cwd;
  size_t len;
  asession *s;

  if (check_cwd(agent, req, &cwd, &len) != 0)
    return 0;
  s = session_create(a, cwd, len);
  s->open = true;
  mcp_record(a, s, req);
  session_save(a, s);
  respond_state(a, req, s, true);
  return 0;
}

static asession *session_param(app *a, acp_agent_request *req) {
  const char *id = acp_agent_request_session_id(req);
  asession *s = find_session(a, id);
  struct broken *b;

  if (s != NULL)
    return s;
  b = find_broken(a, id);
  if (b != NULL)
    acp_agent_respond_error(a->agent, req, -32603, b->why, NULL, 0);
  else
    acp_agent_respond_error(a->agent, req, -32002,
                            "Resource not found: "
                            "no such session",
                            NULL, 0);
  return NULL;
}

/*
 * Replay across versions. A session kept in --state-dir may have been
 * recorded by a v1 connection and resumed by a v2 one, or the other way
 * round; each history entry is sent in the shape of the connection that
 * replays it, so a client gets only kinds and members its version knows.
 * v2 (protocol/v2/session-setup.mdx) also requires a unique messageId for
 * every replayed message: a run of v1 chunks of one kind (no ids) is one
 * message, named replay_N. What has no counterpart is left out (v1
 * unstable session_message, subagent_update, plan_removed under v2; a
 * plan of a custom content type under v1).
 */
typedef struct replay_ctx {
  const char *last_kind; /* the kind of the previous chunk, or NULL */
  unsigned seq;          /* replay_N message ids given so far */
  char **tools;          /* v1: tool call ids already created */
  size_t ntools;
} replay_ctx;

static bool key_is(acp_json_doc *doc, const acp_json_val *k, const char *z) {
  const char *ks;
  size_t kn;

  return acp_json_doc_str(doc, k, &ks, &kn) == 0 && kn == strlen(z) &&
         memcmp(ks, z, kn) == 0;
}

/* Write the members of object `o` except `skip` and `skip2` (no braces). */
static void copy_members(acp_json_writer *w, acp_json_doc *doc,
                         const acp_json_val *o, const char *skip,
                         const char *skip2) {
  const acp_json_val *k;

  for (k = acp_json_child(o); k != NULL; k = acp_json_next(acp_json_next(k))) {
    const char *ks;
    size_t kn;
    if (acp_json_doc_str(doc, k, &ks, &kn) != 0 ||
        (skip != NULL && key_is(doc, k, skip)) ||
        (skip2 != NULL && key_is(doc, k, skip2)))
      continue;
    acp_json_write_key(w, ks, kn);
    acp_json_write_val(w, acp_json_next(k));
  }
}

/* A tool call's content in the other version's shape: diffs differ (v1
 * path/oldText/newText, v2 changes + optional patch); v2 -> v1 says what
 * changed as text, since v1 cannot carry a diff without its text. */
static void write_tool_content(app *a, acp_json_doc *doc,
                               const acp_json_val *content, bool to_v2) {
  acp_json_writer *w = a->w;
  const acp_json_val *c;

  acp_json_write_arr_begin(w);
  for (c = acp_json_child(content); c != NULL; c = acp_json_next(c)) {
    const acp_json_val *old = OBJ_GETL(c, "oldText");
    const acp_json_val *path = OBJ_GETL(c, "path");
    const acp_json_val *ch;

    if (!ACP_JSON_STR_EQ_LIT(OBJ_GETL(c, "type"), "diff")) {
      acp_json_write_val(w, c);
    } else if (to_v2 && OBJ_GETL(c, "changes") == NULL) {
      acp_json_write_obj_begin(w);
      kvs(w, "type", "diff");
      acp_json_write_keyz(w, "changes");
      acp_json_write_arr_begin(w);
      acp_json_write_obj_begin(w);
      kvs(w, "operation",
          old == NULL || acp_json_type_of(old) == ACP_JSON_NULL ? "add"
                                                                : "modify");
      acp_json_write_keyz(w, "path");
      acp_json_write_val(w, path);
      kvs(w, "fileType", "text");
      acp_json_write_obj_end(w);
      acp_json_write_arr_end(w);
      acp_json_write_obj_end(w);
    } else if (!to_v2 && OBJ_GETL(c, "changes") != NULL) {
      for (ch = acp_json_child(OBJ_GETL(c, "changes")); ch != NULL;
           ch = acp_json_next(ch)) {
        const char *op = NULL, *pa = NULL;
        size_t on = 0, pn = 0;
        char *line;
        acp_json_doc_str(doc, OBJ_GETL(ch, "operation"), &op, &on);
        acp_json_doc_str(doc, OBJ_GETL(ch, "path"), &pa, &pn);
        line = malloc(on + pn + 8);
        if (line == NULL)
          exit(CLI_EXIT_FAILURE);
        snprintf(line, on + pn + 8, "%.*s %.*s", (int)on, op ? op : "change",
                 (int)pn, pa ? pa : "");
        acp_json_write_obj_begin(w);
        kvs(w, "type", "content");
        acp_json_write_keyz(w, "content");
        acp_json_write_obj_begin(w);
        kvs(w, "type", "text");
        kvs(w, "text", line);
        acp_json_write_obj_end(w);
        acp_json_write_obj_end(w);
        free(line);
      }
    } else {
      acp_json_write_val(w, c);
    }
  }
  acp_json_write_arr_end(w);
}

/* Whether a tool call's content has a diff in the other version's shape. */
static bool has_foreign_diff(const acp_json_val *content, bool to_v2) {
  const acp_json_val *c;

  for (c = acp_json_child(content); c != NULL; c = acp_json_next(c))
    if (ACP_JSON_STR_EQ_LIT(OBJ_GETL(c, "type"), "diff") &&
        (OBJ_GETL(c, "changes") == NULL) == to_v2)
      return true;
  return false;
}

static bool tool_seen(replay_ctx *rc, const char *id, size_t n) {
  size_t i;
  char **nt;

  for (i = 0; i < rc->ntools; i++)
    if (strlen(rc->tools[i]) == n && memcmp(rc->tools[i], id, n) == 0)
      return true;
  nt = realloc(rc->tools, (rc->ntools + 1) * sizeof(*nt));
  if (nt == NULL)
    exit(CLI_EXIT_FAILURE);
  rc->tools = nt;
  rc->tools[rc->ntools++] = xstrndup(id, n);
  return false;
}

/* Send one history entry `u` in the connection's version. */
static void replay_entry(app *a, asession *s, acp_json_doc *doc,
                         const acp_json_val *u, replay_ctx *rc) {
  static const char *const chunks[] = {
      "user_message_chunk", "agent_message_chunk", "agent_thought_chunk"};
  acp_json_writer *w = a->w;
  const acp_json_val *kind = OBJ_GETL(u, "sessionUpdate");
  const char *chunk = NULL;
  const char *out;
  size_t i, n;
  bool v2 = is_v2(a);

  for (i = 0; i < 3; i++)
    if (acp_json_str_eq(kind, chunks[i], strlen(chunks[i])))
      chunk = chunks[i];
  if (chunk == NULL)
    rc->last_kind = NULL;
  acp_json_writer_reset(w);
  if (v2 && chunk != NULL && OBJ_GETL(u, "messageId") == NULL) {
    char id[32];
    if (rc->last_kind != chunk)
      rc->seq++;
    rc->last_kind = chunk;
    snprintf(id, sizeof(id), "replay_%u", rc->seq);
    acp_json_write_obj_begin(w);
    kvs(w, "sessionUpdate", chunk);
    kvs(w, "messageId", id);
    copy_members(w, doc, u, "sessionUpdate", NULL);
    acp_json_write_obj_end(w);
  } else if (v2 && (ACP_JSON_STR_EQ_LIT(kind, "tool_call") ||
                    (ACP_JSON_STR_EQ_LIT(kind, "tool_call_update") &&
                     has_foreign_diff(OBJ_GETL(u, "content"), true)))) {
    acp_json_write_obj_begin(w); /* v2's one upsert */
    kvs(w, "sessionUpdate", "tool_call_update");
    copy_members(w, doc, u, "sessionUpdate", "content");
    if (OBJ_GETL(u, "content") != NULL) {
      acp_json_write_keyz(w, "content");
      write_tool_content(a, doc, OBJ_GETL(u, "content"), true);
    }
    acp_json_write_obj_end(w);
  } else if (v2 && ACP_JSON_STR_EQ_LIT(kind, "plan")) {
    acp_json_write_obj_begin(w);
    kvs(w, "sessionUpdate", "plan_update");
    acp_json_write_keyz(w, "plan");
    acp_json_write_obj_begin(w);
    kvs(w, "type", "items");
    kvs(w, "planId", "plan");
    acp_json_write_keyz(w, "entries");
    acp_json_write_val(w, OBJ_GETL(u, "entries"));
    acp_json_write_obj_end(w);
    acp_json_write_obj_end(w);
  } else if (v2 && (ACP_JSON_STR_EQ_LIT(kind, "plan_removed") ||
                    ACP_JSON_STR_EQ_LIT(kind, "session_message") ||
                    ACP_JSON_STR_EQ_LIT(kind, "session_message_chunk") ||
                    ACP_JSON_STR_EQ_LIT(kind, "subagent_update"))) {
    return; /* no v2 counterpart */
  } else if (!v2 && ACP_JSON_STR_EQ_LIT(kind, "user_message")) {
    const acp_json_val *b;
    for (b = acp_json_child(OBJ_GETL(u, "content")); b != NULL;
         b = acp_json_next(b)) {
      acp_json_writer_reset(w);
      acp_json_write_obj_begin(w);
      kvs(w, "sessionUpdate", "user_message_chunk");
      acp_json_write_keyz(w, "content");
      acp_json_write_val(w, b);
      acp_json_write_obj_end(w);
      out = wdata(a, &n);
      acp_agent_send_update_raw(a->agent, s->id, out, n);
    }
    return;
  } else if (!v2 && ACP_JSON_STR_EQ_LIT(kind, "tool_call_update")) {
    const char *id = NULL;
    size_t idn = 0;
    bool create;
    acp_json_doc_str(doc, OBJ_GETL(u, "toolCallId"), &id, &idn);
    create = id != NULL && !tool_seen(rc, id, idn);
    if (!create && !has_foreign_diff(OBJ_GETL(u, "content"), false)) {
      acp_json_write_val(w, u);
      out = wdata(a, &n);
      acp_agent_send_update_raw(a->agent, s->id, out, n);
      return;
    }
    acp_json_write_obj_begin(w);
    /* v1 creates a call with tool_call (title required) */
    kvs(w, "sessionUpdate", create ? "tool_call" : "tool_call_update");
    if (create && OBJ_GETL(u, "title") == NULL)
      kvs(w, "title", "tool");
    copy_members(w, doc, u, "sessionUpdate", "content");
    if (OBJ_GETL(u, "content") != NULL) {
      acp_json_write_keyz(w, "content");
      write_tool_content(a, doc, OBJ_GETL(u, "content"), false);
    }
    acp_json_write_obj_end(w);
  } else if (!v2 && ACP_JSON_STR_EQ_LIT(kind, "tool_call")) {
    const char *id = NULL;
    size_t idn = 0;
    if (acp_json_doc_str(doc, OBJ_GETL(u, "toolCallId"), &id, &idn) == 0)
      tool_seen(rc, id, idn);
    acp_json_write_val(w, u);
  } else if (!v2 && ACP_JSON_STR_EQ_LIT(kind, "plan_update")) {
    const acp_json_val *plan = OBJ_GETL(u, "plan");
    if (!ACP_JSON_STR_EQ_LIT(OBJ_GETL(plan, "type"), "items"))
      return; /* a custom content type: v1 has entries only */
    if (!a->unstable) {
      /* a stable v1 client knows only the session's one plan */
      acp_json_write_obj_begin(w);
      kvs(w, "sessionUpdate", "plan");
      acp_json_write_keyz(w, "entries");
      acp_json_write_val(w, OBJ_GETL(plan, "entries"));
      acp_json_write_obj_end(w);
    } else {
      acp_json_write_val(w, u);
    }
  } else {
    acp_json_write_val(w, u);
  }
  out = wdata(a, &n);
  acp_agent_send_update_raw(a->agent, s->id, out, n);
}

/* Send the session's history again, as the updates it was made of, in the
 * connection's version (replay_entry). */
static int replay_history(app *a, asession *s) {
  const acp_json_val *v;
  acp_json_doc *doc = a->doc;
  const char *hist;
  char *copy;
  size_t len, i;
  replay_ctx rc;

  memset(&rc, 0, sizeof(rc));
  /* The history writer holds an open array: parse a closed copy. */
  hist = acp_json_writer_data(s->history, &len);
  copy = malloc(len + 1);
  if (copy == NULL)
    return ACP_ERR_NOMEM;
  memcpy(copy, hist, len);
  copy[len] = ']';
  a->replaying = true;
  if (acp_json_doc_parse(doc, copy, len + 1, NULL) == 0) {
    for (v = acp_json_child(acp_json_doc_root(doc)); v != NULL;
         v = acp_json_next(v))
      replay_entry(a, s, doc, v, &rc);
  }
  a->replaying = false;
  for (i = 0; i < rc.ntools; i++)
    free(rc.tools[i]);
  free(rc.tools);
  free(copy);
  return 0;
}

static int on_session_load(acp_agent *agent, acp_agent_request *req, void *ud) {
  app *a = ud;
  asession *s;
  const char *cwd;
  size_t len;
  int rv;

  if (check_cwd(agent, req, &cwd, &len) != 0)
    return 0;
  s = session_param(a, req);
  if (s == NULL)
    return 0;
  /* Replay the conversation before answering, as session/load requires. */
  rv = replay_history(a, s);
  if (rv != 0)
    return rv;
  s->open = true;
  mcp_record(a, s, req);
  session_save(a, s);
  respond_state(a, req, s, false);
  return 0;
}

static int on_session_resume(acp_agent *agent, acp_agent_request *req,
                             void *ud) {
  app *a = ud;
  asession *s;
  const char *cwd;
  size_t len;
  bool replay = false;

  if (check_cwd(agent, req, &cwd, &len) != 0)
    return 0;
  if (is_v2(a)) {
    /* v2 resume replays only when asked (replayFrom {"type": "start"},
     * inclusive); a cursor it does not know is refused, never replaced by
     * another (protocol/v2/session-setup.mdx, rfds/v2/session-resume-
     * replay.mdx). */
    const acp_json_val *from =
        OBJ_GETL(acp_agent_request_params(req), "replayFrom");
    if (from != NULL && acp_json_type_of(from) != ACP_JSON_NULL) {
      if (!ACP_JSON_STR_EQ_LIT(OBJ_GETL(from, "type"), "start")) {
        acp_agent_respond_error(agent, req, -32602,
                                "Invalid params: unsupported replayFrom "
                                "cursor (this agent replays from "
                                "{\"type\":\"start\"} only)",
                                NULL, 0);
        return 0;
      }
      replay = true;
    }
  }
  s = session_param(a, req);
  if (s != NULL) {
    if (replay) {
      int rv = replay_history(a, s);
      if (rv != 0)
        return rv;
    }
    /* v2: a current-state snapshot after any replay, before the answer. */
    if (is_v2(a))
      acp_agent_send_state(agent, s->id, s->turn != NULL ? "running" : "idle");
    s->open = true;
    mcp_record(a, s, req);
    session_save(a, s);
    respond_state(a, req, s, false);
  }
  return 0;
}

static int on_session_list(acp_agent *agent, acp_agent_request *req, void *ud) {
  app *a = ud;
  const char *cwd = NULL;
  const char *cursor = NULL;
  size_t cwd_len = 0;
  size_t cursor_len = 0;
  unsigned long skip = 0;
  unsigned count = 0;
  unsigned seen = 0;
  asession *s;
  char buf[32];

  const char *filter = NULL;
  size_t filter_len = 0;
  int want_archived = 0; /* 0 exclude, 1 include, 2 only */

  acp_agent_request_param_str(req, "cwd", &cwd, &cwd_len);
  if (a->unstable &&
      acp_agent_request_param_str(req, "archived", &filter, &filter_len) == 0) {
    if (filter_len == 7 && memcmp(filter, "include", 7) == 0)
      want_archived = 1;
    else if (filter_len == 4 && memcmp(filter, "only", 4) == 0)
      want_archived = 2;
  }
  if (acp_agent_request_param_str(req, "cursor", &cursor, &cursor_len) == 0) {
    char tmp[24];
    char *end;
    snprintf(tmp, sizeof(tmp), "%.*s", (int)(cursor_len < 20 ? cursor_len : 20),
             cursor);
    skip = strtoul(tmp, &end, 10);
    if (*end != '\0' || cursor_len == 0) {
      acp_agent_respond_error(agent, req, -32602, "Invalid params: bad cursor",
                              NULL, 0);
      return 0;
    }
  }
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "sessions");
  acp_json_write_arr_begin(a->w);
  for (s = a->sessions; s != NULL; s = s->next) {
    if (cwd != NULL &&
        (strlen(s->cwd) != cwd_len || memcmp(s->cwd, cwd, cwd_len) != 0))
      continue;
    if ((want_archived == 0 && s->archived) ||
        (want_archived == 2 && !s->archived))
      continue;
    if (seen++ < skip)
      continue;
    if (count == LIST_PAGE)
      break;
    count++;
    acp_json_write_obj_begin(a->w);
    kvs(a->w, "sessionId", s->id);
    kvs(a->w, "cwd", s->cwd);
    if (s->title != NULL) {
      kvs(a->w, "title", s->title);
    }
    if (a->unstable) {
      /* sessionCapabilities.archive: on every listed session. */
      acp_json_write_keyz(a->w, "archived");
      acp_json_write_bool(a->w, s->archived);
    }
    acp_json_write_obj_end(a->w);
  }
  acp_json_write_arr_end(a->w);
  if (s != NULL) {
    snprintf(buf, sizeof(buf), "%lu", skip + count);
    kvs(a->w, "nextCursor", buf);
  }
  acp_json_write_obj_end(a->w);
  respond_w(a, req);
  return 0;
}

static int on_session_set_mode(acp_agent *agent, acp_agent_request *req,
                               void *ud) {
  app *a = ud;
  asession *s = session_param(a, req);
  const char *mode;
  size_t len;

  if (s == NULL)
    return 0;
  if (acp_agent_request_param_str(req, "modeId", &mode, &len) != 0 ||
      !((len == 3 && memcmp(mode, "ask", 3) == 0) ||
        (len == 4 && memcmp(mode, "code", 4) == 0))) {
    acp_agent_respond_error(agent, req, -32602,
                            "Invalid params: unknown modeId", NULL, 0);
    return 0;
  }
  snprintf(s->mode, sizeof(s->mode), "%.*s", (int)len, mode);
  session_save(a, s);
  acp_agent_respond_empty(agent, req);
  acp_agent_send_current_mode(agent, s->id, s->mode);
  return 0;
}

static int on_session_set_config(acp_agent *agent, acp_agent_request *req,
                                 void *ud) {
  app *a = ud;
  asession *s = session_param(a, req);
  const acp_json_val *p = acp_agent_request_params(req);
  const acp_json_val *value = OBJ_GETL(p, "value");
  const char *id;
  size_t len;
  bool b;

  if (s == NULL)
    return 0;
  if (acp_agent_request_param_str(req, "configId", &id, &len) != 0) {
    acp_agent_respond_error(agent, req, -32602,
                            "Invalid params: configId is required", NULL, 0);
    return 0;
  }
  if (is_v2(a) && len == 4 && memcmp(id, "mode", 4) == 0 &&
      (ACP_JSON_STR_EQ_LIT(value, "ask") ||
       ACP_JSON_STR_EQ_LIT(value, "code"))) {
    /* v2: the mode is a config option. */
    snprintf(s->mode, sizeof(s->mode), "%s",
             ACP_JSON_STR_EQ_LIT(value, "ask") ? "ask" : "code");
  } else if (len == 5 && memcmp(id, "model", 5) == 0 &&
             (ACP_JSON_STR_EQ_LIT(value, "fast") ||
              ACP_JSON_STR_EQ_LIT(value, "smart"))) {
    snprintf(s->model, sizeof(s->model), "%s",
             ACP_JSON_STR_EQ_LIT(value, "fast") ? "fast" : "smart");
  } else if (len == 7 && memcmp(id, "verbose", 7) == 0 &&
             acp_json_get_bool(value, &b) == 0) {
    s->verbose = b;
  } else {
    acp_agent_respond_error(agent, req, -32602,
                            "Invalid params: unknown config option or value",
                            NULL, 0);
    return 0;
  }
  session_save(a, s);
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  acp_json_write_keyz(a->w, "configOptions");
  write_config_options(a, s);
  acp_json_write_obj_end(a->w);
  respond_w(a, req);
  return 0;
}

static int on_session_close(acp_agent *agent, acp_agent_request *req,
                            void *ud) {
  app *a = ud;
  asession *s;

  const char *id = acp_agent_request_session_id(req);
  bool del = strcmp(acp_agent_request_method(req), "session/delete") == 0;

  if (del && a->state_dir != NULL && id != NULL &&
      store_id_ok(id, strlen(id)) &&
      (find_session(a, id) != NULL || find_broken(a, id) != NULL)) {
    /* Delete the file first: a session that cannot be removed stays. */
    if (store_remove(a->state_dir, id) != 0) {
      char why[512];
      snprintf(why, sizeof(why), "cannot remove %s/%s.json: %s", a->state_dir,
               id, strerror(errno));
      acp_agent_respond_error(agent, req, -32603, why, NULL, 0);
      return 0;
    }
    broken_drop(a, id);
  }
  /* Deleting a session that does not exist succeeds: the result the
   * client wants holds (protocol/v1/session-delete.mdx). */
  if (del && find_session(a, id) == NULL)
    return acp_agent_respond_empty(agent, req), 0;
  s = session_param(a, req);
  if (s == NULL)
    return 0;
  if (!del && a->state_dir != NULL) {
    /* session/close with a state dir: free what runs (the turn, MCP
     * servers) and keep the session, which load and resume bring back as
     * they would after a restart. */
    if (s->turn != NULL)
      turn_finish(s->turn, "cancelled");
    mcp_servers_free(s);
    s->open = false;
    session_save(a, s);
    acp_agent_respond_empty(agent, req);
    return 0;
  }
  /* session/close and session/delete: cancel the running turn and free
   * the session; without a state dir it stays loadable only while it
   * exists, so close forgets it like delete. */
  session_destroy(a, s);
  acp_agent_respond_empty(agent, req);
  return 0;
}

/* MARK: - Unstable session methods (--unstable) */

agent_nes *agent_nes_of(void *user_data) {
  return ((app *)user_data)->nes;
}

static int on_session_set_title(acp_agent *agent, acp_agent_request *req,
                                void *ud) {
  app *a = ud;
  asession *s = session_param(a, req);
  const char *title;
  size_t len;

  if (s == NULL)
    return 0;
  if (acp_agent_request_param_str(req, "title", &title, &len) != 0) {
    acp_agent_respond_error(agent, req, -32602,
                            "Invalid params: title must be a string", NULL, 0);
    return 0;
  }
  /* Normalized by trimming blanks; empty after that is refused. */
  while (len > 0 && (*title == ' ' || *title == '\t')) {
    title++;
    len--;
  }
  while (len > 0 && (title[len - 1] == ' ' || title[len - 1] == '\t'))
    len--;
  if (len == 0 || memchr(title, 0, len) != NULL) {
    acp_agent_respond_error(agent, req, -32602,
                            "Invalid params: the title is empty", NULL, 0);
    return 0;
  }
  free(s->title);
  s->title = xstrndup(title, len);
  session_save(a, s);
  acp_agent_respond_empty(agent, req);
  /* Clients attached to the session see the new title. */
  if (s->open)
    acp_agent_send_session_info(agent, s->id, s->title, NULL, 0);
  return 0;
}

/* session/archive and session/unarchive. */
static int on_session_archive(acp_agent *agent, acp_agent_request *req,
                              void *ud) {
  app *a = ud;
  asession *s = session_param(a, req);
  bool archive = strcmp(acp_agent_request_method(req), "session/archive") == 0;

  if (s == NULL)
    return 0;
  if (archive && s->open) {
    /* As if session/close had been called first. */
    if (s->turn != NULL)
      turn_finish(s->turn, "cancelled");
    mcp_servers_free(s);
    s->open = false;
  }
  s->archived = archive;
  session_save(a, s);
  acp_agent_respond_empty(agent, req);
  return 0;
}

static int on_session_status(acp_agent *agent, acp_agent_request *req,
                             void *ud) {
  app *a = ud;
  const char *id = acp_agent_request_session_id(req);
  asession *s = find_session(a, id);

  if (s == NULL && find_broken(a, id) == NULL) {
    /* -32002 with the sessionId in data (session/status, no side
     * effects). */
    acp_json_writer_reset(a->w);
    acp_json_write_obj_begin(a->w);
    kvs(a->w, "sessionId", id ? id : "");
    acp_json_write_obj_end(a->w);
    {
      size_t n;
      const char *data = wdata(a, &n);
      acp_agent_respond_error(agent, req, -32002,
                              "Resource not found: no such session", data, n);
    }
    return 0;
  }
  if (s == NULL) {
    session_param(a, req); /* the broken file's error */
    return 0;
  }
  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "status", s->open ? "open" : "saved");
  acp_json_write_obj_end(a->w);
  respond_w(a, req);
  return 0;
}

/* session/fork: a new session with a copy of the history and state. */
static int on_session_fork(acp_agent *agent, acp_agent_request *req, void *ud) {
  app *a = ud;
  asession *from;
  asession *s;
  const char *cwd;
  size_t len;
  const char *hist;

  if (check_cwd(agent, req, &cwd, &len) != 0)
    return 0;
  from = session_param(a, req);
  if (from == NULL)
    return 0;
  s = session_create(a, cwd, len);
  snprintf(s->mode, sizeof(s->mode), "%s", from->mode);
  snprintf(s->model, sizeof(s->model), "%s", from->model);
  s->verbose = from->verbose;
  if (from->title != NULL)
    s->title = xstrndup(from->title, strlen(from->title));
  /* The history writer holds an open array: parse a closed copy. */
  hist = acp_json_writer_data(from->history, &len);
  {
    char *copy = malloc(len + 1);
    const acp_json_val *v;

    if (copy == NULL)
      return ACP_ERR_NOMEM;
    memcpy(copy, hist, len);
    copy[len] = ']';
    if (acp_json_doc_parse(a->doc, copy, len + 1, NULL) == 0) {
      for (v = acp_json_child(acp_json_doc_root(a->doc)); v != NULL;
           v = acp_json_next(v)) {
        size_t n;
        const char *raw = acp_json_raw(v, &n);
        acp_json_write_raw(s->history, raw, n);
      }
    }
    free(copy);
  }
  s->open = true;
  mcp_record(a, s, req);
  session_save(a, s);
  respond_state(a, req, s, true);
  return 0;
}

static int on_auth_status(acp_agent *agent, acp_agent_request *req, void *ud) {
  app *a = ud;

  acp_json_writer_reset(a->w);
  acp_json_write_obj_begin(a->w);
  kvs(a->w, "state", a->auth_state);
  acp_json_write_obj_end(a->w);
  (void)agent;
  return respond_w(a, req), 0;
}

static int on_session_prompt(acp_agent *agent, acp_agent_request *req,
                             void *ud) {
  app *a = ud;
  asession *s = session_param(a, req);
  const acp_json_val *prompt;
  const acp_rpc_msg *msg = acp_agent_request_msg(req);
  turn *t;
  const char *text = NULL;
  size_t len = 0;
  int rv;

  if (s == NULL)
    return 0;
  prompt = OBJ_GETL(acp_agent_request_params(req), "prompt");
  if (acp_json_type_of(prompt) != ACP_JSON_ARRAY) {
    acp_agent_respond_error(agent, req, -32602,
                            "Invalid params: prompt must be an array", NULL, 0);
    return 0;
  }
  if (s->turn != NULL) {
    acp_agent_respond_error(agent, req, -32600,
                            "a prompt turn is already running in this session",
                            NULL, 0);
    return 0;
  }
  if (a->echo) {
    /* The benchmark workload: one chunk with the prompt, then end_turn. A
     * single text block is forwarded as it came, not decoded and escaped
     * again (acp_json_str_passthrough()). */
    const acp_json_val *b = acp_json_child(prompt);
    const acp_json_val *tv = OBJ_GETL(b, "text");
    if (acp_json_len(prompt) == 1 &&
        ACP_JSON_STR_EQ_LIT(OBJ_GETL(b, "type"), "text") &&
        acp_json_type_of(tv) == ACP_JSON_STRING) {
      acp_agent_send_message_chunk_val(agent, s->id, msg->doc, tv, NULL, 0);
    } else {
      rv = prompt_text(a, msg, prompt, &text, &len);
      if (rv != 0)
        return rv;
      acp_agent_send_message_chunk(agent, s->id, text, len, NULL, 0);
    }
    acp_agent_respond_prompt(agent, req, "end_turn", NULL, 0);
    return 0;
  }
  rv = prompt_text(a, msg, prompt, &text, &len);
  if (rv != 0)
    return rv;
  if (!is_v2(a)) {
    /* The user's message is part of the history a load replays (v2: the
     * library's user_message, with its messageId, through on_update_sent;
     * the echo agent answered above). */
    acp_json_writer *w = a->w;
    size_t n;
    const char *u;
    acp_json_writer_reset(w);
    acp_json_write_obj_begin(w);
    kvs(w, "sessionUpdate", "user_message_chunk");
    acp_json_write_keyz(w, "content");
    acp_json_write_obj_begin(w);
    kvs(w, "type", "text");
    acp_json_write_keyz(w, "text");
    acp_json_write_str(w, text, len);
    acp_json_write_obj_end(w);
    acp_json_write_obj_end(w);
    u = wdata(a, &n);
    history_add(s, u, n);
    session_changed(a, s);
  }

  t = calloc(1, sizeof(*t));
  if (t == NULL)
    return ACP_ERR_NOMEM;
  t->a = a;
  t->s = s;
  t->req = req;
  t->refs = 1;
  if (script_parse(&t->sc, text, len) != 0) {
    free(t);
    return ACP_ERR_NOMEM;
  }
  s->turn = t;
  turn_run(t);
  return 0;
}

static int on_session_cancel(acp_agent *agent, const char *session_id,
                             size_t session_id_len, acp_agent_request *prompt,
                             const acp_rpc_msg *msg, void *ud) {
  app *a = ud;
  asession *s;
  char id[256];

  (void)agent;
  (void)prompt;
  (void)msg;
  snprintf(id, sizeof(id), "%.*s",
           (int)(session_id_len < 255 ? session_id_len : 255), session_id);
  s = find_session(a, id);
  if (s != NULL && s->turn != NULL && s->turn->cancellable && !s->turn->done) {
    /* The running call's final status goes before the turn's end. */
    s->turn->cancellable = false;
    if (is_v2(a))
      acp_agent_send_tool_call_update(a->agent, s->id, s->turn->tool_id,
                                      "cancelled", "{\"capabilities\":null}",
                                      strlen("{\"capabilities\":null}"));
    else /* v1 has no "cancelled" tool call status */
      acp_agent_send_tool_call_update(a->agent, s->id, s->turn->tool_id,
                                      "failed", NULL, 0);
  }
  if (s != NULL && s->turn != NULL && !s->turn->done && is_v2(a)) {
    turn *t = s->turn;
    /* v2: the idle state_update (cancelled) comes after the work stopped
     * and its last updates went out (protocol/v2/prompt-lifecycle.mdx,
     * Cancellation): a command /run runs gets SIGTERM and the turn ends
     * when it has exited (terminal_update exitStatus, the call cancelled);
     * a pending permission question ends it when the client has answered
     * it (cancelled, which the client must send). */
    if (t->cancelling)
      return 0; /* already on its way */
    if (t->term != NULL && !t->term->exited) {
      t->cancelling = true;
      aterm_stop(t->term);
      return 0;
    }
    if (t->asking) {
      t->cancelling = true;
      return 0;
    }
  }
  if (s != NULL && s->turn != NULL)
    turn_finish(s->turn, "cancelled");
  return 0;
}

/* $/cancel_request: only a prompt turn is ever left unanswered here, so
 * end that turn as cancelled (the other requests are answered at once). */
static int on_cancel_request(acp_agent *agent, acp_agent_request *req,
                             void *ud) {
  app *a = ud;
  asession *s;

  (void)agent;
  for (s = a->sessions; s != NULL; s = s->next) {
    if (s->turn != NULL && s->turn->req == req) {
      turn_finish(s->turn, "cancelled");
      break;
    }
  }
  return 0;
}

/* MARK: - Main */

/* mcp/message (and the older _mcp/message) from a provider. */
static int on_mcp_request(acp_agent *agent, acp_agent_request *req, void *ud) {
  app *a = ud;
  int rv = a->mcp != NULL ? acp_mcp_acp_consumer_agent_request(a->mcp, req)
                          : ACP_MCP_ACP_NOT_MINE;

  if (rv == ACP_MCP_ACP_NOT_MINE) {
    acp_agent_respond_error(agent, req, -32601, "Method not found", NULL, 0);
    return 0;
  }
  return rv;
}

static int on_mcp_notification(acp_agent *agent, const acp_rpc_msg *msg,
                               void *ud) {
  app *a = ud;
  int rv = a->mcp != NULL ? acp_mcp_acp_consumer_agent_notification(a->mcp, msg)
                          : ACP_MCP_ACP_NOT_MINE;

  (void)agent;
  return rv == ACP_MCP_ACP_NOT_MINE ? 0 : rv;
}

static void on_rpc_end(acp_uv_rpc *r, int reason, void *ud) {
  app *a = ud;

  (void)r;
  if (a->closing)
    return;
  a->closing = true;
  a->end_reason = reason;
  for (asession *s = a->sessions; s != NULL; s = s->next) {
    if (s->turn != NULL && s->turn->term != NULL && !s->turn->term->exited)
      aterm_stop(s->turn->term);
    /* The stdio MCP servers (`acp mcp relay` for an http server, a
     * bridging conductor's shim) are told too: the loop below runs until
     * their processes are gone, and one waiting for the end of its stdin
     * would otherwise wait for us while we wait for it (found orphaned
     * with its agent when the conductor above them was gone). The ladder
     * ends each: stdin closed first, so it can exit cleanly. */
    for (mcpsrv *m = s->mcp; m != NULL; m = m->next)
      if (m->sc != NULL && m->sc->proc != NULL)
        (void)acp_uv_process_shutdown(m->sc->proc, NULL);
  }
  acp_uv_signals_close(a->sig);
  a->sig = NULL;
  acp_uv_rpc_close(a->rpc, NULL);
  a->rpc = NULL;
  acp_uv_link_close(a->link, 2000, NULL, NULL);
  a->link = NULL;
}

static void on_signal(acp_uv_signals *sig, int signum, void *ud) {
  app *a = ud;

  (void)sig;
  (void)signum;
  /* Told to stop: over WebSocket (acp serve --handoff) the client hears
   * "going away", as serve's relay says it (pipes ignore the code). */
  if (a->link != NULL && !a->closing)
    acp_uv_link_set_close_code(a->link, 1001);
  on_rpc_end(NULL, 0, ud);
}

/* acp serve --handoff with a session grace: the connection dropped (1)
 * and the link waits for a reconnect, or one came back (0). A turn in
 * flight is cancelled as serve's relay cancels a relayed agent's (its
 * client is gone; what it still writes is dropped): the session stays
 * for session/load, session/resume or a new prompt. */
static void on_handoff_park(acp_uv_link *link, int parked, void *ud) {
  app *a = ud;

  (void)link;
  if (!parked)
    return;
  for (asession *s = a->sessions; s != NULL; s = s->next)
    if (s->turn != NULL && !s->turn->done)
      on_session_cancel(a->agent, s->id, strlen(s->id), NULL, NULL, a);
  /* Nobody will answer what we asked the client that went away: a v2 turn
   * cancelled while it asks permission waits for that answer to end, and
   * would hold its session (new prompts refused) after the resume. */
  acp_agent_drop_calls(a->agent);
}

static void walk_close(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

int cmd_agent(int argc, char **argv) {
  app a;
  acp_agent_callbacks *cbs = NULL;
  int i;
  int ok;
  int rv = CLI_EXIT_FAILURE;
  const char *v;

  memset(&a, 0, sizeof(a));
  a.spin_us = CLI_READ_SPIN_US;
  a.name = "acp-agent";
  a.kill_grace_ms = KILL_GRACE_MS;
  snprintf(a.auth_state, sizeof(a.auth_state), "not_required");
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(agent_usage, stdout);
      fputs(script_help, stdout);
      return CLI_EXIT_OK;
    } else if (strcmp(argv[i], "--echo") == 0) {
      a.echo = true;
    } else if ((v = cli_opt_value(argc, argv, &i, "--kill-grace", &ok)) !=
               NULL) {
      char *end = NULL;
      unsigned long long ms = strtoull(v, &end, 10);

      if (*v < '0' || *v > '9' || *end != '\0' || ms > 3600000) {
        cli_err("agent",
                "--kill-grace: expected milliseconds (0..3600000), "
                "not '%s'",
                v);
        return CLI_EXIT_USAGE;
      }
      a.kill_grace_ms = ms;
    } else if ((v = cli_opt_value(argc, argv, &i, "--read-spin-us", &ok)) !=
               NULL) {
      unsigned long long us;

      if (cli_opt_uint("agent", "--read-spin-us", v, 0, 1000000, &us) != 0)
        return CLI_EXIT_USAGE;
      a.spin_us = (uint32_t)us;
    } else if ((v = cli_opt_value(argc, argv, &i, "--name", &ok)) != NULL) {
      a.name = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--mcp-acp", &ok)) != NULL) {
      if (strcmp(v, "native") != 0 && strcmp(v, "off") != 0) {
        cli_err("agent", "--mcp-acp: expected native or off, not '%s'", v);
        return CLI_EXIT_USAGE;
      }
      a.mcp_acp_off = strcmp(v, "off") == 0;
    } else if (strcmp(argv[i], "--unstable") == 0) {
      a.unstable = true;
    } else if (strcmp(argv[i], "--no-read-block") == 0) {
      a.no_block = true;
    } else if (strcmp(argv[i], "--protocol-v2") == 0) {
      a.protocol_v2 = true;
    } else if ((v = cli_opt_value(argc, argv, &i, "--state-dir", &ok)) !=
               NULL) {
      if (v[0] == '\0') {
        cli_err("agent", "--state-dir: expected a directory");
        return CLI_EXIT_USAGE;
      }
      a.state_dir = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--mcp-http", &ok)) != NULL) {
      if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) {
        cli_err("agent", "--mcp-http: expected on or off, not '%s'", v);
        return CLI_EXIT_USAGE;
      }
      a.mcp_http_off = strcmp(v, "off") == 0;
    } else {
      if (ok < 0)
        return CLI_EXIT_USAGE;
      cli_err("agent", "unknown option '%s' (see acp agent --help)", argv[i]);
      return CLI_EXIT_USAGE;
    }
  }
  /* Under `acp serve --handoff` the connection's WebSocket is ours: only
   * acp-remote speaks it (acp maps no TLS or HTTP/2 library), so acp
   * becomes acp-remote, once per connection. */
  const char *handoff = getenv("ACP_HANDOFF_FD");
  if (handoff != NULL && cli_remote == NULL)
    return cli_exec_beside("acp-remote", argc, argv);
  v = getenv("ACP_AGENT_SEQUENTIAL_IDS");
  a.sequential_ids = v != NULL && strcmp(v, "1") == 0;
  acp_uv_ignore_sigpipe();
  if (uv_loop_init(&a.loop) != 0)
    return CLI_EXIT_FAILURE;
  if (acp_json_writer_new(&a.w, 0, NULL) != 0 ||
      acp_json_writer_new(&a.sw, 0, NULL) != 0 ||
      acp_json_doc_new(&a.doc, NULL) != 0 ||
      acp_json_doc_new(&a.hdoc, NULL) != 0 ||
      acp_json_doc_new(&a.sdoc, NULL) != 0 ||
      acp_arena_new(&a.arena, NULL) != 0 || acp_agent_callbacks_new(&cbs) != 0)
    goto cleanup;
  acp_agent_callbacks_set_on_initialize(cbs, on_initialize);
  acp_agent_callbacks_set_on_authenticate(cbs, on_authenticate);
  acp_agent_callbacks_set_on_logout(cbs, on_empty);
  /* v2 (--protocol-v2): the same auth answers under the v2 names. */
  acp_agent_callbacks_set_on_auth_login(cbs, on_authenticate);
  acp_agent_callbacks_set_on_auth_logout(cbs, on_empty);
  acp_agent_callbacks_set_on_tool_call_cancel(cbs, on_tool_call_cancel);
  acp_agent_callbacks_set_on_terminal_cancel(cbs, on_terminal_cancel);
  acp_agent_callbacks_set_on_session_new(cbs, on_session_new);
  acp_agent_callbacks_set_on_session_load(cbs, on_session_load);
  acp_agent_callbacks_set_on_session_resume(cbs, on_session_resume);
  acp_agent_callbacks_set_on_session_list(cbs, on_session_list);
  acp_agent_callbacks_set_on_session_delete(cbs, on_session_close);
  acp_agent_callbacks_set_on_session_close(cbs, on_session_close);
  acp_agent_callbacks_set_on_session_set_mode(cbs, on_session_set_mode);
  acp_agent_callbacks_set_on_session_set_config_option(cbs,
                                                       on_session_set_config);
  acp_agent_callbacks_set_on_session_prompt(cbs, on_session_prompt);
  acp_agent_callbacks_set_on_session_cancel(cbs, on_session_cancel);
  acp_agent_callbacks_set_on_cancel_request(cbs, on_cancel_request);
  acp_agent_callbacks_set_on_mcp_message(cbs, on_mcp_request);
  acp_agent_callbacks_set_on_mcp_message_notification(cbs, on_mcp_notification);
  acp_agent_callbacks_set_on_ext_request(cbs, on_mcp_request);
  acp_agent_callbacks_set_on_ext_notification(cbs, on_mcp_notification);
  if (!a.echo)
    acp_agent_callbacks_set_on_update_sent(cbs, on_update_sent);
  if (a.unstable) {
    /* Without --unstable these stay unhandled: -32601, as an agent that
     * does not advertise them answers. */
    acp_agent_callbacks_set_on_session_fork(cbs, on_session_fork);
    acp_agent_callbacks_set_on_session_set_title(cbs, on_session_set_title);
    acp_agent_callbacks_set_on_session_archive(cbs, on_session_archive);
    acp_agent_callbacks_set_on_session_unarchive(cbs, on_session_archive);
    acp_agent_callbacks_set_on_session_status(cbs, on_session_status);
    acp_agent_callbacks_set_on_auth_status(cbs, on_auth_status);
    a.nes = agent_nes_new();
    if (a.nes == NULL)
      goto cleanup;
    agent_nes_register(cbs);
  }
  if (acp_agent_new(&a.agent, cbs, &a, NULL, NULL) != 0)
    goto cleanup;
  if (a.protocol_v2 &&
      acp_agent_set_max_protocol_version(a.agent, ACP_PROTOCOL_V2) != 0)
    goto cleanup;
  if (acp_mcp_acp_consumer_new(&a.mcp, a.agent, &a, NULL) != 0)
    goto cleanup;
  if (a.state_dir != NULL && restore_all(&a) != 0)
    goto cleanup;
  if (handoff != NULL) {
    char *end = NULL;
    long cfd = strtol(handoff, &end, 10);
    char err[160];

    if (*handoff < '0' || *handoff > '9' || *end != '\0' || cfd > 65535) {
      cli_err("agent", "ACP_HANDOFF_FD: expected a descriptor, not '%s'",
              handoff);
      goto cleanup;
    }
    /* The variable is for us only, not for what the agent runs. */
    unsetenv("ACP_HANDOFF_FD");
    if (cli_remote->handoff_link(&a.link, &a.loop, (int)cfd, on_handoff_park,
                                 &a, err, sizeof(err)) != 0) {
      cli_err("agent", "handoff: %s", err);
      goto cleanup;
    }
  } else if (acp_uv_link_new_fds(&a.link, &a.loop, 0, 1, NULL) != 0) {
    cli_err("agent", "cannot use stdin/stdout");
    goto cleanup;
  }
  if (acp_uv_rpc_new(&a.rpc, a.link, acp_agent_session(a.agent), on_rpc_end, &a,
                     NULL) != 0)
    goto cleanup;
  acp_uv_rpc_set_read_spin(a.rpc, a.spin_us);
  acp_uv_rpc_set_read_block(a.rpc, !a.no_block);
  acp_uv_signals_new(&a.sig, &a.loop, on_signal, &a, NULL);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  rv = CLI_EXIT_OK;
  if (a.end_reason < 0) {
    /* A fatal error (e.g. a handler failed) ended the connection. */
    cli_err("agent", "the connection failed: %s", acp_strerror(a.end_reason));
    rv = CLI_EXIT_FAILURE;
  }
cleanup:
  if (!a.closing) {
    a.closing = true;
    acp_uv_signals_close(a.sig);
    acp_uv_rpc_close(a.rpc, NULL);
    if (a.link != NULL)
      acp_uv_link_close(a.link, 0, NULL, NULL);
  }
  uv_run(&a.loop, UV_RUN_DEFAULT);
  /* A kill between a change and its save loses that change only; an
   * orderly end loses nothing. */
  for (asession *s = a.sessions; s != NULL; s = s->next)
    if (s->dirty)
      session_save(&a, s);
  while (a.sessions != NULL)
    session_destroy(&a, a.sessions);
  while (a.broken != NULL)
    broken_drop(&a, a.broken->id);
  free(a.by_id);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  uv_walk(&a.loop, walk_close, NULL);
  uv_run(&a.loop, UV_RUN_DEFAULT);
  uv_loop_close(&a.loop);
  acp_agent_free(a.agent);
  acp_mcp_acp_consumer_free(a.mcp);
  acp_agent_callbacks_free(cbs);
  acp_json_doc_free(a.doc);
  acp_json_doc_free(a.hdoc);
  acp_json_doc_free(a.sdoc);
  acp_arena_free(a.arena);
  agent_nes_free(a.nes);
  acp_json_writer_free(a.w);
  acp_json_writer_free(a.sw);
  free(a.scratch);
  return rv;
}
