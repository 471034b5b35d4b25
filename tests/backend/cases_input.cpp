// Sweep cases: the device input path (upload_images: uint8 pixels with crop, flip, normalisation and erasing
// done where the backend computes) and the layer label of the vendor-library fallback log.
#include "tests/backend/sweep.h"

namespace cnn::sweep {

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  CounterRng rng(seed, 3);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng.next() >> 56);
  return v;
}

}  // namespace

CNN_SWEEP_CASES(input) {
  // 7x6x3 images; batches of 5, 3 and 9 in a row (the CUDA backend's two staging slots alternate and grow),
  // every kind of augmentation draw, then an evaluation batch without augmentation or ids.
  add_case({"upload_images", "7x6x3, batches 5, 3, 9, 2", {}, [](Run& r) {
    const int h = 7, w = 6, c = 3, most = 9;
    const std::vector<float> mean{120.f, 3.5f, 250.f}, stdev{60.f, 0.7f, 2.f};
    float* d_x = r.garbage(static_cast<size_t>(most) * h * w * c);
    int32_t* d_labels = r.upload(std::vector<int32_t>(most, -1));
    int64_t* d_ids = r.upload(std::vector<int64_t>(most, -1));
    uint64_t seed = 900;
    for (int n : {5, 3, 9, 2}) {
      const bool eval = n == 2;
      const auto pixels = random_bytes(static_cast<size_t>(n) * h * w * c, ++seed);
      std::vector<ImageAug> aug(n);
      std::vector<int32_t> labels(n);
      std::vector<int64_t> ids(n);
      for (int i = 0; i < n; ++i) {
        aug[i].dy = i % 5 - 2;
        aug[i].dx = 2 - i % 4;
        aug[i].flip = i % 2;
        if (i % 3 == 0) aug[i].erase_y = 1, aug[i].erase_x = 2, aug[i].erase_h = 3, aug[i].erase_w = 2;
        labels[i] = 10 * n + i;
        ids[i] = 1000 * n + i;
      }
      ImageBatch b;
      b.n = n, b.h = h, b.w = w, b.c = c;
      b.pixels = pixels.data(), b.mean = mean.data(), b.std = stdev.data(), b.labels = labels.data();
      b.aug = eval ? nullptr : aug.data();
      b.ids = eval ? nullptr : ids.data();
      r.be.upload_images(b, d_x, d_labels, eval ? nullptr : d_ids);
      const std::string tag = " of batch " + std::to_string(n);
      // One rounding apart at most where a compiler does not contract the multiply-add.
      r.output("images" + tag, d_x, static_cast<size_t>(n) * h * w * c, {1e-6, 1e-6});
      r.output("labels" + tag, d_labels, n);
      if (!eval) {
        const auto got = r.download(d_ids, n);
        r.output_host("ids" + tag, std::vector<double>(got.begin(), got.end()), kExact);
      }
    }
  }});
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
