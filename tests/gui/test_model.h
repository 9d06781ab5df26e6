// SPDX-License-Identifier: Apache-2.0
// Fixtures for the GUI tests: a small random-weight Llama (fast) and the default model when present.
#pragma once

#include <QString>

#include <memory>

#include "engine/model.h"

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

namespace sinkscope::gui::test {
// One sparse run of the random model on longPrompt() (computed once per process).
RunResultPtr sampleResult();
}  // namespace sinkscope::gui::test
