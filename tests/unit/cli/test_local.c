/*
 * test_local.c — the local cluster's layout (ports, voters, each broker's settings, the
 * cluster.conf text), $STRATA_ARGS splitting, and reading the admin API's /v1/cluster answer,
 * as `strata cluster start|stop|status` use them (src/cli/local.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/args.c"
#include "cli/local.c"

static void default_layout_is_cluster_sh(void **state)
{
    (void)state;
    st_cli_local_t l;
    st_cli_local_default(&l);
    char err[256];
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), 0);
    assert_int_equal(l.n, 3);
    assert_int_equal(st_cli_local_kafka_port(&l, 1), 9092);
    assert_int_equal(st_cli_local_ctrl_port(&l, 1), 9093);
    assert_int_equal(st_cli_local_kafka_port(&l, 3), 9292);
    assert_int_equal(st_cli_local_ctrl_port(&l, 3), 9293);
    assert_int_equal(st_cli_local_admin_port(&l, 1), 9644);
    assert_int_equal(st_cli_local_admin_port(&l, 3), 9646);
    char boot[128];
    assert_int_equal(st_cli_local_bootstrap(&l, boot, sizeof boot), 0);
    assert_string_equal(boot, "127.0.0.1:9092,127.0.0.1:9192,127.0.0.1:9292");
    assert_int_equal(st_cli_local_bootstrap(&l, boot, 20), -1);
}

static void voters_are_the_first_three(void **state)
{
    (void)state;
    st_cli_local_t l;
    st_cli_local_default(&l);
    l.n = 1;
    assert_int_equal(st_cli_local_nvoters(&l), 1);
    l.n = 5;
    assert_int_equal(st_cli_local_nvoters(&l), 3);
    assert_true(st_cli_local_is_voter(&l, 3));
    assert_false(st_cli_local_is_voter(&l, 4));
    assert_false(st_cli_local_is_voter(&l, 0));
}

static void settings_of_a_broker(void **state)
{
    (void)state;
    st_cli_local_t l;
    st_cli_local_default(&l);
    l.n = 4;
    l.kafka_port = 21000;
    l.admin_port = 21500;
    static char sets[ST_CLI_LOCAL_NSETS][ST_CLI_LOCAL_SETLEN];
    assert_int_equal(st_cli_local_sets(&l, 4, "/d/4/data", sets), ST_CLI_LOCAL_NSETS);
    assert_string_equal(sets[0], "node.id=4");
    assert_string_equal(sets[1], "process.roles=broker");
    assert_string_equal(sets[2], "controller.quorum.voters=1@127.0.0.1:21001,2@127.0.0.1:21101,"
                                 "3@127.0.0.1:21201");
    assert_string_equal(sets[3], "listeners=PLAINTEXT://127.0.0.1:21300,CONTROLLER://"
                                 "127.0.0.1:21301");
    assert_string_equal(sets[4], "advertised.listeners=PLAINTEXT://127.0.0.1:21300");
    assert_string_equal(sets[5], "controller.listener.names=CONTROLLER");
    assert_string_equal(sets[6], "log.dirs=/d/4/data");
    assert_string_equal(sets[7], "admin.listen=127.0.0.1:21503");
    assert_int_equal(st_cli_local_sets(&l, 2, "/d/2/data", sets), ST_CLI_LOCAL_NSETS);
    assert_string_equal(sets[1], "process.roles=broker,controller");
    /* a data directory longer than a setting holds */
    char *big = malloc(ST_CLI_LOCAL_SETLEN + 10);
    memset(big, 'a', ST_CLI_LOCAL_SETLEN + 9);
    big[ST_CLI_LOCAL_SETLEN + 9] = '\0';
    assert_int_equal(st_cli_local_sets(&l, 1, big, sets), -1);
    free(big);
}

