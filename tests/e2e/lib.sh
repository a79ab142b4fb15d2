# Helpers for the end-to-end shell tests: run a command, check its exit code and output.
# usage in a test: source lib.sh; expect CODE 'stderr-regex' -- cmd args...; finish
set -u
failures=0
checks=0
TMP=$(mktemp -d /tmp/xcargo-e2e-XXXXXX)
# Output a test does not look at goes here, never to /dev/null (see output_test.sh).
export DISCARD=$TMP/discarded.out
# Processes a test starts in the background (loaders): add their pids to `pids`; they and
# their children (workers) are killed when the test ends, and TMP is removed (kept, and
# named, when XCARGO_KEEP_TMP is set: for looking at a failure's logs).
pids=()
remove_tmp() { if [ -n "${XCARGO_KEEP_TMP:-}" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi; }
trap 'for p in "${pids[@]}"; do pkill -9 -P "$p"; kill -9 "$p"; done 2>>"$DISCARD"; remove_tmp' EXIT

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

# check DESCRIPTION CMD...: CMD succeeds. Returns 1 when it does not (for a diagnosis after ||).
check() {
  local what=$1
  shift
  checks=$((checks + 1))
  if ! "$@" >>"$DISCARD" 2>&1; then
    echo "FAIL: $what"
    failures=$((failures + 1))
    return 1
  fi
}

# now_ms: wall-clock milliseconds, for durations the tests print or compare.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# eventually SECONDS DESCRIPTION CMD...: CMD succeeds within SECONDS, polled every 50 ms. For
# what a loader does in the background (log lines written in batches, trust reloads): the
# bound is a ceiling for a slow, busy machine, never a measurement. Returns CMD's last status.
eventually() {
  local limit=$1 what=$2
  shift 2
  local deadline=$(( $(now_ms) + limit * 1000 ))
  checks=$((checks + 1))
  until "$@" >>"$DISCARD" 2>&1; do
    if [ "$(now_ms)" -ge "$deadline" ]; then
      echo "FAIL: $what (not within $limit s)"
      failures=$((failures + 1))
      return 1
    fi
    sleep 0.05
  done
}

# lines_at_least N REGEX FILE: FILE has at least N lines matching REGEX (for eventually).
lines_at_least() { [ "$(grep -Ec -- "$2" "$3" 2>>"$DISCARD")" -ge "$1" ]; }

# wait_file FILE [SECONDS]: waits (default 60 s) until FILE is non-empty; 1 if it never is.
wait_file() {
  local deadline=$(( $(now_ms) + ${2:-60} * 1000 ))
  until [ -s "$1" ]; do
    [ "$(now_ms)" -ge "$deadline" ] && return 1
    sleep 0.05
  done
}

# serving_worker SUPERVISOR: the pid of a loader's serving worker. The newest: a worker that
# is ending (after a crash, a time-out, a SIGTERM) may still be there, or not yet reaped, under
# the same name while the one that replaced it (a standby forked after it) serves.
serving_worker() { pgrep -n -x xcargo-loader -P "$1"; }

# proc_fds PID, proc_rss_kb PID: a process's open descriptors and resident memory. They print
# nothing and return 1 when the process is not there, so that a reading that could not be
# taken fails its check (measure) instead of being shown as a number.
proc_fds() { [ -d "/proc/$1/fd" ] && ls "/proc/$1/fd" 2>>"$DISCARD" | wc -l; }
# fewest_fds PID: the fewest descriptors of 5 readings 0.5 s apart: what a loader holds for
# a moment (its probe's connection every 2 s, the pipe of a worker that is ending) is not a
# leak, and one reading may catch it.
fewest_fds() {
  local least="" n i
  for i in 1 2 3 4 5; do
    n=$(proc_fds "$1") || return 1
    { [ -z "$least" ] || [ "$n" -lt "$least" ]; } && least=$n
    [ "$i" -lt 5 ] && sleep 0.5
  done
  echo "$least"
}
proc_rss_kb() { awk '/^VmRSS/ {print $2; found=1} END {exit !found}' "/proc/$1/status" 2>>"$DISCARD"; }

# listening_on PID: "IP:PORT" of every TCP socket that PID or a process under it listens on,
# one a line (IPv6 ones as "[HEX]:PORT"); from /proc, so nothing beyond Python is needed.
listening_on() {
  /usr/bin/python3 - "$1" <<'PY'
import os, sys
children = {}
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        continue
    children.setdefault(ppid, []).append(int(p))
pids, todo = set(), [int(sys.argv[1])]
while todo:
    p = todo.pop()
    pids.add(p)
    todo += children.get(p, [])
inodes = set()
for p in pids:
    try:
        fds = os.listdir(f"/proc/{p}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{p}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
    try:
        lines = open(table).readlines()[1:]
    except OSError:
        continue
    for line in lines:
        f = line.split()
        if f[3] != "0A" or f[9] not in inodes:  # 0A: LISTEN
            continue
        ip, port = f[1].split(":")
        host = f"[{ip}]" if v6 else ".".join(str(b) for b in bytes.fromhex(ip)[::-1])
        print(f"{host}:{int(port, 16)}")
PY
}

# measure VAR DESCRIPTION CMD...: VAR=$(CMD); a failed or empty reading fails with its reason.
measure() {
  local var=$1 what=$2 value
  shift 2
  if value=$("$@") && [ -n "$value" ]; then
    printf -v "$var" '%s' "$value"
    return 0
  fi
  checks=$((checks + 1))
  failures=$((failures + 1))
  echo "FAIL: could not measure $what: '$*' read nothing (is the process gone?)"
  printf -v "$var" '%s' ""
  return 1
}

# in_cluster_dir: run in $TMP with a scripts/cluster directory there; the cluster, and the
# processes listed in pids, are stopped when the test ends.
in_cluster_dir() {
  cd "$TMP" || exit 1
  export XCARGO_CLUSTER_DIR=$TMP/cluster
  trap '"$SRC/scripts/cluster" down >>"$DISCARD" 2>&1; for p in "${pids[@]}"; do kill -9 "$p" 2>>"$DISCARD"; done; remove_tmp' EXIT
}

# diagnose FILE...: finish prints the last lines of each FILE if a check failed (a loader's
# log, which the failing commands' own output does not show).
diag_files=()
diagnose() { diag_files+=("$@"); }

finish() {
  if [ "$failures" -gt 0 ]; then
    for f in "${diag_files[@]}"; do
      echo "--- last lines of $f:"
      tail -40 "$f" 2>&1 | sed 's/^/    | /'
    done
  fi
  echo "$((checks - failures)) passed, $failures failed"
  [ "$failures" -eq 0 ]
}

# ucx_net: "--trusted-network" when this test's UCX_TLS leaves out System V shared memory (its
# tcp runs), for a loader to serve UCX over tcp with a listener; nothing otherwise (the
# default: UCX over shared memory through the same-host door, no UCX port). Unquoted: $(ucx_net).
ucx_net() {
  case ",${UCX_TLS:-}," in
    *,tcp,*) case ",$UCX_TLS," in *,shm,*|*,sm,*|*,mm,*|*,sysv,*|*,all,*) ;; *) echo --trusted-network ;; esac ;;
  esac
}

# syscall_slot LOADER: where the loader binary LOADER keeps its pointer to the C library's
# syscall(), as an offset from its xc_reply: what the escape_* kernels of
# tests/kernels/adversary.c take to find syscall() (the same in every worker of that binary).
syscall_slot() {
  local slot reply
  slot=$(llvm-readelf-16 -rW "$1" | awk '$5 ~ /^syscall(@|$)/ {print $1; exit}')
  reply=$(llvm-nm-16 --defined-only "$1" | awk '$3 == "xc_reply" {print $1; exit}')
  [ -n "$slot" ] && [ -n "$reply" ] && printf '%d\n' $((16#$slot - 16#$reply))
}
