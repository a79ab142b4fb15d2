// xcargo-loader: runs verified cargos for clients. --exec serves one client over stdin and
// stdout (what `xcargo run` without --to starts).
#include <CLI/CLI.hpp>
#include <openssl/crypto.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine.h"
#include "handler.h"
#include "xcargo/version.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {

bool read_exact(int fd, uint8_t* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::read(fd, p + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += size_t(got);
  }
  return true;
}

bool write_all(int fd, ByteView b) {
  size_t done = 0;
  while (done < b.size()) {
    ssize_t n = ::write(fd, b.data() + done, b.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += size_t(n);
  }
  return true;
}

// One client on stdin/stdout, framed messages, until end of input.
int serve_stdio(Handler& handler) {
  const uint64_t max_data = std::max(handler.max_cargo(), handler.max_input());
  for (;;) {
    uint8_t head[wire::kFrameHeaderSize];
    if (!read_exact(0, head, sizeof head)) return 0;
    uint32_t hlen = 0;
    uint64_t dlen = 0;
    std::memcpy(&hlen, head + 4, 4);
    std::memcpy(&dlen, head + 8, 8);
    if (hlen > wire::kMaxHeader || dlen > max_data) {
      std::fprintf(stderr, "xcargo-loader: refused a frame of %u + %llu bytes (over the limits)\n", hlen,
                   (unsigned long long)dlen);
      return 1;
    }
    Bytes frame(sizeof head + hlen + dlen);
    std::memcpy(frame.data(), head, sizeof head);
    if (!read_exact(0, frame.data() + sizeof head, hlen + size_t(dlen))) return 1;
    auto f = wire::decode_frame(frame, max_data);
    Reply r = f.ok() ? handler.handle(f->type, f->header, f->data)
                     : Reply{wire::MsgType::result, wire::encode(wire::ResultMsg{0, wire::ReplyStatus::bad_request, 0, 0, "", f.error().message()}), {}};
    if (!write_all(1, wire::encode_frame(r.type, r.header, r.data))) return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
  CLI::App app{"xcargo-loader: verifies cargos against trusted keys, compiles or links them for this CPU, runs them"};
  app.name("xcargo-loader");
  app.set_version_flag("--version", std::string("xcargo-loader ") + XCARGO_VERSION_STRING);
  std::string trust, cache, prefer = "native";
  bool exec = false, verbose = false;
  uint64_t max_cargo = format::kMaxCargoSize, max_input = 256ull << 20;
  app.add_flag("--exec", exec, "Serve one client over stdin/stdout (what 'xcargo run' without --to starts)")->required();
  app.add_option("--trust", trust, "Trusted signers: a .pub file or a directory of them")->required()->type_name("PATH");
  app.add_option("--cache", cache, "Directory for JIT output, kept across restarts")->type_name("DIR");
  app.add_option("--prefer", prefer, "Variant policy: native objects first, or bitcode JIT-compiled for this CPU")
      ->check(CLI::IsMember({"native", "bitcode"}))
      ->capture_default_str();
  app.add_option("--max-cargo", max_cargo, "Largest cargo accepted, in bytes")->capture_default_str();
  app.add_option("--max-input", max_input, "Largest invocation input accepted, in bytes")->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "Log every request on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "xcargo-loader: error: %s\nhint: run 'xcargo-loader --help' for usage\n", e.what());
    return 2;
  }
  auto store = TrustStore::load(trust);
  if (!store.ok()) {
    std::fprintf(stderr, "xcargo-loader: error: %s\n", store.error().message().c_str());
    for (const auto& h : store.error().hints()) std::fprintf(stderr, "hint: %s\n", h.c_str());
    return 2;
  }
  EngineConfig config;
  config.cache_dir = cache;
  config.prefer = prefer == "bitcode" ? Prefer::bitcode : Prefer::native;
  config.limits.max_cargo_size = std::min<uint64_t>(max_cargo, format::kMaxCargoSize);
  auto log = [verbose](const std::string& line) {
    if (verbose) std::fprintf(stderr, "xcargo-loader: %s\n", line.c_str());
  };
  config.log = [log](std::string_view line) { log(std::string(line)); };
  auto engine = Engine::create(config, std::move(*store));
  if (!engine.ok()) {
    std::fprintf(stderr, "xcargo-loader: error: %s\n", engine.error().message().c_str());
    return 2;
  }
  Handler handler(**engine, max_input, log);
  return serve_stdio(handler);
}
