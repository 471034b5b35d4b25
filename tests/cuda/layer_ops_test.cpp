#include "tests/cuda/cuda_test_util.h"
#include "kernels/rng.h"
namespace cnn::test {
namespace {
using LayerOps = DeviceTest;
TEST_P(LayerOps, MatchCpu) {
  for (int rows : {2, 37, 1100}) for (int c : {3, 45}) {
    auto x = random_vec(size_t(rows) * c, rows + c);
    auto g = random_vec(c, 1), b = random_vec(c, 2), rm = random_vec(c, 3), rv = random_vec(c, 4, 0.5f, 2.f);
    auto dy = random_vec(x.size(), 5), dg = random_vec(c, 6), db = random_vec(c, 7);
    std::vector<float> y(x.size()), yi(x.size()), dx(x.size()), sm(c), si(c);
    DeviceBuffers d(*dev_);
    float *d_x = d.upload(x), *d_g = d.upload(g), *d_b = d.upload(b), *d_rm = d.upload(rm), *d_rv = d.upload(rv);
    float *d_dy = d.upload(dy), *d_dg = d.upload(dg), *d_db = d.upload(db), *d_y = d.zeros(x.size()),
          *d_yi = d.zeros(x.size()), *d_dx = d.zeros(x.size()), *d_sm = d.zeros(c), *d_si = d.zeros(c);
    cpu_->batchnorm_forward_infer(rows, c, x.data(), g.data(), b.data(), rm.data(), rv.data(), 1e-5f, yi.data());
    cpu_->batchnorm_forward_train(rows, c, x.data(), g.data(), b.data(), 1e-5f, 0.1f, y.data(), sm.data(), si.data(), rm.data(), rv.data());
    cpu_->batchnorm_backward(rows, c, x.data(), dy.data(), g.data(), sm.data(), si.data(), dx.data(), dg.data(), db.data());
    dev_->batchnorm_forward_infer(rows, c, d_x, d_g, d_b, d_rm, d_rv, 1e-5f, d_yi);
    dev_->batchnorm_forward_train(rows, c, d_x, d_g, d_b, 1e-5f, 0.1f, d_y, d_sm, d_si, d_rm, d_rv);
    dev_->batchnorm_backward(rows, c, d_x, d_dy, d_g, d_sm, d_si, d_dx, d_dg, d_db);
    EXPECT_TRUE(all_close(d.download(d_yi, yi.size()), yi, 1e-5, 1e-4, "yi"));
    EXPECT_TRUE(all_close(d.download(d_y, y.size()), y, 1e-4, 1e-4, "y"));
    EXPECT_TRUE(all_close(d.download(d_rm, c), rm, 1e-6, 1e-5, "rm"));
    EXPECT_TRUE(all_close(d.download(d_rv, c), rv, 1e-6, 1e-5, "rv"));
    EXPECT_TRUE(all_close(d.download(d_dx, dx.size()), dx, 1e-4, 1e-3, "dx"));
    EXPECT_TRUE(all_close(d.download(d_dg, c), dg, 1e-4, 1e-4, "dg"));
    EXPECT_TRUE(all_close(d.download(d_db, c), db, 1e-4, 1e-4, "db"));
  }
  {
    const size_t n = 70001;
    auto a = random_vec(n, 8), bb = random_vec(n, 9);
    std::vector<float> y(n);
    DeviceBuffers d(*dev_);
    float *d_a = d.upload(a), *d_b = d.upload(bb), *d_y = d.zeros(n);
    cpu_->add_relu_forward(n, a.data(), bb.data(), y.data()); dev_->add_relu_forward(n, d_a, d_b, d_y);
    EXPECT_TRUE(all_close(d.download(d_y, n), y, 0, 0, "add_relu"));
    EXPECT_NEAR(dev_->sum_squares(n, d_a), cpu_->sum_squares(n, a.data()), 1e-8 * n);
    cpu_->axpy(n, 0.3f, a.data(), bb.data()); dev_->axpy(n, 0.3f, d_a, d_b);
    EXPECT_TRUE(all_close(d.download(d_b, n), bb, 1e-6, 1e-6, "axpy"));
    cpu_->scale(n, 0.3f, a.data()); dev_->scale(n, 0.3f, d_a);
    EXPECT_TRUE(all_close(d.download(d_a, n), a, 0, 0, "scale"));
  }
  {
    PoolDesc pd; pd.n = 2; pd.h = 9; pd.w = 8; pd.c = 33; pd.r = pd.s = 3; pd.stride = 2; pd.pad = 1;
    auto x = random_vec(2 * 9 * 8 * 33, 10); auto dy = random_vec(2 * pd.p() * pd.q() * 33, 11);
    std::vector<float> y(dy.size()), dx(x.size());
    DeviceBuffers d(*dev_);
    float *d_x = d.upload(x), *d_dy = d.upload(dy), *d_y = d.zeros(y.size()), *d_dx = d.zeros(dx.size());
    cpu_->avgpool_forward(pd, x.data(), y.data()); cpu_->avgpool_backward(pd, dy.data(), dx.data());
    dev_->avgpool_forward(pd, d_x, d_y); dev_->avgpool_backward(pd, d_dy, d_dx);
    EXPECT_TRUE(all_close(d.download(d_y, y.size()), y, 0, 0, "avg y"));
    EXPECT_TRUE(all_close(d.download(d_dx, dx.size()), dx, 0, 0, "avg dx"));
  }
  {
    const int n = 4; const size_t per = 999;
    auto x = random_vec(n * per, 12); std::vector<int64_t> ids = {5, 7, 1000000, 3};
    std::vector<float> y(x.size()), dx(x.size()); std::vector<uint8_t> m(x.size());
    DeviceBuffers d(*dev_);
    float *d_x = d.upload(x), *d_y = d.zeros(x.size()), *d_dx = d.zeros(x.size());
    int64_t* d_ids = d.upload(ids); uint8_t* d_m = d.upload(std::vector<uint8_t>(x.size()));
    cpu_->dropout_forward(n, per, x.data(), 0.25f, 77, ids.data(), y.data(), m.data());
    cpu_->dropout_backward(x.size(), 0.25f, x.data(), m.data(), dx.data());
    dev_->dropout_forward(n, per, d_x, 0.25f, 77, d_ids, d_y, d_m);
    dev_->dropout_backward(x.size(), 0.25f, d_x, d_m, d_dx);
    EXPECT_EQ(d.download(d_m, m.size()), m);
    EXPECT_TRUE(all_close(d.download(d_y, y.size()), y, 0, 0, "drop y"));
    EXPECT_TRUE(all_close(d.download(d_dx, dx.size()), dx, 0, 0, "drop dx"));
  }
  {
    auto x = random_vec(2 * 7 * 8 * 3, 13); const int P = 4, Q = 4;
    auto dy = random_vec(2 * P * Q * 8, 14);
    std::vector<float> y(dy.size()), dx(x.size());
    DeviceBuffers d(*dev_);
    float *d_x = d.upload(x), *d_dy = d.upload(dy), *d_y = d.zeros(y.size()), *d_dx = d.zeros(dx.size());
    cpu_->shortcut_pad_forward(2, 7, 8, 3, 2, 8, x.data(), y.data()); cpu_->shortcut_pad_backward(2, 7, 8, 3, 2, 8, dy.data(), dx.data());
    dev_->shortcut_pad_forward(2, 7, 8, 3, 2, 8, d_x, d_y); dev_->shortcut_pad_backward(2, 7, 8, 3, 2, 8, d_dy, d_dx);
    EXPECT_TRUE(all_close(d.download(d_y, y.size()), y, 0, 0, "pad y"));
    EXPECT_TRUE(all_close(d.download(d_dx, dx.size()), dx, 0, 0, "pad dx"));
  }
  {
    const size_t n = 5003;
    auto w = random_vec(n, 15), g = random_vec(n, 16), m = random_vec(n, 17), v = random_vec(n, 18, 0, 1);
    DeviceBuffers d(*dev_);
    float *d_w = d.upload(w), *d_g = d.upload(g), *d_m = d.upload(m), *d_v = d.upload(v);
    cpu_->adamw_update(n, w.data(), g.data(), m.data(), v.data(), 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f);
    dev_->adamw_update(n, d_w, d_g, d_m, d_v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f);
    EXPECT_TRUE(all_close(d.download(d_w, n), w, 1e-6, 1e-5, "adam w"));
    EXPECT_TRUE(all_close(d.download(d_v, n), v, 1e-7, 1e-5, "adam v"));
  }
}
INSTANTIATE_TEST_SUITE_P(Targets, LayerOps, ::testing::ValuesIn(all_targets()), target_name);
}  // namespace
}  // namespace cnn::test
