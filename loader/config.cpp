// loader.yaml parsing with yaml-cpp, with the file and key named in every error.
#include "config.h"

#include "xcargo/file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace xcargo::loader {

namespace {
constexpr uint64_t kMaxConfigSize = 1 << 20;
}  // namespace

Status read_config_file(const std::string& path, LoaderConfig& c) {
  auto text = read_file(path, kMaxConfigSize);
  if (!text.ok()) return text.take_error();
  return parse_config(std::string_view(reinterpret_cast<const char*>(text->data()), text->size()), path, c);
}

Status parse_config(std::string_view text, const std::string& path, LoaderConfig& c) {
  if (text.size() > kMaxConfigSize) return Error(Errc::limit, path + ": over " + std::to_string(kMaxConfigSize) + " bytes");
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Error(Errc::invalid_argument, path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) return Error(Errc::invalid_argument, path + ": the configuration must be a mapping of settings");
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>("");
    std::replace(key.begin(), key.end(), '-', '_');
    const YAML::Node& v = kv.second;
    auto bad = [&](const std::string& what) {
      return Error(Errc::invalid_argument, path + ": '" + kv.first.as<std::string>("") + "' must be " + what);
    };
    try {
      if (key == "listen") c.listen = v.as<std::string>();
      else if (key == "trust") c.trust = v.as<std::string>();
      else if (key == "cache") c.cache = v.as<std::string>();
      else if (key == "ready_file") c.ready_file = v.as<std::string>();
      else if (key == "prefer") {
        c.prefer = v.as<std::string>();
        if (c.prefer != "native" && c.prefer != "bitcode") return bad("native or bitcode");
      } else if (key == "max_cargo") c.max_cargo = v.as<uint64_t>();
      else if (key == "max_input") c.max_input = v.as<uint64_t>();
      else if (key == "max_reply") c.max_reply = v.as<uint64_t>();
      else if (key == "max_memory") c.max_memory = v.as<uint64_t>();
      else if (key == "clients") c.clients = v.as<std::string>();
      else if (key == "node_key") c.node_key = v.as<std::string>();
      else if (key == "user") c.user = v.as<std::string>();
      else if (key == "log") c.log = v.as<std::string>();
      else if (key == "log_max_size") c.log_max_size = v.as<uint64_t>();
      else if (key == "sandbox" || key == "one_sided_regions" || key == "trusted_network" || key == "allow_anyone" || key == "standby") {
        bool& flag = key == "sandbox" ? c.sandbox : key == "one_sided_regions" ? c.one_sided_regions
                   : key == "trusted_network" ? c.trusted_network : key == "standby" ? c.standby : c.allow_anyone;
        try {
          flag = v.as<bool>();
        } catch (const YAML::Exception&) {
          return bad("true or false");
        }
      }
      else if (key == "timeout") {
        c.timeout_s = v.as<double>();
        if (!(c.timeout_s >= 0.001 && c.timeout_s <= 86400)) return bad("from 0.001 to 86400 seconds");
      }
      else if (key == "node_id") c.node_id = v.as<uint32_t>();
      else if (key == "cluster") c.cluster = v.as<std::string>();
      else if (key == "regions") {
        if (!v.IsMap()) return bad("a mapping of region names to sizes in bytes");
        for (const auto& r : v) c.regions.push_back(r.first.as<std::string>() + "=" + std::to_string(r.second.as<uint64_t>()));
      }
      else if (key == "max_hops") {
        c.max_hops = v.as<uint32_t>();
        if (c.max_hops < 1) return bad("at least 1");
      }
      else if (key == "spin_us") {
        c.spin_us = v.as<unsigned>();
        if (c.spin_us > 1000000) return bad("from 0 to 1000000");
      } else if (key == "inline_us") {
        c.inline_us = v.as<unsigned>();
        if (c.inline_us > 1000) return bad("from 0 to 1000");
      } else if (key == "executors") {
        c.executors = v.as<unsigned>();
        if (c.executors < 1 || c.executors > 256) return bad("from 1 to 256");
      }
      else
        return Error(Errc::invalid_argument, path + ": unknown setting '" + kv.first.as<std::string>("") + "'")
            .hint("settings: listen trust cache ready-file prefer max-cargo max-input max-reply timeout executors inline-us spin-us node-id cluster max-hops regions max-memory sandbox standby one-sided-regions trusted-network clients allow-anyone node-key user log log-max-size");
    } catch (const YAML::Exception&) {
      return bad(key == "listen" || key == "trust" || key == "cache" || key == "ready_file" || key == "cluster" ||
                         key == "clients" || key == "node_key" || key == "user" || key == "log" ? "a string"
                                                                                                                 : "a number");
    }
  }
  return {};
}

}  // namespace xcargo::loader
