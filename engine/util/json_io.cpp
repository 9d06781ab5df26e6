// SPDX-License-Identifier: Apache-2.0
#include "engine/util/json_io.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace sinkscope {

Json parse_json(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw std::runtime_error(source + ": " + e.what());
  }
}

Json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json(ss.str(), path.string());
}

}  // namespace sinkscope
