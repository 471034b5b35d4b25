#include "io/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "src/base/error.h"

namespace cnn {

namespace {

// gzread reads plain files transparently too.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) raise(kExitData, "cannot open IDX file '%s': %s", path.c_str(), std::strerror(errno));
  }
  ~GzFile() { gzclose(f_); }
  void read(void* dst, size_t n, const char* what) {
    auto* p = static_cast<uint8_t*>(dst);
    while (n > 0) {
      unsigned chunk = n > (1u << 30) ? (1u << 30) : static_cast<unsigned>(n);
      int got = gzread(f_, p, chunk);
      if (got <= 0) {
        int err = 0;
        const char* msg = gzerror(f_, &err);
        raise(kExitData, "IDX file '%s' ends early while reading %s (%s); the file is truncated or corrupt, "
              "download or copy it again", path_.c_str(), what, err ? msg : "end of file");
      }
      p += got;
      n -= static_cast<size_t>(got);
    }
  }
  uint32_t be32(const char* what) {
    uint8_t b[4];
    read(b, 4, what);
    return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
  }
  bool at_end() {
    uint8_t b;
    return gzread(f_, &b, 1) == 0;
  }

 private:
  std::string path_;
  gzFile f_;
};

std::vector<uint32_t> read_header(GzFile& f, const std::string& path, int want_dims) {
  uint32_t magic = f.be32("the header");
  uint32_t type = (magic >> 8) & 0xff, dims = magic & 0xff;
  if ((magic >> 16) != 0 || type != 0x08)
    raise(kExitData, "'%s' is not a uint8 IDX file (magic 0x%08x; expected 0x000008%02x)", path.c_str(), magic,
          want_dims);
  if (static_cast<int>(dims) != want_dims)
    raise(kExitData, "IDX file '%s' has %u dimensions, expected %d (%s)", path.c_str(), dims, want_dims,
          want_dims == 3 ? "an images file: count, rows, cols" : "a labels file: count");
  std::vector<uint32_t> sizes(dims);
  for (auto& s : sizes) s = f.be32("the header");
  return sizes;
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  GzFile f(path);
  auto sz = read_header(f, path, 3);
  IdxImages out;
  out.count = sz[0];
  out.rows = static_cast<int>(sz[1]);
  out.cols = static_cast<int>(sz[2]);
  if (out.rows <= 0 || out.cols <= 0 || out.rows > 65536 || out.cols > 65536)
    raise(kExitData, "IDX file '%s' has implausible image size %dx%d", path.c_str(), out.rows, out.cols);
  out.pixels.resize(static_cast<size_t>(out.count) * out.rows * out.cols);
  f.read(out.pixels.data(), out.pixels.size(), "the pixels");
  if (!f.at_end()) raise(kExitData, "IDX file '%s' has trailing bytes after %lld images", path.c_str(),
                         static_cast<long long>(out.count));
  return out;
}

std::vector<int32_t> read_idx_labels(const std::string& path) {
  GzFile f(path);
  auto sz = read_header(f, path, 1);
  std::vector<uint8_t> raw(sz[0]);
  f.read(raw.data(), raw.size(), "the labels");
  if (!f.at_end()) raise(kExitData, "IDX file '%s' has trailing bytes after %u labels", path.c_str(), sz[0]);
  return std::vector<int32_t>(raw.begin(), raw.end());
}

}  // namespace cnn
