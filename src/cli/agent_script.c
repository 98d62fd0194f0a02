/*
 * Parser for the reference agent's prompt command language (see
 * script_help). Lines starting with '/' are commands; runs of other lines
 * are text to stream back.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "agent_script.h"

const char script_help[] =
    "Prompt command language (one command per line; other lines are text):\n"
    "  TEXT                 streamed back as agent_message_chunk updates\n"
    "  /think TEXT          an agent_thought_chunk\n"
    "  /plan A; B; C        a plan, then each entry completed in turn\n"
    "  /plan:ID A; B        the same as plan ID, one of several plans\n"
    "                       (v2 plan_update planId; v1 unstable plan_update)\n"
    "  /plan-other[:ID] TEXT  v2: a plan of the custom content type\n"
    "                       _acp_note ({type, planId, text})\n"
    "  /tool[:KIND] TITLE   a tool call: pending, in_progress, completed\n"
    "  /ask[:KIND] TITLE    a tool call that needs session/request_permission\n"
    "  /read PATH           read a file through the client "
    "(fs/read_text_file)\n"
    "  /write PATH TEXT     write a file through the client\n"
    "  /run CMD [ARGS...]   run a command in a client terminal, show output\n"
    "                       (v2: the agent runs it as a terminal it owns,\n"
    "                       output in terminal_output_chunk, exitStatus;\n"
    "                       terminal/cancel stops it with SIGTERM, then\n"
    "                       SIGKILL after --kill-grace)\n"
    "  /mode ID             switch the session mode (ask, code)\n"
    "  /config ID VALUE     set a config option and report it\n"
    "  /title TEXT          a session_info_update with that title\n"
    "  /usage               a usage_update\n"
    "  /commands            an available_commands_update\n"
    "  /update JSON         a session/update with that update object, as\n"
    "                       is (any kind, e.g. {\"sessionUpdate\":\"notice\",\n"
    "                       \"severity\":\"info\",\"title\":\"Hi\"})\n"
    "  /elicit MESSAGE      ask the user a question (elicitation/create)\n"
    "  /diff[:OP[:TYPE]] PATH  an edit tool call with a diff of PATH (OP:\n"
    "                       modify, add, delete): v1 oldText/newText, v2\n"
    "                       changes and a git patch; v2 only: TYPE binary,\n"
    "                       directory or symlink (no patch), and\n"
    "  /diff:move OLD NEW   (or :copy) a whole-file move or copy\n"
    "  /cancellable TITLE   a tool call that runs until cancelled; under v2\n"
    "                       it advertises capabilities.cancel and\n"
    "                       tool_call/cancel ends it (status cancelled) and\n"
    "                       the turn goes on; session/cancel ends the turn\n"
    "  /wait                wait for session/cancel; the turn ends cancelled\n"
    "  /sleep MS            pause for MS milliseconds\n"
    "  /big BYTES           stream BYTES bytes of text (in 64 KiB chunks)\n"
    "  /chunks N TEXT       stream TEXT (\\n is a newline) as message chunks\n"
    "                       of N bytes, e.g. markdown split mid-marker\n"
    "  /error CODE MESSAGE  answer the prompt with that JSON-RPC error\n"
    "  /stop REASON         end the turn with REASON (end_turn, max_tokens,\n"
    "                       max_turn_requests, refusal, cancelled)\n"
    "Unstable (acp agent --unstable):\n"
    "  /subagent ID [TITLE] a subagent_update announcing child session ID\n"
    "  /message TO TEXT     a session_message to session TO, then its text\n"
    "                       as a session_message_chunk\n"
    "  /auth STATE          an auth/status_update (authenticated,\n"
    "                       unauthenticated, not_required, unknown); "
    "auth/status\n"
    "                       answers it from then on\n"
    "  /turn-usage IN OUT   put usage {inputTokens, outputTokens,\n"
    "                       totalTokens} in this turn's PromptResponse\n"
    "  /kill CMD [ARGS...]  start a command in a client terminal, then\n"
    "                       terminal/kill it and show how it ended\n"
    "  /elicit-url URL      ask the user to visit URL (url elicitation),\n"
    "                       then send elicitation/complete\n"
    "Relative paths are resolved against the session's cwd.\n";

struct cmd_name {
  const char *name;
  step_kind kind;
};

static const struct cmd_name cmd_names[] = {
    {"think", STEP_THINK},
    {"plan", STEP_PLAN},
    {"plan-other", STEP_PLAN_OTHER},
    {"tool", STEP_TOOL},
    {"ask", STEP_ASK},
    {"read", STEP_READ},
    {"write", STEP_WRITE},
    {"run", STEP_RUN},
    {"mode", STEP_MODE},
    {"config", STEP_CONFIG},
    {"title", STEP_TITLE},
    {"usage", STEP_USAGE},
    {"commands", STEP_COMMANDS},
    {"wait", STEP_WAIT},
    {"cancellable", STEP_CANCELLABLE},
    {"diff", STEP_DIFF},
    {"sleep", STEP_SLEEP},
    {"error", STEP_ERROR},
    {"stop", STEP_STOP},
    {"big", STEP_BIG},
    {"chunks", STEP_CHUNKS},
    {"elicit", STEP_ELICIT},
    {"update", STEP_UPDATE},
    {"subagent", STEP_SUBAGENT},
    {"message", STEP_MESSAGE},
    {"auth", STEP_AUTH},
    {"turn-usage", STEP_TURN_USAGE},
    {"kill", STEP_KILL},
    {"elicit-url", STEP_ELICIT_URL},
};

static char *dup_range(const char *p, size_t n) {
  char *s = malloc(n + 1);

  if (s == NULL)
    return NULL;
  memcpy(s, p, n);
  s[n] = '\0';
  return s;
}

/* Append `st`, which the script then owns; on failure its strings are
 * freed. */
