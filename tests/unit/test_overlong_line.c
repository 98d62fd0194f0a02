/*
 * The same over-long line gets the same answer everywhere: the JSON-RPC
 * session, the stdio<->HTTP relay (`acp mcp relay`) and the conductor all
 * frame input with acp_ndjson and answer with acp_ndjson_overlong_reply().
 * Each input below goes through all three with a 64-byte cap; what they
 * write back must be identical. The relay gets an unreachable URL and the
 * conductor an agent that never speaks (`cat`): nothing they are fed is
 * valid JSON, so nothing is forwarded. The conductor answers a component's
 * over-long line on that component's stdin with the same bytes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acp/conductor.h"
#include "acp/ndjson.h"
#include "acp/rpc.h"

#define CAP 64

static char *repeat(char c, size_t n, const char *tail) {
  size_t t = strlen(tail);
  char *s = malloc(n + t + 1);

  assert_non_null(s);
  memset(s, c, n);
  memcpy(s + n, tail, t + 1);
  return s;
}

/* What an rpc session with a CAP-byte line cap writes for `in`, fed in
 * pieces of `step` bytes. */
static char *via_session(const char *in, size_t step) {
  acp_rpc_options *o = NULL;
  acp_rpc_session *s = NULL;
  size_t len = strlen(in), i, used = 0, cap = 4096;
  char *out = calloc(1, cap);

  assert_non_null(out);
  assert_int_equal(acp_rpc_options_new(&o), 0);
  acp_rpc_options_set_max_line(o, CAP);
  assert_int_equal(acp_rpc_session_new(&s, NULL, NULL, o, NULL), 0);
  for (i = 0; i < len; i += step) {
    size_t n = len - i < step ? len - i : step;
    const char *d;
    acp_ssize k;

    assert_int_equal(acp_rpc_session_recv(s, in + i, n, 0), (acp_ssize)n);
    while ((k = acp_rpc_session_send(s, &d)) > 0) {
      assert_true(used + (size_t)k < cap);
      memcpy(out + used, d, (size_t)k);
      used += (size_t)k;
    }
  }
  acp_rpc_session_free(s);
  acp_rpc_options_free(o);
  return out;
}

/* What `acp mcp relay --max-line CAP` writes for `in`. */
static char *via_relay(const char *in) {
  const char *acp = getenv("ACP_BIN");
  char path[] = "/tmp/acp-overlong-XXXXXX";
  char cmd[4096];
  size_t cap = 4096, used = 0, n;
  char *out = calloc(1, cap);
  FILE *f;
  int fd = mkstemp(path);

  assert_non_null(out);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, in, strlen(in)), (ssize_t)strlen(in));
  close(fd);
  snprintf(cmd, sizeof(cmd),
           "'%s' mcp relay --url http://127.0.0.1:1/ --max-line %d <%s", acp,
           CAP, path);
  f = popen(cmd, "r");
  assert_non_null(f);
  while ((n = fread(out + used, 1, cap - 1 - used, f)) > 0)
    used += n;
  assert_int_equal(pclose(f), 0);
  unlink(path);
  return out;
}

/* What a conductor with a CAP-byte line cap writes to its client for
 * `in`. It runs in a child process: spawning components marks the
 * process's inherited descriptors close-on-exec (acp_uv_process), which
 * would leave the relay started after it without stdio. */
static char *run_conductor(const char *in, const char *const *agent) {
  int fds_in[2], fds_out[2], status = -1;
  size_t cap = 4096, used = 0;
  char *out = calloc(1, cap);
  ssize_t n;
  pid_t pid;

  assert_non_null(out);
  assert_int_equal(pipe(fds_in), 0);
  assert_int_equal(pipe(fds_out), 0);
  assert_int_equal(write(fds_in[1], in, strlen(in)), (ssize_t)strlen(in));
  close(fds_in[1]);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    acp_conductor_options *o = NULL;
    int st = -1;

    close(fds_out[0]);
    if (acp_conductor_options_new(&o, NULL) != 0 ||
        acp_conductor_options_add_component(o, agent, NULL, "agent") != 0)
      _exit(2);
    acp_conductor_options_set_max_line(o, CAP);
    acp_conductor_options_set_mcp_bridge(o, ACP_CONDUCTOR_MCP_BRIDGE_OFF);
    acp_conductor_options_set_stderr_passthrough(o, false);
    /* End of input waits for the answers in flight and the components end
     * at the end of theirs: no wait should ever run out. */
    acp_conductor_options_set_grace(o, 300000, 300000);
    if (acp_conductor_run(o, fds_in[0], fds_out[1], &st) != 0)
      st = 3;
    acp_conductor_options_free(o);
    _exit(st);
  }
  close(fds_in[0]);
  close(fds_out[1]);
  while ((n = read(fds_out[0], out + used, cap - 1 - used)) > 0)
    used += (size_t)n;
  close(fds_out[0]);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  return out;
}

