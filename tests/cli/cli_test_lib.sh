# Shared by the *_test.sh scripts (source it after `set -euo pipefail`): $1 is the kvlm binary,
# $2 the repository root; $tmp is a scratch folder removed on exit.
kvlm="$1"
root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_error NEEDLE ARGS...: `kvlm ARGS` must exit 1 and name the problem on stderr.
expect_error() {
  local needle="$1"; shift
  local rc=0
  "$kvlm" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc -eq 1 ]] || fail "'$*' exited $rc, expected 1: $(cat "$tmp/err")"
  grep -qF -- "$needle" "$tmp/err" || fail "'$*': stderr lacks '$needle': $(cat "$tmp/err")"
}
