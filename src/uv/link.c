/*
 * Byte links: a readable side and a writable side, each a libuv stream
 * (pipe, TTY, TCP) or a file descriptor driven by sequential uv_fs
 * requests (regular files, /dev/null), plus backpressure couplings.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uv_internal.h"

#define READ_CHUNK ((size_t)64 << 10)

/* MARK: - Types */

/* SIDE_USER: bytes come from and go to user code (acp_uv_link_new_user()):
 * a message transport such as a WebSocket presents itself as a byte link. */
typedef enum side_kind {
  SIDE_NONE = 0,
  SIDE_STREAM,
  SIDE_FILE,
  SIDE_USER
} side_kind;

typedef struct side {
  side_kind kind;
  bool closed;
  uv_stream_t *stream;
  union {
    uv_pipe_t pipe;
    uv_tty_t tty;
    uv_tcp_t tcp;
  } h;
  int fd;          /* descriptor we own (dup), or -1 */
  int saved_flags; /* file status flags to restore, or -1 */
} side;

typedef struct wreq {
  union {
    uv_write_t w;
    uv_fs_t fs;
  } u;
  struct wreq *next;
  acp_uv_link *link;
  size_t len;
  size_t off;
  size_t cap; /* bytes available in data[] */
  char data[];
} wreq;

/* Write requests above this size are not kept for reuse. */
#define SPARE_MAX ((size_t)16 << 20)

enum { ST_OPEN = 0, ST_FLUSHING = 1, ST_CLOSING = 2 };

struct acp_uv_link {
  acp_mem mem;
  /* One finished write request kept for the next write. Large messages
   * (1 MiB prompts) would otherwise be allocated and freed per write, and
   * glibc serves such sizes with fresh zeroed pages each time: measured,
   * the page faults cost a third of the 1 MiB round trip. */
  wreq *spare;
  size_t spare_max; /* largest request kept for reuse */
  uv_loop_t *loop;
  side rd;
  side wr;
  bool same;               /* rd and wr are one stream (a socket) */
  bool rd_grown, wr_grown; /* grow_pipe() was tried on that side */
  size_t wr_cap;           /* the write pipe's capacity once grown, or 0 */
  int wr_fd; /* direct_fd(): the write pipe's descriptor, -1 none, -2 unset */
  bool wr_fit_refused; /* growing past ACP_UV_PIPE_BIG was refused */
  /* acp__uv_link_block(): a blocking description of the read pipe (or a
   * descriptor of the read socket), -1 not opened yet, -2 unavailable;
   * block_keep, a second descriptor of it, puts it back after a signal
   * handler replaced it (blk_handler()). The watched signals seen by the
   * last check (a bit each), the loop's active handles then, and the
   * count of signals (blk_sigs) when the loop last had control. */
  int block_fd;
  int block_keep;
  uint64_t block_sigs;
  unsigned block_ah;
  long block_mark;
  bool block_main; /* the last check ran on the main thread */
  /* loop_quiet()'s last walk, within one acp__uv_link_block() call: it
   * found the loop quiet with no handle that could start unseen; the
   * loop's newest handle and its active count then. */
  bool walk_ok;
  const void *walk_tail;
  unsigned walk_ah;
  bool block_again; /* quiet but for a signal: check again at once */
  bool block_sock;  /* block_fd is a descriptor of the read socket */
  bool block_on;    /* ... and the socket is blocking now */
  int block_fl;     /* ... its file status flags for the loop */
  /* The spins (MARK: Spinning reads): misses in a row (a spin that found
   * nothing, or found the CPU wanted by another task), and the spins left
   * to skip because of them. */
  uint8_t spin_miss;
  uint8_t spin_skip;
  unsigned long spin_hits, spin_misses, spin_got; /* for tests */
  /* spin_room(): when /proc/loadavg was last read and what it said. */
  bool room_ok;
  uint64_t room_at;
  uv_idle_t kick; /* kick(): the next wait is a poll */

  acp_uv_link_read_cb read_cb;
  acp__uv_link_buf_fn buf_fn; /* lends the buffer of stream reads, or NULL */
  void *read_ud;
  unsigned pause;
  unsigned bp_holds;
  bool reading;
  bool rd_done;
  char *sbuf;

  /* file reads */
  uv_fs_t rfs;
  bool fs_rbusy;
  bool held;
  int held_status;
  size_t held_len;
  char *rbuf;
  uv_idle_t idle;

  /* writes */
  size_t queued;
  size_t nwrites;
  int write_err;
  bool wr_shut_req;
  bool wr_ended;
  wreq *fq_head;
  wreq *fq_tail;
  bool fs_wbusy;
  uv_shutdown_t shreq;

  /* coupling: as destination */
  acp_uv_link *src;
  size_t high;
  size_t low;
  bool holding;
  acp_uv_link *next_dst;
  /* coupling: as source */
  acp_uv_link *dsts;

  int state;
  unsigned outstanding;
  uv_timer_t timer;
  acp_uv_link_close_cb close_cb;
  void *close_ud;

  /* user side (SIDE_USER) */
  acp_uv_link_ops ops;
  void *ops_ud;
  bool ops_closed;
  int close_code; /* acp_uv_link_set_close_code() */
};

/* MARK: - Helpers (Private) */

int acp__uv_err(int uv_err) {
  switch (uv_err) {
  case 0:
    return 0;
  case UV_ENOENT:
    return ACP_ERR_NOT_FOUND;
  case UV_ENOMEM:
    return ACP_ERR_NOMEM;
  case UV_ECANCELED:
    return ACP_ERR_CANCELLED;
  case UV_ETIMEDOUT:
    return ACP_ERR_TIMEOUT;
  case UV_EOF:
  case UV_EPIPE:
  case UV_ECONNRESET:
    return ACP_ERR_CLOSED;
  default:
    return ACP_ERR_SYSTEM;
  }
}

static void block_close(acp_uv_link *l);

static void finish(acp_uv_link *l) {
  block_close(l);
  if (l->close_cb)
    l->close_cb(l, l->close_ud);
  acp__free(&l->mem, l->sbuf);
  acp__free(&l->mem, l->rbuf);
  acp__free(&l->mem, l->spare);
  acp__free(&l->mem, l);
}

/* Finish with a write request: keep the larger of it and the spare. */
static void wreq_release(acp_uv_link *l, wreq *w) {
  if (w->cap > l->spare_max || (l->spare != NULL && l->spare->cap >= w->cap)) {
    acp__free(&l->mem, w);
    return;
  }
  acp__free(&l->mem, l->spare);
  l->spare = w;
}

static void done_one(acp_uv_link *l) {
  l->outstanding--;
  if (l->state == ST_CLOSING && l->outstanding == 0)
    finish(l);
}

static void on_handle_closed(uv_handle_t *h) {
  done_one(h->data);
}

static bool want_read(const acp_uv_link *l) {
  return l->rd.kind != SIDE_NONE && !l->rd.closed && l->read_cb &&
         !l->rd_done && l->state == ST_OPEN && l->pause == 0 &&
         l->bp_holds == 0;
}

static void restore_flags(side *s) {
  if (s->fd >= 0 && s->saved_flags >= 0)
    (void)fcntl(s->fd, F_SETFL, s->saved_flags);
  s->saved_flags = -1;
}

static void close_side(acp_uv_link *l, side *s) {
  if (s->kind == SIDE_NONE || s->closed)
    return;
  s->closed = true;
  if (s->kind == SIDE_USER)
    return;
  /* Our descriptors of the pipe or socket keep it open too: the writer
   * must see our end. */
  if (s == &l->rd)
    block_close(l);
  if (s->kind == SIDE_STREAM) {
    uv_os_fd_t hfd = -1;
    (void)uv_fileno((uv_handle_t *)s->stream, &hfd);
    restore_flags(s);
    if (!uv_is_closing((uv_handle_t *)s->stream)) {
      l->outstanding++;
      uv_close((uv_handle_t *)s->stream, on_handle_closed);
    }
    /* uv_tty_init may reopen the terminal and use the new descriptor,
     * leaving ours to us. */
    if (s->fd >= 0 && s->fd != hfd)
      close(s->fd);
    s->fd = -1;
    return;
  }
  /* A file side: its descriptor is closed once no request uses it. */
  bool busy = (s == &l->rd) ? l->fs_rbusy : l->fs_wbusy;
  if (!busy && s->fd >= 0) {
    close(s->fd);
    s->fd = -1;
  }
}

