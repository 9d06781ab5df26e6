// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/workbench.h"

#include <QDateTime>

#include "engine/version.h"

namespace sinkscope::gui {

Workbench::Workbench(BackendKind kind, int threads, GpuChoice gpu, QObject* parent)
    : QObject(parent), m_engine(kind, threads, gpu), m_threads(threads), m_gpu(gpu) {
  m_debounce.setSingleShot(true);
  m_debounce.setInterval(kDefaultDebounceMs);
  connect(&m_debounce, &QTimer::timeout, this, &Workbench::runNow);
  connect(&m_engine, &EngineController::modelLoaded, this,
          [this](quint64 id, const QString& path, const QString& backend, const QString& info,
                 const QString& sha) {
            if (id != m_lastModelId) return;
            m_modelReady = true;
            m_gpuPending = false;
            m_prevModel.reset();
            m_modelPath = path;
            m_backend = backend;
            m_sha256 = sha;
            Q_EMIT modelLoaded(path, backend, info);
            updateStale();
            if (m_autoRun) runNow();
          });
  connect(&m_engine, &EngineController::modelFailed, this,
          [this](quint64 id, const QString& path, const QString& message) {
            if (id != m_lastModelId) return;
            // The engine kept the previous model (and GPU choice): so does the workbench.
            m_model = std::move(m_prevModel);
            m_modelReady = m_prevReady;
            if (m_gpuPending) m_gpu = m_prevGpu;
            m_gpuPending = false;
            Q_EMIT modelFailed(path, message);
          });
  connect(&m_engine, &EngineController::started, this, [this](quint64 id) {
    if (id == m_lastRunId) Q_EMIT runStarted();
  });
  connect(&m_engine, &EngineController::progress, this,
          [this](quint64 id, double f, double eta, const QString& phase) {
            if (id == m_lastRunId) Q_EMIT runProgress(f, eta, phase);
          });
  connect(&m_engine, &EngineController::finished, this, &Workbench::onFinished);
  // The prefill's layers stream into the Sparsity view while the run goes on; the other views
  // wait for the final result.
  connect(&m_engine, &EngineController::partial, this, [this](const RunResultPtr& r) {
    if (!r || r->id != m_lastRunId || !m_running) return;
    m_sparsity.setResult(r);
    Q_EMIT partialResult(r);
  });
  connect(&m_engine, &EngineController::failed, this, [this](quint64 id, const QString& msg) {
    if (id != m_lastRunId) return;
    setRunning(false);
    m_sparsity.setResult(m_last);  // back from any partial result to what the others show
    updateStale(tr("the last run failed (%1)").arg(msg));
    Q_EMIT runFailed(msg);
  });
  connect(&m_engine, &EngineController::cancelled, this, [this](quint64 id) {
    if (id != m_lastRunId) return;  // superseded by a newer run, which keeps the bar going
    setRunning(false);
    m_sparsity.setResult(m_last);
    updateStale(tr("the last run was cancelled"));
    Q_EMIT runCancelled();
  });
}

void Workbench::updateStale(const QString& event) {
  if (!event.isEmpty()) m_lastEvent = event;
  QString reason;
  bool updating = false;
  if (m_last) {
    QStringList what;
    if (m_shownModel != m_modelPath) what << tr("another model is loaded");
    if (m_shownPrompt != m_prompt) what << tr("the prompt changed");
    ControlState a = m_shownControls, b = m_controls;
    a.maxTokens = b.maxTokens = 0;  // the generation length is compared too, below
    if (!(a == b)) what << tr("the controls changed");
    if (m_shownControls.maxTokens != m_controls.maxTokens) what << tr("the generation length changed");
    if (!what.isEmpty()) {
      reason = tr("The views show an earlier run: %1").arg(what.join(QStringLiteral(", ")));
      updating = m_running || (m_lastEvent.isEmpty() && m_autoRun && m_modelReady &&
                               !m_prompt.trimmed().isEmpty());
      if (updating) reason += tr("; updating\u2026");
      else if (!m_lastEvent.isEmpty()) reason += QStringLiteral("; ") + m_lastEvent + QLatin1Char('.');
      else reason += tr("; press Run to update.");
    }
  }
  m_updating = updating;
  if (reason == m_staleReason) return;
  const bool was = !m_staleReason.isEmpty();
  m_staleReason = reason;
  if (was || !reason.isEmpty()) Q_EMIT staleChanged(!reason.isEmpty(), reason);
}

void Workbench::setControls(const ControlState& c) {
  if (c == m_controls) return;
  m_controls = c;
  Q_EMIT controlsChanged();
  m_lastEvent.clear();
  updateStale();
  schedule();
}

void Workbench::chooseHead(int layer, int head) {
  m_sinks.pickHead(layer, head);
  ControlState s = m_controls;
  s.layer = layer;
  s.head = head;
  setControls(s);
}

void Workbench::setPrompt(const QString& text) {
  if (text == m_prompt) return;
  m_prompt = text;
  m_lastEvent.clear();
  updateStale();
  schedule();
}

void Workbench::schedule() {
  if (m_autoRun && m_modelReady) m_debounce.start();
}

void Workbench::loadModel(const QString& path) {
  // Until the new model is in, the current one is not used; a failed load restores it.
  if (m_modelReady || m_model) {
    m_prevModel = m_model;
    m_prevReady = m_modelReady;
  }
  m_modelReady = false;
  m_model.reset();
  m_gpuPending = false;
  m_lastModelId = m_engine.loadModel(path);
}

void Workbench::setGpuChoice(GpuChoice gpu) {
  const GpuChoice prev = m_gpu;
  m_gpu = gpu;
  const uint64_t id = m_engine.setGpuChoice(gpu);
  if (!(m_modelReady || m_model)) return;
  if (gpu.weights == prev.weights && gpu.activations == prev.activations) return;
  // As a load: the model stays, its backends are remade; a failure restores the state.
  m_prevGpu = prev;
  m_gpuPending = true;
  m_prevModel = m_model;
  m_prevReady = m_modelReady;
  m_modelReady = false;
  m_lastModelId = id;
}

void Workbench::setModel(std::shared_ptr<const Model> model) {
  m_modelReady = false;
  m_model = model;
  m_lastModelId = m_engine.setModel(std::move(model));
}

void Workbench::runNow() {
  m_debounce.stop();
  if (!m_modelReady) {
    Q_EMIT runRefused(tr("No model is loaded: open a GGUF model or a checkpoint folder (File > Open model)."));
    return;
  }
  if (m_prompt.trimmed().isEmpty()) {
    Q_EMIT runRefused(tr("The prompt is empty: type some text or pick a sample document."));
    return;
  }
  m_lastRunId = m_engine.run(m_controls.toRequest(m_prompt.toStdString()));
  m_runControls = m_controls;
  m_runPrompt = m_prompt;
  m_lastEvent.clear();
  setRunning(true);
  updateStale();
}

void Workbench::cancel() {
  m_debounce.stop();
  m_engine.cancel();
}

void Workbench::setRunning(bool on) {
  if (on == m_running) return;
  m_running = on;
  Q_EMIT runningChanged(on);
}

void Workbench::onFinished(const RunResultPtr& r) {
  if (!r || r->id != m_lastRunId) return;  // a stale result: a newer run is on its way
  m_last = r;
  m_shownControls = m_runControls;
  m_shownPrompt = m_runPrompt;
  m_shownModel = m_modelPath;
  m_tokens.setResult(r);
  m_headStats.setResult(r);
  m_map.setResult(r);
  m_sinks.setResult(r);
  m_sparsity.setResult(r);
  m_timeline.setResult(r);
  m_compare.setResult(r);
  setRunning(false);
  m_lastEvent.clear();
  updateStale();
  Q_EMIT resultReady(r);
}

SinkScopeConfig Workbench::currentConfig() const {
  SinkScopeConfig c = m_controls.toConfig(m_modelPath.toStdString(), m_sha256.toStdString());
  c.provenance.engine_version = SINKSCOPE_VERSION;
  c.provenance.git_sha = SINKSCOPE_GIT_SHA;
  c.provenance.device = m_backend.isEmpty() ? std::string("cpu") : m_backend.toStdString();
  c.provenance.created =
      QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString();
  return c;
}

QString Workbench::exportConfig(const QString& path, QString* note) const {
  const SinkScopeConfig c = currentConfig();
  QStringList errors;
  for (const ConfigProblem& p : check_config(c))
    if (p.severity == Severity::kError) errors << QString::fromStdString(format_problem(p));
  if (!errors.isEmpty()) return tr("The settings do not form a valid config:\n") + errors.join(QLatin1Char('\n'));
  try {
    save_config(path.toStdString(), c);
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  if (note)
    *note = tr("Wrote the settings without a validation block, so this config is not "
               "validated. Validate it against the dense baseline to record the evidence (the "
               "Compare view shows the quality on the current prompt only).");
  return {};
}

QString Workbench::importConfig(const QString& path, QString* warnings) {
  ConfigParseResult r;
  try {
    r = load_config_file(path.toStdString());
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  return applyConfig(r, path.toStdString(), warnings);
}

QString Workbench::applyConfig(const ConfigParseResult& r, const std::string& source,
                               QString* warnings) {
  QStringList errors, warns;
  for (const ConfigProblem& p : r.problems)
    (p.severity == Severity::kError ? errors : warns)
        << QString::fromStdString(format_problem(p, source));
  if (warnings) *warnings = warns.join(QLatin1Char('\n'));
  if (!errors.isEmpty()) return errors.join(QLatin1Char('\n'));
  setControls(ControlState::fromConfig(r.config, m_controls));
  return {};
}

ValidationJob Workbench::validationJob(const QString& manifest, int quickPerClass) const {
  ValidationJob job;
  job.config = currentConfig();
  job.model = m_model;
  job.manifest = manifest;
  job.quickPerClass = quickPerClass;
  job.options.threads = m_threads;  // job.device stays empty: the worker describes the CPU
  return job;
}

QString Workbench::openSweep(const QString& path) {
  return m_sweep.load(path);
}

QString Workbench::applySweepPoint(int row, QString* warnings) {
  const SweepPoint* p = m_sweep.point(row);
  if (!p) return tr("There is no sweep point %1.").arg(row);
  if (!p->valid) return tr("Point %1 (%2) was not run: %3").arg(p->index).arg(p->label, p->invalid);
  const ConfigParseResult r = parse_config(p->configYaml.toStdString());
  const std::string source = "sweep point " + std::to_string(p->index);
  QString warns;
  const QString err = applyConfig(r, source, &warns);
  if (!err.isEmpty()) return err;
  if (!r.config.model.sha256.empty() && !m_sha256.isEmpty() && m_sha256.toStdString() != r.config.model.sha256)
    warns += (warns.isEmpty() ? QString() : QStringLiteral("\n")) +
             tr("The sweep measured another model (sha256 %1...); the loaded model differs.")
                 .arg(QString::fromStdString(r.config.model.sha256.substr(0, 12)));
  if (warnings) *warnings = warns;
  runNow();  // also when the controls did not change: the point's run is what was asked for
  return {};
}

}  // namespace sinkscope::gui
