// SPDX-License-Identifier: Apache-2.0
#include "engine/util/paths.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

namespace sinkscope {

namespace {
const char* env_nonempty(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}
}  // namespace

std::filesystem::path cache_dir() {
  // Keep in step with scripts/setup.sh (cache_dir()) and tests/unit/test_support.h.
  if (const char* d = env_nonempty("SINKSCOPE_CACHE_DIR")) return std::filesystem::path(d);
  if (const char* x = env_nonempty("XDG_CACHE_HOME")) return std::filesystem::path(x) / "sinkscope";
  const char* home = env_nonempty("HOME");
  if (!home) {
    // No $HOME (e.g. a bare service environment): fall back to the password database.
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir && *pw->pw_dir) home = pw->pw_dir;
  }
  if (home) return std::filesystem::path(home) / ".cache" / "sinkscope";
  return std::filesystem::path(".cache") / "sinkscope";
}

std::filesystem::path default_model_path() {
  if (const char* m = env_nonempty("SINKSCOPE_MODEL")) return std::filesystem::path(m);
  return cache_dir() / kDefaultModelFile;
}

std::filesystem::path default_dataset_manifest() {
  if (const char* m = env_nonempty("SINKSCOPE_DATASET")) return std::filesystem::path(m);
  return cache_dir() / "eval" / kDefaultDatasetDir / "manifest.json";
}

}  // namespace sinkscope
