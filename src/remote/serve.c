/*
 * acp_remote_serve(): any stdio agent behind the WebSocket endpoint, one
 * process per connection. The relay is bytes only: the agent's lines are
 * the connection's messages, so nothing here parses JSON.
 *
 * With a session grace, an agent whose connection dropped waits ("parked")
 * for a reconnect that presents its affinity cookie: the agent process,
 * and so every session it holds, is handed to the new connection. Why
 * this and not a session store: docs/decisions.md.
 *
 * With a grace, the relay also watches for prompt turns (the only JSON it
 * looks at): the session/prompt requests the client sends, the agent's
 * answers to them (under ACP v2 the answer comes at once and the turn ends
 * with a state_update idle) and, while turns run, the agent's requests to
 * the client. When the connection drops with turns in flight, the agent is
 * sent session/cancel for their sessions, so it does not go on working for
 * nobody while it waits (without a grace, closing its stdin does that),
 * and an error answer (-32099) to each request the client left
 * unanswered. Only with a grace: the watching costs a parse per prompt.
 * What the agent writes later for those turns (the cancelled prompt's
 * answer, its session's updates until then) is dropped, also once a
 * client is back: the new connection never sent those ids. A new request
 * with the id of such a prompt still unanswered, or naming the session of
 * such a turn, waits until the agent ended the old turn (docs/decisions.md,
 * "The relay never delivers a cancelled turn's late answer").
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acp/json.h"
#include "acp/remote.h"
#include "remote_int.h"
#include "util.h"
#include "uv_internal.h"

/* How long an agent has to answer a handoff (opts->handoff). */
#define HANDOFF_MS 10000

/* Cap of prompt turns tracked per connection (more are not cancelled). */
#define TURNS_MAX 64u
/* Agent lines longer than this are not looked at: a prompt's answer is
 * small, the long lines are updates. */
#define ALINE_MAX ((size_t)64 << 10)
/* How long a client request reusing the id of a cancelled prompt waits
 * for the agent's answer to that prompt (then the connection ends). */
#define HOLD_MS 5000

/* A prompt in flight: the request's id and its sessionId, as raw JSON text
 * (text[0..id_len) then text[id_len..id_len+sid_len)). */
typedef struct sturn {
  struct sturn *next;
  size_t id_len, sid_len;
  bool accepted; /* ACP v2: the prompt was answered, the turn runs on */
  char text[];
} sturn;

typedef struct serve serve;

typedef struct sconn {
  serve *sv;
  struct sconn *prev, *next;
  acp_uv_link *ws;       /* NULL once closed */
  acp_uv_process *agent; /* NULL once closed */
  acp_uv_link *alink;
  bool stopping;
  bool out_eof;       /* the agent's stdout ended */
  bool exited;        /* the agent's exit status is known */
  int end_code;       /* close code the agent's own end calls for */
  uv_timer_t timer;   /* an exited agent's stdout gets this long to end */
  bool timer_done;    /* the timer is closed */
  bool parked;        /* waiting for a reconnect (session grace) */
  uint64_t parked_at; /* when it began to wait (loop time, ms) */
  bool line_start;    /* the last byte handed to a connection ended a line */
  bool skip_line;     /* drop the agent's output up to its next '\n' */
  bool spin_due;      /* a client message went to the agent (read spin) */
  unsigned closing;   /* connection links closing, not yet called back */
  /* Turn tracking (session grace only). */
  acp__buf cline; /* the client's line being assembled */
  bool cskip;     /* that line overflowed: skip it */
  acp__buf aline; /* the agent's line being assembled (turns in flight) */
  bool askip;     /* skip the agent's output up to its next '\n' */
  sturn *turns;
  unsigned nturns;
  /* The agent's requests to the client during turns (ids, sid_len 0):
   * answered by serve with an error when the client drops. */
  sturn *calls;
  unsigned ncalls;
  /* Turns cancelled by a drop (or in flight at it): the agent's late
   * output for them is dropped whichever connection is there. Not
   * accepted: the prompt's answer (id) is due, and the session's
   * notifications before it go too; accepted (v2): the session's
   * notifications up to its state_update idle go. */
  sturn *stale;
  unsigned nstale;
  bool afilter; /* the agent's output goes line by line (stale turns) */
  bool apass;   /* an over-long line is being forwarded up to its '\n' */
  /* A client request reusing the id of a stale prompt, and whatever came
   * with it, held until the agent answered the stale one (HOLD_MS). */
  acp__buf held;
  bool holding;
  char aff[37]; /* affinity value, or empty */
  char id[40];
  /* Handoff (opts->handoff): the control socket to the agent. */
  uv_pipe_t ctl;
  bool ho;          /* this connection goes (went) to its agent */
  bool ctl_open;    /* ctl is initialised and not closed */
  bool ctl_reading; /* ctl is being read */
  bool handing;     /* the socket was sent, the answer not in yet */
  bool handed;      /* the agent took the connection */
  bool resumable;   /* the agent was told it parks on a drop (a grace) */
  char answer[16];  /* the agent's line so far */
  size_t nanswer;
  uv_write_t ctl_req;
  char *ctl_pre; /* the pre-read bytes being written to ctl */
} sconn;

struct serve {
  acp_mem mem;
  uv_loop_t loop;
  const acp_remote_serve_options *opts;
  acp_remote_server *srv;
  acp_uv_signals *sig;
  sconn *conns;
  bool quitting;
  uint64_t spin_ns;  /* opts->read_spin_us, 0 = off */
  bool spin_due;     /* some connection has spin_due set */
  bool handoff;      /* opts->handoff (version 4) */
  uv_prepare_t prep; /* runs the read spin before the loop sleeps */
};

static void on_timer_closed(uv_handle_t *h);
static void sconn_end(sconn *sc, uint64_t flush_ms, int code);

/* MARK: - Prompt turns in flight (session grace) */

/* Whether p[0..n) holds pat[0..m) (no memmem in C11). */
static bool has_bytes(const char *p, size_t n, const char *pat, size_t m) {
  const char *end = p + n;
  while (m > 0 && (size_t)(end - p) >= m) {
    const char *c = memchr(p, pat[0], (size_t)(end - p) - m + 1);
    if (!c)
      return false;
    if (memcmp(c, pat, m) == 0)
      return true;
    p = c + 1;
  }
  return false;
}

static uint64_t grace_ms(const serve *sv) {
  return sv->opts->version >= 2 ? sv->opts->session_grace_ms : 0;
}

static void list_clear(sconn *sc, sturn **list, unsigned *n) {
  while (*list) {
    sturn *t = *list;
    *list = t->next;
    acp__free(&sc->sv->mem, t);
  }
  *n = 0;
}

static void turns_clear(sconn *sc) {
  list_clear(sc, &sc->turns, &sc->nturns);
  list_clear(sc, &sc->calls, &sc->ncalls);
}

/* Note raw JSON `a` (and `b`) in `list`: text = a then b. */
static sturn *list_add(sconn *sc, sturn **list, unsigned *n, const char *a,
                       size_t al, const char *b, size_t bl) {
  sturn *t = acp__malloc(&sc->sv->mem, sizeof(*t) + al + bl);
  if (!t)
    return NULL;
  t->id_len = al;
  t->sid_len = bl;
  t->accepted = false;
  memcpy(t->text, a, al);
  if (bl)
    memcpy(t->text + al, b, bl);
  t->next = *list;
  *list = t;
  (*n)++;
  return t;
}

