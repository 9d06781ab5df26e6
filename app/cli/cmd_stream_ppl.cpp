// SPDX-License-Identifier: Apache-2.0
#include <fstream>
#include <iomanip>
#include <sstream>
#include <iostream>

#include "app/cli/commands.h"
#include "base/atomic_file.h"
#include "app/cli/common.h"
#include "app/cli/kv_args.h"
#include "engine/util/json_io.h"
#include "engine/eval/stream_eval.h"

namespace sinkscope::cli {

namespace {

const char* mode_name(const StreamPplArgs& a) {
  return a.dense ? "dense" : a.recompute ? "recompute" : "stream";
}

Json cache_json(const KvCacheStats& s) {
  Json j;
  j["bytes_per_token"] = static_cast<long long>(s.bytes_per_token);
  j["peak_bytes"] = static_cast<long long>(s.high_water_bytes);
  j["peak_mib"] = double(s.high_water_bytes) / (1024.0 * 1024.0);
  j["cached_tokens"] = static_cast<long long>(s.n_cached);
  j["evicted_tokens"] = static_cast<long long>(s.evicted);
  return j;
}

std::string kv_name(const CacheSettings& c) {
  return !c.quantization.enabled ? "unquantized"
         : c.quantization.kv_dtype == KvQuantDtype::kInt8 ? "int8" : "int4";
}

// --vs-unquantized: the same policy with unquantized KV as the reference, streamed in lock step.
int run_comparison(const StreamPplArgs& a, const std::shared_ptr<const Model>& model, BackendOptions bo, Backend& variant,
                   const std::vector<TokenId>& tokens, const StreamOptions& so,
                   const StreamProgressFn& progress, std::ostream& out, std::ostream& err) {
  bo.cache.quantization.enabled = false;
  std::string note;
  auto reference = open_backend(model, bo, a.backend, &note);
  if (reference->name() != variant.name())
    err << "sinkscope-cli: note: the reference runs on " << reference->name() << ", the "
        << kv_name(a.cache) << " stream on " << variant.name() << "\n";
  const StreamComparison c = compare_streams(*reference, variant, tokens, so, progress);
  const LogitComparison& t = c.total;
  if (a.csv) {
    std::ostringstream f;
    f << "segment_begin,scored,ppl_reference,ppl_variant,ppl_delta_pct,kl_mean,top1\n";
    for (const auto& [b, s] : c.segments)
      f << b << "," << s.scored << "," << std::setprecision(9) << s.ppl_dense() << ","
        << s.ppl_variant() << "," << s.ppl_delta_pct() << "," << s.kl_mean() << ","
        << s.top1_agreement() << "\n";
    write_file_atomic(*a.csv, f.str());
  }
  if (a.json) {
    Json j;
    j["model"] = model->path().string();
    j["file"] = a.file;
    j["mode"] = a.dense ? "dense" : "stream";
    j["settings"] = describe(a.cache);
    j["kv"] = kv_name(a.cache);
    j["protect_sinks"] = a.cache.quantization.protect_sink_positions;
    j["backend"] = variant.name();
    j["reference_backend"] = reference->name();
    j["tokens"] = static_cast<long long>(c.tokens);
    j["scored"] = static_cast<long long>(t.scored);
    j["stride"] = a.stride;
    j["perplexity"] = t.ppl_variant();
    j["perplexity_unquantized"] = t.ppl_dense();
    j["ppl_delta_pct"] = t.ppl_delta_pct();
    j["kl_mean"] = t.kl_mean();
    j["kl_max"] = t.kl_max;
    j["top1_agreement"] = t.top1_agreement();
    j["seconds"] = c.seconds;
    Json& segments = j["segments"] = Json::array();
    for (const auto& [b, s] : c.segments) {
      Json seg;
      seg["begin"] = static_cast<long long>(b);
      seg["scored"] = static_cast<long long>(s.scored);
      seg["ppl_delta_pct"] = s.ppl_delta_pct();
      seg["kl_mean"] = s.kl_mean();
      seg["top1_agreement"] = s.top1_agreement();
      segments.push_back(std::move(seg));
    }
    j["cache"] = cache_json(c.variant_cache);
    Json& cache_unquantized = j["cache_unquantized"];
    cache_unquantized["bytes_per_token"] = static_cast<long long>(c.reference_cache.bytes_per_token);
    cache_unquantized["peak_bytes"] = static_cast<long long>(c.reference_cache.high_water_bytes);
    out << dump_json(j) << "\n";
    return 0;
  }
  out << std::fixed << std::setprecision(4) << kv_name(a.cache)
      << (a.cache.quantization.protect_sink_positions ? " (sinks protected)" : "")
      << " vs unquantized KV over " << t.scored << " tokens: perplexity " << t.ppl_variant()
      << " vs " << t.ppl_dense() << " (" << std::showpos << std::setprecision(3)
      << t.ppl_delta_pct() << std::noshowpos << " %), mean KL " << std::scientific
      << std::setprecision(3) << t.kl_mean() << ", top-1 " << std::fixed << std::setprecision(2)
      << 100.0 * t.top1_agreement() << " %\n";
  out << "kv cache: " << c.variant_cache.bytes_per_token << " vs "
      << c.reference_cache.bytes_per_token << " bytes/token, peak " << std::setprecision(2)
      << double(c.variant_cache.high_water_bytes) / (1024.0 * 1024.0) << " vs "
      << double(c.reference_cache.high_water_bytes) / (1024.0 * 1024.0) << " MiB\n";
  return 0;
}

}  // namespace

int run_stream_ppl(const StreamPplArgs& a, std::ostream& out, std::ostream& err) {
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  const std::string text = read_text_file(a.file, "--file");
  const auto model = load_model(resolve_model_path(a.model), a.json ? nullptr : &err);
  std::vector<TokenId> tokens = model->tokenizer().encode(text);
  if (a.max_tokens > 0 && int64_t(tokens.size()) > a.max_tokens) tokens.resize(size_t(a.max_tokens));
  if (tokens.size() < 2)
    throw UsageError("--file: " + std::to_string(tokens.size()) + " token(s); need at least 2");

  BackendOptions bo;
  bo.n_threads = a.threads;
  if (a.dense) {
    bo.max_context = int(tokens.size());  // past the trained context on purpose
    bo.cache = a.cache;                   // full cache; --kv applies to it
  } else if (a.recompute) {
    bo.max_context = int(a.cache.window_size);
  } else {
    bo.cache = a.cache;
  }
  std::string backend_note;
  auto backend = open_backend(model, bo, a.backend, &backend_note);
  const std::string what = a.dense ? "full cache" : a.recompute
      ? "recompute over " + std::to_string(a.cache.window_size) + " tokens, stride " + std::to_string(a.stride)
      : describe(a.cache);
  err << "sinkscope-cli: " << mode_name(a) << " perplexity over " << tokens.size() << " tokens ("
      << what << ", chunk " << a.chunk;
  if (a.stride > 1) err << ", every " << a.stride << "th token scored";
  err << ", " << backend->name();
  if (backend->name() == "cpu") err << ", " << threads_text(resolved_threads(a.threads));
  err << ")\n";
  if (!backend_note.empty()) err << "sinkscope-cli: " << backend_note << "\n";

  const bool tty = stderr_is_tty();
  Throttle throttle(tty ? 0.5 : 15.0);
  bool drew = false;
  const auto progress = [&](const StreamProgress& p) {
    const bool last = p.done >= p.total;
    if (!throttle.ready(last)) return;
    err << (tty ? "\r" : "") << "stream-ppl: " << p.done << "/" << p.total << " tokens, ppl "
        << std::fixed << std::setprecision(3) << p.perplexity_so_far;
    if (!last) err << ", about " << format_duration(p.eta_s) << " left";
    err << (tty ? "      " : "\n");
    err.flush();
    drew = true;
  };
  StreamOptions so;
  so.chunk = a.chunk;
  so.segment = a.segment;
  if (!a.recompute) so.score_stride = a.stride;
  if (a.vs_unquantized) return run_comparison(a, model, bo, *backend, tokens, so, progress, out, err);
  const StreamResult r = a.recompute
                             ? recompute_perplexity(*backend, tokens, int(a.cache.window_size),
                                                    a.stride, so, progress)
                             : stream_perplexity(*backend, tokens, so, progress);
  if (drew && tty) err << "\n";

  if (a.csv) {
    std::ostringstream f;
    f << "segment_begin,segment_end,scored,mean_nll,perplexity\n";
    for (const auto& s : r.segments)
      f << s.begin << "," << s.end << "," << s.scored << "," << std::setprecision(9) << s.mean_nll
        << "," << s.perplexity << "\n";
    write_file_atomic(*a.csv, f.str());  // an interrupted write keeps the previous file
  }
  if (a.json) {
    Json j;
    j["model"] = model->path().string();
    j["file"] = a.file;
    j["mode"] = mode_name(a);
    j["settings"] = what;
    if (!a.dense) {
      j["window"] = static_cast<long long>(a.cache.window_size);
      j["sinks"] = static_cast<long long>(a.cache.sink_keep_count);
      j["position_mode"] = a.cache.position_mode == PositionMode::kCache ? "cache" : "original";
      j["kv"] = !a.cache.quantization.enabled                      ? "float32"
                : a.cache.quantization.kv_dtype == KvQuantDtype::kInt8 ? "int8"
                                                                       : "int4";
      j["protect_sinks"] = a.cache.quantization.enabled && a.cache.quantization.protect_sink_positions;
    }
    j["stride"] = a.stride;
    j["backend"] = backend->name();
    j["chunk"] = a.chunk;
    j["tokens"] = static_cast<long long>(r.tokens);
    j["scored"] = static_cast<long long>(r.scored);
    j["perplexity"] = r.perplexity;
    j["mean_nll"] = r.mean_nll;
    j["seconds"] = r.seconds;
    Json& segments = j["segments"] = Json::array();
    for (const auto& s : r.segments) {
      Json seg;
      seg["begin"] = static_cast<long long>(s.begin);
      seg["end"] = static_cast<long long>(s.end);
      seg["scored"] = static_cast<long long>(s.scored);
      seg["perplexity"] = s.perplexity;
      segments.push_back(std::move(seg));
    }
    j["cache"] = cache_json(r.cache);
    out << dump_json(j) << "\n";
    return 0;
  }
  out << std::fixed << std::setprecision(4) << "perplexity: " << r.perplexity << " ("
      << r.scored << " tokens scored, " << std::setprecision(1) << r.seconds << " s)\n";
  out << "segment            tokens   perplexity\n";
  for (const auto& s : r.segments)
    out << std::setw(8) << s.begin << "-" << std::left << std::setw(9) << s.end << std::right
        << std::setw(7) << s.scored << "   " << std::setprecision(4) << s.perplexity << "\n";
  if (!a.recompute)
    out << "kv cache: " << r.cache.bytes_per_token << " bytes/token, peak " << std::setprecision(2)
        << double(r.cache.high_water_bytes) / (1024.0 * 1024.0) << " MiB, " << r.cache.evicted
        << " tokens evicted\n";
  return 0;
}

}  // namespace sinkscope::cli
