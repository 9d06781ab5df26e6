// SPDX-License-Identifier: Apache-2.0
// The workbench's controls as one value: what a run uses, what a config file records. Converts
// to a RunRequest and to / from the engine's SinkScopeConfig (engine/config/config.h), so export and
// import go through the engine's own schema and checker.
#pragma once

#include <string>

#include "app/gui/models/run_types.h"
#include "engine/config/config.h"

namespace sinkscope::gui {

enum class KvQuantChoice { kOff, kInt8, kInt4 };

struct ControlState {
  bool sparse = true;
  double lambdaPrefill = 0.02;  // the deployment guide's starting points
  double lambdaDecode = 0.005;
  ThresholdMode thresholdMode = ThresholdMode::kFixed;
  int minSeqLength = 0;         // hybrid mode: sparse only when L_kv >= this (0: always)
  bool slidingWindow = false;   // off: full cache
  int windowSize = 256;
  int sinkCount = 4;
  int blockSize = 64;           // 64 | 128
  KvQuantChoice kvQuant = KvQuantChoice::kOff;
  bool protectSinks = true;
  PositionMode positionMode = PositionMode::kCache;
  int maxTokens = 16;
  int layer = 0, head = 0;
  bool compare = true;
  bool operator==(const ControlState&) const = default;

  // Whether Sinks S acts: on a sliding window (kept, never evicted) or on a quantized cache
  // that protects sinks (the first S positions stay 16-bit, full cache included).
  bool sinksInEffect() const {
    return slidingWindow || (kvQuant != KvQuantChoice::kOff && protectSinks);
  }
  // Why S (or "protect sink positions") has no effect with these settings; "" when it does.
  std::string sinksNote() const;

  RunRequest toRequest(const std::string& prompt) const;
  // The config for these settings (validation block absent: nothing was validated).
  SinkScopeConfig toConfig(const std::string& modelPath, const std::string& modelSha256) const;
  // The controls a config describes; layer/head/maxTokens/compare are kept from `base`.
  static ControlState fromConfig(const SinkScopeConfig& c, const ControlState& base);
};

// Upper end of the hybrid-mode spin box (the config allows up to kConfigMaxTokens).
inline constexpr int kMaxMinSeqLength = int(kConfigMaxTokens);

// Log-scale slider mapping for lambda: slider positions [0, kLambdaSteps] cover
// [kLambdaMin, kLambdaMax] logarithmically; position 0 means lambda = 0 (dense).
inline constexpr int kLambdaSteps = 1000;
inline constexpr double kLambdaMin = 1e-6;
inline constexpr double kLambdaMax = 0.5;
int lambdaToSlider(double lambda);
double sliderToLambda(int position);

}  // namespace sinkscope::gui
