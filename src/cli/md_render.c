/*
 * The markdown-ish terminal renderer (see md_render.h).
 *
 * Why a byte-at-a-time state machine: agents stream text in arbitrary
 * pieces, so "**" or "```" may be cut anywhere, and the terminal must not
 * show a marker that a later chunk turns into a style. Only two things are
 * ever held back: the first bytes of a line until its kind is known
 * (heading, fence, bullet, plain) and a single '*' until the next byte says
 * bold, emphasis or a literal star. Styles never cross a line: each line
 * ends with a reset, so a stray marker cannot colour the rest of the turn.
 */
#include "md_render.h"

#include <string.h>

#define SGR_RESET "\033[0m"
#define SGR_BOLD "\033[1m"
#define SGR_DIM "\033[2m"
#define SGR_ITALIC "\033[3m"
#define SGR_CODE "\033[36m"   /* cyan: inline code */
#define SGR_BLOCK "\033[33m"  /* yellow: fenced code */
#define BULLET "\xe2\x80\xa2" /* U+2022 */

enum { L_UNDECIDED, L_PLAIN, L_FENCE, L_CODE, L_HEADING, L_BULLET };

static void flush_out(md_render *r) {
  if (r->nobuf > 0)
    r->emit(r->user_data, r->obuf, r->nobuf);
  r->nobuf = 0;
}

static void out(md_render *r, const char *s, size_t n) {
  while (n > 0) {
    size_t k = sizeof(r->obuf) - r->nobuf;
    if (k == 0) {
      flush_out(r);
      continue;
    }
    if (k > n)
      k = n;
    memcpy(r->obuf + r->nobuf, s, k);
    r->nobuf += k;
    s += k;
    n -= k;
  }
}

static void outz(md_render *r, const char *s) {
  out(r, s, strlen(s));
}

/* Write the escape sequences of the current style (after a reset when a
 * style was on). */
static void restyle(md_render *r) {
  bool any;

  if (r->styled)
    outz(r, SGR_RESET);
  if (r->fence_line) {
    outz(r, SGR_DIM);
    any = true;
  } else if (r->fence) {
    outz(r, SGR_BLOCK);
    any = true;
  } else {
    any = r->heading || r->bold || r->emph || r->code;
    if (r->heading || r->bold)
      outz(r, SGR_BOLD);
    if (r->emph)
      outz(r, SGR_ITALIC);
    if (r->code)
      outz(r, SGR_CODE);
  }
  r->styled = any;
}

void md_init(md_render *r, md_emit_fn emit, void *user_data) {
  memset(r, 0, sizeof(*r));
  r->emit = emit;
  r->user_data = user_data;
  r->bol = true;
}

/* The kind of the line whose first bytes are pend[0..npend), and in *skip
 * how many of them are its marker (dropped or replaced). */
static int line_kind(const md_render *r, size_t *skip) {
  const char *p = r->pend;
  size_t n = r->npend, i = 0, j;

  *skip = 0;
  while (i < n && p[i] == ' ')
    i++;
  if (i == n)
    return n < sizeof(r->pend) - 2 ? L_UNDECIDED : L_PLAIN;
  if (p[i] == '`' && i <= 3) {
    for (j = i; j < n && j < i + 3 && p[j] == '`'; j++)
      ;
    if (j == i + 3)
      return L_FENCE;
    if (j == n)
      return L_UNDECIDED;
  }
  if (r->fence)
    return L_CODE;
  if (p[i] == '#' && i <= 3) {
    for (j = i; j < n && p[j] == '#' && j - i < 6; j++)
      ;
    if (j == n)
      return L_UNDECIDED;
    if (p[j] == ' ') {
      *skip = j + 1;
      return L_HEADING;
    }
    return L_PLAIN;
  }
  if (p[i] == '-' || p[i] == '*' || p[i] == '+') {
    if (i + 1 == n)
      return L_UNDECIDED;
    if (p[i + 1] == ' ') {
      *skip = i + 1; /* the marker; its space stays */
      return L_BULLET;
    }
  }
  return L_PLAIN;
}

