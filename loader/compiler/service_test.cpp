// The compile service over a socket pair, as a worker uses it: a quick tier first, then the
// -O2 object its job went on to compile and store.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "service.h"
#include "support.h"
#include "xcargo/file.h"

using namespace xcargo;
using namespace xcargo::loader;

TEST_CASE("the compile service answers a quick tier, then the -O2 object its job stored", "[compiler][tiers]") {
  test::ScratchDir dir;
  auto pem = read_file(test::vectors_dir() + "/keys/vector-signer.key", 64 * 1024);
  REQUIRE(pem.ok());
  REQUIRE(write_file(dir / "signer.key", *pem, 0600).ok());
  const std::string out = dir / "hello.xcargo";
  const std::string cmd = std::string(XCARGO_BIN) + " build " + test::source_dir() + "/examples/hello/hello.c -t bitcode -o " + out +
                          " --key " + (dir / "signer.key") + " 2>>" + (dir / "build.err");
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto bytes = read_file(out, 1 << 20);
  REQUIRE(bytes.ok());
  TrustStore trust = test::vector_trust();
  auto cargo = load_cargo(std::move(*bytes), &trust);
  REQUIRE(cargo.ok());
  const Variant& v = cargo->manifest().variants.at(0);

  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(sv[0]);
    compiler::Options o;
    o.trust = test::vectors_dir() + "/keys/vector-signer.pub";
    o.cache_dir = dir / "cache";
    ::_exit(compiler::serve(sv[1], o));
  }
  ::close(sv[1]);
  Compiler compile = compiler::remote(sv[0], std::chrono::seconds(120));
  auto quick = compile(*cargo, v, true);
  REQUIRE(quick.ok());
  CHECK(quick->quick);
  CHECK_FALSE(quick->cache_hit);
  auto full = compile(*cargo, v, false);  // waits for the job's -O2 compile
  REQUIRE(full.ok());
  CHECK_FALSE(full->quick);
  CHECK(full->cache_hit);
  CHECK(full->object != quick->object);
  auto again = compile(*cargo, v, true);  // -O2 is there now: no quick tier
  REQUIRE(again.ok());
  CHECK_FALSE(again->quick);
  CHECK(again->object == full->object);
  ::close(sv[0]);
  int ws = 0;
  REQUIRE(::waitpid(pid, &ws, 0) == pid);
  CHECK((WIFEXITED(ws) && WEXITSTATUS(ws) == 0));
}
