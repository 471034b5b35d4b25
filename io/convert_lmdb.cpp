#include "io/convert_lmdb.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include "io/hdf5_dataset.h"
#include "io/idx.h"
#include "io/lmdb_datum.h"
#include "io/lmdb_env.h"
#include "io/lmdb_meta.h"
#include "src/base/error.h"

namespace fs = std::filesystem;

namespace cnn {

namespace {

LmdbMeta meta_from(const DatasetInfo& info) {
  LmdbMeta m;
  m.num_classes = info.num_classes;
  m.mean = info.mean;
  m.std = info.std;
  m.class_names = info.class_names;
  return m;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) raise(kExitData, "cannot read %s", path.c_str());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_image_name(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e == ".jpg" || e == ".jpeg" || e == ".png";
}

}  // namespace

int64_t write_lmdb_from_dataset(Dataset& src, const std::string& out_dir, bool overwrite) {
  const DatasetInfo& info = src.info();
  LmdbWriter w(out_dir, overwrite);
  const size_t sb = info.sample_bytes();
  const int64_t chunk = 256;
  std::vector<int64_t> ids(chunk);
  std::vector<uint8_t> imgs(chunk * sb);
  std::vector<int32_t> labels(chunk);
  for (int64_t b = 0; b < info.count; b += chunk) {
    const int64_t k = std::min(chunk, info.count - b);
    std::iota(ids.begin(), ids.begin() + k, b);
    src.read(ids.data(), k, imgs.data(), labels.data());
    for (int64_t i = 0; i < k; ++i)
      w.put(strprintf("%08lld", static_cast<long long>(b + i)),
            serialize_datum(make_raw_datum(imgs.data() + i * sb, info.height, info.width, info.channels,
                                           labels[i])));
  }
  w.finish();
  write_lmdb_meta(lmdb_meta_path(out_dir), meta_from(info));
  return w.count();
}

DatasetInfo convert_idx_to_lmdb(const IdxConvertOptions& o) {
  IdxData d = load_idx(o);
  const DatasetInfo& info = d.info;
  LmdbWriter w(o.out, o.overwrite);
  const size_t sb = info.sample_bytes();
  for (int64_t i = 0; i < info.count; ++i) {
    if (d.labels[i] < 0)
      raise(kExitData, "'%s': label %d of image %lld is negative", o.labels.c_str(), d.labels[i],
            static_cast<long long>(i));
    w.put(strprintf("%08lld", static_cast<long long>(i)),
          serialize_datum(make_raw_datum(d.pixels.data() + i * sb, info.height, info.width, 1, d.labels[i])));
  }
  w.finish();
  write_lmdb_meta(lmdb_meta_path(o.out), meta_from(info));
  return info;
}

DatasetInfo convert_hdf5_to_lmdb(const std::string& h5_path, const std::string& lmdb_dir, bool overwrite) {
  auto src = open_hdf5_dataset(h5_path);
  write_lmdb_from_dataset(*src, lmdb_dir, overwrite);
  return src->info();
}

DatasetInfo convert_lmdb_to_hdf5(const std::string& lmdb_path, const std::string& h5_path,
                                 const LmdbOptions& opt) {
  LmdbDataset src(lmdb_path, opt);
  const DatasetInfo& info = src.info();
  std::vector<uint8_t> imgs(info.count * info.sample_bytes());
  std::vector<int32_t> labels(info.count);
  std::vector<int64_t> ids(info.count);
  std::iota(ids.begin(), ids.end(), 0);
  src.read(ids.data(), ids.size(), imgs.data(), labels.data());
  write_hdf5_dataset(h5_path, info, imgs.data(), labels.data());
  return info;
}

namespace {

void check_folder_options(const ImageFolderOptions& opt) {
  if (opt.format != "lmdb" && opt.format != "hdf5")
    raise(kExitUsage, "image folder output format '%s': use lmdb or hdf5", opt.format.c_str());
  if (opt.on_bad_image != "fail" && opt.on_bad_image != "skip")
    raise(kExitUsage, "on_bad_image '%s': use fail or skip", opt.on_bad_image.c_str());
  if (opt.channels != 1 && opt.channels != 3) raise(kExitUsage, "channels must be 1 or 3, not %d", opt.channels);
  if ((opt.height > 0) != (opt.width > 0)) raise(kExitUsage, "give both height and width for the resize, or neither");
}

// --classes-from: every folder must be one of the training set's classes (which must have names).
void check_folders_known(const std::string& root, const std::string& from, const std::vector<std::string>& folders,
                         const std::vector<std::string>& classes) {
  if (from.empty()) return;
  if (classes.empty())
    raise(kExitData, "--classes-from '%s' records no class names; convert the training set from an image folder "
          "or with --class-names first", from.c_str());
  for (const auto& f : folders)
    if (std::find(classes.begin(), classes.end(), f) == classes.end()) {
      std::string list;
      for (const auto& c : classes) list += (list.empty() ? "" : ", ") + c;
      raise(kExitData, "%s/%s is not a class of the training set '%s' (%zu classes: %s); rename or remove the "
            "folder", root.c_str(), f.c_str(), from.c_str(), classes.size(), list.c_str());
    }
}

struct FolderImage {
  std::string rel;  // class/file
  int32_t label;
};

// The images of root/<class>/, classes and files in name order (a class's label is its index), then shuffled
// when asked.
std::vector<FolderImage> list_image_folder(const std::string& root, const ImageFolderOptions& opt,
                                           std::vector<std::string>& classes) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    raise(kExitData, "%s is not a directory; give a folder holding one subfolder of images per class", root.c_str());
  std::vector<std::string> folders;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) folders.push_back(e.path().filename().string());
  std::sort(folders.begin(), folders.end());
  if (opt.classes_from.empty()) classes = folders;
  else classes = open_dataset(opt.classes_from)->info().class_names;
  check_folders_known(root, opt.classes_from, folders, classes);
  std::vector<FolderImage> items;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> files;
    if (!fs::is_directory(fs::path(root) / classes[c])) continue;  // a class this set has no images of
    for (const auto& e : fs::directory_iterator(fs::path(root) / classes[c]))
      if (e.is_regular_file() && is_image_name(e.path())) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) items.push_back({classes[c] + "/" + f, static_cast<int32_t>(c)});
  }
  if (items.empty())
    raise(kExitData, "%s holds no class_name/*.jpg|*.jpeg|*.png images; expected one subfolder per class",
          root.c_str());
  if (opt.shuffle) std::shuffle(items.begin(), items.end(), std::mt19937_64(opt.seed));
  return items;
}

