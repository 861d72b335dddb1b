/*
 * config.h — the broker's configuration.
 *
 * One X-macro table names every setting with Kafka's name where Kafka has one, its type,
 * default, bounds and a line of help. Settings come from a properties file (key=value,
 * '#' comments) and then from --set key=value, later ones winning. An unknown key or a bad
 * value is refused with one line naming it. The parsed config is immutable once the broker
 * starts and is shared read-only by every shard.
 */
#ifndef ST_CLUSTER_CONFIG_H
#define ST_CLUSTER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "net/listener.h"

#define ST_CONFIG_MAX_LISTENERS 16

/* The SASL mechanisms of sasl.enabled.mechanisms (st_config_t.sasl_mechanisms). */
enum {
    ST_SASL_PLAIN = 1,
    ST_SASL_SCRAM_SHA_256 = 2,
    ST_SASL_SCRAM_SHA_512 = 4,
    ST_SASL_OAUTHBEARER = 8,
};

/* X(field, "key", TYPE, default, min, max, "help"); TYPE is STR, INT or BOOL. */
#define ST_CONFIG_KEYS(X)                                                                          \
    X(listeners, "listeners", STR, "PLAINTEXT://127.0.0.1:9092", 0, 0,                             \
      "where the Kafka protocol listens (NAME://host:port,...; empty host: every interface), "     \
      "and in a cluster where the metadata quorum listens (CONTROLLER://host:port)")               \
    X(advertised_listeners, "advertised.listeners", STR, "", 0, 0,                                 \
      "address of each listener given to clients in metadata (NAME://host:port,...; default: "     \
      "listeners)")                                                                                \
    X(listener_security_protocol_map, "listener.security.protocol.map", STR,                       \
      "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"               \
      "CONTROLLER:PLAINTEXT",                                                                      \
      0, 0, "security protocol of each listener name (NAME:PROTOCOL,...)")                         \
    X(inter_broker_listener_name, "inter.broker.listener.name", STR, "", 0, 0,                     \
      "the listener other brokers reach this one on (default: PLAINTEXT, else the first)")         \
    X(ssl_keystore_type, "ssl.keystore.type", STR, "PEM", 0, 0,                                    \
      "SSL listeners: the keystore's format, PEM or PKCS12")                                       \
    X(ssl_keystore_location, "ssl.keystore.location", STR, "", 0, 0,                               \
      "SSL listeners: the certificate chain and private key (PEM: both in one file)")              \
    X(ssl_keystore_password, "ssl.keystore.password", STR, "", 0, 0,                               \
      "SSL listeners: the PKCS12 keystore's password")                                             \
    X(ssl_key_password, "ssl.key.password", STR, "", 0, 0,                                         \
      "SSL listeners: the password of an encrypted private key")                                   \
    X(ssl_keystore_certificate_chain, "ssl.keystore.certificate.chain", STR, "", 0, 0,             \
      "SSL listeners: the certificate chain as inline PEM (instead of ssl.keystore.location)")     \
    X(ssl_keystore_key, "ssl.keystore.key", STR, "", 0, 0,                                         \
      "SSL listeners: the private key as inline PEM")                                              \
    X(ssl_truststore_type, "ssl.truststore.type", STR, "PEM", 0, 0,                                \
      "SSL listeners: the truststore's format, PEM or PKCS12")                                     \
    X(ssl_truststore_location, "ssl.truststore.location", STR, "", 0, 0,                           \
      "SSL listeners: the CAs client certificates are checked against")                            \
    X(ssl_truststore_password, "ssl.truststore.password", STR, "", 0, 0,                           \
      "SSL listeners: the PKCS12 truststore's password")                                           \
    X(ssl_truststore_certificates, "ssl.truststore.certificates", STR, "", 0, 0,                   \
      "SSL listeners: trusted CAs as inline PEM")                                                  \
    X(ssl_client_auth, "ssl.client.auth", STR, "none", 0, 0,                                       \
      "SSL listeners: client certificates: none, requested or required (SASL_SSL ones: only "      \
      "as listener.name.<name>.ssl.client.auth)")                                                  \
    X(ssl_enabled_protocols, "ssl.enabled.protocols", STR, "TLSv1.2,TLSv1.3", 0, 0,                \
      "SSL listeners: TLS versions accepted")                                                      \
    X(ssl_cipher_suites, "ssl.cipher.suites", STR, "", 0, 0,                                       \
      "SSL listeners: cipher suites (IANA names; empty: OpenSSL's defaults)")                      \
    X(ssl_principal_mapping_rules, "ssl.principal.mapping.rules", STR, "DEFAULT", 0, 0,            \
      "SSL listeners: client certificate subject to principal (Kafka's "                           \
      "RULE:pattern/replacement/[LU],...,DEFAULT; POSIX regular expressions)")                     \
    X(ssl_endpoint_identification_algorithm, "ssl.endpoint.identification.algorithm", STR,         \
      "https", 0, 0,                                                                               \
      "the inter-broker client over SSL: https checks the other broker's certificate names the "   \
      "host it connects to; empty: only that a trusted CA signed it")                              \
    X(ssl_handshake_timeout_ms, "ssl.handshake.timeout.ms", INT, "10000", 1, 2147483647,           \
      "SSL listeners: a client not done with its TLS handshake by then is dropped")                \
    X(ssl_reload_check_ms, "ssl.reload.check.ms", INT, "2000", 0, 2147483647,                      \
      "SSL listeners: how often the keystore and truststore files are checked for changes "        \
      "(reloaded for new connections; 0: never)")                                                  \
    X(sasl_enabled_mechanisms, "sasl.enabled.mechanisms", STR,                                     \
      "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", 0, 0,                                                   \
      "SASL mechanisms the SASL_* listeners offer (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "          \
      "OAUTHBEARER)")                                                                              \
    X(sasl_oauthbearer_jwks_endpoint_url, "sasl.oauthbearer.jwks.endpoint.url", STR, "", 0, 0,     \
      "OAUTHBEARER: file: URL of the JSON Web Key Set signed tokens are checked against "          \
      "(re-read when the file changes)")                                                           \
    X(sasl_oauthbearer_expected_audience, "sasl.oauthbearer.expected.audience", STR, "", 0, 0,     \
      "OAUTHBEARER: audiences a token's aud must name one of (comma-separated; empty: any)")       \
    X(sasl_oauthbearer_expected_issuer, "sasl.oauthbearer.expected.issuer", STR, "", 0, 0,         \
      "OAUTHBEARER: the iss a token must have (empty: any)")                                       \
    X(sasl_oauthbearer_sub_claim_name, "sasl.oauthbearer.sub.claim.name", STR, "sub", 0, 0,        \
      "OAUTHBEARER: the claim naming the principal")                                               \
    X(sasl_oauthbearer_scope_claim_name, "sasl.oauthbearer.scope.claim.name", STR, "scope", 0, 0,  \
      "OAUTHBEARER: the claim holding the token's scopes (logged)")                                \
    X(sasl_oauthbearer_clock_skew_seconds, "sasl.oauthbearer.clock.skew.seconds", INT, "30", 0,    \
      2147483, "OAUTHBEARER: clock difference allowed on exp, nbf and iat")                        \
    X(sasl_oauthbearer_unsecured_validator_enable, "sasl.oauthbearer.unsecured.validator.enable",  \
      BOOL, "false", 0, 0,                                                                         \
      "OAUTHBEARER without a key set: accept unsigned (alg none) tokens, as Kafka's default "      \
      "OAuthBearerUnsecuredValidatorCallbackHandler does (tests and development only)")            \
    X(connections_max_reauth_ms, "connections.max.reauth.ms", INT, "0", 0, INT64_MAX,              \
      "SASL sessions last at most this long: a client re-authenticates on its connection or is "   \
      "disconnected at its next request (KIP-368; 0: no limit but an OAUTHBEARER token's "         \
      "expiry; listener.name.<name>.<mechanism>.connections.max.reauth.ms first)")                 \
    X(sasl_bootstrap_users, "sasl.bootstrap.users", STR, "", 0, 0,                                 \
      "SCRAM users created at start when absent (user:SCRAM-SHA-256|SCRAM-SHA-512:password,...)")  \
    X(sasl_mechanism_inter_broker_protocol, "sasl.mechanism.inter.broker.protocol", STR,           \
      "SCRAM-SHA-512", 0, 0,                                                                       \
      "the SASL mechanism brokers authenticate to each other with over a SASL_* inter-broker "     \
      "listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")                                            \
    X(sasl_jaas_config, "sasl.jaas.config", STR, "", 0, 0,                                         \
      "the inter-broker client's credentials, Kafka's JAAS form: ... username=\"u\" "              \
      "password=\"p\"; (listener.name.<name>.<mechanism>.sasl.jaas.config first)")                 \
    X(connection_failed_authentication_delay_ms, "connection.failed.authentication.delay.ms", INT, \
      "100", 0, 60000,                                                                             \
      "a failed SASL authentication is answered this late, then the connection "                   \
      "closes")                                                                                    \
    X(log_dirs, "log.dirs", STR, "./data", 0, 0, "directory holding partition logs")               \
    X(node_id, "node.id", INT, "0", 0, 2147483647, "this broker's id")                             \
    X(process_roles, "process.roles", STR, "broker,controller", 0, 0,                              \
      "broker,controller (a voter of the metadata quorum) or broker (follows it without a vote)")  \
    X(controller_quorum_voters, "controller.quorum.voters", STR, "", 0, 0,                         \
      "the metadata quorum: id@host:port,... (empty: a cluster of one broker)")                    \
    X(controller_listener_names, "controller.listener.names", STR, "CONTROLLER", 0, 0,             \
      "the name of the listener in listeners the metadata quorum uses")                            \
    X(controller_quorum_election_timeout_ms, "controller.quorum.election.timeout.ms", INT, "1000", \
      100, 600000, "a voter that hears no leader this long starts an election")                    \
    X(metadata_log_snapshot_entries, "metadata.log.snapshot.entries", INT, "1024", 4, 100000000,   \
      "snapshot the metadata state every this many log entries (the log before it is dropped)")    \
    X(broker_rack, "broker.rack", STR, "", 0, 0,                                                   \
      "this broker's rack (replicas spread over racks)")                                           \
    X(broker_session_timeout_ms, "broker.session.timeout.ms", INT, "9000", 100, 3600000,           \
      "the controller fences a broker silent this long and moves its leaderships")                 \
    X(broker_heartbeat_interval_ms, "broker.heartbeat.interval.ms", INT, "2000", 10, 3600000,      \
      "how often a broker tells the controller it is alive")                                       \
    X(unclean_leader_election_enable, "unclean.leader.election.enable", BOOL, "false", 0, 0,       \
      "let a replica outside the ISR lead when no ISR member is alive (may lose records)")         \
    X(replica_lag_time_max_ms, "replica.lag.time.max.ms", INT, "30000", 10, INT64_MAX,             \
      "a follower that has not caught up with its leader this long leaves the ISR")                \
    X(auto_leader_rebalance_enable, "auto.leader.rebalance.enable", BOOL, "true", 0, 0,            \
      "the controller moves leadership back to preferred replicas that are live and in sync")      \
    X(leader_imbalance_check_interval_seconds, "leader.imbalance.check.interval.seconds", INT,     \
      "300", 1, 86400, "how often the controller checks leadership balance")                       \
    X(leader_imbalance_per_broker_percentage, "leader.imbalance.per.broker.percentage", INT, "10", \
      0, 100, "a broker leading fewer than this share of its preferred partitions gets them back") \
    X(offsets_topic_replication_factor, "offsets.topic.replication.factor", INT, "3", 1, 32767,    \
      "replicas of __consumer_offsets (never more than the brokers alive when it is created)")     \
    X(admin_listen, "admin.listen", STR, "127.0.0.1:9644", 0, 0,                                   \
      "host:port of the admin HTTP API (metrics, status); empty to disable")                       \
    X(admin_tls_enabled, "admin.tls.enabled", BOOL, "false", 0, 0,                                 \
      "serve the admin API over HTTPS only (Redpanda's admin_api_tls)")                            \
    X(admin_ssl_keystore_location, "admin.ssl.keystore.location", STR, "", 0, 0,                   \
      "admin HTTPS: PEM file with the certificate chain and its private key")                      \
    X(admin_ssl_key_password, "admin.ssl.key.password", STR, "", 0, 0,                             \
      "admin HTTPS: the password of an encrypted private key")                                     \
    X(admin_require_auth, "admin.require.auth", BOOL, "false", 0, 0,                               \
      "admin API: HTTP basic auth against the SCRAM users (Redpanda's admin_api_require_auth)")    \
    X(admin_metrics_open, "admin.metrics.open", BOOL, "true", 0, 0,                                \
      "with admin.require.auth, /metrics still answers without credentials (Prometheus)")          \
    X(log_level, "log.level", STR, "info", 0, 0, "trace, debug, info, warn or error")              \
    X(log_protocol, "log.protocol", STR, "", 0, 0,                                                 \
      "log each decoded request and response: all, client.id=ID or address=IP (empty: off)")       \
    X(tracing_endpoint, "tracing.endpoint", STR, "", 0, 0,                                         \
      "OpenTelemetry traces of Produce and Fetch, sent as OTLP/HTTP JSON to this URL "             \
      "(http://host:port/path, e.g. http://127.0.0.1:4318/v1/traces; empty: off)")                 \
    X(tracing_sample_ratio, "tracing.sample.ratio", STR, "0.01", 0, 0,                             \
      "share of Produce and Fetch requests traced when tracing.endpoint is set (0 to 1)")          \
    X(tracing_service_name, "tracing.service.name", STR, "strata", 0, 0,                           \
      "service.name of the exported spans")                                                        \
    X(socket_request_max_bytes, "socket.request.max.bytes", INT, "104857600", 1024, 2147483647,    \
      "largest request frame accepted")                                                            \
    X(connection_max_inflight_bytes, "connection.max.inflight.bytes", INT, "268435456", 65536,     \
      INT64_MAX, "bytes of unanswered requests and unsent responses per connection")               \
    X(queued_max_request_bytes, "queued.max.request.bytes", INT, "536870912", -1, INT64_MAX,       \
      "bytes of large requests (over 64 KiB) held while received and until answered, whole "       \
      "broker, split evenly between shards; a connection needing more waits (-1: unlimited)")      \
    X(max_connections_per_ip, "max.connections.per.ip", INT, "2147483647", 0, 2147483647,          \
      "connections from one IP address, whole broker; one more is closed as accepted")             \
    X(max_connections_per_ip_overrides, "max.connections.per.ip.overrides", STR, "", 0, 0,         \
      "per-IP exceptions to max.connections.per.ip: ip:count,ip:count")                            \
    X(max_connections, "max.connections", INT, "2147483647", 0, 2147483647,                        \
      "connections, whole broker (not the inter-broker listener's); one more waits for a slot")    \
    X(auto_create_topics_enable, "auto.create.topics.enable", BOOL, "true", 0, 0,                  \
      "create unknown topics on Metadata and Produce")                                             \
    X(num_partitions, "num.partitions", INT, "1", 1, 100000, "partitions of auto-created topics")  \
    X(default_replication_factor, "default.replication.factor", INT, "1", 1, 32767,                \
      "replication factor of auto-created topics")                                                 \
    X(log_segment_bytes, "log.segment.bytes", INT, "1073741824", 1048576, 2147483647,              \
      "roll a segment at this size (at least 1 MiB, as Kafka 4)")                                  \
    X(internal_log_segment_bytes, "internal.log.segment.bytes", INT, "-1", -1, 2147483647,         \
      "tests only: when set (>= 14), replaces log.segment.bytes without its 1 MiB floor")          \
    X(log_roll_ms, "log.roll.ms", INT, "604800000", 1, INT64_MAX, "roll a segment at this age")    \
    X(log_retention_ms, "log.retention.ms", INT, "604800000", -1, INT64_MAX,                       \
      "delete segments older than this (-1: keep)")                                                \
    X(log_retention_bytes, "log.retention.bytes", INT, "-1", -1, INT64_MAX,                        \
      "delete old segments past this size per partition (-1: keep)")                               \
    X(log_retention_check_interval_ms, "log.retention.check.interval.ms", INT, "300000", 1,        \
      INT64_MAX, "how often retention runs")                                                       \
    X(log_cleaner_enable, "log.cleaner.enable", BOOL, "true", 0, 0,                                \
      "compact topics whose cleanup.policy holds compact (false: they only grow)")                 \
    X(log_cleaner_threads, "log.cleaner.threads", INT, "1", 1, 64,                                 \
      "partitions each shard cleans at once (no threads: a shard cleans its own partitions in "    \
      "short slices between requests)")                                                            \
    X(log_cleaner_dedupe_buffer_size, "log.cleaner.dedupe.buffer.size", INT, "134217728", 1048576, \
      INT64_MAX,                                                                                   \
      "memory for the cleaner's key maps, whole broker, split between shards and their "           \
      "log.cleaner.threads")                                                                       \
    X(log_cleaner_io_max_bytes_per_second, "log.cleaner.io.max.bytes.per.second", INT,             \
      "9223372036854775807", 1, INT64_MAX,                                                         \
      "bytes the cleaner may read per second, whole broker, split between shards (the default "    \
      "is unlimited)")                                                                             \
    X(log_cleaner_min_cleanable_ratio, "log.cleaner.min.cleanable.ratio", STR, "0.5", 0, 0,        \
      "default min.cleanable.dirty.ratio: dirty share of a log that starts a clean (0..1)")        \
    X(log_cleaner_delete_retention_ms, "log.cleaner.delete.retention.ms", INT, "86400000", 0,      \
      INT64_MAX, "default delete.retention.ms: how long tombstones outlive a clean")               \
    X(log_cleaner_min_compaction_lag_ms, "log.cleaner.min.compaction.lag.ms", INT, "0", 0,         \
      INT64_MAX, "default min.compaction.lag.ms: records younger than this are not cleaned")       \
    X(log_cleaner_max_compaction_lag_ms, "log.cleaner.max.compaction.lag.ms", INT,                 \
      "9223372036854775807", 1, INT64_MAX,                                                         \
      "default max.compaction.lag.ms: a record older than this is cleaned whatever the ratio")     \
    X(log_index_interval_bytes, "log.index.interval.bytes", INT, "4096", 0, 2147483647,            \
      "bytes between offset index entries")                                                        \
    X(message_max_bytes, "message.max.bytes", INT, "1048588", 0, 2147483647,                       \
      "largest record batch accepted")                                                             \
    X(log_message_timestamp_type, "log.message.timestamp.type", STR, "CreateTime", 0, 0,           \
      "CreateTime or LogAppendTime")                                                               \
    X(log_message_downconversion_enable, "log.message.downconversion.enable", BOOL, "true", 0, 0,  \
      "answer Fetch v0-3 by converting records down to message format v0/v1 (false: "              \
      "UNSUPPORTED_VERSION)")                                                                      \
    X(write_caching, "write.caching", BOOL, "false", 0, 0,                                         \
      "acknowledge after write, sync every log.flush.interval.* (default: ack only when synced)")  \
    X(log_flush_interval_messages, "log.flush.interval.messages", INT, "9223372036854775807", 1,   \
      INT64_MAX, "with write.caching: sync after this many messages")                              \
    X(log_flush_interval_ms, "log.flush.interval.ms", INT, "100", 0, INT64_MAX,                    \
      "with write.caching: sync at least this often")                                              \
    X(log_journal_bytes, "log.journal.bytes", INT, "67108864", 0, INT64_MAX,                       \
      "per-shard write-ahead journal: one sync per group commit for all partitions (0: off, "      \
      "each partition syncs its own files)")                                                       \
    X(log_journal_min_partitions, "log.journal.min.partitions", INT, "16", 0, 1000000,             \
      "a shard journals only while it appends to this many partitions per 100 ms "                 \
      "(fewer: each partition syncs its own files; 0 or 1: always journal)")                       \
    X(min_insync_replicas, "min.insync.replicas", INT, "1", 1, 32767,                              \
      "replicas that must have a write for acks=all")                                              \
    X(offsets_topic_num_partitions, "offsets.topic.num.partitions", INT, "50", 1, 1000,            \
      "partitions of __consumer_offsets")                                                          \
    X(offsets_retention_minutes, "offsets.retention.minutes", INT, "10080", 1, INT64_MAX,          \
      "keep committed offsets of empty groups this long")                                          \
    X(transaction_state_log_num_partitions, "transaction.state.log.num.partitions", INT, "50", 1,  \
      1000, "partitions of __transaction_state")                                                   \
    X(transaction_state_log_replication_factor, "transaction.state.log.replication.factor", INT,   \
      "3", 1, 32767,                                                                               \
      "replicas of __transaction_state (never more than the brokers alive when it is created)")    \
    X(transaction_state_log_min_isr, "transaction.state.log.min.isr", INT, "2", 1, 32767,          \
      "min.insync.replicas of __transaction_state")                                                \
    X(transaction_state_log_segment_bytes, "transaction.state.log.segment.bytes", INT,             \
      "104857600", 1048576, 2147483647, "segment.bytes of __transaction_state")                    \
    X(transaction_max_timeout_ms, "transaction.max.timeout.ms", INT, "900000", 1, 2147483647,      \
      "largest transaction.timeout.ms a transactional producer may ask for")                       \
    X(transactional_id_expiration_ms, "transactional.id.expiration.ms", INT, "604800000", 1,       \
      2147483647, "forget a transactional id with no transaction this long")                       \
    X(transaction_abort_timed_out_transaction_cleanup_interval_ms,                                 \
      "transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, "10000", 1, 2147483647,  \
      "how often transactions past their timeout are looked for (and aborted)")                    \
    X(transaction_remove_expired_transaction_cleanup_interval_ms,                                  \
      "transaction.remove.expired.transaction.cleanup.interval.ms", INT, "3600000", 1, 2147483647, \
      "how often expired transactional ids are looked for (and removed)")                          \
    X(transaction_partition_verification_enable, "transaction.partition.verification.enable",      \
      BOOL, "true", 0, 0,                                                                          \
      "a transaction's first batch on a partition is appended only once its coordinator says "     \
      "the partition is in the transaction (KIP-890)")                                             \
    X(group_min_session_timeout_ms, "group.min.session.timeout.ms", INT, "6000", 1, INT64_MAX,     \
      "smallest session timeout a member may ask for")                                             \
    X(group_max_session_timeout_ms, "group.max.session.timeout.ms", INT, "1800000", 1, INT64_MAX,  \
      "largest session timeout a member may ask for")                                              \
    X(group_initial_rebalance_delay_ms, "group.initial.rebalance.delay.ms", INT, "3000", 0,        \
      INT64_MAX, "wait this long for more members when a group forms")                             \
    X(group_max_size, "group.max.size", INT, "2147483647", 1, 2147483647,                          \
      "members a classic group holds at most; one more is refused GROUP_MAX_SIZE_REACHED")         \
    X(group_consumer_session_timeout_ms, "group.consumer.session.timeout.ms", INT, "45000", 1,     \
      2147483647, "a consumer group (KIP-848) member silent this long is fenced")                  \
    X(group_consumer_min_session_timeout_ms, "group.consumer.min.session.timeout.ms", INT,         \
      "45000", 1, 2147483647, "lower bound of group.consumer.session.timeout.ms")                  \
    X(group_consumer_max_session_timeout_ms, "group.consumer.max.session.timeout.ms", INT,         \
      "60000", 1, 2147483647, "upper bound of group.consumer.session.timeout.ms")                  \
    X(group_consumer_heartbeat_interval_ms, "group.consumer.heartbeat.interval.ms", INT, "5000",   \
      1, 2147483647, "how often consumer group (KIP-848) members are told to heartbeat")           \
    X(group_consumer_min_heartbeat_interval_ms, "group.consumer.min.heartbeat.interval.ms", INT,   \
      "5000", 1, 2147483647, "lower bound of group.consumer.heartbeat.interval.ms")                \
    X(group_consumer_max_heartbeat_interval_ms, "group.consumer.max.heartbeat.interval.ms", INT,   \
      "15000", 1, 2147483647, "upper bound of group.consumer.heartbeat.interval.ms")               \
    X(group_consumer_max_size, "group.consumer.max.size", INT, "2147483647", 1, 2147483647,        \
      "members a consumer group (KIP-848) holds at most; one more is refused "                     \
      "GROUP_MAX_SIZE_REACHED")                                                                    \
    X(group_consumer_assignors, "group.consumer.assignors", STR, "uniform,range", 0, 0,            \
      "server-side assignors of consumer groups (uniform, range); the first is the default")       \
    X(producer_id_expiration_ms, "producer.id.expiration.ms", INT, "86400000", 1, INT64_MAX,       \
      "forget an idempotent producer id idle this long")                                           \
    X(producer_ids_max_per_partition, "producer.ids.max.per.partition", INT, "10000", 0,           \
      100000000,                                                                                   \
      "idempotent producer ids remembered per partition; the least recently used goes (0: no "     \
      "cap)")                                                                                      \
    X(fetch_max_bytes, "fetch.max.bytes", INT, "57671680", 1024, 2147483647,                       \
      "cap on the bytes of one fetch response")                                                    \
    X(shutdown_timeout_ms, "shutdown.timeout.ms", INT, "10000", 0, INT64_MAX,                      \
      "longest a clean shutdown waits for in-flight requests")                                     \
    X(authorizer_class_name, "authorizer.class.name", STR, "", 0, 0,                               \
      "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on (empty: off)")        \
    X(super_users, "super.users", STR, "", 0, 0,                                                   \
      "principals the authorizer allows everything (User:a;User:b)")                               \
    X(allow_everyone_if_no_acl_found, "allow.everyone.if.no.acl.found", BOOL, "false", 0, 0,       \
      "with ACLs on, a resource no ACL names is open to everyone")

/* ST_CFG_KEY_<field>: a setting's index in the table; ST_CONFIG_NKEYS of them. */
enum {
#define ST_CFG_INDEX(field, key, type, def, min, max, help) ST_CFG_KEY_##field,
    ST_CONFIG_KEYS(ST_CFG_INDEX)
#undef ST_CFG_INDEX
        ST_CONFIG_NKEYS
};

/* Where a setting's value came from (the later wins: default, then file, then --set). */
typedef enum {
    ST_CONFIG_SRC_DEFAULT,
    ST_CONFIG_SRC_FILE, /* st_config_load */
    ST_CONFIG_SRC_SET,  /* st_config_set: --set on the command line */
} st_config_source_t;

#define ST_CFG_CTYPE_STR  char *
#define ST_CFG_CTYPE_INT  int64_t
#define ST_CFG_CTYPE_BOOL bool

typedef struct st_config {
#define ST_CFG_FIELD(field, key, type, def, min, max, help) ST_CFG_CTYPE_##type field;
    ST_CONFIG_KEYS(ST_CFG_FIELD)
#undef ST_CFG_FIELD
    /* Derived from the settings above by st_config_finish(). */
    /* The Kafka listeners (every entry of listeners but the controller's), in order; port and
     * adv_port as configured (0: the kernel's pick, the bound port). */
    int nkafka_listeners;
    st_listener_t kafka_listeners[ST_CONFIG_MAX_LISTENERS];
    int inter_broker_listener; /* index of inter.broker.listener.name in kafka_listeners */
    bool authorizer_enabled;   /* authorizer.class.name names one (st_config_finish) */
    /* listener.name.<name>.ssl.* settings, which override ssl.* for that listener (the name
     * lower case, as Kafka writes it): key is the whole setting name. */
    int nlistener_overrides;
    struct st_config_override {
        char *key, *value;
        st_config_source_t source;
    } * listener_overrides;
    uint8_t source[ST_CONFIG_NKEYS]; /* st_config_source_t of each table setting */
    char *config_file;               /* the file st_config_load read last (NULL: none) */
    unsigned sasl_mechanisms;        /* sasl.enabled.mechanisms: ST_SASL_* bits */
    /* The inter-broker listener's address and advertised address (registration, logs): */
    char listen_host[256];
    int listen_port;
    char advertised_host[256];
    int advertised_port;
    char admin_host[256];
    int admin_port; /* -1 = disabled (admin.listen empty), 0 = any free port */
    /* The metadata quorum: */
    bool quorum_local;    /* no controller.quorum.voters: this node is its only voter */
    bool role_controller; /* a voter; otherwise a broker following the quorum */
    char controller_host[256];
    int controller_port; /* the CONTROLLER listener, 0 when none */
    /* its listener.security.protocol.map entry: SSL or SASL_SSL put the quorum on TLS */
    st_sec_protocol_t controller_protocol;
    int nvoters;
    struct st_config_voter {
        int32_t id;
        char host[256];
        int port;
    } voters[16];
} st_config_t;

/* Fills every field with its default. */
int st_config_init(st_config_t *c);
void st_config_fini(st_config_t *c);
/* Sets one key (its source: ST_CONFIG_SRC_SET); on failure writes one line into err and
 * returns ST_E_CONFIG. */
int st_config_set(st_config_t *c, const char *key, const char *value, char *err, size_t errlen);
/* The settings table by position i (0 .. st_config_nkeys() - 1): its key (NULL past the end),
 * *type ST_CONFIG_TYPE_*, *help. type and help may be NULL. */
enum { ST_CONFIG_TYPE_STR, ST_CONFIG_TYPE_INT, ST_CONFIG_TYPE_BOOL };
int st_config_nkeys(void);
const char *st_config_key(int i, int *type, const char **help);
/* Setting key's value as text (numbers written into buf), NULL for an unknown key; *given
 * (may be NULL): set in the file or by --set rather than left at its default. */
const char *st_config_get(const st_config_t *c, const char *key, char *buf, size_t n, bool *given);
/* Whether value suits key's type and bounds: 0, ST_E_CONFIG with one line in err, or
 * ST_E_NOT_FOUND for a key that is not in the table. */
int st_config_check(const char *key, const char *value, char *err, size_t errlen);
/* The same, recording src as where the value came from. */
int st_config_set_from(st_config_t *c, const char *key, const char *value, st_config_source_t src,
                       char *err, size_t errlen);
/* Reads a properties file, setting each key. */
int st_config_load(st_config_t *c, const char *path, char *err, size_t errlen);
/* Checks cross-field rules and computes the derived fields. */
int st_config_finish(st_config_t *c, char *err, size_t errlen);
/* A listener's value of setting `key` ("ssl.keystore.location"): its
 * listener.name.<name>.<key> if set (name case-insensitive), else the global one ("" if
 * unknown). */
const char *st_config_listener_get(const st_config_t *c, const char *listener, const char *key);
/* One listener's settings as a key -> string lookup (net/tls.h's st_tls_get_fn, with a
 * st_config_lookup_t as arg): string keys as st_config_listener_get, integer ones written
 * into num (valid until the next lookup through the same st_config_lookup_t). One exception,
 * Kafka's (KIP-684): a SASL_SSL listener's ssl.client.auth is its
 * listener.name.<name>.ssl.client.auth, "none" when that is not set (the broker-wide one is
 * for SSL listeners). */
typedef struct st_config_lookup {
    const st_config_t *cfg;
    const char *listener;
    char num[24];
} st_config_lookup_t;
const char *st_config_lookup(void *arg, const char *key);
/* The inter-broker client's SASL credentials: the JAAS string of
 * listener.name.<inter-broker listener>.<mechanism>.sasl.jaas.config, else sasl.jaas.config,
 * parsed for username="..." and password="..." (Kafka's JAAS syntax; the login module's class
 * name is not looked at). 0, or ST_E_CONFIG with one line in err when no string names both. */
int st_config_inter_broker_credentials(const st_config_t *c, char *user, size_t ulen, char *pass,
                                       size_t plen, char *err, size_t errlen);
/* connections.max.reauth.ms for a SASL mechanism ("SCRAM-SHA-512") on a listener:
 * listener.name.<listener>.<mechanism>.connections.max.reauth.ms if set, else the global one. */
int64_t st_config_reauth_ms(const st_config_t *c, const char *listener, const char *mechanism);
/* One effective setting, as st_config_each hands it out. */
typedef struct st_config_item {
    const char *key;
    const char *value; /* as text (integers and booleans formatted; valid during the call) */
    const char *type;  /* "string", "int" or "bool" */
    st_config_source_t source;
    bool secret; /* st_config_is_secret(key): never show value */
} st_config_item_t;
/* Calls fn for every setting: the table's, in its order, then the listener.name.* ones. */
void st_config_each(const st_config_t *c, void (*fn)(void *arg, const st_config_item_t *it),
                    void *arg);
/* "default", "file" or "--set". */
const char *st_config_source_name(st_config_source_t s);
/* Whether a setting holds a secret whose value must never be shown (logs, the admin API, debug
 * bundles): a name with "password" or "secret" in it, a key's contents (ending ".key"),
 * sasl.jaas.config (credentials), sasl.bootstrap.users (passwords). */
bool st_config_is_secret(const char *key);
/* Prints every key with its default and help, for --help. */
void st_config_print_keys(FILE *f);
/* Parses "host:port"; port must be 0..65535. */
int st_parse_hostport(const char *s, char *host, size_t hostlen, int *port);

#endif
