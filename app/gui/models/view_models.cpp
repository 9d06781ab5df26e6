// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/view_models.h"

#include <algorithm>
#include <limits>

#include "app/gui/models/token_list_model.h"
#include "profiler/chrome_trace.h"

namespace sinkscope::gui {

SinkReport sinkReportOf(const RunResult& r) {
  if (r.sinkPositions <= 0 || r.nLayer <= 0 || r.nHead <= 0 ||
      r.sinkAlpha.size() != size_t(r.nLayer) * r.nHead * size_t(r.sinkPositions))
    return {};
  // The counts decide which positions are judged, as in the run's own analyze_sinks.
  const bool counts = r.sinkQueries.size() == size_t(r.sinkPositions);
  return analyze_alpha(r.nLayer, r.nHead, r.sinkPositions, r.sinkAlpha, {},
                       counts ? r.sinkQueries : std::vector<int64_t>{});
}

StrongestSink strongestSink(const SinkReport& r) {
  StrongestSink best;
  // Layer-major order with a strict comparison: the first of equal scores stays.
  for (int l = 0; l < r.n_layer; ++l)
    for (int h = 0; h < r.n_head; ++h)
      for (int k = 0; k < r.n_pos; ++k) {
        if (!r.judged(k)) continue;
        const double a = r.alpha_at(l, h, k);
        if (!best.valid() || a > best.alpha) best = {l, h, k, a};
      }
  return best;
}

namespace {

QString positions(const QVector<int>& v, int max = 12) {
  QStringList s;
  for (int i = 0; i < std::min<int>(max, int(v.size())); ++i) s << QString::number(v[i]);
  if (v.size() > max) s << QStringLiteral("...");
  return s.join(QStringLiteral(", "));
}

}  // namespace

// --- attention map ---------------------------------------------------------------------------
void AttentionMapView::setResult(const RunResultPtr& r) {
  m_result = r;
  Q_EMIT changed();
}

QVector<int> AttentionMapView::headSinkColumns(int layer, int head) const {
  QVector<int> cols;
  if (!m_result) return cols;
  const AttentionMap& m = m_result->map;
  if (layer == m.layer && head == m.head && !m.alpha.empty()) {
    for (size_t k = 0; k < m.alpha.size() && int(k) < m.nTokens; ++k)
      if (m.alpha[k] > SinksView::kEpsilon) cols.push_back(int(k));
    return cols;
  }
  for (int k : head_sinks(sinkReportOf(*m_result), layer, head))
    if (m.nTokens <= 0 || k < m.nTokens) cols.push_back(k);
  return cols;
}

QVector<int> AttentionMapView::keptSinkColumns() const {
  QVector<int> cols;
  if (!m_result || !m_result->request.cache.windowed()) return cols;
  const int n = m_result->map.nTokens > 0 ? std::min(m_result->sinkKeep, m_result->map.nTokens)
                                          : m_result->sinkKeep;
  for (int k = 0; k < n; ++k) cols.push_back(k);
  return cols;
}

QString AttentionMapView::tokenLabel(int position) const {
  if (!m_result || position < 0 || size_t(position) >= m_result->promptPieces.size()) return {};
  return QStringLiteral("%1 '%2'").arg(position).arg(
      TokenListModel::visiblePiece(m_result->promptPieces[size_t(position)]));
}

// --- sinks ---------------------------------------------------------------------------------------
void SinksView::setResult(const RunResultPtr& r) {
  m_result = r;
  rebuild();
}

void SinksView::pickHead(int layer, int head) {
  m_pickLayer = layer;
  m_pickHead = head;
  if (m_result) rebuild();
}

void SinksView::rebuild() {
  const RunResultPtr& r = m_result;
  m_alpha.clear();
  m_detectorAlpha = false;
  m_headSinks.clear();
  m_firstMass = {};
  m_headText.clear();
  m_verdict.clear();
  m_recommendation.clear();
  if (r) {
    m_promptKeys = int(r->promptTokens.size());
    const SinkReport rep = r->sinkNote.empty() ? sinkReportOf(*r) : SinkReport{};
    const bool picked =
        m_pickLayer >= 0 && m_pickHead >= 0 && m_pickLayer < r->nLayer && m_pickHead < r->nHead;
    const StrongestSink top = strongestSink(rep);
    m_source = picked        ? HeadSource::kPicked
               : top.valid() ? HeadSource::kStrongest
                             : HeadSource::kMap;
    m_layer = picked ? m_pickLayer : top.valid() ? top.layer : r->map.layer;
    m_head = picked ? m_pickHead : top.valid() ? top.head : r->map.head;
    const bool mapHead = m_layer == r->map.layer && m_head == r->map.head && !r->map.alpha.empty();
    const bool detected = rep.n_pos > 0 && m_layer >= 0 && m_head >= 0 && m_layer < rep.n_layer &&
                          m_head < rep.n_head;
    if (mapHead || !detected) {
      // The map's head, with its own alpha over every prompt key; also a picked head that the
      // detector has no alpha for (a backend without the probe).
      if (!mapHead) m_source = HeadSource::kMap;
      m_layer = r->map.layer;
      m_head = r->map.head;
      m_alpha = r->map.alpha;
      for (size_t k = 0; k < m_alpha.size(); ++k)
        if (m_alpha[k] > kEpsilon) m_headSinks.push_back(int(k));
    } else {
      // Another head: the detector's alpha over its first positions.
      m_detectorAlpha = true;
      for (int k = 0; k < rep.n_pos; ++k) m_alpha.push_back(rep.alpha_at(m_layer, m_head, k));
      for (int k : head_sinks(rep, m_layer, m_head)) m_headSinks.push_back(k);
    }
    if (!r->firstMass.empty()) {
      m_firstMass.layers = r->nLayer;
      m_firstMass.heads = r->nHead;
      m_firstMass.values = r->firstMass;
    }
    m_firstKeys = std::max(1, r->sinkKeep > 0 ? r->sinkKeep : 4);
    QString head = tr("Head L%1 H%2").arg(m_layer).arg(m_head);
    if (m_source == HeadSource::kStrongest)
      head = (top.alpha > kEpsilon
                  ? tr("%1, the strongest sink of this run").arg(head)
                  : tr("%1, the strongest head of this run (none has a sink)").arg(head)) +
             tr(" (pick a head in a heatmap or the map to see another)");
    m_headText = m_headSinks.isEmpty()
                     ? tr("%1: no sink (no key with alpha_k > %2).").arg(head).arg(kEpsilon)
                     : tr("%1: sinks (alpha_k > %2) at %3.")
                           .arg(head)
                           .arg(kEpsilon)
                           .arg(positions(m_headSinks));
    // A learned sink (gpt-oss) is named next to the emergent ones: it is a logit of the head's
    // own, not a key, so it has no position.
    if (const size_t lh = size_t(m_layer) * size_t(std::max(1, r->nHead)) + size_t(m_head);
        m_layer >= 0 && m_head >= 0 && lh < r->learnedSinkMass.size())
      m_headText += QLatin1Char(' ') +
                    tr("Learned sink: %1% of each query's mass.")
                        .arg(r->learnedSinkMass[lh] * 100, 0, 'f', 1);
    if (!r->sinkNote.empty()) {
      m_verdict = tr("Sink detection unavailable: %1").arg(QString::fromStdString(r->sinkNote));
    } else if (rep.n_pos > 0) {
      m_verdict = tr("Model (%1 heads, first %2 keys): %3.")
                      .arg(rep.n_layer * rep.n_head).arg(rep.n_pos)
                      .arg(QString::fromStdString(sink_verdict(rep)));
      m_recommendation = QString::fromStdString(sink_recommendation(rep));
      m_recommendation[0] = m_recommendation[0].toUpper();
      if (r->request.cache.windowed())
        m_recommendation += QLatin1Char('\n') + tr("Current: %1")
                                                   .arg(QString::fromStdString(describe_sink_keep(rep, r->sinkKeep)));
      else
        m_recommendation += QLatin1Char('\n') + tr("The sliding window is off: the cache keeps every key, so S "
                                                    "has no effect.");
    }
  }
  Q_EMIT changed();
}

// --- sparsity ------------------------------------------------------------------------------------
void SparsityView::setResult(const RunResultPtr& r) {
  m_partial = r && r->partial;
  m_layersReached = 0;
  m_prefill = m_decode = {};
  m_layerPrefill.clear();
  m_layerDecode.clear();
  m_summary.clear();
  if (r && r->probes.n_layer > 0) {
    const int L = r->probes.n_layer, H = r->probes.n_head;
    m_prefill.layers = m_decode.layers = L;
    m_prefill.heads = m_decode.heads = H;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    int reached = 0;  // layers with tile counts (a partial result: the prefill's layers so far)
    for (int l = 0; l < L; ++l) {
      TileCounts lp, ld;
      for (int h = 0; h < H; ++h) {
        lp.add(r->probesPrefill.prefill[size_t(l) * H + h]);
        ld.add(r->probes.decode[size_t(l) * H + h]);
      }
      // Layers a partial result has not reached yet are "no data" (NaN: drawn grey), not 0 %.
      const bool pending = r->partial && lp.visited == 0;
      reached += !pending;
      for (int h = 0; h < H; ++h) {
        const TileCounts& p = r->probesPrefill.prefill[size_t(l) * H + h];
        const TileCounts& d = r->probes.decode[size_t(l) * H + h];
        m_prefill.values.push_back(pending ? nan : p.sparsity());
        m_decode.values.push_back(pending ? nan : d.sparsity());
      }
      m_layerPrefill.push_back(pending ? nan : lp.sparsity());
      m_layerDecode.push_back(pending ? nan : ld.sparsity());
    }
    m_layersReached = reached;
    const TileCounts tp = r->probesPrefill.total(false), td = r->probes.total(true);
    m_summary = tr("Skipped tiles: prefill %1% of %2 visible, decode %3% of %4 (lambda %5 / %6, "
                   "block %7)")
                    .arg(tp.sparsity() * 100, 0, 'f', 1).arg(tp.visited)
                    .arg(td.sparsity() * 100, 0, 'f', 1).arg(td.visited)
                    .arg(r->request.attention.threshold_prefill, 0, 'g', 3)
                    .arg(r->request.attention.threshold_decode, 0, 'g', 3)
                    .arg(r->request.attention.block_size);
    if (r->request.attention.type != AttentionType::kDynamicSparse)
      m_summary += tr(" -- sparse attention is off, so nothing is skipped");
    else if (const DecodePathStats& d = r->decodePath; d.chooses && d.dense_steps > 0)
      m_summary += tr(". Decode: %1 of %2 steps ran the dense kernels, faster here (sparse "
                      "predicted %3x the dense time at %4 cached tokens with %5% skipped); the "
                      "decode figure counts the %6 sparse steps")
                       .arg(d.dense_steps).arg(d.dense_steps + d.sparse_steps)
                       .arg(d.predicted_ratio, 0, 'f', 2).arg(d.last_kv_len)
                       .arg(d.skipped_estimate * 100, 0, 'f', 0).arg(d.sparse_steps);
    // A chunked prefill (a sliding window) reaches every layer with its first chunk: its counts
    // then grow chunk by chunk rather than layer by layer.
    if (r->partial && reached < L)
      m_summary = tr("Updating: prefill at %1% (%2 of %3 layers in; the rest grey). %4")
                      .arg(int(r->partialFraction * 100)).arg(reached).arg(L).arg(m_summary);
    else if (r->partial)
      m_summary = tr("Updating: prefill at %1% (every layer has its first chunks in; the counts "
                     "grow with each chunk). %2")
                      .arg(int(r->partialFraction * 100)).arg(m_summary);
  }
  Q_EMIT changed();
}

// --- timeline -------------------------------------------------------------------------------------
TimelineView::TimelineView(QObject* parent) : QObject(parent), m_summary(this) {}

void TimelineView::setResult(const RunResultPtr& r) {
  m_timeline = r ? r->timeline : nullptr;
  m_summary.setTimeline(m_timeline);
  Q_EMIT changed();
}

QString TimelineView::exportTrace(const QString& path) const {
  if (!m_timeline) return tr("no timeline yet: run first");
  const prof::Status s = prof::write_chrome_trace(*m_timeline, path.toStdString());
  return s.ok ? QString() : QString::fromStdString(s.message);
}

// --- compare ---------------------------------------------------------------------------------------
void CompareView::setResult(const RunResultPtr& r) {
  m_result = r;
  Q_EMIT changed();
}

QString CompareView::metricsText() const {
  if (!hasData()) return tr("No comparison (enable \"compare with dense\").");
  const Comparison& c = m_result->compare;
  QString div = c.firstDivergence < 0 ? tr("none") : tr("generated token %1").arg(c.firstDivergence);
  return tr("KL(dense||variant) mean %1 nats | top-1 agreement %2% | perplexity on the prompt "
            "%3 -> %4 (%5%6%) | ROUGE-L F1 %7 | first divergence: %8%9")
      .arg(c.klMean, 0, 'g', 3).arg(c.top1Agreement * 100, 0, 'f', 1)
      .arg(c.pplDense, 0, 'f', 3).arg(c.pplVariant, 0, 'f', 3)
      .arg(c.pplDeltaPct >= 0 ? QStringLiteral("+") : QString()).arg(c.pplDeltaPct, 0, 'f', 2)
      .arg(c.rougeL, 0, 'f', 3).arg(div)
      .arg(c.baselineReused ? tr(" (dense baseline reused)") : QString());
}

}  // namespace sinkscope::gui
