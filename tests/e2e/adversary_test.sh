#!/usr/bin/env bash
# Adversarial kernels against real loaders (a 2-node cluster from scripts/cluster), each
# repeated: every repetition gets a clear error and the node serves a good kernel right after;
# no descriptors or memory leak in the loader over the repetitions.
# usage: adversary_test.sh XCARGO SOURCE_DIR TLS [REPS] [RESTART_REPS]
#   REPS (default 1000): repetitions of kernels the worker survives (over-allocation, huge
#   replies, forwarding in a cycle, clients that vanish mid-invocation).
#   RESTART_REPS (default 20): repetitions of kernels after which the worker is replaced
#   (crashes, time-outs, sandbox kills); each costs a restart of about 0.2 s.
X=$1
SRC=$2
TLS=$3
REPS=${4:-1000}
RESTART_REPS=${5:-20}
BIN=$(dirname "$X")
source "$(dirname "$0")/lib.sh"
in_cluster_dir

# Two time limits, each a ceiling for a slow, busy machine: kernels that must finish (1 GiB
# of allocations under the sanitizers among them) run under FINISH_LIMIT, far above their
# cost; the restart phase's loaders get RESTART_LIMIT, which only 'spin' is meant to reach,
# still far above what 'ok' needs after a restart. One check may run all repetitions of a
# kernel: EXPECT_TIMEOUT is the ceiling for that.
FINISH_LIMIT=60 RESTART_LIMIT=0.5 ASAN=
ldd "$BIN/xcargo-loader" | grep -q libasan && RESTART_LIMIT=2 ASAN=1
export EXPECT_TIMEOUT=${EXPECT_TIMEOUT:-1200}
# cluster_up LIMIT: a 2-node cluster whose kernels may run LIMIT seconds.
cluster_up() {
  expect 0 '2 loaders up' -- "$SRC/scripts/cluster" up 2 --tls "$TLS" --bin "$BIN" -- \
    --timeout "$1" --max-hops 20 --max-reply 1048576 --max-memory 2G --executors 2
  SUPERVISOR=$(awk '{print $1}' "$XCARGO_CLUSTER_DIR/pids")
  NODE=$(grep address "$XCARGO_CLUSTER_DIR/cluster.yaml" | head -1 | awk '{print $2}')
}
cluster_up "$FINISH_LIMIT"
source "$XCARGO_CLUSTER_DIR/env"
KEY=$XCARGO_CLUSTER_DIR/signer.key
"$X" build "$SRC/tests/kernels/adversary.c" -o adv.xcargo --key "$KEY" 2>>"$DISCARD"
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key "$KEY" 2>>"$DISCARD"
worker() { serving_worker "$SUPERVISOR"; }
# Each worker and compile service starts by exec: a layout of its own, not its supervisor's
# nor its standby's (a kernel learns nothing of the addresses the next worker will use).
lib_base() { awk '$6 ~ /\/libc\.so/ {split($1, r, "-"); print r[1]; exit}' "/proc/$1/maps"; }
eventually 30 "a standby is ready" pgrep -x xcargo-standby -P "$SUPERVISOR"
check "the serving worker's libc is not where the supervisor's is" test "$(lib_base "$(worker)")" != "$(lib_base "$SUPERVISOR")"
check "nor where its standby's is" test "$(lib_base "$(worker)")" != "$(lib_base "$(pgrep -n -x xcargo-standby -P "$SUPERVISOR")")"
check "a compile service's libc is not where the supervisor's is" \
  test "$(lib_base "$(pgrep -o -x xcargo-compiler -P "$SUPERVISOR")")" != "$(lib_base "$SUPERVISOR")"
# Where the loader's file keeps its pointer to syscall() (lib.sh, syscall_slot): the escape_*
# kernels' input, the same for every worker of that binary whatever its address layout.
syscall_address() {
  measure SYSCALL "where the loader keeps syscall()" bash -c "$(declare -f syscall_slot); syscall_slot '$BIN/xcargo-loader'"
}

# adversary CARGO ENTRY STATUS REPS [MESSAGE] [--u64 N]
adversary() {
  local cargo=$1 entry=$2 status=$3 reps=$4 message=${5:-} before=$failures
  shift 5 2>>"$DISCARD" || shift $#
  expect 0 "^$entry: $reps/$reps $status as expected, 0 wrong, 0 lost, 0 not served" -- \
    "$BIN/xcargo-adversary" --to "$NODE" --cargo "$cargo" --entry "$entry" --expect "$status" --reps "$reps" \
    --message "$message" "$@"
  # The node's side of a failure (why a worker stopped, say), before the next cluster replaces its log.
  [ "$failures" -eq "$before" ] || grep -v 'worker restarted\|accepted\|connection from' "$XCARGO_CLUSTER_DIR/node-0.log" | tail -25 | sed 's/^/    node-0 | /'
}

