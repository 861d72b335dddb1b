/* debug.c — GET /v1/debug/{log,config,data-dir,process}, the debug bundle's sources (debug.h). */
#include "admin/debug.h"
#include "admin/render.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/log.h"

#define JSON_TYPE "application/json"
#define HIDDEN    "[hidden]"

/* ---- /v1/debug/config -------------------------------------------------------------------- */

typedef struct {
    json_t *arr;
    int hidden;
} config_acc_t;

static void add_setting(void *arg, const st_config_item_t *it)
{
    config_acc_t *acc = arg;
    bool hide = it->secret && *it->value;
    acc->hidden += hide;
    json_array_append_new(acc->arr,
                          json_pack("{s:s,s:s,s:s,s:s,s:b}", "name", it->key, "value",
                                    hide ? HIDDEN : it->value, "type", it->type, "source",
                                    st_config_source_name(it->source), "secret", it->secret));
}

static int render_config(const st_admin_debug_in_t *in, st_buf_t *out)
{
    config_acc_t acc = {json_array(), 0};
    if (!acc.arr)
        return -ENOMEM;
    st_config_each(in->cfg, add_setting, &acc);
    return st_admin_json_append(json_pack("{s:s?,s:i,s:o}", "config_file", in->cfg->config_file,
                                          "hidden", acc.hidden, "settings", acc.arr),
                                out);
}

/* ---- /v1/debug/data-dir ------------------------------------------------------------------ */

typedef struct {
    char *path; /* relative to log.dirs */
    char type;  /* 'f' file, 'd' directory, 'l' link, 'o' other */
    int64_t size, mtime_ms;
} dir_entry_t;

typedef struct {
    dir_entry_t *v;
    size_t n, cap;
    bool truncated, oom;
    json_t *errors; /* directories that could not be read */
} dir_walk_t;

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const dir_entry_t *)a)->path, ((const dir_entry_t *)b)->path);
}

static void walk_error(dir_walk_t *w, const char *rel, int err)
{
    if (json_array_size(w->errors) < 100)
        json_array_append_new(
            w->errors, json_pack("{s:s,s:s}", "path", *rel ? rel : ".", "error", strerror(err)));
}

/* Adds the entries of the directory dfd (rel: its path under the root, "" for the root),
 * recursing into subdirectories up to depth levels more. Takes dfd. */
static void walk(dir_walk_t *w, int dfd, const char *rel, int depth)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        walk_error(w, rel, errno);
        close(dfd);
        return;
    }
    struct dirent *e;
    while (!w->truncated && !w->oom && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (w->n >= ST_ADMIN_DEBUG_DIR_MAX) {
            w->truncated = true;
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
            walk_error(w, p, errno);
            continue;
        }
        if (w->n == w->cap) {
            size_t ncap = w->cap ? w->cap * 2 : 256;
            dir_entry_t *nv = realloc(w->v, ncap * sizeof *nv);
            if (!nv) {
                w->oom = true;
                break;
            }
            w->v = nv;
            w->cap = ncap;
        }
        size_t len = strlen(rel) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) {
            w->oom = true;
            break;
        }
        snprintf(p, len, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        dir_entry_t *x = &w->v[w->n++];
        x->path = p;
        x->type = S_ISREG(st.st_mode)   ? 'f'
                  : S_ISDIR(st.st_mode) ? 'd'
                  : S_ISLNK(st.st_mode) ? 'l'
                                        : 'o';
        x->size = (int64_t)st.st_size;
        x->mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
        if (x->type == 'd' && depth > 0) {
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
            if (sub < 0)
                walk_error(w, p, errno);
            else
                walk(w, sub, p, depth - 1);
        }
    }
    closedir(d);
}

static int render_data_dir(const st_admin_debug_in_t *in, st_buf_t *out)
{
    const char *root = in->cfg->log_dirs;
    char abs[PATH_MAX];
    if (!realpath(root, abs))
        snprintf(abs, sizeof abs, "%s", root);
    dir_walk_t w = {.errors = json_array()};
    if (!w.errors)
        return -ENOMEM;
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        walk_error(&w, "", errno);
    else
        walk(&w, fd, "", ST_ADMIN_DEBUG_DIR_DEPTH);
    int rc = w.oom ? -ENOMEM : 0;
    qsort(w.v, w.n, sizeof *w.v, entry_cmp);
    json_t *entries = json_array();
    int64_t files = 0, dirs = 0, bytes = 0;
    for (size_t i = 0; i < w.n; i++) {
        const dir_entry_t *x = &w.v[i];
        files += x->type == 'f';
        dirs += x->type == 'd';
        bytes += x->type == 'f' ? x->size : 0;
        const char *type = x->type == 'f'   ? "file"
                           : x->type == 'd' ? "dir"
                           : x->type == 'l' ? "link"
                                            : "other";
        if (entries &&
            json_array_append_new(entries, json_pack("{s:s,s:s,s:I,s:I}", "path", x->path, "type",
                                                     type, "size", (json_int_t)x->size, "mtime_ms",
                                                     (json_int_t)x->mtime_ms)))
            rc = -ENOMEM;
        free(x->path);
    }
    free(w.v);
    if (rc || !entries) {
        json_decref(entries);
        json_decref(w.errors);
        return -ENOMEM;
    }
    return st_admin_json_append(json_pack("{s:s,s:I,s:I,s:I,s:b,s:i,s:o,s:o}", "path", abs, "files",
                                          (json_int_t)files, "dirs", (json_int_t)dirs,
                                          "total_bytes", (json_int_t)bytes, "truncated",
                                          w.truncated, "max_entries", ST_ADMIN_DEBUG_DIR_MAX,
                                          "entries", entries, "errors", w.errors),
                                out);
}

