// SPDX-License-Identifier: Apache-2.0
// Fixtures for the GUI tests: a small random-weight Llama (fast) and the default model when present.
#pragma once

#include <QString>

#include <memory>

#include "engine/model/model.h"

namespace sinkscope::gui::test {

// A random-weight model written once per process to a temporary GGUF and loaded.
std::shared_ptr<const Model> randomModel();
QString randomModelPath();
// The default model's path when the file exists, else "".
QString defaultModelPath();
// A prompt long enough to span several KV tiles of 64.
QString longPrompt();

}  // namespace sinkscope::gui::test

#include "app/gui/models/run_types.h"

#include <QAbstractItemModel>
#include <QTest>

namespace sinkscope::gui::test {
// One sparse run of the random model on longPrompt() (computed once per process).
RunResultPtr sampleResult();

// The check every view model gets (the caller keeps a QAbstractItemModelTester on `model`):
// empty at first; after fill(model) rows exist and every cell has data; a second fill (a new
// snapshot) resets cleanly. The caller checks the contents afterwards
// (QTest::currentTestFailed() says whether this part failed).
template <class M, class Fill>
void checkEmptyThenFilled(M& model, Fill fill) {
  QCOMPARE(model.rowCount(), 0);
  fill(model);
  QVERIFY(model.rowCount() > 0);
  for (int r = 0; r < model.rowCount(); ++r)
    for (int c = 0; c < static_cast<QAbstractItemModel&>(model).columnCount(); ++c)
      QVERIFY(model.data(model.index(r, c)).isValid());
  fill(model);
}
}  // namespace sinkscope::gui::test
