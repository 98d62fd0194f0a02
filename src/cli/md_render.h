/*
 * Markdown-ish rendering of streamed agent text for a terminal (acp client):
 * headings bold, `inline code` and fenced code blocks coloured, bullet
 * list markers as a bullet, **bold** and *emphasis*. A state machine fed
 * chunk by chunk: a marker split over two chunks renders as if it came in
 * one (the few bytes that cannot be decided yet are held back until the
 * next chunk or md_flush()). Everything else is written unchanged.
 */
#ifndef ACP_CLI_MD_RENDER_H
#define ACP_CLI_MD_RENDER_H

#include <stdbool.h>
#include <stddef.h>

/* Receives rendered bytes (text and SGR escape sequences). */
typedef void (*md_emit_fn)(void *user_data, const char *s, size_t n);

typedef struct md_render {
  md_emit_fn emit;
  void *user_data;
  char pend[16]; /* undecided bytes (a line start, a lone '*') */
  size_t npend;
  bool bol;        /* at the start of a line */
  bool fence;      /* inside a ``` block */
  bool fence_line; /* on a ``` line itself */
  bool heading;    /* on a heading line */
  bool bold, emph, code;
  bool star;         /* a '*' whose meaning depends on the next byte */
  bool code_started; /* the open code span has content (styled) */
  bool styled;       /* some style is on (a reset is owed) */
  char obuf[512];    /* output collected for one emit call */
  size_t nobuf;
} md_render;

/* Start a renderer (at the start of a line, no style). */
void md_init(md_render *r, md_emit_fn emit, void *user_data);

/* Render n bytes of the stream. */
void md_feed(md_render *r, const char *s, size_t n);

/* The stream paused (a note is printed, the turn ended): write the
 * held-back bytes as they are and reset the style. The caller then ends the
 * line if the text did not: the next md_feed() starts a new line. */
void md_flush(md_render *r);

#endif /* ACP_CLI_MD_RENDER_H */
