// The trust directory's cargo rules: strict line-based files, the version order, the checks.
#include "xcargo/rules.h"

#include <algorithm>
#include <filesystem>

#include "xcargo/file.h"
#include "xcargo/manifest.h"

namespace xcargo {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum_or_hyphen(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t p = s.find(sep);
    parts.push_back(s.substr(0, p));
    if (p == std::string_view::npos) return parts;
    s.remove_prefix(p + 1);
  }
}

// Numbers of any length, without leading zeros mattering: "010" == "10" < "9000".
std::strong_ordering compare_numbers(std::string_view a, std::string_view b) {
  while (a.size() > 1 && a.front() == '0') a.remove_prefix(1);
  while (b.size() > 1 && b.front() == '0') b.remove_prefix(1);
  if (a.size() != b.size()) return a.size() <=> b.size();
  return a.compare(b) <=> 0;
}

bool all_digits(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_digit); }

struct Parsed {
  std::vector<std::string_view> core, pre;  // pre empty: a release
};

// The form of trust-directory.md, section 3, or nullopt.
std::optional<Parsed> parse_version(std::string_view v) {
  if (v.empty() || v.size() > 64) return std::nullopt;
  if (const size_t plus = v.find('+'); plus != std::string_view::npos) {
    for (auto id : split(v.substr(plus + 1), '.'))  // build metadata: checked, then ignored
      if (id.empty() || !std::all_of(id.begin(), id.end(), is_alnum_or_hyphen)) return std::nullopt;
    v = v.substr(0, plus);
  }
  Parsed p;
  const size_t dash = v.find('-');
  for (auto c : split(v.substr(0, dash), '.'))
    if (!all_digits(c)) return std::nullopt;
  p.core = split(v.substr(0, dash), '.');
  if (dash != std::string_view::npos) {
    p.pre = split(v.substr(dash + 1), '.');
    for (auto id : p.pre)
      if (id.empty() || !std::all_of(id.begin(), id.end(), is_alnum_or_hyphen)) return std::nullopt;
  }
  return p;
}

// SemVer 2.0.0, 11.4: numeric identifiers numerically, below alphanumeric ones (ASCII order);
// a prefix sorts first.
std::strong_ordering compare_pre(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const bool na = all_digits(a[i]), nb = all_digits(b[i]);
    std::strong_ordering o = na && nb ? compare_numbers(a[i], b[i])
                             : na != nb ? (na ? std::strong_ordering::less : std::strong_ordering::greater)
                                        : a[i].compare(b[i]) <=> 0;
    if (o != 0) return o;
  }
  return a.size() <=> b.size();
}

// One line of a rules file, without its comment, split into fields; `comment` gets the text
// after '#'. Errors say which line.
struct Line {
  std::vector<std::string_view> fields;
  std::string_view comment;
};

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

Error line_error(const std::string& file, size_t line_no, const std::string& what) {
  return Error(Errc::key, file + ": line " + std::to_string(line_no) + ": " + what);
}

// Calls f(line_no, Line) for each line that is not empty or only a comment; stops at the first
// error (of f or of the file's form).
template <class F>
Status for_each_line(std::string_view text, const std::string& file, F&& f) {
  size_t rules = 0;
  for (size_t line_no = 1; !text.empty(); ++line_no) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.size() > kMaxRuleLineLength)
      return line_error(file, line_no, "longer than " + std::to_string(kMaxRuleLineLength) + " bytes");
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    for (char c : line)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
        return line_error(file, line_no, "holds a control character").hint("rules files are plain text, one rule per line");
    Line l;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      l.comment = line.substr(hash + 1);
      line = line.substr(0, hash);
    }
    for (size_t i = 0; i < line.size();) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
      if (j > i) l.fields.push_back(line.substr(i, j - i));
      i = j;
    }
    if (l.fields.empty()) continue;
    if (++rules > kMaxRules)
      return line_error(file, line_no, "more than " + std::to_string(kMaxRules) + " rules").hint("split the rules, or revoke the signing key instead");
    XC_TRY(f(line_no, l));
  }
  return {};
}

std::string shown(std::string_view s) { return "'" + std::string(s.substr(0, 80)) + (s.size() > 80 ? "...'" : "'"); }

}  // namespace

std::optional<std::strong_ordering> compare_versions(std::string_view a, std::string_view b) {
  auto pa = parse_version(a), pb = parse_version(b);
  if (!pa || !pb) return std::nullopt;
  for (size_t i = 0; i < std::max(pa->core.size(), pb->core.size()); ++i) {
    const std::string_view x = i < pa->core.size() ? pa->core[i] : "0", y = i < pb->core.size() ? pb->core[i] : "0";
    if (auto o = compare_numbers(x, y); o != 0) return o;
  }
  if (pa->pre.empty() != pb->pre.empty()) return pa->pre.empty() ? std::strong_ordering::greater : std::strong_ordering::less;
  return compare_pre(pa->pre, pb->pre);
}

