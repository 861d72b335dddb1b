/*
 * kformat.h — one-line JSON-like rendering of decoded protocol values, for logs and the
 * `strata proxy --log` command. The generated st_kp_req_format / st_kp_resp_format build on
 * these. Strings are JSON-escaped; byte fields print as "<N bytes>" with a short hex preview;
 * UUIDs print in Kafka's URL-safe base64 form. Output is appended to an st_buf_t (a failed
 * allocation is sticky in buf->oom). Any thread may call these.
 */
#ifndef ST_PROTO_KFORMAT_H
#define ST_PROTO_KFORMAT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "proto/ktypes.h"

void st_kfmt_raw(st_buf_t *b, const char *s);
/* Writes ,"name": (no comma before the first key of an object; clears *first). */
void st_kfmt_key(st_buf_t *b, const char *name, bool *first);
void st_kfmt_i64(st_buf_t *b, int64_t v);
void st_kfmt_f64(st_buf_t *b, double v);
void st_kfmt_bool(st_buf_t *b, bool v);
void st_kfmt_str(st_buf_t *b, st_kstr_t s);
void st_kfmt_bytes(st_buf_t *b, const uint8_t *p, int32_t len);
void st_kfmt_records(st_buf_t *b, const st_krecords_t *r);
void st_kfmt_uuid(st_buf_t *b, const st_kuuid_t *u);

#endif
