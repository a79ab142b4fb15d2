// The loader's network side: a UCX listener, one endpoint per client, requests received as
// Active Messages (large ones by rendezvous), handled by a Handler, replies sent back.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "handler.h"
#include "xcargo/error.h"

namespace xcargo::loader {

class UcxServer {
public:
  using Log = std::function<void(const std::string&)>;
  // Listens on HOST:PORT (port 0 picks a free one).
  static Result<std::unique_ptr<UcxServer>> start(const std::string& listen, Handler& handler, Log log);
  ~UcxServer();

  // The address actually listened on.
  std::string address() const;
  // Serves until stop becomes true; blocks in the kernel when idle (no spinning).
  void run(const std::atomic<bool>& stop);

private:
  UcxServer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xcargo::loader
