// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/validation_controller.h"

#include <QElapsedTimer>
#include <QFileInfo>

#include "engine/model/model.h"
#include "engine/util/paths.h"

namespace sinkscope::gui {

namespace {

// Every error-severity problem, one per line; "" when there is none.
std::string errorsOf(const std::vector<ConfigProblem>& problems) {
  std::string out;
  for (const ConfigProblem& p : problems) {
    if (p.severity != Severity::kError) continue;
    if (!out.empty()) out += '\n';
    out += format_problem(p);
  }
  return out;
}

}  // namespace

ValidationController::ValidationController(QObject* parent) : QObject(parent) {
  qRegisterMetaType<ValidationOutcomePtr>("sinkscope::gui::ValidationOutcomePtr");
  qRegisterMetaType<ValidationStatus>("sinkscope::gui::ValidationStatus");
}

ValidationController::~ValidationController() {
  m_cancel = true;
  if (m_thread) m_thread->wait();  // the run stops at its next poll
}

bool ValidationController::start(ValidationJob job) {
  if (m_running) return false;
  // The previous worker has delivered its last signal, so it is at most returning.
  if (m_thread) m_thread->wait();
  m_cancel = false;
  m_running = true;
  m_outcome.reset();
  m_thread.reset(QThread::create([this, job = std::move(job)]() mutable { work(std::move(job)); }));
  m_thread->setObjectName(QStringLiteral("sinkscope-validation"));
  m_thread->start();
  Q_EMIT started();
  return true;
}

void ValidationController::cancel() {
  if (m_running) m_cancel = true;
}

QString ValidationController::manifestFor(const QString& manifest) {
  return manifest.isEmpty() ? QString::fromStdString(default_dataset_manifest().string())
                            : manifest;
}

QString ValidationController::missingDatasetMessage(const QString& manifest) {
  const QString path = manifestFor(manifest);
  if (QFileInfo::exists(path)) return {};
  if (!manifest.isEmpty()) return tr("The dataset manifest %1 does not exist.").arg(path);
  return tr("The default validation dataset is missing (%1).\n\nAssemble it once with\n"
            "    bash scripts/setup.sh --eval-data\nor choose a dataset manifest.")
      .arg(path);
}

QString ValidationController::write(const ValidationOutcome& outcome, const QString& path) {
  try {
    save_config(path.toStdString(), outcome.validated);
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  return {};
}

void ValidationController::work(ValidationJob job) {
  try {
    if (const QString missing = missingDatasetMessage(job.manifest); !missing.isEmpty())
      throw std::runtime_error(missing.toStdString());
    Dataset dataset = load_dataset(manifestFor(job.manifest).toStdString());
    if (job.quickPerClass > 0)
      dataset =
          select_samples(dataset, {SampleClass::kShort, SampleClass::kPasskey}, job.quickPerClass);
    std::shared_ptr<const Model> model = job.model;
    if (!model) {
      if (job.config.model.path.empty()) throw std::runtime_error("no model is loaded");
      model = Model::load(job.config.model.path);
    }
    if (!job.config.model.sha256.empty() && job.config.model.sha256 != model->sha256())
      throw std::runtime_error("the model file " + model->path().string() +
                               " changed since it was loaded (sha256 differs); load it again");
    std::string problems = errorsOf(check_config(job.config));
    if (problems.empty())
      problems = errorsOf(
          check_against_model(job.config, model->config().head_dim, model->config().n_ctx_train));
    if (!problems.empty())
      throw std::runtime_error("the settings do not form a valid config:\n" + problems);
    if (m_cancel) throw Cancelled();

    job.options.cancel = &m_cancel;
    QElapsedTimer throttle;
    throttle.start();
    bool first = true;
    auto onProgress = [&](const ValidationProgress& p) {
      const bool last = p.sample >= p.samples;
      if (!first && !last && throttle.elapsed() < kProgressIntervalMs) return;
      first = false;
      throttle.restart();
      ValidationStatus s;
      s.sample = p.sample;
      s.samples = p.samples;
      s.current = QString::fromStdString(p.current);
      s.fraction = p.total > 0 ? std::min(1.0, p.done / p.total) : 0.0;
      s.etaSeconds = p.done > 0 && !last ? p.eta_s : -1.0;
      pushToGui([this, s] { Q_EMIT progress(s); });
    };
    ValidationRun run = run_validation(model, job.config, dataset, job.options, onProgress);
    auto out = std::make_shared<ValidationOutcome>();
    const std::string device =
        job.device.empty() ? cpu_device_description(job.options.threads) : job.device;
    out->validated = with_validation(job.config, run, dataset, device);
    out->validated.model.sha256 = model->sha256();
    out->run = std::move(run);
    out->dataset = std::move(dataset);
    pushToGui([this, out = ValidationOutcomePtr(std::move(out))] {
      m_running = false;
      m_outcome = out;
      Q_EMIT finished(out);
    });
  } catch (const Cancelled&) {
    pushToGui([this] {
      m_running = false;
      Q_EMIT cancelled();
    });
  } catch (const std::exception& e) {
    pushToGui([this, msg = QString::fromStdString(e.what())] {
      m_running = false;
      Q_EMIT failed(msg);
    });
  }
}

void ValidationController::pushToGui(std::function<void()> fn) {
  m_outbox.push(std::move(fn));
  QMetaObject::invokeMethod(this, &ValidationController::deliver, Qt::QueuedConnection);
}

void ValidationController::deliver() { m_outbox.deliver(); }

}  // namespace sinkscope::gui
