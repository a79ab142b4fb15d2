// The loader's log: one line per event on stderr, written by a background thread in batches
// so that logging every request costs the request path about a hundred nanoseconds.
#pragma once

#include <string_view>

namespace xcargo::loader {

// Queues "xcargo-loader: LINE\n" for stderr.
void log_line(std::string_view line);
// Writes everything queued; call before _exit().
void flush_log();

}  // namespace xcargo::loader
