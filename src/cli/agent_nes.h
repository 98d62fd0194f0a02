/*
 * The reference agent's unstable providers, next edit suggestions (NES)
 * and documents (`acp agent --unstable`): one configurable provider "main",
 * NES sessions holding the documents the client opened, and a suggestion
 * engine a test can predict (each `TODO` becomes `DONE`, unless rejected).
 */
#ifndef ACP_CLI_AGENT_NES_H
#define ACP_CLI_AGENT_NES_H

#include "acp/agent.h"

typedef struct agent_nes agent_nes;

/* NULL when out of memory. Free with agent_nes_free(). */
agent_nes *agent_nes_new(void);
void agent_nes_free(agent_nes *n);

/* Register the providers, nes and document handlers. Their user data is
 * the application's; they find their state with agent_nes_of(). */
void agent_nes_register(acp_agent_callbacks *cbs);

/* Implemented by the application: the agent_nes of the callbacks' user
 * data. */
agent_nes *agent_nes_of(void *user_data);

/* The members to add to agentCapabilities: `"providers":{},"nes":{...},
 * "positionEncoding":...` (no braces, no leading comma), for the client
 * whose clientCapabilities are `client_caps` (NULL: none): the position
 * encoding is the first of its positionEncodings that the agent knows
 * (utf-16, utf-8, utf-32), else utf-16, and is used for the documents it
 * opens from now on. Owned by `n`, valid until the next call. */
const char *agent_nes_capabilities(agent_nes *n,
                                   const acp_json_val *client_caps);

#endif /* ACP_CLI_AGENT_NES_H */
