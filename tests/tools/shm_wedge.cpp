// xcargo-shm-wedge: does to a loader's shared-memory receive queue what a client killed in
// the middle of a send does: takes a slot and never fills it (loader/server/self_probe.h).
//
// usage: xcargo-shm-wedge --to HOST:PORT --pid WORKER_PID
// Connects over shared memory (UCX_TLS must allow it), says hello so that UCX maps the
// worker's receive FIFO into this process, then advances the FIFO's head by one slot as a
// sender does before writing, and exits without writing it. Needs the layout of UCX 1.13's
// uct_mm_fifo_ctl_t: head at offset 0 (bit 63: the receiver asked for a signal), tail at 128,
// the owner's pid at 136; a mapping that does not fit it is left alone. Exit 0 when at least
// one FIFO of that pid was wedged, 1 when none was found, 2 on usage or connection errors.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "raw_client.h"
#include "tool_args.h"

using namespace xcargo;
using namespace xcargo::test;

namespace {

constexpr const char* kTool = "xcargo-shm-wedge";
constexpr uint64_t kArmed = uint64_t(1) << 63;

struct Fifo {
  volatile uint64_t* head;
  uint64_t tail;
  int32_t pid;
};

// The FIFO control block at the start of a shared mapping, if it is one owned by pid.
bool fifo_at(uintptr_t start, uintptr_t end, int pid, Fifo* f) {
  if (end - start < 192) return false;
  auto* base = reinterpret_cast<volatile uint8_t*>(start);
  f->head = reinterpret_cast<volatile uint64_t*>(base);
  f->tail = *reinterpret_cast<volatile uint64_t*>(base + 128);
  f->pid = *reinterpret_cast<volatile int32_t*>(base + 136);
  const uint64_t head = *f->head & ~kArmed;
  return f->pid == pid && head >= f->tail && head - f->tail <= 65536;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string to = arg(argc, argv, "--to");
  const int pid = std::atoi(arg(argc, argv, "--pid", "0").c_str());
  if (to.empty() || pid <= 0) die(kTool, "usage: xcargo-shm-wedge --to HOST:PORT --pid WORKER_PID", 2);
  RawClient c(kTool, to);
  c.greet();

  std::ifstream maps("/proc/self/maps");
  int wedged = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find(" rw-s ") == std::string::npos) continue;
    if (line.find("ucx_shm_posix") == std::string::npos && line.find("/SYSV") == std::string::npos) continue;
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream in(line);
    in >> std::hex >> start >> dash >> end;
    Fifo f{};
    if (!fifo_at(start, end, pid, &f)) continue;
    for (;;) {  // take the slot at head, as uct_mm_ep_am_common_send does, and never fill it
      const uint64_t head = *f.head;
      if (__atomic_compare_exchange_n(f.head, const_cast<uint64_t*>(&head), (head + 1) & ~kArmed, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST)) {
        std::printf("wedged the receive FIFO of pid %d at slot %llu (tail %llu)\n", pid,
                    static_cast<unsigned long long>(head & ~kArmed), static_cast<unsigned long long>(f.tail));
        break;
      }
    }
    ++wedged;
  }
  if (!wedged) die(kTool, "no receive FIFO of pid " + std::to_string(pid) + " is mapped here (is UCX using shared memory?)", 1);
  std::fflush(stdout);
  _exit(0);  // as a killed client would: no goodbye
}
