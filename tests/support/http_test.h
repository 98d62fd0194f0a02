/*
 * Scaffolding shared by the HTTP tests (tests/unit/test_http_*.c): an
 * acp_http_server on a uv loop in a thread of its own, raw requests over
 * loopback sockets, and an acp_mcp_client over acp_http_client on a loop of
 * the calling thread. Helpers that check something fail the running test
 * with cmocka asserts; call them from the test's own thread unless said
 * otherwise.
 */
#ifndef ACP_TEST_HTTP_TEST_H
#define ACP_TEST_HTTP_TEST_H

#include "acp/http.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* MARK: - Server thread */

typedef struct ht_server ht_server;

/*
 * Runs on the server thread once s->loop is initialised: create s->srv
 * (and s->reg, timers... whatever the test serves). Returns 0 or an error,
 * kept in s->start_rv; s->srv may stay NULL on error.
 */
typedef int (*ht_start_cb)(ht_server *s);
/* Runs on the server thread when the test stops it, right after
 * acp_http_server_close(): close the handles start_cb opened. */
typedef void (*ht_stop_cb)(ht_server *s);

struct ht_server {
  pthread_t th;
  uv_loop_t loop;
  uv_async_t stop;
  acp_mcp_server *reg; /* freed by the thread once its loop is closed */
  acp_http_server *srv;
  uint16_t port;      /* acp_http_server_port(srv) */
  pthread_mutex_t mu; /* for `ready`; tests may guard their counters too */
  pthread_cond_t cv;
  int ready;
  int start_rv; /* what start_cb returned */
  int close_rv; /* uv_loop_close() once the loop ran out */
  ht_start_cb on_start;
  ht_stop_cb on_stop; /* may be NULL */
  void *user_data;
};

/* Start the thread and wait until start_cb has run; then s->port,
 * s->start_rv and s->srv are set. `s` must be zeroed. */
void ht_server_start(ht_server *s, ht_start_cb start, ht_stop_cb stop,
                     void *user_data);
/* Close the server from its thread, join it and destroy mu/cv; s->close_rv
 * then tells whether the loop closed cleanly. `s` is not freed. */
void ht_server_stop(ht_server *s);

/*
 * cmocka setup/teardown for a server per test: ht_setup() callocs `size`
 * bytes (a struct whose first member is the ht_server), starts the server
 * with it as user_data and stores it in *state; ht_teardown() stops it,
 * asserts the loop closed cleanly and frees it.
 */
int ht_setup(void **state, size_t size, ht_start_cb start);
int ht_teardown(void **state);

/* Add tool `name` (with `description`, may be NULL) calling `handler` with
 * `user_data`; returns what acp_mcp_server_add_tool() returns. */
int ht_add_tool(acp_mcp_server *reg, const char *name, const char *description,
                acp_mcp_tool_cb handler, void *user_data);
/* Tool handler: answers the "message" argument as text. */
int ht_tool_echo(acp_mcp_call *call, const acp_json_val *args, void *ud);

/* MARK: - Raw HTTP over loopback */

/* An initialize request for protocol version 2025-11-25, id 1. */
extern const char ht_init_body[];

/* A socket connected to 127.0.0.1:port with a 10 s receive timeout. */
int ht_connect(uint16_t port);
/* Read from fd into buf (NUL-terminated) after its first `len` bytes until
 * end of file, an error, a full buffer or `until` (if not NULL) appears;
 * returns the new length. *eof tells whether it stopped at end of file. */
size_t ht_read_until(int fd, char *buf, size_t cap, size_t len,
                     const char *until, int *eof);
/* Send `req` on a new connection and read the answer (see ht_read_until);
 * returns a malloc'ed NUL-terminated buffer for the caller to free. */
char *ht_raw(uint16_t port, const char *req, const char *until);
/* A POST /mcp request for JSON and SSE with `headers` (each ending in
 * CRLF, or "") and `body`, written into req[0..cap). */
void ht_fmt_post(char *req, size_t cap, uint16_t port, const char *headers,
                 const char *body);
/* ht_raw() of ht_fmt_post(). */
char *ht_post(uint16_t port, const char *headers, const char *body,
              const char *until);
/* ht_post() with an MCP-Session-Id header before `extra`. */
char *ht_post_s(uint16_t port, const char *sid, const char *extra,
                const char *body, const char *until);
/* A `method` /mcp request accepting SSE, with MCP-Session-Id and `extra`
 * headers (each ending in CRLF, or ""), written into req[0..cap). */
void ht_fmt_request(char *req, size_t cap, const char *method, const char *sid,
                    const char *extra);
/* ht_raw() of ht_fmt_request(). */
char *ht_request(uint16_t port, const char *method, const char *sid,
                 const char *extra, const char *until);
/* Send `req` (ht_raw) again every 50 ms while the answer's status is
 * `status`, for up to 10 s: for a change the server makes asynchronously.
 * Returns the last status seen. */
int ht_status_after(uint16_t port, const char *req, const char *until,
                    int status);
/* The status code of an HTTP/1.1 answer, or 0. */
int ht_status(const char *resp);
/* The MCP-Session-Id of an answer (static buffer); asserts it is there
 * and is 32 hex digits. */
const char *ht_session_id(const char *resp);
/* A TCP socket bound to 127.0.0.1 on a free port (stored in *port),
 * listening with `backlog` if it is > 0. */
int ht_loopback_socket(uint16_t *port, int backlog);

/* MARK: - Our MCP client over HTTP */

typedef struct ht_client {
  uv_loop_t loop;
  acp_mcp_client *c;
  acp_http_client *hc;
} ht_client;

/* Initialise x->loop and create x->c with x->hc for
 * http://127.0.0.1:port`path` in `mode`. */
void ht_client_open(ht_client *x, uint16_t port, const char *path,
                    acp_http_transport mode);
/* Send initialize (answered to `on_init` with `user_data`) and run the loop
 * until nothing is left. */
void ht_client_run(ht_client *x, acp_mcp_result_cb on_init, void *user_data);
/* Assert the loop closes cleanly; free x->c. */
void ht_client_close(ht_client *x);

#endif
