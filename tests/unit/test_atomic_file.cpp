// SPDX-License-Identifier: Apache-2.0
// Atomic file replacement: the new content appears whole, and a failure (or a crash) at any
// stage before the rename leaves the old file exactly as it was.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "base/atomic_file.h"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("sinkscope_atomic_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  static std::string read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  static void write_plain(const fs::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary) << s;
  }
  // Files in the directory other than `keep`.
  int strays(const fs::path& keep) const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(m_dir))
      if (e.path().filename() != keep.filename()) ++n;
    return n;
  }
  fs::path m_dir;
};

const std::string kOld = "old: content\n";
const std::string kNew(100000, 'n');  // large enough for a real partial write

}  // namespace

TEST_F(AtomicFile, CreatesANewFile) {
  const fs::path p = m_dir / "a.yaml";
  write_file_atomic(p, "hello\n");
  EXPECT_EQ(read(p), "hello\n");
  EXPECT_EQ(strays(p), 0);
  write_file_atomic(p, "");  // empty content is a valid file
  EXPECT_TRUE(fs::exists(p));
  EXPECT_EQ(read(p), "");
}

TEST_F(AtomicFile, ReplacesAndKeepsPermissions) {
  const fs::path p = m_dir / "a.yaml";
  write_plain(p, kOld);
  ASSERT_EQ(::chmod(p.c_str(), 0640), 0);
  write_file_atomic(p, kNew);
  EXPECT_EQ(read(p), kNew);
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(strays(p), 0);
}

TEST_F(AtomicFile, FailureAtAnyStageLeavesTheOldFileIntact) {
  const fs::path p = m_dir / "a.yaml";
  for (AtomicWriteStage stage : {AtomicWriteStage::kCreated, AtomicWriteStage::kPartialWrite,
                                 AtomicWriteStage::kWritten, AtomicWriteStage::kSynced}) {
    write_plain(p, kOld);
    fs::path seen_temp;
    AtomicWriteOptions o;
    o.fault_hook = [&](AtomicWriteStage s, const fs::path& temp) {
      seen_temp = temp;
      EXPECT_EQ(temp.parent_path(), p.parent_path());  // same directory: rename is atomic
      if (s == AtomicWriteStage::kPartialWrite) {
        const auto size = fs::file_size(temp);
        EXPECT_GT(size, 0u);
        EXPECT_LT(size, kNew.size());
      }
      if (s == stage) throw std::runtime_error("simulated failure");
    };
    EXPECT_THROW(write_file_atomic(p, kNew, o), std::runtime_error);
    EXPECT_EQ(read(p), kOld) << int(stage);
    EXPECT_FALSE(fs::exists(seen_temp)) << "temporary file left behind at stage " << int(stage);
    EXPECT_EQ(strays(p), 0);
  }
}

TEST_F(AtomicFile, FailureWithoutAnOldFileLeavesNothing) {
  const fs::path p = m_dir / "new.yaml";
  AtomicWriteOptions o;
  o.fault_hook = [](AtomicWriteStage s, const fs::path&) {
    if (s == AtomicWriteStage::kWritten) throw std::runtime_error("simulated failure");
  };
  EXPECT_THROW(write_file_atomic(p, kNew, o), std::runtime_error);
  EXPECT_FALSE(fs::exists(p));
  EXPECT_EQ(strays(p), 0);
}

TEST_F(AtomicFile, CrashMidWriteLeavesTheOldFileIntact) {
  // A real crash: the child process dies half-way through writing. Only the temporary file may
  // remain (nothing can clean up after a crash); the target is untouched.
  const fs::path p = m_dir / "a.yaml";
  write_plain(p, kOld);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    AtomicWriteOptions o;
    o.fault_hook = [](AtomicWriteStage s, const fs::path&) {
      if (s == AtomicWriteStage::kPartialWrite) ::_exit(7);
    };
    write_file_atomic(p, kNew, o);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_EQ(read(p), kOld);
  // The next write succeeds regardless of the leftover.
  write_file_atomic(p, "after\n");
  EXPECT_EQ(read(p), "after\n");
}

TEST_F(AtomicFile, FollowsSymlinks) {
  const fs::path target = m_dir / "real.yaml";
  const fs::path link = m_dir / "link.yaml";
  write_plain(target, kOld);
  fs::create_symlink("real.yaml", link);
  write_file_atomic(link, "via link\n");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read(target), "via link\n");
}

TEST_F(AtomicFile, ErrorsNameThePath) {
  try {
    write_file_atomic(m_dir / "missing" / "a.yaml", "x");
    FAIL() << "expected an error";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_file_atomic(m_dir, "x"), std::system_error);  // a directory
  EXPECT_THROW(write_file_atomic("", "x"), std::system_error);
}

TEST_F(AtomicFile, StreamingWriterAppearsOnlyOnCommit) {
  const fs::path p = m_dir / "big.bin";
  write_plain(p, kOld);
  {
    AtomicFileWriter w(p);
    for (int i = 0; i < 10; ++i) w.write(kNew);
    EXPECT_EQ(w.bytes_written(), 10 * kNew.size());
    EXPECT_TRUE(fs::exists(w.temp_path()));
    EXPECT_EQ(read(p), kOld);  // not yet
    // Dropped without commit (as on an exception): the temporary goes, the old file stays.
  }
  EXPECT_EQ(read(p), kOld);
  EXPECT_EQ(strays(p), 0);
  AtomicFileWriter w(p);
  w.write(kNew);
  w.write("tail");
  w.commit();
  EXPECT_EQ(read(p), kNew + "tail");
  EXPECT_EQ(strays(p), 0);
  EXPECT_THROW(w.write("more"), std::system_error);  // committed: closed
}
