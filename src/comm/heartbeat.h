// The collective watchdog's side channel: one small text file per rank in a directory every rank can read
// (the run directory's heartbeat/, which must be on a shared file system for checkpoints anyway). Each rank's
// watchdog thread rewrites its file every heartbeat period with how far the rank got in each channel of
// collectives (host MPI, device NCCL): the sequence number of the last collective it arrived at and the last
// one it completed, with their names. A rank whose collective times out reads every file twice, a few
// periods apart, and names the ranks that did not arrive and the ranks whose heartbeat stopped. Nothing here
// talks to the stalled rank: a SIGSTOPped or hung process simply stops updating its file.
// Limits: ranks whose files are not visible (run directory not shared across nodes) are reported as such;
// on NFS a file written by another node shows up after the writer's close (each write closes) and the
// reader's open, so the second read sees updates at most a heartbeat period and the attribute cache old.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cnn {

// The two sequences of collectives a rank issues, each in the same order on every rank.
enum class Channel : int { kMpi = 0, kNccl = 1 };
constexpr int kNumChannels = 2;
const char* channel_name(Channel c);  // "MPI", "NCCL"

struct ChannelProgress {
  uint64_t arrived = 0;    // sequence number of the last collective this rank arrived at (1-based; 0: none)
  uint64_t completed = 0;  // ... and of the last one it completed
  std::string what;        // name of collective `arrived`, e.g. "gradient bucket 2/3 at step 12"
};

struct Heartbeat {
  int rank = -1;
  std::string host;
  int64_t pid = 0;
  uint64_t beat = 0;  // incremented at every write: a heartbeat that does not move is a stopped process
  int64_t step = -1;  // training step the rank is in (-1: not training yet)
  std::string addr;   // IP:port of the rank's network probe listener (src/comm/peer_probe.h); "" if none
  ChannelProgress channel[kNumChannels];
};

std::string format_heartbeat(const Heartbeat& h);
// Parses what format_heartbeat wrote; false (and *out unspecified) for anything else.
bool parse_heartbeat(const std::string& text, Heartbeat* out);
std::string heartbeat_path(const std::string& dir, int rank);
// Rewrites dir/rank-NNNNN in place (open, pwrite, close, so NFS publishes it). Errors are ignored: the
// heartbeat is diagnostic, and a full disk must not stop training.
void write_heartbeat(const std::string& dir, const Heartbeat& h);
std::optional<Heartbeat> read_heartbeat(const std::string& dir, int rank);

// A collective that timed out on this rank: channel, sequence number, name, how long this rank waited.
struct Stall {
  Channel channel = Channel::kMpi;
  uint64_t seq = 0;
  std::string what;
  double waited_s = 0;
};

// The watchdog's report for `stall` seen by rank `self` of `world` ranks, from two reads of every rank's
// heartbeat taken `gap_s` seconds apart (nullopt: no readable file). Names the ranks that had not arrived
// at the collective by the second read, the ranks whose heartbeat did not move between the reads, the ranks
// without a heartbeat file, and `silent`: the ranks that did not answer this rank's network probe, with
// their hosts. Pure: tested with made-up heartbeats.
std::string diagnose_stall(const Stall& stall, int self, int world, double gap_s,
                           const std::vector<std::optional<Heartbeat>>& first,
                           const std::vector<std::optional<Heartbeat>>& second,
                           const std::vector<int>& silent = {});

// "1,3-5,9"
std::string format_rank_list(const std::vector<int>& ranks);

}  // namespace cnn
