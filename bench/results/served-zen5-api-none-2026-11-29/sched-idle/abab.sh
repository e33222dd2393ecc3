cd "$(dirname "$0")/../../.."  # the repository root
for policy in nice idle nice idle; do
  echo "=== $policy $(date +%T)"
  EXP_POLICY=$policy REPEATS=1 PYTHONPATH=.:bench/results/served-zen5-api-none-2026-11-29/sched-idle SPEC_MODELS_DIR=models/cache .venv/bin/python bench/results/served-zen5-api-none-2026-11-29/sched-idle/sched.py 2>&1 | grep -v Warning
  rm -f models/cache/learned.json; rm -rf models/cache/recordings
done
