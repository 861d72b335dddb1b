/* fanout.c — split by owner shard, send, gather (fanout.h). */
#include "broker/fanout.h"

static void back_on_origin(st_msg_t *m)
{
    st_fanout_t *f = ((st_fanout_leg_t *)m)->f;
    if (--f->pending == 0)
        f->done(f->ctx);
}

static void run_on_target(st_msg_t *m)
{
    st_fanout_leg_t *leg = (st_fanout_leg_t *)m;
    leg->holds = 1;
    leg->f->run(leg);
    st_fanout_release(leg);
}

void st_fanout_begin(st_fanout_t *f, st_mesh_t *mesh, int origin, st_fanout_run_fn run,
                     st_fanout_done_fn done, void *ctx)
{
    f->mesh = mesh;
    f->origin = origin;
    f->pending = 1;
    f->round++;
    f->run = run;
    f->done = done;
    f->ctx = ctx;
}

void st_fanout_send(st_fanout_t *f, st_fanout_leg_t *leg, int target)
{
    leg->f = f;
    leg->target = target;
    leg->round = f->round;
    f->pending++;
    st_mesh_send(f->mesh, f->origin, target, &leg->msg, run_on_target);
}

void st_fanout_owner(st_fanout_t *f, st_fanout_leg_t *legs, int owner)
{
    if (owner >= 0 && legs[owner].round != f->round)
        st_fanout_send(f, &legs[owner], owner);
}

void st_fanout_end(st_fanout_t *f)
{
    if (--f->pending == 0)
        f->done(f->ctx);
}

void st_fanout_hold(st_fanout_leg_t *leg)
{
    leg->holds++;
}

void st_fanout_release(st_fanout_leg_t *leg)
{
    if (--leg->holds == 0)
        st_mesh_send(leg->f->mesh, leg->target, leg->f->origin, &leg->msg, back_on_origin);
}
