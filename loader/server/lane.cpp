// The worker's end of a shared-memory lane (lane.h).
#include "server/lane.h"

#include <sys/ipc.h>
#include <sys/shm.h>

#include <cerrno>
#include <cstring>

#include "auth/auth.h"

namespace xcargo::loader {

using namespace wire::lane;

Result<std::unique_ptr<Lane>> Lane::create(Ep ep, uint64_t serial) {
  auto nonce = auth::random_nonce();
  XC_TRY(nonce);
  std::unique_ptr<Lane> l(new Lane());
  std::memcpy(l->nonce_.data(), nonce->data(), l->nonce_.size());
  l->id_ = ::shmget(IPC_PRIVATE, kSegmentSize, IPC_CREAT | IPC_EXCL | 0600);
  if (l->id_ < 0) return Error(Errc::io, std::string("lane: shmget: ") + std::strerror(errno));
  void* p = ::shmat(l->id_, nullptr, 0);
  const int err = errno;
  ::shmctl(l->id_, IPC_RMID, nullptr);  // Linux still lets the client attach it by id
  if (p == reinterpret_cast<void*>(-1)) return Error(Errc::io, std::string("lane: shmat: ") + std::strerror(err));
  l->seg_ = Segment(static_cast<uint8_t*>(p));
  l->seg_.init(l->nonce_);
  l->ep_ = ep;
  l->serial_ = serial;
  l->buf_.resize(kCapacity);
  l->stage_.reserve(kStageBytes);
  l->staged_.reserve(kStageMost);
  return l;
}

Lane::~Lane() {
  if (seg_) ::shmdt(seg_.base());
}

Ring::Got Lane::next(wire::MsgType* type, ByteView* header, ByteView* data, std::string* why) {
  return next_into(buf_, type, header, data, why);
}

Ring::Got Lane::next_into(Bytes& buf, wire::MsgType* type, ByteView* header, ByteView* data, std::string* why) {
  if (broken_) return Ring::Got::nothing;
  const Ring r = seg_.requests();
  const Ring::Got g = r.read(next_request_, buf, type, header, data, why);
  if (g == Ring::Got::malformed) broken_ = true;
  if (g != Ring::Got::frame) return g;
  r.taken(++next_request_);
  used_ = true;
  return g;
}

bool Lane::reply(wire::MsgType type, ByteView header, ByteView data) {
  const Ring r = seg_.replies();
  if (broken_ || !used_ || !fits(header, data) || !r.has_room(next_reply_, &replies_taken_)) return false;
  if (staged_.empty() && !pending()) {  // no request behind it: its client waits for this one
    r.write(next_reply_++, type, header, data);
    ++unflushed_;
    return true;
  }
  const size_t size = header.size() + data.size();
  if (staged_.size() == kStageMost || stage_.size() + size > kStageBytes) publish();
  const size_t at = stage_.size();
  stage_.insert(stage_.end(), header.begin(), header.end());
  stage_.insert(stage_.end(), data.begin(), data.end());
  staged_.push_back({type, uint32_t(at), uint32_t(header.size()), uint32_t(data.size())});
  ++next_reply_;
  ++unflushed_;
  return true;
}

void Lane::publish() {
  if (staged_.empty()) return;
  const Ring r = seg_.replies();
  uint64_t index = next_reply_ - staged_.size();
  for (const Staged& m : staged_)
    r.write(index++, m.type, ByteView(stage_.data() + m.at, m.header), ByteView(stage_.data() + m.at + m.header, m.data));
  staged_.clear();
  stage_.clear();
}

bool Lane::flush() {
  publish();
  if (!unflushed_) return false;
  unflushed_ = 0;
  fence();
  return seg_.client_idle();
}

}  // namespace xcargo::loader
