/*
 * `acp mcp login URL` / `acp mcp logout URL`, and the stored tokens the
 * other `acp mcp` client commands and `acp mcp relay` use.
 *
 * login runs the library's OAuth flow (acp_http_oauth_*) for the server:
 * it prints the authorization URL, waits on 127.0.0.1 for the browser's
 * redirect (one loopback listener, the redirect URI
 * http://127.0.0.1:PORT/callback, RFC 8252), and stores what
 * acp_http_oauth_export() gives in a 0600 file under
 * $XDG_CONFIG_HOME/acp/oauth (else ~/.config/acp/oauth, the directory
 * 0700), named after the issuer and the server URL. The state is bound to
 * its issuer: the flow drops it (and registers again) if the server names
 * another authorization server.
 *
 * Before connecting, the client commands look up the server's file: the
 * access token (refreshed with the refresh token when it expires within
 * 30 s, and the file rewritten) goes in the Authorization header, unless
 * the command line gives one. Tokens are never printed.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <dirent.h>

#include "acp/http.h"
#include "cli.h"

#define SUB "mcp"
#define LOGIN_TIMEOUT_S 300
#define MAX_STATE_BYTES (64 << 10)

/* MARK: - The store */

/* The store's file names hash the server's URL (cli_fnv1a()): not a
 * security property (the file's content is checked to be this server's
 * on import). */

/* The store directory, created (0700) when `create`. 0 or -1. */
static int store_dir(char *out, size_t cap, int create) {
  const char *x = getenv("XDG_CONFIG_HOME");
  const char *home = getenv("HOME");
  char base[PATH_MAX];
  int n;
  if (x != NULL && x[0] == '/')
    n = snprintf(base, sizeof(base), "%s/acp", x);
  else if (home != NULL && home[0] == '/')
    n = snprintf(base, sizeof(base), "%s/.config/acp", home);
  else
    return -1;
  if (n < 0 || (size_t)n >= sizeof(base))
    return -1;
  n = snprintf(out, cap, "%s/oauth", base);
  if (n < 0 || (size_t)n >= cap)
    return -1;
  if (create) {
    char parent[PATH_MAX];
    if (x == NULL || x[0] != '/') {
      snprintf(parent, sizeof(parent), "%s/.config", home);
      if (mkdir(parent, 0700) != 0 && errno != EEXIST)
        return -1;
    } else if (mkdir(x, 0700) != 0 && errno != EEXIST)
      return -1;
    if ((mkdir(base, 0700) != 0 && errno != EEXIST) ||
        (mkdir(out, 0700) != 0 && errno != EEXIST))
      return -1;
    if (chmod(out, 0700) != 0)
      return -1;
  }
  return 0;
}

/* Whether a file name of the store belongs to `url`. */
static int name_is_for(const char *name, const char *url) {
  char suffix[40];
  size_t nl = strlen(name), sl;
  snprintf(suffix, sizeof(suffix), "-%016llx.json",
           (unsigned long long)cli_fnv1a(url));
  sl = strlen(suffix);
  return nl == 16 + sl && strcmp(name + 16, suffix) == 0;
}

/* Write the state of `o` (for `url`) to its file, 0600, atomically. */
static int store_save(acp_http_oauth *o, const char *url) {
  char dir[PATH_MAX], path[PATH_MAX + 64], tmp[PATH_MAX + 80];
  char *json = NULL;
  const char *iss = acp_http_oauth_issuer(o);
  size_t len, off = 0;
  int fd, rv = -1;
  if (iss == NULL || store_dir(dir, sizeof(dir), 1) != 0 ||
      acp_http_oauth_export(o, &json) != 0)
    return -1;
  snprintf(path, sizeof(path), "%s/%016llx-%016llx.json", dir,
           (unsigned long long)cli_fnv1a(iss),
           (unsigned long long)cli_fnv1a(url));
  snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid());
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    len = strlen(json);
    while (off < len) {
      ssize_t w = write(fd, json + off, len - off);
      if (w <= 0)
        break;
      off += (size_t)w;
    }
    if (off == len && fchmod(fd, 0600) == 0 && fsync(fd) == 0)
      rv = 0;
    if (close(fd) != 0)
      rv = -1;
    if (rv == 0 && rename(tmp, path) != 0)
      rv = -1;
    if (rv != 0)
      unlink(tmp);
  }
  memset(json, 0, strlen(json));
  free(json);
  if (rv == 0) {
    /* One state per server: drop those of other issuers. */
    DIR *d = opendir(dir);
    struct dirent *e;
    const char *base = strrchr(path, '/') + 1;
    while (d != NULL && (e = readdir(d)) != NULL)
      if (name_is_for(e->d_name, url) && strcmp(e->d_name, base) != 0) {
        char p[PATH_MAX + 300];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        unlink(p);
      }
    if (d != NULL)
      closedir(d);
  }
  return rv;
}

