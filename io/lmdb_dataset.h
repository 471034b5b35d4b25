// LMDB dataset reader: Caffe `Datum` records (raw uint8 `data`, `float_data`, or encoded JPEG/PNG), as made
// by Caffe's convert_imageset or by cnntrain-data. Implements cnn::Dataset, so the sampler, loader and trainer
// treat it like HDF5.
//
// Open (every rank, once): one sequential pass over the database reads each record's small fields (shape,
// label, encoded flag, payload length; pixel bytes are skipped, see scan_datum) and validates them. The pass
// keeps a key index so that later reads are random-access mdb_get()s of only the asked samples, in any key
// order. Memory cost of the index: (key length + 12) bytes per record -- the key bytes, an 8-byte offset and
// a 4-byte label; Caffe's "%08d_path" keys are ~30-60 bytes, so ImageNet's 1.28M records take ~60-90 MB.
//
// Shape: raw records must all have the first record's C x H x W unless a target size is given; encoded
// records are sized by decoding the first record's header, and a record decoding to another size is an error
// at read time unless a target size is given (then every image is fitted by options.transform).
// Labels: validated at open: in [0, num_classes). num_classes = options.num_classes, else the metadata
// sidecar (io/lmdb_meta.h), else max label + 1.
// Mean/std: from the sidecar when present, else computed at open over options.stats_samples records evenly
// spaced over the index, as read() returns them at epoch 0, so every rank gets the same values.
// Bad records (not a Datum, size != C*H*W, label out of range, shape mismatch, undecodable image):
// on_bad_sample "fail" throws cnn::Error(kExitData) naming the file, key and remedy; "skip" drops records
// found bad at open from the index and, for records found bad at read time, substitutes the next good record
// (its image and label), counting both and logging the first few to stderr.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/dataset.h"
#include "io/image_codec.h"

namespace cnn {

class LmdbReadEnv;

struct LmdbOptions {
  std::string on_bad_sample = "fail";  // fail | skip
  int num_classes = 0;                 // 0: from the sidecar, else max label + 1
  int channels = 0;                    // 0: as the first record; 1 or 3 converts encoded images
  ImageTransform transform;            // target size and fit; mode kNone with size 0 keeps record sizes
  // Records decoded for mean/std when the sidecar has none: -1 = 4096 raw (like the HDF5 reader) or 512
  // when any record is encoded; 0 = none (mean 0, std 1).
  int stats_samples = -1;
  // Threads one read() call decodes with: JPEG decoding (~2 ms per ImageNet-size image) outruns a single
  // loader thread, so encoded datasets want several. Raw records gain nothing and stay on the caller's thread.
  int read_threads = 1;
};

class LmdbDataset : public Dataset {
 public:
  LmdbDataset(const std::string& path, const LmdbOptions& options = LmdbOptions());
  ~LmdbDataset() override;

  const DatasetInfo& info() const override { return info_; }
  const std::string& path() const override { return path_; }
  // Thread-safe: each call uses its own read transaction.
  void read(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels) override;
  int32_t label(int64_t id) const override { return labels_[id]; }

  // Keys random crops/flips of training transforms; the loader sets it at each epoch start.
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }
  std::string key(int64_t id) const;
  // The record as stored, for inspect: "raw 1x28x28 (CxHxW) data" or "JPEG 375x500x3 (HxWxC), 75812 bytes".
  std::string describe(int64_t id) const;
  // Record `id` decoded into out (info()'s shape), never skipped: "" or what is wrong with it (for inspect).
  std::string read_record(int64_t id, uint8_t* out) const;
  bool has_encoded() const { return any_encoded_; }
  // Whether the records' images differ in size (without a target size only the first record's size loads).
  bool mixed_sizes() const { return mixed_sizes_; }
  int64_t skipped_at_open() const { return skipped_open_; }
  int64_t skipped_at_read() const { return skipped_read_; }

 private:
  // The shape of the first usable record, which the others must match.
  struct FirstShape {
    int c = 0, h = 0, w = 0;
    bool known = false;
  };
  void build_index();
  // Adds the record to the index, or skips it (bad_at_open) when it is not usable.
  void index_record(const std::string& key, const uint8_t* val, size_t len, FirstShape& first,
                    int64_t& max_label);
  // Drops the records whose label is num_classes or more (num_classes from the sidecar file).
  void drop_labels_beyond_classes();
  void compute_stats(int samples);
  // Decodes record `id` (bytes `val`) into out (info_ shape); "" or what is wrong with it.
  std::string decode_record(int64_t id, const uint8_t* val, size_t len, uint8_t* out) const;
  void bad_at_open(const std::string& key, const std::string& why);
  void read_range(const int64_t* ids, size_t k, uint8_t* images, int32_t* labels);

  std::string path_;
  LmdbOptions opt_;
  std::unique_ptr<LmdbReadEnv> env_;
  DatasetInfo info_;
  std::string keys_;                 // all keys back to back
  std::vector<uint64_t> key_end_;    // key i is keys_[key_end_[i-1], key_end_[i])
  std::vector<int32_t> labels_;
  bool any_encoded_ = false;
  bool mixed_sizes_ = false;
  bool fixed_size_ = false;          // no target size: every record must decode to info_'s size
  bool skip_bad_ = false;
  std::atomic<int64_t> epoch_{0};
  int64_t skipped_open_ = 0;
  std::atomic<int64_t> skipped_read_{0};
};

std::unique_ptr<Dataset> open_lmdb_dataset(const std::string& path, const LmdbOptions& options = LmdbOptions());

}  // namespace cnn
