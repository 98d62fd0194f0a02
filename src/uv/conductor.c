/*
 * The conductor runtime (acp/conductor.h): child processes, line framing,
 * backpressure, faults, tracing and shutdown around the sans-I/O router.
 */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acp/conductor.h"
#include "acp/json.h"
#include "acp/mcp_acp.h"
#include "acp/mcp_bridge.h"
#include "acp/ndjson.h"
#include "uv_internal.h"

#define DEFAULT_GRACE_MS 1000
#define DEFAULT_MAX_LINE ((size_t)256 << 20)
#define DEFAULT_RESTARTS 3
#define MAX_COMPONENTS 65535
#define EOF_WAIT_MS 50       /* wait for stdout EOF after an exit */
#define REASON_STDERR 600    /* stderr bytes quoted in an error message */
#define DATA_STDERR 4096     /* stderr bytes in the error data */
#define BIG_LINE (256 << 10) /* release memory after lines this long */
/* The long lines whose framer buffers a conductor keeps, in bytes over all
 * its links: see keep_or_give_back(). */
#define KEEP_BUDGET ((size_t)5 << 19)

/* Largest write buffer a conductor link keeps for reuse: with several
 * links each keeping a 1 MiB buffer, a conductor would hold far more than
 * the message in flight. Large buffers are returned to the allocator
 * instead (acp conductor tunes glibc to reuse them without page faults). */
#define SPARE_MAX_COND ((size_t)256 << 10)

/* MARK: - Options */

typedef struct comp_spec {
  char **argv;
  size_t argc;
  char **env;
  size_t nenv;
  char *name;
} comp_spec;

struct acp_conductor_options {
  acp_mem mem;
  comp_spec *comps;
  size_t ncomps;
  size_t cap;
  acp_router_mode mode;
  acp_router_proxy_methods pm;
  acp_conductor_on_crash on_crash;
  unsigned max_restarts;
  char *trace_path;
  char *debug_dir;
  uint64_t stdin_grace;
  uint64_t term_grace;
  size_t high_water;
  size_t max_line;
  bool passthrough;
  acp_conductor_mcp_bridge bridge;
  char *shim_program;
  acp_conductor_connect_cb connect;
  void *connect_ud;
};

static void strv_free(const acp_mem *m, char **v, size_t n) {
  size_t i;
  if (v == NULL)
    return;
  for (i = 0; i < n; i++)
    acp__free(m, v[i]);
  acp__free(m, v);
}

static void spec_dispose(const acp_mem *m, comp_spec *s) {
  strv_free(m, s->argv, s->argc);
  strv_free(m, s->env, s->nenv);
  acp__free(m, s->name);
  memset(s, 0, sizeof(*s));
}

int acp_conductor_options_new(acp_conductor_options **out, const acp_mem *mem) {
  acp_conductor_options *o;
  acp_mem m;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  o = acp__calloc(&m, 1, sizeof(*o));
  if (o == NULL)
    return ACP_ERR_NOMEM;
  o->mem = m;
  o->mode = ACP_ROUTER_MODE_AGENT;
  o->pm = ACP_ROUTER_PROXY_METHODS_AUTO;
  o->on_crash = ACP_CONDUCTOR_ON_CRASH_FAIL;
  o->max_restarts = DEFAULT_RESTARTS;
  o->stdin_grace = DEFAULT_GRACE_MS;
  o->term_grace = DEFAULT_GRACE_MS;
  o->high_water = ACP_UV_DEFAULT_HIGH_WATER;
  o->max_line = DEFAULT_MAX_LINE;
  o->passthrough = true;
  *out = o;
  return 0;
}

void acp_conductor_options_free(acp_conductor_options *o) {
  size_t i;
  if (o == NULL)
    return;
  for (i = 0; i < o->ncomps; i++)
    spec_dispose(&o->mem, &o->comps[i]);
  acp__free(&o->mem, o->comps);
  acp__free(&o->mem, o->trace_path);
  acp__free(&o->mem, o->debug_dir);
  acp__free(&o->mem, o->shim_program);
  acp__free(&o->mem, o);
}

/* A string vector under construction. */
typedef struct strv {
  const acp_mem *mem;
  char **v;
  size_t n, cap;
} strv;

static int strv_push(strv *s, char *str) {
  if (str == NULL)
    return ACP_ERR_NOMEM;
  if (s->n + 2 > s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 8;
    char **nv = acp__realloc(s->mem, s->v, nc * sizeof(*nv));
    if (nv == NULL) {
      acp__free(s->mem, str);
      return ACP_ERR_NOMEM;
    }
    s->v = nv;
    s->cap = nc;
  }
  s->v[s->n++] = str;
  s->v[s->n] = NULL;
  return 0;
}

static void strv_dispose(strv *s) {
  strv_free(s->mem, s->v, s->n);
  s->v = NULL;
  s->n = s->cap = 0;
}

static bool valid_env(const char *kv) {
  const char *eq = strchr(kv, '=');
  return eq != NULL && eq != kv;
}

/* Append a spec taking ownership of the vectors (freed on failure). */
static int add_spec(acp_conductor_options *o, strv *argv, strv *env,
                    char *name) {
  comp_spec *s;

  if (o->ncomps >= MAX_COMPONENTS) {
    strv_dispose(argv);
    strv_dispose(env);
    acp__free(&o->mem, name);
    return ACP_ERR_LIMIT;
  }
  if (o->ncomps == o->cap) {
    size_t nc = o->cap ? o->cap * 2 : 4;
    comp_spec *ns = acp__realloc(&o->mem, o->comps, nc * sizeof(*ns));
    if (ns == NULL) {
      strv_dispose(argv);
      strv_dispose(env);
      acp__free(&o->mem, name);
      return ACP_ERR_NOMEM;
    }
    o->comps = ns;
    o->cap = nc;
  }
  s = &o->comps[o->ncomps++];
  s->argv = argv->v;
  s->argc = argv->n;
  s->env = env->v;
  s->nenv = env->n;
  s->name = name;
  return 0;
}

int acp_conductor_options_add_component(acp_conductor_options *o,
                                        const char *const *argv,
                                        const char *const *env,
                                        const char *name) {
  strv a, e;
  char *nm = NULL;
  size_t i;
  int rc;

  if (o == NULL || argv == NULL || argv[0] == NULL || argv[0][0] == '\0')
    return ACP_ERR_INVALID_ARGUMENT;
  for (i = 0; env != NULL && env[i] != NULL; i++)
    if (!valid_env(env[i]))
      return ACP_ERR_INVALID_ARGUMENT;
  memset(&a, 0, sizeof(a));
  memset(&e, 0, sizeof(e));
  a.mem = e.mem = &o->mem;
  for (i = 0; argv[i] != NULL; i++)
    if ((rc = strv_push(&a, acp__strdup(&o->mem, argv[i]))) < 0)
      goto fail;
  for (i = 0; env != NULL && env[i] != NULL; i++)
    if ((rc = strv_push(&e, acp__strdup(&o->mem, env[i]))) < 0)
      goto fail;
  if (name != NULL && (nm = acp__strdup(&o->mem, name)) == NULL) {
    rc = ACP_ERR_NOMEM;
    goto fail;
  }
  return add_spec(o, &a, &e, nm);
fail:
  strv_dispose(&a);
  strv_dispose(&e);
  return rc;
}

static void set_err(char *err, size_t cap, const char *msg) {
  if (err != NULL && cap > 0)
    snprintf(err, cap, "%s", msg);
}

static bool is_name_char(char c, bool first) {
  return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (!first && c >= '0' && c <= '9');
}

/* Shell-like split into `words`. */
static int shell_split(const acp_mem *m, const char *s, strv *words, char *err,
                       size_t errcap) {
  acp__buf w;
  bool in_word = false;
  int rc = 0;

  acp__buf_init(&w, m, 0);
  for (;;) {
    char c = *s;
    if (c == '\0' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) {
        if ((rc = strv_push(words,
                            acp__strndup(m, w.data ? w.data : "", w.len))) < 0)
          goto out;
        acp__buf_clear(&w);
        in_word = false;
      }
      if (c == '\0')
        break;
      s++;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const char *e = strchr(s + 1, '\'');
      if (e == NULL) {
        set_err(err, errcap, "unterminated single quote");
        rc = ACP_ERR_PARSE;
        goto out;
      }
      if ((rc = acp__buf_append(&w, s + 1, (size_t)(e - s - 1))) < 0)
        goto out;
      s = e + 1;
    } else if (c == '"') {
      s++;
      for (;;) {
        if (*s == '\0') {
          set_err(err, errcap, "unterminated double quote");
          rc = ACP_ERR_PARSE;
          goto out;
        }
        if (*s == '"') {
          s++;
          break;
        }
        if (*s == '\\' && (s[1] == '"' || s[1] == '\\' || s[1] == '$' ||
                           s[1] == '`' || s[1] == '\n')) {
          if (s[1] != '\n' && (rc = acp__buf_putc(&w, s[1])) < 0)
            goto out;
          s += 2;
          continue;
        }
        if ((rc = acp__buf_putc(&w, *s)) < 0)
          goto out;
        s++;
      }
    } else if (c == '\\') {
      if (s[1] == '\0') {
        set_err(err, errcap, "trailing backslash");
        rc = ACP_ERR_PARSE;
        goto out;
      }
      if (s[1] != '\n' && (rc = acp__buf_putc(&w, s[1])) < 0)
        goto out;
      s += 2;
    } else {
      if ((rc = acp__buf_putc(&w, c)) < 0)
        goto out;
      s++;
    }
  }
out:
  acp__buf_dispose(&w);
  return rc;
}

/* Does `word` of the original text start with an unquoted NAME=? We test
 * the split word; quoting a name is not something anyone does. */
static bool is_assignment(const char *w) {
  size_t i = 0;
  if (!is_name_char(w[0], true))
    return false;
  while (is_name_char(w[i], i == 0))
    i++;
  return w[i] == '=';
}

static int json_str_dup(const acp_mem *m, acp_json_doc *doc,
                        const acp_json_val *v, char **out) {
  const char *s;
  size_t n;
  int rc = acp_json_doc_str(doc, v, &s, &n);
  if (rc < 0)
    return rc;
  if (memchr(s, '\0', n) != NULL)
    return ACP_ERR_TYPE;
  *out = acp__strndup(m, s, n);
  return *out ? 0 : ACP_ERR_NOMEM;
}

