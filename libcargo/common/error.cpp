// Names of error kinds and which of them are verification failures.
#include "xcargo/error.h"

namespace xcargo {

const char* errc_name(Errc code) {
  switch (code) {
    case Errc::io: return "io";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::malformed: return "malformed";
    case Errc::unsupported: return "unsupported";
    case Errc::limit: return "limit";
    case Errc::digest_mismatch: return "digest_mismatch";
    case Errc::manifest: return "manifest";
    case Errc::not_signed: return "not_signed";
    case Errc::untrusted: return "untrusted";
    case Errc::bad_signature: return "bad_signature";
    case Errc::revoked: return "revoked";
    case Errc::key: return "key";
    case Errc::compile: return "compile";
    case Errc::import: return "import";
    case Errc::remote: return "remote";
    case Errc::unreachable: return "unreachable";
    case Errc::unauthenticated: return "unauthenticated";
  }
  return "unknown";
}

bool is_verification_failure(Errc code) {
  switch (code) {
    case Errc::malformed:
    case Errc::unsupported:
    case Errc::limit:
    case Errc::digest_mismatch:
    case Errc::manifest:
    case Errc::not_signed:
    case Errc::untrusted:
    case Errc::bad_signature:
    case Errc::revoked:
      return true;
    default:
      return false;
  }
}

}  // namespace xcargo
