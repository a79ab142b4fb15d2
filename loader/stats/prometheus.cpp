// The node's counters in Prometheus' text exposition format (see prometheus.h).
#include "stats/prometheus.h"

#include <cstdio>

namespace xcargo::loader {

std::string prometheus_label(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) out += '?';
    else out += c;
  }
  return out;
}

namespace {

struct Writer {
  std::string out;
  void family(const char* name, const char* type, const char* help) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n# TYPE ").append(name).append(" ").append(type).append("\n");
  }
  void sample(const char* name, std::string_view labels, uint64_t v) {
    out.append(name);
    if (!labels.empty()) out.append("{").append(labels).append("}");
    out.append(" ").append(std::to_string(v)).append("\n");
  }
  void sample(const char* name, double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.3f", v);
    out.append(name).append(" ").append(b).append("\n");
  }
};

// A cargo's label value is "DIGEST NAME" (Handler): cargo="NAME",digest="DIGEST".
std::string cargo_labels(const std::string& value) {
  const size_t sp = value.find(' ');
  if (sp == std::string::npos) return "cargo=\"" + prometheus_label(value) + "\",digest=\"\"";
  return "cargo=\"" + prometheus_label(value.substr(sp + 1)) + "\",digest=\"" + prometheus_label(value.substr(0, sp)) + "\"";
}

}  // namespace

std::string prometheus_text(const StatsSnapshot& s, double now_unix_s) {
  Writer w;
  w.family("xcargo_loader_start_time_seconds", "gauge", "When the loader started, in seconds since the Unix epoch.");
  w.sample("xcargo_loader_start_time_seconds", s.started_unix_s);
  w.family("xcargo_loader_uptime_seconds", "gauge", "Seconds since the loader started.");
  w.sample("xcargo_loader_uptime_seconds", now_unix_s > s.started_unix_s ? now_unix_s - s.started_unix_s : 0.0);
  w.family("xcargo_worker_restarts_total", "counter", "Workers that took over from one that ended (a kernel's crash, time-out or sandbox stop, or any other end).");
  w.sample("xcargo_worker_restarts_total", "", s.worker_restarts);
  w.family("xcargo_invocations_total", "counter", "Invocations and forwards answered, whatever their status.");
  w.sample("xcargo_invocations_total", "", s.total.invocations);
  w.family("xcargo_invocations_failed_total", "counter", "Invocations answered with a status other than ok, by status (wire-protocol.md section 5).");
  for (size_t i = 1; i < kStatusKinds; ++i)
    w.sample("xcargo_invocations_failed_total", std::string("status=\"") + wire::status_name(wire::ReplyStatus(i)) + "\"", s.total.by_status[i]);
  w.family("xcargo_kernel_crashes_total", "counter", "Kernels that crashed (status crashed); each ends its worker.");
  w.sample("xcargo_kernel_crashes_total", "", s.total.by_status[size_t(wire::ReplyStatus::crashed)]);
  w.family("xcargo_kernel_timeouts_total", "counter", "Kernels that ran past the time limit (status timeout).");
  w.sample("xcargo_kernel_timeouts_total", "", s.total.by_status[size_t(wire::ReplyStatus::timeout)]);
  w.family("xcargo_invocations_in_flight", "gauge", "Kernels running now.");
  w.sample("xcargo_invocations_in_flight", "", s.running);
  w.family("xcargo_input_bytes_total", "counter", "Bytes of the inputs of invocations answered.");
  w.sample("xcargo_input_bytes_total", "", s.total.bytes_in);
  w.family("xcargo_output_bytes_total", "counter", "Bytes of the outputs of their results.");
  w.sample("xcargo_output_bytes_total", "", s.total.bytes_out);
  struct PerLabel {
    const char* invocations;
    const char* failed;
    const char* in;
    const char* out;
    const char* who;
  };
  for (LabelKind kind : {LabelKind::cargo, LabelKind::client}) {
    const bool cargo = kind == LabelKind::cargo;
    const PerLabel n = cargo ? PerLabel{"xcargo_cargo_invocations_total", "xcargo_cargo_invocations_failed_total",
                                        "xcargo_cargo_input_bytes_total", "xcargo_cargo_output_bytes_total", "cargo"}
                             : PerLabel{"xcargo_client_invocations_total", "xcargo_client_invocations_failed_total",
                                        "xcargo_client_input_bytes_total", "xcargo_client_output_bytes_total", "client key"};
    const auto& list = cargo ? s.cargos : s.clients;
    auto labels = [&](const LabelCounts& l) { return cargo ? cargo_labels(l.value) : "client=\"" + prometheus_label(l.value) + "\""; };
    const std::string more = std::string(" (at most ") + std::to_string(kMaxLabelValues) + " values; the rest under \"" + kOtherLabelText + "\").";
    w.family(n.invocations, "counter", (std::string("Invocations answered, by ") + n.who + more).c_str());
    for (const LabelCounts& l : list) w.sample(n.invocations, labels(l), l.counts.invocations);
    w.family(n.failed, "counter", (std::string("Invocations answered with a status other than ok, by ") + n.who + more).c_str());
    for (const LabelCounts& l : list) w.sample(n.failed, labels(l), l.counts.failed());
    w.family(n.in, "counter", (std::string("Input bytes, by ") + n.who + more).c_str());
    for (const LabelCounts& l : list) w.sample(n.in, labels(l), l.counts.bytes_in);
    w.family(n.out, "counter", (std::string("Output bytes, by ") + n.who + more).c_str());
    for (const LabelCounts& l : list) w.sample(n.out, labels(l), l.counts.bytes_out);
  }
  return w.out;
}

}  // namespace xcargo::loader
