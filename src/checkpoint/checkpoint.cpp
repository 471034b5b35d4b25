// What the checkpoint writer and reader share (src/checkpoint/parallel_h5.h), and the checkpoint files of a
// directory: names, listing, pruning. MPI-IO code: includes mpi.h through parallel HDF5's hdf5.h.
#include "src/checkpoint/checkpoint.h"

#include <dirent.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/base/error.h"
#include "src/checkpoint/parallel_h5.h"

namespace cnn {

size_t CheckpointArray::size() const {
  size_t n = 1;
  for (int d : shape) n *= static_cast<size_t>(d);
  return n;
}

namespace ckpt {

Share share_of(const CheckpointArray& a, int rank, int world) {
  const hsize_t n0 = a.shape.empty() ? 1 : static_cast<hsize_t>(a.shape[0]);
  const size_t row = n0 ? a.size() / n0 : 0;
  Share s;
  s.row0 = n0 * rank / world;
  s.rows = n0 * (rank + 1) / world - s.row0;
  s.elem0 = s.row0 * row;
  s.elems = s.rows * row;
  return s;
}

namespace {

uint32_t crc_bytes(uint32_t crc, const void* p, size_t n) {
  auto* b = static_cast<const Bytef*>(p);
  while (n > 0) {
    uInt chunk = n > (1u << 30) ? (1u << 30) : static_cast<uInt>(n);
    crc = static_cast<uint32_t>(crc32(crc, b, chunk));
    b += chunk;
    n -= chunk;
  }
  return crc;
}

}  // namespace

std::vector<uint32_t> combined_crcs(const std::vector<CheckpointArray>& arrays) {
  const int w = world_size(), me = world_rank();
  std::vector<uint64_t> mine(arrays.size()), all(arrays.size() * w);
  for (size_t i = 0; i < arrays.size(); ++i) {
    Share s = share_of(arrays[i], me, w);
    mine[i] = crc_bytes(crc32(0, nullptr, 0), arrays[i].data + s.elem0, s.elems * sizeof(float));
  }
  allgather(mine.data(), mine.size(), all.data());
  std::vector<uint32_t> out(arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    uLong crc = crc32(0, nullptr, 0);
    for (int r = 0; r < w; ++r) {
      Share s = share_of(arrays[i], r, w);
      crc = crc32_combine(crc, static_cast<uLong>(all[r * arrays.size() + i]),
                          static_cast<z_off_t>(s.elems * sizeof(float)));
    }
    out[i] = static_cast<uint32_t>(crc);
  }
  return out;
}

H5Handle mpio_fapl() {
  H5Handle fapl = h5_plist(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fapl_mpio(fapl.get(), MPI_COMM_WORLD, MPI_INFO_NULL);
  return fapl;
}

H5Handle collective_dxpl() {
  H5Handle dxpl = h5_plist(H5Pcreate(H5P_DATASET_XFER));
  const char* mode = std::getenv("CNNTRAIN_CKPT_IO");
  const bool coll = mode && std::string(mode) == "collective";
  H5Pset_dxpl_mpio(dxpl.get(), coll ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);
  return dxpl;
}

H5Handle select_share(hid_t fspace, const CheckpointArray& a, const Share& s) {
  const int rank = static_cast<int>(a.shape.size());
  hsize_t mdim[1] = {std::max<hsize_t>(s.elems, 1)};
  H5Handle mspace = h5_space(H5Screate_simple(1, mdim, nullptr));
  if (s.elems == 0) {
    H5Sselect_none(fspace);
    H5Sselect_none(mspace.get());
    return mspace;
  }
  std::vector<hsize_t> start(rank, 0), count(rank);
  for (int d = 0; d < rank; ++d) count[d] = static_cast<hsize_t>(a.shape[d]);
  start[0] = s.row0;
  count[0] = s.rows;
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  return mspace;
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

Agreement agree(bool holds_object, const Verdict& v) {
  int a[3] = {holds_object ? 1 : 0, holds_object ? -1 : 0, v.ok ? world_size() : world_rank()};
  allreduce_min(a, 3);
  return {a[0] == -a[1], a[2]};
}

std::string failure_message(const Agreement& a, const Verdict& v) {
  std::string m = a.first_failed == world_rank() ? v.msg : "";
  broadcast(m, a.first_failed);
  return m;
}

std::string on_this_rank() { return strprintf("rank %d on %s", world_rank(), host_name().c_str()); }

}  // namespace ckpt

namespace {

const char* kPrefix = "ckpt-";
const char* kSuffix = ".h5";

}  // namespace

std::string checkpoint_name(int64_t step) { return strprintf("%s%010lld%s", kPrefix, (long long)step, kSuffix); }

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<long long, std::string>> found;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return {};
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    long long step = 0;
    char tail[8] = {0};
    if (n.size() == std::strlen(kPrefix) + 10 + std::strlen(kSuffix) &&
        std::sscanf(n.c_str(), "ckpt-%10lld%4s", &step, tail) == 2 && std::string(tail) == kSuffix)
      found.push_back({step, dir + "/" + n});
  }
  ::closedir(d);
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

int remove_stale_tmp(const std::string& dir) {
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) == 0 && name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0)
      stale.push_back(dir + "/" + name);
  }
  ::closedir(d);
  for (const auto& p : stale) n += ::unlink(p.c_str()) == 0;
  return n;
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int keep, int64_t newest) {
  const std::string newest_path = dir + "/" + checkpoint_name(newest);
  std::vector<std::string> gone;
  int kept = 1;  // the newest itself
  for (const std::string& p : list_checkpoints(dir)) {  // newest first
    if (p >= newest_path) continue;  // same directory and fixed-width names: compares as the steps do
    if (kept < std::max(keep, 1)) ++kept;
    else if (::unlink(p.c_str()) == 0) gone.push_back(p);
  }
  return gone;
}

}  // namespace cnn
