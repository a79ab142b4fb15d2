#!/usr/bin/env bash
# Where outputs go (issue 11): every verb that writes a file writes devices, FIFOs and
# descriptors in place, follows symbolic links, and replaces regular files atomically. As
# root, and again as an unprivileged user where this machine can switch to one.
# usage: output_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
LOADER=$(dirname "$X")/xcargo-loader
source "$(dirname "$0")/lib.sh"
chmod 755 "$TMP"  # the unprivileged user reads the cargo too
cd "$TMP"

"$X" keygen -o k >>"$DISCARD"
"$X" keygen -o k2 >>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k -t x86_64 2>>"$DISCARD"
"$X" extract hello.xcargo --variant x86_64 -o ref.o 2>>"$DISCARD"
chmod 644 hello.xcargo ref.o

# every_verb TARGET: each verb that writes a file, writing to TARGET.
every_verb() {
  local t=$1
  expect 0 '' -- "$X" build "$SRC/examples/hello/hello.c" -o "$t" --name hello --key k -t x86_64
  expect 0 '' -- "$X" extract hello.xcargo --variant x86_64 -o "$t"
  expect 0 '' -- "$X" sign hello.xcargo --key k2 -o "$t"
  expect 0 'add ran on local loader' -- "$X" run hello.xcargo --entry add --arg i64:1 --arg i64:2 --trust k.pub --output "$t"
}
is_null_device() { [ -c "$1" ] && [ "$(stat -c '%a %t:%T' "$1")" = "666 1:3" ]; }

# A private copy of /dev/null first: if writing to a device were broken again, only this copy
# would be damaged. The system's /dev/null is tried only once the copy came through.
if mknod pnull c 1 3 2>>"$DISCARD" && chmod 666 pnull; then
  every_verb pnull
  check "a device node stays a device node, mode 0666 (private copy of /dev/null)" is_null_device pnull
  expect 0 '^key id' -- "$X" keygen -o pnull --force
  check "keygen -o DEVICE --force writes into the device" is_null_device pnull
  rm -f pnull.pub
  if is_null_device pnull && is_null_device /dev/null; then
    every_verb /dev/null
    check "-o /dev/null leaves /dev/null a character device with mode 0666" is_null_device /dev/null
  fi
else
  echo "note: cannot make device nodes here (not root): the device checks use /dev/null's own permissions"
  expect 0 '' -- "$X" extract hello.xcargo --variant x86_64 -o /dev/null
  check "/dev/null is still a character device with mode 0666" is_null_device /dev/null
fi

# A FIFO receives the bytes and stays a FIFO.
mkfifo pipe
timeout 30 cat pipe > from-pipe &  # bounded: a writer that replaced the FIFO never opens it
expect 0 '' -- "$X" extract hello.xcargo --variant x86_64 -o pipe
wait
check "a FIFO receives the bytes" cmp from-pipe ref.o
check "a FIFO stays a FIFO" test -p pipe

# '-' and /dev/stdout print the bytes; appending with >> keeps what was there.
"$X" extract hello.xcargo --variant x86_64 -o - > dash.o 2>>"$DISCARD"
check "-o - writes the bytes to standard output" cmp dash.o ref.o
"$X" extract hello.xcargo --variant x86_64 -o /dev/stdout > stdout.o 2>>"$DISCARD"
check "-o /dev/stdout writes the bytes to standard output" cmp stdout.o ref.o
echo head > appended
"$X" extract hello.xcargo --variant x86_64 -o /dev/stdout >> appended 2>>"$DISCARD"
check "-o /dev/stdout >> FILE appends" bash -c '(echo head; cat ref.o) | cmp - appended'
"$X" build "$SRC/examples/hello/hello.c" -o - --name hello --key k -t x86_64 > piped.xcargo 2>>"$DISCARD"
expect 0 'signature by a trusted key|verified|OK|ok' -- "$X" verify piped.xcargo --trust k.pub
expect 2 "cannot use '-' as the cargo name" -- "$X" build "$SRC/examples/hello/hello.c" -o - -t x86_64
expect 2 "keygen writes two files" -- "$X" keygen -o -
"$X" run hello.xcargo --entry greet --trust k.pub --output - > greet.out 2>>"$DISCARD"
check "run --output - prints the reply's bytes, and only them" test "$(cat greet.out)" = "hello from node 0"

# A symbolic link is followed: the target gets the bytes, the link stays a link.
echo old > real.o
ln -s real.o link.o
expect 0 '' -- "$X" extract hello.xcargo --variant x86_64 -o link.o
check "a symbolic link stays a link" test -L link.o
check "its target gets the bytes" cmp real.o ref.o
ln -s missing/nowhere dangling
expect 2 'dangling: is a symbolic link that cannot be followed' -- "$X" extract hello.xcargo --variant x86_64 -o dangling
expect 2 'hint: a link to a missing file is not replaced' -- "$X" extract hello.xcargo --variant x86_64 -o dangling
check "a dangling link is left as it was" test -L dangling
mkdir adir
expect 2 'adir: is a directory' -- "$X" extract hello.xcargo --variant x86_64 -o adir

# A regular file is replaced (a new inode: readers of the old one never see a mix), and its
# mode never widens.
echo old > regular.o
chmod 600 regular.o
inode=$(stat -c %i regular.o)
expect 0 '' -- "$X" extract hello.xcargo --variant x86_64 -o regular.o
check "a regular file gets the new bytes" cmp regular.o ref.o
check "a regular file is replaced by rename (new inode)" test "$(stat -c %i regular.o)" != "$inode"
check "a replaced file keeps its narrower mode (0600)" test "$(stat -c %a regular.o)" = 600

# The loader's ready file: '-' prints the address on standard output.
"$LOADER" --listen 127.0.0.1:0 --trust . --allow-anyone --ready-file - > ready.out 2> loader.log &
loader=$!
wait_file ready.out 30
check "--ready-file - prints where the loader listens" grep -Eq '^127\.0\.0\.1:[0-9]+$' ready.out
kill "$loader" 2>>"$DISCARD"
wait "$loader" 2>>"$DISCARD"

# The same as an unprivileged user, where this machine can switch to one.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >>"$DISCARD"; then
  nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
  expect 0 '' -- "${nobody[@]}" "$X" extract hello.xcargo --variant x86_64 -o /dev/null
  check "as an unprivileged user, -o /dev/null leaves /dev/null as it was" is_null_device /dev/null
  mkfifo upipe && chmod 666 upipe
  timeout 30 cat upipe > from-upipe &
  expect 0 '' -- "${nobody[@]}" "$X" extract hello.xcargo --variant x86_64 -o upipe
  wait
  check "as an unprivileged user, a FIFO receives the bytes" cmp from-upipe ref.o
  "${nobody[@]}" "$X" extract hello.xcargo --variant x86_64 -o - > nobody.o 2>>"$DISCARD"
  check "as an unprivileged user, -o - prints the bytes" cmp nobody.o ref.o
else
  echo "note: not root or no setpriv: the unprivileged-user checks did not run"
fi
finish
