// KnownNodes: the node keys a client expects, by address (libcargo/auth/known_nodes.h).
#include "auth/known_nodes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "key_lines.h"
#include "xcargo/file.h"

namespace xcargo::auth {

namespace {
constexpr uint64_t kMaxKnownNodesFile = 1 << 20;
constexpr size_t kMaxKnownNodes = 16384;
}  // namespace

Result<KnownNodes> KnownNodes::parse(std::string_view text, const std::string& origin) {
  KnownNodes out;
  out.origin_ = origin;
  XC_TRY(lines::for_each(text, [&](const std::vector<std::string>& words, size_t line_no) -> Status {
    const std::string where = origin + ": line " + std::to_string(line_no);
    if (words.size() < 2 || words[0].rfind(':') == std::string::npos || words[0].rfind(':') + 1 == words[0].size())
      return Error(Errc::invalid_argument, where + ": not 'HOST:PORT KEY [NAME]'").hint("KEY is the second line of the node's .pub file");
    auto key = lines::key(words[1], where);
    XC_TRY(key);
    if (const Node* n = out.find(words[0]); n && n->key.raw != key->raw)
      return Error(Errc::invalid_argument, where + ": " + words[0] + " has another key on line " + std::to_string(n->line))
          .hint("one key per address: remove the line that is wrong");
    if (out.nodes_.size() >= kMaxKnownNodes)
      return Error(Errc::limit, origin + ": more than " + std::to_string(kMaxKnownNodes) + " nodes");
    Node n{words[0], std::move(*key), {}, line_no};
    for (size_t i = 2; i < words.size(); ++i) n.name += (n.name.empty() ? "" : " ") + words[i];
    if (n.name.empty()) n.name = to_hex(n.key.id);
    out.nodes_.push_back(std::move(n));
    return {};
  }));
  return out;
}

Result<KnownNodes> KnownNodes::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    KnownNodes none;
    none.origin_ = path;
    return none;
  }
  auto text = read_file(path, kMaxKnownNodesFile);
  if (!text.ok()) return Error(text.error().code(), path + ": " + text.error().message());
  return parse(std::string_view(reinterpret_cast<const char*>(text->data()), text->size()), path);
}

const KnownNodes::Node* KnownNodes::find(std::string_view address) const {
  for (const Node& n : nodes_)
    if (n.address == address) return &n;
  return nullptr;
}

Status KnownNodes::add(const std::string& path, const std::string& address, const PublicKey& key, const std::string& name) {
  auto known = load(path);
  XC_TRY(known);
  if (const Node* n = known->find(address)) {
    if (n->key.raw == key.raw) return {};
    return Error(Errc::key, path + ": line " + std::to_string(n->line) + " pins " + address + " to another key (" + to_hex(n->key.id) + ")")
        .hint("if the node's key changed on purpose, remove that line, then add the new key");
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Error(Errc::io, dir.string() + ": " + ec.message());
    ::chmod(dir.c_str(), 0700);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Error(Errc::io, path + ": " + std::strerror(errno));
  const std::string line = address + " " + lines::key_word(key) + (name.empty() ? "" : " " + name) + "\n";
  const Status written = write_all(fd, ByteView(reinterpret_cast<const uint8_t*>(line.data()), line.size()));
  ::close(fd);
  if (!written.ok()) return Error(Errc::io, path + ": " + written.error().message());
  return {};
}

std::string default_known_nodes_path() {
  if (const char* e = std::getenv("XCARGO_KNOWN_NODES"); e && *e) return e;
  const char* home = std::getenv("HOME");
  if (!home || !*home) return {};
  return std::string(home) + "/.config/xcargo/known_nodes";
}

}  // namespace xcargo::auth
