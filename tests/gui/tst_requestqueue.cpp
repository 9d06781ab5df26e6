// SPDX-License-Identifier: Apache-2.0
#include <QTest>

#include "app/gui/models/request_queue.h"

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
    q.post(QStringLiteral("a"), [](uint64_t) {});
    q.post(QStringLiteral("b"), [](uint64_t) {});
    QVERIFY(q.removeTag(QStringLiteral("a")));
    QVERIFY(!q.removeTag(QStringLiteral("a")));
    QVERIFY(q.hasTag(QStringLiteral("b")));
    q.clear();
    QVERIFY(!q.take());
  }
};

QTEST_GUILESS_MAIN(TestRequestQueue)
#include "tst_requestqueue.moc"
