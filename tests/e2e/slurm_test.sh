#!/usr/bin/env bash
# dist/xcargo-slurm in a real Slurm job: the test starts its own munged, slurmctld and slurmd
# (one node, this machine, at 127.0.0.1; everything in TMP), then runs a 3-task job that
# starts 3 loaders with xcargo-slurm, runs a kernel that forwards itself across them, stops
# them, starts them again (its own --trust and --clients) and leaves them to the end of the
# job; and the ways a start fails: a loader that cannot listen, loaders never ready, an
# interrupted start. After the job, none of its loaders may be left.
# usage: slurm_test.sh XCARGO SOURCE_DIR
X=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # the job runs elsewhere: absolute paths
SRC=$(cd "$2" && pwd)
BIN=$(dirname "$X")
LOADER=$BIN/xcargo-loader
XS=$SRC/dist/xcargo-slurm
source "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
export PATH=$PATH:/usr/sbin:/sbin  # munged, slurmctld, slurmd

if [ "$(id -u)" -ne 0 ]; then
  # slurmd starts every job step through slurmstepd, which switches to the job's user and
  # its groups: that needs root.
  echo "skipped: the Slurm test runs slurmd, which needs root (run it as root)"
  exit 77  # ctest: SKIP_RETURN_CODE
fi
for p in munged mungekey slurmctld slurmd sbatch srun scontrol squeue scancel sinfo; do
  command -v "$p" >> tools.txt || { echo "FAIL: no $p (scripts/setup installs slurmctld slurmd slurm-client munge)"; exit 1; }
done
# A test run inside someone's Slurm job must not talk to that job.
for v in $(compgen -e | grep '^SLURM'); do unset "$v"; done

# Everything this test starts carries XCARGO_SLURM_TEST=$TMP in its environment (the daemons,
# the job steps' slurmstepd, the job and its loaders): what is left of them at the end is
# found by it and stopped, even after a failure half way.
MARK="XCARGO_SLURM_TEST=$TMP"
marked() { grep -lsxzF -- "$MARK" /proc/[0-9]*/environ | cut -d/ -f3; }
# loaders_left: this test's loaders that still run (zombies excepted: they have no cmdline).
loaders_left() {
  local p
  for p in $(pgrep -x xcargo-loader); do
    grep -qsF -- "$TMP/" "/proc/$p/cmdline" && echo "$p"
  done
}
# stop_everything: a job still there is cancelled (slurmd then ends its steps), the daemons
# get SIGTERM, and whatever still carries the mark gets SIGKILL. All bounded.
stop_everything() {
  {
    if [ -n "${SLURM_CONF:-}" ] && [ -n "$(squeue -h -o %i)" ]; then
      scancel --quiet $(squeue -h -o %i)
      local deadline=$(( $(now_ms) + 30000 ))
      while [ -n "$(squeue -h -o %i)" ] && [ "$(now_ms)" -lt "$deadline" ]; do sleep 0.1; done
    fi
    local p
    for p in "${pids[@]}"; do kill -TERM "$p"; done
    local deadline=$(( $(now_ms) + 10000 ))
    for p in "${pids[@]}"; do
      while kill -0 "$p" && [ "$(now_ms)" -lt "$deadline" ]; do sleep 0.05; done
    done
    for p in $(marked) "${pids[@]}"; do kill -9 "$p"; done
  } >> "$TMP/cleanup.log" 2>&1
  remove_tmp
}
trap stop_everything EXIT

# Free ports on 127.0.0.1: two for the daemons; for the loaders, bases with 3 free ports each.
python3 - > ports.txt <<'EOF'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
def single():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
bases = []
while len(bases) < 2:
    b = random.randrange(20000, 32000, 10)
    if b not in bases and all(free(b + i) for i in range(3)):
        bases.append(b)
print(single(), single(), *bases)
EOF
read -r CTLD_PORT SLURMD_PORT PORT_A PORT_B < ports.txt