/* Remove the entries of `list` whose id (or, by_sid, sessionId of an
 * accepted turn) is the raw JSON r[0..rl). */
static void list_remove(sconn *sc, sturn **list, unsigned *n, const char *r,
                        size_t rl, bool by_sid) {
  for (sturn **pp = list; *pp;) {
    sturn *t = *pp;
    bool hit =
        by_sid ? t->accepted && t->sid_len == rl &&
                     memcmp(t->text + t->id_len, r, rl) == 0
               : !t->accepted && t->id_len == rl && memcmp(t->text, r, rl) == 0;
    if (!hit) {
      pp = &t->next;
      continue;
    }
    *pp = t->next;
    acp__free(&sc->sv->mem, t);
    (*n)--;
    if (!by_sid)
      return;
  }
}

/* One whole line from the client: a session/prompt request is noted. */
static void track_client_line(sconn *sc, const char *line, size_t len) {
  static const char pat[] = "\"session/prompt\"";
  acp_json_doc *doc = NULL;
  if (sc->calls && !has_bytes(line, len, "\"method\"", 8)) {
    /* An answer to one of the agent's calls. */
    if (acp_json_doc_new(&doc, &sc->sv->mem) != 0)
      return;
    if (acp_json_doc_parse(doc, line, len, NULL) == 0) {
      const acp_json_val *id = acp_json_obj_getz(acp_json_doc_root(doc), "id");
      size_t il = 0;
      const char *ir = id ? acp_json_raw(id, &il) : NULL;
      if (ir)
        list_remove(sc, &sc->calls, &sc->ncalls, ir, il, false);
    }
    acp_json_doc_free(doc);
    return;
  }
  if (len < sizeof(pat) - 1 || !has_bytes(line, len, pat, sizeof(pat) - 1) ||
      sc->nturns >= TURNS_MAX || acp_json_doc_new(&doc, &sc->sv->mem) != 0)
    return;
  const acp_json_val *root = NULL, *id, *sid;
  if (acp_json_doc_parse(doc, line, len, NULL) == 0)
    root = acp_json_doc_root(doc);
  const acp_json_val *m = acp_json_obj_getz(root, "method");
  id = acp_json_obj_getz(root, "id");
  sid = acp_json_obj_getz(acp_json_obj_getz(root, "params"), "sessionId");
  if (m && acp_json_str_eq(m, "session/prompt", 14) && id && sid &&
      acp_json_type_of(sid) == ACP_JSON_STRING) {
    size_t il, sl;
    const char *ir = acp_json_raw(id, &il), *sr = acp_json_raw(sid, &sl);
    if (!sc->turns && !sc->afilter) {
      /* The agent's output is watched from its next line on (while
       * stale turns are pending it is watched already). */
      acp__buf_clear(&sc->aline);
      sc->askip = !sc->line_start;
    }
    list_add(sc, &sc->turns, &sc->nturns, ir, il, sr, sl);
  }
  acp_json_doc_free(doc);
}

/* One whole line from the agent, turns in flight. The answer to a prompt
 * ends its turn, unless it is ACP v2's (no stopReason: the turn runs on
 * until a state_update says the session is idle). A request (a "method"
 * and an "id") is a call to the client, noted until the client answers.
 * Other notifications are skipped unparsed. */
static void track_agent_line(sconn *sc, const char *line, size_t len) {
  acp_json_doc *doc = NULL;
  bool method = has_bytes(line, len, "\"method\"", 8);
  bool idle = method && has_bytes(line, len, "\"state_update\"", 14);
  if (method && !idle &&
      (sc->ncalls >= TURNS_MAX || !has_bytes(line, len, "\"id\"", 4)))
    return;
  if (acp_json_doc_new(&doc, &sc->sv->mem) != 0)
    return;
  if (acp_json_doc_parse(doc, line, len, NULL) == 0) {
    const acp_json_val *root = acp_json_doc_root(doc);
    const acp_json_val *id = acp_json_obj_getz(root, "id");
    size_t il = 0;
    const char *ir = id ? acp_json_raw(id, &il) : NULL;
    if (idle) {
      const acp_json_val *p = acp_json_obj_getz(root, "params");
      const acp_json_val *u = acp_json_obj_getz(p, "update");
      const acp_json_val *sid = acp_json_obj_getz(p, "sessionId");
      size_t sl = 0;
      const char *sr = sid ? acp_json_raw(sid, &sl) : NULL;
      if (sr && acp_json_str_eq(acp_json_obj_getz(u, "state"), "idle", 4))
        list_remove(sc, &sc->turns, &sc->nturns, sr, sl, true);
    } else if (method) {
      if (ir && acp_json_obj_getz(root, "method"))
        list_add(sc, &sc->calls, &sc->ncalls, ir, il, NULL, 0);
    } else if (ir) {
      const acp_json_val *res = acp_json_obj_getz(root, "result");
      for (sturn *t = sc->turns; t; t = t->next)
        if (!t->accepted && t->id_len == il && memcmp(t->text, ir, il) == 0) {
          if (res && !acp_json_obj_getz(res, "stopReason"))
            t->accepted = true; /* v2: accepted, running */
          else
            list_remove(sc, &sc->turns, &sc->nturns, ir, il, false);
          break;
        }
    }
  }
  acp_json_doc_free(doc);
}

/* Split `data` into lines for `fn`, assembling pieces in `acc` (up to its
 * cap; a longer line is skipped with *skip). */
static void track_bytes(sconn *sc, acp__buf *acc, bool *skip, const char *d,
                        size_t n, void (*fn)(sconn *, const char *, size_t)) {
  while (n > 0) {
    const char *nl = memchr(d, '\n', n);
    size_t seg = nl ? (size_t)(nl - d) : n;
    if (nl && acc->len == 0 && !*skip) {
      fn(sc, d, seg);
    } else {
      if (!*skip && acp__buf_append(acc, d, seg) != 0) {
        *skip = true;
        acp__buf_clear(acc);
      }
      if (nl) {
        if (!*skip)
          fn(sc, acc->data, acc->len);
        *skip = false;
        acp__buf_clear(acc);
        if (acc->cap > ALINE_MAX)
          acp__buf_dispose(acc); /* keep an idle connection small */
      }
    }
    if (!nl)
      break;
    d = nl + 1;
    n -= seg + 1;
  }
}

/* MARK: - Cancelled turns' late output (session grace) */

/* The turns in flight at a drop become stale: whatever the agent writes
 * for them from now on is for a client that went away. A new connection
 * never sees it: its JSON-RPC ids start again, so the old prompt's answer
 * could even pass for the answer to its own request of the same id. */
static void stale_add(sconn *sc) {
  for (sturn *t = sc->turns; t && sc->nstale < TURNS_MAX; t = t->next) {
    sturn *x = list_add(sc, &sc->stale, &sc->nstale, t->text, t->id_len,
                        t->text + t->id_len, t->sid_len);
    if (!x)
      break;
    x->accepted = t->accepted;
  }
  sc->afilter = sc->stale != NULL;
}

/* The stale prompt (not accepted) whose id is the raw JSON r[0..rl). */
static sturn *stale_by_id(sconn *sc, const char *r, size_t rl) {
  for (sturn *t = sc->stale; t; t = t->next)
    if (!t->accepted && t->id_len == rl && memcmp(t->text, r, rl) == 0)
      return t;
  return NULL;
}

