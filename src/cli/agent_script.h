/*
 * The reference agent's command language: a prompt's text becomes a list
 * of steps that `acp agent` plays as one prompt turn. Pure parsing, no I/O.
 */
#ifndef ACP_CLI_AGENT_SCRIPT_H
#define ACP_CLI_AGENT_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

typedef enum step_kind {
  STEP_TEXT = 1,    /* stream `arg` as agent_message_chunk(s) */
  STEP_THINK,       /* agent_thought_chunk */
  STEP_PLAN,        /* plan entries separated by ';' (arg2: plan id) */
  STEP_PLAN_OTHER,  /* v2 plan of a custom content type: arg text */
  STEP_TOOL,        /* tool call: pending -> in_progress -> completed */
  STEP_ASK,         /* tool call gated by session/request_permission */
  STEP_READ,        /* fs/read_text_file */
  STEP_WRITE,       /* fs/write_text_file: arg = path, arg2 = text */
  STEP_RUN,         /* terminal/create + wait_for_exit + output + release */
  STEP_MODE,        /* current_mode_update */
  STEP_CONFIG,      /* config option: arg = id, arg2 = value */
  STEP_TITLE,       /* session_info_update */
  STEP_USAGE,       /* usage_update */
  STEP_COMMANDS,    /* available_commands_update */
  STEP_WAIT,        /* wait for session/cancel */
  STEP_SLEEP,       /* pause `num` ms */
  STEP_ERROR,       /* answer the prompt with error `num`, message arg */
  STEP_STOP,        /* end the turn with stop reason `arg` */
  STEP_BIG,         /* stream `num` bytes of text */
  STEP_CHUNKS,      /* stream arg (\n decoded) in chunks of `num` bytes */
  STEP_ELICIT,      /* elicitation/create (form) with message arg */
  STEP_UPDATE,      /* a session/update whose update object is `arg` (JSON) */
  STEP_CANCELLABLE, /* a tool call that runs until tool_call/cancel (v2) */
  STEP_DIFF,        /* an edit tool call with diff content: arg path */
  /* Unstable (acp agent --unstable): */
  STEP_SUBAGENT,   /* subagent_update: arg = child session id, arg2 title */
  STEP_MESSAGE,    /* session_message + chunk: arg = recipient, arg2 text */
  STEP_AUTH,       /* auth/status_update with state arg */
  STEP_TURN_USAGE, /* usage in the PromptResponse: arg in, arg2 out */
  STEP_KILL,       /* terminal/create, terminal/kill, wait, output, release */
  STEP_ELICIT_URL, /* elicitation/create (url) then elicitation/complete */
  STEP_UNKNOWN     /* unknown command: reported back as text */
} step_kind;

typedef struct step {
  step_kind kind;
  char *arg;  /* NUL-terminated, owned by the script */
  char *arg2; /* second argument or NULL */
  int64_t num;
} step;

typedef struct script {
  step *steps;
  size_t n;
} script;

/* Parse prompt text. Returns 0 or -1 (out of memory). */
int script_parse(script *out, const char *text, size_t len);
void script_free(script *sc);

/* The text of `acp agent --help` describing the language. */
extern const char script_help[];

#endif
