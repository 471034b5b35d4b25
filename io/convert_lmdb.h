// Dataset converters around LMDB, as library functions behind `cnntrain-data`: IDX -> LMDB, HDF5 <-> LMDB,
// an image folder (class_name/*.jpg|png) -> LMDB or HDF5, and `inspect`. LMDBs are written the way Caffe's
// tools write them (raw records: CHW/BGR Datums; --encoded: the image files as they are; keys "%08d_name",
// which sort in write order), plus cnntrain's sidecar metadata (io/lmdb_meta.h) with num_classes, mean/std
// and class names, so the reader needs no statistics pass.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/convert_idx.h"
#include "io/dataset.h"
#include "io/image_codec.h"
#include "io/lmdb_dataset.h"

namespace cnn {

// Writes every sample of `src` as a raw Datum into a new LMDB directory `out_dir`, in id order, with the
// sidecar from src.info(). Returns the number of records.
int64_t write_lmdb_from_dataset(Dataset& src, const std::string& out_dir, bool overwrite = false);

// IDX (MNIST-style) images + labels -> LMDB at o.out, keys "%08d" like Caffe's convert_mnist_data.
// o.stats_from may name an HDF5 file or an LMDB.
DatasetInfo convert_idx_to_lmdb(const IdxConvertOptions& o);

DatasetInfo convert_hdf5_to_lmdb(const std::string& h5_path, const std::string& lmdb_dir, bool overwrite = false);

// Decodes (and fits, per opt.transform) every record; needs memory for the whole dataset
// (count * H*W*C bytes) because write_hdf5_dataset takes one array.
DatasetInfo convert_lmdb_to_hdf5(const std::string& lmdb_path, const std::string& h5_path,
                                 const LmdbOptions& opt = LmdbOptions());

struct ImageFolderOptions {
  std::string format = "lmdb";  // lmdb | hdf5
  bool encoded = true;          // lmdb: store the files as they are (convert_imageset --encoded)
  int height = 0, width = 0;    // resize target; 0 = keep (then raw/HDF5 output needs one common size)
  ResizeMode resize = ResizeMode::kResize;  // how to reach height x width: kResize stretches like Caffe
  int channels = 3;             // 3 = color, 1 = gray (convert_imageset --gray)
  bool shuffle = false;         // convert_imageset --shuffle: random record order, drawn from seed
  uint64_t seed = 0;
  bool overwrite = false;
  std::string on_bad_image = "fail";  // fail | skip: unreadable files
  // A test set's classes and statistics from its training set (paths of HDF5 files or LMDBs; empty: own).
  // With classes_from, labels are the training set's indices of the folder names, a folder the training set
  // lacks is refused (exit 3) and a class the folder lacks keeps its index, so train and test labels agree.
  std::string classes_from, stats_from;
};

struct ImageFolderResult {
  DatasetInfo info;
  int64_t skipped = 0;
};

// root/<class>/<image>: classes are the subdirectory names in sorted (byte) order, labels their indices;
// images are *.jpg, *.jpeg, *.png (any case), sorted within each class. Mean/std are over all images as
// stored (after any resize). HDF5 output holds all images in memory while writing.
ImageFolderResult convert_image_folder(const std::string& root, const std::string& out,
                                       const ImageFolderOptions& opt);

// Human-readable summary of a dataset (format "auto", "hdf5" or "lmdb"): count, shape, classes, mean/std,
// label histogram and the first `first` records (with keys and record kinds for LMDB).
std::string inspect_dataset(const std::string& path, const std::string& format = "auto", int first = 5);

}  // namespace cnn
