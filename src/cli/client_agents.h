/*
 * Agents named in a config file, in the shape editors use:
 *   {"agents": {"NAME": {"command": "...", "args": ["..."],
 *                        "env": {"KEY": "VALUE"}}}}
 * Default location: $XDG_CONFIG_HOME/acp/agents.json, falling back to
 * ~/.config/acp/agents.json.
 */
#ifndef ACP_CLI_CLIENT_AGENTS_H
#define ACP_CLI_CLIENT_AGENTS_H

/* The default file's path into buf (size n). 0, or -1 when neither
 * XDG_CONFIG_HOME nor HOME is set or the path does not fit. */
int client_agents_default_path(char *buf, unsigned n);

/* Find agent `name` in `file`: *argv_out gets a NULL-terminated argv
 * (command then args; free with client_agents_free_argv()) and its "env"
 * entries are set in this process's environment (the agent inherits them).
 * 0, or -1 with a message printed on stderr (file unreadable, not JSON,
 * no such agent, no command, a value of the wrong type). */
int client_agents_find(const char *file, const char *name, char ***argv_out);

void client_agents_free_argv(char **argv);

#endif
