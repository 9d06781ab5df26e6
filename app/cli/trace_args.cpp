// SPDX-License-Identifier: Apache-2.0
#include "app/cli/trace_args.h"

#include "app/cli/args.h"
#include "app/cli/common.h"
#include "app/cli/attention_options.h"
#include "app/cli/options.h"

namespace sinkscope::cli {

TraceArgs parse_trace_args(std::span<const std::string> args) {
  ArgParser p("sinkscope-cli trace (--prompt TEXT | --prompt-file FILE) --out FILE [options]",
              "Runs one generation with the profiler on and writes its timeline as a Chrome\n"
              "trace (open it in ui.perfetto.dev or chrome://tracing). On the CUDA backend the\n"
              "timeline holds CUPTI kernel/memcpy records inside NVTX ranges; on the CPU backend\n"
              "the CPU spans (run, prefill, decode step, layer N, ops).");
  p.option("--model", "PATH",
           "GGUF file or Hugging Face checkpoint directory (default: $SINKSCOPE_MODEL, else the "
    "cached default model)")
      .option("--prompt", "TEXT", "the prompt text")
      .option("--prompt-file", "FILE", "read the prompt from a file (trailing whitespace dropped)")
      .option("--max-tokens", "N", "tokens to generate at most (default 16)")
      .option("--out", "FILE", "the trace to write (JSON; replaced atomically)")
      .flag("--summary", "print per-kernel / per-op and per-layer tables to stdout")
      .option("--threads", "N", "CPU threads, 0 = all (default)")
      .option("--ctx", "N", "context capacity in tokens, 0 = the model's trained context");
  add_backend_option(p);
  p.epilog(
      "Examples:\n"
      "  sinkscope-cli trace --prompt \"The capital of France is\" --out trace.json --summary\n"
      "  sinkscope-cli trace --backend cpu --prompt-file p.txt --max-tokens 32 --out cpu.json\n\n"
      "Exit status: 0 success, 1 runtime error, 2 usage error.\n");
  p.parse(args);
  TraceArgs a;
  a.help = p.help_requested();
  a.help_text = p.help();
  if (a.help) return a;

  a.model = p.get("--model");
  a.prompt = p.get("--prompt");
  a.prompt_file = p.get("--prompt-file");
  check_prompt_options(a.prompt, a.prompt_file);
  const auto out = p.get("--out");
  if (!out) throw UsageError("--out FILE is required (where the trace goes)");
  if (out->empty()) throw UsageError("--out: empty file name");
  a.out = *out;
  a.max_tokens = static_cast<int>(p.get_int("--max-tokens", a.max_tokens, 1, kMaxTokensLimit));
  a.summary = p.has("--summary");
  a.threads = static_cast<int>(p.get_int("--threads", a.threads, 0, kMaxThreads));
  a.ctx = static_cast<int>(p.get_int("--ctx", a.ctx, 0, kMaxContextLimit));
  a.backend = parse_backend_choice(p);
  return a;
}

}  // namespace sinkscope::cli
