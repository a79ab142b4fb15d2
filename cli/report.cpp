// Error and notice printing for the CLI.
#include "report.h"

#include <cstdio>

#include "exit_codes.h"

namespace xcargo::cli {

int report(const Error& error, const std::string& subject) {
  std::string line = "xcargo: error: ";
  if (!subject.empty()) line += subject + ": ";
  line += error.message();
  std::fprintf(stderr, "%s\n", line.c_str());
  for (const auto& h : error.hints()) std::fprintf(stderr, "hint: %s\n", h.c_str());
  return exit_code_for(error.code());
}

void note(const std::string& message) { std::fprintf(stderr, "xcargo: %s\n", message.c_str()); }

}  // namespace xcargo::cli
