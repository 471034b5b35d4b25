#include "src/obs/event_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "src/base/error.h"
#include "src/obs/crc32c.h"
#include "src/obs/tfevent.pb.h"

namespace cnn {

namespace {

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void put_le64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

void put_le32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

tfevent::Event make_event(int64_t step) {
  tfevent::Event e;
  e.set_wall_time(wall_time());
  e.set_step(step);
  return e;
}

}  // namespace

EventFileWriter::~EventFileWriter() {
  if (f_) std::fclose(f_);
}

void EventFileWriter::open(const std::string& dir, const std::string& host) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if ((i == dir.size() || dir[i] == '/') && !cur.empty() && ::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST)
      raise(kExitUsage, "cannot create the TensorBoard directory '%s': %s (check --run-dir)", cur.c_str(),
            std::strerror(errno));
    if (i < dir.size()) cur += dir[i];
  }
  const long long t = static_cast<long long>(wall_time());
  // A restart within the same second must not append to (or replace) the previous process's file.
  for (int k = 0; !f_; ++k) {
    path_ = strprintf("%s/events.out.tfevents.%lld.%s%s", dir.c_str(), t, host.c_str(),
                      k ? strprintf(".%d", k).c_str() : "");
    f_ = std::fopen(path_.c_str(), "wbx");
    if (!f_ && (errno != EEXIST || k > 1000))
      raise(kExitUsage, "cannot create TensorBoard event file '%s': %s (check --run-dir)", path_.c_str(),
            std::strerror(errno));
  }
  tfevent::Event e = make_event(0);
  e.set_file_version("brain.Event:2");
  write_record(e.SerializeAsString());
  flush();
}

void EventFileWriter::session_start(int64_t step) {
  tfevent::Event e = make_event(step);
  e.mutable_session_log()->set_status(tfevent::SessionLog::START);
  write_record(e.SerializeAsString());
}

void EventFileWriter::scalar(const std::string& tag, int64_t step, double value) {
  tfevent::Event e = make_event(step);
  tfevent::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  write_record(e.SerializeAsString());
}

void EventFileWriter::histogram(const std::string& tag, int64_t step, const float* x, size_t n, int buckets) {
  double lo = INFINITY, hi = -INFINITY, sum = 0, sum_sq = 0, num = 0;
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    sum_sq += v * v;
    ++num;
  }
  if (num == 0) return;  // nothing finite to show
  std::vector<double> counts(buckets, 0.0);
  const double width = (hi - lo) / buckets;
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (!std::isfinite(v)) continue;
    int b = width > 0 ? static_cast<int>((v - lo) / width) : 0;
    counts[std::min(std::max(b, 0), buckets - 1)] += 1;
  }
  tfevent::Event e = make_event(step);
  tfevent::Summary::Value* sv = e.mutable_summary()->add_value();
  sv->set_tag(tag);
  tfevent::HistogramProto* h = sv->mutable_histo();
  h->set_min(lo);
  h->set_max(hi);
  h->set_num(num);
  h->set_sum(sum);
  h->set_sum_squares(sum_sq);
  for (int b = 0; b < buckets; ++b) {
    // Right edges; the last is the max itself so every value lies inside a bucket.
    h->add_bucket_limit(b == buckets - 1 ? hi : lo + width * (b + 1));
    h->add_bucket(counts[b]);
  }
  write_record(e.SerializeAsString());
}

void EventFileWriter::write_record(const std::string& bytes) {
  if (!f_) return;
  unsigned char head[12], tail[4];
  put_le64(head, bytes.size());
  put_le32(head + 8, mask_crc32c(crc32c(head, 8)));
  put_le32(tail, mask_crc32c(crc32c(bytes.data(), bytes.size())));
  if (std::fwrite(head, 1, sizeof head, f_) != sizeof head ||
      std::fwrite(bytes.data(), 1, bytes.size(), f_) != bytes.size() ||
      std::fwrite(tail, 1, sizeof tail, f_) != sizeof tail)
    raise(kExitFailure, "writing TensorBoard event file '%s' failed: %s (disk full?)", path_.c_str(),
          std::strerror(errno));
}

void EventFileWriter::flush() {
  if (f_) std::fflush(f_);
}

}  // namespace cnn