/* The stale turn (any) of the session whose id is the raw JSON r[0..rl). */
static sturn *stale_by_sid(sconn *sc, const char *r, size_t rl) {
  for (sturn *t = sc->stale; t; t = t->next)
    if (t->sid_len == rl && memcmp(t->text + t->id_len, r, rl) == 0)
      return t;
  return NULL;
}

static void stale_remove(sconn *sc, sturn *x) {
  for (sturn **pp = &sc->stale; *pp; pp = &(*pp)->next)
    if (*pp == x) {
      *pp = x->next;
      acp__free(&sc->sv->mem, x);
      sc->nstale--;
      return;
    }
}

/* Whether the raw value [b, e) equals the JSON string literal `lit`
 * (quotes included). */
static bool raw_is(const char *b, const char *e, const char *lit) {
  size_t n = strlen(lit);
  return (size_t)(e - b) == n && memcmp(b, lit, n) == 0;
}

/* Whether a whole agent line belongs to a stale turn (so is dropped): the
 * answer to a stale prompt (its id is then forgotten: one answer per id),
 * or a notification of a stale turn's session before that answer (v2:
 * up to and with its state_update idle, which ends it). Requests are
 * never dropped here: someone has to answer them. Looked at with the
 * routing scanner (acp__js_member): no document, no allocation; ids and
 * session ids are compared as raw JSON text, as the client wrote them. */
static bool stale_line(sconn *sc, const char *line, size_t len) {
  const char *e = line + len, *vb, *ve, *pb, *pe;
  if (!acp__js_member(line, e, "method", 6, &vb, &ve)) {
    sturn *t;
    if (!acp__js_member(line, e, "id", 2, &vb, &ve) ||
        !(t = stale_by_id(sc, vb, (size_t)(ve - vb))))
      return false;
    if (sc->sv->opts->verbose)
      fprintf(stderr,
              "acp serve: connection %s: dropped the agent's answer to the "
              "cancelled request %.*s\n",
              sc->id, (int)t->id_len, t->text);
    stale_remove(sc, t);
    return true;
  }
  if (acp__js_member(line, e, "id", 2, &vb, &ve) ||
      !acp__js_member(line, e, "params", 6, &pb, &pe) ||
      !acp__js_member(pb, pe, "sessionId", 9, &vb, &ve))
    return false;
  sturn *t = stale_by_sid(sc, vb, (size_t)(ve - vb));
  if (!t)
    return false;
  const char *ub, *ue, *kb, *ke;
  if (t->accepted && acp__js_member(pb, pe, "update", 6, &ub, &ue) &&
      acp__js_member(ub, ue, "sessionUpdate", 13, &kb, &ke) &&
      raw_is(kb, ke, "\"state_update\"") &&
      acp__js_member(ub, ue, "state", 5, &kb, &ke) &&
      raw_is(kb, ke, "\"idle\"")) {
    if (sc->sv->opts->verbose)
      fprintf(stderr,
              "acp serve: connection %s: the cancelled turn of session %.*s "
              "ended (dropped)\n",
              sc->id, (int)t->sid_len, t->text + t->id_len);
    stale_remove(sc, t);
  }
  return true;
}

/* Whether a line too long to hold, of which h[0..n) is the head, is a
 * notification of a stale turn's session, as far as the head shows: its
 * "method" is "session/update", whole, no "id" comes before the cut, and
 * its params.sessionId, whole in the head, is a stale turn's. Then the
 * whole line is dropped. Anything else goes through as it comes: an
 * answer (short: a prompt's is a stopReason) or an update whose sessionId
 * comes after a member too long for the head. A state_update idle that
 * long would not end its stale turn (idles are short). */
static bool stale_head(sconn *sc, const char *h, size_t n) {
  const char *e = h + n, *vb, *ve, *pb, *pe;
  if (acp__js_member_head(h, e, "method", 6, &vb, &ve) != 1 ||
      !raw_is(vb, ve, "\"session/update\"") ||
      acp__js_member_head(h, e, "id", 2, &vb, &ve) != 0 ||
      acp__js_member_head(h, e, "params", 6, &pb, &pe) == 0 ||
      acp__js_member_head(pb, pe, "sessionId", 9, &vb, &ve) != 1)
    return false;
  sturn *t = stale_by_sid(sc, vb, (size_t)(ve - vb));
  if (!t)
    return false;
  if (sc->sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s: dropped an update of the cancelled "
            "turn of session %.*s longer than %zu bytes (by its head)\n",
            sc->id, (int)t->sid_len, t->text + t->id_len, ALINE_MAX);
  return true;
}

static int answer_gone(sconn *sc, acp__buf *msg, const char *id, size_t il);

/* One whole agent line (with its '\n', n > 0) while stale turns are
 * pending: dropped if stale; else tracked as any line is while turns
 * run, and forwarded when `forward`. A request the agent writes while
 * parked would reach nobody: serve answers it -32099, as it does the
 * ones pending at the drop (cancel_turns()). */
static int agent_whole_line(sconn *sc, const char *line, size_t n,
                            bool forward) {
  if (stale_line(sc, line, n - 1))
    return 0;
  if (sc->turns)
    track_agent_line(sc, line, n - 1);
  if (forward)
    return sc->ws ? acp_uv_link_write(sc->ws, line, n) : -1;
  const char *e = line + n - 1, *vb, *ve, *mb, *me;
  if (sc->parked && sc->alink && sc->cline.len == 0 && !sc->cskip &&
      acp__js_member(line, e, "method", 6, &mb, &me) &&
      acp__js_member(line, e, "id", 2, &vb, &ve)) {
    acp__buf msg;
    acp__buf_init(&msg, &sc->sv->mem, 0);
    (void)answer_gone(sc, &msg, vb, (size_t)(ve - vb));
    acp__buf_dispose(&msg);
  }
  return 0;
}

/* The agent's output while stale turns are pending (sc->afilter): split
 * into lines, each whole one seen by agent_whole_line() before it is
 * forwarded (`forward`), so a stale line never reaches the client. A line
 * longer than ALINE_MAX cannot be held whole: its first ALINE_MAX bytes
 * decide (stale_head()), and it is dropped whole or goes through as it
 * comes, unlooked-at otherwise (the answers are short; the long lines are
 * updates). Returns the bytes used: all of them, or those up
 * to the end of the line after which nothing is stale any more (afilter
 * cleared: the rest goes the usual way). -1 in *failed: the client side is
 * gone. */
static size_t agent_lines(sconn *sc, const char *d, size_t n, bool forward,
                          bool *failed) {
  const char *d0 = d;
  while (n > 0) {
    const char *nl = memchr(d, '\n', n);
    size_t take = nl ? (size_t)(nl + 1 - d) : n;
    if (sc->askip) {
      if (forward && sc->apass && acp_uv_link_write(sc->ws, d, take) != 0)
        *failed = true;
    } else if (nl && sc->aline.len == 0) {
      if (agent_whole_line(sc, d, take, forward) != 0)
        *failed = true;
    } else if (acp__buf_append(&sc->aline, d, take) != 0) {
      /* Too long to hold: the hold is filled up first, so the head that
       * decides is ALINE_MAX bytes however the line came in pieces. */
      size_t fill = sc->aline.max - sc->aline.len;
      if (fill > take || acp__buf_append(&sc->aline, d, fill) != 0)
        fill = 0;
      sc->askip = true;
      sc->apass = forward && !stale_head(sc, sc->aline.data, sc->aline.len);
      if (sc->apass &&
          (acp_uv_link_write(sc->ws, sc->aline.data, sc->aline.len) != 0 ||
           acp_uv_link_write(sc->ws, d + fill, take - fill) != 0))
        *failed = true;
      acp__buf_clear(&sc->aline);
    } else if (nl) {
      if (agent_whole_line(sc, sc->aline.data, sc->aline.len, forward) != 0)
        *failed = true;
      acp__buf_clear(&sc->aline);
    }
    d += take;
    n -= take;
    if (nl) {
      sc->askip = false;
      sc->apass = false;
      if (!sc->stale) {
        sc->afilter = false;
        break;
      }
    }
    if (*failed)
      break;
  }
  return (size_t)(d - d0);
}

