// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/sweep_model.h"

#include <QFile>
#include <QFileInfo>

#include <cmath>
#include <string_view>

#include "engine/util/json_io.h"
#include "engine/eval/sweep_result.h"

namespace sinkscope::gui {

std::optional<SweepResults> parseSweepJson(const QByteArray& json, QString* error) {
  auto fail = [error](const QString& why) -> std::optional<SweepResults> {
    if (error) *error = why;
    return std::nullopt;
  };
  SweepResult doc;
  try {
    doc = Json::parse(std::string_view(json.constData(), size_t(json.size())))
              .get<SweepResult>();
  } catch (const Json::parse_error& e) {  // nlohmann's message has the line and column
    return fail(QObject::tr("not valid JSON: %1").arg(QString::fromStdString(e.what())));
  } catch (const SweepFormatError& e) {
    return fail(QString::fromStdString(e.what()));
  }
  SweepResults r;
  r.grid = QString::fromStdString(doc.grid);
  r.dataset = QString::fromStdString(doc.dataset);
  r.device = QString::fromStdString(doc.device);
  r.modelSha256 = QString::fromStdString(doc.model_sha256);
  r.samples = doc.samples;
  for (SweepPointResult& d : doc.points) {
    SweepPoint p;
    p.index = int(d.index);
    p.label = QString::fromStdString(d.label);
    p.valid = d.valid;
    p.invalid = QString::fromStdString(d.invalid);
    p.passed = d.passed;
    p.results = d.results;
    p.gates = QString::fromStdString(d.gates);
    p.paretoSparsity = d.pareto_sparsity;
    p.paretoMemory = d.pareto_memory;
    p.configYaml = QString::fromStdString(d.config_yaml);
    r.points.push_back(std::move(p));
  }
  if (error) error->clear();
  return r;
}

QString SweepPointsModel::load(const QString& path) {
  QFile f(path);
  const QString name = QFileInfo(path).fileName();
  if (!f.open(QIODevice::ReadOnly)) return tr("Cannot read %1: %2").arg(path, f.errorString());
  if (f.size() > kMaxFileBytes)
    return tr("%1 is %2 MiB; a sweep result is at most %3 MiB")
        .arg(name)
        .arg(f.size() >> 20)
        .arg(kMaxFileBytes >> 20);
  QString error;
  std::optional<SweepResults> r = parseSweepJson(f.readAll(), &error);
  if (!r) return tr("%1 is not a readable sweep result: %2").arg(name, error);
  setResults(std::move(*r), path);
  return {};
}

void SweepPointsModel::setResults(SweepResults results, const QString& source) {
  beginResetModel();
  m_results = std::move(results);
  m_source = source;
  endResetModel();
}

const SweepPoint* SweepPointsModel::point(int row) const {
  return row >= 0 && size_t(row) < m_results.points.size() ? &m_results.points[size_t(row)]
                                                           : nullptr;
}

int SweepPointsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_results.points.size());
}

int SweepPointsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant SweepPointsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const SweepPoint& p = m_results.points[size_t(index.row())];
  const ValidationResults& r = p.results;
  const bool raw = role == Qt::UserRole;
  if (role == Qt::ToolTipRole) return p.valid ? QString(p.gates) : p.invalid;
  if (role == Qt::TextAlignmentRole)
    return index.column() == Label || index.column() == Front
               ? QVariant()
               : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
  if (role != Qt::DisplayRole && !raw) return {};
  auto num = [raw, &p](double v, double scale, int prec) -> QVariant {
    if (raw) return v;
    if (!p.valid || std::isnan(v)) return QStringLiteral("-");
    return QString::number(v * scale, 'f', prec);
  };
  switch (index.column()) {
    case Index:
      return p.index;
    case Label:
      return p.label;
    case Passed:
      if (raw) return p.valid && p.passed;
      return !p.valid ? tr("invalid") : p.passed ? tr("pass") : tr("FAIL");
    case KlMean:
      return num(r.kl_mean, 1, 5);
    case SparsityPrefill:
      return num(r.sparsity_prefill, 100, 1);
    case PeakKvMib:
      return num(r.peak_kv_mib, 1, 2);
    case PplDelta:
      return num(r.ppl_delta_pct, 1, 3);
    case Top1:
      return num(r.top1_agreement, 100, 2);
    case RougeL:
      return num(r.rouge_l, 1, 3);
    case Passkey:
      return num(r.passkey_accuracy, 100, 0);
    case Front:
      if (raw) return p.paretoSparsity || p.paretoMemory;
      return QString(p.paretoSparsity ? QStringLiteral("S") : QString()) +
             (p.paretoMemory ? QStringLiteral("M") : QString());
    default:
      return {};
  }
}

QVariant SweepPointsModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal) return QAbstractTableModel::headerData(section, o, role);
  if (role == Qt::ToolTipRole && section == Front)
    return tr("S: on the prefill-sparsity / KL Pareto front; M: on the KV-memory / KL front");
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case Index:
      return tr("#");
    case Label:
      return tr("Point");
    case Passed:
      return tr("Gates");
    case KlMean:
      return tr("KL mean");
    case SparsityPrefill:
      return tr("Sparsity %");
    case PeakKvMib:
      return tr("Peak KV MiB");
    case PplDelta:
      return tr("PPL delta %");
    case Top1:
      return tr("Top-1 %");
    case RougeL:
      return tr("ROUGE-L");
    case Passkey:
      return tr("Passkey %");
    case Front:
      return tr("Front");
    default:
      return {};
  }
}

}  // namespace sinkscope::gui
