// Reading a checkpoint: the metadata, the layout check against the model, the checksums, then every rank its
// share of each array and an allgather. MPI-IO code: includes mpi.h through parallel HDF5's hdf5.h.
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"
#include "src/checkpoint/fault_injection.h"
#include "src/checkpoint/parallel_h5.h"

namespace cnn {

using namespace ckpt;

namespace {

// CheckpointMeta::graph: optional (older checkpoints lack it); a stored graph must match its checksum.
bool read_graph(hid_t file, const std::string& path, CheckpointGraph& g, std::string& err) {
  std::vector<long long> in, classes;
  if (h5_read_attr_ints(file, "net_input", in) && in.size() == 3 && h5_read_attr_ints(file, "num_classes", classes) &&
      classes.size() == 1) {
    g.input_h = static_cast<int>(in[0]), g.input_w = static_cast<int>(in[1]), g.input_c = static_cast<int>(in[2]);
    g.classes = static_cast<int>(classes[0]);
  }
  if (H5Lexists(file, "/graph", H5P_DEFAULT) <= 0) return true;
  H5Handle d = h5_dataset(H5Dopen2(file, "/graph", H5P_DEFAULT));
  H5Handle space = h5_space(H5Dget_space(d.get()));
  const hssize_t n = space.valid() ? H5Sget_simple_extent_npoints(space.get()) : -1;
  std::vector<long long> crc;
  g.onnx.assign(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n <= 0 || H5Dread(d.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, &g.onnx[0]) < 0 ||
      !h5_read_attr_ints(d.get(), "crc32", crc) || crc.size() != 1) {
    err = strprintf("checkpoint '%s': cannot read the model's graph (dataset 'graph'): %s (damaged file)",
                    path.c_str(), h5_last_error().c_str());
    return false;
  }
  const uint32_t got = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(g.onnx.data()), static_cast<uInt>(g.onnx.size())));
  if (got != static_cast<uint32_t>(crc[0])) {
    err = strprintf("checkpoint '%s': checksum mismatch in dataset 'graph' (the model's graph): the file is corrupt",
                    path.c_str());
    return false;
  }
  return true;
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
  get_optional_int("ema_updates", m.ema_updates);
  get_optional_int("swa_models", m.swa_models);
  get_optional_int("swa_bn_models", m.swa_bn_models);
  std::vector<std::string> s;
  auto get_str = [&](const char* name, std::string& out) {
    if (h5_read_attr_strings(file, name, s) && s.size() == 1) out = s[0];
  };
  get_str("model", m.model);
  get_str("optimizer", m.optimizer);
  get_str("config", m.config);
  get_str("version", m.version);
  get_str("precision", m.precision);
  m.info = read_model_info(file);
  return read_graph(file, path, m.graph, err);
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

// The first difference between the datasets of the file and the model's arrays (names, then shapes), in the
// model's order so that the message names the first parameter that differs. The same on every rank.
bool check_layout(hid_t file, const std::string& path, const std::vector<CheckpointArray>& arrays,
                  const CheckpointMeta& meta, std::string& msg) {
  std::vector<std::string> in_file;
  collect_datasets(file, "/params", in_file);
  collect_datasets(file, "/buffers", in_file);
  collect_datasets(file, "/optimizer", in_file);
  collect_datasets(file, "/ema", in_file);
  collect_datasets(file, "/swa", in_file);
  std::sort(in_file.begin(), in_file.end());
  // The weights' averages are there exactly when the run that wrote the file had them on: the option, or null.
  const auto average_option = [](const std::string& p) -> const char* {
    if (p.rfind("ema/", 0) == 0) return "--train.ema";
    return p.rfind("swa/", 0) == 0 ? "--train.swa_start_epoch" : nullptr;
  };
  for (const auto& a : arrays) {
    if (!std::binary_search(in_file.begin(), in_file.end(), a.path)) {
      if (const char* opt = average_option(a.path))
        msg = strprintf("checkpoint '%s' has no average of the weights ('%s'): it was written by a run without "
                        "%s; continue it with %s 0", path.c_str(), a.path.c_str(), opt, opt);
      else
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
        if (const char* opt = average_option(f))
          msg = strprintf("checkpoint '%s' holds an average of the weights ('%s'): it was written by a run with "
                          "%s; continue it with the same %s", path.c_str(), f.c_str(), opt, opt);
        else
          msg = strprintf("checkpoint '%s' has dataset '%s' that this model lacks (written for model '%s')",
                          path.c_str(), f.c_str(), meta.model.c_str());
        return false;
      }
  }
  return true;
}

}  // namespace

