// SPDX-License-Identifier: Apache-2.0
// The validation dataset (issue 8): a manifest (JSON) listing text samples -- each a file with
// its sha256, a kind (prose, technical, code, qa, ...) and a length class -- and generated
// passkey tasks (length, depth, seed). The default dataset is assembled by
// scripts/make_dataset.py (run by `scripts/setup.sh --eval-data`) from packaged public texts.
//
// Manifest format ("format": "sinkscope-dataset-1"):
//   {"format": "sinkscope-dataset-1", "name": "...", "sha256": "<dataset hash, optional>",
//    "samples": [
//      {"id": "prose-short-000", "kind": "prose", "class": "short",
//       "file": "samples/prose-short-000.txt", "sha256": "<64 hex>", "source": "...",
//       "max_tokens": 1000 (optional)},
//      {"id": "passkey-000", "kind": "passkey", "class": "passkey",
//       "target_tokens": 2048, "depth": 0.25, "seed": 1}]}
// Length classes: short (< 1K tokens, cut at 1,000), long (about 4K, cut at 4,096, at least
// 1,024), very_long (streamed in chunks, cut at 8,192, at least 8,192 unless max_tokens says
// otherwise), passkey (a generated retrieval task).
//
// The dataset hash is sha256 over one line per sample, in manifest order:
//   text:    "<id>|<kind>|<class>|<sha256 of the file>\n"
//   passkey: "<id>|passkey|passkey|<target_tokens>|<depth with 6 decimals>|<seed>\n"
// so it changes with any sample's content, order or task parameters.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sinkscope {

class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class SampleClass { kShort, kLong, kVeryLong, kPasskey };
const char* to_string(SampleClass c);  // "short" | "long" | "very_long" | "passkey"
// Default token cut per class: 1000, 4096, 8192 (passkey: 0, the task sets its length).
int default_max_tokens(SampleClass c);
// Fewest tokens a text sample of the class must have after tokenising: 2, 1024, 8192.
int min_tokens(SampleClass c);

struct DatasetSample {
  std::string id;
  std::string kind;  // free text: prose, technical, code, qa, passkey, ...
  SampleClass cls = SampleClass::kShort;
  std::string source;  // provenance, free text
  // Text samples.
  std::filesystem::path file;  // absolute (resolved against the manifest's folder)
  std::string sha256;
  int max_tokens = 0;  // tokens kept (0: default_max_tokens(cls))
  // Passkey tasks.
  int target_tokens = 0;
  double depth = 0;
  uint64_t seed = 0;

  bool is_passkey() const { return cls == SampleClass::kPasskey; }
  int token_cut() const { return max_tokens > 0 ? max_tokens : default_max_tokens(cls); }
};

struct Dataset {
  std::string name;
  std::filesystem::path manifest;
  std::vector<DatasetSample> samples;
  std::string sha256;  // the dataset hash (computed)

  // Kinds and classes present, in first-seen order.
  std::vector<std::string> kinds() const;
  int count(SampleClass c) const;
};

// Reads and checks a manifest: JSON syntax, required fields and their types, unique ids, known
// classes, files inside the manifest's folder, every file's sha256 (verify_files), a "sha256"
// field equal to the computed hash. Throws DatasetError naming the manifest, the sample and the
// problem.
Dataset load_dataset(const std::filesystem::path& manifest, bool verify_files = true);

// The hash defined above, from the samples' fields.
std::string dataset_hash(const std::vector<DatasetSample>& samples);

// Reads a text sample's file (DatasetError when unreadable).
std::string read_sample_text(const DatasetSample& s);

// A subset: only the given classes (empty: all), at most max_per_class samples of each class
// (0: all), in manifest order. The hash is recomputed for the subset and the name gets a suffix.
Dataset select_samples(const Dataset& d, const std::vector<SampleClass>& classes,
                       int max_per_class);

// Parses "short", "long", "very_long" (or "very-long"), "passkey"; throws std::invalid_argument.
SampleClass parse_sample_class(std::string_view text);

}  // namespace sinkscope