/* The stale turn one of the client's whole lines in d[0..n) has to wait
 * for, or NULL. A request whose id is that of a stale prompt still
 * unanswered (*by_id): the agent would answer both with that id, and serve
 * could not tell the answers apart. A request whose params.sessionId is a
 * stale turn's session: what the agent writes for it (a session/load's
 * replay, a new prompt's updates) would be dropped as the cancelled
 * turn's, by an agent that serves it before it ended that turn. A
 * notification (session/cancel) never waits: it has no answer to lose.
 * A line not ended in d is not looked at (a WebSocket message and a POST
 * body each come whole, with their '\n'). */
static sturn *client_waits(sconn *sc, const char *d, size_t n, bool *by_id) {
  while (n > 0) {
    const char *nl = memchr(d, '\n', n), *vb, *ve, *mb, *me, *pb, *pe;
    if (!nl)
      return NULL;
    sturn *t = NULL;
    if (acp__js_member(d, nl, "method", 6, &mb, &me) &&
        acp__js_member(d, nl, "id", 2, &vb, &ve)) {
      *by_id = (t = stale_by_id(sc, vb, (size_t)(ve - vb))) != NULL;
      if (!t && acp__js_member(d, nl, "params", 6, &pb, &pe) &&
          acp__js_member(pb, pe, "sessionId", 9, &vb, &ve))
        t = stale_by_sid(sc, vb, (size_t)(ve - vb));
    }
    if (t)
      return t;
    n -= (size_t)(nl + 1 - d);
    d = nl + 1;
  }
  return NULL;
}

/* Write pre + raw + post (one line of serve's own) to the agent. */
static int agent_line(sconn *sc, acp__buf *msg, const char *pre,
                      const char *raw, size_t raw_len, const char *post) {
  acp__buf_clear(msg);
  if (acp__buf_append(msg, pre, strlen(pre)) != 0 ||
      acp__buf_append(msg, raw, raw_len) != 0 ||
      acp__buf_append(msg, post, strlen(post)) != 0)
    return -1;
  return acp_uv_link_write(sc->alink, msg->data, msg->len);
}

/* Answer the agent's request (raw JSON id) for a client that is gone. */
static int answer_gone(sconn *sc, acp__buf *msg, const char *id, size_t il) {
  int rv = agent_line(sc, msg, "{\"jsonrpc\":\"2.0\",\"id\":", id, il,
                      ",\"error\":{\"code\":-32099,\"message\":"
                      "\"Connection closed\"}}\n");
  if (rv == 0 && sc->sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s: answered the agent's request %.*s "
            "(-32099, the client is gone)\n",
            sc->id, (int)il, id);
  return rv;
}

/* The connection dropped: cancel the turns in flight, one session/cancel
 * per session. Not when the client's last line reached the agent only in
 * part (whatever is written next would end up inside it). */
static void cancel_turns(sconn *sc) {
  acp__buf msg;
  if (!sc->turns)
    return;
  if (sc->cline.len > 0 || sc->cskip || !sc->alink) {
    stale_add(sc);
    turns_clear(sc);
    return;
  }
  acp__buf_init(&msg, &sc->sv->mem, 0);
  for (sturn *t = sc->turns; t; t = t->next) {
    const char *sid = t->text + t->id_len;
    bool dup = false;
    for (sturn *u = sc->turns; u != t && !dup; u = u->next)
      dup = u->sid_len == t->sid_len &&
            memcmp(u->text + u->id_len, sid, t->sid_len) == 0;
    if (dup)
      continue;
    if (agent_line(sc, &msg,
                   "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\","
                   "\"params\":{\"sessionId\":",
                   sid, t->sid_len, "}}\n") != 0)
      break;
    if (sc->sv->opts->verbose)
      fprintf(stderr,
              "acp serve: connection %s: cancelled the turn of session "
              "%.*s\n",
              sc->id, (int)t->sid_len, sid);
  }
  /* Nobody will answer what the agent asked the client that went away (a
   * v2 turn cancelled while it asks permission ends only with an answer):
   * serve answers for it, as libacp's own agents do themselves
   * (acp_agent_drop_calls()). */
  for (sturn *t = sc->calls; t; t = t->next)
    if (answer_gone(sc, &msg, t->text, t->id_len) != 0)
      break;
  acp__buf_dispose(&msg);
  stale_add(sc);
  turns_clear(sc);
}

static void sconn_maybe_free(sconn *sc) {
  if (sc->ws || sc->agent || sc->closing)
    return;
  if (!sc->timer_done) {
    if (!uv_is_closing((uv_handle_t *)&sc->timer))
      uv_close((uv_handle_t *)&sc->timer, on_timer_closed);
    return;
  }
  serve *sv = sc->sv;
  if (sc->prev)
    sc->prev->next = sc->next;
  else
    sv->conns = sc->next;
  if (sc->next)
    sc->next->prev = sc->prev;
  if (sv->opts->verbose)
    fprintf(stderr, "acp serve: connection %s closed\n", sc->id);
  turns_clear(sc);
  list_clear(sc, &sc->stale, &sc->nstale);
  acp__buf_dispose(&sc->cline);
  acp__buf_dispose(&sc->aline);
  acp__buf_dispose(&sc->held);
  acp__free(&sv->mem, sc->ctl_pre);
  acp__free(&sv->mem, sc);
}

static void on_timer_closed(uv_handle_t *h) {
  sconn *sc = h->data;
  sc->timer_done = true;
  sconn_maybe_free(sc);
}

static void ws_closed(acp_uv_link *l, void *ud) {
  sconn *sc = ud;
  (void)l;
  sc->closing--;
  sconn_maybe_free(sc);
}

/* Close the connection's link (it may be replaced by a reconnect before
 * its close callback runs). */
static void close_ws(sconn *sc, uint64_t flush_ms, int code) {
  acp_uv_link *l = sc->ws;
  if (!l)
    return;
  sc->ws = NULL;
  sc->closing++;
  acp_uv_link_set_close_code(l, code);
  acp_uv_link_close(l, flush_ms, ws_closed, sc);
}

static void ctl_closed(uv_handle_t *h) {
  sconn *sc = h->data;
  sc->closing--;
  sconn_maybe_free(sc);
}

static void close_ctl(sconn *sc) {
  if (!sc->ctl_open)
    return;
  sc->ctl_open = false;
  sc->handing = false;
  sc->closing++;
  uv_close((uv_handle_t *)&sc->ctl, ctl_closed);
}