namespace {

// Each rank's own view: on a shared file system a file some ranks cannot see fails on all.
void look_for(const std::string& path, Verdict& v) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    v.fail(strprintf("checkpoint '%s' does not exist (%s; %s)", path.c_str(), std::strerror(errno),
                     on_this_rank().c_str()));
  else if (inject_ckpt_fault(CkptFault::kStat))
    v.fail(strprintf("checkpoint '%s' does not exist (injected by CNNTRAIN_TEST_CKPT_FAULT; %s)", path.c_str(),
                     on_this_rank().c_str()));
}

// Opens the file on every rank (collective). Raises when it opened on some ranks only: closing it there would
// wait for the others forever.
H5Handle open_everywhere(const std::string& path, Verdict& v, Agreement& a) {
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
    file.abandon();
    raise(kExitCheckpoint, "%s; the other ranks opened it: the ranks see different files (check the shared file "
          "system)", failure_message(a, v).c_str());
  }
  return file;
}

// Every dataset and its checksum first (reads of a file nobody modifies: independent), then, once every rank
// has them all, this rank's share of the data (collective with CNNTRAIN_CKPT_IO=collective: every rank reads
// every one). Returns the ranks' agreement after the data.
Agreement read_shares(hid_t file, const std::string& path, const std::vector<CheckpointArray>& arrays,
                      std::vector<uint32_t>& stored, Verdict& v) {
  std::vector<H5Handle> ds;
  for (size_t i = 0; i < arrays.size(); ++i) {
    ds.push_back(h5_dataset(H5Dopen2(file, arrays[i].path.c_str(), H5P_DEFAULT)));
    std::vector<long long> crc;
    if (!h5_read_attr_ints(ds.back().get(), "crc32", crc) || crc.size() != 1)
      v.fail(strprintf("checkpoint '%s': dataset '%s' has no crc32 attribute", path.c_str(), arrays[i].path.c_str()));
    else
      stored[i] = static_cast<uint32_t>(crc[0]);
  }
  Agreement a = agree(true, v);
  H5Handle dxpl = collective_dxpl();
  for (size_t i = 0; i < arrays.size() && a.all_ok(); ++i) {
    const CheckpointArray& arr = arrays[i];
    H5Handle fspace = h5_space(H5Dget_space(ds[i].get()));
    Share s = share_of(arr, world_rank(), world_size());
    H5Handle mspace = select_share(fspace.get(), arr, s);
    if (H5Dread(ds[i].get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), dxpl.get(), arr.data + s.elem0) < 0)
      v.fail(strprintf("checkpoint '%s': reading dataset '%s' failed: %s (damaged file; %s)", path.c_str(),
                       arr.path.c_str(), h5_last_error().c_str(), on_this_rank().c_str()));
  }
  return agree(true, v);
}

// The checksums of what the ranks read together against the stored ones, then every rank gets every share.
bool verify_and_gather(const std::string& path, const std::vector<CheckpointArray>& arrays,
                       const std::vector<uint32_t>& stored, std::string& error) {
  std::vector<uint32_t> crcs = combined_crcs(arrays);
  for (size_t i = 0; i < arrays.size(); ++i)
    if (crcs[i] != stored[i]) {
      error = strprintf("checkpoint '%s': checksum mismatch in dataset '%s' (stored %08x, computed %08x): the "
                        "file is corrupt", path.c_str(), arrays[i].path.c_str(), stored[i], crcs[i]);
      return false;
    }
  const int w = world_size();
  for (const auto& a : arrays) {
    std::vector<size_t> offsets(w + 1);
    for (int r = 0; r < w; ++r) offsets[r] = share_of(a, r, w).elem0 * sizeof(float);
    offsets[w] = a.size() * sizeof(float);
    allgather_bytes(a.data, offsets);
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
  Verdict v;
  std::vector<uint32_t> stored(arrays.size(), 0);
  look_for(path, v);
  Agreement a = agree(true, v);
  if (!a.all_ok()) {
    error = failure_message(a, v);
    return false;
  }
  {
    std::lock_guard<std::mutex> lk(h5_mutex());
    h5_quiet();
    H5Handle file = open_everywhere(path, v, a);
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
    if (a.all_ok()) a = read_shares(file.get(), path, arrays, stored, v);
  }
  // The file is closed on every rank.
  if (!a.all_ok()) {
    error = failure_message(a, v);
    return false;
  }
  return verify_and_gather(path, arrays, stored, error);
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
