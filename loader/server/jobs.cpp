// JobQueue: ready requests first, oldest first; stalled transfers dropped.
#include "server/jobs.h"

#include <algorithm>

#include "timing.h"

namespace xcargo::loader {

bool JobQueue::any_ready() const {
  return std::any_of(jobs_.begin(), jobs_.end(), [](const auto& j) { return j->ready.load(); });
}

std::shared_ptr<Job> JobQueue::take_ready() {
  auto it = std::find_if(jobs_.begin(), jobs_.end(), [](const auto& j) { return j->ready.load(); });
  if (it == jobs_.end()) return nullptr;
  std::shared_ptr<Job> j = std::move(*it);
  jobs_.erase(it);
  return j;
}

std::vector<std::shared_ptr<Job>> JobQueue::take_all() {
  std::vector<std::shared_ptr<Job>> all(std::make_move_iterator(jobs_.begin()), std::make_move_iterator(jobs_.end()));
  jobs_.clear();
  return all;
}

std::vector<std::shared_ptr<Job>> JobQueue::expire(Clock::time_point now) {
  held_.erase(std::remove_if(held_.begin(), held_.end(), [](const auto& j) { return j->ready.load(); }), held_.end());
  std::vector<std::shared_ptr<Job>> late;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if ((*it)->ready || now - (*it)->since < timing::transfer_deadline((*it)->length)) {
      ++it;
      continue;
    }
    late.push_back(std::move(*it));
    it = jobs_.erase(it);
  }
  return late;
}

}  // namespace xcargo::loader