static void agent_closed(acp_uv_process *p, void *ud) {
  sconn *sc = ud;
  (void)p;
  sc->agent = NULL;
  sc->alink = NULL;
  sconn_maybe_free(sc);
}

static void agent_stopped(acp_uv_process *p, void *ud) {
  (void)ud;
  acp_uv_process_close(p, agent_closed);
}

/* End a connection: close the socket side (flushing what the agent said
 * for up to a second; over WebSocket with `code`) and stop the agent with
 * the ladder. */
static void sconn_end(sconn *sc, uint64_t flush_ms, int code) {
  sc->parked = false;
  close_ctl(sc);
  if (!sc->stopping)
    close_ws(sc, flush_ms, code);
  if (sc->agent && !sc->stopping && sc->ho && !sc->exited) {
    /* A handed agent's stdin ended at its start: the ladder's first rung
     * is moot, so it is told at once. SIGTERM is its "going away": acp
     * agent closes the connection it holds with 1001 on it (a parked one
     * has none and just ends). */
    (void)acp_uv_process_kill(sc->agent, SIGTERM);
  }
  if (sc->agent && !sc->stopping) {
    if (acp_uv_process_shutdown(sc->agent, agent_stopped) != 0)
      acp_uv_process_close(sc->agent, agent_closed);
  }
  sc->stopping = true;
}

/*
 * A connection is about to park its agent: at most max_connections agents
 * wait at once (live connections are capped there too). Parked ones do not
 * count against the cap of connections, so without this a client that
 * connects and drops in a loop would leave an agent process per drop for
 * the whole grace; the one that has waited longest is stopped instead.
 */
static void park_room(serve *sv) {
  unsigned cap = sv->opts->server.max_connections
                     ? sv->opts->server.max_connections
                     : ACP_REMOTE_DEFAULT_MAX_CONNECTIONS;
  unsigned n = 0;
  sconn *oldest = NULL;
  for (sconn *c = sv->conns; c; c = c->next)
    if (c->parked) {
      n++;
      if (!oldest || c->parked_at < oldest->parked_at)
        oldest = c;
    }
  if (n < cap || !oldest)
    return;
  fprintf(stderr,
          "acp serve: connection %s: its agent stops waiting (%u agents "
          "wait, the cap of connections)\n",
          oldest->id, n);
  sconn_end(oldest, 0, 1000);
}

static void on_grace_timeout(uv_timer_t *t) {
  sconn *sc = t->data;
  if (sc->parked) {
    if (sc->sv->opts->verbose)
      fprintf(stderr, "acp serve: connection %s: nobody came back\n", sc->id);
    sconn_end(sc, 0, 1000);
  }
}

/* MARK: - A request that waits for a stale turn: the client's lines held */

static void ws_read(acp_uv_link *l, int status, const char *data, size_t len,
                    void *ud);

static void on_hold_timeout(uv_timer_t *t) {
  sconn *sc = t->data;
  if (!sc->holding)
    return;
  /* Always said, not only with verbose: the agent left a cancelled
   * prompt unanswered (or its turn running) for long, and forwarding the
   * request now would leave two answers with one id, or what the agent
   * says about the session dropped. */
  bool by_id = false;
  sturn *w = client_waits(sc, sc->held.data, sc->held.len, &by_id);
  if (w && !by_id)
    fprintf(stderr,
            "acp serve: connection %s: the agent did not end the cancelled "
            "turn of session %.*s, which the client's request names, within "
            "%d ms; closed with 1011\n",
            sc->id, (int)w->sid_len, w->text + w->id_len, HOLD_MS);
  else
    fprintf(stderr,
            "acp serve: connection %s: the agent did not answer the "
            "cancelled request whose id the client reuses within %d ms; "
            "closed with 1011\n",
            sc->id, HOLD_MS);
  sc->holding = false;
  sconn_end(sc, 0, 1011);
}

/* The client sent a request that waits for stale turn `w` (client_waits();
 * w NULL: it sent on while one is held): its bytes wait, in order, and the
 * connection is not read meanwhile (the link keeps the rest), until the
 * agent ended the stale turns the held lines wait for (release_held()) or
 * HOLD_MS passed. */
static void hold_client(sconn *sc, const char *data, size_t len, const sturn *w,
                        bool by_id) {
  if (acp__buf_append(&sc->held, data, len) != 0) {
    sc->holding = false;
    sconn_end(sc, 0, 1011);
    return;
  }
  acp_uv_link_read_stop(sc->ws);
  if (sc->holding)
    return;
  sc->holding = true;
  if (sc->sv->opts->verbose && by_id)
    fprintf(stderr,
            "acp serve: connection %s: holds the client's request: its id "
            "is that of a cancelled request the agent has not answered\n",
            sc->id);
  else if (sc->sv->opts->verbose && w)
    fprintf(stderr,
            "acp serve: connection %s: holds the client's request: it names "
            "session %.*s, whose cancelled turn the agent has not ended\n",
            sc->id, (int)w->sid_len, w->text + w->id_len);
  uv_timer_start(&sc->timer, on_hold_timeout, HOLD_MS, 0);
}

/* After an agent line: what was held goes once no held line waits for a
 * stale turn (by id or session), and the connection is read again. */
static void release_held(sconn *sc) {
  bool by_id = false;
  if (!sc->holding || !sc->ws || !sc->alink ||
      client_waits(sc, sc->held.data, sc->held.len, &by_id))
    return;
  sc->holding = false;
  uv_timer_stop(&sc->timer);
  if (sc->sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s: the cancelled turn it waited for "
            "ended; the client's request goes on\n",
            sc->id);
  track_bytes(sc, &sc->cline, &sc->cskip, sc->held.data, sc->held.len,
              track_client_line);
  int rv = acp_uv_link_write(sc->alink, sc->held.data, sc->held.len);
  acp__buf_dispose(&sc->held);
  if (rv != 0 || acp_uv_link_read_start(sc->ws, ws_read, sc) != 0)
    sconn_end(sc, 0, 1000);
}

static void ws_read(acp_uv_link *l, int status, const char *data, size_t len,
                    void *ud) {
  sconn *sc = ud;
  if (l != sc->ws)
    return;
  if (status == 0) {
    /* No stale turn, no cost: the scan runs only while one is pending. */
    bool by_id = false;
    const sturn *w = NULL;
    if (sc->holding ||
        (sc->alink && sc->cline.len == 0 && !sc->cskip && sc->stale &&
         (w = client_waits(sc, data, len, &by_id)) != NULL)) {
      hold_client(sc, data, len, w, by_id);
      return;
    }
    if (sc->alink && grace_ms(sc->sv) > 0)
      track_bytes(sc, &sc->cline, &sc->cskip, data, len, track_client_line);
    if (sc->alink && acp_uv_link_write(sc->alink, data, len) == 0) {
      if (sc->sv->spin_ns > 0) {
        sc->spin_due = true;
        sc->sv->spin_due = true;
      }
      return;
    }
  }
  uint64_t grace = grace_ms(sc->sv);
  if (status != 0 && status != UV_EOF && grace > 0 && sc->agent &&
      !sc->stopping && !sc->exited && !sc->out_eof && sc->aff[0]) {
    /* Dropped, not ended: the agent waits for its client to come back. */
    if (sc->sv->opts->verbose)
      fprintf(stderr,
              "acp serve: connection %s dropped (%s): its agent waits "
              "%llu ms\n",
              sc->id, uv_strerror(status), (unsigned long long)grace);
    close_ws(sc, 0, 1000);
    /* What was held for the client that went away stays unsent. */
    sc->holding = false;
    acp__buf_dispose(&sc->held);
    cancel_turns(sc);
    park_room(sc->sv);
    sc->parked = true;
    sc->parked_at = uv_now(&sc->sv->loop);
    uv_timer_start(&sc->timer, on_grace_timeout, grace, 0);
    return;
  }
  /* The client went away (or the agent's stdin did): closing the agent's
   * stdin is the first rung, and an agent cancels its turn on it. */
  sconn_end(sc, 0, 1000);
}

