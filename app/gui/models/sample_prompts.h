// SPDX-License-Identifier: Apache-2.0
// The sample prompts shipped in the resources (resources/prompts/, licences in its README.md), in
// the order the workbench offers them: the long documents first (1.7K-7.6K tokens, so the first
// run shows sinks, a sliding window and skipped tiles), shortest of them first, then the short
// prompts. The first entry is what a fresh start (no saved settings) opens with: the shortest
// long document, because the first run on a CPU (dense baseline + variant prefill, decode, map)
// takes tens of seconds of CPU time at 2K tokens and grows faster than linearly beyond.
#pragma once

#include <QList>
#include <QString>

namespace sinkscope::gui {

struct SamplePrompt {
  QString resource;  // Qt resource path, e.g. ":/prompts/gpl-3.0.txt"
  QString title;     // e.g. "GNU GPL v3"
  QString kind;      // prose | code | legal | technical docs | short
  QString source;    // where the text comes from and its licence (the combo box tooltip)
  // Size in tokens of the default model's tokenizer (SmolLM2, BPE), measured on the trimmed text
  // without the chat template; tests/gui/tst_sampleprompts.cpp checks it stays within 10 %.
  int tokens = 0;
  bool isLong() const { return tokens >= kLongTokens; }
  // "GNU GPL v3 (legal, ~7.6K tokens)"; short prompts: "attention-sinks (short, 35 tokens)".
  // Long: enough tokens for several 64-key tiles per query tile and a 256-token window.
  QString displayName() const;
  static constexpr int kLongTokens = 1500;
};

// The offered list, long documents first (see above).
QList<SamplePrompt> samplePrompts();
// The resource a fresh start opens with: the first entry of samplePrompts().
QString defaultSamplePrompt();
// The text as the workbench uses it (UTF-8, trimmed); empty when the resource cannot be read.
QString readSamplePrompt(const QString& resource);

}  // namespace sinkscope::gui
