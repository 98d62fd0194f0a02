/*
 * Shared helpers for the runtime tests: the test binary re-executes itself
 * as a child ("--helper NAME ARGS...") to play a fake agent or a
 * misbehaving process, as libuv's test-spawn.c does.
 */
#ifndef ACP_TEST_UV_HELPERS_H
#define ACP_TEST_UV_HELPERS_H

/*
 * If argv[1] is "--helper", run the helper named argv[2] and exit; else
 * return. Call first thing in main(). Helpers:
 *   echo-lines                 copy stdin to stdout, exit 0 at EOF
 *   exit-code N                exit with status N
 *   raise-signal N             kill itself with signal N
 *   ignore-stdin-eof           print "ready", read stdin to EOF, hang
 *   trap-sigterm               ignore SIGTERM, print "ready", read to EOF,
 *                              hang
 *   spawn-grandchild-then-hang fork a grandchild that hangs, print
 *                              "ready PID", read to EOF, hang
 *   write-stderr-lines N       write "line I" N times then "partial" (no
 *                              newline) to stderr, exit 3
 *   flood-stdout N             write N bytes (byte i is i % 251), exit 0
 *   print-env NAME             print "$NAME $PWD\n"
 *   rpc-server                 answer each JSON-RPC request line whose
 *                              method is "echo" with {"echo":true}; ignore
 *                              the rest; exit at EOF
 */
void acp_test_helper_main(int argc, char **argv);

/* Absolute path of the running test binary (static storage). */
const char *acp_test_self_exe(void);

#endif
