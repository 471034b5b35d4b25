#include "io/image_codec.h"

#include <cstdio>
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdlib>
#include <cstring>

#include "src/base/error.h"

namespace cnn {

ImageFormat sniff_image_format(const uint8_t* p, size_t n) {
  if (n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return ImageFormat::kJpeg;
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (n >= 8 && std::memcmp(p, png_sig, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

namespace {

// libjpeg reports fatal errors through error_exit, which must not return: jump back to the decode call.
struct JpegErr {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
  bool truncated;
};

void jpeg_on_error(j_common_ptr ci) {
  JpegErr* e = reinterpret_cast<JpegErr*>(ci->err);
  (*ci->err->format_message)(ci, e->msg);
  longjmp(e->jump, 1);
}

void jpeg_on_message(j_common_ptr ci, int level) {
  JpegErr* e = reinterpret_cast<JpegErr*>(ci->err);
  if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF) e->truncated = true;
}

// Photoshop (Adobe marker) stores CMYK inverted, 255 = no ink; others store plain ink amounts.
void cmyk_to_rgb_or_gray(const uint8_t* cmyk, unsigned width, bool inverted, int c, uint8_t* out) {
  for (unsigned x = 0; x < width; ++x) {
    int k = inverted ? cmyk[4 * x + 3] : 255 - cmyk[4 * x + 3];
    int rgb[3];
    for (int i = 0; i < 3; ++i) rgb[i] = (inverted ? cmyk[4 * x + i] : 255 - cmyk[4 * x + i]) * k / 255;
    if (c == 3) {
      for (int i = 0; i < 3; ++i) out[3 * x + i] = static_cast<uint8_t>(rgb[i]);
    } else {
      out[x] = static_cast<uint8_t>((299 * rgb[0] + 587 * rgb[1] + 114 * rgb[2] + 500) / 1000);
    }
  }
}

// All C++ objects live in the caller; between setjmp and a possible longjmp only C state changes.
bool jpeg_decode(const uint8_t* p, size_t n, int want_c, bool header_only, int64_t max_pixels, Image* out,
                 char* msg) {
  jpeg_decompress_struct ci;
  JpegErr err;
  ci.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.emit_message = jpeg_on_message;
  err.truncated = false;
  err.msg[0] = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&ci);
    std::snprintf(msg, JMSG_LENGTH_MAX, "%s", err.msg);
    return false;
  }
  jpeg_create_decompress(&ci);
  jpeg_mem_src(&ci, p, static_cast<unsigned long>(n));
  jpeg_read_header(&ci, TRUE);
  const int stored_c = ci.num_components == 1 ? 1 : 3;
  const int c = want_c ? want_c : stored_c;
  out->height = static_cast<int>(ci.image_height);
  out->width = static_cast<int>(ci.image_width);
  out->channels = stored_c;
  if (header_only) {
    jpeg_destroy_decompress(&ci);
    return true;
  }
  if (static_cast<int64_t>(ci.image_height) * ci.image_width > max_pixels) {
    jpeg_destroy_decompress(&ci);
    std::snprintf(msg, JMSG_LENGTH_MAX, "image is %ux%u, over the %lld-pixel limit", ci.image_width,
                  ci.image_height, static_cast<long long>(max_pixels));
    return false;
  }
  // libjpeg converts YCbCr/gray to RGB/gray itself but not CMYK (print-oriented files, a few dozen in
  // ImageNet): take CMYK rows and convert here.
  const bool cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
  ci.out_color_space = cmyk ? JCS_CMYK : c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&ci);
  out->channels = c;
  out->pixels.resize(static_cast<size_t>(out->height) * out->width * c);
  const size_t stride = static_cast<size_t>(out->width) * c;
  JSAMPARRAY cmyk_row = cmyk ? (*ci.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&ci), JPOOL_IMAGE,
                                                      ci.output_width * 4, 1)
                             : nullptr;
  while (ci.output_scanline < ci.output_height) {
    JSAMPROW row = out->pixels.data() + ci.output_scanline * stride;
    if (!cmyk) {
      jpeg_read_scanlines(&ci, &row, 1);
      continue;
    }
    jpeg_read_scanlines(&ci, cmyk_row, 1);
    cmyk_to_rgb_or_gray(cmyk_row[0], ci.output_width, ci.saw_Adobe_marker, c, row);
  }
  jpeg_finish_decompress(&ci);
  jpeg_destroy_decompress(&ci);
  if (err.truncated) {
    std::snprintf(msg, JMSG_LENGTH_MAX, "JPEG data ends early (truncated or corrupt file)");
    return false;
  }
  return true;
}

std::string png_decode(const uint8_t* p, size_t n, int want_c, bool header_only, int64_t max_pixels,
                       Image* out) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, p, n)) return img.message;
  const int stored_c = (img.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
  const int c = want_c ? want_c : stored_c;
  out->height = static_cast<int>(img.height);
  out->width = static_cast<int>(img.width);
  out->channels = header_only ? stored_c : c;
  if (header_only) {
    png_image_free(&img);
    return "";
  }
  if (static_cast<int64_t>(img.height) * img.width > max_pixels) {
    png_image_free(&img);
    return strprintf("image is %ux%u, over the %lld-pixel limit", img.width, img.height,
                     static_cast<long long>(max_pixels));
  }
  // Without an alpha channel in the output format libpng composites transparent pixels onto black.
  img.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  out->pixels.resize(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, out->pixels.data(), 0, nullptr)) {
    std::string m = img.message;
    png_image_free(&img);
    return m;
  }
  return "";
}

}  // namespace

