/*
 * assert.h — always-on assertions.
 *
 * ST_ASSERT is checked in every build; on failure it logs the expression, file and line and a
 * backtrace, then aborts. ST_DEBUG_ASSERT is for costly invariant checks and runs only in debug
 * and test builds (ST_DEBUG_BUILD). Never assert on bytes from the network or the disk: those are
 * errors, not bugs.
 */
#ifndef ST_BASE_ASSERT_H
#define ST_BASE_ASSERT_H

_Noreturn void st_assert_fail(const char *expr, const char *file, int line, const char *func);

#define ST_ASSERT(e) ((e) ? (void)0 : st_assert_fail(#e, __FILE__, __LINE__, __func__))

#ifdef ST_DEBUG_BUILD
#define ST_DEBUG_ASSERT(e) ST_ASSERT(e)
#else
#define ST_DEBUG_ASSERT(e) ((void)0)
#endif

/* Prints a backtrace of the calling thread to standard error. */
void st_backtrace(void);

#endif
