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

// The settings are the config's own inference block (engine/config/config.h: the attention,
// cache and quantization sections with the schema's defaults and names); the controls add what
// only the workbench has (generation length, the map's layer and head, the comparison switch).
// Two deliberate differences from a config file's defaults: the workbench starts with dynamic
// sparse attention on (it is what it is for), and the window W starts at 256, so that turning
// the sliding window on shows evictions on the sample prompts (a few hundred tokens).
struct ControlState {
  ControlState();
  InferenceSection inference;  // max_context_length is not a control (the model's)
  int maxTokens = 16;
  int layer = 0, head = 0;
  bool compare = true;
  bool operator==(const ControlState&) const = default;

  // The controls that are switches or choices over the schema's enums.
  bool sparse() const { return inference.attention.type == AttentionType::kDynamicSparse; }
  void setSparse(bool on) {
    inference.attention.type = on ? AttentionType::kDynamicSparse : AttentionType::kDense;
  }
  bool slidingWindow() const {
    return inference.cache.strategy == CacheStrategy::kSlidingWindow;
  }
  void setSlidingWindow(bool on) {
    inference.cache.strategy = on ? CacheStrategy::kSlidingWindow : CacheStrategy::kFull;
  }
  KvQuantChoice kvQuant() const;
  void setKvQuant(KvQuantChoice q);

  // Whether Sinks S acts: on a sliding window (kept, never evicted) or on a quantized cache
  // that protects sinks (the first S positions stay 16-bit, full cache included).
  bool sinksInEffect() const {
    return slidingWindow() ||
           (inference.quantization.enabled && inference.quantization.protect_sink_positions);
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
