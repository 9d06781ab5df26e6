// SPDX-License-Identifier: Apache-2.0
// Attention settings shared by every backend, and the dynamic-sparse skip rule (contract in
// docs/architecture.md): KV tiles visited in position order; tile t is skipped for a query tile when,
// for every row r, m~_r - m_r < ln(lambda), m_r being the running max before t and m~_r the
// row's max inside t. The first visited tile is never skipped; lambda = 0 is dense.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace sinkscope {

// Rows of one prefill query tile (one query head, consecutive tokens): the granularity of the
// skip vote and of the skip mask's rows. The CUDA prefill kernels use the same value
// (kernels/attention_params.h, kPrefillQueryTile; a CTA there holds two query tiles, each
// deciding on its own), so CPU and GPU skip masks are comparable tile for tile.
inline constexpr int kQueryTileRows = 64;

enum class AttentionType { kDense, kDynamicSparse };
enum class ThresholdMode { kFixed, kLengthScaled };
enum class AttentionDtype { kBfloat16, kFloat16, kFloat32 };

// The attention block of a config file (`inference.attention`, docs/config.md) and what every
// backend runs with: one type, member names identical to the schema keys. block_size is the
// schema's `inference.cache.block_size` (a KV page is one attention tile), copied in by
// to_attention_settings(). The thresholds are the deployment guide's starting points; they act
// only when type is kDynamicSparse.
struct AttentionSettings {
  AttentionDtype dtype = AttentionDtype::kBfloat16;  // what exported configs ask a server for
  AttentionType type = AttentionType::kDense;
  ThresholdMode threshold_mode = ThresholdMode::kFixed;
  double threshold_prefill = 0.02;  // fixed: lambda in [0, 1); length_scaled: c >= 0 (c / L_kv)
  double threshold_decode = 0.005;
  int64_t min_sequence_length = 0;  // hybrid: sparse only when L_kv >= this
  int block_size = 64;              // KV tile = KV page (64 or 128)
  bool skip_value_load = true;
  bool skip_softmax_exp = true;
  bool operator==(const AttentionSettings&) const = default;
};

// The lambda in force for one attention call over l_kv keys; 0 means dense.
inline double effective_lambda(const AttentionSettings& s, bool decode, int64_t l_kv) {
  if (s.type != AttentionType::kDynamicSparse) return 0.0;
  if (l_kv < s.min_sequence_length) return 0.0;
  double v = decode ? s.threshold_decode : s.threshold_prefill;
  if (s.threshold_mode == ThresholdMode::kLengthScaled) v = l_kv > 0 ? v / double(l_kv) : 0.0;
  return v > 0.0 ? v : 0.0;
}

// ln(lambda) as the comparison threshold; -inf for lambda = 0 (nothing is ever below it).
inline float log_threshold(double lambda) {
  return lambda > 0.0 ? static_cast<float>(std::log(lambda)) : -INFINITY;
}

// Skip counters for one (layer, head), prefill and decode kept apart.
struct TileCounts {
  int64_t visited = 0;  // causally visible tiles (the denominator of sparsity)
  int64_t skipped = 0;
  // Upper bound of the attention probability mass a row lost to skipped tiles: each skipped key
  // has p <= exp(m~ - m) < lambda (the row's final softmax denominator is >= 1 relative to its
  // running max), so a row's bound is sum over its skipped tiles of keys * exp(m~ - m), which is
  // <= lambda * skipped keys. Kept as the max over rows and the sum over rows (for the mean).
  double mass_bound_max = 0.0;
  double mass_bound_sum = 0.0;
  int64_t rows = 0;
  double sparsity() const { return visited ? double(skipped) / double(visited) : 0.0; }
  double mass_bound_mean() const { return rows ? mass_bound_sum / double(rows) : 0.0; }
  void add(const TileCounts& o) {
    visited += o.visited;
    skipped += o.skipped;
    mass_bound_max = mass_bound_max > o.mass_bound_max ? mass_bound_max : o.mass_bound_max;
    mass_bound_sum += o.mass_bound_sum;
    rows += o.rows;
  }
};

