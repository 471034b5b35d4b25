// Caffe `Datum` records as stored in Caffe LMDBs: a plain C++ mirror of the message (so only
// io/lmdb_datum.cpp sees protobuf types), protobuf parse/serialize, a header scan used while indexing, and the
// pixel layout conversions between Caffe's CHW/BGR and cnntrain's HWC/RGB.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cnn {

struct Datum {
  int32_t channels = 0, height = 0, width = 0;
  std::string data;               // raw: C*H*W bytes, CHW, BGR when C == 3; encoded: the JPEG/PNG file
  std::vector<float> float_data;  // raw alternative to `data` (Caffe writes one or the other)
  int32_t label = 0;
  bool has_label = false;
  bool encoded = false;
};

// Parses with protobuf. Returns false for bytes that are not a Datum; never throws.
bool parse_datum(const void* bytes, size_t n, Datum* out);
std::string serialize_datum(const Datum& d);

// What indexing needs from each record. The open-time pass visits every record of a possibly huge database,
// so it walks the wire format itself and skips the pixel bytes instead of copying them through protobuf:
// with LMDB's memory map only the pages holding the small fields are touched.
struct DatumHeader {
  int32_t channels = 0, height = 0, width = 0;
  int32_t label = 0;
  bool has_label = false;
  bool encoded = false;
  uint64_t data_bytes = 0;   // length of `data` (last occurrence, as protobuf keeps it)
  uint64_t float_count = 0;  // number of float_data values
  const uint8_t* data = nullptr;  // into the scanned bytes
};

// Returns "" for a well-formed Datum, otherwise what is malformed. Reads only inside [bytes, bytes+n).
std::string scan_datum(const void* bytes, size_t n, DatumHeader* out);

// For a raw record: "" when channels/height/width are positive and the pixel payload has C*H*W values,
// otherwise the mismatch in words.
std::string check_raw_datum(const DatumHeader& h);

// Caffe CHW (BGR when 3 channels) -> HWC (RGB) and back; the round trip is exact.
void datum_chw_to_hwc(const uint8_t* chw, int c, int h, int w, uint8_t* hwc);
void hwc_to_datum_chw(const uint8_t* hwc, int h, int w, int c, uint8_t* chw);
// float_data -> uint8 in the same CHW order; false when a value is not an integer in 0..255.
bool float_datum_to_u8(const float* f, size_t n, uint8_t* out);

// A raw record from an HWC/RGB image, laid out as Caffe's convert_imageset writes it.
Datum make_raw_datum(const uint8_t* hwc, int h, int w, int c, int32_t label);
// An encoded record (convert_imageset --encoded): the file bytes as they are, shape fields left 0.
Datum make_encoded_datum(std::string file_bytes, int32_t label);

// Caffe's key scheme: "%08lld_<name>", which sorts in write order.
std::string lmdb_record_key(int64_t index, const std::string& name);

}  // namespace cnn
