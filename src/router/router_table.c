/*
 * The router's table of requests in flight: a slab of entries with a free
 * list, indexed by (destination link, our id) in an open-addressing hash
 * with linear probing and backward-shift deletion (no tombstones).
 */
#include "router_int.h"

void rt__table_init(rt_table *t, const acp_mem *mem) {
  memset(t, 0, sizeof(*t));
  t->mem = mem;
  t->free_head = UINT32_MAX;
}

static void entry_clear(rt_table *t, rt_entry *e) {
  if (e->orig != e->orig_inline)
    acp__free(t->mem, e->orig);
  acp__free(t->mem, e->params);
  acp__free(t->mem, e->sid);
  acp__free(t->mem, e->hold);
  memset(e, 0, sizeof(*e));
}

void rt__table_dispose(rt_table *t) {
  uint32_t i;

  for (i = 0; i < t->used; i++)
    if (t->e[i].flags & RT_F_USED)
      entry_clear(t, &t->e[i]);
  acp__free(t->mem, t->e);
  acp__free(t->mem, t->slots);
  rt__table_init(t, t->mem);
}

static size_t hash_key(uint32_t dst, int64_t id) {
  uint64_t h = (uint64_t)id * UINT64_C(0x9E3779B97F4A7C15);
  h ^= (uint64_t)dst * UINT64_C(0xC2B2AE3D27D4EB4F);
  h ^= h >> 29;
  return (size_t)h;
}

static void slot_put(uint32_t *slots, size_t nslots, const rt_entry *all,
                     uint32_t idx) {
  size_t mask = nslots - 1;
  size_t i = hash_key(all[idx].dst, all[idx].id) & mask;

  while (slots[i] != 0)
    i = (i + 1) & mask;
  slots[i] = idx + 1;
}

/* Keep the hash at most half full for `want` live entries. */
static int ensure_slots(rt_table *t, uint32_t want) {
  size_t n = t->nslots ? t->nslots : 16;
  uint32_t *ns;
  size_t i;

  while (n / 2 < (size_t)want)
    n *= 2;
  if (n == t->nslots)
    return 0;
  ns = acp__calloc(t->mem, n, sizeof(*ns));
  if (ns == NULL)
    return ACP_ERR_NOMEM;
  for (i = 0; i < t->nslots; i++)
    if (t->slots[i] != 0)
      slot_put(ns, n, t->e, t->slots[i] - 1);
  acp__free(t->mem, t->slots);
  t->slots = ns;
  t->nslots = n;
  return 0;
}

int rt__table_alloc(rt_table *t, uint32_t *idx_out) {
  uint32_t idx;
  int rv;

  if (t->count == UINT32_MAX - 1)
    return ACP_ERR_LIMIT;
  rv = ensure_slots(t, t->count + 1);
  if (rv != 0)
    return rv;
  if (t->free_head != UINT32_MAX) {
    idx = t->free_head;
    t->free_head = t->e[idx].next_free;
  } else {
    if (t->used == t->cap) {
      uint32_t ncap = t->cap ? t->cap * 2 : 16;
      size_t bytes;
      rt_entry *ne;
      if (acp__mul_overflow(ncap, sizeof(*ne), &bytes) != 0)
        return ACP_ERR_NOMEM;
      ne = acp__realloc(t->mem, t->e, bytes);
      if (ne == NULL)
        return ACP_ERR_NOMEM;
      /* Inline id buffers move with the slab: re-point them. */
      for (idx = 0; idx < t->used; idx++)
        if ((ne[idx].flags & RT_F_USED) && ne[idx].orig != NULL &&
            ne[idx].orig_len <= sizeof(ne[idx].orig_inline))
          ne[idx].orig = ne[idx].orig_inline;
      t->e = ne;
      t->cap = ncap;
    }
    idx = t->used++;
  }
  memset(&t->e[idx], 0, sizeof(t->e[idx]));
  t->e[idx].flags = RT_F_USED | RT_F_FRESH;
  t->count++;
  *idx_out = idx;
  return 0;
}

int rt__entry_set_orig(rt_table *t, rt_entry *e, const char *id, size_t len) {
  if (len <= sizeof(e->orig_inline)) {
    e->orig = e->orig_inline;
  } else {
    e->orig = acp__malloc(t->mem, len);
    if (e->orig == NULL)
      return ACP_ERR_NOMEM;
  }
  memcpy(e->orig, id, len);
  e->orig_len = len;
  return 0;
}

void rt__table_index(rt_table *t, uint32_t idx) {
  t->e[idx].flags &= ~(uint32_t)RT_F_FRESH;
  slot_put(t->slots, t->nslots, t->e, idx);
}

static size_t find_slot(const rt_table *t, uint32_t dst, int64_t id) {
  size_t mask;
  size_t i;

  if (t->nslots == 0)
    return SIZE_MAX;
  mask = t->nslots - 1;
  i = hash_key(dst, id) & mask;
  while (t->slots[i] != 0) {
    const rt_entry *e = &t->e[t->slots[i] - 1];
    if (e->dst == dst && e->id == id)
      return i;
    i = (i + 1) & mask;
  }
  return SIZE_MAX;
}

uint32_t rt__table_find(const rt_table *t, uint32_t dst, int64_t id) {
  size_t s = find_slot(t, dst, id);

  return s == SIZE_MAX ? UINT32_MAX : t->slots[s] - 1;
}

static void unindex(rt_table *t, uint32_t idx) {
  size_t mask = t->nslots - 1;
  size_t i = find_slot(t, t->e[idx].dst, t->e[idx].id);
  size_t j;

  if (i == SIZE_MAX)
    return;
  /* Backward-shift deletion keeps every probe chain unbroken. */
  j = i;
  for (;;) {
    size_t home;
    j = (j + 1) & mask;
    if (t->slots[j] == 0)
      break;
    home = hash_key(t->e[t->slots[j] - 1].dst, t->e[t->slots[j] - 1].id) & mask;
    if (((j - home) & mask) >= ((j - i) & mask)) {
      t->slots[i] = t->slots[j];
      i = j;
    }
  }
  t->slots[i] = 0;
}

void rt__table_release(rt_table *t, uint32_t idx) {
  rt_entry *e = &t->e[idx];

  if (!(e->flags & RT_F_USED))
    return;
  if (!(e->flags & RT_F_FRESH))
    unindex(t, idx);
  entry_clear(t, e);
  e->next_free = t->free_head;
  t->free_head = idx;
  t->count--;
}

void rt__table_rekey(rt_table *t, uint32_t idx, int64_t id) {
  unindex(t, idx);
  t->e[idx].id = id;
  slot_put(t->slots, t->nslots, t->e, idx);
}
