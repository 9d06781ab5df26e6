// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the subcommands: finding the model, reading inputs, timing, throttled
// progress. Errors the caller can fix on the command line are UsageError; the rest are
// std::runtime_error.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/backend/backend.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"

namespace sinkscope::cli {

// --model when given (must exist: UsageError otherwise), else the default model path (missing:
// runtime error that says to run scripts/setup.sh).
std::filesystem::path resolve_model_path(const std::optional<std::string>& given);

// Reads a whole file named by an option; UsageError when it is missing or not a regular file.
std::string read_text_file(const std::string& path, std::string_view option);

// --prompt TEXT / --prompt-file FILE: exactly one, not empty (UsageError otherwise).
void check_prompt_options(const std::optional<std::string>& prompt,
                          const std::optional<std::string>& prompt_file);
// The prompt: --prompt as given, or the file's text without its trailing whitespace (editors
// end files with a newline; it is not part of the prompt).
std::string prompt_text(const std::optional<std::string>& prompt,
                        const std::optional<std::string>& prompt_file);

// Loads a model; prints a one-line summary to `log` unless it is null.
std::shared_ptr<const Model> load_model(const std::filesystem::path& path, std::ostream* log);

// Backend options with --threads / --ctx checked against the model (UsageError when --ctx is
// beyond the trained context).
BackendOptions make_backend_options(const ModelConfig& config, int threads, int ctx);
int resolved_threads(int requested);
// "1 thread", "8 threads".
std::string threads_text(int n);

// "none", "chatml", "llama3" (info, generate --json).
const char* chat_format_name(ChatFormat f);
// What --chat does with a model whose chat format is none: empty for a rendered format, else a
// sentence saying that the messages go as plain "role: text" lines, and whether the file has a
// template of its own (one SinkScope does not render) or none.
std::string chat_fallback_note(const Tokenizer& tok);

// Non-cryptographic 64-bit hash (FNV-1a) as 16 hex digits: lets logs tell prompts apart
// without containing them.
std::string fingerprint(std::string_view text);

// "850 ms", "12.3 s", "4 min 05 s", "1 h 02 min".
std::string format_duration(double seconds);

class Stopwatch {
 public:
  Stopwatch() : m_start(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  }

 private:
  std::chrono::steady_clock::time_point m_start;
};

// True at most once per interval (and always for the final report), so progress does not spam.
class Throttle {
 public:
  explicit Throttle(double interval_s) : m_interval(interval_s) {}
  bool ready(bool final_report);

 private:
  double m_interval;
  double m_last = -1e300;
  Stopwatch m_clock;
};

// Whether stderr is a terminal (progress then redraws one line).
bool stderr_is_tty();

}  // namespace sinkscope::cli