# munge, with a key of its own and its socket here.
mkdir -m 700 munge state spool
mungekey -c -k munge/munge.key > mungekey.log 2>&1
env "$MARK" munged -F --force -S "$TMP/munge/sock" --key-file="$TMP/munge/munge.key" --pid-file="$TMP/munge/pid" \
  --seed-file="$TMP/munge/seed" --log-file="$TMP/munge/log" > munged.log 2>&1 &
pids+=($!)
diagnose munged.log

NODE=$(hostname -s)
NODE=${NODE:-localhost}
cat > slurm.conf <<EOF
# One node, this machine, at 127.0.0.1 (slurm_test.sh)
ClusterName=xcargotest
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
AuthType=auth/munge
AuthInfo=socket=$TMP/munge/sock
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
InactiveLimit=0
KillWait=10
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=10 State=UP
EOF
export SLURM_CONF=$TMP/slurm.conf
env "$MARK" slurmctld -D -c > slurmctld.out 2>&1 &
pids+=($!)
env "$MARK" slurmd -D -N "$NODE" > slurmd.out 2>&1 &
pids+=($!)
diagnose slurmctld.out slurmctld.log slurmd.out slurmd.log sinfo.log
node_idle() { [ "$(sinfo -h -n "$NODE" -o %t 2>> sinfo.log)" = idle ]; }
eventually 60 "slurmctld and slurmd start and the node is idle" node_idle

# Outside an allocation, and its help.
expect 0 '^xcargo-slurm: starts a cluster of xcargo loaders' -- "$XS" --help
expect 2 'not inside a Slurm allocation' -- "$XS" start --loader "$LOADER"

# Keys: a client identity (the one xcargo-slurm authorizes by default) and, for the second
# start, a signer and clients directory of the test's own.
"$X" keygen -o client.key > keys.log 2>&1
"$X" keygen -o own.key >> keys.log 2>&1
mkdir trust clients && cp own.key.pub trust/ && cp client.key.pub clients/
"$X" build "$SRC/tests/kernels/hops.c" -o hops.xcargo --key own.key > build.log 2>&1
diagnose keys.log build.log
# A stand-in for the loader that never gets ready, with xcargo beside it (as in an install).
mkdir fake
printf '#!/usr/bin/env python3\nimport time\nprint("a loader that never gets ready", flush=True)\ntime.sleep(300)\n' > fake/fake-loader
chmod +x fake/fake-loader
ln -s "$X" fake/xcargo

# The job (3 tasks on the one node; --overcommit: this machine may have fewer cores). It
# records what each command said in files here; the checks follow once it has ended.
cat > job.sh <<EOF
#!/bin/bash
cd "$TMP"
export XCARGO_IDENTITY=$TMP/client.key
ms() { echo \$(( \$(date +%s%N) / 1000000 )); }
# loaders DIR: the loaders (not their workers) started in DIR.
loaders() {
  for p in \$(pgrep -x xcargo-loader); do
    grep -qsF -- "$TMP/\$1/" /proc/\$p/cmdline && [ "\$(ps -o comm= \$(ps -o ppid= \$p))" != xcargo-loader ] && echo \$p
  done
}

# Start, with a signing key and the clients made by xcargo-slurm.
t=\$(ms)
CLUSTER=\$("$XS" start --dir run --loader "$LOADER" --base-port $PORT_A --timeout 90 -- --spin-us 0 --timeout 5 2> start1.err)
echo "\$? \$(( \$(ms) - t ))" > start1.rc
echo "\$CLUSTER" > start1.out
cp run/cluster.yaml cluster1.yaml
cp hops.xcargo hops-run.xcargo && "$X" sign hops-run.xcargo --key run/signer.key > sign.log 2>&1
"$X" run hops-run.xcargo --entry tour --result str --cluster "\$CLUSTER" --node 0 > tour0.out 2>&1
"$X" run hops-run.xcargo --entry tour --json --cluster "\$CLUSTER" --node 2 > tour2.out 2>&1
squeue -h -s -j \$SLURM_JOB_ID -o '%i %j' > steps1.txt
"$XS" start --dir run --loader "$LOADER" --base-port $PORT_A > again.err 2>&1
echo \$? > again.rc
loaders run > loaders1.txt
"$XS" stop --dir run > stop.err 2>&1
echo \$? > stop.rc
loaders run > loaders-after-stop.txt
# slurmctld drops the step a moment after its srun ended: looked for up to 30 s.
for _ in \$(seq 300); do
  squeue -h -s -j \$SLURM_JOB_ID -o '%i %j' > steps-after-stop.txt
  grep -q xcargo-loaders steps-after-stop.txt || break
  sleep 0.1
