#!/bin/bash
# How the stale-record runs ran (2026-11-30): learned-stale.json is a learned.json that
# `python -m bench.tools.examples --runs 1` wrote, its draft call tripled. /tmp/s76/before was a
# worktree of bb034d1 with c04f7d5 and 19cc4c8 reverted (no probe, no bare call), /tmp/s76/head
# one of bb034d1 (the probe), /work/main the bare call. Each run starts from the stale record and
# logs the draft call the record kept after its six races.
run() {  # $1 dir, $2 name
  cp /tmp/s76/learned-stale.json /work/main/models/cache/learned.json
  cd $1 && SPEC_MODELS_DIR=/work/main/models/cache PYTHONPATH=. timeout 1500 /work/main/.venv/bin/python -m bench.tools.examples --runs 1 > /tmp/s76/stale-$2.txt 2>&1
  echo "$2 rc=$? $(date +%H:%M) $(python3 -c "import json;d=json.load(open('/work/main/models/cache/learned.json'));print([round(v['call_seconds']*1e3,1) for v in d.values() if 'call_seconds' in v])")" >> /tmp/s76/stale.log
}
run /tmp/s76/before before
run /work/main new
run /tmp/s76/head probe
run /work/main new-2
run /tmp/s76/before before-2
