/*
 * acp serve: any stdio ACP agent at HOST:PORT/acp (WebSocket and Streamable
 * HTTP), one agent process per connection (acp_remote_serve() does the work).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acp/remote.h"
#include "cli.h"

static const char serve_usage[] =
    "usage: acp serve [--listen HOST:PORT] [--token TOKEN]\n"
    "                 [--tls CERT KEY [--client-ca FILE] [--alpn LIST]\n"
    "                  [--no-tls-resumption] [--tls-ticket-key-period S]]\n"
    "                 [--allow-host NAME[:PORT]]... [--max-connections N]\n"
    "                 [--max-message BYTES] [--ping-ms MS]\n"
    "                 [--session-grace MS] [--hold-timeout MS]\n"
    "                 [--stall-timeout MS]\n"
    "                 [--read-spin-us N] [--handoff | --no-handoff]\n"
    "                 [--verbose]\n"
    "                 -- AGENT_CMD [ARGS...]\n"
    "\n"
    "Expose a stdio ACP agent at HOST:PORT/acp over both profiles of remote\n"
    "ACP: WebSocket (ws://HOST:PORT/acp) and Streamable HTTP (POST\n"
    "initialize -> 200 with Acp-Connection-Id, other POSTs -> 202, GET SSE\n"
    "streams with the agent's messages, DELETE ends the connection) over\n"
    "HTTP/1.1 or cleartext HTTP/2 (h2c with prior knowledge, same port). Each\n"
    "connection gets its own agent process, stopped (stdin closed, SIGTERM,\n"
    "SIGKILL) when the connection ends; each message is one line of the\n"
    "agent's stdin or stdout.\n"
    "\n"
    "options:\n"
    "  --listen HOST:PORT   address to bind (default 127.0.0.1:8080; port 0\n"
    "                       picks a free one); the URL is printed on stderr\n"
    "  --token TOKEN        require 'Authorization: Bearer TOKEN' (401)\n"
    "                       (also from the ACP_SERVE_TOKEN environment)\n"
    "  --tls CERT KEY       serve https:// and wss:// (TLS 1.2 or later) on\n"
    "                       the same /acp endpoint, with the certificate\n"
    "                       chain CERT and its private key KEY (PEM files,\n"
    "                       the key unencrypted); plain HTTP sent to the\n"
    "                       port is answered 400 and closed; a refused\n"
    "                       handshake or plaintext connection prints a\n"
    "                       line on stderr (peer address, OpenSSL's reason)\n"
    "  --client-ca FILE     with --tls: mutual TLS; a client must present a\n"
    "                       certificate signed by a CA in FILE (PEM) or the\n"
    "                       handshake fails, before any HTTP. With --token\n"
    "                       too, a client needs both: the certificate to get\n"
    "                       in, then the token on every request\n"
    "  --alpn LIST          with --tls: the ALPN protocols offered, comma-\n"
    "                       separated, preferred first (default h2,http/1.1);\n"
    "                       --alpn http/1.1 serves HTTP/1.1 only over TLS (an\n"
    "                       HTTP/2 client that offers http/1.1 too falls back\n"
    "                       to it; one offering only h2 is refused with the\n"
    "                       no_application_protocol alert)\n"
    "  --no-tls-resumption  with --tls: no session resumption (no TLS 1.3\n"
    "                       tickets, no TLS 1.2 session cache): every\n"
    "                       handshake is a full one. By default a client may\n"
    "                       resume a session for 2 hours, with ticket keys\n"
    "                       drawn at random (see below); up to 1024 TLS 1.2\n"
    "                       sessions are cached\n"
    "  --tls-ticket-key-period S\n"
    "                       with --tls: a new session-ticket key every S\n"
    "                       seconds (default 3600, at most 604800); the\n"
    "                       previous key still opens tickets (and the client\n"
    "                       gets a fresh one), older ones are wiped: a ticket\n"
    "                       resumes for less than 2 periods\n"
    "  --allow-host NAME    also accept this Host / Origin authority (403\n"
    "                       otherwise; the bound address and localhost are)\n"
    "  --max-connections N  connections at once (default 256; 503 beyond)\n"
    "  --max-message BYTES  largest message (default 16 MiB; close 1009,\n"
    "                       a POST body beyond it gets 413)\n"
    "  --ping-ms MS         ping interval; a peer silent for two is dropped\n"
    "                       (default 30000; 0 keeps the default); also the\n"
    "                       SSE keepalive; a Streamable HTTP connection may\n"
    "                       go two intervals (at least 10 s) without its\n"
    "                       GET stream\n"
    "  --session-grace MS   keep the agent of a connection that dropped (not\n"
    "                       one closed or DELETEd) for MS, so a client that\n"
    "                       reconnects with its cookies (acp_agent, set on\n"
    "                       connect) gets the same agent process back and\n"
    "                       can session/load or session/resume its sessions;\n"
    "                       what the agent said meanwhile is dropped, and\n"
    "                       a turn in flight is cancelled (session/cancel)\n"
    "                       (default 0: stopped at once); at most\n"
    "                       --max-connections agents wait, beyond that the\n"
    "                       one that waited longest is stopped\n"
    "  --hold-timeout MS    how long a Streamable HTTP POST waits while the\n"
    "                       agent is not reading its stdin before it is\n"
    "                       answered 503 (default 30000; at most 32 wait\n"
    "                       per connection, more get 503 at once)\n"
    "  --stall-timeout MS   how long a Streamable HTTP session's messages\n"
    "                       wait for its GET stream to come back after it\n"
    "                       ended, and how long output queued on an open\n"
    "                       stream or WebSocket (or an HTTP/2 stream given\n"
    "                       no flow-control window) may wait with not a\n"
    "                       byte taken by a client that stopped reading;\n"
    "                       then the client is taken to be gone and its\n"
    "                       connection ends, as a dropped WebSocket does\n"
    "                       (default 60000)\n"
    "  --read-spin-us N     after relaying a client message to its agent,\n"
    "                       poll the agent's stdout for up to N us (yielding\n"
    "                       the CPU) for the answer before sleeping, which\n"
    "                       saves a kernel wake-up per message; costs up to\n"
    "                       N us of CPU per message not answered in time,\n"
    "                       never any while idle (0..1000000, default 0: off)\n"
    "  --handoff            hand each plain WebSocket connection (not TLS,\n"
    "                       not Streamable HTTP) to its agent after the\n"
    "                       101: the agent gets the socket on the control\n"
    "                       socket named by ACP_HANDOFF_FD and speaks\n"
    "                       WebSocket itself, this process leaves the data\n"
    "                       path (acp agent does; an agent that does not\n"
    "                       take it gets its client closed with 1011). The\n"
    "                       agent gets --max-message, --ping-ms and\n"
    "                       --stall-timeout with it; on SIGTERM acp agent\n"
    "                       closes it with 1001. With --session-grace a\n"
    "                       dropped connection's agent cancels its turn and\n"
    "                       waits, and a reconnect with its cookie is handed\n"
    "                       to it. On by default when the agent is this\n"
    "                       build's own `acp agent` (the same file, not\n"
    "                       another acp in PATH); --handoff turns it on\n"
    "                       for another agent that takes the socket\n"
    "                       (acp_remote_handoff_open() of libacp-remote)\n"
    "  --no-handoff         relay every connection's bytes, even to acp\n"
    "                       agent\n"
    "  --verbose            a line on stderr per connection (with --tls: its\n"
    "                       handshake, resumed or full, and how the peer\n"
    "                       ended TLS: close_notify or not)\n"
    "  -h, --help           show this help\n";

typedef struct serve_info {
  const char *host;
  bool tls;
} serve_info;

static void on_listening(int port, void *ud) {
  const serve_info *si = ud;
  fprintf(stderr, "acp serve: listening on %s://%s:%d/acp\n",
          si->tls ? "wss" : "ws", si->host, port);
  fflush(stderr);
}

/* The port of --listen. */
static int parse_port(const char *v, unsigned long long *out) {
  char *end = NULL;
  unsigned long long n;
  /* Digits only: strtoull alone takes spaces and a sign, and saturates. */
  errno = 0;
  n = strtoull(v, &end, 10);
  if (*v < '0' || *v > '9' || *end != '\0' || errno == ERANGE)
    return -1;
  *out = n;
  return 0;
}

