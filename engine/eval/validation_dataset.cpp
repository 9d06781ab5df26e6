// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/validation_dataset.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/util/json_io.h"
#include "engine/util/sha256.h"

namespace sinkscope {

namespace fs = std::filesystem;

const char* to_string(SampleClass c) {
  switch (c) {
    case SampleClass::kShort: return "short";
    case SampleClass::kLong: return "long";
    case SampleClass::kVeryLong: return "very_long";
    case SampleClass::kPasskey: return "passkey";
  }
  return "?";
}

int default_max_tokens(SampleClass c) {
  switch (c) {
    case SampleClass::kShort: return 1000;
    case SampleClass::kLong: return 4096;
    case SampleClass::kVeryLong: return 8192;
    case SampleClass::kPasskey: return 0;
  }
  return 0;
}

int min_tokens(SampleClass c) {
  switch (c) {
    case SampleClass::kShort: return 2;
    case SampleClass::kLong: return 1024;
    case SampleClass::kVeryLong: return 8192;
    case SampleClass::kPasskey: return 0;
  }
  return 2;
}

SampleClass parse_sample_class(std::string_view t) {
  if (t == "short") return SampleClass::kShort;
  if (t == "long") return SampleClass::kLong;
  if (t == "very_long" || t == "very-long") return SampleClass::kVeryLong;
  if (t == "passkey") return SampleClass::kPasskey;
  throw std::invalid_argument("unknown sample class '" + std::string(t) +
                              "' (expected short, long, very_long or passkey)");
}

std::vector<std::string> Dataset::kinds() const {
  std::vector<std::string> out;
  for (const auto& s : samples)
    if (std::find(out.begin(), out.end(), s.kind) == out.end()) out.push_back(s.kind);
  return out;
}

int Dataset::count(SampleClass c) const {
  int n = 0;
  for (const auto& s : samples) n += s.cls == c;
  return n;
}

std::string dataset_hash(const std::vector<DatasetSample>& samples) {
  std::string canon;
  char depth[64];
  for (const auto& s : samples) {
    if (s.is_passkey()) {
      std::snprintf(depth, sizeof depth, "%.6f", s.depth);
      canon += s.id + "|passkey|passkey|" + std::to_string(s.target_tokens) + "|" + depth + "|" +
               std::to_string(s.seed) + "\n";
    } else {
      canon += s.id + "|" + s.kind + "|" + to_string(s.cls) + "|" + s.sha256 + "\n";
    }
  }
  return sha256_hex(canon);
}

namespace {

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Whether `p` (normalised) lies inside `dir`.
bool inside(const fs::path& dir, const fs::path& p) {
  const fs::path rel = p.lexically_normal().lexically_relative(dir.lexically_normal());
  return !rel.empty() && *rel.begin() != ".." && !rel.is_absolute();
}

}  // namespace

Dataset load_dataset(const fs::path& manifest, bool verify_files) {
  const std::string where = manifest.string();
  std::ifstream in(manifest, std::ios::binary);
  if (!in) throw DatasetError("cannot read the dataset manifest " + where);
  std::stringstream ss;
  ss << in.rdbuf();
  Json root;
  try {
    root = Json::parse(ss.str());
  } catch (const Json::parse_error& e) {
    throw DatasetError(where + ": not valid JSON: " + e.what());
  }
  auto fail = [&](const std::string& msg) -> DatasetError { return DatasetError(where + ": " + msg); };
  if (!root.is_object()) throw fail("expected a JSON object at the top");
  const auto fmt = root.find("format");
  if (fmt == root.end() || !fmt->is_string() || fmt->get<std::string>() != "sinkscope-dataset-1")
    throw fail("\"format\" must be \"sinkscope-dataset-1\"");
  Dataset d;
  d.manifest = fs::absolute(manifest);
  const fs::path dir = d.manifest.parent_path();
  const auto name = root.find("name");
  if (name == root.end() || !name->is_string() || name->get<std::string>().empty())
    throw fail("\"name\" (a string) is required");
  d.name = name->get<std::string>();
  const auto samples = root.find("samples");
  if (samples == root.end() || !samples->is_array() || samples->empty())
    throw fail("\"samples\" must be a non-empty array");

  std::set<std::string> ids;
  size_t index = 0;
  for (const Json& v : *samples) {
    const std::string at = "samples[" + std::to_string(index++) + "]";
    if (!v.is_object()) throw fail(at + ": expected an object");
    auto str = [&](const char* key, bool required) -> std::string {
      const auto f = v.find(key);
      if (f == v.end()) {
        if (required) throw fail(at + ": \"" + key + "\" is required");
        return {};
      }
      if (!f->is_string()) throw fail(at + "." + key + ": expected a string");
      return f->get<std::string>();
    };
    auto integer = [&](const char* key, int64_t lo, int64_t hi, bool required) -> int64_t {
      const auto f = v.find(key);
      if (f == v.end()) {
        if (required) throw fail(at + ": \"" + key + "\" is required");
        return 0;
      }
      if (!f->is_number_integer()) throw fail(at + "." + key + ": expected an integer");
      // An unsigned value beyond int64 is out of every range asked for here.
      const int64_t x = f->is_number_unsigned() && f->get<uint64_t>() > uint64_t(INT64_MAX)
                            ? INT64_MAX
                            : f->get<int64_t>();
      if (x < lo || x > hi)
        throw fail(at + "." + key + ": " + std::to_string(x) + " is out of range [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return x;
    };
    DatasetSample s;
    s.id = str("id", true);
    if (s.id.empty() || s.id.find('|') != std::string::npos || s.id.find('\n') != std::string::npos)
      throw fail(at + ".id: must be non-empty and contain no '|' or newline");
    if (!ids.insert(s.id).second) throw fail(at + ".id: \"" + s.id + "\" appears twice");
    const std::string sample = at + " (" + s.id + ")";
    s.kind = str("kind", true);
    if (s.kind.empty() || s.kind.find('|') != std::string::npos)
      throw fail(sample + ".kind: must be non-empty and contain no '|'");
    try {
      s.cls = parse_sample_class(str("class", true));
    } catch (const std::invalid_argument& e) {
      throw fail(sample + ".class: " + e.what());
    }
    s.source = str("source", false);
    if (s.is_passkey()) {
      s.target_tokens = int(integer("target_tokens", 128, 1 << 20, true));
      const auto depth = v.find("depth");
      if (depth == v.end() || !depth->is_number())
        throw fail(sample + ".depth: a number in [0, 1] is required");
      s.depth = depth->get<double>();
      if (!(s.depth >= 0.0 && s.depth <= 1.0)) throw fail(sample + ".depth: must be in [0, 1]");
      s.seed = uint64_t(integer("seed", 0, int64_t(1) << 53, true));
    } else {
      const std::string file = str("file", true);
      if (file.empty()) throw fail(sample + ".file: empty");
      const fs::path p = (dir / fs::path(file)).lexically_normal();
      if (fs::path(file).is_absolute() || !inside(dir, p))
        throw fail(sample + ".file: \"" + file + "\" must be a relative path inside " + dir.string());
      s.file = p;
      s.sha256 = str("sha256", true);
      if (!is_hex64(s.sha256)) throw fail(sample + ".sha256: expected 64 lowercase hex digits");
      s.max_tokens = int(integer("max_tokens", 0, 1 << 20, false));
      if (s.max_tokens != 0 && s.max_tokens < 2) throw fail(sample + ".max_tokens: must be >= 2");
      if (verify_files) {
        std::error_code ec;
        if (!fs::is_regular_file(s.file, ec))
          throw fail(sample + ": file " + s.file.string() + " is missing");
        std::string got;
        try {
          got = sha256_file(s.file);
        } catch (const std::exception& e) {
          throw fail(sample + ": " + e.what());
        }
        if (got != s.sha256)
          throw fail(sample + ": " + s.file.string() + " has sha256 " + got +
                     ", the manifest says " + s.sha256 + " (the file changed; re-run the set-up script)");
      }
    }
    d.samples.push_back(std::move(s));
  }
  d.sha256 = dataset_hash(d.samples);
  if (const auto h = root.find("sha256"); h != root.end()) {
    if (!h->is_string()) throw fail("\"sha256\": expected a string");
    if (h->get<std::string>() != d.sha256)
      throw fail("\"sha256\" is " + h->get<std::string>() + " but the samples hash to " + d.sha256);
  }
  return d;
}

std::string read_sample_text(const DatasetSample& s) {
  std::ifstream in(s.file, std::ios::binary);
  if (!in) throw DatasetError("sample " + s.id + ": cannot read " + s.file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Dataset select_samples(const Dataset& d, const std::vector<SampleClass>& classes,
                       int max_per_class) {
  Dataset out;
  out.name = d.name;
  out.manifest = d.manifest;
  int taken[4] = {0, 0, 0, 0};
  for (const auto& s : d.samples) {
    if (!classes.empty() && std::find(classes.begin(), classes.end(), s.cls) == classes.end())
      continue;
    int& n = taken[int(s.cls)];
    if (max_per_class > 0 && n >= max_per_class) continue;
    ++n;
    out.samples.push_back(s);
  }
  if (out.samples.size() != d.samples.size()) {
    std::string suffix;
    for (SampleClass c : classes) suffix += std::string(suffix.empty() ? "" : "+") + to_string(c);
    out.name += " [subset" + (suffix.empty() ? std::string() : " " + suffix) +
                (max_per_class > 0 ? ", <= " + std::to_string(max_per_class) + " per class" : "") + "]";
  }
  if (out.samples.empty()) throw DatasetError(d.name + ": the selection leaves no samples");
  out.sha256 = dataset_hash(out.samples);
  return out;
}

}  // namespace sinkscope
