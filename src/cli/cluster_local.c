/*
 * cluster_local.c — `strata cluster start|stop|status`: a cluster of strata-server processes on
 * this machine, laid out as local.h says (the layout scripts/cluster.sh had), like
 * `rpk container start` with local processes instead of containers.
 *
 * start forks one monitor per broker. The monitor leaves this session (setsid), points its own
 * stdio at /dev/null (so a caller reading this command's output sees it end), forks and execs
 * strata-server with stdout and stderr appended to server.log, writes server.pid, and waits
 * for the server to end, then writes how it ended to server.exit ("PID exit N" or
 * "PID signal N"). That is how `stop`, a later process that cannot wait(2) for the server,
 * reports its exit status. The monitor is a copy of this process with no threads (start
 * creates no librdkafka handle) and nothing to do but that wait.
 *
 * Readiness is asked of every broker's admin API (GET /v1/cluster): start returns once each
 * one serves, knows a controller, and lists brokers 1..n registered and unfenced.
 *
 * Every wait is bounded (--timeout, and a watchdog behind it); Ctrl-C ends the command at once
 * (common.c), leaving the brokers as they are.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "cli/common.h"
#include "cli/http.h"
#include "cli/local.h"

#define START_TIMEOUT_MS  60000
#define PODMAN_START_MS   120000 /* start --podman: from the first podman command */
#define STOP_TIMEOUT_MS   30000
#define STATUS_TIMEOUT_MS 5000
#define KILL_WAIT_MS      5000  /* after SIGKILL, for the process to be gone */
#define EXIT_FILE_WAIT_MS 2000  /* after the pid is gone, for the monitor's server.exit */
#define ABORT_STOP_MS     10000 /* a failed start stops what it began within this */
#define POLL_MS           200
#define TAIL_LINES        15

/* One broker of the cluster, as this command sees it. */
typedef struct bk {
    int id;
    char dir[PATH_MAX]; /* DIR/<id> */
    pid_t pid;          /* from server.pid; 0: none */
    bool live;          /* pid names a running strata-server of this broker */
    bool signalled;     /* stop: SIGTERM sent */
    bool killed;        /* stop: SIGKILL sent after the timeout */
    bool done;          /* stop: the process is gone */
    bool exited;        /* server.exit names pid: how[] says how it ended */
    bool clean;         /* ... with status 0 */
    char how[64];       /* "exit status 0", "killed by signal 9", "status unknown" */
    int64_t gone_ms;    /* when the pid was first seen gone (stop), 0: not yet */
    bool view_ok;       /* its admin API answered /v1/cluster */
    st_cli_view_t view; /* what it answered */
    char why[512];      /* why not, when !view_ok */
} bk_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(int ms)
{
    poll(NULL, 0, ms);
}

/* snprintf that reports truncation as -1. */
static int fmt(char *dst, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fmt(char *dst, size_t len, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(dst, len, f, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* mkdir -p; 0 or -errno. */
static int mkdirs(const char *path)
{
    char p[PATH_MAX];
    if (fmt(p, sizeof p, "%s", path) < 0)
        return -ENAMETOOLONG;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(p, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Reads up to len-1 bytes of a small file, NUL-terminated; the byte count or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t n = read(fd, buf + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

/* Writes text to path through a temporary file and a rename, so a reader sees all or none
 * of it. Async-signal-safe enough for the monitor (no stdio). 0 or -errno. */
static int write_atomic(const char *path, const char *text)
{
    char tmp[PATH_MAX + 8];
    if (fmt(tmp, sizeof tmp, "%s.tmp", path) < 0)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = errno ? -errno : -EIO;
            close(fd);
            unlink(tmp);
            return e;
        }
        off += (size_t)n;
    }
    close(fd);
    return rename(tmp, path) < 0 ? -errno : 0;
}

static void path_in(char *out, size_t len, const bk_t *b, const char *name)
{
    if (fmt(out, len, "%s/%s", b->dir, name) < 0)
        out[0] = '\0';
}

/* The pid server.pid names, or 0. */
static pid_t read_pid(const bk_t *b)
{
    char path[PATH_MAX + 16], buf[32];
    path_in(path, sizeof path, b, "server.pid");
    if (read_small(path, buf, sizeof buf) <= 0)
        return 0;
    int64_t v;
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    if (st_cli_parse_i64(buf, &v) < 0 || v <= 1 || v > INT_MAX)
        return 0;
    return (pid_t)v;
}

/* Removes server.pid if it still names pid (a newer start may have replaced it). */
static void remove_pid_file(const bk_t *b, pid_t pid)
{
    if (read_pid(b) != pid)
        return;
    char path[PATH_MAX + 16];
    path_in(path, sizeof path, b, "server.pid");
    unlink(path);
}

/*
 * Whether pid is a running strata-server of broker b: alive, and (where /proc tells) started
 * with node.id=<id> and a log.dirs that is b's data directory, so a pid file left by a crash
 * whose number another process now has is not taken for the broker. A zombie is not running.
 */
static bool pid_is_broker(const bk_t *b, pid_t pid)
{
    if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    static char cmd[32768];
    ssize_t n = read_small(path, cmd, sizeof cmd);
    if (n == -ENOENT)
        return false; /* gone meanwhile */
    if (n < 0)
        return true; /* no /proc to ask: the pid is all there is */
    if (n == 0)
        return false; /* a zombie: its server exited */
    char want_id[32], data[PATH_MAX + 16];
    snprintf(want_id, sizeof want_id, "node.id=%d", b->id);
    path_in(data, sizeof data, b, "data");
    struct stat want;
    bool have_want = stat(data, &want) == 0;
    bool id_ok = false, dir_ok = false;
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(cmd + i) + 1) {
        const char *a = cmd + i;
        if (!strcmp(a, want_id))
            id_ok = true;
        else if (!strncmp(a, "log.dirs=", 9) && have_want) {
            const char *v = a + 9;
            char p[PATH_MAX + 64];
            struct stat st;
            if (v[0] == '/')
                snprintf(p, sizeof p, "%s", v);
            else
                snprintf(p, sizeof p, "/proc/%d/cwd/%s", (int)pid, v);
            if (stat(p, &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino)
                dir_ok = true;
        }
    }
    return id_ok && (dir_ok || !have_want);
}

/* Reads server.exit: true when it names pid, with how the process ended in b->how. */
static bool read_exit(bk_t *b, pid_t pid)
{
    char path[PATH_MAX + 16], buf[128];
    path_in(path, sizeof path, b, "server.exit");
    if (read_small(path, buf, sizeof buf) <= 0)
        return false;
    int p = 0, v = 0;
    char kind[16];
    if (sscanf(buf, "%d %15s %d", &p, kind, &v) != 3 || p != pid)
        return false;
    b->exited = true;
    if (!strcmp(kind, "exit")) {
        b->clean = v == 0;
        snprintf(b->how, sizeof b->how, "exit status %d", v);
    } else {
        b->clean = false;
        snprintf(b->how, sizeof b->how, "killed by signal %d (%s)", v, strsignal(v));
    }
    return true;
}

/* Prints the last lines of b's server.log to stderr, indented. */
static void tail_log(const bk_t *b, int lines)
{
    char path[PATH_MAX + 16];
    path_in(path, sizeof path, b, "server.log");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "    (no %s: %s)\n", path, strerror(errno));
        return;
    }
    static char buf[16384];
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof buf - 1, from);
    close(fd);
    if (n <= 0) {
        fprintf(stderr, "    (%s is empty)\n", path);
        return;
    }
    buf[n] = '\0';
    if (buf[n - 1] == '\n')
        buf[--n] = '\0';
    const char *start = buf;
    int seen = 0;
    for (ssize_t i = n - 1; i >= 0; i--)
        if (buf[i] == '\n' && ++seen == lines) {
            start = buf + i + 1;
            break;
        }
    fprintf(stderr, "  the end of %s:\n", path);
    for (const char *p = start; *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(stderr, "    | %.*s\n", len, p);
        p += len + (nl ? 1 : 0);
    }
}

/* The cluster's directory: --dir, else $STRATA_CLUSTER_DIR, else ./data-cluster. */
static const char *root_dir(const char *opt)
{
    if (opt && *opt)
        return opt;
    const char *e = getenv("STRATA_CLUSTER_DIR");
    return e && *e ? e : ST_CLI_LOCAL_DIR;
}

static int bk_init(bk_t *b, const char *root, int id)
{
    memset(b, 0, sizeof *b);
    b->id = id;
    return fmt(b->dir, sizeof b->dir, "%s/%d", root, id);
}

/* Asks b's admin API for /v1/cluster within timeout_ms: b->view_ok, b->view or b->why. */
static void ask_view(bk_t *b, const st_cli_local_t *l, int64_t timeout_ms)
{
    char addr[96], err[200];
    snprintf(addr, sizeof addr, "%s:%d", l->host, st_cli_local_admin_port(l, b->id));
    char *body = NULL;
    size_t len = 0;
    b->view_ok = false;
    if (st_cli_http_get(addr, "/v1/cluster", timeout_ms < 1 ? 1 : timeout_ms, &body, &len, err,
                        sizeof err) < 0) {
        snprintf(b->why, sizeof b->why, "admin API %s: %s", addr, err);
        return;
    }
    if (st_cli_view_parse(body, len, &b->view, err, sizeof err) < 0)
        snprintf(b->why, sizeof b->why, "admin API %s: /v1/cluster: %s", addr, err);
    else
        b->view_ok = true;
    free(body);
}

/* The view to judge registration by: the controller's own answer, else any answer. */
static const bk_t *ref_view(const bk_t *bs, int n)
{
    const bk_t *any = NULL;
    for (int i = 0; i < n; i++) {
        if (!bs[i].view_ok)
            continue;
        if (bs[i].view.controller_id >= 0 && bs[i].view.controller_id == bs[i].view.node_id)
            return &bs[i];
        if (!any || (any->view.controller_id < 0 && bs[i].view.controller_id >= 0))
            any = &bs[i];
    }
    return any;
}

/* Whether a duration option was given well; fills *ms (def when not given). */
static int duration_opt(const char *usage, const char *s, int64_t def, int64_t *ms)
{
    *ms = def;
    if (s && (st_cli_parse_duration_ms(s, ms) < 0 || *ms <= 0 || *ms > INT32_MAX))
        return st_cli_usage_error(usage, "--timeout wants a duration like 500ms or 30s, not '%s'",
                                  s);
    return -1;
}

/* The layout of the cluster in root: DIR/cluster.conf where it exists, else the defaults;
 * then the options given (n, ports: -1 when not given). 0, or -1 after printing why. */
static int load_layout(const char *root, int64_t n, int64_t kport, int64_t aport, st_cli_local_t *l)
{
    char path[PATH_MAX + 16], text[1024], err[256];
    st_cli_local_default(l);
    if (fmt(path, sizeof path, "%s/%s", root, ST_CLI_LOCAL_CONF) == 0 &&
        read_small(path, text, sizeof text) > 0 &&
        st_cli_local_conf_parse(text, l, err, sizeof err) < 0) {
        st_cli_errorf("%s: %s", path, err);
        return -1;
    }
    if (n >= 0)
        l->n = n > ST_CLI_LOCAL_MAX ? ST_CLI_LOCAL_MAX + 1 : (int)n;
    if (kport >= 0)
        l->kafka_port = kport > 65535 ? 65536 : (int)kport;
    if (aport >= 0)
        l->admin_port = aport > 65535 ? 65536 : (int)aport;
    if (st_cli_local_check(l, err, sizeof err) < 0) {
        st_cli_errorf("%s", err);
        return -1;
    }
    return 0;
}

/* strata-server: --server, else $STRATA_SERVER, else next to this strata, else on PATH. */
static int find_server(const char *opt, char *out, size_t len)
{
    const char *p = opt && *opt ? opt : getenv("STRATA_SERVER");
    if (p && *p) {
        if (access(p, X_OK) < 0) {
            st_cli_errorf("cannot run %s (%s): build it (make release) or point --server or "
                          "STRATA_SERVER at strata-server",
                          p, strerror(errno));
            return -1;
        }
        return fmt(out, len, "%s", p);
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            if (fmt(out, len, "%s/strata-server", self) == 0 && access(out, X_OK) == 0)
                return 0;
        }
    }
    const char *path = getenv("PATH");
    char *copy = strdup(path ? path : "");
    for (char *save = NULL, *d = copy ? strtok_r(copy, ":", &save) : NULL; d;
         d = strtok_r(NULL, ":", &save))
        if (fmt(out, len, "%s/strata-server", d) == 0 && access(out, X_OK) == 0) {
            free(copy);
            return 0;
        }
    free(copy);
    st_cli_errorf("no strata-server next to this strata (%s) nor on PATH: build it (make "
                  "release), or pass --server PATH or set STRATA_SERVER",
                  n > 0 ? self : "?");
    return -1;
}

