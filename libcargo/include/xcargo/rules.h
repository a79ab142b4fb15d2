// Cargo rules of a trust directory (format-spec/trust-directory.md): single cargos revoked by
// digest, and minimum versions per cargo name and signer (rollback protection).
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo {

// File names in a trust directory, and their bounds (checked before anything is allocated).
inline constexpr const char* kRevokedCargos = "revoked-cargos.txt";
inline constexpr const char* kMinimumVersions = "minimum-versions.txt";
inline constexpr uint64_t kMaxRulesFileSize = 1 << 20;
inline constexpr size_t kMaxRuleLineLength = 1024;
inline constexpr size_t kMaxRules = 10000;  // per file

// The version order of trust-directory.md, section 3: dot-separated numeric components
// ("2.0.10"; missing trailing components are 0, leading zeros do not count), an optional
// "-pre.release" that sorts before the release (SemVer 2.0.0 precedence), and an optional
// "+build" that is ignored. Returns nullopt if either version does not have that form.
std::optional<std::strong_ordering> compare_versions(std::string_view a, std::string_view b);
// True if compare_versions can order v.
bool is_ordered_version(std::string_view v);

struct RevokedCargo {
  Digest digest{};
  std::string reason;  // the line's comment, may be empty
  std::string where;   // "DIR/revoked-cargos.txt:3", for messages
};

struct MinimumVersion {
  std::string name;
  std::optional<KeyId> signer;  // nullopt: "*", every signer
  std::string version;
  std::string where;            // "DIR/minimum-versions.txt:2"
};

class CargoRules {
public:
  // Reads the rule files of a trust directory; a missing file holds no rules. A file that is
  // too large, or any line that does not parse, is an error naming the file and line.
  static Result<CargoRules> load(const std::string& dir);
  // One file's text; `file` names it in messages and in each rule's `where`.
  Status parse_revoked_cargos(std::string_view text, const std::string& file);
  Status parse_minimum_versions(std::string_view text, const std::string& file);

  // Errc::revoked naming the rule if the digest is revoked.
  Status check_digest(const Digest& digest) const;
  // Errc::revoked naming the rule if `version` is below a minimum for `name` that applies:
  // a "*" rule, or a rule for one of `signers` (the trusted keys whose signatures verified).
  // A version that cannot be ordered is refused by any rule that applies to it.
  Status check_version(std::string_view name, std::string_view version, const std::vector<KeyId>& signers) const;

  const std::vector<RevokedCargo>& revoked() const { return revoked_; }
  const std::vector<MinimumVersion>& minimums() const { return minimums_; }
  size_t size() const { return revoked_.size() + minimums_.size(); }

private:
  std::vector<RevokedCargo> revoked_;
  std::vector<MinimumVersion> minimums_;
};

}  // namespace xcargo
