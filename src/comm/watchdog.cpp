#include "src/comm/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/peer_probe.h"

namespace cnn {

namespace {

struct InFlight {
  uint64_t seq;
  std::string what;
  double arrived;  // < 0: the device has not reached it yet
  bool polled_by_main;
};

struct State {
  std::mutex mu;
  double timeout = 600;
  std::string dir;
  uint64_t issued[kNumChannels] = {0, 0};
  ChannelProgress progress[kNumChannels];
  std::deque<InFlight> inflight[kNumChannels];
  std::vector<std::pair<int, std::function<void()>>> probes, hooks;
  // Held while probes or hooks run, so that removing one waits until it is not running any more.
  std::recursive_mutex running;
  int next_id = 1;
  std::thread thread;
  std::condition_variable cv;
  bool stop = false;
  uint64_t beat = 0;
};

// Never destroyed: the watchdog thread may still look at it while the process exits.
State& state() {
  static State* s = new State;
  return *s;
}

// 0: quiet; 1: a thread is writing the report; 2: reported, the job is being aborted.
std::atomic<int> g_fired{0};
std::atomic<double> g_fired_at{0};
std::atomic<int64_t> g_step{-1};

// Heartbeat period and the grace the main thread gets to abort, both scaled with the deadline.
double heartbeat_period(double timeout) { return std::clamp(timeout / 20, 0.1, 2.0); }
double abort_grace(double timeout) { return std::clamp(timeout / 2, 1.0, 10.0); }

std::vector<std::function<void()>> callbacks(const std::vector<std::pair<int, std::function<void()>>>& v) {
  std::vector<std::function<void()>> out;
  for (const auto& p : v) out.push_back(p.second);
  return out;
}

Heartbeat own_heartbeat(State& s) {
  Heartbeat h;
  h.rank = world_rank();
  h.host = host_name();
  h.pid = static_cast<int64_t>(::getpid());
  h.beat = ++s.beat;
  h.step = g_step.load();
  h.addr = open_probe_listener();
  for (int c = 0; c < kNumChannels; ++c) h.channel[c] = s.progress[c];
  return h;
}

void beat_now() {
  State& s = state();
  std::string dir;
  Heartbeat h;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.dir.empty()) return;
    dir = s.dir;
    h = own_heartbeat(s);
  }
  write_heartbeat(dir, h);
}

std::string diagnose(const Stall& stall) {
  State& s = state();
  std::string dir;
  double timeout;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    dir = s.dir;
    timeout = s.timeout;
  }
  const int world = world_size();
  if (dir.empty()) {
    return diagnose_stall(stall, world_rank(), world, 0, {}, std::vector<std::optional<Heartbeat>>(world)) +
           "\n  (no heartbeat directory: start_watchdog was not given one, so the missing ranks cannot be named)";
  }
  auto read_all = [&] {
    std::vector<std::optional<Heartbeat>> v(world);
    for (int r = 0; r < world; ++r) v[r] = read_heartbeat(dir, r);
    return v;
  };
  beat_now();
  const auto first = read_all();
  // Long enough for every live rank to have written twice; the network probe of the other ranks runs meanwhile.
  const double gap = 2.5 * heartbeat_period(timeout), start = watchdog_now();
  std::vector<std::string> addrs(world);
  for (int r = 0; r < world; ++r)
    if (first[r] && r != world_rank()) addrs[r] = first[r]->addr;
  const std::vector<ProbeResult> probed = probe_peers(addrs, gap);
  std::vector<int> silent;
  for (int r = 0; r < world; ++r)
    if (probed[r] == ProbeResult::kSilent) silent.push_back(r);
  std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.0, gap - (watchdog_now() - start))));
  beat_now();
  return diagnose_stall(stall, world_rank(), world, gap, first, read_all(), silent);
}

