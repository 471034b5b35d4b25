// Observability building blocks: CRC-32C and TFRecord framing of TensorBoard event files, exact JSON
// numbers, straggler detection, progress formatting, the host phase timer.
#include <dirent.h>

#include <algorithm>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "kernels/backend.h"
#include "kernels/rng.h"
#include "src/base/error.h"
#include "src/obs/crc32c.h"
#include "src/obs/event_file.h"
#include "src/obs/progress.h"
#include "src/obs/rank_report.h"
#include "src/obs/runlog.h"
#include "src/obs/tfevent.pb.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

uint32_t le32(const unsigned char* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }

// Parses a TFRecord file, checking both CRCs of every record.
std::vector<tfevent::Event> read_events(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<tfevent::Event> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    EXPECT_LE(pos + 12, bytes.size()) << "truncated header";
    const auto* h = reinterpret_cast<const unsigned char*>(bytes.data() + pos);
    uint64_t len = 0;
    for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(h[i]) << (8 * i);
    EXPECT_EQ(le32(h + 8), mask_crc32c(crc32c(h, 8))) << "length CRC of record at " << pos;
    const auto* d = h + 12;
    EXPECT_LE(pos + 16 + len, bytes.size()) << "truncated record";
    EXPECT_EQ(le32(d + len), mask_crc32c(crc32c(d, len))) << "data CRC of record at " << pos;
    tfevent::Event e;
    EXPECT_TRUE(e.ParseFromArray(d, static_cast<int>(len)));
    out.push_back(e);
    pos += 16 + len;
  }
  return out;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> v;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') v.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  std::sort(v.begin(), v.end());
  return v;
}

TEST(Crc32c, KnownVectors) {
  // RFC 3720 (iSCSI) appendix B.4 and the usual check value.
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  const std::vector<unsigned char> zeros(32, 0), ones(32, 0xff);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62a8ab43u);
  std::vector<unsigned char> inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(inc.data(), inc.size()), 0x46dd794eu);
  // TFRecord's mask: rotate right by 15, add 0xa282ead8.
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
  EXPECT_EQ(mask_crc32c(0x8000u), 0xa282ead8u + 1);
}

TEST(EventFile, RecordsParseWithValidCrcs) {
  test::TempDir t;
  EventFileWriter w;
  w.open(t.file("tb/sub"), "hostx");
  EXPECT_NE(w.path().find("/tb/sub/events.out.tfevents."), std::string::npos) << w.path();
  EXPECT_EQ(w.path().substr(w.path().size() - 6), ".hostx");
  w.session_start(41);
  w.scalar("train/loss", 7, 0.1);
  w.scalar("train/lr", 8, 1e-30);
  const std::vector<float> x = {1.f, -2.f, NAN, 3.f, 0.5f, INFINITY};
  w.histogram("weights/w", 9, x.data(), x.size(), 4);
  w.flush();
  const auto ev = read_events(w.path());
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].file_version(), "brain.Event:2");
  EXPECT_EQ(ev[1].session_log().status(), tfevent::SessionLog::START);
  EXPECT_EQ(ev[1].step(), 41);
  ASSERT_EQ(ev[2].summary().value_size(), 1);
  EXPECT_EQ(ev[2].summary().value(0).tag(), "train/loss");
  EXPECT_EQ(ev[2].summary().value(0).simple_value(), 0.1f);  // float32, as TensorBoard keeps it
  EXPECT_EQ(ev[2].step(), 7);
  EXPECT_EQ(ev[3].summary().value(0).simple_value(), 1e-30f);
  const auto& h = ev[4].summary().value(0).histo();
  EXPECT_EQ(h.num(), 4);  // the finite values
  EXPECT_EQ(h.min(), -2);
  EXPECT_EQ(h.max(), 3);
  EXPECT_DOUBLE_EQ(h.sum(), 2.5);
  EXPECT_DOUBLE_EQ(h.sum_squares(), 1 + 4 + 9 + 0.25);
  ASSERT_EQ(h.bucket_size(), 4);
  ASSERT_EQ(h.bucket_limit_size(), 4);
  EXPECT_EQ(h.bucket_limit(3), 3);
  double total = 0;
  for (double c : h.bucket()) total += c;
  EXPECT_EQ(total, 4);
  EXPECT_GT(ev[0].wall_time(), 1.6e9);
}

