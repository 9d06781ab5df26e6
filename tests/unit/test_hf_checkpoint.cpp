// SPDX-License-Identifier: Apache-2.0
// Hugging Face checkpoints against HF transformers: tiny random-weight llama / qwen2 / qwen3
// models saved by save_pretrained (tests/data/hf, written by tests/oracle/make_hf_oracles.py) in
// BF16 (sharded), F16 and F32, loaded from their directories and run by the CPU backend on the
// oracle's prompts. Tolerance as tests/unit/test_family_oracles.cpp: max |dlogit| <= 1e-3 over
// every position and vocabulary entry, the same argmax everywhere. Also: the llama case as GGUF
// (llama.cpp's permuted Q/K) gives the same logits; the tokenizers match `tokenizers` on a mixed
// corpus; every malformed checkpoint is refused with a message naming the file and the problem.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "engine/backend/backend.h"
#include "engine/format/hf_checkpoint.h"
#include "engine/util/json_io.h"
#include "tests/unit/oracle_support.h"
#include "engine/format/safetensors.h"
#include "engine/model/sampler.h"
#include "engine/util/sha256.h"
#include "engine/tokenizer/unicode.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using oracle::ids_of;
using oracle::kMaxLogitDiff;
using oracle::max_diff;
using oracle::read_file;

const char* const kCases[] = {"llama_bf16_sharded", "qwen2_f16", "qwen3_f32"};

fs::path hf_dir() {
  return fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / "hf";
}

