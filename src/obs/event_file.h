// TensorBoard event files written natively: RUN_DIR/tensorboard/events.out.tfevents.<unix time>.<host>, a
// TFRecord stream (per record: uint64 length, masked CRC-32C of the length, the serialized Event, masked
// CRC-32C of it; little-endian) of Event messages (src/obs/tfevent.proto). Each process start opens a new file;
// TensorBoard reads the files of a directory in name order, and the SessionLog START record written at a
// resumed step makes it drop what an earlier process logged beyond that step (their steps are repeated).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace cnn {

class EventFileWriter {
 public:
  EventFileWriter() = default;
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // Creates `dir` (and parents) and a new event file in it, starting with the file_version record. Throws
  // Error(kExitUsage) naming the path when it cannot be written.
  void open(const std::string& dir, const std::string& host);
  const std::string& path() const { return path_; }
  // Marks a (re)start at `step`: TensorBoard discards earlier files' records with step >= `step`.
  void session_start(int64_t step);
  // TensorBoard keeps scalars as float32.
  void scalar(const std::string& tag, int64_t step, double value);
  // Histogram of the finite values of x[0, n) in `buckets` equal-width buckets between their min and max.
  void histogram(const std::string& tag, int64_t step, const float* x, size_t n, int buckets = 30);
  void flush();

 private:
  void write_record(const std::string& bytes);
  std::string path_;
  FILE* f_ = nullptr;
};

}  // namespace cnn
