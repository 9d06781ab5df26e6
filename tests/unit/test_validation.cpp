// SPDX-License-Identifier: Apache-2.0
// The validation suite (engine/eval/validation.h), its dataset manifest (engine/eval/validation_dataset.h)
// and sweeps (engine/eval/sweep.h), on a random-weight model and a small generated dataset.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/config/config.h"
#include "engine/format/gguf_writer.h"
#include "engine/util/sha256.h"
#include "engine/eval/sweep.h"
#include "engine/eval/validation.h"
#include "validation_fixture.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using test::fixture;
using test::write_file;

ValidationOptions fast_options() {
  ValidationOptions o;
  o.gen_tokens = 8;
  o.stream_chunk = 64;
  o.passkey_tokens = 4;
  o.threads = 1;
  return o;
}

// ---- dataset ----------------------------------------------------------------------------------

TEST(ValidationDataset, LoadsAndHashesTheDocumentedCanonicalForm) {
  const Dataset d = load_dataset(fixture().manifest);
  EXPECT_EQ(d.name, "unit");
  ASSERT_EQ(d.samples.size(), 6u);
  EXPECT_EQ(d.count(SampleClass::kShort), 2);
  EXPECT_EQ(d.count(SampleClass::kPasskey), 2);
  EXPECT_EQ(d.kinds(), (std::vector<std::string>{"prose", "code", "passkey"}));
  EXPECT_EQ(d.samples[2].token_cut(), 200);
  EXPECT_EQ(d.samples[0].token_cut(), 1000);
  std::string canon;
  for (const auto& s : d.samples) {
    if (s.is_passkey()) continue;
    canon += s.id + "|" + s.kind + "|" + to_string(s.cls) + "|" + s.sha256 + "\n";
  }
  canon += "p1|passkey|passkey|300|0.500000|3\np2|passkey|passkey|360|0.000000|4\n";
  EXPECT_EQ(d.sha256, sha256_hex(canon));
}

std::string load_error(const fs::path& manifest) {
  try {
    load_dataset(manifest);
  } catch (const DatasetError& e) {
    return e.what();
  }
  return "";
}