/* PROG as execvp() would find it, into out[PATH_MAX]. */
static bool find_program(const char *prog, char *out) {
  const char *dirs = getenv("PATH");

  if (strchr(prog, '/') != NULL)
    return realpath(prog, out) != NULL;
  if (dirs == NULL || *dirs == '\0')
    dirs = "/usr/local/bin:/usr/bin:/bin";
  while (*dirs != '\0') {
    const char *end = strchr(dirs, ':');
    size_t n = end ? (size_t)(end - dirs) : strlen(dirs);
    char cand[PATH_MAX];

    if (snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, n ? dirs : ".", prog) <
            (int)sizeof(cand) &&
        access(cand, X_OK) == 0 && realpath(cand, out) != NULL)
      return true;
    dirs += n + (end != NULL);
  }
  return false;
}

/* Whether AGENT... is this build's own `acp agent` (or `acp-remote
 * agent`, which it execs for a handoff): the agent known to take a handed
 * WebSocket, so the handoff is on by default for it. By the file it runs,
 * not the name: another acp in PATH may be another version. Any other
 * agent is relayed unless --handoff says it takes it. */
static int agent_takes_handoff(char **agent) {
  char prog[PATH_MAX], self[PATH_MAX], sibling[PATH_MAX + 8];
  const char *slash;

  if (agent[0] == NULL || agent[1] == NULL || strcmp(agent[1], "agent") != 0 ||
      !find_program(agent[0], prog) || realpath(cli_self_path(), self) == NULL)
    return 0;
  if (strcmp(prog, self) == 0)
    return 1;
  slash = strrchr(self, '/');
  snprintf(sibling, sizeof(sibling), "%.*s/acp",
           (int)(slash ? slash - self : 0), self);
  if (realpath(sibling, self) == NULL)
    return 0;
  return strcmp(prog, self) == 0;
}

