// Where the passphrase of an encrypted private key comes from: an environment variable (CI,
// services) or the terminal, echo off. Never a command-line argument (ps shows those).
#pragma once

#include <string>

#include "xcargo/error.h"

namespace xcargo {

// The variable read when no other is named: for CI jobs and services that cannot type.
inline constexpr const char* kPassphraseEnv = "XCARGO_PASSPHRASE";

struct PassphraseSource {
  std::string env = kPassphraseEnv;  // read this variable first
  // When the variable is unset: ask on the terminal if standard input is one. Off when the
  // user named the variable (--passphrase-env): then an unset variable is an error, not a prompt.
  bool terminal = true;
};

// The passphrase for the key named by `what` (a path, shown in the prompt and in errors).
// confirm: ask twice on the terminal and compare (for a new key); an empty passphrase is
// refused then. Errors (Errc::key): the named variable unset or empty, no terminal to ask
// on, the two entries differ, end of input. The passphrase is never written anywhere.
Result<std::string> read_passphrase(const PassphraseSource& source, const std::string& what, bool confirm);

// Overwrites the source's variable in this process's memory (its environment block, which
// /proc/PID/environ shows) and removes it, so that child processes and a later reader of
// this process's memory do not find the passphrase. For long-lived processes (the loader)
// once their keys are loaded.
void forget_passphrase_env(const PassphraseSource& source);

// Overwrites a string's characters before it is freed (OPENSSL_cleanse).
void wipe(std::string& secret);

}  // namespace xcargo
