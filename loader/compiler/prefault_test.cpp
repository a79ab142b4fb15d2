// prefault and the JIT's warm-up: memory left as it was, and a warm-up object like a kernel's.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <set>

#include "engine/jit.h"
#include "compiler/prefault.h"

using namespace xcargo::loader;

namespace {

// Runs f in a child (prefault is for single-threaded forked processes) and returns its exit code.
template <typename F>
int in_child(F f) {
  const pid_t pid = ::fork();
  if (pid == 0) _exit(f());
  int ws = 0;
  ::waitpid(pid, &ws, 0);
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 100 + WTERMSIG(ws);
}

}  // namespace

TEST_CASE("prefault leaves memory as it was and stops when asked", "[prefault]") {
  CHECK(in_child([] {
          std::unique_ptr<uint8_t[]> heap(new uint8_t[1 << 20]);
          for (size_t i = 0; i < (1 << 20); ++i) heap[i] = uint8_t(i * 7);
          const auto st = compiler::prefault(4 << 20, 64 << 20, 256 << 20, nullptr, nullptr);
          if (st.stopped || st.bytes < (4u << 20)) return 1;  // the spare heap at least
          for (size_t i = 0; i < (1 << 20); ++i)
            if (heap[i] != uint8_t(i * 7)) return 2;
          std::unique_ptr<uint8_t[]> later(new uint8_t[2 << 20]);  // from the spare heap
          std::memset(later.get(), 1, 2 << 20);
          return 0;
        }) == 0);
  CHECK(in_child([] {
          const auto st = compiler::prefault(0, 64 << 20, 256 << 20, [](void*) { return true; }, nullptr);
          return st.stopped && st.bytes == 0 ? 0 : 1;
        }) == 0);
  CHECK(in_child([] {  // caps: nothing fits in 4 KiB
          const auto st = compiler::prefault(0, 4096, 4096, nullptr, nullptr);
          return st.bytes <= 4096 ? 0 : 1;
        }) == 0);
}

TEST_CASE("the JIT's warm-up compiles its own module into an object that imports only the runtime", "[prefault]") {
  auto jit = Jit::create();
  REQUIRE(jit.ok());
  auto obj = (*jit)->warm_up();
  REQUIRE(obj.ok());
  CHECK(obj->size() > 64);
  auto undefined = (*jit)->undefined_symbols(*obj, "warm-up");
  REQUIRE(undefined.ok());
  CHECK(std::set<std::string>(undefined->begin(), undefined->end()) == std::set<std::string>{"xc_node_id", "xc_reply"});
  auto addrs = (*jit)->link(*obj, "warm-up", Jit::warm_up_entries());  // as Engine::warm_up links it
  REQUIRE(addrs.ok());
  CHECK(addrs->size() == Jit::warm_up_entries().size());
}