// The skip mask of one (layer, head) for the last prefill: (query tile, KV tile) cells,
// row-major; 0 not visible, 1 computed, 2 skipped.
// One recorded mask cell placed in the prompt's original positions: queries [q0, q1), keys
// [k0, k1) (state 1 computed, 2 skipped).
struct MaskTile {
  int q0 = 0, q1 = 0, k0 = 0, k1 = 0;
  uint8_t state = 0;
};

struct SkipMask {
  int layer = -1, head = -1;  // requested; -1: none
  int rows = 0, cols = 0;
  std::vector<uint8_t> cells;
  // The visited cells of every chunk of the last prefill, in original positions. A windowed
  // cache prefills in chunks whose KV tiles are cache pages (sinks first, then the window), so
  // `cells` (the last chunk only, in page order) cannot be placed on the prompt by index.
  // Empty where the backend records only `cells` with query tile r = positions [r * 64, ...)
  // and KV tile t = positions [t * block_size, ...) (a full cache prefilled in one call).
  std::vector<MaskTile> tiles;
};

struct AttentionProbes {
  int n_layer = 0, n_head = 0;
  std::vector<TileCounts> prefill;  // (layer, head)
  std::vector<TileCounts> decode;   // (layer, head)
  void reset(int layers, int heads) {
    n_layer = layers;
    n_head = heads;
    prefill.assign(size_t(layers) * heads, {});
    decode.assign(size_t(layers) * heads, {});
    mask.rows = mask.cols = 0;
    mask.cells.clear();
    mask.tiles.clear();
    all_rows = all_cols = 0;
    all_masks.clear();
    all_stat.clear();
    all_tiles.clear();
    col_mass.assign(size_t(layers) * heads * size_t(col_n), 0.0);
    col_queries.assign(size_t(col_n), 0);
    col_queries_layer.clear();
    sink_mass.clear();
    sink_queries = 0;
  }
  SkipMask mask;  // filled by the prefill when mask.layer/head name a (layer, head)
  // Column mass for sink detection (engine/eval/sinks.h), recorded when col_n > 0 (a backend's
  // request_column_mass()): for key positions k < col_n, col_mass[(layer * n_head + head) *
  // col_n + k] sums the attention probability P[i, k] over every query i since reset, and
  // col_queries[k] counts the queries i >= k that could see k. alpha_k = mass / queries.
  int col_n = 0;
  std::vector<double> col_mass;
  std::vector<int64_t> col_queries;
  // Where layers have windows of their own (Gemma's local layers), the same count per layer,
  // col_queries_layer[layer * col_n + k]: the queries that could see k under the cache rule AND
  // the layer's window. Empty where every layer sees what col_queries says.
  std::vector<int64_t> col_queries_layer;
  // Learned sinks (gpt-oss, ModelConfig::attn_sinks): sink_mass[layer * n_head + head] sums the
  // probability the head's sink logit takes over every query since reset; sink_queries counts
  // those queries. Their ratio is the head's mean learned sink mass, reported next to alpha_k.
  // Empty for a model without learned sinks.
  std::vector<double> sink_mass;
  int64_t sink_queries = 0;
  // The counts alpha divides by: per layer where recorded, else the shared ones.
  const std::vector<int64_t>& alpha_queries() const {
    return col_queries_layer.empty() ? col_queries : col_queries_layer;
  }
  // Debug probe, off by default (Backend::request_all_skip_masks): the last prefill's skip mask
  // of EVERY (layer, head), all_masks[((layer * n_head + head) * all_rows + q tile) * all_cols +
  // KV tile], cell codes as SkipMask. all_stat (CPU backend asked with_stat only, else empty): the deciding
  // statistic of each cell (engine/backend/cpu_attention.h, CpuAttentionArgs::tile_stat), same index.
  int all_rows = 0, all_cols = 0;
  std::vector<uint8_t> all_masks;
  std::vector<float> all_stat;
  // The same probe where the prefill ran in chunks over a windowed cache (the CPU backend),
  // whose KV tiles are cache pages: every chunk's visited tiles of each (layer, head) in prompt
  // positions, all_tiles[layer * n_head + head], as SkipMask::tiles; all_rows / all_cols are
  // then 0 and all_masks empty.
  std::vector<std::vector<MaskTile>> all_tiles;
  TileCounts total(bool decode_phase) const {
    TileCounts t;
    for (const auto& c : decode_phase ? decode : prefill) t.add(c);
    return t;
  }
};

}  // namespace sinkscope
