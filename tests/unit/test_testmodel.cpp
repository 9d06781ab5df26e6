// SPDX-License-Identifier: Apache-2.0
// Random-weight models of real shapes (engine/format/testmodel.h): the quantizers' round trip through
// the engine's dequantizer, llama.cpp's Q4_K_M mix and the Llama 3 RoPE factors, the SmolLM2
// shape against the real file, determinism, and files of every shape and type that the engine
// loads and runs (one layer, a reduced vocabulary, to stay fast).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/backend/qgemv.h"
#include "engine/util/sha256.h"
#include "engine/format/testmodel.h"
#include "engine/util/thread_pool.h"
#include "test_support.h"

namespace sinkscope {
// Test names and failure messages print the type by name.
void PrintTo(TestModelType t, std::ostream* os) { *os << test_model_type_name(t); }

namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("sinkscope_testmodel_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// ---- quantizers --------------------------------------------------------------------------------

double relative_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double e2 = 0, x2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e2 += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    x2 += double(x[i]) * x[i];
  }
  return std::sqrt(e2 / x2);
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x) {
  const auto n = int64_t(x.size());
  std::vector<uint8_t> q(ggml_row_bytes(t, n), 0xAB);  // garbage: every byte must be written
  quantize_row_into(t, x.data(), n, q.data());
  EXPECT_EQ(q, quantize_row(t, x.data(), n)) << ggml_type_name(t);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

// The stated per-format tolerance on relative RMSE for weight-like data, N(0, 0.02).
struct Tolerance {
  GgmlType type;
  double rel_rmse;
};
constexpr Tolerance kTolerances[] = {
    {GgmlType::kQ8_0, 0.01}, {GgmlType::kQ6_K, 0.03}, {GgmlType::kQ4_K, 0.10},
    {GgmlType::kQ5_0, 0.06}, {GgmlType::kBF16, 0.005}, {GgmlType::kF32, 0.0},
};

TEST(TestModelQuant, RelativeRmseWithinStatedTolerance) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> x(256 * 512);
  for (float& v : x) v = nd(rng);
  for (const Tolerance& tol : kTolerances) {
    const double e = relative_rmse(x, round_trip(tol.type, x));
    EXPECT_LE(e, tol.rel_rmse) << ggml_type_name(tol.type);
    RecordProperty(std::string("rel_rmse_") + ggml_type_name(tol.type), std::to_string(e));
    // Not trivially exact either (except f32): the encoders really quantize.
    if (tol.type != GgmlType::kF32) {
      EXPECT_GT(e, 0.0) << ggml_type_name(tol.type);
    }
  }
}

TEST(TestModelQuant, ZeroAndConstantBlocks) {
  for (const Tolerance& tol : kTolerances) {
    const GgmlType t = tol.type;
    std::vector<float> zeros(512, 0.0f);
    for (float v : round_trip(t, zeros)) ASSERT_EQ(v, 0.0f) << ggml_type_name(t);
    for (float c : {1.0f, -0.75f, 0.02f, -3e-4f}) {
      std::vector<float> x(512, c);
      const std::vector<float> y = round_trip(t, x);
      for (float v : y) ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(t);
      EXPECT_LE(relative_rmse(x, y), tol.rel_rmse) << ggml_type_name(t) << " constant " << c;
    }
    // One large value among zeros: the others stay (near) zero, the large one survives.
    std::vector<float> spike(512, 0.0f);
    spike[300] = 5.0f;
    const std::vector<float> y = round_trip(t, spike);
    EXPECT_NEAR(y[300], 5.0f, 5.0f * std::max(tol.rel_rmse, 0.004)) << ggml_type_name(t);
    for (size_t i = 0; i < y.size(); ++i)
      if (i != 300) {
        ASSERT_NEAR(y[i], 0.0f, 0.4f) << ggml_type_name(t) << " " << i;
      }
  }
}

// ---- shapes, mix, RoPE factors ---------------------------------------------------------------

