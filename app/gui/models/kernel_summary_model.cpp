// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/kernel_summary_model.h"

namespace sinkscope::gui {

void KernelSummaryModel::setTimeline(const std::shared_ptr<const prof::Timeline>& t) {
  beginResetModel();
  m_rows.clear();
  if (t) {
    m_rows = prof::kernel_stats(*t);
    for (auto& s : prof::transfer_stats(*t)) m_rows.push_back(std::move(s));
    if (m_rows.empty()) m_rows = prof::range_stats(*t);
  }
  endResetModel();
}

int KernelSummaryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_rows.size());
}

int KernelSummaryModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant KernelSummaryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const prof::NameStats& s = m_rows[size_t(index.row())];
  if (role == Qt::TextAlignmentRole)
    return index.column() <= Kind ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::UserRole) {  // raw values for sorting
    switch (index.column()) {
      case Name: return QString::fromStdString(s.name);
      case Kind: return QString::fromLatin1(prof::event_kind_name(s.kind));
      case Count: return qulonglong(s.count);
      case TotalMs: return double(s.total_ns) * 1e-6;
      case SelfMs: return double(s.self_ns) * 1e-6;
      case MeanUs: return s.mean_ns() * 1e-3;
      case Share: return s.share;
      default: return {};
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Name: return QString::fromStdString(s.name);
    case Kind: return QString::fromLatin1(prof::event_kind_name(s.kind));
    case Count: return qulonglong(s.count);
    case TotalMs: return QString::number(double(s.total_ns) * 1e-6, 'f', 3);
    case SelfMs: return QString::number(double(s.self_ns) * 1e-6, 'f', 3);
    case MeanUs: return QString::number(s.mean_ns() * 1e-3, 'f', 1);
    case Share: return QString::number(s.share * 100, 'f', 1) + QLatin1Char('%');
    default: return {};
  }
}

QVariant KernelSummaryModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  static const char* names[] = {"Name", "Kind", "Count", "Total ms", "Self ms", "Mean µs", "Share"};
  return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

}  // namespace sinkscope::gui