/* ---- /v1/debug/process ------------------------------------------------------------------- */

/* A "Name:   123 kB" or "Name:   12" line of /proc/self/status, in bytes for kB values; -1
 * when absent. */
static int64_t proc_status(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    size_t n = strlen(name);
    int64_t v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            long long x;
            char unit[8] = "";
            if (sscanf(line + n + 1, "%lld %7s", &x, unit) >= 1)
                v = strcmp(unit, "kB") == 0 ? x * 1024 : x;
            break;
        }
    fclose(f);
    return v;
}

static int64_t count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory stream's own */
}

static json_t *limit(int resource)
{
    struct rlimit r;
    if (getrlimit(resource, &r) != 0)
        return json_null();
    json_t *soft = r.rlim_cur == RLIM_INFINITY ? json_string("unlimited")
                                               : json_integer((json_int_t)r.rlim_cur);
    json_t *hard = r.rlim_max == RLIM_INFINITY ? json_string("unlimited")
                                               : json_integer((json_int_t)r.rlim_max);
    return json_pack("{s:o,s:o}", "soft", soft, "hard", hard);
}

static int render_process(const st_admin_debug_in_t *in, st_buf_t *out)
{
    struct utsname u;
    json_t *uts = uname(&u) == 0 ? json_pack("{s:s,s:s,s:s,s:s,s:s}", "sysname", u.sysname,
                                             "nodename", u.nodename, "release", u.release,
                                             "version", u.version, "machine", u.machine)
                                 : json_null();
    json_t *limits = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "open_files", limit(RLIMIT_NOFILE),
                               "processes", limit(RLIMIT_NPROC), "address_space", limit(RLIMIT_AS),
                               "locked_memory", limit(RLIMIT_MEMLOCK), "core", limit(RLIMIT_CORE),
                               "stack", limit(RLIMIT_STACK), "data", limit(RLIMIT_DATA));
    double load[3] = {-1, -1, -1};
    json_t *la =
        getloadavg(load, 3) == 3 ? json_pack("[f,f,f]", load[0], load[1], load[2]) : json_null();
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        cwd[0] = 0;
    json_t *j = json_pack(
        "{s:I,s:I,s:s,s:s?,s:i,s:f,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:o,s:o,s:o,s:I,s:I}", "pid",
        (json_int_t)getpid(), "ppid", (json_int_t)getppid(), "version", in->version, "cluster_id",
        in->cluster_id, "shards", in->nshards, "start_time_seconds", in->start_time_seconds,
        "uptime_seconds", in->uptime_seconds, "rss_bytes", (json_int_t)proc_status("VmRSS"),
        "rss_peak_bytes", (json_int_t)proc_status("VmHWM"), "virtual_bytes",
        (json_int_t)proc_status("VmSize"), "threads", (json_int_t)proc_status("Threads"),
        "open_fds", (json_int_t)count_fds(), "voluntary_context_switches",
        (json_int_t)proc_status("voluntary_ctxt_switches"), "involuntary_context_switches",
        (json_int_t)proc_status("nonvoluntary_ctxt_switches"), "cwd", cwd, "limits", limits,
        "uname", uts, "load_average", la, "cpus_online", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN),
        "memory_total_bytes", (json_int_t)(pages > 0 && page > 0 ? (int64_t)pages * page : -1));
    return st_admin_json_append(j, out);
}

/* ---- dispatch ---------------------------------------------------------------------------- */

bool st_admin_debug_route(const char *url)
{
    return !strcmp(url, "/v1/debug/log") || !strcmp(url, "/v1/debug/config") ||
           !strcmp(url, "/v1/debug/data-dir") || !strcmp(url, "/v1/debug/process");
}

int st_admin_debug_render(const char *url, const st_admin_debug_in_t *in, st_buf_t *out,
                          const char **type)
{
    *type = JSON_TYPE;
    if (!strcmp(url, "/v1/debug/log")) {
        *type = "text/plain; charset=utf-8";
        return st_log_recent(out, ST_ADMIN_DEBUG_LOG_LINES);
    }
    if (!strcmp(url, "/v1/debug/config"))
        return render_config(in, out);
    if (!strcmp(url, "/v1/debug/data-dir"))
        return render_data_dir(in, out);
    if (!strcmp(url, "/v1/debug/process"))
        return render_process(in, out);
    return -ENOENT;
}
