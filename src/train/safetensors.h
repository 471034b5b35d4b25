// The safetensors format (https://huggingface.co/docs/safetensors): 8 bytes little-endian header length N,
// N bytes of JSON {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [BEGIN, END]}, "__metadata__": {..}},
// then the raw little-endian tensor bytes, offsets relative to the end of the header. Read without any code
// execution (unlike a pickled .pth). F32, F16 and BF16 tensors become float32; tensors of the format's other
// types (integers such as a batch norm's num_batches_tracked, F64) are checked and left out; unknown types are
// refused.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cnn {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, as stored
};

struct SafetensorsFile {
  std::vector<NamedTensor> tensors;  // the floating-point ones, in header order
  std::vector<std::string> skipped;  // "NAME (DTYPE)" of the others
};

// Reads every tensor of a safetensors file. Throws Error(kExitUsage) naming the file and what is wrong
// (truncated, a malformed header, offsets outside the data or not matching shape x dtype, an unsupported dtype).
SafetensorsFile read_safetensors(const std::string& path);
// The same for the file's bytes; `origin` names them in messages.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& origin);
// Whether `path` starts as a safetensors file does (a header length within the file, then '{'): tells a
// safetensors file from other weight files without reading it.
bool is_safetensors(const std::string& path);

}  // namespace cnn