/* Read a file of the store (at most MAX_STATE_BYTES). NULL on error. */
static char *read_small(const char *path, size_t *len) {
  char *buf;
  ssize_t n;
  size_t got = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return NULL;
  buf = malloc(MAX_STATE_BYTES + 1);
  while (buf != NULL && got < MAX_STATE_BYTES &&
         (n = read(fd, buf + got, MAX_STATE_BYTES - got)) > 0)
    got += (size_t)n;
  close(fd);
  if (buf != NULL)
    buf[got] = '\0';
  *len = got;
  return buf;
}

/* An acp_http_oauth for `url` restored from the store, or NULL; *saved
 * gets the stored text (malloc'ed) to tell later whether it changed. */
static acp_http_oauth *store_load(const char *url, char **saved) {
  char dir[PATH_MAX];
  DIR *d;
  struct dirent *e;
  acp_http_oauth *o = NULL;
  *saved = NULL;
  if (store_dir(dir, sizeof(dir), 0) != 0 || (d = opendir(dir)) == NULL)
    return NULL;
  while (o == NULL && (e = readdir(d)) != NULL) {
    char p[PATH_MAX + 300];
    char *json;
    size_t len;
    if (!name_is_for(e->d_name, url))
      continue;
    snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
    if ((json = read_small(p, &len)) == NULL)
      continue;
    if (acp_http_oauth_new(&o, url) == 0 &&
        acp_http_oauth_import(o, json, len) != 0) {
      acp_http_oauth_free(o);
      o = NULL;
    }
    if (o != NULL)
      *saved = json;
    else {
      memset(json, 0, len);
      free(json);
    }
  }
  closedir(d);
  return o;
}

static void wipe_free(char *s) {
  if (s != NULL) {
    memset(s, 0, strlen(s));
    free(s);
  }
}

int cli_mcp_stored_auth(const char *url, char **header) {
  acp_http_oauth *o;
  const char *tok;
  char *saved = NULL, *now = NULL;
  *header = NULL;
  if ((o = store_load(url, &saved)) == NULL)
    return 0;
  /* Refreshed here when it expires within 30 s. */
  tok = acp_http_oauth_token(o);
  if (tok != NULL) {
    if (acp_http_oauth_export(o, &now) == 0 && saved != NULL &&
        strcmp(now, saved) != 0 && store_save(o, url) != 0)
      cli_err(SUB, "cannot update the stored tokens for %s", url);
    if (asprintf(header, "Authorization: Bearer %s", tok) < 0)
      *header = NULL;
  }
  wipe_free(saved);
  wipe_free(now);
  acp_http_oauth_free(o);
  return *header != NULL;
}

/* MARK: - login */

typedef struct login {
  int lfd;
  uint16_t port;
  int timeout_s;
} login;

/* Wait for the browser's GET /callback?... on the listener; answer it and
 * hand back the full redirect URL. */
