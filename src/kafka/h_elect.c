/*
 * h_elect.c — leaders and replica moves: ElectLeaders (43), AlterPartitionReassignments (45),
 * ListPartitionReassignments (46).
 *
 * ElectLeaders and AlterPartitionReassignments go to the controller (controller.h) as one
 * operation per request with one item per partition, decided there against the metadata (in a
 * cluster by the active controller: another broker forwards the request there, forward.h, and
 * answers NOT_CONTROLLER only when it cannot); the answer leaves once every shard of the broker
 * that decided applied the change (a broker that forwarded may learn it a moment later). A
 * reassignment is accepted at once and completes once its target replicas are in sync
 * (cluster/records.h, KIP-455); ListPartitionReassignments answers from any broker's metadata with
 * the moves in progress, their adding and removing replicas.
 *
 * Each answer mirrors its request, partition by partition. An entry the handler answers itself
 * (a topic name holding a NUL byte, which as a C string would name another topic) gets a
 * non-zero error before the operation is submitted; every other entry is answered by the next
 * item, in order.
 */
#include <string.h>

#include "broker/runtime.h"
#include "kafka/authz.h"
#include "kafka/handlers.h"
#include "kafka/controller.h"
#include "proto/kerr.h"

typedef struct {
    st_ctl_op_t op;
    void *resp;
    bool every; /* ElectLeaders for every partition: those not needing one are left out */
} elect_t;

static const char msg_unknown[] = "This server does not host this topic-partition.";

/* The topic name as a C string in the request's arena; NULL when it holds a NUL byte (it is
 * then answered as unknown) or memory ran out. */
static const char *topic_cstr(st_kreq_t *r, st_kstr_t s)
{
    if (s.len < 0)
        return "";
    if (memchr(s.ptr, 0, (size_t)s.len))
        return NULL;
    return st_arena_strndup(&r->arena, s.ptr, (size_t)s.len);
}

/* An operation of `kind` with room for n items. */
static elect_t *elect_new(st_kreq_t *r, int kind, int n, void (*cb)(st_kshard_t *, st_ctl_op_t *))
{
    elect_t *e = st_arena_zalloc(&r->arena, sizeof *e);
    if (!e)
        return NULL;
    e->op.items = st_arena_zalloc(&r->arena, (size_t)n * sizeof *e->op.items + 1);
    if (!e->op.items)
        return NULL;
    e->op.kind = kind;
    e->op.arg = r;
    e->op.cb = cb;
    return e;
}

/* The next item, for partition `partition` of topic `name`. */
static st_ctl_item_t *elect_item(elect_t *e, const char *name, int32_t partition)
{
    st_ctl_item_t *it = &e->op.items[e->op.n++];
    it->name = name;
    it->partition = partition;
    it->assigned = -1;
    return it;
}

/* Hands the operation to the controller, or answers at once when no entry needs it. */
static void elect_submit(st_kreq_t *r, elect_t *e)
{
    if (e->op.n == 0)
        e->op.cb(r->shard, &e->op);
    else
        st_ctl_submit(r->shard, &e->op);
}

/* Copies item it's answer into *code and *msg (a null message without an error or text). */
static void item_answer(st_kreq_t *r, const st_ctl_item_t *it, int16_t *code, st_kstr_t *msg)
{
    *code = it->error;
    *msg = it->error && it->message[0]
               ? st_kstr(st_arena_strndup(&r->arena, it->message, strlen(it->message)))
               : ST_KSTR_NULL;
    if (it->error && it->error != ST_KERR_ELECTION_NOT_NEEDED && !r->error_code)
        r->error_code = it->error;
}

/* ---- ElectLeaders ---- */

