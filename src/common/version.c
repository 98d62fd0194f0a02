#include "acp/version.h"

const char *acp_version(void) {
  return ACP_VERSION;
}