static char *via_conductor(const char *in) {
  static const char *const cat[] = {"cat", NULL};

  return run_conductor(in, cat);
}

static void same_answer(const char *in, const char *want) {
  char *relay = via_relay(in);
  char *conductor = via_conductor(in);
  size_t step;

  assert_string_equal(relay, want);
  assert_string_equal(conductor, relay);
  free(conductor);
  for (step = 1; step <= strlen(in); step += 7) {
    char *session = via_session(in, step);

    assert_string_equal(session, relay);
    free(session);
  }
  free(relay);
}

static void skip_without_acp(void) {
  const char *acp = getenv("ACP_BIN");

  if (acp == NULL || access(acp, X_OK) != 0)
    skip();
}

static void
test_overlong_line_same_answer_in_session_relay_and_conductor(void **state) {
  char reply[ACP_NDJSON_REPLY_MAX + 1];
  char want[1024];
  char *big = repeat('x', 1000, "\n");
  char *crlf = repeat('{', CAP + 1, "\r\n");
  char *fits = repeat('[', CAP, "\r\n");
  char in[4096];

  (void)state;
  skip_without_acp();
  acp_ndjson_overlong_reply(reply, sizeof(reply), CAP);
  strcat(reply, "\n");
  /* One over-long line: one answer. */
  same_answer(big, reply);
  /* Over by one byte with CR LF; then a line exactly at the cap (not JSON,
   * so -32700); blank lines in between get nothing. */
  snprintf(in, sizeof(in), "%s\n\r\n%s%s", crlf, fits, big);
  snprintf(want, sizeof(want),
           "%s{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
           "\"message\":\"Parse error\"}}\n%s",
           reply, reply);
  same_answer(in, want);
  free(big);
  free(crlf);
  free(fits);
}

/* An agent that answers initialize after an over-long line of its own,
 * then saves the rest of its input (what the conductor answered it) to
 * argv[1]. */
static const char agent_script[] =
    "import json, sys\n"
    "req = json.loads(sys.stdin.readline())\n"
    "sys.stdout.write('x' * 1000 + '\\n')\n"
    "sys.stdout.write(json.dumps({'jsonrpc': '2.0', 'id': req['id'],\n"
    "                             'result': {}}, separators=(',', ':'))\n"
    "                 + '\\n')\n"
    "sys.stdout.flush()\n"
    "open(sys.argv[1], 'w').write(sys.stdin.read())\n";

static void test_overlong_line_from_a_component_answered_alike(void **state) {
  char reply[ACP_NDJSON_REPLY_MAX + 1];
  char path[] = "/tmp/acp-overlong-agent-XXXXXX";
  const char *agent[] = {"python3", "-c", agent_script, path, NULL};
  char got[1024];
  char *out;
  size_t n;
  FILE *f;
  int fd;

  (void)state;
  if (system("python3 -c 'import json' 2>/dev/null") != 0)
    skip();
  fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  /* Short enough for the cap: no params. */
  out = run_conductor(
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n", agent);
  /* The client got its answer; the agent got the session's answer. */
  assert_non_null(strstr(out, "\"id\":1,\"result\""));
  acp_ndjson_overlong_reply(reply, sizeof(reply), CAP);
  strcat(reply, "\n");
  f = fopen(path, "r");
  assert_non_null(f);
  n = fread(got, 1, sizeof(got) - 1, f);
  got[n] = '\0';
  fclose(f);
  unlink(path);
  assert_string_equal(got, reply);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_overlong_line_same_answer_in_session_relay_and_conductor),
      cmocka_unit_test(test_overlong_line_from_a_component_answered_alike),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
