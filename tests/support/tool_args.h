// Argument and error helpers for the small tools and benchmarks in tests/ (not Catch2 tests).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace xcargo::test {

// The value after flag `name` (e.g. "--to"), or `def`.
inline std::string arg(int argc, char** argv, const char* name, const char* def = "") {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

// Whether flag `name` (one without a value) was given.
inline bool flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}

// "TOOL: WHAT" on stderr, then exit with status.
[[noreturn]] inline void die(const char* tool, const std::string& what, int status) {
  std::fprintf(stderr, "%s: %s\n", tool, what.c_str());
  std::exit(status);
}

}  // namespace xcargo::test
