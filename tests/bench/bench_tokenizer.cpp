// SPDX-License-Identifier: Apache-2.0
// Tokenizer throughput on the default model's vocabulary (SmolLM2 byte-level BPE).
// Usage: bench_tokenizer [model.gguf] [target_tokens]
// The model defaults to $SINKSCOPE_MODEL. Prints encode (cold and warm word cache) and decode
// rates; a program, not a test, so it asserts nothing about time.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "engine/format/gguf.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

// Mixed material so every pre-tokenizer branch runs: prose, code, numbers, CJK, emoji, spaces.
const char* const kParagraphs[] = {
    "The quick brown fox jumps over the lazy dog while it's raining; they're sure we'll win. ",
    "def attention(q, k, v):\n    scores = q @ k.T / math.sqrt(d)\n    return softmax(scores) @ "
    "v\n\n",
    "Numbers like 3.14159, 1,000,000 and 2024-11-05 appear often in real documents.\n",
    "多语言文本：你好，世界！Привет, мир! Café naïve résumé. "
    "😀👍🏽 ",
    "    indented   with  irregular\tspacing\t\tand tabs\n\n",
    "<html><body class=\"main\"><p>Hello &amp; goodbye</p></body></html>\n",
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sinkscope;
  const char* env = std::getenv("SINKSCOPE_MODEL");
  const std::string path = argc > 1 ? argv[1] : (env ? env : "");
  const size_t target = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 100000;
  if (path.empty()) {
    std::fprintf(stderr,
                 "usage: bench_tokenizer MODEL.gguf [target_tokens] (or set SINKSCOPE_MODEL)\n");
    return 2;
  }
  try {
    auto file = GgufFile::open(path);
    auto t0 = std::chrono::steady_clock::now();
    auto tok = Tokenizer::from_gguf(*file);
    const double load_s = seconds_since(t0);

    // Build text until it holds about `target` tokens (estimated at ~4 bytes per token), with
    // random numbers and word order so the word cache does not see only repeats.
    std::mt19937 rng(7);
    std::string text;
    while (text.size() < target * 4) {
      text += kParagraphs[rng() % std::size(kParagraphs)];
      text += "item " + std::to_string(rng() % 100000) + ": ";
    }

    t0 = std::chrono::steady_clock::now();
    const auto ids = tok->encode(text, true);
    const double cold_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const auto ids2 = tok->encode(text, true);
    const double warm_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const std::string back = tok->decode(ids);
    const double dec_s = seconds_since(t0);

    std::printf("model          %s (%s, vocab %d)\n", path.c_str(), tok->model_name().c_str(),
                tok->vocab_size());
    std::printf("load           %.1f ms\n", load_s * 1e3);
    std::printf("text           %zu bytes -> %zu tokens\n", text.size(), ids.size());
    std::printf("encode (cold)  %.1f ms  %.0f tokens/s  %.1f MB/s\n", cold_s * 1e3,
                ids.size() / cold_s, text.size() / cold_s / 1e6);
    std::printf("encode (warm)  %.1f ms  %.0f tokens/s\n", warm_s * 1e3, ids2.size() / warm_s);
    std::printf("decode         %.1f ms  %.0f tokens/s\n", dec_s * 1e3, ids.size() / dec_s);
    std::printf("round trip     %s\n", back == text && ids == ids2 ? "ok" : "MISMATCH");

    // Worst case for the word cache: random letter strings, almost every word new.
    std::string words;
    while (words.size() < target * 4) {
      words += ' ';
      for (unsigned n = 3 + rng() % 9; n > 0; --n) words += static_cast<char>('a' + rng() % 26);
    }
    t0 = std::chrono::steady_clock::now();
    const auto wid = tok->encode(words);
    const double words_s = seconds_since(t0);
    std::printf("encode (unique words) %zu tokens  %.1f ms  %.0f tokens/s\n", wid.size(),
                words_s * 1e3, wid.size() / words_s);
    return back == text ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
}