bool is_ordered_version(std::string_view v) { return parse_version(v).has_value(); }

Status CargoRules::parse_revoked_cargos(std::string_view text, const std::string& file) {
  return for_each_line(text, file, [&](size_t line_no, const Line& l) -> Status {
    std::string_view hex = l.fields[0];
    if (hex.starts_with("sha256:")) hex.remove_prefix(7);
    RevokedCargo r;
    if (l.fields.size() != 1 || !from_hex(hex, r.digest))
      return line_error(file, line_no, shown(l.fields[0]) + (l.fields.size() != 1 ? " and more: one digest per line" : " is not a cargo digest"))
          .hint("a line is a cargo digest (64 hex digits, as 'xcargo verify' shows it, optionally after 'sha256:'), then '# reason'");
    if (std::any_of(revoked_.begin(), revoked_.end(), [&](const RevokedCargo& x) { return x.digest == r.digest; }))
      return {};  // listed twice: revoked either way
    r.reason = trim(l.comment);
    r.where = file + ":" + std::to_string(line_no);
    revoked_.push_back(std::move(r));
    return {};
  });
}

Status CargoRules::parse_minimum_versions(std::string_view text, const std::string& file) {
  return for_each_line(text, file, [&](size_t line_no, const Line& l) -> Status {
    const char* form = "a line is 'NAME SIGNER VERSION': a cargo name, a key id (16 hex digits, as 'xcargo inspect' shows a signer) or '*' for every signer, and a version such as 2.0.1";
    if (l.fields.size() != 3)
      return line_error(file, line_no, std::to_string(l.fields.size()) + " fields, not 3").hint(form);
    MinimumVersion m;
    m.name = std::string(l.fields[0]);
    if (!is_cargo_name(m.name)) return line_error(file, line_no, shown(m.name) + " is not a cargo name").hint(form);
    if (l.fields[1] != "*") {
      KeyId id{};
      if (!from_hex(l.fields[1], id)) return line_error(file, line_no, shown(l.fields[1]) + " is not a key id or '*'").hint(form);
      m.signer = id;
    }
    m.version = std::string(l.fields[2]);
    if (!is_ordered_version(m.version))
      return line_error(file, line_no, shown(m.version) + " is not an ordered version")
          .hint("versions are dot-separated numbers, optionally with -pre.release and +build (trust-directory.md, section 3)");
    for (const auto& x : minimums_)
      if (x.name == m.name && x.signer == m.signer)
        return line_error(file, line_no, m.name + " " + std::string(l.fields[1]) + " already has a minimum version at " + x.where)
            .hint("keep one line per name and signer");
    m.where = file + ":" + std::to_string(line_no);
    minimums_.push_back(std::move(m));
    return {};
  });
}

Result<CargoRules> CargoRules::load(const std::string& dir) {
  CargoRules rules;
  for (const char* name : {kRevokedCargos, kMinimumVersions}) {
    const std::string file = dir + "/" + name;
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
      if (ec) return Error(Errc::io, file + ": " + ec.message());
      continue;
    }
    auto text = read_file(file, kMaxRulesFileSize);
    if (!text.ok()) return Error(Errc::key, file + ": " + text.error().message()).hint("rules files are at most 1 MiB");
    std::string_view s(reinterpret_cast<const char*>(text->data()), text->size());
    XC_TRY(name == kRevokedCargos ? rules.parse_revoked_cargos(s, file) : rules.parse_minimum_versions(s, file));
  }
  return rules;
}

Status CargoRules::check_digest(const Digest& digest) const {
  for (const auto& r : revoked_)
    if (r.digest == digest)
      return Error(Errc::revoked, "cargo " + to_hex(digest) + " is revoked by " + r.where + (r.reason.empty() ? "" : " (" + r.reason + ")"))
          .hint("the trust directory revokes this one cargo; another build (another digest) is not affected");
  return {};
}

Status CargoRules::check_version(std::string_view name, std::string_view version, const std::vector<KeyId>& signers) const {
  for (const auto& m : minimums_) {
    if (m.name != name) continue;
    if (m.signer && std::find(signers.begin(), signers.end(), *m.signer) == signers.end()) continue;
    const std::string rule = "the minimum version " + m.version + " that " + m.where + " sets for " + m.name +
                             (m.signer ? " signed by " + to_hex(*m.signer) : std::string(" (every signer)"));
    auto o = compare_versions(version, m.version);
    if (!o)
      return Error(Errc::revoked, std::string(name) + " version " + shown(version) + " cannot be compared with " + rule)
          .hint("versions are dot-separated numbers, optionally with -pre.release and +build (trust-directory.md, section 3)");
    if (*o < 0)
      return Error(Errc::revoked, std::string(name) + " " + std::string(version) + " is below " + rule)
          .hint("rollback protection: this trust directory accepts " + m.name + " only from version " + m.version + " on");
  }
  return {};
}

}  // namespace xcargo