static int on_open(acp_http_oauth *o, const char *auth_url, char **redirect,
                   void *ud) {
  login *l = ud;
  (void)o;
  fprintf(stderr,
          "acp mcp: open this URL in a browser to authorize:\n%s\n"
          "acp mcp: waiting for the redirect on http://127.0.0.1:%u/callback\n",
          auth_url, (unsigned)l->port);
  fflush(stderr);
  for (;;) {
    struct pollfd p = {l->lfd, POLLIN, 0};
    char req[8192], *sp, *ep;
    size_t got = 0;
    int c, r;
    r = poll(&p, 1, l->timeout_s * 1000);
    if (r == 0) {
      cli_err(SUB, "no redirect within %d s", l->timeout_s);
      return ACP_ERR_TIMEOUT;
    }
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return ACP_ERR_SYSTEM;
    }
    c = accept(l->lfd, NULL, NULL);
    if (c < 0)
      continue;
    {
      struct timeval tv = {10, 0};
      setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    while (got < sizeof(req) - 1) {
      ssize_t n = read(c, req + got, sizeof(req) - 1 - got);
      if (n <= 0)
        break;
      got += (size_t)n;
      req[got] = '\0';
      if (strstr(req, "\r\n\r\n") != NULL)
        break;
    }
    req[got] = '\0';
    sp = strchr(req, ' ');
    ep = sp ? strchr(sp + 1, ' ') : NULL;
    if (strncmp(req, "GET ", 4) != 0 || ep == NULL ||
        strncmp(sp + 1, "/callback?", 10) != 0) {
      static const char nf[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
                               "Connection: close\r\n\r\n";
      (void)!write(c, nf, sizeof(nf) - 1);
      close(c);
      continue;
    }
    {
      static const char okr[] =
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
          "Content-Length: 45\r\nConnection: close\r\n\r\n"
          "acp mcp: authorized; you may close this page\n";
      (void)!write(c, okr, sizeof(okr) - 1);
    }
    close(c);
    *ep = '\0';
    if (asprintf(redirect, "http://127.0.0.1:%u%s", (unsigned)l->port, sp + 1) <
        0)
      return ACP_ERR_NOMEM;
    return 0;
  }
}

static const char login_usage[] =
    "usage: acp mcp login URL [--timeout SECONDS]\n"
    "       acp mcp logout URL\n"
    "\n"
    "login: authorize this user with the MCP server at URL (OAuth 2.1, the\n"
    "server's authorization server found through its metadata): prints the\n"
    "authorization URL to open in a browser, waits (default 300 s) for the\n"
    "redirect on 127.0.0.1, and stores the tokens, readable by this user\n"
    "only, under $XDG_CONFIG_HOME/acp/oauth (else ~/.config/acp/oauth).\n"
    "acp mcp tools|resources|prompts|call|read|get --url URL and acp mcp\n"
    "relay --url URL then send them (refreshed when about to expire) unless\n"
    "--header gives an Authorization. logout: forget them.\n";

int cmd_mcp_login(int argc, char **argv) {
  const char *url = NULL;
  login l = {-1, 0, LOGIN_TIMEOUT_S};
  acp_http_oauth *o = NULL;
  struct sockaddr_in a;
  socklen_t al = sizeof(a);
  char redirect[64];
  int i, ok, rv;
  for (i = 1; i < argc; i++) {
    const char *v;
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(login_usage, stdout);
      return CLI_EXIT_OK;
    } else if ((v = cli_opt_value(argc, argv, &i, "--timeout", &ok)) != NULL) {
      unsigned long long s;

      if (cli_opt_uint(SUB, "--timeout", v, 1, 86400, &s) != 0)
        return CLI_EXIT_USAGE;
      l.timeout_s = (int)s;
    } else if (ok < 0)
      return CLI_EXIT_USAGE;
    else if (argv[i][0] != '-' && url == NULL)
      url = argv[i];
    else {
      cli_err(SUB, "unexpected argument '%s'", argv[i]);
      fputs(login_usage, stderr);
      return CLI_EXIT_USAGE;
    }
  }
  if (url == NULL || acp_http_oauth_new(&o, url) != 0) {
    cli_err(SUB, "login wants the URL of an http(s) MCP server");
    fputs(login_usage, stderr);
    return CLI_EXIT_USAGE;
  }
  /* The loopback listener the browser is sent back to (RFC 8252 7.3). */
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  l.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l.lfd < 0 || bind(l.lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      listen(l.lfd, 4) != 0 ||
      getsockname(l.lfd, (struct sockaddr *)&a, &al) != 0) {
    cli_err(SUB, "cannot listen on 127.0.0.1: %s", strerror(errno));
    if (l.lfd >= 0)
      close(l.lfd);
    acp_http_oauth_free(o);
    return CLI_EXIT_FAILURE;
  }
  l.port = ntohs(a.sin_port);
  snprintf(redirect, sizeof(redirect), "http://127.0.0.1:%u/callback",
           (unsigned)l.port);
  acp_http_oauth_set_redirect_uri(o, redirect);
  acp_http_oauth_set_open_cb(o, on_open, &l);
  /* No challenge in hand: the flow finds the metadata at the well-known
   * URLs and asks for the scopes the server lists. */
  rv = acp_http_oauth_authorize(o, 401, NULL, 0);
  close(l.lfd);
  if (rv != 0) {
    cli_err(SUB, "authorization failed: %s (%s)", acp_strerror(rv),
            acp_http_oauth_error(o));
    acp_http_oauth_free(o);
    return CLI_EXIT_FAILURE;
  }
  if (store_save(o, url) != 0) {
    cli_err(SUB, "cannot store the tokens under the config directory");
    acp_http_oauth_free(o);
    return CLI_EXIT_FAILURE;
  }
  fprintf(stderr, "acp mcp: logged in to %s (issuer %s)\n", url,
          acp_http_oauth_issuer(o));
  acp_http_oauth_free(o);
  return CLI_EXIT_OK;
}

int cmd_mcp_logout(int argc, char **argv) {
  char dir[PATH_MAX];
  DIR *d;
  struct dirent *e;
  int n = 0;
  if (argc == 2 &&
      (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    fputs(login_usage, stdout);
    return CLI_EXIT_OK;
  }
  if (argc != 2 || argv[1][0] == '-') {
    fputs(login_usage, stderr);
    return CLI_EXIT_USAGE;
  }
  if (store_dir(dir, sizeof(dir), 0) == 0 && (d = opendir(dir)) != NULL) {
    while ((e = readdir(d)) != NULL)
      if (name_is_for(e->d_name, argv[1])) {
        char p[PATH_MAX + 300];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (unlink(p) == 0)
          n++;
      }
    closedir(d);
  }
  fprintf(stderr, "acp mcp: %s\n",
          n > 0 ? "logged out; the stored tokens are deleted"
                : "not logged in to this server");
  return CLI_EXIT_OK;
}
