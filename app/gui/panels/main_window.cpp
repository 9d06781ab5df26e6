// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/main_window.h"

#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>

#include "app/gui/models/sample_prompts.h"
#include "app/gui/panels/attention_map_panel.h"
#include "app/gui/panels/compare_panel.h"
#include "app/gui/panels/controls_panel.h"
#include "app/gui/panels/help_dialog.h"
#include "app/gui/panels/sinks_panel.h"
#include "app/gui/panels/sparsity_panel.h"
#include "app/gui/panels/sweep_panel.h"
#include "app/gui/panels/timeline_panel.h"
#include "app/gui/panels/token_strip.h"
#include "app/gui/panels/validation_dialog.h"
#include "engine/paths.h"

namespace sinkscope::gui {

MainWindow::MainWindow(Workbench* wb, QWidget* parent) : QMainWindow(parent), m_wb(wb) {
  setWindowTitle(tr("SinkScope"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/sinkscope.svg")));
  setCentralWidget(buildCentral());
  buildDocks();
  buildMenus();
  m_controls->setState(m_wb->controls());

  connect(m_wb, &Workbench::modelLoaded, this, [this](const QString& path, const QString& backend, const QString& info) {
    m_backend->setText(tr("Backend: <b>%1</b>").arg(backend == QLatin1String("cpu") ? tr("CPU") : backend));
    m_backend->setToolTip(info);
    m_recentModels.add(path);
    refreshRecentMenus();
    setStatus(tr("Loaded %1 -- %2").arg(QFileInfo(path).fileName(), info));
    const auto n = info.split(QLatin1Char(' '));
  });
  connect(m_wb, &Workbench::modelFailed, this, [this](const QString& path, const QString& msg) {
    m_backend->setText(tr("Backend: <i>no model</i>"));
    showError(tr("Could not load the model"), tr("%1\n\n%2").arg(path, msg));
  });
  connect(m_wb, &Workbench::runningChanged, this, [this](bool on) {
    m_cancel->setEnabled(on);
    if (!on) m_progress->setValue(m_progress->maximum());
  });
  connect(m_wb, &Workbench::runStarted, this, [this] {
    m_progress->setValue(0);
    m_progress->setFormat(tr("starting"));
    setStatus(tr("Running..."));
  });
  connect(m_wb, &Workbench::runProgress, this, [this](double f, double eta, const QString& phase) {
    m_progress->setValue(int(f * 1000));
    m_progress->setFormat(eta >= 0 ? tr("%1 -- %p% -- %2 s left").arg(phase).arg(eta, 0, 'f', eta < 10 ? 1 : 0)
                                   : tr("%1 -- %p%").arg(phase));
  });
  connect(m_wb, &Workbench::resultReady, this, [this](const RunResultPtr& r) {
    m_progress->setFormat(tr("done"));
    m_mapPanel->setHeadRange(r->nLayer, r->nHead);
    m_mapPanel->setSelection(r->map.layer, r->map.head);
    setStatus(tr("%1 prompt tokens, %2 generated (%3) on %4: prefill %5 ms, decode %6 ms, map %7 ms, "
                 "total %8 ms")
                  .arg(r->promptTokens.size()).arg(r->tokens.size())
                  .arg(QString::fromStdString(r->stopReason), QString::fromStdString(r->backendName))
                  .arg(r->prefillMs, 0, 'f', 0).arg(r->decodeMs, 0, 'f', 0).arg(r->mapMs, 0, 'f', 0)
                  .arg(r->totalMs, 0, 'f', 0));
  });
  connect(m_wb, &Workbench::runFailed, this, [this](const QString& msg) {
    m_progress->setFormat(tr("failed"));
    setStatus(tr("Run failed: %1").arg(msg), true);
  });
  connect(m_wb, &Workbench::runCancelled, this, [this] {
    m_progress->setFormat(tr("cancelled"));
    setStatus(tr("Cancelled. Change a control or press Run to run again."));
  });
  connect(m_wb, &Workbench::controlsChanged, this, [this] { m_controls->setState(m_wb->controls()); });
}

QWidget* MainWindow::buildCentral() {
  auto* w = new QWidget(this);
  auto* modelRow = new QHBoxLayout;
  m_model = new QComboBox(w);
  m_model->setEditable(false);
  m_model->setMinimumContentsLength(40);
  m_model->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  auto* browse = new QPushButton(tr("Open model..."), w);
  m_backend = new QLabel(tr("Backend: <i>loading</i>"), w);
  modelRow->addWidget(new QLabel(tr("Model"), w));
  modelRow->addWidget(m_model, 1);
  modelRow->addWidget(browse);
  modelRow->addWidget(m_backend);

  m_prompt = new QPlainTextEdit(w);
  m_prompt->setPlaceholderText(tr("Type or paste a prompt, or pick a sample"));
  auto* promptRow = new QHBoxLayout;
  m_samples = new QComboBox(w);
  m_samples->addItem(tr("Sample prompts..."));
  // The names are long ("GNU GPL v3 (legal, ~7.6K tokens)"): the popup widens to show them,
  // the closed box stays narrow.
  m_samples->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_samples->setMinimumContentsLength(24);
  // Long documents first (app/gui/models/sample_prompts.h); the tooltip names source and licence.
  for (const SamplePrompt& p : samplePrompts()) {
    m_samples->addItem(p.displayName(), p.resource);
    m_samples->setItemData(m_samples->count() - 1, p.source, Qt::ToolTipRole);
  }
  auto* loadPrompt = new QPushButton(tr("Load file..."), w);
  promptRow->addWidget(new QLabel(tr("Prompt"), w));
  promptRow->addStretch(1);
  promptRow->addWidget(m_samples);
  promptRow->addWidget(loadPrompt);

  auto* runRow = new QHBoxLayout;
  m_run = new QPushButton(tr("Run"), w);
  m_run->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
  m_cancel = new QPushButton(tr("Cancel"), w);
  m_cancel->setEnabled(false);
  m_genLength = new QSpinBox(w);
  m_genLength->setRange(1, 1024);
  m_genLength->setValue(m_wb->controls().maxTokens);
  m_genLength->setPrefix(tr("generate "));
  m_genLength->setSuffix(tr(" tokens"));
  m_progress = new QProgressBar(w);
  m_progress->setRange(0, 1000);
  m_progress->setValue(0);
  m_progress->setTextVisible(true);
  m_progress->setFormat(tr("idle"));
  runRow->addWidget(m_run);
  runRow->addWidget(m_cancel);
  runRow->addWidget(m_genLength);
  runRow->addWidget(m_progress, 1);
  m_status = new QLabel(w);
  m_status->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* lay = new QVBoxLayout(w);
  lay->addLayout(modelRow);
  lay->addLayout(promptRow);
  lay->addWidget(m_prompt, 1);
  lay->addLayout(runRow);
  lay->addWidget(m_status);

  m_promptTimer = new QTimer(this);
  m_promptTimer->setSingleShot(true);
  m_promptTimer->setInterval(600);  // typing: wait a little longer than for a slider
  connect(m_prompt, &QPlainTextEdit::textChanged, m_promptTimer, qOverload<>(&QTimer::start));
  connect(m_promptTimer, &QTimer::timeout, this, [this] { m_wb->setPrompt(m_prompt->toPlainText()); });
  connect(m_run, &QPushButton::clicked, this, [this] {
    m_wb->setPrompt(m_prompt->toPlainText());
    m_wb->runNow();
  });
  connect(m_cancel, &QPushButton::clicked, m_wb, &Workbench::cancel);
  connect(m_genLength, &QSpinBox::valueChanged, this, [this](int v) {
    ControlState s = m_wb->controls();
    s.maxTokens = v;
    m_wb->setControls(s);
  });
  connect(browse, &QPushButton::clicked, this, &MainWindow::chooseModel);
  connect(m_model, &QComboBox::activated, this, [this](int i) { loadModelPath(m_model->itemData(i).toString()); });
  connect(loadPrompt, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Load prompt"), QString(), tr("Text (*.txt *.md);;All files (*)"));
    if (!f.isEmpty()) loadPromptFile(f);
  });
  connect(m_samples, &QComboBox::activated, this, [this](int i) {
    if (i > 0) loadPromptFile(m_samples->itemData(i).toString());
  });
  return w;
}

void MainWindow::buildDocks() {
  setDockNestingEnabled(true);
  auto dock = [this](const QString& title, const QString& name, QWidget* w) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(name);
    d->setWidget(w);
    return d;
  };
  m_controls = new ControlsPanel(this);
  m_controls->setQuantizationAvailable(true);  // engine/cache_settings.h: int8 / int4 KV
  addDockWidget(Qt::LeftDockWidgetArea, dock(tr("Controls"), QStringLiteral("controls"), m_controls));
  connect(m_controls, &ControlsPanel::edited, this, [this](const ControlState& s) {
    ControlState t = s;
    t.maxTokens = m_wb->controls().maxTokens;
    t.layer = m_wb->controls().layer;
    t.head = m_wb->controls().head;
    m_wb->setControls(t);
  });

  m_mapPanel = new AttentionMapPanel(m_wb->attentionMap(), this);
  connect(m_mapPanel, &AttentionMapPanel::headChosen, this, [this](int l, int h) {
    ControlState s = m_wb->controls();
    s.layer = l;
    s.head = h;
    m_wb->setControls(s);
  });
  m_views = {dock(tr("Attention map"), QStringLiteral("map"), m_mapPanel),
             dock(tr("Sinks"), QStringLiteral("sinks"), new SinksPanel(m_wb->sinks(), this)),
             dock(tr("Sparsity"), QStringLiteral("sparsity"), new SparsityPanel(m_wb->sparsity(), m_wb->headStats(), this)),
             dock(tr("Timeline"), QStringLiteral("timeline"), new TimelinePanel(m_wb->timeline(), this)),
             dock(tr("Compare"), QStringLiteral("compare"), new ComparePanel(m_wb->compare(), this))};
  addDockWidget(Qt::RightDockWidgetArea, m_views[0]);
  for (int i = 1; i < m_views.size(); ++i) tabifyDockWidget(m_views[0], m_views[i]);
  m_views[0]->raise();

  auto* strip = new TokenStrip(this);
  strip->setModel(m_wb->tokens());
  connect(strip, &TokenStrip::tokenChosen, m_mapPanel, &AttentionMapPanel::highlightToken);
  auto* stripDock = dock(tr("Tokens"), QStringLiteral("tokens"), strip);
  addDockWidget(Qt::BottomDockWidgetArea, stripDock);
  resizeDocks({stripDock}, {110}, Qt::Vertical);

  // Not one of the run views (viewDocks()): it shows a sweep file, so it stays hidden until one
  // is opened.
  m_sweepPanel = new SweepPanel(m_wb->sweep(), this);
  connect(m_sweepPanel, &SweepPanel::loadPoint, this, &MainWindow::loadSweepPoint);
  m_sweepDock = dock(tr("Sweep"), QStringLiteral("sweep"), m_sweepPanel);
  addDockWidget(Qt::RightDockWidgetArea, m_sweepDock);
  tabifyDockWidget(m_views[0], m_sweepDock);
  m_sweepDock->hide();
  m_views[0]->raise();
  resizeDocks({m_views[0]}, {760}, Qt::Horizontal);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("Open &model..."), QKeySequence::Open, this, &MainWindow::chooseModel);
  m_recentModelMenu = file->addMenu(tr("Recent models"));
  file->addAction(tr("Load &prompt..."), this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Load prompt"));
    if (!f.isEmpty()) loadPromptFile(f);
  });
  m_recentPromptMenu = file->addMenu(tr("Recent prompts"));
  file->addSeparator();
  file->addAction(tr("&Import config..."), this, &MainWindow::importConfig);
  m_recentConfigMenu = file->addMenu(tr("Recent configs"));
  file->addAction(tr("&Export config (validate)..."), QKeySequence::Save, this, &MainWindow::exportConfig);
  file->addAction(tr("Open s&weep results..."), this, &MainWindow::openSweep);
  file->addAction(tr("Export &trace..."), this, [this] {
    static_cast<TimelinePanel*>(m_views[3]->widget())->exportTrace();
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  // One "what am I looking at" page per view; F1 opens the page of the view in front.
  for (const HelpDialog::Page& p : HelpDialog::pages())
    help->addAction(tr("What am I looking at: %1").arg(p.title), this, [this, id = p.id] { HelpDialog::open(this, id); });
  help->addAction(tr("Help on the current view"), QKeySequence::HelpContents, this, [this] {
    // The view holding the keyboard focus, else the first one on screen (not a hidden tab).
    QString focused, shown;
    for (QDockWidget* d : m_views) {
      if (d->isAncestorOf(QApplication::focusWidget())) focused = HelpDialog::pageForView(d->objectName());
      if (shown.isEmpty() && d->isVisible() && !d->visibleRegion().isEmpty()) shown = HelpDialog::pageForView(d->objectName());
    }
    HelpDialog::open(this, focused.isEmpty() ? shown : focused);
  });
  help->addSeparator();
  help->addAction(tr("&About SinkScope"), this, [this] {
    QMessageBox::about(this, tr("About SinkScope"),
                       tr("SinkScope: attention sinks, KV-cache retention and dynamic sparse attention, "
                          "measured against the dense baseline."));
  });
  refreshRecentMenus();

  // The model list: the default model first, then recent ones.
  const QString def = QString::fromStdString(default_model_path().string());
  m_model->addItem(QFileInfo(def).fileName() + tr(" (default)"), def);
  for (const QString& p : m_recentModels.list())
    if (p != def) m_model->addItem(QFileInfo(p).fileName(), p);
}

void MainWindow::refreshRecentMenus() {
  auto fill = [this](QMenu* menu, RecentFiles& list, auto open) {
    menu->clear();
    for (const QString& p : list.list()) menu->addAction(p, this, [p, open] { open(p); });
    menu->setEnabled(!menu->isEmpty());
  };
  fill(m_recentModelMenu, m_recentModels, [this](const QString& p) { loadModelPath(p); });
  fill(m_recentPromptMenu, m_recentPrompts, [this](const QString& p) { loadPromptFile(p); });
  fill(m_recentConfigMenu, m_recentConfigs, [this](const QString& p) {
    QString warnings;
    const QString err = m_wb->importConfig(p, &warnings);
    if (!err.isEmpty()) showError(tr("Could not import %1").arg(p), err);
  });
}

void MainWindow::chooseModel() {
  const QString f = QFileDialog::getOpenFileName(this, tr("Open model"), QString(), tr("GGUF models (*.gguf);;All files (*)"));
  if (f.isEmpty()) return;
  if (m_model->findData(f) < 0) m_model->addItem(QFileInfo(f).fileName(), f);
  m_model->setCurrentIndex(m_model->findData(f));
  loadModelPath(f);
}

void MainWindow::loadModelPath(const QString& path) {
  const int i = m_model->findData(path);
  if (i < 0) m_model->addItem(QFileInfo(path).fileName(), path);
  m_model->setCurrentIndex(m_model->findData(path));
  m_backend->setText(tr("Backend: <i>loading</i>"));
  setStatus(tr("Loading %1 ...").arg(path));
  m_wb->loadModel(path);
}

void MainWindow::loadPromptFile(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) {
    showError(tr("Could not read the prompt"), tr("%1: %2").arg(path, f.errorString()));
    return;
  }
  setPromptText(QString::fromUtf8(f.readAll()).trimmed());
  if (!path.startsWith(QLatin1Char(':'))) {
    m_recentPrompts.add(path);
    refreshRecentMenus();
  }
}

