// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/view_models.h"

#include <algorithm>
#include <limits>

#include "app/gui/models/token_list_model.h"
#include "profiler/chrome_trace.h"

namespace sinkscope::gui {

// --- attention map ---------------------------------------------------------------------------
void AttentionMapView::setResult(const RunResultPtr& r) {
  m_result = r;
  Q_EMIT changed();
}

QVector<int> AttentionMapView::sinkColumns() const {
  QVector<int> cols;
  if (!m_result) return cols;
  for (int k = 0; k < std::min(m_result->sinkKeep, m_result->map.nTokens); ++k) cols.push_back(k);
  for (int k : m_result->flaggedSinks)
    if (k < m_result->map.nTokens && !cols.contains(k)) cols.push_back(k);
  return cols;
}

QString AttentionMapView::tokenLabel(int position) const {
  if (!m_result || position < 0 || size_t(position) >= m_result->promptPieces.size()) return {};
  return QStringLiteral("%1 '%2'").arg(position).arg(
      TokenListModel::visiblePiece(m_result->promptPieces[size_t(position)]));
}

// --- sinks ---------------------------------------------------------------------------------------
void SinksView::setResult(const RunResultPtr& r) {
  m_alpha.clear();
  m_firstMass = {};
  m_text.clear();
  if (r) {
    m_alpha = r->map.alpha;
    m_layer = r->map.layer;
    m_head = r->map.head;
    if (!r->firstMass.empty()) {
      m_firstMass.layers = r->nLayer;
      m_firstMass.heads = r->nHead;
      m_firstMass.values = r->firstMass;
    }
    m_firstKeys = std::max(1, r->sinkKeep > 0 ? r->sinkKeep : 4);
    QStringList sinksHere;
    for (size_t k = 0; k < m_alpha.size(); ++k)
      if (m_alpha[k] > kEpsilon) sinksHere << QString::number(k);
    m_text = tr("Head L%1 H%2: %3 key position(s) with alpha > %4%5.")
                 .arg(m_layer).arg(m_head).arg(sinksHere.size()).arg(kEpsilon)
                 .arg(sinksHere.isEmpty() ? QString() : QStringLiteral(" (") + sinksHere.mid(0, 8).join(QStringLiteral(", ")) + QStringLiteral(")"));
    if (!r->sinkNote.empty()) {
      m_text += QLatin1Char('\n') + tr("Sink detection unavailable: %1").arg(QString::fromStdString(r->sinkNote));
    } else {
      QStringList flagged;
      for (int k : r->flaggedSinks) flagged << QString::number(k);
      m_text += QLatin1Char('\n') +
                tr("Detector over %1 positions x %2 heads: flagged %3 -> recommended sink_keep_count = %4 "
                   "(current S = %5).")
                    .arg(r->sinkPositions).arg(r->nLayer * r->nHead)
                    .arg(flagged.isEmpty() ? tr("none") : flagged.join(QStringLiteral(", ")))
                    .arg(r->recommendedSinkKeep).arg(r->sinkKeep);
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
    if (r->partial)
      m_summary = tr("Updating: prefill at %1% (%2 of %3 layers in; the rest grey). %4")
                      .arg(int(r->partialFraction * 100)).arg(reached).arg(L).arg(m_summary);
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
