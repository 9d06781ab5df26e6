// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli make-test-model: writes a random-weight GGUF in the exact shape of a deployed
// model (engine/format/testmodel.h), for speed, memory and scale runs, here and in llama.cpp.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "engine/format/testmodel.h"
#include "engine/util/thread_pool.h"

namespace sinkscope::cli {

namespace {

namespace fs = std::filesystem;

std::string mb(uint64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << double(bytes) / 1e6 << " MB";
  return s.str();
}

// The output path must name a file in an existing, writable directory: checked before any work
// so a typo costs nothing.
void check_output_path(const std::string& out) {
  if (out.empty()) throw UsageError("--out: empty path");
  const fs::path p(out);
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw UsageError("--out: '" + out + "' is a directory");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw UsageError("--out: directory '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    throw UsageError("--out: directory '" + dir.string() + "' is not writable (" +
                     std::strerror(errno) + ")");
}

}  // namespace

int run_make_test_model(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  ArgParser p("sinkscope-cli make-test-model --shape SHAPE --type TYPE --out FILE [options]",
              "Writes a GGUF with random weights in the exact shape of a deployed model\n"
              "(metadata, tensor names and shapes, quantization mix and vocabulary size as\n"
              "llama.cpp's converter and llama-quantize write them), for speed, memory and scale\n"
              "runs here and in llama.cpp. Its output is noise: not for quality measurements.");
  p.option("--shape", "SHAPE", "model shape: " + test_model_shape_names())
      .option("--type", "TYPE", "file type: " + test_model_type_names() + " (llama.cpp's)")
      .option("--out", "FILE", "GGUF file to write (atomically: temp file + rename)")
      .option("--layers", "N", "number of layers, 1 .. the shape's (default: the shape's)")
      .option("--ctx", "N", "context_length written to the metadata (default: the shape's)")
      .option("--seed", "S", "random seed; the same seed gives the same file (default 0)")
      .option("--threads", "N", "CPU threads, 0 = all (default)")
      .flag("--sink-pattern",
            "add a designed attention sink on the BOS token in every head (the random weights "
            "alone give near-uniform attention, where dynamic-sparse attention skips few "
            "tiles): for sparse-prefill speed runs at a skip share lambda sets; shows where the "
            "tokenizer adds BOS (llama3-8b, mistral-7b)")
      .option("--test-vocab", "N",
              "test option: N tokens, not the shape's vocabulary (for fast tests)");
  p.epilog(
      "Example (a full Llama 3.1 8B Q4_K_M, about 4.9 GB):\n"
      "  sinkscope-cli make-test-model --shape llama3-8b --type q4_k_m --out llama3-8b.gguf\n\n"
      "Progress (tensor i/N, MB written) goes to stderr; the file size, tensor count and time\n"
      "to stdout.\n"
      "Exit status: 0 success, 1 runtime error, 2 usage error.\n");
  p.parse(args);
  if (p.help_requested()) {
    out << p.help();
    return 0;
  }

  const auto shape_name = p.get("--shape");
  if (!shape_name) throw UsageError("--shape is required (" + test_model_shape_names() + ")");
  auto shape = find_test_model_shape(*shape_name);
  if (!shape)
    throw UsageError("--shape: unknown shape '" + *shape_name +
                     "' (valid: " + test_model_shape_names() + ")");
  const auto type_name = p.get("--type");
  if (!type_name) throw UsageError("--type is required (" + test_model_type_names() + ")");
  const auto type = parse_test_model_type(*type_name);
  if (!type)
    throw UsageError("--type: unknown type '" + *type_name +
                     "' (valid: " + test_model_type_names() + ")");
  const auto out_path = p.get("--out");
  if (!out_path) throw UsageError("--out is required");
  check_output_path(*out_path);

  TestModelOptions o;
  o.shape = *shape;
  o.type = *type;
  o.shape.n_layer = int(p.get_int("--layers", shape->n_layer, 1, shape->n_layer));
  o.shape.n_ctx = int(p.get_int("--ctx", shape->n_ctx, 1, int64_t(1) << 30));
  o.shape.n_vocab = int(p.get_int("--test-vocab", shape->n_vocab,
                                  test_model_min_vocab(shape->vocab), shape->n_vocab));
  o.seed = p.get_uint64("--seed", 0);
  o.sink_pattern = p.has("--sink-pattern");
  const int threads = int(p.get_int("--threads", 0, 0, 1024));
  ThreadPool pool(resolved_threads(threads));
  o.pool = &pool;

  err << "make-test-model: " << shape->display_name << " shape, " << test_model_type_name(o.type)
      << ", " << o.shape.n_layer << " layers, vocabulary " << o.shape.n_vocab << ", "
      << pool.size() << " threads -> " << *out_path << "\n";
  Throttle throttle(stderr_is_tty() ? 0.5 : 5.0);
  o.progress = [&](const TestModelProgress& pr) {
    const bool last = pr.tensor == pr.n_tensors && pr.tensor_done;
    if (!throttle.ready(last)) return;
    err << "make-test-model: tensor " << pr.tensor << "/" << pr.n_tensors << " (" << pr.name
        << "), " << mb(pr.bytes_written) << " of " << mb(pr.total_bytes) << " written\n";
  };
  const TestModelResult r = write_test_model(o, *out_path);
  out << "wrote " << *out_path << ": " << mb(r.file_size) << " (" << std::fixed
      << std::setprecision(2) << double(r.file_size) / double(1ull << 30) << " GiB), "
      << r.n_tensors << " tensors, " << std::setprecision(1) << double(r.n_params) / 1e6
      << " M parameters, " << format_duration(r.seconds) << "\n";
  return 0;
}

}  // namespace sinkscope::cli
