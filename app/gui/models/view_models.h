// SPDX-License-Identifier: Apache-2.0
// One small view-model per dock (docs/architecture.md, design principle 3): each takes the run's immutable snapshot and
// derives exactly what its panel draws, so panels stay thin and the logic is testable without
// widgets. Every view-model emits changed() after a new snapshot and says hasData().
#pragma once

#include <QObject>
#include <QString>
#include <QVector>

#include "app/gui/models/kernel_summary_model.h"
#include "app/gui/models/run_types.h"
#include "engine/eval/sinks.h"

namespace sinkscope::gui {

// The sink detector's report of a run, rebuilt from its alpha (engine/eval/sinks.h); empty (no
// positions) when the run has no column mass or the sizes disagree.
SinkReport sinkReportOf(const RunResult& r);

// The head with the strongest sink of a run: the largest alpha_k over the positions the report
// judges (SinkReport::judged); a tie goes to the lowest layer, then the lowest head. Invalid
// (layer -1) for a report without positions.
struct StrongestSink {
  int layer = -1, head = -1, position = -1;
  double alpha = 0;
  bool valid() const { return layer >= 0 && head >= 0; }
};
StrongestSink strongestSink(const SinkReport& r);

// A layers x heads grid of values in [0, 1] for the heatmaps.
struct HeadGrid {
  int layers = 0, heads = 0;
  std::vector<double> values;  // (layer, head)
  double at(int l, int h) const { return values[size_t(l) * heads + h]; }
  bool empty() const { return values.empty(); }
};

class AttentionMapView : public QObject {
  Q_OBJECT
 public:
  using QObject::QObject;
  void setResult(const RunResultPtr& r);
  bool hasData() const { return m_result && !m_result->map.cells.empty(); }
  const AttentionMap& map() const { return m_result->map; }
  const SkipMask& skipMask() const { return m_result->probes.mask; }
  int blockSize() const { return m_result->request.attention.block_size; }
  // The sinks of one (layer, head): keys with alpha_k > epsilon (docs/architecture.md, "Sink
  // detection"). The map's own head reads the map's full-resolution alpha (every prompt key);
  // another head reads the detector's alpha over its first positions.
  QVector<int> headSinkColumns(int layer, int head) const;
  // The first S keys the cache keeps, only while a sliding window makes S matter; else empty.
  QVector<int> keptSinkColumns() const;
  // "i 'piece'" for a token position of the prompt.
  QString tokenLabel(int position) const;
  const RunResultPtr& result() const { return m_result; }
 Q_SIGNALS:
  void changed();
 private:
  RunResultPtr m_result;
};

class SinksView : public QObject {
  Q_OBJECT
 public:
  using QObject::QObject;
  void setResult(const RunResultPtr& r);
  bool hasData() const { return !m_alpha.empty(); }
  // Where the shown head comes from: picked by the user (pickHead), else the run's strongest
  // sink, else (a run without sink detection) the map's head.
  enum class HeadSource { kMap, kStrongest, kPicked };
  // The user picked (layer, head) for the chart: it is shown at once and after every later run
  // (a head the run's model lacks gives way to the strongest sink for that run).
  void pickHead(int layer, int head);
  bool headPicked() const { return m_pickLayer >= 0; }
  HeadSource headSource() const { return m_source; }
  // alpha_k of the shown head: the map's full-resolution alpha (every prompt key) when it is the
  // map's head, else the sink detector's over its first positions (detectorAlpha()).
  const std::vector<double>& alpha() const { return m_alpha; }
  bool detectorAlpha() const { return m_detectorAlpha; }
  int promptKeys() const { return m_promptKeys; }
  const QVector<int>& headSinks() const { return m_headSinks; }  // its keys with alpha > epsilon
  const HeadGrid& firstMass() const { return m_firstMass; }      // mass on the first S keys
  int firstMassKeys() const { return m_firstKeys; }
  int layer() const { return m_layer; }
  int head() const { return m_head; }
  // "Head L18 H8: sinks (alpha_k > 0.3) at 0, 5.", with ", the strongest sink of this run" and
  // how to see another head after the head while that is why it is shown.
  const QString& headText() const { return m_headText; }
  // The model-level verdict: each flagged position with its share of heads.
  const QString& verdict() const { return m_verdict; }
  // The recommended S and, while a window is on, the current S: which flagged positions each
  // keeps and which not, and why.
  const QString& recommendation() const { return m_recommendation; }
  static constexpr double kEpsilon = SinkCriteria{}.epsilon;  // the contract's sink threshold
 Q_SIGNALS:
  void changed();
 private:
  void rebuild();
  RunResultPtr m_result;
  int m_pickLayer = -1, m_pickHead = -1;
  HeadSource m_source = HeadSource::kMap;
  std::vector<double> m_alpha;
  bool m_detectorAlpha = false;
  int m_promptKeys = 0;
  QVector<int> m_headSinks;
  HeadGrid m_firstMass;
  int m_firstKeys = 0, m_layer = 0, m_head = 0;
  QString m_headText, m_verdict, m_recommendation;
};

class SparsityView : public QObject {
  Q_OBJECT
 public:
  using QObject::QObject;
  void setResult(const RunResultPtr& r);
  bool hasData() const { return !m_prefill.empty(); }
  const HeadGrid& prefill() const { return m_prefill; }
  const HeadGrid& decode() const { return m_decode; }
  const std::vector<double>& layerPrefill() const { return m_layerPrefill; }
  const std::vector<double>& layerDecode() const { return m_layerDecode; }
  const QString& summary() const { return m_summary; }
  // A partial result (the run still going): layers not reached yet hold NaN.
  bool isPartial() const { return m_partial; }
  int layersReached() const { return m_layersReached; }
 Q_SIGNALS:
  void changed();
 private:
  bool m_partial = false;
  int m_layersReached = 0;
  HeadGrid m_prefill, m_decode;
  std::vector<double> m_layerPrefill, m_layerDecode;
  QString m_summary;
};

class TimelineView : public QObject {
  Q_OBJECT
 public:
  explicit TimelineView(QObject* parent = nullptr);
  void setResult(const RunResultPtr& r);
  bool hasData() const { return m_timeline && m_timeline->event_count() > 0; }
  const std::shared_ptr<const prof::Timeline>& timeline() const { return m_timeline; }
  KernelSummaryModel* summary() { return &m_summary; }
  // Writes the Chrome trace atomically; returns "" or the error.
  QString exportTrace(const QString& path) const;
 Q_SIGNALS:
  void changed();
 private:
  std::shared_ptr<const prof::Timeline> m_timeline;
  KernelSummaryModel m_summary;
};

class CompareView : public QObject {
  Q_OBJECT
 public:
  using QObject::QObject;
  void setResult(const RunResultPtr& r);
  bool hasData() const { return m_result && m_result->compare.available; }
  const Comparison& comparison() const { return m_result->compare; }
  const RunResultPtr& result() const { return m_result; }
  QString metricsText() const;  // KL, top-1, perplexity delta, ROUGE-L, first divergence
 Q_SIGNALS:
  void changed();
 private:
  RunResultPtr m_result;
};

}  // namespace sinkscope::gui
