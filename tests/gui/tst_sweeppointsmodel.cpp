// SPDX-License-Identifier: Apache-2.0
// Sweep results in the GUI: the `sinkscope-cli sweep --json-out` document read into
// SweepPointsModel (QAbstractItemModelTester), malformed files rejected with a message naming the
// problem, and "Load this point" setting the controls and re-running.
#include <QAbstractItemModelTester>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include "app/gui/models/sweep_model.h"
#include "app/gui/models/workbench.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

// The settings of sweep point i (they differ in lambda, window, sinks and the hybrid length).
ControlState pointControls(int i) {
  ControlState s;
  s.inference.attention.threshold_prefill = 0.01 * (i + 1);
  s.inference.attention.threshold_decode = 0.002 * (i + 1);
  s.setSlidingWindow(i > 0);
  s.inference.cache.window_size = 128 * (i + 1);
  s.inference.cache.sink_keep_count = 2 * i;
  s.inference.attention.min_sequence_length = 64 * i;
  s.inference.attention.threshold_mode = i == 2 ? ThresholdMode::kLengthScaled : ThresholdMode::kFixed;
  return s;
}

QJsonObject results(double kl, double sparsity, double mib) {
  return {{QStringLiteral("ppl_delta_pct"), 0.5},
          {QStringLiteral("kl_mean"), kl},
          {QStringLiteral("top1_agreement"), 0.97},
          {QStringLiteral("rouge_l"), QJsonValue()},
          {QStringLiteral("passkey_accuracy"), 1.0},
          {QStringLiteral("sparsity_prefill"), sparsity},
          {QStringLiteral("sparsity_decode"), sparsity / 2},
          {QStringLiteral("peak_kv_mib"), mib}};
}

// A document shaped like the CLI's: three run points (two on the sparsity front) and one invalid.
QJsonObject sweepDocument() {
  QJsonArray points;
  const double kl[] = {0.001, 0.004, 0.02}, sp[] = {0.1, 0.3, 0.25}, mib[] = {3.0, 1.5, 1.0};
  for (int i = 0; i < 3; ++i) {
    const SinkScopeConfig c = pointControls(i).toConfig("m.gguf", "");
    points.append(QJsonObject{
        {QStringLiteral("index"), i},
        {QStringLiteral("label"), QStringLiteral("lambda=%1").arg(i)},
        {QStringLiteral("settings"), QJsonObject{}},
        {QStringLiteral("valid"), true},
        {QStringLiteral("passed"), i < 2},
        {QStringLiteral("results"), results(kl[i], sp[i], mib[i])},
        {QStringLiteral("gates"), i < 2 ? QStringLiteral("all gates passed")
                                        : QStringLiteral("rouge_l 0.9 < similarity_min 0.95")},
        {QStringLiteral("pareto_sparsity"), i < 2},
        {QStringLiteral("pareto_memory"), i != 1},
        {QStringLiteral("config_yaml"), QString::fromStdString(format_config(c))}});
  }
  points.append(QJsonObject{
      {QStringLiteral("index"), 3},
      {QStringLiteral("label"), QStringLiteral("window=4 sinks=8")},
      {QStringLiteral("valid"), false},
      {QStringLiteral("invalid"),
       QStringLiteral("inference.cache.sink_keep_count: 8 > window_size 4")},
      {QStringLiteral("pareto_sparsity"), false},
      {QStringLiteral("pareto_memory"), false},
      {QStringLiteral("config_yaml"), QStringLiteral("sinkscope_config_version: 1\n")}});
  return {{QStringLiteral("grid"), QStringLiteral("lambda=0.01,0.02,0.03")},
          {QStringLiteral("dataset"), QStringLiteral("unit")},
          {QStringLiteral("samples"), 6},
          {QStringLiteral("device"), QStringLiteral("test cpu")},
          {QStringLiteral("points"), points}};
}

QString writeFile(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
  const QString path = dir.filePath(name);
  QFile f(path);
  if (f.open(QIODevice::WriteOnly)) f.write(bytes);
  return path;
}

}  // namespace

