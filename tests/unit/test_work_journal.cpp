// SPDX-License-Identifier: Apache-2.0
// The journal of finished units (engine/util/work_journal.h): outcomes round-trip exactly, each rank
// appends to its own file and a reader sees all of them, a torn last line is ignored and cut
// off before the next append, another run's journal is refused, a damaged middle line is named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/util/work_journal.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("sinkscope_journal_" + name + "_" +
                                                 std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

SampleOutcome outcome(int i) {
  SampleOutcome o;
  o.id = "sample-" + std::to_string(i);
  o.kind = i % 2 ? "code" : "prose";
  o.cls = i % 3 ? SampleClass::kShort : SampleClass::kPasskey;
  o.tokens = 100 + i;
  o.cmp.positions = 99 + i;
  o.cmp.kl_sum = 0.1 / 3.0 * (i + 1);  // not exactly representable in few digits
  o.cmp.kl_max = std::nextafter(0.01, 1.0);
  o.cmp.top1_agree = 97;
  o.cmp.nll_dense = 123.456789012345678;
  o.cmp.nll_variant = 1e-300;
  o.cmp.scored = 98;
  o.rouge_l = i % 2 ? NAN : 0.875;
  o.passkey_dense = true;
  o.passkey_variant = i % 2;
  o.prefill = {1000, 250, 0.5, 12.25, 64};
  o.decode = {300, 30, 0.125, 1.0 / 7.0, 16};
  o.peak_kv_bytes = int64_t(1) << 33;
  o.seconds = 1.5;
  o.ttft_ms_sum = 12.3;
  o.ttft_n = 1;
  o.tpot_ms_sum = 45.6;
  o.tpot_n = 15;
  return o;
}

void expect_same(const SampleOutcome& a, const SampleOutcome& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.cls, b.cls);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.cmp.positions, b.cmp.positions);
  EXPECT_EQ(a.cmp.kl_sum, b.cmp.kl_sum);  // bit for bit
  EXPECT_EQ(a.cmp.kl_max, b.cmp.kl_max);
  EXPECT_EQ(a.cmp.top1_agree, b.cmp.top1_agree);
  EXPECT_EQ(a.cmp.nll_dense, b.cmp.nll_dense);
  EXPECT_EQ(a.cmp.nll_variant, b.cmp.nll_variant);
  EXPECT_EQ(a.cmp.scored, b.cmp.scored);
  EXPECT_EQ(std::isnan(a.rouge_l), std::isnan(b.rouge_l));
  if (!std::isnan(a.rouge_l)) {
    EXPECT_EQ(a.rouge_l, b.rouge_l);
  }
  EXPECT_EQ(a.passkey_dense, b.passkey_dense);
  EXPECT_EQ(a.passkey_variant, b.passkey_variant);
  EXPECT_EQ(a.prefill.visited, b.prefill.visited);
  EXPECT_EQ(a.prefill.mass_bound_sum, b.prefill.mass_bound_sum);
  EXPECT_EQ(a.decode.mass_bound_sum, b.decode.mass_bound_sum);
  EXPECT_EQ(a.decode.rows, b.decode.rows);
  EXPECT_EQ(a.peak_kv_bytes, b.peak_kv_bytes);
  EXPECT_EQ(a.ttft_ms_sum, b.ttft_ms_sum);
  EXPECT_EQ(a.tpot_n, b.tpot_n);
}

TEST(WorkJournal, RanksAppendAndAReaderSeesEveryUnitExactly) {
  const fs::path base = fresh_dir("ranks") / "out.csv.journal";
  {
    JournalWriter r0(base, 0, "hostA", "fp1");
    JournalWriter r1(base, 1, "hostB", "fp1");
    r0.append(0, outcome(0));
    r1.append(1, outcome(1));
    r0.append(2, outcome(2));
  }
  EXPECT_EQ(journal_files(base).size(), 2u);
  EXPECT_EQ(count_journal_units(base), 3u);
  const auto done = read_journal(base, "fp1");
  ASSERT_EQ(done.size(), 3u);
  for (uint64_t u = 0; u < 3; ++u) expect_same(done.at(u).outcome, outcome(int(u)));
  EXPECT_EQ(done.at(1).rank, 1);
  EXPECT_EQ(done.at(1).host, "hostB");
  remove_journal(base);
  EXPECT_TRUE(journal_files(base).empty());
}

TEST(WorkJournal, ATornLastLineIsIgnoredAndCutOff) {
  const fs::path base = fresh_dir("torn") / "j";
  {
    JournalWriter w(base, 0, "h", "fp");
    w.append(0, outcome(0));
    w.append(1, outcome(1));
  }
  // A process killed mid-write: half a line at the end.
  {
    std::ofstream f(journal_file(base, 0), std::ios::app | std::ios::binary);
    f << R"({"unit":2,"rank":0,"host":"h","outcome":{"id":"sam)";
  }
  auto done = read_journal(base, "fp");
  EXPECT_EQ(done.size(), 2u);
  EXPECT_EQ(count_journal_units(base), 2u);
  {
    JournalWriter w(base, 0, "h", "fp");  // the resumed run's writer repairs the file
    w.append(2, outcome(2));
  }
  done = read_journal(base, "fp");
  ASSERT_EQ(done.size(), 3u);
  expect_same(done.at(2).outcome, outcome(2));
}

TEST(WorkJournal, AnotherRunsJournalAndDamagedLinesAreNamed) {
  const fs::path base = fresh_dir("other") / "j";
  {
    JournalWriter w(base, 0, "h", "fp-a");
    w.append(0, outcome(0));
    w.append(1, outcome(1));
  }
  try {
    read_journal(base, "fp-b");
    FAIL() << "another run's journal was read";
  } catch (const JournalError& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to another run"), std::string::npos) << e.what();
  }
  EXPECT_THROW(JournalWriter(base, 0, "h", "fp-b"), JournalError);
  // A damaged line in the middle (not a torn end) is an error naming file and line.
  const fs::path f = journal_file(base, 0);
  std::ifstream in(f);
  std::string header, l1, l2;
  std::getline(in, header);
  std::getline(in, l1);
  std::getline(in, l2);
  in.close();
  std::ofstream(f, std::ios::trunc) << header << "\n" << l1.substr(0, 20) << "\n" << l2 << "\n";
  try {
    read_journal(base, "fp-a");
    FAIL() << "a damaged line was accepted";
  } catch (const JournalError& e) {
    EXPECT_NE(std::string(e.what()).find(f.string() + ":2: damaged journal line"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sinkscope
