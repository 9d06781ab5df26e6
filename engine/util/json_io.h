// SPDX-License-Identifier: Apache-2.0
// JSON through nlohmann-json: the document type SinkScope writes and reads, and the few helpers
// every writer and reader needs.
//  - Json keeps members in insertion order, so outputs list their keys in the order written.
//  - dump_json(): invalid UTF-8 in strings becomes U+FFFD instead of an exception (generated
//    text may end inside a character); NaN and infinities print as null (JSON has no spelling
//    for them); doubles print in a short form that reads back to the same value.
//  - parse_json(): the parse error names the source (a file's path) and what is wrong.
#pragma once

#include <cmath>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sinkscope {

using Json = nlohmann::ordered_json;

// `j` as text: compact (indent < 0, one line) or pretty-printed with `indent` spaces per level.
inline std::string dump_json(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// A measurement that may be missing: NaN as null, and back.
inline Json number_or_null(double v) { return std::isnan(v) ? Json(nullptr) : Json(v); }
inline double number_or_nan(const Json& j) { return j.is_null() ? NAN : j.get<double>(); }

// Parses one JSON text. Throws std::runtime_error "SOURCE: <nlohmann's parse error>" (it has
// the line and column) when the text is not JSON.
Json parse_json(std::string_view text, const std::string& source);
// Reads and parses a file; the error names the path (unreadable or not JSON).
Json read_json_file(const std::filesystem::path& path);

}  // namespace sinkscope
