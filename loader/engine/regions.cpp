// Named memory regions of a node (see regions.h).
#include "regions.h"

#include <sys/mman.h>

#include <algorithm>

namespace xcargo::loader {

namespace {
bool valid_name(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
}
}  // namespace

Regions::~Regions() {
  for (auto& [name, r] : regions_) ::munmap(r->base, r->length);
}

Result<Region*> Regions::create(std::string_view name, uint64_t length) {
  if (!valid_name(name))
    return Error(Errc::invalid_argument, "region name '" + std::string(name.substr(0, 64)) + "' is not 1 to 64 of A-Z a-z 0-9 _ . -");
  if (length == 0) return Error(Errc::invalid_argument, "region '" + std::string(name) + "': its size must not be 0");
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = regions_.find(name); it != regions_.end()) {
    if (it->second->length == length) return it->second.get();
    return Error(Errc::invalid_argument, "region '" + std::string(name) + "' exists with " +
                                             std::to_string(it->second->length) + " bytes, not " + std::to_string(length));
  }
  if (regions_.size() >= kMaxRegions) return Error(Errc::limit, "this node already has " + std::to_string(kMaxRegions) + " regions");
  if (length > max_total_ - total_)
    return Error(Errc::limit, "region '" + std::string(name) + "' of " + std::to_string(length) +
                                  " bytes would take this node's regions past their limit of " + std::to_string(max_total_));
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return Error(Errc::limit, "region '" + std::string(name) + "': out of memory");
  auto r = std::make_unique<Region>();
  r->name = std::string(name);
  r->base = static_cast<uint8_t*>(p);
  r->length = length;
  total_ += length;
  return (regions_[r->name] = std::move(r)).get();
}

Region* Regions::find(std::string_view name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = regions_.find(name);
  return it == regions_.end() ? nullptr : it->second.get();
}

std::vector<std::pair<std::string, uint64_t>> Regions::list() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const auto& [name, r] : regions_) out.emplace_back(name, r->length);
  return out;
}

}  // namespace xcargo::loader