static int push(script *sc, size_t *cap, step st) {
  step *ns;

  if (sc->n == *cap) {
    *cap = *cap ? *cap * 2 : 8;
    ns = realloc(sc->steps, *cap * sizeof(*ns));
    if (ns == NULL) {
      free(st.arg);
      free(st.arg2);
      return -1;
    }
    sc->steps = ns;
  }
  sc->steps[sc->n++] = st;
  return 0;
}

/* Append a text step holding [p, end). */
static int push_text(script *sc, size_t *cap, const char *p, const char *end) {
  step st = {STEP_TEXT, NULL, NULL, 0};

  st.arg = dup_range(p, (size_t)(end - p));
  if (st.arg == NULL)
    return -1;
  return push(sc, cap, st);
}

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  return p;
}

/* Split "WORD REST" at the first blank; trailing blanks dropped. */
static int split_two(const char *p, const char *end, char **a, char **b) {
  const char *q = p;

  while (q < end && *q != ' ' && *q != '\t')
    q++;
  *a = dup_range(p, (size_t)(q - p));
  q = skip_ws(q, end);
  *b = q < end ? dup_range(q, (size_t)(end - q)) : NULL;
  if (*a == NULL || (q < end && *b == NULL)) {
    free(*a);
    free(*b);
    return -1;
  }
  return 0;
}

static int parse_command(script *sc, size_t *cap, const char *p,
                         const char *end) {
  const char *name = p + 1;
  const char *q = name;
  const char *kind = NULL;
  size_t kind_len = 0;
  step st = {STEP_UNKNOWN, NULL, NULL, 0};
  size_t i;
  size_t name_len;

  while (q < end && *q != ' ' && *q != '\t' && *q != ':')
    q++;
  name_len = (size_t)(q - name);
  if (q < end && *q == ':') {
    kind = q + 1;
    while (q < end && *q != ' ' && *q != '\t')
      q++;
    kind_len = (size_t)(q - kind);
  }
  q = skip_ws(q, end);
  for (i = 0; i < sizeof(cmd_names) / sizeof(cmd_names[0]); i++) {
    if (strlen(cmd_names[i].name) == name_len &&
        memcmp(cmd_names[i].name, name, name_len) == 0) {
      st.kind = cmd_names[i].kind;
      break;
    }
  }
  switch (st.kind) {
  case STEP_WRITE:
  case STEP_CONFIG:
  case STEP_SUBAGENT:
  case STEP_MESSAGE:
  case STEP_TURN_USAGE:
    if (split_two(q, end, &st.arg, &st.arg2) != 0)
      return -1;
    break;
  case STEP_ERROR:
    st.num = strtoll(q, NULL, 10);
    while (q < end && (*q == '-' || isdigit((unsigned char)*q)))
      q++;
    q = skip_ws(q, end);
    st.arg = dup_range(q, (size_t)(end - q));
    if (st.arg == NULL)
      return -1;
    break;
  case STEP_SLEEP:
  case STEP_BIG:
    st.num = strtoll(q, NULL, 10);
    break;
  case STEP_CHUNKS:
    st.num = strtoll(q, NULL, 10);
    while (q < end && isdigit((unsigned char)*q))
      q++;
    q = skip_ws(q, end);
    st.arg = dup_range(q, (size_t)(end - q));
    if (st.arg == NULL)
      return -1;
    break;
  case STEP_UNKNOWN:
    st.arg = dup_range(p, (size_t)(end - p));
    if (st.arg == NULL)
      return -1;
    break;
  default:
    st.arg = dup_range(q, (size_t)(end - q));
    if (st.arg == NULL)
      return -1;
    if (kind != NULL) {
      st.arg2 = dup_range(kind, kind_len);
      if (st.arg2 == NULL) {
        free(st.arg);
        return -1;
      }
    }
    break;
  }
  return push(sc, cap, st);
}

int script_parse(script *sc, const char *text, size_t len) {
  const char *p = text;
  const char *end = text + len;
  const char *text_start = NULL;
  const char *text_end = NULL;
  size_t cap = 0;

  sc->steps = NULL;
  sc->n = 0;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = eol ? eol : end;
    const char *s = skip_ws(p, line_end);
    const char *e = line_end;

    while (e > s && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
      e--;
    if (s < e && *s == '/' && e - s > 1 && isalpha((unsigned char)s[1])) {
      if (text_start != NULL) {
        if (push_text(sc, &cap, text_start, text_end) != 0)
          goto fail;
        text_start = NULL;
      }
      if (parse_command(sc, &cap, s, e) != 0)
        goto fail;
    } else {
      /* Text keeps its own line breaks so what comes back is what went
       * in. */
      if (text_start == NULL)
        text_start = p;
      text_end = eol ? eol + 1 : end;
    }
    p = eol ? eol + 1 : end;
  }
  if (text_start != NULL && push_text(sc, &cap, text_start, text_end) != 0)
    goto fail;
  return 0;
fail:
  script_free(sc);
  return -1;
}

void script_free(script *sc) {
  size_t i;

  for (i = 0; i < sc->n; i++) {
    free(sc->steps[i].arg);
    free(sc->steps[i].arg2);
  }
  free(sc->steps);
  sc->steps = NULL;
  sc->n = 0;
}
