/*
 * libacp - umbrella header: includes every public header of the core
 * library (libacp). The runtime header acp/uv.h is NOT included: it names
 * libuv types and is included separately by runtime users.
 */
#ifndef ACP_ACP_H
#define ACP_ACP_H

#include "common.h"
#include <acp/version.h>
#include "json.h"
#include "ndjson.h"
#include "rpc.h"
#include "methods.h"
#include "types.h"
#include "types_v2.h"
#include "agent.h"
#include "client.h"
#include "proxy.h"
#include "router.h"
#include "mcp.h"
#include "mcp_acp.h"
#include "mcp_bridge.h"

#endif /* ACP_ACP_H */
