// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli validate: a config against the dense baseline on the validation dataset, writing
// the validated config (results, gates, pass/fail, dataset hash, provenance) atomically.
// sinkscope-cli sweep: a grid of settings, each point validated, with the Pareto front marked.
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <thread>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "app/cli/distributed_run.h"
#include "app/cli/interrupt.h"
#include "app/cli/world.h"
#include "base/atomic_file.h"
#include "engine/backend/backend_factory.h"
#include "engine/cache/capacity.h"
#include "engine/util/json_io.h"
#include "engine/util/paths.h"
#include "engine/util/sha256.h"
#include "engine/eval/sweep.h"
#include "engine/eval/sweep_result.h"
#include "engine/eval/validation.h"

namespace sinkscope::cli {

namespace {

constexpr int kExitGateFailed = 3;

// Options shared by validate and sweep.
void add_run_options(ArgParser& p) {
  p.option("--dataset", "MANIFEST",
           "dataset manifest (default: the set-up script's, " + default_dataset_manifest().string() + ")")
      .option("--model", "PATH", "GGUF file or Hugging Face checkpoint directory (default: the config's "
                  "model.path, else the default model)")
      .option("--classes", "C,C,...", "only these sample classes: short, long, very_long, passkey")
      .option("--max-per-class", "N", "at most N samples of each class (default: all)")
      .option("--gen-tokens", "N", "greedy tokens after each short/long sample for ROUGE-L (default 32)")
      .option("--stream-chunk", "N", "tokens per forward for very long samples (default 512)")
      .option("--seed", "S", "added to every passkey task's seed (default 0)")
      .option("--threads", "N",
              "CPU threads per process, 0 = all (default; under MPI: the host's cores shared "
              "among its ranks)")
      .option("--backend", "KIND",
              "cpu (default: the reference, every cache policy), cuda (baseline and variant on "
              "the GPU; under MPI each rank takes the GPU of its local rank) or auto (cuda "
              "where the config runs there)")
      .option("--journal", "BASE",
              "journal of finished samples, one file per process: BASE.rank-R (default: the "
              "output file + .journal)")
      .flag("--resume", "complete an interrupted run from its journal (same arguments)");
}

struct RunSetup {
  Dataset dataset;
  ValidationOptions options;
};

RunSetup setup_run(const ArgParser& p) {
  RunSetup r;
  const std::filesystem::path manifest = p.get("--dataset") ? std::filesystem::path(*p.get("--dataset"))
                                                            : default_dataset_manifest();
  if (!p.get("--dataset") && !std::filesystem::exists(manifest))
    throw std::runtime_error("the default validation dataset is missing (" + manifest.string() +
                             "); run `bash scripts/setup.sh --eval-data` to assemble it, or "
                             "pass --dataset MANIFEST");
  Dataset full = load_dataset(manifest);
  std::vector<SampleClass> classes;
  if (auto v = p.get("--classes")) {
    std::string_view rest = *v;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      try {
        classes.push_back(parse_sample_class(rest.substr(0, comma)));
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--classes: ") + e.what());
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  const int per_class = int(p.get_int("--max-per-class", 0, 0, 1 << 20));
  r.dataset = classes.empty() && per_class == 0 ? std::move(full) : select_samples(full, classes, per_class);
  r.options.gen_tokens = int(p.get_int("--gen-tokens", 32, 0, 4096));
  r.options.stream_chunk = int(p.get_int("--stream-chunk", 512, 1, 1 << 20));
  r.options.seed = p.get_uint64("--seed", 0);
  r.options.threads = int(p.get_int("--threads", 0, 0, 1024));
  if (auto b = p.get("--backend")) {
    const auto kind = parse_backend_kind(*b);
    if (!kind) throw UsageError("--backend: '" + *b + "' is not cpu, cuda or auto");
    r.options.backend = *kind;
  }
  return r;
}

// Under MPI with --threads 0, the ranks on one host share its cores; with a GPU backend each
// rank takes the GPU of its local rank (modulo the GPUs present).
void share_threads(ValidationOptions& o, const World& w) {
  if (o.threads == 0 && w.local_size > 1)
    o.threads = std::max(1, int(std::thread::hardware_concurrency()) / w.local_size);
  if (o.backend != BackendKind::kCpu) (void)select_cuda_device(w.local_rank);
}

// The device the results were measured on, for the validated configs' provenance; with
// several ranks, their number and hosts.
std::string run_device(const ValidationOptions& o, const World& w,
                       const std::vector<std::string>& hosts = {}) {
  std::string why, d;
  const bool gpu = o.backend != BackendKind::kCpu && cuda_available(&why);
  d = gpu ? cuda_device_name() : cpu_device_description(o.threads);
  if (w.size > 1) {
    d += (gpu ? " (" : " x ") + std::to_string(w.size) + " MPI ranks";
    if (!hosts.empty()) {
      d += " on ";
      for (size_t i = 0; i < hosts.size(); ++i) d += (i ? ", " : "") + hosts[i];
    }
    if (gpu) d += ")";
  }
  return d;
}

// What a run's results depend on (engine/util/work_journal.h): a journal is resumed only by the same.
std::string run_fingerprint(const std::string& what, const RunSetup& s, const Model& m,
                            const ArgParser& p) {
  std::ostringstream f;
  f << what << "\n" << s.dataset.name << " " << s.dataset.sha256 << "\n";
  for (const auto& sample : s.dataset.samples) f << sample.id << ",";
  f << "\n" << m.sha256() << "\n" << s.options.gen_tokens << " " << s.options.stream_chunk << " "
    << s.options.passkey_tokens << " " << s.options.seed << " " << p.get("--threads").value_or("0")
    << " " << p.get("--backend").value_or("cpu");
  return sha256_hex(f.str());
}

std::shared_ptr<const Model> load_for(const ArgParser& p, const SinkScopeConfig& c, bool quiet,
                                      std::ostream& err) {
  std::optional<std::string> path = p.get("--model");
  if (!path && !c.model.path.empty()) path = c.model.path;
  auto model = load_model(resolve_model_path(path), quiet ? nullptr : &err);
  if (!c.model.sha256.empty() && c.model.sha256 != model->sha256())
    throw std::runtime_error("the config names model sha256 " + c.model.sha256 + " but " +
                             model->path().string() + " has " + model->sha256());
  return model;
}

// Units finished by every process (including those a resumed run found done), all units, the
// units done at the start, and the seconds since the start.
struct Everywhere {
  size_t done = 0, total = 0, at_start = 0;
  double elapsed_s = 0;
};

// Progress on stderr: one redrawn line on a terminal, a line every 30 s otherwise. With several
// processes (rank 0 prints), `everywhere` counts the units of all of them.
ValidationProgressFn progress_printer(std::ostream& err, const std::string& prefix, bool& drew,
                                      std::function<Everywhere()> everywhere = {}) {
  const bool tty = stderr_is_tty();
  auto throttle = std::make_shared<Throttle>(tty ? 0.5 : 30.0);
  return [&err, prefix, tty, throttle, &drew, everywhere](const ValidationProgress& p) {
    const bool last = p.sample >= p.samples;
    if (!throttle->ready(last)) return;
    if (everywhere) {
      const Everywhere e = everywhere();
      err << (tty ? "\r" : "") << prefix << e.done << "/" << e.total << " units on all processes";
      if (e.done > e.at_start && e.done < e.total)
        err << ", about "
            << format_duration(e.elapsed_s * double(e.total - e.done) / double(e.done - e.at_start))
            << " left";
      err << (tty ? "        " : "\n");
      err.flush();
      drew = true;
      return;
    }
    err << (tty ? "\r" : "") << prefix << p.sample << "/" << p.samples << " samples ("
        << std::fixed << std::setprecision(0) << (p.total > 0 ? 100.0 * p.done / p.total : 100.0)
        << " %)";
    if (!last) {
      err << ", " << p.current;
      if (p.done > 0) err << ", about " << format_duration(p.eta_s) << " left";
    }
    else err << ", " << format_duration(p.elapsed_s);
    err << (tty ? "        " : "\n");
    err.flush();
    drew = true;
  };
}

std::string pct(double v, int prec = 2) {
  if (std::isnan(v)) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}

void print_report(std::ostream& out, const ValidationRun& run, const Dataset& d) {
  const ValidationResults& r = run.results;
  out << "dataset: " << d.name << " (" << d.samples.size() << " samples, sha256 "
      << d.sha256.substr(0, 16) << "...), backend " << run.backend << ", "
      << format_duration(run.seconds) << "\n\n";
  out << "group          samples   tokens  ppl delta %   KL mean  top-1 %  ROUGE-L  passkey (dense)\n";
  auto row = [&out](const ClassSummary& s) {
    out << std::left << std::setw(14) << s.name << std::right << std::setw(8) << s.samples
        << std::setw(9) << s.tokens << std::setw(13)
        << (s.cmp.scored ? pct(s.cmp.ppl_delta_pct(), 3) : "-") << std::setw(10)
        << (s.cmp.positions ? pct(s.cmp.kl_mean(), 5) : "-") << std::setw(9)
        << (s.cmp.positions ? pct(100 * s.cmp.top1_agreement(), 2) : "-") << std::setw(9)
        << pct(s.rouge_l(), 3) << "  ";
    if (s.passkey_n)
      out << s.passkey_variant << "/" << s.passkey_n << " (" << s.passkey_dense << "/" << s.passkey_n << ")";
    else
      out << "-";
    out << "\n";
  };
  for (const auto& s : run.by_class) row(s);
  out << "\n";
  for (const auto& s : run.by_kind) row(s);
  out << "\nresults: ppl delta " << pct(r.ppl_delta_pct, 3) << " %, KL " << pct(r.kl_mean, 5)
      << ", top-1 " << pct(100 * r.top1_agreement) << " %, ROUGE-L " << pct(r.rouge_l, 3)
      << ", passkey " << pct(100 * r.passkey_accuracy, 1) << " % (dense "
      << pct(100 * r.baseline_passkey_accuracy, 1) << " %)\n"
      << "         sparsity prefill " << pct(100 * r.sparsity_prefill, 1) << " %, decode "
      << pct(100 * r.sparsity_decode, 1) << " %; TTFT " << pct(r.ttft_ms, 1) << " ms, TPOT "
      << pct(r.tpot_ms, 2) << " ms; peak KV " << pct(r.peak_kv_mib, 2) << " MiB\n";
  out << "gates:\n";
  for (const auto& g : run.gates.gates)
    out << "  " << (g.passed ? "PASS " : "FAIL ") << std::left << std::setw(18) << g.name
        << std::right << " " << (g.passed ? "" : g.reason) << "\n";
  out << (run.gates.passed ? "PASSED" : "FAILED: " + run.gates.summary()) << "\n";
}

SinkScopeConfig load_config_arg(const std::string& file) {
  try {
    return load_config_or_throw(file);
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    for (const auto& pr : e.problems()) msg += "\n  " + format_problem(pr, file);
    throw UsageError("--config: " + msg);
  }
}

}  // namespace

int run_validate(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  ArgParser p("sinkscope-cli validate --config FILE --out FILE [options]",
              "Runs the dense baseline and the config's settings on the validation dataset\n"
              "(short, long, streamed very long texts and passkey tasks), applies the quality\n"
              "gates and writes the validated config (results, gates, pass/fail, dataset hash,\n"
              "model sha256, provenance) atomically to --out. Finished samples are journaled, so\n"
              "a run that is stopped (Ctrl-C) or killed is completed by --resume. Under mpirun /\n"
              "srun the samples are split among the ranks (docs/distributed.md).");
  p.option("--config", "FILE", "the config to validate (YAML; see `sinkscope-cli config check`)")
      .option("--out", "FILE", "where the validated config goes (written atomically)")
      .option("--samples-csv", "FILE", "also write one row per sample (atomically)")
      .flag("--json", "print the results as one JSON object on stdout");
  add_run_options(p);
  p.epilog("Exit status: 0 all gates passed, 3 a gate failed (the file is written with\n"
           "passed: false), 1 runtime error, 2 usage error, 130 interrupted.\n");
  p.parse(args);
  if (p.help_requested()) {
    out << p.help();
    return 0;
  }
  const auto cfg_file = p.get("--config");
  const auto out_file = p.get("--out");
  if (!cfg_file) throw UsageError("--config is required");
  if (!out_file) throw UsageError("--out is required");
  const bool json_out = p.has("--json");
  const SinkScopeConfig config = load_config_arg(*cfg_file);
  RunSetup setup = setup_run(p);
  const World& wld = world();
  auto model = load_for(p, config, json_out || wld.rank != 0, err);
  for (const auto& pr : check_against_model(config, model->config().head_dim, model->config().n_ctx_train))
    if (pr.severity == Severity::kError) throw UsageError("--config: " + format_problem(pr, *cfg_file));
  setup.options.cancel = interrupt_flag();
  share_threads(setup.options, wld);
  const std::filesystem::path journal =
      p.get("--journal") ? std::filesystem::path(*p.get("--journal"))
                         : std::filesystem::path(*out_file + ".journal");
  std::vector<uint64_t> units(setup.dataset.samples.size());
  for (size_t i = 0; i < units.size(); ++i) units[i] = i;
  DistributedRun d(wld, journal,
                   run_fingerprint("validate\n" + format_config(config), setup, *model, p),
                   p.has("--resume"), units, JournalInfo{"validate", *cfg_file, 0});
  if (wld.rank == 0) {
    err << "sinkscope-cli validate: " << setup.dataset.samples.size() << " samples of "
        << setup.dataset.name << " against the dense baseline";
    if (wld.size > 1) err << " on " << wld.size << " processes";
    if (d.resumed() > 0) err << ", " << d.resumed() << " done already (journal)";
    err << " (Ctrl-C stops; finished samples are kept)\n";
  }
  setup.options.run_sample = [&d](size_t i) { return d.mine(i); };
  setup.options.on_sample = [&d](size_t i, const SampleOutcome& o) { d.record(i, o); };
  bool drew = false;
  const auto t0 = std::chrono::steady_clock::now();
  std::function<Everywhere()> everywhere;
  if (wld.size > 1)
    everywhere = [&d, &t0, n = units.size()] {
      return Everywhere{d.finished_everywhere(), n, d.resumed(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
    };
  try {
    (void)run_validation(model, config, setup.dataset, setup.options,
                         wld.rank == 0 ? progress_printer(err, "validate: ", drew, everywhere)
                                     : ValidationProgressFn());
  } catch (const Cancelled&) {
    if (drew && stderr_is_tty()) err << "\n";
    err << "sinkscope-cli validate: interrupted; the finished samples are kept in "
        << journal.string() << ".rank-*: rerun with --resume to complete the run\n";
    return kExitInterrupted;
  }
  if (drew && stderr_is_tty()) err << "\n";
  std::map<uint64_t, SampleOutcome> all = d.gather();
  if (wld.rank != 0) return 0;
  std::vector<SampleOutcome> outcomes;
  for (uint64_t u : units) {
    auto it = all.find(u);
    if (it == all.end())
      throw std::runtime_error("sample " + setup.dataset.samples[size_t(u)].id +
                               " has no result (a process ended early?); rerun with --resume");
    outcomes.push_back(std::move(it->second));
  }
  const std::string device = run_device(setup.options, wld, d.hosts());
  const ValidationRun run = summarize_validation(
      config, std::move(outcomes), device,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  SinkScopeConfig validated = with_validation(config, run, setup.dataset, device);
  validated.model.sha256 = model->sha256();
  save_config(*out_file, validated);
  if (auto csv = p.get("--samples-csv")) {
    std::ostringstream f;
    f << "id,kind,class,tokens,kl_mean,top1,nll_dense,nll_variant,scored,rouge_l,passkey_dense,"
         "passkey_variant,sparsity_prefill,sparsity_decode,peak_kv_bytes,seconds\n";
    f << std::setprecision(9);
    for (const auto& o : run.samples) {
      f << o.id << "," << o.kind << "," << to_string(o.cls) << "," << o.tokens << ","
        << o.cmp.kl_mean() << "," << o.cmp.top1_agreement() << "," << o.cmp.nll_dense << ","
        << o.cmp.nll_variant << "," << o.cmp.scored << ","
        << (std::isnan(o.rouge_l) ? std::string() : pct(o.rouge_l, 6)) << "," << o.passkey_dense
        << "," << o.passkey_variant << "," << o.prefill.sparsity() << "," << o.decode.sparsity()
        << "," << o.peak_kv_bytes << "," << o.seconds << "\n";
    }
    write_file_atomic(*csv, f.str());
  }
  remove_journal(journal);  // every output is written
  if (json_out) {
    Json j;
    j["config"] = *cfg_file;
    j["out"] = *out_file;
    j["dataset"] = setup.dataset.name;
    j["dataset_sha256"] = setup.dataset.sha256;
    j["samples"] = static_cast<long long>(setup.dataset.samples.size());
    j["backend"] = run.backend;
    j["seconds"] = run.seconds;
    j["results"] = run.results;
    Json& gates = j["gates"] = Json::array();
    for (const auto& g : run.gates.gates) {
      Json gate;
      gate["name"] = g.name;
      gate["passed"] = g.passed;
      if (!std::isnan(g.value)) gate["value"] = g.value;
      if (!std::isnan(g.limit)) gate["limit"] = g.limit;
      gate["reason"] = g.reason;
      gates.push_back(std::move(gate));
    }
    j["passed"] = run.gates.passed;
    out << dump_json(j) << "\n";
  } else {
    print_report(out, run, setup.dataset);
    // The capacity planner's estimate next to the measured peak (the CPU keeps unquantized rows
    // in float32, the estimate uses the config's attention dtype, so they differ by that).
    const ModelConfig& mc = model->config();
    const KvEstimate est = estimate_kv(KvModelShape{mc.n_layer, mc.n_head_kv, mc.head_dim}, config);
    out << "KV cache: planner estimate " << pct(est.mib_per_request(), 2) << " MiB per request ("
        << est.tokens_per_request << " tokens, " << to_string(config.inference.attention.dtype)
        << (config.inference.quantization.enabled ? std::string(" / ") + to_string(config.inference.quantization.kv_dtype) : "")
        << "); measured peak " << pct(run.results.peak_kv_mib, 2) << " MiB on " << run.backend
        << " (float32 rows)\n";
    out << "wrote " << *out_file << "\n";
  }
  return run.gates.passed ? 0 : kExitGateFailed;
}

int run_sweep(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  ArgParser p("sinkscope-cli sweep --grid \"key=v,v;key=v,...\" [options]",
              "Validates every point of a grid of settings against one dense baseline and marks\n"
              "the Pareto fronts: prefill sparsity vs mean KL, and KV memory vs mean KL.\n"
              "Grid keys: lambda lambda_prefill lambda_decode mode min_seq window sinks position\n"
              "block kv group protect (engine/eval/sweep.h). Points that make an invalid config (sinks\n"
              "> window, say) are listed as invalid and skipped. Finished samples are journaled\n"
              "(--resume completes a stopped run); under mpirun / srun the points x samples are\n"
              "split among the ranks (docs/distributed.md).");
  p.option("--grid", "TEXT", "e.g. \"lambda=0.001,0.01,0.05;window=512,2048;sinks=0,4\"")
      .option("--config", "FILE", "base config the grid modifies (default: the defaults)")
      .option("--csv", "FILE", "write the table as CSV (atomically)")
      .option("--json-out", "FILE", "write points, results, fronts and each point's config as JSON")
      .option("--configs-dir", "DIR", "also write each point's validated config as DIR/point-NN.yaml")
      .option("--baseline-mib", "N", "memory for cached dense-baseline logits (default 4096)")
      .flag("--json", "print the JSON document on stdout instead of the table");
  add_run_options(p);
  p.epilog("Exit status: 0 done, 1 runtime error, 2 usage error, 130 interrupted.\n");
  p.parse(args);
  if (p.help_requested()) {
    out << p.help();
    return 0;
  }
  const auto grid_text = p.get("--grid");
  if (!grid_text) throw UsageError("--grid is required");
  std::vector<GridPoint> points;
  try {
    points = expand_grid(parse_grid(*grid_text));
  } catch (const GridError& e) {
    throw UsageError(std::string("--grid: ") + e.what());
  }
  const bool json_out = p.has("--json");
  const SinkScopeConfig base = p.get("--config") ? load_config_arg(*p.get("--config")) : SinkScopeConfig{};
  RunSetup setup = setup_run(p);
  const World& wld = world();
  auto model = load_for(p, base, json_out || wld.rank != 0, err);
  setup.options.cancel = interrupt_flag();
  share_threads(setup.options, wld);
  BaselineStore store(p.get_int("--baseline-mib", 4096, 0, int64_t(1) << 24) << 20);
  std::string device = run_device(setup.options, wld);

  struct Point {
    GridPoint grid;
    SinkScopeConfig config;
    std::string invalid;  // why the point was skipped
    ValidationRun run;
  };
  std::vector<Point> rows;
  for (const auto& g : points) {
    Point pt;
    pt.grid = g;
    pt.config = apply_point(base, g);
    for (const auto& pr : check_config(pt.config))
      if (pr.severity == Severity::kError && pt.invalid.empty()) pt.invalid = format_problem(pr);
    if (pt.invalid.empty())
      for (const auto& pr : check_against_model(pt.config, model->config().head_dim, model->config().n_ctx_train))
        if (pr.severity == Severity::kError && pt.invalid.empty()) pt.invalid = format_problem(pr);
    rows.push_back(std::move(pt));
  }
  // Units: point i, sample s -> i * samples + s, for the valid points.
  const size_t n_samples = setup.dataset.samples.size();
  std::vector<uint64_t> units;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].invalid.empty())
      for (size_t k = 0; k < n_samples; ++k) units.push_back(i * n_samples + k);
  std::filesystem::path journal;
  if (auto j = p.get("--journal")) journal = *j;
  else if (auto f = p.get("--csv")) journal = *f + ".journal";
  else if (auto f2 = p.get("--json-out")) journal = *f2 + ".journal";
  else if (auto dir = p.get("--configs-dir")) journal = std::filesystem::path(*dir) / "sweep.journal";
  else journal = "sinkscope-sweep.journal";
  DistributedRun d(wld, journal,
                   run_fingerprint("sweep\n" + *grid_text + "\n" + format_config(base), setup,
                                   *model, p),
                   p.has("--resume"), units, JournalInfo{"sweep", *grid_text, 0});
  if (wld.rank == 0) {
    err << "sinkscope-cli sweep: " << rows.size() << " points x " << n_samples << " samples of "
        << setup.dataset.name;
    if (wld.size > 1) err << " on " << wld.size << " processes";
    if (d.resumed() > 0) err << ", " << d.resumed() << " of " << units.size() << " done already (journal)";
    err << " (Ctrl-C stops; finished samples are kept)\n";
  }
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0;
  const int total = int(rows.size());
  std::function<Everywhere()> everywhere;
  if (wld.size > 1)
    everywhere = [&d, &t0, n = units.size()] {
      return Everywhere{d.finished_everywhere(), n, d.resumed(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
    };
  for (size_t i = 0; i < rows.size(); ++i) {
    Point& pt = rows[i];
    ++done;
    if (!pt.invalid.empty()) {
      if (wld.rank == 0)
        err << "sweep: point " << done << "/" << total << " (" << describe(pt.grid) << ") invalid: " << pt.invalid << "\n";
      continue;
    }
    bool drew = false;
    const std::string prefix = "sweep: point " + std::to_string(done) + "/" + std::to_string(total) + " (" + describe(pt.grid) + "): ";
    setup.options.run_sample = [&d, i, n_samples](size_t k) { return d.mine(i * n_samples + k); };
    setup.options.on_sample = [&d, i, n_samples](size_t k, const SampleOutcome& o) {
      d.record(i * n_samples + k, o);
    };
    try {
      (void)run_validation(model, pt.config, setup.dataset, setup.options,
                           wld.rank == 0 ? progress_printer(err, prefix, drew, everywhere)
                                       : ValidationProgressFn(),
                           &store);
    } catch (const Cancelled&) {
      if (drew && stderr_is_tty()) err << "\n";
      err << "sinkscope-cli sweep: interrupted; the finished samples are kept in "
          << journal.string() << ".rank-*: rerun with --resume to complete the sweep\n";
      return kExitInterrupted;
    } catch (const ValidationError& e) {  // every process finds the same
      pt.invalid = e.what();
      if (wld.rank == 0)
        err << "sweep: point " << done << "/" << total << " skipped: " << e.what() << "\n";
      continue;
    } catch (const std::exception& e) {  // name the point (the caller names the process)
      throw std::runtime_error("point " + std::to_string(i) + " (" + describe(pt.grid) +
                               "): " + e.what());
    }
    if (drew && stderr_is_tty()) err << "\n";
    if (wld.rank == 0 && wld.size == 1) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      err << "sweep: " << done << "/" << total << " points done, about "
          << format_duration(elapsed / done * (total - done)) << " left\n";
    }
  }
  std::map<uint64_t, SampleOutcome> all = d.gather();
  if (wld.rank != 0) return 0;
  device = run_device(setup.options, wld, d.hosts());
  for (size_t i = 0; i < rows.size(); ++i) {
    Point& pt = rows[i];
    if (!pt.invalid.empty()) continue;
    std::vector<SampleOutcome> outcomes;
    for (size_t k = 0; k < n_samples; ++k) {
      auto it = all.find(i * n_samples + k);
      if (it == all.end())
        throw std::runtime_error("point " + std::to_string(i) + " (" + describe(pt.grid) +
                                 "), sample " + setup.dataset.samples[k].id +
                                 " has no result (a process ended early?); rerun with --resume");
      outcomes.push_back(std::move(it->second));
    }
    pt.run = summarize_validation(pt.config, std::move(outcomes), device, 0.0);
    pt.config = with_validation(pt.config, pt.run, setup.dataset, device);
    pt.config.model.sha256 = model->sha256();
  }

  std::vector<double> sp, mem, kl;
  for (const auto& pt : rows) {
    const bool ok = pt.invalid.empty();
    sp.push_back(ok ? pt.run.results.sparsity_prefill : NAN);
    mem.push_back(ok ? pt.run.results.peak_kv_mib : NAN);
    kl.push_back(ok ? pt.run.results.kl_mean : NAN);
  }
  const std::vector<bool> front_sp = pareto_front_max_min(sp, kl);
  const std::vector<bool> front_mem = pareto_front_min_min(mem, kl);

  // CSV
  std::ostringstream csv;
  csv << "point";
  std::vector<std::string> keys;
  for (const auto& [k, v] : points.front()) keys.push_back(k);
  for (const auto& k : keys) csv << "," << k;
  csv << ",valid,passed,ppl_delta_pct,kl_mean,top1_agreement,rouge_l,passkey_accuracy,"
         "baseline_passkey_accuracy,sparsity_prefill,sparsity_decode,ttft_ms,tpot_ms,peak_kv_mib,"
         "pareto_sparsity,pareto_memory\n";
  csv << std::setprecision(9);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& pt = rows[i];
    const auto& r = pt.run.results;
    csv << i;
    for (const auto& [k, v] : pt.grid) csv << "," << v;
    const bool ok = pt.invalid.empty();
    auto n = [&csv, ok](double v) { csv << "," << (ok && !std::isnan(v) ? pct(v, 9) : std::string()); };
    csv << "," << (ok ? 1 : 0) << "," << (ok && pt.run.gates.passed ? 1 : 0);
    n(r.ppl_delta_pct); n(r.kl_mean); n(r.top1_agreement); n(r.rouge_l); n(r.passkey_accuracy);
    n(r.baseline_passkey_accuracy); n(r.sparsity_prefill); n(r.sparsity_decode); n(r.ttft_ms);
    n(r.tpot_ms); n(r.peak_kv_mib);
    csv << "," << (front_sp[i] ? 1 : 0) << "," << (front_mem[i] ? 1 : 0) << "\n";
  }
  // JSON (engine/eval/sweep_result.h: the schema the GUI reads back)
  SweepResult doc;
  doc.grid = *grid_text;
  doc.dataset = setup.dataset.name;
  doc.dataset_sha256 = setup.dataset.sha256;
  doc.samples = static_cast<int64_t>(setup.dataset.samples.size());
  doc.model_sha256 = model->sha256();
  doc.device = device;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& pt = rows[i];
    SweepPointResult r;
    r.index = static_cast<int64_t>(i);
    r.label = describe(pt.grid);
    r.settings = pt.grid;
    r.valid = pt.invalid.empty();
    r.invalid = pt.invalid;
    if (r.valid) {
      r.passed = pt.run.gates.passed;
      r.results = pt.run.results;
      r.gates = pt.run.gates.summary();
    }
    r.pareto_sparsity = front_sp[i];
    r.pareto_memory = front_mem[i];
    r.config_yaml = format_config(pt.config);
    doc.points.push_back(std::move(r));
  }
  const std::string doc_text = dump_json(Json(doc));
  if (auto f = p.get("--csv")) write_file_atomic(*f, csv.str());
  if (auto f = p.get("--json-out")) write_file_atomic(*f, doc_text + "\n");
  if (auto dir = p.get("--configs-dir")) {
    std::filesystem::create_directories(*dir);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].invalid.empty()) continue;
      std::ostringstream name;
      name << "point-" << std::setw(2) << std::setfill('0') << i << ".yaml";
      save_config(std::filesystem::path(*dir) / name.str(), rows[i].config);
    }
  }
  remove_journal(journal);  // every output is written
  if (json_out) {
    out << doc_text << "\n";
    return 0;
  }
  out << "point  settings                                  ppl d%    KL mean  top-1 %  ROUGE-L  "
         "passkey  sparsity %  peak KV MiB  gates  front\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& pt = rows[i];
    const auto& r = pt.run.results;
    out << std::setw(5) << i << "  " << std::left << std::setw(40) << describe(pt.grid) << std::right;
    if (!pt.invalid.empty()) {
      out << "  invalid: " << pt.invalid << "\n";
      continue;
    }
    out << std::setw(8) << pct(r.ppl_delta_pct, 3) << std::setw(11) << pct(r.kl_mean, 5)
        << std::setw(9) << pct(100 * r.top1_agreement) << std::setw(9) << pct(r.rouge_l, 3)
        << std::setw(9) << pct(100 * r.passkey_accuracy, 0) << std::setw(12)
        << pct(100 * r.sparsity_prefill, 1) << std::setw(13) << pct(r.peak_kv_mib, 2) << std::setw(7)
        << (pt.run.gates.passed ? "pass" : "FAIL") << "  " << (front_sp[i] ? "S" : "")
        << (front_mem[i] ? "M" : "") << "\n";
  }
  out << "front: S = on the sparsity/KL Pareto front, M = on the KV-memory/KL front\n";
  return 0;
}

}  // namespace sinkscope::cli
