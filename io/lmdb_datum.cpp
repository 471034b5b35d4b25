#include "io/lmdb_datum.h"

#include <cmath>
#include <cstring>

#include "io/datum.pb.h"
#include "src/base/error.h"

namespace cnn {

bool parse_datum(const void* bytes, size_t n, Datum* out) {
  if (n > static_cast<size_t>(INT32_MAX)) return false;  // protobuf's own limit for ParseFromArray
  caffe::Datum m;
  if (!m.ParseFromArray(bytes, static_cast<int>(n))) return false;
  out->channels = m.channels();
  out->height = m.height();
  out->width = m.width();
  out->data = m.data();
  out->float_data.assign(m.float_data().begin(), m.float_data().end());
  out->label = m.label();
  out->has_label = m.has_label();
  out->encoded = m.encoded();
  return true;
}

std::string serialize_datum(const Datum& d) {
  // Field for field what Caffe's convert_imageset writes, so the bytes are identical: raw records carry the
  // shape and an explicit encoded=false (CVMatToDatum sets it); encoded ones only data, label, encoded=true.
  caffe::Datum m;
  if (!d.encoded) {
    m.set_channels(d.channels);
    m.set_height(d.height);
    m.set_width(d.width);
  }
  if (!d.data.empty() || d.float_data.empty()) m.set_data(d.data);
  m.set_label(d.label);
  for (float f : d.float_data) m.add_float_data(f);
  m.set_encoded(d.encoded);
  std::string s;
  m.SerializeToString(&s);
  return s;
}

namespace {

// The wire format, just enough to mirror how protobuf reads a Datum: known fields with an unexpected wire
// type and unknown fields are skipped, the last occurrence of a singular field wins, float_data may be
// packed or not.
class WireReader {
 public:
  WireReader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  bool done() const { return p_ == end_; }
  const char* error() const { return error_; }

  bool varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) return fail("truncated varint");
      uint8_t b = *p_++;
      if (shift < 64) r |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return true;
      }
    }
    return fail("varint longer than 10 bytes");
  }
  // Tags are varints of at most 5 bytes (protobuf rejects longer ones); the low 32 bits count.
  bool tag(uint32_t* t) {
    uint32_t r = 0;
    for (int i = 0; i < 5; ++i) {
      if (p_ == end_) return fail("truncated tag");
      uint8_t b = *p_++;
      r |= static_cast<uint32_t>(b & 0x7f) << (7 * i);
      if (!(b & 0x80)) {
        *t = r;
        return true;
      }
    }
    return fail("tag longer than 5 bytes");
  }
  bool bytes(const uint8_t** data, uint64_t* len) {
    if (!varint(len)) return false;
    if (*len > static_cast<uint64_t>(end_ - p_)) return fail("length-delimited field runs past the end");
    *data = p_;
    p_ += *len;
    return true;
  }
  bool fixed32(uint32_t* v) {
    if (end_ - p_ < 4) return fail("truncated fixed32");
    std::memcpy(v, p_, 4);
    p_ += 4;
    return true;
  }
  bool skip(uint32_t wire_type, uint32_t field) {
    uint64_t v;
    const uint8_t* d;
    switch (wire_type) {
      case 0: return varint(&v);
      case 1:
        if (end_ - p_ < 8) return fail("truncated fixed64");
        p_ += 8;
        return true;
      case 2: return bytes(&d, &v);
      case 3: return skip_group(field);
      case 5: {
        uint32_t f;
        return fixed32(&f);
      }
      default: return fail("invalid wire type");
    }
  }
  bool fail(const char* why) {
    error_ = why;
    return false;
  }

 private:
  // Groups are deprecated but legal as unknown fields; iterate instead of recursing so hostile nesting cannot
  // exhaust the stack.
  bool skip_group(uint32_t field) {
    std::vector<uint32_t> open{field};
    while (!open.empty()) {
      uint32_t tag;
      if (!this->tag(&tag)) return false;
      const uint32_t wt = tag & 7, f = tag >> 3;
      if (f == 0) return fail("invalid field number 0");
      if (wt == 3) {
        if (open.size() > 100) return fail("groups nested too deep");
        open.push_back(f);
      } else if (wt == 4) {
        if (open.back() != f) return fail("mismatched end-group");
        open.pop_back();
      } else if (!skip(wt, f)) {
        return false;
      }
    }
    return true;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const char* error_ = "";
};

}  // namespace

