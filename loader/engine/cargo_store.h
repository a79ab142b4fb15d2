// Kept cargos: the verified cargos a worker loaded, in a shared memory object the supervisor
// owns, so that the worker that replaces it (a standby taking over after a kernel failed) has
// them loaded, or loads them on first use, without their clients pushing them again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::loader {

class CargoStore {
public:
  static constexpr size_t kSlots = 32;                // cargos kept at most
  static constexpr uint64_t kMaxBytes = 256ull << 20;  // their bytes together at most

  // The shared memory object for cargos of up to max_cargo bytes each: sparse (it takes
  // memory only for cargos kept), its size sealed. The caller owns the descriptor.
  [[nodiscard]] static Result<int> create_memory(uint64_t max_cargo);
  // The store in fd (from create_memory with the same max_cargo; not owned).
  [[nodiscard]] static Result<std::unique_ptr<CargoStore>> open(int fd, uint64_t max_cargo);

  // Keeps a cargo (after a load that verified it), unless one of its digest is kept; the
  // oldest kept cargos make room when slots or bytes run out. Thread-safe.
  [[nodiscard]] Status keep(const Digest& digest, ByteView cargo);
  // What the table says is kept under `digest`, and every cargo kept. The table and the bytes
  // were written by a worker that runs kernels: they are untrusted, to be verified like a
  // push (a torn or forged entry fails verification, or names another digest).
  std::optional<Bytes> find(const Digest& digest) const;
  bool contains(const Digest& digest) const;  // find() without reading the bytes
  // The digests kept, the latest first. Entries count within the limits however the table
  // was written: at most kSlots, each at most a slot, all together at most kMaxBytes (the
  // oldest beyond that are not entries).
  std::vector<Digest> digests() const;

private:
  CargoStore() = default;
  struct Entry;
  std::vector<Entry> table() const;
  std::optional<Bytes> read(const Entry& e, size_t slot) const;

  int fd_ = -1;
  uint64_t slot_size_ = 0;
};

}  // namespace xcargo::loader
