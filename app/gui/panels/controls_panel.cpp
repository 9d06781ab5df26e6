// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/controls_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>

namespace sinkscope::gui {

ControlsPanel::ControlsPanel(QWidget* parent) : QWidget(parent) {
  auto* attn = new QGroupBox(tr("Dynamic sparse attention"), this);
  auto* af = new QFormLayout(attn);
  m_sparse = new QCheckBox(tr("skip tiles (sparse on)"), attn);
  m_sparse->setToolTip(tr("Skip a KV tile when exp(tile max - running max) < lambda for every row"));
  af->addRow(m_sparse);
  m_mode = new QComboBox(attn);
  m_mode->setObjectName(QStringLiteral("thresholdMode"));
  m_mode->addItems({tr("fixed lambda"), tr("length scaled (c / L_kv)")});
  af->addRow(tr("Threshold"), m_mode);
  addLambda(af, tr("lambda prefill"), m_prefillSlider, m_prefill,
            [](ControlState& c) -> double& { return c.inference.attention.threshold_prefill; });
  addLambda(af, tr("lambda decode"), m_decodeSlider, m_decode,
            [](ControlState& c) -> double& { return c.inference.attention.threshold_decode; });
  m_minSeq = new QSpinBox(attn);
  m_minSeq->setObjectName(QStringLiteral("minSeqLength"));
  m_minSeq->setRange(0, kMaxMinSeqLength);
  m_minSeq->setSingleStep(256);
  m_minSeq->setKeyboardTracking(false);
  m_minSeq->setSpecialValueText(tr("always sparse"));
  m_minSeq->setSuffix(tr(" tokens"));
  m_minSeq->setToolTip(tr("Hybrid mode (attention.min_sequence_length): attention stays dense while "
                          "the KV length L_kv is below this; 0 skips tiles at every length"));
  af->addRow(tr("Sparse from L_kv"), m_minSeq);
  m_block = new QComboBox(attn);
  m_block->addItems({QStringLiteral("64"), QStringLiteral("128")});
  m_block->setToolTip(tr("KV tile = KV page, in tokens"));
  af->addRow(tr("Block size"), m_block);

  auto* cache = new QGroupBox(tr("KV cache"), this);
  auto* cf = new QFormLayout(cache);
  m_window = new QCheckBox(tr("sliding window with sinks"), cache);
  m_window->setToolTip(tr("Keep the first S tokens and the W most recent (StreamingLLM); off keeps everything"));
  cf->addRow(m_window);
  m_windowSize = new QSpinBox(cache);
  m_windowSize->setRange(1, 1 << 20);
  cf->addRow(tr("Window W"), m_windowSize);
  m_sinks = new QSpinBox(cache);
  m_sinks->setObjectName(QStringLiteral("sinkCount"));
  m_sinks->setRange(0, 1024);
  cf->addRow(tr("Sinks S"), m_sinks);
  m_position = new QComboBox(cache);
  m_position->addItems({tr("cache (re-rotated)"), tr("original")});
  cf->addRow(tr("Positions"), m_position);
  m_quant = new QComboBox(cache);
  m_quant->addItems({tr("off (float)"), QStringLiteral("int8"), QStringLiteral("int4")});
  cf->addRow(tr("KV quantization"), m_quant);
  m_protect = new QCheckBox(tr("protect sink positions (16-bit)"), cache);
  m_protect->setToolTip(tr("Keep the first S tokens in 16-bit while the rest of the cache is "
                           "quantized (with a full cache too)"));
  cf->addRow(m_protect);
  m_sinksNote = new QLabel(cache);
  m_sinksNote->setObjectName(QStringLiteral("sinksNote"));
  m_sinksNote->setWordWrap(true);
  m_sinksNote->setStyleSheet(QStringLiteral("color: palette(mid); font-size: small"));
  cf->addRow(m_sinksNote);

  m_compare = new QCheckBox(tr("compare with the dense baseline"), this);
  m_compare->setToolTip(tr("Also run dense attention with a full cache (cached while the prompt is unchanged)"));

  auto* lay = new QVBoxLayout(this);
  lay->addWidget(attn);
  lay->addWidget(cache);
  lay->addWidget(m_compare);
  lay->addStretch(1);

  for (QCheckBox* c : {m_sparse, m_window, m_protect, m_compare})
    connect(c, &QCheckBox::toggled, this, &ControlsPanel::commit);
  for (QComboBox* c : {m_mode, m_block, m_position, m_quant})
    connect(c, &QComboBox::currentIndexChanged, this, &ControlsPanel::commit);
  for (QSpinBox* s : {m_minSeq, m_windowSize, m_sinks}) connect(s, &QSpinBox::valueChanged, this, &ControlsPanel::commit);
  setState(m_state);
}

void ControlsPanel::addLambda(QFormLayout* form, const QString& label, QSlider*& slider,
                              QDoubleSpinBox*& spin, double& (*member)(ControlState&)) {
  slider = new QSlider(Qt::Horizontal, this);
  slider->setRange(0, kLambdaSteps);
  slider->setToolTip(tr("Log scale from %1 to %2; far left is 0 (dense)").arg(kLambdaMin).arg(kLambdaMax));
  spin = new QDoubleSpinBox(this);
  spin->setDecimals(5);
  spin->setMinimumWidth(70);
  slider->setMinimumWidth(40);
  spin->setRange(0.0, 1000.0);  // c of length-scaled mode may exceed 1
  spin->setSingleStep(0.001);
  spin->setKeyboardTracking(false);
  auto* row = new QHBoxLayout;
  row->addWidget(slider, 1);
  row->addWidget(spin);
  form->addRow(label, row);
  QSlider* sl = slider;
  QDoubleSpinBox* sp = spin;
  connect(slider, &QSlider::valueChanged, this, [this, sp, member](int v) {
    if (m_updating) return;
    m_updating = true;
    member(m_state) = sliderToLambda(v);
    sp->setValue(member(m_state));
    m_updating = false;
    commit();
  });
  connect(spin, &QDoubleSpinBox::valueChanged, this, [this, sl, member](double v) {
    if (m_updating) return;
    m_updating = true;
    member(m_state) = v;
    sl->setValue(lambdaToSlider(v));
    m_updating = false;
    commit();
  });
}

void ControlsPanel::setQuantizationAvailable(bool on) {
  m_quant->setEnabled(on);
  m_quant->setToolTip(on ? tr("Symmetric per-token groups of 32 with 16-bit scales")
                         : tr("not available in this build"));
}

void ControlsPanel::setState(const ControlState& s) {
  m_updating = true;
  m_state = s;
  m_sparse->setChecked(s.sparse());
  m_mode->setCurrentIndex(
      s.inference.attention.threshold_mode == ThresholdMode::kLengthScaled ? 1 : 0);
  m_prefill->setValue(s.inference.attention.threshold_prefill);
  m_prefillSlider->setValue(lambdaToSlider(s.inference.attention.threshold_prefill));
  m_decode->setValue(s.inference.attention.threshold_decode);
  m_decodeSlider->setValue(lambdaToSlider(s.inference.attention.threshold_decode));
  m_minSeq->setValue(int(s.inference.attention.min_sequence_length));
  m_block->setCurrentIndex(s.inference.cache.block_size == 128 ? 1 : 0);
  m_window->setChecked(s.slidingWindow());
  m_windowSize->setValue(int(s.inference.cache.window_size));
  m_sinks->setValue(int(s.inference.cache.sink_keep_count));
  m_position->setCurrentIndex(
      s.inference.cache.position_mode == PositionMode::kOriginal ? 1 : 0);
  m_quant->setCurrentIndex(int(s.kvQuant()));
  m_protect->setChecked(s.inference.quantization.protect_sink_positions);
  m_compare->setChecked(s.compare);
  m_updating = false;
  syncEnabled();
}

void ControlsPanel::syncEnabled() {
  const bool sparse = m_sparse->isChecked();
  for (QWidget* w : std::initializer_list<QWidget*>{m_mode, m_prefillSlider, m_prefill, m_decodeSlider, m_decode, m_minSeq})
    w->setEnabled(sparse);
  const bool win = m_window->isChecked();
  for (QWidget* w : std::initializer_list<QWidget*>{m_windowSize, m_position}) w->setEnabled(win);
  const bool quant = m_quant->isEnabled() && m_quant->currentIndex() != 0;
  m_protect->setEnabled(quant);
  // S acts on a window, and on a quantized cache that protects sinks (full cache too).
  ControlState s = m_state;
  s.setSlidingWindow(win);
  s.setKvQuant(KvQuantChoice(m_quant->currentIndex()));
  s.inference.quantization.protect_sink_positions = m_protect->isChecked();
  m_sinks->setEnabled(s.sinksInEffect());
  const QString note = QString::fromStdString(s.sinksNote());
  m_sinksNote->setText(note);
  m_sinksNote->setVisible(!note.isEmpty());
  m_sinks->setToolTip(win ? tr("The first S tokens are never evicted from the window")
                          : s.sinksInEffect() ? tr("The first S tokens stay 16-bit in the quantized cache")
                                              : note);
}

void ControlsPanel::commit() {
  if (m_updating) return;
  ControlState s = m_state;
  s.setSparse(m_sparse->isChecked());
  s.inference.attention.threshold_mode =
      m_mode->currentIndex() == 1 ? ThresholdMode::kLengthScaled : ThresholdMode::kFixed;
  s.inference.attention.threshold_prefill = m_prefill->value();
  s.inference.attention.threshold_decode = m_decode->value();
  s.inference.attention.min_sequence_length = m_minSeq->value();
  s.inference.cache.block_size = m_block->currentIndex() == 1 ? 128 : 64;
  s.setSlidingWindow(m_window->isChecked());
  s.inference.cache.window_size = m_windowSize->value();
  s.inference.cache.sink_keep_count = m_sinks->value();
  s.inference.cache.position_mode =
      m_position->currentIndex() == 1 ? PositionMode::kOriginal : PositionMode::kCache;
  s.setKvQuant(KvQuantChoice(m_quant->currentIndex()));
  s.inference.quantization.protect_sink_positions = m_protect->isChecked();
  s.compare = m_compare->isChecked();
  m_state = s;
  syncEnabled();
  Q_EMIT edited(s);
}

}  // namespace sinkscope::gui
