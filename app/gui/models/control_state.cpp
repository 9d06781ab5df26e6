// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/control_state.h"

#include <algorithm>
#include <cmath>

namespace sinkscope::gui {

RunRequest ControlState::toRequest(const std::string& prompt) const {
  RunRequest r;
  r.prompt = prompt;
  r.maxTokens = maxTokens;
  r.attention.type = sparse ? AttentionType::kDynamicSparse : AttentionType::kDense;
  r.attention.threshold_mode = thresholdMode;
  r.attention.threshold_prefill = lambdaPrefill;
  r.attention.threshold_decode = lambdaDecode;
  r.attention.min_sequence_length = minSeqLength;
  r.attention.block_size = blockSize;
  r.cache.strategy = slidingWindow ? CacheStrategy::kSlidingWindow : CacheStrategy::kFull;
  r.cache.window_size = windowSize;
  // S matters to a sliding window (never evicted) and to a quantized cache that protects sinks
  // (the first S positions stay 16-bit, with a full cache too), as in an exported config.
  r.cache.sink_keep_count = sinksInEffect() ? sinkCount : 0;
  r.cache.position_mode = positionMode;
  r.cache.quantization.enabled = kvQuant != KvQuantChoice::kOff;
  r.cache.quantization.kv_dtype = kvQuant == KvQuantChoice::kInt4 ? KvQuantDtype::kInt4 : KvQuantDtype::kInt8;
  r.cache.quantization.protect_sink_positions = protectSinks;
  r.layer = layer;
  r.head = head;
  r.compare = compare;
  return r;
}

std::string ControlState::sinksNote() const {
  if (slidingWindow) return {};
  if (kvQuant == KvQuantChoice::kOff)
    return "Full cache without KV quantization: every token is kept at full precision, so "
           "Sinks S and \"protect sink positions\" have nothing to act on. Turn on the sliding "
           "window or KV quantization.";
  if (!protectSinks)
    return "Full cache, quantized: Sinks S acts only with \"protect sink positions\" on "
           "(the first S tokens then stay 16-bit).";
  return {};
}

SinkScopeConfig ControlState::toConfig(const std::string& modelPath,
                                       const std::string& modelSha256) const {
  SinkScopeConfig c;
  c.model.path = modelPath;
  c.model.sha256 = modelSha256;
  CacheSection& cs = c.inference.cache;
  cs.strategy = slidingWindow ? CacheStrategy::kSlidingWindow : CacheStrategy::kFull;
  cs.window_size = windowSize;
  cs.sink_keep_count = std::min(sinkCount, windowSize);
  cs.position_mode = positionMode;
  cs.block_size = blockSize;
  AttentionSection& a = c.inference.attention;
  a.type = sparse ? AttentionType::kDynamicSparse : AttentionType::kDense;
  a.threshold_mode = thresholdMode;
  a.threshold_prefill = lambdaPrefill;
  a.threshold_decode = lambdaDecode;
  a.min_sequence_length = minSeqLength;
  QuantizationSection& q = c.inference.quantization;
  q.enabled = kvQuant != KvQuantChoice::kOff;
  q.kv_dtype = kvQuant == KvQuantChoice::kInt4 ? KvQuantDtype::kInt4 : KvQuantDtype::kInt8;
  q.protect_sink_positions = protectSinks;
  return c;
}

ControlState ControlState::fromConfig(const SinkScopeConfig& c, const ControlState& base) {
  ControlState s = base;
  const CacheSection& cs = c.inference.cache;
  s.slidingWindow = cs.strategy == CacheStrategy::kSlidingWindow;
  s.windowSize = int(std::min<int64_t>(cs.window_size, 1 << 20));
  s.sinkCount = int(cs.sink_keep_count);
  s.positionMode = cs.position_mode;
  s.blockSize = cs.block_size;
  const AttentionSection& a = c.inference.attention;
  s.sparse = a.type == AttentionType::kDynamicSparse;
  s.thresholdMode = a.threshold_mode;
  s.lambdaPrefill = a.threshold_prefill;
  s.lambdaDecode = a.threshold_decode;
  s.minSeqLength = int(std::min<int64_t>(a.min_sequence_length, kMaxMinSeqLength));
  const QuantizationSection& q = c.inference.quantization;
  s.kvQuant = !q.enabled ? KvQuantChoice::kOff
              : q.kv_dtype == KvQuantDtype::kInt4 ? KvQuantChoice::kInt4 : KvQuantChoice::kInt8;
  s.protectSinks = q.protect_sink_positions;
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
