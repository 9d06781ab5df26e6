// SPDX-License-Identifier: Apache-2.0
// Hugging Face checkpoints: a directory with config.json, the weights as safetensors (one
// model.safetensors, or shards listed by model.safetensors.index.json; F32 / F16 / BF16) and
// tokenizer.json (+ tokenizer_config.json, chat_template.jinja, generation_config.json).
// Read into the same ModelConfig / ModelWeights as a GGUF file: the projections are views into
// the mapped shards (no float copies), the small vectors are converted to float32.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/model/model.h"
#include "engine/format/safetensors.h"

namespace sinkscope {

struct HfCheckpoint {
  std::filesystem::path dir;
  std::vector<std::unique_ptr<SafetensorsFile>> shards;
  std::unordered_map<std::string, const SafetensorsTensor*> tensors;  // every shard's, by name
  std::vector<std::filesystem::path> files;  // every file read, for the checkpoint's digest
  std::string dtype;                         // config.json's torch_dtype / dtype ("" if absent)
};

// The checkpoint directory `path` names (itself, or the folder of its config.json); empty when
// `path` is neither a directory nor a file named config.json.
std::filesystem::path hf_checkpoint_dir(const std::filesystem::path& path);

// Hyper-parameters from config.json's text (`file` names it in messages). Throws ModelError for
// a missing key, an unsupported model_type or a feature the engine does not implement.
ModelConfig read_hf_config(const std::string& config_json, const std::string& file);

struct HfModelParts {
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<HfCheckpoint> checkpoint;
};

// Opens the checkpoint in `dir`: config, tokenizer, every shard mapped, every weight's name,
// dtype and shape checked. Throws ModelError / TokenizerError naming the file and the problem.
HfModelParts load_hf_checkpoint(const std::filesystem::path& dir,
                                const std::function<void(LoadProgress)>& progress = {});

// sha256 over the names and sha256 of the checkpoint's files, hex.
std::string hf_checkpoint_sha256(const HfCheckpoint& c);

}  // namespace sinkscope