void write_file(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

const Json& manifest() {
  static const Json m = Json::parse(read_file(hf_dir() / "manifest.json"));
  return m;
}

const Json& find_case(const std::string& name) { return oracle::find_case(manifest(), name); }


// Every prompt's logits at every position: one prefill each.
std::vector<float> all_logits(const std::shared_ptr<const Model>& model, const Json& c) {
  BackendOptions opt;
  opt.n_threads = 2;
  auto be = make_cpu_backend(model, opt);
  std::vector<float> all, logits;
  for (const auto& p : c.at("prompts")) {
    be->reset();
    be->forward(ids_of(p.at("ids")), LogitsMode::kAll, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

TEST(HfCheckpoint, ManifestFilesAreIntactAndSmall) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(hf_dir()))
    if (e.is_regular_file()) total += e.file_size();
  EXPECT_LT(total, 3000u * 1000) << "tests/data/hf should stay under 3 MB";
  std::set<std::string> want(std::begin(kCases), std::end(kCases)), got;
  want.insert("gpt_oss_bf16");  // its own tests below (experts, sinks)
  want.insert("phi3_bf16");     // test_phi3.cpp
  for (const char* w : {"mistral_f16_window", "qwen2_window_f32"}) want.insert(w);  // windows
  for (const char* w : {"gemma2_bf16", "gemma3_bf16"}) want.insert(w);  // gemma_checkpoints
  want.insert("gpt_oss_mxfp4");  // test_gpt_oss.cpp
  for (const auto& c : manifest().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    got.insert(name);
    for (const auto& [file, sha] : c.at("files").items())
      EXPECT_EQ(sha256_hex(read_file(hf_dir() / name / file)), sha.get<std::string>())
          << name << "/" << file;
    EXPECT_EQ(sha256_hex(read_file(hf_dir() / c.at("logits_file").get<std::string>())),
              c.at("logits_sha256").get<std::string>())
        << name;
    if (c.contains("gguf")) {
      EXPECT_EQ(sha256_hex(read_file(hf_dir() / c.at("gguf").get<std::string>())),
                c.at("gguf_sha256").get<std::string>());
    }
  }
  EXPECT_EQ(got, want);
}

class HfOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(HfOracle, ConfigAndWeightsAreTheCheckpoints) {
  const Json& c = find_case(GetParam());
  const Json& p = c.at("params");
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>());
  const ModelConfig& cfg = model->config();
  const std::string family = c.at("family").get<std::string>();
  EXPECT_EQ(model->format(), ModelFormat::kSafetensors);
  EXPECT_THROW((void)model->gguf(), ModelError);
  EXPECT_EQ(cfg.architecture, family);
  EXPECT_EQ(cfg.n_layer, p.at("n_layer").get<int>());
  EXPECT_EQ(cfg.n_embd, p.at("d").get<int>());
  EXPECT_EQ(cfg.n_head, p.at("n_head").get<int>());
  EXPECT_EQ(cfg.n_head_kv, p.at("n_head_kv").get<int>());
  EXPECT_EQ(cfg.head_dim,
            p.contains("head_dim") ? p.at("head_dim").get<int>() : cfg.n_embd / cfg.n_head);
  EXPECT_EQ(cfg.n_ff, p.at("n_ff").get<int>());
  EXPECT_EQ(cfg.n_vocab, c.at("n_vocab").get<int>());
  EXPECT_EQ(cfg.n_ctx_train, p.at("n_ctx").get<int>());
  EXPECT_FLOAT_EQ(cfg.rope_theta, float(p.at("theta").get<double>()));
  EXPECT_FLOAT_EQ(cfg.rms_eps, float(p.at("eps").get<double>()));
  EXPECT_EQ(cfg.tied_embeddings, p.at("tied").get<bool>());
  // HF keeps every family's Q/K in the half-split RoPE layout.
  EXPECT_TRUE(cfg.rope_neox);
  EXPECT_EQ(cfg.qkv_bias, family == "qwen2");
  EXPECT_EQ(cfg.qk_norm, family == "qwen3");
  EXPECT_EQ(cfg.rope_scaling,
            p.contains("rope_scaling") ? RopeScalingType::kLlama3 : RopeScalingType::kNone);
  EXPECT_EQ(model->weights().rope_freqs.size(),
            p.contains("rope_scaling") ? size_t(cfg.rope_dim / 2) : 0u);
  // Tokenizer: its own size (the config's vocab_size may pad beyond it), bos / eos.
  EXPECT_EQ(model->tokenizer().vocab_size(), c.at("tokenizer_vocab").get<int>());
  EXPECT_EQ(model->tokenizer().bos(), c.at("bos").is_null() ? -1 : c.at("bos").get<int>());
  EXPECT_EQ(model->tokenizer().eos(), c.at("eos").get<int>());
  EXPECT_TRUE(model->tokenizer().is_eog(c.at("eos").get<int>()));
  // The projections are views of the stored dtype, not float copies.
  const std::string dtype = c.at("dtype").get<std::string>();
  const GgmlType want = dtype == "bfloat16"  ? GgmlType::kBF16
                        : dtype == "float16" ? GgmlType::kF16
                                             : GgmlType::kF32;
  const WeightSummary ws = model->weight_summary();
  ASSERT_EQ(ws.by_type.size(), 1u);
  EXPECT_EQ(ws.by_type.begin()->first, ggml_type_name(want));
  for (const LayerWeights& L : model->weights().layers) {
    for (const QuantMatrix* q : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      EXPECT_EQ(q->type, want);
    EXPECT_EQ(L.wq.rows, cfg.q_dim());
    EXPECT_EQ(L.wq.cols, cfg.n_embd);
    EXPECT_EQ(L.w_down.rows, cfg.n_embd);
    EXPECT_EQ(L.w_down.cols, cfg.n_ff);
    EXPECT_EQ(L.bq.size(), cfg.qkv_bias ? size_t(cfg.q_dim()) : 0u);
    EXPECT_EQ(L.q_norm.size(), cfg.qk_norm ? size_t(cfg.head_dim) : 0u);
  }
  EXPECT_EQ(model->weights().output.empty(), cfg.tied_embeddings);
  // The checkpoint's digest covers its files: stable, and not any one file's.
  EXPECT_EQ(model->sha256().size(), 64u);
  EXPECT_EQ(model->sha256(), Model::load(hf_dir() / c.at("dir").get<std::string>())->sha256());
}

TEST_P(HfOracle, PromptsTokenizeAsTransformersDoes) {
  const Json& c = find_case(GetParam());
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>() / "config.json");
  const Tokenizer& tok = model->tokenizer();
  for (const auto& p : c.at("prompts")) {
    if (p.contains("text")) {
      // add_bos as the tokenizer says (Llama 3: its post-processor adds <|begin_of_text|>).
      EXPECT_EQ(tok.encode(p.at("text").get<std::string>()), ids_of(p.at("ids")));
    } else {
      std::vector<ChatMessage> msgs;
      for (const auto& m : p.at("chat"))
        msgs.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
      const std::string text = tok.apply_chat_template(msgs);
      EXPECT_EQ(text, c.at("chat_text").get<std::string>());
      EXPECT_EQ(tok.encode_chat(msgs), ids_of(p.at("ids")));
    }
  }
}

TEST_P(HfOracle, LogitsAndArgmaxMatchTransformers) {
  const std::string name = GetParam();
  const Json& c = find_case(name);
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>());
  const int V = model->config().n_vocab;
  const std::string bin = read_file(hf_dir() / c.at("logits_file").get<std::string>());
  size_t rows = 0;
  for (const auto& pr : c.at("prompts")) rows += pr.at("ids").size();
  ASSERT_EQ(bin.size(), rows * size_t(V) * sizeof(float)) << "logits file is truncated";
  const float* ref = reinterpret_cast<const float*>(bin.data());

  BackendOptions opt;
  opt.n_threads = 2;
  auto be = make_cpu_backend(model, opt);
  oracle::PromptAgreement g;
  size_t row0 = 0;
  for (size_t pi = 0; pi < c.at("prompts").size(); ++pi) {
    const auto ids = ids_of(c.at("prompts")[pi].at("ids"));
    oracle::check_prompt(*be, ids, ids_of(c.at("argmax")[pi]), ref + row0 * V, V, name, g);
    if (::testing::Test::HasFatalFailure()) return;
    row0 += ids.size();
  }
  EXPECT_LE(g.prefill, kMaxLogitDiff) << name << ": prefill";
  EXPECT_LE(g.decode, kMaxLogitDiff) << name << ": prefill + decode";
  EXPECT_EQ(g.agree, g.total) << name << ": argmax agreement (prefill)";
  EXPECT_EQ(g.agree_dec, g.total) << name << ": argmax agreement (prefill + decode)";
  std::printf("[hf-oracle] %-20s max |dlogit| prefill %.2e, prefill+decode %.2e, argmax %d/%d\n",
              name.c_str(), g.prefill, g.decode, g.agree, g.total);
}