void MainWindow::setPromptText(const QString& text) {
  m_prompt->setPlainText(text);
  m_promptTimer->stop();
  m_wb->setPrompt(text);
}

void MainWindow::importConfig() {
  const QString f = QFileDialog::getOpenFileName(this, tr("Import config"), QString(), tr("SinkScope config (*.yaml *.yml)"));
  if (f.isEmpty()) return;
  QString warnings;
  const QString err = m_wb->importConfig(f, &warnings);
  if (!err.isEmpty()) {
    showError(tr("Could not import %1").arg(QFileInfo(f).fileName()), err);
    return;
  }
  m_recentConfigs.add(f);
  refreshRecentMenus();
  setStatus(warnings.isEmpty() ? tr("Imported %1").arg(f) : tr("Imported %1 with warnings:\n%2").arg(f, warnings));
}

void MainWindow::exportConfig() {
  const QStringList recent = m_recentConfigs.list();
  const QString dir = recent.isEmpty() ? QDir::currentPath() : QFileInfo(recent.first()).absolutePath();
  ValidationDialog dialog(m_wb, QDir(dir).filePath(QStringLiteral("sinkscope-config.yaml")), this);
  connect(&dialog, &ValidationDialog::written, this, [this](const QString& path, bool validated) {
    m_recentConfigs.add(path);
    refreshRecentMenus();
    setStatus(validated ? tr("Wrote the validated config %1").arg(path)
                        : tr("Wrote %1 (not validated)").arg(path));
  });
  dialog.exec();
}

