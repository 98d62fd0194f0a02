/*
 * The generic, table-driven codec for the generated ACP types: an arena
 * allocator, a decoder from parsed JSON values into structs and an encoder
 * from structs to an acp_json_writer. The tables come from gen_types.c.
 */
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "codec_int.h"
#include "acp/methods.h"
#include "acp/types_v2.h"
#include "internal.h"

/* MARK: - Arena */

typedef struct arena_block {
  struct arena_block *next;
  size_t size; /* usable bytes after the header */
  size_t used;
} arena_block;

struct acp_arena {
  acp_mem mem;
  arena_block *head;
};

#define ARENA_ALIGN alignof(max_align_t)
#define ARENA_HDR                                                              \
  ((sizeof(arena_block) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN)
#define ARENA_MIN_BLOCK 4096

int acp_arena_new(acp_arena **out, const acp_mem *mem) {
  acp_arena *a;
  acp_mem m;

  if (out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  *out = NULL;
  acp__mem_init(&m, mem);
  a = acp__calloc(&m, 1, sizeof(*a));
  if (a == NULL)
    return ACP_ERR_NOMEM;
  a->mem = m;
  *out = a;
  return 0;
}

static void free_blocks(acp_arena *a, arena_block *b) {
  while (b != NULL) {
    arena_block *next = b->next;
    acp__free(&a->mem, b);
    b = next;
  }
}

void acp_arena_free(acp_arena *a) {
  if (a == NULL)
    return;
  free_blocks(a, a->head);
  acp__free(&a->mem, a);
}

void acp_arena_reset(acp_arena *a) {
  arena_block *keep;

  if (a == NULL || a->head == NULL)
    return;
  /* Keep the most recent (largest) block. */
  keep = a->head;
  free_blocks(a, keep->next);
  keep->next = NULL;
  keep->used = 0;
}

void *acp_arena_alloc(acp_arena *a, size_t size) {
  arena_block *b;
  size_t need, bsize, total;
  char *p;

  if (a == NULL)
    return NULL;
  if (acp__add_overflow(size, ARENA_ALIGN - 1, &need) != 0)
    return NULL;
  need = need / ARENA_ALIGN * ARENA_ALIGN;
  if (need == 0)
    need = ARENA_ALIGN;
  b = a->head;
  if (b == NULL || b->size - b->used < need) {
    bsize = ARENA_MIN_BLOCK;
    if (b != NULL && b->size < SIZE_MAX / 2)
      bsize = b->size * 2;
    if (bsize < need)
      bsize = need;
    if (acp__add_overflow(bsize, ARENA_HDR, &total) != 0)
      return NULL;
    b = acp__malloc(&a->mem, total);
    if (b == NULL)
      return NULL;
    b->size = bsize;
    b->used = 0;
    b->next = a->head;
    a->head = b;
  }
  p = (char *)b + ARENA_HDR + b->used;
  b->used += need;
  memset(p, 0, size);
  return p;
}

/* MARK: - Enums and descriptors */

int acp__enum_from_str(const acp__enum_desc *e, const char *s, size_t len) {
  size_t i;

  if (s == NULL)
    return 0;
  for (i = 0; i < e->count; i++)
    if (e->values[i].len == len && memcmp(e->values[i].ptr, s, len) == 0)
      return (int)i + 1;
  return 0;
}

const char *acp__enum_to_str(const acp__enum_desc *e, int v) {
  if (v <= 0 || (size_t)v > e->count)
    return NULL;
  return e->values[v - 1].ptr;
}

/* Binary search of a generated list sorted by schema name. */
static const acp_type_desc *type_in(const acp_type_desc *const *list, size_t n,
                                    const char *name) {
  size_t lo = 0, hi = n;

  if (name == NULL)
    return NULL;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(name, list[mid]->name);
    if (c == 0)
      return list[mid];
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

const acp_type_desc *acp_type_by_name(const char *name) {
  return type_in(acp__all_types, acp__all_types_count, name);
}

const acp_type_desc *acp_type_by_name_version(int version, const char *name) {
  if (version == ACP_PROTOCOL_V1)
    return acp_type_by_name(name);
  if (version == ACP_PROTOCOL_V2)
    return type_in(acp__all_types_v2, acp__all_types_v2_count, name);
  return NULL;
}

const char *acp_type_name(const acp_type_desc *t) {
  return t != NULL ? t->name : NULL;
}

size_t acp_type_size(const acp_type_desc *t) {
  return t != NULL ? t->size : 0;
}

/* MARK: - Decoding */

#define PATH_MAX_LEN 256

typedef struct dec_ctx {
  acp_arena *arena;
  unsigned flags; /* ACP_DECODE_* */
  char *errbuf;
  size_t errcap;
  char path[PATH_MAX_LEN];
  size_t path_len;
} dec_ctx;

#define AT(base, off) ((void *)((char *)(base) + (off)))
#define CAT(base, off) ((const void *)((const char *)(base) + (off)))

static size_t path_push_key(dec_ctx *c, const char *name, size_t len) {
  size_t old = c->path_len;
  int n;

  if (old >= sizeof(c->path) - 1)
    return old;
  n = snprintf(c->path + old, sizeof(c->path) - old, "%s%.*s",
               old > 0 ? "." : "", (int)len, name);
  if (n > 0)
    c->path_len = old + (size_t)n < sizeof(c->path) ? old + (size_t)n
                                                    : sizeof(c->path) - 1;
  return old;
}

static size_t path_push_index(dec_ctx *c, size_t i) {
  size_t old = c->path_len;
  int n;

  if (old >= sizeof(c->path) - 1)
    return old;
  n = snprintf(c->path + old, sizeof(c->path) - old, "[%zu]", i);
  if (n > 0)
    c->path_len = old + (size_t)n < sizeof(c->path) ? old + (size_t)n
                                                    : sizeof(c->path) - 1;
  return old;
}

static void path_pop(dec_ctx *c, size_t old) {
  c->path_len = old;
  c->path[old] = '\0';
}

static int fail(dec_ctx *c, const char *msg) {
  if (c->errbuf != NULL && c->errcap > 0) {
    if (c->path_len > 0)
      snprintf(c->errbuf, c->errcap, "%s: %s", c->path, msg);
    else
      snprintf(c->errbuf, c->errcap, "%s", msg);
  }
  return ACP_ERR_PARSE;
}

static int fail_nomem(dec_ctx *c) {
  if (c->errbuf != NULL && c->errcap > 0)
    snprintf(c->errbuf, c->errcap, "out of memory");
  return ACP_ERR_NOMEM;
}

static int decode_str(dec_ctx *c, const acp_json_val *v, acp_str *out) {
  size_t len = 0;
  char *buf;
  int rv;

  if (acp_json_type_of(v) != ACP_JSON_STRING)
    return fail(c, "expected string");
  if (!acp_json_str_has_escapes(v)) {
    out->ptr = acp_json_str_raw(v, &out->len);
    return 0;
  }
  rv = acp_json_str_unescape(v, NULL, 0, &len);
  if (rv != 0 && rv != ACP_ERR_BUFFER)
    return fail(c, "bad string");
  if (len == SIZE_MAX)
    return fail_nomem(c);
  buf = acp_arena_alloc(c->arena, len + 1);
  if (buf == NULL)
    return fail_nomem(c);
  rv = acp_json_str_unescape(v, buf, len + 1, &len);
  if (rv != 0)
    return fail(c, "bad string");
  out->ptr = buf;
  out->len = len;
  return 0;
}

static int decode_type(dec_ctx *c, const acp_type_desc *t,
                       const acp_json_val *v, void *out);

/* Decode one value of field type `type` (not FLATTEN, not ARRAY) at dst. */
static int decode_one(dec_ctx *c, uint8_t type, const acp_type_desc *sub,
                      const acp_json_val *v, void *dst) {
  int rv;

  switch (type) {
  case ACP__FT_STR:
    return decode_str(c, v, dst);
  case ACP__FT_INT:
    rv = acp_json_get_int64(v, dst);
    if (rv == ACP_ERR_RANGE)
      return fail(c, "integer out of range");
    if (rv != 0)
      return fail(c, "expected integer");
    return 0;
  case ACP__FT_NUM: {
    acp_num *n = dst;
    if (acp_json_type_of(v) != ACP_JSON_NUMBER)
      return fail(c, "expected number");
    if (acp_json_get_double(v, &n->value) != 0)
      return fail(c, "number out of range");
    n->raw.ptr = acp_json_raw(v, &n->raw.len);
    return 0;
  }
  case ACP__FT_BOOL:
    if (acp_json_get_bool(v, dst) != 0)
      return fail(c, "expected boolean");
    return 0;
  case ACP__FT_JSON:
    *(const acp_json_val **)dst = v;
    return 0;
  case ACP__FT_PTR: {
    void *p;
    if (acp_json_type_of(v) != ACP_JSON_OBJECT)
      return fail(c, "expected object");
    p = acp_arena_alloc(c->arena, sub->size);
    if (p == NULL)
      return fail_nomem(c);
    *(void **)dst = p;
    return decode_type(c, sub, v, p);
  }
  default:
    return ACP_ERR_INTERNAL;
  }
}

static size_t elem_size(const acp__field *f) {
  switch (f->elem) {
  case ACP__FT_STR:
    return sizeof(acp_str);
  case ACP__FT_INT:
    return sizeof(int64_t);
  case ACP__FT_JSON:
    return sizeof(const acp_json_val *);
  case ACP__FT_PTR:
    return f->sub->size;
  default:
    return 0;
  }
}

static int decode_array(dec_ctx *c, const acp__field *f, const acp_json_val *v,
                        void *base) {
  size_t n, size, total, i;
  const acp_json_val *e;
  char *items;
  int rv;

  if (acp_json_type_of(v) != ACP_JSON_ARRAY)
    return fail(c, "expected array");
  n = acp_json_len(v);
  size = elem_size(f);
  if (size == 0)
    return ACP_ERR_INTERNAL;
  if (acp__mul_overflow(n, size, &total) != 0)
    return fail_nomem(c);
  items = acp_arena_alloc(c->arena, total);
  if (items == NULL)
    return fail_nomem(c);
  *(void **)AT(base, f->offset) = items;
  *(size_t *)AT(base, f->aux) = n;
  for (i = 0, e = acp_json_child(v); e != NULL; i++, e = acp_json_next(e)) {
    size_t old = path_push_index(c, i);
    if (f->elem == ACP__FT_PTR) {
      if (acp_json_type_of(e) != ACP_JSON_OBJECT)
        rv = fail(c, "expected object");
      else
        rv = decode_type(c, f->sub, e, items + i * size);
    } else {
      rv = decode_one(c, f->elem, NULL, e, items + i * size);
    }
    if (rv != 0)
      return rv;
    path_pop(c, old);
  }
  return 0;
}

/* Reset a field to "absent" after a lenient failure. */
static void clear_field(const acp__field *f, void *base) {
  switch (f->type) {
  case ACP__FT_STR:
    memset(AT(base, f->offset), 0, sizeof(acp_str));
    break;
  case ACP__FT_INT:
    memset(AT(base, f->offset), 0, sizeof(int64_t));
    break;
  case ACP__FT_NUM:
    memset(AT(base, f->offset), 0, sizeof(acp_num));
    break;
  case ACP__FT_BOOL:
    memset(AT(base, f->offset), 0, sizeof(bool));
    break;
  case ACP__FT_ENUM:
    memset(AT(base, f->offset), 0, sizeof(int));
    memset(AT(base, f->aux), 0, sizeof(acp_str));
    break;
  case ACP__FT_ARRAY:
    memset(AT(base, f->aux), 0, sizeof(size_t));
    /* fall through */
  default:
    memset(AT(base, f->offset), 0, sizeof(void *));
    break;
  }
  if (f->flags & ACP__FF_HAS)
    *(bool *)AT(base, f->aux) = false;
}

static int decode_enum(dec_ctx *c, const acp__field *f, const acp_json_val *v,
                       void *base) {
  const acp__enum_desc *e = f->en;
  size_t i;
  int rv;

  if (acp_json_type_of(v) != ACP_JSON_STRING)
    return fail(c, "expected string");
  for (i = 0; i < e->count; i++) {
    if (acp_json_str_eq(v, e->values[i].ptr, e->values[i].len)) {
      *(int *)AT(base, f->offset) = (int)i + 1;
      return 0;
    }
  }
  if (!e->open)
    return fail(c, "unknown enum value");
  rv = decode_str(c, v, AT(base, f->aux));
  if (rv != 0)
    return rv;
  *(int *)AT(base, f->offset) = 0;
  return 0;
}

static int decode_union_into(dec_ctx *c, const acp_type_desc *t,
                             const acp_json_val *v, void *out);

static int decode_field(dec_ctx *c, const acp__field *f, const acp_json_val *v,
                        void *base) {
  switch (f->type) {
  case ACP__FT_ENUM:
    return decode_enum(c, f, v, base);
  case ACP__FT_ARRAY:
    return decode_array(c, f, v, base);
  default:
    return decode_one(c, f->type, f->sub, v, AT(base, f->offset));
  }
}

static int decode_object(dec_ctx *c, const acp_type_desc *t,
                         const acp_json_val *v, void *out) {
  size_t i;
  int rv;

  *(const acp_json_val **)AT(out, t->raw_offset) = v;
  for (i = 0; i < t->nfields; i++) {
    const acp__field *f = &t->fields[i];
    const acp_json_val *m;
    size_t old;

    if (f->type == ACP__FT_FLATTEN) {
      rv = decode_union_into(c, f->sub, v, AT(out, f->offset));
      if (rv != 0)
        return rv;
      continue;
    }
    m = acp_json_obj_get(v, f->name, f->name_len);
    old = path_push_key(c, f->name, f->name_len);
    if (m == NULL) {
      if ((f->flags & ACP__FF_REQUIRED) && !(c->flags & ACP_DECODE_LENIENT))
        return fail(c, "missing required member");
      path_pop(c, old);
      continue;
    }
    if (acp_json_type_of(m) == ACP_JSON_NULL &&
        !(f->flags & ACP__FF_REQUIRED)) {
      /* Absent; acp_encode() re-emits the null from raw. */
      path_pop(c, old);
      continue;
    }
    rv = decode_field(c, f, m, out);
    if (rv == ACP_ERR_PARSE && (f->flags & ACP__FF_LENIENT)) {
      clear_field(f, out);
      rv = 0;
    }
    if (rv != 0)
      return rv;
    if (f->flags & ACP__FF_HAS)
      *(bool *)AT(out, f->aux) = true;
    path_pop(c, old);
  }
  return 0;
}

/* True if every required member of object type t is present in v. */
static bool required_present(const acp_type_desc *t, const acp_json_val *v) {
  size_t i;

  for (i = 0; i < t->nfields; i++) {
    const acp__field *f = &t->fields[i];
    if (f->type == ACP__FT_FLATTEN || !(f->flags & ACP__FF_REQUIRED))
      continue;
    if (acp_json_obj_get(v, f->name, f->name_len) == NULL)
      return false;
  }
  return true;
}

static int decode_variant(dec_ctx *c, const acp_type_desc *t, size_t i,
                          const acp_json_val *v, void *out) {
  const acp__variant *var = &t->variants[i];
  void *p;

  *(int *)AT(out, t->tag_offset) = (int)i + 1;
  if (var->type == NULL)
    return 0;
  p = acp_arena_alloc(c->arena, var->type->size);
  if (p == NULL)
    return fail_nomem(c);
  *(void **)AT(out, var->offset) = p;
  /* A variant may itself be a union over the same object (v2's
   * state_update is a StateUpdate, tagged by `state`). */
  if (var->type->kind == ACP__KIND_UNION)
    return decode_union_into(c, var->type, v, p);
  return decode_object(c, var->type, v, p);
}

/* Decode the union t from the members of object v into out. */
static int decode_union_into(dec_ctx *c, const acp_type_desc *t,
                             const acp_json_val *v, void *out) {
  const acp_json_val *d = NULL;
  size_t i;

  *(const acp_json_val **)AT(out, t->raw_offset) = v;
  if (t->disc != NULL)
    d = acp_json_obj_get(v, t->disc, t->disc_len);
  if (t->disc_optional && (d == NULL || acp_json_type_of(d) == ACP_JSON_NULL))
    return 0; /* no variant; a null is re-emitted from raw */
  if (d != NULL) {
    if (acp_json_type_of(d) != ACP_JSON_STRING) {
      size_t old = path_push_key(c, t->disc, t->disc_len);
      int rv = fail(c, "expected string");
      path_pop(c, old);
      return rv;
    }
    for (i = 0; i < t->nvariants; i++) {
      const acp__variant *var = &t->variants[i];
      if (var->tag != NULL && acp_json_str_eq(d, var->tag, var->tag_len))
        return decode_variant(c, t, i, v, out);
    }
    /* An unknown tag: kept whole in raw, re-emitted verbatim. */
    return 0;
  }
  for (i = 0; i < t->nvariants; i++) {
    const acp__variant *var = &t->variants[i];
    if (var->tag == NULL && var->type != NULL && required_present(var->type, v))
      return decode_variant(c, t, i, v, out);
  }
  if (t->disc != NULL) {
    size_t old = path_push_key(c, t->disc, t->disc_len);
    int rv = fail(c, "missing required member");
    path_pop(c, old);
    return rv;
  }
  return fail(c, "no variant matches");
}

static int decode_type(dec_ctx *c, const acp_type_desc *t,
                       const acp_json_val *v, void *out) {
  if (acp_json_type_of(v) != ACP_JSON_OBJECT)
    return fail(c, "expected object");
  if (t->kind == ACP__KIND_UNION)
    return decode_union_into(c, t, v, out);
  return decode_object(c, t, v, out);
}

int acp_decode_named(const acp_type_desc *t, const acp_json_val *v,
                     acp_arena *a, void *out, const char *root, char *errbuf,
                     size_t errcap) {
  return acp_decode_ex(t, v, a, out, root, 0, errbuf, errcap);
}

int acp_decode_ex(const acp_type_desc *t, const acp_json_val *v, acp_arena *a,
                  void *out, const char *root, unsigned flags, char *errbuf,
                  size_t errcap) {
  dec_ctx c;

  if (errbuf != NULL && errcap > 0)
    errbuf[0] = '\0';
  if (t == NULL || a == NULL || out == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  memset(out, 0, t->size);
  c.arena = a;
  c.flags = flags;
  c.errbuf = errbuf;
  c.errcap = errcap;
  c.path[0] = '\0';
  c.path_len = 0;
  if (root != NULL && root[0] != '\0')
    path_push_key(&c, root, strlen(root));
  return decode_type(&c, t, v, out);
}

int acp_decode(const acp_type_desc *t, const acp_json_val *v, acp_arena *a,
               void *out, char *errbuf, size_t errcap) {
  return acp_decode_named(t, v, a, out, NULL, errbuf, errcap);
}

/* MARK: - Encoding */

static int encode_type(const acp_type_desc *t, const void *in,
                       acp_json_writer *w);

static bool field_is_set(const acp__field *f, const void *base) {
  switch (f->type) {
  case ACP__FT_STR:
    return ((const acp_str *)CAT(base, f->offset))->ptr != NULL;
  case ACP__FT_INT:
  case ACP__FT_NUM:
  case ACP__FT_BOOL:
    if (f->flags & ACP__FF_HAS)
      return *(const bool *)CAT(base, f->aux);
    return true;
  case ACP__FT_ENUM:
    return *(const int *)CAT(base, f->offset) != 0 ||
           ((const acp_str *)CAT(base, f->aux))->ptr != NULL;
  case ACP__FT_ARRAY:
    if (f->flags & ACP__FF_REQUIRED)
      return true;
    /* fall through */
  default:
    return *(const void *const *)CAT(base, f->offset) != NULL;
  }
}

static int encode_one(uint8_t type, const acp_type_desc *sub, const void *src,
                      acp_json_writer *w) {
  switch (type) {
  case ACP__FT_STR: {
    const acp_str *s = src;
    if (s->ptr == NULL)
      return ACP_ERR_INVALID_ARGUMENT;
    return acp_json_write_str(w, s->ptr, s->len);
  }
  case ACP__FT_INT:
    return acp_json_write_int(w, *(const int64_t *)src);
  case ACP__FT_NUM: {
    const acp_num *n = src;
    if (n->raw.ptr != NULL)
      return acp_json_write_raw(w, n->raw.ptr, n->raw.len);
    return acp_json_write_double(w, n->value);
  }
  case ACP__FT_BOOL:
    return acp_json_write_bool(w, *(const bool *)src);
  case ACP__FT_JSON: {
    const acp_json_val *v = *(const acp_json_val *const *)src;
    if (v == NULL)
      return ACP_ERR_INVALID_ARGUMENT;
    return acp_json_write_val(w, v);
  }
  case ACP__FT_PTR: {
    const void *p = *(const void *const *)src;
    if (p == NULL)
      return ACP_ERR_INVALID_ARGUMENT;
    return encode_type(sub, p, w);
  }
  default:
    return ACP_ERR_INTERNAL;
  }
}

static int encode_field(const acp__field *f, const void *base,
                        acp_json_writer *w) {
  int rv;

  switch (f->type) {
  case ACP__FT_ENUM: {
    int v = *(const int *)CAT(base, f->offset);
    const char *s = acp__enum_to_str(f->en, v);
    const acp_str *raw = CAT(base, f->aux);
    if (s != NULL)
      return acp_json_write_strz(w, s);
    if (raw->ptr == NULL)
      return ACP_ERR_INVALID_ARGUMENT;
    return acp_json_write_str(w, raw->ptr, raw->len);
  }
  case ACP__FT_ARRAY: {
    const char *items = *(const char *const *)CAT(base, f->offset);
    size_t n = *(const size_t *)CAT(base, f->aux);
    size_t size = elem_size(f), i;
    rv = acp_json_write_arr_begin(w);
    if (rv != 0)
      return rv;
    if (items == NULL)
      n = 0;
    for (i = 0; i < n; i++) {
      if (f->elem == ACP__FT_PTR)
        rv = encode_type(f->sub, items + i * size, w);
      else
        rv = encode_one(f->elem, NULL, items + i * size, w);
      if (rv != 0)
        return rv;
    }
    return acp_json_write_arr_end(w);
  }
  default:
    return encode_one(f->type, f->sub, CAT(base, f->offset), w);
  }
}

static int encode_known(const acp_type_desc *t, const void *in,
                        acp_json_writer *w);

/* Write the discriminator and the known members of a union's variant into
 * the object being written. */
static int encode_union_members(const acp_type_desc *t, const void *in,
                                acp_json_writer *w) {
  int kind = *(const int *)CAT(in, t->tag_offset);
  const acp__variant *var;
  const void *p;
  int rv;

  if (kind <= 0 || (size_t)kind > t->nvariants)
    return 0; /* unknown: its members come from raw */
  var = &t->variants[kind - 1];
  if (var->tag != NULL) {
    rv = acp_json_write_key(w, t->disc, t->disc_len);
    if (rv == 0)
      rv = acp_json_write_str(w, var->tag, var->tag_len);
    if (rv != 0)
      return rv;
  }
  if (var->type == NULL)
    return 0;
  p = *(const void *const *)CAT(in, var->offset);
  if (p == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  if (var->type->kind == ACP__KIND_UNION) /* nested, see decode_variant() */
    return encode_union_members(var->type, p, w);
  return encode_known(var->type, p, w);
}

/* True if a required field still holds nothing at all. */
static bool field_is_empty(const acp__field *f, const void *base) {
  switch (f->type) {
  case ACP__FT_INT:
    return *(const int64_t *)CAT(base, f->offset) == 0;
  case ACP__FT_NUM:
    return ((const acp_num *)CAT(base, f->offset))->raw.ptr == NULL &&
           ((const acp_num *)CAT(base, f->offset))->value == 0;
  case ACP__FT_BOOL:
    return !*(const bool *)CAT(base, f->offset);
  case ACP__FT_ENUM:
  case ACP__FT_STR:
    return !field_is_set(f, base);
  default:
    return *(const void *const *)CAT(base, f->offset) == NULL;
  }
}

/* A required member that the decoded source lacked (lenient decoding) and
 * that nobody has set since is not invented on the way out: the round trip
 * stays faithful to the source. */
static bool absent_in_source(const acp_type_desc *t, const acp__field *f,
                             const void *in) {
  const acp_json_val *raw =
      *(const acp_json_val *const *)CAT(in, t->raw_offset);

  return raw != NULL && acp_json_obj_get(raw, f->name, f->name_len) == NULL &&
         field_is_empty(f, in);
}

static int encode_known(const acp_type_desc *t, const void *in,
                        acp_json_writer *w) {
  size_t i;
  int rv;

  for (i = 0; i < t->nfields; i++) {
    const acp__field *f = &t->fields[i];
    if (f->type == ACP__FT_FLATTEN) {
      rv = encode_union_members(f->sub, CAT(in, f->offset), w);
      if (rv != 0)
        return rv;
      continue;
    }
    if ((f->flags & ACP__FF_REQUIRED) && absent_in_source(t, f, in))
      continue;
    if (!field_is_set(f, in)) {
      if (f->flags & ACP__FF_REQUIRED)
        return ACP_ERR_INVALID_ARGUMENT;
      continue;
    }
    rv = acp_json_write_key(w, f->name, f->name_len);
    if (rv == 0)
      rv = encode_field(f, in, w);
    if (rv != 0)
      return rv;
  }
  return 0;
}

static bool key_written(const acp_type_desc *t, const void *in,
                        const acp_json_val *key);

static bool union_key_written(const acp_type_desc *t, const void *in,
                              const acp_json_val *key) {
  int kind = *(const int *)CAT(in, t->tag_offset);
  const acp__variant *var;
  const void *p;

  if (kind <= 0 || (size_t)kind > t->nvariants)
    return false;
  var = &t->variants[kind - 1];
  if (var->tag != NULL && acp_json_str_eq(key, t->disc, t->disc_len))
    return true;
  if (var->type == NULL)
    return false;
  p = *(const void *const *)CAT(in, var->offset);
  if (p != NULL && var->type->kind == ACP__KIND_UNION)
    return union_key_written(var->type, p, key);
  return p != NULL && key_written(var->type, p, key);
}

/* Whether encode_known() wrote the member named `key`. */
static bool key_written(const acp_type_desc *t, const void *in,
                        const acp_json_val *key) {
  size_t i;

  for (i = 0; i < t->nfields; i++) {
    const acp__field *f = &t->fields[i];
    if (f->type == ACP__FT_FLATTEN) {
      if (union_key_written(f->sub, CAT(in, f->offset), key))
        return true;
      continue;
    }
    if (acp_json_str_eq(key, f->name, f->name_len))
      return field_is_set(f, in);
  }
  return false;
}

/* Write a parsed member name as a key. Names with escapes are decoded
 * first: on the stack when short, else with the default allocator (the
 * writer's allocator is not reachable from here; this path is rare). */
static int write_key_of(acp_json_writer *w, const acp_json_val *k) {
  char small[256];
  const acp_mem *m;
  size_t len = 0;
  char *buf;
  int rv;

  if (!acp_json_str_has_escapes(k)) {
    const char *p = acp_json_str_raw(k, &len);
    return acp_json_write_key(w, p, len);
  }
  rv = acp_json_str_unescape(k, small, sizeof(small), &len);
  if (rv == 0)
    return acp_json_write_key(w, small, len);
  if (rv != ACP_ERR_BUFFER || len == SIZE_MAX)
    return ACP_ERR_INVALID_ARGUMENT;
  m = acp_mem_default();
  buf = acp__malloc(m, len + 1);
  if (buf == NULL)
    return ACP_ERR_NOMEM;
  rv = acp_json_str_unescape(k, buf, len + 1, &len);
  if (rv == 0)
    rv = acp_json_write_key(w, buf, len);
  acp__free(m, buf);
  return rv;
}

/* Re-emit every member of raw that was not written, verbatim. Duplicate
 * members of raw are all kept. */
static int encode_rest(const acp_json_val *raw, const acp_type_desc *t,
                       const void *in, acp_json_writer *w) {
  const acp_json_val *k;
  int rv;

  if (acp_json_type_of(raw) != ACP_JSON_OBJECT)
    return 0;
  for (k = acp_json_child(raw); k != NULL;
       k = acp_json_next(acp_json_next(k))) {
    if (t->kind == ACP__KIND_UNION ? union_key_written(t, in, k)
                                   : key_written(t, in, k))
      continue;
    rv = write_key_of(w, k);
    if (rv != 0)
      return rv;
    rv = acp_json_write_val(w, acp_json_next(k));
    if (rv != 0)
      return rv;
  }
  return 0;
}

static int encode_type(const acp_type_desc *t, const void *in,
                       acp_json_writer *w) {
  const acp_json_val *raw =
      *(const acp_json_val *const *)CAT(in, t->raw_offset);
  int rv;

  if (t->kind == ACP__KIND_UNION) {
    int kind = *(const int *)CAT(in, t->tag_offset);
    if (kind <= 0 || (size_t)kind > t->nvariants) {
      if (raw == NULL)
        return ACP_ERR_INVALID_ARGUMENT;
      return acp_json_write_val(w, raw);
    }
    rv = acp_json_write_obj_begin(w);
    if (rv == 0)
      rv = encode_union_members(t, in, w);
    if (rv == 0) {
      const acp__variant *var = &t->variants[kind - 1];
      const void *p =
          var->type != NULL ? *(const void *const *)CAT(in, var->offset) : NULL;
      const acp_json_val *vraw =
          p != NULL
              ? *(const acp_json_val *const *)CAT(p, var->type->raw_offset)
              : NULL;
      rv = encode_rest(vraw != NULL ? vraw : raw, t, in, w);
    }
    if (rv == 0)
      rv = acp_json_write_obj_end(w);
    return rv;
  }
  rv = acp_json_write_obj_begin(w);
  if (rv == 0)
    rv = encode_known(t, in, w);
  if (rv == 0)
    rv = encode_rest(raw, t, in, w);
  if (rv == 0)
    rv = acp_json_write_obj_end(w);
  return rv;
}

int acp_encode(const acp_type_desc *t, const void *in, acp_json_writer *w) {
  int rv;

  if (t == NULL || in == NULL || w == NULL)
    return ACP_ERR_INVALID_ARGUMENT;
  rv = encode_type(t, in, w);
  if (rv == 0)
    rv = acp_json_writer_error(w);
  return rv;
}