TEST(ValidationDataset, RejectsBadManifestsNamingTheProblem) {
  const fs::path dir = fs::temp_directory_path() / "sinkscope_validation_bad";
  fs::remove_all(dir);
  write_file(dir / "s.txt", "hello");
  const std::string h = sha256_hex("hello");
  auto with = [&](const std::string& samples, const std::string& extra = "") {
    write_file(dir / "m.json", R"({"format": "sinkscope-dataset-1", "name": "x", )" + extra +
                                   R"("samples": [)" + samples + "]}");
    return load_error(dir / "m.json");
  };
  const std::string good = R"({"id": "a", "kind": "prose", "class": "short", "file": "s.txt", "sha256": ")" + h + R"("})";
  EXPECT_EQ(with(good), "");
  EXPECT_NE(with(good + "," + good).find("\"a\" appears twice"), std::string::npos);
  EXPECT_NE(with(R"({"id": "a", "kind": "prose", "class": "huge", "file": "s.txt", "sha256": ")" + h + R"("})")
                .find("unknown sample class 'huge'"), std::string::npos);
  EXPECT_NE(with(R"({"id": "a", "kind": "prose", "class": "short", "file": "../s.txt", "sha256": ")" + h + R"("})")
                .find("must be a relative path inside"), std::string::npos);
  EXPECT_NE(with(R"({"id": "a", "kind": "prose", "class": "short", "file": "s.txt", "sha256": ")" + sha256_hex("other") + R"("})")
                .find("has sha256"), std::string::npos);
  EXPECT_NE(with(R"({"id": "a", "kind": "prose", "class": "short", "file": "missing.txt", "sha256": ")" + h + R"("})")
                .find("is missing"), std::string::npos);
  EXPECT_NE(with(R"({"id": "p", "kind": "passkey", "class": "passkey", "target_tokens": 200, "depth": 1.5, "seed": 1})")
                .find("samples[0] (p).depth"), std::string::npos);
  EXPECT_NE(with(R"({"id": "p", "kind": "passkey", "class": "passkey", "depth": 0.5, "seed": 1})")
                .find("\"target_tokens\" is required"), std::string::npos);
  EXPECT_NE(with(good, R"("sha256": "00", )").find("but the samples hash to"), std::string::npos);
  EXPECT_NE(with(""), "");  // empty sample list
  write_file(dir / "m.json", "{not json");
  EXPECT_NE(load_error(dir / "m.json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(load_error(dir / "nope.json").find("cannot read"), std::string::npos);
}

TEST(ValidationDataset, SelectsSubsetsWithTheirOwnHash) {
  const Dataset d = load_dataset(fixture().manifest);
  const Dataset s = select_samples(d, {SampleClass::kShort, SampleClass::kPasskey}, 1);
  ASSERT_EQ(s.samples.size(), 2u);
  EXPECT_EQ(s.samples[0].id, "a");
  EXPECT_EQ(s.samples[1].id, "p1");
  EXPECT_NE(s.sha256, d.sha256);
  EXPECT_EQ(s.sha256, dataset_hash(s.samples));
  EXPECT_NE(s.name.find("subset"), std::string::npos);
  EXPECT_THROW(select_samples(d, {SampleClass::kVeryLong}, 0).samples.at(1), std::out_of_range);
  EXPECT_THROW(parse_sample_class("medium"), std::invalid_argument);
}

// ---- runs -------------------------------------------------------------------------------------

SinkScopeConfig dense_config() {
  SinkScopeConfig c;
  c.inference.max_context_length = 1024;
  return c;
}

SinkScopeConfig lossy_config() {
  SinkScopeConfig c = dense_config();
  c.inference.attention.type = AttentionType::kDynamicSparse;
  c.inference.attention.threshold_prefill = 0.3;
  c.inference.attention.threshold_decode = 0.3;
  c.inference.cache.strategy = CacheStrategy::kSlidingWindow;
  c.inference.cache.window_size = 64;
  c.inference.cache.sink_keep_count = 0;
  c.inference.quantization.enabled = true;
  c.inference.quantization.kv_dtype = KvQuantDtype::kInt4;
  c.inference.quantization.group_size = 32;
  c.inference.quantization.protect_sink_positions = false;
  return c;
}

TEST(Validation, DenseAgainstItselfIsExactAndPassesEveryGate) {
  const Dataset d = load_dataset(fixture().manifest);
  const ValidationRun r = run_validation(fixture().model, dense_config(), d, fast_options());
  ASSERT_EQ(r.samples.size(), 6u);
  EXPECT_EQ(r.results.kl_mean, 0.0);
  EXPECT_EQ(r.results.top1_agreement, 1.0);
  EXPECT_EQ(r.results.ppl_delta_pct, 0.0);
  EXPECT_EQ(r.results.rouge_l, 1.0);
  EXPECT_EQ(r.results.passkey_accuracy, r.results.baseline_passkey_accuracy);
  EXPECT_EQ(r.results.sparsity_prefill, 0.0);
  EXPECT_EQ(r.results.sparsity_decode, 0.0);
  EXPECT_GT(r.results.ttft_ms, 0.0);
  EXPECT_GT(r.results.tpot_ms, 0.0);
  EXPECT_GT(r.results.peak_kv_mib, 0.0);
  EXPECT_TRUE(r.gates.passed) << r.gates.summary();
  // Every position of every text sample was compared: tokens of a, b, c (cut at 200), d (cut at 260).
  int64_t positions = 0;
  for (const auto& s : r.samples)
    if (!s.cmp.positions) EXPECT_EQ(s.cls, SampleClass::kPasskey);
    else positions += s.cmp.positions;
  EXPECT_EQ(positions, r.total.positions);
  EXPECT_EQ(r.samples[2].tokens, 200);
  EXPECT_EQ(r.samples[3].tokens, 260);
  EXPECT_TRUE(std::isnan(r.samples[3].rouge_l));  // very long: streamed, no generation
  ASSERT_EQ(r.by_class.size(), 4u);
  EXPECT_EQ(r.by_class[0].name, "short");
  EXPECT_EQ(r.by_class[0].samples, 2);
}

TEST(Validation, LossySettingsMoveTheMetricsAndRunsAreDeterministic) {
  const Dataset d = load_dataset(fixture().manifest);
  const ValidationRun a = run_validation(fixture().model, lossy_config(), d, fast_options());
  EXPECT_GT(a.results.kl_mean, 0.0);
  EXPECT_LT(a.results.top1_agreement, 1.0);
  // int4 with a 64-token window holds far less than the float cache of the baseline.
  const ValidationRun dense = run_validation(fixture().model, dense_config(), d, fast_options());
  EXPECT_LT(a.results.peak_kv_mib, dense.results.peak_kv_mib / 4);
  const ValidationRun b = run_validation(fixture().model, lossy_config(), d, fast_options());
  EXPECT_EQ(a.results.kl_mean, b.results.kl_mean);
  EXPECT_EQ(a.results.ppl_delta_pct, b.results.ppl_delta_pct);
  EXPECT_EQ(a.results.top1_agreement, b.results.top1_agreement);
  EXPECT_EQ(a.results.rouge_l, b.results.rouge_l);
  EXPECT_EQ(a.results.passkey_accuracy, b.results.passkey_accuracy);
  EXPECT_EQ(a.results.sparsity_prefill, b.results.sparsity_prefill);
  EXPECT_EQ(a.results.sparsity_decode, b.results.sparsity_decode);
  EXPECT_EQ(a.results.peak_kv_mib, b.results.peak_kv_mib);
  // A shared baseline store gives the same numbers (and is filled by the first run).
  BaselineStore store;
  const ValidationRun c1 = run_validation(fixture().model, lossy_config(), d, fast_options(), {}, &store);
  EXPECT_EQ(store.size(), 6u);
  const ValidationRun c2 = run_validation(fixture().model, lossy_config(), d, fast_options(), {}, &store);
  for (const ValidationRun* c : {&c1, &c2}) {
    EXPECT_EQ(c->results.kl_mean, a.results.kl_mean);
    EXPECT_EQ(c->results.rouge_l, a.results.rouge_l);
    EXPECT_EQ(c->results.baseline_passkey_accuracy, a.results.baseline_passkey_accuracy);
  }
}

TEST(Validation, DynamicSparseSkipsTilesAndCountsThem) {
  const Dataset d = load_dataset(fixture().manifest);
  SinkScopeConfig c = dense_config();
  c.inference.attention.type = AttentionType::kDynamicSparse;
  c.inference.attention.threshold_prefill = 0.999;
  c.inference.attention.threshold_decode = 0.999;
  const ValidationRun r = run_validation(fixture().model, c, d, fast_options());
  EXPECT_GT(r.results.sparsity_prefill, 0.0);
  EXPECT_GT(r.results.sparsity_decode, 0.0);
  EXPECT_GT(r.results.kl_mean, 0.0);
  int64_t skipped = 0, visited = 0;
  for (const auto& s : r.samples) {
    skipped += s.prefill.skipped;
    visited += s.prefill.visited;
  }
  EXPECT_DOUBLE_EQ(r.results.sparsity_prefill, double(skipped) / double(visited));
}

TEST(Validation, ReportsProgressAndStopsOnCancel) {
  const Dataset d = load_dataset(fixture().manifest);
  std::atomic<bool> cancel{false};
  ValidationOptions o = fast_options();
  o.cancel = &cancel;
  std::vector<ValidationProgress> seen;
  EXPECT_THROW(run_validation(fixture().model, dense_config(), d, o,
                              [&](const ValidationProgress& p) {
                                seen.push_back(p);
                                if (p.sample == 2) cancel = true;
                              }),
               Cancelled);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().sample, 2);
  cancel = false;
  seen.clear();
  run_validation(fixture().model, dense_config(), d, o, [&](const ValidationProgress& p) { seen.push_back(p); });
  ASSERT_GE(seen.size(), 7u);
  EXPECT_EQ(seen.back().sample, 6);
  EXPECT_DOUBLE_EQ(seen.back().done, seen.back().total);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].done, seen[i - 1].done);
}

