// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli make-test-model: the built binary writes one-layer files of the real shapes
// (full vocabulary) whose metadata, tokenizer and tensor types say the shape; bad arguments are
// usage errors (status 2) that name the problem and leave no file behind.
#include <algorithm>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "cli_test_support.h"
#include "engine/format/gguf.h"
#include "engine/model/model.h"
#include "engine/format/testmodel.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/json_io.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using test::CliRun;
using test::run_binary;

fs::path temp_dir() {
  const fs::path d =
      fs::temp_directory_path() / ("sinkscope_cli_testmodel_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

CliRun run_in_process(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  CliRun r;
  r.status = cli::run_cli(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// One layer, the real vocabulary, q4_k_m: everything but the layer count is the real model's.
class CliMakeTestModelShapes : public ::testing::TestWithParam<std::string> {};

TEST_P(CliMakeTestModelShapes, OneLayerFileHasTheShape) {
  const TestShape s = *find_test_model_shape(GetParam());
  const fs::path dir = temp_dir();
  const fs::path path = dir / (s.id + ".gguf");
  const CliRun r = run_binary({"make-test-model", "--shape", s.id, "--type", "q4_k_m", "--out",
                               path.string(), "--layers", "1", "--seed", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  TestShape one = s;
  one.n_layer = 1;
  const auto plan = plan_test_model_tensors(one, TestModelType::kQ4_K_M);
  EXPECT_TRUE(contains(r.out, "wrote " + path.string())) << r.out;
  EXPECT_TRUE(contains(r.out, std::to_string(plan.size()) + " tensors")) << r.out;
  EXPECT_TRUE(contains(r.err, "tensor " + std::to_string(plan.size()) + "/" +
                                  std::to_string(plan.size())))
      << r.err;
  EXPECT_TRUE(contains(r.err, "MB written")) << r.err;

  const auto f = GgufFile::open(path);
  const ModelConfig c = read_model_config(*f);
  EXPECT_EQ(c.architecture, s.architecture);
  EXPECT_EQ(c.n_layer, 1);
  EXPECT_EQ(c.n_embd, s.n_embd);
  EXPECT_EQ(c.n_head, s.n_head);
  EXPECT_EQ(c.n_head_kv, s.n_head_kv);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.n_ff, s.n_ff);
  EXPECT_EQ(c.n_vocab, s.n_vocab);
  EXPECT_EQ(c.n_ctx_train, s.n_ctx);
  EXPECT_EQ(c.rope_theta, s.rope_theta);
  EXPECT_EQ(c.rms_eps, s.rms_eps);
  EXPECT_EQ(c.qkv_bias, s.qkv_bias);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(f->get_int("general.file_type"), 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(f->get_int("general.quantization_version"), 2);

  ASSERT_EQ(f->tensors().size(), plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    const GgufTensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.name, plan[i].name);
    EXPECT_EQ(t.dims, plan[i].dims) << t.name;
    EXPECT_EQ(t.type, plan[i].type) << t.name;
  }
  EXPECT_EQ(f->tensor("output.weight").type, GgmlType::kQ6_K);
  EXPECT_EQ(f->tensor("blk.0.attn_v.weight").type, GgmlType::kQ6_K);  // use_more_bits(0, 1)
  EXPECT_EQ(f->tensor("blk.0.attn_q.weight").type, GgmlType::kQ4_K);

  // info's CUDA estimate with --gpu-weights native: every matrix, the untied LM head included,
  // stays in its file blocks; only the embedding table (looked up, not multiplied) becomes bf16.
  const CliRun info = run_in_process({"info", "--model", path.string(), "--json"});
  ASSERT_EQ(info.status, 0) << info.err;
  const auto info_json = sinkscope::Json::parse(info.out);
  const auto mem = info_json.at("memory");
  // Llama 3.1's RoPE scaling travels as rope_freqs.weight: info names it.
  EXPECT_EQ(info_json.at("config").at("rope_scaling").get<std::string>(),
            s.id == "llama3-8b" ? "llama3" : "none");
  EXPECT_EQ(info_json.at("config").at("rope_freq_factors").get<bool>(), s.id == "llama3-8b");
  const int64_t embd_bytes = int64_t(f->tensor("token_embd.weight").n_bytes);
  EXPECT_EQ(mem.at("cuda").at("weights_native_bytes").get<int64_t>(),
            mem.at("weights_bytes").get<int64_t>() - embd_bytes + int64_t(2) * s.n_vocab * s.n_embd);

  const auto tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(tok->vocab_size(), s.n_vocab);
  const std::string text = "The quick brown fox, 1234!";
  EXPECT_EQ(tok->decode(tok->encode(text, false, false), true), text);
  if (s.id == "llama3-8b") {
    EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "llama-bpe");
    EXPECT_EQ(tok->bos(), 128000);
    EXPECT_EQ(tok->eos(), 128009);
    EXPECT_EQ(tok->find_token("<|eot_id|>"), 128009);
    EXPECT_EQ(tok->find_token("<|reserved_special_token_247|>"), 128255);
    EXPECT_EQ(tok->chat_format(), ChatFormat::kLlama3);
    // Plain text gets the tokenizer's BOS; a chat prompt only the template's own (one BOS).
    EXPECT_EQ(tok->encode("Hi").front(), 128000);
    const std::vector<TokenId> chat = tok->encode_chat({{"user", "Hi"}});
    ASSERT_GE(chat.size(), 2u);
    EXPECT_EQ(chat.front(), 128000);
    EXPECT_EQ(std::count(chat.begin(), chat.end(), TokenId(128000)), 1);
    EXPECT_EQ(chat[1], tok->find_token("<|start_header_id|>"));
    const GgufTensorInfo& rf = f->tensor("rope_freqs.weight");
    EXPECT_EQ(rf.dims, std::vector<int64_t>{64});
    EXPECT_EQ(f->dequantize(rf), llama3_rope_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192));
  } else {
    EXPECT_EQ(f->find_tensor("rope_freqs.weight"), nullptr);
  }
  if (s.id == "qwen2.5-7b") {
    EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "qwen2");
    EXPECT_EQ(tok->bos(), 151643);
    EXPECT_EQ(tok->eos(), 151645);
    EXPECT_EQ(tok->find_token("<|im_end|>"), 151645);
    EXPECT_EQ(tok->find_token("[PAD152063]"), 152063);
    EXPECT_EQ(tok->chat_format(), ChatFormat::kChatML);
    EXPECT_EQ(f->tensor("blk.0.attn_k.bias").dims, std::vector<int64_t>{512});
    EXPECT_EQ(f->tensor("blk.0.attn_q.bias").type, GgmlType::kF32);
  }
  if (s.id == "mistral-7b") {
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(tok->bos(), 1);
    EXPECT_EQ(tok->eos(), 2);
    EXPECT_EQ(tok->find_token("[INST]"), 3);
    EXPECT_EQ(tok->find_token("<0x0A>"), 771 + 10);
    // Its [INST] template is not one SinkScope renders: info and generate --chat say what
    // --chat does instead, and --json names the format.
    EXPECT_EQ(tok->chat_format(), ChatFormat::kNone);
    EXPECT_FALSE(tok->chat_template().empty());
    const CliRun text = run_in_process({"info", "--model", path.string()});
    EXPECT_TRUE(contains(text.out, "none (the model's chat template is not ChatML or Llama 3"))
        << text.out;
    CliRun gen = run_in_process({"generate", "--model", path.string(), "--chat", "--prompt", "Hi",
                                 "--max-tokens", "1", "--threads", "1", "--backend", "cpu"});
    ASSERT_EQ(gen.status, 0) << gen.err;
    EXPECT_TRUE(contains(gen.err, "--chat: the model's chat template is not ChatML or Llama 3"))
        << gen.err;
    gen = run_in_process({"generate", "--model", path.string(), "--chat", "--prompt", "Hi",
                          "--max-tokens", "1", "--threads", "1", "--backend", "cpu", "--json"});
    ASSERT_EQ(gen.status, 0) << gen.err;
    EXPECT_EQ(sinkscope::Json::parse(gen.out).at("chat_format").get<std::string>(), "none");
    EXPECT_TRUE(gen.err.empty()) << gen.err;
  } else {
    const CliRun text = run_in_process({"info", "--model", path.string()});
    EXPECT_FALSE(contains(text.out, "not ChatML or Llama 3")) << text.out;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(RealShapes, CliMakeTestModelShapes,
                         ::testing::Values(std::string("llama3-8b"), std::string("qwen2.5-7b"),
                                           std::string("mistral-7b")),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(CliMakeTestModel, HelpNamesShapesAndTypes) {
  CliRun r = run_in_process({"make-test-model", "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.out, "llama3-8b, qwen2.5-7b, mistral-7b, smollm2-135m")) << r.out;
  EXPECT_TRUE(contains(r.out, "q4_k_m, q8_0, bf16, f32")) << r.out;
  EXPECT_TRUE(contains(r.out, "--test-vocab")) << r.out;
  r = run_in_process({"--help"});
  EXPECT_TRUE(contains(r.out, "make-test-model")) << r.out;
}

TEST(CliMakeTestModel, BadArgumentsAreUsageErrors) {
  const fs::path dir = temp_dir();
  const std::string out = (dir / "m.gguf").string();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--type", "q8_0", "--out", out}, "--shape is required"},
      {{"--shape", "llama3-70b", "--type", "q8_0", "--out", out},
       "--shape: unknown shape 'llama3-70b' (valid: llama3-8b, qwen2.5-7b, mistral-7b, "
       "smollm2-135m)"},
      {{"--shape", "llama3-8b", "--out", out}, "--type is required"},
      {{"--shape", "llama3-8b", "--type", "q4_k_s", "--out", out},
       "--type: unknown type 'q4_k_s' (valid: q4_k_m, q8_0, bf16, f32)"},
      {{"--shape", "llama3-8b", "--type", "q8_0"}, "--out is required"},
      {{"--shape", "llama3-8b", "--type", "q8_0", "--out", "/nonexistent/dir/m.gguf"},
       "--out: directory '/nonexistent/dir' does not exist"},
      {{"--shape", "llama3-8b", "--type", "q8_0", "--out", dir.string()},
       "--out: '" + dir.string() + "' is a directory"},
      {{"--shape", "llama3-8b", "--type", "q8_0", "--out", out, "--layers", "0"}, "--layers"},
      {{"--shape", "llama3-8b", "--type", "q8_0", "--out", out, "--layers", "33"},
       "--layers: '33' is out of range [1, 32]"},
      {{"--shape", "qwen2.5-7b", "--type", "q8_0", "--out", out, "--layers", "29"},
       "--layers: '29' is out of range [1, 28]"},
      {{"--shape", "mistral-7b", "--type", "q8_0", "--out", out, "--test-vocab", "1000"},
       "--test-vocab: '1000' is out of range [1027, 32768]"},
      {{"--shape", "llama3-8b", "--type", "q8_0", "--out", out, "--ctx", "0"}, "--ctx"},
      {{"--shape", "llama3-8b", "--type", "q8_0", "--out", out, "--seed", "-1"}, "--seed"},
      {{"--shape", "llama3-8b", "--type", "q8_0", "--out", out, "--bogus"},
       "unknown option '--bogus'"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"make-test-model"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CliRun r = run_in_process(args);
    EXPECT_EQ(r.status, 2) << c.message;
    EXPECT_TRUE(contains(r.err, "sinkscope-cli make-test-model: error: " + c.message))
        << "want: " << c.message << "\ngot: " << r.err;
    EXPECT_TRUE(contains(r.err, "Try 'sinkscope-cli make-test-model --help'")) << r.err;
  }
  EXPECT_TRUE(fs::is_empty(dir));  // nothing written, no temporary left

  // A directory we may not write to: a read-only one, or (as root, who may write anywhere
  // the mode bits say no) /proc/sys, which the kernel refuses.
  const fs::path ro = dir / "ro";
  fs::create_directories(ro);
  ::chmod(ro.c_str(), 0555);
  fs::path target = ro;
  if (::access(ro.c_str(), W_OK) == 0) target = "/proc/sys";
  if (::access(target.c_str(), W_OK) == 0) {
    ::chmod(ro.c_str(), 0755);
    fs::remove_all(dir);
    GTEST_SKIP() << "no unwritable directory available to test with";
  }
  const CliRun r = run_in_process({"make-test-model", "--shape", "smollm2-135m", "--type",
                                   "q8_0", "--out", (target / "m.gguf").string()});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--out: directory '" + target.string() + "' is not writable"))
      << r.err;
  ::chmod(ro.c_str(), 0755);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sinkscope
