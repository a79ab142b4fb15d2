// The worker's end of a shared-memory lane (lane.h).
#include "lane.h"

#include <sys/ipc.h>
#include <sys/shm.h>

#include <cerrno>
#include <cstring>

#include "xcargo/auth.h"

namespace xcargo::loader {

using namespace wire::lane;

Result<std::unique_ptr<Lane>> Lane::create(ucp_ep* ep, uint64_t serial) {
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
  return l;
}

Lane::~Lane() {
  if (seg_) ::shmdt(seg_.base());
}

Ring::Got Lane::next(wire::MsgType* type, ByteView* header, ByteView* data, std::string* why) {
  if (broken_) return Ring::Got::nothing;
  const Ring r = seg_.requests();
  const Ring::Got g = r.read(next_request_, buf_, type, header, data, why);
  if (g == Ring::Got::malformed) broken_ = true;
  if (g != Ring::Got::frame) return g;
  r.taken(++next_request_);
  used_ = true;
  return g;
}

bool Lane::reply(wire::MsgType type, ByteView header, ByteView data) {
  const Ring r = seg_.replies();
  if (broken_ || !used_ || !fits(header, data) || !r.has_room(next_reply_, &replies_taken_)) return false;
  r.write(next_reply_++, type, header, data);
  ++unflushed_;
  return true;
}

bool Lane::flush() {
  if (!unflushed_) return false;
  unflushed_ = 0;
  fence();
  return seg_.client_idle();
}

}  // namespace xcargo::loader
