// `cnntrain-data predict SOURCE INPUT --out OUT` (docs/models.md, "Prediction"): the logits of a trained model
// (src/predict/predict_model.h) for a dataset, an image or a folder of images (src/predict/predict_input.h),
// on the CPU. OUT.h5: /logits float32 [N, classes], /labels int32 [N] when the input is a labelled dataset,
// root attributes model, source, class_names. OUT.csv: one row per sample, its path (or dataset index) and
// the top-k classes with names and softmax probabilities.
#pragma once
#include <cstdint>
#include <string>

#include "src/predict/predict_model.h"

namespace cnn {

struct PredictOptions {
  PredictSource source;
  std::string input, out;
  std::string stats_from;  // a dataset whose mean/std, classes and size stand in for what SOURCE lacks
  int topk = 5;
  int batch = 64;
  int threads = 1;
  int test_resize = 0;  // as --data.test_resize
};

struct PredictResult {
  int64_t count = 0;
  int classes = 0;
  int64_t correct = 0;  // top-1 hits, when the input has labels
  bool labelled = false;
  std::string model;
};

// Throws Error with the exit code of the problem (2 usage, 3 data, 4 checkpoint).
PredictResult run_predict(const PredictOptions& o);

}  // namespace cnn
