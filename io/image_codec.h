// JPEG/PNG decode and encode (libjpeg-turbo, libpng) and the resizes that fit a decoded image to the network
// input: plain resize, resize + center crop (eval) and random-resized-crop + horizontal flip (training).
// Images are uint8 HWC, RGB or gray. Decoders return an error string instead of throwing so callers can name
// the record (file, key) in their own message.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cnn {

struct Image {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // HWC
};

enum class ImageFormat { kUnknown, kJpeg, kPng };
ImageFormat sniff_image_format(const uint8_t* p, size_t n);

// Refuses headers that promise more pixels than this: a corrupt header must not become a huge allocation.
constexpr int64_t kMaxImagePixels = int64_t(1) << 27;

// channels: 0 = as stored (1 for gray, 3 otherwise; alpha is dropped), or 1 / 3 to convert.
// Returns "" or the decoder's complaint. A JPEG that ends early is an error (libjpeg only warns and fills
// gray); other libjpeg warnings, common in real photo collections, are tolerated.
std::string decode_image(const uint8_t* p, size_t n, int channels, Image* out,
                         int64_t max_pixels = kMaxImagePixels);
// Reads only the header: size and stored channel count (1 or 3).
std::string probe_image(const uint8_t* p, size_t n, int* height, int* width, int* channels);

// c: 1 gray, 3 RGB, 4 CMYK (libjpeg marks it with the Adobe marker, so the values read back as inverted ink,
// as in Photoshop's files).
std::string encode_jpeg(const uint8_t* hwc, int h, int w, int c, int quality = 90);
std::string encode_png(const uint8_t* hwc, int h, int w, int c);

// A source rectangle in pixel units (may be fractional).
struct CropRect {
  float y = 0, x = 0, h = 0, w = 0;
};

// Bilinear resample of `r` in src (sh x sw x c) to dst (dh x dw x c), mirrored left-right when flip.
void resample_bilinear(const uint8_t* src, int sh, int sw, int c, const CropRect& r, bool flip, uint8_t* dst,
                       int dh, int dw);

enum class ResizeMode {
  kNone,               // sizes must already match
  kResize,             // stretch the whole image to the target
  kCenterCrop,         // eval: the central crop_fraction of the shorter side, at the target aspect
  kRandomResizedCrop,  // training: random area/aspect crop (Inception style) + random flip
};

struct ImageTransform {
  ResizeMode mode = ResizeMode::kNone;
  int height = 0, width = 0;        // target; 0 = keep the source size (only with kNone)
  float crop_fraction = 0.875f;     // kCenterCrop: 224/256, the usual ImageNet eval crop
  float min_scale = 0.08f, max_scale = 1.0f;
  float min_ratio = 3.0f / 4.0f, max_ratio = 4.0f / 3.0f;
  bool flip = true;                 // kRandomResizedCrop only
  uint64_t seed = 0;
};

ResizeMode parse_resize_mode(const std::string& s);  // none|resize|center-crop|random-resized-crop

// The crop for one sample. Randomness is keyed by (seed, epoch, sample_id) only, so it does not depend on
// which rank or thread decodes the sample.
void plan_crop(const ImageTransform& t, int sh, int sw, int64_t epoch, int64_t sample_id, CropRect* r,
               bool* flip);

// Writes t.height x t.width x src.channels into dst.
void apply_transform(const ImageTransform& t, const Image& src, int64_t epoch, int64_t sample_id, uint8_t* dst);

}  // namespace cnn
