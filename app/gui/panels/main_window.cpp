// SPDX-License-Identifier: Apache-2.0
#include "app/gui/panels/main_window.h"

#include <QActionGroup>
#include <QApplication>

#include <algorithm>
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
#include <QtMath>
#include <QScrollArea>
#include <QStatusBar>
#include <QToolButton>
#include <QVBoxLayout>

#include "app/gui/models/sample_prompts.h"
#include "app/gui/panels/attention_map_panel.h"
#include "app/gui/panels/compare_panel.h"
#include "app/gui/panels/controls_panel.h"
#include "app/gui/panels/help_dialog.h"
#include "app/gui/panels/model_picker.h"
#include "app/gui/panels/sinks_panel.h"
#include "app/gui/panels/sparsity_panel.h"
#include "app/gui/panels/sweep_panel.h"
#include "app/gui/panels/timeline_panel.h"
#include "app/gui/panels/token_strip.h"
#include "app/gui/panels/validation_dialog.h"
#include "engine/util/paths.h"

namespace sinkscope::gui {


namespace {

// The status line: one line that ends in "…" where the window is narrower than the message,
// instead of being cut off mid-letter (the whole message is the tooltip, and errors also come
// as a dialog).
class StatusLabel final : public QLabel {
 public:
  using QLabel::QLabel;
  void setFullText(const QString& text) {
    m_full = text;
    fit();
  }

 protected:
  void resizeEvent(QResizeEvent* e) override {
    QLabel::resizeEvent(e);
    fit();
  }

