// MPI-IO code: includes mpi.h through parallel HDF5's hdf5.h.
#include "src/checkpoint/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "io/h5_util.h"
#include "src/base/error.h"
#include "src/checkpoint/fault_injection.h"
#include "src/comm/comm.h"

namespace cnn {

size_t CheckpointArray::size() const {
  size_t n = 1;
  for (int d : shape) n *= static_cast<size_t>(d);
  return n;
}

namespace {

const char* kPrefix = "ckpt-";
const char* kSuffix = ".h5";

// The rows [row0, row0+rows) of dimension 0 that `rank` writes or reads: contiguous bytes of the array.
struct Share {
  hsize_t row0 = 0, rows = 0;
  size_t elem0 = 0, elems = 0;
};

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

// CRC-32 of every array, each rank hashing only its share and the pieces combined in rank order.
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

// Each rank's share of a tensor is one contiguous byte range, so independent MPI-IO transfers are large
// and aligned; collective buffering (two-phase I/O) only adds a shuffle between ranks. CNNTRAIN_CKPT_IO=
// collective selects it anyway (e.g. for file systems that prefer few, aggregated writers).
H5Handle collective_dxpl() {
  H5Handle dxpl = h5_plist(H5Pcreate(H5P_DATASET_XFER));
  const char* mode = std::getenv("CNNTRAIN_CKPT_IO");
  const bool coll = mode && std::string(mode) == "collective";
  H5Pset_dxpl_mpio(dxpl.get(), coll ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);
  return dxpl;
}

// Selects this rank's rows in the file space; returns the matching memory space.
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

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) raise(kExitCheckpoint, "cannot open '%s' to sync it: %s", path.c_str(), std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) raise(kExitCheckpoint, "fsync of '%s' failed: %s (disk full or I/O error)", path.c_str(),
                     std::strerror(err));
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

// What one rank knows of a collective operation: the first thing that went wrong here, if anything.
struct Verdict {
  bool ok = true;
  std::string msg;
  void fail(const std::string& m) {
    if (ok) msg = m;
    ok = false;
  }
};

// The ranks' agreement after a collective step: whether the ranks hold the HDF5 object the step created
// consistently (all or none: only then may the holders close it, which is collective) and the lowest rank
// that has failed so far.
struct Agreement {
  bool consistent = true;
  int first_failed = 0;  // world_size() when no rank failed
  bool all_ok() const { return first_failed == world_size(); }
};

Agreement agree(bool holds_object, const Verdict& v) {
  int a[3] = {holds_object ? 1 : 0, holds_object ? -1 : 0, v.ok ? world_size() : world_rank()};
  allreduce_min(a, 3);
  return {a[0] == -a[1], a[2]};
}

// The message of the lowest failing rank, on every rank (collective).
std::string failure_message(const Agreement& a, const Verdict& v) {
  std::string m = a.first_failed == world_rank() ? v.msg : "";
  broadcast(m, a.first_failed);
  return m;
}

std::string on_this_rank() { return strprintf("rank %d on %s", world_rank(), host_name().c_str()); }

// What a failed write most often means, checked: the space left where the checkpoint goes.
std::string space_left(const std::string& path) {
  struct statvfs fs;
  if (::statvfs(dir_of(path).c_str(), &fs) != 0) return "disk full?";
  return strprintf("%.1f MB free on the file system of '%s'",
                   static_cast<double>(fs.f_bavail) * fs.f_frsize / 1e6, dir_of(path).c_str());
}

// Whether the checkpoint's file system has room for it, checked before HDF5 creates the file: a write that
// runs out of space midway fails inside HDF5's collective metadata flush and close, where the ranks can part
// ways (one skips a sync point) and hang, which no agreement of ours can repair. The estimate is the data
// plus HDF5's per-object overhead (object header, link and crc32 attribute: under 2 KiB per dataset) and
// 64 KiB for the superblock, groups and file attributes. Returns "" when there is room.
std::string space_shortfall(const std::string& path, const std::vector<CheckpointArray>& arrays) {
  double need = 64 << 10;
  for (const auto& arr : arrays) need += static_cast<double>(arr.size()) * sizeof(float) + 2048;
  struct statvfs fs;
  if (::statvfs(dir_of(path).c_str(), &fs) != 0) return "";  // the create below reports an unusable directory
  const double avail = static_cast<double>(fs.f_bavail) * fs.f_frsize;
  if (avail >= need) return "";
  return strprintf("%s: the checkpoint needs about %.1f MB, %.1f MB free on the file system of '%s' (free space or "
                   "lower --checkpoint.keep)", on_this_rank().c_str(), need / 1e6, avail / 1e6,
                   dir_of(path).c_str());
}

// Attribute writes are collective: a failure is recorded and the next ones are still issued, so every rank
// makes the same calls.
void write_attr(Verdict& v, hid_t obj, const char* name, const std::function<void()>& write) {
  try {
    write();
    if (inject_ckpt_fault(CkptFault::kAttr))
      raise(kExitCheckpoint, "cannot write HDF5 attribute '%s': injected by CNNTRAIN_TEST_CKPT_FAULT", name);
  } catch (const Error& e) {
    v.fail(strprintf("%s: %s", on_this_rank().c_str(), e.what()));
  }
}

void write_meta(Verdict& v, hid_t file, const CheckpointMeta& m) {
  auto ints = [&](const char* name, long long x) {
    write_attr(v, file, name, [&] { h5_write_attr_ints(file, name, {x}); });
  };
  auto str = [&](const char* name, const std::string& x) {
    write_attr(v, file, name, [&] { h5_write_attr_strings(file, name, {x}); });
  };
  ints("format_version", kCheckpointFormatVersion);
  ints("step", m.step);
  ints("epoch", m.epoch);
  ints("step_in_epoch", m.step_in_epoch);
  ints("global_batch", m.global_batch);
  ints("samples_seen", m.samples_seen);
  ints("seed", static_cast<long long>(m.seed));
  write_attr(v, file, "loss_scale", [&] { h5_write_attr_floats(file, "loss_scale", {m.loss_scale}); });
  str("precision", m.precision);
  ints("loss_scale_growth", m.loss_scale_growth);
  ints("skipped_steps", m.skipped_steps);
  ints("optimizer_steps", m.optimizer_steps);
  ints("world_size", m.world_size);
  str("model", m.model);
  str("optimizer", m.optimizer);
  str("config", m.config);
  str("version", m.version);
}

bool read_meta(hid_t file, const std::string& path, CheckpointMeta& m, std::string& err) {
  std::vector<long long> v;
  if (!h5_read_attr_ints(file, "format_version", v) || v.size() != 1) {
    err = "checkpoint '" + path + "' has no format_version attribute: not a cnntrain checkpoint";
    return false;
  }
  if (v[0] != kCheckpointFormatVersion) {
    err = strprintf("checkpoint '%s' has format version %lld; this program reads version %d", path.c_str(), v[0],
                    kCheckpointFormatVersion);
    return false;
  }
  auto get_int = [&](const char* name, int64_t& out) {
    std::vector<long long> x;
    if (!h5_read_attr_ints(file, name, x) || x.size() != 1) {
      err = strprintf("checkpoint '%s' lacks the attribute '%s'", path.c_str(), name);
      return false;
    }
    out = x[0];
    return true;
  };
  int64_t seed = 0, world = 0;
  if (!get_int("step", m.step) || !get_int("epoch", m.epoch) || !get_int("step_in_epoch", m.step_in_epoch) ||
      !get_int("global_batch", m.global_batch) || !get_int("samples_seen", m.samples_seen) ||
      !get_int("seed", seed) || !get_int("world_size", world))
    return false;
  m.seed = static_cast<uint64_t>(seed);
  m.world_size = static_cast<int>(world);
  std::vector<double> ls;
  if (h5_read_attr_floats(file, "loss_scale", ls) && ls.size() == 1) m.loss_scale = ls[0];
  // Optional: checkpoints written before mixed precision lack these and keep the defaults.
  auto get_optional_int = [&](const char* name, int64_t& out) {
    std::vector<long long> x;
    if (h5_read_attr_ints(file, name, x) && x.size() == 1) out = x[0];
  };
  get_optional_int("loss_scale_growth", m.loss_scale_growth);
  get_optional_int("skipped_steps", m.skipped_steps);
  get_optional_int("optimizer_steps", m.optimizer_steps);
  std::vector<std::string> s;
  auto get_str = [&](const char* name, std::string& out) {
    if (h5_read_attr_strings(file, name, s) && s.size() == 1) out = s[0];
  };
  get_str("model", m.model);
  get_str("optimizer", m.optimizer);
  get_str("config", m.config);
  get_str("version", m.version);
  get_str("precision", m.precision);
  return true;
}

// Names of the datasets under a group (recursively, as "group/name" paths relative to the root).
void collect_datasets(hid_t file, const std::string& group, std::vector<std::string>& out) {
  if (H5Lexists(file, group.c_str(), H5P_DEFAULT) <= 0) return;
  H5Handle g = h5_group(H5Gopen2(file, group.c_str(), H5P_DEFAULT));
  if (!g.valid()) return;
  H5G_info_t info;
  if (H5Gget_info(g.get(), &info) < 0) return;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[1024];
    if (H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0)
      continue;
    std::string child = group + "/" + name;
    H5O_info_t oi;
    if (H5Oget_info_by_name(file, child.c_str(), &oi, H5P_DEFAULT) < 0) continue;
    if (oi.type == H5O_TYPE_GROUP) collect_datasets(file, child, out);
    else if (oi.type == H5O_TYPE_DATASET) out.push_back(child.substr(1));
  }
}

