/*
 * Allocation failure injection for code that calls malloc & co. directly
 * (OpenSSL-facing modules that cannot take an acp_mem): a test linked with
 * wrapmem.c and `-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc` refuses
 * the allocation whose index is `wrapmem_fail_at`, counting from the last
 * reset of `wrapmem_count`. -1 refuses nothing. free is not wrapped, so
 * leaks are left to ASan and valgrind.
 */
#ifndef ACP_TEST_WRAPMEM_H
#define ACP_TEST_WRAPMEM_H

extern long wrapmem_fail_at; /* index of the refused allocation; -1: none */
extern long wrapmem_count;   /* allocations attempted since the reset */

/* Starts a run that refuses allocation `i` (-1: none). */
void wrapmem_arm(long i);

#endif