TEST(TestModel, ShapesAndTypesByName) {
  EXPECT_EQ(test_model_shape_names(), "llama3-8b, qwen2.5-7b, mistral-7b, smollm2-135m");
  EXPECT_FALSE(find_test_model_shape("llama3-70b"));
  const TestShape l = *find_test_model_shape("llama3-8b");
  EXPECT_EQ(l.n_layer, 32);
  EXPECT_EQ(l.n_embd, 4096);
  EXPECT_EQ(l.n_head_kv, 8);
  EXPECT_EQ(l.n_ff, 14336);
  EXPECT_EQ(l.n_vocab, 128256);
  EXPECT_EQ(l.n_ctx, 131072);
  EXPECT_EQ(l.rope_theta, 500000.0f);
  const TestShape q = *find_test_model_shape("qwen2.5-7b");
  EXPECT_EQ(q.architecture, "qwen2");
  EXPECT_EQ(q.n_vocab, 152064);
  EXPECT_EQ(q.rms_eps, 1e-6f);
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_FALSE(q.tied_embeddings);
  for (const char* n : {"q4_k_m", "q8_0", "bf16", "f32"})
    EXPECT_EQ(test_model_type_name(*parse_test_model_type(n)), std::string(n));
  EXPECT_FALSE(parse_test_model_type("q4_k_s"));
  EXPECT_EQ(test_model_file_type(TestModelType::kQ4_K_M), 15u);
  EXPECT_EQ(test_model_file_type(TestModelType::kBF16), 32u);
}

TEST(TestModel, Llama3RopeFactorsFollowTheConverter) {
  const std::vector<float> f = llama3_rope_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
  ASSERT_EQ(f.size(), 64u);
  // Wavelength 2*pi*theta^(i/64): below 8192/4 = 2048 factor 1, above 8192 factor 8.
  int ones = 0, eights = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const double wavelen = 2 * M_PI * std::pow(500000.0, double(2 * i) / 128.0);
    if (wavelen < 2048) {
      EXPECT_EQ(f[i], 1.0f) << i;
      ++ones;
    } else if (wavelen > 8192) {
      EXPECT_EQ(f[i], 8.0f) << i;
      ++eights;
    } else {
      const double smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0);
      EXPECT_NEAR(f[i], 1.0 / ((1 - smooth) / 8.0 + smooth), 1e-4) << i;
      EXPECT_GT(f[i], 1.0f);
      EXPECT_LT(f[i], 8.0f);
    }
    if (i > 0) {
      EXPECT_GE(f[i], f[i - 1]) << i;
    }
  }
  // The split of Llama 3.1 8B's rope_freqs.weight: 29 ones, 29 eights, 6 blended from 1.2075.
  EXPECT_EQ(ones, 29);
  EXPECT_EQ(eights, 29);
  EXPECT_NEAR(f[29], 1.207484, 1e-5);
  EXPECT_NEAR(f[34], 5.257327, 1e-5);
}

