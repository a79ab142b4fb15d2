// Tests of the loader's settings table: flags and loader.yaml keys share names, units and checks.
#include <catch2/catch.hpp>
#include <algorithm>

#include <fstream>
#include <iterator>
#include <set>

#include "config.h"
#include "support.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {
const Setting& setting(const std::string& name) {
  for (const auto& s : settings())
    if (name == s.name) return s;
  FAIL("no setting " << name);
  return settings().front();
}
}  // namespace

TEST_CASE("every setting is a flag and a YAML key of the same name", "[config]") {
  std::set<std::string> names, flags;
  for (const auto& s : settings()) {
    CHECK(names.insert(s.name).second);
    CHECK(flags.insert(flag_of(s)).second);
    CHECK(std::string(s.help).size() > 10);
    LoaderConfig c;
    // A YAML file with just this key is understood (its value may be refused, never the key).
    auto r = parse_config(std::string(s.name) + ": 1\n", "t.yaml", c);
    if (!r.ok()) CHECK(r.error().message().find("unknown setting") == std::string::npos);
  }
  CHECK(flag_of(setting("sandbox")) == "--no-sandbox");
  CHECK(flag_of(setting("allow-anyone")) == "--allow-anyone");
  CHECK(flag_of(setting("max-input")) == "--max-input");
  CHECK(flag_of(setting("regions")) == "--region");
}

TEST_CASE("sizes take K, M, G in YAML as on the command line", "[config]") {
  LoaderConfig c;
  REQUIRE(parse_config("max-memory: 4G\nmax_input: 400M\nmax-cargo: 1024\nlog-max-size: 8K\nregions:\n  chase: 64M\n", "t.yaml", c).ok());
  CHECK(c.max_memory == 4ull << 30);
  CHECK(c.max_input == 400ull << 20);
  CHECK(c.max_cargo == 1024);
  CHECK(c.log_max_size == 8u << 10);
  CHECK(c.regions == std::vector<std::string>{"chase=67108864"});
  LoaderConfig f;  // what a flag's argument goes through
  REQUIRE(setting("max-memory").apply(f, "4G").ok());
  REQUIRE(setting("regions").apply(f, "chase=64M").ok());
  CHECK(f.max_memory == c.max_memory);
  CHECK(f.regions == c.regions);
}

TEST_CASE("one check for both: errors name the file, line and key, and what the value must be", "[config]") {
  LoaderConfig c;
  auto r = parse_config("listen: 127.0.0.1:0\nmax-input: 400Q\n", "node.yaml", c);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message() == "node.yaml: line 2: 'max-input' must be a size in bytes or with K, M, G (e.g. 64M)");
  CHECK_FALSE(setting("max-input").apply(c, "400Q").ok());
  CHECK(setting("max-input").apply(c, "400Q").error().message() == "must be a size in bytes or with K, M, G (e.g. 64M)");
  CHECK_FALSE(parse_config("executors: 0\n", "n.yaml", c).ok());
  CHECK_FALSE(setting("executors").apply(c, "0").ok());
  CHECK_FALSE(parse_config("timeout: 0\n", "n.yaml", c).ok());
  CHECK_FALSE(parse_config("prefer: fast\n", "n.yaml", c).ok());
  CHECK_FALSE(parse_config("sandbox: maybe\n", "n.yaml", c).ok());
  CHECK_FALSE(parse_config("regions:\n  chase: 0\n", "n.yaml", c).ok());
  CHECK_FALSE(parse_config("trust: [a, b]\n", "n.yaml", c).ok());
  REQUIRE(parse_config("sandbox: False\nstandby: no\n", "n.yaml", c).ok());
  CHECK_FALSE(c.sandbox);
  CHECK_FALSE(c.standby);
  auto u = parse_config("max-inputs: 1\n", "n.yaml", c);
  REQUIRE_FALSE(u.ok());
  CHECK(u.error().message() == "n.yaml: unknown setting 'max-inputs'");
  REQUIRE_FALSE(u.error().hints().empty());
  CHECK(u.error().hints()[0].find("max-input") != std::string::npos);
}

TEST_CASE("loader.example.yaml parses, and shows every setting", "[config]") {
  const std::string path = test::source_dir() + "/loader/loader.example.yaml";
  LoaderConfig c;
  auto r = read_config_file(path, c);
  REQUIRE(r.ok());
  CHECK(c.max_memory == 8ull << 30);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& s : settings())
    CHECK(text.find(std::string(s.name) + ":") != std::string::npos);
}

TEST_CASE("every setting shows as texts that apply back to the same value", "[config]") {
  // What a worker started by exec is given: each setting of its supervisor's, shown, then applied.
  auto round_trip = [](const LoaderConfig& from) {
    LoaderConfig to;
    for (const Setting& s : settings()) {
      REQUIRE(s.show);
      for (const std::string& text : s.show(from)) {
        INFO(s.name << ": " << text);
        REQUIRE(s.apply(to, text).ok());
      }
    }
    for (const Setting& s : settings()) {
      INFO(s.name);
      CHECK(s.show(to) == s.show(from));
    }
  };
  round_trip(LoaderConfig{});
  LoaderConfig c;
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"listen", "127.0.0.1:9"}, {"tls-listen", "0.0.0.0:0"}, {"trust", "/a b/trust"}, {"clients", "c"},
           {"allow-anyone", "true"}, {"node-key", "k"}, {"cache", "/tmp/x"}, {"prefer", "bitcode"}, {"max-cargo", "3M"},
           {"max-input", "17"}, {"timeout", "0.123456789"}, {"executors", "7"}, {"inline-us", "0"}, {"spin-us", "99"},
           {"node-id", "4294967295"}, {"max-hops", "5"}, {"regions", "a=4K"}, {"regions", "b=1G"}, {"sandbox", "false"},
           {"standby", "false"}, {"user", "nobody"}, {"trusted-network", "yes"}, {"log-format", "json"}, {"log-max-size", "1K"}}) {
    const auto it = std::find_if(settings().begin(), settings().end(), [&](const Setting& s) { return s.name == name; });
    REQUIRE(it != settings().end());
    REQUIRE(it->apply(c, text).ok());
  }
  round_trip(c);
  const auto timeout = std::find_if(settings().begin(), settings().end(), [](const Setting& s) { return std::string(s.name) == "timeout"; });
  LoaderConfig back;
  REQUIRE(timeout->apply(back, timeout->show(c).at(0)).ok());
  CHECK(back.timeout_s == c.timeout_s);  // the same double, not one near it
  CHECK(c.regions.size() == 2);
}
