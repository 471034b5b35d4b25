// Writing a checkpoint: every rank its share of each array, through MPI-IO (parallel HDF5), then the commit
// by rename. MPI-IO code: includes mpi.h through parallel HDF5's hdf5.h.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>

#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"
#include "src/checkpoint/fault_injection.h"
#include "src/checkpoint/parallel_h5.h"

namespace cnn {

using namespace ckpt;

namespace {

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) raise(kExitCheckpoint, "cannot open '%s' to sync it: %s", path.c_str(), std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) raise(kExitCheckpoint, "fsync of '%s' failed: %s (disk full or I/O error)", path.c_str(),
                     std::strerror(err));
}

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
  ints("ema_updates", m.ema_updates);
  ints("swa_models", m.swa_models);
  ints("swa_bn_models", m.swa_bn_models);
  ints("world_size", m.world_size);
  str("model", m.model);
  str("optimizer", m.optimizer);
  str("config", m.config);
  str("version", m.version);
  if (m.graph.has_input()) {
    write_attr(v, file, "net_input", [&] {
      h5_write_attr_ints(file, "net_input", {m.graph.input_h, m.graph.input_w, m.graph.input_c});
    });
    // num_classes once: ModelInfo writes it too where it recorded one.
    if (m.info.num_classes <= 0) ints("num_classes", m.graph.classes);
  }
  write_attr(v, file, "model info", [&] { write_model_info(file, m.info); });
}

// /graph: an imported model's graph (CheckpointGraph::onnx), small, written by rank 0 alone (independent I/O)
// into a dataset every rank creates; its crc32 attribute and the closes are collective.
void write_graph(Verdict& v, hid_t file, const std::string& bytes, const std::string& tmp) {
  if (bytes.empty()) return;
  hsize_t n = bytes.size();
  H5Handle space = h5_space(H5Screate_simple(1, &n, nullptr));
  H5Handle d = h5_dataset(H5Dcreate2(file, "/graph", H5T_NATIVE_UINT8, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                     H5P_DEFAULT));
  if (!d.valid()) {
    v.fail(strprintf("%s: cannot create dataset 'graph' in '%s': %s", on_this_rank().c_str(), tmp.c_str(),
                     h5_last_error().c_str()));
    return;
  }
  if (world_rank() == 0 && H5Dwrite(d.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0)
    v.fail(strprintf("%s: writing dataset 'graph' of '%s' failed: %s (%s)", on_this_rank().c_str(), tmp.c_str(),
                     h5_last_error().c_str(), space_left(tmp).c_str()));
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
  write_attr(v, d.get(), "crc32", [&] { h5_write_attr_ints(d.get(), "crc32", {static_cast<long long>(crc)}); });
}

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
        if (a.all_ok()) {
          write_meta(v, file.get(), meta);
          write_graph(v, file.get(), meta.graph.onnx, tmp);
        }
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

}  // namespace cnn
