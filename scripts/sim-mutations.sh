#!/usr/bin/env bash
# sim-mutations.sh — shows that the replication simulation (tests/unit/replica/test_sim.c)
# finds each replication fix of issue 19 when it is reverted: for every mutation below, a copy
# of the tree gets the fix taken out (one sed), the simulator is built there (Debug, no
# sanitizers, for speed) and run over SEEDS seeds with --keep-going; the line printed says how
# many seeds failed. A mutation the simulator does not find prints "0 failed" and is a gap in
# the simulation, not a pass. Nothing in this checkout is changed.
#
#     scripts/sim-mutations.sh [SEEDS]      # default 500
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
SEEDS=${1:-500}
WORK=$(mktemp -d /tmp/strata-mutations.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# name | file | sed expression that reverts the fix
MUTATIONS=(
  "1 restarted log's hw from its log end|src/partition/replica.c|s/^            p->hw = st_log_start_offset(p->log);/            (void)0;/"
  "2 ISR join without the epoch start (KAFKA-7128)|src/partition/replica.c|s/r->pos\[i\] >= r->epoch_start \&\& //"
  "3 no epoch recorded at election (KIP-101)|src/partition/replica.c|s/int rc = st_log_assign_epoch(p->log, role->leader_epoch, \&start);/int rc = 0;/"
  "4 leader takes any fetch offset (no KIP-320 check)|src/partition/replica.c|s/    if (last_epoch >= 0) {/    if (0) {/"
  "5 unclean election from the broker setting only|src/cluster/records.c|s/    const char \*v = st_md_topic_config(t, \"unclean.leader.election.enable\");/    const char *v = t ? NULL : NULL;/"
  "6 DeleteRecords not waiting for the replicas|src/partition/append.c|s/return p->repl.on \&\& p->repl.role.leader \&\& st_part_low_watermark(p) < offset;/return p \&\& offset < 0 \&\& false;/"
  "6b followers keep their log start|src/partition/replica.c|s/    int rc = st_log_set_start_offset(p->log, to);/    int rc = 0;/"
  "9 hw ignores replicas asked into the ISR (KIP-497)|src/partition/replica.c|s/for (int i = 0; i < r->role.nisr + r->npending; i++) {/for (int i = 0; i < r->role.nisr; i++) {/"
  "10 a cut keeps an empty trailing epoch|src/partition/replica.c|s/        rc = st_log_forget_epochs_from(p->log, st_log_end_offset(p->log));/        rc = 0;/"
  "11 no restart inside a batch|src/partition/append.c|s/    if (rc == ST_E_OUT_OF_RANGE \&\& (rc = restart_for(p, records, len)) == 0)/    if (rc == ST_E_OUT_OF_RANGE \&\& 0 \&\& (rc = restart_for(p, records, len)) == 0)/"
  "12 DeleteRecords answered after the leadership ended|src/partition/append.c|s/        res = ST_E_NOT_LEADER;/        res = 0;/"
)

tree="$WORK/tree"
mkdir -p "$tree"
(cd "$SRC" && git ls-files -z | xargs -0 cp -p --parents -t "$tree")
cp -p "$SRC/tests/unit/replica/test_sim.c" "$tree/tests/unit/replica/test_sim.c"
CC=clang cmake -S "$tree" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Debug -DSTRATA_SANITIZE=OFF \
  -DSTRATA_FUZZ=OFF >/dev/null
cmake --build "$WORK/build" -j "$(nproc)" --target replica_test_sim >/dev/null
echo "unmutated: $("$WORK/build/tests/replica_test_sim" --seeds "$SEEDS" --keep-going 2>&1 | tail -1)"

for m in "${MUTATIONS[@]}"; do
  IFS='|' read -r name file expr <<<"$m"
  cp "$tree/$file" "$WORK/orig"
  sed -i -e "$expr" "$tree/$file"
  if cmp -s "$tree/$file" "$WORK/orig"; then
    echo "mutation $name: the sed did not apply (the code moved): update this script"
    continue
  fi
  if ! cmake --build "$WORK/build" -j "$(nproc)" --target replica_test_sim >"$WORK/log" 2>&1; then
    echo "mutation $name: does not build (update this script):"; grep -m3 error "$WORK/log" || true
    cp "$WORK/orig" "$tree/$file"
    continue
  fi
  out=$("$WORK/build/tests/replica_test_sim" --seeds "$SEEDS" --keep-going 2>&1 | tail -1 || true)
  echo "mutation $name: $out"
  cp "$WORK/orig" "$tree/$file" # a new mtime: rebuilt unmutated next time
done