// llama.cpp's use_more_bits, written out as the layer list for 32 layers.
TEST(TestModel, Q4KMMixFollowsLlamaQuantize) {
  const TestShape s = *find_test_model_shape("llama3-8b");
  const auto plan = plan_test_model_tensors(s, TestModelType::kQ4_K_M);
  const std::set<int> more = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
  std::map<std::string, GgmlType> type;
  for (const auto& t : plan) type[t.name] = t.type;
  EXPECT_EQ(plan.size(), 1u + 1 + 32 * 9 + 2);
  EXPECT_EQ(type.at("output.weight"), GgmlType::kQ6_K);
  EXPECT_EQ(type.at("token_embd.weight"), GgmlType::kQ4_K);
  EXPECT_EQ(type.at("rope_freqs.weight"), GgmlType::kF32);
  EXPECT_EQ(type.at("output_norm.weight"), GgmlType::kF32);
  for (int l = 0; l < 32; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const GgmlType want = more.count(l) ? GgmlType::kQ6_K : GgmlType::kQ4_K;
    EXPECT_EQ(type.at(p + "attn_v.weight"), want) << l;
    EXPECT_EQ(type.at(p + "ffn_down.weight"), want) << l;
    for (const char* n : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
      EXPECT_EQ(type.at(p + n + ".weight"), GgmlType::kQ4_K) << p << n;
    EXPECT_EQ(type.at(p + "attn_norm.weight"), GgmlType::kF32);
  }
  // Rows of 576 are no multiple of 256: llama.cpp falls back to Q5_0 / Q8_0, and the tied
  // token_embd gets the output tensor's rule.
  const auto smol = plan_test_model_tensors(*find_test_model_shape("smollm2-135m"),
                                            TestModelType::kQ4_K_M);
  std::map<std::string, GgmlType> st;
  for (const auto& t : smol) st[t.name] = t.type;
  EXPECT_EQ(st.count("output.weight"), 0u);
  EXPECT_EQ(st.at("token_embd.weight"), GgmlType::kQ8_0);
  EXPECT_EQ(st.at("blk.0.attn_q.weight"), GgmlType::kQ5_0);
  EXPECT_EQ(st.at("blk.0.attn_v.weight"), GgmlType::kQ8_0);
  EXPECT_EQ(st.at("blk.0.ffn_down.weight"), GgmlType::kQ6_K);
  EXPECT_EQ(st.at("blk.4.ffn_down.weight"), GgmlType::kQ4_K);
  // The other types: every 2-D tensor in the one type, 1-D tensors f32.
  for (auto [tt, want] : {std::pair{TestModelType::kQ8_0, GgmlType::kQ8_0},
                          std::pair{TestModelType::kBF16, GgmlType::kBF16},
                          std::pair{TestModelType::kF32, GgmlType::kF32}}) {
    for (const auto& t : plan_test_model_tensors(s, tt))
      EXPECT_EQ(t.type, t.dims.size() == 2 ? want : GgmlType::kF32) << t.name;
  }
}

TEST(TestModel, SmolLM2ShapeMatchesTheRealFile) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model_path);
  const auto real = GgufFile::open(model_path);
  const ModelConfig c = read_model_config(*real);
  const TestShape s = *find_test_model_shape("smollm2-135m");
  EXPECT_EQ(c.architecture, s.architecture);
  EXPECT_EQ(c.n_layer, s.n_layer);
  EXPECT_EQ(c.n_embd, s.n_embd);
  EXPECT_EQ(c.n_head, s.n_head);
  EXPECT_EQ(c.n_head_kv, s.n_head_kv);
  EXPECT_EQ(c.n_ff, s.n_ff);
  EXPECT_EQ(c.n_vocab, s.n_vocab);
  EXPECT_EQ(c.n_ctx_train, s.n_ctx);
  EXPECT_EQ(c.rope_theta, s.rope_theta);
  EXPECT_EQ(c.rms_eps, s.rms_eps);
  EXPECT_EQ(c.tied_embeddings, s.tied_embeddings);
  // The same tensors with the same shapes (the real file is Q4_1, so types differ).
  std::map<std::string, std::vector<int64_t>> want, got;
  for (const auto& t : real->tensors()) want[t.name] = t.dims;
  for (const auto& t : plan_test_model_tensors(s, TestModelType::kQ8_0)) got[t.name] = t.dims;
  EXPECT_EQ(got, want);
  // The specials sit where the real tokenizer has them.
  const auto& tokens = real->find("tokenizer.ggml.tokens")->strings;
  EXPECT_EQ(tokens[1], "<|im_start|>");
  EXPECT_EQ(real->get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(real->get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(real->get_string("tokenizer.ggml.pre"), "smollm");
}

// ---- writing -----------------------------------------------------------------------------------

TestModelOptions small_options(const std::string& shape, TestModelType type, int vocab) {
  TestModelOptions o;
  o.shape = *find_test_model_shape(shape);
  o.shape.n_layer = 1;
  o.shape.n_vocab = vocab;
  o.type = type;
  return o;
}

TEST(TestModel, DeterministicForASeedWhateverTheThreads) {
  const fs::path dir = temp_dir();
  TestModelOptions o = small_options("smollm2-135m", TestModelType::kQ4_K_M, 600);
  o.seed = 5;
  ThreadPool one(1), two(2);
  o.pool = &one;
  const TestModelResult r = write_test_model(o, dir / "a.gguf");
  o.pool = &two;
  write_test_model(o, dir / "b.gguf");
  o.seed = 6;
  write_test_model(o, dir / "c.gguf");
  EXPECT_EQ(r.file_size, fs::file_size(dir / "a.gguf"));
  EXPECT_EQ(sha256_file(dir / "a.gguf"), sha256_file(dir / "b.gguf"));
  EXPECT_NE(sha256_file(dir / "a.gguf"), sha256_file(dir / "c.gguf"));
  // Only the three files: no temporary left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 3);
  fs::remove_all(dir);
}

TEST(TestModel, ProgressCountsTensorsAndBytes) {
  const fs::path dir = temp_dir();
  // A one-layer Mistral in Q8_0: each 14336 x 4096 ffn tensor takes two batches of rows.
  TestModelOptions o = small_options("mistral-7b", TestModelType::kQ8_0, 1100);
  std::vector<TestModelProgress> seen;
  o.progress = [&](const TestModelProgress& p) { seen.push_back(p); };
  const TestModelResult r = write_test_model(o, dir / "p.gguf");
  ASSERT_FALSE(seen.empty());
  const auto plan = plan_test_model_tensors(o.shape, o.type);
  int done = 0;
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].n_tensors, int(plan.size()));
    EXPECT_EQ(seen[i].total_bytes, r.file_size);
    EXPECT_EQ(seen[i].name, plan[size_t(seen[i].tensor - 1)].name);
    if (i > 0) {
      EXPECT_GT(seen[i].bytes_written, seen[i - 1].bytes_written);
      EXPECT_EQ(seen[i].tensor, seen[i - 1].tensor + (seen[i - 1].tensor_done ? 1 : 0));
    }
    done += seen[i].tensor_done ? 1 : 0;
  }
  EXPECT_EQ(done, int(plan.size()));  // every tensor finishes once
  EXPECT_GT(seen.size(), plan.size());  // and the large ones report batches in between
  EXPECT_TRUE(seen.back().tensor_done);
  EXPECT_EQ(seen.back().tensor, int(plan.size()));
  EXPECT_LE(r.file_size - seen.back().bytes_written, 31u);  // only the final padding follows
  fs::remove_all(dir);
}

