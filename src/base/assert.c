/* assert.c — assertion failure and backtraces. */
#include "base/assert.h"

#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"

void st_backtrace(void)
{
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
}

_Noreturn void st_assert_fail(const char *expr, const char *file, int line, const char *func)
{
    st_log(ST_LOG_FATAL, "assertion failed: %s (%s:%d, %s)", expr, file, line, func);
    st_backtrace();
    abort();
}