std::string shape_str(const std::vector<hsize_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "," : "") + std::to_string(s[i]);
  return o + "]";
}

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

namespace {

// Creates every dataset (collective); a failure is recorded and the remaining ones are still created.
std::vector<H5Handle> create_datasets(hid_t file, const std::vector<CheckpointArray>& arrays, const std::string& tmp,
                                      Verdict& v) {
  H5Handle lcpl = h5_plist(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  std::vector<H5Handle> ds;
  for (const CheckpointArray& arr : arrays) {
    std::vector<hsize_t> dims(arr.shape.begin(), arr.shape.end());
    H5Handle fspace = h5_space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
    ds.push_back(h5_dataset(
        H5Dcreate2(file, arr.path.c_str(), H5T_IEEE_F32LE, fspace.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT)));
    if (!ds.back().valid())
      v.fail(strprintf("%s: cannot create dataset '%s' in '%s': %s", on_this_rank().c_str(), arr.path.c_str(),
                       tmp.c_str(), h5_last_error().c_str()));
  }
  return ds;
}

// Writes this rank's rows of every dataset (independent I/O, or collective with CNNTRAIN_CKPT_IO=collective)
// and each dataset's crc32 attribute (collective). Every rank makes every call, whatever failed before.
void write_datasets(const std::vector<H5Handle>& ds, const std::vector<CheckpointArray>& arrays,
                    const std::vector<uint32_t>& crcs, const std::string& tmp, Verdict& v) {
  const int w = world_size(), me = world_rank();
  H5Handle dxpl = collective_dxpl();
  for (size_t i = 0; i < arrays.size(); ++i) {
    const CheckpointArray& arr = arrays[i];
    H5Handle fspace = h5_space(H5Dget_space(ds[i].get()));
    Share s = share_of(arr, me, w);
    H5Handle mspace = select_share(fspace.get(), arr, s);
    if (H5Dwrite(ds[i].get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), dxpl.get(), arr.data + s.elem0) < 0)
      v.fail(strprintf("%s: writing dataset '%s' of '%s' failed: %s (%s)", on_this_rank().c_str(), arr.path.c_str(),
                       tmp.c_str(), h5_last_error().c_str(), space_left(tmp).c_str()));
    else if (inject_ckpt_fault(CkptFault::kWrite))
      v.fail(strprintf("%s: writing dataset '%s' of '%s' failed: injected by CNNTRAIN_TEST_CKPT_FAULT",
                       on_this_rank().c_str(), arr.path.c_str(), tmp.c_str()));
    write_attr(v, ds[i].get(), "crc32", [&] { h5_write_attr_ints(ds[i].get(), "crc32", {static_cast<long long>(crcs[i])}); });
  }
}

}  // namespace

