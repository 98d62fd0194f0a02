/*
 * The line editor of `acp client` (see client_tty.h). libedit runs in its
 * unbuffered mode: each readable event on stdin feeds it one key, so the
 * libuv loop keeps serving the agent while the user types. Switching
 * unbuffered mode on prints the prompt and puts the terminal in raw mode;
 * switching it off restores the terminal, which is how a line ends, how a
 * Ctrl-C clears it and how output gets printed under a prompt.
 */
#include "client_tty.h"

#ifdef ACP_HAVE_LIBEDIT

#include <errno.h>
#include <histedit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wchar.h>

struct ctty {
  uv_loop_t *loop;
  uv_poll_t poll;
  uv_timer_t redraw; /* brings the prompt back after ctty_hide() */
  uv_signal_t winch; /* the terminal's new size (libedit's own handler is
                        off: signals belong to the loop) */
  EditLine *el;
  History *hist;
  char *history_path;
  ctty_line_fn fn;
  void *ud;
  char *prompt;
  char *cont; /* continued lines so far, '\n'-joined */
  size_t cont_len;
  char *saved; /* the partial line while hidden */
  char **cmds; /* completion names */
  size_t ncmds;
  bool reading; /* a ctty_read() is in progress */
  bool shown;   /* libedit is in unbuffered mode (prompt on screen) */
  int closing;
};

/* libedit asks for the prompt through a function; there is one editor. */
static ctty *the_tty;

bool ctty_available(void) {
  return true;
}

static char *prompt_fn(EditLine *el) {
  (void)el;
  if (the_tty == NULL)
    return "";
  if (the_tty->cont_len > 0 || the_tty->cont != NULL)
    return "... ";
  return the_tty->prompt ? the_tty->prompt : "";
}

/* Tab at the start of the line: complete "/na" to a command name, list the
 * candidates when there are several. */
static unsigned char complete_fn(EditLine *el, int ch) {
  const LineInfo *li = el_line(el);
  ctty *t = the_tty;
  size_t len = (size_t)(li->cursor - li->buffer);
  const char *word = li->buffer + 1;
  size_t wl, i, nmatch = 0, common = 0;
  const char *first = NULL;

  (void)ch;
  if (t == NULL || len == 0 || li->buffer[0] != '/' ||
      memchr(li->buffer, ' ', len) != NULL)
    return CC_ERROR;
  wl = len - 1;
  for (i = 0; i < t->ncmds; i++) {
    const char *c = t->cmds[i];
    size_t k;
    if (strncmp(c, word, wl) != 0)
      continue;
    if (first == NULL) {
      first = c;
      common = strlen(c);
    } else {
      for (k = 0; k < common && c[k] == first[k]; k++)
        ;
      common = k;
    }
    nmatch++;
  }
  if (nmatch == 0)
    return CC_ERROR;
  if (common > wl) {
    char buf[256];
    snprintf(buf, sizeof(buf), "%.*s%s", (int)(common - wl), first + wl,
             nmatch == 1 ? " " : "");
    el_insertstr(el, buf);
    return CC_REFRESH;
  }
  if (nmatch == 1) {
    el_insertstr(el, " ");
    return CC_REFRESH;
  }
  fputc('\n', stdout);
  for (i = 0; i < t->ncmds; i++)
    if (strncmp(t->cmds[i], word, wl) == 0)
      printf("/%s  ", t->cmds[i]);
  fputc('\n', stdout);
  fflush(stdout);
  return CC_REDISPLAY;
}

static void on_readable(uv_poll_t *p, int status, int events);

static void show(ctty *t) {
  if (t->shown || !t->reading || t->closing)
    return;
  t->shown = true;
  el_set(t->el, EL_UNBUFFERED, 1); /* prints the prompt */
  if (t->saved != NULL) {
    el_insertstr(t->el, t->saved);
    free(t->saved);
    t->saved = NULL;
    el_set(t->el, EL_REFRESH);
  }
  uv_poll_start(&t->poll, UV_READABLE, on_readable);
}

static void unshow(ctty *t) {
  if (!t->shown)
    return;
  t->shown = false;
  uv_poll_stop(&t->poll);
  el_set(t->el, EL_UNBUFFERED, 0); /* the terminal back to normal */
}

static void history_add(ctty *t, const char *line) {
  HistEvent ev;

  if (line[0] == '\0')
    return;
  history(t->hist, &ev, H_ENTER, line);
  if (t->history_path != NULL)
    history(t->hist, &ev, H_SAVE, t->history_path);
}

