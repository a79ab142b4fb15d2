// The protocol's loader half: turns one request (type, header, data) into one reply, on top
// of the Engine. Transport-free: the --exec pipe mode and the UCX server both use it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "engine/engine.h"
#include "server/reply.h"
#include "server/line_limit.h"
#include "stats/node_stats.h"
#include "server/run_log.h"
#include "wire/wire.h"

namespace xcargo::loader {

// Who sent the request this thread is handling, for the handler's log lines ("from
// HOST:PORT key KEYID (NAME)"). The UCX server sets one around each request it hands over;
// lines logged outside one name nobody.
class RequestOrigin {
public:
  explicit RequestOrigin(const std::string* who);
  ~RequestOrigin();
  RequestOrigin(const RequestOrigin&) = delete;
  RequestOrigin& operator=(const RequestOrigin&) = delete;
  static const std::string* current();

private:
  const std::string* prev_;
};

// One step of a computation: the kernel ran here, and the computation either ended (reply)
// or moves on to another node (forward).
struct Step {
  Reply reply;                           // a result, when send_reply
  Bytes reply_to;                        // empty: to the requesting endpoint; else the relay address of a chain's client (wire-protocol.md 4.13)
  bool send_reply = true;
  std::optional<wire::Forward> forward;  // the next hop's header, cargo_size 0 (the transport adds the cargo)
  uint32_t forward_node = 0;
  Bytes forward_input;
  int64_t ended_ns = 0;  // InvokeResult::ended_ns: when its kernel returned, if one ran
  // A forward's step: the node it came from, which holds the cargo (Peers::holds). Else none.
  static constexpr uint32_t kNoNode = UINT32_MAX;
  uint32_t came_from = kNoNode;
};

class Handler {
public:
  using Log = std::function<void(std::string_view)>;
  // every_run: a log line for each run (else RunLog's first line and sums).
  Handler(Engine& engine, uint64_t max_input, Log log, uint32_t max_hops = 1000000, bool every_run = false);
  ~Handler();

  // Never throws; an undecodable request gets a result with status bad_request.
  Reply handle(wire::MsgType type, ByteView header, ByteView data);
  // An invoke from a client whose chains' results go to reply_address (its relay address). quick_only:
  // run only a kernel known to be quick (Engine::invoke_if_quick); nullopt when not run.
  // owned: data's own buffer, if the caller can give it up: a kernel that replies with its
  // input gets it as its reply's (moved out; InvokeResult::reply_from_input). Else a copy.
  std::optional<Step> invoke(ByteView header, ByteView data, ByteView reply_address, bool quick_only, Bytes* owned = nullptr);
  // A forward from another node: the hop limit, then its cargo if carried and new here
  // (verified and loaded like a push), then the kernel. nullopt: quick_only and the kernel
  // is not known to be quick, or there is a cargo to load.
  std::optional<Step> forward(ByteView header, ByteView data, bool quick_only, Bytes* owned = nullptr);
  // The node's memory regions (the UCX server registers them when one-sided reads are on).
  Regions& regions() { return engine_.regions(); }
  Regions* regions_if_open() { return engine_.regions_if_open(); }  // nullptr in a standby worker
  void on_load(std::function<void(bool)> hook) { engine_.on_load(std::move(hook)); }  // Engine::on_load
  // For forwards to nodes that may lack the cargo (Engine::cargo_bytes).
  std::shared_ptr<const Bytes> cargo_bytes(const Digest& digest) const { return engine_.cargo_bytes(digest); }
  // The limits a node announces in its hello_reply.
  uint64_t max_cargo() const;
  uint64_t max_input() const { return max_input_; }
  uint64_t max_reply() const;
  // "cargo DIGEST/ENTRY, signed by ...": what an invoke or forward runs, for the lines that
  // report a kernel that did not come back; "" for other requests.
  std::string describe(wire::MsgType type, ByteView header) const;
  // A result with status bad_request for a request that could not be taken in; logged.
  Reply bad_request(const std::string& why);
  // Logs the sums of runs (RunLog) that are a second old, or all of them (before the worker ends).
  void flush_runs(bool all = false) {
    runs_.flush(all);
    refusals_.flush(all);
  }
  // Runs on this thread between the two are summed apart, then logged (RunLog::begin_batch).
  void begin_batch() { runs_.begin_batch(); }
  void end_batch() { runs_.end_batch(); }
  // Whether a pushed bitcode cargo still runs its quick tier; tier_up() gives it -O2's code
  // (waiting for the compile service) and logs a line per cargo.
  bool tier_up_pending() const { return engine_.tier_up_pending(); }
  uint32_t misjudged_runs() const { return engine_.misjudged_runs(); }  // Engine::misjudged_runs
  bool tier_up_ready() const { return engine_.tier_up_ready(); }
  void tier_up(bool ready = false);

  // The node's counters (node_stats.h), which outlive this worker: every invocation and
  // forward answered is counted there once begin_serving was called on them. Null: none.
  void set_node_stats(NodeStats* stats) { stats_ = stats; }
  // An invoke or forward the server answered without the handler (a kernel's crash, time-out
  // or sandbox stop; interrupted; restarting): counted with its status.
  void count_answer(wire::MsgType type, ByteView header, wire::ReplyStatus status);

  // Counters of the transport (the UCX server's) that stats replies add to the engine's.
  // Called from whichever thread answers a stats request.
  void set_transport_counters(std::function<std::vector<wire::Counter>()> f) { transport_counters_ = std::move(f); }

private:
  // log_ with the request's origin (RequestOrigin) appended.
  void note(std::string line);
  // The same for a refused or failed request's line: at most so many per origin (LineLimit).
  void note_request(const std::string& line);
  Reply hello(ByteView header);
  Reply push(ByteView header, ByteView data);
  Reply has(ByteView header);
  Reply invoke(ByteView header, ByteView data);
  // keep_log: the result carries the kernel's xc_log lines (an invoke's kInvokeLog).
  std::optional<Step> run(uint64_t request_id, const Digest& digest, const std::string& entry, ByteView input,
                          uint32_t hop, ByteView reply_address, bool quick_only, Bytes* owned, bool keep_log = false);
  Reply list(ByteView header);
  Reply stats(ByteView header);
  Reply region(ByteView header);       // its length; the UCX server adds a key for one-sided reads
  Reply region_read(ByteView header);  // bounds-checked copy of region bytes

  Engine& engine_;
  uint64_t max_input_;
  uint32_t max_hops_;
  Log log_;
  RunLog runs_;
  LineLimit refusals_;
  bool every_run_;
  std::function<std::vector<wire::Counter>()> transport_counters_;
  NodeStats* stats_ = nullptr;
  // The label slots of a cargo (by digest; name null: not loaded) and of this thread's
  // request origin (its client key), cached per thread.
  uint16_t cargo_label(const Digest& digest, const std::string* name);
  uint16_t client_label();
};

}  // namespace xcargo::loader
