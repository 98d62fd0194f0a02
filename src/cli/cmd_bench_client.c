/*
 * `acp bench-client`: the prompt-turn benchmark client (bench/README.md has
 * the contract it shares with bench/turns/ts_client.mjs). It drives any
 * agent through N sequential turns of one payload each and prints one JSON
 * line of measurements.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "acp/client.h"
#include "acp/json.h"
#include "acp/remote.h"
#include "acp/uv.h"
#include "cli.h"

/* The largest --payload (a prompt held in memory twice) and --turns (one
 * latency sample each). */
#define PAYLOAD_MAX (1ULL << 30)
#define TURNS_MAX 100000000ULL

static const char bench_usage[] =
    "usage: acp bench-client [--payload BYTES] [--turns N] [--impl NAME]\n"
    "                        [--read-spin-us N] [--no-read-block]\n"
    "                        [--text ascii|utf8]\n"
    "                        (-- AGENT_CMD [ARGS...] |\n"
    "                         --url URL [--http [--h2]] [--ca FILE]\n"
    "                         [--verbose])\n"
    "\n"
    "Run N sequential prompt turns of BYTES bytes each against the agent\n"
    "(which must echo the prompt in one agent_message_chunk, as\n"
    "`acp agent --echo` does) and print one JSON line: round trips/s, MiB/s,\n"
    "median and p99 latency, peak RSS of both processes. With --url the\n"
    "agent is remote (ws://HOST:PORT/acp, or wss:// with the server's CA\n"
    "in --ca FILE, else the system's); its RSS is not reported; with\n"
    "--http too (an http:// or https:// URL) it is reached over Streamable\n"
    "HTTP, with --h2 over HTTP/2. --verbose prints on stderr, per TLS\n"
    "socket, whether its session was resumed (as acp client --verbose).\n"
    "The line also has the CPU time (user + system) of the client and of\n"
    "the agent (reaped child), whole runs. --read-spin-us N polls the\n"
    "agent's output for up to N us before sleeping, backing off while it\n"
    "misses (default 20, 0: off; acp agent has the same option). While a turn "
    "is out, the client waits for the agent's\n"
    "output in read(2) on the pipe, not in epoll (as acp agent does);\n"
    "--no-read-block waits in the event loop instead. --text utf8 makes the "
    "prompt text that is not all\n"
    "ASCII (2-, 3- and 4-byte characters; default ascii: 'a'..'z') and\n"
    "checks that every echo is byte for byte the prompt.\n";

typedef struct bench {
  uv_loop_t loop;
  acp_client *client;
  acp_uv_process *agent;
  acp_uv_rpc *rpc;
  acp_uv_link *remote;
  char *payload;
  size_t size;
  long turns;
  long done;
  char *session_id;
  uint64_t *lat; /* nanoseconds per turn */
  uint64_t t_start;
  uint64_t t_turn;
  uint64_t t_end;
  long chunks;
  size_t chunk_len;
  bool check_bytes; /* --text utf8: compare each echo with the payload */
  bool chunk_same;
  long other_updates;
  long agent_rss_kib;
  long agent_file_kib;
  int64_t agent_exit;
  bool agent_exited;
  int failed;
  char err[256];
} bench;

static void fail(bench *b, const char *msg) {
  if (b->failed)
    return;
  b->failed = 1;
  snprintf(b->err, sizeof(b->err), "%s", msg);
}

