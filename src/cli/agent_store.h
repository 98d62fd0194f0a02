/*
 * Files of the reference agent's --state-dir: one `<id>.json` per session,
 * replaced atomically (a temporary file in the same folder, then rename).
 * Only file I/O; what a file holds is cmd_agent.c's business.
 */
#ifndef ACP_CLI_AGENT_STORE_H
#define ACP_CLI_AGENT_STORE_H

#include <stdbool.h>
#include <stddef.h>

/* True when `id` may name a file: 1 to 128 of [A-Za-z0-9_.-], not
 * starting with '.'. Ids the agent did not make are never files. */
bool store_id_ok(const char *id, size_t len);

/* Replace DIR/ID.json with the concatenation of `parts` (n of them, each
 * `lens[i]` bytes): written to DIR/.ID.json.tmp, flushed to disk, renamed
 * over the old file. A reader sees the old file or the new one, never a
 * part. 0, or -1 with errno set (the temporary file is removed). */
int store_write(const char *dir, const char *id, const char *const *parts,
                const size_t *lens, size_t n);

/* Read DIR/ID.json whole: *out is malloc'd (NUL-terminated, caller frees).
 * 0, or -1 with errno set. */
int store_read(const char *dir, const char *id, char **out, size_t *len);

/* Remove DIR/ID.json; a missing file is success. 0 or -1 (errno). */
int store_remove(const char *dir, const char *id);

/* The ids of DIR's `*.json` files (store_id_ok ones only), sorted, as a
 * malloc'd NULL-terminated array of malloc'd strings (free with
 * store_ids_free). 0, or -1 with errno set (DIR unreadable). */
int store_list(const char *dir, char ***out);
void store_ids_free(char **ids);

/* Create DIR (one level) when missing. 0 or -1 (errno). */
int store_mkdir(const char *dir);

#endif
