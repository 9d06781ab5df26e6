// SPDX-License-Identifier: Apache-2.0
// The token strip: prompt tokens then generated tokens of the last run, one row each. Rows map
// to rows/columns of the attention map (prompt positions); generated rows carry the dense
// baseline's token at the same step and whether they diverge. Only positions the sink detector
// flags are marked as sinks, with their share of heads (docs/architecture.md, "Sink
// detection"); the kept S is named in the tooltip, not marked as a sink.
#pragma once

#include <QAbstractListModel>

#include <vector>

#include "app/gui/models/run_types.h"

namespace sinkscope::gui {

class TokenListModel : public QAbstractListModel {
  Q_OBJECT
 public:
  enum Role {
    PositionRole = Qt::UserRole + 1,  // int: position in the sequence
    GeneratedRole,                    // bool
    KlRole,                           // double: KL(dense || variant) predicting the next token
    DivergedRole,                     // bool: a generated token that differs from the dense one
    DenseTextRole,                    // QString: the dense baseline's token at this step
    SinkRole,       // bool: a prompt position the detector flags (a sink in >= 10 % of heads)
    SinkShareRole,  // double: share of (layer, head) pairs where the position is a sink
    KeptRole,       // bool: among the first S keys a sliding-window cache keeps
  };
  using QAbstractListModel::QAbstractListModel;
  void setResult(const RunResultPtr& r);
  int promptLength() const { return m_result ? int(m_result->promptTokens.size()) : 0; }

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QHash<int, QByteArray> roleNames() const override;

  // Control characters made visible (newline as ⏎, tab as →), for labels.
  static QString visiblePiece(const std::string& piece);

 private:
  bool flagged(int position) const;
  bool kept(int position) const;
  RunResultPtr m_result;
  std::vector<double> m_share;  // per detector position: share of heads where it is a sink
  std::vector<int> m_flagged;
};

}  // namespace sinkscope::gui
