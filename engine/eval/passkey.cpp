// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/passkey.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/model/session.h"

namespace sinkscope {
namespace {

// Our own filler: plain, repetitive sentences that carry no information.
const char* const kFiller =
    " The moss is soft. The stones are grey. The wind comes and goes. Round and round, on and on.";
const char* const kIntro =
    "A pass key is hidden somewhere in the long text below. Find it and keep it in mind, "
    "because you will be asked for it at the end.\n";
const char* const kQuestion = "\nWhat is the pass key? The pass key is";

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int count_tokens(const Tokenizer& tok, const std::string& s) {
  return int(tok.encode(s, false, false).size());
}

}  // namespace

PasskeyTask make_passkey_task(const Tokenizer& tok, int target_tokens, double depth,
                              uint64_t seed) {
  if (!(depth >= 0.0 && depth <= 1.0))
    throw std::invalid_argument("passkey depth must be in [0, 1], got " + std::to_string(depth));
  PasskeyTask t;
  t.seed = seed;
  t.depth = depth;
  t.target_tokens = target_tokens;
  uint64_t s = seed * 0x2545F4914F6CDD1DULL + 1;
  t.passkey = std::to_string(10000 + splitmix(s) % 90000);
  const std::string needle = " The pass key is " + t.passkey + ". Remember it. " + t.passkey +
                             " is the pass key.";
  const int frame = count_tokens(tok, kIntro) + count_tokens(tok, needle) +
                    count_tokens(tok, kQuestion) + 2;
  const int unit = count_tokens(tok, kFiller);
  const int units = (target_tokens - frame) / std::max(1, unit);
  if (units < 1)
    throw std::invalid_argument("passkey: " + std::to_string(target_tokens) +
                                " tokens cannot hold the question frame (" +
                                std::to_string(frame + unit) + " at least)");
  const int before = int(std::lround(depth * units));
  std::string head = kIntro;
  for (int i = 0; i < before; ++i) head += kFiller;
  std::string text = head + needle;
  for (int i = before; i < units; ++i) text += kFiller;
  text += kQuestion;
  t.prompt = text;
  t.tokens = tok.encode(text);
  t.needle_token = int(tok.encode(head).size());
  return t;
}

std::string first_digits(const std::string& text) {
  std::string d;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      d += c;
    } else if (!d.empty()) {
      break;
    }
  }
  return d;
}

bool passkey_correct(const std::string& answer, const std::string& passkey) {
  return !passkey.empty() && first_digits(answer) == passkey;
}

PasskeyOutcome run_passkey(Backend& backend, const PasskeyTask& task, int max_new_tokens) {
  GenerateOptions o;
  o.max_tokens = max_new_tokens;
  o.stop_at_eog = true;
  const GenerateResult g = generate(backend, task.tokens, o);
  PasskeyOutcome r;
  r.answer = g.text;
  r.digits = first_digits(g.text);
  r.correct = passkey_correct(g.text, task.passkey);
  r.prompt_tokens = int(task.tokens.size());
  return r;
}

}  // namespace sinkscope
