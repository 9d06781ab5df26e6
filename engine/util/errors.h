// SPDX-License-Identifier: Apache-2.0
// The engine's run-time errors, apart from the backend interface so that the parts below it
// (the KV cache, the page plan) can throw them without depending on it.
#pragma once

#include <stdexcept>

namespace sinkscope {

// A forward or cache operation that cannot work as asked (a budget, a shape, a device error);
// the message names what is wrong.
class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The caller's cancel flag was raised; the backend stays usable.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

}  // namespace sinkscope
