/*
 * The interactive front end of `acp client`: a line editor (libedit) on
 * the terminal, driven by the client's libuv loop. One instance per
 * process (libedit's terminal state is per process anyway).
 *
 * Built without libedit (ACP_HAVE_LIBEDIT undefined) every function is a
 * stub and ctty_new() fails, so the client falls back to reading plain
 * lines.
 */
#ifndef ACP_CLI_CLIENT_TTY_H
#define ACP_CLI_CLIENT_TTY_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

typedef struct ctty ctty;

/* A line the user entered: lines ending in a backslash are joined to the
 * next with '\n' (the backslash dropped). `line` is NUL-terminated and
 * only valid during the call. NULL (len 0) is the end of input (Ctrl-D on
 * an empty line); reading has stopped then. */
typedef void (*ctty_line_fn)(void *ud, const char *line, size_t len);

/* Whether this build has the line editor. */
bool ctty_available(void);

/* A front end on stdin/stdout, idle until ctty_read(). History is loaded
 * from `history_path` (may be NULL: no history file) and saved to it after
 * each line; its directory is created. 0, or -1 (no libedit, not a
 * terminal, out of memory). */
int ctty_new(ctty **out, uv_loop_t *loop, const char *history_path,
             ctty_line_fn fn, void *ud);

/* Show `prompt` (copied) and read one line; the callback gets it. A call
 * while already reading only changes nothing. */
void ctty_read(ctty *t, const char *prompt);

/* Stop reading (the terminal goes back to normal mode). */
void ctty_stop(ctty *t);

/* Whether a ctty_read() is in progress. */
bool ctty_reading(const ctty *t);

/* Ctrl-C at the prompt: drop the line (and any continued lines), print ^C
 * and prompt again. */
void ctty_interrupt(ctty *t);

/* Around output printed while the prompt may be shown: ctty_hide() clears
 * the prompt line; the prompt and the partial line come back by
 * themselves once the loop is idle again. Cheap when not reading. */
void ctty_hide(ctty *t);

/* The names Tab completes at the start of a line (each without the '/';
 * copied). Replaces the previous set. */
void ctty_set_commands(ctty *t, const char *const *names, size_t n);

/* Stop, restore the terminal, close the poll handle (the loop must run
 * once more for it) and free. NULL is a no-op. */
void ctty_free(ctty *t);

#endif /* ACP_CLI_CLIENT_TTY_H */
