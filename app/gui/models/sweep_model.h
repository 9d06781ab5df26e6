// SPDX-License-Identifier: Apache-2.0
// A sweep's results as the GUI reads them: the JSON document `sinkscope-cli sweep --json-out`
// writes, read through its one schema (engine/eval/sweep_result.h) -- points with their label,
// validity, results, gate summary, Pareto flags (sparsity vs KL, KV memory vs KL) and each
// point's config_yaml -- and a table model of its points for the sweep view. A malformed file
// becomes a message that names the file and the offending key, never a crash; the previous
// results are kept then.
#pragma once

#include <QAbstractTableModel>
#include <QByteArray>
#include <QString>

#include <optional>
#include <vector>

#include "engine/config/config.h"

namespace sinkscope::gui {

struct SweepPoint {
  int index = 0;
  QString label;  // "lambda=0.01 window=512 sinks=4"
  bool valid = false;
  QString invalid;  // why the point was skipped (valid: empty)
  bool passed = false;
  ValidationResults results;  // NaN where the file has null or nothing
  QString gates;              // the gate summary
  bool paretoSparsity = false, paretoMemory = false;
  QString configYaml;  // the point's (validated) config
};

struct SweepResults {
  QString grid, dataset, device, modelSha256;
  qint64 samples = 0;
  std::vector<SweepPoint> points;
};

// Parses a sweep JSON document; on failure returns nothing and *error says what is wrong
// ("points[3].results.kl_mean: expected a number or null").
std::optional<SweepResults> parseSweepJson(const QByteArray& json, QString* error);

class SweepPointsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Index,
    Label,
    Passed,
    KlMean,
    SparsityPrefill,
    PeakKvMib,
    PplDelta,
    Top1,
    RougeL,
    Passkey,
    Front,
    ColumnCount
  };
  using QAbstractTableModel::QAbstractTableModel;

  // Reads a sweep JSON file. Returns "" or the error (the current results stay then).
  QString load(const QString& path);
  void setResults(SweepResults results, const QString& source = {});
  const SweepResults& results() const { return m_results; }
  const QString& source() const { return m_source; }
  const SweepPoint* point(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  // DisplayRole: text; UserRole: the raw number (double) or flag (bool).
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  static constexpr qint64 kMaxFileBytes = qint64(256) << 20;

 private:
  SweepResults m_results;
  QString m_source;
};

}  // namespace sinkscope::gui
