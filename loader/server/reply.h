// One message a node sends: its type, its header and its data (the AM's two parts).
#pragma once

#include "xcargo/types.h"
#include "wire/wire.h"

namespace xcargo::loader {

struct Reply {
  wire::MsgType type{};
  Bytes header, data;
};

}  // namespace xcargo::loader
