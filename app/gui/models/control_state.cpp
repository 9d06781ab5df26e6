// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/control_state.h"

#include <algorithm>
#include <cmath>

namespace sinkscope::gui {

ControlState::ControlState() {
  inference.attention.type = AttentionType::kDynamicSparse;
  inference.cache.window_size = 256;
}

KvQuantChoice ControlState::kvQuant() const {
  const QuantizationSection& q = inference.quantization;
  if (!q.enabled) return KvQuantChoice::kOff;
  return q.kv_dtype == KvQuantDtype::kInt4 ? KvQuantChoice::kInt4 : KvQuantChoice::kInt8;
}

void ControlState::setKvQuant(KvQuantChoice c) {
  QuantizationSection& q = inference.quantization;
  q.enabled = c != KvQuantChoice::kOff;
  q.kv_dtype = c == KvQuantChoice::kInt4 ? KvQuantDtype::kInt4 : KvQuantDtype::kInt8;
}

RunRequest ControlState::toRequest(const std::string& prompt) const {
  RunRequest r;
  r.prompt = prompt;
  r.maxTokens = maxTokens;
  r.attention = inference.attention;
  r.attention.block_size = inference.cache.block_size;  // a KV page is one attention tile
  r.cache = cache_settings_from(inference.cache, inference.quantization);
  // S matters to a sliding window (never evicted) and to a quantized cache that protects sinks
  // (the first S positions stay 16-bit, with a full cache too), as in an exported config.
  r.cache.sink_keep_count = sinksInEffect() ? inference.cache.sink_keep_count : 0;
  r.layer = layer;
  r.head = head;
  r.compare = compare;
  return r;
}

std::string ControlState::sinksNote() const {
  if (slidingWindow()) return {};
  if (!inference.quantization.enabled)
    return "Full cache without KV quantization: every token is kept at full precision, so "
           "Sinks S and \"protect sink positions\" have nothing to act on. Turn on the sliding "
           "window or KV quantization.";
  if (!inference.quantization.protect_sink_positions)
    return "Full cache, quantized: Sinks S acts only with \"protect sink positions\" on "
           "(the first S tokens then stay 16-bit).";
  return {};
}

SinkScopeConfig ControlState::toConfig(const std::string& modelPath,
                                       const std::string& modelSha256) const {
  SinkScopeConfig c;
  c.model.path = modelPath;
  c.model.sha256 = modelSha256;
  const int64_t max_context = c.inference.max_context_length;
  c.inference = inference;
  c.inference.max_context_length = max_context;
  CacheSection& cs = c.inference.cache;
  cs.sink_keep_count = std::min(cs.sink_keep_count, cs.window_size);
  return c;
}

ControlState ControlState::fromConfig(const SinkScopeConfig& c, const ControlState& base) {
  ControlState s = base;
  s.inference = c.inference;
  // Within the controls' ranges (the config allows more).
  CacheSection& cs = s.inference.cache;
  cs.window_size = std::min<int64_t>(cs.window_size, 1 << 20);
  AttentionSection& a = s.inference.attention;
  a.min_sequence_length = std::min<int64_t>(a.min_sequence_length, kMaxMinSeqLength);
  return s;
}

int lambdaToSlider(double lambda) {
  if (lambda <= 0) return 0;
  const double t = (std::log(std::clamp(lambda, kLambdaMin, kLambdaMax)) - std::log(kLambdaMin)) /
                   (std::log(kLambdaMax) - std::log(kLambdaMin));
  return std::clamp(int(std::lround(t * (kLambdaSteps - 1))) + 1, 1, kLambdaSteps);
}

double sliderToLambda(int position) {
  if (position <= 0) return 0.0;
  const double t = double(std::min(position, kLambdaSteps) - 1) / (kLambdaSteps - 1);
  return std::exp(std::log(kLambdaMin) + t * (std::log(kLambdaMax) - std::log(kLambdaMin)));
}

}  // namespace sinkscope::gui
