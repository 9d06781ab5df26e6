// SPDX-License-Identifier: Apache-2.0
// sinkscope: the Qt 6 workbench.
//   sinkscope [--model FILE] [--prompt TEXT | --prompt-file FILE] [--backend auto|cpu|cuda]
//             [--gpu-weights auto|bf16|native] [--gpu-activations int8|int16]
//             [--screenshot FILE [--views DIR]] [--layer L --head H] [--fresh]
// --screenshot renders the main window after the first run and exits (docs, tests); --views also
// saves each view dock as DIR/<name>.png. --help and --version work without a display; any
// other start without one (no DISPLAY, WAYLAND_DISPLAY, QT_QPA_PLATFORM or -platform) says so
// and exits 2. A fresh start (no saved settings) opens the first long sample document.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QScreen>
#include <QSettings>
#include <QTimer>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "app/gui/models/sample_prompts.h"
#include "app/gui/models/workbench.h"
#include "app/gui/panels/main_window.h"
#include "engine/backend/backend_factory.h"
#include "engine/util/paths.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace {

bool saveGrab(QWidget* w, const QString& path) {
  // Full colour: a 256-colour palette would band the colour scales the screenshot is meant to
  // show.
  const QImage img = w->grab().toImage().convertToFormat(QImage::Format_RGB32);
  const bool ok = img.save(path);
  std::fprintf(ok ? stdout : stderr, "sinkscope: %s %s\n", ok ? "wrote" : "could not write",
               qPrintable(path));
  return ok;
}

// Saves the window (and each view) once the first run has finished, then quits.
void screenshotAndQuit(MainWindow* w, const QString& file, const QString& viewsDir, bool runOk) {
  QDir().mkpath(QFileInfo(file).absolutePath());
  bool ok = saveGrab(w, file);
  if (!viewsDir.isEmpty()) {
    QDir().mkpath(viewsDir);
    for (QDockWidget* d : w->viewDocks()) {
      d->raise();
      QApplication::processEvents();
      ok = saveGrab(d, viewsDir + QLatin1Char('/') + d->objectName() + QStringLiteral(".png")) && ok;
    }
  }
  QApplication::exit(ok && runOk ? 0 : 1);
}

// Whether QApplication can find a display. On X11/Wayland systems Qt aborts in the QApplication
// constructor when it finds none ("could not connect to display"); this catches the common case
// (no DISPLAY, no WAYLAND_DISPLAY and no explicit platform) first, to say what to set instead.
bool displayAvailable(int argc, char** argv) {
#if defined(Q_OS_UNIX) && !defined(Q_OS_DARWIN)
  for (const char* var : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"})
    if (const char* v = std::getenv(var); v && *v) return true;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "-platform") == 0 || std::strcmp(argv[i], "--platform") == 0) return true;
  return false;
