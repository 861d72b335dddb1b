/*
 * forward.h — Kafka's forwarding of metadata changes to the active controller (KIP-590): a
 * broker that is not the active controller sends CreateAcls, DeleteAcls,
 * AlterUserScramCredentials, AlterClientQuotas, AlterConfigs, IncrementalAlterConfigs,
 * ElectLeaders and AlterPartitionReassignments on to the one that is (Kafka 4's KRaft brokers
 * forward the last two as well), and relays its answer, so an admin client may send them to any
 * broker (Java's admin client and kafka-python send them to the least loaded broker; librdkafka to
 * the controller Metadata names). Without forwarding they were answered NOT_CONTROLLER, which
 * no client retries. CreateTopics, DeleteTopics and CreatePartitions, which clients send to
 * the controller Metadata names, are not forwarded: a broker that is not the controller
 * answers them NOT_CONTROLLER.
 *
 *   request's shard: st_kforward(r) -> the principal's checks here, the handler's own (ALTER
 *       on the cluster for ACLs, SCRAM, elections and reassignments; ALTER_CONFIGS on it for
 * quotas, on each resource for configs: the ACLs are the same replicated list on every broker) ->
 * the request's body, untouched, to the controller through the inter-broker client
 * (kafka/txn_route.h, replica/client.h)
 *       -> client thread: the answer copied, posted back -> request's shard: the answer's
 *       body relayed under this request's header
 *
 * The controller authorizes the forwarding broker's principal (the inter-broker listener's,
 * which Kafka also asks to be a super user): the client's own was checked here first, which is
 * what Kafka's Envelope achieves by carrying it. Refused here (any of its resources), no
 * controller known, this broker the controller, the request itself forwarded (a broker's
 * client id), or the controller not reached: the handler answers here as before (the refusal,
 * or NOT_CONTROLLER, which a relaying broker hands on).
 *
 * Threads: st_kforward on the request's shard.
 */
#ifndef ST_KAFKA_FORWARD_H
#define ST_KAFKA_FORWARD_H

#include <stdbool.h>

#include "broker/request.h"

/* Whether r (header decoded, body unread) was taken to be forwarded; it is answered later. */
bool st_kforward(st_kreq_t *r);

#endif
