// SPDX-License-Identifier: Apache-2.0
#include "app/gui/models/sample_prompts.h"

#include <QCoreApplication>
#include <QFile>

namespace sinkscope::gui {

QString SamplePrompt::displayName() const {
  const QString size = tokens >= 1000 ? QStringLiteral("~%1K").arg(tokens / 1000.0, 0, 'f', 1)
                                      : QString::number(tokens);
  return QCoreApplication::translate("SamplePrompt", "%1 (%2, %3 tokens)").arg(title, kind, size);
}

QList<SamplePrompt> samplePrompts() {
  // Token counts: SmolLM2's tokenizer on the trimmed file (tests/gui/tst_sampleprompts.cpp
  // re-measures them). Long documents by size, the default first; the short prompts last.
  const auto t = [](const char* s) { return QCoreApplication::translate("SamplePrompt", s); };
  return {
      {QStringLiteral(":/prompts/kjv-jonah.txt"), t("Book of Jonah, King James Bible"), t("prose"),
       t("King James Version (1611), public domain; from Debian's bible-kjv-text"), 1664},
      {QStringLiteral(":/prompts/python-shlex.py.txt"), t("Python shlex.py"), t("code"),
       t("Python 3.11 Lib/shlex.py, PSF License Agreement v2"), 3266},
      {QStringLiteral(":/prompts/python-tutorial-errors.rst.txt"), t("Python tutorial: Errors and Exceptions"),
       t("technical docs"), t("Python 3.11 documentation (reStructuredText source), PSF License Agreement v2"), 5714},
      {QStringLiteral(":/prompts/gpl-3.0.txt"), t("GNU GPL v3"), t("legal"),
       t("GNU General Public License v3 (2007), verbatim copying permitted; from Debian's base-files"), 7638},
      {QStringLiteral(":/prompts/attention-sinks.txt"), t("attention-sinks"), t("short"),
       t("written for SinkScope, Apache-2.0"), 35},
      {QStringLiteral(":/prompts/kitchen-garden.txt"), t("kitchen-garden"), t("short"),
       t("written for SinkScope, Apache-2.0"), 28},
      {QStringLiteral(":/prompts/story-start.txt"), t("story-start"), t("short"),
       t("written for SinkScope, Apache-2.0"), 30},
  };
}

QString defaultSamplePrompt() { return samplePrompts().constFirst().resource; }

QString readSamplePrompt(const QString& resource) {
  QFile f(resource);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll()).trimmed();
}

}  // namespace sinkscope::gui
