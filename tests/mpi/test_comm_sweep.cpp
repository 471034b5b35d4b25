// The communication sweep (in the manner of nccl-tests): every collective of src/comm, for every element
// type the program sends, over message sizes from 1 element to 256 MiB + a ragged tail, with inputs that make
// the results exact (small integers: every sum is exact in float), each checked element by element on every
// rank. Also the split paths beyond max_count_per_call() (on small buffers, with the limit lowered), the
// > 2 GiB allgather_bytes path (np 2), the host gradient collectives (bucketed, split); average_buffers is tests/mpi/test_average_buffers.cpp.
// Runs under mpirun -np 2 and -np 4 (make test-mpi).
//
// ADDING A COLLECTIVE (e.g. an NCCL or emulated-NCCL one): register a CommCase in comm_cases() below: its
// name, the bytes per element and a function that runs the collective on n elements and returns "" or the
// first mismatch. Sized cases run for every size of kSizes; keep buffers in the element type the path really
// sends. Device collectives upload/download through their backend inside run().
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/collectives.h"
#include "tests/common/test_util.h"

namespace cnn {
namespace {

// A small integer in [-8, 12), different per element and rank (cheap to compute: the big sizes touch
// hundreds of millions of elements): sums over any realistic number of ranks stay exact in float.
inline int pattern(size_t i, int rank) { return static_cast<int>((i ^ (i >> 4)) & 15) + rank % 5 - 8; }

// The sum of pattern(i, r) over the ranks.
inline int pattern_sum(size_t i) {
  const int w = world_size();
  return static_cast<int>((i ^ (i >> 4)) & 15) * w - 8 * w + (w / 5) * 10 + (w % 5) * (w % 5 - 1) / 2;
}

// Compares in T (every expected value is exactly representable), formats only the first mismatch.
template <class T, class Want>
std::string first_mismatch(const T* got, size_t n, Want want) {
  size_t i = 0;
  while (i < n && got[i] == static_cast<T>(want(i))) ++i;
  if (i == n) return "";
  return strprintf("element %zu of %zu: got %.17g, want %.17g", i, n, static_cast<double>(got[i]),
                   static_cast<double>(want(i)));
}

template <class T, class Want>
std::string first_mismatch(const std::vector<T>& got, Want want) {
  return first_mismatch(got.data(), got.size(), want);
}

template <class T>
std::string check_allreduce_sum(size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(pattern(i, world_rank()));
  allreduce_sum(v.data(), n);
  return first_mismatch(v, pattern_sum);
}

struct CommCase {
  std::string name;
  size_t elem_bytes;
  bool sized;  // false: a fixed-size collective (scalars), run once
  std::function<std::string(size_t n)> run;
};

void add_gather_cases(std::vector<CommCase>& v) {
  v.push_back({"allgather_uint64", 8, true, [](size_t n) {
                 const size_t per = std::max<size_t>(1, n / world_size());
                 std::vector<uint64_t> mine(per), all(per * world_size(), 0);
                 for (size_t i = 0; i < per; ++i) mine[i] = (uint64_t{1} << 40) * world_rank() + i;
                 allgather(mine.data(), per, all.data());
                 return first_mismatch(all, [per](size_t i) {
                   return static_cast<double>((uint64_t{1} << 40) * (i / per) + i % per);
                 });
               }});
  // Uneven shares, the first rank's empty: the checkpoint's row splits look like this.
  v.push_back({"allgather_bytes", 1, true, [](size_t n) {
                 const int w = world_size();
                 std::vector<size_t> off(w + 1, 0);
                 for (int r = 1; r <= w; ++r) off[r] = r == 1 ? 0 : n * (r * r - 1) / (w * w - 1);
                 off[w] = n;
                 std::vector<unsigned char> b(n, 0xEE);
                 for (size_t i = off[world_rank()]; i < off[world_rank() + 1]; ++i)
                   b[i] = static_cast<unsigned char>(pattern(i, world_rank()) + 8);
                 allgather_bytes(b.data(), off);
                 return first_mismatch(b, [&off](size_t i) {
                   int r = 0;
                   while (i >= off[r + 1]) ++r;
                   return pattern(i, r) + 8;
                 });
               }});
}

void add_gradient_path_cases(std::vector<CommCase>& v) {
  // The paths gradients take on host memory (make_mpi_collectives): a blocking sum, and bucketed averaging
  // whose buckets (about five) are all launched during "backward" and completed by finish().
  v.push_back({"collectives_allreduce_float", 4, true, [](size_t n) {
                 std::vector<float> x(n);
                 for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(pattern(i, world_rank()));
                 make_mpi_collectives()->allreduce_sum(x.data(), n, "sweep");
                 return first_mismatch(x, pattern_sum);
               }});
  v.push_back({"grad_sync_buckets", 4, true, [](size_t n) -> std::string {
                 std::vector<float> x(n);
                 for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(pattern(i, world_rank()));
                 auto coll = make_mpi_collectives();
                 GradSyncOptions o;
                 o.bucket_bytes = std::max<size_t>(1, n / 5) * sizeof(float);
                 auto sync = coll->make_grad_sync(x.data(), n, o);
                 for (size_t b = 0; b < sync->num_buckets(); ++b) sync->on_ready(sync->bucket_begin(b));
                 if (sync->counters().launched_in_backward != static_cast<int64_t>(sync->num_buckets()))
                   return strprintf("%lld of %zu buckets launched during backward",
                                    (long long)sync->counters().launched_in_backward, sync->num_buckets());
                 sync->finish();
                 return first_mismatch(x, pattern_sum);
               }});
}

std::vector<CommCase> comm_cases() {
  std::vector<CommCase> v;
  v.push_back({"allreduce_sum_float", 4, true, check_allreduce_sum<float>});
  v.push_back({"allreduce_sum_double", 8, true, check_allreduce_sum<double>});
  v.push_back({"allreduce_sum_int64", 8, true, check_allreduce_sum<int64_t>});
  v.push_back({"allreduce_min_ints", 4, true, [](size_t n) {
                 std::vector<int> x(n);
                 for (size_t i = 0; i < n; ++i) x[i] = static_cast<int>(pattern(i, world_rank()));
                 allreduce_min(x.data(), n);
                 return first_mismatch(x, [](size_t i) { return pattern(i, 0); });  // rank 0's is the smallest
               }});
  v.push_back({"allreduce_max_min_int", 4, false, [](size_t) -> std::string {
                 const int r = world_rank(), w = world_size();
                 if (allreduce_max(r * 10 - 7) != (w - 1) * 10 - 7) return "allreduce_max";
                 if (allreduce_min(100 - r) != 100 - (w - 1)) return "allreduce_min";
                 return "";
               }});
  for (int root : {0, -1})  // -1: the last rank
    v.push_back({root == 0 ? "broadcast_bytes_from_0" : "broadcast_bytes_from_last", 1, true, [root](size_t n) {
                   const int from = root < 0 ? world_size() - 1 : root;
                   std::vector<unsigned char> b(n);
                   for (size_t i = 0; i < n; ++i)
                     b[i] = static_cast<unsigned char>(world_rank() == from ? pattern(i, from) + 8 : 0xEE);
                   broadcast(b.data(), n, from);
                   return first_mismatch(b, [from](size_t i) { return pattern(i, from) + 8; });
                 }});
  v.push_back({"broadcast_string", 1, true, [](size_t n) {
                 std::string s = world_rank() == 1 ? std::string(n, 'x') : "other";
                 if (world_rank() == 1 && n > 0) s[n - 1] = 'z';
                 broadcast(s, 1);
                 if (s.size() != n) return strprintf("length %zu, want %zu", s.size(), n);
                 if (n > 0 && (s[0] != (n > 1 ? 'x' : 'z') || s[n - 1] != 'z')) return std::string("contents");
                 return std::string();
               }});
  add_gather_cases(v);
  add_gradient_path_cases(v);
  return v;
}

// 1 element up to 256 MiB and a ragged tail (in bytes: the element count follows the type).
const size_t kSizes[] = {1, 7, 1024 + 3, (1 << 20) + 9, (16 << 20) + 1, (256u << 20) + 4};

std::string size_name(size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

struct SweepParam {
  size_t c;      // index into comm_cases()
  size_t bytes;  // message size (0 for fixed-size cases)
};

class CommSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(CommSweep, ExactOnEveryRank) {
  const CommCase c = comm_cases()[GetParam().c];
  const size_t n = c.sized ? std::max<size_t>(1, GetParam().bytes / c.elem_bytes) : 1;
  const std::string err = c.run(n);
  EXPECT_EQ(err, "") << c.name << " of " << n << " elements on rank " << world_rank();
  EXPECT_EQ(allreduce_max(err.empty() ? 0 : 1), 0) << "a mismatch on another rank";
}

std::vector<SweepParam> sweep_params() {
  std::vector<SweepParam> v;
  const auto cases = comm_cases();
  for (size_t c = 0; c < cases.size(); ++c) {
    if (!cases[c].sized) {
      v.push_back({c, 0});
      continue;
    }
    for (size_t b : kSizes) v.push_back({c, b});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Collectives, CommSweep, ::testing::ValuesIn(sweep_params()),
                         [](const ::testing::TestParamInfo<SweepParam>& i) {
                           const CommCase c = comm_cases()[i.param.c];
                           return c.name + (c.sized ? "_" + size_name(i.param.bytes) : "");
                         });

// Transfers beyond one MPI call's count are split (allreduce, broadcast, the host gradient collectives) or take the broadcast path
// (allgather_bytes); shown with the limit lowered to 1000 elements and sizes across several pieces.
TEST(CommSplit, PiecesBeyondTheCountLimit) {
  set_max_count_per_call(1000);
  for (const CommCase& c : comm_cases()) {
    if (!c.sized || c.name == "allgather_uint64" || c.name == "allreduce_min_ints") continue;
    for (size_t n : {size_t{999}, size_t{1000}, size_t{1001}, size_t{4321}}) {
      const std::string err = c.run(n);
      EXPECT_EQ(err, "") << c.name << " of " << n << " elements split into pieces of 1000";
    }
  }
  set_max_count_per_call(0);
  EXPECT_EQ(max_count_per_call(), static_cast<size_t>(INT_MAX));
}

double available_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char key[64];
  double kb = 0, avail = 0;
  while (std::fscanf(f, "%63s %lf kB\n", key, &kb) == 2)
    if (std::strcmp(key, "MemAvailable:") == 0) avail = kb * 1024;
  std::fclose(f);
  return avail;
}

// The path for a buffer over 2 GiB in total (a multi-GB checkpoint's allgather): 2 GiB + 3 bytes, at np 2
// only (every rank holds the whole buffer: 4.3 GB of memory in all).
TEST(CommSplit, AllgatherBytesOverTwoGiB) {
  if (world_size() != 2) GTEST_SKIP() << "run at np 2 only (each rank holds the whole 2 GiB buffer)";
  const size_t n = (size_t{2} << 30) + 3;
  if (allreduce_min(available_bytes() > 2.5 * n ? 1 : 0) == 0)
    GTEST_SKIP() << "needs 5.4 GB of available memory (MemAvailable) for 2 ranks x 2 GiB + 3 bytes";
  // Not pre-filled (fresh pages read as zero, which the pattern is not for long): memory is touched once to
  // fill this rank's share, once by the transfer and once by the check.
  std::unique_ptr<unsigned char[]> b(new unsigned char[n]);
  auto expected = [](size_t i) { return static_cast<unsigned char>((i * 131) >> 3); };
  const std::vector<size_t> off = {0, n / 2 + 1, n};  // shares over 1 GiB: two pieces each
  for (size_t i = off[world_rank()]; i < off[world_rank() + 1]; ++i) b[i] = expected(i);
  allgather_bytes(b.get(), off);
  std::vector<unsigned char> want(1 << 20);
  size_t bad = n;
  for (size_t at = 0; at < n && bad == n; at += want.size()) {
    const size_t len = std::min(want.size(), n - at);
    for (size_t i = 0; i < len; ++i) want[i] = expected(at + i);
    if (std::memcmp(b.get() + at, want.data(), len) != 0)
      for (size_t i = 0; i < len && bad == n; ++i)
        if (b[at + i] != want[i]) bad = at + i;
  }
  EXPECT_EQ(bad, n) << "first wrong byte of " << n;
}

}  // namespace
}  // namespace cnn