# Kernels the worker survives: its descriptors and memory must not grow over REPS runs.
# killed_clients N: clients killed in the middle of an invocation (once sent, while the
# kernel runs), each followed at once by a client that must get its own reply, not the dead
# one's (xcargo-adversary --vanish). Killed in the middle of a send over shared memory, a
# client would wedge the worker's receive queue: the boundary test covers that.
killed_clients() {
  expect 0 "^burn: $1/$1 killed as expected, 0 wrong, 0 lost" -- \
    "$BIN/xcargo-adversary" --to "$NODE" --cargo faults.xcargo --entry burn --u64 200 --reps "$1" --vanish
}
# Warm up: first allocations, code, the connection to the peer node.
adversary adv.xcargo alloc_all ok 20
adversary faults.xcargo huge_reply reply_too_large 20
adversary adv.xcargo cycle hop_limit 20
killed_clients 3
sleep 1
measure w "the worker's pid" worker
measure fds0 "the worker's descriptors" fewest_fds "$w"
measure rss0 "the worker's memory" proc_rss_kb "$w"
adversary adv.xcargo alloc_all ok "$REPS"
"$X" run adv.xcargo --entry alloc_all --result u64 --to "$NODE" > got.txt 2>>"$DISCARD"
check "xc_alloc stops at the 1 GiB budget per invocation" grep -qx 1024 got.txt
adversary faults.xcargo huge_reply reply_too_large "$REPS" 'past the limit of 1048576 bytes'
adversary adv.xcargo cycle hop_limit "$REPS" 'forwarded 21 times'
killed_clients "$((REPS / 20))"
adversary adv.xcargo alloc_all ok 10
sleep 1
check "the same worker served all of it" test "$(worker)" = "$w"
if measure fds1 "the worker's descriptors" fewest_fds "$w" && measure rss1 "the worker's memory" proc_rss_kb "$w"; then
  echo "worker: $fds0 -> $fds1 descriptors, RSS $rss0 -> $rss1 kB over $REPS repetitions of each and $((REPS / 20)) killed clients"
  check "no descriptors leak in the worker ($fds0 -> $fds1)" test "$fds1" -le "$fds0"
  if [ -z "$ASAN" ]; then  # AddressSanitizer keeps freed memory in quarantine: no measure there
    check "the worker's memory grows less than 10 MB ($rss0 -> $rss1 kB)" test "$((rss1 - rss0))" -lt 10240
  fi
fi

# Millisecond kernels, 4 in flight, on a busy machine: a leader held up at the start of a
# kernel is deposed after 1 ms and a follower leads. The deposed one once still sent its lanes'
# kicks then, into the TCP endpoint the new leader was writing a reply into: the client got a
# garbled message and UCX aborted it (3 runs in 4 beside a busy loop).
timeout 120 bash -c 'while :; do :; done' &
busy=$!
expect 0 '3000 runs in' -- "$X" run faults.xcargo --entry burn --arg u64:1 --result u64 --to "$NODE" --repeat 3000 --inflight 4
kill "$busy"

# The node's private key is nowhere in the worker's memory (with it, a kernel could prove
# node 0's key from elsewhere and have a forward accepted): the key service, a process of its
# own that is not dumpable, holds it, and signs the handshakes' proofs for the workers.
syscall_address
python3 - "$XCARGO_CLUSTER_DIR/node-0.key" > masked.key <<'PY'
import subprocess, sys  # the private key's 32 bytes, then the public key's, each XORed with 0x5a
der = lambda *a: subprocess.run(['openssl', 'pkey', '-in', sys.argv[1], *a, '-outform', 'DER'], check=True,
                                capture_output=True).stdout[-32:]
sys.stdout.buffer.write(bytes(b ^ 0x5a for b in der() + der('-pubout')))
PY
# A loader whose stderr is a file (as scripts/cluster starts them) gives its workers a pipe of
# their own, which the log copier reads: a kernel truncated the log file it had inherited.
lines_before=$(wc -l < "$XCARGO_CLUSTER_DIR/node-0.log")
expect 0 '^-1$' -- "$X" run adv.xcargo --entry escape_truncate_log --arg "u64:$SYSCALL" --result i64 --to "$NODE"
check "the log file keeps its lines ($lines_before before)" test "$(wc -l < "$XCARGO_CLUSTER_DIR/node-0.log")" -ge "$lines_before"
check "the worker's stderr is a pipe" bash -c "readlink /proc/$(worker)/fd/2 | grep -q '^pipe:'"
# Nor terminal control: the copier writes a worker's control bytes as '?'.
expect 0 '^[1-9][0-9]*$' -- "$X" run adv.xcargo --entry escape_terminal --arg "u64:$SYSCALL" --result i64 --to "$NODE"
eventually 10 "a kernel's line reaches the log" grep -q 'xcargo-terminal-marker' "$XCARGO_CLUSTER_DIR/node-0.log"
check "without its terminal control" bash -c "grep 'xcargo-terminal-marker' '$XCARGO_CLUSTER_DIR/node-0.log' | grep -q '^?\]52;c;eGNhcmdv??\[2J xcargo-terminal-marker$' && ! grep -q \$'\\x1b' '$XCARGO_CLUSTER_DIR/node-0.log'"
expect 0 '^0$' -- "$X" run adv.xcargo --entry escape_find_key --arg "u64:$SYSCALL" --input masked.key --result i64 --to "$NODE"
KEYS=$(pgrep -x xcargo-keys -P "$SUPERVISOR")
check "the key service runs beside the workers" test -n "$KEYS"
# The worker's SOCK_SEQPACKET sockets: its connection to the key service, and with shared
# memory its channel to the same-host door's keeper (a loader whose UCX has no System V
# shared memory opens no door).
SEQPACKETS=1
[ "$TLS" = shm ] && SEQPACKETS=2
# A kernel that shuts the connection down for writing: the service drops it instead of
# spinning (it is idle: a few ticks of CPU at most in 2 s, not 200).
expect 0 "^$SEQPACKETS\$" -- "$X" run adv.xcargo --entry escape_shutwr_keys --arg "u64:$SYSCALL" --result i64 --to "$NODE"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ticks0=$(cpu_ticks "$KEYS")
sleep 2
check "the key service does not spin on a connection shut down for writing" test "$(( $(cpu_ticks "$KEYS") - ticks0 ))" -le 20
eventually 30 "a client is served after the kernel shut it down" "$X" run faults.xcargo --entry ok --to "$NODE"
# No Unix socket of a kernel's own, to pass that connection to a process outside the loader.
expect 0 '^-1$' -- "$X" run adv.xcargo --entry escape_unix_socket --arg "u64:$SYSCALL" --result i64 --to "$NODE"
expect 0 '^-1$' -- "$X" run adv.xcargo --entry escape_open --arg "u64:$SYSCALL" --arg u64:0 --arg "str:/proc/$KEYS/mem" \
  --result i64 --to "$NODE"

