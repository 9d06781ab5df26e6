// SPDX-License-Identifier: Apache-2.0
// Runs one RunRequest to a RunResult on the calling thread (the engine thread): owns the model,
// the variant backend, the dense-baseline backend (created on first use) and a cache of the
// last dense baseline, so a control change only re-runs the variant. Plain C++, no Qt.
#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "app/gui/models/run_types.h"
#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/model/model.h"

namespace sinkscope {
class ThreadPool;
}

namespace sinkscope::gui {

struct HeadMapOptions;  // app/gui/models/head_attention.h

struct RunProgress {
  double fraction = 0;  // [0, 1]
  double etaSeconds = -1;  // < 0: unknown
  std::string phase;
};

class RunExecutor {
 public:
  using ProgressFn = std::function<void(const RunProgress&)>;
  // Receives partial results (RunResult::partial) during the variant's prefill, at most one per
  // kPartialIntervalMs after the first layer, so views can fill in layer by layer.
  using PartialFn = std::function<void(const RunResultPtr&)>;
  static constexpr int kPartialIntervalMs = 100;
  // The largest KV cache (capacity x bytes per token) a spare variant backend may hold.
  static constexpr int64_t kMaxSpareCacheBytes = int64_t(1) << 30;

  explicit RunExecutor(BackendKind kind = BackendKind::kAuto, int threads = 0, GpuChoice gpu = {});
  ~RunExecutor();
  RunExecutor(const RunExecutor&) = delete;
  RunExecutor& operator=(const RunExecutor&) = delete;

  // Loads a GGUF model (throws ModelError/GgufError/... naming the file) and drops the backends.
  void loadModel(const std::string& path);
  // An already loaded model (tests).
  void setModel(std::shared_ptr<const Model> model);
  bool hasModel() const { return m_model != nullptr; }
  const Model* model() const { return m_model.get(); }
  std::string backendName();  // creates the backend when needed ("" without a model)
  const std::string& backendNote() const { return m_note; }
  const GpuChoice& gpuChoice() const { return m_gpu; }
  // Another GPU weight mode or activation precision: the backends (and what they computed) are
  // dropped when it differs, and the next backendName() or run makes new ones; the previous
  // choice is restored when making the backend fails (throws what make_backend threw).
  void setGpuChoice(GpuChoice gpu);

  // The flag polled between layers (and by the attention-map helper); the caller raises it.
  void setCancelFlag(const std::atomic<bool>* flag) { m_cancel = flag; }

  // Forgets the reusable view data (the last run, the last attention map and the map's captured
  // Q/K) but keeps the dense baseline: the next run computes its map and variant afresh. For
  // benchmarks (a first visit of a layer) and to free memory.
  void dropViewCaches();

  // Idle-time work after a run whose map came from the CPU: one capture prefill of the last
  // run's prompt that keeps the Q/K of every layer (within kMapCaptureBytes), so that a later
  // change of the map's layer or head costs the map's probabilities only. Stops (keeping the
  // captures it had) when *stop is raised, checked once per layer; false when stopped or when
  // there is nothing to warm. Engine thread only, like run().
  bool warmViewCaches(const std::atomic<bool>* stop);
  // The float32 Q/K the CPU map backend keeps from its capture prefills, all layers together.
  static constexpr size_t kMapCaptureBytes = size_t(384) << 20;

  // The attention map of (o.layer, o.head) over the prompt: its Q/K captured from the backend
  // (the GPU's dense prefill where the executor runs on a GPU, else the CPU map backend's, whose
  // captured layers are kept for the next pick), then headMapOnGpu for a GPU capture (the host's
  // headMapFromQK where that fails) or headMapFromQK for a CPU one. Says where the Q/K came
  // from and where the map was computed in *source. Throws std::invalid_argument for a (layer, head) outside the model or an
  // empty prompt, Cancelled when cancelled.
  AttentionMap headMap(const std::vector<TokenId>& prompt, const HeadMapOptions& o,
                       std::string* source = nullptr);

  // The variant's per-position statistics and KL are computed during its decode on GPU
  // backends (the host's cores are idle then); on the CPU backend they follow the decode,
  // unless this is set (tests: both orders must give the same result).
  void setOverlapOnCpu(bool on) { m_overlapOnCpu = on; }
  // GPU backends reduce the prompt's (n, n_vocab) logits where they are (per-row log-sum-exp,
  // argmax, next-token logit; the KL against the baseline from the final hidden states,
  // Backend::kl_rows) instead of sending them to the host: 17 GB at 32K tokens over a 128K
  // vocabulary. The CPU backend keeps its logits on the host, unless this is set (tests: both
  // paths must give the same result).
  void setRowStatsOnCpu(bool on) { m_rowStatsOnCpu = on; }