 private:
  void fit() {
    QLabel::setText(fontMetrics().elidedText(m_full, Qt::ElideRight, std::max(0, contentsRect().width())));
  }
  QString m_full;
};

}  // namespace

MainWindow::MainWindow(Workbench* wb, QWidget* parent) : QMainWindow(parent), m_wb(wb) {
  setWindowTitle(tr("SinkScope"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/sinkscope.svg")));
  setCentralWidget(buildCentral());
  buildDocks();
  buildMenus();
  m_controls->setState(m_wb->controls());
  m_defaultState = saveState();  // View > Reset layout
  // The strip's height once the window is laid out with its real fonts and width (a start
  // without a model gets no banner update that would do it).
  QTimer::singleShot(0, this, &MainWindow::fitCentralHeight);

  connect(m_wb, &Workbench::modelLoaded, this, [this](const QString& path, const QString& backend, const QString& info) {
    m_backend->setText(tr("Backend: <b>%1</b>").arg(backend == QLatin1String("cpu") ? tr("CPU") : backend));
    syncGpuMenu(backend);
    syncGpuChecks();
    if (backend != QLatin1String("cpu")) {  // a choice the backends took: kept for the next start
      QSettings s;
      s.setValue(QStringLiteral("engine/gpuWeights"),
                 QString::fromLatin1(gpu_weights_name(m_wb->gpuChoice().weights)));
      s.setValue(QStringLiteral("engine/gpuActivations"),
                 QString::fromLatin1(gpu_activations_name(m_wb->gpuChoice().activations)));
    }
    m_backend->setToolTip(info);
    m_mapPanel->setModelLoaded(true);
    m_goodModel = path;
    m_recentModels.add(path);
    refreshRecentMenus();
    selectModelItem(path);
    setStatus(tr("Loaded %1 -- %2").arg(QFileInfo(path).fileName(), info));
  });
  connect(m_wb, &Workbench::modelFailed, this, [this](const QString& path, const QString& msg) {
    syncGpuChecks();  // a GPU choice that failed is undone
    // The previous model stays loaded and usable; the bad file leaves the model list.
    const int bad = m_model->findData(path);
    if (bad >= 0 && path != m_goodModel && !m_model->itemText(bad).endsWith(tr(" (default)")))
      m_model->removeItem(bad);
    QString kept;
    if (m_wb->modelReady()) {
      selectModelItem(m_goodModel);
      m_backend->setText(tr("Backend: <b>%1</b>").arg(m_wb->backendName() == QLatin1String("cpu") ? tr("CPU") : m_wb->backendName()));
      kept = tr("\n\nStill using %1.").arg(QFileInfo(m_goodModel).fileName());
    } else {
      // Nothing loaded: the picker shows that, not the default model's name.
      m_model->setCurrentIndex(-1);
      m_backend->setText(tr("Backend: <i>no model</i>"));
      kept = tr("\n\nNo model is loaded: open a GGUF file or a checkpoint folder (File > Open model).");
    }
    showError(tr("Could not load the model"), tr("%1\n\n%2%3").arg(path, msg, kept));
  });
  connect(m_wb, &Workbench::runRefused, this, [this](const QString& msg) {
    m_progress->setFormat(tr("not run"));
    setStatus(msg, true);
  });
  connect(m_wb, &Workbench::staleChanged, this, [this](bool, const QString&) { updateBanner(); });
  connect(m_wb, &Workbench::runningChanged, this, [this](bool on) {
    // Disabling the focused Cancel button would pass the focus down the chain to the "gen"
    // box with its value selected, where one stray key changes the length and starts a run.
    if (!on && m_cancel->hasFocus()) m_run->setFocus(Qt::OtherFocusReason);
    m_cancel->setEnabled(on);
    if (!on) m_progress->setValue(m_progress->maximum());
    updateBanner();
  });
  connect(m_wb, &Workbench::runStarted, this, [this] {
    m_progress->setValue(0);
    m_progress->setFormat(tr("starting"));
    setStatus(tr("Running..."));
  });
  connect(m_wb, &Workbench::runProgress, this, [this](double f, double eta, const QString& phase) {
    m_progress->setValue(int(f * 1000));
    // The phase goes first while the text fits the bar, then the time left, then the percentage
    // alone (a narrow bar gives its room to the model picker); the tooltip always has all of it.
    const QString left = eta >= 0 ? tr("%1 s left").arg(eta, 0, 'f', eta < 10 ? 1 : 0) : QString();
    const QString pct = QString::number(int(f * 100)) + QLatin1Char('%');
    const QString full = left.isEmpty() ? tr("%1: %2").arg(phase, pct)
                                        : tr("%1: %2, %3").arg(phase, pct, left);
    const QString shorter = left.isEmpty() ? pct : tr("%1, %2").arg(pct, left);
    const QString fmtFull = left.isEmpty() ? tr("%1: %p%").arg(phase) : tr("%1: %p%, %2").arg(phase, left);
    const QString fmtShort = left.isEmpty() ? tr("%p%") : tr("%p%, %1").arg(left);
    auto fits = [this](const QString& t) {
      return m_progress->fontMetrics().horizontalAdvance(t) + 16 <= m_progress->width();
    };
    m_progress->setFormat(fits(full) ? fmtFull : fits(shorter) ? fmtShort : tr("%p%"));
    m_progress->setToolTip(full);
    setStatus(tr("Running: %1").arg(full));  // the whole line, where the bar has no room for it
  });
  connect(m_wb, &Workbench::resultReady, this, [this](const RunResultPtr& r) {
    m_progress->setFormat(tr("done"));
    m_mapPanel->setHeadRange(r->nLayer, r->nHead);
    m_mapPanel->setSelection(r->map.layer, r->map.head);
    updatePromptInfo();
    const QString head = tr("%1 prompt tokens, %2 generated (%3) on %4")
                             .arg(r->promptTokens.size())
                             .arg(r->tokens.size())
                             .arg(QString::fromStdString(r->stopReason),
                                  QString::fromStdString(r->backendName));
    // A run served from an earlier one did not prefill or decode now: its times are that run's.
    if (r->variantReused) {
      setStatus(tr("%1: an earlier run reused (its prefill %2 ms, decode %3 ms); map %4 ms, total %5 ms")
                    .arg(head)
                    .arg(r->prefillMs, 0, 'f', 0).arg(r->decodeMs, 0, 'f', 0)
                    .arg(r->mapMs, 0, 'f', 0).arg(r->totalMs, 0, 'f', 0));
    } else {
      setStatus(tr("%1: prefill %2 ms, decode %3 ms, map %4 ms, total %5 ms")
                    .arg(head)
                    .arg(r->prefillMs, 0, 'f', 0).arg(r->decodeMs, 0, 'f', 0)
                    .arg(r->mapMs, 0, 'f', 0).arg(r->totalMs, 0, 'f', 0));
    }
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

void MainWindow::selectModelItem(const QString& path) {
  if (path.isEmpty()) return;
  if (m_model->findData(path) < 0) m_model->addItem(QFileInfo(path).fileName(), path);
  m_model->setCurrentIndex(m_model->findData(path));
}

// The banner and the view titles say when the views show an earlier run, and why. While a run
// that will update them is on its way (the common case under auto-run: every control change),
// only the titles say so: a banner coming and going on each change would move the views up and
// down. The banner is for views that stay out of date (auto-run off, a cancel, a failure).
void MainWindow::updateBanner() {
  const bool stale = m_wb->viewsStale();
  const bool updating = m_wb->viewsUpdating();
  m_banner->setVisible(stale && !updating);
  m_banner->setText(m_wb->staleReason());
  m_banner->setToolTip(m_wb->staleReason());
  for (QDockWidget* d : m_views) {
    const QString base = d->property("baseTitle").toString();
    d->setWindowTitle(!stale ? base : updating ? base + tr(" (updating\u2026)") : base + tr(" (out of date)"));
  }
  fitCentralHeight();
}

// The central widget (model row, prompt, banner) takes the height its rows need at its width:
// the wrapped banner's height depends on the width, and a hint cached while the banner showed a
// long message would otherwise leave the prompt floating in a taller strip once it hides.
void MainWindow::fitCentralHeight() {
  QWidget* c = centralWidget();
  if (!c) return;
  QLayout* l = c->layout();
  if (!l) return;
  l->invalidate();
  const int h = l->hasHeightForWidth() && c->width() > 0 ? l->totalHeightForWidth(c->width())
                                                          : l->totalSizeHint().height();
  c->setMaximumHeight(h);
}

QWidget* MainWindow::buildCentral() {
  auto* w = new QWidget(this);
  w->setObjectName(QStringLiteral("controlsBar"));
  // Row 1: model and run.
  auto* modelRow = new QHBoxLayout;
  m_model = new ModelPicker(w);
  m_model->setObjectName(QStringLiteral("modelPicker"));
  m_model->setEditable(false);
  m_model->setMinimumContentsLength(12);
  m_model->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_model->setPlaceholderText(tr("no model loaded"));
  auto* browse = new QToolButton(w);
  browse->setText(tr("Open..."));
  browse->setToolTip(tr("Open a GGUF model or a Hugging Face checkpoint's config.json (Ctrl+O)"));
  m_backend = new QLabel(tr("Backend: <i>loading</i>"), w);
  m_run = new QPushButton(tr("Run"), w);
  m_run->setObjectName(QStringLiteral("run"));
  m_run->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
  m_run->setToolTip(tr("Run the prompt with the current settings (Ctrl+Return)"));
  m_cancel = new QPushButton(tr("Cancel"), w);
  m_cancel->setObjectName(QStringLiteral("cancel"));
  m_cancel->setEnabled(false);
  m_cancel->setShortcut(QKeySequence(Qt::Key_Escape));
  m_genLength = new QSpinBox(w);
  m_genLength->setRange(1, 1024);
  m_genLength->setValue(m_wb->controls().maxTokens);
  m_genLength->setPrefix(tr("gen "));
  m_genLength->setToolTip(tr("Tokens to generate greedily after the prompt"));
  m_progress = new QProgressBar(w);
  m_progress->setRange(0, 1000);
  m_progress->setValue(0);
  m_progress->setTextVisible(true);
  m_progress->setFormat(tr("idle"));
  // Narrow enough that a 1280x720 screen's window leaves the picker the default model's whole
  // name; "done", "cancelled" and a percentage still fit.
  m_progress->setMinimumWidth(72);
  modelRow->addWidget(new QLabel(tr("Model"), w));
  // No stretch: a stretched item is laid out from its minimum, while the picker's size hint is
  // the width of its whole entry; the progress bar takes what the row has left.
  modelRow->addWidget(m_model);
  modelRow->addWidget(browse);
  modelRow->addWidget(m_backend);
  modelRow->addSpacing(8);
  modelRow->addWidget(m_run);
  modelRow->addWidget(m_cancel);
  modelRow->addWidget(m_genLength);
  modelRow->addWidget(m_progress, 2);

  // Row 2: the prompt, one line until expanded.
  m_prompt = new QPlainTextEdit(w);
  m_prompt->setObjectName(QStringLiteral("prompt"));
  m_prompt->setPlaceholderText(tr("Type or paste a prompt, or pick a sample document"));
  m_prompt->setLineWrapMode(QPlainTextEdit::WidgetWidth);
  m_expand = new QToolButton(w);
  m_expand->setObjectName(QStringLiteral("expandPrompt"));
  m_expand->setCheckable(true);
  m_expand->setText(tr("Expand"));
  m_expand->setToolTip(tr("Show more of the prompt for editing"));
  m_promptInfo = new QLabel(w);
  m_samples = new QComboBox(w);
  m_samples->addItem(tr("Sample prompts..."));
  // The names are long ("GNU GPL v3 (legal, ~7.6K tokens)"): the popup widens to show them,
  // the closed box stays narrow.
  m_samples->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_samples->setMinimumContentsLength(16);
  // Long documents first (app/gui/models/sample_prompts.h); the tooltip names source and licence.
  for (const SamplePrompt& p : samplePrompts()) {
    m_samples->addItem(p.displayName(), p.resource);
    m_samples->setItemData(m_samples->count() - 1, p.source, Qt::ToolTipRole);
  }
  auto* loadPrompt = new QPushButton(tr("Load file..."), w);
  auto* promptRow = new QHBoxLayout;
  promptRow->addWidget(new QLabel(tr("Prompt"), w), 0, Qt::AlignTop);
  promptRow->addWidget(m_prompt, 1);
  auto* promptSide = new QVBoxLayout;
  auto* sideTop = new QHBoxLayout;
  sideTop->addWidget(m_expand);
  sideTop->addWidget(m_samples);
  sideTop->addWidget(loadPrompt);
  promptSide->addLayout(sideTop);
  promptSide->addWidget(m_promptInfo);
  promptSide->addStretch(1);
  promptRow->addLayout(promptSide);

  // The banner that says the views are out of date, and why.
  m_banner = new QLabel(w);
  m_banner->setObjectName(QStringLiteral("staleBanner"));
  m_banner->setWordWrap(true);
  m_banner->setVisible(false);
  m_banner->setStyleSheet(QStringLiteral(
      "QLabel { background: #fff3c4; color: #5c4400; border: 1px solid #e0c060; padding: 3px; }"));

  m_status = new StatusLabel(this);
  m_status->setObjectName(QStringLiteral("status"));
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_status->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  statusBar()->addWidget(m_status, 1);

  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(6, 4, 6, 2);
  lay->setSpacing(3);
  lay->addLayout(modelRow);
  lay->addLayout(promptRow);
  lay->addWidget(m_banner);
  setPromptExpanded(false);

  m_promptTimer = new QTimer(this);
  m_promptTimer->setSingleShot(true);
  m_promptTimer->setInterval(600);  // typing: wait a little longer than for a slider
  connect(m_prompt, &QPlainTextEdit::textChanged, m_promptTimer, qOverload<>(&QTimer::start));
  connect(m_prompt, &QPlainTextEdit::textChanged, this, &MainWindow::updatePromptInfo);
  connect(m_promptTimer, &QTimer::timeout, this, [this] { m_wb->setPrompt(m_prompt->toPlainText()); });
  connect(m_expand, &QToolButton::toggled, this, &MainWindow::setPromptExpanded);
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
  connect(browse, &QToolButton::clicked, this, &MainWindow::chooseModel);
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

// The prompt shows whole lines: the viewport is the document's top margin plus a whole number
// of the layout's line heights tall, so the next line never shows cut below them (it would in
// a bottom margin of the same size, which QPlainTextEdit fills with text).
void MainWindow::setPromptExpanded(bool on) {
  const int line = qCeil(QFontMetricsF(m_prompt->font()).height());
  const int top = qCeil(m_prompt->document()->documentMargin());
  m_prompt->setFixedHeight(line * (on ? 10 : 2) + top + 2 * m_prompt->frameWidth());
  m_prompt->setVerticalScrollBarPolicy(on ? Qt::ScrollBarAsNeeded : Qt::ScrollBarAlwaysOff);
  m_expand->setText(on ? tr("Collapse") : tr("Expand"));
  fitCentralHeight();
}

void MainWindow::updatePromptInfo() {
  const QString t = m_prompt->toPlainText();
  m_promptInfo->setText(t.isEmpty() ? tr("empty") : tr("%L1 characters").arg(t.size()));
  if (const RunResultPtr r = m_wb->lastResult(); r && m_wb->prompt() == t)
    m_promptInfo->setText(tr("%L1 characters, %L2 tokens").arg(t.size()).arg(r->promptTokens.size()));
}

void MainWindow::buildDocks() {
  setDockNestingEnabled(true);
  setCorner(Qt::TopLeftCorner, Qt::LeftDockWidgetArea);
  setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
  auto dock = [this](const QString& title, const QString& name, QWidget* w) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(name);
    d->setWidget(w);
    d->setProperty("baseTitle", title);
    return d;
  };
  m_controls = new ControlsPanel(this);
  m_controls->setQuantizationAvailable(true);  // engine/cache/cache_settings.h: int8 / int4 KV
  auto* controlsScroll = new QScrollArea(this);
  controlsScroll->setWidget(m_controls);
  controlsScroll->setWidgetResizable(true);
  controlsScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  controlsScroll->setMinimumWidth(250);
  controlsScroll->setFrameShape(QFrame::NoFrame);
  auto* controlsDock = dock(tr("Controls"), QStringLiteral("controls"), controlsScroll);
  addDockWidget(Qt::LeftDockWidgetArea, controlsDock);
  connect(m_controls, &ControlsPanel::edited, this, [this](const ControlState& s) {
    ControlState t = s;
    t.maxTokens = m_wb->controls().maxTokens;
    t.layer = m_wb->controls().layer;
    t.head = m_wb->controls().head;
    m_wb->setControls(t);
  });

  m_mapPanel = new AttentionMapPanel(m_wb->attentionMap(), this);
  connect(m_mapPanel, &AttentionMapPanel::headChosen, this, &MainWindow::chooseHead);
  auto* sinksPanel = new SinksPanel(m_wb->sinks(), this);
  auto* sparsityPanel = new SparsityPanel(m_wb->sparsity(), m_wb->headStats(), this);
  connect(sinksPanel, &SinksPanel::headChosen, this, &MainWindow::chooseHead);
  connect(sparsityPanel, &SparsityPanel::headChosen, this, &MainWindow::chooseHead);
  // The Sparsity heatmaps outline the map's head (the one whose skipped tiles the map draws).
  sparsityPanel->setMarkedHead(m_wb->controls().layer, m_wb->controls().head);
  connect(m_wb, &Workbench::controlsChanged, sparsityPanel, [this, sparsityPanel] {
    sparsityPanel->setMarkedHead(m_wb->controls().layer, m_wb->controls().head);
  });
  m_views = {dock(tr("Attention map"), QStringLiteral("map"), m_mapPanel),
             dock(tr("Sinks"), QStringLiteral("sinks"), sinksPanel),
             dock(tr("Sparsity"), QStringLiteral("sparsity"), sparsityPanel),
             dock(tr("Timeline"), QStringLiteral("timeline"), new TimelinePanel(m_wb->timeline(), this)),
             dock(tr("Compare"), QStringLiteral("compare"), new ComparePanel(m_wb->compare(), this))};
  // The views own the space below the prompt bar: tabbed in the bottom area, which the
  // fixed-height central bar leaves to them.
  addDockWidget(Qt::BottomDockWidgetArea, m_views[0]);

  m_strip = new TokenStrip(this);
  m_strip->setModel(m_wb->tokens());
  connect(m_strip, &TokenStrip::tokenChosen, m_mapPanel, &AttentionMapPanel::highlightToken);
  connect(m_mapPanel, &AttentionMapPanel::positionChosen, this, [this](int q) {
    m_strip->showPosition(q);
    m_mapPanel->highlightToken(q);
  });
  auto* stripDock = dock(tr("Tokens"), QStringLiteral("tokens"), m_strip);
  addDockWidget(Qt::BottomDockWidgetArea, stripDock);
  splitDockWidget(m_views[0], stripDock, Qt::Vertical);  // before tabifying: below the views
  for (int i = 1; i < m_views.size(); ++i) tabifyDockWidget(m_views[0], m_views[i]);

  // Not one of the run views (viewDocks()): it shows a sweep file, so it stays hidden until one
  // is opened.
  m_sweepPanel = new SweepPanel(m_wb->sweep(), this);
  connect(m_sweepPanel, &SweepPanel::loadPoint, this, &MainWindow::loadSweepPoint);
  m_sweepDock = dock(tr("Sweep"), QStringLiteral("sweep"), m_sweepPanel);
  addDockWidget(Qt::BottomDockWidgetArea, m_sweepDock);
  tabifyDockWidget(m_views.back(), m_sweepDock);
  m_sweepDock->hide();
  m_views[0]->raise();
  resizeDocks({controlsDock}, {std::max(250, m_controls->sizeHint().width() + 16)}, Qt::Horizontal);
  resizeDocks({m_views[0], stripDock}, {600, 80}, Qt::Vertical);
}

void MainWindow::chooseHead(int layer, int head) {
  m_wb->chooseHead(layer, head);
}

// Radio groups for the CUDA backends' weight mode and activation precision. A change remakes the
// backends (Workbench::setGpuChoice: the model stays, a run follows) and is kept for the next
// start (QSettings engine/gpuWeights, engine/gpuActivations; the command line wins there).
void MainWindow::buildGpuMenu(QMenu* engine) {
  m_gpuMenu = engine;
  engine->setObjectName(QStringLiteral("engineMenu"));
  QMenu* weights = engine->addMenu(tr("GPU &weights"));
  weights->setObjectName(QStringLiteral("gpuWeightsMenu"));
  QMenu* acts = engine->addMenu(tr("GPU &activations"));
  acts->setObjectName(QStringLiteral("gpuActivationsMenu"));
  auto* wGroup = m_gpuWeights = new QActionGroup(this);
  auto* aGroup = m_gpuActivations = new QActionGroup(this);
  const struct { GpuWeights mode; QString text, tip; } wItems[] = {
      {GpuWeights::kAuto, tr("Auto (bf16 where it fits, else quantized)"),
       tr("bf16 when the bf16 weights and two KV caches fit the free GPU memory, else the file's "
          "quantized blocks; the Backend label's tooltip says which was taken and why")},
      {GpuWeights::kBf16, tr("bf16 (fused decode, faster prefill)"),
       tr("Every matrix converted to bf16: about 2 bytes per parameter")},
      {GpuWeights::kNative, tr("Quantized as in the file (least memory)"),
       tr("Q8_0 / Q4_0 / Q4_1 / Q4_K / Q5_K / Q6_K projections stay in their blocks: an 8B "
          "Q4_K_M model at 32K tokens fits a 24 GB card")}};
  for (const auto& it : wItems) {
    QAction* a = weights->addAction(it.text);
    a->setCheckable(true);
    a->setToolTip(it.tip);
    a->setData(int(it.mode));
    a->setChecked(m_wb->gpuChoice().weights == it.mode);
    wGroup->addAction(a);
  }
  const struct { GpuActivations prec; QString text; } aItems[] = {
      {GpuActivations::kInt8, tr("int8 (one plane, as llama.cpp: faster decode)")},
      {GpuActivations::kInt16, tr("int16 (two int8 planes, closest to the CPU)")}};
  for (const auto& it : aItems) {
    QAction* a = acts->addAction(it.text);
    a->setCheckable(true);
    a->setData(int(it.prec));
    a->setChecked(m_wb->gpuChoice().activations == it.prec);
    aGroup->addAction(a);
  }
  weights->setToolTipsVisible(true);
  auto apply = [this, wGroup, aGroup] {
    GpuChoice g = m_wb->gpuChoice();
    if (QAction* a = wGroup->checkedAction()) g.weights = GpuWeights(a->data().toInt());
    if (QAction* a = aGroup->checkedAction()) g.activations = GpuActivations(a->data().toInt());
    m_backend->setText(tr("Backend: <i>loading</i>"));
    m_wb->setGpuChoice(g);
  };
  connect(wGroup, &QActionGroup::triggered, this, apply);
  connect(aGroup, &QActionGroup::triggered, this, apply);
  syncGpuMenu(QString());
}

void MainWindow::syncGpuChecks() {
  if (!m_gpuWeights || !m_gpuActivations) return;
  const GpuChoice g = m_wb->gpuChoice();
  for (QAction* a : m_gpuWeights->actions()) a->setChecked(GpuWeights(a->data().toInt()) == g.weights);
  for (QAction* a : m_gpuActivations->actions())
    a->setChecked(GpuActivations(a->data().toInt()) == g.activations);
}

// The GPU choices act on CUDA backends only: disabled (with the reason) on the CPU.
void MainWindow::syncGpuMenu(const QString& backend) {
  if (!m_gpuMenu) return;
  const bool gpu = !backend.isEmpty() && backend != QLatin1String("cpu");
  for (QAction* a : m_gpuMenu->actions()) {
    a->setEnabled(gpu);
    a->setToolTip(gpu ? QString() : tr("CUDA backends only: the CPU backend reads the weights as stored"));
  }
  m_gpuMenu->setToolTipsVisible(true);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("Open &model..."), QKeySequence::Open, this, &MainWindow::chooseModel);
  file->addAction(tr("Open checkpoint &folder..."), this, &MainWindow::chooseCheckpointFolder)
      ->setObjectName(QStringLiteral("openCheckpointFolder"));
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
  file->addAction(tr("Watch a running s&weep..."), this, &MainWindow::watchSweep);
  file->addAction(tr("Export &trace..."), this, [this] {
    static_cast<TimelinePanel*>(m_views[3]->widget())->exportTrace();
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());
  view->addSeparator();
  view->addAction(tr("&Reset layout"), this, &MainWindow::resetLayout);
  buildGpuMenu(menuBar()->addMenu(tr("&Engine")));
  QMenu* map = menuBar()->addMenu(tr("&Map"));
  auto step = [this, map](const QString& text, QKeySequence key, auto fn) {
    QAction* a = map->addAction(text, this, fn);
    a->setShortcut(key);
    a->setShortcutContext(Qt::WindowShortcut);
  };
  step(tr("Previous layer"), QKeySequence(Qt::ALT | Qt::Key_Up), [this] { m_mapPanel->stepLayer(-1); });
  step(tr("Next layer"), QKeySequence(Qt::ALT | Qt::Key_Down), [this] { m_mapPanel->stepLayer(1); });
  step(tr("Previous head"), QKeySequence(Qt::ALT | Qt::Key_Left), [this] { m_mapPanel->stepHead(-1); });
  step(tr("Next head"), QKeySequence(Qt::ALT | Qt::Key_Right), [this] { m_mapPanel->stepHead(1); });
  step(tr("Reset zoom"), QKeySequence(Qt::CTRL | Qt::Key_0), [this] { m_mapPanel->resetZoom(); });
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

void MainWindow::resetLayout() {
  restoreState(m_defaultState);
  for (QDockWidget* d : m_views) d->show();
  m_views[0]->raise();
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
  const QString f = QFileDialog::getOpenFileName(
      this, tr("Open model"), QString(),
      tr("Models (*.gguf config.json);;GGUF models (*.gguf);;Hugging Face checkpoints "
         "(config.json);;All files (*)"));
  if (f.isEmpty()) return;
  // A checkpoint is named by its folder, whichever of its files was picked.
  const QFileInfo fi(f);
  loadModelPath(fi.fileName() == QLatin1String("config.json") ? fi.absolutePath() : f);
}

void MainWindow::chooseCheckpointFolder() {
  const QString d = QFileDialog::getExistingDirectory(
      this, tr("Open a Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer.json)"));
  if (d.isEmpty()) return;
  loadModelPath(d);
}

void MainWindow::loadModelPath(const QString& path) {
  selectModelItem(path);
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

void MainWindow::watchSweep() {
  const QString f = QFileDialog::getOpenFileName(
      this, tr("Watch a running sweep or validation"), QString(),
      tr("Journal files (*.rank-*);;All files (*)"));
  if (f.isEmpty()) return;
  if (const QString err = m_sweepPanel->watchJournal(f); !err.isEmpty()) {
    showError(tr("Could not watch the run"), err);
    return;
  }
  m_sweepDock->show();
  m_sweepDock->raise();
  setStatus(tr("Watching %1").arg(f));
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
  QString line = text;
  line.replace(QLatin1Char('\n'), QLatin1Char(' '));
  static_cast<StatusLabel*>(m_status)->setFullText(line);
  m_status->setToolTip(text);
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
