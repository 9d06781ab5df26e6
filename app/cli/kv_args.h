// SPDX-License-Identifier: Apache-2.0
// Arguments of the KV-cache commands: sinks (sink detection), stream-ppl (streaming perplexity
// through a bounded cache) and passkey (retrieval accuracy), and the cache options they share.
#pragma once

#include "app/cli/attention_options.h"

#include "engine/backend/attention.h"

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "engine/backend/backend_factory.h"
#include "engine/cache/cache_settings.h"

namespace sinkscope::cli {

struct SinksArgs {
  bool help = false;
  std::string help_text;
  std::optional<std::string> model;
  std::optional<std::string> file, prompt;  // exactly one
  int tokens = 512;     // tokens of the input to run
  int positions = 32;   // key positions examined
  double epsilon = 0.3;
  int threads = 0;
  bool json = false;
};

struct StreamPplArgs {
  bool help = false;
  std::string help_text;
  std::optional<std::string> model;
  std::string file;
  CacheSettings cache;       // window / sinks / kv / position mode
  bool dense = false;        // full cache instead of the window
  bool recompute = false;    // sliding window with re-computation (reference)
  int stride = 1;            // score every k-th token (recompute's cost / k; stream/dense
                             // score the same tokens so that runs compare 1:1)
  BackendChoice backend;  // --backend, --gpu-weights, --sparse-decode
  bool vs_unquantized = false;  // --kv: also stream unquantized KV and compare (KL, top-1, ppl)
  int chunk = 64;
  int segment = 1000;
  int64_t max_tokens = 0;
  std::optional<std::string> csv;
  int threads = 0;
  bool json = false;
};

struct PasskeyArgs {
  bool help = false;
  std::string help_text;
  std::optional<std::string> model;
  std::vector<int> lengths{1024, 2048};
  std::vector<double> depths{0, 0.25, 0.5, 0.75, 1};
  std::optional<CacheSettings> cache;  // none: full cache
  AttentionSettings attention;
  int trials = 1;
  uint64_t seed = 1;
  int threads = 0;
  bool json = false;
  BackendChoice backend;  // --backend, --gpu-weights, --sparse-decode
};

SinksArgs parse_sinks_args(std::span<const std::string> args);
StreamPplArgs parse_stream_ppl_args(std::span<const std::string> args);
PasskeyArgs parse_passkey_args(std::span<const std::string> args);

}  // namespace sinkscope::cli
