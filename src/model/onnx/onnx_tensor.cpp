// ONNX tensors <-> OnnxTensor: every element type PyTorch writes for weights, shapes and bounds, stored inline
// (raw_data or the typed fields) or as external data beside the model. Sizes are checked against the bytes
// actually present before anything is allocated, so a file cannot make the reader allocate what it lacks.
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "src/base/error.h"
#include "src/base/half_bits.h"
#include "src/model/onnx/onnx_proto.h"

namespace cnn {

namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

// Bytes per element of the types that load; 0 for the others.
size_t element_bytes(int type) {
  switch (type) {
    case TensorProto::FLOAT: case TensorProto::INT32: case TensorProto::UINT32: return 4;
    case TensorProto::DOUBLE: case TensorProto::INT64: case TensorProto::UINT64: return 8;
    case TensorProto::FLOAT16: case TensorProto::BFLOAT16: case TensorProto::INT16: case TensorProto::UINT16: return 2;
    case TensorProto::INT8: case TensorProto::UINT8: case TensorProto::BOOL: return 1;
    default: return 0;
  }
}

bool is_floating(int type) {
  return type == TensorProto::FLOAT || type == TensorProto::FLOAT16 || type == TensorProto::BFLOAT16 ||
         type == TensorProto::DOUBLE;
}

// Element i of little-endian bytes of `type`, as float or int64.
template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void decode_raw(const char* p, int64_t n, int type, OnnxTensor* t) {
  const size_t eb = element_bytes(type);
  if (t->is_float()) t->floats.resize(n);
  else t->ints.resize(n);
  for (int64_t i = 0; i < n; ++i, p += eb) {
    switch (type) {
      case TensorProto::FLOAT: t->floats[i] = load<float>(p); break;
      case TensorProto::DOUBLE: t->floats[i] = static_cast<float>(load<double>(p)); break;
      case TensorProto::FLOAT16: t->floats[i] = simt::detail::half_bits_to_float(load<uint16_t>(p)); break;
      case TensorProto::BFLOAT16: t->floats[i] = simt::detail::bf16_bits_to_float(load<uint16_t>(p)); break;
      case TensorProto::INT64: t->ints[i] = load<int64_t>(p); break;
      case TensorProto::UINT64: t->ints[i] = static_cast<int64_t>(load<uint64_t>(p)); break;
      case TensorProto::INT32: t->ints[i] = load<int32_t>(p); break;
      case TensorProto::UINT32: t->ints[i] = load<uint32_t>(p); break;
      case TensorProto::INT16: t->ints[i] = load<int16_t>(p); break;
      case TensorProto::UINT16: t->ints[i] = load<uint16_t>(p); break;
      case TensorProto::INT8: t->ints[i] = load<int8_t>(p); break;
      default: t->ints[i] = load<uint8_t>(p); break;  // UINT8, BOOL
    }
  }
}

// The typed repeated fields (what the TorchScript exporter writes for small Constant tensors). 16-bit floats
// and every integer type up to 32 bits travel in int32_data, as bit patterns or values.
bool decode_typed(const TensorProto& tp, int64_t n, OnnxTensor* t) {
  const int type = tp.data_type();
  auto sized = [&](int count) { return static_cast<int64_t>(count) == n; };
  if (type == TensorProto::FLOAT) {
    if (!sized(tp.float_data_size())) return false;
    t->floats.assign(tp.float_data().begin(), tp.float_data().end());
  } else if (type == TensorProto::DOUBLE) {
    if (!sized(tp.double_data_size())) return false;
    t->floats.assign(tp.double_data().begin(), tp.double_data().end());
  } else if (type == TensorProto::INT64) {
    if (!sized(tp.int64_data_size())) return false;
    t->ints.assign(tp.int64_data().begin(), tp.int64_data().end());
  } else if (type == TensorProto::UINT32 || type == TensorProto::UINT64) {
    if (!sized(tp.uint64_data_size())) return false;
    t->ints.assign(tp.uint64_data().begin(), tp.uint64_data().end());
  } else {
    if (!sized(tp.int32_data_size())) return false;
    for (int32_t v : tp.int32_data()) {
      const uint16_t bits = static_cast<uint16_t>(v);
      if (type == TensorProto::FLOAT16) t->floats.push_back(simt::detail::half_bits_to_float(bits));
      else if (type == TensorProto::BFLOAT16) t->floats.push_back(simt::detail::bf16_bits_to_float(bits));
      else t->ints.push_back(v);
    }
  }
  return true;
}

// The external file, checked to stay inside the model's directory (lexically and after symlinks).
std::string external_path(const TensorProto& tp, const TensorSource& src, const std::string& where,
                          int64_t* offset, int64_t* length) {
  std::string location;
  *offset = 0, *length = -1;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location") location = kv.value();
    try {
      if (kv.key() == "offset") *offset = std::stoll(kv.value());
      if (kv.key() == "length") *length = std::stoll(kv.value());
    } catch (const std::exception&) {
      raise(kExitUsage, "%s: external data %s '%s' is not a number; re-export the model", where.c_str(),
            kv.key().c_str(), kv.value().c_str());
    }
  }
  if (location.empty())
    raise(kExitUsage, "%s: external data without a 'location'; re-export the model", where.c_str());
  if (src.base_dir.empty())
    raise(kExitUsage, "%s: external data '%s' where none is allowed (a stored graph must be self-contained)",
          where.c_str(), location.c_str());
  const fs::path rel(location);
  bool escapes = rel.is_absolute() || location.find('\0') != std::string::npos;
  for (const auto& part : rel) escapes = escapes || part == "..";
  const fs::path full = fs::path(src.base_dir) / rel;
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(full, ec), dir = fs::weakly_canonical(src.base_dir, ec);
  const std::string real_s = real.string(), dir_s = (dir / "").string();
  escapes = escapes || real_s.compare(0, dir_s.size(), dir_s) != 0;
  if (escapes)
    raise(kExitUsage, "%s: external data location '%s' leaves the model's directory %s; only files beside the "
          "model (or below it) are read", where.c_str(), location.c_str(), src.base_dir.c_str());
  if (*offset < 0 || *length < -1)
    raise(kExitUsage, "%s: negative external data offset or length in '%s'", where.c_str(), location.c_str());
  return full.string();
}

