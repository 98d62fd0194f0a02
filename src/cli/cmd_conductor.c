/*
 * `acp conductor`: run a proxy chain (the Proxy Chains RFD). Argument
 * parsing only; the runtime is acp_conductor_run() (acp/conductor.h).
 */
#include <limits.h>
#include <stdio.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "acp/conductor.h"
#include "acp/remote.h"
#include "cli.h"

static const char conductor_usage[] =
    "usage: acp conductor agent [options] COMPONENT... AGENT\n"
    "       acp conductor proxy [options] [PROXY...]\n"
    "(options may also come before `agent` or `proxy`)\n"
    "\n"
    "Run a chain of ACP proxies in front of an agent, as the Proxy Chains RFD\n"
    "describes. `agent` mode looks like an ordinary agent to the client on\n"
    "stdin/stdout: every COMPONENT but the last is a proxy, the last is the\n"
    "agent. `proxy` mode looks like one proxy to a parent conductor (it\n"
    "expects proxy/initialize and sends its last proxy's successor traffic to\n"
    "the parent), so conductors nest.\n"
    "\n"
    "A COMPONENT is one argument: a command line split like a shell does\n"
    "('single', \"double\" quotes, backslashes; leading NAME=value words set\n"
    "environment variables), or a JSON object\n"
    "  {\"command\": \"acp\", \"args\": [\"proxy\", \"arrow\"], \"env\": "
    "{\"K\": "
    "\"V\"}}\n"
    "Components are spawned when the first message (initialize) arrives, each\n"
    "in its own process group; their stderr is copied to ours as \"[name] "
    "...\".\n"
    "A COMPONENT that is one URL, ws://HOST:PORT/PATH or http://... (or\n"
    "over TLS wss://, https://), is a remote peer (e.g. an agent behind acp\n"
    "serve) reached over remote ACP: WebSocket, or Streamable HTTP for\n"
    "http:// and https:// with --http. The end of its\n"
    "connection counts as its death; the bearer token, if any, comes from\n"
    "the ACP_TOKEN environment variable.\n"
    "\n"
    "options:\n"
    "  --trace FILE          one JSON line per message hop: {\"time\" (ms),\n"
    "                        \"from\", \"to\", \"dir\", \"message\"} (the "
    "message\n"
    "                        as its receiver got it, byte for byte; bridged\n"
    "                        MCP traffic as endpoint:K, bridge:SERVER)\n"
    "  --debug-dir DIR       log each component's stdin, stdout and stderr to\n"
    "                        DIR/K-NAME.{stdin,stdout,stderr}, the MCP "
    "bridge's\n"
    "                        traffic to DIR/bridge.jsonl\n"
    "  --on-crash POLICY     fail (default), bypass or restart; see below\n"
    "  --max-restarts N      restarts per component under restart (default "
    "3)\n"
    "  --proxy-methods M     auto (default: proxy/*, falling back to\n"
    "                        _proxy/* and the oldest names on -32601), spec\n"
    "                        (proxy/* only) or underscore (_proxy/* only)\n"
    "  --mcp-bridge MODE     stdio (default), http or off: how MCP servers\n"
    "                        that components offer over ACP reach an agent\n"
    "                        that does not advertise mcpCapabilities.acp;\n"
    "                        stdio rewrites each into `acp mcp-shim`, http\n"
    "                        into a Streamable HTTP endpoint on 127.0.0.1\n"
    "                        with a bearer token when the agent advertises\n"
    "                        mcpCapabilities.http (see docs/conductor.md)\n"
    "  --stdin-grace MS      shutdown: wait after closing a component's stdin\n"
    "                        before SIGTERM (default 1000)\n"
    "  --term-grace MS       shutdown: wait after SIGTERM before SIGKILL\n"
    "                        (default 1000)\n"
    "  --max-line BYTES      longest line accepted from the client or a\n"
    "                        component (default 256 MiB); a longer one is\n"
    "                        dropped and answered -32600 on its link\n"
    "  --quiet-stderr        do not copy components' stderr to ours\n"
    "  --http                http:// URL components use Streamable HTTP\n"
    "                        (default: WebSocket, as acp client --url)\n"
    "  --h2                  with --http: over HTTP/2 (h2c on http://, ALPN\n"
    "                        h2 on https://), as acp client --h2\n"
    "  --ca FILE             wss:// and https:// URL components: trust the\n"
    "                        CAs in FILE (PEM) instead of the system's\n"
    "  --cert FILE --key FILE\n"
    "                        wss:// and https:// URL components: present\n"
    "                        this client certificate (mutual TLS)\n"
    "  --verbose             URL components over TLS: a line on stderr per\n"
    "                        socket once its handshake is over (session\n"
    "                        resumed or full handshake), as acp client\n"
    "  -h, --help            show this help\n"
    "\n"
    "When a component dies, every request pending through it is answered at\n"
    "once with an error (-32603) naming it: its index, command, exit status\n"
    "or signal and the last lines of its stderr. Then:\n"
    "  fail     the chain shuts down and the conductor exits 1. Sessions end.\n"
    "  bypass   a dead proxy is removed; its neighbours talk directly.\n"
    "           Sessions go on (the agent holds them) without what the proxy\n"
    "           added (injected context, its MCP servers, rewrites).\n"
    "  restart  a dead proxy is respawned and sent proxy/initialize with its\n"
    "           original parameters (its successor is not re-initialized).\n"
    "           Sessions go on; the new process sees sessions it never saw\n"
    "           created. After --max-restarts, as fail.\n"
    "The agent's death always ends the chain (exit 1).\n"
    "\n"
    "Shutdown: end of input (after in-flight requests are answered, at most\n"
    "the stdin grace), SIGTERM or SIGINT stop the components in chain order:\n"
    "close stdin, wait, SIGTERM, wait, SIGKILL to the process group. Every\n"
    "child is reaped. Exit status: 0 normal end, 1 failure, 2 bad usage.\n";

