// Cargos built by the real xcargo binary (XCARGO_BIN), signed by the vector signer: for the
// tests of the loader's engine and handler.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support.h"
#include "xcargo/file.h"

namespace xcargo::test {

// The vector signer's key, copied with mode 0600: xcargo refuses the published 0644 file.
inline std::string signer_key_path() {
  static const ScratchDir dir;
  const std::string copy = dir / "vector-signer.key";
  if (!std::filesystem::exists(copy)) {
    auto pem = read_file(vectors_dir() + "/keys/vector-signer.key", 64 * 1024);
    REQUIRE(pem.ok());
    REQUIRE(write_file(copy, *pem, 0600).ok());
  }
  return copy;
}

// Builds a source file, signed by the vector signer; extra: more `xcargo build` options.
inline Bytes build_cargo(const ScratchDir& dir, const std::string& path, const std::string& extra = "") {
  std::string out = dir / (std::filesystem::path(path).stem().string() + ".xcargo");
  std::string cmd = std::string(XCARGO_BIN) + " build " + path + " -o " + out + " --key " + signer_key_path() + " " + extra +
                    " 2>>" + (dir / "build.err");
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto b = read_file(out, 1 << 26);
  REQUIRE(b.ok());
  return *b;
}

// The same for one of examples/.
inline Bytes build_example(const ScratchDir& dir, const std::string& src, const std::string& extra = "") {
  return build_cargo(dir, source_dir() + "/examples/" + src, extra);
}

}  // namespace xcargo::test