void MainWindow::openSweep() {
  const QString f = QFileDialog::getOpenFileName(this, tr("Open sweep results"), QString(),
                                                 tr("Sweep results (*.json);;All files (*)"));
  if (f.isEmpty()) return;
  if (const QString err = m_wb->openSweep(f); !err.isEmpty()) {
    showError(tr("Could not open the sweep results"), err);
    return;
  }
  m_sweepDock->show();
  m_sweepDock->raise();
  setStatus(tr("Opened %1: %2 points").arg(f).arg(m_wb->sweep()->rowCount()));
}

void MainWindow::loadSweepPoint(int row) {
  QString warnings;
  if (const QString err = m_wb->applySweepPoint(row, &warnings); !err.isEmpty()) {
    showError(tr("Could not load the sweep point"), err);
    return;
  }
  const SweepPoint* p = m_wb->sweep()->point(row);
  setStatus(warnings.isEmpty() ? tr("Loaded sweep point %1 (%2); running...").arg(p->index).arg(p->label)
                               : tr("Loaded sweep point %1 (%2) with warnings:\n%3").arg(p->index).arg(p->label, warnings));
}

void MainWindow::showError(const QString& title, const QString& message) {
  setStatus(title + QStringLiteral(": ") + message, true);
  if (!qApp->property("sinkscopeNoDialogs").toBool()) QMessageBox::warning(this, title, message);
}

void MainWindow::setStatus(const QString& text, bool error) {
  m_status->setStyleSheet(error ? QStringLiteral("color: #b00020") : QString());
  m_status->setText(text);
}

void MainWindow::restoreSettings() {
  QSettings s;
  restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
  restoreState(s.value(QStringLiteral("window/state")).toByteArray());
}

void MainWindow::closeEvent(QCloseEvent* e) {
  QSettings s;
  s.setValue(QStringLiteral("window/geometry"), saveGeometry());
  s.setValue(QStringLiteral("window/state"), saveState());
  s.setValue(QStringLiteral("session/prompt"), m_prompt->toPlainText());
  s.setValue(QStringLiteral("session/config"), QString::fromStdString(format_config(m_wb->currentConfig())));
  m_wb->cancel();
  e->accept();
}

}  // namespace sinkscope::gui
