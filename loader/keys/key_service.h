// The key service: the one process of a loader that holds the node's private key. The
// supervisor never loads it, so the workers (its forks, where kernels run) never hold it;
// each worker gets a connection and asks for the proofs its handshakes need
// (loader/SECURITY.md, "The node key"; the packets: protocol.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "xcargo/error.h"
#include "xcargo/passphrase.h"
#include "xcargo/trust.h"

namespace xcargo::loader::keys {

class KeyService {
public:
  // Run in the service's process once the key is loaded, before it serves: its sandbox.
  // control_fd is the descriptor it must keep. An error ends the service, and start()
  // returns it.
  using Confine = std::function<Status(int control_fd)>;

  // Forks the service: named xcargo-keys, not dumpable from its first instruction (a process
  // of the same user cannot trace it or read its memory), killed when this process dies. It
  // loads `path` (a new key if empty), asking `passphrase` for an encrypted one (its terminal
  // is this process's), forgets the passphrase's variable, then confines itself. Returns once
  // it answered: with its public key, or with why it could not (a key error names the file).
  // The caller forgets the passphrase's variable too.
  // client_proofs: whether it signs this node's proofs as a client of its peers (a node in a
  // cluster); a node alone proves its key only to its clients.
  [[nodiscard]] static Result<KeyService> start(const std::string& path, const PassphraseSource& passphrase,
                                                const Confine& confine, bool client_proofs = true);

  KeyService(KeyService&& o) noexcept;
  KeyService& operator=(KeyService&&) = delete;
  ~KeyService();  // closes the control connection (the service ends) and reaps it

  const PublicKey& public_key() const { return public_; }
  pid_t pid() const { return pid_; }
  // A connection for one worker (its end: the caller gives it to the worker and closes it),
  // served until the worker's end closes or disconnect(id) is called.
  struct Connection {
    int fd = -1;
    uint64_t id = 0;
  };
  [[nodiscard]] Result<Connection> connect();
  // The worker of connection id has ended: the service closes its end, whoever holds the
  // worker's now (a kernel can pass it to a process outside the loader, which must not have
  // the node key sign for it after the worker has ended; guarded by key_service_test.cpp,
  // "a worker's connection ends with the worker, whoever holds it").
  void disconnect(uint64_t id);
  // Whether the service still runs; if not, *why says how it ended (reaped here).
  bool alive(std::string* why);

private:
  KeyService(pid_t pid, int control, PublicKey key) : pid_(pid), control_(control), public_(std::move(key)) {}
  pid_t pid_ = -1;
  int control_ = -1;
  PublicKey public_;
  uint64_t connections_ = 0;  // made so far: the n-th is id n, on both sides
};

// The service's loop: serves the connections handed over on control_fd until it closes, each
// until its worker's end closes or the supervisor says the worker ended. At most
// kMaxConnections at once (each tenant's worker, its standby, those ending: 4 each for 128
// tenants): past that, the oldest is closed. Returns the process's exit code.
inline constexpr size_t kMaxConnections = 512;
int serve(int control_fd, const class NodeKey& key, bool client_proofs = true);

}  // namespace xcargo::loader::keys
