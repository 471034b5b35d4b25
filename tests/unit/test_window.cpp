// kernels/window.h: the window walk of convolution and pooling visits exactly the in-bounds taps, row by row,
// dilated or not, also over outputs that only padding after the input adds, and window_taps (the average pool's
// divisor, computed without the walk) counts the same taps of an undilated window.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/window.h"

namespace cnn {
namespace {

TEST(Window, TheWalkVisitsTheInBoundsTapsInOrderAndWindowTapsCountsThem) {
  for (int h : {1, 4, 7})
    for (int r : {1, 2, 3, 5})
      for (int stride : {1, 2, 3})
        for (int pad : {0, 1, 2})
          for (int dil : {1, 2, 3}) {
            const Window g{h, h + 1, r, r, stride, stride, pad, pad, dil, dil};
            const int span = dil * (r - 1) + 1, extra = 2;  // two more padded rows and columns after the input
            const int p_count = (h + 2 * pad + extra - span) / stride + 1;
            const int q_count = (h + 1 + 2 * pad + extra - span) / stride + 1;
            for (int p = 0; p < p_count; ++p)
              for (int q = 0; q < q_count; ++q) {
                std::vector<size_t> want_pixels;
                std::vector<int> want_taps;
                for (int i = 0; i < r; ++i)
                  for (int j = 0; j < r; ++j) {
                    const int row = p * stride - pad + i * dil, col = q * stride - pad + j * dil;
                    if (row < 0 || row >= g.h || col < 0 || col >= g.w) continue;
                    want_pixels.push_back((static_cast<size_t>(2) * g.h + row) * g.w + col);  // sample n = 2
                    want_taps.push_back(i * r + j);
                  }
                std::vector<size_t> pixels;
                std::vector<int> taps;
                const int n = for_each_tap(g, 2, p, q, [&](size_t pixel, int tap) {
                  pixels.push_back(pixel);
                  taps.push_back(tap);
                });
                SCOPED_TRACE(testing::Message() << "h " << h << " r " << r << " stride " << stride << " pad " << pad
                                                << " dilation " << dil << " output (" << p << ", " << q << ")");
                EXPECT_EQ(pixels, want_pixels);
                EXPECT_EQ(taps, want_taps);
                EXPECT_EQ(n, static_cast<int>(want_taps.size()));
                if (dil == 1) {
                  EXPECT_EQ(window_taps(g, p, q), n);
                }
              }
          }
}

TEST(Window, ConvAndPoolDescriptorsGiveTheirWindows) {
  ConvDesc c;
  c.h = 9, c.w = 8, c.r = 3, c.s = 5, c.stride_h = 2, c.stride_w = 1, c.pad_h = 1, c.pad_w = 2;
  c.dilation_h = 3, c.dilation_w = 2;
  const Window a = window_of(c);
  EXPECT_EQ(
      (std::vector<int>{a.h, a.w, a.r, a.s, a.stride_h, a.stride_w, a.pad_h, a.pad_w, a.dilation_h, a.dilation_w}),
      (std::vector<int>{9, 8, 3, 5, 2, 1, 1, 2, 3, 2}));
  PoolDesc d;
  d.h = 6, d.w = 5, d.r = 3, d.s = 2, d.stride = 2, d.pad = 1;
  const Window b = window_of(d);
  EXPECT_EQ(
      (std::vector<int>{b.h, b.w, b.r, b.s, b.stride_h, b.stride_w, b.pad_h, b.pad_w, b.dilation_h, b.dilation_w}),
      (std::vector<int>{6, 5, 3, 2, 2, 2, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace cnn