# Kernels after which the worker is replaced, on loaders with the short limit; the supervisor
# must not leak across restarts (measured after a first restart has warmed it up).
"$SRC/scripts/cluster" down >>"$DISCARD"
cluster_up "$RESTART_LIMIT"
adversary faults.xcargo segfault crashed 1 'signal 11'
# The loader's first standby starts a second after it listens: counted from then on.
eventually 20 "the supervisor runs a standby worker" pgrep -x xcargo-standby -P "$SUPERVISOR"
measure sfds0 "the supervisor's descriptors" fewest_fds "$SUPERVISOR"
KEYS=$(pgrep -x xcargo-keys -P "$SUPERVISOR")
measure kfds0 "the key service's descriptors" fewest_fds "$KEYS"
measure srss0 "the supervisor's memory" proc_rss_kb "$SUPERVISOR"
adversary faults.xcargo segfault crashed "$RESTART_REPS" 'signal 11'
adversary faults.xcargo trap crashed "$RESTART_REPS" 'signal 4'
adversary faults.xcargo spin timeout "$RESTART_REPS" "time limit of $RESTART_LIMIT s"
# Two kernels run inline in one lane batch (over shm), each for 0.6 of the limit: each runs
# within its own: the second is neither timed out nor its client blamed for the first one's time.
for i in 1 2 3; do
  expect 0 '^ok ok$' -- "$BIN/xcargo-batch-limit" --to "$NODE" --cargo faults.xcargo --limit-s "$RESTART_LIMIT"
done
# A push runs no kernel: one that waits for its compile behind another cargo's slow -O2
# compile is not timed out (the attack that found this had another user's push refused as
# 'ran past the time limit', and the worker restarted under every client). Unoptimized
# bitcode of many inlined loops: its quick tier is fast, its -O2 compile takes seconds.
python3 - > slowo2.c <<'PY'
print('#include <xcargo/kernel.h>')
n = 60
for i in range(n):
    print(f'static inline __attribute__((always_inline)) int64_t f{i}(int64_t x, int64_t y) {{ int64_t a[16]; '
          f'for (int k = 0; k < 16; k++) a[k] = x * {i + 2} + k * y; '
          f'for (int r = 0; r < 8; r++) for (int k = 0; k < 16; k++) '
          f'a[k] = a[(k * 7 + r) & 15] ^ (a[k] * {2 * i + 3}) + (a[(k + 1) & 15] >> (r + 1)); '
          f'int64_t s = 0; for (int k = 0; k < 16; k++) s += a[k] * (k + {i}); return s; }}')
print('XC_ENTRY int big(xc_ctx *ctx, const void *in, size_t n) { int64_t x = (int64_t)n, s = 0;')
for i in range(n):
    print(f'  s += f{i}(x + {i}, s);')
print('  return xc_reply(ctx, &s, sizeof s); }')
PY
"$X" build slowo2.c -O 0 -t bitcode --name slowo2 -o slowo2.xcargo --key "$KEY" 2>>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -t bitcode --name second -o second.xcargo --key "$KEY" 2>>"$DISCARD"
WORKER_BEFORE=$(worker)
expect 0 'pushed' -- "$X" push slowo2.xcargo --to "$NODE"
expect 0 'pushed' -- "$X" push second.xcargo --to "$NODE"
check "a push waiting behind another's slow compile did not restart the worker" test "$(worker)" = "$WORKER_BEFORE"
adversary adv.xcargo wild_code crashed "$RESTART_REPS" 'signal 11'
adversary adv.xcargo wild_ctx crashed "$RESTART_REPS" 'signal 11'
adversary adv.xcargo wild_far crashed "$RESTART_REPS" 'signal 11'
for call in open:openat socket:socket execve:execve ptrace:ptrace getpid:getpid; do
  adversary adv.xcargo "sys_${call%%:*}" sandbox "$RESTART_REPS" "made the system call ${call#*:} itself"
done
check "nothing ran: no file made by the execve kernel" test ! -e /tmp/xcargo-pwned
# Through the C library's syscall() (its address in the worker, as a kernel finds it from
# &memcpy): the allow-list stops what reaches other processes; the rest meets the file rules
# and the supervisor's protection: syscall() returns -1.
syscall_address
for call in vm_read:process_vm_readv kill:kill ptrace:ptrace; do
  adversary adv.xcargo "escape_${call%%:*}" sandbox "$RESTART_REPS" "made the system call ${call#*:} through library code" --u64 "$SYSCALL"
