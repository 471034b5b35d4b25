#include "src/comm/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "src/base/error.h"

namespace cnn {

namespace {

// Files keep one size, so a shorter record never leaves the tail of a longer one behind.
constexpr size_t kRecordBytes = 1024;

std::string one_line(const std::string& s) {
  std::string out = s.substr(0, 200);
  std::replace(out.begin(), out.end(), '\n', ' ');
  return out;
}

const char* key_prefix(int c) { return c == 0 ? "mpi" : "nccl"; }

std::string describe_progress(const ChannelProgress& p) {
  if (p.arrived == 0) return "none yet";
  return strprintf("#%llu '%s'%s", (unsigned long long)p.arrived, p.what.c_str(),
                   p.completed >= p.arrived ? ", completed" : "");
}

}  // namespace

const char* channel_name(Channel c) { return c == Channel::kMpi ? "MPI" : "NCCL"; }

std::string format_heartbeat(const Heartbeat& h) {
  std::string s = strprintf("cnntrain-heartbeat 1\nrank %d\nhost %s\npid %lld\nbeat %llu\nstep %lld\n", h.rank,
                            one_line(h.host).c_str(), (long long)h.pid, (unsigned long long)h.beat,
                            (long long)h.step);
  s += strprintf("addr %s\n", one_line(h.addr).c_str());
  for (int c = 0; c < kNumChannels; ++c)
    s += strprintf("%s_arrived %llu\n%s_completed %llu\n%s_what %s\n", key_prefix(c),
                   (unsigned long long)h.channel[c].arrived, key_prefix(c),
                   (unsigned long long)h.channel[c].completed, key_prefix(c), one_line(h.channel[c].what).c_str());
  s += "end\n";
  return s;
}

bool parse_heartbeat(const std::string& text, Heartbeat* out) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != "cnntrain-heartbeat 1") return false;
  Heartbeat h;
  bool ended = false;
  while (!ended && std::getline(in, line)) {
    if (line == "end") {
      ended = true;
      break;
    }
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) return false;
    const std::string key = line.substr(0, sp), val = line.substr(sp + 1);
    char* end = nullptr;
    const long long num = std::strtoll(val.c_str(), &end, 10);
    const bool is_num = !val.empty() && *end == '\0';
    if (key == "host") h.host = val;
    else if (key == "addr") h.addr = val;
    else if (key == "rank" && is_num) h.rank = static_cast<int>(num);
    else if (key == "pid" && is_num) h.pid = num;
    else if (key == "beat" && is_num) h.beat = static_cast<uint64_t>(num);
    else if (key == "step" && is_num) h.step = num;
    else {
      bool known = false;
      for (int c = 0; c < kNumChannels && !known; ++c) {
        const std::string p = key_prefix(c);
        if (key == p + "_what") h.channel[c].what = val, known = true;
        else if (key == p + "_arrived" && is_num) h.channel[c].arrived = static_cast<uint64_t>(num), known = true;
        else if (key == p + "_completed" && is_num) h.channel[c].completed = static_cast<uint64_t>(num), known = true;
      }
      if (!known) return false;
    }
  }
  if (!ended || h.rank < 0) return false;
  *out = h;
  return true;
}

std::string heartbeat_path(const std::string& dir, int rank) { return strprintf("%s/rank-%05d", dir.c_str(), rank); }

void write_heartbeat(const std::string& dir, const Heartbeat& h) {
  std::string rec = format_heartbeat(h);
  rec.resize(std::max(kRecordBytes, rec.size() + 1), ' ');
  const int fd = ::open(heartbeat_path(dir, h.rank).c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) return;
  ssize_t w = ::pwrite(fd, rec.data(), rec.size(), 0);
  (void)w;
  ::close(fd);
}

