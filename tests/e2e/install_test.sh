#!/usr/bin/env bash
# An install as its users meet it: `cmake --install` to a prefix that is then moved, a CMake
# project outside the tree (find_package(xcargo), xcargo_add_cargo, the client library) that
# builds a cargo and runs it on the installed loader, header changes rebuilding the cargo
# (its depfile), the README's CMake and pkg-config examples built as written with g++, man
# pages and bash completion made from --help (entries and variants read from a cargo), the
# systemd unit (systemd-analyze verify), and the installed loader serving as an unprivileged user.
# usage: install_test.sh XCARGO SOURCE_DIR BUILD_DIR
X=$1
SRC=$2
BUILD=$3
source "$(dirname "$0")/lib.sh"
cd "$TMP"
chmod 755 "$TMP"  # the unprivileged loader below reads its trust and clients here

# Install, then move the prefix: nothing may depend on where it was installed or built.
check "cmake --install" cmake --install "$BUILD" --prefix "$TMP/staged" --strip
# The systemd unit, where it was installed (it names the loader by that absolute path, as
# systemd wants): systemd accepts it, and finds its program and man page.
S=$TMP/staged
expect 0 "^ExecStart=$S/bin/xcargo-loader " -- grep '^ExecStart=' "$S/share/xcargo/systemd/xcargo-loader.service"
expect 0 '' -- env MANPATH="$S/share/man" systemd-analyze verify "$S/share/xcargo/systemd/xcargo-loader.service"
check "systemd-analyze verify prints no warning" bash -c \
  "[ -z \"\$(MANPATH='$S/share/man' systemd-analyze verify '$S/share/xcargo/systemd/xcargo-loader.service' 2>&1)\" ]"

mkdir moved && mv staged moved/xcargo
P=$TMP/moved/xcargo
check "no source or build path in the installed files" bash -c "! grep -rlF -e '$SRC/' -e '$BUILD/' '$P'"
for f in bin/xcargo bin/xcargo-loader include/xcargo/client.h include/xcargo/version.h share/xcargo/include/xcargo/kernel.h \
         lib/cmake/xcargo/xcargo-config.cmake lib/pkgconfig/xcargo.pc share/man/man1/xcargo-build.1 \
         share/man/man1/xcargo-loader.1 share/bash-completion/completions/xcargo share/xcargo/loader.example.yaml \
         share/xcargo/systemd/xcargo-loader.service; do
  check "installed: $f" test -e "$P/$f"
done
check "installed: libxcargo.so" bash -c "ls '$P'/lib*/libxcargo.so"
# The public API's boundary: the installed headers are exactly these, and each compiles alone
# against the install tree (g++ sees $P/include and the system's headers, nothing of the tree's).
expect 0 '^cargo.h client.h cluster.h error.h file.h format.h identity.h interrupt.h manifest.h messages.h passphrase.h rules.h trust.h types.h version.h$' \
  -- bash -c "cd '$P/include/xcargo' && echo *"
for h in "$P"/include/xcargo/*.h; do
  check "compiles alone: xcargo/${h##*/}" bash -c \
    "echo '#include \"xcargo/${h##*/}\"' | g++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I'$P/include' -x c++ -"
done
expect 0 "kernel headers: $P/share/xcargo/include\$" -- "$P/bin/xcargo" --version -v
expect 0 "local loader: +$P/bin/xcargo-loader\$" -- "$P/bin/xcargo" --version -v
expect 0 'clang: +/.*clang: .*clang version 16' -- "$P/bin/xcargo" --version -v
expect 0 '^xcargo [0-9]+\.[0-9]+\.[0-9]+$' -- "$P/bin/xcargo" build --version
expect 2 'kernel headers are missing' -- env XCARGO_KERNEL_INCLUDE=$TMP/none "$P/bin/xcargo" build "$SRC/examples/hello/hello.c" -o h.xcargo

# A loader from the install, and a key of the user's.
mkdir trust clients
"$P/bin/xcargo" keygen -o k > keygen.out 2>&1 && cp k.pub trust/
"$P/bin/xcargo" keygen -o me > keygen.out 2>&1 && cp me.pub clients/
export XCARGO_IDENTITY=$TMP/me
"$P/bin/xcargo-loader" --listen 127.0.0.1:0 --ready-file loader.addr --trust trust --clients clients --cache cache \
  --no-standby 2> loader.log &
pids+=($!)
diagnose loader.log
check "the installed loader starts" wait_file loader.addr
ADDR=$(cat loader.addr)

