// SPDX-License-Identifier: Apache-2.0
// The journal of a long run's finished work units (a validation's samples, a sweep's point x
// sample pairs): one JSON line per unit, appended and fsynced as the unit finishes, so that a
// run that is killed keeps what finished and a later run with --resume completes it with the
// same results.
//
// Each process (MPI rank) appends to its own file, BASE.rank-R; a resumed run reads every
// BASE.rank-* file, whatever the number of processes was. The first line of a file is a header
// holding the run's fingerprint (a hash of what the results depend on: command, configs, grid,
// dataset, model, options); a file with another fingerprint is refused, naming what to do. A
// torn last line (a process killed mid-write) is ignored and cut off before the next append.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/json_io.h"
#include "engine/eval/validation.h"

namespace sinkscope {

class JournalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct JournalEntry {
  uint64_t unit = 0;  // the run's numbering (a sweep: point * samples + sample)
  int rank = 0;       // the process that ran it
  std::string host;
  SampleOutcome outcome;
};

// What a journal's header says about its run, for progress readers (the GUI's sweep view).
struct JournalInfo {
  std::string command;  // "sweep" | "validate"
  std::string label;    // the grid, or the config file
  uint64_t units = 0;   // all units of the run
};

std::filesystem::path journal_file(const std::filesystem::path& base, int rank);
// BASE of a BASE.rank-R path; empty when the name does not end in .rank-<number>.
std::filesystem::path journal_base(const std::filesystem::path& rank_file);
// The existing BASE.rank-* files, by rank.
std::vector<std::filesystem::path> journal_files(const std::filesystem::path& base);

// Every finished unit of every BASE.rank-* file (a unit recorded twice keeps its first entry).
// Throws JournalError naming the file (and line) for another run's journal or a damaged line
// other than a file's last.
std::map<uint64_t, JournalEntry> read_journal(const std::filesystem::path& base,
                                              const std::string& fingerprint);

// Units recorded so far in every BASE.rank-* file (lines after the headers; for progress while
// other processes append).
size_t count_journal_units(const std::filesystem::path& base);

// A run's progress from its journal files, while its processes append to them.
struct JournalProgress {
  JournalInfo info;          // from the first header
  uint64_t done = 0;         // finished units (every file)
  int processes = 0;         // journal files
  std::vector<std::string> hosts;
  double started = 0;        // unix seconds: the earliest header
  double last = 0;           // unix seconds: the latest finished unit (0: none yet)
  uint64_t done_at_start = 0;  // units the newest start found done (a resumed run)
  // Seconds left at the rate since the newest start; NaN until a unit has finished there.
  double eta_s = NAN;
};
// Throws JournalError when there is no BASE.rank-* file or a header is not a journal's.
JournalProgress journal_progress(const std::filesystem::path& base, double now_unix_s);

// Removes every BASE.rank-* file (after the run's outputs are written).
void remove_journal(const std::filesystem::path& base);

class JournalWriter {
 public:
  // Opens BASE.rank-R for appending: a new file gets the header; an existing one must carry the
  // same fingerprint (JournalError otherwise) and loses a torn last line.
  JournalWriter(const std::filesystem::path& base, int rank, std::string host,
                std::string fingerprint, const JournalInfo& info = {});
  // One line, written whole and fsynced before returning. Throws std::system_error naming the
  // file when it cannot be written.
  void append(uint64_t unit, const SampleOutcome& o);
  // The same with the outcome already serialised (dump_json(outcome_to_json(o))).
  void append_json(uint64_t unit, std::string_view outcome_json);
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
  int m_rank;
  std::string m_host;
};

// A SampleOutcome as JSON and back; numbers round-trip exactly (NaN as null).
Json outcome_to_json(const SampleOutcome& o);
SampleOutcome outcome_from_json(const Json& v);

}  // namespace sinkscope
