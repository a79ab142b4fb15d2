// The worker's timing constants, each named once; loader/README.md ("Threads") quotes them.
// Options an admin can set (promote_after, spin, the time limit, auth_deadline) live in
// ServerOptions; these are the fixed ones.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace xcargo::loader::timing {

using namespace std::chrono_literals;

// The supervisor ends a new worker that has not started serving within this (a ceiling: a
// start takes well under a second, a few under a sanitizer on a busy machine).
inline constexpr std::chrono::milliseconds kWorkerStartLimit = 30000ms;

// A standby worker taking over retries listening this long while the port is still held
// (the worker it replaces closes its listener before it says it is ending, or dies).
inline constexpr std::chrono::milliseconds kTakeOverListen = 2000ms;
// A worker that said it is ending (or closed its pipe) is killed if it still runs after this:
// its replies take at most kFlushReplies + kLingerForClose.
inline constexpr std::chrono::milliseconds kEndingGrace = 2000ms;

// A loader's first standby worker starts this long after the loader listens: its start (a
// JIT warm-up, its compile service) took a core for tens of ms from the first clients' pushes
// (a restarted node's first push and invocation: 10 ms with it, 3 to 7 without). Later ones
// start as soon as a worker takes over.
inline constexpr std::chrono::milliseconds kFirstStandbyAfter = 1000ms;

// A standby loads kept cargos for at most this long before it says it is ready; the rest
// load on first use (a kernel could fill the store to keep standbys from being ready).
inline constexpr std::chrono::milliseconds kPreloadBudget = 1000ms;

// A worker waits this long for the key service's proof in a handshake (it signs in well
// under a millisecond; only a service stopped or flooded takes longer).
inline constexpr std::chrono::milliseconds kKeyServiceLimit = 2000ms;

// A compile job (one bitcode variant) running longer is stopped and its cargo refused.
inline constexpr std::chrono::seconds kCompileLimit = 120s;
// Past the compile service's own limit on a job: by then the service has ended it and
// answers from memory (a worker's wait for a compile, a push's request limit).
inline constexpr std::chrono::seconds kPastCompileLimit = kCompileLimit + 10s;

// How often the leader closes refused and late connections and drops stalled transfers.
inline constexpr std::chrono::milliseconds kSweepEvery = 100ms;
// Large buffers (inputs, replies: large_buffers.h) unused this long are freed at a sweep.
inline constexpr std::chrono::milliseconds kKeepLargeBuffers = 2000ms;
// A worker's TLS certificate is renewed this often; it is valid for twice as long
// (keys::kCertifiedFor), so a connection never meets one that has just ended.
inline constexpr std::chrono::minutes kRenewTls{60};
// The leader runs requests already received back to back, at most kReadyBatch between two
// progress calls, while each takes under kBatchRun: a progress call per request (each polls
// the TCP interface, a system call) cost more than a quick request, and with requests
// pipelined the queue never emptied enough for them to run inline again.
// (Measured with 64 invocations in flight over shm: 290K/s one per progress call, 530K/s
// with batches of 16, 700K/s with 32, 740K/s with 64.)
inline constexpr int kReadyBatch = 32;
inline constexpr std::chrono::microseconds kBatchRun = 20us;
// While shared-memory lanes carry requests (one came within the spin time), the leader calls
// UCX's progress at most this often and polls the lanes in between: a progress call polls the
// TCP interface (epoll_wait, 2 to 3 us here with the sandbox's filter), which a lane request
// arriving meanwhile would wait out. Requests through UCX wait up to this much longer then.
inline constexpr std::chrono::microseconds kLaneProgressEvery = 20us;
// A leader with a follower fetches a quick-tier cargo's -O2 code after this long without
// requests (at most `spin`): a client's next request after its push's reply comes sooner.
inline constexpr std::chrono::microseconds kTierUpAfterIdle = 500us;
// ... looks whether that code is in the compile service's cache at most this often (a system
// call per look) ...
inline constexpr std::chrono::milliseconds kTierUpLook = 5ms;
// ... and past this (a cache it cannot read, a failed compile), waits for the compile service
// in a thread of its own: past the -O2 job's own time limit, so that the service has ended it
// and answers from memory. A shorter wait sends a request while the service still compiles:
// it holds the worker's one connection to the service while the service compiles -O2 a
// second time, at normal priority, and every other push waits behind it (minutes).
inline constexpr std::chrono::milliseconds kTierUpWait = kPastCompileLimit;
// A refused connection stays open this long so that its refusal reaches it first.
inline constexpr std::chrono::milliseconds kRefusalLinger = 200ms;
// An idle leader polling (before it sleeps) yields its core this often: a client its reply
// went to may be waiting, runnable, on the same core (on 2 cores a request wakes the leader
// onto its client's core; a first call over tcp waited 1.1 ms behind the leader's polling).
inline constexpr std::chrono::microseconds kYieldEvery = 100us;
// An idle leader's longest sleep in epoll_wait before it checks whether to quit.
inline constexpr std::chrono::milliseconds kIdleWait = 200ms;
// For this long after accepting a connection, an idle leader wakes every millisecond to
// poll: without it, the first requests on a new tcp connection can wait the whole kIdleWait
// (UCX 1.13 does not always signal the worker's event fd for them, after worker restarts).
inline constexpr std::chrono::milliseconds kWaryAfterConnect = 500ms;
// How often the thread that turns the stop signal into quit looks at the flag.
inline constexpr std::chrono::milliseconds kStopPoll = 50ms;
// The supervisor looks at least this often whether its serving worker was stopped (SIGSTOP).
inline constexpr std::chrono::milliseconds kStoppedCheck = 1000ms;
// A System V segment a worker made, not attached and not marked for removal this long, is a
// kernel's, left behind: the supervisor removes it (UCX marks its own within microseconds).
inline constexpr std::chrono::seconds kOrphanSegmentAge{2};