# The consumer project, copied so the test can edit its header.
cp -r "$SRC/tests/install/consumer" consumer
check "consumer: cmake configure (find_package(xcargo))" \
  cmake -S consumer -B cbuild -G Ninja -DCMAKE_PREFIX_PATH="$P" -DCMAKE_CXX_COMPILER=g++ -DSIGNING_KEY="$TMP/k"
cmake --build cbuild > cbuild.out 2>&1
check "consumer: builds its cargo and program" grep -q 'Building cargo scale' cbuild.out
diagnose cbuild.out
expect 0 '^130 variant x86_64 \(client library [0-9.]+\)$' -- cbuild/offload "$ADDR" 5
expect 0 'ok: scale 0.1.0, .*signed by' -- "$P/bin/xcargo" verify cbuild/scale.xcargo --trust k.pub
expect 0 'no work to do' -- cmake --build cbuild
sed -i 's/#define FACTOR 3/#define FACTOR 5/' consumer/kernels/scale.h
expect 0 'Building cargo scale' -- cmake --build cbuild
expect 0 '^150 variant x86_64' -- cbuild/offload "$ADDR" 5

# The README's examples exactly as it writes them (the code block after each "<!-- e2e.install: NAME -->"
# line), the prefix /opt/xcargo being this install's, with the consumer's sources and g++.
readme_block() {
  awk -v m="<!-- e2e.install: $1 -->" '$0 == m { on = 1; next } on && /^```/ { if (in_block) exit; in_block = 1; next }
                                       in_block { print }' "$SRC/README.md" | sed "s|/opt/xcargo|$P|g"
}
mkdir readme && cp -r "$SRC/tests/install/consumer/kernels" "$SRC/tests/install/consumer/offload.cpp" readme/
cp -p k readme/ci.key
readme_block cmake > readme/CMakeLists.txt
check "README: its CMake example is found" grep -q 'xcargo::client' readme/CMakeLists.txt
check "README: its CMake example configures" \
  bash -c "cmake -S readme -B rbuild -G Ninja -DCMAKE_PREFIX_PATH='$P' -DCMAKE_CXX_COMPILER=g++ > rconfigure.out 2>&1"
diagnose rconfigure.out
cmake --build rbuild > rbuild.out 2>&1
check "README: its CMake example builds with g++" grep -q 'Linking CXX executable offload' rbuild.out
diagnose rbuild.out
expect 0 '^30 variant x86_64' -- bash -c "cd rbuild && ./offload '$ADDR' 5"
readme_block pkg-config > pkg-config.sh
check "README: its pkg-config command is found" grep -q '^g++ .*pkg-config --cflags --libs xcargo' pkg-config.sh
check "README: its pkg-config command builds a program" bash -c "cd readme && bash ../pkg-config.sh"
cp rbuild/scale.xcargo readme/
expect 0 '^30 variant x86_64' -- bash -c "cd readme && env -u LD_LIBRARY_PATH ./offload '$ADDR' 5"

# Man pages: one per verb, each listing every option its --help lists.
for verb in keygen build sign verify inspect extract push run ls; do
  page=$(MANPATH=$P/share/man man -w "xcargo-$verb" 2>&1)
  check "man xcargo-$verb is found under the prefix" test "$page" = "$P/share/man/man1/xcargo-$verb.1"
  opts=$("$P/bin/xcargo" "$verb" --help | grep -Eo '^  -[-a-zA-Z0-9,]+' | tr ',' '\n' | tr -d ' ' | sort -u)
  rendered=$(MANWIDTH=200 man -l "$P/share/man/man1/xcargo-$verb.1" 2>> man.err)
  missing=""
  for o in $opts; do grep -qF -- "$o" <<<"$rendered" || missing+=" $o"; done
  check "man xcargo-$verb lists every option of --help (missing:$missing)" test -z "$missing"
done
expect 0 '--listen HOST:PORT' -- bash -c "MANWIDTH=200 man -l '$P/share/man/man1/xcargo-loader.1'"
check "man xcargo-slurm is found under the prefix" test "$(MANPATH=$P/share/man man -w xcargo-slurm 2>&1)" = "$P/share/man/man1/xcargo-slurm.1"
expect 0 '^ +--base-port P$' -- bash -c "MANWIDTH=200 man -l '$P/share/man/man1/xcargo-slurm.1'"
expect 0 '^ +xcargo-slurm stop \[--dir DIR\]$' -- bash -c "MANWIDTH=200 man -l '$P/share/man/man1/xcargo-slurm.1'"
# NAME lines (what apropos and whatis show) say what a program is for, xcargo's its running code.
expect 0 '^ +xcargo - build, sign and check .*run their kernels' -- bash -c "MANWIDTH=300 man -l '$P/share/man/man1/xcargo.1' | sed -n '/^NAME/{n;p}'"