/* The agent's side is over once its stdout ended and its exit status is
 * known (in either order): the client is told how it ended, 1000 for an
 * agent that exited with 0, 1011 for one that failed or was killed. */
static void agent_over(sconn *sc) {
  if (sc->out_eof && sc->exited) {
    uv_timer_stop(&sc->timer);
    sconn_end(sc, 1000, sc->end_code);
  }
}

static void on_eof_timeout(uv_timer_t *t) {
  sconn *sc = t->data;
  /* Something the agent started holds its stdout open: end anyway. */
  sc->out_eof = true;
  agent_over(sc);
}

static void agent_read(acp_uv_link *l, int status, const char *data, size_t len,
                       void *ud) {
  sconn *sc = ud;
  (void)l;
  if (status == 0 && sc->ho)
    return; /* the agent speaks on its socket: stdout is not the channel */
  if (status == 0) {
    bool failed = false;
    if (sc->skip_line && sc->ws) {
      /* The previous connection got part of this line: the new one
       * starts at the next (the line is still looked at). */
      const char *nl = memchr(data, '\n', len);
      size_t cut = nl ? (size_t)(nl + 1 - data) : len;
      if (sc->afilter)
        (void)agent_lines(sc, data, cut, false, &failed);
      else if (sc->turns)
        track_bytes(sc, &sc->aline, &sc->askip, data, cut, track_agent_line);
      if (!nl)
        return;
      sc->skip_line = false;
      len -= cut;
      data += cut;
      sc->line_start = true;
      if (len == 0) {
        release_held(sc);
        return;
      }
    }
    if (len > 0)
      sc->line_start = data[len - 1] == '\n';
    if (sc->afilter) {
      /* Nobody to tell while parked: dropped (not replayed, as the RFD
       * says), but looked at. */
      size_t used = agent_lines(sc, data, len, sc->ws != NULL, &failed);
      data += used;
      len -= used;
      if (!failed)
        release_held(sc);
      if (!failed && len == 0)
        return;
    }
    if (!failed && sc->turns)
      track_bytes(sc, &sc->aline, &sc->askip, data, len, track_agent_line);
    if (!failed && !sc->ws && sc->parked)
      return; /* nobody to tell: dropped (not replayed, as the RFD says) */
    if (!failed && sc->ws && acp_uv_link_write(sc->ws, data, len) == 0)
      return;
    sconn_end(sc, 1000, 1000); /* the client side is gone */
    return;
  }
  acp_uv_link_read_stop(l);
  sc->out_eof = true;
  if (!sc->exited && !sc->stopping && sc->agent &&
      acp_uv_process_shutdown(sc->agent, NULL) != 0)
    sconn_end(sc, 1000, 1011);
  agent_over(sc);
}

static void handoff_failed(sconn *sc, const char *why);

static void agent_exited(acp_uv_process *p, int64_t status, int sig, void *ud) {
  sconn *sc = ud;
  (void)p;
  if (sc->handing) {
    char why[80];
    snprintf(why, sizeof(why), "it exited (status %lld, signal %d)",
             (long long)status, sig);
    sc->exited = true;
    sc->end_code = 1011;
    handoff_failed(sc, why);
    return;
  }
  if (!sc->stopping && sc->sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s: the agent exited (status %lld, "
            "signal %d)\n",
            sc->id, (long long)status, sig);
  sc->exited = true;
  sc->end_code = (status == 0 && sig == 0) ? 1000 : 1011;
  if (!sc->out_eof && !sc->stopping)
    uv_timer_start(&sc->timer, on_eof_timeout, 1000, 0);
  agent_over(sc);
}

static void handoff_send(sconn *sc, int sock, const char *pre, size_t pre_len);

/* A reconnect presenting the affinity value of a parked agent gets it. */
static bool rebind(serve *sv, acp_uv_link *link, const char *id,
                   const char *aff) {
  sconn *sc;
  for (sc = sv->conns; sc; sc = sc->next)
    if (sc->parked && strcmp(sc->aff, aff) == 0)
      break;
  if (!sc || !sc->agent || sc->stopping || sc->out_eof || sc->exited)
    return false;
  if (sc->ho) {
    /* A handed agent gets the new connection the way it got the first:
     * a handoff message on its control socket. A connection that cannot
     * be handed (never seen: the 101 still queued) gets an agent of its
     * own; the parked one waits on. */
    int hfd = -1;
    const char *pre = NULL;
    size_t pre_len = 0;
    if (!sc->ctl_open || sc->ctl_pre ||
        acp__remote_link_handoff_fd(link, &hfd, &pre, &pre_len) != 0)
      return false;
    uv_timer_stop(&sc->timer);
    sc->parked = false;
    sc->handed = false;
    sc->ws = link;
    if (sv->opts->verbose)
      fprintf(stderr,
              "acp serve: connection %s resumes connection %s: agent pid %d "
              "(handoff)\n",
              id, sc->id, acp_uv_process_pid(sc->agent));
    snprintf(sc->id, sizeof(sc->id), "%s", id);
    handoff_send(sc, hfd, pre, pre_len);
    return true;
  }
  uv_timer_stop(&sc->timer);
  sc->parked = false;
  sc->ws = link;
  sc->skip_line = !sc->line_start;
  if (sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s resumes connection %s: agent pid %d\n",
            id, sc->id, acp_uv_process_pid(sc->agent));
  snprintf(sc->id, sizeof(sc->id), "%s", id);
  acp_uv_link_couple(sc->alink, sc->ws, 0, 0);
  acp_uv_link_couple(sc->ws, sc->alink, 0, 0);
  acp_uv_link_read_start(sc->ws, ws_read, sc);
  return true;
}

/* MARK: - Handoff (opts->handoff) */

/* The agent did not take the connection: the client is told (1011), the
 * operator too (always, not only with verbose: it is a misconfiguration),
 * and the agent is stopped. */
static void handoff_failed(sconn *sc, const char *why) {
  if (!sc->handing)
    return;
  sc->handing = false;
  fprintf(stderr,
          "acp serve: connection %s: the agent did not take the connection "
          "(--handoff): %s; closed with 1011\n",
          sc->id, why);
  sconn_end(sc, 0, 1011);
}

static void on_handoff_timeout(uv_timer_t *t) {
  handoff_failed(t->data, "no answer on its control socket within 10 s");
}

static void ctl_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  sconn *sc = h->data;
  (void)hint;
  *buf = uv_buf_init(sc->answer + sc->nanswer,
                     (unsigned)(sizeof(sc->answer) - 1 - sc->nanswer));
}