/* A '*' or an opened code span still undecided: literal after all. */
static void settle(md_render *r) {
  if (r->code && !r->code_started)
    out(r, "`", 1);
  r->code = false;
  if (r->star) {
    r->star = false;
    if (r->emph) /* closes the emphasis: the stream ended after it */
      r->emph = false;
    else
      out(r, "*", 1);
  }
}

static void end_line(md_render *r) {
  settle(r);
  if (r->fence_line) {
    r->fence_line = false;
    r->fence = !r->fence;
  }
  r->heading = r->bold = r->emph = r->code = false;
  if (r->styled)
    outz(r, SGR_RESET);
  r->styled = false;
  out(r, "\n", 1);
  r->bol = true;
}

static void inline_byte(md_render *r, char ch) {
  if (r->star) {
    r->star = false;
    if (ch == '*') {
      r->bold = !r->bold;
      restyle(r);
      return;
    }
    if (r->emph) {
      r->emph = false;
      restyle(r);
    } else if (ch != ' ' && ch != '\t' && ch != '\n') {
      r->emph = true;
      restyle(r);
    } else {
      out(r, "*", 1);
    }
  }
  if (ch == '\n') {
    end_line(r);
    return;
  }
  if (r->code) {
    /* The style starts with the first byte of the span, so that an empty
     * span shows as the two backticks it is. */
    if (ch == '`') {
      r->code = false;
      if (r->code_started)
        restyle(r);
      else
        out(r, "``", 2);
      return;
    }
    if (!r->code_started) {
      r->code_started = true;
      restyle(r);
    }
    out(r, &ch, 1);
    return;
  }
  if (ch == '*') {
    r->star = true;
    return;
  }
  if (ch == '`') {
    r->code = true;
    r->code_started = false;
    return;
  }
  out(r, &ch, 1);
}

/* The line's kind is known: render its held-back start. */
static void start_line(md_render *r, int kind, size_t skip) {
  char held[sizeof(r->pend)];
  size_t n = r->npend, i;

  memcpy(held, r->pend, n);
  r->npend = 0;
  r->bol = false;
  switch (kind) {
  case L_FENCE:
    r->fence_line = true;
    restyle(r);
    out(r, held, n);
    return;
  case L_CODE:
    restyle(r);
    out(r, held, n);
    return;
  case L_HEADING:
    r->heading = true;
    restyle(r);
    break;
  case L_BULLET:
    out(r, held, skip - 1); /* the indentation */
    outz(r, BULLET);
    break;
  default:
    skip = 0;
    break;
  }
  for (i = skip; i < n; i++)
    inline_byte(r, held[i]);
}

static void feed_byte(md_render *r, char ch) {
  size_t skip;
  int kind;

  if (!r->bol) {
    if (r->fence || r->fence_line) {
      if (ch == '\n')
        end_line(r);
      else
        out(r, &ch, 1);
      return;
    }
    inline_byte(r, ch);
    return;
  }
  if (ch == '\n') {
    /* A blank (or spaces-only) line. */
    start_line(r, r->fence ? L_CODE : L_PLAIN, 0);
    end_line(r);
    return;
  }
  r->pend[r->npend++] = ch;
  kind = line_kind(r, &skip);
  if (kind != L_UNDECIDED)
    start_line(r, kind, skip);
}

void md_feed(md_render *r, const char *s, size_t n) {
  size_t i;

  for (i = 0; i < n; i++)
    feed_byte(r, s[i]);
  flush_out(r);
}

void md_flush(md_render *r) {
  if (r->bol && r->npend > 0)
    start_line(r, r->fence ? L_CODE : L_PLAIN, 0);
  settle(r);
  r->heading = r->bold = r->emph = r->code = false;
  r->fence = r->fence_line = false;
  if (r->styled)
    outz(r, SGR_RESET);
  r->styled = false;
  /* The caller ends the line (acp client writes a newline before a note
   * or at the end of a turn when the text did not): what comes next
   * starts a line. */
  r->bol = true;
  flush_out(r);
}
