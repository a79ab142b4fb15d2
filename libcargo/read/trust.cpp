// Ed25519 public keys in PEM (OpenSSL), key ids, the trust store, signature verification.
#include "xcargo/trust.h"

#include <charconv>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "xcargo/file.h"

namespace xcargo {

namespace fs = std::filesystem;

KeyId key_id_of(const std::array<uint8_t, 32>& raw) {
  Digest d = sha256(raw);
  KeyId id{};
  std::memcpy(id.data(), d.data(), id.size());
  return id;
}

// The DER SubjectPublicKeyInfo of every Ed25519 key is these 12 bytes and the 32-byte key
// (RFC 8410). Decoding it directly skips OpenSSL's decoder framework, which costs ~0.5 ms
// per key at start-up; anything else goes to PEM_read_bio_PUBKEY.
static bool decode_ed25519_spki(std::string_view pem, std::array<uint8_t, 32>& raw) {
  static constexpr std::string_view kBegin = "-----BEGIN PUBLIC KEY-----", kEnd = "-----END PUBLIC KEY-----";
  static constexpr uint8_t kPrefix[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
  size_t b = pem.find(kBegin), e = pem.find(kEnd);
  if (b == std::string_view::npos || e == std::string_view::npos || e < b) return false;
  std::string b64;
  for (char c : pem.substr(b + kBegin.size(), e - b - kBegin.size()))
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') b64.push_back(c);
  if (b64.size() != 60) return false;  // base64 of 44 bytes
  uint8_t der[48];
  if (EVP_DecodeBlock(der, reinterpret_cast<const unsigned char*>(b64.data()), int(b64.size())) != 45) return false;
  if (std::memcmp(der, kPrefix, sizeof kPrefix) != 0) return false;
  std::memcpy(raw.data(), der + sizeof kPrefix, raw.size());
  return true;
}

Result<PublicKey> public_key_from_pem(std::string_view pem, const std::string& source) {
  if (PublicKey fast; decode_ed25519_spki(pem, fast.raw)) {
    fast.id = key_id_of(fast.raw);
    fast.source = source;
    return fast;
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), int(pem.size())), BIO_free);
  if (!bio) return Error(Errc::key, source + ": out of memory");
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr),
                                                           EVP_PKEY_free);
  if (!pkey)
    return Error(Errc::key, source + ": not a PEM public key")
        .hint("public keys are the KEY.pub files written by 'xcargo keygen -o KEY'");
  if (EVP_PKEY_get_id(pkey.get()) != EVP_PKEY_ED25519)
    return Error(Errc::key, source + ": not an Ed25519 key (xcargo signatures are Ed25519)");
  PublicKey key;
  size_t len = key.raw.size();
  if (EVP_PKEY_get_raw_public_key(pkey.get(), key.raw.data(), &len) != 1 || len != key.raw.size())
    return Error(Errc::key, source + ": cannot read the raw Ed25519 public key");
  key.id = key_id_of(key.raw);
  key.source = source;
  return key;
}

Result<PublicKey> load_public_key(const std::string& path) {
  auto data = read_file(path, 64 * 1024);
  if (!data.ok()) return Error(Errc::key, path + ": " + data.error().message());
  return public_key_from_pem(std::string_view(reinterpret_cast<const char*>(data->data()), data->size()), path);
}

std::string public_key_to_pem(const PublicKey& key) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, key.raw.data(), key.raw.size()), EVP_PKEY_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!pkey || !bio || PEM_write_bio_PUBKEY(bio.get(), pkey.get()) != 1) return {};
  char* p = nullptr;
  long n = BIO_get_mem_data(bio.get(), &p);
  return std::string(p, size_t(n));
}

