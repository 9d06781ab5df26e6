// SPDX-License-Identifier: Apache-2.0
#include <QTest>

#include "app/gui/models/control_state.h"

using namespace sinkscope;
using namespace sinkscope::gui;

class TestControlState : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void sliderIsLogScale() {
    QCOMPARE(lambdaToSlider(0.0), 0);
    QCOMPARE(sliderToLambda(0), 0.0);
    QVERIFY(qFuzzyCompare(sliderToLambda(1), kLambdaMin));
    QVERIFY(qFuzzyCompare(sliderToLambda(kLambdaSteps), kLambdaMax));
    for (double l : {1e-5, 1e-3, 0.02, 0.3}) {
      const double back = sliderToLambda(lambdaToSlider(l));
      QVERIFY2(std::abs(std::log(back / l)) < 0.01, qPrintable(QString::number(l)));
    }
  }
  void configRoundTrip() {
    ControlState s;
    s.sparse = true;
    s.lambdaPrefill = 0.0123;
    s.slidingWindow = true;
    s.windowSize = 512;
    s.sinkCount = 8;
    s.blockSize = 128;
    s.kvQuant = KvQuantChoice::kInt4;
    s.positionMode = PositionMode::kOriginal;
    const SinkScopeConfig c = s.toConfig("m.gguf", "");
    QVERIFY(check_config(c).empty());
    QVERIFY(!c.validation.has_value());
    QCOMPARE(ControlState::fromConfig(c, s), s);
    const RunRequest r = s.toRequest("hi");
    QCOMPARE(r.attention.block_size, 128);
    QCOMPARE(r.cache.sink_keep_count, int64_t(8));
    QVERIFY(r.cache.quantization.enabled);
  }
};

QTEST_GUILESS_MAIN(TestControlState)
#include "tst_controlstate.moc"