TEST(EventFile, EveryOpenIsANewFile) {
  test::TempDir t;
  {
    EventFileWriter a, b;  // the same second and host: the second gets a suffix, nothing is overwritten
    a.open(t.path(), "h");
    b.open(t.path(), "h");
    EXPECT_NE(a.path(), b.path());
    a.scalar("x", 1, 1.0);
    b.scalar("x", 2, 2.0);
  }
  const auto files = files_in(t.path());
  ASSERT_EQ(files.size(), 2u);
  for (const auto& f : files) EXPECT_EQ(read_events(f).size(), 2u) << f;
}

TEST(EventFile, UnwritableDirectoryNamesThePath) {
  try {
    EventFileWriter w;
    w.open("/proc/cnntrain-no/tb", "h");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitUsage);
    EXPECT_NE(std::string(e.what()).find("/proc/cnntrain-no"), std::string::npos) << e.what();
  }
}

TEST(Json, NumbersReadBackExactly) {
  CounterRng rng(5, 1);
  for (int i = 0; i < 2000; ++i) {
    const double v = (rng.uniform() - 0.5) * std::pow(10.0, static_cast<int>(rng.uniform() * 40) - 20);
    const std::string s = json_number(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
  }
  EXPECT_EQ(json_number(0.1), "0.1");
  EXPECT_EQ(json_number(NAN), "null");
  EXPECT_EQ(json_number(-INFINITY), "null");
  Json j;
  j.add("event", "ranks").add("step", int64_t{3}).add("v", std::vector<double>{0.5, NAN})
      .add("h", std::vector<std::string>{"a\"b"}).add("n", std::vector<int64_t>{1, 2});
  EXPECT_EQ(j.str(), "{\"event\":\"ranks\",\"step\":3,\"v\":[0.5,null],\"h\":[\"a\\\"b\"],\"n\":[1,2]}");
  EXPECT_EQ(j.event(), "ranks");
  ASSERT_EQ(j.numbers().size(), 1u);
  ASSERT_EQ(j.arrays().size(), 2u);
  EXPECT_EQ(j.arrays()[1].second, (std::vector<double>{1, 2}));
}

RankSample sample(double data, double fwd, double bwd, double comm, double opt, double steps = 10) {
  RankSample r;
  r.phase[static_cast<int>(Phase::kData)] = data * steps;
  r.phase[static_cast<int>(Phase::kForward)] = fwd * steps;
  r.phase[static_cast<int>(Phase::kBackward)] = bwd * steps;
  r.phase[static_cast<int>(Phase::kComm)] = comm * steps;
  r.phase[static_cast<int>(Phase::kOptimizer)] = opt * steps;
  r.steps = steps;
  return r;
}

TEST(Stragglers, NamesTheRankAndThePhaseAboveTheMedian) {
  // Ranks 0-3 wait for rank 2 in communication; rank 2's backward takes 31% longer.
  std::vector<RankSample> ranks = {sample(0.001, 0.03, 0.060, 0.0186, 0.002), sample(0.001, 0.031, 0.061, 0.0176, 0.002),
                                   sample(0.001, 0.03, 0.079255, 0.0, 0.002), sample(0.001, 0.029, 0.06, 0.0196, 0.002),
                                   sample(0.001, 0.03, 0.0605, 0.0181, 0.002)};
  const auto s = find_stragglers(ranks, 10);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].rank, 2);
  EXPECT_EQ(s[0].phase, static_cast<int>(Phase::kBackward));
  const std::string msg = describe_straggler(s[0], {"n0", "n1", "node12", "n3", "n4"});
  EXPECT_EQ(msg.rfind("straggler: rank 2 on node12, backward 31% above the median", 0), 0u) << msg;
  // Within the threshold nobody is named; a higher threshold or 0 (off) names nobody either.
  EXPECT_TRUE(find_stragglers(ranks, 30).empty());
  EXPECT_TRUE(find_stragglers(ranks, 0).empty());
  // Equal ranks: nobody.
  EXPECT_TRUE(find_stragglers({sample(0, 1, 1, 0, 0), sample(0, 1, 1, 0, 0), sample(0, 1, 1, 0, 0)}, 10).empty());
}

