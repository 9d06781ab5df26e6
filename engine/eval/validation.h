// SPDX-License-Identifier: Apache-2.0
// The validation suite (issue 8; contract "Quality against the dense baseline"): runs the dense
// baseline (same model, dense attention, full float cache) and a config's settings over a
// dataset (engine/eval/validation_dataset.h) and measures
//   - text samples, teacher-forced: mean next-token KL(dense || variant), top-1 agreement and the
//     perplexity change over every predicted position; short and long samples as one prefill,
//     very long ones streamed in chunks through the (possibly bounded) cache;
//   - after each short and long sample: greedy continuations of both (gen_tokens each) and their
//     ROUGE-L F1 (the generation-similarity gate);
//   - passkey tasks: accuracy of the variant and of the baseline on the same tasks;
//   - the variant's prefill and decode sparsity (skipped / visible tiles), time to first token
//     (passkey prompts, last-token logits only), time per output token (every greedy step) and
//     the KV cache's high-water mark.
// Everything is greedy, so two runs with the same dataset, config, seed and thread count give
// identical quality figures (times differ).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/config/config.h"
#include "engine/eval/quality.h"
#include "engine/eval/validation_dataset.h"

namespace sinkscope {

class ValidationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ValidationProgress {
  int sample = 0, samples = 0;  // samples finished / total
  std::string current;          // id of the sample being run
  double done = 0, total = 0;   // work units (token-forwards, both models)
  double elapsed_s = 0, eta_s = 0;
};
using ValidationProgressFn = std::function<void(const ValidationProgress&)>;

struct SampleOutcome {
  std::string id, kind;
  SampleClass cls = SampleClass::kShort;
  int tokens = 0;                 // tokens evaluated (prompt tokens for passkey)
  LogitComparison cmp;            // text samples
  double rouge_l = NAN;           // short / long samples with gen_tokens > 0
  bool passkey_dense = false, passkey_variant = false;  // passkey tasks
  TileCounts prefill, decode;     // the variant's tile counts
  int64_t peak_kv_bytes = 0;
  double seconds = 0;
  // The variant's time to first token (passkey prompts) and per output token (greedy steps):
  // sums and counts, added up over samples in dataset order.
  double ttft_ms_sum = 0;
  int ttft_n = 0;
  double tpot_ms_sum = 0;
  int64_t tpot_n = 0;
};

struct ValidationOptions {
  int gen_tokens = 32;       // greedy tokens after each short / long sample (0: no ROUGE-L)
  int stream_chunk = 512;    // tokens per forward for very long samples
  int passkey_tokens = 10;   // greedy answer length
  uint64_t seed = 0;         // added to every passkey task's seed
  int threads = 0;           // CPU threads (0: all)
  // Where the baseline and the variant run: the CPU backend (the reference, every cache
  // policy), the CUDA backend (both there; kCuda: a config it cannot run is a ValidationError),
  // or kAuto: CUDA when the config runs there, else both on the CPU.
  BackendKind backend = BackendKind::kCpu;
  const std::atomic<bool>* cancel = nullptr;  // raised: Cancelled is thrown at the next check
  // Distributed and resumed runs: only the samples (by dataset index) for which run_sample is
  // true are run (empty: all); on_sample is called as each one finishes. Every sample is still
  // tokenised and sized, so the backends, and the results, are the same whichever subset runs.
  std::function<bool(size_t index)> run_sample;
  std::function<void(size_t index, const SampleOutcome&)> on_sample;
};

struct ClassSummary {
  std::string name;  // a class ("short") or a kind ("code")
  int samples = 0;
  int64_t tokens = 0;
  LogitComparison cmp;
  double rouge_sum = 0;
  int rouge_n = 0;
  int passkey_n = 0, passkey_dense = 0, passkey_variant = 0;
  double rouge_l() const { return rouge_n ? rouge_sum / rouge_n : NAN; }
};

struct ValidationRun {
  ValidationResults results;  // what goes into the config's validation.results
  GateReport gates;
  LogitComparison total;
  std::vector<SampleOutcome> samples;
  std::vector<ClassSummary> by_class, by_kind;
  std::string backend;  // the variant's backend name
  double seconds = 0;
};

// Dense-baseline outputs kept in memory between runs over the same dataset (sweeps): per sample
// the logits of every evaluated position, the greedy continuation and the passkey outcome, up
// to a memory budget (samples beyond it are recomputed each time). Results are identical either
// way. Not thread-safe.
class BaselineStore {
 public:
  explicit BaselineStore(int64_t budget_bytes = int64_t(4) << 30) : m_budget(budget_bytes) {}
  struct Entry {
    std::vector<float> logits;        // text samples: tokens x vocab
    std::vector<TokenId> generation;  // greedy continuation
    bool passkey = false;
  };
  const Entry* find(const std::string& id) const;
  void put(const std::string& id, Entry e);  // dropped when over the budget
  int64_t bytes() const { return m_bytes; }
  size_t size() const { return m_entries.size(); }

 private:
  int64_t m_budget, m_bytes = 0;
  std::map<std::string, Entry> m_entries;
};

// Runs the baseline and `config`'s settings on the CPU backend (the reference; the only backend
// with every cache policy). Throws ValidationError when a sample does not fit the config's
// token limits (naming the sample and the limit), DatasetError for unreadable samples, Cancelled
// when options.cancel is raised. The gates are `config`'s own (validation.gates when present,
// else the defaults).
ValidationRun run_validation(std::shared_ptr<const Model> model, const SinkScopeConfig& config,
                             const Dataset& dataset, const ValidationOptions& options,
                             const ValidationProgressFn& progress = {},
                             BaselineStore* baseline = nullptr);

// The run's figures (totals, classes, kinds, results, gates against `config`'s gates) from
// sample outcomes, added up in the given order: outcomes in dataset order give the same numbers
// however the samples were split among processes or resumed runs.
ValidationRun summarize_validation(const SinkScopeConfig& config,
                                   std::vector<SampleOutcome> samples, std::string backend,
                                   double seconds);

// `config` with its validation section filled from a run (dataset name/size/hash, results,
// gates, passed) and provenance (engine version, git sha, device, now in UTC).
SinkScopeConfig with_validation(const SinkScopeConfig& config, const ValidationRun& run,
                                const Dataset& dataset, const std::string& device);

// "AMD EPYC 7B13 (2 threads)" style description of the CPU (from /proc/cpuinfo when present).
std::string cpu_device_description(int threads);

}  // namespace sinkscope
