/*
 * Internals of the conductor's router (src/router): the table of requests
 * in flight. Not installed.
 */
#ifndef ACP_ROUTER_INT_H
#define ACP_ROUTER_INT_H

#include "acp/router.h"
#include "internal.h"

#define RT_SELF UINT32_MAX

enum {
  RT_F_USED = 1,  /* slot holds a live entry */
  RT_F_INIT = 2,  /* an initialize (any spelling) */
  RT_F_FRESH = 4, /* reserved, not yet indexed */
  RT_F_CUT = 8    /* a session/prompt whose source died: see router.c */
};

/*
 * A session/prompt held back until the cut-off turn of its session ends
 * (RT_F_CUT). One allocation: the struct, then the id and params bytes.
 */
typedef struct rt_hold {
  uint32_t src;
  const char *id; /* raw original id */
  size_t id_len;
  const char *params; /* raw params, or NULL */
  size_t params_len;
} rt_hold;

/*
 * One request in flight: sent to `dst` with our id `id`, on behalf of `src`
 * whose own id was `orig` (exact bytes). INIT entries keep a copy of the
 * params so that a -32601 answer can be retried in another spelling.
 * Prompts sent toward the agent keep their sessionId, for the cancellation
 * that follows their source's death.
 */
typedef struct rt_entry {
  int64_t id;
  uint32_t dst;
  uint32_t src;
  uint32_t flags;
  uint32_t next_free;
  int wire; /* spelling the initialize was sent in */
  size_t orig_len;
  char *orig;
  char orig_inline[24];
  char *params; /* INIT only; NULL when the request had none */
  size_t params_len;
  char *sid; /* session/prompt toward the agent: raw sessionId, or NULL */
  size_t sid_len;
  rt_hold *hold; /* RT_F_CUT only: the next prompt of that session */
  uint32_t mcp;  /* an mcp/connect: its server (index + 1 in r->mcp), or 0 */
} rt_entry;

typedef struct rt_table {
  const acp_mem *mem;
  rt_entry *e;
  uint32_t cap;       /* entries allocated */
  uint32_t used;      /* slots ever handed out (high-water mark) */
  uint32_t count;     /* live entries */
  uint32_t free_head; /* UINT32_MAX when empty */
  uint32_t *slots;    /* hash: entry index + 1, 0 empty */
  size_t nslots;      /* power of two, or 0 */
} rt_table;

void rt__table_init(rt_table *t, const acp_mem *mem);
void rt__table_dispose(rt_table *t);
/*
 * Take a free entry (zeroed, flags RT_F_USED|RT_F_FRESH), growing the arrays
 * so that indexing it later cannot fail. 0 or ACP_ERR_NOMEM.
 */
int rt__table_alloc(rt_table *t, uint32_t *idx_out);
/* Copy the original id bytes into an entry. 0 or ACP_ERR_NOMEM. */
int rt__entry_set_orig(rt_table *t, rt_entry *e, const char *id, size_t len);
/* Index an allocated entry under (e->dst, e->id). Never fails. */
void rt__table_index(rt_table *t, uint32_t idx);
/* Find the live, indexed entry for (dst, id); UINT32_MAX if none. */
uint32_t rt__table_find(const rt_table *t, uint32_t dst, int64_t id);
/* Unindex (if indexed) and free an entry. */
void rt__table_release(rt_table *t, uint32_t idx);
/* Move an indexed entry to a new id on the same dst. Never fails. */
void rt__table_rekey(rt_table *t, uint32_t idx, int64_t id);

#endif /* ACP_ROUTER_INT_H */
