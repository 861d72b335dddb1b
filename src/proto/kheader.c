/* kheader.c — request and response header codecs (layouts in kheader.h). */
#include "proto/kheader.h"

#include <errno.h>

#include "base/err.h"
#include "proto/kafka_gen.h"

int st_kp_req_header_version(int16_t api_key, int16_t api_version)
{
    const st_kp_api_t *a = st_kp_api_find(api_key);
    if (!a)
        return ST_E_UNSUPPORTED;
    return a->flexible_version >= 0 && api_version >= a->flexible_version ? 2 : 1;
}

int st_kp_resp_header_version(int16_t api_key, int16_t api_version)
{
    const st_kp_api_t *a = st_kp_api_find(api_key);
    if (!a)
        return ST_E_UNSUPPORTED;
    if (api_key == ST_KP_API_API_VERSIONS)
        return 0;
    return a->flexible_version >= 0 && api_version >= a->flexible_version ? 1 : 0;
}

int st_kp_req_header_decode(st_kreader_t *r, int header_version, st_kp_req_header_t *out)
{
    int rc;
    if (header_version < 0 || header_version > 2)
        return ST_E_UNSUPPORTED;
    out->client_id = ST_KSTR_NULL;
    if ((rc = st_kreader_i16(r, &out->request_api_key)) < 0 ||
        (rc = st_kreader_i16(r, &out->request_api_version)) < 0 ||
        (rc = st_kreader_i32(r, &out->correlation_id)) < 0)
        return rc;
    if (header_version >= 1 && (rc = st_kreader_str(r, false, true, &out->client_id)) < 0)
        return rc;
    if (header_version >= 2 && (rc = st_kreader_skip_tags(r)) < 0)
        return rc;
    return 0;
}

int st_kp_req_header_encode(st_kwriter_t *w, int header_version, const st_kp_req_header_t *in)
{
    int rc;
    if (header_version < 0 || header_version > 2)
        return ST_E_UNSUPPORTED;
    st_kwriter_i16(w, in->request_api_key);
    st_kwriter_i16(w, in->request_api_version);
    st_kwriter_i32(w, in->correlation_id);
    if (header_version >= 1 && (rc = st_kwriter_str(w, false, true, in->client_id)) < 0)
        return rc;
    if (header_version >= 2)
        st_kwriter_uvarint(w, 0);
    return w->buf->oom ? -ENOMEM : 0;
}

int st_kp_resp_header_decode(st_kreader_t *r, int header_version, st_kp_resp_header_t *out)
{
    int rc;
    if (header_version < 0 || header_version > 1)
        return ST_E_UNSUPPORTED;
    if ((rc = st_kreader_i32(r, &out->correlation_id)) < 0)
        return rc;
    if (header_version >= 1 && (rc = st_kreader_skip_tags(r)) < 0)
        return rc;
    return 0;
}

int st_kp_resp_header_encode(st_kwriter_t *w, int header_version, const st_kp_resp_header_t *in)
{
    if (header_version < 0 || header_version > 1)
        return ST_E_UNSUPPORTED;
    st_kwriter_i32(w, in->correlation_id);
    if (header_version >= 1)
        st_kwriter_uvarint(w, 0);
    return w->buf->oom ? -ENOMEM : 0;
}
