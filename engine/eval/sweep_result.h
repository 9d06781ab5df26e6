// SPDX-License-Identifier: Apache-2.0
// A sweep's results as one JSON schema: the document `sinkscope-cli sweep --json-out` writes
// (app/cli/cmd_validate.cpp) and the GUI's sweep view reads (app/gui/models/sweep_model.cpp),
// through the same to_json / from_json.
//
//   {"grid", "dataset", "dataset_sha256", "samples", "model_sha256", "device",
//    "points": [{"index", "label", "settings": {key: value}, "valid",
//                "invalid" (invalid points) | "passed", "results": {...}, "gates" (valid ones),
//                "pareto_sparsity", "pareto_memory", "config_yaml"}]}
//
// Reading is lenient where the GUI can do without a member (the top-level strings, "samples",
// "index", "settings", the flags), strict where it cannot ("points", "label", "valid",
// "config_yaml", a valid point's "results"). A result that is null or absent reads as NaN
// (not measured). Problems throw SweepFormatError naming the member by its path
// ("points[3].results.kl_mean: expected a number or null").
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "engine/util/json_io.h"
#include "engine/eval/sweep.h"

namespace sinkscope {

class SweepFormatError : public std::runtime_error {
 public:
  // `key`: the member's path ("" for the document itself); `problem`: what is wrong with it.
  SweepFormatError(const std::string& key, const std::string& problem);
  const std::string& key() const { return m_key; }
  const std::string& problem() const { return m_problem; }
  // The same problem one level further out: "results.kl_mean" under "points[3]".
  SweepFormatError under(const std::string& parent) const;

 private:
  std::string m_key, m_problem;
};

struct SweepPointResult {
  int64_t index = 0;
  std::string label;  // "lambda=0.01 window=512 sinks=4"
  GridPoint settings;  // the grid's (key, value) pairs, axis order
  bool valid = false;
  std::string invalid;  // why the point was skipped (valid: empty)
  bool passed = false;
  ValidationResults results;  // NaN: not measured
  std::string gates;          // the gate summary
  bool pareto_sparsity = false, pareto_memory = false;
  std::string config_yaml;  // the point's (validated) config
};

struct SweepResult {
  std::string grid, dataset, dataset_sha256;
  int64_t samples = 0;
  std::string model_sha256, device;
  std::vector<SweepPointResult> points;
};

// The validation results (validate --json's "results", a sweep point's "results").
void to_json(Json& j, const ValidationResults& r);
void from_json(const Json& j, ValidationResults& r);
void to_json(Json& j, const SweepPointResult& p);
void from_json(const Json& j, SweepPointResult& p);
void to_json(Json& j, const SweepResult& s);
void from_json(const Json& j, SweepResult& s);

}  // namespace sinkscope
