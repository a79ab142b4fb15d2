#!/usr/bin/env bash
# Corruption sweep through the real binary: every single-byte flip of a small signed cargo
# makes `xcargo verify` exit 1 (never 0, never a crash). With STRIDE, every STRIDE-th byte
# (the sanitized pass: its processes start slowly, and unit.corruption flips every byte there).
# usage: sweep_test.sh XCARGO SOURCE_DIR [STRIDE]
X=$1
SRC=$2
STRIDE=${3:-1}
source "$(dirname "$0")/lib.sh"
cd "$TMP"
"$X" keygen -o k >>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -o small.xcargo -t x86_64 --key k 2>>"$DISCARD"
expect 0 'ok' -- "$X" verify small.xcargo --trust k.pub
mkdir flips
python3 - small.xcargo flips "$STRIDE" <<'PY'
import sys
b = open(sys.argv[1], 'rb').read()
for i in range(0, len(b), int(sys.argv[3])):
    c = bytearray(b)
    c[i] ^= 0x01 if i % 2 else 0x80
    open(f"{sys.argv[2]}/{i}", 'wb').write(c)
PY
n=$(ls flips | wc -l)
bad=0
for f in flips/*; do
  "$X" verify "$f" --trust k.pub >>"$DISCARD" 2>&1
  rc=$?
  if [ $rc -ne 1 ]; then
    echo "FAIL: flipping byte $(basename "$f") gave exit $rc"
    bad=$((bad + 1))
  fi
done
checks=$((checks + n))
failures=$((failures + bad))
echo "swept $n single-byte flips"
finish
