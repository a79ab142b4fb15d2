# Helpers for the end-to-end shell tests: run a command, check its exit code and output.
# usage in a test: source lib.sh; expect CODE 'stderr-regex' -- cmd args...; finish
set -u
failures=0
checks=0
TMP=$(mktemp -d /tmp/xcargo-e2e-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# expect CODE REGEX -- CMD...: CMD exits with CODE and its stderr+stdout matches REGEX (ERE).
expect() {
  local code=$1 regex=$2
  shift 3
  local out rc
  out=$(timeout "${EXPECT_TIMEOUT:-60}" "$@" 2>&1)  # a hang fails the check instead of the whole run
  rc=$?
  checks=$((checks + 1))
  if [ "$rc" -ne "$code" ]; then
    echo "FAIL: exit $rc, expected $code: $*"
    echo "$out" | sed 's/^/    | /' | head -20
    failures=$((failures + 1))
  elif [ -n "$regex" ] && ! grep -Eq -- "$regex" <<<"$out"; then
    echo "FAIL: output does not match /$regex/: $*"
    echo "$out" | sed 's/^/    | /' | head -20
    failures=$((failures + 1))
  fi
}

# check DESCRIPTION CMD...: CMD succeeds.
check() {
  local what=$1
  shift
  checks=$((checks + 1))
  if ! "$@" >/dev/null 2>&1; then
    echo "FAIL: $what"
    failures=$((failures + 1))
  fi
}

finish() {
  echo "$((checks - failures)) passed, $failures failed"
  [ "$failures" -eq 0 ]
}
