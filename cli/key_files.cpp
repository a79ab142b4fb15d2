// The invocation's passphrase source and the loading of --key files.
#include "key_files.h"

namespace xcargo::cli {

std::string g_passphrase_env;

PassphraseSource passphrase_source() {
  PassphraseSource s;
  if (!g_passphrase_env.empty()) {
    s.env = g_passphrase_env;
    s.terminal = false;  // named on purpose (CI): unset is an error, never a prompt that hangs
  }
  return s;
}

Result<SigningKey> load_key(const std::string& path) { return SigningKey::load(path, passphrase_source()); }

}  // namespace xcargo::cli