// Every HDF5 call here that creates, writes metadata or closes is collective. A rank that fails records the
// failure and keeps making the same calls; the ranks agree after each phase (create the file; create the
// datasets; write them; the metadata and the close) with one small allreduce, and skip the rest together;
// the file is closed by every rank, the .tmp removed, and every rank raises the same CollectiveError naming
// the failing rank. Only when some ranks hold an object the others lack (HDF5 failed to create it on some)
// can it not be closed: then a plain Error is raised with the file left open, and the caller ends the job
// (MPI_Abort) instead of finalizing MPI with the file open.
CheckpointWriteStats write_checkpoint(const std::string& path, const std::vector<CheckpointArray>& arrays,
                                      const CheckpointMeta& meta) {
  auto t0 = std::chrono::steady_clock::now();
  const int me = world_rank();
  const std::string tmp = path + ".tmp";
  std::vector<uint32_t> crcs = combined_crcs(arrays);
  Verdict v;
  Agreement a;
  {
    std::lock_guard<std::mutex> lk(h5_mutex());
    h5_quiet();
    const std::string short_of_space = space_shortfall(tmp, arrays);
    if (!short_of_space.empty()) v.fail(short_of_space);
    a = agree(true, v);
    H5Handle fapl = mpio_fapl();
    H5Handle file = a.all_ok() ? h5_file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get())) : H5Handle();
    if (a.all_ok() && !file.valid())
      v.fail(strprintf("%s: cannot create '%s': %s (is the directory writable, the disk full?)", on_this_rank().c_str(),
                       tmp.c_str(), h5_last_error().c_str()));
    if (a.all_ok()) a = agree(file.valid(), v);
    if (!a.consistent) file.abandon();
    if (a.consistent && a.all_ok()) {
      std::vector<H5Handle> ds = create_datasets(file.get(), arrays, tmp, v);
      a = agree(v.ok, v);
      if (!a.consistent) {  // created on some ranks only
        for (H5Handle& d : ds) d.abandon();
        file.abandon();
      } else if (a.all_ok()) {
        write_datasets(ds, arrays, crcs, tmp, v);
        a = agree(true, v);
        if (a.all_ok()) write_meta(v, file.get(), meta);
      }
      for (H5Handle& d : ds)
        if (d.close() < 0) v.fail(strprintf("%s: closing a dataset of '%s' failed: %s", on_this_rank().c_str(),
                                            tmp.c_str(), h5_last_error().c_str()));
    }
    if (a.consistent) {
      ckpt_fault_delay();
      if (file.close() < 0)
        v.fail(strprintf("%s: closing '%s' failed: %s (%s)", on_this_rank().c_str(), tmp.c_str(),
                         h5_last_error().c_str(), space_left(tmp).c_str()));
    }
  }
  const bool closed = a.consistent;
  a = agree(true, v);
  if (!a.all_ok()) {
    const std::string why = failure_message(a, v);
    if (me == 0) ::unlink(tmp.c_str());
    const std::string msg = strprintf("checkpoint '%s' could not be written: %s; the previous checkpoint is kept",
                                      path.c_str(), why.c_str());
    if (!closed) raise(kExitCheckpoint, "%s", msg.c_str());
    throw CollectiveError(kExitCheckpoint, msg);
  }
  // Every rank has closed the file: commit.
  if (me == 0) {
    try {
      fsync_path(tmp, false);
      ::chmod(tmp.c_str(), 0600);
      if (std::rename(tmp.c_str(), path.c_str()) != 0)
        raise(kExitCheckpoint, "cannot rename '%s' to '%s': %s", tmp.c_str(), path.c_str(), std::strerror(errno));
      fsync_path(dir_of(path), true);
    } catch (const Error& e) {
      v.fail(strprintf("%s: %s", on_this_rank().c_str(), e.what()));
    }
  }
  a = agree(true, v);
  if (!a.all_ok()) {
    const std::string why = failure_message(a, v);
    if (me == 0) ::unlink(tmp.c_str());
    throw CollectiveError(kExitCheckpoint, strprintf("checkpoint '%s' could not be committed: %s", path.c_str(),
                                                     why.c_str()));
  }
  CheckpointWriteStats st;
  for (const auto& arr : arrays) st.bytes += arr.size() * sizeof(float);
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

