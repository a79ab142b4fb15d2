// Implementation of the shared test helpers.
#include "support.h"

#include "../../format-spec/vectors/tiny_elf.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unistd.h>

#include "xcargo/file.h"

namespace xcargo::test {

ScratchDir::ScratchDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "xcargo-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

// The vectors' keys are published on purpose, mode 0644 in git: read as PEM, since
// SigningKey::load refuses a private key file others can read.
static SigningKey load_key(const std::string& name) {
  const std::string path = vectors_dir() + "/keys/" + name;
  auto pem = read_file(path, 64 * 1024);
  if (!pem.ok()) throw std::runtime_error(path + ": " + pem.error().message());
  auto k = SigningKey::from_pem(std::string_view(reinterpret_cast<const char*>(pem->data()), pem->size()), path);
  if (!k.ok()) throw std::runtime_error(k.error().message());
  return std::move(*k);
}

SigningKey vector_signer() { return load_key("vector-signer.key"); }
SigningKey other_signer() { return load_key("other-signer.key"); }

SigningKey fresh_key() {
  auto k = SigningKey::generate();
  if (!k.ok()) throw std::runtime_error(k.error().message());
  return std::move(*k);
}

TrustStore vector_trust() {
  auto t = TrustStore::load(vectors_dir() + "/keys/vector-signer.pub");
  if (!t.ok()) throw std::runtime_error(t.error().message());
  return std::move(*t);
}

Manifest small_manifest() {
  Manifest m;
  m.name = "small";
  m.version = "1.2.3";
  m.entries = {"add", "sub"};
  m.toolchain = {{"xcargo", "test"}};
  return m;
}

std::vector<Payload> small_payloads() {
  Bytes obj = tiny_elf::object(62, {"memcpy", "xc_reply"});
  Bytes bc(300, 0x33);
  bc[0] = 'B', bc[1] = 'C', bc[2] = 0xC0, bc[3] = 0xDE;
  Payload b{{"bitcode", VariantKind::bitcode, 0, "le64-unknown-unknown", "generic", 0, {}, {{"add", "add"}, {"sub", "sub"}}, {"xc_reply"}}, bc};
  Payload x{{"x86_64", VariantKind::object, 0, "x86_64-unknown-linux-gnu", "x86-64", 0, {}, {{"add", "add"}, {"sub", "sub"}}, {"memcpy", "xc_reply"}}, obj};
  return {b, x};
}

std::string small_manifest_text() {
  Manifest m = small_manifest();
  uint32_t i = 1;
  for (auto& p : small_payloads()) {
    p.variant.section = i++;
    p.variant.raw_size = p.raw.size();
    p.variant.sha256 = sha256(p.raw);
    m.variants.push_back(p.variant);
  }
  return emit_manifest(m);
}

Bytes small_cargo(int zstd_level) {
  auto b = write_cargo(small_manifest(), small_payloads(), {zstd_level});
  if (!b.ok()) throw std::runtime_error(b.error().message());
  return std::move(*b);
}

}  // namespace xcargo::test
