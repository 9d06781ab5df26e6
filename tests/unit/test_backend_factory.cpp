// SPDX-License-Identifier: Apache-2.0
// The run-time backend choice (engine/backend/backend_factory.h). CI has no GPU: auto must fall back
// to the CPU backend and an explicit CUDA request must fail with a clear reason. On a machine
// with a GPU the same tests check the CUDA side instead.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/backend/backend_factory.h"
#include "engine/format/gguf_writer.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const Model> tiny_model() {
  static std::shared_ptr<const Model> model = [] {
    fs::path dir = fs::temp_directory_path() / "sinkscope_test_models";
    fs::create_directories(dir);
    fs::path p = dir / "backend_factory_tiny.gguf";
    TestModelShape shape;  // 2 layers, head_dim 16
    make_random_llama(shape, 5).write(p);
    return Model::load(p);
  }();
  return model;
}

TEST(BackendFactory, KindNamesRoundTrip) {
  for (BackendKind k : {BackendKind::kAuto, BackendKind::kCpu, BackendKind::kCuda})
    EXPECT_EQ(parse_backend_kind(backend_kind_name(k)), k);
  EXPECT_FALSE(parse_backend_kind("gpu").has_value());
  EXPECT_FALSE(parse_backend_kind("").has_value());
}

TEST(BackendFactory, CudaAvailabilityExplainsItself) {
  std::string why;
  const bool ok = cuda_available(&why);
  if (ok) {
    EXPECT_FALSE(cuda_device_name().empty());
  } else {
    EXPECT_FALSE(why.empty());
    EXPECT_TRUE(cuda_device_name().empty());
#ifndef SINKSCOPE_HAVE_CUDA
    EXPECT_EQ(why, "built without CUDA");
#endif
  }
}

TEST(BackendFactory, CpuKindGivesTheCpuBackend) {
  std::string note;
  auto be = make_backend(tiny_model(), {}, BackendKind::kCpu, &note);
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->name(), "cpu");
  EXPECT_NE(note.find("cpu"), std::string::npos);
}

TEST(BackendFactory, AutoFallsBackToCpuWithoutCuda) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  std::string note;
  auto be = make_backend(tiny_model(), {}, BackendKind::kAuto, &note);
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->name(), "cpu");
  EXPECT_NE(note.find("CUDA not available"), std::string::npos) << note;
  // And it is a working backend.
  std::vector<float> logits;
  const TokenId ids[3] = {1, 2, 3};
  be->forward(ids, LogitsMode::kLast, logits);
  EXPECT_EQ(logits.size(), size_t(tiny_model()->config().n_vocab));
}

TEST(BackendFactory, CudaKindFailsClearlyWithoutCuda) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  try {
    (void)make_backend(tiny_model(), {}, BackendKind::kCuda);
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA backend requested but not available"), std::string::npos) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
#ifndef SINKSCOPE_HAVE_CUDA
    EXPECT_NE(msg.find("built without CUDA"), std::string::npos) << msg;
#endif
  }
}

TEST(BackendFactory, NoModelIsAnError) {
  EXPECT_THROW((void)make_backend(nullptr, {}, BackendKind::kAuto), BackendError);
  EXPECT_THROW((void)make_backend(nullptr, {}, BackendKind::kCpu), BackendError);
}

// Nothing a supported family needs is left for the CUDA backend to ignore: a model's own window
// on every layer (Mistral as GGUF) and phi3's LongRoPE run on the device (tests/gpu/
// test_cuda_families checks them against the CPU backend), so neither is refused any more.
TEST(BackendFactory, CudaRunsOwnWindowsAndLongRope) {
  const std::filesystem::path data = std::filesystem::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data";
  EXPECT_EQ(cuda_unsupported_reason(Model::load(data / "hf" / "qwen2_f16")->config()), "");
  EXPECT_EQ(cuda_unsupported_reason(Model::load(data / "hf" / "gemma2_bf16")->config()), "");
  const auto mistral = Model::load(data / "hf" / "mistral_f16_window.gguf");
  EXPECT_EQ(mistral->config().layer_window(0), 6);
  EXPECT_EQ(cuda_unsupported_reason(mistral->config()), "");
  const auto phi3 = Model::load(data / "oracles" / "phi3_longrope_q8_0.gguf");
  EXPECT_TRUE(phi3->config().long_rope);
  EXPECT_EQ(cuda_unsupported_reason(phi3->config()), "");
}

}  // namespace
}  // namespace sinkscope