/* MARK: - Coupling (Private) */

static int update_reading(acp_uv_link *l);

static void check_high(acp_uv_link *dst) {
  if (dst->src && !dst->holding && dst->queued > dst->high) {
    dst->holding = true;
    dst->src->bp_holds++;
    update_reading(dst->src);
  }
}

static void check_low(acp_uv_link *dst) {
  if (dst->src && dst->holding && dst->queued <= dst->low) {
    dst->holding = false;
    dst->src->bp_holds--;
    update_reading(dst->src);
  }
}

void acp_uv_link_uncouple(acp_uv_link *dst) {
  if (!dst || !dst->src)
    return;
  acp_uv_link *src = dst->src;
  acp_uv_link **pp = &src->dsts;
  while (*pp && *pp != dst)
    pp = &(*pp)->next_dst;
  if (*pp)
    *pp = dst->next_dst;
  dst->next_dst = NULL;
  dst->src = NULL;
  if (dst->holding) {
    dst->holding = false;
    src->bp_holds--;
    update_reading(src);
  }
}

int acp_uv_link_couple(acp_uv_link *src, acp_uv_link *dst, size_t high_water,
                       size_t low_water) {
  if (!src || !dst)
    return ACP_ERR_INVALID_ARGUMENT;
  if (src->state != ST_OPEN || dst->state != ST_OPEN)
    return ACP_ERR_CLOSED;
  if (high_water == 0)
    high_water = ACP_UV_DEFAULT_HIGH_WATER;
  if (low_water >= high_water || low_water == 0)
    low_water = high_water / 2;
  acp_uv_link_uncouple(dst);
  dst->src = src;
  dst->high = high_water;
  dst->low = low_water;
  dst->next_dst = src->dsts;
  src->dsts = dst;
  check_high(dst);
  return 0;
}

/*
 * A pipe holds 64 KiB by default, so a 1 MiB message crosses it in 16
 * wake-ups of each side. The first time a side carries more than that (a
 * write larger than 64 KiB, a read that fills the read buffer), ask for a
 * pipe of ACP_UV_PIPE_BIG (1 MiB, the usual pipe-max-size): measured, 1 MiB
 * prompt turns then run about a fifth below socketpairs, instead of a third
 * or more (docs/decisions.md). Only pipes
 * that carry big messages grow, because Linux counts a pipe's capacity
 * against its user's pipe pages (pipe-user-pages-soft, 64 MiB), past which
 * every new pipe of that user is tiny. Not a pipe (socket, file, tty), or
 * refused: nothing changes.
 */
#ifndef ACP_UV_PIPE_BIG
#define ACP_UV_PIPE_BIG (1024 * 1024)
#endif
/*
 * A message larger than the pipe (a 1 MiB prompt is 1 MiB plus ~150 bytes
 * of envelope) cannot be written at once: the writer waits for the reader
 * to empty the pipe and the reader for the tail, a wake-up more on each
 * side (1 MiB turns ran 1.2-1.8x slower than 1,000,000-byte ones, issue
 * 11). So a write pipe grows, by doubling, to fit the largest message, up
 * to ACP_UV_PIPE_MAX. Past pipe-max-size (1 MiB by default) only a
 * process with CAP_SYS_RESOURCE may grow a pipe (root, unless a container
 * drops it, as the one the benchmarks ran in did); for others the kernel
 * refuses, once, and the pipe stays as it is. Measured and dropped instead:
 * writing in pieces, and waiting for the tail (docs/decisions.md).
 */
#ifndef ACP_UV_PIPE_MAX
#define ACP_UV_PIPE_MAX (4 * 1024 * 1024)
#endif
/* Ask for a pipe of at least `size` bytes: the capacity it has then (0:
 * not a pipe, or refused). */
static size_t grow_pipe(side *sd, bool *tried, int size) {
  uv_os_fd_t fd;
  *tried = true;
#ifdef F_SETPIPE_SZ
  if (sd->kind == SIDE_STREAM &&
      uv_fileno((uv_handle_t *)sd->stream, &fd) == 0) {
    /* Never shrink: the other end may have grown it further. */
    int r = fcntl(fd, F_GETPIPE_SZ);
    if (r < 0 || r >= size)
      return r > 0 ? (size_t)r : 0;
    r = fcntl(fd, F_SETPIPE_SZ, size);
    return r > 0 ? (size_t)r : 0;
  }
#else
  (void)sd;
  (void)fd;
  (void)size;
#endif
  return 0;
}

/* Before a write of len bytes to a stream: grow a pipe that would not
 * hold it (see above). */
static void fit_pipe(acp_uv_link *l, size_t len) {
  size_t want;
  size_t got;
  if (len <= 65536)
    return;
  if (!l->wr_grown)
    l->wr_cap = grow_pipe(&l->wr, &l->wr_grown, ACP_UV_PIPE_BIG);
  if (l->wr_cap == 0 || len <= l->wr_cap || l->wr_fit_refused ||
      l->wr_cap >= ACP_UV_PIPE_MAX)
    return;
  want = l->wr_cap;
  while (want < len && want < ACP_UV_PIPE_MAX)
    want *= 2;
  got = grow_pipe(&l->wr, &l->wr_grown, (int)want);
  if (got > l->wr_cap)
    l->wr_cap = got;
  else
    l->wr_fit_refused = true; /* EPERM without CAP_SYS_RESOURCE: no retry */
}

/* MARK: - Reading (Private) */

static void deliver_end(acp_uv_link *l, int status) {
  l->rd_done = true;
  if (l->reading && l->rd.kind == SIDE_USER) {
    l->reading = false;
  } else if (l->reading) {
    uv_read_stop(l->rd.stream);
    l->reading = false;
  }
  if (l->read_cb)
    l->read_cb(l, status, NULL, 0, l->read_ud);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  acp_uv_link *l = h->data;
  size_t room = 0;
  char *p = l->buf_fn ? l->buf_fn(l->read_ud, &room) : NULL;
  (void)hint;
  if (p != NULL) {
    /* The consumer's buffer (the line framer's): a long line is read
     * where it will be parsed, not copied there from here. */
    *buf = uv_buf_init(p, room > UINT_MAX ? UINT_MAX : (unsigned)room);
    return;
  }
  *buf = uv_buf_init(l->sbuf, (unsigned)READ_CHUNK);
}

static void on_stream_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  acp_uv_link *l = s->data;
  if (n == 0)
    return;
  if (n < 0) {
    deliver_end(l, (int)n);
    return;
  }
  if ((size_t)n >= READ_CHUNK && !l->rd_grown)
    (void)grow_pipe(&l->rd, &l->rd_grown, ACP_UV_PIPE_BIG);
  l->read_cb(l, 0, buf->base, (size_t)n, l->read_ud);
}

static void on_kick(uv_idle_t *h) {
  uv_idle_stop(h);
}

/* Bytes were delivered from inside a prepare callback: the handles whose
 * prepare callbacks ran before it would only act on what the callbacks
 * left them in the next iteration, after a wait that could then last for
 * ever. An active idle handle makes that wait a poll. */
static void kick(acp_uv_link *l) {
  if (l->state == ST_OPEN)
    uv_idle_start(&l->kick, on_kick);
}

/* MARK: - Spinning reads
 *
 * A spin polls the read side without blocking, yielding the CPU between
 * polls, for a bounded time before the process would sleep. A peer that
 * answers within it is read without this process sleeping, and so
 * without the wake-up through the scheduler (an IPI to an idle CPU, a VM
 * exit) that is most of a small round trip across CPUs. It is worth it
 * only when the answers come that fast and the CPU is not wanted: after
 * k misses in a row (a spin that found nothing, or whose yield ran
 * another task here) the next 2^k - 1 spins are skipped, k at most
 * SPIN_BACKOFF_MAX (one spin in 64 against a peer that never answers in
 * time), and a spin that reads in time resets it. A sched_yield() that
 * took longer than SPIN_CROWDED_NS gave the CPU away: one that returns at
 * once costs ~0.4 us in a VM, a switch away and back several. */
