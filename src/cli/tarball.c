/* tarball.c — ustar members through a gzip stream (tarball.h). */
/* gcc's -Wformat-truncation cannot see that the values fit the buffers sized for them (a
 * longer one would only be cut); clang's checks stay on. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "cli/tarball.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct st_cli_tgz {
    gzFile gz;
    int err; /* the first write error (sticky) */
};

int st_cli_tgz_open(st_cli_tgz_t **out, const char *path, char *err, size_t errlen)
{
    st_cli_tgz_t *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    errno = 0;
    t->gz = gzopen(path, "wb6");
    if (!t->gz) {
        int e = errno ? errno : ENOMEM;
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(e));
        free(t);
        return -e;
    }
    *out = t;
    return 0;
}

static void put(st_cli_tgz_t *t, const void *p, size_t n)
{
    while (!t->err && n) {
        unsigned k = n > (1u << 30) ? 1u << 30 : (unsigned)n;
        if (gzwrite(t->gz, p, k) != (int)k)
            t->err = errno ? errno : EIO;
        p = (const char *)p + k;
        n -= k;
    }
}

/* An octal field of width w: w-1 digits and a NUL. */
static void octal(char *f, size_t w, uint64_t v)
{
    snprintf(f, w, "%0*llo", (int)(w - 1), (unsigned long long)v);
}

static int member(st_cli_tgz_t *t, const char *name, char type, unsigned mode, const void *data,
                  size_t len, int64_t mtime_s)
{
    size_t nl = strlen(name);
    if (nl == 0 || nl > ST_CLI_TAR_NAME_MAX)
        return -ENAMETOOLONG;
    char h[512];
    memset(h, 0, sizeof h);
    memcpy(h, name, nl);
    octal(h + 100, 8, mode);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, len);
    octal(h + 136, 12, mtime_s > 0 ? (uint64_t)mtime_s : 0);
    h[156] = type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memcpy(h + 265, "strata", 6);
    memcpy(h + 297, "strata", 6);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < sizeof h; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum); /* six digits, NUL, and the space left from above */
    h[155] = ' ';
    put(t, h, sizeof h);
    put(t, data, len);
    static const char zeros[512];
    if (len % 512)
        put(t, zeros, 512 - len % 512);
    return -t->err;
}

int st_cli_tgz_add(st_cli_tgz_t *t, const char *name, const void *data, size_t len, int64_t mtime_s)
{
    return member(t, name, '0', 0644, data, len, mtime_s);
}

int st_cli_tgz_add_dir(st_cli_tgz_t *t, const char *name, int64_t mtime_s)
{
    return member(t, name, '5', 0755, NULL, 0, mtime_s);
}

int st_cli_tgz_close(st_cli_tgz_t *t, char *err, size_t errlen)
{
    static const char end[1024];
    put(t, end, sizeof end);
    int e = t->err;
    int zrc = gzclose(t->gz);
    if (!e && zrc != Z_OK)
        e = zrc == Z_ERRNO && errno ? errno : EIO;
    free(t);
    if (e)
        snprintf(err, errlen, "writing the archive: %s", strerror(e));
    return -e;
}
