#!/usr/bin/env bash
# The loader's clients (issue 48): the README's restricted key, made with the README's own
# line, may ls and run but not push; files a clients directory ignores are named in the log,
# at start and when they appear, with what the directory expects.
# usage: clients_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
LOADER=$(dirname "$X")/xcargo-loader
source "$(dirname "$0")/lib.sh"
cd "$TMP"
mkdir -p trust clients etc/clients
"$X" keygen -o k >>"$DISCARD" && cp k.pub trust/
"$X" keygen -o ci >>"$DISCARD"
"$X" keygen -o me >>"$DISCARD" && cp me.pub clients/
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k -t x86_64 >>"$DISCARD" 2>&1

# The README's line (the code block after "<!-- e2e.clients: restricted -->"), /etc/xcargo
# being this test's etc/; it reads the key file ci.pub in the current directory.
awk '$0 == "<!-- e2e.clients: restricted -->" { on = 1; next } on && /^```/ { if (b) exit; b = 1; next } b { print }' \
  "$SRC/README.md" | sed "s|/etc/xcargo|$TMP/etc|g" > restricted.sh
check "README: the restricted-verbs line is found" grep -q '^echo "verbs=run,ls ' restricted.sh
check "README: the restricted-verbs line runs" bash restricted.sh
check "it wrote one line for ci" test "$(wc -l < etc/clients/clients.txt)" -eq 1

start() {  # start NAME CLIENTS ARGS...: a loader, its address in $NAME
  rm -f "$1.addr"
  "$LOADER" --listen 127.0.0.1:0 $(ucx_net) --ready-file "$1.addr" --trust trust --clients "$2" --no-standby "${@:3}" 2> "$1.log" &
  pids+=($!)
  disown $!
  diagnose "$1.log"
  wait_file "$1.addr" || echo "FAIL: loader $1 did not start: $(tail -3 "$1.log")"
  eval "$1=\$(head -1 $1.addr)"
}

# With the README's node key beside the clients directory, which the worker must not read.
"$X" keygen -o etc/node.key >>"$DISCARD"
start file etc/clients/clients.txt --node-key etc/node.key
eventually 10 "the loader of the README's file serves one key" grep -q '1 authorized client keys' file.log
expect 0 'nothing loaded' -- "$X" ls --to "$file" --identity ci
expect 5 '\(ci\) may .*not push' -- "$X" push hello.xcargo --to "$file" --identity ci
expect 5 'refused identity' -- "$X" ls --to "$file" --identity me

# The same line in a clients directory is no key there: the loader says so, and why.
cp etc/clients/clients.txt clients/clients.txt
start dir clients
eventually 10 "a stray file in the clients directory is logged at start" \
  grep -q "clients: clients/clients.txt: ignored, not a .pub file: a clients directory holds one .pub file per client" dir.log
check "... with what to do for fewer verbs" grep -q "give --clients a file of 'verbs=LIST KEY NAME' lines instead" dir.log
expect 5 'refused identity' -- "$X" ls --to "$dir" --identity ci
expect 0 'nothing loaded' -- "$X" ls --to "$dir" --identity me
echo "# notes" > clients/README
eventually 10 "a file that appears in the clients directory is logged" grep -q "clients: clients/README: ignored, not a .pub file" dir.log
finish