#else
  (void)argc;
  (void)argv;
  return true;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  // Name and version are static: set before any application object, so that --version and
  // --help work without one (below).
  QCoreApplication::setOrganizationName(QStringLiteral("SinkScope"));
  QCoreApplication::setApplicationName(QStringLiteral("sinkscope"));
  QCoreApplication::setApplicationVersion(QStringLiteral("0.1"));

  QCommandLineParser cli;
  cli.setApplicationDescription(QStringLiteral("SinkScope workbench: attention sinks, KV cache and sparse attention"));
  cli.addHelpOption();
  cli.addVersionOption();
  QCommandLineOption model({QStringLiteral("m"), QStringLiteral("model")}, QStringLiteral("GGUF model or Hugging Face checkpoint folder (default: $SINKSCOPE_MODEL or the cached SmolLM2)"), QStringLiteral("PATH"));
  QCommandLineOption prompt(QStringLiteral("prompt"), QStringLiteral("prompt text"), QStringLiteral("TEXT"));
  QCommandLineOption promptFile(QStringLiteral("prompt-file"), QStringLiteral("prompt from a file"), QStringLiteral("FILE"));
  QCommandLineOption backend(QStringLiteral("backend"), QStringLiteral("auto, cpu or cuda"), QStringLiteral("KIND"), QStringLiteral("auto"));
  QCommandLineOption gpuWeights(QStringLiteral("gpu-weights"), QStringLiteral("CUDA: auto (bf16 where it fits with room for the dense baseline, else the file's quantized blocks), bf16 or native"), QStringLiteral("MODE"), QStringLiteral("auto"));
  QCommandLineOption gpuActivations(QStringLiteral("gpu-activations"), QStringLiteral("CUDA, native weights: int8 (one plane, as llama.cpp; the default) or int16 (two int8 planes, closer to the CPU, slower)"), QStringLiteral("PREC"), QStringLiteral("int8"));
  QCommandLineOption shot(QStringLiteral("screenshot"), QStringLiteral("render the main window after a run to FILE and exit"), QStringLiteral("FILE"));
  QCommandLineOption views(QStringLiteral("views"), QStringLiteral("with --screenshot: also save each view to DIR"), QStringLiteral("DIR"));
  QCommandLineOption layer(QStringLiteral("layer"), QStringLiteral("layer of the attention map"), QStringLiteral("L"));
  QCommandLineOption head(QStringLiteral("head"), QStringLiteral("head of the attention map"), QStringLiteral("H"));
  QCommandLineOption config(QStringLiteral("config"), QStringLiteral("import a config file at start"), QStringLiteral("FILE"));
  QCommandLineOption fresh(QStringLiteral("fresh"), QStringLiteral("ignore the saved settings and layout"));
  cli.addOptions({model, prompt, promptFile, backend, gpuWeights, gpuActivations, shot, views, layer,
                  head, config, fresh});

  // --help and --version need no display: QApplication aborts without one (no platform plugin),
  // so they are answered from a QCoreApplication, with the text QCommandLineParser::process()
  // prints, before any QApplication exists. They win over a parse error here, because Qt's own
  // options (-platform, -style) are unknown to this parser until QApplication removes them;
  // without --help / --version, errors are reported by process() below as before.
  {
    QStringList args;
    for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
    (void)cli.parse(args);
    if (cli.isSet(QStringLiteral("version")) || cli.isSet(QStringLiteral("help")) ||
        cli.isSet(QStringLiteral("help-all"))) {
      QCoreApplication core(argc, argv);
      if (cli.isSet(QStringLiteral("version"))) cli.showVersion();  // exits 0
      if (cli.isSet(QStringLiteral("help"))) cli.showHelp(0);       // exits 0
      cli.process(core);  // --help-all: also Qt's options; exits 0
    }
  }
  if (!displayAvailable(argc, argv)) {
    std::fprintf(stderr, "sinkscope: no display: set DISPLAY or QT_QPA_PLATFORM=offscreen\n");
    return 2;
  }

  QApplication app(argc, argv);
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/sinkscope.svg")));
  cli.process(app);

  const auto kind = parse_backend_kind(cli.value(backend).toStdString());
  if (!kind) {
    std::fprintf(stderr, "sinkscope: --backend must be auto, cpu or cuda\n");
    return 2;
  }
  const bool screenshot = cli.isSet(shot);
  if (screenshot) app.setProperty("sinkscopeNoDialogs", true);
  const bool useSettings = !cli.isSet(fresh) && !screenshot;
  // A GPU option: the command line's value (a bad one is an error), else the Engine menu's last
  // choice when settings are used, else the default.
  const QSettings saved;
  const auto gpuOption = [&](const QCommandLineOption& opt, const char* key, auto parse,
                             auto& field, const char* valid) {
    if (!cli.isSet(opt)) {
      if (useSettings)
        if (const auto v = parse(saved.value(QLatin1String(key)).toString().toStdString())) field = *v;
      return true;
    }
    const auto v = parse(cli.value(opt).toStdString());
    if (!v) {
      std::fprintf(stderr, "sinkscope: --%s must be %s, got '%s'\n",
                   qPrintable(opt.names().first()), valid, qPrintable(cli.value(opt)));
      return false;
    }
    field = *v;
    return true;
  };
  GpuChoice gpu;
  if (!gpuOption(gpuWeights, "engine/gpuWeights", parse_gpu_weights, gpu.weights,
                 "auto, bf16 or native") ||
      !gpuOption(gpuActivations, "engine/gpuActivations", parse_gpu_activations, gpu.activations,
                 "int16 or int8"))
    return 2;

  Workbench wb(*kind, 0, gpu);
  MainWindow w(&wb);
  // The first window fills most of the screen (a laptop's 1280x720 included), at most 1600x1000.
  if (const QScreen* screen = QGuiApplication::primaryScreen()) {
    const QRect avail = screen->availableGeometry();
    w.resize(std::min(1600, avail.width() * 95 / 100), std::min(1000, avail.height() * 95 / 100));
  } else {
    w.resize(1280, 720);
  }
  QSettings settings;
  ControlState controls;
  // A fresh start opens with a long sample document (app/gui/models/sample_prompts.h), so that
  // the first run already shows sinks, a window's worth of keys and skipped tiles.
  QString text = readSamplePrompt(defaultSamplePrompt());
  if (text.isEmpty())
    text = QStringLiteral("The attention sink phenomenon: language models put a large share of "
                          "attention on the first token, whatever it says.");
  if (useSettings) {
    const auto saved = parse_config(settings.value(QStringLiteral("session/config")).toString().toStdString());
    if (saved.ok() && settings.contains(QStringLiteral("session/config")))
      controls = ControlState::fromConfig(saved.config, controls);
    controls.maxTokens = settings.value(QStringLiteral("session/maxTokens"), controls.maxTokens).toInt();
    text = settings.value(QStringLiteral("session/prompt"), text).toString();
    w.restoreSettings();
  }
  if (cli.isSet(layer)) controls.layer = cli.value(layer).toInt();
  if (cli.isSet(head)) controls.head = cli.value(head).toInt();
  wb.setControls(controls);
  if (cli.isSet(config)) {
    const QString err = wb.importConfig(cli.value(config));
    if (!err.isEmpty()) std::fprintf(stderr, "sinkscope: %s\n", qPrintable(err));
  }
  if (cli.isSet(prompt)) text = cli.value(prompt);
  if (cli.isSet(promptFile)) {
    QFile f(cli.value(promptFile));
    if (!f.open(QIODevice::ReadOnly)) {
      std::fprintf(stderr, "sinkscope: cannot read %s\n", qPrintable(cli.value(promptFile)));
      return 2;
    }
    text = QString::fromUtf8(f.readAll()).trimmed();
  }
  w.setPromptText(text);
  QObject::connect(&wb, &Workbench::controlsChanged, &wb, [&wb] {
    QSettings().setValue(QStringLiteral("session/maxTokens"), wb.controls().maxTokens);
  });

  if (screenshot) {
    const QString file = cli.value(shot), dir = cli.value(views);
    QObject::connect(&wb, &Workbench::resultReady, &w, [&w, file, dir] {
      QTimer::singleShot(300, &w, [&w, file, dir] { screenshotAndQuit(&w, file, dir, true); });
    });
    auto fail = [&w, file, dir](const QString&, const QString& msg = {}) {
      std::fprintf(stderr, "sinkscope: %s\n", qPrintable(msg));
      QTimer::singleShot(100, &w, [&w, file, dir] { screenshotAndQuit(&w, file, dir, false); });
    };
    QObject::connect(&wb, &Workbench::modelFailed, &w, fail);
    QObject::connect(&wb, &Workbench::runFailed, &w, [fail](const QString& m) { fail(QString(), m); });
    QTimer::singleShot(600000, &app, [] {
      std::fprintf(stderr, "sinkscope: --screenshot timed out\n");
      QApplication::exit(3);
    });
  }
  w.show();
  const QString path = cli.isSet(model) ? cli.value(model) : QString::fromStdString(default_model_path().string());
  QTimer::singleShot(0, &w, [&w, path] { QMetaObject::invokeMethod(&w, [&w, path] { (void)w; }); });
  wb.loadModel(path);
  return app.exec();
}
