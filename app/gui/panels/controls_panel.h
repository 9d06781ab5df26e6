// SPDX-License-Identifier: Apache-2.0
// The tuning controls: lambda prefill / decode (log sliders with exact spin boxes), threshold
// mode, hybrid mode (sparse from a KV length on), sparse on/off, KV cache (full or sliding
// window, window size, sink count, position mode), block size, KV quantization, protect sinks,
// compare with dense. Emits the whole ControlState on every edit; the Workbench debounces.
#pragma once

#include <QWidget>

#include "app/gui/models/control_state.h"

class QCheckBox;
class QLabel;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QSlider;
class QSpinBox;

namespace sinkscope::gui {

class ControlsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ControlsPanel(QWidget* parent = nullptr);
  void setState(const ControlState& s);  // no signal
  ControlState state() const { return m_state; }
  // KV quantization is only offered when the engine has it.
  void setQuantizationAvailable(bool on);
 Q_SIGNALS:
  void edited(const sinkscope::gui::ControlState& s);
 private:
  void addLambda(QFormLayout* form, const QString& label, QSlider*& slider, QDoubleSpinBox*& spin,
                 double& (*member)(ControlState&));
  void commit();
  void syncEnabled();
  ControlState m_state;
  bool m_updating = false;
  QCheckBox* m_sparse;
  QComboBox* m_mode;
  QSlider* m_prefillSlider;
  QDoubleSpinBox* m_prefill;
  QSlider* m_decodeSlider;
  QDoubleSpinBox* m_decode;
  QSpinBox* m_minSeq;
  QComboBox* m_block;
  QCheckBox* m_window;
  QSpinBox* m_windowSize;
  QSpinBox* m_sinks;
  QComboBox* m_position;
  QComboBox* m_quant;
  QCheckBox* m_protect;
  QLabel* m_sinksNote;
  QCheckBox* m_compare;
};

}  // namespace sinkscope::gui