done
# A kernel that blocks the time-out signal and spins ends its worker once the grace has
# passed: the runs of its lane batch that answered before it are in the log's sums all the
# same.
# The requests behind it, still in the lane, are answered `restarting`, and those its client
# writes after the node's last look are marked never read (wire-protocol.md 8.4): the client
# library sends them all again to the next worker (none fails with the lost connection, since
# none ran). 60 behind it, with 64 in flight: the
# client sends more as the replies before the stuck one come in.
"$BIN/xcargo-batch-limit" --to "$NODE" --cargo adv.xcargo --hang 30 --after 60 --syscall "$SYSCALL" > hung.out 2>&1
HUNG_OK=$(sed -n 's/^ok runs: //p' hung.out)
check "the batch before the hung kernel answered (${HUNG_OK:-no} of 12 warm-ups and 29 runs ok)" test "${HUNG_OK:-0}" -ge 32
check "the requests behind the hung kernel ran on the next worker ($(sed -n 's/^after it: //p' hung.out))" grep -q '^after it: 60 ok, 0 otherwise$' hung.out ||
  sed 's/^/    | /' hung.out
eventually 30 "a worker serves after the kernel that blocked the time-out" "$X" run faults.xcargo --entry ok --to "$NODE"
HUNG_RUNS=$(( ${HUNG_OK:-0} + $(sed -n 's/^after it: \([0-9]*\) ok.*/\1/p' hung.out | grep . || echo 0) ))
eventually 20 "the log counts all $HUNG_RUNS runs that answered, before it and after it" python3 -c "
import re, sys
n = 0
for l in open('$XCARGO_CLUSTER_DIR/node-0.log'):
    if 'accepted invoke: ' in l and '/hang_blocked -> ' in l:
        m = re.search(r'-> (\d+) more runs?', l)
        n += int(m.group(1)) if m else 1
sys.exit(0 if n == int('$HUNG_RUNS') else 1)"
LANDLOCK=$(grep -o 'files: Landlock ABI [0-9]*' "$XCARGO_CLUSTER_DIR/node-0.log" | head -1)
for entry in proc_mem read_file write_file; do
  if [ -z "$LANDLOCK" ] && [ "$entry" != proc_mem ]; then
    echo "skipped: escape_$entry (this kernel has no Landlock: the worker's files are not restricted)"
    continue
  fi
  expect 0 '^-1$' -- "$X" run adv.xcargo --entry "escape_$entry" --arg "u64:$SYSCALL" --result i64 --to "$NODE"
done
check "nothing written by the escape kernels" test ! -e /tmp/xcargo-escaped
# No thread of a kernel's own (the attack that found this kept one logging after its key was
# revoked): clone is refused once the worker has started its threads.
threads0=$(ls "/proc/$(worker)/task" | wc -l)
expect 0 '^-1$' -- "$X" run adv.xcargo --entry escape_thread --arg "u64:$SYSCALL" --result i64 --to "$NODE"
check "the worker has no more threads than before" test "$(ls "/proc/$(worker)/task" | wc -l)" -le "$threads0"
# Signals to its own worker: kill() and the signals the worker does not send itself are
# refused (SIGTERM would stop the worker, SIGSTOP freeze it for good, SIGHUP turn on UCX's
# debug log); what stays allowed is made harmless (escape_signals in adversary.c).
adversary adv.xcargo escape_term_self sandbox "$RESTART_REPS" "made the system call kill through library code" --u64 "$SYSCALL"
adversary adv.xcargo escape_sigstop sandbox 3 "made the system call tgkill through library code" --u64 "$SYSCALL"
adversary adv.xcargo escape_setsig sandbox 3 "made the system call fcntl through library code" --u64 "$SYSCALL"
expect 0 '^-1$' -- "$X" run adv.xcargo --entry escape_signals --arg "u64:$SYSCALL" --result i64 --to "$NODE"
expect 3 'crashed: the kernel crashed: signal 11' -- "$X" run faults.xcargo --entry crash_if --arg u64:1 --to "$NODE"
# A kernel's own sockets (loader/SECURITY.md, "The network, from a kernel"). Without
# trusted-network (shm here) the worker's connections are all made by the supervisor's
# keepers: a kernel's socket (IPv4, IPv6, netlink, packet), connect or bind is refused. With
# it (tcp here: UCX's tcp connects at run time) a kernel reaches any TCP address this host
# reaches, a loopback listener here, and nothing else: no port bound, no datagram socket.
if [ "$TLS" = shm ]; then
  for e in escape_socket4 escape_socket6 escape_netlink escape_packet; do
    adversary adv.xcargo "$e" sandbox 1 "made the system call socket through library code" --u64 "$SYSCALL"
  done
  adversary adv.xcargo escape_connect sandbox 1 "made the system call connect through library code" --u64 "$SYSCALL"
  adversary adv.xcargo escape_bind sandbox 1 "made the system call bind through library code" --u64 "$SYSCALL"
  adversary adv.xcargo escape_pass_fd sandbox 1 "made the system call sendmsg through library code" --u64 "$SYSCALL"
else
  python3 - reach.port reach.out <<'PY' &