static void check_refuses_bad_layouts(void **state)
{
    (void)state;
    st_cli_local_t l;
    char err[256];
    st_cli_local_default(&l);
    l.n = 0;
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), -1);
    assert_non_null(strstr(err, "1..99"));
    l.n = 100;
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), -1);
    l.n = 99;
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), -1); /* 9092+9800+1 fits; admin */
    assert_non_null(strstr(err, "collide"));
    l.admin_port = 20000; /* above every Kafka and CONTROLLER port (9092..18893) */
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), 0);
    l.n = 3;
    l.kafka_port = 65400; /* broker 3's CONTROLLER port would be 65601 */
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), -1);
    assert_non_null(strstr(err, "65601"));
    st_cli_local_default(&l);
    l.admin_port = 9192; /* broker 2's Kafka port */
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), -1);
    assert_non_null(strstr(err, "broker 2"));
    l.admin_port = 9094; /* 9094..9096: between broker 1's and broker 2's ports */
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), 0);
    l.admin_port = 9093; /* broker 1's CONTROLLER port */
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), -1);
    l.admin_port = 65534; /* 65534..65536 */
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), -1);
    l.admin_port = 0;
    assert_int_equal(st_cli_local_check(&l, err, sizeof err), -1);
}

static void conf_round_trip(void **state)
{
    (void)state;
    st_cli_local_t l, back;
    st_cli_local_default(&l);
    l.n = 5;
    l.kafka_port = 21000;
    l.admin_port = 22000;
    char text[256], err[256];
    assert_int_equal(st_cli_local_conf_format(&l, text, sizeof text), 0);
    assert_string_equal(
        text, "brokers=5\nhost=127.0.0.1\nkafka_port=21000\nadmin_port=22000\nmode=process\n");
    assert_int_equal(st_cli_local_conf_parse(text, &back, err, sizeof err), 0);
    assert_int_equal(back.n, 5);
    assert_int_equal(back.kafka_port, 21000);
    assert_int_equal(back.admin_port, 22000);
    assert_string_equal(back.host, "127.0.0.1");
    assert_false(back.podman);
    assert_int_equal(st_cli_local_conf_format(&l, text, 10), -1);
}

/* A podman cluster's cluster.conf names the mode, image and project; stop and status read them. */
static void conf_podman(void **state)
{
    (void)state;
    st_cli_local_t l, back;
    st_cli_local_default(&l);
    assert_string_equal(l.image, "localhost/strata:latest");
    assert_string_equal(l.project, "strata-cluster");
    l.podman = true;
    snprintf(l.image, sizeof l.image, "localhost/strata:deploy-test");
    snprintf(l.project, sizeof l.project, "dt-1");
    char text[512], err[256];
    assert_int_equal(st_cli_local_conf_format(&l, text, sizeof text), 0);
    assert_string_equal(text, "brokers=3\nhost=127.0.0.1\nkafka_port=9092\nadmin_port=9644\n"
                              "mode=podman\nimage=localhost/strata:deploy-test\nproject=dt-1\n");
    assert_int_equal(st_cli_local_conf_parse(text, &back, err, sizeof err), 0);
    assert_true(back.podman);
    assert_string_equal(back.image, "localhost/strata:deploy-test");
    assert_string_equal(back.project, "dt-1");
    /* a cluster.conf of before the mode line: processes */
    assert_int_equal(st_cli_local_conf_parse("brokers=2\n", &back, err, sizeof err), 0);
    assert_false(back.podman);
    assert_int_equal(st_cli_local_conf_parse("mode=docker\n", &back, err, sizeof err), -1);
    assert_int_equal(st_cli_local_conf_parse("project=-x\n", &back, err, sizeof err), -1);
    assert_int_equal(st_cli_local_conf_parse("project=a/b\n", &back, err, sizeof err), -1);
    assert_int_equal(st_cli_local_conf_parse("image=\n", &back, err, sizeof err), -1);
    assert_true(st_cli_local_project_ok("strata-dt1_x.2"));
    assert_false(st_cli_local_project_ok(""));
    assert_false(st_cli_local_project_ok("a b"));
    char name[64];
    assert_int_equal(st_cli_local_container(&l, 2, name, sizeof name), 0);
    assert_string_equal(name, "dt-1-2");
    assert_int_equal(st_cli_local_container(&l, 2, name, 4), -1);
}

/* What broker i's container gets: listeners inside at fixed ports, EXTERNAL advertised on the
 * host port the container's 9094 is published on, voters by their network aliases. */