#define SPIN_BACKOFF_MAX 6
#define SPIN_CROWDED_NS 2000u

#define SPIN_ROOM_NS 10000000u /* how long spin_room()'s answer stands */

int acp__uv_spin_room_force;

long acp__uv_loadavg_running(const char *text) {
  const char *p = strchr(text, '/');
  long running = 0;

  /* "0.66 0.71 0.92 1/75 17798": the count before the slash. */
  if (p == NULL || p == text || p[-1] < '0' || p[-1] > '9')
    return -1;
  while (p > text && p[-1] >= '0' && p[-1] <= '9')
    p--;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (running > 1000000)
      return -1;
    running = running * 10 + (*p - '0');
  }
  return running;
}

/* Whether a spin would take a CPU nobody else wants: the machine's
 * runnable tasks (this one among them; /proc/loadavg's fourth field, read
 * at most every SPIN_ROOM_NS) no more than its online CPUs. On a machine
 * busier than that a yield hands the CPU to a task that then keeps it for
 * a whole time slice (milliseconds), where a sleeping reader would have
 * been woken ahead of it; measured: rounds at a tenth of the rate with two
 * busy loops beside the pair. The machine's CPUs, not this thread's: the
 * count is the machine's, and two processes pinned to a CPU each, both
 * spinning, are two running tasks on two CPUs (against this thread's one
 * CPU they would stop each other's spins). A CPU of ours that another task
 * wants is what a crowded yield shows. Without /proc, never. */
static bool spin_room(acp_uv_link *l, uint64_t now) {
#if defined(__linux__)
  char b[128];
  ssize_t n;
  long running, cpus;
  int fd;

  if (acp__uv_spin_room_force != 0)
    return acp__uv_spin_room_force > 0;
  if (l->room_at != 0 && now - l->room_at < SPIN_ROOM_NS)
    return l->room_ok;
  l->room_at = now;
  l->room_ok = false;
  /* Opened each time (a few us every SPIN_ROOM_NS): a descriptor kept per
   * link would be one more per connection of a server that spins. */
  fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  n = read(fd, b, sizeof(b) - 1);
  close(fd);
  if (n <= 0)
    return false;
  b[n] = '\0';
  running = acp__uv_loadavg_running(b);
  cpus = sysconf(_SC_NPROCESSORS_ONLN);
  l->room_ok = running >= 1 && running <= cpus;
  return l->room_ok;
#else
  (void)l;
  (void)now;
  return acp__uv_spin_room_force > 0;
#endif
}

/* Whether a sched_yield() that took `gap` ran another task here. */
static bool crowded_gap(uint64_t gap) {
  return gap > SPIN_CROWDED_NS && acp__uv_spin_room_force != 1;
}

/* Whether to spin now: not while backing off, nor without room. */
static bool spin_gate(acp_uv_link *l, uint64_t now) {
  if (l->spin_skip > 0) {
    l->spin_skip--;
    return false;
  }
  return spin_room(l, now);
}

/* A spin's outcome: whether bytes came, whether it had yielded before
 * they did, whether a yield ran another task. Bytes that the first poll
 * finds count neither way: the read would not have slept for them either
 * (on one CPU a peer woken by our write often answers before we poll, and
 * taking that for a hit would undo the back-off every turn). Else a hit is
 * bytes read in time on a CPU nobody else wanted. */
static void spin_score(acp_uv_link *l, bool got, bool waited, bool crowded) {
  if (got)
    l->spin_got++;
  if (got && !waited)
    return;
  if (got && !crowded) {
    l->spin_hits++;
    l->spin_miss = 0;
    return;
  }
  l->spin_misses++;
  if (l->spin_miss < SPIN_BACKOFF_MAX)
    l->spin_miss++;
  l->spin_skip = (uint8_t)((1u << l->spin_miss) - 1);
}

void acp__uv_link_spin_counts(const acp_uv_link *l, unsigned long *hits,
                              unsigned long *misses, unsigned long *got) {
  *hits = l->spin_hits;
  *misses = l->spin_misses;
  *got = l->spin_got;
}

int acp__uv_link_spin(acp_uv_link *l, uint64_t budget_ns) {
  return acp__uv_link_spin_ex(l, budget_ns, false);
}

