/* peer_io.h — socket helpers the replica tests' fake brokers share. */
#ifndef ST_TEST_REPLICA_PEER_IO_H
#define ST_TEST_REPLICA_PEER_IO_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

/* Reads exactly n bytes within timeout_ms per wait; false on timeout or end of stream. */
static inline bool read_full(int fd, uint8_t *p, size_t n, int timeout_ms)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, timeout_ms) <= 0)
            return false;
        ssize_t r = read(fd, p + got, n - got);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

#endif
