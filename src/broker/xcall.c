/* xcall.c — cross-shard call and return over the mesh. */
#include "broker/xcall.h"

#include "broker/shard.h"

static void st_xcall_on_target(st_msg_t *m)
{
    st_xcall_t *x = (st_xcall_t *)m;
    x->run(x->b->shards[x->target], x);
}

static void st_xcall_on_origin(st_msg_t *m)
{
    st_xcall_t *x = (st_xcall_t *)m;
    x->done(x->b->shards[x->origin], x);
}

void st_xcall(st_kshard_t *from, int target, st_xcall_t *x, st_xcall_fn run, st_xcall_fn done)
{
    x->b = from->b;
    x->origin = from->id;
    x->target = target;
    x->run = run;
    x->done = done;
    st_mesh_send(from->b->mesh, from->id, target, &x->msg, st_xcall_on_target);
}

void st_xcall_return(st_kshard_t *s, st_xcall_t *x)
{
    st_mesh_send(s->b->mesh, s->id, x->origin, &x->msg, st_xcall_on_origin);
}