static int env_pair(const acp_mem *m, acp_json_doc *doc, const acp_json_val *k,
                    const acp_json_val *v, strv *env) {
  char *ks = NULL, *vs = NULL, *kv;
  size_t kl, vl;
  int rc;

  if ((rc = json_str_dup(m, doc, k, &ks)) < 0)
    return rc;
  if ((rc = json_str_dup(m, doc, v, &vs)) < 0) {
    acp__free(m, ks);
    return rc;
  }
  kl = strlen(ks);
  vl = strlen(vs);
  if (kl == 0 || strchr(ks, '=') != NULL) {
    acp__free(m, ks);
    acp__free(m, vs);
    return ACP_ERR_TYPE;
  }
  kv = acp__malloc(m, kl + vl + 2);
  if (kv != NULL) {
    memcpy(kv, ks, kl);
    kv[kl] = '=';
    memcpy(kv + kl + 1, vs, vl + 1);
  }
  acp__free(m, ks);
  acp__free(m, vs);
  return strv_push(env, kv);
}

static int parse_json_spec(acp_conductor_options *o, const char *spec,
                           strv *argv, strv *env, char **name, char *err,
                           size_t errcap) {
  acp_json_doc *doc = NULL;
  const acp_json_val *root, *v, *e;
  char *s;
  int rc;

  if ((rc = acp_json_doc_new(&doc, &o->mem)) < 0)
    return rc;
  if (acp_json_doc_parse(doc, spec, strlen(spec), NULL) < 0) {
    set_err(err, errcap, "component is not valid JSON");
    rc = ACP_ERR_PARSE;
    goto out;
  }
  root = acp_json_doc_root(doc);
  if (acp_json_type_of(root) != ACP_JSON_OBJECT) {
    set_err(err, errcap, "component JSON must be an object");
    rc = ACP_ERR_PARSE;
    goto out;
  }
  v = ACP__OBJ_GETL(root, "command");
  s = NULL;
  if (acp_json_type_of(v) != ACP_JSON_STRING ||
      json_str_dup(&o->mem, doc, v, &s) < 0 || s[0] == '\0') {
    acp__free(&o->mem, s);
    set_err(err, errcap, "component JSON needs a non-empty string \"command\"");
    rc = ACP_ERR_PARSE;
    goto out;
  }
  if ((rc = strv_push(argv, s)) < 0)
    goto out;
  v = ACP__OBJ_GETL(root, "args");
  if (v != NULL && acp_json_type_of(v) != ACP_JSON_ARRAY) {
    set_err(err, errcap, "\"args\" must be an array of strings");
    rc = ACP_ERR_PARSE;
    goto out;
  }
  for (e = acp_json_child(v); e != NULL; e = acp_json_next(e)) {
    if (acp_json_type_of(e) != ACP_JSON_STRING ||
        json_str_dup(&o->mem, doc, e, &s) < 0) {
      set_err(err, errcap, "\"args\" must be an array of strings");
      rc = ACP_ERR_PARSE;
      goto out;
    }
    if ((rc = strv_push(argv, s)) < 0)
      goto out;
  }
  v = ACP__OBJ_GETL(root, "env");
  if (acp_json_type_of(v) == ACP_JSON_OBJECT) {
    for (e = acp_json_child(v); e != NULL; e = acp_json_next(acp_json_next(e)))
      if (env_pair(&o->mem, doc, e, acp_json_next(e), env) < 0) {
        set_err(err, errcap, "\"env\" values must be strings");
        rc = ACP_ERR_PARSE;
        goto out;
      }
  } else if (acp_json_type_of(v) == ACP_JSON_ARRAY) {
    for (e = acp_json_child(v); e != NULL; e = acp_json_next(e))
      if (env_pair(&o->mem, doc, ACP__OBJ_GETL(e, "name"),
                   ACP__OBJ_GETL(e, "value"), env) < 0) {
        set_err(err, errcap, "\"env\" entries must be {\"name\", \"value\"}");
        rc = ACP_ERR_PARSE;
        goto out;
      }
  } else if (v != NULL && acp_json_type_of(v) != ACP_JSON_NULL) {
    set_err(err, errcap, "\"env\" must be an object");
    rc = ACP_ERR_PARSE;
    goto out;
  }
  v = ACP__OBJ_GETL(root, "name");
  if (acp_json_type_of(v) == ACP_JSON_STRING &&
      json_str_dup(&o->mem, doc, v, name) < 0) {
    set_err(err, errcap, "bad \"name\"");
    rc = ACP_ERR_PARSE;
    goto out;
  }
  rc = 0;
out:
  acp_json_doc_free(doc);
  return rc;
}

