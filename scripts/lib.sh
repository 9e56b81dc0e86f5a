# Shared by scripts/run and scripts/test: find Python >= 3.12, make .venv, install with progress.
# shellcheck shell=bash

step() { printf '\033[1m==> %s\033[0m\n' "$*"; }

find_python() {
  local candidates=()
  # pyenv honours .python-version (3.12.1 on these machines) through its shims.
  command -v pyenv >/dev/null 2>&1 && candidates+=("$(pyenv which python 2>/dev/null || true)")
  [ -d "$HOME/.pyenv/versions" ] && candidates+=("$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3)
  candidates+=(python3.14 python3.13 python3.12 python3 python)
  local c
  for c in "${candidates[@]}"; do
    [ -n "$c" ] || continue
    command -v "$c" >/dev/null 2>&1 || [ -x "$c" ] || continue
    if "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      echo "$c"; return 0
    fi
  done
  echo "Agent Lab needs Python 3.12 or newer (Django 6.1) and none was found." >&2
  echo "Install one (e.g. 'pyenv install 3.12' — .python-version selects it) and run again." >&2
  return 1
}

ensure_venv() {
  local python=$1
  if [ -x .venv/bin/python ] && .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    return 0
  fi
  step "Creating .venv with $("$python" --version)"
  rm -rf .venv
  "$python" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
}

# Run a pip command in the background, echoing its progress lines and a heartbeat while
# llama-cpp-python compiles (minutes, with nothing printed by pip itself).
pip_with_progress() {
  local log=.venv/pip.log start=$SECONDS
  "$@" >"$log" 2>&1 &
  local pid=$! shown=0 last_beat=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 2
    local lines
    lines=$(grep -E '^(Collecting|Building wheel|Successfully|Installing collected)' "$log" | tail -n +$((shown + 1)) || true)
    if [ -n "$lines" ]; then
      printf '    %s\n' "$lines" | cut -c1-110
      shown=$((shown + $(printf '%s\n' "$lines" | wc -l)))
    fi
    if [ $((SECONDS - last_beat)) -ge 30 ] && grep -q 'Building wheel for llama' "$log" \
       && ! grep -q 'Successfully built' "$log"; then
      printf '    … still compiling llama-cpp-python (%dm%02ds)\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60))
      last_beat=$SECONDS
    fi
  done
  if ! wait "$pid"; then
    tail -n 40 "$log" >&2
    echo "failed: $*; full log: $log" >&2
    return 1
  fi
}

# llama.cpp's default -march=native build uses AMX instructions wherever the CPU has them, and
# they fault (SIGSEGV on the first prompt) in VMs whose kernel does not enable AMX, as on these
# machines. So we build a portable AVX2 wheel once and keep it outside the repo and pip's cache.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
llama_wheel_dir() {
  local tag
  tag=$(printf '%s' "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-10)
  echo "${AGENTLAB_WHEEL_CACHE:-$HOME/.cache/agentlab/wheels}/$tag"
}

ensure_llama_wheel() {
  local version dir
  version=$(sed -nE 's/^llama-cpp-python(\[server\])?==([^ ]+).*/\2/p' requirements.txt)
  dir=$(llama_wheel_dir)
  if ls "$dir"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
    return 0
  fi
  step "Compiling llama-cpp-python $version (portable AVX2 build; ~8 minutes on 2 cores, once)"
  mkdir -p "$dir"
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" pip_with_progress .venv/bin/python -m pip wheel --no-deps \
    --no-cache-dir --no-binary llama-cpp-python -w "$dir" "llama-cpp-python==$version"
}

# pip install -r FILE, skipped when the requirements are unchanged since the last success.
install_requirements() {
  local file=$1
  local stamp sum
  stamp=".venv/.installed-$(basename "$file")"
  sum=$(cat "$file" requirements*.txt scripts/lib.sh | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    step "Requirements from $file already installed"
    return 0
  fi
  ensure_llama_wheel
  step "Installing $file"
  local start=$SECONDS
  pip_with_progress .venv/bin/python -m pip install --progress-bar off \
    --find-links "$(llama_wheel_dir)" -r "$file"
  # A llama-cpp-python built elsewhere (e.g. pip's cache of a native build) is replaced.
  .venv/bin/python -m pip install --no-deps --force-reinstall --quiet \
    "$(ls "$(llama_wheel_dir)"/llama_cpp_python-*.whl | tail -n 1)"
  echo "$sum" >"$stamp"
  step "Installed in $((SECONDS - start)) s"
}

# Debian's chromium for the browser tests (Playwright drives it; it never downloads a browser),
# and its redis-server for the cross-process live tests (a fixture starts one on a free port).
# The servers the tests run for real: chromium (browser tests), redis-server and PostgreSQL
# (the scale profile's channel layer and database, tests/servers.py).
ensure_test_servers() {
  if command -v chromium >/dev/null 2>&1 && command -v redis-server >/dev/null 2>&1 \
      && compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    return 0
  fi
  step "Installing Debian's chromium, redis-server and postgresql for the tests (once, ~1 minute)"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium redis-server \
    postgresql >/dev/null
}

# Arize Phoenix for tests/test_phoenix.py, in its own virtualenv (requirements-phoenix.txt),
# cached outside the repo like the llama wheel; a half-made one (no .complete) is made again.
phoenix_venv() {
  local version
  version=$(sed -nE 's/^arize-phoenix==([^ ]+).*/\1/p' requirements-phoenix.txt)
  echo "${AGENTLAB_PHOENIX_CACHE:-$HOME/.cache/agentlab}/phoenix-$version"
}

ensure_phoenix() {
  local python=$1 dir
  dir=$(phoenix_venv)
  if [ -f "$dir/.complete" ]; then
    step "Phoenix already installed in $dir"
    return 0
  fi
  step "Installing Arize Phoenix into $dir (once; about 3 minutes)"
  local start=$SECONDS
  rm -rf "$dir"
  "$python" -m venv "$dir"
  pip_with_progress "$dir/bin/python" -m pip install --progress-bar off -r requirements-phoenix.txt
  touch "$dir/.complete"
  step "Phoenix installed in $((SECONDS - start)) s"
}

# Real agent frameworks (LangGraph, smolagents, the OpenAI Agents SDK, LlamaIndex, the openai SDK)
# and their instrumentors for tests/test_frameworks.py, in their own virtualenv
# (requirements-frameworks.txt), cached like Phoenix's; named by the file's hash, so a change
# to a pin makes a new one.
frameworks_venv() {
  local tag
  tag=$(sha256sum requirements-frameworks.txt | cut -c1-10)
  echo "${AGENTLAB_FRAMEWORKS_CACHE:-$HOME/.cache/agentlab}/frameworks-$tag"
}

ensure_frameworks() {
  local python=$1 dir
  dir=$(frameworks_venv)
  if [ -f "$dir/.complete" ]; then
    step "Agent frameworks already installed in $dir"
    return 0
  fi
  step "Installing the agent frameworks into $dir (once; about 1 minute)"
  local start=$SECONDS
  rm -rf "$dir"
  "$python" -m venv "$dir"
  # Every package is pinned, so no resolving; pip check fails loudly if a pin is missing.
  pip_with_progress "$dir/bin/python" -m pip install --progress-bar off --no-deps \
    -r requirements-frameworks.txt
  "$dir/bin/python" -m pip check
  touch "$dir/.complete"
  step "Agent frameworks installed in $((SECONDS - start)) s"
}

# LiteLLM's proxy, the anchor of `manage.py bench_gateway` (requirements-litellm.txt), in its own
# virtualenv cached like Phoenix's; named by its version. Not installed by scripts/test: run
# `source scripts/lib.sh && ensure_litellm "$(find_python)"` once, then the bench finds it
# (or AGENTLAB_LITELLM_PYTHON="$(litellm_venv)/bin/python").
litellm_venv() {
  local version
  version=$(sed -nE 's/^litellm(\[proxy\])?==([^ ]+).*/\2/p' requirements-litellm.txt)
  echo "${AGENTLAB_LITELLM_CACHE:-$HOME/.cache/agentlab}/litellm-$version"
}

ensure_litellm() {
  local python=$1 dir
  dir=$(litellm_venv)
  if [ -f "$dir/.complete" ]; then
    step "LiteLLM already installed in $dir"
    return 0
  fi
  step "Installing LiteLLM's proxy into $dir (once; about 2 minutes)"
  local start=$SECONDS
  rm -rf "$dir"
  "$python" -m venv "$dir"
  # Not only under set -e (scripts/test): a failed install is never marked complete.
  pip_with_progress "$dir/bin/python" -m pip install --progress-bar off \
    -r requirements-litellm.txt || return 1
  touch "$dir/.complete"
  step "LiteLLM installed in $((SECONDS - start)) s"
}
