/* shard.c — which shard the calling thread is (shard.h). */
#include "broker/shard.h"

static _Thread_local st_kshard_t *current;

st_kshard_t *st_kshard_current(void)
{
    return current;
}

void st_kshard_set_current(st_kshard_t *s)
{
    current = s;
}