int acp_conductor_options_add_component_spec(acp_conductor_options *o,
                                             const char *spec, char *err,
                                             size_t errcap) {
  strv argv, env, words;
  char *name = NULL;
  const char *p;
  size_t i;
  int rc;

  set_err(err, errcap, "");
  if (o == NULL || spec == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  memset(&argv, 0, sizeof(argv));
  memset(&env, 0, sizeof(env));
  memset(&words, 0, sizeof(words));
  argv.mem = env.mem = words.mem = &o->mem;
  for (p = spec; *p == ' ' || *p == '\t' || *p == '\n'; p++)
    ;
  if (*p == '{') {
    rc = parse_json_spec(o, p, &argv, &env, &name, err, errcap);
  } else {
    rc = shell_split(&o->mem, spec, &words, err, errcap);
    for (i = 0; rc == 0 && i < words.n; i++) {
      char *w = words.v[i];
      words.v[i] = NULL;
      if (argv.n == 0 && is_assignment(w))
        rc = strv_push(&env, w);
      else
        rc = strv_push(&argv, w);
    }
    if (rc == 0 && argv.n == 0) {
      set_err(err, errcap, "component has no command");
      rc = ACP_ERR_PARSE;
    }
  }
  strv_dispose(&words);
  if (rc < 0) {
    strv_dispose(&argv);
    strv_dispose(&env);
    acp__free(&o->mem, name);
    return rc;
  }
  return add_spec(o, &argv, &env, name);
}

size_t acp_conductor_options_component_count(const acp_conductor_options *o) {
  return o ? o->ncomps : 0;
}

static bool is_url_comp(const comp_spec *s);

size_t
acp_conductor_options_url_component_count(const acp_conductor_options *o) {
  size_t n = 0;

  for (size_t i = 0; o != NULL && i < o->ncomps; i++)
    n += is_url_comp(&o->comps[i]);
  return n;
}

void acp_conductor_options_set_mode(acp_conductor_options *o,
                                    acp_router_mode mode) {
  if (o && (mode == ACP_ROUTER_MODE_AGENT || mode == ACP_ROUTER_MODE_PROXY))
    o->mode = mode;
}

void acp_conductor_options_set_proxy_methods(acp_conductor_options *o,
                                             acp_router_proxy_methods pm) {
  if (o && (unsigned)pm <= ACP_ROUTER_PROXY_METHODS_UNDERSCORE)
    o->pm = pm;
}

void acp_conductor_options_set_on_crash(acp_conductor_options *o,
                                        acp_conductor_on_crash p) {
  if (o && (unsigned)p <= ACP_CONDUCTOR_ON_CRASH_RESTART)
    o->on_crash = p;
}

void acp_conductor_options_set_max_restarts(acp_conductor_options *o,
                                            unsigned max) {
  if (o)
    o->max_restarts = max;
}

static int set_path(acp_conductor_options *o, char **dst, const char *path) {
  char *p = NULL;
  if (o == NULL)
    return 0;
  if (path != NULL && (p = acp__strdup(&o->mem, path)) == NULL)
    return ACP_ERR_NOMEM;
  acp__free(&o->mem, *dst);
  *dst = p;
  return 0;
}

int acp_conductor_options_set_trace_file(acp_conductor_options *o,
                                         const char *path) {
  return o ? set_path(o, &o->trace_path, path) : 0;
}

int acp_conductor_options_set_debug_dir(acp_conductor_options *o,
                                        const char *dir) {
  return o ? set_path(o, &o->debug_dir, dir) : 0;
}

void acp_conductor_options_set_grace(acp_conductor_options *o,
                                     uint64_t stdin_grace_ms,
                                     uint64_t term_grace_ms) {
  if (o) {
    o->stdin_grace = stdin_grace_ms;
    o->term_grace = term_grace_ms;
  }
}

void acp_conductor_options_set_high_water(acp_conductor_options *o,
                                          size_t bytes) {
  if (o)
    o->high_water = bytes ? bytes : ACP_UV_DEFAULT_HIGH_WATER;
}

void acp_conductor_options_set_max_line(acp_conductor_options *o,
                                        size_t bytes) {
  if (o)
    o->max_line = bytes ? bytes : DEFAULT_MAX_LINE;
}

void acp_conductor_options_set_mcp_bridge(acp_conductor_options *o,
                                          acp_conductor_mcp_bridge mode) {
  if (o != NULL && (mode == ACP_CONDUCTOR_MCP_BRIDGE_STDIO ||
                    mode == ACP_CONDUCTOR_MCP_BRIDGE_OFF ||
                    mode == ACP_CONDUCTOR_MCP_BRIDGE_HTTP))
    o->bridge = mode;
}

int acp_conductor_options_set_shim_program(acp_conductor_options *o,
                                           const char *path) {
  return o == NULL ? 0 : set_path(o, &o->shim_program, path);
}

void acp_conductor_options_set_stderr_passthrough(acp_conductor_options *o,
                                                  bool on) {
  if (o)
    o->passthrough = on;
}

void acp_conductor_options_set_connector(acp_conductor_options *o,
                                         acp_conductor_connect_cb cb,
                                         void *user_data) {
  if (o) {
    o->connect = cb;
    o->connect_ud = user_data;
  }
}

/* A component given as one word with a URL scheme is a remote peer. */
static bool is_url_comp(const comp_spec *s) {
  static const char *const schemes[] = {"ws://", "wss://", "http://",
                                        "https://"};
  if (s->argc != 1)
    return false;
  for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
    if (strncmp(s->argv[0], schemes[i], strlen(schemes[i])) == 0)
      return true;
  return false;
}

/* MARK: - Runtime state */

typedef struct cond cond;

typedef struct comp {
  cond *c;
  size_t link; /* 1..N */
  const comp_spec *spec;
  char *name;
  char *cmdline;
  acp_uv_process *p;
  acp_uv_link *l;      /* borrowed from p */
  acp_ndjson fr;       /* its stdout's lines */
  const char *fr_lent; /* where fr lent its buffer to the last read */
  size_t fr_kept;      /* fr's buffer is kept for a line this long, or 0 */
  bool running;        /* spawned, not yet reported dead */
  bool out_eof;
  bool exited;
  bool reported;
  bool shut;
  int64_t status;
  int sig;
  char *tail; /* stderr tail copied at exit */
  size_t tail_len;
  unsigned restarts;
  uv_timer_t eof_timer;
  FILE *dbg_in, *dbg_out, *dbg_err;
} comp;

struct cond {
  const acp_conductor_options *o;
  const acp_mem *mem;
  uv_loop_t loop;
  acp_router *r;
  size_t n;
  comp *comps; /* [n], comps[i].link == i + 1 */
  acp_uv_link *up;
  acp_ndjson upfr;     /* the client's (or parent's) lines */
  const char *up_lent; /* where upfr lent its buffer to the last read */
  size_t up_kept;      /* as comp's fr_kept */
  size_t kept;         /* the sum of every framer's *_kept */
  acp_uv_signals *sig;
  uv_timer_t drain_timer;
  uint64_t t0;
  FILE *trace;
  FILE *dbg_up_in, *dbg_up_out;
  FILE *dbg_bridge; /* --debug-dir: bridge.jsonl */
  acp_json_writer *w;
  size_t reading; /* link whose input is being routed */
  bool started;
  bool up_eof;
  bool draining;
  bool shutting;
  bool finished;
  int signals;
  int exit_status;
  int fatal;
  size_t next_shut;
  /* MCP bridge (see acp_conductor_mcp_bridge): the protocol is c->br; the
   * sockets are here. */
  acp_mcp_bridge *br;
  bool br_injected;  /* lines were fed for the agent link: flush again */
  bool br_injecting; /* the router is reading a line of the bridge */
  bool br_listening;
  char *br_dir, *br_sock;
  char br_program[4096];
  struct bconn *br_conns;
  uv_pipe_t br_listener;
  /* --trace: the source link of each line the router wrote for the agent
   * (long long each), until the bridge says what the agent got. */
  acp__buf br_trace_from;
  /* The request the trace line being written answers: link, or -1. */
  long long tr_ans_link;
  long long tr_ans_id;
  bool br_trace_unknown; /* an entry was lost: sources unknown until the
                          * agent's pending output is written */
  /* HTTP bridging: a helper process (`acp mcp http-bridge`) serves a
   * listening socket we bound; its stdin takes "+TOKEN" / "-TOKEN". */
  acp_uv_process *br_http; /* NULL until started */
  bool br_http_exited;
  uint16_t br_http_port;
  char br_rbuf[65536];
};

static void flush_all(cond *c);
static void start_shutdown(cond *c);
static int spawn_comp(cond *c, comp *k);
static void on_drain_timer(uv_timer_t *t);
static void fail_chain(cond *c);

static acp_uv_link *link_of(cond *c, size_t j) {
  if (j == 0)
    return c->up;
  return c->comps[j - 1].running ? c->comps[j - 1].l : NULL;
}

static const char *link_name(const cond *c, size_t j) {
  if (j == ACP_ROUTER_SELF)
    return "conductor";
  if (j == 0)
    return c->o->mode == ACP_ROUTER_MODE_PROXY ? "parent" : "client";
  return c->comps[j - 1].name;
}

/* MARK: - Names and diagnostics */

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* A short name: "arrow" for `acp proxy arrow`, "agent" for `acp agent`,
 * the script's name for interpreters, else the program's base name. */
static const char *derive_name(const comp_spec *s) {
  if (is_url_comp(s))
    return "remote";
  const char *b = base_name(s->argv[0]);
  size_t i;
  static const char *const interp[] = {"node", "python", "python3",
                                       "sh",   "bash",   "env",
                                       "perl", "ruby",   "valgrind"};

  if (strcmp(b, "acp") == 0 && s->argc >= 2) {
    if (strcmp(s->argv[1], "proxy") == 0 && s->argc >= 3)
      return s->argv[2];
    return s->argv[1];
  }
  for (i = 0; i < sizeof(interp) / sizeof(interp[0]); i++)
    if (strcmp(b, interp[i]) == 0) {
      size_t j;
      for (j = 1; j < s->argc; j++)
        if (s->argv[j][0] != '-')
          return base_name(s->argv[j]);
    }
  return b;
}

static char *join_cmdline(const acp_mem *m, const comp_spec *s) {
  size_t i, n = 1;
  char *p, *q;
  for (i = 0; i < s->argc; i++)
    n += strlen(s->argv[i]) + 1;
  p = acp__malloc(m, n);
  if (p == NULL)
    return NULL;
  q = p;
  for (i = 0; i < s->argc; i++) {
    size_t l = strlen(s->argv[i]);
    if (i > 0)
      *q++ = ' ';
    memcpy(q, s->argv[i], l);
    q += l;
  }
  *q = '\0';
  return p;
}

static void log_line(cond *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void log_line(cond *c, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  int n;
  (void)c;
  va_start(ap, fmt);
  n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0) {
    size_t len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
    ssize_t wr = write(2, buf, len);
    (void)wr;
  }
}

static FILE *open_dbg(cond *c, size_t k, const char *name, const char *ext) {
  char path[4096];
  FILE *f;
  if (c->o->debug_dir == NULL)
    return NULL;
  snprintf(path, sizeof(path), "%s/%zu-%s.%s", c->o->debug_dir, k, name, ext);
  f = fopen(path, "a");
  return f;
}

static void dbg_write(FILE *f, const char *d, size_t n) {
  if (f != NULL) {
    fwrite(d, 1, n, f);
    fflush(f);
  }
}

/* MARK: - Tracing */

/* Does the envelope of a message name a proxy/successor method? */
static bool has_successor(const char *d, size_t n) {
  size_t i;
  if (n > 200)
    n = 200;
  for (i = 0; i + 9 <= n; i++)
    if (memcmp(d + i, "successor", 9) == 0)
      return true;
  return false;
}

/* One trace line to `f`. Names are ours (no escaping needed beyond what
 * component names already avoid); -1 stands for no link. */
static void write_entry(cond *c, FILE *f, const char *from, long long from_link,
                        const char *to, long long to_link, const char *dir,
                        const char *data, size_t len) {
  double t = (double)(uv_hrtime() - c->t0) / 1e6;
  if (f == NULL)
    return;
  fprintf(f,
          "{\"time\":%.3f,\"from\":\"%s\",\"fromLink\":%lld,\"to\":\"%s\","
          "\"toLink\":%lld,\"dir\":\"%s\",\"message\":",
          t, from, from_link, to, to_link, dir);
  fwrite(data, 1, len, f);
  if (c->tr_ans_link >= 0)
    fprintf(f, ",\"answers\":{\"link\":%lld,\"id\":%lld}", c->tr_ans_link,
            c->tr_ans_id);
  fputs("}\n", f);
  fflush(f);
}

static void trace_entry(cond *c, const char *from, long long from_link,
                        const char *to, long long to_link, const char *dir,
                        const char *data, size_t len) {
  write_entry(c, c->trace, from, from_link, to, to_link, dir, data, len);
}

/* What a traced line to the agent waits with until the bridge says what
 * the agent got: its source and the request it answers (see on_trace). */
typedef struct br_trace_src {
  long long from;
  long long ans_link;
  long long ans_id;
} br_trace_src;

/* --debug-dir: the bridge's traffic, with its real ends, in bridge.jsonl
 * (opened at the first message). */
static void dbg_bridge(cond *c, const char *from, long long from_link,
                       const char *to, long long to_link, const char *data,
                       size_t len) {
  if (c->o->debug_dir == NULL)
    return;
  if (c->dbg_bridge == NULL) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/bridge.jsonl", c->o->debug_dir);
    c->dbg_bridge = fopen(path, "a");
  }
  long long ans = c->tr_ans_link;
  c->tr_ans_link = -1; /* bridge.jsonl keeps its format */
  write_entry(c, c->dbg_bridge, from, from_link, to, to_link, "bridge", data,
              len);
  c->tr_ans_link = ans;
}

static void on_trace(acp_router *r, const acp_router_hop *hop, void *ud) {
  cond *c = ud;
  const char *dir;
  long long from = hop->from == ACP_ROUTER_SELF ? -1 : (long long)hop->from;
  (void)r;

  if (c->br_injecting && hop->from == c->n)
    dbg_bridge(c, "bridge", (long long)c->n, link_name(c, hop->to),
               (long long)hop->to, hop->data, hop->len);
  if (c->br != NULL && c->o->mode == ACP_ROUTER_MODE_AGENT && hop->to == c->n &&
      !hop->in_batch) {
    /* The bridge may rewrite or take it: it says what the agent got. */
    br_trace_src src = {.from = from,
                        .ans_link = hop->answers_link == ACP_ROUTER_SELF
                                        ? -1
                                        : (long long)hop->answers_link,
                        .ans_id = (long long)hop->answers_id};
    if (!c->br_trace_unknown &&
        acp__buf_append(&c->br_trace_from, &src, sizeof(src)) != 0) {
      /* A missing entry would shift every later source by one: better
       * none (the trace says "unknown") than wrong ones, until the agent's
       * pending output is written. */
      acp__buf_clear(&c->br_trace_from);
      c->br_trace_unknown = true;
    }
    return;
  }
  if (c->trace == NULL)
    return;
  if (hop->to == 0 && c->o->mode == ACP_ROUTER_MODE_PROXY && from > 0 &&
      has_successor(hop->data, hop->len))
    dir = "right";
  else if (hop->from == ACP_ROUTER_SELF)
    dir = hop->to == 0 ? "left" : "right";
  else
    dir = hop->to > hop->from ? "right" : "left";
  if (hop->answers_link != ACP_ROUTER_SELF) {
    c->tr_ans_link = (long long)hop->answers_link;
    c->tr_ans_id = (long long)hop->answers_id;
  }
  trace_entry(c,
              c->br_injecting && hop->from == c->n ? "bridge"
                                                   : link_name(c, hop->from),
              from, link_name(c, hop->to), (long long)hop->to, dir, hop->data,
              hop->len);
  c->tr_ans_link = -1;
}

static void on_event(acp_router *r, acp_router_event_type type, size_t link,
                     const char *detail, void *ud) {
  cond *c = ud;
  (void)r;
  if (type == ACP_ROUTER_EVENT_WIRE_FALLBACK ||
      type == ACP_ROUTER_EVENT_REINIT_FAILED)
    log_line(c, "[conductor] %s (link %zu): %s\n",
             link == 0 ? link_name(c, 0) : c->comps[link - 1].name, link,
             detail ? detail : "");
}

/* MARK: - MCP bridge (agent without mcpCapabilities.acp) */

/* The protocol is the core's acp_mcp_bridge (include/acp/mcp_bridge.h):
 * here are its sockets (the shims' listener, their connections, the fds
 * they pass), the HTTP helper process and its timer. */

#define BR_HTTP_GRACE_MS                                                       \
  3000 /* the HTTP helper's time to leave after its EOF */

/* One accepted shim connection (an endpoint of the bridge). */
typedef struct bconn {
  struct bconn *next;
  cond *c;
  uint64_t ep;    /* the bridge's endpoint id */
  uv_pipe_t pipe; /* the shim's control connection (IPC: may carry fds) */
  uv_pipe_t rd;   /* fd mode: the shim's stdin, passed to us (MCP in) */
  uv_pipe_t wr;   /* fd mode: the shim's stdout (MCP out) */
  bool fdmode;    /* rd and wr are in use */
  int handles;    /* handles still to close */
  bool closing;
  bool handles_closing;
  bool tell; /* tell the bridge once closed (a write failed) */
  uv_shutdown_t shut;
} bconn;

