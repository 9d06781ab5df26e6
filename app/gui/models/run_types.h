// SPDX-License-Identifier: Apache-2.0
// One workbench run as data: what the GUI asks for (RunRequest) and the immutable snapshot the
// engine thread hands back (RunResult, shared as std::shared_ptr<const RunResult>). Plain C++,
// no Qt, so the engine side stays testable on its own (docs/architecture.md, design principles 1 and 3).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/attention.h"
#include "engine/backend/backend.h"
#include "engine/cache/cache_settings.h"
#include "engine/tokenizer/tokenizer.h"
#include "profiler/timeline.h"

namespace sinkscope::gui {

// Where the CUDA backends the workbench makes keep the projections and the precision of their
// quantized single-token products (BackendOptions::gpu_weights / gpu_activations; the command
// line's --gpu-weights / --gpu-activations). Ignored by the CPU backend.
struct GpuChoice {
  GpuWeights weights = GpuWeights::kAuto;
  GpuActivations activations = kDefaultGpuActivations;
};

struct RunRequest {
  std::string prompt;
  int maxTokens = 16;        // greedy generation length
  AttentionSettings attention;
  CacheSettings cache;
  int layer = 0, head = 0;   // the (layer, head) of the attention map and skip mask
  int mapSize = 256;         // the attention map is downsampled to at most mapSize^2 cells
  int sinkPositions = 64;    // key positions covered by the column-mass probe
  bool compare = true;       // also run (or reuse) the dense baseline
  bool chatTemplate = true;  // wrap the prompt as one user message (instruct models)
};

// The attention probabilities of one (layer, head) over the prompt, mean-pooled into a grid of
// rows x cols cells (query bins x key bins). Cell (r, c) covers queries [rowStart[r],
// rowStart[r + 1]) and keys [colStart[c], colStart[c + 1]).
struct AttentionMap {
  int layer = -1, head = -1;
  int nTokens = 0;
  int rows = 0, cols = 0;
  std::vector<float> cells;  // (rows, cols) row-major, mean probability per cell
  std::vector<int> rowStart, colStart;  // rows + 1 / cols + 1 bin edges
  // alpha_k = mean over queries i >= k of P[i, k] for every key position k (full resolution).
  std::vector<double> alpha;
  // The layer's own window (a Gemma local layer; 0: none), under which the map was computed:
  // the map's visibility rule adds it to the cache's.
  int ownWindow = 0;
};

// Teacher-forced comparison of the variant against the dense baseline over the prompt, plus the
// greedy generations of both.
struct Comparison {
  bool available = false;
  std::vector<double> klPerToken;   // KL(dense || variant) of the next-token distribution, nats
  double klMean = 0;
  double top1Agreement = 0;         // share of positions with the same argmax
  double pplDense = 0, pplVariant = 0;
  double pplDeltaPct = 0;           // (variant / dense - 1) * 100
  double rougeL = 0;                // ROUGE-L F1 of the two greedy generations (token level)
  std::vector<TokenId> denseTokens;  // dense greedy generation
  std::vector<std::string> densePieces;
  int firstDivergence = -1;         // first generated index where the two differ; -1: none
  bool baselineReused = false;      // the dense run came from the worker's cache
};

struct RunResult {
  uint64_t id = 0;
  std::string backendName;
  std::vector<TokenId> promptTokens;
  std::vector<std::string> promptPieces;
  std::vector<TokenId> tokens;       // generated
  std::vector<std::string> pieces;   // generated, one text piece per token
  std::string text;                  // decoded generation
  std::string stopReason;
  double promptPerplexity = 0;       // of the variant over the prompt (teacher forced)
  AttentionProbes probesPrefill;     // tile counts after the prefill (decode entries zero)
  AttentionProbes probes;            // after the whole run (prefill + decode counts, skip mask)
  // Every (layer, head)'s skip mask of the run's prefill (all_masks / all_tiles of the backend's
  // probes; probes and probesPrefill hold none), shared by the results that reuse the run: a
  // change of the map's head takes its mask from here rather than copying the masks (about
  // 270 MB at 32K tokens of an 8B model). Null where the backend recorded none.
  std::shared_ptr<const AttentionProbes> allHeads;
  DecodePathStats decodePath;        // which kernels the sparse-asked decode steps ran (CUDA)
  AttentionMap map;
  int sinkKeep = 0;                  // sink_keep_count of the request's cache settings
  // Sink detection over the prompt (column-mass probe, engine/eval/sinks.h); empty when the backend
  // lacks the probe.
  int sinkPositions = 0;
  std::vector<double> sinkAlpha;     // (layer, head, position)
  std::vector<int64_t> sinkQueries;  // per position: queries its alpha averages (judged or not)
  std::vector<double> firstMass;     // (layer, head): mean mass on the first max(S, 1) keys
  // (layer, head): mean mass per query of the head's learned sink logit (gpt-oss,
  // AttentionProbes::sink_mass); empty for a model without learned sinks.
  std::vector<double> learnedSinkMass;
  std::vector<int> flaggedSinks;
  int recommendedSinkKeep = 0;
  std::string sinkNote;              // why sink detection is missing, when it is
  Comparison compare;
  std::shared_ptr<const prof::Timeline> timeline;
  double prefillMs = 0, decodeMs = 0, mapMs = 0, totalMs = 0;
  // The variant's run came from an earlier one (the last run when only the map's head or size
  // changed, or the cached dense baseline with sparsity off): prefillMs / decodeMs are that
  // run's times, not this request's.
  bool variantReused = false;
  // Where the attention map's Q/K came from (the CPU or GPU backend) and, for a GPU capture,
  // where its probabilities and pooling ran (the GPU, or the host as a fallback).
  std::string mapSource;
  std::string maskNote;   // why the skip mask overlay is missing (empty: it is there)
  // Wall time of each stage of the run, in order (name, ms): what the latency benchmark prints.
  // A stage served from the executor's caches is listed with its (small) lookup time.
  std::vector<std::pair<std::string, double>> stagesMs;
  int nLayer = 0, nHead = 0;
  RunRequest request;
  // A partial result streams in while the variant's prefill runs (RunExecutor::run's partial
  // callback): the skip probes of the layers done so far (the others count no tiles); everything
  // else is empty until the final result.
  bool partial = false;
  double partialFraction = 1.0;  // share of the prefill done, [0, 1]
};

using RunResultPtr = std::shared_ptr<const RunResult>;

}  // namespace sinkscope::gui
