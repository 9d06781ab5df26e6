// SPDX-License-Identifier: Apache-2.0
// Watching a running sweep from its journal (JournalWatch in the sweep view): the units of every
// process's file are counted against the run's total, more finished units move the bar, a
// resumed run's earlier units are named, the end of the run (journal removed) says where the
// results are, and a file that is not a journal is refused by name with the watch unchanged.
#include <QLabel>
#include <QProgressBar>
#include <QTest>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/gui/panels/sweep_panel.h"
#include "engine/util/work_journal.h"

using namespace sinkscope;
using namespace sinkscope::gui;

namespace fs = std::filesystem;

class TestJournalWatchPanel : public QObject {
  Q_OBJECT

  fs::path m_dir;

  static SampleOutcome outcome(int i) {
    SampleOutcome o;
    o.id = std::to_string(i);
    o.id.insert(0, 1, 's');
    o.kind = "prose";
    o.tokens = 10;
    return o;
  }

 private Q_SLOTS:
  void init() {
    m_dir = fs::temp_directory_path() / ("sinkscope_watch_" + std::to_string(::getpid()));
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void cleanup() { fs::remove_all(m_dir); }

  void showsEveryProcessesUnitsUntilTheRunEnds() {
    SweepPointsModel model;
    SweepPanel panel(&model);
    panel.resize(900, 600);
    panel.show();
    auto* running = panel.findChild<QWidget*>(QStringLiteral("runningSweep"));
    auto* text = panel.findChild<QLabel*>(QStringLiteral("runningText"));
    auto* bar = panel.findChild<QProgressBar*>();
    QVERIFY(running && text && bar);
    QVERIFY(!running->isVisible());

    const fs::path base = m_dir / "grid.csv.journal";
    const JournalInfo info{"sweep", "lambda=0,0.01;window=full,256", 40};
    JournalWriter r0(base, 0, "node1", "fp", info);
    JournalWriter r1(base, 1, "node2", "fp", info);
    r0.append(0, outcome(0));
    r1.append(1, outcome(1));
    QCOMPARE(panel.watchJournal(QString::fromStdString(journal_file(base, 1).string())), QString());
    QVERIFY(running->isVisible());
    QVERIFY2(text->text().contains(QStringLiteral("2 of 40 units (5 %)")), qPrintable(text->text()));
    QVERIFY(text->text().contains(QStringLiteral("2 processes on 2 hosts")));
    QVERIFY(text->text().contains(QStringLiteral("lambda=0,0.01")));
    QCOMPARE(bar->value(), 50);

    for (int u = 2; u < 20; ++u) (u % 2 ? r1 : r0).append(uint64_t(u), outcome(u));
    panel.journalWatch()->refresh();
    QVERIFY2(text->text().contains(QStringLiteral("20 of 40 units (50 %)")), qPrintable(text->text()));
    QVERIFY(text->text().contains(QStringLiteral("left")));
    QCOMPARE(bar->value(), 500);

    remove_journal(base);  // the run wrote its outputs
    panel.journalWatch()->refresh();
    QCOMPARE(panel.journalWatch()->state(), JournalWatch::State::kFinished);
    QVERIFY2(text->text().contains(QStringLiteral("finished")), qPrintable(text->text()));
    QVERIFY(!bar->isVisible());
  }

  void aFileThatIsNotAJournalIsRefused() {
    SweepPointsModel model;
    SweepPanel panel(&model);
    const fs::path notNamed = m_dir / "results.json";
    std::ofstream(notNamed) << "{}";
    QVERIFY(panel.watchJournal(QString::fromStdString(notNamed.string())).contains(".rank-"));
    const fs::path fake = m_dir / "x.rank-0";
    std::ofstream(fake) << "hello\n";
    const QString err = panel.watchJournal(QString::fromStdString(fake.string()));
    QVERIFY2(err.contains(QStringLiteral("not a SinkScope journal")), qPrintable(err));
    QCOMPARE(panel.journalWatch()->state(), JournalWatch::State::kIdle);
  }
};

QTEST_MAIN(TestJournalWatchPanel)
#include "tst_journalwatchpanel.moc"