static void on_readable(uv_poll_t *p, int status, int events) {
  ctty *t = p->data;
  const char *buf;
  int n = 0;
  char *line, *joined;
  size_t len;

  (void)events;
  if (status < 0 || !t->shown)
    return;
  errno = 0;
  buf = el_gets(t->el, &n);
  /* In unbuffered mode libedit reports Ctrl-D on an empty line as a line
   * holding only ^D. */
  if (buf != NULL && n == 1 && buf[0] == '\004') {
    buf = NULL;
    n = 0;
  }
  if (buf == NULL) {
    /* libedit answers an edit that leaves the line empty (e.g. Ctrl-U) with
     * NULL and -1 but no errno; NULL and 0 is the end of input (Ctrl-D on
     * an empty line, or stdin closed); -1 with errno a read error. */
    if (n == -1 && (errno == 0 || errno == EINTR || errno == EAGAIN))
      return;
    unshow(t);
    t->reading = false;
    fputc('\n', stdout);
    fflush(stdout);
    t->fn(t->ud, NULL, 0);
    return;
  }
  if (n <= 0)
    return;
  if (buf[n - 1] != '\n' && buf[n - 1] != '\r')
    return; /* an editing key: the line goes on */
  line = strndup(buf, (size_t)n - 1);
  unshow(t);
  if (line == NULL)
    return;
  len = strlen(line);
  if (len > 0 && line[len - 1] == '\\') {
    /* Continued: keep it, prompt with "... ". */
    char *nb = realloc(t->cont, t->cont_len + len + 1);
    if (nb != NULL) {
      memcpy(nb + t->cont_len, line, len - 1);
      nb[t->cont_len + len - 1] = '\n';
      t->cont = nb;
      t->cont_len += len;
    }
    free(line);
    show(t);
    return;
  }
  joined = malloc(t->cont_len + len + 1);
  if (joined != NULL) {
    if (t->cont_len > 0)
      memcpy(joined, t->cont, t->cont_len);
    memcpy(joined + t->cont_len, line, len + 1);
    len += t->cont_len;
  }
  free(line);
  free(t->cont);
  t->cont = NULL;
  t->cont_len = 0;
  t->reading = false;
  if (joined == NULL)
    return;
  history_add(t, joined);
  t->fn(t->ud, joined, len);
  free(joined);
}

static void on_winch(uv_signal_t *sig, int signum) {
  ctty *t = sig->data;

  (void)signum;
  el_resize(t->el);
}

static void on_redraw(uv_timer_t *tm) {
  ctty *t = tm->data;

  if (t->reading && !t->shown) {
    show(t);
  }
}

/* mkdir -p of the history file's directory. */
static void make_dirs(const char *path) {
  char *d = strdup(path);
  char *s;

  if (d == NULL)
    return;
  for (s = d + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      if (mkdir(d, 0700) != 0 && errno != EEXIST)
        break;
      *s = '/';
    }
  free(d);
}

int ctty_new(ctty **out, uv_loop_t *loop, const char *history_path,
             ctty_line_fn fn, void *ud) {
  ctty *t;
  HistEvent ev;

  *out = NULL;
  if (the_tty != NULL || !isatty(0) || !isatty(1))
    return -1;
  t = calloc(1, sizeof(*t));
  if (t == NULL)
    return -1;
  t->loop = loop;
  t->fn = fn;
  t->ud = ud;
  t->hist = history_init();
  t->el = el_init("acp", stdin, stdout, stderr);
  if (t->hist == NULL || t->el == NULL ||
      uv_poll_init(loop, &t->poll, 0) != 0) {
    if (t->el)
      el_end(t->el);
    if (t->hist)
      history_end(t->hist);
    free(t);
    return -1;
  }
  t->poll.data = t;
  uv_timer_init(loop, &t->redraw);
  t->redraw.data = t;
  uv_signal_init(loop, &t->winch);
  t->winch.data = t;
  uv_signal_start(&t->winch, on_winch, SIGWINCH);
  history(t->hist, &ev, H_SETSIZE, 1000);
  history(t->hist, &ev, H_SETUNIQUE, 1);
  if (history_path != NULL && (t->history_path = strdup(history_path))) {
    make_dirs(t->history_path);
    history(t->hist, &ev, H_LOAD, t->history_path);
  }
  el_set(t->el, EL_EDITOR, "emacs");
  el_set(t->el, EL_SIGNAL, 0); /* SIGINT belongs to the client's loop */
  el_set(t->el, EL_PROMPT, prompt_fn);
  el_set(t->el, EL_HIST, history, t->hist);
  /* The wide form: libedit keeps these pointers, where the narrow one
   * makes copies it never frees. */
  el_wset(t->el, EL_ADDFN, L"acp-complete", L"complete a command name",
          complete_fn);
  el_set(t->el, EL_BIND, "^I", "acp-complete", NULL);
  el_source(t->el, NULL); /* the user's ~/.editrc */
  the_tty = t;
  *out = t;
  return 0;
}

