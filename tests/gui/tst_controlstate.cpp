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
    s.setSparse(true);
    s.inference.attention.threshold_prefill = 0.0123;
    s.setSlidingWindow(true);
    s.inference.cache.window_size = 512;
    s.inference.cache.sink_keep_count = 8;
    s.inference.cache.block_size = 128;
    s.setKvQuant(KvQuantChoice::kInt4);
    s.inference.cache.position_mode = PositionMode::kOriginal;
    const SinkScopeConfig c = s.toConfig("m.gguf", "");
    QVERIFY(check_config(c).empty());
    QVERIFY(!c.validation.has_value());
    QCOMPARE(ControlState::fromConfig(c, s), s);
    const RunRequest r = s.toRequest("hi");
    QCOMPARE(r.attention.block_size, 128);
    QCOMPARE(r.cache.sink_keep_count, int64_t(8));
    QVERIFY(r.cache.quantization.enabled);
  }
  // Sinks S acts on a sliding window and on a quantized cache that protects sinks (full cache
  // included); elsewhere it has no effect, the request carries S = 0 and the note says why.
  void sinksTakeEffectWhereTheyAct() {
    ControlState s;
    s.inference.cache.sink_keep_count = 6;
    QVERIFY(!s.sinksInEffect());  // full float cache
    QCOMPARE(s.toRequest("hi").cache.sink_keep_count, int64_t(0));
    QVERIFY(QString::fromStdString(s.sinksNote()).contains(QStringLiteral("nothing to act on")));
    s.setKvQuant(KvQuantChoice::kInt4);  // full cache, quantized, protected: the first S stay 16-bit
    QVERIFY(s.sinksInEffect());
    QVERIFY(s.sinksNote().empty());
    RunRequest r = s.toRequest("hi");
    QCOMPARE(r.cache.sink_keep_count, int64_t(6));
    QVERIFY(!r.cache.windowed());
    QVERIFY(r.cache.quantization.protect_sink_positions);
    s.inference.quantization.protect_sink_positions = false;  // quantized without protection: S has no effect
    QVERIFY(!s.sinksInEffect());
    QCOMPARE(s.toRequest("hi").cache.sink_keep_count, int64_t(0));
    QVERIFY(QString::fromStdString(s.sinksNote()).contains(QStringLiteral("protect sink positions")));
    s.setSlidingWindow(true);  // a window keeps S whatever the quantization
    QVERIFY(s.sinksInEffect());
    QVERIFY(s.sinksNote().empty());
    QCOMPARE(s.toRequest("hi").cache.sink_keep_count, int64_t(6));
  }
  void hybridModeReachesRequestAndConfig() {
    ControlState s;
    QCOMPARE(s.toRequest("hi").attention.min_sequence_length, 0);  // default: sparse at every length
    s.inference.attention.min_sequence_length = 1536;
    s.inference.attention.threshold_mode = ThresholdMode::kLengthScaled;
    s.inference.attention.threshold_prefill = 40.0;  // c of lambda = c / L_kv
    const RunRequest r = s.toRequest("hi");
    QCOMPARE(r.attention.min_sequence_length, 1536);
    QCOMPARE(r.attention.threshold_mode, ThresholdMode::kLengthScaled);
    const SinkScopeConfig c = s.toConfig("m.gguf", "");
    QCOMPARE(c.inference.attention.min_sequence_length, int64_t(1536));
    QVERIFY(check_config(c).empty());
    const ConfigParseResult back = parse_config(format_config(c));
    QVERIFY(back.ok());
    QCOMPARE(back.config.inference.attention.min_sequence_length, int64_t(1536));
    QCOMPARE(ControlState::fromConfig(back.config, ControlState{}), s);
  }
};

QTEST_GUILESS_MAIN(TestControlState)
#include "tst_controlstate.moc"