INSTANTIATE_TEST_SUITE_P(Cases, HfOracle, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

// The same llama weights as GGUF (Q/K rows permuted for adjacent-pair RoPE, rope_freqs.weight)
// and as safetensors (half-split Q/K, RoPE factors from config.json) give the same model.
TEST(HfCheckpoint, LlamaGgufAndSafetensorsGiveTheSameLogits) {
  const Json& c = find_case("llama_bf16_sharded");
  auto st = Model::load(hf_dir() / c.at("dir").get<std::string>());
  auto gg = Model::load(hf_dir() / c.at("gguf").get<std::string>());
  EXPECT_EQ(gg->format(), ModelFormat::kGguf);
  EXPECT_TRUE(st->config().rope_neox);
  EXPECT_FALSE(gg->config().rope_neox);
  ASSERT_EQ(st->weights().rope_freqs.size(), gg->weights().rope_freqs.size());
  for (size_t i = 0; i < st->weights().rope_freqs.size(); ++i)
    EXPECT_NEAR(st->weights().rope_freqs[i], gg->weights().rope_freqs[i], 1e-6) << i;
  EXPECT_EQ(st->tokenizer().vocab_size(), gg->tokenizer().vocab_size());
  const std::string text = c.at("prompts")[0].at("text").get<std::string>();
  EXPECT_EQ(st->tokenizer().encode(text), gg->tokenizer().encode(text));
  const std::vector<float> a = all_logits(st, c), b = all_logits(gg, c);
  ASSERT_EQ(a.size(), b.size());
  // Row permutations and the two pairings compute the same products; only the RoPE factors'
  // float rounding (double here, float32 in the converter) may differ.
  EXPECT_LE(max_diff(a.data(), b.data(), a.size(), "gguf vs safetensors"), 1e-4);
}

// ---- tokenizer.json against `tokenizers` ---------------------------------------------------

std::unique_ptr<Tokenizer> hf_tokenizer(const std::string& kind) {
  HfTokenizerFiles f;
  if (kind == "llama3" || kind == "qwen2") {
    const fs::path d = hf_dir() / (kind == "llama3" ? "llama_bf16_sharded" : "qwen2_f16");
    f.tokenizer_json = read_file(d / "tokenizer.json");
    f.tokenizer_config_json = read_file(d / "tokenizer_config.json");
    f.source = d.string();
  } else {
    const fs::path d = hf_dir() / "tokenizers" / kind;
    f.tokenizer_json = read_file(d / "tokenizer.json");
    f.source = d.string();
  }
  return Tokenizer::from_hf(f);
}

class HfTokenizerCorpus : public ::testing::TestWithParam<const char*> {};

TEST_P(HfTokenizerCorpus, IdsAndRoundTripMatchTokenizers) {
  const std::string kind = GetParam();
  const auto tok = hf_tokenizer(kind);
  const Json& want = manifest().at("tokenizer_corpus").at(kind);
  const Json& corpus = manifest().at("corpus");
  ASSERT_EQ(corpus.size(), want.at("ids").size());
  int multi_byte_lines = 0;
  const bool spm = kind.size() > 4 && (kind.ends_with("_spm") || kind == "metaspace_split");
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string line = corpus[i].get<std::string>();
    const auto ids = tok->encode(line, /*parse_special=*/false, /*add_bos=*/false);
    EXPECT_EQ(ids, ids_of(want.at("ids")[i])) << kind << " line " << i << ": " << line;
    EXPECT_EQ(tok->decode(ids), want.at("decoded")[i].get<std::string>()) << kind << " line " << i;
    // tokenizers' own round trip loses a leading space under Metaspace (no prefix was added,
    // the decoder strips one all the same) and NFC changes decomposed text; SinkScope matches
    // its decode, checked above, and round trips wherever it does.
    const std::string decoded = want.at("decoded")[i].get<std::string>();
    if (decoded == line) EXPECT_EQ(tok->decode(ids), line) << kind << " line " << i;
    std::string pieces;
    for (TokenId id : ids) pieces += tok->token_to_piece(id);
    // SentencePiece-style pieces keep the U+2581 prefix encoding added (decode drops it).
    const bool prefixed = spm && kind != "gemma_spm" && !line.empty() &&
                          (kind == "llama2_spm" || line[0] != ' ');
    EXPECT_EQ(pieces, prefixed ? " " + line : spm ? line : decoded) << kind << " line " << i;
    for (unsigned char ch : line) multi_byte_lines += ch >= 0x80;
  }
  EXPECT_GT(multi_byte_lines, 0) << "the corpus must hold non-ASCII text";
  EXPECT_EQ(tok->encode("<|im_start|>user\nhi<|im_end|>x<|eot_id|>", /*parse_special=*/true,
                        /*add_bos=*/false),
            ids_of(want.at("with_special")));
  if (want.contains("with_spm_special")) {
    // Each fragment between added tokens gets the prefix its scheme gives it.
    EXPECT_EQ(tok->encode("<s>hi there</s> and<s> x", /*parse_special=*/true, /*add_bos=*/false),
              ids_of(want.at("with_spm_special")))
        << kind;
    EXPECT_EQ(tok->model_name(), "llama");
  }
}

// unicode::nfc against Python's unicodedata (the manifest's "nfc" pairs: composition, Hangul,
// singletons, exclusions, reordering of combining marks, blocking).
TEST(HfTokenizer, NfcMatchesUnicodedata) {
  int changed = 0;
  for (const auto& pair : manifest().at("nfc")) {
    const std::string in = pair[0].get<std::string>(), want = pair[1].get<std::string>();
    EXPECT_EQ(unicode::nfc(in), want) << in;
    changed += in != want;
  }
  EXPECT_GT(changed, 10);
  EXPECT_EQ(unicode::nfc("\xff\xfe e\xcc\x81"), "\xff\xfe e\xcc\x81");  // not UTF-8: as given
}

