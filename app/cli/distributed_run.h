// SPDX-License-Identifier: Apache-2.0
// The work units of one validate / sweep run (samples, or point x sample pairs), split among
// the world's processes (app/cli/world.h) and journaled (engine/util/work_journal.h):
//   1. rank 0 reads the journal when resuming (a journal left without --resume is an error, so
//      nothing of an unfinished run is overwritten) and tells every rank which units are done;
//   2. the units still to run are dealt out in order, unit k of them to rank k % size;
//   3. each rank runs its units, appending each outcome to its own journal file as it finishes;
//   4. rank 0 gathers every rank's outcomes and, with the resumed ones, has all of them.
// The journal is removed by the caller once its outputs are written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "app/cli/world.h"
#include "engine/util/work_journal.h"

namespace sinkscope::cli {

class DistributedRun {
 public:
  // Throws UsageError for a journal found without --resume, JournalError for another run's.
  DistributedRun(const World& world, std::filesystem::path journal, std::string fingerprint,
                 bool resume, const std::vector<uint64_t>& units, JournalInfo info);

  bool mine(uint64_t unit) const { return m_mine.count(unit) > 0; }
  size_t resumed() const { return m_done.size(); }   // units the journal had (every rank)
  size_t to_run() const { return m_remaining; }      // units still to run (all ranks)
  size_t mine_count() const { return m_mine.size(); }
  // A finished unit of this rank: journaled (fsynced) and kept for the gather.
  void record(uint64_t unit, const SampleOutcome& o);
  // Units finished by every rank so far (the journal files), for rank 0's progress line.
  size_t finished_everywhere() const;
  // Collective: every rank's outcomes to rank 0. Rank 0 gets every unit's outcome (resumed
  // ones included); the other ranks an empty map.
  std::map<uint64_t, SampleOutcome> gather();
  const std::filesystem::path& journal() const { return m_journal; }
  // After gather(), on rank 0: the hosts of the ranks, each once, in rank order.
  const std::vector<std::string>& hosts() const { return m_hosts; }

 private:
  const World& m_world;
  std::filesystem::path m_journal;
  std::map<uint64_t, JournalEntry> m_resumed;  // rank 0
  std::set<uint64_t> m_done, m_mine;
  size_t m_remaining = 0;
  std::unique_ptr<JournalWriter> m_writer;
  std::string m_ran;  // this rank's outcomes, one "unit<TAB>json" line each
  uint64_t m_recorded = 0;
  std::vector<std::string> m_hosts;
};

}  // namespace sinkscope::cli
