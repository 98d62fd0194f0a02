/* `acp client --agent NAME`: agents from a config file (client_agents.h). */
#include "client_agents.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/json.h"
#include "cli.h"

int client_agents_default_path(char *buf, unsigned n) {
  const char *x = getenv("XDG_CONFIG_HOME");
  const char *home = getenv("HOME");
  int k;

  if (x != NULL && x[0] == '/')
    k = snprintf(buf, n, "%s/acp/agents.json", x);
  else if (home != NULL && home[0] != '\0')
    k = snprintf(buf, n, "%s/.config/acp/agents.json", home);
  else
    return -1;
  return k > 0 && (unsigned)k < n ? 0 : -1;
}

static char *dup_str(acp_json_doc *doc, const acp_json_val *v) {
  const char *s;
  size_t n;

  if (acp_json_type_of(v) != ACP_JSON_STRING ||
      acp_json_doc_str(doc, v, &s, &n) != 0 || memchr(s, '\0', n) != NULL)
    return NULL;
  return strndup(s, n);
}

void client_agents_free_argv(char **argv) {
  size_t i;

  if (argv == NULL)
    return;
  for (i = 0; argv[i] != NULL; i++)
    free(argv[i]);
  free(argv);
}

static char *read_all(const char *file, size_t *len) {
  FILE *f = fopen(file, "rb");
  char *buf = NULL;
  size_t cap = 0, n = 0, r;

  if (f == NULL)
    return NULL;
  for (;;) {
    if (n == cap) {
      char *nb = cap > (16u << 20) ? NULL : realloc(buf, cap ? cap * 2 : 4096);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        errno = ENOMEM;
        return NULL;
      }
      buf = nb;
      cap = cap ? cap * 2 : 4096;
    }
    r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0)
      break;
  }
  fclose(f);
  *len = n;
  return buf;
}

int client_agents_find(const char *file, const char *name, char ***argv_out) {
  acp_json_doc *doc = NULL;
  const acp_json_val *agents, *ag = NULL, *args, *env, *k;
  char **argv = NULL;
  size_t len = 0, n = 0, i;
  char *data;
  int rv = -1;

  *argv_out = NULL;
  data = read_all(file, &len);
  if (data == NULL) {
    cli_err("client", "agents file %s: %s", file, strerror(errno));
    return -1;
  }
  if (acp_json_doc_new(&doc, NULL) != 0 ||
      acp_json_doc_parse(doc, data, len, NULL) != 0) {
    cli_err("client", "agents file %s: not valid JSON", file);
    goto out;
  }
  agents = acp_json_obj_getz(acp_json_doc_root(doc), "agents");
  if (acp_json_type_of(agents) != ACP_JSON_OBJECT) {
    cli_err("client", "agents file %s: no \"agents\" object", file);
    goto out;
  }
  for (k = acp_json_child(agents); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    const char *s;
    size_t sn;
    if (acp_json_doc_str(doc, k, &s, &sn) == 0 && strlen(name) == sn &&
        memcmp(s, name, sn) == 0)
      ag = acp_json_next(k);
  }
  if (ag == NULL) {
    cli_err("client", "agents file %s: no agent named \"%s\"", file, name);
    goto out;
  }
  args = acp_json_obj_getz(ag, "args");
  if (args != NULL && acp_json_type_of(args) != ACP_JSON_ARRAY) {
    cli_err("client", "agent \"%s\": \"args\" must be an array of strings",
            name);
    goto out;
  }
  for (k = acp_json_child(args); k != NULL; k = acp_json_next(k))
    n++;
  argv = calloc(n + 2, sizeof(*argv));
  if (argv == NULL)
    goto out;
  if ((argv[0] = dup_str(doc, acp_json_obj_getz(ag, "command"))) == NULL ||
      argv[0][0] == '\0') {
    cli_err("client", "agent \"%s\": \"command\" must be a non-empty string",
            name);
    goto out;
  }
  for (i = 1, k = acp_json_child(args); k != NULL; k = acp_json_next(k), i++)
    if ((argv[i] = dup_str(doc, k)) == NULL) {
      cli_err("client", "agent \"%s\": \"args\" must be an array of strings",
              name);
      goto out;
    }
  env = acp_json_obj_getz(ag, "env");
  if (env != NULL && acp_json_type_of(env) != ACP_JSON_OBJECT) {
    cli_err("client", "agent \"%s\": \"env\" must be an object of strings",
            name);
    goto out;
  }
  for (k = acp_json_child(env); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    char *key = dup_str(doc, k), *val = dup_str(doc, acp_json_next(k));
    int bad = key == NULL || val == NULL || key[0] == '\0' ||
              strchr(key, '=') != NULL || setenv(key, val, 1) != 0;
    free(key);
    free(val);
    if (bad) {
      cli_err("client", "agent \"%s\": \"env\" must be an object of strings",
              name);
      goto out;
    }
  }
  *argv_out = argv;
  argv = NULL;
  rv = 0;
out:
  client_agents_free_argv(argv);
  acp_json_doc_free(doc);
  free(data);
  return rv;
}
