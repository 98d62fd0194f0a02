/*
 * A main() for fuzz targets built without libFuzzer: feeds every file named
 * on the command line, and every regular file inside every directory named,
 * to LLVMFuzzerTestOneInput once. Used by the replay_<target> ctests so that
 * the corpus is checked by plain gcc builds too.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  size_t len = 0;
  size_t cap = 0;
  size_t r;

  if (f == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  for (;;) {
    if (len == cap) {
      uint8_t *nb;
      cap = cap ? cap * 2 : 65536;
      nb = realloc(buf, cap);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return -1;
      }
      buf = nb;
    }
    r = fread(buf + len, 1, cap - len, f);
    if (r == 0)
      break;
    len += r;
  }
  fclose(f);
  /* Copy into an exact-size allocation so that ASan catches any read past
   * the end of the input, as libFuzzer would. */
  {
    uint8_t *exact = malloc(len ? len : 1);
    if (exact == NULL) {
      free(buf);
      return -1;
    }
    if (len > 0)
      memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
  }
  return 0;
}

int main(int argc, char **argv) {
  int i;
  int files = 0;
  int errors = 0;

  for (i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "cannot stat %s\n", argv[i]);
      errors++;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      DIR *d = opendir(argv[i]);
      struct dirent *e;
      if (d == NULL) {
        errors++;
        continue;
      }
      while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat fst;
        if (e->d_name[0] == '.')
          continue;
        snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
        if (stat(path, &fst) != 0 || !S_ISREG(fst.st_mode))
          continue;
        if (run_file(path) != 0)
          errors++;
        files++;
      }
      closedir(d);
    } else {
      if (run_file(argv[i]) != 0)
        errors++;
      files++;
    }
  }
  printf("replayed %d inputs, %d errors\n", files, errors);
  return errors ? 1 : 0;
}