/* The agent took the connection ("ok"). */
static void handoff_taken(sconn *sc) {
  sc->handing = false;
  sc->handed = true;
  uv_timer_stop(&sc->timer);
  if (!sc->resumable) {
    uv_read_stop((uv_stream_t *)&sc->ctl); /* nothing more will come */
    sc->ctl_reading = false;
  }
  /* Our copy of the socket goes; the link stays until the agent ends, so
   * the connection still counts against the cap. */
  acp__remote_link_handed(sc->ws);
  if (sc->sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s: handed to agent pid %d (this "
            "process no longer reads or writes it)\n",
            sc->id, acp_uv_process_pid(sc->agent));
}

/* A handed agent's connection dropped ("parked"): the agent waits for a
 * reconnect, and this connection parks as a relayed one does (the same
 * grace timer, cookie and rebind()). */
static void handoff_parked(sconn *sc) {
  uint64_t grace = grace_ms(sc->sv);
  if (!sc->handed || sc->stopping || sc->parked || !sc->agent || sc->exited ||
      grace == 0 || !sc->aff[0])
    return;
  if (sc->sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s dropped (its agent said so): its "
            "agent waits %llu ms\n",
            sc->id, (unsigned long long)grace);
  close_ws(sc, 0, 1000); /* handed: nothing goes out */
  sc->handed = false;
  park_room(sc->sv);
  sc->parked = true;
  sc->parked_at = uv_now(&sc->sv->loop);
  uv_timer_start(&sc->timer, on_grace_timeout, grace, 0);
}

static void ctl_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  sconn *sc = s->data;
  (void)buf;
  if (n == 0)
    return;
  if (n < 0) {
    uv_read_stop(s);
    sc->ctl_reading = false;
    /* After the handoff the agent's exit (or not) ends the connection. */
    handoff_failed(sc, n == UV_EOF ? "it closed its control socket"
                                   : uv_strerror((int)n));
    return;
  }
  sc->nanswer += (size_t)n;
  for (;;) {
    char *nl = memchr(sc->answer, '\n', sc->nanswer);
    if (!nl)
      break;
    size_t len = (size_t)(nl - sc->answer);
    if (sc->handing && len == 2 && memcmp(sc->answer, "ok", 2) == 0)
      handoff_taken(sc);
    else if (sc->handing)
      handoff_failed(sc, "it answered something else than \"ok\"");
    else if (len == 6 && memcmp(sc->answer, "parked", 6) == 0)
      handoff_parked(sc);
    /* Anything else from a handed agent: not ours to act on. */
    if (!sc->ctl_open)
      return;
    sc->nanswer -= len + 1;
    memmove(sc->answer, nl + 1, sc->nanswer);
  }
  if (sc->nanswer == sizeof(sc->answer) - 1) {
    /* A line longer than any we know. */
    sc->nanswer = 0;
    if (sc->handing) {
      handoff_failed(sc, "it answered something else than \"ok\"");
    } else {
      uv_read_stop(s);
      sc->ctl_reading = false;
    }
  }
}

static void ctl_written(uv_write_t *req, int status) {
  sconn *sc = req->data;
  acp__free(&sc->sv->mem, sc->ctl_pre);
  sc->ctl_pre = NULL;
  if (status < 0 && status != UV_ECANCELED)
    handoff_failed(sc, uv_strerror(status));
}

/* Send the connection's socket (and what was read past its request) to
 * the agent on its control socket (sc->ctl), with the settings a relayed
 * connection gets (handoff.c: the message). */
static void handoff_send(sconn *sc, int sock, const char *pre, size_t pre_len) {
  serve *sv = sc->sv;
  const acp_remote_server_options *so = &sv->opts->server;
  acp_remote_adopt_options o = ACP_REMOTE_ADOPT_OPTIONS_INIT;
  uv_os_fd_t ctl_fd;
  o.max_message =
      so->max_message ? so->max_message : ACP_REMOTE_DEFAULT_MAX_MESSAGE;
  o.ping_ms = so->ping_ms ? so->ping_ms : ACP_REMOTE_DEFAULT_PING_MS;
  o.stall_ms = so->version >= 6 && so->stall_ms ? so->stall_ms
                                                : ACP_REMOTE_DEFAULT_STALL_MS;
  sc->handing = true;
  sc->nanswer = 0;
  sc->resumable = grace_ms(sv) > 0 && sc->aff[0];
  if (!sc->ctl_open || uv_fileno((uv_handle_t *)&sc->ctl, &ctl_fd) != 0) {
    handoff_failed(sc, "cannot use its control socket");
    return;
  }
  if (acp__handoff_send_head(ctl_fd, sock, pre_len, &o, sc->resumable) != 0) {
    handoff_failed(sc, strerror(errno));
    return;
  }
  if (sv->opts->verbose)
    fprintf(stderr,
            "acp serve: connection %s: handing it over (max message %zu, "
            "ping %llu ms, stall %llu ms, %s)\n",
            sc->id, o.max_message, (unsigned long long)o.ping_ms,
            (unsigned long long)o.stall_ms,
            sc->resumable ? "parks on a drop" : "no resume");
  if (pre_len > 0) {
    sc->ctl_pre = acp__malloc(&sv->mem, pre_len);
    if (!sc->ctl_pre) {
      handoff_failed(sc, "out of memory");
      return;
    }
    memcpy(sc->ctl_pre, pre, pre_len);
    uv_buf_t b = uv_buf_init(sc->ctl_pre, (unsigned)pre_len);
    sc->ctl_req.data = sc;
    if (uv_write(&sc->ctl_req, (uv_stream_t *)&sc->ctl, &b, 1, ctl_written) !=
        0) {
      acp__free(&sv->mem, sc->ctl_pre);
      sc->ctl_pre = NULL;
      handoff_failed(sc, "cannot write to its control socket");
      return;
    }
  }
  if (!sc->ctl_reading) {
    if (uv_read_start((uv_stream_t *)&sc->ctl, ctl_alloc, ctl_read) != 0) {
      handoff_failed(sc, "cannot read its control socket");
      return;
    }
    sc->ctl_reading = true;
  }
  uv_timer_start(&sc->timer, on_handoff_timeout, HANDOFF_MS, 0);
}

/* The control socket to an agent just started with its other end. */
static void handoff_start(sconn *sc, int ctl_fd, int sock, const char *pre,
                          size_t pre_len) {
  uv_pipe_init(&sc->sv->loop, &sc->ctl, 0);
  sc->ctl.data = sc;
  sc->ctl_open = true;
  if (uv_pipe_open(&sc->ctl, ctl_fd) != 0) {
    close(ctl_fd);
    sc->handing = true;
    handoff_failed(sc, "cannot use its control socket");
    return;
  }
  handoff_send(sc, sock, pre, pre_len);
}

