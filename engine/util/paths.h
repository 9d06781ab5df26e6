// SPDX-License-Identifier: Apache-2.0
// Where the default model and data live. The set-up script (scripts/setup.sh) uses the
// same rules: $SINKSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/sinkscope, else ~/.cache/sinkscope.
#pragma once

#include <filesystem>
#include <string>

namespace sinkscope {

inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr const char* kDefaultModelSha256 =
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

std::filesystem::path cache_dir();
// $SINKSCOPE_MODEL when set, else cache_dir()/kDefaultModelFile (may not exist).
std::filesystem::path default_model_path();

// The default validation dataset (scripts/make_dataset.py, run by `setup.sh --eval-data`):
// $SINKSCOPE_DATASET when set, else <cache_dir>/eval/<kDefaultDatasetDir>/manifest.json.
inline constexpr const char* kDefaultDatasetDir = "validation-v1";
std::filesystem::path default_dataset_manifest();

}  // namespace sinkscope
