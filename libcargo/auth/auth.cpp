// Authentication transcripts, verbs, and the authorized-keys file (libcargo/auth/auth.h).
#include "auth/auth.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sys/stat.h>

#include "key_lines.h"
#include "xcargo/file.h"

namespace xcargo::auth {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxAuthorizedFile = 1 << 20;
constexpr size_t kMaxAuthorizedKeys = 4096;
constexpr std::string_view kNodeContext = "xcargo node hello v3";    // NUL-terminated in the proof
constexpr std::string_view kClientContext = "xcargo client auth v3";

void append(Bytes& out, ByteView b) { out.insert(out.end(), b.begin(), b.end()); }

struct VerbName {
  const char* name;
  uint16_t bit;
};
constexpr VerbName kVerbNames[] = {{"push", kPush}, {"run", kRun}, {"ls", kList}, {"read", kRead}, {"forward", kForward}};

}  // namespace

Result<Nonce> random_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), int(n.size())) != 1) return Error(Errc::key, "cannot draw random bytes (OpenSSL RAND_bytes)");
  return n;
}

Bytes node_proof(const Nonce& client_nonce, const Nonce& server_nonce, const std::array<uint8_t, 32>& node_key) {
  Bytes m(kNodeContext.begin(), kNodeContext.end());
  m.push_back(0);
  append(m, client_nonce);
  append(m, server_nonce);
  append(m, node_key);
  return m;
}

Bytes client_proof(const Nonce& client_nonce, const Nonce& server_nonce, const std::array<uint8_t, 32>& node_key,
                   const std::array<uint8_t, 32>& client_key) {
  Bytes m(kClientContext.begin(), kClientContext.end());
  m.push_back(0);
  append(m, client_nonce);
  append(m, server_nonce);
  append(m, node_key);
  append(m, client_key);
  return m;
}

Result<uint16_t> parse_verbs(std::string_view list) {
  uint16_t bits = 0;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    bool found = false;
    for (const VerbName& v : kVerbNames)
      if (name == v.name) bits |= v.bit, found = true;
    if (!found)
      return Error(Errc::invalid_argument, "unknown verb '" + std::string(name) + "'").hint("verbs: push run ls read forward");
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  if (!bits) return Error(Errc::invalid_argument, "no verbs").hint("verbs: push run ls read forward");
  return bits;
}

std::string verbs_text(uint16_t verbs) {
  std::string s;
  for (const VerbName& v : kVerbNames)
    if (verbs & v.bit) s += (s.empty() ? "" : ",") + std::string(v.name);
  return s.empty() ? "none" : s;
}

namespace lines {

Result<PublicKey> key(const std::string& word, const std::string& where) {
  auto k = public_key_from_pem("-----BEGIN PUBLIC KEY-----\n" + word + "\n-----END PUBLIC KEY-----\n", where);
  if (!k.ok())
    return Error(Errc::invalid_argument, where + ": not an Ed25519 public key")
        .hint("KEY is the second line of a .pub file written by 'xcargo keygen'");
  return k;
}

std::string key_word(const PublicKey& key) {
  const std::string pem = public_key_to_pem(key);
  const size_t a = pem.find('\n'), b = pem.find('\n', a + 1);
  return pem.substr(a + 1, b - a - 1);
}

}  // namespace lines