TEST(Validation, SamplesBeyondTheConfigsLimitAreAClearError) {
  const Dataset d = load_dataset(fixture().manifest);
  SinkScopeConfig c = dense_config();
  c.inference.max_context_length = 150;
  try {
    run_validation(fixture().model, c, d, fast_options());
    FAIL() << "expected ValidationError";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allows 150"), std::string::npos) << e.what();
  }
  // A sliding window streams: the same limit is fine there.
  c.inference.cache.strategy = CacheStrategy::kSlidingWindow;
  c.inference.cache.window_size = 100;
  c.inference.cache.sink_keep_count = 4;
  EXPECT_NO_THROW(run_validation(fixture().model, c, select_samples(d, {SampleClass::kVeryLong}, 0),
                                 fast_options()));
}

TEST(Validation, WritesAValidatedConfigThatReadsBackIdentically) {
  if (!config_yaml_supported()) GTEST_SKIP() << "built without yaml-cpp";
  const Dataset d = select_samples(load_dataset(fixture().manifest), {SampleClass::kShort, SampleClass::kPasskey}, 0);
  const ValidationRun r = run_validation(fixture().model, lossy_config(), d, fast_options());
  const SinkScopeConfig v = with_validation(lossy_config(), r, d, cpu_device_description(1));
  ASSERT_TRUE(v.validation.has_value());
  EXPECT_EQ(v.validation->dataset.sha256, d.sha256);
  EXPECT_EQ(v.validation->dataset.samples, 4);
  EXPECT_EQ(v.validation->passed, r.gates.passed);
  EXPECT_FALSE(v.provenance.engine_version.empty());
  EXPECT_FALSE(v.provenance.git_sha.empty());
  EXPECT_EQ(v.provenance.created.size(), 20u);  // 2026-11-30T12:00:00Z
  EXPECT_NE(v.provenance.device.find("(1 thread)"), std::string::npos);
  const fs::path out = fixture().dir / "validated.yaml";
  save_config(out, v);
  const ConfigParseResult back = load_config_file(out);
  ASSERT_TRUE(back.ok()) << (back.problems.empty() ? "" : back.problems[0].message);
  EXPECT_EQ(back.config, v);
}