static bool bridge_on(const cond *c) {
  return c->o->mode == ACP_ROUTER_MODE_AGENT && c->n > 0 && c->br != NULL;
}

static void br_fatal(cond *c, int rc) {
  if (rc == ACP_ERR_NOMEM || acp_is_fatal(rc)) {
    c->fatal = ACP_ERR_NOMEM;
    c->exit_status = 1;
  }
}

/* Feed what the bridge wrote (as if from the agent) to the router. */
static void br_inject(cond *c) {
  const char *d;
  acp_ssize n;
  while (!c->fatal && (n = acp_mcp_bridge_send(c->br, &d)) > 0) {
    size_t off = 0;
    if (c->finished || !c->comps[c->n - 1].running)
      return;
    c->br_injecting = true;
    while (off < (size_t)n && !c->fatal) {
      const char *s = d + off;
      const char *nl = memchr(s, '\n', (size_t)n - off);
      size_t ln = nl ? (size_t)(nl - s) : (size_t)n - off;
      if (ln > 0 && acp_router_recv(c->r, c->n, s, ln) == ACP_ERR_NOMEM)
        br_fatal(c, ACP_ERR_NOMEM);
      off += ln + 1;
    }
    c->br_injecting = false;
    c->br_injected = true;
  }
}

static bconn *br_conn_of(cond *c, uint64_t ep) {
  bconn *k;
  for (k = c->br_conns; k != NULL; k = k->next)
    if (k->ep == ep)
      return k;
  return NULL;
}

/* MARK: Shim connections */

static void br_on_close(uv_handle_t *h) {
  bconn *k = h->data;
  cond *c = k->c;
  if (--k->handles > 0)
    return;
  if (k->tell && c->br != NULL) {
    acp_mcp_bridge_endpoint_closed(c->br, k->ep);
    flush_all(c);
  }
  acp__free(c->mem, k);
}

static void br_close_handles(bconn *k) {
  cond *c = k->c;
  bconn **pp;
  if (k->handles_closing)
    return;
  k->handles_closing = true;
  for (pp = &c->br_conns; *pp != NULL; pp = &(*pp)->next)
    if (*pp == k) {
      *pp = k->next;
      break;
    }
  k->handles = k->fdmode ? 3 : 1;
  uv_close((uv_handle_t *)&k->pipe, br_on_close);
  if (k->fdmode) {
    uv_close((uv_handle_t *)&k->rd, br_on_close);
    uv_close((uv_handle_t *)&k->wr, br_on_close);
  }
}

static void br_on_shutdown(uv_shutdown_t *req, int status) {
  (void)status;
  br_close_handles(req->data);
}

/* Close a shim connection (the bridge is told by the caller, or once
 * closed when `tell`). Graceful: what was written to it goes out first
 * (an answer to its last call), then its end. */
static void br_conn_close(bconn *k, bool tell, bool graceful) {
  if (k->closing) {
    if (!graceful)
      br_close_handles(k);
    return;
  }
  k->closing = true;
  k->tell = tell;
  k->shut.data = k;
  if (graceful &&
      uv_shutdown(&k->shut, (uv_stream_t *)(k->fdmode ? &k->wr : &k->pipe),
                  br_on_shutdown) == 0)
    return;
  br_close_handles(k);
}

typedef struct bwrite {
  uv_write_t req;
  char data[];
} bwrite;

static void br_on_write(uv_write_t *req, int status) {
  bwrite *w = (bwrite *)req;
  bconn *k = req->handle->data;
  cond *c = k->c;
  (void)status;
  acp__free(c->mem, w);
}

/* The bridge writes lines to an endpoint. */
static void br_cb_write(acp_mcp_bridge *b, uint64_t ep, const char *d, size_t n,
                        void *ud) {
  cond *c = ud;
  bconn *k = br_conn_of(c, ep);
  bwrite *w;
  uv_buf_t buf;
  (void)b;
  if (k == NULL || k->closing)
    return;
  w = acp__malloc(c->mem, sizeof(*w) + n);
  if (w == NULL)
    return;
  memcpy(w->data, d, n);
  buf = uv_buf_init(w->data, (unsigned)n);
  if (uv_write(&w->req, (uv_stream_t *)(k->fdmode ? &k->wr : &k->pipe), &buf, 1,
               br_on_write) != 0) {
    acp__free(c->mem, w);
    br_conn_close(k, true, false);
  }
}

/* The bridge closes an endpoint (it has forgotten it). */
static void br_cb_close(acp_mcp_bridge *b, uint64_t ep, void *ud) {
  cond *c = ud;
  bconn *k = br_conn_of(c, ep);
  (void)b;
  if (k != NULL)
    br_conn_close(k, false, !c->shutting);
}

static void br_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b);
static void br_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b);

/* The shim passed its stdin and stdout (SCM_RIGHTS, with the token): read
 * and write the agent's pipes directly, no relay through the shim. */
static void br_take_fds(bconn *k) {
  cond *c = k->c;
  int rc = acp_uv_bridge_take_fds(&c->loop, &k->pipe, &k->rd, &k->wr);
  if (rc == 0)
    return; /* a relaying shim */
  k->rd.data = k;
  k->wr.data = k;
  k->fdmode = true;
  if (rc != 1 ||
      uv_read_start((uv_stream_t *)&k->rd, br_alloc, br_on_read) != 0) {
    acp_mcp_bridge_endpoint_closed(c->br, k->ep);
    br_conn_close(k, false, false);
  }
}

static void br_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b) {
  bconn *k = h->data;
  (void)sz;
  b->base = k->c->br_rbuf;
  b->len = sizeof(k->c->br_rbuf);
}

static void br_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b) {
  bconn *k = st->data;
  cond *c = k->c;
  if (nread < 0) {
    acp_mcp_bridge_endpoint_closed(c->br, k->ep);
    br_conn_close(k, false, false);
    flush_all(c);
    return;
  }
  if (k->fdmode && st == (uv_stream_t *)&k->pipe)
    return; /* control connection after the fds: only its end matters */
  if (nread > 0) {
    bool accepted = acp_mcp_bridge_endpoint_accepted(c->br, k->ep);
    int rc = acp_mcp_bridge_endpoint_recv(c->br, k->ep, b->base, (size_t)nread);
    br_fatal(c, rc);
    if (!accepted && !k->closing && !k->fdmode &&
        acp_mcp_bridge_endpoint_accepted(c->br, k->ep))
      br_take_fds(k);
  }
  flush_all(c);
}

static void br_on_connection(uv_stream_t *srv, int status) {
  cond *c = srv->data;
  bconn *k;
  if (status < 0 || c->shutting)
    return;
  k = acp__calloc(c->mem, 1, sizeof(*k));
  if (k == NULL)
    return;
  k->c = c;
  uv_pipe_init(&c->loop, &k->pipe, 1);
  k->pipe.data = k;
  k->next = c->br_conns;
  c->br_conns = k;
  if (acp_mcp_bridge_endpoint_new(c->br, &k->ep) != 0) {
    br_conn_close(k, false, false);
    return;
  }
  if (uv_accept(srv, (uv_stream_t *)&k->pipe) != 0 ||
      uv_read_start((uv_stream_t *)&k->pipe, br_alloc, br_on_read) != 0) {
    acp_mcp_bridge_endpoint_closed(c->br, k->ep);
    br_conn_close(k, false, false);
  }
}

/* Create the private directory and the listening socket (once). */
static int br_listen(cond *c) {
  const char *tmp = getenv("TMPDIR");
  char dir[512];
  size_t sz;
  if (c->br_listening)
    return 0;
  if (tmp == NULL || *tmp == '\0')
    tmp = "/tmp";
  if (snprintf(dir, sizeof(dir), "%s/acp-bridge-XXXXXX", tmp) >= 80)
    snprintf(dir, sizeof(dir), "/tmp/acp-bridge-XXXXXX");
  if (mkdtemp(dir) == NULL)
    return ACP_ERR_SYSTEM;
  (void)chmod(dir, 0700);
  sz = strlen(dir);
  c->br_dir = acp__strndup(c->mem, dir, sz);
  c->br_sock = acp__malloc(c->mem, sz + sizeof("/mcp.sock"));
  if (c->br_dir == NULL || c->br_sock == NULL)
    return ACP_ERR_NOMEM;
  memcpy(c->br_sock, dir, sz);
  memcpy(c->br_sock + sz, "/mcp.sock", sizeof("/mcp.sock"));
  uv_pipe_init(&c->loop, &c->br_listener, 0);
  c->br_listener.data = c;
  c->br_listening = true;
  if (uv_pipe_bind(&c->br_listener, c->br_sock) != 0 ||
      chmod(c->br_sock, 0600) != 0 ||
      uv_listen((uv_stream_t *)&c->br_listener, 64, br_on_connection) != 0)
    return ACP_ERR_SYSTEM;
  return 0;
}

static void br_http_stop(cond *c);

/* Close every connection and the listener; remove the socket. */
static void br_close_all(cond *c) {
  while (c->br_conns != NULL)
    br_conn_close(c->br_conns, false, false);
  if (c->br_listening) {
    c->br_listening = false;
    uv_close((uv_handle_t *)&c->br_listener, NULL);
  }
  br_http_stop(c);
  if (c->br_sock != NULL)
    (void)unlink(c->br_sock);
  if (c->br_dir != NULL)
    (void)rmdir(c->br_dir);
}

static void br_free_all(cond *c) {
  acp_mcp_bridge_free(c->br);
  c->br = NULL;
  acp__free(c->mem, c->br_dir);
  acp__free(c->mem, c->br_sock);
  acp__buf_dispose(&c->br_trace_from);
}

/* MARK: HTTP helper */

/* Tell the HTTP helper a token is valid ('+') or no longer ('-'): a line
 * on its stdin, its control input. */
static void br_http_ctl(cond *c, char op, const char *token) {
  char line[ACP_UV_BRIDGE_TOKEN_LEN + 3];
  int n;
  if (c->br_http == NULL || c->br_http_exited)
    return;
  n = acp_uv_bridge_ctl_format(line, sizeof(line), op == '+', token);
  if (n > 0)
    (void)acp_uv_link_write(acp_uv_process_link(c->br_http), line, (size_t)n);
}

