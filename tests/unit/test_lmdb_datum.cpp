// Caffe Datum wire compatibility: bytes hand-encoded the way Caffe's tools write them (not via protobuf)
// must parse, and our serializer must produce exactly those bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/lmdb_datum.h"

namespace cnn {
namespace {

void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
}

// What convert_imageset writes for a raw image: fields 1,2,3 (shape), 4 (data), 5 (label), 7 (encoded=false),
// in field-number order.
std::string caffe_imageset_raw(int c, int h, int w, const std::string& chw, int label) {
  std::string s;
  s += '\x08', put_varint(s, c);
  s += '\x10', put_varint(s, h);
  s += '\x18', put_varint(s, w);
  s += '\x22', put_varint(s, chw.size()), s += chw;
  s += '\x28', put_varint(s, static_cast<uint64_t>(static_cast<int64_t>(label)));
  s += '\x38', s += '\x00';
  return s;
}

TEST(LmdbDatum, SerializeMatchesCaffeBytesExactly) {
  const int h = 2, w = 3, c = 3;
  std::vector<uint8_t> hwc(h * w * c);
  for (size_t i = 0; i < hwc.size(); ++i) hwc[i] = static_cast<uint8_t>(i * 7 + 1);
  // Caffe's planar BGR: plane 0 = B = HWC channel 2.
  std::string chw(h * w * c, '\0');
  for (int k = 0; k < c; ++k)
    for (int p = 0; p < h * w; ++p) chw[(2 - k) * h * w + p] = static_cast<char>(hwc[p * c + k]);
  EXPECT_EQ(serialize_datum(make_raw_datum(hwc.data(), h, w, c, 300)), caffe_imageset_raw(c, h, w, chw, 300));

  // Encoded (convert_imageset --encoded): data (4), label (5), encoded=true (7) only.
  std::string jpeg = "\xff\xd8\xff\xe0" "fakejpeg";
  std::string want;
  want += '\x22', put_varint(want, jpeg.size()), want += jpeg;
  want += '\x28', put_varint(want, 7);
  want += '\x38', want += '\x01';
  EXPECT_EQ(serialize_datum(make_encoded_datum(jpeg, 7)), want);
}

TEST(LmdbDatum, ParsesConvertMnistStyleBytes) {
  // convert_mnist_data writes shape, data and label, no encoded field.
  std::string pix(28 * 28, '\0');
  for (size_t i = 0; i < pix.size(); ++i) pix[i] = static_cast<char>(i % 251);
  std::string s;
  s += '\x08', put_varint(s, 1);
  s += '\x10', put_varint(s, 28);
  s += '\x18', put_varint(s, 28);
  s += '\x22', put_varint(s, pix.size()), s += pix;
  s += '\x28', put_varint(s, 9);
  Datum d;
  ASSERT_TRUE(parse_datum(s.data(), s.size(), &d));
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(d.height, 28);
  EXPECT_EQ(d.width, 28);
  EXPECT_EQ(d.data, pix);
  EXPECT_EQ(d.label, 9);
  EXPECT_FALSE(d.encoded);
  DatumHeader hd;
  ASSERT_EQ(scan_datum(s.data(), s.size(), &hd), "");
  EXPECT_EQ(hd.channels, 1);
  EXPECT_EQ(hd.height, 28);
  EXPECT_EQ(hd.data_bytes, pix.size());
  EXPECT_EQ(std::memcmp(hd.data, pix.data(), pix.size()), 0);
  EXPECT_EQ(hd.label, 9);
  EXPECT_TRUE(hd.has_label);
  EXPECT_EQ(check_raw_datum(hd), "");
}

TEST(LmdbDatum, ScanHandlesFloatDataPackedAndUnpackedAndUnknownFields) {
  std::string s;
  s += '\x08', put_varint(s, 1);
  s += '\x10', put_varint(s, 1);
  s += '\x18', put_varint(s, 3);
  const float f[3] = {1.0f, 2.0f, 255.0f};
  s += '\x35', s.append(reinterpret_cast<const char*>(&f[0]), 4);  // unpacked (proto2 default)
  s += '\x32', put_varint(s, 8), s.append(reinterpret_cast<const char*>(&f[1]), 8);  // packed
  s += '\x48', put_varint(s, 12345);                                 // unknown field 9, varint
  s += '\x28', put_varint(s, static_cast<uint64_t>(int64_t(-2)));   // negative label: 10-byte varint
  DatumHeader h;
  ASSERT_EQ(scan_datum(s.data(), s.size(), &h), "");
  EXPECT_EQ(h.float_count, 3u);
  EXPECT_EQ(h.label, -2);
  EXPECT_EQ(check_raw_datum(h), "");
  Datum d;
  ASSERT_TRUE(parse_datum(s.data(), s.size(), &d));
  ASSERT_EQ(d.float_data.size(), 3u);
  EXPECT_EQ(d.float_data[2], 255.0f);
  EXPECT_EQ(d.label, -2);
  uint8_t u[3];
  EXPECT_TRUE(float_datum_to_u8(d.float_data.data(), 3, u));
  EXPECT_EQ(u[2], 255);
  const float bad[2] = {0.5f, 3.0f};
  EXPECT_FALSE(float_datum_to_u8(bad, 2, u));
}

TEST(LmdbDatum, RejectsMalformedBytes) {
  DatumHeader h;
  Datum d;
  const std::string truncated_len = std::string("\x22\x10", 2) + "abc";
  EXPECT_NE(scan_datum(truncated_len.data(), truncated_len.size(), &h), "");
  EXPECT_FALSE(parse_datum(truncated_len.data(), truncated_len.size(), &d));
  const std::string text = "this is not a datum";
  EXPECT_FALSE(scan_datum(text.data(), text.size(), &h).empty() && parse_datum(text.data(), text.size(), &d));
  const std::string zero_tag("\x00\x01", 2);
  EXPECT_NE(scan_datum(zero_tag.data(), zero_tag.size(), &h), "");
  EXPECT_FALSE(parse_datum(zero_tag.data(), zero_tag.size(), &d));
}

TEST(LmdbDatum, CheckRawDatumNamesTheMismatch) {
  DatumHeader h;
  h.channels = 3, h.height = 4, h.width = 4, h.data_bytes = 47;
  EXPECT_NE(check_raw_datum(h).find("47 bytes but channels*height*width = 3*4*4 = 48"), std::string::npos);
  h.channels = 0;
  EXPECT_NE(check_raw_datum(h).find("not all positive"), std::string::npos);
}

TEST(LmdbDatum, ChwHwcRoundTripAndKeys) {
  for (int c : {1, 2, 3, 4}) {
    std::vector<uint8_t> hwc(5 * 3 * c), chw(hwc.size()), back(hwc.size());
    for (size_t i = 0; i < hwc.size(); ++i) hwc[i] = static_cast<uint8_t>(i * 13);
    hwc_to_datum_chw(hwc.data(), 5, 3, c, chw.data());
    datum_chw_to_hwc(chw.data(), c, 5, 3, back.data());
    EXPECT_EQ(hwc, back) << c << " channels";
  }
  EXPECT_EQ(lmdb_record_key(42, "cat/1.jpg"), "00000042_cat/1.jpg");
}

}  // namespace
}  // namespace cnn
