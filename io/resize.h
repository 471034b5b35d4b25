// Resize and crop to the network input size as torchvision does it, for datasets whose images all have one
// stored size (HDF5; io/resized_dataset.h):
//   training: RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip: a box of a random fraction of the
//     area (uniform in [min_scale, max_scale]) and aspect ratio w/h (log-uniform in [min_ratio, max_ratio]),
//     up to 10 tries to fit one, else the central box of the largest allowed aspect; resized to the target;
//   evaluation: Resize(test_resize) (the shorter side to test_resize pixels, the longer to
//     int(test_resize * long / short)) + CenterCrop(size) (offset int(round((resized - size) / 2))).
// Resampling is torchvision's tensor resize with antialias=True, bilinear: output pixel i of an axis scaled by
// s = in/out is the normalised triangle-filter average of the input pixels within max(s, 1) of its centre
// s*(i + 0.5), clipped to the resized box; computed in float, horizontally then vertically, rounded half to
// even as torchvision rounds uint8 results. Random draws are keyed by (seed, epoch, sample id), never by rank.
#pragma once
#include <cstdint>
#include <functional>

namespace cnn {

struct ResizeOptions {
  int height = 0, width = 0;  // the target (network input) size
  bool train = false;         // random-resized crop + flip, else resize + center crop
  double min_scale = 0.08, max_scale = 1.0;
  double min_ratio = 3.0 / 4.0, max_ratio = 4.0 / 3.0;
  int test_resize = 0;  // evaluation: shorter side before the crop; 0: default_test_resize
  uint64_t seed = 0;
};

// round(max(height, width) / 0.875): torchvision's Resize(256) before CenterCrop(224).
int default_test_resize(int height, int width);

// One sample's geometry: the source box [y, y+h) x [x, x+w) is resampled to rh x rw, of which the output is
// the window of the target size at (oy, ox), mirrored left-right when flip.
struct ResizePlan {
  int y = 0, x = 0, h = 0, w = 0;
  int rh = 0, rw = 0;
  int oy = 0, ox = 0;
  bool flip = false;
};

// The training box of an sh x sw image from uniform draws in [0, 1) (torchvision's get_params order: per try
// area, log-ratio, and when it fits top, left; then the flip), resized to the target.
ResizePlan random_resized_crop(const ResizeOptions& o, int sh, int sw, const std::function<double()>& uniform);
// The evaluation plan; throws Error(kExitUsage) naming --data.test_resize when the resized image is smaller
// than the target.
ResizePlan resize_center_crop(const ResizeOptions& o, int sh, int sw);
// Sample `id`'s plan in epoch `epoch` (training draws from its own stream of kernels/rng.h).
ResizePlan plan_resize(const ResizeOptions& o, int64_t epoch, int64_t id, int sh, int sw);

// dst (oh x ow x c) from src (sh x sw x c), uint8 HWC, as plan p says.
void resize_antialiased(const uint8_t* src, int sh, int sw, int c, const ResizePlan& p, uint8_t* dst, int oh,
                        int ow);

}  // namespace cnn