int cmd_acp_serve(int argc, char **argv) {
  acp_remote_serve_options o;
  acp_remote_server_options so = ACP_REMOTE_SERVER_OPTIONS_INIT;
  const char *listen = "127.0.0.1:8080";
  const char *allow[33];
  size_t nallow = 0;
  char host[256];
  const char *v;
  int i, ok;
  int handoff = -1; /* --handoff 1, --no-handoff 0, else by the agent */
  unsigned long long n;
  const char *cert = NULL, *key = NULL, *client_ca = NULL;
  const char *alpn_list = NULL;
  char alpn_buf[64];
  const char *alpn[5];
  bool no_resume = false;
  unsigned long long ticket_period = 0; /* 0: the default */
  acp_remote_tls *tls = NULL;
  serve_info si;

  memset(&o, 0, sizeof(o));
  so.token = getenv("ACP_SERVE_TOKEN");
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(serve_usage, stdout);
      return CLI_EXIT_OK;
    } else if (strcmp(argv[i], "--verbose") == 0) {
      o.verbose = 1;
    } else if (strcmp(argv[i], "--handoff") == 0) {
      handoff = 1;
    } else if (strcmp(argv[i], "--no-handoff") == 0) {
      handoff = 0;
    } else if ((v = cli_opt_value(argc, argv, &i, "--listen", &ok)) != NULL) {
      listen = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--token", &ok)) != NULL) {
      so.token = v;
    } else if (strcmp(argv[i], "--tls") == 0) {
      if (i + 2 >= argc || strcmp(argv[i + 1], "--") == 0 ||
          strcmp(argv[i + 2], "--") == 0) {
        cli_err("serve", "--tls needs CERT KEY (two PEM files)");
        return CLI_EXIT_USAGE;
      }
      cert = argv[++i];
      key = argv[++i];
    } else if ((v = cli_opt_value(argc, argv, &i, "--client-ca", &ok)) !=
               NULL) {
      client_ca = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--alpn", &ok)) != NULL) {
      alpn_list = v;
    } else if (strcmp(argv[i], "--no-tls-resumption") == 0) {
      no_resume = true;
    } else if ((v = cli_opt_value(argc, argv, &i, "--tls-ticket-key-period",
                                  &ok)) != NULL) {
      if (cli_opt_uint("serve", "--tls-ticket-key-period", v, 1,
                       ACP_REMOTE_TLS_TICKET_KEY_PERIOD_MAX, &n) != 0)
        return CLI_EXIT_USAGE;
      ticket_period = n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--allow-host", &ok)) !=
               NULL) {
      if (nallow == 32) {
        cli_err("serve", "too many --allow-host");
        return CLI_EXIT_USAGE;
      }
      allow[nallow++] = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--max-connections", &ok)) !=
               NULL) {
      if (cli_opt_uint("serve", "--max-connections", v, 1, 1000000, &n) != 0)
        return CLI_EXIT_USAGE;
      so.max_connections = (unsigned)n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--max-message", &ok)) !=
               NULL) {
      if (cli_opt_uint("serve", "--max-message", v, 1024, SIZE_MAX, &n) != 0)
        return CLI_EXIT_USAGE;
      so.max_message = (size_t)n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--session-grace", &ok)) !=
               NULL) {
      if (cli_opt_uint("serve", "--session-grace", v, 0, ULLONG_MAX, &n) != 0)
        return CLI_EXIT_USAGE;
      o.session_grace_ms = n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--hold-timeout", &ok)) !=
               NULL) {
      if (cli_opt_uint("serve", "--hold-timeout", v, 1, ULLONG_MAX, &n) != 0)
        return CLI_EXIT_USAGE;
      so.hold_ms = n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--stall-timeout", &ok)) !=
               NULL) {
      if (cli_opt_uint("serve", "--stall-timeout", v, 1, ULLONG_MAX, &n) != 0)
        return CLI_EXIT_USAGE;
      so.stall_ms = n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--read-spin-us", &ok)) !=
               NULL) {
      if (cli_opt_uint("serve", "--read-spin-us", v, 0, 1000000, &n) != 0)
        return CLI_EXIT_USAGE;
      o.read_spin_us = (uint32_t)n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--ping-ms", &ok)) != NULL) {
      if (cli_opt_uint("serve", "--ping-ms", v, 0, ULLONG_MAX, &n) != 0)
        return CLI_EXIT_USAGE;
      so.ping_ms = n;
    } else {
      if (ok < 0)
        return CLI_EXIT_USAGE;
      cli_err("serve", "unknown option '%s' (see acp serve --help)", argv[i]);
      return CLI_EXIT_USAGE;
    }
  }
  if (i >= argc) {
    cli_err("serve", "no agent command (acp serve [options] -- AGENT ...)");
    return CLI_EXIT_USAGE;
  }
  if (client_ca && !cert) {
    cli_err("serve", "--client-ca goes with --tls CERT KEY");
    return CLI_EXIT_USAGE;
  }
  if ((alpn_list || no_resume || ticket_period) && !cert) {
    cli_err("serve", "%s goes with --tls CERT KEY",
            alpn_list   ? "--alpn"
            : no_resume ? "--no-tls-resumption"
                        : "--tls-ticket-key-period");
    return CLI_EXIT_USAGE;
  }
  if (alpn_list) {
    /* "h2,http/1.1" -> {"h2", "http/1.1", NULL}; the names are checked by
     * acp_remote_tls_set_alpn(). */
    size_t na = 0;
    if (strlen(alpn_list) >= sizeof(alpn_buf)) {
      cli_err("serve", "--alpn: h2, http/1.1 or both (comma-separated)");
      return CLI_EXIT_USAGE;
    }
    strcpy(alpn_buf, alpn_list);
    for (char *p = alpn_buf; p && na < 4;) {
      char *comma = strchr(p, ',');
      if (comma)
        *comma = '\0';
      alpn[na++] = p;
      p = comma ? comma + 1 : NULL;
    }
    alpn[na] = NULL;
  }
  /* HOST:PORT, [V6]:PORT */
  const char *colon = strrchr(listen, ':');
  const char *hs = listen, *he = colon;
  if (!colon || colon == listen) {
    cli_err("serve", "--listen needs HOST:PORT");
    return CLI_EXIT_USAGE;
  }
  if (listen[0] == '[' && colon[-1] == ']') {
    hs++;
    he--;
  }
  if ((size_t)(he - hs) >= sizeof(host) || parse_port(colon + 1, &n) != 0 ||
      n > 65535) {
    cli_err("serve", "--listen needs HOST:PORT");
    return CLI_EXIT_USAGE;
  }
  memcpy(host, hs, (size_t)(he - hs));
  host[he - hs] = '\0';
  so.host = host;
  so.port = (int)n;
  allow[nallow] = NULL;
  so.allowed_hosts = nallow ? allow : NULL;
  if (cert) {
    int trv = acp_remote_tls_new(&tls, ACP_REMOTE_TLS_SERVER, NULL);
    if (trv == 0)
      trv = acp_remote_tls_set_cert(tls, cert, key);
    if (trv == 0 && client_ca)
      trv = acp_remote_tls_set_client_ca(tls, client_ca);
    if (trv == 0 && no_resume)
      trv = acp_remote_tls_set_resumption(tls, 0);
    if (trv == 0 && ticket_period)
      trv = acp_remote_tls_set_ticket_key_period(tls, (unsigned)ticket_period);
    if (trv == 0 && alpn_list && acp_remote_tls_set_alpn(tls, alpn) != 0) {
      cli_err("serve", "--alpn %s: %s", alpn_list, acp_remote_tls_error(tls));
      acp_remote_tls_free(tls);
      return CLI_EXIT_USAGE;
    }
    if (trv != 0) {
      cli_err("serve", "--tls: %s",
              tls ? acp_remote_tls_error(tls) : "out of memory");
      acp_remote_tls_free(tls);
      return CLI_EXIT_USAGE;
    }
    so.tls = tls;
  }
  si.host = host;
  si.tls = tls != NULL;
  o.version = 4;
  o.handoff = handoff >= 0 ? handoff : agent_takes_handoff(argv + i);
  /* --verbose: a line per TLS connection, resumed or not, and how its
   * peer ended it (close_notify or a bare end of the socket). */
  so.log_tls = o.verbose;
  o.server = so;
  o.agent_argv = (const char *const *)(argv + i);
  o.on_listening = on_listening;
  o.user_data = &si;
  int rv = acp_remote_serve(&o);
  acp_remote_tls_free(tls);
  if (rv == ACP_ERR_INVALID_ARGUMENT) {
    cli_err("serve", "cannot listen on '%s'", listen);
    return CLI_EXIT_USAGE;
  }
  return rv == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