std::string decode_image(const uint8_t* p, size_t n, int channels, Image* out, int64_t max_pixels) {
  if (channels != 0 && channels != 1 && channels != 3) return strprintf("cannot decode to %d channels", channels);
  switch (sniff_image_format(p, n)) {
    case ImageFormat::kJpeg: {
      char msg[JMSG_LENGTH_MAX];
      return jpeg_decode(p, n, channels, false, max_pixels, out, msg) ? "" : strprintf("bad JPEG: %s", msg);
    }
    case ImageFormat::kPng: {
      std::string m = png_decode(p, n, channels, false, max_pixels, out);
      return m.empty() ? m : "bad PNG: " + m;
    }
    default: return "not a JPEG or PNG image (unknown signature)";
  }
}

std::string probe_image(const uint8_t* p, size_t n, int* height, int* width, int* channels) {
  Image img;
  std::string m;
  switch (sniff_image_format(p, n)) {
    case ImageFormat::kJpeg: {
      char msg[JMSG_LENGTH_MAX];
      if (!jpeg_decode(p, n, 0, true, 0, &img, msg)) m = strprintf("bad JPEG: %s", msg);
      break;
    }
    case ImageFormat::kPng: m = png_decode(p, n, 0, true, 0, &img); break;
    default: m = "not a JPEG or PNG image (unknown signature)";
  }
  *height = img.height;
  *width = img.width;
  *channels = img.channels;
  return m;
}

std::string encode_jpeg(const uint8_t* hwc, int h, int w, int c, int quality) {
  jpeg_compress_struct ci;
  jpeg_error_mgr jerr;
  ci.err = jpeg_std_error(&jerr);  // encoding our own buffers cannot hit the error path short of OOM
  jpeg_create_compress(&ci);
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  jpeg_mem_dest(&ci, &buf, &len);
  ci.image_width = w;
  ci.image_height = h;
  ci.input_components = c;
  ci.in_color_space = c == 1 ? JCS_GRAYSCALE : c == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, quality, TRUE);
  jpeg_start_compress(&ci, TRUE);
  while (ci.next_scanline < ci.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(hwc) + static_cast<size_t>(ci.next_scanline) * w * c;
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  std::string s(reinterpret_cast<char*>(buf), len);
  jpeg_destroy_compress(&ci);
  std::free(buf);
  return s;
}

std::string encode_png(const uint8_t* hwc, int h, int w, int c) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = w;
  img.height = h;
  img.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t len = 0;
  if (!png_image_write_get_memory_size(img, len, 0, hwc, 0, nullptr))
    raise(kExitFailure, "PNG encode failed: %s", img.message);
  std::string s(len, '\0');
  if (!png_image_write_to_memory(&img, &s[0], &len, 0, hwc, 0, nullptr))
    raise(kExitFailure, "PNG encode failed: %s", img.message);
  s.resize(len);
  return s;
}

void resample_bilinear(const uint8_t* src, int sh, int sw, int c, const CropRect& r, bool flip, uint8_t* dst,
                       int dh, int dw) {
  // Half-pixel centres: dst pixel i samples the source at r.x + (i + 0.5) * r.w / dw - 0.5.
  std::vector<int> x0(dw), x1(dw);
  std::vector<float> fx(dw);
  const float sx = r.w / dw, sy = r.h / dh;
  for (int i = 0; i < dw; ++i) {
    float x = r.x + (i + 0.5f) * sx - 0.5f;
    x = std::min(std::max(x, 0.0f), static_cast<float>(sw - 1));
    int xi = static_cast<int>(x);
    int j = flip ? dw - 1 - i : i;
    x0[j] = xi * c;
    x1[j] = std::min(xi + 1, sw - 1) * c;
    fx[j] = x - xi;
  }
  for (int i = 0; i < dh; ++i) {
    float y = r.y + (i + 0.5f) * sy - 0.5f;
    y = std::min(std::max(y, 0.0f), static_cast<float>(sh - 1));
    int yi = static_cast<int>(y);
    float wy = y - yi;
    const uint8_t* a = src + static_cast<size_t>(yi) * sw * c;
    const uint8_t* b = src + static_cast<size_t>(std::min(yi + 1, sh - 1)) * sw * c;
    uint8_t* o = dst + static_cast<size_t>(i) * dw * c;
    for (int j = 0; j < dw; ++j) {
      float wx = fx[j];
      for (int k = 0; k < c; ++k) {
        float top = a[x0[j] + k] + wx * (a[x1[j] + k] - a[x0[j] + k]);
        float bot = b[x0[j] + k] + wx * (b[x1[j] + k] - b[x0[j] + k]);
        o[j * c + k] = static_cast<uint8_t>(top + wy * (bot - top) + 0.5f);
      }
    }
  }
}