# Bash completion.
cat > complete_words <<'SH'
#!/usr/bin/env bash
# complete_words COMPLETION_FILE WORD...: what _xcargo offers for the last word
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _xcargo; echo "${COMPREPLY[*]}"
SH
chmod +x complete_words
expect 0 '^build$' -- ./complete_words "$P/share/bash-completion/completions/xcargo" xcargo bu
expect 0 '^contract strict$' -- ./complete_words "$P/share/bash-completion/completions/xcargo" xcargo build --fp ''
expect 0 '--depfile' -- ./complete_words "$P/share/bash-completion/completions/xcargo" xcargo build --de
expect 0 '^i32 i64 u32 u64 f32 f64 str hex i32\[\] i64\[\] u32\[\] u64\[\] f32\[\] f64\[\] u8\[\]$' -- ./complete_words "$P/share/bash-completion/completions/xcargo" xcargo run --result ''
COMPLETION=$P/share/bash-completion/completions/xcargo
expect 0 '^help$' -- ./complete_words "$COMPLETION" xcargo h
expect 0 '^run$' -- ./complete_words "$COMPLETION" xcargo help r
expect 0 '^bitcode x86_64 aarch64 riscv64$' -- ./complete_words "$COMPLETION" xcargo build -t ''
expect 0 '^bitcode x86_64 aarch64 riscv64$' -- ./complete_words "$COMPLETION" xcargo build k.c --target ''
expect 0 '^bitcode,aarch64$' -- ./complete_words "$COMPLETION" xcargo build -t bitcode,a  # a comma-separated list
# --entry and --variant: the names in the cargo on the line, read by the installed xcargo.
"$P/bin/xcargo" build "$SRC/examples/hello/hello.c" -o hello.xcargo -t x86_64,bitcode > build.out 2>&1
expect 0 '^add greet$' -- env PATH="$P/bin:$PATH" ./complete_words "$COMPLETION" xcargo run hello.xcargo --entry ''
expect 0 '^greet$' -- env PATH="$P/bin:$PATH" ./complete_words "$COMPLETION" xcargo run --trust k.pub hello.xcargo --entry g
expect 0 '^scale$' -- env PATH="$P/bin:$PATH" ./complete_words "$COMPLETION" xcargo run cbuild/scale.xcargo --to "$ADDR" --entry ''
expect 0 '^x86_64 bitcode$' -- env PATH="$P/bin:$PATH" ./complete_words "$COMPLETION" xcargo extract hello.xcargo --variant ''
expect 0 '^$' -- env PATH="$P/bin:$PATH" ./complete_words "$COMPLETION" xcargo run --entry ''  # no cargo named yet
# bash-completion finds it under the prefix (XDG_DATA_DIRS names the prefix's share/, as for /usr/local).
expect 0 '^complete -o filenames -F _xcargo xcargo$' -- env XDG_DATA_DIRS="$P/share" bash -c \
  'source /usr/share/bash-completion/bash_completion && __load_completion xcargo && complete -p xcargo'

# The loader as a user of its own (what the unit's DynamicUser gives it): no root at all.
# Its client here is root, another user, which its same-host door refuses: it comes in
# through the TLS front door, the node key pinned, as the unit's comment says.
if [ "$(id -u)" -eq 0 ] && id nobody > id.txt 2>&1; then
  mkdir ucache run && chmod 700 ucache
  "$P/bin/xcargo" keygen -o run/node > keygen.out 2>&1
  chown -R nobody ucache run
  setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --inh-caps=-all \
    "$P/bin/xcargo-loader" --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 --node-key run/node --ready-file run/unpriv.addr \
    --trust trust --clients clients --cache ucache 2> unpriv.log &
  pids+=($!)
  diagnose unpriv.log
  check "the loader starts as nobody" wait_file run/unpriv.addr
  eventually 10 "its ready file names the front door" grep -q '^tls://' run/unpriv.addr
  DOOR=$(sed -n 2p run/unpriv.addr)
  expect 4 'runs as uid [0-9]+, not as this user' -- cbuild/offload "$(head -1 run/unpriv.addr)" 5
  expect 0 'pinned to key' -- "$P/bin/xcargo" known-nodes --file known_nodes add "${DOOR#tls://}" run/node.pub
  expect 0 '^150 variant x86_64' -- env XCARGO_KNOWN_NODES="$TMP/known_nodes" cbuild/offload "$DOOR" 5
  expect 0 '^nobody$' -- ps -o user= -p "${pids[-1]}"
  expect 0 'worker runs as nobody|files: Landlock' -- cat unpriv.log
fi
finish
