/*
 * protolog.h — protocol logging: each decoded request and response of the connections a
 * filter picks, as one JSON line in the broker's log (at info, prefixed "protocol "):
 *
 *   protocol {"dir":"request","api":"Metadata","v":12,"corr":3,"client":"rdkafka",
 *             "listener":"PLAINTEXT","peer":"127.0.0.1:50312","principal":"User:ANONYMOUS",
 *             "body":{...the request's fields at that version...}}
 *   protocol {"dir":"response",...,"ms":0.21,"bytes":412,"body":{...}}
 *
 * Record payloads are summarised (their size and a short preview, proto/kformat.h); a Fetch
 * answer whose records go out by sendfile is logged without its body ("records_by_sendfile").
 *
 * The filter: `log.protocol` at start (empty: off; `all`; `client.id=ID`; `address=IP`), or
 * live through the admin API for N seconds (st_protolog_set: POST /v1/protocol-log). Off, a
 * request pays one atomic load; only the connections the filter picks pay for decoding and
 * formatting, on their own shard.
 *
 * Threads: any.
 */
#ifndef ST_BROKER_PROTOLOG_H
#define ST_BROKER_PROTOLOG_H

#include <stddef.h>
#include <stdint.h>

#include "broker/request.h"
#include "net/out.h"

/* The filter of setting value v ("", "all", "client.id=ID", "address=IP"), for ever: 0, or
 * -1 with one line in err. */
int st_protolog_configure(const char *v, char *err, size_t errlen);
/* The filter for the next `seconds` (1..3600): client_id and/or address (NULL or "": any;
 * both NULL: every connection). 0, or -1 with one line in err. */
int st_protolog_set(const char *client_id, const char *address, int64_t seconds, char *err,
                    size_t errlen);
/* Request r was decoded (its header): logs it when the filter picks its connection, and
 * marks it so its response is logged too. */
void st_protolog_request(st_kreq_t *r);
/* r's response o is about to be sent: logged when its request was. */
void st_protolog_response(st_kreq_t *r, const st_out_t *o);
/* Frees every filter (process end). */
void st_protolog_fini(void);

#endif
