// SPDX-License-Identifier: Apache-2.0
#include <iomanip>
#include <iostream>

#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "app/cli/kv_args.h"
#include "engine/util/json_io.h"
#include "engine/eval/passkey.h"

namespace sinkscope::cli {

int run_passkey(const PasskeyArgs& a, std::ostream& out, std::ostream& err) {
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  const auto model = load_model(resolve_model_path(a.model), a.json ? nullptr : &err);
  BackendOptions bo;
  bo.n_threads = a.threads;
  int longest = 0;
  for (int l : a.lengths) longest = std::max(longest, l);
  bo.max_context = std::max(longest + 64, model->config().n_ctx_train);
  if (a.cache) bo.cache = *a.cache;
  bo.attention = a.attention;
  std::string backend_note;
  auto backend = open_backend(model, bo, a.backend, &backend_note);
  const std::string what = a.cache ? describe(*a.cache) : "full cache";
  err << "sinkscope-cli: passkey retrieval (" << what << ", " << backend->name() << ")\n";
  if (!backend_note.empty()) err << "sinkscope-cli: " << backend_note << "\n";

  struct Cell {
    int length;
    double depth;
    int correct = 0, total = 0;
    std::vector<std::string> answers;
  };
  std::vector<Cell> cells;
  int correct = 0, total = 0;
  const Stopwatch sw;
  const int n_tasks = int(a.lengths.size() * a.depths.size()) * a.trials;
  for (int len : a.lengths)
    for (double depth : a.depths) {
      Cell c{len, depth, 0, 0, {}};
      for (int t = 0; t < a.trials; ++t) {
        const PasskeyTask task = make_passkey_task(model->tokenizer(), len, depth, a.seed + uint64_t(t));
        const PasskeyOutcome o = run_passkey(*backend, task);
        c.correct += o.correct ? 1 : 0;
        ++c.total;
        c.answers.push_back(o.digits);
        ++total;
        correct += o.correct ? 1 : 0;
        err << "passkey: " << total << "/" << n_tasks << " (length " << len << ", depth " << depth
            << "): " << (o.correct ? "ok" : "wrong '" + o.digits + "' vs " + task.passkey)
            << ", about " << format_duration(sw.seconds() / total * (n_tasks - total)) << " left\n";
      }
      cells.push_back(c);
    }
  const double acc = total ? double(correct) / total : 0.0;
  if (a.json) {
    Json j;
    j["model"] = model->path().string();
    j["settings"] = what;
    j["accuracy"] = acc;
    j["tasks"] = total;
    Json& cells_json = j["cells"] = Json::array();
    for (const auto& c : cells) {
      Json cell;
      cell["length"] = c.length;
      cell["depth"] = c.depth;
      cell["correct"] = c.correct;
      cell["total"] = c.total;
      cell["answers"] = c.answers;
      cells_json.push_back(std::move(cell));
    }
    out << dump_json(j) << "\n";
    return 0;
  }
  out << "length    depth   accuracy\n";
  for (const auto& c : cells)
    out << std::setw(6) << c.length << std::setw(9) << std::fixed << std::setprecision(2) << c.depth
        << std::setw(8) << c.correct << "/" << c.total << "\n";
  out << "accuracy: " << std::setprecision(3) << acc << " (" << correct << "/" << total << ")\n";
  return 0;
}

}  // namespace sinkscope::cli