import socket, sys
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1); s.settimeout(60)
open(sys.argv[1], 'w').write(str(s.getsockname()[1]))
c, _ = s.accept(); c.settimeout(10)
open(sys.argv[2], 'wb').write(c.recv(64))
PY
  pids+=($!)
  wait_file reach.port
  expect 0 '^0$' -- "$X" run adv.xcargo --entry escape_reach --arg "u64:$SYSCALL" --arg "u64:$(cat reach.port)" --result i64 --to "$NODE"
  eventually 10 "with trusted-network a kernel reaches a TCP listener of this host" grep -q reached reach.out
  # ... but binds no TCP port (a free one here: Landlock refuses it) and opens no UDP socket.
  FREE=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  expect 0 '^-1$' -- "$X" run adv.xcargo --entry escape_bind4 --arg "u64:$SYSCALL" --arg "u64:$FREE" --result i64 --to "$NODE"
  adversary adv.xcargo escape_udp sandbox 1 "made the system call socket through library code" --u64 "$SYSCALL"
fi
# In every mode: no TCP connection made by sendto's MSG_FASTOPEN (which needs no connect()).
adversary adv.xcargo escape_fastopen sandbox 1 "made the system call sendto through library code" --u64 "$SYSCALL"
# Other processes' limits, and prctl beyond naming threads: refused (with them a kernel could
# kill the supervisor by a file size limit of 0, put a seccomp filter on an executor's thread,
# or leave later pushes no executable memory).
adversary adv.xcargo escape_prlimit sandbox 3 "made the system call prlimit64 through library code" --u64 "$SYSCALL"
check "the supervisor's file size limit is untouched" grep -Eq '^Max file size +unlimited' "/proc/$SUPERVISOR/limits"
expect 0 '^-2$' -- "$X" run adv.xcargo --entry escape_prctl --arg "u64:$SYSCALL" --result i64 --to "$NODE"
"$X" build "$SRC/examples/hello/hello.c" -t "$(uname -m)" --name after_prctl -o after_prctl.xcargo --key "$KEY" 2>>"$DISCARD"
expect 0 '^42$' -- "$X" run after_prctl.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"
adversary adv.xcargo escape_prlimit_self sandbox 3 "made the system call prlimit64 through library code" --u64 "$SYSCALL"
# The compile service's connection shut down by a kernel: the worker ends in order, and the
# next worker compiles (before: every later bitcode push refused, until some other restart).
expect 0 '^[1-9][0-9]*$' -- "$X" run adv.xcargo --entry escape_cut_compiler --arg "u64:$SYSCALL" --result i64 --to "$NODE"
"$X" build "$SRC/examples/hello/hello.c" -t bitcode --name after_cut -o after_cut.xcargo --key "$KEY" 2>>"$DISCARD"
eventually 60 "a bitcode push compiles after a kernel cut the compile service's connection" \
  "$X" run after_cut.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"
# (It cut the key service's connection too, the first to be missed: either may be the reason.)
# The old worker's line reaches the file through the log copier, which may still hold it
# when the standby already serves (on a busy machine).
# The node's lines about its workers, after a failed check of their ends.
worker_ends() { grep -E "worker|ending|gone|standby|took over" "$XCARGO_CLUSTER_DIR/node-0.log" | tail -"${1:-15}" | sed 's/^/    | /'; }
GONE="the (compile service's connection|key service's connection|same-host door's channel) is gone"
eventually 20 "the worker said why it ended" grep -Eq "$GONE" "$XCARGO_CLUSTER_DIR/node-0.log" ||
  worker_ends
# The key service's connection (and the door's channel, if any) alone: the next hello, or
# at once the door's channel, ends the worker in order, and the standby, with connections of
# its own, answers from then on.
WHY="the key service's connection is gone"
[ "$SEQPACKETS" = 2 ] && WHY="the same-host door's channel is gone"
before=$(grep -c "$WHY" "$XCARGO_CLUSTER_DIR/node-0.log")
expect 0 "^$SEQPACKETS\$" -- "$X" run adv.xcargo --entry escape_cut_keys --arg "u64:$SYSCALL" --result i64 --to "$NODE"
eventually 30 "a client is served after a kernel cut the key service's connection" \
  "$X" run after_cut.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"
eventually 20 "the worker said why it ended ($WHY)" bash -c "test \"\$(grep -c \"$WHY\" '$XCARGO_CLUSTER_DIR/node-0.log')\" -gt $before" ||
  worker_ends
