#!/usr/bin/env bash
# Private key files (issue 13, "keys like minisign's"): keygen --encrypt, passphrases from a
# variable or the terminal, wrong and missing passphrases, keys that others may read refused
# by sign, build and the loader, unencrypted 0600 keys working as before.
# usage: keys_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
BIN=$(dirname "$X")
source "$(dirname "$0")/lib.sh"
cd "$TMP"
HELLO=$SRC/examples/hello/hello.c
TTY=$SRC/tests/e2e/type_on_tty.py
# No terminal and no passphrase unless a check gives one: a prompt would wait for the timeout.
unset XCARGO_PASSPHRASE
: > no-terminal
exec < no-terminal

"$X" build "$HELLO" -o hello.xcargo -t x86_64 2> build.err

# --- an encrypted key, its passphrase from the environment (CI)
env XCARGO_PASSPHRASE=right-horse "$X" keygen -o e.key --encrypt > e.keygen 2>&1
check "keygen --encrypt says the key is encrypted" grep -q 'private key e\.key (encrypted)' e.keygen
EID=$(sed -n 's/^key id //p' e.keygen)
check "an encrypted key is mode 0600" test "$(stat -c %a e.key)" = 600
check "an encrypted key is PKCS#8 ENCRYPTED PRIVATE KEY" grep -q -- '-----BEGIN ENCRYPTED PRIVATE KEY-----' e.key
check "openssl reads it with the passphrase" openssl pkey -in e.key -passin pass:right-horse -noout
check "the passphrase is not in the key file" bash -c "! grep -q right-horse e.key"
mkdir trust && cp e.key.pub trust/
expect 0 'hello.xcargo: signed by key' -- env XCARGO_PASSPHRASE=right-horse "$X" sign hello.xcargo --key e.key
expect 0 'signed by' -- env CI_KEY_PASS=right-horse "$X" build "$HELLO" -o built.xcargo -t x86_64 --key e.key --passphrase-env CI_KEY_PASS
expect 0 '' -- "$X" verify hello.xcargo --trust trust
expect 0 '' -- "$X" verify built.xcargo --trust trust

# --- wrong, missing and empty passphrases
expect 2 '^xcargo: error: e\.key: wrong passphrase \(or damaged key\)' -- env XCARGO_PASSPHRASE=wrong-horse "$X" sign hello.xcargo --key e.key
expect 2 'hint: the passphrase came from \$XCARGO_PASSPHRASE' -- env XCARGO_PASSPHRASE=wrong-horse "$X" sign hello.xcargo --key e.key
env XCARGO_PASSPHRASE=wrong-horse "$X" sign hello.xcargo --key e.key > wrong.out 2>&1
check "a wrong passphrase is not printed" bash -c "! grep -q wrong-horse wrong.out"
expect 2 'e\.key: needs a passphrase, and there is no terminal to ask on' -- "$X" sign hello.xcargo --key e.key
expect 2 'hint: set XCARGO_PASSPHRASE' -- "$X" build "$HELLO" -o x.xcargo --key e.key
expect 2 'e\.key: the passphrase variable CI_KEY_PASS is not set' -- "$X" sign hello.xcargo --key e.key --passphrase-env CI_KEY_PASS
expect 2 'the passphrase variable XCARGO_PASSPHRASE is empty' -- env XCARGO_PASSPHRASE= "$X" sign hello.xcargo --key e.key
expect 2 'n\.key: the passphrase variable XCARGO_PASSPHRASE is empty' -- env XCARGO_PASSPHRASE= "$X" keygen -o n.key --encrypt
check "a refused keygen writes no key" test ! -e n.key
expect 2 'n\.key: needs a passphrase, and there is no terminal' -- "$X" keygen -o n.key --encrypt
# The existing file is refused before any passphrase is asked for.
expect 2 'e\.key: already exists' -- "$X" keygen -o e.key --encrypt

# --- the terminal: asked twice for a new key, once to use it, echo off
if python3 -c 'import pty' 2> pty.err; then
  expect 0 'New passphrase for t\.key:' -- "$TTY" typed-horse,typed-horse "$X" keygen -o t.key --encrypt
  check "the typed passphrase encrypts the key" openssl pkey -in t.key -passin pass:typed-horse -noout
  expect 2 't2\.key: the two passphrases differ' -- "$TTY" one,two "$X" keygen -o t2.key --encrypt
  check "keygen with differing passphrases writes no key" test ! -e t2.key
  expect 0 'Passphrase for t\.key:' -- "$TTY" typed-horse "$X" sign hello.xcargo --key t.key
  "$TTY" typed-horse "$X" sign hello.xcargo --key t.key > typed.out 2>&1
  check "the typed passphrase is not echoed" bash -c "! grep -q typed-horse typed.out"
  expect 2 't\.key: wrong passphrase \(or damaged key\)' -- "$TTY" not-the-horse "$X" sign hello.xcargo --key t.key
  expect 2 'CI_KEY_PASS is not set' -- "$TTY" typed-horse "$X" sign hello.xcargo --key t.key --passphrase-env CI_KEY_PASS
