// SPDX-License-Identifier: Apache-2.0
// A worker thread -> GUI thread hand-off: push() queues a function under a mutex, the owning
// QObject posts its delivery slot, which runs the queued functions in order on its thread. The
// data crosses threads under this mutex rather than inside Qt's event queue, so ThreadSanitizer
// can check the hand-off (Qt is not instrumented). A member of the QObject it delivers to:
// deliveries posted to that object are dropped with it, so nothing runs after it is gone.
#pragma once

#include <deque>
#include <functional>
#include <mutex>

namespace sinkscope::gui {

class GuiOutbox {
 public:
  // On any thread: queues fn. The owner then posts its own delivery slot, a member function
  // (QMetaObject::invokeMethod(owner, &Owner::deliver, Qt::QueuedConnection)): a posted lambda
  // would carry its captures through Qt's queue, where ThreadSanitizer cannot see the hand-off.
  void push(std::function<void()> fn) {
    std::lock_guard lock(m_mutex);
    m_queue.push_back(std::move(fn));
  }

  // On the owner's thread: runs what is queued. One pass may find several functions (or none,
  // when an earlier pass took them); they are taken one at a time so a receiver that spins the
  // event loop keeps their order.
  void deliver() {
    for (;;) {
      std::function<void()> fn;
      {
        std::lock_guard lock(m_mutex);
        if (m_queue.empty()) return;
        fn = std::move(m_queue.front());
        m_queue.pop_front();
      }
      fn();
    }
  }

 private:
  std::mutex m_mutex;
  std::deque<std::function<void()>> m_queue;
};

}  // namespace sinkscope::gui
