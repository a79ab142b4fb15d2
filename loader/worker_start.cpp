// WorkerStart's records: what a supervisor hands a worker it starts by exec.
#include "worker_start.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "auth/auth.h"

namespace xcargo::loader {

namespace {

void put(Bytes& out, std::string_view key, std::string_view value) {
  const std::string head = std::string(key) + " " + std::to_string(value.size()) + "\n";
  out.insert(out.end(), head.begin(), head.end());
  out.insert(out.end(), value.begin(), value.end());
  out.push_back('\n');
}

template <typename T>
bool to_number(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

Error bad(const std::string& what) { return Error(Errc::malformed, "worker start: " + what); }

// The descriptors by name, in one place for both directions.
struct Fd {
  const char* name;
  int WorkerStart::*field;
};
constexpr Fd kFds[] = {{"fd addr", &WorkerStart::addr_fd},       {"fd go", &WorkerStart::go_fd},
                       {"fd incident", &WorkerStart::incident_fd}, {"fd compiler", &WorkerStart::compiler_fd},
                       {"fd key", &WorkerStart::key_fd},         {"fd door", &WorkerStart::door_fd},
                       {"fd tls", &WorkerStart::tls_fd}};
struct CfgFd {
  const char* name;
  int LoaderConfig::*field;
};
constexpr CfgFd kCfgFds[] = {{"fd node-memory", &LoaderConfig::node_memory_fd},
                             {"fd kept-cargos", &LoaderConfig::kept_cargos_fd},
                             {"fd node-stats", &LoaderConfig::node_stats_fd}};

}  // namespace

Bytes encode(const WorkerStart& w) {
  Bytes out;
  for (const Setting& s : settings())
    for (const std::string& text : s.show(w.cfg)) put(out, std::string("set ") + s.name, text);
  for (const ClusterNode& n : w.cfg.nodes.nodes) put(out, "node " + std::to_string(n.id), n.address);
  for (const CfgFd& f : kCfgFds) put(out, f.name, std::to_string(w.cfg.*f.field));
  for (const Fd& f : kFds) put(out, f.name, std::to_string(w.*f.field));
  if (w.user) put(out, "user", w.user->name + " " + std::to_string(w.user->uid) + " " + std::to_string(w.user->gid));
  put(out, "node-key", std::string_view(reinterpret_cast<const char*>(w.node_key.raw.data()), w.node_key.raw.size()));
  if (w.clients) put(out, "clients", *w.clients);
  if (!w.tenant.empty()) put(out, "tenant", w.tenant);
  return out;
}

Result<WorkerStart> decode_worker_start(ByteView bytes) {
  if (bytes.size() > kMaxWorkerStart) return bad("over " + std::to_string(kMaxWorkerStart) + " bytes");
  WorkerStart w;
  w.cfg.regions.clear();
  bool key = false;
  std::string_view rest(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  while (!rest.empty()) {
    const size_t nl = rest.find('\n'), sp = rest.rfind(' ', nl);
    if (nl == std::string_view::npos || sp == std::string_view::npos || sp == 0) return bad("a record without its head");
    const std::string_view name = rest.substr(0, sp);
    size_t len = 0;
    if (!to_number(rest.substr(sp + 1, nl - sp - 1), len) || len > rest.size() - nl - 1 || rest.size() - nl - 1 - len < 1 ||
        rest[nl + 1 + len] != '\n')
      return bad(std::string(name) + ": a length past the end");
    const std::string value(rest.substr(nl + 1, len));
    rest.remove_prefix(nl + 2 + len);
    if (name.rfind("set ", 0) == 0) {
      const auto s = std::find_if(settings().begin(), settings().end(), [&](const Setting& x) { return name.substr(4) == x.name; });
      if (s == settings().end()) return bad("no setting " + std::string(name.substr(4)));
      if (auto r = s->apply(w.cfg, value); !r.ok()) return bad(std::string(s->name) + ": " + r.error().message());
    } else if (name.rfind("node ", 0) == 0) {
      uint32_t id = 0;
      if (!to_number(name.substr(5), id) || id != w.cfg.nodes.nodes.size()) return bad("nodes out of order");
      w.cfg.nodes.nodes.push_back(ClusterNode{id, value});
    } else if (name == "user") {
      sandbox::User u;
      const size_t a = value.find(' '), b = value.rfind(' ');
      if (a == std::string::npos || a == b || !to_number(std::string_view(value).substr(a + 1, b - a - 1), u.uid) ||
          !to_number(std::string_view(value).substr(b + 1), u.gid))
        return bad("user: not NAME UID GID");
      u.name = value.substr(0, a);
      w.user = u;
    } else if (name == "node-key") {
      if (value.size() != w.node_key.raw.size()) return bad("node-key: not 32 bytes");
      std::memcpy(w.node_key.raw.data(), value.data(), value.size());
      w.node_key.id = key_id_of(w.node_key.raw);
      key = true;
    } else if (name == "clients") {
      w.clients = value;
    } else if (name == "tenant") {
      if (!auth::is_tenant_name(value)) return bad("tenant: not a tenant's name");
      w.tenant = value;
    } else {
      int* fd = nullptr;
      for (const Fd& f : kFds)
        if (name == f.name) fd = &(w.*f.field);
      for (const CfgFd& f : kCfgFds)
        if (name == f.name) fd = &(w.cfg.*f.field);
      if (!fd) return bad("unknown record " + std::string(name));
      if (!to_number(value, *fd) || *fd < -1) return bad(std::string(name) + ": not a descriptor");
    }
  }
  if (!key) return bad("no node-key");
  return w;
}

// The supervisor's authorized keys as a key-list file: what `clients` holds.
std::string clients_text(const auth::AuthorizedKeys& keys) {
  std::string out;
  for (const auth::AuthorizedKey& k : keys.keys()) out += auth::authorized_line(k.key, k.verbs, k.name, k.tenant) + "\n";
  return out;
}

}  // namespace xcargo::loader
