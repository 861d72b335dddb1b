/* out.c — outgoing message with spliced file ranges. */
#include "net/out.h"

#include <errno.h>
#include <stdlib.h>

st_out_t *st_out_new(void)
{
    st_out_t *o = calloc(1, sizeof *o);
    if (o)
        st_buf_init(&o->mem);
    return o;
}

void st_out_free(st_out_t *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->nfiles; i++)
        if (o->files[i].release)
            o->files[i].release(o->files[i].ref);
    free(o->files);
    st_buf_fini(&o->mem);
    free(o);
}

int st_out_add_file(st_out_t *o, int fd, int64_t off, int64_t len, void (*release)(void *),
                    void *ref)
{
    if (o->nfiles == o->capfiles) {
        int cap = o->capfiles ? o->capfiles * 2 : 4;
        st_out_file_t *f = realloc(o->files, (size_t)cap * sizeof *f);
        if (!f) {
            if (release)
                release(ref);
            return -ENOMEM;
        }
        o->files = f;
        o->capfiles = cap;
    }
    o->files[o->nfiles++] = (st_out_file_t){o->mem.len, fd, off, len, release, ref};
    return 0;
}

int64_t st_out_size(const st_out_t *o)
{
    int64_t n = (int64_t)o->mem.len;
    for (int i = 0; i < o->nfiles; i++)
        n += o->files[i].len;
    return n;
}
