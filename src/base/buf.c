/* buf.c — growable byte buffer. */
#include "base/buf.h"

#include <errno.h>
#include <stdlib.h>

void st_buf_init(st_buf_t *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->oom = false;
}

void st_buf_fini(st_buf_t *b)
{
    free(b->data);
    st_buf_init(b);
}

int st_buf_reserve(st_buf_t *b, size_t n)
{
    if (b->oom)
        return -ENOMEM;
    if (b->cap - b->len >= n)
        return 0;
    if (n > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return -ENOMEM;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n)
        cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return -ENOMEM;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

int st_buf_append(st_buf_t *b, const void *p, size_t n)
{
    if (n == 0)
        return b->oom ? -ENOMEM : 0;
    int rc = st_buf_reserve(b, n);
    if (rc)
        return rc;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

uint8_t *st_buf_extend(st_buf_t *b, size_t n)
{
    if (st_buf_reserve(b, n ? n : 1))
        return NULL;
    uint8_t *p = b->data + b->len;
    memset(p, 0, n);
    b->len += n;
    return p;
}

uint8_t *st_buf_steal(st_buf_t *b, size_t *len)
{
    uint8_t *d = b->data;
    if (len)
        *len = b->len;
    st_buf_init(b);
    return d;
}
