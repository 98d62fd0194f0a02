/*
 * The reference agent's session files (agent_store.h). POSIX file calls:
 * the CLI is the layer that may do I/O directly.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_store.h"

bool store_id_ok(const char *id, size_t len) {
  size_t i;

  if (id == NULL || len == 0 || len > 128 || id[0] == '.')
    return false;
  for (i = 0; i < len; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
      return false;
  }
  return true;
}

static char *path_of(const char *dir, const char *prefix, const char *id,
                     const char *suffix) {
  size_t n = strlen(dir) + strlen(prefix) + strlen(id) + strlen(suffix) + 2;
  char *p = malloc(n);

  if (p != NULL)
    snprintf(p, n, "%s/%s%s%s", dir, prefix, id, suffix);
  return p;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int store_write(const char *dir, const char *id, const char *const *parts,
                const size_t *lens, size_t n) {
  char *tmp = path_of(dir, ".", id, ".json.tmp");
  char *dst = path_of(dir, "", id, ".json");
  int fd = -1;
  int rv = -1;
  int err = 0;
  size_t i;

  if (tmp == NULL || dst == NULL) {
    err = ENOMEM;
    goto cleanup;
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    err = errno;
    goto cleanup;
  }
  for (i = 0; i < n; i++) {
    if (write_all(fd, parts[i], lens[i]) != 0) {
      err = errno;
      goto cleanup;
    }
  }
  /* Durable before it becomes visible: a crash leaves the old file. */
  if (fsync(fd) != 0 || close(fd) != 0) {
    err = errno;
    fd = -1;
    goto cleanup;
  }
  fd = -1;
  if (rename(tmp, dst) != 0) {
    err = errno;
    goto cleanup;
  }
  rv = 0;
cleanup:
  if (fd >= 0)
    close(fd);
  if (rv != 0 && tmp != NULL)
    unlink(tmp);
  free(tmp);
  free(dst);
  if (rv != 0)
    errno = err;
  return rv;
}

int store_read(const char *dir, const char *id, char **out, size_t *len) {
  char *path = path_of(dir, "", id, ".json");
  FILE *f;
  char *buf = NULL;
  size_t cap = 0;
  size_t used = 0;
  int err = 0;

  *out = NULL;
  *len = 0;
  if (path == NULL) {
    errno = ENOMEM;
    return -1;
  }
  f = fopen(path, "rb");
  free(path);
  if (f == NULL)
    return -1;
  for (;;) {
    size_t got;
    if (cap - used < 4096) {
      char *nb;
      cap = cap ? cap * 2 : 8192;
      nb = realloc(buf, cap + 1);
      if (nb == NULL) {
        err = ENOMEM;
        break;
      }
      buf = nb;
    }
    got = fread(buf + used, 1, cap - used, f);
    used += got;
    if (got == 0) {
      if (ferror(f))
        err = EIO;
      break;
    }
  }
  fclose(f);
  if (err != 0) {
    free(buf);
    errno = err;
    return -1;
  }
  if (buf == NULL) {
    buf = malloc(1);
    if (buf == NULL) {
      errno = ENOMEM;
      return -1;
    }
  }
  buf[used] = '\0';
  *out = buf;
  *len = used;
  return 0;
}

int store_remove(const char *dir, const char *id) {
  char *path = path_of(dir, "", id, ".json");
  int rv;

  if (path == NULL) {
    errno = ENOMEM;
    return -1;
  }
  rv = unlink(path);
  free(path);
  if (rv != 0 && errno == ENOENT)
    rv = 0;
  return rv;
}

static int cmp_str(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

void store_ids_free(char **ids) {
  size_t i;

  for (i = 0; ids != NULL && ids[i] != NULL; i++)
    free(ids[i]);
  free(ids);
}

int store_list(const char *dir, char ***out) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char **ids = NULL;
  size_t n = 0;
  size_t cap = 0;

  *out = NULL;
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    char *id;
    if (len <= 5 || strcmp(e->d_name + len - 5, ".json") != 0 ||
        !store_id_ok(e->d_name, len - 5))
      continue;
    if (n + 1 >= cap) {
      char **nids;
      cap = cap ? cap * 2 : 16;
      nids = realloc(ids, cap * sizeof(*ids));
      if (nids == NULL)
        goto nomem;
      ids = nids;
    }
    id = malloc(len - 4);
    if (id == NULL)
      goto nomem;
    memcpy(id, e->d_name, len - 5);
    id[len - 5] = '\0';
    ids[n++] = id;
    ids[n] = NULL;
  }
  closedir(d);
  if (ids == NULL) {
    ids = calloc(1, sizeof(*ids));
    if (ids == NULL) {
      errno = ENOMEM;
      return -1;
    }
  }
  qsort(ids, n, sizeof(*ids), cmp_str);
  *out = ids;
  return 0;
nomem:
  closedir(d);
  store_ids_free(ids);
  errno = ENOMEM;
  return -1;
}

int store_mkdir(const char *dir) {
  if (mkdir(dir, 0700) == 0 || errno == EEXIST)
    return 0;
  return -1;
}
