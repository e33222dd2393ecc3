#!/bin/bash
# ABBA served A/B under emulated AVX2, each run from the same starting state (no learned record).
# /tmp/ab/before and /tmp/ab/after: git worktrees at 67b8f6b and dd52210 (the hybrid before and after c68ca34);
# /tmp/ab/snap: models/cache's calibration.json and draft-format*.json as they were before the first run.
M=/work/main/models/cache
for tag in before-1 after-1 after-2 before-2; do
  side=${tag%-*}
  cp /tmp/ab/snap/* $M/; rm -f $M/learned.json; rm -rf $M/recordings/*
  cd /tmp/ab/$side
  echo "$(date -u +%T) start $tag at $(git rev-parse --short HEAD)" >> /tmp/ab/progress.log
  SPEC_MODELS_DIR=$M /work/main/.venv/bin/python -m bench.tools.cpu_class AVX2 -- /work/main/.venv/bin/python -m bench.tools.served --examples 6 --repeats 2 --browser --json-out /tmp/ab/$tag.json > /tmp/ab/$tag.txt 2>&1
  echo "$(date -u +%T) end $tag rc=$?" >> /tmp/ab/progress.log
  cp $M/learned.json /tmp/ab/$tag-learned.json 2>/dev/null
  pkill -f served_app; pkill -f "app.py --port"; pkill -f chromium; sleep 5
done
echo done >> /tmp/ab/progress.log
