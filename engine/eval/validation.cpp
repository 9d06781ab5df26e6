// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/validation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <thread>

#include "engine/eval/passkey.h"
#include "engine/eval/rouge.h"
#include "engine/model/sampler.h"
#include "engine/model/session.h"
#include "engine/util/thread_pool.h"
#include "engine/version.h"
#include "profiler/spans.h"

namespace sinkscope {

const BaselineStore::Entry* BaselineStore::find(const std::string& id) const {
  auto it = m_entries.find(id);
  return it == m_entries.end() ? nullptr : &it->second;
}

void BaselineStore::put(const std::string& id, Entry e) {
  const int64_t b = int64_t(e.logits.size() * sizeof(float) + e.generation.size() * sizeof(TokenId));
  if (m_bytes + b > m_budget) return;
  auto [it, inserted] = m_entries.emplace(id, std::move(e));
  if (inserted) m_bytes += b;
}

namespace {

double ms_since(int64_t t0_ns) { return double(prof::now_ns() - t0_ns) / 1e6; }

struct Accumulators {
  double ttft_sum = 0;
  int ttft_n = 0;
  double tpot_sum = 0;
  int64_t tpot_n = 0;
  TileCounts prefill, decode;
  int64_t peak_kv = 0;
};

ClassSummary& summary_for(std::vector<ClassSummary>& v, const std::string& name) {
  for (auto& s : v)
    if (s.name == name) return s;
  v.push_back({});
  v.back().name = name;
  return v.back();
}

void add_to(ClassSummary& s, const SampleOutcome& o) {
  ++s.samples;
  s.tokens += o.tokens;
  s.cmp.add(o.cmp);
  if (!std::isnan(o.rouge_l)) {
    s.rouge_sum += o.rouge_l;
    ++s.rouge_n;
  }
  if (o.cls == SampleClass::kPasskey) {
    ++s.passkey_n;
    s.passkey_dense += o.passkey_dense;
    s.passkey_variant += o.passkey_variant;
  }
}

// Greedy continuation of n tokens from `last_logits` (the row after the evaluated text); the
// backend's cache holds the text. Each step's time goes to `step_ms` when given.
std::vector<TokenId> continue_greedy(Backend& b, std::vector<float> last_logits, int n,
                                     Accumulators* timing) {
  std::vector<TokenId> out;
  std::vector<float> logits;
  for (int i = 0; i < n; ++i) {
    const TokenId next = argmax(last_logits);
    out.push_back(next);
    if (i + 1 == n) break;
    if (b.n_past() >= b.capacity()) break;
    const TokenId one[1] = {next};
    const int64_t t0 = prof::now_ns();
    b.forward(one, LogitsMode::kLast, logits);
    if (timing) {
      timing->tpot_sum += ms_since(t0);
      ++timing->tpot_n;
    }
    last_logits.swap(logits);
  }
  return out;
}

std::vector<float> last_row(const std::vector<float>& all, int vocab) {
  return std::vector<float>(all.end() - vocab, all.end());
}

// Work units of a sample for progress: token-forwards of one model (both models count twice).
double sample_work(const DatasetSample& s, int gen_tokens) {
  if (s.is_passkey()) return double(s.target_tokens) + 10;
  const double gen = s.cls == SampleClass::kVeryLong ? 0 : gen_tokens;
  // Attention grows with length: weigh long samples a little more than their token count.
  const double n = s.token_cut();
  return n * (1.0 + n / 16384.0) + gen * 4;
}

void check_cancel(const ValidationOptions& o) {
  if (o.cancel && o.cancel->load(std::memory_order_relaxed)) throw Cancelled();
}

}  // namespace

ValidationRun run_validation(std::shared_ptr<const Model> model, const SinkScopeConfig& config,
                             const Dataset& dataset, const ValidationOptions& opt,
                             const ValidationProgressFn& progress, BaselineStore* store) {
  if (!model) throw ValidationError("validate: no model");
  if (dataset.samples.empty()) throw ValidationError("validate: the dataset has no samples");
  if (opt.gen_tokens < 0 || opt.stream_chunk < 1 || opt.passkey_tokens < 1)
    throw ValidationError("validate: gen_tokens >= 0, stream_chunk >= 1, passkey_tokens >= 1");
  const auto problems = check_config(config);
  for (const auto& p : problems)
    if (p.severity == Severity::kError)
      throw ValidationError("validate: the config is invalid: " + format_problem(p));
  const ModelConfig& mc = model->config();
  const int vocab = mc.n_vocab;
  const Tokenizer& tok = model->tokenizer();
  const auto t_start = std::chrono::steady_clock::now();

  // Tokenise and size everything first, so a sample that cannot run fails before hours of work.
  struct Prepared {
    const DatasetSample* s;
    std::vector<TokenId> tokens;
    PasskeyTask task;
  };
  std::vector<Prepared> prep;
  int needed = 2;  // the baseline's context: the longest input plus its continuation
  const bool windowed = config.inference.cache.strategy == CacheStrategy::kSlidingWindow;
  const int64_t limit = request_token_limit(config);
  for (const auto& s : dataset.samples) {
    Prepared p{&s, {}, {}};
    int need = 0;
    if (s.is_passkey()) {
      try {
        p.task = make_passkey_task(tok, s.target_tokens, s.depth, s.seed + opt.seed);
      } catch (const std::exception& e) {
        throw ValidationError("sample " + s.id + ": " + e.what());
      }
      p.tokens = p.task.tokens;
      need = int(p.tokens.size()) + opt.passkey_tokens;
    } else {
      p.tokens = tok.encode(read_sample_text(s));
      if (int(p.tokens.size()) > s.token_cut()) p.tokens.resize(size_t(s.token_cut()));
      const int minimum = s.max_tokens > 0 ? std::min(s.max_tokens, min_tokens(s.cls)) : min_tokens(s.cls);
      if (int(p.tokens.size()) < std::max(2, minimum))
        throw ValidationError("sample " + s.id + " (" + to_string(s.cls) + "): " +
                              std::to_string(p.tokens.size()) + " tokens; the class needs at least " +
                              std::to_string(std::max(2, minimum)));
      need = int(p.tokens.size()) + (s.cls == SampleClass::kVeryLong ? 0 : opt.gen_tokens);
    }
    if (!windowed && need > limit)
      throw ValidationError("sample " + s.id + " needs " + std::to_string(need) +
                            " tokens of cache but the config allows " + std::to_string(limit) +
                            " (inference.max_context_length / cache.per_request_limit_tokens)");
    needed = std::max(needed, need);
    prep.push_back(std::move(p));
  }

  // Nothing of this dataset to run here (another process runs it, or a journal has it): the
  // checks above still ran, so every process agrees on which configs are valid.
  if (opt.run_sample) {
    bool any = false;
    for (size_t i = 0; i < prep.size() && !any; ++i) any = opt.run_sample(i);
    if (!any) return summarize_validation(config, {}, "cpu", 0.0);
  }

  BackendOptions dense_opts;
  dense_opts.n_threads = opt.threads;
  dense_opts.max_context = needed;
  dense_opts.attention.block_size = config.inference.cache.block_size;
  BackendOptions var_opts;
  var_opts.n_threads = opt.threads;
  var_opts.attention = to_attention_settings(config);
  var_opts.cache = cache_settings_from(config.inference.cache, config.inference.quantization);
  var_opts.max_context = windowed ? needed : int(std::min<int64_t>(limit, needed));
  // Both models on one kind of backend, so that the comparison sees the config's settings and
  // not two backends' rounding.
  std::unique_ptr<Backend> dense, variant;
  if (opt.backend != BackendKind::kCpu) {
    try {
      variant = make_backend(model, var_opts, BackendKind::kCuda);
      dense = make_backend(model, dense_opts, BackendKind::kCuda);
    } catch (const BackendError& e) {
      if (opt.backend == BackendKind::kCuda)
        throw ValidationError(std::string("validate on the CUDA backend: ") + e.what());
      dense.reset();
      variant.reset();
    }
  }
  if (!variant) {
    dense = make_cpu_backend(model, dense_opts);
    variant = make_cpu_backend(model, var_opts);
  }
  // Cached baseline outputs belong to the backend that made them.
  const std::string store_tag = "@" + dense->name();
  dense->set_cancel_flag(opt.cancel);
  variant->set_cancel_flag(opt.cancel);

  // Progress over the samples this call runs.
  double total_work = 0, done_work = 0;
  int to_run = 0;
  for (size_t i = 0; i < prep.size(); ++i)
    if (!opt.run_sample || opt.run_sample(i)) {
      total_work += 2 * sample_work(*prep[i].s, opt.gen_tokens);
      ++to_run;
    }
  auto report = [&](int finished, const std::string& current) {
    if (!progress) return;
    ValidationProgress pr;
    pr.sample = finished;
    pr.samples = to_run;
    pr.current = current;
    pr.done = done_work;
    pr.total = total_work;
    pr.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    pr.eta_s = done_work > 0 ? pr.elapsed_s * (total_work - done_work) / done_work : 0;
    progress(pr);
  };

  int finished = 0;
  std::vector<float> ld, lv;
  std::vector<SampleOutcome> outcomes;
  for (size_t index = 0; index < prep.size(); ++index) {
    const Prepared& p = prep[index];
    const DatasetSample& s = *p.s;
    if (opt.run_sample && !opt.run_sample(index)) continue;
    check_cancel(opt);
    Accumulators acc;  // this sample's times
    report(finished, s.id);
    const int64_t t0 = prof::now_ns();
    SampleOutcome o;
    o.id = s.id;
    o.kind = s.kind;
    o.cls = s.cls;
    o.tokens = int(p.tokens.size());
    variant->reset();
    const std::string store_key = s.id + store_tag;
    const BaselineStore::Entry* cached = store ? store->find(store_key) : nullptr;

    if (s.is_passkey()) {
      GenerateOptions g;
      g.max_tokens = opt.passkey_tokens;
      g.stop_at_eog = true;
      bool dense_ok;
      if (cached) {
        dense_ok = cached->passkey;
      } else {
        const GenerateResult gd = generate(*dense, p.tokens, g);
        dense_ok = passkey_correct(gd.text, p.task.passkey);
        if (store) store->put(store_key, BaselineStore::Entry{{}, gd.tokens, dense_ok});
      }
      const GenerateResult gv = generate(*variant, p.tokens, g);
      o.passkey_dense = dense_ok;
      o.passkey_variant = passkey_correct(gv.text, p.task.passkey);
      acc.ttft_sum += gv.prefill_ms;
      ++acc.ttft_n;
      if (gv.tokens.size() > 1) {
        acc.tpot_sum += gv.decode_ms;
        acc.tpot_n += int64_t(gv.tokens.size()) - 1;
      }
    } else {
      dense->reset();
      const int n = int(p.tokens.size());
      const int chunk = s.cls == SampleClass::kVeryLong ? opt.stream_chunk : n;
      std::vector<float> dense_all;  // filled only when the store will keep it
      const bool keep = store && !cached;
      std::vector<float> last_d, last_v;
      for (int off = 0; off < n; off += chunk) {
        check_cancel(opt);
        const int m = std::min(chunk, n - off);
        const std::span<const TokenId> piece(p.tokens.data() + off, size_t(m));
        if (cached) {
          ld.assign(cached->logits.begin() + int64_t(off) * vocab,
                    cached->logits.begin() + int64_t(off + m) * vocab);
        } else {
          dense->forward(piece, LogitsMode::kAll, ld);
          if (keep) dense_all.insert(dense_all.end(), ld.begin(), ld.end());
        }
        variant->forward(piece, LogitsMode::kAll, lv);
        std::vector<TokenId> next(size_t(m), -1);
        for (int i = 0; i < m; ++i)
          if (off + i + 1 < n) next[size_t(i)] = p.tokens[size_t(off + i + 1)];
        o.cmp.add(compare_logits(ld, lv, vocab, next));
        if (off + m == n) {
          last_d = last_row(ld, vocab);
          last_v = last_row(lv, vocab);
        }
        if (progress && chunk < n) {
          done_work += 2.0 * m;
          report(finished, s.id);
        }
      }
      if (chunk < n) done_work -= 2.0 * n;  // re-added below with the sample's whole weight
      o.prefill = variant->probes().total(false);
      if (s.cls != SampleClass::kVeryLong && opt.gen_tokens > 0) {
        std::vector<TokenId> gd;
        if (cached) {
          gd = cached->generation;
        } else {
          gd = continue_greedy(*dense, last_d, opt.gen_tokens, nullptr);
        }
        const std::vector<TokenId> gv = continue_greedy(*variant, last_v, opt.gen_tokens, &acc);
        o.rouge_l = rougeLF1(gd, gv);
        if (keep) store->put(store_key, BaselineStore::Entry{std::move(dense_all), gd, false});
      } else if (keep) {
        store->put(store_key, BaselineStore::Entry{std::move(dense_all), {}, false});
      }
    }
    o.decode = variant->probes().total(true);
    if (s.is_passkey()) o.prefill = variant->probes().total(false);
    o.peak_kv_bytes = variant->cache_stats().high_water_bytes;
    o.seconds = ms_since(t0) / 1e3;
    o.ttft_ms_sum = acc.ttft_sum;
    o.ttft_n = acc.ttft_n;
    o.tpot_ms_sum = acc.tpot_sum;
    o.tpot_n = acc.tpot_n;
    if (opt.on_sample) opt.on_sample(index, o);
    outcomes.push_back(std::move(o));
    done_work += 2 * sample_work(s, opt.gen_tokens);
    ++finished;
  }
  report(finished, "");
  return summarize_validation(
      config, std::move(outcomes), variant->name(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
}

ValidationRun summarize_validation(const SinkScopeConfig& config,
                                   std::vector<SampleOutcome> samples, std::string backend,
                                   double seconds) {
  ValidationRun run;
  run.backend = std::move(backend);
  run.seconds = seconds;
  Accumulators acc;
  for (const SampleOutcome& o : samples) {
    acc.prefill.add(o.prefill);
    acc.decode.add(o.decode);
    acc.peak_kv = std::max(acc.peak_kv, o.peak_kv_bytes);
    acc.ttft_sum += o.ttft_ms_sum;
    acc.ttft_n += o.ttft_n;
    acc.tpot_sum += o.tpot_ms_sum;
    acc.tpot_n += o.tpot_n;
    run.total.add(o.cmp);
    add_to(summary_for(run.by_class, to_string(o.cls)), o);
    add_to(summary_for(run.by_kind, o.kind), o);
  }
  run.samples = std::move(samples);

  ValidationResults& r = run.results;
  double rouge_sum = 0;
  int rouge_n = 0, pk_n = 0, pk_d = 0, pk_v = 0;
  for (const auto& o : run.samples) {
    if (!std::isnan(o.rouge_l)) {
      rouge_sum += o.rouge_l;
      ++rouge_n;
    }
    if (o.cls == SampleClass::kPasskey) {
      ++pk_n;
      pk_d += o.passkey_dense;
      pk_v += o.passkey_variant;
    }
  }
  if (run.total.scored > 0) r.ppl_delta_pct = run.total.ppl_delta_pct();
  if (run.total.positions > 0) {
    r.kl_mean = run.total.kl_mean();
    r.top1_agreement = run.total.top1_agreement();
  }
  if (rouge_n > 0) r.rouge_l = rouge_sum / rouge_n;
  if (pk_n > 0) {
    r.passkey_accuracy = double(pk_v) / pk_n;
    r.baseline_passkey_accuracy = double(pk_d) / pk_n;
  }
  r.sparsity_prefill = acc.prefill.sparsity();
  r.sparsity_decode = acc.decode.sparsity();
  if (acc.ttft_n > 0) r.ttft_ms = acc.ttft_sum / acc.ttft_n;
  if (acc.tpot_n > 0) r.tpot_ms = acc.tpot_sum / double(acc.tpot_n);
  r.peak_kv_mib = double(acc.peak_kv) / (1024.0 * 1024.0);
  const QualityGates gates = config.validation ? config.validation->gates : QualityGates{};
  run.gates = evaluate_gates(r, gates);
  return run;
}

std::string cpu_device_description(int threads) {
  std::string name = cpu_model_name();
  if (name.empty()) name = "CPU";
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  return name + " (" + std::to_string(threads) + " thread" + (threads == 1 ? "" : "s") + ")";
}

SinkScopeConfig with_validation(const SinkScopeConfig& config, const ValidationRun& run,
                                const Dataset& dataset, const std::string& device) {
  SinkScopeConfig c = config;
  ValidationSection v;
  v.baseline = "dense";
  v.dataset.name = dataset.name;
  v.dataset.samples = int64_t(dataset.samples.size());
  v.dataset.sha256 = dataset.sha256;
  v.results = run.results;
  v.gates = config.validation ? config.validation->gates : QualityGates{};
  v.passed = run.gates.passed;
  c.validation = v;
  c.provenance.engine_version = SINKSCOPE_VERSION;
  c.provenance.git_sha = SINKSCOPE_GIT_SHA;
  c.provenance.device = device;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  c.provenance.created = buf;
  return c;
}

}  // namespace sinkscope