static void elect_leaders_done(st_kshard_t *s, st_ctl_op_t *op)
{
    elect_t *e = (elect_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_elect_leaders_resp_t *resp = e->resp;
    (void)s;
    int next = 0;
    for (int i = 0; i < resp->replica_election_results_count; i++) {
        st_kp_elect_leaders_resp_replica_election_result_t *t = &resp->replica_election_results[i];
        int kept = 0;
        for (int k = 0; k < t->partition_result_count; k++) {
            st_kp_elect_leaders_resp_partition_result_t *o = &t->partition_result[k];
            if (o->error_code == 0)
                item_answer(r, &op->items[next++], &o->error_code, &o->error_message);
            if (e->every && o->error_code == ST_KERR_ELECTION_NOT_NEEDED)
                continue;
            t->partition_result[kept++] = *o;
        }
        t->partition_result_count = kept;
    }
    ST_KREQ_RESPOND(r, elect_leaders, resp);
}

/* Null topic_partitions: every partition of every topic this broker knows, each topic listed
 * (as Kafka does), the partitions that need no election left out. */
static void elect_every(st_kreq_t *r, const st_kp_elect_leaders_req_t *req,
                        st_kp_elect_leaders_resp_t *resp)
{
    const st_md_t *md = r->shard->md;
    int n = 0;
    for (int i = 0; i < md->ntopics; i++)
        n += md->topics[i]->npartitions;
    elect_t *e = elect_new(r, ST_CTL_ELECT_LEADERS, n, elect_leaders_done);
    resp->replica_election_results = st_arena_zalloc(
        &r->arena, (size_t)md->ntopics * sizeof *resp->replica_election_results + 1);
    if (!e || !resp->replica_election_results) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    e->resp = resp;
    e->every = true;
    resp->replica_election_results_count = md->ntopics;
    for (int i = 0; i < md->ntopics; i++) {
        const st_md_topic_t *t = md->topics[i];
        st_kp_elect_leaders_resp_replica_election_result_t *o = &resp->replica_election_results[i];
        o->topic = st_kstr(st_arena_strndup(&r->arena, t->name, strlen(t->name)));
        o->partition_result =
            st_arena_zalloc(&r->arena, (size_t)t->npartitions * sizeof *o->partition_result + 1);
        if (!o->topic.ptr || !o->partition_result) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        o->partition_result_count = t->npartitions;
        for (int32_t p = 0; p < t->npartitions; p++) {
            st_kp_elect_leaders_resp_partition_result_init(&o->partition_result[p]);
            o->partition_result[p].partition_id = p;
            elect_item(e, o->topic.ptr, p)->election_type = req->election_type;
        }
    }
    elect_submit(r, e);
}

void st_kh_elect_leaders(st_kreq_t *r)
{
    st_kp_elect_leaders_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    st_kp_elect_leaders_resp_t *resp = st_arena_zalloc(&r->arena, sizeof *resp);
    if (!req || !resp || st_kp_elect_leaders_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed ElectLeaders request");
        return;
    }
    st_kp_elect_leaders_resp_init(resp);
    if (!st_kauthz_cluster(r, ST_ACL_OP_ALTER)) { /* Kafka's check: ALTER on the cluster */
        resp->error_code = r->error_code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, elect_leaders, resp);
        return;
    }
    if (req->topic_partitions_count < 0) {
        elect_every(r, req, resp);
        return;
    }
    int n = 0;
    for (int i = 0; i < req->topic_partitions_count; i++)
        n += req->topic_partitions[i].partition_id_count;
    elect_t *e = elect_new(r, ST_CTL_ELECT_LEADERS, n, elect_leaders_done);
    resp->replica_election_results = st_arena_zalloc(
        &r->arena,
        (size_t)req->topic_partitions_count * sizeof *resp->replica_election_results + 1);
    if (!e || !resp->replica_election_results) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    e->resp = resp;
    resp->replica_election_results_count = req->topic_partitions_count;
    for (int i = 0; i < req->topic_partitions_count; i++) {
        const st_kp_elect_leaders_req_topic_partition_t *q = &req->topic_partitions[i];
        st_kp_elect_leaders_resp_replica_election_result_t *o = &resp->replica_election_results[i];
        o->topic = q->topic;
        o->partition_result = st_arena_zalloc(
            &r->arena, (size_t)q->partition_id_count * sizeof *o->partition_result + 1);
        if (!o->partition_result) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        o->partition_result_count = q->partition_id_count;
        const char *name = topic_cstr(r, q->topic);
        for (int k = 0; k < q->partition_id_count; k++) {
            st_kp_elect_leaders_resp_partition_result_t *pr = &o->partition_result[k];
            st_kp_elect_leaders_resp_partition_result_init(pr);
            pr->partition_id = q->partition_id[k];
            if (!name) {
                pr->error_code = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
                pr->error_message = st_kstr(msg_unknown);
                r->error_code = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
                continue;
            }
            elect_item(e, name, q->partition_id[k])->election_type = req->election_type;
        }
    }
    elect_submit(r, e);
}

