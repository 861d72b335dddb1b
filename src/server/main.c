/*
 * main.c — strata-server: parse the command line and configuration, start the shards, wait
 * for SIGINT/SIGTERM, shut down cleanly (SIGHUP: reload the TLS certificates).
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef ST_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "admin/admin.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "cluster/config.h"
#include "broker/otlp.h"
#include "broker/protolog.h"
#include "broker/runtime.h"
#include "kafka/serve.h"
#include "net/conn.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: strata-server [-c FILE] [--set key=value ...] [--smp N]\n"
               "\n"
               "Starts a Strata broker: the Kafka protocol on `listeners`, data under `log.dirs`.\n"
               "\n"
               "options:\n"
               "  -c, --config FILE   read settings from a properties file (key=value lines)\n"
               "  -s, --set K=V       set one setting (after the file; may repeat)\n"
               "  --smp N             number of shards (threads, one per core); default: the\n"
               "                      number of cores this process may run on\n"
               "  -h, --help          this help\n"
               "  -V, --version       print the version\n"
               "\n"
               "settings (Kafka's names where Kafka has the setting):\n");
    st_config_print_keys(f);
}

static int default_smp(void)
{
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) == 0 && CPU_COUNT(&s) > 0)
        return CPU_COUNT(&s);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int run(int argc, char **argv, st_config_t *cfgp, char **sets);

/*
 * Tells systemd (Type=notify) where the broker stands: READY=1 once it serves, STOPPING=1 when
 * a signal starts the shutdown. A no-op outside systemd (no NOTIFY_SOCKET) or without libsystemd.
 */
static void notify(const char *state)
{
#ifdef ST_HAVE_SYSTEMD
    int rc = sd_notify(0, state);
    if (rc < 0)
        ST_WARN("sd_notify(%s): %s", state, strerror(-rc));
#else
    (void)state;
#endif
}

/*
 * Request frames of more than 128 KiB (a producer's batches) are malloc'd per request. glibc
 * would serve them with mmap, or trim them off a shard's arena once freed, so each request's
 * pages were faulted in afresh as the socket filled them: 100,000 page faults per 300 MB
 * produced. Freed frames stay in the arena for the next one instead (up to 32 MiB, glibc's
 * largest mmap threshold; bigger frames are rare and still mapped).
 */
static void keep_freed_frames(void)
{
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 128 << 20);
}

/*
 * libuv's thread pool (four threads unless UV_THREADPOOL_SIZE says otherwise, read once at its
 * first use) runs the quorum's name lookups (libraft's connects, the heartbeats' voter names)
 * and, where the file system has no kernel AIO (overlayfs in a container), the metadata log's
 * writes. A lookup of a peer whose name stopped answering (a stopped container on a podman
 * network) holds a pool thread for the resolver's whole timeout: with four, a few of them could
 * leave the log's writes waiting, and the controller could not commit the fencing of the very
 * peer that went away. Sixteen, unless the user chose.
 */
static void size_uv_pool(void)
{
    setenv("UV_THREADPOOL_SIZE", "16", 0);
}

int main(int argc, char **argv)
{
    keep_freed_frames();
    size_uv_pool();
    st_config_t cfg;
    if (st_config_init(&cfg)) {
        fprintf(stderr, "strata-server: cannot initialise configuration\n");
        return 1;
    }
    char **sets = calloc((size_t)argc + 1, sizeof *sets);
    int rc = sets ? run(argc, argv, &cfg, sets) : 1;
    free(sets);
    st_config_fini(&cfg);
    return rc;
}

