// SPDX-License-Identifier: Apache-2.0
// The sample prompt list (app/gui/models/sample_prompts.h): long documents first, every listed
// resource present, the default a long document, and the token counts it advertises true for
// the default model's tokenizer.
#include <QFileInfo>
#include <QSet>
#include <QTest>

#include <cstdlib>
#include <memory>

#include "app/gui/models/sample_prompts.h"
#include "engine/format/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/gui/test_model.h"

using namespace sinkscope;
using namespace sinkscope::gui;

class TestSamplePrompts : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void longDocumentsComeFirst() {
    const QList<SamplePrompt> list = samplePrompts();
    QVERIFY(list.size() >= 4);
    int firstShort = -1, longCount = 0;
    for (int i = 0; i < list.size(); ++i) {
      if (!list[i].isLong() && firstShort < 0) firstShort = i;
      if (list[i].isLong()) {
        ++longCount;
        QVERIFY2(firstShort < 0, qPrintable(QStringLiteral("%1 (long) is listed after a short prompt")
                                                .arg(list[i].resource)));
      }
    }
    // 3-5 long documents of different kinds, spanning the 2K / 4K / 8K sizes.
    QVERIFY(longCount >= 3 && longCount <= 5);
    QSet<QString> kinds;
    int largest = 0;
    for (const SamplePrompt& p : list)
      if (p.isLong()) {
        kinds.insert(p.kind);
        largest = std::max(largest, p.tokens);
      }
    QCOMPARE(kinds.size(), longCount);
    QVERIFY(largest >= 7000);
    // Shortest long document first: the cheapest first run.
    for (int i = 1; i < longCount; ++i) QVERIFY(list[i - 1].tokens <= list[i].tokens);
  }

  void defaultIsTheFirstLongDocument() {
    const QList<SamplePrompt> list = samplePrompts();
    QCOMPARE(defaultSamplePrompt(), list.first().resource);
    QVERIFY(list.first().isLong());
    QVERIFY(defaultSamplePrompt() != QStringLiteral(":/prompts/attention-sinks.txt"));
  }

  void everyResourceExistsAndIsNamed() {
    QSet<QString> seen;
    for (const SamplePrompt& p : samplePrompts()) {
      QVERIFY2(!seen.contains(p.resource), qPrintable(p.resource));
      seen.insert(p.resource);
      QVERIFY2(QFileInfo::exists(p.resource), qPrintable(p.resource + QStringLiteral(" is not in the resources")));
      const QString text = readSamplePrompt(p.resource);
      QVERIFY2(!text.isEmpty(), qPrintable(p.resource));
      QVERIFY(!p.title.isEmpty() && !p.kind.isEmpty() && !p.source.isEmpty());
      // The display name carries the kind and the size hint the user chooses by.
      QVERIFY(p.displayName().contains(p.title));
      QVERIFY(p.displayName().contains(p.kind));
      QVERIFY(p.displayName().contains(QStringLiteral("tokens")));
      // Long documents are several thousand characters (about 4 per token for English).
      if (p.isLong()) QVERIFY2(text.size() >= 3 * p.tokens, qPrintable(p.resource));
    }
    // And the same file in the source tree (what the README documents).
    for (const QString& r : seen)
      QVERIFY2(QFileInfo::exists(QStringLiteral(SINKSCOPE_SOURCE_DIR "/resources") + r.mid(1)), qPrintable(r));
  }

  void displayNames() {
    SamplePrompt p{QStringLiteral(":/x"), QStringLiteral("GNU GPL v3"), QStringLiteral("legal"), QStringLiteral("s"), 7638};
    QCOMPARE(p.displayName(), QStringLiteral("GNU GPL v3 (legal, ~7.6K tokens)"));
    p.tokens = 35;
    QCOMPARE(p.displayName(), QStringLiteral("GNU GPL v3 (legal, 35 tokens)"));
    QVERIFY(!p.isLong());
  }

  // The advertised sizes, measured with the default model's tokenizer: long documents really are
  // long (>= 1.5K tokens, what the list calls long) and every hint is within 10 %.
  void tokenCountsWithTheDefaultModel() {
    const QString path = test::defaultModelPath();
    if (path.isEmpty()) {
      const char* req = std::getenv("SINKSCOPE_REQUIRE_MODEL");
      if (req && QByteArray(req) == "1") QFAIL("the default model is not present (bash scripts/setup.sh fetches it)");
      QSKIP("the default model is not present (bash scripts/setup.sh fetches it)");
    }
    // The tokenizer alone: header and metadata, no weights.
    const std::unique_ptr<GgufFile> file = GgufFile::open(path.toStdString());
    const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(*file);
    for (const SamplePrompt& p : samplePrompts()) {
      const int n = int(tok->encode(readSamplePrompt(p.resource).toStdString()).size());
      qInfo("%s: %d tokens (listed as %d)", qPrintable(p.resource), n, p.tokens);
      QVERIFY2(std::abs(n - p.tokens) <= p.tokens / 10 + 1,
               qPrintable(QStringLiteral("%1: %2 tokens, listed as %3").arg(p.resource).arg(n).arg(p.tokens)));
      if (p.isLong()) QVERIFY2(n >= SamplePrompt::kLongTokens, qPrintable(p.resource));
    }
  }
};

QTEST_GUILESS_MAIN(TestSamplePrompts)
#include "tst_sampleprompts.moc"
