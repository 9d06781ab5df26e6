// SPDX-License-Identifier: Apache-2.0
// The timeline's summary table: one row per kernel name (GPU runs) or per range name (CPU spans:
// layer, qkv, attention, mlp, ...), from profiler/timeline_stats.h.
#pragma once

#include <QAbstractTableModel>

#include <memory>
#include <vector>

#include "profiler/timeline_stats.h"

namespace sinkscope::gui {

class KernelSummaryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Name, Kind, Count, TotalMs, SelfMs, MeanUs, Share, ColumnCount };
  using QAbstractTableModel::QAbstractTableModel;
  void setTimeline(const std::shared_ptr<const prof::Timeline>& t);
  const std::vector<prof::NameStats>& rows() const { return m_rows; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  std::vector<prof::NameStats> m_rows;
};

}  // namespace sinkscope::gui
