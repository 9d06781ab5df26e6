// SPDX-License-Identifier: Apache-2.0
// The workbench's attention map on the CUDA backend (RunExecutor::headMap): Q/K captured from
// a full-cache prefill that applies the map's visibility rule (QkvCaptureRequest), then the
// CPU's probabilities and pooling (headMapFromQK), against the same map from the CPU backend's
// float32 capture (the reference backend), causal and with a sliding window of
// 256 + 4 sinks, 700 tokens of real text. Also the capture's prefill on its own: with the window
// rule its logits equal the CPU backend's windowed cache (original positions: both are exact
// masked attention), and stop_after_layer leaves the captured Q/K as a whole forward does; a
// one-head capture holds the all-heads capture's slices bit for bit.
// "PASS|FAIL <check>: <numbers>" per check, "RESULT: ..." last, exit 1 on a failure; "SKIP:
// <reason>" and exit 0 without a GPU or the model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "app/gui/models/head_attention.h"
#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/model/model.h"
#include "engine/util/thread_pool.h"
#include "gpu_agreement.h"
#include "gpu_checks.h"
#include "gpu_model.h"
#include "sample_text.h"

using namespace sinkscope;
using gpu_test::check;
using gpu_test::run;

namespace {

// One head's Q and K (n, d) as float from a capture.
void headQK(const QkvCapture& cap, int head, int group, std::vector<float>& q,
            std::vector<float>& k) {
  const int n = cap.n_q, d = cap.head_dim;
  q.resize(size_t(n) * d);
  k.resize(size_t(n) * d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) {
      q[size_t(i) * d + j] = cap.q_at((size_t(i) * cap.n_head + head) * d + j);
      k[size_t(i) * d + j] = cap.k_at((size_t(i) * cap.n_head_kv + head / group) * d + j);
    }
}

// Mean over row bins of the L1 distance of the bins' pooled probability rows (0: equal maps,
// 2: disjoint), and the largest |delta alpha_k|.
struct MapDiff {
  double l1 = 0, alpha = 0;
};
MapDiff diff(const gui::AttentionMap& a, const gui::AttentionMap& b) {
  MapDiff d;
  if (a.rows != b.rows || a.cols != b.cols || a.alpha.size() != b.alpha.size()) return {9, 9};
  for (int r = 0; r < a.rows; ++r) {
    double row = 0;
    for (int c = 0; c < a.cols; ++c) {
      const double w = a.colStart[size_t(c) + 1] - a.colStart[size_t(c)];
      row += w * std::fabs(double(a.cells[size_t(r) * a.cols + c]) - b.cells[size_t(r) * a.cols + c]);
    }
    d.l1 += row / a.rows;
  }
  for (size_t k = 0; k < a.alpha.size(); ++k)
    d.alpha = std::max(d.alpha, std::fabs(a.alpha[k] - b.alpha[k]));
  return d;
}

std::string str(const MapDiff& d) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "mean row L1 %.2e, max |d alpha| %.2e", d.l1, d.alpha);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) gpu_test::g_filter = argv[1];
  int rc = 0;
  const std::shared_ptr<const Model> model = gpu_test::load_gpu_model(&rc);
  if (!model) return rc;
  const ModelConfig& c = model->config();
  const std::vector<TokenId> text = model->tokenizer().encode(gpu_test::kText);
  std::vector<TokenId> ids;
  while (ids.size() < 700) ids.insert(ids.end(), text.begin(), text.end());
  ids.resize(700);
  const int n = int(ids.size()), d = c.head_dim, group = c.n_head / c.n_head_kv;
  std::printf("device: %s\n", cuda_device_name().c_str());
  ThreadPool pool(0);
  std::unique_ptr<Backend> gpu = make_backend(model, BackendOptions{}, BackendKind::kCuda);
  const float scale = float(1.0 / std::sqrt(double(d)));

  // Q/K of (layer, head) captured under the rule of `cap` -> the map under the rule of `o`
  // (gpuHeadMap: the same rule for both).
  auto gpuMap = [&](const gui::HeadMapOptions& cap, const gui::HeadMapOptions& o, bool stop) {
    gpu->reset();
    QkvCaptureRequest r;
    r.layer = cap.layer;
    r.sink_count = cap.sinkCount;
    r.window = cap.window;
    r.stop_after_layer = stop;
    gpu->request_qkv_capture(r);
    std::vector<float> last;
    gpu->forward(ids, LogitsMode::kLast, last);
    std::vector<float> q, k;
    headQK(gpu->qkv_capture(), o.head, group, q, k);
    gpu->request_qkv_capture({});
    return gui::headMapFromQK(q.data(), k.data(), n, d, scale, o, &pool);
  };

  // The same map from the CPU backend's float32 capture (its capture prefill under the rule).
  std::unique_ptr<Backend> cpu = make_cpu_backend(model, BackendOptions{});
  auto cpuMap = [&](const gui::HeadMapOptions& o) {
    QkvCaptureRequest r;
    r.layer = o.layer;
    r.sink_count = o.window > 0 ? o.sinkCount : 0;
    r.window = o.window;
    r.stop_after_layer = true;
    cpu->reset();
    cpu->request_qkv_capture(r);
    std::vector<float> last;
    cpu->forward(ids, LogitsMode::kLast, last);
    std::vector<float> q, k;
    headQK(cpu->qkv_capture(), o.head, group, q, k);
    cpu->request_qkv_capture({});
    return gui::headMapFromQK(q.data(), k.data(), n, d, scale, o, &pool);
  };

  // 1. Maps: GPU capture vs the CPU reference, causal and windowed, two (layer, head)s. The
  //    windowed GPU map must be far closer to the windowed reference than the causal one is
  //    (the rule took effect in the layers below the map's).
  for (const auto& [layer, head] : {std::pair{10, 3}, std::pair{18, 8}}) {
    gui::HeadMapOptions causal;
    causal.layer = layer;
    causal.head = head;
    causal.maxCells = 128;
    gui::HeadMapOptions win = causal;
    win.sinkCount = 4;
    win.window = 256;
    const std::string tag = "_L" + std::to_string(layer) + "H" + std::to_string(head);
    run("map_causal" + tag, [&] {
      const MapDiff dd = diff(cpuMap(causal),
                              gpuMap(causal, causal, true));
      check(dd.l1 <= 0.05 && dd.alpha <= 0.05, "map_causal" + tag,
            str(dd) + " (gates: L1 <= 0.05, |d alpha| <= 0.05)");
    });
    run("map_window256_S4" + tag, [&] {
      const gui::AttentionMap ref = cpuMap(win);
      const MapDiff dd = diff(ref, gpuMap(win, win, true));
      // The causal forward's Q/K mapped under the window rule: what a capture without the rule
      // in the layers below would give.
      const MapDiff wrong = diff(ref, gpuMap(causal, win, true));
      // Layer 18 head 8 is a sink head (nearly all its mass on key 0, which the window keeps):
      // its map hardly depends on the window, so only the spreading head 10/3 shows the rule.
      const bool spreads = layer == 10;
      check(dd.l1 <= 0.05 && dd.alpha <= 0.05 && (!spreads || wrong.l1 > 4 * dd.l1),
            "map_window256_S4" + tag,
            str(dd) + "; causal capture against it: " + str(wrong) +
                " (gates: L1 <= 0.05, |d alpha| <= 0.05" +
                (spreads ? ", causal L1 > 4x)" : ")"));
    });
  }

  // 1b. The same captured Q/K mapped on the GPU (headMapOnGpu, what RunExecutor uses for a
  //     GPU capture) against the host's pooling of them: float rounding only.
  run("gpu_pooling", [&] {
    gui::HeadMapOptions o;
    o.layer = 10;
    o.head = 3;
    o.maxCells = 256;
    o.sinkCount = 4;
    o.window = 256;
    gpu->reset();
    QkvCaptureRequest r;
    r.layer = o.layer;
    r.sink_count = o.sinkCount;
    r.window = o.window;
    r.stop_after_layer = true;
    gpu->request_qkv_capture(r);
    std::vector<float> last, q, k;
    gpu->forward(ids, LogitsMode::kLast, last);
    headQK(gpu->qkv_capture(), o.head, group, q, k);
    gpu->request_qkv_capture({});
    setLayerAttention(o, c, &model->weights());
    const gui::AttentionMap host = gui::headMapFromQK(q.data(), k.data(), n, d, scale, o, &pool);
    const gui::AttentionMap dev = gui::headMapOnGpu(q.data(), k.data(), n, d, scale, o);
    double cell = 0, cellMax = 0, alpha = 0, alphaMax = 0;
    for (size_t i = 0; i < host.cells.size() && host.cells.size() == dev.cells.size(); ++i) {
      cellMax = std::max(cellMax, double(host.cells[i]));
      cell = std::max(cell, std::fabs(double(host.cells[i]) - dev.cells[i]));
    }
    for (size_t i = 0; i < host.alpha.size() && host.alpha.size() == dev.alpha.size(); ++i) {
      alphaMax = std::max(alphaMax, host.alpha[i]);
      alpha = std::max(alpha, std::fabs(host.alpha[i] - dev.alpha[i]));
    }
    char b[160];
    std::snprintf(b, sizeof b, "max |d cell| %.2e of max cell %.3g, max |d alpha| %.2e of max %.3g "
                  "(gates: 1e-5 of the maxima)", cell, cellMax, alpha, alphaMax);
    check(host.cells.size() == dev.cells.size() && host.alpha.size() == dev.alpha.size() &&
              cell <= 1e-5 * cellMax && alpha <= 1e-5 * alphaMax,
          "gpu_pooling_L10H3_window256_S4", b);
  });

  // 2. The capture's prefill with the window rule, to the end: its last logits against the CPU
  //    backend's sliding-window cache (original positions, dense).
  run("logits_window256_S4", [&] {
    gpu->reset();
    QkvCaptureRequest r;
    r.layer = 5;
    r.sink_count = 4;
    r.window = 256;
    gpu->request_qkv_capture(r);
    std::vector<float> got, want, causal;
    gpu->forward(ids, LogitsMode::kLast, got);
    gpu->request_qkv_capture({});
    BackendOptions o;
    o.cache.strategy = CacheStrategy::kSlidingWindow;
    o.cache.window_size = 256;
    o.cache.sink_keep_count = 4;
    o.cache.position_mode = PositionMode::kOriginal;
    std::unique_ptr<Backend> cpu = make_backend(model, o, BackendKind::kCpu);
    cpu->forward(ids, LogitsMode::kLast, want);
    gpu->reset();
    gpu->forward(ids, LogitsMode::kLast, causal);
    const gpu_test::Agreement a = gpu_test::compare(want, got, c.n_vocab);
    const gpu_test::Agreement w = gpu_test::compare(want, causal, c.n_vocab);
    check(a.finite && a.mean_kl <= 2e-3 && a.top1 >= 1.0 && w.mean_kl > 10 * a.mean_kl,
          "logits_window256_S4",
          a.str() + "; causal GPU run against it: " + w.str() +
              " (gates: KL <= 2e-3, same top-1, causal KL > 10x)");
  });

  // The capture of one prefill of the text from a fresh cache under `r`; its last logits in
  // *last.
  auto captureOf = [&](const QkvCaptureRequest& r, std::vector<float>* last) {
    gpu->reset();
    gpu->request_qkv_capture(r);
    gpu->forward(ids, LogitsMode::kLast, *last);
    QkvCapture cap = gpu->qkv_capture();
    gpu->request_qkv_capture({});
    return cap;
  };

  // 3. stop_after_layer: the same Q/K as a whole forward, no logits.
  run("stop_after_layer", [&] {
    for (int window : {0, 256}) {
      QkvCaptureRequest r;
      r.layer = 12;
      r.sink_count = window ? 4 : 0;
      r.window = window;
      std::vector<float> whole, early;
      const QkvCapture a = captureOf(r, &whole);
      r.stop_after_layer = true;
      const QkvCapture b = captureOf(r, &early);
      const bool nan = std::all_of(early.begin(), early.end(), [](float x) { return std::isnan(x); });
      check(a.n_q == n && a.q == b.q && a.k == b.k && a.v == b.v && nan &&
                std::all_of(whole.begin(), whole.end(), [](float x) { return std::isfinite(x); }),
            "stop_after_layer_W" + std::to_string(window),
            "Q/K/V " + std::string(a.q == b.q && a.k == b.k && a.v == b.v ? "equal" : "DIFFER") +
                ", early logits " + (nan ? "NaN" : "NOT NaN"));
    }
  });

  // 3b. A one-head capture (QkvCaptureRequest::head, what RunExecutor asks for): that head's q
  //     and its KV head's k, bit for bit the all-heads capture's slices, and no v.
  run("one_head", [&] {
    for (int window : {0, 256})
      for (int head : {3, c.n_head - 1}) {
        QkvCaptureRequest r;
        r.layer = 12;
        r.sink_count = window ? 4 : 0;
        r.window = window;
        r.stop_after_layer = true;
        std::vector<float> last;
        const QkvCapture all = captureOf(r, &last);
        r.head = head;
        const QkvCapture one = captureOf(r, &last);
        const int kvh = head / group;
        size_t qDiff = 0, kDiff = 0;
        const bool shaped = one.head == head && one.n_head == 1 && one.n_head_kv == 1 &&
                            one.n_q == all.n_q && one.n_kv == all.n_kv && one.v.empty() &&
                            one.q.size() == size_t(one.n_q) * d &&
                            one.k.size() == size_t(one.n_kv) * d && all.head == -1;
        if (shaped) {
          for (int i = 0; i < one.n_q; ++i)
            for (int j = 0; j < d; ++j)
              qDiff += one.q[size_t(i) * d + j] != all.q[(size_t(i) * c.n_head + head) * d + j];
          for (int i = 0; i < one.n_kv; ++i)
            for (int j = 0; j < d; ++j)
              kDiff += one.k[size_t(i) * d + j] != all.k[(size_t(i) * c.n_head_kv + kvh) * d + j];
        }
        check(shaped && qDiff == 0 && kDiff == 0,
              "one_head_H" + std::to_string(head) + "_W" + std::to_string(window),
              std::string(shaped ? "layout (n, d), no v" : "WRONG LAYOUT") + "; q values differing " +
                  std::to_string(qDiff) + ", k " + std::to_string(kDiff) + " (gate: 0, bit for bit)");
      }
  });

  // 4. Bad requests name what is wrong.
  run("bad_requests", [&] {
    std::string msg;
    try {
      QkvCaptureRequest r;
      r.layer = 3;
      r.window = -1;
      gpu->request_qkv_capture(r);
    } catch (const BackendError& e) {
      msg = e.what();
    }
    check(msg.find("window") != std::string::npos, "bad_request_window", msg);
    msg.clear();
    try {
      QkvCaptureRequest r;
      r.layer = 3;
      r.head = c.n_head;
      gpu->request_qkv_capture(r);
    } catch (const BackendError& e) {
      msg = e.what();
    }
    check(msg.find("head " + std::to_string(c.n_head)) != std::string::npos, "bad_request_head", msg);
    // A quantized cache holds codes, not the bf16 keys a capture copies: refused, causal too.
    msg.clear();
    BackendOptions qo;
    qo.cache.quantization.enabled = true;
    std::unique_ptr<Backend> quant = make_backend(model, qo, BackendKind::kCuda);
    try {
      QkvCaptureRequest r;
      r.layer = 3;
      quant->request_qkv_capture(r);
    } catch (const BackendError& e) {
      msg = e.what();
    }
    check(msg.find("unquantized") != std::string::npos, "bad_request_quantized_cache", msg);
  });
  return gpu_test::finish_checks();
}
