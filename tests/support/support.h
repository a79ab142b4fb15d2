// Shared helpers for xcargo's tests: source paths, scratch directories, small cargos.
#pragma once

#include <filesystem>
#include <string>

#include "xcargo/cargo.h"
#include "build/keys.h"
#include "build/writer.h"

namespace xcargo::test {

inline std::string source_dir() { return XCARGO_SOURCE_DIR; }
inline std::string vectors_dir() { return source_dir() + "/format-spec/vectors"; }

// A directory under the system temp dir, removed with its contents at scope exit.
class ScratchDir {
public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

SigningKey vector_signer();  // format-spec/vectors/keys/vector-signer.key
SigningKey other_signer();
SigningKey fresh_key();      // a new random key each call
TrustStore vector_trust();   // holds vector-signer.pub only

// A small valid unsigned cargo with a bitcode and an x86_64 variant (synthetic payloads).
Bytes small_cargo(int zstd_level = 19);
Manifest small_manifest();
std::vector<Payload> small_payloads();
// The manifest text of small_cargo(): small_manifest() with small_payloads()' variants.
std::string small_manifest_text();

}  // namespace xcargo::test