Result<AuthorizedKeys> AuthorizedKeys::parse(std::string_view text, const std::string& origin) {
  AuthorizedKeys out;
  XC_TRY(lines::for_each(text, [&](const std::vector<std::string>& words, size_t line_no) -> Status {
    const std::string where = origin + ": line " + std::to_string(line_no);
    AuthorizedKey k;
    size_t w = 0;
    bool verbs = false;
    for (; w < words.size(); ++w) {
      const std::string_view word = words[w];
      if (word.rfind("verbs=", 0) == 0 && !verbs) {
        auto v = parse_verbs(word.substr(6));
        if (!v.ok()) return Error(Errc::invalid_argument, where + ": " + v.error().message()).hint("verbs: push run ls read forward");
        k.verbs = *v;
        verbs = true;
      } else if (word.rfind("tenant=", 0) == 0 && k.tenant.empty()) {
        if (!is_tenant_name(word.substr(7)))
          return Error(Errc::invalid_argument, where + ": '" + std::string(word.substr(0, 48)) + "' is no tenant name")
              .hint("a tenant is 1 to 32 of a-z, 0-9, '_' and '-', starting with a letter or digit");
        k.tenant = word.substr(7);
      } else if (word.rfind("verbs=", 0) == 0 || word.rfind("tenant=", 0) == 0) {
        return Error(Errc::invalid_argument, where + ": '" + std::string(word.substr(0, word.find('='))) + "=' given twice");
      } else {
        break;
      }
    }
    if (w >= words.size())
      return Error(Errc::invalid_argument, where + ": no key")
          .hint("a line is '[verbs=LIST] [tenant=TENANT] KEY [NAME]', KEY the second line of a .pub file");
    auto key = lines::key(words[w], where);
    XC_TRY(key);
    k.key = std::move(*key);
    for (size_t i = w + 1; i < words.size(); ++i) k.name += (k.name.empty() ? "" : " ") + words[i];
    if (k.name.empty()) k.name = to_hex(k.key.id);
    if (out.keys_.size() >= kMaxAuthorizedKeys)
      return Error(Errc::limit, origin + ": more than " + std::to_string(kMaxAuthorizedKeys) + " keys");
    out.keys_.push_back(std::move(k));
    return {};
  }));
  return out;
}

Result<AuthorizedKeys> AuthorizedKeys::load(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    AuthorizedKeys out;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.path().extension() != ".pub") {
        std::error_code kind;
        out.ignored_.push_back(e.path().string() + ": ignored, " + (e.is_directory(kind) ? "a directory" : "not a .pub file") +
                               ": a clients directory holds one .pub file per client, each allowed push, run, ls and read; "
                               "for fewer verbs give --clients a file of 'verbs=LIST KEY NAME' lines instead");
        continue;
      }
      std::error_code kind;
      if (!e.is_regular_file(kind))  // a FIFO would hold the reader until someone writes
        return Error(Errc::key, e.path().string() + ": not a regular file").hint("an authorized client is a .pub file from 'xcargo keygen'");
      auto key = load_public_key(e.path().string());
      if (!key.ok()) return key.take_error();
      if (out.keys_.size() >= kMaxAuthorizedKeys)
        return Error(Errc::limit, path + ": more than " + std::to_string(kMaxAuthorizedKeys) + " keys");
      out.keys_.push_back({std::move(*key), kAllClientVerbs, e.path().stem().string()});
    }
    if (ec) return Error(Errc::io, path + ": " + ec.message());
    std::sort(out.ignored_.begin(), out.ignored_.end());
    return out;
  }
  auto text = read_file(path, kMaxAuthorizedFile);
  if (!text.ok()) return Error(text.error().code(), path + ": " + text.error().message());
  return parse(std::string_view(reinterpret_cast<const char*>(text->data()), text->size()), path);
}

const AuthorizedKey* AuthorizedKeys::find(const std::array<uint8_t, 32>& raw) const {
  for (const AuthorizedKey& k : keys_)
    if (k.key.raw == raw) return &k;
  return nullptr;
}

bool is_tenant_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxTenantName || name[0] == '_' || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; });
}

std::string authorized_line(const PublicKey& key, uint16_t verbs, const std::string& name, const std::string& tenant) {
  std::string line = "verbs=" + verbs_text(verbs) + (tenant.empty() ? "" : " tenant=" + tenant) + " " + lines::key_word(key);
  if (!name.empty()) line += " " + name;
  return line;
}

std::string default_identity_path() {
  if (const char* e = std::getenv("XCARGO_IDENTITY"); e && *e) return e;
  const char* home = std::getenv("HOME");
  if (!home || !*home) return {};
  std::string p = std::string(home) + "/.config/xcargo/identity";
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? p : std::string();
}

}  // namespace xcargo::auth