# A System V segment a kernel made and left (it outlived the loader, outside every memory
# limit): the supervisor removes it within seconds.
measure SEGMENT "a segment a kernel left" "$X" run adv.xcargo --entry escape_sysv_leak --arg "u64:$SYSCALL" --result i64 --to "$NODE"
check "the kernel made a segment (id $SEGMENT)" test "$SEGMENT" -ge 0
eventually 30 "the supervisor removed the segment the kernel left" bash -c "! awk '{print \$2}' /proc/sysvipc/shm | grep -qx '$SEGMENT'"
# A kernel that makes its worker exit 0 (exit_group) does not stop the loader: the worker is
# replaced, and the supervisor says so.
"$X" run adv.xcargo --entry escape_exit0 --arg "u64:$SYSCALL" --to "$NODE" > escape_exit0.txt 2>&1
expect 0 '^66696e65$' -- "$X" run faults.xcargo --entry ok --to "$NODE"  # "fine"
check "the supervisor outlived the worker that exited 0" kill -0 "$SUPERVISOR"
# An orderly end waits for running kernels only within their time limit: an admin's SIGTERM
# while a kernel spins (a kernel that sent its own worker SIGTERM, then spun, held the worker
# for good, its port open and served by nobody).
"$X" run faults.xcargo --entry spin --to "$NODE" > spin.txt 2>&1 &
spinner=$!
sleep 0.2  # the kernel runs (if not yet, it spins in the next worker instead: no hang either way)
kill -TERM "$(worker)"
wait "$spinner"
check "the spinning kernel's client is told (time limit, or its worker gone)" grep -Eq 'time limit|lost the connection' spin.txt
eventually 60 "a worker whose orderly end waited for a spinning kernel is replaced" "$X" run faults.xcargo --entry ok --to "$NODE"
# A worker stopped by a signal (SIGSTOP: the sandbox now refuses a kernel's routes to it, the
# test sends it) serves nobody: the supervisor kills it, and the standby serves.
eventually 30 "a worker serves (the one before may still be replacing a killed one)" worker
kill -STOP "$(worker)"
eventually 30 "a stopped worker is killed and replaced" grep -q 'worker stopped by signal 19' "$XCARGO_CLUSTER_DIR/node-0.log"
eventually 30 "clients are served after a worker was stopped" "$X" run faults.xcargo --entry ok --to "$NODE"
# A worker that ends in order (SIGTERM: an admin's, the loader stopping) finishes the kernels
# it runs and answers what it did not run `restarting`: a client with requests in flight
# across the stop sends those again to the next worker and loses none (the run that found
# this lost its connection: "Connection reset by remote peer").
# Its runs burn a millisecond each until the test opens their gate (after the stop), then end
# at once: the run is surely still going at the stop, and then ends soon.
"$X" run faults.xcargo --entry burn_until_open --arg u64:62 --result u64 --to "$NODE" --repeat 30000 --inflight 4 > span.txt 2> span.err &
span=$!
sleep 1  # under way: requests in flight across the stop (else the stop only precedes the run)
check "the run still runs at the stop" kill -0 "$span"
kill -TERM "$(worker)"
eventually 60 "the gate opens after the stop" "$X" run faults.xcargo --entry open_gate --arg u64:62 --to "$NODE"
wait "$span"
rc=$?
check "a run whose requests spanned the worker's orderly stop lost none (exit $rc: $(tail -2 span.err | tr '\n' ' '))" test "$rc" -eq 0
eventually 10 "the supervisor logged those workers' ends and replaced them" \
  lines_at_least 2 'worker stopped: exited with status 0; (replaced by its standby|restarting it)' "$XCARGO_CLUSTER_DIR/node-0.log" ||
  grep -E 'worker|standby' "$XCARGO_CLUSTER_DIR/node-0.log" | tail -6 | sed 's/^/  its log: /'
# A kernel that closes its worker's listening sockets (the attack that found this left a node
# deaf to new clients for good): the worker's probe finds that no new client is answered, and
# the worker is replaced. Without trusted-network (shm here) the worker has none to close:
# its clients come through the supervisor's door.
if [ "$TLS" = tcp ]; then
  expect 0 '^[1-9][0-9]*$' -- "$X" run adv.xcargo --entry escape_deafen --arg "u64:$SYSCALL" --result i64 --to "$NODE"
  eventually 90 "a worker whose listening sockets a kernel closed is replaced" \
    grep -q "no new connection to the worker was answered" "$XCARGO_CLUSTER_DIR/node-0.log"
else
  expect 0 '^0$' -- "$X" run adv.xcargo --entry escape_deafen --arg "u64:$SYSCALL" --result i64 --to "$NODE"
fi
eventually 60 "new clients are served again" "$X" run faults.xcargo --entry ok --to "$NODE"
# Junk in the kept-cargos table (the attack that found this made standbys read 32 x 256 MiB
# and die of it, and a crash then cost 30 s): the next standby reads at most 256 MiB of it,
# refuses it once, and the node serves. The junk claims the newest entries, so the table
# shows no other cargo until a push replaces it: the worker crashes through the cargo it
# already runs, and no request comes (its client would push again and evict the junk) until
# the standby that starts after the crash has read the table.
expect 0 '^32$' -- "$X" run adv.xcargo --entry escape_junk_kept --arg "u64:$SYSCALL" --result i64 --to "$NODE"
expect 3 'crashed' -- "$X" run adv.xcargo --entry wild_ctx --to "$NODE"
eventually 60 "the next standby refused the junk" grep -q 'refused a kept cargo [0-9a-f]*: not an xcargo file' "$XCARGO_CLUSTER_DIR/node-0.log" ||
  grep -E 'standby|worker|kept' "$XCARGO_CLUSTER_DIR/node-0.log" | tail -8 | sed 's/^/  its log: /'
expect 0 '^66696e65$' -- "$X" run faults.xcargo --entry ok --to "$NODE"

if measure sfds1 "the supervisor's descriptors" fewest_fds "$SUPERVISOR" &&
   measure srss1 "the supervisor's memory" proc_rss_kb "$SUPERVISOR"; then
  echo "supervisor: $sfds0 -> $sfds1 descriptors, RSS $srss0 -> $srss1 kB over $((RESTART_REPS * 14)) restarts"
  check "no descriptors leak in the supervisor ($sfds0 -> $sfds1)" test "$sfds1" -le "$sfds0"
  # Under ASan freed memory waits in its quarantine (16 MB in the tests: tests/CMakeLists.txt)
  # before reuse, and its allocator maps a region per size class as churn reaches it: RSS
  # grows with the supervisor's churn (a start record per worker and compile service, the
  # door keeper's dials) by 20 to 26 MB over these restarts, without a leak. The
  # uninstrumented pass holds the 1 MB line; LeakSanitizer checks leaks at every exit.
  rss_limit=1024
  [ -n "$ASAN" ] && rss_limit=49152
  check "the supervisor's memory grows less than $rss_limit kB ($srss0 -> $srss1 kB)" test "$((srss1 - srss0))" -lt "$rss_limit"
