// Read-throughput micro benchmark: samples/s for one reader (one rank's loader thread) over LMDB raw, LMDB
// JPEG (decode + eval center crop / training random-resized-crop) and HDF5, on synthetic datasets written to a
// scratch directory. Reads are shuffled batches of ids, as the sampler hands them to a rank. Files are freshly
// written, so the page cache is warm: this measures the format and decode cost, not the disk.
//   usage: read_bench [scratch_dir=/tmp] [scale=1.0]   (scale multiplies the sample counts)
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/hdf5_dataset.h"
#include "io/image_codec.h"
#include "io/lmdb_dataset.h"
#include "io/lmdb_datum.h"
#include "io/lmdb_env.h"

namespace {

using namespace cnn;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Smooth shapes plus noise: JPEG sizes close to photographs (~0.3-0.5 bytes/pixel at q90).
std::vector<uint8_t> synth_image(int h, int w, int c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> img(static_cast<size_t>(h) * w * c);
  const double fx = 0.02 + (rng() % 100) * 0.001, fy = 0.03 + (rng() % 100) * 0.001;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) {
        double v = 128 + 60 * std::sin(x * fx + k) * std::cos(y * fy - k) + static_cast<int>(rng() % 41) - 20;
        img[(static_cast<size_t>(y) * w + x) * c + k] = static_cast<uint8_t>(std::min(255.0, std::max(0.0, v)));
      }
  return img;
}

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Throughput by the wall clock and per CPU-second: on a shared machine the second is the stable figure.
struct Rate {
  double wall, cpu;
};

// Shuffled batches over `passes` epochs, split over `threads` callers of read().
Rate measure(Dataset& ds, int threads, int passes = 1, int64_t batch = 256) {
  const int64_t n = ds.info().count;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<uint8_t> img(batch * ds.info().sample_bytes());
      std::vector<int32_t> labels(batch);
      for (int p = 0; p < passes; ++p)
        for (int64_t b = t * batch; b < n; b += threads * batch)
          ds.read(order.data() + b, std::min(batch, n - b), img.data(), labels.data());
    });
  for (auto& th : pool) th.join();
  const double samples = static_cast<double>(n) * passes;
  return {samples / seconds_since(t0), samples / (cpu_seconds() - c0)};
}

struct RawCase {
  const char* name;
  int64_t count;
  int h, w, c;
};

// One raw dataset of `rc`'s shape, written as LMDB and as HDF5, read by both.
void bench_raw(const RawCase& rc, const std::string& dir, double scale) {
  const int64_t n = std::max<int64_t>(256, static_cast<int64_t>(rc.count * scale));
  DatasetInfo info;
  info.count = n, info.height = rc.h, info.width = rc.w, info.channels = rc.c, info.num_classes = 10;
  info.mean.assign(rc.c, 127.0f);
  info.std.assign(rc.c, 60.0f);
  std::vector<uint8_t> all(n * info.sample_bytes());
  std::vector<int32_t> labels(n);
  std::mt19937_64 rng(7);
  for (auto& v : all) v = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(i % 10);
  const std::string db = dir + "/raw_" + std::to_string(rc.h), h5 = db + ".h5";
  {
    LmdbWriter w(db);
    for (int64_t i = 0; i < n; ++i)
      w.put(lmdb_record_key(i, "x"), serialize_datum(make_raw_datum(all.data() + i * info.sample_bytes(), rc.h,
                                                                    rc.w, rc.c, labels[i])));
    w.finish();
  }
  write_hdf5_dataset(h5, info, all.data(), labels.data());
  LmdbOptions lo;
  lo.stats_samples = 0;
  LmdbDataset lmdb(db, lo);
  auto hdf5 = open_hdf5_dataset(h5);
  measure(lmdb, 1);  // warm-up pass
  measure(*hdf5, 1);
  const Rate rl = measure(lmdb, 1, 2), rh = measure(*hdf5, 1, 2);
  std::printf("| %s | LMDB raw | %lld | 1 | %.0f | %.0f |\n", rc.name, static_cast<long long>(n), rl.wall, rl.cpu);
  std::printf("| %s | HDF5 | %lld | 1 | %.0f | %.0f |\n", rc.name, static_cast<long long>(n), rh.wall, rh.cpu);
  std::fflush(stdout);
}

struct JpegCase {
  const char* name;
  int64_t count;
  int h, w;
};

// One LMDB of JPEGs of `jc`'s size, decoded (and cropped) on 1 and 2 threads.
void bench_jpeg(const JpegCase& jc, const std::string& dir, double scale) {
  const int64_t n = std::max<int64_t>(256, static_cast<int64_t>(jc.count * scale));
  const std::string db = dir + "/jpeg_" + std::to_string(jc.h);
  size_t bytes = 0;
  {
    LmdbWriter w(db);
    for (int64_t i = 0; i < n; ++i) {
      auto img = synth_image(jc.h, jc.w, 3, i);
      std::string f = encode_jpeg(img.data(), jc.h, jc.w, 3, 90);
      bytes += f.size();
      w.put(lmdb_record_key(i, "x.jpg"), serialize_datum(make_encoded_datum(f, static_cast<int32_t>(i % 10))));
    }
    w.finish();
  }
  const bool big = jc.h > 64;
  for (ResizeMode mode : {ResizeMode::kCenterCrop, ResizeMode::kRandomResizedCrop}) {
    if (!big && mode != ResizeMode::kCenterCrop) continue;  // small images are read at their own size
    for (int threads : {1, 2}) {
      LmdbOptions lo;
      lo.stats_samples = 0;
      lo.read_threads = threads;
      if (big) {
        lo.transform.height = lo.transform.width = 224;
        lo.transform.mode = mode;
      }
      LmdbDataset ds(db, lo);
      const char* how = !big ? "LMDB JPEG decode"
                        : mode == ResizeMode::kCenterCrop ? "LMDB JPEG + center crop"
                                                          : "LMDB JPEG + rand-resized-crop";
      const Rate r = measure(ds, 1, 1, 64);
      std::printf("| %s (%.0f KB/img) | %s | %lld | %d | %.0f | %.0f |\n", jc.name, bytes / 1024.0 / n, how,
                  static_cast<long long>(n), threads, r.wall, r.cpu);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scratch = argc > 1 ? argv[1] : "/tmp";
  const double scale = argc > 2 ? std::atof(argv[2]) : 1.0;
  char tmpl[4096];
  std::snprintf(tmpl, sizeof tmpl, "%s/cnntrain_read_bench_XXXXXX", scratch.c_str());
  if (!mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  std::printf("| dataset | format | samples | threads | samples/s | samples/CPU-s |\n|---|---|---:|---:|---:|---:|\n");

  const RawCase raw_cases[] = {{"28x28x1 (Fashion-MNIST size)", 60000, 28, 28, 1},
                               {"32x32x3 (CIFAR size)", 50000, 32, 32, 3},
                               {"224x224x3 (ImageNet crop, raw)", 2000, 224, 224, 3}};
  for (const RawCase& rc : raw_cases) bench_raw(rc, dir, scale);
  const JpegCase jpeg_cases[] = {{"375x500 JPEG q90 -> 224x224", 1000, 375, 500},
                                 {"32x32 JPEG q90 (CIFAR as JPEG)", 20000, 32, 32}};
  for (const JpegCase& jc : jpeg_cases) bench_jpeg(jc, dir, scale);
  std::filesystem::remove_all(dir);
  return 0;
}
