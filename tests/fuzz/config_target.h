// SPDX-License-Identifier: Apache-2.0
// Fuzz body for the config parser: parse_config() must never throw, every problem must carry a
// message, and a config that parsed without errors must survive format_config() -> parse_config()
// unchanged and without errors (the writer's promise in engine/config/config.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/config/config.h"
#include "tests/fuzz/fuzz_check.h"

namespace sinkscope::fuzz {

inline void config_one_input(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ConfigParseResult r = parse_config(text);
  for (const ConfigProblem& p : r.problems) {
    check(!p.message.empty(), "a problem without a message (key '" + p.key + "')");
    check(p.line >= 0 && p.column >= 0, "negative line/column for '" + p.key + "'");
    (void)format_problem(p, "fuzz.yaml");
  }
  if (!r.ok()) return;
  for (const ConfigProblem& p : check_config(r.config))
    check(p.severity != Severity::kError,
          "parse_config accepted a config that check_config rejects: " + p.key + ": " + p.message);
  (void)to_attention_settings(r.config);
  (void)request_token_limit(r.config);
  const std::string written = format_config(r.config);
  const ConfigParseResult again = parse_config(written);
  check(again.ok(), "format_config wrote a config that does not parse back:\n" + written);
  check(again.config == r.config, "format_config -> parse_config changed the config:\n" + written);
  check(format_config(again.config) == written, "format_config is not deterministic");
}

}  // namespace sinkscope::fuzz