fi
# Each worker's connection to the key service ends with it (the supervisor says so).
if measure kfds1 "the key service's descriptors" fewest_fds "$KEYS"; then
  check "no descriptors leak in the key service ($kfds0 -> $kfds1)" test "$kfds1" -le "$kfds0"
fi
eventually 10 "the sandbox kills are logged with the call" grep -q 'the sandbox stopped the kernel: it made the system call execve itself' \
  "$XCARGO_CLUSTER_DIR/node-0.log"

# The rest needs no short limit: a generous one, so that a first invocation on a busy machine
# (its object linked from the cache after a restart) is never taken for a time-out (seen with
# 0.5 s in a fresh-clone run beside another adversary test).
"$SRC/scripts/cluster" down > down.txt
cluster_up "$FINISH_LIMIT"
syscall_address
# Recursion until the stack runs out: it faults in the thread's 8 MiB of stack first, 20 to
# 60 ms of a busy machine's time, which more load stretched past the restart phase's 0.5 s.
adversary adv.xcargo stack_overflow crashed "$RESTART_REPS" 'signal 11'

# The JIT cache: only the compile service writes it (the attack that found this overwrote
# another cargo's entry, which a later loader ran as a disk cache hit). A bitcode-only victim
# is compiled into it; a kernel can neither change its entry nor plant one; after a worker
# restart the victim comes from the cache with its own answer.
CACHE=$XCARGO_CLUSTER_DIR/cache-0/jit
"$X" build "$SRC/examples/hello/hello.c" -t bitcode --name victim -o victim.xcargo --key "$KEY" 2> build.err
expect 0 '^42$' -- "$X" run victim.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"
# Its -O2 object reaches the cache after the push (its quick tier is never kept).
eventually 60 "the victim's -O2 object is in the cache" grep -q 'tiered up: victim ' "$XCARGO_CLUSTER_DIR/node-0.log"
ls "$CACHE"/*.o > entries.txt 2>&1
measure VICTIM_ENTRY "the victim's cache entry" head -1 entries.txt
sum0=$(sha256sum < "$VICTIM_ENTRY")
if [ -n "$LANDLOCK" ]; then
  expect 0 '^-1$' -- "$X" run adv.xcargo --entry escape_open --arg "u64:$SYSCALL" --arg "u64:$((01 | 01000))" \
    --arg "str:$VICTIM_ENTRY" --result i64 --to "$NODE"  # O_WRONLY|O_TRUNC
  expect 0 '^-1$' -- "$X" run adv.xcargo --entry escape_open --arg "u64:$SYSCALL" --arg "u64:$((01 | 0100))" \
    --arg "str:$CACHE/planted.o" --result i64 --to "$NODE"  # O_WRONLY|O_CREAT
fi
check "the victim's cache entry is unchanged" test "$(sha256sum < "$VICTIM_ENTRY")" = "$sum0"
check "no cache entry was planted" test ! -e "$CACHE/planted.o"
check "the worker holds no descriptor of the cache" bash -c "! ls -l /proc/$(worker)/fd | grep -q cache-0"
expect 3 'crashed' -- "$X" run faults.xcargo --entry crash_if --arg u64:1 --to "$NODE"
expect 0 '^42$' -- "$X" run victim.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"
eventually 10 "the restarted worker took the victim from the cache" \
  grep -Eq '(accepted push: |loaded kept cargo ).*victim.*disk cache hit' "$XCARGO_CLUSTER_DIR/node-0.log"

# Hostile bitcode, signed by a trusted key: refused with its reason; the worker that holds
# the victim is not replaced and the victim still answers. `xcargo build` refuses it first.
"$BIN/xcargo-hostile-bitcode" asm.xcargo "$KEY" inline-asm
expect 2 "function 'run' contains inline assembly, which loaders refuse in bitcode" -- "$X" build asm.xcargo.ll -t bitcode -o asm-built.xcargo
WORKER_BEFORE=$(worker)
# KIND:EXIT:MESSAGE (exit 1: the class 'malformed', a verification failure)
for kind in inline-asm:3:"function 'run' contains inline assembly" module-asm:3:'the module \(module-level asm\) contains inline assembly' \
            invalid-ir:1:'the LLVM IR verifier rejects the module' va-arg:3:"function 'sum' reads variadic arguments" \
            layout:3:'the type %s = type \{ i8, <4 x float> \} is laid out differently once the bitcode is retargeted: member 1 at offset 4 where x86_64 puts it at 16' \
            fatal:3:'LLVM stopped compiling it: Cannot select'; do
  name=${kind%%:*} rest=${kind#*:}
  "$BIN/xcargo-hostile-bitcode" "hostile-$name.xcargo" "$KEY" "$name"
  expect "${rest%%:*}" "refused the cargo: .*${rest#*:}" -- "$X" run "hostile-$name.xcargo" --entry run --to "$NODE"
done
# A 7 GiB static array: its object is refused at build; its bitcode, which only the loader
# compiles, is refused before linking (linking zeroes it: seconds of work, then a time-out).
expect 1 'needs more than 64 MiB of memory once loaded' -- "$X" build "$SRC/tests/kernels/bigbss.c" -t x86_64 -o big.xcargo
"$X" build "$SRC/tests/kernels/bigbss.c" -t bitcode -o bigbc.xcargo --key "$KEY" 2> build.err || cat build.err
expect 1 'refused the cargo: .*needs more than 64 MiB of memory once loaded' -- "$X" push bigbc.xcargo --to "$NODE"
check "no hostile bitcode replaced the worker" test "$(worker)" = "$WORKER_BEFORE"
expect 0 '^42$' -- "$X" run victim.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"

# Revoking a key removes what was compiled from cargos only it signed, within a second or so.
"$X" keygen -o "$XCARGO_CLUSTER_DIR/doomed" > keygen.txt
cp "$XCARGO_CLUSTER_DIR/doomed.pub" "$XCARGO_CLUSTER_DIR/trust/"
"$X" build "$SRC/examples/hello/hello.c" -t bitcode --name doomed -o doomed.xcargo --key "$XCARGO_CLUSTER_DIR/doomed" 2> build.err
eventually 10 "the doomed cargo runs once the worker trusts its key" "$X" run doomed.xcargo --entry add --arg i64:2 --arg i64:40 --to "$NODE"
eventually 60 "the doomed cargo's -O2 object is kept" grep -q 'tiered up: doomed ' "$XCARGO_CLUSTER_DIR/node-0.log"
ls "$CACHE"/*.o > entries.txt
measure ENTRIES "cache entries with the doomed key's" bash -c "wc -l < entries.txt"
awk '/^key id/ {print $3 "  # revoked by the test"}' keygen.txt > "$XCARGO_CLUSTER_DIR/trust/revoked.txt"
eventually 10 "the revoked key's cache entry is removed" bash -c "test \$(ls $CACHE/*.o | wc -l) -eq $((ENTRIES - 1))"
eventually 10 "the removal is logged" grep -q 'disk cache: removed 1 entries compiled from cargos no trusted key signs' "$XCARGO_CLUSTER_DIR/node-0.log"
check "the victim's entry stays" test -e "$VICTIM_ENTRY"
rm "$XCARGO_CLUSTER_DIR/trust/revoked.txt" "$XCARGO_CLUSTER_DIR/trust/doomed.pub"
expect 0 '^42$' -- "$X" run victim.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"

check "the worker's sandbox is on (seccomp filters)" grep -q '^Seccomp:[[:space:]]*2' "/proc/$(worker)/status"
check "the worker cannot gain privileges" grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$(worker)/status"
if [ "$(id -u)" = 0 ]; then
  check "the worker holds no capabilities" grep -q '^CapEff:[[:space:]]*0*$' "/proc/$(worker)/status"
  check "the worker cannot regain capabilities" grep -q '^CapBnd:[[:space:]]*0*$' "/proc/$(worker)/status"
fi
if [ -z "$ASAN" ]; then  # sanitizer builds need terabytes of address space
  check "the worker's address space is limited (2 GiB)" grep -q '^Max address space *2147483648 ' "/proc/$(worker)/limits"
fi
expect 0 '^fine$' -- "$X" run faults.xcargo --entry ok --result str --to "$NODE"

# Started as root with --user, the worker runs as that user, with the same confinement. Its
# clients on this machine cannot attach its shared memory, nor it theirs: they meet it over
# UCX's tcp (a trusted network, scripts/cluster --tls tcp) or its TLS front door.
if [ "$(id -u)" = 0 ] && id nobody > nobody.txt 2>&1; then
  "$SRC/scripts/cluster" down > down.txt
  expect 2 'cache-0: belongs to uid 0, but the worker runs as nobody' -- "$SRC/scripts/cluster" up 1 --tls tcp --bin "$BIN" -- --user nobody
  rm -rf "$XCARGO_CLUSTER_DIR/cache-0"  # root's; the loader makes a new one for nobody
  expect 2 'the worker \(uid 65534\) cannot reach .*/trust: Permission denied' -- \
    "$SRC/scripts/cluster" up 1 --tls tcp --bin "$BIN" -- --user nobody  # this test's directory is root's alone
  chmod 755 "$TMP"
  expect 0 '1 loaders up' -- "$SRC/scripts/cluster" up 1 --tls tcp --bin "$BIN" -- --user nobody --timeout "$FINISH_LIMIT"
  SUPERVISOR=$(awk '{print $1}' "$XCARGO_CLUSTER_DIR/pids")
  # Its UCX listener, said on purpose (it has no door: its worker shares no memory with root).
  NODE=ucx://$(grep address "$XCARGO_CLUSTER_DIR/cluster.yaml" | head -1 | awk '{print $2}')
  check "the log says whom the worker runs as" grep -q 'worker runs as nobody' "$XCARGO_CLUSTER_DIR/node-0.log"
  expect 0 '^fine$' -- "$X" run faults.xcargo --entry ok --result str --to "$NODE"
  check "the worker runs as nobody" test "$(ps -o user= -p "$(worker)")" = nobody
  check "the supervisor stays root" test "$(ps -o user= -p "$SUPERVISOR")" = root
  check "the cache belongs to nobody" test "$(stat -c %U "$XCARGO_CLUSTER_DIR/cache-0")" = nobody
  syscall_address
  adversary adv.xcargo escape_vm_read sandbox 1 "made the system call process_vm_readv through library code" --u64 "$SYSCALL"
  [ -n "$LANDLOCK" ] && expect 0 '^-1$' -- "$X" run adv.xcargo --entry escape_write_file --arg "u64:$SYSCALL" --result i64 --to "$NODE"
  check "nothing written by the escape kernels" test ! -e /tmp/xcargo-escaped
fi
finish
