// SPDX-License-Identifier: Apache-2.0
#include <QAbstractItemModelTester>
#include <QTest>

#include <cmath>

#include "app/gui/models/control_state.h"
#include "app/gui/models/head_stats_model.h"
#include "app/gui/models/run_executor.h"
#include "app/gui/models/view_models.h"
#include "engine/backend/backend.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

class TestHeadStatsModel : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void emptyAndFilled() {
    HeadStatsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    test::checkEmptyThenFilled(model, [this](HeadStatsModel& m) { fill(m); });
    if (QTest::currentTestFailed()) return;
    check(model);
  }
  // A model without learned sinks says so in the column.
  void learnedSinkColumnSaysNoneWithoutThem() {
    HeadStatsModel m;
    m.setResult(test::sampleResult());
    QVERIFY(test::sampleResult()->learnedSinkMass.empty());
    QCOMPARE(m.index(0, HeadStatsModel::LearnedSink).data().toString(), QStringLiteral("none"));
    QVERIFY(!m.index(0, HeadStatsModel::LearnedSink).data(Qt::UserRole).isValid());
    QVERIFY(!m.headerData(HeadStatsModel::LearnedSink, Qt::Horizontal).toString().isEmpty());
  }
  // gpt-oss (the transformers oracle's tiny model, tests/data/oracles): the column shows each
  // head's learned sink mass, the sinks view names it next to the emergent sinks, and the
  // attention map (computed apart, from the captured Q/K with the sink logit) leaves each prompt
  // row exactly the mass the engine's probe gave the sink.
  void learnedSinksOfGptOss() {
    const auto model = Model::load(std::string(SINKSCOPE_SOURCE_DIR) +
                                   "/tests/data/oracles/gpt_oss_mxfp4.gguf");
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(model);
    ControlState s;
    s.inference.attention.threshold_prefill = 0;
    s.inference.attention.threshold_decode = 0;
    s.maxTokens = 2;
    s.layer = 1;
    s.head = 3;
    const RunResultPtr r = ex.run(s.toRequest("the quick brown fox jumps over the lazy dog"), 1);
    const int nl = model->config().n_layer, nh = model->config().n_head;
    QCOMPARE(int(r->learnedSinkMass.size()), nl * nh);
    HeadStatsModel m;
    m.setResult(r);
    for (int row = 0; row < nl * nh; ++row) {
      const double v = m.index(row, HeadStatsModel::LearnedSink).data(Qt::UserRole).toDouble();
      QVERIFY2(v > 0 && v < 1, qPrintable(QString::number(v)));
      QVERIFY(m.index(row, HeadStatsModel::LearnedSink).data().toString().endsWith(QLatin1Char('%')));
    }
    SinksView view;
    view.setResult(r);
    QVERIFY2(view.headText().contains(QStringLiteral("Learned sink: ")), qPrintable(view.headText()));

    // The engine's own sink probability over the prompt, for the map's (layer, head).
    BackendOptions bo;
    bo.n_threads = 1;
    auto be = make_cpu_backend(model, bo);
    std::vector<float> logits;
    be->forward(r->promptTokens, LogitsMode::kLast, logits);
    const int n = int(r->promptTokens.size());
    const double engineSink = be->probes().sink_mass[size_t(s.layer) * nh + size_t(s.head)] / n;
    // The map's keys: sum_k alpha_k * (queries that see k); the rest of each row is the sink's.
    const int window = model->config().layer_window(s.layer);
    QCOMPARE(r->map.layer, s.layer);
    QCOMPARE(int(r->map.alpha.size()), n);
    double keys = 0;
    for (int k = 0; k < n; ++k) {
      int queries = 0;
      for (int q = k; q < n; ++q) queries += window == 0 || k > q - window;
      keys += r->map.alpha[size_t(k)] * queries;
    }
    const double mapSink = 1.0 - keys / n;
    QVERIFY2(engineSink > 1e-3, qPrintable(QString::number(engineSink)));
    QVERIFY2(std::abs(mapSink - engineSink) < 1e-4,
             qPrintable(QStringLiteral("map %1, engine %2").arg(mapSink).arg(engineSink)));
  }
 private:
  void fill(HeadStatsModel& m);
  void check(HeadStatsModel& m);
};

void TestHeadStatsModel::fill(HeadStatsModel& m) { m.setResult(test::sampleResult()); }
void TestHeadStatsModel::check(HeadStatsModel& m) {
  const auto r = test::sampleResult();
  QCOMPARE(m.rowCount(), r->nLayer * r->nHead);
  QCOMPARE(m.columnCount(), int(HeadStatsModel::ColumnCount));
  const QModelIndex i = m.index(r->nHead + 1, HeadStatsModel::SparsityPrefill);
  QCOMPARE(m.index(r->nHead + 1, HeadStatsModel::Layer).data().toInt(), 1);
  QCOMPARE(i.data(Qt::UserRole).toDouble(), r->probesPrefill.prefill[size_t(r->nHead + 1)].sparsity());
  QVERIFY(!m.headerData(HeadStatsModel::FirstMass, Qt::Horizontal).toString().isEmpty());
}

QTEST_GUILESS_MAIN(TestHeadStatsModel)
#include "tst_headstatsmodel.moc"
