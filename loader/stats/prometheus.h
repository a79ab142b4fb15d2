// The node's counters in Prometheus' text exposition format, version 0.0.4.
#pragma once

#include <string>
#include <string_view>

#include "stats/node_stats.h"

namespace xcargo::loader {

// Every metric with its # HELP and # TYPE lines (loader/README.md, "Metrics", lists them).
// now_unix_s gives the uptime.
std::string prometheus_text(const StatsSnapshot& s, double now_unix_s);
// A label value as the format quotes it: \ " and newline escaped; bytes outside printable
// ASCII (the table is the workers' word) become '?'.
std::string prometheus_label(std::string_view value);

}  // namespace xcargo::loader
