/*
 * kheader.h — Kafka request and response headers.
 *
 * Wire layout (every request and response frame is preceded by an int32 size, which the
 * network layer handles):
 *
 *   request header v0:  request_api_key int16 | request_api_version int16 | correlation_id int32
 *   request header v1:  v0 | client_id nullable string (int16 length, never compact)
 *   request header v2:  v1 | tagged fields (unknown ones are skipped)
 *   response header v0: correlation_id int32
 *   response header v1: v0 | tagged fields
 *
 * Which header an API version uses: requests use v2 from the API's first flexible version and
 * v1 before it; responses use v1 from the first flexible version and v0 before it, except
 * ApiVersions, whose response header is always v0 (a client must be able to read it before it
 * knows what the broker supports). Called by the shard that owns the connection.
 */
#ifndef ST_PROTO_KHEADER_H
#define ST_PROTO_KHEADER_H

#include <stdint.h>

#include "proto/kreader.h"
#include "proto/ktypes.h"
#include "proto/kwriter.h"

typedef struct st_kp_req_header {
    int16_t request_api_key;
    int16_t request_api_version;
    int32_t correlation_id;
    st_kstr_t client_id; /* v1+, nullable; null in v0 */
} st_kp_req_header_t;

typedef struct st_kp_resp_header {
    int32_t correlation_id;
} st_kp_resp_header_t;

/*
 * The request header version for an API version: 1 or 2. The version need not be in the
 * supported range (a broker must still parse the header to answer UNSUPPORTED_VERSION); the
 * answer follows the API's flexible rule. ST_E_UNSUPPORTED for an API key this build lacks.
 */
int st_kp_req_header_version(int16_t api_key, int16_t api_version);
/* The response header version: 0 or 1 (always 0 for ApiVersions); ST_E_UNSUPPORTED likewise. */
int st_kp_resp_header_version(int16_t api_key, int16_t api_version);

int st_kp_req_header_decode(st_kreader_t *r, int header_version, st_kp_req_header_t *out);
int st_kp_req_header_encode(st_kwriter_t *w, int header_version, const st_kp_req_header_t *in);
int st_kp_resp_header_decode(st_kreader_t *r, int header_version, st_kp_resp_header_t *out);
int st_kp_resp_header_encode(st_kwriter_t *w, int header_version, const st_kp_resp_header_t *in);

#endif
