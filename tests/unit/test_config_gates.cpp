// SPDX-License-Identifier: Apache-2.0
// Quality gates on synthetic metric inputs (bounds inclusive, NaN fails with a reason) and the
// llama.cpp flag export with its notes on what has no equivalent.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/config/llama_cpp_export.h"

using namespace sinkscope;

// --- gates --------------------------------------------------------------------------------------

namespace {

ValidationResults good_results() {
  ValidationResults r;
  r.ppl_delta_pct = 1.2;
  r.rouge_l = 0.97;
  r.top1_agreement = 0.98;
  r.passkey_accuracy = 1.0;
  return r;
}

const GateOutcome& outcome(const GateReport& g, const std::string& name) {
  for (const auto& o : g.gates)
    if (o.name == name) return o;
  throw std::runtime_error("no gate " + name);
}

}  // namespace

TEST(ConfigGates, AllPass) {
  const GateReport g = evaluate_gates(good_results(), QualityGates{}, 1.0);
  EXPECT_TRUE(g.passed) << g.summary();
  EXPECT_EQ(g.gates.size(), 4u);
  EXPECT_EQ(g.summary(), "all gates passed");
}

TEST(ConfigGates, ExactlyAtTheGatePasses) {
  ValidationResults r;
  r.ppl_delta_pct = 5.0;
  r.rouge_l = 0.95;
  r.top1_agreement = 0.95;
  r.passkey_accuracy = 0.9;
  const GateReport g = evaluate_gates(r, QualityGates{5.0, 0.95}, 0.9);
  EXPECT_TRUE(g.passed) << g.summary();
}

TEST(ConfigGates, EachGateFailsWithItsReason) {
  ValidationResults r = good_results();
  r.ppl_delta_pct = std::nextafter(5.0, 10.0);
  GateReport g = evaluate_gates(r, QualityGates{}, 1.0);
  EXPECT_FALSE(g.passed);
  EXPECT_FALSE(outcome(g, "ppl_delta_pct").passed);
  EXPECT_TRUE(outcome(g, "rouge_l").passed);
  EXPECT_NE(g.summary().find("> ppl_delta_pct_max 5"), std::string::npos) << g.summary();

  r = good_results();
  r.rouge_l = 0.9499;
  g = evaluate_gates(r, QualityGates{}, 1.0);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.summary(), "rouge_l 0.9499 < similarity_min 0.95");

  r = good_results();
  r.top1_agreement = 0.5;
  g = evaluate_gates(r, QualityGates{}, 1.0);
  EXPECT_FALSE(outcome(g, "top1_agreement").passed);
  EXPECT_TRUE(outcome(g, "rouge_l").passed);

  r = good_results();
  r.passkey_accuracy = 0.8;
  g = evaluate_gates(r, QualityGates{}, 0.9);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.summary(), "passkey_accuracy 0.8 < baseline_passkey_accuracy 0.9");
  // A better-than-baseline passkey score passes; a perplexity drop passes.
  r.passkey_accuracy = 0.95;
  r.ppl_delta_pct = -3.0;
  EXPECT_TRUE(evaluate_gates(r, QualityGates{}, 0.9).passed);
}

TEST(ConfigGates, NaNFailsWithAReason) {
  for (const char* metric : {"ppl_delta_pct", "rouge_l", "top1_agreement", "passkey_accuracy"}) {
    ValidationResults r = good_results();
    if (std::string(metric) == "ppl_delta_pct") r.ppl_delta_pct = NAN;
    if (std::string(metric) == "rouge_l") r.rouge_l = NAN;
    if (std::string(metric) == "top1_agreement") r.top1_agreement = NAN;
    if (std::string(metric) == "passkey_accuracy") r.passkey_accuracy = NAN;
    const GateReport g = evaluate_gates(r, QualityGates{}, 1.0);
    EXPECT_FALSE(g.passed) << metric;
    EXPECT_FALSE(outcome(g, metric).passed);
    EXPECT_NE(outcome(g, metric).reason.find("is NaN"), std::string::npos)
        << outcome(g, metric).reason;
  }
  // An unknown baseline cannot be beaten; a NaN bound cannot be met.
  GateReport g = evaluate_gates(good_results(), QualityGates{}, NAN);
  EXPECT_FALSE(outcome(g, "passkey_accuracy").passed);
  EXPECT_NE(outcome(g, "passkey_accuracy").reason.find("baseline_passkey_accuracy is NaN"),
            std::string::npos);
  g = evaluate_gates(good_results(), QualityGates{NAN, 0.95}, 1.0);
  EXPECT_FALSE(outcome(g, "ppl_delta_pct").passed);
  // The two-argument form reads the baseline from the results.
  ValidationResults r = good_results();
  r.baseline_passkey_accuracy = 1.0;
  EXPECT_TRUE(evaluate_gates(r, QualityGates{}).passed);
}

// --- llama.cpp export ---------------------------------------------------------------------------

namespace {

bool has_note(const LlamaCppExport& e, const std::string& part) {
  for (const auto& n : e.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(ConfigLlamaCpp, DenseFullCache) {
  SinkScopeConfig c;
  c.model.path = "/models/smol lm.gguf";
  const LlamaCppExport e = export_llama_cpp(c);
  EXPECT_EQ(e.command_line(),
            "llama-server -m '/models/smol lm.gguf' -c 8192 -fa on -ctk bf16 -ctv bf16");
  EXPECT_FALSE(has_note(e, "dynamic_sparse"));
  EXPECT_FALSE(has_note(e, "protect_sink_positions"));
}

TEST(ConfigLlamaCpp, SinksWindowAndInt8) {
  SinkScopeConfig c;
  c.model.path = "/models/m.gguf";
  c.inference.max_context_length = 32768;
  c.inference.cache = {
      CacheStrategy::kSlidingWindow, 4096, 4, PositionMode::kOriginal, 128, 0, 8192};
  c.inference.attention.type = AttentionType::kDynamicSparse;
  c.inference.quantization = {true, KvQuantDtype::kInt8, 32, true};
  const LlamaCppExport e = export_llama_cpp(c);
  const std::vector<std::string> expected = {
      "llama-server",    "-m",  c.model.path, "-c",   "4100", "--keep", "4",
      "--context-shift", "-fa", "on",         "-ctk", "q8_0", "-ctv",   "q8_0"};
  EXPECT_EQ(e.args, expected);
  EXPECT_TRUE(has_note(e, "dynamic_sparse has no equivalent"));
  EXPECT_TRUE(has_note(e, "protect_sink_positions has no equivalent"));
  EXPECT_TRUE(has_note(e, "position_mode original has no equivalent"));
  EXPECT_TRUE(has_note(e, "sliding_window is approximate"));
  EXPECT_FALSE(has_note(e, "group_size"));
  EXPECT_NE(e.format().find("\n# "), std::string::npos);
}

TEST(ConfigLlamaCpp, Int4AndWideGroups) {
  SinkScopeConfig c;
  c.inference.quantization = {true, KvQuantDtype::kInt4, 128, false};
  const LlamaCppExport e = export_llama_cpp(c);
  EXPECT_NE(e.command_line().find("-ctk q4_0 -ctv q4_0"), std::string::npos);
  EXPECT_TRUE(has_note(e, "group_size 128 has no equivalent"));
  EXPECT_FALSE(has_note(e, "protect_sink_positions"));
}
