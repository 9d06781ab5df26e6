// SPDX-License-Identifier: Apache-2.0
// The quality gates of one validation (engine/config/config.h GateReport) as a table: gate, PASS/FAIL,
// the measured value, the bound it is held to, and the reason.
#pragma once

#include <QAbstractTableModel>

#include "engine/config/config.h"

namespace sinkscope::gui {

class GateReportModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Gate, Result, Value, Limit, Reason, ColumnCount };
  using QAbstractTableModel::QAbstractTableModel;
  void setReport(const GateReport& report);
  void clear() { setReport({}); }
  const GateReport& report() const { return m_report; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  // DisplayRole: text; UserRole: the raw value (bool for Result, double for Value / Limit);
  // ForegroundRole: green / red on the Result column.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  GateReport m_report;
};

}  // namespace sinkscope::gui
