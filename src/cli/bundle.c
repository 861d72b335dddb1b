/*
 * bundle.c — `strata debug bundle`: one .tar.gz to attach to a bug report, fetched from a
 * running broker's admin API (http.h): metrics, cluster, topics, partitions, groups, and the
 * broker's /v1/debug/{log,config,data-dir,process} (src/admin/debug.h), one file each, plus
 * MANIFEST.json saying what was fetched, its HTTP status, size, SHA-256 and timing. An
 * endpoint that fails (an older broker's 404, a timeout) is recorded there, not fatal; the
 * command fails when nothing could be fetched, or when the admin API refused the credentials
 * (401, 403: only its open paths would be in the bundle).
 *
 * Archive layout (tarball.h), DIR being the output's name without .tar.gz:
 *   DIR/MANIFEST.json  DIR/metrics.txt  DIR/cluster.json  DIR/topics.json  DIR/partitions.json
 *   DIR/groups.json  DIR/log.txt  DIR/config.json  DIR/data-dir.json  DIR/process.json
 *
 * Everything is fetched into memory first and the archive written at the end (as OUTPUT.part,
 * renamed when complete), so an interrupted run leaves no half archive under the name asked
 * for. --timeout bounds the whole command: each request gets what is left of it, and a
 * watchdog (common.h) ends the process should anything overrun; Ctrl-C ends it at once.
 */
/* gcc's -Wformat-truncation cannot see that these names and times fit (each buffer is sized for
 * them, and a longer one would only be cut in a message). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cmds.h"
#include "cli/common.h"
#include "cli/http.h"
#include "cli/tarball.h"

#define BUNDLE_DEFAULT_ADMIN "127.0.0.1:9644"
#define WATCHDOG_GRACE_MS    2000

typedef struct {
    const char *path; /* on the admin API */
    const char *file; /* in the archive */
} endpoint_t;

static const endpoint_t endpoints[] = {
    {"/metrics", "metrics.txt"},           {"/v1/cluster", "cluster.json"},
    {"/v1/topics", "topics.json"},         {"/v1/partitions", "partitions.json"},
    {"/v1/groups", "groups.json"},         {"/v1/debug/log", "log.txt"},
    {"/v1/debug/config", "config.json"},   {"/v1/debug/data-dir", "data-dir.json"},
    {"/v1/debug/process", "process.json"},
};
#define NENDPOINTS (sizeof endpoints / sizeof endpoints[0])