/* One "Name:   N kB" line of /proc/PID/status, or -1. */
static long status_kib(int pid, const char *name) {
  char path[64];
  char line[256];
  size_t n = strlen(name);
  long kib = -1;
  FILE *f;

  snprintf(path, sizeof(path), "/proc/%d/status", pid);
  f = fopen(path, "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, name, n) == 0 && line[n] == ':')
      kib = strtol(line + n + 1, NULL, 10);
  fclose(f);
  return kib;
}

/* Peak RSS, and the file-backed part of RSS now (RssFile: the program's
 * and its libraries' pages, mostly shared with every other process using
 * them), so a reader can tell the process's own memory from the libraries
 * it maps: peak RSS - RssFile is about its peak anonymous memory. */
static long vmhwm_kib(int pid) {
  return status_kib(pid, "VmHWM");
}
static long rssfile_kib(int pid) {
  return status_kib(pid, "RssFile");
}

static void finish(bench *b) {
  acp_uv_rpc_close(b->rpc, NULL);
  b->rpc = NULL;
  if (b->remote != NULL) {
    b->agent_rss_kib = -1;
    b->agent_file_kib = -1;
    acp_uv_link_close(b->remote, 1000, NULL, NULL);
    b->remote = NULL;
    return;
  }
  b->agent_rss_kib = vmhwm_kib(acp_uv_process_pid(b->agent));
  b->agent_file_kib = rssfile_kib(acp_uv_process_pid(b->agent));
  acp_uv_process_shutdown(b->agent, NULL);
}

/* --verbose: how each TLS socket was set up (the remote client's log). */
static void on_remote_log(const char *line, void *ud) {
  (void)ud;
  fprintf(stderr, "acp bench-client: %s\n", line);
}

static void on_remote(acp_uv_link *l, int status, const char *detail,
                      void *ud) {
  bench *b = ud;
  (void)l;
  if (status != 0) {
    fail(b, detail);
    finish(b);
  }
}

static int on_update(acp_client *c, const acp_client_update *u, void *ud) {
  bench *b = ud;

  (void)c;
  if (u->kind == ACP_UPDATE_AGENT_MESSAGE_CHUNK && u->text != NULL) {
    b->chunks++;
    b->chunk_len = u->text_len;
    b->chunk_same =
        u->text_len == b->size &&
        (!b->check_bytes || memcmp(u->text, b->payload, b->size) == 0);
  } else {
    b->other_updates++;
  }
  return 0;
}

static void next_turn(bench *b);

static int on_prompt(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  bench *b = ud;
  uint64_t now = uv_hrtime();

  (void)c;
  b->lat[b->done] = now - b->t_turn;
  if (msg->result == NULL) {
    fail(b, "session/prompt failed");
  } else if (!ACP_JSON_STR_EQ_LIT(OBJ_GETL(msg->result, "stopReason"),
                                  "end_turn")) {
    fail(b, "stopReason is not end_turn");
  } else if (b->chunks != 1 || b->chunk_len != b->size ||
             b->other_updates != 0) {
    fail(b, "the turn did not echo exactly one chunk of the payload size");
  } else if (b->check_bytes && !b->chunk_same) {
    fail(b, "the echoed text differs from the prompt");
  }
  b->done++;
  if (b->failed || b->done == b->turns) {
    b->t_end = now;
    finish(b);
    return 0;
  }
  next_turn(b);
  return 0;
}

static void next_turn(bench *b) {
  b->chunks = 0;
  b->chunk_len = 0;
  b->other_updates = 0;
  b->t_turn = uv_hrtime();
  /* The payload lives for the whole run: lent, not copied, per turn. */
  if (acp_client_prompt_text_ref(b->client, b->session_id, b->payload, b->size,
                                 on_prompt, b, NULL) != 0) {
    fail(b, "cannot send session/prompt");
    finish(b);
  }
}

static int on_session(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  bench *b = ud;
  const acp_json_val *v = OBJ_GETL(msg->result, "sessionId");
  const char *s;
  size_t n;

  (void)c;
  if (v == NULL || acp_json_doc_str(msg->doc, v, &s, &n) != 0) {
    fail(b, "session/new failed");
    finish(b);
    return 0;
  }
  b->session_id = strndup(s, n);
  b->t_start = uv_hrtime();
  next_turn(b);
  return 0;
}

static int on_init(acp_client *c, const acp_rpc_msg *msg, void *ud) {
  bench *b = ud;
  char cwd[4096];

  if (msg->result == NULL || getcwd(cwd, sizeof(cwd)) == NULL) {
    fail(b, "initialize failed");
    finish(b);
    return 0;
  }
  if (acp_client_session_new(c, cwd, "[]", 2, on_session, b, NULL) != 0) {
    fail(b, "cannot send session/new");
    finish(b);
  }
  return 0;
}

static void on_exit_cb(acp_uv_process *p, int64_t status, int sig, void *ud) {
  bench *b = ud;

  (void)p;
  b->agent_exited = true;
  b->agent_exit = sig ? 128 + sig : status;
  if (b->rpc != NULL) {
    fail(b, "the agent exited early");
    b->t_end = uv_hrtime();
    acp_uv_rpc_close(b->rpc, NULL);
    b->rpc = NULL;
  }
}

static long long tv_us(const struct timeval *tv) {
  return (long long)tv->tv_sec * 1000000 + (long long)tv->tv_usec;
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x;
  uint64_t c = *(const uint64_t *)y;

  return a < c ? -1 : a > c;
}

/* Nearest-rank percentile, in microseconds. */
static double pct_us(const uint64_t *v, long n, double p) {
  long rank;

  if (n <= 0)
    return 0;
  rank = (long)(p / 100.0 * (double)n + 0.999999);
  if (rank < 1)
    rank = 1;
  if (rank > n)
    rank = n;
  return (double)v[rank - 1] / 1000.0;
}

int cmd_bench_client(int argc, char **argv) {
  bench b;
  acp_client_callbacks *cbs = NULL;
  acp_uv_process_options *opts = NULL;
  const char *impl = "ours";
  uint32_t spin_us = CLI_READ_SPIN_US;
  struct rusage ru_self;
  struct rusage ru_kids;
  const char *url = NULL;
  const char *ca = NULL;
  bool http = false;
  bool h2 = false;
  bool verbose = false;
  bool no_block = false;
  const char *v;
  int i;
  int ok;
  int rv = CLI_EXIT_FAILURE;
  unsigned long long n;
  double secs;

  memset(&b, 0, sizeof(b));
  b.size = 5;
  b.turns = 20000;
  b.agent_exit = -1;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(bench_usage, stdout);
      return CLI_EXIT_OK;
    } else if ((v = cli_opt_value(argc, argv, &i, "--payload", &ok)) != NULL) {
      if (cli_opt_uint("bench-client", "--payload", v, 0, PAYLOAD_MAX, &n) != 0)
        return CLI_EXIT_USAGE;
      b.size = (size_t)n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--turns", &ok)) != NULL) {
      if (cli_opt_uint("bench-client", "--turns", v, 1, TURNS_MAX, &n) != 0)
        return CLI_EXIT_USAGE;
      b.turns = (long)n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--read-spin-us", &ok)) !=
               NULL) {
      if (cli_opt_uint("bench-client", "--read-spin-us", v, 0, 1000000, &n) !=
          0)
        return CLI_EXIT_USAGE;
      spin_us = (uint32_t)n;
    } else if ((v = cli_opt_value(argc, argv, &i, "--impl", &ok)) != NULL) {
      impl = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--text", &ok)) != NULL) {
      if (strcmp(v, "utf8") == 0) {
        b.check_bytes = true;
      } else if (strcmp(v, "ascii") != 0) {
        cli_err("bench-client", "--text takes ascii or utf8, not '%s'", v);
        return CLI_EXIT_USAGE;
      }
    } else if ((v = cli_opt_value(argc, argv, &i, "--url", &ok)) != NULL) {
      url = v;
    } else if ((v = cli_opt_value(argc, argv, &i, "--ca", &ok)) != NULL) {
      ca = v;
    } else if (strcmp(argv[i], "--http") == 0) {
      http = true;
    } else if (strcmp(argv[i], "--h2") == 0) {
      h2 = true;
    } else if (strcmp(argv[i], "--verbose") == 0) {
      verbose = true;
    } else if (strcmp(argv[i], "--no-read-block") == 0) {
      no_block = true;
    } else {
      if (ok < 0)
        return CLI_EXIT_USAGE;
      cli_err("bench-client", "unknown option '%s'", argv[i]);
      return CLI_EXIT_USAGE;
    }
  }
  if ((i >= argc) == (url == NULL) || b.turns <= 0) {
    fputs(bench_usage, stderr);
    return CLI_EXIT_USAGE;
  }
  /* --url: the remote transports are in acp-remote (cli.h); run there. */
  if (url != NULL && cli_remote == NULL)
    return cli_exec_beside("acp-remote", argc, argv);
  b.payload = malloc(b.size ? b.size : 1);
  b.lat = calloc((size_t)b.turns, sizeof(uint64_t));
  if (b.payload == NULL || b.lat == NULL)
    return CLI_EXIT_FAILURE;
  if (b.check_bytes) {
    /* Whole characters of a mixed sentence; ASCII where the next one
     * would not fit, so the text is valid UTF-8 of exactly the size. */
    static const char sentence[] = "Gr\xc3\xbc\xc3\x9f"
                                   "e, \xe4\xb8\x96\xe7\x95\x8c! \xc3\x87"
                                   "a va? "
                                   "\xf0\x9f\x98\x80 ";
    size_t k = 0;
    size_t at = 0;

    while (k < b.size) {
      unsigned char lead = (unsigned char)sentence[at];
      size_t cl = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;

      if (k + cl > b.size) {
        b.payload[k++] = 'a';
        continue;
      }
      memcpy(b.payload + k, sentence + at, cl);
      k += cl;
      at = (at + cl) % (sizeof(sentence) - 1);
    }
  } else {
    for (size_t k = 0; k < b.size; k++)
      b.payload[k] = (char)('a' + k % 26);
  }
  acp_uv_ignore_sigpipe();
  uv_loop_init(&b.loop);
  if (acp_client_callbacks_new(&cbs) != 0 ||
      acp_uv_process_options_new(&opts, NULL) != 0)
    goto cleanup;
  acp_client_callbacks_set_on_session_update(cbs, on_update);
  if (acp_client_new(&b.client, cbs, &b, NULL, NULL) != 0)
    goto cleanup;
  if (url != NULL) {
    acp_remote_client_options ro = ACP_REMOTE_CLIENT_OPTIONS_INIT;
    acp_remote_tls *tls = NULL;
    char err[256];
    if (ca &&
        cli_remote->tls_new(&tls, ca, NULL, NULL, err, sizeof(err)) != 0) {
      cli_err("bench-client", "--ca: %s", err);
      goto cleanup;
    }
    ro.tls = tls;
    if (verbose)
      ro.log = on_remote_log;
    if (http)
      ro.transport = h2 ? ACP_REMOTE_HTTP2 : ACP_REMOTE_HTTP;
    int crv =
        cli_remote->connect(&b.remote, &b.loop, url, &ro, on_remote, &b, NULL);
    if (tls != NULL)
      cli_remote->tls_free(tls);
    if (crv != 0) {
      cli_err("bench-client", "bad --url %s", url);
      goto cleanup;
    }
  } else {
    acp_uv_process_options_set_argv(opts, (const char *const *)(argv + i));
    acp_uv_process_options_set_exit_cb(opts, on_exit_cb);
    if (acp_uv_process_spawn(&b.agent, &b.loop, opts, &b, NULL, NULL) != 0) {
      cli_err("bench-client", "cannot start %s", argv[i]);
      goto cleanup;
    }
  }
  if (acp_uv_rpc_new(&b.rpc, b.remote ? b.remote : acp_uv_process_link(b.agent),
                     acp_client_session(b.client), NULL, &b, NULL) != 0 ||
      acp_client_initialize(b.client, "{}", 2, NULL, 0, on_init, &b, NULL) != 0)
    goto cleanup;
  acp_uv_rpc_set_read_spin(b.rpc, spin_us);
  /* A single-peer program, as the agent it measures: over a spawned
   * agent's pipes the wait for its answer is a read(2) (a remote link is
   * not a pipe: there this does nothing). */
  acp_uv_rpc_set_read_block(b.rpc, !no_block);
  uv_run(&b.loop, UV_RUN_DEFAULT);
  if (!b.failed && b.done < b.turns) {
    /* Nothing left to wait for, and yet turns are missing: a stall in
     * the transport. A row of zeros with exit 0 would hide it. */
    fail(&b, "the loop ran out of events before the last turn");
  }
  if (b.failed) {
    cli_err("bench-client", "%s (after %ld turns)", b.err, b.done);
    goto cleanup;
  }
  getrusage(RUSAGE_SELF, &ru_self);
  getrusage(RUSAGE_CHILDREN, &ru_kids);
  qsort(b.lat, (size_t)b.done, sizeof(uint64_t), cmp_u64);
  secs = (double)(b.t_end - b.t_start) / 1e9;
  printf("{\"impl\":\"%s\",\"payload\":%zu,\"turns\":%ld,\"seconds\":%.4f,"
         "\"rtps\":%.1f,\"mibps\":%.3f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
         "\"client_peak_rss_kib\":%ld,\"agent_peak_rss_kib\":%ld,"
         "\"client_file_rss_kib\":%ld,\"agent_file_rss_kib\":%ld,"
         "\"agent_pid\":%d,\"agent_exit\":%lld,\"client_cpu_us\":%lld,"
         "\"agent_cpu_us\":%lld}\n",
         impl, b.size, b.done, secs, (double)b.done / secs,
         (double)b.done * (double)b.size / secs / 1048576.0,
         pct_us(b.lat, b.done, 50), pct_us(b.lat, b.done, 99),
         vmhwm_kib(getpid()), b.agent_rss_kib, rssfile_kib(getpid()),
         b.agent_file_kib, b.agent ? acp_uv_process_pid(b.agent) : -1,
         (long long)b.agent_exit,
         tv_us(&ru_self.ru_utime) + tv_us(&ru_self.ru_stime),
         tv_us(&ru_kids.ru_utime) + tv_us(&ru_kids.ru_stime));
  rv = CLI_EXIT_OK;
cleanup:
  if (b.rpc != NULL)
    acp_uv_rpc_close(b.rpc, NULL);
  if (b.remote != NULL)
    acp_uv_link_close(b.remote, 0, NULL, NULL);
  if (b.agent != NULL)
    acp_uv_process_close(b.agent, NULL);
  uv_run(&b.loop, UV_RUN_DEFAULT);
  uv_loop_close(&b.loop);
  acp_client_free(b.client);
  acp_client_callbacks_free(cbs);
  acp_uv_process_options_free(opts);
  free(b.payload);
  free(b.lat);
  free(b.session_id);
  return rv;
}
