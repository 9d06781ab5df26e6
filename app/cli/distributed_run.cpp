// SPDX-License-Identifier: Apache-2.0
#include "app/cli/distributed_run.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <sstream>

#include "app/cli/args.h"
#include "engine/util/json_io.h"

namespace sinkscope::cli {

namespace fs = std::filesystem;

DistributedRun::DistributedRun(const World& world, fs::path journal, std::string fingerprint,
                               bool resume, const std::vector<uint64_t>& units,
                               JournalInfo info)
    : m_world(world), m_journal(std::move(journal)) {
  // Rank 0 decides what is done; a failure here is thrown on rank 0 only and the caller ends
  // every rank (world_abort).
  std::string done_text;
  if (world.rank == 0) {
    if (!resume && !journal_files(m_journal).empty())
      throw UsageError("a journal of an unfinished run is at " + m_journal.string() +
                       ".rank-*: pass --resume to complete it (same arguments), or remove it");
    if (resume) m_resumed = read_journal(m_journal, fingerprint);
    for (const auto& [unit, e] : m_resumed) done_text += std::to_string(unit) + "\n";
  }
  done_text = world_broadcast(done_text);
  std::istringstream in(done_text);
  for (uint64_t u; in >> u;) m_done.insert(u);
  size_t k = 0;
  for (uint64_t u : units) {
    if (m_done.count(u)) continue;
    if (int(k % size_t(world.size)) == world.rank) m_mine.insert(u);
    ++k;
  }
  m_remaining = k;
  // Every rank's journal file exists from the start (a header only until a unit finishes).
  info.units = units.size();
  m_writer = std::make_unique<JournalWriter>(m_journal, world.rank, world.host,
                                             std::move(fingerprint), info);
}

void DistributedRun::record(uint64_t unit, const SampleOutcome& o) {
  const std::string text = dump_json(outcome_to_json(o));  // once, for the journal and the gather
  m_writer->append_json(unit, text);
  m_ran += std::to_string(unit) + "\t" + text + "\n";
  ++m_recorded;
  // Test hook (tests/unit/test_cli_distributed.cpp): SINKSCOPE_KILL_AFTER_UNITS=N kills this
  // process with SIGKILL once it has journaled N units -- a crash mid-run -- on every rank, or
  // only on rank SINKSCOPE_KILL_RANK.
  if (const char* n = std::getenv("SINKSCOPE_KILL_AFTER_UNITS")) {
    const char* r = std::getenv("SINKSCOPE_KILL_RANK");
    if (m_recorded >= std::strtoull(n, nullptr, 10) && (!r || std::atoi(r) == m_world.rank))
      ::raise(SIGKILL);
  }
}

size_t DistributedRun::finished_everywhere() const {
  return count_journal_units(m_journal);  // resumed units are in the files too
}

std::map<uint64_t, SampleOutcome> DistributedRun::gather() {
  // Each rank's text: its host on the first line, then its outcomes.
  const std::vector<std::string> all = world_gather(m_world.host + "\n" + m_ran);
  std::map<uint64_t, SampleOutcome> out;
  if (m_world.rank != 0) return out;
  for (auto& [unit, e] : m_resumed) out.emplace(unit, e.outcome);
  for (const std::string& text : all) {
    size_t pos = text.find('\n') + 1;
    const std::string host = text.substr(0, pos - 1);
    if (std::find(m_hosts.begin(), m_hosts.end(), host) == m_hosts.end()) m_hosts.push_back(host);
    while (pos < text.size()) {
      const size_t nl = text.find('\n', pos);
      const size_t tab = text.find('\t', pos);
      const uint64_t unit = std::stoull(text.substr(pos, tab - pos));
      out.emplace(unit, outcome_from_json(Json::parse(
                            std::string_view(text).substr(tab + 1, nl - tab - 1))));
      pos = nl + 1;
    }
  }
  return out;
}

}  // namespace sinkscope::cli
