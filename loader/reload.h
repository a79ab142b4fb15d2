// What a worker does when the trust directory or the clients file changes while it runs:
// keys and cargo rules reloaded within a second, and the worker ended in order when a change
// revokes what it ran or whom it served (its standby, which ran nothing, takes over).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "auth/auth.h"
#include "xcargo/error.h"

namespace xcargo::loader {

class AuthGate;
class Engine;

// What changes when the keys in a trust directory (or its revocation list and cargo rules),
// or an authorized-clients file or directory, change: in a directory, any entry (a file that
// is no key is reported when it appears).
std::string files_stamp(const std::string& path);

// The clients at `path` that a worker of `tenant` accepts (tenancy.h: its own keys and the
// node keys); every client for "" (the only tenant).
[[nodiscard]] Result<auth::AuthorizedKeys> load_clients(const std::string& path, const std::string& tenant);

class WorkerReload {
public:
  struct Options {
    std::string trust;    // the trust directory
    std::string clients;  // the clients file or directory ("": none, allow-anyone)
    std::string tenant;   // whose workers ("": the only tenant)
    std::function<void(const std::string&)> note;  // a line for the log (the serving worker's)
    std::function<void(const std::string&)> end;   // ends this worker in order, saying why
  };
  // clients: the keys the gate holds now, read when the clients' files had clients_stamp;
  // trust_stamp: the trust directory's when the engine's store was read.
  WorkerReload(Options o, AuthGate& gate, Engine& engine, std::optional<auth::AuthorizedKeys> clients, std::string clients_stamp,
               std::string trust_stamp);

  // Applies what changed since the last check. Any thread, one check at a time; a standby
  // calls it as it takes over, so that it serves under what holds now.
  void check();
  // Checks every second until stop is set.
  void run(const std::atomic<bool>& stop);

private:
  void check_clients();
  void check_trust();

  Options o_;
  AuthGate& gate_;
  Engine& engine_;
  std::mutex m_;
  std::optional<auth::AuthorizedKeys> clients_;
  std::string clients_stamp_, trust_stamp_;
};

}  // namespace xcargo::loader
