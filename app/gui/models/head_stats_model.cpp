// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/head_stats_model.h"

namespace sinkscope::gui {

void HeadStatsModel::setResult(const RunResultPtr& r) {
  beginResetModel();
  m_result = r;
  endResetModel();
}

int HeadStatsModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() || !m_result) return 0;
  return int(m_result->probes.prefill.size());
}

int HeadStatsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant HeadStatsModel::data(const QModelIndex& index, int role) const {
  if (!m_result || !checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  if (role != Qt::DisplayRole && role != Qt::UserRole && role != Qt::TextAlignmentRole) return {};
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  const RunResult& r = *m_result;
  const int row = index.row();
  const int nh = std::max(1, r.probes.n_head);
  const bool raw = role == Qt::UserRole;
  auto pct = [raw](double v) -> QVariant { return raw ? QVariant(v) : QVariant(QString::number(v * 100, 'f', 1) + QLatin1Char('%')); };
  switch (index.column()) {
    case Layer: return row / nh;
    case Head: return row % nh;
    case SparsityPrefill: return pct(r.probesPrefill.prefill[size_t(row)].sparsity());
    case SparsityDecode: return pct(r.probes.decode[size_t(row)].sparsity());
    case FirstMass: return size_t(row) < r.firstMass.size() ? pct(r.firstMass[size_t(row)]) : QVariant();
    case LearnedSink:  // "none": the model has no learned sinks (no value to sort by)
      if (size_t(row) < r.learnedSinkMass.size()) return pct(r.learnedSinkMass[size_t(row)]);
      return raw ? QVariant() : QVariant(tr("none"));
    case MassBound: {
      const double v = r.probes.prefill[size_t(row)].mass_bound_max;
      return raw ? QVariant(v) : QVariant(QString::number(v, 'g', 3));
    }
    default: return {};
  }
}

QVariant HeadStatsModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  switch (section) {
    case Layer: return tr("Layer");
    case Head: return tr("Head");
    case SparsityPrefill: return tr("Skipped (prefill)");
    case SparsityDecode: return tr("Skipped (decode)");
    case FirstMass: return tr("Mass on first S");
    case LearnedSink: return tr("Learned sink mass");
    case MassBound: return tr("Lost mass bound");
    default: return {};
  }
}

}  // namespace sinkscope::gui
