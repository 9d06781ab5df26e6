// SPDX-License-Identifier: Apache-2.0
// What the loader tests share for damaged-file cases: a copy of a GGUF file with tensors or
// metadata keys dropped or edited, and the message Model::load gives for a file.
#pragma once

#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "engine/model/model.h"

namespace sinkscope::gguf_edit {

// A copy of `src` without the tensors in `drop` and the metadata keys in `drop_keys`, its
// metadata changed by `edit`, written as <temp>/<folder>/<tag>.gguf.
inline std::filesystem::path copy_gguf(const std::filesystem::path& src, const std::string& folder,
                                       const std::string& tag, const std::set<std::string>& drop,
                                       const std::function<void(GgufWriter&)>& edit = {},
                                       const std::set<std::string>& drop_keys = {}) {
  const auto f = GgufFile::open(src);
  GgufWriter w(f->version(), f->alignment());
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment" && !drop_keys.count(k)) w.set_value(k, v);
  for (const GgufTensorInfo& t : f->tensors())
    if (!drop.count(t.name))
      w.add_raw_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  if (edit) edit(w);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / folder;
  std::filesystem::create_directories(dir);
  const std::filesystem::path out = dir / (tag + ".gguf");
  w.write(out);
  return out;
}

// The ModelError message of loading `p`, or "(loaded without error)".
inline std::string load_error(const std::filesystem::path& p) {
  try {
    Model::load(p);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(loaded without error)";
}

}  // namespace sinkscope::gguf_edit
