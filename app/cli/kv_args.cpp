// SPDX-License-Identifier: Apache-2.0
#include "app/cli/kv_args.h"

#include "app/cli/attention_options.h"

#include <sstream>

namespace sinkscope::cli {

namespace {

const char* const kModelHelp =
    "GGUF file or Hugging Face checkpoint directory (default: $SINKSCOPE_MODEL, else the "
    "cached default model)";
const char* const kExit = "Exit status: 0 success, 1 runtime error, 2 usage error.\n";

void add_cache_options(ArgParser& p) {
  p.option("--window", "W", "sliding window: keep the W most recent tokens")
      .option("--sinks", "S", "with --window: never evict the first S tokens (default 0)")
      .option("--position-mode", "MODE",
              "cache (default: StreamingLLM, positions inside the cache) | original")
      .option("--kv", "TYPE", "quantize the KV cache: int8 | int4 (default: float32)")
      .option("--group-size", "N", "elements per fp16 scale with --kv (default 32)")
      .flag("--protect-sinks", "with --kv: keep the S sink tokens unquantized");
}

// Reads the cache options; `window_required` for stream-ppl (unless --dense).
std::optional<CacheSettings> parse_cache_options(const ArgParser& p, bool window_required) {
  CacheSettings s;
  const bool has_window = p.has("--window");
  if (!has_window) {
    if (window_required) throw UsageError("--window is required (or --dense)");
    for (const char* o : {"--sinks", "--position-mode"})
      if (p.has(o)) throw UsageError(std::string(o) + " needs --window");
  } else {
    s.strategy = CacheStrategy::kSlidingWindow;
    s.window_size = p.get_int("--window", 0, 1, 1 << 24);
    s.sink_keep_count = p.get_int("--sinks", 0, 0, 1024);
    if (auto m = p.get("--position-mode")) {
      if (*m == "cache") {
        s.position_mode = PositionMode::kCache;
      } else if (*m == "original") {
        s.position_mode = PositionMode::kOriginal;
      } else {
        throw UsageError("--position-mode: expected cache or original, got '" + *m + "'");
      }
    }
  }
  if (auto k = p.get("--kv")) {
    s.quantization.enabled = true;
    if (*k == "int8") {
      s.quantization.kv_dtype = KvQuantDtype::kInt8;
    } else if (*k == "int4") {
      s.quantization.kv_dtype = KvQuantDtype::kInt4;
    } else {
      throw UsageError("--kv: expected int8 or int4, got '" + *k + "'");
    }
    s.quantization.group_size = int(p.get_int("--group-size", 32, 2, 1024));
    s.quantization.protect_sink_positions = p.has("--protect-sinks");
  } else if (p.has("--group-size") || p.has("--protect-sinks")) {
    throw UsageError("--group-size/--protect-sinks need --kv int8|int4");
  }
  if (!has_window && !s.quantization.enabled) return std::nullopt;
  return s;
}


}  // namespace

SinksArgs parse_sinks_args(std::span<const std::string> args) {
  ArgParser p("sinkscope-cli sinks (--file FILE | --prompt TEXT) [options]",
              "Finds attention sinks: alpha_k = mean attention probability on key k over the\n"
              "queries after it, per (layer, head); k is a sink of a head when alpha_k > epsilon.\n"
              "Prints the share of heads per position and the recommended sink_keep_count.");
  p.option("--model", "PATH", kModelHelp)
      .option("--file", "FILE", "UTF-8 text to run")
      .option("--prompt", "TEXT", "text to run")
      .option("--tokens", "N", "tokens of the input to run (default 512)")
      .option("--positions", "N", "key positions examined (default 32, at most 1024)")
      .option("--epsilon", "E", "alpha threshold (default 0.3)")
      .option("--threads", "N", "CPU threads, 0 = all (default)")
      .flag("--json", "print one JSON object")
      .epilog(std::string("Example:\n  sinkscope-cli sinks --file book.txt --tokens 1024\n\n") + kExit);
  p.parse(args);
  SinksArgs a;
  a.help = p.help_requested();
  a.help_text = p.help();
  if (a.help) return a;
  a.model = p.get("--model");
  a.file = p.get("--file");
  a.prompt = p.get("--prompt");
  if (a.file.has_value() == a.prompt.has_value())
    throw UsageError("give exactly one of --file and --prompt");
  if (a.prompt && a.prompt->empty()) throw UsageError("--prompt: the prompt is empty");
  a.tokens = int(p.get_int("--tokens", a.tokens, 2, 1 << 20));
  a.positions = int(p.get_int("--positions", a.positions, 1, 1024));
  a.epsilon = p.get_double("--epsilon", a.epsilon, 0.0, 1.0, true);
  a.threads = int(p.get_int("--threads", 0, 0, 1024));
  a.json = p.has("--json");
  return a;
}

StreamPplArgs parse_stream_ppl_args(std::span<const std::string> args) {
  ArgParser p("sinkscope-cli stream-ppl --file FILE (--window W [--sinks S] | --dense) [options]",
              "Streams a long text through the KV cache and reports perplexity over the stream\n"
              "and per segment. Each token sees the S sinks and its W most recent tokens, so\n"
              "--chunk changes speed, not results. --recompute scores tokens from a fresh\n"
              "forward over their last W tokens instead (the reference; --stride to thin it).");
  p.option("--model", "PATH", kModelHelp).option("--file", "FILE", "UTF-8 text to stream");
  add_cache_options(p);
  add_backend_option(p);
  p.flag("--dense", "full cache (no eviction; degrades past the trained context)")
      .flag("--recompute", "sliding window with re-computation over --window tokens")
      .flag("--vs-unquantized", "with --kv: stream the same policy with unquantized KV in lock "
                                "step and report KL, top-1 and the perplexity change against it")
      .option("--stride", "K", "score every K-th token (default 1); the same tokens in every mode, "
                               "so a thinned --recompute reference compares 1:1 with a stream run")
      .option("--chunk", "N", "tokens per forward (default 64; 1 = token by token)")
      .option("--segment", "N", "tokens per reported segment (default 1000)")
      .option("--max-tokens", "N", "stream at most N tokens of the file")
      .option("--csv", "FILE", "write per-segment perplexity as CSV")
      .option("--threads", "N", "CPU threads, 0 = all (default)")
      .flag("--json", "print one JSON object")
      .epilog(std::string("Examples:\n"
                          "  sinkscope-cli stream-ppl --file book.txt --window 256 --sinks 4\n"
                          "  sinkscope-cli stream-ppl --file book.txt --window 256 --recompute "
                          "--stride 16\n\nProgress with the time remaining goes to stderr.\n") +
              kExit);
  p.parse(args);
  StreamPplArgs a;
  a.help = p.help_requested();
  a.help_text = p.help();
  if (a.help) return a;
  a.model = p.get("--model");
  const auto file = p.get("--file");
  if (!file || file->empty()) throw UsageError("--file is required");
  a.file = *file;
  a.dense = p.has("--dense");
  a.recompute = p.has("--recompute");
  if (a.dense && a.recompute) throw UsageError("give --dense or --recompute, not both");
  if (a.dense && (p.has("--window") || p.has("--sinks")))
    throw UsageError("--dense keeps every token; it takes no --window/--sinks");
  if (a.recompute && !p.has("--window")) throw UsageError("--recompute needs --window");
  if (a.recompute && (p.has("--kv") || p.has("--sinks")))
    throw UsageError("--recompute runs a full float cache over each window; no --kv/--sinks");
  auto cache = parse_cache_options(p, !a.dense);
  if (cache) a.cache = *cache;
  a.stride = int(p.get_int("--stride", 1, 1, 1 << 20));
  a.backend = parse_backend_choice(p);
  a.vs_unquantized = p.has("--vs-unquantized");
  if (a.vs_unquantized && (!p.has("--kv") || a.recompute))
    throw UsageError("--vs-unquantized compares a --kv int8|int4 stream (not --recompute) with "
                     "unquantized KV; give --kv");
  a.chunk = int(p.get_int("--chunk", a.chunk, 1, 1 << 16));
  a.segment = int(p.get_int("--segment", a.segment, 1, 1 << 30));
  a.max_tokens = p.get_int("--max-tokens", 0, 2, int64_t(1) << 30);
  a.csv = p.get("--csv");
  a.threads = int(p.get_int("--threads", 0, 0, 1024));
  a.json = p.has("--json");
  return a;
}

PasskeyArgs parse_passkey_args(std::span<const std::string> args) {
  ArgParser p("sinkscope-cli passkey [--lengths N,...] [--depths D,...] [options]",
              "Passkey retrieval: a 5-digit key hidden at each depth of filler text of each\n"
              "length; the greedy answer must repeat it. Accuracy per length and depth.");
  p.option("--model", "PATH", kModelHelp)
      .option("--lengths", "N,...", "prompt lengths in tokens (default 1024,2048)")
      .option("--depths", "D,...", "needle depths in [0, 1] (default 0,0.25,0.5,0.75,1)");
  add_cache_options(p);
  add_backend_option(p);
  add_attention_options(p);
  p.option("--trials", "N", "tasks per (length, depth), different keys (default 1)")
      .option("--seed", "S", "first task seed (default 1)")
      .option("--threads", "N", "CPU threads, 0 = all (default)")
      .flag("--json", "print one JSON object")
      .epilog(std::string("Example:\n  sinkscope-cli passkey --lengths 1024 --window 256 --sinks 4\n\n") +
              kExit);
  p.parse(args);
  PasskeyArgs a;
  a.help = p.help_requested();
  a.help_text = p.help();
  if (a.help) return a;
  a.model = p.get("--model");
  if (auto l = p.get("--lengths")) a.lengths = parse_list<int>("--lengths", *l, 64, 1 << 20);
  if (auto d = p.get("--depths")) a.depths = parse_list<double>("--depths", *d, 0.0, 1.0);
  a.cache = parse_cache_options(p, false);
  a.attention = parse_attention_options(p);
  a.trials = int(p.get_int("--trials", 1, 1, 1000));
  a.seed = p.get_uint64("--seed", 1);
  a.threads = int(p.get_int("--threads", 0, 0, 1024));
  a.json = p.has("--json");
  a.backend = parse_backend_choice(p);
  return a;
}

}  // namespace sinkscope::cli