// The supervisor's pace (supervisor.cpp):
// a worker that closed its pipe is killed if it still runs this long after;
inline constexpr std::chrono::milliseconds kReapGrace = 5000ms;
// how often a stopping loader looks whether its workers have exited;
inline constexpr std::chrono::milliseconds kShutDownPoll = 20ms;
// after a worker could not be made (no process, pipe or connection: memory short, say);
inline constexpr std::chrono::milliseconds kSpawnRetry = 1000ms;
// between tries at a worker that does not start: soon for the first ones (the port not yet
// free), then every second for as long as it takes;
inline constexpr std::chrono::milliseconds kStartRetry = 100ms, kStartRetrySlow = 1000ms;
inline constexpr int kStartRetriesSoon = 10;
// a standby that failed is tried again after kStandbyRetry << failures, at most
// kStandbyRetryMax; one that said something else than "standby", after kSpawnRetry;
inline constexpr std::chrono::milliseconds kStandbyRetry = 100ms, kStandbyRetryMax = 5000ms;
// more than kCrashLoopRestarts restarts within kCrashLoopWindow, none a kernel failure the
// worker reported, is a crash loop: each restart then waits kCrashLoopPause.
inline constexpr std::chrono::milliseconds kCrashLoopWindow = 2000ms, kCrashLoopPause = 500ms;
inline constexpr size_t kCrashLoopRestarts = 5;

// The monitor looks at the executors when a running request's promotion or limit is due,
// and within promote_after while requests come; after this long without any it sleeps until
// one starts.
inline constexpr std::chrono::milliseconds kMonitorIdle = 100ms;
// After a time-out the worker must have told the client and ended within this; else the
// monitor ends it.
inline constexpr std::chrono::milliseconds kRestartGrace = 1000ms;
// A restarting worker's longest wait for its replies to leave...
inline constexpr std::chrono::milliseconds kFlushReplies = 300ms;
// ... and how long it lingers at least so that its clients read them before the connection
// drops ...
inline constexpr std::chrono::milliseconds kLingerReplies = 100ms;
// ... and at most, waiting for the clients it answered to close their connections. The three
// together stay within kRestartGrace (the monitor's) and kEndingGrace (the supervisor's).
inline constexpr std::chrono::milliseconds kLingerForClose = 600ms;
static_assert(kFlushReplies + kLingerForClose < kRestartGrace && kFlushReplies + kLingerForClose < kEndingGrace);

// A transfer (a push's cargo, an invoke's input) must arrive within kTransferBase plus its
// length at kTransferBytesPerSecond, or its connection is closed.
inline constexpr std::chrono::milliseconds kTransferBase = 10000ms;
inline constexpr uint64_t kTransferBytesPerSecond = 10'000'000;
inline std::chrono::milliseconds transfer_deadline(uint64_t bytes) {
  return kTransferBase + std::chrono::milliseconds(bytes / (kTransferBytesPerSecond / 1000));
}

}  // namespace xcargo::loader::timing