static void podman_settings(void **state)
{
    (void)state;
    st_cli_local_t l;
    st_cli_local_default(&l);
    l.n = 4;
    l.kafka_port = 21000;
    char sets[ST_CLI_LOCAL_PODMAN_NSETS][ST_CLI_LOCAL_SETLEN];
    assert_int_equal(st_cli_local_podman_sets(&l, 4, sets), ST_CLI_LOCAL_PODMAN_NSETS);
    assert_string_equal(sets[0], "node.id=4");
    assert_string_equal(sets[1], "process.roles=broker");
    assert_string_equal(sets[2],
                        "controller.quorum.voters=1@strata-1:9093,2@strata-2:9093,3@strata-3:9093");
    assert_string_equal(sets[3], "listeners=INTERNAL://:9092,EXTERNAL://:9094,CONTROLLER://:9093");
    assert_string_equal(sets[5],
                        "advertised.listeners=INTERNAL://strata-4:9092,EXTERNAL://127.0.0.1:21300");
    assert_string_equal(sets[6], "inter.broker.listener.name=INTERNAL");
    assert_string_equal(sets[8], "admin.listen=0.0.0.0:9644");
    assert_string_equal(sets[9], "log.dirs=/var/lib/strata");
    assert_int_equal(st_cli_local_podman_sets(&l, 1, sets), ST_CLI_LOCAL_PODMAN_NSETS);
    assert_string_equal(sets[1], "process.roles=broker,controller");
}

static void conf_parse_errors(void **state)
{
    (void)state;
    st_cli_local_t l;
    char err[256];
    /* comments, blank lines, unknown keys and a missing last newline are fine */
    assert_int_equal(st_cli_local_conf_parse("# x\n\nfuture=1\nbrokers=2", &l, err, sizeof err), 0);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.kafka_port, 9092);
    assert_int_equal(st_cli_local_conf_parse("", &l, err, sizeof err), 0);
    assert_int_equal(l.n, 3);
    assert_int_equal(st_cli_local_conf_parse("brokers=x\n", &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "line 1"));
    assert_int_equal(st_cli_local_conf_parse("brokers=3\nkafka_port=70000\n", &l, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "line 2"));
    assert_int_equal(st_cli_local_conf_parse("brokers 3\n", &l, err, sizeof err), -1);
    assert_int_equal(st_cli_local_conf_parse("host=\n", &l, err, sizeof err), -1);
    /* each value fine, the layout not: the admin ports collide */
    assert_int_equal(st_cli_local_conf_parse("admin_port=9192\n", &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "collide"));
    char longline[400];
    memset(longline, 'k', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    assert_int_equal(st_cli_local_conf_parse(longline, &l, err, sizeof err), -1);
}

static void split_words(void **state)
{
    (void)state;
    char s[] = "  --smp 2\t--set  a=b\n";
    st_cli_strlist_t out = {0};
    assert_int_equal(st_cli_local_split_words(s, &out), 0);
    assert_int_equal(out.n, 4);
    assert_string_equal(out.v[0], "--smp");
    assert_string_equal(out.v[1], "2");
    assert_string_equal(out.v[2], "--set");
    assert_string_equal(out.v[3], "a=b");
    char blank[] = " \t ";
    assert_int_equal(st_cli_local_split_words(blank, &out), 0);
    assert_int_equal(out.n, 4);
    st_cli_strlist_fini(&out);
}

/* An answer as src/admin/render.c writes it for a clustered node. */
static const char answer[] =
    "{\"cluster_id\":\"abc\",\"node_id\":2,\"version\":\"0.1.0\",\"ready\":true,\"shards\":1,"
    "\"uptime_seconds\":1.5,\"controller_id\":1,\"metadata_version\":7,\"brokers\":["
    "{\"node_id\":1,\"host\":\"127.0.0.1\",\"port\":9092,\"rack\":null,\"fenced\":false,"
    "\"epoch\":3},"
    "{\"node_id\":2,\"host\":\"127.0.0.1\",\"port\":9192,\"rack\":null,\"fenced\":true,"
    "\"epoch\":5},"
    "{\"node_id\":3,\"host\":\"127.0.0.1\",\"port\":9292,\"rack\":null,\"fenced\":false,"
    "\"epoch\":6}],"
    "\"quorum\":{\"leader\":1,\"term\":2,\"applied\":7,\"snapshot\":0,\"voter\":true},"
    "\"topics\":0,\"partitions\":0}";