void run_abort_hooks() {
  std::vector<std::function<void()>> hooks;
  {
    State& s = state();
    std::lock_guard<std::mutex> lk(s.mu);
    hooks = callbacks(s.hooks);
  }
  std::lock_guard<std::recursive_mutex> running(state().running);
  for (auto& h : hooks) h();
}

// Any thread: the first caller reports `message` (built lazily: diagnosing takes seconds) and aborts the
// device communicators; later callers return at once.
void fire(const std::function<std::string()>& message) {
  int quiet = 0;
  if (!g_fired.compare_exchange_strong(quiet, 1)) return;
  report_error(message() + "\n  aborting the job: ncclCommAbort on any device communicator, then MPI_Abort");
  run_abort_hooks();
  g_fired_at.store(watchdog_now());
  g_fired.store(2);
}

[[noreturn]] void abort_job() {
  // Whoever fired may still be writing the report; give it the time a diagnosis takes.
  const double until = watchdog_now() + 30;
  while (g_fired.load() == 1 && watchdog_now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  comm_abort(kExitFailure);
}

void watchdog_loop() {
  State& s = state();
  double last_beat = 0, last_loop = watchdog_now();
  for (;;) {
    double timeout;
    std::vector<std::function<void()>> probes;
    {
      std::unique_lock<std::mutex> lk(s.mu);
      s.cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return s.stop; });
      if (s.stop) return;
      timeout = s.timeout;
      probes = callbacks(s.probes);
    }
    {
      std::lock_guard<std::recursive_mutex> running(s.running);
      for (auto& p : probes) p();
    }
    drain_probe_listener();
    const double now = watchdog_now();
    if (now - last_loop > kNotRunningGap) {  // the process was stopped: that was no waiting
      std::lock_guard<std::mutex> lk(s.mu);
      for (auto& q : s.inflight)
        for (auto& f : q)
          if (f.arrived >= 0) f.arrived += now - last_loop;
    }
    last_loop = now;
    if (now - last_beat >= heartbeat_period(timeout)) {
      beat_now();
      last_beat = now;
    }
    if (g_fired.load() == 2) {
      if (now - g_fired_at.load() > abort_grace(timeout)) {
        report_error(strprintf("the main thread did not end the job within %.0f s of the collective abort (it is "
                               "blocked in MPI or on the device); exiting this process so that the launcher ends "
                               "the others", abort_grace(timeout)));
        _exit(kExitFailure);
      }
      continue;
    }
    Stall stall;
    bool overdue = false;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      for (int c = 0; c < kNumChannels && !overdue; ++c) {
        if (s.inflight[c].empty()) continue;
        const InFlight& f = s.inflight[c].front();
        // The main thread polls its own collectives; the thread steps in only if it does not.
        const double limit = timeout + (f.polled_by_main ? abort_grace(timeout) : 0);
        if (f.arrived >= 0 && now - f.arrived > limit) {
          overdue = true;
          stall = Stall{static_cast<Channel>(c), f.seq, f.what, now - f.arrived};
        }
      }
    }
    if (overdue) fire([&] { return diagnose(stall); });
  }
}

}  // namespace

double watchdog_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void set_collective_timeout(double seconds) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.timeout = seconds;
}

double collective_timeout() {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.timeout;
}

void start_watchdog(const std::string& heartbeat_dir) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.thread.joinable()) return;
    s.dir = heartbeat_dir;
    s.stop = false;
  }
  beat_now();
  s.thread = std::thread(watchdog_loop);
}

void stop_watchdog() {
  State& s = state();
  if (!s.thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.stop = true;
  }
  s.cv.notify_all();
  s.thread.join();
  beat_now();
}

void set_collective_step(int64_t step) { g_step.store(step); }
int64_t collective_step() { return g_step.load(); }

uint64_t begin_host_collective(Channel channel, const std::string& what, bool polled_by_main) {
  State& s = state();
  const int c = static_cast<int>(channel);
  std::lock_guard<std::mutex> lk(s.mu);
  const uint64_t seq = ++s.issued[c];
  s.progress[c].arrived = seq;
  s.progress[c].what = what;
  s.inflight[c].push_back(InFlight{seq, what, watchdog_now(), polled_by_main});
  return seq;
}

