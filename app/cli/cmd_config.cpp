// SPDX-License-Identifier: Apache-2.0
// `sinkscope-cli config check | show | export-llamacpp | capacity FILE`.
#include <filesystem>
#include <iostream>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "app/cli/config_args.h"
#include "engine/cache/capacity.h"
#include "engine/config/config.h"
#include "engine/format/gguf.h"
#include "engine/format/hf_checkpoint.h"
#include "engine/util/json_io.h"
#include "engine/config/llama_cpp_export.h"
#include "engine/config/serving_export.h"
#include "base/atomic_file.h"
#include "engine/model/model.h"
#include "engine/util/paths.h"

namespace sinkscope::cli {

namespace fs = std::filesystem;

namespace {

constexpr int kInvalid = 2;

Json problems_json(const std::vector<ConfigProblem>& problems) {
  Json a = Json::array();
  for (const ConfigProblem& p : problems) {
    Json o;
    o["severity"] = p.severity == Severity::kError ? "error" : "warning";
    o["key"] = p.key;
    o["line"] = p.line;
    o["column"] = p.column;
    o["message"] = p.message;
    a.push_back(std::move(o));
  }
  return a;
}

// Loads the file; prints its problems to `err` and returns nullopt when it has errors (warnings
// are printed and the config is returned).
std::optional<SinkScopeConfig> load_or_report(const std::string& file, std::ostream& err) {
  const ConfigParseResult r = load_config_file(file);
  for (const ConfigProblem& p : r.problems) err << format_problem(p, file) << "\n";
  if (!r.ok()) {
    err << file << ": invalid config (" << r.error_count() << " error"
        << (r.error_count() == 1 ? "" : "s") << "); see 'sinkscope-cli config check'\n";
    return std::nullopt;
  }
  return r.config;
}

struct ShapeSource {
  KvModelShape shape;
  int64_t n_ctx_train = 0;
  std::string from;  // what the shape was read from
};

ShapeSource read_shape(const fs::path& path) {
  ModelConfig m;
  if (const fs::path dir = hf_checkpoint_dir(path); !dir.empty()) {
    m = read_hf_config(read_text_file((dir / "config.json").string(), "--model"),
                       (dir / "config.json").string());
  } else {
    m = read_model_config(*GgufFile::open(path));
  }
  return {{m.n_layer, m.n_head_kv, m.head_dim}, m.n_ctx_train, path.string()};
}

// The config's model.path as a file or folder here: as given, then next to the config file;
// empty when it is unset or not found.
fs::path config_model_path(const ConfigArgs& a, const SinkScopeConfig& c) {
  if (c.model.path.empty()) return {};
  std::error_code ec;
  fs::path p = c.model.path;
  if (!fs::exists(p, ec) && p.is_relative()) p = fs::path(a.file).parent_path() / c.model.path;
  if (!fs::is_regular_file(p, ec) && !fs::is_directory(p, ec)) return {};
  return p;
}

int run_check(const ConfigArgs& a, std::ostream& out) {
  ConfigParseResult r = load_config_file(a.file);
  // The model-dependent rules, when the file itself is sound and a model is at hand.
  std::string model_from, not_checked;
  if (r.error_count() == 0) {
    fs::path mp;
    if (a.model) mp = resolve_model_path(a.model);
    else mp = config_model_path(a, r.config);
    if (!mp.empty()) {
      const ShapeSource src = read_shape(mp);
      model_from = src.from;
      for (ConfigProblem& p : check_against_model(r.config, src.shape.head_dim, src.n_ctx_train))
        r.problems.push_back(std::move(p));
    } else {
      not_checked = r.config.model.path.empty()
                        ? std::string("no model given")
                        : "model.path " + r.config.model.path + " not found here";
    }
  }
  const size_t errors = r.error_count();
  const size_t warnings = r.problems.size() - errors;
  if (a.json) {
    Json j;
    j["file"] = a.file;
    j["valid"] = errors == 0;
    j["errors"] = static_cast<unsigned long long>(errors);
    j["warnings"] = static_cast<unsigned long long>(warnings);
    j["problems"] = problems_json(r.problems);
    j["model_checked"] = !model_from.empty();
    if (!model_from.empty()) j["model"] = model_from;
    out << dump_json(j) << "\n";
  } else {
    for (const ConfigProblem& p : r.problems) out << format_problem(p, a.file) << "\n";
    if (!not_checked.empty()) {
      out << a.file << ": note: the model-dependent rules (quantization group size against "
          << "head dim, context length against trained context) were not checked: "
          << not_checked << "; give --model PATH\n";
    }
    out << a.file << ": " << (errors == 0 ? "valid" : "invalid") << " (" << errors << " error"
        << (errors == 1 ? "" : "s") << ", " << warnings << " warning" << (warnings == 1 ? "" : "s")
        << (model_from.empty() ? "" : ", checked against " + model_from) << ")\n";
  }
  return errors == 0 ? 0 : kInvalid;
}

int run_export(const ConfigArgs& a, std::ostream& out, std::ostream& err) {
  const auto c = load_or_report(a.file, err);
  if (!c) return kInvalid;
  const LlamaCppExport e = export_llama_cpp(*c);
  if (a.json) {
    Json j;
    j["command"] = e.command_line();
    j["args"] = e.args;
    j["notes"] = e.notes;
    out << dump_json(j) << "\n";
  } else {
    out << e.format();
  }
  return 0;
}

int run_serving_export(const ConfigArgs& a, std::ostream& out, std::ostream& err) {
  const auto c = load_or_report(a.file, err);
  if (!c) return kInvalid;
  const ServingExport e = export_serving(*parse_serving_engine(a.to), *c);
  if (a.json) {
    Json j;
    j["engine"] = a.to;
    j["usage"] = e.usage;
    j["format"] = e.yaml() ? "yaml" : "shell";
    j["text"] = e.text;
    j["notes"] = e.notes;
    out << dump_json(j) << "\n";
  } else if (a.out) {
    write_file_atomic(*a.out, e.format());
    err << "wrote " << *a.out << " (" << a.to << ", " << e.notes.size() << " note"
        << (e.notes.size() == 1 ? "" : "s") << " on what it cannot express)\n";
  } else {
    out << e.format();
  }
  return 0;
}

// --model, else the config's model.path (as given, then next to the config file), else the
// default model when present, else SmolLM2-135M's shape.
ShapeSource model_shape(const ConfigArgs& a, const SinkScopeConfig& c) {
  if (a.model) return read_shape(resolve_model_path(a.model));
  std::error_code ec;
  if (!c.model.path.empty()) {
    const fs::path p = config_model_path(a, c);
    if (p.empty())
      throw std::runtime_error("model.path " + c.model.path +
                               " not found; give --model PATH to read the model's shape from");
    return read_shape(p);
  }
  const fs::path def = default_model_path();
  if (fs::is_regular_file(def, ec)) return read_shape(def);
  return {kSmolLM2Shape, 8192, "SmolLM2-135M's built-in shape (default model not downloaded)"};
}

int run_capacity(const ConfigArgs& a, std::ostream& out, std::ostream& err) {
  const auto c = load_or_report(a.file, err);
  if (!c) return kInvalid;
  const ShapeSource src = model_shape(a, *c);
  bool model_ok = true;
  for (const ConfigProblem& p : check_against_model(*c, src.shape.head_dim, src.n_ctx_train)) {
    err << format_problem(p, a.file) << "\n";
    if (p.severity == Severity::kError) model_ok = false;
  }
  if (!model_ok) return kInvalid;

  const KvEstimate e = estimate_kv(src.shape, *c, a.batch);
  const int64_t budget_mib =
      a.budget_mib ? *a.budget_mib : c->inference.cache.global_cache_limit_mib;
  const int64_t max_batch =
      budget_mib > 0 ? max_batch_for_budget(src.shape, *c, budget_mib * 1024 * 1024) : -1;
  const CacheSection& cache = c->inference.cache;
  const QuantizationSection& q = c->inference.quantization;
  const char* kv_type = q.enabled ? to_string(q.kv_dtype) : to_string(c->inference.attention.dtype);

  if (a.json) {
    Json j;
    Json& model = j["model"];
    model["source"] = src.from;
    model["n_layer"] = src.shape.n_layer;
    model["n_head_kv"] = src.shape.n_head_kv;
    model["head_dim"] = src.shape.head_dim;
    j["strategy"] = to_string(cache.strategy);
    j["kv_dtype"] = kv_type;
    j["block_size"] = cache.block_size;
    j["tokens_per_request"] = static_cast<long long>(e.tokens_per_request);
    j["sink_tokens_16bit"] = static_cast<long long>(e.sink_tokens);
    j["sink_slots"] = static_cast<long long>(e.sink_slots);
    j["main_slots"] = static_cast<long long>(e.main_slots);
    j["sink_bytes_per_token"] = static_cast<long long>(e.sink_bytes_per_token);
    j["main_bytes_per_token"] = static_cast<long long>(e.main_bytes_per_token);
    j["bytes_per_request"] = static_cast<long long>(e.bytes_per_request);
    j["mib_per_request"] = e.mib_per_request();
    j["batch"] = static_cast<long long>(e.batch);
    j["bytes_total"] = static_cast<long long>(e.bytes_total);
    j["mib_total"] = e.mib_total();
    if (budget_mib > 0) {
      j["budget_mib"] = static_cast<long long>(budget_mib);
      j["max_batch"] = static_cast<long long>(max_batch);
    } else {
      j["budget_mib"] = nullptr;
      j["max_batch"] = nullptr;
    }
    out << dump_json(j) << "\n";
    return 0;
  }

  out << "model: " << src.shape.n_layer << " layers, " << src.shape.n_head_kv
      << " KV heads, head dim " << src.shape.head_dim << " (" << src.from << ")\n";
  out << "cache: " << to_string(cache.strategy);
  if (cache.strategy == CacheStrategy::kSlidingWindow)
    out << ", " << cache.sink_keep_count << " sinks + " << cache.window_size << " window";
  out << ": " << e.tokens_per_request << " tokens per request (limit " << request_token_limit(*c)
      << "), pages of " << cache.block_size << "\n";
  out << "storage: " << kv_type;
  if (q.enabled) out << " in groups of " << q.group_size << " with 16-bit scales";
  out << ", " << e.main_bytes_per_token << " B/token";
  if (e.sink_tokens > 0)
    out << "; " << e.sink_tokens << " protected sink tokens in "
        << to_string(c->inference.attention.dtype) << ", " << e.sink_bytes_per_token << " B/token";
  out << "\n";
  out << "per request: " << e.sink_slots + e.main_slots << " token slots, "
      << format_bytes(e.bytes_per_request) << "\n";
  out << "batch " << e.batch << ": " << format_bytes(e.bytes_total) << "\n";
  if (budget_mib > 0) {
    out << "budget " << budget_mib << " MiB"
        << (a.budget_mib ? "" : " (inference.cache.global_cache_limit_mib)") << ": at most "
        << max_batch << " concurrent request" << (max_batch == 1 ? "" : "s");
    if (e.bytes_total > budget_mib * 1024 * 1024) out << "; batch " << e.batch << " does not fit";
    out << "\n";
  }
  return 0;
}

}  // namespace

int run_config(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  const ConfigArgs a = parse_config_args(args);
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  // A missing config file is a usage error (2), as a missing --model or --prompt-file is.
  if (std::error_code ec; !a.file.empty() && !fs::exists(a.file, ec))
    throw UsageError("file not found: " + a.file);
  switch (a.action) {
    case ConfigAction::kCheck:
      return run_check(a, out);
    case ConfigAction::kShow: {
      const auto c = load_or_report(a.file, err);
      if (!c) return kInvalid;
      out << format_config(*c);
      return 0;
    }
    case ConfigAction::kExportLlamaCpp:
      return run_export(a, out, err);
    case ConfigAction::kExport:
      return run_serving_export(a, out, err);
    case ConfigAction::kCapacity:
      return run_capacity(a, out, err);
  }
  return 1;
}

}  // namespace sinkscope::cli
