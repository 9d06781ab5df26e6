// SPDX-License-Identifier: Apache-2.0
// Start-up of the GPU programs that run the model: a CUDA device and the model file
// ($SINKSCOPE_MODEL, else the set-up script's path), and real text for the checks.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/model/model.h"
#include "engine/util/paths.h"
#include "sample_text.h"

namespace sinkscope::gpu_test {

// The model's path (`chosen` where given, e.g. a program's --model, else default_model_path());
// false, after printing "SKIP: <reason>", without a usable CUDA device or without the model
// file (the programs then exit 0).
inline bool gpu_and_model(std::filesystem::path* path, const std::filesystem::path& chosen = {}) {
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("SKIP: %s\n", why.c_str());
    return false;
  }
  *path = chosen.empty() ? default_model_path() : chosen;
  if (!std::filesystem::exists(*path)) {
    std::printf("SKIP: model not found at %s (set SINKSCOPE_MODEL to a GGUF file)\n",
                path->string().c_str());
    return false;
  }
  return true;
}

// gpu_and_model(), then the model loaded: null with *exit_code 0 after a SKIP line, or 1 after
// "FAIL load model <path>: <why>".
inline std::shared_ptr<const Model> load_gpu_model(int* exit_code,
                                                   const std::filesystem::path& chosen = {}) {
  std::filesystem::path path;
  *exit_code = 0;
  if (!gpu_and_model(&path, chosen)) return nullptr;
  try {
    return Model::load(path);
  } catch (const std::exception& e) {
    std::printf("FAIL load model %s: %s\n", path.string().c_str(), e.what());
    *exit_code = 1;
    return nullptr;
  }
}

// Real text: the first max_bytes of `arg`, else of $SINKSCOPE_TEXT, else of the KJV of
// `setup.sh --eval-data` (files under 4 KB are passed over); else the fixed passage of
// sample_text.h. *from says which.
inline std::string load_eval_text(const std::string& arg, size_t max_bytes, std::string* from) {
  std::vector<std::filesystem::path> tries;
  if (!arg.empty()) tries.emplace_back(arg);
  if (const char* e = std::getenv("SINKSCOPE_TEXT"); e && *e) tries.emplace_back(e);
  tries.push_back(cache_dir() / "eval" / "kjv.txt");
  for (const auto& p : tries) {
    std::ifstream f(p, std::ios::binary);
    if (!f) continue;
    std::string s(max_bytes, '\0');
    f.read(s.data(), std::streamsize(s.size()));
    s.resize(size_t(f.gcount()));
    if (s.size() < 4096) continue;
    *from = p.string();
    return s;
  }
  *from = "tests/gpu/sample_text.h (repeated; no real-text file found)";
  return kText;
}

// Teacher-forced logits of a prefill of ids[0, n_prefill) (its last row), then of `steps` decode
// steps feeding ids[n_prefill + t], one after another: (1 + steps) rows of the vocabulary.
inline std::vector<float> prefill_then_decode(Backend& be, const std::vector<TokenId>& ids,
                                              int n_prefill, int steps) {
  std::vector<float> all, l;
  be.forward(std::span(ids.data(), size_t(n_prefill)), LogitsMode::kLast, l);
  all.insert(all.end(), l.begin(), l.end());
  for (int t = 0; t < steps; ++t) {
    be.forward(std::span(ids.data() + n_prefill + t, 1), LogitsMode::kLast, l);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

}  // namespace sinkscope::gpu_test
