#include "src/checkpoint/export.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "io/h5_util.h"
#include "src/checkpoint/checkpoint.h"
#include "src/base/error.h"

namespace cnn {

namespace {

// Refuses a checkpoint without the weights asked for (exit 4, naming the file and the way out: "<retry> with
// --weights raw").
void check_weights(const std::string& checkpoint, hid_t in, const CheckpointMeta& meta, ExportWeights which,
                   const std::string& retry) {
  if (which == ExportWeights::kEma && H5Lexists(in, "/ema", H5P_DEFAULT) <= 0)
    raise(kExitCheckpoint, "checkpoint '%s' has no moving average of the weights (/ema): it was written by a run "
          "without --train.ema; %s with --weights raw", checkpoint.c_str(), retry.c_str());
  if (which != ExportWeights::kSwa) return;
  if (H5Lexists(in, "/swa", H5P_DEFAULT) <= 0)
    raise(kExitCheckpoint, "checkpoint '%s' has no SWA average of the weights (/swa): it was written by a run "
          "without --train.swa_start_epoch; %s with --weights raw", checkpoint.c_str(), retry.c_str());
  if (meta.swa_models == 0 || meta.swa_bn_models != meta.swa_models)
    raise(kExitCheckpoint, "checkpoint '%s' (step %lld) was written before the end of training: its SWA average "
          "(%lld models) has no batch-norm statistics yet, which are recomputed after the last step; use the "
          "run's final checkpoint", checkpoint.c_str(), (long long)meta.step, (long long)meta.swa_models);
}

// Dataset `name` of `group`, verified against its crc32 attribute; `space` gets its dataspace.
std::vector<float> read_verified(const std::string& checkpoint, hid_t g, const char* group, const char* name,
                                 H5Handle& space) {
  H5Handle d = h5_dataset(H5Dopen2(g, name, H5P_DEFAULT));
  space = h5_space(H5Dget_space(d.get()));
  std::vector<float> v(static_cast<size_t>(std::max<hssize_t>(H5Sget_simple_extent_npoints(space.get()), 0)));
  std::vector<long long> crc;
  if (H5Dread(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0 ||
      !h5_read_attr_ints(d.get(), "crc32", crc) || crc.size() != 1)
    raise(kExitCheckpoint, "checkpoint '%s': cannot read %s/%s", checkpoint.c_str(), group, name);
  uint32_t got = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(v.data()), static_cast<uInt>(v.size() * sizeof(float))));
  if (got != static_cast<uint32_t>(crc[0]))
    raise(kExitCheckpoint, "checkpoint '%s': checksum mismatch in %s/%s: the file is corrupt", checkpoint.c_str(),
          group, name);
  return v;
}

// The names of the datasets in `group`.
std::vector<std::string> dataset_names(hid_t file, const char* group) {
  std::vector<std::string> names;
  if (H5Lexists(file, group, H5P_DEFAULT) <= 0) return names;
  H5Handle g = h5_group(H5Gopen2(file, group, H5P_DEFAULT));
  H5G_info_t info;
  H5Gget_info(g.get(), &info);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[1024];
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
    names.push_back(name);
  }
  return names;
}

}  // namespace