static void view_parse(void **state)
{
    (void)state;
    st_cli_view_t v;
    char err[256];
    assert_int_equal(st_cli_view_parse(answer, strlen(answer), &v, err, sizeof err), 0);
    assert_int_equal(v.node_id, 2);
    assert_int_equal(v.controller_id, 1);
    assert_true(v.ready);
    assert_int_equal(v.nbrokers, 3);
    assert_int_equal(v.brokers[1].port, 9192);
    assert_int_equal(st_cli_view_reg(&v, 1), ST_CLI_REG_UNFENCED);
    assert_int_equal(st_cli_view_reg(&v, 2), ST_CLI_REG_FENCED);
    assert_int_equal(st_cli_view_reg(&v, 4), ST_CLI_REG_NONE);
    assert_false(st_cli_view_complete(&v, 3)); /* broker 2 fenced */
    assert_true(st_cli_view_complete(&v, 1));
    assert_string_equal(st_cli_reg_name(ST_CLI_REG_FENCED), "fenced");
    assert_string_equal(st_cli_reg_name(ST_CLI_REG_NONE), "not registered");
}

static void view_before_the_metadata(void **state)
{
    (void)state;
    /* no metadata yet: controller_id null, no brokers */
    static const char early[] = "{\"cluster_id\":\"\",\"node_id\":1,\"ready\":false,"
                                "\"controller_id\":null,\"metadata_version\":null,\"brokers\":[]}";
    st_cli_view_t v;
    char err[256];
    assert_int_equal(st_cli_view_parse(early, strlen(early), &v, err, sizeof err), 0);
    assert_int_equal(v.controller_id, -1);
    assert_false(v.ready);
    assert_int_equal(v.nbrokers, 0);
    assert_false(st_cli_view_complete(&v, 1));
    /* a single node's answer has no "fenced": listed is unfenced */
    static const char single[] = "{\"node_id\":1,\"ready\":true,\"controller_id\":1,"
                                 "\"brokers\":[{\"node_id\":1,\"host\":\"h\",\"port\":1}]}";
    assert_int_equal(st_cli_view_parse(single, strlen(single), &v, err, sizeof err), 0);
    assert_true(st_cli_view_complete(&v, 1));
}

static void view_parse_errors(void **state)
{
    (void)state;
    st_cli_view_t v;
    char err[256];
    assert_int_equal(st_cli_view_parse("", 0, &v, err, sizeof err), -1);
    assert_int_equal(st_cli_view_parse("[1]", 3, &v, err, sizeof err), -1);
    assert_int_equal(st_cli_view_parse("{\"node_id\":1}", 13, &v, err, sizeof err), -1);
    assert_non_null(strstr(err, "brokers"));
    assert_int_equal(
        st_cli_view_parse("{\"node_id\":\"1\",\"brokers\":[]}", 28, &v, err, sizeof err), -1);
    /* a broker entry without a node_id is skipped, not taken for broker 0 */
    static const char odd[] = "{\"node_id\":1,\"brokers\":[{\"host\":\"h\"},7]}";
    assert_int_equal(st_cli_view_parse(odd, strlen(odd), &v, err, sizeof err), 0);
    assert_int_equal(v.nbrokers, 0);
    /* more brokers than a view holds: the first ST_CLI_VIEW_MAX */
    char *big = malloc(64 * (ST_CLI_VIEW_MAX + 10) + 64);
    size_t n = (size_t)sprintf(big, "{\"node_id\":1,\"brokers\":[");
    for (int i = 0; i < ST_CLI_VIEW_MAX + 10; i++)
        n += (size_t)sprintf(big + n, "%s{\"node_id\":%d}", i ? "," : "", i + 1);
    n += (size_t)sprintf(big + n, "]}");
    assert_int_equal(st_cli_view_parse(big, n, &v, err, sizeof err), 0);
    assert_int_equal(v.nbrokers, ST_CLI_VIEW_MAX);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_layout_is_cluster_sh),
        cmocka_unit_test(voters_are_the_first_three),
        cmocka_unit_test(settings_of_a_broker),
        cmocka_unit_test(check_refuses_bad_layouts),
        cmocka_unit_test(conf_round_trip),
        cmocka_unit_test(conf_podman),
        cmocka_unit_test(podman_settings),
        cmocka_unit_test(conf_parse_errors),
        cmocka_unit_test(split_words),
        cmocka_unit_test(view_parse),
        cmocka_unit_test(view_before_the_metadata),
        cmocka_unit_test(view_parse_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
