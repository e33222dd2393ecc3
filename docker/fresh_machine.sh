#!/usr/bin/env bash
# The README's test command on a fresh machine: `./run.sh test` as root in a clean Debian 12
# container (Python 3.11, the package registries reachable through the host's network, nothing
# installed beforehand), on a clone of this repository's committed HEAD (not the working tree).
# Prints pytest's counts, the venv's size and its nvidia packages; fails unless the tests pass with
# no error and no nvidia package was installed (PyPI's CUDA torch pulls them).
#
#   docker/fresh_machine.sh                  # the whole suite: about 25 minutes on 2 cores, 16 GB
#   docker/fresh_machine.sh tests/test_app.py
#
# Where PyTorch's CPU index does not answer (as on machines that reach only PyPI), the container
# gets this machine's CPU torch wheel (TORCH_WHEEL, default the one in /opt/wheels) through
# PIP_FIND_LINKS, standing in for a machine that reaches the index; nothing else of this machine's.
# The log is kept in test-artifacts/fresh-machine.log.
set -euo pipefail
repo="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
name=spec-fresh-machine
log="$repo/test-artifacts/fresh-machine.log"
torch_index=https://download.pytorch.org/whl/cpu

"$repo/docker/base.sh"
work="$(mktemp -d)"
cleanup() { docker rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
commit="$(git -C "$repo" rev-parse HEAD)"
git clone -q "$repo" "$work/repo"
git -C "$work/repo" checkout -q --detach "$commit"

wheels=()
if ! python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$torch_index/torch/" 2>/dev/null; then
  wheel="${TORCH_WHEEL:-$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -1)}"
  [ -f "$wheel" ] || { echo "$torch_index does not answer and TORCH_WHEEL names no wheel: nowhere to get CPU torch" >&2; exit 1; }
  wheels=(-v "$wheel:/wheels/$(basename "$wheel"):ro" -e PIP_FIND_LINKS=/wheels)
  echo "[fresh_machine] $torch_index does not answer: the container gets $(basename "$wheel") through PIP_FIND_LINKS"
fi

mkdir -p "$(dirname "$log")"
echo "[fresh_machine] ./run.sh test at ${commit:0:7} in a clean Debian 12 container (log: $log)"
began=$SECONDS
# CI=1: the browser test fails rather than skips when it cannot run.
docker run --name "$name" --network host --memory 16g --cpus 2 -e CI=1 "${wheels[@]}" \
  -v "$work/repo:/repo" -w /repo python:3.11-slim \
  bash -c './run.sh test -p no:cacheprovider -rs "$@"; echo "exit code $?"
           echo "venv size $(du -sh .venv | cut -f1)"
           echo "nvidia packages: $(.venv/bin/pip list 2>/dev/null | grep -ci "^nvidia-")"' bash "$@" 2>&1 | tee "$log"
seconds=$((SECONDS - began))

summary="$(grep -E '^(=+ )?[0-9]+ (passed|failed|errors?|skipped)' "$log" | tail -1 || true)"
count() { grep -oE "[0-9]+ $1" <<<"$summary" | cut -d' ' -f1 || true; }
passed="$(count passed)" failed="$(count failed)" errors="$(count 'errors?')" skipped="$(count skipped)"
nvidia="$(sed -n 's/^nvidia packages: //p' "$log")"
echo
echo "fresh machine (Debian 12, ${commit:0:7}): ${passed:-0} passed, ${failed:-0} failed, ${errors:-0} errors," \
     "${skipped:-0} skipped in ${seconds} s; $(grep '^venv size' "$log"); nvidia packages: ${nvidia:-?}"
[ -n "$summary" ] && [ -z "$failed" ] && [ -z "$errors" ] && [ "$nvidia" = 0 ] && grep -q '^exit code 0$' "$log"