void end_host_collective(Channel channel, uint64_t seq) {
  State& s = state();
  const int c = static_cast<int>(channel);
  std::lock_guard<std::mutex> lk(s.mu);
  s.progress[c].completed = std::max(s.progress[c].completed, seq);
  auto& q = s.inflight[c];
  q.erase(std::remove_if(q.begin(), q.end(), [&](const InFlight& f) { return f.seq == seq; }), q.end());
}

void check_collective_deadline(Channel channel, uint64_t seq, double started) {
  abort_if_watchdog_fired();
  const double waited = watchdog_now() - started;
  if (waited <= collective_timeout()) return;
  std::string what;
  {
    State& s = state();
    std::lock_guard<std::mutex> lk(s.mu);
    for (const auto& f : s.inflight[static_cast<int>(channel)])
      if (f.seq == seq) what = f.what;
  }
  fire([&] { return diagnose(Stall{channel, seq, what, waited}); });
  abort_job();
}

CollectiveSection::CollectiveSection(const std::string& what)
    : seq_(begin_host_collective(Channel::kMpi, what, false)) {}
CollectiveSection::~CollectiveSection() { end_host_collective(Channel::kMpi, seq_); }

uint64_t begin_device_collective(const std::string& what) {
  State& s = state();
  const int c = static_cast<int>(Channel::kNccl);
  std::lock_guard<std::mutex> lk(s.mu);
  const uint64_t seq = ++s.issued[c];
  s.inflight[c].push_back(InFlight{seq, what, -1, false});
  return seq;
}

void device_collective_arrived(uint64_t seq) {
  State& s = state();
  const int c = static_cast<int>(Channel::kNccl);
  std::lock_guard<std::mutex> lk(s.mu);
  for (auto& f : s.inflight[c])
    if (f.seq == seq && f.arrived < 0) {
      f.arrived = watchdog_now();
      if (seq > s.progress[c].arrived) {
        s.progress[c].arrived = seq;
        s.progress[c].what = f.what;
      }
    }
}

void device_collective_completed(uint64_t seq) {
  State& s = state();
  const int c = static_cast<int>(Channel::kNccl);
  std::lock_guard<std::mutex> lk(s.mu);
  s.progress[c].completed = std::max(s.progress[c].completed, seq);
  auto& q = s.inflight[c];
  while (!q.empty() && q.front().seq <= seq) q.pop_front();
}

int add_watchdog_probe(std::function<void()> probe) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.probes.emplace_back(s.next_id, std::move(probe));
  return s.next_id++;
}

int add_abort_hook(std::function<void()> hook) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.hooks.emplace_back(s.next_id, std::move(hook));
  return s.next_id++;
}

void remove_watchdog_callback(int id) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    for (auto* v : {&s.probes, &s.hooks})
      v->erase(std::remove_if(v->begin(), v->end(), [&](const auto& p) { return p.first == id; }), v->end());
  }
  std::lock_guard<std::recursive_mutex> wait_until_not_running(s.running);
}

void report_async_collective_error(const std::string& what) {
  fire([&] {
    std::string inflight;
    State& s = state();
    std::lock_guard<std::mutex> lk(s.mu);
    for (int c = 0; c < kNumChannels; ++c)
      if (!s.inflight[c].empty())
        inflight += strprintf("; in flight: %s collective #%llu '%s'", channel_name(static_cast<Channel>(c)),
                              (unsigned long long)s.inflight[c].front().seq, s.inflight[c].front().what.c_str());
    return "collective error: " + what + inflight;
  });
}

bool watchdog_fired() { return g_fired.load() != 0; }

void abort_if_watchdog_fired() {
  if (g_fired.load() != 0) abort_job();
}

}  // namespace cnn
