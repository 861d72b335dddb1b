/*
 * out.h — an outgoing message: memory bytes with file ranges spliced in.
 *
 * The encoder writes every in-memory byte into one buffer; where a file range belongs (the
 * records of a Fetch response), it records a cut at the current buffer length. Sending walks
 * the pieces in order: mem[0..cut0), file0, mem[cut0..cut1), file1, ..., mem[cutN..len).
 * File bytes go to the socket with sendfile(2), never through user space.
 *
 * A file range holds a reference (ref + release) that keeps its descriptor open until the
 * bytes are sent or the message is dropped. Owned by one shard thread.
 */
#ifndef ST_NET_OUT_H
#define ST_NET_OUT_H

#include <stdint.h>

#include "base/buf.h"

typedef struct st_out_file {
    size_t cut; /* position in mem where this range goes */
    int fd;
    int64_t off;
    int64_t len;
    void (*release)(void *ref);
    void *ref;
} st_out_file_t;

typedef struct st_out {
    st_buf_t mem;
    st_out_file_t *files;
    int nfiles, capfiles;
    int64_t total;       /* mem.len + sum of file lengths */
    struct st_out *next; /* the connection's send queue */
} st_out_t;

st_out_t *st_out_new(void);
/* Releases file references and frees everything. NULL is fine. */
void st_out_free(st_out_t *o);
/* Splices a file range at the current end of mem; takes over the reference. */
int st_out_add_file(st_out_t *o, int fd, int64_t off, int64_t len, void (*release)(void *),
                    void *ref);
/* Total bytes the message will put on the wire. */
int64_t st_out_size(const st_out_t *o);

#endif
