// The exposition text: every family has its HELP and TYPE, label values are escaped.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "stats/prometheus.h"

using namespace xcargo::loader;

TEST_CASE("label values are escaped", "[prometheus]") {
  CHECK(prometheus_label("plain-1.0") == "plain-1.0");
  CHECK(prometheus_label("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  CHECK(prometheus_label(std::string("x\x01\x7f\xff", 4)) == "x???");
}

TEST_CASE("every sample follows its family's HELP and TYPE", "[prometheus]") {
  StatsSnapshot s;
  s.started_unix_s = 1000;
  s.worker_restarts = 2;
  s.total.invocations = 5;
  s.total.by_status[0] = 3;
  s.total.by_status[size_t(xcargo::wire::ReplyStatus::crashed)] = 2;
  s.cargos.push_back({"0123456789abcdef cra\"sh", s.total});
  s.clients.push_back({"other", s.total});
  const std::string text = prometheus_text(s, 1010.5);
  CHECK(text.find("xcargo_loader_uptime_seconds 10.500\n") != std::string::npos);
  CHECK(text.find("xcargo_invocations_total 5\n") != std::string::npos);
  CHECK(text.find("xcargo_invocations_failed_total{status=\"crashed\"} 2\n") != std::string::npos);
  CHECK(text.find("xcargo_kernel_crashes_total 2\n") != std::string::npos);
  CHECK(text.find("xcargo_worker_restarts_total 2\n") != std::string::npos);
  CHECK(text.find("xcargo_cargo_invocations_failed_total{cargo=\"cra\\\"sh\",digest=\"0123456789abcdef\"} 2\n") != std::string::npos);
  CHECK(text.find("xcargo_client_invocations_total{client=\"other\"} 5\n") != std::string::npos);
  std::istringstream in(text);
  std::string line, typed;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      typed = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    INFO(line);
    CHECK(line.rfind(typed, 0) == 0);  // a sample of the family just typed
    CHECK(line.find(' ') != std::string::npos);
  }
}
