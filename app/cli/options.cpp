// SPDX-License-Identifier: Apache-2.0
#include "app/cli/options.h"

#include "app/cli/args.h"
#include "app/cli/common.h"
#include "app/cli/attention_options.h"

namespace sinkscope::cli {

namespace {

const char* const kModelHelp =
    "GGUF file or Hugging Face checkpoint directory (default: $SINKSCOPE_MODEL, else the "
    "cached default model)";

std::string exit_status_note() {
  return "Exit status: 0 success, 1 runtime error, 2 usage error.\n";
}

}  // namespace

GenerateArgs parse_generate_args(std::span<const std::string> args) {
  ArgParser p("sinkscope-cli generate (--prompt TEXT | --prompt-file FILE) [options]",
              "Generates text from a prompt; tokens stream to stdout as they are produced.");
  p.option("--model", "PATH", kModelHelp)
      .option("--prompt", "TEXT", "the prompt text")
      .option("--prompt-file", "FILE", "read the prompt from a file (trailing whitespace dropped)")
      .option("--max-tokens", "N", "tokens to generate at most (default 128)")
      .flag("--chat", "wrap the prompt in the model's chat template (user turn)")
      .option("--system", "TEXT", "system message for --chat")
      .option("--seed", "S", "sampler seed (default 0)")
      .option("--temperature", "T", "0 = greedy (default), up to 100")
      .option("--top-k", "K", "keep the K most likely tokens, 0 = off (default)")
      .option("--top-p", "P", "nucleus sampling mass in (0, 1], 1 = off (default)")
      .option("--threads", "N", "CPU threads, 0 = all (default)")
      .option("--ctx", "N", "context capacity in tokens, 0 = the model's trained context")
      .flag("--json", "print one JSON object with tokens, text and timings instead of streaming")
      .flag("--hash", "with --json: include the model file's sha256 (reads the whole file)");
  add_attention_options(p);
  add_backend_option(p);
  p.epilog(
          "Examples:\n"
          "  sinkscope-cli generate --prompt \"The capital of France is\" --max-tokens 16\n"
          "  sinkscope-cli generate --chat --system \"Be brief.\" --prompt \"What is a sink "
          "token?\"\n"
          "  sinkscope-cli generate --prompt-file prompt.txt --temperature 0.7 --top-p 0.9 "
          "--json\n\n" +
          exit_status_note());
  p.parse(args);
  GenerateArgs a;
  a.help = p.help_requested();
  a.help_text = p.help();
  if (a.help) return a;

  a.model = p.get("--model");
  a.prompt = p.get("--prompt");
  a.prompt_file = p.get("--prompt-file");
  check_prompt_options(a.prompt, a.prompt_file);
  a.max_tokens = static_cast<int>(p.get_int("--max-tokens", a.max_tokens, 1, kMaxTokensLimit));
  a.chat = p.has("--chat");
  a.system = p.get("--system");
  if (a.system && !a.chat) throw UsageError("--system needs --chat");
  a.seed = p.get_uint64("--seed", a.seed);
  a.temperature = static_cast<float>(p.get_double("--temperature", a.temperature, 0.0, 100.0));
  a.top_k = static_cast<int>(p.get_int("--top-k", a.top_k, 0, 1 << 24));
  a.top_p = static_cast<float>(p.get_double("--top-p", a.top_p, 0.0, 1.0, /*min_exclusive=*/true));
  a.threads = static_cast<int>(p.get_int("--threads", a.threads, 0, kMaxThreads));
  a.ctx = static_cast<int>(p.get_int("--ctx", a.ctx, 0, kMaxContextLimit));
  a.json = p.has("--json");
  a.hash = p.has("--hash");
  if (a.hash && !a.json) throw UsageError("--hash needs --json");
  a.attention = parse_attention_options(p);
  a.backend = parse_backend_choice(p);
  return a;
}

PerplexityArgs parse_perplexity_args(std::span<const std::string> args) {
  ArgParser p("sinkscope-cli perplexity --file FILE [options]",
              "Scores a text file: perplexity over chunks of --ctx tokens, each on a fresh cache;\n"
              "the second half of every chunk is scored (the first half is context).");
  p.option("--model", "PATH", kModelHelp)
      .option("--file", "FILE", "UTF-8 text to score")
      .option("--ctx", "N", "chunk length in tokens (default 512)")
      .option("--threads", "N", "CPU threads, 0 = all (default)")
      .flag("--json", "print one JSON object instead of text");
  add_attention_options(p);
  add_backend_option(p);
  p.epilog(
          "Progress with the time remaining goes to stderr.\n\n"
          "Example:\n  sinkscope-cli perplexity --file notes.txt --ctx 256\n\n" +
          exit_status_note());
  p.parse(args);
  PerplexityArgs a;
  a.help = p.help_requested();
  a.help_text = p.help();
  if (a.help) return a;
  a.model = p.get("--model");
  const auto file = p.get("--file");
  if (!file) throw UsageError("--file is required");
  if (file->empty()) throw UsageError("--file: empty file name");
  a.file = *file;
  a.ctx = static_cast<int>(p.get_int("--ctx", a.ctx, 4, kMaxContextLimit));
  a.threads = static_cast<int>(p.get_int("--threads", a.threads, 0, kMaxThreads));
  a.json = p.has("--json");
  a.attention = parse_attention_options(p);
  a.backend = parse_backend_choice(p);
  return a;
}

InfoArgs parse_info_args(std::span<const std::string> args) {
  ArgParser p("sinkscope-cli info [--model PATH] [--json]",
              "Prints the model's configuration, tensor counts by type and tokenizer.");
  p.option("--model", "PATH", kModelHelp)
      .flag("--json", "print one JSON object instead of text")
      .epilog(exit_status_note());
  p.parse(args);
  InfoArgs a;
  a.help = p.help_requested();
  a.help_text = p.help();
  if (a.help) return a;
  a.model = p.get("--model");
  a.json = p.has("--json");
  return a;
}

}  // namespace sinkscope::cli
