// NodeStats: counts outlive the process that made them, labels are capped, running kernels
// count only while their worker is not reaped.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "stats/node_stats.h"

using namespace xcargo;
using namespace xcargo::loader;
using wire::ReplyStatus;

namespace {
std::unique_ptr<NodeStats> open_stats(int fd, bool writable) {
  auto s = NodeStats::open(fd, writable);
  REQUIRE(s.ok());
  return std::move(*s);
}
}  // namespace

TEST_CASE("counts survive the worker that made them", "[node_stats]") {
  auto fd = NodeStats::create_memory();
  REQUIRE(fd.ok());
  // A worker (a child process) serves, counts four answers, one of them a crash, and dies.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto s = NodeStats::open(*fd, true);
    if (!s.ok()) ::_exit(1);
    (*s)->begin_serving();
    const uint16_t cargo = (*s)->label(LabelKind::cargo, "0123456789abcdef add");
    const uint16_t client = (*s)->label(LabelKind::client, "c0ffee");
    for (int i = 0; i < 3; ++i) (*s)->answered(cargo, client, ReplyStatus::ok, 10, 4);
    (*s)->kernel_started();  // the crash: the kernel never ends
    (*s)->answered(cargo, client, ReplyStatus::crashed, 10, 0);
    ::_exit(0);
  }
  int ws = 0;
  REQUIRE(::waitpid(pid, &ws, 0) == pid);
  REQUIRE(WEXITSTATUS(ws) == 0);
  auto supervisor = open_stats(*fd, true);
  supervisor->worker_restarted();
  StatsSnapshot s = supervisor->snapshot();
  CHECK(s.total.invocations == 4);
  CHECK(s.total.failed() == 1);
  CHECK(s.total.by_status[size_t(ReplyStatus::crashed)] == 1);
  CHECK(s.total.bytes_in == 40);
  CHECK(s.total.bytes_out == 12);
  CHECK(s.worker_restarts == 1);
  CHECK(s.running == 1);  // its worker not reaped yet
  supervisor->worker_ended(pid);
  CHECK(supervisor->snapshot().running == 0);
  REQUIRE(s.cargos.size() == 1);
  CHECK(s.cargos[0].value == "0123456789abcdef add");
  CHECK(s.cargos[0].counts.invocations == 4);
  REQUIRE(s.clients.size() == 1);
  CHECK(s.clients[0].value == "c0ffee");
  // The next worker adds to them.
  auto next = open_stats(*fd, true);
  next->begin_serving();
  next->answered(next->label(LabelKind::cargo, "0123456789abcdef add"), next->label(LabelKind::client, "c0ffee"),
                 ReplyStatus::no_entry, 0, 0);
  s = open_stats(*fd, false)->snapshot();
  CHECK(s.total.invocations == 5);
  CHECK(s.total.failed() == 2);
  CHECK(s.cargos[0].counts.invocations == 5);
  ::close(*fd);
}

TEST_CASE("label values past the cap count under other", "[node_stats]") {
  auto fd = NodeStats::create_memory();
  REQUIRE(fd.ok());
  auto w = open_stats(*fd, true);
  w->begin_serving();
  for (size_t i = 0; i < kMaxLabelValues + 10; ++i) {
    const uint16_t c = w->label(LabelKind::client, "key" + std::to_string(i));
    CHECK(c == (i < kMaxLabelValues ? uint16_t(i) : kOtherLabel));
    w->answered(w->label(LabelKind::cargo, "x"), c, ReplyStatus::ok, 1, 1);
  }
  const StatsSnapshot s = w->snapshot();
  REQUIRE(s.clients.size() == kMaxLabelValues + 1);
  CHECK(s.clients.back().value == kOtherLabelText);
  CHECK(s.clients.back().counts.invocations == 10);
  // A long value is cut, and found again by its cut form.
  const std::string long_value(200, 'z');
  CHECK(w->label(LabelKind::cargo, long_value) == w->label(LabelKind::cargo, long_value));
  ::close(*fd);
}

TEST_CASE("a memory object of another size is refused", "[node_stats]") {
  const int fd = ::memfd_create("not-stats", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 4096) == 0);
  CHECK_FALSE(NodeStats::open(fd, false).ok());
  ::close(fd);
}
