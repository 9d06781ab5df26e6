// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/sweep_model.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cmath>

namespace sinkscope::gui {

namespace {

// Reading one JSON object with typed accessors that record the first problem by key path.
struct Reader {
  QString* error;
  bool failed() const { return !error->isEmpty(); }
  void fail(const QString& key, const QString& what) {
    if (!failed()) *error = key + QStringLiteral(": ") + what;
  }
  QString string(const QJsonObject& o, const QString& path, const char* key, bool required) {
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isUndefined() && !required) return {};
    if (!v.isString())
      fail(path + QLatin1String(key),
           v.isUndefined() ? QStringLiteral("missing") : QStringLiteral("expected a string"));
    return v.toString();
  }
  bool boolean(const QJsonObject& o, const QString& path, const char* key, bool required) {
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isUndefined() && !required) return false;
    if (!v.isBool())
      fail(path + QLatin1String(key),
           v.isUndefined() ? QStringLiteral("missing") : QStringLiteral("expected true or false"));
    return v.toBool();
  }
  // A number, or NaN for null / absent.
  double number(const QJsonObject& o, const QString& path, const char* key) {
    const QJsonValue v = o.value(QLatin1String(key));
    if (v.isUndefined() || v.isNull()) return NAN;
    if (!v.isDouble()) fail(path + QLatin1String(key), QStringLiteral("expected a number or null"));
    return v.toDouble();
  }
};

ValidationResults readResults(Reader& rd, const QJsonObject& o, const QString& path) {
  ValidationResults r;
  r.ppl_delta_pct = rd.number(o, path, "ppl_delta_pct");
  r.kl_mean = rd.number(o, path, "kl_mean");
  r.top1_agreement = rd.number(o, path, "top1_agreement");
  r.rouge_l = rd.number(o, path, "rouge_l");
  r.passkey_accuracy = rd.number(o, path, "passkey_accuracy");
  r.baseline_passkey_accuracy = rd.number(o, path, "baseline_passkey_accuracy");
  r.sparsity_prefill = rd.number(o, path, "sparsity_prefill");
  r.sparsity_decode = rd.number(o, path, "sparsity_decode");
  r.ttft_ms = rd.number(o, path, "ttft_ms");
  r.tpot_ms = rd.number(o, path, "tpot_ms");
  r.peak_kv_mib = rd.number(o, path, "peak_kv_mib");
  return r;
}

}  // namespace

std::optional<SweepResults> parseSweepJson(const QByteArray& json, QString* error) {
  QString err;
  Reader rd{&err};
  auto done = [&]() -> bool {
    if (error) *error = err;
    return err.isEmpty();
  };
  QJsonParseError pe;
  const QJsonDocument doc = QJsonDocument::fromJson(json, &pe);
  if (pe.error != QJsonParseError::NoError) {
    err = QObject::tr("not valid JSON at byte %1: %2").arg(pe.offset).arg(pe.errorString());
    done();
    return std::nullopt;
  }
  if (!doc.isObject()) {
    err = QObject::tr("not a sweep result: expected a JSON object with \"points\"");
    done();
    return std::nullopt;
  }
  const QJsonObject top = doc.object();
  const QJsonValue points = top.value(QLatin1String("points"));
  if (!points.isArray()) {
    err =
        QObject::tr("points: %1 (is this a `sinkscope-cli sweep --json-out` file?)")
            .arg(points.isUndefined() ? QObject::tr("missing") : QObject::tr("expected an array"));
    done();
    return std::nullopt;
  }
  SweepResults r;
  r.grid = rd.string(top, {}, "grid", false);
  r.dataset = rd.string(top, {}, "dataset", false);
  r.device = rd.string(top, {}, "device", false);
  r.modelSha256 = rd.string(top, {}, "model_sha256", false);
  const double samples = rd.number(top, {}, "samples");
  r.samples = std::isnan(samples) ? 0 : qint64(samples);
  const QJsonArray arr = points.toArray();
  for (qsizetype i = 0; i < arr.size() && !rd.failed(); ++i) {
    const QString path = QStringLiteral("points[%1].").arg(i);
    if (!arr[i].isObject()) {
      rd.fail(path.chopped(1), QObject::tr("expected an object"));
      break;
    }
    const QJsonObject o = arr[i].toObject();
    SweepPoint p;
    const double index = rd.number(o, path, "index");
    p.index = std::isnan(index) ? int(i) : int(index);
    p.label = rd.string(o, path, "label", true);
    p.valid = rd.boolean(o, path, "valid", true);
    p.invalid = rd.string(o, path, "invalid", false);
    p.passed = rd.boolean(o, path, "passed", false);
    p.gates = rd.string(o, path, "gates", false);
    p.paretoSparsity = rd.boolean(o, path, "pareto_sparsity", false);
    p.paretoMemory = rd.boolean(o, path, "pareto_memory", false);
    p.configYaml = rd.string(o, path, "config_yaml", true);
    const QJsonValue res = o.value(QLatin1String("results"));
    if (res.isObject())
      p.results = readResults(rd, res.toObject(), path + QStringLiteral("results."));
    else if (!res.isUndefined() && !res.isNull())
      rd.fail(path + QStringLiteral("results"), QObject::tr("expected an object"));
    else if (p.valid)
      rd.fail(path + QStringLiteral("results"), QObject::tr("missing on a valid point"));
    r.points.push_back(std::move(p));
  }
  if (!done()) return std::nullopt;
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