void read_external(const TensorProto& tp, const TensorSource& src, const std::string& where, size_t bytes,
                   std::string* out) {
  int64_t offset, length;
  const std::string file = external_path(tp, src, where, &offset, &length);
  if (length >= 0 && static_cast<size_t>(length) != bytes)
    raise(kExitUsage, "%s: external data length %lld in '%s' does not match its shape (%zu bytes); re-export the "
          "model", where.c_str(), static_cast<long long>(length), file.c_str(), bytes);
  struct stat st;
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    raise(kExitUsage, "%s: external data file '%s' is missing; the exporter writes it beside the .onnx file "
          "(e.g. MODEL.onnx.data): copy it along with the model", where.c_str(), file.c_str());
  if (static_cast<uint64_t>(st.st_size) < static_cast<uint64_t>(offset) + bytes)
    raise(kExitUsage, "%s: external data file '%s' is too short (%lld bytes; the tensor needs %zu at offset "
          "%lld): copy the whole file again", where.c_str(), file.c_str(), static_cast<long long>(st.st_size),
          bytes, static_cast<long long>(offset));
  std::ifstream f(file, std::ios::binary);
  out->resize(bytes);
  f.seekg(offset);
  f.read(&(*out)[0], static_cast<std::streamsize>(bytes));
  if (!f) raise(kExitUsage, "%s: cannot read %zu bytes of '%s'", where.c_str(), bytes, file.c_str());
}

int64_t checked_numel(const TensorProto& tp, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : tp.dims()) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d))
      raise(kExitUsage, "%s: dimension %lld is negative or the tensor too large", where.c_str(),
            static_cast<long long>(d));
    n *= d;
  }
  return n;
}

}  // namespace

const char* onnx_type_name(int data_type) {
  if (!onnx::TensorProto_DataType_IsValid(data_type)) return "an unknown type";
  return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(data_type)).c_str();
}

OnnxTensor tensor_from_proto(const TensorProto& tp, const TensorSource& src, const std::string& where) {
  OnnxTensor t;
  t.name = tp.name();
  t.source_type = tp.data_type();
  if (element_bytes(tp.data_type()) == 0)
    raise(kExitUsage, "%s: element type %s (%d) is not supported (float32/16, bfloat16, double and integer "
          "tensors load)", where.c_str(), onnx_type_name(tp.data_type()), tp.data_type());
  t.kind = is_floating(tp.data_type()) ? OnnxTensor::Kind::kFloat : OnnxTensor::Kind::kInt;
  t.dims.assign(tp.dims().begin(), tp.dims().end());
  const int64_t n = checked_numel(tp, where);
  const size_t bytes = static_cast<size_t>(n) * element_bytes(tp.data_type());
  if (tp.data_location() == TensorProto::EXTERNAL) {
    std::string data;
    read_external(tp, src, where, bytes, &data);
    decode_raw(data.data(), n, tp.data_type(), &t);
  } else if (tp.has_raw_data()) {
    if (tp.raw_data().size() != bytes)
      raise(kExitUsage, "%s: %zu bytes of data for %lld elements of %s: the file is damaged; re-export it",
            where.c_str(), tp.raw_data().size(), static_cast<long long>(n), onnx_type_name(tp.data_type()));
    decode_raw(tp.raw_data().data(), n, tp.data_type(), &t);
  } else if (!decode_typed(tp, n, &t)) {
    raise(kExitUsage, "%s: the number of stored values does not match the shape (%lld elements): the file is "
          "damaged; re-export it", where.c_str(), static_cast<long long>(n));
  }
  return t;
}

void tensor_to_proto(const OnnxTensor& t, TensorProto* out) {
  out->set_name(t.name);
  for (int64_t d : t.dims) out->add_dims(d);
  if (t.is_float()) {
    out->set_data_type(TensorProto::FLOAT);
    out->set_raw_data(t.floats.data(), t.floats.size() * sizeof(float));
    return;
  }
  // Integers keep their type: ops type-check them (Dropout's training_mode is a bool, Reshape's shape int64).
  const int type = element_bytes(t.source_type) && !is_floating(t.source_type) ? t.source_type : TensorProto::INT64;
  const size_t eb = element_bytes(type);
  std::string raw(t.ints.size() * eb, '\0');
  for (size_t i = 0; i < t.ints.size(); ++i) std::memcpy(&raw[i * eb], &t.ints[i], eb);  // little-endian
  out->set_data_type(type);
  out->set_raw_data(raw);
}

}  // namespace cnn