std::string scan_datum(const void* bytes, size_t n, DatumHeader* out) {
  *out = DatumHeader();
  WireReader r(static_cast<const uint8_t*>(bytes), n);
  while (!r.done()) {
    uint32_t tag;
    uint64_t v = 0;
    if (!r.tag(&tag)) return r.error();
    const uint32_t wt = tag & 7, field = tag >> 3;
    if (field == 0) return "invalid field number 0";
    if (wt == 4) return "end-group without start-group";
    bool ok = true;
    if (field >= 1 && field <= 3 && wt == 0) {
      ok = r.varint(&v);
      int32_t x = static_cast<int32_t>(static_cast<uint32_t>(v));  // protobuf's int32 truncation
      (field == 1 ? out->channels : field == 2 ? out->height : out->width) = x;
    } else if (field == 4 && wt == 2) {
      ok = r.bytes(&out->data, &out->data_bytes);
    } else if (field == 5 && wt == 0) {
      ok = r.varint(&v);
      out->label = static_cast<int32_t>(static_cast<uint32_t>(v));
      out->has_label = true;
    } else if (field == 6 && wt == 5) {
      uint32_t f;
      ok = r.fixed32(&f);
      out->float_count++;
    } else if (field == 6 && wt == 2) {
      const uint8_t* d;
      uint64_t len = 0;
      ok = r.bytes(&d, &len);
      if (ok && len % 4 != 0) return "packed float_data length is not a multiple of 4";
      out->float_count += len / 4;
    } else if (field == 7 && wt == 0) {
      ok = r.varint(&v);
      out->encoded = v != 0;
    } else {
      ok = r.skip(wt, field);
    }
    if (!ok) return r.error();
  }
  return "";
}

std::string check_raw_datum(const DatumHeader& h) {
  if (h.channels <= 0 || h.height <= 0 || h.width <= 0)
    return strprintf("channels/height/width are %d/%d/%d, not all positive", h.channels, h.height, h.width);
  uint64_t want = static_cast<uint64_t>(h.channels) * h.height * h.width;
  if (h.data_bytes > 0 && h.data_bytes != want)
    return strprintf("data has %llu bytes but channels*height*width = %d*%d*%d = %llu",
                     static_cast<unsigned long long>(h.data_bytes), h.channels, h.height, h.width,
                     static_cast<unsigned long long>(want));
  if (h.data_bytes == 0 && h.float_count != want)
    return strprintf("float_data has %llu values but channels*height*width = %d*%d*%d = %llu",
                     static_cast<unsigned long long>(h.float_count), h.channels, h.height, h.width,
                     static_cast<unsigned long long>(want));
  return "";
}

// Channel c of HWC comes from plane (C-1-c) of CHW when the record is 3-channel BGR.
static inline int caffe_plane(int c, int channels) { return channels == 3 ? 2 - c : c; }

void datum_chw_to_hwc(const uint8_t* chw, int c, int h, int w, uint8_t* hwc) {
  const size_t plane = static_cast<size_t>(h) * w;
  for (int k = 0; k < c; ++k) {
    const uint8_t* src = chw + caffe_plane(k, c) * plane;
    for (size_t i = 0; i < plane; ++i) hwc[i * c + k] = src[i];
  }
}

void hwc_to_datum_chw(const uint8_t* hwc, int h, int w, int c, uint8_t* chw) {
  const size_t plane = static_cast<size_t>(h) * w;
  for (int k = 0; k < c; ++k) {
    uint8_t* dst = chw + caffe_plane(k, c) * plane;
    for (size_t i = 0; i < plane; ++i) dst[i] = hwc[i * c + k];
  }
}

bool float_datum_to_u8(const float* f, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) {
    float v = f[i];
    if (!(v >= 0.f && v <= 255.f) || v != std::floor(v)) return false;
    out[i] = static_cast<uint8_t>(v);
  }
  return true;
}

Datum make_raw_datum(const uint8_t* hwc, int h, int w, int c, int32_t label) {
  Datum d;
  d.channels = c;
  d.height = h;
  d.width = w;
  d.data.resize(static_cast<size_t>(h) * w * c);
  hwc_to_datum_chw(hwc, h, w, c, reinterpret_cast<uint8_t*>(&d.data[0]));
  d.label = label;
  d.has_label = true;
  return d;
}

Datum make_encoded_datum(std::string file_bytes, int32_t label) {
  Datum d;
  d.data = std::move(file_bytes);
  d.label = label;
  d.has_label = true;
  d.encoded = true;
  return d;
}

std::string lmdb_record_key(int64_t index, const std::string& name) {
  return strprintf("%08lld_%s", static_cast<long long>(index), name.c_str());
}

}  // namespace cnn
