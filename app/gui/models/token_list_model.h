// SPDX-License-Identifier: Apache-2.0
// The token strip: prompt tokens then generated tokens of the last run, one row each. Rows map
// to rows/columns of the attention map (prompt positions); generated rows carry the dense
// baseline's token at the same step and whether they diverge.
#pragma once

#include <QAbstractListModel>

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
    SinkRole,                         // bool: a kept or flagged sink position
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
  RunResultPtr m_result;
};

}  // namespace sinkscope::gui