TEST(TestModel, ShapeErrorsAreInvalidArgument) {
  const fs::path dir = temp_dir();
  TestModelOptions o = small_options("llama3-8b", TestModelType::kQ8_0, 511);
  EXPECT_THROW(write_test_model(o, dir / "x.gguf"), std::invalid_argument);  // < 256 + 256
  o.shape.n_vocab = 600;
  o.shape.n_layer = 0;
  EXPECT_THROW(write_test_model(o, dir / "x.gguf"), std::invalid_argument);
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
  fs::remove_all(dir);
}

// Every shape and type at one layer and a vocabulary of 1100 (the fewest Mistral's layout
// allows is 1027): the metadata says the shape, the tensors follow the plan, the engine loads
// it and a CPU prefill gives finite logits.
class TestModelFiles
    : public ::testing::TestWithParam<std::tuple<std::string, TestModelType>> {};

TEST_P(TestModelFiles, LoadAndRun) {
  const auto [shape_id, type] = GetParam();
  const fs::path dir = temp_dir();
  const fs::path path = dir / (shape_id + "_" + test_model_type_name(type) + ".gguf");
  TestModelOptions o = small_options(shape_id, type, 1100);
  ThreadPool pool(2);
  o.pool = &pool;
  const TestShape& s = o.shape;
  const TestModelResult r = write_test_model(o, path);
  EXPECT_EQ(r.file_size, fs::file_size(path));

  auto model = Model::load(path);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.architecture, s.architecture);
  EXPECT_EQ(c.n_layer, 1);
  EXPECT_EQ(c.n_embd, s.n_embd);
  EXPECT_EQ(c.n_head, s.n_head);
  EXPECT_EQ(c.n_head_kv, s.n_head_kv);
  EXPECT_EQ(c.head_dim, s.head_dim());
  EXPECT_EQ(c.n_ff, s.n_ff);
  EXPECT_EQ(c.n_vocab, 1100);
  EXPECT_EQ(c.n_ctx_train, s.n_ctx);
  EXPECT_EQ(c.rope_theta, s.rope_theta);
  EXPECT_EQ(c.rms_eps, s.rms_eps);
  EXPECT_EQ(c.qkv_bias, s.qkv_bias);
  EXPECT_EQ(c.tied_embeddings, s.tied_embeddings);
  EXPECT_EQ(model->gguf().get_int("general.file_type"), test_model_file_type(type));
  const ModelWeights& w = model->weights();
  if (s.llama3_rope) {
    EXPECT_EQ(w.rope_freqs, llama3_rope_factors(128, s.rope_theta, 8, 1, 4, 8192));
  } else {
    EXPECT_TRUE(w.rope_freqs.empty());
  }
  EXPECT_EQ(w.layers[0].bq.size(), s.qkv_bias ? size_t(s.n_embd) : 0u);
  // Norm gains near 1, weights with standard deviation near 0.02.
  double mean = 0;
  for (float g : w.layers[0].attn_norm) mean += g;
  EXPECT_NEAR(mean / s.n_embd, 1.0, 0.01);
  double ss = 0;
  const std::vector<float> up = dequantize(w.layers[0].w_up);
  for (float v : up) ss += double(v) * v;
  EXPECT_NEAR(std::sqrt(ss / double(up.size())), 0.02, 0.002);

  const auto plan = plan_test_model_tensors(s, type);
  ASSERT_EQ(model->gguf().tensors().size(), plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    const GgufTensorInfo& t = model->gguf().tensors()[i];
    EXPECT_EQ(t.name, plan[i].name);
    EXPECT_EQ(t.dims, plan[i].dims) << t.name;
    EXPECT_EQ(t.type, plan[i].type) << t.name;
  }

  // Any text tokenizes (byte fallback) and comes back.
  const Tokenizer& tok = model->tokenizer();
  EXPECT_EQ(tok.vocab_size(), 1100);
  EXPECT_GE(tok.bos(), 0);
  EXPECT_GE(tok.eos(), 0);
  const std::string text = "Hello world, the quick brown fox! 123 \xC3\xA9t\xC3\xA9";
  const std::vector<TokenId> ids = tok.encode(text, false, false);
  EXPECT_EQ(tok.decode(ids, true), text);

  BackendOptions bo;
  bo.n_threads = 2;
  bo.max_context = 64;
  auto be = make_backend(model, bo, BackendKind::kCpu);
  std::vector<float> logits;
  be->forward(ids, LogitsMode::kLast, logits);
  ASSERT_EQ(logits.size(), 1100u);
  double spread = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    spread = std::max(spread, std::fabs(double(v) - logits[0]));
  }
  EXPECT_GT(spread, 0.0);  // not a constant row
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    ShapesAndTypes, TestModelFiles,
    ::testing::Combine(::testing::Values(std::string("llama3-8b"), std::string("qwen2.5-7b"),
                                         std::string("mistral-7b"), std::string("smollm2-135m")),
                       ::testing::Values(TestModelType::kQ4_K_M, TestModelType::kQ8_0,
                                         TestModelType::kBF16, TestModelType::kF32)),
    [](const auto& info) {
      std::string n = std::get<0>(info.param) + "_" +
                      test_model_type_name(std::get<1>(info.param));
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

}  // namespace
}  // namespace sinkscope