// Per-channel mean and standard deviation of the stored pixels.
struct ChannelStats {
  explicit ChannelStats(int channels) : sum(channels, 0.0), sq(channels, 0.0) {}
  void add(const uint8_t* px, int h, int w) {
    const size_t c = sum.size(), n = static_cast<size_t>(h) * w * c;
    for (size_t p = 0; p < n; ++p) {
      sum[p % c] += px[p];
      sq[p % c] += static_cast<double>(px[p]) * px[p];
    }
    pixels += static_cast<double>(h) * w;
  }
  // Nothing when no pixel was added: encoded records keep their own sizes, and the reader computes mean/std
  // from a sample at open.
  void store(DatasetInfo& info) const {
    if (pixels == 0) return;
    for (size_t c = 0; c < sum.size(); ++c) {
      const double m = sum[c] / pixels, var = sq[c] / pixels - m * m;
      info.mean.push_back(static_cast<float>(m));
      info.std.push_back(static_cast<float>(var > 1e-6 ? std::sqrt(var) : 1.0));
    }
  }
  std::vector<double> sum, sq;
  double pixels = 0;
};

}  // namespace

ImageFolderResult convert_image_folder(const std::string& root, const std::string& out,
                                       const ImageFolderOptions& opt) {
  check_folder_options(opt);
  ImageFolderResult res;
  DatasetInfo& info = res.info;
  const std::vector<FolderImage> items = list_image_folder(root, opt, info.class_names);
  info.num_classes = static_cast<int>(info.class_names.size());
  info.channels = opt.channels;
  info.height = opt.height;
  info.width = opt.width;
  ImageTransform fit;
  fit.mode = opt.height > 0 ? opt.resize : ResizeMode::kNone;
  fit.height = opt.height;
  fit.width = opt.width;

  const bool to_lmdb = opt.format == "lmdb";
  const bool fixed = !(to_lmdb && opt.encoded);  // raw records and HDF5 need one common size
  std::unique_ptr<LmdbWriter> writer;
  if (to_lmdb) writer.reset(new LmdbWriter(out, opt.overwrite));
  std::vector<uint8_t> all;  // HDF5 output
  std::vector<int32_t> labels;
  ChannelStats stats(opt.channels);
  Image img;
  std::vector<uint8_t> fitted;
  for (const FolderImage& it : items) {
    const std::string path = (fs::path(root) / it.rel).string();
    const std::string file = read_file(path);
    std::string why = decode_image(reinterpret_cast<const uint8_t*>(file.data()), file.size(), opt.channels, &img);
    if (why.empty() && fixed && info.height == 0) info.height = img.height, info.width = img.width;
    if (why.empty() && fixed && opt.height == 0 && (img.height != info.height || img.width != info.width))
      why = strprintf("it is %dx%d but earlier images are %dx%d; give a target size to resize", img.height,
                      img.width, info.height, info.width);
    if (!why.empty()) {
      if (opt.on_bad_image == "fail")
        raise(kExitData, "%s: %s; fix or remove the file, or skip unreadable images", path.c_str(), why.c_str());
      ++res.skipped;
      continue;
    }
    const uint8_t* px = img.pixels.data();
    int h = img.height, w = img.width;
    if (opt.height > 0) {
      fitted.resize(static_cast<size_t>(opt.height) * opt.width * opt.channels);
      apply_transform(fit, img, 0, 0, fitted.data());
      px = fitted.data(), h = opt.height, w = opt.width;
    }
    if (fixed) stats.add(px, h, w);
    const int64_t index = static_cast<int64_t>(labels.size());
    if (to_lmdb) {
      Datum d = opt.encoded ? make_encoded_datum(file, it.label) : make_raw_datum(px, h, w, opt.channels, it.label);
      writer->put(lmdb_record_key(index, it.rel), serialize_datum(d));
    } else {
      all.insert(all.end(), px, px + static_cast<size_t>(h) * w * opt.channels);
    }
    labels.push_back(it.label);
  }
  if (labels.empty()) raise(kExitData, "%s: every image was unreadable (%lld skipped)", root.c_str(),
                            static_cast<long long>(res.skipped));
  info.count = static_cast<int64_t>(labels.size());
  if (opt.stats_from.empty()) {
    stats.store(info);
  } else {
    const DatasetInfo ref = open_dataset(opt.stats_from)->info();
    if (ref.channels != opt.channels)
      raise(kExitUsage, "--stats-from '%s' has %d channels, this set %d", opt.stats_from.c_str(), ref.channels,
            opt.channels);
    info.mean = ref.mean, info.std = ref.std;
  }
  if (to_lmdb) {
    writer->finish();
    write_lmdb_meta(lmdb_meta_path(out), meta_from(info));
  } else {
    write_hdf5_dataset(out, info, all.data(), labels.data());
  }
  return res;
}