void ctty_read(ctty *t, const char *prompt) {
  char *p;

  if (t == NULL || t->closing)
    return;
  if (t->reading && t->shown && t->prompt && strcmp(prompt, t->prompt) == 0)
    return;
  p = strdup(prompt);
  if (p != NULL) {
    free(t->prompt);
    t->prompt = p;
  }
  unshow(t);
  t->reading = true;
  show(t);
}

void ctty_stop(ctty *t) {
  if (t == NULL)
    return;
  unshow(t);
  t->reading = false;
  uv_timer_stop(&t->redraw);
}

bool ctty_reading(const ctty *t) {
  return t != NULL && t->reading;
}

void ctty_interrupt(ctty *t) {
  if (t == NULL || !t->reading)
    return;
  unshow(t);
  free(t->saved);
  t->saved = NULL;
  free(t->cont);
  t->cont = NULL;
  t->cont_len = 0;
  fputs("^C\n", stdout);
  fflush(stdout);
  show(t);
}

void ctty_hide(ctty *t) {
  const LineInfo *li;

  if (t == NULL || !t->shown)
    return;
  li = el_line(t->el);
  free(t->saved);
  t->saved = li->lastchar > li->buffer
                 ? strndup(li->buffer, (size_t)(li->lastchar - li->buffer))
                 : NULL;
  unshow(t);
  /* Erase the prompt line; the output takes its place. */
  fputs("\r\033[K", stdout);
  fflush(stdout);
  uv_timer_start(&t->redraw, on_redraw, 0, 0);
}

void ctty_set_commands(ctty *t, const char *const *names, size_t n) {
  size_t i;
  char **c;

  if (t == NULL)
    return;
  c = calloc(n + 1, sizeof(*c));
  if (c == NULL)
    return;
  for (i = 0; i < n; i++)
    if ((c[i] = strdup(names[i])) == NULL)
      break;
  n = i;
  for (i = 0; i < t->ncmds; i++)
    free(t->cmds[i]);
  free(t->cmds);
  t->cmds = c;
  t->ncmds = n;
}

static void closed(uv_handle_t *h) {
  ctty *t = h->data;
  size_t i;

  if (--t->closing > 1)
    return;
  for (i = 0; i < t->ncmds; i++)
    free(t->cmds[i]);
  free(t->cmds);
  free(t->prompt);
  free(t->cont);
  free(t->saved);
  free(t->history_path);
  free(t);
}

void ctty_free(ctty *t) {
  if (t == NULL || t->closing)
    return;
  ctty_stop(t);
  el_end(t->el);
  history_end(t->hist);
  if (the_tty == t)
    the_tty = NULL;
  t->closing = 4; /* three handles to close; 1 means done */
  uv_close((uv_handle_t *)&t->poll, closed);
  uv_close((uv_handle_t *)&t->redraw, closed);
  uv_close((uv_handle_t *)&t->winch, closed);
}

#else /* !ACP_HAVE_LIBEDIT */

bool ctty_available(void) {
  return false;
}
int ctty_new(ctty **out, uv_loop_t *loop, const char *history_path,
             ctty_line_fn fn, void *ud) {
  (void)loop;
  (void)history_path;
  (void)fn;
  (void)ud;
  *out = NULL;
  return -1;
}
void ctty_read(ctty *t, const char *prompt) {
  (void)t;
  (void)prompt;
}
void ctty_stop(ctty *t) {
  (void)t;
}
bool ctty_reading(const ctty *t) {
  (void)t;
  return false;
}
void ctty_interrupt(ctty *t) {
  (void)t;
}
void ctty_hide(ctty *t) {
  (void)t;
}
void ctty_set_commands(ctty *t, const char *const *names, size_t n) {
  (void)t;
  (void)names;
  (void)n;
}
void ctty_free(ctty *t) {
  (void)t;
}

#endif