int acp__uv_link_spin_ex(acp_uv_link *l, uint64_t budget_ns, bool reply) {
  uv_os_fd_t fd;
  uint64_t last, prev, now;
  bool crowded = false, yielded = false, waited = false;
  int got = 0;

  if (budget_ns == 0 || l->rd.kind != SIDE_STREAM || !want_read(l) ||
      !l->reading || uv_fileno((uv_handle_t *)l->rd.stream, &fd) != 0)
    return 0;
  /* Only a descriptor that cannot block: libuv makes pipes and sockets
   * non-blocking; anything else is left to the loop. */
  if ((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0)
    return 0;
  last = prev = uv_hrtime();
  if (!spin_gate(l, last))
    return 0;
  while (want_read(l) && l->reading) {
    uv_buf_t buf;
    ssize_t n;

    on_alloc((uv_handle_t *)l->rd.stream, READ_CHUNK, &buf);
    n = read(fd, buf.base, buf.len);
    if (n > 0) {
      /* As the loop would deliver it: the consumer reacts (and writes)
       * at once, and the wait for the next bytes starts again. */
      if (!got)
        waited = yielded;
      got = 1;
      on_stream_read(l->rd.stream, n, &buf);
      last = prev = uv_hrtime();
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    /* End of input or an error: the loop's own read reports it. */
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
      break;
    /* Waiting for one reply: it came, and what came with it is drained. */
    if (reply && got)
      break;
    if (crowded || prev - last >= budget_ns)
      break;
    /* Yield rather than pause: a task waiting for this CPU (the peer, on
     * a machine with fewer free cores than spinners) runs first. */
    sched_yield();
    yielded = true;
    now = uv_hrtime();
    crowded = crowded_gap(now - prev);
    prev = now;
  }
  spin_score(l, got, waited, crowded);
  if (got)
    kick(l);
  return got;
}

/* MARK: - Blocking reads (acp__uv_link_block) */

typedef struct quiet_walk {
  const acp_uv_link *l;
  const uv_handle_t *self; /* the caller's prepare handle */
  unsigned others;         /* active handles that could end the wait */
  unsigned dormant;        /* inactive ones that could start unseen */
  uint64_t signals;        /* signals with an active watcher, a bit each */
} quiet_walk;

static void quiet_cb(uv_handle_t *h, void *arg) {
  quiet_walk *q = arg;
  if (h == (uv_handle_t *)q->l->rd.stream ||
      h == (uv_handle_t *)q->l->wr.stream || h == q->self)
    return;
  if (!uv_is_active(h)) {
    /* One a callback could start without the loop's count showing it (an
     * unreferenced handle is not counted) nor its timeout (a timer or an
     * idle handle changes that): while there is one, every check walks.
     * A closing handle never starts again, nor does a process that
     * ended. */
    if (h->type != UV_TIMER && h->type != UV_IDLE && h->type != UV_PROCESS &&
        !uv_is_closing(h))
      q->dormant++;
    return;
  }
  switch (h->type) {
  case UV_SIGNAL: {
    int sig = ((uv_signal_t *)h)->signum;
    if (sig > 0 && sig < 64) {
      q->signals |= UINT64_C(1) << sig;
      return;
    }
    q->others++;
    return;
  }
  case UV_PROCESS:
    /* A child's exit comes through libuv's SIGCHLD handler: a watched
     * signal like the others (a client that spawned its agent). Its end
     * of our pipe usually ends the read first; not when a grandchild
     * still holds it open. */
    q->signals |= UINT64_C(1) << SIGCHLD;
    return;
  default:
    q->others++;
  }
}

/* The newest handle of the loop: the last in its list of handles (the
 * list's layout is public in uv.h; its type changed in libuv 1.47). */
static const void *loop_tail(const uv_loop_t *loop) {
#if UV_VERSION_HEX >= 0x012f00
  return loop->handle_queue.prev;
#else
  return loop->handle_queue[1];
#endif
}

/*
 * Signals while blocked. A watched signal must end the read, and one that
 * came while the loop was not looking must not be slept through: libuv's
 * handler only writes to the loop's signal pipe, which epoll would have
 * reported, and with SA_RESTART (libuv's flag) a read(2) it interrupts
 * carries on. So each watched signal's handler is wrapped (blk_handler):
 * it counts the signal, and if a read is blocking or about to, puts
 * /dev/null in place of the descriptor read (dup2 is async-signal-safe),
 * so that a read begun after the signal returns at once and one under
 * way returns EINTR (the wrapper is installed without SA_RESTART); then
 * it runs libuv's handler. The count decides: any signal since the loop
 * last had control sends the loop round again (its epoll sees the signal
 * pipe) instead of blocking. Process-wide, like the handlers.
 */
static volatile sig_atomic_t blk_sigs;        /* signals the wrapper saw */
static volatile sig_atomic_t blk_fd_now = -1; /* the descriptor read */
static int blk_null = -1;                     /* /dev/null, opened once */
static struct sigaction blk_orig[64];         /* libuv's, per signal */

static void blk_handler(int sig, siginfo_t *info, void *uctx) {
  int saved = errno;
  int fd = blk_fd_now;
  const struct sigaction *o = &blk_orig[sig & 63];

  /* libuv's handlers block every signal while they run, and so does this
   * one (its mask is theirs): no other handler interleaves here. */
  blk_sigs = blk_sigs + 1;
  if (fd >= 0)
    (void)dup2(blk_null, fd);
  if (o->sa_flags & SA_SIGINFO)
    o->sa_sigaction(sig, info, uctx);
  else if (o->sa_handler != SIG_DFL && o->sa_handler != SIG_IGN)
    o->sa_handler(sig);
  errno = saved;
}

/* The wrapper on `sig`, if it is not there (libuv installs its handler
 * when the first watcher of a signal starts): 1 installed now, 0 already
 * there, -1 error. */
static int blk_wrap(int sig) {
  struct sigaction cur, w;

  if (sigaction(sig, NULL, &cur) != 0)
    return -1;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == blk_handler)
    return 0;
  if (!(cur.sa_flags & SA_SIGINFO) &&
      (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN))
    return -1; /* not libuv's: nothing to wrap */
  blk_orig[sig] = cur;
  w = cur;
  w.sa_sigaction = blk_handler;
  w.sa_flags = (cur.sa_flags | SA_SIGINFO) & ~SA_RESTART;
  return sigaction(sig, &w, NULL) == 0 ? 1 : -1;
}

/* Whether this link's input is all the loop waits for: nothing due (no
 * timer, idle handle, pending callback or closing handle), no request in
 * flight (a write, a thread-pool job: their ends wake the loop), no other
 * active handle but signal watchers and child processes (SIGCHLD), and no
 * signal since the loop last had control. Another prepare or check handle
 * counts too: it may have work a callback of ours left it (output to
 * flush), which it would only do in the next loop iteration.
 *
 * The watched signals get the wrapper (above) the first time, and again
 * when their set or the loop's count of active handles changed (a
 * watcher stopped and started again may have got libuv's handler back);
 * a signal wrapped just now may have come before: not quiet this time. */
static bool loop_quiet(acp_uv_link *l, const uv_prepare_t *self) {
  quiet_walk q = {l, (const uv_handle_t *)self, 0, 0, 0};
  if (l->queued > 0 || l->nwrites > 0 || l->loop->active_reqs.count > 0 ||
      uv_backend_timeout(l->loop) != -1)
    return false;
  if (blk_sigs != l->block_mark) {
    l->block_again = true;
    return false;
  }
  /* The walk costs about as much as the rest of a small turn's reading;
   * its answer stands while no handle could have joined the others. Within
   * one acp__uv_link_block() call the loop does not run, so no handle
   * leaves its list (that is the loop's closing phase) and a new one goes
   * to its end; an existing one that starts is either counted (referenced)
   * or was dormant at the last walk, which then found none. */
  if (l->walk_ok && loop_tail(l->loop) == l->walk_tail &&
      l->loop->active_handles == l->walk_ah)
    return l->block_sigs == 0 || l->block_main;
  l->walk_ok = false;
  uv_walk(l->loop, quiet_cb, &q);
  if (q.others > 0)
    return false;
  if (q.signals != l->block_sigs || l->loop->active_handles != l->block_ah) {
    bool fresh = false;
    /* Signals go to the main thread first (a process-directed signal is
     * delivered to a thread that does not block it, the main one when it
     * can): a read blocked in another would not be interrupted. */
#if defined(__linux__) && defined(SYS_gettid)
    l->block_main = (pid_t)syscall(SYS_gettid) == getpid();
#else
    l->block_main = false; /* cannot tell: block only without signals */
#endif
    if (q.signals != 0 && blk_null < 0)
      blk_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (q.signals != 0 && (!l->block_main || blk_null < 0))
      return false;
    for (uint64_t left = q.signals; left != 0; left &= left - 1) {
      int r = blk_wrap(__builtin_ctzll(left));
      if (r < 0)
        return false;
      fresh = fresh || r > 0;
    }
    l->block_sigs = q.signals;
    l->block_ah = l->loop->active_handles;
    if (fresh) {
      l->block_again = true;
      return false;
    }
  }
  if (q.signals != 0 && !l->block_main)
    return false;
  if (q.dormant == 0) {
    l->walk_ok = true;
    l->walk_tail = loop_tail(l->loop);
    l->walk_ah = l->loop->active_handles;
  }
  return true;
}

/* What to block in: for a pipe or FIFO, a second, blocking, open file
 * description of it (libuv's is non-blocking, and the flag belongs to the
 * description), opened through /proc/self/fd without waiting for a
 * writer, then made blocking; it is kept. A stream socket cannot be
 * reopened: then a descriptor of the socket itself, which
 * acp__uv_link_block() makes blocking only while the loop stays quiet,
 * and only when it is not also the link's output (a write must never
 * block the loop). Our own descriptor, not libuv's: blk_handler() may
 * replace it. Plus block_keep, to put it back. -2: none. */
static int block_fd(acp_uv_link *l) {
  uv_os_fd_t fd, wfd;
  struct stat a, b;
  char path[64];
  int bfd, fl, type = 0;
  socklen_t tl = sizeof(type);

  if (l->block_fd != -1)
    return l->block_fd;
  l->block_fd = -2;
  if (uv_fileno((uv_handle_t *)l->rd.stream, &fd) != 0 || fstat(fd, &a) != 0)
    return -2;
  if (S_ISSOCK(a.st_mode)) {
    if (l->same || l->wr.kind != SIDE_STREAM ||
        uv_fileno((uv_handle_t *)l->wr.stream, &wfd) != 0 ||
        fstat(wfd, &b) != 0 || (a.st_dev == b.st_dev && a.st_ino == b.st_ino) ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 ||
        type != SOCK_STREAM || (fl = fcntl(fd, F_GETFL)) < 0 ||
        (bfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
      return -2;
    l->block_sock = true;
    l->block_fl = fl;
  } else {
    if (!S_ISFIFO(a.st_mode))
      return -2;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    bfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (bfd < 0)
      return -2;
    if (fstat(bfd, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino ||
        (fl = fcntl(bfd, F_GETFL)) < 0 ||
        fcntl(bfd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
      close(bfd);
      return -2;
    }
  }
  l->block_keep = fcntl(bfd, F_DUPFD_CLOEXEC, 3);
  if (l->block_keep < 0) {
    close(bfd);
    l->block_sock = false;
    return -2;
  }
  l->block_fd = bfd;
  return bfd;
}

/* Our descriptors of the read side, when it closes or the link is freed;
 * never opened again. */
static void block_close(acp_uv_link *l) {
  if (l->block_fd >= 0) {
    /* A socket left blocking would block libuv's reads: its flags back
     * through block_keep, which a handler never replaces. */
    if (l->block_on)
      (void)fcntl(l->block_keep, F_SETFL, l->block_fl);
    l->block_on = false;
    close(l->block_fd);
    close(l->block_keep);
  }
  l->block_fd = -2;
  l->block_keep = -1;
}

/* A socket blocked in: non-blocking again for the loop, unless a callback
 * closed the read side meanwhile (block_close(): nothing left to set). */
static void sock_unblock(acp_uv_link *l) {
  if (!l->block_on)
    return;
  l->block_on = false;
  if (l->block_fd >= 0)
    (void)fcntl(l->block_fd, F_SETFL, l->block_fl);
}

/* The spin before a blocking read (MARK: Spinning reads): up to
 * budget_ns. Returns the bytes read into buf, 0 when none came (the
 * blocking read follows, and sees an end of input or an error too), -1
 * when a watched signal came. */
static ssize_t block_spin(acp_uv_link *l, int bfd, const uv_buf_t *buf,
                          uint64_t budget_ns) {
  uv_os_fd_t fd = bfd;
  uint64_t start, prev, now;
  bool crowded = false, yielded = false;
  ssize_t n;

  /* A pipe polls through libuv's non-blocking description (bfd's blocks);
   * a socket shares one description with bfd, which may be blocking now,
   * so it polls with MSG_DONTWAIT. */
  if (!l->block_sock && uv_fileno((uv_handle_t *)l->rd.stream, &fd) != 0)
    return 0;
  start = prev = uv_hrtime();
  if (!spin_gate(l, start))
    return 0;
  for (;;) {
    n = l->block_sock ? recv(fd, buf->base, buf->len, MSG_DONTWAIT)
                      : read(fd, buf->base, buf->len);
    if (n > 0)
      break;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      n = 0;
    if (n == 0)
      return 0; /* end of input or an error: the blocking read reports it */
    if (blk_sigs != l->block_mark)
      return -1;
    if (crowded || prev - start >= budget_ns) {
      n = 0;
      break;
    }
    sched_yield();
    yielded = true;
    now = uv_hrtime();
    crowded = crowded_gap(now - prev);
    prev = now;
  }
  spin_score(l, n > 0, yielded, crowded);
  return n;
}

int acp__uv_link_block(acp_uv_link *l, const uv_prepare_t *self,
                       uint64_t spin_ns) {
  int got = 0, bfd;

  if (l->rd.kind != SIDE_STREAM ||
      (l->rd.stream->type != UV_NAMED_PIPE && l->rd.stream->type != UV_TCP))
    return 0;
  l->walk_ok = false; /* the loop ran since: handles may have gone */
  while (want_read(l) && l->reading && loop_quiet(l, self)) {
    uv_buf_t buf;
    ssize_t n;

    if ((bfd = block_fd(l)) < 0)
      break;
    if (l->block_sock && !l->block_on) {
      if (fcntl(bfd, F_SETFL, l->block_fl & ~O_NONBLOCK) != 0)
        break;
      l->block_on = true;
    }
    on_alloc((uv_handle_t *)l->rd.stream, READ_CHUNK, &buf);
    if (spin_ns > 0) {
      n = block_spin(l, bfd, &buf, spin_ns);
      if (n < 0) {
        l->block_again = true;
        break;
      }
      if (n > 0) {
        got = 1;
        on_stream_read(l->rd.stream, n, &buf);
        continue;
      }
    }
    /* From here a signal's handler replaces bfd: checked again after
     * claiming it, for one that came just before. Only with watched
     * signals, so only on the main thread (loop_quiet()): a link blocking
     * on another thread never takes the slot from it. */
    if (l->block_sigs != 0)
      blk_fd_now = bfd;
    if (blk_sigs != l->block_mark) {
      blk_fd_now = -1;
      l->block_again = true;
      break;
    }
    n = read(bfd, buf.base, buf.len);
    blk_fd_now = -1;
    uv_update_time(l->loop);
    if (blk_sigs != l->block_mark) {
      /* A signal came: bfd may be /dev/null now. Bytes read before it
       * are the pipe's; an end of input or EINTR is the signal's. */
      if (dup2(l->block_keep, bfd) < 0) {
        block_close(l);
        break;
      }
      if (n <= 0) {
        l->block_again = true;
        break;
      }
    }
    /* End of input or an error: the loop sees it. */
    if (n <= 0)
      break;
    got = 1;
    on_stream_read(l->rd.stream, n, &buf);
  }
  if (l->block_sock)
    sock_unblock(l);
  /* The loop has control again: signals from now on are its own to see,
   * or (when they come after its epoll) ours at the next check. */
  l->block_mark = blk_sigs;
  /* A signal, or the wrapper just installed: the loop goes round once
   * without sleeping (its epoll sees a signal still in libuv's pipe), and
   * the next check may block. */
  if (got || l->block_again)
    kick(l);
  l->block_again = false;
  return got;
}

static void on_fs_read(uv_fs_t *req);
static void on_idle(uv_idle_t *h);

static void issue_fs_read(acp_uv_link *l) {
  uv_buf_t buf = uv_buf_init(l->rbuf, (unsigned)READ_CHUNK);
  l->rfs.data = l;
  l->fs_rbusy = true;
  int r = uv_fs_read(l->loop, &l->rfs, l->rd.fd, &buf, 1, -1, on_fs_read);
  if (r < 0) {
    l->fs_rbusy = false;
    l->held = true;
    l->held_status = r;
    l->held_len = 0;
    uv_idle_start(&l->idle, on_idle);
  }
}

static void deliver_held(acp_uv_link *l) {
  l->held = false;
  if (l->held_status != 0) {
    deliver_end(l, l->held_status);
    return;
  }
  l->read_cb(l, 0, l->rbuf, l->held_len, l->read_ud);
  update_reading(l);
}

static void on_idle(uv_idle_t *h) {
  acp_uv_link *l = h->data;
  uv_idle_stop(h);
  if (l->held && want_read(l))
    deliver_held(l);
}

static void on_fs_read(uv_fs_t *req) {
  acp_uv_link *l = req->data;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  l->fs_rbusy = false;
  if (l->state == ST_CLOSING) {
    if (l->rd.fd >= 0) {
      close(l->rd.fd);
      l->rd.fd = -1;
    }
    done_one(l);
    return;
  }
  l->held = true;
  l->held_len = n > 0 ? (size_t)n : 0;
  l->held_status = n > 0 ? 0 : (n == 0 ? UV_EOF : (int)n);
  if (want_read(l))
    deliver_held(l);
}

static int update_reading(acp_uv_link *l) {
  bool want = want_read(l);
  if (l->rd.kind == SIDE_USER) {
    if (want != l->reading) {
      l->reading = want;
      if (l->ops.read_changed)
        l->ops.read_changed(l, want ? 1 : 0, l->ops_ud);
    }
  } else if (l->rd.kind == SIDE_STREAM) {
    if (want && !l->reading) {
      int r = uv_read_start(l->rd.stream, on_alloc, on_stream_read);
      if (r < 0)
        return ACP_ERR_SYSTEM;
      l->reading = true;
    } else if (!want && l->reading) {
      uv_read_stop(l->rd.stream);
      l->reading = false;
    }
  } else if (l->rd.kind == SIDE_FILE) {
    if (want) {
      if (l->held)
        uv_idle_start(&l->idle, on_idle);
      else if (!l->fs_rbusy)
        issue_fs_read(l);
    } else {
      uv_idle_stop(&l->idle);
    }
  }
  return 0;
}

/* MARK: - Writing (Private) */

static void do_close(acp_uv_link *l);
static void end_write_side(acp_uv_link *l);

static void after_write_done(acp_uv_link *l) {
  check_low(l);
  if (l->nwrites != 0)
    return;
  if (l->state == ST_FLUSHING)
    do_close(l);
  else if (l->state == ST_OPEN && l->wr_shut_req && !l->wr_ended)
    end_write_side(l);
}

static void on_write(uv_write_t *req, int status) {
  wreq *w = (wreq *)req;
  acp_uv_link *l = w->link;
  l->queued -= w->len;
  l->nwrites--;
  wreq_release(l, w);
  if (status < 0 && status != UV_ECANCELED && l->write_err == 0)
    l->write_err = status;
  if (l->state != ST_CLOSING)
    after_write_done(l);
}

static void drop_file_queue(acp_uv_link *l, bool keep_head) {
  wreq *w = l->fq_head;
  wreq *keep = NULL;
  if (keep_head && w) {
    keep = w;
    w = w->next;
    keep->next = NULL;
  }
  while (w) {
    wreq *next = w->next;
    l->queued -= w->len;
    l->nwrites--;
    wreq_release(l, w);
    w = next;
  }
  l->fq_head = keep;
  l->fq_tail = keep;
}

static void on_fs_write(uv_fs_t *req);

static void issue_fs_write(acp_uv_link *l) {
  wreq *w = l->fq_head;
  uv_buf_t buf = uv_buf_init(w->data + w->off, (unsigned)(w->len - w->off));
  w->u.fs.data = w;
  l->fs_wbusy = true;
  int r = uv_fs_write(l->loop, &w->u.fs, l->wr.fd, &buf, 1, -1, on_fs_write);
  if (r < 0) {
    l->fs_wbusy = false;
    if (l->write_err == 0)
      l->write_err = r;
    drop_file_queue(l, false);
    after_write_done(l);
  }
}

static void on_fs_write(uv_fs_t *req) {
  wreq *w = req->data;
  acp_uv_link *l = w->link;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  l->fs_wbusy = false;
  if (l->state == ST_CLOSING) {
    drop_file_queue(l, false);
    if (l->wr.fd >= 0) {
      close(l->wr.fd);
      l->wr.fd = -1;
    }
    done_one(l);
    return;
  }
  if (n <= 0) {
    if (l->write_err == 0)
      l->write_err = n < 0 ? (int)n : UV_EIO;
    drop_file_queue(l, false);
  } else {
    w->off += (size_t)n;
    if (w->off >= w->len) {
      l->fq_head = w->next;
      if (!l->fq_head)
        l->fq_tail = NULL;
      l->queued -= w->len;
      l->nwrites--;
      wreq_release(l, w);
    }
    if (l->fq_head) {
      issue_fs_write(l);
      return;
    }
  }
  after_write_done(l);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  (void)req;
  (void)status;
}

static void end_write_side(acp_uv_link *l) {
  l->wr_ended = true;
  if (l->wr.kind == SIDE_USER) {
    if (l->ops.shutdown)
      l->ops.shutdown(l, l->ops_ud);
    return;
  }
  if (l->wr.kind == SIDE_STREAM && l->same) {
    if (uv_shutdown(&l->shreq, l->wr.stream, on_shutdown) != 0)
      l->shreq.data = NULL;
    return;
  }
  close_side(l, &l->wr);
}

/* MARK: - Closing (Private) */

static void do_close(acp_uv_link *l) {
  l->state = ST_CLOSING;
  uv_timer_stop(&l->timer);
  uv_idle_stop(&l->idle);
  uv_idle_stop(&l->kick);
  acp_uv_link_uncouple(l);
  for (acp_uv_link *d = l->dsts; d;) {
    acp_uv_link *next = d->next_dst;
    d->src = NULL;
    d->holding = false;
    d->next_dst = NULL;
    d = next;
  }
  l->dsts = NULL;
  l->bp_holds = 0;
  if (l->reading && l->rd.kind != SIDE_USER)
    uv_read_stop(l->rd.stream);
  l->reading = false;
  if ((l->rd.kind == SIDE_USER || l->wr.kind == SIDE_USER) && !l->ops_closed) {
    /* The transport lets go of the link here; it must not call it again. */
    l->ops_closed = true;
    if (l->ops.close)
      l->ops.close(l, l->ops_ud);
  }
  if (l->wr.kind == SIDE_FILE)
    drop_file_queue(l, l->fs_wbusy);
  if (l->fs_rbusy) {
    l->outstanding++;
    uv_cancel((uv_req_t *)&l->rfs);
  }
  if (l->fs_wbusy && l->fq_head) {
    l->outstanding++;
    uv_cancel((uv_req_t *)&l->fq_head->u.fs);
  }
  close_side(l, &l->rd);
  if (!l->same)
    close_side(l, &l->wr);
  l->outstanding += 3;
  uv_close((uv_handle_t *)&l->timer, on_handle_closed);
  uv_close((uv_handle_t *)&l->idle, on_handle_closed);
  uv_close((uv_handle_t *)&l->kick, on_handle_closed);
}

static void on_flush_timeout(uv_timer_t *t) {
  acp_uv_link *l = t->data;
  if (l->state == ST_FLUSHING)
    do_close(l);
}

/* MARK: - Construction (Private) */

static int link_alloc(acp_uv_link **out, uv_loop_t *loop, const acp_mem *mem) {
  acp_mem m;
  acp__mem_init(&m, mem);
  acp_uv_link *l = acp__calloc(&m, 1, sizeof(*l));
  if (!l)
    return ACP_ERR_NOMEM;
  l->mem = m;
  l->loop = loop;
  l->spare_max = SPARE_MAX;
  l->rd.fd = -1;
  l->wr.fd = -1;
  l->rd.saved_flags = -1;
  l->wr.saved_flags = -1;
  l->wr_fd = -2;
  l->block_fd = -1;
  l->block_keep = -1;
  l->pause = ACP__UV_PAUSE_USER;
  /* Neither init can fail on Unix; both handles are always closed. */
  uv_timer_init(loop, &l->timer);
  uv_idle_init(loop, &l->idle);
  uv_idle_init(loop, &l->kick);
  l->timer.data = l;
  l->idle.data = l;
  l->kick.data = l;
  *out = l;
  return 0;
}

/* Abandon a partly built link: close what it holds; memory is released
 * from the close callbacks. */
static void link_abandon(acp_uv_link *l) {
  do_close(l);
}

static int open_fd_side(acp_uv_link *l, side *s, int fd, bool readable) {
  int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (dfd < 0)
    return ACP_ERR_SYSTEM;
  uv_handle_type t = uv_guess_handle(dfd);
  int r = 0;
  s->fd = dfd;
  s->saved_flags = fcntl(dfd, F_GETFL);
  switch (t) {
  case UV_TTY:
    s->kind = SIDE_STREAM;
    s->stream = (uv_stream_t *)&s->h.tty;
    r = uv_tty_init(l->loop, &s->h.tty, dfd, readable ? 1 : 0);
    if (r < 0)
      s->kind = SIDE_NONE;
    break;
  case UV_NAMED_PIPE:
    s->kind = SIDE_STREAM;
    s->stream = (uv_stream_t *)&s->h.pipe;
    uv_pipe_init(l->loop, &s->h.pipe, 0);
    r = uv_pipe_open(&s->h.pipe, dfd);
    break;
  case UV_TCP:
    s->kind = SIDE_STREAM;
    s->stream = (uv_stream_t *)&s->h.tcp;
    uv_tcp_init(l->loop, &s->h.tcp);
    r = uv_tcp_open(&s->h.tcp, dfd);
    break;
  case UV_FILE:
    s->kind = SIDE_FILE;
    s->saved_flags = -1;
    return 0;
  default:
    close(dfd);
    s->fd = -1;
    s->saved_flags = -1;
    return ACP_ERR_UNSUPPORTED;
  }
  if (s->kind == SIDE_STREAM)
    s->stream->data = l;
  if (r < 0) {
    /* The handle (if initialised) does not own dfd after a failed open. */
    restore_flags(s);
    close(dfd);
    s->fd = -1;
    return ACP_ERR_SYSTEM;
  }
  return 0;
}

static int alloc_read_buffers(acp_uv_link *l) {
  if (l->rd.kind == SIDE_STREAM) {
    l->sbuf = acp__malloc(&l->mem, READ_CHUNK);
    if (!l->sbuf)
      return ACP_ERR_NOMEM;
  } else if (l->rd.kind == SIDE_FILE) {
    l->rbuf = acp__malloc(&l->mem, READ_CHUNK);
    if (!l->rbuf)
      return ACP_ERR_NOMEM;
  }
  return 0;
}

/* MARK: - Construction (Public) */

int acp_uv_link_new_fds(acp_uv_link **out, uv_loop_t *loop, int in_fd,
                        int out_fd, const acp_mem *mem) {
  acp_uv_link *l = NULL;
  int rv;
  if (out)
    *out = NULL;
  if (!out || !loop || (in_fd < 0 && out_fd < 0))
    return ACP_ERR_INVALID_ARGUMENT;
  rv = link_alloc(&l, loop, mem);
  if (rv != 0)
    return rv;
  if (in_fd >= 0) {
    rv = open_fd_side(l, &l->rd, in_fd, true);
    if (rv != 0)
      goto cleanup;
  }
  if (out_fd >= 0) {
    rv = open_fd_side(l, &l->wr, out_fd, false);
    if (rv != 0)
      goto cleanup;
  }
  rv = alloc_read_buffers(l);
  if (rv != 0)
    goto cleanup;
  *out = l;
  return 0;
cleanup:
  link_abandon(l);
  return rv;
}

int acp_uv_link_new_streams(acp_uv_link **out_link, uv_loop_t *loop,
                            uv_stream_t *in, uv_stream_t *out,
                            const acp_mem *mem) {
  acp_uv_link *l = NULL;
  int rv;
  if (out_link)
    *out_link = NULL;
  if (!out_link || !loop || (!in && !out))
    return ACP_ERR_INVALID_ARGUMENT;
  rv = link_alloc(&l, loop, mem);
  if (rv != 0)
    return rv;
  if (in) {
    l->rd.kind = SIDE_STREAM;
    l->rd.stream = in;
    in->data = l;
  }
  if (out) {
    l->wr.kind = SIDE_STREAM;
    l->wr.stream = out;
    out->data = l;
  }
  l->same = (in == out);
  rv = alloc_read_buffers(l);
  if (rv != 0) {
    link_abandon(l);
    return rv;
  }
  *out_link = l;
  return 0;
}

int acp__uv_link_new_child(acp_uv_link **out, uv_loop_t *loop,
                           const acp_mem *mem, uv_pipe_t **rd_out,
                           uv_pipe_t **wr_out) {
  acp_uv_link *l = NULL;
  int rv = link_alloc(&l, loop, mem);
  *out = NULL;
  if (rv != 0)
    return rv;
  l->rd.kind = SIDE_STREAM;
  l->rd.stream = (uv_stream_t *)&l->rd.h.pipe;
  uv_pipe_init(loop, &l->rd.h.pipe, 0);
  l->rd.stream->data = l;
  l->wr.kind = SIDE_STREAM;
  l->wr.stream = (uv_stream_t *)&l->wr.h.pipe;
  uv_pipe_init(loop, &l->wr.h.pipe, 0);
  l->wr.stream->data = l;
  rv = alloc_read_buffers(l);
  if (rv != 0) {
    link_abandon(l);
    return rv;
  }
  *rd_out = &l->rd.h.pipe;
  *wr_out = &l->wr.h.pipe;
  *out = l;
  return 0;
}

/* MARK: - Operations (Public) */

int acp_uv_link_read_start(acp_uv_link *l, acp_uv_link_read_cb cb,
                           void *user_data) {
  return acp__uv_link_read_start_buf(l, cb, NULL, user_data);
}

int acp__uv_link_read_start_buf(acp_uv_link *l, acp_uv_link_read_cb cb,
                                acp__uv_link_buf_fn buf_fn, void *user_data) {
  if (!l || !cb)
    return ACP_ERR_INVALID_ARGUMENT;
  if (l->state != ST_OPEN || l->rd.kind == SIDE_NONE || l->rd.closed ||
      l->rd_done)
    return ACP_ERR_CLOSED;
  l->read_cb = cb;
  l->buf_fn = buf_fn;
  l->read_ud = user_data;
  l->pause &= ~(unsigned)ACP__UV_PAUSE_USER;
  return update_reading(l);
}

void acp_uv_link_read_stop(acp_uv_link *l) {
  if (l)
    acp__uv_link_pause(l, ACP__UV_PAUSE_USER, true);
}

void acp__uv_link_pause(acp_uv_link *l, unsigned reason, bool on) {
  if (on)
    l->pause |= reason;
  else
    l->pause &= ~reason;
  if (l->state == ST_OPEN)
    update_reading(l);
}

int acp_uv_link_is_reading(const acp_uv_link *l) {
  return l && want_read(l) ? 1 : 0;
}

/*
 * The descriptor a write with nothing queued may go to directly, or -1.
 * uv_try_write() on an idle pipe is one write(2) on the same non-blocking
 * descriptor, after checks that cost ~110 instructions a message (a tenth
 * of libuv's share of a 5 B prompt turn); the same checks stay here: a
 * pipe (libuv's own pipes are non-blocking; a TTY or a TCP socket keeps
 * uv_try_write()), libuv's queue empty, not connecting. Whatever the
 * direct write does not take (EAGAIN, a short write, an error) takes the
 * usual way, which reports errors as before.
 */
static int direct_fd(acp_uv_link *l) {
  uv_stream_t *st = l->wr.stream;

  if (l->wr_fd == -2) {
    uv_os_fd_t fd;

    l->wr_fd = -1;
    if (st->type == UV_NAMED_PIPE && !((uv_pipe_t *)st)->ipc &&
        uv_fileno((uv_handle_t *)st, &fd) == 0)
      l->wr_fd = fd;
  }
  if (st->write_queue_size != 0 || st->connect_req != NULL)
    return -1;
  return l->wr_fd;
}

/* Copy bufs[0..n) from byte `skip` on into dst. */
static void gather(char *dst, const uv_buf_t *bufs, size_t n, size_t skip) {
  size_t i;
  for (i = 0; i < n; i++) {
    size_t bl = bufs[i].len;
    if (skip >= bl) {
      skip -= bl;
      continue;
    }
    memcpy(dst, bufs[i].base + skip, bl - skip);
    dst += bl - skip;
    skip = 0;
  }
}

/*
 * Write the concatenation of bufs[0..n) (len bytes in all). A stream with
 * nothing queued gets them at once from where they lie (one writev), and
 * only what the kernel did not take is copied into a write request.
 */
static int write_bufs(acp_uv_link *l, const uv_buf_t *bufs, size_t n,
                      size_t len) {
  size_t total;
  size_t skip = 0;
  if (l->wr.kind == SIDE_NONE || l->state != ST_OPEN || l->wr_shut_req ||
      l->wr_ended || l->write_err != 0)
    return ACP_ERR_CLOSED;
  if (len == 0)
    return 0;
  if (len > UINT32_MAX)
    return ACP_ERR_NOMEM;
  if (l->wr.kind == SIDE_USER && n > 1) {
    /* A user transport takes one buffer: the pieces, joined. */
    char *tmp = acp__malloc(&l->mem, len);
    uv_buf_t one;
    int r;
    if (!tmp)
      return ACP_ERR_NOMEM;
    gather(tmp, bufs, n, 0);
    one.base = tmp;
    one.len = len;
    r = write_bufs(l, &one, 1, len);
    acp__free(&l->mem, tmp);
    return r;
  }
  if (l->wr.kind == SIDE_USER) {
    /* Counted before the op runs: the transport may report bytes sent
     * from inside it (a socket that took them at once). */
    l->queued += len;
    l->nwrites = 1;
    int r = l->ops.write(l, bufs[0].base, len, l->ops_ud);
    if (r != 0) {
      l->queued -= len < l->queued ? len : l->queued;
      if (l->queued == 0)
        l->nwrites = 0;
      return r;
    }
    check_high(l);
    return 0;
  }
  if (l->wr.kind == SIDE_STREAM) {
    fit_pipe(l, len);
    if (l->nwrites == 0) {
      /* Nothing is queued: hand the kernel what it takes now, straight
       * from the caller's bytes, and copy only the rest into a write
       * request. Usually that is all of it (a small message, or a big
       * one into a grown pipe with room): no copy, no allocation. */
      int r = uv_try_write(l->wr.stream, bufs, (unsigned)n);
      if (r > 0 && (size_t)r == len)
        return 0;
      if (r > 0)
        skip = (size_t)r;
      /* UV_EAGAIN, or an error that uv_write() below reports as usual. */
    }
  }
  len -= skip;
  if (acp__add_overflow(sizeof(wreq), len, &total) != 0)
    return ACP_ERR_NOMEM;
  wreq *w;
  if (l->spare != NULL && l->spare->cap >= len) {
    w = l->spare;
    l->spare = NULL;
  } else {
    w = acp__malloc(&l->mem, total);
    if (!w)
      return ACP_ERR_NOMEM;
    w->cap = len;
  }
  gather(w->data, bufs, n, skip);
  w->link = l;
  w->len = len;
  w->off = 0;
  w->next = NULL;
  if (l->wr.kind == SIDE_STREAM) {
    uv_buf_t buf = uv_buf_init(w->data, (unsigned)len);
    int r = uv_write(&w->u.w, l->wr.stream, &buf, 1, on_write);
    if (r < 0) {
      wreq_release(l, w);
      l->write_err = r;
      return ACP_ERR_SYSTEM;
    }
    l->queued += len;
    l->nwrites++;
  } else {
    if (l->fq_tail)
      l->fq_tail->next = w;
    else
      l->fq_head = w;
    l->fq_tail = w;
    l->queued += len;
    l->nwrites++;
    if (!l->fs_wbusy)
      issue_fs_write(l);
  }
  check_high(l);
  return 0;
}

int acp_uv_link_write(acp_uv_link *l, const char *data, size_t len) {
  uv_buf_t b;
  if (!l || (!data && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  if (l->wr.kind == SIDE_STREAM && l->nwrites == 0 && len > 0 && len <= 65536 &&
      l->state == ST_OPEN && !l->wr_shut_req && !l->wr_ended &&
      l->write_err == 0) {
    /* The common small message, nothing queued: straight to the kernel,
     * as write_bufs() would, without its generality. */
    int r;
    int fd = direct_fd(l);

    if (fd >= 0) {
      ssize_t w;

      do
        w = write(fd, data, len);
      while (w < 0 && errno == EINTR);
      if (w > 0 && (size_t)w == len)
        return 0;
      if (w > 0) {
        data += w;
        len -= (size_t)w;
      }
      goto rest;
    }
    b = uv_buf_init((char *)data, (unsigned)len);
    r = uv_try_write(l->wr.stream, &b, 1);
    if (r > 0 && (size_t)r == len)
      return 0;
    if (r > 0) {
      data += r;
      len -= (size_t)r;
    }
  }
rest:
  b.base = (char *)data;
  b.len = len;
  return write_bufs(l, &b, 1, len);
}

int acp__uv_link_writev(acp_uv_link *l, const uv_buf_t *bufs, size_t n) {
  size_t len = 0;
  size_t i;
  if (!l || (!bufs && n > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  for (i = 0; i < n; i++) {
    if (!bufs[i].base && bufs[i].len > 0)
      return ACP_ERR_INVALID_ARGUMENT;
    if (acp__add_overflow(len, bufs[i].len, &len) != 0)
      return ACP_ERR_NOMEM;
  }
  return write_bufs(l, bufs, n, len);
}

int acp__uv_link_writes_stream(const acp_uv_link *l) {
  return l != NULL && l->wr.kind == SIDE_STREAM;
}

size_t acp_uv_link_write_queue_size(const acp_uv_link *l) {
  return l ? l->queued : 0;
}

int acp_uv_link_write_error(const acp_uv_link *l) {
  return l ? l->write_err : 0;
}

int acp_uv_link_shutdown(acp_uv_link *l) {
  if (!l)
    return ACP_ERR_INVALID_ARGUMENT;
  if (l->state != ST_OPEN)
    return ACP_ERR_CLOSED;
  if (l->wr_shut_req || l->wr.kind == SIDE_NONE)
    return 0;
  l->wr_shut_req = true;
  if (l->nwrites == 0)
    end_write_side(l);
  return 0;
}

void acp_uv_link_close(acp_uv_link *l, uint64_t flush_timeout_ms,
                       acp_uv_link_close_cb cb, void *user_data) {
  if (!l || l->state == ST_CLOSING)
    return;
  if (l->state == ST_FLUSHING) {
    if (flush_timeout_ms == 0)
      do_close(l);
    return;
  }
  l->close_cb = cb;
  l->close_ud = user_data;
  l->state = ST_FLUSHING;
  update_reading(l);
  if (l->nwrites == 0 || flush_timeout_ms == 0 || l->write_err != 0) {
    do_close(l);
    return;
  }
  if (flush_timeout_ms != ACP_UV_FOREVER)
    uv_timer_start(&l->timer, on_flush_timeout, flush_timeout_ms, 0);
}

acp_uv_link *acp__uv_link_src(const acp_uv_link *dst) {
  return dst->src;
}

void acp_uv_link_set_close_code(acp_uv_link *l, int code) {
  if (l)
    l->close_code = code;
}

int acp_uv_link_close_code(const acp_uv_link *l) {
  return l ? l->close_code : 0;
}

uv_loop_t *acp_uv_link_loop(const acp_uv_link *l) {
  return l ? l->loop : NULL;
}

/* MARK: - Process-wide helpers (Public) */

int acp_uv_ignore_sigpipe(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGPIPE, &sa, NULL) == 0 ? 0 : ACP_ERR_SYSTEM;
}

void acp_uv_link_set_spare_max(acp_uv_link *l, size_t bytes) {
  if (l == NULL)
    return;
  l->spare_max = bytes;
  if (l->spare != NULL && l->spare->cap > bytes) {
    acp__free(&l->mem, l->spare);
    l->spare = NULL;
  }
}

/* MARK: - User links (Public) */

int acp_uv_link_new_user(acp_uv_link **out, uv_loop_t *loop,
                         const acp_uv_link_ops *ops, void *user_data,
                         const acp_mem *mem) {
  acp_uv_link *l = NULL;
  int rv;
  if (out)
    *out = NULL;
  if (!out || !loop || !ops || !ops->write)
    return ACP_ERR_INVALID_ARGUMENT;
  rv = link_alloc(&l, loop, mem);
  if (rv != 0)
    return rv;
  l->rd.kind = SIDE_USER;
  l->wr.kind = SIDE_USER;
  l->same = true;
  l->ops = *ops;
  l->ops_ud = user_data;
  *out = l;
  return 0;
}

void *acp__uv_link_user_data(const acp_uv_link *l,
                             int (*write)(acp_uv_link *, const char *, size_t,
                                          void *)) {
  if (l->wr.kind != SIDE_USER || l->ops.write != write)
    return NULL;
  return l->ops_ud;
}

int acp_uv_link_user_deliver(acp_uv_link *l, const char *data, size_t len) {
  if (!l || l->rd.kind != SIDE_USER || (!data && len > 0))
    return ACP_ERR_INVALID_ARGUMENT;
  if (!want_read(l))
    return ACP_ERR_PAUSE;
  if (len > 0)
    l->read_cb(l, 0, data, len, l->read_ud);
  return 0;
}

void acp_uv_link_user_end(acp_uv_link *l, int status) {
  if (!l || l->rd.kind != SIDE_USER || l->rd_done || l->state == ST_CLOSING)
    return;
  deliver_end(l, status < 0 ? status : UV_EOF);
}

void acp_uv_link_user_written(acp_uv_link *l, size_t len) {
  if (!l || l->wr.kind != SIDE_USER)
    return;
  l->queued = len < l->queued ? l->queued - len : 0;
  if (l->queued == 0)
    l->nwrites = 0;
  if (l->state != ST_CLOSING)
    after_write_done(l);
}

void acp_uv_link_user_write_failed(acp_uv_link *l, int uv_err) {
  if (!l || l->wr.kind != SIDE_USER)
    return;
  if (l->write_err == 0)
    l->write_err = uv_err < 0 ? uv_err : UV_EPIPE;
  acp_uv_link_user_written(l, l->queued);
}
