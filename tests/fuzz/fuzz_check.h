// SPDX-License-Identifier: Apache-2.0
// Shared by the fuzz targets and their gtest replay (tests/unit/test_malformed_corpus.cpp).
// A target body returns normally for any input the engine handles correctly -- including inputs
// it rejects with its own documented error -- and throws PropertyViolation when a property the
// engine promises does not hold. Any other exception escaping a body is itself a bug (e.g.
// std::bad_alloc from a hostile length, std::out_of_range from an unchecked index).
#pragma once

#include <stdexcept>
#include <string>

namespace sinkscope::fuzz {

class PropertyViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

inline void check(bool ok, const std::string& what) {
  if (!ok) throw PropertyViolation(what);
}

}  // namespace sinkscope::fuzz