ResizeMode parse_resize_mode(const std::string& s) {
  if (s == "none") return ResizeMode::kNone;
  if (s == "resize") return ResizeMode::kResize;
  if (s == "center-crop") return ResizeMode::kCenterCrop;
  if (s == "random-resized-crop") return ResizeMode::kRandomResizedCrop;
  raise(kExitUsage, "unknown resize mode '%s'; use none, resize, center-crop or random-resized-crop", s.c_str());
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A tiny counter-based stream: cheap to create per sample, identical on every rank.
struct SampleRng {
  uint64_t state;
  SampleRng(uint64_t seed, int64_t epoch, int64_t id)
      : state(splitmix64(splitmix64(seed ^ 0x6C6D6462ull) ^ static_cast<uint64_t>(epoch)) ^
              static_cast<uint64_t>(id)) {}
  float uniform() {  // [0, 1)
    state = splitmix64(state);
    return (state >> 40) * (1.0f / 16777216.0f);
  }
};

void center_rect(float sh, float sw, float aspect, float fraction, CropRect* r) {
  // The largest rect of the target aspect inside the image, shrunk to `fraction` of it.
  float h = sh, w = sh * aspect;
  if (w > sw) {
    w = sw;
    h = sw / aspect;
  }
  r->h = h * fraction;
  r->w = w * fraction;
  r->y = (sh - r->h) * 0.5f;
  r->x = (sw - r->w) * 0.5f;
}

}  // namespace

void plan_crop(const ImageTransform& t, int sh, int sw, int64_t epoch, int64_t sample_id, CropRect* r,
               bool* flip) {
  *flip = false;
  *r = CropRect{0, 0, static_cast<float>(sh), static_cast<float>(sw)};
  const float aspect = t.height > 0 ? static_cast<float>(t.width) / t.height : 1.0f;
  switch (t.mode) {
    case ResizeMode::kNone:
    case ResizeMode::kResize: return;
    case ResizeMode::kCenterCrop: center_rect(sh, sw, aspect, t.crop_fraction, r); return;
    case ResizeMode::kRandomResizedCrop: break;
  }
  SampleRng rng(t.seed, epoch, sample_id);
  const float area = static_cast<float>(sh) * sw;
  const float log_lo = std::log(t.min_ratio), log_hi = std::log(t.max_ratio);
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    float a = area * (t.min_scale + rng.uniform() * (t.max_scale - t.min_scale));
    float ratio = std::exp(log_lo + rng.uniform() * (log_hi - log_lo));
    float w = std::round(std::sqrt(a * ratio)), h = std::round(std::sqrt(a / ratio));
    if (w >= 1 && h >= 1 && w <= sw && h <= sh) {
      r->h = h;
      r->w = w;
      r->y = std::floor(rng.uniform() * (sh - h + 1));
      r->x = std::floor(rng.uniform() * (sw - w + 1));
      found = true;
    }
  }
  if (!found) center_rect(sh, sw, aspect, 1.0f, r);  // extreme aspect images: fall back to the full centre
  *flip = t.flip && rng.uniform() < 0.5f;
}

void apply_transform(const ImageTransform& t, const Image& src, int64_t epoch, int64_t sample_id, uint8_t* dst) {
  const int dh = t.height > 0 ? t.height : src.height, dw = t.width > 0 ? t.width : src.width;
  CropRect r;
  bool flip;
  plan_crop(t, src.height, src.width, epoch, sample_id, &r, &flip);
  if (!flip && dh == src.height && dw == src.width && r.h == src.height && r.w == src.width) {
    std::memcpy(dst, src.pixels.data(), src.pixels.size());
    return;
  }
  resample_bilinear(src.pixels.data(), src.height, src.width, src.channels, r, flip, dst, dh, dw);
}

}  // namespace cnn