/* ---- AlterPartitionReassignments ---- */

static void alter_reassignments_done(st_kshard_t *s, st_ctl_op_t *op)
{
    elect_t *e = (elect_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_alter_partition_reassignments_resp_t *resp = e->resp;
    (void)s;
    int next = 0;
    for (int i = 0; i < resp->responses_count; i++) {
        st_kp_alter_partition_reassignments_resp_response_t *t = &resp->responses[i];
        for (int k = 0; k < t->partitions_count; k++) {
            st_kp_alter_partition_reassignments_resp_partition_t *o = &t->partitions[k];
            if (o->error_code == 0)
                item_answer(r, &op->items[next++], &o->error_code, &o->error_message);
        }
    }
    ST_KREQ_RESPOND(r, alter_partition_reassignments, resp);
}

void st_kh_alter_partition_reassignments(st_kreq_t *r)
{
    st_kp_alter_partition_reassignments_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    st_kp_alter_partition_reassignments_resp_t *resp = st_arena_zalloc(&r->arena, sizeof *resp);
    if (!req || !resp ||
        st_kp_alter_partition_reassignments_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed AlterPartitionReassignments request");
        return;
    }
    st_kp_alter_partition_reassignments_resp_init(resp);
    resp->allow_replication_factor_change = req->allow_replication_factor_change;
    if (!st_kauthz_cluster(r, ST_ACL_OP_ALTER)) {
        resp->error_code = r->error_code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
        resp->error_message = st_kstr("Cluster authorization failed.");
        ST_KREQ_RESPOND(r, alter_partition_reassignments, resp);
        return;
    }
    int n = 0;
    for (int i = 0; i < req->topics_count; i++)
        n += req->topics[i].partitions_count;
    elect_t *e = elect_new(r, ST_CTL_REASSIGN, n, alter_reassignments_done);
    resp->responses =
        st_arena_zalloc(&r->arena, (size_t)req->topics_count * sizeof *resp->responses + 1);
    if (!e || !resp->responses) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    e->resp = resp;
    resp->responses_count = req->topics_count;
    for (int i = 0; i < req->topics_count; i++) {
        const st_kp_alter_partition_reassignments_req_topic_t *q = &req->topics[i];
        st_kp_alter_partition_reassignments_resp_response_t *o = &resp->responses[i];
        o->name = q->name;
        o->partitions =
            st_arena_zalloc(&r->arena, (size_t)q->partitions_count * sizeof *o->partitions + 1);
        if (!o->partitions) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        o->partitions_count = q->partitions_count;
        const char *name = topic_cstr(r, q->name);
        for (int k = 0; k < q->partitions_count; k++) {
            const st_kp_alter_partition_reassignments_req_partition_t *qp = &q->partitions[k];
            st_kp_alter_partition_reassignments_resp_partition_t *pr = &o->partitions[k];
            st_kp_alter_partition_reassignments_resp_partition_init(pr);
            pr->partition_index = qp->partition_index;
            if (!name) {
                pr->error_code = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
                pr->error_message = st_kstr(msg_unknown);
                r->error_code = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
                continue;
            }
            st_ctl_item_t *it = elect_item(e, name, qp->partition_index);
            /* an empty list is a target (refused), not a cancel: never NULL */
            static const int32_t empty[1];
            it->replicas = qp->replicas_count < 0    ? NULL
                           : qp->replicas_count == 0 ? empty
                                                     : qp->replicas;
            it->nreplicas = qp->replicas_count < 0 ? 0 : qp->replicas_count;
            it->keep_rf = !req->allow_replication_factor_change;
        }
    }
    elect_submit(r, e);
}

/* ---- ListPartitionReassignments ---- */

/* Whether partition `index` of topic `name` is asked for (every one when topics is NULL). */
static bool list_asked(const st_kp_list_partition_reassignments_req_t *req, const char *name,
                       int32_t index)
{
    if (!req->topics || req->topics_count < 0)
        return true;
    for (int i = 0; i < req->topics_count; i++) {
        const st_kp_list_partition_reassignments_req_topic_t *t = &req->topics[i];
        if (!st_kstr_eq(t->name, name))
            continue;
        for (int k = 0; k < t->partition_indexes_count; k++)
            if (t->partition_indexes[k] == index)
                return true;
    }
    return false;
}

static int32_t *ids_copy(st_kreq_t *r, const int32_t *v, int n)
{
    int32_t *o = st_arena_alloc(&r->arena, (size_t)n * sizeof *o + 1);
    if (o && n)
        memcpy(o, v, (size_t)n * sizeof *o);
    return o;
}

void st_kh_list_partition_reassignments(st_kreq_t *r)
{
    st_kp_list_partition_reassignments_req_t req;
    if (st_kp_list_partition_reassignments_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed ListPartitionReassignments request");
        return;
    }
    /* The moves in progress, from this broker's snapshot of the metadata (every broker has
     * the whole of it); partitions asked for that are not moving are left out, as Kafka does. */
    st_kp_list_partition_reassignments_resp_t resp;
    st_kp_list_partition_reassignments_resp_init(&resp);
    if (!st_kauthz_cluster(r, ST_ACL_OP_DESCRIBE)) {
        resp.error_code = r->error_code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
        resp.error_message = st_kstr("Cluster authorization failed.");
        ST_KREQ_RESPOND(r, list_partition_reassignments, &resp);
        return;
    }
    const st_md_t *md = r->shard->md;
    resp.topics = st_arena_zalloc(&r->arena, (size_t)md->ntopics * sizeof *resp.topics + 1);
    if (!resp.topics) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int i = 0; i < md->ntopics; i++) {
        const st_md_topic_t *t = md->topics[i];
        st_kp_list_partition_reassignments_resp_topic_t *o = &resp.topics[resp.topics_count];
        st_kp_list_partition_reassignments_resp_topic_init(o);
        o->name = st_kstr(t->name);
        for (int32_t k = 0; k < t->npartitions; k++) {
            const st_md_partition_t *p = &t->partitions[k];
            if ((!p->nadding && !p->nremoving) || !list_asked(&req, t->name, k))
                continue;
            if (!o->partitions) {
                o->partitions =
                    st_arena_zalloc(&r->arena, (size_t)t->npartitions * sizeof *o->partitions + 1);
                if (!o->partitions) {
                    st_kreq_fail(r, "out of memory");
                    return;
                }
            }
            st_kp_list_partition_reassignments_resp_partition_t *op =
                &o->partitions[o->partitions_count++];
            st_kp_list_partition_reassignments_resp_partition_init(op);
            op->partition_index = k;
            op->replicas = ids_copy(r, p->replicas, p->nreplicas);
            op->replicas_count = p->nreplicas;
            op->adding_replicas = ids_copy(r, p->adding, p->nadding);
            op->adding_replicas_count = p->nadding;
            op->removing_replicas = ids_copy(r, p->removing, p->nremoving);
            op->removing_replicas_count = p->nremoving;
            if (!op->replicas || !op->adding_replicas || !op->removing_replicas) {
                st_kreq_fail(r, "out of memory");
                return;
            }
        }
        if (o->partitions_count)
            resp.topics_count++;
    }
    ST_KREQ_RESPOND(r, list_partition_reassignments, &resp);
}