std::string inspect_dataset(const std::string& path, const std::string& format, int first) {
  std::unique_ptr<Dataset> ds;
  if (format == "lmdb" || (format == "auto" && looks_like_lmdb(path))) {
    // Inspect describes what a training run would meet: records it cannot use are counted, not fatal.
    LmdbOptions lo;
    lo.on_bad_sample = "skip";
    ds = open_lmdb_dataset(path, lo);
  } else {
    ds = open_dataset(path, format);
  }
  const DatasetInfo& info = ds->info();
  auto* lmdb = dynamic_cast<LmdbDataset*>(ds.get());
  std::ostringstream o;
  o << path << ": " << (lmdb ? "LMDB" : "HDF5") << ", " << info.count << " samples of " << info.height << "x"
    << info.width << "x" << info.channels << " (HxWxC), " << info.num_classes << " classes\n";
  if (lmdb) {
    o << "  records: " << (lmdb->has_encoded() ? "encoded JPEG/PNG (decoded to the size above)" : "raw")
      << ", skipped at open: " << lmdb->skipped_at_open() << "\n";
    if (lmdb->mixed_sizes())
      o << "  image sizes differ between records (the size above is the first record's): train with "
           "--data.image_size HxW, convert with convert-lmdb-hdf5 --size HxW\n";
  }
  o.precision(4);
  o << "  mean:";
  for (float m : info.mean) o << " " << m;
  o << "\n  std: ";
  for (float s : info.std) o << " " << s;
  o << "\n  label histogram:\n";
  std::vector<int64_t> hist(std::max(info.num_classes, 1), 0);
  for (int64_t i = 0; i < info.count; ++i) {
    int32_t l = ds->label(i);
    if (l >= 0 && l < info.num_classes) ++hist[l];
  }
  for (int c = 0; c < info.num_classes; ++c) {
    o << "    " << c;
    if (c < static_cast<int>(info.class_names.size())) o << " (" << info.class_names[c] << ")";
    o << ": " << hist[c] << "\n";
  }
  const int64_t n = std::min<int64_t>(first, info.count);
  if (n > 0) o << "  first " << n << " records:\n";
  std::vector<uint8_t> img(info.sample_bytes());
  for (int64_t i = 0; i < n; ++i) {
    int32_t label = ds->label(i);
    const std::string why = lmdb ? lmdb->read_record(i, img.data()) : "";
    if (!lmdb) ds->read(&i, 1, img.data(), &label);
    double mean = 0;
    for (uint8_t v : img) mean += v;
    o << "    " << i;
    if (lmdb) o << " key '" << lmdb->key(i) << "' " << lmdb->describe(i) << ",";
    o << " label " << label;
    if (why.empty()) o << " pixel mean " << (img.empty() ? 0.0 : mean / img.size()) << "\n";
    else o << ", not readable as is: " << why << "\n";
  }
  return o.str();
}

}  // namespace cnn
