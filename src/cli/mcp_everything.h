/*
 * The "everything" fixture set of `acp mcp serve --everything`: the tools,
 * resources, resource templates, prompts and completion handler that the
 * MCP conformance suite's server scenarios call (names, arguments, results
 * and behaviours as its scenario sources state), plus an `echo` tool like
 * the reference server's. Sans I/O: handlers answer at once, except the
 * sampling and elicitation tools (they answer when the client's response
 * arrives) and the logging and progress tools, which pace their
 * notifications with a ping round trip after each one (see
 * mcp_everything.c) in place of the scenarios' ~50 ms delays.
 *
 * Tools:      test_simple_text, test_image_content, test_audio_content,
 *             test_embedded_resource, test_multiple_content_types,
 *             test_tool_with_logging, test_tool_with_progress,
 *             test_error_handling, test_sampling {prompt},
 *             test_elicitation {message}, test_elicitation_sep1034_defaults,
 *             test_elicitation_sep1330_enums, json_schema_2020_12_tool,
 *             test_reconnection, echo {message}
 * Resources:  test://static-text, test://static-binary,
 *             test://watched-resource
 * Templates:  test://template/{id}/data
 * Prompts:    test_simple_prompt, test_prompt_with_arguments {arg1, arg2},
 *             test_prompt_with_embedded_resource {resourceUri},
 *             test_prompt_with_image
 * Completion: prefix matches for test_prompt_with_arguments' arguments and
 *             the template's {id}.
 * Logging is enabled (logging/setLevel, notifications/message).
 */
#ifndef ACP_CLI_MCP_EVERYTHING_H
#define ACP_CLI_MCP_EVERYTHING_H

#include "acp/json.h"
#include "acp/mcp.h"

/**
 * Register the whole fixture set on `s` (which should be empty: a name
 * already registered fails) and enable logging, subscriptions and the
 * completion handler.
 * @return 0, ACP_ERR_INVALID_ARGUMENT (s NULL), ACP_ERR_INVALID_STATE (a
 *         fixture name is already registered) or ACP_ERR_NOMEM.
 */
int mcp_everything_register(acp_mcp_server *s);

/** Closes the HTTP connection carrying a call's SSE stream (the shape of
 * acp_http_call_close_stream()); its error is ignored. */
typedef int (*mcp_everything_close_stream_fn)(acp_mcp_call *call);

/**
 * As mcp_everything_register(), with the function test_reconnection calls
 * before answering (NULL: none). mcp_everything_register() passes
 * acp_http_call_close_stream(); tests without the runtime pass their own.
 * Same return values.
 */
int mcp_everything_register_with(acp_mcp_server *s,
                                 mcp_everything_close_stream_fn close_stream);

/** Write one prompt message, {"role":"user","content":{"type":"text",
 * "text":TEXT}}, at the writer's current position (also used by
 * `acp mcp serve`'s own prompt). */
void mcp_write_user_text(acp_json_writer *w, const char *text, size_t len);

#endif /* ACP_CLI_MCP_EVERYTHING_H */
