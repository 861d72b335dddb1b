/*
 * fuzz_heartbeat.c — arbitrary bytes as a received heartbeat datagram (cluster/heartbeat.h).
 * st_hb_decode must never crash, assert, leak or trip a sanitizer; what it accepts must
 * re-encode to a datagram that decodes to the same heartbeat (the fields a receiver uses,
 * kept within their bounds).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cluster/heartbeat.h"

static void require(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static st_hb_t a, b;
    if (st_hb_decode(data, size, &a))
        return 0;
    require(a.ncreate >= 0 && a.ncreate <= ST_HB_MAX_CREATE && a.nalter >= 0);
    require(strlen(a.host) < sizeof a.host && strlen(a.rack) < sizeof a.rack);
    for (int i = 0; i < a.nalter; i++)
        require(a.alter[i].nisr >= 0 && a.alter[i].nisr <= ST_MD_MAX_REPLICAS);
    char *text;
    size_t len;
    if (st_hb_encode(&a, &text, &len) == 0) {
        /* names with a NUL inside are cut at it by decode, so they stay equal */
        if (len <= ST_HB_MAX_DATAGRAM && st_hb_decode(text, len, &b) == 0) {
            require(b.id == a.id && b.incarnation == a.incarnation && b.port == a.port);
            require(b.voter == a.voter && b.applied == a.applied);
            require(strcmp(b.host, a.host) == 0 && strcmp(b.rack, a.rack) == 0);
            require(strcmp(b.raft, a.raft) == 0);
            require(b.ncreate == a.ncreate && b.nalter == a.nalter);
            for (int i = 0; i < a.ncreate; i++)
                require(strcmp(b.create[i], a.create[i]) == 0);
            for (int i = 0; i < a.nalter; i++)
                require(memcmp(&b.alter[i], &a.alter[i], sizeof a.alter[i]) == 0);
            st_hb_fini(&b);
        }
        free(text);
    }
    st_hb_fini(&a);
    return 0;
}
