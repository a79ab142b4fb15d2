// Starting a loader process by exec from a forked child: the plan, made before the fork.
#include "exec_plan.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

extern char** environ;

namespace xcargo::loader {

namespace {

void point(ExecPlan& p) {
  p.argv.clear();
  p.envp.clear();
  for (std::string& a : p.args) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  for (std::string& e : p.env) p.envp.push_back(e.data());
  p.envp.push_back(nullptr);
}

}  // namespace

ExecPlan::ExecPlan(ExecPlan&& o) noexcept { *this = std::move(o); }

ExecPlan& ExecPlan::operator=(ExecPlan&& o) noexcept {
  if (this == &o) return *this;
  if (start >= 0) ::close(start);
  exe = o.exe;
  start = std::exchange(o.start, -1);
  keep = std::move(o.keep);
  args = std::move(o.args);
  env = std::move(o.env);
  point(*this);  // the strings moved: their data may have (short strings live in the object)
  o.argv.clear();
  o.envp.clear();
  return *this;
}

ExecPlan::~ExecPlan() {
  if (start >= 0) ::close(start);
}

Result<ExecPlan> plan_exec(int exe, const std::string& name, const std::string& variable, ByteView record, std::vector<int> keep) {
  ExecPlan p;
  p.exe = exe;
  p.start = ::memfd_create("xcargo-start", MFD_CLOEXEC);
  if (p.start < 0) return Error(Errc::io, std::string("cannot make a memory file for a process's start: ") + std::strerror(errno));
  for (size_t done = 0; done < record.size();) {
    const ssize_t n = ::write(p.start, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error(Errc::io, std::string("cannot write a process's start record: ") + std::strerror(errno));
    done += size_t(n);
  }
  p.keep = std::move(keep);
  p.keep.push_back(p.start);
  p.args = {name};
  const std::string prefix = variable + "=";
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, prefix.c_str(), prefix.size()) != 0) p.env.emplace_back(*e);
  p.env.push_back(prefix + std::to_string(p.start));
  point(p);
  return p;
}

void exec_planned(const ExecPlan& plan) noexcept {
  for (int fd : plan.keep)
    if (fd >= 0) ::fcntl(fd, F_SETFD, 0);
  ::fexecve(plan.exe, plan.argv.data(), plan.envp.data());
}

}  // namespace xcargo::loader
