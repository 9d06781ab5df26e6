// SPDX-License-Identifier: Apache-2.0
// sweep and validate split over MPI ranks and resumed from their journal (app/cli/
// distributed_run.h), end to end on the random-weight model and small dataset of
// validation_fixture.h, one thread per process: a run killed mid-way (SIGKILL, the test hook
// SINKSCOPE_KILL_AFTER_UNITS) and resumed, and runs on 2 and 3 ranks (mpirun, when the CLI is
// built with MPI), give the same results as one uninterrupted process -- every CSV column and
// config value but the measured times.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_support.h"
#include "engine/config/config.h"
#include "validation_fixture.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using test::fixture;
using test::run_binary;
using test::slurp;

const char* const kGrid = "lambda=0,0.5;window=full,64;sinks=4";

std::vector<std::string> sweep_args(const fs::path& csv) {
  return {"sweep", "--grid", kGrid, "--csv", csv.string(), "--model",
          fixture().model_path.string(), "--dataset", fixture().manifest.string(),
          "--gen-tokens", "4", "--stream-chunk", "64", "--threads", "1"};
}

// The CSV without the measured-time columns (ttft_ms, tpot_ms).
std::string without_times(const std::string& csv) {
  std::istringstream in(csv);
  std::string line, out;
  std::vector<size_t> drop;
  bool header = true;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');) cells.push_back(c);
    if (header) {
      for (size_t i = 0; i < cells.size(); ++i)
        if (cells[i] == "ttft_ms" || cells[i] == "tpot_ms") drop.push_back(i);
      header = false;
    }
    for (size_t i = 0; i < cells.size(); ++i)
      if (std::find(drop.begin(), drop.end(), i) == drop.end()) out += cells[i] + ",";
    out += "\n";
  }
  return out;
}

// The baseline: one process, uninterrupted.
const std::string& reference_csv() {
  static const std::string csv = [] {
    const fs::path p = fixture().dir / "dist_reference.csv";
    const auto r = run_binary(sweep_args(p));
    EXPECT_EQ(r.status, 0) << r.err;
    return without_times(slurp(p));
  }();
  return csv;
}

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

std::string mpirun(int np, const std::string& env = "") {
  // Open MPI: ranks beyond the cores, and as root in containers / CI.
  std::string s = "mpirun --oversubscribe --allow-run-as-root -np " + std::to_string(np);
  for (const char* v : {"SINKSCOPE_KILL_AFTER_UNITS", "SINKSCOPE_KILL_RANK"})
    if (env.find(v) != std::string::npos) s += std::string(" -x ") + v;
  return env + " " + s;
}

size_t journal_units(const fs::path& base) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(base.parent_path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind(base.filename().string() + ".rank-", 0) != 0) continue;
    const std::string t = slurp(e.path());
    const size_t lines = size_t(std::count(t.begin(), t.end(), '\n'));
    n += lines > 0 ? lines - 1 : 0;
  }
  return n;
}

TEST(CliResume, AKilledSweepResumesToTheSameResults) {
  const fs::path csv = fixture().dir / "dist_killed.csv";
  const fs::path journal = fs::path(csv.string() + ".journal");
  fs::remove(csv);
  for (int r = 0; r < 4; ++r) fs::remove(journal.string() + ".rank-" + std::to_string(r));
  auto killed = run_binary(sweep_args(csv), "SINKSCOPE_KILL_AFTER_UNITS=5");
  EXPECT_NE(killed.status, 0);
  EXPECT_FALSE(fs::exists(csv)) << "no output from a killed run";
  EXPECT_EQ(journal_units(journal), 5u) << "the finished units are kept";
  // Without --resume the journal is not overwritten.
  const auto refused = run_binary(sweep_args(csv));
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("pass --resume"), std::string::npos) << refused.err;
  // Another run's settings cannot resume it.
  auto other = sweep_args(csv);
  other[2] = "lambda=0,0.25;window=full,64;sinks=4";
  other.push_back("--resume");
  const auto mismatch = run_binary(other);
  EXPECT_EQ(mismatch.status, 1);
  EXPECT_NE(mismatch.err.find("belongs to another run"), std::string::npos) << mismatch.err;
  // A second kill, then the resume completes it.
  auto args = sweep_args(csv);
  args.push_back("--resume");
  killed = run_binary(args, "SINKSCOPE_KILL_AFTER_UNITS=4");
  EXPECT_NE(killed.status, 0);
  EXPECT_EQ(journal_units(journal), 9u);
  const auto resumed = run_binary(args);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("9 of 24 done already"), std::string::npos) << resumed.err;
  EXPECT_EQ(without_times(slurp(csv)), reference_csv());
  EXPECT_EQ(journal_units(journal), 0u) << "the journal goes once the outputs are written";
}

