// xcargo-forbidden-cargo: writes a signed cargo whose kernel imports SYMBOL, which
// `xcargo build` would refuse, so that tests can check that loaders refuse it too. The
// manifest hides the import (its imports are empty): as a bitcode variant (the default),
// verification cannot see it and the loader's link-time check must refuse it; as an object
// variant, verification refuses it (spec 5.4: an object's imports are its undefined symbols).
// usage: xcargo-forbidden-cargo OUT.xcargo KEY SYMBOL [bitcode|object]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "xcargo/file.h"
#include "build/keys.h"
#include "build/writer.h"

using namespace xcargo;

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: xcargo-forbidden-cargo OUT.xcargo KEY SYMBOL [bitcode|object]\n");
    return 2;
  }
  const std::string out = argv[1], sym = argv[3];
  const bool object = argc == 5 && std::string(argv[4]) == "object";
  const std::string src = out + ".c", obj = out + ".o";
  std::ofstream(src) << "int " << sym << "(const char *);\n"
                     << "__attribute__((section(\".text.xc_entry\"))) int run(void *c, const void *i, unsigned long n) {\n"
                     << "  return " << sym << "(\"id\");\n}\n";
  const std::string cmd = std::string(XCARGO_LLVM_BIN_DIR) + "/clang -c -O2 -fPIC " +
                          (object ? "--target=x86_64-unknown-linux-gnu " : "-emit-llvm --target=le64-unknown-unknown ") + src +
                          " -o " + obj;
  if (std::system(cmd.c_str()) != 0) return 1;
  auto bytes = read_file(obj, 1 << 20);
  auto key = SigningKey::load(argv[2]);
  if (!bytes.ok() || !key.ok()) return std::fprintf(stderr, "cannot read the object or the key\n"), 1;
  Manifest m;
  m.name = "forbidden";
  m.version = "1";
  m.entries = {"run"};
  Payload p = object ? Payload{{"x86_64", VariantKind::object, 0, "x86_64-unknown-linux-gnu", "x86-64", 0, {}, {{"run", "run"}}, {}}, *bytes}
                     : Payload{{"bitcode", VariantKind::bitcode, 0, "le64-unknown-unknown", "generic", 0, {}, {{"run", "run"}}, {}}, *bytes};
  auto cargo = write_cargo(m, {p});
  if (!cargo.ok()) return std::fprintf(stderr, "%s\n", cargo.error().message().c_str()), 1;
  auto signed_cargo = add_signature(*cargo, *key);  // sign_cargo would refuse the object variant
  if (!signed_cargo.ok()) return std::fprintf(stderr, "%s\n", signed_cargo.error().message().c_str()), 1;
  return write_file(out, *signed_cargo).ok() ? 0 : 1;
}