std::optional<Heartbeat> read_heartbeat(const std::string& dir, int rank) {
  // A read racing the writer's pwrite may see a torn record: try again a few times.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int fd = ::open(heartbeat_path(dir, rank).c_str(), O_RDONLY);
    if (fd < 0) return std::nullopt;
    std::string buf(4 * kRecordBytes, '\0');
    const ssize_t n = ::pread(fd, &buf[0], buf.size(), 0);
    ::close(fd);
    Heartbeat h;
    if (n > 0 && parse_heartbeat(buf.substr(0, static_cast<size_t>(n)), &h) && h.rank == rank) return h;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

std::string format_rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

std::string diagnose_stall(const Stall& st, int self, int world, double gap_s,
                           const std::vector<std::optional<Heartbeat>>& first,
                           const std::vector<std::optional<Heartbeat>>& second, const std::vector<int>& silent) {
  // "ranks 2,3 (host n2)": the hosts from the second read of the heartbeats.
  auto ranks_on_hosts = [&](const std::vector<int>& ranks) {
    std::vector<std::string> hosts;
    for (int r : ranks)
      if (r < static_cast<int>(second.size()) && second[r] &&
          std::find(hosts.begin(), hosts.end(), second[r]->host) == hosts.end())
        hosts.push_back(second[r]->host);
    std::string s = strprintf("rank%s %s", ranks.size() == 1 ? "" : "s", format_rank_list(ranks).c_str());
    if (hosts.empty()) return s;
    std::string h;
    for (const auto& x : hosts) h += (h.empty() ? "" : ",") + x;
    return s + strprintf(" (host%s %s)", hosts.size() == 1 ? "" : "s", h.c_str());
  };
  const int c = static_cast<int>(st.channel);
  std::string msg = strprintf("collective timeout: waited %.1f s in %s collective #%llu '%s' (--comm.timeout_s)",
                              st.waited_s, channel_name(st.channel), (unsigned long long)st.seq, st.what.c_str());
  std::vector<int> absent, no_file, stopped;
  std::string details;
  int shown = 0;
  for (int r = 0; r < world; ++r) {
    const auto& a = r < static_cast<int>(first.size()) ? first[r] : std::nullopt;
    const auto& b = r < static_cast<int>(second.size()) ? second[r] : std::nullopt;
    if (!b) {
      if (r != self) no_file.push_back(r);
      continue;
    }
    const bool frozen = a && a->beat == b->beat && r != self;
    const bool missing = b->channel[c].arrived < st.seq;
    if (frozen) stopped.push_back(r);
    if (missing) absent.push_back(r);
    if ((missing || frozen) && shown < 8) {
      ++shown;
      details += strprintf("\n  rank %d (host %s, pid %lld): %s; last arrived at %s collective %s; heartbeat %s",
                           r, b->host.c_str(), (long long)b->pid, missing ? "did not arrive" : "arrived",
                           channel_name(st.channel), describe_progress(b->channel[c]).c_str(),
                           frozen ? strprintf("did not move in %.1f s (process stopped or hung, or its node is "
                                              "down)", gap_s).c_str()
                                  : "alive (the process runs but has not reached this collective)");
      if (b->step >= 0) details += strprintf("; at training step %lld", (long long)b->step);
    }
  }
  if (!absent.empty())
    msg += strprintf("; rank%s %s did not arrive", absent.size() == 1 ? "" : "s", format_rank_list(absent).c_str());
  if (!stopped.empty()) msg += "; heartbeat stopped on " + ranks_on_hosts(stopped);
  if (!silent.empty())
    msg += "; no answer over the network from " + ranks_on_hosts(silent) +
           " (link down or node unreachable from " + (self < static_cast<int>(second.size()) && second[self]
                                                          ? second[self]->host : std::string("this host")) + ")";
  if (!no_file.empty())
    msg += strprintf("; no heartbeat file readable for rank%s %s (is the run directory shared by all nodes?)",
                     no_file.size() == 1 ? "" : "s", format_rank_list(no_file).c_str());
  if (absent.empty() && stopped.empty() && no_file.empty() && silent.empty())
    msg += "; every rank arrived and its heartbeat moves: the collective itself makes no progress (network or "
           "NCCL problem; run with NCCL_DEBUG=INFO)";
  return msg + details;
}

}  // namespace cnn
