// What a worker started by exec (an address layout of its own) is handed by its supervisor:
// its settings, what the supervisor resolved at start, and the descriptors it inherits.
#pragma once

#include <optional>
#include <string>

#include "auth/auth.h"
#include "config.h"
#include "sandbox/privileges.h"
#include "xcargo/error.h"
#include "xcargo/trust.h"
#include "xcargo/types.h"

namespace xcargo::loader {

struct WorkerStart {
  LoaderConfig cfg;  // every setting, the listen addresses as bound, the cluster's nodes, its memory fds
  std::optional<sandbox::User> user;  // the worker's, when it is not the loader's
  PublicKey node_key;                 // what the key service proves
  // The authorized client keys as the supervisor loaded them (a key-list file's text), for a
  // worker that cannot load them again; nullopt: allow-anyone.
  std::optional<std::string> clients;
  std::string tenant;  // the tenant whose kernels it runs (tenancy.h; "": the loader's only one)
  int addr_fd = -1, go_fd = -1, incident_fd = -1, compiler_fd = -1, key_fd = -1, door_fd = -1, tls_fd = -1;
};

// Records "KEY LENGTH\nVALUE\n", in any order; decode refuses anything else, and anything
// over kMaxWorkerStart bytes.
inline constexpr size_t kMaxWorkerStart = 1 << 20;
Bytes encode(const WorkerStart& w);
[[nodiscard]] Result<WorkerStart> decode_worker_start(ByteView bytes);

// Authorized keys as the text of a key-list file (auth::AuthorizedKeys::parse reads it back):
// WorkerStart::clients.
std::string clients_text(const auth::AuthorizedKeys& keys);

}  // namespace xcargo::loader