  // Throws BackendError / std::invalid_argument for bad requests, Cancelled when cancelled.
  RunResultPtr run(const RunRequest& request, uint64_t id, const ProgressFn& progress = {},
                   const PartialFn& partial = {});

 private:
  Backend& variantBackend(const RunRequest& r);
  Backend& denseBackend();
  bool gpuCaptureQK(const std::vector<TokenId>& prompt, const HeadMapOptions& o,
                    std::vector<float>& q, std::vector<float>& k);
  std::string gpuMapSource();
  AttentionMap mapOfGpuQK(const std::vector<float>& q, const std::vector<float>& k, int n,
                          const HeadMapOptions& o, ThreadPool* pool, std::string* how);
  // The map's Q/K from the CPU map backend (capturing when its captures lack the layer).
  void cpuCaptureQK(const std::vector<TokenId>& prompt, const HeadMapOptions& o,
                    std::vector<float>& q, std::vector<float>& k,
                    const std::atomic<bool>* cancel);
  Backend& mapBackend();
  static QkvCaptureRequest mapCaptureRequest(int layer, int sinks, int window);
  struct Run;   // one run's state and steps (run_executor.cpp)
  struct Pass;  // one generation with per-position logits
  // Started by runPass after the prefill, with its logits; joined after the decode.
  using AheadFn = std::function<std::future<void>(const Pass&)>;
  Pass runPass(Backend& b, const std::vector<TokenId>& prompt, int maxTokens,
               const std::function<void(int)>& onStep, prof::SpanRecorder* spans,
               std::vector<float>* buffer = nullptr,
               const std::function<void(double)>& onPrefill = {},
               const AttentionProbes* resume = nullptr, const AheadFn& ahead = {},
               bool rowStats = false);
  bool cancelled() const { return m_cancel && m_cancel->load(std::memory_order_relaxed); }

  BackendKind m_kind;
  int m_threads;
  GpuChoice m_gpu;
  std::shared_ptr<const Model> m_model;
  std::unique_ptr<Backend> m_variant, m_dense;
  std::string m_variantKey;  // the cache settings the variant backend was made with
  // The variant backend of the cache settings before the last change (variantBackend), kept
  // while its cache is small, so that switching back (a window on and off) finds it ready.
  std::unique_ptr<Backend> m_spare;
  std::string m_spareKey;
  bool m_variantCreated = false;  // the last variantBackend() made a new backend
  std::string m_note;
  std::unique_ptr<ThreadPool> m_pool;
  const std::atomic<bool>* m_cancel = nullptr;
  struct DenseCache;
  std::unique_ptr<DenseCache> m_denseCache;
  struct MapCache;  // the last attention map and what it was made for
  std::unique_ptr<MapCache> m_mapCache;
  // A CPU backend (full cache, dense) whose capture prefills give the maps' Q/K, and what its
  // captures are of: the prompt and the visibility rule.
  std::unique_ptr<Backend> m_mapBackend;
  std::vector<TokenId> m_mapPrompt;
  int m_mapSinks = 0, m_mapWindow = 0;
  RunResultPtr m_lastRun;    // the last finished run and the key of its variant settings
  std::string m_lastRunKey;  // (variantRunKey in the .cpp)
  bool m_overlapOnCpu = false;
  bool m_rowStatsOnCpu = false;
  // A row-statistics variant's prefill kept for a decode-only change (m_prefillKey): its rows
  // and its last row of logits.
  RowStats m_keptRows;
  std::vector<float> m_keptLast;
  // Its KL per position against the baseline whose hidden states are m_keptKlDense.
  std::vector<double> m_keptKl;
  std::shared_ptr<const HiddenRows> m_keptKlOf, m_keptKlDense;
  std::vector<float> m_logitsBuffer;  // the variant's prompt logits, reused run to run
  // What the variant backend's last prefill was (prefillRunKey in the .cpp) and the probes right
  // after it: a change that leaves the prefill as it was (lambda decode, generation length)
  // rewinds the backend there and runs the decode only. Empty key: nothing to resume.
  std::string m_prefillKey;
  std::vector<TokenId> m_prefillPrompt;
  AttentionProbes m_prefillProbes;
};

}  // namespace sinkscope::gui
