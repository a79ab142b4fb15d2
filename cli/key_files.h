// The private keys an invocation loads (--key, --identity) and where the passphrases of
// encrypted ones come from (--passphrase-env, $XCARGO_PASSPHRASE, the terminal).
#pragma once

#include <string>

#include "xcargo/identity.h"
#include "xcargo/passphrase.h"

namespace xcargo::cli {

// --passphrase-env VAR, given before or after the verb; empty: $XCARGO_PASSPHRASE if set,
// else the terminal.
extern std::string g_passphrase_env;

// Where this invocation's passphrases come from: the variable --passphrase-env names (which
// must then be set), else $XCARGO_PASSPHRASE, else the terminal when stdin is one.
PassphraseSource passphrase_source();

// The --key of sign and build: SigningKey::load with this invocation's passphrase source.
Result<SigningKey> load_key(const std::string& path);

// For the --help footers of the verbs that take a private key.
inline constexpr const char* kKeyFileHelp =
    "A private key must be readable by its owner only (chmod 600 KEY). If it is encrypted, its\n"
    "passphrase comes from $XCARGO_PASSPHRASE, or from the variable that --passphrase-env VAR\n"
    "names (for CI), or is asked on the terminal.";

}  // namespace xcargo::cli
