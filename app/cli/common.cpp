// SPDX-License-Identifier: Apache-2.0
#include "app/cli/common.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <system_error>
#include <thread>

#include "app/cli/args.h"
#include "engine/util/paths.h"

namespace sinkscope::cli {

namespace fs = std::filesystem;

fs::path resolve_model_path(const std::optional<std::string>& given) {
  if (given) {
    if (given->empty()) throw UsageError("--model: empty file name");
    std::error_code ec;
    if (!fs::exists(*given, ec)) throw UsageError("--model: file not found: " + *given);
    // A Hugging Face checkpoint is given by its directory (or its config.json).
    if (fs::is_directory(*given, ec)) {
      if (!fs::is_regular_file(fs::path(*given) / "config.json", ec))
        throw UsageError("--model: directory " + *given +
                         " has no config.json (not a Hugging Face checkpoint)");
      return fs::path(*given);
    }
    if (!fs::is_regular_file(*given, ec))
      throw UsageError("--model: not a regular file or directory: " + *given);
    return fs::path(*given);
  }
  const fs::path p = default_model_path();
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    const bool from_env = std::getenv("SINKSCOPE_MODEL") && *std::getenv("SINKSCOPE_MODEL");
    throw std::runtime_error("default model not found at " + p.string() +
                             (from_env ? " (from $SINKSCOPE_MODEL)" : "") +
                             "; run 'bash scripts/setup.sh' to fetch it, or pass --model FILE");
  }
  return p;
}

std::string read_text_file(const std::string& path, std::string_view option) {
  std::error_code ec;
  const std::string opt(option);
  if (!fs::exists(path, ec)) throw UsageError(opt + ": file not found: " + path);
  if (!fs::is_regular_file(path, ec)) throw UsageError(opt + ": not a regular file: " + path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(opt + ": cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error(opt + ": read error on " + path);
  return ss.str();
}

void check_prompt_options(const std::optional<std::string>& prompt,
                          const std::optional<std::string>& prompt_file) {
  if (prompt && prompt_file) throw UsageError("give either --prompt or --prompt-file, not both");
  if (!prompt && !prompt_file) throw UsageError("a prompt is required (--prompt or --prompt-file)");
  if (prompt && prompt->empty()) throw UsageError("--prompt: the prompt is empty");
  if (prompt_file && prompt_file->empty()) throw UsageError("--prompt-file: empty file name");
}

std::string prompt_text(const std::optional<std::string>& prompt,
                        const std::optional<std::string>& prompt_file) {
  if (prompt) return *prompt;
  std::string text = read_text_file(*prompt_file, "--prompt-file");
  while (!text.empty() &&
         (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.pop_back();
  if (text.empty()) throw UsageError("--prompt-file: the prompt is empty (" + *prompt_file + ")");
  return text;
}

std::shared_ptr<const Model> load_model(const fs::path& path, std::ostream* log) {
  Stopwatch sw;
  auto model = Model::load(path);
  if (log) {
    const ModelConfig& c = model->config();
    *log << "sinkscope-cli: loaded " << path.filename().string() << " ("
         << (c.name.empty() ? c.architecture : c.name) << ", " << c.n_layer << " layers, "
         << model_format_name(model->format()) << ") in "
         << format_duration(sw.seconds()) << "\n";
  }
  return model;
}

int resolved_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

std::string threads_text(int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); }

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::kNone:
      return "none";
    case ChatFormat::kChatML:
      return "chatml";
    case ChatFormat::kLlama3:
      return "llama3";
  }
  return "?";
}

std::string chat_fallback_note(const Tokenizer& tok) {
  if (tok.chat_format() != ChatFormat::kNone) return {};
  return tok.chat_template().empty()
             ? "the model has no chat template; the messages go as plain \"role: text\" lines"
             : "the model's chat template is not ChatML or Llama 3, the formats SinkScope "
               "renders; the messages go as plain \"role: text\" lines";
}

BackendOptions make_backend_options(const ModelConfig& config, int threads, int ctx) {
  if (ctx > 0 && config.n_ctx_train > 0 && ctx > config.n_ctx_train)
    throw UsageError("--ctx " + std::to_string(ctx) + " is beyond the model's trained context (" +
                     std::to_string(config.n_ctx_train) + " tokens)");
  BackendOptions o;
  o.n_threads = threads;
  o.max_context = ctx;
  return o;
}

std::string fingerprint(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << h;
  return os.str();
}

std::string format_duration(double s) {
  std::ostringstream os;
  if (s < 0) s = 0;
  if (s < 1.0) {
    os << static_cast<int>(s * 1000.0 + 0.5) << " ms";
  } else if (s < 60.0) {
    os << std::fixed << std::setprecision(1) << s << " s";
  } else if (s < 3600.0) {
    const int t = static_cast<int>(s + 0.5);
    os << t / 60 << " min " << std::setw(2) << std::setfill('0') << t % 60 << " s";
  } else {
    const int t = static_cast<int>(s / 60.0 + 0.5);
    os << t / 60 << " h " << std::setw(2) << std::setfill('0') << t % 60 << " min";
  }
  return os.str();
}

bool Throttle::ready(bool final_report) {
  const double now = m_clock.seconds();
  if (!final_report && now - m_last < m_interval) return false;
  m_last = now;
  return true;
}

bool stderr_is_tty() {
  return isatty(fileno(stderr)) != 0;
}

}  // namespace sinkscope::cli