// ---- sweeps -----------------------------------------------------------------------------------

TEST(Sweep, ParsesExpandsAndAppliesGrids) {
  const auto axes = parse_grid("lambda=0.001,0.01,0.05; window=512,full ;sinks=0,4");
  ASSERT_EQ(axes.size(), 3u);
  const auto pts = expand_grid(axes);
  ASSERT_EQ(pts.size(), 12u);
  EXPECT_EQ(describe(pts[0]), "lambda=0.001 window=512 sinks=0");
  EXPECT_EQ(describe(pts[1]), "lambda=0.001 window=512 sinks=4");
  EXPECT_EQ(describe(pts[11]), "lambda=0.05 window=full sinks=4");
  const SinkScopeConfig c = apply_point(SinkScopeConfig{}, pts[1]);
  EXPECT_EQ(c.inference.attention.type, AttentionType::kDynamicSparse);
  EXPECT_EQ(c.inference.attention.threshold_prefill, 0.001);
  EXPECT_EQ(c.inference.attention.threshold_decode, 0.001);
  EXPECT_EQ(c.inference.cache.strategy, CacheStrategy::kSlidingWindow);
  EXPECT_EQ(c.inference.cache.window_size, 512);
  EXPECT_EQ(c.inference.cache.sink_keep_count, 4);
  EXPECT_EQ(apply_point(SinkScopeConfig{}, pts[2]).inference.cache.strategy, CacheStrategy::kFull);
  const SinkScopeConfig q = apply_point(SinkScopeConfig{}, expand_grid(parse_grid("lambda=0;kv=int4;protect=false;block=128"))[0]);
  EXPECT_EQ(q.inference.attention.type, AttentionType::kDense);
  EXPECT_TRUE(q.inference.quantization.enabled);
  EXPECT_EQ(q.inference.quantization.kv_dtype, KvQuantDtype::kInt4);
  EXPECT_FALSE(q.inference.quantization.protect_sink_positions);
  EXPECT_EQ(q.inference.cache.block_size, 128);
  // A point that breaks a config rule is caught by check_config, naming the key.
  const SinkScopeConfig bad = apply_point(SinkScopeConfig{}, expand_grid(parse_grid("window=8;sinks=16"))[0]);
  bool named = false;
  for (const auto& p : check_config(bad)) named |= p.key.find("sink_keep_count") != std::string::npos;
  EXPECT_TRUE(named);
}

std::string grid_error(const std::string& text) {
  try {
    parse_grid(text, 100);
  } catch (const GridError& e) {
    return e.what();
  }
  return "";
}

TEST(Sweep, GridErrorsNameTheAxis) {
  EXPECT_NE(grid_error("alpha=1").find("unknown key 'alpha'"), std::string::npos);
  EXPECT_NE(grid_error("lambda=0.1;lambda=0.2").find("given twice"), std::string::npos);
  EXPECT_NE(grid_error("lambda=x").find("lambda=x: expected a number"), std::string::npos);
  EXPECT_NE(grid_error("lambda=-1").find("a number >= 0"), std::string::npos);
  EXPECT_NE(grid_error("kv=int2").find("off, int8 or int4"), std::string::npos);
  EXPECT_NE(grid_error("window=").find("empty value"), std::string::npos);
  EXPECT_NE(grid_error("lambda").find("has no '='"), std::string::npos);
  EXPECT_NE(grid_error("lambda=0.1,0.1").find("given twice"), std::string::npos);
  EXPECT_NE(grid_error("").find("no axes"), std::string::npos);
  EXPECT_NE(grid_error("sinks=0,1,2,3,4,5,6,7,8,9;window=1,2,3,4,5,6,7,8,9,10,11").find("more than 100"),
            std::string::npos);
}

TEST(Sweep, ParetoFrontsKeepOnlyNonDominatedPoints) {
  // (sparsity, KL): B dominates C (more sparsity, less KL); A and B and D trade off; E is NaN.
  const std::vector<double> sp = {0.1, 0.5, 0.4, 0.9, NAN};
  const std::vector<double> kl = {0.001, 0.01, 0.02, 0.1, 0.0};
  EXPECT_EQ(pareto_front_max_min(sp, kl), (std::vector<bool>{true, true, false, true, false}));
  // (memory, KL), both minimised.
  const std::vector<double> mem = {100, 50, 50, 10};
  const std::vector<double> kl2 = {0.0, 0.01, 0.02, 0.2};
  EXPECT_EQ(pareto_front_min_min(mem, kl2), (std::vector<bool>{true, true, false, true}));
  // Duplicates do not dominate each other.
  EXPECT_EQ(pareto_front_min_min({1, 1}, {2, 2}), (std::vector<bool>{true, true}));
}

}  // namespace
}  // namespace sinkscope
