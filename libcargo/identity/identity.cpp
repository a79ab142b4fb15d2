// Ed25519 private keys (OpenSSL EVP): generation, PEM files (plain or encrypted), the
// permission check of key files, signing. Cargo signatures (build side) and connection
// authentication (client and loader) both use them.
#include "xcargo/identity.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

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

constexpr uint64_t kMaxKeyFile = 64 * 1024;
// scrypt cost of encrypted keys: 'openssl pkcs8 -scrypt's values; 16 MiB and ~50 ms per try.
// Larger N needs more than the 32 MiB that OpenSSL allows scrypt when it decrypts.
constexpr uint64_t kScryptN = 1 << 14, kScryptR = 8, kScryptP = 1;
constexpr int kSaltBytes = 16;

// The passphrase callback's state: asks the source at most once, and only if OpenSSL finds
// the key encrypted. Never OpenSSL's own prompt, which PEM reads fall back to without one.
struct Asker {
  const PassphraseSource& source;
  const std::string& what;
  std::optional<std::string> passphrase;
  std::optional<Error> failed;
  bool asked = false;
  ~Asker() {
    if (passphrase) wipe(*passphrase);
  }
};

int pem_passphrase(char* buf, int size, int /*rwflag*/, void* u) {
  auto* a = static_cast<Asker*>(u);
  a->asked = true;
  if (!a->passphrase && !a->failed) {
    auto p = read_passphrase(a->source, a->what, false);
    if (p.ok()) a->passphrase = std::move(*p);
    else a->failed = p.take_error();
  }
  if (!a->passphrase || a->passphrase->size() > size_t(size)) return -1;
  std::memcpy(buf, a->passphrase->data(), a->passphrase->size());
  return int(a->passphrase->size());
}

// The whole file behind fd, at most kMaxKeyFile bytes.
Result<std::string> read_fd(int fd) {
  std::string data;
  char chunk[4096];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(Errc::io, std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) return data;
    if (data.size() + size_t(n) > kMaxKeyFile)
      return Error(Errc::limit, "more than " + std::to_string(kMaxKeyFile) + " bytes: not a key file");
    data.append(chunk, size_t(n));
  }
}

std::string octal(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

}  // namespace

Status check_private_key_permissions(const std::string& path, unsigned mode, unsigned owner_uid, unsigned my_uid) {
  if ((mode & 077) != 0)
    return Error(Errc::key, path + ": private key permissions " + octal(mode) + " are too open: others may read or change it")
        .hint("chmod 600 " + path + "  (a private key must be readable and writable by its owner only)")
        .hint("if others could read it, it may be copied: make a new key, and revoke this one (its id in revoked.txt)");
  if (owner_uid != my_uid && owner_uid != 0)
    return Error(Errc::key, path + ": private key belongs to uid " + std::to_string(owner_uid) + ", not to this user (uid " +
                                std::to_string(my_uid) + ")")
        .hint("use a key of your own, or chown " + std::to_string(my_uid) + " " + path + " if it is yours");
  return {};
}

Result<SigningKey> SigningKey::from_pem(std::string_view pem, const std::string& source, const PassphraseSource& passphrase) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), int(pem.size())), BIO_free);
  Asker ask{passphrase, source};
  EVP_PKEY* raw = bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, pem_passphrase, &ask) : nullptr;
  ERR_clear_error();
  if (!raw && ask.failed) return std::move(*ask.failed);
  if (!raw && ask.asked) {
    const bool from_env = !passphrase.env.empty() && std::getenv(passphrase.env.c_str());
    return Error(Errc::key, source + ": wrong passphrase (or damaged key)")
        .hint(from_env ? "the passphrase came from $" + passphrase.env + ": check its value"
                       : "type the passphrase given to 'xcargo keygen --encrypt' when the key was made");
  }
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

Result<SigningKey> SigningKey::load(const std::string& path, const PassphraseSource& passphrase) {
  // One descriptor for the check and the read: the file checked is the file read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Error(Errc::key, path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    Error e(Errc::key, path + (S_ISDIR(st.st_mode) ? ": is a directory, not a key file" : ": cannot stat: " + std::string(std::strerror(errno))));
    ::close(fd);
    return e;
  }
  auto data = read_fd(fd);
  ::close(fd);
  if (!data.ok()) return Error(Errc::key, path + ": " + data.error().message());
  // Nothing private in it (KEY.pub given for KEY): from_pem says so, the mode is no matter.
  if (data->find("PRIVATE KEY-----") != std::string::npos)
    if (auto checked = check_private_key_permissions(path, st.st_mode, st.st_uid, ::geteuid()); !checked.ok()) {
      wipe(*data);
      return checked.take_error();
    }
  auto key = from_pem(*data, path, passphrase);
  wipe(*data);
  return key;
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

Result<std::string> SigningKey::encrypted_private_pem(std::string_view passphrase) const {
  const Error failed(Errc::key, "cannot encrypt the key (OpenSSL)");
  if (passphrase.empty()) return Error(Errc::key, "cannot encrypt a key with an empty passphrase");
  std::unique_ptr<PKCS8_PRIV_KEY_INFO, decltype(&PKCS8_PRIV_KEY_INFO_free)> p8(EVP_PKEY2PKCS8(pkey_of(pkey_)),
                                                                                PKCS8_PRIV_KEY_INFO_free);
  X509_ALGOR* scheme = PKCS5_pbe2_set_scrypt(EVP_aes_256_cbc(), nullptr, kSaltBytes, nullptr, kScryptN, kScryptR, kScryptP);
  // On success the X509_SIG owns scheme; p8 stays ours.
  X509_SIG* sealed = p8 && scheme ? PKCS8_set0_pbe(passphrase.data(), int(passphrase.size()), p8.get(), scheme) : nullptr;
  if (!sealed) {
    X509_ALGOR_free(scheme);
    return failed;
  }
  std::unique_ptr<X509_SIG, decltype(&X509_SIG_free)> owned(sealed, X509_SIG_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_PKCS8(bio.get(), sealed) != 1) return failed;
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

Result<SigningKey> generate_key_files(const std::string& path, bool overwrite, const PassphraseSource* encrypt) {
  const std::string pub_path = path + ".pub";
  std::error_code ec;
  for (const auto& p : {path, pub_path})
    if (!overwrite && std::filesystem::exists(p, ec))
      return Error(Errc::io, p + ": already exists; refusing to overwrite a key")
          .hint("pass --force to replace it, or choose another -o path");
  auto key = SigningKey::generate();
  XC_TRY(key);
  std::string priv;
  if (!encrypt) {
    priv = key->private_pem();
  } else {
    auto passphrase = read_passphrase(*encrypt, path, true);
    XC_TRY(passphrase);
    auto sealed = key->encrypted_private_pem(*passphrase);
    wipe(*passphrase);
    XC_TRY(sealed);
    priv = std::move(*sealed);
  }
  std::string pub = public_key_to_pem(key->public_key());
  if (priv.empty() || pub.empty()) return Error(Errc::key, "cannot encode the key as PEM (OpenSSL)");
  auto written = write_file(path, as_bytes(priv), 0600);
  wipe(priv);
  if (!written.ok()) return Error(Errc::io, path + ": " + written.error().message());
  if (auto s = write_file(pub_path, as_bytes(pub), 0644); !s.ok())
    return Error(Errc::io, pub_path + ": " + s.error().message());
  return key;
}

}  // namespace xcargo
