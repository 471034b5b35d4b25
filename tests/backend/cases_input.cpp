// Sweep cases: the device input path (upload_images: uint8 pixels with crop, flip, rotation, colour jitter,
// normalisation and erasing done where the backend computes) and the layer label of the vendor-library fallback log.
#include <cmath>

#include "tests/backend/oracles.h"
#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  CounterRng rng(seed, 3);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng.next() >> 56);
  return v;
}

const int kH = 7, kW = 6, kC = 3;
const std::vector<float> kMean{120.f, 3.5f, 250.f}, kStd{60.f, 0.7f, 2.f};
// Normalised values up to ~360, computed in float (e.g. as p * (1/std) - mean/std): a few roundings of those
// from the exact value.
constexpr Tol kImageTol{1e-6, 1e-6};
// Rotation and jitter: a dozen float roundings of values up to 255 before the division by std (0.7 at least),
// i.e. within 4e-4 grey levels; a wrong weight or blend is off by far more.
constexpr Tol kRotateJitterTol{5e-4, 1e-5};

// One batch of upload_images' host inputs.
struct Batch {
  int n;
  bool eval;
  std::vector<uint8_t> pixels;
  std::vector<ImageAug> aug;
  std::vector<int32_t> labels;
  std::vector<int64_t> ids;
  ImageBatch batch() const {
    ImageBatch b;
    b.n = n, b.h = kH, b.w = kW, b.c = kC;
    b.pixels = pixels.data(), b.mean = kMean.data(), b.std = kStd.data(), b.labels = labels.data();
    b.aug = eval ? nullptr : aug.data();
    b.ids = eval ? nullptr : ids.data();
    return b;
  }
};

// With rotate_jitter, sample i also turns by an angle of every quadrant and of none (and by exactly a quarter
// turn) and jitters brightness, contrast and saturation (each off for some samples, strong enough to clamp for
// others).
std::vector<Batch> batches(bool rotate_jitter) {
  std::vector<Batch> v;
  uint64_t seed = rotate_jitter ? 950 : 900;
  const double degrees[] = {0, 17, -40, 90, 133, -171, 61, -5, 0};
  for (int n : {5, 3, 9, 2}) {
    Batch b{n, n == 2, random_bytes(static_cast<size_t>(n) * kH * kW * kC, ++seed), std::vector<ImageAug>(n),
            std::vector<int32_t>(n), std::vector<int64_t>(n)};
    for (int i = 0; i < n; ++i) {
      ImageAug& a = b.aug[i];
      a.dy = i % 5 - 2;
      a.dx = 2 - i % 4;
      a.flip = i % 2;
      if (i % 3 == 0) a.erase_y = 1, a.erase_x = 2, a.erase_h = 3, a.erase_w = 2;
      if (rotate_jitter) {
        const double rad = degrees[i] * M_PI / 180;
        a.rot_cos = static_cast<float>(std::cos(rad)), a.rot_sin = static_cast<float>(std::sin(rad));
        a.brightness = i % 4 == 1 ? 1.f : 0.55f + 0.2f * i;
        a.contrast = i % 3 == 2 ? 1.f : 1.6f - 0.15f * i;
        a.saturation = i % 5 == 3 ? 1.f : 0.1f + 0.3f * i;
      }
      b.labels[i] = 10 * n + i;
      b.ids[i] = 1000 * n + i;
    }
    v.push_back(std::move(b));
  }
  return v;
}

}  // namespace

CNN_SWEEP_CASES(input) {
  // 7x6x3 images; batches of 5, 3 and 9 in a row (the CUDA backend's two staging slots alternate and grow),
  // every kind of augmentation draw (without and with rotation and jitter), then an evaluation batch without
  // augmentation or ids. The fast CPU
  // backend runs the reference kernel, so the expected images come from tests/backend/oracles.h.
  for (const bool rotate_jitter : {false, true}) {
    const char* what = rotate_jitter ? "7x6x3 rotated, jittered, batches 5, 3, 9, 2" : "7x6x3, batches 5, 3, 9, 2";
    const Tol tol = rotate_jitter ? kRotateJitterTol : kImageTol;
    add_case({"upload_images", what, {}, [=](Run& r) {
      const int most = 9;
      float* d_x = r.garbage(static_cast<size_t>(most) * kH * kW * kC);
      int32_t* d_labels = r.upload(std::vector<int32_t>(most, -1));
      int64_t* d_ids = r.upload(std::vector<int64_t>(most, -1));
      for (const Batch& in : batches(rotate_jitter)) {
        const ImageBatch b = in.batch();
        const bool eval = !b.aug;
        r.be.upload_images(b, d_x, d_labels, eval ? nullptr : d_ids);
        const std::string tag = " of batch " + std::to_string(b.n);
        r.output("images" + tag, d_x, static_cast<size_t>(b.n) * kH * kW * kC, tol);
        r.output("labels" + tag, d_labels, b.n);
        if (!eval) {
          const auto got = r.download(d_ids, b.n);
          r.output_host("ids" + tag, std::vector<double>(got.begin(), got.end()), kExact);
        }
      }
    }, [=](Run& r) {
      for (const Batch& in : batches(rotate_jitter)) {
        const ImageBatch b = in.batch();
        const std::string tag = " of batch " + std::to_string(b.n);
        r.output_host("images" + tag, oracle::prepare_images(b), tol);
        r.output_host("labels" + tag, {in.labels.begin(), in.labels.end()}, kExact);
        if (b.aug) r.output_host("ids" + tag, {in.ids.begin(), in.ids.end()}, kExact);
      }
    }});
  }
  // The label only names the layer in the CUDA backend's fallback log; ops after it compute as before.
  add_case({"set_label", "then a 1x1 convolution", {"conv2d_forward"}, [](Run& r) {
    ConvDesc d;
    d.n = 2, d.h = 3, d.w = 4, d.c = 5, d.k = 6, d.r = d.s = 1;
    const float* d_x = r.upload(random_vec(2 * 3 * 4 * 5, 31));
    const float* d_w = r.upload(random_vec(6 * 5, 32));
    float* d_y = r.garbage(2 * 3 * 4 * 6);
    r.be.set_label("sweep.conv");
    r.be.conv2d_forward(DType::kF32, d, d_x, d_w, nullptr, d_y);
    r.be.set_label(nullptr);
    r.output("y", d_y, 2 * 3 * 4 * 6, kDefault);
  }});
}

}  // namespace cnn::sweep
