/*
 * Private descriptor format shared by the generated tables
 * (src/acp/gen_types.c, written by tools/gen_acp.py) and the generic codec
 * runtime (src/acp/codec.c). Not installed.
 *
 * A type descriptor describes either an object struct (a list of fields at
 * offsets) or a union struct (a tag, one pointer per variant and the
 * discriminator property). The runtime walks these tables to decode a parsed
 * JSON value into a struct and to encode a struct back.
 */
#ifndef ACP_CODEC_INT_H
#define ACP_CODEC_INT_H

#include <stddef.h>
#include <stdint.h>

#include "acp/types.h"

/* Field type codes. */
enum {
  ACP__FT_STR = 1, /* acp_str */
  ACP__FT_INT,     /* int64_t (+ bool has_ at aux when optional) */
  ACP__FT_NUM,     /* acp_num (+ bool has_ at aux when optional) */
  ACP__FT_BOOL,    /* bool (+ bool has_ at aux when optional) */
  ACP__FT_JSON,    /* const acp_json_val * */
  ACP__FT_ENUM,    /* C enum (int-sized) + acp_str raw at aux */
  ACP__FT_PTR,     /* pointer to the struct of `sub` */
  ACP__FT_ARRAY,   /* items pointer + size_t count at aux; `elem` says what */
  ACP__FT_FLATTEN  /* union struct of `sub` embedded by value; its members
                      live in the same JSON object */
};

/* Field flags. */
enum {
  ACP__FF_REQUIRED = 1,
  /* Schema says x-deserialize-default-on-error: a badly typed optional
   * member is ignored (and re-emitted verbatim) rather than an error. */
  ACP__FF_LENIENT = 2,
  /* Optional scalar: a bool presence flag lives at `aux`. */
  ACP__FF_HAS = 4
};

typedef struct acp__enum_desc {
  const char *name;      /* schema name */
  const acp_str *values; /* value i+1 has wire string values[i] */
  size_t count;
  bool open; /* unknown strings are kept (raw) instead of rejected */
} acp__enum_desc;

typedef struct acp__field {
  const char *name; /* wire name; NULL for FLATTEN */
  size_t name_len;
  uint8_t type;  /* ACP__FT_* */
  uint8_t elem;  /* ARRAY: element type (STR, INT, JSON or PTR) */
  uint8_t flags; /* ACP__FF_* */
  size_t offset;
  size_t aux;
  const acp_type_desc *sub; /* PTR, FLATTEN, ARRAY of PTR */
  const acp__enum_desc *en; /* ENUM */
} acp__field;

typedef struct acp__variant {
  const char *tag; /* discriminator value, or NULL when untagged */
  size_t tag_len;
  const acp_type_desc *type; /* NULL: the variant is the tag alone */
  size_t offset;             /* offset of the variant's pointer member */
} acp__variant;

enum { ACP__KIND_OBJECT = 1, ACP__KIND_UNION = 2 };

struct acp_type_desc {
  const char *name; /* schema $defs name */
  uint8_t kind;     /* ACP__KIND_* */
  size_t size;      /* sizeof the C struct */
  size_t raw_offset;
  /* objects */
  const acp__field *fields;
  size_t nfields;
  /* unions: tag value i+1 selects variants[i] */
  const char *disc; /* discriminator property, or NULL */
  size_t disc_len;
  /* The discriminator may be absent or null: no variant (kind 0), the
   * members kept in raw. */
  bool disc_optional;
  const acp__variant *variants;
  size_t nvariants;
  size_t tag_offset;
  const acp__enum_desc *tags;
};

/* Generic enum helpers used by the generated acp_<enum>_from_str/_to_str. */
int acp__enum_from_str(const acp__enum_desc *e, const char *s, size_t len);
const char *acp__enum_to_str(const acp__enum_desc *e, int v);

/* Every generated type descriptor, for acp_type_by_name(). */
extern const acp_type_desc *const acp__all_types[];
extern const size_t acp__all_types_count;
/* Every struct type of the v2 schema (own and shared with v1), sorted by
 * schema name, for acp_type_by_name_version() (src/acp/gen_types_v2.c). */
extern const acp_type_desc *const acp__all_types_v2[];
extern const size_t acp__all_types_v2_count;

/* The members a method's params must carry, from the schema's `required`
 * (generated): space-separated "<t>:<name>", t one of s a o i; "" when none
 * or when the handler checks (mcp/connect, mcp/message) or for an unknown
 * id. Static storage. */
const char *acp__method_required_params(int method_id);
/* The same for the table of one protocol version (src/acp/gen_methods.c):
 * version 2 reads the v2 schema's required members, any other version the
 * v1 ones. "" for a method the version does not have. */
const char *acp__method_required_params_version(int version, int method_id);

#endif /* ACP_CODEC_INT_H */