namespace {

// The first difference between the datasets of the file and the model's arrays (names, then shapes), in the
// model's order so that the message names the first parameter that differs. The same on every rank.
bool check_layout(hid_t file, const std::string& path, const std::vector<CheckpointArray>& arrays,
                  const CheckpointMeta& meta, std::string& msg) {
  std::vector<std::string> in_file;
  collect_datasets(file, "/params", in_file);
  collect_datasets(file, "/buffers", in_file);
  collect_datasets(file, "/optimizer", in_file);
  std::sort(in_file.begin(), in_file.end());
  for (const auto& a : arrays) {
    if (!std::binary_search(in_file.begin(), in_file.end(), a.path)) {
      msg = strprintf("checkpoint '%s' has no dataset '%s' (it was written for model '%s'; this run trains another "
                      "model or optimizer)", path.c_str(), a.path.c_str(), meta.model.c_str());
      return false;
    }
    H5Handle d = h5_dataset(H5Dopen2(file, a.path.c_str(), H5P_DEFAULT));
    H5Handle fspace = h5_space(H5Dget_space(d.get()));
    std::vector<hsize_t> dims(std::max(H5Sget_simple_extent_ndims(fspace.get()), 0));
    H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
    std::vector<hsize_t> want(a.shape.begin(), a.shape.end());
    if (dims != want) {
      msg = strprintf("checkpoint '%s': dataset '%s' has shape %s but the model's is %s (written for model '%s')",
                      path.c_str(), a.path.c_str(), shape_str(dims).c_str(), shape_str(want).c_str(),
                      meta.model.c_str());
      return false;
    }
  }
  if (in_file.size() != arrays.size()) {
    std::vector<std::string> want;
    for (const auto& a : arrays) want.push_back(a.path);
    std::sort(want.begin(), want.end());
    for (const auto& f : in_file)
      if (!std::binary_search(want.begin(), want.end(), f)) {
        msg = strprintf("checkpoint '%s' has dataset '%s' that this model lacks (written for model '%s')",
                        path.c_str(), f.c_str(), meta.model.c_str());
        return false;
      }
  }
  return true;
}

}  // namespace