TEST(Stragglers, DataWaitWithAZeroMedian) {
  std::vector<RankSample> ranks = {sample(0, 0.03, 0.06, 0, 0), sample(0.05, 0.03, 0.06, 0, 0),
                                   sample(0, 0.03, 0.06, 0, 0)};
  const auto s = find_stragglers(ranks, 10);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].rank, 1);
  EXPECT_EQ(s[0].phase, static_cast<int>(Phase::kData));
  const std::string msg = describe_straggler(s[0], {"a", "b", "c"});
  EXPECT_NE(msg.find("data 50.0 ms per step where the median is 0"), std::string::npos) << msg;
}

TEST(RanksEvent, PerRankArraysPerStep) {
  std::vector<RankSample> ranks = {sample(0.5, 1, 2, 0.25, 0.125, 4), sample(0.5, 1, 3, 0, 0.125, 4),
                                   sample(0.5, 1, 2, 0.25, 0.125, 4)};
  ranks[1].mem_peak = 1024;
  const Json j = ranks_event(8, ranks, find_stragglers(ranks, 10));
  const std::string s = j.str();
  EXPECT_NE(s.find("\"backward_s\":[2,3,2]"), std::string::npos) << s;
  EXPECT_NE(s.find("\"busy_s\":[3.625,4.625,3.625]"), std::string::npos) << s;
  EXPECT_NE(s.find("\"mem_peak\":[0,1024,0]"), std::string::npos) << s;
  EXPECT_NE(s.find("\"straggler\":[0,1,0]"), std::string::npos) << s;
  // Two ranks: the median is their mean, so nobody is named.
  ranks.pop_back();
  EXPECT_TRUE(find_stragglers(ranks, 10).empty());
}

TEST(Progress, DurationsAndEta) {
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(725), "12:05");
  EXPECT_EQ(format_duration(3 * 3600 + 4 * 60 + 5), "3:04:05");
  EXPECT_EQ(format_duration(NAN), "?");
  RunLog log;  // not opened: writes nothing
  Progress p(log, false, 100, 1000, 300);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const Eta e = p.eta(150);  // 50 steps in >= 50 ms: epoch 1 ends at step 300, the run at 1000
  EXPECT_GE(e.elapsed, 0.05);
  EXPECT_NEAR(e.epoch / e.run, 150.0 / 850.0, 1e-9);
  EXPECT_NEAR(e.run, e.elapsed / 50 * 850, 1e-9);
  EXPECT_TRUE(std::isnan(p.eta(100).run));  // nothing measured yet
  EXPECT_FALSE(progress_bar_wanted("lines"));
  EXPECT_TRUE(progress_bar_wanted("bar"));
}

TEST(PhaseTimer, HostClockChargesEachInterval) {
  auto be = make_cpu_backend(1);
  auto t = be->make_phase_timer();
  double s[3] = {0, 0, 0};
  t->mark(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  t->mark(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  t->mark(-1);  // the gap until the next mark belongs to nobody
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  t->mark(1);
  t->collect(s, 3, false);
  EXPECT_GE(s[0], 0.020);
  EXPECT_LT(s[0], 0.3);
  EXPECT_EQ(s[1], 0);  // still running
  EXPECT_GE(s[2], 0.010);
  EXPECT_LT(s[2], 0.3);  // not the 300 ms gap
}

}  // namespace
}  // namespace cnn
