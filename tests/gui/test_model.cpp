// SPDX-License-Identifier: Apache-2.0
#include "tests/gui/test_model.h"

#include <QDir>
#include <QFileInfo>
#include <QCoreApplication>

#include "engine/format/gguf_writer.h"
#include "engine/util/paths.h"

namespace sinkscope::gui::test {

QString randomModelPath() {
  static const QString path = [] {
    const QString p = QDir::temp().filePath(QStringLiteral("sinkscope-gui-test-%1.gguf").arg(QCoreApplication::applicationPid()));
    TestModelShape s;
    s.n_layer = 2;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 128;
    s.n_vocab = 320;
    s.n_ctx = 1024;
    make_random_llama(s, 7).write(p.toStdString());
    return p;
  }();
  return path;
}

std::shared_ptr<const Model> randomModel() {
  static std::shared_ptr<const Model> m = Model::load(randomModelPath().toStdString());
  return m;
}

QString defaultModelPath() {
  const QString p = QString::fromStdString(default_model_path().string());
  return QFileInfo::exists(p) ? p : QString();
}

QString longPrompt() {
  QString s;
  for (int i = 0; i < 12; ++i)
    s += QStringLiteral("The garden was quiet in the morning and the tomatoes were ripe. ");
  return s;
}

}  // namespace sinkscope::gui::test

#include "app/gui/models/control_state.h"
#include "app/gui/models/run_executor.h"

namespace sinkscope::gui::test {

RunResultPtr sampleResult() {
  static RunResultPtr r = [] {
    RunExecutor ex(BackendKind::kCpu, 2);
    ex.setModel(randomModel());
    ControlState s;
    s.inference.attention.threshold_prefill = 0.3;  // random weights: a high lambda makes sure tiles are skipped
    s.inference.attention.threshold_decode = 0.3;
    s.maxTokens = 6;
    s.layer = 1;
    s.head = 2;
    return ex.run(s.toRequest(longPrompt().toStdString()), 1);
  }();
  return r;
}

}  // namespace sinkscope::gui::test