static void br_http_on_exit(acp_uv_process *p, int64_t status, int sig,
                            void *ud) {
  cond *c = ud;
  (void)p;
  c->br_http_exited = true;
  if (!c->shutting)
    log_line(c,
             "[conductor] mcp bridge: the HTTP helper exited (status %lld, "
             "signal %d); HTTP-bridged servers are gone\n",
             (long long)status, sig);
  else if (status != 0 || (sig != 0 && sig != SIGTERM))
    log_line(c,
             "[conductor] mcp bridge: the HTTP helper ended with status "
             "%lld, signal %d\n",
             (long long)status, sig);
}

/* Bind 127.0.0.1:0 here (so the port is known at once, before the helper
 * runs: the agent's connections wait in the backlog), then spawn
 * `PROGRAM mcp http-bridge --socket SOCK --listen-fd 3` like any component
 * (acp_uv_process), with the socket as its fd 3; its stdin is the control
 * input. The bridge then announces the tokens of the servers declared so
 * far (they go on the pipe). */
static int br_http_start(cond *c) {
  struct sockaddr_in a;
  socklen_t al = sizeof(a);
  acp_uv_process_options *po = NULL;
  const char *args[8];
  int fd, rc;
  if (c->br_http != NULL)
    return c->br_http_exited ? ACP_ERR_CLOSED : 0;
  if (c->shutting)
    return ACP_ERR_CLOSED;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return ACP_ERR_SYSTEM;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
    close(fd);
    return ACP_ERR_SYSTEM;
  }
  c->br_http_port = ntohs(a.sin_port);
  args[0] = c->br_program;
  args[1] = "mcp";
  args[2] = "http-bridge";
  args[3] = "--socket";
  args[4] = c->br_sock;
  args[5] = "--listen-fd";
  args[6] = "3";
  args[7] = NULL;
  rc = acp_uv_process_options_new(&po, c->mem);
  if (rc == 0)
    rc = acp_uv_process_options_set_argv(po, args);
  if (rc == 0) {
    acp_uv_process_options_set_fd3(po, fd);
    acp_uv_process_options_set_exit_cb(po, br_http_on_exit);
    /* The shutdown ladder of components: the end of its control input
     * asks it to close its sessions and exit (its own clean exit, which
     * valgrind and LeakSanitizer can check); signals follow only if it
     * has not after the grace. */
    acp_uv_process_options_set_grace(po, BR_HTTP_GRACE_MS, BR_HTTP_GRACE_MS);
    rc = acp_uv_process_spawn(&c->br_http, &c->loop, po, c, c->mem, NULL);
  }
  acp_uv_process_options_free(po);
  close(fd);
  if (rc != 0) {
    c->br_http = NULL;
    return ACP_ERR_SYSTEM;
  }
  c->br_http_exited = false;
  return 0;
}

static void br_http_on_stopped(acp_uv_process *p, void *ud) {
  (void)ud;
  acp_uv_process_close(p, NULL);
}

/* Stop the helper with the shutdown ladder, then release it. */
static void br_http_stop(cond *c) {
  acp_uv_process *p = c->br_http;
  if (p == NULL)
    return;
  c->br_http = NULL;
  c->br_http_exited = true;
  if (acp_uv_process_shutdown(p, br_http_on_stopped) != 0)
    acp_uv_process_close(p, NULL);
}

/* MARK: Bridge callbacks */

static int br_cb_random(acp_mcp_bridge *b, uint8_t out[16], void *ud) {
  (void)b;
  (void)ud;
  return uv_random(NULL, NULL, out, 16, 0, NULL) != 0 ? ACP_ERR_SYSTEM : 0;
}

static int br_cb_prepare(acp_mcp_bridge *b, acp_mcp_bridge_transport t,
                         void *ud) {
  cond *c = ud;
  int rc;
  if (t == ACP_MCP_BRIDGE_TRANSPORT_HTTP) {
    rc = br_http_start(c);
    if (rc == 0)
      acp_mcp_bridge_set_http_port(b, c->br_http_port);
    return rc;
  }
  rc = br_listen(c);
  return rc == 0 ? acp_mcp_bridge_set_socket(b, c->br_sock) : rc;
}

static void br_cb_event(acp_mcp_bridge *b, acp_mcp_bridge_event_type type,
                        const char *detail, void *ud) {
  cond *c = ud;
  (void)b;
  if (type == ACP_MCP_BRIDGE_EVENT_TOKEN_ADDED)
    br_http_ctl(c, '+', detail);
  else if (type == ACP_MCP_BRIDGE_EVENT_TOKEN_REMOVED)
    br_http_ctl(c, '-', detail);
  else
    log_line(c, "[conductor] %s\n", detail);
}

/* The source of the next line the router wrote for the agent, as its trace
 * callback saw it (the bridge reports the line as the agent got it). */
static br_trace_src br_trace_pop(cond *c) {
  br_trace_src src = {.from = -1, .ans_link = -1, .ans_id = 0};
  if (c->br_trace_unknown)
    return src;
  if (c->br_trace_from.len >= sizeof(src)) {
    memcpy(&src, c->br_trace_from.data, sizeof(src));
    acp__buf_consume(&c->br_trace_from, sizeof(src));
  }
  return src;
}

static void br_cb_trace(acp_mcp_bridge *b, const acp_mcp_bridge_hop *hop,
                        void *ud) {
  cond *c = ud;
  char ep[40], srv[300];
  const char *agent = link_name(c, c->n);
  br_trace_src src;
  (void)b;
  snprintf(ep, sizeof(ep), "endpoint:%llu", (unsigned long long)hop->endpoint);
  snprintf(srv, sizeof(srv), "bridge:%s", hop->server ? hop->server : "");
  switch (hop->type) {
  case ACP_MCP_BRIDGE_HOP_FROM_ENDPOINT:
    trace_entry(c, ep, -1, srv, (long long)c->n, "bridge", hop->data, hop->len);
    dbg_bridge(c, ep, -1, srv, (long long)c->n, hop->data, hop->len);
    break;
  case ACP_MCP_BRIDGE_HOP_TO_ENDPOINT:
    trace_entry(c, srv, (long long)c->n, ep, -1, "bridge", hop->data, hop->len);
    dbg_bridge(c, srv, (long long)c->n, ep, -1, hop->data, hop->len);
    break;
  case ACP_MCP_BRIDGE_HOP_TO_AGENT:
  case ACP_MCP_BRIDGE_HOP_TO_BRIDGE:
    if (hop->len > 0 && hop->data[0] == '[')
      break; /* a batch: the router traced its elements */
    src = br_trace_pop(c);
    c->tr_ans_link = src.ans_link;
    c->tr_ans_id = src.ans_id;
    trace_entry(c, src.from < 0 ? "conductor" : link_name(c, (size_t)src.from),
                src.from,
                hop->type == ACP_MCP_BRIDGE_HOP_TO_AGENT ? agent : "bridge",
                (long long)c->n, "right", hop->data, hop->len);
    c->tr_ans_link = -1;
    if (hop->type == ACP_MCP_BRIDGE_HOP_TO_BRIDGE)
      dbg_bridge(c, src.from < 0 ? "conductor" : link_name(c, (size_t)src.from),
                 src.from, "bridge", (long long)c->n, hop->data, hop->len);
    break;
  }
}

static int br_setup(cond *c) {
  acp_mcp_bridge_options *bo = NULL;
  int rc;
  if (c->o->mode != ACP_ROUTER_MODE_AGENT || c->n == 0)
    return 0;
  /* The program the agent and the helper run is the embedder's explicit
   * choice (acp_conductor_options_set_shim_program): never our own
   * executable by accident. */
  if (c->o->shim_program != NULL)
    snprintf(c->br_program, sizeof(c->br_program), "%s", c->o->shim_program);
  rc = acp_mcp_bridge_options_new(&bo);
  if (rc == 0 && c->o->shim_program != NULL)
    rc = acp_mcp_bridge_options_set_program(bo, c->o->shim_program);
  if (rc == 0) {
    acp_mcp_bridge_options_set_transport(
        bo, c->o->bridge == ACP_CONDUCTOR_MCP_BRIDGE_OFF
                ? ACP_MCP_BRIDGE_TRANSPORT_OFF
            : c->o->bridge == ACP_CONDUCTOR_MCP_BRIDGE_HTTP
                ? ACP_MCP_BRIDGE_TRANSPORT_HTTP
                : ACP_MCP_BRIDGE_TRANSPORT_STDIO);
    acp_mcp_bridge_options_set_max_line(bo, c->o->max_line);
    acp_mcp_bridge_options_set_random_cb(bo, br_cb_random);
    acp_mcp_bridge_options_set_prepare_cb(bo, br_cb_prepare);
    acp_mcp_bridge_options_set_endpoint_write_cb(bo, br_cb_write);
    acp_mcp_bridge_options_set_endpoint_close_cb(bo, br_cb_close);
    acp_mcp_bridge_options_set_event_cb(bo, br_cb_event);
    acp_mcp_bridge_options_set_trace_cb(
        bo, c->trace || c->o->debug_dir ? br_cb_trace : NULL);
    rc = acp_mcp_bridge_new(&c->br, bo, c, c->mem);
  }
  acp_mcp_bridge_options_free(bo);
  return rc;
}

/* The agent answered initialize: write what was held, rewritten as its
 * capabilities say. */
static void br_release(cond *c) {
  acp_uv_link *dst = link_of(c, c->n);
  const char *d;
  acp_ssize n = acp_mcp_bridge_release(c->br, &d);
  if (n < 0) {
    br_fatal(c, (int)n);
    return;
  }
  if (dst != NULL && n > 0) {
    dbg_write(c->comps[c->n - 1].dbg_in, d, (size_t)n);
    (void)acp_uv_link_write(dst, d, (size_t)n);
  }
  br_inject(c);
}

/* MARK: - Writing */

/* A runtime failure that loses messages (no memory): stop the chain. */
static void cond_fatal(cond *c, int rc, const char *what) {
  c->fatal = rc;
  c->exit_status = 1;
  log_line(c, "[conductor] %s: %s\n", what, acp_strerror(rc));
  start_shutdown(c);
}

/* Pieces of output to a link, PIECES at a time (in order: the link queues
 * what the kernel does not take at once, copying only that). */
#define PIECES 16
static int write_iov(acp_uv_link *dst, const acp_rpc_iov *iov, size_t niov) {
  uv_buf_t bufs[PIECES];
  size_t i = 0;
  int rc = 0;
  if (niov == 1)
    return acp_uv_link_write(dst, iov[0].data, iov[0].len);
  while (i < niov && rc == 0) {
    size_t k = 0;
    for (; k < PIECES && i < niov; k++, i++) {
      bufs[k].base = (char *)iov[i].data;
      bufs[k].len = iov[i].len;
    }
    rc = acp__uv_link_writev(dst, bufs, k);
  }
  return rc;
}

static void dbg_write_iov(FILE *f, const acp_rpc_iov *iov, size_t niov) {
  size_t i;
  for (i = 0; f != NULL && i < niov; i++)
    dbg_write(f, iov[i].data, iov[i].len);
}

