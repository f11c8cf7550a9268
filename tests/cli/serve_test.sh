#!/usr/bin/env bash
# kvlm serve end to end: start it on a free port with the bundled model, call a few endpoints
# with curl, check that a second server on the same port (started as plain `kvlm`, no verb) is
# refused (exit 1), then SIGTERM and expect exit 0. Usage: serve_test.sh KVLM_BINARY REPO_ROOT
set -euo pipefail
kvlm="$1"

fail() { echo "serve_test: $*" >&2; [ -f "$log" ] && sed 's/^/  server: /' "$log" >&2; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
log=$(mktemp)
second=$(mktemp)
timeout 300 "$kvlm" serve --port "$port" >"$log" 2>&1 &
pid=$!
cleanup() { kill -KILL "$pid" 2>/dev/null || true; rm -f "$log" "$second"; }
trap cleanup EXIT

for _ in $(seq 1 600); do
  curl -sf --max-time 2 "$url/health" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || fail "the server exited before it was ready"
  sleep 0.1
done
grep -q "listening on $url" "$log" || fail "no ready line naming $url"

[ "$(curl -sS --max-time 10 "$url/health")" = '{"status": "ok"}' ] || fail "/health body is not exact"

chat=$(curl -sS --max-time 60 "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0}')
echo "$chat" | grep -q '"object":"chat.completion"' || fail "chat response: $chat"
echo "$chat" | grep -q '"finish_reason":"\(stop\|length\)"' || fail "chat finish_reason: $chat"

stream=$(curl -sS -N --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "Once", "max_tokens": 4, "stream": true}')
echo "$stream" | grep -q '^data: \[DONE\]$' || fail "stream without [DONE]: $stream"

code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$url/nope")
[ "$code" = 404 ] || fail "unknown route gave $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$url/v1/chat/completions" -d '{bad')
[ "$code" = 400 ] || fail "malformed JSON gave $code"
# Read whole before matching: grep -q stops reading at the first match, which would fail curl's
# write (and the pipeline, under pipefail) when the body is still coming.
metrics=$(curl -sS --max-time 10 "$url/metrics")
grep -q '^kvlm_time_to_first_token_seconds_count ' <<<"$metrics" || fail "/metrics: $metrics"

# `kvlm` with no verb is `kvlm serve`: started on the taken port, it must refuse just the same.
set +e
timeout 120 "$kvlm" --port "$port" >"$second" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "a second server on a taken port exited $rc"
grep -q "already in use" "$second" || fail "no clear message for a taken port: $(cat "$second")"

kill -TERM "$pid"
for _ in $(seq 1 300); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "still running 30 s after SIGTERM"
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" = 0 ] || fail "SIGTERM exit status $rc"
echo "serve_test: ok"
