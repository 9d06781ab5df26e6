// SPDX-License-Identifier: Apache-2.0
#include <QTest>

#include "app/gui/models/request_queue.h"

#include <atomic>
#include <thread>
#include <vector>

using sinkscope::gui::RequestQueue;

class TestRequestQueue : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void sameTagReplacesQueuedJob() {
    RequestQueue q;
    int ran = 0;
    uint64_t replaced = 0;
    const uint64_t a = q.post(QStringLiteral("run"), [&](uint64_t) { ran = 1; });
    q.post(QStringLiteral("model"), [&](uint64_t) {});
    const uint64_t b = q.post(QStringLiteral("run"), [&](uint64_t) { ran = 2; }, &replaced);
    QCOMPARE(replaced, a);
    QVERIFY(b > a);
    QCOMPARE(q.size(), size_t(2));
    auto job = q.take();
    QVERIFY(job);
    QCOMPARE(job->tag, QStringLiteral("run"));  // keeps its place in line
    QCOMPARE(job->id, b);
    job->work(job->id);
    QCOMPARE(ran, 2);
    QCOMPARE(q.runningTag(), QStringLiteral("run"));
    q.finish();
    QVERIFY(q.runningTag().isEmpty());
  }
  void manyPostsCoalesce() {
    RequestQueue q;
    for (int i = 0; i < 100; ++i) q.post(QStringLiteral("run"), [](uint64_t) {});
    QCOMPARE(q.size(), size_t(1));
  }
  void removeAndClear() {
    RequestQueue q;
    const uint64_t a = q.post(QStringLiteral("a"), [](uint64_t) {});
    q.post(QStringLiteral("b"), [](uint64_t) {});
    QCOMPARE(q.removeTag(QStringLiteral("a")), a);  // the dropped job's id, for its cancel signal
    QCOMPARE(q.removeTag(QStringLiteral("a")), uint64_t(0));
    QVERIFY(q.hasTag(QStringLiteral("b")));
    q.clear();
    QVERIFY(!q.take());
  }
  // Regression: cancel() used to read runningTag() and raise the flag in two steps, so a job
  // that started in between (after the aimed-at one finished) could be cancelled instead.
  void cancelOnlyHitsTheRunningJob() {
    RequestQueue q;
    std::atomic<bool> cancel{false};
    q.setCancelFlag(&cancel);
    QVERIFY(!q.cancelRunning());  // nothing runs
    QVERIFY(!cancel);
    q.post(QStringLiteral("run"), [](uint64_t) {});
    q.post(QStringLiteral("model"), [](uint64_t) {});
    QVERIFY(!q.cancelRunning());  // queued, not running
    QVERIFY(!cancel);
    QVERIFY(q.take());
    QVERIFY(!q.cancelRunning(QStringLiteral("model")));  // other tag
    QVERIFY(q.cancelRunning(QStringLiteral("run")));
    QVERIFY(cancel);
    q.finish();
    QVERIFY(!q.cancelRunning(QStringLiteral("run")));  // between jobs: nothing to hit
    QVERIFY(q.take());  // the next job starts with the flag lowered
    QVERIFY(!cancel);
    QVERIFY(!q.cancelRunning(QStringLiteral("run")));
    QVERIFY(!cancel);
    QVERIFY(q.cancelRunning());
    QVERIFY(cancel);
  }
  // Posts, takes and cancels from several threads at once (run under TSan by scripts/test.sh):
  // every id is taken at most once, and all survivors are drained.
  void concurrentPostTakeCancel() {
    RequestQueue q;
    std::atomic<bool> cancel{false};
    q.setCancelFlag(&cancel);
    std::atomic<bool> stop{false};
    std::atomic<int> ran{0};
    std::thread engine([&] {
      while (!stop.load() || q.size() > 0) {
        if (auto job = q.take()) {
          job->work(job->id);
          q.finish();
        } else {
          std::this_thread::yield();
        }
      }
    });
    std::vector<std::thread> posters;
    for (int t = 0; t < 3; ++t) {
      posters.emplace_back([&, t] {
        const QString tags[] = {QStringLiteral("run"), QStringLiteral("other"), QStringLiteral("t%1").arg(t)};
        for (int i = 0; i < 2000; ++i) {
          q.post(tags[i % 3], [&](uint64_t) { ran.fetch_add(1); });
          if (i % 7 == 0) q.cancelRunning(tags[i % 2]);
          if (i % 11 == 0) q.removeTag(QStringLiteral("other"));
          (void)q.runningTag();
          (void)q.hasTag(tags[2]);
        }
      });
    }
    for (auto& p : posters) p.join();
    stop = true;
    engine.join();
    QCOMPARE(q.size(), size_t(0));
    QVERIFY(q.runningTag().isEmpty());
    QVERIFY(ran.load() >= 1);
    QVERIFY(ran.load() <= 3 * 2000);
  }
};

QTEST_GUILESS_MAIN(TestRequestQueue)
#include "tst_requestqueue.moc"