static void on_accept(acp_remote_server *srv, acp_uv_link *link, const char *id,
                      void *ud) {
  serve *sv = ud;
  acp_uv_process_options *po = NULL;
  int uverr = 0;
  const char *aff = acp_remote_server_affinity(srv);
  if (aff && rebind(sv, link, id, aff))
    return;
  sconn *sc = acp__calloc(&sv->mem, 1, sizeof(*sc));
  if (!sc) {
    acp_uv_link_close(link, 0, NULL, NULL);
    return;
  }
  sc->sv = sv;
  sc->ws = link;
  sc->line_start = true;
  acp__buf_init(&sc->cline, &sv->mem,
                sv->opts->server.max_message ? sv->opts->server.max_message
                                             : ACP_REMOTE_DEFAULT_MAX_MESSAGE);
  acp__buf_init(&sc->aline, &sv->mem, ALINE_MAX);
  acp__buf_init(&sc->held, &sv->mem, 2 * sc->cline.max);
  if (aff)
    snprintf(sc->aff, sizeof(sc->aff), "%s", aff);
  uv_timer_init(&sv->loop, &sc->timer);
  sc->timer.data = sc;
  snprintf(sc->id, sizeof(sc->id), "%s", id);
  sc->next = sv->conns;
  if (sv->conns)
    sv->conns->prev = sc;
  sv->conns = sc;
  if (acp_uv_process_options_new(&po, &sv->mem) != 0 ||
      acp_uv_process_options_set_argv(po, sv->opts->agent_argv) != 0) {
    acp_uv_process_options_free(po);
    sconn_end(sc, 0, 1011);
    return;
  }
  acp_uv_process_options_set_exit_cb(po, agent_exited);
  /* Handoff: only a plain WebSocket (TLS and Streamable HTTP stay
   * relayed), decided before the spawn so that a relayed agent is started
   * exactly as without --handoff. */
  int sp[2] = {-1, -1}, hfd = -1;
  const char *pre = NULL;
  size_t pre_len = 0;
  if (sv->handoff &&
      acp__remote_link_handoff_fd(link, &hfd, &pre, &pre_len) == 0) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0 ||
        acp_uv_process_options_add_env(po, ACP_REMOTE_HANDOFF_ENV "=3") != 0) {
      fprintf(stderr, "acp serve: connection %s: cannot hand it over: %s\n",
              sc->id, strerror(errno));
      if (sp[0] >= 0) {
        close(sp[0]);
        close(sp[1]);
      }
      acp_uv_process_options_free(po);
      sconn_end(sc, 0, 1011);
      return;
    }
    acp_uv_process_options_set_fd3(po, sp[1]);
    sc->ho = true;
  }
  int rv =
      acp_uv_process_spawn(&sc->agent, &sv->loop, po, sc, &sv->mem, &uverr);
  acp_uv_process_options_free(po);
  if (sp[1] >= 0)
    close(sp[1]);
  if (rv != 0 && sp[0] >= 0)
    close(sp[0]);
  if (rv != 0) {
    fprintf(stderr, "acp serve: cannot start the agent '%s': %s\n",
            sv->opts->agent_argv[0], uverr ? uv_strerror(uverr) : "error");
    sc->agent = NULL;
    sconn_end(sc, 0, 1011);
    return;
  }
  sc->alink = acp_uv_process_link(sc->agent);
  if (sv->opts->verbose)
    fprintf(stderr, "acp serve: connection %s: agent pid %d\n", sc->id,
            acp_uv_process_pid(sc->agent));
  /* Backpressure both ways: a client that does not read stops the reading
   * of its agent's stdout, an agent that does not read stops the socket. */
  if (sp[0] >= 0) {
    /* The agent's stdin ends at once: one that does not know the handoff
     * (a stdio agent) sees the end of its input and exits, which fails
     * the handoff at once rather than at the deadline. */
    acp_uv_link_shutdown(sc->alink);
    acp_uv_link_read_start(sc->alink, agent_read, sc);
    handoff_start(sc, sp[0], hfd, pre, pre_len);
    return;
  }
  acp_uv_link_couple(sc->alink, sc->ws, 0, 0);
  acp_uv_link_couple(sc->ws, sc->alink, 0, 0);
  acp_uv_link_read_start(sc->alink, agent_read, sc);
  acp_uv_link_read_start(sc->ws, ws_read, sc);
}

static void on_signal(acp_uv_signals *s, int signum, void *ud) {
  serve *sv = ud;
  (void)s;
  (void)signum;
  if (sv->quitting)
    return;
  sv->quitting = true;
  acp_remote_server_close(sv->srv);
  sv->srv = NULL;
  for (sconn *sc = sv->conns; sc; sc = sc->next)
    sconn_end(sc, 0, 1001); /* going away */
  acp_uv_signals_close(sv->sig);
  sv->sig = NULL;
}

/* The read spin (opts->read_spin_us): last thing before the loop would
 * sleep, for each connection whose client message went to its agent in
 * this round, read the agent's stdout for up to the budget: the answer
 * that comes in it is relayed at once, and this process skips a sleep in
 * epoll and the wake-up through the kernel. It stops as soon as the
 * answer's bytes are drained (it waits for one reply, not a stream) and
 * never runs without a message just forwarded: an idle server never
 * spins. Why and what it buys: docs/decisions.md. */
static void on_prepare(uv_prepare_t *h) {
  serve *sv = h->data;
  if (!sv->spin_due)
    return;
  sv->spin_due = false;
  for (sconn *sc = sv->conns; sc; sc = sc->next) {
    if (!sc->spin_due)
      continue;
    sc->spin_due = false;
    if (sc->alink && sc->ws && !sc->stopping)
      acp__uv_link_spin_ex(sc->alink, sv->spin_ns, true);
  }
}

static void serve_log(const char *line, void *ud) {
  (void)ud;
  fprintf(stderr, "acp serve: %s\n", line);
}

int acp_remote_serve(const acp_remote_serve_options *opts) {
  serve sv;
  int rv, uverr = 0;
  if (!opts || !opts->agent_argv || !opts->agent_argv[0])
    return ACP_ERR_INVALID_ARGUMENT;
  memset(&sv, 0, sizeof(sv));
  acp__mem_init(&sv.mem, NULL);
  sv.opts = opts;
  if (opts->version >= 3)
    sv.spin_ns = (uint64_t)opts->read_spin_us * 1000u;
  sv.handoff = opts->version >= 4 && opts->handoff;
  acp_uv_ignore_sigpipe();
  if (uv_loop_init(&sv.loop) != 0)
    return ACP_ERR_SYSTEM;
  uv_prepare_init(&sv.loop, &sv.prep);
  sv.prep.data = &sv;
  if (sv.spin_ns > 0) {
    uv_prepare_start(&sv.prep, on_prepare);
    uv_unref((uv_handle_t *)&sv.prep);
  }
  acp_remote_server_options so = opts->server;
  if (so.version >= 4 && !so.log) {
    /* Refused TLS handshakes and the like: always on stderr (not only
     * with verbose), like any failed connection attempt an operator may
     * need to explain. */
    so.log = serve_log;
    so.log_user_data = NULL;
  }
  if (grace_ms(&sv) > 0 && (so.version < 2 || !so.affinity_cookie)) {
    if (so.version < 2)
      so.version = 2; /* not lower: later fields (tls) stay */
    so.affinity_cookie = "acp_agent";
  }
  rv = acp_remote_server_new(&sv.srv, &sv.loop, &so, on_accept, &sv, NULL,
                             &uverr);
  if (rv != 0) {
    if (uverr)
      fprintf(stderr, "acp serve: cannot listen: %s\n", uv_strerror(uverr));
    goto done;
  }
  rv = acp_uv_signals_new(&sv.sig, &sv.loop, on_signal, &sv, NULL);
  if (rv != 0) {
    acp_remote_server_close(sv.srv);
    goto done;
  }
  if (opts->on_listening)
    opts->on_listening(acp_remote_server_port(sv.srv), opts->user_data);
  uv_run(&sv.loop, UV_RUN_DEFAULT);
done:
  uv_close((uv_handle_t *)&sv.prep, NULL);
  uv_run(&sv.loop, UV_RUN_DEFAULT);
  uv_loop_close(&sv.loop);
  return rv;
}