std::map<std::string, std::vector<float>> read_checkpoint_weights(const std::string& checkpoint, ExportWeights which,
                                                                  CheckpointMeta& meta, const std::string& retry) {
  std::string err;
  if (!read_checkpoint_meta(checkpoint, meta, err)) raise(kExitCheckpoint, "%s", err.c_str());
  std::lock_guard<std::mutex> lk(h5_mutex());
  h5_quiet();
  H5Handle in = h5_file(H5Fopen(checkpoint.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  check_weights(checkpoint, in.get(), meta, which, retry);
  const bool swa = which == ExportWeights::kSwa;
  const char* weights = which == ExportWeights::kEma ? "/ema" : swa ? "/swa/params" : "/params";
  std::map<std::string, std::vector<float>> out;
  // /ema holds the buffers' average too: read first, it wins over /buffers.
  for (const char* group : {weights, swa ? "/swa/buffers" : "/buffers"}) {
    H5Handle g = h5_group(H5Gopen2(in.get(), group, H5P_DEFAULT));
    for (const std::string& name : dataset_names(in.get(), group)) {
      H5Handle space;
      if (!out.count(name)) out[name] = read_verified(checkpoint, g.get(), group, name.c_str(), space);
    }
  }
  return out;
}

const char* export_weights_name(ExportWeights which) {
  return which == ExportWeights::kEma ? "ema" : which == ExportWeights::kSwa ? "swa" : "raw";
}

ExportWeights parse_export_weights(const std::string& name, const char* command) {
  for (const ExportWeights w : {ExportWeights::kRaw, ExportWeights::kEma, ExportWeights::kSwa})
    if (name == export_weights_name(w)) return w;
  raise(kExitUsage, "%s: --weights must be raw, ema or swa, not '%s'", command, name.c_str());
}

ExportStats export_weights(const std::string& checkpoint, const std::string& out, ExportWeights which) {
  CheckpointMeta meta;
  std::string err;
  if (!read_checkpoint_meta(checkpoint, meta, err)) raise(kExitCheckpoint, "%s", err.c_str());
  std::lock_guard<std::mutex> lk(h5_mutex());
  h5_quiet();
  H5Handle in = h5_file(H5Fopen(checkpoint.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (H5Lexists(in.get(), "/params", H5P_DEFAULT) <= 0)
    raise(kExitCheckpoint, "checkpoint '%s' has no /params group", checkpoint.c_str());
  check_weights(checkpoint, in.get(), meta, which, "export it");
  const bool swa = which == ExportWeights::kSwa;
  const char* weights = which == ExportWeights::kEma ? "/ema" : swa ? "/swa/params" : "/params";
  const std::string tmp = out + ".tmp";
  H5Handle dst = h5_file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!dst.valid()) raise(kExitCheckpoint, "cannot create '%s': %s", tmp.c_str(), h5_last_error().c_str());
  H5Handle lcpl = h5_plist(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  ExportStats st;
  st.model = meta.model;
  st.step = meta.step;
  // Parameters, and the buffers inference needs too (batch-norm running statistics).
  for (const char* group : {weights, swa ? "/swa/buffers" : "/buffers"}) {
    if (H5Lexists(in.get(), group, H5P_DEFAULT) <= 0) continue;
    H5Handle params = h5_group(H5Gopen2(in.get(), group, H5P_DEFAULT));
    for (const std::string& n : dataset_names(in.get(), group)) {
      const char* name = n.c_str();
      H5Handle sp;
      const std::vector<float> v = read_verified(checkpoint, params.get(), group, name, sp);
      // "conv1.weight" -> "/conv1/weight"
      std::string path = "/" + std::string(name);
      auto dot = path.rfind('.');
      if (dot != std::string::npos) path[dot] = '/';
      // /ema holds the buffers' average too (checkpoints since the EMA averaged them): it wins over /buffers.
      if (H5Lexists(dst.get(), path.substr(1, path.find('/', 1) - 1).c_str(), H5P_DEFAULT) > 0 &&
          H5Lexists(dst.get(), path.c_str(), H5P_DEFAULT) > 0)
        continue;
      const bool is_buffer = group != weights || H5Lexists(in.get(), ("/buffers/" + std::string(name)).c_str(),
                                                           H5P_DEFAULT) > 0;
      H5Handle o = h5_dataset(
          H5Dcreate2(dst.get(), path.c_str(), H5T_IEEE_F32LE, sp.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT));
      if (!o.valid() || H5Dwrite(o.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0)
        raise(kExitCheckpoint, "writing %s to '%s' failed: %s", path.c_str(), tmp.c_str(), h5_last_error().c_str());
      ++st.tensors;
      (is_buffer ? st.buffers : st.params) += v.size();
    }
  }
  h5_write_attr_strings(dst.get(), "format", {"cnntrain-weights"});
  h5_write_attr_strings(dst.get(), "model", {meta.model});
  h5_write_attr_strings(dst.get(), "weights", {export_weights_name(which)});
  h5_write_attr_ints(dst.get(), "step", {meta.step});
  write_model_info(dst.get(), meta.info);
  h5_write_attr_strings(dst.get(), "layout",
                        {"conv weight [out,kh,kw,in] (KRSC); linear weight [out,in]; bias [out]; activations NHWC"});
  if (dst.close() < 0) raise(kExitCheckpoint, "closing '%s' failed: %s", tmp.c_str(), h5_last_error().c_str());
  if (std::rename(tmp.c_str(), out.c_str()) != 0)
    raise(kExitCheckpoint, "cannot rename '%s' to '%s': %s", tmp.c_str(), out.c_str(), std::strerror(errno));
  return st;
}

}  // namespace cnn
