// Which loader a network verb talks to: --to HOST:PORT, or a private local loader.
#pragma once

#include <memory>
#include <string>

#include "xcargo/client.h"

namespace xcargo::cli {

// The xcargo-loader beside this xcargo binary, or $XCARGO_LOADER.
std::string local_loader_path();

}  // namespace xcargo::cli