typedef struct {
    int rc;     /* 0: answered (status says how), else -errno */
    int status; /* HTTP status */
    char *body; /* the answer's body */
    size_t len;
    int64_t started_ms; /* wall clock */
    int64_t elapsed_ms;
    char err[256];
} fetched_t;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "2026-12-06T01:02:03.456Z" */
static void iso_time(int64_t ms, char *out, size_t n)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static void sha256_hex(const void *p, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    if (!EVP_Digest(p, n, md, &ml, EVP_sha256(), NULL))
        ml = 0;
    for (unsigned i = 0; i < ml && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    out[2 * (ml < 32 ? ml : 32)] = 0;
}

/* Whether a failed request means no broker is there at all (no point asking again). */
static bool unreachable(int rc)
{
    return rc == -ECONNREFUSED || rc == -EINVAL || rc == -EHOSTUNREACH || rc == -ENETUNREACH;
}

/* The archive's top directory: the output's base name without .tar.gz / .tgz. */
static void dir_name(const char *output, char *out, size_t n)
{
    const char *b = strrchr(output, '/');
    b = b ? b + 1 : output;
    size_t len = strlen(b);
    if (len > 7 && !strcmp(b + len - 7, ".tar.gz"))
        len -= 7;
    else if (len > 4 && !strcmp(b + len - 4, ".tgz"))
        len -= 4;
    if (len == 0 || len > 60)
        snprintf(out, n, "strata-bundle");
    else
        snprintf(out, n, "%.*s", (int)len, b);
}

static json_t *manifest(const char *admin, const char *user, int64_t timeout_ms, int64_t t0,
                        int64_t t1, const fetched_t *f)
{
    char a[32], b[32];
    iso_time(t0, a, sizeof a);
    iso_time(t1, b, sizeof b);
    json_t *eps = json_array();
    for (size_t i = 0; eps && i < NENDPOINTS; i++) {
        char started[32], sha[65] = "";
        iso_time(f[i].started_ms, started, sizeof started);
        bool ok = f[i].rc == 0 && f[i].status == 200;
        if (ok)
            sha256_hex(f[i].body, f[i].len, sha);
        json_t *e = json_pack("{s:s,s:s?,s:b,s:s,s:I}", "path", endpoints[i].path, "file",
                              ok ? endpoints[i].file : NULL, "ok", ok, "started", started,
                              "elapsed_ms", (json_int_t)f[i].elapsed_ms);
        if (!e)
            continue;
        if (f[i].rc == 0)
            json_object_set_new(e, "status", json_integer(f[i].status));
        if (ok) {
            json_object_set_new(e, "bytes", json_integer((json_int_t)f[i].len));
            json_object_set_new(e, "sha256", json_string(sha));
        } else if (f[i].rc == 0) {
            char why[64];
            snprintf(why, sizeof why, "HTTP status %d", f[i].status);
            json_object_set_new(e, "error", json_string(why));
        } else {
            json_object_set_new(e, "error", json_string(f[i].err));
        }
        json_array_append_new(eps, e);
    }
    return json_pack("{s:i,s:s,s:s,s:s?,s:s,s:s,s:I,s:o}", "format", 1, "tool",
                     "strata " STRATA_VERSION, "admin", admin, "admin_user", user, "started", a,
                     "finished", b, "timeout_ms", (json_int_t)timeout_ms, "endpoints", eps);
}

/* Writes the archive as output.part, then renames it. 0, or -1 after saying why. */
static int write_bundle(const char *output, const char *manifest_text, const fetched_t *f,
                        int64_t mtime_s)
{
    char part[4096], dir[64], name[128], err[256];
    snprintf(part, sizeof part, "%s.part", output);
    dir_name(output, dir, sizeof dir);
    st_cli_tgz_t *t;
    if (st_cli_tgz_open(&t, part, err, sizeof err)) {
        st_cli_errorf("%s", err);
        return -1;
    }
    snprintf(name, sizeof name, "%s/", dir);
    int rc = st_cli_tgz_add_dir(t, name, mtime_s);
    snprintf(name, sizeof name, "%s/MANIFEST.json", dir);
    if (!rc)
        rc = st_cli_tgz_add(t, name, manifest_text, strlen(manifest_text), mtime_s);
    for (size_t i = 0; !rc && i < NENDPOINTS; i++) {
        if (f[i].rc || f[i].status != 200)
            continue;
        snprintf(name, sizeof name, "%s/%s", dir, endpoints[i].file);
        rc = st_cli_tgz_add(t, name, f[i].body, f[i].len, mtime_s);
    }
    int crc = st_cli_tgz_close(t, err, sizeof err);
    if (rc || crc) {
        if (rc)
            snprintf(err, sizeof err, "writing %s: %s", part, strerror(-rc));
        st_cli_errorf("%s", err);
        unlink(part);
        return -1;
    }
    if (rename(part, output) != 0) {
        st_cli_errorf("cannot rename %s to %s: %s", part, output, strerror(errno));
        unlink(part);
        return -1;
    }
    return 0;
}

int st_cli_debug_bundle(int argc, char **argv)
{
    static const char usage[] = "debug bundle [--admin HOST:PORT] [--output FILE] "
                                "[--timeout DURATION] [--admin-user USER]";
    const char *admin = NULL, *output = NULL, *timeout_str = NULL, *user = NULL;
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {
        {0, "admin", ST_CLI_OPT_STR, &admin, "HOST:PORT",
         "the broker's admin API (default $STRATA_ADMIN, else " BUNDLE_DEFAULT_ADMIN ")"},
        {'o', "output", ST_CLI_OPT_STR, &output, "FILE",
         "the archive to write (default strata-bundle-<UTC time>.tar.gz here)"},
        {0, "timeout", ST_CLI_OPT_STR, &timeout_str, "DURATION",
         "the whole command ends within this (default 30s)"},
        {0, "admin-user", ST_CLI_OPT_STR, &user, "USER",
         "HTTP basic auth as this SCRAM user (admin.require.auth), its password from "
         "$STRATA_ADMIN_PASSWORD"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Fetches a broker's metrics, cluster, topics, partitions, groups, "
                          "recent log, settings\n(secrets hidden), data directory listing and "
                          "process figures from its admin API\ninto one .tar.gz with a "
                          "MANIFEST.json, to attach to a bug report.",
                          opts, false, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc >= 0)
        return rc;
    int64_t timeout_ms = 30000;
    if (timeout_str && (st_cli_parse_duration_ms(timeout_str, &timeout_ms) < 0 || timeout_ms <= 0 ||
                        timeout_ms > INT32_MAX))
        return st_cli_usage_error(usage, "--timeout wants a duration like 500ms or 10s, not '%s'",
                                  timeout_str);
    if (!admin || !*admin)
        admin = getenv("STRATA_ADMIN");
    if (!admin || !*admin)
        admin = BUNDLE_DEFAULT_ADMIN;
    char auth[600] = "";
    if (user) {
        const char *pw = getenv("STRATA_ADMIN_PASSWORD");
        if (!pw)
            return st_cli_usage_error(usage, "--admin-user wants the password in "
                                             "$STRATA_ADMIN_PASSWORD");
        if (snprintf(auth, sizeof auth, "%s:%s", user, pw) >= (int)sizeof auth)
            return st_cli_usage_error(usage, "--admin-user: user and password too long");
    }
    int64_t t0 = wall_ms(), start = mono_ms(), deadline = start + timeout_ms;
    char defname[64];
    if (!output) {
        time_t s = (time_t)(t0 / 1000);
        struct tm tm;
        gmtime_r(&s, &tm);
        strftime(defname, sizeof defname, "strata-bundle-%Y%m%dT%H%M%SZ.tar.gz", &tm);
        output = defname;
    }
    /* Ctrl-C ends the command at once; the watchdog is the last resort behind the deadline. */
    st_cli_bounded = true;
    char msg[256];
    snprintf(msg, sizeof msg, "strata: debug bundle: no end within --timeout (%lld ms)",
             (long long)timeout_ms);
    st_cli_watchdog(timeout_ms + WATCHDOG_GRACE_MS, msg);

    fetched_t f[NENDPOINTS];
    memset(f, 0, sizeof f);
    size_t ok = 0, first_fail = NENDPOINTS, denied = NENDPOINTS;
    for (size_t i = 0; i < NENDPOINTS; i++) {
        int64_t left = deadline - mono_ms();
        f[i].started_ms = wall_ms();
        if (left <= 0) {
            f[i].rc = -ETIMEDOUT;
            snprintf(f[i].err, sizeof f[i].err, "not asked: --timeout (%lld ms) ran out",
                     (long long)timeout_ms);
        } else {
            int64_t t = mono_ms();
            f[i].rc =
                st_cli_http_fetch(admin, endpoints[i].path, *auth ? auth : NULL, left, &f[i].status,
                                  &f[i].body, &f[i].len, f[i].err, sizeof f[i].err);
            f[i].elapsed_ms = mono_ms() - t;
        }
        if (f[i].rc == 0 && f[i].status == 200)
            ok++;
        else if (first_fail == NENDPOINTS)
            first_fail = i;
        if (f[i].rc == 0 && (f[i].status == 401 || f[i].status == 403) && denied == NENDPOINTS)
            denied = i;
        if (i == 0 && unreachable(f[i].rc)) {
            st_cli_errorf("%s — is strata-server running with admin.listen=%s? (--admin names "
                          "another address)",
                          f[i].err, admin);
            return ST_CLI_FAIL;
        }
    }
    OPENSSL_cleanse(auth, sizeof auth);
    st_cli_watchdog(0, "");
    int64_t t1 = wall_ms();
    rc = ST_CLI_FAIL;
    /* Without the right credentials only the open paths answer: no bundle worth sending. */
    if (denied < NENDPOINTS) {
        int st = f[denied].status;
        st_cli_errorf("%s answered HTTP status %d to %s: the admin API wants %s (--admin-user "
                      "USER, its password in $STRATA_ADMIN_PASSWORD); no bundle written",
                      admin, st, endpoints[denied].path,
                      st == 403 ? "a user in super.users"
                      : user    ? "a SCRAM user's right password"
                                : "a SCRAM user's credentials");
        goto out;
    }
    if (ok == 0) {
        const fetched_t *x = &f[first_fail];
        if (x->rc == 0)
            st_cli_errorf("%s answered HTTP status %d to %s: is it a Strata admin API?", admin,
                          x->status, endpoints[first_fail].path);
        else
            st_cli_errorf("%s; nothing fetched, no bundle written", x->err);
        goto out;
    }
    json_t *m = manifest(admin, user, timeout_ms, t0, t1, f);
    char *text = m ? json_dumps(m, JSON_INDENT(2)) : NULL;
    json_decref(m);
    if (!text) {
        st_cli_errorf("out of memory");
        goto out;
    }
    int w = write_bundle(output, text, f, t1 / 1000);
    free(text);
    if (w)
        goto out;
    for (size_t i = 0; i < NENDPOINTS; i++) {
        if (f[i].rc)
            fprintf(stderr, "strata: %s: %s (in MANIFEST.json)\n", endpoints[i].path, f[i].err);
        else if (f[i].status != 200)
            fprintf(stderr, "strata: %s: HTTP status %d%s (in MANIFEST.json)\n", endpoints[i].path,
                    f[i].status, f[i].status == 404 ? ", not served by this broker" : "");
    }
    printf("%s: %zu of %zu endpoints from %s\n", output, ok, NENDPOINTS, admin);
    rc = ST_CLI_OK;
out:
    for (size_t i = 0; i < NENDPOINTS; i++)
        free(f[i].body);
    return rc;
}
