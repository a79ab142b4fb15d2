// Ed25519 private keys (OpenSSL EVP): generation, PEM files, signing. Cargo signatures
// (build side) and connection authentication (client and loader) both use them.
#include "xcargo/identity.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <filesystem>

#include "xcargo/file.h"

namespace xcargo {

namespace {

EVP_PKEY* pkey_of(const std::shared_ptr<void>& p) { return static_cast<EVP_PKEY*>(p.get()); }

Result<PublicKey> public_of(EVP_PKEY* pkey, const std::string& source) {
  PublicKey pub;
  size_t len = pub.raw.size();
  if (EVP_PKEY_get_raw_public_key(pkey, pub.raw.data(), &len) != 1 || len != pub.raw.size())
    return Error(Errc::key, source + ": cannot derive the Ed25519 public key");
  pub.id = key_id_of(pub.raw);
  pub.source = source;
  return pub;
}

}  // namespace

Result<SigningKey> SigningKey::from_pem(std::string_view pem, const std::string& source) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), int(pem.size())), BIO_free);
  EVP_PKEY* raw = bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr;
  if (!raw)
    return Error(Errc::key, source + ": not a PEM private key")
        .hint("make one with 'xcargo keygen -o KEY'; pass KEY, not KEY.pub");
  SigningKey k;
  k.pkey_ = std::shared_ptr<void>(raw, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
  if (EVP_PKEY_get_id(raw) != EVP_PKEY_ED25519) return Error(Errc::key, source + ": not an Ed25519 key");
  auto pub = public_of(raw, source);
  XC_TRY(pub);
  k.public_ = std::move(*pub);
  return k;
}

Result<SigningKey> SigningKey::load(const std::string& path) {
  auto data = read_file(path, 64 * 1024);
  if (!data.ok()) return Error(Errc::key, path + ": " + data.error().message());
  return from_pem(std::string_view(reinterpret_cast<const char*>(data->data()), data->size()), path);
}

Result<SigningKey> SigningKey::generate() {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr),
                                                                  EVP_PKEY_CTX_free);
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1)
    return Error(Errc::key, "cannot generate an Ed25519 key (OpenSSL)");
  SigningKey k;
  k.pkey_ = std::shared_ptr<void>(raw, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
  auto pub = public_of(raw, "new key");
  XC_TRY(pub);
  k.public_ = std::move(*pub);
  return k;
}

std::string SigningKey::private_pem() const {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), pkey_of(pkey_), nullptr, nullptr, 0, nullptr, nullptr) != 1) return {};
  char* p = nullptr;
  long n = BIO_get_mem_data(bio.get(), &p);
  return std::string(p, size_t(n));
}

Result<std::array<uint8_t, 64>> SigningKey::sign(ByteView message) const {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::array<uint8_t, 64> sig{};
  size_t len = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, pkey_of(pkey_)) != 1 ||
      EVP_DigestSign(ctx.get(), sig.data(), &len, message.data(), message.size()) != 1 || len != sig.size())
    return Error(Errc::key, "Ed25519 signing failed (OpenSSL)");
  return sig;
}

Result<SigningKey> generate_key_files(const std::string& path, bool overwrite) {
  const std::string pub_path = path + ".pub";
  std::error_code ec;
  for (const auto& p : {path, pub_path})
    if (!overwrite && std::filesystem::exists(p, ec))
      return Error(Errc::io, p + ": already exists; refusing to overwrite a key")
          .hint("pass --force to replace it, or choose another -o path");
  auto key = SigningKey::generate();
  XC_TRY(key);
  std::string priv = key->private_pem(), pub = public_key_to_pem(key->public_key());
  if (priv.empty() || pub.empty()) return Error(Errc::key, "cannot encode the key as PEM (OpenSSL)");
  if (auto s = write_file(path, as_bytes(priv), 0600); !s.ok()) return Error(Errc::io, path + ": " + s.error().message());
  if (auto s = write_file(pub_path, as_bytes(pub), 0644); !s.ok())
    return Error(Errc::io, pub_path + ": " + s.error().message());
  return key;
}

}  // namespace xcargo