// SentencePiece-style steps other than the supported ones are named.
TEST(HfTokenizer, UnsupportedSentencePieceStepsAreNamed) {
  auto error = [](const char* kind, const std::function<void(Json&)>& edit) {
    Json j = Json::parse(read_file(hf_dir() / "tokenizers" / kind / "tokenizer.json"));
    edit(j);
    HfTokenizerFiles f;
    f.tokenizer_json = j.dump();
    f.source = "ckpt";
    try {
      Tokenizer::from_hf(f);
    } catch (const TokenizerError& e) {
      return std::string(e.what());
    }
    return std::string("(built without error)");
  };
  EXPECT_EQ(error("mistral_spm", [](Json&) {}), "(built without error)");
  std::string e = error("mistral_spm", [](Json& j) { j["pre_tokenizer"]["prepend_scheme"] = "odd"; });
  EXPECT_NE(e.find("Metaspace prepend_scheme 'odd' is not supported"), std::string::npos) << e;
  e = error("llama2_spm", [](Json& j) { j["decoder"] = Json{{"type", "WordPiece"}}; });
  EXPECT_NE(e.find("decoder WordPiece is not supported in a SentencePiece-style"),
            std::string::npos) << e;
  e = error("gemma_spm", [](Json& j) { j["pre_tokenizer"] = Json{{"type", "Whitespace"}}; });
  EXPECT_NE(e.find("pre_tokenizer Whitespace is not supported in a SentencePiece-style"),
            std::string::npos) << e;
  e = error("gemma_spm", [](Json& j) { j["normalizer"] = Json{{"type", "NFKC"}}; });
  EXPECT_NE(e.find("normalizer NFKC is not supported"), std::string::npos) << e;
  e = error("llama2_spm", [](Json& j) { j["model"]["type"] = "Unigram"; });
  EXPECT_NE(e.find("model type Unigram is not supported"), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(Kinds, HfTokenizerCorpus,
                         ::testing::Values("gpt2", "smollm", "qwen2", "llama3", "llama2_spm",
                                           "mistral_spm", "gemma_spm", "metaspace_split"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

std::string tokenizer_error(const std::function<void(Json&)>& edit) {
  Json j = Json::parse(read_file(hf_dir() / "qwen2_f16" / "tokenizer.json"));
  edit(j);
  HfTokenizerFiles f;
  f.tokenizer_json = j.dump();
  f.source = "ckpt";
  try {
    Tokenizer::from_hf(f);
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(built without error)";
}

TEST(HfTokenizer, UnsupportedKindsAreNamed) {
  std::string e = tokenizer_error([](Json& j) {
    j["pre_tokenizer"] = Json{{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}};
  });
  // Metaspace makes it SentencePiece-style, where Qwen2's ByteLevel decoder is not supported.
  EXPECT_NE(e.find("ckpt/tokenizer.json: decoder ByteLevel is not supported in a "
                   "SentencePiece-style tokenizer"),
            std::string::npos)
      << e;
  e = tokenizer_error([](Json& j) { j["model"]["type"] = "Unigram"; });
  EXPECT_NE(e.find("model type Unigram is not supported"), std::string::npos) << e;
  e = tokenizer_error([](Json& j) { j["model"]["byte_fallback"] = true; });
  EXPECT_NE(e.find("SentencePiece-style"), std::string::npos) << e;
  e = tokenizer_error([](Json& j) { j["normalizer"] = Json{{"type", "Lowercase"}}; });
  EXPECT_NE(e.find("normalizer Lowercase is not supported"), std::string::npos) << e;
  e = tokenizer_error(
      [](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; });
  EXPECT_NE(e.find("Split with the regex '\\w+'"), std::string::npos) << e;
  // Values of an unexpected JSON type are refused, never thrown past the reader.
  e = tokenizer_error([](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = 5; });
  EXPECT_NE(e.find("Split with behavior ''"), std::string::npos) << e;
  e = tokenizer_error([](Json& j) { j["added_tokens"][0]["special"] = "yes"; });
  EXPECT_EQ(e, "(built without error)");
  e = tokenizer_error([](Json& j) { j["model"]["vocab"]["x"] = "seven"; });
  EXPECT_NE(e.find("model.vocab entry 'x' has no valid id"), std::string::npos) << e;
  e = tokenizer_error([](Json& j) { j["model"].erase("merges"); });
  EXPECT_NE(e.find("model.merges is missing"), std::string::npos) << e;
  e = tokenizer_error([](Json& j) { j = Json::array(); });
  EXPECT_NE(e.find("not a JSON object"), std::string::npos) << e;
  HfTokenizerFiles f;
  f.tokenizer_json = "{\"model\": ";
  f.source = "ckpt";
  EXPECT_THROW(Tokenizer::from_hf(f), TokenizerError);
  // The unmodified file builds.
  EXPECT_EQ(tokenizer_error([](Json&) {}), "(built without error)");
}

// ---- safetensors --------------------------------------------------------------------------

// A safetensors image: header JSON (padded to 8 bytes with spaces, as the reference writer
// does) and data.
std::string safetensors_image(const Json& header, const std::string& data) {
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h += ' ';
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

std::string st_error(const std::string& image) {
  try {
    SafetensorsFile::from_memory(reinterpret_cast<const uint8_t*>(image.data()), image.size(),
                                 "x.safetensors");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(parsed without error)";
}

TEST(Safetensors, ParsesTensorsAndMetadata) {
  Json h = {{"__metadata__", {{"format", "pt"}}},
            {"a", {{"dtype", "BF16"}, {"shape", {2, 2}}, {"data_offsets", {0, 8}}}},
            {"b", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {8, 12}}}}};
  std::string data(12, '\0');
  const float one = 1.0f;
  std::memcpy(data.data() + 8, &one, 4);
  const std::string img = safetensors_image(h, data);
  auto f = SafetensorsFile::from_memory(reinterpret_cast<const uint8_t*>(img.data()), img.size());
  ASSERT_EQ(f->tensors().size(), 2u);
  const SafetensorsTensor* b = f->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->ggml_type(), GgmlType::kF32);
  float v;
  std::memcpy(&v, b->data, 4);
  EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(f->find("a")->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(f->find("a")->n_bytes, 8u);
  ASSERT_EQ(f->metadata().size(), 1u);
  EXPECT_EQ(f->metadata()[0].second, "pt");
  EXPECT_EQ(f->find("c"), nullptr);
}

TEST(Safetensors, MalformedFilesAreNamed) {
  auto tensor = [](const char* dtype, Json shape, uint64_t b, uint64_t e) {
    return Json{{"t", {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {b, e}}}}};
  };
  EXPECT_NE(st_error("abc").find("x.safetensors: file truncated"), std::string::npos);
  std::string big(8, '\0');
  big[0] = char(0x40);  // header length 64, nothing follows
  EXPECT_NE(st_error(big).find("file truncated: the header needs 64 bytes"), std::string::npos);
  big[7] = char(0x7f);  // absurd length
  EXPECT_NE(st_error(big).find("beyond the"), std::string::npos);
  EXPECT_NE(st_error(safetensors_image(Json::array(), "")).find("not a JSON object"),
            std::string::npos);
  std::string bad_json(8, '\0');
  bad_json[0] = 3;
  bad_json += "{x}";
  EXPECT_NE(st_error(bad_json).find("header is not valid JSON"), std::string::npos);
  EXPECT_NE(st_error(safetensors_image(tensor("F32", {4}, 0, 16), "")).find("lies outside"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors_image(tensor("F32", {4}, 0, 12), std::string(16, '\0')))
                .find("needs 4 x 4 bytes but its data_offsets span 12"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors_image(tensor("Q4", {4}, 0, 4), std::string(4, '\0')))
                .find("unknown dtype 'Q4'"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors_image(tensor("F32", {-1}, 0, 4), std::string(4, '\0')))
                .find("not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors_image(tensor("F32", {uint64_t(1) << 62, uint64_t(1) << 62}, 0, 4),
                                       std::string(4, '\0')))
                .find("element count overflows"),
            std::string::npos);
  Json overlap = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                  {"b", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {4, 8}}}}};
  EXPECT_NE(st_error(safetensors_image(overlap, std::string(8, '\0'))).find("overlap"),
            std::string::npos);
  EXPECT_NE(st_error(safetensors_image(Json{{"t", 3}}, "")).find("tensor 't' is not an object"),
            std::string::npos);
}

