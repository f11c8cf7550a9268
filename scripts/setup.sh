#!/usr/bin/env bash
# Installs every system dependency of kvlm from Debian 12 packages, and the npm packages of the
# server's SDK tests (tests/server/sdk) from the committed package-lock.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
packages=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libonig-dev libicu-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3  # tests/cli/serve_test.sh picks a free port with it
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node runs the official OpenAI and Anthropic clients against the server; a node already on the
# machine (any version from 18 on) is used as it is.
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

sdk="$root/tests/server/sdk"
if [ ! -f "$sdk/node_modules/.package-lock.json" ] || [ "$sdk/package-lock.json" -nt "$sdk/node_modules/.package-lock.json" ]; then
  npm ci --prefix "$sdk" --no-audit --no-fund --loglevel=error
fi