static void flush_all(cond *c) {
  size_t j;
  acp_uv_link *src = link_of(c, c->reading);
  int rc;

  if (c->fatal)
    return;
again:
  c->br_injected = false;
  if (bridge_on(c) && acp_mcp_bridge_want_release(c->br))
    br_release(c);
  for (j = 0; j <= c->n && !c->fatal; j++) {
    const acp_rpc_iov *iov;
    size_t niov;
    /* Pieces: a large text the router borrowed from the line it routed
     * (acp_router_recv_framed_ref()) is written from where it was read. */
    acp_ssize n = acp_router_send_iov(c->r, j, &iov, &niov);
    acp_uv_link *dst;
    bool br = j == c->n && bridge_on(c);
    if (n < 0) {
      cond_fatal(c, (int)n, "cannot take a message");
      return;
    }
    if (n == 0)
      continue;
    dst = link_of(c, j);
    if (dst == NULL) {
      if (br)
        acp__buf_clear(&c->br_trace_from);
      continue;
    }
    if (br) {
      /* The router's output is valid until its next call: write what the
       * agent gets, then feed the router what the bridge wrote. */
      n = acp_mcp_bridge_to_agent_iov(c->br, iov, niov, &iov, &niov);
      /* Every source noted for this output has been used. */
      acp__buf_clear(&c->br_trace_from);
      c->br_trace_unknown = false;
      if (n < 0) {
        br_fatal(c, (int)n);
        break;
      }
    }
    if (n > 0) {
      dbg_write_iov(j == 0 ? c->dbg_up_out : c->comps[j - 1].dbg_in, iov, niov);
      /* Backpressure: the link whose input produced this output is held
       * back while the destination's queue is above the high-water mark. */
      if (src != NULL && acp__uv_link_src(dst) != src)
        (void)acp_uv_link_couple(src, dst, c->o->high_water, 0);
      /* ACP_ERR_CLOSED: the destination is gone, and its exit is handled
       * where it is reported; anything else loses a message: stop. */
      rc = write_iov(dst, iov, niov);
      if (rc != 0 && rc != ACP_ERR_CLOSED) {
        cond_fatal(c, rc, "cannot queue a message");
        return;
      }
    }
  }
  if (bridge_on(c))
    br_inject(c);
  if (c->br_injected && !c->fatal)
    goto again;
  if (c->draining && acp_router_pending(c->r) == 0)
    start_shutdown(c);
}

/* MARK: - Reading */

/* `f`: the framer that just produced the line. The router then skips what
 * the framer already checked (acp_router_recv_framed): no line feed inside,
 * and the plain run its search found, which a 1 MiB message has. The line
 * is lent to the router (acp_router_recv_framed_ref()): a large text is not
 * copied into its output but written from where it was read, so what
 * borrows from the line is written (or copied) before the framer's next
 * call, which may move or free those bytes. */
static void route_line(cond *c, size_t link, const acp_ndjson *f,
                       const char *line, size_t len) {
  int rc;
  if (link == c->n && bridge_on(c)) {
    const char *in = line;
    acp_ssize n = acp_mcp_bridge_from_agent(c->br, line, len, &line);
    if (n < 0) {
      br_fatal(c, (int)n);
      start_shutdown(c);
      return;
    }
    if (line != in || (size_t)n != len)
      f = NULL; /* rewritten by the bridge: not the framer's line */
    len = (size_t)n;
  }
  /* A line the bridge rewrote lives in the bridge, which flush_all() calls
   * before writing: it is not lent. */
  if (f != NULL)
    rc = acp_router_recv_framed_ref(c->r, link, f, line, len);
  else
    rc = acp_router_recv_framed(c->r, link, NULL, line, len);
  if (rc == 0 && acp_router_borrowed(c->r)) {
    flush_all(c);
    /* Not written (a fatal error on the way): copied, so that nothing
     * points into the line once the framer moves on. */
    if (acp_router_borrowed(c->r))
      rc = acp_router_copy_borrowed(c->r);
  }
  if (rc == ACP_ERR_NOMEM) {
    c->fatal = rc;
    c->exit_status = 1;
    log_line(c, "[conductor] out of memory (link %zu)\n", link);
    start_shutdown(c);
  }
}

/* After a long line: write it out, then give its memory back (the router's
 * buffers; the write queue's copy is freed when the write completes). */
static void after_big_line(cond *c) {
  flush_all(c);
  acp_router_release_memory(c->r);
}

/* An over-long line from `link` gets the answer a JSON-RPC session gives
 * (acp_ndjson_overlong_reply()), after what the router already queued for
 * that link, so that the order of answers is the order of lines. */
static void answer_overlong(cond *c, size_t link) {
  char reply[ACP_NDJSON_REPLY_MAX + 1];
  size_t n = acp_ndjson_overlong_reply(reply, sizeof(reply), c->o->max_line);
  acp_uv_link *dst;
  int rc;

  log_line(c, "[conductor] dropped an over-long line (link %zu)\n", link);
  flush_all(c);
  dst = link_of(c, link);
  if (c->fatal || dst == NULL || n == 0)
    return;
  trace_entry(c, "conductor", -1, link_name(c, link), (long long)link,
              link == 0 ? "left" : "right", reply, n);
  reply[n++] = '\n';
  dbg_write(link == 0 ? c->dbg_up_out : c->comps[link - 1].dbg_in, reply, n);
  rc = acp_uv_link_write(dst, reply, n);
  if (rc != 0 && rc != ACP_ERR_CLOSED)
    cond_fatal(c, rc, "cannot queue a message");
}

/* A framer gives its buffer back (its carry is empty or dropped). */
static void fr_give_back(cond *c, acp_ndjson *f, size_t *kept) {
  c->kept -= *kept;
  *kept = 0;
  acp_ndjson_dispose(f);
}

/*
 * After a long line of `n` bytes: whether to keep the framer's grown
 * buffer (its entry `kept`) for the
 * link's next long line, or give it back. Given back after every long line,
 * it was grown again by the next one from 128 KiB, and the reallocations
 * copied ~131 KB per 1 MiB message (262k of the conductor's instructions
 * per 1 MiB turn; docs/decisions.md, issue 11). Kept on every link, a chain
 * of proxies would hold one such buffer per link (the peak memory target:
 * "A conductor returns large buffers"). So a chain of one component (an
 * agent alone, or one proxy in proxy mode) keeps the buffers of lines
 * adding up to KEEP_BUDGET (2.5 MiB: both links at 1 MiB messages), first
 * come first kept; past it, and in longer chains, the buffer goes back as
 * before.
 */
static bool keep_or_give_back(cond *c, size_t *kept, size_t n) {
  size_t others = c->kept - *kept;
  size_t m = n > *kept ? n : *kept;

  /* With proxies, every link carries each long line: the first two links
   * keeping theirs took a chain of three proxies from 5.3 to 6.3-6.5 MiB
   * peak (target 7), too close while a kept buffer can reach twice its
   * line as the framer grows it. Such chains give back as before. */
  if (c->n > 1)
    return false;
  if (m <= KEEP_BUDGET && others <= KEEP_BUDGET - m) {
    c->kept = others + m;
    *kept = m;
    return true;
  }
  return false;
}

/* Split `data` into lines (the policy of acp/ndjson.h); route each one. The
 * carry of a long line split across reads, or of an over-long one, is given
 * back at once (keep_or_give_back() keeps a few): a conductor holds many
 * links. `lent`: the bytes were read into the framer's own buffer
 * (acp_ndjson_read_buf()); then what follows a long line in the same read
 * lives in that buffer too, and the buffer is given back only once those
 * bytes are framed. `kept`: the framer's entry of keep_or_give_back(). */
static void frame(cond *c, acp_ndjson *f, size_t *kept, size_t link,
                  const char *data, size_t len, bool lent) {
  bool give_back = false;

  while (len > 0 && !c->fatal) {
    const char *line;
    size_t used, n;
    int rc = acp_ndjson_next(f, data, len, &used, &line, &n);

    data += used;
    len -= used;
    if (rc == ACP_NDJSON_NEED_MORE)
      break;
    if (rc == ACP_NDJSON_LINE) {
      route_line(c, link, f, line, n);
      if (n >= BIG_LINE) {
        /* The line was written (route_line): nothing points into it. */
        if (keep_or_give_back(c, kept, n))
          give_back = false;
        else if (!lent || len == 0)
          fr_give_back(c, f, kept);
        else
          give_back = true;
        after_big_line(c);
      }
    } else if (rc == ACP_NDJSON_OVERLONG) {
      if (!lent || len == 0)
        fr_give_back(c, f, kept);
      else
        give_back = true;
      answer_overlong(c, link);
    } else {
      cond_fatal(c, rc, "cannot hold a line");
      return;
    }
  }
  if (give_back && acp_ndjson_pending(f) == 0)
    fr_give_back(c, f, kept);
}

/* The read buffers a link's stream reads go into: the framer's, right after
 * the partial line it holds (acp_ndjson_read_buf()), so that a long line is
 * not copied from the link's buffer to the framer's (one copy of each 1 MiB
 * message per hop; docs/decisions.md, issue 11). */
static char *up_read_buf(void *ud, size_t *room) {
  cond *c = ud;
  c->up_lent = acp_ndjson_read_buf(&c->upfr, room);
  return (char *)c->up_lent;
}

static char *comp_read_buf(void *ud, size_t *room) {
  comp *k = ud;
  k->fr_lent = acp_ndjson_read_buf(&k->fr, room);
  return (char *)k->fr_lent;
}

static void spawn_all(cond *c);

static void on_up_read(acp_uv_link *l, int status, const char *data, size_t len,
                       void *ud) {
  cond *c = ud;
  (void)l;
  if (status < 0) {
    c->up_eof = true;
    if (!c->started || acp_router_pending(c->r) == 0) {
      start_shutdown(c);
    } else {
      c->draining = true;
      uv_timer_start(&c->drain_timer, on_drain_timer, c->o->stdin_grace, 0);
    }
    return;
  }
  if (!c->started)
    spawn_all(c);
  dbg_write(c->dbg_up_in, data, len);
  c->reading = 0;
  frame(c, &c->upfr, &c->up_kept, 0, data, len,
        data == c->up_lent && data != NULL);
  c->up_lent = NULL;
  flush_all(c);
}

static void on_comp_read(acp_uv_link *l, int status, const char *data,
                         size_t len, void *ud);

/* MARK: - Component death */

static void append_json_str(acp_json_writer *w, const char *k, const char *s,
                            size_t n) {
  acp_json_write_keyz(w, k);
  acp_json_write_str(w, s, n);
}

