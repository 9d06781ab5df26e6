// SPDX-License-Identifier: Apache-2.0
// "Export validated config" without the widgets: runs engine/eval/validation.h's run_validation for
// one config on a dataset (the default one, a chosen manifest, or a quick subset of short texts
// and passkey tasks) on a worker thread of its own, and hands back an immutable outcome that
// the dialog shows (gates, results) and writes atomically.
//
// Why not the engine thread: run_validation builds its own CPU backends (the reference backend)
// and shares only the immutable Model, so it needs neither the GPU context nor the engine
// thread's executor, and a validation of several minutes does not hold up interactive runs.
// The threading rules are the engine thread's: the GUI thread never blocks on the work;
// cancellation is an atomic flag the engine polls; progress is throttled and carries an ETA;
// every signal is emitted on this object's thread through a GuiOutbox (as in EngineController),
// so nothing is delivered after this object is gone.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "app/gui/models/gui_outbox.h"
#include "engine/config/config.h"
#include "engine/eval/validation.h"

namespace sinkscope::gui {

struct ValidationJob {
  SinkScopeConfig config;              // the settings to validate
  std::shared_ptr<const Model> model;  // null: loaded from config.model.path on the worker
  QString manifest;                    // empty: the default dataset (engine/util/paths.h)
  int quickPerClass = 0;      // > 0: short texts and passkey tasks only, this many of each
  ValidationOptions options;  // its cancel flag is the controller's
  std::string device;         // provenance.device (empty: the CPU's description)
};

struct ValidationOutcome {
  ValidationRun run;
  Dataset dataset;            // what was run (a subset carries "[subset ...]" in its name)
  SinkScopeConfig validated;  // the config with its validation block and provenance
};
using ValidationOutcomePtr = std::shared_ptr<const ValidationOutcome>;

struct ValidationStatus {
  int sample = 0, samples = 0;  // samples finished / total
  QString current;              // id of the sample being run
  double fraction = 0;          // of the work, in [0, 1]
  double etaSeconds = -1;       // -1: not known yet
};

class ValidationController : public QObject {
  Q_OBJECT
 public:
  explicit ValidationController(QObject* parent = nullptr);
  ~ValidationController() override;  // cancels a running validation and waits for it

  // Starts a validation; false (and nothing started) when one is running.
  bool start(ValidationJob job);
  void cancel();
  bool running() const { return m_running; }
  ValidationOutcomePtr outcome() const { return m_outcome; }  // the last finished one

  // Writes the outcome's validated config atomically (passed: false when a gate failed).
  // Returns "" or the error.
  static QString write(const ValidationOutcome& outcome, const QString& path);
  // The manifest a job with `manifest` uses, and, when it is the default one and missing, the
  // message that says how to get it ("" when it exists or a manifest was chosen).
  static QString manifestFor(const QString& manifest);
  static QString missingDatasetMessage(const QString& manifest);

  static constexpr int kProgressIntervalMs = 100;

 Q_SIGNALS:
  void started();
  void progress(const sinkscope::gui::ValidationStatus& status);
  void finished(sinkscope::gui::ValidationOutcomePtr outcome);
  void failed(const QString& message);
  void cancelled();

 private:
  void work(ValidationJob job);  // on the worker thread
  void pushToGui(std::function<void()> fn);
  void deliver();

  GuiOutbox m_outbox;
  std::atomic<bool> m_cancel{false};
  std::unique_ptr<QThread> m_thread;
  bool m_running = false;  // GUI thread only
  ValidationOutcomePtr m_outcome;
};

}  // namespace sinkscope::gui

Q_DECLARE_METATYPE(sinkscope::gui::ValidationOutcomePtr)
Q_DECLARE_METATYPE(sinkscope::gui::ValidationStatus)
