// The protocol's loader half: turns one request (type, header, data) into one reply, on top
// of the Engine. Transport-free: the --exec pipe mode and the UCX server both use it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "engine.h"
#include "xcargo/wire.h"

namespace xcargo::loader {

struct Reply {
  wire::MsgType type{};
  Bytes header, data;
};

class Handler {
public:
  using Log = std::function<void(std::string_view)>;
  Handler(Engine& engine, uint64_t max_input, Log log);

  // Never throws; an undecodable request gets a result with status bad_request.
  Reply handle(wire::MsgType type, ByteView header, ByteView data);
  // An invoke that runs only if its kernel is known to be quick (Engine::invoke_if_quick);
  // nullopt when it was not run. Anything else about the request is answered as by handle().
  std::optional<Reply> invoke_if_quick(ByteView header, ByteView data);
  // The limits a node announces in its hello_reply.
  uint64_t max_cargo() const;
  uint64_t max_input() const { return max_input_; }
  // A result with status bad_request for a request that could not be taken in; logged.
  Reply bad_request(const std::string& why);

private:
  Reply hello(ByteView header);
  Reply push(ByteView header, ByteView data);
  Reply has(ByteView header);
  Reply invoke(ByteView header, ByteView data);
  std::optional<Reply> invoke(ByteView header, ByteView data, bool quick_only);
  Reply list(ByteView header);
  Reply stats(ByteView header);

  Engine& engine_;
  uint64_t max_input_;
  Log log_;
};

}  // namespace xcargo::loader