namespace sinkscope {
namespace {

// The prefill's skipped shares at fixed lambdas on BOS + n random byte tokens of a model
// written with or without the designed sink (TestModelOptions::sink_pattern), and the mean
// attention probability on token 0 over every (layer, head) and query of a dense prefill.
std::vector<double> skipped_shares(const fs::path& path, const std::vector<double>& lambdas, int n,
                                   double* sink_mass) {
  auto model = Model::load(path);
  std::vector<TokenId> ids = {TokenId(model->tokenizer().bos())};
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pick(0, 255);
  while (int(ids.size()) < n) ids.push_back(TokenId(pick(rng)));
  BackendOptions bo;
  bo.n_threads = 2;
  bo.max_context = n;
  std::vector<float> logits;
  auto be = make_backend(model, bo, BackendKind::kCpu);
  be->request_column_mass(1);
  be->reset();
  be->forward(ids, LogitsMode::kLast, logits);
  const AttentionProbes& p = be->probes();
  double m = 0;
  for (size_t lh = 0; lh < size_t(p.n_layer) * p.n_head; ++lh) m += p.col_mass[lh];
  *sink_mass = m / double(p.col_queries[0]) / double(size_t(p.n_layer) * p.n_head);
  be->request_column_mass(0);
  std::vector<double> shares;
  for (double lambda : lambdas) {
    AttentionSettings a;
    a.type = AttentionType::kDynamicSparse;
    a.threshold_mode = ThresholdMode::kFixed;
    a.threshold_prefill = lambda;
    be->set_attention(a);
    be->reset();
    be->forward(ids, LogitsMode::kLast, logits);
    shares.push_back(be->probes().total(false).sparsity());
  }
  return shares;
}

// The designed sink makes token 0 take a large share of every head's attention, so that lambda
// sets how many tiles dynamic-sparse attention skips, from a few to most (what the sparse
// prefill's speed runs need); the plain random weights give near-uniform attention and skip
// almost nothing at any lambda. Llama-3.1-8B's shape in Q4_K_M (2 layers), BOS + 1023 byte
// tokens. (At SmolLM2's width the pattern gives about the same mass on token 0, but the heads
// split into ones where it takes nearly everything and ones where it takes little, so lambda
// moves the share less: 0.57 at 1e-3, 0.65 at 0.3.)
class SinkPattern : public ::testing::TestWithParam<std::tuple<std::string, TestModelType, int>> {};

TEST_P(SinkPattern, MakesTheFirstTokenASink) {
  const auto [shape, type, layers] = GetParam();
  const fs::path dir = temp_dir();
  TestModelOptions o = small_options(shape, type, 1100);
  o.shape.n_layer = layers;
  ThreadPool pool(2);
  o.pool = &pool;
  write_test_model(o, dir / "plain.gguf");
  o.sink_pattern = true;
  write_test_model(o, dir / "sink.gguf");
  const std::vector<double> lambdas = {1e-3, 1e-2, 0.3};
  double mass_plain = 0, mass_sink = 0;
  const std::vector<double> plain = skipped_shares(dir / "plain.gguf", lambdas, 1024, &mass_plain);
  const std::vector<double> sink = skipped_shares(dir / "sink.gguf", lambdas, 1024, &mass_sink);
  std::printf("%s %s, %d layers, 1024 tokens: mass on token 0 %.3f plain, %.3f with the sink; "
              "skipped at lambda 1e-3 / 1e-2 / 0.3: %.3f / %.3f / %.3f plain, %.3f / %.3f / "
              "%.3f with the sink\n",
              shape.c_str(), test_model_type_name(type), layers, mass_plain, mass_sink, plain[0],
              plain[1], plain[2], sink[0], sink[1], sink[2]);
  EXPECT_GT(mass_sink, 0.3);
  EXPECT_LT(mass_plain, 0.05);
  EXPECT_LT(plain[2], 0.05);
  EXPECT_GT(sink[2], 0.6);  // most tiles within reach of lambda
  EXPECT_LT(sink[0], sink[2] - 0.2);  // and lambda sets the share
  EXPECT_LE(sink[0], sink[1]);
  EXPECT_LE(sink[1], sink[2]);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SinkPattern,
    ::testing::Values(std::make_tuple(std::string("llama3-8b"), TestModelType::kQ4_K_M, 2)));

}  // namespace
}  // namespace sinkscope
