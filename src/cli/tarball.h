/*
 * tarball.h — writing a .tar.gz: POSIX ustar members (regular files and directories) through
 * zlib's gzip stream. For `strata debug bundle`; any tar reads what it writes.
 *
 * A member is one 512-byte header then its bytes, padded with zeros to a multiple of 512; two
 * zero blocks end the archive. The header fields used (octal numbers, NUL-terminated):
 *
 *     0 name[100]   100 mode[8]   108 uid[8]   116 gid[8]   124 size[12]   136 mtime[12]
 *   148 chksum[8]   156 typeflag ('0' file, '5' directory)   257 magic "ustar\0"
 *   263 version "00"   265 uname[32]   297 gname[32]
 *
 * chksum: the sum of the header's bytes with chksum itself counted as eight spaces.
 * Single-threaded; the handle owns its file until st_cli_tgz_close.
 */
#ifndef ST_CLI_TARBALL_H
#define ST_CLI_TARBALL_H

#include <stddef.h>
#include <stdint.h>

#define ST_CLI_TAR_NAME_MAX 99

typedef struct st_cli_tgz st_cli_tgz_t;

/* Creates (or truncates) path. 0, or a negative errno with one line in err. */
int st_cli_tgz_open(st_cli_tgz_t **out, const char *path, char *err, size_t errlen);
/* Adds a regular file (mode 0644). name: at most ST_CLI_TAR_NAME_MAX bytes. 0 or -errno. */
int st_cli_tgz_add(st_cli_tgz_t *t, const char *name, const void *data, size_t len,
                   int64_t mtime_s);
/* Adds a directory (mode 0755; name ends with '/'). 0 or -errno. */
int st_cli_tgz_add_dir(st_cli_tgz_t *t, const char *name, int64_t mtime_s);
/* Ends the archive and closes the file; frees t either way. 0, or -errno with err. */
int st_cli_tgz_close(st_cli_tgz_t *t, char *err, size_t errlen);

#endif
