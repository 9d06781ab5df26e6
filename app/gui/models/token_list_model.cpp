// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/token_list_model.h"

#include <QColor>

#include <algorithm>
#include <cmath>

#include "app/gui/models/view_models.h"

namespace sinkscope::gui {

QString TokenListModel::visiblePiece(const std::string& piece) {
  QString s = QString::fromUtf8(piece.data(), qsizetype(piece.size()));
  s.replace(QLatin1Char('\n'), QChar(0x23CE));
  s.replace(QLatin1Char('\t'), QChar(0x2192));
  s.replace(QLatin1Char('\r'), QString());
  return s;
}

void TokenListModel::setResult(const RunResultPtr& r) {
  beginResetModel();
  m_result = r;
  m_share.clear();
  m_flagged.clear();
  if (r) {
    SinkReport rep = sinkReportOf(*r);
    m_share = std::move(rep.head_share);
    m_flagged = std::move(rep.flagged);
  }
  endResetModel();
}

bool TokenListModel::flagged(int position) const {
  return std::binary_search(m_flagged.begin(), m_flagged.end(), position);
}

bool TokenListModel::kept(int position) const {
  return m_result && m_result->request.cache.windowed() && position < m_result->sinkKeep;
}

int TokenListModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() || !m_result) return 0;
  return int(m_result->promptTokens.size() + m_result->tokens.size());
}

QVariant TokenListModel::data(const QModelIndex& index, int role) const {
  if (!m_result || !checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const RunResult& r = *m_result;
  const int row = index.row();
  const int np = int(r.promptTokens.size());
  const bool gen = row >= np;
  const int g = row - np;
  switch (role) {
    case Qt::DisplayRole:
      return visiblePiece(gen ? r.pieces[size_t(g)] : r.promptPieces[size_t(row)]);
    case Qt::ToolTipRole: {
      QString t = QStringLiteral("position %1%2").arg(row).arg(gen ? QStringLiteral(" (generated)") : QString());
      if (!gen && size_t(row) < r.compare.klPerToken.size())
        t += QStringLiteral("\nKL(dense||variant) of the next token: %1 nats").arg(r.compare.klPerToken[size_t(row)], 0, 'g', 3);
      if (gen && size_t(g) < r.compare.densePieces.size())
        t += QStringLiteral("\ndense baseline: %1").arg(visiblePiece(r.compare.densePieces[size_t(g)]));
      if (!gen && size_t(row) < m_share.size() && m_share[size_t(row)] > 0) {
        const double pct = m_share[size_t(row)] * 100;
        t += QStringLiteral("\nsink in %1 % of heads%2")
                 .arg(pct < 1 ? QStringLiteral("<1") : QString::number(std::lround(pct)))
                 .arg(flagged(row) ? QStringLiteral(" (flagged by the detector)") : QString());
      }
      if (!gen && kept(row))
        t += QStringLiteral("\nkept by the cache (one of the first S = %1 keys)").arg(r.sinkKeep);
      return t;
    }
    case Qt::BackgroundRole: {
      const bool sink = !gen && flagged(row);
      if (data(index, DivergedRole).toBool()) return QColor(255, 190, 190);
      if (sink) return QColor(255, 230, 150);
      if (gen) return QColor(200, 225, 255);
      return {};
    }
    case PositionRole:
      return row;
    case GeneratedRole:
      return gen;
    case KlRole:
      return !gen && size_t(row) < r.compare.klPerToken.size() ? r.compare.klPerToken[size_t(row)] : 0.0;
    case DivergedRole:
      return gen && r.compare.available &&
             (size_t(g) >= r.compare.denseTokens.size() || r.compare.denseTokens[size_t(g)] != r.tokens[size_t(g)]);
    case DenseTextRole:
      return gen && size_t(g) < r.compare.densePieces.size() ? visiblePiece(r.compare.densePieces[size_t(g)]) : QString();
    case SinkRole:
      return !gen && flagged(row);
    case SinkShareRole:
      return !gen && size_t(row) < m_share.size() ? m_share[size_t(row)] : 0.0;
    case KeptRole:
      return !gen && kept(row);
    default:
      return {};
  }
}

QHash<int, QByteArray> TokenListModel::roleNames() const {
  QHash<int, QByteArray> n = QAbstractListModel::roleNames();
  n.insert(PositionRole, "position");
  n.insert(GeneratedRole, "generated");
  n.insert(KlRole, "kl");
  n.insert(DivergedRole, "diverged");
  n.insert(DenseTextRole, "denseText");
  n.insert(SinkRole, "sink");
  n.insert(SinkShareRole, "sinkShare");
  n.insert(KeptRole, "kept");
  return n;
}

}  // namespace sinkscope::gui