class TestSweepPointsModel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void readsTheCliDocument() {
    SweepPointsModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QTemporaryDir dir;
    const QString path =
        writeFile(dir, QStringLiteral("sweep.json"), QJsonDocument(sweepDocument()).toJson());
    QCOMPARE(m.load(path), QString());
    QCOMPARE(m.rowCount(), 4);
    QCOMPARE(m.columnCount(), int(SweepPointsModel::ColumnCount));
    QCOMPARE(m.source(), path);
    QCOMPARE(m.results().dataset, QStringLiteral("unit"));
    QCOMPARE(m.results().samples, qint64(6));
    const SweepPoint* p = m.point(1);
    QVERIFY(p && p->valid && p->passed && p->paretoSparsity);
    QCOMPARE(p->results.kl_mean, 0.004);
    QVERIFY(std::isnan(p->results.rouge_l));  // null reads as "not measured"
    QVERIFY(std::isnan(p->results.ttft_ms));  // absent too
    QCOMPARE(m.data(m.index(1, SweepPointsModel::SparsityPrefill)).toString(),
             QStringLiteral("30.0"));
    QCOMPARE(m.data(m.index(1, SweepPointsModel::KlMean), Qt::UserRole).toDouble(), 0.004);
    QCOMPARE(m.data(m.index(2, SweepPointsModel::Passed)).toString(), QStringLiteral("FAIL"));
    QCOMPARE(m.data(m.index(3, SweepPointsModel::Passed)).toString(), QStringLiteral("invalid"));
    QCOMPARE(m.data(m.index(3, SweepPointsModel::KlMean)).toString(), QStringLiteral("-"));
    QCOMPARE(m.data(m.index(0, SweepPointsModel::Front)).toString(), QStringLiteral("SM"));
    QVERIFY(!m.point(4));
    QVERIFY(!m.point(-1));
  }

  void malformedFilesGiveAMessage_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("expected");  // part of the message
    QTest::newRow("empty") << QByteArray() << QStringLiteral("not valid JSON");
    QTest::newRow("truncated") << QJsonDocument(sweepDocument()).toJson().left(200)
                               << QStringLiteral("not valid JSON");
    QTest::newRow("binary") << QByteArray("\x00\xff\xfe garbage", 12)
                            << QStringLiteral("not valid JSON");
    QTest::newRow("array") << QByteArray("[1, 2]") << QStringLiteral("expected a JSON object");
    QTest::newRow("no points") << QByteArray("{\"grid\": \"x\"}")
                               << QStringLiteral("points: missing");
    QTest::newRow("points not array")
        << QByteArray("{\"points\": {}}") << QStringLiteral("points: expected an array");
    QTest::newRow("point not object")
        << QByteArray("{\"points\": [3]}") << QStringLiteral("points[0]: expected an object");
    QJsonObject d = sweepDocument();
    QJsonArray pts = d[QStringLiteral("points")].toArray();
    auto withPoint = [&](int i, const QString& key, const QJsonValue& v) {
      QJsonObject p = pts[i].toObject();
      if (v.isUndefined())
        p.remove(key);
      else
        p[key] = v;
      QJsonArray a = pts;
      a[i] = p;
      QJsonObject doc = d;
      doc[QStringLiteral("points")] = a;
      return QJsonDocument(doc).toJson();
    };
    QTest::newRow("label number") << withPoint(1, QStringLiteral("label"), 5)
                                  << QStringLiteral("points[1].label: expected a string");
    QTest::newRow("no config") << withPoint(2, QStringLiteral("config_yaml"), QJsonValue::Undefined)
                               << QStringLiteral("points[2].config_yaml: missing");
    QTest::newRow("valid not bool") << withPoint(0, QStringLiteral("valid"), QStringLiteral("yes"))
                                    << QStringLiteral("points[0].valid: expected true or false");
    QTest::newRow("no results") << withPoint(0, QStringLiteral("results"), QJsonValue::Undefined)
                                << QStringLiteral("points[0].results: missing");
    QJsonObject r = results(0.1, 0.2, 0.3);
    r[QStringLiteral("kl_mean")] = QStringLiteral("small");
    QTest::newRow("kl string") << withPoint(0, QStringLiteral("results"), r)
                               << QStringLiteral(
                                      "points[0].results.kl_mean: expected a number or null");
  }
  void malformedFilesGiveAMessage() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    SweepPointsModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const QString good =
        writeFile(dir, QStringLiteral("good.json"), QJsonDocument(sweepDocument()).toJson());
    QCOMPARE(m.load(good), QString());
    const QString path = writeFile(dir, QStringLiteral("bad.json"), bytes);
    const QString err = m.load(path);
    QVERIFY2(err.contains(expected), qPrintable(err));
    QVERIFY(err.contains(QStringLiteral("bad.json")));
    QCOMPARE(m.rowCount(), 4);  // the previous results stay
    QCOMPARE(m.source(), good);
  }

  void missingFileGivesAMessage() {
    Workbench wb(BackendKind::kCpu, 2);
    const QString err = wb.openSweep(QStringLiteral("/nonexistent/sweep.json"));
    QVERIFY2(err.contains(QStringLiteral("Cannot read")), qPrintable(err));
    QCOMPARE(wb.sweep()->rowCount(), 0);
  }

  void loadingAPointSetsTheControlsAndReruns() {
    Workbench wb(BackendKind::kCpu, 2);
    wb.setDebounceMs(20);
    QSignalSpy ready(&wb, &Workbench::resultReady);
    wb.setPrompt(test::longPrompt());
    wb.setModel(test::randomModel());
    QTRY_COMPARE_WITH_TIMEOUT(ready.count(), 1, 30000);
    QTemporaryDir dir;
    const QString path =
        writeFile(dir, QStringLiteral("sweep.json"), QJsonDocument(sweepDocument()).toJson());
    QCOMPARE(wb.openSweep(path), QString());
    QCOMPARE(wb.sweep()->rowCount(), 4);
    for (int row : {2, 1}) {
      const int runs = ready.count();
      QString warnings;
      QCOMPARE(wb.applySweepPoint(row, &warnings), QString());
      ControlState expected = pointControls(row);
      QCOMPARE(wb.controls(), expected);
      QTRY_COMPARE_WITH_TIMEOUT(ready.count(), runs + 1, 30000);
      const RunRequest& r = wb.lastResult()->request;
      QCOMPARE(r.attention.min_sequence_length, expected.inference.attention.min_sequence_length);
      QCOMPARE(r.attention.threshold_prefill, expected.inference.attention.threshold_prefill);
      QCOMPARE(r.attention.threshold_mode, expected.inference.attention.threshold_mode);
      QCOMPARE(r.cache.window_size, int64_t(expected.inference.cache.window_size));
    }
    // Points that cannot be loaded say why and change nothing.
    const ControlState before = wb.controls();
    QVERIFY(wb.applySweepPoint(3, nullptr).contains(QStringLiteral("sink_keep_count")));
    QVERIFY(!wb.applySweepPoint(9, nullptr).isEmpty());
    QCOMPARE(wb.controls(), before);
  }

  void aPointWithABadConfigNamesTheKey() {
    QJsonObject d = sweepDocument();
    QJsonArray pts = d[QStringLiteral("points")].toArray();
    QJsonObject p = pts[0].toObject();
    p[QStringLiteral("config_yaml")] = QStringLiteral("inference:\n  cache:\n    window_size: 0\n");
    pts[0] = p;
    d[QStringLiteral("points")] = pts;
    QTemporaryDir dir;
    Workbench wb(BackendKind::kCpu, 2);
    wb.setAutoRun(false);
    QCOMPARE(wb.openSweep(writeFile(dir, QStringLiteral("s.json"), QJsonDocument(d).toJson())),
             QString());
    const ControlState before = wb.controls();
    const QString err = wb.applySweepPoint(0);
    QVERIFY2(err.contains(QStringLiteral("inference.cache.window_size")), qPrintable(err));
    QCOMPARE(wb.controls(), before);
  }
};

QTEST_GUILESS_MAIN(TestSweepPointsModel)
#include "tst_sweeppointsmodel.moc"
