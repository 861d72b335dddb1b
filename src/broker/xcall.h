/*
 * xcall.h — run a step on another shard and come back.
 *
 * The caller embeds st_xcall_t in its own object, names the shard to run on, a `run`
 * function executed there and a `done` function executed back on the calling shard. `run`
 * may finish later (after an fsync, say): it calls st_xcall_return() when it is done. The
 * object belongs to the caller throughout; `run` may write results into it, and the caller
 * reads them in `done` (the rings' release/acquire orders those writes).
 *
 * Works for target == origin too (both steps run on later loop iterations).
 */
#ifndef ST_BROKER_XCALL_H
#define ST_BROKER_XCALL_H

#include "io/mesh.h"

typedef struct st_broker st_broker_t;
typedef struct st_kshard st_kshard_t;
typedef struct st_xcall st_xcall_t;
typedef void (*st_xcall_fn)(st_kshard_t *s, st_xcall_t *x);

struct st_xcall {
    st_msg_t msg; /* first: the mesh hands this pointer back */
    st_broker_t *b;
    int origin, target;
    st_xcall_fn run, done;
};

/* On shard `from`: runs x->run on shard `target`, then x->done back on `from`. */
void st_xcall(st_kshard_t *from, int target, st_xcall_t *x, st_xcall_fn run, st_xcall_fn done);
/* On the target shard, from run (now or later): sends x back to its origin. */
void st_xcall_return(st_kshard_t *s, st_xcall_t *x);

#endif
