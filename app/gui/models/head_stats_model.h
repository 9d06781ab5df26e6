// SPDX-License-Identifier: Apache-2.0
// Per-(layer, head) statistics of the last run: skip fraction in prefill and decode (from
// AttentionProbes), the attention mass on the first S keys, and the probes' mass-loss bound.
#pragma once

#include <QAbstractTableModel>

#include "app/gui/models/run_types.h"

namespace sinkscope::gui {

class HeadStatsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  // LearnedSink: the mean mass per query of the head's learned sink logit (gpt-oss), next to
  // the emergent sinks' FirstMass; empty cells for a model without learned sinks.
  enum Column { Layer, Head, SparsityPrefill, SparsityDecode, FirstMass, LearnedSink, MassBound, ColumnCount };
  // Each cell's number (int or double) for sorting; DisplayRole holds the formatted text.
  static constexpr int SortRole = Qt::UserRole;
  using QAbstractTableModel::QAbstractTableModel;
  void setResult(const RunResultPtr& r);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  RunResultPtr m_result;
};

}  // namespace sinkscope::gui