done

# Again in the same directory, with the test's own signer and clients, through the loaders'
# TLS front doors (the default for addresses other hosts reach), left running.
CLUSTER=\$("$XS" start --dir run --loader "$LOADER" --base-port $PORT_A --trust trust --clients clients --front-door -q -- --spin-us 0 2> start2.err)
echo \$? > start2.rc
cp run/cluster.yaml cluster2.yaml
(. run/env && "$X" run hops.xcargo --entry tour --result str --cluster "\$CLUSTER" --node 1) > tour1.out 2>&1

# A loader that cannot listen: node 1's port is taken.
python3 -c "
import socket, time
s = socket.socket(); s.bind(('127.0.0.1', $((PORT_B + 1)))); s.listen(); open('taken', 'w').close(); time.sleep(300)" &
taker=\$!
for i in \$(seq 600); do [ -e taken ] && break; sleep 0.05; done
t=\$(ms)
"$XS" start --dir bad --loader "$LOADER" --base-port $PORT_B --timeout 100 > bad.out 2> bad.err
echo "\$? \$(( \$(ms) - t ))" > bad.rc
kill \$taker
loaders bad > loaders-bad.txt

# Loaders that never get ready (a stand-in that only sleeps): the bound, and they are stopped.
t=\$(ms)
"$XS" start --dir slow --loader "$TMP/fake/fake-loader" --base-port $PORT_B --timeout 3 > slow.out 2> slow.err
echo "\$? \$(( \$(ms) - t ))" > slow.rc
pgrep -f "$TMP/fake/fake-loader" > fake-after-slow.txt

# A start interrupted (SIGTERM) while it waits stops what it started.
timeout --preserve-status -s TERM 3 "$XS" start --dir term --loader "$TMP/fake/fake-loader" --base-port $PORT_B > term.out 2> term.err
echo \$? > term.rc
pgrep -f "$TMP/fake/fake-loader" > fake-after-term.txt
squeue -h -s -j \$SLURM_JOB_ID -o '%i %j' > steps-end.txt
echo done > job.done
EOF
diagnose start1.err again.err stop.err start2.err tour0.out tour1.out tour2.out bad.err slow.err term.err job.out
diagnose run/srun.log run/node-0.log run/node-1.log run/node-2.log bad/srun.log bad/node-1.log

t0=$(now_ms)
JOB=$(sbatch --parsable -n 3 --overcommit -t 5 -o job.out --export="ALL,$MARK" job.sh 2> sbatch.err)
diagnose sbatch.err scontrol.log
check "sbatch takes the job ($(cat sbatch.err))" test -n "$JOB"
job_state() { scontrol show job -o "$JOB" 2>> scontrol.log | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
job_ended() { case "$(job_state)" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) return 0;; *) return 1;; esac; }
eventually 100 "the job ends" job_ended
echo "the job took $(( $(now_ms) - t0 )) ms"
check "the job completed ($(job_state)) and ran to its end" test "$(job_state)" = COMPLETED -a -e job.done

# A job that never ran leaves nothing more to check: the daemons' logs say why (finish).
[ -e start1.rc ] || { finish; exit 1; }
read -r rc took < start1.rc
check "start: exit 0 ($rc), within 90 s ($took ms)" test "$rc" = 0
check "start printed only the cluster file's path ($(cat start1.out))" test "$(cat start1.out)" = "$TMP/run/cluster.yaml"
expect 0 '3 loaders up in step [0-9]+\.[0-9]+ on ' -- cat start1.err
for i in 0 1 2; do
  expect 0 "^  - id: $i\$" -- cat cluster1.yaml
  expect 0 "^    address: 127\.0\.0\.1:$((PORT_A + i))  # $NODE\$" -- cat cluster1.yaml