/* ---- start ---------------------------------------------------------------------------------- */

static void monitor_exit_file(const bk_t *b, pid_t s, int st)
{
    char path[PATH_MAX + 16], text[64];
    path_in(path, sizeof path, b, "server.exit");
    if (WIFEXITED(st))
        snprintf(text, sizeof text, "%d exit %d\n", (int)s, WEXITSTATUS(st));
    else
        snprintf(text, sizeof text, "%d signal %d\n", (int)s, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    write_atomic(path, text);
}

static void send_int(int fd, int32_t v)
{
    ssize_t n;
    do
        n = write(fd, &v, sizeof v);
    while (n < 0 && errno == EINTR);
}

/* The monitor (the forked child of start): see the top of the file. Never returns. */
static void monitor(const bk_t *b, char *const *argv, int wfd) __attribute__((noreturn));
static void monitor(const bk_t *b, char *const *argv, int wfd)
{
    setsid();
    prctl(PR_SET_NAME, "strata-monitor", 0, 0, 0);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    int sigs[] = {SIGINT, SIGTERM, SIGALRM, SIGPIPE, SIGHUP, SIGQUIT, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct itimerval off;
    memset(&off, 0, sizeof off);
    setitimer(ITIMER_REAL, &off, NULL);

    char log[PATH_MAX + 16], pidf[PATH_MAX + 16];
    path_in(log, sizeof log, b, "server.log");
    path_in(pidf, sizeof pidf, b, "server.pid");
    int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (logfd < 0 || nullfd < 0) {
        send_int(wfd, -errno);
        _exit(1);
    }
    pid_t s = fork();
    if (s == 0) {
        dup2(nullfd, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        close_range(3, ~0U, 0);
        execv(argv[0], argv);
        dprintf(2, "strata cluster start: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (s < 0) {
        send_int(wfd, -errno);
        _exit(1);
    }
    char text[32];
    snprintf(text, sizeof text, "%d\n", (int)s);
    int rc = write_atomic(pidf, text);
    if (rc < 0) {
        kill(s, SIGKILL);
        send_int(wfd, rc);
    } else {
        send_int(wfd, (int32_t)s);
    }
    dup2(nullfd, 0);
    dup2(nullfd, 1);
    dup2(nullfd, 2);
    close_range(3, ~0U, 0);
    int st = 0;
    while (waitpid(s, &st, 0) < 0 && errno == EINTR)
        ;
    monitor_exit_file(b, s, st);
    _exit(0);
}

/* Starts broker b's monitor and through it the server (argv); b->pid on success. 0, or -1
 * after printing why. */
static int spawn(bk_t *b, char *const *argv)
{
    char path[PATH_MAX + 16];
    path_in(path, sizeof path, b, "server.exit");
    unlink(path);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        st_cli_errorf("broker %d: pipe: %s", b->id, strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t m = fork();
    if (m < 0) {
        st_cli_errorf("broker %d: fork: %s", b->id, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (m == 0) {
        close(fds[0]);
        monitor(b, argv, fds[1]);
    }
    close(fds[1]);
    int32_t v = 0;
    ssize_t n;
    do
        n = read(fds[0], &v, sizeof v);
    while (n < 0 && errno == EINTR);
    close(fds[0]);
    if (n != (ssize_t)sizeof v || v <= 0) {
        st_cli_errorf("broker %d: could not start %s: %s", b->id, argv[0],
                      n == (ssize_t)sizeof v ? strerror(-v) : "its monitor died");
        return -1;
    }
    b->pid = (pid_t)v;
    b->live = true;
    return 0;
}

/* SIGTERM to each live broker of bs, then waits (bounded by timeout_ms, then SIGKILL) for
 * each to be gone: b->done, b->exited, b->how. Prints one line per broker when verbose.
 * Returns how many did not exit cleanly. */
static int stop_all(bk_t *bs, int n, int64_t timeout_ms, bool verbose)
{
    for (int i = 0; i < n; i++) {
        bk_t *b = &bs[i];
        b->signalled = b->killed = b->done = b->exited = b->clean = false;
        b->gone_ms = 0;
        if (b->pid > 0 && b->live) {
            if (kill(b->pid, SIGTERM) < 0 && errno == ESRCH) {
                b->live = false;
                b->gone_ms = now_ms();
            }
            b->signalled = true;
        }
    }
    int64_t deadline = now_ms() + timeout_ms, kill_deadline = 0;
    for (;;) {
        int left = 0;
        int64_t now = now_ms();
        for (int i = 0; i < n; i++) {
            bk_t *b = &bs[i];
            if (!b->signalled || b->done)
                continue;
            if (read_exit(b, b->pid)) {
                b->done = true;
                continue;
            }
            if (!pid_is_broker(b, b->pid)) {
                if (!b->gone_ms)
                    b->gone_ms = now;
                if (now - b->gone_ms >= EXIT_FILE_WAIT_MS) {
                    /* no monitor's word: not started by `strata cluster start` (or its
                     * monitor was killed); gone is all there is to know, not a failure */
                    b->done = b->clean = true;
                    snprintf(b->how, sizeof b->how, "exit status unknown (no server.exit)");
                    continue;
                }
            }
            left++;
        }
        if (!left)
            break;
        if (!kill_deadline && now >= deadline) {
            for (int i = 0; i < n; i++) {
                bk_t *b = &bs[i];
                if (b->signalled && !b->done) {
                    fprintf(stderr,
                            "strata: broker %d (pid %d) still running %lld ms after SIGTERM; "
                            "sending SIGKILL (see %s/server.log)\n",
                            b->id, (int)b->pid, (long long)timeout_ms, b->dir);
                    kill(b->pid, SIGKILL);
                    b->killed = true;
                }
            }
            kill_deadline = now + KILL_WAIT_MS;
        }
        if (kill_deadline && now >= kill_deadline)
            break;
        nap(50);
    }
    int unclean = 0;
    for (int i = 0; i < n; i++) {
        bk_t *b = &bs[i];
        if (!b->signalled)
            continue;
        if (b->done)
            remove_pid_file(b, b->pid);
        if (!b->done || !b->clean || b->killed)
            unclean++;
        if (!verbose)
            continue;
        if (!b->done)
            printf("broker %d (pid %d): still running after SIGKILL\n", b->id, (int)b->pid);
        else
            printf("broker %d (pid %d): stopped, %s%s\n", b->id, (int)b->pid, b->how,
                   b->killed ? " (after SIGKILL)" : "");
    }
    return unclean;
}

/* Why broker b is not up yet, in one line, judged with ref (the reference view, or NULL). */
static void not_up_reason(const bk_t *b, const bk_t *ref, int n, char *out, size_t len)
{
    if (b->exited) {
        snprintf(out, len, "exited (%s) before the cluster was up", b->how);
        return;
    }
    if (!b->live) {
        snprintf(out, len, "not running");
        return;
    }
    if (!b->view_ok) {
        snprintf(out, len, "running, but its %s", b->why);
        return;
    }
    if (!b->view.ready) {
        snprintf(out, len, "running, not yet serving Kafka (admin API says ready: false)");
        return;
    }
    if (ref) {
        st_cli_reg_t r = st_cli_view_reg(&ref->view, b->id);
        if (r != ST_CLI_REG_UNFENCED) {
            snprintf(out, len, "%s (as broker %d sees it)",
                     r == ST_CLI_REG_FENCED ? "registered but fenced"
                                            : "not registered with the controller",
                     ref->id);
            return;
        }
    }
    if (b->view.controller_id < 0) {
        snprintf(out, len, "knows no controller yet");
        return;
    }
    for (int i = 1; i <= n; i++)
        if (st_cli_view_reg(&b->view, i) != ST_CLI_REG_UNFENCED) {
            snprintf(out, len, "its metadata shows broker %d %s", i,
                     st_cli_reg_name(st_cli_view_reg(&b->view, i)));
            return;
        }
    snprintf(out, len, "up");
}

/* The server's argv for broker b: server, the layout's --set settings, then extra. */
static char **server_argv(const char *server, const st_cli_local_t *l, const bk_t *b,
                          const st_cli_strlist_t *extra, char sets[][ST_CLI_LOCAL_SETLEN])
{
    char data[PATH_MAX + 16];
    path_in(data, sizeof data, b, "data");
    int ns = st_cli_local_sets(l, b->id, data, sets);
    if (ns < 0)
        return NULL;
    char **argv = calloc((size_t)(1 + 2 * ns) + extra->n + 1, sizeof *argv);
    if (!argv)
        return NULL;
    size_t k = 0;
    argv[k++] = (char *)server;
    for (int i = 0; i < ns; i++) {
        argv[k++] = (char *)"--set";
        argv[k++] = sets[i];
    }
    for (size_t i = 0; i < extra->n; i++)
        argv[k++] = (char *)extra->v[i];
    argv[k] = NULL;
    return argv;
}

/* ---- podman --------------------------------------------------------------------------------- */

/*
 * Runs argv (argv[0] looked up on PATH) with stdin /dev/null, its stdout into out and its
 * stderr into err (each NUL-terminated, cut at its length), in its own process group. Waits
 * at most timeout_ms, then SIGKILLs the group. Returns the exit status (128+N when killed by
 * signal N), 127 when argv[0] could not be run, -ETIMEDOUT after the kill, or -errno.
 * Output a grandchild keeps writing after the command exits is not waited for.
 */
static int run_cmd(char *const *argv, int64_t timeout_ms, char *out, size_t outlen, char *err,
                   size_t errlen)
{
    int po[2], pe[2];
    out[0] = err[0] = '\0';
    if (pipe2(po, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    if (pipe2(pe, O_CLOEXEC | O_NONBLOCK) < 0) {
        int e = -errno;
        close(po[0]);
        close(po[1]);
        return e;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t c = fork();
    if (c < 0) {
        int e = -errno;
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        return e;
    }
    if (c == 0) {
        setpgid(0, 0);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        int sigs[] = {SIGINT, SIGTERM, SIGALRM, SIGPIPE};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaction(sigs[i], &dfl, NULL);
        struct itimerval off;
        memset(&off, 0, sizeof off);
        setitimer(ITIMER_REAL, &off, NULL);
        int nullfd = open("/dev/null", O_RDONLY);
        if (nullfd >= 0)
            dup2(nullfd, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close_range(3, ~0U, 0);
        execvp(argv[0], argv);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(c, c);
    close(po[1]);
    close(pe[1]);
    int fds[2] = {po[0], pe[0]};
    char *bufs[2] = {out, err};
    size_t lens[2] = {outlen, errlen}, got[2] = {0, 0};
    bool open_[2] = {true, true}, exited = false;
    int st = 0, rc = 0;
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        for (int k = 0; k < 2; k++) {
            while (open_[k]) {
                char tmp[4096];
                ssize_t n = read(fds[k], tmp, sizeof tmp);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0 && errno == EAGAIN)
                    break;
                if (n <= 0) {
                    open_[k] = false;
                    break;
                }
                size_t room = lens[k] - 1 - got[k];
                size_t take = (size_t)n < room ? (size_t)n : room;
                memcpy(bufs[k] + got[k], tmp, take);
                got[k] += take;
                bufs[k][got[k]] = '\0';
            }
        }
        if (!exited) {
            pid_t w = waitpid(c, &st, WNOHANG);
            if (w == c)
                exited = true;
        }
        /* done once it exited and its pipes are drained (or left open by a grandchild) */
        if (exited && (!open_[0] && !open_[1]))
            break;
        if (exited) {
            /* one more short look for what it wrote last, then stop reading */
            struct pollfd pf[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
            if (poll(pf, 2, 20) <= 0 || now_ms() >= deadline)
                break;
            continue;
        }
        if (now_ms() >= deadline) {
            kill(-c, SIGKILL);
            kill(c, SIGKILL);
            while (waitpid(c, &st, 0) < 0 && errno == EINTR)
                ;
            rc = -ETIMEDOUT;
            break;
        }
        struct pollfd pf[2] = {{open_[0] ? fds[0] : -1, POLLIN, 0},
                               {open_[1] ? fds[1] : -1, POLLIN, 0}};
        poll(pf, 2, 50);
    }
    close(fds[0]);
    close(fds[1]);
    if (rc < 0)
        return rc;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

#define PODMAN_CMD_MS  30000 /* any one podman command but stop */
#define PODMAN_MIN_MS  1000  /* ... even at the deadline */
#define PODMAN_TAIL_MS 5000  /* podman logs --tail of a broker that is not up */
/* what pm_down of n containers may take, stop timeout t each: ps, the stops (t and a margin
 * each), ps, rm, network rm */
#define PODMAN_DOWN_MS(n, t)                                                                       \
    ((int64_t)(n) * ((t) + KILL_WAIT_MS + PODMAN_CMD_MS) + 4 * PODMAN_CMD_MS)
#define PODMAN_ARGV (40 + 2 * (ST_CLI_LOCAL_PODMAN_NSETS + ST_CLI_LOCAL_MAX) + 64)
#define PODMAN_OUT  65536
#define PODMAN_ERR  8192

/* The podman to run: $STRATA_PODMAN, else podman on PATH; 0, or -1 after saying how to get
 * it. */
static int find_podman(char *out, size_t len)
{
    const char *p = getenv("STRATA_PODMAN");
    if (p && *p) {
        if (access(p, X_OK) < 0) {
            st_cli_errorf("cannot run STRATA_PODMAN=%s: %s", p, strerror(errno));
            return -1;
        }
        return fmt(out, len, "%s", p);
    }
    const char *path = getenv("PATH");
    char *copy = strdup(path ? path : "");
    for (char *save = NULL, *d = copy ? strtok_r(copy, ":", &save) : NULL; d;
         d = strtok_r(NULL, ":", &save))
        if (fmt(out, len, "%s/podman", d) == 0 && access(out, X_OK) == 0) {
            free(copy);
            return 0;
        }
    free(copy);
    st_cli_errorf("--podman: podman is not installed (not on PATH): install it (apt-get install "
                  "podman), point STRATA_PODMAN at it, or run the brokers as processes (without "
                  "--podman)");
    return -1;
}

/* One podman command; what it printed in pm->out/pm->err. */
typedef struct pm {
    char bin[PATH_MAX];
    char *argv[PODMAN_ARGV];
    int argc;
    char out[PODMAN_OUT];
    char err[PODMAN_ERR];
} pm_t;

static void pm_begin(pm_t *pm)
{
    pm->argc = 0;
    pm->argv[pm->argc++] = pm->bin;
    pm->argv[0] = pm->bin;
}

static void pm_add(pm_t *pm, const char *a)
{
    if (pm->argc < PODMAN_ARGV - 1)
        pm->argv[pm->argc++] = (char *)a;
}

/* Runs what pm_begin/pm_add built, bounded by timeout_ms (at least PODMAN_MIN_MS). */
static int pm_run(pm_t *pm, int64_t timeout_ms)
{
    pm->argv[pm->argc] = NULL;
    int rc = run_cmd(pm->argv, timeout_ms < PODMAN_MIN_MS ? PODMAN_MIN_MS : timeout_ms, pm->out,
                     sizeof pm->out, pm->err, sizeof pm->err);
    /* a command's last line of stderr, for a one-line error */
    size_t n = strlen(pm->err);
    while (n && (pm->err[n - 1] == '\n' || pm->err[n - 1] == ' '))
        pm->err[--n] = '\0';
    return rc;
}

/* "podman a b c" for messages: the subcommand and its first arguments. */
static const char *pm_what(const pm_t *pm)
{
    static char buf[256];
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < pm->argc && i < 4; i++) {
        const char *a = i == 0 ? "podman" : pm->argv[i];
        int n = snprintf(buf + used, sizeof buf - used, "%s%s", i ? " " : "", a);
        if (n < 0 || (size_t)n >= sizeof buf - used)
            break;
        used += (size_t)n;
    }
    return buf;
}

static void pm_fail(const pm_t *pm, int rc)
{
    const char *last = strrchr(pm->err, '\n');
    last = last ? last + 1 : pm->err;
    if (rc == -ETIMEDOUT)
        st_cli_errorf("`%s ...` did not end in time (killed)", pm_what(pm));
    else if (rc == -EPROTO)
        st_cli_errorf("`%s ...`: %s", pm_what(pm), pm->err);
    else if (rc < 0)
        st_cli_errorf("`%s ...`: %s", pm_what(pm), strerror(-rc));
    else
        st_cli_errorf("`%s ...` failed (exit status %d)%s%s", pm_what(pm), rc, *last ? ": " : "",
                      last);
}

/* A container's state as `podman ps -a` tells it. */
typedef struct ctr {
    bool exists;
    bool running;
    char state[24]; /* running, exited, created, ... */
    int exit_code;
} ctr_t;

/* Asks `podman ps -a --format json` for the project's containers (the JSON, not a template:
 * {{.State}} is "Up 2 seconds ago" in podman 4.3's ps, "running" in its JSON); fills
 * cs[0..n-1] (broker 1..n). 0, the failing command's status, or -EPROTO when the answer is not
 * that JSON (pm->err says so). */
static int pm_states(pm_t *pm, const st_cli_local_t *l, ctr_t *cs, int n, int64_t timeout_ms)
{
    char label[128];
    snprintf(label, sizeof label, "label=strata.cluster=%s", l->project);
    pm_begin(pm);
    pm_add(pm, "ps");
    pm_add(pm, "-a");
    pm_add(pm, "--filter");
    pm_add(pm, label);
    pm_add(pm, "--format");
    pm_add(pm, "json");
    memset(cs, 0, (size_t)n * sizeof *cs);
    int rc = pm_run(pm, timeout_ms);
    if (rc != 0)
        return rc;
    json_error_t je;
    json_t *arr = json_loads(pm->out, 0, &je);
    if (!json_is_array(arr)) {
        snprintf(pm->err, sizeof pm->err, "its answer is not a JSON array (%s)",
                 arr ? "another JSON value" : je.text);
        json_decref(arr);
        return -EPROTO;
    }
    size_t k;
    json_t *o;
    json_array_foreach(arr, k, o)
    {
        json_t *names = json_object_get(o, "Names");
        const char *name = json_is_array(names) ? json_string_value(json_array_get(names, 0))
                                                : json_string_value(names);
        const char *state = json_string_value(json_object_get(o, "State"));
        json_t *code = json_object_get(o, "ExitCode");
        if (!name || !state)
            continue;
        for (int i = 1; i <= n; i++) {
            char want[128];
            if (st_cli_local_container(l, i, want, sizeof want) < 0 || strcmp(want, name))
                continue;
            ctr_t *c = &cs[i - 1];
            c->exists = true;
            snprintf(c->state, sizeof c->state, "%s", state);
            c->running = !strcmp(state, "running");
            c->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
        }
    }
    json_decref(arr);
    return 0;
}

/* Prints the end of container name's log to stderr (podman logs --tail). */
static void pm_tail(pm_t *pm, const char *name, int64_t timeout_ms)
{
    char lines[16];
    snprintf(lines, sizeof lines, "%d", TAIL_LINES);
    pm_begin(pm);
    pm_add(pm, "logs");
    pm_add(pm, "--tail");
    pm_add(pm, lines);
    pm_add(pm, name);
    int rc = pm_run(pm, timeout_ms);
    fprintf(stderr, "  the end of `podman logs %s`%s\n", name, rc ? " (it failed)" : ":");
    /* podman logs writes the container's stdout to stdout and its stderr to stderr */
    for (int k = 0; k < 2; k++)
        for (char *save = NULL, *line = strtok_r(k ? pm->err : pm->out, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save))
            fprintf(stderr, "    %s\n", line);
}

/* Stops and removes the project's containers 1..n and its network (podman stop -t, podman rm
 * -f, podman network rm); the volumes stay. Prints one line per broker when verbose. Returns
 * how many did not stop with status 0 (a container that is not there is not counted), -1 when
 * podman could not list them. */
static int pm_down(pm_t *pm, const st_cli_local_t *l, int n, int64_t timeout_ms, bool verbose)
{
    ctr_t *cs = calloc((size_t)n, sizeof *cs);
    char(*names)[128] = calloc((size_t)n, sizeof *names);
    int unclean = 0, rc;
    if (!cs || !names) {
        free(cs);
        free(names);
        st_cli_errorf("out of memory");
        return -1;
    }
    for (int i = 1; i <= n; i++)
        st_cli_local_container(l, i, names[i - 1], sizeof names[i - 1]);
    if ((rc = pm_states(pm, l, cs, n, PODMAN_CMD_MS)) != 0) {
        pm_fail(pm, rc);
        unclean = -1;
        goto out;
    }
    int running = 0, present = 0;
    char secs[24];
    snprintf(secs, sizeof secs, "%lld", (long long)((timeout_ms + 999) / 1000));
    /* One at a time, broker n first, so that every broker stops while the ones it may still
     * ask (a replica fetcher reconnecting to a leader that just stopped) are there or are gone
     * for good; each stop is quick when the broker stops cleanly. */
    for (int i = n - 1; i >= 0; i--) {
        if (!cs[i].running)
            continue;
        running++;
        pm_begin(pm);
        pm_add(pm, "stop");
        pm_add(pm, "-t");
        pm_add(pm, secs);
        pm_add(pm, names[i]);
        /* the timeout, SIGKILL after it, and a margin */
        if ((rc = pm_run(pm, timeout_ms + KILL_WAIT_MS + PODMAN_CMD_MS)) != 0)
            pm_fail(pm, rc);
    }
    /* was[i]: 0 no container, 1 there but not running, 2 running (stopped here) */
    char *was = calloc((size_t)n, 1);
    for (int i = 0; was && i < n; i++)
        was[i] = (char)(cs[i].running ? 2 : cs[i].exists);
    if (running && (rc = pm_states(pm, l, cs, n, PODMAN_CMD_MS)) != 0)
        pm_fail(pm, rc);
    for (int i = 0; i < n; i++) {
        if (!was || !was[i]) {
            if (verbose)
                printf("broker %d (container %s): no such container\n", i + 1, names[i]);
            continue;
        }
        present++;
        bool clean = !cs[i].running && cs[i].exit_code == 0;
        unclean += !clean;
        if (verbose)
            printf("broker %d (container %s): %s, exit status %d\n", i + 1, names[i],
                   cs[i].running ? "still running"
                   : was[i] == 1 ? "was not running (container exited before)"
                                 : "stopped",
                   cs[i].exit_code);
    }
    free(was);
    if (present) {
        pm_begin(pm);
        pm_add(pm, "rm");
        pm_add(pm, "-f");
        pm_add(pm, "--ignore");
        for (int i = 0; i < n; i++)
            pm_add(pm, names[i]);
        if ((rc = pm_run(pm, PODMAN_CMD_MS)) != 0) {
            pm_fail(pm, rc);
            unclean++;
        }
    }
    pm_begin(pm);
    pm_add(pm, "network");
    pm_add(pm, "rm");
    pm_add(pm, l->project);
    rc = pm_run(pm, PODMAN_CMD_MS);
    if (rc != 0 && !strstr(pm->err, "not found") && !strstr(pm->err, "no such"))
        pm_fail(pm, rc);
out:
    free(cs);
    free(names);
    return unclean;
}

/*
 * The network's IPv4 subnet (`podman network inspect`): *base (host order) and *prefix. Broker
 * i gets base + 10 + i, and every container names every broker in its /etc/hosts (--add-host
 * strata-j:IP): the names then resolve without the network's DNS, which stops answering for a
 * container that stopped, so that a broker stopping after its peers would wait out its
 * resolver's timeouts (seconds per lookup, past podman stop's -t) before it exits. 0, or -1
 * after saying why.
 */
static int pm_subnet(pm_t *pm, const st_cli_local_t *l, uint32_t *base, int *prefix,
                     int64_t timeout_ms)
{
    pm_begin(pm);
    pm_add(pm, "network");
    pm_add(pm, "inspect");
    pm_add(pm, "--format");
    pm_add(pm, "{{range .Subnets}}{{.Subnet}} {{end}}");
    pm_add(pm, l->project);
    int r = pm_run(pm, timeout_ms);
    if (r != 0) {
        pm_fail(pm, r);
        return -1;
    }
    for (char *save = NULL, *w = strtok_r(pm->out, " \n", &save); w;
         w = strtok_r(NULL, " \n", &save)) {
        unsigned a, b, cc, d;
        int p;
        char tail;
        if (sscanf(w, "%u.%u.%u.%u/%d%c", &a, &b, &cc, &d, &p, &tail) != 5 || a > 255 || b > 255 ||
            cc > 255 || d > 255 || p < 1 || p > 30)
            continue; /* an IPv6 subnet, or not one */
        uint32_t size = 1u << (32 - p);
        if (size < (uint32_t)(10 + l->n + 2))
            continue;
        *base = ((a << 24) | (b << 16) | (cc << 8) | d) & ~(size - 1);
        *prefix = p;
        return 0;
    }
    st_cli_errorf("network %s has no IPv4 subnet with room for %d broker(s) (podman network "
                  "inspect said '%s')",
                  l->project, l->n, pm->out);
    return -1;
}

static void ip_str(uint32_t ip, char *buf, size_t len)
{
    snprintf(buf, len, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

/*
 * start --podman: l (podman, image, project set), the extra arguments every broker gets,
 * root (the cluster directory, made). Brings up network PROJECT and containers PROJECT-1..n,
 * then waits, as the process mode does, for every admin API to show brokers 1..n registered
 * and unfenced; timeout_ms bounds it all from the first podman command.
 */
static int podman_start(const st_cli_local_t *l, const st_cli_strlist_t *extra, const char *root,
                        const char *root_opt, int64_t timeout_ms, bool keep)
{
    pm_t *pm = calloc(1, sizeof *pm);
    bk_t *bs = calloc((size_t)l->n, sizeof *bs);
    ctr_t *cs = calloc((size_t)l->n, sizeof *cs);
    char(*sets)[ST_CLI_LOCAL_SETLEN] = calloc(ST_CLI_LOCAL_PODMAN_NSETS, ST_CLI_LOCAL_SETLEN);
    char(*hosts)[40] = NULL;
    int rc = ST_CLI_FAIL, started = 0;
    if (!pm || !bs || !cs || !sets) {
        st_cli_errorf("out of memory");
        goto out;
    }
    if (find_podman(pm->bin, sizeof pm->bin) < 0)
        goto out;
    int64_t deadline = now_ms() + timeout_ms;
#define LEFT() (deadline - now_ms() < PODMAN_CMD_MS ? deadline - now_ms() : PODMAN_CMD_MS)
    /* podman itself works here (a sandbox may refuse it: say so now, not per container) */
    pm_begin(pm);
    pm_add(pm, "version");
    pm_add(pm, "--format");
    pm_add(pm, "{{.Client.Version}}");
    int r = pm_run(pm, LEFT());
    if (r != 0) {
        pm_fail(pm, r);
        goto out;
    }
    pm_begin(pm);
    pm_add(pm, "image");
    pm_add(pm, "exists");
    pm_add(pm, l->image);
    if ((r = pm_run(pm, LEFT())) == 1) {
        st_cli_errorf("--podman: no image %s: build it from the repository root with `podman "
                      "build -f deploy/Containerfile -t %s .` (or `make deploy-test`, which builds "
                      "localhost/strata:deploy-test), or pass --image",
                      l->image, ST_CLI_LOCAL_IMAGE);
        goto out;
    } else if (r != 0) {
        pm_fail(pm, r);
        goto out;
    }
    /* refuse a project whose containers exist (a cluster started before and not stopped) */
    if ((r = pm_states(pm, l, cs, l->n, LEFT())) != 0) {
        pm_fail(pm, r);
        goto out;
    }
    int there = 0;
    for (int i = 0; i < l->n; i++)
        if (cs[i].exists) {
            char name[128];
            st_cli_local_container(l, i + 1, name, sizeof name);
            if (!there++)
                fprintf(stderr, "strata: containers of project %s are there already:\n",
                        l->project);
            fprintf(stderr, "  %s: %s\n", name, cs[i].state);
        }
    if (there) {
        fprintf(stderr,
                "stop them first with `strata cluster stop -d %s`, or start another with "
                "--project NAME and other ports (--kafka-port, --admin-port)\n",
                root_opt);
        goto out;
    }
    char conf[512], cpath[PATH_MAX + 16];
    int mr = -ENAMETOOLONG;
    if (st_cli_local_conf_format(l, conf, sizeof conf) < 0 ||
        fmt(cpath, sizeof cpath, "%s/%s", root, ST_CLI_LOCAL_CONF) < 0 ||
        (mr = write_atomic(cpath, conf)) < 0) {
        st_cli_errorf("cannot write %s/%s: %s", root, ST_CLI_LOCAL_CONF, strerror(-mr));
        goto out;
    }
    char label[128];
    snprintf(label, sizeof label, "strata.cluster=%s", l->project);
    pm_begin(pm);
    pm_add(pm, "network");
    pm_add(pm, "exists");
    pm_add(pm, l->project);
    if ((r = pm_run(pm, LEFT())) != 0) {
        pm_begin(pm);
        pm_add(pm, "network");
        pm_add(pm, "create");
        pm_add(pm, "--label");
        pm_add(pm, label);
        pm_add(pm, l->project);
        if ((r = pm_run(pm, LEFT())) != 0) {
            pm_fail(pm, r);
            goto out;
        }
    }
    uint32_t net_base;
    int net_prefix;
    if (pm_subnet(pm, l, &net_base, &net_prefix, LEFT()) < 0)
        goto out;
    hosts = calloc((size_t)l->n, sizeof *hosts);
    if (!hosts) {
        st_cli_errorf("out of memory");
        goto out;
    }
    for (int j = 1; j <= l->n; j++) {
        char ip[20];
        ip_str(net_base + 10 + (uint32_t)j, ip, sizeof ip);
        snprintf(hosts[j - 1], sizeof hosts[j - 1], "strata-%d:%s", j, ip);
    }
    printf("starting %d broker(s) in podman containers %s-1..%d (image %s; %s)\n", l->n, l->project,
           l->n, l->image, root);
    for (int i = 1; i <= l->n; i++) {
        bk_t *b = &bs[i - 1];
        bk_init(b, root, i);
        char name[128], host[32], alias[40], pk[96], pa[96], vol[160], ip[20];
        ip_str(net_base + 10 + (uint32_t)i, ip, sizeof ip);
        st_cli_local_container(l, i, name, sizeof name);
        snprintf(host, sizeof host, "strata-%d", i);
        snprintf(alias, sizeof alias, "strata-%d", i);
        snprintf(pk, sizeof pk, "%s:%d:9094", l->host, st_cli_local_kafka_port(l, i));
        snprintf(pa, sizeof pa, "%s:%d:9644", l->host, st_cli_local_admin_port(l, i));
        snprintf(vol, sizeof vol, "%s:/var/lib/strata", name);
        int ns = st_cli_local_podman_sets(l, i, sets);
        if (ns < 0 || 30 + 2 * (size_t)(ns + l->n) + extra->n >= PODMAN_ARGV) {
            st_cli_errorf("broker %d: its settings do not fit", i);
            goto fail;
        }
        pm_begin(pm);
        pm_add(pm, "run");
        pm_add(pm, "-d");
        pm_add(pm, "--name");
        pm_add(pm, name);
        pm_add(pm, "--label");
        pm_add(pm, label);
        pm_add(pm, "--hostname");
        pm_add(pm, host);
        pm_add(pm, "--network");
        pm_add(pm, l->project);
        pm_add(pm, "--network-alias");
        pm_add(pm, alias);
        pm_add(pm, "--ip");
        pm_add(pm, ip);
        for (int j = 0; j < l->n; j++) {
            pm_add(pm, "--add-host");
            pm_add(pm, hosts[j]);
        }
        pm_add(pm, "-p");
        pm_add(pm, pk);
        pm_add(pm, "-p");
        pm_add(pm, pa);
        pm_add(pm, "-v");
        pm_add(pm, vol);
        pm_add(pm, l->image);
        for (int k = 0; k < ns; k++) {
            pm_add(pm, "--set");
            pm_add(pm, sets[k]);
        }
        for (size_t k = 0; k < extra->n; k++)
            pm_add(pm, extra->v[k]);
        if ((r = pm_run(pm, LEFT())) != 0) {
            pm_fail(pm, r);
            /* a container podman made but could not start is still there: remove it too */
            started = i;
            goto fail;
        }
        started = i;
    }

    for (int64_t last_ps = 0;;) {
        int up = 0, dead = 0;
        if (now_ms() - last_ps >= 1000) {
            if ((r = pm_states(pm, l, cs, l->n, LEFT())) != 0) {
                pm_fail(pm, r);
                goto fail;
            }
            last_ps = now_ms();
        }
        for (int i = 0; i < l->n; i++) {
            bk_t *b = &bs[i];
            if (cs[i].exists && !cs[i].running && strcmp(cs[i].state, "created")) {
                b->live = false;
                b->exited = true;
                snprintf(b->how, sizeof b->how, "container %s, exit status %d", cs[i].state,
                         cs[i].exit_code);
                dead++;
                continue;
            }
            b->live = cs[i].running;
            if (!b->live) {
                b->view_ok = false;
                continue;
            }
            int64_t left = deadline - now_ms();
            ask_view(b, l, left < 500 ? 500 : left > 1000 ? 1000 : left);
            if (b->view_ok && st_cli_view_complete(&b->view, l->n))
                up++;
        }
        if (up == l->n)
            break;
        if (dead || now_ms() >= deadline) {
            const bk_t *ref = ref_view(bs, l->n);
            if (dead)
                fprintf(stderr,
                        "strata: cluster start: %d container(s) exited before the cluster was "
                        "up:\n",
                        dead);
            else
                fprintf(stderr,
                        "strata: cluster start: not every broker registered and unfenced within "
                        "%lld ms (--timeout):\n",
                        (long long)timeout_ms);
            for (int i = 0; i < l->n; i++) {
                bk_t *b = &bs[i];
                char why[600], name[128];
                not_up_reason(b, ref, l->n, why, sizeof why);
                bool ok = b->live && b->view_ok && st_cli_view_complete(&b->view, l->n);
                if (ok || (dead && !b->exited))
                    continue;
                st_cli_local_container(l, b->id, name, sizeof name);
                fprintf(stderr, "broker %d (container %s): %s\n", b->id, name, why);
                pm_tail(pm, name, PODMAN_TAIL_MS);
            }
            goto fail;
        }
        nap(POLL_MS);
    }
#undef LEFT
    const bk_t *ref = ref_view(bs, l->n);
    int32_t ctrl = ref ? ref->view.controller_id : -1;
    for (int i = 0; i < l->n; i++) {
        const bk_t *b = &bs[i];
        char name[128];
        st_cli_local_container(l, b->id, name, sizeof name);
        printf("broker %d: container %s, kafka %s:%d, admin http://%s:%d, %s%s\n", b->id, name,
               l->host, st_cli_local_kafka_port(l, b->id), l->host,
               st_cli_local_admin_port(l, b->id),
               st_cli_local_is_voter(l, b->id) ? "voter" : "broker only",
               b->id == ctrl ? ", controller" : "");
    }
    char boot[ST_CLI_LOCAL_MAX * 24];
    st_cli_local_bootstrap(l, boot, sizeof boot);
    printf("controller: broker %d\n"
           "bootstrap servers: %s\n"
           "status: strata cluster status -d %s   stop: strata cluster stop -d %s   logs: "
           "podman logs %s-<id>\n",
           (int)ctrl, boot, root_opt, root_opt, l->project);
    rc = ST_CLI_OK;
    goto out;

fail:
    rc = ST_CLI_FAIL;
    if (started && keep) {
        fprintf(stderr,
                "strata: the containers started are left running (--keep); stop them with "
                "`strata cluster stop -d %s`\n",
                root_opt);
    } else if (started) {
        int unclean = pm_down(pm, l, l->n, ABORT_STOP_MS, false);
        fprintf(stderr,
                "strata: stopped and removed the containers this start began%s (--keep leaves "
                "them running)\n",
                unclean ? ", not all cleanly" : "");
    }
out:
    free(hosts);
    free(sets);
    free(cs);
    free(bs);
    free(pm);
    return rc;
}

/* stop for a podman cluster (cluster.conf says mode=podman). */
static int podman_stop(const st_cli_local_t *l, int64_t timeout_ms)
{
    pm_t *pm = calloc(1, sizeof *pm);
    if (!pm) {
        st_cli_errorf("out of memory");
        return ST_CLI_FAIL;
    }
    if (find_podman(pm->bin, sizeof pm->bin) < 0) {
        free(pm);
        return ST_CLI_FAIL;
    }
    int unclean = pm_down(pm, l, l->n, timeout_ms, true);
    free(pm);
    if (unclean < 0)
        return ST_CLI_FAIL;
    printf("removed the containers and network %s; the data stays in the volumes %s-1..%d "
           "(`podman volume rm` them to start afresh)\n",
           l->project, l->project, l->n);
    if (unclean)
        st_cli_errorf("%d container(s) did not stop cleanly (exit status above)", unclean);
    return unclean ? ST_CLI_FAIL : ST_CLI_OK;
}

/* status for a podman cluster: each container's state and the admin APIs' view. */
static int podman_status(const st_cli_local_t *l, const char *root, int64_t timeout_ms)
{
    pm_t *pm = calloc(1, sizeof *pm);
    bk_t *bs = calloc((size_t)l->n, sizeof *bs);
    ctr_t *cs = calloc((size_t)l->n, sizeof *cs);
    int rc = ST_CLI_FAIL, r;
    if (!pm || !bs || !cs) {
        st_cli_errorf("out of memory");
        goto out;
    }
    if (find_podman(pm->bin, sizeof pm->bin) < 0)
        goto out;
    int64_t deadline = now_ms() + timeout_ms;
    if ((r = pm_states(pm, l, cs, l->n, timeout_ms)) != 0) {
        pm_fail(pm, r);
        goto out;
    }
    int running = 0;
    for (int i = 0; i < l->n; i++) {
        bk_t *b = &bs[i];
        bk_init(b, root, i + 1);
        b->live = cs[i].running;
        if (!b->live)
            continue;
        running++;
        int64_t left = deadline - now_ms();
        ask_view(b, l, left < 500 ? 500 : left > 2000 ? 2000 : left);
    }
    const bk_t *ref = ref_view(bs, l->n);
    printf("%-7s %-8s %-24s %-21s %-21s %s\n", "BROKER", "STATE", "CONTAINER", "KAFKA", "ADMIN",
           "METADATA");
    int unfenced = 0;
    for (int i = 0; i < l->n; i++) {
        bk_t *b = &bs[i];
        char name[128], kafka[80], admin[80], md[200], state[40], last[64] = "";
        st_cli_local_container(l, b->id, name, sizeof name);
        snprintf(kafka, sizeof kafka, "%s:%d", l->host, st_cli_local_kafka_port(l, b->id));
        snprintf(admin, sizeof admin, "%s:%d", l->host, st_cli_local_admin_port(l, b->id));
        snprintf(state, sizeof state, "%s", cs[i].exists ? cs[i].state : "absent");
        if (cs[i].exists && !cs[i].running && strcmp(cs[i].state, "created"))
            snprintf(last, sizeof last, " (exit status %d)", cs[i].exit_code);
        st_cli_reg_t reg = ref ? st_cli_view_reg(&ref->view, b->id) : ST_CLI_REG_NONE;
        if (ref && reg == ST_CLI_REG_UNFENCED && b->live)
            unfenced++;
        snprintf(md, sizeof md, "%s%s%s%s", ref ? st_cli_reg_name(reg) : "-",
                 st_cli_local_is_voter(l, b->id) ? ", voter" : "",
                 b->live && !b->view_ok ? " (its admin API does not answer)" : "", last);
        printf("%-7d %-8s %-24s %-21s %-21s %s\n", b->id, state, name, kafka, admin, md);
    }
    if (ref && ref->view.controller_id >= 0)
        printf("controller: broker %d (as broker %d sees it)\n", (int)ref->view.controller_id,
               ref->id);
    else if (ref)
        printf("controller: none known (as broker %d sees it)\n", ref->id);
    else
        printf("controller: unknown (no broker's admin API answered)\n");
    printf("%d of %d container(s) running, %d registered and unfenced (podman project %s, image "
           "%s; %s)\n",
           running, l->n, unfenced, l->project, l->image, root);
    for (int i = 0; i < l->n; i++)
        if (bs[i].live && !bs[i].view_ok)
            fprintf(stderr, "strata: broker %d: %s\n", bs[i].id, bs[i].why);
    rc = running == l->n && unfenced == l->n ? ST_CLI_OK : ST_CLI_FAIL;
out:
    free(cs);
    free(bs);
    free(pm);
    return rc;
}

int st_cli_cluster_start(int argc, char **argv)
{
    static const char usage[] =
        "cluster start [-n N] [-d DIR] [--server PATH] [--kafka-port PORT] [--admin-port PORT] "
        "[--smp N] [--set K=V ...] [--arg ARG ...] [--timeout DURATION] [--keep] [--podman "
        "[--image IMAGE] [--project NAME]]";
    st_cli_strlist_t pos = {0}, sets = {0}, args = {0}, extra = {0};
    int64_t n = 3, kport = ST_CLI_LOCAL_KAFKA_PORT, aport = ST_CLI_LOCAL_ADMIN_PORT, smp = 0;
    const char *dir_opt = NULL, *server_opt = NULL, *timeout_str = NULL, *image_opt = NULL,
               *project_opt = NULL;
    bool keep = false, podman = false;
    const st_cli_opt_t opts[] = {
        {'n', "nodes", ST_CLI_OPT_INT, &n, "N", "how many brokers (default 3; 1..99)"},
        {'d', "dir", ST_CLI_OPT_STR, &dir_opt, "DIR",
         "the cluster's directory (default $STRATA_CLUSTER_DIR or ./data-cluster)"},
        {0, "server", ST_CLI_OPT_STR, &server_opt, "PATH",
         "strata-server to run (default $STRATA_SERVER, else the one next to strata, else "
         "PATH's)"},
        {0, "kafka-port", ST_CLI_OPT_INT, &kport, "PORT",
         "broker 1's Kafka port; broker i's is PORT+100*(i-1), its CONTROLLER port the next "
         "(default 9092)"},
        {0, "admin-port", ST_CLI_OPT_INT, &aport, "PORT",
         "broker 1's admin API port; broker i's is PORT+i-1 (default 9644)"},
        {0, "smp", ST_CLI_OPT_INT, &smp, "N", "shards per broker (strata-server --smp)"},
        {0, "set", ST_CLI_OPT_LIST, &sets, "KEY=VALUE", "a setting for every broker (--set)"},
        {0, "arg", ST_CLI_OPT_LIST, &args, "ARG",
         "one more strata-server argument for every broker ($STRATA_ARGS adds more, split at "
         "blanks)"},
        {0, "timeout", ST_CLI_OPT_STR, &timeout_str, "DURATION",
         "how long to wait for every broker to be registered and unfenced (default 60s)"},
        {0, "keep", ST_CLI_OPT_FLAG, &keep, NULL,
         "leave the brokers running when start fails (default: stop them)"},
        {0, "podman", ST_CLI_OPT_FLAG, &podman, NULL,
         "run each broker in a podman container of IMAGE (deploy/Containerfile) instead of a "
         "process"},
        {0, "image", ST_CLI_OPT_STR, &image_opt, "IMAGE",
         "--podman: the image (default $STRATA_IMAGE or " ST_CLI_LOCAL_IMAGE ")"},
        {0, "project", ST_CLI_OPT_STR, &project_opt, "NAME",
         "--podman: containers NAME-<id>, network NAME, volumes NAME-<id> (default "
         "" ST_CLI_LOCAL_PROJECT ")"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Starts a cluster of N strata-server processes on this machine, in the "
                          "background, each\nwith its own ports and DIR/<id>/ (data/, "
                          "server.log, server.pid), and waits until\nevery broker is registered "
                          "with the controller and unfenced. Brokers 1..3 vote in\nthe metadata "
                          "quorum. Refuses a DIR whose brokers are running. With --podman the "
                          "brokers are\npodman containers on the same host ports (DIR keeps "
                          "cluster.conf only).",
                          opts, false, &pos, 0, 0);
    char *env_args = NULL;
    bk_t *bs = NULL;
    char(*setbuf)[ST_CLI_LOCAL_NSETS][ST_CLI_LOCAL_SETLEN] = NULL;
    char **argvs[ST_CLI_LOCAL_MAX + 1] = {0};
    int started = 0;
    if (rc >= 0)
        goto out;
    int64_t timeout_ms;
    if ((rc = duration_opt(usage, timeout_str, podman ? PODMAN_START_MS : START_TIMEOUT_MS,
                           &timeout_ms)) >= 0)
        goto out;
    rc = ST_CLI_FAIL;
    if (smp < 0 || smp > 256) {
        rc = st_cli_usage_error(usage, "--smp wants 1..256, not %lld", (long long)smp);
        goto out;
    }
    st_cli_local_t l;
    st_cli_local_default(&l);
    if (n < 1 || n > ST_CLI_LOCAL_MAX || kport < 1 || kport > 65535 || aport < 1 || aport > 65535) {
        rc = st_cli_usage_error(usage,
                                "-n wants 1..%d and the ports 1..65535 (not %lld, %lld, "
                                "%lld)",
                                ST_CLI_LOCAL_MAX, (long long)n, (long long)kport, (long long)aport);
        goto out;
    }
    l.n = (int)n;
    l.kafka_port = (int)kport;
    l.admin_port = (int)aport;
    char err[256];
    if (st_cli_local_check(&l, err, sizeof err) < 0) {
        rc = st_cli_usage_error(usage, "%s", err);
        goto out;
    }
    if (!podman && (image_opt || project_opt)) {
        rc = st_cli_usage_error(usage, "--image and --project go with --podman");
        goto out;
    }
    if (podman && server_opt) {
        rc = st_cli_usage_error(usage, "--podman runs the image's strata-server, not --server");
        goto out;
    }
    if (podman) {
        l.podman = true;
        const char *img = image_opt ? image_opt : getenv("STRATA_IMAGE");
        if (img && *img && fmt(l.image, sizeof l.image, "%s", img) < 0) {
            rc = st_cli_usage_error(usage, "--image: too long");
            goto out;
        }
        if (project_opt) {
            if (!st_cli_local_project_ok(project_opt)) {
                rc = st_cli_usage_error(usage,
                                        "--project wants 1..40 of [A-Za-z0-9_.-], starting with "
                                        "a letter or digit, not '%s'",
                                        project_opt);
                goto out;
            }
            snprintf(l.project, sizeof l.project, "%s", project_opt);
        }
    }
    char server[PATH_MAX] = "";
    if (!podman && find_server(server_opt, server, sizeof server) < 0)
        goto out;
    /* what every broker gets after the layout's settings */
    char smp_s[24];
    if (smp > 0) {
        snprintf(smp_s, sizeof smp_s, "%lld", (long long)smp);
        st_cli_strlist_push(&extra, "--smp");
        st_cli_strlist_push(&extra, smp_s);
    }
    for (size_t i = 0; i < sets.n; i++) {
        if (!strchr(sets.v[i], '=') || sets.v[i][0] == '=') {
            rc = st_cli_usage_error(usage, "--set wants KEY=VALUE, not '%s'", sets.v[i]);
            goto out;
        }
        st_cli_strlist_push(&extra, "--set");
        st_cli_strlist_push(&extra, sets.v[i]);
    }
    for (size_t i = 0; i < args.n; i++)
        st_cli_strlist_push(&extra, args.v[i]);
    const char *e = getenv("STRATA_ARGS");
    if (e && *e && (!(env_args = strdup(e)) || st_cli_local_split_words(env_args, &extra) < 0)) {
        st_cli_errorf("out of memory");
        goto out;
    }

    const char *root_opt = root_dir(dir_opt);
    int mr = mkdirs(root_opt);
    char root[PATH_MAX];
    if (mr < 0 || !realpath(root_opt, root)) {
        st_cli_errorf("cannot make the cluster directory %s: %s", root_opt,
                      strerror(mr < 0 ? -mr : errno));
        goto out;
    }
    /* refuse a directory whose brokers run; drop pid files that name no broker */
    bs = calloc(ST_CLI_LOCAL_MAX, sizeof *bs);
    setbuf = calloc((size_t)l.n, sizeof *setbuf);
    if (!bs || !setbuf) {
        st_cli_errorf("out of memory");
        goto out;
    }
    int running = 0;
    for (int i = 1; i <= ST_CLI_LOCAL_MAX; i++) {
        bk_t probe;
        if (bk_init(&probe, root, i) < 0)
            continue;
        pid_t pid = read_pid(&probe);
        if (!pid)
            continue;
        if (pid_is_broker(&probe, pid)) {
            if (!running++)
                fprintf(stderr, "strata: a cluster is already running in %s:\n", root);
            fprintf(stderr, "  broker %d: pid %d\n", i, (int)pid);
        } else {
            remove_pid_file(&probe, pid);
        }
    }
    if (running) {
        fprintf(stderr,
                "stop it first with `strata cluster stop -d %s`, or start another in "
                "another directory (-d) with other ports (--kafka-port, --admin-port)\n",
                root_opt);
        goto out;
    }
    if (podman) {
        char pmsg[PATH_MAX + 128];
        snprintf(pmsg, sizeof pmsg,
                 "strata: cluster start --podman did not end within its deadline; the containers "
                 "may still be running: `strata cluster stop -d %s`",
                 root_opt);
        st_cli_watchdog(timeout_ms + (int64_t)l.n * PODMAN_TAIL_MS +
                            PODMAN_DOWN_MS(l.n, ABORT_STOP_MS) + 10000,
                        pmsg);
        rc = podman_start(&l, &extra, root, root_opt, timeout_ms, keep);
        st_cli_watchdog(0, "");
        goto out;
    }
    char conf[512], cpath[PATH_MAX + 16];
    if (st_cli_local_conf_format(&l, conf, sizeof conf) < 0 ||
        fmt(cpath, sizeof cpath, "%s/%s", root, ST_CLI_LOCAL_CONF) < 0 ||
        (mr = write_atomic(cpath, conf)) < 0) {
        st_cli_errorf("cannot write %s/%s: %s", root, ST_CLI_LOCAL_CONF, strerror(-mr));
        goto out;
    }
    /* the last resort behind the bounded waits below */
    char wmsg[PATH_MAX + 128];
    snprintf(wmsg, sizeof wmsg,
             "strata: cluster start did not end within its deadline; the brokers may still be "
             "running: `strata cluster stop -d %s`",
             root_opt);
    st_cli_watchdog(timeout_ms + ABORT_STOP_MS + KILL_WAIT_MS + 10000, wmsg);

    printf("starting %d broker(s) in %s (%s)\n", l.n, root, server);
    for (int i = 0; i < l.n; i++) {
        bk_t *b = &bs[i];
        char data[PATH_MAX + 16];
        if (bk_init(b, root, i + 1) < 0 || fmt(data, sizeof data, "%s/data", b->dir) < 0 ||
            (mr = mkdirs(data)) < 0) {
            st_cli_errorf("broker %d: cannot make %s/data: %s", i + 1, b->dir,
                          strerror(mr < 0 ? -mr : ENAMETOOLONG));
            goto fail;
        }
        argvs[i] = server_argv(server, &l, b, &extra, setbuf[i]);
        if (!argvs[i]) {
            st_cli_errorf("broker %d: its settings do not fit (a long directory name?)", i + 1);
            goto fail;
        }
        if (spawn(b, argvs[i]) < 0)
            goto fail;
        started++;
    }

    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int up = 0, dead = 0;
        for (int i = 0; i < l.n; i++) {
            bk_t *b = &bs[i];
            if (b->exited || read_exit(b, b->pid)) {
                b->live = false;
                dead++;
                continue;
            }
            b->live = kill(b->pid, 0) == 0;
            if (!b->live) {
                b->view_ok = false;
                continue;
            }
            /* at least 500 ms even at the deadline, so the last answer says why */
            int64_t left = deadline - now_ms();
            ask_view(b, &l, left < 500 ? 500 : left > 1000 ? 1000 : left);
            if (b->view_ok && st_cli_view_complete(&b->view, l.n))
                up++;
        }
        if (up == l.n)
            break;
        bool late = now_ms() >= deadline;
        if (dead || late) {
            const bk_t *ref = ref_view(bs, l.n);
            if (dead)
                fprintf(stderr,
                        "strata: cluster start: %d broker(s) exited before the cluster "
                        "was up:\n",
                        dead);
            else
                fprintf(stderr,
                        "strata: cluster start: not every broker registered and unfenced "
                        "within %lld ms (--timeout):\n",
                        (long long)timeout_ms);
            for (int i = 0; i < l.n; i++) {
                bk_t *b = &bs[i];
                char why[400];
                not_up_reason(b, ref, l.n, why, sizeof why);
                bool ok = b->live && b->view_ok && st_cli_view_complete(&b->view, l.n);
                if (ok || (dead && !b->exited))
                    continue;
                fprintf(stderr, "broker %d (pid %d): %s\n", b->id, (int)b->pid, why);
                tail_log(b, TAIL_LINES);
            }
            goto fail;
        }
        nap(POLL_MS);
    }

    const bk_t *ref = ref_view(bs, l.n);
    int32_t ctrl = ref ? ref->view.controller_id : -1;
    for (int i = 0; i < l.n; i++) {
        const bk_t *b = &bs[i];
        printf("broker %d: pid %d, kafka %s:%d, admin http://%s:%d, %s%s\n", b->id, (int)b->pid,
               l.host, st_cli_local_kafka_port(&l, b->id), l.host,
               st_cli_local_admin_port(&l, b->id),
               st_cli_local_is_voter(&l, b->id) ? "voter" : "broker only",
               b->id == ctrl ? ", controller" : "");
    }
    char boot[ST_CLI_LOCAL_MAX * 24];
    st_cli_local_bootstrap(&l, boot, sizeof boot);
    printf("controller: broker %d\n"
           "bootstrap servers: %s\n"
           "status: strata cluster status -d %s   stop: strata cluster stop -d %s   logs: "
           "%s/<id>/server.log\n",
           (int)ctrl, boot, root_opt, root_opt, root);
    st_cli_watchdog(0, "");
    rc = ST_CLI_OK;
    goto out;

fail:
    rc = ST_CLI_FAIL;
    if (started && keep) {
        fprintf(stderr,
                "strata: the brokers started are left running (--keep); stop them with "
                "`strata cluster stop -d %s`\n",
                root_opt);
    } else if (started) {
        int live = 0;
        for (int i = 0; i < started; i++)
            live += bs[i].live && !bs[i].exited;
        int unclean = stop_all(bs, started, ABORT_STOP_MS, false);
        if (live)
            fprintf(stderr,
                    "strata: stopped the %d broker(s) this start began that were running%s "
                    "(--keep leaves them running)\n",
                    live, unclean ? ", not all cleanly" : "");
    }
    st_cli_watchdog(0, "");
out:
    for (int i = 0; i <= ST_CLI_LOCAL_MAX; i++)
        free(argvs[i]);
    free(setbuf);
    free(bs);
    free(env_args);
    st_cli_strlist_fini(&extra);
    st_cli_strlist_fini(&args);
    st_cli_strlist_fini(&sets);
    st_cli_strlist_fini(&pos);
    return rc;
}

/* ---- stop ----------------------------------------------------------------------------------- */

int st_cli_cluster_stop(int argc, char **argv)
{
    static const char usage[] = "cluster stop [-d DIR] [--timeout DURATION]";
    st_cli_strlist_t pos = {0};
    const char *dir_opt = NULL, *timeout_str = NULL;
    const st_cli_opt_t opts[] = {
        {'d', "dir", ST_CLI_OPT_STR, &dir_opt, "DIR",
         "the cluster's directory (default $STRATA_CLUSTER_DIR or ./data-cluster)"},
        {0, "timeout", ST_CLI_OPT_STR, &timeout_str, "DURATION",
         "how long each broker has to exit after SIGTERM before SIGKILL (default 30s)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Stops the brokers `strata cluster start` started in DIR: SIGTERM, "
                          "a bounded wait for\neach to exit, SIGKILL after it. Reports each "
                          "one's exit status; exits 1 unless every\none exited with status 0. "
                          "Removes pid files that name no running broker.",
                          opts, false, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc >= 0)
        return rc;
    int64_t timeout_ms;
    if ((rc = duration_opt(usage, timeout_str, STOP_TIMEOUT_MS, &timeout_ms)) >= 0)
        return rc;
    const char *root = root_dir(dir_opt);
    st_cli_local_t l;
    if (load_layout(root, -1, -1, -1, &l) < 0)
        return ST_CLI_FAIL;
    char wmsg[PATH_MAX + 128];
    if (l.podman) {
        snprintf(wmsg, sizeof wmsg,
                 "strata: cluster stop did not end within its deadline (%s, podman project %s)",
                 root, l.project);
        st_cli_watchdog(PODMAN_DOWN_MS(l.n, timeout_ms) + 10000, wmsg);
        rc = podman_stop(&l, timeout_ms);
        st_cli_watchdog(0, "");
        return rc;
    }
    bk_t *bs = calloc(ST_CLI_LOCAL_MAX, sizeof *bs);
    if (!bs) {
        st_cli_errorf("out of memory");
        return ST_CLI_FAIL;
    }
    snprintf(wmsg, sizeof wmsg, "strata: cluster stop did not end within its deadline (%s)", root);
    st_cli_watchdog(timeout_ms + KILL_WAIT_MS + EXIT_FILE_WAIT_MS + 10000, wmsg);
    int n = 0, stale = 0;
    for (int i = 1; i <= ST_CLI_LOCAL_MAX; i++) {
        bk_t *b = &bs[n];
        if (bk_init(b, root, i) < 0)
            continue;
        b->pid = read_pid(b);
        if (!b->pid)
            continue;
        if (!pid_is_broker(b, b->pid)) {
            printf("broker %d: not running (removed the stale pid file naming %d)\n", i,
                   (int)b->pid);
            remove_pid_file(b, b->pid);
            stale++;
            continue;
        }
        b->live = true;
        n++;
    }
    if (!n) {
        printf("no broker running in %s\n", root);
        free(bs);
        st_cli_watchdog(0, "");
        return ST_CLI_OK;
    }
    int unclean = stop_all(bs, n, timeout_ms, true);
    free(bs);
    st_cli_watchdog(0, "");
    if (unclean)
        st_cli_errorf("%d broker(s) did not exit cleanly; see their server.log under %s", unclean,
                      root);
    return unclean ? ST_CLI_FAIL : ST_CLI_OK;
}

/* ---- status --------------------------------------------------------------------------------- */

int st_cli_cluster_status(int argc, char **argv)
{
    static const char usage[] =
        "cluster status [-d DIR] [-n N] [--kafka-port PORT] [--admin-port PORT] [--timeout "
        "DURATION]";
    st_cli_strlist_t pos = {0};
    const char *dir_opt = NULL, *timeout_str = NULL;
    int64_t n = -1, kport = -1, aport = -1;
    const st_cli_opt_t opts[] = {
        {'d', "dir", ST_CLI_OPT_STR, &dir_opt, "DIR",
         "the cluster's directory (default $STRATA_CLUSTER_DIR or ./data-cluster)"},
        {'n', "nodes", ST_CLI_OPT_INT, &n, "N",
         "how many brokers there should be (default: what start wrote in DIR/cluster.conf, "
         "else 3)"},
        {0, "kafka-port", ST_CLI_OPT_INT, &kport, "PORT", "broker 1's Kafka port (the same)"},
        {0, "admin-port", ST_CLI_OPT_INT, &aport, "PORT", "broker 1's admin port (the same)"},
        {0, "timeout", ST_CLI_OPT_STR, &timeout_str, "DURATION",
         "how long to wait for the admin APIs' answers (default 5s)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Shows each broker of the cluster in DIR: running or not, its pid and "
                          "ports, and\nwhether it is registered with the controller and unfenced. "
                          "Exits 0 only when all N\nare running and unfenced.",
                          opts, false, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc >= 0)
        return rc;
    int64_t timeout_ms;
    if ((rc = duration_opt(usage, timeout_str, STATUS_TIMEOUT_MS, &timeout_ms)) >= 0)
        return rc;
    const char *root = root_dir(dir_opt);
    st_cli_local_t l;
    if (load_layout(root, n, kport, aport, &l) < 0)
        return ST_CLI_USAGE;
    if (l.podman) {
        char pmsg[PATH_MAX + 128];
        snprintf(pmsg, sizeof pmsg,
                 "strata: cluster status did not end within its deadline (%s, podman project %s)",
                 root, l.project);
        st_cli_watchdog(timeout_ms + PODMAN_CMD_MS + 5000, pmsg);
        rc = podman_status(&l, root, timeout_ms);
        st_cli_watchdog(0, "");
        return rc;
    }
    bk_t *bs = calloc((size_t)l.n, sizeof *bs);
    if (!bs) {
        st_cli_errorf("out of memory");
        return ST_CLI_FAIL;
    }
    char wmsg[PATH_MAX + 128];
    snprintf(wmsg, sizeof wmsg, "strata: cluster status did not end within its deadline (%s)",
             root);
    st_cli_watchdog(timeout_ms + 5000, wmsg);
    int64_t deadline = now_ms() + timeout_ms;
    int running = 0;
    for (int i = 0; i < l.n; i++) {
        bk_t *b = &bs[i];
        bk_init(b, root, i + 1);
        b->pid = read_pid(b);
        b->live = pid_is_broker(b, b->pid);
        if (!b->live) {
            if (b->pid)
                read_exit(b, b->pid);
            continue;
        }
        running++;
        int64_t left = deadline - now_ms();
        ask_view(b, &l, left < 2000 ? left : 2000);
    }
    const bk_t *ref = ref_view(bs, l.n);
    printf("%-7s %-8s %-8s %-21s %-21s %-21s %s\n", "BROKER", "STATE", "PID", "KAFKA", "CONTROLLER",
           "ADMIN", "METADATA");
    int unfenced = 0;
    for (int i = 0; i < l.n; i++) {
        bk_t *b = &bs[i];
        char pid[16] = "-", kafka[80], ctrl[80], admin[80], md[200], last[96] = "";
        if (b->live)
            snprintf(pid, sizeof pid, "%d", (int)b->pid);
        snprintf(kafka, sizeof kafka, "%s:%d", l.host, st_cli_local_kafka_port(&l, b->id));
        snprintf(ctrl, sizeof ctrl, "%s:%d", l.host, st_cli_local_ctrl_port(&l, b->id));
        snprintf(admin, sizeof admin, "%s:%d", l.host, st_cli_local_admin_port(&l, b->id));
        st_cli_reg_t r = ref ? st_cli_view_reg(&ref->view, b->id) : ST_CLI_REG_NONE;
        if (ref && r == ST_CLI_REG_UNFENCED && b->live)
            unfenced++;
        if (!b->live && b->exited)
            snprintf(last, sizeof last, " (its server ended: %s)", b->how);
        snprintf(md, sizeof md, "%s%s%s%s", ref ? st_cli_reg_name(r) : "-",
                 st_cli_local_is_voter(&l, b->id) ? ", voter" : "",
                 b->live && !b->view_ok ? " (its admin API does not answer)" : "", last);
        printf("%-7d %-8s %-8s %-21s %-21s %-21s %s\n", b->id, b->live ? "running" : "stopped", pid,
               kafka, ctrl, admin, md);
    }
    if (ref && ref->view.controller_id >= 0)
        printf("controller: broker %d (as broker %d sees it)\n", (int)ref->view.controller_id,
               ref->id);
    else if (ref)
        printf("controller: none known (as broker %d sees it)\n", ref->id);
    else
        printf("controller: unknown (no broker's admin API answered)\n");
    printf("%d of %d broker(s) running, %d registered and unfenced (%s)\n", running, l.n, unfenced,
           root);
    for (int i = 0; i < l.n; i++)
        if (bs[i].live && !bs[i].view_ok)
            fprintf(stderr, "strata: broker %d: %s\n", bs[i].id, bs[i].why);
    free(bs);
    st_cli_watchdog(0, "");
    return running == l.n && unfenced == l.n ? ST_CLI_OK : ST_CLI_FAIL;
}
