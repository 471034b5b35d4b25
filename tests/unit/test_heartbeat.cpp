// The collective watchdog's side channel: heartbeat records round-trip through their files, and the report
// of a timeout names the ranks that did not arrive, the ranks whose heartbeat stopped and the ranks without
// a readable file, from made-up heartbeats.
#include "src/comm/heartbeat.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

Heartbeat beat(int rank, uint64_t b, uint64_t mpi_arrived, uint64_t nccl_arrived) {
  Heartbeat h;
  h.rank = rank;
  h.host = "node" + std::to_string(rank / 4);
  h.pid = 1000 + rank;
  h.beat = b;
  h.step = 12;
  h.channel[0] = {mpi_arrived, mpi_arrived, "MPI allreduce (max) of 1 int at step 12"};
  h.channel[1] = {nccl_arrived, nccl_arrived - 1, "gradient bucket 2/3 (elements 0-100) at step 12"};
  return h;
}

TEST(Heartbeat, RoundTripsThroughItsFile) {
  test::TempDir d;
  Heartbeat h = beat(3, 77, 40, 17);
  h.channel[1].what = "name with spaces\nand a newline";
  write_heartbeat(d.path(), h);
  h.beat = 78;  // rewritten in place: a shorter or longer record leaves nothing of the old one
  h.channel[0].what = "x";
  write_heartbeat(d.path(), h);
  const auto back = read_heartbeat(d.path(), 3);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->beat, 78u);
  EXPECT_EQ(back->pid, 1003);
  EXPECT_EQ(back->host, "node0");
  EXPECT_EQ(back->channel[1].arrived, 17u);
  EXPECT_EQ(back->channel[1].what, "name with spaces and a newline");
  EXPECT_EQ(back->channel[0].what, "x");
  EXPECT_FALSE(read_heartbeat(d.path(), 4).has_value());
  Heartbeat junk;
  EXPECT_FALSE(parse_heartbeat("cnntrain-heartbeat 1\nrank 2\n", &junk)) << "a torn record must not parse";
}

TEST(Heartbeat, TimeoutReportNamesMissingStoppedAndSilentRanks) {
  Stall s{Channel::kNccl, 18, "gradient bucket 3/3 (elements 100-200) at step 12", 5.2};
  std::vector<std::optional<Heartbeat>> first(6), second(6);
  for (int r = 0; r < 6; ++r) {
    first[r] = beat(r, 10, 40, 18);
    second[r] = beat(r, 14, 40, 18);
  }
  second[1] = beat(1, 14, 40, 17);  // alive, still before the collective
  first[4] = beat(4, 9, 40, 17);    // stopped before it: its beat does not move
  second[4] = beat(4, 9, 40, 17);
  first[5].reset();                 // no file on this node
  second[5].reset();
  const std::string m = diagnose_stall(s, 0, 6, 1.5, first, second);
  for (const char* needle : {"waited 5.2 s in NCCL collective #18", "ranks 1,4 did not arrive",
                             "heartbeat stopped on rank 4 (host node1)", "no heartbeat file readable for rank 5",
                             "rank 1 (host node0, pid 1001): did not arrive", "heartbeat alive",
                             "rank 4 (host node1, pid 1004): did not arrive", "did not move in 1.5 s",
                             "last arrived at NCCL collective #17"})
    EXPECT_NE(m.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << m;
  // Everyone there and alive: the collective itself is stuck.
  for (int r = 0; r < 6; ++r) first[r] = beat(r, 1, 40, 18), second[r] = beat(r, 2, 40, 18);
  EXPECT_NE(diagnose_stall(s, 0, 6, 1.5, first, second).find("every rank arrived"), std::string::npos);
  // ... unless the network probe found ranks that do not answer (a cut link: their heartbeats still move).
  const std::string cut = diagnose_stall(s, 0, 6, 1.5, first, second, {4, 5});
  EXPECT_NE(cut.find("no answer over the network from ranks 4,5 (host node1) (link down or node unreachable "
                     "from node0)"), std::string::npos) << cut;
  EXPECT_EQ(cut.find("every rank arrived"), std::string::npos) << cut;
}

TEST(Heartbeat, CarriesTheProbeAddress) {
  test::TempDir d;
  Heartbeat h = beat(2, 1, 1, 1);
  h.addr = "10.77.0.12:40123";
  write_heartbeat(d.path(), h);
  const auto back = read_heartbeat(d.path(), 2);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->addr, "10.77.0.12:40123");
}

TEST(Heartbeat, RankListsAreCompact) {
  EXPECT_EQ(format_rank_list({0, 1, 2, 3, 7, 9, 10}), "0-3,7,9,10");
  EXPECT_EQ(format_rank_list({5}), "5");
}

}  // namespace
}  // namespace cnn
