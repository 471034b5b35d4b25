// Private to src/model/onnx: the ONNX project's protobuf messages (Debian's libonnx-dev ships them compiled
// for ONNX_ML, namespace onnx) and the conversions shared by the reader and the writer.
#pragma once
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif
#include <onnx/onnx_pb.h>

#include <string>

#include "src/model/onnx/onnx_model.h"

namespace cnn {

// Where a tensor's external data may be (the model's directory; "" = nowhere) and how to name it in messages.
struct TensorSource {
  std::string origin;    // the model file
  std::string base_dir;  // external data is looked up here
};

// `where` prefixes messages ("FILE: initializer 'W'").
OnnxTensor tensor_from_proto(const onnx::TensorProto& t, const TensorSource& src, const std::string& where);
void tensor_to_proto(const OnnxTensor& t, onnx::TensorProto* out);
const char* onnx_type_name(int data_type);

}  // namespace cnn