TEST(CliResume, AKilledValidationResumesToTheSameConfig) {
  if (!config_yaml_supported()) GTEST_SKIP() << "built without yaml-cpp";
  const fs::path cfg = fixture().dir / "dist_window.yaml";
  test::write_file(cfg,
                   "inference:\n  max_context_length: 1024\n"
                   "  cache: {strategy: sliding_window, window_size: 64, sink_keep_count: 4}\n"
                   "  attention: {type: dynamic_sparse, threshold_prefill: 0.3, threshold_decode: 0.3}\n");
  auto args = [&](const fs::path& out) {
    return std::vector<std::string>{"validate", "--config", cfg.string(), "--out", out.string(),
                                    "--model", fixture().model_path.string(), "--dataset",
                                    fixture().manifest.string(), "--gen-tokens", "4",
                                    "--stream-chunk", "64", "--threads", "1"};
  };
  const fs::path ref = fixture().dir / "dist_ref.validated.yaml";
  ASSERT_EQ(run_binary(args(ref)).status, 0);
  const fs::path out = fixture().dir / "dist_resumed.validated.yaml";
  fs::remove(out);
  for (int r = 0; r < 4; ++r) fs::remove(out.string() + ".journal.rank-" + std::to_string(r));
  EXPECT_NE(run_binary(args(out), "SINKSCOPE_KILL_AFTER_UNITS=3").status, 0);
  EXPECT_FALSE(fs::exists(out));
  auto resume = args(out);
  resume.push_back("--resume");
  const auto r = run_binary(resume);
  ASSERT_EQ(r.status, 0) << r.err;
  const SinkScopeConfig a = load_config_file(ref).config, b = load_config_file(out).config;
  ASSERT_TRUE(a.validation && b.validation);
  ValidationResults ra = a.validation->results, rb = b.validation->results;
  ra.ttft_ms = rb.ttft_ms = 0;  // measured times
  ra.tpot_ms = rb.tpot_ms = 0;
  EXPECT_TRUE(ra == rb);
  EXPECT_EQ(a.validation->passed, b.validation->passed);
  EXPECT_EQ(a.inference, b.inference);
}

#ifdef SINKSCOPE_HAVE_MPI

TEST(CliMpi, TwoAndThreeRanksGiveTheResultsOfOne) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not found";
  for (int np : {2, 3}) {
    const fs::path csv = fixture().dir / ("dist_np" + std::to_string(np) + ".csv");
    const fs::path js = fixture().dir / ("dist_np" + std::to_string(np) + ".json");
    fs::remove(csv);
    auto args = sweep_args(csv);
    args.insert(args.end(), {"--json-out", js.string()});
    const auto r = run_binary(args, mpirun(np));
    ASSERT_EQ(r.status, 0) << "np " << np << ": " << r.err << r.out;
    EXPECT_NE(r.err.find("on " + std::to_string(np) + " processes"), std::string::npos) << r.err;
    EXPECT_EQ(without_times(slurp(csv)), reference_csv()) << "np " << np;
    // The provenance names the ranks and their host.
    const std::string json = slurp(js);
    EXPECT_NE(json.find(std::to_string(np) + " MPI ranks on "), std::string::npos) << json.substr(0, 400);
  }
}

TEST(CliMpi, AKilledRankThenResumeGivesTheResultsOfOne) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not found";
  const fs::path csv = fixture().dir / "dist_mpi_killed.csv";
  const fs::path journal = fs::path(csv.string() + ".journal");
  fs::remove(csv);
  for (int r = 0; r < 4; ++r) fs::remove(journal.string() + ".rank-" + std::to_string(r));
  const auto killed =
      run_binary(sweep_args(csv), mpirun(2, "SINKSCOPE_KILL_AFTER_UNITS=3 SINKSCOPE_KILL_RANK=1"));
  EXPECT_NE(killed.status, 0);
  EXPECT_FALSE(fs::exists(csv));
  EXPECT_GE(journal_units(journal), 3u);
  // Resumed on another number of ranks.
  auto args = sweep_args(csv);
  args.push_back("--resume");
  const auto resumed = run_binary(args, mpirun(3));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(without_times(slurp(csv)), reference_csv());
}

#endif  // SINKSCOPE_HAVE_MPI

}  // namespace
}  // namespace sinkscope