done
expect 0 "^export XCARGO_CLUSTER=$TMP/run/cluster.yaml\$" -- cat run/env
check "the loaders ran in their own step, beside the batch step" grep -q '^[0-9]*\.0 xcargo-loaders$' steps1.txt
check "3 loaders ran while started ($(wc -l < loaders1.txt))" test "$(wc -l < loaders1.txt)" -eq 3

# The kernel visited every node, forwarded from one to the next.
expect 0 '^012$' -- cat tour0.out
expect 0 '"ended_on_node": 1' -- cat tour2.out
check "node 1 verified the cargo that came with the forward" grep -q 'accepted forwarded cargo: hops .* from node 0' run/node-1.log
check "node 2 ran the last step" grep -q 'accepted forward: .*/tour hop 2 -> ok' run/node-2.log

expect 0 'already running from .*/run \(step [0-9]+\.0\)' -- cat again.err
check "a second start is refused with exit 1" test "$(cat again.rc)" = 1
check "stop: exit 0" test "$(cat stop.rc)" = 0
expect 0 'stopped 3 loaders' -- cat stop.err
check "no loader runs after stop ($(tr '\n' ' ' < loaders-after-stop.txt))" test ! -s loaders-after-stop.txt
check "the step ended with stop" bash -c "! grep -q xcargo-loaders steps-after-stop.txt"
check "the loaders stopped cleanly on SIGTERM" grep -q 'stopped$' run/node-0.log

check "start with --trust, --clients and --front-door: exit 0" test "$(cat start2.rc)" = 0
for i in 0 1 2; do
  expect 0 "^    address: tls://127\.0\.0\.1:$((PORT_A + i))  # $NODE\$" -- cat cluster2.yaml
  expect 0 "^127\.0\.0\.1:$((PORT_A + i)) [A-Za-z0-9+/=]+ node-$i\$" -- cat run/known_nodes
done
expect 0 "^export XCARGO_KNOWN_NODES=$TMP/run/known_nodes\$" -- cat run/env
expect 0 '^120$' -- cat tour1.out

# A loader that cannot start: the error names it, its port and its log, without waiting for
# the time-out (100 s).
read -r rc took < bad.rc
check "start fails when a loader cannot listen: exit 1 ($rc), in $took ms (ceiling 60 s)" test "$rc" = 1 -a "$took" -lt 60000
expect 0 "node 1 \\($NODE, port $((PORT_B + 1))\\) exited: .*\\[log: $TMP/bad/node-1.log\\]" -- cat bad.err
check "nothing on stdout when start fails" test ! -s bad.out
check "no loader of the failed start is left ($(tr '\n' ' ' < loaders-bad.txt))" test ! -s loaders-bad.txt

read -r rc took < slow.rc
check "loaders never ready: exit 1 ($rc) after the 3 s time-out ($took ms, ceiling 60 s)" test "$rc" = 1 -a "$took" -ge 3000 -a "$took" -lt 60000
expect 0 'not all 3 loaders were ready within 3 s' -- cat slow.err
for i in 0 1 2; do
  expect 0 "node $i \\($NODE, port $((PORT_B + i))\\) not ready: .*a loader that never gets ready.*\\[log: $TMP/slow/node-$i.log\\]" -- cat slow.err
done
check "the never-ready loaders were stopped" test ! -s fake-after-slow.txt

check "an interrupted start exits 143 ($(cat term.rc))" test "$(cat term.rc)" = 143
expect 0 'interrupted by SIGTERM: stopping the loaders' -- cat term.err
check "an interrupted start stopped its loaders" test ! -s fake-after-term.txt

# The end of the job stopped the loaders left running.
check "the loaders of the second start ran to the job's end" grep -q '^[0-9]*\.[0-9]* xcargo-loaders$' steps-end.txt
no_loaders_left() { [ -z "$(loaders_left)" ]; }
eventually 60 "no loader of this test runs after the job" no_loaders_left
for i in 0 1 2; do
  check "loader $i stopped cleanly (SIGTERM) at stop and at the job's end" test "$(grep -c 'stopped$' run/node-$i.log)" -eq 2
done

finish