// ---- malformed checkpoints ----------------------------------------------------------------

// A copy of a case's directory in a fresh temp folder, changed by `edit`.
fs::path copy_case(const std::string& name, const std::string& tag,
                   const std::function<void(const fs::path&)>& edit) {
  const fs::path dir =
      fs::temp_directory_path() / ("sinkscope_hf_" + std::to_string(getpid())) / (name + "_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  fs::copy(hf_dir() / name, dir, fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(dir))
    fs::permissions(e.path(), fs::perms::owner_read | fs::perms::owner_write);
  edit(dir);
  return dir;
}

std::string load_error(const fs::path& p) {
  try {
    Model::load(p);
  } catch (const ModelError& e) {
    return std::string("ModelError: ") + e.what();
  } catch (const TokenizerError& e) {
    return std::string("TokenizerError: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
  return "(loaded without error)";
}

// gpt-oss from its Hugging Face checkpoint (tests/data/hf/gpt_oss_bf16, transformers'
// GptOssForCausalLM saved in bfloat16): config, the experts rewritten into the engine's rows,
// and the logits against transformers' at the tolerance of every oracle.
TEST(HfCheckpoint, GptOssConfigAndLogitsMatchTransformers) {
  const std::string name = "gpt_oss_bf16";
  const Json& c = find_case(name);
  const Json& p = c.at("params");
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>());
  const ModelConfig& cfg = model->config();
  EXPECT_EQ(cfg.architecture, "gpt-oss");
  EXPECT_TRUE(cfg.gpt_oss && cfg.attn_sinks && cfg.o_bias && cfg.qkv_bias);
  EXPECT_EQ(cfg.n_expert, p.at("n_expert").get<int>());
  EXPECT_EQ(cfg.n_expert_used, p.at("n_expert_used").get<int>());
  EXPECT_EQ(cfg.layer_window(0), p.at("window").get<int>());
  EXPECT_EQ(cfg.layer_window(1), 0);
  EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kYarn);
  EXPECT_FLOAT_EQ(cfg.rope_scale_factor, 32.0f);
  EXPECT_EQ(cfg.rope_orig_ctx, 64);
  EXPECT_FALSE(cfg.yarn_truncate);
  for (const LayerWeights& L : model->weights().layers) {
    EXPECT_EQ(L.sinks.size(), size_t(cfg.n_head));
    ASSERT_EQ(L.exp_gate.size(), size_t(cfg.n_expert));
    EXPECT_EQ(L.exp_gate[0].type, GgmlType::kF32);
    EXPECT_EQ(L.exp_down[3].rows, cfg.n_embd);
    EXPECT_EQ(L.exp_down[3].cols, cfg.n_ff);
    EXPECT_EQ(L.router.type, GgmlType::kBF16);
  }
  const int V = cfg.n_vocab;
  const std::string bin = read_file(hf_dir() / c.at("logits_file").get<std::string>());
  size_t rows = 0;
  for (const auto& pr : c.at("prompts")) rows += pr.at("ids").size();
  ASSERT_EQ(bin.size(), rows * size_t(V) * sizeof(float)) << "logits file is truncated";
  const float* ref = reinterpret_cast<const float*>(bin.data());
  BackendOptions opt;
  opt.n_threads = 2;
  auto be = make_cpu_backend(model, opt);
  oracle::PromptAgreement g;
  size_t row0 = 0;
  for (size_t pi = 0; pi < c.at("prompts").size(); ++pi) {
    const auto ids = ids_of(c.at("prompts")[pi].at("ids"));
    // The text prompts tokenize as transformers did.
    if (c.at("prompts")[pi].contains("text"))
      EXPECT_EQ(model->tokenizer().encode(c.at("prompts")[pi].at("text").get<std::string>()), ids);
    oracle::check_prompt(*be, ids, ids_of(c.at("argmax")[pi]), ref + row0 * V, V, name, g);
    if (::testing::Test::HasFatalFailure()) return;
    row0 += ids.size();
  }
  EXPECT_LE(g.prefill, kMaxLogitDiff) << "prefill";
  EXPECT_LE(g.decode, kMaxLogitDiff) << "prefill + decode";
  EXPECT_EQ(g.agree, g.total);
  EXPECT_EQ(g.agree_dec, g.total);
  std::printf("[hf-oracle] %-20s max |dlogit| prefill %.2e, prefill+decode %.2e, argmax %d/%d\n",
              name.c_str(), g.prefill, g.decode, g.agree, g.total);
}

void edit_json(const fs::path& file, const std::function<void(Json&)>& edit) {
  Json j = Json::parse(read_file(file));
  edit(j);
  write_file(file, j.dump(1));
}

// Rewrites a shard with `edit` applied to its header (tensor data kept as is).
void edit_shard(const fs::path& file, const std::function<void(Json&, std::string&)>& edit) {
  const std::string img = read_file(file);
  uint64_t n = 0;
  std::memcpy(&n, img.data(), 8);
  Json h = Json::parse(img.substr(8, n));
  std::string data = img.substr(8 + n);
  edit(h, data);
  write_file(file, safetensors_image(h, data));
}

#define EXPECT_LOAD_ERROR(path, ...)                                                     \
  do {                                                                                   \
    const std::string e_ = load_error(path);                                             \
    for (const char* part : {__VA_ARGS__})                                               \
      EXPECT_NE(e_.find(part), std::string::npos) << "want '" << part << "' in: " << e_; \
  } while (0)

TEST(HfCheckpoint, MissingFilesAreNamed) {
  fs::path d =
      copy_case("qwen2_f16", "no_config", [](const fs::path& d) { fs::remove(d / "config.json"); });
  // Without config.json the directory is still read as a checkpoint, and the file is named.
  EXPECT_LOAD_ERROR(d, "ModelError", "config.json: missing");
  d = copy_case("qwen2_f16", "no_tokenizer",
                [](const fs::path& d) { fs::remove(d / "tokenizer.json"); });
  EXPECT_LOAD_ERROR(d, "ModelError", "tokenizer.json: missing");
  d = copy_case("qwen2_f16", "no_weights",
                [](const fs::path& d) { fs::remove(d / "model.safetensors"); });
  EXPECT_LOAD_ERROR(d, "ModelError", "no model.safetensors or model.safetensors.index.json");
  d = copy_case("llama_bf16_sharded", "no_shard",
                [](const fs::path& d) { fs::remove(d / "model-00002-of-00003.safetensors"); });
  EXPECT_LOAD_ERROR(d, "ModelError", "model-00002-of-00003.safetensors: missing",
                    "model.safetensors.index.json");
}

TEST(HfCheckpoint, MissingTensorsAreNamed) {
  fs::path d = copy_case("qwen2_f16", "no_bias", [](const fs::path& d) {
    edit_shard(d / "model.safetensors",
               [](Json& h, std::string&) { h.erase("model.layers.1.self_attn.k_proj.bias"); });
  });
  EXPECT_LOAD_ERROR(d, "ModelError", "missing tensor 'model.layers.1.self_attn.k_proj.bias'");
  d = copy_case("qwen3_f32", "no_q_norm", [](const fs::path& d) {
    edit_shard(d / "model.safetensors",
               [](Json& h, std::string&) { h.erase("model.layers.0.self_attn.q_norm.weight"); });
  });
  EXPECT_LOAD_ERROR(d, "missing tensor 'model.layers.0.self_attn.q_norm.weight'");
  // The index places a tensor in a shard that does not hold it.
  d = copy_case("llama_bf16_sharded", "index_lies", [](const fs::path& d) {
    edit_json(d / "model.safetensors.index.json", [](Json& j) {
      j["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors";
      j["weight_map"]["lm_head.weight"] = "model-00001-of-00003.safetensors";
    });
  });
  const std::string e = load_error(d);
  EXPECT_NE(e.find("model-00001-of-00003.safetensors: tensor '"), std::string::npos) << e;
  EXPECT_NE(e.find("is missing (model.safetensors.index.json places it in this shard)"),
            std::string::npos)
      << e;
  // Untied model without lm_head.weight.
  d = copy_case("llama_bf16_sharded", "no_head", [](const fs::path& d) {
    for (const auto& f : fs::directory_iterator(d)) {
      if (f.path().extension() != ".safetensors") continue;
      edit_shard(f.path(), [](Json& h, std::string&) { h.erase("lm_head.weight"); });
    }
    edit_json(d / "model.safetensors.index.json",
              [](Json& j) { j["weight_map"].erase("lm_head.weight"); });
  });
  EXPECT_LOAD_ERROR(d, "missing tensor 'lm_head.weight'");
}

TEST(HfCheckpoint, GptOssErrorsAreNamed) {
  fs::path d = copy_case("gpt_oss_bf16", "no_sinks", [](const fs::path& d) {
    edit_shard(d / "model.safetensors",
               [](Json& h, std::string&) { h.erase("model.layers.1.self_attn.sinks"); });
  });
  EXPECT_LOAD_ERROR(d, "missing tensor 'model.layers.1.self_attn.sinks'");
  d = copy_case("gpt_oss_bf16", "no_down_bias", [](const fs::path& d) {
    edit_shard(d / "model.safetensors", [](Json& h, std::string&) {
      h.erase("model.layers.0.mlp.experts.down_proj_bias");
    });
  });
  EXPECT_LOAD_ERROR(d, "missing tensor 'model.layers.0.mlp.experts.down_proj_bias'");
  d = copy_case("gpt_oss_bf16", "experts_width", [](const fs::path& d) {
    edit_json(d / "config.json", [](Json& j) { j["intermediate_size"] = 16; });
  });
  EXPECT_LOAD_ERROR(d, "'model.layers.0.mlp.experts.gate_up_proj' has shape [4, 32, 64], "
                       "expected [4, 32, 32]");
  // A half-packed layer (test_gpt_oss.cpp reads packed ones) is named, not misread.
  d = copy_case("gpt_oss_bf16", "packed", [](const fs::path& d) {
    edit_shard(d / "model.safetensors", [](Json& h, std::string&) {
      h["model.layers.0.mlp.experts.down_proj_blocks"] = h["model.layers.0.mlp.experts.down_proj"];
      h.erase("model.layers.0.mlp.experts.down_proj");
    });
  });
  EXPECT_LOAD_ERROR(d, "missing tensor 'model.layers.0.mlp.experts.gate_up_proj_blocks'");
  d = copy_case("gpt_oss_bf16", "layer_types", [](const fs::path& d) {
    edit_json(d / "config.json",
              [](Json& j) { j["layer_types"] = {"full_attention", "sliding_attention"}; });
  });
  EXPECT_LOAD_ERROR(d, "layer_types[0] is not 'sliding_attention'");
  d = copy_case("gpt_oss_bf16", "top_k", [](const fs::path& d) {
    edit_json(d / "config.json", [](Json& j) { j["num_experts_per_tok"] = 5; });
  });
  EXPECT_LOAD_ERROR(d, "num_experts_per_tok 5 exceeds num_local_experts 4");
}

TEST(HfCheckpoint, ShapeAndDtypeMismatchesAreNamed) {
  fs::path d = copy_case("qwen2_f16", "ffn_width", [](const fs::path& d) {
    edit_json(d / "config.json", [](Json& j) { j["intermediate_size"] = 96; });
  });
  EXPECT_LOAD_ERROR(d,
                    "model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape "
                    "[64, 32], expected [96, 32]");
  d = copy_case("qwen2_f16", "int_weights", [](const fs::path& d) {
    edit_shard(d / "model.safetensors", [](Json& h, std::string&) {
      h["model.layers.0.mlp.up_proj.weight"]["dtype"] = "I16";
    });
  });
  EXPECT_LOAD_ERROR(d,
                    "tensor 'model.layers.0.mlp.up_proj.weight' has dtype I16, which "
                    "SinkScope cannot read (F32, F16, BF16)");
  d = copy_case("qwen2_f16", "vocab", [](const fs::path& d) {
    edit_json(d / "config.json", [](Json& j) { j["vocab_size"] = 100; });
  });
  EXPECT_LOAD_ERROR(d, "tokenizer has 403 tokens but config.json's vocab_size is only 100");
}

TEST(HfCheckpoint, TruncatedShardsAreNamed) {
  fs::path d = copy_case("qwen2_f16", "short_header", [](const fs::path& d) {
    write_file(d / "model.safetensors", read_file(d / "model.safetensors").substr(0, 40));
  });
  EXPECT_LOAD_ERROR(d, "model.safetensors: file truncated: the header needs");
  d = copy_case("qwen2_f16", "short_data", [](const fs::path& d) {
    const std::string s = read_file(d / "model.safetensors");
    write_file(d / "model.safetensors", s.substr(0, s.size() - 100));
  });
  EXPECT_LOAD_ERROR(d, "model.safetensors: tensor '", "lies outside the data section");
  d = copy_case("qwen2_f16", "tiny",
                [](const fs::path& d) { write_file(d / "model.safetensors", "abc"); });
  EXPECT_LOAD_ERROR(d, "model.safetensors: file truncated: 3 bytes");
}

TEST(HfCheckpoint, UnsupportedConfigsAreNamed) {
  auto with_config = [](const std::string& tag, const std::function<void(Json&)>& edit) {
    return copy_case("qwen2_f16", tag,
                     [&](const fs::path& d) { edit_json(d / "config.json", edit); });
  };
  EXPECT_LOAD_ERROR(with_config("gemma", [](Json& j) { j["model_type"] = "gemma"; }),
                    "config.json: model_type 'gemma' is not supported (supported: llama, "
                    "mistral, qwen2, qwen3, gpt_oss, phi3, gemma2, gemma3_text)");
  EXPECT_LOAD_ERROR(with_config("no_type", [](Json& j) { j.erase("model_type"); }),
                    "config.json: missing key 'model_type'");
  EXPECT_LOAD_ERROR(with_config("no_width", [](Json& j) { j.erase("hidden_size"); }),
                    "config.json: missing key 'hidden_size'");
  EXPECT_LOAD_ERROR(with_config("heads", [](Json& j) { j["num_key_value_heads"] = 3; }),
                    "num_attention_heads 4 is not a multiple of num_key_value_heads 3");
  EXPECT_LOAD_ERROR(with_config("yarn",
                                [](Json& j) {
                                  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
                                }),
                    "rope scaling 'yarn' needs 'original_max_position_embeddings'");
  EXPECT_LOAD_ERROR(with_config("yarn_mscale",
                                [](Json& j) {
                                  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0},
                                                          {"original_max_position_embeddings", 64},
                                                          {"mscale", 0.7}};
                                }),
                    "rope scaling 'yarn' with 'mscale' is not supported");
  EXPECT_LOAD_ERROR(with_config("window",
                                [](Json& j) {
                                  j["use_sliding_window"] = true;
                                  j["sliding_window"] = "wide";
                                }),
                    "'sliding_window' = \"wide\" is not a window");
  EXPECT_LOAD_ERROR(with_config("window_kinds",
                                [](Json& j) {
                                  j["use_sliding_window"] = true;
                                  j["sliding_window"] = 8;
                                  j["layer_types"] = {"full_attention", "chunked_attention"};
                                }),
                    "layer_types[1] = 'chunked_attention' (supported: sliding_attention, "
                    "full_attention)");
  EXPECT_LOAD_ERROR(with_config("qwen3_window",
                                [](Json& j) {
                                  j["model_type"] = "qwen3";
                                  j["use_sliding_window"] = true;
                                }),
                    "sliding_window attention is not supported for qwen3");
  EXPECT_LOAD_ERROR(with_config("gelu", [](Json& j) { j["hidden_act"] = "gelu"; }),
                    "hidden_act 'gelu' is not supported");
  EXPECT_LOAD_ERROR(with_config("not_json", [](Json& j) { j = "x"; }),
                    "config.json: not a JSON object");
  // A mistral checkpoint is read as llama, its window on every layer (test_model_windows.cpp);
  // LlamaForCausalLM ignores the key, and so does the engine.
  fs::path d = copy_case("llama_bf16_sharded", "llama_window", [](const fs::path& d) {
    edit_json(d / "config.json", [](Json& j) { j["sliding_window"] = 4096; });
  });
  EXPECT_EQ(Model::load(d)->config().sliding_window, 0);
  d = copy_case("llama_bf16_sharded", "mistral_full", [](const fs::path& d) {
    edit_json(d / "config.json", [](Json& j) {
      j["model_type"] = "mistral";
      j["sliding_window"] = nullptr;
    });
  });
  EXPECT_EQ(load_error(d), "(loaded without error)");
  EXPECT_EQ(Model::load(d)->config().sliding_window, 0);
  d = copy_case("llama_bf16_sharded", "bias", [](const fs::path& d) {
    edit_json(d / "config.json", [](Json& j) { j["attention_bias"] = true; });
  });
  EXPECT_LOAD_ERROR(d, "attention_bias true");
  d = copy_case("qwen2_f16", "metaspace", [](const fs::path& d) {
    edit_json(d / "tokenizer.json", [](Json& j) {
      j["pre_tokenizer"] = Json{{"type", "Metaspace"}};
    });
  });
  EXPECT_LOAD_ERROR(d, "TokenizerError",
                    "tokenizer.json: decoder ByteLevel is not supported in a SentencePiece-style");
  fs::remove_all(d.parent_path());
}

TEST(HfCheckpoint, PathsThatAreNotCheckpoints) {
  EXPECT_FALSE(is_hf_checkpoint_path(hf_dir() / "llama_bf16_sharded.gguf"));
  EXPECT_TRUE(is_hf_checkpoint_path(hf_dir() / "qwen2_f16"));
  EXPECT_TRUE(is_hf_checkpoint_path(hf_dir() / "qwen2_f16" / "config.json"));
  EXPECT_EQ(hf_checkpoint_dir(hf_dir() / "qwen2_f16" / "config.json"), hf_dir() / "qwen2_f16");
}

}  // namespace
}  // namespace sinkscope
