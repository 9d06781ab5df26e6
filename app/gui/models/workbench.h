// SPDX-License-Identifier: Apache-2.0
// The workbench's state and wiring, without widgets: the controls, the prompt and the model; a
// debounced auto re-run (newest wins); the engine thread; one view-model per dock fed from each
// run's snapshot; config export and import through engine/config/config.h. The panels only bind to
// this object, and the tests drive it directly.
#pragma once

#include <QObject>
#include <QTimer>

#include "app/gui/models/control_state.h"
#include "app/gui/models/engine_controller.h"
#include "app/gui/models/head_stats_model.h"
#include "app/gui/models/sweep_model.h"
#include "app/gui/models/token_list_model.h"
#include "app/gui/models/validation_controller.h"
#include "app/gui/models/view_models.h"

namespace sinkscope::gui {

class Workbench : public QObject {
  Q_OBJECT
 public:
  explicit Workbench(BackendKind kind = BackendKind::kAuto, int threads = 0, GpuChoice gpu = {},
                     QObject* parent = nullptr);

  EngineController* engine() { return &m_engine; }
  const ControlState& controls() const { return m_controls; }
  const QString& prompt() const { return m_prompt; }
  const QString& modelPath() const { return m_modelPath; }
  const QString& backendName() const { return m_backend; }
  bool modelReady() const { return m_modelReady; }
  bool running() const { return m_running; }
  RunResultPtr lastResult() const { return m_last; }
  // The views show the last finished run; they are stale when it no longer matches the model,
  // prompt and controls (after a cancel, a failed run, a change not yet run). staleReason()
  // says why, for a banner; "" when the views are current.
  bool viewsStale() const { return !m_staleReason.isEmpty(); }
  // Stale, and a run that will update the views is running or about to start (auto-run).
  bool viewsUpdating() const { return m_updating; }
  const QString& staleReason() const { return m_staleReason; }

  // A change schedules a run after debounceMs (restarted by every change: the newest wins).
  // Short, so the first view updates within ~200 ms of a change: a run still going when a newer
  // one is posted is cancelled between layers (EngineController::post), so a slider drag costs
  // no queue of stale runs.
  static constexpr int kDefaultDebounceMs = 60;
  void setControls(const ControlState& c);
  // The user picked a head (the map's layer and head, a heatmap cell, a row of the head table):
  // the map shows it, and the Sinks chart shows it at once and after every later run. Until the
  // first pick the chart shows each run's strongest sink (SinksView).
  void chooseHead(int layer, int head);
  void setPrompt(const QString& text);
  void setDebounceMs(int ms) { m_debounce.setInterval(ms); }
  int debounceMs() const { return m_debounce.interval(); }
  void setAutoRun(bool on) { m_autoRun = on; }

  void loadModel(const QString& path);  // the first run follows when it loaded
  void setModel(std::shared_ptr<const Model> model);  // tests: an in-memory model
  // The CUDA backends' weight mode and activation precision (GpuChoice): with a model loaded,
  // its backends are remade and modelLoaded comes again (then a run, as after a load), or
  // modelFailed with the previous choice kept. The CPU backend ignores both.
  void setGpuChoice(GpuChoice gpu);
  const GpuChoice& gpuChoice() const { return m_gpu; }
  void runNow();
  void cancel();

  TokenListModel* tokens() { return &m_tokens; }
  HeadStatsModel* headStats() { return &m_headStats; }
  AttentionMapView* attentionMap() { return &m_map; }
  SinksView* sinks() { return &m_sinks; }
  SparsityView* sparsity() { return &m_sparsity; }
  TimelineView* timeline() { return &m_timeline; }
  CompareView* compare() { return &m_compare; }

  // Writes the current settings as a config (atomically) without validating them: no validation
  // block. Returns "" or the error; *note gets what the person should know.
  QString exportConfig(const QString& path, QString* note = nullptr) const;
  // The config these settings export (provenance filled in).
  SinkScopeConfig currentConfig() const;
  // Reads a config and applies its settings. Returns "" or every problem, one per line, each
  // naming its key ("inference.cache.window_size: ..."); *warnings gets the warnings.
  QString importConfig(const QString& path, QString* warnings = nullptr);

  // Validated export: a validation job for the current settings (the dialog starts it on
  // validation()). manifest "" is the default dataset; quickPerClass > 0 runs only that many
  // short texts and passkey tasks (the dataset name says "subset").
  ValidationJob validationJob(const QString& manifest = {}, int quickPerClass = 0) const;
  ValidationController* validation() { return &m_validation; }

  // Sweeps: reads a `sinkscope-cli sweep --json-out` file into sweep() ("" or the error), and
  // applies one point's config to the controls and re-runs ("" or the config's problems).
  QString openSweep(const QString& path);
  QString applySweepPoint(int row, QString* warnings = nullptr);
  SweepPointsModel* sweep() { return &m_sweep; }

 Q_SIGNALS:
  void controlsChanged();
  void modelLoaded(const QString& path, const QString& backend, const QString& info);
  void modelFailed(const QString& path, const QString& message);
  void runStarted();
  void runProgress(double fraction, double etaSeconds, const QString& phase);
  void resultReady(sinkscope::gui::RunResultPtr result);
  // A partial result of the run going on (RunResult::partial), already given to the Sparsity
  // view; resultReady follows with the whole run.
  void partialResult(sinkscope::gui::RunResultPtr result);
  void runFailed(const QString& message);
  void runCancelled();
  void runningChanged(bool running);
  void staleChanged(bool stale, const QString& reason);
  // runNow() was asked for but cannot start (no model, empty prompt): the message says why.
  void runRefused(const QString& message);

 private:
  void schedule();
  void setRunning(bool on);
  void onFinished(const RunResultPtr& r);
  // Re-derives the stale state; `event` names what just happened (a cancel, a failure) when it
  // is the reason.
  void updateStale(const QString& event = {});
  // Applies a parsed config's settings; "" or its errors (source names it in the messages).
  QString applyConfig(const ConfigParseResult& r, const std::string& source, QString* warnings);

  EngineController m_engine;
  int m_threads = 0;
  std::shared_ptr<const Model> m_model;  // set by setModel() (tests); else loaded from the path
  ControlState m_controls;
  QString m_prompt, m_modelPath, m_backend, m_sha256;
  bool m_modelReady = false, m_running = false, m_autoRun = true;
  QTimer m_debounce;
  uint64_t m_lastRunId = 0, m_lastModelId = 0;
  GpuChoice m_gpu;  // what the engine's backends were last asked to use
  GpuChoice m_prevGpu;       // restored when remaking the backends for m_gpu fails
  bool m_gpuPending = false;  // a GPU choice change is in flight
  RunResultPtr m_last;
  // What the views show (the last finished run's inputs) and what the pending run was asked with.
  ControlState m_shownControls, m_runControls;
  QString m_shownPrompt, m_runPrompt, m_shownModel;
  QString m_staleReason, m_lastEvent;
  bool m_updating = false;
  std::shared_ptr<const Model> m_prevModel;  // kept while a load is in flight (restored on failure)
  bool m_prevReady = false;
  TokenListModel m_tokens;
  HeadStatsModel m_headStats;
  AttentionMapView m_map;
  SinksView m_sinks;
  SparsityView m_sparsity;
  TimelineView m_timeline;
  CompareView m_compare;
  SweepPointsModel m_sweep;
  ValidationController m_validation;
};

}  // namespace sinkscope::gui