/* A conductor forwards large messages through several buffers in turn
 * (line, router, write queue), each freed after its message. By default
 * glibc hands 1 MiB blocks back to the kernel (mmap, heap trimming), so the
 * next large message faults in fresh pages: about half the 1 MiB
 * forwarding rate. Keeping them in the heap lets the next message reuse
 * them; peak RSS stays what is in use at once. See docs/conductor.md. */
static void tune_allocator(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
#endif
}

/* URL components: a remote ACP link on the conductor's loop. */
static int remote_transport = ACP_REMOTE_AUTO;
static const char *tls_ca, *tls_cert, *tls_key; /* wss://, https:// */
static bool remote_verbose; /* --verbose: the remote client's TLS lines */

/* --verbose: how each TLS socket of a URL component was set up. */
static void on_remote_log(const char *line, void *ud) {
  fprintf(stderr, "acp conductor: %s: %s\n", (const char *)ud, line);
}

static void on_remote(acp_uv_link *link, int status, const char *detail,
                      void *ud) {
  (void)link;
  if (status != 0)
    cli_err("conductor", "%s: %s", (const char *)ud, detail);
}

/* In acp-remote only (cmd_conductor execs it for a chain with a URL). */
static int connect_remote(void *loop, const char *url, struct acp_uv_link **out,
                          void *ud) {
  acp_remote_client_options ro = ACP_REMOTE_CLIENT_OPTIONS_INIT;
  (void)ud;
  acp_remote_tls *tls = NULL;
  char err[256];
  int rv;
  ro.token = getenv("ACP_TOKEN");
  if (remote_verbose) {
    ro.log = on_remote_log;
    ro.log_user_data = (void *)url; /* lives in the options */
  }
  if ((remote_transport == ACP_REMOTE_HTTP ||
       remote_transport == ACP_REMOTE_HTTP2) &&
      (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0))
    ro.transport = remote_transport;
  if ((tls_cert != NULL) != (tls_key != NULL)) {
    cli_err("conductor", "--cert and --key go together");
    return ACP_ERR_INVALID_ARGUMENT;
  }
  if (tls_ca || tls_cert) {
    rv = cli_remote->tls_new(&tls, tls_ca, tls_cert, tls_key, err, sizeof(err));
    if (rv != 0) {
      cli_err("conductor", "%s: %s", url, err);
      return rv;
    }
    ro.tls = tls;
  }
  /* `url` lives in the options, which outlive the run. */
  rv = cli_remote->connect(out, loop, url, &ro, on_remote, (void *)url, NULL);
  if (tls != NULL)
    cli_remote->tls_free(tls); /* the connection keeps its reference */
  return rv;
}