else
  echo "note: python3 has no pty module here: the terminal checks are skipped"
fi

# --- keys that others may read or write are refused, with the fix
"$X" keygen -o k > keygen.out
expect 0 'signed by' -- "$X" sign hello.xcargo --key k
for mode in 644 640 604 660 620; do
  chmod "$mode" k
  expect 2 "^xcargo: error: k: private key permissions 0$mode are too open" -- "$X" sign hello.xcargo --key k
done
chmod 644 k
expect 2 'hint: chmod 600 k' -- "$X" sign hello.xcargo --key k
expect 2 'hint: chmod 600 k' -- "$X" build "$HELLO" -o x.xcargo --key k
check "a refused build writes no cargo" test ! -e x.xcargo
chmod 644 e.key
expect 2 'e\.key: private key permissions 0644 are too open' -- env XCARGO_PASSPHRASE=right-horse "$X" sign hello.xcargo --key e.key
chmod 600 e.key
chmod 600 k
expect 0 'signed by' -- "$X" sign hello.xcargo --key k
chmod 400 k
expect 0 'already signed by key' -- "$X" sign hello.xcargo --key k
# A public key given as the private key is named as such, whatever its mode.
expect 2 'k\.pub: not a PEM private key' -- "$X" sign hello.xcargo --key k.pub

# --- the loader's node key: mode-checked; an encrypted one reads $XCARGO_PASSPHRASE, which
# then leaves the loader's environment
mkdir clients && cp k.pub clients/
chmod 644 e.key
expect 2 'node-key: e\.key: private key permissions 0644 are too open' -- \
  "$BIN/xcargo-loader" --listen 127.0.0.1:0 --trust trust --clients clients --node-key e.key
chmod 600 e.key
# Where a kernel could read it (the worker reads the directory of a clients file, and the
# trust directory): refused, with where to put it (a kernel could read it there).
cp e.key clients/node.key
expect 2 'clients/node\.key: the node.s private key lies in .*/clients, which the worker that runs kernels may read' -- \
  "$BIN/xcargo-loader" --listen 127.0.0.1:0 --trust trust --clients clients --node-key clients/node.key
rm clients/node.key
expect 2 'node-key: e\.key: needs a passphrase' -- \
  "$BIN/xcargo-loader" --listen 127.0.0.1:0 --trust trust --clients clients --node-key e.key
expect 2 'node-key: e\.key: wrong passphrase' -- \
  env XCARGO_PASSPHRASE=wrong-horse "$BIN/xcargo-loader" --listen 127.0.0.1:0 --trust trust --clients clients --node-key e.key
XCARGO_PASSPHRASE=right-horse "$BIN/xcargo-loader" --listen 127.0.0.1:0 --trust trust --clients clients --node-key e.key \
  --ready-file node.addr --spin-us 0 2> node.log &
loader=$!
trap 'kill -9 $loader 2> "$TMP/kill.err"; rm -rf "$TMP"' EXIT
if wait_file node.addr 60; then
  eventually 10 "the loader signs its hellos with the encrypted node key" grep -q "node key $EID" node.log
  check "the passphrase is gone from the loader's environment" bash -c "! tr '\0' '\n' < /proc/$loader/environ | grep -q right-horse"
  for child in $(pgrep -P "$loader"); do
    check "the passphrase is not in the worker's environment" bash -c "! tr '\0' '\n' < /proc/$child/environ | grep -q right-horse"
  done
  expect 0 'nothing loaded' -- "$X" ls --to "$(cat node.addr)" --identity k
  # An encrypted identity (k, encrypted by openssl): typed once for a push to two nodes (the
  # same node twice here), before connecting.
  openssl pkcs8 -topk8 -scrypt -in k -out k-enc -passout pass:id-horse && chmod 600 k-enc
  if python3 -c 'import pty' 2> pty.err; then
    "$TTY" id-horse "$X" push hello.xcargo --to "$(cat node.addr),$(cat node.addr)" --identity k-enc > push.out 2>&1
    check "a push with an encrypted identity succeeds" grep -q ': pushed' push.out
    check "a push to two nodes asks the identity's passphrase once" test "$(grep -c 'Passphrase for k-enc' push.out)" = 1
  fi
  expect 0 'hello' -- env XCARGO_PASSPHRASE=id-horse "$X" ls --to "$(cat node.addr)" --identity k-enc
else
  echo "FAIL: the loader with an encrypted node key did not start: $(tail -3 node.log)"
  failures=$((failures + 1))
fi
kill "$loader" 2> kill.err
wait "$loader" 2> wait.err

finish