// Collective like the write: every rank looks for the file, opens it (collective), reads its share and closes
// it (collective); a rank that fails records it, and the ranks agree after each phase (the look, the open,
// the layout check, the datasets' checksums, the data) before a step that a rank might otherwise take alone.
// Verdicts about the file's contents are the same on every rank; I/O failures name the rank.
bool read_checkpoint(const std::string& path, const std::vector<CheckpointArray>& arrays, CheckpointMeta& meta,
                     std::string& error, bool* layout_mismatch) {
  const int w = world_size(), me = world_rank();
  Verdict v;
  std::vector<uint32_t> stored(arrays.size(), 0);
  // Each rank's own view: on a shared file system a file some ranks cannot see fails on all.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    v.fail(strprintf("checkpoint '%s' does not exist (%s; %s)", path.c_str(), std::strerror(errno),
                     on_this_rank().c_str()));
  else if (inject_ckpt_fault(CkptFault::kStat))
    v.fail(strprintf("checkpoint '%s' does not exist (injected by CNNTRAIN_TEST_CKPT_FAULT; %s)", path.c_str(),
                     on_this_rank().c_str()));
  Agreement a = agree(true, v);
  if (!a.all_ok()) {
    error = failure_message(a, v);
    return false;
  }
  {
    std::lock_guard<std::mutex> lk(h5_mutex());
    h5_quiet();
    H5Handle fapl = mpio_fapl();
    H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
    if (!file.valid())
      v.fail(strprintf("cannot open checkpoint '%s': %s (a truncated or damaged file, or not HDF5; %s)", path.c_str(),
                       h5_last_error().c_str(), on_this_rank().c_str()));
    else if (inject_ckpt_fault(CkptFault::kOpen))
      v.fail(strprintf("cannot open checkpoint '%s': injected by CNNTRAIN_TEST_CKPT_FAULT (%s)", path.c_str(),
                       on_this_rank().c_str()));
    a = agree(file.valid(), v);
    if (!a.consistent) {
      // Opened on some ranks only: closing it there would wait for the others forever.
      file.abandon();
      raise(kExitCheckpoint, "%s; the other ranks opened it: the ranks see different files (check the shared file "
            "system)", failure_message(a, v).c_str());
    }
    if (a.all_ok()) {
      std::string msg;
      if (!read_meta(file.get(), path, meta, msg)) {
        v.fail(msg);
      } else if (!check_layout(file.get(), path, arrays, meta, msg)) {
        v.fail(msg);
        if (layout_mismatch) *layout_mismatch = true;  // the file's contents: the same verdict on every rank
      }
      a = agree(true, v);
    }
    if (a.all_ok()) {
      // Every dataset and its checksum first (reads of a file nobody modifies: independent), then, once every
      // rank has them all, the data (collective with CNNTRAIN_CKPT_IO=collective: every rank reads every one).
      std::vector<H5Handle> ds;
      for (size_t i = 0; i < arrays.size(); ++i) {
        ds.push_back(h5_dataset(H5Dopen2(file.get(), arrays[i].path.c_str(), H5P_DEFAULT)));
        std::vector<long long> crc;
        if (!h5_read_attr_ints(ds.back().get(), "crc32", crc) || crc.size() != 1)
          v.fail(strprintf("checkpoint '%s': dataset '%s' has no crc32 attribute", path.c_str(),
                           arrays[i].path.c_str()));
        else
          stored[i] = static_cast<uint32_t>(crc[0]);
      }
      a = agree(true, v);
      H5Handle dxpl = collective_dxpl();
      for (size_t i = 0; i < arrays.size() && a.all_ok(); ++i) {
        const CheckpointArray& arr = arrays[i];
        H5Handle fspace = h5_space(H5Dget_space(ds[i].get()));
        Share s = share_of(arr, me, w);
        H5Handle mspace = select_share(fspace.get(), arr, s);
        if (H5Dread(ds[i].get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), dxpl.get(), arr.data + s.elem0) < 0)
          v.fail(strprintf("checkpoint '%s': reading dataset '%s' failed: %s (damaged file; %s)", path.c_str(),
                           arr.path.c_str(), h5_last_error().c_str(), on_this_rank().c_str()));
      }
      a = agree(true, v);
    }
  }
  // The file is closed on every rank.
  if (!a.all_ok()) {
    error = failure_message(a, v);
    return false;
  }
  std::vector<uint32_t> crcs = combined_crcs(arrays);
  for (size_t i = 0; i < arrays.size(); ++i)
    if (crcs[i] != stored[i]) {
      error = strprintf("checkpoint '%s': checksum mismatch in dataset '%s' (stored %08x, computed %08x): the "
                        "file is corrupt", path.c_str(), arrays[i].path.c_str(), stored[i], crcs[i]);
      return false;
    }
  for (const auto& a : arrays) {
    std::vector<size_t> offsets(w + 1);
    for (int r = 0; r < w; ++r) offsets[r] = share_of(a, r, w).elem0 * sizeof(float);
    offsets[w] = a.size() * sizeof(float);
    allgather_bytes(a.data, offsets);
  }
  return true;
}

bool read_checkpoint_meta(const std::string& path, CheckpointMeta& meta, std::string& error) {
  std::lock_guard<std::mutex> lk(h5_mutex());
  h5_quiet();
  H5Handle file = h5_file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) {
    error = strprintf("cannot open checkpoint '%s': %s", path.c_str(), h5_last_error().c_str());
    return false;
  }
  return read_meta(file.get(), path, meta, error);
}

}  // namespace cnn