/* Copy `s` replacing invalid bytes / control characters for a message. */
static size_t tail_lines(const char *t, size_t n, size_t max,
                         const char **start) {
  const char *p = t, *e = t + n;
  while (e > p && (e[-1] == '\n' || e[-1] == '\r'))
    e--;
  if ((size_t)(e - p) > max) {
    p = e - max;
    {
      const char *nl = memchr(p, '\n', (size_t)(e - p));
      if (nl != NULL && nl + 1 < e)
        p = nl + 1;
    }
  }
  *start = p;
  return (size_t)(e - p);
}

static void report_dead(cond *c, comp *k, const char *why) {
  char reason[1400];
  const char *ts = NULL;
  size_t tn = 0, i;
  int off;
  const char *data;
  size_t dlen;

  if (k->reported)
    return;
  k->reported = true;
  k->running = false;
  uv_timer_stop(&k->eof_timer);
  if (why != NULL)
    off = snprintf(reason, sizeof(reason), "component %zu '%s' (%s) %s",
                   k->link, k->name, k->cmdline, why);
  else if (k->sig != 0)
    off = snprintf(reason, sizeof(reason),
                   "component %zu '%s' (%s) was killed by signal %d (%s)",
                   k->link, k->name, k->cmdline, k->sig, strsignal(k->sig));
  else
    off = snprintf(reason, sizeof(reason),
                   "component %zu '%s' (%s) exited with status %lld", k->link,
                   k->name, k->cmdline, (long long)k->status);
  if (off < 0)
    off = 0;
  if ((size_t)off >= sizeof(reason))
    off = (int)sizeof(reason) - 1;
  if (k->tail_len > 0) {
    tn = tail_lines(k->tail, k->tail_len, REASON_STDERR, &ts);
    if (tn > 0 && (size_t)off + 12 < sizeof(reason)) {
      size_t room = sizeof(reason) - (size_t)off - 12;
      size_t m = tn < room ? tn : room;
      memcpy(reason + off, "; stderr: ", 10);
      off += 10;
      for (i = 0; i < m; i++)
        reason[off++] = ts[i] == '\n' ? '|' : (ts[i] == '\r' ? ' ' : ts[i]);
      reason[off] = '\0';
    }
  }
  acp_json_writer_reset(c->w);
  acp_json_write_obj_begin(c->w);
  ACP__W_KEYL(c->w, "component");
  acp_json_write_uint(c->w, k->link);
  append_json_str(c->w, "name", k->name, strlen(k->name));
  append_json_str(c->w, "command", k->cmdline, strlen(k->cmdline));
  ACP__W_KEYL(c->w, "exitStatus");
  if (why == NULL && k->sig == 0)
    acp_json_write_int(c->w, k->status);
  else
    acp_json_write_null(c->w);
  ACP__W_KEYL(c->w, "signal");
  if (why == NULL && k->sig != 0) {
    acp_json_write_int(c->w, k->sig);
  } else {
    acp_json_write_null(c->w);
  }
  tn = k->tail_len ? tail_lines(k->tail, k->tail_len, DATA_STDERR, &ts) : 0;
  append_json_str(c->w, "stderr", ts ? ts : "", tn);
  acp_json_write_obj_end(c->w);
  data = acp_json_writer_data(c->w, &dlen);
  if (acp_json_writer_error(c->w) != 0)
    data = NULL, dlen = 0;
  log_line(c, "[conductor] %s\n", reason);
  c->reading = k->link;
  if (acp_router_link_closed(c->r, k->link, reason, data, dlen) ==
      ACP_ERR_NOMEM) {
    c->fatal = ACP_ERR_NOMEM;
  }
  c->reading = 0;
  if (bridge_on(c) && k->link != c->n) {
    /* The servers it offered are gone with it: their bridged calls are
     * answered, their connections closed, their tokens revoked. */
    const char *id;
    size_t x, len;
    for (x = 0; (id = acp_router_mcp_server(c->r, k->link, x, &len)) != NULL;
         x++)
      (void)acp_mcp_bridge_server_gone(c->br, id, len, reason);
  }
  flush_all(c);
  if (k->p != NULL) {
    int pid = acp_uv_process_pid(k->p);
    if (pid > 0)
      (void)kill(-pid, SIGKILL); /* orphans left in its group */
    acp_uv_process_close(k->p, NULL);
    k->p = NULL;
    k->l = NULL;
  } else if (k->l != NULL) {
    acp_uv_link_close(k->l, 0, NULL, NULL); /* a remote component */
    k->l = NULL;
  }
  if (c->shutting)
    return;
  {
    bool is_agent = c->o->mode == ACP_ROUTER_MODE_AGENT && k->link == c->n;
    acp_conductor_on_crash pol = c->o->on_crash;
    if (c->fatal) {
      c->exit_status = 1;
      start_shutdown(c);
    } else if (is_agent || pol == ACP_CONDUCTOR_ON_CRASH_FAIL) {
      fail_chain(c);
    } else if (pol == ACP_CONDUCTOR_ON_CRASH_BYPASS) {
      log_line(c, "[conductor] bypassing component %zu '%s'\n", k->link,
               k->name);
      if (acp_router_link_bypass(c->r, k->link) != 0)
        fail_chain(c); /* not closed in the router: cannot route around */
      else
        flush_all(c);
    } else if (k->restarts >= c->o->max_restarts) {
      log_line(c, "[conductor] component %zu '%s' restarted too often\n",
               k->link, k->name);
      fail_chain(c);
    } else {
      k->restarts++;
      log_line(c, "[conductor] restarting component %zu '%s'\n", k->link,
               k->name);
      if (spawn_comp(c, k) == 0) {
        int rc = acp_router_link_restart(c->r, k->link);
        if (rc == ACP_ERR_NOMEM) {
          cond_fatal(c, rc, "cannot restart");
        } else if (rc != 0) {
          /* No room to re-initialize it (max_pending, output cap): the
           * chain cannot go on with this component. */
          log_line(c, "[conductor] cannot restart component %zu '%s': %s\n",
                   k->link, k->name, acp_strerror(rc));
          fail_chain(c);
        } else {
          flush_all(c);
        }
      }
    }
  }
}

/* The chain failed: take no new input, let the answers the router just
 * gave travel back (requests pending through the other hops), then shut
 * down once nothing is in flight or after the stdin grace. */
static void fail_chain(cond *c) {
  c->exit_status = 1;
  if (c->shutting || c->draining)
    return;
  c->draining = true;
  if (c->up != NULL)
    acp_uv_link_read_stop(c->up);
  uv_timer_start(&c->drain_timer, on_drain_timer, c->o->stdin_grace, 0);
}

static void on_eof_timer(uv_timer_t *t) {
  comp *k = t->data;
  report_dead(k->c, k, NULL);
}

static void on_comp_exit(acp_uv_process *p, int64_t status, int sig, void *ud) {
  comp *k = ud;
  const char *t;
  size_t n;

  if (p != k->p)
    return;
  k->exited = true;
  k->status = status;
  k->sig = sig;
  t = acp_uv_process_tail(p, &n);
  acp__free(k->c->mem, k->tail);
  k->tail = NULL;
  k->tail_len = 0;
  if (t != NULL && n > 0 && (k->tail = acp__malloc(k->c->mem, n)) != NULL) {
    memcpy(k->tail, t, n);
    k->tail_len = n;
  }
  if (k->c->shutting || k->shut) {
    k->running = false;
    return;
  }
  if (k->out_eof)
    report_dead(k->c, k, NULL);
  else
    uv_timer_start(&k->eof_timer, on_eof_timer, EOF_WAIT_MS, 0);
}

static void on_comp_read(acp_uv_link *l, int status, const char *data,
                         size_t len, void *ud) {
  comp *k = ud;
  cond *c = k->c;
  if (l != k->l)
    return;
  if (status < 0) {
    k->out_eof = true;
    if (k->p == NULL && !c->shutting && !k->shut) {
      /* A remote component: the end of its connection is its death. */
      char why[160];
      snprintf(why, sizeof(why), "closed the connection (%s)",
               status == UV_EOF ? "end of stream" : uv_strerror(status));
      report_dead(c, k, why);
    } else if (k->exited && !c->shutting && !k->shut) {
      report_dead(c, k, NULL);
    }
    return;
  }
  dbg_write(k->dbg_out, data, len);
  c->reading = k->link;
  frame(c, &k->fr, &k->fr_kept, k->link, data, len,
        data == k->fr_lent && data != NULL);
  k->fr_lent = NULL;
  flush_all(c);
  c->reading = 0;
}

static void on_comp_stderr(acp_uv_process *p, const char *line, size_t len,
                           void *ud) {
  comp *k = ud;
  (void)p;
  if (k->dbg_err != NULL) {
    fwrite(line, 1, len, k->dbg_err);
    fputc('\n', k->dbg_err);
    fflush(k->dbg_err);
  }
  if (k->c->o->passthrough) {
    char buf[4096];
    size_t nl = strlen(k->name);
    if (nl + len + 4 <= sizeof(buf)) {
      buf[0] = '[';
      memcpy(buf + 1, k->name, nl);
      buf[nl + 1] = ']';
      buf[nl + 2] = ' ';
      memcpy(buf + nl + 3, line, len);
      buf[nl + 3 + len] = '\n';
      if (write(2, buf, nl + 4 + len) < 0) {
        /* nothing to do */
      }
    } else {
      fprintf(stderr, "[%s] %.*s\n", k->name, (int)len, line);
    }
  }
}

/* MARK: - Spawning */

