/*
 * fanout.h — split by owner shard, send, gather: the one way a request's work reaches the
 * shards that own its partitions (or groups) and comes back.
 *
 *   origin:  st_fanout_begin ─┬─ st_fanout_owner(legs, owner) / st_fanout_send(leg, shard) ...
 *                             └─ st_fanout_end
 *   each target shard:  run(leg) ── now, or later after st_fanout_hold(leg) ... st_fanout_release
 *   origin:  done(ctx), once every leg has come back (at once from st_fanout_end if none went)
 *
 * A leg is the caller's memory (a per-shard array for by-owner fan-outs, or one object per item)
 * and belongs to the caller throughout; run may write results into what the leg points at, and
 * done reads them (the rings' release/acquire orders those writes). A fan-out may be begun again
 * once done has run (Fetch's rounds); st_fanout_owner sends each shard's leg once per round.
 * The answer to the client leaves in request order whatever order shards answer in: that is the
 * connection's job (net/), not this one's.
 *
 * Threads: begin, owner, send, end and done on the origin shard; run, hold and release on the
 * leg's target shard.
 */
#ifndef ST_BROKER_FANOUT_H
#define ST_BROKER_FANOUT_H

#include "io/mesh.h"

typedef struct st_fanout st_fanout_t;
typedef struct st_fanout_leg st_fanout_leg_t;

typedef void (*st_fanout_run_fn)(st_fanout_leg_t *leg); /* on leg->target */
typedef void (*st_fanout_done_fn)(void *ctx);           /* on the origin */

struct st_fanout_leg {
    st_msg_t msg; /* first: the mesh hands this pointer back */
    st_fanout_t *f;
    int target; /* the shard it runs on */
    int holds;  /* one while run runs, plus each st_fanout_hold not yet released */
    int round;  /* the round it was last sent in (st_fanout_owner) */
    void *data; /* the caller's, untouched here */
};

struct st_fanout {
    st_mesh_t *mesh;
    int origin;
    int pending; /* legs out, plus one until st_fanout_end */
    int round;   /* counts st_fanout_begin calls */
    st_fanout_run_fn run;
    st_fanout_done_fn done;
    void *ctx;
};

/* Starts a round from shard `origin`. f may be zeroed memory or a fan-out whose done ran. */
void st_fanout_begin(st_fanout_t *f, st_mesh_t *mesh, int origin, st_fanout_run_fn run,
                     st_fanout_done_fn done, void *ctx);
/* Sends leg to run on shard `target`. */
void st_fanout_send(st_fanout_t *f, st_fanout_leg_t *leg, int target);
/* Sends legs[owner] to shard `owner` unless it went already in this round; owner < 0 is
 * skipped (the caller answered that item itself). legs has one entry per shard. */
void st_fanout_owner(st_fanout_t *f, st_fanout_leg_t *legs, int owner);
/* Ends the sending: done runs once every leg is back (now, if none went). */
void st_fanout_end(st_fanout_t *f);
/* From run, on the target: the leg answers later, at its last st_fanout_release. */
void st_fanout_hold(st_fanout_leg_t *leg);
void st_fanout_release(st_fanout_leg_t *leg);

#endif
