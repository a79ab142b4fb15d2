// Reading a key's passphrase from an environment variable or the terminal (echo off, like
// OpenSSH's readpassphrase), and wiping it afterwards.
#include "xcargo/passphrase.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

namespace xcargo {

namespace {

// Within the 1024-byte buffer OpenSSL's PEM readers give the passphrase callback: a longer
// one could encrypt a key that could then never be decrypted.
constexpr size_t kMaxPassphrase = 1000;

// The terminal whose echo is off, for the signal handler to turn it back on.
int g_tty = -1;
struct termios g_saved {};

void restore_and_reraise(int sig) {
  if (g_tty >= 0) ::tcsetattr(g_tty, TCSAFLUSH, &g_saved);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void say(int fd, const std::string& text) { (void)!::write(fd, text.data(), text.size()); }

// Prints prompt on the terminal and reads one line with echo off. in/out: the terminal.
Result<std::string> ask_once(int in, int out, const std::string& prompt) {
  struct termios saved {};
  const bool is_tty = ::tcgetattr(in, &saved) == 0;
  struct sigaction old[4]{};
  const int sigs[4] = {SIGINT, SIGTERM, SIGQUIT, SIGTSTP};
  if (is_tty) {
    g_tty = in;
    g_saved = saved;
    struct sigaction sa {};
    sa.sa_handler = restore_and_reraise;
    for (int i = 0; i < 4; ++i) ::sigaction(sigs[i], &sa, &old[i]);
    struct termios quiet = saved;
    quiet.c_lflag &= ~tcflag_t(ECHO | ECHOE | ECHOK | ECHONL);
    ::tcsetattr(in, TCSAFLUSH, &quiet);
  }
  say(out, prompt);
  std::string line;
  bool ended = false, too_long = false;
  for (;;) {
    char c;
    ssize_t n = ::read(in, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ended = true;
      break;
    }
    if (c == '\n') break;
    if (line.size() >= kMaxPassphrase) too_long = true;
    else line.push_back(c);
  }
  if (is_tty) {
    ::tcsetattr(in, TCSAFLUSH, &saved);
    for (int i = 0; i < 4; ++i) ::sigaction(sigs[i], &old[i], nullptr);
    g_tty = -1;
  }
  say(out, "\n");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (too_long) {
    wipe(line);
    return Error(Errc::key, "passphrase longer than " + std::to_string(kMaxPassphrase) + " bytes");
  }
  if (ended && line.empty()) return Error(Errc::key, "no passphrase typed (end of input)");
  return line;
}

Result<std::string> ask_terminal(const std::string& what, bool confirm) {
  // The controlling terminal, as OpenSSH asks; standard input and error if there is none.
  int tty = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  const int in = tty >= 0 ? tty : 0, out = tty >= 0 ? tty : 2;
  auto first = ask_once(in, out, confirm ? "New passphrase for " + what + ": " : "Passphrase for " + what + ": ");
  if (first.ok() && confirm) {
    if (first->empty()) {
      if (tty >= 0) ::close(tty);
      return Error(Errc::key, what + ": empty passphrase").hint("type a passphrase, or leave out --encrypt for an unencrypted key");
    }
    auto again = ask_once(in, out, "Same passphrase again: ");
    const bool same = again.ok() && *again == *first;
    if (again.ok()) wipe(*again);
    if (!same) {
      wipe(*first);
      if (tty >= 0) ::close(tty);
      if (!again.ok()) return again.take_error();
      return Error(Errc::key, what + ": the two passphrases differ").hint("run keygen again and type the same passphrase twice");
    }
  }
  if (tty >= 0) ::close(tty);
  return first;
}

}  // namespace

void wipe(std::string& secret) {
  if (!secret.empty()) OPENSSL_cleanse(secret.data(), secret.size());
  secret.clear();
}

Result<std::string> read_passphrase(const PassphraseSource& source, const std::string& what, bool confirm) {
  if (!source.env.empty()) {
    if (const char* v = std::getenv(source.env.c_str())) {
      if (!*v)
        return Error(Errc::key, what + ": the passphrase variable " + source.env + " is empty")
            .hint("set " + source.env + " to the key's passphrase, or unset it to be asked on the terminal");
      if (std::strlen(v) > kMaxPassphrase)
        return Error(Errc::key, what + ": the passphrase in " + source.env + " is longer than " + std::to_string(kMaxPassphrase) + " bytes");
      return std::string(v);  // set on purpose: nothing to confirm
    }
    if (!source.terminal)
      return Error(Errc::key, what + ": the passphrase variable " + source.env + " is not set")
          .hint("export " + source.env + " with the key's passphrase (in CI, from the job's secrets)");
  }
  if (!source.terminal || !::isatty(0))
    return Error(Errc::key, what + ": needs a passphrase, and there is no terminal to ask on")
        .hint(std::string("set ") + kPassphraseEnv + " (or name another variable with --passphrase-env VAR)");
  return ask_terminal(what, confirm);
}

void forget_passphrase_env(const PassphraseSource& source) {
  if (source.env.empty()) return;
  if (char* v = std::getenv(source.env.c_str())) OPENSSL_cleanse(v, std::strlen(v));
  ::unsetenv(source.env.c_str());
}

}  // namespace xcargo