/* Parses the command line into *cfgp, runs the broker until a signal; returns the exit code. */
static int run(int argc, char **argv, st_config_t *cfgp, char **sets)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"set", required_argument, NULL, 's'},
        {"smp", required_argument, NULL, 'n'},    {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},      {NULL, 0, NULL, 0},
    };
    char err[512];
    const char *config_file = NULL;
    int nsets = 0, smp = 0, opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "c:s:hV", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config_file = optarg;
            break;
        case 's':
            sets[nsets++] = optarg;
            break;
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 256) {
                fprintf(stderr, "strata-server: bad --smp '%s' (expected 1..256)\n", optarg);
                return 2;
            }
            smp = (int)v;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("strata-server %s\n", STRATA_VERSION);
            return 0;
        default:
            fprintf(stderr, "strata-server: unknown option '%s' (see --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "strata-server: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    if (config_file && st_config_load(cfgp, config_file, err, sizeof err)) {
        fprintf(stderr, "strata-server: %s\n", err);
        return 1;
    }
    for (int i = 0; i < nsets; i++) {
        /* The key is copied out: argv stays as given (ps, pgrep -f see the whole --set). */
        const char *eq = strchr(sets[i], '=');
        if (!eq) {
            fprintf(stderr, "strata-server: bad --set '%s' (expected key=value)\n", sets[i]);
            return 2;
        }
        char *key = strndup(sets[i], (size_t)(eq - sets[i]));
        if (!key)
            snprintf(err, sizeof err, "out of memory");
        int rc = key ? st_config_set(cfgp, key, eq + 1, err, sizeof err) : -ENOMEM;
        free(key);
        if (rc) {
            fprintf(stderr, "strata-server: %s\n", err);
            return 1;
        }
    }
    if (st_config_finish(cfgp, err, sizeof err)) {
        fprintf(stderr, "strata-server: %s\n", err);
        return 1;
    }
    st_log_level_t lvl;
    st_log_parse_level(cfgp->log_level, &lvl);
    st_log_set_level(lvl);
    if (smp == 0)
        smp = default_smp();

    /* Block the signals in every thread; the main thread takes them with sigwait. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (st_protolog_configure(cfgp->log_protocol, err, sizeof err)) {
        fprintf(stderr, "strata-server: %s\n", err);
        return 1;
    }
    if (st_otlp_start(cfgp->tracing_endpoint, cfgp->tracing_sample_ratio,
                      cfgp->tracing_service_name, err, sizeof err)) {
        fprintf(stderr, "strata-server: %s\n", err);
        return 1;
    }
    st_broker_t *b;
    int rc = st_kafka_init(cfgp);
    if (rc) {
        fprintf(stderr, "strata-server: cannot register the coordinators: %s\n", st_strerror(rc));
        return 1;
    }
    /* A taken admin port stops the start before the data directory is touched (the broker
     * binds its own ports first); the admin API binds it for real once the broker exists. */
    if (cfgp->admin_port > 0 &&
        st_net_probe_port(cfgp->admin_host, cfgp->admin_port) == -EADDRINUSE) {
        fprintf(stderr, "strata-server: cannot listen on %s:%d (admin.listen): %s\n",
                cfgp->admin_host, cfgp->admin_port, strerror(EADDRINUSE));
        return 1;
    }
    rc = st_broker_create(&b, cfgp, smp, &st_kafka_hooks, err, sizeof err);
    if (rc) {
        fprintf(stderr, "strata-server: %s\n", err);
        return 1;
    }
    /* The admin API answers (503 on /v1/status/ready) while the shards recover. */
    st_admin_t *admin = NULL;
    if (cfgp->admin_port >= 0) {
        rc = st_admin_create(&admin, b);
        if (!rc)
            rc = st_admin_listen(admin, cfgp->admin_host, cfgp->admin_port, err, sizeof err);
        if (rc) {
            fprintf(stderr, "strata-server: %s\n", rc == -ENOMEM ? "out of memory" : err);
            st_admin_destroy(admin);
            st_broker_destroy(b);
            return 1;
        }
    }
    int64_t t0 = st_mono_ns();
    rc = st_broker_start(b);
    if (rc) {
        fprintf(stderr, "strata-server: a shard failed to start (see the log above)\n");
        st_broker_stop(b);
        st_broker_join(b);
        st_admin_destroy(admin);
        st_broker_destroy(b);
        return 1;
    }
    if ((rc = st_broker_start_replication(b, err, sizeof err)) != 0) {
        fprintf(stderr, "strata-server: %s\n", err);
        st_broker_stop(b);
        st_broker_join(b);
        st_admin_destroy(admin);
        st_broker_destroy(b);
        return 1;
    }
    if (admin)
        st_admin_set_started(admin, (double)(st_mono_ns() - t0) / 1e9);
    ST_INFO("strata-server %s ready: kafka on %s:%d (advertised %s:%d), %d shard(s), data in %s, "
            "cluster %s, node %lld",
            STRATA_VERSION, cfgp->listen_host, b->listen_port, cfgp->advertised_host,
            cfgp->advertised_port ? cfgp->advertised_port : b->listen_port, smp, cfgp->log_dirs,
            b->cluster_id, (long long)cfgp->node_id);
    notify("READY=1\nSTATUS=serving");
    int sig = 0;
    /* SIGHUP: the TLS listeners load their certificate files again (as when they change). */
    while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP) {
        ST_INFO("received SIGHUP, reloading certificates");
        st_broker_reload_tls(b);
    }
    ST_INFO("received %s, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    notify("STOPPING=1");
    st_broker_stop(b);
    st_broker_join(b);
    st_admin_destroy(admin);
    st_broker_destroy(b);
    st_otlp_stop(); /* after the shards: their last spans go too */
    st_protolog_fini();
    ST_INFO("stopped cleanly");
    return 0;
}