int cmd_conductor(int argc, char **argv) {
  tune_allocator();
  acp_conductor_options *o = NULL;
  uint64_t g_in = 1000, g_term = 1000, restarts;
  unsigned long long num;
  int i = 1, ok, status = CLI_EXIT_FAILURE, rc;
  const char *v;
  const char *mode = NULL; /* "agent" or "proxy" */
  char err[256];

  if (acp_conductor_options_new(&o, NULL) < 0) {
    cli_err("conductor", "out of memory");
    return CLI_EXIT_FAILURE;
  }
  /* The MCP bridge runs the acp program (`acp mcp-shim`, `acp mcp
   * http-bridge`), named explicitly: ourselves, or in acp-remote the acp
   * beside it. */
  if (acp_conductor_options_set_shim_program(o, cli_acp_path()) < 0) {
    acp_conductor_options_free(o);
    cli_err("conductor", "out of memory");
    return CLI_EXIT_FAILURE;
  }
  /* Options come before or after the mode word; the first other word
   * starts the components. */
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (mode == NULL && (strcmp(a, "agent") == 0 || strcmp(a, "proxy") == 0)) {
      mode = a;
      continue;
    }
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0')
      break;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(conductor_usage, stdout);
      status = CLI_EXIT_OK;
      goto out;
    }
    if (strcmp(a, "--quiet-stderr") == 0) {
      acp_conductor_options_set_stderr_passthrough(o, false);
      continue;
    }
    if (strcmp(a, "--http") == 0) {
      if (remote_transport != ACP_REMOTE_HTTP2)
        remote_transport = ACP_REMOTE_HTTP;
      continue;
    }
    if (strcmp(a, "--h2") == 0) {
      remote_transport = ACP_REMOTE_HTTP2; /* implies --http */
      continue;
    }
    if (strcmp(a, "--verbose") == 0) {
      remote_verbose = true;
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--ca", &ok)) || ok) {
      if (ok < 0)
        goto usage;
      tls_ca = v;
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--cert", &ok)) || ok) {
      if (ok < 0)
        goto usage;
      tls_cert = v;
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--key", &ok)) || ok) {
      if (ok < 0)
        goto usage;
      tls_key = v;
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--trace", &ok)) || ok) {
      if (ok < 0 || acp_conductor_options_set_trace_file(o, v) < 0)
        goto usage;
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--debug-dir", &ok)) || ok) {
      if (ok < 0 || acp_conductor_options_set_debug_dir(o, v) < 0)
        goto usage;
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--on-crash", &ok)) || ok) {
      if (ok < 0)
        goto usage;
      if (strcmp(v, "fail") == 0)
        acp_conductor_options_set_on_crash(o, ACP_CONDUCTOR_ON_CRASH_FAIL);
      else if (strcmp(v, "bypass") == 0)
        acp_conductor_options_set_on_crash(o, ACP_CONDUCTOR_ON_CRASH_BYPASS);
      else if (strcmp(v, "restart") == 0)
        acp_conductor_options_set_on_crash(o, ACP_CONDUCTOR_ON_CRASH_RESTART);
      else {
        cli_err("conductor", "--on-crash: expected fail, bypass or restart");
        goto usage;
      }
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--proxy-methods", &ok)) || ok) {
      if (ok < 0)
        goto usage;
      if (strcmp(v, "auto") == 0)
        acp_conductor_options_set_proxy_methods(o,
                                                ACP_ROUTER_PROXY_METHODS_AUTO);
      else if (strcmp(v, "spec") == 0)
        acp_conductor_options_set_proxy_methods(o,
                                                ACP_ROUTER_PROXY_METHODS_SPEC);
      else if (strcmp(v, "underscore") == 0)
        acp_conductor_options_set_proxy_methods(
            o, ACP_ROUTER_PROXY_METHODS_UNDERSCORE);
      else {
        cli_err("conductor",
                "--proxy-methods: expected auto, spec or underscore");
        goto usage;
      }
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--mcp-bridge", &ok)) || ok) {
      if (ok < 0)
        goto usage;
      if (strcmp(v, "stdio") == 0)
        acp_conductor_options_set_mcp_bridge(o, ACP_CONDUCTOR_MCP_BRIDGE_STDIO);
      else if (strcmp(v, "off") == 0)
        acp_conductor_options_set_mcp_bridge(o, ACP_CONDUCTOR_MCP_BRIDGE_OFF);
      else if (strcmp(v, "http") == 0)
        acp_conductor_options_set_mcp_bridge(o, ACP_CONDUCTOR_MCP_BRIDGE_HTTP);
      else {
        cli_err("conductor", "--mcp-bridge: expected stdio, http or off");
        goto usage;
      }
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--max-restarts", &ok)) || ok) {
      if (ok < 0 ||
          cli_opt_uint("conductor", "--max-restarts", v, 0, 1000000, &num) != 0)
        goto usage;
      restarts = num;
      acp_conductor_options_set_max_restarts(o, (unsigned)restarts);
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--max-line", &ok)) || ok) {
      if (ok < 0 ||
          cli_opt_uint("conductor", "--max-line", v, 1, SIZE_MAX, &num) != 0)
        goto usage;
      acp_conductor_options_set_max_line(o, (size_t)num);
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--stdin-grace", &ok)) || ok) {
      if (ok < 0 || cli_opt_uint("conductor", "--stdin-grace", v, 0, ULLONG_MAX,
                                 &num) != 0)
        goto usage;
      g_in = num;
      continue;
    }
    if ((v = cli_opt_value(argc, argv, &i, "--term-grace", &ok)) || ok) {
      if (ok < 0 || cli_opt_uint("conductor", "--term-grace", v, 0, ULLONG_MAX,
                                 &num) != 0)
        goto usage;
      g_term = num;
      continue;
    }
    cli_err("conductor", "unknown option %s", a);
    goto usage;
  }
  if (mode == NULL) {
    cli_err("conductor", "expected 'agent' or 'proxy' (see --help)");
    goto usage;
  }
  acp_conductor_options_set_mode(o, strcmp(mode, "proxy") == 0
                                        ? ACP_ROUTER_MODE_PROXY
                                        : ACP_ROUTER_MODE_AGENT);
  acp_conductor_options_set_grace(o, g_in, g_term);
  if (cli_remote != NULL)
    acp_conductor_options_set_connector(o, connect_remote, NULL);
  for (; i < argc; i++) {
    rc = acp_conductor_options_add_component_spec(o, argv[i], err, sizeof(err));
    if (rc < 0) {
      cli_err("conductor", "component %d (%s): %s", i, argv[i],
              err[0] ? err : acp_strerror(rc));
      goto usage;
    }
  }
  if (strcmp(mode, "agent") == 0 &&
      acp_conductor_options_component_count(o) == 0) {
    cli_err("conductor", "agent mode needs at least the agent component");
    goto usage;
  }
  if (cli_remote == NULL && acp_conductor_options_url_component_count(o) > 0) {
    /* A remote component: the chain runs in acp-remote (cli.h), which has
     * the transports; nothing has been read or spawned yet. */
    status = cli_exec_beside("acp-remote", argc, argv);
    goto out;
  }
  rc = acp_conductor_run(o, 0, 1, &status);
  if (rc < 0) {
    cli_err("conductor", "%s", acp_strerror(rc));
    status = CLI_EXIT_FAILURE;
  }
  goto out;
usage:
  status = CLI_EXIT_USAGE;
out:
  acp_conductor_options_free(o);
  return status;
}