Result<TrustStore> TrustStore::load(const std::string& path) {
  TrustStore store;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.path().extension() != ".pub") continue;
      std::error_code kind;
      if (!entry.is_regular_file(kind))  // a FIFO would hold the reader until someone writes
        return Error(Errc::key, entry.path().string() + ": not a regular file").hint("a trusted key is a .pub file from 'xcargo keygen'");
      files.push_back(entry.path().string());
    }
    if (ec) return Error(Errc::io, path + ": cannot list the trust directory: " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto key = load_public_key(f);
      XC_TRY(key);
      store.add(std::move(*key));
    }
    if (store.size() == 0)
      return Error(Errc::key, path + ": no .pub files in the trust directory")
          .hint("copy the signer's KEY.pub (from 'xcargo keygen') into " + path);
    const std::string list = path + "/" + kRevocationList;
    if (fs::exists(list, ec)) {
      auto text = read_file(list, 1 << 20);
      XC_TRY(text);
      std::string_view rest(reinterpret_cast<const char*>(text->data()), text->size());
      for (size_t line_no = 1; !rest.empty(); ++line_no) {
        const size_t nl = rest.find('\n');
        std::string_view line = rest.substr(0, nl);
        rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
        if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
        while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
        if (line.empty()) continue;
        KeyId id{};
        bool ok = line.size() == 2 * id.size();
        for (size_t i = 0; ok && i < id.size(); ++i) {
          auto [p, e] = std::from_chars(line.data() + 2 * i, line.data() + 2 * i + 2, id[i], 16);
          ok = e == std::errc() && p == line.data() + 2 * i + 2;
        }
        if (!ok)
          return Error(Errc::key, list + ": line " + std::to_string(line_no) + ": '" + std::string(line.substr(0, 40)) +
                                      "' is not a key id")
              .hint("a key id is 16 hex digits, as 'xcargo inspect' shows a signer");
        store.revoke(id);
      }
    }
    auto rules = CargoRules::load(path);
    XC_TRY(rules);
    store.set_rules(std::move(*rules));
    return store;
  }
  if (!fs::exists(path, ec)) return Error(Errc::io, path + ": no such file or directory");
  auto key = load_public_key(path);
  XC_TRY(key);
  store.add(std::move(*key));
  return store;
}

void TrustStore::add(PublicKey key) {
  for (const auto& k : keys_)
    if (k.id == key.id) return;
  keys_.push_back(std::move(key));
}

void TrustStore::revoke(const KeyId& id) {
  if (!revoked(id)) revoked_.push_back(id);
}

bool TrustStore::revoked(const KeyId& id) const { return std::find(revoked_.begin(), revoked_.end(), id) != revoked_.end(); }

const PublicKey* TrustStore::find(const KeyId& id) const {
  if (revoked(id)) return nullptr;
  for (const auto& k : keys_)
    if (k.id == id) return &k;
  return nullptr;
}

namespace {
constexpr std::string_view kRevokedSigners = "signed only by revoked keys";
}  // namespace

std::vector<std::string> revoked_signer_hints() {
  return {std::string("a revoked key is listed in the trust directory's ") + kRevocationList +
              ": its signatures are refused even while its .pub file stays there",
          std::string("if revoking it was a mistake, the trust directory's admin deletes its line from ") + kRevocationList +
              " (a running loader rereads it within a second)",
          "otherwise the cargo must be signed again by a key that is trusted and not revoked: "
          "'xcargo sign CARGO --key KEY' (then push it again)"};
}

Error revoked_signers_error(const std::string& ids) {
  Error e(Errc::untrusted, std::string(kRevokedSigners) + ", or by keys not trusted here (revoked: " + ids + ")");
  for (std::string& h : revoked_signer_hints()) e.hint(std::move(h));
  return e;
}

bool is_revoked_signers_message(std::string_view message) { return message.find(kRevokedSigners) != std::string_view::npos; }

bool ed25519_verify(const PublicKey& key, ByteView msg, ByteView signature) {
  if (signature.size() != 64) return false;
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, key.raw.data(), key.raw.size()), EVP_PKEY_free);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!pkey || !ctx) return false;
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), msg.data(), msg.size()) == 1;
}

}  // namespace xcargo
