// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/gate_report_model.h"

#include <QBrush>
#include <QColor>

#include <cmath>

namespace sinkscope::gui {

void GateReportModel::setReport(const GateReport& report) {
  beginResetModel();
  m_report = report;
  endResetModel();
}

int GateReportModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_report.gates.size());
}

int GateReportModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant GateReportModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const GateOutcome& g = m_report.gates[size_t(index.row())];
  auto number = [role](double v) -> QVariant {
    if (role == Qt::UserRole) return v;
    return std::isnan(v) ? QStringLiteral("-") : QString::number(v, 'g', 5);
  };
  if (role == Qt::ForegroundRole)
    return index.column() == Result
               ? QVariant(QBrush(g.passed ? QColor(0x1b, 0x7f, 0x2a) : QColor(0xb0, 0x00, 0x20)))
               : QVariant();
  if (role == Qt::TextAlignmentRole)
    return index.column() == Value || index.column() == Limit
               ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter))
               : QVariant();
  if (role != Qt::DisplayRole && role != Qt::UserRole && role != Qt::ToolTipRole) return {};
  switch (index.column()) {
    case Gate:
      return QString::fromStdString(g.name);
    case Result:
      if (role == Qt::UserRole) return g.passed;
      return g.passed ? tr("PASS") : tr("FAIL");
    case Value:
      return number(g.value);
    case Limit:
      return number(g.limit);
    case Reason:
      return QString::fromStdString(g.reason);
    default:
      return {};
  }
}

QVariant GateReportModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole)
    return QAbstractTableModel::headerData(section, o, role);
  switch (section) {
    case Gate:
      return tr("Gate");
    case Result:
      return tr("Result");
    case Value:
      return tr("Measured");
    case Limit:
      return tr("Bound");
    case Reason:
      return tr("Reason");
    default:
      return {};
  }
}

}  // namespace sinkscope::gui