static int spawn_comp(cond *c, comp *k) {
  acp_uv_process_options *po = NULL;
  int rc, uverr = 0;
  size_t i;
  char why[256];

  k->exited = k->out_eof = k->reported = k->shut = false;
  k->status = 0;
  k->sig = 0;
  fr_give_back(c, &k->fr, &k->fr_kept); /* a new process: a new stream */
  acp_ndjson_init(&k->fr, c->o->max_line, c->mem);
  if (is_url_comp(k->spec)) {
    /* A remote peer: a link from the connector, no process. */
    if (c->o->connect == NULL) {
      snprintf(why, sizeof(why),
               "could not be started: no connector for URL components");
      rc = ACP_ERR_UNSUPPORTED;
      goto fail_why;
    }
    rc = c->o->connect(&c->loop, k->spec->argv[0], &k->l, c->o->connect_ud);
    if (rc != 0 || k->l == NULL) {
      snprintf(why, sizeof(why), "could not be connected: %s",
               acp_strerror(rc ? rc : ACP_ERR_SYSTEM));
      k->l = NULL;
      goto fail_why;
    }
    acp_uv_link_set_spare_max(k->l, SPARE_MAX_COND);
    k->running = true;
    if ((rc = acp__uv_link_read_start_buf(k->l, on_comp_read, comp_read_buf,
                                          k)) < 0) {
      snprintf(why, sizeof(why), "could not be read: %s", acp_strerror(rc));
      goto fail_why;
    }
    return 0;
  }
  if ((rc = acp_uv_process_options_new(&po, c->mem)) < 0)
    goto fail;
  if ((rc = acp_uv_process_options_set_argv(
           po, (const char *const *)k->spec->argv)) < 0)
    goto fail;
  for (i = 0; i < k->spec->nenv; i++)
    if ((rc = acp_uv_process_options_add_env(po, k->spec->env[i])) < 0)
      goto fail;
  acp_uv_process_options_set_stderr(po, ACP_UV_STDERR_CAPTURE);
  acp_uv_process_options_set_exit_cb(po, on_comp_exit);
  acp_uv_process_options_set_line_cb(po, on_comp_stderr);
  acp_uv_process_options_set_grace(po, c->o->stdin_grace, c->o->term_grace);
  rc = acp_uv_process_spawn(&k->p, &c->loop, po, k, c->mem, &uverr);
  acp_uv_process_options_free(po);
  po = NULL;
  if (rc < 0)
    goto fail;
  k->l = acp_uv_process_link(k->p);
  /* Many links each keeping a 1 MiB write buffer would hold the memory
   * the target for a conductor under load does not allow. */
  acp_uv_link_set_spare_max(k->l, SPARE_MAX_COND);
  k->running = true;
  if ((rc = acp__uv_link_read_start_buf(k->l, on_comp_read, comp_read_buf, k)) <
      0)
    goto fail;
  return 0;
fail:
  acp_uv_process_options_free(po);
  if (uverr != 0)
    snprintf(why, sizeof(why), "could not be started: %s", uv_strerror(uverr));
  else
    snprintf(why, sizeof(why), "could not be started: %s", acp_strerror(rc));
fail_why:
  if (k->p != NULL) {
    acp_uv_process_close(k->p, NULL);
    k->p = NULL;
    k->l = NULL;
  } else if (k->l != NULL) {
    acp_uv_link_close(k->l, 0, NULL, NULL);
    k->l = NULL;
  }
  k->running = false;
  k->reported = false;
  /* Reported like a death (policies apply; restart counts it). */
  if (k->restarts < c->o->max_restarts ||
      c->o->on_crash != ACP_CONDUCTOR_ON_CRASH_RESTART)
    report_dead(c, k, why);
  else {
    k->reported = true;
    fail_chain(c);
  }
  return rc < 0 ? rc : ACP_ERR_SYSTEM;
}

static void spawn_all(cond *c) {
  size_t i;
  c->started = true;
  for (i = 0; i < c->n && !c->shutting; i++)
    if (!c->comps[i].running && !c->comps[i].reported)
      (void)spawn_comp(c, &c->comps[i]);
}

/* MARK: - Shutdown */

static void on_drain_timer(uv_timer_t *t) {
  start_shutdown(t->data);
}

static void finish(cond *c);

static void shut_next(cond *c);

static void on_comp_shut(acp_uv_process *p, void *ud) {
  comp *k = ud;
  (void)p;
  k->running = false;
  shut_next(k->c);
}

static void shut_next(cond *c) {
  while (c->next_shut < c->n) {
    comp *k = &c->comps[c->next_shut++];
    if (k->p != NULL && !k->exited) {
      k->shut = true;
      if (acp_uv_process_shutdown(k->p, on_comp_shut) == 0)
        return;
    } else if (k->p == NULL && k->l != NULL) {
      /* A remote component: its connection ends (flushing what is
       * queued for up to the stdin grace); the server stops its agent. */
      k->shut = true;
      k->running = false;
      acp_uv_link_close(k->l, c->o->stdin_grace, NULL, NULL);
      k->l = NULL;
    }
  }
  finish(c);
}

static void start_shutdown(cond *c) {
  if (c->shutting)
    return;
  c->shutting = true;
  uv_timer_stop(&c->drain_timer);
  if (c->up != NULL)
    acp_uv_link_read_stop(c->up);
  shut_next(c);
}

static void finish(cond *c) {
  size_t i;
  if (c->finished)
    return;
  c->finished = true;
  flush_all(c);
  for (i = 0; i < c->n; i++) {
    comp *k = &c->comps[i];
    uv_timer_stop(&k->eof_timer);
    if (k->p != NULL) {
      acp_uv_process_close(k->p, NULL);
      k->p = NULL;
      k->l = NULL;
    } else if (k->l != NULL) {
      acp_uv_link_close(k->l, 0, NULL, NULL);
      k->l = NULL;
    }
    k->running = false;
  }
  br_close_all(c);
  if (c->up != NULL) {
    acp_uv_link_close(c->up, 2000, NULL, NULL);
    c->up = NULL;
  }
  if (c->sig != NULL) {
    acp_uv_signals_close(c->sig);
    c->sig = NULL;
  }
}

static void on_signal(acp_uv_signals *s, int signum, void *ud) {
  cond *c = ud;
  size_t i;
  (void)s;
  (void)signum;
  if (++c->signals == 1) {
    start_shutdown(c);
    return;
  }
  for (i = 0; i < c->n; i++)
    if (c->comps[i].p != NULL)
      (void)acp_uv_process_kill(c->comps[i].p, SIGKILL);
}

/* MARK: - Run */

int acp_conductor_run(const acp_conductor_options *o, int in_fd, int out_fd,
                      int *exit_status) {
  cond *c;
  acp_router_options *ro = NULL;
  size_t i;
  int rc;

  if (o == NULL || exit_status == NULL ||
      (o->mode == ACP_ROUTER_MODE_AGENT && o->ncomps == 0))
    return ACP_ERR_INVALID_ARGUMENT;
  *exit_status = 1;
  (void)acp_uv_ignore_sigpipe();
  c = acp__calloc(&o->mem, 1, sizeof(*c));
  if (c == NULL)
    return ACP_ERR_NOMEM;
  c->o = o;
  c->mem = &o->mem;
  c->n = o->ncomps;
  c->t0 = uv_hrtime();
  c->tr_ans_link = -1;
  acp_ndjson_init(&c->upfr, o->max_line, c->mem);
  if (uv_loop_init(&c->loop) != 0) {
    acp__free(c->mem, c);
    return ACP_ERR_SYSTEM;
  }
  uv_timer_init(&c->loop, &c->drain_timer);
  c->drain_timer.data = c;
  c->comps = acp__calloc(c->mem, c->n ? c->n : 1, sizeof(*c->comps));
  rc = c->comps ? 0 : ACP_ERR_NOMEM;
  for (i = 0; rc == 0 && i < c->n; i++) {
    comp *k = &c->comps[i];
    k->c = c;
    k->link = i + 1;
    k->spec = &o->comps[i];
    acp_ndjson_init(&k->fr, o->max_line, c->mem);
    uv_timer_init(&c->loop, &k->eof_timer);
    k->eof_timer.data = k;
    k->name = acp__strdup(c->mem,
                          k->spec->name ? k->spec->name : derive_name(k->spec));
    k->cmdline = join_cmdline(c->mem, k->spec);
    if (k->name == NULL || k->cmdline == NULL)
      rc = ACP_ERR_NOMEM;
  }
  if (rc == 0)
    rc = acp_json_writer_new(&c->w, 0, c->mem);
  acp__buf_init(&c->br_trace_from, c->mem, 0);
  if (rc == 0 && o->trace_path != NULL &&
      (c->trace = fopen(o->trace_path, "w")) == NULL)
    rc = ACP_ERR_SYSTEM;
  if (rc == 0)
    rc = br_setup(c);
  if (rc == 0 && o->debug_dir != NULL) {
    if (mkdir(o->debug_dir, 0777) != 0 && errno != EEXIST)
      rc = ACP_ERR_SYSTEM;
    c->dbg_up_in = open_dbg(c, 0, link_name(c, 0), "in");
    c->dbg_up_out = open_dbg(c, 0, link_name(c, 0), "out");
    for (i = 0; rc == 0 && i < c->n; i++) {
      comp *k = &c->comps[i];
      k->dbg_in = open_dbg(c, k->link, k->name, "stdin");
      k->dbg_out = open_dbg(c, k->link, k->name, "stdout");
      k->dbg_err = open_dbg(c, k->link, k->name, "stderr");
    }
  }
  if (rc == 0)
    rc = acp_router_options_new(&ro);
  if (rc == 0) {
    acp_router_options_set_mode(ro, o->mode);
    acp_router_options_set_proxy_methods(ro, o->pm);
    acp_router_options_set_trace_cb(ro,
                                    c->trace || o->debug_dir ? on_trace : NULL);
    acp_router_options_set_event_cb(ro, on_event);
    rc = acp_router_new(&c->r, c->n, ro, c, c->mem);
  }
  acp_router_options_free(ro);
  if (rc == 0)
    rc = acp_uv_link_new_fds(&c->up, &c->loop, in_fd, out_fd, c->mem);
  if (rc == 0) {
    acp_uv_link_set_spare_max(c->up, SPARE_MAX_COND);
    rc = acp__uv_link_read_start_buf(c->up, on_up_read, up_read_buf, c);
  }
  if (rc == 0)
    rc = acp_uv_signals_new(&c->sig, &c->loop, on_signal, c, c->mem);
  if (rc == 0) {
    uv_run(&c->loop, UV_RUN_DEFAULT);
    *exit_status = c->exit_status;
  } else {
    c->shutting = true;
    finish(c);
    uv_run(&c->loop, UV_RUN_DEFAULT);
  }
  for (i = 0; i < c->n; i++)
    uv_close((uv_handle_t *)&c->comps[i].eof_timer, NULL);
  uv_close((uv_handle_t *)&c->drain_timer, NULL);
  uv_run(&c->loop, UV_RUN_DEFAULT);
  (void)uv_loop_close(&c->loop);
  for (i = 0; c->comps != NULL && i < c->n; i++) {
    comp *k = &c->comps[i];
    acp_ndjson_dispose(&k->fr);
    acp__free(c->mem, k->name);
    acp__free(c->mem, k->cmdline);
    acp__free(c->mem, k->tail);
    if (k->dbg_in)
      fclose(k->dbg_in);
    if (k->dbg_out)
      fclose(k->dbg_out);
    if (k->dbg_err)
      fclose(k->dbg_err);
  }
  if (c->dbg_up_in)
    fclose(c->dbg_up_in);
  if (c->dbg_up_out)
    fclose(c->dbg_up_out);
  if (c->trace)
    fclose(c->trace);
  if (c->dbg_bridge)
    fclose(c->dbg_bridge);
  acp_ndjson_dispose(&c->upfr);
  br_free_all(c);
  acp_json_writer_free(c->w);
  acp_router_free(c->r);
  acp__free(c->mem, c->comps);
  acp__free(c->mem, c);
  return rc;
}
